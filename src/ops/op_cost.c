/*
 * op_cost.c — what one run of each op costs: its FLOPs and the bytes of
 * memory it moves, from the call's parameters alone (no data is read). The
 * op table (op_table.c) names one of these per op as its descriptor's cost;
 * the profiler, the listings, the stats and the planner read them there.
 * The collective ops' are collective.c's and collective_matmul.c's; an op
 * in a file of its own has its cost there (ops/rope.c).
 */
#include "ops/op_cost.h"

#define NUMEL(t) mt_tensor_numel(t)

void mt__cost_gemm(const mt_op_call *c, double *fl, double *by) {
    double M = (double)c->p.gemm.M, N = (double)c->p.gemm.N, K = (double)c->p.gemm.K;
    *fl = 2 * M * N * K;
    *by = 4 * (M * K + K * N + M * N * (c->acc ? 2 : 1));
}
void mt__cost_linear(const mt_op_call *c, double *fl, double *by) {
    double R = (double)c->p.linear.rows, OC = (double)c->p.linear.OC, C = (double)c->p.linear.C;
    *fl = 2 * R * OC * C + (c->n_in == 3 ? R * OC : 0);
    *by = 4 * (R * C + OC * C + R * OC + OC);
}
/* elementwise: `f` FLOPs and `b` bytes per output element */
static void cost_elementwise(const mt_op_call *c, double f, double b, double *fl, double *by) {
    double e = (double)NUMEL(c->out);
    *fl = f * e;
    *by = b * e;
}
void mt__cost_binary(const mt_op_call *c, double *fl, double *by) {
    cost_elementwise(c, 1, 12, fl, by);
}
void mt__cost_unary(const mt_op_call *c, double *fl, double *by) {
    cost_elementwise(c, 1, 8, fl, by);
}
void mt__cost_gelu(const mt_op_call *c, double *fl, double *by) {
    cost_elementwise(c, 10, 8, fl, by);
}
void mt__cost_gelu_bwd(const mt_op_call *c, double *fl, double *by) {
    cost_elementwise(c, 18, 12, fl, by);
}
void mt__cost_transpose(const mt_op_call *c, double *fl, double *by) {
    cost_elementwise(c, 0, 8, fl, by);
}
void mt__cost_reduce_in(const mt_op_call *c, double *fl, double *by) {
    double e = (double)NUMEL(c->in[0]);
    *fl = e;
    *by = 4 * e + 4 * (double)NUMEL(c->out);
}
void mt__cost_layernorm(const mt_op_call *c, double *fl, double *by) {
    double e = (double)c->p.rows.rows * (double)c->p.rows.C;
    *fl = 8 * e;
    *by = 8 * e;
}
void mt__cost_ln_bwd(const mt_op_call *c, double *fl, double *by) {
    double e = (double)c->p.rows.rows * (double)c->p.rows.C;
    *fl = 10 * e;
    *by = 12 * e;
}
void mt__cost_rmsnorm(const mt_op_call *c, double *fl, double *by) {
    double e = (double)c->p.rmsnorm.rows * (double)c->p.rmsnorm.C;
    *fl = 4 * e;
    *by = 8 * e;
}
void mt__cost_rms_bwd(const mt_op_call *c, double *fl, double *by) {
    double e = (double)c->p.rmsnorm.rows * (double)c->p.rmsnorm.C;
    *fl = c->op == MT_OP_RMS_BWD_INPUT ? 7 * e : 3 * e;
    *by = 12 * e;
}
/* exp, a division and a few products; the fused backward (SWIGLU_BWD) is
 * BWD_A's with db's two products, reading a, b, dout and writing da, db */
void mt__cost_swiglu(const mt_op_call *c, double *fl, double *by) {
    if (c->op == MT_OP_SWIGLU_BWD) cost_elementwise(c, 22, 20, fl, by);
    else if (c->op == MT_OP_SWIGLU_BWD_A) cost_elementwise(c, 20, 16, fl, by);
    else cost_elementwise(c, 15, 12, fl, by);
}
/* Causal (query, key) pairs of one head of one sequence in a call of T
 * query rows against Tk keys. Whole (Tk == T, one device or Ulysses' whole
 * sequence): T(T+1)/2. A context-parallel device's share (parts P > 1,
 * Tk = P·T): its head-tail chunks of c = T/2 rows see 2P·c² + c pairs
 * (CONTEXT_PARALLEL.md §3), equal on every device and summing over the P
 * devices to the whole sequence's Tk(Tk+1)/2. */
static double causal_pairs(int64_t T, int64_t Tk, int64_t parts) {
    if (parts > 1 && Tk == parts * T) {
        double c = (double)T / 2;
        return 2 * (double)parts * c * c + c;
    }
    return (double)T * ((double)T + 1) / 2;
}
static int64_t keys_of(int64_t T, int64_t Tk) { return Tk ? Tk : T; }
/* Flash attention (attention.c). FLOPs: causal, each query row t attends to
 * t+1 keys (causal_pairs under a context split); per (query, key) pair 2·HS
 * for the scores, 2·HS for p·v and 5 for the mask, max, exp and sums.
 * Masked pairs inside diagonal tiles and document masks are not subtracted
 * (documents are data). Bytes: the tensors each call streams once (k and v
 * are re-read per query tile from cache): q and out of the T query rows, k
 * and v of the Tk keys (the gathered sequence under all-gather), and the
 * (B,NH,T) log-sum-exp: linear in T, no (T,T) matrix. */
void mt__cost_attention(const mt_op_call *c, double *fl, double *by) {
    const mt_attention_params *p = &c->p.attention;
    double B = (double)p->B, T = (double)p->T, C = (double)p->C, NH = (double)p->NH;
    double Tk = (double)keys_of(p->T, p->Tk);
    double pairs = B * NH * causal_pairs(p->T, keys_of(p->T, p->Tk), p->parts);
    *fl = 4 * pairs * (C / NH) + 5 * pairs;
    *by = 4 * (B * (2 * T + 2 * Tk) * C + B * NH * T);   /* q, out; k, v; lse */
}
/* FLOPs: twice the forward's, the model FLOPs of the backward; the
 * recomputed scores (one more product a pair) are not counted, as MFU does
 * not count recomputation. Bytes: dout, q, out, lse read and dq written
 * (T rows); k, v read and dk, dv written (Tk rows). */
void mt__cost_attention_bwd(const mt_op_call *c, double *fl, double *by) {
    mt__cost_attention(c, fl, by);
    const mt_attention_params *p = &c->p.attention;
    double B = (double)p->B, T = (double)p->T, C = (double)p->C, NH = (double)p->NH;
    double Tk = (double)keys_of(p->T, p->Tk);
    *fl *= 2;
    *by = 4 * (B * (4 * T + 4 * Tk) * C + B * NH * T);
}
/* The same FLOPs per pair as the GPT's, the model FLOPs: the backward's QK
 * twice the forward's products less dv's, V one product; the scores QK and
 * V recompute are not counted (as the GPT's). Pairs as causal_pairs. Bytes:
 * the tensors each call streams once, the lse (B,NH,T), q and out of T rows
 * and k and v of KV heads of Tk rows. */
void mt__cost_gqa(const mt_op_call *c, double *fl, double *by) {
    const mt_gqa_params *p = &c->p.gqa;
    double B = (double)p->B, T = (double)p->T, HS = (double)p->HS;
    double NH = (double)p->NH, KV = (double)p->KV;
    double Tk = (double)keys_of(p->T, p->Tk);
    double pairs = B * NH * causal_pairs(p->T, keys_of(p->T, p->Tk), p->parts);
    double qo = B * T * NH * HS, kv = B * Tk * KV * HS, lse = B * NH * T;
    if (c->op == MT_OP_ATTENTION_GQA) {
        *fl = 4 * pairs * HS + 5 * pairs;
        *by = 4 * (2 * qo + 2 * kv + lse);
    } else if (c->op == MT_OP_GQA_BWD_QK) {   /* dout q out dq; k v dk; lse */
        *fl = 6 * pairs * HS + 5 * pairs;
        *by = 4 * (4 * qo + 3 * kv + lse);
    } else {                                  /* dout q; k dv; lse */
        *fl = 2 * pairs * HS;
        *by = 4 * (2 * qo + 2 * kv + lse);
    }
}
void mt__cost_embedding(const mt_op_call *c, double *fl, double *by) {
    double n = (double)c->p.embedding.n, C = (double)c->p.embedding.C;
    *fl = c->op == MT_OP_EMBEDDING_BWD ? n * C : 0;
    *by = 8 * n * C;
}
void mt__cost_ce(const mt_op_call *c, double *fl, double *by) {
    double R = (double)c->p.ce.rows, V = (double)c->p.ce.V, Vp = (double)c->p.ce.Vp;
    *fl = 4 * R * V;
    *by = 4 * R * Vp * (c->op == MT_OP_CE_BWD ? 2 : 1);
}
