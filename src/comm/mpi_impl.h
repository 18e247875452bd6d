/*
 * mpi_impl.h — the MPI transport's shared state and the functions its files
 * share (internal; only with MT_HAVE_MPI).
 *
 * One device per MPI rank, started by mpirun; the device id is the world
 * rank. The transport's files:
 *   mpi_base.c    MPI's failures as statuses, byte blocks as MPI counts.
 *   mpi_start.c   MPI started (once per process), this machine's ranks and
 *                 CPUs, and every rank stopped when a launch is doomed.
 *   mpi_join.c    the start of a launch: every rank waited for, and a
 *                 missing one named.
 *   mpi_agree.c   the end of a launch: every rank's outcome agreed on, so all
 *                 return the same; or, once a collective is left unfinished,
 *                 the job stopped.
 *   mpi_launch.c  the launch (this rank's device set up and run, between the
 *                 two) and the transport table.
 *   mpi_ctl.c     the control channel between ranks (abort notices, "what
 *                 are you doing?" queries) and waiting for posted requests
 *                 with the timeout, whose message names the missing ranks
 *                 and is printed the moment the timeout fires.
 *   mpi_comms.c   the communicator of every group.
 *   mpi_coll.c    the collectives (mpi_small.c: the small all-reduces).
 *   mpi_p2p.c     point-to-point messages (mt_send / mt_recv), on a
 *                 communicator of their own, and their end of the launch.
 *   mpi_watchdog.c  a thread that bounds the blocking calls of a launch's
 *                 set-up and end by the timeout.
 * Bottom up: mpi_base, mpi_start, mpi_ctl, mpi_comms, mpi_small, mpi_coll,
 * mpi_p2p, mpi_join, mpi_agree, mpi_launch (test_file_cycles.sh holds that
 * no file calls back up). Only a build with Open MPI has the transport:
 * CMakeLists.txt compiles the mpi_*.c files only then (each is
 * also empty unless MT_HAVE_MPI is defined).
 */
#ifndef MT_MPI_IMPL_H
#define MT_MPI_IMPL_H

#ifdef MT_HAVE_MPI

#include "comm/transport_impl.h"

#include <mpi.h>

/* ======================================================================== */
/* State                                                                     */
/* ======================================================================== */

enum { CTL_ABORT = 1, CTL_QUERY = 2, CTL_REPLY = 3 };
enum { PHASE_COMPUTING = 0, PHASE_COLLECTIVE = 1, PHASE_FINISHED = 2 };
enum { TAG_CTL = 31, TAG_PERMUTE = 32, TAG_JOIN = 33, TAG_JOIN_ASK = 34,
       TAG_JOIN_ANSWER = 35 };

/* How long a rank whose collective timed out waits for the answers to its
 * "what are you doing?" query: at most this, and a quarter of the timeout. A
 * live rank polls the control channel within milliseconds whenever it waits
 * in MPI; a stopped or dead one never answers, and everything spent here
 * delays the end of the job. */
#define MT_MPI_ANSWER_S 0.5
/* How long a collective still gets to complete when another device's failure
 * arrives during it (mt__mpi_wait): the failed device may have finished it,
 * its last messages on their way (a recursive doubling's other pairs). */
#define MT_MPI_SETTLE_S 0.1
/* Once a collective is left unfinished the job cannot go on (MPI cannot
 * cancel it): how long a rank then waits in the end-of-launch agreement, for
 * ranks that are alive and were told, before it stops the job itself. With
 * the answer wait, a timeout ends the job well within a second of firing. */
#define MT_MPI_STOP_GRACE_S 0.25
/* The exit status of every rank when the transport stops the job (MPI_Abort,
 * and mpirun's status then): a device was lost (died, stopped, its network
 * down) or a collective timed out or was left unfinished. 75 (BSD's
 * EX_TEMPFAIL: try again, from the last checkpoint), told apart from the
 * CLI's 1 (a failure of the run), 2 (usage), 130/143 (signals) and the
 * 128 + signal of a rank that was killed; CLI_EXIT_LOST in src/cli/args.h. */
#define MT_MPI_EXIT_LOST 75

/* One control message; fixed size, sent as bytes. */
typedef struct {
    int32_t  kind, launch, from, status, phase;   /* launch: mpi_launch.c's number of it */
    int32_t  printed;      /* CTL_ABORT: the sender printed msg to stderr already */
    int32_t  dangling;     /* CTL_ABORT: the sender left a collective unfinished (the job is doomed) */
    uint64_t seq;          /* the sender's operations so far (collectives, sends, receives) */
    uint64_t n_coll;       /* of which collectives */
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

typedef struct {
    uint32_t key;
    MPI_Comm comm;
    bool     owned;        /* made for this key (freed at the end) */
} comm_entry;

#define SET_COMMS (1 << MT_MESH_MAX_AXES)

/* The transport's state for one launch: ls->transport and ctx->transport. */
typedef struct {
    mt_launch_state *ls;
    mt_ctx          *ctx;
    int              rank, size;
    int32_t          launch;          /* this launch's number, the same on every rank */
    double           timeout_s;
    bool             oversubscribed;  /* more ranks on this node than cores */
    MPI_Comm         world;           /* dup of MPI_COMM_WORLD for this launch */
    MPI_Comm         ctl;             /* control messages and the agreement */
    MPI_Comm         set_comm[SET_COMMS]; /* by axis bit set; NULL: not made */
    bool             sets_kept;       /* set_comm and comms came from the last launch */
    bool             in_steps;        /* waits are steps of one collective (mpi_small.c):
                                         none completes it with every member */
    comm_entry      *comms;           /* (cap_comms) groups' communicators, by axes key */
    int              n_comms, cap_comms;
    MPI_Op           fmax, fmin;      /* f32 max/min that keep NaN, as jax.lax.pmax */
    /* control channel */
    ctl_msg          in;
    MPI_Request      in_req;          /* the posted receive; NULL once closed */
    bool             closing;         /* after the agreement: answer no queries */
    ctl_out        **out;             /* (n_out) each allocated on its own, see ctl_out */
    int              n_out;
    ctl_msg         *replies;         /* (size) answers to our last query */
    bool            *replied;
    uint64_t        *done_with;       /* (size) this device's number (record seq) of the last
                                         collective it completed with each rank; 0 none */
    int              phase;
    bool             dangling;        /* a posted collective never finished */
    bool             notified;        /* the others were told of our failure */
    /* a doomed launch (a collective left unfinished here, or on a rank that
     * told us so): mpi_launch.c stops the job instead of returning */
    double           stop_by;         /* > 0: when this rank stops waiting at the end of
                                         the launch and stops the job itself */
    bool             failed_printed;  /* ls->failed_* is on stderr already (its rank printed it) */
    char             printed[1024];   /* this rank's own failure as it printed it ("": none) */
    /* bf16 reductions run in f32 here */
    void            *scratch;
    size_t           scratch_bytes;
    /* point-to-point messages (mpi_p2p.c) */
    MPI_Comm         p2p;             /* dup of the world for them (NULL: not made) */
    bool             p2p_tags_ok;     /* MPI's tags are wide enough for every channel */
    uint32_t        *p2p_keys;        /* (n_p2p_keys) sorted: every ordered axis list */
    int              n_p2p_keys;
    MPI_Request     *send_reqs;       /* (cap_sends) sends in flight ... */
    void           **send_bufs;       /* ... and the copies they send from */
    int             *send_done;       /* (cap_sends) MPI_Testsome's indices */
    int              n_sends, cap_sends;
    int             *p2p_sent;        /* (size) messages sent to each rank */
    int             *p2p_received;    /* (size) messages received from each rank */
    int             *p2p_expect;      /* (size) at the end: messages each rank sent here */
} mt_mpi;

/* This device's record, written by the front end before each collective
 * (NULL before the device's ctx is set up). */
static inline const mt_device_record *mt__mpi_own_record(const mt_mpi *m) {
    return m->ctx ? m->ctx->record : NULL;
}

/* The text of the collective this device is in, for messages; `fallback`
 * when it has none. */
static inline const char *mt__mpi_current_text(const mt_mpi *m, const char *fallback) {
    const mt_device_record *r = mt__mpi_own_record(m);
    return r && r->text[0] ? r->text : fallback;
}

/* ---- MPI's failures and counts (mpi_base.c) ------------------------------ */

/* MT_EINTERNAL with "<what> failed: <MPI's text for rc>". */
mt_status mt__mpi_error(int rc, const char *what);

/* A block of `bytes` as *count elements of *type: MPI_BYTE up to INT_MAX,
 * one element of a datatype exactly that long above (MPI counts are int).
 * A made type (*made) is freed by the caller once posted. */
mt_status mt__mpi_block_type(size_t bytes, MPI_Datatype *type, int *count, bool *made);

/* ======================================================================== */
/* Control channel and waiting (mpi_ctl.c)                                   */
/* ======================================================================== */

/* Posts the receive of the control channel (m->ctl must exist). */
mt_status mt__mpi_ctl_open(mt_mpi *m);
/* Handles every control message that has arrived. */
void      mt__mpi_ctl_poll(mt_mpi *m);
/* Tells every other rank that this one failed, once (with whether msg was
 * printed already and whether this rank left a collective unfinished). */
void      mt__mpi_ctl_notify_failure(mt_mpi *m, mt_status status, const char *msg);
/* A posted collective will never finish here (m->dangling): MPI cannot
 * cancel it, so the job is doomed; sets m->stop_by (once). */
void      mt__mpi_set_dangling(mt_mpi *m);
/* Closes the channel: cancels the posted receive and waits for this rank's
 * sends (bounded by the watchdog). A message still on its way is a later
 * launch's to drop (ctl_msg.launch). */
void      mt__mpi_ctl_close(mt_mpi *m);

/* Between polls of a wait that has run `spins` rounds and `waited` seconds:
 * spins while a core is ours, then gives it away; a long wait sleeps. */
void      mt__mpi_backoff(const mt_mpi *m, long spins, double waited);

/* Waits for n posted requests of the collective `what` on g (g NULL: the
 * end-of-launch exchange, which waits twice as long, but only until
 * m->stop_by once the launch is doomed); MT_OK when all finished. Serves the
 * control channel meanwhile; on abort returns MT_EABORTED, on timeout asks
 * the others what they are doing (briefly: MT_MPI_ANSWER_S) and fails the
 * launch with a message naming the ranks that never arrived, which a
 * collective's timeout prints to stderr at once ("meshtrain: device N:
 * ..."). Either way marks the collective unfinished (mt__mpi_set_dangling):
 * MPI cannot cancel it. */
mt_status mt__mpi_wait(mt_mpi *m, const mt_group *g, int n, MPI_Request *reqs, const char *what);

/* A collective of g completed here: every member reached it (the message of
 * a member that later never answers names it; m->done_with). mt__mpi_wait
 * calls it for each wait of g, but not for a step of a collective of
 * several (m->in_steps). */
void      mt__mpi_note_done(mt_mpi *m, const mt_group *g);

/* The largest all-reduce (in bytes of its f32 or i32 elements) that goes by
 * recursive doubling on point-to-point messages instead of MPI_Iallreduce
 * (mpi_small.c: libnbc's schedule costs more than a few bytes do). */
#define MT_MPI_SMALL_BYTES 16384

/* All-reduces buf (count elements of f32 or i32, at most MT_MPI_SMALL_BYTES)
 * over comm, g's communicator, by recursive doubling, each exchange waited
 * for with the timeout (mt__mpi_wait, `what` naming the collective). Every
 * rank ends with the same bits. mpi_small.c. */
mt_status mt__mpi_small_all_reduce(mt_mpi *m, const mt_group *g, MPI_Comm comm, void *buf,
                                   size_t count, mt_dtype dtype, mt_reduce_op op,
                                   const char *what);

/* When mt_launch_signal reported a signal not yet told: prints that this
 * rank got it after waiting `waited` s in `what` over g (NULL: every rank),
 * and the last collective each member completed with it; nothing
 * otherwise. Asks nobody: the process may be killed any moment. */
void      mt__mpi_say_signal(mt_mpi *m, const mt_group *g, const char *what, double waited);

/* Asks ranks[n] (NULL: ranks 0 .. n-1; this rank is skipped) what they are
 * doing and waits for the answers, briefly (MT_MPI_ANSWER_S, at most a
 * quarter of the timeout): m->replied[r], m->replies[r]. */
void      mt__mpi_ask(mt_mpi *m, const int *ranks, int n);
/* What rank r answered (after mt__mpi_ask; r may be this rank), for a
 * message: "device 1's last operation: #4 psum ...; waiting in it", or that
 * it did not answer. */
void      mt__mpi_peer_text(const mt_mpi *m, int r, char *buf, size_t cap);
/* Fails the launch with a timeout's `msg`, tells every rank, and returns
 * MT_ETIMEOUT with it. `dangling`: a posted operation will never finish here
 * (mt__mpi_set_dangling); `print`: the message goes to stderr at once (the
 * job is doomed, and a stopped rank would never let it end otherwise). */
mt_status mt__mpi_timed_out(mt_mpi *m, const char *msg, bool dangling, bool print);

/* ======================================================================== */
/* Bounding blocking calls (mpi_watchdog.c)                                  */
/* ======================================================================== */

/* Until mt__mpi_unguard, the blocking calls of `what` (the launch's
 * set-up, the end of the control channel) are bounded by m->timeout_s: past
 * it a thread prints a message naming `what` and the other devices, and ends
 * the process with MT_MPI_EXIT_LOST (then mpirun ends the job). One guard at
 * a time; without the thread (pthread_create failed) nothing is bounded. */
void mt__mpi_guard(const mt_mpi *m, const char *what);
void mt__mpi_unguard(void);

/* ======================================================================== */
/* Communicators (mpi_comms.c)                                               */
/* ======================================================================== */

/* One split of the world per set of axes of size > 1, at launch (blocking:
 * every rank is inside the launch then); nothing when they were kept. */
mt_status mt__mpi_make_set_comms(mt_mpi *m);
/* The communicator of group g (of two or more), made on first use. */
mt_status mt__mpi_group_comm(mt_mpi *m, const mt_group *g, MPI_Comm *out);
/* Frees every communicator of the launch (world, ctl and p2p too). */
void      mt__mpi_free_comms(mt_mpi *m);
/* Moves the communicators the last launch kept into m: world, ctl and p2p,
 * and, when m's mesh has the kept shape, the splits and group
 * communicators (m->sets_kept; else those are freed). False when none were
 * kept (m's stay NULL: the launch makes them). */
bool      mt__mpi_comms_reuse(mt_mpi *m);
/* Hands m's communicators on to the next launch (this one ended with
 * nothing left on them); m's are NULL after. */
void      mt__mpi_comms_keep(mt_mpi *m);
/* Frees the kept communicators (before MPI_Finalize). */
void      mt__mpi_comms_drop_kept(void);

/* ======================================================================== */
/* Collectives (mpi_coll.c) and the launch (mpi_launch.c)                    */
/* ======================================================================== */

/* Creates m->fmax / m->fmin, the reductions that keep NaN; freed by
 * mt__mpi_reductions_free. */
void mt__mpi_reductions_create(mt_mpi *m);
void mt__mpi_reductions_free(mt_mpi *m);

/* The table's collectives (see mt_transport_ops). */
mt_status mt__mpi_all_reduce(mt_ctx *ctx, const mt_group *g, void *buf, size_t count,
                             mt_dtype dtype, mt_reduce_op op);
mt_status mt__mpi_all_gather(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                             size_t bytes);
mt_status mt__mpi_reduce_scatter(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                                 size_t count, mt_dtype dtype, mt_reduce_op op);
mt_status mt__mpi_all_to_all(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                             size_t bytes);
mt_status mt__mpi_permute(mt_ctx *ctx, const mt_group *g, const void *send, void *recv,
                          size_t bytes, int dest, int src);
mt_status mt__mpi_broadcast(mt_ctx *ctx, const mt_group *g, void *buf, size_t bytes, int root);
mt_status mt__mpi_barrier(mt_ctx *ctx, const mt_group *g);

/* ======================================================================== */
/* Point-to-point messages (mpi_p2p.c)                                       */
/* ======================================================================== */

/* The launch's p2p state for a world of m->size ranks on `mesh` (no
 * communicator yet; MT_ENOMEM with a message), and freeing it. */
mt_status mt__mpi_p2p_new(mt_mpi *m, const mt_mesh *mesh);
void      mt__mpi_p2p_free(mt_mpi *m);
/* Makes m->p2p unless kept (blocking: every rank is in the launch's
 * set-up), and checks MPI's tags fit the mesh's channels. */
mt_status mt__mpi_p2p_open(mt_mpi *m);
/* The messages this rank sent and received in this launch, in all. */
void      mt__mpi_p2p_totals(const mt_mpi *m, int *sent, int *received);
/* Waits (with the timeout) until this rank's sends are done: the end of a
 * launch in which every message sent was received. MT_ETIMEOUT, or MPI's
 * failure, leaves MPI unusable (the launch must stop the job). */
mt_status mt__mpi_p2p_sends_done(mt_mpi *m);
/* The end of the launch, on every rank whose m->p2p exists, when some
 * message sent was not received (every rank calls it then): counts the
 * messages each rank sent to each, receives and drops the ones this rank
 * never received, waits for this rank's sends. MT_ESTATE (with
 * mt__p2p_leftover's message) when messages were left over and `report`;
 * any other failure leaves MPI unusable (the launch must stop the job). */
mt_status mt__mpi_p2p_close(mt_mpi *m, bool report);
/* The table's send and recv (see mt_transport_ops). */
mt_status mt__mpi_send(mt_ctx *ctx, const mt_group *g, int dst, int tag, const void *buf,
                       size_t bytes);
mt_status mt__mpi_recv(mt_ctx *ctx, const mt_group *g, int src, int tag, void *buf, size_t bytes,
                       size_t *got);

/* ======================================================================== */
/* A launch: its start and stop (mpi_start.c), its start's barrier          */
/* (mpi_join.c), its end (mpi_agree.c)                                       */
/* ======================================================================== */

/* What each rank contributes to the end-of-launch agreement. */
typedef struct {
    int32_t status, device, dangling, printed;   /* printed: msg is on stderr already */
    int32_t leftover;                            /* the failure is messages never received */
    int32_t p2p_sent, p2p_received;              /* point-to-point messages, in all */
    char    msg[1004];
} mt_mpi_outcome;

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
    mt_mpi_outcome  *all;        /* (size) every rank's outcome, after an exchange */
} mt_mpi_run;

/* Starts MPI if needed (once per process; finalised at exit when this did
 * it); the world size and this rank. */
mt_status mt__mpi_start(int *rank, int *size);
/* Whether a launch is running: an exit() in the middle of one must not
 * finalise MPI (mt__mpi_start's exit handler). */
void mt__mpi_set_running(bool running);
/* The communicator the launches' starts meet on (a dup of the world, made by
 * the first mt__mpi_start). */
MPI_Comm mt__mpi_join_comm(void);
/* The ranks sharing this machine and the CPUs they may run on together,
 * found once (collective over `world` the first time; on a failure of MPI,
 * this rank counts alone). */
void mt__mpi_machine(MPI_Comm world, int *ranks, int *cpus);

/* Prints the failure `msg` (NULL: it is on stderr already) and ends every
 * rank with MPI_Abort (exit status MT_MPI_EXIT_LOST); mt__mpi_die with a
 * printf-style message. */
_Noreturn void mt__mpi_stop(const char *msg);
_Noreturn void mt__mpi_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Before dying on an agreed failure: rank 0 prints it and aborts the job, so
 * the other ranks give it time to (their own abort is only a fallback). */
void mt__mpi_let_rank0_abort(int rank);

/* Waits until every rank has called mt_launch (with the timeout), naming the
 * ranks that never came; dies when one does not. */
void mt__mpi_join_world(mt_mpi *m);

/* Runs the device (or, when its set-up failed with `st`, fails it), settles
 * its messages and agrees with every rank on the launch's outcome; returns
 * the launch's result (the same on every rank). Dies when an exchange fails
 * or any rank left a collective unfinished. */
mt_status mt__mpi_run_and_agree(mt_mpi_run *r, mt_status st, mt_device_fn fn, void *arg);
/* Writes the trace and agrees with every rank on its status; the index in
 * r->all of the agreed trace failure, -1 none. */
int mt__mpi_trace_and_agree(mt_mpi_run *r);

/* The table's launch: creates this rank's device, runs fn on it and returns
 * the launch's result, the same on every rank (mpi_launch.c). */
mt_status mt__mpi_launch(const mt_launch_opts *opts, mt_device_fn fn, void *arg);

#endif /* MT_HAVE_MPI */
#endif /* MT_MPI_IMPL_H */
