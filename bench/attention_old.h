/*
 * attention_old.h — the attention kernel flash attention replaced, copied
 * from commit a820823:src/ops/attention.c for bench_attention's comparison:
 * row blocks of 64, the (B,NH,T,T) probabilities saved for the backward and
 * re-read there, a (T,T) scratch. Not part of the library.
 */
#ifndef MT_BENCH_ATTENTION_OLD_H
#define MT_BENCH_ATTENTION_OLD_H

#include "meshtrain.h"
#include "ops/kernels.h"
#include "vec/vec.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* ======================================================================== */
/* The kernel flash attention replaced (a820823:src/ops/attention.c)         */
/* ======================================================================== */

#define ATT_BLOCK 64

/* a (T) holds the n = t+1 scores of query row t (keys 0..t), then anything.
 * Makes it the causal softmax row: probabilities over [0, n), 0 over [n, T). */
static inline void softmax_causal_row(const mt_vec_ops *vec, float *restrict a, int64_t n,
                                      int64_t T) {
    vec->softmax(a, n);
    /* the future is stored as 0 so att is a true (T,T) matrix per pair */
    memset(a + n, 0, (size_t)(T - n) * sizeof *a);
}

/* ======================================================================== */
/* Forward                                                                   */
/* ======================================================================== */

/* The kv head query head h reads. */
static inline int64_t old_kv_of(const mt_attn_layout *L, int64_t h) { return (L->hoff + h) / L->G; }

static void old_check_layout(const mt_attn_layout *L) {
    assert(L->NH > 0 && L->KV > 0 && L->HS > 0 && L->G > 0 && L->hoff >= 0);
    assert(old_kv_of(L, 0) >= 0 && old_kv_of(L, L->NH - 1) < L->KV);
}

/* out_h = softmax_causal(q_h·k_jᵀ/√HS) · v_j for the pairs [bh0, bh1); saves
 * their att (T,T) blocks of att (B,NH,T,T) with zeros above the diagonal. */
static void old_attention_fwd(float *restrict out, float *restrict att, const float *q,
                             const float *k, const float *v, const mt_attn_layout *L,
                             int64_t bh0, int64_t bh1) {
    old_check_layout(L);
    assert(0 <= bh0 && bh0 <= bh1 && bh1 <= L->B * L->NH);
    const int64_t T = L->T, NH = L->NH, HS = L->HS;
    const int64_t ldq = L->ldq, ldk = L->ldk, ldv = L->ldv, ldo = L->ldo;
    const float scale = 1.0f / sqrtf((float)HS);
    const mt_vec_ops *vec = mt__vec();
    for (int64_t bh = bh0; bh < bh1; bh++) {
        const int64_t b = bh / NH, h = bh % NH, j = old_kv_of(L, h);
        const float *qh = q + b * T * ldq + h * HS;
        const float *kj = k + b * T * ldk + j * HS, *vj = v + b * T * ldv + j * HS;
        float *o = out + b * T * ldo + h * HS, *a = att + bh * T * T;
        for (int64_t r0 = 0; r0 < T; r0 += ATT_BLOCK) {
            const int64_t r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, m = r1 - r0;
            /* scores a[r0:r1, 0:r1] (m,r1) = scale · q[r0:r1] (m,HS) · k[0:r1]ᵀ (HS,r1) */
            mt_kernel_gemm(false, true, m, r1, HS, scale, qh + r0 * ldq, ldq, kj, ldk,
                           0.0f, a + r0 * T, T);
            for (int64_t t = r0; t < r1; t++) softmax_causal_row(vec, a + t * T, t + 1, T);
            /* o[r0:r1] (m,HS) = a[r0:r1, 0:r1] (m,r1) · v[0:r1] (r1,HS); the
             * zeros above the diagonal make the causal sum exact */
            mt_kernel_gemm(false, false, m, HS, r1, 1.0f, a + r0 * T, T, vj, ldv,
                           0.0f, o + r0 * ldo, ldo);
        }
    }
}

/* ======================================================================== */
/* Backward                                                                  */
/* ======================================================================== */

/* rows (T,HS) at p, leading dimension ld, set to 0 */
static void old_zero_head(float *p, int64_t T, int64_t HS, int64_t ld) {
    for (int64_t t = 0; t < T; t++) memset(p + t * ld, 0, (size_t)HS * sizeof *p);
}

/* The gradients of query head h (whose kv head is j) into d: dq_h (+)= with
 * beta_q, dk_j and dv_j (+)= with beta_kv (the group's first head writes or
 * adds as the call says, the others add). scratch (T·T) holds datt, turned
 * into dpre in place. */
static void old_bwd_head(const mt_attn_grads *d, const float *dout, const float *q, const float *k,
                     const float *v, const float *att, const mt_attn_layout *L, int64_t b,
                     int64_t h, float beta_q, float beta_kv, float *restrict scratch) {
    const int64_t T = L->T, HS = L->HS, j = old_kv_of(L, h);
    const int64_t ldq = L->ldq, ldk = L->ldk, ldv = L->ldv, ldo = L->ldo;
    const float scale = 1.0f / sqrtf((float)HS);
    const mt_vec_ops *vec = mt__vec();
    const float *qh = q + b * T * ldq + h * HS;
    const float *kj = k + b * T * ldk + j * HS, *vj = v + b * T * ldv + j * HS;
    const float *dO = dout + b * T * ldo + h * HS, *a = att + (b * L->NH + h) * T * T;
    float *dq = d->dq ? d->dq + b * T * ldq + h * HS : NULL;
    float *dk = d->dk ? d->dk + b * T * ldk + j * HS : NULL;
    float *dv = d->dv ? d->dv + b * T * ldv + j * HS : NULL;
    float *dp = scratch;
    const bool need_dpre = dq || dk;

    /* by query block: dpre, then dq, which needs only keys [0, r1) */
    for (int64_t r0 = 0; need_dpre && r0 < T; r0 += ATT_BLOCK) {
        const int64_t r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, m = r1 - r0;
        /* out = att·v: datt[r0:r1, 0:r1] (m,r1) = dO[r0:r1] (m,HS) · v[0:r1]ᵀ */
        mt_kernel_gemm(false, true, m, r1, HS, 1.0f, dO + r0 * ldo, ldo, vj, ldv,
                       0.0f, dp + r0 * T, T);
        /* softmax: dpre = att·(datt - Σ att·datt), with the 1/√HS of the
         * scores folded in; above the diagonal (inside this block) dpre is
         * 0, which the dq and dk products below rely on */
        for (int64_t t = r0; t < r1; t++) {
            const float *restrict ar = a + t * T;
            float *restrict dr = dp + t * T;
            vec->softmax_bwd(dr, ar, t + 1, vec->dot(ar, dr, t + 1), scale);
            memset(dr + t + 1, 0, (size_t)(r1 - t - 1) * sizeof *dr);
        }
        /* pre = q·kᵀ: dq[r0:r1] (m,HS) (+)= dpre[r0:r1, 0:r1] (m,r1) · k[0:r1] */
        if (dq)
            mt_kernel_gemm(false, false, m, HS, r1, 1.0f, dp + r0 * T, T, kj, ldk,
                           beta_q, dq + r0 * ldq, ldq);
    }
    /* by key block [c0, c1): only queries [c0, T) see these keys.
     * dk[c0:c1] (m,HS) (+)= dpre[c0:T, c0:c1]ᵀ (m,T-c0) · q[c0:T] (T-c0,HS)
     * dv[c0:c1] (m,HS) (+)= att [c0:T, c0:c1]ᵀ (m,T-c0) · dO[c0:T] (T-c0,HS) */
    for (int64_t c0 = 0; c0 < T; c0 += ATT_BLOCK) {
        const int64_t c1 = c0 + ATT_BLOCK < T ? c0 + ATT_BLOCK : T, m = c1 - c0;
        if (dk)
            mt_kernel_gemm(true, false, m, HS, T - c0, 1.0f, dp + c0 * T + c0, T,
                           qh + c0 * ldq, ldq, beta_kv, dk + c0 * ldk, ldk);
        if (dv)
            mt_kernel_gemm(true, false, m, HS, T - c0, 1.0f, a + c0 * T + c0, T,
                           dO + c0 * ldo, ldo, beta_kv, dv + c0 * ldv, ldv);
    }
}

/* The gradients (d's, each NULL or (+)= as its acc says) from dout, q, k, v
 * and the saved att, for the (batch, kv head) groups [g0, g1). Each of a
 * row block's gemms writes it once per head, so acc is the first head's
 * beta: no memset, except for a kv head that none of this call's query
 * heads reads (a device's share of the heads), whose dk, dv are 0. */
static void old_attention_bwd(const mt_attn_grads *d, const float *dout, const float *q,
                             const float *k, const float *v, const float *att,
                             const mt_attn_layout *L, float *restrict scratch,
                             int64_t g0, int64_t g1) {
    old_check_layout(L);
    assert(0 <= g0 && g0 <= g1 && g1 <= L->B * L->KV);
    const int64_t T = L->T, HS = L->HS, KV = L->KV;
    for (int64_t g = g0; g < g1; g++) {
        const int64_t b = g / KV, j = g % KV;
        /* the query heads [h0, h1) that read kv head j */
        int64_t h0 = j * L->G - L->hoff, h1 = h0 + L->G;
        if (h0 < 0) h0 = 0;
        if (h1 > L->NH) h1 = L->NH;
        if (h0 >= h1) {
            if (d->dk && !d->acc_kv) old_zero_head(d->dk + b * T * L->ldk + j * HS, T, HS, L->ldk);
            if (d->dv && !d->acc_kv) old_zero_head(d->dv + b * T * L->ldv + j * HS, T, HS, L->ldv);
            continue;
        }
        for (int64_t h = h0; h < h1; h++)
            old_bwd_head(d, dout, q, k, v, att, L, b, h, d->acc_q ? 1.0f : 0.0f,
                     h == h0 && !d->acc_kv ? 0.0f : 1.0f, scratch);
    }
}

#endif /* MT_BENCH_ATTENTION_OLD_H */
