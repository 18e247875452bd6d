/*
 * reduce.c — whole-tensor sums (the forward of sum/mean, and the Σ g² of
 * global-norm gradient clipping) and their backward, a broadcast fill.
 *
 * The sums accumulate in double: they run over whole parameter sets (a GPT-2
 * has 124M of them), where a float accumulator stops absorbing small terms.
 * Eight double partial sums let gcc vectorise a reduction it may not reorder.
 */
#include "ops/kernels.h"
#include "ops/vec_impl.h"

/* Σ x (n), in double. */
double mt_kernel_sum(const float *restrict x, int64_t n) {
    double lane[8] = {0};
    const int64_t nb = n - n % 8;
    for (int64_t i0 = 0; i0 < nb; i0 += 8)
        for (int l = 0; l < 8; l++) lane[l] += (double)x[i0 + l];
    double s = 0.0;
    for (int64_t i = nb; i < n; i++) s += (double)x[i];
    for (int l = 0; l < 8; l++) s += lane[l];
    return s;
}

/* Σ x² (n), in double. */
double mt_kernel_sumsq(const float *restrict x, int64_t n) {
    double lane[8] = {0};
    const int64_t nb = n - n % 8;
    for (int64_t i0 = 0; i0 < nb; i0 += 8)
        for (int l = 0; l < 8; l++) {
            double v = (double)x[i0 + l];
            lane[l] += v * v;
        }
    double s = 0.0;
    for (int64_t i = nb; i < n; i++) s += (double)x[i] * (double)x[i];
    for (int l = 0; l < 8; l++) s += lane[l];
    return s;
}

/* dx (n) (+)= s. */
void mt_kernel_fill(float *restrict dx, float s, int64_t n, bool acc) {
    if (acc) MT_VEC_FOR(i, n, dx[i] += s);
    else     MT_VEC_FOR(i, n, dx[i] = s);
}
