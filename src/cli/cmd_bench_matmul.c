/*
 * cmd_bench_matmul.c — `meshtrain bench matmul`: one matmul through the
 * engine (graph, op, kernel) against Open BLAS sgemm of the same shape on the
 * same threads, in the same run, and both against the roofline of the
 * machine file (`meshtrain bench machine`).
 *
 * The engine's figure is the median of its runs of mt_graph_forward on a
 * graph that holds only out (M,N) = a (M,K) · b (K,N), compiled no_grad;
 * sgemm's is the median of as many calls, after one warm-up each, on as
 * many of Open BLAS's own threads as the engine has kernel threads. The
 * roofline bound is min(peak, intensity x bandwidth), intensity =
 * 2MNK / (4(MK + KN + MN)) flops per byte (each matrix moved once).
 * The target: the engine at >= 90 % of sgemm.
 */
#include "cli/args.h"
#include "cli/bench_machine.h"
#include "meshtrain.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char MATMUL_USAGE[] =
    "usage: meshtrain bench matmul [--m M --n N --k K] [--threads T] [--bf16] [--machine FILE]\n"
    "\n"
    "Times out (M,N) = a (M,K) . b (K,N) through the engine (a graph of one mt_matmul,\n"
    "mt_graph_forward) and Open BLAS cblas_sgemm of the same shape on the same threads,\n"
    "and prints both in GFLOP/s, their ratio (target: engine >= 90 % of sgemm), and the\n"
    "roofline bound min(peak, intensity x bandwidth) from the machine file.\n"
    "\n"
    "examples:\n"
    "  meshtrain bench matmul --m 4096 --n 4096 --k 4096\n"
    "  meshtrain bench matmul --m 1024 --n 768 --k 3072 --threads 1\n";

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Median seconds of `reps` engine forwards (after one warm-up) into *sec. */
static mt_status time_engine(int M, int N, int K, int reps, mt_precision prec, double *sec) {
    mt_graph *g = mt_graph_create();
    if (!g) return mt_fail(MT_ENOMEM, "bench matmul: cannot create a graph");
    mt_tensor *a = mt_input(g, "a", MT_F32, 2, (const int64_t[]){M, K});
    mt_tensor *b = mt_param(g, "b", 2, (const int64_t[]){K, N},
                            (mt_init){.kind = MT_INIT_NORMAL, .std = 0.02f});
    mt_tensor *out = mt_matmul(g, a, b, false, false);
    mt_status s = mt_graph_status(g);
    /* the product is the output: no loss, no backward */
    if (s == MT_OK)
        s = mt_graph_compile(g, out, &(mt_compile_opts){.seed = 1, .no_grad = true,
                                                         .seed_from_caller = true,
                                                         .precision = prec});
    if (s == MT_OK) {
        float *x = mt_tensor_f32(a);
        for (size_t i = 0; i < (size_t)M * K; i++) x[i] = (float)(i % 7) * 0.1f;
    }
    double *t = malloc((size_t)reps * sizeof *t);
    if (s == MT_OK && !t) s = mt_fail(MT_ENOMEM, "bench matmul: out of memory");
    for (int r = -1; r < reps && s == MT_OK; r++) {
        double t0 = mt_time_now();
        s = mt_graph_forward(g);
        if (r >= 0) t[r] = mt_time_now() - t0;
    }
    if (s == MT_OK) *sec = median(t, reps);
    else if (mt_graph_status(g) != MT_OK) s = mt_fail(s, "%s", mt_graph_errmsg(g));
    free(t);
    mt_graph_free(g);
    return s;
}

/* Median seconds of `reps` sgemms of the shape (after one warm-up); NAN
 * when the matrices cannot be allocated. */
static double time_sgemm(int M, int N, int K, int threads, int reps) {
    float *a = malloc((size_t)M * K * sizeof *a), *b = malloc((size_t)K * N * sizeof *b);
    float *c = malloc((size_t)M * N * sizeof *c);
    double *t = malloc((size_t)reps * sizeof *t), med = NAN;
    if (a && b && c && t) {
        for (size_t i = 0; i < (size_t)M * K; i++) a[i] = (float)(i % 7) * 0.1f;
        for (size_t i = 0; i < (size_t)K * N; i++) b[i] = (float)(i % 5) * 0.01f;
        /* Open BLAS's own threads (mt_set_num_threads keeps it at 1: the
         * engine splits work over its pool itself) */
        openblas_set_num_threads(threads);
        for (int r = -1; r < reps; r++) {
            double t0 = mt_time_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N,
                        0.0f, c, N);
            if (r >= 0) t[r] = mt_time_now() - t0;
        }
        med = median(t, reps);
        mt_set_num_threads(threads);   /* Open BLAS back to 1 */
    }
    free(a), free(b), free(c), free(t);
    return med;
}

int cli_bench_matmul(int argc, char **argv) {
    int M = 4096, N = 4096, K = 4096, threads = 0, reps = 0;
    bool bf16 = false;
    const char *machine_path = NULL;
    const cli_opt opts[] = {
        {"m", CLI_INT, &M, 1, 65536, 0, 0, NULL, "M", "rows of a and of the product"},
        {"n", CLI_INT, &N, 1, 65536, 0, 0, NULL, "N", "columns of b and of the product"},
        {"k", CLI_INT, &K, 1, 65536, 0, 0, NULL, "K", "the contracted dimension"},
        {"threads", CLI_INT, &threads, 0, 1024, 0, 0, NULL, "T",
         "kernel threads for both (0: every core this process may use)"},
        {"reps", CLI_INT, &reps, 0, 1000, 0, 0, NULL, "R",
         "timed runs of each (0: as many as fit in about a second, 3 to 21)"},
        {"bf16", CLI_FLAG, &bf16, 0, 0, 0, 0, NULL, NULL,
         "also time the engine's bf16 product (oneDNN, f32 accumulation: --precision bf16)"},
        {"machine", CLI_STR, &machine_path, 0, 0, 0, 0, NULL, "FILE",
         "the probe's figures (default: machine.json beside the binary, when there)"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    int rc;
    if (!cli_parse_named("bench", "matmul", "benchmark", MATMUL_USAGE, opts, argc, argv, &rc))
        return rc;
    if ((double)M * K + (double)K * N + (double)M * N > 3.0 * (1u << 30) / 4) {
        cli_error("bench matmul: %dx%dx%d needs over 3 GiB for its three matrices (twice: "
                  "engine and sgemm); choose smaller sizes", M, N, K);
        return CLI_EXIT_USAGE;
    }
    /* the machine file: named ones must read; the default one is optional */
    char used_path[4096];
    mt_machine mach;
    bool have_machine = false;
    if (!cli_machine_load(machine_path, &mach, &have_machine, used_path, sizeof used_path))
        return CLI_EXIT_FAIL;
    machine_path = used_path;

    mt_set_num_threads(threads);
    threads = mt_get_num_threads();
    const double flops = 2.0 * M * N * K;
    if (reps == 0) {   /* about a second for each, at the machine's 100 GFLOP/s per thread */
        double guess = flops / (100e9 * threads);
        reps = guess > 0 ? (int)(1.0 / guess) : 21;
        reps = reps < 3 ? 3 : reps > 21 ? 21 : reps;
    }
    double engine_s = NAN;
    if (time_engine(M, N, K, reps, MT_PRECISION_FP32, &engine_s) != MT_OK) {
        cli_error("bench matmul: the engine's matmul failed: %s", mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    double bf16_s = NAN;
    if (bf16 && time_engine(M, N, K, reps, MT_PRECISION_BF16, &bf16_s) != MT_OK) {
        cli_error("bench matmul: the engine's bf16 matmul failed: %s", mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    const double sgemm_s = time_sgemm(M, N, K, threads, reps);
    if (!isfinite(sgemm_s)) {
        cli_error("bench matmul: cannot allocate sgemm's matrices (%dx%dx%d)", M, N, K);
        return CLI_EXIT_FAIL;
    }
    const double eng = flops / engine_s / 1e9, ref = flops / sgemm_s / 1e9;
    const double intensity = flops / (4.0 * ((double)M * K + (double)K * N + (double)M * N));
    const char *core = openblas_get_corename();

    printf("matmul (%d,%d) = (%d,%d) . (%d,%d), f32, %d thread%s, median of %d runs; Open BLAS "
           "kernel %s\n\n", M, N, M, K, K, N, threads, threads == 1 ? "" : "s", reps,
           core ? core : "unknown");
    printf("%-28s %12s %12s\n", "", "time (ms)", "GFLOP/s");
    printf("%-28s %12.3f %12.1f\n", "meshtrain (graph, op)", engine_s * 1e3, eng);
    printf("%-28s %12.3f %12.1f\n", "Open BLAS cblas_sgemm", sgemm_s * 1e3, ref);
    if (bf16)
        printf("%-28s %12.3f %12.1f   (%.2fx the f32 engine)\n", "meshtrain bf16 (oneDNN)",
               bf16_s * 1e3, flops / bf16_s / 1e9, engine_s / bf16_s);
    printf("ratio engine/sgemm %.3f: %s (target >= 0.90)\n", eng / ref,
           eng >= 0.9 * ref ? "PASS" : "MISS");
    printf("intensity %.1f flop/byte\n", intensity);
    if (have_machine) {
        const bool one = threads == 1;
        const double peak = one ? mach.sgemm_gflops_1 : mach.sgemm_gflops_all;
        const double fma = one ? mach.fma_gflops_1 : mach.fma_gflops_all;
        const double bw = one ? mach.triad_gbs_1 : mach.triad_gbs_all;
        const double bound = fmin(peak, intensity * bw);
        printf("machine file %s (%s, %s cores):\n", machine_path, mach.measured_at,
               one ? "1 thread" : "all");
        printf("  sgemm peak %.1f, FMA peak %.1f GFLOP/s, triad %.1f GB/s\n", peak, fma, bw);
        printf("  roofline bound min(peak, %.1f x %.1f) = %.1f GFLOP/s (%s-bound); engine at "
               "%.0f %% of it, %.0f %% of the FMA peak\n", intensity, bw, bound,
               bound < peak ? "memory" : "compute", 100 * eng / bound, 100 * eng / fma);
        const double dot = one ? mach.bf16_gflops_1 : mach.bf16_gflops_all;
        if (bf16 && isfinite(dot))
            printf("  bf16 dot peak %.1f GFLOP/s (%.2fx the FMA peak): the bf16 product at %.0f %% "
                   "of it\n", dot, dot / fma, 100 * flops / bf16_s / 1e9 / dot);
    } else {
        printf("no machine file (%s): run `meshtrain bench machine` for the roofline\n",
               machine_path);
    }
    if (fflush(stdout) != 0) {
        cli_error("cannot write to standard output: %s", strerror(errno));
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}
