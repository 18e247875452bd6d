/*
 * op_table.c — one entry per op: how to run it on its buffers, how to emit
 * its backward nodes (forward ops only), and what it costs.
 *
 * Node attributes (i[], f[]) are set by builders.c for forward ops and by the
 * backward builders here for backward ops; each entry says what it reads.
 */
#include "graph/graph_impl.h"
#include "ops/kernels.h"

#include <string.h>

#define F32(t) ((float *)(t)->data)
#define I32(t) ((const int32_t *)(t)->data)
#define NUMEL(t) mt_tensor_numel(t)

/* Work below this many elements per thread is not worth waking a thread for
 * (a wake costs a few µs; 16K floats take about that long to stream). */
#define GRAIN_ELEMS 16384

/* What a range function needs: the node, the graph, per-worker partial sums. */
typedef struct {
    mt_graph      *g;
    const mt_node *n;
    double         partial[MT_POOL_MAX];
} par_ctx;

/* Runs fn over [0, items) on the graph's pool, in chunks of at least enough
 * items to make GRAIN_ELEMS elements of work (item_elems each). */
static void par_run(mt_graph *g, const mt_node *n, par_ctx *ctx, int64_t items, int64_t item_elems,
                    mt_range_fn fn) {
    ctx->g = g;
    ctx->n = n;
    int64_t grain = GRAIN_ELEMS / (item_elems > 0 ? item_elems : 1);
    mt_pool_run(g->pool, items, grain < 1 ? 1 : grain, fn, ctx);
}

static double sum_partials(const par_ctx *ctx, const mt_graph *g) {
    double s = 0;
    for (int w = 0; w < mt_pool_size(g->pool); w++) s += ctx->partial[w];
    return s;
}

/* ======================================================================== */
/* Run                                                                       */
/* ======================================================================== */

/* MATMUL, GEMM and LINEAR run as blocks of C, one per kernel thread, each a
 * single-threaded sgemm: rows of C when M is the larger side, else columns. */
typedef struct {
    bool         ta, tb, split_rows;
    int64_t      M, N, K, block;
    const float *A, *B, *bias;
    float       *C;
    float        beta;
} gemm_job;

static void range_gemm(void *arg, int64_t b0, int64_t b1, int w) {
    const gemm_job *j = arg;
    int64_t lda = j->ta ? j->M : j->K, ldb = j->tb ? j->K : j->N;
    int64_t lo = b0 * j->block, hi = b1 * j->block;
    if (j->split_rows) {
        if (hi > j->M) hi = j->M;
        const float *A = j->ta ? j->A + lo : j->A + lo * lda;
        mt_kernel_gemm(j->ta, j->tb, hi - lo, j->N, j->K, 1.0f, A, lda, j->B, ldb, j->beta,
                       j->C + lo * j->N, j->N);
        if (j->bias) mt_kernel_bias_add(j->C + lo * j->N, j->bias, hi - lo, j->N);
    } else {
        if (hi > j->N) hi = j->N;
        const float *B = j->tb ? j->B + lo * ldb : j->B + lo;
        mt_kernel_gemm(j->ta, j->tb, j->M, hi - lo, j->K, 1.0f, j->A, lda, B, ldb, j->beta,
                       j->C + lo, j->N);
        /* a column block of a biased product: add the bias slice row by row */
        for (int64_t r = 0; j->bias && r < j->M; r++)
            mt_kernel_bias_add(j->C + r * j->N + lo, j->bias + lo, 1, hi - lo);
    }
}

static void gemm_parallel(mt_graph *g, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                          const float *A, const float *B, const float *bias, float *C, float beta) {
    gemm_job j = {ta, tb, M >= N, M, N, K, 16, A, B, bias, C, beta};
    int64_t side = j.split_rows ? M : N;
    /* blocks of 16 (a multiple of the sgemm micro-kernel) and at least ~1
     * MFLOP each: a smaller product is not worth a second thread */
    int64_t min_blocks = (int64_t)(1e6 / (2.0 * (double)(j.split_rows ? N : M) * (double)K * 16)) + 1;
    mt_pool_run(g->pool, (side + 15) / 16, min_blocks, range_gemm, &j);
}

/* MATMUL and GEMM: i = {ta | tb<<1, M, N, K}; out (M,N) (+)= op(in0) · op(in1). */
static void run_gemm(mt_graph *g, const mt_node *n) {
    gemm_parallel(g, n->i[0] & 1, n->i[0] & 2, n->i[1], n->i[2], n->i[3], F32(n->in[0]),
                  F32(n->in[1]), NULL, F32(n->out), n->acc ? 1.0f : 0.0f);
}

/* LINEAR: i = {-, rows, OC, C}; out (rows,OC) = x (rows,C) · w (OC,C)ᵀ + b (OC). */
static void run_linear(mt_graph *g, const mt_node *n) {
    gemm_parallel(g, false, true, n->i[1], n->i[2], n->i[3], F32(n->in[0]), F32(n->in[1]),
                  n->n_in == 3 ? F32(n->in[2]) : NULL, F32(n->out), 0.0f);
}

/* ADD, SUB, MUL: out = a ∘ b, b broadcast over rows of its numel nb. Split
 * over those rows (or over elements when shapes are equal), so every chunk
 * starts at a multiple of nb. */
static void range_binary(void *arg, int64_t r0, int64_t r1, int w) {
    const mt_node *n = ((par_ctx *)arg)->n;
    int64_t nb = NUMEL(n->in[1]), same = NUMEL(n->in[0]) == nb;
    int64_t off = same ? r0 : r0 * nb, len = same ? r1 - r0 : (r1 - r0) * nb;
    float *out = F32(n->out) + off;
    const float *a = F32(n->in[0]) + off, *b = F32(n->in[1]) + (same ? off : 0);
    int64_t blen = same ? len : nb;
    if (n->op == MT_OP_ADD) mt_kernel_add_fwd(out, a, b, len, blen);
    else if (n->op == MT_OP_SUB) mt_kernel_sub_fwd(out, a, b, len, blen);
    else mt_kernel_mul_fwd(out, a, b, len, blen);
}
static void run_binary(mt_graph *g, const mt_node *n) {
    par_ctx ctx;
    int64_t nb = NUMEL(n->in[1]), na = NUMEL(n->in[0]);
    if (na == nb) par_run(g, n, &ctx, na, 1, range_binary);
    else par_run(g, n, &ctx, na / nb, nb, range_binary);
}
/* SCALE, SCALE_BWD: out (+)= f[0] · in0. */
static void run_scale(mt_graph *g, const mt_node *n) {
    mt_kernel_scale(F32(n->out), F32(n->in[0]), n->f[0], NUMEL(n->out), n->acc);
}
static void range_gelu(void *arg, int64_t e0, int64_t e1, int w) {
    const mt_node *n = ((par_ctx *)arg)->n;
    mt_kernel_gelu_fwd(F32(n->out) + e0, F32(n->in[0]) + e0, e1 - e0);
}
static void run_gelu(mt_graph *g, const mt_node *n) {
    par_ctx ctx;
    par_run(g, n, &ctx, NUMEL(n->out), 1, range_gelu);
}
/* LAYERNORM: i = {rows, C}; aux = {mean, rstd}. Rows are independent. */
static void range_layernorm(void *arg, int64_t r0, int64_t r1, int w) {
    const mt_node *n = ((par_ctx *)arg)->n;
    int64_t C = n->i[1];
    mt_kernel_layernorm_fwd(F32(n->out) + r0 * C, F32(n->aux[0]) + r0, F32(n->aux[1]) + r0,
                            F32(n->in[0]) + r0 * C, F32(n->in[1]), F32(n->in[2]), r1 - r0, C);
}
static void run_layernorm(mt_graph *g, const mt_node *n) {
    par_ctx ctx;
    par_run(g, n, &ctx, n->i[0], n->i[1], range_layernorm);
}
/* ATTENTION, ATTENTION_BWD: i = {B, T, C, NH}; aux/in att (B,NH,T,T).
 * (batch, head) pairs are independent and the kernels take a range of them:
 * split over the B·NH pairs, so a batch of one still fills the pool. */
static void range_attention(void *arg, int64_t p0, int64_t p1, int w) {
    const mt_node *n = ((par_ctx *)arg)->n;
    mt_kernel_attention_fwd(F32(n->out), F32(n->aux[0]), F32(n->in[0]),
                            n->i[0], n->i[1], n->i[2], n->i[3], p0, p1);
}
static void run_attention(mt_graph *g, const mt_node *n) {
    par_ctx ctx;
    par_run(g, n, &ctx, n->i[0] * n->i[3], n->i[1] * n->i[1] * (n->i[2] / n->i[3]),
            range_attention);
}
/* EMBEDDING, EMBEDDING_BWD: i = {n, C, V}. */
static void run_embedding(mt_graph *g, const mt_node *n) {
    mt_kernel_embedding_fwd(F32(n->out), F32(n->in[0]), I32(n->in[1]), n->i[0], n->i[1]);
}
/* CROSS_ENTROPY, CE_BWD: i = {rows, V, Vp}, f[0] = scale; aux lse (rows).
 * Rows are independent; the loss adds per-thread partial sums. */
static void range_cross_entropy(void *arg, int64_t r0, int64_t r1, int w) {
    par_ctx *ctx = arg;
    const mt_node *n = ctx->n;
    int64_t Vp = n->i[2];
    ctx->partial[w] = mt_kernel_cross_entropy_fwd(F32(n->aux[0]) + r0, F32(n->in[0]) + r0 * Vp,
                                                  I32(n->in[1]) + r0, r1 - r0, n->i[1], Vp, n->f[0]);
}
static void run_cross_entropy(mt_graph *g, const mt_node *n) {
    par_ctx ctx = {0};
    par_run(g, n, &ctx, n->i[0], n->i[2], range_cross_entropy);
    F32(n->out)[0] = (float)sum_partials(&ctx, g);
}
static void run_mse(mt_graph *g, const mt_node *n) {
    F32(n->out)[0] = (float)mt_kernel_mse_fwd(F32(n->in[0]), F32(n->in[1]), NUMEL(n->in[0]), n->f[0]);
}
/* SUM: out = f[0] · Σ in0. */
static void run_sum(mt_graph *g, const mt_node *n) {
    F32(n->out)[0] = (float)(n->f[0] * mt_kernel_sum(F32(n->in[0]), NUMEL(n->in[0])));
}
/* TRANSPOSE, TRANSPOSE_BWD: i = {batch, R, Cc}: out (batch,Cc,R) (+)= in (batch,R,Cc)ᵀ. */
static void run_transpose(mt_graph *g, const mt_node *n) {
    mt_kernel_transpose(F32(n->out), F32(n->in[0]), n->i[0], n->i[1], n->i[2], n->acc);
}

/* BIAS_GRAD: i = {rows, OC}. */
static void run_bias_grad(mt_graph *g, const mt_node *n) {
    mt_kernel_bias_grad(F32(n->out), F32(n->in[0]), n->i[0], n->i[1], n->acc);
}
/* REDUCE_BCAST: out (nb) (+)= f[0] · Σ over repeats of in0 (n). */
static void run_reduce_bcast(mt_graph *g, const mt_node *n) {
    mt_kernel_reduce_broadcast(F32(n->out), F32(n->in[0]), n->f[0], NUMEL(n->in[0]), NUMEL(n->out),
                               n->acc);
}
static void run_mul_bwd_a(mt_graph *g, const mt_node *n) {
    mt_kernel_mul_bwd_a(F32(n->out), F32(n->in[0]), F32(n->in[1]), NUMEL(n->in[0]), NUMEL(n->in[1]),
                        n->acc);
}
static void run_mul_bwd_b(mt_graph *g, const mt_node *n) {
    mt_kernel_mul_bwd_b(F32(n->out), F32(n->in[0]), F32(n->in[1]), NUMEL(n->in[0]), NUMEL(n->out),
                        n->acc);
}
static void range_gelu_bwd(void *arg, int64_t e0, int64_t e1, int w) {
    const mt_node *n = ((par_ctx *)arg)->n;
    mt_kernel_gelu_bwd(F32(n->out) + e0, F32(n->in[0]) + e0, F32(n->in[1]) + e0, e1 - e0, n->acc);
}
static void run_gelu_bwd(mt_graph *g, const mt_node *n) {
    par_ctx ctx;
    par_run(g, n, &ctx, NUMEL(n->out), 1, range_gelu_bwd);
}
/* LN_BWD_INPUT: in = {dout, x, w, mean, rstd}, i = {rows, C}. */
static void range_ln_bwd_input(void *arg, int64_t r0, int64_t r1, int w) {
    const mt_node *n = ((par_ctx *)arg)->n;
    int64_t C = n->i[1];
    mt_kernel_layernorm_bwd_input(F32(n->out) + r0 * C, F32(n->in[0]) + r0 * C, F32(n->in[1]) + r0 * C,
                                  F32(n->in[2]), F32(n->in[3]) + r0, F32(n->in[4]) + r0, r1 - r0, C,
                                  n->acc);
}
static void run_ln_bwd_input(mt_graph *g, const mt_node *n) {
    par_ctx ctx;
    par_run(g, n, &ctx, n->i[0], n->i[1], range_ln_bwd_input);
}
/* LN_BWD_PARAMS: in = {dout, x, mean, rstd}, i = {rows, C, -, acc of out2}.
 * The kernel always adds, so a first contribution starts from zero. */
static void run_ln_bwd_params(mt_graph *g, const mt_node *n) {
    size_t bytes = (size_t)n->i[1] * sizeof(float);
    if (!n->acc) memset(F32(n->out), 0, bytes);
    if (!n->i[3]) memset(F32(n->out2), 0, bytes);
    mt_kernel_layernorm_bwd_params(F32(n->out), F32(n->out2), F32(n->in[0]), F32(n->in[1]),
                                   F32(n->in[2]), F32(n->in[3]), n->i[0], n->i[1]);
}
/* ATTENTION_BWD: in = {dout, qkv, att}; each worker has its own T·T scratch. */
static void range_attention_bwd(void *arg, int64_t p0, int64_t p1, int w) {
    par_ctx *ctx = arg;
    const mt_node *n = ctx->n;
    int64_t T = n->i[1];
    mt_kernel_attention_bwd(F32(n->out), F32(n->in[0]), F32(n->in[1]), F32(n->in[2]),
                            n->i[0], T, n->i[2], n->i[3], n->acc,
                            ctx->g->scratch + (size_t)w * (size_t)(T * T), p0, p1);
}
static void run_attention_bwd(mt_graph *g, const mt_node *n) {
    par_ctx ctx;
    par_run(g, n, &ctx, n->i[0] * n->i[3], n->i[1] * n->i[1] * (n->i[2] / n->i[3]),
            range_attention_bwd);
}
/* EMBEDDING_BWD: in = {dout, ids}; the kernel always adds. */
static void run_embedding_bwd(mt_graph *g, const mt_node *n) {
    if (!n->acc) memset(F32(n->out), 0, (size_t)NUMEL(n->out) * sizeof(float));
    mt_kernel_embedding_bwd(F32(n->out), F32(n->in[0]), I32(n->in[1]), n->i[0], n->i[1]);
}
/* CE_BWD: in = {dloss, logits, lse, targets}. */
static void range_ce_bwd(void *arg, int64_t r0, int64_t r1, int w) {
    const mt_node *n = ((par_ctx *)arg)->n;
    int64_t Vp = n->i[2];
    mt_kernel_cross_entropy_bwd(F32(n->out) + r0 * Vp, F32(n->in[1]) + r0 * Vp, F32(n->in[2]) + r0,
                                I32(n->in[3]) + r0, F32(n->in[0])[0], r1 - r0, n->i[1], Vp, n->f[0],
                                n->acc);
}
static void run_ce_bwd(mt_graph *g, const mt_node *n) {
    par_ctx ctx;
    par_run(g, n, &ctx, n->i[0], n->i[2], range_ce_bwd);
}
/* MSE_BWD: in = {dloss, pred, target}, f = {scale, sign}. */
static void run_mse_bwd(mt_graph *g, const mt_node *n) {
    mt_kernel_mse_bwd(F32(n->out), F32(n->in[1]), F32(n->in[2]), n->f[1] * F32(n->in[0])[0],
                      NUMEL(n->out), n->f[0], n->acc);
}
/* FILL_BWD: out (+)= f[0] · dloss. */
static void run_fill_bwd(mt_graph *g, const mt_node *n) {
    mt_kernel_fill(F32(n->out), n->f[0] * F32(n->in[0])[0], NUMEL(n->out), n->acc);
}

/* ======================================================================== */
/* Backward builders                                                         */
/* ======================================================================== */

/* A backward node template reading `n_in` tensors. */
static mt_node bnode(mt_op op, int n_in, mt_tensor *a, mt_tensor *b, mt_tensor *c, mt_tensor *d,
                     mt_tensor *e) {
    mt_node node = {.op = op, .n_in = n_in, .in = {a, b, c, d, e}};
    return node;
}

static void set_i(mt_node *node, int64_t a, int64_t b, int64_t c, int64_t d) {
    node->i[0] = a; node->i[1] = b; node->i[2] = c; node->i[3] = d;
}

static void bwd_matmul(mt_graph *g, const mt_node *n) {
    mt_tensor *a = n->in[0], *b = n->in[1], *dout = n->out->grad;
    bool ta = n->i[0] & 1, tb = n->i[0] & 2;
    int64_t M = n->i[1], N = n->i[2], K = n->i[3];
    /* dA = dout · op(b)ᵀ, stored like a */
    mt_node da = ta ? bnode(MT_OP_GEMM, 2, b, dout, 0, 0, 0) : bnode(MT_OP_GEMM, 2, dout, b, 0, 0, 0);
    if (!ta) set_i(&da, tb ? 0 : 2, M, K, N);   /* (M,N)·(K,N)ᵀ or (M,N)·(N,K) */
    else set_i(&da, tb ? 3 : 2, K, M, N);       /* (K,N)·(M,N)ᵀ or (N,K)ᵀ·(M,N)ᵀ */
    mt__emit_grad(g, a, &da);
    /* dB = op(a)ᵀ · dout, stored like b */
    mt_node db = tb ? bnode(MT_OP_GEMM, 2, dout, a, 0, 0, 0) : bnode(MT_OP_GEMM, 2, a, dout, 0, 0, 0);
    if (!tb) set_i(&db, ta ? 0 : 1, K, N, M);   /* (M,K)ᵀ·(M,N) or (K,M)·(M,N) */
    else set_i(&db, ta ? 3 : 1, N, K, M);       /* (M,N)ᵀ·(M,K) or (M,N)ᵀ·(K,M)ᵀ */
    mt__emit_grad(g, b, &db);
}

static void bwd_linear(mt_graph *g, const mt_node *n) {
    mt_tensor *x = n->in[0], *w = n->in[1], *dout = n->out->grad;
    int64_t rows = n->i[1], OC = n->i[2], C = n->i[3];
    mt_node dx = bnode(MT_OP_GEMM, 2, dout, w, 0, 0, 0);      /* (rows,OC)·(OC,C) */
    set_i(&dx, 0, rows, C, OC);
    mt__emit_grad(g, x, &dx);
    mt_node dw = bnode(MT_OP_GEMM, 2, dout, x, 0, 0, 0);      /* (rows,OC)ᵀ·(rows,C) */
    set_i(&dw, 1, OC, C, rows);
    mt__emit_grad(g, w, &dw);
    if (n->n_in == 3) {
        mt_node db = bnode(MT_OP_BIAS_GRAD, 1, dout, 0, 0, 0, 0);
        set_i(&db, rows, OC, 0, 0);
        mt__emit_grad(g, n->in[2], &db);
    }
}

/* d(a ± b): a gets ±dout, b gets the sum over its broadcast repeats. */
static void bwd_add_sub(mt_graph *g, const mt_node *n, float sign_b) {
    mt_tensor *dout = n->out->grad;
    mt_node da = bnode(MT_OP_SCALE_BWD, 1, dout, 0, 0, 0, 0);
    da.f[0] = 1.0f;
    mt__emit_grad(g, n->in[0], &da);
    bool same = NUMEL(n->in[1]) == NUMEL(n->in[0]);
    mt_node db = bnode(same ? MT_OP_SCALE_BWD : MT_OP_REDUCE_BCAST, 1, dout, 0, 0, 0, 0);
    db.f[0] = sign_b;
    mt__emit_grad(g, n->in[1], &db);
}
static void bwd_add(mt_graph *g, const mt_node *n) { bwd_add_sub(g, n, 1.0f); }
static void bwd_sub(mt_graph *g, const mt_node *n) { bwd_add_sub(g, n, -1.0f); }

static void bwd_mul(mt_graph *g, const mt_node *n) {
    mt_tensor *dout = n->out->grad;
    mt_node da = bnode(MT_OP_MUL_BWD_A, 2, dout, n->in[1], 0, 0, 0);
    mt__emit_grad(g, n->in[0], &da);
    mt_node db = bnode(MT_OP_MUL_BWD_B, 2, dout, n->in[0], 0, 0, 0);
    mt__emit_grad(g, n->in[1], &db);
}

static void bwd_scale(mt_graph *g, const mt_node *n) {
    mt_node dx = bnode(MT_OP_SCALE_BWD, 1, n->out->grad, 0, 0, 0, 0);
    dx.f[0] = n->f[0];
    mt__emit_grad(g, n->in[0], &dx);
}

static void bwd_gelu(mt_graph *g, const mt_node *n) {
    mt_node dx = bnode(MT_OP_GELU_BWD, 2, n->in[0], n->out->grad, 0, 0, 0);
    mt__emit_grad(g, n->in[0], &dx);
}

static void bwd_layernorm(mt_graph *g, const mt_node *n) {
    mt_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *dout = n->out->grad;
    mt_node dx = bnode(MT_OP_LN_BWD_INPUT, 5, dout, x, w, n->aux[0], n->aux[1]);
    set_i(&dx, n->i[0], n->i[1], 0, 0);
    mt__emit_grad(g, x, &dx);
    if (!w->needs_grad) return;   /* the builder made sure w and b are parameters */
    mt_node dp = bnode(MT_OP_LN_BWD_PARAMS, 4, dout, x, n->aux[0], n->aux[1], 0);
    mt_tensor *broot = mt__storage_root(b);
    dp.out2 = mt__grad_of(g, b);
    set_i(&dp, n->i[0], n->i[1], 0, broot->kind == MT_PARAM || broot->grad_emitted > 0);
    if (broot->kind == MT_PARAM && broot->grad_emitted == 0) dp.param_first |= 2;
    broot->grad_emitted++;
    mt__emit_grad(g, w, &dp);
}

static void bwd_attention(mt_graph *g, const mt_node *n) {
    mt_node dq = bnode(MT_OP_ATTENTION_BWD, 3, n->out->grad, n->in[0], n->aux[0], 0, 0);
    memcpy(dq.i, n->i, sizeof dq.i);
    mt__emit_grad(g, n->in[0], &dq);
}

static void bwd_embedding(mt_graph *g, const mt_node *n) {
    mt_node dt = bnode(MT_OP_EMBEDDING_BWD, 2, n->out->grad, n->in[1], 0, 0, 0);
    memcpy(dt.i, n->i, sizeof dt.i);
    mt__emit_grad(g, n->in[0], &dt);
}

static void bwd_cross_entropy(mt_graph *g, const mt_node *n) {
    mt_node dl = bnode(MT_OP_CE_BWD, 4, n->out->grad, n->in[0], n->aux[0], n->in[1], 0);
    memcpy(dl.i, n->i, sizeof dl.i);
    dl.f[0] = n->f[0];
    mt__emit_grad(g, n->in[0], &dl);
}

static void bwd_mse(mt_graph *g, const mt_node *n) {
    for (int k = 0; k < 2; k++) {
        mt_node d = bnode(MT_OP_MSE_BWD, 3, n->out->grad, n->in[0], n->in[1], 0, 0);
        d.f[0] = n->f[0];
        d.f[1] = k == 0 ? 1.0f : -1.0f;
        mt__emit_grad(g, n->in[k], &d);
    }
}

static void bwd_sum(mt_graph *g, const mt_node *n) {
    mt_node d = bnode(MT_OP_FILL_BWD, 1, n->out->grad, 0, 0, 0, 0);
    d.f[0] = n->f[0];
    mt__emit_grad(g, n->in[0], &d);
}

static void bwd_transpose(mt_graph *g, const mt_node *n) {
    mt_node d = bnode(MT_OP_TRANSPOSE_BWD, 1, n->out->grad, 0, 0, 0, 0);
    set_i(&d, n->i[0], n->i[2], n->i[1], 0);
    mt__emit_grad(g, n->in[0], &d);
}

/* ======================================================================== */
/* Costs: FLOPs and bytes of memory traffic per run                          */
/* ======================================================================== */

static void cost_gemm(const mt_node *n, double *fl, double *by) {
    double M = (double)n->i[1], N = (double)n->i[2], K = (double)n->i[3];
    *fl = 2 * M * N * K;
    *by = 4 * (M * K + K * N + M * N * (n->acc ? 2 : 1));
}
static void cost_linear(const mt_node *n, double *fl, double *by) {
    double R = (double)n->i[1], OC = (double)n->i[2], C = (double)n->i[3];
    *fl = 2 * R * OC * C + (n->n_in == 3 ? R * OC : 0);
    *by = 4 * (R * C + OC * C + R * OC + OC);
}
/* elementwise: `f` FLOPs and `b` bytes per output element */
static void cost_elementwise(const mt_node *n, double f, double b, double *fl, double *by) {
    double e = (double)NUMEL(n->out);
    *fl = f * e;
    *by = b * e;
}
static void cost_binary(const mt_node *n, double *fl, double *by) { cost_elementwise(n, 1, 12, fl, by); }
static void cost_unary(const mt_node *n, double *fl, double *by) { cost_elementwise(n, 1, 8, fl, by); }
static void cost_gelu(const mt_node *n, double *fl, double *by) { cost_elementwise(n, 10, 8, fl, by); }
static void cost_gelu_bwd(const mt_node *n, double *fl, double *by) { cost_elementwise(n, 18, 12, fl, by); }
static void cost_reduce_in(const mt_node *n, double *fl, double *by) {
    double e = (double)NUMEL(n->in[0]);
    *fl = e;
    *by = 4 * e + 4 * (double)NUMEL(n->out);
}
static void cost_layernorm(const mt_node *n, double *fl, double *by) {
    double e = (double)n->i[0] * (double)n->i[1];
    *fl = 8 * e;
    *by = 8 * e;
}
static void cost_ln_bwd(const mt_node *n, double *fl, double *by) {
    double e = (double)n->i[0] * (double)n->i[1];
    *fl = 10 * e;
    *by = 12 * e;
}
/* causal: each query row t attends to t+1 keys */
static void cost_attention(const mt_node *n, double *fl, double *by) {
    double B = (double)n->i[0], T = (double)n->i[1], C = (double)n->i[2], NH = (double)n->i[3];
    double pairs = B * NH * T * (T + 1) / 2;
    *fl = 4 * pairs * (C / NH) + 5 * pairs;
    *by = 4 * (B * T * 4 * C + B * NH * T * T);
}
static void cost_attention_bwd(const mt_node *n, double *fl, double *by) {
    cost_attention(n, fl, by);
    *fl *= 2;
    *by *= 2;
}
static void cost_embedding(const mt_node *n, double *fl, double *by) {
    *fl = n->op == MT_OP_EMBEDDING_BWD ? (double)n->i[0] * (double)n->i[1] : 0;
    *by = 8 * (double)n->i[0] * (double)n->i[1];
}
static void cost_ce(const mt_node *n, double *fl, double *by) {
    double R = (double)n->i[0], V = (double)n->i[1], Vp = (double)n->i[2];
    *fl = 4 * R * V;
    *by = 4 * R * Vp * (n->op == MT_OP_CE_BWD ? 2 : 1);
}
static void cost_transpose(const mt_node *n, double *fl, double *by) { cost_elementwise(n, 0, 8, fl, by); }

/* ======================================================================== */
/* The table                                                                 */
/* ======================================================================== */

static const mt_op_def op_table[MT_OP_COUNT] = {
    [MT_OP_MATMUL]        = {"matmul",        run_gemm,          bwd_matmul,        cost_gemm},
    [MT_OP_LINEAR]        = {"linear",        run_linear,        bwd_linear,        cost_linear},
    [MT_OP_ADD]           = {"add",           run_binary,        bwd_add,           cost_binary},
    [MT_OP_SUB]           = {"sub",           run_binary,        bwd_sub,           cost_binary},
    [MT_OP_MUL]           = {"mul",           run_binary,        bwd_mul,           cost_binary},
    [MT_OP_SCALE]         = {"scale",         run_scale,         bwd_scale,         cost_unary},
    [MT_OP_GELU]          = {"gelu",          run_gelu,          bwd_gelu,          cost_gelu},
    [MT_OP_LAYERNORM]     = {"layernorm",     run_layernorm,     bwd_layernorm,     cost_layernorm},
    [MT_OP_ATTENTION]     = {"attention",     run_attention,     bwd_attention,     cost_attention},
    [MT_OP_EMBEDDING]     = {"embedding",     run_embedding,     bwd_embedding,     cost_embedding},
    [MT_OP_CROSS_ENTROPY] = {"cross_entropy", run_cross_entropy, bwd_cross_entropy, cost_ce},
    [MT_OP_MSE]           = {"mse",           run_mse,           bwd_mse,           cost_reduce_in},
    [MT_OP_SUM]           = {"sum",           run_sum,           bwd_sum,           cost_reduce_in},
    [MT_OP_TRANSPOSE]     = {"transpose",     run_transpose,     bwd_transpose,     cost_transpose},
    [MT_OP_GEMM]          = {"gemm",          run_gemm,          NULL,              cost_gemm},
    [MT_OP_BIAS_GRAD]     = {"bias_grad",     run_bias_grad,     NULL,              cost_reduce_in},
    [MT_OP_REDUCE_BCAST]  = {"reduce_bcast",  run_reduce_bcast,  NULL,              cost_reduce_in},
    [MT_OP_SCALE_BWD]     = {"scale_bwd",     run_scale,         NULL,              cost_unary},
    [MT_OP_MUL_BWD_A]     = {"mul_bwd_a",     run_mul_bwd_a,     NULL,              cost_binary},
    [MT_OP_MUL_BWD_B]     = {"mul_bwd_b",     run_mul_bwd_b,     NULL,              cost_reduce_in},
    [MT_OP_GELU_BWD]      = {"gelu_bwd",      run_gelu_bwd,      NULL,              cost_gelu_bwd},
    [MT_OP_LN_BWD_INPUT]  = {"ln_bwd_input",  run_ln_bwd_input,  NULL,              cost_ln_bwd},
    [MT_OP_LN_BWD_PARAMS] = {"ln_bwd_params", run_ln_bwd_params, NULL,              cost_ln_bwd},
    [MT_OP_ATTENTION_BWD] = {"attention_bwd", run_attention_bwd, NULL,              cost_attention_bwd},
    [MT_OP_EMBEDDING_BWD] = {"embedding_bwd", run_embedding_bwd, NULL,              cost_embedding},
    [MT_OP_CE_BWD]        = {"ce_bwd",        run_ce_bwd,        NULL,              cost_ce},
    [MT_OP_MSE_BWD]       = {"mse_bwd",       run_mse_bwd,       NULL,              cost_unary},
    [MT_OP_FILL_BWD]      = {"fill_bwd",      run_fill_bwd,      NULL,              cost_unary},
    [MT_OP_TRANSPOSE_BWD] = {"transpose_bwd", run_transpose,     NULL,              cost_transpose},
};

const mt_op_def *mt__op_def(mt_op op) { return &op_table[op]; }
