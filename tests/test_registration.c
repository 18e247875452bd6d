/*
 * test_registration.c — a model and a strategy added from outside the
 * library (issue 38, item 5): this file registers both through the internal
 * registration calls (train_impl.h) and edits no library file.
 *
 * The model, "wide_mlp": x (B,8) -> linear (16,8) -> gelu -> linear (4,16)
 * -> mean squared error against targets (B,4), its hidden dim named by a
 * logical axis no built-in model has ("wide"), its data a pure function of
 * the position. The strategy: one row, "wide=tensor". Registered, the
 * model trains through the ordinary trainer on one device, tensor=2 and
 * data=2,tensor=2 (where the row splits its hidden dim: Megatron's pair,
 * column- then row-parallel), every step's loss and gradient norm within
 * 1e-5 of one device's and the final parameters within 1e-4 — and on
 * tensor=2 device 0 holds its first weight split (the row took effect).
 * Also: the registered kind is reached by name like a built-in one, and
 * registering a name twice, an entry without a builder or a row whose rules
 * do not parse is refused naming what is wrong.
 *
 * And a backend, "counting": the CPU's table under another name, its
 * run_op counting the ops it runs. Registered (backend_impl.h), a run names
 * it (mt_train_config.backend) and the wide model trains on it, on one
 * device and on data=2,tensor=2, equal to the CPU's one-device run, every
 * op of every step through it; a backend name twice, a table without its
 * required members, a run naming no backend or one that runs nothing are
 * refused naming what is wrong.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"
#include "train/train_impl.h"
#include "backend/backend_impl.h"

#include <math.h>
#include <string.h>

enum { N_IN = 8, HIDDEN = 16, N_OUT = 4, STEPS = 4 };

static mt_tensor *wide_build(const mt_train_config *c, mt_graph *g, float scale) {
    const mt_init w_init = {MT_INIT_UNIFORM, 0.35f}, zeros = {MT_INIT_ZEROS, 0};
    mt_tensor *x = mt_graph_logical(g, mt_input(g, "x", MT_F32, 2, (int64_t[]){c->B, N_IN}),
                                    "batch");
    mt_tensor *t = mt_graph_logical(g, mt_input(g, "targets", MT_F32, 2,
                                                (int64_t[]){c->B, N_OUT}), "batch");
    mt_tensor *w1 = mt_graph_logical(g, mt_param(g, "w1", 2, (int64_t[]){HIDDEN, N_IN}, w_init),
                                     "wide,_");
    mt_tensor *b1 = mt_graph_logical(g, mt_param(g, "b1", 1, (int64_t[]){HIDDEN}, zeros), "wide");
    mt_tensor *w2 = mt_graph_logical(g, mt_param(g, "w2", 2, (int64_t[]){N_OUT, HIDDEN}, w_init),
                                     "_,wide");
    mt_tensor *h = mt_gelu(g, mt_linear(g, x, w1, b1));                 /* (B,16) */
    return mt_mse(g, mt_linear(g, h, w2, NULL), t, scale);              /* (B,4) */
}

/* rows [row0, row0+rows) of the microbatch at *pos: x from a fixed formula,
 * the targets a fixed nonlinear function of x */
static mt_status wide_fill(const mt_train_config *c, const mt_dataset *ds, int split,
                           int64_t *pos, int row0, int rows, void *in, void *target) {
    (void)ds;
    float *x = in, *y = target;
    for (int r = 0; r < rows; r++) {
        double e = (double)(*pos + row0 + r) + 1000.0 * split;
        for (int i = 0; i < N_IN; i++) x[r * N_IN + i] = (float)sin(0.37 * e + 1.3 * i);
        for (int o = 0; o < N_OUT; o++) {
            double s = 0;
            for (int i = 0; i < N_IN; i++) s += x[r * N_IN + i] * cos(0.5 * o + 0.25 * i);
            y[r * N_OUT + o] = (float)tanh(s);
        }
    }
    *pos += c->B;
    return MT_OK;
}

static void wide_describe(const mt_train_config *c, char *buf, size_t n) {
    (void)c;
    snprintf(buf, n, "wide_mlp %d-%d-%d", N_IN, HIDDEN, N_OUT);
}

static const mt__train_model WIDE = {
    .about = {.name = "wide_mlp"},
    .input = "x", .target = "targets",
    .build = wide_build, .fill_batch = wide_fill, .describe = wide_describe,
    .logical_axes = "batch,wide",
};

static const mt__strategy_row WIDE_ROW = {.strategy = "the wide MLP's hidden dim over tensor",
                                         .rules = "wide=tensor"};

/* the kind, registered once for the whole program (cases run in children) */
static mt_model_kind wide_kind(void) {
    static mt_model_kind kind = (mt_model_kind)-1;
    if ((int)kind < 0) {
        MT_CHECK_OK(mt__train_model_register(&WIDE, &kind));
        MT_CHECK_OK(mt__strategy_register(&WIDE_ROW));
    }
    return kind;
}

/* the counting backend: the CPU's members, run_op counting (every device's
 * thread adds to one count) */
static long g_ops;
static void counting_run(const mt_op_env *env, const mt_op_call *call) {
    __atomic_fetch_add(&g_ops, 1, __ATOMIC_RELAXED);
    mt_backend_cpu()->run_op(env, call);
}

static const mt_backend *counting(void) {
    static mt_backend be;
    if (!be.name) {
        be = *mt_backend_cpu();
        be.name = "counting";
        be.run_op = counting_run;
        MT_CHECK_OK(mt__backend_register(&be));
    }
    return &be;
}

typedef struct {
    mt_test_curve  c;
    mt_test_params p;
} trained;

static trained train_with(const char *mesh, const char *backend) {
    mt_train_config c = mt_train_defaults();
    c.model = wide_kind();
    c.B = 8;
    c.steps = STEPS;
    c.threads = 1;
    c.seed = 7;
    c.mesh = mesh;
    c.backend = backend;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    trained out = {.c = mt_test_steps(tr, STEPS)};
    out.p = mt_test_params_of(tr);
    mt_trainer_free(tr);
    return out;
}

static trained train_on(const char *mesh) { return train_with(mesh, NULL); }

MT_TEST(a_registered_model_and_row_train_the_one_device_run) {
    mt_model_kind kind = wide_kind();
    MT_CHECK(mt_model_name(kind) && !strcmp(mt_model_name(kind), "wide_mlp"),
             "the registered kind %d is named '%s'", (int)kind,
             mt_model_name(kind) ? mt_model_name(kind) : "(none)");
    trained one = train_on(NULL);
    MT_CHECK(one.c.loss[STEPS - 1] < one.c.loss[0], "training lowers the loss: %g -> %g",
             one.c.loss[0], one.c.loss[STEPS - 1]);
    static const struct { const char *mesh; bool split; } meshes[] = {
        {"tensor=2", true}, {"data=2,tensor=2", true}, {"data=2", false}};
    for (size_t k = 0; k < sizeof meshes / sizeof meshes[0]; k++) {
        trained got = train_on(meshes[k].mesh);
        for (int s = 0; s < STEPS; s++) {
            MT_CHECK_CLOSE(got.c.loss[s], one.c.loss[s], 1e-5, "%s: loss at step %d",
                           meshes[k].mesh, s + 1);
            MT_CHECK_CLOSE(got.c.norm[s], one.c.norm[s], 1e-5, "%s: gradient norm at step %d",
                           meshes[k].mesh, s + 1);
        }
        int shards = 0;
        double worst = mt_test_params_diff(&got.p, &one.p, &shards);
        MT_CHECK(worst < 1e-4, "%s: parameters differ by %g", meshes[k].mesh, worst);
        MT_CHECK((shards > 0) == meshes[k].split, "%s: device 0 holds %d parameters split, want "
                 "%s", meshes[k].mesh, shards, meshes[k].split ? "some (the row)" : "none");
        free(got.p.params);
    }
    free(one.p.params);
}

MT_TEST(a_registered_backend_trains_the_one_device_run) {
    MT_CHECK(mt_backend_find("counting") == NULL, "a backend named 'counting' before registering");
    const mt_backend *be = counting();
    MT_CHECK(mt_backend_find("counting") == be && mt_backend_runs(be), "registered, it is found");
    trained one = train_on(NULL);
    static const char *const meshes[] = {NULL, "data=2,tensor=2"};
    for (int k = 0; k < 2; k++) {
        long before = __atomic_load_n(&g_ops, __ATOMIC_RELAXED);
        trained got = train_with(meshes[k], "counting");
        long ran = __atomic_load_n(&g_ops, __ATOMIC_RELAXED) - before;
        const char *what = meshes[k] ? meshes[k] : "one device";
        for (int s = 0; s < STEPS; s++) {
            MT_CHECK_CLOSE(got.c.loss[s], one.c.loss[s], 1e-5, "counting, %s: loss at step %d",
                           what, s + 1);
            MT_CHECK_CLOSE(got.c.norm[s], one.c.norm[s], 1e-5, "counting, %s: gradient norm "
                           "at step %d", what, s + 1);
        }
        int shards = 0;
        MT_CHECK(mt_test_params_diff(&got.p, &one.p, &shards) < 1e-4, "counting, %s: parameters",
                 what);
        /* forward, backward and the loss: at least 3 ops a microbatch step */
        MT_CHECK(ran >= 3 * STEPS, "counting, %s: %ld ops ran through the backend", what, ran);
        free(got.p.params);
    }
    free(one.p.params);
}

MT_TEST(backend_registration_refuses_what_it_cannot_run) {
    counting();
    mt_backend twin = *counting();
    MT_CHECK(mt__backend_register(&twin) == MT_EINVAL && strstr(mt_errmsg(), "'counting'") &&
             strstr(mt_errmsg(), "registered already"), "a name twice: '%s'", mt_errmsg());
    static mt_backend bare;
    bare = *counting();
    bare.name = "bare";
    bare.buffer_alloc = NULL;
    MT_CHECK(mt__backend_register(&bare) == MT_EINVAL && strstr(mt_errmsg(), "'bare'") &&
             strstr(mt_errmsg(), "buffer_alloc"), "no buffer_alloc: '%s'", mt_errmsg());
    mt_train_config c = mt_train_defaults();
    c.model = wide_kind();
    c.backend = "cuda";
    MT_CHECK(mt_train_config_check(&c) == MT_EINVAL && strstr(mt_errmsg(), "'cuda'") &&
             strstr(mt_errmsg(), "cpu, shape-only, counting"), "an unknown backend: '%s'",
             mt_errmsg());
    c.backend = "shape-only";
    MT_CHECK(mt_train_config_check(&c) == MT_EINVAL && strstr(mt_errmsg(), "runs nothing"),
             "a backend that runs nothing: '%s'", mt_errmsg());
}

MT_TEST(registration_refuses_what_it_cannot_run) {
    mt_model_kind kind;
    wide_kind();
    MT_CHECK(mt__train_model_register(&WIDE, &kind) == MT_EINVAL &&
             strstr(mt_errmsg(), "'wide_mlp'") && strstr(mt_errmsg(), "exists"),
             "the same name twice: '%s'", mt_errmsg());
    mt__train_model bad = WIDE;
    bad.about.name = "no_builder";
    bad.build = NULL;
    MT_CHECK(mt__train_model_register(&bad, &kind) == MT_EINVAL &&
             strstr(mt_errmsg(), "'no_builder'") && strstr(mt_errmsg(), "build"),
             "an entry without a builder: '%s'", mt_errmsg());
    static const mt__strategy_row broken = {.strategy = "broken", .rules = "wide"};
    MT_CHECK(mt__strategy_register(&broken) == MT_EINVAL && strstr(mt_errmsg(), "'broken'") &&
             strstr(mt_errmsg(), "logical=mesh"), "a row that does not parse: '%s'", mt_errmsg());
    /* a built-in model is still itself */
    MT_CHECK(!strcmp(mt_model_name(MT_MODEL_GPT), "gpt"), "built-in kinds unchanged");
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
