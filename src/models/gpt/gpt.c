/*
 * gpt.c — the GPT-2 model (as llm.c's train_gpt2.c), built only through the
 * public graph API: learned token and position embeddings, L pre-LayerNorm
 * blocks (causal self-attention, then a 4C GELU MLP, each with a residual), a
 * final LayerNorm and an LM head tied to the token embedding.
 */
#include "meshtrain/models.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* GPT-2's initialisation scale (llm.c train_gpt2.cu, model_init). */
#define GPT_INIT_STD 0.02f

/* ======================================================================== */
/* Configuration                                                             */
/* ======================================================================== */

mt_status mt_gpt_config_check(const mt_gpt_config *cfg) {
    if (!cfg) return mt_fail(MT_EINVAL, "GPT configuration is NULL");
    const struct { const char *name; int value; } fields[] = {
        {"L", cfg->L}, {"C", cfg->C}, {"NH", cfg->NH}, {"maxT", cfg->maxT},
        {"V", cfg->V}, {"Vp", cfg->Vp},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].value <= 0)
            return mt_fail(MT_EINVAL, "GPT config field %s=%d must be positive",
                           fields[i].name, fields[i].value);
    if (cfg->C % cfg->NH != 0)
        return mt_fail(MT_EINVAL, "GPT channels C=%d are not divisible by the heads NH=%d; "
                       "pick C a multiple of NH", cfg->C, cfg->NH);
    if (cfg->Vp < cfg->V)
        return mt_fail(MT_EINVAL, "GPT padded vocabulary Vp=%d is smaller than the vocabulary "
                       "V=%d; set Vp >= V (e.g. V rounded up to a multiple of 64)",
                       cfg->Vp, cfg->V);
    return MT_OK;
}

int64_t mt_gpt_num_params(const mt_gpt_config *cfg) {
    int64_t C = cfg->C, L = cfg->L;
    /* per block: ln_1 2C, qkv 3C²+3C, proj C²+C, ln_2 2C, fc 4C²+4C, mlp.proj 4C²+C */
    int64_t per_layer = 12 * C * C + 13 * C;
    return (int64_t)cfg->Vp * C + (int64_t)cfg->maxT * C + L * per_layer + 2 * C;
}

double mt_gpt_train_flops(const mt_gpt_config *cfg, int T, int64_t tokens) {
    /* 6N per token for the matmuls of forward and backward (PaLM, Chowdhery
     * et al. 2022, appendix B), plus causal attention's 6·L·C·T: PaLM's
     * 12·L·C·T counts the whole T x T scores, a causal model needs the half
     * with key <= query (llm.c's gpt2_estimate_mfu, 6N + 6·L·C·T; MaxText's
     * calculate_tflops_training_per_device halves the same way) */
    double N = (double)mt_gpt_num_params(cfg);
    double attn = 6.0 * cfg->L * (double)cfg->C * T;
    return (6.0 * N + attn) * (double)tokens;
}

/* ======================================================================== */
/* Builder                                                                   */
/* ======================================================================== */

static mt_tensor *param1(mt_graph *g, const char *name, int64_t n, mt_init init) {
    int64_t shape[1] = {n};
    return mt_param(g, name, 1, shape, init);
}

static mt_tensor *param2(mt_graph *g, const char *name, int64_t rows, int64_t cols, mt_init init) {
    int64_t shape[2] = {rows, cols};
    return mt_param(g, name, 2, shape, init);
}

/* One transformer block: x (B,T,C) -> (B,T,C). */
static mt_tensor *gpt_block(mt_graph *g, mt_tensor *x, int l, const mt_gpt_config *cfg,
                            mt_tensor *docs) {
    const int64_t C = cfg->C;
    const mt_init zeros = {MT_INIT_ZEROS, 0.0f}, ones = {MT_INIT_ONES, 0.0f};
    const mt_init normal = {MT_INIT_NORMAL, GPT_INIT_STD};
    /* the residual projections are scaled down so the residual stream's
     * variance does not grow with depth (GPT-2 paper, section 2.3) */
    const mt_init resid = {MT_INIT_NORMAL, GPT_INIT_STD / sqrtf(2.0f * (float)cfg->L)};
    char n[MT_MAX_NAME];

#define P1(suffix, len, init) (snprintf(n, sizeof n, "h.%d.%s", l, suffix), param1(g, n, len, init))
#define P2(suffix, r, c, init) (snprintf(n, sizeof n, "h.%d.%s", l, suffix), param2(g, n, r, c, init))
    mt_tensor *ln1_w = P1("ln_1.w", C, ones), *ln1_b = P1("ln_1.b", C, zeros);
    /* q, k, v as (3,C,C) and (3,C): llm.c's packed (3C,C) and (3C) storage,
     * with C a dim of its own that tensor parallelism can split by heads */
    const int64_t qkv_shape[3] = {3, C, C}, qkv_bshape[2] = {3, C};
    snprintf(n, sizeof n, "h.%d.attn.qkv.w", l);
    mt_tensor *qkv_w = mt_param(g, n, 3, qkv_shape, normal);
    snprintf(n, sizeof n, "h.%d.attn.qkv.b", l);
    mt_tensor *qkv_b = mt_param(g, n, 2, qkv_bshape, zeros);
    mt_tensor *proj_w = P2("attn.proj.w", C, C, resid), *proj_b = P1("attn.proj.b", C, zeros);
    mt_tensor *ln2_w = P1("ln_2.w", C, ones), *ln2_b = P1("ln_2.b", C, zeros);
    mt_tensor *fc_w = P2("mlp.fc.w", 4 * C, C, normal), *fc_b = P1("mlp.fc.b", 4 * C, zeros);
    mt_tensor *mp_w = P2("mlp.proj.w", C, 4 * C, resid), *mp_b = P1("mlp.proj.b", C, zeros);
#undef P1
#undef P2
    /* the logical axes of each parameter's dims: strategies are rules over
     * these (sharding.h), so no layout here names a mesh axis */
    char heads[32];
    snprintf(heads, sizeof heads, "heads*%lld", (long long)(C / cfg->NH));   /* whole heads */
    char qkv_axes[48], qkv_b_axes[48], proj_axes[48];
    snprintf(qkv_axes, sizeof qkv_axes, "_,%s,embed", heads);
    snprintf(qkv_b_axes, sizeof qkv_b_axes, "_,%s", heads);
    snprintf(proj_axes, sizeof proj_axes, "embed,%s", heads);
    mt_graph_logical(g, qkv_w, qkv_axes);
    mt_graph_logical(g, qkv_b, qkv_b_axes);
    mt_graph_logical(g, proj_w, proj_axes);
    mt_graph_logical(g, fc_w, "mlp,embed");
    mt_graph_logical(g, fc_b, "mlp");
    mt_graph_logical(g, mp_w, "embed,mlp");
    mt_tensor *const embed_vecs[] = {ln1_w, ln1_b, proj_b, ln2_w, ln2_b, mp_b};
    for (size_t i = 0; i < sizeof embed_vecs / sizeof embed_vecs[0]; i++)
        mt_graph_logical(g, embed_vecs[i], "embed");

    mt_tensor *h = mt_layernorm(g, x, ln1_w, ln1_b);               /* (B,T,C) */
    mt_tensor *qkv = mt_linear(g, h, qkv_w, qkv_b);                 /* (B,T,3,C) */
    mt_tensor *att = mt_attention_docs(g, qkv, cfg->NH, docs);      /* (B,T,C) */
    mt_tensor *o = mt_graph_logical(g, mt_linear(g, att, proj_w, proj_b),
                                    MT_RESIDUAL_AXES);              /* (B,T,C) */
    mt_tensor *a = mt_add(g, x, o);                                 /* (B,T,C) */
    h = mt_layernorm(g, a, ln2_w, ln2_b);                           /* (B,T,C) */
    h = mt_gelu(g, mt_linear(g, h, fc_w, fc_b));                    /* (B,T,4C) */
    o = mt_graph_logical(g, mt_linear(g, h, mp_w, mp_b), MT_RESIDUAL_AXES); /* (B,T,C) */
    return mt_add(g, a, o);                                         /* (B,T,C) */
}

mt_tensor *mt_gpt_build(mt_graph *g, const mt_gpt_config *cfg, int B, int T, float loss_scale) {
    const mt_model_stage whole = {.layer0 = 0, .layers = cfg ? cfg->L : 0, .first = true,
                                  .last = true};
    return mt_gpt_build_stage(g, cfg, &whole, B, T, loss_scale);
}

mt_tensor *mt_gpt_build_stage(mt_graph *g, const mt_gpt_config *cfg, const mt_model_stage *st,
                              int B, int T, float loss_scale) {
    if (!g) { mt_fail(MT_EINVAL, "mt_gpt_build needs a graph (got NULL)"); return NULL; }
    mt_status s = mt_gpt_config_check(cfg);
    if (s != MT_OK) { mt_graph_fail(g, s, "%s", mt_errmsg()); return NULL; }
    if (B <= 0 || T <= 0) {
        mt_graph_fail(g, MT_EINVAL, "GPT microbatch B=%d T=%d must be positive", B, T);
        return NULL;
    }
    if (T > cfg->maxT) {
        mt_graph_fail(g, MT_EINVAL, "sequence length T=%d exceeds the model's context maxT=%d; "
                      "lower T or build the model with a larger maxT", T, cfg->maxT);
        return NULL;
    }
    if (st->layer0 < 0 || st->layers < 0 || st->layer0 + st->layers > cfg->L ||
        (st->first && st->layer0 != 0) || (st->last && st->layer0 + st->layers != cfg->L)) {
        mt_graph_fail(g, MT_EINVAL, "GPT stage of blocks [%d, %d) does not fit the model's L=%d "
                      "blocks (the first stage starts at 0, the last ends at L)", st->layer0,
                      st->layer0 + st->layers, cfg->L);
        return NULL;
    }
    const int64_t C = cfg->C;
    const mt_init zeros = {MT_INIT_ZEROS, 0.0f}, ones = {MT_INIT_ONES, 0.0f};
    const mt_init normal = {MT_INIT_NORMAL, GPT_INIT_STD};
    const int64_t bt[2] = {B, T}, btc[3] = {B, T, C};

    mt_tensor *x, *wte = NULL, *targets = NULL, *tokens = NULL;
    if (st->first) tokens = mt_input(g, "tokens", MT_I32, 2, bt);      /* (B,T) */
    if (st->last) targets = mt_input(g, "targets", MT_I32, 2, bt);     /* (B,T) */
    mt_graph_logical(g, tokens, "batch,seq");
    mt_graph_logical(g, targets, "batch,seq");
    mt_tensor *docs = cfg->doc_mask ? mt_input(g, "docs", MT_I32, 2, bt) : NULL;   /* (B,T) */
    mt_graph_logical(g, docs, "batch,seq");
    if (st->first) {
        mt_tensor *pos = mt_constant(g, "pos", MT_I32, 2, bt);         /* (B,T), pos[b,t] = t */
        wte = param2(g, "wte", cfg->Vp, C, normal);                     /* (Vp,C) */
        mt_tensor *wpe = param2(g, "wpe", cfg->maxT, C, normal);        /* (maxT,C) */
        mt_graph_logical(g, pos, "batch,seq");
        mt_graph_logical(g, wte, "vocab,embed");
        mt_graph_logical(g, wpe, "_,embed");
        /* the position lookup first: the program's order (and its tensors'
         * names) as it always was */
        mt_tensor *at = mt_embedding(g, wpe, pos);                      /* (B,T,C) */
        mt_tensor *tok = mt_graph_logical(g, mt_embedding(g, wte, tokens),
                                          MT_RESIDUAL_AXES);            /* (B,T,C) */
        x = mt_add(g, tok, at);                                         /* (B,T,C) */
    } else {
        /* the previous stage's output; its gradient goes back to it */
        x = mt_graph_logical(g, mt_input(g, MT_STAGE_INPUT, MT_F32, 3, btc),
                             MT_RESIDUAL_AXES);                         /* (B,T,C) */
        if (x && (s = mt_input_set_needs_grad(x)) != MT_OK) {
            mt_graph_fail(g, s, "%s", mt_errmsg());
            return NULL;
        }
    }
    for (int l = st->layer0; l < st->layer0 + st->layers; l++) {
        mt_graph_set_block(g, l);   /* remat and traces know the block by this */
        x = gpt_block(g, x, l, cfg, docs);
    }
    mt_graph_set_block(g, -1);
    if (!st->last) return x;

    /* the tied head: on a last stage that is not the first, a copy of wte
     * (the same name, so the same initial values; a pipeline sums the two
     * copies' gradients) */
    if (!wte) wte = mt_graph_logical(g, param2(g, "wte", cfg->Vp, C, normal),
                                     "vocab,embed");                    /* (Vp,C) */
    mt_tensor *lnf_w = param1(g, "ln_f.w", C, ones), *lnf_b = param1(g, "ln_f.b", C, zeros);
    mt_graph_logical(g, lnf_w, "embed");
    mt_graph_logical(g, lnf_b, "embed");
    mt_tensor *xf = mt_layernorm(g, x, lnf_w, lnf_b);              /* (B,T,C) */
    /* tied head: logits (B,T,Vp) = xf (B,T,C) · wte (Vp,C)ᵀ */
    mt_tensor *logits = mt_matmul(g, xf, wte, false, true);
    /* named so that sampling can read the next-token distribution */
    if (logits) mt_tensor_set_name(logits, "logits");
    mt_tensor *loss = mt_cross_entropy(g, logits, targets, cfg->V, loss_scale);
    if (!loss && mt_graph_status(g) == MT_OK)
        mt_graph_fail(g, MT_EINTERNAL, "building the GPT graph failed without a graph error");
    return loss;
}

mt_status mt_gpt_fill_constants(mt_graph *g) {
    mt_tensor *pos = g ? mt_graph_find(g, "pos") : NULL;
    if (!pos || mt_tensor_dtype(pos) != MT_I32 || mt_tensor_ndim(pos) != 2)
        return mt_fail(MT_EINVAL, "the graph has no int32 (B,T) constant 'pos'; "
                       "build it with mt_gpt_build");
    if (!mt_tensor_i32(pos))
        return mt_fail(MT_ESTATE, "position ids have no storage yet; call mt_graph_compile "
                       "before mt_gpt_fill_constants");
    /* each row 0 .. T-1, written through the graph's backend */
    int64_t B = mt_tensor_dim(pos, 0), T = mt_tensor_dim(pos, 1);
    int32_t *row = malloc((size_t)T * sizeof *row);   /* (T) */
    if (!row) return mt_fail(MT_ENOMEM, "out of memory for %lld position ids", (long long)T);
    for (int64_t t = 0; t < T; t++) row[t] = (int32_t)t;
    mt_status s = MT_OK;
    for (int64_t b = 0; b < B && s == MT_OK; b++) s = mt_tensor_write(pos, row, b * T, T);
    free(row);
    return s;
}
