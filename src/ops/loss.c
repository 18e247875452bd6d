/*
 * loss.c — fused softmax cross-entropy and mean-squared error.
 *
 * Cross-entropy never materialises the probabilities: the forward makes two
 * passes over a row of logits (max, then Σ exp) and saves only the row's
 * log-sum-exp; the backward recomputes each probability as exp(logit - lse)
 * in the one pass that writes the gradient. Only the first V of Vp columns are
 * real (Vp pads the vocabulary to a friendlier size for the matmul); padding
 * columns are never read and get a zero gradient. Rows whose target is
 * negative (masked tokens) are skipped. Losses come back as doubles, summed in
 * double, as they are reported and compared across meshes.
 */
#include "ops/kernels.h"
#include "ops/vec_impl.h"
#include "vec/vec.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* log Σ_{j<V} exp(x[j]) of one row x (V). */
static float row_lse(const mt_vec_ops *vec, const float *restrict x, int64_t V) {
    const float m = vec->max(x, V);
    return m + logf(vec->sum_exp(x, V, m));
}

/* Returns scale · Σ_{rows with target >= 0} (lse - logits[r,target]) from
 * logits (rows,Vp) and targets (rows); saves lse (rows) for every row. */
double mt_kernel_cross_entropy_fwd(float *restrict lse, const float *restrict logits,
                                   const int32_t *restrict targets, int64_t rows, int64_t V,
                                   int64_t Vp, float scale) {
    assert(V >= 1 && V <= Vp);
    const mt_vec_ops *vec = mt__vec();
    double loss = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict x = logits + r * Vp;
        const float l = row_lse(vec, x, V);
        lse[r] = l;
        const int32_t tg = targets[r];
        if (tg < 0) continue;
        assert(tg < V);
        loss += (double)l - (double)x[tg];
    }
    return (double)scale * loss;
}

/* dlogits (rows,Vp) (+)= dloss · scale · (softmax - onehot(target)) over the
 * columns < V of rows with target >= 0, from logits (rows,Vp), lse (rows),
 * targets (rows); everything else gets 0. */
void mt_kernel_cross_entropy_bwd(float *restrict dlogits, const float *restrict logits,
                                 const float *restrict lse, const int32_t *restrict targets,
                                 float dloss, int64_t rows, int64_t V, int64_t Vp, float scale,
                                 bool acc) {
    assert(V >= 1 && V <= Vp);
    const float k = dloss * scale;
    const mt_vec_ops *vec = mt__vec();
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict x = logits + r * Vp;
        float *restrict d = dlogits + r * Vp;
        const int32_t tg = targets[r];
        if (tg < 0) {
            if (!acc) memset(d, 0, (size_t)Vp * sizeof *d);
            continue;
        }
        assert(tg < V);
        const float l = lse[r];
        vec->scale_exp(d, x, V, l, k, acc);
        if (!acc) memset(d + V, 0, (size_t)(Vp - V) * sizeof *d);
        d[tg] -= k;
    }
}

/* Returns scale · Σ (pred - target)² over pred, target (n), in double. */
double mt_kernel_mse_fwd(const float *restrict pred, const float *restrict target, int64_t n,
                         float scale) {
    double lane[8] = {0};
    const int64_t nb = n - n % 8;
    for (int64_t i0 = 0; i0 < nb; i0 += 8)
        for (int l = 0; l < 8; l++) {
            double e = (double)pred[i0 + l] - (double)target[i0 + l];
            lane[l] += e * e;
        }
    double s = 0.0;
    for (int64_t i = nb; i < n; i++) {
        double e = (double)pred[i] - (double)target[i];
        s += e * e;
    }
    for (int l = 0; l < 8; l++) s += lane[l];
    return (double)scale * s;
}

/* dpred (n) (+)= dloss · 2 · scale · (pred - target), pred, target (n). */
void mt_kernel_mse_bwd(float *restrict dpred, const float *restrict pred,
                       const float *restrict target, float dloss, int64_t n, float scale,
                       bool acc) {
    const float k = 2.0f * dloss * scale;
    if (acc) MT_VEC_FOR(i, n, dpred[i] += k * (pred[i] - target[i]));
    else     MT_VEC_FOR(i, n, dpred[i] = k * (pred[i] - target[i]));
}
