/*
 * attention.c — causal multi-head self-attention, forward and backward.
 *
 * Follows llm.c's attention_forward/backward with two differences: q, k, v
 * arrive packed side by side in qkv (B,T,3C), and the pre-softmax scores are
 * not saved — the forward computes them into the att row and turns them into
 * probabilities in place, and the backward needs only the probabilities. The
 * loops run batch, head, then query row, so the k and v rows of one head are
 * reused from cache across all queries of that head. Every q·k product runs
 * over HS contiguous floats. The softmax backward uses the identity
 * dpre = att·(datt - Σ att·datt), which is O(T) per row rather than llm.c's
 * O(T²). Outputs must not overlap inputs.
 */
#include "ops/kernels.h"
#include "ops/vec_impl.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* Σ x·y over n floats (n = HS, typically 64). Sixteen partial sums let gcc
 * vectorise a reduction it may not reorder; they are then folded as a tree
 * (8, 4, 2, 1), which gcc turns into a few shuffles. A dot this short is
 * dominated by that final fold, and the tree is twice as fast as adding the
 * sixteen partial sums one after the other. */
static inline float dot_f(const float *restrict x, const float *restrict y, int64_t n) {
    float lane[16] = {0};
    const int64_t nb = n - n % 16;
    for (int64_t i0 = 0; i0 < nb; i0 += 16)
        for (int l = 0; l < 16; l++) lane[l] += x[i0 + l] * y[i0 + l];
    for (int l = 0; l < 8; l++) lane[l] += lane[l + 8];
    for (int l = 0; l < 4; l++) lane[l] += lane[l + 4];
    for (int l = 0; l < 2; l++) lane[l] += lane[l + 2];
    float s = lane[0] + lane[1];
    for (int64_t i = nb; i < n; i++) s += x[i] * y[i];
    return s;
}

/* out (B,T,C) = concat_h softmax_causal(q_h·k_hᵀ/√HS) · v_h, from qkv (B,T,3C);
 * saves att (B,NH,T,T) with zeros above the diagonal. */
void mt_kernel_attention_fwd(float *restrict out, float *restrict att, const float *restrict qkv,
                             int64_t B, int64_t T, int64_t C, int64_t NH) {
    assert(NH > 0 && C % NH == 0);
    const int64_t HS = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)HS);
    for (int64_t b = 0; b < B; b++) {
        const float *restrict qkv_b = qkv + b * T * C3;
        for (int64_t h = 0; h < NH; h++) {
            for (int64_t t = 0; t < T; t++) {
                const float *restrict q = qkv_b + t * C3 + h * HS;
                float *restrict a = att + ((b * NH + h) * T + t) * T;

                /* scores and their max, over the keys up to and including t */
                float maxv = -INFINITY;
                for (int64_t t2 = 0; t2 <= t; t2++) {
                    const float *restrict k = qkv_b + t2 * C3 + C + h * HS;
                    float s = dot_f(q, k, HS) * scale;
                    a[t2] = s;
                    maxv = s > maxv ? s : maxv;
                }
                /* exp in place, then its sum: the row is still in L1 */
                MT_VEC_FOR(t2, t + 1, a[t2] = exp_f(a[t2] - maxv));
                float lane[16] = {0};
                const int64_t nb = (t + 1) - (t + 1) % 16;
                for (int64_t i0 = 0; i0 < nb; i0 += 16)
                    for (int l = 0; l < 16; l++) lane[l] += a[i0 + l];
                float sum = 0.0f;
                for (int64_t t2 = nb; t2 <= t; t2++) sum += a[t2];
                for (int l = 0; l < 16; l++) sum += lane[l];
                /* sum >= exp(0) = 1 from the max entry, so no division by 0 */
                const float inv = 1.0f / sum;
                MT_VEC_FOR(t2, t + 1, a[t2] *= inv);
                /* the future is stored as 0 so att is a true (B,NH,T,T) matrix */
                for (int64_t t2 = t + 1; t2 < T; t2++) a[t2] = 0.0f;

                float *restrict o = out + (b * T + t) * C + h * HS;
                memset(o, 0, (size_t)HS * sizeof *o);
                for (int64_t t2 = 0; t2 <= t; t2++) {
                    const float *restrict v = qkv_b + t2 * C3 + 2 * C + h * HS;
                    const float p = a[t2];
                    MT_VEC_FOR(i, HS, o[i] += p * v[i]);
                }
            }
        }
    }
}

/* dqkv (B,T,3C) (+)= the gradient through attention, from dout (B,T,C),
 * qkv (B,T,3C) and the saved att (B,NH,T,T). scratch (T·T floats; T are
 * used) holds one row of datt, then of dpre, at a time. */
void mt_kernel_attention_bwd(float *restrict dqkv, const float *restrict dout,
                             const float *restrict qkv, const float *restrict att,
                             int64_t B, int64_t T, int64_t C, int64_t NH, bool acc,
                             float *restrict scratch) {
    assert(NH > 0 && C % NH == 0);
    const int64_t HS = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)HS);
    /* every row scatters into the k and v of earlier rows, so the gradient is
     * built by accumulation; overwriting means starting from zero */
    if (!acc) memset(dqkv, 0, (size_t)(B * T * C3) * sizeof *dqkv);
    float *restrict dpre = scratch;
    for (int64_t b = 0; b < B; b++) {
        const float *restrict qkv_b = qkv + b * T * C3;
        float *restrict dqkv_b = dqkv + b * T * C3;
        for (int64_t h = 0; h < NH; h++) {
            for (int64_t t = 0; t < T; t++) {
                const float *restrict a = att + ((b * NH + h) * T + t) * T;
                const float *restrict dO = dout + (b * T + t) * C + h * HS;
                const float *restrict q = qkv_b + t * C3 + h * HS;
                float *restrict dq = dqkv_b + t * C3 + h * HS;

                /* out = Σ att·v: datt[t2] = dout·v[t2], dv[t2] += att[t2]·dout */
                for (int64_t t2 = 0; t2 <= t; t2++) {
                    const float *restrict v = qkv_b + t2 * C3 + 2 * C + h * HS;
                    float *restrict dv = dqkv_b + t2 * C3 + 2 * C + h * HS;
                    dpre[t2] = dot_f(dO, v, HS);
                    const float p = a[t2];
                    MT_VEC_FOR(i, HS, dv[i] += p * dO[i]);
                }
                /* softmax: dpre = att·(datt - Σ att·datt), with the 1/√HS of
                 * the scores folded in */
                const float s = dot_f(a, dpre, t + 1);
                MT_VEC_FOR(t2, t + 1, dpre[t2] = a[t2] * (dpre[t2] - s) * scale);

                /* pre = q·k: dq += dpre[t2]·k[t2], dk[t2] += dpre[t2]·q */
                for (int64_t t2 = 0; t2 <= t; t2++) {
                    const float *restrict k = qkv_b + t2 * C3 + C + h * HS;
                    float *restrict dk = dqkv_b + t2 * C3 + C + h * HS;
                    const float g = dpre[t2];
                    MT_VEC_FOR(i, HS, dq[i] += g * k[i]);
                    MT_VEC_FOR(i, HS, dk[i] += g * q[i]);
                }
            }
        }
    }
}
