/*
 * bench_moe_layer.c — one MoE feed-forward layer, forward and backward,
 * through meshtrain's graph (issue 42's PyTorch benchmark; its contender is
 * bench/moe_torch.py, run beside it by bench/run_moe.sh): the LLaMA's MoE
 * block as src/models/llama/llama_moe.c builds it, without the shared
 * expert:
 *
 *   u     = x · Wr                               (N,E)   router logits
 *   ids   = top-k of softmax(u)                  (N,k)   int32
 *   gates = softmax(u) at ids, renormalised      (N,k)
 *   xs    = x's rows by (token, slot)            (N,k,C)
 *   m     = silu(xs · W1_e) ⊙ (xs · W3_e)        (N,k,F) each expert on its rows
 *   ys    = m · W2_e                             (N,k,C)
 *   out   = Σ_j gates_j · ys_j                   (N,C)
 *   loss  = Σ out ⊙ r + α·aux + β·z              ()      r fixed, random
 *
 * FLOPs a pass, forward + backward: 18·N·k·C·F for the experts (Megatron's
 * count, ../shared/MOE.md §6) plus 6·N·C·E for the router. Printed: the
 * median time of a forward + backward over the repetitions, its GFLOP/s and
 * the same run's Open BLAS sgemm (1024³) on as many threads.
 *
 *   bench_moe_layer [--quick] [--profile] [tiny|wide] [THREADS]
 *
 * --profile also prints the graph's per-op profile of the timed passes
 * (mt_graph_print_profile) after the line; the warm-up pass, whose first
 * product pays Open BLAS's set-up, is left out of it.
 *
 * Shapes (bench/moe_torch.py has the same table): tiny is the preset
 * moe-tiny's MoE block (C 64, F_e 64, 8 experts, top 2) at 4096 tokens,
 * where a framework's per-op cost shows; wide a layer at 4096 tokens of
 * C 256, F_e 512, where the experts' products take most of the time.
 *
 * Output lines (run_moe.sh reads them):
 *   moe_layer shape=.. N=.. C=.. F=.. E=.. k=.. threads=.. ms=.. gflops=.. sgemm=.. maxvio=..
 */
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shapes: Mixtral's 8 experts, top 2 (bench/moe_torch.py's SHAPES). */
typedef struct { const char *name; int64_t N, C, F; } layer_shape;
static const layer_shape SHAPES[] = {{"tiny", 4096, 64, 64}, {"wide", 4096, 256, 512}};
enum { E = 8, K = 2 };

static mt_tensor *param(mt_graph *g, const char *name, int ndim, const int64_t *shape) {
    return mt_param(g, name, ndim, shape, (mt_init){MT_INIT_NORMAL, 0.02f});
}

/* The layer of shape sh and its loss on g. */
static mt_tensor *layer(mt_graph *g, const layer_shape *sh, mt_tensor **ids_out) {
    const int64_t NTOK = sh->N, C = sh->C, F = sh->F;
    mt_tensor *x = param(g, "x", 2, (int64_t[]){NTOK, C});
    mt_tensor *wr = param(g, "wr", 2, (int64_t[]){E, C});
    mt_tensor *w1 = param(g, "w1", 3, (int64_t[]){E, C, F});
    mt_tensor *w3 = param(g, "w3", 3, (int64_t[]){E, C, F});
    mt_tensor *w2 = param(g, "w2", 3, (int64_t[]){E, F, C});
    mt_tensor *r = mt_input(g, "r", MT_F32, 2, (int64_t[]){NTOK, C});
    const mt_moe_router rt = {.k = K, .renorm = true, .route_scale = 1.0f};
    mt_tensor *u = mt_linear(g, x, wr, NULL);                                   /* (N,E) */
    mt_tensor *ids = mt_moe_route(g, u, NULL, &rt);                             /* (N,k) */
    mt_tensor *gates = mt_moe_gates(g, u, ids, &rt);                            /* (N,k) */
    mt_tensor *xs = mt_moe_dispatch(g, x, ids, E);                              /* (N,k,C) */
    mt_tensor *mid = mt_swiglu(g, mt_moe_experts(g, xs, w1, ids),
                               mt_moe_experts(g, xs, w3, ids));                 /* (N,k,F) */
    mt_tensor *ys = mt_moe_experts(g, mid, w2, ids);                            /* (N,k,C) */
    mt_tensor *out = mt_moe_combine(g, ys, gates, ids, E);                      /* (N,C) */
    mt_tensor *aux = mt_moe_router_loss(g, u, ids, &rt, 0.01f, 1e-3f);          /* () */
    *ids_out = ids;
    return mt_add(g, mt_sum(g, mt_mul(g, out, r)), aux);
}

int main(int argc, char **argv) {
    int a = 1;
    const bool quick = argc > a && strcmp(argv[a], "--quick") == 0;
    if (quick) a++;
    const bool profile = argc > a && strcmp(argv[a], "--profile") == 0;
    if (profile) a++;
    const layer_shape *sh = &SHAPES[0];
    if (argc > a && (!strcmp(argv[a], "tiny") || !strcmp(argv[a], "wide")))
        sh = &SHAPES[!strcmp(argv[a++], "wide")];
    const int threads = argc > a ? atoi(argv[a]) : 1;
    if (threads < 1 || threads > 256) {
        fprintf(stderr, "usage: bench_moe_layer [--quick] [--profile] [tiny|wide] "
                        "[THREADS (1..256)]\n");
        return 2;
    }
    const int64_t NTOK = sh->N, C = sh->C, F = sh->F;
    /* the shared machine's noise comes in bursts of seconds: tiny's passes
     * (about 10 ms) are taken 21 times, wide's (about 200 ms) 9 times, as
     * bench/moe_torch.py does */
    const int reps = quick ? 3 : sh == &SHAPES[0] ? 21 : 9;
    mt_set_num_threads(threads);
    mt_graph *g = mt_graph_create();
    mt_tensor *ids = NULL, *loss = layer(g, sh, &ids);
    if (!loss || mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1}) != MT_OK) {
        fprintf(stderr, "meshtrain: bench_moe_layer: %s %s\n", mt_graph_errmsg(g), mt_errmsg());
        return 1;
    }
    float *r = mt_tensor_f32(mt_graph_find(g, "r"));
    for (int64_t i = 0; i < NTOK * C; i++) r[i] = mt_rng_normal(6, 0, (uint64_t)i);
    float *x = mt_tensor_f32(mt_graph_find(g, "x"));
    for (int64_t i = 0; i < NTOK * C; i++) x[i] = mt_rng_normal(7, 0, (uint64_t)i);
    double t[32];
    for (int i = -1; i < reps; i++) {   /* one warm-up pass, not profiled */
        if (i == 0 && profile) mt_graph_set_profiling(g, true);
        double t0 = mt_time_now();
        if (mt_graph_forward(g) != MT_OK || mt_graph_backward(g) != MT_OK) {
            fprintf(stderr, "meshtrain: bench_moe_layer: %s\n", mt_errmsg());
            return 1;
        }
        if (i >= 0) t[i] = mt_time_now() - t0;
    }
    int32_t counts[E] = {0};
    const int32_t *id = mt_tensor_i32(ids);
    for (int64_t i = 0; i < NTOK * K; i++) counts[id[i]]++;
    const double sec = bench_median(t, reps);
    const double flops = 18.0 * (double)(NTOK * K * C * F) + 6.0 * (double)(NTOK * C * E);
    const double sg = bench_sgemm_gflops(threads, 1024, quick ? 3 : 5);
    printf("moe_layer shape=%s N=%lld C=%lld F=%lld E=%d k=%d threads=%d ms=%.2f gflops=%.2f "
           "sgemm=%.2f maxvio=%.3f\n", sh->name, (long long)NTOK, (long long)C, (long long)F, E,
           K, threads, sec * 1e3, flops / sec / 1e9, sg, mt_moe_load_maxvio(counts, E));
    if (profile) mt_graph_print_profile(g, stdout);
    mt_graph_free(g);
    return 0;
}
