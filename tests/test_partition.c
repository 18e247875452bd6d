/*
 * test_partition.c — the partitioner on layouts other than data parallel:
 * inputs split on a contracting dim (gathered), on two mesh axes at once,
 * both operands of a matmul split on their contracting dim (a partial sum
 * reduced where the loss needs it), and explicit mode refusing what it must.
 *
 * Every case compares the partitioned program, run on a mesh of threads,
 * with the same program on one device: the loss, and the gradient of every
 * (replicated) parameter, within float rounding.
 */
#include "meshtrain.h"
#include "harness.h"

enum { N = 8, C = 16, H = 32, O = 4 };

/* x (N,C) -> linear(w1 (H,C), b1) -> gelu -> h (N,H) · z (H,O) -> mse
 * against y (N,O); x, z and y are inputs, so any of their dims can be split. */
static mt_tensor *build(mt_graph *g, mt_tensor **o_out) {
    int64_t xs[2] = {N, C}, zs[2] = {H, O}, ys[2] = {N, O}, w1s[2] = {H, C}, b1s[1] = {H};
    mt_tensor *x = mt_input(g, "x", MT_F32, 2, xs);
    mt_tensor *z = mt_input(g, "z", MT_F32, 2, zs);
    mt_tensor *y = mt_input(g, "y", MT_F32, 2, ys);
    mt_tensor *w1 = mt_param(g, "w1", 2, w1s, (mt_init){MT_INIT_NORMAL, 0.3f});
    mt_tensor *b1 = mt_param(g, "b1", 1, b1s, (mt_init){MT_INIT_NORMAL, 0.1f});
    mt_tensor *h = mt_gelu(g, mt_linear(g, x, w1, b1));          /* (N,H) */
    mt_tensor *o = mt_matmul(g, h, z, false, false);             /* (N,O) */
    if (o_out) *o_out = o;
    return mt_mse(g, o, y, 1.0f / (N * O));
}

/* The value of input `name` at global (i, j): the same on every mesh. */
static float input_at(const char *name, int64_t i, int64_t j) {
    uint64_t key = (uint64_t)name[0] * 1000003u;
    return mt_rng_uniform(key, 1, (uint64_t)(i * 1000 + j)) - 0.5f;
}

/* Fills a local input from its global values, given its block offsets. */
static void fill(mt_tensor *t, const char *name, int64_t off0, int64_t off1) {
    float *d = mt_tensor_f32(t);
    int64_t r = mt_tensor_dim(t, 0), c = mt_tensor_dim(t, 1);
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) d[i * c + j] = input_at(name, off0 + i, off1 + j);
}

typedef struct {
    const char *mesh;            /* NULL: one device */
    int         devices;
    const char *spec[3];         /* partition specs of x, z, y */
    mt_shard_mode mode;
    const char *wspec;           /* w1's partition spec (NULL: replicated) */
    uint32_t    gather;          /* mt_partition_opts.gather_axes */
    const char *ospec;           /* o's constraint (NULL: none) */
    int         scatters;        /* psum_scatter nodes in device 0's program */
    float       loss;
    float       grad[2][H * C];  /* d w1, d b1 of device 0 */
    mt_status   status;
    char        msg[512];
} run_case;

/* The block offset of a dim split over `axes` of the spec, for this device. */
static int64_t offset(mt_ctx *ctx, const mt_sharding *sh, int dim, int64_t local) {
    mt_axes ax = {0};
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    for (int a = 0; a < mt_mesh_ndim(mesh); a++)
        if (sh->dim_axes[dim] & (1u << a)) ax.axis[ax.n++] = (uint8_t)a;
    return ax.n ? (int64_t)mt_axis_index(ctx, ax) * local : 0;
}

static mt_status run_device(mt_ctx *ctx, void *arg) {
    run_case *rc = arg;
    const char *names[3] = {"x", "z", "y"};
    mt_graph *g = mt_graph_create(), *local = g;
    mt_tensor *o = NULL, *loss = build(g, &o), *lloss = loss;
    mt_sharding sh[3] = {{{0}, 0}};
    mt_status s = mt_graph_status(g);
    if (ctx) {
        for (int k = 0; k < 3 && s == MT_OK; k++) {
            s = mt_sharding_parse(mt_ctx_mesh(ctx), rc->spec[k], 2, &sh[k]);
            if (s == MT_OK) s = mt_tensor_set_sharding(mt_graph_find(g, names[k]), &sh[k]);
        }
        if (s == MT_OK && rc->wspec) {
            mt_sharding sw;
            s = mt_sharding_parse(mt_ctx_mesh(ctx), rc->wspec, 2, &sw);
            if (s == MT_OK) s = mt_tensor_set_sharding(mt_graph_find(g, "w1"), &sw);
        }
        if (s == MT_OK && rc->ospec) {
            mt_sharding so;
            s = mt_sharding_parse(mt_ctx_mesh(ctx), rc->ospec, 2, &so);
            if (s == MT_OK) s = mt_tensor_set_constraint(o, &so);
        }
        mt_partition_opts po = {.mode = rc->mode, .gather_axes = rc->gather};
        if (s == MT_OK) s = mt_partition(g, loss, ctx, &po, &local, &lloss);
    }
    if (s == MT_OK) s = mt_graph_compile(local, lloss, &(mt_compile_opts){.seed = 3});
    mt_node_info ni;
    for (int i = 0; s == MT_OK && ctx && mt_ctx_device(ctx) == 0 && i < mt_graph_n_nodes(local);
         i++)
        if (mt_graph_node(local, i, &ni) == MT_OK) rc->scatters += !strcmp(ni.op, "psum_scatter");
    for (int k = 0; k < 3 && s == MT_OK; k++) {
        mt_tensor *t = mt_graph_find(local, names[k]);
        fill(t, names[k], ctx ? offset(ctx, &sh[k], 0, mt_tensor_dim(t, 0)) : 0,
             ctx ? offset(ctx, &sh[k], 1, mt_tensor_dim(t, 1)) : 0);
    }
    if (s == MT_OK) s = mt_graph_forward(local);
    if (s == MT_OK) s = mt_graph_backward(local);
    if (s == MT_OK && (!ctx || mt_ctx_device(ctx) == 0)) {
        rc->loss = mt_graph_loss(local);
        const char *params[2] = {"w1", "b1"};
        for (int k = rc->wspec ? 1 : 0; k < 2; k++) {   /* a split w1: b1 only */
            mt_tensor *p = mt_graph_find(local, params[k]);
            memcpy(rc->grad[k], mt_tensor_f32(mt_tensor_grad(p)),
                   (size_t)mt_tensor_numel(p) * sizeof(float));
        }
    }
    if (s != MT_OK && (!ctx || mt_ctx_device(ctx) == 0))
        snprintf(rc->msg, sizeof rc->msg, "%s", mt_errmsg());
    if (local != g) mt_graph_free(local);
    mt_graph_free(g);
    return s;
}

static run_case run_on(run_case rc) {
    if (!rc.mesh) {
        rc.status = run_device(NULL, &rc);
        return rc;
    }
    mt_launch_opts o = {.mesh = rc.mesh, .devices = rc.devices, .timeout_s = 30,
                        .kernel_threads = 1};
    rc.status = mt_launch(&o, run_device, &rc);
    if (rc.status != MT_OK) snprintf(rc.msg, sizeof rc.msg, "%s", mt_errmsg());
    return rc;
}

static run_case run(const char *mesh, int devices, const char *sx, const char *sz, const char *sy,
                    mt_shard_mode mode) {
    return run_on((run_case){.mesh = mesh, .devices = devices, .spec = {sx, sz, sy},
                             .mode = mode});
}

static void check_same(const run_case *got, const run_case *one, const char *what) {
    MT_CHECK(got->status == MT_OK, "%s: %s", what, got->msg);
    MT_CHECK_CLOSE(got->loss, one->loss, 1e-5, "%s: loss", what);
    for (int k = got->wspec ? 1 : 0; k < 2; k++)   /* a split w1: b1 only (run_device) */
        for (int i = 0; i < (k ? H : H * C); i++)
            MT_CHECK_CLOSE(got->grad[k][i], one->grad[k][i], 1e-5, "%s: d%s[%d]", what,
                           k ? "b1" : "w1", i);
}

MT_TEST(layouts_equal_one_device) {
    run_case one = run(NULL, 1, "", "", "", MT_SHARD_AUTO);
    MT_CHECK(one.status == MT_OK, "one device: %s", one.msg);
    static const struct { const char *mesh; int n; const char *x, *z, *y; } CASES[] = {
        {"data=2", 2, "data", "", "data"},            /* data parallel */
        {"data=4", 4, "data", "", "data"},
        {"m=2", 2, "_,m", "", ""},                    /* x's contracting dim split: gathered */
        {"a=2,b=2", 4, "a,b", "", "a"},               /* both dims of x, over two axes */
        {"a=2,b=2", 4, "b", "", "_,a"},               /* y split on its other dim: resharded */
        {"m=2", 2, "", "m", ""},                      /* z's contracting dim: a gather */
        {"a=2,b=2", 4, "a", "_,b", "a,b"},            /* the result split over both axes */
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char what[160];
        snprintf(what, sizeof what, "mesh %s, x '%s', z '%s', y '%s'", CASES[i].mesh, CASES[i].x,
                 CASES[i].z, CASES[i].y);
        run_case got = run(CASES[i].mesh, CASES[i].n, CASES[i].x, CASES[i].z, CASES[i].y,
                           MT_SHARD_AUTO);
        check_same(&got, &one, what);
    }
}

/* Explicit mode gathers where exactly one contracting dim is split (the
 * FSDP pattern is not ambiguous) and refuses layouts an op cannot take;
 * auto mode moves the data instead. */
MT_TEST(explicit_mode_refuses_auto_moves) {
    run_case one = run(NULL, 1, "", "", "", MT_SHARD_AUTO);
    MT_CHECK(one.status == MT_OK, "one device: %s", one.msg);
    /* z (H@m, O) against h (N, H): only z's contracting dim is split */
    run_case ex = run("m=2", 2, "", "m", "", MT_SHARD_EXPLICIT);
    check_same(&ex, &one, "explicit, z's contracting dim split");
    /* y (N, O@m) against the whole prediction: auto slices, explicit refuses */
    run_case bad = run("m=2", 2, "", "", "_,m", MT_SHARD_EXPLICIT);
    MT_CHECK(bad.status == MT_ESHARDING, "explicit mse with differing layouts: %s (%s)",
             mt_status_name(bad.status), bad.msg);
    MT_CHECK(strstr(bad.msg, "mse"), "the message names the op: %s", bad.msg);
    /* ... and its operands as the user knows them: the op that made the
     * prediction (it has no name of its own) and 'y', never "act.13" */
    MT_CHECK(strstr(bad.msg, "matmul(gelu(") && strstr(bad.msg, "'z')") &&
             strstr(bad.msg, "'y'") && !strstr(bad.msg, "act."),
             "the message names the operands by what made them: %s", bad.msg);
    run_case fixed = run("m=2", 2, "", "", "_,m", MT_SHARD_AUTO);
    check_same(&fixed, &one, "auto, y split on O");
}

/* A parameter stored split over the batch's axis (FSDP's layout) without
 * the option that gathers it before use: explicit mode refuses, and the
 * message points at the option (mt_partition_opts.gather_axes), not only at
 * a reshard (issue 37); with the option, the one-device loss. */
MT_TEST(fsdp_layout_without_its_option_names_the_option) {
    run_case one = run(NULL, 1, "", "", "", MT_SHARD_AUTO);
    MT_CHECK(one.status == MT_OK, "one device: %s", one.msg);
    run_case rc = {.mesh = "fsdp=2", .devices = 2, .spec = {"fsdp", "", "fsdp"},
                   .mode = MT_SHARD_EXPLICIT, .wspec = "fsdp"};
    mt_launch_opts o = {.mesh = rc.mesh, .devices = 2, .timeout_s = 30, .kernel_threads = 1};
    rc.status = mt_launch(&o, run_device, &rc);
    if (rc.status != MT_OK) snprintf(rc.msg, sizeof rc.msg, "%s", mt_errmsg());
    MT_CHECK(rc.status == MT_ESHARDING && strstr(rc.msg, "'w1'") &&
             strstr(rc.msg, "gather_axes") && strstr(rc.msg, "FSDP"),
             "w1 split over fsdp, no gather option: %s (%s)", mt_status_name(rc.status), rc.msg);
    rc = (run_case){.mesh = "fsdp=2", .devices = 2, .spec = {"fsdp", "", "fsdp"},
                    .mode = MT_SHARD_EXPLICIT, .wspec = "fsdp", .gather = 1u};
    rc.status = mt_launch(&o, run_device, &rc);
    if (rc.status != MT_OK) snprintf(rc.msg, sizeof rc.msg, "%s", mt_errmsg());
    MT_CHECK(rc.status == MT_OK, "with gather_axes: %s", rc.msg);
    MT_CHECK_CLOSE(rc.loss, one.loss, 1e-5, "with gather_axes: loss");
    for (int i = 0; i < H; i++)
        MT_CHECK_CLOSE(rc.grad[1][i], one.grad[1][i], 1e-5, "with gather_axes: db1[%d]", i);
}

/* ---- a partial sum: both contracting dims split on the same axis ---------- */

/* loss = Σ (a (N,H) · b (H,O)) ⊙ p (O): with a's and b's H split over m, the
 * product is a partial sum over m; auto keeps it through the mul and the
 * sum (both linear in it) and reduces the loss; p's gradient is partial
 * too and is reduced. Explicit mode refuses the matmul. */
typedef struct {
    const char   *mesh;
    mt_shard_mode mode;
    const char   *reshard;       /* NULL: none; else the product's layout ("{U}": keep the sum) */
    float         loss, dp[O];
    mt_status     status;
    char          msg[768];
} partial_case;

static mt_status partial_device(mt_ctx *ctx, void *arg) {
    partial_case *pc = arg;
    int64_t as[2] = {N, H}, bs[2] = {H, O}, ps[1] = {O};
    mt_graph *g = mt_graph_create(), *local = g;
    mt_tensor *a = mt_input(g, "a", MT_F32, 2, as), *b = mt_input(g, "b", MT_F32, 2, bs);
    mt_tensor *p = mt_param(g, "p", 1, ps, (mt_init){MT_INIT_NORMAL, 1.0f});
    mt_tensor *prod = mt_matmul(g, a, b, false, false);
    mt_status s = MT_OK;
    if (pc->reshard) {
        mt_sharding sh = {{0}, 0};
        /* the layout is parsed on the mesh when there is one; on one device
         * the constraint is a copy and its layout does not matter */
        if (ctx && strcmp(pc->reshard, "{U}") == 0) sh.partial_axes = 1;
        else if (ctx) s = mt_sharding_parse(mt_ctx_mesh(ctx), pc->reshard, 2, &sh);
        prod = mt_reshard(g, prod, &sh);
    }
    mt_tensor *loss = mt_sum(g, mt_mul(g, prod, p)), *lloss = loss;
    if (s == MT_OK) s = mt_graph_status(g);
    int64_t off_a = 0, off_b = 0;
    if (ctx && s == MT_OK) {
        mt_sharding sa, sb;
        mt_sharding_parse(mt_ctx_mesh(ctx), "_,m", 2, &sa);
        mt_sharding_parse(mt_ctx_mesh(ctx), "m", 2, &sb);
        mt_tensor_set_sharding(a, &sa);
        mt_tensor_set_sharding(b, &sb);
        mt_partition_opts po = {.mode = pc->mode};
        s = mt_partition(g, loss, ctx, &po, &local, &lloss);
        mt_axes m;
        if (s == MT_OK) s = mt_ctx_axes(ctx, "m", &m);
        if (s == MT_OK) off_a = off_b = mt_axis_index(ctx, m) * (H / mt_axis_size(ctx, m));
    }
    if (s == MT_OK) s = mt_graph_compile(local, lloss, &(mt_compile_opts){.seed = 5});
    if (s == MT_OK) {
        fill(mt_graph_find(local, "a"), "a", 0, off_a);
        fill(mt_graph_find(local, "b"), "b", off_b, 0);
        s = mt_graph_forward(local);
    }
    if (s == MT_OK) s = mt_graph_backward(local);
    if (s == MT_OK && (!ctx || mt_ctx_device(ctx) == 0)) {
        pc->loss = mt_graph_loss(local);
        memcpy(pc->dp, mt_tensor_f32(mt_tensor_grad(mt_graph_find(local, "p"))), sizeof pc->dp);
    }
    if (s != MT_OK && (!ctx || mt_ctx_device(ctx) == 0))   /* one writer */
        snprintf(pc->msg, sizeof pc->msg, "%s", mt_errmsg());
    if (local != g) mt_graph_free(local);
    mt_graph_free(g);
    return s;
}

static partial_case run_partial(const char *mesh, mt_shard_mode mode, const char *reshard) {
    partial_case pc = {.mesh = mesh, .mode = mode, .reshard = reshard};
    if (!mesh) {
        pc.status = partial_device(NULL, &pc);
        return pc;
    }
    mt_launch_opts o = {.mesh = mesh, .devices = 2, .timeout_s = 30, .kernel_threads = 1};
    pc.status = mt_launch(&o, partial_device, &pc);
    if (pc.status != MT_OK) snprintf(pc.msg, sizeof pc.msg, "%s", mt_errmsg());
    return pc;
}

MT_TEST(partial_sum_auto_and_explicit) {
    partial_case one = run_partial(NULL, MT_SHARD_AUTO, NULL);
    MT_CHECK(one.status == MT_OK, "one device: %s", one.msg);
    /* auto: the partial sum kept to the loss; or decided by a reshard:
     * all-reduced (""), reduce-scattered on the rows ("m"), kept ("{U}") */
    const char *decide[] = {NULL, "", "m", "{U}"};
    for (int k = 0; k < 4; k++)
        for (int mode = 0; mode < 2; mode++) {
            if (mode == 1 && !decide[k]) continue;   /* explicit without a reshard: below */
            partial_case got = run_partial("m=2", mode ? MT_SHARD_EXPLICIT : MT_SHARD_AUTO,
                                           decide[k]);
            const char *what = decide[k] ? decide[k] : "(none)";
            MT_CHECK(got.status == MT_OK, "%s, reshard %s: %s", mode ? "explicit" : "auto", what,
                     got.msg);
            MT_CHECK_CLOSE(got.loss, one.loss, 1e-5, "reshard %s: loss", what);
            for (int i = 0; i < O; i++)
                MT_CHECK_CLOSE(got.dp[i], one.dp[i], 1e-5, "reshard %s: dp[%d]", what, i);
        }
    /* on one device a reshard is a copy, its gradient the identity */
    partial_case copy = run_partial(NULL, MT_SHARD_AUTO, "m");
    MT_CHECK(copy.status == MT_OK, "one device with a reshard: %s", copy.msg);
    MT_CHECK(copy.loss == one.loss, "one device: a reshard changes the loss");
    for (int i = 0; i < O; i++) MT_CHECK(copy.dp[i] == one.dp[i], "one device: dp[%d]", i);
    partial_case ex = run_partial("m=2", MT_SHARD_EXPLICIT, NULL);
    MT_CHECK(ex.status == MT_ESHARDING, "explicit: %s (%s)", mt_status_name(ex.status), ex.msg);
    MT_CHECK(strstr(ex.msg, "matmul") && strstr(ex.msg, "all-reduce") &&
             strstr(ex.msg, "reduce-scatter") && strstr(ex.msg, "{U:m}") &&
             strstr(ex.msg, "reshard"), "explicit names the op, the four answers and the way "
             "out: %s", ex.msg);
}

/* One global graph, built once before the launch and shared by the device
 * threads (partition.h, "Threads"): each device partitions it in explicit
 * mode, which refuses the matmul, then partitions the same graph again in
 * auto mode. The refusal leaves the global graph's status clean, and the
 * retry computes what a fresh graph does (partial_device, per device). Run
 * under TSan (make test), concurrent reads of the shared graph are checked
 * too: the refusal used to write its message into it from every thread. */
typedef struct {
    mt_graph     *global;
    mt_tensor    *loss;
    mt_status     refused;       /* device 0's explicit partition */
    bool          status_clean;  /* every device saw mt_graph_status(global) == MT_OK after */
    char          refusal[768];
    partial_case  got;           /* device 0's auto run */
} shared_case;

static mt_status shared_device(mt_ctx *ctx, void *arg) {
    shared_case *sc = arg;
    mt_graph *local = NULL;
    mt_tensor *lloss = NULL;
    mt_status ex = mt_partition(sc->global, sc->loss, ctx,
                                &(mt_partition_opts){.mode = MT_SHARD_EXPLICIT}, &local, &lloss);
    bool first = mt_ctx_device(ctx) == 0;   /* one writer of the case */
    if (first) {
        sc->refused = ex;
        snprintf(sc->refusal, sizeof sc->refusal, "%s", mt_errmsg());
    }
    if (ex == MT_OK) mt_graph_free(local);
    if (mt_graph_status(sc->global) != MT_OK)
        __atomic_store_n(&sc->status_clean, false, __ATOMIC_RELAXED);
    mt_status s = mt_partition(sc->global, sc->loss, ctx,
                               &(mt_partition_opts){.mode = MT_SHARD_AUTO}, &local, &lloss);
    mt_axes m;
    int64_t off = 0;
    if (s == MT_OK) s = mt_ctx_axes(ctx, "m", &m);
    if (s == MT_OK) off = mt_axis_index(ctx, m) * (H / mt_axis_size(ctx, m));
    if (s == MT_OK) s = mt_graph_compile(local, lloss, &(mt_compile_opts){.seed = 5});
    if (s == MT_OK) {
        fill(mt_graph_find(local, "a"), "a", 0, off);
        fill(mt_graph_find(local, "b"), "b", off, 0);
        s = mt_graph_forward(local);
    }
    if (s == MT_OK) s = mt_graph_backward(local);
    if (s == MT_OK && first) {
        sc->got.loss = mt_graph_loss(local);
        memcpy(sc->got.dp, mt_tensor_f32(mt_tensor_grad(mt_graph_find(local, "p"))),
               sizeof sc->got.dp);
    }
    if (s != MT_OK && first) snprintf(sc->got.msg, sizeof sc->got.msg, "%s", mt_errmsg());
    mt_graph_free(local);
    return s;
}

MT_TEST(refused_partition_leaves_the_shared_graph_reusable) {
    /* the global program of partial_device, built and sharded before the threads start */
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create("m=2", 2, &mesh));
    int64_t as[2] = {N, H}, bs[2] = {H, O}, ps[1] = {O};
    mt_graph *g = mt_graph_create();
    mt_tensor *a = mt_input(g, "a", MT_F32, 2, as), *b = mt_input(g, "b", MT_F32, 2, bs);
    mt_tensor *p = mt_param(g, "p", 1, ps, (mt_init){MT_INIT_NORMAL, 1.0f});
    mt_tensor *loss = mt_sum(g, mt_mul(g, mt_matmul(g, a, b, false, false), p));
    MT_CHECK(loss, "build: %s", mt_graph_errmsg(g));
    mt_sharding sa, sb;
    MT_CHECK_OK(mt_sharding_parse(mesh, "_,m", 2, &sa));
    MT_CHECK_OK(mt_sharding_parse(mesh, "m", 2, &sb));
    MT_CHECK_OK(mt_tensor_set_sharding(a, &sa));
    MT_CHECK_OK(mt_tensor_set_sharding(b, &sb));
    mt_mesh_free(mesh);

    shared_case sc = {.global = g, .loss = loss, .status_clean = true};
    mt_launch_opts o = {.mesh = "m=2", .devices = 2, .timeout_s = 30, .kernel_threads = 1};
    mt_status s = mt_launch(&o, shared_device, &sc);
    MT_CHECK(s == MT_OK, "the auto retry on the shared graph: %s (%s)", mt_status_name(s),
             sc.got.msg[0] ? sc.got.msg : mt_errmsg());
    MT_CHECK(sc.refused == MT_ESHARDING && strstr(sc.refusal, "matmul") &&
             strstr(sc.refusal, "reshard"), "explicit mode refuses the matmul: %s (%s)",
             mt_status_name(sc.refused), sc.refusal);
    MT_CHECK(sc.status_clean && mt_graph_status(g) == MT_OK,
             "the refusal is left on the global graph: %s", mt_graph_errmsg(g));
    /* the same as a fresh graph, to the bit: the same program */
    partial_case fresh = run_partial("m=2", MT_SHARD_AUTO, NULL);
    MT_CHECK(fresh.status == MT_OK, "fresh graph: %s", fresh.msg);
    MT_CHECK(sc.got.loss == fresh.loss, "loss %.9g, a fresh graph's %.9g", sc.got.loss, fresh.loss);
    for (int i = 0; i < O; i++)
        MT_CHECK(sc.got.dp[i] == fresh.dp[i], "dp[%d] %.9g, a fresh graph's %.9g", i,
                 sc.got.dp[i], fresh.dp[i]);
    mt_graph_free(g);
}

/* The moves of a reshard, as collective nodes: counted in the program. */
typedef struct {
    const char *spec;            /* the product's layout after the reshard */
    int         n_coll;
    char        ops[256];        /* the collectives' op names, in run order */
} moves_case;

static mt_status moves_device(mt_ctx *ctx, void *arg) {
    moves_case *mc = arg;
    int64_t as[2] = {N, H}, bs[2] = {H, O};
    mt_graph *g = mt_graph_create(), *local = NULL;
    mt_tensor *a = mt_input(g, "a", MT_F32, 2, as), *b = mt_input(g, "b", MT_F32, 2, bs);
    mt_sharding sa, sh;
    mt_sharding_parse(mt_ctx_mesh(ctx), "m", 2, &sa);   /* rows split: the product's too */
    mt_sharding_parse(mt_ctx_mesh(ctx), mc->spec, 2, &sh);
    mt_tensor_set_sharding(a, &sa);
    mt_tensor *loss = mt_sum(g, mt_reshard(g, mt_matmul(g, a, b, false, false), &sh)), *ll;
    mt_status s = mt_partition(g, loss, ctx, &(mt_partition_opts){.mode = MT_SHARD_EXPLICIT},
                               &local, &ll);
    if (s == MT_OK) s = mt_graph_compile(local, ll, &(mt_compile_opts){.no_grad = true});
    if (s == MT_OK && mt_ctx_device(ctx) == 0) {
        size_t at = 0;
        for (int i = 0; i < mt_graph_n_nodes(local); i++) {
            mt_node_info in;
            mt_graph_node(local, i, &in);
            if (!in.collective) continue;
            mc->n_coll++;
            at += (size_t)snprintf(mc->ops + at, sizeof mc->ops - at, "%s ", in.op);
        }
    }
    mt_graph_free(local);
    mt_graph_free(g);
    return s;
}

MT_TEST(reshard_moves_are_collectives) {
    static const struct { const char *spec, *ops; } CASES[] = {
        {"m", "psum "},                  /* nothing to move; the sum is partial: the loss's psum */
        {"_,m", "all_to_all psum "},     /* m moves from the rows to the columns; then as above */
        {"", "all_gather "},             /* gathered whole: the sum is the same everywhere */
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        moves_case mc = {.spec = CASES[i].spec};
        mt_launch_opts o = {.mesh = "m=2", .devices = 2, .timeout_s = 30, .kernel_threads = 1};
        MT_CHECK_OK(mt_launch(&o, moves_device, &mc));
        MT_CHECK(strcmp(mc.ops, CASES[i].ops) == 0, "reshard to '%s': collectives '%s', want '%s'",
                 CASES[i].spec, mc.ops, CASES[i].ops);
    }
}

/* A constraint on an op's output (JAX's with_sharding_constraint,
 * Megatron-SP's layout): w1 split on H (so h = gelu(x · w1ᵀ + b1) is too)
 * and z split on its contracting dim H make o = h · z a partial sum over
 * m; with o constrained to its rows N over m, the sum is
 * reduce-scattered onto N (one psum_scatter in device 0's program),
 * without it none is; both train the one-device run. */
MT_TEST(constraint_reduce_scatters_a_partial_product) {
    run_case one = run(NULL, 1, "", "", "", MT_SHARD_AUTO);
    MT_CHECK(one.status == MT_OK, "one device: %s", one.msg);
    run_case plain = run_on((run_case){.mesh = "m=2", .devices = 2, .spec = {"", "m", ""},
                                       .wspec = "m"});
    check_same(&plain, &one, "h and z over m, no constraint");
    MT_CHECK(plain.scatters == 0, "without a constraint: %d psum_scatter nodes, want 0",
             plain.scatters);
    run_case con = run_on((run_case){.mesh = "m=2", .devices = 2, .spec = {"", "m", ""},
                                     .wspec = "m", .ospec = "m"});
    check_same(&con, &one, "h and z over m, o's rows constrained over m");
    MT_CHECK(con.scatters == 1, "o's rows over m: %d psum_scatter nodes, want 1", con.scatters);
}

/* What mt_tensor_set_constraint and mt_partition_opts.lowerings refuse. */
MT_TEST(constraint_and_lowerings_refusals) {
    mt_graph *g = mt_graph_create();
    mt_tensor *o = NULL, *loss = build(g, &o);
    mt_sharding sh = {{1}, 0};
    MT_CHECK(mt_tensor_set_constraint(mt_graph_find(g, "x"), &sh) == MT_EINVAL &&
             strstr(mt_errmsg(), "'x' is a leaf") && strstr(mt_errmsg(), "mt_tensor_set_sharding"),
             "a leaf's constraint: '%s'", mt_errmsg());
    sh.partial_axes = 1;
    MT_CHECK(mt_tensor_set_constraint(o, &sh) == MT_EINVAL &&
             strstr(mt_errmsg(), "partial sums"), "a partial constraint: '%s'", mt_errmsg());
    sh = (mt_sharding){{0, 0, 1}, 0};
    MT_CHECK(mt_tensor_set_constraint(o, &sh) == MT_EINVAL &&
             strstr(mt_errmsg(), "splits dim 2"), "a dim o lacks: '%s'", mt_errmsg());
    /* the variants, in the table's order (op_desc.c): collective matmul, and
       context parallelism's ring and Ulysses for each attention op */
    static const char *const VARIANTS[] = {"collective_matmul", "ring_attention",
                                           "ring_attention_gqa", "ulysses_attention",
                                           "ulysses_attention_gqa"};
    const int n_var = (int)(sizeof VARIANTS / sizeof VARIANTS[0]);
    for (int i = 0; i < n_var; i++)
        MT_CHECK(mt_partition_lowering(i) && strcmp(mt_partition_lowering(i), VARIANTS[i]) == 0,
                 "lowering variant %d: '%s', want '%s'", i,
                 mt_partition_lowering(i) ? mt_partition_lowering(i) : "(none)", VARIANTS[i]);
    MT_CHECK(!mt_partition_lowering(n_var) && !mt_partition_lowering(-1),
             "no variant past the last, nor before the first");
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create("m=2", 2, &mesh));
    mt_ctx *ctx = NULL;
    MT_CHECK_OK(mt_ctx_virtual_create(mesh, 0, &ctx));
    mt_partition_opts po = {.lowerings = "collective_matmul,ring"};
    mt_graph *local = NULL;
    mt_tensor *lloss = NULL;
    MT_CHECK(mt_partition(g, loss, ctx, &po, &local, &lloss) == MT_EINVAL &&
             strstr(mt_errmsg(), "'ring'") && strstr(mt_errmsg(), "known: collective_matmul"),
             "an unknown lowering: '%s'", mt_errmsg());
    snprintf(po.lowerings, sizeof po.lowerings, "collective_matmul");
    MT_CHECK_OK(mt_partition(g, loss, ctx, &po, &local, &lloss));
    mt_graph_free(local);
    mt_ctx_virtual_free(ctx);
    mt_mesh_free(mesh);
    mt_graph_free(g);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
