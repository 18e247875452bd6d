/*
 * test_llama2c.c — llama2.c's model.bin and tokenizer.bin (io/llama2c.c,
 * io/llama2c_tok.c).
 *
 * Expected values come from outside the code under test: files written
 * byte by byte here from run.c's read_checkpoint / memory_map_weights and
 * build_tokenizer, with every tensor's offset in a hand-written table, and
 * the bytes of a tokenizer.bin written out by hand. The round trip compares
 * bit patterns of values the test chose. Every case works in its own
 * mkdtemp directory.
 */
#include "meshtrain.h"
#include "harness.h"
#include "llama_ref.h"

#include <dirent.h>
#include <stdint.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* A case's directory, `path` its main file. */
typedef struct { char dir[64]; char buf[160]; char path[160]; } workdir;

static const char *at(workdir *w, const char *name);

static void work_open(workdir *w, const char *file) {
    snprintf(w->dir, sizeof w->dir, "/tmp/mt_test_l2c_XXXXXX");
    MT_CHECK(mkdtemp(w->dir) != NULL, "mkdtemp failed");
    snprintf(w->path, sizeof w->path, "%s", at(w, file));
}

/* `name` inside the directory; valid until the next call. */
static const char *at(workdir *w, const char *name) {
    snprintf(w->buf, sizeof w->buf, "%s/%s", w->dir, name);
    return w->buf;
}

static void work_close(workdir *w) {
    DIR *d = opendir(w->dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", w->dir, e->d_name);
            unlink(p);
        }
    if (d) closedir(d);
    rmdir(w->dir);
}

/* A message is one line. */
#define CHECK_ONE_LINE() MT_CHECK(!strchr(mt_errmsg(), '\n'), "message spans lines: %s", \
                                  mt_errmsg())

/* The llama parameters of models.h for cfg, each summed into the loss so
 * every one is used, compiled; `transpose` (a name or NULL) swaps that
 * matrix's shape, `skip` leaves one out. */
static mt_graph *param_graph(const mt_llama_config *c, const char *skip, const char *transpose) {
    int64_t C = c->dim, HS = c->dim / c->n_heads, KV = c->n_kv_heads * HS, F = c->ffn_dim;
    const struct { const char *name; int nd; int64_t d0, d1; } per_layer[] = {
        {"attn_norm.w", 1, C, 0}, {"attn.wq.w", 2, C, C},   {"attn.wk.w", 2, KV, C},
        {"attn.wv.w", 2, KV, C},  {"attn.wo.w", 2, C, C},   {"ffn_norm.w", 1, C, 0},
        {"ffn.w1.w", 2, F, C},    {"ffn.w2.w", 2, C, F},    {"ffn.w3.w", 2, F, C},
    };
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = NULL;
    int n_layer = (int)(sizeof per_layer / sizeof per_layer[0]);
    for (int k = -1; k < c->n_layers * n_layer + 2; k++) {
        char name[64];
        int64_t shape[2] = {C, C};
        int nd = 2;
        if (k == -1) { snprintf(name, sizeof name, "tok_emb.w"); shape[0] = c->vocab; }
        else if (k == c->n_layers * n_layer) { snprintf(name, sizeof name, "norm.w"); nd = 1; }
        else if (k > c->n_layers * n_layer) {
            if (c->tie_embeddings) continue;
            snprintf(name, sizeof name, "lm_head.w");
            shape[0] = c->vocab;
        } else {
            int l = k / n_layer, e = k % n_layer;
            snprintf(name, sizeof name, "h.%d.%s", l, per_layer[e].name);
            nd = per_layer[e].nd;
            shape[0] = per_layer[e].d0;
            shape[1] = per_layer[e].d1;
        }
        if (skip && strcmp(name, skip) == 0) continue;
        if (transpose && strcmp(name, transpose) == 0) {
            int64_t t = shape[0]; shape[0] = shape[1]; shape[1] = t;
        }
        mt_tensor *s = mt_sum(g, mt_param(g, name, nd, shape, (mt_init){MT_INIT_NORMAL, 0.02f}));
        loss = loss ? mt_add(g, loss, s) : s;
    }
    mt_compile_opts opts = {.seed = 3};
    MT_CHECK_OK(mt_graph_compile(g, loss, &opts));
    return g;
}

static float *read_param(mt_graph *g, const char *name, int64_t *n) {
    mt_tensor *t = mt_graph_find(g, name);
    MT_CHECK(t != NULL, "no tensor %s", name);
    *n = mt_tensor_numel(t);
    float *v = malloc((size_t)*n * sizeof *v);
    MT_CHECK_OK(mt_tensor_read(t, v, 0, *n));
    return v;
}

/* ------------------------------------------------------------------------ */
/* A hand-built model.bin                                                    */
/* ------------------------------------------------------------------------ */

/* dim 4, hidden 8, 1 layer, 2 heads, 1 kv head (HS 2, kv_dim 2), V 5, seq 4.
 * Float k of the data holds the value k. Offsets (in floats after the
 * 28-byte header) from run.c's memory_map_weights, worked out by hand. */
static const struct { const char *name; int64_t offset, n; } hand_layout[] = {
    {"tok_emb.w", 0, 20},          {"h.0.attn_norm.w", 20, 4}, {"h.0.attn.wq.w", 24, 16},
    {"h.0.attn.wk.w", 40, 8},      {"h.0.attn.wv.w", 48, 8},   {"h.0.attn.wo.w", 56, 16},
    {"h.0.ffn_norm.w", 72, 4},     {"h.0.ffn.w1.w", 76, 32},   {"h.0.ffn.w2.w", 108, 32},
    {"h.0.ffn.w3.w", 140, 32},     {"norm.w", 172, 4},
    /* 176..183: freq_cis real and imag, 4·2/2 each; then the classifier */
    {"lm_head.w", 184, 20},
};
#define HAND_SHARED_FLOATS 184
#define HAND_UNSHARED_FLOATS 204

static const mt_llama_config hand_cfg = {
    .dim = 4, .ffn_dim = 8, .n_layers = 1, .n_heads = 2, .n_kv_heads = 1, .vocab = 5,
    .max_seq = 4, .rope_theta = 10000.0f, .norm_eps = 1e-5f, .tie_embeddings = 0,
    .ffn_mult = 1.0f};

/* Float k of a hand-built file: k itself (to find each tensor's place), or
 * small exact values a model can run on (-11/16 .. 11/16). */
static float hand_value(int64_t k, bool small) {
    return small ? (float)((k * 37) % 23 - 11) / 16.0f : (float)k;
}

/* The header h (7 int32) and n_floats floats hand_value(k); the float at
 * `nan_at` (if >= 0) is a NaN. */
static void write_model_by_hand(const char *path, const int32_t h[7], int64_t n_floats,
                                int64_t nan_at, bool small) {
    FILE *f = fopen(path, "wb");
    MT_CHECK(f != NULL, "cannot create %s", path);
    fwrite(h, sizeof(int32_t), 7, f);
    for (int64_t k = 0; k < n_floats; k++) {
        float v = k == nan_at ? NAN : hand_value(k, small);
        fwrite(&v, sizeof v, 1, f);
    }
    fclose(f);
}

static const int32_t hand_header[7] = {4, 8, 1, 2, 1, -5, 4};   /* unshared */

/* Opens w with the hand-built unshared file as its model.bin. */
static const char *hand_file(workdir *w, bool small) {
    work_open(w, "model.bin");
    write_model_by_hand(w->path, hand_header, HAND_UNSHARED_FLOATS, -1, small);
    return w->path;
}

MT_TEST(hand_built_file_every_tensor_in_place) {
    workdir w;
    const char *path = hand_file(&w, false);

    mt_llama_config c;
    MT_CHECK_OK(mt_llama2c_read_config(path, &c));
    MT_CHECK(c.dim == 4 && c.ffn_dim == 8 && c.n_layers == 1 && c.n_heads == 2 &&
             c.n_kv_heads == 1 && c.vocab == 5 && c.max_seq == 4 && c.tie_embeddings == 0,
             "header read as dim %d ffn %d L %d NH %d KV %d V %d T %d tie %d", c.dim,
             c.ffn_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab, c.max_seq,
             c.tie_embeddings);
    MT_CHECK(c.rope_theta == 10000.0f && c.norm_eps == 1e-5f, "run.c's theta and eps");
    MT_CHECK(c.head_dim == 2, "run.c's head size dim / n_heads: %d", c.head_dim);

    mt_graph *g = param_graph(&hand_cfg, NULL, NULL);
    MT_CHECK_OK(mt_llama2c_load(path, g, &hand_cfg));
    for (size_t i = 0; i < sizeof hand_layout / sizeof hand_layout[0]; i++) {
        int64_t n;
        float *v = read_param(g, hand_layout[i].name, &n);
        MT_CHECK(n == hand_layout[i].n, "%s has %lld elements", hand_layout[i].name,
                 (long long)n);
        for (int64_t e = 0; e < n; e++)
            MT_CHECK(v[e] == (float)(hand_layout[i].offset + e), "%s[%lld] = %g, want %lld",
                     hand_layout[i].name, (long long)e, (double)v[e],
                     (long long)(hand_layout[i].offset + e));
        free(v);
    }
    mt_graph_free(g);

    /* a shared classifier: the file ends at the RoPE table, and an untied
     * graph's head gets the embedding */
    int32_t shared[7] = {4, 8, 1, 2, 1, 5, 4};
    write_model_by_hand(path, shared, HAND_SHARED_FLOATS, -1, false);
    MT_CHECK_OK(mt_llama2c_read_config(path, &c));
    MT_CHECK(c.tie_embeddings == 1 && c.vocab == 5, "positive vocab_size is shared");
    g = param_graph(&hand_cfg, NULL, NULL);
    MT_CHECK_OK(mt_llama2c_load(path, g, &hand_cfg));
    int64_t n;
    float *head = read_param(g, "lm_head.w", &n);
    for (int64_t e = 0; e < n; e++)
        MT_CHECK(head[e] == (float)e, "lm_head.w[%lld] = %g, the embedding's", (long long)e,
                 (double)head[e]);
    free(head);
    mt_graph_free(g);
    work_close(&w);
}

/* ------------------------------------------------------------------------ */
/* Bad files                                                                 */
/* ------------------------------------------------------------------------ */

MT_TEST(bad_files_one_line_errors) {
    workdir w;
    work_open(&w, "bad.bin");
    const char *path = w.path;
    mt_llama_config c;

    write_model_by_hand(path, hand_header, HAND_UNSHARED_FLOATS - 1, -1, false);
    MT_CHECK_FAILS(mt_llama2c_read_config(path, &c), MT_EFORMAT, "truncated", "844", "840",
                   path);
    CHECK_ONE_LINE();
    write_model_by_hand(path, hand_header, HAND_UNSHARED_FLOATS + 1, -1, false);
    MT_CHECK_FAILS(mt_llama2c_read_config(path, &c), MT_EFORMAT, "too long");
    /* a shared header on an unshared file's bytes: inconsistent sizes */
    int32_t shared[7] = {4, 8, 1, 2, 1, 5, 4};
    write_model_by_hand(path, shared, HAND_UNSHARED_FLOATS, -1, false);
    MT_CHECK_FAILS(mt_llama2c_read_config(path, &c), MT_EFORMAT, "too long", "shared");
    write_model_by_hand(path, hand_header, 0, -1, false);
    FILE *f = fopen(path, "r+b");
    MT_CHECK(f && ftruncate(fileno(f), 10) == 0, "cannot cut %s", path);
    fclose(f);
    MT_CHECK_FAILS(mt_llama2c_read_config(path, &c), MT_EFORMAT, "28-byte header");

    const struct { int32_t h[7]; const char *says; } bad[] = {
        {{4, 8, -1, 2, 1, -5, 4}, "n_layers = -1"},
        {{-4, 8, 1, 2, 1, -5, 4}, "dim = -4"},
        {{4, 8, 1, 2, 1, 0, 4}, "vocab_size = 0"},
        {{4, 8, 1, 2, 1, INT32_MIN, 4}, "vocab_size"},
        {{4, 8, 1, 2, 0, -5, 4}, "n_kv_heads = 0"},
        {{5, 8, 1, 2, 1, -5, 4}, "not divisible by n_heads = 2"},
        {{8, 8, 1, 4, 3, -5, 4}, "n_kv_heads = 3, which does not divide n_heads = 4"},
        {{6, 8, 1, 2, 1, -5, 4}, "odd head size 3"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_model_by_hand(path, bad[i].h, HAND_UNSHARED_FLOATS, -1, false);
        MT_CHECK_FAILS(mt_llama2c_read_config(path, &c), MT_EFORMAT, bad[i].says, path);
        CHECK_ONE_LINE();
    }
    MT_CHECK_FAILS(mt_llama2c_read_config(at(&w, "none.bin"), &c), MT_EIO, "none.bin");

    /* the graph: a NaN weight, a missing tensor, a transposed one, no head */
    char model[160];
    snprintf(model, sizeof model, "%s", at(&w, "model.bin"));
    path = model;
    write_model_by_hand(path, hand_header, HAND_UNSHARED_FLOATS, 100, false);
    mt_graph *g = param_graph(&hand_cfg, NULL, NULL);
    int64_t n;
    float *before = read_param(g, "h.0.ffn.w1.w", &n);
    MT_CHECK_FAILS(mt_llama2c_load(path, g, &hand_cfg), MT_ENAN, "h.0.ffn.w1.w", "element 24");
    float *after = read_param(g, "h.0.ffn.w1.w", &n);
    MT_CHECK(memcmp(before, after, (size_t)n * sizeof *after) == 0, "a failed load wrote");
    free(before);
    free(after);
    mt_graph_free(g);

    write_model_by_hand(path, hand_header, HAND_UNSHARED_FLOATS, -1, false);
    g = param_graph(&hand_cfg, "h.0.attn.wv.w", NULL);
    MT_CHECK_FAILS(mt_llama2c_load(path, g, &hand_cfg), MT_EINVAL, "no tensor 'h.0.attn.wv.w'");
    mt_graph_free(g);
    g = param_graph(&hand_cfg, NULL, "h.0.ffn.w2.w");
    MT_CHECK_FAILS(mt_llama2c_load(path, g, &hand_cfg), MT_ESHAPE, "'h.0.ffn.w2.w'", "(8,4)", "(4,8)");
    CHECK_ONE_LINE();
    mt_graph_free(g);
    mt_llama_config tied = hand_cfg;
    tied.tie_embeddings = 1;
    g = param_graph(&tied, NULL, NULL);
    MT_CHECK_FAILS(mt_llama2c_load(path, g, &tied), MT_ESHAPE, "lm_head.w", "untied");
    /* the same shapes do not say how C splits into heads: the sizes must match */
    mt_llama_config heads = hand_cfg;
    heads.n_heads = 1;
    MT_CHECK_FAILS(mt_llama2c_load(path, g, &heads), MT_ESHAPE, "n_heads = 2", "has 1");
    heads = hand_cfg;
    heads.rope_theta = 500000.0f;
    MT_CHECK_FAILS(mt_llama2c_load(path, g, &heads), MT_EUNSUPPORTED, "rope_theta 500000");
    /* nor how wide a head is: a head size of its own (--head-dim) is not
     * run.c's dim / n_heads; the same one given is */
    heads = hand_cfg;
    heads.head_dim = 4;
    MT_CHECK_FAILS(mt_llama2c_load(path, g, &heads), MT_ESHAPE, "head size", "= 2",
                   "has 4");
    /* a save of a config run.c cannot run */
    tied.rope_theta = 500000.0f;
    MT_CHECK_FAILS(mt_llama2c_save(at(&w, "out.bin"), &tied, g), MT_EUNSUPPORTED,
                   "rope_theta 500000", "10000");
    mt_graph_free(g);
    g = param_graph(&heads, NULL, NULL);
    MT_CHECK_FAILS(mt_llama2c_save(at(&w, "out.bin"), &heads, g), MT_EUNSUPPORTED,
                   "head_dim = 4", "--head-dim", "dim / n_heads = 4 / 2");
    mt_graph_free(g);
    heads.head_dim = 2;
    g = param_graph(&heads, NULL, NULL);
    MT_CHECK_OK(mt_llama2c_load(path, g, &heads));
    mt_graph_free(g);
    work_close(&w);
}

/* ------------------------------------------------------------------------ */
/* Write, read back                                                          */
/* ------------------------------------------------------------------------ */

/* Fills every parameter with values that depend on (salt, parameter, index). */
static void fill_params(mt_graph *g, int salt) {
    for (int i = 0; i < mt_graph_n_params(g); i++) {
        mt_tensor *t = mt_graph_param_at(g, i);
        int64_t n = mt_tensor_numel(t);
        float *v = malloc((size_t)n * sizeof *v);
        for (int64_t e = 0; e < n; e++) v[e] = (float)((salt + 7 * i + e) % 97) / 32.0f - 1.5f;
        MT_CHECK_OK(mt_tensor_write(t, v, 0, n));
        free(v);
    }
    mt_graph_params_changed(g);
}

static void round_trip(const mt_llama_config *c) {
    workdir w;
    work_open(&w, "rt.bin");
    const char *path = w.path;
    mt_graph *src = param_graph(c, NULL, NULL);
    fill_params(src, 11);
    MT_CHECK_OK(mt_llama2c_save(path, c, src));

    /* the size by run.c's arithmetic */
    int64_t C = c->dim, HS = C / c->n_heads, KV = c->n_kv_heads * HS, L = c->n_layers;
    int64_t floats = c->vocab * C + L * (2 * C + 2 * C * C + 2 * KV * C + 3 * C * c->ffn_dim) +
                     C + c->max_seq * HS + (c->tie_embeddings ? 0 : c->vocab * C);
    FILE *f = fopen(path, "rb");
    MT_CHECK(f != NULL, "no %s", path);
    fseek(f, 0, SEEK_END);
    MT_CHECK(ftell(f) == 28 + 4 * floats, "file is %ld bytes, want %lld", ftell(f),
             (long long)(28 + 4 * floats));
    int32_t h[7];
    fseek(f, 0, SEEK_SET);
    MT_CHECK(fread(h, 4, 7, f) == 7, "header");
    fclose(f);
    MT_CHECK(h[5] == (c->tie_embeddings ? c->vocab : -c->vocab), "vocab_size %d", h[5]);

    mt_llama_config got;
    MT_CHECK_OK(mt_llama2c_read_config(path, &got));
    MT_CHECK(got.dim == c->dim && got.ffn_dim == c->ffn_dim && got.n_layers == c->n_layers &&
             got.n_heads == c->n_heads && got.n_kv_heads == c->n_kv_heads &&
             got.vocab == c->vocab && got.max_seq == c->max_seq &&
             got.tie_embeddings == c->tie_embeddings, "config read back differs");
    mt_graph *dst = param_graph(&got, NULL, NULL);
    MT_CHECK_OK(mt_llama2c_load(path, dst, &got));
    for (int i = 0; i < mt_graph_n_params(src); i++) {
        const char *name = mt_tensor_name(mt_graph_param_at(src, i));
        int64_t n, m;
        float *a = read_param(src, name, &n), *b = read_param(dst, name, &m);
        MT_CHECK(n == m && memcmp(a, b, (size_t)n * sizeof *a) == 0, "%s differs", name);
        free(a);
        free(b);
    }
    mt_graph_free(src);
    mt_graph_free(dst);
    work_close(&w);
}

/* Grouped-query (KV 2 of NH 4), untied: the round trips' model. */
static const mt_llama_config small_cfg = {
    .dim = 16, .ffn_dim = 24, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab = 11,
    .max_seq = 8, .rope_theta = 10000.0f, .norm_eps = 1e-5f, .tie_embeddings = 0,
    .ffn_mult = 1.0f};

MT_TEST(write_read_back_bit_identical) {
    mt_llama_config c = small_cfg;
    round_trip(&c);
    c.tie_embeddings = 1;
    c.n_kv_heads = 1;
    round_trip(&c);
    c.n_kv_heads = 4;
    round_trip(&c);
}

/* ------------------------------------------------------------------------ */
/* Through the llama model                                                   */
/* ------------------------------------------------------------------------ */

/* The llama model for (1,T), compiled with `seed`, loaded from `path` when
 * it is not NULL, run forward on fixed tokens and targets. */
static mt_graph *llama_run(const mt_llama_config *c, uint64_t seed, const char *path, int T,
                           const int32_t *tokens, const int32_t *targets) {
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = mt_llama_build(g, c, 1, T, 1.0f / (float)T);
    MT_CHECK(loss != NULL, "mt_llama_build: %s", mt_graph_errmsg(g));
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = seed}));
    if (path) MT_CHECK_OK(mt_llama2c_load(path, g, c));
    MT_CHECK_OK(mt_tensor_write(mt_graph_find(g, "tokens"), tokens, 0, T));
    MT_CHECK_OK(mt_tensor_write(mt_graph_find(g, "targets"), targets, 0, T));
    MT_CHECK_OK(mt_graph_forward(g));
    return g;
}

static void same_logits_after_reload(const mt_llama_config *c) {
    workdir w;
    work_open(&w, "model.bin");
    const char *path = w.path;
    enum { T = 6 };
    int32_t tokens[T], targets[T];
    for (int t = 0; t < T; t++) {
        tokens[t] = (7 * t + 3) % c->vocab;
        targets[t] = (5 * t + 1) % c->vocab;
    }
    mt_graph *a = llama_run(c, 1, NULL, T, tokens, targets);
    MT_CHECK_OK(mt_llama2c_save(path, c, a));
    mt_llama_config fc;
    MT_CHECK_OK(mt_llama2c_read_config(path, &fc));
    mt_graph *fresh = llama_run(&fc, 2, NULL, T, tokens, targets);   /* other weights */
    mt_graph *b = llama_run(&fc, 2, path, T, tokens, targets);
    int64_t n, m, k;
    float *za = read_param(a, "logits", &n), *zb = read_param(b, "logits", &m);
    float *zf = read_param(fresh, "logits", &k);
    MT_CHECK(n == (int64_t)T * c->vocab && n == m, "logits %lld and %lld", (long long)n,
             (long long)m);
    MT_CHECK(memcmp(za, zf, (size_t)n * sizeof *za) != 0, "seed 2 gave seed 1's logits");
    for (int64_t i = 0; i < n; i++)
        MT_CHECK(memcmp(&za[i], &zb[i], sizeof *za) == 0, "logit %lld: %.9g saved, %.9g "
                 "reloaded (KV=%d tie=%d)", (long long)i, (double)za[i], (double)zb[i],
                 c->n_kv_heads, c->tie_embeddings);
    /* and the reloaded model computes the float64 reference's loss */
    llama_ref ref;
    llama_ref_from_graph(&ref, b, &fc);
    double want = llama_ref_loss(&ref, tokens, targets, 1, T, 1.0 / T);
    MT_CHECK(fabs(mt_graph_loss(b) - want) <= 1e-5 * fabs(want), "loss %.9g, reference %.9g",
             (double)mt_graph_loss(b), want);
    llama_ref_free(&ref);
    free(za);
    free(zb);
    free(zf);
    mt_graph_free(a);
    mt_graph_free(b);
    mt_graph_free(fresh);
    work_close(&w);
}

MT_TEST(llama_model_same_logits_after_reload) {
    mt_llama_config c = small_cfg;
    same_logits_after_reload(&c);
    c.n_kv_heads = 1;
    c.tie_embeddings = 1;
    same_logits_after_reload(&c);
}

/* The hand-built file's weights, small exact values, in the float64
 * reference of llama_ref.h by the hand-written layout: the model that
 * loaded the file gives the reference's loss over every position. */
MT_TEST(hand_built_file_gives_the_reference_loss) {
    workdir w;
    const char *path = hand_file(&w, true);
    llama_ref m;
    memset(&m, 0, sizeof m);
    m.cfg = hand_cfg;
    for (size_t i = 0; i < sizeof hand_layout / sizeof hand_layout[0]; i++) {
        llama_ref_param *p = &m.p[m.n++];
        snprintf(p->name, sizeof p->name, "%s", hand_layout[i].name);
        p->n = hand_layout[i].n;
        p->d = malloc((size_t)p->n * sizeof *p->d);
        for (int64_t e = 0; e < p->n; e++) p->d[e] = hand_value(hand_layout[i].offset + e, true);
    }
    enum { T = 4 };
    const int32_t tokens[T] = {1, 4, 0, 3}, targets[T] = {4, 0, 3, 2};
    mt_graph *g = llama_run(&hand_cfg, 1, path, T, tokens, targets);
    double want = llama_ref_loss(&m, tokens, targets, 1, T, 1.0 / T);
    double got = mt_graph_loss(g);
    MT_CHECK(fabs(got - want) <= 1e-5 * fabs(want), "loss %.9g, reference %.9g", got, want);
    llama_ref_free(&m);
    mt_graph_free(g);
    work_close(&w);
}

/* ------------------------------------------------------------------------ */
/* tokenizer.bin                                                             */
/* ------------------------------------------------------------------------ */

static size_t file_bytes(const char *path, unsigned char *buf, size_t max) {
    FILE *f = fopen(path, "rb");
    MT_CHECK(f != NULL, "no %s", path);
    size_t n = fread(buf, 1, max, f);
    fclose(f);
    return n;
}

MT_TEST(tokenizer_bytes_and_read_back) {
    workdir w;
    work_open(&w, "tokenizer.bin");
    const char *path = w.path;
    const char *pieces[] = {"<unk>", " a", "\n<s>\n", "<0x0A>"};
    const float scores[] = {0.0f, -1.5f, 2.0f, 0.25f};
    MT_CHECK_OK(mt_llama2c_tokenizer_write(path, 4, pieces, scores));

    /* max_token_length 6; then score, length, bytes: -1.5f = 0xBFC00000,
     * 2.0f = 0x40000000, 0.25f = 0x3E800000 */
    static const unsigned char want[] = {
        6, 0, 0, 0,
        0, 0, 0, 0,          5, 0, 0, 0, '<', 'u', 'n', 'k', '>',
        0, 0, 0xC0, 0xBF,    2, 0, 0, 0, ' ', 'a',
        0, 0, 0, 0x40,       5, 0, 0, 0, '\n', '<', 's', '>', '\n',
        0, 0, 0x80, 0x3E,    6, 0, 0, 0, '<', '0', 'x', '0', 'A', '>',
    };
    unsigned char got[256];
    size_t n = file_bytes(path, got, sizeof got);
    MT_CHECK(n == sizeof want, "file is %zu bytes, want %zu", n, sizeof want);
    for (size_t i = 0; i < n; i++)
        MT_CHECK(got[i] == want[i], "byte %zu is 0x%02x, want 0x%02x", i, got[i], want[i]);

    for (int ask = 0; ask <= 4; ask += 4) {
        mt_llama2c_vocab *v = NULL;
        MT_CHECK_OK(mt_llama2c_tokenizer_read(path, ask, &v));
        MT_CHECK(v->n == 4 && v->max_token_length == 6, "n %d max %d", v->n,
                 v->max_token_length);
        for (int i = 0; i < 4; i++)
            MT_CHECK(strcmp(v->pieces[i], pieces[i]) == 0 && v->scores[i] == scores[i],
                     "token %d read as '%s' %g", i, v->pieces[i], (double)v->scores[i]);
        mt_llama2c_vocab_free(v);
    }
    mt_llama2c_vocab *v = NULL;
    MT_CHECK_FAILS(mt_llama2c_tokenizer_read(path, 3, &v), MT_EFORMAT, "more than the 3");
    MT_CHECK_FAILS(mt_llama2c_tokenizer_read(path, 5, &v), MT_EFORMAT, "truncated", "token 4");
    MT_CHECK(v == NULL, "out set on failure");

    /* a length past max_token_length: run.c's encoder would overrun */
    unsigned char bad[sizeof want];
    memcpy(bad, want, sizeof want);
    bad[0] = 5;
    FILE *f = fopen(path, "wb");
    fwrite(bad, 1, sizeof bad, f);
    fclose(f);
    MT_CHECK_FAILS(mt_llama2c_tokenizer_read(path, 0, &v), MT_EFORMAT, "token 3", "length 6",
                   "1..5");
    CHECK_ONE_LINE();

    const char *empty[] = {"a", ""};
    MT_CHECK_FAILS(mt_llama2c_tokenizer_write(path, 2, empty, scores), MT_EINVAL, "token 1",
                   "empty");
    const float nan_scores[] = {0.0f, NAN};
    MT_CHECK_FAILS(mt_llama2c_tokenizer_write(path, 2, pieces, nan_scores), MT_EINVAL,
                   "token 1", "score");

    char buf[32];
    MT_CHECK_OK(mt_llama2c_piece("\xe2\x96\x81hello\xe2\x96\x81", buf, sizeof buf));
    MT_CHECK(strcmp(buf, " hello ") == 0, "'▁hello▁' became '%s'", buf);
    MT_CHECK_OK(mt_llama2c_piece("<0x0A>", buf, sizeof buf));
    MT_CHECK(strcmp(buf, "<0x0A>") == 0, "a byte piece became '%s'", buf);
    MT_CHECK_FAILS(mt_llama2c_piece("abcdef", buf, 4), MT_EINVAL, "does not fit");
    work_close(&w);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
