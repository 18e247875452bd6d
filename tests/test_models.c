/*
 * test_models.c — the models (GPT, MLP, linear regression), the training loop
 * and sampling, each checked against something independent: a plain
 * double-precision GPT-2 forward pass written here, finite differences of it,
 * GPT-2's published parameter count, a synthetic problem with known answer,
 * and the same run taken in a different shape (one big batch, or with a
 * checkpoint in the middle).
 */
#include "harness.h"
#include "meshtrain.h"
#include "train_helpers.h"

#include <stdint.h>
#include <unistd.h>

/* ======================================================================== */
/* Helpers                                                                   */
/* ======================================================================== */

static uint64_t xorshift(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Uniform in [-1, 1). */
static double xs_unit(uint64_t *s) { return (double)(xorshift(s) >> 11) * 0x1.0p-52 - 1.0; }

/* A temporary file holding text with enough structure to learn; the path is
 * written to `path` (at least 64 bytes). */
static void write_temp_text(char *path, const char *pattern, int repeats) {
    snprintf(path, 64, "/tmp/mt_test_models_XXXXXX");
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0, "mkstemp failed");
    FILE *f = fdopen(fd, "w");
    MT_CHECK(f != NULL, "fdopen failed");
    for (int i = 0; i < repeats; i++) fputs(pattern, f);
    fclose(f);
}

static const char *const fox_text =
    "the quick brown fox jumps over the lazy dog. pack my box with five dozen liquor jugs! ";

/* max |a - b| <= tol · max(max |b|, floor) over n elements. */
static void check_arrays_close(const float *got, const float *want, int64_t n, double tol,
                               const char *what) {
    double scale = 1e-30, worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (d > worst) { worst = d; at = i; }
    }
    MT_CHECK(worst <= tol * scale, "%s: element %lld differs: got %.9g want %.9g (max |want| %g, "
             "tol %g)", what, (long long)at, got[at], want[at], scale, tol);
}

/* ======================================================================== */
/* A GPT-2 forward pass in plain double-precision loops                      */
/* ======================================================================== */

typedef struct { char name[MT_MAX_NAME]; double *d; int64_t n; } ref_param;
typedef struct { ref_param p[128]; int n; mt_gpt_config cfg; } ref_model;

static double *ref_get(ref_model *m, const char *fmt, int l) {
    char name[MT_MAX_NAME];
    snprintf(name, sizeof name, fmt, l);
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->p[i].name, name) == 0) return m->p[i].d;
    mt_test_fail(__FILE__, __LINE__, "reference model has no parameter %s", name);
}

/* Copies every parameter of a compiled graph into doubles. */
static void ref_from_graph(ref_model *m, mt_graph *g, const mt_gpt_config *cfg) {
    m->n = mt_graph_n_params(g);
    m->cfg = *cfg;
    MT_CHECK(m->n <= 128, "too many parameters (%d)", m->n);
    for (int i = 0; i < m->n; i++) {
        mt_tensor *t = mt_graph_param_at(g, i);
        snprintf(m->p[i].name, MT_MAX_NAME, "%s", mt_tensor_name(t));
        m->p[i].n = mt_tensor_numel(t);
        m->p[i].d = malloc((size_t)m->p[i].n * sizeof(double));
        const float *src = mt_tensor_f32(t);
        for (int64_t k = 0; k < m->p[i].n; k++) m->p[i].d[k] = src[k];
    }
}

static void ref_free(ref_model *m) {
    for (int i = 0; i < m->n; i++) free(m->p[i].d);
}

/* out (rows,C) = layernorm of x (rows,C), eps 1e-5, biased variance */
static void ref_layernorm(double *out, const double *x, const double *w, const double *b,
                          int rows, int C) {
    for (int r = 0; r < rows; r++) {
        const double *xr = x + (size_t)r * C;
        double mean = 0, var = 0;
        for (int c = 0; c < C; c++) mean += xr[c];
        mean /= C;
        for (int c = 0; c < C; c++) var += (xr[c] - mean) * (xr[c] - mean);
        var /= C;
        double rstd = 1.0 / sqrt(var + 1e-5);
        for (int c = 0; c < C; c++) out[(size_t)r * C + c] = (xr[c] - mean) * rstd * w[c] + b[c];
    }
}

/* out (rows,OC) = x (rows,C) · w (OC,C)ᵀ + b (OC) */
static void ref_linear(double *out, const double *x, const double *w, const double *b, int rows,
                       int C, int OC) {
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < OC; o++) {
            double s = b ? b[o] : 0.0;
            for (int c = 0; c < C; c++) s += x[(size_t)r * C + c] * w[(size_t)o * C + c];
            out[(size_t)r * OC + o] = s;
        }
}

/* The loss of GPT-2 on tokens/targets (B,T), times scale. */
static double ref_gpt_loss(ref_model *m, const int32_t *tokens, const int32_t *targets, int B,
                           int T, double scale) {
    const int C = m->cfg.C, NH = m->cfg.NH, HS = C / NH, V = m->cfg.V, Vp = m->cfg.Vp;
    const int BT = B * T;
    double *x = calloc((size_t)BT * C, sizeof(double));        /* (B,T,C) residual */
    double *h = calloc((size_t)BT * C, sizeof(double));        /* (B,T,C) */
    double *qkv = calloc((size_t)BT * 3 * C, sizeof(double));  /* (B,T,3C) */
    double *att = calloc((size_t)BT * C, sizeof(double));      /* (B,T,C) */
    double *o = calloc((size_t)BT * C, sizeof(double));        /* (B,T,C) */
    double *fc = calloc((size_t)BT * 4 * C, sizeof(double));   /* (B,T,4C) */
    double *logits = calloc((size_t)Vp, sizeof(double));       /* (Vp) one row */
    double *score = calloc((size_t)T, sizeof(double));         /* (T) */
    const double *wte = ref_get(m, "wte", 0), *wpe = ref_get(m, "wpe", 0);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                x[((size_t)b * T + t) * C + c] =
                    wte[(size_t)tokens[b * T + t] * C + c] + wpe[(size_t)t * C + c];
    for (int l = 0; l < m->cfg.L; l++) {
        ref_layernorm(h, x, ref_get(m, "h.%d.ln_1.w", l), ref_get(m, "h.%d.ln_1.b", l), BT, C);
        ref_linear(qkv, h, ref_get(m, "h.%d.attn.qkv.w", l), ref_get(m, "h.%d.attn.qkv.b", l),
                   BT, C, 3 * C);
        /* causal attention per (b, head, t): softmax over t2 <= t of q·k/sqrt(HS) */
        for (int b = 0; b < B; b++)
            for (int hd = 0; hd < NH; hd++)
                for (int t = 0; t < T; t++) {
                    const double *q = qkv + ((size_t)b * T + t) * 3 * C + hd * HS;
                    double mx = -INFINITY, sum = 0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        const double *k = qkv + ((size_t)b * T + t2) * 3 * C + C + hd * HS;
                        double s = 0;
                        for (int i = 0; i < HS; i++) s += q[i] * k[i];
                        score[t2] = s / sqrt((double)HS);
                        mx = fmax(mx, score[t2]);
                    }
                    for (int t2 = 0; t2 <= t; t2++) sum += (score[t2] = exp(score[t2] - mx));
                    for (int i = 0; i < HS; i++) {
                        double acc = 0;
                        for (int t2 = 0; t2 <= t; t2++)
                            acc += score[t2] / sum * qkv[((size_t)b * T + t2) * 3 * C + 2 * C + hd * HS + i];
                        att[((size_t)b * T + t) * C + hd * HS + i] = acc;
                    }
                }
        ref_linear(o, att, ref_get(m, "h.%d.attn.proj.w", l), ref_get(m, "h.%d.attn.proj.b", l),
                   BT, C, C);
        for (size_t i = 0; i < (size_t)BT * C; i++) x[i] += o[i];
        ref_layernorm(h, x, ref_get(m, "h.%d.ln_2.w", l), ref_get(m, "h.%d.ln_2.b", l), BT, C);
        ref_linear(fc, h, ref_get(m, "h.%d.mlp.fc.w", l), ref_get(m, "h.%d.mlp.fc.b", l),
                   BT, C, 4 * C);
        for (size_t i = 0; i < (size_t)BT * 4 * C; i++) {
            double u = fc[i];
            fc[i] = 0.5 * u * (1.0 + tanh(sqrt(2.0 / M_PI) * (u + 0.044715 * u * u * u)));
        }
        ref_linear(o, fc, ref_get(m, "h.%d.mlp.proj.w", l), ref_get(m, "h.%d.mlp.proj.b", l),
                   BT, 4 * C, C);
        for (size_t i = 0; i < (size_t)BT * C; i++) x[i] += o[i];
    }
    ref_layernorm(h, x, ref_get(m, "ln_f.w", 0), ref_get(m, "ln_f.b", 0), BT, C);
    double loss = 0;
    for (int r = 0; r < BT; r++) {
        /* tied head over all Vp rows; only the first V enter the softmax */
        ref_linear(logits, h + (size_t)r * C, wte, NULL, 1, C, Vp);
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, logits[v]);
        for (int v = 0; v < V; v++) sum += exp(logits[v] - mx);
        loss += log(sum) + mx - logits[targets[r]];
    }
    free(x); free(h); free(qkv); free(att); free(o); free(fc); free(logits); free(score);
    return loss * scale;
}

/* Builds and compiles a GPT, and overwrites every parameter with values from a
 * simple deterministic formula, large enough that every nonlinearity matters. */
static mt_graph *tiny_gpt(const mt_gpt_config *cfg, int B, int T, float scale, mt_tensor **loss) {
    mt_graph *g = mt_graph_create();
    MT_CHECK(g != NULL, "mt_graph_create");
    *loss = mt_gpt_build(g, cfg, B, T, scale);
    MT_CHECK(*loss != NULL, "mt_gpt_build: %s", mt_errmsg());
    mt_compile_opts opts = {.seed = 7};
    MT_CHECK_OK(mt_graph_compile(g, *loss, &opts));
    MT_CHECK_OK(mt_gpt_fill_constants(g));
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < mt_graph_n_params(g); i++) {
        mt_tensor *t = mt_graph_param_at(g, i);
        float *p = mt_tensor_f32(t);
        const char *name = mt_tensor_name(t);
        size_t len = strlen(name);
        bool is_ln_w = len > 4 && (strstr(name, "ln_") != NULL) && name[len - 1] == 'w';
        for (int64_t k = 0; k < mt_tensor_numel(t); k++)
            p[k] = (float)(is_ln_w ? 1.0 + 0.2 * xs_unit(&s) : 0.4 * xs_unit(&s));
    }
    return g;
}

static void random_tokens(int32_t *tok, int64_t n, int V, uint64_t seed) {
    uint64_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) tok[i] = (int32_t)(xorshift(&s) % (uint64_t)V);
}

/* ======================================================================== */
/* GPT: configuration, shapes, counts                                        */
/* ======================================================================== */

MT_TEST(gpt_param_count_matches_gpt2_124m) {
    /* llm.c prints "num_parameters: 124475904" for GPT-2 small with Vp=50304 */
    mt_gpt_config gpt2 = {.L = 12, .C = 768, .NH = 12, .maxT = 1024, .V = 50257, .Vp = 50304};
    MT_CHECK(mt_gpt_num_params(&gpt2) == 124475904, "GPT-2 124M has %lld parameters, want 124475904",
             (long long)mt_gpt_num_params(&gpt2));
    /* llm.c's 6N + 6·L·C·T per token (gpt2_estimate_mfu: PaLM's 6N, causal
     * attention's half of PaLM's 12·L·C·T), by hand for GPT-2 at T=1024 */
    double want = 6.0 * 124475904 + 6.0 * 12 * 768 * 1024;
    MT_CHECK_CLOSE(mt_gpt_train_flops(&gpt2, 1024, 1) / want, 1.0, 1e-12, "flops per token");

    /* the built graph holds exactly that many trainable elements */
    mt_gpt_config cfg = {.L = 2, .C = 16, .NH = 2, .maxT = 8, .V = 20, .Vp = 32};
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = mt_gpt_build(g, &cfg, 2, 8, 1.0f);
    MT_CHECK(loss != NULL, "build: %s", mt_errmsg());
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1}));
    int64_t n = 0;
    for (int i = 0; i < mt_graph_n_params(g); i++) n += mt_tensor_numel(mt_graph_param_at(g, i));
    MT_CHECK(n == mt_gpt_num_params(&cfg), "graph has %lld parameter elements, formula %lld",
             (long long)n, (long long)mt_gpt_num_params(&cfg));
    MT_CHECK(mt_graph_n_params(g) == 2 + 12 * cfg.L + 2, "%d parameter tensors", mt_graph_n_params(g));
    mt_tensor *qkv = mt_graph_find(g, "h.1.attn.qkv.w");
    MT_CHECK(qkv && mt_tensor_ndim(qkv) == 3 && mt_tensor_dim(qkv, 0) == 3 &&
             mt_tensor_dim(qkv, 1) == 16 && mt_tensor_dim(qkv, 2) == 16,
             "h.1.attn.qkv.w shape: (3,C,C), llm.c's (3C,C)");
    mt_tensor *mp = mt_graph_find(g, "h.0.mlp.proj.w");
    MT_CHECK(mp && mt_tensor_dim(mp, 0) == 16 && mt_tensor_dim(mp, 1) == 64, "h.0.mlp.proj.w shape");
    mt_tensor *logits = mt_graph_find(g, "logits");
    MT_CHECK(logits && mt_tensor_dim(logits, mt_tensor_ndim(logits) - 1) == 32 &&
             mt_tensor_numel(logits) == 2 * 8 * 32, "logits should be (B,T,Vp)");
    mt_graph_free(g);
}

MT_TEST(gpt_init_follows_gpt2) {
    mt_gpt_config cfg = {.L = 4, .C = 64, .NH = 4, .maxT = 32, .V = 256, .Vp = 256};
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = mt_gpt_build(g, &cfg, 1, 32, 1.0f);
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 3}));
    struct { const char *name; double mean, std; } want[] = {
        {"wte", 0, 0.02}, {"wpe", 0, 0.02}, {"h.1.attn.qkv.w", 0, 0.02},
        {"h.1.mlp.fc.w", 0, 0.02}, {"h.2.attn.proj.w", 0, 0.02 / sqrt(8.0)},
        {"h.3.mlp.proj.w", 0, 0.02 / sqrt(8.0)}, {"h.0.ln_1.w", 1, 0}, {"h.0.ln_2.b", 0, 0},
        {"h.0.attn.qkv.b", 0, 0}, {"ln_f.w", 1, 0}, {"ln_f.b", 0, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        mt_tensor *t = mt_graph_find(g, want[i].name);
        MT_CHECK(t != NULL, "no parameter %s", want[i].name);
        const float *p = mt_tensor_f32(t);
        int64_t n = mt_tensor_numel(t);
        double s = 0, s2 = 0;
        for (int64_t k = 0; k < n; k++) { s += p[k]; s2 += (double)p[k] * p[k]; }
        double mean = s / n, std = sqrt(fmax(s2 / n - mean * mean, 0));
        MT_CHECK_CLOSE(mean, want[i].mean, 4 * want[i].std / sqrt((double)n) + 1e-7, "mean of %s",
                       want[i].name);
        MT_CHECK(fabs(std - want[i].std) <= 0.1 * want[i].std + 1e-7, "std of %s is %g, want %g",
                 want[i].name, std, want[i].std);
    }
    mt_graph_free(g);
}

MT_TEST(gpt_config_check_names_the_field) {
    mt_gpt_config ok = {.L = 2, .C = 32, .NH = 4, .maxT = 16, .V = 50, .Vp = 64};
    MT_CHECK_OK(mt_gpt_config_check(&ok));
    mt_gpt_config bad = ok;
    bad.C = 30;
    MT_CHECK(mt_gpt_config_check(&bad) == MT_EINVAL, "C %% NH != 0 accepted");
    MT_CHECK(strstr(mt_errmsg(), "C=30") && strstr(mt_errmsg(), "NH=4"), "message: %s", mt_errmsg());
    bad = ok;
    bad.Vp = 40;
    MT_CHECK(mt_gpt_config_check(&bad) == MT_EINVAL, "Vp < V accepted");
    MT_CHECK(strstr(mt_errmsg(), "Vp=40") && strstr(mt_errmsg(), "V=50"), "message: %s", mt_errmsg());
    bad = ok;
    bad.L = 0;
    MT_CHECK(mt_gpt_config_check(&bad) == MT_EINVAL, "L=0 accepted");
    MT_CHECK(strstr(mt_errmsg(), "L=0"), "message: %s", mt_errmsg());
    bad = ok;
    bad.maxT = -3;
    MT_CHECK(mt_gpt_config_check(&bad) == MT_EINVAL, "maxT<0 accepted");
    MT_CHECK(strstr(mt_errmsg(), "maxT=-3"), "message: %s", mt_errmsg());
}

MT_TEST(gpt_T_beyond_maxT_fails_naming_both) {
    mt_gpt_config cfg = {.L = 1, .C = 16, .NH = 2, .maxT = 8, .V = 16, .Vp = 16};
    mt_graph *g = mt_graph_create();
    MT_CHECK(mt_gpt_build(g, &cfg, 2, 9, 1.0f) == NULL, "T=9 > maxT=8 was accepted");
    MT_CHECK(strstr(mt_errmsg(), "T=9") && strstr(mt_errmsg(), "maxT=8"), "message: %s", mt_errmsg());
    mt_graph_free(g);

    /* and through the trainer */
    char path[64];
    write_temp_text(path, fox_text, 20);
    mt_train_config tc = mt_train_defaults();
    tc.data = path;
    mt_gpt_config tcg = cfg;
    tcg.V = tcg.Vp = 0;
    MT_TEST_MODEL_CONFIG(&tc, &tcg);
    tc.T = 12;
    mt_trainer *tr = NULL;
    mt_status s = mt_trainer_create(&tc, &tr);
    unlink(path);
    MT_CHECK(s == MT_EINVAL && tr == NULL, "trainer with T=12 > maxT=8 gave %s", mt_status_name(s));
    MT_CHECK(strstr(mt_errmsg(), "T=12") && strstr(mt_errmsg(), "maxT=8"), "message: %s", mt_errmsg());
}

/* ======================================================================== */
/* GPT: numerics against the reference                                       */
/* ======================================================================== */

MT_TEST(gpt_loss_at_init_is_ln_V) {
    /* with N(0, 0.02) weights the logits are near zero: the softmax is uniform */
    mt_gpt_config cfg = {.L = 2, .C = 32, .NH = 2, .maxT = 16, .V = 256, .Vp = 256};
    const int B = 4, T = 16;
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = mt_gpt_build(g, &cfg, B, T, 1.0f / (B * T));
    MT_CHECK(loss != NULL, "build: %s", mt_errmsg());
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1337}));
    MT_CHECK_OK(mt_gpt_fill_constants(g));
    random_tokens(mt_tensor_i32(mt_graph_find(g, "tokens")), B * T, cfg.V, 1);
    random_tokens(mt_tensor_i32(mt_graph_find(g, "targets")), B * T, cfg.V, 2);
    MT_CHECK_OK(mt_graph_forward(g));
    MT_CHECK(fabs(mt_graph_loss(g) - log(256.0)) < 0.1, "loss at init %g, want ln 256 = %g",
             mt_graph_loss(g), log(256.0));
    mt_graph_free(g);
}

MT_TEST(gpt_forward_matches_naive_reference) {
    /* L=2, C=8, NH=2 (HS=4), maxT=6, V=10 padded to Vp=12; T=5 < maxT */
    mt_gpt_config cfg = {.L = 2, .C = 8, .NH = 2, .maxT = 6, .V = 10, .Vp = 12};
    const int B = 2, T = 5;
    const double scale = 1.0 / (B * T);
    mt_tensor *loss;
    mt_graph *g = tiny_gpt(&cfg, B, T, (float)scale, &loss);
    int32_t *tokens = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *targets = mt_tensor_i32(mt_graph_find(g, "targets"));
    for (int i = 0; i < B * T; i++) { tokens[i] = (i * 7 + 3) % cfg.V; targets[i] = (i * 3 + 1) % cfg.V; }
    MT_CHECK_OK(mt_graph_forward(g));
    ref_model m;
    ref_from_graph(&m, g, &cfg);
    double want = ref_gpt_loss(&m, tokens, targets, B, T, scale);
    MT_CHECK(fabs(want - log(10.0)) > 0.05, "the reference loss %g is too close to ln V to tell "
             "a model from none", want);
    MT_CHECK(fabs(mt_graph_loss(g) - want) <= 1e-5 * fabs(want), "GPT loss %.9g, reference %.9g",
             mt_graph_loss(g), want);

    /* the same with T = maxT and a different batch size: positions fill the table */
    ref_free(&m);
    mt_graph_free(g);
    const int T2 = 6, B2 = 3;
    g = tiny_gpt(&cfg, B2, T2, (float)(1.0 / (B2 * T2)), &loss);
    tokens = mt_tensor_i32(mt_graph_find(g, "tokens"));
    targets = mt_tensor_i32(mt_graph_find(g, "targets"));
    random_tokens(tokens, B2 * T2, cfg.V, 11);
    random_tokens(targets, B2 * T2, cfg.V, 12);
    MT_CHECK_OK(mt_graph_forward(g));
    ref_from_graph(&m, g, &cfg);
    want = ref_gpt_loss(&m, tokens, targets, B2, T2, 1.0 / (B2 * T2));
    MT_CHECK(fabs(mt_graph_loss(g) - want) <= 1e-5 * fabs(want), "GPT loss (T=maxT) %.9g, "
             "reference %.9g", mt_graph_loss(g), want);
    ref_free(&m);
    mt_graph_free(g);
}

MT_TEST(gpt_gradients_match_reference_finite_differences) {
    mt_gpt_config cfg = {.L = 2, .C = 8, .NH = 2, .maxT = 6, .V = 10, .Vp = 12};
    const int B = 2, T = 5;
    const double scale = 1.0 / (B * T);
    mt_tensor *loss;
    mt_graph *g = tiny_gpt(&cfg, B, T, (float)scale, &loss);
    int32_t *tokens = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *targets = mt_tensor_i32(mt_graph_find(g, "targets"));
    random_tokens(tokens, B * T, cfg.V, 5);
    random_tokens(targets, B * T, cfg.V, 6);
    tokens[0] = 3;   /* token 3 is used, so its wte row gets gradient from the embedding */
    MT_CHECK_OK(mt_graph_forward(g));
    MT_CHECK_OK(mt_graph_backward(g));
    ref_model m;
    ref_from_graph(&m, g, &cfg);
    const double eps = 1e-5;
    int checked = 0;
    for (int i = 0; i < m.n; i++) {
        mt_tensor *p = mt_graph_find(g, m.p[i].name);
        const float *grad = mt_tensor_f32(mt_tensor_grad(p));
        MT_CHECK(grad != NULL, "%s has no gradient", m.p[i].name);
        int64_t n = m.p[i].n;
        int64_t idx[4] = {0, n / 3, (2 * n) / 3 + 1, n - 1};
        if (strcmp(m.p[i].name, "wte") == 0) idx[1] = 3 * cfg.C + 2;   /* a used row */
        for (int k = 0; k < 4; k++) {
            int64_t j = idx[k] % n;
            double keep = m.p[i].d[j];
            m.p[i].d[j] = keep + eps;
            double up = ref_gpt_loss(&m, tokens, targets, B, T, scale);
            m.p[i].d[j] = keep - eps;
            double down = ref_gpt_loss(&m, tokens, targets, B, T, scale);
            m.p[i].d[j] = keep;
            double fd = (up - down) / (2 * eps);
            MT_CHECK(fabs(grad[j] - fd) <= 1e-3 * fabs(fd) + 2e-6,
                     "d loss / d %s[%lld]: graph %.9g, finite differences %.9g", m.p[i].name,
                     (long long)j, grad[j], fd);
            checked++;
        }
    }
    MT_CHECK(checked == 4 * (2 + 12 * cfg.L + 2), "checked %d gradients", checked);
    /* padded rows V..Vp of wte never enter the loss */
    const float *gwte = mt_tensor_f32(mt_tensor_grad(mt_graph_find(g, "wte")));
    for (int64_t j = (int64_t)cfg.V * cfg.C; j < (int64_t)cfg.Vp * cfg.C; j++)
        MT_CHECK(gwte[j] == 0.0f, "padded wte element %lld has gradient %g", (long long)j, gwte[j]);
    ref_free(&m);
    mt_graph_free(g);
}

MT_TEST(gpt_grad_accumulation_equals_one_big_batch) {
    /* 4 microbatches of B=2 vs one of B=8 on the same 8 sequences, both with the
     * loss scaled by 1/(8·T): the summed loss and every gradient agree */
    mt_gpt_config cfg = {.L = 2, .C = 16, .NH = 2, .maxT = 8, .V = 16, .Vp = 16};
    const int T = 8, BIG = 8, SMALL = 2, ACC = 4;
    const float scale = 1.0f / (BIG * T);
    int32_t tok[8 * 8], tgt[8 * 8];
    random_tokens(tok, BIG * T, cfg.V, 21);
    random_tokens(tgt, BIG * T, cfg.V, 22);
    mt_graph *big = mt_graph_create(), *small = mt_graph_create();
    mt_tensor *lb = mt_gpt_build(big, &cfg, BIG, T, scale);
    mt_tensor *ls = mt_gpt_build(small, &cfg, SMALL, T, scale);
    MT_CHECK(lb && ls, "build: %s", mt_errmsg());
    MT_CHECK_OK(mt_graph_compile(big, lb, &(mt_compile_opts){.seed = 99}));
    MT_CHECK_OK(mt_graph_compile(small, ls, &(mt_compile_opts){.seed = 99}));
    MT_CHECK_OK(mt_gpt_fill_constants(big));
    MT_CHECK_OK(mt_gpt_fill_constants(small));
    memcpy(mt_tensor_i32(mt_graph_find(big, "tokens")), tok, sizeof tok);
    memcpy(mt_tensor_i32(mt_graph_find(big, "targets")), tgt, sizeof tgt);
    MT_CHECK_OK(mt_graph_forward(big));
    MT_CHECK_OK(mt_graph_backward(big));
    double loss_small = 0;
    for (int m = 0; m < ACC; m++) {
        memcpy(mt_tensor_i32(mt_graph_find(small, "tokens")), tok + m * SMALL * T, SMALL * T * sizeof(int32_t));
        memcpy(mt_tensor_i32(mt_graph_find(small, "targets")), tgt + m * SMALL * T, SMALL * T * sizeof(int32_t));
        MT_CHECK_OK(mt_graph_forward(small));
        MT_CHECK_OK(mt_graph_backward(small));
        loss_small += mt_graph_loss(small);
    }
    MT_CHECK(fabs(loss_small - mt_graph_loss(big)) <= 1e-5 * fabs(mt_graph_loss(big)),
             "accumulated loss %.9g, big batch %.9g", loss_small, mt_graph_loss(big));
    MT_CHECK(fabs(mt_graph_loss(big) - log(16.0)) < 0.1, "loss %g is not ~ln V: not a mean",
             mt_graph_loss(big));
    for (int i = 0; i < mt_graph_n_params(big); i++) {
        mt_tensor *pb = mt_graph_param_at(big, i);
        mt_tensor *ps = mt_graph_find(small, mt_tensor_name(pb));
        MT_CHECK(ps != NULL, "no %s in the small graph", mt_tensor_name(pb));
        MT_CHECK(memcmp(mt_tensor_f32(pb), mt_tensor_f32(ps), mt_tensor_numel(pb) * sizeof(float)) == 0,
                 "%s initialised differently for another batch size", mt_tensor_name(pb));
        check_arrays_close(mt_tensor_f32(mt_tensor_grad(ps)), mt_tensor_f32(mt_tensor_grad(pb)),
                           mt_tensor_numel(pb), 1e-5, mt_tensor_name(pb));
    }
    mt_graph_free(big);
    mt_graph_free(small);
}

MT_TEST(gpt_overfits_one_batch) {
    mt_gpt_config cfg = {.L = 1, .C = 32, .NH = 2, .maxT = 8, .V = 16, .Vp = 16};
    const int B = 4, T = 8;
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = mt_gpt_build(g, &cfg, B, T, 1.0f / (B * T));
    MT_CHECK(loss != NULL, "build: %s", mt_errmsg());
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 5}));
    MT_CHECK_OK(mt_gpt_fill_constants(g));
    int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));
    int32_t seq[4 * 9];
    random_tokens(seq, B * (T + 1), cfg.V, 31);
    /* distinct first tokens make every prefix distinct, so the batch can be memorised */
    for (int b = 0; b < B; b++) seq[b * (T + 1)] = 4 * b;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            tok[b * T + t] = seq[b * (T + 1) + t];
            tgt[b * T + t] = seq[b * (T + 1) + t + 1];
        }
    mt_optim_config oc = mt_optim_defaults();
    oc.lr = 1e-2f;
    oc.weight_decay = 0.0f;
    oc.warmup_steps = 0;
    oc.total_steps = 0;
    mt_optim *opt = NULL;
    MT_CHECK_OK(mt_optim_create(g, &oc, &opt));
    float first = 0, last = 0;
    int step = 0;
    for (; step < 400; step++) {
        MT_CHECK_OK(mt_graph_forward(g));
        last = mt_graph_loss(g);
        if (step == 0) first = last;
        if (last < 0.05f) break;
        MT_CHECK_OK(mt_graph_backward(g));
        MT_CHECK_OK(mt_optim_step(opt, NULL));
    }
    MT_CHECK(last < 0.05f, "loss %g after %d steps (from %g); a model this size memorises 32 "
             "tokens", last, step, first);
    mt_optim_free(opt);
    mt_graph_free(g);
}

/* ======================================================================== */
/* Synthetic data                                                            */
/* ======================================================================== */

/* Against the documented problem, y = x·[2, -3.4, 1.7] + 4.2 + 0.01·noise
 * with standard normal x and noise: the residual is the noise, so over 2000
 * examples its mean is ~0 (standard error 2.2e-4) and its spread ~0.01. */
MT_TEST(linreg_data_is_the_documented_line_plus_noise) {
    MT_CHECK(MT_LINREG_DATA_FEATURES == 3, "%d features, want 3", MT_LINREG_DATA_FEATURES);
    const double w[3] = {2.0, -3.4, 1.7}, b = 4.2;
    double sum_r = 0, sum_r2 = 0, sum_x = 0, sum_x2 = 0, worst = 0;
    int n = 0;
    for (int split = 0; split < 2; split++)
        for (uint64_t i = 0; i < 1000; i++, n++) {
            float x[3];
            double y = mt_linreg_data(7, split, i, x);
            double r = y - (b + w[0] * x[0] + w[1] * x[1] + w[2] * x[2]);
            sum_r += r;
            sum_r2 += r * r;
            worst = fmax(worst, fabs(r));
            for (int k = 0; k < 3; k++) { sum_x += x[k]; sum_x2 += (double)x[k] * x[k]; }
        }
    double mean_r = sum_r / n, sd_r = sqrt(sum_r2 / n - mean_r * mean_r);
    MT_CHECK(fabs(mean_r) < 2e-3, "mean residual %g: y is not the line plus zero-mean noise", mean_r);
    MT_CHECK(sd_r > 0.008 && sd_r < 0.012, "noise spread %g, want ~0.01", sd_r);
    MT_CHECK(worst < 0.06, "a residual of %g is more than 6 noise sigmas", worst);
    double mean_x = sum_x / (3.0 * n), var_x = sum_x2 / (3.0 * n) - mean_x * mean_x;
    MT_CHECK(fabs(mean_x) < 0.1 && var_x > 0.9 && var_x < 1.1, "x mean %g variance %g, want "
             "standard normal", mean_x, var_x);
}

/* A pure function of (seed, split, index): the same call gives the same bits,
 * and another split, index or seed other numbers. */
MT_TEST(synthetic_data_are_pure_functions_of_seed_split_index) {
    float xa[8], xb[8], ya[2], yb[2];
    float la = mt_linreg_data(3, 0, 41, xa), lb = mt_linreg_data(3, 0, 41, xb);
    MT_CHECK(memcmp(xa, xb, 3 * sizeof(float)) == 0 && la == lb, "linreg example 41 drawn twice "
             "differs");
    mt_linreg_data(3, 1, 41, xb);
    MT_CHECK(memcmp(xa, xb, 3 * sizeof(float)) != 0, "train and validation example 41 are equal");
    mt_linreg_data(4, 0, 41, xb);
    MT_CHECK(memcmp(xa, xb, 3 * sizeof(float)) != 0, "seeds 3 and 4 draw the same example");
    mt_linreg_data(3, 0, 42, xb);
    MT_CHECK(memcmp(xa, xb, 3 * sizeof(float)) != 0, "examples 41 and 42 are equal");

    MT_CHECK(MT_MLP_DATA_IN == 8 && MT_MLP_DATA_OUT == 2, "MLP problem %d -> %d, want 8 -> 2",
             MT_MLP_DATA_IN, MT_MLP_DATA_OUT);
    mt_mlp_data(3, 0, 41, xa, ya);
    mt_mlp_data(3, 0, 41, xb, yb);
    MT_CHECK(memcmp(xa, xb, sizeof xa) == 0 && memcmp(ya, yb, sizeof ya) == 0,
             "MLP example 41 drawn twice differs");
    MT_CHECK(fabs(ya[0]) <= 1 && fabs(ya[1]) <= 1, "y = (%g, %g) is not a sine", ya[0], ya[1]);
    mt_mlp_data(3, 1, 41, xb, yb);
    MT_CHECK(memcmp(xa, xb, sizeof xa) != 0, "MLP train and validation example 41 are equal");
}

/* ======================================================================== */
/* Trainer                                                                   */
/* ======================================================================== */

static const mt_gpt_config TINY_GPT = {.L = 2, .C = 32, .NH = 4, .maxT = 16, .V = 0, .Vp = 0};

static mt_train_config tiny_gpt_train(const char *data) {
    mt_train_config c = mt_train_defaults();
    c.data = data;
    MT_TEST_MODEL_CONFIG(&c, &TINY_GPT);
    c.B = 4;
    c.T = 16;
    c.steps = 6;
    c.optim.lr = 3e-3f;
    c.optim.warmup_steps = 2;
    c.optim.total_steps = 6;
    c.seed = 42;
    c.threads = 1;
    return c;
}

static mt_train_config linreg_config(float lr, int steps) {
    mt_train_config c = mt_train_defaults();
    c.model = MT_MODEL_LINREG;
    c.B = 32;
    c.steps = steps;
    c.optim = mt_optim_defaults();
    c.optim.kind = MT_OPT_SGD;
    c.optim.lr = lr;
    c.optim.momentum = 0.0f;
    c.optim.weight_decay = 0.0f;
    c.optim.grad_clip = 0.0f;
    c.optim.warmup_steps = 0;
    c.optim.total_steps = 0;
    return c;
}

MT_TEST(linreg_trainer_learns_the_true_weights) {
    mt_train_config c = linreg_config(0.1f, 200);
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    mt_step_report rep = {0};
    float first = 0;
    for (int i = 0; i < c.steps; i++) {
        MT_CHECK_OK(mt_trainer_step(tr, &rep));
        if (i == 0) first = rep.loss;
    }
    MT_CHECK(rep.step == 200 && mt_trainer_step_count(tr) == 200, "step count %d", rep.step);
    MT_CHECK(rep.tokens == 32, "a step sees %lld examples", (long long)rep.tokens);
    /* y has variance |w|² + noise² ≈ 18.5 and mean 4.2 around a zero model */
    MT_CHECK(first > 10.0f, "first loss %g: the zero model should be far off", first);
    MT_CHECK(rep.loss < 1e-3f, "loss %g after 200 steps", rep.loss);
    const float *w = mt_tensor_f32(mt_graph_find(mt_trainer_graph(tr), "w"));
    const float *b = mt_tensor_f32(mt_graph_find(mt_trainer_graph(tr), "b"));
    const float want[3] = {2.0f, -3.4f, 1.7f};
    for (int i = 0; i < 3; i++) MT_CHECK(fabs(w[i] - want[i]) < 0.01, "w[%d] = %g, want %g", i, w[i], want[i]);
    MT_CHECK(fabs(b[0] - 4.2f) < 0.01, "b = %g, want 4.2", b[0]);
    float val = 0;
    MT_CHECK_OK(mt_trainer_eval(tr, &val));
    MT_CHECK(val < 1e-3f && val > 0, "validation loss %g", val);
    mt_trainer_free(tr);
}

/* The model descriptions checkpoints record: a resume compares them byte for
 * byte, so checkpoints written before a change must still match. Written out
 * here from the formats of the first checkpoints. */
MT_TEST(trainer_checkpoints_describe_the_model_as_before) {
    char path[64], ckpt[80];
    write_temp_text(path, fox_text, 30);
    snprintf(ckpt, sizeof ckpt, "%s.ckpt", path);
    mt_train_config gpt = tiny_gpt_train(path), mlp = mt_train_defaults(),
                    linreg = linreg_config(0.1f, 1);
    mlp.model = MT_MODEL_MLP;
    const mt_mlp_config mlp_cfg = {.hidden = 16, .layers = 2};
    MT_TEST_MODEL_CONFIG(&mlp, &mlp_cfg);
    const struct { mt_train_config *c; const char *want; } cases[] = {
        {&gpt, "gpt L=2 C=32 NH=4 maxT=16 V=256 Vp=256"},
        {&mlp, "mlp in=8 hidden=16 out=2 layers=2"},
        {&linreg, "linreg features=3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cases[i].c->ckpt_out = ckpt;
        cases[i].c->steps = 1;
        mt_trainer *tr = NULL;
        MT_CHECK_OK(mt_trainer_create(cases[i].c, &tr));
        MT_CHECK_OK(mt_trainer_step(tr, NULL));
        MT_CHECK_OK(mt_trainer_save(tr));
        mt_trainer_free(tr);
        mt_ckpt_meta meta;
        MT_CHECK_OK(mt_ckpt_read_meta(ckpt, &meta));
        MT_CHECK(strcmp(meta.model, cases[i].want) == 0, "checkpoint describes the model as "
                 "'%s', want '%s'", meta.model, cases[i].want);
    }
    unlink(path);
    unlink(ckpt);
}

MT_TEST(trainer_names_the_models) {
    const char *want[] = {"gpt", "mlp", "linreg", "llama"};
    const mt_model_kind kinds[] = {MT_MODEL_GPT, MT_MODEL_MLP, MT_MODEL_LINREG, MT_MODEL_LLAMA};
    for (int i = 0; i < 4; i++)
        MT_CHECK(mt_model_name(kinds[i]) && strcmp(mt_model_name(kinds[i]), want[i]) == 0,
                 "model kind %d is named '%s', want '%s'", (int)kinds[i],
                 mt_model_name(kinds[i]) ? mt_model_name(kinds[i]) : "(null)", want[i]);
    MT_CHECK(mt_model_name((mt_model_kind)4) == NULL && mt_model_name((mt_model_kind)-1) == NULL,
             "kinds 4 and -1 have names");
    mt_train_config c = linreg_config(0.1f, 1);
    c.model = (mt_model_kind)7;
    mt_trainer *tr = NULL;
    MT_CHECK_FAILS(mt_trainer_create(&c, &tr), MT_EINVAL,
                   "unknown model kind 7; use gpt, mlp, linreg or llama");
    MT_CHECK(tr == NULL, "a trainer was made for kind 7");
}

MT_TEST(trainer_blowup_fails_with_enan_naming_the_step) {
    mt_train_config c = linreg_config(1e6f, 50);
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    mt_status s = MT_OK;
    int tried = 0;
    while (s == MT_OK && tried < 50) {
        tried++;
        s = mt_trainer_step(tr, NULL);
    }
    MT_CHECK(s == MT_ENAN, "lr=1e6 gave %s after %d steps", mt_status_name(s), tried);
    char want[32];
    snprintf(want, sizeof want, "step %d", tried);
    MT_CHECK(strstr(mt_errmsg(), want) != NULL, "message does not name %s: %s", want, mt_errmsg());
    MT_CHECK(mt_trainer_step_count(tr) == tried - 1, "the failed step was counted");
    mt_trainer_free(tr);

    /* the same for a GPT under AdamW */
    char path[64];
    write_temp_text(path, fox_text, 20);
    c = mt_train_defaults();
    c.data = path;
    const mt_gpt_config one_block = {.L = 1, .C = 32, .NH = 2, .maxT = 16, .V = 0, .Vp = 0};
    MT_TEST_MODEL_CONFIG(&c, &one_block);
    c.B = 4;
    c.T = 16;
    c.optim.lr = 1e6f;
    c.optim.warmup_steps = 0;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    unlink(path);
    s = MT_OK;
    tried = 0;
    while (s == MT_OK && tried < 50) {
        tried++;
        s = mt_trainer_step(tr, NULL);
    }
    MT_CHECK(s == MT_ENAN, "GPT with lr=1e6 gave %s after %d steps", mt_status_name(s), tried);
    snprintf(want, sizeof want, "step %d", tried);
    MT_CHECK(strstr(mt_errmsg(), want) != NULL, "message does not name %s: %s", want, mt_errmsg());
    mt_trainer_free(tr);
}

MT_TEST(trainer_takes_the_vocabulary_from_the_data) {
    /* an llm.c token file with tokens 0..99: V=100, padded to Vp=128 */
    char path[64];
    snprintf(path, sizeof path, "/tmp/mt_test_models_XXXXXX");
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0, "mkstemp");
    close(fd);
    int32_t tok[2000];
    for (int i = 0; i < 2000; i++) tok[i] = (i * 37) % 100;
    MT_CHECK_OK(mt_tokens_write(path, tok, 2000));
    mt_train_config c = tiny_gpt_train(path);
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    const mt_train_config *rc = mt_trainer_config(tr);
    const mt_gpt_config *rg = rc->model_config;
    MT_CHECK(rg && rg != c.model_config && rg->V == 100 && rg->Vp == 128,
             "resolved V=%d Vp=%d, want 100 and 128, in the trainer's copy", rg ? rg->V : -1,
             rg ? rg->Vp : -1);
    MT_CHECK(rc->data != c.data && strcmp(rc->data, path) == 0, "the trainer keeps its own copy "
             "of the data path");
    mt_step_report r;
    MT_CHECK_OK(mt_trainer_step(tr, &r));
    MT_CHECK(fabs(r.loss - log(100.0)) < 0.1, "first loss %g, want ~ln 100 (padding ignored)", r.loss);
    mt_trainer_free(tr);

    /* a model vocabulary smaller than the data's is refused, naming both */
    mt_gpt_config v50 = mt_test_gpt_of(&c);
    v50.V = 50;
    MT_TEST_MODEL_CONFIG(&c, &v50);
    MT_CHECK(mt_trainer_create(&c, &tr) == MT_EINVAL && !tr, "V=50 accepted for 100-token data");
    MT_CHECK(strstr(mt_errmsg(), "V=50") && strstr(mt_errmsg(), "100"), "message: %s", mt_errmsg());
    unlink(path);
}

MT_TEST(mlp_trainer_fits_the_teacher) {
    mt_train_config c = mt_train_defaults();
    c.model = MT_MODEL_MLP;
    const mt_mlp_config mlp = {.hidden = 32, .layers = 3};
    MT_TEST_MODEL_CONFIG(&c, &mlp);
    c.B = 64;
    c.optim.lr = 1e-2f;
    c.optim.weight_decay = 0.0f;
    c.optim.warmup_steps = 0;
    c.optim.total_steps = 0;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    float before = 0, after = 0;
    MT_CHECK_OK(mt_trainer_eval(tr, &before));
    for (int i = 0; i < 300; i++) MT_CHECK_OK(mt_trainer_step(tr, NULL));
    MT_CHECK_OK(mt_trainer_eval(tr, &after));
    MT_CHECK(after < 0.2f * before, "validation loss %g -> %g after 300 steps", before, after);
    mt_trainer_free(tr);
}

MT_TEST(trainer_accum_matches_one_big_batch) {
    char path[64];
    write_temp_text(path, fox_text, 30);
    mt_train_config c = tiny_gpt_train(path);
    c.optim.kind = MT_OPT_SGD;   /* its update is linear in the gradient: a sharp test */
    c.optim.lr = 0.5f;
    c.optim.momentum = 0.9f;
    c.optim.grad_clip = 0.0f;
    c.optim.weight_decay = 0.0f;
    c.B = 8;
    c.accum = 1;
    mt_trainer *big = NULL, *small = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &big));
    c.B = 2;
    c.accum = 4;
    MT_CHECK_OK(mt_trainer_create(&c, &small));
    unlink(path);
    const mt_train_config *rc = mt_trainer_config(big);
    const mt_gpt_config rg = mt_test_gpt_of(rc);
    MT_CHECK(rg.V == 256 && rg.Vp == 256, "text data resolved to V=%d Vp=%d", rg.V, rg.Vp);
    for (int i = 0; i < 3; i++) {
        mt_step_report rb, rs;
        MT_CHECK_OK(mt_trainer_step(big, &rb));
        MT_CHECK_OK(mt_trainer_step(small, &rs));
        MT_CHECK(rb.tokens == 128 && rs.tokens == 128, "tokens %lld / %lld", (long long)rb.tokens,
                 (long long)rs.tokens);
        MT_CHECK(fabs(rb.loss - rs.loss) <= 1e-5 * fabs(rb.loss), "step %d: loss %.9g (B=8) vs "
                 "%.9g (4 x B=2)", i + 1, rb.loss, rs.loss);
        MT_CHECK(fabs(rb.grad_norm - rs.grad_norm) <= 1e-5 * rb.grad_norm, "step %d: grad norm "
                 "%.9g vs %.9g", i + 1, rb.grad_norm, rs.grad_norm);
        if (i == 0) MT_CHECK(fabs(rb.loss - log(256.0)) < 0.1, "first loss %g is not ~ln 256", rb.loss);
    }
    mt_graph *gb = mt_trainer_graph(big), *gs = mt_trainer_graph(small);
    for (int i = 0; i < mt_graph_n_params(gb); i++) {
        mt_tensor *pb = mt_graph_param_at(gb, i);
        check_arrays_close(mt_tensor_f32(mt_graph_find(gs, mt_tensor_name(pb))), mt_tensor_f32(pb),
                           mt_tensor_numel(pb), 1e-5, mt_tensor_name(pb));
    }
    mt_trainer_free(big);
    mt_trainer_free(small);
}

MT_TEST(trainer_resume_matches_uninterrupted_run) {
    char path[64], ckpt[80];
    write_temp_text(path, fox_text, 30);
    snprintf(ckpt, sizeof ckpt, "%s.ckpt", path);
    mt_train_config c = tiny_gpt_train(path);
    mt_trainer *straight = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &straight));
    float want[6];
    for (int i = 0; i < 6; i++) {
        mt_step_report r;
        MT_CHECK_OK(mt_trainer_step(straight, &r));
        want[i] = r.loss;
    }
    mt_trainer *first = NULL;
    c.ckpt_out = ckpt;
    MT_CHECK_OK(mt_trainer_create(&c, &first));
    for (int i = 0; i < 3; i++) MT_CHECK_OK(mt_trainer_step(first, NULL));
    MT_CHECK_OK(mt_trainer_save(first));
    mt_trainer_free(first);

    /* a different seed in the config: the checkpoint's is the one that counts */
    c.ckpt_out = NULL;
    c.ckpt_in = ckpt;
    c.seed = 1;
    mt_trainer *resumed = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &resumed));
    MT_CHECK(mt_trainer_step_count(resumed) == 3, "resumed at step %d", mt_trainer_step_count(resumed));
    for (int i = 3; i < 6; i++) {
        mt_step_report r;
        MT_CHECK_OK(mt_trainer_step(resumed, &r));
        MT_CHECK(r.step == i + 1, "resumed step reported as %d", r.step);
        MT_CHECK(fabs(r.loss - want[i]) <= 1e-6 * fabs(want[i]), "step %d: resumed loss %.9g, "
                 "uninterrupted %.9g", i + 1, r.loss, want[i]);
    }
    mt_graph *ga = mt_trainer_graph(straight), *gb = mt_trainer_graph(resumed);
    for (int i = 0; i < mt_graph_n_params(ga); i++) {
        mt_tensor *pa = mt_graph_param_at(ga, i);
        check_arrays_close(mt_tensor_f32(mt_graph_find(gb, mt_tensor_name(pa))), mt_tensor_f32(pa),
                           mt_tensor_numel(pa), 1e-6, mt_tensor_name(pa));
    }
    mt_trainer_free(resumed);

    /* a checkpoint of another model is refused, naming both */
    mt_gpt_config wider = mt_test_gpt_of(&c);
    wider.C = 64;
    MT_TEST_MODEL_CONFIG(&c, &wider);
    mt_trainer *wrong = NULL;
    mt_status s = mt_trainer_create(&c, &wrong);
    MT_CHECK(s == MT_EINVAL && !wrong, "resuming a C=32 checkpoint as C=64 gave %s", mt_status_name(s));
    MT_CHECK(strstr(mt_errmsg(), "C=32") && strstr(mt_errmsg(), "C=64"), "message: %s", mt_errmsg());
    mt_trainer_free(straight);
    unlink(path);
    unlink(ckpt);
}

MT_TEST(trainer_eval_at_init_is_ln_V) {
    char path[64];
    write_temp_text(path, fox_text, 40);
    mt_train_config c = tiny_gpt_train(path);
    c.eval_batches = 2;
    c.val_frac = 0.2;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    unlink(path);
    float v0 = 0, v1 = 0;
    MT_CHECK_OK(mt_trainer_eval(tr, &v0));
    MT_CHECK(fabs(v0 - log(256.0)) < 0.1, "validation loss at init %g, want ~ln 256", v0);
    MT_CHECK_OK(mt_trainer_eval(tr, &v1));
    MT_CHECK(v0 == v1, "two evaluations of the same model differ: %g vs %g", v0, v1);
    for (int i = 0; i < 6; i++) MT_CHECK_OK(mt_trainer_step(tr, NULL));
    MT_CHECK_OK(mt_trainer_eval(tr, &v1));
    MT_CHECK(v1 < v0 - 0.1, "validation loss did not fall after training: %g -> %g", v0, v1);
    mt_trainer_free(tr);
}

/* Conflicts a run would meet only later fail at create, before step 1
 * (issue 7): periodic saves with nowhere to save, and evaluation on a
 * validation split too short for one window. */
MT_TEST(trainer_refuses_conflicts_before_step_1) {
    mt_train_config c = linreg_config(0.1f, 10);
    c.ckpt_every = 5;
    mt_trainer *tr = NULL;
    MT_CHECK(mt_trainer_create(&c, &tr) == MT_EINVAL && !tr, "ckpt_every without ckpt_out "
             "accepted");
    MT_CHECK(strstr(mt_errmsg(), "ckpt_every=5") && strstr(mt_errmsg(), "ckpt_out"),
             "message: %s", mt_errmsg());

    char path[64];
    write_temp_text(path, fox_text, 30);   /* 2580 bytes */
    c = tiny_gpt_train(path);
    c.eval_every = 2;
    c.val_frac = 0.0;
    MT_CHECK(mt_trainer_create(&c, &tr) == MT_EINVAL && !tr, "eval_every with val_frac 0 "
             "accepted");
    MT_CHECK(strstr(mt_errmsg(), "eval_every=2") && strstr(mt_errmsg(), "val_frac=0") &&
             strstr(mt_errmsg(), "T+1=17"), "message: %s", mt_errmsg());
    c.val_frac = 0.005;   /* 12 tokens: still fewer than T+1 */
    MT_CHECK(mt_trainer_create(&c, &tr) == MT_EINVAL && !tr, "a 12-token split accepted");
    MT_CHECK(strstr(mt_errmsg(), "leaves 12 of the 2580 tokens"), "message: %s", mt_errmsg());
    c.val_frac = 0.1;     /* 258 tokens: enough */
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    mt_trainer_free(tr);
    c.val_frac = 0.0;
    c.eval_every = 0;     /* no evaluation: no validation split needed */
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    mt_trainer_free(tr);
    unlink(path);
}

/* ======================================================================== */
/* Sampling                                                                  */
/* ======================================================================== */

static void sample_to_string(const mt_sample_config *sc, char *buf, size_t n) {
    FILE *f = tmpfile();
    MT_CHECK(f != NULL, "tmpfile");
    MT_CHECK_OK(mt_sample(sc, f));
    rewind(f);
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

MT_TEST(sample_continues_a_learned_pattern) {
    /* a model trained on "0123456" repeated continues the digits greedily; the
     * period 7 is coprime with T=16, so training windows start at every phase */
    char path[64], ckpt[80], llmc[80];
    write_temp_text(path, "0123456", 400);
    snprintf(ckpt, sizeof ckpt, "%s.ckpt", path);
    snprintf(llmc, sizeof llmc, "%s.bin", path);
    mt_train_config c = tiny_gpt_train(path);
    const mt_gpt_config one_block = {.L = 1, .C = 32, .NH = 2, .maxT = 16, .V = 0, .Vp = 0};
    MT_TEST_MODEL_CONFIG(&c, &one_block);
    c.steps = 150;
    c.optim.lr = 1e-2f;
    c.optim.warmup_steps = 0;
    c.optim.total_steps = 0;
    c.ckpt_out = ckpt;
    c.llmc_out = llmc;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    mt_step_report r = {0};
    for (int i = 0; i < c.steps; i++) MT_CHECK_OK(mt_trainer_step(tr, &r));
    MT_CHECK(r.loss < 0.1f, "loss %g after %d steps on a repeating pattern", r.loss, c.steps);
    MT_CHECK_OK(mt_trainer_save(tr));
    mt_trainer_free(tr);

    /* 40 tokens: more than maxT=16, so the window slides */
    mt_sample_config sc = {.ckpt = ckpt, .prompt = "3456", .n = 40, .temperature = 0.0f,
                           .top_k = 0, .seed = 1, .threads = 1};
    char got[256];
    sample_to_string(&sc, got, sizeof got);
    const char *want = "0123456012345601234560123456012345601234";
    MT_CHECK(strcmp(got, want) == 0, "greedy sample '%s', want '%s'", got, want);

    /* llm.c's checkpoint of the same model samples the same, at temperature too */
    sc.temperature = 1.0f;
    sc.top_k = 3;
    sc.seed = 77;
    char a[256], b[256];
    sample_to_string(&sc, a, sizeof a);
    sc.ckpt = llmc;
    sample_to_string(&sc, b, sizeof b);
    MT_CHECK(strlen(a) == 40, "sampled %zu bytes, want 40", strlen(a));
    MT_CHECK(strcmp(a, b) == 0, "meshtrain checkpoint sampled '%s', llm.c checkpoint '%s'", a, b);

    /* a missing checkpoint fails naming it */
    sc.ckpt = "/nonexistent/model.bin";
    FILE *f = tmpfile();
    MT_CHECK(mt_sample(&sc, f) != MT_OK, "sampling a missing checkpoint succeeded");
    MT_CHECK(strstr(mt_errmsg(), "/nonexistent/model.bin"), "message: %s", mt_errmsg());
    fclose(f);
    unlink(path);
    unlink(ckpt);
    unlink(llmc);
}

/* A sample that cannot be written stops with the system's message instead of
 * "succeeding" into a full disk (issue 7). */
MT_TEST(sample_reports_write_errors) {
    char path[64], ckpt[80];
    write_temp_text(path, fox_text, 30);
    snprintf(ckpt, sizeof ckpt, "%s.ckpt", path);
    mt_train_config c = tiny_gpt_train(path);
    c.ckpt_out = ckpt;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    MT_CHECK_OK(mt_trainer_save(tr));
    mt_trainer_free(tr);
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        mt_sample_config sc = {.ckpt = ckpt, .prompt = "the ", .n = 5, .temperature = 0};
        MT_CHECK(mt_sample(&sc, full) == MT_EIO, "writing to /dev/full succeeded");
        MT_CHECK(strstr(mt_errmsg(), "No space left on device") &&
                 strstr(mt_errmsg(), "after 0 of 5 tokens"), "message: %s", mt_errmsg());
        fclose(full);
    }
    mt_sample_config missing = {.ckpt = "/nonexistent/x.ckpt", .n = 5};
    FILE *f = tmpfile();
    MT_CHECK(mt_sample(&missing, f) == MT_EIO, "a missing checkpoint");
    MT_CHECK(strstr(mt_errmsg(), "/nonexistent/x.ckpt") &&
             strstr(mt_errmsg(), "No such file or directory"), "message: %s", mt_errmsg());
    fclose(f);
    unlink(ckpt);
    unlink(path);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
