/*
 * hardware_machine.c — this machine's file (`meshtrain bench machine
 * --out`, meshtrain/profile.h) as a one-level hardware description, mapped
 * as mt_hardware_load says (include/meshtrain/plan.h).
 */
#include "meshtrain/profile.h"
#include "plan/plan_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

mt_status mt__hardware_from_machine(const char *path, mt_hardware *hw) {
    mt_machine m;
    mt_status s = mt_machine_read(path, &m);
    if (s) return s;
    /* the engine's products: one-thread sgemms on operands from memory
       (Open BLAS's threads, operands in cache, in files that predate them) */
    const bool cold = isfinite(m.sgemm_cold_gflops_all) && m.sgemm_cold_gflops_all > 0 &&
                      isfinite(m.sgemm_cold_gflops_1) && m.sgemm_cold_gflops_1 > 0;
    double fma = m.fma_gflops_all * 1e9;
    double sgemm = (cold ? m.sgemm_cold_gflops_all : m.sgemm_gflops_all) * 1e9;
    double triad = m.triad_gbs_all * 1e9, busbw = m.threads.busbw_gbs * 1e9;
    double lat = m.threads.latency_us * 1e-6;
    const double need[] = {fma, sgemm, triad, busbw, lat};
    static const char *const what[] = {"FMA peak", "sgemm", "triad", "threads all-reduce "
                                       "bandwidth", "threads all-reduce latency"};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (!isfinite(need[i]) || need[i] <= 0)
            return mt_fail(MT_EFORMAT, "machine file '%s' lacks a measured figure the planner "
                           "needs (FMA peak, sgemm, triad, threads all-reduce); measure again "
                           "with `meshtrain bench machine --out %s`", path, path);
        /* a rate under one a second (or a latency past an hour) is no
           measurement, and 1e-300 would make the planner's times infinite */
        const bool latency = i == sizeof need / sizeof need[0] - 1;
        if (latency ? need[i] > 3600 : need[i] < 1 || need[i] > 1e24)
            return mt_fail(MT_EFORMAT, "machine file '%s': its %s, %g %s, is out of range "
                           "(%s); measure again with `meshtrain bench machine --out %s`", path,
                           what[i], need[i], latency ? "s" : "a second",
                           latency ? "at most 3600 s" : "from 1 to 1e24 a second", path);
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    snprintf(hw->name, sizeof hw->name, "this-machine");
    snprintf(hw->description, sizeof hw->description, "%.120s, %d cores, measured %.31s",
             m.cpu, m.cores, m.measured_at);
    hw->peak_flops[MT_HW_FP32] = fma;
    /* the optional figures: under one a second is taken as not measured */
    hw->peak_flops[MT_HW_BF16] = isfinite(m.bf16_gflops_all) && m.bf16_gflops_all * 1e9 >= 1
                                   ? fmin(m.bf16_gflops_all * 1e9, 1e24) : 0;
    hw->hbm_bytes = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    hw->hbm_bandwidth = triad;
    hw->gemm_fraction = fmin(1.0, sgemm / fma);
    /* one thread's, against one core's share of the peak (0: not measured) */
    const int cores = m.cores > 0 ? m.cores : 1;
    const double sgemm_1 = (cold ? m.sgemm_cold_gflops_1 : m.sgemm_gflops_1) * 1e9;
    hw->thread_gemm_fraction = isfinite(sgemm_1) && sgemm_1 >= 1
                                 ? fmin(1.0, sgemm_1 * cores / fma) : 0;
    hw->hbm_fraction = 1.0;
    /* attention on one thread over one thread's products, by T */
    for (int i = 0; i < MT_MACHINE_N_ATTENTION && sgemm_1 >= 1; i++) {
        const double a = m.attention_gflops_1[i] * 1e9;
        if (!isfinite(a) || a < 1 || hw->n_attention >= MT_HW_MAX_ATTENTION) continue;
        hw->attention_seq[hw->n_attention] = 64 << i;
        hw->attention_fraction[hw->n_attention++] = a / sgemm_1;
    }
    /* probed with the kernels capped (MT_CPU_ISA): the rest of the ops at
       the capped level's peak, the products (Open BLAS's) as measured */
    const int in_use = m.isa_in_use[0] ? mt_cpu_isa_parse(m.isa_in_use) : -1;
    if (in_use >= 0 && strcmp(m.isa_in_use, m.isa_best) != 0) {
        const double capped = mt_machine_isa_gflops(&m, (mt_cpu_isa)in_use, true) * 1e9;
        if (isfinite(capped) && capped >= 1 && capped < fma) hw->vector_flops = capped;
    }
    hw->n_levels = 1;
    hw->levels[0] = (mt_hw_level){.kind = MT_LINK_THREADS, .topology = MT_TOPO_SWITCH,
                                  .devices = m.cores > 0 ? m.cores : 1, .link_bandwidth = busbw,
                                  .links = 1, .latency = lat, .collective_fraction = 1.0};
    return MT_OK;
}
