/*
 * test_collmatmul.c — the collective matmuls (mt_graph_all_gather_linear,
 * mt_graph_linear_reduce_scatter) against the unfused compositions they
 * replace, and the asynchronous ppermute their rings run on.
 *
 * Every device builds two device-local graphs from the same numbers: the
 * fused one, and the reference made of independent parts (mt_graph_all_gather
 * then mt_linear; mt_linear then mt_graph_psum_scatter). The loss is
 *
 *   L = ½ Σ (y - t)²  [+ Σ x ⊙ m]
 *
 * so the cotangent of y depends on y, and the extra term makes the ring's
 * contribution to grad(x) the second one (it accumulates). x is
 * data-dependent (ones ⊙ px: its gradient ring runs in B), a parameter (the
 * ring runs in W), or an input (no gradient: linear_rs's weight gradient
 * then gathers the cotangent with a plain all_gather). The forward, the
 * loss and the gradients of px, w and bias must match the reference within
 * 1e-5 of the reference's largest magnitude (the ring sums in another order,
 * so bits may differ). Values are pseudo-random in [-1, 1], different per
 * device, tensor and element.
 *
 * Also: the backward nodes are the rings and the weight gradient, in the
 * phases the B/W split wants; gradients accumulate over two backwards and
 * the first contribution overwrites once they are marked zero; chunks
 * large enough for the transport's asynchronous path and comm's check mode;
 * the Chrome trace shows each ring step's ppermute with its bytes; build
 * errors name the operand; a device that fails before a ring makes the
 * others' runs fail instead of hanging. And mt_ppermute_start on its own.
 *
 * MT_BENCH=1 test_collmatmul bench_ag_linear times the fused ops against
 * the unfused ones on tensor=2 (otherwise that case does nothing).
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"
#include "graph/graph_impl.h"   /* backward nodes, phases; marking gradients zero */

#include <time.h>
#include <unistd.h>

/* ======================================================================== */
/* Values, launches                                                          */
/* ======================================================================== */

/* Pseudo-random in [-1, 1], by device, tensor (salt) and element. */
static float val(int dev, int salt, int64_t i) {
    uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull ^ (uint64_t)(dev + 1) * 0xC2B2AE3D27D4EB4Full ^
                 (uint64_t)(salt + 1) * 0x165667B19E3779F9ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return (float)((double)(h % 20001) / 10000.0 - 1.0);
}

static void fill(mt_tensor *t, int dev, int salt) {
    float *d = mt_tensor_f32(t);
    for (int64_t i = 0; i < mt_tensor_numel(t); i++) d[i] = salt < 0 ? 1.0f : val(dev, salt, i);
}

#define DEV_OK(call)                                                                       \
    do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)
#define DEV_FAIL(...) return mt_fail(MT_EINTERNAL, __VA_ARGS__)


/* got (n) against want (n): |got - want| <= tol · max|want| (at least tol ·
 * 1e-3). Returns false with the worst element in msg. */
static bool close_all(const float *got, const float *want, int64_t n, double tol, char *msg,
                      size_t cap) {
    double scale = 1e-3;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (int64_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol * scale)) {
            snprintf(msg, cap, "[%lld] = %.9g, want %.9g (tolerance %g of %g)", (long long)i,
                     got[i], want[i], tol, scale);
            return false;
        }
    return true;
}

/* ======================================================================== */
/* One case: the fused op against the unfused composition                    */
/* ======================================================================== */

typedef enum { OP_AG, OP_RS } opkind;
typedef enum { X_DATA, X_PARAM, X_INPUT } xmode;

typedef struct {
    opkind      op;
    const char *mesh, *axes;
    int         devices;
    int         ndim;
    int64_t     shape[4];      /* x, local (all_gather_linear) or whole (linear_reduce_scatter) */
    int         dim;
    int         wk;            /* w's output dims: 1 (OC,K) or 2 (O1,O2,K) */
    int64_t     wout[2];
    bool        bias;          /* all_gather_linear only */
    xmode       xm;
    bool        extra;         /* loss += Σ x ⊙ m */
    bool        check;         /* comm's debug check mode */
} spec;

/* The tensors of one graph. */
typedef struct {
    mt_graph  *g;
    mt_tensor *ones, *px, *x, *w, *b, *y, *t, *m;
} net;

static mt_status build(const spec *sp, mt_ctx *ctx, mt_axes ax, bool fused, net *n) {
    memset(n, 0, sizeof *n);
    mt_graph *g = n->g = mt_graph_create();
    if (!g) DEV_FAIL("out of memory");
    DEV_OK(mt_graph_set_ctx(g, ctx));
    const mt_init zeros = {MT_INIT_ZEROS, 0};
    /* the parameters hold each device's own values (fill below): declared
     * so, or they would be one replicated value whose gradient sums the
     * devices' (test_vma.c) */
    mt_axes every = {0};
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    for (int a = 0; a < mt_mesh_ndim(mesh); a++) every.axis[every.n++] = (uint8_t)a;
    if (sp->xm == X_INPUT) {
        n->x = mt_input(g, "x", MT_F32, sp->ndim, sp->shape);
    } else {
        n->px = mt_param(g, "px", sp->ndim, sp->shape, zeros);
        DEV_OK(mt_tensor_set_varying(n->px, every));
        n->x = n->px;
        if (sp->xm == X_DATA) {
            n->ones = mt_input(g, "ones", MT_F32, sp->ndim, sp->shape);
            n->x = mt_mul(g, n->ones, n->px);
        }
    }
    int64_t ws[3] = {sp->wout[0], sp->wout[1], sp->shape[sp->ndim - 1]};
    if (sp->wk == 1) ws[1] = ws[2];
    n->w = mt_param(g, "w", sp->wk + 1, ws, zeros);
    if (sp->bias) n->b = mt_param(g, "b", sp->wk, sp->wout, zeros);
    DEV_OK(mt_tensor_set_varying(n->w, every));
    if (n->b) DEV_OK(mt_tensor_set_varying(n->b, every));
    if (sp->op == OP_AG)
        n->y = fused ? mt_graph_all_gather_linear(g, n->x, n->w, n->b, ax, sp->dim)
                     : mt_linear(g, mt_graph_all_gather(g, n->x, ax, sp->dim), n->w, n->b);
    else
        n->y = fused ? mt_graph_linear_reduce_scatter(g, n->x, n->w, ax, sp->dim)
                     : mt_graph_psum_scatter(g, mt_linear(g, n->x, n->w, NULL), ax, sp->dim);
    if (!n->y) DEV_FAIL("building the %s graph: %s", fused ? "fused" : "reference",
                        mt_graph_errmsg(g));
    int64_t ys[4];
    int yd = mt_tensor_ndim(n->y);
    for (int d = 0; d < yd; d++) ys[d] = mt_tensor_dim(n->y, d);
    n->t = mt_input(g, "t", MT_F32, yd, ys);
    mt_tensor *loss = mt_mse(g, n->y, n->t, 0.5f);
    if (sp->extra) {
        n->m = mt_input(g, "m", MT_F32, sp->ndim, sp->shape);
        loss = mt_add(g, loss, mt_sum(g, mt_mul(g, n->x, n->m)));
    }
    DEV_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1}));
    int dev = mt_ctx_device(ctx);
    if (n->ones) fill(n->ones, dev, -1);
    fill(n->px ? n->px : n->x, dev, 1);
    fill(n->w, dev, 2);
    if (n->b) fill(n->b, dev, 3);
    fill(n->t, dev, 4);
    if (n->m) fill(n->m, dev, 5);
    return MT_OK;
}

static mt_status fwd_bwd(mt_graph *g) {
    DEV_OK(mt_graph_forward(g));
    return mt_graph_backward(g);
}

/* Fails unless a and b (same shape) agree within tol. */
static mt_status same(const char *what, mt_tensor *a, mt_tensor *b, double tol) {
    char msg[256];
    if (mt_tensor_numel(a) != mt_tensor_numel(b))
        DEV_FAIL("%s: %lld elements, reference %lld", what, (long long)mt_tensor_numel(a),
                 (long long)mt_tensor_numel(b));
    if (!close_all(mt_tensor_f32(a), mt_tensor_f32(b), mt_tensor_numel(a), tol, msg, sizeof msg))
        DEV_FAIL("%s%s", what, msg);
    return MT_OK;
}

/* The one backward node of op `op` writing grad(t) (or, t NULL, any); its
 * phase must be `phase`. */
static mt_status has_node(mt_graph *g, mt_op op, mt_tensor *t, mt_phase phase) {
    int found = 0;
    for (int i = g->n_forward; i < g->n_nodes; i++) {
        const mt_node *nd = &g->nodes[i];
        if (nd->call.op != op || (t && nd->call.out != mt_tensor_grad(t))) continue;
        found++;
        if (nd->phase != phase)
            DEV_FAIL("backward %s into '%s' runs in phase %d, want %d", mt__op_def(op)->name,
                     nd->call.out->name, (int)nd->phase, (int)phase);
    }
    if (found != 1) DEV_FAIL("%d backward %s nodes%s%s, want 1", found, mt__op_def(op)->name,
                             t ? " into the gradient of " : "", t ? t->name : "");
    return MT_OK;
}

/* The fused graph's backward is made of the rings and the weight gradient. */
static mt_status check_nodes(const spec *sp, const net *f) {
    mt_phase xphase = sp->xm == X_DATA ? MT_PHASE_B : MT_PHASE_W;
    mt_op ring = sp->op == OP_AG ? MT_OP_LINEAR_RS : MT_OP_AG_LINEAR;
    if (sp->xm != X_INPUT) DEV_OK(has_node(f->g, ring, f->x, xphase));
    DEV_OK(has_node(f->g, MT_OP_CM_WGRAD, f->w, MT_PHASE_W));
    if (f->b) DEV_OK(has_node(f->g, MT_OP_BIAS_GRAD, f->b, MT_PHASE_W));
    if (sp->op == OP_RS && sp->xm == X_INPUT) DEV_OK(has_node(f->g, MT_OP_ALL_GATHER, NULL, MT_PHASE_W));
    return MT_OK;
}

/* The program listing (explain) counts the forward ring as a collective of
 * the bytes its P-1 ppermutes carry, one chunk each: (P-1)·numel(x) floats
 * (the all-gather it replaces) or (P-1)·numel(out) (the reduce-scatter). */
static mt_status check_listing(const spec *sp, const net *f, int P) {
    const char *want = sp->op == OP_AG ? "ag_linear" : "linear_rs";
    double bytes = 4.0 * (P - 1) * (double)mt_tensor_numel(sp->op == OP_AG ? f->x : f->y);
    for (int i = 0; i < mt_graph_n_nodes(f->g); i++) {
        mt_node_info info;
        DEV_OK(mt_graph_node(f->g, i, &info));
        if (info.phase != 'F' || strcmp(info.op, want) != 0) continue;
        if (!info.collective || info.comm_bytes != bytes || info.flops <= 0)
            DEV_FAIL("listing: %s collective %d, %g bytes, %g FLOPs; want a collective of %g "
                     "bytes", want, (int)info.collective, info.comm_bytes, info.flops, bytes);
        return MT_OK;
    }
    DEV_FAIL("listing: no forward %s node", want);
}

/* The gradients compared: px (if any), w, b (if any). */
static int grads_of(const net *n, mt_tensor **out, const char **names) {
    int k = 0;
    if (n->px) { out[k] = mt_tensor_grad(n->px); names[k++] = "grad px"; }
    out[k] = mt_tensor_grad(n->w); names[k++] = "grad w";
    if (n->b) { out[k] = mt_tensor_grad(n->b); names[k++] = "grad b"; }
    return k;
}

static mt_status run_case(mt_ctx *ctx, void *arg) {
    const spec *sp = arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, sp->axes, &ax));
    net f, r;
    DEV_OK(build(sp, ctx, ax, true, &f));
    DEV_OK(build(sp, ctx, ax, false, &r));
    DEV_OK(check_nodes(sp, &f));
    DEV_OK(check_listing(sp, &f, mt_axis_size(ctx, ax)));

    /* (a) forward and loss */
    DEV_OK(mt_graph_forward(f.g));
    DEV_OK(mt_graph_forward(r.g));
    DEV_OK(same("forward y", f.y, r.y, 1e-5));
    float lf = mt_graph_loss(f.g), lr = mt_graph_loss(r.g);
    if (!(fabs(lf - lr) <= 1e-5 * fmax(1, fabs(lr)))) DEV_FAIL("loss %.9g, reference %.9g", lf, lr);

    /* (b) gradients */
    DEV_OK(mt_graph_backward(f.g));
    DEV_OK(mt_graph_backward(r.g));
    mt_tensor *gf[3], *gr[3];
    const char *names[3];
    int k = grads_of(&f, gf, names);
    grads_of(&r, gr, names);
    for (int i = 0; i < k; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s", names[i]);
        if (!gf[i] || !gr[i]) DEV_FAIL("%s: missing (fused %p, reference %p)", what,
                                       (void *)gf[i], (void *)gr[i]);
        DEV_OK(same(what, gf[i], gr[i], 1e-5));
    }

    /* accumulation over two backwards; the first contribution overwrites
     * once the gradients are marked zero */
    float first[3][4096];
    for (int i = 0; i < k; i++) {
        if (mt_tensor_numel(gf[i]) > 4096) DEV_FAIL("case too large for the accumulation check");
        memcpy(first[i], mt_tensor_f32(gf[i]), (size_t)mt_tensor_numel(gf[i]) * sizeof(float));
    }
    DEV_OK(fwd_bwd(f.g));
    char msg[256];
    for (int i = 0; i < k; i++) {
        float twice[4096];
        int64_t n = mt_tensor_numel(gf[i]);
        for (int64_t e = 0; e < n; e++) twice[e] = 2 * first[i][e];
        if (!close_all(mt_tensor_f32(gf[i]), twice, n, 1e-6, msg, sizeof msg))
            DEV_FAIL("%s after two backwards: %s", names[i], msg);
    }
    mt__graph_mark_grads_zero(f.g);
    DEV_OK(fwd_bwd(f.g));
    for (int i = 0; i < k; i++)
        if (!close_all(mt_tensor_f32(gf[i]), first[i], mt_tensor_numel(gf[i]), 1e-6, msg, sizeof msg))
            DEV_FAIL("%s after marking zero: %s", names[i], msg);
    mt_graph_free(f.g);
    mt_graph_free(r.g);
    return MT_OK;
}

static void run_spec(spec sp) {
    mt_launch_opts o = mt_test_launch_opts(sp.mesh, sp.devices);
    o.check = sp.check;
    MT_CHECK_OK(mt_launch(&o, run_case, &sp));
}

#define TP2 .mesh = "tensor=2", .axes = "tensor", .devices = 2
#define TP4 .mesh = "tensor=4", .axes = "tensor", .devices = 4
#define DP2TP2 .mesh = "data=2,tensor=2", .axes = "tensor", .devices = 4

/* ---- all_gather_linear ---- */
MT_TEST(ag_dim1_bias) {
    run_spec((spec){.op = OP_AG, TP2, .ndim = 3, .shape = {2, 3, 4}, .dim = 1, .wk = 1,
                    .wout = {5}, .bias = true, .extra = true});
}
MT_TEST(ag_dim0_w3d) {
    run_spec((spec){.op = OP_AG, TP2, .ndim = 3, .shape = {2, 3, 4}, .dim = 0, .wk = 2,
                    .wout = {3, 2}});
}
MT_TEST(ag_tp4_dim0_bias_x_param) {
    run_spec((spec){.op = OP_AG, TP4, .ndim = 3, .shape = {2, 3, 4}, .dim = 0, .wk = 1,
                    .wout = {5}, .bias = true, .xm = X_PARAM});
}
MT_TEST(ag_tp4_dim1_w3d_bias) {
    run_spec((spec){.op = OP_AG, TP4, .ndim = 3, .shape = {2, 3, 4}, .dim = 1, .wk = 2,
                    .wout = {3, 2}, .bias = true, .extra = true});
}
MT_TEST(ag_dp2tp2_dim1_bias) {
    run_spec((spec){.op = OP_AG, DP2TP2, .ndim = 3, .shape = {2, 3, 4}, .dim = 1, .wk = 1,
                    .wout = {5}, .bias = true});
}
MT_TEST(ag_dp2tp2_dim0_w3d) {
    run_spec((spec){.op = OP_AG, DP2TP2, .ndim = 3, .shape = {2, 3, 4}, .dim = 0, .wk = 2,
                    .wout = {3, 2}, .extra = true});
}
MT_TEST(ag_4d_x_input) {   /* rows of a chunk span a trailing dim; x takes no gradient */
    run_spec((spec){.op = OP_AG, TP2, .ndim = 4, .shape = {2, 3, 2, 4}, .dim = 1, .wk = 1,
                    .wout = {5}, .bias = true, .xm = X_INPUT});
}

/* ---- linear_reduce_scatter ---- */
MT_TEST(rs_dim1) {
    run_spec((spec){.op = OP_RS, TP2, .ndim = 3, .shape = {2, 6, 4}, .dim = 1, .wk = 1,
                    .wout = {5}, .extra = true});
}
MT_TEST(rs_dim0_w3d) {
    run_spec((spec){.op = OP_RS, TP2, .ndim = 3, .shape = {4, 3, 4}, .dim = 0, .wk = 2,
                    .wout = {3, 2}});
}
MT_TEST(rs_tp4_dim1_h_param) {
    run_spec((spec){.op = OP_RS, TP4, .ndim = 3, .shape = {2, 8, 4}, .dim = 1, .wk = 1,
                    .wout = {5}, .xm = X_PARAM, .extra = true});
}
MT_TEST(rs_tp4_dim0_w3d) {
    run_spec((spec){.op = OP_RS, TP4, .ndim = 3, .shape = {4, 3, 4}, .dim = 0, .wk = 2,
                    .wout = {3, 2}});
}
MT_TEST(rs_dp2tp2_dim1) {
    run_spec((spec){.op = OP_RS, DP2TP2, .ndim = 3, .shape = {2, 4, 4}, .dim = 1, .wk = 1,
                    .wout = {5}});
}
MT_TEST(rs_dp2tp2_dim0_w3d) {
    run_spec((spec){.op = OP_RS, DP2TP2, .ndim = 3, .shape = {4, 3, 4}, .dim = 0, .wk = 2,
                    .wout = {3, 2}, .extra = true});
}
MT_TEST(rs_4d_h_input) {   /* no dh: the weight gradient's cotangent is gathered alone */
    run_spec((spec){.op = OP_RS, TP2, .ndim = 4, .shape = {2, 4, 2, 4}, .dim = 1, .wk = 1,
                    .wout = {5}, .xm = X_INPUT});
}

/* ---- a group of one: no transfers, the same products ---- */
MT_TEST(group_of_one) {
    run_spec((spec){.op = OP_AG, .mesh = "data=2,tensor=1", .axes = "tensor", .devices = 2,
                    .ndim = 3, .shape = {2, 3, 4}, .dim = 1, .wk = 1, .wout = {5}, .bias = true,
                    .extra = true});
    run_spec((spec){.op = OP_RS, .mesh = "data=2,tensor=1", .axes = "tensor", .devices = 2,
                    .ndim = 3, .shape = {2, 3, 4}, .dim = 1, .wk = 1, .wout = {5}, .extra = true});
    run_spec((spec){.op = OP_RS, .mesh = "data=2,tensor=1", .axes = "tensor", .devices = 2,
                    .ndim = 3, .shape = {2, 3, 4}, .dim = 0, .wk = 1, .wout = {5}, .xm = X_INPUT});
}

/* ---- chunks of several KiB: the threads transport's asynchronous path ---- */
MT_TEST(ag_large_async) {
    run_spec((spec){.op = OP_AG, TP2, .ndim = 3, .shape = {2, 16, 48}, .dim = 1, .wk = 1,
                    .wout = {40}, .bias = true, .extra = true});
}
MT_TEST(rs_large_async_tp4) {
    run_spec((spec){.op = OP_RS, TP4, .ndim = 3, .shape = {2, 64, 24}, .dim = 1, .wk = 1,
                    .wout = {48}, .extra = true});
}
MT_TEST(ag_large_async_dp2tp2_dim0) {
    run_spec((spec){.op = OP_AG, DP2TP2, .ndim = 3, .shape = {4, 8, 40}, .dim = 0, .wk = 1,
                    .wout = {36}, .bias = true});
}
/* comm's check mode: every request queued, each ring step verified to match */
MT_TEST(ag_rs_check_mode) {
    run_spec((spec){.op = OP_AG, TP4, .ndim = 3, .shape = {2, 16, 32}, .dim = 1, .wk = 1,
                    .wout = {24}, .bias = true, .check = true});
    run_spec((spec){.op = OP_RS, TP4, .ndim = 3, .shape = {2, 16, 32}, .dim = 1, .wk = 1,
                    .wout = {24}, .check = true});
}

/* ======================================================================== */
/* The trace                                                                 */
/* ======================================================================== */

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

/* Counts the trace's events named `name` whose bytes are `bytes` (the writer
 * puts one event a line). */
static int count_spans(const char *js, const char *name, long long bytes) {
    char key[96], want[48];
    snprintf(key, sizeof key, "{\"name\":\"%s\",", name);
    snprintf(want, sizeof want, "\"bytes\":%lld,", bytes);
    int n = 0;
    for (const char *p = strstr(js, key); p; p = strstr(p + 1, key)) {
        const char *eol = strchr(p, '\n'), *b = strstr(p, want);
        if (b && (!eol || b < eol)) n++;
    }
    return n;
}

/* all_gather_linear x (2,16,48) -> (2,32,40), then linear_reduce_scatter of
 * its output back to (2,16,24), fused, compiled on the device over "tensor";
 * *x is the input. */
static mt_status ring_graph(mt_ctx *ctx, mt_graph **out, mt_tensor **x) {
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "tensor", &ax));
    mt_graph *g = *out = mt_graph_create();
    DEV_OK(mt_graph_set_ctx(g, ctx));
    const mt_init init = {MT_INIT_NORMAL, 0.1f};
    *x = mt_input(g, "x", MT_F32, 3, (int64_t[]){2, 16, 48});
    mt_tensor *px = mt_param(g, "px", 3, (int64_t[]){2, 16, 48}, init);
    mt_tensor *w1 = mt_param(g, "w1", 2, (int64_t[]){40, 48}, init);
    mt_tensor *w2 = mt_param(g, "w2", 2, (int64_t[]){24, 40}, init);
    mt_tensor *h = mt_graph_all_gather_linear(g, mt_mul(g, *x, px), w1, NULL, ax, 1);
    mt_tensor *y = mt_graph_linear_reduce_scatter(g, h, w2, ax, 1);
    return mt_graph_compile(g, mt_sum(g, y), &(mt_compile_opts){.seed = 1});
}

/* ring_graph's forward and backward on tensor=2. */
static mt_status traced_device(mt_ctx *ctx, void *arg) {
    (void)arg;
    mt_graph *g = NULL;
    mt_tensor *x = NULL;
    mt_status s = ring_graph(ctx, &g, &x);
    if (s == MT_OK) {
        fill(x, mt_ctx_device(ctx), -1);
        s = fwd_bwd(g);
    }
    mt_graph_free(g);
    return s;
}

MT_TEST(trace_shows_ring_steps) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/mt_test_collmatmul_%d.json", (int)getpid());
    mt_launch_opts o = mt_test_launch_opts("tensor=2", 2);
    o.trace = path;
    MT_CHECK_OK(mt_launch(&o, traced_device, NULL));
    char *js = read_all(path);
    MT_CHECK(js, "no trace at %s", path);
    /* per device, one ring step (P = 2) of each: the forward ag_linear
     * moves x's chunk (2,16,48), the forward linear_rs a sum (2,16,24);
     * backward, the dh ring (ag_linear) moves dy (2,16,24) and the dx ring
     * (linear_rs) a sum (2,16,48) */
    const char *name = "ppermute (async) 'tensor'";
    int n48 = count_spans(js, name, 2 * 16 * 48 * 4), n24 = count_spans(js, name, 2 * 16 * 24 * 4);
    MT_CHECK(n48 == 4 && n24 == 4, "%d and %d '%s' spans of %d and %d bytes, want 4 and 4 (two "
             "per device)\n%.2000s", n48, n24, name, 2 * 16 * 48 * 4, 2 * 16 * 24 * 4, js);
    MT_CHECK(strstr(js, "\"device 0 comm 1\"") && strstr(js, "\"device 1 comm 1\""),
             "the ring steps are not on the devices' comm lanes");
    free(js);
    remove(path);
}

/* ======================================================================== */
/* Kernel scratch                                                            */
/* ======================================================================== */

/* ring_graph on devices of 3 kernel threads: the rings run
 * on the device's thread, so their scratch is one buffer, not one a thread.
 * A chunk is outer 2 blocks of R 16 rows: the forward linear_rs (K 40, N
 * 24) and the backward's dx ring (K 40, N 48) hold three sums (outer·R·N
 * each) and the chunk's rows of their input (outer·R·K); the ag_linears one
 * step's products (outer·R·N, N 40 or 24). */
static mt_status scratch_device(mt_ctx *ctx, void *arg) {
    size_t *bytes = arg;
    mt_graph *g = NULL;
    mt_tensor *x = NULL;
    mt_status s = ring_graph(ctx, &g, &x);
    if (s == MT_OK && mt_ctx_device(ctx) == 0) *bytes = mt_graph_get_stats(g).scratch_bytes;
    mt_graph_free(g);
    return s;
}

MT_TEST(ring_scratch_once_per_device) {
    size_t bytes = 0;
    mt_launch_opts o = mt_test_launch_opts("tensor=2", 2);
    o.kernel_threads = 3;
    MT_CHECK_OK(mt_launch(&o, scratch_device, &bytes));
    /* the dx ring's (K 40 -> N 48): the most of all calls */
    const size_t rows = 2 * 16, want = (3 * rows * 48 + rows * 40) * sizeof(float);
    MT_CHECK(bytes == want, "kernel scratch %zu bytes, want %zu: the rings' scratch once "
             "(not once per kernel thread)", bytes, want);
}

/* ======================================================================== */
/* Errors                                                                    */
/* ======================================================================== */

typedef mt_tensor *(*build_fn)(mt_graph *g, mt_ctx *ctx, mt_axes ax);

static mt_status try_build(mt_ctx *ctx, bool bind, build_fn fn) {
    mt_graph *g = mt_graph_create();
    if (bind) mt_graph_set_ctx(g, ctx);
    mt_axes ax;
    mt_ctx_axes(ctx, "tensor", &ax);
    mt_tensor *y = fn(g, ctx, ax);
    mt_status s = mt_graph_status(g);
    if ((y == NULL) != (s != MT_OK)) s = mt_fail(MT_EINTERNAL, "builder result and status disagree");
    else if (s != MT_OK) mt_fail(s, "%s", mt_graph_errmsg(g));
    mt_graph_free(g);
    return s;
}

static mt_tensor *in(mt_graph *g, const char *name, mt_dtype dt, int n, int64_t a, int64_t b,
                     int64_t c) {
    const int64_t s[3] = {a, b, c};
    return mt_input(g, name, dt, n, s);
}
static mt_tensor *b_ok_ag(mt_graph *g, mt_ctx *c, mt_axes ax) {
    return mt_graph_all_gather_linear(g, in(g, "x", MT_F32, 3, 2, 3, 4), in(g, "w", MT_F32, 2, 5, 4, 0),
                                      in(g, "b", MT_F32, 1, 5, 0, 0), ax, 1);
}
static mt_tensor *b_w_last(mt_graph *g, mt_ctx *c, mt_axes ax) {
    return mt_graph_all_gather_linear(g, in(g, "x", MT_F32, 3, 2, 3, 4),
                                      in(g, "wbad", MT_F32, 2, 5, 3, 0), NULL, ax, 1);
}
static mt_tensor *b_bias(mt_graph *g, mt_ctx *c, mt_axes ax) {
    return mt_graph_all_gather_linear(g, in(g, "x", MT_F32, 3, 2, 3, 4), in(g, "w", MT_F32, 2, 5, 4, 0),
                                      in(g, "bbad", MT_F32, 1, 4, 0, 0), ax, 1);
}
static mt_tensor *b_dim_last(mt_graph *g, mt_ctx *c, mt_axes ax) {
    return mt_graph_all_gather_linear(g, in(g, "xlast", MT_F32, 3, 2, 3, 4),
                                      in(g, "w", MT_F32, 2, 5, 4, 0), NULL, ax, 2);
}
static mt_tensor *b_i32(mt_graph *g, mt_ctx *c, mt_axes ax) {
    return mt_graph_all_gather_linear(g, in(g, "xint", MT_I32, 3, 2, 3, 4),
                                      in(g, "w", MT_F32, 2, 5, 4, 0), NULL, ax, 1);
}
static mt_tensor *b_rs_split(mt_graph *g, mt_ctx *c, mt_axes ax) {
    return mt_graph_linear_reduce_scatter(g, in(g, "hodd", MT_F32, 3, 2, 6, 4),
                                          in(g, "w", MT_F32, 2, 5, 4, 0), ax, 1);
}
static mt_tensor *b_rs_w(mt_graph *g, mt_ctx *c, mt_axes ax) {
    return mt_graph_linear_reduce_scatter(g, in(g, "h", MT_F32, 3, 2, 8, 4),
                                          in(g, "wrs", MT_F32, 2, 4, 5, 0), ax, 1);
}
static mt_tensor *b_bad_axes(mt_graph *g, mt_ctx *c, mt_axes ax) {
    return mt_graph_linear_reduce_scatter(g, in(g, "h", MT_F32, 3, 2, 8, 4),
                                          in(g, "w", MT_F32, 2, 5, 4, 0),
                                          (mt_axes){.n = 1, .axis = {3}}, 1);
}

#define DEV_FAILS(call, code, a, b)                                                         \
    do {                                                                                   \
        mt_status s_ = (call);                                                             \
        if (s_ != (code) || !strstr(mt_errmsg(), a) || !strstr(mt_errmsg(), b))            \
            DEV_FAIL("%s -> %s '%s'; want %s naming '%s' and '%s'", #call,                 \
                     mt_status_name(s_), mt_errmsg(), mt_status_name(code), a, b);         \
    } while (0)

static mt_status build_errors(mt_ctx *ctx, void *arg) {
    (void)arg;
    DEV_OK(try_build(ctx, true, b_ok_ag));
    DEV_FAILS(try_build(ctx, false, b_ok_ag), MT_ESTATE, "mt_graph_set_ctx", "all_gather_linear");
    DEV_FAILS(try_build(ctx, true, b_w_last), MT_ESHAPE, "'wbad'", "(5,3)");
    DEV_FAILS(try_build(ctx, true, b_bias), MT_ESHAPE, "bias 'bbad'", "(4)");
    DEV_FAILS(try_build(ctx, true, b_dim_last), MT_ESHAPE, "'xlast'", "dim 2");
    DEV_FAILS(try_build(ctx, true, b_i32), MT_EUNSUPPORTED, "'xint'", "i32");
    DEV_FAILS(try_build(ctx, true, b_rs_split), MT_ESHAPE, "'hodd'", "4 blocks");
    DEV_FAILS(try_build(ctx, true, b_rs_w), MT_ESHAPE, "'wrs'", "linear_reduce_scatter");
    DEV_FAILS(try_build(ctx, true, b_bad_axes), MT_EINVAL, "linear_reduce_scatter", "'h'");
    return MT_OK;
}

MT_TEST(build_errors_name_the_operand) {
    mt_launch_opts o = mt_test_launch_opts("tensor=4", 4);
    MT_CHECK_OK(mt_launch(&o, build_errors, NULL));
}

/* Device 1 fails before the ring: the others' forwards fail (MT_EABORTED,
 * naming the node) instead of waiting for it. */
typedef struct {
    mt_status st[2];
    char      msg[2][512];
} abort_result;

static mt_status fail_early(mt_ctx *ctx, void *arg) {
    abort_result *res = arg;
    int me = mt_ctx_device(ctx);
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "tensor", &ax));
    mt_graph *g = mt_graph_create();
    DEV_OK(mt_graph_set_ctx(g, ctx));
    mt_tensor *x = mt_param(g, "x", 3, (int64_t[]){2, 16, 48}, (mt_init){MT_INIT_ONES, 0});
    mt_tensor *w = mt_param(g, "w", 2, (int64_t[]){8, 48}, (mt_init){MT_INIT_ONES, 0});
    mt_tensor *loss = mt_sum(g, mt_graph_all_gather_linear(g, x, w, NULL, ax, 1));
    DEV_OK(mt_graph_compile(g, loss, NULL));
    mt_status s = me == 1 ? mt_fail(MT_EINVAL, "device 1 gives up before the ring")
                          : mt_graph_forward(g);
    res->st[me] = s;
    snprintf(res->msg[me], sizeof res->msg[me], "%s", mt_errmsg());
    mt_graph_free(g);
    return s;
}

MT_TEST(failed_device_aborts_the_ring) {
    abort_result res;
    memset(&res, 0, sizeof res);
    mt_launch_opts o = mt_test_launch_opts("tensor=2", 2);
    mt_status s = mt_launch(&o, fail_early, &res);
    MT_CHECK(s != MT_OK, "the launch succeeded although device 1 failed");
    MT_CHECK(res.st[0] == MT_EABORTED, "device 0: forward -> %s (%s), want MT_EABORTED",
             mt_status_name(res.st[0]), res.msg[0]);
    MT_CHECK(strstr(res.msg[0], "ag_linear") && strstr(res.msg[0], "forward node"),
             "device 0: message '%s' does not name the ag_linear node", res.msg[0]);
}

/* ======================================================================== */
/* mt_ppermute_start                                                         */
/* ======================================================================== */

/* Two requests in flight (a ring shift and a shift without wrap, whose rank
 * 0 receives zeros), waited in reverse order, then one completed by a
 * blocking collective, for a small count (comm's queue) and a large one
 * (the transport's asynchronous path). */
static mt_status ppermute_device(mt_ctx *ctx, void *arg) {
    (void)arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "i", &ax));
    const int P = mt_axis_size(ctx, ax), r = mt_axis_index(ctx, ax), me = mt_ctx_device(ctx);
    int ring[8][2], shift[8][2];
    for (int k = 0; k < P; k++) {
        ring[k][0] = k; ring[k][1] = (k + 1) % P;
        shift[k][0] = k; shift[k][1] = k + 1;
    }
    const size_t counts[2] = {5, 6000};
    for (int c = 0; c < 2; c++) {
        size_t n = counts[c];
        float *send = malloc(n * sizeof *send), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        if (!send || !a || !b) DEV_FAIL("out of memory");
        for (size_t i = 0; i < n; i++) send[i] = val(me, 7, (int64_t)i);
        mt_request ra, rb, rc;
        DEV_OK(mt_ppermute_start(ctx, ax, send, a, n, MT_F32, (const int (*)[2])ring, P, &ra));
        DEV_OK(mt_ppermute_start(ctx, ax, send, b, n, MT_F32, (const int (*)[2])shift, P - 1, &rb));
        DEV_OK(mt_wait(ctx, &rb));
        DEV_OK(mt_wait(ctx, &ra));
        /* mt_mesh_group: the device ids of the group in rank order */
        int members[8];
        mt_mesh_group(mt_ctx_mesh(ctx), ax, me, members);
        int from = members[(r + P - 1) % P];
        for (size_t i = 0; i < n; i++) {
            if (a[i] != val(from, 7, (int64_t)i))
                DEV_FAIL("ring, count %zu: recv[%zu] = %g, want device %d's %g", n, i, a[i], from,
                         val(from, 7, (int64_t)i));
            float want_b = r == 0 ? 0.0f : val(from, 7, (int64_t)i);
            if (b[i] != want_b)
                DEV_FAIL("shift, count %zu: recv[%zu] = %g, want %g", n, i, b[i], want_b);
        }
        memset(a, 0, n * sizeof *a);
        DEV_OK(mt_ppermute_start(ctx, ax, send, a, n, MT_F32, (const int (*)[2])ring, P, &rc));
        DEV_OK(mt_barrier(ctx, ax));   /* a blocking collective completes the queue first */
        for (size_t i = 0; i < n; i++)
            if (a[i] != val(from, 7, (int64_t)i)) DEV_FAIL("ring completed by a barrier: recv[%zu]", i);
        DEV_OK(mt_wait(ctx, &rc));     /* already run: OK */
        free(send);
        free(a);
        free(b);
    }
    /* a bad pair fails on the device, before anything is queued */
    int bad[1][2] = {{0, P}};
    mt_request rd;
    float x = 0, y = 0;
    mt_status s = mt_ppermute_start(ctx, ax, &x, &y, 1, MT_F32, (const int (*)[2])bad, 1, &rd);
    if (s != MT_EINVAL || !strstr(mt_errmsg(), "outside the group"))
        DEV_FAIL("a pair naming rank %d -> %s '%s', want MT_EINVAL", P, mt_status_name(s), mt_errmsg());
    return MT_OK;
}

MT_TEST(ppermute_start) {
    mt_launch_opts o = mt_test_launch_opts("i=4", 4);
    MT_CHECK_OK(mt_launch(&o, ppermute_device, NULL));
    o.check = true;
    MT_CHECK_OK(mt_launch(&o, ppermute_device, NULL));
}

/* ======================================================================== */
/* Micro-benchmark (MT_BENCH=1 only)                                         */
/* ======================================================================== */

typedef struct {
    double fused_s[2], ref_s[2];   /* ag, rs: median seconds of one forward, device 0 */
} bench_result;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median wall time of `reps` forwards (the group starts each together). */
static mt_status time_forward(mt_ctx *ctx, mt_axes ax, mt_graph *g, int reps, double *out) {
    double t[64];
    for (int i = 0; i < reps; i++) {
        DEV_OK(mt_barrier(ctx, ax));
        double t0 = now_s();
        DEV_OK(mt_graph_forward(g));
        t[i] = now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    *out = t[reps / 2];
    return MT_OK;
}

/* x (8,64,256) split on T over tensor=2 -> w (512,256): ag_linear against
 * all_gather + linear; and back, h (8,64,512) · w (256,512)ᵀ reduce-scattered
 * on T: linear_rs against linear + psum_scatter. */
static mt_status bench_device(mt_ctx *ctx, void *arg) {
    bench_result *res = arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "tensor", &ax));
    const mt_init init = {MT_INIT_NORMAL, 0.02f};
    for (int op = 0; op < 2; op++)
        for (int fused = 0; fused < 2; fused++) {
            mt_graph *g = mt_graph_create();
            DEV_OK(mt_graph_set_ctx(g, ctx));
            mt_tensor *y;
            if (op == 0) {
                mt_tensor *x = mt_param(g, "x", 3, (int64_t[]){8, 32, 256}, init);
                mt_tensor *w = mt_param(g, "w", 2, (int64_t[]){512, 256}, init);
                y = fused ? mt_graph_all_gather_linear(g, x, w, NULL, ax, 1)
                          : mt_linear(g, mt_graph_all_gather(g, x, ax, 1), w, NULL);
            } else {
                mt_tensor *h = mt_param(g, "h", 3, (int64_t[]){8, 64, 512}, init);
                mt_tensor *w = mt_param(g, "w", 2, (int64_t[]){256, 512}, init);
                y = fused ? mt_graph_linear_reduce_scatter(g, h, w, ax, 1)
                          : mt_graph_psum_scatter(g, mt_linear(g, h, w, NULL), ax, 1);
            }
            DEV_OK(mt_graph_compile(g, mt_sum(g, y), &(mt_compile_opts){.seed = 1, .no_grad = true}));
            double t;
            DEV_OK(time_forward(ctx, ax, g, 3, &t));   /* warm up */
            DEV_OK(time_forward(ctx, ax, g, 21, &t));
            if (mt_ctx_device(ctx) == 0) (fused ? res->fused_s : res->ref_s)[op] = t;
            mt_graph_free(g);
        }
    return MT_OK;
}

MT_TEST(bench_ag_linear) {
    if (!getenv("MT_BENCH")) return;
    bench_result res;
    memset(&res, 0, sizeof res);
    mt_launch_opts o = mt_test_launch_opts("tensor=2", 2);
    o.kernel_threads = 0;
    MT_CHECK_OK(mt_launch(&o, bench_device, &res));
    const char *names[2] = {"ag_linear  x (8,64,256)/2 -> w (512,256)",
                            "linear_rs  h (8,64,512) · w (256,512)ᵀ /2"};
    printf("%-44s %12s %14s %8s\n", "op (tensor=2 threads, forward)", "fused", "unfused", "ratio");
    for (int op = 0; op < 2; op++)
        printf("%-44s %9.3f ms %11.3f ms %7.2fx\n", names[op], 1e3 * res.fused_s[op],
               1e3 * res.ref_s[op], res.ref_s[op] / res.fused_s[op]);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
