/*
 * threads.c — the threads transport: every device a thread of this process,
 * collectives through shared memory. The launch that starts the threads is
 * in threads_launch.c.
 *
 * Each group (axes key, first member) has one shared object with, per rank,
 * a cache line of flags and published pointers, and a double-buffered array
 * of small slots. Every collective a device runs on a group gets the next op
 * number n (g->n_ops); all flags are monotonic op numbers, so nothing is ever
 * reset and a waiter tests `flag >= n`.
 *
 * Small messages (a device contributes <= 1 KiB, or 4 KiB when devices
 * outnumber cores; see small()): the latency path.
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
 * Asynchronous forms (all-reduce, all-gather, reduce-scatter, ppermute;
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
 *
 * Waiting (mt__wait_step) spins briefly, then yields; with more devices than
 * cores it yields at once, and sleeps after a few yields.
 *
 * Point-to-point messages go through per-device mailboxes (threads_p2p.c).
 */
#include "base/arch_impl.h"
#include "comm/threads_impl.h"
#include "vec/vec.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Bytes a device may contribute on the latency path. Measured 2026-11-29 on
 * a 2-core Zen 5 dev VM: with spinning devices the rendezvous (each rank
 * touching only its share of a peer's lines) wins from ~1 KiB; with more
 * devices than cores each extra round of waiting costs a few µs of yields,
 * so the one-round latency path wins up to its slot size. */
#ifndef SMALL_MAX   /* (overridable for tuning experiments) */
#define SMALL_MAX   4096          /* slot size; devices > cores */
#endif
#ifndef SMALL_SPIN_MAX
#define SMALL_SPIN_MAX 1024       /* devices <= cores */
#endif
_Static_assert(SMALL_SPIN_MAX <= SMALL_MAX, "the latency path fits its slots");
#ifndef BLOCK_BYTES
#define BLOCK_BYTES (16 * 1024)   /* large bf16 all-reduce: reduced, then pushed, while in L1 */
#endif
#define BLOCK_ELEMS(es) (BLOCK_BYTES / (es))
#define SUB_ELEMS   2048          /* reduction sub-block: stays in L1 */
#define ASYNC_RING  (4 * MT_MAX_PENDING)   /* async op entries per group */
#ifndef STREAM_MIN_BYTES
/* an all-gather's whole output, or a reduction's buffer, from which stores
 * into other buffers than the sources stream past the cache: beyond a core's
 * L2 the lines would leave the cache before their reader; below it they
 * may still be there, and streaming them out costs (measured: 1 MiB
 * all_reduce_into 4x slower streamed) */
#define STREAM_MIN_BYTES (4u << 20)
#endif
#ifndef CHUNK_BYTES
#define CHUNK_BYTES (256 * 1024)  /* async work unit (per buffer); a multiple of 64 */
#endif

typedef atomic_uint_least64_t flag_t;

/* One rank's line: written by that rank only, read by its peers. */
typedef struct {
    _Alignas(64) flag_t arrive;   /* op whose pointers below are published (diagnostics) */
    flag_t       done;            /* op for which this rank has finished reading peers */
    const void  *send;            /* published buffers of op `arrive` */
    void        *recv;
    uint64_t     n_rdv;           /* rendezvous ops so far; only this rank touches it */
    flag_t       released;        /* async ops this rank has retired (in order) */
    uint64_t     n_async;         /* async ops started so far; only this rank touches it */
} rank_slot;

typedef struct {
    _Alignas(64) flag_t seq;      /* op whose data this slot holds */
    unsigned char       data[SMALL_MAX] __attribute__((aligned(64)));
} small_slot;

#define POISON (1ull << 62)       /* in `gate`: a rank gave up; no rendezvous will commit */

/* One rank's buffers for an async op (written by that rank before it
 * arrives; read by whoever does the op's chunks after commit). */
typedef struct {
    const void *send;
    void       *recv;
    int         src;              /* ppermute: the rank this one receives from (-1: none) */
    flag_t      arrived;          /* the op these are for (for timeout messages) */
} aptr;

/* An async op in flight: one entry of the group's ring. */
typedef struct {
    _Alignas(64) flag_t gate;          /* arrivals; the k-th use commits at P·(k+1); POISON */
    _Alignas(64) atomic_size_t claim;  /* next chunk to take (may run past the count) */
    _Alignas(64) atomic_size_t finished;/* chunks done */
} aentry;

typedef struct tgroup {
    _Alignas(64) flag_t gate;          /* arrivals at rendezvous ops; op k commits at P·k */
    struct tgroup *next;
    uint32_t       key;
    int            leader;        /* group rank 0's device id */
    int            P;
    rank_slot     *ranks;         /* (P) */
    small_slot    *small;         /* (2, P): by op parity, then rank */
    aentry        *async;         /* (ASYNC_RING) */
    aptr          *aptrs;         /* (ASYNC_RING, P) */
} tgroup;

/* ======================================================================== */
/* Shared state                                                              */
/* ======================================================================== */

mt_status mt__threads_init(mt_launch_state *ls) {
    mt_threads_shared *ts = calloc(1, sizeof *ts);
    mt_mailbox *boxes = ts ? mt__mailboxes_create(ls->n_devices) : NULL;
    if (!boxes) {
        free(ts);
        return mt_fail(MT_ENOMEM, "threads transport: out of memory");
    }
    pthread_mutex_init(&ts->mu, NULL);
    ts->boxes = boxes;
    ts->n_boxes = ls->n_devices;
    ls->transport = ts;
    return MT_OK;
}

void mt__threads_fini(mt_launch_state *ls) {
    mt_threads_shared *ts = ls->transport;
    if (!ts) return;
    mt__mailboxes_free(ts->boxes, ts->n_boxes);
    for (tgroup *tg = ts->groups, *next; tg; tg = next) {
        next = tg->next;
        free(tg->ranks);
        free(tg->small);
        free(tg->async);
        free(tg->aptrs);
        free(tg);
    }
    pthread_mutex_destroy(&ts->mu);
    free(ts);
    ls->transport = NULL;
}

static void *zalloc64(size_t bytes) {
    bytes = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

static tgroup *tgroup_create(uint32_t key, int leader, int P) {
    tgroup *tg = zalloc64(sizeof *tg);   /* gate gets a line of its own */
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

static mt_status group_init(mt_ctx *ctx, mt_group *g) {
    mt_threads_shared *ts = ctx->launch->transport;
    pthread_mutex_lock(&ts->mu);
    tgroup *tg = ts->groups;
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
static mt_status wait_flags(mt_ctx *ctx, const mt_group *g, flag_t *first, size_t stride,
                            uint64_t target) {
#define FLAG(j) ((flag_t *)((char *)first + (size_t)(j) * stride))
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
static uint64_t await_commit(mt_ctx *ctx, flag_t *gate, uint64_t v, uint64_t target,
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
static mt_status rendezvous(mt_ctx *ctx, const mt_group *g, tgroup *tg, uint64_t n,
                            const void *send, void *recv) {
    rank_slot *me = &tg->ranks[g->rank];
    const uint64_t target = (uint64_t)g->size * ++me->n_rdv;
    me->send = send;
    me->recv = recv;
    atomic_store_explicit(&me->arrive, n, memory_order_relaxed);
    uint64_t v = atomic_fetch_add_explicit(&tg->gate, 1, memory_order_acq_rel) + 1;
    mt__wait_wake(ctx->launch);
    mt_status gave_up;
    v = await_commit(ctx, &tg->gate, v, target, &gave_up);
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
static mt_status finish(mt_ctx *ctx, const mt_group *g, tgroup *tg, uint64_t n) {
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
static mt_status exchange_small(mt_ctx *ctx, const mt_group *g, tgroup *tg, uint64_t n,
                                const void *data, size_t bytes, small_slot **slots) {
    small_slot *s = tg->small + (size_t)(n & 1) * (size_t)g->size;
    if (bytes) memcpy(s[g->rank].data, data, bytes);
    atomic_store_explicit(&s[g->rank].seq, n, memory_order_release);
    mt__wait_wake(ctx->launch);
    *slots = s;
    /* safe to abandon: the slots are the transport's, not the caller's */
    return wait_flags(ctx, g, &s[0].seq, sizeof(small_slot), n);
}

static uint64_t next_op(mt_group *g) { return ++g->n_ops; }

/* Whether `bytes` per device take the latency path (the same on every device). */
static bool small(const mt_ctx *ctx, size_t bytes) {
    return bytes <= (ctx->launch->may_spin ? SMALL_SPIN_MAX : SMALL_MAX);
}

/* ======================================================================== */
/* Reduction of many sources                                                 */
/* ======================================================================== */

/* dst (n) = src[0] op src[1] op ... op src[nsrc-1], each at element offset
 * `off`. dst may be src[0] itself (no other). bf16 accumulates in f32 and
 * rounds once. Sub-blocks keep dst in L1 while the sources stream by. */
static void combine(void *dst, const void **src, int nsrc, size_t off, size_t n, mt_dtype dtype,
                    mt_reduce_op op) {
    size_t es = mt_dtype_size(dtype);
    for (size_t i = 0; i < n; i += SUB_ELEMS) {
        size_t m = n - i < SUB_ELEMS ? n - i : SUB_ELEMS;
        char *d = (char *)dst + i * es;
        size_t at = (off + i) * es;
        if (dtype == MT_BF16) {
            float acc[SUB_ELEMS], tmp[SUB_ELEMS];   /* (m) */
            mt__bf16_to_f32(acc, (const uint16_t *)((const char *)src[0] + at), m);
            for (int k = 1; k < nsrc; k++) {
                mt__bf16_to_f32(tmp, (const uint16_t *)((const char *)src[k] + at), m);
                mt__reduce_into(acc, tmp, m, MT_F32, op);
            }
            mt__f32_to_bf16((uint16_t *)d, acc, m);
        } else {
            if (d != (const char *)src[0] + at) memcpy(d, (const char *)src[0] + at, m * es);
            for (int k = 1; k < nsrc; k++)
                mt__reduce_into(d, (const char *)src[k] + at, m, dtype, op);
        }
    }
}

/* ======================================================================== */
/* All-reduce                                                                */
/* ======================================================================== */

/* dst[k][doff + i] = src[0][soff + i] op ... op src[P-1][soff + i] for
 * i < n and each of the nd destinations (a destination may be a source at
 * the same element: in place): one 64-byte line of each source at a time,
 * reduced in registers and stored to every destination right after being
 * read. In place the stores hit lines just read, so memory sees each line
 * read once and written once. Into other buffers (all_reduce_into, a
 * reduce-scatter's block), when `stream` (a large op: its lines are not in
 * cache) the stores go past the cache (non-temporal), so the destinations
 * are not read first either; a store fence (x86: SFENCE) then orders them before whatever
 * publishes the result. */
static bool streamable(const void *const *src, int P, size_t soff, void *const *dst, int nd,
                       size_t doff, size_t es) {
    for (int k = 0; k < nd; k++) {
        const char *d = (const char *)dst[k] + doff * es;
        if ((uintptr_t)d & 15) return false;
        for (int j = 0; j < P; j++)
            if (d == (const char *)src[j] + soff * es) return false;
    }
    return true;
}

/* Stores 64 bytes at d (16-byte aligned) past the cache (base/arch_impl.h). */
static inline void stream_line(void *d, const void *v) { mt__stream_line(d, v); }

/* dst (n bytes) = src, the whole 64-byte lines of dst stored past the cache. */
static void stream_copy(void *dst, const void *src, size_t n) {
    char *d = dst;
    const char *s = src;
    size_t head = (64 - ((uintptr_t)d & 63)) & 63;
    if (head > n) head = n;
    memcpy(d, s, head);
    size_t i = head;
    for (; i + 64 <= n; i += 64) stream_line(d + i, s + i);
    memcpy(d + i, s + i, n - i);
    mt__store_fence();
}

#define DEF_REDUCE_BCAST(NAME, T, EXPR)                                                 \
    static void NAME(const void *const *src, int P, size_t soff, void *const *dst, int nd, \
                     size_t doff, size_t n, bool stream) {                              \
        const bool nt = stream && streamable(src, P, soff, dst, nd, doff, sizeof(T));   \
        size_t i0 = 0;                                                                  \
        for (; i0 + 16 <= n; i0 += 16) {                                                \
            T acc[16];                                                                  \
            const T *s0 = (const T *)src[0] + soff + i0;                                \
            for (int i = 0; i < 16; i++) acc[i] = s0[i];                                \
            for (int k = 1; k < P; k++) {                                               \
                const T *s = (const T *)src[k] + soff + i0;                             \
                for (int i = 0; i < 16; i++) { T a = acc[i], b = s[i]; acc[i] = (EXPR); } \
            }                                                                           \
            for (int k = 0; k < nd; k++) {                                              \
                T *d = (T *)dst[k] + doff + i0;                                         \
                if (nt) stream_line(d, acc);                                            \
                else for (int i = 0; i < 16; i++) d[i] = acc[i];                        \
            }                                                                           \
        }                                                                               \
        for (; i0 < n; i0++) {                                                          \
            T a = ((const T *)src[0])[soff + i0];                                       \
            for (int k = 1; k < P; k++) { T b = ((const T *)src[k])[soff + i0]; a = (EXPR); } \
            for (int k = 0; k < nd; k++) ((T *)dst[k])[doff + i0] = a;                  \
        }                                                                               \
        if (nt) mt__store_fence();                                                      \
    }

DEF_REDUCE_BCAST(rb_sum_i32, uint32_t, a + b)   /* unsigned: wraps instead of UB */
DEF_REDUCE_BCAST(rb_max_i32, int32_t, b > a ? b : a)
DEF_REDUCE_BCAST(rb_min_i32, int32_t, b < a ? b : a)

/* f32: the vector layer's kernel at the kernel level in use (vec/vec.h; max
 * and min let a NaN win from any rank, as jax.lax.pmax / pmin do), the whole
 * lines through the streaming store when the destinations allow it */
static void stream_line_f32(void *d, const float *v) { mt__stream_line(d, v); }

static void rb_f32(mt_reduce_op op, const void *const *src, int P, size_t soff, void *const *dst,
                   int nd, size_t doff, size_t n, bool stream) {
    const bool nt = stream && streamable(src, P, soff, dst, nd, doff, sizeof(float));
    mt__vec()->reduce_bcast[op]((const float *const *)src, P, soff, (float *const *)dst, nd, doff,
                                n, nt ? stream_line_f32 : NULL);
    if (nt) mt__store_fence();
}
#define DEF_RB_F32(NAME, OP)                                                                 \
    static void NAME(const void *const *src, int P, size_t soff, void *const *dst, int nd,   \
                     size_t doff, size_t n, bool stream) {                                   \
        rb_f32(OP, src, P, soff, dst, nd, doff, n, stream);                                  \
    }
DEF_RB_F32(rb_sum_f32, MT_REDUCE_SUM)
DEF_RB_F32(rb_max_f32, MT_REDUCE_MAX)
DEF_RB_F32(rb_min_f32, MT_REDUCE_MIN)

typedef void reduce_bcast_fn(const void *const *, int, size_t, void *const *, int, size_t,
                             size_t, bool);
/* The fused kernel of an f32 or i32 reduction. */
static reduce_bcast_fn *reduce_bcast(mt_dtype dtype, mt_reduce_op op) {
    static reduce_bcast_fn *const fused[2][3] = {{rb_sum_f32, rb_max_f32, rb_min_f32},
                                                 {rb_sum_i32, rb_max_i32, rb_min_i32}};
    return fused[dtype == MT_I32][op];
}

static mt_status all_reduce_large(mt_ctx *ctx, mt_group *g, tgroup *tg, uint64_t n, void *buf,
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
        reduce_bcast(dtype, op)(src, P, lo, (void *const *)src, P, lo, hi - lo, false);
        return finish(ctx, g, tg, n);
    }
    /* bf16: accumulate a block in f32 (one rounding), then push the result */
    for (size_t i = lo; i < hi; i += BLOCK_ELEMS(es)) {
        size_t m = hi - i < BLOCK_ELEMS(es) ? hi - i : BLOCK_ELEMS(es);
        char *d = (char *)buf + i * es;
        combine(d, src, P, i, m, dtype, op);
        for (int k = 1; k < P; k++) memcpy((char *)src[k] + i * es, d, m * es);
    }
    return finish(ctx, g, tg, n);
}

static mt_status t_all_reduce(mt_ctx *ctx, const mt_group *gc, void *buf, size_t count,
                              mt_dtype dtype, mt_reduce_op op) {
    mt_group *g = (mt_group *)gc;   /* the ctx's own cache entry: n_ops is ours to bump */
    tgroup *tg = g->transport;
    uint64_t n = next_op(g);
    size_t bytes = count * mt_dtype_size(dtype);
    if (!small(ctx, bytes)) return all_reduce_large(ctx, g, tg, n, buf, count, dtype, op);
    small_slot *s;
    mt_status st = exchange_small(ctx, g, tg, n, buf, bytes, &s);
    if (st != MT_OK) return st;
    const void **src = ctx->ptrs;
    /* every rank reduces in rank order, so all get the same bits */
    for (int j = 0; j < g->size; j++) src[j] = s[j].data;
    combine(buf, src, g->size, 0, count, dtype, op);
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
    tgroup *tg = g->transport;
    uint64_t n = next_op(g);
    mt_status st;
    if (small(ctx, total)) {
        small_slot *s;
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

static mt_status t_all_gather(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                              size_t bytes) {
    return gather_blocks(ctx, g, send, recv, bytes, bytes, 0);
}

static mt_status t_reduce_scatter(mt_ctx *ctx, const mt_group *gc, const void *send, void *recv,
                                  size_t count, mt_dtype dtype, mt_reduce_op op) {
    mt_group *g = (mt_group *)gc;
    tgroup *tg = g->transport;
    uint64_t n = next_op(g);
    size_t es = mt_dtype_size(dtype), total = (size_t)g->size * count * es;
    const void **src = ctx->ptrs;
    mt_status st;
    if (small(ctx, total)) {
        small_slot *s;
        if ((st = exchange_small(ctx, g, tg, n, send, total, &s))) return st;
        for (int j = 0; j < g->size; j++) src[j] = s[j].data;
        combine(recv, src, g->size, (size_t)g->rank * count, count, dtype, op);
        return MT_OK;
    }
    if ((st = rendezvous(ctx, g, tg, n, send, recv))) return st;
    for (int j = 0; j < g->size; j++) src[j] = tg->ranks[j].send;
    combine(recv, src, g->size, (size_t)g->rank * count, count, dtype, op);
    return finish(ctx, g, tg, n);
}

static mt_status t_all_to_all(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                              size_t bytes) {
    return gather_blocks(ctx, g, send, recv, bytes, (size_t)g->size * bytes,
                         (size_t)g->rank * bytes);
}

static mt_status t_permute(mt_ctx *ctx, const mt_group *gc, const void *send, void *recv,
                           size_t bytes, int dest, int src) {
    mt_group *g = (mt_group *)gc;
    tgroup *tg = g->transport;
    uint64_t n = next_op(g);
    mt_status st;
    (void)dest;   /* receivers pull: each rank knows its source */
    if (small(ctx, bytes)) {
        small_slot *s;
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

static mt_status t_broadcast(mt_ctx *ctx, const mt_group *gc, void *buf, size_t bytes, int root) {
    mt_group *g = (mt_group *)gc;
    tgroup *tg = g->transport;
    uint64_t n = next_op(g);
    mt_status st;
    if (small(ctx, bytes)) {
        small_slot *s;
        bool am_root = g->rank == root;
        if ((st = exchange_small(ctx, g, tg, n, buf, am_root ? bytes : 0, &s))) return st;
        if (!am_root && bytes) memcpy(buf, s[root].data, bytes);
        return MT_OK;
    }
    if ((st = rendezvous(ctx, g, tg, n, buf, buf))) return st;
    if (g->rank != root) memcpy(buf, tg->ranks[root].send, bytes);
    return finish(ctx, g, tg, n);
}

static mt_status t_barrier(mt_ctx *ctx, const mt_group *gc) {
    mt_group *g = (mt_group *)gc;
    small_slot *s;
    return exchange_small(ctx, g, g->transport, next_op(g), NULL, 0, &s);
}

/* ======================================================================== */
/* Asynchronous forms                                                        */
/* ======================================================================== */

/* Bytes a device contributes to p: what decides the path, as in the blocking
 * forms (the same on every device). */
static size_t async_bytes(const mt_group *g, const mt_pending *p) {
    size_t bytes = p->count * mt_dtype_size(p->dtype);
    return p->kind == MT_COLL_REDUCE_SCATTER ? bytes * (size_t)g->size : bytes;
}

static bool t_async_eager(const mt_ctx *ctx, const mt_group *g, const mt_pending *p) {
    return !small(ctx, async_bytes(g, p));
}

static aentry *async_entry(tgroup *tg, uint64_t a) { return &tg->async[(a - 1) % ASYNC_RING]; }
static aptr *async_ptrs(tgroup *tg, uint64_t a) {
    return &tg->aptrs[(size_t)((a - 1) % ASYNC_RING) * (size_t)tg->P];
}
/* Arrivals at which op a commits: its entry's uses so far times P. */
static uint64_t async_target(const tgroup *tg, uint64_t a) {
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
static void async_chunk(mt_ctx *ctx, const mt_group *g, const aptr *ap, const mt_pending *p,
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
            reduce_bcast(p->dtype, p->op)(src, P, lo, dst, P, lo, n,
                                          p->count * es >= STREAM_MIN_BYTES);
            return;
        }
        for (size_t k = lo; k < lo + n; k += BLOCK_ELEMS(es)) {
            size_t m = lo + n - k < BLOCK_ELEMS(es) ? lo + n - k : BLOCK_ELEMS(es);
            char *d = (char *)ap[0].recv + k * es;
            combine(d, src, P, k, m, p->dtype, p->op);
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
        if ((size_t)P * bytes >= STREAM_MIN_BYTES) stream_copy(dst, from, n);
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
        combine((char *)ap[d].recv + lo * es, src, P, d * p->count + lo, n, p->dtype, p->op);
        return;
    }
    void *const dst[1] = {ap[d].recv};
    reduce_bcast(p->dtype, p->op)(src, P, d * p->count + lo, dst, 1, lo, n,
                                  (size_t)P * p->count * es >= STREAM_MIN_BYTES);
}

/* Starts p: waits (rarely) until its ring entry is free, publishes this
 * rank's buffers and arrives. Never touches a peer's buffer. */
static mt_status t_async_start(mt_ctx *ctx, mt_group *g, mt_pending *p) {
    tgroup *tg = g->transport;
    rank_slot *me = &tg->ranks[g->rank];
    const uint64_t a = ++me->n_async;
    p->tag = a;
    if (a > ASYNC_RING) {
        /* the entry's previous op must be retired by every rank: then nobody
         * reads its counters or pointers any more (acquire pairs with the
         * release in t_async_wait) */
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
    aentry *e = async_entry(tg, a);
    aptr *mine = &async_ptrs(tg, a)[g->rank];
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
static mt_status t_async_wait(mt_ctx *ctx, mt_group *g, mt_pending *p) {
    tgroup *tg = g->transport;
    rank_slot *me = &tg->ranks[g->rank];
    const uint64_t a = p->tag, target = async_target(tg, a);
    aentry *e = async_entry(tg, a);
    const aptr *ap = async_ptrs(tg, a);
    mt_status gave_up;
    uint64_t v = await_commit(ctx, &e->gate, atomic_load_explicit(&e->gate, memory_order_acquire),
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

const mt_transport_ops mt__threads_transport = {
    .name = "threads",
    .launch = mt__threads_launch,
    .all_reduce = t_all_reduce,
    .all_gather = t_all_gather,
    .reduce_scatter = t_reduce_scatter,
    .all_to_all = t_all_to_all,
    .permute = t_permute,
    .broadcast = t_broadcast,
    .barrier = t_barrier,
    .group_init = group_init,
    .group_fini = NULL,
    .async_eager = t_async_eager,
    .async_start = t_async_start,
    .async_wait = t_async_wait,
    .send = mt__threads_send,
    .recv = mt__threads_recv,
};
