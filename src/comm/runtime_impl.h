/*
 * runtime_impl.h — the runtime behind mt_launch: the launch's shared state,
 * device contexts and records, failing the launch, and waiting (internal).
 *
 * The comm layer, bottom up:
 *   runtime     (this header; launch.c, ctx.c, wait.c, record.c) the launch's
 *               shared state, one context per device, every device's record
 *               of its last collective, the first-failure-stops-everyone rule,
 *               and the wait step every transport's wait loop takes.
 *   transport   (transport_impl.h) moves bytes for one group: a small table
 *               of functions (threads*.c: shared memory between device
 *               threads; mpi_*.c: one device per MPI rank), and launches the
 *               devices; each table sits in its launch file, on top of its
 *               transport.
 *   front end   (coll_impl.h; comm.c, coll_run.c, comm_dims.c, async.c,
 *               p2p.c, record.c, check.c, group.c) checks arguments, resolves
 *               the group, numbers and records every collective, send and
 *               receive (sequence, op, axes, bytes), runs the debug match
 *               check, records trace spans, builds the dimensioned and
 *               asynchronous forms on the flat ones.
 *   registry    (registry.c) mt_launch and the transports built in: the top.
 */
#ifndef MT_RUNTIME_IMPL_H
#define MT_RUNTIME_IMPL_H

#include "meshtrain/comm.h"
#include "base/pool.h"
#include "profile/profile_impl.h"
#include "tensor/tensor_impl.h"

#include <stdatomic.h>

/* Collectives, as the front end numbers and names them. A record's kind is
 * one of these, plus 16·op for an all-reduce, plus MT_COLL_MEAN for a pmean.
 * MT_COLL_SEND and MT_COLL_RECV are the point-to-point operations (p2p.c):
 * numbered and recorded with the collectives, but not collective (only two
 * devices take part), so nothing that matches collectives across a group
 * counts them (mt__coll_is_p2p). */
typedef enum {
    MT_COLL_ALL_REDUCE = 0, MT_COLL_ALL_GATHER, MT_COLL_REDUCE_SCATTER, MT_COLL_ALL_TO_ALL,
    MT_COLL_PERMUTE, MT_COLL_BROADCAST, MT_COLL_BARRIER, MT_COLL_SEND, MT_COLL_RECV, MT_COLL_COUNT
} mt_coll_kind;
#define MT_COLL_MEAN 64

/* A group of devices (transport_impl.h) and the transport table. */
typedef struct mt_group mt_group;
typedef struct mt_transport_ops mt_transport_ops;

/* What a device did last, readable by the others (for timeout messages).
 * `text` is for the owner (mt_ctx_last_collective); other devices read the
 * atomic fields, which the owner writes before publishing `seq` (release),
 * and format them with mt__record_text. */
typedef struct {
    _Atomic uint64_t seq;          /* operations issued (collectives, sends, receives),
                                      1-based; 0 = none yet */
    _Atomic uint64_t n_coll;       /* of which collectives: what a group's members
                                      compare to tell who has not arrived */
    char             text[160];    /* "#12 psum over 'data' f32 4096 bytes" */
    _Atomic int      in_collective;/* 1 while inside one (or inside a send or receive) */
    _Atomic int      kind;         /* mt_coll_kind (all-reduce: + 16 * op) */
    _Atomic int      dtype;
    _Atomic uint32_t axes_key;
    _Atomic uint64_t bytes;
    _Atomic int      peer, tag;    /* send / receive: the other device's id, the tag */
} mt_device_record;

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
    mt_output              *trace_out;     /* opts' claim of trace_path, or NULL */
    double                  trace_model_flops;   /* opts' */
    mt_trace_run           *trace_run;     /* opts' (NULL: the timelines end with the launch) */
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
    uint32_t                colocate;      /* opts' colocated axes, a bit per mesh axis */
    int                     kernel_threads;/* per device: mt_set_num_threads during the launch, ctx pools */
    /* Sleeping waits (devices outnumber cores): an event count. Whatever may
     * end a wait (an arrival, a flag, a message, the abort) bumps wake_seq
     * after its store and wakes the `sleepers` (mt__wait_wake). */
    _Atomic uint32_t        wake_seq;
    atomic_int              sleepers;
} mt_launch_state;

/* An asynchronous request, queued on its device until waited for. */
typedef struct {
    int        id;         /* the mt_request id */
    bool       started;
    int        kind;       /* which collective (mt_coll_kind) */
    mt_axes    axes;
    const void *send;      /* an all-reduce's in place: send == recv */
    void      *recv;
    size_t     count;
    mt_dtype   dtype;
    mt_reduce_op op;
    int        dest, src; /* ppermute: group ranks sent to and received from (-1: none) */
    uint64_t   extra;     /* ppermute: the hash of its pairs (the debug check's) */
    mt_group  *g;         /* resolved at start */
    bool       eager;     /* started in the transport (async_start): finish with async_wait */
    uint64_t   tag;       /* the transport's number for it */
    int        trace_ev;  /* eager, tracing: its span's index in ctx->trace, ended at
                             completion; -1 none */
} mt_pending;

struct mt_ctx {
    int               device;
    mt_launch_state  *launch;
    mt_device_record *record;          /* this device's (threads: &launch->records[device]) */
    void             *transport;       /* the transport's per-device state */
    uint64_t          seq;             /* operations issued (collectives, sends, receives) */
    uint64_t          n_coll;          /* of which collectives */
    double            deadline;        /* of the running collective, on mt_time_now()'s clock */
    int              *wait_list;       /* (2 * n_devices) scratch for transports' wait loops */
    const void      **ptrs;            /* (n_devices) scratch for transports (peer buffers) */
    void            **dst_ptrs;        /* (n_devices) the same, for buffers written */
    /* group cache: one entry per axes key seen (a 4-axis mesh alone has 64
     * ordered axis sets), each allocated on its own so the pointers the
     * front end holds stay valid while the cache grows */
    mt_group        **groups;
    int               n_groups, cap_groups;
    /* trace: this device's timeline (events NULL when not tracing) */
    mt_trace_list     trace;
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
    /* mt__wait_step's sleeping: launch->wake_seq as read at spin count
     * doze_at, before the wait loop's last look at its condition */
    uint32_t          doze_seq;
    int               doze_at;         /* -1: none */
};

/* ---- setting up a launch (launch.c), for every transport's launch ------- */

/* Fills *ls for a launch of `mesh` on the transport `ops`, run by process
 * `process_rank` of `process_size` holding `n_local` of the mesh's devices:
 * opts' settings (timeout, check, trace), no failure yet, zeroed records for
 * every device, t_start = now, and the CPUs, spinning and kernel threads of
 * n_local devices sharing this process's CPUs (a transport that knows better,
 * as MPI does for ranks sharing a node, overwrites those). ls->transport is
 * left NULL for the transport to set. MT_EINVAL for a bad timeout
 * (mt__launch_timeout), MT_ENOMEM (with a message) when the records cannot be
 * allocated; mt__launch_state_free releases them (also after a failure). */
mt_status mt__launch_state_init(mt_launch_state *ls, const mt_launch_opts *opts,
                                const mt_mesh *mesh, const mt_transport_ops *ops, int n_local,
                                int process_rank, int process_size);
void      mt__launch_state_free(mt_launch_state *ls);

/* The timeout of opts into *out: opts->timeout_s when > 0, else
 * MT_COMM_TIMEOUT when set, else 300 s. MT_EINVAL with a message naming the
 * value when opts->timeout_s is negative, NaN or infinite, or MT_COMM_TIMEOUT
 * is set to anything but a finite number of seconds > 0 (0, -1, "abc", "5x",
 * "", "inf", "nan"): a mistyped timeout is an error, never the default.
 * mt_launch checks it before any transport starts; mt__launch_state_init
 * fails with it too. */
mt_status mt__launch_timeout(const mt_launch_opts *opts, double *out);
/* Kernel threads per device: opts->kernel_threads, else the `cpus` the local
 * devices share over their count (at least 1). */
int mt__launch_kernel_threads(const mt_launch_opts *opts, int cpus, int n_local);

/* The signal mt_launch_signal was last told of, and forgets it (one note a
 * signal); 0: none since the last call. */
int mt__launch_signal_take(void);

/* Runs fn on ctx and reports a failure to the launch (device N failed). */
mt_status mt__device_run(mt_ctx *ctx, mt_device_fn fn, void *arg);

/* After every local device has returned: MT_OK (leaving the message alone),
 * or the first failure as mt_fail(status, "device N: <message>") on the
 * calling thread. It may be called again to raise the failure again. */
mt_status mt__launch_result(mt_launch_state *ls);

/* Writes the Chrome trace of a launch (trace.c): ctxs[n] are the devices this
 * process ran. Called at the end of a launch when ls->trace_path is set;
 * under MPI every rank must call it (it gathers the ranks' events). */
mt_status mt__trace_write(mt_launch_state *ls, mt_ctx **ctxs, int n);
/* With a trace run (trace_run.c): the device's timeline moves into the ctx
 * at its set-up, times counted from the run's first launch (false: out of
 * memory), and back into the run when the ctx is freed. */
bool mt__trace_run_take(mt_launch_state *ls, mt_ctx *ctx);
void mt__trace_run_give_back(mt_launch_state *ls, mt_ctx *ctx);
/* The steps a run keeps (0: all; NULL run: 0). */
int  mt__trace_run_keep(const mt_trace_run *r);

/* ---- device contexts (ctx.c) -------------------------------------------- */

/* Sets up a ctx for `device` of the launch (record, pool, scratch, trace);
 * mt__ctx_free releases what it holds (and its groups, via group_fini). */
mt_status mt__ctx_init(mt_ctx *ctx, mt_launch_state *ls, int device);
void      mt__ctx_free(mt_ctx *ctx);

/* ---- failure and waiting (wait.c) --------------------------------------- */

/* Marks the launch failed (first caller wins) and returns `status`. Every
 * device's waits then return MT_EABORTED. */
mt_status mt__launch_fail(mt_launch_state *ls, int device, mt_status status, const char *msg);

/* One step of a transport's wait loop: spins briefly, then yields (and after
 * ~10 ms of waiting in the collective, sleeps 50 µs a step); never spins when
 * devices outnumber cores, and after a few yields sleeps until the launch's
 * next event (mt__wait_wake), the deadline or 0.5 s, whichever comes first
 * (Linux; elsewhere 50 µs naps). Returns MT_OK while waiting may go on,
 * MT_EABORTED once another device failed the launch, MT_ETIMEOUT once
 * ctx->deadline has passed. It sets no message and fails nothing: whether
 * the wait may end is the caller's to decide (a rendezvous that committed
 * must not leave: peers use its buffers), and a caller that gives up calls
 * mt__wait_fail. `spins` is the caller's counter, 0 at the start of each
 * wait. */
mt_status mt__wait_step(mt_ctx *ctx, int *spins);

/* After a store that may end another device's wait (an arrival, a flag, a
 * message queued, the abort): wakes the devices sleeping in mt__wait_step.
 * Costs an atomic add while nobody sleeps. */
void mt__wait_wake(mt_launch_state *ls);

/* Gives up a wait that mt__wait_step ended with `st` and returns st with its
 * message: MT_EABORTED names the device that failed (waiting until the
 * failure is published); MT_ETIMEOUT fails the launch with a message naming
 * the devices in `waiting_for` that never arrived and their last collective
 * (waiting_for NULL: the members of g whose last collective number is below
 * the caller's). */
mt_status mt__wait_fail(mt_ctx *ctx, const mt_group *g, mt_status st, const int *waiting_for,
                        int n_waiting);

/* ---- records (record.c) ------------------------------------------------- */

/* "psum", "all_gather", ... for a record's kind field. (Inline: every
 * collective names itself, in its record and in its argument checks.) */
static inline const char *mt__coll_name(int kind) {
    if ((kind & 15) == MT_COLL_ALL_REDUCE) {
        if (kind & MT_COLL_MEAN) return "pmean";
        int op = (kind >> 4) & 3;
        return op == MT_REDUCE_MAX ? "pmax" : op == MT_REDUCE_MIN ? "pmin" : "psum";
    }
    switch (kind & 15) {
    case MT_COLL_ALL_GATHER: return "all_gather";
    case MT_COLL_REDUCE_SCATTER: return "psum_scatter";
    case MT_COLL_ALL_TO_ALL: return "all_to_all";
    case MT_COLL_PERMUTE: return "ppermute";
    case MT_COLL_BROADCAST: return "broadcast";
    case MT_COLL_BARRIER: return "barrier";
    case MT_COLL_SEND: return "send";
    case MT_COLL_RECV: return "recv";
    }
    return "collective";
}

/* Whether a record's kind is a send or a receive (not a collective). */
static inline bool mt__coll_is_p2p(int kind) {
    return (kind & 15) == MT_COLL_SEND || (kind & 15) == MT_COLL_RECV;
}

/* Formats another device's record ("#12 psum over 'data' f32 4096 bytes",
 * "#13 send to device 3 over 'pipe' tag 7 f32 4096 bytes"), read with
 * acquire/retry so it is safe while that device runs on. */
void mt__record_text(const mt_launch_state *ls, const mt_device_record *rec, char *buf, size_t cap);

/* ---- the asynchronous queue (async.c) ----------------------------------- */

/* After a device's function returned with requests not waited for (the
 * launch has failed): settles the ones a transport started, so none is left
 * half done for its peers. */
void mt__async_abandon(mt_ctx *ctx);

#endif /* MT_RUNTIME_IMPL_H */
