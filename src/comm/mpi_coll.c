/*
 * mpi_coll.c — the MPI transport's collectives: one device per rank, every
 * collective posted non-blocking on the group's communicator (mpi_comms.c)
 * and waited for with the timeout (mpi_ctl.c). The launch and the table are
 * in mpi_launch.c; mpi_impl.h says which file does what.
 *
 * Counts. MPI 3 counts are ints. A block of more than INT_MAX bytes
 * (all-gather, all-to-all, broadcast, permute) goes as one element of a
 * derived datatype of exactly that many bytes; the reductions, whose
 * predefined MPI_Ops take only predefined datatypes, refuse more than
 * INT_MAX elements.
 *
 * bf16 has no MPI datatype: its reductions run in f32 in a scratch buffer
 * and round once, as the threads transport does.
 */
#ifdef MT_HAVE_MPI

#include "comm/mpi_impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Helpers                                                                   */
/* ======================================================================== */

/* m's scratch as n floats, grown as needed. */
static mt_status scratch_f32(mt_mpi *m, size_t n, float **out) {
    size_t bytes = n * sizeof(float);
    if (bytes > m->scratch_bytes) {
        void *p = realloc(m->scratch, bytes);
        if (!p) return mt_fail(MT_ENOMEM, "cannot allocate %zu bytes to reduce bf16 in f32", bytes);
        m->scratch = p;
        m->scratch_bytes = bytes;
    }
    *out = m->scratch;
    return MT_OK;
}

/* MPI_MAX / MPI_MIN leave a NaN to chance (it survives only where it is
 * already the accumulator); pmax and pmin propagate it, as jax.lax does and
 * as the threads transport does, with the same reduction. inout = inout op in. */
static void fmax_keep_nan(void *in, void *inout, int *len, MPI_Datatype *dt) {
    mt__reduce_into(inout, in, (size_t)*len, MT_F32, MT_REDUCE_MAX);
}
static void fmin_keep_nan(void *in, void *inout, int *len, MPI_Datatype *dt) {
    mt__reduce_into(inout, in, (size_t)*len, MT_F32, MT_REDUCE_MIN);
}

/* The MPI reduction for op on elements of `dtype` (bf16 arrives as f32). */
static MPI_Op mpi_op(const mt_mpi *m, mt_reduce_op op, mt_dtype dtype) {
    if (op == MT_REDUCE_SUM) return MPI_SUM;
    if (dtype == MT_I32) return op == MT_REDUCE_MAX ? MPI_MAX : MPI_MIN;
    return op == MT_REDUCE_MAX ? m->fmax : m->fmin;
}

void mt__mpi_reductions_create(mt_mpi *m) {
    m->fmax = m->fmin = MPI_OP_NULL;
    MPI_Op_create(fmax_keep_nan, 1, &m->fmax);
    MPI_Op_create(fmin_keep_nan, 1, &m->fmin);
}

void mt__mpi_reductions_free(mt_mpi *m) {
    if (m->fmax != MPI_OP_NULL) MPI_Op_free(&m->fmax);
    if (m->fmin != MPI_OP_NULL) MPI_Op_free(&m->fmin);
}

/* The reductions pass an element count to MPI as an int (MPI 3 has no large
 * counts, and a predefined MPI_Op takes only predefined datatypes, so the
 * derived type below cannot carry them). */
static mt_status check_count(size_t n, mt_dtype dtype, const char *what, const char *per) {
    if (n > (size_t)INT_MAX)
        return mt_fail(MT_EUNSUPPORTED, "%s of %zu %s elements%s is more than one MPI call "
                       "takes (%d); split it into smaller collectives", what, n, mt_dtype_name(dtype),
                       per, INT_MAX);
    return MT_OK;
}

/* ======================================================================== */
/* Collectives                                                               */
/* ======================================================================== */

/* Common start of every collective: nothing posted once the launch is
 * stopping; the group's communicator. */
static mt_status begin(mt_ctx *ctx, const mt_group *g, mt_mpi **m, MPI_Comm *comm) {
    *m = ctx->transport;
    if (atomic_load(&(*m)->ls->abort))
        return mt_fail(MT_EABORTED, "device %d failed; this collective was not started",
                       (*m)->ls->failed_device);
    return mt__mpi_group_comm(*m, g, comm);
}

/* A byte-moving collective's start: the group's communicator, and the MPI
 * type that describes `bytes` (MPI_BYTE, or 1 GiB chunks past INT_MAX). */
typedef struct { MPI_Datatype type; int n; bool made; } bytes_type;

static mt_status begin_bytes(mt_ctx *ctx, const mt_group *g, size_t bytes, mt_mpi **m,
                             MPI_Comm *comm, bytes_type *bt) {
    bt->n = 0;
    bt->made = false;
    mt_status s = begin(ctx, g, m, comm);
    return s == MT_OK ? mt__mpi_block_type(bytes, &bt->type, &bt->n, &bt->made) : s;
}

mt_status mt__mpi_all_reduce(mt_ctx *ctx, const mt_group *g, void *buf, size_t count,
                                mt_dtype dtype, mt_reduce_op op) {
    if (count == 0) return MT_OK;
    mt_mpi *m;
    MPI_Comm comm;
    mt_status s = begin(ctx, g, &m, &comm);
    if (s == MT_OK) s = check_count(count, dtype, "all-reduce", "");
    if (s != MT_OK) return s;
    float *f = NULL;
    void *data = buf;
    if (dtype == MT_BF16) {
        if ((s = scratch_f32(m, count, &f)) != MT_OK) return s;
        mt__bf16_to_f32(f, buf, count);
        data = f;
    }
    const mt_dtype dt = dtype == MT_I32 ? MT_I32 : MT_F32;   /* what data holds */
    if (count * mt_dtype_size(dt) <= MT_MPI_SMALL_BYTES) {
        s = mt__mpi_small_all_reduce(m, g, comm, data, count, dt, op,
                                     mt__mpi_current_text(m, "all-reduce"));
        if (s == MT_OK && f) mt__f32_to_bf16(buf, f, count);
        return s;
    }
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, data, (int)count, dtype == MT_I32 ? MPI_INT32_T : MPI_FLOAT,
                            mpi_op(m, op, dtype), comm, &req);
    if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Iallreduce");
    if ((s = mt__mpi_wait(m, g, 1, &req, mt__mpi_current_text(m, "all-reduce"))) != MT_OK) return s;
    if (f) mt__f32_to_bf16(buf, f, count);
    return MT_OK;
}

/* All-gather (recv (P, bytes) from send), all-to-all (likewise, block j of
 * send to rank j) and broadcast (recv from rank `root`'s): one posted
 * collective of `bytes`-long blocks, waited for. */
static mt_status move_blocks(mt_ctx *ctx, const mt_group *g, int kind, const void *send,
                             void *recv, size_t bytes, int root) {
    if (bytes == 0) return MT_OK;
    mt_mpi *m;
    MPI_Comm comm;
    bytes_type bt;
    mt_status s = begin_bytes(ctx, g, bytes, &m, &comm, &bt);
    if (s != MT_OK) return s;
    MPI_Request req;
    int rc;
    const char *call, *what;
    if (kind == MT_COLL_ALL_GATHER) {
        const void *src = send == (char *)recv + (size_t)g->rank * bytes ? MPI_IN_PLACE : send;
        rc = MPI_Iallgather(src, bt.n, bt.type, recv, bt.n, bt.type, comm, &req);
        call = "MPI_Iallgather", what = "all-gather";
    } else if (kind == MT_COLL_ALL_TO_ALL) {
        rc = MPI_Ialltoall(send, bt.n, bt.type, recv, bt.n, bt.type, comm, &req);
        call = "MPI_Ialltoall", what = "all-to-all";
    } else {
        rc = MPI_Ibcast(recv, bt.n, bt.type, root, comm, &req);
        call = "MPI_Ibcast", what = "broadcast";
    }
    if (bt.made) MPI_Type_free(&bt.type);
    if (rc != MPI_SUCCESS) return mt__mpi_error(rc, call);
    return mt__mpi_wait(m, g, 1, &req, mt__mpi_current_text(m, what));
}

mt_status mt__mpi_all_gather(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                                size_t bytes) {
    return move_blocks(ctx, g, MT_COLL_ALL_GATHER, send, recv, bytes, 0);
}

mt_status mt__mpi_all_to_all(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                                size_t bytes) {
    return move_blocks(ctx, g, MT_COLL_ALL_TO_ALL, send, recv, bytes, 0);
}

mt_status mt__mpi_broadcast(mt_ctx *ctx, const mt_group *g, void *buf, size_t bytes, int root) {
    return move_blocks(ctx, g, MT_COLL_BROADCAST, buf, buf, bytes, root);
}

mt_status mt__mpi_reduce_scatter(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                                    size_t count, mt_dtype dtype, mt_reduce_op op) {
    const size_t P = (size_t)g->size;
    if (count == 0) return MT_OK;
    mt_mpi *m;
    MPI_Comm comm;
    mt_status s = begin(ctx, g, &m, &comm);
    /* count·P: the send buffer's count, which MPI computes in int too */
    if (s == MT_OK) s = check_count(count * P, dtype, "reduce-scatter", " (all blocks)");
    if (s != MT_OK) return s;
    MPI_Request req;
    int rc;
    if (dtype == MT_BF16) {
        float *f = NULL;
        if ((s = scratch_f32(m, (P + 1) * count, &f)) != MT_OK) return s;
        mt__bf16_to_f32(f, send, P * count);
        rc = MPI_Ireduce_scatter_block(f, f + P * count, (int)count, MPI_FLOAT, mpi_op(m, op, dtype), comm, &req);
        if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Ireduce_scatter_block");
        if ((s = mt__mpi_wait(m, g, 1, &req, mt__mpi_current_text(m, "reduce-scatter"))) != MT_OK) return s;
        mt__f32_to_bf16(recv, f + P * count, count);
        return MT_OK;
    }
    rc = MPI_Ireduce_scatter_block(send, recv, (int)count, dtype == MT_I32 ? MPI_INT32_T : MPI_FLOAT,
                                   mpi_op(m, op, dtype), comm, &req);
    if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Ireduce_scatter_block");
    return mt__mpi_wait(m, g, 1, &req, mt__mpi_current_text(m, "reduce-scatter"));
}

mt_status mt__mpi_permute(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                             size_t bytes, int dest, int src) {
    if (src < 0 && bytes) memset(recv, 0, bytes);
    if (bytes == 0 || (src < 0 && dest < 0)) return MT_OK;
    mt_mpi *m;
    MPI_Comm comm;
    bytes_type bt;
    mt_status s = begin_bytes(ctx, g, bytes, &m, &comm, &bt);
    if (s != MT_OK) return s;
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int rc = MPI_SUCCESS;
    const char *failed = NULL;
    if (src >= 0 && (rc = MPI_Irecv(recv, bt.n, bt.type, src, TAG_PERMUTE, comm, &req[0])) != MPI_SUCCESS)
        failed = "MPI_Irecv";
    else if (dest >= 0 && (rc = MPI_Isend(send, bt.n, bt.type, dest, TAG_PERMUTE, comm, &req[1])) != MPI_SUCCESS)
        failed = "MPI_Isend";
    if (bt.made) MPI_Type_free(&bt.type);
    if (failed) {
        if (req[0] != MPI_REQUEST_NULL) mt__mpi_set_dangling(m);
        return mt__mpi_error(rc, failed);
    }
    return mt__mpi_wait(m, g, 2, req, mt__mpi_current_text(m, "permute"));
}

mt_status mt__mpi_barrier(mt_ctx *ctx, const mt_group *g) {
    mt_mpi *m;
    MPI_Comm comm;
    mt_status s = begin(ctx, g, &m, &comm);
    if (s != MT_OK) return s;
    MPI_Request req;
    int rc = MPI_Ibarrier(comm, &req);
    if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Ibarrier");
    return mt__mpi_wait(m, g, 1, &req, mt__mpi_current_text(m, "barrier"));
}

#endif /* MT_HAVE_MPI */
