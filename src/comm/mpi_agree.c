/*
 * mpi_agree.c — the end of an MPI launch: every rank agrees on its outcome,
 * so all return the same; or, once a collective is left unfinished, the job
 * stops.
 *
 * The end of a launch. Every rank all-gathers (non-blocking, with the
 * timeout) its outcome: status, message, whether it left a collective
 * unfinished, whether it printed the message already, and how many
 * point-to-point messages it sent and received. When the sums agree every
 * message was received, and each rank only waits for its own sends; when
 * not (every rank sees it), the messages are counted per rank and those
 * never received drained (mpi_p2p.c), which is the failure of the rank
 * they were sent to, and the outcomes are exchanged once more. (Counting
 * them before every exchange cost a round trip between hosts every launch,
 * that is every training step.) All ranks pick
 * the same failure (a real error before a timeout before MT_EABORTED before
 * messages never received, which another failure usually explains, then the
 * lowest device) and return it. Failures that left nothing unfinished
 * (a device returning an error after its last collective, a bad mesh spec)
 * are returned as values on every rank. With a trace, the ranks then agree
 * on the trace's status the same way (only rank 0 writes the gathered file,
 * so only it can see that writing failed). Last, the control channel is
 * closed (mpi_ctl.c: its messages carry the launch's number, so one still on
 * its way is dropped by the next launch).
 *
 * A collective left unfinished. MPI cannot cancel a posted collective, so
 * when any rank left one unfinished, the MPI state is no longer usable and
 * the job is doomed: it ends with MPI_Abort (every rank, exit status 75,
 * MT_MPI_EXIT_LOST)
 * rather than leave one hanging. When the agreement completes, rank 0
 * prints the agreed message (unless its rank printed it already) and
 * aborts. But a rank that is stopped (SIGSTOP, a debugger) or stuck outside
 * MPI never joins the agreement, so nobody waits for it long:
 *   - a rank whose collective timed out printed its message when the
 *     timeout fired (mpi_ctl.c), after waiting at most MT_MPI_ANSWER_S for
 *     the answers to its query;
 *   - a rank that left a collective unfinished, or was told by one that did,
 *     waits in the agreement only until m->stop_by (MT_MPI_STOP_GRACE_S
 *     after it knew; a second more when a lower rank told it, so that one
 *     rank usually aborts, not all), then writes its trace, prints the
 *     first failure it knows unless that is on stderr already, and aborts
 *     the job itself (stop_doomed).
 * So a timeout ends the job within a second of firing, not after the
 * agreement's own timeout of 2·timeout + 1 s. When the end-of-launch
 * exchange itself times out or fails with nobody doomed before, the rank
 * that saw it prints and aborts. A rank that dies (segfault, exit(3)) is
 * noticed by mpirun, which kills the job; the timeout covers anything
 * mpirun does not catch.
 */
#ifdef MT_HAVE_MPI

#include "comm/mpi_impl.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* What this rank tells the others at the end. */
static mt_mpi_outcome make_outcome(const mt_mpi *m, mt_status st, const char *msg) {
    mt_mpi_outcome o;
    memset(&o, 0, sizeof o);
    o.status = st;
    o.device = m->rank;
    o.dangling = m->dangling;
    o.printed = m->printed[0] && strcmp(m->printed, msg) == 0;
    snprintf(o.msg, sizeof o.msg, "%s", msg);
    return o;
}

/* Every rank's `mine` into r->all, non-blocking with the timeout of the end
 * of the launch (mt__mpi_wait); MT_OK or the exchange's failure. */
static mt_status exchange(mt_mpi_run *r, const mt_mpi_outcome *mine) {
    MPI_Request req;
    int rc = MPI_Iallgather(mine, (int)sizeof *mine, MPI_BYTE, r->all, (int)sizeof *mine,
                            MPI_BYTE, r->m->ctl, &req);
    return rc == MPI_SUCCESS ? mt__mpi_wait(r->m, NULL, 1, &req, "the end of the launch")
                             : mt__mpi_error(rc, "MPI_Iallgather");
}

/* Index of the failure every rank reports: a real error first, then a
 * timeout, then MT_EABORTED, then messages never received (a rank may not
 * yet have heard of the failure that left them); the lowest device among
 * equals. -1: none. */
static int pick_failure(const mt_mpi_outcome *o, int n) {
    int best = -1, best_rank = 5;
    for (int i = 0; i < n; i++) {
        if (o[i].status == MT_OK) continue;
        int r = o[i].leftover ? 4 : o[i].status == MT_EABORTED ? 3
              : o[i].status == MT_ETIMEOUT ? 2 : 1;
        if (r < best_rank) best = i, best_rank = r;
    }
    return best;
}

/* Whether any rank left a collective unfinished. */
static bool any_dangling(const mt_mpi_outcome *o, int n) {
    bool dangling = false;
    for (int r = 0; r < n; r++) dangling |= o[r].dangling != 0;
    return dangling;
}

/* Writes this rank's trace (once; after a failure each rank writes its own
 * file, with no communication). */
static void write_trace(mt_mpi_run *r) {
    if (!r->ls->trace_path || r->traced) return;
    r->traced = true;
    mt__trace_write(r->ls, &r->ctx, 1);
}

/* The launch is doomed (a collective was left unfinished here, or on a rank
 * that told us) and the end-of-launch exchange gave up at m->stop_by:
 * writes the trace, prints the first failure this rank knows (unless its
 * rank printed it already) and ends the job. */
static _Noreturn void stop_doomed(mt_mpi_run *r) {
    mt_mpi *m = r->m;
    mt_launch_state *ls = r->ls;
    write_trace(r);
    /* every doomed rank that is alive gets here at about the same time: the
     * lowest goes first, and its MPI_Abort usually ends the others before
     * they print (Open MPI garbles concurrent aborts' notices) */
    const long stagger_ns = (m->rank < 5 ? m->rank : 5) * 20000000L;
    if (stagger_ns > 0) nanosleep(&(struct timespec){0, stagger_ns}, NULL);
    const bool known = ls->failed_device >= 0;
    const bool printed = m->failed_printed || (ls->failed_device == m->rank && m->printed[0] &&
                                               strcmp(m->printed, ls->failed_msg) == 0);
    if (!known) mt__mpi_stop(mt_errmsg());
    if (printed) mt__mpi_stop(NULL);
    mt__mpi_die("device %d: %s", ls->failed_device, ls->failed_msg);
}

/* Ends the job after an agreement that found a collective left unfinished:
 * rank 0 prints the agreed failure `f` (or `fallback` when none; nothing
 * when its rank printed it already) and aborts; the others wait for it. */
static _Noreturn void stop_agreed(mt_mpi_run *r, int f, const char *fallback) {
    mt__mpi_let_rank0_abort(r->m->rank);
    if (f >= 0 && r->all[f].printed) mt__mpi_stop(NULL);
    mt__mpi_stop(fallback);
}

/* An end-of-launch exchange failed (mt_errmsg says how): the ranks cannot
 * agree, so the job ends, with the failure that started it all (this
 * rank's first) printed first. */
static _Noreturn void stop_unagreed(mt_mpi_run *r) {
    mt_mpi *m = r->m;
    mt_launch_state *ls = r->ls;
    if (m->stop_by > 0) stop_doomed(r);
    if (ls->failed_device >= 0 && !m->failed_printed)
        mt__mpi_die("device %d: %s\nmeshtrain: then %s", ls->failed_device, ls->failed_msg,
                mt_errmsg());
    mt__mpi_die("%s", mt_errmsg());
}

/* Runs the device (or, when its set-up failed with `st`, fails it), settles
 * its point-to-point messages, then agrees with every rank on the launch's
 * outcome: the agreed failure becomes this rank's (ls->failed_*), and the
 * launch's result is returned with its message (mt__launch_result). Dies
 * when an exchange fails or any rank left a collective unfinished. */
mt_status mt__mpi_run_and_agree(mt_mpi_run *r, mt_status st, mt_device_fn fn, void *arg) {
    mt_mpi *m = r->m;
    mt_launch_state *ls = r->ls;
    /* a set-up failure reaches the others in the agreement */
    if (r->have_ctx) st = mt__device_run(r->ctx, fn, arg);
    else mt__launch_fail(ls, m->rank, st, mt_errmsg());
    mt_mpi_outcome mine = make_outcome(m, st, st == MT_OK ? "" : mt_errmsg());
    if (st != MT_OK && st != MT_EABORTED) mt__mpi_ctl_notify_failure(m, st, mine.msg);
    m->phase = PHASE_FINISHED;

    mt__mpi_p2p_totals(m, &mine.p2p_sent, &mine.p2p_received);
    if (exchange(r, &mine) != MT_OK) stop_unagreed(r);
    long sent = 0, received = 0;
    for (int i = 0; i < m->size; i++) sent += r->all[i].p2p_sent, received += r->all[i].p2p_received;
    if (sent == received) {
        /* every message sent was received: this rank's sends to see done */
        if (mt__mpi_p2p_sends_done(m) != MT_OK) stop_unagreed(r);
    } else {
        /* messages never received (every rank sees it): counted per rank
         * and drained, and they fail a launch that would have succeeded,
         * on the rank they were sent to; then agreed on once more */
        mt_status ps = mt__mpi_p2p_close(m, st == MT_OK);
        if (ps == MT_ESTATE && st == MT_OK) {
            mine = make_outcome(m, st = ps, mt_errmsg());
            mine.leftover = 1;
        } else if (ps != MT_OK) {
            stop_unagreed(r);
        }
        if (exchange(r, &mine) != MT_OK) stop_unagreed(r);
    }
    m->closing = true;
    int f = pick_failure(r->all, m->size);
    if (f >= 0) {
        /* every rank reports the agreed failure, whatever it saw first */
        atomic_store(&ls->fail_claimed, 1);
        ls->failed_device = r->all[f].device;
        ls->failed_status = r->all[f].status;
        snprintf(ls->failed_msg, sizeof ls->failed_msg, "%s", r->all[f].msg);
        atomic_store(&ls->abort, 1);   /* the trace writer then keeps per-rank files */
    }
    if (any_dangling(r->all, m->size)) {
        write_trace(r);
        mt__launch_result(ls);   /* the agreed failure's message, raised over the trace's */
        stop_agreed(r, f, mt_errmsg());
    }
    return mt__launch_result(ls);
}

/* Writes the trace and agrees with every rank on its status. Only rank 0
 * writes the gathered trace (and any rank may have had to write its own file
 * instead), so the ranks' trace statuses differ: agreeing on them as on the
 * launch's outcome keeps rank 0 alone from reporting a file it could not
 * write. Returns the index in r->all of the agreed trace failure, -1 none. */
int mt__mpi_trace_and_agree(mt_mpi_run *r) {
    mt_mpi *m = r->m;
    r->traced = true;
    mt_status ts = mt__trace_write(r->ls, &r->ctx, 1);
    /* its dangling flag: the trace's gathers are collectives too */
    mt_mpi_outcome mine = make_outcome(m, ts, ts == MT_OK ? "" : mt_errmsg());
    if (exchange(r, &mine) != MT_OK) {
        if (m->stop_by > 0) stop_doomed(r);
        mt__mpi_die("%s", mt_errmsg());
    }
    int f = pick_failure(r->all, m->size);
    if (any_dangling(r->all, m->size))
        stop_agreed(r, f, f >= 0 ? r->all[f].msg : "writing the trace left a collective unfinished");
    return f;
}

#endif /* MT_HAVE_MPI */
