/*
 * test_dp.c — DESIGN's invariant for data parallelism through the
 * partitioner: one global program, its batch split over "data", partitioned
 * per device (mt_partition inserts the gradient all-reduce), computes the
 * same training run as one device: the same loss at every step (relative
 * 1e-5) and the same parameters at the end (1e-4).
 *
 * The reference is the plain single-device graph, built and run without a
 * mesh. Two broken variants show that the checks can fail: without the
 * inserted reduction, and with the loss normalised per device instead of by
 * the global token count. test_strategies.c runs the trainer on every layout.
 * Slots (several microbatches in flight, interleaved) on a partitioned graph,
 * with its deferred gradient all-reduces, compute bitwise what running the
 * microbatches one at a time computes.
 */
#include "meshtrain.h"
#include "harness.h"

#define STEPS 4
#define GLOBAL_B 8
#define SEQ 8

static const mt_gpt_config CFG = {.L = 2, .C = 16, .NH = 2, .maxT = SEQ, .V = 32, .Vp = 32};

/* The global batch of step s: sequence b, position t. Every mesh sees the same. */
static int32_t token_at(int s, int b, int t) { return (int32_t)((s * 7 + b * 5 + t * 3) % CFG.V); }

typedef struct {
    int     devices;
    bool    skip_reduction;   /* broken variant 1 */
    bool    per_device_norm;  /* broken variant 2 */
    float   losses[STEPS];    /* global loss per step, from device 0 */
    float  *params;           /* final parameters of device 0, concatenated */
    int64_t n_params;
} dp_run;

/* Plain SGD steps on a compiled graph whose inputs hold B sequences from
 * global row `row0`; the loss of each step goes to run->losses. */
static mt_status sgd_steps(mt_graph *g, int B, int row0, dp_run *run, bool record) {
    int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));
    mt_status s = MT_OK;
    for (int step = 0; step < STEPS && s == MT_OK; step++) {
        for (int b = 0; b < B; b++)
            for (int t = 0; t < SEQ; t++) {
                tok[b * SEQ + t] = token_at(step, row0 + b, t);
                tgt[b * SEQ + t] = token_at(step, row0 + b, t + 1);
            }
        mt_graph_zero_grad(g);
        if ((s = mt_graph_forward(g)) != MT_OK || (s = mt_graph_backward(g)) != MT_OK) break;
        if (record) run->losses[step] = mt_graph_loss(g);
        for (int i = 0; i < mt_graph_n_params(g); i++) {
            mt_tensor *p = mt_graph_param_at(g, i);
            if (!mt_tensor_grad(p)) continue;
            float *w = mt_tensor_f32(p), *gr = mt_tensor_f32(mt_tensor_grad(p));
            for (int64_t j = 0; j < mt_tensor_numel(p); j++) w[j] -= 0.5f * gr[j];
        }
    }
    return s;
}

static void keep_params(mt_graph *g, dp_run *run) {
    int64_t n = 0;
    for (int i = 0; i < mt_graph_n_params(g); i++) n += mt_tensor_numel(mt_graph_param_at(g, i));
    run->params = malloc((size_t)n * sizeof(float));
    run->n_params = n;
    for (int i = 0, at = 0; i < mt_graph_n_params(g); i++) {
        mt_tensor *p = mt_graph_param_at(g, i);
        memcpy(run->params + at, mt_tensor_f32(p), (size_t)mt_tensor_numel(p) * sizeof(float));
        at += (int)mt_tensor_numel(p);
    }
}

/* One device, no mesh: the reference. */
static dp_run run_single(void) {
    dp_run run = {.devices = 1};
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = mt_gpt_build(g, &CFG, GLOBAL_B, SEQ, 1.0f / (GLOBAL_B * SEQ));
    MT_CHECK(loss, "build: %s", mt_graph_errmsg(g));
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 42}));
    MT_CHECK_OK(mt_gpt_fill_constants(g));
    MT_CHECK_OK(sgd_steps(g, GLOBAL_B, 0, &run, true));
    keep_params(g, &run);
    mt_graph_free(g);
    return run;
}

/* Every device: the global program, its batch split over "data", partitioned. */
static mt_status dp_device(mt_ctx *ctx, void *arg) {
    dp_run *run = arg;
    mt_axes data;
    mt_status s = mt_ctx_axes(ctx, "data", &data);
    if (s != MT_OK) return s;
    const int P = mt_axis_size(ctx, data), r = mt_axis_index(ctx, data);
    mt_graph *g = mt_graph_create(), *local = NULL;
    /* the right normaliser is the global token count; the broken variant
     * divides by the device's own */
    float scale = run->per_device_norm ? (float)P / (GLOBAL_B * SEQ) : 1.0f / (GLOBAL_B * SEQ);
    mt_tensor *loss = mt_gpt_build(g, &CFG, GLOBAL_B, SEQ, scale), *local_loss = NULL;
    if (!loss) { s = mt_graph_status(g); goto out; }
    mt_sharding batch_split = {.dim_axes = {1u << data.axis[0]}};
    if ((s = mt_tensor_set_sharding(mt_graph_find(g, "tokens"), &batch_split)) != MT_OK ||
        (s = mt_tensor_set_sharding(mt_graph_find(g, "targets"), &batch_split)) != MT_OK)
        goto out;
    mt_partition_opts po = {.test_skip_grad_reduction = run->skip_reduction};
    if ((s = mt_partition(g, loss, ctx, &po, &local, &local_loss)) != MT_OK) goto out;
    if ((s = mt_graph_compile(local, local_loss, &(mt_compile_opts){.seed = 42})) != MT_OK ||
        (s = mt_gpt_fill_constants(local)) != MT_OK)
        goto out;
    if (mt_tensor_dim(mt_graph_find(local, "tokens"), 0) != GLOBAL_B / P) {
        s = mt_fail(MT_EINTERNAL, "device tokens hold %lld rows, want %d",
                    (long long)mt_tensor_dim(mt_graph_find(local, "tokens"), 0), GLOBAL_B / P);
        goto out;
    }
    s = sgd_steps(local, GLOBAL_B / P, r * (GLOBAL_B / P), run, mt_ctx_device(ctx) == 0);
    if (s == MT_OK && mt_ctx_device(ctx) == 0) keep_params(local, run);
out:
    mt_graph_free(local);
    mt_graph_free(g);
    return s;
}

static dp_run run_dp(int devices, bool skip_reduction, bool per_device_norm) {
    dp_run run = {.devices = devices, .skip_reduction = skip_reduction,
                  .per_device_norm = per_device_norm};
    char mesh[32];
    snprintf(mesh, sizeof mesh, "data=%d", devices);
    mt_launch_opts o = {.mesh = mesh, .devices = devices, .timeout_s = 60, .kernel_threads = 1};
    MT_CHECK_OK(mt_launch(&o, dp_device, &run));
    return run;
}

/* The largest relative difference of the parameters. */
static double param_diff(const dp_run *a, const dp_run *b) {
    MT_CHECK(a->n_params == b->n_params, "parameter counts %lld and %lld",
             (long long)a->n_params, (long long)b->n_params);
    double worst = 0;
    for (int64_t j = 0; j < a->n_params; j++) {
        double d = fabs((double)a->params[j] - b->params[j]) / (1e-3 + fabs(b->params[j]));
        if (d > worst) worst = d;
    }
    return worst;
}

static double loss_diff(const dp_run *a, const dp_run *b) {
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        double d = fabs((double)a->losses[s] - b->losses[s]) / fabs(b->losses[s]);
        if (d > worst) worst = d;
    }
    return worst;
}

MT_TEST(partitioned_gpt_equals_one_device) {
    dp_run one = run_single();
    MT_CHECK(one.losses[STEPS - 1] < one.losses[0], "training lowers the loss: %g -> %g",
             one.losses[0], one.losses[STEPS - 1]);
    for (int devices = 2; devices <= 8; devices *= 2) {
        dp_run dp = run_dp(devices, false, false);
        for (int s = 0; s < STEPS; s++)
            MT_CHECK_CLOSE(dp.losses[s], one.losses[s], 1e-5, "%d devices, loss at step %d",
                           devices, s + 1);
        double worst = param_diff(&dp, &one);
        MT_CHECK(worst < 1e-4, "%d devices: parameters differ from 1 device by %g (relative)",
                 devices, worst);
        free(dp.params);
    }
    free(one.params);
}

/* The checks above can fail: a run without the inserted reduction, and one
 * normalised per device, are both caught. */
MT_TEST(broken_data_parallel_is_caught) {
    dp_run one = run_single();
    dp_run unreduced = run_dp(2, true, false);
    double pd = param_diff(&unreduced, &one);
    MT_CHECK(pd > 1e-4, "without the gradient reduction the parameters still match (%g)", pd);
    MT_CHECK(loss_diff(&unreduced, &one) > 1e-5, "without the reduction the losses still match");
    dp_run per_device = run_dp(2, false, true);
    MT_CHECK(loss_diff(&per_device, &one) > 1e-5,
             "normalised per device, the losses still match (%g)", loss_diff(&per_device, &one));
    free(one.params);
    free(unreduced.params);
    free(per_device.params);
}

/* ---- slots under data parallelism ---- */

/* A partitioned GPT for 2 of the global rows per device (B = 2·P), ready. */
static mt_status dp_local(mt_ctx *ctx, int P, mt_graph **global, mt_graph **local) {
    *global = mt_graph_create();
    *local = NULL;
    mt_tensor *loss = mt_gpt_build(*global, &CFG, 2 * P, SEQ, 1.0f / (2 * P * SEQ)), *ll = NULL;
    if (!loss) return mt_graph_status(*global);
    mt_axes data;
    mt_status s = mt_ctx_axes(ctx, "data", &data);
    mt_sharding split = {.dim_axes = {1u << data.axis[0]}};
    if (s == MT_OK) s = mt_tensor_set_sharding(mt_graph_find(*global, "tokens"), &split);
    if (s == MT_OK) s = mt_tensor_set_sharding(mt_graph_find(*global, "targets"), &split);
    if (s == MT_OK) s = mt_partition(*global, loss, ctx, &(mt_partition_opts){0}, local, &ll);
    if (s == MT_OK) s = mt_graph_compile(*local, ll, &(mt_compile_opts){.seed = 42});
    if (s == MT_OK) s = mt_gpt_fill_constants(*local);
    return s;
}

static void fill_rows(mt_graph *g, int mb, int row0) {
    int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < SEQ; t++) {
            tok[b * SEQ + t] = token_at(mb, row0 + b, t);
            tgt[b * SEQ + t] = token_at(mb, row0 + b, t + 1);
        }
}

/* Every device runs three microbatches on two slots, interleaved (F0 F1 B0
 * W0 F2 B1 W1 B2 W2), its W's gradient all-reduces deferred as usual, and
 * the same three one at a time on a one-slot graph: losses and gradients
 * must be bitwise the same. */
static mt_status slots_device(mt_ctx *ctx, void *arg) {
    (void)arg;
    mt_axes data;
    mt_status s = mt_ctx_axes(ctx, "data", &data);
    if (s != MT_OK) return s;
    const int P = mt_axis_size(ctx, data), row0 = 2 * mt_axis_index(ctx, data);
    mt_graph *glob[2] = {0}, *loc[2] = {0};
    for (int i = 0; i < 2 && s == MT_OK; i++) s = dp_local(ctx, P, &glob[i], &loc[i]);
    mt_graph *ref = loc[0], *g = loc[1];
    float want[3] = {0}, got[3] = {0};
    for (int mb = 0; mb < 3 && s == MT_OK; mb++) {
        fill_rows(ref, mb, row0);
        if ((s = mt_graph_forward(ref)) == MT_OK && (s = mt_graph_backward_b(ref)) == MT_OK)
            s = mt_graph_backward_w(ref);
        want[mb] = mt_graph_loss(ref);
    }
    if (s == MT_OK) s = mt_graph_set_slots(g, 2);
    static const struct { char ph; int mb, slot; } sched[] = {
        {'F', 0, 0}, {'F', 1, 1}, {'B', 0, 0}, {'W', 0, 0}, {'F', 2, 0},
        {'B', 1, 1}, {'W', 1, 1}, {'B', 2, 0}, {'W', 2, 0}};
    for (int i = 0; i < 9 && s == MT_OK; i++) {
        if ((s = mt_graph_use_slot(g, sched[i].slot)) != MT_OK) break;
        if (sched[i].ph == 'F') {
            fill_rows(g, sched[i].mb, row0);
            s = mt_graph_forward(g);
            got[sched[i].mb] = mt_graph_loss(g);
        } else {
            s = sched[i].ph == 'B' ? mt_graph_backward_b(g) : mt_graph_backward_w(g);
        }
    }
    for (int mb = 0; mb < 3 && s == MT_OK; mb++)
        if (got[mb] != want[mb])
            s = mt_fail(MT_EINTERNAL, "microbatch %d: loss %.9g on slots, %.9g alone", mb,
                        got[mb], want[mb]);
    for (int i = 0; s == MT_OK && i < mt_graph_n_params(g); i++) {
        mt_tensor *p = mt_graph_param_at(g, i), *q = mt_graph_param_at(ref, i);
        if (mt_tensor_grad(p) && memcmp(mt_tensor_f32(mt_tensor_grad(p)),
                                        mt_tensor_f32(mt_tensor_grad(q)),
                                        (size_t)mt_tensor_numel(p) * sizeof(float)) != 0)
            s = mt_fail(MT_EINTERNAL, "gradient of %s differs on slots", mt_tensor_name(p));
    }
    for (int i = 0; i < 2; i++) {
        mt_graph_free(loc[i]);
        mt_graph_free(glob[i]);
    }
    return s;
}

MT_TEST(slots_with_deferred_all_reduces_equal_one_at_a_time) {
    mt_launch_opts o = {.mesh = "data=2", .devices = 2, .timeout_s = 60, .kernel_threads = 1};
    MT_CHECK_OK(mt_launch(&o, slots_device, NULL));
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
