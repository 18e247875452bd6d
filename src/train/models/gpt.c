/*
 * gpt.c — the GPT-2 model's entry in the trainer's table of models
 * (train_impl.h documents each member; model_table.c registers it as
 * MT_MODEL_GPT, "gpt"): its flags and defaults, its checks, its data (a
 * token dataset), llm.c's GPT-2 file as its llm.c-family file (the format:
 * io/llmc.c), its description read back for sampling, what tensor
 * parallelism needs to divide, its pipeline stages, and the facts the
 * planner reads. The builder is src/models/gpt/.
 */
#include "train/train_impl.h"

#include <stddef.h>
#include <stdio.h>

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
    if (s != MT_OK || c->llmc_in || c->hf_in) return s;   /* L, C, NH, maxT, V, Vp: the file's */
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

/* Takes the model from llmc_in or hf_in, V from the data where 0, Vp from V. */
static mt_status gpt_open(mt_train_config *c, void *mc, mt_dataset **ds) {
    mt_gpt_config *g = mc;
    mt_status s;
    if (c->llmc_in && (s = mt_llmc_read_config(c->llmc_in, g)) != MT_OK) return s;
    if (c->hf_in && (s = mt_hf_read_gpt2_config(c->hf_in, g)) != MT_OK) return s;
    if (c->hf_in && c->T > g->maxT)
        return mt_fail(MT_EINVAL, "sequence length T=%d (--seq) exceeds the context %d "
                       "(n_positions) of --hf-in '%s'; lower --seq to %d or less", c->T,
                       g->maxT, c->hf_in, g->maxT);
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

/* Hugging Face's GPT2LMHeadModel directories (io.h's mt_hf_*_gpt2) */
static mt_status gpt_hf_read(const char *dir, void *mc) { return mt_hf_read_gpt2_config(dir, mc); }

static mt_status gpt_hf_load(const mt_train_config *c, mt_graph *g, bool part) {
    return (part ? mt_hf_load_gpt2_part : mt_hf_load_gpt2)(c->hf_in, g, gpt_of(c));
}

static mt_status gpt_hf_save(const mt_train_config *c, mt_graph *g) {
    return mt_hf_save_gpt2(c->hf_out, gpt_of(c), g);
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
    g.doc_mask = c->doc_mask;   /* the trainer's --doc-mask */
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
                            .head_dim = m->NH > 0 ? m->C / m->NH : 0,
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
    /* Vp 0 is V padded (a planner asks before any data sets it) */
    mt_gpt_config g = *gpt_of(c);
    if (g.Vp == 0) g.Vp = gpt_padded(g.V);
    return mt_gpt_train_flops(&g, c->T, tokens);
}

/* The settings it reads, as flags, at offsets into mt_gpt_config. With
 * llmc_in they come from the file (its header's names are the fields). */
#define GPT_FLAG(f, fld, member, lo, hi, auto0, help) \
    {f, fld, offsetof(mt_gpt_config, member), lo, hi, auto0, "N", help, MT_MODEL_FLAG_INT, 0, 0, \
     NULL, NULL}
static const mt_model_flag GPT_FLAGS[] = {
    GPT_FLAG("layers", "L", L, 1, 1000, false, "transformer blocks L"),
    GPT_FLAG("channels", "C", C, 1, 65536, false, "width C"),
    GPT_FLAG("heads", "NH", NH, 1, 1024, false, "attention heads NH (C % NH == 0)"),
    GPT_FLAG("max-seq", "maxT", maxT, 1, 1 << 20, false, "context length maxT"),
    GPT_FLAG("vocab", "V", V, 0, 1 << 24, true, "vocabulary V (0: from the data)"),
    GPT_FLAG("padded-vocab", "Vp", Vp, 0, 1 << 24, true,
             "padded vocabulary Vp >= V (0: V rounded up to 64)"),
};
#undef GPT_FLAG

const mt__train_model mt__model_gpt = {
    .about = {.name = "gpt", .sequences = true, .dataset = true, .llmc = true,
              MT__MODEL_CONFIG(mt_gpt_config), MT__MODEL_FLAGS(GPT_FLAGS)},
    .config_defaults = &GPT_DEFAULTS, .without_data = gpt_without_data,
    .input = "tokens", .target = "targets", .batch_const = "pos",
    .eot_id = 50256,   /* GPT-2's <|endoftext|> */
    .check = gpt_check, .open = gpt_open,
    .llmc_read = gpt_llmc_read, .llmc_load = gpt_llmc_load, .llmc_save = gpt_llmc_save,
    .hf_arch = "GPT2LMHeadModel", .hf_read = gpt_hf_read, .hf_load = gpt_hf_load,
    .hf_save = gpt_hf_save,
    .describe = gpt_describe, .parse = gpt_parse, .logits = "logits",
    .build = gpt_build, .fill_constants = mt_gpt_fill_constants,
    .fill_batch = mt__train_fill_tokens, .step_flops = gpt_step_flops,
    .logical_axes = "batch,seq,act_length,vocab,embed,heads,mlp",
    .tensor_check = gpt_tensor_check,
    .shape = gpt_shape, .resize = gpt_resize,
    .sequence = true, .remat = true,
    .build_stage = gpt_build_stage, .blocks = gpt_blocks, .stage_input = MT_STAGE_INPUT,
    .tied_param = gpt_tied_param,
};
