/*
 * bench_llama.c — one LLaMA training step (forward, backward, AdamW), timed,
 * and grouped-query attention against the GPT's at matching sizes.
 *
 *   bench_llama [--quick] [THREADS [STEPS]]
 *
 * The shape is issue 23's: L4, dim 512, 8 heads, 2 kv heads, ffn 1408,
 * T128, B4, V 32000, untied head, AdamW (mt_optim_defaults), on 1 and 2
 * threads (THREADS: only that count). Each row prints ms/step and the
 * step's FLOP rate (mt_llama_train_flops over the median step) as a
 * fraction of an Open BLAS 1024³ sgemm's on the same threads, run between
 * every two steps in the same process (the median of those; target
 * >= 0.70), with where the time went: the products, attention, the rest
 * of the graph and the optimizer. Then one attention
 * table: the GPT's attention (packed qkv, NH heads) and the LLaMA's (q with
 * NH heads, k and v with KV), forward and backward through one-op graphs
 * at the model's B, T, NH, HS, timed by the per-op profile, per FLOP of the
 * same count (target: GQA no slower per FLOP than the GPT's).
 *
 * The floor comes first: the step's FLOPs at the sgemm rate and the bytes
 * no schedule avoids at the machine's triad bandwidth.
 *
 * --quick: 3 timed steps after 1 warm-up and fewer attention repetitions,
 * about half a minute in all. MT_BENCH_PROFILE=1 prints the whole per-op
 * profile (summed over the up to 3 profiled steps that follow the timed
 * ones). "RESULT ..." lines are for bench/run_llama.sh; each carries the
 * 1-minute load average, since the machine is shared.
 */
#include "meshtrain.h"
#include "bench_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the benchmark's model (issue 23 §6) and microbatch */
static const mt_llama_config LLAMA = {
    .dim = 512, .ffn_dim = 1408, .n_layers = 4, .n_heads = 8, .n_kv_heads = 2, .vocab = 32000,
    .max_seq = 128, .rope_theta = 10000.0f, .norm_eps = 1e-5f, .tie_embeddings = 0,
    .multiple_of = 256, .ffn_mult = 1.0f,
};
enum { BATCH = 4, SEQ = 128 };

/* The machine's STREAM triad (docs: /work/shared/MACHINE.md), for the
 * memory floor only: 39 GB/s on one thread, 57 on two. */
static double triad_gbs(int threads) { return threads == 1 ? 39.0 : 57.0; }

static double load1(void) {
    double l[1];
    return getloadavg(l, 1) == 1 ? l[0] : NAN;
}

static int fail(const char *what, mt_status s) {
    fprintf(stderr, "bench_llama: %s: %s (%s)\n", what, mt_errmsg(), mt_status_name(s));
    return 1;
}

/* ---- the floor, before any timing ----------------------------------------- */

/* The step's bytes that no schedule avoids: AdamW reads p, g, m, v and
 * writes p, m, v (7 floats a parameter), the gradients are zeroed or first
 * written (1), every product weight is read in the forward, the backward
 * and for its gradient (3); the logits (B,T,V) are written by the head,
 * read and their gradient written by the loss, read by the head's two
 * backward products (5 passes). */
static double step_floor_bytes(const mt_llama_config *cfg, int B, int T) {
    double N = (double)mt_llama_num_params(cfg);
    double Nmm = N - (double)cfg->vocab * cfg->dim;   /* the lookup table is no product */
    double logits = (double)B * T * cfg->vocab;
    return 4.0 * (8.0 * N + 3.0 * Nmm + 5.0 * logits);
}

static void print_floor(double sgemm1, double sgemm2) {
    double fl = mt_llama_train_flops(&LLAMA, SEQ, (int64_t)BATCH * SEQ);
    double by = step_floor_bytes(&LLAMA, BATCH, SEQ);
    double head = 6.0 * LLAMA.vocab * LLAMA.dim * (double)BATCH * SEQ;
    printf("floor: %.2f GFLOP a step (head %.1f%%, attention scores %.1f%%), %.2f GB of "
           "unavoidable traffic (AdamW's %.0f%%)\n", fl / 1e9, 100 * head / fl,
           100 * 12.0 * LLAMA.n_layers * LLAMA.dim * SEQ * BATCH * SEQ / fl, by / 1e9,
           100 * 32.0 * (double)mt_llama_num_params(&LLAMA) / by);
    const double sg[2] = {sgemm1, sgemm2};
    for (int th = 1; th <= 2; th++)
        if (!isnan(sg[th - 1]))
            printf("  %d thread%s: %.0f ms of products at the sgemm rate (%.0f GFLOP/s) + "
                   "%.0f ms of traffic at %.0f GB/s; 0.70 of sgemm is %.0f ms a step\n", th,
                   th == 1 ? " " : "s", fl / sg[th - 1] / 1e6, sg[th - 1],
                   by / triad_gbs(th) / 1e6, triad_gbs(th), fl / (0.70 * sg[th - 1]) / 1e6);
    printf("\n");
}

/* ---- one training step ----------------------------------------------------- */

static const char *const MATMUL_OPS[] = {"matmul", "linear", "gemm", NULL};
static const char *const ATTN_OPS[] = {"attention", "attention_bwd", "attention_gqa",
                                       "gqa_bwd_qk", "gqa_bwd_v", NULL};

static int run_step(int threads, int steps, int warmup) {
    mt_set_num_threads(threads);
    mt_graph *g = mt_graph_create();
    mt_optim *opt = NULL;
    mt_status s;
    if (!g) return fail("mt_graph_create", MT_ENOMEM);
    mt_tensor *loss = mt_llama_build(g, &LLAMA, BATCH, SEQ, 1.0f / (float)(BATCH * SEQ));
    if (!loss) {
        fprintf(stderr, "bench_llama: mt_llama_build: %s\n", mt_graph_errmsg(g));
        mt_graph_free(g);
        return 1;
    }
    mt_compile_opts copts = {.seed = 1337};
    mt_optim_config oc = mt_optim_defaults();   /* AdamW */
    if ((s = mt_graph_compile(g, loss, &copts)) != MT_OK ||
        (s = mt_optim_create(g, &oc, &opt)) != MT_OK) {
        mt_graph_free(g);
        return fail("compile and optimizer", s);
    }

    /* random tokens: the step's cost does not depend on what they are */
    int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));   /* (B,T) */
    int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));  /* (B,T) */
    for (int i = 0; i < BATCH * SEQ; i++) {
        tok[i] = (int32_t)(mt_rng_uniform(7, 1, (uint64_t)i) * (float)LLAMA.vocab) % LLAMA.vocab;
        tgt[i] = (int32_t)(mt_rng_uniform(7, 2, (uint64_t)i) * (float)LLAMA.vocab) % LLAMA.vocab;
    }

    /* the sgemm reference runs between the steps, so that both see the
     * same share of a machine others load */
    bench_sgemm ref;
    double *t = calloc((size_t)steps, sizeof *t), *topt = calloc((size_t)steps, sizeof *topt);
    double *tsg = calloc((size_t)steps, sizeof *tsg);
    float first_loss = NAN;
    s = t && topt && tsg && bench_sgemm_init(&ref, 1024) == 0 ? MT_OK : MT_ENOMEM;
    bool have_ref = s == MT_OK;
    for (int i = -warmup; i < steps && s == MT_OK; i++) {
        double t0 = mt_time_now();
        if ((s = mt_graph_forward(g)) != MT_OK) break;
        if ((s = mt_graph_backward(g)) != MT_OK) break;
        double t1 = mt_time_now();
        if ((s = mt_optim_step(opt, NULL)) != MT_OK) break;
        if (i >= 0) { t[i] = mt_time_now() - t0; topt[i] = mt_time_now() - t1; }
        if (isnan(first_loss)) first_loss = mt_graph_loss(g);
        /* the first product after a step finds Open BLAS's threads asleep
         * and its operands out of cache: the second is the reference */
        bench_sgemm_seconds(&ref, threads);
        double sg = bench_sgemm_seconds(&ref, threads);
        if (i >= 0) tsg[i] = sg;
    }
    if (have_ref) bench_sgemm_free(&ref);
    if (s != MT_OK) {
        free(t); free(topt); free(tsg); mt_optim_free(opt); mt_graph_free(g);
        return fail("step", s);
    }
    double sec = bench_median(t, steps), opt_ms = bench_median(topt, steps) * 1e3;
    double sgemm = 2.0 * 1024.0 * 1024.0 * 1024.0 / bench_median(tsg, steps) / 1e9;
    double load = load1();

    /* up to 3 more forwards and backwards, timed per op (their mean): where
     * the time goes */
    double mm_ms = NAN, mm_gf = NAN, at_ms = NAN, at_gf = NAN, all_ms = NAN, all_gf;
    const int prof_runs = steps < 3 ? steps : 3;
    s = mt_graph_set_profiling(g, true);
    for (int i = 0; i < prof_runs && s == MT_OK; i++)
        if ((s = mt_graph_forward(g)) == MT_OK) s = mt_graph_backward(g);
    if (s == MT_OK) {
        bench_profile_sum(g, MATMUL_OPS, &mm_ms, &mm_gf);
        bench_profile_sum(g, ATTN_OPS, &at_ms, &at_gf);
        bench_profile_sum(g, NULL, &all_ms, &all_gf);
        mm_ms /= prof_runs; mm_gf /= prof_runs;
        at_ms /= prof_runs; all_ms /= prof_runs;
        if (getenv("MT_BENCH_PROFILE")) mt_graph_print_profile(g, stdout);   /* the sums */
    }
    mt_graph_set_profiling(g, false);
    mt_graph_zero_grad(g);

    int64_t tokens = (int64_t)BATCH * SEQ;
    double gflops = mt_llama_train_flops(&LLAMA, SEQ, tokens) / sec / 1e9;
    printf("%7d %9.1f %9.0f %8.1f %7.2f %10.1f %9.1f %9.1f %7.1f   (load %.2f; products "
           "%.0f GFLOP/s; loss %.3f)\n", threads, sec * 1e3, (double)tokens / sec, gflops,
           gflops / sgemm, mm_ms, at_ms, all_ms - mm_ms - at_ms, opt_ms, load,
           mm_gf / (mm_ms * 1e-3), (double)first_loss);
    printf("RESULT impl=meshtrain config=llama threads=%d ms=%.3f tok_s=%.1f gflops=%.2f "
           "sgemm_gflops=%.2f frac=%.4f matmul_ms=%.3f attn_ms=%.3f other_ms=%.3f optim_ms=%.3f "
           "load=%.2f\n", threads, sec * 1e3, (double)tokens / sec, gflops, sgemm,
           gflops / sgemm, mm_ms, at_ms, all_ms - mm_ms - at_ms, opt_ms, load);
    fflush(stdout);
    free(t);
    free(topt);
    free(tsg);
    mt_optim_free(opt);
    mt_graph_free(g);
    return 0;
}

/* ---- attention alone: the GPT's against grouped-query ----------------------- */

/* One attention op with every input a parameter (so the backward runs in
 * full) under a sum, compiled: kv 0 is the GPT's mt_attention on qkv
 * (B,T,3C), else mt_attention_gqa on q (B,T,NH·HS), k and v (B,T,kv·HS).
 * NULL after printing why. */
static mt_graph *attention_graph(int kv) {
    const int NH = LLAMA.n_heads, HS = LLAMA.dim / NH;
    const int64_t C = LLAMA.dim;
    const mt_init normal = {MT_INIT_NORMAL, 1.0f};
    mt_graph *g = mt_graph_create();
    if (!g) { fail("mt_graph_create", MT_ENOMEM); return NULL; }
    mt_tensor *out;
    if (kv == 0) {
        const int64_t sqkv[3] = {BATCH, SEQ, 3 * C};
        out = mt_attention(g, mt_param(g, "qkv", 3, sqkv, normal), NH);           /* (B,T,C) */
    } else {
        const int64_t sq[3] = {BATCH, SEQ, (int64_t)NH * HS};
        const int64_t skv[3] = {BATCH, SEQ, (int64_t)kv * HS};
        mt_tensor *q = mt_param(g, "q", 3, sq, normal);                          /* (B,T,NH·HS) */
        mt_tensor *k = mt_param(g, "k", 3, skv, normal);                         /* (B,T,KV·HS) */
        mt_tensor *v = mt_param(g, "v", 3, skv, normal);                         /* (B,T,KV·HS) */
        out = mt_attention_gqa(g, q, k, v, NH, kv);                              /* (B,T,NH·HS) */
    }
    mt_tensor *loss = mt_sum(g, out);
    mt_compile_opts copts = {.seed = 1337};
    mt_status s = loss ? mt_graph_compile(g, loss, &copts) : mt_graph_status(g);
    if (s != MT_OK) { mt_graph_free(g); fail("attention graph", s); return NULL; }
    return g;
}

/* One forward and backward of g, profiled: the attention rows' ms in *ms
 * and FLOPs in *gflop. */
static mt_status attention_once(mt_graph *g, double *ms, double *gflop) {
    mt_status s = mt_graph_set_profiling(g, true);   /* clears the last run's rows */
    if (s == MT_OK) s = mt_graph_forward(g);
    if (s == MT_OK) s = mt_graph_backward(g);
    mt_graph_zero_grad(g);
    if (s == MT_OK && bench_profile_sum(g, ATTN_OPS, ms, gflop) <= 0)
        s = mt_fail(MT_EINTERNAL, "no attention rows in the profile");
    return s;
}

/* The three attentions in turn, repetition by repetition, so that a load
 * that comes and goes falls on all of them: medians of `reps` runs after
 * two untimed ones. */
static int run_attention(int threads, int reps) {
    /* one FLOP count for all, the model's: causal pairs, q·kᵀ and p·v
     * forward (4·HS a pair), twice that backward */
    const double HS = (double)LLAMA.dim / LLAMA.n_heads;
    const double pairs = (double)BATCH * LLAMA.n_heads * SEQ * (SEQ + 1) / 2;
    const double model_gflop = 12.0 * pairs * HS / 1e9;
    enum { N_KINDS = 3, MAX_REPS = 64 };
    const struct { const char *name; int kv; } kinds[N_KINDS] = {
        {"gpt", 0}, {"gqa", LLAMA.n_kv_heads}, {"mha", LLAMA.n_heads},
    };
    mt_set_num_threads(threads);
    mt_graph *g[N_KINDS] = {NULL};
    double t[N_KINDS][MAX_REPS], gf[N_KINDS] = {0};
    mt_status s = MT_OK;
    reps = reps < MAX_REPS ? reps : MAX_REPS;
    for (int i = 0; i < N_KINDS && s == MT_OK; i++)
        if (!(g[i] = attention_graph(kinds[i].kv))) s = MT_EINVAL;
    for (int r = -2; r < reps && s == MT_OK; r++)
        for (int i = 0; i < N_KINDS && s == MT_OK; i++) {
            double ms = 0;
            s = attention_once(g[i], &ms, &gf[i]);
            if (r >= 0) t[i][r] = ms;
        }
    for (int i = 0; i < N_KINDS; i++) mt_graph_free(g[i]);
    if (s != MT_OK) return s == MT_EINVAL ? 1 : fail("attention", s);
    double ms[N_KINDS], load = load1();
    for (int i = 0; i < N_KINDS; i++) {
        ms[i] = bench_median(t[i], reps);
        printf("  %-4s KV=%-2d %7d %9.3f %9.1f %12.1f %9.3f   (load %.2f)\n", kinds[i].name,
               kinds[i].kv ? kinds[i].kv : LLAMA.n_heads, threads, ms[i],
               model_gflop / (ms[i] * 1e-3), gf[i] / (ms[i] * 1e-3), ms[i] / ms[0], load);
        printf("RESULT impl=attention kind=%s threads=%d ms=%.4f gflops=%.2f op_gflops=%.2f "
               "load=%.2f\n", kinds[i].name, threads, ms[i], model_gflop / (ms[i] * 1e-3),
               gf[i] / (ms[i] * 1e-3), load);
    }
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    int a = quick ? 2 : 1;
    int only_threads = argc > a ? atoi(argv[a]) : 0;
    int steps = argc > a + 1 ? atoi(argv[a + 1]) : 0;
    if (argc > a + 2 || only_threads < 0 || steps < 0 || (argc > a && only_threads == 0)) {
        fprintf(stderr, "usage: bench_llama [--quick] [THREADS [STEPS]]\n");
        return 2;
    }
    if (steps == 0) steps = quick ? 3 : 10;
    int warmup = quick ? 1 : 2, reps = quick ? 9 : 31;

    const char *coretype = getenv("OPENBLAS_CORETYPE");
    printf("Open BLAS %s, kernel %s%s%s\n", openblas_get_config(), openblas_get_corename(),
           coretype ? "; OPENBLAS_CORETYPE=" : "", coretype ? coretype : "");
    printf("kernel level %s (this CPU's best %s; MT_CPU_ISA caps it)\n",
           mt_cpu_isa_name(mt_get_cpu_isa()), mt_cpu_isa_name(mt_cpu_isa_best()));
    printf("llama L%d dim %d heads %d kv %d ffn %d V %d, B%d T%d, AdamW: %.1fM parameters\n",
           LLAMA.n_layers, LLAMA.dim, LLAMA.n_heads, LLAMA.n_kv_heads, LLAMA.ffn_dim,
           LLAMA.vocab, BATCH, SEQ, (double)mt_llama_num_params(&LLAMA) / 1e6);

    const int threads[2] = {only_threads ? only_threads : 1, only_threads ? 0 : 2};
    double sgemm[2] = {NAN, NAN};
    for (int k = 0; k < 2 && threads[k] > 0; k++)
        sgemm[k] = bench_sgemm_gflops(threads[k], 1024, 10);
    print_floor(threads[0] == 1 ? sgemm[0] : threads[1] == 1 ? sgemm[1] : NAN,
                threads[0] == 2 ? sgemm[0] : threads[1] == 2 ? sgemm[1] : NAN);

    printf("%7s %9s %9s %8s %7s %10s %9s %9s %7s\n", "threads", "ms/step", "tokens/s",
           "GFLOP/s", "/sgemm", "matmul ms", "attn ms", "other ms", "AdamW");
    int rc = 0;
    for (int k = 0; k < 2 && threads[k] > 0; k++)
        rc |= run_step(threads[k], steps, warmup);

    printf("\nattention forward+backward, B%d T%d NH%d HS%d (one-op graphs, per-op profile, "
           "medians of %d runs, the kinds in turn)\n", BATCH, SEQ, LLAMA.n_heads,
           LLAMA.dim / LLAMA.n_heads, reps);
    printf("  %-10s %7s %9s %9s %12s %9s\n", "kind", "threads", "ms", "GFLOP/s", "op GFLOP/s",
           "ms/gpt's");
    for (int k = 0; k < 2 && threads[k] > 0; k++) rc |= run_attention(threads[k], reps);
    return rc;
}
