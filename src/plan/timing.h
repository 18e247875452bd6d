/*
 * plan/timing.h — seconds of one device's program on a system (timing.c):
 * the roofline of an op, the time of a collective on the mesh levels it
 * crosses, and a program's two streams (compute; communication, which the
 * weight gradients' reductions and the parameters' prefetched gathers run
 * on, under the compute).
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

/* A program's time for one microbatch. */
typedef struct {
    double phase[3];        /* F, B, W as a pipeline runs them (each phase's span on the
                               compute stream; W's with the reductions still in flight) */
    double total;           /* the whole program, back to back */
    double compute;         /* every op on the roofline (recompute included) */
    double flop_bound;      /* of which ops bound by FLOPs */
    double comm;            /* every collective's own time */
    double exposed_tensor;  /* blocking collectives' (tensor, sequence parallel, the loss's) and
                               what collective matmuls do not hide */
    double exposed_gather;  /* parameter gathers the compute waited for */
    double grad_reduce;     /* gradient reductions' own time ... */
    double exposed_reduce;  /* ... and what of it outlasts the compute */
    double flops;           /* run (recompute included) */
} mt__plan_time;

/* p's time on hw (its collectives over `mesh`, the program's) into *out. */
void mt__plan_program_time(const mt_hardware *hw, const mt_mesh *mesh, mt_precision precision,
                           const mt__plan_program *p, mt__plan_time *out);

#endif /* MT_PLAN_TIMING_H */
