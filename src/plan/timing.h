/*
 * plan/timing.h — the roofline of an op and the time of a collective on the
 * mesh levels it crosses (timing.c), which step.c's two streams use.
 */
#ifndef MT_PLAN_TIMING_H
#define MT_PLAN_TIMING_H

#include "plan/plan_impl.h"

/* The matrix products' peak FLOP/s at `precision` (a chip without an fp32
 * matrix peak: its bf16 one). */
double mt__plan_matmul_peak(const mt_hardware *hw, mt_precision precision);

/* Seconds of one op: max(flops / achievable peak, bytes / achievable HBM
 * bandwidth) for a matrix product (matmul), bytes / bandwidth for the rest;
 * *flop_bound (may be NULL) says which term won. */
double mt__plan_op_time(const mt_hardware *hw, mt_precision precision, bool matmul, double flops,
                        double bytes, bool *flop_bound);

/* Seconds of one collective of `kind` over `axes` of `mesh` moving `bytes`
 * (nccl-tests' size), on hw's levels (timing.c's comment has the rules);
 * 0 for a group of one. */
double mt__plan_coll_time(const mt_hardware *hw, const mt_mesh *mesh, mt__plan_coll kind,
                          mt_axes axes, double bytes);

#endif /* MT_PLAN_TIMING_H */
