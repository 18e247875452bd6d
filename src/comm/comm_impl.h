/*
 * comm_impl.h — the runtime and collectives behind mt_launch / mt_psum ...
 * (internal).
 *
 * Layers, bottom up:
 *   transport   moves bytes for one group: a small table of functions
 *               (threads.c: shared memory between device threads; mpi.c: one
 *               device per MPI rank). Every function blocks until done, and
 *               returns MT_ETIMEOUT / MT_EABORTED instead of hanging (once
 *               peers may use the caller's buffers, it completes the
 *               bounded copying first, deadline or not).
 *   front end   (comm.c) checks arguments, resolves the group, numbers and
 *               records every collective (sequence, op, axes, bytes), runs
 *               the debug match check, records trace spans, builds the
 *               dimensioned and asynchronous forms on the flat ones.
 *   launch      (launch.c) creates the devices (threads or this rank), their
 *               contexts and the shared state, runs the device function,
 *               and turns the first failure into every device's error.
 */
#ifndef MT_COMM_IMPL_H
#define MT_COMM_IMPL_H

#include "meshtrain/comm.h"
#include "base/pool.h"
#include "tensor/tensor_impl.h"

#include <stdatomic.h>

/* Collectives, as the front end numbers and names them. */
typedef enum {
    MT_COLL_ALL_REDUCE = 0, MT_COLL_ALL_GATHER, MT_COLL_REDUCE_SCATTER, MT_COLL_ALL_TO_ALL,
    MT_COLL_PERMUTE, MT_COLL_BROADCAST, MT_COLL_BARRIER, MT_COLL_COUNT
} mt_coll_kind;

/* A group: the devices sharing all coordinates but those of `axes`. */
typedef struct {
    uint32_t key;        /* axes in order, 4 bits each (axis+1), for caches */
    mt_axes  axes;
    int      size;       /* P */
    int      rank;       /* this device's rank in the group */
    int     *members;    /* (P) device ids in rank order; owned by the ctx's cache */
    void    *transport;  /* the transport's state for this group (set by group_init) */
    uint64_t n_ops;      /* transport calls on this group by this device (transport's use) */
    void    *check_buf;  /* (P, 64 bytes) debug-check exchange; owned by the ctx's cache */
    char     label[64];  /* "'data'" or "'data,tensor'", for messages */
} mt_group;

/* What a device did last, readable by the others (for timeout messages).
 * `text` is for the owner (mt_ctx_last_collective); other devices read the
 * atomic fields, which the owner writes before publishing `seq` (release),
 * and format them with mt__record_text. */
typedef struct {
    _Atomic uint64_t seq;          /* collectives issued, 1-based; 0 = none yet */
    char             text[160];    /* "#12 psum over 'data' f32 4096 bytes" */
    _Atomic int      in_collective;/* 1 while inside one */
    _Atomic int      kind;         /* mt_coll_kind (all-reduce: + 16 * op) */
    _Atomic int      dtype;
    _Atomic uint32_t axes_key;
    _Atomic uint64_t bytes;
} mt_device_record;

typedef struct mt_transport_ops mt_transport_ops;

/* Process-wide state of one launch (shared by the device threads). */
typedef struct {
    const mt_mesh          *mesh;
    int                     n_devices;     /* mesh size */
    int                     n_local;       /* devices run by this process */
    const mt_transport_ops *ops;
    void                   *transport;     /* the transport's shared state */
    double                  timeout_s;
    bool                    check;
    const char             *trace_path;
    atomic_int              abort;         /* set once: a device failed or timed out */
    atomic_int              fail_claimed;  /* the first failing device claims failed_* */
    int                     failed_device; /* the first one that failed */
    mt_status               failed_status;
    char                    failed_msg[1024];
    mt_device_record       *records;       /* (n_devices); under MPI only this rank's is written */
    int                     process_rank, process_size;
    double                  t_start;       /* mt_time_now() at launch; trace times are relative */
    int                     n_cores;       /* CPUs the local devices share (affinity) */
    bool                    may_spin;      /* local devices <= cores: waits may spin briefly */
    int                     kernel_threads;/* per device: mt_set_num_threads during the launch, ctx pools */
} mt_launch_state;

/* A trace event (Chrome trace "complete" event). */
typedef struct {
    double   t0, t1;       /* seconds since launch */
    char     name[48];
    uint64_t bytes;        /* collectives; 0 for compute */
    bool     is_comm;
} mt_trace_event;

typedef struct {
    int        id;         /* the mt_request id */
    bool       started;
    int        kind;       /* which collective (mt_coll_kind) */
    mt_axes    axes;
    void      *buf;
    const void *send;
    void      *recv;
    size_t     count;
    mt_dtype   dtype;
    mt_reduce_op op;
    mt_group  *g;         /* resolved at start */
    bool       eager;     /* started in the transport (async_start): finish with async_wait */
    uint64_t   tag;       /* the transport's number for it */
} mt_pending;

struct mt_ctx {
    int               device;
    mt_launch_state  *launch;
    mt_device_record *record;          /* this device's (threads: &launch->records[device]) */
    void             *transport;       /* the transport's per-device state */
    uint64_t          seq;             /* collectives issued */
    double            deadline;        /* of the running collective, on mt_time_now()'s clock */
    int              *wait_list;       /* (2 * n_devices) scratch for transports' wait loops */
    const void      **ptrs;            /* (n_devices) scratch for transports (peer buffers) */
    /* group cache: one entry per axes key seen (a 4-axis mesh alone has 64
     * ordered axis sets), each allocated on its own so the pointers the
     * front end holds stay valid while the cache grows */
    mt_group        **groups;
    int               n_groups, cap_groups;
    /* trace */
    mt_trace_event   *events;
    int               n_events, cap_events;
    int               open_region;     /* index of an open mt_trace_begin, -1 none */
    double            t_start;
    /* asynchronous requests, completed in start order by the waits */
    mt_pending        pending[MT_MAX_PENDING];
    int               n_pending, next_request;
    /* requests dropped from the queue when one failed (ids dropped_lo ..
     * dropped_hi; none while dropped_hi is 0): mt_wait on them fails so */
    int               dropped_lo, dropped_hi;
    mt_status         dropped_status;
    char              dropped_msg[256];
    /* scratch for the dimensioned forms, grown as needed */
    void             *scratch;
    size_t            scratch_bytes;
    mt_pool          *pool;            /* kernel threads of this device */
};

/* The transport table. `bytes` counts bytes; reductions take count + dtype.
 * All-gather output is (P, bytes) in group-rank order; reduce-scatter input
 * is (P, count) and this rank keeps block `rank`; all-to-all sends block j of
 * send to rank j and stores rank j's block in block j of recv; permute sends
 * to `dest` (-1: nobody) and receives from `src` (-1: nobody; recv is zeroed). */
struct mt_transport_ops {
    const char *name;
    mt_status (*all_reduce)(mt_ctx *ctx, const mt_group *g, void *buf, size_t count,
                            mt_dtype dtype, mt_reduce_op op);
    mt_status (*all_gather)(mt_ctx *ctx, const mt_group *g, const void *send, void *recv, size_t bytes);
    mt_status (*reduce_scatter)(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                                size_t count, mt_dtype dtype, mt_reduce_op op);
    mt_status (*all_to_all)(mt_ctx *ctx, const mt_group *g, const void *send, void *recv, size_t bytes);
    mt_status (*permute)(mt_ctx *ctx, const mt_group *g, const void *send, void *recv, size_t bytes,
                         int dest, int src);
    mt_status (*broadcast)(mt_ctx *ctx, const mt_group *g, void *buf, size_t bytes, int root);
    mt_status (*barrier)(mt_ctx *ctx, const mt_group *g);
    /* Optional (NULL: none). Called once per device and group, when the
     * device first uses the group (the group's members, rank and size are
     * set); may set g->transport. group_fini undoes it at the end. */
    mt_status (*group_init)(mt_ctx *ctx, mt_group *g);
    void      (*group_fini)(mt_ctx *ctx, mt_group *g);
    /* Optional asynchronous forms (all three or none; NULL: the front end
     * queues requests and runs the blocking forms at the first mt_wait that
     * needs them, as for mpi.c). async_eager says whether the transport
     * starts p itself (the same answer on every device of g for matching
     * requests). async_start publishes p and returns without waiting for
     * peers (beyond, rarely, a free slot), touching no peer buffer; it may
     * set p->tag. async_wait completes p (its data may have been moved by
     * peers meanwhile) and must be called once for every started request, in
     * start order, also when the launch has failed (then it gives up if the
     * op never committed, else completes it: peers may be using the
     * buffers). No device returns from async_wait while a peer can still
     * touch its buffers. */
    bool      (*async_eager)(const mt_ctx *ctx, const mt_group *g, const mt_pending *p);
    mt_status (*async_start)(mt_ctx *ctx, mt_group *g, mt_pending *p);
    mt_status (*async_wait)(mt_ctx *ctx, mt_group *g, mt_pending *p);
};

extern const mt_transport_ops mt__threads_transport;
#ifdef MT_HAVE_MPI
extern const mt_transport_ops mt__mpi_transport;
#endif

/* Reduces n elements of src into dst (dst = dst op src); bf16 through f32,
 * rounded to nearest even. max and min propagate NaN. */
void mt__reduce_into(void *dst, const void *src, size_t n, mt_dtype dtype, mt_reduce_op op);

/* Marks the launch failed (first caller wins) and returns `status`. Every
 * device's waits then return MT_EABORTED. */
mt_status mt__launch_fail(mt_launch_state *ls, int device, mt_status status, const char *msg);

/* One step of a transport's wait loop: spins briefly, then yields (and after
 * ~10 ms of waiting in the collective, sleeps 50 µs a step); never spins when
 * devices outnumber cores. Returns MT_OK while waiting may go on,
 * MT_EABORTED once another device failed the launch, MT_ETIMEOUT once
 * ctx->deadline has passed. It sets no message and fails nothing: whether
 * the wait may end is the caller's to decide (a rendezvous that committed
 * must not leave: peers use its buffers), and a caller that gives up calls
 * mt__wait_fail. `spins` is the caller's counter, 0 at the start of each
 * wait. */
mt_status mt__wait_step(mt_ctx *ctx, int *spins);

/* Gives up a wait that mt__wait_step ended with `st` and returns st with its
 * message: MT_EABORTED names the device that failed (waiting until the
 * failure is published); MT_ETIMEOUT fails the launch with a message naming
 * the devices in `waiting_for` that never arrived and their last collective
 * (waiting_for NULL: the members of g whose last collective number is below
 * the caller's). */
mt_status mt__wait_fail(mt_ctx *ctx, const mt_group *g, mt_status st, const int *waiting_for,
                        int n_waiting);

/* ---- launch helpers (launch.c), for every transport's launch ----------- */

/* The MPI transport's launch (mpi.c, built only with MT_HAVE_MPI): creates
 * this rank's device, runs fn on it and returns the launch's result, the same
 * on every rank. mt_launch calls it for MT_TRANSPORT_MPI, and for AUTO when
 * started by mpirun with more than one rank. */
mt_status mt__mpi_launch(const mt_launch_opts *opts, mt_device_fn fn, void *arg);

/* Writes the Chrome trace of a launch (trace.c): ctxs[n] are the devices this
 * process ran, their events in ctx->events. Called at the end of a launch when
 * ls->trace_path is set. */
mt_status mt__trace_write(mt_launch_state *ls, mt_ctx **ctxs, int n);

/* The timeout of opts (opts->timeout_s, else MT_COMM_TIMEOUT, else 300 s). */
double mt__launch_timeout(const mt_launch_opts *opts);
/* Kernel threads per device: opts->kernel_threads, else the `cpus` the local
 * devices share over their count (at least 1). */
int mt__launch_kernel_threads(const mt_launch_opts *opts, int cpus, int n_local);

/* Sets up a ctx for `device` of the launch (record, pool, scratch, trace);
 * mt__ctx_free releases what it holds (and its groups, via group_fini). */
mt_status mt__ctx_init(mt_ctx *ctx, mt_launch_state *ls, int device);
void      mt__ctx_free(mt_ctx *ctx);

/* After every local device has returned: MT_OK, or the first failure as
 * mt_fail(status, "device N: <message>") on the calling thread. */
mt_status mt__launch_result(mt_launch_state *ls);

/* Runs fn on ctx and reports a failure to the launch (device N failed). */
mt_status mt__device_run(mt_ctx *ctx, mt_device_fn fn, void *arg);

/* After a device's function returned with requests not waited for (the
 * launch has failed): settles the ones a transport started, so none is left
 * half done for its peers (comm.c). */
void mt__async_abandon(mt_ctx *ctx);

/* The threads transport's shared state (threads.c): created per launch. */
mt_status mt__threads_init(mt_launch_state *ls);
void      mt__threads_fini(mt_launch_state *ls);

/* ---- front end helpers (comm.c) ------------------------------------------ */

/* Finds or creates the calling device's group over `axes` (validated). */
mt_status mt__ctx_group(mt_ctx *ctx, mt_axes axes, mt_group **out);

/* "psum", "all_gather", ... for a record's kind field. */
const char *mt__coll_name(int kind);

/* Formats another device's record ("#12 psum over 'data' f32 4096 bytes"),
 * read with acquire/retry so it is safe while that device runs on. */
void mt__record_text(const mt_launch_state *ls, const mt_device_record *rec, char *buf, size_t cap);

/* Shared by comm.c and comm_dims.c: the head of a blocking collective (the
 * async queue flushed, the group resolved), the dtype check, and the flat
 * all_gather / psum_scatter behind the public ones. */
mt_status mt__coll_prologue(mt_ctx *ctx, mt_axes axes, mt_group **g);
mt_status mt__check_dtype(const char *what, mt_dtype dtype);
mt_status mt__do_all_gather(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                            size_t count, mt_dtype dtype);
mt_status mt__do_psum_scatter(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                              size_t count, mt_dtype dtype);

#endif /* MT_COMM_IMPL_H */
