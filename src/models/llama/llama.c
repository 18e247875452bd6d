/*
 * llama.c — the LLaMA family (Llama 2/3, TinyLlama, llama2.c's stories
 * models), built only through the public graph API: a token embedding, L
 * pre-RMSNorm blocks (grouped-query causal attention with RoPE on q and k,
 * then a SwiGLU MLP, each with a residual), a final RMSNorm and an LM head,
 * untied unless the configuration ties it to the embedding.
 */
#include "meshtrain/models.h"
#include "models/llama/llama_moe.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The initialisation scale, as the GPT's (llm.c) and llama2.c's model.py
 * (normal std 0.02, the residual projections 0.02/sqrt(2L)). */
#define LLAMA_INIT_STD 0.02f

/* ======================================================================== */
/* Configuration                                                             */
/* ======================================================================== */

int mt_llama_ffn_rule(int dim, int multiple_of, float ffn_mult) {
    if (dim <= 0 || multiple_of <= 0 || !(ffn_mult > 0.0f)) return 0;
    /* Meta's llama/model.py FeedForward: hidden = int(2 * 4dim / 3), then
     * int(multiplier * hidden), then up to a multiple of multiple_of */
    int64_t h = (int64_t)(2 * 4 * (int64_t)dim / 3);
    h = (int64_t)((double)ffn_mult * (double)h);
    h = (h + multiple_of - 1) / multiple_of * multiple_of;
    return h > 0 && h <= (1 << 30) ? (int)h : 0;
}

int mt_llama_ffn_dim(const mt_llama_config *cfg) {
    return cfg->ffn_dim > 0 ? cfg->ffn_dim
                            : mt_llama_ffn_rule(cfg->dim, cfg->multiple_of, cfg->ffn_mult);
}

int mt_llama_head_dim(const mt_llama_config *cfg) {
    if (cfg->head_dim > 0) return cfg->head_dim;
    return cfg->n_heads > 0 ? cfg->dim / cfg->n_heads : 0;
}

mt_status mt_llama_config_check(const mt_llama_config *cfg) {
    if (!cfg) return mt_fail(MT_EINVAL, "LLaMA configuration is NULL");
    const struct { const char *flag; int value; } sizes[] = {
        {"channels", cfg->dim}, {"layers", cfg->n_layers}, {"heads", cfg->n_heads},
        {"kv-heads", cfg->n_kv_heads}, {"vocab", cfg->vocab}, {"max-seq", cfg->max_seq},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].value <= 0)
            return mt_fail(MT_EINVAL, "LLaMA --%s %d must be positive", sizes[i].flag,
                           sizes[i].value);
    if (cfg->ffn_dim < 0)
        return mt_fail(MT_EINVAL, "LLaMA --ffn-dim %d must be positive (0: from --multiple-of "
                       "and --ffn-mult)", cfg->ffn_dim);
    if (mt_llama_ffn_dim(cfg) <= 0)
        return mt_fail(MT_EINVAL, "LLaMA --ffn-dim 0 takes the FFN size from Llama's rule, "
                       "which needs --multiple-of (%d) and --ffn-mult (%g) positive; set them "
                       "or give --ffn-dim", cfg->multiple_of, (double)cfg->ffn_mult);
    if (cfg->n_heads % cfg->n_kv_heads != 0)
        return mt_fail(MT_EINVAL, "LLaMA --kv-heads %d does not divide --heads %d; grouped-query "
                       "attention shares each kv head among NH/KV query heads, so pick KV a "
                       "divisor of NH (KV = NH is multi-head, 1 multi-query)", cfg->n_kv_heads,
                       cfg->n_heads);
    if (cfg->head_dim < 0 || cfg->head_dim > (1 << 16))
        return mt_fail(MT_EINVAL, "LLaMA --head-dim %d must be 1 to 65536 (0: --channels / "
                       "--heads)", cfg->head_dim);
    if (cfg->head_dim == 0 && cfg->dim % cfg->n_heads != 0)
        return mt_fail(MT_EINVAL, "LLaMA --channels %d is not divisible by --heads %d; pick a "
                       "width that is a multiple of the heads, or give the head size with "
                       "--head-dim", cfg->dim, cfg->n_heads);
    if (cfg->head_dim == 0 && (cfg->dim / cfg->n_heads) % 2 != 0)
        return mt_fail(MT_EINVAL, "LLaMA head size %d (--channels %d / --heads %d) is odd; "
                       "RoPE rotates pairs of channels, so the head size must be even",
                       cfg->dim / cfg->n_heads, cfg->dim, cfg->n_heads);
    if (cfg->head_dim % 2 != 0)
        return mt_fail(MT_EINVAL, "LLaMA --head-dim %d is odd; RoPE rotates pairs of "
                       "channels, so the head size must be even", cfg->head_dim);
    if ((int64_t)cfg->n_heads * mt_llama_head_dim(cfg) > (1 << 20))
        return mt_fail(MT_EINVAL, "LLaMA attention width --heads %d x head size %d is past "
                       "2^20; lower --heads or --head-dim", cfg->n_heads,
                       mt_llama_head_dim(cfg));
    if (!(cfg->rope_theta > 1.0f) || !isfinite(cfg->rope_theta))
        return mt_fail(MT_EINVAL, "LLaMA --rope-theta %g must be finite and above 1 (10000 "
                       "for Llama 2, 500000 for Llama 3)", (double)cfg->rope_theta);
    if (!(cfg->norm_eps > 0.0f && cfg->norm_eps < 1.0f))
        return mt_fail(MT_EINVAL, "LLaMA --norm-eps %g must be in (0, 1) (Llama's: 1e-5)",
                       (double)cfg->norm_eps);
    mt_status s = mt_rope_scaling_check(&cfg->rope_scaling);
    if (s != MT_OK) return mt_fail(s, "LLaMA %s", mt_errmsg());
    if (cfg->tie_embeddings != 0 && cfg->tie_embeddings != 1)
        return mt_fail(MT_EINVAL, "LLaMA tie_embeddings=%d must be 0 or 1",
                       cfg->tie_embeddings);
    if ((cfg->qkv_bias != 0 && cfg->qkv_bias != 1) || (cfg->qk_norm != 0 && cfg->qk_norm != 1))
        return mt_fail(MT_EINVAL, "LLaMA qkv_bias=%d and qk_norm=%d must each be 0 or 1",
                       cfg->qkv_bias, cfg->qk_norm);
    return mt_llama_moe_check(cfg);
}

/* ======================================================================== */
/* Presets                                                                   */
/* ======================================================================== */

/* The published shapes. Sources: Meta's params.json of each checkpoint
 * (Llama 3 8B/70B: dim, n_layers, n_heads, n_kv_heads 8, vocab 128256,
 * multiple_of 1024/4096, ffn_dim_multiplier 1.3, norm_eps 1e-5, rope_theta
 * 500000, context 8192; Llama 3.1 405B: 16384, 126, 128, 8, multiple_of
 * 4096, 1.2, context 131072; Llama 2 7B/13B: multiple_of 256, norm_eps
 * 1e-5, vocab 32000, context 4096, theta 10000), the FFN from Meta's rule
 * (14336, 28672, 53248, 11008, 13824); TinyLlama-1.1B's config.json
 * (hidden 2048, intermediate 5632, 22 layers, 32 heads, 4 kv heads, 2048
 * positions, rms_norm_eps 1e-5); llama2.c's README and train.py
 * (stories15M: dim 288, 6 layers, 6 heads, seq 256; stories110M: dim 768,
 * 12 layers, 12 heads, seq 1024; vocab 32000, multiple_of 32 giving 768
 * and 2048, shared classifier). Llama 3.1 8B/70B/405B: the shapes of the
 * rows above (the 405B's is 3.1's already), with config.json's (Hugging
 * Face meta-llama/Llama-3.1-8B, -70B, -405B) rope_theta 500000,
 * max_position_embeddings 131072 and rope_scaling {rope_type llama3,
 * factor 8.0, low_freq_factor 1.0, high_freq_factor 4.0,
 * original_max_position_embeddings 8192}. Every preset carries those
 * scaling values, with kind none where the model has no scaling, and
 * YaRN's beta_fast 32, beta_slow 1 (Peng et al. 2023, section 4). */
static const struct {
    const char     *name;
    mt_llama_config cfg;
} PRESETS[] = {
#define LLAMA(n, C, F, L, NH, KV, V, T, theta, mult, mo, tie, scaling)                           \
    {n, {.dim = C, .ffn_dim = F, .n_layers = L, .n_heads = NH, .n_kv_heads = KV, .vocab = V,   \
         .max_seq = T, .rope_theta = theta, .norm_eps = 1e-5f, .tie_embeddings = tie,           \
         .multiple_of = mo, .ffn_mult = mult, .rope_scaling = MT_LLAMA31_ROPE_SCALING(scaling)}}
#define NONE MT_ROPE_SCALING_NONE
#define L31 MT_ROPE_SCALING_LLAMA3
    LLAMA("llama3-8b", 4096, 14336, 32, 32, 8, 128256, 8192, 500000.0f, 1.3f, 1024, 0, NONE),
    LLAMA("llama3-70b", 8192, 28672, 80, 64, 8, 128256, 8192, 500000.0f, 1.3f, 4096, 0, NONE),
    LLAMA("llama3-405b", 16384, 53248, 126, 128, 8, 128256, 131072, 500000.0f, 1.2f, 4096, 0,
          NONE),
    LLAMA("llama3.1-8b", 4096, 14336, 32, 32, 8, 128256, 131072, 500000.0f, 1.3f, 1024, 0, L31),
    LLAMA("llama3.1-70b", 8192, 28672, 80, 64, 8, 128256, 131072, 500000.0f, 1.3f, 4096, 0,
          L31),
    LLAMA("llama3.1-405b", 16384, 53248, 126, 128, 8, 128256, 131072, 500000.0f, 1.2f, 4096, 0,
          L31),
    LLAMA("llama2-7b", 4096, 11008, 32, 32, 32, 32000, 4096, 10000.0f, 1.0f, 256, 0, NONE),
    LLAMA("llama2-13b", 5120, 13824, 40, 40, 40, 32000, 4096, 10000.0f, 1.0f, 256, 0, NONE),
    LLAMA("tinyllama-1.1b", 2048, 5632, 22, 32, 4, 32000, 2048, 10000.0f, 1.0f, 256, 0, NONE),
    LLAMA("stories15m", 288, 768, 6, 6, 6, 32000, 256, 10000.0f, 1.0f, 32, 1, NONE),
    LLAMA("stories110m", 768, 2048, 12, 12, 12, 32000, 1024, 10000.0f, 1.0f, 32, 1, NONE),
    /* no published model: a mixture of experts small enough for CPU runs
     * (issue 42), V a text file's bytes (--vocab for a tokenizer's); Mixtral's 8 experts, top-2 of a softmax
     * renormalised (Mixtral 8x7B's config.json: num_local_experts 8,
     * num_experts_per_tok 2), DeepSeek-MoE's shared expert and first
     * dense block (DeepSeek-V3's config.json: n_shared_experts 1,
     * first_k_dense_replace 3), Switch's and Megatron's aux-loss α 0.01,
     * ST-MoE's z-loss β 1e-3 */
    {"moe-tiny", {.dim = 64, .ffn_dim = 192, .n_layers = 4, .n_heads = 4, .n_kv_heads = 2,
                  .vocab = 256, .max_seq = 256, .rope_theta = 10000.0f, .norm_eps = 1e-5f,
                  .multiple_of = 32, .ffn_mult = 1.0f,
                  .rope_scaling = MT_LLAMA31_ROPE_SCALING(MT_ROPE_SCALING_NONE),
                  .moe = {.experts = 8, .top_k = 2, .ffn_dim = 64, .shared = 1,
                          .first_dense = 1, .every = 1, .route_scale = 1.0f,
                          .aux_alpha = 0.01f, .z_beta = 1e-3f}}},
    /* Mixtures of experts of published shapes (issue 42): every block an
     * MoE of SwiGLU experts, the softmax's top k renormalised (Mixtral's
     * softmax over the k selected logits; Qwen3's norm_topk_prob true), no
     * shared expert. Sources, each model's config.json on Hugging Face:
     * mistralai/Mixtral-8x7B-v0.1 (hidden 4096, intermediate 14336, 32
     * layers, 32 heads, 8 kv heads, vocab 32000, 32768 positions,
     * rope_theta 1e6, rms_norm_eps 1e-5, num_local_experts 8,
     * num_experts_per_tok 2, router_aux_loss_coef 0.02);
     * mistral-community/Mixtral-8x22B-v0.1 (6144, 16384, 56, 48, 8, 32000,
     * 65536, 1e6, 1e-5, 8, 2, 0.001); Qwen/Qwen3-30B-A3B (hidden 2048,
     * head_dim 128, 48 layers, 32 heads, 4 kv heads, vocab 151936, 40960
     * positions, rope_theta 1e6, rms_norm_eps 1e-6, num_experts 128,
     * num_experts_per_tok 8, moe_intermediate_size 768, intermediate_size
     * 6144, router_aux_loss_coef 0.001) and Qwen/Qwen3-235B-A22B (4096,
     * 128, 94, 64, 4, 151936, 40960, 1e6, 1e-6, 128, 8, 1536, 12288,
     * 0.001); untied embeddings. Hugging Face's aux loss is α·k at perfect
     * balance where ours is α (docs/moe.md), so α here is theirs times k.
     * The dense ffn_dim (used by no block) is config.json's
     * intermediate_size, from Meta's rule at multiplier 1.3 (Mixtral 8x7B,
     * as Llama 3 8B), 1.0 (8x22B) and 1.125 (Qwen3). Qwen3's per-head q and
     * k RMSNorms (qk_norm: the presets with a head_dim of their own). */
#define MOE(n, C, HS, F, L, NH, KV, V, T, eps, mult, mo, E, k, Fe, alpha)                        \
    {n, {.dim = C, .head_dim = HS, .ffn_dim = F, .n_layers = L, .n_heads = NH,                  \
         .n_kv_heads = KV, .vocab = V, .max_seq = T, .rope_theta = 1e6f, .norm_eps = eps,       \
         .multiple_of = mo, .ffn_mult = mult,                                                   \
         .rope_scaling = MT_LLAMA31_ROPE_SCALING(MT_ROPE_SCALING_NONE),                         \
         .moe = {.experts = E, .top_k = k, .ffn_dim = Fe, .every = 1, .route_scale = 1.0f,      \
                 .aux_alpha = alpha}, .qk_norm = HS > 0}}
    MOE("mixtral-8x7b", 4096, 0, 14336, 32, 32, 8, 32000, 32768, 1e-5f, 1.3f, 1024, 8, 2, 14336,
        0.04f),
    MOE("mixtral-8x22b", 6144, 0, 16384, 56, 48, 8, 32000, 65536, 1e-5f, 1.0f, 1024, 8, 2, 16384,
        0.002f),
    MOE("qwen3-30b-a3b", 2048, 128, 6144, 48, 32, 4, 151936, 40960, 1e-6f, 1.125f, 256, 128, 8,
        768, 0.008f),
    MOE("qwen3-235b-a22b", 4096, 128, 12288, 94, 64, 4, 151936, 40960, 1e-6f, 1.125f, 256, 128,
        8, 1536, 0.008f),
#undef MOE
    /* Qwen's dense models (issue 43), each config.json on Hugging Face:
     * Qwen/Qwen2.5-7B (hidden 3584, intermediate 18944, 28 layers, 28
     * heads, 4 kv heads, vocab 152064, 131072 positions, rope_theta 1e6,
     * rms_norm_eps 1e-6, untied; Qwen2's q, k, v biases) and Qwen/Qwen3-8B
     * (4096, 12288, 36, 32, 8, head_dim 128, 151936, 40960, 1e6, 1e-6,
     * untied; Qwen3's q and k norms); the multipliers make Meta's rule give
     * intermediate_size (as the Qwen3 MoEs' above) */
#define QWEN(n, C, HS, F, L, NH, KV, V, T, mult, bias, norm)                                   \
    {n, {.dim = C, .head_dim = HS, .ffn_dim = F, .n_layers = L, .n_heads = NH,                  \
         .n_kv_heads = KV, .vocab = V, .max_seq = T, .rope_theta = 1e6f, .norm_eps = 1e-6f,     \
         .multiple_of = 256, .ffn_mult = mult,                                                  \
         .rope_scaling = MT_LLAMA31_ROPE_SCALING(MT_ROPE_SCALING_NONE), .qkv_bias = bias,       \
         .qk_norm = norm}}
    QWEN("qwen2.5-7b", 3584, 0, 18944, 28, 28, 4, 152064, 131072, 1.98f, 1, 0),
    QWEN("qwen3-8b", 4096, 128, 12288, 36, 32, 8, 151936, 40960, 1.125f, 0, 1),
#undef QWEN
#undef LLAMA
#undef NONE
#undef L31
};
#define N_PRESETS ((int)(sizeof PRESETS / sizeof PRESETS[0]))

const char *mt_llama_preset_name(int i) {
    return i >= 0 && i < N_PRESETS ? PRESETS[i].name : NULL;
}

mt_status mt_llama_preset(const char *name, mt_llama_config *cfg) {
    for (int i = 0; name && cfg && i < N_PRESETS; i++)
        if (strcmp(PRESETS[i].name, name) == 0) {
            *cfg = PRESETS[i].cfg;
            return MT_OK;
        }
    char list[256] = "";
    for (int i = 0; i < N_PRESETS; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                 PRESETS[i].name);
    return mt_fail(MT_EINVAL, "unknown LLaMA preset '%s'%s; the presets are %s",
                   name ? name : "(null)", cfg ? "" : " (and no configuration to write)", list);
}

/* ======================================================================== */
/* Size and FLOPs                                                            */
/* ======================================================================== */

int64_t mt_llama_num_params(const mt_llama_config *cfg) {
    int64_t C = cfg->dim, F = mt_llama_ffn_dim(cfg), V = cfg->vocab;
    int64_t HS = mt_llama_head_dim(cfg), NH = cfg->n_heads, KV = cfg->n_kv_heads;
    /* per block: two norms, wq and wo (2·NH·HS·C: 2C² when HS = C/NH), wk
     * and wv (2·KV·HS·C), w1 w2 w3 (3CF) */
    int64_t per_layer = 2 * C + 2 * NH * HS * C + 2 * KV * HS * C + 3 * C * F, n = 0;
    per_layer += (cfg->qkv_bias ? (NH + 2 * KV) * HS : 0) + (cfg->qk_norm ? 2 * HS : 0);
    /* a MoE block's feed-forward is the router, its experts and shared ones */
    for (int l = 0; l < cfg->n_layers; l++)
        n += per_layer + (mt_llama_moe_block(cfg, l) ? mt__llama_moe_ffn_params(cfg, F, false) -
                                                           3 * C * F : 0);
    return V * C * (cfg->tie_embeddings ? 1 : 2) + n + C;
}

double mt_llama_train_flops(const mt_llama_config *cfg, int T, int64_t tokens) {
    /* as mt_gpt_train_flops: 6 per matmul weight per token (the lookup table
     * is no product, the head is), causal attention's scores 6·L·NH·HS·T
     * per token (half PaLM's 12·L·NH·HS·T: the pairs with key <= query; the
     * query's width; grouped kv heads do not change q·kᵀ's count) */
    double N = (double)mt_llama_num_params(cfg);
    const int64_t F = mt_llama_ffn_dim(cfg);
    if (!cfg->tie_embeddings) N -= (double)cfg->vocab * cfg->dim;
    /* a MoE block: its active parameters, the router and k + shared experts
     * (Megatron's convention, ../shared/MOE.md §6) */
    for (int l = 0; l < cfg->n_layers; l++)
        if (mt_llama_moe_block(cfg, l))
            N -= (double)(mt__llama_moe_ffn_params(cfg, F, false) -
                          mt__llama_moe_ffn_params(cfg, F, true));
    const int64_t width = (int64_t)cfg->n_heads * mt_llama_head_dim(cfg);   /* C by default */
    double attn = 6.0 * cfg->n_layers * (double)width * T;
    return (6.0 * N + attn) * (double)tokens;
}

/* ======================================================================== */
/* Builder                                                                   */
/* ======================================================================== */

/* The parameter named by `fmt` with block l (rows) when cols is 0, else
 * (rows, cols). */
static mt_tensor *lparam(mt_graph *g, mt_init init, int64_t rows, int64_t cols, const char *fmt,
                         int l) {
    char name[MT_MAX_NAME];
    snprintf(name, sizeof name, fmt, l);
    const int64_t shape[2] = {rows, cols};
    return mt_param(g, name, cols ? 2 : 1, shape, init);
}

/* Qwen3's q_norm / k_norm: x (B,T,N·HS) RMS-normalised over each head's HS
 * channels, scaled by w (HS). */
static mt_tensor *head_norm(mt_graph *g, mt_tensor *x, int N, int64_t HS, mt_tensor *w,
                            const mt_llama_config *cfg) {
    if (!x) return NULL;
    const int64_t B = mt_tensor_dim(x, 0), T = mt_tensor_dim(x, 1);
    const int64_t heads[4] = {B, T, N, HS}, flat[3] = {B, T, N * HS};
    mt_graph_logical(g, w, "head_dim");
    mt_tensor *h = mt_rmsnorm(g, mt_reshape(g, x, 4, heads), w, cfg->norm_eps);  /* (B,T,N,HS) */
    return mt_reshape(g, h, 3, flat);                                            /* (B,T,N·HS) */
}

/* One block: x (B,T,C) -> (B,T,C); a MoE block's router loss added to
 * *aux (NULL: none yet). */
static mt_tensor *llama_block(mt_graph *g, mt_tensor *x, int l, const mt_llama_config *cfg,
                              mt_tensor *docs, mt_tensor **aux) {
    const int64_t C = cfg->dim, F = mt_llama_ffn_dim(cfg);
    const int NH = cfg->n_heads, KV = cfg->n_kv_heads;
    const int64_t HS = mt_llama_head_dim(cfg);   /* NH·HS need not be C */
    const mt_init ones = {MT_INIT_ONES, 0.0f}, normal = {MT_INIT_NORMAL, LLAMA_INIT_STD};
    /* the residual projections scaled down with depth, as the GPT's */
    const mt_init resid = {MT_INIT_NORMAL, LLAMA_INIT_STD / sqrtf(2.0f * (float)cfg->n_layers)};
    mt_tensor *attn_norm = lparam(g, ones, C, 0, "h.%d.attn_norm.w", l);        /* (C) */
    mt_tensor *wq = lparam(g, normal, NH * HS, C, "h.%d.attn.wq.w", l);         /* (NH·HS,C) */
    mt_tensor *wk = lparam(g, normal, KV * HS, C, "h.%d.attn.wk.w", l);         /* (KV·HS,C) */
    mt_tensor *wv = lparam(g, normal, KV * HS, C, "h.%d.attn.wv.w", l);         /* (KV·HS,C) */
    mt_tensor *wo = lparam(g, resid, C, NH * HS, "h.%d.attn.wo.w", l);          /* (C,NH·HS) */
    mt_tensor *ffn_norm = lparam(g, ones, C, 0, "h.%d.ffn_norm.w", l);          /* (C) */
    const bool moe = mt_llama_moe_block(cfg, l);
    mt_tensor *w1 = NULL, *w2 = NULL, *w3 = NULL;
    if (!moe) {
        w1 = lparam(g, normal, F, C, "h.%d.ffn.w1.w", l);                       /* (F,C) */
        w2 = lparam(g, resid, C, F, "h.%d.ffn.w2.w", l);                        /* (C,F) */
        w3 = lparam(g, normal, F, C, "h.%d.ffn.w3.w", l);                       /* (F,C) */
        mt_graph_logical(g, w1, "mlp,embed");
        mt_graph_logical(g, w3, "mlp,embed");
        mt_graph_logical(g, w2, "embed,mlp");
    }
    /* the logical axes of each parameter's dims: strategies are rules over
     * these (sharding.h); heads split whole (units of HS) */
    char q_axes[40], kv_axes[40], o_axes[40];
    snprintf(q_axes, sizeof q_axes, "heads*%lld,embed", (long long)HS);
    snprintf(kv_axes, sizeof kv_axes, "kv_heads*%lld,embed", (long long)HS);
    snprintf(o_axes, sizeof o_axes, "embed,heads*%lld", (long long)HS);
    mt_graph_logical(g, wq, q_axes);
    mt_graph_logical(g, wk, kv_axes);
    mt_graph_logical(g, wv, kv_axes);
    mt_graph_logical(g, wo, o_axes);
    mt_graph_logical(g, attn_norm, "embed");
    mt_graph_logical(g, ffn_norm, "embed");

    mt_tensor *h = mt_rmsnorm(g, x, attn_norm, cfg->norm_eps);               /* (B,T,C) */
    const mt_rope_scaling *rs = &cfg->rope_scaling;
    mt_tensor *bq = NULL, *bk = NULL, *bv = NULL;   /* Qwen2's q, k, v biases */
    if (cfg->qkv_bias) {
        const mt_init zeros = {MT_INIT_ZEROS, 0.0f};
        bq = lparam(g, zeros, NH * HS, 0, "h.%d.attn.wq.b", l);                 /* (NH·HS) */
        bk = lparam(g, zeros, KV * HS, 0, "h.%d.attn.wk.b", l);                 /* (KV·HS) */
        bv = lparam(g, zeros, KV * HS, 0, "h.%d.attn.wv.b", l);                 /* (KV·HS) */
        snprintf(q_axes, sizeof q_axes, "heads*%lld", (long long)HS);
        snprintf(kv_axes, sizeof kv_axes, "kv_heads*%lld", (long long)HS);
        mt_graph_logical(g, bq, q_axes);
        mt_graph_logical(g, bk, kv_axes);
        mt_graph_logical(g, bv, kv_axes);
    }
    /* Qwen3: each head's HS channels RMS-normalised before RoPE */
    mt_tensor *q = mt_linear(g, h, wq, bq);                                  /* (B,T,NH·HS) */
    if (cfg->qk_norm)
        q = head_norm(g, q, NH, HS, lparam(g, ones, HS, 0, "h.%d.attn.q_norm.w", l), cfg);
    q = mt_rope_scaled(g, q, NH, cfg->rope_theta, 0, rs);                    /* (B,T,NH·HS) */
    mt_tensor *k = mt_linear(g, h, wk, bk);                                  /* (B,T,KV·HS) */
    if (cfg->qk_norm)
        k = head_norm(g, k, KV, HS, lparam(g, ones, HS, 0, "h.%d.attn.k_norm.w", l), cfg);
    k = mt_rope_scaled(g, k, KV, cfg->rope_theta, 0, rs);                    /* (B,T,KV·HS) */
    mt_tensor *v = mt_linear(g, h, wv, bv);                                  /* (B,T,KV·HS) */
    mt_tensor *att = mt_attention_gqa_docs(g, q, k, v, NH, KV, docs);        /* (B,T,NH·HS) */
    mt_tensor *o = mt_graph_logical(g, mt_linear(g, att, wo, NULL), MT_RESIDUAL_AXES); /* (B,T,C) */
    mt_tensor *a = mt_add(g, x, o);                                          /* (B,T,C) */
    h = mt_rmsnorm(g, a, ffn_norm, cfg->norm_eps);                           /* (B,T,C) */
    if (moe) {
        mt_tensor *la = NULL;
        o = mt__llama_moe_ffn(g, h, l, cfg, F, normal, resid, &la);             /* (B,T,C) */
        *aux = *aux ? mt_add(g, *aux, la) : la;                              /* () */
        return mt_add(g, a, mt_graph_logical(g, o, MT_RESIDUAL_AXES));       /* (B,T,C) */
    }
    h = mt_swiglu(g, mt_linear(g, h, w1, NULL), mt_linear(g, h, w3, NULL));  /* (B,T,F) */
    o = mt_graph_logical(g, mt_linear(g, h, w2, NULL), MT_RESIDUAL_AXES);    /* (B,T,C) */
    return mt_add(g, a, o);                                                  /* (B,T,C) */
}

mt_tensor *mt_llama_build(mt_graph *g, const mt_llama_config *cfg, int B, int T,
                          float loss_scale) {
    const mt_model_stage whole = {.layer0 = 0, .layers = cfg ? cfg->n_layers : 0,
                                  .first = true, .last = true};
    return mt_llama_build_stage(g, cfg, &whole, B, T, loss_scale);
}

/* The checks of a build: NULL-free arguments, the configuration, the
 * microbatch and the stage. */
static mt_status check_build(mt_graph *g, const mt_llama_config *cfg, const mt_model_stage *st,
                             int B, int T) {
    mt_status s = mt_llama_config_check(cfg);
    if (s != MT_OK) return mt_graph_fail(g, s, "%s", mt_errmsg());
    if (!st) return mt_graph_fail(g, MT_EINVAL, "mt_llama_build_stage needs a stage (got NULL)");
    if (B <= 0 || T <= 0)
        return mt_graph_fail(g, MT_EINVAL, "LLaMA microbatch B=%d T=%d must be positive", B, T);
    if (T > cfg->max_seq)
        return mt_graph_fail(g, MT_EINVAL, "sequence length T=%d (--seq) exceeds the model's "
                             "context max_seq=%d (--max-seq); lower T or raise max_seq", T,
                             cfg->max_seq);
    const int L = cfg->n_layers;
    if (st->layer0 < 0 || st->layers < 0 || st->layer0 + st->layers > L ||
        (st->first && st->layer0 != 0) || (st->last && st->layer0 + st->layers != L))
        return mt_graph_fail(g, MT_EINVAL, "LLaMA stage of blocks [%d, %d) does not fit the "
                             "model's %d blocks (the first stage starts at 0, the last ends "
                             "at L)", st->layer0, st->layer0 + st->layers, L);
    return MT_OK;
}

mt_tensor *mt_llama_build_stage(mt_graph *g, const mt_llama_config *cfg,
                                const mt_model_stage *st, int B, int T, float loss_scale) {
    if (!g) { mt_fail(MT_EINVAL, "mt_llama_build needs a graph (got NULL)"); return NULL; }
    if (check_build(g, cfg, st, B, T) != MT_OK) return NULL;
    const int64_t C = cfg->dim, V = cfg->vocab;
    const mt_init ones = {MT_INIT_ONES, 0.0f}, normal = {MT_INIT_NORMAL, LLAMA_INIT_STD};
    const int64_t bt[2] = {B, T}, btc[3] = {B, T, C};

    mt_tensor *x, *tok_emb = NULL, *targets = NULL;
    if (st->first) {
        mt_tensor *tokens = mt_graph_logical(g, mt_input(g, "tokens", MT_I32, 2, bt),
                                             "batch,seq");               /* (B,T) */
        tok_emb = mt_graph_logical(g, lparam(g, normal, V, C, "tok_emb.w", 0),
                                   "vocab,embed");                       /* (V,C) */
        x = mt_graph_logical(g, mt_embedding(g, tok_emb, tokens),
                             MT_RESIDUAL_AXES);                          /* (B,T,C) */
    } else {
        /* the previous stage's output; its gradient goes back to it */
        x = mt_graph_logical(g, mt_input(g, MT_STAGE_INPUT, MT_F32, 3, btc),
                             MT_RESIDUAL_AXES);                          /* (B,T,C) */
        mt_status s = x ? mt_input_set_needs_grad(x) : MT_OK;
        if (s != MT_OK) {
            mt_graph_fail(g, s, "%s", mt_errmsg());
            return NULL;
        }
    }
    if (st->last)
        targets = mt_graph_logical(g, mt_input(g, "targets", MT_I32, 2, bt),
                                   "batch,seq");                         /* (B,T) */
    mt_tensor *docs = cfg->doc_mask ? mt_input(g, "docs", MT_I32, 2, bt) : NULL;   /* (B,T) */
    mt_graph_logical(g, docs, "batch,seq");
    mt_tensor *aux = NULL;   /* the MoE blocks' router losses */
    for (int l = st->layer0; l < st->layer0 + st->layers; l++) {
        mt_graph_set_block(g, l);   /* remat and traces know the block by this */
        x = llama_block(g, x, l, cfg, docs, &aux);
    }
    mt_graph_set_block(g, -1);
    /* the router losses, a microbatch's share of them: each is already a
     * mean (over sequences, tokens), where the cross-entropy is a sum over
     * the microbatch's B·T rows times loss_scale (1 / the step's tokens), so
     * theirs is loss_scale · B·T (1 / the microbatches); loss_scale alone
     * divided α and β by B·T */
    const float aux_scale = loss_scale * (float)B * (float)T;
    /* a stage that is not the last: its output, with its router losses
     * attached (their gradient aux_scale in the backward, the output's
     * passed on; the trainer adds their values to the step's loss) */
    if (!st->last) return aux ? mt_aux_attach(g, x, aux, aux_scale) : x;

    mt_tensor *norm = mt_graph_logical(g, lparam(g, ones, C, 0, "norm.w", 0), "embed"); /* (C) */
    mt_tensor *xf = mt_rmsnorm(g, x, norm, cfg->norm_eps);                /* (B,T,C) */
    /* tied: on a last stage that is not the first, a copy of tok_emb.w (the
     * same name, so the same initial values; a pipeline sums the two
     * copies' gradients) */
    if (cfg->tie_embeddings && !tok_emb) tok_emb = lparam(g, normal, V, C, "tok_emb.w", 0);
    mt_tensor *head = cfg->tie_embeddings ? tok_emb                       /* (V,C) */
                                          : lparam(g, normal, V, C, "lm_head.w", 0);
    mt_graph_logical(g, head, "vocab,embed");
    /* logits (B,T,V) = xf (B,T,C) · head (V,C)ᵀ */
    mt_tensor *logits = mt_matmul(g, xf, head, false, true);
    /* named so that sampling can read the next-token distribution */
    if (logits) mt_tensor_set_name(logits, "logits");
    mt_tensor *loss = mt_cross_entropy(g, logits, targets, (int)V, loss_scale);
    if (aux) loss = mt_add(g, loss, aux_scale == 1.0f ? aux : mt_scale(g, aux, aux_scale));
    if (!loss && mt_graph_status(g) == MT_OK)
        mt_graph_fail(g, MT_EINTERNAL, "building the LLaMA graph failed without a graph error");
    return loss;
}
