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

#include <assert.h>
#include <math.h>
#include <string.h>

/* gcc at -O2 (the build's level) vectorises only loops that need no scalar
 * epilogue, so hot loops run over full blocks of 16 (vectorised) and then a
 * scalar tail. The body may contain commas. */
#define MT_VEC_FOR(i, n, ...)                                                  \
    do {                                                                       \
        const int64_t i##_n = (n), i##_nb = i##_n - i##_n % 16;                \
        for (int64_t i##_0 = 0; i##_0 < i##_nb; i##_0 += 16)                   \
            for (int64_t i = i##_0; i < i##_0 + 16; i++) { __VA_ARGS__; }      \
        for (int64_t i = i##_nb; i < i##_n; i++) { __VA_ARGS__; }              \
    } while (0)

/* exp(x) to about 1 ulp (Cephes expf: x = n·ln2 + r, |r| ≤ ln2/2, a degree-6
 * polynomial in r, then 2^n put into the exponent bits). libm's expf is a
 * call gcc cannot vectorise without -ffast-math, and a GPT-2 step takes B·T·V
 * of them twice. Below -87.3 the result is flushed to 0 (exp(-inf) = 0); the
 * softmax never asks for more than exp(0). A NaN passes through. The same
 * function is in attention.c. */
static inline float exp_f(float x) {
    float xc = x < -87.3f ? -87.3f : x;
    xc = xc > 88.3f ? 88.3f : xc;
    /* round to nearest by the 1.5·2^23 trick: gcc keeps (a + c) - c as written */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    float nc = n == n ? n : 0.0f;   /* a NaN must not reach the int conversion */
    int32_t bits = ((int32_t)nc + 127) * (1 << 23);
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float e = p * scale;
    return x < -87.3f ? 0.0f : e;
}

/* log Σ_{j<V} exp(x[j]) of one row x (V). Sixteen partial maxima and sums let
 * gcc vectorise reductions it may not reorder. */
static float row_lse(const float *restrict x, int64_t V) {
    const int64_t Vb = V - V % 16;
    float lmax[16];
    for (int l = 0; l < 16; l++) lmax[l] = -INFINITY;
    for (int64_t j0 = 0; j0 < Vb; j0 += 16)
        for (int l = 0; l < 16; l++) lmax[l] = x[j0 + l] > lmax[l] ? x[j0 + l] : lmax[l];
    float m = -INFINITY;
    for (int64_t j = Vb; j < V; j++) m = x[j] > m ? x[j] : m;
    for (int l = 0; l < 16; l++) m = lmax[l] > m ? lmax[l] : m;

    float lsum[16] = {0};
    for (int64_t j0 = 0; j0 < Vb; j0 += 16)
        for (int l = 0; l < 16; l++) lsum[l] += exp_f(x[j0 + l] - m);
    float s = 0.0f;
    for (int64_t j = Vb; j < V; j++) s += exp_f(x[j] - m);
    for (int l = 0; l < 16; l++) s += lsum[l];
    return m + logf(s);
}

/* Returns scale · Σ_{rows with target >= 0} (lse - logits[r,target]) from
 * logits (rows,Vp) and targets (rows); saves lse (rows) for every row. */
double mt_kernel_cross_entropy_fwd(float *restrict lse, const float *restrict logits,
                                   const int32_t *restrict targets, int64_t rows, int64_t V,
                                   int64_t Vp, float scale) {
    assert(V >= 1 && V <= Vp);
    double loss = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict x = logits + r * Vp;
        const float l = row_lse(x, V);
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
        if (acc) {
            MT_VEC_FOR(j, V, d[j] += k * exp_f(x[j] - l));
        } else {
            MT_VEC_FOR(j, V, d[j] = k * exp_f(x[j] - l));
            memset(d + V, 0, (size_t)(Vp - V) * sizeof *d);
        }
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
