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
                     int64_t el, int64_t I, int64_t O, bool acc) {
    int64_t r0 = 0;
    for (int64_t e = 0; e < el; e++) {
        const int64_t n = sizes[e];
        /* y_e (n,O) (+)= x_e (n,I) · w_e (I,O) */
        if (n > 0)
            mt_kernel_gemm(false, false, n, O, I, 1.0f, x + r0 * I, I, w + e * I * O, O,
                           acc ? 1.0f : 0.0f, y + r0 * O, O);
        r0 += n;
    }
}

void mt_moe_gemm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                     const int32_t *sizes, int64_t el, int64_t I, int64_t O, bool acc) {
    int64_t r0 = 0;
    for (int64_t e = 0; e < el; e++) {
        const int64_t n = sizes[e];
        float *dwe = dw ? dw + e * I * O : NULL;
        if (n == 0) {
            if (dwe && !acc) memset(dwe, 0, (size_t)(I * O) * sizeof *dwe);
            continue;
        }
        /* dx_e (n,I) (+)= dy_e (n,O) · w_eᵀ (O,I) */
        if (dx)
            mt_kernel_gemm(false, true, n, I, O, 1.0f, dy + r0 * O, O, w + e * I * O, O,
                           acc ? 1.0f : 0.0f, dx + r0 * I, I);
        /* dw_e (I,O) (+)= x_eᵀ (I,n) · dy_e (n,O) */
        if (dwe)
            mt_kernel_gemm(true, false, I, O, n, 1.0f, x + r0 * I, I, dy + r0 * O, O,
                           acc ? 1.0f : 0.0f, dwe, O);
        r0 += n;
    }
}
