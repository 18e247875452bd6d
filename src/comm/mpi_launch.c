/*
 * mpi_launch.c — the MPI transport's launch: every rank calls mt_launch;
 * this starts MPI if nobody has, builds this rank's device (device id =
 * world rank), runs the device function, and makes every rank return the
 * same result.
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
 *
 * A bad MT_COMM_TIMEOUT (or opts.timeout_s) fails mt_launch before this file
 * runs, so before MPI is touched (launch.c): mpirun gives every rank the
 * same environment (-x), so every rank fails alike without communicating. A
 * rank whose environment differs (a remote node's, without -x) fails alone,
 * and the others wait for it in join_world, bounded by their own timeout;
 * mpirun ends the job sooner when the failed rank's process exits non-zero.
 *
 * Global state (forced by MPI, which is initialised once per process and
 * finalised once): whether meshtrain initialised MPI (then it finalises it
 * at exit, not at the end of a launch, so that a process can launch again),
 * and whether a launch is running (an exit() in the middle of one must not
 * finalise: finalising would wait for ranks that are waiting for us, while
 * exiting without it makes mpirun end the job).
 */
#ifdef MT_HAVE_MPI

#include "base/base_impl.h"
#include "comm/mpi_impl.h"

#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool        mpi_we_initialised;   /* see the file comment */
static atomic_bool mpi_launch_running;
static MPI_Comm    mpi_join = MPI_COMM_NULL; /* the notes of join_world (a dup of the world) */
static int32_t     mpi_launches;         /* launches started by this process */
static int         mpi_machine_ranks;    /* local_ranks' answer, once (0: not yet) ... */
static int         mpi_machine_cpus;     /* ... and the CPUs they share */

/* What each rank contributes to the end-of-launch agreement. */
typedef struct {
    int32_t status, device, dangling, printed;   /* printed: msg is on stderr already */
    int32_t leftover;                            /* the failure is messages never received */
    int32_t p2p_sent, p2p_received;              /* point-to-point messages, in all */
    char    msg[1004];
} outcome;

/* One launch on this rank: the transport's state (whose ls and ctx are the
 * ones below) and what only the launch uses. */
typedef struct {
    mt_mpi          *m;
    mt_launch_state *ls;
    mt_ctx          *ctx;        /* this rank's device */
    bool             have_ctx;   /* ctx was set up (mt__ctx_init) */
    bool             traced;     /* mt__trace_write was called */
    bool             keep;       /* ended cleanly: its communicators go to the next launch */
    mt_mesh         *mesh;
    outcome         *all;        /* (size) every rank's outcome, after an exchange */
} mpi_run;

/* ======================================================================== */
/* Starting MPI, and stopping every rank                                     */
/* ======================================================================== */

static void mpi_at_exit(void) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized || atomic_load(&mpi_launch_running)) return;
    mt__mpi_comms_drop_kept();
    MPI_Finalize();
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
         * blocking call at every size measured (2026-11-29, 2-core Zen 5 dev
         * VM, Open MPI 4.1); its ring is on a par. MCA parameters are read at
         * initialisation, and a user's setting wins. */
        setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
        int provided = 0;
        int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
        if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Init_thread");
        mpi_we_initialised = true;
        atexit(mpi_at_exit);
        /* A rank whose peer died writes to a closed TCP connection: with
         * SIGPIPE at its default it died of it at once, with no message and
         * mpirun's status 141 instead of the lost rank's (test_hosts_faults'
         * kill case, 1 run in about 25 on 2026-12-04). Ignored, the write
         * fails (EPIPE) and the lost peer is reported as any other. Only in
         * a process whose MPI meshtrain started, and only from the default:
         * a program's own MPI and its own handler are left alone. */
        struct sigaction old;
        if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL)
            signal(SIGPIPE, SIG_IGN);
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
    /* blocking, once: every rank makes it in its first launch */
    if (mpi_join == MPI_COMM_NULL) {
        int rc = MPI_Comm_dup(MPI_COMM_WORLD, &mpi_join);
        if (rc != MPI_SUCCESS) return mt__mpi_error(rc, "MPI_Comm_dup");
    }
    return MT_OK;
}

/* What identifies this rank's machine: its kernel's boot id (one per booted
 * kernel, shared by every namespace and container on it) and its CPU count;
 * the processor name (the hostname) where /proc has no boot id. Hostnames
 * will not do: namespaces or containers on one machine (tests/hosts.sh) have
 * hostnames of their own and still share its cores. */
typedef struct {
    char text[120];
} machine_key;

static machine_key this_machine(void) {
    machine_key k;
    memset(&k, 0, sizeof k);
    char id[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(id, sizeof id, f)) id[0] = 0;
        fclose(f);
        id[strcspn(id, "\n")] = 0;
    }
    if (!id[0]) {
        int len = 0;
        char name[MPI_MAX_PROCESSOR_NAME];
        if (MPI_Get_processor_name(name, &len) == MPI_SUCCESS)
            snprintf(id, sizeof id, "host %.*s", len, name);
    }
    snprintf(k.text, sizeof k.text, "%s cpus %ld", id, sysconf(_SC_NPROCESSORS_CONF));
    return k;
}

/* Ranks sharing this machine, and the CPUs they may run on together (the
 * union of their affinity masks: bound one to a core, or all on a machine's
 * cpuset), to size kernel threads and the waiting policy. The ranks are
 * counted by machine (this_machine, all-gathered), not by MPI's "node"
 * (MPI_COMM_TYPE_SHARED: a hostname), so that ranks in namespaces of one
 * machine see that they share its cores and yield instead of spinning (4
 * ranks on 2 namespace hosts sharing 2 cores: 15.5-17.4 ms a step spinning,
 * see docs/multinode.md). Collective over world; on a failure of MPI, this
 * rank counts alone. */
static int local_ranks(MPI_Comm world, int *node_cpus) {
    int size = 1, rank = 0, n = 1;
    MPI_Comm_size(world, &size);
    MPI_Comm_rank(world, &rank);
    unsigned char mine[MT_CPU_SET_BYTES], all[MT_CPU_SET_BYTES];
    *node_cpus = mt__cpu_set(mine);
    machine_key key = this_machine();
    machine_key *keys = calloc((size_t)size, sizeof *keys);   /* (size) every rank's */
    if (!keys || MPI_Allgather(&key, (int)sizeof key, MPI_BYTE, keys, (int)sizeof key, MPI_BYTE,
                               world) != MPI_SUCCESS) {
        free(keys);
        return 1;
    }
    /* a machine's colour is its lowest rank; the count, its ranks */
    int color = rank;
    for (int r = 0; r < size; r++)
        if (strcmp(keys[r].text, key.text) == 0) {
            color = r;
            break;
        }
    n = 0;
    for (int r = 0; r < size; r++) n += strcmp(keys[r].text, key.text) == 0;
    free(keys);
    MPI_Comm machine;
    if (MPI_Comm_split(world, color, rank, &machine) == MPI_SUCCESS) {
        if (MPI_Allreduce(mine, all, MT_CPU_SET_BYTES, MPI_BYTE, MPI_BOR, machine) == MPI_SUCCESS) {
            int count = 0;
            for (int i = 0; i < MT_CPU_SET_BYTES; i++) count += __builtin_popcount(all[i]);
            if (count > 0) *node_cpus = count;
        }
        MPI_Comm_free(&machine);
    }
    return n;
}


/* Prints the failure `msg` (NULL: it is on stderr already) and ends every
 * rank: a collective was left unfinished somewhere, and MPI cannot cancel
 * it. The text goes out in one write, so that ranks dying together do not
 * interleave their lines. */
static _Noreturn void mpi_stop(const char *msg) {
    fprintf(stderr, "%s%s%smeshtrain: a collective was left unfinished and MPI cannot cancel it: "
            "stopping every rank (MPI_Abort)\n", msg ? "meshtrain: " : "", msg ? msg : "",
            msg ? "\n" : "");
    fflush(stderr);
    /* Open MPI ends an aborted job with SIGTERM, then SIGKILL a second
     * later: a handler that stops after the step (meshtrain train's) would
     * keep this rank alive for that second, past the bound a lost rank's
     * survivors stop in (test_hosts_faults: T + 2 s). The job is ending. */
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    MPI_Abort(MPI_COMM_WORLD, MT_MPI_EXIT_LOST);
    _exit(MT_MPI_EXIT_LOST);
}

/* mpi_stop with a printf-style message. */
static _Noreturn void mpi_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void mpi_die(const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mpi_stop(msg);
}

/* Before dying on an agreed failure: rank 0 prints it and aborts the job,
 * so the other ranks give it time to (their own abort is only a fallback). */
static void let_rank0_abort(int rank) {
    if (rank != 0) {
        struct timespec nap = {10, 0};
        nanosleep(&nap, NULL);
    }
}

/* ======================================================================== */
/* The launch's state                                                        */
/* ======================================================================== */

/* Frees what launch_new made (any part of it may be missing). */
static void launch_free(mpi_run *r) {
    if (r->have_ctx) mt__ctx_free(r->ctx);
    mt_mpi *m = r->m;
    if (m) {
        if (r->keep) mt__mpi_comms_keep(m);
        else mt__mpi_free_comms(m);
        mt__mpi_reductions_free(m);
        mt__mpi_p2p_free(m);
        for (int i = 0; i < m->n_out; i++) free(m->out[i]);
        free(m->out), free(m->replies), free(m->replied), free(m->scratch);
        free(m->done_with);
        free(m);
    }
    free(r->ctx);
    free(r->all);
    if (r->ls) mt__launch_state_free(r->ls);
    free(r->ls);
    mt_mesh_free(r->mesh);
}

/* The launch's state on this rank of `size`: the transport's (no
 * communicator yet), the launch state and an empty ctx. Owns `mesh` from
 * here on, also when it fails. */
static mt_status launch_new(mpi_run *r, const mt_launch_opts *opts, mt_mesh *mesh, int rank,
                            int size) {
    memset(r, 0, sizeof *r);
    r->mesh = mesh;
    r->ls = calloc(1, sizeof *r->ls);
    r->ctx = calloc(1, sizeof *r->ctx);
    r->all = calloc((size_t)size, sizeof *r->all);
    mt_mpi *m = r->m = calloc(1, sizeof *m);
    if (m) {
        /* MPI's null handles first: launch_free may see them */
        m->world = m->ctl = m->p2p = MPI_COMM_NULL;
        m->in_req = MPI_REQUEST_NULL;
        for (int i = 0; i < SET_COMMS; i++) m->set_comm[i] = MPI_COMM_NULL;
        m->fmax = m->fmin = MPI_OP_NULL;
        m->replies = calloc((size_t)size, sizeof *m->replies);
        m->replied = calloc((size_t)size, sizeof *m->replied);
        m->done_with = calloc((size_t)size, sizeof *m->done_with);
    }
    if (!m || !r->ls || !r->ctx || !r->all || !m->replies || !m->replied ||
        !m->done_with) {
        launch_free(r);
        /* the other ranks then time out in their first collective */
        return mt_fail(MT_ENOMEM, "cannot allocate the launch state of rank %d", rank);
    }
    /* its failures (a bad timeout, out of memory) come with their message */
    mt_status s = mt__launch_state_init(r->ls, opts, mesh, &mt__mpi_transport, 1, rank, size);
    if (s != MT_OK) {
        launch_free(r);
        return s;
    }
    m->rank = rank;
    m->size = size;
    if ((s = mt__mpi_p2p_new(m, mesh)) != MT_OK) {
        launch_free(r);
        return s;
    }
    m->timeout_s = r->ls->timeout_s;
    mt__mpi_reductions_create(m);
    m->ls = r->ls;
    m->ctx = r->ctx;
    r->ls->transport = m;
    return MT_OK;
}

/* ======================================================================== */
/* The steps of a launch                                                     */
/* ======================================================================== */

/* Rank 0, at the start of launch `launch`, gave up waiting: asks every rank
 * whose note came (notes_in[r]) whether it is still waiting there too, and
 * returns, in buf, the ranks that did not answer within MT_MPI_ANSWER_S
 * (a rank stopped or cut off after it sent its note); their count. */
static int join_ask(const mt_mpi *m, int32_t launch, const bool *notes_in, char *buf, size_t cap) {
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
        MPI_Isend(&launch, 1, MPI_INT32_T, r, TAG_JOIN_ASK, mpi_join, &reqs[r]);
        MPI_Irecv(&answers[r], 1, MPI_INT32_T, r, TAG_JOIN_ANSWER, mpi_join, &reqs[m->size + r]);
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
    MPI_Request answer;   /* rank 0 is about to end the job: not waited for */
    MPI_Isend(&launch, 1, MPI_INT32_T, 0, TAG_JOIN_ANSWER, mpi_join, &answer);
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
 * mpi_join waited on with the timeout (there is no control channel yet).
 * Meanwhile every other rank sends rank 0 a note on mpi_join (the number of
 * its launch) and answers rank 0's question whether it is still waiting
 * here, so that when the start does not complete, rank 0 names the ranks
 * that never came or no longer answer: a rank missing at the start of a
 * launch finished the launch before with every rank (its end is an
 * agreement), so it died, was stopped or lost its network since. Dies then
 * (the other ranks a moment later, so that rank 0's message is printed). */
static void join_world(mt_mpi *m) {
    MPI_Request req, note_req = MPI_REQUEST_NULL, ask_req = MPI_REQUEST_NULL;
    const int32_t launch = m->launch = ++mpi_launches;
    int32_t asked = 0;                     /* other ranks: rank 0's question */
    int32_t *notes = NULL;                 /* (size) rank 0: each rank's launch number */
    MPI_Request *note_reqs = NULL;         /* (size) rank 0: their receives */
    if (m->rank == 0) {
        notes = calloc((size_t)m->size, sizeof *notes);
        note_reqs = calloc((size_t)m->size, sizeof *note_reqs);
        for (int r = 0; r < m->size && notes && note_reqs; r++)
            if (r == 0 || MPI_Irecv(&notes[r], 1, MPI_INT32_T, r, TAG_JOIN, mpi_join,
                                    &note_reqs[r]) != MPI_SUCCESS)
                note_reqs[r] = MPI_REQUEST_NULL;
    } else {
        MPI_Isend(&launch, 1, MPI_INT32_T, 0, TAG_JOIN, mpi_join, &note_req);
        MPI_Irecv(&asked, 1, MPI_INT32_T, 0, TAG_JOIN_ASK, mpi_join, &ask_req);
    }
    int rc = MPI_Ibarrier(mpi_join, &req);
    if (rc != MPI_SUCCESS) {
        mt__mpi_error(rc, "MPI_Ibarrier");
        mpi_die("%s", mt_errmsg());
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
                mpi_die("device %d: launch %d did not start within %.3g s, "
                        "and device 0, which names the missing ranks, did not ask for a second "
                        "more: device 0 is lost (it finished launch %d with every device and since "
                        "then died, was stopped or lost its network, or it is stuck outside "
                        "meshtrain; MT_COMM_TIMEOUT). Resume from the last checkpoint on the "
                        "devices left", m->rank, launch, m->timeout_s, launch - 1);
            if (m->rank != 0 || !note_reqs) {
                nanosleep(&(struct timespec){0, 700000000L}, NULL);   /* rank 0 names them */
                mpi_die("device %d: launch %d did not start within %.3g s: not every one of "
                        "the %d ranks called mt_launch (device 0 names the missing ones; "
                        "MT_COMM_TIMEOUT)", m->rank, launch, m->timeout_s, m->size);
            }
            char never[512] = "", silent[512] = "";
            bool *notes_in = calloc((size_t)m->size, sizeof *notes_in);   /* (size) */
            int n_never = notes_in ? never_arrived(m, note_reqs, notes_in, never, sizeof never) : 0;
            int n_silent = notes_in ? join_ask(m, launch, notes_in, silent, sizeof silent) : 0;
            free(notes_in);
            if (n_never + n_silent > 0)
                mpi_die("device 0: launch %d (under train, a step) did not start within %.3g s: "
                        "%s%s%s%s%s%s. Each finished launch %d with every device (its last "
                        "collective, that launch's closing agreement) and since then died, was "
                        "stopped or lost its network; device 0 waits at the start of launch %d "
                        "(MT_COMM_TIMEOUT). Resume from the last checkpoint on the devices left",
                        launch, m->timeout_s, n_never ? "never arrived: device " : "", never,
                        n_never && n_silent ? "; " : "",
                        n_silent ? "arrived, then stopped answering: device " : "", silent, "",
                        launch - 1, launch);
            mpi_die("device 0: launch %d did not start within %.3g s, though every rank "
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

/* Makes the launch's world, control channel's communicator and the
 * machine's rank count (the first launch; the next ones reuse them). */
static mt_status make_world(mt_mpi *m) {
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &m->world);
    if (rc != MPI_SUCCESS) {
        m->world = MPI_COMM_NULL;
        return mt__mpi_error(rc, "MPI_Comm_dup");
    }
    MPI_Comm_set_errhandler(m->world, MPI_ERRORS_RETURN);
    if (mpi_machine_ranks == 0) mpi_machine_ranks = local_ranks(m->world, &mpi_machine_cpus);
    rc = MPI_Comm_dup(m->world, &m->ctl);
    if (rc != MPI_SUCCESS) {
        m->ctl = MPI_COMM_NULL;
        return mt__mpi_error(rc, "MPI_Comm_dup");
    }
    return MT_OK;
}

/* Once every rank is here: the communicators (kept from the last launch,
 * mpi_comms.c, or made), the CPUs this machine's ranks share, the control
 * channel, the trace clock and this rank's device. The set-up is blocking,
 * but every rank is inside it. */
static mt_status set_up(mpi_run *r, const mt_launch_opts *opts) {
    mt_mpi *m = r->m;
    mt_launch_state *ls = r->ls;
    mt_status s = mt__mpi_comms_reuse(m) ? MT_OK : make_world(m);
    ls->n_cores = mpi_machine_cpus > 0 ? mpi_machine_cpus : 1;
    const int nlocal = mpi_machine_ranks > 0 ? mpi_machine_ranks : 1;
    m->oversubscribed = nlocal > ls->n_cores;
    ls->may_spin = !m->oversubscribed;
    ls->kernel_threads = mt__launch_kernel_threads(opts, ls->n_cores, nlocal);
    if (s == MT_OK) s = mt__mpi_make_set_comms(m);
    if (s == MT_OK) s = mt__mpi_ctl_open(m);
    if (s == MT_OK) s = mt__mpi_p2p_open(m);
    /* Trace times count from here, not from the call to mt_launch: every rank
     * has just left the same barrier (join_world waited for the last; the
     * first launch's set-up collectives too), so the ranks' tracks line up
     * however late each one entered mt_launch. mt__ctx_init copies it to the
     * ctx. */
    ls->t_start = mt_time_now();
    if (s == MT_OK && (s = mt__ctx_init(r->ctx, ls, m->rank)) == MT_OK) {
        r->have_ctx = true;
        r->ctx->transport = m;
    }
    return s;
}

/* What this rank tells the others at the end. */
static outcome make_outcome(const mt_mpi *m, mt_status st, const char *msg) {
    outcome o;
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
static mt_status exchange(mpi_run *r, const outcome *mine) {
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
static int pick_failure(const outcome *o, int n) {
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
static bool any_dangling(const outcome *o, int n) {
    bool dangling = false;
    for (int r = 0; r < n; r++) dangling |= o[r].dangling != 0;
    return dangling;
}

/* Writes this rank's trace (once; after a failure each rank writes its own
 * file, with no communication). */
static void write_trace(mpi_run *r) {
    if (!r->ls->trace_path || r->traced) return;
    r->traced = true;
    mt__trace_write(r->ls, &r->ctx, 1);
}

/* The launch is doomed (a collective was left unfinished here, or on a rank
 * that told us) and the end-of-launch exchange gave up at m->stop_by:
 * writes the trace, prints the first failure this rank knows (unless its
 * rank printed it already) and ends the job. */
static _Noreturn void stop_doomed(mpi_run *r) {
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
    if (!known) mpi_stop(mt_errmsg());
    if (printed) mpi_stop(NULL);
    mpi_die("device %d: %s", ls->failed_device, ls->failed_msg);
}

/* Ends the job after an agreement that found a collective left unfinished:
 * rank 0 prints the agreed failure `f` (or `fallback` when none; nothing
 * when its rank printed it already) and aborts; the others wait for it. */
static _Noreturn void stop_agreed(mpi_run *r, int f, const char *fallback) {
    let_rank0_abort(r->m->rank);
    if (f >= 0 && r->all[f].printed) mpi_stop(NULL);
    mpi_stop(fallback);
}

/* An end-of-launch exchange failed (mt_errmsg says how): the ranks cannot
 * agree, so the job ends, with the failure that started it all (this
 * rank's first) printed first. */
static _Noreturn void stop_unagreed(mpi_run *r) {
    mt_mpi *m = r->m;
    mt_launch_state *ls = r->ls;
    if (m->stop_by > 0) stop_doomed(r);
    if (ls->failed_device >= 0 && !m->failed_printed)
        mpi_die("device %d: %s\nmeshtrain: then %s", ls->failed_device, ls->failed_msg,
                mt_errmsg());
    mpi_die("%s", mt_errmsg());
}

/* Runs the device (or, when its set-up failed with `st`, fails it), settles
 * its point-to-point messages, then agrees with every rank on the launch's
 * outcome: the agreed failure becomes this rank's (ls->failed_*), and the
 * launch's result is returned with its message (mt__launch_result). Dies
 * when an exchange fails or any rank left a collective unfinished. */
static mt_status run_and_agree(mpi_run *r, mt_status st, mt_device_fn fn, void *arg) {
    mt_mpi *m = r->m;
    mt_launch_state *ls = r->ls;
    /* a set-up failure reaches the others in the agreement */
    if (r->have_ctx) st = mt__device_run(r->ctx, fn, arg);
    else mt__launch_fail(ls, m->rank, st, mt_errmsg());
    outcome mine = make_outcome(m, st, st == MT_OK ? "" : mt_errmsg());
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
static int trace_and_agree(mpi_run *r) {
    mt_mpi *m = r->m;
    r->traced = true;
    mt_status ts = mt__trace_write(r->ls, &r->ctx, 1);
    /* its dangling flag: the trace's gathers are collectives too */
    outcome mine = make_outcome(m, ts, ts == MT_OK ? "" : mt_errmsg());
    if (exchange(r, &mine) != MT_OK) {
        if (m->stop_by > 0) stop_doomed(r);
        mpi_die("%s", mt_errmsg());
    }
    int f = pick_failure(r->all, m->size);
    if (any_dangling(r->all, m->size))
        stop_agreed(r, f, f >= 0 ? r->all[f].msg : "writing the trace left a collective unfinished");
    return f;
}

/* ======================================================================== */
/* The launch                                                                */
/* ======================================================================== */

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
    if (s != MT_OK)
        return mt_fail(s, "%s (under MPI the mesh has one device per rank: mpirun started %d)",
                       mt_errmsg(), size);

    mpi_run r;
    if ((s = launch_new(&r, opts, mesh, rank, size)) != MT_OK) return s;
    atomic_store(&mpi_launch_running, true);
    join_world(r.m);
    mt__mpi_guard(r.m, "the launch's set-up (its communicators: MPI_Comm_split, MPI_Comm_dup)");
    mt_status set = set_up(&r, opts);
    mt__mpi_unguard();
    mt_status result = run_and_agree(&r, set, fn, arg);
    const bool launch_failed = result != MT_OK;
    /* a launch that succeeded returns the trace's status */
    int trace_failed = r.ls->trace_path ? trace_and_agree(&r) : -1;
    mt__mpi_ctl_close(r.m);
    /* nothing is left on the communicators: the next launch takes them */
    r.keep = set == MT_OK;

    /* the result with its message, raised again over whatever the trace set
     * (the agreed failure stays in ls: a later one cannot claim it) */
    if (launch_failed)
        result = mt__launch_result(r.ls);
    else if (trace_failed >= 0)
        result = mt_fail(r.all[trace_failed].status, "%s", r.all[trace_failed].msg);
    launch_free(&r);
    atomic_store(&mpi_launch_running, false);
    return result;
}

#endif /* MT_HAVE_MPI */
