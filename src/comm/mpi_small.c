/*
 * mpi_small.c — the MPI transport's all-reduce of a small buffer, by
 * recursive doubling on point-to-point messages.
 *
 * Why. Every collective is posted non-blocking and polled against the
 * timeout (mpi_ctl.c). For a large buffer Open MPI's MPI_Iallreduce (libnbc)
 * is as fast as the blocking call, but for a few bytes its schedule costs
 * more than the data: an 8-byte all-reduce on 2 ranks took 1.8-3.2 us
 * against 0.7-0.9 us for plain MPI_Allreduce (`mpirun -np 2 meshtrain bench
 * collectives --transport mpi --ops all_reduce --max-bytes 8k`, 2026-12-03,
 * 2-core Xeon VM, Open MPI 4.1.4: 0.25-0.37x). A posted MPI_Irecv/MPI_Isend
 * pair costs about what the blocking call does, so below
 * MT_MPI_SMALL_BYTES the all-reduce is log2(P) such exchanges, each waited
 * for with the same timeout and control channel as every collective
 * (mt__mpi_wait).
 *
 * The algorithm (Thakur, Rabenseifner and Gropp 2005, "Optimization of
 * collective communication operations in MPICH", recursive doubling with
 * the non-power-of-two fold): with p2 the largest power of two <= P and
 * rem = P - p2, the first 2·rem ranks pair up (2i, 2i+1); the even one sends
 * its buffer to the odd one and waits for the result. The p2 left then
 * exchange with the partner whose new rank differs in bit k, for each k.
 * Every combination is taken in one order, lower rank's data first (a + b
 * where a is the lower one's), so both partners compute the same bits and
 * every rank ends with the same result whatever the op (max and min keep
 * NaN either way, sums are commutative in IEEE arithmetic, and the fixed
 * order makes it so even for NaN payloads).
 */
#ifdef MT_HAVE_MPI

#include "comm/mpi_impl.h"

#include <string.h>

enum { TAG_SMALL = 33 };

/* One exchange with `peer`: send mine, receive theirs; waited with the
 * timeout. */
static mt_status exchange(mt_mpi *m, const mt_group *g, MPI_Comm comm, int peer, const void *mine,
                          void *theirs, int bytes, const char *what) {
    MPI_Request req[2];
    int rc = MPI_Irecv(theirs, bytes, MPI_BYTE, peer, TAG_SMALL, comm, &req[0]);
    if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Irecv");
    rc = MPI_Isend(mine, bytes, MPI_BYTE, peer, TAG_SMALL, comm, &req[1]);
    if (rc != MPI_SUCCESS) {
        mt__mpi_set_dangling(m);   /* the receive stays posted */
        return mt__mpi_error(rc, "MPI_Isend");
    }
    return mt__mpi_wait(m, g, 2, req, what);
}

/* One message each way, alone: `to` < 0 receives from `from`, else sends. */
static mt_status one_way(mt_mpi *m, const mt_group *g, MPI_Comm comm, int to, int from, void *buf,
                         int bytes, const char *what) {
    MPI_Request req;
    int rc = to >= 0 ? MPI_Isend(buf, bytes, MPI_BYTE, to, TAG_SMALL, comm, &req)
                     : MPI_Irecv(buf, bytes, MPI_BYTE, from, TAG_SMALL, comm, &req);
    if (rc != MPI_SUCCESS) return mt__mpi_error(rc, to >= 0 ? "MPI_Isend" : "MPI_Irecv");
    return mt__mpi_wait(m, g, 1, &req, what);
}

/* buf = lower's op higher's, with `other` the peer's data and `peer_lower`
 * whether the peer has the lower rank. */
static void combine(void *buf, void *other, size_t count, mt_dtype dtype, mt_reduce_op op,
                    bool peer_lower, size_t bytes) {
    if (peer_lower) {
        mt__reduce_into(other, buf, count, dtype, op);
        memcpy(buf, other, bytes);
    } else {
        mt__reduce_into(buf, other, count, dtype, op);
    }
}

static mt_status all_reduce(mt_mpi *m, const mt_group *g, MPI_Comm comm, void *buf, size_t count,
                            mt_dtype dtype, mt_reduce_op op, const char *what) {
    const size_t bytes = count * mt_dtype_size(dtype);
    if (bytes > MT_MPI_SMALL_BYTES)
        return mt_fail(MT_EINTERNAL, "small all-reduce of %zu bytes (at most %d)", bytes,
                       MT_MPI_SMALL_BYTES);
    _Alignas(64) unsigned char other[MT_MPI_SMALL_BYTES];   /* (bytes) the peer's buffer */
    int rank = 0, P = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &P);
    int p2 = 1;
    while (p2 * 2 <= P) p2 *= 2;
    const int rem = P - p2, n = (int)bytes;
    mt_status s = MT_OK;
    /* the fold: an even rank below 2·rem hands its buffer to the next */
    int nr;   /* the rank among the p2, or -1: folded */
    if (rank < 2 * rem) {
        if (rank % 2 == 0) {
            if ((s = one_way(m, g, comm, rank + 1, -1, buf, n, what)) != MT_OK) return s;
            nr = -1;
        } else {
            if ((s = one_way(m, g, comm, -1, rank - 1, other, n, what)) != MT_OK) return s;
            combine(buf, other, count, dtype, op, true, bytes);
            nr = rank / 2;
        }
    } else {
        nr = rank - rem;
    }
    /* recursive doubling among the p2 */
    if (nr >= 0) {
        for (int mask = 1; mask < p2; mask <<= 1) {
            int pn = nr ^ mask, peer = pn < rem ? 2 * pn + 1 : pn + rem;
            if ((s = exchange(m, g, comm, peer, buf, other, n, what)) != MT_OK) return s;
            combine(buf, other, count, dtype, op, pn < nr, bytes);
        }
    }
    /* the unfold: the odd rank gives the result back */
    if (rank < 2 * rem)
        s = rank % 2 == 0 ? one_way(m, g, comm, -1, rank + 1, buf, n, what)
                          : one_way(m, g, comm, rank - 1, -1, buf, n, what);
    return s;
}

mt_status mt__mpi_small_all_reduce(mt_mpi *m, const mt_group *g, MPI_Comm comm, void *buf,
                                   size_t count, mt_dtype dtype, mt_reduce_op op,
                                   const char *what) {
    /* an exchange with one member is no collective completed with all */
    m->in_steps = true;
    mt_status s = all_reduce(m, g, comm, buf, count, dtype, op, what);
    m->in_steps = false;
    if (s == MT_OK) mt__mpi_note_done(m, g);
    return s;
}

#endif /* MT_HAVE_MPI */
