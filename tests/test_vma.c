/*
 * test_vma.c — device variance in a device's graph (shard_map): which mesh
 * axes a value varies over, and the pvary the builders insert where an
 * invariant value (a psum's result, a replicated parameter) meets one that
 * varies, as JAX's check_vma does. Without it each device got only the
 * gradient of its own loss: a silent wrong gradient (issue 22).
 *
 * The program, on data=2 (threads), L_d = Σ (psum(x) [+ b]) ⊙ w_d, w_d
 * different on each device, so the global function is F = Σ_d L_d and
 * dF/dx_d = Σ_d' w_d' (and dF/db = Σ_d w_d for the replicated b). Each case
 * checks every device's gradient against central differences of F (the
 * whole program evaluated at perturbed values; a replicated value perturbed
 * on every device at once). Values are small integers and F is linear in
 * each perturbed value, so the differences are exact.
 *
 * Cases: w varies because it is declared so (mt_tensor_set_varying) or
 * because it comes out of a collective that makes it vary (ppermute), with
 * no declaration at all; a user's own pvary stays the only one, and a pvary
 * of what already varies is the value itself; an undeclared leaf meeting a
 * psum's result is refused, naming the node and the fix; a partitioned
 * program's types are complete (its leaves are declared), so nothing is
 * inserted there (test_partition, test_strategies hold its numbers).
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"
#include "graph/graph_impl.h"   /* counting pvary nodes */

#define N 6

#define DEV_OK(call)                                                                       \
    do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)
#define DEV_FAIL(...) return mt_fail(MT_EINTERNAL, __VA_ARGS__)

static float val(int dev, int i, int salt) {
    return (float)((dev * 5 + i * 3 + salt * 7 + 1000) % 13 - 6);
}


typedef enum {
    W_DECLARED,     /* w an input declared varying over data */
    W_PPERMUTE,     /* w = ppermute(v): varies because a collective made it so */
    W_USER_PVARY    /* the user pvaries psum(x) herself (as before: one pvary) */
} w_kind;

typedef struct {
    w_kind wk;
    bool   bias;      /* + b, a replicated parameter declared invariant */
    double err;       /* out: the largest |analytic - finite differences| */
    double scale;     /* out: the largest |finite differences| */
} vcase;

static int count_pvary(const mt_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_forward; i++) n += g->nodes[i].call.op == MT_OP_PVARY;
    return n;
}

/* F = Σ_d L_d after a forward on every device. */
static mt_status total(mt_ctx *ctx, mt_graph *g, mt_axes all, double *F) {
    DEV_OK(mt_graph_forward(g));
    float L = mt_graph_loss(g);
    DEV_OK(mt_psum(ctx, all, &L, 1));
    *F = L;
    return MT_OK;
}

/* One device's side of a finite-difference check of `t` (a parameter of n
 * elements): each element perturbed on one device at a time, or, for a
 * replicated t, on every device at once. */
static mt_status check_grad(mt_ctx *ctx, mt_graph *g, mt_axes all, mt_tensor *t, bool replicated,
                            int devices, vcase *vc) {
    int me = mt_ctx_device(ctx);
    float an[N], *d = mt_tensor_f32(t);
    int64_t n = mt_tensor_numel(t);
    mt__graph_mark_grads_zero(g);   /* gradients add up over backwards */
    DEV_OK(mt_graph_forward(g));
    DEV_OK(mt_graph_backward(g));
    memcpy(an, mt_tensor_f32(mt_tensor_grad(t)), (size_t)n * sizeof *an);
    const float eps = 0.5f;
    for (int tg = 0; tg < (replicated ? 1 : devices); tg++)
        for (int64_t i = 0; i < n; i++) {
            bool mine = replicated || tg == me;
            double Fp, Fm;
            if (mine) d[i] += eps;
            DEV_OK(total(ctx, g, all, &Fp));
            if (mine) d[i] -= 2 * eps;
            DEV_OK(total(ctx, g, all, &Fm));
            if (mine) d[i] += eps;
            double num = (Fp - Fm) / (2 * eps);
            if (mine && me == 0) {
                vc->err = fmax(vc->err, fabs(num - an[i]));
                vc->scale = fmax(vc->scale, fabs(num));
            }
        }
    return MT_OK;
}

static mt_status run_case(mt_ctx *ctx, void *arg) {
    vcase *vc = arg;
    int me = mt_ctx_device(ctx);
    mt_axes data;
    DEV_OK(mt_ctx_axes(ctx, "data", &data));
    const int64_t shape[1] = {N};
    mt_graph *g = mt_graph_create();
    DEV_OK(mt_graph_set_ctx(g, ctx));
    mt_tensor *p = mt_param(g, "p", 1, shape, (mt_init){MT_INIT_ZEROS, 0});
    mt_tensor *b = vc->bias ? mt_param(g, "b", 1, shape, (mt_init){MT_INIT_ZEROS, 0}) : NULL;
    mt_tensor *win = mt_input(g, "w", MT_F32, 1, shape);
    DEV_OK(mt_tensor_set_varying(p, data));   /* each device's own p */
    if (b) DEV_OK(mt_tensor_set_varying(b, (mt_axes){0}));   /* one b, replicated */
    if (vc->wk == W_DECLARED) DEV_OK(mt_tensor_set_varying(win, data));
    mt_tensor *y = mt_graph_psum(g, p, data);
    if (b) y = mt_add(g, y, b);
    mt_tensor *w = win;
    if (vc->wk == W_PPERMUTE) {
        const int pairs[2][2] = {{0, 1}, {1, 0}};
        w = mt_graph_ppermute(g, win, data, pairs, 2);
    }
    if (vc->wk == W_USER_PVARY) {
        mt_tensor *yv = mt_graph_pvary(g, y, data);
        /* a pvary of what already varies is the value itself */
        if (yv && mt_graph_pvary(g, yv, data) != yv)
            DEV_FAIL("a second pvary over the same axes made a node");
        y = yv;
    }
    mt_tensor *loss = mt_sum(g, mt_mul(g, y, w));
    if (!loss) DEV_FAIL("building: %s", mt_graph_errmsg(g));
    if (count_pvary(g) != 1) DEV_FAIL("%d pvary nodes, want 1", count_pvary(g));
    DEV_OK(mt_graph_compile(g, loss, NULL));
    float *wd = mt_tensor_f32(win), *pd = mt_tensor_f32(p);
    for (int i = 0; i < N; i++) {
        wd[i] = val(me, i, 1);
        pd[i] = val(me, i, 2);
    }
    if (b) {
        float *bd = mt_tensor_f32(b);
        for (int i = 0; i < N; i++) bd[i] = val(0, i, 3);
    }
    DEV_OK(check_grad(ctx, g, data, p, false, 2, vc));
    if (b) DEV_OK(check_grad(ctx, g, data, b, true, 2, vc));
    mt_graph_free(g);
    return MT_OK;
}

static vcase run_vcase(w_kind wk, bool bias) {
    vcase vc = {.wk = wk, .bias = bias};
    mt_launch_opts o = mt_test_launch_opts("data=2", 2);
    MT_CHECK_OK(mt_launch(&o, run_case, &vc));
    return vc;
}

static void expect_exact(vcase vc, const char *what) {
    MT_CHECK(vc.scale > 0, "%s: the finite differences are all zero", what);
    MT_CHECK(vc.err <= 1e-4 * fmax(1, vc.scale), "%s: gradient off by %g (%.0f %% of the "
             "largest, %g)", what, vc.err, 100 * vc.err / vc.scale, vc.scale);
}

MT_TEST(psum_meets_declared_varying_input) {
    expect_exact(run_vcase(W_DECLARED, false), "psum(p) ⊙ w, w declared varying");
}
MT_TEST(psum_plus_replicated_param_meets_varying_input) {
    expect_exact(run_vcase(W_DECLARED, true), "(psum(p) + b) ⊙ w");
}
MT_TEST(psum_meets_ppermute_output) {
    expect_exact(run_vcase(W_PPERMUTE, false), "psum(p) ⊙ ppermute(w), nothing declared");
}
MT_TEST(psum_plus_replicated_param_meets_ppermute_output) {
    expect_exact(run_vcase(W_PPERMUTE, true), "(psum(p) + b) ⊙ ppermute(w)");
}
MT_TEST(user_pvary_is_the_only_one) {
    expect_exact(run_vcase(W_USER_PVARY, false), "pvary(psum(p)) ⊙ w");
}

/* ======================================================================== */
/* Refusals and declarations                                                 */
/* ======================================================================== */

/* A graph bound to the device with a parameter p and an input w of N, both
 * undeclared; NULL when that fails. */
static mt_graph *p_and_w(mt_ctx *ctx, mt_tensor **p, mt_tensor **w) {
    const int64_t shape[1] = {N};
    mt_graph *g = mt_graph_create();
    if (!g || mt_graph_set_ctx(g, ctx) != MT_OK) {
        mt_graph_free(g);
        return NULL;
    }
    *p = mt_param(g, "p", 1, shape, (mt_init){MT_INIT_ZEROS, 0});
    *w = mt_input(g, "w", MT_F32, 1, shape);
    return g;
}

static mt_status refusals(mt_ctx *ctx, void *arg) {
    (void)arg;
    mt_axes data;
    DEV_OK(mt_ctx_axes(ctx, "data", &data));
    const int64_t shape[1] = {N};
    /* a psum's result meets a leaf nobody said anything about */
    mt_tensor *p, *w;
    mt_graph *g = p_and_w(ctx, &p, &w);
    if (!g) DEV_FAIL("building p and w");
    mt_tensor *y = mt_graph_psum(g, p, data);
    mt_tensor_set_name(y, "y");
    mt_tensor *out = mt_mul(g, y, w);
    const char *msg = mt_graph_errmsg(g);
    if (out || mt_graph_status(g) != MT_ESHARDING || !strstr(msg, "mul") || !strstr(msg, "'y'") ||
        !strstr(msg, "'w'") || !strstr(msg, "'data'") || !strstr(msg, "mt_tensor_set_varying") ||
        !strstr(msg, "mt_graph_pvary"))
        DEV_FAIL("psum(p) ⊙ undeclared w: %s '%s'; want MT_ESHARDING naming mul, 'y', 'w', "
                 "'data', mt_tensor_set_varying and mt_graph_pvary",
                 mt_status_name(mt_graph_status(g)), msg);
    mt_graph_free(g);

    /* declarations: leaves only, before they are read, on a bound graph */
    g = mt_graph_create();
    mt_tensor *x = mt_input(g, "x", MT_F32, 1, shape);
    if (mt_tensor_set_varying(x, data) != MT_ESTATE || !strstr(mt_errmsg(), "mt_graph_set_ctx"))
        DEV_FAIL("declaring on an unbound graph: '%s'", mt_errmsg());
    DEV_OK(mt_graph_set_ctx(g, ctx));
    mt_tensor *s = mt_scale(g, x, 2.0f);
    if (mt_tensor_set_varying(x, data) != MT_ESTATE || !strstr(mt_errmsg(), "'x'"))
        DEV_FAIL("declaring a leaf already read: '%s'", mt_errmsg());
    if (mt_tensor_set_varying(s, data) != MT_EINVAL || !strstr(mt_errmsg(), "leaf"))
        DEV_FAIL("declaring an op's output: '%s'", mt_errmsg());
    if (mt_tensor_set_varying(NULL, data) != MT_EINVAL) DEV_FAIL("declaring NULL");
    mt_graph_free(g);
    return MT_OK;
}

MT_TEST(undeclared_leaf_meeting_a_psum_is_refused) {
    mt_launch_opts o = mt_test_launch_opts("data=2", 2);
    MT_CHECK_OK(mt_launch(&o, refusals, NULL));
}

/* An axis of size 1 varies nothing: no pvary, no refusal over it. */
static mt_status size_one(mt_ctx *ctx, void *arg) {
    (void)arg;
    mt_axes one;
    DEV_OK(mt_ctx_axes(ctx, "one", &one));
    mt_tensor *p, *w;
    mt_graph *g = p_and_w(ctx, &p, &w);
    if (!g) DEV_FAIL("building p and w");
    mt_tensor *loss = mt_sum(g, mt_mul(g, mt_graph_psum(g, p, one), w));
    if (!loss) DEV_FAIL("psum over a size-1 axis: %s", mt_graph_errmsg(g));
    if (count_pvary(g) != 0) DEV_FAIL("%d pvary nodes over a size-1 axis", count_pvary(g));
    mt_graph_free(g);
    return MT_OK;
}

MT_TEST(size_one_axis_needs_nothing) {
    mt_launch_opts o = mt_test_launch_opts("data=2,one=1", 2);
    MT_CHECK_OK(mt_launch(&o, size_one, NULL));
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
