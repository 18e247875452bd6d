/*
 * test_overlap.c — the data-parallel gradient all-reduce overlapped with the
 * rest of the backward (graph/exec.c): pvary's backward psum starts when W
 * reaches it and completes before anything needs it.
 *
 *  - The gradients equal a reference worked out by hand from every device's
 *    inputs (the sum over devices of each device's gradient), exactly: the
 *    values are small integers, so every sum is exact in f32 whatever its
 *    order. Also with accumulation over two backwards, after marking the
 *    gradients zero (the first contribution overwrites, including when a
 *    later W node adds to the same gradient: the reduction must complete
 *    before it), with B and W run apart, and against the synchronous path
 *    bit for bit, issuing the same number of collectives. 2 and 4 devices.
 *  - The trace shows the overlap: with four 512x512 weights, the first
 *    reduction starts inside "backward W" while W work remains (the later
 *    weights' gradients are computed after it started), one span per
 *    reduction from its start to its completion, on the device's comm lanes.
 *  - A device that fails while the others are in W makes them return
 *    MT_EABORTED naming the psum node, with nothing left in flight.
 */
#include "meshtrain.h"
#include "harness.h"
#include "pvary_loss.h"
#include "graph/graph_impl.h"   /* defer_until, sync_reduce, marking gradients zero */

#include <unistd.h>

#define DEV_OK(call)                                                                       \
    do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)
#define DEV_FAIL(...) return mt_fail(MT_EINTERNAL, __VA_ARGS__)

/* Small integers, different per device, element and buffer (salt). */
static float val(int dev, int64_t i, int salt) {
    return (float)((dev * 7 + i * 3 + salt * 5 + 1000) % 13 - 6);
}

static void fill(mt_tensor *t, int dev, int salt) {
    float *d = mt_tensor_f32(t);
    for (int64_t i = 0; i < mt_tensor_numel(t); i++) d[i] = val(dev, i, salt);
}

static mt_launch_opts opts_for(int devices, const char *trace) {
    mt_launch_opts o;
    memset(&o, 0, sizeof o);
    o.mesh = "data=-1";
    o.devices = devices;
    o.transport = MT_TRANSPORT_THREADS;
    o.timeout_s = 30;
    o.kernel_threads = 1;
    o.trace = trace;
    return o;
}

/* ======================================================================== */
/* Exact gradients of a 2-layer MLP                                          */
/* ======================================================================== */

/* x (B,C) per device; h = x·W1ᵀ + b1 (B,H); o = h·W2ᵀ + b2 (B,O);
 * L = Σ o ⊙ t + Σ W2 ⊙ K, the parameters replicated (pvary'd where they
 * meet x), t per device, K the same everywhere. The second term uses W2
 * directly and is built first, so its gradient node comes after pvary's
 * psum in W: it adds to grad(W2) after the psum's first contribution. It
 * is replicated and meets the varying first term, so the builder pvaries
 * it (a fifth psum, of its scalar cotangent): F = Σ_d L_d holds it P
 * times. */
enum { B = 4, C = 32, H = 64, O = 16 };

typedef struct {
    mt_tensor *x, *t, *K, *w1, *b1, *w2, *b2;
} mlp;

static mt_graph *build_mlp(mt_ctx *ctx, mt_axes data, mlp *m) {
    mt_graph *g = mt_graph_create();
    if (mt_graph_set_ctx(g, ctx) != MT_OK) { mt_graph_free(g); return NULL; }
    const mt_init z = {MT_INIT_ZEROS, 0};
    m->w1 = mt_param(g, "w1", 2, (int64_t[]){H, C}, z);
    m->b1 = mt_param(g, "b1", 1, (int64_t[]){H}, z);
    m->w2 = mt_param(g, "w2", 2, (int64_t[]){O, H}, z);
    m->b2 = mt_param(g, "b2", 1, (int64_t[]){O}, z);
    m->x = mt_input(g, "x", MT_F32, 2, (int64_t[]){B, C});
    m->t = mt_input(g, "t", MT_F32, 2, (int64_t[]){B, O});
    m->K = mt_constant(g, "K", MT_F32, 2, (int64_t[]){O, H});
    mt_tensor *direct = mt_sum(g, mt_mul(g, m->w2, m->K));
    mt_tensor *h = mt_linear(g, m->x, mt_graph_pvary(g, m->w1, data), mt_graph_pvary(g, m->b1, data));
    mt_tensor *o = mt_linear(g, h, mt_graph_pvary(g, m->w2, data), mt_graph_pvary(g, m->b2, data));
    mt_tensor *loss = mt_add(g, mt_sum(g, mt_mul(g, o, m->t)), direct);
    if (mt_graph_compile(g, loss, NULL) != MT_OK) { mt_graph_free(g); return NULL; }
    return g;
}

/* The reference gradients, in double: Σ over devices d of d's gradient,
 * plus K for W2's direct term (once: it is not reduced). */
typedef struct {
    double w1[H * C], b1[H], w2[O * H], b2[O];
} grads;

static void reference(int P, grads *r) {
    memset(r, 0, sizeof *r);
    for (int d = 0; d < P; d++) {
        double x[B * C], t[B * O], hh[B * H], dh[B * H];
        for (int i = 0; i < B * C; i++) x[i] = val(d, i, 1);
        for (int i = 0; i < B * O; i++) t[i] = val(d, i, 2);
        for (int b = 0; b < B; b++)
            for (int j = 0; j < H; j++) {
                double s = val(0, j, 4);
                for (int c = 0; c < C; c++) s += x[b * C + c] * val(0, j * C + c, 3);
                hh[b * H + j] = s;
            }
        /* do = t; dW2 = tᵀ h; db2 = Σ_b t; dh = t W2; dW1 = dhᵀ x; db1 = Σ_b dh */
        for (int b = 0; b < B; b++)
            for (int j = 0; j < H; j++) {
                double s = 0;
                for (int k = 0; k < O; k++) s += t[b * O + k] * val(0, k * H + j, 5);
                dh[b * H + j] = s;
            }
        for (int b = 0; b < B; b++) {
            for (int k = 0; k < O; k++) {
                r->b2[k] += t[b * O + k];
                for (int j = 0; j < H; j++) r->w2[k * H + j] += t[b * O + k] * hh[b * H + j];
            }
            for (int j = 0; j < H; j++) {
                r->b1[j] += dh[b * H + j];
                for (int c = 0; c < C; c++) r->w1[j * C + c] += dh[b * H + j] * x[b * C + c];
            }
        }
    }
    /* every device's loss holds the direct term (a replicated value added to
     * a varying one: graph.h's "Device variance"), so F holds it P times */
    for (int i = 0; i < O * H; i++) r->w2[i] += P * val(0, i, 7);
}

/* grad(p) == factor · want, exactly. */
static mt_status check_grad(mt_tensor *p, const double *want, double factor, const char *when) {
    const float *gd = mt_tensor_f32(mt_tensor_grad(p));
    for (int64_t i = 0; i < mt_tensor_numel(p); i++)
        if ((double)gd[i] != factor * want[i])
            DEV_FAIL("%s: grad %s[%lld] = %.9g, want %.9g", when, mt_tensor_name(p), (long long)i,
                     gd[i], factor * want[i]);
    return MT_OK;
}

static mt_status check_all(const mlp *m, const grads *r, double factor, const char *when) {
    DEV_OK(check_grad(m->w1, r->w1, factor, when));
    DEV_OK(check_grad(m->b1, r->b1, factor, when));
    DEV_OK(check_grad(m->w2, r->w2, factor, when));
    return check_grad(m->b2, r->b2, factor, when);
}

static mt_status fwd_bwd(mt_graph *g) {
    DEV_OK(mt_graph_forward(g));
    return mt_graph_backward(g);
}

static mt_status exact_device(mt_ctx *ctx, void *arg) {
    (void)arg;
    const int me = mt_ctx_device(ctx), P = mt_mesh_size(mt_ctx_mesh(ctx));
    mt_axes data;
    DEV_OK(mt_ctx_axes(ctx, "data", &data));
    mlp m;
    mt_graph *g = build_mlp(ctx, data, &m);
    if (!g) DEV_FAIL("building the MLP: %s", mt_errmsg());
    fill(m.x, me, 1);
    fill(m.t, me, 2);
    fill(m.w1, 0, 3);
    fill(m.b1, 0, 4);
    fill(m.w2, 0, 5);
    fill(m.b2, 0, 6);
    fill(m.K, 0, 7);

    /* five deferred psums in W (four parameters', the direct term's);
     * W2's completes before the direct term adds, and the direct term's
     * before its cotangent reaches W2 */
    int deferred = 0, early = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const mt_node *n = &g->nodes[i];
        if (n->call.op != MT_OP_PSUM) continue;
        if (n->phase != MT_PHASE_W || n->defer_until < 0)
            DEV_FAIL("pvary's psum into '%s' is not deferred (phase %d)", n->call.out->name,
                     (int)n->phase);
        deferred++;
        early += n->defer_until < g->prog->n_w;
    }
    if (deferred != 5 || early != 2)
        DEV_FAIL("%d deferred psums (%d due before the end of W); want 5 (2)", deferred, early);

    grads *ref = malloc(sizeof *ref);   /* every device works out the same */
    if (!ref) DEV_FAIL("out of memory");
    reference(P, ref);
    mt_status s = MT_OK;
#define STEP(call) do { if ((s = (call)) != MT_OK) goto done; } while (0)
    uint64_t c0 = mt_ctx_collectives(ctx);
    mt_graph_zero_grad(g);
    STEP(fwd_bwd(g));
    uint64_t per_backward = mt_ctx_collectives(ctx) - c0;
    if (g->prog->n_inflight) { s = mt_fail(MT_EINTERNAL, "%d reductions left in flight", g->prog->n_inflight); goto done; }
    STEP(check_all(&m, ref, 1, "one backward"));
    STEP(fwd_bwd(g));
    STEP(check_all(&m, ref, 2, "two backwards accumulated"));
    mt__graph_mark_grads_zero(g);
    STEP(fwd_bwd(g));
    STEP(check_all(&m, ref, 1, "after marking the gradients zero"));
    mt_graph_zero_grad(g);
    STEP(mt_graph_forward(g));
    STEP(mt_graph_backward_b(g));
    STEP(mt_graph_backward_w(g));
    STEP(check_all(&m, ref, 1, "B and W apart"));

    /* the synchronous path: the same bits, the same collectives */
    float *deferred_w1 = malloc(H * C * sizeof(float));
    if (!deferred_w1) { s = mt_fail(MT_ENOMEM, "out of memory"); goto done; }
    memcpy(deferred_w1, mt_tensor_f32(mt_tensor_grad(m.w1)), H * C * sizeof(float));
    g->prog->sync_reduce = true;
    mt_graph_zero_grad(g);
    c0 = mt_ctx_collectives(ctx);
    s = fwd_bwd(g);
    if (s == MT_OK && mt_ctx_collectives(ctx) - c0 != per_backward)
        s = mt_fail(MT_EINTERNAL, "synchronous backward issued %llu collectives, deferred %llu",
                    (unsigned long long)(mt_ctx_collectives(ctx) - c0),
                    (unsigned long long)per_backward);
    if (s == MT_OK && memcmp(deferred_w1, mt_tensor_f32(mt_tensor_grad(m.w1)), H * C * sizeof(float)))
        s = mt_fail(MT_EINTERNAL, "grad w1 differs between the deferred and synchronous paths");
    if (s == MT_OK) s = check_all(&m, ref, 1, "synchronous");
    free(deferred_w1);
done:
#undef STEP
    free(ref);
    mt_graph_free(g);
    return s;
}

MT_TEST(deferred_gradients_are_exact_on_2_devices) {
    mt_launch_opts o = opts_for(2, NULL);
    MT_CHECK_OK(mt_launch(&o, exact_device, NULL));
}

MT_TEST(deferred_gradients_are_exact_on_4_devices) {
    mt_launch_opts o = opts_for(4, NULL);
    MT_CHECK_OK(mt_launch(&o, exact_device, NULL));
}

/* ======================================================================== */
/* More reductions than may be in flight; a caller holding requests          */
/* ======================================================================== */

/* L = Σ_k Σ x ⊙ pvary(p_k), NP parameters of N floats (large enough for the
 * transport to start them at once): grad p_k = Σ over devices of x. More
 * than MT_MAX_PENDING, so the oldest completes before another starts. With
 * `hold`, the caller first starts MT_MAX_PENDING requests of its own and
 * waits for them after the backward: the queue is full, so the reductions
 * run as they come until a blocking one empties it. */
enum { NP = MT_MAX_PENDING + 5, N = 2048 };

static mt_status many_device(mt_ctx *ctx, void *arg) {
    const bool hold = *(const bool *)arg;
    const int me = mt_ctx_device(ctx), P = mt_mesh_size(mt_ctx_mesh(ctx));
    mt_axes data;
    DEV_OK(mt_ctx_axes(ctx, "data", &data));
    mt_graph *g = mt_graph_create();
    DEV_OK(mt_graph_set_ctx(g, ctx));
    mt_tensor *x = mt_input(g, "x", MT_F32, 1, (int64_t[]){N}), *p[NP];
    mt_tensor *loss = mt_test_pvary_loss(g, x, NP, N, data, p);
    DEV_OK(mt_graph_compile(g, loss, NULL));
    fill(x, me, 1);
    float mine[MT_MAX_PENDING][8];   /* the caller's own requests' buffers */
    mt_request req[MT_MAX_PENDING];
    if (hold)
        for (int r = 0; r < MT_MAX_PENDING; r++) {
            for (int i = 0; i < 8; i++) mine[r][i] = (float)(r + me);
            DEV_OK(mt_all_reduce_start(ctx, data, mine[r], 8, MT_F32, MT_REDUCE_SUM, &req[r]));
        }
    mt_status s = fwd_bwd(g);
    for (int r = 0; hold && r < MT_MAX_PENDING; r++) {
        mt_status w = mt_wait(ctx, &req[r]);
        if (s == MT_OK) s = w;
        double want = (double)r * P + (double)P * (P - 1) / 2;
        if (s == MT_OK && mine[r][7] != want)
            s = mt_fail(MT_EINTERNAL, "the caller's request %d gave %g, want %g", r, mine[r][7], want);
    }
    for (int k = 0; k < NP && s == MT_OK; k++) {
        const float *gd = mt_tensor_f32(mt_tensor_grad(p[k]));
        for (int64_t i = 0; i < N && s == MT_OK; i++) {
            double want = 0;
            for (int d = 0; d < P; d++) want += val(d, i, 1);
            if (gd[i] != want)
                s = mt_fail(MT_EINTERNAL, "grad p%d[%lld] = %g, want %g", k, (long long)i, gd[i], want);
        }
    }
    mt_graph_free(g);
    return s;
}

MT_TEST(more_reductions_than_may_be_in_flight) {
    for (int devices = 2; devices <= 4; devices += 2)
        for (int hold = 0; hold < 2; hold++) {
            bool h = hold;
            mt_launch_opts o = opts_for(devices, NULL);
            mt_status s = mt_launch(&o, many_device, &h);
            MT_CHECK(s == MT_OK, "%d devices%s: %s", devices,
                     hold ? ", the caller holding requests" : "", mt_errmsg());
        }
}

/* ======================================================================== */
/* The trace shows the overlap                                               */
/* ======================================================================== */

/* h_k = h_{k-1} · pvary(W_k)ᵀ, four 512x512 weights: W runs dW4, starts its
 * psum, dW3 (a 64x512x512 GEMM), starts, ... so three GEMMs of W follow the
 * first start. */
enum { LAYERS = 4, WIDTH = 512, ROWS = 64 };

static mt_graph *build_chain(mt_ctx *ctx, mt_axes data, mt_tensor **x, mt_tensor **t) {
    mt_graph *g = mt_graph_create();
    if (mt_graph_set_ctx(g, ctx) != MT_OK) { mt_graph_free(g); return NULL; }
    *x = mt_input(g, "x", MT_F32, 2, (int64_t[]){ROWS, WIDTH});
    *t = mt_input(g, "t", MT_F32, 2, (int64_t[]){ROWS, WIDTH});
    mt_tensor *h = *x;
    for (int k = 0; k < LAYERS; k++) {
        char name[16];
        snprintf(name, sizeof name, "w%d", k);
        mt_tensor *w = mt_param(g, name, 2, (int64_t[]){WIDTH, WIDTH},
                                (mt_init){MT_INIT_NORMAL, 0.02f});
        h = mt_linear(g, h, mt_graph_pvary(g, w, data), NULL);
    }
    mt_tensor *loss = mt_sum(g, mt_mul(g, h, *t));
    if (mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1}) != MT_OK) {
        mt_graph_free(g);
        return NULL;
    }
    return g;
}

static mt_status chain_device(mt_ctx *ctx, void *arg) {
    (void)arg;
    mt_axes data;
    DEV_OK(mt_ctx_axes(ctx, "data", &data));
    mt_tensor *x, *t;
    mt_graph *g = build_chain(ctx, data, &x, &t);
    if (!g) DEV_FAIL("building the chain: %s", mt_errmsg());
    fill(x, mt_ctx_device(ctx), 1);
    fill(t, mt_ctx_device(ctx), 2);
    mt_status s = fwd_bwd(g);
    mt_graph_free(g);
    return s;
}

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

/* One trace event: its name's line, ts, dur and tid. */
typedef struct { double ts, dur; int tid; } span;

/* Every complete event named `name` (the writer puts one event a line). */
static int find_spans(const char *js, const char *name, span *out, int cap) {
    char key[96];
    snprintf(key, sizeof key, "{\"name\":\"%s\",", name);
    int n = 0;
    for (const char *p = strstr(js, key); p && n < cap; p = strstr(p + 1, key)) {
        const char *ts = strstr(p, "\"ts\":"), *dur = strstr(p, "\"dur\":"), *tid = strstr(p, "\"tid\":");
        const char *eol = strchr(p, '\n');
        if (!ts || !dur || !tid || (eol && (ts > eol || dur > eol || tid > eol))) continue;
        out[n++] = (span){atof(ts + 5), atof(dur + 6), atoi(tid + 6)};
    }
    return n;
}

MT_TEST(reductions_overlap_the_remaining_w) {
    enum { DEVICES = 2 };
    char path[128];
    snprintf(path, sizeof path, "/tmp/mt_test_overlap_%d.json", (int)getpid());
    mt_launch_opts o = opts_for(DEVICES, path);
    MT_CHECK_OK(mt_launch(&o, chain_device, NULL));
    char *js = read_all(path);
    MT_CHECK(js, "no trace at %s", path);
    span w[8], ar[64], any[64];
    int n_w = find_spans(js, "backward W", w, 8);
    int n_ar = find_spans(js, "psum (async) 'data'", ar, 64);
    int n_sync = find_spans(js, "psum 'data'", any, 64);
    span wait[8];
    int n_wait = find_spans(js, "wait: gradient reductions", wait, 8);
    MT_CHECK(n_w == DEVICES, "%d \"backward W\" regions, want %d", n_w, DEVICES);
    MT_CHECK(find_spans(js, "forward", any, 64) == DEVICES &&
             find_spans(js, "backward B", any, 64) == DEVICES, "forward and backward B regions");
    MT_CHECK(n_ar == DEVICES * LAYERS && n_sync == 0,
             "%d async and %d blocking psum spans, want one async per weight and device (%d)",
             n_ar, n_sync, DEVICES * LAYERS);
    for (int d = 0; d < DEVICES; d++) {
        char lane[32];
        snprintf(lane, sizeof lane, "\"device %d comm 1\"", d);
        MT_CHECK(strstr(js, lane), "no comm lane %s", lane);
        const span *wd = NULL;
        for (int i = 0; i < n_w; i++)
            if (w[i].tid == d) wd = &w[i];
        MT_CHECK(wd, "no backward W region on device %d", d);
        /* the device's spans, in start order (the writer keeps it per track) */
        span mine[LAYERS];
        int n = 0;
        for (int i = 0; i < n_ar && n < LAYERS; i++)
            if ((ar[i].tid - 100000) / 64 == d) mine[n++] = ar[i];
        MT_CHECK(n == LAYERS, "device %d: %d reductions, want %d", d, n, LAYERS);
        double w_end = wd->ts + wd->dur;
        /* what W did not hide is waited for in a region of its own, right after W */
        double wait_end = w_end;
        for (int i = 0; i < n_wait; i++)
            if (wait[i].tid == d) {
                MT_CHECK(wait[i].ts >= w_end - 1, "device %d: the wait starts before W ends", d);
                wait_end = wait[i].ts + wait[i].dur;
            }
        for (int i = 0; i < n; i++)
            MT_CHECK(mine[i].ts >= wd->ts && mine[i].ts < w_end &&
                     mine[i].ts + mine[i].dur <= wait_end + 1,
                     "device %d: reduction %d [%.0f, %.0f] us does not start in backward W [%.0f, "
                     "%.0f] and end by the end of the wait (%.0f)", d, i, mine[i].ts,
                     mine[i].ts + mine[i].dur, wd->ts, w_end, wait_end);
        /* the first starts, then three weight-gradient GEMMs run before the
         * last one starts: it was in flight while W work remained */
        MT_CHECK(mine[0].ts < mine[LAYERS - 1].ts && mine[0].ts < w_end,
                 "device %d: the first reduction starts at %.0f us, the last at %.0f us, W ends "
                 "at %.0f us", d, mine[0].ts, mine[LAYERS - 1].ts, w_end);
        MT_CHECK(mine[0].ts + mine[0].dur > mine[LAYERS - 1].ts,
                 "device %d: the first reduction completed before the last W GEMM", d);
        fprintf(stderr, "  device %d: backward W %.0f us; first reduction started %.0f us into "
                "it, last %.0f us into it\n", d, wd->dur, mine[0].ts - wd->ts,
                mine[LAYERS - 1].ts - wd->ts);
    }
    free(js);
    remove(path);
}

/* ======================================================================== */
/* A failing device                                                          */
/* ======================================================================== */

typedef struct {
    mt_status st[4];
    char      msg[4][512];
    int       left[4];
} fail_result;

/* Device 2 fails after its B: the others are in W with reductions started
 * that it never joins. */
static mt_status fail_in_w(mt_ctx *ctx, void *arg) {
    fail_result *res = arg;
    const int me = mt_ctx_device(ctx);
    mt_axes data;
    DEV_OK(mt_ctx_axes(ctx, "data", &data));
    mt_tensor *x, *t;
    mt_graph *g = build_chain(ctx, data, &x, &t);
    if (!g) DEV_FAIL("building the chain: %s", mt_errmsg());
    fill(x, me, 1);
    fill(t, me, 2);
    mt_status s = mt_graph_forward(g);
    if (s == MT_OK) s = mt_graph_backward_b(g);
    if (s == MT_OK)
        s = me == 2 ? mt_fail(MT_EINVAL, "device 2 gives up before W") : mt_graph_backward_w(g);
    res->st[me] = s;
    res->left[me] = g->prog->n_inflight;
    snprintf(res->msg[me], sizeof res->msg[me], "%s", mt_errmsg());
    mt_graph_free(g);
    return s;
}

MT_TEST(failed_device_during_w_aborts_the_others) {
    fail_result res;
    memset(&res, 0, sizeof res);
    mt_launch_opts o = opts_for(4, NULL);
    double t0 = mt_time_now();
    mt_status s = mt_launch(&o, fail_in_w, &res);
    double took = mt_time_now() - t0;
    MT_CHECK(s == MT_EINVAL, "the launch returned %s (%s), want device 2's MT_EINVAL",
             mt_status_name(s), mt_errmsg());
    for (int d = 0; d < 4; d++) {
        if (d == 2) continue;
        MT_CHECK(res.st[d] == MT_EABORTED, "device %d: backward_w -> %s (%s), want MT_EABORTED",
                 d, mt_status_name(res.st[d]), res.msg[d]);
        MT_CHECK(strstr(res.msg[d], "backward W node") && strstr(res.msg[d], "psum"),
                 "device %d: message '%s' does not name the psum node", d, res.msg[d]);
        MT_CHECK(res.left[d] == 0, "device %d: %d reductions left in flight", d, res.left[d]);
    }
    /* they gave up on device 2's abort, not on the launch's timeout (their
     * MT_EABORTED above says so too; a bound of seconds would be a timed
     * one, and a loaded machine once took 5.5 s) */
    MT_CHECK(took < o.timeout_s, "the others took %.1f s to give up: the %g s timeout, not "
             "the abort", took, o.timeout_s);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
