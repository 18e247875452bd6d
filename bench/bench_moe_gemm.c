/*
 * bench_moe_gemm.c — the grouped expert product (ops/moe.h: mt_moe_gemm_fwd
 * and mt_moe_gemm_bwd) against the same run's sgemm on the same rows (issue
 * 42's first benchmark): y (N,OC) = x (N,C) · w_e over E row groups, and its
 * backward (dx, dw), against one dense product of the N rows by one weight
 * (the same FLOPs: 6·N·C·OC forward + backward), both through Open BLAS on
 * one thread, alternated, the median of the repetitions.
 *
 *   bench_moe_gemm [--quick]
 *
 * Loads: balanced (N/E rows each) and a router's (softmax top-k of random
 * logits skewed by expert, MaxVio printed, empty experts possible).
 */
#include "bench_util.h"
#include "ops/kernels.h"
#include "ops/moe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *randv(size_t n, unsigned seed) {
    float *p = malloc(n * sizeof *p);
    if (!p) {
        fprintf(stderr, "meshtrain: bench_moe_gemm: out of memory (%zu floats)\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = mt_rng_uniform(seed, 0, i) - 0.5f;
    return p;
}

/* A router's group sizes for T tokens, top-k of E: softmax of random logits
 * plus `skew`·i/E for expert i. */
static void router_sizes(int32_t *sizes, int64_t T, int64_t E, int64_t k, double skew) {
    mt_moe_route_params p = {.T = T, .E = E, .k = k, .renorm = true, .route_scale = 1.0f};
    float *u = malloc((size_t)(T * E) * sizeof *u), *s = malloc((size_t)(T * E) * sizeof *s);
    float *g = malloc((size_t)(T * k) * sizeof *g);
    int32_t *ids = malloc((size_t)(T * k) * sizeof *ids);
    for (int64_t i = 0; i < T * E; i++)
        u[i] = 2.0f * mt_rng_uniform(9, 0, (uint64_t)i) +
               (float)(skew * (double)(i % E) / (double)E);
    mt_moe_route_fwd(&p, u, NULL, s, ids, g);
    mt_moe_counts(sizes, ids, 1, T, k, E);
    free(u), free(s), free(g), free(ids);
}

/* Seconds of one forward + backward of the grouped product and of the dense
 * one, medians of reps alternated runs. */
static void time_pair(const int32_t *sizes, int64_t E, int64_t N, int64_t C, int64_t OC, int reps,
                      double *grouped, double *dense) {
    float *x = randv((size_t)(N * C), 1), *w = randv((size_t)(E * C * OC), 2);
    float *dy = randv((size_t)(N * OC), 3), *y = malloc((size_t)(N * OC) * sizeof *y);
    float *dx = malloc((size_t)(N * C) * sizeof *dx);
    float *dw = malloc((size_t)(E * C * OC) * sizeof *dw);
    double tg[32], td[32];
    for (int r = -1; r < reps; r++) {
        double t0 = mt_time_now();
        mt_moe_gemm_fwd(y, x, w, sizes, E, C, OC, false);
        mt_moe_gemm_bwd(dx, dw, dy, x, w, sizes, E, C, OC, false);
        double t1 = mt_time_now();
        mt_kernel_gemm(false, false, N, OC, C, 1.0f, x, C, w, OC, 0.0f, y, OC);
        mt_kernel_gemm(false, true, N, C, OC, 1.0f, dy, OC, w, OC, 0.0f, dx, C);
        mt_kernel_gemm(true, false, C, OC, N, 1.0f, x, C, dy, OC, 0.0f, dw, OC);
        double t2 = mt_time_now();
        if (r >= 0) tg[r] = t1 - t0, td[r] = t2 - t1;
    }
    *grouped = bench_median(tg, reps), *dense = bench_median(td, reps);
    free(x), free(w), free(dy), free(y), free(dx), free(dw);
}

int main(int argc, char **argv) {
    const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    const int reps = quick ? 3 : 9;
    openblas_set_num_threads(1);
    struct { const char *name; int64_t T, k, E, C, OC; } shapes[] = {
        {"moe-tiny w1", 2048, 2, 8, 256, 512},
        {"wide", 1024, 2, 8, 1024, 1024},
        {"many experts", 2048, 8, 64, 256, 256},
    };
    printf("%-14s %-9s %6s %8s %10s %10s %7s\n", "shape", "load", "N", "MaxVio", "grouped",
           "sgemm", "ratio");
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const int64_t T = shapes[c].T, k = shapes[c].k, E = shapes[c].E, N = T * k;
        int32_t *sizes = malloc((size_t)E * sizeof *sizes);
        for (int load = 0; load < 2; load++) {
            if (load == 0)
                for (int64_t e = 0; e < E; e++) sizes[e] = (int32_t)(N / E);
            else
                router_sizes(sizes, T, E, k, 3.0);
            double g, d;
            time_pair(sizes, E, N, shapes[c].C, shapes[c].OC, reps, &g, &d);
            const double fl = 6.0 * (double)N * (double)shapes[c].C * (double)shapes[c].OC;
            printf("%-14s %-9s %6lld %8.2f %6.1f GF/s %6.1f GF/s %6.2fx\n", shapes[c].name,
                   load ? "router" : "balanced", (long long)N, mt_moe_maxvio(sizes, E),
                   fl / g / 1e9, fl / d / 1e9, d / g);
        }
        free(sizes);
    }
    return 0;
}
