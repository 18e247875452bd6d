/*
 * threads_async.c — the threads transport's asynchronous forms.
 *
 * The forms (all-reduce, all-gather, reduce-scatter, ppermute;
 * large messages only; small ones wait in the front end's queue and take
 * the latency path at mt_wait). Starting one publishes the buffers in an
 * entry of a ring (ASYNC_RING per group, indexed by the group's count of
 * asynchronous ops, the same sequence on every device) and
 * counts the arrival in the entry's own gate: the op commits once every rank
 * has started it, whatever its peers are doing meanwhile. The work is split
 * into chunks (CHUNK_BYTES) that any device waiting on the op claims with a
 * fetch_add and, once done, counts in `finished`: whoever waits first moves
 * the data of everyone, so a device that computes between start and wait
 * finds it done. A wait returns once `finished` reaches the chunk count: no
 * peer touches any buffer of the op after that. Before commit a wait may give
 * up (abort, deadline) by poisoning the entry's gate, as a rendezvous does;
 * after commit it completes the op (bounded work), deadline or not.
 * Each rank retires its ops in order (`released`); an entry is reused only
 * once every rank has retired its previous op, so nobody still reads it when
 * it is reset. ASYNC_RING = 4·MT_MAX_PENDING keeps that from blocking in
 * practice (a device with requests pending holds at most MT_MAX_PENDING).
 * These ops take no op number (g->n_ops): the latency path's parity
 * argument needs every numbered op to synchronise all ranks.
 */
#include "comm/threads_impl.h"

#include <string.h>

/* ======================================================================== */
/* Asynchronous forms                                                        */
/* ======================================================================== */

/* Bytes a device contributes to p: what decides the path, as in the blocking
 * forms (the same on every device). */
static size_t async_bytes(const mt_group *g, const mt_pending *p) {
    size_t bytes = p->count * mt_dtype_size(p->dtype);
    return p->kind == MT_COLL_REDUCE_SCATTER ? bytes * (size_t)g->size : bytes;
}

bool mt__threads_async_eager(const mt_ctx *ctx, const mt_group *g, const mt_pending *p) {
    return !mt__threads_small(ctx, async_bytes(g, p));
}

static mt_taentry *async_entry(mt_tgroup *tg, uint64_t a) { return &tg->async[(a - 1) % ASYNC_RING]; }
static mt_taptr *async_ptrs(mt_tgroup *tg, uint64_t a) {
    return &tg->aptrs[(size_t)((a - 1) % ASYNC_RING) * (size_t)tg->P];
}
/* Arrivals at which op a commits: its entry's uses so far times P. */
static uint64_t async_target(const mt_tgroup *tg, uint64_t a) {
    return (uint64_t)tg->P * ((a - 1) / ASYNC_RING + 1);
}

/* Elements per chunk of a reduction (a multiple of 64 bytes). */
static size_t chunk_elems(mt_dtype dtype) { return CHUNK_BYTES / mt_dtype_size(dtype); }

/* Chunks of op p: all-reduce: element ranges of the buffer; all-gather: byte
 * ranges of each (destination, source) pair; reduce-scatter: element ranges
 * of each destination's block; ppermute: byte ranges of each destination's
 * buffer. */
static size_t async_chunks(const mt_group *g, const mt_pending *p, size_t *per) {
    const size_t P = (size_t)g->size;
    switch (p->kind) {
    case MT_COLL_ALL_REDUCE:
        *per = (p->count + chunk_elems(p->dtype) - 1) / chunk_elems(p->dtype);
        return *per;
    case MT_COLL_ALL_GATHER: {
        size_t bytes = p->count * mt_dtype_size(p->dtype);
        *per = (bytes + CHUNK_BYTES - 1) / CHUNK_BYTES;
        return P * P * *per;
    }
    case MT_COLL_PERMUTE: {
        size_t bytes = p->count * mt_dtype_size(p->dtype);
        *per = (bytes + CHUNK_BYTES - 1) / CHUNK_BYTES;
        return P * *per;
    }
    default:   /* MT_COLL_REDUCE_SCATTER */
        *per = (p->count + chunk_elems(p->dtype) - 1) / chunk_elems(p->dtype);
        return P * *per;
    }
}

/* Does chunk i of op p (every rank's buffers in `ap`). Reductions combine
 * the ranks in rank order, whoever does the chunk, so the bits do not
 * depend on who did it. */
static void async_chunk(mt_ctx *ctx, const mt_group *g, const mt_taptr *ap, const mt_pending *p,
                        size_t per, size_t i) {
    const int P = g->size;
    const size_t es = mt_dtype_size(p->dtype);
    const void **src = ctx->ptrs;
    if (p->kind == MT_COLL_ALL_REDUCE) {
        const size_t ce = chunk_elems(p->dtype), lo = i * ce;
        const size_t n = p->count - lo < ce ? p->count - lo : ce;
        void **dst = ctx->dst_ptrs;
        for (int j = 0; j < P; j++) {
            src[j] = ap[j].send;   /* recv, or a buffer of its own (all_reduce_into) */
            dst[j] = ap[j].recv;
        }
        if (p->dtype != MT_BF16) {
            mt__threads_reduce_bcast(p->dtype, p->op)(src, P, lo, dst, P, lo, n,
                                          p->count * es >= STREAM_MIN_BYTES);
            return;
        }
        for (size_t k = lo; k < lo + n; k += BLOCK_ELEMS(es)) {
            size_t m = lo + n - k < BLOCK_ELEMS(es) ? lo + n - k : BLOCK_ELEMS(es);
            char *d = (char *)ap[0].recv + k * es;
            mt__threads_combine(d, src, P, k, m, p->dtype, p->op);
            for (int j = 1; j < P; j++) memcpy((char *)ap[j].recv + k * es, d, m * es);
        }
        return;
    }
    if (p->kind == MT_COLL_ALL_GATHER) {
        const size_t bytes = p->count * es, pair = i / per, off = (i % per) * CHUNK_BYTES;
        const size_t n = bytes - off < CHUNK_BYTES ? bytes - off : CHUNK_BYTES;
        const int d = (int)(pair / (size_t)P), j = (int)(pair % (size_t)P);
        char *dst = (char *)ap[d].recv + (size_t)j * bytes + off;
        const char *from = (const char *)ap[j].send + off;
        if (dst == from) return;   /* in place: the block is already there */
        if ((size_t)P * bytes >= STREAM_MIN_BYTES) mt__threads_stream_copy(dst, from, n);
        else memcpy(dst, from, n);
        return;
    }
    if (p->kind == MT_COLL_PERMUTE) {
        /* rank d's recv from its source's send; zeros when it has none */
        const size_t bytes = p->count * es, d = i / per, off = (i % per) * CHUNK_BYTES;
        const size_t n = bytes - off < CHUNK_BYTES ? bytes - off : CHUNK_BYTES;
        char *dst = (char *)ap[d].recv + off;
        if (ap[d].src >= 0) memcpy(dst, (const char *)ap[ap[d].src].send + off, n);
        else memset(dst, 0, n);
        return;
    }
    /* reduce-scatter: block d of every rank's send into rank d's recv */
    const size_t ce = chunk_elems(p->dtype), d = i / per, lo = (i % per) * ce;
    const size_t n = p->count - lo < ce ? p->count - lo : ce;
    for (int j = 0; j < P; j++) src[j] = ap[j].send;
    if (p->dtype == MT_BF16) {
        mt__threads_combine((char *)ap[d].recv + lo * es, src, P, d * p->count + lo, n, p->dtype, p->op);
        return;
    }
    void *const dst[1] = {ap[d].recv};
    mt__threads_reduce_bcast(p->dtype, p->op)(src, P, d * p->count + lo, dst, 1, lo, n,
                                  (size_t)P * p->count * es >= STREAM_MIN_BYTES);
}

/* Starts p: waits (rarely) until its ring entry is free, publishes this
 * rank's buffers and arrives. Never touches a peer's buffer. */
mt_status mt__threads_async_start(mt_ctx *ctx, mt_group *g, mt_pending *p) {
    mt_tgroup *tg = g->transport;
    mt_trank_slot *me = &tg->ranks[g->rank];
    const uint64_t a = ++me->n_async;
    p->tag = a;
    if (a > ASYNC_RING) {
        /* the entry's previous op must be retired by every rank: then nobody
         * reads its counters or pointers any more (acquire pairs with the
         * release in mt__threads_async_wait) */
        int spins = 0, from = 0;
        for (;;) {
            while (from < g->size &&
                   atomic_load_explicit(&tg->ranks[from].released, memory_order_acquire) >=
                       a - ASYNC_RING)
                from++;
            if (from == g->size) break;
            mt_status st = mt__wait_step(ctx, &spins);
            if (st != MT_OK) {   /* nothing published yet: safe to leave */
                int n_missing = 0;
                for (int j = from; j < g->size; j++)
                    if (atomic_load_explicit(&tg->ranks[j].released, memory_order_acquire) <
                        a - ASYNC_RING)
                        ctx->wait_list[n_missing++] = g->members[j];
                if (n_missing == 0) break;
                return mt__wait_fail(ctx, g, st, ctx->wait_list, n_missing);
            }
        }
    }
    mt_taentry *e = async_entry(tg, a);
    mt_taptr *mine = &async_ptrs(tg, a)[g->rank];
    /* Every rank resets the counters before it arrives: chunks are claimed
     * only after commit, which follows every arrival (and so every reset);
     * the previous use's claims all happened before its ranks released it. */
    atomic_store_explicit(&e->claim, 0, memory_order_relaxed);
    atomic_store_explicit(&e->finished, 0, memory_order_relaxed);
    mine->send = p->send;
    mine->recv = p->recv;
    mine->src = p->kind == MT_COLL_PERMUTE ? p->src : -1;
    atomic_store_explicit(&mine->arrived, a, memory_order_relaxed);
    /* acq_rel: publishes the pointers and resets to whoever sees the commit */
    uint64_t v = atomic_fetch_add_explicit(&e->gate, 1, memory_order_acq_rel) + 1;
    mt__wait_wake(ctx->launch);
    /* a peer gave up on this op already (the launch is failing): it will
     * never commit, so nobody touches our buffers. It is not retired here:
     * `released` must grow in start order, and earlier requests may still be
     * outstanding (peers blocked on it see the abort instead). */
    if (v & POISON) return mt__wait_fail(ctx, g, MT_EABORTED, NULL, 0);
    return MT_OK;
}

/* Completes p: waits for the commit (giving up on abort or deadline by
 * poisoning the entry, as rendezvous does), then does chunks until none are
 * left and waits until every claimed chunk is done. Retires p either way, so
 * it must be called once for every started op, in start order. */
mt_status mt__threads_async_wait(mt_ctx *ctx, mt_group *g, mt_pending *p) {
    mt_tgroup *tg = g->transport;
    mt_trank_slot *me = &tg->ranks[g->rank];
    const uint64_t a = p->tag, target = async_target(tg, a);
    mt_taentry *e = async_entry(tg, a);
    const mt_taptr *ap = async_ptrs(tg, a);
    mt_status gave_up;
    uint64_t v = mt__threads_await_commit(ctx, &e->gate, atomic_load_explicit(&e->gate, memory_order_acquire),
                              target, &gave_up);
    if (gave_up != MT_OK) {
        int n_missing = 0;
        for (int j = 0; j < g->size; j++)
            if (atomic_load_explicit(&ap[j].arrived, memory_order_relaxed) < a)
                ctx->wait_list[n_missing++] = g->members[j];
        atomic_store_explicit(&me->released, a, memory_order_release);
        mt__wait_wake(ctx->launch);
        return mt__wait_fail(ctx, g, gave_up, ctx->wait_list, n_missing);
    }
    if (v & POISON) {   /* a peer gave up before the commit: nobody touches the buffers */
        atomic_store_explicit(&me->released, a, memory_order_release);
        mt__wait_wake(ctx->launch);
        return mt__wait_fail(ctx, g, MT_EABORTED, NULL, 0);
    }
    /* committed: the acquire above saw every rank's pointers. Take chunks
     * (relaxed: the claim only divides the work; the data's visibility comes
     * from the gate and from `finished`) */
    size_t per, n_chunks = async_chunks(g, p, &per);
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&e->claim, 1, memory_order_relaxed);
        if (i >= n_chunks) break;
        async_chunk(ctx, g, ap, p, per, i);
        /* release: whoever reads the final count sees this chunk's writes */
        atomic_fetch_add_explicit(&e->finished, 1, memory_order_release);
    }
    mt__wait_wake(ctx->launch);   /* after this rank's last chunk (the step's last, maybe) */
    /* chunks claimed by peers are bounded work in progress: wait for them,
     * deadline or not (leaving would hand back a buffer still being written) */
    int spins = 0;
    while (atomic_load_explicit(&e->finished, memory_order_acquire) < n_chunks)
        (void)mt__wait_step(ctx, &spins);
    atomic_store_explicit(&me->released, a, memory_order_release);
    mt__wait_wake(ctx->launch);
    return MT_OK;
}
