/*
 * test_llama.c — the LLaMA model on one device against independent
 * references: its loss against the float64 model of llama_ref.h and its
 * gradients against central finite differences of that loss, for
 * multi-head (KV = NH), grouped-query (1 < KV < NH) and multi-query (KV =
 * 1) attention, with heads of their own size (--head-dim: NH·HS above and
 * below C, and C not a multiple of NH) and with RoPE at positions past
 * 1000; Llama's FFN rule and
 * the presets against the published sizes, written out here; the
 * configuration's checks naming the flag.
 */
#include "harness.h"
#include "llama_ref.h"
#include "meshtrain.h"

/* ======================================================================== */
/* Sizes, presets, checks                                                    */
/* ======================================================================== */

MT_TEST(ffn_rule_gives_the_published_sizes) {
    /* (dim, multiple_of, ffn_dim_multiplier) -> hidden, from each model's
     * params.json / config.json */
    const struct { int dim, multiple_of; float mult; int want; } rows[] = {
        {4096, 1024, 1.3f, 14336},   /* Llama 3 8B */
        {8192, 4096, 1.3f, 28672},   /* Llama 3 70B */
        {16384, 4096, 1.2f, 53248},  /* Llama 3.1 405B */
        {4096, 256, 1.0f, 11008},    /* Llama 2 7B */
        {5120, 256, 1.0f, 13824},    /* Llama 2 13B */
        {2048, 256, 1.0f, 5632},     /* TinyLlama 1.1B */
        {288, 32, 1.0f, 768},        /* stories15M */
        {768, 32, 1.0f, 2048},       /* stories110M */
        {64, 32, 1.0f, 192},         /* the trainer's default */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        MT_CHECK(mt_llama_ffn_rule(rows[i].dim, rows[i].multiple_of, rows[i].mult) ==
                     rows[i].want, "rule(%d, %d, %g) = %d, want %d", rows[i].dim,
                 rows[i].multiple_of, (double)rows[i].mult,
                 mt_llama_ffn_rule(rows[i].dim, rows[i].multiple_of, rows[i].mult), rows[i].want);
    MT_CHECK(mt_llama_ffn_rule(0, 32, 1.0f) == 0 && mt_llama_ffn_rule(64, 0, 1.0f) == 0,
             "non-positive arguments");
}

MT_TEST(presets_hold_the_published_shapes) {
    const struct {
        const char *name;
        int C, F, L, NH, KV, V, T;
        float theta;
        int tie;
        float eps;   /* 0: 1e-5 */
        int HS;      /* 0: C / NH */
    } want[] = {
        {"llama3-8b", 4096, 14336, 32, 32, 8, 128256, 8192, 500000.0f, 0, 0, 0},
        {"llama3-70b", 8192, 28672, 80, 64, 8, 128256, 8192, 500000.0f, 0, 0, 0},
        {"llama3-405b", 16384, 53248, 126, 128, 8, 128256, 131072, 500000.0f, 0, 0, 0},
        /* Llama 3.1's config.json: 3's shapes, max_position_embeddings 131072 */
        {"llama3.1-8b", 4096, 14336, 32, 32, 8, 128256, 131072, 500000.0f, 0, 0, 0},
        {"llama3.1-70b", 8192, 28672, 80, 64, 8, 128256, 131072, 500000.0f, 0, 0, 0},
        {"llama3.1-405b", 16384, 53248, 126, 128, 8, 128256, 131072, 500000.0f, 0, 0, 0},
        {"llama2-7b", 4096, 11008, 32, 32, 32, 32000, 4096, 10000.0f, 0, 0, 0},
        {"llama2-13b", 5120, 13824, 40, 40, 40, 32000, 4096, 10000.0f, 0, 0, 0},
        {"tinyllama-1.1b", 2048, 5632, 22, 32, 4, 32000, 2048, 10000.0f, 0, 0, 0},
        {"stories15m", 288, 768, 6, 6, 6, 32000, 256, 10000.0f, 1, 0, 0},
        {"stories110m", 768, 2048, 12, 12, 12, 32000, 1024, 10000.0f, 1, 0, 0},
        {"moe-tiny", 64, 192, 4, 4, 2, 256, 256, 10000.0f, 0, 0, 0},   /* no published model */
        /* the config.json of each (llama.c's sources): the dense F their
           intermediate_size, which no block uses */
        {"mixtral-8x7b", 4096, 14336, 32, 32, 8, 32000, 32768, 1e6f, 0, 1e-5f, 0},
        {"mixtral-8x22b", 6144, 16384, 56, 48, 8, 32000, 65536, 1e6f, 0, 1e-5f, 0},
        {"qwen3-30b-a3b", 2048, 6144, 48, 32, 4, 151936, 40960, 1e6f, 0, 1e-6f, 128},
        {"qwen3-235b-a22b", 4096, 12288, 94, 64, 4, 151936, 40960, 1e6f, 0, 1e-6f, 128},
        {"qwen2.5-7b", 3584, 18944, 28, 28, 4, 152064, 131072, 1e6f, 0, 1e-6f, 0},
        {"qwen3-8b", 4096, 12288, 36, 32, 8, 151936, 40960, 1e6f, 0, 1e-6f, 128},
    };
    int n = 0;
    while (mt_llama_preset_name(n)) n++;
    MT_CHECK(n == (int)(sizeof want / sizeof want[0]), "%d presets", n);
    for (int i = 0; i < n; i++) {
        mt_llama_config c;
        MT_CHECK(strcmp(mt_llama_preset_name(i), want[i].name) == 0, "preset %d is %s", i,
                 mt_llama_preset_name(i));
        MT_CHECK_OK(mt_llama_preset(want[i].name, &c));
        MT_CHECK(c.dim == want[i].C && c.ffn_dim == want[i].F && c.n_layers == want[i].L &&
                 c.n_heads == want[i].NH && c.n_kv_heads == want[i].KV && c.vocab == want[i].V &&
                 c.max_seq == want[i].T && c.rope_theta == want[i].theta &&
                 c.norm_eps == (want[i].eps > 0 ? want[i].eps : 1e-5f) &&
                 c.head_dim == want[i].HS && c.tie_embeddings == want[i].tie,
                 "%s: C=%d F=%d L=%d NH=%d KV=%d V=%d T=%d theta=%g", want[i].name, c.dim,
                 c.ffn_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab, c.max_seq,
                 (double)c.rope_theta);
        /* the rule from the preset's own multiple_of and multiplier agrees */
        MT_CHECK(mt_llama_ffn_rule(c.dim, c.multiple_of, c.ffn_mult) == c.ffn_dim,
                 "%s: the rule gives %d", want[i].name,
                 mt_llama_ffn_rule(c.dim, c.multiple_of, c.ffn_mult));
        MT_CHECK_OK(mt_llama_config_check(&c));
        /* Llama 3.1's rope_scaling {llama3, factor 8, low 1, high 4, original
         * 8192} on the 3.1 presets, kind none with those values elsewhere */
        const mt_rope_scaling *r = &c.rope_scaling;
        MT_CHECK(r->kind == (strncmp(want[i].name, "llama3.1-", 9) == 0
                                 ? MT_ROPE_SCALING_LLAMA3 : MT_ROPE_SCALING_NONE) &&
                 r->factor == 8.0f && r->low_freq_factor == 1.0f &&
                 r->high_freq_factor == 4.0f && r->original_context == 8192,
                 "%s: RoPE scaling %d factor %g low %g high %g original %d", want[i].name,
                 r->kind, (double)r->factor, (double)r->low_freq_factor,
                 (double)r->high_freq_factor, r->original_context);
    }
    /* the counts Hugging Face reports for the two checkpoints */
    mt_llama_config c;
    MT_CHECK_OK(mt_llama_preset("llama2-7b", &c));
    MT_CHECK(mt_llama_num_params(&c) == 6738415616LL, "Llama 2 7B: %lld parameters",
             (long long)mt_llama_num_params(&c));
    MT_CHECK_OK(mt_llama_preset("llama3-8b", &c));
    MT_CHECK(mt_llama_num_params(&c) == 8030261248LL, "Llama 3 8B: %lld parameters",
             (long long)mt_llama_num_params(&c));
    /* and Qwen's (the safetensors' totals): Qwen2.5-7B's q, k, v biases,
     * Qwen3-8B's q and k norms counted */
    MT_CHECK_OK(mt_llama_preset("qwen2.5-7b", &c));
    MT_CHECK(c.qkv_bias && !c.qk_norm && mt_llama_num_params(&c) == 7615616512LL,
             "Qwen2.5 7B: %lld parameters", (long long)mt_llama_num_params(&c));
    MT_CHECK_OK(mt_llama_preset("qwen3-8b", &c));
    MT_CHECK(!c.qkv_bias && c.qk_norm && mt_llama_num_params(&c) == 8190735360LL,
             "Qwen3 8B: %lld parameters", (long long)mt_llama_num_params(&c));
    /* moe-tiny by hand: 4 blocks of norms and attention 2C + 2·NH·HS·C +
     * 2·KV·HS·C = 12416; block 0 dense, 3CF = 36864; blocks 1-3 the router
     * C·E = 512, 8 experts 3·C·F_e·8 = 98304, the shared one 3·C·F_e =
     * 12288; the untied embedding and head 2·V·C = 32768, the final norm 64 */
    MT_CHECK_OK(mt_llama_preset("moe-tiny", &c));
    MT_CHECK(mt_llama_num_params(&c) == 4 * 12416 + 36864 + 3 * (512 + 98304 + 12288) + 32768 +
                                        64, "moe-tiny: %lld parameters",
             (long long)mt_llama_num_params(&c));
    /* the published mixtures against Hugging Face's counts of their
     * checkpoints (the safetensors' totals): Mixtral 8x7B 46,702,792,704;
     * Qwen3-30B-A3B 30,532,122,624 and Qwen3-235B-A22B 235,093,634,560, less
     * their per-head q and k RMSNorms (2·128 a block) included; Mixtral 8x22B's "141B" worked out from
     * its config.json by hand: 56 blocks of attention 2·6144² + 2·6144·1024
     * = 88,080,384, experts 8·3·6144·16384 = 2,415,919,104, router 6144·8,
     * norms 2·6144, and the untied 2·32000·6144 and the final norm */
    static const struct { const char *name; long long n; } moe_counts[] = {
        {"mixtral-8x7b", 46702792704LL},
        {"mixtral-8x22b", 56LL * (88080384 + 2415919104LL + 49152 + 12288) + 2LL * 32000 * 6144 +
                              6144},
        {"qwen3-30b-a3b", 30532122624LL},
        {"qwen3-235b-a22b", 235093634560LL},
    };
    for (size_t i = 0; i < sizeof moe_counts / sizeof moe_counts[0]; i++) {
        MT_CHECK_OK(mt_llama_preset(moe_counts[i].name, &c));
        MT_CHECK(mt_llama_num_params(&c) == moe_counts[i].n, "%s: %lld parameters, want %lld",
                 moe_counts[i].name, (long long)mt_llama_num_params(&c), moe_counts[i].n);
        MT_CHECK(c.moe.experts > 0 && mt_llama_moe_block(&c, 0) &&
                 mt_llama_moe_block(&c, c.n_layers - 1), "%s: every block an MoE",
                 moe_counts[i].name);
    }
    MT_CHECK_FAILS(mt_llama_preset("llama4", &c), MT_EINVAL, "llama4", "llama3-8b",
                   "stories110m");
    /* --preset's help (the model's table) names every preset */
    const mt_model_about *a = mt_model_about_of(MT_MODEL_LLAMA);
    const mt_model_flag *flag = NULL;
    for (int i = 0; a && i < a->n_flags; i++)
        if (a->flags[i].type == MT_MODEL_FLAG_PRESET && !strcmp(a->flags[i].flag, "preset"))
            flag = &a->flags[i];
    MT_CHECK(flag && strcmp(flag->flag, "preset") == 0, "llama has no --preset flag");
    for (int i = 0; i < n; i++)
        MT_CHECK(strstr(flag->help, mt_llama_preset_name(i)), "--preset's help '%s' does not "
                 "name %s", flag->help, mt_llama_preset_name(i));
}

MT_TEST(config_check_names_the_flag) {
    const mt_llama_config ok = {.dim = 16, .ffn_dim = 0, .n_layers = 1, .n_heads = 4,
                                .n_kv_heads = 2, .vocab = 10, .max_seq = 8,
                                .rope_theta = 10000.0f, .norm_eps = 1e-5f,
                                .multiple_of = 8, .ffn_mult = 1.0f};
    MT_CHECK_OK(mt_llama_config_check(&ok));
    MT_CHECK(mt_llama_ffn_dim(&ok) == 48, "F from the rule: %d", mt_llama_ffn_dim(&ok));
    mt_llama_config c = ok;
    c.n_kv_heads = 3;
    MT_CHECK_FAILS(mt_llama_config_check(&c), MT_EINVAL, "--kv-heads 3", "--heads 4");
    c = ok;
    c.dim = 18;
    MT_CHECK_FAILS(mt_llama_config_check(&c), MT_EINVAL, "--channels 18", "--heads 4");
    c = ok;
    c.dim = 12;   /* head size 3 */
    MT_CHECK_FAILS(mt_llama_config_check(&c), MT_EINVAL, "head size 3", "even");
    c = ok;
    c.head_dim = 5;
    MT_CHECK_FAILS(mt_llama_config_check(&c), MT_EINVAL, "--head-dim 5", "odd");
    c.head_dim = -2;
    MT_CHECK_FAILS(mt_llama_config_check(&c), MT_EINVAL, "--head-dim -2");
    c = ok;
    c.dim = 18;   /* not a multiple of NH: the message offers --head-dim */
    MT_CHECK_FAILS(mt_llama_config_check(&c), MT_EINVAL, "--channels 18", "--head-dim");
    c.head_dim = 6;   /* which a head size of its own makes a model */
    MT_CHECK_OK(mt_llama_config_check(&c));
    MT_CHECK(mt_llama_head_dim(&c) == 6 && mt_llama_head_dim(&ok) == 4, "head sizes %d, %d",
             mt_llama_head_dim(&c), mt_llama_head_dim(&ok));
    c = ok;
    c.vocab = 0;
    MT_CHECK_FAILS(mt_llama_config_check(&c), MT_EINVAL, "--vocab 0");
    c = ok;
    c.multiple_of = 0;
    MT_CHECK_FAILS(mt_llama_config_check(&c), MT_EINVAL, "--ffn-dim", "--multiple-of");
    c = ok;
    c.rope_theta = 0.0f;
    MT_CHECK_FAILS(mt_llama_config_check(&c), MT_EINVAL, "--rope-theta");
    c = ok;
    c.norm_eps = -1.0f;
    MT_CHECK_FAILS(mt_llama_config_check(&c), MT_EINVAL, "--norm-eps");
    /* a build past the context is refused; a tied last stage that is not
     * the first holds its own copy of the embedding (a pipeline sums them) */
    mt_graph *g = mt_graph_create();
    MT_CHECK(mt_llama_build(g, &ok, 1, 9, 1.0f) == NULL && mt_graph_status(g) == MT_EINVAL &&
             strstr(mt_graph_errmsg(g), "--max-seq"), "T=9 > max_seq=8: %s", mt_graph_errmsg(g));
    mt_graph_free(g);
    c = ok;
    c.tie_embeddings = 1;
    c.n_layers = 2;
    g = mt_graph_create();
    const mt_gpt_stage st = {.layer0 = 1, .layers = 1, .first = false, .last = true};
    MT_CHECK(mt_llama_build_stage(g, &c, &st, 1, 4, 1.0f) != NULL &&
             mt_graph_find(g, "tok_emb.w") && !mt_graph_find(g, "lm_head.w"),
             "tied last stage: %s", mt_graph_errmsg(g));
    mt_graph_free(g);
}

/* ======================================================================== */
/* Loss and gradients against the float64 reference                          */
/* ======================================================================== */

static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

/* What the reference loss reads besides the parameters. */
typedef struct {
    const int32_t *tokens, *targets;
    int            B, T;
    double         scale;
} llama_batch;

/* d loss / d *x of the reference, by central differences in double (x one
 * of m's parameter entries, restored). */
static double central_difference(const llama_ref *m, double *x, const llama_batch *b) {
    const double eps = 1e-5, keep = *x;
    double at[2];
    for (int side = 0; side < 2; side++) {
        *x = keep + (side ? -eps : eps);
        at[side] = llama_ref_loss(m, b->tokens, b->targets, b->B, b->T, b->scale);
    }
    *x = keep;
    return (at[0] - at[1]) / (2 * eps);
}

/* Builds cfg for (B,T) on one device, runs forward and backward on random
 * tokens, and checks the loss within 1e-5 relative of the reference and
 * `samples` entries of every parameter's gradient (its largest among them)
 * within 1e-4 of that tensor's largest gradient, against central finite
 * differences of the reference loss. Targets before position `from` are
 * -1 (rows the loss skips), so that the positions from `from` on decide. */
static void check_against_reference(const mt_llama_config *cfg, int B, int T, int samples,
                                    uint64_t seed, int from) {
    const double scale = 1.0 / ((double)B * (T - from));
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = mt_llama_build(g, cfg, B, T, (float)scale);
    MT_CHECK(loss != NULL, "mt_llama_build: %s", mt_graph_errmsg(g));
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = seed}));
    int32_t *tokens = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *targets = mt_tensor_i32(mt_graph_find(g, "targets"));
    uint64_t s = seed;
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (int32_t)(lcg(&s) % (uint64_t)cfg->vocab);
        targets[i] = i % T < from ? -1 : (int32_t)(lcg(&s) % (uint64_t)cfg->vocab);
    }
    MT_CHECK_OK(mt_graph_forward(g));
    MT_CHECK_OK(mt_graph_backward(g));
    llama_ref m;
    llama_ref_from_graph(&m, g, cfg);
    double want = llama_ref_loss(&m, tokens, targets, B, T, scale);
    double got = mt_tensor_f32(loss)[0];
    MT_CHECK(fabs(got - want) <= 1e-5 * fabs(want), "loss %.9g, reference %.9g (KV=%d NH=%d)",
             got, want, cfg->n_kv_heads, cfg->n_heads);
    for (int i = 0; i < m.n; i++) {
        mt_tensor *p = mt_graph_find(g, m.p[i].name);
        const float *grad = mt_tensor_f32(mt_tensor_grad(p));
        MT_CHECK(grad != NULL, "%s has no gradient", m.p[i].name);
        int64_t n = m.p[i].n, top = 0;
        for (int64_t j = 1; j < n; j++)
            if (fabs(grad[j]) > fabs(grad[top])) top = j;
        double gmax = fabs(grad[top]);
        MT_CHECK(gmax > 0, "%s: every gradient is 0", m.p[i].name);
        for (int k = 0; k < samples; k++) {
            int64_t j = k == 0 ? top : (int64_t)(lcg(&s) % (uint64_t)n);
            const llama_batch batch = {tokens, targets, B, T, scale};
            double fd = central_difference(&m, &m.p[i].d[j], &batch);
            MT_CHECK(fabs(grad[j] - fd) <= 1e-4 * gmax,
                     "d loss / d %s[%lld]: graph %.9g, finite differences %.9g (largest %.3g; "
                     "KV=%d NH=%d T=%d)", m.p[i].name, (long long)j, grad[j], fd, gmax,
                     cfg->n_kv_heads, cfg->n_heads, T);
        }
    }
    llama_ref_free(&m);
    mt_graph_free(g);
}

static mt_llama_config tiny(int NH, int KV, int tie) {
    return (mt_llama_config){.dim = 16, .ffn_dim = 24, .n_layers = 2, .n_heads = NH,
                             .n_kv_heads = KV, .vocab = 13, .max_seq = 16,
                             .rope_theta = 10000.0f, .norm_eps = 1e-5f,
                             .tie_embeddings = tie, .multiple_of = 8, .ffn_mult = 1.0f};
}

MT_TEST(multi_head_matches_the_reference) {
    mt_llama_config c = tiny(4, 4, 0);
    check_against_reference(&c, 2, 7, 6, 11, 0);
}

MT_TEST(grouped_query_matches_the_reference) {
    mt_llama_config c = tiny(4, 2, 0);
    check_against_reference(&c, 2, 7, 6, 12, 0);
}

MT_TEST(multi_query_tied_matches_the_reference) {
    mt_llama_config c = tiny(4, 1, 1);
    c.ffn_dim = 0;   /* from the rule: 2·4·16/3 = 42 -> 48 */
    check_against_reference(&c, 2, 7, 6, 13, 0);
}

/* A head size of its own (--head-dim): q NH·HS wide and the output
 * projection NH·HS -> C, above C (4 heads of 6 over C = 16, grouped-query)
 * and below it (4 of 2, multi-query, tied), and over a width NH does not
 * divide (C = 18, 4 heads of 8, multi-head). */
MT_TEST(head_dim_apart_from_width_matches_the_reference) {
    mt_llama_config c = tiny(4, 2, 0);
    c.head_dim = 6;
    check_against_reference(&c, 2, 7, 6, 16, 0);
    c = tiny(4, 1, 1);
    c.head_dim = 2;
    check_against_reference(&c, 2, 7, 6, 17, 0);
    c = tiny(4, 4, 0);
    c.dim = 18;
    c.head_dim = 8;
    check_against_reference(&c, 2, 7, 6, 18, 0);
}

/* The parameter count by hand, against the graph's: per block wq and wo
 * NH·HS·C each, wk and wv KV·HS·C each, with HS = head_dim. */
MT_TEST(head_dim_counts_its_parameters) {
    mt_llama_config c = tiny(4, 2, 0);
    c.head_dim = 6;
    const int64_t C = 16, F = 24, V = 13, L = 2, NH = 4, KV = 2, HS = 6;
    const int64_t per_block = 2 * C + 2 * NH * HS * C + 2 * KV * HS * C + 3 * C * F;
    const int64_t want = 2 * V * C + L * per_block + C;
    MT_CHECK(mt_llama_num_params(&c) == want, "%lld parameters, %lld by hand",
             (long long)mt_llama_num_params(&c), (long long)want);
    mt_graph *g = mt_graph_create();
    MT_CHECK(mt_llama_build(g, &c, 1, 4, 1.0f) != NULL, "%s", mt_graph_errmsg(g));
    int64_t n = 0;
    for (int i = 0; i < mt_graph_n_params(g); i++) n += mt_tensor_numel(mt_graph_param_at(g, i));
    MT_CHECK(n == want, "the graph holds %lld parameters, %lld by hand", (long long)n,
             (long long)want);
    mt_tensor *wo = mt_graph_find(g, "h.0.attn.wo.w"), *wk = mt_graph_find(g, "h.1.attn.wk.w");
    MT_CHECK(wo && mt_tensor_dim(wo, 0) == C && mt_tensor_dim(wo, 1) == NH * HS, "wo (C,NH·HS)");
    MT_CHECK(wk && mt_tensor_dim(wk, 0) == KV * HS && mt_tensor_dim(wk, 1) == C, "wk (KV·HS,C)");
    mt_graph_free(g);
    /* attention's FLOPs count the query's width NH·HS, not C; causal: the
     * pairs key <= query, 6·L·NH·HS·T (half PaLM's 12·L·NH·HS·T) */
    const double T = 8, per_token = 6.0 * (double)(want - V * C) + 6.0 * L * NH * HS * T;
    MT_CHECK(mt_llama_train_flops(&c, 8, 1) == per_token, "%.17g FLOPs a token, %.17g by hand",
             mt_llama_train_flops(&c, 8, 1), per_token);
}

/* RoPE at positions past 1000, with Llama 3's base and Llama 2's: a narrow
 * model over a long sequence whose loss counts positions 1000 on only.
 * Each finite difference is two reference passes over ~1000 positions:
 * under a sanitizer (15x slower here) each tensor's largest gradient alone. */
MT_TEST(rope_past_position_1000_matches_the_reference) {
    mt_llama_config c = {.dim = 8, .ffn_dim = 8, .n_layers = 1, .n_heads = 2,
                         .n_kv_heads = 1, .vocab = 7, .max_seq = 1040,
                         .rope_theta = 500000.0f, .norm_eps = 1e-5f,
                         .multiple_of = 8, .ffn_mult = 1.0f};
    check_against_reference(&c, 1, 1040, MT_TEST_SANITIZED ? 1 : 3, 14, 1000);
    c.rope_theta = 10000.0f;
    c.n_kv_heads = 2;
    check_against_reference(&c, 1, 1031, MT_TEST_SANITIZED ? 1 : 2, 15, 1000);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
