/*
 * llama.c — the LLaMA model's entry in the trainer's table of models
 * (train_impl.h documents each member; model_table.c registers it as
 * MT_MODEL_LLAMA, "llama"): its flags, presets and defaults, its checks,
 * its data (a token dataset, as the GPT's), llama2.c's model.bin as its
 * llm.c-family file (the format: io/llama2c.c), its description read back
 * for sampling, what tensor parallelism needs to divide, its pipeline
 * stages, and the facts the planner reads. The builder is src/models/llama/.
 */
#include "train/train_impl.h"
#include "models/llama/llama_moe.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Settings                                                                  */
/* ======================================================================== */

/* A small model: F from Llama's rule (multiple_of 32 as llama2.c: 192), V
 * from the data. */
/* Dense (moe all zero: with --moe-experts E alone, top-2 of a softmax,
 * experts of the dense F, every block MoE, no aux loss or z-loss). */
const mt_llama_config mt__llama_defaults = {
    .dim = 64, .ffn_dim = 0, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab = 0,
    .max_seq = 64, .rope_theta = 10000.0f, .norm_eps = 1e-5f, .tie_embeddings = 0,
    .multiple_of = 32, .ffn_mult = 1.0f,
    .rope_scaling = MT_LLAMA31_ROPE_SCALING(MT_ROPE_SCALING_NONE),
};

static mt_status preset(const char *name, void *mc) { return mt_llama_preset(name, mc); }

/* --moe-layers first-dense=N,every=M (the and Megatron's way of
 * saying which blocks are MoE): the two settings --moe-first-dense and
 * --moe-every set, each key optional, applied after --preset and before
 * the flags that set one of them. */
static mt_status moe_layers(const char *spec, void *mc) {
    static const struct { const char *key; size_t at; } KEYS[] = {
        {"first-dense", offsetof(mt_llama_config, moe.first_dense)},
        {"every", offsetof(mt_llama_config, moe.every)},
    };
    for (const char *p = spec; p && *p;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        size_t k = 0;
        while (eq && k < 2 && !(strlen(KEYS[k].key) == (size_t)(eq - p) &&
                                !strncmp(p, KEYS[k].key, (size_t)(eq - p))))
            k++;
        char *end = NULL;
        long v = eq && k < 2 ? strtol(eq + 1, &end, 10) : -1;
        if (!eq || k == 2 || end == eq + 1 || end != p + len || v < 0 || v > 1000)
            return mt_fail(MT_EINVAL, "'%.*s' in '%s': give first-dense=N and/or every=N, "
                           "N from 0 to 1000, separated by commas (first-dense=3,every=1)",
                           (int)len, p, spec);
        *(int *)((char *)mc + KEYS[k].at) = (int)v;
        p += len + (p[len] == ',');
    }
    return MT_OK;
}

#define INT_FLAG(f, fld, member, lo, hi, auto0, help) \
    {f, fld, offsetof(mt_llama_config, member), lo, hi, auto0, "N", help, MT_MODEL_FLAG_INT, \
     0.0f, 0.0f, NULL, NULL}
#define FLOAT_FLAG(f, fld, member, lo, hi, help) \
    {f, fld, offsetof(mt_llama_config, member), 0, 0, false, "X", help, MT_MODEL_FLAG_FLOAT, \
     lo, hi, NULL, NULL}
/* a float setting of --rope-scaling's (shown in a settings line only with it) */
#define ROPE_FLAG(f, fld, member, lo, hi, help) \
    {f, fld, offsetof(mt_llama_config, member), 0, 0, false, "X", help, MT_MODEL_FLAG_FLOAT, \
     lo, hi, NULL, "rope-scaling"}
/* a setting of the mixture of experts (shown with --moe-experts only) */
#define MOE_INT(f, fld, member, lo, hi, help) \
    {f, fld, offsetof(mt_llama_config, moe.member), lo, hi, false, "N", help, \
     MT_MODEL_FLAG_INT, 0.0f, 0.0f, NULL, "moe-experts"}
#define MOE_FLOAT(f, fld, member, lo, hi, help) \
    {f, fld, offsetof(mt_llama_config, moe.member), 0, 0, false, "X", help, \
     MT_MODEL_FLAG_FLOAT, lo, hi, NULL, "moe-experts"}
static const mt_model_flag LLAMA_FLAGS[] = {
    {"preset", "preset", 0, 0, 0, false, "NAME",
     "published shape (llama3-8b, llama3-70b, llama3-405b, llama3.1-8b, llama3.1-70b, "
     "llama3.1-405b, llama2-7b, llama2-13b, tinyllama-1.1b, stories15m, stories110m; "
     "moe-tiny, a small mixture of experts; mixtral-8x7b, mixtral-8x22b, qwen3-30b-a3b, "
     "qwen3-235b-a22b; qwen2.5-7b, qwen3-8b), the "
     "other flags over it",
     MT_MODEL_FLAG_PRESET, 0.0f, 0.0f, preset, NULL},
    INT_FLAG("layers", "L", n_layers, 1, 1000, false, "blocks L"),
    INT_FLAG("channels", "C", dim, 1, 65536, false, "width C (dim)"),
    INT_FLAG("heads", "NH", n_heads, 1, 1024, false,
             "query heads NH (C/NH even, unless --head-dim is given)"),
    INT_FLAG("kv-heads", "KV", n_kv_heads, 1, 1024, false, "kv heads KV (NH % KV == 0)"),
    INT_FLAG("ffn-dim", "F", ffn_dim, 0, 1 << 20, true,
             "SwiGLU hidden size F (0: Llama's rule from --multiple-of, --ffn-mult)"),
    INT_FLAG("multiple-of", "multiple_of", multiple_of, 1, 1 << 16, false,
             "with --ffn-dim 0: F rounded up to a multiple of this"),
    FLOAT_FLAG("ffn-mult", "ffn_mult", ffn_mult, 0.01f, 100.0f,
               "with --ffn-dim 0: Llama 3's ffn_dim_multiplier"),
    INT_FLAG("max-seq", "maxT", max_seq, 1, 1 << 20, false, "context length maxT"),
    INT_FLAG("vocab", "V", vocab, 0, 1 << 24, true, "vocabulary V (0: from the data)"),
    FLOAT_FLAG("rope-theta", "theta", rope_theta, 2.0f, 1e9f, "RoPE base (Llama 3: 500000)"),
    FLOAT_FLAG("norm-eps", "eps", norm_eps, 1e-12f, 0.1f, "RMSNorm epsilon"),
    {"tie-embeddings", "tie", offsetof(mt_llama_config, tie_embeddings), 0, 1, false, "",
     "the LM head is the token embedding", MT_MODEL_FLAG_BOOL, 0.0f, 0.0f, NULL, NULL},
    /* last, so that the settings line (cli_model_flags_describe) of a model
     * without it reads as before, with hd= at its end */
    INT_FLAG("head-dim", "hd", head_dim, 0, 1 << 16, true,
             "head size HS, even; q is NH·HS wide, k and v KV·HS (0: C/NH)"),
    /* RoPE's frequency scaling (meshtrain/graph.h's mt_rope_scaling); after
     * hd=, for the same reason */
    {"rope-scaling", "rope", offsetof(mt_llama_config, rope_scaling.kind), 0, 2, false,
     "none|llama3|yarn", "RoPE frequency scaling past the trained context: Llama 3.1's rule "
     "or YaRN", MT_MODEL_FLAG_CHOICE, 0.0f, 0.0f, NULL, NULL},
    ROPE_FLAG("rope-factor", "rope_factor", rope_scaling.factor, 1.0f, 1e6f,
               "with --rope-scaling: the context's extension s (Llama 3.1: 8)"),
    ROPE_FLAG("rope-low-freq-factor", "rope_low", rope_scaling.low_freq_factor, 1e-6f, 1e6f,
               "llama3: wavelengths past original/this are divided by s (Llama 3.1: 1)"),
    ROPE_FLAG("rope-high-freq-factor", "rope_high", rope_scaling.high_freq_factor, 1e-6f,
               1e6f, "llama3: wavelengths below original/this are kept (Llama 3.1: 4)"),
    {"rope-original-context", "rope_orig", offsetof(mt_llama_config,
     rope_scaling.original_context), 0, 1 << 24, false, "N",
     "with --rope-scaling: the context trained on (Llama 3.1: 8192)", MT_MODEL_FLAG_INT, 0.0f,
     0.0f, NULL, "rope-scaling"},
    ROPE_FLAG("rope-beta-fast", "beta_fast", rope_scaling.beta_fast, 1e-6f, 1e6f,
               "yarn: rotations over the original context where the ramp starts (32)"),
    ROPE_FLAG("rope-beta-slow", "beta_slow", rope_scaling.beta_slow, 1e-6f, 1e6f,
               "yarn: rotations where it ends, all frequencies divided by s past it (1)"),
    ROPE_FLAG("rope-attn-factor", "rope_attn", rope_scaling.attn_factor, 0.0f, 100.0f,
               "yarn: q and k multiplied by it (0: YaRN's 0.1 ln(s) + 1)"),
    /* the mixture of experts (mt_llama_moe), last: a settings line shows
     * them only with --moe-experts, so a dense model's reads as before */
    MOE_INT("moe-experts", "E", experts, 0, 4096, "routed experts E of the MoE blocks (0: "
            "dense)"),
    MOE_INT("moe-top-k", "k", top_k, 0, 4096, "experts a token takes (0: 2)"),
    MOE_INT("moe-ffn-dim", "F_e", ffn_dim, 0, 1 << 20, "each expert's SwiGLU hidden size (0: "
            "the dense F)"),
    MOE_INT("moe-shared", "shared", shared, 0, 64, "shared experts every token takes (one "
            "dense SwiGLU of shared·F_e)"),
    MOE_INT("moe-first-dense", "first_dense", first_dense, 0, 1000, "the first blocks stay "
            "dense (DeepSeek-V3: 3)"),
    MOE_INT("moe-every", "every", every, 0, 1000, "from there every N-th block is MoE (0: 1)"),
    {"moe-layers", "moe_layers", 0, 0, 0, false, "first-dense=N,every=M",
     "which blocks are MoE, both at once (--moe-first-dense and --moe-every over it)",
     MT_MODEL_FLAG_PRESET, 0.0f, 0.0f, moe_layers, NULL},
    {"moe-score", "score", offsetof(mt_llama_config, moe.score), 0, 1, false,
     "softmax|sigmoid", "router scores: softmax (Mixtral) or sigmoid (DeepSeek-V3), gates "
     "renormalised over the k", MT_MODEL_FLAG_CHOICE, 0.0f, 0.0f, NULL, "moe-experts"},
    MOE_FLOAT("moe-route-scale", "route_scale", route_scale, 0.0f, 1e3f,
              "the gates' factor (0: 1; DeepSeek-V3: 2.5)"),
    MOE_FLOAT("moe-aux-alpha", "alpha", aux_alpha, 0.0f, 10.0f, "aux loss α, Megatron's "
              "normalisation (α at balance), per sequence (0: none; Switch: 0.01)"),
    MOE_FLOAT("moe-z-beta", "beta", z_beta, 0.0f, 10.0f, "router z-loss β (ST-MoE: 1e-3)"),
    MOE_FLOAT("moe-bias-update", "bias_gamma", bias_update, 0.0f, 1.0f, "aux-loss-free "
              "balancing: a router bias that only chooses, moved γ·sign(mean − load) after "
              "each step (0: none; DeepSeek-V3: 1e-3)"),
    MOE_FLOAT("moe-capacity", "capacity", capacity, 0.0f, 64.0f, "capacity factor cf: an "
              "expert takes at most ⌈(T·k/E)·cf⌉ pairs of a sequence, the rest dropped (0: "
              "dropless; Switch: 1.25)"),
    {"moe-renorm", "renorm", offsetof(mt_llama_config, moe.renorm_off), 0, 1, false, "on|off",
     "the gates over the k selected scores' sum (on: Mixtral), or the scores themselves (off: "
     "Qwen3-MoE's norm_topk_prob false)", MT_MODEL_FLAG_CHOICE, 0.0f, 0.0f, NULL, "moe-experts"},
    {"moe-drop", "drop", offsetof(mt_llama_config, moe.drop), 0, 1, false, "position|gate",
     "which pairs an expert past its capacity keeps: the earliest, or the highest-gated",
     MT_MODEL_FLAG_CHOICE, 0.0f, 0.0f, NULL, "moe-experts"},
    /* Qwen's attention, last and shown only when on: a Llama's settings line
     * reads as before */
    {"qkv-bias", "qkv_bias", offsetof(mt_llama_config, qkv_bias), 0, 1, false, "",
     "q, k and v projections with biases (Qwen2)", MT_MODEL_FLAG_BOOL, 0.0f, 0.0f, NULL,
     "qkv-bias"},
    {"qk-norm", "qk_norm", offsetof(mt_llama_config, qk_norm), 0, 1, false, "",
     "q and k RMS-normalised over each head before RoPE (Qwen3)", MT_MODEL_FLAG_BOOL, 0.0f,
     0.0f, NULL, "qk-norm"},
};
#undef INT_FLAG
#undef FLOAT_FLAG
#undef ROPE_FLAG
#undef MOE_INT
#undef MOE_FLOAT

/* c's LLaMA settings: its own, or the defaults (model_config NULL). */
static const mt_llama_config *llama_of(const mt_train_config *c) {
    return c->model_config ? c->model_config : &mt__llama_defaults;
}

/* The settings a build reads: F resolved from the rule, HS from C/NH. */
static mt_llama_config llama_built(const mt_train_config *c) {
    mt_llama_config m = *llama_of(c);
    m.ffn_dim = mt_llama_ffn_dim(&m);
    m.head_dim = mt_llama_head_dim(&m);
    m.doc_mask = c->doc_mask;   /* the trainer's --doc-mask */
    return m;
}

static void llama_without_data(const mt_train_config *c, void *mc) {
    mt_llama_config *m = mc;
    m->vocab = 256;   /* a text file's bytes */
    m->max_seq = c->T;
}

/* llama2.c's model.bin stores neither RoPE's theta nor RMSNorm's epsilon
 * nor the head size: its run.c fixes them at 10000, 1e-5 and dim/n_heads,
 * so a model with others can be neither read from (--llmc-in) nor written
 * to (--llmc-out) one; said before step 1 rather than by the save after
 * the last. (With --llmc-in the sizes are the file's: llama_open compares
 * --head-dim with its C/NH.) */
static mt_status llama2c_can_hold(const mt_train_config *c) {
    const mt_llama_config *m = llama_of(c);
    const char *path = c->llmc_out ? c->llmc_out : c->llmc_in;
    const char *flag = c->llmc_out ? "--llmc-out" : "--llmc-in";
    if (!path) return MT_OK;
    if (m->moe.experts > 0)
        return mt_fail(MT_EUNSUPPORTED, "%s '%s' is llama2.c's model.bin, which holds dense "
                       "LLaMAs only (its run.c has no router or experts), but this model has "
                       "--moe-experts %d; save a meshtrain checkpoint (--ckpt-out) instead, or "
                       "drop %s", flag, path, m->moe.experts, flag);
    if (m->qkv_bias || m->qk_norm)
        return mt_fail(MT_EUNSUPPORTED, "%s '%s' is llama2.c's model.bin, whose run.c has "
                       "no q, k, v biases and no q, k norms, but this model has %s; save a "
                       "meshtrain checkpoint (--ckpt-out) or a Hugging Face directory "
                       "(--hf-out) instead, or drop %s", flag, path,
                       m->qkv_bias ? "--qkv-bias" : "--qk-norm", flag);
    if (c->llmc_out && !c->llmc_in && m->head_dim > 0 && m->n_heads > 0 &&
        (m->dim % m->n_heads != 0 || m->head_dim != m->dim / m->n_heads))
        return mt_fail(MT_EUNSUPPORTED, "--llmc-out '%s' is llama2.c's model.bin, whose run.c "
                       "takes the head size as dim / n_heads (--channels %d / --heads %d), but "
                       "this model has --head-dim %d; drop --head-dim (or make it C/NH) or "
                       "drop --llmc-out", c->llmc_out, m->dim, m->n_heads, m->head_dim);
    if (m->rope_theta != 10000.0f)
        return mt_fail(MT_EUNSUPPORTED, "%s '%s' is llama2.c's model.bin, whose run.c rotates "
                       "with RoPE theta 10000, but this model has --rope-theta %g; give "
                       "--rope-theta 10000 or drop %s", flag, path, (double)m->rope_theta, flag);
    if (m->rope_scaling.kind != MT_ROPE_SCALING_NONE)
        return mt_fail(MT_EUNSUPPORTED, "%s '%s' is llama2.c's model.bin, whose run.c rotates "
                       "without frequency scaling, but this model has --rope-scaling %s; give "
                       "--rope-scaling none or drop %s", flag, path,
                       mt_rope_scaling_name(m->rope_scaling.kind), flag);
    if (m->norm_eps != 1e-5f)
        return mt_fail(MT_EUNSUPPORTED, "%s '%s' is llama2.c's model.bin, whose run.c's RMSNorm "
                       "adds epsilon 1e-5, but this model has --norm-eps %g; give --norm-eps "
                       "1e-5 or drop %s", flag, path, (double)m->norm_eps, flag);
    return MT_OK;
}

/* A MoE model m trains on every axis (docs/moe.md: expert splits the
 * experts, E over it; tensor their columns; context and pipe as for a
 * dense model), but for a capacity on a context axis, refused here.
 * With --hf-in, m is the directory's (llama_open checks it). */
static mt_status moe_mesh_check(const mt_train_config *c, const mt_llama_config *m) {
    int n = 0;
    mt_mesh *mesh = NULL;
    if (!c->mesh || !c->mesh[0] || mt_mesh_spec_devices(c->mesh, &n) != MT_OK ||
        mt_mesh_create(c->mesh, n, &mesh) != MT_OK)
        return MT_OK;   /* a malformed mesh: the configuration's check says so */
    const int ep = mt_mesh_axis_size(mesh, "expert");
    if (m->moe.experts == 0) {
        mt_mesh_free(mesh);
        return ep > 1 ? mt_fail(MT_EINVAL, "mesh '%s': the expert axis splits a mixture's "
                                "experts, and this LLaMA is dense; give --moe-experts E (a "
                                "multiple of %d), or name the axis data", c->mesh, ep)
                      : MT_OK;
    }
    mt_status s = MT_OK;
    if (m->moe.capacity > 0.0f && mt_mesh_axis_size(mesh, "context") > 1)
        s = mt_fail(MT_EUNSUPPORTED, "--moe-capacity %g on mesh '%s': a capacity's groups are "
                    "whole sequences in position order, and the context axis splits each "
                    "sequence in head-tail order; train dropless (--moe-capacity 0) on a context "
                    "axis, or drop the context axis", (double)m->moe.capacity, c->mesh);
    if (s == MT_OK && ep > 1 && m->moe.experts % ep != 0)
        s = mt_fail(MT_EINVAL, "--moe-experts %d on mesh '%s': the expert axis splits the %d "
                    "experts over expert=%d, which does not divide them; pick an expert axis "
                    "that divides %d", m->moe.experts, c->mesh, m->moe.experts, ep,
                    m->moe.experts);
    mt_mesh_free(mesh);
    return s;
}

static mt_status llama_check(const mt_train_config *c) {
    mt_status s = mt__train_needs_data(c, "LLaMA");
    if (s != MT_OK || (s = llama2c_can_hold(c)) != MT_OK ||
        (!c->hf_in && (s = moe_mesh_check(c, llama_of(c))) != MT_OK))
        return s;
    /* what --hf-out cannot write, said before step 1 (with --hf-in the
     * directory's config: its save refuses what this cannot see) */
    if (c->hf_out && !c->hf_in && (s = mt_hf_llama_writable(c->hf_out, llama_of(c))) != MT_OK)
        return s;
    if (c->llmc_in || c->hf_in) return MT_OK;   /* the sizes are the file's: open checks them */
    mt_llama_config m = *llama_of(c);
    if (m.vocab == 0) m.vocab = 1;   /* from the data: a stand-in that passes */
    if ((s = mt_llama_config_check(&m)) != MT_OK) return s;
    if (c->T > m.max_seq)
        return mt_fail(MT_EINVAL, "sequence length T=%d (--seq) exceeds the model's context "
                       "maxT=%d (--max-seq); lower T or raise maxT", c->T, m.max_seq);
    return MT_OK;
}

static mt_status llama_llmc_read(const char *path, void *mc);

/* Takes the model from llmc_in (llama2.c's model.bin), V from the data
 * where 0, F from Llama's rule where 0. */
static mt_status llama_open(mt_train_config *c, void *mc, mt_dataset **ds) {
    mt_llama_config *m = mc;
    const int asked_hd = m->head_dim;   /* the file's HS is its C/NH */
    mt_status s;
    if (c->llmc_in && (s = llama_llmc_read(c->llmc_in, m)) != MT_OK) return s;
    if (c->hf_in) {   /* the model is the directory's config.json, whole */
        if (m->moe.experts)
            return mt_fail(MT_EUNSUPPORTED, "--hf-in '%s' holds the model, a mixture of experts "
                           "or not (its config.json); drop the --moe-* flags", c->hf_in);
        if ((s = mt_hf_read_llama_config(c->hf_in, m)) != MT_OK ||
            (s = moe_mesh_check(c, m)) != MT_OK)
            return s;
        if (asked_hd > 0 && asked_hd != m->head_dim)
            return mt_fail(MT_EINVAL, "--head-dim %d conflicts with --hf-in '%s', whose head_dim "
                           "is %d; drop --head-dim (the model comes from config.json)", asked_hd,
                           c->hf_in, m->head_dim);
    }
    if (c->llmc_in && asked_hd > 0 && asked_hd != mt_llama_head_dim(m))
        return mt_fail(MT_EUNSUPPORTED, "--llmc-in '%s' is llama2.c's model.bin, whose head "
                       "size is dim / n_heads = %d / %d = %d (run.c's), but --head-dim is %d; "
                       "drop --head-dim (the model comes from the file)", c->llmc_in, m->dim,
                       m->n_heads, mt_llama_head_dim(m), asked_hd);
    if ((s = mt_dataset_open_bounded(c->data, c->val_frac, mt__train_scan_vocab(c, m->vocab),
                                     ds)) != MT_OK)
        return s;
    int data_vocab = mt_dataset_vocab(*ds);
    if (m->vocab == 0) m->vocab = data_vocab;
    m->ffn_dim = mt_llama_ffn_dim(m);
    if ((s = mt_llama_config_check(m)) != MT_OK) return s;
    m->head_dim = mt_llama_head_dim(m);
    if ((c->llmc_in || c->hf_in) && c->T > m->max_seq)
        return mt_fail(MT_EINVAL, "sequence length T=%d (--seq) exceeds the context maxT=%d "
                       "(%s) of %s '%s'; lower --seq to %d or less", c->T, m->max_seq,
                       c->llmc_in ? "its seq_len" : "max_position_embeddings",
                       c->llmc_in ? "--llmc-in" : "--hf-in", c->llmc_in ? c->llmc_in : c->hf_in,
                       m->max_seq);
    return mt__train_data_fits(c, *ds, m->vocab);
}

/* ---- llama2.c's model.bin: the entry's llm.c-family hooks ---- */

/* An llm.c GPT-2 file has a magic; a model.bin has none, so the llm.c one
 * is told apart here, where its header would read as nonsense sizes. */
static mt_status llama_llmc_read(const char *path, void *mc) {
    mt_file_kind kind;
    mt_status s = mt_file_detect(path, &kind);
    if (s != MT_OK) return s;
    if (kind == MT_FILE_LLMC)
        return mt_fail(MT_EINVAL, "'%s' is an llm.c GPT-2 checkpoint, not llama2.c's model.bin "
                       "that --model llama reads: give it to --model gpt", path);
    return mt_llama2c_read_config(path, mc);
}

static mt_status llama_llmc_load(const mt_train_config *c, mt_graph *g) {
    const mt_llama_config m = llama_built(c);
    return mt_llama2c_load(c->llmc_in, g, &m);
}

static mt_status llama_llmc_save(const mt_train_config *c, mt_graph *g, mt_output *out) {
    const mt_llama_config m = llama_built(c);
    return out ? mt_llama2c_save_to(out, &m, g) : mt_llama2c_save(c->llmc_out, &m, g);
}

/* ---- Hugging Face directories (io.h's mt_hf_*): the entry's hooks ---- */

static mt_status llama_hf_read(const char *dir, void *mc) {
    return mt_hf_read_llama_config(dir, mc);
}

static mt_status llama_hf_load(const mt_train_config *c, mt_graph *g, bool part) {
    const mt_llama_config m = llama_built(c);
    return (part ? mt_hf_load_llama_part : mt_hf_load_llama)(c->hf_in, g, &m);
}

static mt_status llama_hf_save(const mt_train_config *c, mt_graph *g) {
    const mt_llama_config m = llama_built(c);
    return mt_hf_save_llama(c->hf_out, &m, g);
}

static void llama_describe(const mt_train_config *c, char *buf, size_t n) {
    const mt_llama_config m = llama_built(c);
    mt__llama_describe(&m, buf, n);
}

static mt_tensor *llama_build(const mt_train_config *c, mt_graph *g, float scale) {
    const mt_llama_config m = llama_built(c);
    return mt_llama_build(g, &m, c->B, c->T, scale);
}

static mt_tensor *llama_build_stage(const mt_train_config *c, mt_graph *g,
                                    const mt_model_stage *st, float scale) {
    const mt_llama_config m = llama_built(c);
    return mt_llama_build_stage(g, &m, st, c->B, c->T, scale);
}

static int llama_blocks(const mt_train_config *c) { return llama_of(c)->n_layers; }

/* The head is the token embedding only when tied. */
static const char *llama_tied_param(const mt_train_config *c) {
    return llama_of(c)->tie_embeddings ? "tok_emb.w" : NULL;
}

/* γ of the MoE routers' aux-loss-free bias (0: a dense LLaMA, or none). */
static float llama_router_bias_update(const mt_train_config *c) {
    const mt_llama_config *m = llama_of(c);
    return m->moe.experts > 0 ? m->moe.bias_update : 0.0f;
}

static double llama_step_flops(const mt_train_config *c, int64_t tokens) {
    const mt_llama_config m = llama_built(c);
    return mt_llama_train_flops(&m, c->T, tokens);
}

/* ======================================================================== */
/* Tensor parallelism                                                        */
/* ======================================================================== */

/* Megatron's layout comes from the rules over the builder's logical axes
 * (presets.c): the query heads split (wq column-parallel, wo row-parallel),
 * the kv heads split where KV divides by the axis and otherwise replicated
 * (each device reads the kv heads its query heads share; their gradients
 * are partial sums over the devices); the SwiGLU's w1 and w3
 * column-parallel (F split), w2 row-parallel; the embedding and the head
 * over the vocabulary, as the GPT's. What must divide: */
static mt_status llama_tensor_check(const mt_train_config *c, int size) {
    const mt_llama_config m = llama_built(c);
    if (m.n_heads % size != 0)
        return mt_fail(MT_EINVAL, "tensor parallelism over %d devices splits the query heads, "
                       "but --heads %d does not divide by %d; pick a head count divisible by "
                       "the tensor axis size", size, m.n_heads, size);
    if (m.ffn_dim > 0 && m.ffn_dim % size != 0)
        return mt_fail(MT_EINVAL, "tensor parallelism over %d devices splits the SwiGLU's "
                       "hidden size F=%d (--ffn-dim or Llama's rule), which does not divide by "
                       "%d; give --ffn-dim a multiple of %d", size, m.ffn_dim, size, size);
    /* V 0 comes from the data: known only once it is read */
    if (m.vocab > 0 && m.vocab % size != 0)
        return mt_fail(MT_EINVAL, "tensor parallelism over %d devices splits the vocabulary, "
                       "but --vocab %d does not divide by %d; give a vocabulary that does "
                       "(e.g. %d)", size, m.vocab, size, (m.vocab + size - 1) / size * size);
    return MT_OK;
}

/* The planner's shape; a mixture of experts as its settings resolve
 * (docs/moe.md: the planner costs its routed and shared experts, FLOPs by
 * the active parameters, llama_step_flops). */
static void llama_shape(const mt_train_config *c, mt_model_shape *out) {
    const mt_llama_config *m = llama_of(c);
    const int F = mt_llama_ffn_dim(m);
    *out = (mt_model_shape){.layers = m->n_layers, .width = m->dim, .heads = m->n_heads,
                            .kv_heads = m->n_kv_heads, .head_dim = mt_llama_head_dim(m),
                            .ffn = F, .gated = true, .max_seq = m->max_seq, .vocab = m->vocab};
    if (m->moe.experts > 0) {
        const mt_llama_moe e = mt__llama_moe_resolved(m, F);
        out->moe_experts = e.experts;
        out->moe_top_k = e.top_k;
        out->moe_ffn = e.ffn_dim;
        out->moe_shared = e.shared;
        out->moe_first_dense = e.first_dense;
        out->moe_every = e.every;
    }
}

static void llama_resize(void *config, int layers, int max_seq) {
    mt_llama_config *m = config;
    m->n_layers = layers;
    if (m->max_seq < max_seq) m->max_seq = max_seq;
}

const mt__train_model mt__model_llama = {
    .about = {.name = "llama", .sequences = true, .dataset = true, .llmc = true,
              MT__MODEL_CONFIG(mt_llama_config), MT__MODEL_FLAGS(LLAMA_FLAGS)},
    .config_defaults = &mt__llama_defaults, .without_data = llama_without_data,
    .input = "tokens", .target = "targets",
    .eot_id = 2,   /* SentencePiece's </s> (llama2.c's EOS), as tokenize --doc-sep writes */
    .check = llama_check, .open = llama_open,
    .llmc_read = llama_llmc_read, .llmc_load = llama_llmc_load,
    .llmc_save = llama_llmc_save, .hf_arch = "LlamaForCausalLM", .hf_read = llama_hf_read,
    .hf_load = llama_hf_load, .hf_save = llama_hf_save,
    .describe = llama_describe, .parse = mt__llama_parse, .logits = "logits",
    .build = llama_build,
    .fill_batch = mt__train_fill_tokens, .step_flops = llama_step_flops,
    .logical_axes = "batch,seq,act_length,vocab,embed,heads,kv_heads,mlp,experts",
    .tensor_check = llama_tensor_check,
    .shape = llama_shape, .resize = llama_resize,
    .sequence = true, .remat = true,
    .build_stage = llama_build_stage, .blocks = llama_blocks,
    .stage_input = MT_STAGE_INPUT, .tied_param = llama_tied_param,
    .router_bias_update = llama_router_bias_update,
};
