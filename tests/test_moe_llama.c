/*
 * test_moe_llama.c — the LLaMA's MoE feed-forward as a whole model
 * (models/llama/llama_moe.c), against the dense LLaMA, which
 * tests/test_llama.c checks against a float64 reference with finite
 * differences:
 *
 *  - E experts that all hold the dense FFN's weights (transposed into the
 *    experts' (E,C,F) layout), softmax gates renormalised over k, no aux or
 *    z-loss: each token's output is Σ_j g_j · FFN(x) = FFN(x), so the
 *    model's loss equals the dense model's, each expert's weight gradient
 *    summed over the experts equals the dense weight's, every other
 *    parameter's gradient is the dense one's, and the router's is 0 (the
 *    output does not depend on the gates' split). E=1 k=1, E=2 k=2 and
 *    E=4 k=2, the MoE in every block or after a dense first one;
 *  - the parameters are the ones the model's documentation lists, and
 *    their count is mt_llama_num_params.
 */
#include "meshtrain.h"
#include "harness.h"

#include <stdio.h>
#include <string.h>

enum { B = 2, T = 7, C = 16, F = 24, L = 2, V = 13 };

static mt_llama_config dense(void) {
    return (mt_llama_config){.dim = C, .ffn_dim = F, .n_layers = L, .n_heads = 4,
                             .n_kv_heads = 2, .vocab = V, .max_seq = 16,
                             .rope_theta = 10000.0f, .norm_eps = 1e-5f, .multiple_of = 8,
                             .ffn_mult = 1.0f};
}

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

/* Builds, compiles (seed 5: every parameter's values from its name) and
 * fills the tokens and targets. */
static mt_graph *build(const mt_llama_config *cfg, mt_tensor **loss) {
    mt_graph *g = mt_graph_create();
    *loss = mt_llama_build(g, cfg, B, T, 1.0f / (B * T));
    MT_CHECK(*loss, "mt_llama_build: %s", mt_graph_errmsg(g));
    MT_CHECK_OK(mt_graph_compile(g, *loss, &(mt_compile_opts){.seed = 5}));
    int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));
    uint64_t s = 3;
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)(lcg(&s) % V);
        tgt[i] = (int32_t)(lcg(&s) % V);
    }
    return g;
}

static float *f32(mt_graph *g, const char *fmt, int l) {
    char name[64];
    snprintf(name, sizeof name, fmt, l);
    mt_tensor *t = mt_graph_find(g, name);
    MT_CHECK(t, "no parameter %s", name);
    return mt_tensor_f32(t);
}

static float *grad(mt_graph *g, const char *fmt, int l) {
    char name[64];
    snprintf(name, sizeof name, fmt, l);
    mt_tensor *t = mt_graph_find(g, name);
    MT_CHECK(t && mt_tensor_grad(t), "no gradient of %s", name);
    return mt_tensor_f32(mt_tensor_grad(t));
}

/* The dense FFN's three weights: name, rows, cols (row-major (rows, cols)),
 * and whether the expert layout (E, cols, rows) is its transpose. */
static const struct { const char *dense, *moe; int rows, cols; } FFN[3] = {
    {"h.%d.ffn.w1.w", "h.%d.moe.w1.w", F, C},   /* (F,C) -> (E,C,F) */
    {"h.%d.ffn.w3.w", "h.%d.moe.w3.w", F, C},
    {"h.%d.ffn.w2.w", "h.%d.moe.w2.w", C, F},   /* (C,F) -> (E,F,C) */
};

static void check_equals_dense(int E, int k, int first_dense) {
    const mt_llama_config d = dense();
    mt_llama_config m = d;
    m.moe = (mt_llama_moe){.experts = E, .top_k = k, .ffn_dim = F, .first_dense = first_dense};
    mt_tensor *dl, *ml;
    mt_graph *dg = build(&d, &dl), *mg = build(&m, &ml);
    for (int i = 0; i < mt_graph_n_params(dg); i++) {   /* the parameters both have */
        mt_tensor *p = mt_graph_param_at(dg, i), *q = mt_graph_find(mg, mt_tensor_name(p));
        if (q)
            memcpy(mt_tensor_f32(q), mt_tensor_f32(p), (size_t)mt_tensor_numel(p) * sizeof(float));
    }
    for (int l = first_dense; l < L; l++)   /* every expert holds the dense FFN */
        for (int w = 0; w < 3; w++) {
            const float *src = f32(dg, FFN[w].dense, l);
            float *dst = f32(mg, FFN[w].moe, l);
            const int R = FFN[w].rows, K = FFN[w].cols;
            for (int e = 0; e < E; e++)
                for (int r = 0; r < R; r++)
                    for (int c = 0; c < K; c++) dst[(e * K + c) * R + r] = src[r * K + c];
        }
    mt_graph_params_changed(mg);
    MT_CHECK_OK(mt_graph_forward(dg));
    MT_CHECK_OK(mt_graph_backward(dg));
    MT_CHECK_OK(mt_graph_forward(mg));
    MT_CHECK_OK(mt_graph_backward(mg));
    MT_CHECK_CLOSE(mt_graph_loss(mg), mt_graph_loss(dg), 1e-5, "E=%d k=%d: loss", E, k);
    /* the parameters both models have: the same gradient */
    static const char *const SAME[] = {"h.%d.attn.wq.w", "h.%d.attn.wk.w", "h.%d.attn.wv.w",
                                       "h.%d.attn.wo.w", "h.%d.attn_norm.w", "h.%d.ffn_norm.w"};
    for (int l = 0; l < L; l++)
        for (size_t i = 0; i < sizeof SAME / sizeof SAME[0]; i++) {
            char name[64];
            snprintf(name, sizeof name, SAME[i], l);
            const int64_t n = mt_tensor_numel(mt_graph_find(dg, name));
            const float *a = grad(dg, SAME[i], l), *b = grad(mg, SAME[i], l);
            for (int64_t j = 0; j < n; j++)
                MT_CHECK_CLOSE(b[j], a[j], 1e-4, "E=%d k=%d: d %s[%lld]", E, k, name,
                               (long long)j);
        }
    for (int l = first_dense; l < L; l++) {
        for (int w = 0; w < 3; w++) {   /* Σ_e d w_e = the dense d w */
            const float *a = grad(dg, FFN[w].dense, l), *b = grad(mg, FFN[w].moe, l);
            const int R = FFN[w].rows, K = FFN[w].cols;
            for (int r = 0; r < R; r++)
                for (int c = 0; c < K; c++) {
                    double sum = 0;
                    for (int e = 0; e < E; e++) sum += b[(e * K + c) * R + r];
                    MT_CHECK_CLOSE(sum, a[r * K + c], 1e-4, "E=%d k=%d: block %d, Σ_e d %s",
                                   E, k, l, FFN[w].moe);
                }
        }
        const float *dr = grad(mg, "h.%d.moe.router.w", l);
        for (int j = 0; j < E * C; j++)
            MT_CHECK(fabsf(dr[j]) <= 1e-6f, "E=%d k=%d: block %d: d router[%d] = %g, want 0", E,
                     k, l, j, (double)dr[j]);
    }
    MT_CHECK(mt_graph_n_params(mg) > 0, "no parameters");
    mt_graph_free(dg);
    mt_graph_free(mg);
}

MT_TEST(identical_experts_train_the_dense_model) {
    check_equals_dense(1, 1, 0);
    check_equals_dense(2, 2, 0);
    check_equals_dense(4, 2, 1);
}

/* The parameters a MoE model's graph holds are mt_llama_num_params. */
MT_TEST(parameter_count_is_the_graphs) {
    mt_llama_config m = dense();
    m.moe = (mt_llama_moe){.experts = 4, .top_k = 2, .ffn_dim = 8, .shared = 2,
                           .first_dense = 1};
    mt_tensor *loss;
    mt_graph *g = build(&m, &loss);
    int64_t n = 0;
    for (int i = 0; i < mt_graph_n_params(g); i++)
        n += mt_tensor_numel(mt_graph_param_at(g, i));
    MT_CHECK(n == mt_llama_num_params(&m), "the graph holds %lld parameters, "
             "mt_llama_num_params %lld", (long long)n, (long long)mt_llama_num_params(&m));
    mt_graph_free(g);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
