/*
 * test_hf_moe.c — mixtures of experts from and to a Hugging Face directory
 * (meshtrain/io.h's mt_hf_*, hf_moe.c; issue 43):
 *
 *  - a small random Mixtral (2 blocks, 4 experts, top 2, grouped kv heads)
 *    and a Qwen3-MoE (q and k norms, block 0 dense by mlp_only_layers) are
 *    written here in transformers' layout (block_sparse_moe.gate and
 *    experts.e.w1/w3/w2; mlp.gate and experts.e.gate_proj/up_proj/
 *    down_proj, each (out, in)) with a config.json written by hand;
 *    meshtrain reads the config, loads the weights, and its loss equals
 *    tests/llama_ref.h's float64 model run with Hugging Face's equations
 *    on the weights as written: rotate-half RoPE, and a MoE block written
 *    here from MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock: softmax of
 *    the router's logits over all E, the top k, the k weights divided by
 *    their sum where norm_topk_prob is true (Mixtral always), Σ weight ·
 *    down(silu(gate·h) ⊙ up·h); Qwen3-MoE with norm_topk_prob false or
 *    absent (its config's default) with the weights unnormalised
 *    (--moe-renorm off). The same weights the other way give another
 *    loss, and so do each expert's gate and up swapped, so the test can
 *    fail;
 *  - saving writes back the bytes of every tensor read and a config that
 *    reads back the same; loading the saved directory gives every
 *    parameter bit for bit;
 *  - refusals name the field or the tensor: mlp_only_layers meshtrain
 *    cannot place, router_jitter_noise,
 *    a shared expert, Qwen2-MoE, a missing, an extra and a transposed
 *    expert tensor; what --hf-out cannot write (shared experts, sigmoid
 *    scores, dense blocks or unnormalised gates of a Mixtral, a router
 *    bias), and a non-zero
 *    router bias on saving; a bias is loaded as zeros.
 */
#include "meshtrain.h"
#include "harness.h"
#include "llama_ref.h"   /* before hf_test.h: its hf_set_to_ref */
#include "hf_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { C = 32, NH = 4, KV = 2, HS = 8, L = 2, F = 48, FE = 16, E = 4, K = 2, V = 40, B = 2,
       T = 8 };

#define CONFIG_OF(arch, layers, k, extra)                                                     \
    "{\"architectures\": [\"" arch "\"], \"hidden_size\": 32, "                                \
    "\"num_hidden_layers\": " layers ", \"num_attention_heads\": 4, "                          \
    "\"num_key_value_heads\": 2, \"vocab_size\": 40, \"max_position_embeddings\": 16, "       \
    "\"rope_theta\": 500000.0, \"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": false, "     \
    "\"num_experts_per_tok\": " k extra "}"
#define MIXTRAL_K(k, extra)                                                                   \
    CONFIG_OF("MixtralForCausalLM", "2", k, ", \"intermediate_size\": 16, "                    \
              "\"num_local_experts\": 4, \"output_router_logits\": true, "                     \
              "\"router_aux_loss_coef\": 0.02" extra)
#define MIXTRAL(extra) MIXTRAL_K("2", extra)
#define QWEN3_MOE_L(layers, extra)                                                            \
    CONFIG_OF("Qwen3MoeForCausalLM", layers, "2", ", \"intermediate_size\": 48, "              \
              "\"head_dim\": 8, \"num_experts\": 4, \"moe_intermediate_size\": 16, "           \
              "\"use_sliding_window\": false, \"sliding_window\": 4" extra)
#define QWEN3_MOE(extra) QWEN3_MOE_L("2", ", \"decoder_sparse_step\": 1" extra)

typedef enum { ARCH_MIXTRAL, ARCH_QWEN3_MOE } arch;

/* The model of arch a: block 0 dense for Qwen3-MoE (mlp_only_layers [0]),
 * the rest MoE; `skip` a tensor left out of the file, `extra_expert` an
 * expert E besides, `transposed` expert 0's down matrix of block 1 stored
 * (F,C). */
static void make_model(hf_set *m, const char *sub, const char *config, arch a, int skip,
                       bool extra_expert, bool transposed) {
    static const char *const QW[3] = {"gate_proj", "up_proj", "down_proj"},
                             *const MX[3] = {"w1", "w3", "w2"};
    memset(m, 0, sizeof *m);
    hf_set_add(m, "model.embed_tokens.weight", "tok_emb.w", V, C, false);
    char n[160], t[MT_MAX_NAME];
#define ADD(hf, mt, r, c, ones)                                                               \
    (snprintf(n, sizeof n, "model.layers.%d.%s", l, hf),                                      \
     snprintf(t, sizeof t, "h.%d.%s", l, mt), hf_set_add(m, n, t, r, c, ones))
    for (int l = 0; l < L; l++) {
        ADD("input_layernorm.weight", "attn_norm.w", C, 0, true);
        ADD("self_attn.q_proj.weight", "attn.wq.w", NH * HS, C, false);
        ADD("self_attn.k_proj.weight", "attn.wk.w", KV * HS, C, false);
        ADD("self_attn.v_proj.weight", "attn.wv.w", KV * HS, C, false);
        ADD("self_attn.o_proj.weight", "attn.wo.w", C, NH * HS, false);
        if (a == ARCH_QWEN3_MOE) {
            ADD("self_attn.q_norm.weight", "attn.q_norm.w", HS, 0, true);
            ADD("self_attn.k_norm.weight", "attn.k_norm.w", HS, 0, true);
        }
        ADD("post_attention_layernorm.weight", "ffn_norm.w", C, 0, true);
        if (a == ARCH_QWEN3_MOE && l == 0) {
            ADD("mlp.gate_proj.weight", "ffn.w1.w", F, C, false);
            ADD("mlp.up_proj.weight", "ffn.w3.w", F, C, false);
            ADD("mlp.down_proj.weight", "ffn.w2.w", C, F, false);
            continue;
        }
        const char *blk = a == ARCH_MIXTRAL ? "block_sparse_moe" : "mlp";
        char hf[96];
        snprintf(hf, sizeof hf, "%s.gate.weight", blk);
        ADD(hf, "moe.router.w", E, C, false);
        for (int e = 0; e < E + extra_expert; e++)
            for (int j = 0; j < 3; j++) {
                snprintf(hf, sizeof hf, "%s.experts.%d.%s.weight", blk, e,
                         (a == ARCH_MIXTRAL ? MX : QW)[j]);
                const bool tr = transposed && e == 0 && j == 2;
                ADD(hf, "", j < 2 || tr ? FE : C, j < 2 || tr ? C : FE, false);
            }
    }
#undef ADD
    hf_set_add(m, "model.norm.weight", "norm.w", C, 0, true);
    hf_set_add(m, "lm_head.weight", "lm_head.w", V, C, false);
    hf_set_write(m, sub, config, skip);
}

/* ---- Hugging Face's MoE block, from MixtralSparseMoeBlock's maths ---- */

typedef struct {
    const hf_set *m;
    arch          a;
    bool          renorm;     /* the top-k weights divided by their sum */
    bool          swap_w1w3;  /* a deliberate error: each expert's gate and up swapped */
} moe_ref;

/* y (n,C) of h (n,C) for MoE block l: the router's softmax over all E, the
 * top K (ties: the lower index), weights renormalised over the K, each
 * expert's SwiGLU down(silu(gate·h) ⊙ up·h) with (out, in) matrices. */
static int moe_ffn(const void *user, int l, const double *h, double *y, int64_t n, int Cc) {
    const moe_ref *r = user;
    if (r->a == ARCH_QWEN3_MOE && l == 0) return 0;   /* mlp_only_layers [0] */
    const char *blk = r->a == ARCH_MIXTRAL ? "block_sparse_moe" : "mlp";
    char name[96];
    snprintf(name, sizeof name, "model.layers.%d.%s.gate.weight", l, blk);
    const float *wg = hf_set_get(r->m, name);
    for (int64_t t = 0; t < n; t++) {
        const double *x = h + t * Cc;
        double p[E], mx = -INFINITY, z = 0;
        for (int e = 0; e < E; e++) {
            p[e] = 0;
            for (int c = 0; c < Cc; c++) p[e] += x[c] * wg[e * Cc + c];
            mx = fmax(mx, p[e]);
        }
        for (int e = 0; e < E; e++) z += (p[e] = exp(p[e] - mx));
        for (int e = 0; e < E; e++) p[e] /= z;
        int top[K];
        bool taken[E] = {0};
        double sum = 0;
        for (int j = 0; j < K; j++) {
            int best = -1;
            for (int e = 0; e < E; e++)
                if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
            taken[best] = true, top[j] = best, sum += p[best];
        }
        for (int c = 0; c < Cc; c++) y[t * Cc + c] = 0;
        for (int j = 0; j < K; j++) {
            const float *w[3];
            for (int k = 0; k < 3; k++) {
                static const char *const QW[3] = {"gate_proj", "up_proj", "down_proj"},
                                         *const MX[3] = {"w1", "w3", "w2"};
                snprintf(name, sizeof name, "model.layers.%d.%s.experts.%d.%s.weight", l, blk,
                         top[j], (r->a == ARCH_MIXTRAL ? MX : QW)[k]);
                w[k] = hf_set_get(r->m, name);
            }
            const float *gate = r->swap_w1w3 ? w[1] : w[0], *up = r->swap_w1w3 ? w[0] : w[1];
            const double g = r->renorm ? p[top[j]] / sum : p[top[j]];
            double mid[FE];
            for (int f = 0; f < FE; f++) {
                double a = 0, b = 0;
                for (int c = 0; c < Cc; c++) {
                    a += gate[f * Cc + c] * x[c];
                    b += up[f * Cc + c] * x[c];
                }
                mid[f] = a / (1.0 + exp(-a)) * b;
            }
            for (int c = 0; c < Cc; c++) {
                double o = 0;
                for (int f = 0; f < FE; f++) o += w[2][c * FE + f] * mid[f];
                y[t * Cc + c] += g * o;
            }
        }
    }
    return 1;
}

static mt_graph *build(const mt_llama_config *c) { return hf_build_llama(c, B, T); }

/* The reference's loss of m's weights with r's MoE block. */
static double ref_loss(const hf_set *m, const mt_llama_config *c, const moe_ref *r,
                       int rotate_half, mt_graph *g) {
    llama_ref ref;
    memset(&ref, 0, sizeof ref);
    ref.cfg = *c;
    ref.rotate_half = rotate_half;
    ref.ffn = moe_ffn;
    ref.ffn_user = r;
    hf_set_to_ref(&ref, m);   /* the experts' are moe_ffn's, by their own names */
    const double loss = llama_ref_loss(&ref, mt_tensor_i32(mt_graph_find(g, "tokens")),
                                       mt_tensor_i32(mt_graph_find(g, "targets")), B, T,
                                       1.0 / (B * T));
    llama_ref_free(&ref);
    return loss;
}

/* renorm: the config's gates renormalised over the top k (Mixtral;
 * Qwen3-MoE's norm_topk_prob true), else the selected scores themselves */
static void loads_and_round_trips(arch a, const char *config, bool renorm) {
    hf_make_dir();
    hf_set m;
    make_model(&m, "in", config, a, -1, false, false);
    mt_llama_config c;
    MT_CHECK_OK(mt_hf_read_llama_config(hf_at("in", ""), &c));
    const bool q = a == ARCH_QWEN3_MOE;
    MT_CHECK(c.dim == C && c.n_layers == L && c.n_heads == NH && c.n_kv_heads == KV &&
             c.head_dim == HS && c.qk_norm == q && !c.qkv_bias && c.moe.experts == E &&
             c.moe.top_k == K && c.moe.ffn_dim == FE && c.ffn_dim == (q ? F : FE) &&
             c.moe.first_dense == (q ? 1 : 0) && c.moe.every == 1 && c.moe.score == 0 &&
             c.moe.route_scale == 1.0f && c.moe.shared == 0 && c.moe.aux_alpha == 0.0f &&
             c.moe.bias_update == 0.0f && c.moe.renorm_off == !renorm, "config read wrong: E %d k %d F_e %d F %d first "
             "dense %d every %d", c.moe.experts, c.moe.top_k, c.moe.ffn_dim, c.ffn_dim,
             c.moe.first_dense, c.moe.every);
    mt_graph *g = build(&c);
    MT_CHECK_OK(mt_hf_load_llama(hf_at("in", ""), g, &c));
    MT_CHECK_OK(mt_graph_forward(g));
    moe_ref r = {&m, a, renorm, false};
    const double want = ref_loss(&m, &c, &r, 1, g);
    MT_CHECK_CLOSE(mt_graph_loss(g), want, 1e-5, "loss against Hugging Face's equations");
    /* the test can fail: each of these computes another model */
    r.renorm = !renorm;
    const double unnormed = ref_loss(&m, &c, &r, 1, g);
    r.renorm = renorm, r.swap_w1w3 = true;
    const double swapped = ref_loss(&m, &c, &r, 1, g);
    r.swap_w1w3 = false;
    const double pairs = ref_loss(&m, &c, &r, 0, g);
    MT_CHECK(fabs(unnormed - want) > 1e-3 && fabs(swapped - want) > 1e-3 &&
             fabs(pairs - want) > 1e-3, "the reference cannot tell apart the renormalisation "
             "(%g), gate and up (%g) or RoPE's layout (%g) from %g", unnormed, swapped, pairs,
             want);

    /* save, then every tensor as it was written, and a load bit for bit */
    hf_check_llama_round_trip(&m, &c, g, build);
    mt_graph_free(g);
    hf_set_free(&m);
}

MT_TEST(hf_mixtral_loads_against_reference_and_round_trips) {
    loads_and_round_trips(ARCH_MIXTRAL, MIXTRAL(", \"sliding_window\": null"), true);
}

/* block 0 dense (mlp_only_layers), so the dense FFN's names are read too */
MT_TEST(hf_qwen3_moe_loads_against_reference_and_round_trips) {
    loads_and_round_trips(ARCH_QWEN3_MOE, QWEN3_MOE(", \"norm_topk_prob\": true, "
                                                    "\"mlp_only_layers\": [0]"), true);
}

/* norm_topk_prob false, and absent (Qwen3MoeConfig's default false): the
 * gates are the selected softmax scores themselves (--moe-renorm off) */
MT_TEST(hf_qwen3_moe_unnormalised_gates_load_and_round_trip) {
    loads_and_round_trips(ARCH_QWEN3_MOE, QWEN3_MOE(", \"norm_topk_prob\": false, "
                                                    "\"mlp_only_layers\": [0]"), false);
}

MT_TEST(hf_qwen3_moe_without_norm_topk_prob_is_unnormalised) {
    loads_and_round_trips(ARCH_QWEN3_MOE, QWEN3_MOE(", \"mlp_only_layers\": [0]"), false);
}

MT_TEST(hf_moe_config_refusals_name_the_field) {
    hf_make_dir();
    mt_llama_config c;
    static const struct { const char *config, *want1, *want2; } bad[] = {
        {QWEN3_MOE_L("4", ", \"norm_topk_prob\": true, \"mlp_only_layers\": [2]"),
         "mlp_only_layers", "block 2 dense"},
        {QWEN3_MOE(", \"norm_topk_prob\": true, \"shared_expert_intermediate_size\": 8"),
         "shared_expert_intermediate_size", "shared expert"},
        {MIXTRAL(", \"router_jitter_noise\": 0.1"), "router_jitter_noise", "noise"},
        {MIXTRAL(", \"sliding_window\": 8"), "sliding_window 8", "windowed"},
        {CONFIG_OF("Qwen2MoeForCausalLM", "2", "2", ""), "Qwen2MoeForCausalLM",
         "Qwen3MoeForCausalLM"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hf_write_text(hf_at("", "config.json"), bad[i].config);
        MT_CHECK_FAILS(mt_hf_read_llama_config(hf_dir, &c), MT_EUNSUPPORTED, bad[i].want1,
                       bad[i].want2);
    }
    hf_write_text(hf_at("", "config.json"), MIXTRAL_K("5", ""));
    MT_CHECK_FAILS(mt_hf_read_llama_config(hf_dir, &c), MT_EFORMAT, "num_experts_per_tok",
                   "1 to 4");
    /* decoder_sparse_step 2 of 4 blocks: 1 and 3, which meshtrain places */
    hf_write_text(hf_at("", "config.json"),
                  QWEN3_MOE_L("4", ", \"norm_topk_prob\": true, \"decoder_sparse_step\": 2"));
    MT_CHECK_OK(mt_hf_read_llama_config(hf_dir, &c));
    MT_CHECK(c.moe.first_dense == 1 && c.moe.every == 2 && !mt_llama_moe_block(&c, 2) &&
             mt_llama_moe_block(&c, 3), "decoder_sparse_step 2: first %d every %d",
             c.moe.first_dense, c.moe.every);
}

MT_TEST(hf_moe_weight_refusals_name_the_tensor) {
    hf_make_dir();
    mt_llama_config c;
    hf_set m;
    /* tensor 1 + 19 + 7 + 3·2 + 1: block 1's expert 2's w3 */
    make_model(&m, "missing", MIXTRAL(""), ARCH_MIXTRAL, 34, false, false);
    MT_CHECK(!strcmp(m.name[34], "model.layers.1.block_sparse_moe.experts.2.w3.weight"),
             "tensor 34 is %s", m.name[34]);
    MT_CHECK_OK(mt_hf_read_llama_config(hf_at("missing", ""), &c));
    mt_graph *g = build(&c);
    MT_CHECK_FAILS(mt_hf_load_llama(hf_at("missing", ""), g, &c), MT_EFORMAT,
                   "model.layers.1.block_sparse_moe.experts.2.w3.weight", "h.1.moe.w3.w");
    hf_set_free(&m);
    make_model(&m, "extra", MIXTRAL(""), ARCH_MIXTRAL, -1, true, false);
    MT_CHECK_FAILS(mt_hf_load_llama(hf_at("extra", ""), g, &c), MT_EUNSUPPORTED,
                   "model.layers.0.block_sparse_moe.experts.4.w1.weight", "experts");
    hf_set_free(&m);
    make_model(&m, "tr", MIXTRAL(""), ARCH_MIXTRAL, -1, false, true);
    MT_CHECK_FAILS(mt_hf_load_llama(hf_at("tr", ""), g, &c), MT_ESHAPE,
                   "model.layers.0.block_sparse_moe.experts.0.w2.weight", "(32,16)");
    hf_set_free(&m);
    mt_graph_free(g);

    /* what no architecture holds, refused before any training */
    static const struct { mt_llama_moe moe; bool qk_norm; const char *want; } no[] = {
        {{.experts = 4, .shared = 1}, true, "shared experts"},
        {{.experts = 4, .score = 1}, true, "sigmoid"},
        {{.experts = 4, .route_scale = 2.5f}, true, "route scale"},
        {{.experts = 4, .first_dense = 1}, false, "dense blocks"},
        {{.experts = 4, .bias_update = 1e-3f}, true, "bias"},
        {{.experts = 4, .renorm_off = 1}, false, "not renormalised"},
    };
    MT_CHECK_OK(mt_hf_read_llama_config(hf_at("tr", ""), &c));
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        mt_llama_config x = c;
        x.moe = no[i].moe;
        x.qk_norm = no[i].qk_norm;
        MT_CHECK_FAILS(mt_hf_llama_writable(hf_dir, &x), MT_EUNSUPPORTED, no[i].want,
                       "MixtralForCausalLM");
    }
}

/* A graph with a router bias (--moe-bias-update): loaded as zeros, saved
 * while zero, refused once it moved. */
MT_TEST(hf_moe_router_bias_loads_as_zeros_and_must_be_zero_to_save) {
    hf_make_dir();
    hf_set m;
    make_model(&m, "in", MIXTRAL(""), ARCH_MIXTRAL, -1, false, false);
    mt_llama_config c;
    MT_CHECK_OK(mt_hf_read_llama_config(hf_at("in", ""), &c));
    c.moe.bias_update = 1e-3f;
    mt_graph *g = build(&c);
    mt_tensor *bias = mt_graph_find(g, "h.1.moe.router.bias");
    MT_CHECK(bias, "no router bias in the graph");
    const float moved[E] = {0.5f, -0.5f, 0.25f, -0.25f};
    MT_CHECK_OK(mt_tensor_write(bias, moved, 0, E));
    MT_CHECK_OK(mt_hf_load_llama(hf_at("in", ""), g, &c));
    for (int e = 0; e < E; e++)
        MT_CHECK(mt_tensor_f32(bias)[e] == 0.0f, "bias[%d] = %g after loading", e,
                 (double)mt_tensor_f32(bias)[e]);
    c.moe.bias_update = 0;   /* the library's save reads the graph's bias itself */
    MT_CHECK_OK(mt_hf_save_llama(hf_at("zero", ""), &c, g));
    MT_CHECK_OK(mt_tensor_write(bias, moved, 0, E));
    MT_CHECK_FAILS(mt_hf_save_llama(hf_at("moved", ""), &c, g), MT_EUNSUPPORTED,
                   "h.1.moe.router.bias", "--ckpt-out");
    mt_graph_free(g);
    hf_set_free(&m);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
