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
 * of what already varies is the value itself. With nothing declared at all
 * (issue 37), a parameter is replicated and an input varies, as shard_map's
 * in_specs would say: a replicated w times a per-device x, then psum,
 * psum-then-mean, all_gather, all_gather_invariant, psum_scatter, a psum
 * over one axis of a 2-D mesh and the two collective matmuls, each exact
 * against differences of the global function. Where the variance cannot be
 * known (ops built before the graph was bound; a slice of a per-device
 * value) the builder refuses, naming the op and the fix. A partitioned
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

/* F = Σ_d L_d / copies after a forward on every device (copies: the
 * devices that hold each copy of a loss replicated over an axis, which
 * counts once). */
static mt_status total(mt_ctx *ctx, mt_graph *g, mt_axes all, int copies, double *F) {
    DEV_OK(mt_graph_forward(g));
    float L = mt_graph_loss(g);
    DEV_OK(mt_psum(ctx, all, &L, 1));
    *F = (double)L / copies;
    return MT_OK;
}

#define MAX_ELEMS 64   /* the largest parameter a case checks */

/* One device's side of a finite-difference check of `t` (a parameter of at
 * most MAX_ELEMS elements): each element perturbed on one device at a time,
 * or, for a replicated t, on every device at once; device 0 keeps the
 * largest |analytic - differences| in *err and the largest difference in
 * *scale. */
static mt_status check_grad(mt_ctx *ctx, mt_graph *g, mt_axes all, mt_tensor *t, bool replicated,
                            int devices, int copies, double *err, double *scale) {
    int me = mt_ctx_device(ctx);
    float an[MAX_ELEMS], *d = mt_tensor_f32(t);
    int64_t n = mt_tensor_numel(t);
    if (n > MAX_ELEMS) DEV_FAIL("'%s' has %lld elements, more than %d", mt_tensor_name(t),
                                (long long)n, MAX_ELEMS);
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
            DEV_OK(total(ctx, g, all, copies, &Fp));
            if (mine) d[i] -= 2 * eps;
            DEV_OK(total(ctx, g, all, copies, &Fm));
            if (mine) d[i] += eps;
            double num = (Fp - Fm) / (2 * eps);
            if (mine && me == 0) {
                *err = fmax(*err, fabs(num - an[i]));
                *scale = fmax(*scale, fabs(num));
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
    DEV_OK(check_grad(ctx, g, data, p, false, 2, 1, &vc->err, &vc->scale));
    if (b) DEV_OK(check_grad(ctx, g, data, b, true, 2, 1, &vc->err, &vc->scale));
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
/* Nothing declared: the defaults (issue 37)                                 */
/* ======================================================================== */

/* A shard_map program with no declaration at all: a parameter w (replicated
 * by default) times an input x (fed per device: varying by default), then a
 * collective, then Σ (· ⊙ k) with k a constant (replicated by default). JAX
 * types shard_map's inputs from in_specs, so pvary(w) is always inserted;
 * here the defaults must do the same, or w's gradient is each device's own
 * share (0.7-1.1 of its size off, seen from outside on e1cecef). Checked
 * against central differences of the global function F: Σ over devices of
 * L_d, divided by the number of copies of a loss replicated over an axis
 * (it counts once). w (and W, the fused products' weight) are perturbed on
 * every device at once. Values are small integers and F is linear in each
 * parameter, so the differences are exact. */
typedef enum {
    D_PSUM, D_PSUM_MEAN, D_ALL_GATHER, D_ALL_GATHER_INV, D_PSUM_SCATTER, D_PSUM_2D,
    D_AG_LINEAR, D_LINEAR_RS
} dvariant;

typedef struct {
    dvariant    v;
    const char *mesh, *axes;   /* the collective's axes */
    int         devices;
    int         copies;        /* devices holding each copy of a replicated loss */
    double      err, scale;    /* out, as vcase's */
} dcase;

enum { DB = 2, DT = 4, DK = 6, DOC = 3 };   /* w, x (DB,DT,DK); W (DOC,DK) */

static mt_tensor *d_build(mt_graph *g, const dcase *dc, mt_axes ax, mt_tensor *v, mt_tensor *W) {
    switch (dc->v) {
    case D_PSUM: case D_PSUM_2D: case D_PSUM_MEAN: return mt_graph_psum(g, v, ax);
    case D_ALL_GATHER:      return mt_graph_all_gather(g, v, ax, 1);
    case D_ALL_GATHER_INV:  return mt_graph_all_gather_invariant(g, v, ax, 1);
    case D_PSUM_SCATTER:    return mt_graph_psum_scatter(g, v, ax, 1);
    case D_AG_LINEAR:       return mt_graph_all_gather_linear(g, v, W, NULL, ax, 1);
    case D_LINEAR_RS:       return mt_graph_linear_reduce_scatter(g, v, W, ax, 1);
    }
    return NULL;
}

static mt_status d_run(mt_ctx *ctx, void *arg) {
    dcase *dc = arg;
    int me = mt_ctx_device(ctx);
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    mt_axes ax, all = {0};
    DEV_OK(mt_ctx_axes(ctx, dc->axes, &ax));
    for (int a = 0; a < mt_mesh_ndim(mesh); a++) all.axis[all.n++] = (uint8_t)a;
    const int64_t shape[3] = {DB, DT, DK}, wshape[2] = {DOC, DK};
    mt_graph *g = mt_graph_create();
    DEV_OK(mt_graph_set_ctx(g, ctx));
    /* nothing declared */
    mt_tensor *w = mt_param(g, "w", 3, shape, (mt_init){MT_INIT_ZEROS, 0});
    mt_tensor *x = mt_input(g, "x", MT_F32, 3, shape);
    bool fused = dc->v == D_AG_LINEAR || dc->v == D_LINEAR_RS;
    mt_tensor *W = fused ? mt_param(g, "W", 2, wshape, (mt_init){MT_INIT_ZEROS, 0}) : NULL;
    mt_tensor *y = d_build(g, dc, ax, mt_mul(g, w, x), W);
    if (!y) DEV_FAIL("building: %s", mt_graph_errmsg(g));
    int64_t ys[3];
    for (int d = 0; d < 3; d++) ys[d] = mt_tensor_dim(y, d);
    mt_tensor *k = mt_constant(g, "k", MT_F32, 3, ys);
    mt_tensor *yk = mt_mul(g, y, k);
    mt_tensor *loss = dc->v == D_PSUM_MEAN ? mt_mean(g, yk) : mt_sum(g, yk);
    if (!loss) DEV_FAIL("building: %s", mt_graph_errmsg(g));
    DEV_OK(mt_graph_compile(g, loss, NULL));
    float *wd = mt_tensor_f32(w), *xd = mt_tensor_f32(x), *kd = mt_tensor_f32(k);
    for (int64_t i = 0; i < mt_tensor_numel(w); i++) {
        wd[i] = val(0, (int)i, 1);   /* replicated: the same on every device */
        xd[i] = val(me, (int)i, 2);  /* each device's own */
    }
    for (int64_t i = 0; i < mt_tensor_numel(k); i++) kd[i] = val(0, (int)i, 3);
    if (W) {
        float *Wd = mt_tensor_f32(W);
        for (int i = 0; i < DOC * DK; i++) Wd[i] = val(0, i, 4);
    }
    DEV_OK(check_grad(ctx, g, all, w, true, dc->devices, dc->copies, &dc->err, &dc->scale));
    if (W) DEV_OK(check_grad(ctx, g, all, W, true, dc->devices, dc->copies, &dc->err, &dc->scale));
    mt_graph_free(g);
    return MT_OK;
}

static void run_dcase(dcase dc, const char *what) {
    mt_launch_opts o = mt_test_launch_opts(dc.mesh, dc.devices);
    MT_CHECK_OK(mt_launch(&o, d_run, &dc));
    MT_CHECK(dc.scale > 0, "%s: the finite differences are all zero", what);
    MT_CHECK(dc.err <= 1e-4 * fmax(1, dc.scale), "%s, nothing declared: gradient off by %g "
             "(%.0f %% of the largest, %g)", what, dc.err, 100 * dc.err / dc.scale, dc.scale);
}

#define D1 .mesh = "data=2", .axes = "data", .devices = 2

MT_TEST(undeclared_psum) {
    run_dcase((dcase){.v = D_PSUM, D1, .copies = 2}, "Σ psum(w ⊙ x) ⊙ k");
}
MT_TEST(undeclared_psum_then_mean) {
    run_dcase((dcase){.v = D_PSUM_MEAN, D1, .copies = 2}, "mean(psum(w ⊙ x) ⊙ k)");
}
MT_TEST(undeclared_all_gather) {
    run_dcase((dcase){.v = D_ALL_GATHER, D1, .copies = 1}, "Σ all_gather(w ⊙ x) ⊙ k");
}
MT_TEST(undeclared_all_gather_invariant) {
    run_dcase((dcase){.v = D_ALL_GATHER_INV, D1, .copies = 2},
              "Σ all_gather_invariant(w ⊙ x) ⊙ k");
}
MT_TEST(undeclared_psum_scatter) {
    run_dcase((dcase){.v = D_PSUM_SCATTER, D1, .copies = 1}, "Σ psum_scatter(w ⊙ x) ⊙ k");
}
MT_TEST(undeclared_psum_over_one_axis_of_2d_mesh) {
    run_dcase((dcase){.v = D_PSUM_2D, .mesh = "x=2,y=2", .axes = "x", .devices = 4,
                      .copies = 2}, "Σ psum_x(w ⊙ x) ⊙ k on x=2,y=2");
}
MT_TEST(undeclared_all_gather_linear) {
    run_dcase((dcase){.v = D_AG_LINEAR, D1, .copies = 1}, "Σ all_gather_linear(w ⊙ x, W) ⊙ k");
}
MT_TEST(undeclared_linear_reduce_scatter) {
    run_dcase((dcase){.v = D_LINEAR_RS, .mesh = "data=2,tensor=2", .axes = "tensor",
                      .devices = 4, .copies = 1},
              "Σ linear_reduce_scatter(w ⊙ x, W) ⊙ k on data=2,tensor=2");
}

/* ======================================================================== */
/* Refusals and declarations                                                 */
/* ======================================================================== */

static mt_status refusals(mt_ctx *ctx, void *arg) {
    (void)arg;
    mt_axes data;
    DEV_OK(mt_ctx_axes(ctx, "data", &data));
    const int64_t shape[1] = {N};
    /* ops built before the graph knew its device have no pvary: binding it
     * then is refused, naming the first op and the fix */
    mt_graph *g = mt_graph_create();
    mt_tensor *p = mt_param(g, "p", 1, shape, (mt_init){MT_INIT_ZEROS, 0});
    mt_tensor *w = mt_input(g, "w", MT_F32, 1, shape);
    mt_tensor_set_name(mt_mul(g, p, w), "pw");
    if (mt_graph_set_ctx(g, ctx) != MT_ESTATE || !strstr(mt_errmsg(), "'pw'") ||
        !strstr(mt_errmsg(), "right after mt_graph_create"))
        DEV_FAIL("binding after building: %s '%s'; want MT_ESTATE naming 'pw' and the fix",
                 mt_status_name(mt_graph_status(g)), mt_errmsg());
    mt_graph_free(g);

    /* slice takes a block of one shared value: of an input fed per device
     * (undeclared) its gradient would be wrong, so it is refused, naming
     * the unnamed product by the op that made it */
    g = mt_graph_create();
    DEV_OK(mt_graph_set_ctx(g, ctx));
    p = mt_param(g, "p", 1, shape, (mt_init){MT_INIT_ZEROS, 0});
    w = mt_input(g, "w", MT_F32, 1, shape);
    mt_tensor *pw = mt_mul(g, p, w);
    if (mt_graph_slice(g, pw, data, 0) || mt_graph_status(g) != MT_ESHARDING ||
        !strstr(mt_graph_errmsg(g), "mul(") || !strstr(mt_graph_errmsg(g), "'w'") ||
        strstr(mt_graph_errmsg(g), "act.") || !strstr(mt_graph_errmsg(g), "mt_tensor_set_varying"))
        DEV_FAIL("slice of a varying value: %s '%s'; want MT_ESHARDING naming mul('p'..., 'w') "
                 "(not act.N) and mt_tensor_set_varying", mt_status_name(mt_graph_status(g)),
                 mt_graph_errmsg(g));
    mt_graph_free(g);

    /* declared replicated, the same input slices */
    g = mt_graph_create();
    DEV_OK(mt_graph_set_ctx(g, ctx));
    p = mt_param(g, "p", 1, shape, (mt_init){MT_INIT_ZEROS, 0});
    w = mt_input(g, "w", MT_F32, 1, shape);
    DEV_OK(mt_tensor_set_varying(w, (mt_axes){0}));
    if (!mt_graph_slice(g, mt_mul(g, p, w), data, 0))
        DEV_FAIL("slice of a replicated product: %s", mt_graph_errmsg(g));
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

MT_TEST(unknowable_variance_is_refused) {
    mt_launch_opts o = mt_test_launch_opts("data=2", 2);
    MT_CHECK_OK(mt_launch(&o, refusals, NULL));
}

/* An axis of size 1 varies nothing: no pvary over it. The input w varies
 * over data by default, so psum_one(p) (invariant) meets it: one pvary,
 * over data alone. */
static mt_status size_one(mt_ctx *ctx, void *arg) {
    (void)arg;
    mt_axes one, data;
    DEV_OK(mt_ctx_axes(ctx, "one", &one));
    DEV_OK(mt_ctx_axes(ctx, "data", &data));
    const int64_t shape[1] = {N};
    mt_graph *g = mt_graph_create();
    DEV_OK(mt_graph_set_ctx(g, ctx));
    mt_tensor *p = mt_param(g, "p", 1, shape, (mt_init){MT_INIT_ZEROS, 0});
    mt_tensor *w = mt_input(g, "w", MT_F32, 1, shape);
    mt_tensor *loss = mt_sum(g, mt_mul(g, mt_graph_psum(g, p, one), w));
    if (!loss) DEV_FAIL("psum over a size-1 axis: %s", mt_graph_errmsg(g));
    int n = 0;
    for (int i = 0; i < g->n_forward; i++) {
        const mt_op_call *c = &g->nodes[i].call;
        if (c->op != MT_OP_PVARY) continue;
        n++;
        if (c->p.coll.axes.n != 1 || c->p.coll.axes.axis[0] != data.axis[0])
            DEV_FAIL("a pvary over %d axes (the first %d), want data (%d) alone",
                     c->p.coll.axes.n, c->p.coll.axes.axis[0], data.axis[0]);
    }
    if (n != 1) DEV_FAIL("%d pvary nodes, want 1 (over data)", n);
    mt_graph_free(g);
    return MT_OK;
}

MT_TEST(size_one_axis_needs_nothing) {
    mt_launch_opts o = mt_test_launch_opts("data=2,one=1", 2);
    MT_CHECK_OK(mt_launch(&o, size_one, NULL));
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
