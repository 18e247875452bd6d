/*
 * threads_impl.h — what the threads transport's files share (internal).
 * Bottom up: threads_reduce.c (the reductions' kernels), threads.c (the
 * groups' shared memory, how ranks meet in it, the blocking collectives),
 * threads_async.c (the asynchronous forms), threads_p2p.c (the
 * point-to-point messages), threads_launch.c (the device threads, the
 * shared state and the transport's table).
 */
#ifndef MT_THREADS_IMPL_H
#define MT_THREADS_IMPL_H

#include "comm/transport_impl.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* ======================================================================== */
/* The groups' shared memory (threads.c)                                     */
/* ======================================================================== */

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

typedef atomic_uint_least64_t mt_tflag;

/* One rank's line: written by that rank only, read by its peers. */
typedef struct {
    _Alignas(64) mt_tflag arrive;   /* op whose pointers below are published (diagnostics) */
    mt_tflag       done;            /* op for which this rank has finished reading peers */
    const void  *send;            /* published buffers of op `arrive` */
    void        *recv;
    uint64_t     n_rdv;           /* rendezvous ops so far; only this rank touches it */
    mt_tflag       released;        /* async ops this rank has retired (in order) */
    uint64_t     n_async;         /* async ops started so far; only this rank touches it */
} mt_trank_slot;

typedef struct {
    _Alignas(64) mt_tflag seq;      /* op whose data this slot holds */
    unsigned char       data[SMALL_MAX] __attribute__((aligned(64)));
} mt_tsmall_slot;

#define POISON (1ull << 62)       /* in `gate`: a rank gave up; no rendezvous will commit */

/* One rank's buffers for an async op (written by that rank before it
 * arrives; read by whoever does the op's chunks after commit). */
typedef struct {
    const void *send;
    void       *recv;
    int         src;              /* ppermute: the rank this one receives from (-1: none) */
    mt_tflag      arrived;          /* the op these are for (for timeout messages) */
} mt_taptr;

/* An async op in flight: one entry of the group's ring. */
typedef struct {
    _Alignas(64) mt_tflag gate;          /* arrivals; the k-th use commits at P·(k+1); POISON */
    _Alignas(64) atomic_size_t claim;  /* next chunk to take (may run past the count) */
    _Alignas(64) atomic_size_t finished;/* chunks done */
} mt_taentry;

typedef struct mt_tgroup {
    _Alignas(64) mt_tflag gate;          /* arrivals at rendezvous ops; op k commits at P·k */
    struct mt_tgroup *next;
    uint32_t       key;
    int            leader;        /* group rank 0's device id */
    int            P;
    mt_trank_slot     *ranks;         /* (P) */
    mt_tsmall_slot    *small;         /* (2, P): by op parity, then rank */
    mt_taentry        *async;         /* (ASYNC_RING) */
    mt_taptr          *aptrs;         /* (ASYNC_RING, P) */
} mt_tgroup;

/* The next op number of g (every numbered op synchronises all ranks). */
static inline uint64_t mt__threads_next_op(mt_group *g) { return ++g->n_ops; }

/* Whether `bytes` per device take the latency path (the same on every device). */
static inline bool mt__threads_small(const mt_ctx *ctx, size_t bytes) {
    return bytes <= (ctx->launch->may_spin ? SMALL_SPIN_MAX : SMALL_MAX);
}

/* Frees a list of groups' shared memory (linked by next). */
void mt__tgroups_free(mt_tgroup *list);

/* The table's group_init: g->transport = the group's shared memory, found
 * or made (once per group, under the shared state's lock). */
mt_status mt__threads_group_init(mt_ctx *ctx, mt_group *g);

/* Waits on a gate (first value v) until it reaches target: the op is
 * committed. See threads.c: on abort or deadline it poisons the gate and
 * sets *gave_up, unless the op committed meanwhile. Returns the gate's last
 * value. */
uint64_t mt__threads_await_commit(mt_ctx *ctx, mt_tflag *gate, uint64_t v, uint64_t target,
                                  mt_status *gave_up);

/* The table's blocking collectives (see mt_transport_ops). */
mt_status mt__threads_all_reduce(mt_ctx *ctx, const mt_group *g, void *buf, size_t count,
                                 mt_dtype dtype, mt_reduce_op op);
mt_status mt__threads_all_gather(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                                 size_t bytes);
mt_status mt__threads_reduce_scatter(mt_ctx *ctx, const mt_group *g, const void *send,
                                     void *recv, size_t count, mt_dtype dtype, mt_reduce_op op);
mt_status mt__threads_all_to_all(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                                 size_t bytes);
mt_status mt__threads_permute(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                              size_t bytes, int dest, int src);
mt_status mt__threads_broadcast(mt_ctx *ctx, const mt_group *g, void *buf, size_t bytes,
                                int root);
mt_status mt__threads_barrier(mt_ctx *ctx, const mt_group *g);

/* ---- the reductions' kernels (threads_reduce.c) -------------------------- */

/* dst (n) = src[0] op src[1] op ... op src[nsrc-1], each at element offset
 * `off`. dst may be src[0] itself (no other). bf16 accumulates in f32 and
 * rounds once. */
void mt__threads_combine(void *dst, const void **src, int nsrc, size_t off, size_t n,
                         mt_dtype dtype, mt_reduce_op op);

/* dst[k][doff + i] = src[0][soff + i] op ... op src[P-1][soff + i] for i < n
 * and each of the nd destinations, one line at a time; `stream`: a large op,
 * whose stores into other buffers than the sources may go past the cache. */
typedef void mt_reduce_bcast_fn(const void *const *src, int P, size_t soff, void *const *dst,
                                int nd, size_t doff, size_t n, bool stream);
/* The fused kernel of an f32 or i32 reduction. */
mt_reduce_bcast_fn *mt__threads_reduce_bcast(mt_dtype dtype, mt_reduce_op op);

/* dst (n bytes) = src, the whole 64-byte lines of dst stored past the cache. */
void mt__threads_stream_copy(void *dst, const void *src, size_t n);

/* ---- the asynchronous forms (threads_async.c) ---------------------------- */

/* The table's async_eager, async_start and async_wait (see mt_transport_ops). */
bool      mt__threads_async_eager(const mt_ctx *ctx, const mt_group *g, const mt_pending *p);
mt_status mt__threads_async_start(mt_ctx *ctx, mt_group *g, mt_pending *p);
mt_status mt__threads_async_wait(mt_ctx *ctx, mt_group *g, mt_pending *p);

/* ======================================================================== */
/* The launch and the shared state (threads_launch.c)                        */
/* ======================================================================== */

/* A device's mailbox of point-to-point messages (threads_p2p.c). */
typedef struct mt_mailbox mt_mailbox;

/* The transport's shared state for one launch, in ls->transport. */
typedef struct {
    pthread_mutex_t mu;           /* guards `groups` (taken once per device and group) */
    struct mt_tgroup *groups;     /* the groups' shared memory (threads.c) */
    mt_mailbox     *boxes;        /* (n_boxes) one per device (threads_p2p.c) */
    int             n_boxes;
} mt_threads_shared;

/* The shared state (ls->transport); mt__threads_fini frees it (NULL:
 * nothing to do), messages never received included. */
mt_status mt__threads_init(mt_launch_state *ls);
void      mt__threads_fini(mt_launch_state *ls);

/* The table's launch: one thread per device of the mesh (device 0 on the
 * caller), in this process (threads_launch.c). */
mt_status mt__threads_launch(const mt_launch_opts *opts, mt_device_fn fn, void *arg);

/* ---- point-to-point messages (threads_p2p.c) ---------------------------- */

/* n empty mailboxes (NULL: out of memory), and freeing them with every
 * message still in them. */
mt_mailbox *mt__mailboxes_create(int n);
void        mt__mailboxes_free(mt_mailbox *boxes, int n);

/* After every device has returned: reports the messages nobody received
 * (mt__p2p_leftover, for the first device that has some) and frees them. */
void mt__mailboxes_close(mt_launch_state *ls, mt_mailbox *boxes, int n);

/* The table's send and recv (see mt_transport_ops). */
mt_status mt__threads_send(mt_ctx *ctx, const mt_group *g, int dst, int tag, const void *buf,
                           size_t bytes);
mt_status mt__threads_recv(mt_ctx *ctx, const mt_group *g, int src, int tag, void *buf,
                           size_t bytes, size_t *got);

#endif /* MT_THREADS_IMPL_H */
