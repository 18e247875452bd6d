/*
 * backend_impl.h — the backend table (backend.h is its public face): one
 * struct of function pointers per backend, each member's contract written
 * beside it, required or optional with its default (ggml-backend-impl.h's
 * habit). The graph keeps its backend in its op environment
 * (mt_op_env.backend) and reaches memory and kernels only through it;
 * code above the graph reaches a tensor's values through
 * graph/tensor_data.h, which calls copy_in and copy_out here.
 *
 * The backend's memory is what comm moves: the collective ops, the pipeline
 * executor's sends and receives and the mesh checkpoints' gathers hand
 * backend buffers to comm's transports (the threads transport moves host
 * memory, as the CPU's is; NCCL would move CUDA's).
 */
#ifndef MT_BACKEND_IMPL_H
#define MT_BACKEND_IMPL_H

#include "meshtrain/backend.h"
#include "ops/ops_impl.h"

/* One optimizer update of one parameter (or of this device's shard of it),
 * in place, every pointer a buffer of the backend, each (n):
 *   AdamW: g' = gscale·g; m = b1·m + (1-b1)·g'; v = b2·v + (1-b2)·g'²;
 *          p -= lr·((m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd·p)
 *   SGD:   g' = gscale·g; m = momentum·m + g' (m NULL, momentum 0: none);
 *          p -= lr·(m + wd·p)   (v unused) */
typedef enum { MT_BACKEND_SGD = 0, MT_BACKEND_ADAMW = 1 } mt_backend_optim_kind;
typedef struct {
    mt_backend_optim_kind kind;
    float       *p;
    const float *g;
    float       *m, *v;
    int64_t      n;
    float        lr, beta1, beta2, eps, weight_decay, momentum;
    float        gscale;           /* the global-norm clip's factor (1: none) */
    int          t;                /* the 1-based step (AdamW's bias corrections) */
} mt_optim_update;

/* Streams and events, for asynchronous work (a CUDA stream and a
 * cudaEvent_t). A stream is an ordered queue of one device's work, made by
 * its backend; an event is a point in one, which completes when the work
 * queued before it has. On the host (the CPU backend) work is done when its
 * call returns, except comm's asynchronous collectives (mt_all_reduce_start
 * and the like), whose mt_request the event holds until it is waited for. */
typedef struct mt_backend_stream mt_backend_stream;   /* the backend's own */
typedef struct {
    mt_request req;       /* the host's: the comm request the event completes with */
    bool       pending;   /* the host's: req is in flight */
    void      *impl;      /* a backend's own event (CUDA: a cudaEvent_t), else NULL */
} mt_backend_event;

/* The conversions of the member convert: bf16 is round to nearest even,
 * as the bf16 products cast their operands.
 *   MT_CONVERT_TO_BF16       dst (n bf16) = bf16(src (n f32)), over env's
 *                            threads (a weight's bf16 copy, a bf16-stored
 *                            activation); dst and src distinct.
 *   MT_CONVERT_TO_BF16_INPLACE  the n f32 at dst (= src) to bf16 in its
 *                            first 2n bytes (a bf16 gradient reduction's
 *                            input, cast where it lies).
 *   MT_CONVERT_FROM_BF16_INPLACE  back: the n bf16 in the first 2n bytes of
 *                            dst (= src) to f32 over all 4n (exact).
 *   MT_CONVERT_FROM_BF16     dst (n f32) (+)= f32 of src (n bf16) (acc: add);
 *                            a bf16 reduction's result into its output.
 * acc is read by MT_CONVERT_FROM_BF16 alone. */
typedef enum {
    MT_CONVERT_TO_BF16,
    MT_CONVERT_TO_BF16_INPLACE,
    MT_CONVERT_FROM_BF16_INPLACE,
    MT_CONVERT_FROM_BF16,
} mt_convert_kind;

/* A backend's plans for one compiled graph's bf16 products (its own type:
 * the CPU's holds its oneDNN engine and the plans made on it, cpu_bf16.c). */
typedef struct mt_backend_plans mt_backend_plans;

/* What a product planned in bf16 (plan_matmul) reads besides its call, per
 * operand: [0] A (in[0]), [1] B (in[1]). The graph decides both
 * (graph/precision.c). */
typedef struct {
    /* A bf16 copy of the operand in a buffer of the backend that the graph
     * keeps current (a weight's, cast by convert after every change of the
     * weights), or NULL: the run reads the operand as it is stored (cast
     * as it reads an f32 one). */
    const uint16_t *copy16[2];
    /* The f32 operand's bytes hold bf16 values (a weight all-gathered in
     * bf16: p.coll.gather16): read as bf16, never cast. */
    bool            is16[2];
} mt_product_operands;

struct mt_backend {
    /* Required: the registry's name ("cpu"). */
    const char *name;
    /* Required: `bytes` bytes aligned to MT_BACKEND_ALIGN in *data (NULL for
     * 0 bytes); MT_ENOMEM with *data NULL when out of memory, the message
     * naming the size. A backend that holds no data sets *data NULL and
     * returns MT_OK. */
    mt_status (*buffer_alloc)(size_t bytes, void **data);
    /* Required: frees what buffer_alloc gave; NULL is a no-op. */
    void (*buffer_free)(void *data);
    /* Required: sets `bytes` bytes of a buffer to zero (NULL data: nothing). */
    void (*buffer_clear)(void *data, size_t bytes);
    /* Optional (NULL: MT_EUNSUPPORTED): host memory into the backend's
     * memory, and back. */
    mt_status (*copy_in)(void *dst, const void *src, size_t bytes);
    mt_status (*copy_out)(void *dst, const void *src, size_t bytes);
    /* Required: whether run_op runs this call. */
    bool (*supports_op)(const mt_op_call *call);
    /* Optional (NULL: the backend runs nothing; a graph compiled on it
     * refuses to run): runs one call on its buffers, with its own kernels
     * (the CPU's: ops' mt_op_kernel; a collective records its failure in
     * *env->status). */
    void (*run_op)(const mt_op_env *env, const mt_op_call *call);
    /* Optional (NULL: none): the floats of scratch run_op needs for the
     * call, for each worker of env->pool, or with *caller set for the
     * calling thread alone (the collectives, which lend the pool none); the
     * graph's plan allocates the most any call asks for (env->scratch). */
    size_t (*scratch)(const mt_op_call *call, bool *caller);

    /* ---- data outside the graph: the optimizer ---- */
    /* Optional (NULL: the backend cannot train: mt_optim_step fails with
     * MT_EUNSUPPORTED, naming it; the state is still planned): one update
     * (mt_optim_update above) with env's threads. Called once per
     * parameter per step, never per element. */
    mt_status (*optim_update)(const mt_op_env *env, const mt_optim_update *u);
    /* Optional (NULL: as optim_update): Σ x² over n f32 elements of a
     * buffer, in double (a gradient's part of the global norm). */
    mt_status (*sumsq)(const mt_op_env *env, const float *x, int64_t n, double *out);

    /* ---- memory the graph works on (optional, but a backend that runs
     * needs them all; NULL: the caller fails with MT_EUNSUPPORTED naming the
     * backend and the member). Every pointer is a buffer of the backend; the
     * host never dereferences one outside a member. ---- */
    /* Copies `rows` rows of row_bytes bytes: row i from src + i·src_pitch to
     * dst + i·dst_pitch, in order. Rows of different i must not overlap; a
     * single row may overlap its source (as memmove). The gradient buckets'
     * packing (a shard of every part: a strided copy) and closing. */
    mt_status (*buffer_copy)(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                             size_t row_bytes, size_t rows);
    /* out (n) (+)= s · in (n), f32 (acc: add to out), bit for bit the op
     * scale's run: the deferred reductions' completions, the buckets'
     * unpacking and the later-reduction passes' sums. out and in distinct. */
    mt_status (*buffer_scale)(const mt_op_env *env, float *out, const float *in, float s,
                              int64_t n, bool acc);
    /* One conversion between f32 and bf16 (mt_convert_kind below) of n
     * elements, with env's threads where it says so. */
    mt_status (*convert)(const mt_op_env *env, mt_convert_kind kind, void *dst, const void *src,
                         int64_t n, bool acc);
    /* Fills parameter t's buffer (t->data, numel f32) from its initialiser
     * t->init: element i is the function of (seed, stream, global index of
     * i) that mt_rng_normal / mt_rng_uniform give (times t->init.std), so a
     * shard (t->is_shard: t->shard_offset within t->global_shape) holds the
     * one-device numbers, whichever threads compute them. */
    mt_status (*param_init)(const mt_op_env *env, const mt_tensor *t, uint64_t seed,
                            uint64_t stream);

    /* ---- bf16 products, planned when a graph compiles with
     * MT_PRECISION_BF16 (optional, all four or none; NULL: the backend has
     * none, and such a compile fails with MT_EUNSUPPORTED naming it). The
     * graph decides which calls are bf16 products and what their operands
     * are (mt_product_operands); the backend makes and runs the plans. ---- */
    /* An empty set of plans, in *out, for one graph whose calls run with
     * env's threads. MT_EUNSUPPORTED, saying how to get them, where this
     * build runs no bf16 products (the CPU's without oneDNN). */
    mt_status (*plans_create)(const mt_op_env *env, mt_backend_plans **out);
    /* Plans `call` (MATMUL, GEMM or LINEAR, every dim > 0) in the set as a
     * bf16 product: the operands rounded to bf16 (to nearest even), the
     * products accumulated and written in f32; an accumulating call may
     * also run as out = . *plan goes into call->plan, after which run_op
     * runs the call so; *ws_bytes is the workspace its runs need. MT_ENOMEM
     * or MT_EINTERNAL (the backend's library refused the shape) naming why. */
    mt_status (*plan_matmul)(mt_backend_plans *set, const mt_op_call *call,
                             const mt_product_operands *ops, const void **plan,
                             size_t *ws_bytes);
    /* Lends every plan of the set `ws`, a buffer of the backend of at least
     * the largest ws_bytes: the graph's products run one at a time and
     * share it. Called once, after the last plan_matmul. */
    void (*plans_workspace)(mt_backend_plans *set, void *ws);
    /* Frees the set and its plans (not the copies or the workspace the
     * graph lent them); NULL is a no-op. */
    void (*plans_free)(mt_backend_plans *set);

    /* ---- streams and events (optional, all or none; NULL: the host's, as
     * the CPU's below: work is done when its call returns) ---- */
    /* A stream for the device `ctx` (NULL off a mesh) in *out. */
    mt_status (*stream_create)(mt_ctx *ctx, mt_backend_stream **out);
    /* Frees it; NULL is a no-op. The events recorded on it must have been
     * waited for (a host event holds its comm request until then). */
    void (*stream_free)(mt_backend_stream *stream);
    /* Records in *ev the point the stream has reached. `req`, when not NULL,
     * is the comm request of the asynchronous work just started for that
     * stream: the host event completes when it does (a backend that queues
     * its collectives on the stream itself, as NCCL does, ignores it). */
    mt_status (*event_record)(mt_backend_stream *stream, mt_backend_event *ev,
                              const mt_request *req);
    /* Whether *ev has completed, without blocking. comm has no test of a
     * request, so a host event that holds one says false until waited for:
     * a caller may use it to order work, never spin on it. */
    mt_status (*event_query)(mt_backend_stream *stream, mt_backend_event *ev, bool *done);
    /* Makes the stream's later work wait for *ev (the host: blocks until
     * it completes, mt_wait on its request); the request's failure is
     * returned, as mt_wait returns it. Waiting twice is a no-op. */
    mt_status (*event_wait)(mt_backend_stream *stream, mt_backend_event *ev);
};

/* Registers a backend from outside the library (its table must outlive
 * every use): mt_backend_find and mt_backend_at then reach it after the
 * built-in ones, and a run names it (mt_train_config.backend) as it names
 * "cpu". MT_EINVAL naming the table when a required member (name,
 * buffer_alloc, buffer_free, buffer_clear, supports_op) is missing or the
 * name is taken; MT_ENOMEM when the registry is full. */
mt_status mt__backend_register(const mt_backend *be);

/* The members above through their defaults (backend.c): the optimizer's
 * return MT_EUNSUPPORTED, naming the backend, when it has none; the streams'
 * are the host's when it has none. */
mt_status mt__backend_optim_update(const mt_backend *be, const mt_op_env *env,
                                   const mt_optim_update *u);
mt_status mt__backend_sumsq(const mt_backend *be, const mt_op_env *env, const float *x,
                            int64_t n, double *out);
/* The graph's memory members through their defaults: MT_EUNSUPPORTED,
 * naming the backend and the member, where it has none. */
mt_status mt__backend_copy(const mt_backend *be, void *dst, size_t dst_pitch, const void *src,
                           size_t src_pitch, size_t row_bytes, size_t rows);
mt_status mt__backend_scale(const mt_backend *be, const mt_op_env *env, float *out,
                            const float *in, float s, int64_t n, bool acc);
mt_status mt__backend_convert(const mt_backend *be, const mt_op_env *env, mt_convert_kind kind,
                              void *dst, const void *src, int64_t n, bool acc);
mt_status mt__backend_param_init(const mt_backend *be, const mt_op_env *env, const mt_tensor *t,
                                 uint64_t seed, uint64_t stream);
/* The bf16 products' members through their defaults: without them
 * plans_create fails with MT_EUNSUPPORTED naming the backend (and the rest
 * are never reached); plans_free of NULL is a no-op. */
mt_status mt__backend_plans_create(const mt_backend *be, const mt_op_env *env,
                                   mt_backend_plans **out);
mt_status mt__backend_plan_matmul(const mt_backend *be, mt_backend_plans *set,
                                  const mt_op_call *call, const mt_product_operands *ops,
                                  const void **plan, size_t *ws_bytes);
void      mt__backend_plans_workspace(const mt_backend *be, mt_backend_plans *set, void *ws);
void      mt__backend_plans_free(const mt_backend *be, mt_backend_plans *set);
/* A scalar's f32 value (the loss) out of a buffer, or into one (the
 * backward's seed): copy_out and copy_in of 4 bytes. */
mt_status mt__backend_read_f32(const mt_backend *be, const void *src, float *out);
mt_status mt__backend_write_f32(const mt_backend *be, void *dst, float value);

/* The host's streams and events: every backend's default, and the CPU's. */
mt_status mt__host_stream_create(mt_ctx *ctx, mt_backend_stream **out);
void      mt__host_stream_free(mt_backend_stream *stream);
mt_status mt__host_event_record(mt_backend_stream *stream, mt_backend_event *ev,
                                const mt_request *req);
mt_status mt__host_event_query(mt_backend_stream *stream, mt_backend_event *ev, bool *done);
mt_status mt__host_event_wait(mt_backend_stream *stream, mt_backend_event *ev);

mt_status mt__backend_stream_create(const mt_backend *be, mt_ctx *ctx, mt_backend_stream **out);
void      mt__backend_stream_free(const mt_backend *be, mt_backend_stream *stream);
mt_status mt__backend_event_record(const mt_backend *be, mt_backend_stream *stream,
                                   mt_backend_event *ev, const mt_request *req);
mt_status mt__backend_event_query(const mt_backend *be, mt_backend_stream *stream,
                                  mt_backend_event *ev, bool *done);
mt_status mt__backend_event_wait(const mt_backend *be, mt_backend_stream *stream,
                                 mt_backend_event *ev);

#endif
