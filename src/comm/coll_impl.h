/*
 * coll_impl.h — the collectives' front end (internal): what comm.c (the flat
 * collectives), coll_run.c (their bodies on a group), comm_dims.c (the
 * dimensioned forms), async.c (the asynchronous queue), p2p.c (sends and
 * receives), record.c (numbering and records), check.c (the debug match
 * check) and group.c (the group cache and its labels) share. Bottom up:
 * group, check, record, coll_run, async, then comm, comm_dims and p2p.
 *
 * Every collective, whatever the transport, goes through mt__coll_begin /
 * mt__coll_end: a device's record then always says what it is doing, which
 * is what a timeout on another device reports, and a traced device gets the
 * collective's span on its timeline.
 */
#ifndef MT_COLL_IMPL_H
#define MT_COLL_IMPL_H

#include "comm/transport_impl.h"

/* What the front end records of one collective. */
typedef struct {
    int      kind;       /* mt_coll_kind, + 16·op for all-reduce, + MT_COLL_MEAN */
    mt_dtype dtype;
    size_t   count;      /* elements per device (as the caller gave it) */
    size_t   bytes;      /* bytes this device contributes */
    int      root;       /* broadcast */
    uint64_t extra;      /* ppermute: a hash of the pairs */
    int      peer, tag;  /* send / receive: the other device's id, the tag */
    double   t0;         /* set by mt__coll_begin */
} mt_coll_desc;

/* ---- numbering and records (record.c) ----------------------------------- */

/* A group's cache key: its axes in order, axis+1 in 4 bits each. */
static inline uint32_t mt__axes_key(mt_axes axes) {
    uint32_t key = 0;
    for (int i = 0; i < axes.n; i++) key |= (uint32_t)(axes.axis[i] + 1) << (4 * i);
    return key;
}

/* The axes of a key for messages: "'data'" / "'data,tensor'" / "'' (no axes)"
 * (group.c). */
void mt__axes_label(const mt_mesh *mesh, uint32_t key, char *buf, size_t cap);

/* Numbers the collective d on g and writes it into the device's record,
 * starts its clock and deadline, then: MT_EABORTED if the launch has failed,
 * else the debug match check in check mode (groups of two or more), else
 * MT_OK. Every mt__coll_begin is followed by an mt__coll_end. */
mt_status mt__coll_begin(mt_ctx *ctx, mt_group *g, mt_coll_desc *d);
/* Marks the device out of the collective, adds its span to the device's
 * timeline when tracing, and returns `st`. */
mt_status mt__coll_end(mt_ctx *ctx, const mt_group *g, const mt_coll_desc *d, mt_status st);

/* ---- the debug match check (check.c) ------------------------------------ */

/* Exchanges d (with the caller's sequence number) over g, a group of two or
 * more, and fails with MT_EMISMATCH, the same message on every device, when
 * the members did not all issue the same collective. */
mt_status mt__match_check(mt_ctx *ctx, mt_group *g, const mt_coll_desc *d);

/* ---- argument checks and the flat collectives' bodies (coll_run.c) ------- */

/* MT_EINVAL unless dtype is one the collectives move. */
mt_status mt__check_dtype(const char *what, mt_dtype dtype);

/* MT_EINVAL when the buffer `name` is NULL but count elements go through it.
 * (Inline, as the next one: every collective runs them, and a call to a
 * global function costs the smallest collectives measurably.) */
static inline mt_status mt__check_buf(const char *what, const char *name, const void *p,
                                      size_t count) {
    if (!p && count > 0)
        return mt_fail(MT_EINVAL, "%s: %s is NULL but count is %zu", what, name, count);
    return MT_OK;
}

/* MT_EINVAL unless count·factor elements of dtype fit in size_t. */
static inline mt_status mt__check_size(const char *what, size_t count, size_t factor,
                                       mt_dtype dtype) {
    size_t es = mt_dtype_size(dtype);
    if (factor && count > SIZE_MAX / factor / es)
        return mt_fail(MT_EINVAL, "%s: count %zu is too large", what, count);
    return MT_OK;
}

/* The flat collectives behind the public ones, without the prologue (the
 * public forms, the dimensioned forms and the queue run them): checks,
 * record, transport. */
mt_status mt__do_all_reduce(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype,
                            mt_reduce_op op, bool mean);
mt_status mt__do_all_gather(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                            size_t count, mt_dtype dtype);
mt_status mt__do_psum_scatter(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                              size_t count, mt_dtype dtype);
/* The three collectives whose buffers are P blocks of count elements (recv
 * for all_gather, send for psum_scatter, both for all_to_all) and whose
 * group of one is a copy of count elements, on the resolved group g; `kind`
 * (MT_COLL_ALL_GATHER, _REDUCE_SCATTER or _ALL_TO_ALL) names them in
 * messages (mt__coll_name). The record counts the bytes this device
 * contributes. */
mt_status mt__do_blocks(mt_ctx *ctx, mt_group *g, int kind, const void *send, void *recv,
                        size_t count, mt_dtype dtype);

/* ppermute's route from its pairs on g (checked: ranks in the group, each
 * at most once a source and once a destination): the rank this device sends
 * to and the one it receives from (-1: none), and a hash of the pairs for
 * the debug match check. MT_EINVAL with a message naming the pair. */
mt_status mt__permute_route(const mt_group *g, const int (*pairs)[2], int n_pairs, int *dest,
                            int *src, uint64_t *hash);
/* ppermute along a route on g, without the prologue (the queue runs it). */
mt_status mt__do_ppermute(mt_ctx *ctx, mt_group *g, const void *send, void *recv, size_t count,
                          mt_dtype dtype, int dest, int src, uint64_t hash);

/* ---- the asynchronous queue (async.c) ----------------------------------- */

/* Completes the first `upto` queued requests, in start order; on a failure
 * drops the rest of the queue (see async.c) and returns it. */
mt_status mt__flush_pending(mt_ctx *ctx, int upto);

/* ---- the public blocking forms (comm.c) --------------------------------- */

/* The head of a blocking collective: the asynchronous queue flushed (every
 * device runs its collectives in the order it issued them), the group
 * resolved. */
mt_status mt__coll_prologue(mt_ctx *ctx, mt_axes axes, mt_group **g);

#endif /* MT_COLL_IMPL_H */
