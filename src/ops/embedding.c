/*
 * embedding.c — table lookup (gather) and its backward (scatter-add).
 *
 * The forward copies whole rows; the backward adds whole rows, and always adds,
 * because the same id may appear many times in a batch (every occurrence
 * contributes) and parameter gradients accumulate over microbatches. The
 * table size V is not passed, so an id is only checked to be non-negative;
 * the data loader owns the upper bound. Outputs must not overlap inputs.
 */
#include "ops/kernels.h"
#include "ops/vec_impl.h"

#include <assert.h>
#include <string.h>

/* out (n,C) = table (V,C)[ids (n)]. */
void mt_kernel_embedding_fwd(float *restrict out, const float *restrict table,
                             const int32_t *restrict ids, int64_t n, int64_t C) {
    for (int64_t i = 0; i < n; i++) {
        assert(ids[i] >= 0);
        memcpy(out + i * C, table + (int64_t)ids[i] * C, (size_t)C * sizeof *out);
    }
}

/* dtable (V,C) += dout (n,C) scattered to the rows ids (n). */
void mt_kernel_embedding_bwd(float *restrict dtable, const float *restrict dout,
                             const int32_t *restrict ids, int64_t n, int64_t C) {
    for (int64_t i = 0; i < n; i++) {
        assert(ids[i] >= 0);
        float *restrict d = dtable + (int64_t)ids[i] * C;
        const float *restrict g = dout + i * C;
        MT_VEC_FOR(j, C, d[j] += g[j]);
    }
}

void mt_kernel_embedding_fwd_masked(float *restrict out, const float *restrict table,
                                    const int32_t *restrict ids, int64_t n, int64_t C, int64_t lo,
                                    int64_t V) {
    for (int64_t i = 0; i < n; i++) {
        int64_t r = (int64_t)ids[i] - lo;
        if (r >= 0 && r < V) memcpy(out + i * C, table + r * C, (size_t)C * sizeof *out);
        else memset(out + i * C, 0, (size_t)C * sizeof *out);
    }
}

void mt_kernel_embedding_bwd_masked(float *restrict dtable, const float *restrict dout,
                                    const int32_t *restrict ids, int64_t n, int64_t C, int64_t lo,
                                    int64_t V) {
    for (int64_t i = 0; i < n; i++) {
        int64_t r = (int64_t)ids[i] - lo;
        if (r < 0 || r >= V) continue;
        float *restrict d = dtable + r * C;
        const float *restrict g = dout + i * C;
        MT_VEC_FOR(j, C, d[j] += g[j]);
    }
}
