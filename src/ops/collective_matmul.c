/*
 * collective_matmul.c — collective matmuls: a tensor-parallel product whose
 * operand is split over a group of devices, decomposed into per-chunk pieces
 * that travel around the ring r -> r+1 (XLA's "collective matmul"; the JAX
 * scaling book's sharded matmuls). Every step starts the ppermute of the next
 * piece (mt_ppermute_start), runs the current piece's products meanwhile, and
 * only then waits: the transfer is in flight while the product runs.
 *
 *   ag_linear  Y = all_gather(x) · op(w) (+ bias): step s holds chunk
 *              (r - s) mod P of x and writes its rows of Y, while that chunk
 *              goes on to rank r+1 and chunk (r - s - 1) arrives from r-1.
 *              The arriving chunks land straight in the saved gathered x
 *              (chunk-major, as the ring moves them), which the weight
 *              gradient reads later: no other buffer, no copy but the
 *              device's own chunk.
 *   linear_rs  out = block r of Σ_group h · op(w) (reduce-scatter): step t
 *              computes this device's partial product for chunk
 *              (r - t - 1) mod P while the running sum of the chunk before
 *              goes to r+1 and the one for this chunk arrives from r-1; the
 *              arrival is added after the product. After P steps the device
 *              holds the whole sum of its own chunk (in ring order: the
 *              rounding differs from psum_scatter's rank order).
 *
 * The layouts, shapes and parameters are p.cm's (ops_impl.h): a chunk is
 * `outer` blocks of R rows (sequence parallelism's (B, T/P, C): B blocks of
 * T/P rows). A step's product is one gemm of all outer·R rows on the kernel
 * pool (mt__gemm_pool): ag_linear writes it to scratch and moves the rows
 * to their blocks of Y (adding the bias on the way), linear_rs gathers its
 * chunk's rows of h into scratch first. A gemm per block would pack w
 * once per block. Measured 2026-11-30 on the 2-core dev VM (Open BLAS
 * 0.3.21 as Cooperlake, one kernel thread a device; a c768 GPT layer's
 * shapes on tensor=2: outer 4 blocks of R 128 rows): on one core alone, a
 * gemm per block is 15-20% slower than one gemm of all rows, one gemm a
 * step plus the copy 3-7%; a layer's forward and backward on both devices
 * went from 9-10% to 3-4% slower than the unfused layer's (all_gather,
 * linear, psum_scatter). What remains is w packed once a step and the copy
 * (see "Overlap, honestly").
 *
 * As the other collective ops (collective.c), these run on the device's own
 * thread with env->ctx, and a failed transfer goes to *env->status (the
 * first failure sticks; out is then unspecified). A transfer whose start
 * finds comm's request queue full (MT_MAX_PENDING held by the caller, e.g.
 * the W phase's deferred gradient reductions) runs blocking instead: the
 * same result, without the overlap. Every device of the group then does the
 * same, as comm requires every device to hold as many requests.
 *
 * Overlap, honestly: on the threads transport the devices move the data
 * themselves, so a started ppermute moves while some device of the group
 * waits (a device that finishes its product first moves its peers' chunks
 * too); on MPI a started request runs at its wait (comm's queue), as every
 * asynchronous collective there does today. So nothing moves beside the
 * products unless a core is idle: with every core computing (a device a
 * core), the ring saves only what the unfused collectives cost (their
 * rendezvous, the dimensioned forms' block swaps, about 5% of that layer),
 * less its own copies and waits (about 2%), against the split products'
 * extra (about 4% of the layer). Doing the threads transport's copies at
 * the start instead of the wait measured the same. A timing-only variant
 * with no ring and no copy at all (the transfer, then one gemm of all rows)
 * was only about 1% faster than the unfused layer. Each step's transfer is
 * a span on the device's trace ("ppermute (async) '<axes>'", or the
 * blocking "ppermute" of a small one), with its bytes.
 */
#include "ops/kernels.h"
#include "ops/ops_impl.h"

#include <string.h>

#define F32(t) ((float *)(t)->data)
#define NUMEL(t) mt_tensor_numel(t)

/* ======================================================================== */
/* Helpers                                                                   */
/* ======================================================================== */

static void record(const mt_op_env *env, mt_status s) {
    if (s != MT_OK && env->status && *env->status == MT_OK) *env->status = s;
}

/* The device and its group: P (checked against the build's) and the rank r.
 * False, with the failure recorded, when the call cannot run (exec.c's
 * run_node adds the op's name: op_table.c calls these kernels, so they do
 * not call it). */
static bool group(const mt_op_env *env, const mt_op_call *c, int *r) {
    const mt_cm_params *p = &c->p.cm;
    if (!env->ctx) {
        record(env, mt_fail(MT_ESTATE, "collective matmul on '%s' has no device to run on; "
                            "call mt_graph_set_ctx before building the graph", c->out->name));
        return false;
    }
    int P = mt_axis_size(env->ctx, p->axes);
    if (P != p->P) {
        record(env, mt_fail(MT_ESTATE, "collective matmul on '%s' was built for a group of "
                            "%d devices but runs on one of %d; run the graph on the device it "
                            "was built on", c->out->name, p->P, P));
        return false;
    }
    *r = mt_axis_index(env->ctx, p->axes);
    return true;
}

/* One ring step's transfer: started, or (comm's queue full) already done. */
typedef struct {
    mt_request req;
    bool       started;
} ring_xfer;

/* recv (count) = send of rank r-1; send goes to rank r+1. Starts it, or runs
 * it blocking when the caller's own requests fill comm's queue. */
static mt_status xfer_start(const mt_op_env *env, const mt_cm_params *p, const float *send,
                            float *recv, size_t count, ring_xfer *x) {
    x->started = false;
    mt_status s = mt_ppermute_start(env->ctx, p->axes, send, recv, count, MT_F32, p->ring, p->P,
                                    &x->req);
    if (s == MT_OK) {
        x->started = true;
        return MT_OK;
    }
    if (s != MT_ESTATE) return s;
    return mt_ppermute(env->ctx, p->axes, send, recv, count, MT_F32, p->ring, p->P);
}

static mt_status xfer_wait(const mt_op_env *env, ring_xfer *x) {
    return x->started ? mt_wait(env->ctx, &x->req) : MT_OK;
}

/* op(w) is wᵀ (w (N,K), tb) unless w_kn (w (K,N)). */
static bool trans_w(const mt_cm_params *p) { return !p->w_kn; }

/* Rows between a step's dense buffer and their blocks of a whole operand:
 * `nb` blocks of `rows` rows of `cols` floats, block b from src +
 * b·src_stride to dst + b·dst_stride (strides in floats); dst (+)= src
 * (+ bias (cols) on every row when given). Split over the kernel pool. */
typedef struct {
    float       *dst;
    const float *src, *bias;
    int64_t      rows, cols, src_stride, dst_stride;
    bool         acc;
} block_move;

static void range_move(void *arg, int64_t i0, int64_t i1, int worker) {
    (void)worker;
    const block_move *m = arg;
    for (int64_t i = i0; i < i1; i++) {   /* row i of all nb·rows */
        const int64_t b = i / m->rows, k = i % m->rows;
        float *restrict d = m->dst + b * m->dst_stride + k * m->cols;
        const float *restrict s = m->src + b * m->src_stride + k * m->cols;
        const float *restrict bias = m->bias;
        if (bias && m->acc)
            for (int64_t n = 0; n < m->cols; n++) d[n] += s[n] + bias[n];
        else if (bias)
            for (int64_t n = 0; n < m->cols; n++) d[n] = s[n] + bias[n];
        else if (m->acc)
            for (int64_t n = 0; n < m->cols; n++) d[n] += s[n];
        else
            memcpy(d, s, (size_t)m->cols * sizeof *d);
    }
}

static void move_blocks(const mt_op_env *env, const block_move *m, int64_t nb) {
    if (m->cols == 0) return;   /* an empty shard */
    int64_t grain = (16384 + m->cols - 1) / m->cols;   /* ~16K floats a thread at least */
    mt_pool_run(env->pool, nb * m->rows, grain, range_move, (void *)m);
}

/* ======================================================================== */
/* ag_linear                                                                 */
/* ======================================================================== */

/* The products of one step: chunk j (outer,R,K) · op(w) (+ bias) into Y's
 * rows [o, j] (R,N) for every o. beta 1 adds to Y (acc). With more than one
 * block (outer > 1) the rows of Y are not contiguous: one product of all
 * outer·R rows into tmp (outer,R,N), then the rows to their places, the
 * bias added on the way. A product per block would pack w again for each:
 * 15-20% slower than one product of all rows for R 128, K 768, N 1152-1536
 * on one core (2026-11-30), against 3-7% for this one and the copy. */
static void ag_step(const mt_op_env *env, const mt_op_call *c, const float *chunk, int j,
                    float beta, float *tmp) {
    const mt_cm_params *p = &c->p.cm;
    const float *w = F32(c->in[1]), *bias = c->n_in == 3 ? F32(c->in[2]) : NULL;
    float *y = F32(c->out);   /* (outer,P,R,N) */
    if (p->outer == 1) {
        mt__gemm_pool(env, false, trans_w(p), p->R, p->N, p->K, chunk, w, bias,
                      y + j * p->R * p->N, beta);
        return;
    }
    mt__gemm_pool(env, false, trans_w(p), p->outer * p->R, p->N, p->K, chunk, w, NULL, tmp, 0.0f);
    const block_move m = {.dst = y + j * p->R * p->N, .src = tmp, .bias = bias, .rows = p->R,
                          .cols = p->N, .src_stride = p->R * p->N,
                          .dst_stride = p->P * p->R * p->N, .acc = beta != 0.0f};
    move_blocks(env, &m, p->outer);
}

/* AG_LINEAR: out (outer,P,R,N) (+)= gather(in0 (outer,R,K)) · op(w) (+ bias);
 * the gathered x (P,outer,R,K) into aux[0] (forward) or out2 (backward). */
void mt__run_ag_linear(const mt_op_env *env, const mt_op_call *c) {
    int r;
    if (!group(env, c, &r)) return;
    const mt_cm_params *p = &c->p.cm;
    const int P = p->P;
    const size_t chunk = (size_t)(p->outer * p->R * p->K);      /* floats of one chunk */
    float *gathered = F32(c->aux[0] ? c->aux[0] : c->out2);     /* (P,outer,R,K) */
    const float *x = F32(c->in[0]);                              /* (outer,R,K), chunk r */
    const float beta = c->acc ? 1.0f : 0.0f;
    const float *cur = x;
    for (int s = 0; s < P; s++) {
        const int j = (r - s + P) % P, next = (j - 1 + P) % P;   /* held now; arriving */
        ring_xfer xf;
        if (s < P - 1) {
            mt_status st = xfer_start(env, p, cur, gathered + (size_t)next * chunk, chunk, &xf);
            if (st != MT_OK) { record(env, st); return; }
        }
        ag_step(env, c, cur, j, beta, env->scratch);
        /* the device's own chunk joins the saved copy while the first transfer runs */
        if (s == 0) memcpy(gathered + (size_t)r * chunk, x, chunk * sizeof(float));
        if (s < P - 1) {
            mt_status st = xfer_wait(env, &xf);
            if (st != MT_OK) { record(env, st); return; }
            cur = gathered + (size_t)next * chunk;
        }
    }
}

/* ======================================================================== */
/* linear_rs                                                                 */
/* ======================================================================== */

/* dst (outer,R,N) = beta · dst + this device's partial product for chunk j:
 * h's rows [o, j] (R,K) · op(w) for every o. One product of all outer·R
 * rows, gathered into tmp (outer,R,K) first when they are not contiguous
 * (outer > 1; see ag_step). */
static void rs_partial(const mt_op_env *env, const mt_op_call *c, int j, float *dst, float beta,
                       float *tmp) {
    const mt_cm_params *p = &c->p.cm;
    const float *h = F32(c->in[0]), *w = F32(c->in[1]);     /* (outer,P,R,K) */
    const float *a = h + j * p->R * p->K;
    if (p->outer > 1) {
        const block_move m = {.dst = tmp, .src = a, .rows = p->R, .cols = p->K,
                              .src_stride = p->P * p->R * p->K, .dst_stride = p->R * p->K};
        move_blocks(env, &m, p->outer);
        a = tmp;
    }
    mt__gemm_pool(env, false, trans_w(p), p->outer * p->R, p->N, p->K, a, w, NULL, dst, beta);
}

/* LINEAR_RS: out (outer,R,N) (+)= block r of Σ_group in0 (outer,P,R,K) · op(w).
 * Scratch: three sums of one chunk (outer,R,N): the one being sent, the one
 * being computed, the one arriving; then a chunk's rows of h (outer > 1). */
void mt__run_linear_rs(const mt_op_env *env, const mt_op_call *c) {
    int r;
    if (!group(env, c, &r)) return;
    const mt_cm_params *p = &c->p.cm;
    const int P = p->P;
    const size_t n = (size_t)(p->outer * p->R * p->N);   /* floats of one chunk of out */
    /* (outer,R,N) each: the sums computed and sent, alternately; the arriving one */
    float *sum[2] = {NULL, NULL}, *arriving = NULL;
    if (P > 1) {
        sum[0] = env->scratch;
        sum[1] = env->scratch + n;
        arriving = env->scratch + 2 * n;
    }
    float *rows_h = env->scratch + (P > 1 ? 3 * n : 0);   /* (outer,R,K): a chunk's rows of h */
    for (int t = 0; t < P; t++) {
        const int j = (r - t - 1 + P) % P;               /* the chunk summed at this step */
        const bool last = t == P - 1;                    /* j == r: the result */
        float *dst = last ? F32(c->out) : sum[t & 1];
        ring_xfer xf;
        if (t > 0) {   /* the sum of step t-1 goes on; the neighbour's for chunk j arrives */
            mt_status st = xfer_start(env, p, sum[(t - 1) & 1], arriving, n, &xf);
            if (st != MT_OK) { record(env, st); return; }
        }
        rs_partial(env, c, j, dst, last && c->acc ? 1.0f : 0.0f, rows_h);
        if (t > 0) {
            mt_status st = xfer_wait(env, &xf);
            if (st != MT_OK) { record(env, st); return; }
            mt_kernel_scale(dst, arriving, 1.0f, (int64_t)n, true);
        }
    }
}

/* ======================================================================== */
/* cm_wgrad                                                                  */
/* ======================================================================== */

/* Row offset of block [o, j] in a chunk-major (P,outer,R,·) or whole
 * (outer,P,R,·) operand. */
static int64_t block_row(const mt_cm_params *p, bool chunk_major, int64_t o, int64_t j) {
    return (chunk_major ? j * p->outer + o : o * p->P + j) * p->R;
}

/* CM_WGRAD: out (K,N) (+)= Σ_{o,j} in0[o,j]ᵀ (R,K) · in1[o,j] (R,N). When both
 * operands order their blocks alike (same layout, or one outer block, where
 * the layouts coincide) that is one product over all rows; otherwise one per
 * block, accumulating: for R 128 and the c768 GPT's shapes as fast on one
 * core as one product of all rows (2026-11-30), so the saved gathered x
 * stays in the order the ring moves it. */
void mt__run_cm_wgrad(const mt_op_env *env, const mt_op_call *c) {
    const mt_cm_params *p = &c->p.cm;
    const float *a = F32(c->in[0]), *b = F32(c->in[1]);
    float *out = F32(c->out);   /* (K,N) */
    float beta = c->acc ? 1.0f : 0.0f;
    if (p->outer == 1 || p->a_cm == p->b_cm) {
        mt__gemm_pool(env, true, false, p->K, p->N, p->outer * p->P * p->R, a, b, NULL, out, beta);
        return;
    }
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t j = 0; j < p->P; j++) {
            mt__gemm_pool(env, true, false, p->K, p->N, p->R, a + block_row(p, p->a_cm, o, j) * p->K,
                          b + block_row(p, p->b_cm, o, j) * p->N, NULL, out, beta);
            beta = 1.0f;
        }
}

/* ======================================================================== */
/* Costs and scratch                                                         */
/* ======================================================================== */

/* FLOPs: the products (2·rows·K·N), linear_rs's additions of the arriving
 * sums, the bias. Bytes: memory traffic, as the other ops count it: the
 * operands read, w once per step, the result written (read too when
 * accumulating), and for the rings every transferred chunk written on
 * arrival and read by its product or addition. (explain's "collective
 * bytes" for these ops, as nccl-tests counts an all-gather's output or a
 * reduce-scatter's input, come from mt_graph_node.) */
void mt__cost_cm(const mt_op_call *c, double *fl, double *by) {
    const mt_cm_params *p = &c->p.cm;
    const double P = p->P, K = (double)p->K, N = (double)p->N;
    const double rows = (double)p->outer * (double)p->R;   /* of one chunk */
    const double res = c->acc ? 2 : 1;
    switch (c->op) {
    case MT_OP_AG_LINEAR:
        *fl = 2 * P * rows * K * N + (c->n_in == 3 ? P * rows * N : 0);
        /* x read; gathered x written (arrivals, own copy) and read; w per step; Y;
         * with outer blocks, each step's products through scratch */
        *by = 4 * (rows * K + 2 * P * rows * K + P * K * N + res * P * rows * N +
                   (c->n_in == 3 ? N : 0) + (p->outer > 1 ? 2 * P * rows * N : 0));
        break;
    case MT_OP_LINEAR_RS:
        *fl = 2 * P * rows * K * N + (P - 1) * rows * N;
        /* h; w per step; P partial sums written; P-1 arrivals written, read, added;
         * with outer blocks, each chunk's rows of h through scratch */
        *by = 4 * (P * rows * K + P * K * N + P * rows * N + 3 * (P - 1) * rows * N +
                   (res - 1) * rows * N + (p->outer > 1 ? 2 * P * rows * K : 0));
        break;
    default: {   /* MT_OP_CM_WGRAD */
        double all = P * rows;
        *fl = 2 * all * K * N;
        *by = 4 * (all * K + all * N + res * K * N);
        break;
    }
    }
}

/* linear_rs: three sums of one chunk of out, and the chunk's rows of h
 * gathered (outer > 1); ag_linear: one step's products (outer > 1), before
 * they go to their rows. */
size_t mt__scratch_cm(const mt_op_call *c) {
    const mt_cm_params *p = &c->p.cm;
    const size_t rows = (size_t)(p->outer * p->R);
    if (c->op == MT_OP_AG_LINEAR) return p->outer > 1 ? rows * (size_t)p->N : 0;
    if (c->op != MT_OP_LINEAR_RS) return 0;
    return (p->P > 1 ? 3 * rows * (size_t)p->N : 0) + (p->outer > 1 ? rows * (size_t)p->K : 0);
}
