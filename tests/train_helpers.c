/*
 * train_helpers.c — see train_helpers.h.
 */
#include "train_helpers.h"
#include "harness.h"

#include <unistd.h>

static const mt_gpt_config TEST_GPT = {.L = 2, .C = 64, .NH = 4, .maxT = 16, .V = 0, .Vp = 0};

mt_gpt_config mt_test_gpt(void) { return TEST_GPT; }

mt_gpt_config mt_test_gpt_of(const mt_train_config *c) {
    mt_gpt_config g;
    if (c->model_config) return *(const mt_gpt_config *)c->model_config;
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_GPT, &g, sizeof g));
    return g;
}

mt_train_config mt_test_config(mt_model_kind model, const char *text_path) {
    mt_train_config c = mt_train_defaults();
    c.model = model;
    c.steps = c.optim.total_steps = 10;
    c.optim.warmup_steps = 2;
    c.optim.lr = 3e-3f;
    c.B = 8;
    c.threads = 1;
    c.seed = 7;
    if (model == MT_MODEL_GPT) {
        c.data = text_path;
        MT_TEST_MODEL_CONFIG(&c, &TEST_GPT);
        c.T = 16;
    }
    return c;
}

void mt_test_write_text(char *path_template) {
    int fd = mkstemp(path_template);
    MT_CHECK(fd >= 0, "mkstemp %s", path_template);
    const char text[] = "the quick brown fox jumps over the lazy dog; on any mesh, stopped or "
                        "not, the same run. ";
    for (int i = 0; i < 40; i++) MT_CHECK(write(fd, text, sizeof text - 1) > 0, "write");
    close(fd);
}

mt_test_params mt_test_params_of(mt_trainer *tr) {
    mt_graph *g = mt_trainer_graph(tr);
    mt_test_params out = {0};
    MT_CHECK(mt_graph_n_params(g) <= MT_TEST_MAX_PARAMS, "%d parameters", mt_graph_n_params(g));
    for (int i = 0; i < mt_graph_n_params(g); i++) out.n += mt_tensor_numel(mt_graph_param_at(g, i));
    out.params = malloc((size_t)out.n * sizeof(float));
    for (int i = 0, at = 0; i < mt_graph_n_params(g); i++) {
        mt_tensor *p = mt_graph_param_at(g, i);
        memcpy(out.params + at, mt_tensor_f32(p), (size_t)mt_tensor_numel(p) * sizeof(float));
        at += (int)mt_tensor_numel(p);
        for (int d = 0; d < MT_MAX_DIMS; d++)
            out.shape[i][d] = d < mt_tensor_ndim(p) ? mt_tensor_dim(p, d) : 1;
        out.n_tensors = i + 1;
    }
    return out;
}

double mt_test_params_diff(const mt_test_params *got, const mt_test_params *one, int *n_split) {
    MT_CHECK(got->n_tensors == one->n_tensors, "parameter count %d, want %d", got->n_tensors,
             one->n_tensors);
    double worst = 0;
    int split = 0;
    int64_t at_g = 0, at_o = 0;
    for (int k = 0; k < one->n_tensors; k++) {
        const int64_t *gs = got->shape[k], *os = one->shape[k];
        int64_t n_g = 1, n_o = 1;
        for (int d = 0; d < MT_MAX_DIMS; d++) {
            MT_CHECK(gs[d] <= os[d] && os[d] % gs[d] == 0, "parameter %d: dim %d is %lld on "
                     "device 0, not a block of %lld", k, d, (long long)gs[d], (long long)os[d]);
            n_g *= gs[d];
            n_o *= os[d];
        }
        if (n_g < n_o) split++;
        /* got's element i at coordinates c (row-major in gs) is one's at c in os */
        for (int64_t i = 0; i < n_g; i++) {
            int64_t rem = i, j = 0, stride = 1;
            for (int d = MT_MAX_DIMS - 1; d >= 0; d--) {
                j += (rem % gs[d]) * stride;
                rem /= gs[d];
                stride *= os[d];
            }
            double a = got->params[at_g + i], b = one->params[at_o + j];
            double diff = fabs(a - b) / fmax(1.0, fabs(b));
            if (diff > worst) worst = diff;
        }
        at_g += n_g;
        at_o += n_o;
    }
    if (n_split) *n_split = split;
    return worst;
}

mt_launch_opts mt_test_launch_opts(const char *mesh, int devices) {
    mt_launch_opts o;
    memset(&o, 0, sizeof o);
    o.mesh = mesh;
    o.devices = devices;
    o.transport = MT_TRANSPORT_THREADS;
    o.timeout_s = 30;
    o.kernel_threads = 1;
    return o;
}

mt_test_curve mt_test_steps(mt_trainer *tr, int steps) {
    MT_CHECK(steps >= 1 && steps <= MT_TEST_MAX_STEPS, "mt_test_steps: %d steps, 1 to %d",
             steps, MT_TEST_MAX_STEPS);
    mt_test_curve out = {{0}, {0}};
    for (int s = 0; s < steps; s++) {
        mt_step_report r;
        MT_CHECK_OK(mt_trainer_step(tr, &r));
        out.loss[s] = r.loss;
        out.norm[s] = r.grad_norm;
    }
    return out;
}
