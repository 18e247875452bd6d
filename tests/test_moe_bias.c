/*
 * test_moe_bias.c — the aux-loss-free router bias (issue 42 item 2;
 * ../shared/MOE.md §1.3 and §2, DeepSeek-V3's rule):
 *
 *  - mt_moe_route with a bias chooses the top-k of scores + bias (the
 *    float64 selection of tests/moe_ref.h on the graph's own logits), the
 *    gates of those experts are the unbiased scores' (ref_gates), and no
 *    gradient reaches the bias;
 *  - a tiny MoE layer trained 6 AdamW steps of 2 microbatches each, with
 *    the trainer's load count and bias step (train/moe_load.c, as
 *    trainer.c calls them): after every step the bias equals a float64
 *    recomputation from the ids the test read itself (counts over both
 *    microbatches, Δb_i = γ·sign(mean c − c_i), centred so Σ Δb = 0), the
 *    step's MaxVio equals the float64 one, the optimizer never moves the
 *    bias, and the bias does change some token's experts on the way;
 *  - a bias that is not (E) f32 is refused, naming it.
 * tests/test_moe_bias_train.sh runs it through the trainer on every layout.
 */
#include "meshtrain.h"
#include "harness.h"
#include "moe_ref.h"
#include "train/train_impl.h"

#include <string.h>

enum { T = 24, D = 6, E = 4, K = 2, O = 3, STEPS = 6, MICRO = 2 };

static const mt_moe_router ROUTER = {.k = K, .renorm = true, .route_scale = 1.0f};

typedef struct {
    mt_graph  *g;
    mt_tensor *x, *r, *u, *ids, *gates, *bias, *wg, *we, *loss;
} layer_graph;

/* u = x · wg, the top-2 of softmax(u) + bias, linear experts, loss Σ out ⊙ r
 * plus a small aux loss (so that the router's weight moves too). */
static void build(layer_graph *l) {
    mt_graph *g = l->g = mt_graph_create();
    l->x = mt_input(g, "x", MT_F32, 2, (int64_t[]){T, D});
    l->r = mt_input(g, "r", MT_F32, 2, (int64_t[]){T, O});
    l->wg = mt_param(g, "wg", 2, (int64_t[]){D, E}, (mt_init){MT_INIT_NORMAL, 0.5f});
    l->we = mt_param(g, "we", 3, (int64_t[]){E, D, O}, (mt_init){MT_INIT_NORMAL, 0.5f});
    l->bias = mt_param(g, "bias", 1, (int64_t[]){E}, (mt_init){MT_INIT_ZEROS, 0.0f});
    l->u = mt_matmul(g, l->x, l->wg, false, false);
    l->ids = mt_moe_route(g, l->u, l->bias, &ROUTER);
    l->gates = mt_moe_gates(g, l->u, l->ids, &ROUTER);
    mt_tensor *xs = mt_moe_dispatch(g, l->x, l->ids, E);
    mt_tensor *out = mt_moe_combine(g, mt_moe_experts(g, xs, l->we, l->ids), l->gates, l->ids, E);
    mt_tensor *aux = mt_moe_router_loss(g, l->u, l->ids, &ROUTER, 0.05f, 0.0f);
    l->loss = mt_add(g, mt_sum(g, mt_mul(g, out, l->r)), aux);
}

static mt_moe_route_params route_params(void) {
    return (mt_moe_route_params){.T = T, .E = E, .k = K, .renorm = true,
                                 .score = MT_MOE_SOFTMAX, .route_scale = 1.0f};
}

/* Checks the forward's ids and gates against the float64 selection on its
 * own logits with `bias`; adds the ids to counts (E); returns the tokens
 * whose experts the bias changed. */
static int check_route(const layer_graph *l, const float *bias, int64_t *counts,
                       const char *what) {
    const mt_moe_route_params p = route_params();
    const float *u = mt_tensor_f32(l->u), *gates = mt_tensor_f32(l->gates);
    const int32_t *ids = mt_tensor_i32(l->ids);
    int moved = 0;
    for (int64_t t = 0; t < T; t++) {
        double ut[E], s[E], want_g[K];
        int32_t want[K], plain[K];
        for (int e = 0; e < E; e++) ut[e] = u[t * E + e];
        ref_scores(s, ut, E, MT_MOE_SOFTMAX);
        ref_select(want, s, bias, &p);
        ref_select(plain, s, NULL, &p);
        ref_gates(want_g, s, want, &p);
        bool differs = false;
        for (int j = 0; j < K; j++) {
            MT_CHECK(ids[t * K + j] == want[j], "%s: token %lld slot %d: expert %d, the top-k "
                     "of scores + bias %d", what, (long long)t, j, ids[t * K + j], want[j]);
            MT_CHECK_CLOSE(gates[t * K + j], want_g[j], 1e-6, "%s: token %lld slot %d: the "
                           "gate (of the unbiased scores)", what, (long long)t, j);
            differs |= want[j] != plain[j];
            counts[ids[t * K + j]]++;
        }
        moved += differs;
    }
    return moved;
}

/* Inputs of step `step`, microbatch m: x and r from the counter-based RNG. */
static void fill(const layer_graph *l, int step, int m) {
    float *x = mt_tensor_f32(l->x), *r = mt_tensor_f32(l->r);
    const uint64_t key = (uint64_t)(step * MICRO + m);
    for (int64_t i = 0; i < T * D; i++) x[i] = (float)mt_rng_normal(11, key, (uint64_t)i);
    for (int64_t i = 0; i < T * O; i++) r[i] = (float)mt_rng_normal(12, key, (uint64_t)i);
}

MT_TEST(bias_trajectory_against_float64) {
    const float gamma = 0.02f;
    layer_graph l;
    build(&l);
    MT_CHECK(l.loss, "building: %s", mt_graph_errmsg(l.g));
    MT_CHECK_OK(mt_graph_compile(l.g, l.loss, &(mt_compile_opts){.seed = 3}));
    MT_CHECK(!mt_tensor_grad(l.bias), "the router's bias has a gradient");
    mt_optim_config oc = mt_optim_defaults();
    oc.lr = 0.05f, oc.weight_decay = 0.5f;   /* a decay would move a bias the step forgot */
    mt_optim *opt;
    MT_CHECK_OK(mt_optim_create(l.g, &oc, &opt));
    mt__moe_load ld = {0};
    double want[E] = {0};
    int moved = 0;
    for (int step = 0; step < STEPS; step++) {
        float bias[E];
        memcpy(bias, mt_tensor_f32(l.bias), sizeof bias);
        int64_t counts[E] = {0};
        char what[64];
        for (int m = 0; m < MICRO; m++) {
            fill(&l, step, m);
            MT_CHECK_OK(mt_graph_forward(l.g));
            snprintf(what, sizeof what, "step %d microbatch %d", step + 1, m);
            moved += check_route(&l, bias, counts, what);
            MT_CHECK_OK(mt__moe_load_add(&ld, l.g));
            MT_CHECK_OK(mt_graph_backward(l.g));
        }
        double vio, aux;
        MT_CHECK_OK(mt__moe_load_maxvio(&ld, NULL, &vio, &aux));
        MT_CHECK_OK(mt_optim_step(opt, NULL));
        MT_CHECK_OK(mt__moe_load_bias(&ld, l.g, NULL, gamma));
        /* the float64 step: counts of both microbatches, signs, centred */
        double mean = 0, mx = 0, sign[E], centre = 0;
        for (int e = 0; e < E; e++) mean += (double)counts[e] / E;
        for (int e = 0; e < E; e++) {
            mx = counts[e] > mx ? (double)counts[e] : mx;
            sign[e] = counts[e] < mean ? 1.0 : counts[e] > mean ? -1.0 : 0.0;
            centre += sign[e] / E;
        }
        MT_CHECK_CLOSE(mean, (double)(MICRO * T * K) / E, 0, "step %d: Σ counts / E", step + 1);
        MT_CHECK(vio == (mx - mean) / mean, "step %d: MaxVio %.17g, the float64 one %.17g",
                 step + 1, vio, (mx - mean) / mean);
        const float *got = mt_tensor_f32(l.bias);
        double sum = 0;
        for (int e = 0; e < E; e++) {
            want[e] += (double)gamma * (sign[e] - centre);
            MT_CHECK(fabs(got[e] - want[e]) <= 1e-6, "step %d: bias[%d] %.9g, the float64 "
                     "trajectory %.9g (counts %lld of mean %g)", step + 1, e, (double)got[e],
                     want[e], (long long)counts[e], mean);
            sum += got[e];
        }
        MT_CHECK(fabs(sum) <= 1e-6, "step %d: Σ bias %.3g, not 0 (centred)", step + 1, sum);
    }
    MT_CHECK(moved > 0, "the bias never changed a token's experts: the test moves nothing");
    mt__moe_load_free(&ld);
    mt_optim_free(opt);
    mt_graph_free(l.g);
}

/* γ 0 and a graph without a bias leave everything as it was. */
MT_TEST(bias_step_without_gamma_or_bias_does_nothing) {
    layer_graph l;
    build(&l);
    MT_CHECK_OK(mt_graph_compile(l.g, l.loss, &(mt_compile_opts){.seed = 3}));
    mt__moe_load ld = {0};
    fill(&l, 0, 0);
    MT_CHECK_OK(mt_graph_forward(l.g));
    MT_CHECK_OK(mt__moe_load_add(&ld, l.g));
    double vio, aux;
    MT_CHECK_OK(mt__moe_load_maxvio(&ld, NULL, &vio, &aux));
    MT_CHECK_OK(mt__moe_load_bias(&ld, l.g, NULL, 0.0f));
    for (int e = 0; e < E; e++)
        MT_CHECK(mt_tensor_f32(l.bias)[e] == 0.0f, "γ 0 moved bias[%d]", e);
    mt__moe_load_free(&ld);
    mt_graph_free(l.g);
}

MT_TEST(bias_of_wrong_shape_refused) {
    mt_graph *g = mt_graph_create();
    mt_tensor *u = mt_input(g, "u", MT_F32, 2, (int64_t[]){T, E});
    mt_tensor *b = mt_param(g, "b", 1, (int64_t[]){E + 1}, (mt_init){MT_INIT_ZEROS, 0.0f});
    MT_CHECK(!mt_moe_route(g, u, b, &ROUTER), "a bias of %d for %d experts was accepted",
             E + 1, E);
    MT_CHECK(strstr(mt_graph_errmsg(g), "bias 'b'"), "message: %s", mt_graph_errmsg(g));
    mt_graph_free(g);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
