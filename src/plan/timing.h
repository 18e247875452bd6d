/*
 * plan/timing.h — the roofline of an op by the run's precision (timing.c),
 * which step.c's two streams use beside cost.h's collective times.
 */
#ifndef MT_PLAN_TIMING_H
#define MT_PLAN_TIMING_H

#include "plan/cost.h"

/* The element type a run's matrix products use: bf16 or fp32. */
mt_hw_dtype mt__plan_dtype_of(mt_precision precision);

/* Seconds of one op: max(flops / achievable peak, bytes / achievable HBM
 * bandwidth) for a matrix product (matmul), bytes / bandwidth for the rest;
 * *flop_bound (may be NULL) says which term won. */
double mt__plan_op_time(const mt_hardware *hw, mt_precision precision, bool matmul, double flops,
                        double bytes, bool *flop_bound);

#endif /* MT_PLAN_TIMING_H */
