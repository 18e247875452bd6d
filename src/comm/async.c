/*
 * async.c — the asynchronous collectives (mt_*_start, mt_wait) and the queue
 * of requests every device keeps.
 *
 * mt_*_start checks the arguments; then, when the transport has
 * asynchronous forms (threads) and takes the request (large messages; not in
 * check mode, whose match check is a blocking exchange), it is numbered and
 * recorded at once and the transport starts it: peers that wait on it
 * meanwhile move its data. Otherwise (small messages, the MPI transport,
 * check mode) it is queued and runs as the blocking collective at the first
 * mt_wait that needs it. Either way mt_wait completes every request up to
 * and including the one waited for, in start order, and any blocking
 * collective first completes the whole queue, so every device runs its
 * collectives in the order it issued them.
 *
 * ppermute_start takes its route from the pairs at the start (the pairs are
 * not kept): a queued one runs as mt_ppermute along that route.
 *
 * Trace: a request the transport started is one span from its start to its
 * completion, named "<op> (async) <axes>" and marked async (the writer puts
 * such spans, which overlap one another and the device's compute, on comm
 * lanes beside the device's track). A queued request runs as a blocking
 * collective at its wait, and is that collective's span.
 */
#include "comm/coll_impl.h"

#include <stdio.h>
#include <string.h>

/* ======================================================================== */
/* Starting                                                                  */
/* ======================================================================== */

/* What a request is, as mt__coll_begin / mt__coll_end record it. */
static mt_coll_desc pending_desc(const mt_pending *p, const mt_group *g) {
    size_t bytes = p->count * mt_dtype_size(p->dtype);
    mt_coll_desc d = {.kind = p->kind, .dtype = p->dtype, .count = p->count, .bytes = bytes};
    if (p->kind == MT_COLL_ALL_REDUCE) d.kind |= (int)p->op << 4;
    if (p->kind == MT_COLL_PERMUTE) d.extra = p->extra;
    /* as the blocking forms count it: the whole buffer */
    if (p->kind == MT_COLL_REDUCE_SCATTER || p->kind == MT_COLL_ALL_GATHER)
        d.bytes *= (size_t)g->size;
    return d;
}

/* Queues a request after checking everything that can fail on this device
 * alone (axes, group, sizes): what fails later fails for the launch. A
 * request the transport takes is started here. */
static mt_status enqueue(mt_ctx *ctx, const char *what, const mt_pending *p, bool times_P,
                         mt_request *req) {
    if (!req) return mt_fail(MT_EINVAL, "%s: req is NULL", what);
    req->id = 0;
    if (ctx->n_pending == MT_MAX_PENDING)
        return mt_fail(MT_ESTATE, "%d collectives are already started and not waited for; call "
                       "mt_wait on one first", MT_MAX_PENDING);
    mt_group *g;
    mt_status st;
    if ((st = mt__ctx_group(ctx, p->axes, &g)) ||
        (st = mt__check_size(what, p->count, times_P ? (size_t)g->size : 1, p->dtype)))
        return st;
    mt_pending *q = &ctx->pending[ctx->n_pending];
    *q = *p;
    q->g = g;
    q->eager = false;
    q->tag = 0;
    q->trace_ev = -1;
    const mt_launch_state *ls = ctx->launch;
    if (ls->ops->async_start && !ls->check && g->size > 1 && ls->ops->async_eager(ctx, g, q)) {
        /* numbered and recorded now, in issue order; the span begins here
         * and ends at completion (end_span) */
        mt_coll_desc d = pending_desc(q, g);
        const int n_events = ctx->trace.n;
        st = mt__coll_begin(ctx, g, &d);
        if (st == MT_OK) st = ls->ops->async_start(ctx, g, q);
        if ((st = mt__coll_end(ctx, g, &d, st)) != MT_OK) return st;   /* not started */
        q->eager = true;
        if (ctx->trace.events && ctx->trace.n > n_events) {
            mt_trace_event *ev = &ctx->trace.events[ctx->trace.n - 1];
            char name[128];
            snprintf(name, sizeof name, "%s (async) %s", mt__coll_name(d.kind), g->label);
            snprintf(ev->name, sizeof ev->name, "%.*s", (int)sizeof ev->name - 1, name);
            ev->is_async = true;
            q->trace_ev = ctx->trace.n - 1;
        }
    }
    ctx->n_pending++;
    q->id = ++ctx->next_request;
    q->started = true;
    req->id = q->id;
    return MT_OK;
}

/* all_reduce_start (send == recv) and all_reduce_into_start. */
static mt_status start_all_reduce(mt_ctx *ctx, const char *what, mt_axes axes, const void *send,
                                  void *recv, size_t count, mt_dtype dtype, mt_reduce_op op,
                                  mt_request *req) {
    mt_status st;
    if ((st = mt__check_dtype(what, dtype)) || (st = mt__check_buf(what, "send", send, count)) ||
        (st = mt__check_buf(what, "recv", recv, count)))
        return st;
    if (op != MT_REDUCE_SUM && op != MT_REDUCE_MAX && op != MT_REDUCE_MIN)
        return mt_fail(MT_EINVAL, "%s: unknown reduction %d", what, (int)op);
    const size_t bytes = count * mt_dtype_size(dtype);
    const char *s = send, *r = recv;
    if (s != r && s < r + bytes && r < s + bytes)
        return mt_fail(MT_EINVAL, "%s: send and recv overlap without being the same buffer; "
                       "pass one buffer for an in-place reduction, or two apart", what);
    mt_pending p = {.kind = MT_COLL_ALL_REDUCE, .axes = axes, .send = send, .recv = recv,
                    .count = count, .dtype = dtype, .op = op};
    return enqueue(ctx, what, &p, false, req);
}

mt_status mt_all_reduce_start(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype,
                              mt_reduce_op op, mt_request *req) {
    return start_all_reduce(ctx, "all_reduce_start", axes, buf, buf, count, dtype, op, req);
}

mt_status mt_all_reduce_into_start(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                                   size_t count, mt_dtype dtype, mt_reduce_op op,
                                   mt_request *req) {
    return start_all_reduce(ctx, "all_reduce_into_start", axes, send, recv, count, dtype, op, req);
}

/* all_gather_start and psum_scatter_start (`kind`): a request over P blocks
 * of count elements. */
static mt_status start_blocks(mt_ctx *ctx, const char *what, int kind, mt_axes axes,
                              const void *send, void *recv, size_t count, mt_dtype dtype,
                              mt_request *req) {
    mt_status st;
    if ((st = mt__check_dtype(what, dtype)) || (st = mt__check_buf(what, "send", send, count)) ||
        (st = mt__check_buf(what, "recv", recv, count)))
        return st;
    mt_pending p = {.kind = kind, .axes = axes, .send = send, .recv = recv, .count = count,
                    .dtype = dtype, .op = MT_REDUCE_SUM};
    return enqueue(ctx, what, &p, true, req);
}

mt_status mt_all_gather_start(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                              size_t count, mt_dtype dtype, mt_request *req) {
    return start_blocks(ctx, "all_gather_start", MT_COLL_ALL_GATHER, axes, send, recv, count,
                        dtype, req);
}

mt_status mt_psum_scatter_start(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                                size_t count, mt_dtype dtype, mt_request *req) {
    return start_blocks(ctx, "psum_scatter_start", MT_COLL_REDUCE_SCATTER, axes, send, recv,
                        count, dtype, req);
}

/* The route is worked out (and checked) here, on this device, so that the
 * queue and the transport only see this rank's source and destination. */
mt_status mt_ppermute_start(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                            size_t count, mt_dtype dtype, const int (*pairs)[2], int n_pairs,
                            mt_request *req) {
    const char *what = "ppermute_start";
    mt_status st;
    mt_group *g;
    if (req) req->id = 0;
    if ((st = mt__check_dtype(what, dtype)) || (st = mt__check_buf(what, "send", send, count)) ||
        (st = mt__check_buf(what, "recv", recv, count)) || (st = mt__ctx_group(ctx, axes, &g)))
        return st;
    mt_pending p = {.kind = MT_COLL_PERMUTE, .axes = axes, .send = send, .recv = recv,
                    .count = count, .dtype = dtype, .op = MT_REDUCE_SUM};
    if ((st = mt__permute_route(g, pairs, n_pairs, &p.dest, &p.src, &p.extra))) return st;
    return enqueue(ctx, what, &p, false, req);
}

/* ======================================================================== */
/* Completing                                                                */
/* ======================================================================== */

/* Ends the span of a started request at its completion (tracing). */
static void end_span(mt_ctx *ctx, const mt_pending *p) {
    if (p->trace_ev >= 0 && p->trace_ev < ctx->trace.n)
        ctx->trace.events[p->trace_ev].t1 = mt_time_now() - ctx->t_start;
}

/* Runs one request: completes one the transport started, or runs a queued
 * one as its blocking collective. */
static mt_status run_pending(mt_ctx *ctx, mt_pending *p) {
    if (p->eager) {
        /* the transport started it: complete it (peers may have already).
         * Its record and span were made at the start: no new ones */
        ctx->deadline = mt_time_now() + ctx->launch->timeout_s;
        atomic_store_explicit(&ctx->record->in_collective, 1, memory_order_relaxed);
        mt_status st = ctx->launch->ops->async_wait(ctx, p->g, p);
        atomic_store_explicit(&ctx->record->in_collective, 0, memory_order_relaxed);
        end_span(ctx, p);
        return st;
    }
    switch (p->kind) {
    case MT_COLL_ALL_REDUCE:   /* into recv: a copy of send, reduced in place */
        if (p->send != p->recv) memcpy(p->recv, p->send, p->count * mt_dtype_size(p->dtype));
        return mt__do_all_reduce(ctx, p->axes, p->recv, p->count, p->dtype, p->op, false);
    case MT_COLL_ALL_GATHER:
        return mt__do_all_gather(ctx, p->axes, p->send, p->recv, p->count, p->dtype);
    case MT_COLL_REDUCE_SCATTER:
        return mt__do_psum_scatter(ctx, p->axes, p->send, p->recv, p->count, p->dtype);
    case MT_COLL_PERMUTE:
        return mt__do_ppermute(ctx, p->g, p->send, p->recv, p->count, p->dtype, p->dest, p->src,
                               p->extra);
    }
    return mt_fail(MT_EINTERNAL, "pending request of unknown kind %d", p->kind);
}

/* Settles started requests pending[from..n_pending) after a failure: the
 * launch is failed first, so the transport's wait gives each up if it never
 * committed, or completes it if peers may be using its buffers (bounded
 * work). Keeps the caller's error message: a wait that gives up raises one
 * of its own, so the caller's is saved first and raised again at the end. */
static void settle_started(mt_ctx *ctx, int from, mt_status st) {
    bool any = false;
    for (int i = from; i < ctx->n_pending; i++) any |= ctx->pending[i].eager;
    if (!any) return;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", mt_errmsg());
    mt__launch_fail(ctx->launch, ctx->device, st, msg);
    for (int i = from; i < ctx->n_pending; i++)
        if (ctx->pending[i].eager) {
            (void)ctx->launch->ops->async_wait(ctx, ctx->pending[i].g, &ctx->pending[i]);
            end_span(ctx, &ctx->pending[i]);
        }
    mt_fail(st, "%s", msg);
}

void mt__async_abandon(mt_ctx *ctx) {
    if (ctx->n_pending == 0) return;
    settle_started(ctx, 0, MT_EABORTED);
    ctx->n_pending = 0;
}

/* Completes the first `upto` requests, in start order. When one fails
 * (the launch is failing: the local checks ran at start), it and every
 * request queued after it are dropped (the started ones settled), and their
 * ids recorded so that a later mt_wait on any of them returns the failure
 * instead of MT_OK. */
mt_status mt__flush_pending(mt_ctx *ctx, int upto) {
    mt_status st = MT_OK;
    int done = 0;
    while (done < upto && st == MT_OK) st = run_pending(ctx, &ctx->pending[done++]);
    if (st != MT_OK) {
        settle_started(ctx, done, st);
        /* one range for all failures: a second failure extends the first
         * one's (requests in between then report a failure too, which after
         * a launch failure they had anyway), so no dropped id reads as run */
        if (ctx->dropped_hi == 0) ctx->dropped_lo = ctx->pending[done - 1].id;
        ctx->dropped_hi = ctx->pending[ctx->n_pending - 1].id;
        ctx->dropped_status = st;
        snprintf(ctx->dropped_msg, sizeof ctx->dropped_msg, "%s", mt_errmsg());
        ctx->n_pending = 0;
        return st;
    }
    memmove(ctx->pending, ctx->pending + done, (size_t)(ctx->n_pending - done) * sizeof *ctx->pending);
    ctx->n_pending -= done;
    return MT_OK;
}

mt_status mt_wait(mt_ctx *ctx, mt_request *req) {
    if (!req) return mt_fail(MT_EINVAL, "mt_wait: req is NULL");
    for (int i = 0; i < ctx->n_pending; i++)
        if (ctx->pending[i].id == req->id) {
            mt_status st = mt__flush_pending(ctx, i + 1);
            req->id = 0;
            return st;
        }
    if (req->id <= 0 || req->id > ctx->next_request)
        return mt_fail(MT_EINVAL, "mt_wait: request %d was never started on device %d", req->id,
                       ctx->device);
    int id = req->id;
    req->id = 0;
    if (id >= ctx->dropped_lo && id <= ctx->dropped_hi)
        return mt_fail(ctx->dropped_status, "mt_wait: request %d did not complete: it, or one "
                       "started before it, failed: %s", id, ctx->dropped_msg);
    return MT_OK;   /* already run by an earlier wait */
}
