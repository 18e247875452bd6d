/*
 * mpi_join.c — the start of an MPI launch: waiting until every rank has
 * called mt_launch, and when one never comes, naming it.
 *
 * A bad MT_COMM_TIMEOUT (or opts.timeout_s) fails mt_launch before this file
 * runs, so before MPI is touched (launch.c): mpirun gives every rank the
 * same environment (-x), so every rank fails alike without communicating. A
 * rank whose environment differs (a remote node's, without -x) fails alone,
 * and the others wait for it in join_world, bounded by their own timeout;
 * mpirun ends the job sooner when the failed rank's process exits non-zero.
 */
#ifdef MT_HAVE_MPI

#include "comm/mpi_impl.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Launches started by this process (forced global, as MPI's state is: the
 * ranks number their launches alike, and a note carries the number). */
static int32_t launches;

/* Rank 0, at the start of launch `launch`, gave up waiting: asks every rank
 * whose note came (notes_in[r]) whether it is still waiting there too, and
 * returns, in buf, the ranks that did not answer within MT_MPI_ANSWER_S
 * (a rank stopped or cut off after it sent its note); their count. */
static int join_ask(const mt_mpi *m, int32_t launch, const bool *notes_in, char *buf, size_t cap) {
    const MPI_Comm join = mt__mpi_join_comm();
    int32_t *answers = calloc((size_t)m->size, sizeof *answers);   /* (size) */
    MPI_Request *reqs = calloc((size_t)2 * (size_t)m->size, sizeof *reqs);   /* (2·size) */
    int n = 0;
    buf[0] = 0;
    if (!answers || !reqs) {
        free(answers), free(reqs);
        return 0;
    }
    for (int r = 0; r < 2 * m->size; r++) reqs[r] = MPI_REQUEST_NULL;
    for (int r = 1; r < m->size; r++) {
        if (!notes_in[r]) continue;
        MPI_Isend(&launch, 1, MPI_INT32_T, r, TAG_JOIN_ASK, join, &reqs[r]);
        MPI_Irecv(&answers[r], 1, MPI_INT32_T, r, TAG_JOIN_ANSWER, join, &reqs[m->size + r]);
    }
    for (const double t_end = mt_time_now() + MT_MPI_ANSWER_S; mt_time_now() < t_end;) {
        int done = 0;
        MPI_Testall(m->size, reqs + m->size, &done, MPI_STATUSES_IGNORE);
        if (done) break;
        sched_yield();
    }
    for (int r = 1; r < m->size; r++) {
        int got = 0;
        if (notes_in[r]) MPI_Test(&reqs[m->size + r], &got, MPI_STATUS_IGNORE);
        if (!notes_in[r] || got) continue;
        size_t len = strlen(buf);
        if (len + 16 < cap) snprintf(buf + len, cap - len, "%s%d", n ? ", " : "", r);
        n++;
    }
    /* the requests are left posted: the job ends now */
    free(answers), free(reqs);
    return n;
}

/* Rank 0 at the start of a launch: the ranks whose note has not come
 * (note_reqs[r] unfinished), listed "1, 3" into buf; their count. With
 * notes_in, whether each one's came. */
static int never_arrived(const mt_mpi *m, MPI_Request *note_reqs, bool *notes_in, char *buf,
                         size_t cap) {
    int n = 0;
    buf[0] = 0;
    for (int r = 1; r < m->size; r++) {
        int got = 0;
        if (note_reqs[r] != MPI_REQUEST_NULL) MPI_Test(&note_reqs[r], &got, MPI_STATUS_IGNORE);
        if (notes_in) notes_in[r] = got;
        if (got) continue;
        size_t len = strlen(buf);
        if (len + 16 < cap) snprintf(buf + len, cap - len, "%s%d", n ? ", " : "", r);
        n++;
    }
    return n;
}

/* A rank other than 0 at the start of launch `launch`: whether rank 0's
 * question (*ask_req, join_ask) has just come; then it is answered. */
static bool join_answer(int32_t launch, MPI_Request *ask_req) {
    int done = 0;
    if (*ask_req == MPI_REQUEST_NULL ||
        MPI_Test(ask_req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done)
        return false;
    const MPI_Comm join = mt__mpi_join_comm();
    MPI_Request answer;   /* rank 0 is about to end the job: not waited for */
    MPI_Isend(&launch, 1, MPI_INT32_T, 0, TAG_JOIN_ANSWER, join, &answer);
    MPI_Request_free(&answer);
    return true;
}

/* mt_launch_signal reported signal `sig` while this rank waited `waited` s
 * at the start of launch `launch`: says so (rank 0 naming the ranks that
 * never arrived), asking nobody. */
static void join_signal(const mt_mpi *m, int32_t launch, MPI_Request *note_reqs, int sig,
                        double waited) {
    if (m->rank == 0 && note_reqs) {
        char never[512];
        int n = never_arrived(m, note_reqs, NULL, never, sizeof never);
        fprintf(stderr, "meshtrain: device 0: signal %d after %.3g s at the start of launch %d "
                "(a SIGTERM under mpirun: Open MPI is ending the job, usually because a rank "
                "died): %s%s\n", sig, waited, launch,
                n ? "never arrived: device " : "every rank had arrived", never);
    } else {
        fprintf(stderr, "meshtrain: device %d: signal %d after %.3g s at the start of launch %d, "
                "waiting for every rank to arrive (device 0 names the missing ones)\n", m->rank,
                sig, waited, launch);
    }
    fflush(stderr);
}

/* Waits until every rank has called mt_launch: a non-blocking barrier on
 * the join communicator (mt__mpi_join_comm) waited on with the timeout
 * (there is no control channel yet). Meanwhile every other rank sends rank 0
 * a note on it (the number of its launch) and answers rank 0's question whether it is still waiting
 * here, so that when the start does not complete, rank 0 names the ranks
 * that never came or no longer answer: a rank missing at the start of a
 * launch finished the launch before with every rank (its end is an
 * agreement), so it died, was stopped or lost its network since. Dies then
 * (the other ranks a moment later, so that rank 0's message is printed). */
void mt__mpi_join_world(mt_mpi *m) {
    const MPI_Comm join = mt__mpi_join_comm();
    MPI_Request req, note_req = MPI_REQUEST_NULL, ask_req = MPI_REQUEST_NULL;
    const int32_t launch = m->launch = ++launches;
    int32_t asked = 0;                     /* other ranks: rank 0's question */
    int32_t *notes = NULL;                 /* (size) rank 0: each rank's launch number */
    MPI_Request *note_reqs = NULL;         /* (size) rank 0: their receives */
    if (m->rank == 0) {
        notes = calloc((size_t)m->size, sizeof *notes);
        note_reqs = calloc((size_t)m->size, sizeof *note_reqs);
        for (int r = 0; r < m->size && notes && note_reqs; r++)
            if (r == 0 || MPI_Irecv(&notes[r], 1, MPI_INT32_T, r, TAG_JOIN, mt__mpi_join_comm(),
                                    &note_reqs[r]) != MPI_SUCCESS)
                note_reqs[r] = MPI_REQUEST_NULL;
    } else {
        MPI_Isend(&launch, 1, MPI_INT32_T, 0, TAG_JOIN, join, &note_req);
        MPI_Irecv(&asked, 1, MPI_INT32_T, 0, TAG_JOIN_ASK, join, &ask_req);
    }
    int rc = MPI_Ibarrier(join, &req);
    if (rc != MPI_SUCCESS) {
        mt__mpi_error(rc, "MPI_Ibarrier");
        mt__mpi_die("%s", mt_errmsg());
    }
    bool was_asked = false;   /* rank 0's question came */
    for (double t0 = mt_time_now();;) {
        int done = 0;
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (done) break;
        if (join_answer(launch, &ask_req)) was_asked = true;
        double waited = mt_time_now() - t0;
        const int sig = mt__launch_signal_take();
        if (sig) join_signal(m, launch, note_reqs, sig, waited);
        if (waited > m->timeout_s) {
            /* rank 0, when it is there, asks the others before it names the
             * missing ones; no question within a second: it is the one lost
             * (unless the start completes meanwhile: it came late) */
            const double t_ask = mt_time_now() + 1.0;
            while (m->rank != 0 && !was_asked && !done && mt_time_now() < t_ask) {
                if (join_answer(launch, &ask_req)) was_asked = true;
                else nanosleep(&(struct timespec){0, 1000000L}, NULL);
                MPI_Test(&req, &done, MPI_STATUS_IGNORE);
            }
            if (done) break;
            if (m->rank != 0 && !was_asked)
                mt__mpi_die("device %d: launch %d did not start within %.3g s, "
                        "and device 0, which names the missing ranks, did not ask for a second "
                        "more: device 0 is lost (it finished launch %d with every device and since "
                        "then died, was stopped or lost its network, or it is stuck outside "
                        "meshtrain; MT_COMM_TIMEOUT). Resume from the last checkpoint on the "
                        "devices left", m->rank, launch, m->timeout_s, launch - 1);
            if (m->rank != 0 || !note_reqs) {
                nanosleep(&(struct timespec){0, 700000000L}, NULL);   /* rank 0 names them */
                mt__mpi_die("device %d: launch %d did not start within %.3g s: not every one of "
                        "the %d ranks called mt_launch (device 0 names the missing ones; "
                        "MT_COMM_TIMEOUT)", m->rank, launch, m->timeout_s, m->size);
            }
            char never[512] = "", silent[512] = "";
            bool *notes_in = calloc((size_t)m->size, sizeof *notes_in);   /* (size) */
            int n_never = notes_in ? never_arrived(m, note_reqs, notes_in, never, sizeof never) : 0;
            int n_silent = notes_in ? join_ask(m, launch, notes_in, silent, sizeof silent) : 0;
            free(notes_in);
            if (n_never + n_silent > 0)
                mt__mpi_die("device 0: launch %d (under train, a step) did not start within %.3g s: "
                        "%s%s%s%s%s%s. Each finished launch %d with every device (its last "
                        "collective, that launch's closing agreement) and since then died, was "
                        "stopped or lost its network; device 0 waits at the start of launch %d "
                        "(MT_COMM_TIMEOUT). Resume from the last checkpoint on the devices left",
                        launch, m->timeout_s, n_never ? "never arrived: device " : "", never,
                        n_never && n_silent ? "; " : "",
                        n_silent ? "arrived, then stopped answering: device " : "", silent, "",
                        launch - 1, launch);
            mt__mpi_die("device 0: launch %d did not start within %.3g s, though every rank "
                    "arrived and answers (a stalled network?; MT_COMM_TIMEOUT)",
                    launch, m->timeout_s);
        }
        mt__mpi_backoff(m, 100000, waited);
    }
    /* every rank is here, so every note has come (or is on its way) */
    if (note_reqs) MPI_Waitall(m->size, note_reqs, MPI_STATUSES_IGNORE);
    free(notes), free(note_reqs);
    MPI_Wait(&note_req, MPI_STATUS_IGNORE);
    if (ask_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&ask_req);
        MPI_Wait(&ask_req, MPI_STATUS_IGNORE);
    }
}

#endif /* MT_HAVE_MPI */
