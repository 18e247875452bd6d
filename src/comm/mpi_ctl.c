/*
 * mpi_ctl.c — the MPI transport's control channel, and waiting for posted
 * requests with the timeout.
 *
 * Every collective is posted non-blocking (MPI_Iallreduce, ...) and polled
 * with MPI_Testall against the deadline: a blocking MPI call cannot time
 * out. The poll also serves a "control" communicator (a dup of the world) on
 * which ranks send small messages to each other:
 *   ABORT  "I failed with this status and message": the receiver's waiting
 *          and later collectives return MT_EABORTED at once;
 *   QUERY  sent by a rank whose collective timed out to the other members of
 *          the group; REPLY carries the member's last collective (the front
 *          end's record: "#12 psum over 'data' f32 4096 bytes") and what it
 *          is doing (inside that collective, computing, or finished).
 * So the rank that times out names, in its message, every member that never
 * arrived and the last collective each one issued; a member that does not
 * answer within a short wait (MT_MPI_ANSWER_S: a live rank answers within
 * milliseconds, a stopped one never) is named as stuck outside meshtrain's
 * collectives or dead. Every message carries its launch's number, and a
 * message of another launch is dropped where it arrives: at the end of a
 * launch the receive is cancelled and the rank's own sends waited for, and
 * what arrives later (the communicator is kept for the next launch,
 * mpi_comms.c) is an older launch's, which the next one drops. (Counting
 * the messages with an all-to-all and draining them cost a round trip
 * between hosts every launch, that is every training step.)
 *
 * A collective that timed out stays posted (MPI cannot cancel it), so the
 * job is doomed the moment it fires: the rank prints its message to stderr
 * then and there ("meshtrain: device N: collective ... timed out ..."),
 * rather than after an end-of-launch agreement that a stopped rank never
 * joins, and sets m->stop_by, which bounds its own wait in that agreement
 * (mpi_launch.c then stops the job). Its ABORT notice says both (printed,
 * dangling), so the ranks told do not print the message again and do not
 * wait for the end of the launch past their own stop_by either.
 */
#ifdef MT_HAVE_MPI

#include "comm/mpi_impl.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ======================================================================== */
/* Control channel                                                           */
/* ======================================================================== */

/* Posts the receive of the next control message into m->in; MPI's code. */
static int post_receive(mt_mpi *m) {
    return MPI_Irecv(&m->in, (int)sizeof m->in, MPI_BYTE, MPI_ANY_SOURCE, TAG_CTL, m->ctl,
                     &m->in_req);
}

/* Sends msg to rank `to` without waiting; best effort (a message that cannot
 * be sent is dropped: the timeout still stops the others). */
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
                  &slot->req) != MPI_SUCCESS)
        slot->req = MPI_REQUEST_NULL;
}

/* A control message of `kind` from this rank: its phase and last collective. */
static ctl_msg ctl_make(const mt_mpi *m, int kind) {
    ctl_msg c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.launch = m->launch;
    c.from = m->rank;
    c.phase = m->phase;
    const mt_device_record *r = mt__mpi_own_record(m);
    if (r) {
        c.seq = atomic_load(&r->seq);
        c.n_coll = atomic_load(&r->n_coll);
        snprintf(c.text, sizeof c.text, "%s", r->text);
    }
    return c;
}

void mt__mpi_set_dangling(mt_mpi *m) {
    m->dangling = true;
    if (m->stop_by == 0) m->stop_by = mt_time_now() + MT_MPI_STOP_GRACE_S;
}

void mt__mpi_ctl_notify_failure(mt_mpi *m, mt_status status, const char *msg) {
    if (m->notified || m->closing) return;
    m->notified = true;
    ctl_msg c = ctl_make(m, CTL_ABORT);
    c.status = status;
    c.printed = m->printed[0] && strcmp(m->printed, msg) == 0;
    c.dangling = m->dangling;
    snprintf(c.msg, sizeof c.msg, "%s", msg);
    for (int r = 0; r < m->size; r++)
        if (r != m->rank) ctl_send(m, r, &c);
}

/* Acts on one control message that arrived: an abort fails the launch here
 * too, a query is answered, a reply is kept for on_timeout. */
static void ctl_handle(mt_mpi *m, const ctl_msg *c) {
    /* another launch's (an earlier one's, sent after it ended here) */
    if (c->launch != m->launch || c->from < 0 || c->from >= m->size) return;
    switch (c->kind) {
    case CTL_ABORT:
        if (!atomic_load(&m->ls->abort)) {
            char msg[sizeof c->msg + 1];
            snprintf(msg, sizeof msg, "%s", c->msg);
            mt__launch_fail(m->ls, c->from, c->status, msg);   /* claims: one device per rank */
            m->failed_printed = c->printed != 0;
        }
        if (c->dangling) {
            /* The sender (alive a moment ago) stops the job at its own
             * stop_by; should it not, so does this rank. A lower rank is
             * left a second to do it, so that usually one rank aborts: Open
             * MPI garbles the notices of ranks aborting together. */
            double by = mt_time_now() + MT_MPI_STOP_GRACE_S + (c->from < m->rank ? 1.0 : 0.0);
            if (m->stop_by == 0 || (c->from < m->rank && by > m->stop_by)) m->stop_by = by;
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

void mt__mpi_ctl_poll(mt_mpi *m) {
    while (m->in_req != MPI_REQUEST_NULL) {
        int flag = 0;
        if (MPI_Test(&m->in_req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || !flag) return;
        ctl_msg c = m->in;
        if (post_receive(m) != MPI_SUCCESS) m->in_req = MPI_REQUEST_NULL;
        ctl_handle(m, &c);
    }
}

mt_status mt__mpi_ctl_open(mt_mpi *m) {
    int rc = post_receive(m);
    return rc == MPI_SUCCESS ? MT_OK : mt__mpi_error(rc, "MPI_Irecv");
}

void mt__mpi_ctl_close(mt_mpi *m) {
    mt__mpi_guard(m, "the end of the launch's control channel (its last sends)");
    if (m->in_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&m->in_req);
        MPI_Wait(&m->in_req, MPI_STATUS_IGNORE);
    }
    for (int i = 0; i < m->n_out; i++)
        if (m->out[i]->req != MPI_REQUEST_NULL) MPI_Wait(&m->out[i]->req, MPI_STATUS_IGNORE);
    mt__mpi_unguard();
}

/* ======================================================================== */
/* Waiting with a timeout                                                    */
/* ======================================================================== */

/* libnbc advances a collective only inside MPI_Test, so no sleeping early. */
void mt__mpi_backoff(const mt_mpi *m, long spins, double waited) {
    if (waited > 1.0) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    } else if (m->oversubscribed || spins > 20000) {
        sched_yield();
    }
}

/* Appends printf-style text to the string in buf[cap], as far as it fits. */
static void append(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

/* What a rank in `phase` is doing, for timeout messages. */
static const char *phase_text(int phase) {
    return phase == PHASE_COLLECTIVE ? "waiting in it"
         : phase == PHASE_FINISHED   ? "it has finished its device function"
                                     : "it is computing (between collectives)";
}

/* A record's text without its number: "psum over 'data' f32 16 bytes"
 * (devices that sent and received differently number the same collective
 * differently). */
static const char *op_text(const char *text) {
    const char *sp = text[0] == '#' ? strchr(text, ' ') : NULL;
    return sp ? sp + 1 : text;
}

void mt__mpi_ask(mt_mpi *m, const int *ranks, int n) {
    for (int r = 0; r < m->size; r++) m->replied[r] = false;
    ctl_msg q = ctl_make(m, CTL_QUERY);
    for (int i = 0; i < n; i++) {
        int r = ranks ? ranks[i] : i;
        if (r != m->rank) ctl_send(m, r, &q);
    }
    /* long enough for a rank that polls (is inside an MPI wait); short
     * enough that the job ends within a second of the timeout */
    const double answer_s = m->timeout_s / 4 < MT_MPI_ANSWER_S ? m->timeout_s / 4 : MT_MPI_ANSWER_S;
    const double t_end = mt_time_now() + answer_s;
    for (;;) {
        mt__mpi_ctl_poll(m);
        int missing = 0;
        for (int i = 0; i < n; i++) {
            int r = ranks ? ranks[i] : i;
            if (r != m->rank && !m->replied[r]) missing++;
        }
        if (!missing || mt_time_now() > t_end) break;
        sched_yield();
    }
}

void mt__mpi_peer_text(const mt_mpi *m, int r, char *buf, size_t cap) {
    if (r == m->rank) {
        snprintf(buf, cap, "device %d's last operation: %s; waiting in it", r,
                 mt__mpi_current_text(m, "none yet"));
    } else if (!m->replied[r]) {
        snprintf(buf, cap, "device %d did not answer (stuck outside meshtrain's communication, "
                 "or dead)", r);
    } else {
        const ctl_msg *c = &m->replies[r];
        snprintf(buf, cap, "device %d's last operation: %s; %s", r,
                 c->text[0] ? c->text : "none yet", phase_text(c->phase));
    }
}

mt_status mt__mpi_timed_out(mt_mpi *m, const char *msg, bool dangling, bool print) {
    if (dangling) mt__mpi_set_dangling(m);
    const bool first = !atomic_load(&m->ls->abort);
    mt__launch_fail(m->ls, m->rank, MT_ETIMEOUT, msg);
    if (print) {
        /* now, not at the end of the launch: a stopped rank never gets there.
         * One write, so that ranks timing out together do not interleave. */
        fprintf(stderr, "meshtrain: device %d: %s\n", m->rank, msg);
        fflush(stderr);
        snprintf(m->printed, sizeof m->printed, "%s", msg);
        if (first) m->failed_printed = true;
    }
    mt__mpi_ctl_notify_failure(m, MT_ETIMEOUT, msg);
    return mt_fail(MT_ETIMEOUT, "%s", msg);
}

void mt__mpi_say_signal(mt_mpi *m, const mt_group *g, const char *what, double waited) {
    const int sig = mt__launch_signal_take();
    if (!sig) return;
    char msg[1024];
    snprintf(msg, sizeof msg, "device %d: signal %d after %.3g s waiting in %s (a SIGTERM under "
             "mpirun: Open MPI is ending the job, usually because a rank died); the last "
             "collective each member completed with device %d:", m->rank, sig, waited, what,
             m->rank);
    const int P = g ? g->size : m->size;
    for (int i = 0; i < P; i++) {
        const int r = g ? g->members[i] : i;
        if (r == m->rank) continue;
        if (m->done_with[r])
            append(msg, sizeof msg, " device %d: device %d's #%llu;", r, m->rank,
                   (unsigned long long)m->done_with[r]);
        else
            append(msg, sizeof msg, " device %d: none in this launch;", r);
    }
    fprintf(stderr, "meshtrain: %s\n", msg);
    fflush(stderr);
}

/* A collective (g != NULL) or the end-of-launch exchange (g == NULL) timed
 * out: asks the others what they are doing (unless `asked` already), and
 * builds the message naming
 * the ranks that never arrived. Marks the launch failed (and doomed), prints
 * a collective's message at once, and tells everyone. */
static mt_status on_timeout(mt_mpi *m, const mt_group *g, const char *what, double waited,
                            bool asked) {
    const int P = g ? g->size : m->size;
    const mt_device_record *own = mt__mpi_own_record(m);
    const uint64_t my_coll = own ? atomic_load(&own->n_coll) : 0;
    if (!asked) mt__mpi_ask(m, g ? g->members : NULL, P);

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
            append(msg, sizeof msg, "%s device %d (did not answer: dead, stopped, unreachable "
                   "or stuck outside meshtrain's collectives; ", absent ? ";" : "", r);
            if (m->done_with[r])
                append(msg, sizeof msg, "the last collective it completed with device %d: "
                       "device %d's #%llu)", m->rank, m->rank,
                       (unsigned long long)m->done_with[r]);
            else
                append(msg, sizeof msg, "it completed no collective with device %d in this "
                       "launch)", m->rank);
            absent++;
            continue;
        }
        const ctl_msg *c = &m->replies[r];
        /* the same collective: as many collectives before it, the same op */
        bool arrived = g ? c->phase == PHASE_COLLECTIVE && c->n_coll == my_coll &&
                           strcmp(op_text(c->text), op_text(what)) == 0
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
    return mt__mpi_timed_out(m, msg, true, g != NULL);
}

void mt__mpi_note_done(mt_mpi *m, const mt_group *g) {
    const mt_device_record *own = mt__mpi_own_record(m);
    const uint64_t seq = own ? atomic_load(&own->seq) : 0;
    for (int i = 0; i < g->size; i++) m->done_with[g->members[i]] = seq;
}

/* Whether reqs complete within MT_MPI_SETTLE_S of testing. */
static bool settles(int n, MPI_Request *reqs) {
    const double t_end = mt_time_now() + MT_MPI_SETTLE_S;
    for (;;) {
        int done = 0;
        if (MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) return false;
        if (done) return true;
        if (mt_time_now() > t_end) return false;
        sched_yield();
    }
}

/* Whether the others are alive, by their answers to a query (mt__mpi_ask
 * just now): every one answered, or one answered from before the end of
 * its launch (inside a collective, about to time out there itself, or
 * still in its device function, about to come). */
static bool others_alive(const mt_mpi *m) {
    bool all = true;
    for (int r = 0; r < m->size; r++) {
        if (r == m->rank) continue;
        if (m->replied[r] && m->replies[r].phase != PHASE_FINISHED) return true;
        all &= m->replied[r];
    }
    return all;
}

mt_status mt__mpi_wait(mt_mpi *m, const mt_group *g, int n, MPI_Request *reqs, const char *what) {
    /* The end-of-launch exchange (g == NULL) asks the others at the timeout.
     * When they are alive (others_alive), it waits a second more (once): a
     * device still before its end times out in its own wait, which began
     * before this one, and its message names the device that skipped the
     * collective, which is what the user needs; one that answered from the
     * exchange is in it. A device may also not answer because the exchange
     * completed while this one asked, and it left the launch: so the
     * requests are tested again. (test_mpi on 3 ranks: a receive that times
     * out after 1 s races two peers that finished at once and wait here.)
     * When one does not answer (stopped, dead, cut off) there is no second:
     * the survivors must stop within the timeout and 2 s (test_hosts_faults;
     * a flat extra second put a survivor at 4.55 s of T = 2 when the peer
     * stopped just before this exchange). Once the launch is doomed
     * (m->stop_by), only until then: a rank that never comes must not keep
     * the job alive. */
    const double t0 = mt_time_now();
    double deadline = t0 + m->timeout_s;
    bool extended = false;
    const int saved_phase = m->phase;
    if (g) m->phase = PHASE_COLLECTIVE;
    for (long spins = 0;; spins++) {
        int done = 0;
        int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) {
            m->phase = saved_phase;
            mt__mpi_set_dangling(m);
            return mt__mpi_error(rc, what);
        }
        if (done) {
            m->phase = saved_phase;
            if (g && !m->in_steps) mt__mpi_note_done(m, g);
            return MT_OK;
        }
        /* not at once: a small collective is often done within the first
           tests, and a control poll costs as much as one */
        if ((spins & 15) == 15) {
            mt__mpi_ctl_poll(m);
            if (g && atomic_load(&m->ls->abort)) {
                m->phase = saved_phase;
                /* the failed device may have finished this collective
                   before failing, and the last messages of it be on their
                   way: left unfinished, it would doom the job */
                if (settles(n, reqs)) {
                    if (!m->in_steps) mt__mpi_note_done(m, g);
                    return MT_OK;
                }
                mt__mpi_set_dangling(m);
                return mt_fail(MT_EABORTED, "device %d stopped in %s: device %d failed: %s",
                               m->rank, what, m->ls->failed_device, m->ls->failed_msg);
            }
            double now = mt_time_now();
            mt__mpi_say_signal(m, g, what, now - t0);
            if (!g && m->stop_by > 0 && now > m->stop_by) {
                m->phase = saved_phase;
                mt__mpi_set_dangling(m);
                return mt_fail(MT_EABORTED, "device %d gave up waiting %.3g s for %s: a "
                               "collective was left unfinished, so the job is being stopped",
                               m->rank, now - t0, what);
            }
            if (now > deadline) {
                bool asked = false;
                if (!g && !extended) {
                    mt__mpi_ask(m, NULL, m->size);
                    asked = extended = true;
                    if (others_alive(m) || settles(n, reqs)) {
                        deadline = mt_time_now() + 1.0;
                        continue;
                    }
                }
                mt_status s = on_timeout(m, g, what, now - t0, asked);
                m->phase = saved_phase;
                return s;
            }
            mt__mpi_backoff(m, spins, now - t0);
        } else if (m->oversubscribed) {
            sched_yield();
        }
    }
}

#endif /* MT_HAVE_MPI */
