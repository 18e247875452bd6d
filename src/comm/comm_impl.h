/*
 * comm_impl.h — the runtime and collectives behind mt_launch / mt_psum ...
 * (internal).
 *
 * Layers, bottom up:
 *   transport   moves bytes for one group: a small table of functions
 *               (threads.c: shared memory between device threads; mpi.c: one
 *               device per MPI rank). Every function blocks until done, and
 *               returns MT_ETIMEOUT / MT_EABORTED instead of hanging.
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

#include "meshtrain.h"
#include "base/pool.h"

#include <stdatomic.h>

/* A group: the devices sharing all coordinates but those of `axes`. */
typedef struct {
    uint32_t key;        /* axes in order, 4 bits each (axis+1), for caches */
    int      size;       /* P */
    int      rank;       /* this device's rank in the group */
    int     *members;    /* (P) device ids in rank order; owned by the ctx's cache */
} mt_group;

/* What a device did last, readable by the others (for timeout messages). */
typedef struct {
    _Atomic uint64_t seq;          /* collectives issued, 1-based; 0 = none yet */
    char             text[160];    /* "#12 psum over 'data' f32 4096 bytes" */
    _Atomic int      in_collective;/* 1 while inside one */
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
    int                     failed_device; /* the first one that failed */
    mt_status               failed_status;
    char                    failed_msg[1024];
    mt_device_record       *records;       /* (n_devices) threads; MPI: own only */
    int                     process_rank, process_size;
} mt_launch_state;

/* A trace event (Chrome trace "complete" event). */
typedef struct {
    double   t0, t1;       /* seconds since launch */
    char     name[48];
    uint64_t bytes;        /* collectives; 0 for compute */
    bool     is_comm;
} mt_trace_event;

typedef struct {
    bool       started;
    int        kind;       /* which collective */
    mt_axes    axes;
    void      *buf;
    const void *send;
    void      *recv;
    size_t     count;
    mt_dtype   dtype;
    mt_reduce_op op;
} mt_pending;

struct mt_ctx {
    int               device;
    mt_launch_state  *launch;
    void             *transport;       /* the transport's per-device state */
    uint64_t          seq;             /* collectives issued */
    /* group cache: one entry per axes key seen */
    mt_group          groups[16];
    int               n_groups;
    /* trace */
    mt_trace_event   *events;
    int               n_events, cap_events;
    int               open_region;     /* index of an open mt_trace_begin, -1 none */
    double            t_start;
    /* asynchronous requests, run in start order at the first wait */
    mt_pending        pending[MT_MAX_PENDING];
    int               n_pending, next_request;
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
};

extern const mt_transport_ops mt__threads_transport;
#ifdef MT_HAVE_MPI
extern const mt_transport_ops mt__mpi_transport;
#endif

/* Reduces n elements of src into dst (dst = dst op src); bf16 through f32. */
void mt__reduce_into(void *dst, const void *src, size_t n, mt_dtype dtype, mt_reduce_op op);

/* Marks the launch failed (first caller wins) and returns `status`. Every
 * device's waits then return MT_EABORTED. */
mt_status mt__launch_fail(mt_launch_state *ls, int device, mt_status status, const char *msg);

/* For transports' wait loops: MT_OK while waiting may go on; MT_EABORTED if
 * another device failed; MT_ETIMEOUT (with a message naming the devices in
 * `waiting_for` that never arrived and their last collective) when deadline
 * (from mt_time_now) has passed. Spins briefly, then yields; never spins
 * when devices outnumber cores. `spins` is the caller's counter. */
mt_status mt__wait_step(mt_ctx *ctx, const mt_group *g, double deadline, int *spins,
                        const int *waiting_for, int n_waiting);

#endif /* MT_COMM_IMPL_H */
