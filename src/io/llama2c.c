/*
 * llama2c.c — llama2.c's fp32 checkpoint (model.bin, export.py's legacy
 * "version 0"), as karpathy/llama2.c's run.c reads it.
 *
 * Layout (little-endian, no magic): a header of 7 int32 — dim, hidden_dim,
 * n_layers, n_heads, n_kv_heads, vocab_size (negative when the classifier is
 * not the embedding), seq_len — then fp32 tensors in the order of the table
 * below, each per-layer tensor holding all L layers one after the other,
 * then the RoPE table run.c skips (cos, then sin, each (seq_len, HS/2)),
 * then the classifier (V,C) when it is not shared.
 *
 * Every matrix is (out,in): run.c's matmul(xout, x, w, n, d) computes
 * xout (d) = W (d,n) · x (n), which is how meshtrain's mt_linear stores w
 * (OC,C), so every tensor is copied as is. run.c's head size is dim /
 * n_heads (so NH·HS = C), its RoPE rotates adjacent pairs (2i, 2i+1) of each
 * head by pos·10000^(-2i/HS), and its RMSNorm adds 1e-5: a model with
 * another head size (head_dim, --head-dim), theta or eps would not load or
 * would run differently there, and is refused.
 */
#include "graph/tensor_data.h"
#include "io/io_impl.h"
#include "tensor/tensor_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "llama2.c checkpoints are little-endian; llama2c.c copies them in place"
#endif

#define WHAT         "llama2.c checkpoint"   /* in messages */
#define HEADER_BYTES (7 * (int64_t)sizeof(int32_t))
#define L2C_THETA    10000.0f   /* run.c's RoPE base */
#define L2C_EPS      1e-5f      /* run.c's RMSNorm epsilon */

/* ------------------------------------------------------------------------ */
/* The tensor table                                                          */
/* ------------------------------------------------------------------------ */

/* Symbolic dimensions, resolved against a config. */
enum { D_V, D_C, D_KV, D_F };

typedef struct {
    const char *name;       /* meshtrain name; per-layer ones get an "h.<l>." prefix */
    bool        per_layer;  /* stacked over L in the file */
    int         ndim;
    int         dims[2];    /* D_* */
} l2c_tensor;

/* In run.c's order (memory_map_weights). The RoPE table follows the last
 * entry; the classifier, CLASSIFIER, follows it when not shared. */
static const l2c_tensor l2c_tensors[] = {
    {"tok_emb.w",   false, 2, {D_V, D_C}},    /* token_embedding_table */
    {"attn_norm.w", true,  1, {D_C}},         /* rms_att_weight */
    {"attn.wq.w",   true,  2, {D_C, D_C}},    /* wq: q (NH·HS) = wq · x (C) */
    {"attn.wk.w",   true,  2, {D_KV, D_C}},   /* wk: k (KV·HS) */
    {"attn.wv.w",   true,  2, {D_KV, D_C}},   /* wv */
    {"attn.wo.w",   true,  2, {D_C, D_C}},    /* wo: out (C) = wo · y (NH·HS) */
    {"ffn_norm.w",  true,  1, {D_C}},         /* rms_ffn_weight */
    {"ffn.w1.w",    true,  2, {D_F, D_C}},    /* w1: (F) = w1 · x (C) */
    {"ffn.w2.w",    true,  2, {D_C, D_F}},    /* w2: (C) = w2 · h (F) */
    {"ffn.w3.w",    true,  2, {D_F, D_C}},    /* w3 */
    {"norm.w",      false, 1, {D_C}},         /* rms_final_weight */
};
#define N_BODY ((int)(sizeof l2c_tensors / sizeof l2c_tensors[0]))
static const l2c_tensor CLASSIFIER = {"lm_head.w", false, 2, {D_V, D_C}};   /* wcls */

static int64_t dim_size(int d, const mt_llama_config *c) {
    switch (d) {
    case D_V:  return c->vocab;
    case D_C:  return c->dim;
    case D_KV: return (int64_t)c->n_kv_heads * (c->dim / c->n_heads);
    default:   return c->ffn_dim;   /* D_F */
    }
}

static int64_t entry_numel(const l2c_tensor *e, const mt_llama_config *c) {
    int64_t n = 1;
    for (int i = 0; i < e->ndim; i++) n *= dim_size(e->dims[i], c);
    return n;
}

static int n_layers_of(const l2c_tensor *e, const mt_llama_config *c) {
    return e->per_layer ? c->n_layers : 1;
}

/* Floats of the RoPE table: cos and sin, (seq_len, HS/2) each. */
static int64_t rope_floats(const mt_llama_config *c) {
    return (int64_t)c->max_seq * (c->dim / c->n_heads);
}

static int64_t file_bytes(const mt_llama_config *c) {
    int64_t n = rope_floats(c);
    for (int i = 0; i < N_BODY; i++)
        n += entry_numel(&l2c_tensors[i], c) * n_layers_of(&l2c_tensors[i], c);
    if (!c->tie_embeddings) n += entry_numel(&CLASSIFIER, c);
    return HEADER_BYTES + 4 * n;
}

static void entry_name(const l2c_tensor *e, int layer, char *buf, size_t size) {
    if (e->per_layer) snprintf(buf, size, "h.%d.%s", layer, e->name);
    else              snprintf(buf, size, "%s", e->name);
}

/* The graph's shape holds the file's (out,in) matrix when its last dim is
 * `in` and its leading dims multiply to `out`: (NH,HS,C) holds (C,C), and a
 * transposed (in,out) is caught unless out == in. */
static bool shape_fits(const mt_tensor *t, const int64_t *want, int ndim) {
    int nd = mt_tensor_ndim(t);
    if (nd < 1 || mt_tensor_dim(t, nd - 1) != want[ndim - 1]) return false;
    int64_t lead = 1;
    for (int i = 0; i < nd - 1; i++) lead *= mt_tensor_dim(t, i);
    return lead == (ndim == 2 ? want[0] : 1);
}

/* Finds the parameter for (e, layer) in g and checks it can hold the file's
 * tensor: present, f32, the same shape, compiled. */
static mt_status find_tensor(mt_graph *g, const char *path, const l2c_tensor *e, int layer,
                             const mt_llama_config *c, mt_tensor **out) {
    char name[MT_MAX_NAME];
    entry_name(e, layer, name, sizeof name);
    mt_tensor *t = mt_graph_find(g, name);
    if (!t)
        return mt_fail(MT_EINVAL, "llama2.c checkpoint '%s': the graph has no tensor '%s'; "
                       "build the llama model with the checkpoint's config "
                       "(mt_llama2c_read_config)", path, name);
    int64_t want[2];
    for (int i = 0; i < e->ndim; i++) want[i] = dim_size(e->dims[i], c);
    if (!shape_fits(t, want, e->ndim)) {
        char hs[96], ws[96];
        mt__shape_str(t, hs, sizeof hs);
        mt__dims_str(want, e->ndim, ws, sizeof ws);
        return mt_fail(MT_ESHAPE, "tensor '%s' has shape %s in the graph but %s in %s '%s'",
                       name, hs, ws, WHAT, path);
    }
    *out = t;
    return mt__weights_check_storage(t, WHAT, path);
}

/* Checks every tensor before any is touched, so a mismatch leaves g as it
 * was; `classifier` says whether "lm_head.w" is wanted too. */
static mt_status check_graph(mt_graph *g, const char *path, const mt_llama_config *c,
                             bool classifier) {
    mt_tensor *t;
    for (int i = 0; i < N_BODY; i++)
        for (int l = 0; l < n_layers_of(&l2c_tensors[i], c); l++) {
            mt_status s = find_tensor(g, path, &l2c_tensors[i], l, c, &t);
            if (s != MT_OK) return s;
        }
    return classifier ? find_tensor(g, path, &CLASSIFIER, 0, c, &t) : MT_OK;
}

/* ------------------------------------------------------------------------ */
/* The header                                                                */
/* ------------------------------------------------------------------------ */

/* Bounds past Llama 3 405B (dim 16384, hidden 53248, 126 layers, vocab
 * 128256) that keep every size product below 2^62. */
#define MAX_DIM   (1 << 16)
#define MAX_FFN   (1 << 20)
#define MAX_VOCAB (1 << 24)

/* `whose` says where the sizes came from, for the message. */
static mt_status check_sizes(const char *whose, const char *path, const mt_llama_config *c) {
    mt_status code = strcmp(whose, "model config") == 0 ? MT_EINVAL : MT_EFORMAT;
    const struct { const char *name; int value, max; } f[] = {
        {"dim", c->dim, MAX_DIM},           {"hidden_dim", c->ffn_dim, MAX_FFN},
        {"n_layers", c->n_layers, MAX_DIM}, {"n_heads", c->n_heads, MAX_DIM},
        {"n_kv_heads", c->n_kv_heads, MAX_DIM}, {"vocab_size", c->vocab, MAX_VOCAB},
        {"seq_len", c->max_seq, MAX_VOCAB},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].value <= 0 || f[i].value > f[i].max)
            return mt_fail(code, "llama2.c checkpoint '%s': %s has %s = %d, expected 1..%d%s",
                           path, whose, f[i].name, f[i].value, f[i].max,
                           code == MT_EFORMAT ? "; the file is not a llama2.c model.bin "
                                                "(export.py's legacy version 0)" : "");
    if (c->head_dim > 0 && (c->dim % c->n_heads != 0 || c->head_dim != c->dim / c->n_heads))
        return mt_fail(MT_EUNSUPPORTED, "llama2.c checkpoint '%s': the %s has head_dim = %d "
                       "(--head-dim), but llama2.c's format stores no head size and its run.c "
                       "takes dim / n_heads = %d / %d; write this model as a meshtrain "
                       "checkpoint (--ckpt-out) instead, or train one with --head-dim 0", path,
                       whose, c->head_dim, c->dim, c->n_heads);
    if (c->dim % c->n_heads != 0)
        return mt_fail(code, "llama2.c checkpoint '%s': %s has dim = %d not divisible by "
                       "n_heads = %d; llama2.c's head size is dim / n_heads", path, whose,
                       c->dim, c->n_heads);
    if (c->n_heads % c->n_kv_heads != 0)
        return mt_fail(code, "llama2.c checkpoint '%s': %s has n_kv_heads = %d, which does "
                       "not divide n_heads = %d; each kv head serves n_heads / n_kv_heads "
                       "query heads", path, whose, c->n_kv_heads, c->n_heads);
    if ((c->dim / c->n_heads) % 2 != 0)
        return mt_fail(code, "llama2.c checkpoint '%s': %s has an odd head size %d (dim %d / "
                       "n_heads %d); RoPE rotates pairs, so it must be even", path, whose,
                       c->dim / c->n_heads, c->dim, c->n_heads);
    return MT_OK;
}

/* Opens `path`, checks its header and its size, fills cfg. On success *fp
 * (if not NULL) is left open just past the header. */
static mt_status open_checkpoint(const char *path, mt_llama_config *cfg, FILE **fp) {
    if (fp) *fp = NULL;
    FILE *f;
    int64_t bytes = 0;
    mt_status s = mt__file_check_not_tmp(path, WHAT);
    if (s == MT_OK) s = mt_input_open(path, WHAT, 0, &f, &bytes);
    if (s != MT_OK) return s;
    int32_t h[7];
    if (fread(h, sizeof h, 1, f) != 1) {
        fclose(f);
        return mt_fail(MT_EFORMAT, "llama2.c checkpoint '%s' is truncated: it is %lld bytes, "
                       "shorter than the 28-byte header (7 int32)", path, (long long)bytes);
    }
    /* vocab_size's sign is the classifier flag (INT32_MIN has no magnitude) */
    mt_llama_config c = {.dim = h[0], .ffn_dim = h[1], .n_layers = h[2], .n_heads = h[3],
                         .n_kv_heads = h[4], .vocab = h[5] == INT32_MIN ? 0 : abs(h[5]),
                         .max_seq = h[6], .rope_theta = L2C_THETA, .norm_eps = L2C_EPS,
                         .tie_embeddings = h[5] > 0, .multiple_of = 0, .ffn_mult = 1.0f};
    s = check_sizes("header", path, &c);
    if (s == MT_OK) c.head_dim = c.dim / c.n_heads;   /* run.c's; the header has none */
    if (s == MT_OK && bytes != file_bytes(&c))
        s = mt_fail(MT_EFORMAT, "llama2.c checkpoint '%s' is %s: its header (dim=%d "
                    "hidden_dim=%d n_layers=%d n_heads=%d n_kv_heads=%d vocab_size=%d "
                    "seq_len=%d, %s classifier) needs %lld bytes, the file holds %lld", path,
                    bytes < file_bytes(&c) ? "truncated" : "too long", c.dim, c.ffn_dim,
                    c.n_layers, c.n_heads, c.n_kv_heads, h[5], c.max_seq,
                    c.tie_embeddings ? "shared" : "separate", (long long)file_bytes(&c),
                    (long long)bytes);
    if (s == MT_OK) *cfg = c;
    if (s != MT_OK || !fp) fclose(f);
    else *fp = f;
    return s;
}

mt_status mt_llama2c_read_config(const char *path, mt_llama_config *cfg) {
    if (!path || !cfg) return mt_fail(MT_EINVAL, "mt_llama2c_read_config: path or cfg is NULL");
    return open_checkpoint(path, cfg, NULL);
}

/* ------------------------------------------------------------------------ */
/* Load                                                                      */
/* ------------------------------------------------------------------------ */

/* Checks the n floats at f's position of (e, layer) are finite. */
static mt_status scan(const char *path, FILE *f, const l2c_tensor *e, int layer, int64_t n) {
    char name[MT_MAX_NAME];
    entry_name(e, layer, name, sizeof name);
    return mt__weights_scan(f, n, WHAT, path, name);
}

/* Every weight of the file is finite; leaves f anywhere. */
static mt_status check_finite(const char *path, FILE *f, const mt_llama_config *c) {
    mt_status s = MT_OK;
    for (int i = 0; s == MT_OK && i < N_BODY; i++)
        for (int l = 0; s == MT_OK && l < n_layers_of(&l2c_tensors[i], c); l++)
            s = scan(path, f, &l2c_tensors[i], l, entry_numel(&l2c_tensors[i], c));
    if (s == MT_OK && !c->tie_embeddings) {
        if (fseeko(f, (off_t)(4 * rope_floats(c)), SEEK_CUR) != 0)
            return mt_fail(MT_EIO, "reading %s '%s': %s", WHAT, path, strerror(errno));
        s = scan(path, f, &CLASSIFIER, 0, entry_numel(&CLASSIFIER, c));
    }
    return s;
}

/* Reads the tensor at `offset` of f into (e, layer)'s parameter. */
static mt_status read_into(mt_graph *g, const char *path, FILE *f, int64_t offset,
                           const l2c_tensor *e, int layer, const mt_llama_config *c) {
    mt_tensor *t = NULL;
    mt_status s = find_tensor(g, path, e, layer, c, &t);   /* checked by check_graph */
    if (s != MT_OK) return s;
    if (fseeko(f, (off_t)offset, SEEK_SET) != 0)
        return mt_fail(MT_EIO, "reading %s '%s': %s", WHAT, path, strerror(errno));
    return mt__weights_read(f, t, entry_numel(e, c), WHAT, path);
}

static mt_status check_runnable(const char *path, const mt_llama_config *c) {
    if (c->rope_theta != L2C_THETA || c->norm_eps != L2C_EPS)
        return mt_fail(MT_EUNSUPPORTED, "llama2.c checkpoint '%s': the model has rope_theta "
                       "%g and norm_eps %g, but llama2.c's run.c uses 10000 and 1e-5 (its "
                       "format stores neither); use those with llama2.c files", path,
                       (double)c->rope_theta, (double)c->norm_eps);
    return MT_OK;
}

/* The graph's model is the file's: the same sizes (tensor shapes alone do
 * not tell how C splits into heads), run.c's theta and eps. Its max_seq and
 * its tying may differ (no tensor holds positions; a shared classifier
 * fills an untied head). */
static mt_status check_same_model(const char *path, const mt_llama_config *file,
                                  const mt_llama_config *model) {
    const struct { const char *name; int file, model; } f[] = {
        {"dim", file->dim, model->dim},
        {"hidden_dim", file->ffn_dim, mt_llama_ffn_dim(model)},
        {"n_layers", file->n_layers, model->n_layers},
        {"n_heads", file->n_heads, model->n_heads},
        {"n_kv_heads", file->n_kv_heads, model->n_kv_heads},
        {"vocab_size", file->vocab, model->vocab},
        {"head size dim / n_heads (the model's head_dim)", mt_llama_head_dim(file),
         mt_llama_head_dim(model)},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].file != f[i].model)
            return mt_fail(MT_ESHAPE, "%s '%s' has %s = %d but the model has %d; build the "
                           "model from mt_llama2c_read_config's config", WHAT, path, f[i].name,
                           f[i].file, f[i].model);
    return check_runnable(path, model);
}

mt_status mt_llama2c_load(const char *path, mt_graph *g, const mt_llama_config *cfg) {
    if (!path || !g || !cfg)
        return mt_fail(MT_EINVAL, "mt_llama2c_load: path, g or cfg is NULL");
    mt_llama_config c;
    FILE *f = NULL;
    mt_status s = open_checkpoint(path, &c, &f);
    if (s == MT_OK) s = check_same_model(path, &c, cfg);
    if (s != MT_OK) {
        if (f) fclose(f);
        return s;
    }
    /* A shared classifier fills an untied model's head with the embedding
     * (the same logits); a separate one needs a head to go to. */
    bool head = !c.tie_embeddings || mt_graph_find(g, CLASSIFIER.name);
    if (!c.tie_embeddings && !mt_graph_find(g, CLASSIFIER.name))
        s = mt_fail(MT_ESHAPE, "llama2.c checkpoint '%s' has a classifier of its own "
                    "(negative vocab_size) but the graph has no '%s': build the model with "
                    "untied embeddings", path, CLASSIFIER.name);
    if (s == MT_OK) s = check_graph(g, path, &c, head);
    if (s == MT_OK) s = check_finite(path, f, &c);

    int64_t at = HEADER_BYTES;
    for (int i = 0; s == MT_OK && i < N_BODY; i++)
        for (int l = 0; s == MT_OK && l < n_layers_of(&l2c_tensors[i], &c); l++) {
            s = read_into(g, path, f, at, &l2c_tensors[i], l, &c);
            at += 4 * entry_numel(&l2c_tensors[i], &c);
        }
    at += 4 * rope_floats(&c);
    if (s == MT_OK && head)
        s = read_into(g, path, f, c.tie_embeddings ? HEADER_BYTES : at, &CLASSIFIER, 0, &c);
    fclose(f);
    mt_graph_params_changed(g);
    return s;
}

/* ------------------------------------------------------------------------ */
/* Save                                                                      */
/* ------------------------------------------------------------------------ */

/* Writes export.py's RoPE table, which run.c skips: cos then sin of
 * t · theta^(-2i/HS), (seq_len, HS/2) each, computed in float as
 * model.py's precompute_freqs_cis does (close to torch's, not bitwise). */
static mt_status write_rope(FILE *f, const mt_llama_config *c, int *err) {
    int hs = c->dim / c->n_heads, half = hs / 2;
    float *row = malloc((size_t)half * sizeof *row);   /* (HS/2) */
    if (!row) return MT_ENOMEM;
    mt_status s = MT_OK;
    for (int part = 0; s == MT_OK && part < 2; part++)
        for (int t = 0; s == MT_OK && t < c->max_seq; t++) {
            for (int i = 0; i < half; i++) {
                float freq = 1.0f / powf(L2C_THETA, (float)(2 * i) / (float)hs);
                float a = (float)t * freq;
                row[i] = part == 0 ? cosf(a) : sinf(a);
            }
            if (fwrite(row, sizeof *row, (size_t)half, f) != (size_t)half) {
                *err = errno;
                s = MT_EIO;
            }
        }
    free(row);
    return s;
}

static mt_status write_tensor(FILE *f, mt_graph *g, const char *path, const l2c_tensor *e,
                              int layer, const mt_llama_config *c, int *err) {
    mt_tensor *t = NULL;
    mt_status s = find_tensor(g, path, e, layer, c, &t);   /* checked by check_graph */
    if (s != MT_OK) return s;
    return mt__fwrite_backend(f, mt__tensor_backend(t), mt__tensor_buffer(t),
                              (size_t)entry_numel(e, c) * sizeof(float), NULL, err);
}

/* Written through the claim's temporary file, fsynced and renamed over the
 * target (files.c): a crash leaves the old file or the new one. */
static mt_status l2c_save(const char *path, mt_output *claim, const mt_llama_config *in,
                          mt_graph *g) {
    if (!path || !g || !in)
        return mt_fail(MT_EINVAL, "mt_llama2c_save: path, cfg or g is NULL");
    mt_llama_config c = *in;
    c.ffn_dim = mt_llama_ffn_dim(in);
    const mt_llama_config *cfg = &c;
    mt_status s = check_sizes("model config", path, cfg);
    if (s == MT_OK) s = check_runnable(path, cfg);
    if (s == MT_OK) s = check_graph(g, path, cfg, !cfg->tie_embeddings);
    if (s != MT_OK) return s;

    mt__save sv;
    if ((s = mt__save_begin(path, WHAT, claim, &sv)) != MT_OK) return s;
    FILE *f = sv.f;
    int32_t h[7] = {cfg->dim, cfg->ffn_dim, cfg->n_layers, cfg->n_heads, cfg->n_kv_heads,
                    cfg->tie_embeddings ? cfg->vocab : -cfg->vocab, cfg->max_seq};
    int err = 0;
    s = fwrite(h, sizeof h, 1, f) == 1 ? MT_OK : (err = errno, MT_EIO);
    for (int i = 0; s == MT_OK && i < N_BODY; i++)
        for (int l = 0; s == MT_OK && l < n_layers_of(&l2c_tensors[i], cfg); l++)
            s = write_tensor(f, g, path, &l2c_tensors[i], l, cfg, &err);
    if (s == MT_OK) s = write_rope(f, cfg, &err);
    if (s == MT_OK && !cfg->tie_embeddings)
        s = write_tensor(f, g, path, &CLASSIFIER, 0, cfg, &err);

    return mt__weights_save_end(&sv, s, err, WHAT, path);
}

mt_status mt_llama2c_save(const char *path, const mt_llama_config *cfg, mt_graph *g) {
    return l2c_save(path, NULL, cfg, g);
}

mt_status mt_llama2c_save_to(mt_output *out, const mt_llama_config *cfg, mt_graph *g) {
    if (!out) return mt_fail(MT_EINVAL, "mt_llama2c_save_to: out is NULL");
    return l2c_save(mt_output_path(out), out, cfg, g);
}
