/*
 * optim_kernels.c — the per-element parameter updates of AdamW and SGD.
 *
 * Both are memory-bound: each makes exactly one pass over p, g and the state,
 * reading each once and writing each once, with the step-dependent scalars
 * (bias corrections) computed once per call. They work on any slice of a
 * parameter, which is how sharded optimizer state (ZeRO) uses them.
 * AdamW's loop is the vector layer's (vec/vec_body.h), at the kernel level
 * in use; SGD's plain loop gcc vectorises.
 */
#include "ops/kernels.h"
#include "ops/vec_impl.h"
#include "vec/vec.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>

/* AdamW on p, g, m, v (n), t the 1-based step:
 *   g' = gscale·g; m = b1·m + (1-b1)·g'; v = b2·v + (1-b2)·g'²
 *   p -= lr · ( (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd·p ) */
void mt_kernel_adamw(float *restrict p, const float *restrict g, float *restrict m,
                     float *restrict v, int64_t n, float lr, float b1, float b2, float eps,
                     float wd, float gscale, int t) {
    assert(t >= 1);
    /* in double: b2^t is close to 1 for small t and 1 - b2^t loses digits in float */
    const float c1 = (float)(1.0 - pow((double)b1, (double)t));
    const float c2 = (float)(1.0 - pow((double)b2, (double)t));
    mt__vec()->adamw(p, g, m, v, n, lr, b1, b2, eps, wd, gscale, c1, c2);
}

/* SGD on p, g, mom (n): g' = gscale·g; mom = momentum·mom + g';
 * p -= lr·(mom + wd·p). Without a momentum buffer (mom NULL, momentum 0) the
 * step is g' itself. */
void mt_kernel_sgd(float *restrict p, const float *restrict g, float *restrict mom, int64_t n,
                   float lr, float momentum, float wd, float gscale) {
    if (mom == NULL) {
        assert(momentum == 0.0f);
        MT_VEC_FOR(i, n,
            float pi = p[i];
            p[i] = pi - lr * (gscale * g[i] + wd * pi));
        return;
    }
    MT_VEC_FOR(i, n,
        float mi = momentum * mom[i] + gscale * g[i];
        mom[i] = mi;
        float pi = p[i];
        p[i] = pi - lr * (mi + wd * pi));
}
