/*
 * gemm_pool.c — the pool-parallel product every matmul op runs (op_table.c's
 * matmul, gemm and linear; the CPU backend's bf16 products' f32 fallback,
 * src/backend/matmul_bf16.c; the collective matmuls' blocks,
 * collective_matmul.c), and a product call's shape. Below all of them, so
 * that none calls back into the table that names it.
 */
#include "ops/kernels.h"
#include "ops/ops_impl.h"

void mt__product_shape(const mt_op_call *c, bool *ta, bool *tb, int64_t *M, int64_t *N,
                       int64_t *K) {
    if (c->op == MT_OP_LINEAR) {   /* x (rows,C) · w (OC,C)ᵀ */
        *ta = false, *tb = true;
        *M = c->p.linear.rows, *N = c->p.linear.OC, *K = c->p.linear.C;
    } else {
        *ta = c->p.gemm.ta, *tb = c->p.gemm.tb;
        *M = c->p.gemm.M, *N = c->p.gemm.N, *K = c->p.gemm.K;
    }
}

/* MATMUL, GEMM and LINEAR run as blocks of C, one per kernel thread, each a
 * single-threaded sgemm: rows of C when M is the larger side, else columns. */
typedef struct {
    bool         ta, tb, split_rows;
    int64_t      M, N, K, block;
    const float *A, *B, *bias;
    float       *C;
    float        beta;
} gemm_job;

static void range_gemm(void *arg, int64_t b0, int64_t b1, int w) {
    const gemm_job *j = arg;
    int64_t lda = j->ta ? j->M : j->K, ldb = j->tb ? j->K : j->N;
    int64_t lo = b0 * j->block, hi = b1 * j->block;
    if (j->split_rows) {
        if (hi > j->M) hi = j->M;
        const float *A = j->ta ? j->A + lo : j->A + lo * lda;
        mt_kernel_gemm(j->ta, j->tb, hi - lo, j->N, j->K, 1.0f, A, lda, j->B, ldb, j->beta,
                       j->C + lo * j->N, j->N);
        if (j->bias) mt_kernel_bias_add(j->C + lo * j->N, j->bias, hi - lo, j->N);
    } else {
        if (hi > j->N) hi = j->N;
        const float *B = j->tb ? j->B + lo * ldb : j->B + lo;
        mt_kernel_gemm(j->ta, j->tb, j->M, hi - lo, j->K, 1.0f, j->A, lda, B, ldb, j->beta,
                       j->C + lo, j->N);
        /* a column block of a biased product: add the bias slice row by row */
        for (int64_t r = 0; j->bias && r < j->M; r++)
            mt_kernel_bias_add(j->C + r * j->N + lo, j->bias + lo, 1, hi - lo);
    }
}

void mt__gemm_pool(const mt_op_env *env, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                   const float *A, const float *B, const float *bias, float *C, float beta) {
    gemm_job j = {ta, tb, M >= N, M, N, K, 16, A, B, bias, C, beta};
    int64_t side = j.split_rows ? M : N;
    /* blocks of 16 (a multiple of the sgemm micro-kernel) and at least ~1
     * MFLOP each: a smaller product is not worth a second thread */
    int64_t min_blocks = (int64_t)(1e6 / (2.0 * (double)(j.split_rows ? N : M) * (double)K * 16)) + 1;
    mt_pool_run(env->pool, (side + 15) / 16, min_blocks, range_gemm, &j);
}
