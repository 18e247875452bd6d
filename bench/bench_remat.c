/*
 * bench_remat.c — activation checkpointing: step time and activation memory
 * of each remat policy against none, in one process.
 *
 *   bench_remat [CONFIG [THREADS [STEPS]]]     CONFIG: gpt2 | small
 *
 * gpt2 is GPT-2 small (124M: L12 C768 NH12, V=50257), B=1, T=1024, two
 * threads: issue 12's targets for `full` are activation memory at most a
 * third of none's and a step at most 1.4x none's. Each policy runs as the
 * trainer runs one device (mt_compile_opts.remat, W interleaved into B when
 * a policy is on); "none, W beside B" shows what interleaving alone does.
 *
 * The floor on the time ratio is the FLOPs': a step computes forward +
 * backward (about 3 forwards), and the recomputation adds its FLOPs
 * (mt_graph_stats.flops_recompute: for full, a forward without the head), so
 * the step cannot take less than (step + recompute) / step of none's time at
 * the same FLOP rate. Printed per row. Step times are medians; the machine
 * may be shared, so they are noisy.
 */
#include "meshtrain.h"
#include "bench_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char   *name;
    mt_gpt_config cfg;
    int           B, T, threads, steps, warmup;
} bench_config;

static const bench_config CONFIGS[] = {
    {"gpt2", {.L = 12, .C = 768, .NH = 12, .maxT = 1024, .V = 50257, .Vp = 50304}, 1, 1024, 2, 3, 1},
    {"small", {.L = 4, .C = 256, .NH = 4, .maxT = 256, .V = 50257, .Vp = 50304}, 2, 256, 2, 5, 1},
};
enum { N_CONFIGS = sizeof CONFIGS / sizeof CONFIGS[0] };

typedef struct {
    const char *label;
    mt_remat    remat;
    bool        interleave_w;
} variant;

static const variant VARIANTS[] = {
    {"none", MT_REMAT_NONE, false},
    {"none, W beside B", MT_REMAT_NONE, true},
    {"full", MT_REMAT_FULL, true},
    {"attention", MT_REMAT_ATTENTION, true},
    {"dots", MT_REMAT_DOTS, true},
};
enum { N_VARIANTS = sizeof VARIANTS / sizeof VARIANTS[0] };

typedef struct {
    double         ms, fwd_ms;   /* medians: the step, its forward */
    mt_graph_stats st;
} result;

static int run(const bench_config *bc, const variant *v, int steps, result *out) {
    mt_graph *g = mt_graph_create();
    mt_optim *opt = NULL;
    mt_status s = MT_OK;
    mt_tensor *loss = g ? mt_gpt_build(g, &bc->cfg, bc->B, bc->T, 1.0f / (float)(bc->B * bc->T))
                        : NULL;
    if (!loss) {
        fprintf(stderr, "bench_remat: mt_gpt_build: %s\n", g ? mt_graph_errmsg(g) : "no memory");
        mt_graph_free(g);
        return 1;
    }
    mt_compile_opts co = {.seed = 1337, .remat = v->remat, .interleave_w = v->interleave_w};
    mt_optim_config oc = mt_optim_defaults();   /* AdamW */
    if ((s = mt_graph_compile(g, loss, &co)) != MT_OK || (s = mt_gpt_fill_constants(g)) != MT_OK ||
        (s = mt_optim_create(g, &oc, &opt)) != MT_OK) {
        fprintf(stderr, "bench_remat: %s: %s\n", v->label, mt_errmsg());
        mt_graph_free(g);
        return 1;
    }
    int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));
    for (int i = 0; i < bc->B * bc->T; i++) {
        tok[i] = (int32_t)(mt_rng_uniform(7, 1, (uint64_t)i) * (float)bc->cfg.V) % bc->cfg.V;
        tgt[i] = (int32_t)(mt_rng_uniform(7, 2, (uint64_t)i) * (float)bc->cfg.V) % bc->cfg.V;
    }
    double t[64], tf[64];
    for (int i = -bc->warmup; i < steps && s == MT_OK; i++) {
        double t0 = mt_time_now();
        s = mt_graph_forward(g);
        double t1 = mt_time_now();
        if (s == MT_OK && (s = mt_graph_backward(g)) == MT_OK) s = mt_optim_step(opt, NULL);
        if (i >= 0) t[i] = mt_time_now() - t0, tf[i] = t1 - t0;
    }
    if (s != MT_OK) fprintf(stderr, "bench_remat: %s: step: %s\n", v->label, mt_errmsg());
    out->ms = s == MT_OK ? bench_median(t, steps) * 1e3 : NAN;
    out->fwd_ms = s == MT_OK ? bench_median(tf, steps) * 1e3 : NAN;
    out->st = mt_graph_get_stats(g);
    mt_optim_free(opt);
    mt_graph_free(g);
    return s != MT_OK;
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "gpt2";
    const bench_config *bc = NULL;
    for (int i = 0; i < N_CONFIGS; i++)
        if (strcmp(which, CONFIGS[i].name) == 0) bc = &CONFIGS[i];
    int threads = argc > 2 ? atoi(argv[2]) : 0, steps = argc > 3 ? atoi(argv[3]) : 0;
    if (!bc || threads < 0 || steps < 0 || steps > 64 || argc > 4) {
        fprintf(stderr, "usage: bench_remat [gpt2|small [THREADS [STEPS (1..64)]]]\n");
        return 2;
    }
    if (!threads) threads = bc->threads;
    if (!steps) steps = bc->steps;
    mt_set_num_threads(threads);
    const mt_gpt_config *c = &bc->cfg;
    printf("GPT L=%d C=%d NH=%d V=%d, B=%d T=%d, %d threads, median of %d steps (after %d); "
           "step = forward + backward + AdamW\n\n", c->L, c->C, c->NH, c->V, bc->B, bc->T,
           threads, steps, bc->warmup);
    printf("%-18s %10s %8s %8s %8s %16s %8s %12s %9s\n", "remat", "ms/step", "x none", "floor",
           "fwd ms", "activations MiB", "x none", "recompute GF", "+% step");
    result r[N_VARIANTS];
    int rc = 0;
    for (int k = 0; k < N_VARIANTS; k++) {
        rc |= run(bc, &VARIANTS[k], steps, &r[k]);
        const mt_graph_stats *st = &r[k].st;
        double step_flops = st->flops_forward + st->flops_backward - st->flops_recompute;
        double floor = (step_flops + st->flops_recompute) / step_flops;
        printf("%-18s %10.1f %7.2fx %7.2fx %8.1f %16.1f %7.3fx %12.2f %8.1f%%\n",
               VARIANTS[k].label, r[k].ms, r[k].ms / r[0].ms, floor, r[k].fwd_ms,
               st->arena_bytes / 1048576.0,
               (double)st->arena_bytes / (double)r[0].st.arena_bytes, st->flops_recompute * 1e-9,
               100 * st->flops_recompute / step_flops);
        printf("RESULT config=%s remat=%s interleave_w=%d ms=%.3f arena_bytes=%zu "
               "recompute_flops=%.0f step_flops=%.0f\n", bc->name, mt_remat_name(VARIANTS[k].remat),
               (int)VARIANTS[k].interleave_w, r[k].ms, st->arena_bytes, st->flops_recompute,
               step_flops);
        fflush(stdout);
    }
    /* issue 12's targets for full (row 2) */
    double mem = (double)r[2].st.arena_bytes / (double)r[0].st.arena_bytes;
    double time = r[2].ms / r[0].ms;
    /* a time floor from none's own forward: full re-runs the blocks' part of it */
    double fwd_share = r[2].st.flops_recompute / r[0].st.flops_forward;
    printf("\nfull re-runs %.0f%% of the forward's FLOPs: at none's forward time that is "
           "%.2fx none's step\n", 100 * fwd_share, (r[0].ms + fwd_share * r[0].fwd_ms) / r[0].ms);
    printf("full: activation memory %.3fx none (target <= 0.333: %s), step %.2fx none "
           "(target <= 1.40: %s)\n", mem, mem <= 1.0 / 3 ? "met" : "MISSED", time,
           time <= 1.4 ? "met" : "MISSED");
    return rc;
}
