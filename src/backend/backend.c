/*
 * backend.c — the backend registry, the public face (backend.h), the
 * members' defaults (backend_impl.h) and the "shape-only" backend, which
 * allocates and runs nothing ("cpu" is backend_cpu.c, the host's streams
 * and events backend_host.c). A new backend is one folder of its own (its table, its
 * kernels) plus one line in `registry` below, or, from outside the library,
 * one mt__backend_register call.
 */
#include "backend/backend_impl.h"
#include "backend/cpu_impl.h"   /* the CPU kernels' scratch, which shape-only plans */
#include "base/base_impl.h"   /* the registries */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* its plan's byte counts are the CPU backend's, the kernels' scratch too */
static const mt_backend shape_only = {
    .name = "shape-only", .buffer_alloc = shape_alloc, .buffer_free = shape_free,
    .buffer_clear = shape_clear, .supports_op = shape_supports, .scratch = mt__cpu_scratch,
};

/* ======================================================================== */
/* The registry and the public face                                          */
/* ======================================================================== */

/* getters: the CPU's table lives in backend_cpu.c */
static const mt_backend *(*const registry[])(void) = {
    mt_backend_cpu,
    mt_backend_shape_only,
};
#define N_REGISTRY (int)(sizeof registry / sizeof registry[0])

const mt_backend *mt_backend_shape_only(void) { return &shape_only; }

const mt_backend *mt_backend_at(int i) {
    if (i >= 0 && i < N_REGISTRY) return registry[i]();
    return mt__registry_get(MT__REGISTRY_BACKENDS, i - N_REGISTRY);
}

const mt_backend *mt_backend_find(const char *name) {
    char names[256] = "";
    const mt_backend *be;
    for (int i = 0; (be = mt_backend_at(i)); i++) {
        if (name && strcmp(be->name, name) == 0) return be;
        size_t at = strlen(names);
        snprintf(names + at, sizeof names - at, "%s%s", i ? ", " : "", be->name);
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

static mt_status no_member(const mt_backend *be, const char *member) {
    return mt_fail(MT_EUNSUPPORTED, "the backend '%s' has no %s member, which a graph that "
                   "runs needs; give it one or compile on a backend that has it (\"cpu\")",
                   be->name, member);
}

mt_status mt__backend_copy(const mt_backend *be, void *dst, size_t dst_pitch, const void *src,
                           size_t src_pitch, size_t row_bytes, size_t rows) {
    return be->buffer_copy ? be->buffer_copy(dst, dst_pitch, src, src_pitch, row_bytes, rows)
                           : no_member(be, "buffer_copy");
}

mt_status mt__backend_scale(const mt_backend *be, const mt_op_env *env, float *out,
                            const float *in, float s, int64_t n, bool acc) {
    return be->buffer_scale ? be->buffer_scale(env, out, in, s, n, acc)
                            : no_member(be, "buffer_scale");
}

mt_status mt__backend_convert(const mt_backend *be, const mt_op_env *env, mt_convert_kind kind,
                              void *dst, const void *src, int64_t n, bool acc) {
    return be->convert ? be->convert(env, kind, dst, src, n, acc) : no_member(be, "convert");
}

mt_status mt__backend_param_init(const mt_backend *be, const mt_op_env *env, const mt_tensor *t,
                                 uint64_t seed, uint64_t stream) {
    return be->param_init ? be->param_init(env, t, seed, stream) : no_member(be, "param_init");
}

mt_status mt__backend_plans_create(const mt_backend *be, const mt_op_env *env,
                                   mt_backend_plans **out) {
    *out = NULL;
    if (!be->plans_create)
        return mt_fail(MT_EUNSUPPORTED, "the backend '%s' runs no bf16 products; compile with "
                       "MT_PRECISION_FP32 (--precision fp32) or on a backend that has them "
                       "(\"cpu\")", be->name);
    return be->plans_create(env, out);
}

mt_status mt__backend_plan_matmul(const mt_backend *be, mt_backend_plans *set,
                                  const mt_op_call *call, const mt_product_operands *ops,
                                  const void **plan, size_t *ws_bytes) {
    *plan = NULL;
    *ws_bytes = 0;
    return be->plan_matmul ? be->plan_matmul(set, call, ops, plan, ws_bytes)
                           : no_member(be, "plan_matmul");
}

void mt__backend_plans_workspace(const mt_backend *be, mt_backend_plans *set, void *ws) {
    if (set && be->plans_workspace) be->plans_workspace(set, ws);
}

void mt__backend_plans_free(const mt_backend *be, mt_backend_plans *set) {
    if (set && be->plans_free) be->plans_free(set);
}

mt_status mt__backend_read_f32(const mt_backend *be, const void *src, float *out) {
    return mt_backend_copy_out(be, out, src, sizeof *out);
}

mt_status mt__backend_write_f32(const mt_backend *be, void *dst, float value) {
    return mt_backend_copy_in(be, dst, &value, sizeof value);
}

mt_status mt__backend_stream_create(const mt_backend *be, mt_ctx *ctx, mt_backend_stream **out) {
    *out = NULL;
    return (be->stream_create ? be->stream_create : mt__host_stream_create)(ctx, out);
}

void mt__backend_stream_free(const mt_backend *be, mt_backend_stream *stream) {
    if (stream) (be->stream_free ? be->stream_free : mt__host_stream_free)(stream);
}

mt_status mt__backend_event_record(const mt_backend *be, mt_backend_stream *stream,
                                   mt_backend_event *ev, const mt_request *req) {
    return (be->event_record ? be->event_record : mt__host_event_record)(stream, ev, req);
}

mt_status mt__backend_event_query(const mt_backend *be, mt_backend_stream *stream,
                                  mt_backend_event *ev, bool *done) {
    return (be->event_query ? be->event_query : mt__host_event_query)(stream, ev, done);
}

mt_status mt__backend_event_wait(const mt_backend *be, mt_backend_stream *stream,
                                 mt_backend_event *ev) {
    return (be->event_wait ? be->event_wait : mt__host_event_wait)(stream, ev);
}

mt_status mt__backend_register(const mt_backend *be) {
    if (!be || !be->name || !be->name[0] || !be->buffer_alloc || !be->buffer_free ||
        !be->buffer_clear || !be->supports_op)
        return mt_fail(MT_EINVAL, "mt__backend_register: backend '%s' lacks a required member "
                       "(name, buffer_alloc, buffer_free, buffer_clear, supports_op: "
                       "backend_impl.h)", be && be->name ? be->name : "(null)");
    const mt_backend *have;
    for (int i = 0; (have = mt_backend_at(i)); i++)
        if (strcmp(have->name, be->name) == 0)
            return mt_fail(MT_EINVAL, "mt__backend_register: a backend named '%s' is registered "
                           "already; give yours another name", be->name);
    if (mt__registry_add(MT__REGISTRY_BACKENDS, be) < 0)
        return mt_fail(MT_ENOMEM, "registering backend '%s': the registry holds %d backends "
                       "already", be->name, MT__REGISTRY_MAX);
    return MT_OK;
}
