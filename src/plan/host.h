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
 *   memory (hbm_bytes)              / N
 *   the threads level's bandwidth   x min(1, cores / N) (a collective's
 *                                   copies run on each device's own thread)
 *   the threads level's devices     N, when it is the only level (one
 *                                   instance holds the mesh)
 *
 * and past the cores (N k > cores) a device that waits gives its core to
 * another, so a step is the larger of its work at the shared rate and its
 * critical path at an unshared core's (mt__plan_host_time_share).
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

/* One of `devices` thread devices on the host `host` describes (its
 * innermost level MT_LINK_THREADS, `devices` on it the host's cores), each
 * running the kernel threads mt__plan_host_threads gives for `threads`,
 * into *out, by the rule above; a description whose innermost level is not
 * MT_LINK_THREADS is copied as it is. MT_EINVAL, naming the value, for
 * devices < 1, threads < 0, or a threads level of no cores. */
mt_status mt__plan_host_devices(const mt_hardware *host, int devices, int threads,
                                mt_hardware *out);

/* A step planned on mt__plan_host_devices' description of `devices` thread
 * devices of `threads` kernel threads in all on `cores` cores, corrected
 * for time-sharing when the devices' threads outnumber the cores (else r
 * is left as it is): step = max(compute + comm_exposed + optimizer_step,
 * step x cores / (devices x k)), the bubble what the step has beyond that
 * work, tokens/s, MFU and HFU scaled with the step. The planner applies it
 * to each result on a threads host (host.c says why). */
void mt__plan_host_time_share(int cores, int devices, int threads, mt_plan_result *r);

#endif /* MT_PLAN_HOST_H */
