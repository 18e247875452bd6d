/*
 * test_aux_attach.c — a side loss attached to a pipeline stage's output
 * (mt_aux_attach; graph/op_aux_attach.c): a stage whose backward starts
 * from the caller's cotangent dy of its output, with a scalar loss a
 * attached with factor s, gets the gradients of the scalar loss it stands
 * for, Σ out ⊙ dy + s·a, which a second graph builds from the public ops
 * (an independent formulation: the attach is never built there). The
 * output is the attached value itself, bit for bit; the refusals name the
 * operand.
 */
#include "harness.h"
#include "meshtrain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define C 8

static void fill_normal(mt_tensor *t, uint64_t seed) {
    float *d = mt_tensor_f32(t);
    for (int64_t j = 0; j < mt_tensor_numel(t); j++) d[j] = mt_rng_normal(seed, 3, (uint64_t)j);
}

/* A stage's layers on x (B,T,C): h = linear(x), the side loss a = Σ h ⊙ h
 * (a scalar reading the stage's first parameters), y = linear(h). */
static mt_tensor *body(mt_graph *g, mt_tensor *x, mt_tensor **a) {
    mt_init n = {MT_INIT_NORMAL, 0.5f};
    mt_tensor *w1 = mt_param(g, "w1", 2, (int64_t[]){C, C}, n);
    mt_tensor *b1 = mt_param(g, "b1", 1, (int64_t[]){C}, n);
    mt_tensor *w2 = mt_param(g, "w2", 2, (int64_t[]){C, C}, n);
    mt_tensor *h = mt_linear(g, x, w1, b1);                       /* (B,T,C) */
    *a = mt_sum(g, mt_mul(g, h, h));                              /* () */
    return mt_linear(g, h, w2, NULL);                             /* (B,T,C) */
}

MT_TEST(attached_loss_gets_its_factor_as_gradient) {
    const int64_t shape[3] = {2, 3, C};
    const float s = 0.37f;
    /* the stage: out = y with a attached, the caller's seed dy */
    mt_graph *gs = mt_graph_create();
    mt_tensor *xs = mt_input(gs, "x", MT_F32, 3, shape), *as;
    MT_CHECK_OK(mt_input_set_needs_grad(xs));
    mt_tensor *ys = body(gs, xs, &as);
    mt_tensor *out = mt_aux_attach(gs, ys, as, s);
    MT_CHECK(out && mt_tensor_ndim(out) == 3, "aux_attach: %s", mt_graph_errmsg(gs));
    MT_CHECK_OK(mt_graph_compile(gs, out, &(mt_compile_opts){.seed = 4, .seed_from_caller = true}));
    /* the loss it stands for: Σ y ⊙ r + s·a, r = the seed's values */
    mt_graph *gl = mt_graph_create();
    mt_tensor *xl = mt_input(gl, "x", MT_F32, 3, shape), *al;
    MT_CHECK_OK(mt_input_set_needs_grad(xl));
    mt_tensor *r = mt_constant(gl, "r", MT_F32, 3, shape);
    mt_tensor *yl = body(gl, xl, &al);
    mt_tensor *loss = mt_add(gl, mt_sum(gl, mt_mul(gl, yl, r)), mt_scale(gl, al, s));
    MT_CHECK_OK(mt_graph_compile(gl, loss, &(mt_compile_opts){.seed = 4}));

    fill_normal(xs, 5);
    fill_normal(xl, 5);
    fill_normal(mt_tensor_grad(out), 6);
    fill_normal(r, 6);
    MT_CHECK_OK(mt_graph_forward(gs));
    MT_CHECK(memcmp(mt_tensor_f32(out), mt_tensor_f32(ys),
                    (size_t)mt_tensor_numel(out) * sizeof(float)) == 0,
             "the output is y, bit for bit");
    MT_CHECK_OK(mt_graph_forward(gl));
    MT_CHECK_OK(mt_graph_backward(gs));
    MT_CHECK_OK(mt_graph_backward(gl));
    /* every parameter's and the input's gradient: w1, b1 and x take the
     * side loss's part (2·s·h through the first linear), w2 none */
    for (int i = 0; i <= mt_graph_n_params(gs); i++) {
        mt_tensor *ts = i < mt_graph_n_params(gs) ? mt_tensor_grad(mt_graph_param_at(gs, i))
                                                  : mt_tensor_grad(xs);
        mt_tensor *tl = i < mt_graph_n_params(gl) ? mt_tensor_grad(mt_graph_param_at(gl, i))
                                                  : mt_tensor_grad(xl);
        const float *a = mt_tensor_f32(ts), *b = mt_tensor_f32(tl);
        double worst = 0, norm = 0;
        for (int64_t j = 0; j < mt_tensor_numel(ts); j++) {
            worst = fmax(worst, fabs((double)a[j] - b[j]));
            norm = fmax(norm, fabs((double)b[j]));
        }
        MT_CHECK(worst <= 1e-5 * fmax(1.0, norm), "%s: gradients differ by %g (of %g)",
                 i < mt_graph_n_params(gs) ? mt_tensor_name(mt_graph_param_at(gs, i)) : "x",
                 worst, norm);
    }
    MT_CHECK(mt_graph_n_params(gs) == 3, "w1, b1, w2");
    mt_graph_free(gs);
    mt_graph_free(gl);
}

MT_TEST(attach_refuses_what_is_no_scalar_loss) {
    mt_graph *g = mt_graph_create();
    mt_tensor *y = mt_input(g, "y", MT_F32, 2, (int64_t[]){2, C});
    mt_tensor *v = mt_input(g, "v", MT_F32, 1, (int64_t[]){2});
    MT_CHECK(!mt_aux_attach(g, y, v, 1.0f) && mt_graph_status(g) == MT_ESHAPE &&
             strstr(mt_graph_errmsg(g), "'v' must be a scalar"),
             "a vector loss is refused: %s", mt_graph_errmsg(g));
    mt_graph_free(g);
    g = mt_graph_create();
    y = mt_input(g, "y", MT_F32, 2, (int64_t[]){2, C});
    mt_tensor *a = mt_sum(g, y);
    MT_CHECK(!mt_aux_attach(g, y, a, NAN) && mt_graph_status(g) == MT_EINVAL &&
             strstr(mt_graph_errmsg(g), "finite"),
             "a factor that is not finite is refused: %s", mt_graph_errmsg(g));
    mt_graph_free(g);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
