/*
 * test_optim.c — optimizers through mt_optim against updates computed by hand
 * in double: AdamW (bias correction, decoupled decay on matrices only),
 * SGD with momentum, global-norm clipping, the learning-rate schedule, and
 * the non-finite gradient error.
 */
#include "meshtrain.h"
#include "harness.h"

/* A graph with a matrix parameter W (2,2) and a vector b (2), loss = Σ W·c + Σ b·d
 * with constants c, d: the gradient is exactly c and d, so the update can be
 * computed by hand. */
typedef struct { mt_graph *g; mt_tensor *W, *b; } two_params;

static two_params make_graph(const float *w0, const float *b0, const float *c, const float *d) {
    two_params t;
    t.g = mt_graph_create();
    t.W = mt_param(t.g, "W", 2, (int64_t[]){2, 2}, (mt_init){MT_INIT_ZEROS, 0});
    t.b = mt_param(t.g, "b", 1, (int64_t[]){2}, (mt_init){MT_INIT_ZEROS, 0});
    mt_tensor *cc = mt_constant(t.g, "c", MT_F32, 2, (int64_t[]){2, 2});
    mt_tensor *dd = mt_constant(t.g, "d", MT_F32, 1, (int64_t[]){2});
    mt_tensor *loss = mt_add(t.g, mt_sum(t.g, mt_mul(t.g, t.W, cc)), mt_sum(t.g, mt_mul(t.g, t.b, dd)));
    MT_CHECK_OK(mt_graph_compile(t.g, loss, &(mt_compile_opts){.seed = 1}));
    memcpy(mt_tensor_f32(t.W), w0, 4 * sizeof(float));
    memcpy(mt_tensor_f32(t.b), b0, 2 * sizeof(float));
    memcpy(mt_tensor_f32(cc), c, 4 * sizeof(float));
    memcpy(mt_tensor_f32(dd), d, 2 * sizeof(float));
    return t;
}

static void grads(two_params *t) {
    MT_CHECK_OK(mt_graph_forward(t->g));
    MT_CHECK_OK(mt_graph_backward(t->g));
}

MT_TEST(adamw_two_steps_by_hand) {
    float w0[4] = {0.5f, -1.0f, 2.0f, 0.0f}, b0[2] = {0.1f, -0.2f};
    float c[4] = {0.3f, -0.7f, 1.5f, 0.01f}, d[2] = {-2.0f, 0.4f};
    two_params t = make_graph(w0, b0, c, d);
    mt_optim_config cfg = mt_optim_defaults();
    cfg.lr = 0.01f; cfg.beta1 = 0.9f; cfg.beta2 = 0.95f; cfg.eps = 1e-8f;
    cfg.weight_decay = 0.1f; cfg.grad_clip = 0;
    mt_optim *opt;
    MT_CHECK_OK(mt_optim_create(t.g, &cfg, &opt));
    /* by hand, in double: g constant over steps */
    double p[6] = {0.5, -1.0, 2.0, 0.0, 0.1, -0.2}, gr[6] = {0.3, -0.7, 1.5, 0.01, -2.0, 0.4};
    double m[6] = {0}, v[6] = {0};
    for (int step = 1; step <= 2; step++) {
        if (step == 2) mt_graph_zero_grad(t.g);   /* drop the check's extra backward */
        grads(&t);
        MT_CHECK_OK(mt_optim_step(opt, NULL));
        for (int k = 0; k < 6; k++) {
            double wd = k < 4 ? 0.1 : 0.0;   /* decay on the matrix, not the vector */
            m[k] = 0.9 * m[k] + 0.1 * gr[k];
            v[k] = 0.95 * v[k] + 0.05 * gr[k] * gr[k];
            double mh = m[k] / (1 - pow(0.9, step)), vh = v[k] / (1 - pow(0.95, step));
            p[k] -= 0.01 * (mh / (sqrt(vh) + 1e-8) + wd * p[k]);
        }
        for (int k = 0; k < 4; k++)
            MT_CHECK_CLOSE(mt_tensor_f32(t.W)[k], p[k], 1e-6, "step %d W[%d]", step, k);
        for (int k = 0; k < 2; k++)
            MT_CHECK_CLOSE(mt_tensor_f32(t.b)[k], p[4 + k], 1e-6, "step %d b[%d]", step, k);
        /* the step marks the gradients zero: the next backward must give
         * this step's gradient alone, not the sum of two */
        if (step == 1) {
            grads(&t);
            for (int k = 0; k < 4; k++)
                MT_CHECK_CLOSE(mt_tensor_f32(mt_tensor_grad(t.W))[k], gr[k], 1e-7, "fresh grad W[%d]", k);
            MT_CHECK_CLOSE(mt_tensor_f32(mt_tensor_grad(t.b))[1], gr[5], 1e-7, "fresh grad b[1]");
        }
    }
    MT_CHECK(mt_optim_steps(opt) == 2, "step count %d", mt_optim_steps(opt));
    /* first step of Adam moves every element by lr (·sign) plus decay: spot-check moments */
    MT_CHECK_CLOSE(mt_optim_moment(opt, 0, 1)[0], m[0], 1e-6, "first moment");
    MT_CHECK_CLOSE(mt_optim_moment(opt, 1, 2)[1], v[5], 1e-6, "second moment");
    mt_optim_free(opt);
    mt_graph_free(t.g);
}

MT_TEST(sgd_momentum_and_clipping_by_hand) {
    float w0[4] = {1, 2, 3, 4}, b0[2] = {0, 0};
    float c[4] = {3, 0, 0, 0}, d[2] = {0, 4};     /* global norm 5 */
    two_params t = make_graph(w0, b0, c, d);
    mt_optim_config cfg = mt_optim_defaults();
    cfg.kind = MT_OPT_SGD; cfg.lr = 0.1f; cfg.momentum = 0.5f; cfg.weight_decay = 0;
    cfg.grad_clip = 1.0f;                        /* clip 5 -> 1: scale 0.2 */
    mt_optim *opt;
    MT_CHECK_OK(mt_optim_create(t.g, &cfg, &opt));
    double mom[6] = {0}, p[6] = {1, 2, 3, 4, 0, 0}, gr[6] = {3, 0, 0, 0, 0, 4};
    for (int step = 1; step <= 3; step++) {
        grads(&t);
        float norm = 0;
        MT_CHECK_OK(mt_optim_step(opt, &norm));
        MT_CHECK_CLOSE(norm, 5.0, 1e-6, "global norm before clipping");
        for (int k = 0; k < 6; k++) {
            mom[k] = 0.5 * mom[k] + 0.2 * gr[k];
            p[k] -= 0.1 * mom[k];
        }
        MT_CHECK_CLOSE(mt_tensor_f32(t.W)[0], p[0], 1e-6, "step %d W[0]", step);
        MT_CHECK_CLOSE(mt_tensor_f32(t.b)[1], p[5], 1e-6, "step %d b[1]", step);
        MT_CHECK_CLOSE(mt_tensor_f32(t.W)[1], 2.0, 1e-7, "untouched element");
    }
    mt_optim_free(opt);
    mt_graph_free(t.g);
}

MT_TEST(lr_schedule_warmup_cosine) {
    mt_optim_config c = mt_optim_defaults();
    c.lr = 1.0f; c.warmup_steps = 10; c.total_steps = 110; c.min_lr_frac = 0.1f;
    MT_CHECK_CLOSE(mt_optim_lr_at(&c, 0), 0.1, 1e-7, "first warmup step");
    MT_CHECK_CLOSE(mt_optim_lr_at(&c, 9), 1.0, 1e-7, "end of warmup");
    MT_CHECK_CLOSE(mt_optim_lr_at(&c, 10), 1.0, 1e-7, "start of decay");
    MT_CHECK_CLOSE(mt_optim_lr_at(&c, 60), 0.55, 1e-6, "half way: min + (1-min)/2");
    MT_CHECK_CLOSE(mt_optim_lr_at(&c, 110), 0.1, 1e-7, "end");
    MT_CHECK_CLOSE(mt_optim_lr_at(&c, 500), 0.1, 1e-7, "past the end");
    c.total_steps = 0;
    MT_CHECK_CLOSE(mt_optim_lr_at(&c, 500), 1.0, 1e-7, "constant after warmup");
}

MT_TEST(non_finite_gradient_names_the_parameter) {
    float w0[4] = {0}, b0[2] = {0}, c[4] = {1, 1, 1, 1}, d[2] = {NAN, 1};
    two_params t = make_graph(w0, b0, c, d);
    mt_optim_config cfg = mt_optim_defaults();
    mt_optim *opt;
    MT_CHECK_OK(mt_optim_create(t.g, &cfg, &opt));
    grads(&t);
    MT_CHECK(mt_optim_step(opt, NULL) == MT_ENAN, "NaN gradient must fail");
    MT_CHECK(strstr(mt_errmsg(), "'b'") && strstr(mt_errmsg(), "step 1"), "%s", mt_errmsg());
    cfg.beta1 = 1.5f;
    mt_optim *bad = NULL;
    MT_CHECK(mt_optim_create(t.g, &cfg, &bad) == MT_EINVAL && bad == NULL, "bad beta1");
    MT_CHECK(strstr(mt_errmsg(), "1.5"), "%s", mt_errmsg());
    mt_optim_free(opt);
    mt_graph_free(t.g);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
