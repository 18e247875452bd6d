/*
 * test_moe_threads.c — the MoE ops on the kernel pool (ops/moe_par.c) give
 * the same bits on any number of threads (the grouped products cut into
 * tiles by the shapes alone, moe_gemm.c; route, gates, dispatch, combine
 * and the expert-parallel reorders split by rows or tokens):
 *
 *  - a layer of SwiGLU experts (route with a bias that leaves one expert
 *    no rows, gates, dispatch, the three grouped products, combine, the
 *    router loss) on one device at 1, 2, 3 and 4 kernel threads: its ids,
 *    gates and output after the forward and every gradient after the
 *    backward equal the 1-thread run's bit for bit;
 *  - the same layer on data=2 with the experts split over data (expert
 *    parallelism: the exchanges around the local products) at 3 kernel
 *    threads a device against 1, every gradient bit for bit.
 * The logits are a parameter, so that no dense product or reduction (whose
 * splits are not this test's) stands between the MoE ops; the loss's sum is
 * such a reduction, so the loss itself is not compared, only what the MoE
 * ops make.
 */
#include "meshtrain.h"
#include "harness.h"
#include "part_helpers.h"
#include "ops/moe.h"

#include <stdlib.h>
#include <string.h>

/* T tokens of width C, E experts of F, top-2: N = 3072 pairs, about 1000
 * for each of the three experts that get rows (2 tiles of MT_MOE_TILE_ROWS),
 * C past one tile of the weight gradient's MT_MOE_TILE_COLS. */
enum { T = 1536, C = 264, F = 40, E = 4, K = 2, NP = 6 };

static const char *const PARAMS[NP] = {"x", "u", "w1", "w3", "w2", "bias"};
static const int NDIM[NP] = {2, 2, 3, 3, 3, 1};
static const int64_t SHAPES[NP][3] = {{T, C}, {T, E}, {E, C, F}, {E, C, F}, {E, F, C}, {E}};
/* expert 3 gets no rows (its bias), the others some of everything */
static const float BIAS[E] = {0.1f, 0.0f, 0.05f, -10.0f};

static int64_t numel(int p) {
    int64_t n = 1;
    for (int d = 0; d < NDIM[p]; d++) n *= SHAPES[p][d];
    return n;
}

typedef struct {
    mt_tensor *ids, *gates, *out;
} layer_out;

static mt_tensor *layer(mt_graph *g, layer_out *lo) {
    mt_tensor *p[NP];
    for (int k = 0; k < NP; k++)
        p[k] = mt_param(g, PARAMS[k], NDIM[k], SHAPES[k], (mt_init){MT_INIT_NORMAL, 0.3f});
    mt_tensor *r = mt_input(g, "r", MT_F32, 2, (int64_t[]){T, C});
    const mt_moe_router rt = {.k = K, .renorm = true, .route_scale = 1.0f};
    lo->ids = mt_moe_route(g, p[1], p[5], &rt);
    lo->gates = mt_moe_gates(g, p[1], lo->ids, &rt);
    mt_tensor *xs = mt_moe_dispatch(g, p[0], lo->ids, E);
    mt_tensor *mid = mt_swiglu(g, mt_moe_experts(g, xs, p[2], lo->ids),
                               mt_moe_experts(g, xs, p[3], lo->ids));
    mt_tensor *ys = mt_moe_experts(g, mid, p[4], lo->ids);
    lo->out = mt_moe_combine(g, ys, lo->gates, lo->ids, E);
    mt_tensor *aux = mt_moe_router_loss(g, p[1], lo->ids, &rt, 0.1f, 0.01f);
    return mt_add(g, mt_sum(g, mt_mul(g, lo->out, r)), aux);
}

/* Element i of parameter k (NP: r). */
static float value(int k, int64_t i) {
    if (k == 5) return BIAS[i];
    return (float)(0.5 * mt_rng_normal(21, (uint64_t)k, (uint64_t)i));
}

/* What a run keeps: every gradient, and one device's forward results. */
typedef struct {
    float   *grad[2][NP];
    int32_t *ids;
    float   *gates, *out;
} run_out;

static void run_alloc(run_out *o) {
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < NP; k++) o->grad[d][k] = calloc((size_t)numel(k), sizeof(float));
    o->ids = calloc(T * K, sizeof *o->ids);
    o->gates = calloc(T * K, sizeof *o->gates);
    o->out = calloc(T * C, sizeof *o->out);
}

static void run_free(run_out *o) {
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < NP; k++) free(o->grad[d][k]);
    free(o->ids), free(o->gates), free(o->out);
}

typedef struct {
    run_out   *o;
    int        devices;
    char       msg[512];
} run_case;

/* One device's run: the layer (split over data on a mesh: the rows, and
 * the experts of w1, w3, w2), its values, a forward and a backward. */
static mt_status device(mt_ctx *ctx, void *arg) {
    run_case *rc = arg;
    mt_graph *g = mt_graph_create(), *local = g;
    layer_out lo;
    mt_tensor *loss = layer(g, &lo), *lloss = loss;
    mt_status s = mt_graph_status(g);
    const int dev = ctx ? mt_ctx_device(ctx) : 0;
    if (ctx) {
        for (int k = 0; k <= NP && s == MT_OK; k++) {
            mt_tensor *t = mt_graph_find(g, k < NP ? PARAMS[k] : "r");
            mt_sharding sh;
            s = mt_sharding_parse(mt_ctx_mesh(ctx), k == 5 ? "" : "data", mt_tensor_ndim(t),
                                  &sh);
            if (s == MT_OK) s = mt_tensor_set_sharding(t, &sh);
        }
        mt_partition_opts po = {.mode = MT_SHARD_AUTO};
        if (s == MT_OK) s = mt_partition(g, loss, ctx, &po, &local, &lloss);
    }
    if (s == MT_OK) s = mt_graph_compile(local, lloss, &(mt_compile_opts){.seed = 1});
    for (int k = 0; k <= NP && s == MT_OK; k++) {   /* this device's block of each */
        mt_tensor *t = mt_graph_find(local, k < NP ? PARAMS[k] : "r");
        const int64_t n = mt_tensor_numel(t), off = k == 5 ? 0 : dev * n;
        float *f = mt_tensor_f32(t);
        for (int64_t i = 0; i < n; i++)
            f[i] = k < NP ? value(k, off + i) : (float)mt_rng_normal(22, 0, (uint64_t)(off + i));
    }
    if (s == MT_OK) s = mt_graph_forward(local);
    if (s == MT_OK && !ctx) {   /* one device: the forward's results, before the backward */
        memcpy(rc->o->ids, mt_tensor_i32(lo.ids), sizeof(int32_t) * T * K);
        memcpy(rc->o->gates, mt_tensor_f32(lo.gates), sizeof(float) * T * K);
        memcpy(rc->o->out, mt_tensor_f32(lo.out), sizeof(float) * T * C);
    }
    if (s == MT_OK) s = mt_graph_backward(local);
    for (int k = 0; k < NP - 1 && s == MT_OK; k++) {   /* the bias has no gradient */
        mt_tensor *t = mt_graph_find(local, PARAMS[k]);
        memcpy(rc->o->grad[dev][k], mt_tensor_f32(mt_tensor_grad(t)),
               (size_t)mt_tensor_numel(t) * sizeof(float));
    }
    if (s != MT_OK && dev == 0) snprintf(rc->msg, sizeof rc->msg, "%s", mt_errmsg());
    if (local != g) mt_graph_free(local);
    mt_graph_free(g);
    return s;
}

/* Whether n floats (or int32s) are equal bit for bit; the first difference
 * named. */
static void same_bits(const void *a, const void *b, int64_t n, const char *what, int threads) {
    const uint32_t *x = a, *y = b;
    for (int64_t i = 0; i < n; i++)
        if (x[i] != y[i]) {
            float fx, fy;
            memcpy(&fx, &x[i], 4), memcpy(&fy, &y[i], 4);
            MT_CHECK(false, "%d threads: %s[%lld] %.9g (0x%08x), 1 thread's %.9g (0x%08x)",
                     threads, what, (long long)i, (double)fx, x[i], (double)fy, y[i]);
        }
}

MT_TEST(moe_layer_same_bits_on_any_threads) {
    run_out one, got;
    run_alloc(&one), run_alloc(&got);
    for (int threads = 1; threads <= 4; threads++) {
        run_out *o = threads == 1 ? &one : &got;
        mt_set_num_threads(threads);
        run_case rc = {.o = o, .devices = 1};
        MT_CHECK_OK(device(NULL, &rc));
        if (threads == 1) continue;
        same_bits(got.ids, one.ids, T * K, "ids", threads);
        same_bits(got.gates, one.gates, T * K, "gates", threads);
        same_bits(got.out, one.out, T * C, "out", threads);
        for (int k = 0; k < NP - 1; k++) same_bits(got.grad[0][k], one.grad[0][k], numel(k),
                                                   PARAMS[k], threads);
    }
    mt_set_num_threads(1);
    /* the test means something only if expert 3 got no row and the others
     * more than a tile */
    int rows[E] = {0};
    for (int i = 0; i < T * K; i++) rows[one.ids[i]]++;
    MT_CHECK(rows[3] == 0, "expert 3 got %d rows; its bias should leave it none", rows[3]);
    for (int e = 0; e < 3; e++)
        MT_CHECK(rows[e] > MT_MOE_TILE_ROWS, "expert %d got %d rows, not past a tile", e,
                 rows[e]);
    MT_CHECK(C > MT_MOE_TILE_COLS, "C %d is one tile of the weight gradient", C);
    run_free(&one), run_free(&got);
}

MT_TEST(moe_expert_parallel_same_bits_on_any_threads) {
    run_out one, got;
    run_alloc(&one), run_alloc(&got);
    run_case a = {.o = &one, .devices = 2}, b = {.o = &got, .devices = 2};
    MT_CHECK(mt_test_run_devices_threads("data=2", 2, 1, device, &a, a.msg, sizeof a.msg) ==
             MT_OK, "data=2, 1 thread: %s", a.msg);
    MT_CHECK(mt_test_run_devices_threads("data=2", 2, 3, device, &b, b.msg, sizeof b.msg) ==
             MT_OK, "data=2, 3 threads: %s", b.msg);
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < NP - 1; k++) {
            char what[64];
            snprintf(what, sizeof what, "device %d: d %s", d, PARAMS[k]);
            same_bits(got.grad[d][k], one.grad[d][k], numel(k) / 2, what, 3);
        }
    run_free(&one), run_free(&got);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
