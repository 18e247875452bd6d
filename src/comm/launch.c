/*
 * launch.c — SPMD launch: one thread per device (threads transport) or this
 * rank's device (MPI), their contexts, the first-failure-stops-everyone rule,
 * waiting with timeouts, and the ctx accessors.
 *
 * Failure: the first device to fail claims the launch's failed_* fields and
 * then raises `abort` (release); every wait loop polls `abort` (acquire), so a
 * device stuck in a collective returns MT_EABORTED within one wait step (or,
 * in a rendezvous that already committed, once its peers' bounded copying is
 * done) and nobody is left hanging. mt_launch returns the first failure,
 * prefixed with its device.
 */
#define _GNU_SOURCE   /* sched_getaffinity / CPU_COUNT */
#include "base/base_impl.h"
#include "comm/comm_impl.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SPIN_LIMIT   2000    /* pause rounds before yielding (~ a few µs) */
#define SLEEP_AFTER  10e-3   /* seconds of waiting after which each step sleeps */
#define MAX_THREADS  1024

/* ======================================================================== */
/* Settings                                                                  */
/* ======================================================================== */

double mt__launch_timeout(const mt_launch_opts *opts) {
    if (opts && opts->timeout_s > 0) return opts->timeout_s;
    const char *env = getenv("MT_COMM_TIMEOUT");
    if (env && *env) {
        char *end;
        double v = strtod(env, &end);
        if (end != env && v > 0) return v;
    }
    return 300.0;
}

int mt__launch_kernel_threads(const mt_launch_opts *opts, int cpus, int n_local) {
    if (opts && opts->kernel_threads > 0) return opts->kernel_threads;
    int k = cpus / (n_local > 0 ? n_local : 1);
    return k < 1 ? 1 : k;
}

/* ======================================================================== */
/* Failure and waiting                                                       */
/* ======================================================================== */

mt_status mt__launch_fail(mt_launch_state *ls, int device, mt_status status, const char *msg) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&ls->fail_claimed, &expected, 1)) {
        ls->failed_device = device;
        ls->failed_status = status;
        snprintf(ls->failed_msg, sizeof ls->failed_msg, "%s", msg ? msg : "");
        /* publishes failed_* to every device that sees abort */
        atomic_store_explicit(&ls->abort, 1, memory_order_release);
    }
    return status;
}

static mt_status aborted(mt_ctx *ctx) {
    mt_launch_state *ls = ctx->launch;
    if (ls->failed_device == ctx->device)
        return mt_fail(MT_EABORTED, "%s", ls->failed_msg);
    return mt_fail(MT_EABORTED, "device %d stopped in %s: device %d failed: %s", ctx->device,
                   ctx->record->text[0] ? ctx->record->text : "its collective",
                   ls->failed_device, ls->failed_msg);
}

static mt_status timed_out(mt_ctx *ctx, const mt_group *g, const int *waiting_for, int n_waiting) {
    mt_launch_state *ls = ctx->launch;
    char msg[1024];
    int off = snprintf(msg, sizeof msg, "timed out after %g s in %s: ", ls->timeout_s,
                       ctx->record->text[0] ? ctx->record->text : "a collective");
    int missing[64];
    int n = 0;
    if (waiting_for) {
        for (int i = 0; i < n_waiting && n < 64; i++) missing[n++] = waiting_for[i];
    } else if (g) {
        uint64_t mine = atomic_load(&ctx->record->seq);
        for (int i = 0; i < g->size && n < 64; i++) {
            int d = g->members[i];
            if (d != ctx->device && atomic_load(&ls->records[d].seq) < mine) missing[n++] = d;
        }
    }
    if (n == 0) {
        off += snprintf(msg + off, sizeof msg - (size_t)off, "the other devices of the group over "
                        "%s did not arrive", g ? g->label : "its axes");
    } else {
        off += snprintf(msg + off, sizeof msg - (size_t)off, "device%s", n > 1 ? "s" : "");
        for (int i = 0; i < n && off < (int)sizeof msg; i++)
            off += snprintf(msg + off, sizeof msg - (size_t)off, "%s %d", i ? "," : "", missing[i]);
        off += snprintf(msg + off, sizeof msg - (size_t)off, " never arrived");
        for (int i = 0; i < n && off < (int)sizeof msg - 1; i++) {
            char rec[160];
            const mt_device_record *r = &ls->records[missing[i]];
            mt__record_text(ls, r, rec, sizeof rec);
            off += snprintf(msg + off, sizeof msg - (size_t)off, "; device %d's last collective: %s%s",
                            missing[i], rec[0] ? rec : "none",
                            rec[0] ? (atomic_load(&r->in_collective) ? " (still in it)"
                                                                     : " (finished)") : "");
        }
    }
    if (off < (int)sizeof msg - 1)
        snprintf(msg + off, sizeof msg - (size_t)off, "; check that every device of the group "
                 "issues the same collectives, or raise the timeout (MT_COMM_TIMEOUT, seconds)");
    mt__launch_fail(ls, ctx->device, MT_ETIMEOUT, msg);
    return mt_fail(MT_ETIMEOUT, "%s", msg);
}

mt_status mt__wait_step(mt_ctx *ctx, int *spins) {
    mt_launch_state *ls = ctx->launch;
    int s = (*spins)++;
    /* a wait that may not end (a committed rendezvous) can run for hours:
     * keep the counter from overflowing, and on the same residue mod 64 so
     * the sleeping below goes on */
    if (s >= (1 << 30)) *spins -= 1 << 20;
    if (ls->may_spin && s < SPIN_LIMIT) {
        _mm_pause();
        /* the clock and the abort flag every 64 rounds keep spinning cheap */
        if ((s & 63) != 63) return MT_OK;
    } else {
        int y = ls->may_spin ? s - SPIN_LIMIT : s;
        /* long waits (a peer computing, or gone) sleep so they give the core away */
        if (y > 2000 && y % 64 == 0) {
            static const struct timespec nap = {0, 50000};
            double waited = ls->timeout_s - (ctx->deadline - mt_time_now());
            if (waited > SLEEP_AFTER) nanosleep(&nap, NULL);
            else sched_yield();
        } else {
            sched_yield();
        }
    }
    if (atomic_load_explicit(&ls->abort, memory_order_acquire)) return MT_EABORTED;
    if (mt_time_now() > ctx->deadline) return MT_ETIMEOUT;
    return MT_OK;
}

mt_status mt__wait_fail(mt_ctx *ctx, const mt_group *g, mt_status st, const int *waiting_for,
                        int n_waiting) {
    if (st == MT_ETIMEOUT) return timed_out(ctx, g, waiting_for, n_waiting);
    /* the launch has failed: make sure its failure is published first */
    while (!atomic_load_explicit(&ctx->launch->abort, memory_order_acquire)) sched_yield();
    return aborted(ctx);
}

/* ======================================================================== */
/* Device contexts                                                           */
/* ======================================================================== */

mt_status mt__ctx_init(mt_ctx *ctx, mt_launch_state *ls, int device) {
    memset(ctx, 0, sizeof *ctx);
    ctx->device = device;
    ctx->launch = ls;
    ctx->record = &ls->records[device];
    ctx->open_region = -1;
    ctx->t_start = ls->t_start;
    ctx->wait_list = malloc(2 * (size_t)ls->n_devices * sizeof *ctx->wait_list);
    ctx->ptrs = malloc((size_t)ls->n_devices * sizeof *ctx->ptrs);
    ctx->pool = mt_pool_create(ls->kernel_threads);
    if (ls->trace_path) {
        ctx->cap_events = 256;
        ctx->events = malloc((size_t)ctx->cap_events * sizeof *ctx->events);
    }
    if (!ctx->wait_list || !ctx->ptrs || !ctx->pool || (ls->trace_path && !ctx->events)) {
        mt__ctx_free(ctx);
        return mt_fail(MT_ENOMEM, "device %d: out of memory for its context", device);
    }
    return MT_OK;
}

void mt__ctx_free(mt_ctx *ctx) {
    if (!ctx) return;
    const mt_transport_ops *ops = ctx->launch ? ctx->launch->ops : NULL;
    for (int i = 0; i < ctx->n_groups; i++) {
        mt_group *g = ctx->groups[i];
        if (ops && ops->group_fini) ops->group_fini(ctx, g);
        free(g->members);
        free(g->check_buf);
        free(g);
    }
    free(ctx->groups);
    ctx->groups = NULL;
    ctx->n_groups = ctx->cap_groups = 0;
    free(ctx->wait_list);
    free(ctx->ptrs);
    free(ctx->scratch);
    free(ctx->events);
    mt_pool_free(ctx->pool);
    ctx->wait_list = NULL;
    ctx->ptrs = NULL;
    ctx->scratch = NULL;
    ctx->events = NULL;
    ctx->pool = NULL;
}

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
/* The threads launch                                                        */
/* ======================================================================== */

typedef struct {
    mt_ctx      *ctx;
    mt_device_fn fn;
    void        *arg;
} device_job;

/* When every device can have its own cores, device d runs on the d-th slice
 * of the CPUs this process may use. Without it the scheduler sometimes
 * leaves two spinning devices on one core for a long while, and every
 * collective then costs a spin limit plus a context switch (~120 µs seen in
 * the 8-byte all-reduce instead of 0.2 µs). Kernel pools are created on the
 * caller beforehand, so their workers are not pinned. */
static void pin_device(const mt_launch_state *ls, int device) {
    cpu_set_t allowed, mine;
    const char *env = getenv("MT_PIN");   /* MT_PIN=0 leaves placement to the OS */
    if ((env && strcmp(env, "0") == 0) || !ls->may_spin || ls->n_local < 2 || sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    int per = CPU_COUNT(&allowed) / ls->n_local, seen = 0;
    if (per < 1) return;
    CPU_ZERO(&mine);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        if (seen / per == device) CPU_SET(cpu, &mine);
        seen++;
    }
    if (CPU_COUNT(&mine) > 0) pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
}

static void *device_main(void *p) {
    device_job *job = p;
    pin_device(job->ctx->launch, job->ctx->device);
    mt__device_run(job->ctx, job->fn, job->arg);
    return NULL;
}

/* The product of a spec's sizes, at most MAX_THREADS + 1 (more is too many
 * either way, and saturating keeps it from overflowing); 0 if it has a -1 or
 * cannot be read. */
static int spec_product(const char *spec) {
    if (!spec || !*spec) return 0;
    long prod = 1;
    for (const char *p = strchr(spec, '='); p; p = strchr(p + 1, '=')) {
        long v = strtol(p + 1, NULL, 10);
        if (v < 1) return 0;
        prod = v > MAX_THREADS || prod * v > MAX_THREADS ? MAX_THREADS + 1 : prod * v;
    }
    return (int)prod;
}

static mt_status launch_threads(const mt_launch_opts *opts, mt_device_fn fn, void *arg) {
    int n = opts->devices > 0 ? opts->devices : spec_product(opts->mesh);
    if (n <= 0)
        return mt_fail(MT_EINVAL, "launch: no device count: set opts.devices (mesh '%s' does not "
                       "fix one)", opts->mesh ? opts->mesh : "");
    if (n > MAX_THREADS) {
        if (opts->devices > 0)
            return mt_fail(MT_EINVAL, "launch: %d devices; the threads transport runs at most %d",
                           n, MAX_THREADS);
        return mt_fail(MT_EINVAL, "launch: mesh '%s' has more than %d devices; the threads "
                       "transport runs at most %d", opts->mesh, MAX_THREADS, MAX_THREADS);
    }
    mt_mesh *mesh;
    mt_status st = mt_mesh_create(opts->mesh, n, &mesh);
    if (st != MT_OK) return st;

    mt_launch_state ls;
    memset(&ls, 0, sizeof ls);
    ls.mesh = mesh;
    ls.n_devices = ls.n_local = n;
    ls.ops = &mt__threads_transport;
    ls.timeout_s = mt__launch_timeout(opts);
    ls.check = opts->check;
    ls.trace_path = opts->trace;
    atomic_init(&ls.abort, 0);
    atomic_init(&ls.fail_claimed, 0);
    ls.failed_device = -1;
    ls.process_rank = 0;
    ls.process_size = 1;
    ls.t_start = mt_time_now();
    ls.n_cores = mt__cpu_count();
    ls.may_spin = n <= ls.n_cores;
    ls.kernel_threads = mt__launch_kernel_threads(opts, ls.n_cores, n);
    ls.records = calloc((size_t)n, sizeof *ls.records);
    mt_ctx *ctxs = calloc((size_t)n, sizeof *ctxs);
    mt_ctx **ctx_ptrs = calloc((size_t)n, sizeof *ctx_ptrs);
    device_job *jobs = calloc((size_t)n, sizeof *jobs);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    int n_ctx = 0, n_started = 0;
    int saved_threads = mt_get_num_threads();
    if (!ls.records || !ctxs || !ctx_ptrs || !jobs || !threads) {
        st = mt_fail(MT_ENOMEM, "launch: out of memory for %d devices", n);
        goto done;
    }
    if ((st = mt__threads_init(&ls)) != MT_OK) goto done;
    for (; n_ctx < n; n_ctx++) {
        if ((st = mt__ctx_init(&ctxs[n_ctx], &ls, n_ctx)) != MT_OK) goto done;
        ctx_ptrs[n_ctx] = &ctxs[n_ctx];
    }
    /* process-wide (graphs size their kernel pools from it; Open BLAS stays
     * single-threaded): every device gets cores / devices */
    mt_set_num_threads(ls.kernel_threads);

    for (int d = 0; d < n; d++) jobs[d] = (device_job){&ctxs[d], fn, arg};
    /* device 0 runs on the caller: a 1-device launch starts no thread */
    for (n_started = 1; n_started < n; n_started++) {
        int rc = pthread_create(&threads[n_started], NULL, device_main, &jobs[n_started]);
        if (rc != 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "could not start the thread of device %d (%s); run fewer "
                     "devices", n_started, strerror(rc));
            mt__launch_fail(&ls, n_started, MT_EINTERNAL, msg);
            break;
        }
    }
    if (n_started == n) {
        /* device 0 is the caller: pin it for the launch, then give the
         * caller its own affinity back */
        cpu_set_t caller;
        bool restore = sched_getaffinity(0, sizeof caller, &caller) == 0;
        pin_device(&ls, 0);
        mt__device_run(&ctxs[0], fn, arg);
        if (restore) pthread_setaffinity_np(pthread_self(), sizeof caller, &caller);
    }
    for (int d = 1; d < n_started; d++) pthread_join(threads[d], NULL);
    mt_set_num_threads(saved_threads);

    st = mt__launch_result(&ls);
    if (ls.trace_path) {
        char keep[1024];
        snprintf(keep, sizeof keep, "%s", mt_errmsg());
        mt_status tst = mt__trace_write(&ls, ctx_ptrs, n);
        if (st == MT_OK) st = tst;
        else mt_fail(st, "%s", keep);
    }
done:
    for (int d = 0; d < n_ctx; d++) mt__ctx_free(&ctxs[d]);
    if (ls.transport) mt__threads_fini(&ls);
    free(threads);
    free(jobs);
    free(ctx_ptrs);
    free(ctxs);
    free(ls.records);
    mt_mesh_free(mesh);
    return st;
}

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

mt_transport_kind mt_transport_resolve(mt_transport_kind kind) {
    if (kind != MT_TRANSPORT_AUTO) return kind;
#ifdef MT_HAVE_MPI
    int size;
    mt_launcher_world(NULL, &size);
    return size > 1 ? MT_TRANSPORT_MPI : MT_TRANSPORT_THREADS;
#else
    return MT_TRANSPORT_THREADS;
#endif
}

mt_status mt_launch(const mt_launch_opts *opts, mt_device_fn fn, void *arg) {
    if (!opts || !fn) return mt_fail(MT_EINVAL, "mt_launch: opts and fn must not be NULL");
    switch (mt_transport_resolve(opts->transport)) {
    case MT_TRANSPORT_THREADS:
        return launch_threads(opts, fn, arg);
    case MT_TRANSPORT_MPI:
#ifdef MT_HAVE_MPI
        return mt__mpi_launch(opts, fn, arg);
#else
        return mt_fail(MT_EUNSUPPORTED, "the mpi transport was asked for, but meshtrain was built "
                       "without Open MPI; install libopenmpi-dev and rebuild, or use the threads "
                       "transport");
#endif
    default:
        return mt_fail(MT_EINVAL, "mt_launch: unknown transport %d", (int)opts->transport);
    }
}

/* ======================================================================== */
/* Accessors                                                                 */
/* ======================================================================== */

int mt_ctx_device(const mt_ctx *ctx) { return ctx->device; }
const mt_mesh *mt_ctx_mesh(const mt_ctx *ctx) { return ctx->launch->mesh; }
int mt_ctx_process_rank(const mt_ctx *ctx) { return ctx->launch->process_rank; }

int mt_axis_index(const mt_ctx *ctx, mt_axes axes) {
    const mt_mesh *mesh = ctx->launch->mesh;
    return mt_mesh_axes_check(mesh, axes) == MT_OK ? mt_mesh_group_rank(mesh, axes, ctx->device) : -1;
}

int mt_axis_size(const mt_ctx *ctx, mt_axes axes) {
    const mt_mesh *mesh = ctx->launch->mesh;
    return mt_mesh_axes_check(mesh, axes) == MT_OK ? mt_mesh_group_size(mesh, axes) : -1;
}

mt_status mt_ctx_axes(const mt_ctx *ctx, const char *names, mt_axes *out) {
    return mt_mesh_axes(ctx->launch->mesh, names, out);
}

uint64_t mt_ctx_collectives(const mt_ctx *ctx) { return ctx->seq; }

const char *mt_ctx_last_collective(const mt_ctx *ctx) { return ctx->record->text; }

mt_status mt_pmap(const char *axis, int devices, mt_device_fn fn, void *arg) {
    if (!axis || !*axis) axis = "i";
    if (strlen(axis) > 48)
        return mt_fail(MT_EINVAL, "pmap: axis name '%.20s...' is too long (48 characters at most)",
                       axis);
    char spec[64];
    snprintf(spec, sizeof spec, "%s=%d", axis, devices > 0 ? devices : -1);
    mt_launch_opts opts = {.mesh = spec, .devices = devices};
    return mt_launch(&opts, fn, arg);
}
