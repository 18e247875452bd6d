/*
 * test_f32_products.c — products kept in f32 under bf16 precision
 * (mt_graph_set_f32; a MoE router's logits, issue 42 item 1):
 *
 *  - u = x · Wᵀ built under mt_graph_set_f32, then a bf16 product and an
 *    MSE loss after it, compiled with MT_PRECISION_BF16: u equals a float64
 *    recomputation from the f32 operands to f32 accuracy (1e-6 of the sum
 *    of |terms|) and the f32 graph's u bit for bit, and so are its
 *    backward's products, dW = dUᵀ·x and dx = dU·W, against float64
 *    products of the run's own dU (which the bf16 product after u makes
 *    differ from an f32 run's); the same graph without the flag is far
 *    from those references (its operands bf16), so the test can tell;
 *  - partitioned over data=2 (x's rows split, W replicated), each device's
 *    u equals its f32 run's bit for bit and the summed dW is the f32
 *    product of both devices' dU: the flag survives mt_partition.
 * Skipped where this build has no bf16 products (no oneDNN).
 */
#include "meshtrain.h"
#include "harness.h"
#include "part_helpers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { R = 48, C = 40, E = 8, O = 24 };

static float value(int which, int64_t i) {
    return (float)mt_rng_normal(40 + (uint64_t)which, 0, (uint64_t)i);
}

/* The graph: u = x·Wᵀ (f32 if keep), y = u·W2ᵀ (bf16 under bf16), loss =
 * MSE(y, t) + MSE(u, tu) (a reader of u that is no product, so that u is
 * stored in f32, as a router's logits are: route and gates read them);
 * every leaf filled from value(). */
typedef struct {
    mt_tensor *x, *w, *w2, *t, *tu, *u, *loss;
} net;

static mt_graph *build(bool keep, net *n) {
    mt_graph *g = mt_graph_create();
    n->x = mt_param(g, "x", 2, (int64_t[]){R, C}, (mt_init){MT_INIT_ZEROS, 0});
    n->w = mt_param(g, "w", 2, (int64_t[]){E, C}, (mt_init){MT_INIT_ZEROS, 0});
    n->w2 = mt_param(g, "w2", 2, (int64_t[]){O, E}, (mt_init){MT_INIT_ZEROS, 0});
    n->t = mt_input(g, "t", MT_F32, 2, (int64_t[]){R, O});
    n->tu = mt_input(g, "tu", MT_F32, 2, (int64_t[]){R, E});
    if (keep) mt_graph_set_f32(g, true);
    n->u = mt_linear(g, n->x, n->w, NULL);
    mt_tensor_set_name(n->u, "u");
    if (keep) mt_graph_set_f32(g, false);
    n->loss = mt_add(g, mt_mse(g, mt_linear(g, n->u, n->w2, NULL), n->t, 1.0f),
                     mt_mse(g, n->u, n->tu, 1.0f));
    return g;
}

/* Fills g's leaves (the local blocks of a partitioned graph: rows r0 on
 * of x, t and tu). */
static void fill(mt_graph *g, int64_t r0) {
    static const char *const NAMES[] = {"x", "w", "w2", "t", "tu"};
    for (int k = 0; k < 5; k++) {
        mt_tensor *t = mt_graph_find(g, NAMES[k]);
        const int64_t cols = mt_tensor_dim(t, 1), off = (k == 0 || k >= 3) ? r0 * cols : 0;
        float *f = mt_tensor_f32(t);
        for (int64_t i = 0; i < mt_tensor_numel(t); i++) f[i] = value(k, off + i);
    }
    mt_graph_params_changed(g);
}

static bool available(void) {
    if (mt_precision_check(MT_PRECISION_BF16) == MT_OK) return true;
    printf("  (no bf16 products in this build: %s)\n", mt_errmsg());
    return false;
}

/* One run of the graph (keep the flag or not) at precision p: u, dU, dW,
 * dx. */
static void run_once(bool keep, mt_precision p, float *u, float *du, float *dw, float *dx) {
    net n;
    mt_graph *g = build(keep, &n);
    MT_CHECK_OK(mt_graph_compile(g, n.loss, &(mt_compile_opts){.seed = 1, .precision = p}));
    fill(g, 0);
    MT_CHECK_OK(mt_graph_forward(g));
    MT_CHECK_OK(mt_graph_backward(g));
    MT_CHECK(mt_tensor_f32(n.u) && mt_tensor_f32(mt_tensor_grad(n.u)), "u or dU is not f32");
    memcpy(u, mt_tensor_f32(n.u), sizeof(float) * R * E);
    memcpy(du, mt_tensor_f32(mt_tensor_grad(n.u)), sizeof(float) * R * E);
    memcpy(dw, mt_tensor_f32(mt_tensor_grad(n.w)), sizeof(float) * E * C);
    memcpy(dx, mt_tensor_f32(mt_tensor_grad(n.x)), sizeof(float) * R * C);
    mt_graph_free(g);
}

/* The largest |got - Σ_k a(i,k)·b(j,k)| over Σ_k |terms|, over the (I, J)
 * elements of got; a(i,k) = A[i·sa_i + k·sa_k], b likewise: a float64
 * product of the f32 operands, unrounded. */
static double worst_error(const float *got, int64_t I, int64_t J, int64_t K, const float *A,
                          int64_t sa_i, int64_t sa_k, const float *B, int64_t sb_j,
                          int64_t sb_k) {
    double worst = 0;
    for (int64_t i = 0; i < I; i++)
        for (int64_t j = 0; j < J; j++) {
            double sum = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                const double t = (double)A[i * sa_i + k * sa_k] * (double)B[j * sb_j + k * sb_k];
                sum += t, mag += fabs(t);
            }
            const double err = mag > 0 ? fabs(got[i * J + j] - sum) / mag : 0;
            if (err > worst) worst = err;
        }
    return worst;
}

/* x (R,C) and W (E,C) as fill() makes them. */
static void operands(float *x, float *w) {
    for (int64_t i = 0; i < R * C; i++) x[i] = value(0, i);
    for (int64_t i = 0; i < E * C; i++) w[i] = value(1, i);
}

/* u = x·Wᵀ, dW = dUᵀ·x, dx = dU·W of one run, each to f32 accuracy or not. */
static void errors(const float *u, const float *du, const float *dw, const float *dx,
                   double *eu, double *edw, double *edx) {
    static float x[R * C], w[E * C];
    operands(x, w);
    *eu = worst_error(u, R, E, C, x, C, 1, w, C, 1);
    *edw = worst_error(dw, E, C, R, du, 1, E, x, 1, C);
    *edx = worst_error(dx, R, C, E, du, E, 1, w, 1, C);
}

MT_TEST(f32_product_under_bf16_keeps_it_and_its_gradients_f32) {
    if (!available()) return;
    static float u[R * E], du[R * E], dw[E * C], dx[R * C], u32[R * E], du32[R * E],
        dw32[E * C], dx32[R * C], ub[R * E], dub[R * E], dwb[E * C], dxb[R * C];
    run_once(true, MT_PRECISION_BF16, u, du, dw, dx);
    run_once(true, MT_PRECISION_FP32, u32, du32, dw32, dx32);
    run_once(false, MT_PRECISION_BF16, ub, dub, dwb, dxb);
    double eu, edw, edx, bu, bdw, bdx;
    errors(u, du, dw, dx, &eu, &edw, &edx);
    errors(ub, dub, dwb, dxb, &bu, &bdw, &bdx);
    printf("  worst error over the terms: kept u %.2g dW %.2g dx %.2g; bf16 u %.2g dW %.2g "
           "dx %.2g\n", eu, edw, edx, bu, bdw, bdx);
    MT_CHECK(eu < 1e-6 && edw < 1e-6 && edx < 1e-6, "the kept products are off the float64 "
             "reference: u %g, dW %g, dx %g of their terms", eu, edw, edx);
    MT_CHECK(bu > 1e-4 && bdw > 1e-4 && bdx > 1e-4, "the bf16 products are within u %g, dW %g, "
             "dx %g of the f32 reference: the test cannot tell the precisions apart", bu, bdw,
             bdx);
    MT_CHECK(!memcmp(u, u32, sizeof u), "u under bf16 with the flag differs from f32's");
}

typedef struct {
    mt_precision p;
    float        u[2][R / 2 * E], du[2][R / 2 * E], dw[2][E * C];
    char         msg[512];
} part_case;

static mt_status part_device(mt_ctx *ctx, void *arg) {
    part_case *pc = arg;
    const int dev = mt_ctx_device(ctx);
    net n;
    mt_graph *g = build(true, &n), *local = NULL;
    mt_tensor *lloss = NULL;
    mt_sharding rows;
    mt_status s = mt_sharding_parse(mt_ctx_mesh(ctx), "data", 2, &rows);
    if (s == MT_OK) s = mt_tensor_set_sharding(n.x, &rows);
    if (s == MT_OK) s = mt_tensor_set_sharding(n.t, &rows);
    if (s == MT_OK) s = mt_tensor_set_sharding(n.tu, &rows);
    mt_partition_opts po = {.mode = MT_SHARD_AUTO};
    if (s == MT_OK) s = mt_partition(g, n.loss, ctx, &po, &local, &lloss);
    if (s == MT_OK) s = mt_graph_compile(local, lloss, &(mt_compile_opts){.seed = 1,
                                                                     .precision = pc->p});
    if (s == MT_OK) {
        fill(local, dev * (R / 2));
        s = mt_graph_forward(local);
    }
    if (s == MT_OK) s = mt_graph_backward(local);
    mt_tensor *u = s == MT_OK ? mt_graph_find(local, "u") : NULL;   /* the device's rows */
    if (s == MT_OK && (!u || !mt_tensor_f32(u) || !mt_tensor_f32(mt_tensor_grad(u))))
        s = mt_fail(MT_EINTERNAL, "the device's graph has no f32 'u' and gradient");
    if (s == MT_OK) {
        memcpy(pc->u[dev], mt_tensor_f32(u), sizeof pc->u[dev]);
        memcpy(pc->du[dev], mt_tensor_f32(mt_tensor_grad(u)), sizeof pc->du[dev]);
        memcpy(pc->dw[dev], mt_tensor_f32(mt_tensor_grad(mt_graph_find(local, "w"))),
               sizeof pc->dw[dev]);
    }
    if (s != MT_OK && !pc->msg[0]) snprintf(pc->msg, sizeof pc->msg, "%s", mt_errmsg());
    if (local) mt_graph_free(local);
    mt_graph_free(g);
    return s;
}

/* data=2: each device's u equals its f32 run's bit for bit, and the summed
 * dW (over both devices' rows) is the f32 product of the devices' dU. */
MT_TEST(f32_product_survives_partition) {
    if (!available()) return;
    static part_case bf, f32;
    bf.p = MT_PRECISION_BF16, f32.p = MT_PRECISION_FP32;
    MT_CHECK_OK(mt_test_run_devices("data=2", 2, part_device, &bf, bf.msg, sizeof bf.msg));
    MT_CHECK_OK(mt_test_run_devices("data=2", 2, part_device, &f32, f32.msg, sizeof f32.msg));
    MT_CHECK(!memcmp(bf.u, f32.u, sizeof bf.u), "a device's u under bf16 with the flag "
             "differs from its f32 run's");
    static float x[R * C], w[E * C];
    operands(x, w);
    /* dU (R,E): the devices' rows in order; dW = dUᵀ·x on each device */
    const double e = worst_error(bf.dw[0], E, C, R, &bf.du[0][0], 1, E, x, 1, C);
    MT_CHECK(e < 1e-6, "device 0's dW is off the float64 dUᵀ·x by %g of its terms", e);
    MT_CHECK(!memcmp(bf.dw[0], bf.dw[1], sizeof bf.dw[0]), "the devices' dW differ");
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
