/*
 * p2p.c — point-to-point messages (mt_send, mt_recv): the front end that
 * checks the arguments, numbers, records and traces every send and receive
 * (record.c, like a collective's), and calls the transport's send / recv
 * (threads_p2p.c: mailboxes in shared memory; mpi_p2p.c: MPI messages on a
 * communicator of their own). Also the messages the transports share: a
 * receive that timed out, and messages never received.
 *
 * A send never waits, so it leaves the asynchronous queue alone; a receive
 * may wait for a long time, so it first completes this device's started
 * collectives as a blocking collective does: the sender may be waiting in
 * one of them, and would never get to its send.
 */
#include "comm/coll_impl.h"

#include <stdio.h>

/* ======================================================================== */
/* Checks                                                                    */
/* ======================================================================== */

/* What mt_send and mt_recv both check, on the resolved group g: dtype,
 * buffer, size, the peer's rank (`peer_name` is "dst" or "src") and the tag. */
static mt_status check_args(const mt_group *g, const char *what, const void *buf, size_t count,
                            mt_dtype dtype, const char *peer_name, int peer, int tag) {
    mt_status st;
    if ((st = mt__check_dtype(what, dtype)) || (st = mt__check_buf(what, "buf", buf, count)) ||
        (st = mt__check_size(what, count, 1, dtype)))
        return st;
    if (peer < 0 || peer >= g->size)
        return mt_fail(MT_EINVAL, "%s over %s: %s %d is not a rank of the group of %d; give a "
                       "rank 0..%d (mt_axis_index numbers them)", what, g->label, peer_name, peer,
                       g->size, g->size - 1);
    if (tag < 0 || tag > MT_TAG_MAX)
        return mt_fail(MT_EINVAL, "%s over %s: tag %d is outside 0..%d (MT_TAG_MAX); use a "
                       "smaller tag", what, g->label, tag, MT_TAG_MAX);
    return MT_OK;
}

/* ======================================================================== */
/* Send and receive                                                          */
/* ======================================================================== */

/* mt_send (kind MT_COLL_SEND, from `send`) and mt_recv (MT_COLL_RECV, into
 * `recv`): the checks, the record and span, the transport's send or recv. */
static mt_status p2p(mt_ctx *ctx, int kind, mt_axes axes, const void *send, void *recv,
                     size_t count, mt_dtype dtype, int peer, int tag) {
    const bool sending = kind == MT_COLL_SEND;
    const char *what = sending ? "mt_send" : "mt_recv";
    mt_group *g;
    mt_status st;
    /* a receive may wait long: it first completes the started collectives */
    if ((st = sending ? mt__ctx_group(ctx, axes, &g) : mt__coll_prologue(ctx, axes, &g)) ||
        (st = check_args(g, what, sending ? send : recv, count, dtype, sending ? "dst" : "src",
                         peer, tag)))
        return st;
    mt_coll_desc d = {.kind = kind, .dtype = dtype, .count = count,
                      .bytes = count * mt_dtype_size(dtype), .peer = g->members[peer], .tag = tag};
    st = mt__coll_begin(ctx, g, &d);
    const mt_transport_ops *ops = ctx->launch->ops;
    size_t got = 0;
    if (st == MT_OK)
        st = sending ? ops->send(ctx, g, peer, tag, send, d.bytes)
                     : ops->recv(ctx, g, peer, tag, recv, d.bytes, &got);
    if (st == MT_ESHAPE) {
        const size_t es = mt_dtype_size(dtype);
        st = mt_fail(MT_ESHAPE, "mt_recv from device %d over %s tag %d: the message holds %zu "
                     "bytes (%zu%s %s elements) but the receive expects %zu (%zu %s elements); "
                     "send and receive the same count and dtype (the message was dropped)",
                     d.peer, g->label, tag, got, got / es, got % es ? " and a part" : "",
                     mt_dtype_name(dtype), d.bytes, count, mt_dtype_name(dtype));
    }
    return mt__coll_end(ctx, g, &d, st);
}

mt_status mt_send(mt_ctx *ctx, mt_axes axes, const void *buf, size_t count, mt_dtype dtype,
                  int dst, int tag) {
    return p2p(ctx, MT_COLL_SEND, axes, buf, NULL, count, dtype, dst, tag);
}

mt_status mt_recv(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype, int src,
                  int tag) {
    return p2p(ctx, MT_COLL_RECV, axes, NULL, buf, count, dtype, src, tag);
}

/* ======================================================================== */
/* Messages the transports share                                             */
/* ======================================================================== */

void mt__p2p_timeout_text(const mt_ctx *ctx, const mt_group *g, int src, int tag,
                          const char *sender, char *buf, size_t cap) {
    const mt_launch_state *ls = ctx->launch;
    snprintf(buf, cap, "timed out after %g s in %s: %s; check that device %d sends to device %d "
             "over %s with tag %d, or raise the timeout (MT_COMM_TIMEOUT, seconds)",
             ls->timeout_s, ctx->record->text[0] ? ctx->record->text : "a receive", sender,
             g->members[src], ctx->device, g->label, tag);
}

mt_status mt__p2p_leftover(mt_launch_state *ls, int receiver, int n_left, int sender,
                           uint32_t key, int tag, size_t bytes) {
    if (n_left <= 0 || atomic_load_explicit(&ls->abort, memory_order_acquire)) return MT_OK;
    char label[96], msg[512];
    mt__axes_label(ls->mesh, key, label, sizeof label);
    snprintf(msg, sizeof msg, "%d message%s sent to this device %s never received (the first "
             "from device %d over %s tag %d, %zu bytes); every mt_send needs a matching mt_recv "
             "before the launch ends", n_left, n_left > 1 ? "s" : "", n_left > 1 ? "were" : "was",
             sender, label, tag, bytes);
    mt__launch_fail(ls, receiver, MT_ESTATE, msg);
    return mt_fail(MT_ESTATE, "%s", msg);
}
