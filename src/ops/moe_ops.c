/*
 * moe_ops.c — the mixture-of-experts ops (ops_impl.h's MT_OP_LIST lines
 * moe_*): each run calls the kernels of ops/moe.h on its call's tensors,
 * with their costs and the kernel halves of their descriptors. The graph
 * halves are graph/op_moe.c's.
 *
 * Routing is per token, so every op reads its rows from its tensors: T =
 * numel(ids) / k, N = T·k (token, slot) pairs. The sorted rows (rows,k,·)
 * are this call's pairs in expert order (mt_moe_sort of its own ids); each
 * op that needs the order, its inverse or the counts sorts its ids again
 * (a counting sort, O(N + E), in the scratch), so that the only
 * integer tensor between the ops is the ids. The sorts, the counts and
 * the sums over rows (the router losses' values) run on the calling
 * thread, in the first worker's share of the scratch; the per-row and
 * per-token kernels and the grouped products' tiles are split over the
 * pool (moe_par.c: the same bits on any number of threads).
 */
#include "ops/moe_par.h"

#include <string.h>

#define F(t) ((float *)(t)->data)
#define CF(t) ((const float *)(t)->data)
#define I(t) ((const int32_t *)(t)->data)

/* The pairs of a call whose ids are in[k_ids] (or its out for moe_route). */
static int64_t pairs(const mt_op_call *c, int k_ids) {
    return (int64_t)mt_tensor_numel(k_ids < 0 ? c->out : c->in[k_ids]);
}

/* The router's settings for T rows. */
static mt_moe_route_params route_of(const mt_op_call *c, int64_t T) {
    mt_moe_route_params r = c->p.moe.route;
    r.T = T, r.E = c->p.moe.E, r.k = c->p.moe.k;
    return r;
}

/* The sort of ids (N = T·k) in the scratch: order (N), pos (N),
 * counts (E), int32 (the scratch is floats: int32 has their size). */
typedef struct { int32_t *order, *pos, *counts; } moe_sorted;

static moe_sorted sort_ids(const mt_op_env *env, const mt_op_call *c, const int32_t *ids,
                           int64_t N) {
    int32_t *s = (int32_t *)env->scratch;
    moe_sorted o = {s, s + N, s + 2 * N};
    mt_moe_sort(o.order, o.pos, o.counts, ids, N / c->p.moe.k, c->p.moe.k, c->p.moe.E);
    return o;
}

static size_t scratch_sort(const mt_op_call *c) {
    const int64_t N = (int64_t)mt_tensor_numel(c->in[c->n_in - 1]);   /* ids: the last */
    return (size_t)(2 * N + c->p.moe.E);
}

/* The last dim of t. */
static int64_t last(const mt_tensor *t) { return t->shape[t->ndim - 1]; }

/* ---- the router ----------------------------------------------------------- */

/* ids (rows,k) of logits (rows,E), chosen by the scores + the bias (E)
 * where the call has one; the scores the kernel makes beside them go to
 * scratch, and no gates (moe_gates makes scores and gates from the ids). */
static void run_moe_route(const mt_op_env *env, const mt_op_call *c) {
    const int64_t N = pairs(c, -1), T = N / c->p.moe.k;
    const mt_moe_route_params r = route_of(c, T);
    mt__moe_route_par(env, &r, CF(c->in[0]), c->n_in > 1 ? CF(c->in[1]) : NULL, env->scratch,
                      (int32_t *)c->out->data);
}
static size_t scratch_route(const mt_op_call *c) {
    return (size_t)(pairs(c, -1) / c->p.moe.k * c->p.moe.E);
}

/* gates (rows,k) of the given ids; the scores saved in aux[0]. */
static void run_moe_gates(const mt_op_env *env, const mt_op_call *c) {
    const mt_moe_route_params r = route_of(c, pairs(c, 1) / c->p.moe.k);
    mt__moe_gates_z_par(env, &r, CF(c->in[0]), I(c->in[1]), F(c->aux[0]), F(c->out), 0.0, NULL,
                        NULL);
}

/* dlogits (+)= the gates' gradient through the scores, the ids held. */
static void run_moe_gates_bwd(const mt_op_env *env, const mt_op_call *c) {
    const mt_moe_route_params r = route_of(c, pairs(c, 2) / c->p.moe.k);
    mt__moe_gates_bwd_par(env, &r, F(c->out), CF(c->in[0]), NULL, CF(c->in[1]), I(c->in[2]),
                          c->acc);
}

/* ---- capacity ------------------------------------------------------------ */

/* The sequences S and their tokens L of ids (S,L,k), or (T,k): one. */
static void sequences_of(const mt_tensor *ids, int64_t *S, int64_t *L) {
    *S = ids->ndim == 3 ? ids->shape[0] : 1;
    *L = (int64_t)mt_tensor_numel(ids) / (ids->shape[ids->ndim - 1] * *S);
}

static int64_t capacity_of(const mt_op_call *c, int64_t L) {
    return mt_moe_capacity_rows(L, c->p.moe.k, c->p.moe.E, c->p.moe.capacity);
}

/* ids' (S,L,k) = ids, -1 past each expert's capacity in its sequence; in:
 * ids [gates] (the highest-gated kept where given, else the earliest). */
static void run_moe_capacity(const mt_op_env *env, const mt_op_call *c) {
    int64_t S, L;
    sequences_of(c->in[0], &S, &L);
    const bool by_gate = c->n_in > 1;
    mt_moe_drop((int32_t *)c->out->data, I(c->in[0]), by_gate ? CF(c->in[1]) : NULL, S, L,
                c->p.moe.k, c->p.moe.E, capacity_of(c, L),
                by_gate ? MT_MOE_DROP_GATE : MT_MOE_DROP_POSITION, (int32_t *)env->scratch);
}
static size_t scratch_capacity(const mt_op_call *c) {
    int64_t S, L;
    sequences_of(c->in[0], &S, &L);
    return (size_t)(c->p.moe.E * capacity_of(c, L) + L * c->p.moe.k + c->p.moe.E);
}

/* ---- dispatch, the grouped product, combine --------------------------------- */

/* xs (N,D) = x's row of each pair, in expert order (a forward call writes:
 * graph/builders.c makes forward calls without acc). */
static void run_moe_dispatch(const mt_op_env *env, const mt_op_call *c) {
    const int64_t N = pairs(c, 1), D = last(c->in[0]);
    const moe_sorted s = sort_ids(env, c, I(c->in[1]), N);
    mt__moe_dispatch_par(env, F(c->out), CF(c->in[0]), s.order, N, c->p.moe.k, D);
}

static void run_moe_dispatch_bwd(const mt_op_env *env, const mt_op_call *c) {
    const int64_t N = pairs(c, 1), k = c->p.moe.k;
    const moe_sorted s = sort_ids(env, c, I(c->in[1]), N);
    mt__moe_dispatch_bwd_par(env, F(c->out), CF(c->in[0]), s.pos, N / k, k, last(c->out),
                             c->acc);
}

/* The counts (E) of ids (N pairs) in the scratch. */
static const int32_t *counts_of(const mt_op_env *env, const mt_op_call *c, const int32_t *ids,
                                int64_t N) {
    int32_t *counts = (int32_t *)env->scratch;
    mt_moe_counts(counts, ids, 1, N / c->p.moe.k, c->p.moe.k, c->p.moe.E);
    return counts;
}
static size_t scratch_counts(const mt_op_call *c) { return (size_t)c->p.moe.E; }

/* The grouped product's scratch: the counts, or the exchange's buffers
 * over the expert axis (moe_ep.c). */
static size_t scratch_experts(const mt_op_call *c) {
    return c->p.moe.ep_size > 1 ? mt__moe_ep_scratch(c) : scratch_counts(c);
}

/* Rows past the n kept pairs (ids -1: dropped past a capacity) hold no
 * pair: zeros in a written output, untouched in an accumulated one. */
static void zero_tail(const mt_op_call *c, const int32_t *sizes, int64_t el, int64_t N,
                      int64_t width) {
    if (c->acc) return;
    int64_t n = 0;
    for (int64_t e = 0; e < el; e++) n += sizes[e];
    if (n < N) memset(F(c->out) + n * width, 0, (size_t)((N - n) * width) * sizeof(float));
}

/* ys (N,OC) (+)= xs (N,C) · w_e (C,OC) on each expert's rows. */
static void run_moe_experts(const mt_op_env *env, const mt_op_call *c) {
    if (c->p.moe.ep_size > 1) {
        mt__moe_ep_experts(env, c);
        return;
    }
    const mt_tensor *w = c->in[1];
    const mt_moe_gemm g = {.part = MT_MOE_GEMM_Y, .out = F(c->out), .x = CF(c->in[0]),
                           .w = CF(w), .sizes = counts_of(env, c, I(c->in[2]), pairs(c, 2)),
                           .el = c->p.moe.E, .C = w->shape[1], .OC = w->shape[2],
                           .acc = c->acc};
    mt__moe_gemm_par(env, &g);
    zero_tail(c, g.sizes, g.el, pairs(c, 2), g.OC);
}

/* dxs (+)= dy · w_eᵀ per expert; in: dy w ids. */
static void run_moe_experts_bwd_x(const mt_op_env *env, const mt_op_call *c) {
    if (c->p.moe.ep_size > 1) {
        mt__moe_ep_experts_bwd_x(env, c);
        return;
    }
    const mt_tensor *w = c->in[1];
    const mt_moe_gemm g = {.part = MT_MOE_GEMM_DX, .out = F(c->out), .dy = CF(c->in[0]),
                           .w = CF(w), .sizes = counts_of(env, c, I(c->in[2]), pairs(c, 2)),
                           .el = c->p.moe.E, .C = w->shape[1], .OC = w->shape[2],
                           .acc = c->acc};
    mt__moe_gemm_par(env, &g);
    zero_tail(c, g.sizes, g.el, pairs(c, 2), g.C);
}

/* dw (E,C,OC) (+)= xs_eᵀ · dy_e per expert; in: dy xs ids. */
static void run_moe_experts_bwd_w(const mt_op_env *env, const mt_op_call *c) {
    if (c->p.moe.ep_size > 1) {
        mt__moe_ep_experts_bwd_w(env, c);
        return;
    }
    const mt_tensor *dw = c->out;
    const mt_moe_gemm g = {.part = MT_MOE_GEMM_DW, .out = F(dw), .dy = CF(c->in[0]),
                           .x = CF(c->in[1]), .sizes = counts_of(env, c, I(c->in[2]), pairs(c, 2)),
                           .el = c->p.moe.E, .C = dw->shape[1], .OC = dw->shape[2],
                           .acc = c->acc};
    mt__moe_gemm_par(env, &g);
}

/* out (rows,D) (+)= Σ_j gates · ys at each pair's row. */
static void run_moe_combine(const mt_op_env *env, const mt_op_call *c) {
    const int64_t N = pairs(c, 2), k = c->p.moe.k;
    const moe_sorted s = sort_ids(env, c, I(c->in[2]), N);
    mt__moe_combine_par(env, F(c->out), CF(c->in[0]), CF(c->in[1]), s.pos, N / k, k,
                        last(c->out), c->acc);
}

/* dys (+)= gates · dout at each pair's row; in: dout gates ids. */
static void run_moe_combine_bwd_y(const mt_op_env *env, const mt_op_call *c) {
    const int64_t N = pairs(c, 2), k = c->p.moe.k;
    const moe_sorted s = sort_ids(env, c, I(c->in[2]), N);
    mt__moe_combine_bwd_par(env, F(c->out), NULL, CF(c->in[0]), NULL, CF(c->in[1]), s.pos,
                            s.order, N / k, k, N, last(c->out), c->acc);
}

/* dgates (+)= ⟨dout_t, ys at the pair's row⟩; in: dout ys gates ids. */
static void run_moe_combine_bwd_g(const mt_op_env *env, const mt_op_call *c) {
    const int64_t N = pairs(c, 3), k = c->p.moe.k;
    const moe_sorted s = sort_ids(env, c, I(c->in[3]), N);
    mt__moe_combine_bwd_par(env, NULL, F(c->out), CF(c->in[0]), CF(c->in[1]), CF(c->in[2]),
                            s.pos, s.order, N / k, k, N, last(c->in[1]), c->acc);
}

/* ---- the router loss ------------------------------------------------------ */

/* A router loss call's rows: S sequences of L rows of logits (S,L,E) or
 * (T,E) (one sequence), and its factors for this device's share: alpha ·
 * S/S_all on the mean over its S sequences, beta · T/T_all on the mean
 * over its T rows. */
typedef struct { int64_t S, L, T; double alpha, beta; } loss_rows;

static loss_rows loss_rows_of(const mt_op_call *c, const mt_tensor *logits) {
    const mt_moe_op_params *p = &c->p.moe;
    loss_rows r = {.S = logits->ndim == 3 ? logits->shape[0] : 1};
    r.T = (int64_t)mt_tensor_numel(logits) / p->E;
    r.L = r.T / r.S;
    r.alpha = (double)p->alpha * (double)r.S / (double)p->S_all;
    r.beta = (double)p->beta * (double)r.T / (double)p->T_all;
    return r;
}

/* The scratch of both: the z-loss's lse (T doubles), scores (T,E), gates
 * (T,k), counts (S,E), dscores (T,E), the z-loss's gradient rows (T,E). */
static size_t scratch_loss(const mt_op_call *c) {
    const mt_tensor *logits = c->in[c->op == MT_OP_MOE_ROUTER_LOSS ? 0 : 1];
    const loss_rows r = loss_rows_of(c, logits);
    return (size_t)(2 * r.T + 3 * r.T * c->p.moe.E + r.T * c->p.moe.k + r.S * c->p.moe.E);
}

/* The scores and the counts of the call's logits and ids, in scratch (the
 * scores over the pool), after the room of the lse; a softmax router's
 * z-loss rows from the same exps where lse or zg is not NULL (zf = 2β/T). */
static void loss_prepare(const mt_op_env *env, const mt_op_call *c, const mt_tensor *logits,
                         const int32_t *ids, const loss_rows *r, double zf, double *lse,
                         float *zg, float **scores, int32_t **counts) {
    const int64_t E = c->p.moe.E, k = c->p.moe.k;
    const mt_moe_route_params rp = route_of(c, r->T);
    *scores = env->scratch + 2 * r->T;
    float *gates = *scores + r->T * E;
    *counts = (int32_t *)(gates + r->T * k);
    mt__moe_gates_z_par(env, &rp, CF(logits), ids, *scores, gates, zf, lse, zg);
    mt_moe_counts(*counts, ids, r->S, r->L, k, E);
}

/* Whether the z-loss's rows come with the scores' exps (a softmax router
 * with a z-loss), not from a pass of their own over the logits. */
static bool z_with_scores(const mt_op_call *c, const loss_rows *r) {
    return r->beta != 0 && c->p.moe.route.score == MT_MOE_SOFTMAX;
}

static void run_moe_router_loss(const mt_op_env *env, const mt_op_call *c) {
    const loss_rows r = loss_rows_of(c, c->in[0]);
    const mt_moe_route_params rp = route_of(c, r.T);
    double *lse = (double *)env->scratch;   /* the rows' lse, summed here in row order */
    const bool fused = z_with_scores(c, &r);
    float *scores;
    int32_t *counts;
    loss_prepare(env, c, c->in[0], I(c->in[1]), &r, 0.0, fused ? lse : NULL, NULL, &scores,
                 &counts);
    double loss = 0;
    if (r.alpha != 0)
        loss += mt_moe_aux_loss(&rp, scores, counts, r.S, r.L, r.L, r.alpha, NULL, false);
    if (r.beta != 0) {
        if (!fused)
            mt__moe_z_loss_par(env, CF(c->in[0]), r.T, c->p.moe.E, r.beta, lse, NULL, false);
        loss += mt_moe_z_loss_sum(lse, r.T, r.beta);
    }
    F(c->out)[0] = c->acc ? F(c->out)[0] + (float)loss : (float)loss;
}

/* dlogits (+)= dloss · (the aux loss's gradient through the scores + the
 * z-loss's, added last); in: dloss logits ids. */
static void run_moe_router_loss_bwd(const mt_op_env *env, const mt_op_call *c) {
    const mt_tensor *logits = c->in[1];
    const loss_rows r = loss_rows_of(c, logits);
    const mt_moe_route_params rp = route_of(c, r.T);
    const int64_t E = c->p.moe.E, k = c->p.moe.k;
    const double d = CF(c->in[0])[0];
    const bool fused = z_with_scores(c, &r);
    float *zg = env->scratch + scratch_loss(c) - r.T * E;   /* (T,E): the scratch's last */
    float *scores;
    int32_t *counts;
    loss_prepare(env, c, logits, I(c->in[2]), &r, 2.0 * (r.beta * d) / (double)r.T, NULL,
                 fused ? zg : NULL, &scores, &counts);
    float *dgates = scores + r.T * E;   /* the gates are not needed again: zeros */
    float *dscores = (float *)(counts + r.S * E);
    memset(dgates, 0, (size_t)(r.T * k) * sizeof *dgates);
    memset(dscores, 0, (size_t)(r.T * E) * sizeof *dscores);
    if (r.alpha != 0)
        mt_moe_aux_loss(&rp, scores, counts, r.S, r.L, r.L, r.alpha * d, dscores, false);
    mt__moe_gates_bwd_par(env, &rp, F(c->out), dgates, dscores, scores, I(c->in[2]), c->acc);
    if (fused) mt__moe_add_par(env, F(c->out), zg, r.T, E);
    else if (r.beta != 0)
        mt__moe_z_loss_par(env, CF(logits), r.T, E, r.beta * d, NULL, F(c->out), true);
}

/* ---- costs and the descriptors ------------------------------------------- */

/* The element-wise ops: a few FLOPs an element of their float tensors, each
 * read or written once. */
static void cost_moe_vector(const mt_op_call *c, double *fl, double *by) {
    double e = (double)mt_tensor_numel(c->out);
    for (int k = 0; k < c->n_in; k++) e += (double)mt_tensor_numel(c->in[k]);
    *fl = 4 * e;
    *by = 4 * e + (c->acc ? 4 * (double)mt_tensor_numel(c->out) : 0);
}

/* The grouped product and its two backwards: 2·N·C·OC FLOPs. The rows the
 * experts get sum to N = T·k whatever the routing (dropless), so the count
 * is exact; the balance only changes how the rows fall into products. */
static void cost_moe_experts(const mt_op_call *c, double *fl, double *by) {
    const mt_tensor *ids = c->in[c->n_in - 1];
    const double N = (double)mt_tensor_numel(ids);
    const mt_tensor *w = c->op == MT_OP_MOE_EXPERTS_BWD_W ? c->out : c->in[1];
    const double C = (double)w->shape[1], OC = (double)w->shape[2];
    *fl = 2 * N * C * OC;
    *by = 4 * (N * C + N * OC + (double)mt_tensor_numel(w)) +
          (c->acc ? 4 * (double)mt_tensor_numel(c->out) : 0);
}

#define MOE_DEF(name_, lo, hi, cls, cost_)                                                     \
    const mt_op_def mt__opdef_##name_ = {.name = #name_, .min_in = lo, .max_in = hi,           \
                                         .cost_class = cls, .cost = cost_}
#define MOE_KERNEL(name_, scratch_)                                                            \
    const mt_op_kernel mt__kernel_##name_ = {.run = run_##name_, .scratch = scratch_}
/* the grouped products: their expert-parallel exchange's buffers are for
 * the calling thread alone (moe_ep.c) */
#define MOE_KERNEL_EP(name_)                                                                   \
    const mt_op_kernel mt__kernel_##name_ = {.run = run_##name_, .scratch = scratch_experts,   \
                                             .scratch_caller = true}

MOE_DEF(moe_route, 1, 2, MT_COST_VECTOR, cost_moe_vector);
MOE_KERNEL(moe_route, scratch_route);
MOE_DEF(moe_gates, 2, 2, MT_COST_VECTOR, cost_moe_vector);
MOE_KERNEL(moe_gates, NULL);
MOE_DEF(moe_capacity, 1, 2, MT_COST_VECTOR, cost_moe_vector);
MOE_KERNEL(moe_capacity, scratch_capacity);
MOE_DEF(moe_dispatch, 2, 2, MT_COST_VECTOR, cost_moe_vector);
MOE_KERNEL(moe_dispatch, scratch_sort);
MOE_DEF(moe_experts, 3, 3, MT_COST_PRODUCT, cost_moe_experts);
MOE_KERNEL_EP(moe_experts);
MOE_DEF(moe_combine, 3, 3, MT_COST_VECTOR, cost_moe_vector);
MOE_KERNEL(moe_combine, scratch_sort);
MOE_DEF(moe_router_loss, 2, 2, MT_COST_VECTOR, cost_moe_vector);
MOE_KERNEL(moe_router_loss, scratch_loss);

MOE_DEF(moe_gates_bwd, 3, 3, MT_COST_VECTOR, cost_moe_vector);
MOE_KERNEL(moe_gates_bwd, NULL);
MOE_DEF(moe_dispatch_bwd, 2, 2, MT_COST_VECTOR, cost_moe_vector);
MOE_KERNEL(moe_dispatch_bwd, scratch_sort);
MOE_DEF(moe_experts_bwd_x, 3, 3, MT_COST_PRODUCT, cost_moe_experts);
MOE_KERNEL_EP(moe_experts_bwd_x);
MOE_DEF(moe_experts_bwd_w, 3, 3, MT_COST_PRODUCT, cost_moe_experts);
MOE_KERNEL_EP(moe_experts_bwd_w);
MOE_DEF(moe_combine_bwd_y, 3, 3, MT_COST_VECTOR, cost_moe_vector);
MOE_KERNEL(moe_combine_bwd_y, scratch_sort);
MOE_DEF(moe_combine_bwd_g, 4, 4, MT_COST_VECTOR, cost_moe_vector);
MOE_KERNEL(moe_combine_bwd_g, scratch_sort);
MOE_DEF(moe_router_loss_bwd, 3, 3, MT_COST_VECTOR, cost_moe_vector);
MOE_KERNEL(moe_router_loss_bwd, scratch_loss);
