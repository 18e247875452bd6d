/*
 * backend.c — the backend registry and the two built-in backends (backend.h):
 * "cpu", host memory and the op table's kernels, and "shape-only", which
 * allocates and runs nothing. A new backend is one folder of its own (its
 * table, its kernels) plus one line in `registry` below.
 */
#include "ops/backend_impl.h"
#include "ops/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* cpu                                                                       */
/* ======================================================================== */

static mt_status cpu_alloc(size_t bytes, void **data) {
    *data = NULL;
    if (!bytes) return MT_OK;
    /* C11's aligned_alloc wants a size that is a multiple of the alignment */
    size_t whole = (bytes + MT_BACKEND_ALIGN - 1) / MT_BACKEND_ALIGN * MT_BACKEND_ALIGN;
    if (!(*data = aligned_alloc(MT_BACKEND_ALIGN, whole)))
        return mt_fail(MT_ENOMEM, "cannot allocate %.1f MB of host memory", bytes / 1e6);
    return MT_OK;
}

static void cpu_free(void *data) { free(data); }

static void cpu_clear(void *data, size_t bytes) {
    if (data && bytes) memset(data, 0, bytes);
}

static mt_status cpu_copy(void *dst, const void *src, size_t bytes) {
    if (bytes) memcpy(dst, src, bytes);
    return MT_OK;
}

static bool cpu_supports(const mt_op_call *call) { return call->op < MT_OP_COUNT; }

static void cpu_run(const mt_op_env *env, const mt_op_call *call) {
    mt__op_def(call->op)->run(env, call);
}

/* Updates elements [e0, e1) of the parameter. */
static void update_range(void *arg, int64_t e0, int64_t e1, int worker) {
    (void)worker;
    const mt_optim_update *u = arg;
    if (u->kind == MT_BACKEND_ADAMW)
        mt_kernel_adamw(u->p + e0, u->g + e0, u->m + e0, u->v + e0, e1 - e0, u->lr, u->beta1,
                        u->beta2, u->eps, u->weight_decay, u->gscale, u->t);
    else
        mt_kernel_sgd(u->p + e0, u->g + e0, u->m ? u->m + e0 : NULL, e1 - e0, u->lr,
                      u->momentum, u->weight_decay, u->gscale);
}

static mt_status cpu_optim_update(const mt_op_env *env, const mt_optim_update *u) {
    /* memory-bound: the elements split over the kernel threads */
    mt_pool_run(env->pool, u->n, 32768, update_range, (void *)u);
    return MT_OK;
}

static mt_status cpu_sumsq(const mt_op_env *env, const float *x, int64_t n, double *out) {
    (void)env;
    *out = mt_kernel_sumsq(x, n);
    return MT_OK;
}

/* ---- the host's streams and events (every backend's default) ------------ */

struct mt_backend_stream { mt_ctx *ctx; };

static mt_status host_stream_create(mt_ctx *ctx, mt_backend_stream **out) {
    if (!(*out = calloc(1, sizeof **out)))
        return mt_fail(MT_ENOMEM, "out of memory for a stream");
    (*out)->ctx = ctx;
    return MT_OK;
}

static void host_stream_free(mt_backend_stream *stream) { free(stream); }

static mt_status host_event_record(mt_backend_stream *stream, mt_backend_event *ev,
                                   const mt_request *req) {
    if (req && !stream->ctx)
        return mt_fail(MT_EINVAL, "an event records a comm request on a stream made without "
                       "a device; create the stream with the device's ctx");
    *ev = (mt_backend_event){.req = req ? *req : (mt_request){0}, .pending = req != NULL};
    return MT_OK;
}

static mt_status host_event_query(mt_backend_stream *stream, mt_backend_event *ev, bool *done) {
    (void)stream;
    *done = !ev->pending;
    return MT_OK;
}

static mt_status host_event_wait(mt_backend_stream *stream, mt_backend_event *ev) {
    if (!ev->pending) return MT_OK;
    ev->pending = false;
    return mt_wait(stream->ctx, &ev->req);
}

static const mt_backend cpu = {
    .name = "cpu", .buffer_alloc = cpu_alloc, .buffer_free = cpu_free, .buffer_clear = cpu_clear,
    .copy_in = cpu_copy, .copy_out = cpu_copy, .supports_op = cpu_supports, .run_op = cpu_run,
    .optim_update = cpu_optim_update, .sumsq = cpu_sumsq,
    .stream_create = host_stream_create, .stream_free = host_stream_free,
    .event_record = host_event_record, .event_query = host_event_query,
    .event_wait = host_event_wait,
};

/* ======================================================================== */
/* shape-only                                                                */
/* ======================================================================== */

static mt_status shape_alloc(size_t bytes, void **data) {
    (void)bytes;
    *data = NULL;
    return MT_OK;
}

static void shape_free(void *data) { (void)data; }

static void shape_clear(void *data, size_t bytes) { (void)data; (void)bytes; }

static bool shape_supports(const mt_op_call *call) { (void)call; return false; }

static const mt_backend shape_only = {
    .name = "shape-only", .buffer_alloc = shape_alloc, .buffer_free = shape_free,
    .buffer_clear = shape_clear, .supports_op = shape_supports,
};

/* ======================================================================== */
/* The registry and the public face                                          */
/* ======================================================================== */

static const mt_backend *const registry[] = {
    &cpu,
    &shape_only,
};
#define N_REGISTRY (int)(sizeof registry / sizeof registry[0])

const mt_backend *mt_backend_cpu(void) { return &cpu; }
const mt_backend *mt_backend_shape_only(void) { return &shape_only; }

const mt_backend *mt_backend_at(int i) { return i >= 0 && i < N_REGISTRY ? registry[i] : NULL; }

const mt_backend *mt_backend_find(const char *name) {
    char names[128] = "";
    for (int i = 0; i < N_REGISTRY; i++) {
        if (name && strcmp(registry[i]->name, name) == 0) return registry[i];
        size_t at = strlen(names);
        snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", registry[i]->name);
    }
    mt_fail(MT_EINVAL, "no backend named '%s'; the backends are %s", name ? name : "(null)",
            names);
    return NULL;
}

const char *mt_backend_name(const mt_backend *be) { return be->name; }

bool mt_backend_runs(const mt_backend *be) { return be->run_op != NULL; }

bool mt_backend_supports_op(const mt_backend *be, const char *op) {
    for (int k = 0; k < MT_OP_COUNT && op; k++) {
        if (strcmp(mt__op_def((mt_op)k)->name, op) != 0) continue;
        mt_op_call call = {.op = (mt_op)k};
        return be->supports_op(&call);
    }
    return false;
}

mt_status mt_backend_alloc(const mt_backend *be, size_t bytes, void **data) {
    return be->buffer_alloc(bytes, data);
}

void mt_backend_free(const mt_backend *be, void *data) { be->buffer_free(data); }

mt_status mt_backend_copy_in(const mt_backend *be, void *dst, const void *src, size_t bytes) {
    if (!be->copy_in)
        return mt_fail(MT_EUNSUPPORTED, "the backend '%s' holds no data to copy into; compile "
                       "on a backend that does (\"cpu\")", be->name);
    return be->copy_in(dst, src, bytes);
}

mt_status mt_backend_copy_out(const mt_backend *be, void *dst, const void *src, size_t bytes) {
    if (!be->copy_out)
        return mt_fail(MT_EUNSUPPORTED, "the backend '%s' holds no data to copy out of; compile "
                       "on a backend that does (\"cpu\")", be->name);
    return be->copy_out(dst, src, bytes);
}

/* ---- the internal members' defaults (backend_impl.h) -------------------- */

static mt_status cannot_train(const mt_backend *be) {
    return mt_fail(MT_EUNSUPPORTED, "the backend '%s' runs no optimizer; compile the graph "
                   "on one that does (\"cpu\") to train it", be->name);
}

mt_status mt__backend_optim_update(const mt_backend *be, const mt_op_env *env,
                                   const mt_optim_update *u) {
    return be->optim_update ? be->optim_update(env, u) : cannot_train(be);
}

mt_status mt__backend_sumsq(const mt_backend *be, const mt_op_env *env, const float *x,
                            int64_t n, double *out) {
    return be->sumsq ? be->sumsq(env, x, n, out) : cannot_train(be);
}

mt_status mt__backend_stream_create(const mt_backend *be, mt_ctx *ctx, mt_backend_stream **out) {
    *out = NULL;
    return (be->stream_create ? be->stream_create : host_stream_create)(ctx, out);
}

void mt__backend_stream_free(const mt_backend *be, mt_backend_stream *stream) {
    if (stream) (be->stream_free ? be->stream_free : host_stream_free)(stream);
}

mt_status mt__backend_event_record(const mt_backend *be, mt_backend_stream *stream,
                                   mt_backend_event *ev, const mt_request *req) {
    return (be->event_record ? be->event_record : host_event_record)(stream, ev, req);
}

mt_status mt__backend_event_query(const mt_backend *be, mt_backend_stream *stream,
                                  mt_backend_event *ev, bool *done) {
    return (be->event_query ? be->event_query : host_event_query)(stream, ev, done);
}

mt_status mt__backend_event_wait(const mt_backend *be, mt_backend_stream *stream,
                                 mt_backend_event *ev) {
    return (be->event_wait ? be->event_wait : host_event_wait)(stream, ev);
}
