/*
 * mpi_launch.c — the MPI transport's launch, and its table: every rank
 * calls mt_launch; this starts MPI if nobody has (mpi_start.c), waits for
 * every rank (mpi_join.c), builds this rank's device (device id = world
 * rank), runs the device function, and makes every rank return the same
 * result (mpi_agree.c). Last, the control channel is closed (mpi_ctl.c: its
 * messages carry the launch's number, so one still on its way is dropped by
 * the next launch).
 *
 * The top of the transport: the table names the launch here and the
 * collectives (mpi_coll.c, mpi_small.c), messages (mpi_p2p.c) below it.
 */
#ifdef MT_HAVE_MPI

#include "comm/mpi_impl.h"

#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* The launch's state                                                        */
/* ======================================================================== */

/* Frees what launch_new made (any part of it may be missing). */
static void launch_free(mt_mpi_run *r) {
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
static mt_status launch_new(mt_mpi_run *r, const mt_launch_opts *opts, mt_mesh *mesh, int rank,
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
/* Setting up                                                                */
/* ======================================================================== */

/* Makes the launch's world, control channel's communicator and the
 * machine's rank count (the first launch; the next ones reuse them). */
static mt_status make_world(mt_mpi *m) {
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &m->world);
    if (rc != MPI_SUCCESS) {
        m->world = MPI_COMM_NULL;
        return mt__mpi_error(rc, "MPI_Comm_dup");
    }
    MPI_Comm_set_errhandler(m->world, MPI_ERRORS_RETURN);
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
static mt_status set_up(mt_mpi_run *r, const mt_launch_opts *opts) {
    mt_mpi *m = r->m;
    mt_launch_state *ls = r->ls;
    mt_status s = mt__mpi_comms_reuse(m) ? MT_OK : make_world(m);
    int machine_ranks = 0, machine_cpus = 0;
    if (s == MT_OK) mt__mpi_machine(m->world, &machine_ranks, &machine_cpus);
    ls->n_cores = machine_cpus > 0 ? machine_cpus : 1;
    const int nlocal = machine_ranks > 0 ? machine_ranks : 1;
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

/* ======================================================================== */
/* The launch and the table                                                  */
/* ======================================================================== */

mt_status mt__mpi_launch(const mt_launch_opts *opts, mt_device_fn fn, void *arg) {
    int rank = 0, size = 1;
    mt_status s = mt__mpi_start(&rank, &size);
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

    mt_mpi_run r;
    if ((s = launch_new(&r, opts, mesh, rank, size)) != MT_OK) return s;
    mt__mpi_set_running(true);
    mt__mpi_join_world(r.m);
    mt__mpi_guard(r.m, "the launch's set-up (its communicators: MPI_Comm_split, MPI_Comm_dup)");
    mt_status set = set_up(&r, opts);
    mt__mpi_unguard();
    mt_status result = mt__mpi_run_and_agree(&r, set, fn, arg);
    const bool launch_failed = result != MT_OK;
    /* a launch that succeeded returns the trace's status */
    int trace_failed = r.ls->trace_path ? mt__mpi_trace_and_agree(&r) : -1;
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
    mt__mpi_set_running(false);
    return result;
}

const mt_transport_ops mt__mpi_transport = {
    .name = "mpi",
    .launch = mt__mpi_launch,
    .all_reduce = mt__mpi_all_reduce,
    .all_gather = mt__mpi_all_gather,
    .reduce_scatter = mt__mpi_reduce_scatter,
    .all_to_all = mt__mpi_all_to_all,
    .permute = mt__mpi_permute,
    .broadcast = mt__mpi_broadcast,
    .barrier = mt__mpi_barrier,
    .send = mt__mpi_send,
    .recv = mt__mpi_recv,
};

#endif /* MT_HAVE_MPI */
