/*
 * hf_test.h — what the Hugging Face tests (test_hf.c, test_hf_gpt2.c)
 * share: a temporary directory made by the test (mkdtemp on hf_dir) and
 * removed at exit, paths in it, a compiled graph's tokens and targets
 * filled at random (ids below V), and a set of tensors written in Hugging
 * Face's layout (hf_set: test_hf.c, test_hf_moe.c). Each test program includes it once.
 */
#ifndef MT_TEST_HF_TEST_H
#define MT_TEST_HF_TEST_H

#include "meshtrain.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char hf_dir[] = "/tmp/mt-test-hf-XXXXXX";

static void hf_cleanup(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", hf_dir);
    if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", hf_dir);
}

/* Makes the directory (once a test case: each runs in its own child). */
static void hf_make_dir(void) {
    MT_CHECK(mkdtemp(hf_dir), "mkdtemp");
    atexit(hf_cleanup);
}

/* "DIR/sub/name", either part empty for none; two at a time stay valid. */
static const char *hf_at(const char *sub, const char *name) {
    static char buf[2][512];
    static int k;
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s%s%s%s%s", hf_dir, *sub ? "/" : "", sub, *name ? "/" : "",
             name);
    return buf[k];
}

/* g's "tokens" and "targets" (B·T each) at random below V, the same every run. */
static void hf_fill_tokens(mt_graph *g, int n, int V) {
    int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));
    for (int i = 0; i < n; i++) {
        tok[i] = (int32_t)(mt_rng_uniform(4, 0, (uint64_t)i) * V) % V;
        tgt[i] = (int32_t)(mt_rng_uniform(4, 1, (uint64_t)i) * V) % V;
    }
}

/* A compiled LLaMA of c on B sequences of T (loss the mean over B·T,
 * seed 3), its tokens and targets at random below c->vocab. */
static inline mt_graph *hf_build_llama(const mt_llama_config *c, int B, int T) {
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = mt_llama_build(g, c, B, T, 1.0f / (float)(B * T));
    MT_CHECK(loss, "mt_llama_build: %s", mt_graph_errmsg(g));
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 3}));
    hf_fill_tokens(g, B * T, c->vocab);
    return g;
}

/* A model's tensors in Hugging Face's layout, as a test writes them:
 * names (Hugging Face's and meshtrain's, "" where no one tensor of
 * meshtrain's matches), shapes, values (owned here), stored dtypes. */
#define HF_SET_MAX 64
typedef struct {
    int         n;
    char        name[HF_SET_MAX][160], mt[HF_SET_MAX][MT_MAX_NAME];
    int64_t     shape[HF_SET_MAX][2];
    int         ndim[HF_SET_MAX];
    float      *v[HF_SET_MAX];
    mt_st_dtype dtype[HF_SET_MAX];
} hf_set;

static inline void hf_write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    MT_CHECK(f, "create %s", path);
    fputs(text, f);
    fclose(f);
}

/* Adds tensor `name` (meshtrain's `mt`) of r rows and c columns (0: a
 * vector), F32, random: 0.3·N(0,1), or with `ones` 1 + 0.1·N(0,1) (a
 * norm's scale). Returns its values. */
static inline float *hf_set_add(hf_set *m, const char *name, const char *mt, int64_t r,
                                int64_t c, bool ones) {
    MT_CHECK(m->n < HF_SET_MAX, "more than %d tensors", HF_SET_MAX);
    const int i = m->n++;
    snprintf(m->name[i], sizeof m->name[i], "%s", name);
    snprintf(m->mt[i], sizeof m->mt[i], "%s", mt);
    m->shape[i][0] = r, m->shape[i][1] = c;
    m->ndim[i] = c ? 2 : 1;
    const int64_t n = r * (c ? c : 1);
    m->v[i] = malloc((size_t)n * sizeof(float));
    for (int64_t j = 0; j < n; j++)
        m->v[i][j] = ones ? 1.0f + 0.1f * mt_rng_normal(9, (uint64_t)i, (uint64_t)j)
                          : 0.3f * mt_rng_normal(8, (uint64_t)i, (uint64_t)j);
    m->dtype[i] = MT_ST_F32;
    return m->v[i];
}

/* The values of tensor `name`, or abort. */
static inline const float *hf_set_get(const hf_set *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->name[i], name)) return m->v[i];
    MT_CHECK(0, "no tensor %s", name);
    return NULL;
}

/* DIR/sub/model.safetensors of m's tensors but the skip-th (-1: none),
 * and DIR/sub/config.json of `config`. */
static inline void hf_set_write(const hf_set *m, const char *sub, const char *config, int skip) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", hf_at(sub, ""));
    MT_CHECK(system(cmd) == 0, "mkdir");
    mt_st_write_tensor w[HF_SET_MAX];
    int k = 0;
    for (int i = 0; i < m->n; i++)
        if (i != skip) w[k++] = (mt_st_write_tensor){m->name[i], m->dtype[i], m->ndim[i],
                                                     m->shape[i], m->v[i]};
    MT_CHECK_OK(mt_safetensors_write(hf_at(sub, "model.safetensors"), w, k, NULL));
    hf_write_text(hf_at(sub, "config.json"), config);
}

/* mt_hf_save_llama of g (a LLaMA of c, loaded from m) to DIR/out: every
 * tensor of m saved as F32 of its shape with its values, the config read
 * back equal to c, and loading the saved directory into a graph built by
 * `build` gives every parameter of g bit for bit. */
static inline void hf_check_llama_round_trip(const hf_set *m, const mt_llama_config *c,
                                             mt_graph *g,
                                             mt_graph *(*build)(const mt_llama_config *)) {
    MT_CHECK_OK(mt_hf_save_llama(hf_at("out", ""), c, g));
    mt_safetensors *st = NULL;
    MT_CHECK_OK(mt_safetensors_open(hf_at("out", ""), &st));
    MT_CHECK(mt_safetensors_count(st) == m->n, "%d tensors saved, %d read",
             mt_safetensors_count(st), m->n);
    for (int i = 0; i < m->n; i++) {
        const mt_st_tensor *x = mt_safetensors_find(st, m->name[i]);
        MT_CHECK(x && x->dtype == MT_ST_F32 && x->ndim == m->ndim[i] &&
                     x->shape[0] == m->shape[i][0] &&
                     (x->ndim == 1 || x->shape[1] == m->shape[i][1]),
                 "%s not saved as F32 of its shape", m->name[i]);
        float *v = malloc((size_t)x->numel * sizeof *v);
        MT_CHECK_OK(mt_safetensors_read_f32(st, x, 0, x->numel, v));
        MT_CHECK(!memcmp(v, m->v[i], (size_t)x->numel * sizeof *v), "%s: saved values differ "
                 "from those read", m->name[i]);
        free(v);
    }
    mt_safetensors_close(st);
    mt_llama_config c2;
    MT_CHECK_OK(mt_hf_read_llama_config(hf_at("out", ""), &c2));
    MT_CHECK(!memcmp(c, &c2, sizeof c2), "the saved config reads back different");
    mt_graph *g2 = build(&c2);
    MT_CHECK_OK(mt_hf_load_llama(hf_at("out", ""), g2, &c2));
    for (int i = 0; i < mt_graph_n_params(g); i++) {
        mt_tensor *x = mt_graph_param_at(g, i), *y = mt_graph_find(g2, mt_tensor_name(x));
        MT_CHECK(y && !memcmp(mt_tensor_f32(x), mt_tensor_f32(y),
                              (size_t)mt_tensor_numel(x) * sizeof(float)),
                 "%s differs after --hf-out then --hf-in", mt_tensor_name(x));
    }
    mt_graph_free(g2);
}

#ifdef MT_TEST_LLAMA_REF_H   /* where llama_ref.h was included first */
/* ref's parameters: a double copy of each tensor of m that has a
 * meshtrain name (the values as Hugging Face's layout holds them). */
static inline void hf_set_to_ref(llama_ref *ref, const hf_set *m) {
    for (int i = 0; i < m->n; i++) {
        if (!m->mt[i][0]) continue;
        llama_ref_param *p = &ref->p[ref->n++];
        snprintf(p->name, sizeof p->name, "%s", m->mt[i]);
        p->n = m->shape[i][0] * (m->ndim[i] == 2 ? m->shape[i][1] : 1);
        p->d = malloc((size_t)p->n * sizeof *p->d);
        for (int64_t j = 0; j < p->n; j++) p->d[j] = m->v[i][j];
    }
}
#endif

static inline void hf_set_free(hf_set *m) {
    for (int i = 0; i < m->n; i++) free(m->v[i]);
    m->n = 0;
}

#endif /* MT_TEST_HF_TEST_H */
