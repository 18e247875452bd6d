/*
 * mpi.c — the MPI transport: one device per rank, started by mpirun (internal).
 *
 * Every rank calls mt_launch; mt__mpi_launch initialises MPI if nobody has,
 * builds this rank's device (device id = world rank), runs the device
 * function, and makes every rank return the same result.
 *
 * Communicators. At launch, for every set of mesh axes (of size > 1) one
 * MPI_Comm_split of the world makes the communicators of its groups (color:
 * the device with those coordinates zeroed, i.e. the other coordinates; key:
 * the device id, so ranks are in mesh order). All ranks are inside mt_launch
 * then, so these blocking splits cannot hang. A group over axes given out of
 * mesh order ("tensor,data") ranks its members differently: on first use it is
 * split once more from its set's communicator (key = group rank), behind an
 * MPI_Ibarrier that is waited on with the timeout, so a member that never
 * comes cannot hang the others. Both kinds are cached per axes key.
 *
 * Timeouts. Every collective is posted non-blocking (MPI_Iallreduce, ...)
 * and polled with MPI_Testall against the deadline. The poll also serves a
 * "control" communicator (a dup of the world) on which ranks send small
 * messages to each other:
 *   ABORT  "I failed with this status and message": the receiver's waiting
 *          and later collectives return MT_EABORTED at once;
 *   QUERY  sent by a rank whose collective timed out to the other members of
 *          the group; REPLY carries the member's last collective (the front
 *          end's record: "#12 psum over 'data' f32 4096 bytes") and what it
 *          is doing (inside that collective, computing, or finished).
 * So the rank that times out names, in its message, every member that never
 * arrived and the last collective each one issued; a member that does not
 * answer within a short wait is named as stuck outside meshtrain's
 * collectives or dead.
 *
 * The end of a launch. Every rank then all-gathers (non-blocking, with the
 * timeout) its outcome: status, message, and whether it left a collective
 * unfinished. All ranks pick the same failure (a real error before a
 * timeout before MT_EABORTED, then the lowest device) and return it. MPI
 * cannot cancel a posted collective, so when any rank left one unfinished,
 * the MPI state is no longer usable: rank 0 prints the agreed message and
 * calls MPI_Abort, which ends every rank of the job (exit status 1) rather
 * than leave one hanging. The same happens when the end-of-launch exchange
 * itself times out (the rank that saw it prints and aborts). Failures that
 * left nothing unfinished (a device returning an error after its last
 * collective, a bad mesh spec) are returned as values on every rank.
 * A rank that dies (segfault, exit(3)) is noticed by mpirun, which kills the
 * job; the timeout covers anything mpirun does not catch. Before the
 * outcomes are compared, the control messages each rank sent are counted
 * (MPI_Ialltoall) and drained, so none is left over for a later launch.
 * With a trace, the ranks then agree on the trace's status the same way (only
 * rank 0 writes the gathered file, so only it can see that writing failed).
 *
 * Counts. MPI 3 counts are ints. A block of more than INT_MAX bytes (all-gather,
 * all-to-all, broadcast, permute) goes as one element of a derived datatype
 * of exactly that many bytes; the reductions, whose predefined MPI_Ops take
 * only predefined datatypes, refuse more than INT_MAX elements.
 *
 * Global state (forced by MPI, which is initialised once per process and
 * finalised once): whether meshtrain initialised MPI (then it finalises it
 * at exit, not at the end of a launch, so that a process can launch again),
 * and whether a launch is running (an exit() in the middle of one must not
 * finalise: finalising would wait for ranks that are waiting for us, while
 * exiting without it makes mpirun end the job).
 */
#include "base/base_impl.h"
#include "comm/comm_impl.h"

#ifdef MT_HAVE_MPI

#include <mpi.h>

#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ======================================================================== */
/* State                                                                     */
/* ======================================================================== */

static bool        mpi_we_initialised;   /* see the file comment */
static atomic_bool mpi_launch_running;

enum { CTL_ABORT = 1, CTL_QUERY = 2, CTL_REPLY = 3 };
enum { PHASE_COMPUTING = 0, PHASE_COLLECTIVE = 1, PHASE_FINISHED = 2 };
enum { TAG_CTL = 31, TAG_PERMUTE = 32 };

/* One control message; fixed size, sent as bytes. */
typedef struct {
    int32_t  kind, from, status, phase;
    uint64_t seq;          /* the sender's collectives so far */
    char     text[160];    /* the sender's last collective */
    char     msg[512];     /* CTL_ABORT: the failure */
} ctl_msg;

/* A control message in flight. Each is allocated on its own and never moves
 * while its MPI_Isend runs (MPI forbids touching a send buffer until the send
 * completes, so a growing array of them could not be realloc'd). */
typedef struct {
    ctl_msg     msg;
    MPI_Request req;
} ctl_out;

/* What each rank contributes to the end-of-launch agreement. */
typedef struct {
    int32_t status, device, dangling, pad;
    char    msg[1008];
} outcome;

typedef struct {
    uint32_t key;
    MPI_Comm comm;
    bool     owned;        /* made for this key (freed at the end) */
} comm_entry;

#define SET_COMMS (1 << MT_MESH_MAX_AXES)

typedef struct {
    mt_launch_state *ls;
    mt_ctx          *ctx;
    int              rank, size;
    double           timeout_s;
    bool             oversubscribed;  /* more ranks on this node than cores */
    MPI_Comm         world;           /* dup of MPI_COMM_WORLD for this launch */
    MPI_Comm         ctl;             /* control messages and the agreement */
    MPI_Comm         set_comm[SET_COMMS]; /* by axis bit set; NULL: not made */
    comm_entry      *comms;           /* (cap_comms) groups' communicators, by axes key */
    int              n_comms, cap_comms;
    MPI_Op           fmax, fmin;      /* f32 max/min that keep NaN, as jax.lax.pmax */
    /* control channel */
    ctl_msg          in;
    MPI_Request      in_req;          /* the posted receive; NULL once closed */
    bool             closing;         /* after the agreement: answer no queries */
    ctl_out        **out;             /* (n_out) each allocated on its own, see ctl_out */
    int              n_out;
    int             *sent_to;         /* (size) control messages sent to each rank */
    int              received;
    ctl_msg         *replies;         /* (size) answers to our last query */
    bool            *replied;
    int              phase;
    bool             dangling;        /* a posted collective never finished */
    bool             notified;        /* the others were told of our failure */
    /* bf16 reductions run in f32 here */
    void            *scratch;
    size_t           scratch_bytes;
} mt_mpi;

/* ======================================================================== */
/* Small helpers                                                             */
/* ======================================================================== */

static mt_status mpi_error(int rc, const char *what) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", rc);
    return mt_fail(MT_EINTERNAL, "%s failed: %s", what, text);
}

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

/* The collectives that only move bytes send a block of `bytes` as *count
 * elements of *type: MPI_BYTE up to INT_MAX, and above that (MPI counts are
 * int) one element of a datatype exactly `bytes` long, made of 1 GiB chunks
 * and the remainder. The caller frees a made type (*made) once it is posted:
 * MPI keeps it alive until the communication is done. */
static mt_status block_type(size_t bytes, MPI_Datatype *type, int *count, bool *made) {
    *made = false;
    if (bytes <= (size_t)INT_MAX) {
        *type = MPI_BYTE;
        *count = (int)bytes;
        return MT_OK;
    }
    const size_t chunk = (size_t)1 << 30;
    if (bytes / chunk > (size_t)INT_MAX)
        return mt_fail(MT_EUNSUPPORTED, "a block of %zu bytes is more than MPI can describe", bytes);
    MPI_Datatype gib;
    int rc = MPI_Type_contiguous((int)chunk, MPI_BYTE, &gib);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Type_contiguous");
    int lens[2] = {(int)(bytes / chunk), (int)(bytes % chunk)};
    MPI_Aint disp[2] = {0, (MPI_Aint)(bytes / chunk * chunk)};
    MPI_Datatype parts[2] = {gib, MPI_BYTE};
    rc = MPI_Type_create_struct(2, lens, disp, parts, type);
    MPI_Type_free(&gib);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Type_create_struct");
    if ((rc = MPI_Type_commit(type)) != MPI_SUCCESS) {
        MPI_Type_free(type);
        return mpi_error(rc, "MPI_Type_commit");
    }
    *count = 1;
    *made = true;
    return MT_OK;
}

/* This device's record, written by the front end before each collective. */
static const mt_device_record *own_record(const mt_mpi *m) {
    return m->ctx ? m->ctx->record : NULL;
}

static const char *current_text(const mt_mpi *m, const char *fallback) {
    const mt_device_record *r = own_record(m);
    return r && r->text[0] ? r->text : fallback;
}

/* ======================================================================== */
/* Control channel                                                           */
/* ======================================================================== */

static void ctl_send(mt_mpi *m, int to, const ctl_msg *msg) {
    ctl_out *slot = NULL;
    for (int i = 0; i < m->n_out && !slot; i++) {
        int done = 0;
        if (m->out[i]->req == MPI_REQUEST_NULL) slot = m->out[i];
        else if (MPI_Test(&m->out[i]->req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done)
            slot = m->out[i];
    }
    if (!slot) {
        /* only the array of pointers moves; the messages stay put */
        ctl_out **grown = realloc(m->out, (size_t)(m->n_out + 1) * sizeof *grown);
        if (!grown) return;   /* best effort: the timeout still stops the others */
        m->out = grown;
        if (!(slot = malloc(sizeof *slot))) return;
        slot->req = MPI_REQUEST_NULL;
        m->out[m->n_out++] = slot;
    }
    slot->msg = *msg;
    if (MPI_Isend(&slot->msg, (int)sizeof(ctl_msg), MPI_BYTE, to, TAG_CTL, m->ctl,
                  &slot->req) == MPI_SUCCESS)
        m->sent_to[to]++;
    else
        slot->req = MPI_REQUEST_NULL;
}

static ctl_msg ctl_make(const mt_mpi *m, int kind) {
    ctl_msg c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.from = m->rank;
    c.phase = m->phase;
    const mt_device_record *r = own_record(m);
    if (r) {
        c.seq = atomic_load(&r->seq);
        snprintf(c.text, sizeof c.text, "%s", r->text);
    }
    return c;
}

/* Tells every other rank that this one failed, once. */
static void ctl_notify_failure(mt_mpi *m, mt_status status, const char *msg) {
    if (m->notified || m->closing) return;
    m->notified = true;
    ctl_msg c = ctl_make(m, CTL_ABORT);
    c.status = status;
    snprintf(c.msg, sizeof c.msg, "%s", msg);
    for (int r = 0; r < m->size; r++)
        if (r != m->rank) ctl_send(m, r, &c);
}

static void ctl_handle(mt_mpi *m, const ctl_msg *c) {
    if (c->from < 0 || c->from >= m->size) return;
    switch (c->kind) {
    case CTL_ABORT:
        if (!atomic_load(&m->ls->abort)) {
            char msg[sizeof c->msg + 1];
            snprintf(msg, sizeof msg, "%s", c->msg);
            mt__launch_fail(m->ls, c->from, c->status, msg);
        }
        break;
    case CTL_QUERY:
        if (!m->closing) {
            ctl_msg r = ctl_make(m, CTL_REPLY);
            ctl_send(m, c->from, &r);
        }
        break;
    case CTL_REPLY:
        m->replies[c->from] = *c;
        m->replied[c->from] = true;
        break;
    default:
        break;
    }
}

/* Handles every control message that has arrived. */
static void ctl_poll(mt_mpi *m) {
    while (m->in_req != MPI_REQUEST_NULL) {
        int flag = 0;
        if (MPI_Test(&m->in_req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) return;
        m->received++;
        ctl_msg c = m->in;
        if (MPI_Irecv(&m->in, (int)sizeof m->in, MPI_BYTE, MPI_ANY_SOURCE, TAG_CTL, m->ctl,
                      &m->in_req) != MPI_SUCCESS)
            m->in_req = MPI_REQUEST_NULL;
        ctl_handle(m, &c);
    }
}

/* ======================================================================== */
/* Waiting with a timeout                                                    */
/* ======================================================================== */

/* Between polls: spin while a core is ours, then give it away; a long wait
 * (a slow or stuck peer) sleeps so it does not burn the core its peer needs.
 * libnbc advances a collective only inside MPI_Test, so no sleeping early. */
static void backoff(const mt_mpi *m, long spins, double waited) {
    if (waited > 1.0) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    } else if (m->oversubscribed || spins > 20000) {
        sched_yield();
    }
}

static void append(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

static const char *phase_text(int phase) {
    return phase == PHASE_COLLECTIVE ? "waiting in it"
         : phase == PHASE_FINISHED   ? "it has finished its device function"
                                     : "it is computing (between collectives)";
}

/* A collective (g != NULL) or the end-of-launch exchange (g == NULL) timed
 * out: asks the others what they are doing, and builds the message naming
 * the ranks that never arrived. Marks the launch failed and tells everyone. */
static mt_status on_timeout(mt_mpi *m, const mt_group *g, const char *what, double waited) {
    const int P = g ? g->size : m->size;
    const mt_device_record *own = own_record(m);
    const uint64_t my_seq = own ? atomic_load(&own->seq) : 0;
    for (int r = 0; r < m->size; r++) m->replied[r] = false;
    ctl_msg q = ctl_make(m, CTL_QUERY);
    for (int i = 0; i < P; i++) {
        int r = g ? g->members[i] : i;
        if (r != m->rank) ctl_send(m, r, &q);
    }
    /* long enough for a rank that polls (is inside a collective); short
     * enough that the whole stop stays near the timeout */
    const double answer_s = m->timeout_s < 1.0 ? 0.5 : m->timeout_s < 4.0 ? m->timeout_s / 2 : 2.0;
    const double t_end = mt_time_now() + answer_s;
    for (;;) {
        ctl_poll(m);
        int missing = 0;
        for (int i = 0; i < P; i++) {
            int r = g ? g->members[i] : i;
            if (r != m->rank && !m->replied[r]) missing++;
        }
        if (!missing || mt_time_now() > t_end) break;
        sched_yield();
    }

    char msg[1024];
    if (g)
        snprintf(msg, sizeof msg, "collective %s timed out after %.3g s, waiting for",
                 what, waited);
    else
        snprintf(msg, sizeof msg, "the end of the launch timed out after %.3g s on device %d "
                 "(every device must return from its function), waiting for", waited, m->rank);
    int absent = 0;
    for (int i = 0; i < P; i++) {
        int r = g ? g->members[i] : i;
        if (r == m->rank) continue;
        if (!m->replied[r]) {
            append(msg, sizeof msg, "%s device %d (did not answer: stuck outside meshtrain's "
                   "collectives, or dead)", absent ? ";" : "", r);
            absent++;
            continue;
        }
        const ctl_msg *c = &m->replies[r];
        bool arrived = g ? c->phase == PHASE_COLLECTIVE && c->seq == my_seq &&
                           strcmp(c->text, what) == 0
                         : c->phase == PHASE_FINISHED;
        if (arrived) continue;
        append(msg, sizeof msg, "%s device %d (never arrived; its last collective: %s; %s)",
               absent ? ";" : "", r, c->text[0] ? c->text : "none yet", phase_text(c->phase));
        absent++;
    }
    if (!absent)
        append(msg, sizeof msg, " nobody: every device arrived but the transfer did not finish "
               "(a stalled network?)");
    append(msg, sizeof msg, ". Every device must issue the same collectives in the same order "
           "(MT_COMM_TIMEOUT=%g s; raise it if devices are merely slow)", m->timeout_s);

    m->dangling = true;
    mt__launch_fail(m->ls, m->rank, MT_ETIMEOUT, msg);
    ctl_notify_failure(m, MT_ETIMEOUT, msg);
    return mt_fail(MT_ETIMEOUT, "%s", msg);
}

/* Waits for n posted requests; MT_OK when all finished. */
static mt_status mpi_wait(mt_mpi *m, const mt_group *g, int n, MPI_Request *reqs, const char *what) {
    /* The end-of-launch exchange (g == NULL) waits twice as long: a rank
     * still inside a collective then times out first, and its message names
     * the rank that skipped the collective, which is what the user needs. */
    const double t0 = mt_time_now(), deadline = t0 + (g ? m->timeout_s : 2 * m->timeout_s + 1);
    const int saved_phase = m->phase;
    if (g) m->phase = PHASE_COLLECTIVE;
    for (long spins = 0;; spins++) {
        int done = 0;
        int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            m->phase = saved_phase;
            m->dangling = true;
            return mpi_error(rc, what);
        }
        if (done) {
            m->phase = saved_phase;
            return MT_OK;
        }
        if ((spins & 15) == 0) {
            ctl_poll(m);
            if (g && atomic_load(&m->ls->abort)) {
                m->phase = saved_phase;
                m->dangling = true;
                return mt_fail(MT_EABORTED, "device %d stopped in %s: device %d failed: %s",
                               m->rank, what, m->ls->failed_device, m->ls->failed_msg);
            }
            double now = mt_time_now();
            if (now > deadline) {
                mt_status s = on_timeout(m, g, what, now - t0);
                m->phase = saved_phase;
                return s;
            }
            backoff(m, spins, now - t0);
        } else if (m->oversubscribed) {
            sched_yield();
        }
    }
}

/* ======================================================================== */
/* Communicators                                                             */
/* ======================================================================== */

/* The axes (bit set) over which the group's members differ. */
static uint32_t group_set(const mt_mpi *m, const mt_group *g) {
    const mt_mesh *mesh = m->ls->mesh;
    int nd = mt_mesh_ndim(mesh), c0[MT_MESH_MAX_AXES], c[MT_MESH_MAX_AXES];
    mt_mesh_coords(mesh, g->members[0], c0);
    uint32_t set = 0;
    for (int i = 1; i < g->size; i++) {
        mt_mesh_coords(mesh, g->members[i], c);
        for (int a = 0; a < nd; a++)
            if (c[a] != c0[a]) set |= 1u << a;
    }
    return set;
}

/* The communicator of the group, made on first use. */
static mt_status group_comm(mt_mpi *m, const mt_group *g, MPI_Comm *out) {
    for (int i = 0; i < m->n_comms; i++)
        if (m->comms[i].key == g->key) {
            *out = m->comms[i].comm;
            return MT_OK;
        }
    if (m->n_comms == m->cap_comms) {
        int cap = m->cap_comms ? 2 * m->cap_comms : 16;
        comm_entry *p = realloc(m->comms, (size_t)cap * sizeof *p);
        if (!p) return mt_fail(MT_ENOMEM, "rank %d: out of memory for %d group communicators",
                               m->rank, cap);
        m->comms = p;
        m->cap_comms = cap;
    }
    uint32_t set = group_set(m, g);
    MPI_Comm base = set < SET_COMMS ? m->set_comm[set] : MPI_COMM_NULL;
    if (base == MPI_COMM_NULL)
        return mt_fail(MT_EINTERNAL, "no communicator for the axis set 0x%x of a %d-device group",
                       set, g->size);
    bool mesh_order = true;
    for (int i = 1; i < g->size; i++)
        if (g->members[i] < g->members[i - 1]) mesh_order = false;
    comm_entry e = {.key = g->key, .comm = base, .owned = false};
    if (!mesh_order) {
        /* every member must be here before the blocking split */
        MPI_Request req;
        int rc = MPI_Ibarrier(base, &req);
        if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Ibarrier");
        mt_status s = mpi_wait(m, g, 1, &req, current_text(m, "group set-up"));
        if (s != MT_OK) return s;
        rc = MPI_Comm_split(base, 0, g->rank, &e.comm);
        if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Comm_split");
        e.owned = true;
    }
    int r = -1;
    MPI_Comm_rank(e.comm, &r);
    if (r != g->rank)
        return mt_fail(MT_EINTERNAL, "device %d has rank %d in its group but %d in the MPI "
                       "communicator", m->rank, g->rank, r);
    m->comms[m->n_comms++] = e;
    *out = e.comm;
    return MT_OK;
}

/* One split of the world per axis set (see the file comment). */
static mt_status make_set_comms(mt_mpi *m) {
    const mt_mesh *mesh = m->ls->mesh;
    const int nd = mt_mesh_ndim(mesh);
    uint32_t big = 0;   /* axes of size > 1 */
    for (int a = 0; a < nd; a++)
        if (mt_mesh_axis_size(mesh, mt_mesh_axis_name(mesh, a)) > 1) big |= 1u << a;
    for (int s = 0; s < SET_COMMS; s++) m->set_comm[s] = MPI_COMM_NULL;
    for (uint32_t s = 1; s < (1u << nd); s++) {
        if ((s & big) != s) continue;
        if (s == big) {
            m->set_comm[s] = m->world;
            continue;
        }
        int c[MT_MESH_MAX_AXES];
        mt_mesh_coords(mesh, m->rank, c);
        for (int a = 0; a < nd; a++)
            if (s & (1u << a)) c[a] = 0;
        int rc = MPI_Comm_split(m->world, mt_mesh_device(mesh, c), m->rank, &m->set_comm[s]);
        if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Comm_split");
    }
    return MT_OK;
}

/* ======================================================================== */
/* The transport table                                                       */
/* ======================================================================== */

/* Common start of every collective: nothing to do for a group of one, and
 * nothing posted once the launch is stopping. */
static mt_status begin(mt_ctx *ctx, const mt_group *g, mt_mpi **m, MPI_Comm *comm) {
    *m = ctx->transport;
    if (atomic_load(&(*m)->ls->abort))
        return mt_fail(MT_EABORTED, "device %d failed; this collective was not started",
                       (*m)->ls->failed_device);
    return group_comm(*m, g, comm);
}

/* A byte-moving collective's start: the group's communicator, and the MPI
 * type that describes `bytes` (MPI_BYTE, or 1 GiB chunks past INT_MAX). */
typedef struct { MPI_Datatype type; int n; bool made; } bytes_type;

static mt_status begin_bytes(mt_ctx *ctx, const mt_group *g, size_t bytes, mt_mpi **m,
                             MPI_Comm *comm, bytes_type *bt) {
    bt->n = 0;
    bt->made = false;
    mt_status s = begin(ctx, g, m, comm);
    return s == MT_OK ? block_type(bytes, &bt->type, &bt->n, &bt->made) : s;
}

static mt_status mpi_all_reduce(mt_ctx *ctx, const mt_group *g, void *buf, size_t count,
                                mt_dtype dtype, mt_reduce_op op) {
    if (g->size == 1 || count == 0) return MT_OK;
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
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, data, (int)count, dtype == MT_I32 ? MPI_INT32_T : MPI_FLOAT,
                            mpi_op(m, op, dtype), comm, &req);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Iallreduce");
    if ((s = mpi_wait(m, g, 1, &req, current_text(m, "all-reduce"))) != MT_OK) return s;
    if (f) mt__f32_to_bf16(buf, f, count);
    return MT_OK;
}

static mt_status mpi_all_gather(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                                size_t bytes) {
    if (g->size == 1) {
        if (bytes && send != recv) memmove(recv, send, bytes);
        return MT_OK;
    }
    if (bytes == 0) return MT_OK;
    mt_mpi *m;
    MPI_Comm comm;
    bytes_type bt;
    mt_status s = begin_bytes(ctx, g, bytes, &m, &comm, &bt);
    if (s != MT_OK) return s;
    const void *src = send == (char *)recv + (size_t)g->rank * bytes ? MPI_IN_PLACE : send;
    MPI_Request req;
    int rc = MPI_Iallgather(src, bt.n, bt.type, recv, bt.n, bt.type, comm, &req);
    if (bt.made) MPI_Type_free(&bt.type);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Iallgather");
    return mpi_wait(m, g, 1, &req, current_text(m, "all-gather"));
}

static mt_status mpi_reduce_scatter(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                                    size_t count, mt_dtype dtype, mt_reduce_op op) {
    const size_t P = (size_t)g->size, esz = mt_dtype_size(dtype);
    if (P == 1) {
        if (count && send != recv) memmove(recv, send, count * esz);
        return MT_OK;
    }
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
        if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Ireduce_scatter_block");
        if ((s = mpi_wait(m, g, 1, &req, current_text(m, "reduce-scatter"))) != MT_OK) return s;
        mt__f32_to_bf16(recv, f + P * count, count);
        return MT_OK;
    }
    rc = MPI_Ireduce_scatter_block(send, recv, (int)count, dtype == MT_I32 ? MPI_INT32_T : MPI_FLOAT,
                                   mpi_op(m, op, dtype), comm, &req);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Ireduce_scatter_block");
    return mpi_wait(m, g, 1, &req, current_text(m, "reduce-scatter"));
}

static mt_status mpi_all_to_all(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                                size_t bytes) {
    if (g->size == 1) {
        if (bytes && send != recv) memmove(recv, send, bytes);
        return MT_OK;
    }
    if (bytes == 0) return MT_OK;
    mt_mpi *m;
    MPI_Comm comm;
    bytes_type bt;
    mt_status s = begin_bytes(ctx, g, bytes, &m, &comm, &bt);
    if (s != MT_OK) return s;
    MPI_Request req;
    int rc = MPI_Ialltoall(send, bt.n, bt.type, recv, bt.n, bt.type, comm, &req);
    if (bt.made) MPI_Type_free(&bt.type);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Ialltoall");
    return mpi_wait(m, g, 1, &req, current_text(m, "all-to-all"));
}

static mt_status mpi_permute(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                             size_t bytes, int dest, int src) {
    if (src < 0 && bytes) memset(recv, 0, bytes);
    if (g->size == 1) {
        if (src == 0 && dest == 0 && bytes && send != recv) memmove(recv, send, bytes);
        return MT_OK;
    }
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
        m->dangling = req[0] != MPI_REQUEST_NULL;
        return mpi_error(rc, failed);
    }
    return mpi_wait(m, g, 2, req, current_text(m, "permute"));
}

static mt_status mpi_broadcast(mt_ctx *ctx, const mt_group *g, void *buf, size_t bytes, int root) {
    if (g->size == 1 || bytes == 0) return MT_OK;
    mt_mpi *m;
    MPI_Comm comm;
    bytes_type bt;
    mt_status s = begin_bytes(ctx, g, bytes, &m, &comm, &bt);
    if (s != MT_OK) return s;
    MPI_Request req;
    int rc = MPI_Ibcast(buf, bt.n, bt.type, root, comm, &req);
    if (bt.made) MPI_Type_free(&bt.type);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Ibcast");
    return mpi_wait(m, g, 1, &req, current_text(m, "broadcast"));
}

static mt_status mpi_barrier(mt_ctx *ctx, const mt_group *g) {
    if (g->size == 1) return MT_OK;
    mt_mpi *m;
    MPI_Comm comm;
    mt_status s = begin(ctx, g, &m, &comm);
    if (s != MT_OK) return s;
    MPI_Request req;
    int rc = MPI_Ibarrier(comm, &req);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Ibarrier");
    return mpi_wait(m, g, 1, &req, current_text(m, "barrier"));
}

const mt_transport_ops mt__mpi_transport = {
    .name = "mpi",
    .all_reduce = mpi_all_reduce,
    .all_gather = mpi_all_gather,
    .reduce_scatter = mpi_reduce_scatter,
    .all_to_all = mpi_all_to_all,
    .permute = mpi_permute,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
};

/* ======================================================================== */
/* Launch                                                                    */
/* ======================================================================== */

static void mpi_at_exit(void) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized || atomic_load(&mpi_launch_running)) return;
    MPI_Finalize();
}

/* Prints the agreed failure and ends every rank: a collective was left
 * unfinished somewhere, and MPI cannot cancel it. */
static _Noreturn void mpi_die(const char *msg) {
    fprintf(stderr, "meshtrain: %s\nmeshtrain: a collective was left unfinished and MPI cannot "
            "cancel it: stopping every rank (MPI_Abort)\n", msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

/* Index of the failure every rank reports: a real error first, then a
 * timeout, then MT_EABORTED; the lowest device among equals. -1: none. */
static int pick_failure(const outcome *o, int n) {
    int best = -1, best_rank = 4;
    for (int i = 0; i < n; i++) {
        if (o[i].status == MT_OK) continue;
        int r = o[i].status == MT_EABORTED ? 3 : o[i].status == MT_ETIMEOUT ? 2 : 1;
        if (r < best_rank) best = i, best_rank = r;
    }
    return best;
}

static void free_comms(mt_mpi *m) {
    for (int i = 0; i < m->n_comms; i++)
        if (m->comms[i].owned) MPI_Comm_free(&m->comms[i].comm);
    m->n_comms = 0;
    free(m->comms);
    m->comms = NULL;
    m->cap_comms = 0;
    if (m->fmax != MPI_OP_NULL) MPI_Op_free(&m->fmax);
    if (m->fmin != MPI_OP_NULL) MPI_Op_free(&m->fmin);
    for (int s = 0; s < SET_COMMS; s++)
        if (m->set_comm[s] != MPI_COMM_NULL && m->set_comm[s] != m->world)
            MPI_Comm_free(&m->set_comm[s]);
    if (m->ctl != MPI_COMM_NULL) MPI_Comm_free(&m->ctl);
    if (m->world != MPI_COMM_NULL) MPI_Comm_free(&m->world);
}

/* Counts the control messages each rank sent, receives the ones still in
 * flight, and closes the channel, so nothing is left for a later launch. */
static mt_status ctl_close(mt_mpi *m) {
    int *expect = calloc((size_t)m->size, sizeof *expect);
    if (!expect) return mt_fail(MT_ENOMEM, "cannot allocate %d counts", m->size);
    MPI_Request req;
    int rc = MPI_Ialltoall(m->sent_to, 1, MPI_INT, expect, 1, MPI_INT, m->ctl, &req);
    mt_status s = rc == MPI_SUCCESS ? mpi_wait(m, NULL, 1, &req, "end of launch") : mpi_error(rc, "MPI_Ialltoall");
    if (s == MT_OK) {
        int total = 0;
        for (int r = 0; r < m->size; r++) total += expect[r];
        const double deadline = mt_time_now() + m->timeout_s;
        while (m->received < total && m->in_req != MPI_REQUEST_NULL) {
            ctl_poll(m);
            if (mt_time_now() > deadline) {
                s = mt_fail(MT_ETIMEOUT, "device %d: %d control messages never arrived",
                            m->rank, total - m->received);
                break;
            }
            if (m->received < total) sched_yield();
        }
    }
    free(expect);
    if (m->in_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&m->in_req);
        MPI_Wait(&m->in_req, MPI_STATUS_IGNORE);
    }
    for (int i = 0; i < m->n_out; i++)
        if (m->out[i]->req != MPI_REQUEST_NULL) MPI_Wait(&m->out[i]->req, MPI_STATUS_IGNORE);
    return s;
}

/* Starts MPI if needed; the world size and this rank. */
static mt_status mpi_start(int *rank, int *size) {
    int inited = 0, finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
        return mt_fail(MT_ESTATE, "MPI was already finalised; a launch on the mpi transport "
                       "must come before MPI_Finalize");
    MPI_Initialized(&inited);
    if (!inited) {
        /* Open MPI's libnbc runs an in-place MPI_Iallreduce on fewer than 4
         * ranks as reduce + broadcast (binomial), half the speed of the
         * blocking call at every size measured here; its ring is on a par.
         * MCA parameters are read at initialisation, and a user's setting wins. */
        setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) return mpi_error(rc, "MPI_Init_thread");
        mpi_we_initialised = true;
        atexit(mpi_at_exit);
    }
    int provided = 0, is_main = 0;
    MPI_Query_thread(&provided);
    MPI_Is_thread_main(&is_main);
    if (!is_main && provided < MPI_THREAD_SERIALIZED)
        return mt_fail(MT_ESTATE, "mt_launch on the mpi transport was called from a thread other "
                       "than the one that initialised MPI, which MPI_THREAD_FUNNELED forbids; call "
                       "it from the main thread, or initialise MPI with MPI_THREAD_SERIALIZED");
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return MT_OK;
}

/* Ranks sharing this node, and the CPUs they may run on together (the union
 * of their affinity masks: bound one to a core, or all on a node's cpuset),
 * to size kernel threads and the waiting policy. */
static int local_ranks(MPI_Comm world, int *node_cpus) {
    MPI_Comm node;
    int n = 1;
    unsigned char mine[MT_CPU_SET_BYTES], all[MT_CPU_SET_BYTES];
    *node_cpus = mt__cpu_set(mine);
    if (MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &n);
        if (MPI_Allreduce(mine, all, MT_CPU_SET_BYTES, MPI_BYTE, MPI_BOR, node) == MPI_SUCCESS) {
            int count = 0;
            for (int i = 0; i < MT_CPU_SET_BYTES; i++) count += __builtin_popcount(all[i]);
            if (count > 0) *node_cpus = count;
        }
        MPI_Comm_free(&node);
    }
    return n;
}

mt_status mt__mpi_launch(const mt_launch_opts *opts, mt_device_fn fn, void *arg) {
    int rank = 0, size = 1;
    mt_status s = mpi_start(&rank, &size);
    if (s != MT_OK) return s;
    /* configuration errors are the same on every rank: no exchange needed */
    if (opts->devices != 0 && opts->devices != size)
        return mt_fail(MT_EINVAL, "the launch asks for %d devices but mpirun started %d ranks "
                       "(one device per rank); run `mpirun -np %d ...` or ask for 0 devices "
                       "(the world size)", opts->devices, size, opts->devices);
    mt_mesh *mesh = NULL;
    s = mt_mesh_create(opts->mesh ? opts->mesh : "", size, &mesh);
    if (s != MT_OK) {
        char why[1024];
        snprintf(why, sizeof why, "%s", mt_errmsg());
        return mt_fail(s, "%s (under MPI the mesh has one device per rank: mpirun started %d)",
                       why, size);
    }

    mt_mpi *m = calloc(1, sizeof *m);
    mt_launch_state *ls = calloc(1, sizeof *ls);
    mt_ctx *ctx = calloc(1, sizeof *ctx);
    outcome *all = calloc((size_t)size, sizeof *all);
    if (m) {
        m->sent_to = calloc((size_t)size, sizeof *m->sent_to);
        m->replies = calloc((size_t)size, sizeof *m->replies);
        m->replied = calloc((size_t)size, sizeof *m->replied);
    }
    if (ls) ls->records = calloc((size_t)size, sizeof *ls->records);
    if (!m || !ls || !ctx || !all || !m->sent_to || !m->replies || !m->replied || !ls->records) {
        if (m) free(m->sent_to), free(m->replies), free(m->replied);
        if (ls) free(ls->records);
        free(m), free(ls), free(ctx), free(all);
        mt_mesh_free(mesh);
        /* the other ranks then time out in their first collective */
        return mt_fail(MT_ENOMEM, "cannot allocate the launch state of rank %d", rank);
    }
    m->rank = rank;
    m->size = size;
    m->timeout_s = mt__launch_timeout(opts);
    m->world = m->ctl = MPI_COMM_NULL;
    m->in_req = MPI_REQUEST_NULL;
    for (int i = 0; i < SET_COMMS; i++) m->set_comm[i] = MPI_COMM_NULL;
    m->fmax = m->fmin = MPI_OP_NULL;
    MPI_Op_create(fmax_keep_nan, 1, &m->fmax);
    MPI_Op_create(fmin_keep_nan, 1, &m->fmin);
    m->ls = ls;
    m->ctx = ctx;
    ls->mesh = mesh;
    ls->n_devices = size;
    ls->n_local = 1;
    ls->ops = &mt__mpi_transport;
    ls->transport = m;
    ls->timeout_s = m->timeout_s;
    ls->check = opts->check;
    ls->trace_path = opts->trace;
    atomic_init(&ls->abort, 0);
    atomic_init(&ls->fail_claimed, 0);
    ls->failed_device = -1;
    ls->process_rank = rank;
    ls->process_size = size;
    atomic_store(&mpi_launch_running, true);

    /* Every rank must arrive: a non-blocking dup waited on with the timeout
     * (there is no control channel yet to ask who is missing). */
    MPI_Request req;
    int rc = MPI_Comm_idup(MPI_COMM_WORLD, &m->world, &req);
    if (rc != MPI_SUCCESS) mpi_die(mpi_error(rc, "MPI_Comm_idup") ? mt_errmsg() : "");
    for (double t0 = mt_time_now();;) {
        int done = 0;
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        double waited = mt_time_now() - t0;
        if (waited > m->timeout_s) {
            char msg[512];
            snprintf(msg, sizeof msg, "device %d: not every one of the %d ranks called mt_launch "
                     "within %.3g s; every rank must launch the same mesh (MT_COMM_TIMEOUT)",
                     rank, size, m->timeout_s);
            mpi_die(msg);
        }
        backoff(m, 100000, waited);
    }
    /* the set-up below is blocking, but every rank is here now */
    MPI_Comm_set_errhandler(m->world, MPI_ERRORS_RETURN);
    int nlocal = local_ranks(m->world, &ls->n_cores);
    m->oversubscribed = nlocal > ls->n_cores;
    ls->may_spin = !m->oversubscribed;
    ls->kernel_threads = mt__launch_kernel_threads(opts, ls->n_cores, nlocal);
    rc = MPI_Comm_dup(m->world, &m->ctl);
    if (rc == MPI_SUCCESS) s = make_set_comms(m);
    else s = mpi_error(rc, "MPI_Comm_dup");
    if (s == MT_OK &&
        (rc = MPI_Irecv(&m->in, (int)sizeof m->in, MPI_BYTE, MPI_ANY_SOURCE, TAG_CTL, m->ctl,
                        &m->in_req)) != MPI_SUCCESS)
        s = mpi_error(rc, "MPI_Irecv");
    /* Trace times count from here, not from the call to mt_launch: every rank
     * has just left the same blocking set-up collectives, so the ranks' tracks
     * line up however late each one entered mt_launch (the idup above waited
     * for the last). mt__ctx_init copies it to the ctx. */
    ls->t_start = mt_time_now();
    bool have_ctx = false;
    if (s == MT_OK && (s = mt__ctx_init(ctx, ls, rank)) == MT_OK) {
        have_ctx = true;
        ctx->transport = m;
    }

    /* the device; a set-up failure here reaches the others in the agreement */
    mt_status st = s;
    if (have_ctx) st = mt__device_run(ctx, fn, arg);
    else mt__launch_fail(ls, rank, st, mt_errmsg());
    char own_msg[sizeof all->msg];
    snprintf(own_msg, sizeof own_msg, "%s", st == MT_OK ? "" : mt_errmsg());
    if (st != MT_OK && st != MT_EABORTED) ctl_notify_failure(m, st, own_msg);
    m->phase = PHASE_FINISHED;

    /* every rank's outcome, on every rank */
    outcome mine;
    memset(&mine, 0, sizeof mine);
    mine.status = st;
    mine.device = rank;
    mine.dangling = m->dangling;
    snprintf(mine.msg, sizeof mine.msg, "%s", own_msg);
    rc = MPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                        m->ctl, &req);
    s = rc == MPI_SUCCESS ? mpi_wait(m, NULL, 1, &req, "the end of the launch")
                          : mpi_error(rc, "MPI_Iallgather");
    if (s != MT_OK) {
        /* the failure that started it all (this rank's first) comes first */
        char both[2200];
        if (ls->failed_device >= 0)
            snprintf(both, sizeof both, "device %d: %s\nmeshtrain: then %s", ls->failed_device,
                     ls->failed_msg, mt_errmsg());
        else
            snprintf(both, sizeof both, "%s", mt_errmsg());
        mpi_die(both);
    }
    m->closing = true;
    int f = pick_failure(all, size);
    bool dangling = false;
    for (int r = 0; r < size; r++) dangling |= all[r].dangling != 0;
    if (f >= 0) {
        /* every rank reports the agreed failure, whatever it saw first */
        atomic_store(&ls->fail_claimed, 1);
        ls->failed_device = all[f].device;
        ls->failed_status = all[f].status;
        snprintf(ls->failed_msg, sizeof ls->failed_msg, "%s", all[f].msg);
        atomic_store(&ls->abort, 1);   /* the trace writer then keeps per-rank files */
    }
    mt_status result = mt__launch_result(ls);
    char result_msg[1100];
    snprintf(result_msg, sizeof result_msg, "%s", mt_errmsg());
    if (dangling) {
        if (ls->trace_path) mt__trace_write(ls, &ctx, 1);
        if (rank != 0) {
            /* rank 0 prints and aborts the job; this is only a fallback */
            struct timespec nap = {10, 0};
            nanosleep(&nap, NULL);
        }
        mpi_die(result_msg);
    }
    if (ls->trace_path) {
        /* Only rank 0 writes the gathered trace (and any rank may have had
         * to write its own file instead), so the ranks' trace statuses
         * differ: agree on them as on the launch's outcome, or rank 0 alone
         * would report a file it could not write. */
        mt_status ts = mt__trace_write(ls, &ctx, 1);
        memset(&mine, 0, sizeof mine);
        mine.status = ts;
        mine.device = rank;
        mine.dangling = m->dangling;   /* the trace's gathers are collectives too */
        snprintf(mine.msg, sizeof mine.msg, "%s", ts == MT_OK ? "" : mt_errmsg());
        rc = MPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE,
                            m->ctl, &req);
        s = rc == MPI_SUCCESS ? mpi_wait(m, NULL, 1, &req, "the end of the launch")
                              : mpi_error(rc, "MPI_Iallgather");
        if (s != MT_OK) mpi_die(mt_errmsg());
        for (int r = 0; r < size; r++) dangling |= all[r].dangling != 0;
        if (dangling) {
            if (rank != 0) {
                struct timespec nap = {10, 0};   /* as above: rank 0 aborts the job */
                nanosleep(&nap, NULL);
            }
            f = pick_failure(all, size);
            mpi_die(f >= 0 ? all[f].msg : "writing the trace left a collective unfinished");
        }
        f = pick_failure(all, size);
        if (result == MT_OK && f >= 0) {
            result = all[f].status;
            snprintf(result_msg, sizeof result_msg, "%s", all[f].msg);
        }
    }
    if ((s = ctl_close(m)) != MT_OK) mpi_die(mt_errmsg());

    if (have_ctx) mt__ctx_free(ctx);
    free_comms(m);
    free(ctx);
    free(all);
    free(ls->records);
    free(ls);
    mt_mesh_free(mesh);
    for (int i = 0; i < m->n_out; i++) free(m->out[i]);
    free(m->out), free(m->sent_to), free(m->replies), free(m->replied), free(m->scratch);
    free(m);
    atomic_store(&mpi_launch_running, false);
    return result == MT_OK ? MT_OK : mt_fail(result, "%s", result_msg);
}

#endif /* MT_HAVE_MPI */
