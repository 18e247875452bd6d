/*
 * threads_launch.c — the threads transport's launch: every device of the
 * mesh a thread of this process (device 0 runs on the caller, so a 1-device
 * launch starts no thread), each pinned to its own slice of the CPUs when
 * they fit (in blocks a CPU when they outnumber them: pin_device), and the
 * launch's result once all have returned; the transport's shared state, and
 * its table (the top of the transport: it names the launch here, the
 * collectives of threads.c and threads_async.c and the messages of
 * threads_p2p.c).
 */
#define _GNU_SOURCE   /* sched_getaffinity / CPU_COUNT / pthread_setaffinity_np */
#include "comm/threads_impl.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS  1024

typedef struct {
    mt_ctx      *ctx;
    mt_device_fn fn;
    void        *arg;
} device_job;

/* Where device d runs (MT_PIN=0 leaves it to the OS):
 *   - When every device can have its own cores, on the d-th slice of the
 *     CPUs this process may use. Without it the scheduler sometimes leaves
 *     two spinning devices on one core for a long while, and every
 *     collective then costs a spin limit plus a context switch (~120 µs
 *     seen in the 8-byte all-reduce instead of 0.2 µs; measured 2026-11-29,
 *     2-core Zen 5 dev VM).
 *   - With more devices than CPUs, a multiple of them: in equal blocks, one
 *     block a CPU, in the mesh's order with opts' colocated axes innermost
 *     (block_rank). Left to the OS, a device woken on a busy CPU waited
 *     there while the other one idled until the next tick's balancing
 *     (idle gaps of 4, 8 and 12 ms in `perf sched`; 2-core Zen 5 in a
 *     Firecracker VM, 2026-12-04); pinned, test_plan_validate's GPT steps
 *     went (median of 50, ms) data=4 71.5 -> 69, data=8 87 -> 84,
 *     data=2,tensor=2 65 -> 64; data=2,pipe=2 1f1b 69 -> 65 and
 *     data=2,tensor=2,pipe=2 76 -> 72.5 with the pipe colocated (each CPU
 *     one replica's whole pipeline). The pipe axis outermost in the blocks
 *     (each CPU one stage of every replica, the stages waiting on each
 *     other across CPUs) took 95 ms: the trainer colocates its pipe axis.
 *   - Otherwise (CPUs that do not divide the devices) the OS places them.
 * Kernel pools are created on the caller beforehand, so their workers are
 * not pinned. */
static int block_rank(const mt_launch_state *ls, int device) {
    int coords[MT_MESH_MAX_AXES];
    mt_mesh_coords(ls->mesh, device, coords);
    const int nd = mt_mesh_ndim(ls->mesh);
    int rank = 0;
    for (int inner = 0; inner < 2; inner++)   /* the other axes, then the colocated */
        for (int a = 0; a < nd; a++) {
            if (((ls->colocate >> a) & 1u) != (unsigned)inner) continue;
            rank = rank * mt_mesh_axis_size(ls->mesh, mt_mesh_axis_name(ls->mesh, a)) + coords[a];
        }
    return rank;
}

static void pin_device(const mt_launch_state *ls, int device) {
    cpu_set_t allowed, mine;
    const char *env = getenv("MT_PIN");
    if ((env && strcmp(env, "0") == 0) || ls->n_local < 2 ||
        sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return;
    const int cpus = CPU_COUNT(&allowed);
    int slice, per;   /* device's slice of `per` CPUs */
    if (ls->may_spin) {
        per = cpus / ls->n_local;
        slice = device;
    } else if (cpus > 0 && ls->n_local % cpus == 0) {
        per = 1;
        slice = block_rank(ls, device) / (ls->n_local / cpus);
    } else {
        return;
    }
    if (per < 1) return;
    int seen = 0;
    CPU_ZERO(&mine);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &allowed)) continue;
        if (seen / per == slice) CPU_SET(cpu, &mine);
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

mt_status mt__threads_launch(const mt_launch_opts *opts, mt_device_fn fn, void *arg) {
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
    st = mt__launch_state_init(&ls, opts, mesh, &mt__threads_transport, n, 0, 1);
    mt_ctx *ctxs = calloc((size_t)n, sizeof *ctxs);
    mt_ctx **ctx_ptrs = calloc((size_t)n, sizeof *ctx_ptrs);
    device_job *jobs = calloc((size_t)n, sizeof *jobs);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    int n_ctx = 0, n_started = 0;
    int saved_threads = mt_get_num_threads();
    if (st != MT_OK) goto done;
    if (!ctxs || !ctx_ptrs || !jobs || !threads) {
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
    /* messages nobody received: a launch that did not fail fails for them */
    mt_threads_shared *ts = ls.transport;
    mt__mailboxes_close(&ls, ts->boxes, ts->n_boxes);

    /* the trace first, so that a failed launch's message is raised last */
    mt_status traced = ls.trace_path ? mt__trace_write(&ls, ctx_ptrs, n) : MT_OK;
    st = mt__launch_result(&ls);
    if (st == MT_OK) st = traced;
done:
    for (int d = 0; d < n_ctx; d++) mt__ctx_free(&ctxs[d]);
    if (ls.transport) mt__threads_fini(&ls);
    free(threads);
    free(jobs);
    free(ctx_ptrs);
    free(ctxs);
    mt__launch_state_free(&ls);
    mt_mesh_free(mesh);
    return st;
}

/* ======================================================================== */
/* The shared state and the table                                            */
/* ======================================================================== */

mt_status mt__threads_init(mt_launch_state *ls) {
    mt_threads_shared *ts = calloc(1, sizeof *ts);
    mt_mailbox *boxes = ts ? mt__mailboxes_create(ls->n_devices) : NULL;
    if (!boxes) {
        free(ts);
        return mt_fail(MT_ENOMEM, "threads transport: out of memory");
    }
    pthread_mutex_init(&ts->mu, NULL);
    ts->boxes = boxes;
    ts->n_boxes = ls->n_devices;
    ls->transport = ts;
    return MT_OK;
}

void mt__threads_fini(mt_launch_state *ls) {
    mt_threads_shared *ts = ls->transport;
    if (!ts) return;
    mt__mailboxes_free(ts->boxes, ts->n_boxes);
    mt__tgroups_free(ts->groups);
    pthread_mutex_destroy(&ts->mu);
    free(ts);
    ls->transport = NULL;
}

const mt_transport_ops mt__threads_transport = {
    .name = "threads",
    .launch = mt__threads_launch,
    .all_reduce = mt__threads_all_reduce,
    .all_gather = mt__threads_all_gather,
    .reduce_scatter = mt__threads_reduce_scatter,
    .all_to_all = mt__threads_all_to_all,
    .permute = mt__threads_permute,
    .broadcast = mt__threads_broadcast,
    .barrier = mt__threads_barrier,
    .group_init = mt__threads_group_init,
    .group_fini = NULL,
    .async_eager = mt__threads_async_eager,
    .async_start = mt__threads_async_start,
    .async_wait = mt__threads_async_wait,
    .send = mt__threads_send,
    .recv = mt__threads_recv,
};
