/*
 * transport_impl.h — groups, the transport table and its contract, and the
 * registry of transports (internal).
 *
 * A transport moves bytes for one group of devices and launches the devices
 * it runs (threads*.c: every device a thread of this process, through
 * shared memory; mpi_*.c: one device per MPI rank). The rest of comm
 * reaches a transport only through its table, which sits in the transport's
 * launch file (threads_launch.c, mpi_launch.c): mt_launch finds the table in
 * the registry (registry.c) by mt_transport_kind and calls its launch; the
 * front end calls its collectives through ctx->launch->ops.
 */
#ifndef MT_TRANSPORT_IMPL_H
#define MT_TRANSPORT_IMPL_H

#include "comm/runtime_impl.h"

/* ======================================================================== */
/* Groups                                                                    */
/* ======================================================================== */

/* A group: the devices sharing all coordinates but those of `axes`. */
struct mt_group {
    uint32_t key;        /* axes in order, 4 bits each (axis+1), for caches */
    mt_axes  axes;
    int      size;       /* P */
    int      rank;       /* this device's rank in the group */
    int     *members;    /* (P) device ids in rank order; owned by the ctx's cache */
    void    *transport;  /* the transport's state for this group (set by group_init) */
    uint64_t n_ops;      /* transport calls on this group by this device (transport's use) */
    void    *check_buf;  /* (P, 64 bytes) debug-check exchange; owned by the ctx's cache */
    char     label[64];  /* "'data'" or "'data,tensor'", for messages */
};

/* Finds or creates the calling device's group over `axes` (validated), in
 * the ctx's cache (group.c); a new group is handed to the transport's
 * group_init. */
mt_status mt__ctx_group(mt_ctx *ctx, mt_axes axes, mt_group **out);

/* Frees every group of the ctx's cache, after the transport's group_fini on
 * each (group.c). */
void mt__ctx_groups_free(mt_ctx *ctx);

/* ======================================================================== */
/* The transport table                                                       */
/* ======================================================================== */

/* What every member may rely on, and must do:
 *
 * - The collectives (all_reduce .. barrier, and the async forms) are called
 *   only for groups of two or more devices: the front end handles groups of
 *   one itself (a copy, a zero fill, or nothing). Before the call the front
 *   end has checked the arguments, numbered and recorded the collective in
 *   ctx->record, and set ctx->deadline.
 * - Every member blocks until done, and returns MT_ETIMEOUT / MT_EABORTED
 *   (with a message, see mt__wait_fail) instead of hanging; once peers may
 *   use the caller's buffers, it completes the bounded copying first,
 *   deadline or not. Any other failure returns its status with mt_fail's
 *   message.
 * - Every member of a group issues the same calls in the same order, with
 *   the same sizes (the debug check verifies it before the call).
 * - `bytes` counts bytes; reductions take count + dtype (MT_F32, MT_BF16 or
 *   MT_I32) and op (sum, max, min; max and min propagate NaN); bf16 reduces
 *   in f32. Every member of a group gets the same bits. */
struct mt_transport_ops {
    /* Required. The transport's name, for messages. */
    const char *name;

    /* Required. Runs fn(ctx, arg) on every device of the mesh this process
     * runs, SPMD, and returns the launch's result: MT_OK, or the first
     * failure as "device N: <message>" (under MPI the same on every rank).
     * It owns everything it sets up: the launch state (mt__launch_state_init,
     * with ops = this table), a ctx per device (mt__ctx_init), the run
     * (mt__device_run on each), the result (mt__launch_result) and the trace
     * (mt__trace_write when opts->trace is set). mt_launch calls it with
     * checked opts, once AUTO is resolved (mt_transport_resolve). */
    mt_status (*launch)(const mt_launch_opts *opts, mt_device_fn fn, void *arg);

    /* Required. buf (count elements) = the reduction over the group of every
     * member's buf. count may be 0. */
    mt_status (*all_reduce)(mt_ctx *ctx, const mt_group *g, void *buf, size_t count,
                            mt_dtype dtype, mt_reduce_op op);
    /* Required. recv (P, bytes) = every member's send, in group-rank order.
     * send may be this rank's block of recv (in place). bytes may be 0. */
    mt_status (*all_gather)(mt_ctx *ctx, const mt_group *g, const void *send, void *recv, size_t bytes);
    /* Required. recv (count) = block `rank` of the reduction over the group
     * of every member's send (P, count). count may be 0. */
    mt_status (*reduce_scatter)(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                                size_t count, mt_dtype dtype, mt_reduce_op op);
    /* Required. Sends block j of send (P, bytes) to rank j and stores rank
     * j's block in block j of recv (P, bytes). bytes may be 0. */
    mt_status (*all_to_all)(mt_ctx *ctx, const mt_group *g, const void *send, void *recv, size_t bytes);
    /* Required. Sends send (bytes) to group rank `dest` (-1: nobody) and
     * receives recv (bytes) from group rank `src` (-1: nobody; recv is then
     * zeroed). Every rank is the dest of at most one source. */
    mt_status (*permute)(mt_ctx *ctx, const mt_group *g, const void *send, void *recv, size_t bytes,
                         int dest, int src);
    /* Required. buf (bytes) on every member = buf of group rank `root`. */
    mt_status (*broadcast)(mt_ctx *ctx, const mt_group *g, void *buf, size_t bytes, int root);
    /* Required. Returns once every member has called it. */
    mt_status (*barrier)(mt_ctx *ctx, const mt_group *g);

    /* Optional (NULL: none). Called once per device and group when the
     * device first uses the group, for every group, groups of one included
     * (its key, axes, members, rank, size and label are set); may set
     * g->transport. On failure the group is not created and the collective
     * that asked for it fails. group_fini (optional, NULL: nothing to undo)
     * undoes it when the ctx is freed, on every group group_init set up. */
    mt_status (*group_init)(mt_ctx *ctx, mt_group *g);
    void      (*group_fini)(mt_ctx *ctx, mt_group *g);

    /* Optional asynchronous forms (all three or none; NULL: the front end
     * queues requests and runs the blocking forms at the first mt_wait that
     * needs them, as for mpi_coll.c). Never called in check mode. async_eager
     * says whether the transport starts p itself (the same answer on every
     * device of g for matching requests). async_start publishes p and
     * returns without waiting for peers (beyond, rarely, a free slot),
     * touching no peer buffer; it may set p->tag. async_wait completes p (its
     * data may have been moved by peers meanwhile) and must be called once
     * for every started request, in start order, also when the launch has
     * failed (then it gives up if the op never committed, else completes it:
     * peers may be using the buffers). No device returns from async_wait
     * while a peer can still touch its buffers. */
    bool      (*async_eager)(const mt_ctx *ctx, const mt_group *g, const mt_pending *p);
    mt_status (*async_start)(mt_ctx *ctx, mt_group *g, mt_pending *p);
    mt_status (*async_wait)(mt_ctx *ctx, mt_group *g, mt_pending *p);

    /* Required. Point-to-point messages (mt_send / mt_recv). Unlike the
     * collectives they are called for groups of any size (the peer may be
     * the caller itself), and only the two devices take part; the front end
     * (p2p.c) has checked the arguments (dst / src a rank of g, tag in
     * 0..MT_TAG_MAX), numbered and recorded the operation and set
     * ctx->deadline. A channel is (g's axes key, sender, receiver, tag).
     *
     * send copies `bytes` (may be 0) of buf into a message for group rank
     * dst and returns without waiting for the receiver: buf is the caller's
     * again at once. Messages of one channel are delivered in send order.
     *
     * recv takes the first message of the channel (g's key, src, this
     * device, tag), waiting until there is one: MT_EABORTED (mt__wait_fail's
     * message) once the launch fails, MT_ETIMEOUT at ctx->deadline with the
     * message of mt__p2p_timeout_text, the launch failed with it. *got is
     * the message's size: when it is not `bytes`, the message is dropped,
     * buf is left alone and recv returns MT_ESHAPE without a message (the
     * front end writes it).
     *
     * A message nobody received is the transport's until the launch ends:
     * its launch frees (or drains) every one, and on a launch that had not
     * failed reports the first with mt__p2p_leftover. */
    mt_status (*send)(mt_ctx *ctx, const mt_group *g, int dst, int tag, const void *buf,
                      size_t bytes);
    mt_status (*recv)(mt_ctx *ctx, const mt_group *g, int src, int tag, void *buf, size_t bytes,
                      size_t *got);
};

/* ---- what the transports' sends and receives share (p2p.c) -------------- */

/* The message of a receive on ctx that timed out waiting for group rank src
 * of g (tag `tag`): the receive (the device's record), and `sender`, what
 * the transport knows of the sender ("no message arrived from device 1;
 * device 1's last operation: #4 psum ... (still in it)"), and what to do. */
void mt__p2p_timeout_text(const mt_ctx *ctx, const mt_group *g, int src, int tag,
                          const char *sender, char *buf, size_t cap);

/* Fails the launch (unless it has failed already, or n_left is 0) with
 * MT_ESTATE for device `receiver`, because `n_left` messages sent to it were
 * never received; the first was sent by device `sender` over the axes of
 * `key`, with `tag`, `bytes` long. Returns MT_ESTATE with the message when it
 * failed the launch, else MT_OK. */
mt_status mt__p2p_leftover(mt_launch_state *ls, int receiver, int n_left, int sender,
                           uint32_t key, int tag, size_t bytes);

/* Reduces n elements of src into dst (dst = dst op src); bf16 through f32,
 * rounded to nearest even. max and min propagate NaN (reduce.c). */
void mt__reduce_into(void *dst, const void *src, size_t n, mt_dtype dtype, mt_reduce_op op);

/* ======================================================================== */
/* The registry (registry.c)                                                 */
/* ======================================================================== */

/* The transports built in, each listed once in registry.c (each defined in
 * its launch file). */
extern const mt_transport_ops mt__threads_transport;
#ifdef MT_HAVE_MPI
extern const mt_transport_ops mt__mpi_transport;
#endif

/* The table of the transport `kind` (resolved: not AUTO). A kind this build
 * lacks fails with MT_EUNSUPPORTED saying how to get it; an unknown kind
 * with MT_EINVAL. */
mt_status mt__transport_find(mt_transport_kind kind, const mt_transport_ops **out);

#endif /* MT_TRANSPORT_IMPL_H */
