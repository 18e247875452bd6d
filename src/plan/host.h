/*
 * plan/host.h — thread devices sharing one host (host.c): the planner's
 * view of one device when a mesh of N threads runs on this machine's cores
 * (mt_hardware_load's machine file, one MT_LINK_THREADS level).
 *
 * A machine file describes the whole host: its FLOP/s and memory bandwidth
 * on all cores, its threads transport's all-reduce between two devices. A
 * mesh of N thread devices, each running k kernel threads (the trainer's
 * rule: threads / N, at least 1; all the cores / N when threads is 0),
 * shares it. The rule (host.c's comment says why):
 *
 *   share = k / max(cores, N k)     the cores a device's kernels get, over
 *                                   the host's (time-shared past the cores)
 *   FLOP/s, memory bandwidth        x share (linear in the cores)
 *   gemm_fraction                   a kernel thread's sgemm while `busy` =
 *                                   min(N k, cores) threads run at once:
 *                                   thread_gemm_fraction at 1, the host's (each
 *                                   core its own) at cores, linear between (the
 *                                   host's when not measured)
 *   memory (hbm_bytes)              / N
 *   the threads level's bandwidth   x min(1, cores / N) (a collective's
 *                                   copies run on each device's own thread)
 *   the threads level's devices     N, when it is the only level (one
 *                                   instance holds the mesh)
 *
 * Past the cores, every device of an SPMD step computes at once, so each
 * runs at its share. A pipeline's devices idle in its bubbles, and the
 * threads transport's waits sleep there after a few yields (comm/wait.c),
 * leaving their share to the others: its schedule is simulated with
 * processor sharing (mt_schedule_simulate_shared, on mt__plan_host_slots
 * devices at full speed at once). That plans the time-shared pipelines of
 * test_plan_validate fast (0.73-0.85 of their steps, 2026-12-04, Zen 5);
 * the static share (every device always at its share) planned them slow
 * (1.03-1.33): the steps took more CPU time than the devices' planned work.
 *
 * A description without an innermost MT_LINK_THREADS level (a GPU's, a
 * TPU's) is copied unchanged: its devices are chips, not threads.
 */
#ifndef MT_PLAN_HOST_H
#define MT_PLAN_HOST_H

#include "meshtrain/plan.h"

/* The kernel threads each of `devices` thread devices runs when the
 * trainer is given `threads` in all (mt_train_config.threads; 0: all of
 * the host's `cores`): threads / devices, at least 1. */
int mt__plan_host_threads(int cores, int devices, int threads);

/* The fraction of the host's compute one device gets: k / max(cores,
 * devices x k), k = mt__plan_host_threads(cores, devices, threads). */
double mt__plan_host_share(int cores, int devices, int threads);

/* How many of `devices` thread devices (kernel threads as
 * mt__plan_host_threads gives for `threads`) the threads host `host` runs
 * at full speed at once: cores / k when the devices' threads outnumber the
 * cores (time-shared: a pipeline's schedule is then simulated on them,
 * mt_schedule_simulate_shared); 0 when they fit the cores or the
 * description is not a threads host. */
double mt__plan_host_slots(const mt_hardware *host, int devices, int threads);

/* The GEMM fraction of a device's kernel threads while `busy` kernel threads
 * run at once on the threads host `host` (levels[0].devices its cores), by
 * the rule above. */
double mt__plan_host_gemm_fraction(const mt_hardware *host, int busy);

/* One of `devices` thread devices on the host `host` describes (its
 * innermost level MT_LINK_THREADS, `devices` on it the host's cores), each
 * running the kernel threads mt__plan_host_threads gives for `threads`,
 * into *out, by the rule above; a description whose innermost level is not
 * MT_LINK_THREADS is copied as it is. MT_EINVAL, naming the value, for
 * devices < 1, threads < 0, or a threads level of no cores. */
mt_status mt__plan_host_devices(const mt_hardware *host, int devices, int threads,
                                mt_hardware *out);

#endif /* MT_PLAN_HOST_H */
