/*
 * test_shard.c — host arrays on the mesh (mt_shard_put / mt_shard_gather),
 * the pmap linear-regression example, and the Chrome trace.
 *
 *  - put → gather round trips 1-D to 4-D arrays on meshes of 1, 2, 4, 2x2 and
 *    2x3 devices, with dims split over one axis, over two ('data+tensor'),
 *    and replicated; each device's shard is checked element by element
 *    against a block index computed here from the device's coordinates (not
 *    through the library's group ranks).
 *  - partial sums: every device holds a part, gather returns the sum.
 *  - errors: a dim that does not divide, an axis used twice.
 *  - the linear regression on 2, 4 and 8 devices computes the 1-device run
 *    (loss at every step within 1e-6 relative), which matches a plain-C SGD
 *    written here and the graph engine's trainer, and learns the true weights.
 *  - the trace file of a launch: Chrome trace JSON with one track per device,
 *    "comm" events with bytes and seq, "step" regions, balanced brackets.
 *
 * Every launch has a short collective timeout so a hang fails the case.
 */
#include "meshtrain.h"
#include "harness.h"
#include "shard_helpers.h"
#include "train_helpers.h"

#include <stdint.h>
#include <unistd.h>

/* ======================================================================== */
/* Round trips                                                               */
/* ======================================================================== */

/* The host array: element i holds i + 1 (exact in float for these sizes). */
static float *host_array(int64_t n) {
    float *g = malloc((size_t)(n ? n : 1) * sizeof *g);
    for (int64_t i = 0; i < n; i++) g[i] = (float)(i + 1);
    return g;
}

static mt_status rt_device(mt_ctx *ctx, void *arg) {
    const mt_test_shard_case *c = arg;
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    mt_sharding sh;
    mt_status s = mt_sharding_parse(mesh, c->spec, c->ndim, &sh);
    if (s != MT_OK) return s;
    int64_t parts[MT_MAX_DIMS], block[MT_MAX_DIMS], lshape[MT_MAX_DIMS], origin[MT_MAX_DIMS];
    mt_test_shard_blocks(mesh, &sh, c->ndim, mt_ctx_device(ctx), parts, block);
    for (int d = 0; d < c->ndim; d++) {
        lshape[d] = c->shape[d] / parts[d];
        origin[d] = block[d] * lshape[d];
    }
    const int64_t n = mt_test_numel(c->ndim, c->shape), ln = mt_test_numel(c->ndim, lshape);
    float *global = host_array(n);
    float *local = malloc((size_t)(ln ? ln : 1) * sizeof *local);
    float *back = malloc((size_t)(n ? n : 1) * sizeof *back);
    for (int64_t i = 0; i < n; i++) back[i] = NAN;
    s = mt_shard_put(ctx, &sh, global, c->ndim, c->shape, local);
    /* every local element against the global element at origin + its index */
    for (int64_t i = 0; s == MT_OK && i < ln; i++) {
        int64_t rem = i, g = 0, stride = 1, idx[MT_MAX_DIMS];
        for (int d = c->ndim - 1; d >= 0; d--) { idx[d] = rem % lshape[d]; rem /= lshape[d]; }
        for (int d = c->ndim - 1; d >= 0; d--) {
            g += (origin[d] + idx[d]) * stride;
            stride *= c->shape[d];
        }
        if (local[i] != global[g])
            s = mt_fail(MT_EINTERNAL, "mesh %s spec '%s': local[%lld] = %g, want global[%lld] = %g",
                        c->mesh, c->spec, (long long)i, (double)local[i], (long long)g,
                        (double)global[g]);
    }
    if (s == MT_OK) s = mt_shard_gather(ctx, &sh, local, c->ndim, c->shape, back);
    for (int64_t i = 0; s == MT_OK && i < n; i++)
        if (back[i] != global[i])
            s = mt_fail(MT_EINTERNAL, "mesh %s spec '%s': gathered[%lld] = %g, want %g", c->mesh,
                        c->spec, (long long)i, (double)back[i], (double)global[i]);
    free(back);
    free(local);
    free(global);
    return s;
}

static void run_cases(const mt_test_shard_case *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        mt_launch_opts o = mt_test_launch_opts(cases[i].mesh, cases[i].devices);
        mt_status s = mt_launch(&o, rt_device, (void *)&cases[i]);
        MT_CHECK(s == MT_OK, "mesh %s, spec '%s', %d-D: %s: %s", cases[i].mesh, cases[i].spec,
                 cases[i].ndim, mt_status_name(s), mt_errmsg());
    }
}

MT_TEST(put_gather_round_trip_1d_meshes) {
    static const mt_test_shard_case cases[] = {
        {"data=1", 1, "_", 1, {7}},
        {"data=1", 1, "data", 1, {7}},
        {"data=1", 1, "data,_", 2, {3, 5}},
        {"data=2", 2, "data", 1, {8}},
        {"data=2", 2, "_", 1, {5}},
        {"data=2", 2, "data,_", 2, {4, 6}},
        {"data=2", 2, "_,data", 2, {3, 6}},
        {"data=2", 2, "_,data,_", 3, {2, 4, 3}},
        {"data=4", 4, "data", 1, {8}},
        {"data=4", 4, "data,_", 2, {8, 3}},
        {"data=4", 4, "_,_,data", 3, {4, 2, 4}},
        {"data=4", 4, "_,data,_,_", 4, {2, 4, 3, 2}},
        {"data=4", 4, "data", 1, {0}},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

MT_TEST(put_gather_round_trip_2d_meshes) {
    static const mt_test_shard_case cases[] = {
        {"data=2,tensor=2", 4, "data,tensor", 2, {4, 6}},
        {"data=2,tensor=2", 4, "tensor,data", 2, {4, 6}},
        {"data=2,tensor=2", 4, "data+tensor,_", 2, {8, 3}},
        {"data=2,tensor=2", 4, "_,data+tensor", 2, {3, 8}},
        {"data=2,tensor=2", 4, "data,_", 2, {4, 6}},          /* replicated over tensor */
        {"data=2,tensor=2", 4, "_,_", 2, {3, 5}},             /* replicated */
        {"data=2,tensor=2", 4, "data,_,tensor", 3, {2, 4, 6}},
        {"data=2,tensor=2", 4, "data,_,_,tensor", 4, {2, 2, 3, 4}},
        {"data=2,tensor=3", 6, "data,tensor", 2, {4, 6}},
        {"data=2,tensor=3", 6, "tensor,data", 2, {6, 4}},
        {"data=2,tensor=3", 6, "data+tensor,_", 2, {6, 5}},
        {"data=2,tensor=3", 6, "data+tensor", 1, {12}},
        {"data=2,tensor=3", 6, "data,tensor,_", 3, {2, 3, 5}},
        {"data=2,tensor=3", 6, "_,tensor,_", 3, {2, 3, 5}},   /* replicated over data */
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* ======================================================================== */
/* Partial sums and errors                                                   */
/* ======================================================================== */

/* mt_test_partial_layout's case: data=2,tensor=2, a (4,6) array split on
 * data, partial over tensor: tensor rank 0 holds slice - 3·(P-1), the
 * others hold 3 each (integers, so the sum is exact in float). Put gives
 * the slice to tensor rank 0 only. */
static mt_status partial_device(mt_ctx *ctx, void *arg) {
    (void)arg;
    const int64_t shape[2] = {4, 6};
    mt_sharding sh;
    int t, P, dr;
    mt_status s = mt_test_partial_layout(ctx, &sh, &t, &P, &dr);
    if (s != MT_OK) return s;
    float *global = host_array(24), local[12], back[24];
    s = mt_shard_put(ctx, &sh, global, 2, shape, local);
    for (int i = 0; s == MT_OK && i < 12; i++) {
        float want = t == 0 ? global[dr * 12 + i] : 0.0f;
        if (local[i] != want)
            s = mt_fail(MT_EINTERNAL, "put with partial sums: tensor rank %d local[%d] = %g, want %g",
                        t, i, (double)local[i], (double)want);
    }
    for (int i = 0; i < 12; i++)
        local[i] = t == 0 ? global[dr * 12 + i] - 3.0f * (float)(P - 1) : 3.0f;
    if (s == MT_OK) s = mt_shard_gather(ctx, &sh, local, 2, shape, back);
    for (int i = 0; s == MT_OK && i < 24; i++)
        if (back[i] != global[i])
            s = mt_fail(MT_EINTERNAL, "partial gather[%d] = %g, want %g", i, (double)back[i],
                        (double)global[i]);
    free(global);
    return s;
}

MT_TEST(gather_sums_partial_axes) {
    mt_launch_opts o = mt_test_launch_opts("data=2,tensor=2", 4);
    MT_CHECK_OK(mt_launch(&o, partial_device, NULL));
}

typedef struct {
    mt_test_kept put, twice;
} error_result;

/* Keeps the errors of device 0 and returns MT_OK, so the launch succeeds. */
static mt_status error_device(mt_ctx *ctx, void *arg) {
    error_result *r = arg;
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    const int64_t shape[2] = {6, 4};
    float global[24] = {0}, local[24];
    mt_sharding sh;
    mt_status s = mt_sharding_parse(mesh, "data,_", 2, &sh);
    if (s != MT_OK) return s;
    mt_test_keep(ctx, mt_shard_put(ctx, &sh, global, 2, shape, local), &r->put);
    memset(&sh, 0, sizeof sh);
    sh.dim_axes[0] = sh.dim_axes[1] = 1;   /* the same axis on two dims */
    const int64_t ok_shape[2] = {4, 4};
    mt_test_keep(ctx, mt_shard_put(ctx, &sh, global, 2, ok_shape, local), &r->twice);
    return MT_OK;
}

MT_TEST(put_errors_name_the_dim_and_sizes) {
    error_result r;
    memset(&r, 0, sizeof r);
    mt_launch_opts o = mt_test_launch_opts("data=4", 4);
    MT_CHECK_OK(mt_launch(&o, error_device, &r));
    MT_CHECK(r.put.status != MT_OK, "a dim of 6 over 4 devices must fail");
    MT_CHECK(strstr(r.put.msg, "6") && strstr(r.put.msg, "4") && strstr(r.put.msg, "0"),
             "the message names dim 0, its size 6 and the 4 parts: '%s'", r.put.msg);
    MT_CHECK(strstr(r.put.msg, "mt_shard_put"), "the message names the function: '%s'", r.put.msg);
    MT_CHECK(r.twice.status == MT_EINVAL, "an axis on two dims: %s", mt_status_name(r.twice.status));
    MT_CHECK(strstr(r.twice.msg, "data") && strstr(r.twice.msg, "dim 1"),
             "the message names the axis and the dim: '%s'", r.twice.msg);
}

/* Shapes whose element count does not fit: the products of dims once wrapped
 * (2^61+1 x 8 is 8 in 64 bits), so put copied 2^61 rows into an 8-float
 * buffer and {2^32, 2^32} returned MT_OK having done nothing. */
typedef struct {
    mt_test_kept wrap_put, square_put, square_gather, scratch_gather;
} overflow_result;

static mt_status overflow_device(mt_ctx *ctx, void *arg) {
    overflow_result *r = arg;
    mt_sharding whole, split;
    memset(&whole, 0, sizeof whole);
    mt_status s = mt_sharding_parse(mt_ctx_mesh(ctx), "data", 1, &split);
    if (s != MT_OK) return s;
    float dummy[64] = {0};   /* never read: the shapes must be refused first */
    const int64_t wrap[2] = {((int64_t)1 << 61) + 1, 8};
    const int64_t square[2] = {(int64_t)1 << 32, (int64_t)1 << 32};
    /* fits as a global array (2^62 - 2 floats), but the gather's scratch of
     * 1 + 2 shards of 2^61 - 1 floats does not */
    const int64_t big[1] = {((int64_t)1 << 62) - 2};
    mt_test_keep(ctx, mt_shard_put(ctx, &whole, dummy, 2, wrap, dummy), &r->wrap_put);
    mt_test_keep(ctx, mt_shard_put(ctx, &whole, dummy, 2, square, dummy), &r->square_put);
    mt_test_keep(ctx, mt_shard_gather(ctx, &whole, dummy, 2, square, dummy), &r->square_gather);
    mt_test_keep(ctx, mt_shard_gather(ctx, &split, dummy, 1, big, dummy), &r->scratch_gather);
    return MT_OK;
}

MT_TEST(shapes_too_big_to_count_fail_naming_the_shape) {
    overflow_result r;
    memset(&r, 0, sizeof r);
    mt_launch_opts o = mt_test_launch_opts("data=2", 2);
    MT_CHECK_OK(mt_launch(&o, overflow_device, &r));
    MT_CHECK(r.wrap_put.status == MT_ESHAPE, "put of 2^61+1 x 8: %s",
             mt_status_name(r.wrap_put.status));
    MT_CHECK(strstr(r.wrap_put.msg, "[2305843009213693953, 8]") &&
             strstr(r.wrap_put.msg, "mt_shard_put"),
             "the message names the function and the shape: '%s'", r.wrap_put.msg);
    MT_CHECK(r.square_put.status == MT_ESHAPE, "put of 2^32 x 2^32: %s",
             mt_status_name(r.square_put.status));
    MT_CHECK(strstr(r.square_put.msg, "[4294967296, 4294967296]"), "message: '%s'",
             r.square_put.msg);
    MT_CHECK(r.square_gather.status == MT_ESHAPE, "gather of 2^32 x 2^32: %s",
             mt_status_name(r.square_gather.status));
    MT_CHECK(r.scratch_gather.status == MT_ESHAPE, "gather of 2 shards of 2^61-1: %s",
             mt_status_name(r.scratch_gather.status));
    MT_CHECK(strstr(r.scratch_gather.msg, "[4611686018427387902]") &&
             strstr(r.scratch_gather.msg, "mt_shard_gather"),
             "message: '%s'", r.scratch_gather.msg);
}

/* ======================================================================== */
/* The pmap linear regression                                                */
/* ======================================================================== */

/* Relative comparison (the harness's MT_CHECK_CLOSE is absolute below 1,
 * and these losses fall far below 1). */
static bool rel_close(double got, double want, double tol) {
    return fabs(got - want) <= tol * fabs(want);
}

static void run_linreg(int devices, int steps, int batch, float *losses, float params[4]) {
    mt_linreg_example_opts o;
    memset(&o, 0, sizeof o);
    o.devices = devices;
    o.steps = steps;
    o.batch = batch;
    o.lr = 0.1f;
    o.seed = 1337;
    o.transport = MT_TRANSPORT_THREADS;
    mt_status s = mt_example_linreg(&o, losses, params);
    MT_CHECK(s == MT_OK, "linreg on %d devices: %s: %s", devices, mt_status_name(s), mt_errmsg());
}

/* The same SGD in plain C over the whole global batch, one device: data as
 * trainer.c draws it (streams "data.train.x" / "data.train.noise"). */
static void reference_linreg(int steps, int batch, float lr, uint64_t seed, float *losses,
                             float params[4]) {
    const float tw[3] = {2.0f, -3.4f, 1.7f};
    const uint64_t sx = mt_hash_name("data.train.x"), sn = mt_hash_name("data.train.noise");
    float w[3] = {0, 0, 0}, b = 0;
    for (int s = 0; s < steps; s++) {
        double loss = 0, gw[3] = {0, 0, 0}, gb = 0;
        for (int e = 0; e < batch; e++) {
            uint64_t ex = (uint64_t)s * (uint64_t)batch + (uint64_t)e;
            float x[3];
            for (int i = 0; i < 3; i++) x[i] = mt_rng_normal(seed, sx, ex * 3 + (uint64_t)i);
            double yd = 4.2f + 0.01f * mt_rng_normal(seed, sn, ex);
            for (int i = 0; i < 3; i++) yd += (double)tw[i] * x[i];
            float y = (float)yd;
            double err = (double)b - y;
            for (int i = 0; i < 3; i++) err += (double)w[i] * x[i];
            loss += err * err;
            for (int i = 0; i < 3; i++) gw[i] += 2 * err * x[i];
            gb += 2 * err;
        }
        losses[s] = (float)(loss / batch);
        for (int i = 0; i < 3; i++) w[i] -= lr * (float)(gw[i] / batch);
        b -= lr * (float)(gb / batch);
    }
    for (int i = 0; i < 3; i++) params[i] = w[i];
    params[3] = b;
}

MT_TEST(linreg_every_mesh_matches_one_device) {
    enum { STEPS = 40, BATCH = 128 };
    float one[STEPS], p1[4];
    run_linreg(1, STEPS, BATCH, one, p1);
    const int meshes[] = {2, 4, 8};
    for (int m = 0; m < 3; m++) {
        float l[STEPS], p[4];
        run_linreg(meshes[m], STEPS, BATCH, l, p);
        for (int s = 0; s < STEPS; s++)
            MT_CHECK(rel_close(l[s], one[s], 1e-6), "%d devices, step %d: loss %.9g, 1 device %.9g",
                     meshes[m], s + 1, (double)l[s], (double)one[s]);
        for (int i = 0; i < 4; i++)
            MT_CHECK(fabs(p[i] - p1[i]) <= 1e-6 * fmax(1, fabs(p1[i])),
                     "%d devices: param %d = %.9g, 1 device %.9g", meshes[m], i, (double)p[i],
                     (double)p1[i]);
    }
    /* it learns: after 40 steps of lr 0.1 the error shrank by ~0.8^40 */
    const float truth[4] = {2.0f, -3.4f, 1.7f, 4.2f};
    for (int i = 0; i < 4; i++)
        MT_CHECK_CLOSE(p1[i], truth[i], 1e-2, "learned param %d", i);
    MT_CHECK(one[STEPS - 1] < 1e-3f && one[0] > 10.0f, "loss from %g down to %g", (double)one[0],
             (double)one[STEPS - 1]);
}

MT_TEST(linreg_one_device_matches_plain_c_sgd) {
    enum { STEPS = 25, BATCH = 96 };
    float l[STEPS], p[4], rl[STEPS], rp[4];
    run_linreg(1, STEPS, BATCH, l, p);
    reference_linreg(STEPS, BATCH, 0.1f, 1337, rl, rp);
    for (int s = 0; s < STEPS; s++)
        MT_CHECK(rel_close(l[s], rl[s], 1e-6), "step %d: loss %.9g, plain C %.9g", s + 1,
                 (double)l[s], (double)rl[s]);
    for (int i = 0; i < 4; i++)
        MT_CHECK_CLOSE(p[i], rp[i], 1e-6, "param %d", i);
}

/* The graph engine's trainer (mt_linreg_build, MSE, SGD) on the same data:
 * a second, independent implementation; float kernels, hence 1e-4. */
MT_TEST(linreg_matches_the_graph_trainer) {
    enum { STEPS = 15, BATCH = 64 };
    float l[STEPS], p[4];
    run_linreg(2, STEPS, BATCH, l, p);
    mt_train_config c = mt_train_defaults();
    c.model = MT_MODEL_LINREG;
    c.B = BATCH;
    c.T = 1;
    c.accum = 1;
    c.steps = STEPS;
    c.seed = 1337;
    c.eval_every = 0;
    c.threads = 1;
    c.optim.kind = MT_OPT_SGD;
    c.optim.lr = 0.1f;
    c.optim.momentum = 0;
    c.optim.weight_decay = 0;
    c.optim.grad_clip = 0;
    c.optim.warmup_steps = 0;
    c.optim.total_steps = 0;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    for (int s = 0; s < STEPS; s++) {
        mt_step_report rep;
        MT_CHECK_OK(mt_trainer_step(tr, &rep));
        MT_CHECK(rel_close(rep.loss, l[s], 1e-4), "step %d: trainer loss %.9g, example %.9g",
                 s + 1, (double)rep.loss, (double)l[s]);
    }
    mt_trainer_free(tr);
}

MT_TEST(linreg_rejects_a_batch_that_does_not_divide) {
    float l[2], p[4];
    mt_linreg_example_opts o;
    memset(&o, 0, sizeof o);
    o.devices = 3;
    o.steps = 2;
    o.batch = 128;
    o.transport = MT_TRANSPORT_THREADS;
    mt_status s = mt_example_linreg(&o, l, p);
    MT_CHECK(s == MT_EINVAL, "got %s", mt_status_name(s));
    MT_CHECK(strstr(mt_errmsg(), "128") && strstr(mt_errmsg(), "3"), "message: %s", mt_errmsg());
}

/* ======================================================================== */
/* Trace                                                                     */
/* ======================================================================== */

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

static int count_of(const char *s, const char *what) {
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

/* Brackets and braces balance outside strings, and strings close. */
static bool balanced(const char *s, char *why, size_t n) {
    char stack[64];
    int depth = 0;
    bool in_string = false;
    for (const char *p = s; *p; p++) {
        if (in_string) {
            if (*p == '\\' && p[1]) p++;
            else if (*p == '"') in_string = false;
            continue;
        }
        if (*p == '"') in_string = true;
        else if (*p == '{' || *p == '[') {
            if (depth == 64) { snprintf(why, n, "nesting deeper than 64"); return false; }
            stack[depth++] = *p;
        } else if (*p == '}' || *p == ']') {
            char open = *p == '}' ? '{' : '[';
            if (depth == 0 || stack[depth - 1] != open) {
                snprintf(why, n, "unmatched '%c' at offset %ld", *p, (long)(p - s));
                return false;
            }
            depth--;
        }
    }
    if (in_string || depth) {
        snprintf(why, n, "%s at the end", in_string ? "open string" : "open brackets");
        return false;
    }
    return true;
}

/* A region with a name that needs escaping, a nested begin (closes the
 * first), and an end without a begin (ignored). */
static mt_status trace_extra_device(mt_ctx *ctx, void *arg) {
    (void)arg;
    mt_axes data;
    mt_status s = mt_ctx_axes(ctx, "data", &data);
    if (s != MT_OK) return s;
    float v[4] = {1, 2, 3, 4};
    mt_trace_begin(ctx, "say \"hi\"\\");
    mt_trace_begin(ctx, "second");
    s = mt_psum(ctx, data, v, 4);
    mt_trace_end(ctx);
    mt_trace_end(ctx);
    return s;
}

MT_TEST(trace_is_chrome_json_with_a_track_per_device) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/mt_test_trace_%d.json", (int)getpid());
    enum { DEVICES = 4, STEPS = 3 };
    float l[STEPS], p[4];
    mt_linreg_example_opts o;
    memset(&o, 0, sizeof o);
    o.devices = DEVICES;
    o.steps = STEPS;
    o.batch = 32;
    o.transport = MT_TRANSPORT_THREADS;
    o.trace = path;
    MT_CHECK_OK(mt_example_linreg(&o, l, p));
    char *js = read_all(path);
    MT_CHECK(js, "no trace file at %s", path);
    const char *head = "{\"traceEvents\":[";
    MT_CHECK(strncmp(js, head, strlen(head)) == 0, "the file starts '%.40s'", js);
    char why[128] = "";
    MT_CHECK(balanced(js, why, sizeof why), "brackets: %s", why);
    MT_CHECK(count_of(js, "\"thread_name\"") == DEVICES, "%d thread_name records, want %d",
             count_of(js, "\"thread_name\""), DEVICES);
    for (int d = 0; d < DEVICES; d++) {
        char name[32];
        snprintf(name, sizeof name, "\"device %d\"", d);
        MT_CHECK(strstr(js, name), "no track named %s", name);
    }
    MT_CHECK(strstr(js, "\"process_name\""), "no process name");
    MT_CHECK(count_of(js, "\"name\":\"step\"") == DEVICES * STEPS, "%d step regions, want %d",
             count_of(js, "\"name\":\"step\""), DEVICES * STEPS);
    int comm = count_of(js, "\"cat\":\"comm\"");
    MT_CHECK(comm >= DEVICES * STEPS, "%d comm events, want at least one pmean per step and device",
             comm);
    MT_CHECK(count_of(js, "\"bytes\":") == comm && count_of(js, "\"seq\":") == comm,
             "every comm event has bytes and seq");
    MT_CHECK(strstr(js, "\"seq\":1}"), "sequence numbers start at 1");
    MT_CHECK(strstr(js, "\"ph\":\"X\"") && strstr(js, "\"ts\":") && strstr(js, "\"dur\":"),
             "complete events with ts and dur");
    free(js);
    remove(path);

    /* escaping and region nesting */
    mt_launch_opts lo = mt_test_launch_opts("data=2", 2);
    lo.trace = path;
    MT_CHECK_OK(mt_launch(&lo, trace_extra_device, NULL));
    js = read_all(path);
    MT_CHECK(js, "no trace file at %s", path);
    MT_CHECK(balanced(js, why, sizeof why), "brackets with an escaped name: %s", why);
    MT_CHECK(strstr(js, "\"say \\\"hi\\\"\\\\\""), "the quoted name is escaped");
    MT_CHECK(count_of(js, "\"name\":\"second\"") == 2, "the nested region is recorded");
    free(js);
    remove(path);
}

/* Region names the JSON must not pass through as they are: a name longer
 * than the event's field whose cut falls inside a 2-byte character, and
 * bytes that are not UTF-8 at all. */
static mt_status trace_utf8_device(mt_ctx *ctx, void *arg) {
    (void)arg;
    /* 46 ASCII bytes, then U+00E9 in bytes 47-48: a cut at 47 splits it */
    mt_trace_begin(ctx, "0123456789012345678901234567890123456789012345\xc3\xa9tail");
    mt_trace_end(ctx);
    /* a lone continuation byte, an overlong '/', a surrogate, a cut 3-byte
     * character, and valid U+20AC among them */
    mt_trace_begin(ctx, "a\x80" "b\xc0\xaf" "c\xed\xa0\x80" "d\xe2\x82" "e\xe2\x82\xac");
    mt_trace_end(ctx);
    return MT_OK;
}

/* Whether s is UTF-8 (RFC 3629): decodes every character and checks its
 * length against its code point. */
static bool is_utf8(const unsigned char *s, size_t n, size_t *bad_at) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        uint32_t cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
        bool ok = len > 0 && i + (size_t)len <= n;
        for (int k = 1; ok && k < len; k++) {
            ok = (s[i + (size_t)k] & 0xC0) == 0x80;
            cp = cp << 6 | (s[i + (size_t)k] & 0x3f);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (ok) ok = cp >= min_cp[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
        if (!ok) { *bad_at = i; return false; }
        i += (size_t)len;
    }
    return true;
}

MT_TEST(trace_is_utf8_whatever_the_region_names) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/mt_test_trace_utf8_%d.json", (int)getpid());
    mt_launch_opts lo = mt_test_launch_opts("data=2", 2);
    lo.trace = path;
    MT_CHECK_OK(mt_launch(&lo, trace_utf8_device, NULL));
    char *js = read_all(path);
    MT_CHECK(js, "no trace file at %s", path);
    size_t bad = 0;
    MT_CHECK(is_utf8((const unsigned char *)js, strlen(js), &bad),
             "invalid UTF-8 at byte %zu: '%.60s'", bad, js + (bad > 20 ? bad - 20 : 0));
    /* the long name loses the whole character, not half of it */
    MT_CHECK(count_of(js, "\"name\":\"0123456789012345678901234567890123456789012345\"") == 2,
             "the long name is cut before the 2-byte character on both tracks");
    /* each bad sequence becomes U+FFFD; the valid euro sign stays */
    MT_CHECK(count_of(js, "\"name\":\"a\\ufffdb\\ufffd\\ufffdc\\ufffd\\ufffd\\ufffdd\\ufffd\\ufffde\xe2\x82\xac\"") == 2,
             "bad bytes are written as \\ufffd: %s", strstr(js, "\"name\":\"a") ? strstr(js, "\"name\":\"a") : "(none)");
    free(js);
    remove(path);
}

MT_TEST(trace_to_a_missing_directory_fails_naming_the_path) {
    float l[2], p[4];
    mt_linreg_example_opts o;
    memset(&o, 0, sizeof o);
    o.devices = 2;
    o.steps = 2;
    o.batch = 8;
    o.transport = MT_TRANSPORT_THREADS;
    o.trace = "/nonexistent/dir/t.json";
    mt_status s = mt_example_linreg(&o, l, p);
    MT_CHECK(s != MT_OK, "writing to /nonexistent must fail");
    MT_CHECK(strstr(mt_errmsg(), "/nonexistent/dir/t.json"), "message: %s", mt_errmsg());
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
