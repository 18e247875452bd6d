/*
 * test_moe_layer.c — the gradients of the MoE kernels (src/ops/moe.h)
 * against central finite differences of tests/moe_ref.h's float64
 * reference, the routing held fixed (../shared/MOE.md §7.7):
 *
 *  - the router alone: d(Σ gates ⊙ r)/d logits, every score kind;
 *  - the aux loss and the z-loss alone, d/d logits;
 *  - a whole layer with linear experts, loss = Σ out ⊙ r + aux + z, run
 *    through route, sort, dispatch, the grouped product, combine and their
 *    backwards: d/dx, d/dW_g (the router's weight) and d/dW_e (every
 *    expert's), against the reference that applies each token's experts
 *    directly. The router's product x·W_g and its transpose are the dense
 *    matmul's, done here in double.
 */
#include "meshtrain.h"
#include "harness.h"
#include "moe_ref.h"

#include <string.h>

#define EPS 1e-6
#define TOL 2e-4

/* ======================================================================== */
/* The layer through the kernels, and its reference                          */
/* ======================================================================== */

typedef struct {
    mt_moe_route_params p;
    int64_t             D, O, S;
    double              alpha, beta;
    bool                bias;
    double              cf;   /* a capacity factor (0: dropless), earliest pairs kept */
} layer_case;

/* The pairs past capacity C in each of S sequences, by hand: an expert's
 * (t, j) pairs in order, the (C+1)-th on dropped (-1). */
static void drops_by_hand(int32_t *kept, const int32_t *ids, int64_t T, int64_t k, int64_t E,
                          int64_t S, int64_t C) {
    for (int64_t s = 0; s < S; s++) {
        int64_t seen[64] = {0};
        for (int64_t r = s * (T / S) * k; r < (s + 1) * (T / S) * k; r++)
            kept[r] = seen[ids[r]]++ < C ? ids[r] : -1;
    }
    (void)E;
}

/* The analytic gradient through the kernels of the layer at x (T,D),
 * wg (D,E), we (E,D,O) (floats): dx, dwg, dwe, with ids (T,k) the routing
 * chosen and r (T,O) the cotangent; with a capacity, kept (T,k) the ids
 * mt_moe_drop left (-1 dropped), which the sort, dispatch, products and
 * combine route. */
static void kernel_grads(const layer_case *L, const float *x, const float *wg, const float *we,
                         const float *bias, const float *r, int32_t *ids, int32_t *kept,
                         float *dx, float *dwg, float *dwe) {
    const mt_moe_route_params *p = &L->p;
    const int64_t T = p->T, E = p->E, k = p->k, N = T * k, D = L->D, O = L->O;
    float *u = malloc((size_t)(T * E) * sizeof *u), *s = malloc((size_t)(T * E) * sizeof *s);
    float *g = malloc((size_t)N * sizeof *g), *xs = malloc((size_t)(N * D) * sizeof *xs);
    float *ys = malloc((size_t)(N * O) * sizeof *ys), *dys = malloc((size_t)(N * O) * sizeof *ys);
    float *dxs = malloc((size_t)(N * D) * sizeof *dxs), *dg = malloc((size_t)N * sizeof *dg);
    float *ds = malloc((size_t)(T * E) * sizeof *ds), *du = malloc((size_t)(T * E) * sizeof *du);
    int32_t *order = malloc((size_t)N * sizeof *order), *pos = malloc((size_t)N * sizeof *pos);
    int32_t *c = malloc((size_t)E * sizeof *c), *cs = malloc((size_t)(L->S * E) * sizeof *cs);
    for (int64_t t = 0; t < T; t++)   /* the dense matmul's part, in double */
        for (int64_t i = 0; i < E; i++) {
            double v = 0;
            for (int64_t d = 0; d < D; d++) v += (double)x[t * D + d] * wg[d * E + i];
            u[t * E + i] = (float)v;
        }
    mt_moe_route_fwd(p, u, bias, s, ids, g);
    memcpy(kept, ids, (size_t)N * sizeof *kept);
    if (L->cf > 0) {
        const int64_t C = mt_moe_capacity_rows(T / L->S, k, E, L->cf);
        int32_t *scratch = malloc((size_t)(E * C + (T / L->S) * k + E) * sizeof *scratch);
        mt_moe_drop(kept, ids, NULL, L->S, T / L->S, k, E, C, MT_MOE_DROP_POSITION, scratch);
        free(scratch);
    }
    mt_moe_sort(order, pos, c, kept, T, k, E);
    mt_moe_dispatch_fwd(xs, x, order, N, k, D);
    mt_moe_gemm_fwd(ys, xs, we, c, E, D, O, false);
    /* backward of Σ out ⊙ r: dout = r */
    mt_moe_combine_bwd_dy(dys, r, g, order, N, k, O, false);
    mt_moe_combine_bwd_dgates(dg, r, ys, pos, T, k, O, false);
    mt_moe_gemm_bwd(dxs, dwe, dys, xs, we, c, E, D, O, false);
    mt_moe_dispatch_bwd(dx, dxs, pos, T, k, D, false);
    mt_moe_counts(cs, ids, L->S, T / L->S, k, E);
    mt_moe_aux_loss(p, s, cs, L->S, T / L->S, T / L->S, L->alpha, ds, false);
    mt_moe_route_bwd(p, du, dg, ds, s, ids, false);
    mt_moe_z_loss(u, T, E, L->beta, du, true);
    for (int64_t t = 0; t < T; t++)   /* dx += du · wgᵀ */
        for (int64_t d = 0; d < D; d++) {
            double v = 0;
            for (int64_t i = 0; i < E; i++) v += (double)du[t * E + i] * wg[d * E + i];
            dx[t * D + d] += (float)v;
        }
    for (int64_t d = 0; d < D; d++)   /* dwg = xᵀ · du */
        for (int64_t i = 0; i < E; i++) {
            double v = 0;
            for (int64_t t = 0; t < T; t++) v += (double)x[t * D + d] * du[t * E + i];
            dwg[d * E + i] = (float)v;
        }
    free(u), free(s), free(g), free(xs), free(ys), free(dys), free(dxs), free(dg), free(ds);
    free(du), free(order), free(pos), free(c), free(cs);
}

/* The reference's loss at v = [x | wg | we] (double). */
static double ref_loss_at(const ref_layer *R, const double *v) {
    const int64_t T = R->p.T, E = R->p.E, D = R->D;
    return ref_layer_loss(R, v, v + T * D, v + T * D + D * E);
}

static void check_layer(const char *what, layer_case L) {
    const mt_moe_route_params *p = &L.p;
    const int64_t T = p->T, E = p->E, k = p->k, D = L.D, O = L.O;
    const int64_t nx = T * D, nwg = D * E, nwe = E * D * O, n = nx + nwg + nwe;
    MT_CHECK_OK(mt_moe_route_check(p));
    uint64_t st = 1234 + (uint64_t)(E * k);
    float *v = malloc((size_t)n * sizeof *v), *grad = malloc((size_t)n * sizeof *grad);
    float *r = malloc((size_t)(T * O) * sizeof *r), *bias = malloc((size_t)E * sizeof *bias);
    double *vd = malloc((size_t)n * sizeof *vd), *rd = malloc((size_t)(T * O) * sizeof *rd);
    int32_t *ids = malloc((size_t)(T * k) * sizeof *ids);
    int32_t *kept = malloc((size_t)(T * k) * sizeof *kept), *mine = NULL;
    for (int64_t i = 0; i < n; i++) v[i] = (float)ref_rand(&st);
    for (int64_t i = 0; i < T * O; i++) rd[i] = r[i] = (float)ref_rand(&st);
    for (int64_t i = 0; i < E; i++) bias[i] = (float)(0.2 * ref_rand(&st));
    kernel_grads(&L, v, v + nx, v + nx + nwg, L.bias ? bias : NULL, r, ids, kept, grad,
                 grad + nx, grad + nx + nwg);
    if (L.cf > 0) {   /* the drops by hand, for the reference; mt_moe_drop's must agree */
        mine = malloc((size_t)(T * k) * sizeof *mine);
        drops_by_hand(mine, ids, T, k, E, L.S, mt_moe_capacity_rows(T / L.S, k, E, L.cf));
        int64_t n_drop = 0;
        for (int64_t i = 0; i < T * k; i++) n_drop += mine[i] < 0;
        MT_CHECK(n_drop > 0 && !memcmp(mine, kept, (size_t)(T * k) * sizeof *kept),
                 "%s: %lld pairs dropped by hand; mt_moe_drop's set differs (or none dropped: "
                 "the case tests nothing)", what, (long long)n_drop);
    }
    const ref_layer R = {.p = *p, .D = D, .O = O, .S = L.S, .alpha = L.alpha, .beta = L.beta,
                         .ids = ids, .kept = mine, .r = rd};
    for (int64_t i = 0; i < n; i++) vd[i] = v[i];
    for (int64_t i = 0; i < n; i++) {
        const double keep = vd[i];
        vd[i] = keep + EPS;
        const double lp = ref_loss_at(&R, vd);
        vd[i] = keep - EPS;
        const double lm = ref_loss_at(&R, vd);
        vd[i] = keep;
        const char *part = i < nx ? "x" : i < nx + nwg ? "W_g" : "W_e";
        const int64_t at = i < nx ? i : i < nx + nwg ? i - nx : i - nx - nwg;
        MT_CHECK_CLOSE(grad[i], (lp - lm) / (2 * EPS), TOL, "%s: d loss / d %s[%lld]", what,
                       part, (long long)at);
    }
    free(v), free(grad), free(r), free(bias), free(vd), free(rd), free(ids), free(kept);
    free(mine);
}

MT_TEST(layer_grad_softmax) {
    layer_case L = {.p = {.T = 8, .E = 4, .k = 2, .renorm = true, .route_scale = 1.0f},
                    .D = 5, .O = 3, .S = 2, .alpha = 0.1, .beta = 0.05};
    check_layer("softmax renormalised, k=2, aux per sequence, z", L);
    L.p.renorm = false, L.p.k = 1, L.S = 1;
    check_layer("softmax top-1 of the full softmax, batch-wise aux", L);
}

/* capacity 0.5: an expert takes ⌈(4·2/4)·0.5⌉ = 1 pair of each 4-token
 * sequence, the rest dropped; their outputs 0 and their gates no gradient
 * from out, the aux loss still the router's */
MT_TEST(layer_grad_capacity) {
    layer_case L = {.p = {.T = 8, .E = 4, .k = 2, .renorm = true, .route_scale = 1.0f},
                    .D = 5, .O = 3, .S = 2, .alpha = 0.1, .beta = 0.05, .cf = 0.5};
    check_layer("capacity 0.5, earliest kept, per sequence", L);
    L.cf = 1.0, L.S = 1;
    check_layer("capacity 1.0 over one sequence of 8", L);
}

MT_TEST(layer_grad_sigmoid_groups) {
    layer_case L = {.p = {.T = 8, .E = 8, .k = 4, .score = MT_MOE_SIGMOID, .renorm = true,
                          .groups = 4, .groups_kept = 2, .route_scale = 2.5f},
                    .D = 4, .O = 3, .S = 2, .alpha = 0.1, .beta = 0.05, .bias = true};
    check_layer("sigmoid, bias, 4 groups keep 2, scale 2.5", L);
    L.p.renorm = false, L.p.groups = 0, L.p.groups_kept = 0, L.p.k = 3;
    check_layer("sigmoid not renormalised, k=3", L);
}

/* ======================================================================== */
/* The router and the balancing terms alone, d/d logits                      */
/* ======================================================================== */

typedef struct {
    mt_moe_route_params p;
    const int32_t      *ids;
    const double       *r;      /* (T,k): the gates' cotangent */
    int                 term;   /* 0 gates, 1 aux, 2 z */
    int64_t             S;
} term_case;

static double term_loss(const term_case *c, const double *u) {
    const int64_t T = c->p.T, E = c->p.E, k = c->p.k;
    if (c->term == 1) return ref_aux(&c->p, u, c->ids, c->S, T / c->S, 0.3);
    if (c->term == 2) return ref_z(u, T, E, 0.7);
    double loss = 0, s[64], g[64];
    for (int64_t t = 0; t < T; t++) {
        ref_scores(s, u + t * E, E, c->p.score);
        ref_gates(g, s, c->ids + t * k, &c->p);
        for (int64_t j = 0; j < k; j++) loss += g[j] * c->r[t * k + j];
    }
    return loss;
}

static void check_term(const char *what, mt_moe_route_params p, int term, int64_t S) {
    const int64_t T = p.T, E = p.E, k = p.k;
    uint64_t st = 99 + (uint64_t)term;
    float u[16 * 8], s[16 * 8], g[16 * 8], r[16 * 8], du[16 * 8], ds[16 * 8];
    double ud[16 * 8], rd[16 * 8];
    int32_t ids[16 * 8], c[16 * 8];
    for (int64_t i = 0; i < T * E; i++) ud[i] = u[i] = (float)(2 * ref_rand(&st));
    for (int64_t i = 0; i < T * k; i++) rd[i] = r[i] = (float)ref_rand(&st);
    mt_moe_route_fwd(&p, u, NULL, s, ids, g);
    if (term == 0) mt_moe_route_bwd(&p, du, r, NULL, s, ids, false);
    if (term == 1) {
        mt_moe_counts(c, ids, S, T / S, k, E);
        mt_moe_aux_loss(&p, s, c, S, T / S, T / S, 0.3, ds, false);
        memset(g, 0, sizeof g);   /* no gradient through the gates */
        mt_moe_route_bwd(&p, du, g, ds, s, ids, false);
    }
    if (term == 2) mt_moe_z_loss(u, T, E, 0.7, du, false);
    const term_case tc = {.p = p, .ids = ids, .r = rd, .term = term, .S = S};
    for (int64_t i = 0; i < T * E; i++) {
        const double keep = ud[i];
        ud[i] = keep + EPS;
        const double lp = term_loss(&tc, ud);
        ud[i] = keep - EPS;
        const double lm = term_loss(&tc, ud);
        ud[i] = keep;
        MT_CHECK_CLOSE(du[i], (lp - lm) / (2 * EPS), TOL, "%s: d/d logits[%lld,%lld]", what,
                       (long long)(i / E), (long long)(i % E));
    }
}

MT_TEST(router_grad) {
    mt_moe_route_params p = {.T = 16, .E = 8, .k = 3, .renorm = true, .route_scale = 1.0f};
    check_term("softmax renormalised gates", p, 0, 1);
    p.renorm = false;
    check_term("softmax gates", p, 0, 1);
    p.score = MT_MOE_SIGMOID, p.renorm = true, p.route_scale = 2.5f;
    check_term("sigmoid renormalised gates", p, 0, 1);
    p.renorm = false;
    check_term("sigmoid gates", p, 0, 1);
}

MT_TEST(aux_and_z_grad) {
    mt_moe_route_params p = {.T = 16, .E = 8, .k = 2, .route_scale = 1.0f};
    check_term("aux loss, softmax, batch-wise", p, 1, 1);
    check_term("aux loss, softmax, 4 sequences", p, 1, 4);
    p.score = MT_MOE_SIGMOID;
    check_term("aux loss, sigmoid, batch-wise", p, 1, 1);
    check_term("aux loss, sigmoid, 2 sequences", p, 1, 2);
    check_term("z-loss", p, 2, 1);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
