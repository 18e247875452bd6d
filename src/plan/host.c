/*
 * host.c — N thread devices on one host's cores (plan/host.h has the rule).
 *
 * Why this rule:
 *   - The machine file's figures are the host's, every core at once (the
 *     probe's "all"): sgemm, the FMA peak, STREAM's triad. A thread device
 *     computes on its own kernel threads only, k of them (train/devices.c:
 *     threads / devices, at least 1), so while the devices' threads fit the
 *     cores (N k <= cores) a device has k cores to itself, k / cores of the
 *     host. Past the cores the system time-shares them: N devices of k
 *     threads on `cores` cores each get cores / (N k) of a core per thread,
 *     1 / N of the host. Both are k / max(cores, N k).
 *   - GEMMs: the engine splits a product over a device's k threads itself
 *     (Open BLAS on one thread each), so a device's products run as k
 *     one-thread sgemms, at the same time as the other devices', on
 *     operands the ops before them wrote, which a step's working set has
 *     pushed out of the caches. The machine file measures just that
 *     (sgemm_cold_gflops): one thread alone (thread_gemm_fraction) and
 *     every core its own at once (gemm_fraction). The rate a thread gets
 *     depends on how many run: `busy` = min(N k, cores), linear between.
 *     On the 2-core Zen 5 of 2026-12-04 (256^3): from cache one thread
 *     100.8-103.8 GFLOP/s, Open BLAS's two threads on one sgemm 148-177;
 *     cold one thread 90, each core its own 178 (89 a core). The trainer's
 *     products ran at 91-95 a thread in test_plan_validate's 1- and 2-device
 *     layouts (device 0's ops); planned with the sgemm from cache (Open
 *     BLAS's threads for one device, one thread's for two), those layouts
 *     came out at 1.03-1.16 and 0.82-0.89 of their steps, with the cold
 *     sgemm at 0.90-1.01.
 *   - Memory bandwidth goes by the same share: the devices run one SPMD
 *     program, so their memory-bound kernels stream at the same time and
 *     split the host's triad between them. (A lone device on fewer threads
 *     than cores would get more than its share of a bandwidth that does not
 *     scale with the cores; the validation runs one device on every core.)
 *   - The threads transport's collectives are copies each device's own
 *     thread makes through shared memory; the probe measured two devices,
 *     each on a core of its own. Past the cores the copies time-share them
 *     too: a device's egress x cores / N. Its latency is kept as measured.
 *   - Memory: the devices allocate from the host's one memory; each of N
 *     gets 1/N of it for the planner's out-of-memory check.
 */
#include "plan/host.h"

#include <string.h>

double mt__plan_host_gemm_fraction(const mt_hardware *host, int busy) {
    const int cores = host->n_levels > 0 ? host->levels[0].devices : 1;
    const double one = host->thread_gemm_fraction, all = host->gemm_fraction;
    if (one <= 0 || cores <= 1 || busy >= cores) return all;
    if (busy <= 1) return one;
    return one + (all - one) * (double)(busy - 1) / (double)(cores - 1);
}

int mt__plan_host_threads(int cores, int devices, int threads) {
    if (devices < 1) devices = 1;
    if (cores < 1) cores = 1;
    if (threads > 0) return threads >= devices ? threads / devices : 1;
    return cores >= devices ? cores / devices : 1;
}

double mt__plan_host_share(int cores, int devices, int threads) {
    if (devices < 1) devices = 1;
    if (cores < 1) cores = 1;
    int k = mt__plan_host_threads(cores, devices, threads);
    int used = devices * k;
    return (double)k / (double)(used > cores ? used : cores);
}

double mt__plan_host_slots(const mt_hardware *host, int devices, int threads) {
    if (!host || host->n_levels < 1 || host->levels[0].kind != MT_LINK_THREADS) return 0;
    const int cores = host->levels[0].devices > 0 ? host->levels[0].devices : 1;
    const int k = mt__plan_host_threads(cores, devices, threads);
    return (long)devices * k > cores ? (double)cores / k : 0;
}

mt_status mt__plan_host_devices(const mt_hardware *host, int devices, int threads,
                                mt_hardware *out) {
    if (!host || !out) return mt_fail(MT_EINVAL, "plan: no host description to share");
    if (devices < 1)
        return mt_fail(MT_EINVAL, "plan: %d thread devices on host '%s'; give 1 or more",
                       devices, host->name);
    if (threads < 0)
        return mt_fail(MT_EINVAL, "plan: %d kernel threads on host '%s'; give 0 (all cores) "
                       "or more", threads, host->name);
    memmove(out, host, sizeof *out);
    if (host->n_levels < 1 || host->levels[0].kind != MT_LINK_THREADS) return MT_OK;
    int cores = host->levels[0].devices;
    if (cores < 1)
        return mt_fail(MT_EINVAL, "plan: host '%s' has a threads level of %d cores; its "
                       "levels[0].devices must be the host's cores (measure it with "
                       "`meshtrain bench machine --out FILE`)", host->name, cores);
    double share = mt__plan_host_share(cores, devices, threads);
    for (int d = 0; d < MT_HW_N_DTYPES; d++) out->peak_flops[d] *= share;
    out->vector_flops *= share;
    const int busy = devices * mt__plan_host_threads(cores, devices, threads);
    out->gemm_fraction = mt__plan_host_gemm_fraction(host, busy < cores ? busy : cores);
    out->hbm_bandwidth *= share;
    out->hbm_bytes /= devices;
    if (devices > cores) out->levels[0].link_bandwidth *= (double)cores / devices;
    if (host->n_levels == 1) out->levels[0].devices = devices;
    return MT_OK;
}

