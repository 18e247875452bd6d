/*
 * test_hf_gpt2.c — a GPT-2 from and to a Hugging Face directory (io.h's
 * mt_hf_*_gpt2, issue 43). A small random GPT-2 is written here in
 * transformers' layout (GPT2LMHeadModel: "transformer." names, Conv1D
 * weights (in, out), c_attn's q, k, v side by side, the causal-mask buffer
 * attn.bias of older files, a tied lm_head.weight) with a config.json by
 * hand; meshtrain loads it into its GPT, whose loss on random tokens must
 * equal a float64 GPT-2 written here from transformers' GPT2Model
 * equations on the weights as written (y = x·W + b, GELU's tanh form,
 * LayerNorm eps 1e-5, causal softmax(q·kᵀ/√hs), logits x·wteᵀ). Saving
 * writes each tensor back as it was read, and the saved directory loads
 * bit for bit. Refusals name the field or the tensor.
 */
#include "meshtrain.h"
#include "harness.h"
#include "hf_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { C = 16, NH = 2, HS = C / NH, L = 2, V = 50, P = 16, B = 2, T = 6 };

/* "DIR/name" (hf_test.h) */
static const char *at(const char *name) { return hf_at("", name); }

/* The model in transformers' layout. */
typedef struct {
    int     n;
    char    name[40][64];
    int64_t shape[40][2];
    int     ndim[40];
    float  *v[40];
} hf_model;

static float *add(hf_model *m, const char *name, int64_t r, int64_t c, float mean, float sd) {
    const int i = m->n++;
    snprintf(m->name[i], sizeof m->name[i], "%s", name);
    m->shape[i][0] = r, m->shape[i][1] = c, m->ndim[i] = c ? 2 : 1;
    const int64_t n = r * (c ? c : 1);
    m->v[i] = malloc((size_t)n * sizeof(float));
    for (int64_t j = 0; j < n; j++) m->v[i][j] = mean + sd * mt_rng_normal(11, (uint64_t)i, (uint64_t)j);
    return m->v[i];
}

static const float *get(const hf_model *m, const char *fmt, int l) {
    char name[64];
    snprintf(name, sizeof name, fmt, l);
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->name[i], name)) return m->v[i];
    mt_test_fail(__FILE__, __LINE__, "no %s", name);
}

static void make(hf_model *m, bool extras) {
    memset(m, 0, sizeof *m);
    add(m, "transformer.wte.weight", V, C, 0, 0.3f);
    add(m, "transformer.wpe.weight", P, C, 0, 0.1f);
    char n[64];
    for (int l = 0; l < L; l++) {
#define A(fmt, r, c, mu, sd) (snprintf(n, sizeof n, "transformer.h.%d." fmt, l), add(m, n, r, c, mu, sd))
        A("ln_1.weight", C, 0, 1, 0.1f);
        A("ln_1.bias", C, 0, 0, 0.1f);
        A("attn.c_attn.weight", C, 3 * C, 0, 0.3f);
        A("attn.c_attn.bias", 3 * C, 0, 0, 0.1f);
        A("attn.c_proj.weight", C, C, 0, 0.3f);
        A("attn.c_proj.bias", C, 0, 0, 0.1f);
        A("ln_2.weight", C, 0, 1, 0.1f);
        A("ln_2.bias", C, 0, 0, 0.1f);
        A("mlp.c_fc.weight", C, 4 * C, 0, 0.3f);
        A("mlp.c_fc.bias", 4 * C, 0, 0, 0.1f);
        A("mlp.c_proj.weight", 4 * C, C, 0, 0.3f);
        A("mlp.c_proj.bias", C, 0, 0, 0.1f);
        if (extras) A("attn.bias", P, P, 0, 0);   /* the causal-mask buffer of older files */
#undef A
    }
    add(m, "transformer.ln_f.weight", C, 0, 1, 0.1f);
    add(m, "transformer.ln_f.bias", C, 0, 0, 0.1f);
    if (extras) {   /* a tied head saved anyway */
        float *h = add(m, "lm_head.weight", V, C, 0, 0);
        memcpy(h, m->v[0], sizeof(float) * V * C);
    }
}

static void write(const hf_model *m, const char *config) {
    mt_st_write_tensor w[40];
    for (int i = 0; i < m->n; i++)
        w[i] = (mt_st_write_tensor){m->name[i], MT_ST_F32, m->ndim[i], m->shape[i], m->v[i]};
    MT_CHECK_OK(mt_safetensors_write(at("model.safetensors"), w, m->n, NULL));
    FILE *f = fopen(at("config.json"), "w");
    fputs(config, f);
    fclose(f);
}

static const char *CONFIG =
    "{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 16, \"n_layer\": 2, \"n_head\": 2, "
    "\"n_positions\": 16, \"vocab_size\": 50, \"layer_norm_epsilon\": 1e-05, "
    "\"activation_function\": \"gelu_new\"}";

/* y (n,O) = x (n,I) · w (I,O) + b */
static void conv1d(double *y, const double *x, const float *w, const float *b, int n, int I, int O) {
    for (int r = 0; r < n; r++)
        for (int o = 0; o < O; o++) {
            double s = b ? b[o] : 0;
            for (int i = 0; i < I; i++) s += x[r * I + i] * w[i * O + o];
            y[r * O + o] = s;
        }
}

static void layernorm(double *y, const double *x, const float *w, const float *b, int n) {
    for (int r = 0; r < n; r++) {
        double mu = 0, var = 0;
        for (int c = 0; c < C; c++) mu += x[r * C + c] / C;
        for (int c = 0; c < C; c++) var += (x[r * C + c] - mu) * (x[r * C + c] - mu) / C;
        for (int c = 0; c < C; c++) y[r * C + c] = (x[r * C + c] - mu) / sqrt(var + 1e-5) * w[c] + b[c];
    }
}

/* The mean cross entropy of GPT2LMHeadModel on tokens (B,T). */
static double ref_loss(const hf_model *m, const int32_t *tok, const int32_t *tgt) {
    enum { N = B * T };
    static double x[N * C], h[N * C], qkv[N * 3 * C], att[N * C], y[N * 4 * C], lg[N * V];
    const float *wte = get(m, "transformer.wte.weight", 0), *wpe = get(m, "transformer.wpe.weight", 0);
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++) x[r * C + c] = wte[tok[r] * C + c] + wpe[(r % T) * C + c];
    for (int l = 0; l < L; l++) {
        layernorm(h, x, get(m, "transformer.h.%d.ln_1.weight", l), get(m, "transformer.h.%d.ln_1.bias", l), N);
        conv1d(qkv, h, get(m, "transformer.h.%d.attn.c_attn.weight", l),
               get(m, "transformer.h.%d.attn.c_attn.bias", l), N, C, 3 * C);
        for (int b = 0; b < B; b++)
            for (int hd = 0; hd < NH; hd++)
                for (int t = 0; t < T; t++) {
                    double p[T], mx = -INFINITY, z = 0;
                    const double *q = qkv + (b * T + t) * 3 * C + hd * HS;
                    for (int u = 0; u <= t; u++) {
                        const double *k = qkv + (b * T + u) * 3 * C + C + hd * HS;
                        double s = 0;
                        for (int i = 0; i < HS; i++) s += q[i] * k[i];
                        p[u] = s / sqrt((double)HS);
                        mx = p[u] > mx ? p[u] : mx;
                    }
                    for (int u = 0; u <= t; u++) z += (p[u] = exp(p[u] - mx));
                    for (int i = 0; i < HS; i++) {
                        double s = 0;
                        for (int u = 0; u <= t; u++) s += p[u] / z * qkv[(b * T + u) * 3 * C + 2 * C + hd * HS + i];
                        att[(b * T + t) * C + hd * HS + i] = s;
                    }
                }
        conv1d(h, att, get(m, "transformer.h.%d.attn.c_proj.weight", l),
               get(m, "transformer.h.%d.attn.c_proj.bias", l), N, C, C);
        for (int i = 0; i < N * C; i++) x[i] += h[i];
        layernorm(h, x, get(m, "transformer.h.%d.ln_2.weight", l), get(m, "transformer.h.%d.ln_2.bias", l), N);
        conv1d(y, h, get(m, "transformer.h.%d.mlp.c_fc.weight", l), get(m, "transformer.h.%d.mlp.c_fc.bias", l),
               N, C, 4 * C);
        for (int i = 0; i < N * 4 * C; i++)   /* gelu_new */
            y[i] = 0.5 * y[i] * (1 + tanh(sqrt(2 / M_PI) * (y[i] + 0.044715 * y[i] * y[i] * y[i])));
        conv1d(h, y, get(m, "transformer.h.%d.mlp.c_proj.weight", l),
               get(m, "transformer.h.%d.mlp.c_proj.bias", l), N, 4 * C, C);
        for (int i = 0; i < N * C; i++) x[i] += h[i];
    }
    layernorm(h, x, get(m, "transformer.ln_f.weight", 0), get(m, "transformer.ln_f.bias", 0), N);
    double loss = 0;
    for (int r = 0; r < N; r++) {
        double mx = -INFINITY, z = 0;
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int c = 0; c < C; c++) s += h[r * C + c] * wte[v * C + c];
            lg[r * V + v] = s;
            mx = s > mx ? s : mx;
        }
        for (int v = 0; v < V; v++) z += exp(lg[r * V + v] - mx);
        loss += -(lg[r * V + tgt[r]] - mx - log(z)) / N;
    }
    return loss;
}

static mt_graph *build(const mt_gpt_config *c) {
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = mt_gpt_build(g, c, B, T, 1.0f / (B * T));
    MT_CHECK(loss, "mt_gpt_build: %s", mt_graph_errmsg(g));
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 3}));
    MT_CHECK_OK(mt_gpt_fill_constants(g));   /* the position ids */
    hf_fill_tokens(g, B * T, V);
    return g;
}

MT_TEST(hf_gpt2_loads_against_transformers_equations_and_round_trips) {
    hf_make_dir();
    hf_model m;
    make(&m, true);
    write(&m, CONFIG);
    mt_gpt_config c;
    MT_CHECK_OK(mt_hf_read_gpt2_config(hf_dir, &c));
    MT_CHECK(c.C == C && c.L == L && c.NH == NH && c.maxT == P && c.V == V && c.Vp == 64,
             "config read wrong: C %d L %d NH %d maxT %d V %d Vp %d", c.C, c.L, c.NH, c.maxT,
             c.V, c.Vp);
    mt_graph *g = build(&c);
    MT_CHECK_OK(mt_hf_load_gpt2(hf_dir, g, &c));
    MT_CHECK_OK(mt_graph_forward(g));
    const double want = ref_loss(&m, mt_tensor_i32(mt_graph_find(g, "tokens")),
                                 mt_tensor_i32(mt_graph_find(g, "targets")));
    MT_CHECK_CLOSE(mt_graph_loss(g), want, 1e-5, "loss against transformers' GPT-2 equations");
    const float *wte = mt_tensor_f32(mt_graph_find(g, "wte"));
    for (int64_t i = (int64_t)V * C; i < (int64_t)c.Vp * C; i++)
        MT_CHECK(wte[i] == 0, "padding row element %lld is %g", (long long)i, wte[i]);

    char out[600];
    snprintf(out, sizeof out, "%s/out", hf_dir);
    MT_CHECK_OK(mt_hf_save_gpt2(out, &c, g));
    mt_safetensors *st = NULL;
    MT_CHECK_OK(mt_safetensors_open(out, &st));
    int weights = 0;
    for (int i = 0; i < m.n; i++) {
        const size_t len = strlen(m.name[i]);   /* the mask buffer, the tied head: not saved */
        if ((len > 10 && !strcmp(m.name[i] + len - 10, ".attn.bias")) || strstr(m.name[i], "lm_head"))
            continue;
        const mt_st_tensor *x = mt_safetensors_find(st, m.name[i]);
        MT_CHECK(x && x->ndim == m.ndim[i] && x->shape[0] == m.shape[i][0] &&
                 (x->ndim == 1 || x->shape[1] == m.shape[i][1]), "%s not saved as read", m.name[i]);
        float *v = malloc((size_t)x->numel * sizeof *v);
        MT_CHECK_OK(mt_safetensors_read_f32(st, x, 0, x->numel, v));
        MT_CHECK(!memcmp(v, m.v[i], (size_t)x->numel * sizeof *v), "%s differs", m.name[i]);
        free(v);
        weights++;
    }
    MT_CHECK(mt_safetensors_count(st) == weights, "%d tensors saved, %d weights",
             mt_safetensors_count(st), weights);
    mt_safetensors_close(st);
    mt_gpt_config c2;
    MT_CHECK_OK(mt_hf_read_gpt2_config(out, &c2));
    MT_CHECK(!memcmp(&c, &c2, sizeof c), "the saved config reads back different");
    mt_graph *g2 = build(&c2);
    MT_CHECK_OK(mt_hf_load_gpt2(out, g2, &c2));
    for (int i = 0; i < mt_graph_n_params(g); i++) {
        mt_tensor *a = mt_graph_param_at(g, i), *b = mt_graph_find(g2, mt_tensor_name(a));
        MT_CHECK(b && !memcmp(mt_tensor_f32(a), mt_tensor_f32(b),
                              (size_t)mt_tensor_numel(a) * sizeof(float)),
                 "%s differs after save and load", mt_tensor_name(a));
    }
    mt_graph_free(g2);

    /* refusals */
    float *head = m.v[m.n - 1];
    head[5] += 1;   /* an untied head */
    write(&m, CONFIG);
    MT_CHECK_FAILS(mt_hf_load_gpt2(hf_dir, g, &c), MT_EUNSUPPORTED, "lm_head.weight", "ties");
    head[5] -= 1;
    float *cattn = m.v[4];   /* layer 0's c_attn.weight, given (3C, C) */
    m.shape[4][0] = 3 * C, m.shape[4][1] = C;
    (void)cattn;
    write(&m, CONFIG);
    MT_CHECK_FAILS(mt_hf_load_gpt2(hf_dir, g, &c), MT_ESHAPE, "h.0.attn.c_attn.weight", "(16,48)");
    static const struct { const char *cfg, *w1, *w2; } bad[] = {
        {"{\"architectures\": [\"LlamaForCausalLM\"]}", "LlamaForCausalLM", "GPT2LMHeadModel"},
        {"{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 16, \"n_layer\": 2, \"n_head\": 2, "
         "\"n_positions\": 16, \"vocab_size\": 50, \"activation_function\": \"relu\"}",
         "activation_function 'relu'", "gelu_new"},
        {"{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 16, \"n_layer\": 2, \"n_head\": 2, "
         "\"n_positions\": 16, \"vocab_size\": 50, \"tie_word_embeddings\": false}",
         "tie_word_embeddings", "ties"},
        {"{\"architectures\": [\"GPT2LMHeadModel\"], \"n_embd\": 16, \"n_layer\": 2, \"n_head\": 2, "
         "\"n_positions\": 16, \"vocab_size\": 50, \"layer_norm_epsilon\": 1e-6}",
         "layer_norm_epsilon", "1e-5"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        FILE *f = fopen(at("config.json"), "w");
        fputs(bad[i].cfg, f);
        fclose(f);
        MT_CHECK_FAILS(mt_hf_read_gpt2_config(hf_dir, &c2), MT_EUNSUPPORTED, bad[i].w1, bad[i].w2);
    }
    mt_graph_free(g);
    for (int i = 0; i < m.n; i++) free(m.v[i]);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
