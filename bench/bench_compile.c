/*
 * bench_compile.c — how graph building and compiling grow with depth.
 *
 *   bench_compile [MAX_LAYERS]        (default 1000)
 *
 * Builds a small GPT (C=64, NH=4, B=2, T=16, V=256: `meshtrain train`'s
 * default width) of L = 25, 50, ... up to MAX_LAYERS blocks, on every core,
 * and times mt_gpt_build, mt_graph_compile (autodiff, buffer plan, parameter
 * initialisation, shown apart: it is linear in the parameters, ~50M at
 * L=1000) and mt_optim_create, next to one training step of the same graph
 * (forward, backward, AdamW) as the reference: compile / step says how many
 * steps a compile costs, whatever the machine.
 * "growth" is the exponent k of compile time ∝ nodes^k between a row and the
 * one before it: about 1 when compiling is linear in the graph, 3 when it is
 * cubic. The arena columns show what the buffer plan achieves: planned
 * activation bytes, and their share of the bytes without any reuse.
 *
 * Target (issue 7): L=1000 compiles in under 1 s.
 */
#include "meshtrain.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what, mt_status s) {
    fprintf(stderr, "bench_compile: %s: %s (%s)\n", what, mt_errmsg(), mt_status_name(s));
    return 1;
}

int main(int argc, char **argv) {
    int max_layers = argc > 1 ? atoi(argv[1]) : 1000;
    if (argc > 2 || max_layers < 1) {
        fprintf(stderr, "usage: bench_compile [MAX_LAYERS]   (a positive number, default 1000)\n");
        return 2;
    }
    static const int depths[] = {25, 50, 100, 200, 400, 1000, 2000, 4000};
    mt_set_num_threads(0);   /* every core, as `meshtrain train` */
    printf("%6s %8s %9s %11s %9s %9s %9s %9s %7s %10s %7s\n", "L", "nodes", "build ms",
           "compile ms", "(init ms)", "optim ms", "step ms", "compile/", "growth", "arena MiB",
           "planned");
    printf("%6s %8s %9s %11s %9s %9s %9s %9s %7s %10s %7s\n", "", "", "", "", "", "", "", "step",
           "", "", "share");
    double prev_nodes = 0, prev_compile = 0, compile_at_1000 = NAN, init_at_1000 = NAN;
    for (size_t i = 0; i < sizeof depths / sizeof depths[0] && depths[i] <= max_layers; i++) {
        const int L = depths[i], B = 2, T = 16;
        mt_gpt_config cfg = {.L = L, .C = 64, .NH = 4, .maxT = T, .V = 256, .Vp = 256};
        mt_graph *g = mt_graph_create();
        if (!g) return fail("mt_graph_create", MT_ENOMEM);
        double t0 = mt_time_now();
        mt_tensor *loss = mt_gpt_build(g, &cfg, B, T, 1.0f / (B * T));
        double t1 = mt_time_now();
        if (!loss) return fail("mt_gpt_build", mt_graph_status(g));
        mt_compile_opts co = {.seed = 1};
        mt_status s = mt_graph_compile(g, loss, &co);
        double t2 = mt_time_now();
        if (s != MT_OK) return fail("compile", s);
        if ((s = mt_gpt_fill_constants(g)) != MT_OK) return fail("constants", s);
        mt_optim_config oc = mt_optim_defaults();
        mt_optim *opt = NULL;
        double t3 = mt_time_now();
        if ((s = mt_optim_create(g, &oc, &opt)) != MT_OK) return fail("optim", s);
        double t4 = mt_time_now();
        int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));
        int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));
        for (int k = 0; k < B * T; k++) tok[k] = tgt[k] = k % cfg.V;
        double step = INFINITY;
        for (int r = 0; r < 3; r++) {   /* the best of three: the reference's own noise */
            double s0 = mt_time_now();
            if ((s = mt_graph_forward(g)) != MT_OK || (s = mt_graph_backward(g)) != MT_OK ||
                (s = mt_optim_step(opt, NULL)) != MT_OK)
                return fail("step", s);
            double d = mt_time_now() - s0;
            if (d < step) step = d;
        }
        mt_graph_stats st = mt_graph_get_stats(g);
        double nodes = st.n_forward + st.n_backward_b + st.n_backward_w;
        double compile = t2 - t1;
        char growth[16] = "-";
        if (prev_nodes > 0 && compile > 0 && prev_compile > 0)
            snprintf(growth, sizeof growth, "%.2f", log(compile / prev_compile) / log(nodes / prev_nodes));
        printf("%6d %8.0f %9.2f %11.2f %9.2f %9.2f %9.2f %9.1f %7s %10.2f %6.0f%%\n", L, nodes,
               (t1 - t0) * 1e3, compile * 1e3, st.init_seconds * 1e3, (t4 - t3) * 1e3,
               step * 1e3, compile / step,
               growth, (double)st.arena_bytes / (1 << 20),
               100.0 * (double)st.arena_bytes / (double)st.arena_bytes_unplanned);
        fflush(stdout);
        if (L == 1000) compile_at_1000 = compile, init_at_1000 = st.init_seconds;
        prev_nodes = nodes;
        prev_compile = compile;
        mt_optim_free(opt);
        mt_graph_free(g);
    }
    if (!isnan(compile_at_1000)) {
        printf("\ncompile at L=1000: %.3f s (target < 1 s)   %s\n", compile_at_1000,
               compile_at_1000 < 1.0 ? "met" : "MISSED");
        printf("  of which parameter initialisation %.3f s; the graph work (autodiff, plan, "
               "allocation) %.3f s\n", init_at_1000, compile_at_1000 - init_at_1000);
    }
    return 0;
}
