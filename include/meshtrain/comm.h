/*
 * meshtrain/comm.h — running on a mesh: SPMD launch on device threads or MPI
 * ranks, collectives by axis name (with jax.lax semantics), host arrays put
 * on and gathered from the mesh, and the trace of what every device did.
 */
#ifndef MESHTRAIN_COMM_H
#define MESHTRAIN_COMM_H

#include "meshtrain/files.h"
#include "meshtrain/sharding.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One device's view during a launch (opaque; valid inside the device function). */
typedef struct mt_ctx mt_ctx;

typedef mt_status (*mt_device_fn)(mt_ctx *ctx, void *arg);

typedef enum {
    MT_TRANSPORT_AUTO = 0,   /* mt_transport_resolve: mpi under mpirun with > 1 rank */
    MT_TRANSPORT_THREADS,    /* every device a thread of this process */
    MT_TRANSPORT_MPI         /* one device per MPI rank */
} mt_transport_kind;

/* The timelines of several launches (a training run's steps), kept between
 * them: see mt_launch_opts.trace_run. */
typedef struct mt_trace_run mt_trace_run;

typedef struct {
    const char       *mesh;           /* mesh spec, e.g. "data=4" */
    int               devices;        /* threads: device count; mpi: 0 = the world size */
    mt_transport_kind transport;
    double            timeout_s;      /* how long a device waits for its group to arrive at
                                         a collective (or for a message in mt_recv), in
                                         seconds; 0 = MT_COMM_TIMEOUT env (seconds > 0)
                                         or, unset, 300 s. Once all have arrived the data
                                         movement completes (it is bounded), so no buffer
                                         is left in use */
    bool              check;          /* debug: verify every collective matches on all
                                         devices (not sends and receives: they pair up
                                         between two devices, nothing to match) */
    const char       *trace;          /* write a Chrome trace JSON here at the end (NULL: none) */
    int               kernel_threads; /* per device; 0 = cores / devices (at least 1) */
    mt_trace_run     *trace_run;      /* non-NULL: the devices record into this run's
                                         timelines, which go on across launches (times from
                                         the first launch's start); a launch writes them all
                                         to `trace` when that is set */
    double            trace_model_flops; /* the model's FLOPs per step, all devices together
                                         (0: unknown): the trace records it for `meshtrain
                                         report`'s MFU (a "model" metadata event) */
    mt_output        *trace_out;      /* the caller's claim of `trace` (meshtrain/files.h),
                                         written through; NULL: the launch claims `trace`
                                         itself when it writes it. Either way the trace is
                                         written to a temporary file and renamed */
    const char       *colocate;       /* threads, more devices than CPUs: mesh axes (e.g.
                                         "pipe") whose devices should share a CPU. The
                                         devices are then pinned in equal blocks, one
                                         block a CPU, in the mesh's order with these
                                         axes innermost (NULL: the mesh's order), when
                                         the CPUs divide them; a pipeline's stages take
                                         turns, so a CPU holding whole pipelines is not
                                         idle in their bubbles. MT_PIN=0: no pinning */
} mt_launch_opts;

/* Runs fn(ctx, arg) on every device of the mesh, SPMD, and returns when all
 * have returned. If any device fails (returns non-zero) or a collective (or
 * receive) times out, every other device's pending and later collectives,
 * sends and receives return MT_EABORTED, and mt_launch returns the first
 * failure, its message prefixed with the device ("device 2: ..."). A
 * timeout's message names the devices that never arrived and the last
 * collective each one issued.
 * MT_EINVAL, before any device runs, when opts.timeout_s is negative, NaN or
 * infinite, or (opts.timeout_s 0) MT_COMM_TIMEOUT is set to anything but a
 * number of seconds > 0 ("0", "-1", "abc", "5x", "", "inf"): the message
 * names the variable and the value.
 * Under MPI every rank calls mt_launch and runs its own device; the result is
 * the same on every rank. MPI cannot cancel a collective already posted, so
 * when a failure leaves one unfinished on some rank, the job ends with
 * MPI_Abort (exit 1) instead of returning; no rank is left waiting. A rank
 * whose collective times out prints its message to stderr when the timeout
 * fires ("meshtrain: device N: collective ... timed out ..."), and calls
 * MPI_Abort within a second of that, even when a rank is stopped or stuck
 * outside MPI; otherwise rank 0 prints the agreed message. When mt_launch
 * initialises MPI itself (the program did not), it also sets SIGPIPE, if at
 * its default, to be ignored: a rank writing to a dead peer's connection
 * then sees the peer lost instead of dying of the signal. Device threads are
 * pinned to their own cores when they fit (MT_PIN=0 leaves placement to the
 * OS). */
mt_status mt_launch(const mt_launch_opts *opts, mt_device_fn fn, void *arg);

/* Tells the running launch that the process got signal `signo` and may be
 * killed soon; async-signal-safe, for a signal handler to call. Under
 * mpirun a SIGTERM is how Open MPI ends a job one of whose ranks died
 * (SIGKILL follows within a second or two), which can come before the
 * device's own timeout names the lost rank. So a device of the mpi
 * transport that is waiting (in a collective, at a launch's start or end)
 * when the signal arrives, or the next time it waits, prints at once (once
 * a call) what it waits for: "meshtrain: device 0: signal 15 after 2.01 s waiting in
 * collective #12 psum ...: the last collective each member completed with
 * device 0: device 1's #11" (what its timeout would say, less the members'
 * own answers, which there is no time to ask for); at a launch's start,
 * rank 0 names the ranks that never arrived. Nothing else changes: the
 * launch goes on, and the caller's handler decides what the signal means.
 * The threads transport ignores it (its devices share the process). */
void mt_launch_signal(int signo);

/* The transport a launch with `kind` runs on: AUTO becomes MT_TRANSPORT_MPI
 * when this process was started by an MPI launcher with more than one rank
 * (mt_launcher_world) and meshtrain was built with Open MPI, else
 * MT_TRANSPORT_THREADS; the others stay as they are. mt_launch uses this rule,
 * and so should a program that must know beforehand (e.g. to print on one
 * rank only). */
mt_transport_kind mt_transport_resolve(mt_transport_kind kind);

/* This process's rank and the number of ranks, as an MPI launcher announced
 * them in the environment (Open MPI's OMPI_COMM_WORLD_*, PMIx, MPICH/Hydra's
 * PMI_*); 0 and 1 when not started by one. Readable before MPI is initialised
 * and outside any launch. */
void mt_launcher_world(int *rank, int *size);

/* pmap: mt_launch on a 1-axis mesh named `axis` (NULL: "i") of `devices`
 * devices (0 under MPI: the world size). fn resolves the axis with
 * mt_ctx_axes(ctx, axis, &ax) and calls collectives over it. */
mt_status mt_pmap(const char *axis, int devices, mt_device_fn fn, void *arg);

/* The calling device: id (row-major over the mesh), the mesh, and the MPI
 * rank / world size when running under MPI (else 0 / 1). */
int            mt_ctx_device(const mt_ctx *ctx);
const mt_mesh *mt_ctx_mesh(const mt_ctx *ctx);
int            mt_ctx_process_rank(const mt_ctx *ctx);
/* A device context outside any launch: device `device` of `mesh`, for
 * what needs only a coordinate (mt_partition, a compile on the shape-only
 * backend: the planner builds one device's program of a 16,384-device mesh
 * without running the others). The accessors above and below answer as in
 * a launch (process rank 0); every collective, send and receive on it fails
 * with MT_ESTATE saying so. `mesh` must outlive the context. MT_EINVAL for a
 * device outside the mesh, MT_ENOMEM. Free with mt_ctx_virtual_free. */
mt_status      mt_ctx_virtual_create(const mt_mesh *mesh, int device, mt_ctx **out);
/* Frees a context of mt_ctx_virtual_create; NULL is a no-op. */
void           mt_ctx_virtual_free(mt_ctx *ctx);
/* JAX's axis_index: this device's rank in its group over `axes`. */
int            mt_axis_index(const mt_ctx *ctx, mt_axes axes);
int            mt_axis_size(const mt_ctx *ctx, mt_axes axes);
/* Resolves axis names on the ctx's mesh (see mt_mesh_axes). */
mt_status      mt_ctx_axes(const mt_ctx *ctx, const char *names, mt_axes *out);

/* --- collectives over the group of the calling device over `axes` ---
 * All devices of a group must call the same collective with the same sizes,
 * in the same order. Buffers are dense; `count` counts elements of `dtype`.
 * bf16 reduces in f32. Send and receive buffers must not overlap unless
 * stated. Results follow jax.lax: */

typedef enum { MT_REDUCE_SUM = 0, MT_REDUCE_MAX = 1, MT_REDUCE_MIN = 2 } mt_reduce_op;

/* psum / pmax: buf (count) = reduction over the group of every device's buf. In place. */
mt_status mt_all_reduce(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype,
                        mt_reduce_op op);
mt_status mt_psum(mt_ctx *ctx, mt_axes axes, float *buf, size_t count);
/* psum divided by the group size (f32). */
mt_status mt_pmean(mt_ctx *ctx, mt_axes axes, float *buf, size_t count);
mt_status mt_pmax(mt_ctx *ctx, mt_axes axes, float *buf, size_t count);

/* all_gather: recv (P, count) = every device's send (count), in group-rank
 * order. "Stacked" and "tiled along dim 0" are the same bytes. */
mt_status mt_all_gather(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                        mt_dtype dtype);
/* psum_scatter: recv (count) = Σ over the group of send[r·count : (r+1)·count],
 * r = this device's group rank; send holds P·count. */
mt_status mt_psum_scatter(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                          mt_dtype dtype);
/* all_to_all: send (P, count) → recv (P, count), recv[j] = device j's send[r]. */
mt_status mt_all_to_all(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                        mt_dtype dtype);
/* ppermute: pairs[k] = {source rank, destination rank} in the group; each
 * rank appears at most once as a source and once as a destination. recv
 * (count) gets the source's send; a device that is no one's destination
 * receives zeros. */
mt_status mt_ppermute(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                      mt_dtype dtype, const int (*pairs)[2], int n_pairs);
/* buf (count) on every device = buf of group rank `root`. In place. */
mt_status mt_broadcast(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype, int root);
mt_status mt_barrier(mt_ctx *ctx, mt_axes axes);

/* --- dimensioned forms over an array of `ndim` dims `shape` (local) ---
 * tiled all_gather concatenates along `dim` (recv dim = P·shape[dim]);
 * stacked inserts a new dim of size P before `dim`. tiled psum_scatter
 * splits `dim` into P blocks (shape[dim] % P must be 0, or MT_ESHAPE naming
 * both); untiled needs shape[dim] == P and drops the dim. all_to_all splits
 * `split_dim` into P blocks and concatenates the received ones on `concat_dim`. */
mt_status mt_all_gather_dim(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, mt_dtype dtype,
                            int ndim, const int64_t *shape, int dim, bool tiled);
mt_status mt_psum_scatter_dim(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                              mt_dtype dtype, int ndim, const int64_t *shape, int dim, bool tiled);
mt_status mt_all_to_all_dim(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, mt_dtype dtype,
                            int ndim, const int64_t *shape, int split_dim, int concat_dim);

/* --- asynchronous forms: start, compute, wait. The buffers belong to the
 * collective until mt_wait returns (a device that returns without waiting
 * leaves them to its peers until the launch ends). At most MT_MAX_PENDING
 * per device. Requests complete in start order; a blocking collective first
 * completes the pending ones. On the threads transport a large request
 * (more than ~1-4 KiB per device) is started at once: when every device of
 * the group has started it, whichever devices are waiting move its data in
 * chunks, so a device computing between start and wait finds it done.
 * Small requests, check mode and MPI run it at the first wait (or blocking
 * collective) that needs it. */
#define MT_MAX_PENDING 16
typedef struct { int id; } mt_request;
mt_status mt_all_reduce_start(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype,
                              mt_reduce_op op, mt_request *req);
/* recv (count) on every device = send of every device reduced, send left
 * as it was: as mt_all_reduce_start, with no copy of the result to make
 * (on threads the reduction writes each device's recv straight away).
 * send == recv is in place; buffers that overlap otherwise are MT_EINVAL. */
mt_status mt_all_reduce_into_start(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                                   size_t count, mt_dtype dtype, mt_reduce_op op,
                                   mt_request *req);
mt_status mt_all_gather_start(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                              size_t count, mt_dtype dtype, mt_request *req);
mt_status mt_psum_scatter_start(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                                size_t count, mt_dtype dtype, mt_request *req);
/* ppermute (as mt_ppermute) started asynchronously: the pairs are read
 * during the call only; send and recv belong to the request until mt_wait.
 * The ring steps of a collective matmul use it, each step's transfer
 * overlapping the step's product. */
mt_status mt_ppermute_start(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                            size_t count, mt_dtype dtype, const int (*pairs)[2], int n_pairs,
                            mt_request *req);
mt_status mt_wait(mt_ctx *ctx, mt_request *req);

/* --- point-to-point messages (a pipeline's activations and gradients) ---
 * A channel is (axes, sender, receiver, tag): the messages of a channel
 * arrive in the order they were sent; channels are independent, so a
 * receiver may take tag 5 before tag 3 even if 3 was sent first. Peers are
 * ranks in the calling device's group over `axes` (as mt_axis_index numbers
 * them); a device may send to itself. Only the two devices take part, so
 * unlike the collectives devices need not issue the same ones: the debug
 * check (opts.check) leaves them out. Each send and receive is numbered and
 * recorded with the collectives (mt_ctx_collectives, the text of timeouts)
 * and is a span "send <axes>" / "recv <axes>" on the device's trace, with
 * the other device, the tag and the bytes in its args. */

/* Largest tag mt_send and mt_recv accept (MPI guarantees tags up to 32767). */
#define MT_TAG_MAX 32767

/* Sends buf (count elements of dtype) to group rank `dst` of the group over
 * `axes`, on channel `tag` (0 .. MT_TAG_MAX). Buffered: the data are copied
 * before it returns, the sender never waits for the receiver, and buf may be
 * reused at once (the copy is the library's until it is received).
 * MT_EINVAL, naming the value, for a dst outside the group, a tag outside
 * 0..MT_TAG_MAX, a NULL buf with count > 0 or an unknown dtype; MT_EABORTED
 * once another device failed. Every message must be received before the
 * launch ends: one left over fails a launch that would otherwise succeed
 * with MT_ESTATE, naming the receiving device, the sender and the tag. */
mt_status mt_send(mt_ctx *ctx, mt_axes axes, const void *buf, size_t count, mt_dtype dtype,
                  int dst, int tag);

/* Receives into buf (count elements of dtype) the next message of channel
 * (axes, group rank src -> this device, tag), blocking until it arrives.
 * It first completes this device's started collectives, as a blocking
 * collective does (the sender may be waiting in one of them). Fails with
 * MT_ESHAPE, naming both sizes, when the message does not hold exactly count
 * elements of dtype (the message is dropped, buf left as it was);
 * MT_ETIMEOUT after the launch's timeout (opts.timeout_s), failing the
 * launch with a message that names the sender, the tag, this receive and
 * the sender's last operation; MT_EABORTED when another device failed;
 * MT_EINVAL for arguments as mt_send. Under MPI a timeout that fires while
 * the message is already being transferred leaves an MPI receive that
 * cannot be cancelled, and ends the job as a collective's timeout does. */
mt_status mt_recv(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype, int src,
                  int tag);

/* --- host arrays on the mesh ---
 * Both directions take any dtype (mt_dtype: f32, bf16, i32) and move the
 * elements' bytes as they are, so a put then a gather gives back every bit:
 * i32 token ids past 2^24 (which a float cannot hold) and bf16 values
 * included. Arrays are dense and row-major; `shape` is the global shape
 * (ndim 0..MT_MAX_DIMS), the local shard's is mt_sharding_local_shape's.
 * Errors (MT_EINVAL, MT_ESHAPE) name the function, the dim and the sizes:
 * an unknown dtype, a dim that does not divide by its axes, an axis that
 * splits two dims, a shape whose element count does not fit in memory
 * sizes, a NULL array when the shard has elements. */

/* local (the device's shard, elements of `dtype`) = its slice of the global
 * host array under the sharding. global (ndim dims, shape) is read on every
 * device (threads: one shared array; MPI: each rank's copy). With partial
 * sums (sh->partial_axes) group rank 0 over those axes gets the slice and
 * the others zeros, so the sum is the value. No collective: devices may
 * call it independently. */
mt_status mt_shard_put_typed(mt_ctx *ctx, const mt_sharding *sh, mt_dtype dtype,
                             const void *global, int ndim, const int64_t *shape, void *local);
/* global (full shape, elements of `dtype`) on every device = all shards put
 * back together, partial sums over sh->partial_axes summed first (a psum in
 * the dtype: i32 exact, wrapping on overflow; bf16 added in f32 and
 * rounded). A collective over the mesh's axes the sharding names: every
 * device of the mesh calls it with the same sharding, dtype and shape. */
mt_status mt_shard_gather_typed(mt_ctx *ctx, const mt_sharding *sh, mt_dtype dtype,
                                const void *local, int ndim, const int64_t *shape, void *global);
/* The f32 forms: mt_shard_put_typed / mt_shard_gather_typed with MT_F32. */
mt_status mt_shard_put(mt_ctx *ctx, const mt_sharding *sh, const float *global, int ndim,
                       const int64_t *shape, float *local);
mt_status mt_shard_gather(mt_ctx *ctx, const mt_sharding *sh, const float *local, int ndim,
                          const int64_t *shape, float *global);

/* --- record of what happened --- */
/* Marks a compute region on the device's trace track (no-op when not tracing). */
void mt_trace_begin(mt_ctx *ctx, const char *name);
void mt_trace_end(mt_ctx *ctx);

/* A run of traced launches whose devices are ids below n_devices; with
 * keep_steps > 0 it holds only the last keep_steps steps (mt_trace_step_begin)
 * of each device. MT_ENOMEM. Free it after the last launch that uses it. */
mt_status mt_trace_run_create(int n_devices, int keep_steps, mt_trace_run **out);
void      mt_trace_run_free(mt_trace_run *run);

/* Whether the device's launch records a trace. */
bool mt_trace_on(const mt_ctx *ctx);
/* Begins the span "step <step>" on the device's track (an open one ends);
 * with a trace run that keeps K steps, drops the oldest when K are held.
 * Call it with no region open and nothing in flight. No-op when not tracing. */
void mt_trace_step_begin(mt_ctx *ctx, int step);
void mt_trace_step_end(mt_ctx *ctx);

/* One op's span (a graph node): mt_trace_op_begin starts it and returns a
 * handle (-1 when not tracing), mt_trace_op_end ends it with what the span
 * shows: the op's name, its phase ('F', 'B', 'W'), its layer (-1: none),
 * its FLOPs and memory bytes, its output tensor's name. The names are
 * copied (cut to fit); nothing is allocated once the timeline has grown to
 * a step's size. Spans nest in the open region by time. */
int  mt_trace_op_begin(mt_ctx *ctx);
void mt_trace_op_end(mt_ctx *ctx, int span, const char *op, char phase, int layer, double flops,
                     double bytes, const char *out);

/* Collectives, sends and receives this device issued so far, and the last
 * one as text ("#12 psum over 'data' f32 4096 bytes", "#13 send to device 3
 * over 'pipe' tag 7 f32 4096 bytes"). */
uint64_t    mt_ctx_collectives(const mt_ctx *ctx);
const char *mt_ctx_last_collective(const mt_ctx *ctx);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_COMM_H */
