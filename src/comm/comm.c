/*
 * comm.c — the flat collectives (mt_all_reduce .. mt_barrier): the
 * prologue, then the collective on its group (coll_run.c, which checks,
 * records and calls the transport; broadcast and barrier, which nothing
 * else runs, are whole here). The dimensioned forms are in comm_dims.c, the
 * asynchronous ones in async.c.
 *
 * A blocking collective first completes the asynchronous queue (see async.c),
 * so every device runs its collectives in the order it issued them.
 */
#include "comm/coll_impl.h"

#include <string.h>

/* ======================================================================== */
/* The prologue                                                              */
/* ======================================================================== */

mt_status mt__coll_prologue(mt_ctx *ctx, mt_axes axes, mt_group **g) {
    if (ctx->n_pending > 0) {
        mt_status st = mt__flush_pending(ctx, ctx->n_pending);
        if (st != MT_OK) return st;
    }
    return mt__ctx_group(ctx, axes, g);
}

/* ======================================================================== */
/* Reductions                                                                */
/* ======================================================================== */

mt_status mt_all_reduce(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype,
                        mt_reduce_op op) {
    mt_group *g;
    mt_status st = mt__coll_prologue(ctx, axes, &g);
    return st != MT_OK ? st : mt__do_all_reduce(ctx, axes, buf, count, dtype, op, false);
}

mt_status mt_psum(mt_ctx *ctx, mt_axes axes, float *buf, size_t count) {
    return mt_all_reduce(ctx, axes, buf, count, MT_F32, MT_REDUCE_SUM);
}

mt_status mt_pmax(mt_ctx *ctx, mt_axes axes, float *buf, size_t count) {
    return mt_all_reduce(ctx, axes, buf, count, MT_F32, MT_REDUCE_MAX);
}

mt_status mt_pmean(mt_ctx *ctx, mt_axes axes, float *buf, size_t count) {
    mt_group *g;
    mt_status st = mt__coll_prologue(ctx, axes, &g);
    return st != MT_OK ? st : mt__do_all_reduce(ctx, axes, buf, count, MT_F32, MT_REDUCE_SUM, true);
}

/* ======================================================================== */
/* Block collectives: all_gather, psum_scatter, all_to_all                   */
/* ======================================================================== */

/* The public block collectives: the prologue, then mt__do_blocks. */
static mt_status blocks(mt_ctx *ctx, mt_axes axes, int kind, const void *send, void *recv,
                        size_t count, mt_dtype dtype) {
    mt_group *g;
    mt_status st = mt__coll_prologue(ctx, axes, &g);
    return st != MT_OK ? st : mt__do_blocks(ctx, g, kind, send, recv, count, dtype);
}

mt_status mt_all_gather(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                        mt_dtype dtype) {
    return blocks(ctx, axes, MT_COLL_ALL_GATHER, send, recv, count, dtype);
}

mt_status mt_psum_scatter(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                          mt_dtype dtype) {
    return blocks(ctx, axes, MT_COLL_REDUCE_SCATTER, send, recv, count, dtype);
}

mt_status mt_all_to_all(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                        mt_dtype dtype) {
    return blocks(ctx, axes, MT_COLL_ALL_TO_ALL, send, recv, count, dtype);
}

/* ======================================================================== */
/* ppermute, broadcast, barrier                                              */
/* ======================================================================== */

mt_status mt_ppermute(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                      mt_dtype dtype, const int (*pairs)[2], int n_pairs) {
    mt_status st;
    mt_group *g;
    if ((st = mt__coll_prologue(ctx, axes, &g)) || (st = mt__check_dtype("ppermute", dtype)) ||
        (st = mt__check_buf("ppermute", "send", send, count)) ||
        (st = mt__check_buf("ppermute", "recv", recv, count)) ||
        (st = mt__check_size("ppermute", count, 1, dtype)))
        return st;
    int dest, src;
    uint64_t hash;
    if ((st = mt__permute_route(g, pairs, n_pairs, &dest, &src, &hash))) return st;
    return mt__do_ppermute(ctx, g, send, recv, count, dtype, dest, src, hash);
}

mt_status mt_broadcast(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype, int root) {
    mt_status st;
    mt_group *g;
    if ((st = mt__coll_prologue(ctx, axes, &g)) || (st = mt__check_dtype("broadcast", dtype)) ||
        (st = mt__check_buf("broadcast", "buf", buf, count)) ||
        (st = mt__check_size("broadcast", count, 1, dtype)))
        return st;
    if (root < 0 || root >= g->size)
        return mt_fail(MT_EINVAL, "broadcast over %s: root %d is not a rank of the group of %d",
                       g->label, root, g->size);
    size_t bytes = count * mt_dtype_size(dtype);
    mt_coll_desc d = {.kind = MT_COLL_BROADCAST, .dtype = dtype, .count = count, .bytes = bytes,
                      .root = root};
    st = mt__coll_begin(ctx, g, &d);
    if (st == MT_OK && g->size > 1) st = ctx->launch->ops->broadcast(ctx, g, buf, bytes, root);
    return mt__coll_end(ctx, g, &d, st);
}

mt_status mt_barrier(mt_ctx *ctx, mt_axes axes) {
    mt_status st;
    mt_group *g;
    if ((st = mt__coll_prologue(ctx, axes, &g))) return st;
    mt_coll_desc d = {.kind = MT_COLL_BARRIER, .dtype = MT_F32};
    st = mt__coll_begin(ctx, g, &d);
    if (st == MT_OK && g->size > 1) st = ctx->launch->ops->barrier(ctx, g);
    return mt__coll_end(ctx, g, &d, st);
}
