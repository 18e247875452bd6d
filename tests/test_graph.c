/*
 * test_graph.c — the graph engine: every op's gradient through the graph
 * against central finite differences, the B part and the W part separately;
 * composite graphs; F+B+W equals the unsplit backward; accumulation; buffer
 * planning (no two live tensors share a byte; the arena is near the peak of
 * live bytes, computed here); names found after renames; build errors. The
 * pieces of a pipeline stage: an input's gradient, a caller-supplied seed,
 * and slots that interleave microbatches bitwise like running them in turn.
 *
 * Each case marks its data-dependent operands with act(): x = ones ⊙ p, with
 * `ones` an input (so x depends on the data and its gradient is B work) and p
 * a parameter (so finite differences can perturb it). Plain parameters are
 * weights, whose gradients are W work. The loss is Σ out ⊙ r with a fixed
 * random r, unless the op is itself a loss.
 */
#include "meshtrain.h"
#include "harness.h"
#include "graph/graph_impl.h"   /* the plan's placements, checked from outside */

#define MAX_ACTS 4

typedef struct {
    mt_graph  *g;
    mt_tensor *act[MAX_ACTS], *proxy[MAX_ACTS];
    int        n_act;
    mt_tensor *loss;
} fd_case;

static mt_tensor *act(fd_case *c, const char *name, int ndim, const int64_t *shape) {
    char buf[64];
    snprintf(buf, sizeof buf, "ones_%s", name);
    mt_tensor *ones = mt_input(c->g, buf, MT_F32, ndim, shape);
    snprintf(buf, sizeof buf, "p_%s", name);
    mt_tensor *p = mt_param(c->g, buf, ndim, shape, (mt_init){MT_INIT_NORMAL, 1.0f});
    mt_tensor *x = mt_mul(c->g, ones, p);
    c->proxy[c->n_act] = p;
    c->act[c->n_act++] = x;
    return x;
}

static mt_tensor *weight(fd_case *c, const char *name, int ndim, const int64_t *shape, float std) {
    return mt_param(c->g, name, ndim, shape, (mt_init){MT_INIT_NORMAL, std});
}

/* loss = Σ out ⊙ r */
static void finish_weighted(fd_case *c, mt_tensor *out) {
    MT_CHECK(out != NULL, "building the op failed: %s", mt_graph_errmsg(c->g));
    mt_tensor *r = mt_constant(c->g, "r", MT_F32, mt_tensor_ndim(out),
                               (int64_t[]){mt_tensor_dim(out, 0), mt_tensor_dim(out, 1),
                                           mt_tensor_dim(out, 2), mt_tensor_dim(out, 3)});
    c->loss = mt_sum(c->g, mt_mul(c->g, out, r));
}

/* Fills ones, r and any int inputs; params were initialised by compile. */
static void fill_inputs(fd_case *c, void (*fill_ints)(mt_graph *)) {
    for (int i = 0; i < c->n_act; i++) {
        char buf[64];
        snprintf(buf, sizeof buf, "ones_%s", mt_tensor_name(c->proxy[i]) + 2);
        mt_tensor *ones = mt_graph_find(c->g, buf);
        float *d = mt_tensor_f32(ones);
        for (int64_t j = 0; j < mt_tensor_numel(ones); j++) d[j] = 1.0f;
    }
    mt_tensor *r = mt_graph_find(c->g, "r");
    if (r) {
        float *d = mt_tensor_f32(r);
        for (int64_t j = 0; j < mt_tensor_numel(r); j++) d[j] = mt_rng_normal(99, 1, (uint64_t)j);
    }
    if (fill_ints) fill_ints(c->g);
}

static double loss_now(mt_graph *g) {
    MT_CHECK_OK(mt_graph_forward(g));
    return mt_graph_loss(g);
}

/* d loss / d data[j] by central differences (forwards only). */
static double central_diff(mt_graph *g, float *data, int64_t j, double eps) {
    float keep = data[j];
    data[j] = keep + (float)eps;
    double lp = loss_now(g);
    data[j] = keep - (float)eps;
    double lm = loss_now(g);
    data[j] = keep;
    return (lp - lm) / (2 * eps);
}

/* Compiles, then checks every parameter's gradient against central
 * differences: activations after B alone (while every parameter gradient is
 * still zero: W has not run), everything after W. */
static void fd_check(fd_case *c, void (*fill_ints)(mt_graph *), double eps, double tol) {
    MT_CHECK(c->loss != NULL, "loss is NULL: %s", mt_graph_errmsg(c->g));
    mt_compile_opts opts = {.seed = 5};
    MT_CHECK_OK(mt_graph_compile(c->g, c->loss, &opts));
    fill_inputs(c, fill_ints);
    mt_graph *g = c->g;
    int np = mt_graph_n_params(g);

    /* B alone */
    MT_CHECK_OK(mt_graph_forward(g));
    MT_CHECK_OK(mt_graph_backward_b(g));
    for (int i = 0; i < np; i++) {
        mt_tensor *p = mt_graph_param_at(g, i);
        float *gp = mt_tensor_f32(mt_tensor_grad(p));
        for (int64_t j = 0; j < mt_tensor_numel(p); j++)
            MT_CHECK(gp[j] == 0.0f, "grad of %s[%lld] = %g after B alone; parameter gradients "
                     "are W work", mt_tensor_name(p), (long long)j, gp[j]);
    }
    /* snapshot activation gradients (B results) before W runs */
    float *b_grad[MAX_ACTS];
    for (int a = 0; a < c->n_act; a++) {
        int64_t n = mt_tensor_numel(c->act[a]);
        b_grad[a] = malloc((size_t)n * sizeof(float));
        memcpy(b_grad[a], mt_tensor_f32(mt_tensor_grad(c->act[a])), (size_t)n * sizeof(float));
    }
    MT_CHECK_OK(mt_graph_backward_w(g));

    for (int i = 0; i < np; i++) {
        mt_tensor *p = mt_graph_param_at(g, i);
        int a = -1;
        for (int k = 0; k < c->n_act; k++) if (c->proxy[k] == p) a = k;
        float *data = mt_tensor_f32(p), *grad = mt_tensor_f32(mt_tensor_grad(p));
        int64_t n = mt_tensor_numel(p);
        int64_t stride = n > 48 ? n / 48 + 1 : 1;    /* sample big tensors */
        for (int64_t j = 0; j < n; j += stride) {
            double num = central_diff(g, data, j, eps);
            double err_w = fabs(grad[j] - num);
            MT_CHECK(err_w <= tol * (1 + fabs(num)), "d loss / d %s[%lld]: W gives %.6g, "
                     "finite differences %.6g", mt_tensor_name(p), (long long)j, grad[j], num);
            if (a >= 0) {
                double err_b = fabs(b_grad[a][j] - num);
                MT_CHECK(err_b <= tol * (1 + fabs(num)), "d loss / d %s[%lld]: B gives %.6g, "
                         "finite differences %.6g", mt_tensor_name(c->act[a]), (long long)j,
                         b_grad[a][j], num);
            }
        }
    }
    for (int a = 0; a < c->n_act; a++) free(b_grad[a]);
    mt_graph_free(g);
}

#define EPS 1e-2
#define TOL 1e-2

/* ---- matmul family ---- */

static void matmul_case(bool ta, bool tb, bool act_b) {
    fd_case c = {.g = mt_graph_create()};
    int64_t M = 3, K = 4, N = 5;
    int64_t sa[2] = {ta ? K : M, ta ? M : K}, sb[2] = {tb ? N : K, tb ? K : N};
    mt_tensor *a = act(&c, "a", 2, sa);
    mt_tensor *b = act_b ? act(&c, "b", 2, sb) : weight(&c, "b", 2, sb, 1.0f);
    finish_weighted(&c, mt_matmul(c.g, a, b, ta, tb));
    fd_check(&c, NULL, EPS, TOL);
}

MT_TEST(grad_matmul_nn) { matmul_case(false, false, false); }
MT_TEST(grad_matmul_nt) { matmul_case(false, true, false); }
MT_TEST(grad_matmul_tn) { matmul_case(true, false, false); }
MT_TEST(grad_matmul_tt) { matmul_case(true, true, false); }
MT_TEST(grad_matmul_two_activations) { matmul_case(false, true, true); matmul_case(true, false, true); }

MT_TEST(grad_matmul_3d) {
    fd_case c = {.g = mt_graph_create()};
    mt_tensor *a = act(&c, "a", 3, (int64_t[]){2, 3, 4});
    mt_tensor *b = weight(&c, "b", 2, (int64_t[]){5, 4}, 1.0f);
    finish_weighted(&c, mt_matmul(c.g, a, b, false, true));
    fd_check(&c, NULL, EPS, TOL);
}

MT_TEST(grad_linear) {
    fd_case c = {.g = mt_graph_create()};
    mt_tensor *x = act(&c, "x", 3, (int64_t[]){2, 3, 4});
    mt_tensor *w = weight(&c, "w", 2, (int64_t[]){6, 4}, 1.0f);
    mt_tensor *b = weight(&c, "bias", 1, (int64_t[]){6}, 1.0f);
    finish_weighted(&c, mt_linear(c.g, x, w, b));
    fd_check(&c, NULL, EPS, TOL);
}

/* ---- elementwise ---- */

MT_TEST(grad_add_sub_mul_broadcast) {
    mt_tensor *(*fns[3])(mt_graph *, mt_tensor *, mt_tensor *) = {mt_add, mt_sub, mt_mul};
    for (int f = 0; f < 3; f++) {
        fd_case c = {.g = mt_graph_create()};
        mt_tensor *x = act(&c, "x", 3, (int64_t[]){2, 3, 4});
        mt_tensor *b = weight(&c, "b", 2, (int64_t[]){3, 4}, 1.0f);
        finish_weighted(&c, fns[f](c.g, x, b));
        fd_check(&c, NULL, EPS, TOL);
    }
}

MT_TEST(grad_add_sub_mul_same_shape) {
    mt_tensor *(*fns[3])(mt_graph *, mt_tensor *, mt_tensor *) = {mt_add, mt_sub, mt_mul};
    for (int f = 0; f < 3; f++) {
        fd_case c = {.g = mt_graph_create()};
        mt_tensor *x = act(&c, "x", 2, (int64_t[]){3, 4});
        mt_tensor *y = act(&c, "y", 2, (int64_t[]){3, 4});
        finish_weighted(&c, fns[f](c.g, x, y));
        fd_check(&c, NULL, EPS, TOL);
    }
}

MT_TEST(grad_scale_gelu) {
    fd_case c = {.g = mt_graph_create()};
    mt_tensor *x = act(&c, "x", 2, (int64_t[]){4, 5});
    finish_weighted(&c, mt_gelu(c.g, mt_scale(c.g, x, 1.7f)));
    fd_check(&c, NULL, EPS, TOL);
}

MT_TEST(grad_layernorm) {
    fd_case c = {.g = mt_graph_create()};
    mt_tensor *x = act(&c, "x", 3, (int64_t[]){2, 3, 8});
    mt_tensor *w = weight(&c, "w", 1, (int64_t[]){8}, 1.0f);
    mt_tensor *b = weight(&c, "b", 1, (int64_t[]){8}, 1.0f);
    finish_weighted(&c, mt_layernorm(c.g, x, w, b));
    fd_check(&c, NULL, EPS, TOL);
}

MT_TEST(grad_attention) {
    fd_case c = {.g = mt_graph_create()};
    mt_tensor *qkv = act(&c, "qkv", 3, (int64_t[]){2, 5, 3 * 8});
    finish_weighted(&c, mt_attention(c.g, qkv, 2));
    fd_check(&c, NULL, EPS, TOL);
}

static void fill_ids(mt_graph *g) {
    int32_t *ids = mt_tensor_i32(mt_graph_find(g, "ids"));
    int32_t vals[6] = {3, 0, 3, 6, 1, 3};   /* repeats: the backward must add them */
    memcpy(ids, vals, sizeof vals);
}

MT_TEST(grad_embedding) {
    fd_case c = {.g = mt_graph_create()};
    mt_tensor *table = weight(&c, "table", 2, (int64_t[]){7, 4}, 1.0f);
    mt_tensor *ids = mt_input(c.g, "ids", MT_I32, 2, (int64_t[]){2, 3});
    finish_weighted(&c, mt_embedding(c.g, table, ids));
    fd_check(&c, fill_ids, EPS, TOL);
}

static void fill_targets(mt_graph *g) {
    int32_t *t = mt_tensor_i32(mt_graph_find(g, "targets"));
    int32_t vals[6] = {2, 0, -1, 4, 4, 1};  /* -1 skips that row */
    memcpy(t, vals, sizeof vals);
}

MT_TEST(grad_cross_entropy_padded) {
    fd_case c = {.g = mt_graph_create()};
    mt_tensor *logits = act(&c, "logits", 3, (int64_t[]){2, 3, 8});   /* V=5 of Vp=8 */
    mt_tensor *targets = mt_input(c.g, "targets", MT_I32, 2, (int64_t[]){2, 3});
    c.loss = mt_cross_entropy(c.g, logits, targets, 5, 1.0f / 5);
    fd_check(&c, fill_targets, EPS, TOL);
}

MT_TEST(grad_mse_sum_mean) {
    fd_case c = {.g = mt_graph_create()};
    mt_tensor *pred = act(&c, "pred", 2, (int64_t[]){3, 2});
    mt_tensor *target = weight(&c, "target", 2, (int64_t[]){3, 2}, 1.0f);
    mt_tensor *x = act(&c, "x", 1, (int64_t[]){5});
    mt_tensor *l = mt_add(c.g, mt_mse(c.g, pred, target, 0.5f), mt_sum(c.g, mt_gelu(c.g, x)));
    c.loss = mt_add(c.g, l, mt_mean(c.g, mt_mul(c.g, x, x)));
    fd_check(&c, NULL, EPS, TOL);
}

MT_TEST(grad_reshape_transpose) {
    fd_case c = {.g = mt_graph_create()};
    mt_tensor *x = act(&c, "x", 3, (int64_t[]){2, 3, 4});
    mt_tensor *x2 = mt_reshape(c.g, x, 2, (int64_t[]){6, 4});
    mt_tensor *w = weight(&c, "w", 2, (int64_t[]){4, 5}, 1.0f);
    /* a parameter-only chain: transpose(w) is derived from parameters, so its
     * gradient, and the transpose's backward, are W work */
    mt_tensor *wt = mt_transpose(c.g, w);
    mt_tensor *y = mt_linear(c.g, x2, wt, NULL);
    /* a data chain through transposes, y used twice (accumulation) */
    mt_tensor *z = mt_add(c.g, mt_transpose(c.g, y), mt_scale(c.g, mt_transpose(c.g, y), 0.5f));
    finish_weighted(&c, z);
    /* and x used a second time, through its reshaped view */
    c.loss = mt_add(c.g, c.loss, mt_sum(c.g, mt_gelu(c.g, x2)));
    fd_check(&c, NULL, EPS, TOL);
}

/* ---- composite ---- */

/* A transformer block: x + proj(attn(qkv(ln(x)))), then + mlp. */
static mt_tensor *block(fd_case *c, mt_tensor *x, int C, int NH) {
    mt_graph *g = c->g;
    int64_t sC[1] = {C}, s3C[1] = {3 * C}, s4C[1] = {4 * C};
    mt_tensor *ln1 = mt_layernorm(g, x, weight(c, "ln1w", 1, sC, 1.0f), weight(c, "ln1b", 1, sC, 0.1f));
    mt_tensor *qkv = mt_linear(g, ln1, weight(c, "qkvw", 2, (int64_t[]){3 * C, C}, 0.3f),
                               weight(c, "qkvb", 1, s3C, 0.1f));
    mt_tensor *att = mt_attention(g, qkv, NH);
    mt_tensor *a = mt_add(g, x, mt_linear(g, att, weight(c, "projw", 2, (int64_t[]){C, C}, 0.3f),
                                          weight(c, "projb", 1, sC, 0.1f)));
    mt_tensor *ln2 = mt_layernorm(g, a, weight(c, "ln2w", 1, sC, 1.0f), weight(c, "ln2b", 1, sC, 0.1f));
    mt_tensor *h = mt_gelu(g, mt_linear(g, ln2, weight(c, "fcw", 2, (int64_t[]){4 * C, C}, 0.3f),
                                        weight(c, "fcb", 1, s4C, 0.1f)));
    return mt_add(g, a, mt_linear(g, h, weight(c, "fc2w", 2, (int64_t[]){C, 4 * C}, 0.3f),
                                  weight(c, "fc2b", 1, sC, 0.1f)));
}

MT_TEST(grad_transformer_block) {
    fd_case c = {.g = mt_graph_create()};
    mt_tensor *x = act(&c, "x", 3, (int64_t[]){2, 4, 8});
    finish_weighted(&c, block(&c, x, 8, 2));
    fd_check(&c, NULL, EPS, 2e-2);
}

/* A tiny language model: embedding, a block, tied head, cross-entropy. */
static void fill_lm(mt_graph *g) {
    int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));
    for (int i = 0; i < 8; i++) { tok[i] = (i * 5 + 1) % 11; tgt[i] = (i * 3 + 2) % 11; }
}

static fd_case build_lm(void) {
    fd_case c = {.g = mt_graph_create()};
    int64_t s[2] = {2, 4};
    mt_tensor *tokens = mt_input(c.g, "tokens", MT_I32, 2, s);
    mt_tensor *targets = mt_input(c.g, "targets", MT_I32, 2, s);
    mt_tensor *wte = weight(&c, "wte", 2, (int64_t[]){12, 8}, 0.5f);
    mt_tensor *x = mt_embedding(c.g, wte, tokens);
    mt_tensor *h = block(&c, x, 8, 2);
    mt_tensor *logits = mt_matmul(c.g, h, wte, false, true);
    c.loss = mt_cross_entropy(c.g, logits, targets, 11, 1.0f / 8);
    return c;
}

MT_TEST(grad_tiny_language_model) {
    fd_case c = build_lm();
    fd_check(&c, fill_lm, EPS, 2e-2);
}

/* F then B then W gives exactly what the unsplit backward gives, and the B/W
 * tags are right: no B node writes a parameter gradient, W nodes exist. */
MT_TEST(split_backward_equals_full_and_accumulates) {
    fd_case c1 = build_lm(), c2 = build_lm();
    mt_compile_opts opts = {.seed = 11};
    MT_CHECK_OK(mt_graph_compile(c1.g, c1.loss, &opts));
    MT_CHECK_OK(mt_graph_compile(c2.g, c2.loss, &opts));
    fill_lm(c1.g);
    fill_lm(c2.g);
    MT_CHECK_OK(mt_graph_forward(c1.g));
    MT_CHECK_OK(mt_graph_backward(c1.g));
    MT_CHECK_OK(mt_graph_forward(c2.g));
    MT_CHECK_OK(mt_graph_backward_b(c2.g));
    MT_CHECK_OK(mt_graph_backward_w(c2.g));
    mt_graph_stats st = mt_graph_get_stats(c1.g);
    MT_CHECK(st.n_backward_b > 0 && st.n_backward_w > 0, "B nodes %d, W nodes %d",
             st.n_backward_b, st.n_backward_w);
    for (int i = 0; i < mt_graph_n_params(c1.g); i++) {
        mt_tensor *p1 = mt_graph_param_at(c1.g, i), *p2 = mt_graph_param_at(c2.g, i);
        const float *g1 = mt_tensor_f32(mt_tensor_grad(p1)), *g2 = mt_tensor_f32(mt_tensor_grad(p2));
        MT_CHECK(memcmp(g1, g2, (size_t)mt_tensor_numel(p1) * sizeof(float)) == 0,
                 "gradient of %s differs between F+B+W and F+backward", mt_tensor_name(p1));
    }
    /* a second F+B+W adds the same gradient again: accumulation */
    mt_tensor *w = mt_graph_find(c2.g, "qkvw");
    int64_t n = mt_tensor_numel(w);
    float *once = malloc((size_t)n * sizeof(float));
    memcpy(once, mt_tensor_f32(mt_tensor_grad(w)), (size_t)n * sizeof(float));
    MT_CHECK_OK(mt_graph_forward(c2.g));
    MT_CHECK_OK(mt_graph_backward(c2.g));
    for (int64_t j = 0; j < n; j++)
        MT_CHECK_CLOSE(mt_tensor_f32(mt_tensor_grad(w))[j], 2 * once[j], 1e-6, "twice qkvw[%lld]",
                       (long long)j);
    mt_graph_zero_grad(c2.g);
    MT_CHECK(mt_tensor_f32(mt_tensor_grad(w))[0] == 0, "zero_grad clears");
    free(once);
    mt_graph_free(c1.g);
    mt_graph_free(c2.g);
}

/* After an optimizer step the gradients are only marked zero; the next
 * backward must overwrite them, including a parameter used twice (wte: the
 * embedding and the tied head), whose second contribution must still add. */
MT_TEST(backward_after_optimizer_step_starts_from_zero) {
    fd_case c = build_lm();
    MT_CHECK_OK(mt_graph_compile(c.g, c.loss, &(mt_compile_opts){.seed = 11}));
    fill_lm(c.g);
    MT_CHECK_OK(mt_graph_forward(c.g));
    MT_CHECK_OK(mt_graph_backward(c.g));
    int np = mt_graph_n_params(c.g);
    float *ref[64];
    MT_CHECK(np <= 64, "params %d", np);
    for (int i = 0; i < np; i++) {
        mt_tensor *p = mt_graph_param_at(c.g, i);
        size_t bytes = (size_t)mt_tensor_numel(p) * sizeof(float);
        ref[i] = malloc(bytes);
        memcpy(ref[i], mt_tensor_f32(mt_tensor_grad(p)), bytes);
    }
    mt_optim_config oc = mt_optim_defaults();
    oc.kind = MT_OPT_SGD; oc.lr = 0; oc.weight_decay = 0; oc.grad_clip = 0;  /* params stay */
    mt_optim *opt;
    MT_CHECK_OK(mt_optim_create(c.g, &oc, &opt));
    MT_CHECK_OK(mt_optim_step(opt, NULL));
    MT_CHECK_OK(mt_graph_forward(c.g));
    MT_CHECK_OK(mt_graph_backward(c.g));
    for (int i = 0; i < np; i++) {
        mt_tensor *p = mt_graph_param_at(c.g, i);
        const float *gr = mt_tensor_f32(mt_tensor_grad(p));
        for (int64_t j = 0; j < mt_tensor_numel(p); j++)
            MT_CHECK(gr[j] == ref[i][j], "grad of %s[%lld] after a step: %g, fresh %g",
                     mt_tensor_name(p), (long long)j, gr[j], ref[i][j]);
        free(ref[i]);
    }
    mt_optim_free(opt);
    mt_graph_free(c.g);
}

/* Liveness-based planning shares memory in a deep chain, and the result is
 * still right (the finite-difference tests above run on planned buffers). */
MT_TEST(buffer_plan_reuses_memory) {
    mt_graph *g = mt_graph_create();
    mt_tensor *x = mt_input(g, "x", MT_F32, 2, (int64_t[]){64, 64});
    mt_tensor *h = x;
    for (int l = 0; l < 16; l++) {
        char name[32];
        snprintf(name, sizeof name, "w%d", l);
        h = mt_gelu(g, mt_linear(g, h, mt_param(g, name, 2, (int64_t[]){64, 64},
                                                (mt_init){MT_INIT_NORMAL, 0.1f}), NULL));
    }
    mt_tensor *loss = mt_mean(g, h);
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1}));
    mt_graph_stats st = mt_graph_get_stats(g);
    MT_CHECK(st.arena_bytes < st.arena_bytes_unplanned * 3 / 4, "planned %zu bytes, unplanned %zu",
             st.arena_bytes, st.arena_bytes_unplanned);
    MT_CHECK(st.flops_forward >= 16 * 2.0 * 64 * 64 * 64, "forward FLOPs %g", st.flops_forward);
    MT_CHECK(st.flops_backward >= 2 * 16 * 2.0 * 64 * 64 * 64 * 0.99, "backward FLOPs %g", st.flops_backward);
    mt_graph_free(g);
}

/* The plan of a GPT step, checked against what the run order says: any two
 * arena tensors alive at the same time (closed intervals of positions) get
 * disjoint bytes inside the arena, and the arena is at least the peak of the
 * bytes alive at once (no plan can beat that) and within 15% of it. */
MT_TEST(buffer_plan_never_overlaps_live_tensors) {
    mt_gpt_config cfg = {.L = 3, .C = 32, .NH = 2, .maxT = 16, .V = 64, .Vp = 64};
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = mt_gpt_build(g, &cfg, 2, 16, 1.0f / 32);
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1}));
    int n = 0, n_pos = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        const mt_tensor *t = g->tensors[i];
        if (!t->in_arena) continue;
        n++;
        if (t->last_use + 1 > n_pos) n_pos = t->last_use + 1;
        size_t bytes = (size_t)mt_tensor_numel(t) * mt_dtype_size(t->dtype);
        MT_CHECK(t->first_use >= 0 && t->first_use <= t->last_use, "'%s' lifetime [%d,%d]",
                 t->name, t->first_use, t->last_use);
        MT_CHECK(t->offset % 64 == 0 && t->offset + bytes <= g->prog->arena_bytes,
                 "'%s' at %zu+%zu outside the arena of %zu", t->name, t->offset, bytes,
                 g->prog->arena_bytes);
        for (int j = 0; j < i; j++) {
            const mt_tensor *o = g->tensors[j];
            if (!o->in_arena || o->last_use < t->first_use || t->last_use < o->first_use) continue;
            size_t obytes = (size_t)mt_tensor_numel(o) * mt_dtype_size(o->dtype);
            MT_CHECK(t->offset + bytes <= o->offset || o->offset + obytes <= t->offset,
                     "'%s' [%d,%d] at %zu+%zu and '%s' [%d,%d] at %zu+%zu are alive together "
                     "and share bytes", t->name, t->first_use, t->last_use, t->offset, bytes,
                     o->name, o->first_use, o->last_use, o->offset, obytes);
        }
    }
    MT_CHECK(n > 50, "only %d arena tensors", n);
    size_t peak = 0;
    for (int p = 0; p < n_pos; p++) {
        size_t live = 0;
        for (int i = 0; i < g->n_tensors; i++) {
            const mt_tensor *t = g->tensors[i];
            if (t->in_arena && t->first_use <= p && p <= t->last_use)
                live += ((size_t)mt_tensor_numel(t) * mt_dtype_size(t->dtype) + 63) / 64 * 64;
        }
        if (live > peak) peak = live;
    }
    MT_CHECK(g->prog->arena_bytes >= peak && g->prog->arena_bytes <= peak + peak * 15 / 100,
             "arena %zu bytes against a peak of %zu live", g->prog->arena_bytes, peak);
    mt_graph_free(g);
}

/* Names are found in constant time, and the index follows renames: the first
 * tensor (by creation) with a name is the one found, as a scan would find. */
MT_TEST(names_follow_renames_and_defaults) {
    mt_graph *g = mt_graph_create();
    mt_tensor *x = mt_input(g, "x", MT_F32, 1, (int64_t[]){4});
    mt_tensor *w = mt_param(g, "w", 1, (int64_t[]){4}, (mt_init){MT_INIT_ONES, 0});
    mt_tensor *y = mt_mul(g, x, w);   /* default name "act.2" */
    MT_CHECK(y && strcmp(mt_tensor_name(y), "act.2") == 0, "default name '%s'",
             y ? mt_tensor_name(y) : "(null)");
    MT_CHECK(mt_graph_find(g, "act.2") == y && mt_graph_find(g, "x") == x, "found by name");
    mt_tensor_set_name(y, "y");
    MT_CHECK(mt_graph_find(g, "y") == y && mt_graph_find(g, "act.2") == NULL, "renamed");
    /* a user name that a later default name repeats: the earlier tensor wins */
    mt_tensor *z = mt_param(g, "act.4", 1, (int64_t[]){4}, (mt_init){MT_INIT_ONES, 0});
    mt_tensor *s = mt_add(g, y, z);   /* id 4: default name "act.4" too */
    MT_CHECK(s && strcmp(mt_tensor_name(s), "act.4") == 0, "default name '%s'", mt_tensor_name(s));
    MT_CHECK(mt_graph_find(g, "act.4") == z, "the first tensor named act.4 is found");
    mt_tensor_set_name(z, "z");
    MT_CHECK(mt_graph_find(g, "act.4") == s && mt_graph_find(g, "z") == z,
             "after z's rename, the other act.4 is found");
    /* many names: every one found after the index grows */
    char name[32];
    mt_tensor *last = s;
    for (int i = 0; i < 1000; i++) {
        last = mt_scale(g, last, 1.0f);
        snprintf(name, sizeof name, "chain%d", i);
        mt_tensor_set_name(last, name);
    }
    for (int i = 0; i < 1000; i += 37) {
        snprintf(name, sizeof name, "chain%d", i);
        mt_tensor *t = mt_graph_find(g, name);
        MT_CHECK(t && strcmp(mt_tensor_name(t), name) == 0, "%s found", name);
    }
    MT_CHECK(mt_graph_find(g, "chain1000") == NULL && mt_graph_find(g, "") == NULL, "absent");
    MT_CHECK(mt_graph_n_params(g) == 2 && mt_graph_param_at(g, 0) == w &&
             mt_graph_param_at(g, 1) == z && mt_graph_param_at(g, 2) == NULL &&
             mt_graph_param_at(g, -1) == NULL, "parameters in declaration order");
    mt_tensor *loss = mt_sum(g, last);
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1}));
    MT_CHECK(mt_graph_find(g, "grad.w") == mt_tensor_grad(w) && mt_tensor_grad(w),
             "gradients are named after their tensor");
    mt_graph_free(g);
}

/* A parameter the loss does not use has no gradient; the optimizer leaves it. */
MT_TEST(unused_parameter_is_left_alone) {
    mt_graph *g = mt_graph_create();
    mt_tensor *w = mt_param(g, "w", 1, (int64_t[]){3}, (mt_init){MT_INIT_ONES, 0});
    mt_tensor *unused = mt_param(g, "unused", 1, (int64_t[]){2}, (mt_init){MT_INIT_ONES, 0});
    MT_CHECK_OK(mt_graph_compile(g, mt_sum(g, mt_mul(g, w, w)), &(mt_compile_opts){.seed = 1}));
    MT_CHECK(mt_tensor_grad(unused) == NULL, "no gradient for an unused parameter");
    mt_optim_config oc = mt_optim_defaults();
    oc.kind = MT_OPT_SGD; oc.lr = 0.25f; oc.weight_decay = 0; oc.grad_clip = 0;
    mt_optim *opt;
    MT_CHECK_OK(mt_optim_create(g, &oc, &opt));
    MT_CHECK_OK(mt_graph_forward(g));
    MT_CHECK_OK(mt_graph_backward(g));
    MT_CHECK_OK(mt_optim_step(opt, NULL));
    MT_CHECK(mt_tensor_f32(w)[0] == 0.5f, "w = 1 - 0.25·2 = %g", mt_tensor_f32(w)[0]);
    MT_CHECK(mt_tensor_f32(unused)[0] == 1.0f, "unused stays %g", mt_tensor_f32(unused)[0]);
    mt_optim_free(opt);
    mt_graph_free(g);
}

/* A loss that is a view of another tensor keeps its bytes while later
 * forward nodes run (they must not be planned over it). */
MT_TEST(loss_that_is_a_view_survives_later_nodes) {
    mt_graph *g = mt_graph_create();
    mt_tensor *x = mt_param(g, "x", 1, (int64_t[]){64}, (mt_init){MT_INIT_ONES, 0});
    mt_tensor *t = mt_constant(g, "t", MT_F32, 1, (int64_t[]){64});
    mt_tensor *loss = mt_reshape(g, mt_mse(g, x, t, 1.0f), 1, (int64_t[]){1});
    /* work after the loss, big enough to want the loss's bytes */
    mt_tensor *m = mt_gelu(g, mt_gelu(g, mt_scale(g, x, 2.0f)));
    (void)m;
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1}));
    float *td = mt_tensor_f32(t);
    for (int i = 0; i < 64; i++) td[i] = 3.0f;   /* Σ (1-3)² = 256 */
    MT_CHECK_OK(mt_graph_forward(g));
    MT_CHECK_CLOSE(mt_graph_loss(g), 256.0, 1e-6, "loss through a view");
    mt_graph_free(g);
}

/* ---- pipeline stages: input gradients, caller-supplied seeds, slots ---- */

static void fill_normal(mt_tensor *t, uint64_t seed) {
    float *d = mt_tensor_f32(t);
    for (int64_t j = 0; j < mt_tensor_numel(t); j++) d[j] = mt_rng_normal(seed, 3, (uint64_t)j);
}

static float *copy_of(mt_tensor *t) {
    size_t bytes = (size_t)mt_tensor_numel(t) * sizeof(float);
    float *p = malloc(bytes);
    memcpy(p, mt_tensor_f32(t), bytes);
    return p;
}

static bool same(mt_tensor *t, const float *want) {
    return memcmp(mt_tensor_f32(t), want, (size_t)mt_tensor_numel(t) * sizeof(float)) == 0;
}

/* Every parameter gradient of a and b (same model) is bitwise the same. */
static void check_same_grads(mt_graph *a, mt_graph *b, const char *what) {
    MT_CHECK(mt_graph_n_params(a) == mt_graph_n_params(b), "%s: parameter counts", what);
    for (int i = 0; i < mt_graph_n_params(a); i++) {
        mt_tensor *p = mt_graph_param_at(a, i);
        MT_CHECK(same(mt_tensor_grad(p), mt_tensor_f32(mt_tensor_grad(mt_graph_param_at(b, i)))),
                 "%s: gradient of %s differs", what, mt_tensor_name(p));
    }
}

/* A pipeline stage's layers on x (...,C): r = x + linear(gelu(linear(x))),
 * out = linear(r). x is read twice (its gradient takes two contributions in
 * a run); the last op is a linear, so W reads the output's gradient. */
static mt_tensor *stage_body(mt_graph *g, mt_tensor *x, int64_t C) {
    mt_init n = {MT_INIT_NORMAL, 0.5f};
    mt_tensor *w1 = mt_param(g, "w1", 2, (int64_t[]){2 * C, C}, n);
    mt_tensor *b1 = mt_param(g, "b1", 1, (int64_t[]){2 * C}, n);
    mt_tensor *w2 = mt_param(g, "w2", 2, (int64_t[]){C, 2 * C}, n);
    mt_tensor *b2 = mt_param(g, "b2", 1, (int64_t[]){C}, n);
    mt_tensor *w3 = mt_param(g, "w3", 2, (int64_t[]){C, C}, n);
    mt_tensor *b3 = mt_param(g, "b3", 1, (int64_t[]){C}, n);
    mt_tensor *h = mt_linear(g, mt_gelu(g, mt_linear(g, x, w1, b1)), w2, b2);
    mt_tensor *out = mt_linear(g, mt_add(g, x, h), w3, b3);
    if (out) mt_tensor_set_name(out, "out");
    return out;
}

/* d loss / d x of a marked input after B alone (W not run: every parameter
 * gradient still zero) against central differences; a second run
 * overwrites it rather than adding. The mark comes after the ops that read
 * x (it flows to them at the mark). */
MT_TEST(input_gradient_matches_finite_differences) {
    mt_graph *g = mt_graph_create();
    mt_tensor *x = mt_input(g, "x", MT_F32, 2, (int64_t[]){4, 8});
    mt_tensor *target = mt_constant(g, "target", MT_F32, 2, (int64_t[]){4, 8});
    mt_tensor *loss = mt_mse(g, stage_body(g, x, 8), target, 0.5f);
    MT_CHECK_OK(mt_input_set_needs_grad(x));
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 3}));
    fill_normal(x, 1);
    fill_normal(target, 2);
    MT_CHECK_OK(mt_graph_forward(g));
    MT_CHECK_OK(mt_graph_backward_b(g));
    MT_CHECK(mt_tensor_grad(x) != NULL, "x has a gradient");
    for (int i = 0; i < mt_graph_n_params(g); i++) {
        mt_tensor *p = mt_graph_param_at(g, i);
        for (int64_t j = 0; j < mt_tensor_numel(p); j++)
            MT_CHECK(mt_tensor_f32(mt_tensor_grad(p))[j] == 0.0f, "grad of %s after B alone",
                     mt_tensor_name(p));
    }
    float *dx = copy_of(mt_tensor_grad(x));
    float *xd = mt_tensor_f32(x);
    for (int j = 0; j < 32; j++) {
        double num = central_diff(g, xd, j, EPS);
        MT_CHECK(fabs(dx[j] - num) <= TOL * (1 + fabs(num)), "d loss / d x[%d]: B gives %.6g, "
                 "finite differences %.6g", j, dx[j], num);
    }
    /* the caller's to read until the next backward: not in the reused arena */
    MT_CHECK(!mt__storage_root(mt_tensor_grad(x))->in_arena && same(mt_tensor_grad(x), dx),
             "d loss / d x kept through the forwards above");
    /* W, then a second F+B on the same x: the same gradient, not twice it */
    MT_CHECK_OK(mt_graph_backward_w(g));
    MT_CHECK_OK(mt_graph_forward(g));
    MT_CHECK_OK(mt_graph_backward_b(g));
    MT_CHECK(same(mt_tensor_grad(x), dx), "the second backward overwrites d loss / d x");
    free(dx);
    MT_CHECK_FAILS(mt_input_set_needs_grad(x), MT_ESTATE, "compiled");
    mt_graph_free(g);

    g = mt_graph_create();
    mt_tensor *ids = mt_input(g, "ids", MT_I32, 1, (int64_t[]){4});
    mt_tensor *w = mt_param(g, "w", 1, (int64_t[]){4}, (mt_init){MT_INIT_ONES, 0});
    x = mt_input(g, "x", MT_F32, 1, (int64_t[]){4});
    MT_CHECK_FAILS(mt_input_set_needs_grad(ids), MT_EINVAL, "'ids'", "f32 input");
    MT_CHECK_FAILS(mt_input_set_needs_grad(w), MT_EINVAL, "'w'");
    MT_CHECK_FAILS(mt_input_set_needs_grad(mt_reshape(g, x, 2, (int64_t[]){2, 2})), MT_EINVAL,
                   "view");
    MT_CHECK_FAILS(mt_input_set_needs_grad(NULL), MT_EINVAL, "NULL");
    mt_graph_free(g);
}

/* A stage whose backward starts from a cotangent the caller gives: its
 * parameter and input gradients equal those of the scalar loss Σ out ⊙ seed
 * (built from the public ops), bitwise (that loss's backward hands the same
 * numbers to the same nodes). The seed and the output keep their bytes
 * through B and W. */
MT_TEST(caller_seed_equals_the_loss_it_stands_for) {
    const int64_t shape[3] = {2, 3, 8};
    mt_graph *gs = mt_graph_create(), *gl = mt_graph_create();
    mt_tensor *xs = mt_input(gs, "x", MT_F32, 3, shape);
    MT_CHECK_OK(mt_input_set_needs_grad(xs));
    mt_tensor *out = stage_body(gs, xs, 8);
    MT_CHECK_OK(mt_graph_compile(gs, out, &(mt_compile_opts){.seed = 4, .seed_from_caller = true}));
    mt_tensor *xl = mt_input(gl, "x", MT_F32, 3, shape);
    MT_CHECK_OK(mt_input_set_needs_grad(xl));
    mt_tensor *r = mt_constant(gl, "r", MT_F32, 3, shape);
    mt_tensor *loss = mt_sum(gl, mt_mul(gl, stage_body(gl, xl, 8), r));
    MT_CHECK_OK(mt_graph_compile(gl, loss, &(mt_compile_opts){.seed = 4}));

    mt_tensor *seed = mt_tensor_grad(out);
    MT_CHECK(seed && mt_tensor_ndim(seed) == 3 && !mt__storage_root(seed)->in_arena,
             "the seed is the output's gradient, outside the reused arena");
    fill_normal(xs, 5);
    fill_normal(xl, 5);
    fill_normal(seed, 6);
    fill_normal(r, 6);
    float *seed0 = copy_of(seed);
    MT_CHECK_OK(mt_graph_forward(gs));
    MT_CHECK(isnan(mt_graph_loss(gs)), "no scalar loss: %g", mt_graph_loss(gs));
    float *y = copy_of(out);
    MT_CHECK_OK(mt_graph_forward(gl));
    MT_CHECK(same(mt_graph_find(gl, "out"), y), "the same output");
    MT_CHECK_OK(mt_graph_backward(gs));
    MT_CHECK_OK(mt_graph_backward(gl));
    check_same_grads(gs, gl, "caller seed against Σ out ⊙ seed");
    MT_CHECK(same(mt_tensor_grad(xs), mt_tensor_f32(mt_tensor_grad(xl))), "input gradients");
    MT_CHECK(same(seed, seed0) && same(out, y), "the seed and the output kept through B and W");
    free(seed0);
    free(y);
    mt_graph_free(gs);
    mt_graph_free(gl);
}

/* One phase of a schedule: F, B or W of microbatch mb on slot `slot`. */
typedef struct {
    char ph;
    int  mb, slot;
} phase_run;

static void fill_tokens(mt_graph *g, int mb, int V) {
    int32_t *tok = mt_tensor_i32(mt_graph_find(g, "tokens"));
    int32_t *tgt = mt_tensor_i32(mt_graph_find(g, "targets"));
    for (int i = 0; i < 16; i++) {
        tok[i] = (i * 7 + mb * 3 + 1) % V;
        tgt[i] = (i * 5 + mb * 11 + 2) % V;
    }
}

/* Runs a GPT schedule on g's slots; losses[mb] after each F. */
static void run_gpt_schedule(mt_graph *g, const phase_run *s, int n, int V, float *losses) {
    for (int i = 0; i < n; i++) {
        MT_CHECK_OK(mt_graph_use_slot(g, s[i].slot));
        if (s[i].ph == 'F') {
            fill_tokens(g, s[i].mb, V);
            MT_CHECK_OK(mt_graph_forward(g));
            losses[s[i].mb] = mt_graph_loss(g);
        } else {
            MT_CHECK_OK(s[i].ph == 'B' ? mt_graph_backward_b(g) : mt_graph_backward_w(g));
        }
    }
}

/* Four microbatches of a two-layer GPT on three slots, interleaved as a
 * pipeline would, with slot reuse: losses and accumulated gradients are
 * bitwise those of running them one after another on a one-slot graph, W
 * in the same order. Twice: the second time after an optimizer step (the
 * gradients marked zero: the first W overwrites), in another interleaving. */
MT_TEST(slots_interleave_microbatches_exactly) {
    mt_gpt_config cfg = {.L = 2, .C = 16, .NH = 2, .maxT = 8, .V = 32, .Vp = 32};
    mt_graph *ref = mt_graph_create(), *g = mt_graph_create();
    mt_tensor *lr = mt_gpt_build(ref, &cfg, 2, 8, 1.0f / 64);
    mt_tensor *lg = mt_gpt_build(g, &cfg, 2, 8, 1.0f / 64);
    MT_CHECK(mt_graph_set_slots(g, 3) == MT_ESTATE && mt_graph_use_slot(g, 0) == MT_ESTATE,
             "slots before compile");
    MT_CHECK_OK(mt_graph_compile(ref, lr, &(mt_compile_opts){.seed = 7}));
    MT_CHECK_OK(mt_graph_compile(g, lg, &(mt_compile_opts){.seed = 7}));
    MT_CHECK_OK(mt_gpt_fill_constants(ref));
    MT_CHECK_OK(mt_gpt_fill_constants(g));
    size_t one = mt_graph_get_stats(ref).arena_bytes;
    MT_CHECK_OK(mt_graph_set_slots(g, 3));
    mt_graph_stats st = mt_graph_get_stats(g);
    MT_CHECK(st.n_slots == 3 && st.arena_bytes == 3 * one, "%d slots, %zu arena bytes (one: %zu)",
             st.n_slots, st.arena_bytes, one);

    static const phase_run first[] = {
        {'F', 0, 0}, {'F', 1, 1}, {'F', 2, 2}, {'B', 0, 0}, {'W', 0, 0}, {'F', 3, 0},
        {'B', 1, 1}, {'B', 2, 2}, {'W', 1, 1}, {'W', 2, 2}, {'B', 3, 0}, {'W', 3, 0}};
    static const phase_run second[] = {
        {'F', 0, 2}, {'F', 1, 0}, {'F', 2, 1}, {'B', 2, 1}, {'B', 1, 0}, {'B', 0, 2},
        {'W', 0, 2}, {'F', 3, 2}, {'W', 1, 0}, {'W', 2, 1}, {'B', 3, 2}, {'W', 3, 2}};
    for (int round = 0; round < 2; round++) {
        if (round) {
            mt__graph_mark_grads_zero(ref);
            mt__graph_mark_grads_zero(g);
        }
        float want[4], got[4];
        for (int mb = 0; mb < 4; mb++) {
            fill_tokens(ref, mb, cfg.V);
            MT_CHECK_OK(mt_graph_forward(ref));
            want[mb] = mt_graph_loss(ref);
            MT_CHECK_OK(mt_graph_backward_b(ref));
            MT_CHECK_OK(mt_graph_backward_w(ref));
        }
        run_gpt_schedule(g, round ? second : first, 12, cfg.V, got);
        for (int mb = 0; mb < 4; mb++)
            MT_CHECK(got[mb] == want[mb], "round %d microbatch %d: loss %.9g, alone %.9g", round,
                     mb, got[mb], want[mb]);
        check_same_grads(g, ref, round ? "after a step, second interleaving" : "interleaved");
    }
    /* each slot keeps the loss of its last forward (second round: 3 on 2, 1 on 0, 2 on 1) */
    for (int k = 0; k < 3; k++) {
        fill_tokens(ref, (int[]){1, 2, 3}[k], cfg.V);
        MT_CHECK_OK(mt_graph_forward(ref));
        MT_CHECK_OK(mt_graph_use_slot(g, k));
        MT_CHECK(mt_graph_loss(g) == mt_graph_loss(ref), "slot %d's loss", k);
    }
    MT_CHECK_FAILS(mt_graph_use_slot(g, 3), MT_EINVAL, "slot 3", "3 slots");
    MT_CHECK_FAILS(mt_graph_use_slot(g, -1), MT_EINVAL, "slot -1");
    MT_CHECK_FAILS(mt_graph_set_slots(g, 0), MT_EINVAL, "at least 1");
    /* back to one slot (from slot 2: slot 0 becomes current, and keeps microbatch 1) */
    MT_CHECK_OK(mt_graph_set_slots(g, 1));
    st = mt_graph_get_stats(g);
    MT_CHECK(st.n_slots == 1 && st.arena_bytes == one, "%d slots, %zu bytes", st.n_slots,
             st.arena_bytes);
    MT_CHECK_FAILS(mt_graph_use_slot(g, 1), MT_EINVAL, "1 slot");
    fill_tokens(ref, 1, cfg.V);
    MT_CHECK_OK(mt_graph_forward(ref));
    MT_CHECK_OK(mt_graph_forward(g));
    MT_CHECK(mt_graph_loss(g) == mt_graph_loss(ref), "slot 0 kept its tokens");
    mt_graph_free(ref);
    mt_graph_free(g);
}

/* A middle pipeline stage (an input gradient and a caller seed) on two
 * slots: each microbatch's output, input gradient and the accumulated
 * parameter gradients are bitwise those of running them one at a time. The
 * seed is filled right after the F and read by B after other slots ran; the
 * input gradient is read after other slots' phases too. */
MT_TEST(slots_keep_inputs_seeds_and_input_gradients_apart) {
    const int64_t shape[3] = {2, 3, 8};
    mt_graph *gr[2];
    mt_tensor *x[2], *out[2];
    for (int i = 0; i < 2; i++) {
        gr[i] = mt_graph_create();
        x[i] = mt_input(gr[i], "x", MT_F32, 3, shape);
        MT_CHECK_OK(mt_input_set_needs_grad(x[i]));
        out[i] = stage_body(gr[i], x[i], 8);
        MT_CHECK_OK(mt_graph_compile(gr[i], out[i],
                                     &(mt_compile_opts){.seed = 9, .seed_from_caller = true}));
    }
    mt_graph *ref = gr[0], *g = gr[1];
    float *y[3], *dx[3];
    for (int mb = 0; mb < 3; mb++) {
        fill_normal(x[0], 10 + mb);
        MT_CHECK_OK(mt_graph_forward(ref));
        y[mb] = copy_of(out[0]);
        fill_normal(mt_tensor_grad(out[0]), 20 + mb);
        MT_CHECK_OK(mt_graph_backward_b(ref));
        dx[mb] = copy_of(mt_tensor_grad(x[0]));
        MT_CHECK_OK(mt_graph_backward_w(ref));
    }
    MT_CHECK_OK(mt_graph_set_slots(g, 2));
    static const phase_run s[] = {{'F', 0, 0}, {'F', 1, 1}, {'B', 0, 0}, {'W', 0, 0},
                                  {'F', 2, 0}, {'B', 1, 1}, {'W', 1, 1}, {'B', 2, 0},
                                  {'W', 2, 0}};
    int last[2] = {-1, -1};   /* the microbatch each slot holds */
    for (int i = 0; i < 9; i++) {
        MT_CHECK_OK(mt_graph_use_slot(g, s[i].slot));
        if (s[i].ph == 'F') {
            if (last[s[i].slot] >= 0)   /* the slot's previous microbatch, read late */
                MT_CHECK(same(mt_tensor_grad(x[1]), dx[last[s[i].slot]]),
                         "microbatch %d's input gradient", last[s[i].slot]);
            fill_normal(x[1], 10 + s[i].mb);
            MT_CHECK_OK(mt_graph_forward(g));
            fill_normal(mt_tensor_grad(out[1]), 20 + s[i].mb);
            last[s[i].slot] = s[i].mb;
        } else if (s[i].ph == 'B') {
            MT_CHECK(same(out[1], y[s[i].mb]), "microbatch %d's output", s[i].mb);
            MT_CHECK_OK(mt_graph_backward_b(g));
        } else {
            MT_CHECK_OK(mt_graph_backward_w(g));
        }
    }
    for (int k = 0; k < 2; k++) {
        MT_CHECK_OK(mt_graph_use_slot(g, k));
        MT_CHECK(same(mt_tensor_grad(x[1]), dx[last[k]]), "microbatch %d's input gradient",
                 last[k]);
    }
    check_same_grads(g, ref, "a middle stage on two slots");
    for (int mb = 0; mb < 3; mb++) {
        free(y[mb]);
        free(dx[mb]);
    }
    mt_graph_free(ref);
    mt_graph_free(g);
}

/* ---- errors ---- */

MT_TEST(scalar_operands_are_refused) {
    mt_graph *g = mt_graph_create();
    mt_tensor *s = mt_param(g, "s", 1, (int64_t[]){4}, (mt_init){MT_INIT_ONES, 0});
    mt_tensor *scalar = mt_sum(g, s);
    mt_tensor *w = mt_param(g, "w", 2, (int64_t[]){2, 2}, (mt_init){MT_INIT_ONES, 0});
    MT_CHECK(mt_linear(g, scalar, w, NULL) == NULL, "linear of a scalar");
    MT_CHECK(strstr(mt_graph_errmsg(g), "scalar"), "%s", mt_graph_errmsg(g));
    mt_graph_free(g);
    g = mt_graph_create();
    s = mt_param(g, "s", 1, (int64_t[]){4}, (mt_init){MT_INIT_ONES, 0});
    mt_tensor *tg = mt_input(g, "tg", MT_I32, 1, (int64_t[]){1});
    MT_CHECK(mt_cross_entropy(g, mt_sum(g, s), tg, 1, 1.0f) == NULL, "cross-entropy of a scalar");
    MT_CHECK(mt_graph_status(g) == MT_ESHAPE, "%s", mt_graph_errmsg(g));
    mt_graph_free(g);
}

MT_TEST(build_errors_name_the_operands) {
    mt_graph *g = mt_graph_create();
    mt_tensor *a = mt_input(g, "a", MT_F32, 2, (int64_t[]){3, 4});
    mt_tensor *b = mt_param(g, "b", 2, (int64_t[]){5, 6}, (mt_init){MT_INIT_ZEROS, 0});
    mt_tensor *c = mt_matmul(g, a, b, false, false);
    MT_CHECK(c == NULL, "mismatched matmul must fail");
    MT_CHECK(mt_graph_status(g) == MT_ESHAPE, "status %s", mt_status_name(mt_graph_status(g)));
    const char *msg = mt_graph_errmsg(g);
    MT_CHECK(strstr(msg, "'a'") && strstr(msg, "'b'") && strstr(msg, "(3,4)") && strstr(msg, "(5,6)"),
             "message names operands and shapes: %s", msg);
    /* the error sticks; later builders return NULL, compile reports it */
    MT_CHECK(mt_gelu(g, a) == NULL, "sticky");
    MT_CHECK(mt_graph_compile(g, c, NULL) == MT_ESHAPE, "compile reports the first error");
    mt_graph_free(g);

    g = mt_graph_create();
    a = mt_input(g, "a", MT_F32, 2, (int64_t[]){3, 4});
    MT_CHECK(mt_input(g, "a", MT_F32, 1, (int64_t[]){3}) == NULL, "duplicate name");
    MT_CHECK(strstr(mt_graph_errmsg(g), "already exists"), "%s", mt_graph_errmsg(g));
    mt_graph_free(g);

    g = mt_graph_create();
    a = mt_input(g, "x", MT_F32, 3, (int64_t[]){2, 4, 3 * 10});
    MT_CHECK(mt_attention(g, a, 3) == NULL, "10 channels do not split into 3 heads");
    MT_CHECK(strstr(mt_graph_errmsg(g), "NH=3"), "%s", mt_graph_errmsg(g));
    mt_graph_free(g);

    g = mt_graph_create();
    a = mt_input(g, "x", MT_F32, 2, (int64_t[]){2, 4});
    MT_CHECK(mt_graph_compile(g, a, NULL) == MT_ESHAPE, "non-scalar loss");
    MT_CHECK(strstr(mt_errmsg(), "scalar"), "%s", mt_errmsg());
    mt_graph_free(g);

    g = mt_graph_create();
    a = mt_input(g, "x", MT_F32, 2, (int64_t[]){2, 4});
    mt_tensor *l = mt_sum(g, a);
    MT_CHECK(mt_graph_compile(g, l, NULL) == MT_EINVAL, "loss without parameters");
    MT_CHECK(strstr(mt_errmsg(), "nothing to train"), "%s", mt_errmsg());
    /* a compile error sticks to the graph with the same text, and a later
     * call reports it again */
    MT_CHECK(mt_graph_status(g) == MT_EINVAL, "status %s", mt_status_name(mt_graph_status(g)));
    MT_CHECK(strcmp(mt_graph_errmsg(g), mt_errmsg()) == 0, "graph: '%s', mt_errmsg: '%s'",
             mt_graph_errmsg(g), mt_errmsg());
    mt_errclear();
    MT_CHECK(mt_graph_forward(g) == MT_EINVAL && strstr(mt_errmsg(), "nothing to train"), "%s",
             mt_errmsg());
    mt_graph_free(g);
}

MT_TEST(no_grad_graph_runs_forward_only) {
    fd_case c = build_lm();
    MT_CHECK_OK(mt_graph_compile(c.g, c.loss, &(mt_compile_opts){.seed = 3, .no_grad = true}));
    fill_lm(c.g);
    MT_CHECK_OK(mt_graph_forward(c.g));
    float l = mt_graph_loss(c.g);
    MT_CHECK(isfinite(l) && l > 0, "loss %g", l);
    MT_CHECK(mt_graph_backward(c.g) == MT_ESTATE, "backward on a no_grad graph");
    mt_graph_stats st = mt_graph_get_stats(c.g);
    MT_CHECK(st.n_backward_b == 0 && st.n_backward_w == 0, "no backward nodes");
    mt_graph_free(c.g);
}

/* mt_graph_print names each collective's axes (and pvary's, slice's) and the
 * dims it moves; a listing is written by device 0 of a data=2,tensor=2 mesh. */
typedef struct {
    char text[4096];
} listing_case;

static mt_status listing_device(mt_ctx *ctx, void *arg) {
    listing_case *lc = arg;
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    mt_axes data, tensor, both;
    mt_status s = mt_mesh_axes(mesh, "data", &data);
    if (s == MT_OK) s = mt_mesh_axes(mesh, "tensor", &tensor);
    if (s == MT_OK) s = mt_mesh_axes(mesh, "data,tensor", &both);
    mt_graph *g = mt_graph_create();
    if (s == MT_OK) s = mt_graph_set_ctx(g, ctx);
    if (s == MT_OK) {
        int64_t xs[2] = {4, 8};
        mt_tensor *x = mt_input(g, "x", MT_F32, 2, xs);
        mt_tensor *p = mt_param(g, "p", 2, xs, (mt_init){MT_INIT_NORMAL, 1.0f});
        mt_tensor *a = mt_graph_psum(g, x, data);                  /* (4,8) */
        mt_tensor *b = mt_graph_all_gather(g, a, tensor, 1);       /* (4,16) */
        mt_graph_psum_scatter(g, b, both, 0);                      /* (1,16) */
        mt_graph_all_to_all(g, b, tensor, 0, 1);                   /* (2,32) */
        mt_graph_slice(g, x, tensor, 1);                           /* (4,4) */
        mt_graph_pvary(g, p, data);
        s = mt_graph_status(g);
    }
    if (s == MT_OK && mt_ctx_device(ctx) == 0) {
        FILE *f = fmemopen(lc->text, sizeof lc->text - 1, "w");
        if (!f) s = mt_fail(MT_EIO, "fmemopen failed");
        else {
            mt_graph_print(g, f);
            fclose(f);
        }
    }
    mt_graph_free(g);
    return s;
}

MT_TEST(print_names_collective_axes) {
    listing_case lc = {{0}};
    mt_launch_opts o = {.mesh = "data=2,tensor=2", .devices = 4, .timeout_s = 30,
                        .kernel_threads = 1};
    MT_CHECK_OK(mt_launch(&o, listing_device, &lc));
    static const char *const WANT[] = {
        "F psum[data] ", "F all_gather[tensor] dim=1 ", "F psum_scatter[data,tensor] dim=0 ",
        "F all_to_all[tensor] dim=0->1 ", "F slice[tensor] dim=1 ", "F pvary[data] ",
    };
    for (size_t k = 0; k < sizeof WANT / sizeof WANT[0]; k++)
        MT_CHECK(strstr(lc.text, WANT[k]), "no line with '%s' in the listing:\n%s", WANT[k],
                 lc.text);
    /* an op without axes prints its name alone */
    mt_graph *g = mt_graph_create();
    int64_t xs[2] = {2, 3};
    mt_tensor *x = mt_input(g, "x", MT_F32, 2, xs);
    mt_sum(g, mt_matmul(g, x, x, false, true));
    char text[1024] = {0};
    FILE *f = fmemopen(text, sizeof text - 1, "w");
    MT_CHECK(f, "fmemopen failed");
    mt_graph_print(g, f);
    fclose(f);
    MT_CHECK(strstr(text, "F matmul ") && !strchr(text, '['), "listing:\n%s", text);
    mt_graph_free(g);
}

/* The profile's totals of one op: a (4,8)x(8,16) product run 3 times is 3
 * calls of 2·4·8·16 FLOPs each (the hand count), with some time; an op that
 * did not run is zeros; a name that is no op and a profile that is off are
 * refused. */
MT_TEST(profile_op_totals) {
    mt_graph *g = mt_graph_create();
    mt_tensor *a = mt_input(g, "a", MT_F32, 2, (const int64_t[]){4, 8});
    mt_tensor *b = mt_param(g, "b", 2, (const int64_t[]){8, 16},
                            (mt_init){.kind = MT_INIT_NORMAL, .std = 0.02f});
    mt_tensor *out = mt_matmul(g, a, b, false, false);
    MT_CHECK_OK(mt_graph_compile(g, out, &(mt_compile_opts){.seed = 1, .no_grad = true,
                                                             .seed_from_caller = true}));
    mt_op_totals t;
    MT_CHECK_FAILS(mt_graph_profile_op(g, "matmul", &t), MT_ESTATE, "profiling is off");
    MT_CHECK_OK(mt_graph_set_profiling(g, true));
    for (int r = 0; r < 3; r++) MT_CHECK_OK(mt_graph_forward(g));
    MT_CHECK_OK(mt_graph_profile_op(g, "matmul", &t));
    MT_CHECK(t.calls == 3 && t.flops == 3 * 2.0 * 4 * 8 * 16 && t.seconds > 0,
             "matmul: %lld calls, %g FLOPs, %g s", (long long)t.calls, t.flops, t.seconds);
    MT_CHECK_OK(mt_graph_profile_op(g, "attention", &t));
    MT_CHECK(t.calls == 0 && t.seconds == 0 && t.flops == 0 && t.bytes == 0, "not run: zeros");
    MT_CHECK_FAILS(mt_graph_profile_op(g, "attentoin", &t), MT_EINVAL, "'attentoin' is no op");
    mt_graph_free(g);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
