/*
 * test_moe_graph.c — the MoE graph ops (meshtrain/graph_moe.h) through a
 * compiled graph:
 *
 *  - a whole layer with linear experts, loss = Σ out ⊙ r + the router loss
 *    (aux + z), built from mt_moe_route, _gates, _dispatch, _experts,
 *    _combine and _router_loss on x (S,L,D), the router's logits x · W_g:
 *    its loss against tests/moe_ref.h's float64 reference and its gradients
 *    d/dx, d/dW_g, d/dW_e against central finite differences of it, the
 *    routing held at the ids the graph chose (softmax and sigmoid routers,
 *    renormalised or not, a route scale, group-limited routing);
 *  - the same layer partitioned over data=2 (the sequences split), with the
 *    expert weights replicated or split over data on their expert dim (the
 *    rule gathers them): the loss and every gradient equal to one device's;
 *  - the ids are int32 and take no gradient; bad shapes and settings are
 *    refused naming the operand.
 */
#include "meshtrain.h"
#include "harness.h"
#include "part_helpers.h"
#include "moe_ref.h"

#include <string.h>

enum { S = 2, L = 6, T = S * L, D = 5, E = 4, O = 3 };

typedef struct {
    const char   *name;
    mt_moe_router r;
    float         alpha, beta;
} moe_case;

static const moe_case CASES[] = {
    {"softmax top-2", {.k = 2, .route_scale = 1.0f}, 0.1f, 0.01f},
    {"softmax top-2 renorm", {.k = 2, .renorm = true, .route_scale = 1.0f}, 0.3f, 0.0f},
    {"sigmoid top-2 renorm x2.5", {.k = 2, .sigmoid = true, .renorm = true,
                                   .route_scale = 2.5f}, 0.2f, 0.05f},
    {"sigmoid groups 2 of 2 kept 1", {.k = 2, .sigmoid = true, .renorm = true, .groups = 2,
                                      .groups_kept = 1, .route_scale = 1.0f}, 0.1f, 0.02f},
    {"softmax top-1", {.k = 1, .route_scale = 1.0f}, 0.1f, 0.01f},
};

static const char *const PARAMS[3] = {"x", "wg", "we"};
static const int64_t SHAPES[3][3] = {{S, L, D}, {D, E, 0}, {E, D, O}};
static const int NDIM[3] = {3, 2, 3};

/* The layer on g; *ids_out the router's ids. */
static mt_tensor *layer(mt_graph *g, const moe_case *c, mt_tensor **ids_out) {
    mt_tensor *p[3];
    for (int k = 0; k < 3; k++)
        p[k] = mt_param(g, PARAMS[k], NDIM[k], SHAPES[k], (mt_init){MT_INIT_NORMAL, 1.0f});
    mt_tensor *r = mt_input(g, "r", MT_F32, 3, (int64_t[]){S, L, O});
    mt_tensor *u = mt_matmul(g, p[0], p[1], false, false);
    mt_tensor *ids = mt_moe_route(g, u, NULL, &c->r);
    mt_tensor *gates = mt_moe_gates(g, u, ids, &c->r);
    mt_tensor *xs = mt_moe_dispatch(g, p[0], ids, E);
    mt_tensor *ys = mt_moe_experts(g, xs, p[2], ids);
    mt_tensor *out = mt_moe_combine(g, ys, gates, ids, E);
    mt_tensor *aux = mt_moe_router_loss(g, u, ids, &c->r, c->alpha, c->beta);
    *ids_out = ids;
    return mt_add(g, mt_sum(g, mt_mul(g, out, r)), aux);
}

/* The values of parameter k's element i and of r's. */
static float value(int k, int64_t i) { return (float)(0.7 * mt_rng_normal(5, (uint64_t)k, (uint64_t)i)); }
static float rvalue(int64_t i) { return (float)mt_rng_normal(6, 0, (uint64_t)i); }

static int64_t numel3(int k) { return SHAPES[k][0] * SHAPES[k][1] * (NDIM[k] == 3 ? SHAPES[k][2] : 1); }

static mt_moe_route_params route_params(const moe_case *c) {
    return (mt_moe_route_params){.T = T, .E = E, .k = c->r.k, .renorm = c->r.renorm,
                                 .score = c->r.sigmoid ? MT_MOE_SIGMOID : MT_MOE_SOFTMAX,
                                 .groups = c->r.groups, .groups_kept = c->r.groups_kept,
                                 .route_scale = c->r.route_scale};
}

static void check_layer(const moe_case *c) {
    mt_graph *g = mt_graph_create();
    mt_tensor *ids;
    mt_tensor *loss = layer(g, c, &ids);
    MT_CHECK(loss, "%s: building failed: %s", c->name, mt_graph_errmsg(g));
    MT_CHECK(mt_tensor_dtype(ids) == MT_I32, "%s: the ids are not int32", c->name);
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1}));
    double *v[3];
    for (int k = 0; k < 3; k++) {
        float *f = mt_tensor_f32(mt_graph_find(g, PARAMS[k]));
        v[k] = malloc((size_t)numel3(k) * sizeof *v[k]);
        for (int64_t i = 0; i < numel3(k); i++) v[k][i] = f[i] = value(k, i);
    }
    double rd[T * O];
    float *rf = mt_tensor_f32(mt_graph_find(g, "r"));
    for (int64_t i = 0; i < T * O; i++) rd[i] = rf[i] = rvalue(i);
    MT_CHECK_OK(mt_graph_forward(g));
    int32_t held[T * 2];
    memcpy(held, mt_tensor_i32(ids), sizeof(int32_t) * (size_t)(T * c->r.k));
    MT_CHECK(!mt_tensor_grad(ids), "%s: the int32 ids have a gradient", c->name);
    MT_CHECK_OK(mt_graph_backward(g));

    /* the reference's own selection picks the same experts */
    const mt_moe_route_params p = route_params(c);
    ref_layer ref = {.p = p, .D = D, .O = O, .S = S, .alpha = c->alpha, .beta = c->beta,
                     .ids = held, .r = rd};
    for (int64_t t = 0; t < T; t++) {
        double u[E], s[E];
        int32_t want[E];
        for (int64_t e = 0; e < E; e++) {
            u[e] = 0;
            for (int64_t d = 0; d < D; d++) u[e] += v[0][t * D + d] * v[1][d * E + e];
        }
        ref_scores(s, u, E, p.score);
        ref_select(want, s, NULL, &p);
        for (int j = 0; j < c->r.k; j++)
            MT_CHECK(held[t * c->r.k + j] == want[j], "%s: token %lld slot %d: graph chose "
                     "expert %d, the reference %d", c->name, (long long)t, j,
                     held[t * c->r.k + j], want[j]);
    }
    MT_CHECK_CLOSE(mt_graph_loss(g), ref_layer_loss(&ref, v[0], v[1], v[2]), 1e-5,
                   "%s: loss", c->name);
    for (int k = 0; k < 3; k++) {
        const float *grad = mt_tensor_f32(mt_tensor_grad(mt_graph_find(g, PARAMS[k])));
        for (int64_t i = 0; i < numel3(k); i++) {
            const double keep = v[k][i], h = 1e-6;
            v[k][i] = keep + h;
            const double lp = ref_layer_loss(&ref, v[0], v[1], v[2]);
            v[k][i] = keep - h;
            const double lm = ref_layer_loss(&ref, v[0], v[1], v[2]);
            v[k][i] = keep;
            const double num = (lp - lm) / (2 * h);
            MT_CHECK(fabs(grad[i] - num) <= 2e-4 * (1 + fabs(num)), "%s: d loss / d %s[%lld]: "
                     "graph %.8g, finite differences %.8g", c->name, PARAMS[k], (long long)i,
                     grad[i], num);
        }
    }
    for (int k = 0; k < 3; k++) free(v[k]);
    mt_graph_free(g);
}

MT_TEST(moe_layer_gradients_against_float64_reference) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) check_layer(&CASES[i]);
}

/* ---- partitioned ------------------------------------------------------------ */

/* Element i of parameter k (3: r): value() and rvalue(), or with skew x's
 * first feature 5 and the router's first row +10 for experts 0 and 1, -10
 * for the rest, so that top-2 picks experts 0 and 1 for every token. */
static float part_value(bool skew, int k, int64_t i) {
    if (skew && k == 0 && i % D == 0) return 5.0f;
    if (skew && k == 1 && i < E) return i < 2 ? 10.0f : -10.0f;
    return k == 3 ? rvalue(i) : value(k, i);
}

typedef struct {
    const char *mesh;          /* NULL: one device */
    int         devices;
    const char *we_spec;       /* the expert weights' sharding */
    bool        skew;          /* every token to experts 0 and 1 (skewed) */
    const moe_case *c;
    mt_status   status;
    char        msg[512];
    float       loss;
    float       grad[2][3][S * L * D + E * D * O];
} part_case;

static mt_status part_device(mt_ctx *ctx, void *arg) {
    part_case *pc = arg;
    mt_graph *g = mt_graph_create(), *local = g;
    mt_tensor *ids, *loss = layer(g, pc->c, &ids), *lloss = loss;
    mt_status s = mt_graph_status(g);
    int64_t s0 = 0, ns = S;   /* this device's sequences */
    if (ctx) {
        const mt_mesh *mesh = mt_ctx_mesh(ctx);
        static const char *const SPEC[3] = {"data", "", NULL};
        for (int k = 0; k < 4 && s == MT_OK; k++) {
            mt_tensor *t = mt_graph_find(g, k < 3 ? PARAMS[k] : "r");
            const char *spec = k == 2 ? pc->we_spec : k == 3 ? "data" : SPEC[k];
            mt_sharding sh;
            s = mt_sharding_parse(mesh, spec, mt_tensor_ndim(t), &sh);
            if (s == MT_OK) s = mt_tensor_set_sharding(t, &sh);
        }
        mt_partition_opts po = {.mode = MT_SHARD_AUTO};
        if (s == MT_OK) s = mt_partition(g, loss, ctx, &po, &local, &lloss);
        ns = S / pc->devices, s0 = mt_ctx_device(ctx) * ns;
    }
    if (s == MT_OK) s = mt_graph_compile(local, lloss, &(mt_compile_opts){.seed = 1});
    const int dev = ctx ? mt_ctx_device(ctx) : 0;
    const bool we_split = pc->we_spec[0] != '\0';
    for (int k = 0; k < 4 && s == MT_OK; k++) {
        float *f = mt_tensor_f32(mt_graph_find(local, k < 3 ? PARAMS[k] : "r"));
        int64_t n = k == 0 ? ns * L * D : k == 3 ? ns * L * O : numel3(k), off = 0;
        if (k == 0) off = s0 * L * D;
        if (k == 3) off = s0 * L * O;
        if (k == 2 && we_split && ctx) n /= pc->devices, off = dev * n;
        for (int64_t i = 0; i < n; i++) f[i] = part_value(pc->skew, k, off + i);
    }
    return mt_test_step_grads(s, g, local, dev, PARAMS, 3, pc->grad[dev][0],
                              sizeof pc->grad[0][0] / sizeof(float), &pc->loss, pc->msg,
                              sizeof pc->msg);
}

static void part_run(part_case *pc) {
    pc->status = mt_test_run_devices(pc->mesh, pc->devices, part_device, pc, pc->msg,
                                     sizeof pc->msg);
}

/* The experts whole on data=2, or split over it (expert parallelism: the
 * rows exchanged with the experts' owners inside the products), against
 * one device; with skew every row goes to device 0's experts (the dropless
 * worst case: device 0 receives both devices' rows, device 1 none). */
static void data_parallel_equals_one_device(size_t first, size_t step, bool skew) {
    static part_case one, got;
    static const char *const WE[2] = {"", "data"};
    for (size_t ci = first; ci < sizeof CASES / sizeof CASES[0]; ci += step)
        for (int w = skew; w < 2; w++) {
            memset(&one, 0, sizeof one);
            one = (part_case){.devices = 1, .we_spec = "", .skew = skew, .c = &CASES[ci]};
            part_run(&one);
            MT_CHECK(one.status == MT_OK, "one device: %s", one.msg);
            memset(&got, 0, sizeof got);
            got = (part_case){.mesh = "data=2", .devices = 2, .we_spec = WE[w], .skew = skew,
                              .c = &CASES[ci]};
            part_run(&got);
            MT_CHECK(got.status == MT_OK, "%s, data=2, w '%s': %s", CASES[ci].name, WE[w],
                     got.msg);
            MT_CHECK_CLOSE(got.loss, one.loss, 1e-5, "%s: loss", CASES[ci].name);
            for (int dev = 0; dev < 2; dev++)
                for (int k = 0; k < 3; k++) {
                    const bool split = k == 0 || (k == 2 && w == 1);
                    const int64_t n = split ? numel3(k) / 2 : numel3(k), off = split ? dev * n : 0;
                    for (int64_t i = 0; i < n; i++)
                        MT_CHECK_CLOSE(got.grad[dev][k][i], one.grad[0][k][off + i], 1e-4,
                                       "%s, w '%s': device %d: d %s[%lld]", CASES[ci].name,
                                       WE[w], dev, PARAMS[k], (long long)(off + i));
                }
        }
}

MT_TEST(moe_layer_data_parallel_equals_one_device) { data_parallel_equals_one_device(0, 2, false); }

MT_TEST(moe_layer_expert_parallel_skewed_equals_one_device) {
    data_parallel_equals_one_device(0, 1, true);
}

/* ---- refusals ------------------------------------------------------------------ */

MT_TEST(moe_ops_refuse_bad_operands) {
    mt_graph *g = mt_graph_create();
    mt_tensor *u = mt_input(g, "u", MT_F32, 2, (int64_t[]){T, E});
    mt_moe_router r = {.k = E + 1, .route_scale = 1.0f};
    MT_CHECK(!mt_moe_route(g, u, NULL, &r), "top-%d of %d experts was accepted", E + 1, E);
    MT_CHECK(strstr(mt_graph_errmsg(g), "--moe-top-k"), "message: %s", mt_graph_errmsg(g));
    mt_graph_free(g);
    g = mt_graph_create();
    u = mt_input(g, "u", MT_F32, 2, (int64_t[]){T, E});
    mt_tensor *x = mt_input(g, "x", MT_F32, 2, (int64_t[]){T + 1, D});
    r.k = 2;
    mt_tensor *ids = mt_moe_route(g, u, NULL, &r);
    MT_CHECK(ids && mt_tensor_dtype(ids) == MT_I32, "route: %s", mt_graph_errmsg(g));
    MT_CHECK(!mt_moe_dispatch(g, x, ids, E), "dispatch of %d rows by %d rows' ids", T + 1, T);
    MT_CHECK(strstr(mt_graph_errmsg(g), "ids"), "message: %s", mt_graph_errmsg(g));
    mt_graph_free(g);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
