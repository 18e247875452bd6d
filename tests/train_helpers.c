/*
 * train_helpers.c — see train_helpers.h.
 */
#include "train_helpers.h"
#include "harness.h"

#include <unistd.h>

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
        c.gpt = (mt_gpt_config){.L = 2, .C = 64, .NH = 4, .maxT = 16, .V = 0, .Vp = 0};
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
        out.rows[i] = mt_tensor_dim(p, 0);
        out.cols[i] = mt_tensor_ndim(p) > 1 ? mt_tensor_dim(p, 1) : 1;
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
        MT_CHECK(got->rows[k] <= one->rows[k] && got->cols[k] <= one->cols[k] &&
                 one->rows[k] % got->rows[k] == 0 && one->cols[k] % got->cols[k] == 0,
                 "parameter %d is (%lld,%lld) on device 0, a block of (%lld,%lld)?", k,
                 (long long)got->rows[k], (long long)got->cols[k], (long long)one->rows[k],
                 (long long)one->cols[k]);
        if (got->rows[k] * got->cols[k] < one->rows[k] * one->cols[k]) split++;
        for (int64_t r = 0; r < got->rows[k]; r++)
            for (int64_t c = 0; c < got->cols[k]; c++) {
                double a = got->params[at_g + r * got->cols[k] + c];
                double b = one->params[at_o + r * one->cols[k] + c];
                double d = fabs(a - b) / fmax(1.0, fabs(b));
                if (d > worst) worst = d;
            }
        at_g += got->rows[k] * got->cols[k];
        at_o += one->rows[k] * one->cols[k];
    }
    if (n_split) *n_split = split;
    return worst;
}
