/*
 * test_collgraph.c — collective nodes inside a graph (shard_map): each one's
 * forward against a naive reference computed from every device's inputs, and
 * its gradient rule against finite differences across devices.
 *
 * Every device runs the same graph on the threads transport. Its values are
 * formulas of (device, element), so a device can compute any other device's
 * inputs, hence what a collective must return, without communicating. The
 * graph of a case is
 *
 *   x = ones ⊙ p          (p a parameter, ones an input: x depends on the data)
 *   y = collective(x)
 *   w = wones ⊙ wp        (w needs a gradient, so y stays alive through B)
 *   L = Σ y ⊙ w  [+ Σ x ⊙ w2]
 *
 * The quantity differentiated is F = Σ over devices of L, a loss replicated
 * over the collective's group counting once (graph.h). Values are small
 * integers and L is linear in p, so central differences with eps = 0.25 are
 * exact in f32: the tolerance only absorbs nothing. A perturbed element is
 * perturbed on one device, or on all of them when p is replicated (pvary,
 * slice: the gradient of a replicated value is with respect to its one
 * shared value). The extra term Σ x ⊙ w2 makes the collective's backward
 * call accumulate into grad(x) (its contribution comes second). For psum, w
 * is declared the same over the group (mt_tensor_set_varying): the psum's
 * result meets it. p and wp hold each device's own values, so they are
 * declared varying over the mesh (undeclared, a parameter is one replicated
 * value: test_vma.c); the inputs vary by default.
 *
 * Also: the backward collective lands in B for a data-dependent x and in W
 * for pvary of a parameter (the data-parallel gradient all-reduce); gradients
 * accumulate over two backwards and the first contribution overwrites after
 * the gradients are marked zero; build errors; a device that fails before a
 * collective makes the others' runs return MT_EABORTED instead of hanging.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"
#include "graph/graph_impl.h"   /* node phases; marking gradients zero */

/* ======================================================================== */
/* Values and shapes                                                         */
/* ======================================================================== */

/* Small integers, different per device and element and per buffer (salt). */
static float val(int dev, int64_t i, int salt) {
    return (float)((dev * 7 + i * 3 + salt * 5 + 1000) % 17 - 8);
}

static void unravel(int64_t i, int ndim, const int64_t *shape, int64_t *idx) {
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
}

static int64_t ravel(const int64_t *idx, int ndim, const int64_t *shape) {
    int64_t i = 0;
    for (int d = 0; d < ndim; d++) i = i * shape[d] + idx[d];
    return i;
}

#define DEV_OK(call)                                                                       \
    do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

/* Fails the device (so the launch) with a message. */
#define DEV_FAIL(...) return mt_fail(MT_EINTERNAL, __VA_ARGS__)


/* ======================================================================== */
/* One case: a collective, its forward reference, finite differences          */
/* ======================================================================== */

typedef enum { K_PSUM, K_ALL_GATHER, K_PSUM_SCATTER, K_PPERMUTE, K_ALL_TO_ALL, K_PVARY, K_SLICE } kind;

typedef struct {
    kind        k;
    const char *mesh, *axes, *all_axes;   /* all_axes: every axis of the mesh */
    const char *rest;                     /* psum: the mesh's other axes ("": none) */
    int         devices;
    int         ndim;
    int64_t     shape[4];                 /* x, local */
    int         dim, dim2;
    int         perm;                     /* ppermute: 0 ring shift by one, 1 shift without wrap */
    bool        profile;                  /* run with per-op profiling on (its own run path) */
} spec;

/* The pairs of spec's permutation over P ranks; returns their count. */
static int perm_pairs(const spec *sp, int P, int (*pairs)[2]) {
    int n = 0;
    for (int i = 0; i < P; i++)
        if (sp->perm == 0 || i + 1 < P) { pairs[n][0] = i; pairs[n][1] = (i + 1) % P; n++; }
    return n;
}

static bool replicated_x(const spec *sp) { return sp->k == K_PVARY || sp->k == K_SLICE; }
static bool extra_term(const spec *sp) { return !replicated_x(sp) && sp->k != K_PSUM; }

/* p's value on device `dev` at element i. */
static float pval(const spec *sp, int dev, int64_t i) { return val(replicated_x(sp) ? 0 : dev, i, 1); }

/* The collective's expected output on the calling device (group rank r,
 * members[] in rank order, P of them), element by element. */
static double expect(const spec *sp, const int *members, int P, int r, int me, const int64_t *yshape,
                     int64_t e) {
    int nd = sp->ndim;
    const int64_t *xs = sp->shape;
    int64_t idx[4], in[4];
    unravel(e, nd, yshape, idx);
    memcpy(in, idx, sizeof in);
    switch (sp->k) {
    case K_PSUM: {
        double s = 0;
        for (int m = 0; m < P; m++) s += pval(sp, members[m], e);
        return s;
    }
    case K_PVARY: return pval(sp, me, e);
    case K_ALL_GATHER: {   /* block j of the dim comes from rank j */
        int j = (int)(idx[sp->dim] / xs[sp->dim]);
        in[sp->dim] = idx[sp->dim] % xs[sp->dim];
        return pval(sp, members[j], ravel(in, nd, xs));
    }
    case K_PSUM_SCATTER: {
        in[sp->dim] = r * yshape[sp->dim] + idx[sp->dim];
        double s = 0;
        for (int m = 0; m < P; m++) s += pval(sp, members[m], ravel(in, nd, xs));
        return s;
    }
    case K_SLICE:
        in[sp->dim] = r * yshape[sp->dim] + idx[sp->dim];
        return pval(sp, me, ravel(in, nd, xs));
    case K_PPERMUTE: {
        int pairs[64][2], n = perm_pairs(sp, P, pairs);
        for (int k = 0; k < n; k++)
            if (pairs[k][1] == r) return pval(sp, members[pairs[k][0]], e);
        return 0;
    }
    case K_ALL_TO_ALL: {   /* block j on the concat dim = rank j's block r of the split dim */
        int64_t b[4];
        memcpy(b, xs, sizeof b);
        b[sp->dim] /= P;
        int j = (int)(idx[sp->dim2] / b[sp->dim2]);
        in[sp->dim2] = idx[sp->dim2] % b[sp->dim2];
        in[sp->dim] = r * b[sp->dim] + in[sp->dim];
        return pval(sp, members[j], ravel(in, nd, xs));
    }
    }
    return NAN;
}

static mt_tensor *build_coll(const spec *sp, mt_graph *g, mt_tensor *x, mt_axes ax, int P) {
    int pairs[64][2], n;
    switch (sp->k) {
    case K_PSUM:         return mt_graph_psum(g, x, ax);
    case K_ALL_GATHER:   return mt_graph_all_gather(g, x, ax, sp->dim);
    case K_PSUM_SCATTER: return mt_graph_psum_scatter(g, x, ax, sp->dim);
    case K_PPERMUTE:     n = perm_pairs(sp, P, pairs);
                         return mt_graph_ppermute(g, x, ax, (const int (*)[2])pairs, n);
    case K_ALL_TO_ALL:   return mt_graph_all_to_all(g, x, ax, sp->dim, sp->dim2);
    case K_PVARY:        return mt_graph_pvary(g, x, ax);
    case K_SLICE:        return mt_graph_slice(g, x, ax, sp->dim);
    }
    return NULL;
}

/* The op of the collective's backward call, and the phase it must run in. */
static mt_op backward_op(kind k) {
    static const mt_op ops[] = {[K_PSUM] = MT_OP_SCALE_BWD, [K_ALL_GATHER] = MT_OP_PSUM_SCATTER,
                                [K_PSUM_SCATTER] = MT_OP_ALL_GATHER, [K_PPERMUTE] = MT_OP_PPERMUTE,
                                [K_ALL_TO_ALL] = MT_OP_ALL_TO_ALL, [K_PVARY] = MT_OP_PSUM,
                                [K_SLICE] = MT_OP_ALL_GATHER};
    return ops[k];
}

static void fill(mt_tensor *t, int dev, int salt) {
    float *d = mt_tensor_f32(t);
    for (int64_t i = 0; i < mt_tensor_numel(t); i++) d[i] = salt < 0 ? 1.0f : val(dev, i, salt);
}

/* F = Σ over devices of L (divided by `div`, the number of copies of a
 * replicated loss), after a forward on every device. */
static mt_status total(mt_ctx *ctx, mt_graph *g, mt_axes all, double div, double *F) {
    DEV_OK(mt_graph_forward(g));
    float L = mt_graph_loss(g);
    DEV_OK(mt_psum(ctx, all, &L, 1));
    *F = L / div;
    return MT_OK;
}

static mt_status fwd_bwd(mt_graph *g) {
    DEV_OK(mt_graph_forward(g));
    return mt_graph_backward(g);
}

static mt_status run_case(mt_ctx *ctx, void *arg) {
    const spec *sp = arg;
    int me = mt_ctx_device(ctx);
    mt_axes ax, all;
    DEV_OK(mt_ctx_axes(ctx, sp->axes, &ax));
    DEV_OK(mt_ctx_axes(ctx, sp->all_axes, &all));
    int members[64];
    int P = mt_mesh_group(mt_ctx_mesh(ctx), ax, me, members), r = mt_axis_index(ctx, ax);

    mt_graph *g = mt_graph_create();
    DEV_OK(mt_graph_set_ctx(g, ctx));
    mt_tensor *p = mt_param(g, "p", sp->ndim, sp->shape, (mt_init){MT_INIT_ZEROS, 0});
    mt_tensor *ones = mt_input(g, "ones", MT_F32, sp->ndim, sp->shape);
    /* each device's own p (shard_map's in_specs over every axis): a
     * parameter left undeclared is one replicated value */
    if (!replicated_x(sp)) DEV_OK(mt_tensor_set_varying(p, all));
    /* ones is the same everywhere: x = ones ⊙ p is then one shared value */
    else DEV_OK(mt_tensor_set_varying(ones, (mt_axes){0}));
    mt_tensor *x = sp->k == K_PVARY ? p : mt_mul(g, ones, p);
    mt_tensor *y = build_coll(sp, g, x, ax, P);
    if (!y) DEV_FAIL("building: %s", mt_graph_errmsg(g));
    int64_t ys[4] = {1, 1, 1, 1};
    for (int d = 0; d < sp->ndim; d++) ys[d] = mt_tensor_dim(y, d);
    mt_tensor *wones = mt_input(g, "wones", MT_F32, sp->ndim, ys);
    mt_tensor *wp = mt_param(g, "wp", sp->ndim, ys, (mt_init){MT_INIT_ZEROS, 0});
    if (sp->k == K_PSUM) {
        /* the psum's result meets w: w's variance must be declared (the same
         * over the group, so the loss counts once; its own over the rest) */
        mt_axes rest = {0};
        if (sp->rest && sp->rest[0]) DEV_OK(mt_ctx_axes(ctx, sp->rest, &rest));
        DEV_OK(mt_tensor_set_varying(wones, rest));
        DEV_OK(mt_tensor_set_varying(wp, rest));
    } else {
        DEV_OK(mt_tensor_set_varying(wp, all));   /* its values differ by device */
    }
    mt_tensor *loss = mt_sum(g, mt_mul(g, y, mt_mul(g, wones, wp)));
    mt_tensor *w2 = NULL;
    if (extra_term(sp)) {
        w2 = mt_input(g, "w2", MT_F32, sp->ndim, sp->shape);
        loss = mt_add(g, loss, mt_sum(g, mt_mul(g, x, w2)));
    }
    DEV_OK(mt_graph_compile(g, loss, NULL));
    DEV_OK(mt_graph_set_profiling(g, sp->profile));
    /* psum's loss is replicated over the group: same weights everywhere */
    fill(ones, me, -1);
    fill(wones, me, -1);
    fill(wp, sp->k == K_PSUM ? 0 : me, 2);
    if (w2) fill(w2, me, 3);
    float *pd = mt_tensor_f32(p);
    int64_t n = mt_tensor_numel(p);
    for (int64_t i = 0; i < n; i++) pd[i] = pval(sp, me, i);

    /* (a) forward against the reference */
    DEV_OK(mt_graph_forward(g));
    const float *yd = mt_tensor_f32(y);
    for (int64_t e = 0; e < mt_tensor_numel(y); e++) {
        double want = expect(sp, members, P, r, me, ys, e);
        if (yd[e] != want) DEV_FAIL("forward: y[%lld] = %g, want %g", (long long)e, yd[e], want);
    }

    /* the backward collective's phase: W for pvary of a parameter, else B */
    mt_phase want_phase = sp->k == K_PVARY ? MT_PHASE_W : MT_PHASE_B;
    int found = 0;
    for (int i = g->n_forward; i < g->n_nodes; i++) {
        const mt_node *nd = &g->nodes[i];
        if (nd->call.op != backward_op(sp->k) || nd->call.out != mt_tensor_grad(x)) continue;
        found++;
        if (nd->phase != want_phase)
            DEV_FAIL("backward %s into '%s' runs in phase %d, want %d", mt__op_def(nd->call.op)->name,
                     nd->call.out->name, (int)nd->phase, (int)want_phase);
        if (sp->k == K_PVARY && !(nd->param_first & MT_FIRST_OUT))
            DEV_FAIL("pvary's psum is the first contribution to grad(p) but is not marked so");
    }
    if (found != 1) DEV_FAIL("%d backward %s nodes into grad(x); want 1", found,
                             mt__op_def(backward_op(sp->k))->name);
    if (sp->k == K_PVARY && mt_graph_get_stats(g).n_backward_w < 2)
        DEV_FAIL("pvary: %d W nodes, want the psum and what feeds it",
                 mt_graph_get_stats(g).n_backward_w);

    /* (b) the analytic gradient, then accumulation and the first contribution */
    DEV_OK(mt_graph_backward(g));
    float an[256];
    if (n > 256) DEV_FAIL("case too large");
    memcpy(an, mt_tensor_f32(mt_tensor_grad(p)), (size_t)n * sizeof *an);
    DEV_OK(fwd_bwd(g));
    const float *gd = mt_tensor_f32(mt_tensor_grad(p));
    for (int64_t i = 0; i < n; i++)
        if (gd[i] != 2 * an[i]) DEV_FAIL("two backwards: grad p[%lld] = %g, want 2 × %g",
                                         (long long)i, gd[i], an[i]);
    mt__graph_mark_grads_zero(g);
    DEV_OK(fwd_bwd(g));
    for (int64_t i = 0; i < n; i++)
        if (gd[i] != an[i]) DEV_FAIL("after marking zero: grad p[%lld] = %g, want %g",
                                     (long long)i, gd[i], an[i]);

    /* (c) central differences of F, one element of one device (or of all
     * devices for a replicated p) at a time */
    double div = sp->k == K_PSUM ? P : 1;
    const float eps = 0.25f;
    int64_t elems[3] = {0, n / 2, n - 1};
    int n_targets = replicated_x(sp) ? 1 : sp->devices;
    for (int t = 0; t < n_targets; t++)
        for (int k = 0; k < 3; k++) {
            int64_t i = elems[k];
            bool mine = replicated_x(sp) || t == me;
            double Fp, Fm;
            if (mine) pd[i] += eps;
            DEV_OK(total(ctx, g, all, div, &Fp));
            if (mine) pd[i] -= 2 * eps;
            DEV_OK(total(ctx, g, all, div, &Fm));
            if (mine) pd[i] += eps;
            double num = (Fp - Fm) / (2 * eps);
            if (mine && fabs(num - an[i]) > 1e-4 * fmax(1, fabs(num)))
                DEV_FAIL("dF/dp[%lld] on device %d: analytic %g, finite differences %g",
                         (long long)i, me, an[i], num);
        }
    mt_graph_free(g);
    return MT_OK;
}

static void run_spec(spec sp) {
    mt_launch_opts o = mt_test_launch_opts(sp.mesh, sp.devices);
    MT_CHECK_OK(mt_launch(&o, run_case, &sp));
}

#define ONE_AXIS .mesh = "i=4", .axes = "i", .all_axes = "i", .devices = 4

MT_TEST(psum) {
    run_spec((spec){.k = K_PSUM, ONE_AXIS, .ndim = 2, .shape = {3, 5}});
}
MT_TEST(all_gather_dim0) {
    run_spec((spec){.k = K_ALL_GATHER, ONE_AXIS, .ndim = 2, .shape = {2, 3}, .dim = 0});
}
MT_TEST(all_gather_dim1) {
    run_spec((spec){.k = K_ALL_GATHER, ONE_AXIS, .ndim = 3, .shape = {2, 3, 2}, .dim = 1});
}
MT_TEST(psum_scatter) {
    run_spec((spec){.k = K_PSUM_SCATTER, ONE_AXIS, .ndim = 2, .shape = {3, 8}, .dim = 1,
                    .profile = true});
}
MT_TEST(ppermute_ring) {
    run_spec((spec){.k = K_PPERMUTE, ONE_AXIS, .ndim = 2, .shape = {2, 3}, .perm = 0,
                    .profile = true});
}
MT_TEST(ppermute_shift_zeros) {   /* rank 0 is no one's destination: zeros */
    run_spec((spec){.k = K_PPERMUTE, ONE_AXIS, .ndim = 1, .shape = {5}, .perm = 1});
}
MT_TEST(all_to_all) {
    run_spec((spec){.k = K_ALL_TO_ALL, ONE_AXIS, .ndim = 2, .shape = {8, 3}, .dim = 0, .dim2 = 1});
}
MT_TEST(all_to_all_same_dim) {
    run_spec((spec){.k = K_ALL_TO_ALL, ONE_AXIS, .ndim = 2, .shape = {2, 8}, .dim = 1, .dim2 = 1});
}
MT_TEST(pvary_grad_is_reduced_in_w) {
    run_spec((spec){.k = K_PVARY, ONE_AXIS, .ndim = 2, .shape = {2, 3}});
}
MT_TEST(slice) {
    run_spec((spec){.k = K_SLICE, ONE_AXIS, .ndim = 2, .shape = {8, 3}, .dim = 0});
}

/* Two axes: groups over one of them (2 groups of 2), and over both. */
#define TWO_AXES .mesh = "x=2,y=2", .all_axes = "x,y", .devices = 4
MT_TEST(mesh2_all_gather_over_y) {
    run_spec((spec){.k = K_ALL_GATHER, TWO_AXES, .axes = "y", .ndim = 2, .shape = {2, 3}, .dim = 1});
}
MT_TEST(mesh2_psum_over_x) {
    run_spec((spec){.k = K_PSUM, TWO_AXES, .axes = "x", .rest = "y", .ndim = 1, .shape = {6}});
}
MT_TEST(mesh2_all_to_all_over_x) {
    run_spec((spec){.k = K_ALL_TO_ALL, TWO_AXES, .axes = "x", .ndim = 2, .shape = {4, 3}, .dim = 0,
                    .dim2 = 1});
}
MT_TEST(mesh2_psum_scatter_over_yx) {
    run_spec((spec){.k = K_PSUM_SCATTER, TWO_AXES, .axes = "y,x", .ndim = 2, .shape = {8, 2},
                    .dim = 0});
}

/* ======================================================================== */
/* Errors                                                                    */
/* ======================================================================== */

/* Builds one collective on a fresh graph; returns its status and leaves its
 * message in mt_errmsg(). */
typedef mt_tensor *(*build_fn)(mt_graph *g, mt_tensor *x, mt_axes ax);

static mt_status try_build(mt_ctx *ctx, mt_dtype dt, int ndim, const int64_t *shape, build_fn fn) {
    mt_graph *g = mt_graph_create();
    if (ctx) mt_graph_set_ctx(g, ctx);
    mt_axes ax = {.n = 1, .axis = {0}};
    mt_tensor *x = mt_input(g, "x", dt, ndim, shape);
    mt_tensor *y = fn(g, x, ax);
    mt_status s = mt_graph_status(g);
    if ((y == NULL) != (s != MT_OK)) s = mt_fail(MT_EINTERNAL, "builder result and status disagree");
    else if (s != MT_OK) mt_fail(s, "%s", mt_graph_errmsg(g));
    mt_graph_free(g);
    return s;
}

static mt_tensor *b_psum(mt_graph *g, mt_tensor *x, mt_axes ax) { return mt_graph_psum(g, x, ax); }
static mt_tensor *b_ps1(mt_graph *g, mt_tensor *x, mt_axes ax) { return mt_graph_psum_scatter(g, x, ax, 1); }
static mt_tensor *b_slice1(mt_graph *g, mt_tensor *x, mt_axes ax) { return mt_graph_slice(g, x, ax, 1); }
static mt_tensor *b_ag2(mt_graph *g, mt_tensor *x, mt_axes ax) { return mt_graph_all_gather(g, x, ax, 2); }
static mt_tensor *b_a2a(mt_graph *g, mt_tensor *x, mt_axes ax) { return mt_graph_all_to_all(g, x, ax, 0, 1); }
static mt_tensor *b_bad_axes(mt_graph *g, mt_tensor *x, mt_axes ax) {
    return mt_graph_pvary(g, x, (mt_axes){.n = 1, .axis = {3}});
}
static mt_tensor *b_dup_dest(mt_graph *g, mt_tensor *x, mt_axes ax) {
    const int pairs[2][2] = {{0, 1}, {2, 1}};
    return mt_graph_ppermute(g, x, ax, pairs, 2);
}
static mt_tensor *b_rank_range(mt_graph *g, mt_tensor *x, mt_axes ax) {
    const int pairs[1][2] = {{0, 4}};
    return mt_graph_ppermute(g, x, ax, pairs, 1);
}

/* Fails the device unless `call` returned `code` with `a` and `b` in the message. */
#define DEV_FAILS(call, code, a, b)                                                         \
    do {                                                                                   \
        mt_status s_ = (call);                                                             \
        if (s_ != (code) || !strstr(mt_errmsg(), a) || !strstr(mt_errmsg(), b))            \
            DEV_FAIL("%s -> %s '%s'; want %s naming '%s' and '%s'", #call,                 \
                     mt_status_name(s_), mt_errmsg(), mt_status_name(code), a, b);         \
    } while (0)

static mt_status build_errors(mt_ctx *ctx, void *arg) {
    const int64_t s35[2] = {3, 5}, s34[2] = {3, 4}, s63[2] = {6, 3};
    DEV_FAILS(try_build(NULL, MT_F32, 2, s35, b_psum), MT_ESTATE, "mt_graph_set_ctx", "psum");
    DEV_FAILS(try_build(ctx, MT_F32, 2, s35, b_ps1), MT_ESHAPE, "size 5", "4 blocks");
    DEV_FAILS(try_build(ctx, MT_F32, 2, s35, b_slice1), MT_ESHAPE, "size 5", "4 blocks");
    DEV_FAILS(try_build(ctx, MT_F32, 2, s63, b_a2a), MT_ESHAPE, "size 6", "4 blocks");
    DEV_FAILS(try_build(ctx, MT_F32, 2, s34, b_ag2), MT_ESHAPE, "dim 2", "out of range");
    DEV_FAILS(try_build(ctx, MT_I32, 2, s34, b_psum), MT_EUNSUPPORTED, "i32", "'x'");
    DEV_FAILS(try_build(ctx, MT_F32, 2, s34, b_bad_axes), MT_EINVAL, "pvary", "'x'");
    DEV_FAILS(try_build(ctx, MT_F32, 2, s34, b_dup_dest), MT_EINVAL, "rank 1", "destination");
    DEV_FAILS(try_build(ctx, MT_F32, 2, s34, b_rank_range), MT_EINVAL, "rank 4", "0 to 3");
    return MT_OK;
}

MT_TEST(build_errors) {
    mt_launch_opts o = mt_test_launch_opts("i=4", 4);
    MT_CHECK_OK(mt_launch(&o, build_errors, NULL));
}

/* Device 1 fails before the graph's psum: the others' forwards return
 * MT_EABORTED naming the node, instead of waiting for it. */
typedef struct {
    mt_status st[4];
    char      msg[4][256];
} abort_result;

static mt_status fail_early(mt_ctx *ctx, void *arg) {
    abort_result *res = arg;
    int me = mt_ctx_device(ctx);
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "i", &ax));
    mt_graph *g = mt_graph_create();
    DEV_OK(mt_graph_set_ctx(g, ctx));
    const int64_t shape[1] = {4};
    mt_tensor *p = mt_param(g, "p", 1, shape, (mt_init){MT_INIT_ONES, 0});
    mt_tensor *loss = mt_sum(g, mt_graph_psum(g, p, ax));
    DEV_OK(mt_graph_compile(g, loss, NULL));
    DEV_OK(mt_graph_set_profiling(g, me == 2));   /* the profiled run path fails the same way */
    mt_status s = me == 1 ? mt_fail(MT_EINVAL, "device 1 gives up before the psum")
                          : mt_graph_forward(g);
    res->st[me] = s;
    snprintf(res->msg[me], sizeof res->msg[me], "%s", mt_errmsg());
    mt_graph_free(g);
    return s;
}

MT_TEST(failed_device_aborts_graph_runs) {
    abort_result res;
    memset(&res, 0, sizeof res);
    mt_launch_opts o = mt_test_launch_opts("i=4", 4);
    mt_status s = mt_launch(&o, fail_early, &res);
    MT_CHECK(s != MT_OK, "the launch succeeded although device 1 failed");
    for (int d = 0; d < 4; d++) {
        if (d == 1) continue;
        MT_CHECK(res.st[d] == MT_EABORTED, "device %d: forward -> %s (%s), want MT_EABORTED", d,
                 mt_status_name(res.st[d]), res.msg[d]);
        MT_CHECK(strstr(res.msg[d], "psum") && strstr(res.msg[d], "forward node"),
                 "device %d: message '%s' does not name the psum node", d, res.msg[d]);
    }
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
