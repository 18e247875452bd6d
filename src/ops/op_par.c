/*
 * op_par.c — an op's run split over the environment's pool (op_par.h).
 */
#include "ops/op_par.h"

/* Work below this many elements per thread is not worth waking a thread for
 * (a wake costs a few µs; 16K floats take about that long to stream;
 * measured 2026-11-29, 2-core Zen 5 dev VM). */
#define GRAIN_ELEMS 16384

void mt__op_par_run(const mt_op_env *env, const mt_op_call *c, mt_op_par *ctx, int64_t items,
                    int64_t item_elems, mt_range_fn fn) {
    ctx->env = env;
    ctx->c = c;
    int64_t grain = GRAIN_ELEMS / (item_elems > 0 ? item_elems : 1);
    mt_pool_run(env->pool, items, grain < 1 ? 1 : grain, fn, ctx);
}

double mt__op_par_sum(const mt_op_par *ctx, const mt_op_env *env) {
    double s = 0;
    for (int w = 0; w < mt_pool_size(env->pool); w++) s += ctx->partial[w];
    return s;
}
