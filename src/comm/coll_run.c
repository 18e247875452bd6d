/*
 * coll_run.c — the flat collectives run on their group: argument checks, the
 * record (record.c), and the call into the transport. A group of one never
 * reaches the transport (its contract): the copy, zero fill or nothing it
 * needs happens here.
 *
 * Nothing here completes the asynchronous queue: the public forms (comm.c,
 * comm_dims.c) do that first (mt__coll_prologue), and the queue (async.c)
 * runs its queued requests through these. So this file sits below both,
 * and neither calls back into the other.
 */
#include "comm/coll_impl.h"

#include <string.h>

/* ======================================================================== */
/* Argument checks                                                           */
/* ======================================================================== */

mt_status mt__check_dtype(const char *what, mt_dtype dtype) {
    if (dtype != MT_F32 && dtype != MT_BF16 && dtype != MT_I32)
        return mt_fail(MT_EINVAL, "%s: unknown dtype %d; use MT_F32, MT_BF16 or MT_I32", what,
                       (int)dtype);
    return MT_OK;
}

/* ======================================================================== */
/* Reductions                                                                */
/* ======================================================================== */

mt_status mt__do_all_reduce(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype,
                            mt_reduce_op op, bool mean) {
    const char *what = mean ? "pmean" : "all_reduce";
    mt_status st;
    if ((st = mt__check_dtype(what, dtype)) || (st = mt__check_buf(what, "buf", buf, count)) ||
        (st = mt__check_size(what, count, 1, dtype)))
        return st;
    if (op != MT_REDUCE_SUM && op != MT_REDUCE_MAX && op != MT_REDUCE_MIN)
        return mt_fail(MT_EINVAL, "all_reduce: unknown reduction %d", (int)op);
    mt_group *g;
    if ((st = mt__ctx_group(ctx, axes, &g)) != MT_OK) return st;
    mt_coll_desc d = {.kind = MT_COLL_ALL_REDUCE | (int)op << 4 | (mean ? MT_COLL_MEAN : 0),
                      .dtype = dtype, .count = count, .bytes = count * mt_dtype_size(dtype)};
    st = mt__coll_begin(ctx, g, &d);
    if (st == MT_OK && g->size > 1)
        st = ctx->launch->ops->all_reduce(ctx, g, buf, count, dtype, op);
    if (st == MT_OK && mean && g->size > 1) {
        float *x = buf;
        float P = (float)g->size;
        for (size_t i = 0; i < count; i++) x[i] /= P;
    }
    return mt__coll_end(ctx, g, &d, st);
}

/* ======================================================================== */
/* Block collectives: all_gather, psum_scatter, all_to_all                   */
/* ======================================================================== */

mt_status mt__do_blocks(mt_ctx *ctx, mt_group *g, int kind, const void *send, void *recv,
                        size_t count, mt_dtype dtype) {
    const char *what = mt__coll_name(kind);
    mt_status st;
    if ((st = mt__check_dtype(what, dtype)) || (st = mt__check_buf(what, "send", send, count)) ||
        (st = mt__check_buf(what, "recv", recv, count)) ||
        (st = mt__check_size(what, count, (size_t)g->size, dtype)))
        return st;
    size_t bytes = count * mt_dtype_size(dtype);
    /* the size as nccl-tests counts it: the whole buffer (the all-gather's
     * output, the reduce-scatter's input, the all-to-all's) */
    mt_coll_desc d = {.kind = kind, .dtype = dtype, .count = count,
                      .bytes = bytes * (size_t)g->size};
    st = mt__coll_begin(ctx, g, &d);
    if (st == MT_OK) {
        const mt_transport_ops *ops = ctx->launch->ops;
        if (g->size == 1) {
            if (bytes && send != recv) memcpy(recv, send, bytes);
        } else if (kind == MT_COLL_ALL_GATHER) {
            st = ops->all_gather(ctx, g, send, recv, bytes);
        } else if (kind == MT_COLL_REDUCE_SCATTER) {
            st = ops->reduce_scatter(ctx, g, send, recv, count, dtype, MT_REDUCE_SUM);
        } else {
            st = ops->all_to_all(ctx, g, send, recv, bytes);
        }
    }
    return mt__coll_end(ctx, g, &d, st);
}

/* mt__do_blocks over `axes`. */
static mt_status do_blocks_over(mt_ctx *ctx, mt_axes axes, int kind, const void *send,
                                void *recv, size_t count, mt_dtype dtype) {
    mt_group *g;
    mt_status st = mt__ctx_group(ctx, axes, &g);
    return st != MT_OK ? st : mt__do_blocks(ctx, g, kind, send, recv, count, dtype);
}

mt_status mt__do_all_gather(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                            size_t count, mt_dtype dtype) {
    return do_blocks_over(ctx, axes, MT_COLL_ALL_GATHER, send, recv, count, dtype);
}

mt_status mt__do_psum_scatter(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                              size_t count, mt_dtype dtype) {
    return do_blocks_over(ctx, axes, MT_COLL_REDUCE_SCATTER, send, recv, count, dtype);
}

/* ======================================================================== */
/* ppermute                                                                  */
/* ======================================================================== */

mt_status mt__permute_route(const mt_group *g, const int (*pairs)[2], int n_pairs, int *dest,
                            int *src, uint64_t *hash) {
    if (n_pairs < 0 || (n_pairs > 0 && !pairs))
        return mt_fail(MT_EINVAL, "ppermute: %d pairs at %p", n_pairs, (const void *)pairs);
    *dest = -1;
    *src = -1;
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < n_pairs; k++) {
        int s = pairs[k][0], t = pairs[k][1];
        if (s < 0 || s >= g->size || t < 0 || t >= g->size)
            return mt_fail(MT_EINVAL, "ppermute over %s: pair %d {%d,%d} names a rank outside the "
                           "group of %d", g->label, k, s, t, g->size);
        for (int j = 0; j < k; j++) {
            if (pairs[j][0] == s)
                return mt_fail(MT_EINVAL, "ppermute over %s: pair %d {%d,%d} repeats source %d "
                               "(pair %d is {%d,%d}); each rank may send at most once", g->label,
                               k, s, t, s, j, pairs[j][0], pairs[j][1]);
            if (pairs[j][1] == t)
                return mt_fail(MT_EINVAL, "ppermute over %s: pair %d {%d,%d} repeats destination "
                               "%d (pair %d is {%d,%d}); each rank may receive at most once",
                               g->label, k, s, t, t, j, pairs[j][0], pairs[j][1]);
        }
        if (s == g->rank) *dest = t;
        if (t == g->rank) *src = s;
        h = (h ^ (uint64_t)(s * 4099 + t)) * 1099511628211ull;
    }
    *hash = h;
    return MT_OK;
}

mt_status mt__do_ppermute(mt_ctx *ctx, mt_group *g, const void *send, void *recv, size_t count,
                          mt_dtype dtype, int dest, int src, uint64_t hash) {
    size_t bytes = count * mt_dtype_size(dtype);
    mt_coll_desc d = {.kind = MT_COLL_PERMUTE, .dtype = dtype, .count = count, .bytes = bytes,
                      .extra = hash};
    mt_status st = mt__coll_begin(ctx, g, &d);
    if (st == MT_OK) {
        if (g->size > 1) {
            st = ctx->launch->ops->permute(ctx, g, send, recv, bytes, dest, src);
        } else if (bytes) {
            if (src == 0) { if (send != recv) memcpy(recv, send, bytes); }
            else memset(recv, 0, bytes);
        }
    }
    return mt__coll_end(ctx, g, &d, st);
}
