/*
 * op_par.h — how an op's run splits its work over the environment's pool
 * (op_par.c; internal): a range function over [0, items) in chunks big
 * enough to be worth waking a thread for, with per-worker partial sums. The
 * runs in op_table.c and in an op's own file (ops/rope.c) share it.
 */
#ifndef MT_OPS_OP_PAR_H
#define MT_OPS_OP_PAR_H

#include "ops/ops_impl.h"

/* What a range function needs: the call, its environment, per-worker partial
 * sums (a reduction's; zero them before the run if it reads them). */
typedef struct {
    const mt_op_env  *env;
    const mt_op_call *c;
    double            partial[MT_POOL_MAX];
} mt_op_par;

/* Runs fn(ctx, i0, i1, worker) over [0, items) on env's pool, in chunks of
 * at least enough items to make a grain of work (item_elems elements each;
 * op_par.c says how much), after setting ctx's env and call. */
void mt__op_par_run(const mt_op_env *env, const mt_op_call *c, mt_op_par *ctx, int64_t items,
                    int64_t item_elems, mt_range_fn fn);

/* The sum of ctx's partial sums over env's pool's workers, in worker order. */
double mt__op_par_sum(const mt_op_par *ctx, const mt_op_env *env);

#endif /* MT_OPS_OP_PAR_H */
