/*
 * comm_dims.c — the dimensioned collectives (all_gather, psum_scatter and
 * all_to_all along a dimension of an N-D array): the flat collective plus a
 * local rearrangement in the ctx's scratch buffer.
 */
#include "comm/coll_impl.h"

#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Dimensioned forms                                                         */
/* ======================================================================== */

static void *scratch(mt_ctx *ctx, size_t bytes) {
    if (bytes > ctx->scratch_bytes) {
        void *p = realloc(ctx->scratch, bytes);
        if (!p) return NULL;
        ctx->scratch = p;
        ctx->scratch_bytes = bytes;
    }
    return ctx->scratch;
}

static mt_status check_shape(const char *what, int ndim, const int64_t *shape, int dim, int dim_max) {
    if (ndim < 1 || ndim > 8 || !shape)
        return mt_fail(MT_EINVAL, "%s: %d dims; give 1 to 8", what, ndim);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return mt_fail(MT_EINVAL, "%s: dim %d has size %lld", what, i,
                                         (long long)shape[i]);
    if (dim < 0 || dim > dim_max)
        return mt_fail(MT_EINVAL, "%s: dim %d is out of range for %d dims", what, dim, ndim);
    return MT_OK;
}

/* Π shape[from:to]; callers first check the whole product with
 * check_elems, so no partial product of a non-empty shape overflows */
static size_t prod(const int64_t *shape, int from, int to) {
    size_t p = 1;
    for (int i = from; i < to; i++) p *= (size_t)shape[i];
    return p;
}

/* *elems = Π shape (0 if any dim is 0), and P·elems·es·copies (the scratch
 * and receive bytes) must fit in size_t: a wrapped product would move a
 * wrong amount (0 elements: MT_OK for nothing) or overrun the scratch. */
static mt_status check_elems(const char *what, int ndim, const int64_t *shape, size_t P,
                             size_t es, size_t copies, size_t *elems) {
    size_t n = 1, bytes = 0;
    bool over = false;
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) { *elems = 0; return MT_OK; }
    for (int i = 0; i < ndim; i++) over |= __builtin_mul_overflow(n, (size_t)shape[i], &n);
    over = over || __builtin_mul_overflow(n, P, &bytes) || __builtin_mul_overflow(bytes, es, &bytes) ||
           __builtin_mul_overflow(bytes, copies, &bytes);
    if (over) {
        char text[8 * 24];
        size_t off = 0;
        for (int i = 0; i < ndim && off < sizeof text; i++)
            off += (size_t)snprintf(text + off, sizeof text - off, "%s%lld", i ? ", " : "",
                                    (long long)shape[i]);
        return mt_fail(MT_EINVAL, "%s: shape (%s) of %zu-byte elements is too large: its "
                       "buffers would need more bytes than memory can address", what, text, es);
    }
    *elems = n;
    return MT_OK;
}

/* out (outer, P, inner) ← in (P, outer, inner), elements of `es` bytes */
static void swap_outer(void *out, const void *in, size_t P, size_t outer, size_t inner_bytes) {
    for (size_t p = 0; p < P; p++)
        for (size_t o = 0; o < outer; o++)
            memcpy((char *)out + (o * P + p) * inner_bytes,
                   (const char *)in + (p * outer + o) * inner_bytes, inner_bytes);
}

mt_status mt_all_gather_dim(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, mt_dtype dtype,
                            int ndim, const int64_t *shape, int dim, bool tiled) {
    mt_status st;
    mt_group *g;
    if ((st = mt__coll_prologue(ctx, axes, &g)) || (st = mt__check_dtype("all_gather", dtype)) ||
        (st = check_shape("all_gather", ndim, shape, dim, tiled ? ndim - 1 : ndim)))
        return st;
    /* tiled (…, P·s, …) and stacked (…, P, s, …) are the same bytes:
     * recv (outer, P, inner) with outer = Π shape[:dim], inner = Π shape[dim:] */
    size_t P = (size_t)g->size, es = mt_dtype_size(dtype), count;
    if ((st = check_elems("all_gather", ndim, shape, P, es, 1, &count))) return st;
    if (count == 0) return mt__do_all_gather(ctx, axes, send, recv, 0, dtype);
    size_t outer = prod(shape, 0, dim), inner = prod(shape, dim, ndim);
    if (outer == 1 || P == 1)
        return mt__do_all_gather(ctx, axes, send, recv, count, dtype);
    void *tmp = scratch(ctx, P * count * es);
    if (!tmp) return mt_fail(MT_ENOMEM, "all_gather: no scratch for %zu bytes", P * count * es);
    if ((st = mt__do_all_gather(ctx, axes, send, tmp, count, dtype)) != MT_OK) return st;
    swap_outer(recv, tmp, P, outer, inner * es);
    return MT_OK;
}

mt_status mt_psum_scatter_dim(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                              mt_dtype dtype, int ndim, const int64_t *shape, int dim, bool tiled) {
    mt_status st;
    mt_group *g;
    if ((st = mt__coll_prologue(ctx, axes, &g)) || (st = mt__check_dtype("psum_scatter", dtype)) ||
        (st = check_shape("psum_scatter", ndim, shape, dim, ndim - 1)))
        return st;
    size_t P = (size_t)g->size;
    if (tiled && shape[dim] % (int64_t)P != 0)
        return mt_fail(MT_ESHAPE, "psum_scatter over %s: dim %d of size %lld does not split into "
                       "%zu blocks (the group size); pad it to a multiple of %zu", g->label, dim,
                       (long long)shape[dim], P, P);
    if (!tiled && shape[dim] != (int64_t)P)
        return mt_fail(MT_ESHAPE, "psum_scatter over %s (untiled): dim %d has size %lld but the "
                       "group has %zu devices; it must equal the group size (or use tiled)",
                       g->label, dim, (long long)shape[dim], P);
    /* send (outer, P, block) → (P, outer, block); untiled is tiled with s/P = 1.
     * send holds P·count elements: checking it bounds every product below */
    size_t es = mt_dtype_size(dtype), total;
    if ((st = check_elems("psum_scatter", ndim, shape, 1, es, 1, &total))) return st;   /* P·count = total */
    size_t count = total / P;
    if (count == 0) return mt__do_psum_scatter(ctx, axes, send, recv, 0, dtype);
    size_t outer = prod(shape, 0, dim);
    size_t block = (size_t)shape[dim] / P * prod(shape, dim + 1, ndim);
    if (outer == 1 || P == 1)
        return mt__do_psum_scatter(ctx, axes, send, recv, count, dtype);
    void *tmp = scratch(ctx, P * count * es);
    if (!tmp) return mt_fail(MT_ENOMEM, "psum_scatter: no scratch for %zu bytes", P * count * es);
    swap_outer(tmp, send, outer, P, block * es);
    return mt__do_psum_scatter(ctx, axes, tmp, recv, count, dtype);
}

mt_status mt_all_to_all_dim(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, mt_dtype dtype,
                            int ndim, const int64_t *shape, int split_dim, int concat_dim) {
    mt_status st;
    mt_group *g;
    if ((st = mt__coll_prologue(ctx, axes, &g)) || (st = mt__check_dtype("all_to_all", dtype)) ||
        (st = check_shape("all_to_all", ndim, shape, split_dim, ndim - 1)) ||
        (st = check_shape("all_to_all", ndim, shape, concat_dim, ndim - 1)))
        return st;
    size_t P = (size_t)g->size, es = mt_dtype_size(dtype);
    if (shape[split_dim] % (int64_t)P != 0)
        return mt_fail(MT_ESHAPE, "all_to_all over %s: split dim %d of size %lld does not split "
                       "into %zu blocks (the group size); pad it to a multiple of %zu", g->label,
                       split_dim, (long long)shape[split_dim], P, P);
    /* block shape: shape with the split dim divided by P */
    int64_t bshape[8];
    memcpy(bshape, shape, (size_t)ndim * sizeof *bshape);
    bshape[split_dim] /= (int64_t)P;
    /* scratch: packed and received, P blocks (of count) each = 2 · Π shape */
    size_t total;
    if ((st = check_elems("all_to_all", ndim, shape, 1, es, 2, &total))) return st;
    size_t count = total / P;
    if (P == 1 || count == 0) {
        if (count && send != recv) memcpy(recv, send, count * es);
        return mt_all_to_all(ctx, axes, send, recv, 0, dtype);
    }
    char *tmp = scratch(ctx, 2 * P * count * es);
    if (!tmp) return mt_fail(MT_ENOMEM, "all_to_all: no scratch for %zu bytes", 2 * P * count * es);
    char *packed = tmp, *got = tmp + P * count * es;
    /* send (outer_s, P, inner_s) → packed (P, outer_s, inner_s): block j goes to rank j */
    swap_outer(packed, send, prod(shape, 0, split_dim), P, prod(bshape, split_dim, ndim) * es);
    if ((st = mt_all_to_all(ctx, axes, packed, got, count, dtype)) != MT_OK) return st;
    /* got (P, outer_c, inner_c) of blocks → recv (outer_c, P, inner_c): concat on concat_dim */
    swap_outer(recv, got, P, prod(bshape, 0, concat_dim), prod(bshape, concat_dim, ndim) * es);
    return MT_OK;
}
