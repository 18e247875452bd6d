/*
 * train/strategy_fit.h — what ZeRO, sequence parallelism and collective
 * matmul ask of a mesh's axis sizes and the sequence, stated once.
 *
 * mt_train_config_check (config_check.c) words each misfit for train and
 * explain, in its order; the planner's layouts (src/plan/layouts.c) leave
 * a layout out, or say why it cannot divide, from the same bits, so that
 * the two cannot come to disagree on which strategies a layout can run.
 */
#ifndef MT_TRAIN_STRATEGY_FIT_H
#define MT_TRAIN_STRATEGY_FIT_H

#include <stdbool.h>

/* The settings and sizes checked: an axis the mesh lacks is 0 or 1. */
typedef struct {
    int  data, fsdp, tensor;   /* the mesh's axis sizes */
    int  T;                    /* tokens a sequence */
    int  zero;                 /* the ZeRO stage, 0 to 3 */
    bool sp;                   /* sequence parallelism */
    bool cm;                   /* collective matmul asked for (on or off, not auto) */
} mt__strategy_sizes;

/* The misfits, one bit each. */
enum {
    MT__MISFIT_CM_NO_SP = 1u << 0,      /* collective matmul without sequence parallelism */
    MT__MISFIT_ZERO_NO_DATA = 1u << 1,  /* ZeRO without a data axis of 2 or more */
    MT__MISFIT_ZERO1_FSDP = 1u << 2,    /* ZeRO-1 beside an fsdp axis of 2 or more: its
                                           all-reduced gradients and fsdp's reduce-scattered
                                           ones cannot share a parameter */
    MT__MISFIT_SP_NO_TENSOR = 1u << 3,  /* sequence parallelism without a tensor axis of 2
                                           or more */
    MT__MISFIT_SP_T = 1u << 4,          /* sequence parallelism whose T the tensor axis
                                           does not divide */
};

/* Every misfit of z, or 0 when its strategy fits its sizes. */
unsigned mt__strategy_misfits(const mt__strategy_sizes *z);

#endif /* MT_TRAIN_STRATEGY_FIT_H */
