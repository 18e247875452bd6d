/*
 * timing.c — the roofline of one op as the step model asks it: by the
 * run's precision (cost.c's mt__plan_matmul_peak of its element type) and
 * saying which roof bound it. Collectives are cost.c's
 * (mt__plan_collective_seconds on the layout's map).
 *
 * The roofline (the scaling book, ch. 1; ../shared/PLANNER.md 2.2): an op
 * takes max(FLOPs / (peak x gemm_fraction), bytes / (HBM x hbm_fraction)).
 * A matrix product runs at the peak of the run's precision; every other op
 * is costed by its bytes.
 */
#include "plan/timing.h"

mt_hw_dtype mt__plan_dtype_of(mt_precision precision) {
    return precision == MT_PRECISION_BF16 ? MT_HW_BF16 : MT_HW_FP32;
}

double mt__plan_op_time(const mt_hardware *hw, mt_precision precision, bool matmul, double flops,
                        double bytes, bool *flop_bound) {
    double bw = hw->hbm_bandwidth * hw->hbm_fraction;
    double tb = bytes / bw;
    double tf = matmul ? flops / (mt__plan_matmul_peak(hw, mt__plan_dtype_of(precision)) *
                                  hw->gemm_fraction)
                       : 0;
    if (flop_bound) *flop_bound = tf >= tb;
    return tf > tb ? tf : tb;
}
