/*
 * llmc.c — llm.c's GPT-2 fp32 checkpoint (gpt2_124M.bin and friends).
 *
 * Layout (little-endian): a header of 256 int32 — magic 20240326, version 3,
 * maxT, V, L, NH, C, Vp, then zeros — followed by the fp32 tensors in the
 * order of the table below, each layer-stacked tensor holding all L layers
 * one after the other. Weights are (out,in): y = x·Wᵀ + b, which is also how
 * meshtrain stores them, so every tensor is copied as is.
 *
 * meshtrain keeps one parameter per layer ("h.3.attn.qkv.w"); the table maps
 * llm.c's stacked tensors to those names and is the single place both load
 * and save take the order, the names and the shapes from.
 */
#include "graph/tensor_data.h"
#include "io/io_impl.h"
#include "tensor/tensor_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "llm.c checkpoints are little-endian; llmc.c copies them in place"
#endif

#define LLMC_MAGIC   20240326
#define LLMC_VERSION 3
#define HEADER_INTS  256

/* ------------------------------------------------------------------------ */
/* The tensor table                                                          */
/* ------------------------------------------------------------------------ */

/* Symbolic dimensions, resolved against a config. */
enum { D_VP, D_MAXT, D_C, D_3C, D_4C };

typedef struct {
    const char *name;       /* meshtrain name; per-layer ones get an "h.<l>." prefix */
    bool        per_layer;  /* stacked over L in the llm.c file */
    int         ndim;
    int         dims[2];    /* D_* */
} llmc_tensor;

/* In llm.c's file order. */
static const llmc_tensor llmc_tensors[] = {
    {"wte",            false, 2, {D_VP, D_C}},
    {"wpe",            false, 2, {D_MAXT, D_C}},
    {"ln_1.w",         true,  1, {D_C}},
    {"ln_1.b",         true,  1, {D_C}},
    {"attn.qkv.w",     true,  2, {D_3C, D_C}},
    {"attn.qkv.b",     true,  1, {D_3C}},
    {"attn.proj.w",    true,  2, {D_C, D_C}},
    {"attn.proj.b",    true,  1, {D_C}},
    {"ln_2.w",         true,  1, {D_C}},
    {"ln_2.b",         true,  1, {D_C}},
    {"mlp.fc.w",       true,  2, {D_4C, D_C}},
    {"mlp.fc.b",       true,  1, {D_4C}},
    {"mlp.proj.w",     true,  2, {D_C, D_4C}},
    {"mlp.proj.b",     true,  1, {D_C}},
    {"ln_f.w",         false, 1, {D_C}},
    {"ln_f.b",         false, 1, {D_C}},
};
#define N_LLMC_TENSORS ((int)(sizeof llmc_tensors / sizeof llmc_tensors[0]))

static int64_t dim_size(int d, const mt_gpt_config *cfg) {
    switch (d) {
    case D_VP:   return cfg->Vp;
    case D_MAXT: return cfg->maxT;
    case D_C:    return cfg->C;
    case D_3C:   return 3 * (int64_t)cfg->C;
    default:     return 4 * (int64_t)cfg->C;   /* D_4C */
    }
}

/* Elements of one layer's slice of entry e. */
static int64_t entry_numel(const llmc_tensor *e, const mt_gpt_config *cfg) {
    int64_t n = 1;
    for (int i = 0; i < e->ndim; i++) n *= dim_size(e->dims[i], cfg);
    return n;
}

static int64_t total_floats(const mt_gpt_config *cfg) {
    int64_t n = 0;
    for (int i = 0; i < N_LLMC_TENSORS; i++)
        n += entry_numel(&llmc_tensors[i], cfg) * (llmc_tensors[i].per_layer ? cfg->L : 1);
    return n;
}

static void entry_name(const llmc_tensor *e, int layer, char *buf, size_t size) {
    if (e->per_layer) snprintf(buf, size, "h.%d.%s", layer, e->name);
    else              snprintf(buf, size, "%s", e->name);
}

/* Finds the parameter for (e, layer) in g and checks it can hold the llm.c
 * tensor: present, f32, compiled, same number of elements. Its values are
 * the graph's backend's: read and written through backend_io.c. */
static mt_status find_tensor(mt_graph *g, const char *path, const llmc_tensor *e, int layer,
                             const mt_gpt_config *cfg, mt_tensor **out) {
    char name[MT_MAX_NAME];
    entry_name(e, layer, name, sizeof name);
    mt_tensor *t = mt_graph_find(g, name);
    if (!t)
        return mt_fail(MT_EINVAL, "llm.c checkpoint '%s': the graph has no tensor '%s'; build "
                       "the model with mt_gpt_build and the checkpoint's config", path, name);
    int64_t want[2];
    for (int i = 0; i < e->ndim; i++) want[i] = dim_size(e->dims[i], cfg);
    if (mt_tensor_numel(t) != entry_numel(e, cfg)) {
        char hs[96], ws[96];
        mt__shape_str(t, hs, sizeof hs);
        mt__dims_str(want, e->ndim, ws, sizeof ws);
        return mt_fail(MT_ESHAPE, "tensor '%s' has shape %s (%lld elements) in the graph but "
                       "%s (%lld elements) in llm.c checkpoint '%s'", name, hs,
                       (long long)mt_tensor_numel(t), ws, (long long)entry_numel(e, cfg), path);
    }
    mt_status s = mt__weights_check_storage(t, "llm.c checkpoint", path);
    if (s != MT_EUNSUPPORTED) *out = t;
    return s;
}

/* Checks every tensor before any is touched, so a mismatch leaves g as it was. */
static mt_status check_graph(mt_graph *g, const char *path, const mt_gpt_config *cfg) {
    for (int i = 0; i < N_LLMC_TENSORS; i++) {
        const llmc_tensor *e = &llmc_tensors[i];
        for (int l = 0; l < (e->per_layer ? cfg->L : 1); l++) {
            mt_tensor *t;
            mt_status s = find_tensor(g, path, e, l, cfg, &t);
            if (s != MT_OK) return s;
        }
    }
    return MT_OK;
}

/* ------------------------------------------------------------------------ */
/* The header                                                                */
/* ------------------------------------------------------------------------ */

/* Bounds well past GPT-2 XL (and past any model a CPU trains) that keep every
 * size product below 2^62. */
#define MAX_DIM (1 << 24)
#define MAX_C   (1 << 16)

/* `whose` says where the sizes came from, for the message. */
static mt_status check_sizes(const char *whose, const char *path, const mt_gpt_config *c) {
    mt_status code = strcmp(whose, "model config") == 0 ? MT_EINVAL : MT_EFORMAT;
    const struct { const char *name; int value, max; } f[] = {
        {"maxT", c->maxT, MAX_DIM}, {"V", c->V, MAX_DIM}, {"L", c->L, MAX_C},
        {"NH", c->NH, MAX_C}, {"C", c->C, MAX_C}, {"Vp", c->Vp, MAX_DIM},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].value <= 0 || f[i].value > f[i].max)
            return mt_fail(code, "llm.c checkpoint '%s': %s has %s = %d, expected 1..%d",
                           path, whose, f[i].name, f[i].value, f[i].max);
    if (c->Vp < c->V)
        return mt_fail(code, "llm.c checkpoint '%s': %s has Vp = %d < V = %d; the padded "
                       "vocabulary must be at least V", path, whose, c->Vp, c->V);
    if (c->C % c->NH != 0)
        return mt_fail(code, "llm.c checkpoint '%s': %s has C = %d not divisible by NH = %d",
                       path, whose, c->C, c->NH);
    return MT_OK;
}

/* Opens `path`, checks its header and size, fills cfg. On success *fp (if
 * not NULL) is left open just past the header. */
static mt_status open_checkpoint(const char *path, mt_gpt_config *cfg, FILE **fp) {
    if (fp) *fp = NULL;
    FILE *f;
    int64_t bytes = 0;
    mt_status s = mt__file_check_not_tmp(path, "llm.c checkpoint");
    if (s == MT_OK) s = mt_input_open(path, "llm.c checkpoint", 0, &f, &bytes);
    if (s != MT_OK) return s;
    int32_t h[HEADER_INTS] = {0};
    size_t got = fread(h, sizeof(int32_t), HEADER_INTS, f);
    if (got < 2)
        s = mt_fail(MT_EFORMAT, "'%s' is not an llm.c checkpoint, or is truncated: it is shorter "
                    "than the header's magic and version (%zu bytes)", path, got * sizeof(int32_t));
    else if (h[0] != LLMC_MAGIC)
        s = mt_fail(MT_EFORMAT, "'%s' is not an llm.c GPT-2 checkpoint: magic is %d, expected "
                    "%d%s", path, h[0], LLMC_MAGIC,
                    h[0] == 20240520 || h[0] == 20240801 ? " (it is an llm.c token file; use it as "
                                                             "data)" : "");
    else if (h[1] != LLMC_VERSION)
        s = mt_fail(MT_EFORMAT, "llm.c checkpoint '%s' has version %d, expected %d (fp32 with "
                    "padded vocabulary)%s", path, h[1], LLMC_VERSION,
                    h[1] == 5 ? "; version 5 is bf16: use the fp32 file llm.c's train_gpt2.py "
                                "writes next to it (gpt2_124M.bin)" : "");
    else if (got != HEADER_INTS)
        s = mt_fail(MT_EFORMAT, "llm.c checkpoint '%s' is truncated: it ends inside the "
                    "%zu-byte header", path, HEADER_INTS * sizeof(int32_t));
    if (s != MT_OK) { fclose(f); return s; }

    mt_gpt_config c = {.maxT = h[2], .V = h[3], .L = h[4], .NH = h[5], .C = h[6], .Vp = h[7]};
    s = check_sizes("header", path, &c);
    if (s == MT_OK) {
        int64_t want = (int64_t)sizeof h + 4 * total_floats(&c);
        if (bytes != want)
            s = mt_fail(MT_EFORMAT, "llm.c checkpoint '%s' is %s: its header (L=%d C=%d "
                        "maxT=%d Vp=%d) needs %lld bytes, the file holds %lld", path,
                        bytes < want ? "truncated" : "too long", c.L, c.C, c.maxT, c.Vp,
                        (long long)want, (long long)bytes);
    }
    if (s != MT_OK || !fp) {
        fclose(f);
        if (s == MT_OK) *cfg = c;
        return s;
    }
    *cfg = c;
    *fp = f;
    return MT_OK;
}

mt_status mt_llmc_read_config(const char *path, mt_gpt_config *cfg) {
    if (!path || !cfg) return mt_fail(MT_EINVAL, "mt_llmc_read_config: path or cfg is NULL");
    return open_checkpoint(path, cfg, NULL);
}

/* ------------------------------------------------------------------------ */
/* Load and save                                                             */
/* ------------------------------------------------------------------------ */

/* Reads every tensor of the file (just past the header) and checks its values
 * are finite, before the load copies any: a NaN weight would sample NUL bytes
 * or fail the first training step, blaming the learning rate. Leaves `f` at
 * the end of the data. */
static mt_status check_finite(const char *path, FILE *f, const mt_gpt_config *fc) {
    for (int i = 0; i < N_LLMC_TENSORS; i++) {
        const llmc_tensor *e = &llmc_tensors[i];
        for (int l = 0; l < (e->per_layer ? fc->L : 1); l++) {
            char name[MT_MAX_NAME];
            entry_name(e, l, name, sizeof name);
            mt_status s = mt__weights_scan(f, entry_numel(e, fc), "llm.c checkpoint", path, name);
            if (s != MT_OK) return s;
        }
    }
    return MT_OK;
}

mt_status mt_llmc_load(const char *path, mt_graph *g, const mt_gpt_config *cfg) {
    if (!path || !cfg) return mt_fail(MT_EINVAL, "mt_llmc_load: path or cfg is NULL");
    mt_gpt_config fc;
    FILE *f;
    mt_status s = open_checkpoint(path, &fc, &f);
    if (s != MT_OK) return s;

    const struct { const char *name; int file, want; } fields[] = {
        {"maxT", fc.maxT, cfg->maxT}, {"V", fc.V, cfg->V}, {"L", fc.L, cfg->L},
        {"NH", fc.NH, cfg->NH}, {"C", fc.C, cfg->C}, {"Vp", fc.Vp, cfg->Vp},
    };
    for (size_t i = 0; s == MT_OK && i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].file != fields[i].want)
            s = mt_fail(MT_ESHAPE, "llm.c checkpoint '%s' has %s = %d but the model has %s = %d; "
                        "build the model from mt_llmc_read_config's config", path,
                        fields[i].name, fields[i].file, fields[i].name, fields[i].want);
    if (s == MT_OK && g) s = check_graph(g, path, &fc);
    if (s == MT_OK && g) {
        s = check_finite(path, f, &fc);
        if (s == MT_OK && fseeko(f, (off_t)(HEADER_INTS * sizeof(int32_t)), SEEK_SET) != 0)
            s = mt_fail(MT_EIO, "reading llm.c checkpoint '%s': %s", path, strerror(errno));
    }

    for (int i = 0; s == MT_OK && g && i < N_LLMC_TENSORS; i++) {
        const llmc_tensor *e = &llmc_tensors[i];
        for (int l = 0; s == MT_OK && l < (e->per_layer ? fc.L : 1); l++) {
            mt_tensor *t = NULL;
            s = find_tensor(g, path, e, l, &fc, &t);
            if (s == MT_OK)
                s = mt__weights_read(f, t, entry_numel(e, &fc), "llm.c checkpoint", path);
        }
    }
    fclose(f);
    if (g) mt_graph_params_changed(g);
    return s;
}

/* Written to "<path>.tmp" next to the target, flushed, fsynced and renamed over
 * it (files.c), so a crash leaves the old file or the new one, never half of
 * one. */
static mt_status llmc_save(const char *path, mt_output *claim, mt_graph *g,
                           const mt_gpt_config *cfg) {
    if (!path || !g || !cfg) return mt_fail(MT_EINVAL, "mt_llmc_save: path, g or cfg is NULL");
    mt_status s = check_sizes("model config", path, cfg);
    if (s == MT_OK) s = check_graph(g, path, cfg);
    if (s != MT_OK) return s;

    mt__save sv;
    if ((s = mt__save_begin(path, "llm.c checkpoint", claim, &sv)) != MT_OK) return s;
    FILE *f = sv.f;

    int32_t h[HEADER_INTS] = {LLMC_MAGIC, LLMC_VERSION, cfg->maxT, cfg->V, cfg->L,
                              cfg->NH, cfg->C, cfg->Vp};
    int err = 0;
    s = fwrite(h, sizeof h, 1, f) == 1 ? MT_OK : (err = errno, MT_EIO);
    for (int i = 0; s == MT_OK && i < N_LLMC_TENSORS; i++) {
        const llmc_tensor *e = &llmc_tensors[i];
        for (int l = 0; s == MT_OK && l < (e->per_layer ? cfg->L : 1); l++) {
            mt_tensor *t = NULL;
            find_tensor(g, path, e, l, cfg, &t);   /* checked by check_graph */
            size_t n = (size_t)entry_numel(e, cfg);
            s = mt__fwrite_backend(f, mt__tensor_backend(t), mt__tensor_buffer(t),
                                   n * sizeof(float), NULL, &err);
        }
    }
    return mt__weights_save_end(&sv, s, err, "llm.c checkpoint", path);
}

mt_status mt_llmc_save(const char *path, mt_graph *g, const mt_gpt_config *cfg) {
    return llmc_save(path, NULL, g, cfg);
}

mt_status mt_llmc_save_to(mt_output *out, mt_graph *g, const mt_gpt_config *cfg) {
    if (!out) return mt_fail(MT_EINVAL, "mt_llmc_save_to: out is NULL");
    return llmc_save(mt_output_path(out), out, g, cfg);
}
