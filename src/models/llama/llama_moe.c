/*
 * llama_moe.c — the LLaMA's mixture-of-experts feed-forward (issue 42;
 * docs/moe.md, ../shared/MOE.md): which blocks are MoE, the checks of the
 * --moe-* settings, the feed-forward on the graph's MoE ops
 * (meshtrain/graph_moe.h) and its parameter counts.
 *
 * A MoE block's feed-forward, h (B,T,C) the ffn_norm's output:
 *   u     = h · W_r (E,C)ᵀ                      (B,T,E) router logits, f32 (an f32
 *                                               product under bf16 too: mt_graph_set_f32)
 *   ids   = top-k of u's scores, gates          (B,T,k)
 *   xs    = h's rows of each (token, slot) pair sorted by expert (B,T,k,C)
 *   m     = silu(xs · w1_e) ⊙ (xs · w3_e)       (B,T,k,F_e) on each expert's rows
 *   out   = Σ_j gate_j · (m · w2_e)_j           (B,T,C)
 *         + shared experts' SwiGLU (one dense SwiGLU of shared·F_e)
 *   aux   = α · aux loss (sequence-wise: each of the B sequences its own
 *           balance, DeepSeek-V3's) + β · z-loss
 * With --moe-bias-update γ the top-k is of the scores + a bias (E) that
 * the trainer moves after each step (train/moe_load.c); the gates stay the
 * unbiased scores'.
 * Gates are renormalised over the k selected (Mixtral's softmax top-k,
 * DeepSeek-V3's sigmoid), times the route scale. A setting at 0 takes its
 * default (mt__llama_moe_resolved), so that a dense configuration, all
 * zero, is valid and --moe-experts alone gives a working MoE.
 */
#include "models/llama/llama_moe.h"

#include <math.h>
#include <stdio.h>

bool mt_llama_moe_block(const mt_llama_config *cfg, int l) {
    const mt_llama_moe m = mt__llama_moe_resolved(cfg, 1);
    return m.experts > 0 && l >= m.first_dense && (l - m.first_dense) % m.every == 0;
}

mt_status mt_llama_moe_check(const mt_llama_config *cfg) {
    const mt_llama_moe *m = &cfg->moe;
    /* every setting in its flag's range, read or not (0: its default) */
    const struct { const char *flag; int v, hi; } ints[] = {
        {"experts", m->experts, 4096}, {"top-k", m->top_k, 4096},
        {"ffn-dim", m->ffn_dim, 1 << 20}, {"shared", m->shared, 64},
        {"first-dense", m->first_dense, 1000}, {"every", m->every, 1000}, {"score", m->score, 1},
        {"drop", m->drop, 1}, {"renorm", m->renorm_off, 1},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].v < 0 || ints[i].v > ints[i].hi)
            return mt_fail(MT_EINVAL, "LLaMA --moe-%s %d must be 0 to %d", ints[i].flag,
                           ints[i].v, ints[i].hi);
    const struct { const char *flag; float v, hi; } floats[] = {
        {"route-scale", m->route_scale, 1e3f}, {"aux-alpha", m->aux_alpha, 10.0f},
        {"z-beta", m->z_beta, 10.0f}, {"bias-update", m->bias_update, 1.0f},
        {"capacity", m->capacity, 64.0f},
    };
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
        if (!(floats[i].v >= 0.0f && floats[i].v <= floats[i].hi))
            return mt_fail(MT_EINVAL, "LLaMA --moe-%s %g must be 0 to %g", floats[i].flag,
                           (double)floats[i].v, (double)floats[i].hi);
    if (m->experts == 0) return MT_OK;
    const mt_llama_moe r = mt__llama_moe_resolved(cfg, 1);
    if (r.top_k > m->experts)
        return mt_fail(MT_EINVAL, "LLaMA --moe-top-k %d must be 1 to --moe-experts %d", r.top_k,
                       m->experts);
    if (m->first_dense >= cfg->n_layers)
        return mt_fail(MT_EINVAL, "LLaMA --moe-first-dense %d leaves no MoE block of the %d "
                       "(--layers); lower it or give --moe-experts 0", m->first_dense,
                       cfg->n_layers);
    return MT_OK;
}

mt_llama_moe mt__llama_moe_resolved(const mt_llama_config *cfg, int64_t F_dense) {
    mt_llama_moe m = cfg->moe;
    if (m.top_k == 0) m.top_k = 2;
    if (m.every == 0) m.every = 1;
    if (m.route_scale == 0.0f) m.route_scale = 1.0f;
    if (m.ffn_dim == 0) m.ffn_dim = (int)F_dense;
    return m;
}

/* The parameter `fmt` of block l, of ndim dims. */
static mt_tensor *mparam(mt_graph *g, mt_init init, int ndim, const int64_t *shape,
                         const char *fmt, int l, const char *axes) {
    char name[MT_MAX_NAME];
    snprintf(name, sizeof name, fmt, l);
    return mt_graph_logical(g, mt_param(g, name, ndim, shape, init), axes);
}

mt_tensor *mt__llama_moe_ffn(mt_graph *g, mt_tensor *h, int l, const mt_llama_config *cfg,
                             int64_t F_dense, mt_init init, mt_init resid, mt_tensor **aux) {
    const mt_llama_moe mr = mt__llama_moe_resolved(cfg, F_dense), *m = &mr;
    const int64_t C = cfg->dim, E = m->experts, F = m->ffn_dim, FS = m->shared * F;
    /* the block's tokens whole over the sequence-parallel axes (a reshard
       by logical axes: rows split as the batch and the sequence, never as
       the residual stream's act_length), so that experts split over tensor
       by their columns see every token the devices share; Megatron's
       all-gather before the experts, whose partial sums the residual's
       constraint reduce-scatters after them */
    h = mt_graph_logical(g, mt_reshard(g, h, &(mt_sharding){0}), "batch,seq,embed"); /* (B,T,C) */
    mt_tensor *wr = mparam(g, init, 2, (int64_t[]){E, C}, "h.%d.moe.router.w", l, "_,embed");
    mt_tensor *w1 = mparam(g, init, 3, (int64_t[]){E, C, F}, "h.%d.moe.w1.w", l,
                           "experts,embed,mlp");
    mt_tensor *w3 = mparam(g, init, 3, (int64_t[]){E, C, F}, "h.%d.moe.w3.w", l,
                           "experts,embed,mlp");
    mt_tensor *w2 = mparam(g, resid, 3, (int64_t[]){E, F, C}, "h.%d.moe.w2.w", l,
                           "experts,mlp,embed");
    const mt_moe_router r = {.k = m->top_k, .sigmoid = m->score == 1, .renorm = !m->renorm_off,
                             .route_scale = m->route_scale};
    /* the aux-loss-free bias (E): chooses, never weighs; moved by the
     * trainer, not the optimizer (train/moe_load.c) */
    mt_tensor *bias = m->bias_update > 0.0f
                          ? mparam(g, (mt_init){MT_INIT_ZEROS, 0.0f}, 1, (int64_t[]){E},
                                   "h.%d.moe.router.bias", l, "_")
                          : NULL;
    /* the router's product in f32 whatever the precision: its rounding
       would decide the top-k (every reference trainer keeps it f32) */
    mt_graph_set_f32(g, true);
    mt_tensor *u = mt_linear(g, h, wr, NULL);                                   /* (B,T,E) */
    mt_graph_set_f32(g, false);
    mt_tensor *ids = mt_moe_route(g, u, bias, &r);                              /* (B,T,k) */
    mt_tensor *gates = mt_moe_gates(g, u, ids, &r);                             /* (B,T,k) */
    /* with a capacity, the pairs past it in each sequence dropped (-1):
       the gates and the router loss stay the router's */
    mt_tensor *kept = m->capacity > 0.0f
                          ? mt_moe_capacity(g, ids, m->drop ? gates : NULL, (int)E,
                                            (double)m->capacity)                /* (B,T,k) */
                          : ids;
    /* the experts' and shared experts' input, marked as differing over the
       axes that split their columns (mlp's): their input gradients, the
       sorted rows' k times the tokens, summed over those axes once, on
       (B,T,C), where each product's operand would get its own sum */
    mt_tensor *hv = mt_graph_varies(g, h, "mlp");                               /* (B,T,C) */
    mt_tensor *xs = mt_moe_dispatch(g, hv, kept, (int)E);                       /* (B,T,k,C) */
    mt_tensor *mid = mt_swiglu(g, mt_moe_experts(g, xs, w1, kept),
                               mt_moe_experts(g, xs, w3, kept));                /* (B,T,k,F) */
    mt_tensor *ys = mt_moe_experts(g, mid, w2, kept);                           /* (B,T,k,C) */
    mt_tensor *out = mt_moe_combine(g, ys, gates, kept, (int)E);                /* (B,T,C) */
    *aux = mt_moe_router_loss(g, u, ids, &r, m->aux_alpha, m->z_beta);          /* () */
    if (FS == 0) return out;
    mt_tensor *s1 = mparam(g, init, 2, (int64_t[]){FS, C}, "h.%d.moe.shared.w1.w", l,
                           "mlp,embed");
    mt_tensor *s3 = mparam(g, init, 2, (int64_t[]){FS, C}, "h.%d.moe.shared.w3.w", l,
                           "mlp,embed");
    mt_tensor *s2 = mparam(g, resid, 2, (int64_t[]){C, FS}, "h.%d.moe.shared.w2.w", l,
                           "embed,mlp");
    mt_tensor *sh = mt_swiglu(g, mt_linear(g, hv, s1, NULL), mt_linear(g, hv, s3, NULL));
    return mt_add(g, out, mt_linear(g, sh, s2, NULL));                          /* (B,T,C) */
}

int64_t mt__llama_moe_ffn_params(const mt_llama_config *cfg, int64_t F_dense, bool active) {
    const mt_llama_moe mr = mt__llama_moe_resolved(cfg, F_dense), *m = &mr;
    const int64_t C = cfg->dim, F = m->ffn_dim;
    const int64_t routed = active ? m->top_k : m->experts;
    const int64_t bias = !active && m->bias_update > 0.0f ? m->experts : 0;   /* no product */
    return C * m->experts + bias + 3 * C * F * (routed + m->shared);
}
