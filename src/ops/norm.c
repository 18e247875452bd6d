/*
 * norm.c — layer normalisation and RMS normalisation over the last dimension,
 * forward and the two halves of the backward.
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
#include "vec/vec.h"

#include <assert.h>
#include <math.h>

/* The loops are the vector layer's, at the kernel level in use
 * (vec/vec_body.h); kernels.h states the maths. */

void mt_kernel_layernorm_fwd(float *restrict out, float *restrict mean, float *restrict rstd,
                             const float *restrict x, const float *restrict w,
                             const float *restrict b, int64_t rows, int64_t C) {
    assert(C > 0);
    mt__vec()->layernorm_fwd(out, mean, rstd, x, w, b, rows, C);
}

void mt_kernel_layernorm_bwd_input(float *restrict dx, const float *restrict dout,
                                   const float *restrict x, const float *restrict w,
                                   const float *restrict mean, const float *restrict rstd,
                                   int64_t rows, int64_t C, bool acc) {
    assert(C > 0);
    mt__vec()->layernorm_bwd_input(dx, dout, x, w, mean, rstd, rows, C, acc);
}

/* Always adds: parameter gradients accumulate over microbatches. */
void mt_kernel_layernorm_bwd_params(float *restrict dw, float *restrict db,
                                    const float *restrict dout, const float *restrict x,
                                    const float *restrict mean, const float *restrict rstd,
                                    int64_t rows, int64_t C) {
    mt__vec()->layernorm_bwd_params(dw, db, dout, x, mean, rstd, rows, C);
}

/* ======================================================================== */
/* RMS normalisation (LLaMA's): no mean, no bias                             */
/* ======================================================================== */

/* The loops run over 16 lanes (ops/vec_impl.h), so gcc vectorises them; a
 * row's sums depend only on its length, never on how rows were split. */

/* Σ x·y over n floats, sixteen partial sums. */
static float dot16(const float *restrict x, const float *restrict y, int64_t n) {
    float lane[16] = {0};
    int64_t nb = n - n % 16;
    for (int64_t i0 = 0; i0 < nb; i0 += 16)
        for (int l = 0; l < 16; l++) lane[l] += x[i0 + l] * y[i0 + l];
    float s = 0.0f;
    for (int64_t i = nb; i < n; i++) s += x[i] * y[i];
    for (int l = 0; l < 16; l++) s += lane[l];
    return s;
}

/* Σ x·y·z over n floats, as dot16. */
static float dot3_16(const float *restrict x, const float *restrict y, const float *restrict z,
                     int64_t n) {
    float lane[16] = {0};
    int64_t nb = n - n % 16;
    for (int64_t i0 = 0; i0 < nb; i0 += 16)
        for (int l = 0; l < 16; l++) lane[l] += x[i0 + l] * y[i0 + l] * z[i0 + l];
    float s = 0.0f;
    for (int64_t i = nb; i < n; i++) s += x[i] * y[i] * z[i];
    for (int l = 0; l < 16; l++) s += lane[l];
    return s;
}

void mt_kernel_rmsnorm_fwd(float *restrict out, float *restrict rstd, const float *restrict x,
                           const float *restrict w, int64_t rows, int64_t C, float eps) {
    assert(C > 0);
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * C;
        float *restrict o = out + r * C;
        const float rs = 1.0f / sqrtf(dot16(xr, xr, C) / (float)C + eps);
        MT_VEC_FOR(i, C, o[i] = xr[i] * rs * w[i]);
        rstd[r] = rs;
    }
}

/* y = x·r·w with r = (mean x² + eps)^(-1/2), dr/dx_j = -r³·x_j/C, so
 * dx_j = r·w_j·dout_j - r·xhat_j · mean_C(dout·w·xhat). */
void mt_kernel_rmsnorm_bwd_input(float *restrict dx, const float *restrict dout,
                                 const float *restrict x, const float *restrict w,
                                 const float *restrict rstd, int64_t rows, int64_t C, bool acc) {
    assert(C > 0);
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * C, *restrict dr = dout + r * C;
        float *restrict d = dx + r * C;
        const float rs = rstd[r];
        /* mean_C(dout·w·xhat) = rs · mean_C(dout·w·x) */
        const float k = rs * rs * rs * dot3_16(dr, w, xr, C) / (float)C;
        if (acc) MT_VEC_FOR(i, C, d[i] += rs * w[i] * dr[i] - k * xr[i]);
        else     MT_VEC_FOR(i, C, d[i] = rs * w[i] * dr[i] - k * xr[i]);
    }
}

/* Always adds: parameter gradients accumulate over microbatches. */
void mt_kernel_rmsnorm_bwd_params(float *restrict dw, const float *restrict dout,
                                  const float *restrict x, const float *restrict rstd,
                                  int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * C, *restrict dr = dout + r * C;
        const float rs = rstd[r];
        MT_VEC_FOR(i, C, dw[i] += dr[i] * xr[i] * rs);
    }
}
