/*
 * test_hf.c — LLaMA weights from and to a Hugging Face directory
 * (meshtrain/io.h's mt_hf_*, issue 43):
 *
 *  - a small random LLaMA with grouped kv heads is written here in
 *    transformers' layout (its names, q_proj and k_proj as they are, one
 *    tensor BF16) with a config.json written by hand; meshtrain reads the
 *    config, loads the weights into its graph, and its loss on random
 *    tokens equals tests/llama_ref.h's float64 model run with Hugging
 *    Face's equations (rotate-half RoPE) on the weights as written, not
 *    as meshtrain reorders them;
 *  - saving writes the same bytes for every tensor that was read (BF16
 *    widened, saved F32: the same values), a config that reads back the
 *    same, and loading the saved directory gives the graph bit for bit;
 *  - the same of a Mistral (the Llama's tensors with grouped kv heads,
 *    its sliding window null), a Qwen2 (q, k, v biases) and a Qwen3 (q
 *    and k RMSNorms over each head before RoPE), against the reference's
 *    Qwen equations;
 *  - refusals name the field or the tensor: an architecture, a bias flag,
 *    a sliding window, a rope_type, a shape, a missing and an extra tensor.
 */
#include "meshtrain.h"
#include "harness.h"
#include "llama_ref.h"   /* before hf_test.h: its hf_set_to_ref */
#include "hf_test.h"
#include "tensor/tensor_impl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { C = 32, NH = 4, KV = 2, HS = 8, L = 2, F = 48, V = 40, B = 2, T = 8 };

#define CONFIG(extra) CONFIG_OF("LlamaForCausalLM", extra)
#define CONFIG_OF(arch, extra)                                                                \
    "{\"architectures\": [\"" arch "\"], \"hidden_size\": 32, "                                \
    "\"intermediate_size\": 48, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "       \
    "\"num_key_value_heads\": 2, \"vocab_size\": 40, \"max_position_embeddings\": 16, "       \
    "\"rope_theta\": 500000.0, \"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": false"       \
    extra "}"

/* The architectures of make_model: Llama's tensors, Qwen2's q, k, v biases
 * besides, or Qwen3's q_norm and k_norm. */
typedef enum { ARCH_LLAMA, ARCH_QWEN2, ARCH_QWEN3 } arch;

static void make_model(hf_set *m, const char *sub, const char *config, int skip, bool bias,
                       arch a) {
    static const struct { const char *hf, *mt; int rows, cols; bool ones; arch only; } BLOCK[] = {
        {"input_layernorm.weight", "attn_norm.w", C, 0, true, ARCH_LLAMA},
        {"self_attn.q_proj.weight", "attn.wq.w", NH * HS, C, false, ARCH_LLAMA},
        {"self_attn.k_proj.weight", "attn.wk.w", KV * HS, C, false, ARCH_LLAMA},
        {"self_attn.v_proj.weight", "attn.wv.w", KV * HS, C, false, ARCH_LLAMA},
        {"self_attn.o_proj.weight", "attn.wo.w", C, NH * HS, false, ARCH_LLAMA},
        {"post_attention_layernorm.weight", "ffn_norm.w", C, 0, true, ARCH_LLAMA},
        {"mlp.gate_proj.weight", "ffn.w1.w", F, C, false, ARCH_LLAMA},
        {"mlp.up_proj.weight", "ffn.w3.w", F, C, false, ARCH_LLAMA},
        {"mlp.down_proj.weight", "ffn.w2.w", C, F, false, ARCH_LLAMA},
        {"self_attn.q_proj.bias", "attn.wq.b", NH * HS, 0, false, ARCH_QWEN2},
        {"self_attn.k_proj.bias", "attn.wk.b", KV * HS, 0, false, ARCH_QWEN2},
        {"self_attn.v_proj.bias", "attn.wv.b", KV * HS, 0, false, ARCH_QWEN2},
        {"self_attn.q_norm.weight", "attn.q_norm.w", HS, 0, true, ARCH_QWEN3},
        {"self_attn.k_norm.weight", "attn.k_norm.w", HS, 0, true, ARCH_QWEN3},
    };
    memset(m, 0, sizeof *m);
    hf_set_add(m, "model.embed_tokens.weight", "tok_emb.w", V, C, false);
    m->dtype[0] = MT_ST_BF16;   /* held as BF16 values, so the reference reads what is stored */
    for (int64_t j = 0; j < V * C; j++) m->v[0][j] = mt__bf16_to_f32_1(mt__f32_to_bf16_1(m->v[0][j]));
    char n[64], t[MT_MAX_NAME];
    for (int l = 0; l < L; l++)
        for (size_t k = 0; k < sizeof BLOCK / sizeof BLOCK[0]; k++) {
            if (BLOCK[k].only != ARCH_LLAMA && BLOCK[k].only != a) continue;
            snprintf(n, sizeof n, "model.layers.%d.%s", l, BLOCK[k].hf);
            snprintf(t, sizeof t, "h.%d.%s", l, BLOCK[k].mt);
            hf_set_add(m, n, t, BLOCK[k].rows, BLOCK[k].cols, BLOCK[k].ones);
        }
    hf_set_add(m, "model.norm.weight", "norm.w", C, 0, true);
    hf_set_add(m, "lm_head.weight", "lm_head.w", V, C, false);
    if (bias)
        hf_set_add(m, "model.layers.0.self_attn.q_proj.bias", "h.0.attn.wq.b", NH * HS, 0, false);
    hf_set_write(m, sub, config, skip);
}

static mt_graph *build(const mt_llama_config *c) { return hf_build_llama(c, B, T); }

/* The model of architecture a, written with config, read and loaded: its
 * loss equals the reference's on the weights as written (rotate-half RoPE,
 * and not adjacent pairs), and --hf-out then --hf-in give every tensor
 * back bit for bit. */
static void loads_and_round_trips(arch a, const char *config) {
    hf_make_dir();
    hf_set m;
    make_model(&m, "in", config, -1, false, a);
    mt_llama_config c;
    MT_CHECK_OK(mt_hf_read_llama_config(hf_at("in", ""), &c));
    MT_CHECK(c.dim == C && c.ffn_dim == F && c.n_layers == L && c.n_heads == NH &&
             c.n_kv_heads == KV && c.vocab == V && c.max_seq == 16 && c.head_dim == HS &&
             c.rope_theta == 500000.0f && c.norm_eps == 1e-5f && !c.tie_embeddings &&
             c.rope_scaling.kind == MT_ROPE_SCALING_NONE && c.qkv_bias == (a == ARCH_QWEN2) &&
             c.qk_norm == (a == ARCH_QWEN3), "config read wrong");
    mt_graph *g = build(&c);
    MT_CHECK_OK(mt_hf_load_llama(hf_at("in", ""), g, &c));
    MT_CHECK_OK(mt_graph_forward(g));
    /* the reference on the weights as Hugging Face holds them */
    llama_ref ref;
    memset(&ref, 0, sizeof ref);
    ref.cfg = c;
    ref.rotate_half = 1;
    hf_set_to_ref(&ref, &m);
    const int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));
    const int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));
    const double want = llama_ref_loss(&ref, tok, tgt, B, T, 1.0 / (B * T));
    MT_CHECK_CLOSE(mt_graph_loss(g), want, 1e-5, "loss against Hugging Face's equations");
    ref.rotate_half = 0;   /* the test can fail: the same weights under adjacent pairs differ */
    const double other = llama_ref_loss(&ref, tok, tgt, B, T, 1.0 / (B * T));
    MT_CHECK(fabs(other - want) > 1e-3, "rotate-half and adjacent pairs agree (%g, %g): the "
             "test cannot tell the layouts apart", other, want);
    llama_ref_free(&ref);

    /* save, then every tensor as it was written, and a load bit for bit */
    hf_check_llama_round_trip(&m, &c, g, build);
    mt_graph_free(g);
    hf_set_free(&m);
}

MT_TEST(hf_llama_loads_against_rotate_half_reference_and_round_trips) {
    loads_and_round_trips(ARCH_LLAMA, CONFIG(", \"hidden_act\": \"silu\""));
}

/* Mistral (v0.2 on): a Llama with grouped kv heads under its own
 * architecture name, its sliding window off (null) */
MT_TEST(hf_mistral_loads_against_reference_and_round_trips) {
    loads_and_round_trips(ARCH_LLAMA, CONFIG_OF("MistralForCausalLM", ", \"sliding_window\": "
                                                "null, \"hidden_act\": \"silu\""));
}

/* Qwen2: q, k, v biases (the q and k ones reordered as their rows) */
MT_TEST(hf_qwen2_loads_against_reference_and_round_trips) {
    loads_and_round_trips(ARCH_QWEN2, CONFIG_OF("Qwen2ForCausalLM", ", \"use_sliding_window\": "
                                                "false, \"sliding_window\": 4"));
}

/* Qwen3: q_norm and k_norm before RoPE (their scales reordered in the head);
 * head_dim given, as Qwen3's configs give it (its default is 128) */
MT_TEST(hf_qwen3_loads_against_reference_and_round_trips) {
    loads_and_round_trips(ARCH_QWEN3, CONFIG_OF("Qwen3ForCausalLM", ", \"head_dim\": 8"));
}

MT_TEST(hf_refusals_name_the_field_or_tensor) {
    hf_make_dir();
    mt_llama_config c;
    static const struct { const char *config, *want1, *want2; mt_status code; } bad[] = {
        {"{\"architectures\": [\"Gemma2ForCausalLM\"]}", "Gemma2ForCausalLM", "Qwen3ForCausalLM",
         MT_EUNSUPPORTED},
        {CONFIG(", \"attention_bias\": true"), "attention_bias", "biases", MT_EUNSUPPORTED},
        {CONFIG(", \"hidden_act\": \"gelu\""), "hidden_act", "gelu", MT_EUNSUPPORTED},
        {CONFIG(", \"sliding_window\": 8"), "sliding_window 8", "16", MT_EUNSUPPORTED},
        {CONFIG(", \"rope_scaling\": {\"rope_type\": \"longrope\", \"factor\": 2.0}"),
         "longrope", "llama3, yarn", MT_EUNSUPPORTED},
        {"{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 32}", "intermediate_size",
         "config.json", MT_EFORMAT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hf_write_text(hf_at("", "config.json"), bad[i].config);
        MT_CHECK_FAILS(mt_hf_read_llama_config(hf_dir, &c), bad[i].code, bad[i].want1,
                       bad[i].want2);
    }
    hf_write_text(hf_at("", "config.json"),
               CONFIG(", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                      "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                      "\"original_max_position_embeddings\": 8}"));
    MT_CHECK_OK(mt_hf_read_llama_config(hf_dir, &c));
    MT_CHECK(c.rope_scaling.kind == MT_ROPE_SCALING_LLAMA3 && c.rope_scaling.factor == 8.0f &&
             c.rope_scaling.original_context == 8, "llama3 rope_scaling read wrong");

    hf_set m;
    make_model(&m, "missing", CONFIG(""), 3, false, ARCH_LLAMA);   /* no layer 0 k_proj */
    MT_CHECK_OK(mt_hf_read_llama_config(hf_at("missing", ""), &c));
    mt_graph *g = build(&c);
    MT_CHECK_FAILS(mt_hf_load_llama(hf_at("missing", ""), g, &c), MT_EFORMAT,
                   "model.layers.0.self_attn.k_proj.weight", "h.0.attn.wk.w");
    hf_set_free(&m);
    make_model(&m, "extra", CONFIG(""), -1, true, ARCH_LLAMA);
    MT_CHECK_FAILS(mt_hf_load_llama(hf_at("extra", ""), g, &c), MT_EUNSUPPORTED,
                   "model.layers.0.self_attn.q_proj.bias");
    hf_set_free(&m);
    /* a config whose FFN is 40 wide against weights of 48 */
    make_model(&m, "shape", "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 32, "
               "\"intermediate_size\": 40, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
               "\"num_key_value_heads\": 2, \"vocab_size\": 40, \"max_position_embeddings\": 16}",
               -1, false, ARCH_LLAMA);
    MT_CHECK_OK(mt_hf_read_llama_config(hf_at("shape", ""), &c));
    mt_graph *g40 = build(&c);
    MT_CHECK_FAILS(mt_hf_load_llama(hf_at("shape", ""), g40, &c), MT_ESHAPE,
                   "model.layers.0.mlp.gate_proj.weight", "(48,32)");
    hf_set_free(&m);
    mt_graph_free(g40);
    mt_graph_free(g);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
