/*
 * hf_config.c — a Hugging Face model directory's config.json for the LLaMA
 * family (issue 43): LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM
 * (q, k, v biases) and Qwen3ForCausalLM (q and k norms), read into
 * mt_llama_config and written from it, with the fields transformers'
 * LlamaConfig, MistralConfig, Qwen2Config and Qwen3Config define (their defaults where a field is
 * absent: num_key_value_heads = num_attention_heads, rope_theta 10000,
 * rms_norm_eps 1e-6, tie_word_embeddings false, head_dim hidden_size /
 * num_attention_heads). What meshtrain's LLaMA does not compute is refused
 * naming the field: another hidden_act than silu, attention or MLP biases,
 * a sliding window shorter than the context, a RoPE scaling other than
 * llama3 and yarn. MixtralForCausalLM and Qwen3MoeForCausalLM (Qwen3's
 * attention) add a mixture of experts (read_moe; docs/huggingface.md's
 * table), refused where meshtrain's router or block placement would
 * compute another model. And GPT2LMHeadModel's (transformers' GPT2Config: n_embd,
 * n_layer, n_head, n_positions, vocab_size, layer_norm_epsilon 1e-5 as
 * meshtrain's LayerNorm, gelu_new, the head tied) into mt_gpt_config.
 */
#include "base/json.h"
#include "io/hf_impl.h"
#include "io/io_impl.h"
#include "models/llama/llama_moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WHAT       "Hugging Face config"
#define MAX_CONFIG (1 << 20)

typedef struct {
    const mt_json *j;
    const char    *path;
} cfg_rd;

/* Member `key` as an integer in [lo, hi] into *v; `dflt` when absent
 * (required when dflt < lo). */
static mt_status get_int(const cfg_rd *r, const char *key, int lo, int hi, int dflt, int *v) {
    const mt_json *x = mt__json_get(r->j, key);
    if (!x || x->type == MT_JSON_NULL) {
        if (dflt < lo)
            return mt_fail(MT_EFORMAT, WHAT " '%s': no %s (an integer is needed)", r->path, key);
        *v = dflt;
        return MT_OK;
    }
    if (x->type != MT_JSON_NUM || x->num != floor(x->num) || x->num < lo || x->num > hi)
        return mt_fail(MT_EFORMAT, WHAT " '%s': %s must be an integer from %d to %d", r->path,
                       key, lo, hi);
    *v = (int)x->num;
    return MT_OK;
}

static mt_status get_num(const cfg_rd *r, const char *j_key, const mt_json *obj, double dflt,
                         double *v) {
    const mt_json *x = mt__json_get(obj, j_key);
    if (!x || x->type == MT_JSON_NULL) { *v = dflt; return MT_OK; }
    if (x->type != MT_JSON_NUM || !isfinite(x->num) || x->num <= 0)
        return mt_fail(MT_EFORMAT, WHAT " '%s': %s must be a positive number", r->path, j_key);
    *v = x->num;
    return MT_OK;
}

/* A boolean member that meshtrain needs to be `want` (absent: `want`). */
static mt_status need_bool(const cfg_rd *r, const char *key, bool want, const char *why) {
    const mt_json *x = mt__json_get(r->j, key);
    if (!x || x->type == MT_JSON_NULL) return MT_OK;
    if (x->type != MT_JSON_BOOL)
        return mt_fail(MT_EFORMAT, WHAT " '%s': %s must be true or false", r->path, key);
    if (x->b != want)
        return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': %s is %s: %s", r->path, key,
                       x->b ? "true" : "false", why);
    return MT_OK;
}

/* rope_scaling: null, or llama3's or yarn's settings. */
static mt_status rope_scaling(const cfg_rd *r, mt_rope_scaling *rs) {
    memset(rs, 0, sizeof *rs);
    const mt_json *x = mt__json_get(r->j, "rope_scaling");
    if (!x || x->type == MT_JSON_NULL) return MT_OK;
    if (x->type != MT_JSON_OBJ)
        return mt_fail(MT_EFORMAT, WHAT " '%s': rope_scaling is %s, not an object or null",
                       r->path, mt__json_type_name(x->type));
    const mt_json *kind = mt__json_get(x, "rope_type");
    if (!kind) kind = mt__json_get(x, "type");   /* transformers before 4.45 */
    if (!kind || kind->type != MT_JSON_STR)
        return mt_fail(MT_EFORMAT, WHAT " '%s': rope_scaling has no rope_type", r->path);
    const bool llama3 = !strcmp(kind->str, "llama3"), yarn = !strcmp(kind->str, "yarn");
    if (!llama3 && !yarn)
        return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': rope_scaling's rope_type '%.32s' is not "
                       "computed by meshtrain (llama3, yarn)", r->path, kind->str);
    for (int i = 0; i < x->n; i++)
        if (yarn && (!strcmp(x->keys[i], "mscale") || !strcmp(x->keys[i], "mscale_all_dim")))
            return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': rope_scaling.%s (DeepSeek's YaRN) is "
                           "not computed by meshtrain", r->path, x->keys[i]);
    double f, lo, hi, L, bf, bs, af;
    mt_status s;
    if ((s = get_num(r, "factor", x, -1, &f)) != MT_OK) return s;
    if ((s = get_num(r, "original_max_position_embeddings", x, -1, &L)) != MT_OK) return s;
    if (f <= 0 || L <= 0)
        return mt_fail(MT_EFORMAT, WHAT " '%s': rope_scaling needs factor and "
                       "original_max_position_embeddings", r->path);
    if ((s = get_num(r, "low_freq_factor", x, 1, &lo)) != MT_OK ||
        (s = get_num(r, "high_freq_factor", x, 4, &hi)) != MT_OK ||
        (s = get_num(r, "beta_fast", x, 32, &bf)) != MT_OK ||
        (s = get_num(r, "beta_slow", x, 1, &bs)) != MT_OK)
        return s;
    const mt_json *a = mt__json_get(x, "attention_factor");
    af = a && a->type == MT_JSON_NUM ? a->num : 0;   /* 0: YaRN's 0.1·ln(factor) + 1 */
    *rs = (mt_rope_scaling){.kind = llama3 ? MT_ROPE_SCALING_LLAMA3 : MT_ROPE_SCALING_YARN,
                            .factor = (float)f, .low_freq_factor = (float)lo,
                            .high_freq_factor = (float)hi, .original_context = (int)L,
                            .beta_fast = (float)bf, .beta_slow = (float)bs,
                            .attn_factor = (float)af};
    if (mt_rope_scaling_check(rs) != MT_OK)
        return mt_fail(MT_EFORMAT, WHAT " '%s': rope_scaling: %s", r->path, mt_errmsg());
    return MT_OK;
}

/* The MoE blocks of Qwen3MoeForCausalLM: block l has experts where l is
 * not in mlp_only_layers and (l + 1) % decoder_sparse_step == 0
 * (Qwen3MoeDecoderLayer), which meshtrain's placement says as the first
 * MoE block and a stride (mt_llama_moe's first_dense, every): a set it
 * cannot say is refused; none leaves the model dense (experts 0). */
static bool qwen3_moe_at(int l, int step, const mt_json *only) {
    bool moe = (l + 1) % step == 0;
    for (int i = 0; moe && only && only->type == MT_JSON_ARR && i < only->n; i++)
        moe = only->kids[i]->num != l;
    return moe;
}

static mt_status qwen3_moe_layers(const cfg_rd *r, mt_llama_config *c) {
    int step;
    mt_status s = get_int(r, "decoder_sparse_step", 1, 100000, 1, &step);
    if (s != MT_OK) return s;
    const mt_json *only = mt__json_get(r->j, "mlp_only_layers");
    if (only && only->type != MT_JSON_ARR && only->type != MT_JSON_NULL)
        return mt_fail(MT_EFORMAT, WHAT " '%s': mlp_only_layers must be a list of layer "
                       "indices", r->path);
    for (int i = 0; only && only->type == MT_JSON_ARR && i < only->n; i++)
        if (only->kids[i]->type != MT_JSON_NUM || only->kids[i]->num != floor(only->kids[i]->num))
            return mt_fail(MT_EFORMAT, WHAT " '%s': mlp_only_layers[%d] is not a layer index",
                           r->path, i);
    const int L = c->n_layers;
    int first = 0, next;
    while (first < L && !qwen3_moe_at(first, step, only)) first++;
    if (first == L) {   /* no MoE block: a dense Qwen3 */
        c->moe = (mt_llama_moe){0};
        return MT_OK;
    }
    for (next = first + 1; next < L && !qwen3_moe_at(next, step, only);) next++;
    const int every = next - first;   /* one MoE block alone: the stride past the end */
    for (int l = 0; l < L; l++)
        if (qwen3_moe_at(l, step, only) != (l >= first && (l - first) % every == 0))
            return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': mlp_only_layers and "
                           "decoder_sparse_step %d make block %d %s: meshtrain's MoE blocks "
                           "are every N-th from the first (block %d, then every %d), and this "
                           "set is not", r->path, step, l,
                           qwen3_moe_at(l, step, only) ? "MoE" : "dense", first, every);
    c->moe.first_dense = first;
    c->moe.every = every;
    return MT_OK;
}

/* The mixture of experts of a Mixtral (every block: num_local_experts
 * SwiGLU experts of intermediate_size, the top num_experts_per_tok of a
 * softmax, renormalised) or a Qwen3-MoE (num_experts of
 * moe_intermediate_size, top num_experts_per_tok of a softmax over all,
 * renormalised only with norm_topk_prob: false, or absent as
 * Qwen3MoeConfig's default, is --moe-renorm off; the blocks
 * qwen3_moe_layers says). The aux loss settings are training's, not the
 * model's: left 0. */
static mt_status read_moe(const cfg_rd *r, bool mixtral, mt_llama_config *c) {
    mt_llama_moe *m = &c->moe;
    mt_status s;
    if ((s = get_int(r, mixtral ? "num_local_experts" : "num_experts", mixtral ? 1 : 0, 4096,
                     mixtral ? 8 : 128, &m->experts)) != MT_OK ||
        (s = get_int(r, "num_experts_per_tok", 1, m->experts > 0 ? m->experts : 1,
                     mixtral ? 2 : 8, &m->top_k)) != MT_OK ||
        (!mixtral && (s = get_int(r, "moe_intermediate_size", 1, 1 << 30, 768,
                                  &m->ffn_dim)) != MT_OK))
        return s;
    if (mixtral) m->ffn_dim = c->ffn_dim;   /* MixtralBlockSparseTop2MLP: intermediate_size */
    m->every = 1;
    m->route_scale = 1.0f;   /* softmax scores (score 0), the gates not scaled */
    const mt_json *jn = mt__json_get(r->j, "router_jitter_noise"),
                  *sh = mt__json_get(r->j, "shared_expert_intermediate_size");
    if (jn && jn->type == MT_JSON_NUM && jn->num != 0)
        return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': router_jitter_noise %g: meshtrain's router "
                       "takes no noise in training; give 0", r->path, jn->num);
    if (sh && sh->type == MT_JSON_NUM && sh->num != 0)
        return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': shared_expert_intermediate_size %g: a "
                       "gated shared expert (Qwen2-MoE's) is not computed by meshtrain",
                       r->path, sh->num);
    if (m->experts == 0) *m = (mt_llama_moe){0};   /* Qwen3-MoE of no experts: a Qwen3 */
    if (mixtral || m->experts == 0) return MT_OK;
    const mt_json *norm = mt__json_get(r->j, "norm_topk_prob");
    if (norm && norm->type != MT_JSON_BOOL)
        return mt_fail(MT_EFORMAT, WHAT " '%s': norm_topk_prob must be true or false", r->path);
    m->renorm_off = !norm || !norm->b;   /* Qwen3MoeConfig's default: false */
    return qwen3_moe_layers(r, c);
}

static mt_status read_fields(const cfg_rd *r, mt_llama_config *c) {
    const mt_json *arch = mt__json_get(r->j, "architectures");
    const char *a = arch && arch->type == MT_JSON_ARR && arch->n == 1 &&
                            arch->kids[0]->type == MT_JSON_STR ? arch->kids[0]->str : NULL;
    if (!a)
        return mt_fail(MT_EFORMAT, WHAT " '%s': architectures must name one model class",
                       r->path);
    const bool qwen2 = !strcmp(a, "Qwen2ForCausalLM"), qwen3 = !strcmp(a, "Qwen3ForCausalLM"),
               mixtral = !strcmp(a, "MixtralForCausalLM"),
               qwen3_moe = !strcmp(a, "Qwen3MoeForCausalLM");
    if (strcmp(a, "LlamaForCausalLM") && strcmp(a, "MistralForCausalLM") && !qwen2 && !qwen3 &&
        !mixtral && !qwen3_moe)
        return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': architecture '%.64s' is not read yet "
                       "(LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                       "Qwen3ForCausalLM, MixtralForCausalLM, Qwen3MoeForCausalLM)", r->path, a);
    memset(c, 0, sizeof *c);
    c->qkv_bias = qwen2;   /* Qwen2Attention: q, k, v with biases, o without, always */
    c->qk_norm = qwen3 || qwen3_moe;   /* Qwen3Attention: q_norm and k_norm over head_dim */
    const int BIG = 1 << 30;
    mt_status s;
    if ((s = get_int(r, "hidden_size", 1, BIG, -1, &c->dim)) != MT_OK ||
        (s = get_int(r, "intermediate_size", 1, BIG, -1, &c->ffn_dim)) != MT_OK ||
        (s = get_int(r, "num_hidden_layers", 1, 100000, -1, &c->n_layers)) != MT_OK ||
        (s = get_int(r, "num_attention_heads", 1, 65536, -1, &c->n_heads)) != MT_OK ||
        (s = get_int(r, "num_key_value_heads", 1, 65536, c->n_heads, &c->n_kv_heads)) != MT_OK ||
        (s = get_int(r, "vocab_size", 1, BIG, -1, &c->vocab)) != MT_OK ||
        (s = get_int(r, "max_position_embeddings", 1, BIG, -1, &c->max_seq)) != MT_OK ||
        (s = get_int(r, "head_dim", 1, 65536, qwen3 ? 128 : c->dim / c->n_heads,
                     &c->head_dim)) != MT_OK)   /* Qwen3Config's default: 128 */
        return s;
    double theta, eps;
    if ((s = get_num(r, "rope_theta", r->j, 10000.0, &theta)) != MT_OK ||
        (s = get_num(r, "rms_norm_eps", r->j, 1e-6, &eps)) != MT_OK)
        return s;
    c->rope_theta = (float)theta;
    c->norm_eps = (float)eps;
    const mt_json *tie = mt__json_get(r->j, "tie_word_embeddings");
    if (tie && tie->type != MT_JSON_BOOL && tie->type != MT_JSON_NULL)
        return mt_fail(MT_EFORMAT, WHAT " '%s': tie_word_embeddings must be true or false",
                       r->path);
    c->tie_embeddings = tie && tie->type == MT_JSON_BOOL && tie->b;
    c->multiple_of = 1;
    c->ffn_mult = 1.0f;
    const mt_json *act = mt__json_get(r->j, "hidden_act");
    if (act && (act->type != MT_JSON_STR || strcmp(act->str, "silu")))
        return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': hidden_act '%.32s': meshtrain's LLaMA "
                       "runs SwiGLU (silu)", r->path, act->type == MT_JSON_STR ? act->str : "?");
    if ((!qwen2 && (s = need_bool(r, "attention_bias", false, "meshtrain's LLaMA has no q, "
                                  "k, v, o biases but Qwen2's q, k, v ones")) != MT_OK) ||
        (s = need_bool(r, "mlp_bias", false, "meshtrain's LLaMA has no MLP biases")) != MT_OK)
        return s;
    /* Qwen's sliding_window holds a size use_sliding_window may leave off */
    const mt_json *sw = mt__json_get(r->j, "sliding_window"),
                  *use = mt__json_get(r->j, "use_sliding_window");
    if (use && use->type != MT_JSON_BOOL && use->type != MT_JSON_NULL)
        return mt_fail(MT_EFORMAT, WHAT " '%s': use_sliding_window must be true or false",
                       r->path);
    const bool windowed = !use || use->type != MT_JSON_BOOL || use->b;
    if (windowed && sw && sw->type == MT_JSON_NUM && sw->num < c->max_seq)
        return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': sliding_window %.0f is shorter than the "
                       "context (%d): meshtrain's attention is not windowed", r->path, sw->num,
                       c->max_seq);
    if (c->n_heads % c->n_kv_heads)
        return mt_fail(MT_EFORMAT, WHAT " '%s': %d attention heads do not divide into %d kv "
                       "heads", r->path, c->n_heads, c->n_kv_heads);
    if (c->head_dim % 2)
        return mt_fail(MT_EFORMAT, WHAT " '%s': head_dim %d is odd (RoPE rotates pairs)",
                       r->path, c->head_dim);
    if ((mixtral || qwen3_moe) && (s = read_moe(r, mixtral, c)) != MT_OK) return s;
    return rope_scaling(r, &c->rope_scaling);
}

static mt_status read_gpt2_fields(const cfg_rd *r, mt_gpt_config *c) {
    const mt_json *arch = mt__json_get(r->j, "architectures");
    const char *a = arch && arch->type == MT_JSON_ARR && arch->n == 1 &&
                            arch->kids[0]->type == MT_JSON_STR ? arch->kids[0]->str : NULL;
    if (!a || strcmp(a, "GPT2LMHeadModel"))
        return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': architecture '%.64s' is not "
                       "GPT2LMHeadModel", r->path, a ? a : "(none)");
    memset(c, 0, sizeof *c);
    const int BIG = 1 << 30;
    int ctx = 0, inner = 0;
    mt_status s;
    if ((s = get_int(r, "n_embd", 1, BIG, -1, &c->C)) != MT_OK ||
        (s = get_int(r, "n_layer", 1, 100000, -1, &c->L)) != MT_OK ||
        (s = get_int(r, "n_head", 1, 65536, -1, &c->NH)) != MT_OK ||
        (s = get_int(r, "vocab_size", 1, BIG, -1, &c->V)) != MT_OK ||
        (s = get_int(r, "n_ctx", 1, BIG, 1, &ctx)) != MT_OK ||
        (s = get_int(r, "n_positions", 1, BIG, ctx, &c->maxT)) != MT_OK ||
        (s = get_int(r, "n_inner", 1, BIG, 4 * c->C, &inner)) != MT_OK)
        return s;
    if (inner != 4 * c->C)
        return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': n_inner %d: meshtrain's GPT's MLP is 4 · "
                       "n_embd = %d wide", r->path, inner, 4 * c->C);
    if (c->C % c->NH)
        return mt_fail(MT_EFORMAT, WHAT " '%s': n_embd %d does not divide into %d heads",
                       r->path, c->C, c->NH);
    double eps;
    if ((s = get_num(r, "layer_norm_epsilon", r->j, 1e-5, &eps)) != MT_OK) return s;
    if (fabs(eps - 1e-5) > 1e-12)
        return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': layer_norm_epsilon %g: meshtrain's "
                       "LayerNorm adds 1e-5", r->path, eps);
    const mt_json *act = mt__json_get(r->j, "activation_function");
    if (act && (act->type != MT_JSON_STR ||
                (strcmp(act->str, "gelu_new") && strcmp(act->str, "gelu_pytorch_tanh"))))
        return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': activation_function '%.32s': meshtrain's "
                       "GPT runs GELU's tanh form (gelu_new)", r->path,
                       act->type == MT_JSON_STR ? act->str : "?");
    if ((s = need_bool(r, "tie_word_embeddings", true, "meshtrain's GPT ties its head to the "
                       "embedding")) != MT_OK ||
        (s = need_bool(r, "scale_attn_by_inverse_layer_idx", false, "meshtrain's attention "
                       "scales by 1/sqrt(head size) alone")) != MT_OK ||
        (s = need_bool(r, "scale_attn_weights", true, "meshtrain's attention scales by "
                       "1/sqrt(head size)")) != MT_OK ||
        (s = need_bool(r, "add_cross_attention", false, "meshtrain's GPT is a decoder "
                       "alone")) != MT_OK)
        return s;
    c->Vp = (c->V + 63) / 64 * 64;   /* meshtrain's padding (train/models/gpt.c) */
    return MT_OK;
}

/* dir/config.json parsed and handed to `fields` with cfg. */
static mt_status read_config(const char *dir, mt_status (*fields)(const cfg_rd *, void *),
                             void *cfg) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    mt_json *j = NULL;
    mt_status s = mt__json_read_file(path, WHAT, MAX_CONFIG, true, &j);
    if (s == MT_OK) s = fields(&(cfg_rd){j, path}, cfg);
    mt__json_free(j);
    return s;
}

static mt_status llama_fields(const cfg_rd *r, void *c) { return read_fields(r, c); }
static mt_status gpt2_fields(const cfg_rd *r, void *c) { return read_gpt2_fields(r, c); }

mt_status mt_hf_read_llama_config(const char *dir, mt_llama_config *cfg) {
    return read_config(dir, llama_fields, cfg);
}

mt_status mt_hf_read_gpt2_config(const char *dir, mt_gpt_config *cfg) {
    return read_config(dir, gpt2_fields, cfg);
}

/* cfg's mixture with its defaults (F_e the dense F where 0). */
static mt_llama_moe moe_resolved(const mt_llama_config *c) {
    return mt__llama_moe_resolved(c, mt_llama_ffn_dim(c));
}

/* config.json's text for cfg, to f. */
static mt_status write_config(FILE *f, void *arg) {
    const mt_llama_config *c = arg;
    const bool moe = c->moe.experts > 0;
    const mt_llama_moe m = moe_resolved(c);
    const char *arch = moe ? (c->qk_norm ? "Qwen3MoeForCausalLM" : "MixtralForCausalLM")
                       : c->qk_norm ? "Qwen3ForCausalLM"
                       : c->qkv_bias ? "Qwen2ForCausalLM" : "LlamaForCausalLM";
    const char *type = moe ? (c->qk_norm ? "qwen3_moe" : "mixtral")
                       : c->qk_norm ? "qwen3" : c->qkv_bias ? "qwen2" : "llama";
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n"
            "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n"
            "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n"
            "  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n  \"vocab_size\": %d,\n"
            "  \"max_position_embeddings\": %d,\n  \"rope_theta\": %.9g,\n"
            "  \"rms_norm_eps\": %.9g,\n  \"tie_word_embeddings\": %s,\n"
            "  \"hidden_act\": \"silu\",\n  \"attention_bias\": false,\n  \"mlp_bias\": false,\n"
            "  \"use_sliding_window\": false,\n"
            "  \"torch_dtype\": \"float32\",\n", arch, type, c->dim,
            moe && !c->qk_norm ? m.ffn_dim : mt_llama_ffn_dim(c), c->n_layers,
            c->n_heads, c->n_kv_heads, mt_llama_head_dim(c), c->vocab, c->max_seq,
            c->rope_theta, c->norm_eps, c->tie_embeddings ? "true" : "false");
    if (moe && c->qk_norm) {   /* Qwen3-MoE: the MoE blocks as mlp_only_layers says */
        fprintf(f, "  \"num_experts\": %d,\n  \"num_experts_per_tok\": %d,\n"
                "  \"moe_intermediate_size\": %d,\n  \"norm_topk_prob\": %s,\n"
                "  \"decoder_sparse_step\": 1,\n  \"mlp_only_layers\": [", m.experts, m.top_k,
                m.ffn_dim, m.renorm_off ? "false" : "true");
        for (int l = 0, n = 0; l < c->n_layers; l++)
            if (!mt_llama_moe_block(c, l)) fprintf(f, "%s%d", n++ ? ", " : "", l);
        fprintf(f, "],\n  \"output_router_logits\": false,\n");
    } else if (moe)   /* Mixtral: every block */
        fprintf(f, "  \"num_local_experts\": %d,\n  \"num_experts_per_tok\": %d,\n"
                "  \"router_jitter_noise\": 0.0,\n  \"output_router_logits\": false,\n",
                m.experts, m.top_k);
    const mt_rope_scaling *r = &c->rope_scaling;
    if (r->kind == MT_ROPE_SCALING_LLAMA3)
        fprintf(f, "  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %.9g, "
                "\"low_freq_factor\": %.9g, \"high_freq_factor\": %.9g, "
                "\"original_max_position_embeddings\": %d}\n}\n", r->factor, r->low_freq_factor,
                r->high_freq_factor, r->original_context);
    else if (r->kind == MT_ROPE_SCALING_YARN)
        fprintf(f, "  \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": %.9g, "
                "\"original_max_position_embeddings\": %d, \"beta_fast\": %.9g, "
                "\"beta_slow\": %.9g%s", r->factor, r->original_context, r->beta_fast,
                r->beta_slow, r->attn_factor > 0 ? ", \"attention_factor\": " : "}\n}\n");
    else
        fprintf(f, "  \"rope_scaling\": null\n}\n");
    if (r->kind == MT_ROPE_SCALING_YARN && r->attn_factor > 0)
        fprintf(f, "%.9g}\n}\n", r->attn_factor);
    return MT_OK;
}

static mt_status write_gpt2_config(FILE *f, void *arg) {
    const mt_gpt_config *c = arg;
    fprintf(f, "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
            "  \"n_embd\": %d,\n  \"n_layer\": %d,\n  \"n_head\": %d,\n  \"n_positions\": %d,\n"
            "  \"n_ctx\": %d,\n  \"vocab_size\": %d,\n  \"n_inner\": null,\n"
            "  \"layer_norm_epsilon\": 1e-05,\n  \"activation_function\": \"gelu_new\",\n"
            "  \"tie_word_embeddings\": true,\n  \"scale_attn_weights\": true,\n"
            "  \"torch_dtype\": \"float32\"\n}\n", c->C, c->L, c->NH, c->maxT, c->maxT, c->V);
    return MT_OK;
}

/* dir/config.json written by `write` through a claim. */
static mt_status write_file(const char *dir, mt_status (*write)(FILE *, void *), void *cfg) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    mt_output *o = NULL;
    mt_status s = mt_output_claim(path, WHAT, &o);
    if (s == MT_OK) s = mt_output_write(o, write, cfg);
    mt_output_close(o);
    return s;
}

mt_status mt_hf_llama_writable(const char *dir, const mt_llama_config *cfg) {
    if (cfg->qkv_bias && cfg->qk_norm)   /* Qwen3's attention_bias adds o_proj's too */
        return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': q, k, v biases with q and k norms is no "
                       "Hugging Face architecture (Qwen2 has the biases, Qwen3 the norms); "
                       "drop --qkv-bias or --qk-norm", dir);
    if (cfg->moe.experts == 0) return MT_OK;
    const mt_llama_moe m = moe_resolved(cfg);
    const char *no = cfg->qkv_bias ? "q, k, v biases (Qwen2-MoE's, whose shared expert is "
                                     "gated: not built); drop --qkv-bias"
                     : m.shared ? "shared experts (--moe-shared; Mixtral and Qwen3-MoE have none)"
                     : m.score ? "sigmoid scores (--moe-score sigmoid; Mixtral and Qwen3-MoE "
                                 "take a softmax)"
                     : m.route_scale != 1.0f ? "a route scale (--moe-route-scale; Mixtral and "
                                               "Qwen3-MoE gates are not scaled)"
                     : !cfg->qk_norm && (m.first_dense || m.every > 1)
                         ? "dense blocks (--moe-first-dense, --moe-every; Mixtral's are all "
                           "MoE, Qwen3-MoE's may be dense: add --qk-norm)"
                     : !cfg->qk_norm && m.renorm_off
                         ? "gates not renormalised (--moe-renorm off; Mixtral's are, "
                           "Qwen3-MoE's may not be: add --qk-norm)"
                     : cfg->moe.bias_update > 0.0f
                         ? "an aux-loss-free router bias (--moe-bias-update; neither Mixtral nor "
                           "Qwen3-MoE routes with one, so the model written would choose other "
                           "experts than the one trained)"
                         : NULL;
    if (no)
        return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': a mixture of experts with %s: no Hugging "
                       "Face architecture meshtrain writes (MixtralForCausalLM, "
                       "Qwen3MoeForCausalLM with --qk-norm) holds it", dir, no);
    return MT_OK;
}

mt_status mt__hf_write_llama_config(const char *dir, const mt_llama_config *cfg) {
    mt_status s = mt_hf_llama_writable(dir, cfg);
    return s != MT_OK ? s : write_file(dir, write_config, (void *)cfg);
}

mt_status mt__hf_write_gpt2_config(const char *dir, const mt_gpt_config *cfg) {
    return write_file(dir, write_gpt2_config, (void *)cfg);
}
