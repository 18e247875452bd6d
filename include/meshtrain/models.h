/*
 * meshtrain/models.h — the models, built only through the graph API: GPT-2,
 * the LLaMA family, an MLP, linear regression, and the synthetic data the
 * last two learn.
 */
#ifndef MESHTRAIN_MODELS_H
#define MESHTRAIN_MODELS_H

#include "meshtrain/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int L;      /* layers */
    int C;      /* channels */
    int NH;     /* heads; C % NH == 0 */
    int maxT;   /* context length of the position table */
    int V;      /* vocabulary */
    int Vp;     /* padded vocabulary (>= V); rows past V never win the softmax */
    int doc_mask;   /* 1: attention within documents, ids from the input "docs" (B,T) */
} mt_gpt_config;

/* Builds a GPT-2 style model into `g` for microbatches of (B,T) tokens:
 * learned positions, pre-LayerNorm blocks (attention then 4C GELU MLP, each
 * with a residual), final LayerNorm, LM head tied to the token embedding.
 * Inputs are named "tokens" (B,T) and "targets" (B,T), and with doc_mask
 * "docs" (B,T) int32, each token's document id (mt_attention_docs; every
 * stage has it); the returned loss is
 * the cross entropy times `loss_scale`. Position ids are a constant, filled by
 * mt_gpt_fill_constants() after compile. Parameters are named as in GPT-2
 * ("wte", "wpe", "h.0.ln_1.w", ...), with llm.c's initialisation. */
mt_tensor *mt_gpt_build(mt_graph *g, const mt_gpt_config *cfg, int B, int T, float loss_scale);
mt_status  mt_gpt_fill_constants(mt_graph *g);

/* One pipeline stage of a model cut into stages, whatever the model (the
 * GPT's and the LLaMA's builders take it; a pipeline concept, not a
 * model's): blocks [layer0, layer0 + layers), with the model's input end
 * (the embeddings) when `first` (which needs layer0 0) and its output end
 * (the final norm, the head and the loss) when `last` (which needs the
 * stage to end at the model's last block). layers may be 0 (a stage of the
 * embedding or the head alone). */
typedef struct {
    int  layer0, layers;
    bool first, last;
} mt_model_stage;
/* The GPT's name for mt_model_stage, kept for compatibility: the same
 * type, so code written against it still compiles and links. New code
 * names mt_model_stage. */
typedef mt_model_stage mt_gpt_stage;
/* The input a stage that is not the first reads, in every model cut into
 * stages: the previous stage's output (B,T,C), f32, its gradient computed
 * by the backward's B. */
#define MT_STAGE_INPUT "stage_in"
/* The GPT's name for MT_STAGE_INPUT, kept for compatibility. */
#define MT_GPT_STAGE_INPUT MT_STAGE_INPUT
/* The logical axes the GPT and LLaMA builders name on the residual stream
 * (B,T,C) where a tensor-parallel pair's partial sum lands (the token
 * lookup, the attention's and the MLP's output projections): a rule for
 * act_length (MaxText's activation_length) constrains their rows
 * (partition.h, mt_tensor_set_constraint), "act_length=tensor" being
 * Megatron's sequence parallelism. */
#define MT_RESIDUAL_AXES "batch,act_length,embed"
/* Builds stage `st` of the GPT into g, as mt_gpt_build builds the whole
 * model (the same parameter names and initial values, so stages together
 * hold exactly the model's parameters): inputs "tokens" and the constant
 * "pos" on the first stage, MT_STAGE_INPUT on the others, "targets" on
 * the last. Returns the loss times loss_scale on the last stage, else the
 * stage's output (B,T,C), which the caller compiles with a seed from the
 * caller (mt_compile_opts). The token embedding "wte" is tied to the head:
 * a last stage that is not the first holds a copy of it. NULL with g's
 * error set on a bad configuration or a stage that does not fit L. */
mt_tensor *mt_gpt_build_stage(mt_graph *g, const mt_gpt_config *cfg, const mt_model_stage *st,
                              int B, int T, float loss_scale);
/* Parameter count (with the padded embedding) of a configuration. */
int64_t    mt_gpt_num_params(const mt_gpt_config *cfg);
/* Model FLOPs of one training step on `tokens` tokens of context T:
 * 6·N·tokens plus causal attention (6·L·C·T per token, fwd+bwd: the pairs
 * key <= query, half PaLM's 12·L·C·T; llm.c's count). */
double     mt_gpt_train_flops(const mt_gpt_config *cfg, int T, int64_t tokens);
/* Validates a configuration; the message names the bad field. */
mt_status  mt_gpt_config_check(const mt_gpt_config *cfg);

/* ======================================================================== */
/* LLaMA family                                                              */
/* ======================================================================== */

/* A LLaMA-style model (`meshtrain train --model llama`): Llama 2/3's
 * architecture with grouped-query attention. Sizes in the letters of the
 * code base: C = dim, F = ffn_dim, L = n_layers, NH = n_heads, KV =
 * n_kv_heads (KV divides NH), HS = head_dim (even, for RoPE's pairs; 0
 * means C/NH, which C must then divide), V = vocab. The query and the
 * attention's output are NH·HS wide, the keys and values KV·HS: with
 * head_dim set, NH·HS may differ from C (MaxText's and Gemma's head size
 * 128 or 256 beside any width). */
/* A LLaMA's mixture-of-experts feed-forward (issue 42; docs/moe.md): in
 * the MoE blocks, the dense SwiGLU is replaced by E routed SwiGLU experts
 * of hidden size F_e, k a token (meshtrain/graph_moe.h), plus `shared`
 * experts that every token takes (one dense SwiGLU of shared·F_e), and the
 * router's aux loss and z-loss are added to the training loss. Block l is
 * MoE when experts > 0, l >= first_dense and (l - first_dense) % every ==
 * 0. experts 0: every block dense (all zero: a dense LLaMA). A setting
 * at 0 takes its default: top_k 2, every 1, route_scale 1, ffn_dim the
 * dense F; aux_alpha and z_beta 0 add no loss. bias_update γ > 0 gives each
 * MoE block a router bias "h.<l>.moe.router.bias" (E), a parameter the
 * optimizer leaves alone (no gradient reaches it: it only chooses the
 * experts, ../shared/MOE.md §1.3), which the trainer moves after every
 * step by γ·sign(mean load − load), centred (DeepSeek-V3's aux-loss-free
 * balancing, §2); checkpoints hold it as they hold the parameters. */
typedef struct {
    int   experts;      /* E routed experts (--moe-experts); 0: dense */
    int   top_k;        /* k experts a token (--moe-top-k) */
    int   ffn_dim;      /* F_e, each expert's SwiGLU hidden size (--moe-ffn-dim) */
    int   shared;       /* shared experts (--moe-shared) */
    int   first_dense;  /* the first blocks stay dense (--moe-first-dense) */
    int   every;        /* then every every-th block is MoE (--moe-every; 1: all) */
    int   score;        /* 0 softmax (Mixtral), 1 sigmoid (DeepSeek-V3) (--moe-score) */
    float route_scale;  /* the gates' factor (--moe-route-scale; DeepSeek-V3 2.5) */
    float aux_alpha;    /* the aux loss's α, Megatron's normalisation (--moe-aux-alpha) */
    float z_beta;       /* the z-loss's β (--moe-z-beta; ST-MoE 1e-3) */
    float bias_update;  /* γ of the aux-loss-free bias (--moe-bias-update; DeepSeek-V3
                           1e-3); 0: no bias */
    /* capacity instead of dropless (--moe-capacity cf; 0: dropless, the
     * default): an expert takes at most ⌈(T·k/E)·cf⌉ pairs of each
     * sequence of T tokens, the rest dropped (their output 0; the residual
     * carries the token): mt_moe_capacity; drop 0 keeps the earliest
     * pairs, 1 the highest-gated (--moe-drop position|gate) */
    float capacity;
    int   drop;
    /* 1: the gates are the k selected scores themselves, not divided by
     * their sum (--moe-renorm off: Qwen3-MoE's norm_topk_prob false,
     * Qwen2-MoE, DeepSeek-V2); 0 renormalised (Mixtral, DeepSeek-V3) */
    int   renorm_off;
} mt_llama_moe;

typedef struct {
    int   dim, ffn_dim, n_layers, n_heads, n_kv_heads, vocab, max_seq;
    float rope_theta, norm_eps;
    int   tie_embeddings;   /* 1: lm_head is tok_emb */
    /* Llama's FFN rule (mt_llama_ffn_rule), used where ffn_dim is 0 */
    int   multiple_of;
    float ffn_mult;         /* Llama 3's ffn_dim_multiplier; 1 for none */
    int   head_dim;         /* HS, the size of one head; 0: dim / n_heads */
    /* RoPE's frequency scaling for contexts past the one trained on (kind
     * MT_ROPE_SCALING_NONE, or all zero: none); --rope-scaling and the
     * --rope-* flags, the llama3.1-* presets */
    mt_rope_scaling rope_scaling;
    /* 1: attention within documents: an int32 (B,T) input "docs" holds each
     * token's document id (mt_attention_gqa_docs); the trainer's
     * --doc-mask, not a property of the weights */
    int doc_mask;
    /* the mixture-of-experts feed-forward (all zero: none) */
    mt_llama_moe moe;
    /* Qwen's attention (both 0: Llama's). qkv_bias 1: the q, k and v
     * projections add a bias (NH·HS, KV·HS, KV·HS; Qwen2's, --qkv-bias);
     * qk_norm 1: q and k are RMS-normalised over each head's HS channels
     * (one (HS) scale each a block, norm_eps) before RoPE (Qwen3's,
     * --qk-norm). */
    int qkv_bias, qk_norm;
} mt_llama_config;

/* Whether block l of cfg is a mixture-of-experts block (mt_llama_moe). */
bool       mt_llama_moe_block(const mt_llama_config *cfg, int l);
/* MT_OK, or MT_EINVAL naming the --moe-* flag out of range (models/llama/
 * llama_moe.c). A dense configuration (experts 0) passes. */
mt_status  mt_llama_moe_check(const mt_llama_config *cfg);


/* An initializer of mt_rope_scaling: kind with Llama 3.1's values (Meta's
 * config.json: factor 8, low_freq_factor 1, high_freq_factor 4,
 * original_max_position_embeddings 8192) and YaRN's betas (32 and 1; Peng
 * et al. 2023, section 4), the attention factor YaRN's own (0). The LLaMA
 * presets' and defaults' scaling, so that --rope-scaling given alone reads
 * the published values. */
#define MT_LLAMA31_ROPE_SCALING(kind_)                                                     \
    {.kind = (kind_), .factor = 8.0f, .low_freq_factor = 1.0f, .high_freq_factor = 4.0f, \
     .original_context = 8192, .beta_fast = 32.0f, .beta_slow = 1.0f, .attn_factor = 0.0f}

/* Llama's FFN size (Meta's llama/model.py, FeedForward): h = int(2·4·dim/3),
 * h = int(ffn_mult·h), rounded up to a multiple of `multiple_of` (Llama 3
 * 8B: dim 4096, 1.3, 1024 -> 14336). 0 for non-positive arguments. */
int        mt_llama_ffn_rule(int dim, int multiple_of, float ffn_mult);
/* cfg's F: ffn_dim, or where it is 0 the rule on cfg's dim, multiple_of and
 * ffn_mult. */
int        mt_llama_ffn_dim(const mt_llama_config *cfg);
/* cfg's HS: head_dim, or where it is 0 dim / n_heads (0 when n_heads is
 * not positive). */
int        mt_llama_head_dim(const mt_llama_config *cfg);
/* Validates a configuration (vocab included: a caller that takes it from
 * the data sets it first); the message names the bad setting as its flag
 * (--kv-heads, ...). MT_EINVAL. */
mt_status  mt_llama_config_check(const mt_llama_config *cfg);
/* The published shapes by name ("llama3-8b", "llama3-70b", "llama3-405b",
 * "llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "llama2-7b",
 * "llama2-13b", "tinyllama-1.1b", "stories15m", "stories110m"): writes the
 * whole of *cfg (untied except where the model ties). The llama3.1 ones
 * scale RoPE by Llama 3.1's rule (factor 8, low 1, high 4, original
 * context 8192) over a context of 131072; every other has kind none with
 * those values set, so that a kind given alone reads them. MT_EINVAL
 * naming the known names for any other. */
mt_status  mt_llama_preset(const char *name, mt_llama_config *cfg);
/* The preset names, i = 0, 1, ...; NULL past the last. Static strings. */
const char *mt_llama_preset_name(int i);

/* One pipeline stage of the LLaMA model: blocks [layer0, layer0 + layers)
 * with the embedding when `first` and the final norm, head and loss when
 * `last` (mt_model_stage, as the GPT's). A stage that is not the first
 * reads MT_STAGE_INPUT (B,T,C). Tied, a last stage that is not
 * the first holds a copy of "tok_emb.w" (as the GPT's of "wte"), whose
 * gradient a pipeline sums with the first stage's. Returns the loss times
 * loss_scale on the last stage, else the stage's output (B,T,C); NULL with
 * g's error set on a bad configuration or stage. Inputs "tokens" (B,T) and "targets"
 * (B,T), int32. Parameters (row-major (out, in), as mt_linear's weight):
 * "tok_emb.w" (V,C); per block l "h.<l>.attn_norm.w" (C), "h.<l>.attn.wq.w"
 * (NH·HS,C), "h.<l>.attn.wk.w" and "h.<l>.attn.wv.w" (KV·HS,C),
 * "h.<l>.attn.wo.w" (C,NH·HS), "h.<l>.ffn_norm.w" (C), "h.<l>.ffn.w1.w" and
 * "h.<l>.ffn.w3.w" (F,C), "h.<l>.ffn.w2.w" (C,F); "norm.w" (C); "lm_head.w"
 * (V,C) unless tied. Initialised from global indices: normal std 0.02, the
 * residual projections wo and w2 0.02/sqrt(2L), the norms ones. */
mt_tensor *mt_llama_build_stage(mt_graph *g, const mt_llama_config *cfg,
                                const mt_model_stage *st, int B, int T, float loss_scale);
/* The whole model: mt_llama_build_stage of the one stage of every block. */
mt_tensor *mt_llama_build(mt_graph *g, const mt_llama_config *cfg, int B, int T,
                          float loss_scale);
/* Parameter count of a configuration. */
int64_t    mt_llama_num_params(const mt_llama_config *cfg);
/* Model FLOPs of one training step on `tokens` tokens of context T: 6 per
 * parameter of the matmuls (the embedding lookup excluded, the head
 * included) per token, plus causal attention's 6·L·NH·HS·T per token
 * (fwd+bwd; 6·L·C·T when HS = C/NH), as mt_gpt_train_flops counts them. */
double     mt_llama_train_flops(const mt_llama_config *cfg, int T, int64_t tokens);

/* The MLP's own settings (`meshtrain train --model mlp`): the width of its
 * hidden layers and its linear layers in all. */
typedef struct {
    int hidden;   /* hidden width (--channels) */
    int layers;   /* linear layers (--layers) */
} mt_mlp_config;

/* Multi-layer perceptron: x (B,n_in) -> [linear, gelu] × (n_layers-1) ->
 * linear -> (B,n_out), MSE loss against "targets" (B,n_out), times scale. */
mt_tensor *mt_mlp_build(mt_graph *g, int B, int n_in, int n_hidden, int n_out, int n_layers, float loss_scale);

/* Linear regression: pred (B) = x (B,n_features) · w (n_features) + b, MSE
 * against "y" (B) times scale; parameters "w" and "b" start at zero. */
mt_tensor *mt_linreg_build(mt_graph *g, int B, int n_features, float loss_scale);

/* ======================================================================== */
/* Synthetic data                                                            */
/* ======================================================================== */

/* The problems `meshtrain train --model linreg|mlp` and `meshtrain example
 * linreg` learn. Each example is a pure function of (seed, split, index),
 * split 0 being the training data and 1 the validation data (disjoint random
 * streams), so a resumed run, any batch size and any mesh see the same
 * examples. Neither function can fail; the caller owns x and y. */

/* Inputs per example of the linear-regression problem. */
#define MT_LINREG_DATA_FEATURES 3

/* Example `index` of `split` of the JAX pmap example's linear regression:
 * writes x[MT_LINREG_DATA_FEATURES] (standard normal) and returns
 * y = x·[2, -3.4, 1.7] + 4.2 + 0.01·noise (noise standard normal). */
float mt_linreg_data(uint64_t seed, int split, uint64_t index, float *x);

/* Inputs and outputs per example of the MLP problem. */
#define MT_MLP_DATA_IN 8
#define MT_MLP_DATA_OUT 2

/* Example `index` of `split` of the MLP problem: writes x[MT_MLP_DATA_IN]
 * (standard normal) and y[MT_MLP_DATA_OUT] = sin(A·x / sqrt(MT_MLP_DATA_IN)),
 * where the "teacher" A (MT_MLP_DATA_OUT, MT_MLP_DATA_IN) is standard normal,
 * drawn from `seed` alone (the same for both splits). */
void mt_mlp_data(uint64_t seed, int split, uint64_t index, float *x, float *y);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_MODELS_H */
