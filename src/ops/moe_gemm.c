/*
 * moe_gemm.c — the grouped expert product (ops/moe.h; ../shared/MOE.md
 * §4.6): each local expert's product over its own rows of an expert-major
 * buffer, and the backward, one cblas_sgemm per group through
 * mt_kernel_gemm as the dense products. A group of zero rows runs no
 * product (Open BLAS's sgemm with K = 0 need not scale its output, so a
 * weight gradient of such a group is written here).
 */
#include "ops/moe.h"
#include "ops/kernels.h"

#include <string.h>

void mt_moe_gemm_fwd(float *y, const float *x, const float *w, const int32_t *sizes,
                     int64_t el, int64_t C, int64_t OC, bool acc) {
    int64_t r0 = 0;
    for (int64_t e = 0; e < el; e++) {
        const int64_t n = sizes[e];
        /* y_e (n,OC) (+)= x_e (n,C) · w_e (C,OC) */
        if (n > 0)
            mt_kernel_gemm(false, false, n, OC, C, 1.0f, x + r0 * C, C, w + e * C * OC, OC,
                           acc ? 1.0f : 0.0f, y + r0 * OC, OC);
        r0 += n;
    }
}

void mt_moe_gemm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                     const int32_t *sizes, int64_t el, int64_t C, int64_t OC, bool acc) {
    int64_t r0 = 0;
    for (int64_t e = 0; e < el; e++) {
        const int64_t n = sizes[e];
        float *dwe = dw ? dw + e * C * OC : NULL;
        if (n == 0) {
            if (dwe && !acc) memset(dwe, 0, (size_t)(C * OC) * sizeof *dwe);
            continue;
        }
        /* dx_e (n,C) (+)= dy_e (n,OC) · w_eᵀ (OC,C) */
        if (dx)
            mt_kernel_gemm(false, true, n, C, OC, 1.0f, dy + r0 * OC, OC, w + e * C * OC, OC,
                           acc ? 1.0f : 0.0f, dx + r0 * C, C);
        /* dw_e (C,OC) (+)= x_eᵀ (C,n) · dy_e (n,OC) */
        if (dwe)
            mt_kernel_gemm(true, false, C, OC, n, 1.0f, x + r0 * C, C, dy + r0 * OC, OC,
                           acc ? 1.0f : 0.0f, dwe, OC);
        r0 += n;
    }
}
