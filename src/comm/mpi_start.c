/*
 * mpi_start.c — starting MPI (once per process), this machine's ranks and
 * CPUs, and stopping every rank when a launch is doomed.
 *
 * Global state (forced by MPI, which is initialised once per process and
 * finalised once): whether meshtrain initialised MPI (then it finalises it
 * at exit, not at the end of a launch, so that a process can launch again),
 * and whether a launch is running (an exit() in the middle of one must not
 * finalise: finalising would wait for ranks that are waiting for us, while
 * exiting without it makes mpirun end the job).
 * And, once per process: the communicator the launches' starts meet on
 * (mpi_join.c), and how many ranks share this machine and its CPUs.
 */
#ifdef MT_HAVE_MPI

#include "base/base_impl.h"
#include "comm/mpi_impl.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static bool        mpi_we_initialised;   /* see the file comment */
static atomic_bool mpi_launch_running;
static MPI_Comm    mpi_join = MPI_COMM_NULL; /* the notes of the launches' starts (a dup of the world) */
static int         mpi_machine_ranks;    /* local_ranks' answer, once (0: not yet) ... */
static int         mpi_machine_cpus;     /* ... and the CPUs they share */

static void mpi_at_exit(void) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized || atomic_load(&mpi_launch_running)) return;
    mt__mpi_comms_drop_kept();
    MPI_Finalize();
}

/* Starts MPI if needed; the world size and this rank. */
mt_status mt__mpi_start(int *rank, int *size) {
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
_Noreturn void mt__mpi_stop(const char *msg) {
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
_Noreturn void mt__mpi_die(const char *fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mt__mpi_stop(msg);
}

/* Before dying on an agreed failure: rank 0 prints it and aborts the job,
 * so the other ranks give it time to (their own abort is only a fallback). */
void mt__mpi_let_rank0_abort(int rank) {
    if (rank != 0) {
        struct timespec nap = {10, 0};
        nanosleep(&nap, NULL);
    }
}

void mt__mpi_set_running(bool running) { atomic_store(&mpi_launch_running, running); }

MPI_Comm mt__mpi_join_comm(void) { return mpi_join; }

void mt__mpi_machine(MPI_Comm world, int *ranks, int *cpus) {
    if (mpi_machine_ranks == 0) mpi_machine_ranks = local_ranks(world, &mpi_machine_cpus);
    *ranks = mpi_machine_ranks;
    *cpus = mpi_machine_cpus;
}

#endif /* MT_HAVE_MPI */
