/*
 * norm.c — layer normalisation over the last dimension, forward and the two
 * halves of the backward.
 *
 * The backward is split the way the zero-bubble schedules need it: the input
 * gradient (B part) is on the critical path between pipeline stages, the
 * parameter gradient (W part) can be deferred to fill a bubble. Both recompute
 * xhat = (x - mean)·rstd from the saved statistics rather than storing it,
 * which costs a few flops and saves a (rows,C) activation. Follows llm.c's
 * layernorm_forward/backward. Outputs must not overlap inputs.
 */
#include "ops/kernels.h"
#include "ops/vec_impl.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#define LN_EPS 1e-5f

/* out (rows,C) = (x (rows,C) - mean)·rstd·w (C) + b (C); saves mean (rows)
 * and rstd (rows) = 1/sqrt(var + 1e-5), var the biased variance. The variance
 * is taken as the mean of (x - mean)², a second pass over a row that is in
 * L1 anyway, which avoids the cancellation of E[x²] - mean². */
void mt_kernel_layernorm_fwd(float *restrict out, float *restrict mean, float *restrict rstd,
                             const float *restrict x, const float *restrict w,
                             const float *restrict b, int64_t rows, int64_t C) {
    assert(C > 0);
    const int64_t Cb = C - C % 16;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * C;
        float *restrict o = out + r * C;
        /* sixteen partial sums: a reduction gcc may vectorise without reordering */
        float lane[16] = {0};
        for (int64_t i0 = 0; i0 < Cb; i0 += 16)
            for (int l = 0; l < 16; l++) lane[l] += xr[i0 + l];
        float s = 0.0f;
        for (int64_t i = Cb; i < C; i++) s += xr[i];
        for (int l = 0; l < 16; l++) s += lane[l];
        const float m = s / (float)C;

        float vlane[16] = {0};
        for (int64_t i0 = 0; i0 < Cb; i0 += 16)
            for (int l = 0; l < 16; l++) {
                float d = xr[i0 + l] - m;
                vlane[l] += d * d;
            }
        float v = 0.0f;
        for (int64_t i = Cb; i < C; i++) v += (xr[i] - m) * (xr[i] - m);
        for (int l = 0; l < 16; l++) v += vlane[l];
        const float rs = 1.0f / sqrtf(v / (float)C + LN_EPS);

        MT_VEC_FOR(i, C, o[i] = (rs * (xr[i] - m)) * w[i] + b[i]);
        mean[r] = m;
        rstd[r] = rs;
    }
}

/* dx (rows,C) (+)= the input gradient, from dout (rows,C), x (rows,C),
 * w (C), mean (rows), rstd (rows):
 *   dx = rstd · (w·dout - mean_C(w·dout) - xhat · mean_C(w·dout·xhat)). */
void mt_kernel_layernorm_bwd_input(float *restrict dx, const float *restrict dout,
                                   const float *restrict x, const float *restrict w,
                                   const float *restrict mean, const float *restrict rstd,
                                   int64_t rows, int64_t C, bool acc) {
    assert(C > 0);
    const int64_t Cb = C - C % 16;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * C, *restrict dr = dout + r * C;
        float *restrict d = dx + r * C;
        const float m = mean[r], rs = rstd[r];
        float la[16] = {0}, lb[16] = {0};
        for (int64_t i0 = 0; i0 < Cb; i0 += 16)
            for (int l = 0; l < 16; l++) {
                float xhat = (xr[i0 + l] - m) * rs;
                float dn = w[i0 + l] * dr[i0 + l];
                la[l] += dn;
                lb[l] += dn * xhat;
            }
        float dn_mean = 0.0f, dn_xhat_mean = 0.0f;
        for (int64_t i = Cb; i < C; i++) {
            float xhat = (xr[i] - m) * rs;
            float dn = w[i] * dr[i];
            dn_mean += dn;
            dn_xhat_mean += dn * xhat;
        }
        for (int l = 0; l < 16; l++) { dn_mean += la[l]; dn_xhat_mean += lb[l]; }
        dn_mean /= (float)C;
        dn_xhat_mean /= (float)C;
#define MT__LN_DX(i) (rs * (w[i] * dr[i] - dn_mean - (xr[i] - m) * rs * dn_xhat_mean))
        if (acc) MT_VEC_FOR(i, C, d[i] += MT__LN_DX(i));
        else     MT_VEC_FOR(i, C, d[i] = MT__LN_DX(i));
#undef MT__LN_DX
    }
}

/* dw (C) += Σ_rows dout·xhat, db (C) += Σ_rows dout, from dout (rows,C),
 * x (rows,C), mean (rows), rstd (rows). Always adds: parameter gradients
 * accumulate over microbatches. */
void mt_kernel_layernorm_bwd_params(float *restrict dw, float *restrict db,
                                    const float *restrict dout, const float *restrict x,
                                    const float *restrict mean, const float *restrict rstd,
                                    int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * C, *restrict dr = dout + r * C;
        const float m = mean[r], rs = rstd[r];
        MT_VEC_FOR(i, C,
            dw[i] += (xr[i] - m) * rs * dr[i];
            db[i] += dr[i]);
    }
}
