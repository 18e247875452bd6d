/*
 * mpi_p2p.c — point-to-point messages (mt_send / mt_recv) on the MPI
 * transport.
 *
 * Messages travel on a communicator of their own (m->p2p, a dup of the world
 * made at launch, so ranks are device ids), apart from the groups'
 * communicators, where ppermute's messages use an MPI tag of their own. The
 * MPI tag names the channel: the number of its axes in m->p2p_keys (every
 * ordered list of the mesh's axes, sorted) times 2^15, plus the user's tag.
 *
 * A send copies the data and posts MPI_Isend from the copy, so the caller's
 * buffer is free at once and the sender never waits for the receiver; the
 * request and the copy are kept (m->send_*) until MPI_Testsome, run on every
 * send and receive, finds the send done.
 *
 * A receive probes for its channel (MPI_Improbe: the message it matches is
 * its own, nothing else can take it) while serving the control channel,
 * aborts and the deadline as a collective's wait does; then it checks the
 * size (MT_ESHAPE: the message is received into scratch and dropped) and
 * receives the matched message (MPI_Imrecv). Nothing is posted before the
 * match, so a timeout or an abort there leaves nothing behind (the launch
 * fails, and its agreement returns the failure on every rank). Once matched
 * the transfer is completed, abort or not (the data are on their way); one
 * that does not finish in time cannot be cancelled, and dooms the job as a
 * collective left unfinished does (mpi_launch.c).
 *
 * The end of the launch (mt__mpi_p2p_close, every rank): the ranks exchange
 * how many messages each sent to each; every rank receives and drops what
 * was sent to it and never received, and waits until its own sends are
 * done. So no message is left to be matched in a later launch (MPI reuses
 * the context of a freed communicator), and no copy is freed while MPI may
 * still read it.
 */
#ifdef MT_HAVE_MPI

#include "comm/mpi_impl.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_BITS 15   /* the user's tag: 0 .. MT_TAG_MAX */
_Static_assert(MT_TAG_MAX == (1 << TAG_BITS) - 1, "a user's tag fits in TAG_BITS");

/* ======================================================================== */
/* Channels as MPI tags                                                      */
/* ======================================================================== */

/* Appends every ordered list of distinct axes of an nd-axis mesh that
 * starts with `key` (n axes, `used`) to out from k on; returns the new k. */
static int list_keys(uint32_t key, int n, int nd, uint32_t used, uint32_t *out, int k) {
    out[k++] = key;
    for (int a = 0; a < nd; a++)
        if (!(used & (1u << a)))
            k = list_keys(key | (uint32_t)(a + 1) << (4 * n), n + 1, nd, used | 1u << a, out, k);
    return k;
}

static int cmp_key(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The MPI tag of channel (g's axes, tag). */
static mt_status channel_tag(const mt_mpi *m, const mt_group *g, int tag, int *out) {
    if (!m->p2p_tags_ok)
        return mt_fail(MT_EUNSUPPORTED, "this MPI's tags (MPI_TAG_UB) are too small for "
                       "meshtrain's messages: they need %d", ((m->n_p2p_keys - 1) << TAG_BITS) |
                       MT_TAG_MAX);
    const uint32_t *k = bsearch(&g->key, m->p2p_keys, (size_t)m->n_p2p_keys, sizeof *k, cmp_key);
    if (!k) return mt_fail(MT_EINTERNAL, "no channel number for the axes %s", g->label);
    *out = (int)(k - m->p2p_keys) << TAG_BITS | tag;
    return MT_OK;
}

/* ======================================================================== */
/* The launch's state                                                        */
/* ======================================================================== */

mt_status mt__mpi_p2p_new(mt_mpi *m, const mt_mesh *mesh) {
    const int nd = mt_mesh_ndim(mesh);
    int n = 1, perm = 1;   /* ordered lists: Σ_k nd! / (nd - k)! */
    for (int k = 1; k <= nd; k++) n += perm *= nd - k + 1;
    m->p2p = MPI_COMM_NULL;
    m->p2p_keys = malloc((size_t)n * sizeof *m->p2p_keys);
    m->p2p_sent = calloc((size_t)m->size, sizeof *m->p2p_sent);
    m->p2p_received = calloc((size_t)m->size, sizeof *m->p2p_received);
    m->p2p_expect = calloc((size_t)m->size, sizeof *m->p2p_expect);
    if (!m->p2p_keys || !m->p2p_sent || !m->p2p_received || !m->p2p_expect)
        return mt_fail(MT_ENOMEM, "cannot allocate the message state of rank %d", m->rank);
    m->n_p2p_keys = list_keys(0, 0, nd, 0, m->p2p_keys, 0);
    qsort(m->p2p_keys, (size_t)m->n_p2p_keys, sizeof *m->p2p_keys, cmp_key);
    return MT_OK;
}

void mt__mpi_p2p_free(mt_mpi *m) {
    /* a send still in flight (the job is being stopped) keeps its copy:
     * MPI may still read it */
    for (int i = 0; i < m->n_sends; i++)
        if (m->send_reqs[i] == MPI_REQUEST_NULL) free(m->send_bufs[i]);
    free(m->send_reqs), free(m->send_bufs), free(m->send_done);
    free(m->p2p_keys), free(m->p2p_sent), free(m->p2p_received), free(m->p2p_expect);
    m->send_reqs = NULL, m->send_bufs = NULL, m->send_done = NULL, m->p2p_keys = NULL;
    m->n_sends = m->cap_sends = 0;
}

mt_status mt__mpi_p2p_open(mt_mpi *m) {
    int rc = m->p2p != MPI_COMM_NULL ? MPI_SUCCESS : MPI_Comm_dup(m->world, &m->p2p);
    if (rc != MPI_SUCCESS) {
        m->p2p = MPI_COMM_NULL;
        return mt__mpi_error(rc, "MPI_Comm_dup");
    }
    int *ub = NULL, flag = 0;
    MPI_Comm_get_attr(m->p2p, MPI_TAG_UB, &ub, &flag);
    const long need = (long)(m->n_p2p_keys - 1) << TAG_BITS | MT_TAG_MAX;
    m->p2p_tags_ok = flag && ub && *ub >= need;
    return MT_OK;
}

/* Frees the copies of the sends that are done and drops their requests. */
static mt_status reap(mt_mpi *m) {
    if (m->n_sends == 0) return MT_OK;
    int n_done = 0;
    int rc = MPI_Testsome(m->n_sends, m->send_reqs, &n_done, m->send_done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Testsome");
    if (n_done <= 0) return MT_OK;   /* MPI_UNDEFINED: none active */
    int k = 0;
    for (int i = 0; i < m->n_sends; i++) {
        if (m->send_reqs[i] == MPI_REQUEST_NULL) {
            free(m->send_bufs[i]);
            continue;
        }
        m->send_reqs[k] = m->send_reqs[i];
        m->send_bufs[k++] = m->send_bufs[i];
    }
    m->n_sends = k;
    return MT_OK;
}

/* ======================================================================== */
/* Send and receive                                                          */
/* ======================================================================== */

mt_status mt__mpi_send(mt_ctx *ctx, const mt_group *g, int dst, int tag, const void *buf,
                       size_t bytes) {
    mt_mpi *m = ctx->transport;
    int mtag;
    mt_status s;
    if ((s = reap(m)) || (s = channel_tag(m, g, tag, &mtag))) return s;
    if (m->n_sends == m->cap_sends) {
        int cap = m->cap_sends ? 2 * m->cap_sends : 16;
        MPI_Request *reqs = realloc(m->send_reqs, (size_t)cap * sizeof *reqs);
        if (reqs) m->send_reqs = reqs;
        void **bufs = realloc(m->send_bufs, (size_t)cap * sizeof *bufs);
        if (bufs) m->send_bufs = bufs;
        int *done = realloc(m->send_done, (size_t)cap * sizeof *done);
        if (done) m->send_done = done;
        if (!reqs || !bufs || !done)
            return mt_fail(MT_ENOMEM, "mt_send: out of memory for %d sends in flight", cap);
        m->cap_sends = cap;
    }
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy)
        return mt_fail(MT_ENOMEM, "mt_send over %s: out of memory for a message of %zu bytes "
                       "(messages stay in memory until received)", g->label, bytes);
    if (bytes) memcpy(copy, buf, bytes);
    MPI_Datatype type;
    int n;
    bool made;
    if ((s = mt__mpi_block_type(bytes, &type, &n, &made))) {
        free(copy);
        return s;
    }
    const int to = g->members[dst];
    int rc = MPI_Isend(copy, n, type, to, mtag, m->p2p, &m->send_reqs[m->n_sends]);
    if (made) MPI_Type_free(&type);
    if (rc != MPI_SUCCESS) {
        free(copy);
        return mt__mpi_error(rc, "MPI_Isend");
    }
    m->send_bufs[m->n_sends++] = copy;
    m->p2p_sent[to]++;
    return MT_OK;
}

/* Posts the receive of the matched message *msg (`bytes` long) into `into`. */
static mt_status receive_matched(MPI_Message *msg, void *into, size_t bytes, MPI_Request *req) {
    MPI_Datatype type;
    int n;
    bool made;
    mt_status s = mt__mpi_block_type(bytes, &type, &n, &made);
    if (s != MT_OK) return s;
    int rc = MPI_Imrecv(into, n, type, msg, req);
    if (made) MPI_Type_free(&type);
    return rc == MPI_SUCCESS ? MT_OK : mt__mpi_error(rc, "MPI_Imrecv");
}

/* The receive on ctx from group rank src of g timed out, before its message
 * was matched or (`matched`) during its transfer: asks the sender what it is
 * doing, fails the launch and tells everyone. */
static mt_status recv_timed_out(mt_mpi *m, mt_ctx *ctx, const mt_group *g, int src, int tag,
                                bool matched) {
    const int from = g->members[src];
    char peer[320], sender[400], msg[1024];
    mt__mpi_ask(m, &from, 1);
    mt__mpi_peer_text(m, from, peer, sizeof peer);
    if (matched)
        snprintf(sender, sizeof sender, "the message from device %d arrived but its transfer "
                 "did not finish; %s", from, peer);
    else
        snprintf(sender, sizeof sender, "no message arrived from device %d; %s", from, peer);
    mt__p2p_timeout_text(ctx, g, src, tag, sender, msg, sizeof msg);
    /* a matched receive is posted for good: the job is doomed */
    return mt__mpi_timed_out(m, msg, matched, matched);
}

mt_status mt__mpi_recv(mt_ctx *ctx, const mt_group *g, int src, int tag, void *buf, size_t bytes,
                       size_t *got) {
    mt_mpi *m = ctx->transport;
    int mtag;
    mt_status s;
    if ((s = reap(m)) || (s = channel_tag(m, g, tag, &mtag))) return s;
    const int from = g->members[src], saved_phase = m->phase;
    const double t0 = mt_time_now();
    MPI_Request req = MPI_REQUEST_NULL;
    void *drop = NULL;   /* a message of the wrong size goes here */
    bool matched = false;
    m->phase = PHASE_COLLECTIVE;
    for (long spins = 0; s == MT_OK; spins++) {
        int flag = 0, rc;
        if (!matched) {
            MPI_Message msg;
            MPI_Status st;
            if ((rc = MPI_Improbe(from, mtag, m->p2p, &flag, &msg, &st)) != MPI_SUCCESS) {
                s = mt__mpi_error(rc, "MPI_Improbe");
                break;
            }
            if (flag) {
                /* matched: this message must be received, whatever happens */
                matched = true;
                m->p2p_received[from]++;
                MPI_Count n = 0;
                MPI_Get_elements_x(&st, MPI_BYTE, &n);
                *got = (size_t)n;
                void *into = buf;
                if (*got != bytes && !(into = drop = malloc(*got ? *got : 1))) {
                    mt__mpi_set_dangling(m);
                    s = mt_fail(MT_ENOMEM, "mt_recv: out of memory for a message of %zu bytes "
                                "to drop", *got);
                    break;
                }
                if ((s = receive_matched(&msg, into, *got, &req)) != MT_OK) {
                    mt__mpi_set_dangling(m);
                    break;
                }
            }
        }
        if (matched) {
            if ((rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE)) != MPI_SUCCESS) {
                mt__mpi_set_dangling(m);
                s = mt__mpi_error(rc, "MPI_Test");
                break;
            }
            if (flag) break;
        }
        if ((spins & 15) == 0) {
            mt__mpi_ctl_poll(m);
            /* once matched, the transfer is finished (bounded), abort or not */
            if (!matched && atomic_load(&m->ls->abort)) {
                s = mt_fail(MT_EABORTED, "device %d stopped in %s: device %d failed: %s", m->rank,
                            mt__mpi_current_text(m, "a receive"), m->ls->failed_device,
                            m->ls->failed_msg);
                break;
            }
            double now = mt_time_now();
            if (now > ctx->deadline) {
                s = recv_timed_out(m, ctx, g, src, tag, matched);
                break;
            }
            mt__mpi_backoff(m, spins, now - t0);
        } else if (m->oversubscribed) {
            sched_yield();
        }
    }
    m->phase = saved_phase;
    if (s == MT_OK && drop) s = MT_ESHAPE;
    if (!m->dangling) free(drop);   /* else MPI may still write it */
    return s;
}

/* ======================================================================== */
/* The end of the launch                                                     */
/* ======================================================================== */

/* One round of an end-of-launch wait: serves the control channel; gives up
 * at the deadline, or at m->stop_by once the launch is doomed. */
static mt_status end_wait_step(mt_mpi *m, long spins, double t0, double deadline,
                               const char *what) {
    mt__mpi_ctl_poll(m);
    const double now = mt_time_now();
    if (m->stop_by > 0 && now > m->stop_by)
        return mt_fail(MT_EABORTED, "device %d gave up waiting for %s: a collective was left "
                       "unfinished, so the job is being stopped", m->rank, what);
    if (now > deadline)
        return mt_fail(MT_ETIMEOUT, "device %d: %s timed out after %.3g s", m->rank, what,
                       now - t0);
    mt__mpi_backoff(m, spins, now - t0);
    return MT_OK;
}

/* Receives and drops every message sent to this rank and never received
 * (m->p2p_expect counts what each rank sent here); *n_left of them, the
 * first from *first_src with MPI tag *first_tag, *first_bytes long. */
static mt_status drain(mt_mpi *m, double t0, double deadline, int *n_left, int *first_src,
                       int *first_tag, size_t *first_bytes) {
    const char *what = "the messages never received";
    mt_status s = MT_OK;
    for (int r = 0; r < m->size && s == MT_OK; r++) {
        for (long spins = 0; s == MT_OK && m->p2p_received[r] < m->p2p_expect[r]; spins++) {
            int flag = 0;
            MPI_Message msg;
            MPI_Status st;
            int rc = MPI_Improbe(r, MPI_ANY_TAG, m->p2p, &flag, &msg, &st);
            if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Improbe");
            if (!flag) {
                s = end_wait_step(m, spins, t0, deadline, what);
                continue;
            }
            MPI_Count n = 0;
            MPI_Get_elements_x(&st, MPI_BYTE, &n);
            void *scratch = malloc(n ? (size_t)n : 1);
            MPI_Request req = MPI_REQUEST_NULL;
            if (!scratch) return mt_fail(MT_ENOMEM, "cannot allocate %lld bytes to drop a "
                                         "message never received", (long long)n);
            if ((s = receive_matched(&msg, scratch, (size_t)n, &req)) != MT_OK) return s;
            for (long w = 0; s == MT_OK; w++) {
                int done = 0;
                if ((rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
                    return mt__mpi_error(rc, "MPI_Test");
                if (done) break;
                s = end_wait_step(m, w, t0, deadline, what);
            }
            if (s != MT_OK) return s;   /* the receive stays posted: scratch with it */
            free(scratch);
            m->p2p_received[r]++;
            if ((*n_left)++ == 0) *first_src = r, *first_tag = st.MPI_TAG, *first_bytes = (size_t)n;
        }
    }
    return s;
}

void mt__mpi_p2p_totals(const mt_mpi *m, int *sent, int *received) {
    *sent = *received = 0;
    for (int r = 0; m->p2p_sent && r < m->size; r++) {
        *sent += m->p2p_sent[r];
        *received += m->p2p_received[r];
    }
}

/* Waits, with the timeout from t0, until this rank's sends are done. */
static mt_status sends_done(mt_mpi *m, double t0, double deadline) {
    mt_status s = MT_OK;
    for (long spins = 0; s == MT_OK && m->n_sends > 0; spins++)
        if ((s = reap(m)) == MT_OK && m->n_sends > 0)
            s = end_wait_step(m, spins, t0, deadline, "this device's sends to complete");
    return s;
}

mt_status mt__mpi_p2p_sends_done(mt_mpi *m) {
    const double t0 = mt_time_now();
    return sends_done(m, t0, t0 + m->timeout_s);
}

mt_status mt__mpi_p2p_close(mt_mpi *m, bool report) {
    if (m->p2p == MPI_COMM_NULL) return MT_OK;
    MPI_Request req;
    int rc = MPI_Ialltoall(m->p2p_sent, 1, MPI_INT, m->p2p_expect, 1, MPI_INT, m->p2p, &req);
    if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Ialltoall");
    mt_status s = mt__mpi_wait(m, NULL, 1, &req, "the end of the launch (counting messages)");
    const double t0 = mt_time_now(), deadline = t0 + m->timeout_s;
    int n_left = 0, first_src = -1, first_tag = 0;
    size_t first_bytes = 0;
    if (s == MT_OK) s = drain(m, t0, deadline, &n_left, &first_src, &first_tag, &first_bytes);
    if (s == MT_OK) s = sends_done(m, t0, deadline);
    if (s != MT_OK || n_left == 0 || !report) return s;
    return mt__p2p_leftover(m->ls, m->rank, n_left, first_src,
                            m->p2p_keys[first_tag >> TAG_BITS], first_tag & MT_TAG_MAX,
                            first_bytes);
}

#endif /* MT_HAVE_MPI */
