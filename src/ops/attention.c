/*
 * attention.c — causal multi-head self-attention, forward and backward.
 *
 * Follows llm.c's attention_forward/backward with these differences:
 *  - q, k, v arrive packed side by side in qkv (B,T,3C), and the pre-softmax
 *    scores are not saved: the forward computes them into att and turns them
 *    into probabilities in place; the backward needs only the probabilities.
 *  - The work is a range [bh0, bh1) of (batch, head) pairs, bh = b·NH + h.
 *    A pair reads and writes only its own slices (att's (T,T) block, out's
 *    HS columns of head h in batch b, dqkv's q, k and v columns of head h in
 *    batch b), so threads may run disjoint ranges on the same buffers at once
 *    and the result does not depend on how the pairs were split.
 *  - The products are sgemms (through mt_kernel_gemm; single-threaded under
 *    the graph, whose pool splits the pairs) on strided views of qkv, out,
 *    att and dqkv: no copies. Query rows go in blocks of ATT_BLOCK; block
 *    [r0, r1) needs keys [0, r1) only, so the upper triangle is computed just
 *    inside the diagonal blocks (about 6% extra at T = 1024) instead of
 *    doubling the work, and the gemms stay large enough for BLAS.
 *  - The softmax backward uses the identity dpre = att·(datt - Σ att·datt),
 *    which is O(T) per row rather than llm.c's O(T²).
 *  - One path for every T: the plain loops this file used to hold win only
 *    at T <= 8 (up to 3x at T = 2), where a BLAS call's ~0.2 µs overhead
 *    dominates, and there the whole op takes under 20 µs; from T = 16 the
 *    sgemms are 1.4x (T = 16) to 4x (T = 1024) faster (measured 2026-11-29,
 *    2-core Zen 5 dev VM).
 * Outputs must not overlap inputs.
 *
 * Shapes per pair (b,h), all row-major with the leading dimension given:
 *   q, k, v   (T,HS)  ld 3C   in qkv  (and dq, dk, dv in dqkv)
 *   out_h     (T,HS)  ld C    in out  (and dout_h in dout)
 *   att_h     (T,T)   ld T    in att  (and the backward's scratch, dpre)
 */
#include "ops/kernels.h"
#include "vec/vec.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* Query rows per block. 64 wastes little on the diagonal blocks (64·63/2
 * extra scores per block) while the sgemms stay at 64 × (≥64) × HS, large
 * enough for Open BLAS. Measured at T = 1024, HS = 64, one core (2026-11-29,
 * 2-core Zen 5 dev VM): 64 to 128 are equal within noise, 32 and 256 are 7%
 * slower. */
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

/* out (B,T,C) = concat_h softmax_causal(q_h·k_hᵀ/√HS) · v_h, from qkv (B,T,3C),
 * for the pairs [bh0, bh1); saves their att (T,T) blocks of att (B,NH,T,T)
 * with zeros above the diagonal. */
void mt_kernel_attention_fwd(float *restrict out, float *restrict att, const float *restrict qkv,
                             int64_t B, int64_t T, int64_t C, int64_t NH,
                             int64_t bh0, int64_t bh1) {
    assert(NH > 0 && C % NH == 0);
    assert(0 <= bh0 && bh0 <= bh1 && bh1 <= B * NH);
    const int64_t HS = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)HS);
    const mt_vec_ops *vec = mt__vec();
    for (int64_t bh = bh0; bh < bh1; bh++) {
        const int64_t b = bh / NH, h = bh % NH;
        const float *q = qkv + b * T * C3 + h * HS, *k = q + C, *v = q + 2 * C;
        float *o = out + b * T * C + h * HS, *a = att + bh * T * T;
        for (int64_t r0 = 0; r0 < T; r0 += ATT_BLOCK) {
            const int64_t r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, m = r1 - r0;
            /* scores a[r0:r1, 0:r1] (m,r1) = scale · q[r0:r1] (m,HS) · k[0:r1]ᵀ (HS,r1) */
            mt_kernel_gemm(false, true, m, r1, HS, scale, q + r0 * C3, C3, k, C3,
                           0.0f, a + r0 * T, T);
            for (int64_t t = r0; t < r1; t++) softmax_causal_row(vec, a + t * T, t + 1, T);
            /* o[r0:r1] (m,HS) = a[r0:r1, 0:r1] (m,r1) · v[0:r1] (r1,HS); the
             * zeros above the diagonal make the causal sum exact */
            mt_kernel_gemm(false, false, m, HS, r1, 1.0f, a + r0 * T, T, v, C3,
                           0.0f, o + r0 * C, C);
        }
    }
}

/* ======================================================================== */
/* Backward                                                                  */
/* ======================================================================== */

/* dqkv (B,T,3C) (+)= the gradient through attention, from dout (B,T,C),
 * qkv (B,T,3C) and the saved att (B,NH,T,T), for the pairs [bh0, bh1).
 * scratch (T·T floats) holds one pair's datt, turned into dpre in place. */
void mt_kernel_attention_bwd(float *restrict dqkv, const float *restrict dout,
                             const float *restrict qkv, const float *restrict att,
                             int64_t B, int64_t T, int64_t C, int64_t NH, bool acc,
                             float *restrict scratch, int64_t bh0, int64_t bh1) {
    assert(NH > 0 && C % NH == 0);
    assert(0 <= bh0 && bh0 <= bh1 && bh1 <= B * NH);
    const int64_t HS = C / NH, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)HS);
    /* each of dq, dk, dv's row blocks is written by exactly one gemm, so acc
     * is just that gemm's beta: no memset, and nothing outside the pair */
    const float beta = acc ? 1.0f : 0.0f;
    float *d = scratch;
    const mt_vec_ops *vec = mt__vec();
    for (int64_t bh = bh0; bh < bh1; bh++) {
        const int64_t b = bh / NH, h = bh % NH;
        const float *q = qkv + b * T * C3 + h * HS, *k = q + C, *v = q + 2 * C;
        float *dq = dqkv + b * T * C3 + h * HS, *dk = dq + C, *dv = dq + 2 * C;
        const float *dO = dout + b * T * C + h * HS, *a = att + bh * T * T;

        /* by query block: dpre, then dq, which needs only keys [0, r1) */
        for (int64_t r0 = 0; r0 < T; r0 += ATT_BLOCK) {
            const int64_t r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, m = r1 - r0;
            /* out = att·v: datt[r0:r1, 0:r1] (m,r1) = dO[r0:r1] (m,HS) · v[0:r1]ᵀ */
            mt_kernel_gemm(false, true, m, r1, HS, 1.0f, dO + r0 * C, C, v, C3,
                           0.0f, d + r0 * T, T);
            /* softmax: dpre = att·(datt - Σ att·datt), with the 1/√HS of the
             * scores folded in; above the diagonal (inside this block) dpre is
             * 0, which the dq and dk products below rely on */
            for (int64_t t = r0; t < r1; t++) {
                const float *restrict ar = a + t * T;
                float *restrict dr = d + t * T;
                vec->softmax_bwd(dr, ar, t + 1, vec->dot(ar, dr, t + 1), scale);
                memset(dr + t + 1, 0, (size_t)(r1 - t - 1) * sizeof *dr);
            }
            /* pre = q·kᵀ: dq[r0:r1] (m,HS) (+)= dpre[r0:r1, 0:r1] (m,r1) · k[0:r1] */
            mt_kernel_gemm(false, false, m, HS, r1, 1.0f, d + r0 * T, T, k, C3,
                           beta, dq + r0 * C3, C3);
        }
        /* by key block [c0, c1): only queries [c0, T) see these keys.
         * dk[c0:c1] (m,HS) (+)= dpre[c0:T, c0:c1]ᵀ (m,T-c0) · q[c0:T] (T-c0,HS)
         * dv[c0:c1] (m,HS) (+)= att [c0:T, c0:c1]ᵀ (m,T-c0) · dO[c0:T] (T-c0,HS) */
        for (int64_t c0 = 0; c0 < T; c0 += ATT_BLOCK) {
            const int64_t c1 = c0 + ATT_BLOCK < T ? c0 + ATT_BLOCK : T, m = c1 - c0;
            mt_kernel_gemm(true, false, m, HS, T - c0, 1.0f, d + c0 * T + c0, T,
                           q + c0 * C3, C3, beta, dk + c0 * C3, C3);
            mt_kernel_gemm(true, false, m, HS, T - c0, 1.0f, a + c0 * T + c0, T,
                           dO + c0 * C, C, beta, dv + c0 * C3, C3);
        }
    }
}
