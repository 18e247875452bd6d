/*
 * threads.c — the threads transport: every device a thread of this process,
 * collectives through shared memory; here the groups' shared memory, how
 * ranks meet in it, and the blocking collectives. The reductions' kernels
 * are in threads_reduce.c, the asynchronous forms in threads_async.c, the
 * launch that starts the threads (and the transport's table) in
 * threads_launch.c.
 *
 * Each group (axes key, first member) has one shared object with, per rank,
 * a cache line of flags and published pointers, and a double-buffered array
 * of small slots. Every collective a device runs on a group gets the next op
 * number n (g->n_ops); all flags are monotonic op numbers, so nothing is ever
 * reset and a waiter tests `flag >= n`.
 *
 * Small messages (a device contributes <= 1 KiB, or 4 KiB when devices
 * outnumber cores; see mt__threads_small): the latency path.
 * A device copies its contribution into its slot of parity n&1, stamps the
 * slot with n (release), waits until every slot of that parity carries n
 * (acquire), and computes its result from the slots: no second round. Reuse
 * of a parity two ops later is safe because every op waits for every rank's
 * stamp or arrival: a rank that reaches op n+2 has seen all ranks arrive at
 * n+1, which each did only after reading the slots of op n.
 *
 * Large messages: a rendezvous. Each rank publishes its buffer pointers and
 * `arrive = n`; once all have arrived, every rank reads its peers' buffers
 * directly; `done = n` and a wait for every rank's done end the op, so no
 * rank returns (and lets its caller reuse the buffer) while a peer uses it.
 * All-reduce is reduce-scatter + all-gather with every rank doing its share:
 * rank r owns chunk r of every buffer; it reduces a 16 KiB block of it from
 * all P buffers and, while the result is in L1, writes it into all P buffers
 * (the all-gather, pushed rather than pulled). Memory then sees each buffer
 * read once and written once (the floor), no line is written by two ranks,
 * and no rank waits for another between the two barriers.
 *
 * Waiting (mt__wait_step) spins briefly, then yields; with more devices than
 * cores it yields at once, and sleeps after a few yields.
 *
 * Point-to-point messages go through per-device mailboxes (threads_p2p.c).
 */
#include "comm/threads_impl.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Shared state                                                              */
/* ======================================================================== */

static void *zalloc64(size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

static mt_tgroup *tgroup_create(uint32_t key, int leader, int P) {
    mt_tgroup *tg = zalloc64(sizeof *tg);   /* gate gets a line of its own */
    if (!tg) return NULL;
    tg->key = key;
    tg->leader = leader;
    tg->P = P;
    tg->ranks = zalloc64((size_t)P * sizeof *tg->ranks);
    tg->small = zalloc64(2 * (size_t)P * sizeof *tg->small);
    tg->async = zalloc64(ASYNC_RING * sizeof *tg->async);
    tg->aptrs = zalloc64(ASYNC_RING * (size_t)P * sizeof *tg->aptrs);
    if (!tg->ranks || !tg->small || !tg->async || !tg->aptrs) {
        free(tg->ranks);
        free(tg->small);
        free(tg->async);
        free(tg->aptrs);
        free(tg);
        return NULL;
    }
    for (int r = 0; r < P; r++) {
        atomic_init(&tg->ranks[r].arrive, 0);
        atomic_init(&tg->ranks[r].done, 0);
        atomic_init(&tg->ranks[r].released, 0);
    }
    for (int i = 0; i < ASYNC_RING; i++) {
        atomic_init(&tg->async[i].gate, 0);
        atomic_init(&tg->async[i].claim, 0);
        atomic_init(&tg->async[i].finished, 0);
    }
    for (int i = 0; i < ASYNC_RING * P; i++) atomic_init(&tg->aptrs[i].arrived, 0);
    for (int i = 0; i < 2 * P; i++) atomic_init(&tg->small[i].seq, 0);
    atomic_init(&tg->gate, 0);
    return tg;
}

void mt__tgroups_free(mt_tgroup *list) {
    for (mt_tgroup *tg = list, *next; tg; tg = next) {
        next = tg->next;
        free(tg->ranks);
        free(tg->small);
        free(tg->async);
        free(tg->aptrs);
        free(tg);
    }
}

mt_status mt__threads_group_init(mt_ctx *ctx, mt_group *g) {
    mt_threads_shared *ts = ctx->launch->transport;
    pthread_mutex_lock(&ts->mu);
    mt_tgroup *tg = ts->groups;
    while (tg && !(tg->key == g->key && tg->leader == g->members[0])) tg = tg->next;
    if (!tg && (tg = tgroup_create(g->key, g->members[0], g->size)) != NULL) {
        tg->next = ts->groups;
        ts->groups = tg;
    }
    pthread_mutex_unlock(&ts->mu);
    if (!tg) return mt_fail(MT_ENOMEM, "threads transport: out of memory for a group of %d", g->size);
    g->transport = tg;
    return MT_OK;
}

/* ======================================================================== */
/* Waiting                                                                   */
/* ======================================================================== */

/* Waits until every rank's flag (the first at `first`, then every `stride`
 * bytes) is >= target. Flags only grow, so a rank seen ready stays ready.
 * For the latency path, whose slots are the transport's: it may give up on
 * abort or timeout at any time. */
static mt_status wait_flags(mt_ctx *ctx, const mt_group *g, mt_tflag *first, size_t stride,
                            uint64_t target) {
#define FLAG(j) ((mt_tflag *)((char *)first + (size_t)(j) * stride))
    int spins = 0, from = 0;
    for (;;) {
        while (from < g->size && atomic_load_explicit(FLAG(from), memory_order_acquire) >= target)
            from++;
        if (from == g->size) return MT_OK;
        mt_status st = mt__wait_step(ctx, &spins);
        if (st != MT_OK) {
            int n_missing = 0;
            for (int j = from; j < g->size; j++)
                if (atomic_load_explicit(FLAG(j), memory_order_acquire) < target)
                    ctx->wait_list[n_missing++] = g->members[j];
            /* the last ones came just now: nothing to give up on */
            if (n_missing == 0) return MT_OK;
            return mt__wait_fail(ctx, g, st, ctx->wait_list, n_missing);
        }
    }
#undef FLAG
}

/* Waits on a gate (first value v) until it reaches target: the op is
 * committed. If this rank's wait ends first (abort or deadline), it poisons
 * the gate so no op can commit later and sets *gave_up to why; if the op
 * committed just before, it completes like any other (*gave_up = MT_OK).
 * Returns the gate's last value: POISON set with *gave_up == MT_OK means a
 * peer gave up first. */
uint64_t mt__threads_await_commit(mt_ctx *ctx, mt_tflag *gate, uint64_t v, uint64_t target,
                             mt_status *gave_up) {
    *gave_up = MT_OK;
    int spins = 0;
    while (!(v & POISON) && v < target) {
        mt_status st = mt__wait_step(ctx, &spins);
        if (st != MT_OK) {
            v = atomic_load_explicit(gate, memory_order_acquire);
            while (!(v & POISON) && v < target)
                if (atomic_compare_exchange_weak_explicit(gate, &v, v | POISON,
                                                          memory_order_acq_rel,
                                                          memory_order_acquire)) {
                    mt__wait_wake(ctx->launch);   /* the peers' waits see the poison */
                    break;
                }
            if (!(v & POISON) && v >= target) return v;   /* committed meanwhile */
            *gave_up = st;
            return v;
        }
        v = atomic_load_explicit(gate, memory_order_acquire);
    }
    return v;
}

/* Publishes this rank's buffers for op n and waits until every rank has.
 *
 * Once all have arrived, peers read and write this rank's buffers, so a rank
 * may only leave early (abort, timeout) if the op can never start: arrivals
 * are counted in one `gate` word, the op commits when it reaches P·k, and a
 * rank that gives up first poisons the gate with a compare-and-swap. Either
 * the CAS wins (nobody will ever use the buffers) or the op committed
 * meanwhile and this rank completes it like everyone else. Only a won CAS
 * fails the launch: a deadline that passes as the last rank arrives is no
 * failure. The gate's read-modify-write chain also publishes every rank's
 * pointers. */
static mt_status rendezvous(mt_ctx *ctx, const mt_group *g, mt_tgroup *tg, uint64_t n,
                            const void *send, void *recv) {
    mt_trank_slot *me = &tg->ranks[g->rank];
    const uint64_t target = (uint64_t)g->size * ++me->n_rdv;
    me->send = send;
    me->recv = recv;
    atomic_store_explicit(&me->arrive, n, memory_order_relaxed);
    uint64_t v = atomic_fetch_add_explicit(&tg->gate, 1, memory_order_acq_rel) + 1;
    mt__wait_wake(ctx->launch);
    mt_status gave_up;
    v = mt__threads_await_commit(ctx, &tg->gate, v, target, &gave_up);
    if (gave_up != MT_OK) {
        /* poisoned, by this rank or a peer that gave up first: nobody will
         * touch the buffers; name who is missing */
        int n_missing = 0;
        for (int j = 0; j < g->size; j++)
            if (atomic_load_explicit(&tg->ranks[j].arrive, memory_order_relaxed) < n)
                ctx->wait_list[n_missing++] = g->members[j];
        return mt__wait_fail(ctx, g, gave_up, ctx->wait_list, n_missing);
    }
    /* a peer poisoned the op before this rank's deadline: it fails the launch
     * right after (mt__wait_fail waits for that to be published) */
    if (v & POISON) return mt__wait_fail(ctx, g, MT_EABORTED, NULL, 0);
    return MT_OK;
}

/* Ends op n: this rank is done with its peers' buffers; waits until every
 * rank is done with ours. Every rank that passed the rendezvous gets here
 * after a bounded amount of memory work, so neither an abort nor the
 * deadline ends the wait: leaving would let the caller reuse or free a
 * buffer a peer is still reading or writing. */
static mt_status finish(mt_ctx *ctx, const mt_group *g, mt_tgroup *tg, uint64_t n) {
    atomic_store_explicit(&tg->ranks[g->rank].done, n, memory_order_release);
    mt__wait_wake(ctx->launch);
    int spins = 0;
    for (int j = 0; j < g->size; j++)
        while (atomic_load_explicit(&tg->ranks[j].done, memory_order_acquire) < n)
            (void)mt__wait_step(ctx, &spins);
    return MT_OK;
}

/* Latency path: copies `bytes` of data into this rank's slot for op n, stamps
 * it, waits for every rank's stamp; returns the slots of op n. */
static mt_status exchange_small(mt_ctx *ctx, const mt_group *g, mt_tgroup *tg, uint64_t n,
                                const void *data, size_t bytes, mt_tsmall_slot **slots) {
    mt_tsmall_slot *s = tg->small + (size_t)(n & 1) * (size_t)g->size;
    if (bytes) memcpy(s[g->rank].data, data, bytes);
    atomic_store_explicit(&s[g->rank].seq, n, memory_order_release);
    mt__wait_wake(ctx->launch);
    *slots = s;
    /* safe to abandon: the slots are the transport's, not the caller's */
    return wait_flags(ctx, g, &s[0].seq, sizeof(mt_tsmall_slot), n);
}

/* ======================================================================== */
/* All-reduce                                                                */
/* ======================================================================== */

static mt_status all_reduce_large(mt_ctx *ctx, mt_group *g, mt_tgroup *tg, uint64_t n, void *buf,
                                  size_t count, mt_dtype dtype, mt_reduce_op op) {
    const int P = g->size, r = g->rank;
    const size_t es = mt_dtype_size(dtype);
    mt_status st = rendezvous(ctx, g, tg, n, buf, buf);
    if (st != MT_OK) return st;
    /* chunk r = elements [lo, hi), per a multiple of 64 bytes so no two
     * devices ever write the same cache line */
    const size_t align = 64 / es;
    const size_t per = ((count + (size_t)P - 1) / (size_t)P + align - 1) / align * align;
    const size_t lo = (size_t)r * per < count ? (size_t)r * per : count;
    const size_t hi = lo + per < count ? lo + per : count;
    /* own buffer first: combine reduces in place into src[0] */
    const void **src = ctx->ptrs;
    src[0] = buf;
    for (int j = 0, k = 1; j < P; j++)
        if (j != r) src[k++] = tg->ranks[j].send;
    if (dtype != MT_BF16) {
        mt__threads_reduce_bcast(dtype, op)(src, P, lo, (void *const *)src, P, lo, hi - lo, false);
        return finish(ctx, g, tg, n);
    }
    /* bf16: accumulate a block in f32 (one rounding), then push the result */
    for (size_t i = lo; i < hi; i += BLOCK_ELEMS(es)) {
        size_t m = hi - i < BLOCK_ELEMS(es) ? hi - i : BLOCK_ELEMS(es);
        char *d = (char *)buf + i * es;
        mt__threads_combine(d, src, P, i, m, dtype, op);
        for (int k = 1; k < P; k++) memcpy((char *)src[k] + i * es, d, m * es);
    }
    return finish(ctx, g, tg, n);
}

mt_status mt__threads_all_reduce(mt_ctx *ctx, const mt_group *gc, void *buf, size_t count,
                              mt_dtype dtype, mt_reduce_op op) {
    mt_group *g = (mt_group *)gc;   /* the ctx's own cache entry: n_ops is ours to bump */
    mt_tgroup *tg = g->transport;
    uint64_t n = mt__threads_next_op(g);
    size_t bytes = count * mt_dtype_size(dtype);
    if (!mt__threads_small(ctx, bytes))
        return all_reduce_large(ctx, g, tg, n, buf, count, dtype, op);
    mt_tsmall_slot *s;
    mt_status st = exchange_small(ctx, g, tg, n, buf, bytes, &s);
    if (st != MT_OK) return st;
    const void **src = ctx->ptrs;
    /* every rank reduces in rank order, so all get the same bits */
    for (int j = 0; j < g->size; j++) src[j] = s[j].data;
    mt__threads_combine(buf, src, g->size, 0, count, dtype, op);
    return MT_OK;
}

/* ======================================================================== */
/* The other collectives                                                     */
/* ======================================================================== */

/* All-gather and all-to-all: block j of recv (P, bytes) = the `bytes` at
 * offset `off` of rank j's send, every send being `total` bytes long
 * (all-gather: off 0, total = bytes; all-to-all: off = rank·bytes,
 * total = P·bytes). */
static inline mt_status gather_blocks(mt_ctx *ctx, const mt_group *gc, const void *send,
                                      void *recv, size_t bytes, size_t total, size_t off) {
    mt_group *g = (mt_group *)gc;
    mt_tgroup *tg = g->transport;
    uint64_t n = mt__threads_next_op(g);
    mt_status st;
    if (mt__threads_small(ctx, total)) {
        mt_tsmall_slot *s;
        if ((st = exchange_small(ctx, g, tg, n, send, total, &s))) return st;
        for (int j = 0; j < g->size; j++)
            memcpy((char *)recv + (size_t)j * bytes, s[j].data + off, bytes);
        return MT_OK;
    }
    if ((st = rendezvous(ctx, g, tg, n, send, recv))) return st;
    for (int j = 0; j < g->size; j++) {
        char *dst = (char *)recv + (size_t)j * bytes;
        const char *from = (const char *)tg->ranks[j].send + off;
        if (dst != from) memcpy(dst, from, bytes);   /* in place: the block is already there */
    }
    return finish(ctx, g, tg, n);
}

mt_status mt__threads_all_gather(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                              size_t bytes) {
    return gather_blocks(ctx, g, send, recv, bytes, bytes, 0);
}

mt_status mt__threads_reduce_scatter(mt_ctx *ctx, const mt_group *gc, const void *send, void *recv,
                                  size_t count, mt_dtype dtype, mt_reduce_op op) {
    mt_group *g = (mt_group *)gc;
    mt_tgroup *tg = g->transport;
    uint64_t n = mt__threads_next_op(g);
    size_t es = mt_dtype_size(dtype), total = (size_t)g->size * count * es;
    const void **src = ctx->ptrs;
    mt_status st;
    if (mt__threads_small(ctx, total)) {
        mt_tsmall_slot *s;
        if ((st = exchange_small(ctx, g, tg, n, send, total, &s))) return st;
        for (int j = 0; j < g->size; j++) src[j] = s[j].data;
        mt__threads_combine(recv, src, g->size, (size_t)g->rank * count, count, dtype, op);
        return MT_OK;
    }
    if ((st = rendezvous(ctx, g, tg, n, send, recv))) return st;
    for (int j = 0; j < g->size; j++) src[j] = tg->ranks[j].send;
    mt__threads_combine(recv, src, g->size, (size_t)g->rank * count, count, dtype, op);
    return finish(ctx, g, tg, n);
}

mt_status mt__threads_all_to_all(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                              size_t bytes) {
    return gather_blocks(ctx, g, send, recv, bytes, (size_t)g->size * bytes,
                         (size_t)g->rank * bytes);
}

mt_status mt__threads_permute(mt_ctx *ctx, const mt_group *gc, const void *send, void *recv,
                           size_t bytes, int dest, int src) {
    mt_group *g = (mt_group *)gc;
    mt_tgroup *tg = g->transport;
    uint64_t n = mt__threads_next_op(g);
    mt_status st;
    (void)dest;   /* receivers pull: each rank knows its source */
    if (mt__threads_small(ctx, bytes)) {
        mt_tsmall_slot *s;
        if ((st = exchange_small(ctx, g, tg, n, send, bytes, &s))) return st;
        if (src >= 0) memcpy(recv, s[src].data, bytes);
        else if (bytes) memset(recv, 0, bytes);
        return MT_OK;
    }
    if ((st = rendezvous(ctx, g, tg, n, send, recv))) return st;
    if (src >= 0) {
        if (recv != tg->ranks[src].send) memcpy(recv, tg->ranks[src].send, bytes);
    } else {
        memset(recv, 0, bytes);
    }
    return finish(ctx, g, tg, n);
}

mt_status mt__threads_broadcast(mt_ctx *ctx, const mt_group *gc, void *buf, size_t bytes, int root) {
    mt_group *g = (mt_group *)gc;
    mt_tgroup *tg = g->transport;
    uint64_t n = mt__threads_next_op(g);
    mt_status st;
    if (mt__threads_small(ctx, bytes)) {
        mt_tsmall_slot *s;
        bool am_root = g->rank == root;
        if ((st = exchange_small(ctx, g, tg, n, buf, am_root ? bytes : 0, &s))) return st;
        if (!am_root && bytes) memcpy(buf, s[root].data, bytes);
        return MT_OK;
    }
    if ((st = rendezvous(ctx, g, tg, n, buf, buf))) return st;
    if (g->rank != root) memcpy(buf, tg->ranks[root].send, bytes);
    return finish(ctx, g, tg, n);
}

mt_status mt__threads_barrier(mt_ctx *ctx, const mt_group *gc) {
    mt_group *g = (mt_group *)gc;
    mt_tsmall_slot *s;
    return exchange_small(ctx, g, g->transport, mt__threads_next_op(g), NULL, 0, &s);
}
