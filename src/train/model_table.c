/*
 * model_table.c — the models `meshtrain train` can train, one table entry
 * each (see train_impl.h for what every member must do): GPT-2 and the
 * LLaMA model (its hooks in model_llama.c) on a token dataset, and the MLP
 * and linear regression on the synthetic problems of the models layer
 * (mt_mlp_data, mt_linreg_data).
 */
#include "train/train_impl.h"
#include "base/base_impl.h"   /* the registries */

#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* ======================================================================== */
/* GPT-2 on a dataset                                                        */
/* ======================================================================== */

static const mt_gpt_config GPT_DEFAULTS = {.L = 2, .C = 64, .NH = 4, .maxT = 64, .V = 0,
                                           .Vp = 0};

/* c's GPT settings: its own, or the defaults (model_config NULL). */
static const mt_gpt_config *gpt_of(const mt_train_config *c) {
    return c->model_config ? c->model_config : &GPT_DEFAULTS;
}

/* Vp 0 is V rounded up to 64, as GPT-2's 50257 -> 50304. */
static int gpt_padded(int V) { return (V + 63) / 64 * 64; }

/* Without data: a text file's byte vocabulary, a context as long as the
 * sequence (nothing longer is read). */
static void gpt_without_data(const mt_train_config *c, void *mc) {
    mt_gpt_config *g = mc;
    g->V = 256;
    g->maxT = c->T;
}

/* The checks the flags decide; what comes from files (llmc_in's model, V
 * from the data) is checked by gpt_open once they are read. */
static mt_status gpt_check(const mt_train_config *c) {
    mt_status s = mt__train_needs_data(c, "GPT");
    if (s != MT_OK || c->llmc_in) return s;   /* L, C, NH, maxT, V, Vp: the file's */
    /* V 0 comes from the data, Vp 0 from V: stand-ins that pass for them */
    mt_gpt_config g = *gpt_of(c);
    if (g.V == 0) g.V = g.Vp > 0 ? g.Vp : 1;
    if (g.Vp == 0) g.Vp = gpt_padded(g.V);
    if ((s = mt_gpt_config_check(&g)) != MT_OK) return s;
    if (c->T > g.maxT)
        return mt_fail(MT_EINVAL, "sequence length T=%d (--seq) exceeds the model's context "
                       "maxT=%d (--max-seq); lower T or raise maxT", c->T, g.maxT);
    return MT_OK;
}

/* Takes the model from llmc_in, V from the data where 0, Vp from V. */
static mt_status gpt_open(mt_train_config *c, void *mc, mt_dataset **ds) {
    mt_gpt_config *g = mc;
    mt_status s;
    if (c->llmc_in && (s = mt_llmc_read_config(c->llmc_in, g)) != MT_OK) return s;
    if ((s = mt_dataset_open_bounded(c->data, c->val_frac, mt__train_scan_vocab(c, g->V), ds)) !=
        MT_OK)
        return s;
    int data_vocab = mt_dataset_vocab(*ds);
    if (g->V == 0) g->V = data_vocab;
    if (g->Vp == 0) g->Vp = gpt_padded(g->V);
    if ((s = mt_gpt_config_check(g)) != MT_OK) return s;
    return mt__train_data_fits(c, *ds, g->V);
}

static mt_status gpt_llmc_read(const char *path, void *mc) {
    return mt_llmc_read_config(path, mc);
}

static mt_status gpt_llmc_load(const mt_train_config *c, mt_graph *g) {
    return mt_llmc_load(c->llmc_in, g, gpt_of(c));
}

static mt_status gpt_llmc_save(const mt_train_config *c, mt_graph *g, mt_output *out) {
    return out ? mt_llmc_save_to(out, g, gpt_of(c)) : mt_llmc_save(c->llmc_out, g, gpt_of(c));
}

static void gpt_describe(const mt_train_config *c, char *buf, size_t n) {
    const mt_gpt_config *g = gpt_of(c);
    snprintf(buf, n, "gpt L=%d C=%d NH=%d maxT=%d V=%d Vp=%d", g->L, g->C, g->NH, g->maxT, g->V,
             g->Vp);
}

/* The inverse of gpt_describe, for mt_sample. */
static mt_status gpt_parse(const char *desc, void *mc, int *maxT, int *V) {
    mt_gpt_config *g = mc;
    int end = 0;
    if (sscanf(desc, "gpt L=%d C=%d NH=%d maxT=%d V=%d Vp=%d%n", &g->L, &g->C, &g->NH,
               &g->maxT, &g->V, &g->Vp, &end) != 6 || desc[end] != '\0')
        return mt_fail(MT_EINVAL, "'%s' is not a GPT's description", desc);
    *maxT = g->maxT;
    *V = g->V;
    return mt_gpt_config_check(g);
}

/* The settings a build reads: Vp 0 from V, as open takes it (a build
 * without data, for explain, has V but may leave Vp 0). */
static mt_gpt_config gpt_built(const mt_train_config *c) {
    mt_gpt_config g = *gpt_of(c);
    if (g.Vp == 0) g.Vp = gpt_padded(g.V);
    return g;
}

static mt_tensor *gpt_build(const mt_train_config *c, mt_graph *g, float scale) {
    mt_gpt_config m = gpt_built(c);
    return mt_gpt_build(g, &m, c->B, c->T, scale);
}

static mt_tensor *gpt_build_stage(const mt_train_config *c, mt_graph *g, const mt_model_stage *st,
                                  float scale) {
    mt_gpt_config m = gpt_built(c);
    return mt_gpt_build_stage(g, &m, st, c->B, c->T, scale);
}

/* Tensor parallelism for the GPT, Megatron's layout, from the rules over the
 * builder's logical axes (presets.c):
 *  - the tied embedding and LM head split over the (padded) vocabulary: the
 *    embedding a masked lookup, the loss the vocabulary-parallel one;
 *  - attention split by heads: q, k, v (3,C,C) column-parallel on C (each
 *    device's NH/n heads), the output projection row-parallel;
 *  - the MLP's fc column-parallel (4C split), its proj row-parallel.
 * The row-parallel products are partial sums, all-reduced before the
 * residual add (the one all-reduce per sub-block, forward and backward).
 * Counts that do not divide are errors naming the fix. */
static mt_status gpt_tensor_check(const mt_train_config *c, int size) {
    const mt_gpt_config *m = gpt_of(c);
    if (m->NH % size != 0)
        return mt_fail(MT_EINVAL, "tensor parallelism over %d devices splits the attention "
                       "heads, but NH=%d heads (--heads) do not divide by %d; pick a head "
                       "count divisible by the tensor axis size", size, m->NH, size);
    if ((4 * (int64_t)m->C) % size != 0)
        return mt_fail(MT_EINVAL, "tensor parallelism over %d devices splits the MLP's hidden "
                       "size 4C=%lld (--channels), which does not divide by %d", size,
                       4 * (long long)m->C, size);
    /* Vp 0 comes from V, and V 0 from the data: known only once it is read */
    int Vp = m->Vp > 0 ? m->Vp : m->V > 0 ? gpt_padded(m->V) : 0;
    if (Vp > 0 && Vp % size != 0)
        return mt_fail(MT_EINVAL, "tensor parallelism over %d devices splits the vocabulary, "
                       "but the padded vocabulary Vp=%d does not divide by %d; pad it to %d "
                       "with --padded-vocab (padding is exact: the loss ignores the columns "
                       "past V)", size, Vp, size, (Vp + size - 1) / size * size);
    return MT_OK;
}

static int gpt_blocks(const mt_train_config *c) { return gpt_of(c)->L; }

static void gpt_shape(const mt_train_config *c, mt_model_shape *out) {
    const mt_gpt_config *m = gpt_of(c);
    *out = (mt_model_shape){.layers = m->L, .width = m->C, .heads = m->NH, .kv_heads = m->NH,
                            .ffn = 4 * m->C, .max_seq = m->maxT, .vocab = m->V};
}

static void gpt_resize(void *config, int layers, int max_seq) {
    mt_gpt_config *m = config;
    m->L = layers;
    if (m->maxT < max_seq) m->maxT = max_seq;
}

/* The GPT's head is always its token embedding. */
static const char *gpt_tied_param(const mt_train_config *c) {
    (void)c;
    return "wte";
}

static double gpt_step_flops(const mt_train_config *c, int64_t tokens) {
    return mt_gpt_train_flops(gpt_of(c), c->T, tokens);
}

/* ======================================================================== */
/* MLP on its teacher                                                        */
/* ======================================================================== */

static const mt_mlp_config MLP_DEFAULTS = {.hidden = 64, .layers = 3};

/* c's MLP settings: its own, or the defaults (model_config NULL). */
static const mt_mlp_config *mlp_of(const mt_train_config *c) {
    return c->model_config ? c->model_config : &MLP_DEFAULTS;
}

static mt_status mlp_check(const mt_train_config *c) {
    const mt_mlp_config *m = mlp_of(c);
    if (m->hidden <= 0 || m->layers <= 0)
        return mt_fail(MT_EINVAL, "MLP hidden=%d (--channels) and layers=%d (--layers) must "
                       "be positive", m->hidden, m->layers);
    return MT_OK;
}

static void mlp_describe(const mt_train_config *c, char *buf, size_t n) {
    snprintf(buf, n, "mlp in=%d hidden=%d out=%d layers=%d", MT_MLP_DATA_IN, mlp_of(c)->hidden,
             MT_MLP_DATA_OUT, mlp_of(c)->layers);
}

static mt_tensor *mlp_build(const mt_train_config *c, mt_graph *g, float scale) {
    const mt_mlp_config *m = mlp_of(c);
    return mt_mlp_build(g, c->B, MT_MLP_DATA_IN, m->hidden, MT_MLP_DATA_OUT, m->layers, scale);
}

/* x (B,MT_MLP_DATA_IN), targets (B,MT_MLP_DATA_OUT) */
static mt_status mlp_fill_batch(const mt_train_config *c, const mt_dataset *ds, int split,
                                int64_t *pos, int row0, int rows, void *in, void *target) {
    (void)ds;
    float *x = in, *y = target;
    for (int e = 0; e < rows; e++)
        mt_mlp_data(c->seed, split, (uint64_t)(*pos + row0 + e), x + (size_t)e * MT_MLP_DATA_IN,
                    y + (size_t)e * MT_MLP_DATA_OUT);
    *pos += c->B;
    return MT_OK;
}

/* Megatron's MLP: the linear layers in pairs, the first column-parallel (its
 * weight's and bias's output dim split over `tensor`: each device computes
 * its share of the hidden units), the second row-parallel (its weight's
 * input dim split: each device's partial sums are all-reduced, then the
 * bias). An unpaired last layer, or a pair whose width the axis does not
 * divide, stays replicated. */

/* ======================================================================== */
/* Linear regression                                                         */
/* ======================================================================== */

static void linreg_describe(const mt_train_config *c, char *buf, size_t n) {
    (void)c;
    snprintf(buf, n, "linreg features=%d", MT_LINREG_DATA_FEATURES);
}

static mt_tensor *linreg_build(const mt_train_config *c, mt_graph *g, float scale) {
    return mt_linreg_build(g, c->B, MT_LINREG_DATA_FEATURES, scale);
}

/* x (B,MT_LINREG_DATA_FEATURES), y (B) */
static mt_status linreg_fill_batch(const mt_train_config *c, const mt_dataset *ds, int split,
                                   int64_t *pos, int row0, int rows, void *in, void *target) {
    (void)ds;
    float *x = in, *y = target;
    for (int e = 0; e < rows; e++)
        y[e] = mt_linreg_data(c->seed, split, (uint64_t)(*pos + row0 + e),
                              x + (size_t)e * MT_LINREG_DATA_FEATURES);
    *pos += c->B;
    return MT_OK;
}

/* ======================================================================== */
/* The table                                                                 */
/* ======================================================================== */

/* The settings each model reads, as flags, at offsets into its own struct.
 * The GPT's with llmc_in come from the file (its header's names are the
 * fields). */
#define GPT_FLAG(f, fld, member, lo, hi, auto0, help) \
    {f, fld, offsetof(mt_gpt_config, member), lo, hi, auto0, "N", help, MT_MODEL_FLAG_INT, 0, 0, \
     NULL}
static const mt_model_flag GPT_FLAGS[] = {
    GPT_FLAG("layers", "L", L, 1, 1000, false, "transformer blocks L"),
    GPT_FLAG("channels", "C", C, 1, 65536, false, "width C"),
    GPT_FLAG("heads", "NH", NH, 1, 1024, false, "attention heads NH (C % NH == 0)"),
    GPT_FLAG("max-seq", "maxT", maxT, 1, 1 << 20, false, "context length maxT"),
    GPT_FLAG("vocab", "V", V, 0, 1 << 24, true, "vocabulary V (0: from the data)"),
    GPT_FLAG("padded-vocab", "Vp", Vp, 0, 1 << 24, true,
             "padded vocabulary Vp >= V (0: V rounded up to 64)"),
};
static const mt_model_flag MLP_FLAGS[] = {
    {"layers", "layers", offsetof(mt_mlp_config, layers), 1, 1000, false, "N", "linear layers",
     MT_MODEL_FLAG_INT, 0, 0, NULL},
    {"channels", "hidden", offsetof(mt_mlp_config, hidden), 1, 65536, false, "N",
     "hidden width", MT_MODEL_FLAG_INT, 0, 0, NULL},
};
#define FLAGS(a) .flags = a, .n_flags = (int)(sizeof a / sizeof a[0])
/* The model's settings' struct: its name and its size. */
#define CONFIG(type) .config_type = #type, .config_size = sizeof(type)
static_assert(sizeof(mt_gpt_config) <= MT__MODEL_CONFIG_MAX, "raise MT__MODEL_CONFIG_MAX");
static_assert(sizeof(mt_mlp_config) <= MT__MODEL_CONFIG_MAX, "raise MT__MODEL_CONFIG_MAX");
static_assert(sizeof(mt_llama_config) <= MT__MODEL_CONFIG_MAX, "raise MT__MODEL_CONFIG_MAX");

static const mt__train_model MODELS[] = {
    [MT_MODEL_GPT] = {
        .about = {.name = "gpt", .sequences = true, .dataset = true, .llmc = true,
                  CONFIG(mt_gpt_config), FLAGS(GPT_FLAGS)},
        .config_defaults = &GPT_DEFAULTS, .without_data = gpt_without_data,
        .input = "tokens", .target = "targets", .batch_const = "pos",
        .check = gpt_check, .open = gpt_open,
        .llmc_read = gpt_llmc_read, .llmc_load = gpt_llmc_load, .llmc_save = gpt_llmc_save,
        .describe = gpt_describe, .parse = gpt_parse, .logits = "logits",
        .build = gpt_build, .fill_constants = mt_gpt_fill_constants,
        .fill_batch = mt__train_fill_tokens, .step_flops = gpt_step_flops,
        .logical_axes = "batch,seq,act_length,vocab,embed,heads,mlp",
        .tensor_check = gpt_tensor_check,
        .shape = gpt_shape, .resize = gpt_resize,
        .sequence = true, .remat = true,
        .build_stage = gpt_build_stage, .blocks = gpt_blocks, .stage_input = MT_STAGE_INPUT,
        .tied_param = gpt_tied_param,
    },
    [MT_MODEL_MLP] = {
        .about = {.name = "mlp", CONFIG(mt_mlp_config), FLAGS(MLP_FLAGS)},
        .config_defaults = &MLP_DEFAULTS,
        .input = "x", .target = "targets",
        .check = mlp_check,
        .describe = mlp_describe, .build = mlp_build, .fill_batch = mlp_fill_batch,
        .logical_axes = "batch,mlp",
    },
    [MT_MODEL_LINREG] = {
        .about = {.name = "linreg"},   /* no settings of its own */
        .input = "x", .target = "y",
        .describe = linreg_describe, .build = linreg_build, .fill_batch = linreg_fill_batch,
        .logical_axes = "batch",
    },
    [MT_MODEL_LLAMA] = {   /* its hooks: model_llama.c */
        .about = {.name = "llama", .sequences = true, .dataset = true, .llmc = true,
                  CONFIG(mt_llama_config), .flags = mt__llama_flags,
                  .n_flags = MT__LLAMA_N_FLAGS},
        .config_defaults = &mt__llama_defaults, .without_data = mt__llama_without_data,
        .input = "tokens", .target = "targets",
        .check = mt__llama_check, .open = mt__llama_open,
        .llmc_read = mt__llama_llmc_read, .llmc_load = mt__llama_llmc_load,
        .llmc_save = mt__llama_llmc_save,
        .describe = mt__llama_describe, .parse = mt__llama_parse, .logits = "logits",
        .build = mt__llama_build,
        .fill_batch = mt__train_fill_tokens, .step_flops = mt__llama_step_flops,
        .logical_axes = "batch,seq,act_length,vocab,embed,heads,kv_heads,mlp",
        .tensor_check = mt__llama_tensor_check,
        .shape = mt__llama_shape, .resize = mt__llama_resize,
        .sequence = true, .remat = true,
        .build_stage = mt__llama_build_stage, .blocks = mt__llama_blocks,
        .stage_input = MT_STAGE_INPUT, .tied_param = mt__llama_tied_param,
    },
};

#define N_MODELS ((int)(sizeof MODELS / sizeof MODELS[0]))

int mt__train_model_count(void) {
    return N_MODELS + mt__registry_count(MT__REGISTRY_MODELS);
}

const mt__train_model *mt__train_model_of(mt_model_kind kind) {
    /* the built-in table, then the models registered from outside */
    if ((int)kind >= N_MODELS) return mt__registry_get(MT__REGISTRY_MODELS, (int)kind - N_MODELS);
    /* an entry left out of a designated-initializer table is all zeros */
    if ((int)kind < 0 || !MODELS[kind].about.name) return NULL;
    return &MODELS[kind];
}

mt_status mt__train_model_register(const mt__train_model *m, mt_model_kind *kind) {
    if (!m || !kind) return mt_fail(MT_EINVAL, "mt__train_model_register: an argument is NULL");
    if (!m->about.name || !m->build || !m->fill_batch || !m->describe || !m->input || !m->target)
        return mt_fail(MT_EINVAL, "registering model '%s': an entry needs about.name, build, "
                       "fill_batch, describe, input and target (train_impl.h documents each)",
                       m->about.name ? m->about.name : "(no name)");
    if (m->about.config_size > sizeof(mt__model_config_buf) ||
        (m->about.config_size && !m->config_defaults))
        return mt_fail(MT_EINVAL, "registering model '%s': its settings (%zu bytes) need "
                       "config_defaults and at most %zu bytes", m->about.name,
                       m->about.config_size, sizeof(mt__model_config_buf));
    for (int k = 0; k < mt__train_model_count(); k++) {
        const mt__train_model *o = mt__train_model_of((mt_model_kind)k);
        if (o && !strcmp(o->about.name, m->about.name))
            return mt_fail(MT_EINVAL, "registering model '%s': a model of that name exists "
                           "(kind %d); pick another name", m->about.name, k);
    }
    int at = mt__registry_add(MT__REGISTRY_MODELS, m);
    if (at < 0)
        return mt_fail(MT_ENOMEM, "registering model '%s': the registry holds %d models "
                       "already", m->about.name, MT__REGISTRY_MAX);
    *kind = (mt_model_kind)(N_MODELS + at);
    return MT_OK;
}

static mt_status shaped(const mt_train_config *c, const mt__train_model **m) {
    *m = c ? mt__train_model_of(c->model) : NULL;
    if (!*m) return mt_fail(MT_EINVAL, "model kind %d is not a model", c ? (int)c->model : -1);
    if (!(*m)->shape || !(*m)->resize)
        return mt_fail(MT_EUNSUPPORTED, "--model %s is not a transformer: it has no layers, "
                       "heads or context to plan", (*m)->about.name);
    return MT_OK;
}

mt_status mt_model_shape_of(const mt_train_config *c, mt_model_shape *out) {
    const mt__train_model *m;
    mt_status s = shaped(c, &m);
    if (s == MT_OK) m->shape(c, out);
    return s;
}

mt_status mt_model_resize(const mt_train_config *c, void *config, int layers, int max_seq) {
    const mt__train_model *m;
    mt_status s = shaped(c, &m);
    if (s == MT_OK) m->resize(config, layers, max_seq);
    return s;
}

const mt_model_about *mt_model_about_of(mt_model_kind kind) {
    const mt__train_model *m = mt__train_model_of(kind);
    return m ? &m->about : NULL;
}

const char *mt_model_name(mt_model_kind kind) {
    const mt__train_model *m = mt__train_model_of(kind);
    return m ? m->about.name : NULL;
}

/* ======================================================================== */
/* The models' settings (train.h)                                            */
/* ======================================================================== */

void mt__train_model_config_copy(const mt__train_model *m, const mt_train_config *c,
                                 mt__model_config_buf *dst) {
    memset(dst, 0, sizeof *dst);
    const void *src = c->model_config ? c->model_config : m->config_defaults;
    if (m->about.config_size) memcpy(dst->bytes, src, m->about.config_size);
}

/* The entry of `kind` for a buffer of `size` bytes meant for its settings
 * (`fn` names the caller in messages); NULL after the message. */
static const mt__train_model *entry_for(const char *fn, mt_model_kind kind, const void *cfg,
                                        size_t size) {
    const mt__train_model *m = mt__train_model_of(kind);
    if (!m) {
        mt_fail(MT_EINVAL, "%s: unknown model kind %d", fn, (int)kind);
        return NULL;
    }
    if (size != m->about.config_size || (size && !cfg)) {
        mt_fail(MT_EINVAL, "%s: --model %s's settings are %s, %zu bytes, but %zu bytes were "
                "given%s; pass a buffer of mt_model_about's config_size", fn, m->about.name,
                m->about.config_type ? m->about.config_type : "nothing", m->about.config_size,
                size, size && !cfg ? " at NULL" : "");
        return NULL;
    }
    return m;
}

mt_status mt_model_config_defaults(mt_model_kind kind, void *cfg, size_t size) {
    const mt__train_model *m = entry_for("mt_model_config_defaults", kind, cfg, size);
    if (!m) return MT_EINVAL;
    if (size) memcpy(cfg, m->config_defaults, size);
    return MT_OK;
}

mt_status mt_model_config_without_data(mt_model_kind kind, const mt_train_config *c, void *cfg,
                                       size_t size) {
    const mt__train_model *m = entry_for("mt_model_config_without_data", kind, cfg, size);
    if (!m) return MT_EINVAL;
    if (size) memcpy(cfg, m->config_defaults, size);
    if (m->without_data) m->without_data(c, cfg);
    return MT_OK;
}

const char *mt__train_llmc_models(char *buf, size_t n) {
    int count = 0, seen = 0;
    for (int i = 0; i < N_MODELS; i++) count += MODELS[i].about.llmc;
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < N_MODELS && at < n; i++) {
        if (!MODELS[i].about.llmc) continue;
        const char *sep = seen == 0 ? "" : seen == count - 1 ? " or " : ", ";
        int w = snprintf(buf + at, n - at, "%s%s", sep, MODELS[i].about.name);
        if (w < 0) break;
        at += (size_t)w;
        seen++;
    }
    return buf;
}

mt_status mt_model_config_from_llmc(mt_model_kind kind, const char *path, void *cfg, size_t size) {
    const mt__train_model *m = entry_for("mt_model_config_from_llmc", kind, cfg, size);
    if (!m) return MT_EINVAL;
    char names[128];
    if (!m->about.llmc)
        return mt_fail(MT_EINVAL, "llm.c-family checkpoints (%s) hold %s models, not --model %s",
                       path, mt__train_llmc_models(names, sizeof names), m->about.name);
    return m->llmc_read(path, cfg);
}
