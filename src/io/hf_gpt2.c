/*
 * hf_gpt2.c — a GPT-2 from and to a Hugging Face directory (issue 43):
 * GPT2LMHeadModel's config.json and safetensors, into meshtrain's GPT
 * (llm.c's layout).
 *
 * transformers' GPT-2 stores its linear layers as Conv1D, weight (in, out)
 * with y = x·W + b, where meshtrain (and llm.c) store (out, in): c_attn,
 * attn.c_proj, mlp.c_fc and mlp.c_proj are transposed both ways; c_attn's
 * (C, 3C) is q, k, v side by side, meshtrain's (3, C, C) the same three
 * after the transpose. The head is the token embedding (tied; a separate
 * lm_head.weight must equal it). Names come with or without the
 * "transformer." prefix (the hub's gpt2 files have none, save_pretrained
 * writes it); the attention's causal-mask buffers (attn.bias,
 * attn.masked_bias) that older files carry are skipped. meshtrain pads the
 * vocabulary to Vp rows: the rows past V load as zeros and are not saved.
 */
#include "base/json.h"
#include "io/hf_impl.h"
#include "io/io_impl.h"
#include "io/safetensors_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define WHAT "Hugging Face GPT-2"

/* The pairs: transformers' suffix (after "transformer."), meshtrain's
 * name, and whether the 2-D weight is transposed (Conv1D). */
static const struct { const char *hf, *mt; bool conv; } BLOCK[] = {
    {"h.%d.ln_1.weight", "h.%d.ln_1.w", false},   {"h.%d.ln_1.bias", "h.%d.ln_1.b", false},
    {"h.%d.attn.c_attn.weight", "h.%d.attn.qkv.w", true},
    {"h.%d.attn.c_attn.bias", "h.%d.attn.qkv.b", false},
    {"h.%d.attn.c_proj.weight", "h.%d.attn.proj.w", true},
    {"h.%d.attn.c_proj.bias", "h.%d.attn.proj.b", false},
    {"h.%d.ln_2.weight", "h.%d.ln_2.w", false},   {"h.%d.ln_2.bias", "h.%d.ln_2.b", false},
    {"h.%d.mlp.c_fc.weight", "h.%d.mlp.fc.w", true},
    {"h.%d.mlp.c_fc.bias", "h.%d.mlp.fc.b", false},
    {"h.%d.mlp.c_proj.weight", "h.%d.mlp.proj.w", true},
    {"h.%d.mlp.c_proj.bias", "h.%d.mlp.proj.b", false},
};
enum { N_BLOCK = sizeof BLOCK / sizeof BLOCK[0] };
static const struct { const char *hf, *mt; } TOP[] = {
    {"wte.weight", "wte"}, {"wpe.weight", "wpe"}, {"ln_f.weight", "ln_f.w"},
    {"ln_f.bias", "ln_f.b"}};
enum { N_TOP = sizeof TOP / sizeof TOP[0] };

/* Pair i of L blocks: its suffix, meshtrain's name, conv. */
static void pair_at(int i, char *hf, char *mt, bool *conv) {
    *conv = false;
    if (i < N_TOP) {
        snprintf(hf, MT_MAX_NAME, "%s", TOP[i].hf);
        snprintf(mt, MT_MAX_NAME, "%s", TOP[i].mt);
        return;
    }
    const int l = (i - N_TOP) / N_BLOCK, k = (i - N_TOP) % N_BLOCK;
    snprintf(hf, MT_MAX_NAME, BLOCK[k].hf, l);
    snprintf(mt, MT_MAX_NAME, BLOCK[k].mt, l);
    *conv = BLOCK[k].conv;
}

/* The file's tensor of suffix `hf`, with or without "transformer.". */
static const mt_st_tensor *find(const mt_safetensors *st, const char *hf) {
    char name[MT_MAX_NAME + 16];
    snprintf(name, sizeof name, "transformer.%s", hf);
    const mt_st_tensor *t = mt_safetensors_find(st, name);
    return t ? t : mt_safetensors_find(st, hf);
}

/* out (cols, rows) = w (rows, cols)ᵀ */
static void transpose(float *out, const float *w, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) out[c * rows + r] = w[r * cols + c];
}

/* Reads x, whose shape must be (r, c) (c 0: (r)), whole into v. */
static mt_status read_whole(const mt_safetensors *st, const mt_st_tensor *x, int64_t r, int64_t c,
                            float *v, const char *dir) {
    if (x->ndim != (c ? 2 : 1) || x->shape[0] != r || (c && x->shape[1] != c)) {
        char want[64];
        snprintf(want, sizeof want, c ? "(%lld,%lld)" : "(%lld)", (long long)r, (long long)c);
        return mt_fail(MT_ESHAPE, WHAT " '%s': tensor '%s' has shape %s where config.json's "
                       "model has %s", dir, x->name, mt__st_shape_str(x).s, want);
    }
    const int64_t n = r * (c ? c : 1);
    mt_status s = mt_safetensors_read_f32(st, x, 0, n, v);
    for (int64_t i = 0; s == MT_OK && i < n; i++)
        if (!isfinite(v[i]))
            s = mt_fail(MT_ENAN, WHAT " '%s': tensor '%s' holds %g at element %lld", dir,
                        x->name, v[i], (long long)i);
    return s;
}

/* mt_hf_load_gpt2, or with part mt_hf_load_gpt2_part. */
static mt_status load_gpt2(const char *dir, mt_graph *g, const mt_gpt_config *cfg, bool part) {
    mt_safetensors *st = NULL;
    mt_status s = mt_safetensors_open(dir, &st);
    if (s != MT_OK) return s;
    const int64_t C = cfg->C, V = cfg->V;
    const int n_pairs = N_TOP + N_BLOCK * cfg->L;
    int64_t cap = (int64_t)cfg->Vp * C > 16 * C * C ? (int64_t)cfg->Vp * C : 16 * C * C;
    if (cap < (int64_t)cfg->maxT * C) cap = (int64_t)cfg->maxT * C;
    float *v = malloc((size_t)cap * sizeof *v), *w = malloc((size_t)cap * sizeof *w);
    if (!v || !w) s = mt_fail(MT_ENOMEM, WHAT " '%s': buffers", dir);
    for (int i = 0; s == MT_OK && i < n_pairs; i++) {
        char hf[MT_MAX_NAME], mt[MT_MAX_NAME];
        bool conv;
        pair_at(i, hf, mt, &conv);
        const mt_st_tensor *x = find(st, hf);
        mt_tensor *t = mt_graph_find(g, mt);
        if (!x) { s = mt_fail(MT_EFORMAT, WHAT " '%s': no tensor '%s'", dir, hf); break; }
        if (!t && part) continue;   /* another stage's */
        if (!t) {
            s = mt_fail(MT_EINVAL, WHAT " '%s': the graph has no parameter '%s'", dir, mt);
            break;
        }
        const int nd = mt_tensor_ndim(t);
        int64_t n = 1;
        for (int d = 0; d < nd; d++) n *= mt_tensor_global_dim(t, d);
        const bool wte = !strcmp(mt, "wte");
        /* Hugging Face's shape: Conv1D (in, out) of meshtrain's (.., in),
           the embeddings (rows, C), every other one 1-D */
        const int64_t in = mt_tensor_global_dim(t, nd - 1);
        const bool emb = wte || !strcmp(mt, "wpe");
        const int64_t r = wte ? V : emb ? n / C : conv ? in : n;
        const int64_t c = emb ? C : conv ? n / in : 0;
        if ((s = read_whole(st, x, r, c, v, dir)) != MT_OK) break;
        if (wte) memset(v + V * C, 0, (size_t)((cfg->Vp - V) * C) * sizeof *v);   /* padding */
        if (conv) transpose(w, v, x->shape[0], x->shape[1]);   /* (in,out) -> (out,in) */
        /* a device's block kept; whole tensors read (a Conv1D's rows are
           meshtrain's columns) */
        s = mt_tensor_write_global(t, conv ? w : v, 0, n);
    }
    /* the rest: a tied head equal to the embedding, the mask buffers */
    for (int i = 0; s == MT_OK && i < mt_safetensors_count(st); i++) {
        const mt_st_tensor *x = mt_safetensors_tensor(st, i);
        const char *name = x->name;
        if (!strncmp(name, "transformer.", 12)) name += 12;
        const size_t len = strlen(name);
        if ((len > 10 && !strcmp(name + len - 10, ".attn.bias")) ||
            (len > 17 && !strcmp(name + len - 17, ".attn.masked_bias")))
            continue;
        bool known = false, conv;
        for (int j = 0; !known && j < n_pairs; j++) {
            char hf[MT_MAX_NAME], mt[MT_MAX_NAME];
            pair_at(j, hf, mt, &conv);
            known = !strcmp(hf, name);
        }
        if (known) continue;
        if (!strcmp(name, "lm_head.weight")) {   /* tied: it must be the embedding */
            const mt_st_tensor *e = find(st, "wte.weight");
            if ((s = read_whole(st, x, V, C, w, dir)) == MT_OK &&
                (s = read_whole(st, e, V, C, v, dir)) == MT_OK && memcmp(v, w, (size_t)(V * C) * 4))
                s = mt_fail(MT_EUNSUPPORTED, WHAT " '%s': lm_head.weight differs from wte.weight: "
                            "meshtrain's GPT ties its head to the embedding", dir);
            continue;
        }
        s = mt_fail(MT_EUNSUPPORTED, WHAT " '%s': tensor '%s' is not a weight of the GPT-2 "
                    "config.json describes", dir, x->name);
    }
    free(v), free(w);
    mt_safetensors_close(st);
    if (s == MT_OK) mt_graph_params_changed(g);
    return s;
}

mt_status mt_hf_load_gpt2(const char *dir, mt_graph *g, const mt_gpt_config *cfg) {
    return load_gpt2(dir, g, cfg, false);
}

mt_status mt_hf_load_gpt2_part(const char *dir, mt_graph *g, const mt_gpt_config *cfg) {
    return load_gpt2(dir, g, cfg, true);
}

mt_status mt_hf_save_gpt2(const char *dir, const mt_gpt_config *cfg, mt_graph *g) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return mt_fail(MT_EIO, WHAT " '%s': cannot make the directory: %s", dir,
                       strerror(errno));
    const int n_pairs = N_TOP + N_BLOCK * cfg->L;
    const int64_t C = cfg->C;
    mt_st_write_tensor *wt = calloc((size_t)n_pairs, sizeof *wt);
    char (*names)[MT_MAX_NAME + 16] = calloc((size_t)n_pairs, sizeof *names);
    int64_t (*shapes)[2] = calloc((size_t)n_pairs, sizeof *shapes);
    float **data = calloc((size_t)n_pairs, sizeof *data);
    mt_status s = wt && names && shapes && data ? MT_OK : mt_fail(MT_ENOMEM, WHAT " tables");
    for (int i = 0; s == MT_OK && i < n_pairs; i++) {
        char hf[MT_MAX_NAME], mt[MT_MAX_NAME];
        bool conv;
        pair_at(i, hf, mt, &conv);
        snprintf(names[i], sizeof names[i], "transformer.%s", hf);
        mt_tensor *t = mt_graph_find(g, mt);
        if (!t) { s = mt_fail(MT_EINVAL, WHAT " '%s': the graph has no '%s'", dir, mt); break; }
        const int nd = mt_tensor_ndim(t);
        int64_t n = 1, dims[3] = {1, 1, 1};
        for (int d = 0; d < nd && d < 3; d++) n *= (dims[d] = mt_tensor_global_dim(t, d));
        float *v = malloc((size_t)n * sizeof *v), *o = conv ? malloc((size_t)n * sizeof *o) : NULL;
        if (!v || (conv && !o)) { free(v), free(o); s = mt_fail(MT_ENOMEM, WHAT); break; }
        if ((s = mt_tensor_read(t, v, 0, n)) != MT_OK) { free(v), free(o); break; }
        /* (out, in) -> Conv1D's (in, out); qkv's (3, C, C) is (3C, C) */
        const int64_t rows = nd == 3 ? dims[0] * dims[1] : dims[0], cols = nd == 1 ? 1 : dims[nd - 1];
        if (conv) { transpose(o, v, rows, cols); free(v); v = o; }
        const bool wte = !strcmp(mt, "wte"), emb = wte || !strcmp(mt, "wpe");
        /* Conv1D (in, out); the embeddings (rows, C), V rows of wte's Vp;
           every other one 1-D (qkv.b's (3, C) is c_attn.bias's 3C) */
        shapes[i][0] = wte ? cfg->V : emb ? rows : conv ? cols : n;
        shapes[i][1] = conv ? rows : C;
        data[i] = v;
        wt[i] = (mt_st_write_tensor){names[i], MT_ST_F32, emb || conv ? 2 : 1, shapes[i], v};
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    const char *meta[] = {"format", "pt", NULL};
    if (s == MT_OK) s = mt_safetensors_write(path, wt, n_pairs, meta);
    if (s == MT_OK) s = mt__hf_write_gpt2_config(dir, cfg);
    for (int i = 0; data && i < n_pairs; i++) free(data[i]);
    free(wt), free(names), free(shapes), free(data);
    return s;
}
