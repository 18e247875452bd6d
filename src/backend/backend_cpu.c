/*
 * backend_cpu.c — the "cpu" backend (backend.h): host memory from
 * aligned_alloc and the op table's kernels, over the graph's kernel threads.
 * Every member is the host loop the graph ran on its buffers before the
 * table had it, so a run on it is bit for bit what it was.
 */
#include "backend/cpu_impl.h"
#include "base/base_impl.h"
#include "ops/kernels.h"

#include <stdlib.h>
#include <string.h>

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

/* A planned bf16 product is the backend's own (cpu_bf16.c); every other
 * call is the op's CPU kernel (cpu_kernels.c). */
static void cpu_run(const mt_op_env *env, const mt_op_call *call) {
    if (call->plan) mt__cpu_run_product(env, call);
    else mt__cpu_kernel(call->op)->run(env, call);
}

/* ---- the optimizer ------------------------------------------------------- */

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

/* ---- the graph's memory --------------------------------------------------- */

static mt_status cpu_buffer_copy(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                                 size_t row_bytes, size_t rows) {
    if (rows == 1) {   /* may overlap its source (a bucket's parts moved side by side) */
        if (row_bytes) memmove(dst, src, row_bytes);
        return MT_OK;
    }
    for (size_t i = 0; i < rows && row_bytes; i++)
        memcpy((char *)dst + i * dst_pitch, (const char *)src + i * src_pitch, row_bytes);
    return MT_OK;
}

static mt_status cpu_buffer_scale(const mt_op_env *env, float *out, const float *in, float s,
                                  int64_t n, bool acc) {
    (void)env;
    mt_kernel_scale(out, in, s, n, acc);   /* the op scale's run */
    return MT_OK;
}

static mt_status cpu_convert(const mt_op_env *env, mt_convert_kind kind, void *dst,
                             const void *src, int64_t n, bool acc) {
    switch (kind) {
    case MT_CONVERT_TO_BF16:
        mt__bf16_cast_pool(env->pool, dst, src, n);
        break;
    case MT_CONVERT_TO_BF16_INPLACE:
        mt__coll_to_bf16_inplace(dst, (size_t)n);
        break;
    case MT_CONVERT_FROM_BF16_INPLACE: {
        /* from the end, so nothing is overwritten before it is read */
        unsigned char *b = dst;
        for (size_t i = (size_t)n; i-- > 0;) {
            uint16_t h;
            memcpy(&h, b + 2 * i, 2);
            float f = mt__bf16_to_f32_1(h);
            memcpy(b + 4 * i, &f, 4);
        }
        break;
    }
    case MT_CONVERT_FROM_BF16:
        mt__coll_from_bf16(dst, src, (size_t)n, acc);
        break;
    }
    return MT_OK;
}

/* Filling one parameter: elements [i0, i1) from (seed, stream, element
 * index), the same numbers on any mesh whatever slice of it a device holds,
 * and whichever kernel thread computes them. */
typedef struct {
    const mt_tensor *t;
    float           *data;      /* t's elements (a shard's row: that row's) */
    uint64_t         seed, stream;
    uint64_t         first;     /* the global index of data[0] */
} init_job;

static void init_range(void *arg, int64_t i0, int64_t i1, int worker) {
    (void)worker;
    const init_job *job = arg;
    const mt_init *in = &job->t->init;
    float *p = job->data;
    switch (in->kind) {
    case MT_INIT_ZEROS:
        memset(p + i0, 0, (size_t)(i1 - i0) * sizeof *p);
        break;
    case MT_INIT_ONES:
        for (int64_t i = i0; i < i1; i++) p[i] = 1.0f;
        break;
    case MT_INIT_NORMAL:   /* p[i] = std · mt_rng_normal(seed, stream, i) */
        mt__rng_normal_fill(job->seed, job->stream, job->first + (uint64_t)i0, i1 - i0, in->std,
                            p + i0);
        break;
    case MT_INIT_UNIFORM:  /* p[i] = std · (2 · mt_rng_uniform(seed, stream, i) - 1) */
        mt__rng_uniform_fill(job->seed, job->stream, job->first + (uint64_t)i0, i1 - i0,
                             in->std, p + i0);
        break;
    }
}

/* A shard: rows of its last dim are runs of consecutive global indices;
 * [i0, i1) counts rows here. */
static void init_shard_rows(void *arg, int64_t i0, int64_t i1, int worker) {
    const init_job *job = arg;
    const mt_tensor *t = job->t;
    const int nd = t->ndim;
    const int64_t row = nd ? t->shape[nd - 1] : 1;
    for (int64_t r = i0; r < i1; r++) {
        /* the global flat index of the row's first element */
        int64_t rem = r, g = 0, stride = 1;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t idx = d == nd - 1 ? 0 : rem % t->shape[d];
            if (d != nd - 1) rem /= t->shape[d];
            g += (t->shard_offset[d] + idx) * stride;
            stride *= t->global_shape[d];
        }
        init_job one = *job;
        one.data = job->data + r * row;
        one.first = (uint64_t)g;
        init_range(&one, 0, row, worker);
    }
}

/* A normal costs ~40 ns (Philox, log, cos; measured 2026-11-30 on the 2-core
 * dev VM), so a 50M-parameter model spends a second or two here: split each
 * parameter over the kernel threads, in chunks worth waking one for. */
static mt_status cpu_param_init(const mt_op_env *env, const mt_tensor *t, uint64_t seed,
                                uint64_t stream) {
    init_job job = {t, t->data, seed, stream, 0};
    if (!t->is_shard) {
        mt_pool_run(env->pool, mt_tensor_numel(t), 4096, init_range, &job);
        return MT_OK;
    }
    int64_t row = t->ndim ? t->shape[t->ndim - 1] : 1;
    mt_pool_run(env->pool, mt_tensor_numel(t) / row, 4096 / row + 1, init_shard_rows, &job);
    return MT_OK;
}

static const mt_backend cpu = {
    .name = "cpu", .buffer_alloc = cpu_alloc, .buffer_free = cpu_free, .buffer_clear = cpu_clear,
    .copy_in = cpu_copy, .copy_out = cpu_copy, .supports_op = cpu_supports, .run_op = cpu_run,
    .scratch = mt__cpu_scratch,
    .optim_update = cpu_optim_update, .sumsq = cpu_sumsq,
    .buffer_copy = cpu_buffer_copy, .buffer_scale = cpu_buffer_scale, .convert = cpu_convert,
    .param_init = cpu_param_init,
    .plans_create = mt__cpu_plans_create, .plan_matmul = mt__cpu_plan_matmul,
    .plans_workspace = mt__cpu_plans_workspace, .plans_free = mt__cpu_plans_free,
    .stream_create = mt__host_stream_create, .stream_free = mt__host_stream_free,
    .event_record = mt__host_event_record, .event_query = mt__host_event_query,
    .event_wait = mt__host_event_wait,
};

const mt_backend *mt_backend_cpu(void) { return &cpu; }
