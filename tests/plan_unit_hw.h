/*
 * plan_unit_hw.h — the hand-made system test_plan_step.c and
 * test_plan_step_pipe.c work their cases out on (a header of the tests,
 * included by each): products at 1e12 FLOP/s fp32 (4e12 bf16) x 0.5, HBM
 * 1e11 B/s x 0.5, one switch level of 1e10 B/s x 0.5 a device, 1 ns latency.
 * The level is a DCN's, a switch NCCL does not run on: its latency floors a
 * collective once (plan/cost.c), as the hand forms assume; NCCL's rings,
 * whose latency adds a hop's a step, are test_plan_cost's.
 */
#ifndef MT_TEST_PLAN_UNIT_HW_H
#define MT_TEST_PLAN_UNIT_HW_H

#include "meshtrain/plan.h"

#include <stdio.h>
#include <string.h>

static mt_hardware unit_hw(void) {
    mt_hardware hw;
    memset(&hw, 0, sizeof hw);
    snprintf(hw.name, sizeof hw.name, "unit");
    snprintf(hw.description, sizeof hw.description, "hand-made, unit-ish numbers");
    hw.peak_flops[MT_HW_FP32] = 1e12;
    hw.peak_flops[MT_HW_TF32] = 2e12;
    hw.peak_flops[MT_HW_BF16] = 4e12;
    hw.peak_flops[MT_HW_FP8] = 8e12;
    hw.peak_flops[MT_HW_INT8] = 8e12;
    hw.hbm_bytes = 1e11;
    hw.hbm_bandwidth = 1e11;
    hw.gemm_fraction = 0.5;
    hw.hbm_fraction = 0.5;
    hw.n_levels = 1;
    hw.levels[0] = (mt_hw_level){.kind = MT_LINK_DCN, .topology = MT_TOPO_SWITCH,
                                 .devices = 0, .n_dims = 0, .link_bandwidth = 1e10,
                                 .links = 1, .latency = 1e-9, .collective_fraction = 0.5};
    return hw;
}

#endif /* MT_TEST_PLAN_UNIT_HW_H */
