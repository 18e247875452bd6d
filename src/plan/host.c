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
 *   - GEMMs do not scale with the cores: on the 2-core Zen 5 of 2026-12-03
 *     Open BLAS sgemm of the trainer's shapes (512 x 768 x 256 and the like)
 *     ran at 101-107 GFLOP/s on one thread and 149-187 on two (the
 *     environment's Haswell kernel; 184-199 and 241-310 with Cooperlake's),
 *     1.5-1.8x, not 2x. So a device of k threads runs its GEMMs at the
 *     sgemm of k threads, which the machine file measures at one thread and
 *     at all cores (thread_gemm_fraction, gemm_fraction) and which is
 *     interpolated linearly between; the share above then time-shares it.
 *     With the host's sgemm over two, two one-thread devices were planned
 *     1.2x slower than they ran in test_plan_validate (pipe=2).
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

double mt__plan_host_gemm_fraction(const mt_hardware *host, int k) {
    const int cores = host->n_levels > 0 ? host->levels[0].devices : 1;
    const double one = host->thread_gemm_fraction, all = host->gemm_fraction;
    if (one <= 0 || cores <= 1 || k >= cores) return all;
    if (k <= 1) return one;
    return one + (all - one) * (double)(k - 1) / (double)(cores - 1);
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
    out->gemm_fraction = mt__plan_host_gemm_fraction(host, mt__plan_host_threads(cores, devices,
                                                                                 threads));
    out->hbm_bandwidth *= share;
    out->hbm_bytes /= devices;
    if (devices > cores) out->levels[0].link_bandwidth *= (double)cores / devices;
    if (host->n_levels == 1) out->levels[0].devices = devices;
    return MT_OK;
}

