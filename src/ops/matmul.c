/*
 * matmul.c — matrix products and the bias that goes with them.
 *
 * gemm hands straight to Open BLAS's cblas_sgemm in row-major order; the
 * transposes are flags to BLAS, never copies, so a linear layer's backward
 * (dX = dY·W, dW = dYᵀ·X) costs exactly its FLOPs and no extra memory.
 * bias_add and bias_grad are the memory-bound companions of a linear layer.
 * Outputs must not overlap inputs (the pointers are restrict).
 */
#include "ops/kernels.h"
#include "ops/vec_impl.h"

#include <assert.h>
#include <cblas.h>
#include <limits.h>
#include <string.h>

/* C (M,N) = alpha · op(A) (M,K) · op(B) (K,N) + beta · C. With beta == 0, C is
 * only written (BLAS semantics), so it may hold garbage. */
void mt_kernel_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb,
                    float beta, float *C, int64_t ldc) {
    assert(M >= 0 && N >= 0 && K >= 0);
    if (M == 0 || N == 0) return;
    assert(ldc >= N);
    if (K == 0) {
        /* an empty product (a zero-size shard): C = beta·C. BLAS would reject
         * the lda of 0 that a caller may rightly pass here, and do nothing. */
        for (int64_t i = 0; i < M; i++) {
            float *restrict c = C + i * ldc;
            if (beta == 0.0f) memset(c, 0, (size_t)N * sizeof *c);
            else for (int64_t j = 0; j < N; j++) c[j] *= beta;
        }
        return;
    }
    assert(lda >= (ta ? M : K) && ldb >= (tb ? K : N));
    /* Debian's Open BLAS takes 32-bit ints (blasint); larger shapes must be
     * split by the caller rather than silently truncated here. */
    assert(M <= INT_MAX && N <= INT_MAX && K <= INT_MAX);
    assert(lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

/* out (rows,OC) += bias (OC) on every row. */
void mt_kernel_bias_add(float *restrict out, const float *restrict bias, int64_t rows, int64_t OC) {
    for (int64_t r = 0; r < rows; r++) {
        float *restrict o = out + r * OC;
        MT_VEC_FOR(j, OC, o[j] += bias[j]);
    }
}

/* dbias (OC) (+)= Σ_rows dout (rows,OC). Rows outer, OC inner: dout streams
 * once, contiguously, and dbias stays in cache. */
void mt_kernel_bias_grad(float *restrict dbias, const float *restrict dout, int64_t rows,
                         int64_t OC, bool acc) {
    if (!acc) memset(dbias, 0, (size_t)OC * sizeof *dbias);
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict d = dout + r * OC;
        MT_VEC_FOR(j, OC, dbias[j] += d[j]);
    }
}
