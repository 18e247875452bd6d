/*
 * bench_gpt.c — one GPT training step (forward, backward, AdamW), timed.
 *
 *   bench_gpt [CONFIG [THREADS [STEPS]]]     CONFIG: v50k | v256 | gpt2 | all
 *
 * Prints ms/step, tokens/s, achieved GFLOP/s (model FLOPs from
 * mt_gpt_train_flops over the median step time) and the share of the
 * machine's fp32 peak, next to an Open BLAS 1024³ sgemm measured in the same
 * process on the same thread count: that sgemm is the most a matmul-bound
 * step could hope for here, so the ratio says how much of it the whole step
 * keeps. One "RESULT ..." line per run is for bench/run_gpt.sh.
 *
 * Peaks are the development machine's (docs: /work/shared/MACHINE.md): 264
 * GFLOP/s on one core, 520 on two. Run with OPENBLAS_CORETYPE unset, or Open
 * BLAS may pick a slower kernel than the machine has (the corename is shown).
 */
#include "meshtrain.h"
#include "bench_util.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char   *name;
    mt_gpt_config cfg;
    int           B, T;
    int           steps;     /* timed steps */
    int           warmup;
    int           threads[2];/* thread counts to run, 0-terminated */
} bench_config;

static const bench_config CONFIGS[] = {
    {"v50k", {.L = 4, .C = 256, .NH = 4, .maxT = 64, .V = 50257, .Vp = 50304}, 4, 64, 20, 3, {1, 2}},
    {"v256", {.L = 4, .C = 256, .NH = 4, .maxT = 64, .V = 256, .Vp = 256}, 4, 64, 20, 3, {1, 2}},
    {"gpt2", {.L = 12, .C = 768, .NH = 12, .maxT = 1024, .V = 50257, .Vp = 50304}, 1, 1024, 2, 1, {2, 0}},
};
enum { N_CONFIGS = sizeof CONFIGS / sizeof CONFIGS[0] };

static double peak_gflops(int threads) { return threads == 1 ? 264.0 : 260.0 * threads; }


/* ---- one configuration ---------------------------------------------------- */

static int fail(const char *what, mt_status s) {
    fprintf(stderr, "bench_gpt: %s: %s (%s)\n", what, mt_errmsg(), mt_status_name(s));
    return 1;
}

static int run(const bench_config *bc, int threads, int steps) {
    mt_set_num_threads(threads);
    mt_graph *g = mt_graph_create();
    mt_optim *opt = NULL;
    mt_status s;
    if (!g) return fail("mt_graph_create", MT_ENOMEM);
    mt_tensor *loss = mt_gpt_build(g, &bc->cfg, bc->B, bc->T, 1.0f / (float)(bc->B * bc->T));
    if (!loss) {
        fprintf(stderr, "bench_gpt: mt_gpt_build: %s\n", mt_graph_errmsg(g));
        mt_graph_free(g);
        return 1;
    }
    /* MT_BENCH_PRECISION=bf16 (bench/run_precision.sh): bf16 products, and
     * the activations only they read stored in bf16 unless
     * MT_BENCH_F32_ACTIVATIONS is set (RESULT's arena_f32_mib: the arena
     * with them f32, planned in the same compile) */
    const char *pe = getenv("MT_BENCH_PRECISION");
    mt_precision prec = MT_PRECISION_FP32;
    if (pe && (s = mt_precision_parse(pe, &prec)) != MT_OK) { mt_graph_free(g); return fail("MT_BENCH_PRECISION", s); }
    /* MT_BENCH_REMAT=full|attention|dots: activation checkpointing, W beside
     * B as the trainer runs it */
    const char *re = getenv("MT_BENCH_REMAT");
    mt_remat remat = MT_REMAT_NONE;
    if (re && (s = mt_remat_parse(re, &remat)) != MT_OK) { mt_graph_free(g); return fail("MT_BENCH_REMAT", s); }
    mt_compile_opts copts = {.seed = 1337, .no_grad = false, .precision = prec, .remat = remat,
                             .interleave_w = remat != MT_REMAT_NONE,
                             .f32_activations = getenv("MT_BENCH_F32_ACTIVATIONS") != NULL};
    if ((s = mt_graph_compile(g, loss, &copts)) != MT_OK) { mt_graph_free(g); return fail("compile", s); }
    if ((s = mt_gpt_fill_constants(g)) != MT_OK) { mt_graph_free(g); return fail("constants", s); }
    mt_optim_config oc = mt_optim_defaults();   /* AdamW */
    if ((s = mt_optim_create(g, &oc, &opt)) != MT_OK) { mt_graph_free(g); return fail("optim", s); }

    /* random tokens: the step's cost does not depend on what they are */
    int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));
    for (int i = 0; i < bc->B * bc->T; i++) {
        tok[i] = (int32_t)(mt_rng_uniform(7, 1, (uint64_t)i) * (float)bc->cfg.V) % bc->cfg.V;
        tgt[i] = (int32_t)(mt_rng_uniform(7, 2, (uint64_t)i) * (float)bc->cfg.V) % bc->cfg.V;
    }

    double *t = calloc((size_t)steps, sizeof *t);
    float first_loss = NAN;
    for (int i = -bc->warmup; i < steps; i++) {
        double t0 = mt_time_now();
        if ((s = mt_graph_forward(g)) != MT_OK) break;
        if ((s = mt_graph_backward(g)) != MT_OK) break;
        if ((s = mt_optim_step(opt, NULL)) != MT_OK) break;
        if (i >= 0) t[i] = mt_time_now() - t0;
        if (isnan(first_loss)) first_loss = mt_graph_loss(g);
    }
    if (s != MT_OK) {
        free(t); mt_optim_free(opt); mt_graph_free(g);
        return fail("step", s);
    }
    double sec = bench_median(t, steps);
    if (getenv("MT_BENCH_PROFILE")) {   /* one more step, timed per op */
        mt_graph_set_profiling(g, true);
        mt_graph_forward(g);
        mt_graph_backward(g);
        mt_graph_print_profile(g, stdout);
        mt_graph_set_profiling(g, false);
    }
    int64_t tokens = (int64_t)bc->B * bc->T;
    double gflops = mt_gpt_train_flops(&bc->cfg, bc->T, tokens) / sec / 1e9;
    double pct = 100.0 * gflops / peak_gflops(threads);
    double ref = bench_sgemm_gflops(threads, 1024, 10);   /* the reference, same run */
    mt_graph_stats st = mt_graph_get_stats(g);

    printf("%-6s %7d %10.2f %10.0f %9.1f %6.1f%% %10.1f %7.2f   (%.1fM params, loss %.3f, "
           "arena %.0f MiB)\n", bc->name, threads, sec * 1e3, (double)tokens / sec, gflops, pct,
           ref, gflops / ref, (double)st.n_param_elems / 1e6, (double)first_loss,
           (double)st.arena_bytes / (1 << 20));
    printf("RESULT impl=meshtrain config=%s threads=%d ms=%.3f tok_s=%.1f gflops=%.2f "
           "peak_pct=%.2f sgemm_gflops=%.2f precision=%s remat=%s arena_mib=%.1f "
           "arena_f32_mib=%.1f bf16_acts=%d isa=%s\n", bc->name,
           threads, sec * 1e3, (double)tokens / sec, gflops, pct, ref, mt_precision_name(prec),
           mt_remat_name(remat), (double)st.arena_bytes / (1 << 20),
           (double)st.arena_bytes_f32 / (1 << 20), st.n_bf16_act, mt_cpu_isa_name(mt_get_cpu_isa()));
    fflush(stdout);
    free(t);
    mt_optim_free(opt);
    mt_graph_free(g);
    return 0;
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "all";
    int only_threads = argc > 2 ? atoi(argv[2]) : 0;
    int steps_arg = argc > 3 ? atoi(argv[3]) : 0;
    if ((argc > 1 && (strcmp(which, "-h") == 0 || strcmp(which, "--help") == 0)) ||
        only_threads < 0 || steps_arg < 0 || argc > 4) {
        fprintf(stderr, "usage: bench_gpt [v50k|v256|gpt2|all [THREADS [STEPS]]]\n");
        return 2;
    }
    bool known = strcmp(which, "all") == 0;
    for (int i = 0; i < N_CONFIGS; i++) known |= strcmp(which, CONFIGS[i].name) == 0;
    if (!known) {
        fprintf(stderr, "bench_gpt: unknown config '%s' (v50k, v256, gpt2 or all)\n", which);
        return 2;
    }

    const char *coretype = getenv("OPENBLAS_CORETYPE");
    printf("Open BLAS %s, kernel %s%s%s\n", openblas_get_config(), openblas_get_corename(),
           coretype ? "; OPENBLAS_CORETYPE=" : "", coretype ? coretype : "");
    printf("kernel level %s (this CPU's best %s; MT_CPU_ISA caps it)\n",
           mt_cpu_isa_name(mt_get_cpu_isa()), mt_cpu_isa_name(mt_cpu_isa_best()));
    printf("peak fp32: 264 GFLOP/s on 1 core, 520 on 2 (MACHINE.md); sgemm: 1024^3, same threads\n\n");
    printf("%-6s %7s %10s %10s %9s %7s %10s %7s\n", "config", "threads", "ms/step", "tokens/s",
           "GFLOP/s", "MFU", "sgemm", "ratio");

    int rc = 0;
    for (int i = 0; i < N_CONFIGS; i++) {
        const bench_config *bc = &CONFIGS[i];
        if (strcmp(which, "all") != 0 && strcmp(which, bc->name) != 0) continue;
        int steps = steps_arg > 0 ? steps_arg : bc->steps;
        if (only_threads > 0) {
            rc |= run(bc, only_threads, steps);
            continue;
        }
        for (int k = 0; k < 2 && bc->threads[k] > 0; k++) rc |= run(bc, bc->threads[k], steps);
    }
    return rc;
}
