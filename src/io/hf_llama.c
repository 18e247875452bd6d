/*
 * hf_llama.c — a LLaMA's weights from and to a Hugging Face directory
 * (issue 43): model.safetensors (or its shards and index) with
 * transformers' names, into a compiled graph of meshtrain's names.
 *
 * Both store a linear layer's weight (out, in), so every tensor is copied
 * as it is, but for RoPE's layout: transformers rotates the halves of each
 * head (x_j with x_{j+HS/2}: its rotate_half), Meta's code, llama2.c and
 * meshtrain rotate adjacent pairs (x_{2j} with x_{2j+1}), each pair j at
 * the frequency theta^(-2j/HS) in both. transformers' conversion script
 * (convert_llama_weights_to_hf.py, permute) reorders q_proj's and k_proj's
 * rows per head so that the two compute the same: row h·HS + a·HS/2 + j of
 * Hugging Face's is row h·HS + 2j + a of Meta's (a in {0, 1}). Loading
 * applies that map backwards, saving forwards; to Qwen2's q and k biases
 * too, and to Qwen3's q_norm and k_norm scales within their one head (the
 * norm's mean square does not depend on the channels' order). A mixture
 * of experts' router and experts are hf_moe.c's; a MoE block has no dense
 * mlp.* tensors.
 */
#include "io/hf_impl.h"
#include "io/io_impl.h"
#include "io/safetensors_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WHAT "Hugging Face model"

/* How a tensor's rows are reordered: not at all, or per head as q_proj's
 * and k_proj's rows (ROWS_Q, ROWS_K: C columns), their biases (one column)
 * or, within the one head it spans, Qwen3's q_norm and k_norm scales
 * (ROWS_HEAD: they scale the head's channels before RoPE). */
typedef enum { ROWS_AS_IS, ROWS_Q, ROWS_K, ROWS_Q_BIAS, ROWS_K_BIAS, ROWS_HEAD } rows_kind;

/* A block's tensors; `only` 1: with qkv_bias, 2: with qk_norm, 3: in a
 * dense block (a MoE block's are hf_moe.c's). */
static const struct { const char *hf, *mt; rows_kind rows; int only; } NAMES[] = {
    {"model.layers.%d.input_layernorm.weight", "h.%d.attn_norm.w", ROWS_AS_IS, 0},
    {"model.layers.%d.self_attn.q_proj.weight", "h.%d.attn.wq.w", ROWS_Q, 0},
    {"model.layers.%d.self_attn.k_proj.weight", "h.%d.attn.wk.w", ROWS_K, 0},
    {"model.layers.%d.self_attn.v_proj.weight", "h.%d.attn.wv.w", ROWS_AS_IS, 0},
    {"model.layers.%d.self_attn.o_proj.weight", "h.%d.attn.wo.w", ROWS_AS_IS, 0},
    {"model.layers.%d.post_attention_layernorm.weight", "h.%d.ffn_norm.w", ROWS_AS_IS, 0},
    {"model.layers.%d.mlp.gate_proj.weight", "h.%d.ffn.w1.w", ROWS_AS_IS, 3},
    {"model.layers.%d.mlp.up_proj.weight", "h.%d.ffn.w3.w", ROWS_AS_IS, 3},
    {"model.layers.%d.mlp.down_proj.weight", "h.%d.ffn.w2.w", ROWS_AS_IS, 3},
    {"model.layers.%d.self_attn.q_proj.bias", "h.%d.attn.wq.b", ROWS_Q_BIAS, 1},
    {"model.layers.%d.self_attn.k_proj.bias", "h.%d.attn.wk.b", ROWS_K_BIAS, 1},
    {"model.layers.%d.self_attn.v_proj.bias", "h.%d.attn.wv.b", ROWS_AS_IS, 1},
    {"model.layers.%d.self_attn.q_norm.weight", "h.%d.attn.q_norm.w", ROWS_HEAD, 2},
    {"model.layers.%d.self_attn.k_norm.weight", "h.%d.attn.k_norm.w", ROWS_HEAD, 2},
};
enum { N_BLOCK = sizeof NAMES / sizeof NAMES[0] };
static const struct { const char *hf, *mt; } TOP[] = {
    {"model.embed_tokens.weight", "tok_emb.w"}, {"model.norm.weight", "norm.w"},
    {"lm_head.weight", "lm_head.w"}};

/* The tensor pairs of cfg, in order: i < 3 the top ones (lm_head only
 * untied), then N_BLOCK a block. Fills hf, mt (size MT_MAX_NAME) and
 * *rows; false past the end or for a pair cfg lacks. */
static bool pair_at(const mt_llama_config *c, int i, char *hf, char *mt, rows_kind *rows) {
    *rows = ROWS_AS_IS;
    if (i < 3) {
        if (i == 2 && c->tie_embeddings) return false;
        snprintf(hf, MT_MAX_NAME, "%s", TOP[i].hf);
        snprintf(mt, MT_MAX_NAME, "%s", TOP[i].mt);
        return true;
    }
    const int l = (i - 3) / N_BLOCK, k = (i - 3) % N_BLOCK;
    if ((NAMES[k].only == 1 && !c->qkv_bias) || (NAMES[k].only == 2 && !c->qk_norm) ||
        (NAMES[k].only == 3 && mt_llama_moe_block(c, l)))
        return false;
    snprintf(hf, MT_MAX_NAME, NAMES[k].hf, l);
    snprintf(mt, MT_MAX_NAME, NAMES[k].mt, l);
    *rows = NAMES[k].rows;
    return true;
}

/* Reorders the rows of w (heads·HS rows of `cols`) between the layouts:
 * to_meshtrain: out's row h·HS + 2j + a = w's row h·HS + a·HS/2 + j; else
 * the inverse. */
static void permute_heads(float *out, const float *w, int64_t heads, int64_t HS, int64_t cols,
                          bool to_meshtrain) {
    for (int64_t h = 0; h < heads; h++)
        for (int64_t j = 0; j < HS / 2; j++)
            for (int a = 0; a < 2; a++) {
                const int64_t mt = h * HS + 2 * j + a, hf = h * HS + a * (HS / 2) + j;
                memcpy(out + (to_meshtrain ? mt : hf) * cols,
                       w + (to_meshtrain ? hf : mt) * cols, (size_t)cols * sizeof *out);
            }
}

/* permute_heads for a tensor of kind rows (not ROWS_AS_IS) of c. */
static void permute_rows(float *out, const float *w, rows_kind rows, const mt_llama_config *c,
                         bool to_meshtrain) {
    const int64_t heads = rows == ROWS_Q || rows == ROWS_Q_BIAS ? c->n_heads
                          : rows == ROWS_HEAD                  ? 1
                                                               : c->n_kv_heads;
    const int64_t cols = rows == ROWS_Q || rows == ROWS_K ? c->dim : 1;
    permute_heads(out, w, heads, mt_llama_head_dim(c), cols, to_meshtrain);
}

static int64_t numel_of(const mt_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < mt_tensor_ndim(t); d++) n *= mt_tensor_global_dim(t, d);
    return n;
}

/* One tensor: checks its shape against t's, reads the rows t's block
 * spans (whole heads where they are reordered: the map keeps each head's
 * rows within it), reorders them, writes t's part. */
static mt_status load_one(const mt_safetensors *st, const mt_st_tensor *x, mt_tensor *t,
                          rows_kind rows, const mt_llama_config *c, const char *dir,
                          float **buf, float **tmp) {
    int64_t dims[8];
    const int nd = mt_tensor_ndim(t) < 8 ? mt_tensor_ndim(t) : 8;
    for (int d = 0; d < nd; d++) dims[d] = mt_tensor_global_dim(t, d);
    const int64_t HS = mt_llama_head_dim(c), cols = numel_of(t) / dims[0];
    int64_t r0, r1;
    mt__hf_rows_of(t, rows == ROWS_AS_IS ? 1 : HS, &r0, &r1);
    mt_status s = mt__hf_read_checked(st, x, nd, dims, r0, r1, dir, buf);
    if (s != MT_OK) return s;
    const int64_t n = (r1 - r0) * cols;
    float *p = *buf;
    if (rows != ROWS_AS_IS) {
        float *q = realloc(*tmp, (size_t)(n > 0 ? n : 1) * sizeof *q);
        if (!q)
            return mt_fail(MT_ENOMEM, WHAT " '%s': %lld floats for tensor '%s'", dir,
                           (long long)n, x->name);
        *tmp = q;
        permute_heads(q, p, (r1 - r0) / HS, HS, cols, true);
        p = q;
    }
    return mt_tensor_write_global(t, p, r0 * cols, n);
}

/* Whether `name` is a tensor of cfg: a dense one (pair_at) or a MoE one. */
static bool known_tensor(const mt_llama_config *cfg, const char *name) {
    char hf[MT_MAX_NAME], mt[MT_MAX_NAME];
    rows_kind rows;
    for (int j = 0; j < 3 + N_BLOCK * cfg->n_layers; j++)
        if (pair_at(cfg, j, hf, mt, &rows) && !strcmp(hf, name)) return true;
    return mt__hf_moe_known(cfg, name);
}

/* mt_hf_load_llama, or with part mt_hf_load_llama_part. */
static mt_status load_llama(const char *dir, mt_graph *g, const mt_llama_config *cfg, bool part) {
    mt_safetensors *st = NULL;
    mt_status s = mt_safetensors_open(dir, &st);
    if (s != MT_OK) return s;
    const int n_pairs = 3 + N_BLOCK * cfg->n_layers;
    float *buf = NULL, *tmp = NULL;
    int used = 0;
    for (int i = 0; s == MT_OK && i < n_pairs; i++) {
        char hf[MT_MAX_NAME], mt[MT_MAX_NAME];
        rows_kind rows;
        if (!pair_at(cfg, i, hf, mt, &rows)) continue;
        const mt_st_tensor *x = mt_safetensors_find(st, hf);
        mt_tensor *t = mt_graph_find(g, mt);
        if (!x) s = mt_fail(MT_EFORMAT, WHAT " '%s': no tensor '%s' (meshtrain's '%s')", dir, hf,
                            mt);
        else if (!t && !part) s = mt_fail(MT_EINVAL, WHAT " '%s': the graph has no parameter "
                                          "'%s' for '%s'; build it from the directory's "
                                          "config.json", dir, mt, hf);
        else if (t && (s = load_one(st, x, t, rows, cfg, dir, &buf, &tmp)) == MT_OK) used++;
    }
    if (s == MT_OK && cfg->moe.experts) s = mt__hf_load_moe(st, g, cfg, dir, &used);
    /* every tensor of the files taken (the rotary tables older releases
       saved are buffers, recomputed from the config): the names are
       unique, so counting suffices; the search names the one left */
    int rotary = 0;
    for (int i = 0; i < mt_safetensors_count(st); i++) {
        const char *name = mt_safetensors_tensor(st, i)->name;
        const size_t len = strlen(name);
        rotary += len > 21 && !strcmp(name + len - 21, ".rotary_emb.inv_freq");
    }
    for (int i = 0; s == MT_OK && used + rotary != mt_safetensors_count(st) &&
                    i < mt_safetensors_count(st); i++) {
        const char *name = mt_safetensors_tensor(st, i)->name;
        const size_t len = strlen(name);
        if (len > 21 && !strcmp(name + len - 21, ".rotary_emb.inv_freq")) continue;
        if (!known_tensor(cfg, name))
            s = mt_fail(MT_EUNSUPPORTED, WHAT " '%s': tensor '%s' (in '%s') is not a weight of "
                        "the LLaMA config.json describes (biases its architecture lacks, "
                        "extra layers or experts, a tied head given twice?)", dir, name,
                        mt_safetensors_file(st, mt_safetensors_tensor(st, i)));
    }
    free(buf), free(tmp);
    mt_safetensors_close(st);
    if (s == MT_OK) mt_graph_params_changed(g);
    return s;
}

mt_status mt_hf_load_llama(const char *dir, mt_graph *g, const mt_llama_config *cfg) {
    return load_llama(dir, g, cfg, false);
}

mt_status mt_hf_load_llama_part(const char *dir, mt_graph *g, const mt_llama_config *cfg) {
    return load_llama(dir, g, cfg, true);
}

mt_status mt_hf_save_llama(const char *dir, const mt_llama_config *cfg, mt_graph *g) {
    mt_status s = mt_hf_llama_writable(dir, cfg);
    if (s != MT_OK) return s;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return mt_fail(MT_EIO, WHAT " '%s': cannot make the directory: %s", dir,
                       strerror(errno));
    const int n_pairs = 3 + N_BLOCK * cfg->n_layers;
    int n_moe = 0;
    for (int l = 0; l < cfg->n_layers; l++) n_moe += mt_llama_moe_block(cfg, l);
    mt__hf_out o = {.cap = n_pairs + n_moe * (1 + 3 * cfg->moe.experts)};
    o.w = calloc((size_t)o.cap, sizeof *o.w);
    o.names = calloc((size_t)o.cap, MT_MAX_NAME);
    o.shapes = calloc((size_t)o.cap, sizeof *o.shapes);
    o.data = calloc((size_t)o.cap, sizeof *o.data);
    if (!o.w || !o.names || !o.shapes || !o.data)
        s = mt_fail(MT_ENOMEM, WHAT " '%s': tables", dir);
    for (int i = 0; s == MT_OK && i < n_pairs; i++) {
        char mt[MT_MAX_NAME];
        rows_kind rows;
        if (!pair_at(cfg, i, o.names[o.n], mt, &rows)) continue;
        mt_tensor *t = mt_graph_find(g, mt);
        if (!t) {
            s = mt_fail(MT_EINVAL, WHAT " '%s': the graph has no parameter '%s'", dir, mt);
            break;
        }
        const int64_t numel = numel_of(t);
        float *v = malloc((size_t)numel * sizeof *v), *q = NULL;
        if (!v || (s = mt_tensor_read(t, v, 0, numel)) != MT_OK) {
            free(v);
            if (s == MT_OK) s = mt_fail(MT_ENOMEM, WHAT " '%s': tensor '%s'", dir, mt);
            break;
        }
        if (rows != ROWS_AS_IS) {
            if (!(q = malloc((size_t)numel * sizeof *q))) {
                free(v);
                s = mt_fail(MT_ENOMEM, WHAT " '%s': tensor '%s'", dir, mt);
                break;
            }
            permute_rows(q, v, rows, cfg, false);
            free(v);
            v = q;
        }
        int64_t dims[2] = {mt_tensor_global_dim(t, 0),
                           mt_tensor_ndim(t) > 1 ? mt_tensor_global_dim(t, 1) : 0};
        mt__hf_out_add(&o, mt_tensor_ndim(t), dims, v);
    }
    if (s == MT_OK && n_moe) s = mt__hf_save_moe(g, cfg, dir, &o);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    const char *meta[] = {"format", "pt", NULL};   /* what transformers' loader expects */
    if (s == MT_OK) s = mt_safetensors_write(path, o.w, o.n, meta);
    if (s == MT_OK) s = mt__hf_write_llama_config(dir, cfg);
    for (int i = 0; o.data && i < o.cap; i++) free(o.data[i]);
    free(o.w), free(o.names), free(o.shapes), free(o.data);
    return s;
}
