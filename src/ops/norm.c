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
#include "vec/vec.h"

#include <assert.h>

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

/* ---- RMS normalisation (LLaMA's): no mean, no bias ------------------------- */

void mt_kernel_rmsnorm_fwd(float *restrict out, float *restrict rstd, const float *restrict x,
                           const float *restrict w, int64_t rows, int64_t C, float eps) {
    assert(C > 0);
    mt__vec()->rmsnorm_fwd(out, rstd, x, w, rows, C, eps);
}

void mt_kernel_rmsnorm_bwd_input(float *restrict dx, const float *restrict dout,
                                 const float *restrict x, const float *restrict w,
                                 const float *restrict rstd, int64_t rows, int64_t C, bool acc) {
    assert(C > 0);
    mt__vec()->rmsnorm_bwd_input(dx, dout, x, w, rstd, rows, C, acc);
}

/* Always adds: parameter gradients accumulate over microbatches. */
void mt_kernel_rmsnorm_bwd_params(float *restrict dw, const float *restrict dout,
                                  const float *restrict x, const float *restrict rstd,
                                  int64_t rows, int64_t C) {
    mt__vec()->rmsnorm_bwd_params(dw, dout, x, rstd, rows, C);
}
