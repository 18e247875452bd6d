/*
 * launch.c — what every transport's launch shares: the launch's settings,
 * its shared state (set up here once for every transport), running a
 * device, the launch's result, the launcher's world and the signal a launch
 * reports. The transports' launches (threads_launch.c, mpi_launch.c) call
 * it; mt_launch itself, which picks the transport, is above them all in
 * registry.c, so this file never names a transport.
 *
 * Settings: the timeout comes from opts.timeout_s, else MT_COMM_TIMEOUT, else
 * 300 s; a value that is not a number of seconds > 0 fails mt_launch before
 * any device runs (mt__launch_timeout), rather than silently meaning 300 s.
 *
 * Failure: the first device to fail claims the launch's failed_* fields and
 * then raises `abort` (wait.c); every wait loop polls it, so nobody is left
 * hanging, and mt_launch returns the first failure, prefixed with its
 * device.
 */
#include "base/base_impl.h"
#include "comm/transport_impl.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Settings and the shared state                                             */
/* ======================================================================== */

/* Whether `text` is a whole number of seconds > 0 (surrounding blanks
 * allowed), and its value. inf, nan and overflows are not. */
static bool parse_seconds(const char *text, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno == ERANGE) return false;
    while (isspace((unsigned char)*end)) end++;
    if (*end || !isfinite(v) || v <= 0) return false;
    *out = v;
    return true;
}

mt_status mt__launch_timeout(const mt_launch_opts *opts, double *out) {
    *out = 300.0;
    if (opts && opts->timeout_s != 0) {
        /* NaN fails both tests */
        if (!(opts->timeout_s > 0) || !isfinite(opts->timeout_s))
            return mt_fail(MT_EINVAL, "launch: opts.timeout_s is %g; give a number of seconds > 0, "
                           "or 0 for MT_COMM_TIMEOUT (else 300 s)", opts->timeout_s);
        *out = opts->timeout_s;
        return MT_OK;
    }
    /* set but not a timeout: an error, not the default, so that a typo does
     * not quietly wait 300 s (or not at all). Under MPI mpirun gives every
     * rank the same environment (-x), so every rank fails here alike, before
     * MPI is touched. */
    const char *env = getenv("MT_COMM_TIMEOUT");
    if (env && !parse_seconds(env, out))
        return mt_fail(MT_EINVAL, "MT_COMM_TIMEOUT='%.64s%s' is not a number of seconds > 0; "
                       "set it to one (e.g. MT_COMM_TIMEOUT=60), or unset it for the default of "
                       "300 s", env, strlen(env) > 64 ? "..." : "");
    return MT_OK;
}

int mt__launch_kernel_threads(const mt_launch_opts *opts, int cpus, int n_local) {
    if (opts && opts->kernel_threads > 0) return opts->kernel_threads;
    int k = cpus / (n_local > 0 ? n_local : 1);
    return k < 1 ? 1 : k;
}

mt_status mt__launch_state_init(mt_launch_state *ls, const mt_launch_opts *opts,
                                const mt_mesh *mesh, const mt_transport_ops *ops, int n_local,
                                int process_rank, int process_size) {
    memset(ls, 0, sizeof *ls);
    mt_status st = mt__launch_timeout(opts, &ls->timeout_s);
    if (st != MT_OK) return st;
    ls->mesh = mesh;
    ls->n_devices = mt_mesh_size(mesh);
    ls->n_local = n_local;
    ls->ops = ops;
    ls->transport = NULL;
    ls->check = opts->check;
    ls->trace_path = opts->trace;
    ls->trace_out = opts->trace_out;
    ls->trace_model_flops = opts->trace_model_flops;
    ls->trace_run = opts->trace_run;
    atomic_init(&ls->abort, 0);
    atomic_init(&ls->fail_claimed, 0);
    ls->failed_device = -1;
    ls->process_rank = process_rank;
    ls->process_size = process_size;
    ls->t_start = mt_time_now();
    ls->n_cores = mt__cpu_count();
    ls->may_spin = n_local <= ls->n_cores;
    ls->kernel_threads = mt__launch_kernel_threads(opts, ls->n_cores, n_local);
    if (opts->colocate && *opts->colocate) {
        mt_axes ax;
        if ((st = mt_mesh_axes(mesh, opts->colocate, &ax)) != MT_OK)
            return mt_fail(st, "launch: colocate '%s': %s", opts->colocate, mt_errmsg());
        for (int i = 0; i < ax.n; i++) ls->colocate |= 1u << ax.axis[i];
    }
    ls->records = calloc((size_t)ls->n_devices, sizeof *ls->records);
    if (!ls->records)
        return mt_fail(MT_ENOMEM, "launch: out of memory for %d devices", ls->n_devices);
    return MT_OK;
}

void mt__launch_state_free(mt_launch_state *ls) {
    free(ls->records);
    ls->records = NULL;
}

/* ======================================================================== */
/* Running devices                                                           */
/* ======================================================================== */

mt_status mt__device_run(mt_ctx *ctx, mt_device_fn fn, void *arg) {
    mt_launch_state *ls = ctx->launch;
    mt_errclear();
    mt_status st = fn(ctx, arg);
    mt_trace_end(ctx);   /* a region left open ends with the device */
    if (st == MT_OK && ctx->n_pending > 0)
        st = mt_fail(MT_ESTATE, "returned with %d collective%s started but never waited for; "
                     "call mt_wait on every request", ctx->n_pending, ctx->n_pending > 1 ? "s" : "");
    if (st != MT_OK && !(st == MT_EABORTED && atomic_load(&ls->abort)))
        mt__launch_fail(ls, ctx->device, st, mt_errmsg());
    /* requests the transport started may be in use by peers (or waited on by
     * them): give each up, or complete it, before the device is gone */
    if (ctx->n_pending > 0) mt__async_abandon(ctx);
    return st;
}

mt_status mt__launch_result(mt_launch_state *ls) {
    if (!atomic_load_explicit(&ls->abort, memory_order_acquire)) return MT_OK;
    return mt_fail(ls->failed_status, "device %d: %s", ls->failed_device, ls->failed_msg);
}

/* ======================================================================== */
/* The launcher's world, and signals                                        */
/* ======================================================================== */

void mt_launcher_world(int *rank, int *size) {
    /* Open MPI, then PMIx (rank only), then MPICH/Hydra's PMI */
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    int r = 0, n = 1;
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
        const char *v = getenv(ranks[i]);
        if (v && *v) { r = atoi(v); break; }
    }
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const char *v = getenv(sizes[i]);
        if (v && *v) { n = atoi(v); break; }
    }
    if (rank) *rank = r < 0 ? 0 : r;
    if (size) *size = n < 1 ? 1 : n;
}

/* The signal mt_launch_signal reported (0: none): process-wide, as a
 * signal is; a lock-free atomic, so the handler may store it. */
static atomic_int launch_signal;
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "mt_launch_signal stores from a signal handler");

void mt_launch_signal(int signo) { atomic_store(&launch_signal, signo); }

int mt__launch_signal_take(void) { return atomic_exchange(&launch_signal, 0); }
