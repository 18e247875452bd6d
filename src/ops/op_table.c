/*
 * op_table.c — the ops' kernel-layer definitions: what an op is (its name,
 * how many inputs a call has, what a run costs, op_cost.c, and its cost
 * class, which the planner times it by: mt__opdef_<name>) and, apart, how
 * the CPU backend runs a call on its buffers (its kernel: mt__kernel_<name>,
 * which backend/cpu_kernels.c's table holds). The graph half is
 * graph/op_desc.c's. Most ops' definitions are here; an op in a file of its
 * own defines its own (ops/rope.c). The table of what the ops are is
 * generated from ops_impl.h's MT_OP_LIST.
 *
 * A call's parameters (mt_op_call.p) are set by the graph's builders for
 * forward ops and by its gradient rules for backward ops; each run reads the
 * member its op names in ops_impl.h. Nothing here knows graphs, phases or
 * gradients: acc / acc2 arrive already decided.
 */
#include "ops/kernels.h"
#include "ops/op_cost.h"
#include "ops/op_par.h"
#include "ops/ops_impl.h"

#include <string.h>

#define F32(t) ((float *)(t)->data)
#define I32(t) ((const int32_t *)(t)->data)
#define NUMEL(t) mt_tensor_numel(t)

/* ======================================================================== */
/* Run                                                                       */
/* ======================================================================== */

/* MATMUL, GEMM and LINEAR run on the pool as blocks of C (gemm_pool.c), in
 * f32; a call the backend planned as a bf16 product (mt_op_call.plan) is the
 * backend's to run (src/backend/cpu_bf16.c), never this table's. */

/* MATMUL and GEMM: out (M,N) (+)= op(in0) · op(in1). */
static void run_gemm(const mt_op_env *env, const mt_op_call *c) {
    const mt_gemm_params *p = &c->p.gemm;
    mt__gemm_pool(env, p->ta, p->tb, p->M, p->N, p->K, F32(c->in[0]), F32(c->in[1]), NULL,
                  F32(c->out), c->acc ? 1.0f : 0.0f);
}

/* LINEAR: out (rows,OC) = x (rows,C) · w (OC,C)ᵀ + b (OC). */
static void run_linear(const mt_op_env *env, const mt_op_call *c) {
    const mt_linear_params *p = &c->p.linear;
    mt__gemm_pool(env, false, true, p->rows, p->OC, p->C, F32(c->in[0]), F32(c->in[1]),
                  c->n_in == 3 ? F32(c->in[2]) : NULL, F32(c->out), 0.0f);
}

/* ADD, SUB, MUL: out = a ∘ b, b broadcast over rows of its numel nb. Split
 * over those rows (or over elements when shapes are equal), so every chunk
 * starts at a multiple of nb. */
static void range_binary(void *arg, int64_t r0, int64_t r1, int w) {
    const mt_op_call *c = ((mt_op_par *)arg)->c;
    int64_t nb = NUMEL(c->in[1]), same = NUMEL(c->in[0]) == nb;
    int64_t off = same ? r0 : r0 * nb, len = same ? r1 - r0 : (r1 - r0) * nb;
    float *out = F32(c->out) + off;
    const float *a = F32(c->in[0]) + off, *b = F32(c->in[1]) + (same ? off : 0);
    int64_t blen = same ? len : nb;
    if (c->op == MT_OP_ADD) mt_kernel_add_fwd(out, a, b, len, blen);
    else if (c->op == MT_OP_SUB) mt_kernel_sub_fwd(out, a, b, len, blen);
    else mt_kernel_mul_fwd(out, a, b, len, blen);
}
static void run_binary(const mt_op_env *env, const mt_op_call *c) {
    mt_op_par ctx;
    int64_t nb = NUMEL(c->in[1]), na = NUMEL(c->in[0]);
    if (na == nb) mt__op_par_run(env, c, &ctx, na, 1, range_binary);
    else mt__op_par_run(env, c, &ctx, na / nb, nb, range_binary);
}
/* SCALE, SCALE_BWD: out (+)= s · in0. */
/* RESHARD on one device: out (+)= in0. */
static void run_copy(const mt_op_env *env, const mt_op_call *c) {
    (void)env;
    mt_kernel_scale(F32(c->out), F32(c->in[0]), 1.0f, NUMEL(c->out), c->acc);
}

static void run_scale(const mt_op_env *env, const mt_op_call *c) {
    mt_kernel_scale(F32(c->out), F32(c->in[0]), c->p.scale.s, NUMEL(c->out), c->acc);
}
static void range_gelu(void *arg, int64_t e0, int64_t e1, int w) {
    const mt_op_call *c = ((mt_op_par *)arg)->c;
    mt_kernel_gelu_fwd(F32(c->out) + e0, F32(c->in[0]) + e0, e1 - e0);
}
static void run_gelu(const mt_op_env *env, const mt_op_call *c) {
    mt_op_par ctx;
    mt__op_par_run(env, c, &ctx, NUMEL(c->out), 1, range_gelu);
}
/* LAYERNORM: out (rows,C); aux = {mean, rstd} (rows). Rows are independent. */
static void range_layernorm(void *arg, int64_t r0, int64_t r1, int w) {
    const mt_op_call *c = ((mt_op_par *)arg)->c;
    int64_t C = c->p.rows.C;
    mt_kernel_layernorm_fwd(F32(c->out) + r0 * C, F32(c->aux[0]) + r0, F32(c->aux[1]) + r0,
                            F32(c->in[0]) + r0 * C, F32(c->in[1]), F32(c->in[2]), r1 - r0, C);
}
static void run_layernorm(const mt_op_env *env, const mt_op_call *c) {
    mt_op_par ctx;
    mt__op_par_run(env, c, &ctx, c->p.rows.rows, c->p.rows.C, range_layernorm);
}
/* RMSNORM: out (rows,C); aux = {rstd} (rows). Rows are independent. */
static void range_rmsnorm(void *arg, int64_t r0, int64_t r1, int w) {
    const mt_op_call *c = ((mt_op_par *)arg)->c;
    int64_t C = c->p.rmsnorm.C;
    mt_kernel_rmsnorm_fwd(F32(c->out) + r0 * C, F32(c->aux[0]) + r0, F32(c->in[0]) + r0 * C,
                          F32(c->in[1]), r1 - r0, C, c->p.rmsnorm.eps);
}
static void run_rmsnorm(const mt_op_env *env, const mt_op_call *c) {
    mt_op_par ctx;
    mt__op_par_run(env, c, &ctx, c->p.rmsnorm.rows, c->p.rmsnorm.C, range_rmsnorm);
}
/* SWIGLU, SWIGLU_BWD_A, SWIGLU_BWD_B, SWIGLU_BWD: elementwise over out's
 * elements. */
static void range_swiglu(void *arg, int64_t e0, int64_t e1, int w) {
    const mt_op_call *c = ((mt_op_par *)arg)->c;
    float *out = F32(c->out) + e0;
    const float *a = F32(c->in[0]) + e0, *b = F32(c->in[1]) + e0;
    if (c->op == MT_OP_SWIGLU) mt_kernel_swiglu_fwd(out, a, b, e1 - e0);
    else if (c->op == MT_OP_SWIGLU_BWD_A)
        mt_kernel_swiglu_bwd_a(out, a, b, F32(c->in[2]) + e0, e1 - e0, c->acc);
    else if (c->op == MT_OP_SWIGLU_BWD)
        mt_kernel_swiglu_bwd(out, F32(c->out2) + e0, a, b, F32(c->in[2]) + e0, e1 - e0, c->acc,
                             c->acc2);
    else mt_kernel_swiglu_bwd_b(out, a, b, e1 - e0, c->acc);   /* b is dout here */
}
static void run_swiglu(const mt_op_env *env, const mt_op_call *c) {
    mt_op_par ctx;
    mt__op_par_run(env, c, &ctx, NUMEL(c->out), 1, range_swiglu);
}
/* ATTENTION, ATTENTION_BWD: aux/in lse (B,NH,T); the packed qkv (B,T,3C)
 * as the attention kernels' layout: q, k, v at offsets 0, C, 2C, row
 * stride 3C, one kv head per query head. */
static mt_attn_layout packed_layout(const mt_attention_params *p) {
    const int64_t HS = p->C / p->NH;
    return (mt_attn_layout){.B = p->B, .T = p->T, .NH = p->NH, .KV = p->NH, .HS = HS, .G = 1,
                            .ldq = 3 * p->C, .ldk = 3 * p->C, .ldv = 3 * p->C, .ldo = p->C,
                            .Tk = p->parts > 1 ? p->Tk : 0};
}
/* ATTENTION_GQA and its backward: q (B,T,NH·HS), k, v (B,T,KV·HS) dense. */
static mt_attn_layout gqa_layout(const mt_gqa_params *p) {
    return (mt_attn_layout){.B = p->B, .T = p->T, .NH = p->NH, .KV = p->KV, .HS = p->HS,
                            .G = p->G, .hoff = p->hoff, .ldq = p->NH * p->HS,
                            .ldk = p->KV * p->HS, .ldv = p->KV * p->HS, .ldo = p->NH * p->HS,
                            .Tk = p->parts > 1 ? p->Tk : 0};
}
/* A split call's sequence split (parts > 1), whichever params it has. */
static void split_of(const mt_op_call *c, int64_t *T, int64_t *Tk, int64_t *parts,
                     int64_t *part) {
    const bool packed = c->op == MT_OP_ATTENTION || c->op == MT_OP_ATTENTION_BWD;
    *T = packed ? c->p.attention.T : c->p.gqa.T;
    *Tk = packed ? c->p.attention.Tk : c->p.gqa.Tk;
    *parts = packed ? c->p.attention.parts : c->p.gqa.parts;
    *part = packed ? c->p.attention.part : c->p.gqa.part;
}
/* The kernels' scratch a worker (attention.c: its tiles and a kv head's
 * packed rows), and for a split call the query and key positions (T + Tk
 * int32s, mt_headtail_pos) past it. */
static size_t kernel_floats(const mt_op_call *c) {
    int64_t T, Tk, parts, part;
    split_of(c, &T, &Tk, &parts, &part);
    const bool packed = c->op == MT_OP_ATTENTION || c->op == MT_OP_ATTENTION_BWD;
    const int64_t HS = packed ? c->p.attention.C / c->p.attention.NH : c->p.gqa.HS;
    return mt_kernel_attention_scratch(parts > 1 ? Tk : T, HS);
}
static size_t scratch_attention(const mt_op_call *c) {
    int64_t T, Tk, parts, part;
    split_of(c, &T, &Tk, &parts, &part);
    return kernel_floats(c) + (parts > 1 ? (size_t)(T + Tk) : 0);
}
static float *attention_scratch(const mt_op_par *ctx, int w) {
    return ctx->env->scratch + (size_t)w * scratch_attention(ctx->c);
}
/* A split call's positions into L, written into the worker's scratch past
 * its tiles: the queries this device's head-tail rows, the keys each
 * device's in device order (the gather's). */
static void split_positions(const mt_op_call *c, mt_attn_layout *L, float *scratch) {
    int64_t T, Tk, parts, part;
    split_of(c, &T, &Tk, &parts, &part);
    if (parts <= 1) return;
    int32_t *qpos = (int32_t *)(scratch + kernel_floats(c)), *kpos = qpos + T;
    const int64_t local = Tk / parts;   /* each device's rows */
    for (int64_t j = 0; j < Tk; j++)
        kpos[j] = (int32_t)mt_headtail_pos(j % local, local, (int)parts, (int)(j / local));
    if (T == Tk)   /* the whole form (Ulysses'): the queries are those rows too */
        memcpy(qpos, kpos, (size_t)T * sizeof *qpos);
    else
        for (int64_t i = 0; i < T; i++)
            qpos[i] = (int32_t)mt_headtail_pos(i, T, (int)parts, (int)part);
    L->qpos = qpos;
    L->kpos = kpos;
}
/* The call's document ids (in[doc], doc its params' index, 0: none) into
 * L. A split call's are the gathered ids of the keys (B,Tk), in device
 * order as the keys; its queries' are this device's rows of them (rows
 * [part·T, (part+1)·T)), or all of them in the whole form (T = Tk). */
static void attention_docs(const mt_op_call *c, int64_t doc, mt_attn_layout *L) {
    int64_t T, Tk, parts, part;
    split_of(c, &T, &Tk, &parts, &part);
    L->doc = doc ? I32(c->in[doc]) : NULL;
    if (!L->doc || parts <= 1 || T == Tk) return;
    L->kdoc = L->doc;
    L->doc += part * T;
    L->ldd = Tk;
}
/* (batch, head) pairs are independent and the kernels take a range of
 * them: split over the B·NH pairs, so a batch of one still fills the pool. */
static void range_attention(void *arg, int64_t p0, int64_t p1, int w) {
    const mt_op_par *ctx = arg;
    const mt_op_call *c = ctx->c;
    float *scratch = attention_scratch(ctx, w);
    if (c->op == MT_OP_ATTENTION) {
        const mt_attention_params *p = &c->p.attention;
        mt_attn_layout L = packed_layout(p);
        split_positions(c, &L, scratch);
        attention_docs(c, p->doc, &L);
        /* the whole form (Tk = T) reads its keys from qkv itself */
        const float *qkv = F32(c->in[0]), *kv = F32(c->in[p->parts > 1 && p->Tk != p->T]);
        mt_kernel_attention_fwd(F32(c->out), F32(c->aux[0]), qkv, kv + p->C, kv + 2 * p->C, &L,
                                scratch, p0, p1);
    } else {
        mt_attn_layout L = gqa_layout(&c->p.gqa);
        split_positions(c, &L, scratch);
        attention_docs(c, c->p.gqa.doc, &L);
        mt_kernel_attention_fwd(F32(c->out), F32(c->aux[0]), F32(c->in[0]), F32(c->in[1]),
                                F32(c->in[2]), &L, scratch, p0, p1);
    }
}
static void run_attention(const mt_op_env *env, const mt_op_call *c) {
    const mt_attention_params *p = &c->p.attention;
    mt_op_par ctx;
    mt__op_par_run(env, c, &ctx, p->B * p->NH, p->T * (p->parts > 1 ? p->Tk : p->T) *
                   (p->C / p->NH), range_attention);
}
static void run_attention_gqa(const mt_op_env *env, const mt_op_call *c) {
    const mt_gqa_params *p = &c->p.gqa;
    mt_op_par ctx;
    mt__op_par_run(env, c, &ctx, p->B * p->NH, p->T * (p->parts > 1 ? p->Tk : p->T) * p->HS,
                   range_attention);
}
/* EMBEDDING: out (n,C) = table (V,C)[ids (n)]. */
static void run_embedding(const mt_op_env *env, const mt_op_call *c) {
    const mt_embedding_params *p = &c->p.embedding;
    if (p->masked)
        mt_kernel_embedding_fwd_masked(F32(c->out), F32(c->in[0]), I32(c->in[1]), p->n, p->C,
                                       p->lo, p->V);
    else
        mt_kernel_embedding_fwd(F32(c->out), F32(c->in[0]), I32(c->in[1]), p->n, p->C);
}
/* CROSS_ENTROPY, CE_BWD: logits (rows,Vp); aux lse (rows). Rows are
 * independent; the loss adds per-thread partial sums. */
static void range_cross_entropy(void *arg, int64_t r0, int64_t r1, int w) {
    mt_op_par *ctx = arg;
    const mt_op_call *c = ctx->c;
    const mt_ce_params *p = &c->p.ce;
    ctx->partial[w] = mt_kernel_cross_entropy_fwd(F32(c->aux[0]) + r0, F32(c->in[0]) + r0 * p->Vp,
                                                  I32(c->in[1]) + r0, r1 - r0, p->V, p->Vp, p->scale);
}
static void run_cross_entropy(const mt_op_env *env, const mt_op_call *c) {
    if (c->p.ce.vp_axes.n) {
        mt__run_cross_entropy_vp(env, c);
        return;
    }
    mt_op_par ctx = {0};
    mt__op_par_run(env, c, &ctx, c->p.ce.rows, c->p.ce.Vp, range_cross_entropy);
    F32(c->out)[0] = (float)mt__op_par_sum(&ctx, env);
}
/* Vocabulary parallel: (2, rows) floats for the row sums it all-reduces. */
static size_t scratch_ce(const mt_op_call *c) {
    return c->p.ce.vp_axes.n ? 2 * (size_t)c->p.ce.rows : 0;
}
static void run_mse(const mt_op_env *env, const mt_op_call *c) {
    F32(c->out)[0] = (float)mt_kernel_mse_fwd(F32(c->in[0]), F32(c->in[1]), NUMEL(c->in[0]),
                                              c->p.mse.scale);
}
/* SUM: out = s · Σ in0. */
static void run_sum(const mt_op_env *env, const mt_op_call *c) {
    F32(c->out)[0] = (float)(c->p.scale.s * mt_kernel_sum(F32(c->in[0]), NUMEL(c->in[0])));
}
/* TRANSPOSE, TRANSPOSE_BWD: out (batch,Cc,R) (+)= in (batch,R,Cc)ᵀ. */
static void run_transpose(const mt_op_env *env, const mt_op_call *c) {
    const mt_transpose_params *p = &c->p.transpose;
    mt_kernel_transpose(F32(c->out), F32(c->in[0]), p->batch, p->R, p->Cc, c->acc);
}

/* BIAS_GRAD: out (OC) (+)= Σ_rows in0 (rows,OC), OC in p.rows.C. */
static void run_bias_grad(const mt_op_env *env, const mt_op_call *c) {
    mt_kernel_bias_grad(F32(c->out), F32(c->in[0]), c->p.rows.rows, c->p.rows.C, c->acc);
}
/* REDUCE_BCAST: out (nb) (+)= s · Σ over repeats of in0 (n). */
static void run_reduce_bcast(const mt_op_env *env, const mt_op_call *c) {
    mt_kernel_reduce_broadcast(F32(c->out), F32(c->in[0]), c->p.scale.s, NUMEL(c->in[0]),
                               NUMEL(c->out), c->acc);
}
static void run_mul_bwd_a(const mt_op_env *env, const mt_op_call *c) {
    mt_kernel_mul_bwd_a(F32(c->out), F32(c->in[0]), F32(c->in[1]), NUMEL(c->in[0]), NUMEL(c->in[1]),
                        c->acc);
}
static void run_mul_bwd_b(const mt_op_env *env, const mt_op_call *c) {
    mt_kernel_mul_bwd_b(F32(c->out), F32(c->in[0]), F32(c->in[1]), NUMEL(c->in[0]), NUMEL(c->out),
                        c->acc);
}
static void range_gelu_bwd(void *arg, int64_t e0, int64_t e1, int w) {
    const mt_op_call *c = ((mt_op_par *)arg)->c;
    mt_kernel_gelu_bwd(F32(c->out) + e0, F32(c->in[0]) + e0, F32(c->in[1]) + e0, e1 - e0, c->acc);
}
static void run_gelu_bwd(const mt_op_env *env, const mt_op_call *c) {
    mt_op_par ctx;
    mt__op_par_run(env, c, &ctx, NUMEL(c->out), 1, range_gelu_bwd);
}
/* LN_BWD_INPUT: in = {dout, x, w, mean, rstd}. */
static void range_ln_bwd_input(void *arg, int64_t r0, int64_t r1, int w) {
    const mt_op_call *c = ((mt_op_par *)arg)->c;
    int64_t C = c->p.rows.C;
    mt_kernel_layernorm_bwd_input(F32(c->out) + r0 * C, F32(c->in[0]) + r0 * C, F32(c->in[1]) + r0 * C,
                                  F32(c->in[2]), F32(c->in[3]) + r0, F32(c->in[4]) + r0, r1 - r0, C,
                                  c->acc);
}
static void run_ln_bwd_input(const mt_op_env *env, const mt_op_call *c) {
    mt_op_par ctx;
    mt__op_par_run(env, c, &ctx, c->p.rows.rows, c->p.rows.C, range_ln_bwd_input);
}
/* LN_BWD_PARAMS: in = {dout, x, mean, rstd}; out dw (C), out2 db (C). The
 * kernel always adds, so an output that does not accumulate starts from 0. */
static void run_ln_bwd_params(const mt_op_env *env, const mt_op_call *c) {
    size_t bytes = (size_t)c->p.rows.C * sizeof(float);
    if (!c->acc) memset(F32(c->out), 0, bytes);
    if (!c->acc2) memset(F32(c->out2), 0, bytes);
    mt_kernel_layernorm_bwd_params(F32(c->out), F32(c->out2), F32(c->in[0]), F32(c->in[1]),
                                   F32(c->in[2]), F32(c->in[3]), c->p.rows.rows, c->p.rows.C);
}
/* Each call's document ids, when it has them, are in[p.doc] (after its
 * other inputs). ATTENTION_BWD: in = {dout, qkv, out, lse}; GQA_BWD_QK: in = {dout, q, k,
 * v, out, lse}, out dq, out2 dk; GQA_BWD_V: in = {dout, q, k, lse}, out dv.
 * Split over the (batch, kv head) groups; each worker has its own tiles. */
static void range_attention_bwd(void *arg, int64_t g0, int64_t g1, int w) {
    const mt_op_par *ctx = arg;
    const mt_op_call *c = ctx->c;
    float *scratch = attention_scratch(ctx, w);
    if (c->op == MT_OP_ATTENTION_BWD) {
        const mt_attention_params *p = &c->p.attention;
        mt_attn_layout L = packed_layout(p);
        split_positions(c, &L, scratch);
        attention_docs(c, p->doc, &L);
        const bool split = p->parts > 1;
        const float *qkv = F32(c->in[1]), *kv = split ? F32(c->in[4]) : qkv;
        /* split: dq into out (its k, v columns zeroed by the run), dk and
         * dv into out2 (its q columns zeroed) */
        float *d = F32(c->out), *dkv = split ? F32(c->out2) : d;
        mt_attn_grads g = {d, dkv + p->C, dkv + 2 * p->C, c->acc, split ? c->acc2 : c->acc};
        mt_kernel_attention_bwd(&g, F32(c->in[0]), qkv, kv + p->C, kv + 2 * p->C,
                                F32(c->in[2]), F32(c->in[3]), &L, scratch, g0, g1);
        return;
    }
    mt_attn_layout L = gqa_layout(&c->p.gqa);
    split_positions(c, &L, scratch);
    attention_docs(c, c->p.gqa.doc, &L);
    if (c->op == MT_OP_GQA_BWD_QK) {
        mt_attn_grads g = {.dq = F32(c->out), .dk = F32(c->out2), .acc_q = c->acc,
                           .acc_kv = c->acc2};
        mt_kernel_attention_bwd(&g, F32(c->in[0]), F32(c->in[1]), F32(c->in[2]), F32(c->in[3]),
                                F32(c->in[4]), F32(c->in[5]), &L, scratch, g0, g1);
    } else {   /* GQA_BWD_V: dv = pᵀ·dout reads neither v nor out */
        mt_attn_grads g = {.dv = F32(c->out), .acc_kv = c->acc};
        const float *k = F32(c->in[2]);
        mt_kernel_attention_bwd(&g, F32(c->in[0]), F32(c->in[1]), k, k, NULL, F32(c->in[3]), &L,
                                scratch, g0, g1);
    }
}
/* A split ATTENTION_BWD writes dq into out's q columns and dk, dv into
 * out2's k and v columns: the other columns are 0 (what they add is 0). */
static void split_zero(const mt_op_call *c) {
    const mt_attention_params *p = &c->p.attention;
    const size_t row = (size_t)p->C * sizeof(float);
    if (!c->acc)
        for (int64_t r = 0; r < p->B * p->T; r++) memset(F32(c->out) + r * 3 * p->C + p->C, 0, 2 * row);
    if (!c->acc2)
        for (int64_t r = 0; r < p->B * p->Tk; r++) memset(F32(c->out2) + r * 3 * p->C, 0, row);
}
static void run_attention_bwd(const mt_op_env *env, const mt_op_call *c) {
    mt_op_par ctx;
    if (c->op == MT_OP_ATTENTION_BWD) {
        const mt_attention_params *p = &c->p.attention;
        if (p->parts > 1) split_zero(c);
        mt__op_par_run(env, c, &ctx, p->B * p->NH, p->T * (p->parts > 1 ? p->Tk : p->T) *
                       (p->C / p->NH), range_attention_bwd);
    } else {
        const mt_gqa_params *p = &c->p.gqa;
        mt__op_par_run(env, c, &ctx, p->B * p->KV, p->T * p->T * p->HS * p->G, range_attention_bwd);
    }
}
/* RMS_BWD_INPUT: in = {dout, x, w, rstd}. */
static void range_rms_bwd_input(void *arg, int64_t r0, int64_t r1, int w) {
    const mt_op_call *c = ((mt_op_par *)arg)->c;
    int64_t C = c->p.rmsnorm.C;
    mt_kernel_rmsnorm_bwd_input(F32(c->out) + r0 * C, F32(c->in[0]) + r0 * C,
                                F32(c->in[1]) + r0 * C, F32(c->in[2]), F32(c->in[3]) + r0,
                                r1 - r0, C, c->acc);
}
static void run_rms_bwd_input(const mt_op_env *env, const mt_op_call *c) {
    mt_op_par ctx;
    mt__op_par_run(env, c, &ctx, c->p.rmsnorm.rows, c->p.rmsnorm.C, range_rms_bwd_input);
}
/* RMS_BWD_PARAMS: in = {dout, x, rstd}; out dw (C). The kernel always adds. */
static void run_rms_bwd_params(const mt_op_env *env, const mt_op_call *c) {
    if (!c->acc) memset(F32(c->out), 0, (size_t)c->p.rmsnorm.C * sizeof(float));
    mt_kernel_rmsnorm_bwd_params(F32(c->out), F32(c->in[0]), F32(c->in[1]), F32(c->in[2]),
                                 c->p.rmsnorm.rows, c->p.rmsnorm.C);
}
/* EMBEDDING_BWD: in = {dout, ids}; the kernel always adds. */
static void run_embedding_bwd(const mt_op_env *env, const mt_op_call *c) {
    if (!c->acc) memset(F32(c->out), 0, (size_t)NUMEL(c->out) * sizeof(float));
    const mt_embedding_params *p = &c->p.embedding;
    if (p->masked)
        mt_kernel_embedding_bwd_masked(F32(c->out), F32(c->in[0]), I32(c->in[1]), p->n, p->C,
                                       p->lo, p->V);
    else
        mt_kernel_embedding_bwd(F32(c->out), F32(c->in[0]), I32(c->in[1]), p->n, p->C);
}
/* CE_BWD: in = {dloss, logits, lse, targets}. */
static void range_ce_bwd(void *arg, int64_t r0, int64_t r1, int w) {
    const mt_op_call *c = ((mt_op_par *)arg)->c;
    const mt_ce_params *p = &c->p.ce;
    int64_t Vp = p->Vp;
    mt_kernel_cross_entropy_bwd(F32(c->out) + r0 * Vp, F32(c->in[1]) + r0 * Vp, F32(c->in[2]) + r0,
                                I32(c->in[3]) + r0, F32(c->in[0])[0], r1 - r0, p->V, Vp, p->scale,
                                c->acc);
}
static void run_ce_bwd(const mt_op_env *env, const mt_op_call *c) {
    if (c->p.ce.vp_axes.n) {
        mt__run_ce_bwd_vp(env, c);
        return;
    }
    mt_op_par ctx;
    mt__op_par_run(env, c, &ctx, c->p.ce.rows, c->p.ce.Vp, range_ce_bwd);
}
/* MSE_BWD: in = {dloss, pred, target}. */
static void run_mse_bwd(const mt_op_env *env, const mt_op_call *c) {
    mt_kernel_mse_bwd(F32(c->out), F32(c->in[1]), F32(c->in[2]), c->p.mse.sign * F32(c->in[0])[0],
                      NUMEL(c->out), c->p.mse.scale, c->acc);
}
/* FILL_BWD: out (+)= s · dloss. */
static void run_fill_bwd(const mt_op_env *env, const mt_op_call *c) {
    mt_kernel_fill(F32(c->out), c->p.scale.s * F32(c->in[0])[0], NUMEL(c->out), c->acc);
}

/* ======================================================================== */
/* The table                                                                 */
/* ======================================================================== */

/* The cost classes by short names, for the table's width. */
#define PRODUCT    MT_COST_PRODUCT
#define ATTENTION  MT_COST_ATTENTION
#define VECTOR     MT_COST_VECTOR
#define COLLECTIVE MT_COST_COLLECTIVE

/* Each op's two definitions (ops_impl.h), with the name of its MT_OP_LIST
 * line: what it is, mt__opdef_<name>, and its CPU kernel, mt__kernel_<name>:
 * DEF(name, inputs (min, max), cost class, cost, run [, .scratch = ...]).
 * rope and rope_bwd are ops/rope.c's. */
#define DEF(op, min, max, class, cost_, ...)                                          \
    const mt_op_def mt__opdef_##op = {.name = #op, .min_in = min, .max_in = max,      \
                                      .cost_class = class, .cost = cost_};           \
    const mt_op_kernel mt__kernel_##op = {.run = __VA_ARGS__}

DEF(matmul, 2, 2, PRODUCT, mt__cost_gemm, run_gemm);
DEF(linear, 2, 3, PRODUCT, mt__cost_linear, run_linear);
DEF(add, 2, 2, VECTOR, mt__cost_binary, run_binary);
DEF(sub, 2, 2, VECTOR, mt__cost_binary, run_binary);
DEF(mul, 2, 2, VECTOR, mt__cost_binary, run_binary);
DEF(scale, 1, 1, VECTOR, mt__cost_unary, run_scale);
DEF(gelu, 1, 1, VECTOR, mt__cost_gelu, run_gelu);
DEF(layernorm, 3, 3, VECTOR, mt__cost_layernorm, run_layernorm);
DEF(attention, 1, 2, ATTENTION, mt__cost_attention, run_attention, .scratch = scratch_attention);
DEF(embedding, 2, 2, VECTOR, mt__cost_embedding, run_embedding);
/* the vocabulary-parallel loss all-reduces its row statistics inside */
static mt_axes ce_inside(const mt_op_call *c) { return c->p.ce.vp_axes; }
const mt_op_def mt__opdef_cross_entropy = {.name = "cross_entropy", .min_in = 2, .max_in = 2,
                                           .cost_class = VECTOR, .cost = mt__cost_ce,
                                           .inside = ce_inside};
const mt_op_kernel mt__kernel_cross_entropy = {.run = run_cross_entropy, .scratch = scratch_ce};
DEF(mse, 2, 2, VECTOR, mt__cost_reduce_in, run_mse);
DEF(sum, 1, 1, VECTOR, mt__cost_reduce_in, run_sum);
DEF(transpose, 1, 1, VECTOR, mt__cost_transpose, run_transpose);
DEF(reshard, 1, 1, VECTOR, mt__cost_unary, run_copy);
DEF(varies, 1, 1, VECTOR, mt__cost_unary, run_copy);
DEF(rmsnorm, 2, 2, VECTOR, mt__cost_rmsnorm, run_rmsnorm);
DEF(swiglu, 2, 2, VECTOR, mt__cost_swiglu, run_swiglu);
DEF(attention_gqa, 3, 4, ATTENTION, mt__cost_gqa, run_attention_gqa,
    .scratch = scratch_attention);
/* collective.c */
DEF(psum, 1, 1, COLLECTIVE, mt__cost_coll,
    mt__run_psum, .scratch = mt__scratch_coll, .scratch_caller = true);
DEF(all_gather, 1, 1, COLLECTIVE, mt__cost_coll,
    mt__run_all_gather, .scratch = mt__scratch_coll, .scratch_caller = true);
DEF(psum_scatter, 1, 1, COLLECTIVE, mt__cost_coll,
    mt__run_psum_scatter, .scratch = mt__scratch_coll, .scratch_caller = true);
DEF(ppermute, 1, 1, COLLECTIVE, mt__cost_coll,
    mt__run_ppermute, .scratch = mt__scratch_coll, .scratch_caller = true);
DEF(all_to_all, 1, 1, COLLECTIVE, mt__cost_coll,
    mt__run_all_to_all, .scratch = mt__scratch_coll, .scratch_caller = true);
DEF(pvary, 1, 1, COLLECTIVE, mt__cost_coll, mt__run_pvary);
DEF(slice, 1, 1, COLLECTIVE, mt__cost_coll, mt__run_slice);
/* collective_matmul.c */
DEF(ag_linear, 2, 3, COLLECTIVE, mt__cost_cm,
    mt__run_ag_linear, .scratch = mt__scratch_cm, .scratch_caller = true);
DEF(linear_rs, 2, 2, COLLECTIVE, mt__cost_cm,
    mt__run_linear_rs, .scratch = mt__scratch_cm, .scratch_caller = true);
/* backward */
DEF(gemm, 2, 2, PRODUCT, mt__cost_gemm, run_gemm);
DEF(bias_grad, 1, 1, VECTOR, mt__cost_reduce_in, run_bias_grad);
DEF(reduce_bcast, 1, 1, VECTOR, mt__cost_reduce_in, run_reduce_bcast);
DEF(scale_bwd, 1, 1, VECTOR, mt__cost_unary, run_scale);
DEF(mul_bwd_a, 2, 2, VECTOR, mt__cost_binary, run_mul_bwd_a);
DEF(mul_bwd_b, 2, 2, VECTOR, mt__cost_reduce_in, run_mul_bwd_b);
DEF(gelu_bwd, 2, 2, VECTOR, mt__cost_gelu_bwd, run_gelu_bwd);
DEF(ln_bwd_input, 5, 5, VECTOR, mt__cost_ln_bwd, run_ln_bwd_input);
DEF(ln_bwd_params, 4, 4, VECTOR, mt__cost_ln_bwd, run_ln_bwd_params);
DEF(attention_bwd, 4, 5, ATTENTION, mt__cost_attention_bwd,
    run_attention_bwd, .scratch = scratch_attention);
DEF(embedding_bwd, 2, 2, VECTOR, mt__cost_embedding, run_embedding_bwd);
DEF(ce_bwd, 4, 4, VECTOR, mt__cost_ce, run_ce_bwd);
DEF(mse_bwd, 3, 3, VECTOR, mt__cost_unary, run_mse_bwd);
DEF(fill_bwd, 1, 1, VECTOR, mt__cost_unary, run_fill_bwd);
DEF(transpose_bwd, 1, 1, VECTOR, mt__cost_transpose, run_transpose);
DEF(cm_wgrad, 2, 2, PRODUCT, mt__cost_cm, mt__run_cm_wgrad);
DEF(rms_bwd_input, 4, 4, VECTOR, mt__cost_rms_bwd, run_rms_bwd_input);
DEF(rms_bwd_params, 3, 3, VECTOR, mt__cost_rms_bwd, run_rms_bwd_params);
DEF(swiglu_bwd_a, 3, 3, VECTOR, mt__cost_swiglu, run_swiglu);
DEF(swiglu_bwd_b, 2, 2, VECTOR, mt__cost_swiglu, run_swiglu);
DEF(swiglu_bwd, 3, 3, VECTOR, mt__cost_swiglu, run_swiglu);
DEF(gqa_bwd_qk, 6, 7, ATTENTION, mt__cost_gqa,
    run_attention_bwd, .scratch = scratch_attention);
DEF(gqa_bwd_v, 4, 5, ATTENTION, mt__cost_gqa,
    run_attention_bwd, .scratch = scratch_attention);

/* The table, from the list: every op's entry, in the enum's order. */
static const mt_op_def *const op_table[MT_OP_COUNT] = {
#define OP_ENTRY_(NAME, name) [MT_OP_##NAME] = &mt__opdef_##name,
    MT_OP_LIST(OP_ENTRY_)
#undef OP_ENTRY_
};

const mt_op_def *mt__op_def(mt_op op) { return op_table[op]; }

const mt_op_def *mt__op_def_named(const char *name) {
    /* a name from a descriptor (mt_node_info.op) is found by its address
       first: the planner asks once a node of every program it builds, and
       the names' comparisons were 2 % of a search */
    for (int k = 0; name && k < MT_OP_COUNT; k++)
        if (op_table[k]->name == name) return op_table[k];
    for (int k = 0; name && k < MT_OP_COUNT; k++)
        if (strcmp(op_table[k]->name, name) == 0) return op_table[k];
    return NULL;
}
