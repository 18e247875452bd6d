/*
 * llama_moe.h — the LLaMA's mixture-of-experts feed-forward (internal to
 * models/llama/): what llama.c's block and counts call in llama_moe.c.
 */
#ifndef MT_MODELS_LLAMA_MOE_H
#define MT_MODELS_LLAMA_MOE_H

#include "meshtrain/graph.h"
#include "meshtrain/models.h"

/* The MoE feed-forward of block l on h (B,T,C), the output of the block's
 * ffn_norm: the routed SwiGLU experts combined by their gates, plus the
 * shared experts' dense SwiGLU where cfg has any. *aux gets the router's
 * loss (aux + z, a scalar; mt_moe_router_loss), which the caller adds to
 * the training loss. Parameters of block l: "h.<l>.moe.router.w" (E,C);
 * "h.<l>.moe.w1.w" and "h.<l>.moe.w3.w" (E,C,F_e), "h.<l>.moe.w2.w"
 * (E,F_e,C), their first dim named `experts`; with cfg's bias_update > 0
 * "h.<l>.moe.router.bias" (E), zeros, which no gradient reaches; with shared experts
 * "h.<l>.moe.shared.w1.w", ".w3.w" (S·F_e,C) and ".w2.w" (C,S·F_e) as
 * the dense FFN's. init and resid are the dense FFN's initialisers;
 * F_dense the dense FFN's F (F_e where --moe-ffn-dim is 0).
 * Returns (B,T,C), or NULL with g's error. */
mt_tensor *mt__llama_moe_ffn(mt_graph *g, mt_tensor *h, int l, const mt_llama_config *cfg,
                             int64_t F_dense, mt_init init, mt_init resid, mt_tensor **aux);

/* The parameters of one MoE block's feed-forward: all of them, or with
 * `active` the ones a token uses (the router, k routed experts and the
 * shared ones), as MoE FLOPs count them (../shared/MOE.md §6); the router
 * bias counts in all of them, not in the active ones (it runs no product). */
int64_t    mt__llama_moe_ffn_params(const mt_llama_config *cfg, int64_t F_dense, bool active);

/* cfg's mixture of experts with each setting at 0 given its default: top-k
 * 2, every 1, route scale 1, F_e the dense F_dense. */
mt_llama_moe mt__llama_moe_resolved(const mt_llama_config *cfg, int64_t F_dense);

#endif /* MT_MODELS_LLAMA_MOE_H */
