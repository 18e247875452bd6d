/*
 * test_dp.c — DESIGN's invariant through the runtime, by hand: a GPT trained
 * data-parallel on a mesh of threads (each device its own graph over its
 * slice of the global batch, gradients psum'd over "data", the same SGD
 * update everywhere) computes the same run as one device: the same loss at
 * every step and the same parameters at the end.
 *
 * This is the engine and the collectives composed without a partitioner;
 * the partitioner will later insert the same psum itself.
 */
#include "meshtrain.h"
#include "harness.h"

#define STEPS 4
#define GLOBAL_B 4
#define T 8

static const mt_gpt_config CFG = {.L = 2, .C = 16, .NH = 2, .maxT = T, .V = 32, .Vp = 32};

/* The global batch of step s: sequence b, position t. Every mesh sees the same. */
static int32_t token_at(int s, int b, int t) { return (int32_t)((s * 7 + b * 5 + t * 3) % CFG.V); }

typedef struct {
    float losses[STEPS];       /* global loss per step, written by device 0 */
    float *params;             /* final parameters of device 0, concatenated */
    int64_t n_params;
} dp_result;

static mt_status train(mt_ctx *ctx, void *arg) {
    dp_result *res = arg;
    mt_axes data;
    mt_status s = mt_ctx_axes(ctx, "data", &data);
    if (s != MT_OK) return s;
    const int P = mt_axis_size(ctx, data), r = mt_axis_index(ctx, data);
    const int B = GLOBAL_B / P;                       /* this device's slice */
    mt_graph *g = mt_graph_create();
    /* normalised by the GLOBAL token count: local sums add up to the mean */
    mt_tensor *loss = mt_gpt_build(g, &CFG, B, T, 1.0f / (GLOBAL_B * T));
    if (!loss) { s = mt_graph_status(g); goto out; }
    if ((s = mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 42})) != MT_OK) goto out;
    if ((s = mt_gpt_fill_constants(g)) != MT_OK) goto out;
    int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));
    const int np = mt_graph_n_params(g);
    for (int step = 0; step < STEPS && s == MT_OK; step++) {
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                tok[b * T + t] = token_at(step, r * B + b, t);
                tgt[b * T + t] = token_at(step, r * B + b, t + 1);
            }
        mt_graph_zero_grad(g);
        if ((s = mt_graph_forward(g)) != MT_OK || (s = mt_graph_backward(g)) != MT_OK) break;
        float l = mt_graph_loss(g);
        if ((s = mt_psum(ctx, data, &l, 1)) != MT_OK) break;
        if (mt_ctx_device(ctx) == 0) res->losses[step] = l;
        /* the data-parallel step: every gradient summed over the batch split */
        for (int i = 0; i < np && s == MT_OK; i++) {
            mt_tensor *p = mt_graph_param_at(g, i);
            if (!mt_tensor_grad(p)) continue;
            s = mt_psum(ctx, data, mt_tensor_f32(mt_tensor_grad(p)), (size_t)mt_tensor_numel(p));
        }
        for (int i = 0; i < np && s == MT_OK; i++) {   /* plain SGD, lr 0.5 */
            mt_tensor *p = mt_graph_param_at(g, i);
            if (!mt_tensor_grad(p)) continue;
            float *w = mt_tensor_f32(p), *gr = mt_tensor_f32(mt_tensor_grad(p));
            for (int64_t j = 0; j < mt_tensor_numel(p); j++) w[j] -= 0.5f * gr[j];
        }
    }
    if (s == MT_OK && mt_ctx_device(ctx) == 0) {
        int64_t n = 0;
        for (int i = 0; i < np; i++) n += mt_tensor_numel(mt_graph_param_at(g, i));
        res->params = malloc((size_t)n * sizeof(float));
        res->n_params = n;
        for (int i = 0, at = 0; i < np; i++) {
            mt_tensor *p = mt_graph_param_at(g, i);
            memcpy(res->params + at, mt_tensor_f32(p), (size_t)mt_tensor_numel(p) * sizeof(float));
            at += (int)mt_tensor_numel(p);
        }
    }
out:
    mt_graph_free(g);
    return s;
}

static dp_result run_on(int devices) {
    dp_result res = {0};
    char mesh[32];
    snprintf(mesh, sizeof mesh, "data=%d", devices);
    mt_launch_opts o = {.mesh = mesh, .devices = devices, .timeout_s = 60};
    MT_CHECK_OK(mt_launch(&o, train, &res));
    return res;
}

MT_TEST(data_parallel_gpt_equals_one_device) {
    dp_result one = run_on(1);
    MT_CHECK(one.losses[STEPS - 1] < one.losses[0], "training lowers the loss: %g -> %g",
             one.losses[0], one.losses[STEPS - 1]);
    for (int devices = 2; devices <= 4; devices *= 2) {
        dp_result dp = run_on(devices);
        for (int s = 0; s < STEPS; s++)
            MT_CHECK_CLOSE(dp.losses[s], one.losses[s], 1e-5, "%d devices, loss at step %d",
                           devices, s + 1);
        MT_CHECK(dp.n_params == one.n_params, "parameter count");
        double worst = 0;
        for (int64_t j = 0; j < one.n_params; j++) {
            double d = fabs((double)dp.params[j] - one.params[j]) / (1e-3 + fabs(one.params[j]));
            if (d > worst) worst = d;
        }
        MT_CHECK(worst < 1e-4, "%d devices: parameters differ from 1 device by %g (relative)",
                 devices, worst);
        free(dp.params);
    }
    free(one.params);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
