/*
 * meshtrain/graph_moe.h — a mixture-of-experts feed-forward as graph ops
 * (docs/moe.md; ../shared/MOE.md is the algorithm). Part of the graph
 * layer's API; meshtrain/graph.h includes it.
 *
 * A layer with linear experts, x (T,D) and the router's logits u (T,E)
 * (a product of x by the router's weight, in f32):
 *
 *   ids   = mt_moe_route(g, u, bias, &r)           (T,k) int32, no gradient
 *   gates = mt_moe_gates(g, u, ids, &r)            (T,k)
 *   [kept = mt_moe_capacity(g, ids, NULL, E, cf)    (T,k): ids, -1 past an
 *                                                  expert's capacity; then
 *                                                  kept for ids below]
 *   xs    = mt_moe_dispatch(g, x, ids, E)          (T,k,D): the (token, slot)
 *                                                  pairs' rows in expert order
 *   ys    = mt_moe_experts(g, xs, w, ids)          w (E,D,O): each expert's
 *                                                  product on its own rows
 *   out   = mt_moe_combine(g, ys, gates, ids)      (T,O) = Σ_j gate · its row
 *   loss += mt_moe_router_loss(g, u, ids, &r, α, β)
 *
 * Leading dims are rows (tokens): (B,T,·) works as (T,·) does. The ids are
 * an int32 activation: they take no gradient, and each op that needs the
 * sort by expert (dispatch, the product, combine) makes it again from them
 * (a counting sort). Every op is per token, so every leading dim may be
 * split over devices (data, fsdp: each device routes and sorts its own
 * rows, its sorted rows are its own pairs in expert order); the trailing
 * dims (E, D, C, OC) must be whole, and so must the expert weights, whose
 * gradient then sums over the devices, but for their experts dim split over
 * axes that split the rows too (expert parallelism: mt_moe_experts). A tensor of sorted rows must keep
 * the split of the ids it was sorted by: a rule that would move one
 * refuses (its rows are a device's own order, not a block of the global
 * order). The router loss needs whole sequences (dim 1 of 3-D logits).
 */
#ifndef MESHTRAIN_GRAPH_MOE_H
#define MESHTRAIN_GRAPH_MOE_H

#include "meshtrain/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A router's settings (ops/moe.h's mt_moe_route_params without the shapes).
 *   k            experts a token (1 <= k <= E);
 *   sigmoid      scores by a sigmoid per expert (DeepSeek-V3), else a
 *                softmax over the E (Mixtral, Qwen);
 *   renorm       gates = the selected scores over their sum (else the
 *                selected scores themselves);
 *   groups,      group-limited routing (DeepSeek-V3: 8 and 4; 0: off);
 *   groups_kept
 *   route_scale  the gates' factor (1: none; DeepSeek-V3 2.5).
 * Selection: the k largest scores, ties to the lower expert. */
typedef struct {
    int   k;
    bool  sigmoid, renorm;
    int   groups, groups_kept;
    float route_scale;
} mt_moe_router;

/* ids (...,k) int32 = the top-k experts of logits (...,E) (E their last
 * dim), in order of score. No gradient flows through it. bias (E) f32, or
 * NULL for none: the top-k is of the scores + bias, which only chooses (the
 * gates, mt_moe_gates, are the unbiased scores'): DeepSeek-V3's
 * aux-loss-free balancing, whose bias a caller moves between steps (the
 * trainer: by the experts' loads); no gradient reaches it, and it must be
 * whole on every device (a rule that splits it is refused, or it is
 * gathered). NULL with g's error (MT_EINVAL) where the settings are out of
 * range, naming them; MT_ESHAPE for a bias that is not (E) f32. */
mt_tensor *mt_moe_route(mt_graph *g, mt_tensor *logits, mt_tensor *bias,
                        const mt_moe_router *r);
/* gates (...,k) = the gates of the experts ids (...,k) chose from logits
 * (...,E): route_scale · score (/ Σ selected). Its gradient reaches the
 * logits with the selection held. */
mt_tensor *mt_moe_gates(mt_graph *g, mt_tensor *logits, mt_tensor *ids, const mt_moe_router *r);
/* Capacity instead of dropless (Switch, GShard; docs/moe.md): kept (S,L,k)
 * int32 = ids (S,L,k), but -1 for the pairs past an expert's capacity
 * C = ⌈(L·k/E)·cf⌉ within their sequence (each sequence one group, so a
 * batch split over devices drops the same pairs; 2-D ids (T,k) are one
 * sequence): the earliest pairs kept ((t, j) order), or with gates (S,L,k)
 * the highest-gated (ties: the earlier pair). Dispatch, the products and
 * combine then route the kept pairs alone (a dropped pair's output is 0:
 * the residual carries the token, and its gate gets no gradient); give
 * the gates and the router loss the router's ids, as the gates are
 * computed before the drops. No gradient. The sequence dim must be whole
 * on a device. NULL with g's error for cf <= 0 (MT_EINVAL) or ids that are
 * not the router's (MT_ESHAPE). */
mt_tensor *mt_moe_capacity(mt_graph *g, mt_tensor *ids, mt_tensor *gates, int E, double cf);
/* xs (...,k,D) = the rows of x (...,D) of each (token, slot) pair, sorted by
 * expert (stable: ties in token, slot order; -1 ids, dropped, get no row:
 * zeros past the kept pairs); E the expert count. */
mt_tensor *mt_moe_dispatch(mt_graph *g, mt_tensor *x, mt_tensor *ids, int E);
/* ys (...,k,OC) = each expert's product xs_e (rows,C) · w[e] (C,OC) on its
 * rows of the sorted xs (...,k,C), w (E,C,OC). The expert weights' first
 * dim is named `experts` by the models; split over mesh axes that split the
 * rows too (the trainer's rule experts=expert, the batch folded over the
 * expert axis), the product runs expert-parallel: each device's rows go to
 * their experts' owners and back (all-to-all-v, inside the op), and the
 * weights' gradient is each device's experts' over the group's rows. */
mt_tensor *mt_moe_experts(mt_graph *g, mt_tensor *xs, mt_tensor *w, mt_tensor *ids);
/* out (...,OC) = Σ_j gates[..,j] · ys at the row of pair (token, j), summed
 * in double in slot order; ys (...,k,OC) sorted by expert. */
mt_tensor *mt_moe_combine(mt_graph *g, mt_tensor *ys, mt_tensor *gates, mt_tensor *ids, int E);
/* The router's loss, a scalar: alpha · the aux loss α·E·Σ_i f_i·P_i
 * (Megatron's and DeepSeek's normalisation: exactly alpha at balance)
 * averaged over sequences, plus beta · mean_t (logsumexp u_t)² (z-loss).
 * logits (S,L,E) are S sequences of L tokens (sequence-wise balance,
 * DeepSeek-V3's; (T,E): one sequence, batch-wise), ids (...,k) their
 * experts. alpha, beta >= 0. */
mt_tensor *mt_moe_router_loss(mt_graph *g, mt_tensor *logits, mt_tensor *ids,
                              const mt_moe_router *r, float alpha, float beta);

/* MaxVio = (max_i c_i − mean c) / mean c of an expert load, counts (E) of
 * the (token, slot) pairs each expert got (0 when all are 0; ../shared/
 * MOE.md §2): the trainer's per-step balance metric. */
double mt_moe_load_maxvio(const int32_t *counts, int64_t E);

/* DeepSeek-V3's aux-loss-free bias step (../shared/MOE.md §2), torchtitan's
 * centring: bias (E) += Δb, Δb_i = γ·sign(mean c − c_i) − mean Δb, so Σ Δb
 * = 0, from counts (E) of a whole step summed over every device (the bias
 * of mt_moe_route; the trainer calls it after each optimizer step). Every
 * caller given the same counts and bias makes the same bias. */
void mt_moe_bias_step(float *bias, const int32_t *counts, int64_t E, float gamma);

#ifdef __cplusplus
}
#endif

#endif /* MESHTRAIN_GRAPH_MOE_H */
