/*
 * moe_dispatch.c — MoE dispatch and combine on one device (ops/moe.h;
 * ../shared/MOE.md §4): the stable sort of (token, slot) pairs by expert,
 * the source-major -> expert-major reorder of received rows, the gathers
 * and scatters between token order and expert order, and the combine with
 * its backward.
 *
 * Every sum over a token's slots is taken in slot order in double and
 * rounded once: the result does not depend on where the rows were sorted
 * to (one device or P_e), which is what lets expert parallelism match the
 * one-device run bitwise.
 */
#include "ops/moe.h"
#include "ops/vec_impl.h"

#include <assert.h>
#include <math.h>
#include <string.h>

void mt_moe_sort(int32_t *order, int32_t *pos, int32_t *counts, const int32_t *ids, int64_t T,
                 int64_t k, int64_t E) {
    const int64_t N = T * k;
    memset(counts, 0, (size_t)E * sizeof *counts);
    for (int64_t r = 0; r < N; r++) {
        assert(ids[r] >= -1 && ids[r] < E);
        if (ids[r] >= 0) counts[ids[r]]++;
    }
    /* counts -> the first row of each expert (an exclusive prefix sum);
     * pos[r] = its expert's next free row, in (t, j) order: stable */
    int32_t start = 0;
    for (int64_t e = 0; e < E; e++) {
        const int32_t c = counts[e];
        counts[e] = start;
        start += c;
    }
    assert(start <= N);
    for (int64_t r = 0; r < N; r++) pos[r] = ids[r] >= 0 ? counts[ids[r]]++ : -1;
    /* counts[e] is now the end of expert e's rows: back to counts */
    for (int64_t e = E - 1; e > 0; e--) counts[e] -= counts[e - 1];
    for (int64_t r = start; r < N; r++) order[r] = -1;   /* past the kept pairs: padding */
    for (int64_t r = 0; r < N; r++)
        if (pos[r] >= 0) order[pos[r]] = (int32_t)r;
}

void mt_moe_dispatch_fwd(float *xs, const float *x, const int32_t *order, int64_t N, int64_t k,
                         int64_t D) {
    for (int64_t r = 0; r < N; r++)
        if (order[r] < 0)
            memset(xs + r * D, 0, (size_t)D * sizeof *xs);
        else
            memcpy(xs + r * D, x + (int64_t)(order[r] / k) * D, (size_t)D * sizeof *xs);
}

/* The elements a token's slot sums take at a time, in doubles on the stack. */
#define SLOT_CHUNK 256

/* out (D) (+)= Σ over a token's k slots j with pos[j] >= 0, in slot order,
 * of g_j · rows[pos[j]] (g NULL: 1), each element summed in double and
 * rounded once. A slot row at a time, so the loops run down contiguous
 * rows, in blocks of 16 (MT_VEC_FOR: gcc at -O2 vectorises no loop of
 * unknown length); each element's sum is the same in the same order as an
 * element at a time (a float product is exact in double, fused or not). */
static void slot_sum(float *restrict out, const float *rows, const int32_t *pos,
                     const float *g, int64_t k, int64_t D, bool acc) {
    double s[SLOT_CHUNK];
    for (int64_t d0 = 0; d0 < D; d0 += SLOT_CHUNK) {
        const int64_t n = D - d0 < SLOT_CHUNK ? D - d0 : SLOT_CHUNK;
        MT_VEC_FOR(i, n, s[i] = 0.0);
        for (int64_t j = 0; j < k; j++) {
            if (pos[j] < 0) continue;
            const float *restrict r = rows + (int64_t)pos[j] * D + d0;
            if (g) {
                const double gj = g[j];
                MT_VEC_FOR(i, n, s[i] += gj * (double)r[i]);
            } else {
                MT_VEC_FOR(i, n, s[i] += (double)r[i]);
            }
        }
        float *restrict o = out + d0;
        if (acc) MT_VEC_FOR(i, n, o[i] += (float)s[i]);
        else MT_VEC_FOR(i, n, o[i] = (float)s[i]);
    }
}

/* The tokens ahead whose slot rows are asked for while a token sums its
 * own: the rows lie anywhere in a buffer past the L2 (sorted by expert),
 * and no hardware prefetcher follows them. */
#define AHEAD 4

/* Asks for token t's slot rows (the first 1024 floats of each). */
static void prefetch_rows(const float *rows, const int32_t *pos, int64_t t, int64_t T, int64_t k,
                          int64_t D) {
    if (t >= T) return;
    for (int64_t j = 0; j < k; j++) {
        if (pos[t * k + j] < 0) continue;
        const float *r = rows + (int64_t)pos[t * k + j] * D;
        for (int64_t d = 0; d < D && d < 1024; d += 16) __builtin_prefetch(r + d, 0, 3);
    }
}

void mt_moe_dispatch_bwd(float *dx, const float *dxs, const int32_t *pos, int64_t T, int64_t k,
                         int64_t D, bool acc) {
    for (int64_t t = 0; t < T; t++) {
        prefetch_rows(dxs, pos, t + AHEAD, T, k, D);
        slot_sum(dx + t * D, dxs, pos + t * k, NULL, k, D, acc);
    }
}

void mt_moe_combine_fwd(float *out, const float *y, const float *gates, const int32_t *pos,
                        int64_t T, int64_t k, int64_t D, bool acc) {
    for (int64_t t = 0; t < T; t++) {
        prefetch_rows(y, pos, t + AHEAD, T, k, D);
        slot_sum(out + t * D, y, pos + t * k, gates + t * k, k, D, acc);
    }
}

/* Σ a·b over a, b (n) in double: eight running sums (element i in sum i mod
 * 8, so the loop vectorises), added in order, then the tail. It depends on
 * n alone: the same bits wherever the rows lie. */
static double dot_f64(const float *restrict a, const float *restrict b, int64_t n) {
    double s8[8] = {0}, s = 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) s8[l] += (double)a[i + l] * (double)b[i + l];
    for (int l = 0; l < 8; l++) s += s8[l];
    for (; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

/* row (D) (+)= g · o (D). The restrict parameters are what lets gcc
 * vectorise it: it does not trust a block-scope restrict pointer, and at
 * -O2 versions no loop for aliasing. */
static void scaled_row(float *restrict row, const float *restrict o, float g, int64_t D,
                       bool acc) {
    if (acc) MT_VEC_FOR(d, D, row[d] += g * o[d]);
    else MT_VEC_FOR(d, D, row[d] = g * o[d]);
}

void mt_moe_combine_bwd_dy(float *dy, const float *dout, const float *gates,
                           const int32_t *order, int64_t N, int64_t k, int64_t D, bool acc) {
    for (int64_t r = 0; r < N; r++) {
        const int32_t p = order[r];
        if (p < 0) {   /* no pair: the grouped product's weight gradient reads a zero row */
            if (!acc) memset(dy + r * D, 0, (size_t)D * sizeof *dy);
            continue;
        }
        /* the pair's token p / k in 32 bits (pairs are int32): a quicker division */
        scaled_row(dy + r * D, dout + (int64_t)(p / (int32_t)k) * D, gates[p], D, acc);
    }
}

void mt_moe_combine_bwd_dgates(float *dgates, const float *dout, const float *y,
                               const int32_t *pos, int64_t T, int64_t k, int64_t D, bool acc) {
    for (int64_t t = 0; t < T; t++) {
        prefetch_rows(y, pos, t + AHEAD, T, k, D);
        for (int64_t j = 0; j < k; j++) {
            const int64_t row = (int64_t)pos[t * k + j] * D;
            float *dg = dgates + t * k + j;
            if (row < 0) {   /* dropped: no row, no gate gradient */
                if (!acc) *dg = 0.0f;
                continue;
            }
            const float dot = (float)dot_f64(dout + t * D, y + row, D);
            *dg = acc ? *dg + dot : dot;
        }
    }
}

void mt_moe_permute_indices(int32_t *idx, int32_t *sizes, const int32_t *counts, int64_t P_e,
                            int64_t el) {
    /* the received buffer holds segment (s, e) at the sum of the counts
     * before it in source-major order */
    int32_t n = 0;
    for (int64_t e = 0; e < el; e++) {
        int32_t size = 0;
        for (int64_t s = 0; s < P_e; s++) {
            int32_t at = 0;
            for (int64_t q = 0; q < s * el + e; q++) at += counts[q];
            for (int32_t r = 0; r < counts[s * el + e]; r++) idx[n++] = at + r;
            size += counts[s * el + e];
        }
        sizes[e] = size;
    }
}

void mt_moe_gather_rows(float *out, const float *in, const int32_t *idx, int64_t n, int64_t D) {
    for (int64_t r = 0; r < n; r++)
        memcpy(out + r * D, in + (int64_t)idx[r] * D, (size_t)D * sizeof *out);
}

void mt_moe_scatter_rows(float *out, const float *in, const int32_t *idx, int64_t n, int64_t D,
                         bool acc) {
    for (int64_t r = 0; r < n; r++) {
        float *o = out + (int64_t)idx[r] * D;
        const float *i = in + r * D;
        for (int64_t d = 0; d < D; d++) o[d] = acc ? o[d] + i[d] : i[d];
    }
}

/* ---- capacity ------------------------------------------------------------ */

int64_t mt_moe_capacity_rows(int64_t T, int64_t k, int64_t E, double cf) {
    return (int64_t)ceil((double)(T * k) / (double)E * cf);
}

/* Pair a comes before pair b: by gate (the higher, then the earlier pair),
 * or by position alone (gates NULL). */
static bool before(int32_t a, int32_t b, const float *gates) {
    if (gates && gates[a] != gates[b]) return gates[a] > gates[b];
    return a < b;
}

/* Sifts a[r] down the heap a[0, end) whose top is the last in `before`
 * order. */
static void sift(int32_t *a, int64_t r, int64_t end, const float *gates) {
    for (int64_t c = 2 * r + 1; c < end; r = c, c = 2 * r + 1) {
        if (c + 1 < end && before(a[c], a[c + 1], gates)) c++;
        if (!before(a[r], a[c], gates)) return;
        const int32_t t = a[r];
        a[r] = a[c], a[c] = t;
    }
}

/* a (n) sorted into `before` order in place (a heap sort: no scratch). */
static void sort_pairs(int32_t *a, int64_t n, const float *gates) {
    for (int64_t i = n / 2 - 1; i >= 0; i--) sift(a, i, n, gates);
    for (int64_t end = n - 1; end > 0; end--) {
        const int32_t t = a[0];
        a[0] = a[end], a[end] = t;
        sift(a, 0, end, gates);
    }
}

int64_t mt_moe_drop(int32_t *out, const int32_t *ids, const float *gates, int64_t S, int64_t L,
                    int64_t k, int64_t E, int64_t C, mt_moe_drop_policy policy,
                    int32_t *scratch) {
    int32_t *order = scratch, *pos = order + E * C, *kept = pos + L * k;
    int64_t dropped = 0;
    for (int64_t s = 0; s < S; s++) {
        const int32_t *in = ids + s * L * k;
        dropped += mt_moe_capacity_layout(order, pos, kept, in, gates ? gates + s * L * k : NULL,
                                          L, k, E, C, policy);
        for (int64_t r = 0; r < L * k; r++) out[s * L * k + r] = pos[r] >= 0 ? in[r] : -1;
    }
    return dropped;
}

int64_t mt_moe_capacity_layout(int32_t *order, int32_t *pos, int32_t *kept, const int32_t *ids,
                               const float *gates, int64_t T, int64_t k, int64_t E, int64_t C,
                               mt_moe_drop_policy policy) {
    const int64_t N = T * k;
    /* the pairs grouped by expert in (t, j) order, in pos for now: kept
     * counts, then walks each expert's next slot, then holds its end */
    memset(kept, 0, (size_t)E * sizeof *kept);
    for (int64_t r = 0; r < N; r++) kept[ids[r]]++;
    int32_t start = 0;
    for (int64_t e = 0; e < E; e++) {
        const int32_t c = kept[e];
        kept[e] = start;
        start += c;
    }
    for (int64_t r = 0; r < N; r++) pos[kept[ids[r]]++] = (int32_t)r;
    /* each expert keeps its first C in policy order, laid out in (t, j)
     * order at its C rows */
    int64_t dropped = 0;
    for (int64_t i = 0; i < E * C; i++) order[i] = -1;
    for (int64_t e = 0, lo = 0; e < E; e++) {
        int32_t *seg = pos + lo;
        const int64_t n = kept[e] - lo, keep = n < C ? n : C;
        if (policy == MT_MOE_DROP_GATE && n > C) {
            sort_pairs(seg, n, gates);
            sort_pairs(seg, keep, NULL);
        }
        for (int64_t i = 0; i < keep; i++) order[e * C + i] = seg[i];
        dropped += n - keep;
        lo = kept[e];
        kept[e] = (int32_t)keep;
    }
    for (int64_t r = 0; r < N; r++) pos[r] = -1;
    for (int64_t i = 0; i < E * C; i++)
        if (order[i] >= 0) pos[order[i]] = (int32_t)i;
    return dropped;
}
