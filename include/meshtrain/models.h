/*
 * meshtrain/models.h — the models, built only through the graph API: GPT-2,
 * an MLP, linear regression, and the synthetic data the last two learn.
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
} mt_gpt_config;

/* Builds a GPT-2 style model into `g` for microbatches of (B,T) tokens:
 * learned positions, pre-LayerNorm blocks (attention then 4C GELU MLP, each
 * with a residual), final LayerNorm, LM head tied to the token embedding.
 * Inputs are named "tokens" (B,T) and "targets" (B,T); the returned loss is
 * the cross entropy times `loss_scale`. Position ids are a constant, filled by
 * mt_gpt_fill_constants() after compile. Parameters are named as in GPT-2
 * ("wte", "wpe", "h.0.ln_1.w", ...), with llm.c's initialisation. */
mt_tensor *mt_gpt_build(mt_graph *g, const mt_gpt_config *cfg, int B, int T, float loss_scale);
mt_status  mt_gpt_fill_constants(mt_graph *g);

/* One pipeline stage of the GPT: blocks [layer0, layer0 + layers), with
 * the embeddings when `first` (which needs layer0 0) and the final
 * LayerNorm, the head and the loss when `last` (which needs the stage to
 * end at block L). layers may be 0 (a stage of the embedding or the head
 * alone). */
typedef struct {
    int  layer0, layers;
    bool first, last;
} mt_gpt_stage;
/* The input a stage that is not the first reads: the previous stage's
 * output (B,T,C), f32, its gradient computed by the backward's B. */
#define MT_GPT_STAGE_INPUT "stage_in"
/* Builds stage `st` of the GPT into g, as mt_gpt_build builds the whole
 * model (the same parameter names and initial values, so stages together
 * hold exactly the model's parameters): inputs "tokens" and the constant
 * "pos" on the first stage, MT_GPT_STAGE_INPUT on the others, "targets" on
 * the last. Returns the loss times loss_scale on the last stage, else the
 * stage's output (B,T,C), which the caller compiles with a seed from the
 * caller (mt_compile_opts). The token embedding "wte" is tied to the head:
 * a last stage that is not the first holds a copy of it. NULL with g's
 * error set on a bad configuration or a stage that does not fit L. */
mt_tensor *mt_gpt_build_stage(mt_graph *g, const mt_gpt_config *cfg, const mt_gpt_stage *st,
                              int B, int T, float loss_scale);
/* Parameter count (with the padded embedding) of a configuration. */
int64_t    mt_gpt_num_params(const mt_gpt_config *cfg);
/* Model FLOPs of one training step on `tokens` tokens of context T:
 * 6·N·tokens plus attention (12·L·C·T per token, fwd+bwd). */
double     mt_gpt_train_flops(const mt_gpt_config *cfg, int T, int64_t tokens);
/* Validates a configuration; the message names the bad field. */
mt_status  mt_gpt_config_check(const mt_gpt_config *cfg);

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
