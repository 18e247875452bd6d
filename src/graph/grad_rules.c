/*
 * grad_rules.c — the gradient rule of every forward op: which backward calls
 * compute the gradients of its inputs, from which tensors, with which
 * parameters.
 *
 * A rule reads the forward call (its inputs, output, saved aux tensors and
 * parameters) and hands each backward call to the autodiff (mt__emit_grad,
 * or mt__emit_grad2 for a call with two gradient outputs), which decides
 * where the result goes, whether it adds, and whether it runs in B or W. So a
 * rule never touches gradient bookkeeping, and ops/ never sees a rule: it only
 * runs the calls.
 *
 * The table that says which op has which rule is graph/op_desc.c's; backward
 * ops have none (nothing differentiates through them).
 */
#include "graph/op_desc.h"

#define NUMEL(t) mt_tensor_numel(t)

/* A backward call of `op` reading `n_in` tensors, its output left to the
 * autodiff. */
static mt_op_call bcall(mt_op op, int n_in, mt_tensor *a, mt_tensor *b, mt_tensor *c,
                        mt_tensor *d, mt_tensor *e) {
    mt_op_call call = {.op = op, .n_in = n_in, .in = {a, b, c, d, e}};
    return call;
}

/* GEMM: out (M,N) (+)= op(A) (M,K) · op(B) (K,N). */
static mt_op_call gemm(mt_tensor *A, mt_tensor *B, bool ta, bool tb, int64_t M, int64_t N,
                       int64_t K) {
    mt_op_call call = bcall(MT_OP_GEMM, 2, A, B, 0, 0, 0);
    call.p.gemm = (mt_gemm_params){.ta = ta, .tb = tb, .M = M, .N = N, .K = K};
    return call;
}

/* out (M,N) = op(a) (M,K) · op(b) (K,N). */
void mt__grad_matmul(mt_graph *g, const mt_op_call *f) {
    mt_tensor *a = f->in[0], *b = f->in[1], *dout = f->out->grad;
    bool ta = f->p.gemm.ta, tb = f->p.gemm.tb;
    int64_t M = f->p.gemm.M, N = f->p.gemm.N, K = f->p.gemm.K;
    /* dA = dout · op(b)ᵀ, stored like a: (M,N)·(K,N)ᵀ or (M,N)·(N,K) into
     * (M,K); transposed, (K,N)·(M,N)ᵀ or (N,K)ᵀ·(M,N)ᵀ into (K,M) */
    mt_op_call da = ta ? gemm(b, dout, tb, true, K, M, N) : gemm(dout, b, false, !tb, M, K, N);
    mt__emit_grad(g, a, &da);
    /* dB = op(a)ᵀ · dout, stored like b: (M,K)ᵀ·(M,N) or (K,M)·(M,N) into
     * (K,N); transposed, (M,N)ᵀ·(M,K) or (M,N)ᵀ·(K,M)ᵀ into (N,K) */
    mt_op_call db = tb ? gemm(dout, a, true, ta, N, K, M) : gemm(a, dout, !ta, false, K, N, M);
    mt__emit_grad(g, b, &db);
}

/* out (rows,OC) = x (rows,C) · w (OC,C)ᵀ + bias (OC). */
void mt__grad_linear(mt_graph *g, const mt_op_call *f) {
    mt_tensor *x = f->in[0], *w = f->in[1], *dout = f->out->grad;
    int64_t rows = f->p.linear.rows, OC = f->p.linear.OC, C = f->p.linear.C;
    mt_op_call dx = gemm(dout, w, false, false, rows, C, OC);   /* (rows,OC)·(OC,C) */
    mt__emit_grad(g, x, &dx);
    mt_op_call dw = gemm(dout, x, true, false, OC, C, rows);    /* (rows,OC)ᵀ·(rows,C) */
    mt__emit_grad(g, w, &dw);
    if (f->n_in == 3) {
        mt_op_call db = bcall(MT_OP_BIAS_GRAD, 1, dout, 0, 0, 0, 0);
        db.p.rows = (mt_rows_params){.rows = rows, .C = OC};
        mt__emit_grad(g, f->in[2], &db);
    }
}

/* A backward call out (+)= s · in, or its sum over repeats (REDUCE_BCAST). */
static mt_op_call scaled(mt_op op, mt_tensor *in, float s) {
    mt_op_call call = bcall(op, 1, in, 0, 0, 0, 0);
    call.p.scale.s = s;
    return call;
}

/* d(a ± b): a gets dout, b gets ±dout summed over its broadcast repeats. */
static void grad_add_sub(mt_graph *g, const mt_op_call *f, float sign_b) {
    mt_tensor *dout = f->out->grad;
    mt_op_call da = scaled(MT_OP_SCALE_BWD, dout, 1.0f);
    mt__emit_grad(g, f->in[0], &da);
    bool same = NUMEL(f->in[1]) == NUMEL(f->in[0]);
    mt_op_call db = scaled(same ? MT_OP_SCALE_BWD : MT_OP_REDUCE_BCAST, dout, sign_b);
    mt__emit_grad(g, f->in[1], &db);
}
void mt__grad_add(mt_graph *g, const mt_op_call *f) { grad_add_sub(g, f, 1.0f); }
void mt__grad_sub(mt_graph *g, const mt_op_call *f) { grad_add_sub(g, f, -1.0f); }

void mt__grad_mul(mt_graph *g, const mt_op_call *f) {
    mt_tensor *dout = f->out->grad;
    mt_op_call da = bcall(MT_OP_MUL_BWD_A, 2, dout, f->in[1], 0, 0, 0);
    mt__emit_grad(g, f->in[0], &da);
    mt_op_call db = bcall(MT_OP_MUL_BWD_B, 2, dout, f->in[0], 0, 0, 0);
    mt__emit_grad(g, f->in[1], &db);
}

void mt__grad_scale(mt_graph *g, const mt_op_call *f) {
    mt_op_call dx = scaled(MT_OP_SCALE_BWD, f->out->grad, f->p.scale.s);
    mt__emit_grad(g, f->in[0], &dx);
}

/* A sharding constraint is the identity on values. */
void mt__grad_reshard(mt_graph *g, const mt_op_call *f) {
    mt_op_call dx = scaled(MT_OP_SCALE_BWD, f->out->grad, 1.0f);
    mt__emit_grad(g, f->in[0], &dx);
}

void mt__grad_gelu(mt_graph *g, const mt_op_call *f) {
    mt_op_call dx = bcall(MT_OP_GELU_BWD, 2, f->in[0], f->out->grad, 0, 0, 0);
    mt__emit_grad(g, f->in[0], &dx);
}

/* Split as the zero-bubble schedules want it: dx is B work, dw and db (one
 * call with two outputs, as they come from the same pass) are W work. */
void mt__grad_layernorm(mt_graph *g, const mt_op_call *f) {
    mt_tensor *x = f->in[0], *w = f->in[1], *b = f->in[2], *dout = f->out->grad;
    mt_tensor *mean = f->aux[0], *rstd = f->aux[1];
    mt_op_call dx = bcall(MT_OP_LN_BWD_INPUT, 5, dout, x, w, mean, rstd);
    dx.p.rows = f->p.rows;
    mt__emit_grad(g, x, &dx);
    mt_op_call dp = bcall(MT_OP_LN_BWD_PARAMS, 4, dout, x, mean, rstd, 0);
    dp.p.rows = f->p.rows;
    mt__emit_grad2(g, w, b, &dp);   /* the builder made sure w and b are parameters */
}

void mt__grad_attention(mt_graph *g, const mt_op_call *f) {
    if (f->p.attention.parts > 1) {   /* split over devices: attention_split.c */
        mt__grad_attention_split(g, f);
        return;
    }
    /* flash attention's backward reads the output for D = rowsum(dO ∘ O) */
    const int64_t doc = f->p.attention.doc;   /* the document ids: in[4] */
    mt_op_call dqkv = bcall(MT_OP_ATTENTION_BWD, doc ? 5 : 4, f->out->grad, f->in[0], f->out,
                            f->aux[0], doc ? f->in[doc] : 0);
    dqkv.p.attention = f->p.attention;
    dqkv.p.attention.doc = doc ? 4 : 0;
    mt__emit_grad(g, f->in[0], &dqkv);
}

/* dx is B work, dw W work (as layernorm's). */
void mt__grad_rmsnorm(mt_graph *g, const mt_op_call *f) {
    mt_tensor *x = f->in[0], *w = f->in[1], *dout = f->out->grad, *rstd = f->aux[0];
    mt_op_call dx = bcall(MT_OP_RMS_BWD_INPUT, 4, dout, x, w, rstd, 0);
    dx.p.rmsnorm = f->p.rmsnorm;
    mt__emit_grad(g, x, &dx);
    mt_op_call dw = bcall(MT_OP_RMS_BWD_PARAMS, 3, dout, x, rstd, 0, 0);
    dw.p.rmsnorm = f->p.rmsnorm;
    mt__emit_grad(g, w, &dw);
}

/* da and db from one pass (SWIGLU_BWD, σ(a) once) where both take
 * gradients in one phase, as the experts' and the LLaMA's SwiGLU do; else
 * each its own (the same bits). */
void mt__grad_swiglu(mt_graph *g, const mt_op_call *f) {
    mt_tensor *a = f->in[0], *b = f->in[1], *dout = f->out->grad;
    if (mt__takes_grad(a) && mt__takes_grad(b) && a->data_dep == b->data_dep &&
        mt__storage_root(a)->grad_kept == mt__storage_root(b)->grad_kept) {
        mt_op_call both = bcall(MT_OP_SWIGLU_BWD, 3, a, b, dout, 0, 0);
        mt__emit_grad2(g, a, b, &both);
        return;
    }
    mt_op_call da = bcall(MT_OP_SWIGLU_BWD_A, 3, a, b, dout, 0, 0);
    mt__emit_grad(g, a, &da);
    mt_op_call db = bcall(MT_OP_SWIGLU_BWD_B, 2, a, dout, 0, 0, 0);
    mt__emit_grad(g, b, &db);
}

/* dq and dk come from one pass (both need ds, which needs the output for
 * D = rowsum(dO ∘ O)), dv from another (it needs p, recomputed from q, k
 * and the lse, and dout): the scores are recomputed twice, one product a
 * pair more than a fused dq/dk/dv pass (a call has two outputs). The
 * builder made sure q and k take gradients together. */
void mt__grad_attention_gqa(mt_graph *g, const mt_op_call *f) {
    mt_tensor *dout = f->out->grad, *lse = f->aux[0];
    mt_tensor *docs = f->p.gqa.doc ? f->in[f->p.gqa.doc] : NULL;   /* after the others */
    mt_op_call dqk = bcall(MT_OP_GQA_BWD_QK, docs ? 7 : 6, dout, f->in[0], f->in[1], f->in[2],
                           f->out);
    dqk.in[5] = lse;
    dqk.in[6] = docs;
    dqk.p.gqa = f->p.gqa;
    dqk.p.gqa.doc = docs ? 6 : 0;
    mt__emit_grad2(g, f->in[0], f->in[1], &dqk);
    mt_op_call dv = bcall(MT_OP_GQA_BWD_V, docs ? 5 : 4, dout, f->in[0], f->in[1], lse, docs);
    dv.p.gqa = f->p.gqa;
    dv.p.gqa.doc = docs ? 4 : 0;
    mt__emit_grad(g, f->in[2], &dv);
}

void mt__grad_embedding(mt_graph *g, const mt_op_call *f) {
    mt_op_call dt = bcall(MT_OP_EMBEDDING_BWD, 2, f->out->grad, f->in[1], 0, 0, 0);
    dt.p.embedding = f->p.embedding;
    mt__emit_grad(g, f->in[0], &dt);
}

void mt__grad_cross_entropy(mt_graph *g, const mt_op_call *f) {
    mt_op_call dl = bcall(MT_OP_CE_BWD, 4, f->out->grad, f->in[0], f->aux[0], f->in[1], 0);
    dl.p.ce = f->p.ce;
    mt__emit_grad(g, f->in[0], &dl);
}

/* pred gets +d, target -d. */
void mt__grad_mse(mt_graph *g, const mt_op_call *f) {
    for (int k = 0; k < 2; k++) {
        mt_op_call d = bcall(MT_OP_MSE_BWD, 3, f->out->grad, f->in[0], f->in[1], 0, 0);
        d.p.mse = (mt_mse_params){.scale = f->p.mse.scale, .sign = k == 0 ? 1.0f : -1.0f};
        mt__emit_grad(g, f->in[k], &d);
    }
}

void mt__grad_sum(mt_graph *g, const mt_op_call *f) {
    mt_op_call d = scaled(MT_OP_FILL_BWD, f->out->grad, f->p.scale.s);
    mt__emit_grad(g, f->in[0], &d);
}

/* The gradient of a transpose is the transpose back: (batch,Cc,R) -> (batch,R,Cc). */
void mt__grad_transpose(mt_graph *g, const mt_op_call *f) {
    mt_op_call d = bcall(MT_OP_TRANSPOSE_BWD, 1, f->out->grad, 0, 0, 0, 0);
    const mt_transpose_params *p = &f->p.transpose;
    d.p.transpose = (mt_transpose_params){.batch = p->batch, .R = p->Cc, .Cc = p->R};
    mt__emit_grad(g, f->in[0], &d);
}

/* ======================================================================== */
/* Collectives (jax.lax's transposes)                                        */
/* ======================================================================== */

/* The backward call of a collective: the collective `op` on the cotangent,
 * over the forward's axes, with the dims given. */
static mt_op_call coll(const mt_op_call *f, mt_op op, int dim, int dim2) {
    mt_op_call d = bcall(op, 1, f->out->grad, 0, 0, 0, 0);
    d.p.coll = (mt_coll_params){.axes = f->p.coll.axes, .dim = dim, .dim2 = dim2};
    return d;
}

/* psum's output is replicated, so its cotangent is too: the identity. */
void mt__grad_psum(mt_graph *g, const mt_op_call *f) {
    mt_op_call d = scaled(MT_OP_SCALE_BWD, f->out->grad, 1.0f);
    mt__emit_grad(g, f->in[0], &d);
}

void mt__grad_all_gather(mt_graph *g, const mt_op_call *f) {
    /* a result that counts once (all_gather_invariant) sends back this
     * device's block of its cotangent; a varying one, the sum of all of them */
    mt_op_call d = coll(f, f->p.coll.invariant ? MT_OP_SLICE : MT_OP_PSUM_SCATTER, f->p.coll.dim, -1);
    /* the gathered value's gradient has no other reader: on a parameter
     * (FSDP, ZeRO-2) the reduce-scatter may run asynchronously in W, as
     * pvary's psum does */
    d.p.coll.async = !f->p.coll.invariant;
    mt__emit_grad(g, f->in[0], &d);
}

void mt__grad_psum_scatter(mt_graph *g, const mt_op_call *f) {
    mt_op_call d = coll(f, MT_OP_ALL_GATHER, f->p.coll.dim, -1);
    mt__emit_grad(g, f->in[0], &d);
}

/* Sends the cotangent back the way the value came: every pair reversed. */
void mt__grad_ppermute(mt_graph *g, const mt_op_call *f) {
    int n = f->p.coll.n_pairs;
    int (*inv)[2] = mt__graph_keep(g, f->p.coll.pairs, (size_t)n * sizeof *inv);
    if (!inv) return;
    for (int k = 0; k < n; k++) {
        int src = inv[k][0];
        inv[k][0] = inv[k][1];
        inv[k][1] = src;
    }
    mt_op_call d = coll(f, MT_OP_PPERMUTE, -1, -1);
    d.p.coll.n_pairs = n;
    d.p.coll.pairs = (const int (*)[2])inv;
    mt__emit_grad(g, f->in[0], &d);
}

void mt__grad_all_to_all(mt_graph *g, const mt_op_call *f) {
    mt_op_call d = coll(f, MT_OP_ALL_TO_ALL, f->p.coll.dim2, f->p.coll.dim);
    mt__emit_grad(g, f->in[0], &d);
}

/* A replicated value met device-varying ones: its cotangent is a partial
 * sum per device. On a parameter this is data parallelism's gradient
 * all-reduce, and it lands in W (the value is derived from parameters only).
 * Its input, pvary's output gradient, has no other reader, so the reduction
 * may run in place on it, asynchronously: marked `async`, the W runner
 * starts it when reached and completes it before anything needs its result
 * (exec.c); in B it runs as it comes. */
void mt__grad_pvary(mt_graph *g, const mt_op_call *f) {
    mt_op_call d = coll(f, MT_OP_PSUM, -1, -1);
    d.p.coll.async = true;
    mt__emit_grad(g, f->in[0], &d);
}

/* Each device's block of the replicated dim got its own cotangent: gather them. */
void mt__grad_slice(mt_graph *g, const mt_op_call *f) {
    mt_op_call d = coll(f, MT_OP_ALL_GATHER, f->p.coll.dim, -1);
    mt__emit_grad(g, f->in[0], &d);
}
