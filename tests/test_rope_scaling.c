/*
 * test_rope_scaling.c — RoPE's frequency scaling (issue 41, item 5):
 * Llama 3.1's rule and YaRN (meshtrain/graph.h's mt_rope_scaling).
 *
 *  - the inverse frequencies against a table of the published formulas
 *    evaluated outside this code base (Python, float64: Meta's
 *    apply_scaling, YaRN's find_correction_range and linear ramp as HF
 *    transformers' _compute_llama3_parameters and _compute_yarn_parameters
 *    write them), and every pair against the formulas written out again
 *    here in double, for several head sizes, bases and contexts; Llama
 *    3.1's three bands counted by hand; YaRN's attention factor;
 *  - no scaling is the unscaled frequency, the same double, and a rope with
 *    kind none is bit for bit mt_rope's, forward and backward;
 *  - rope with scaling, forward and backward, against the rotation in
 *    double (the backward: the transposed rotation times the same factor, a
 *    closed form of the linear map), at positions to 60000;
 *  - the checks' refusals, naming the flag;
 *  - a LLaMA trained with llama3 (and yarn) scaling on one device equals
 *    the same on data=2, tensor=2 (with and without sequence parallelism,
 *    which splits T into blocks and so shifts pos0) and context=2 (T split
 *    head-tail: each row at its own position), losses within 1e-5 and
 *    parameters within 1e-4; and the scaling changes the run.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#define PI 3.14159265358979323846

/* ======================================================================== */
/* The formulas, in double, written out from the papers                      */
/* ======================================================================== */

/* Meta's llama3_1 apply_scaling on theta^(-2i/HS). */
static double ref_llama3(double theta, int HS, int i, double factor, double lo, double hi,
                         double L) {
    double f = 1.0 / pow(theta, 2.0 * i / HS), wavelen = 2 * PI / f;
    if (wavelen < L / hi) return f;
    if (wavelen > L / lo) return f / factor;
    double smooth = (L / wavelen - lo) / (hi - lo);
    return (1 - smooth) * f / factor + smooth * f;
}

/* YaRN: between the pair indices where a frequency turns beta_fast and
 * beta_slow times over L (floor, ceil, clamped to [0, HS-1]) a linear ramp
 * from the frequency to the frequency / factor. */
static double ref_yarn(double theta, int HS, int i, double factor, double L, double bf,
                       double bs) {
    double lo = floor(HS * log(L / (bf * 2 * PI)) / (2 * log(theta)));
    double hi = ceil(HS * log(L / (bs * 2 * PI)) / (2 * log(theta)));
    lo = fmax(lo, 0);
    hi = fmin(hi, HS - 1);
    if (lo == hi) hi += 0.001;
    double ramp = fmin(fmax((i - lo) / (hi - lo), 0), 1);
    double f = 1.0 / pow(theta, 2.0 * i / HS);
    return f * (1 - ramp) + f / factor * ramp;
}

/* Relative to the value (frequencies run to 1e-7). */
static void check_rel(double got, double want, double tol, const char *what, int i) {
    MT_CHECK(fabs(got - want) <= tol * fabs(want), "%s pair %d: got %.17g, want %.17g", what, i,
             got, want);
}

static const mt_rope_scaling LLAMA31 = {.kind = MT_ROPE_SCALING_LLAMA3, .factor = 8.0f,
                                        .low_freq_factor = 1.0f, .high_freq_factor = 4.0f,
                                        .original_context = 8192};

/* ======================================================================== */
/* The frequencies                                                           */
/* ======================================================================== */

MT_TEST(llama31_inverse_frequencies) {
    /* Llama 3.1 8B's head (HS 128, theta 500000), factor 8, low 1, high 4,
     * original 8192: Python's float64 of the formula */
    static const struct { int i; double f; } table[] = {
        {0, 1.0},
        {1, 0.8146172338565447},
        {20, 0.016560440080994446},
        {28, 0.003211445994752591},     /* the last kept */
        {29, 0.002166570763503359},     /* the first smoothed */
        {31, 0.0008567514129196321},
        {34, 0.0001785078127679964},    /* the last smoothed */
        {35, 9.556212353964683e-05},    /* the first divided by 8 */
        {63, 3.068925988914511e-07},
    };
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
        check_rel(mt_rope_inv_freq(&LLAMA31, 500000.0, 128, table[k].i), table[k].f, 1e-13,
                  "Llama 3.1 table", table[k].i);
    /* the bands by hand: 2π·500000^(i/64) < 8192/4 for i <= 28, > 8192/1
     * for i >= 35, so 29 pairs kept, 6 smoothed, 29 divided */
    int kept = 0, divided = 0;
    for (int i = 0; i < 64; i++) {
        double f = pow(500000.0, -2.0 * i / 128), got = mt_rope_inv_freq(&LLAMA31, 500000.0, 128, i);
        kept += got == f;
        divided += fabs(got - f / 8) <= 1e-15 * f;
    }
    MT_CHECK(kept == 29 && divided == 29, "kept %d, divided %d (want 29 and 29)", kept, divided);
    MT_CHECK(mt_rope_mscale(&LLAMA31) == 1.0, "llama3 leaves the rotation's scale");

    /* every pair against the formula, over head sizes, bases, contexts and
     * factors */
    const int heads[] = {8, 16, 64, 128};
    const double thetas[] = {10000.0, 500000.0};
    const struct { float factor, lo, hi; int L; } rules[] = {
        {8, 1, 4, 8192}, {4, 1, 4, 64}, {32, 2, 8, 2048}, {2, 0.5f, 3, 100},
    };
    for (size_t h = 0; h < 4; h++)
        for (size_t t = 0; t < 2; t++)
            for (size_t r = 0; r < 4; r++) {
                mt_rope_scaling s = {.kind = MT_ROPE_SCALING_LLAMA3, .factor = rules[r].factor,
                                     .low_freq_factor = rules[r].lo,
                                     .high_freq_factor = rules[r].hi,
                                     .original_context = rules[r].L};
                MT_CHECK_OK(mt_rope_scaling_check(&s));
                for (int i = 0; i < heads[h] / 2; i++)
                    check_rel(mt_rope_inv_freq(&s, thetas[t], heads[h], i),
                              ref_llama3(thetas[t], heads[h], i, rules[r].factor, rules[r].lo,
                                         rules[r].hi, rules[r].L), 1e-13, "llama3", i);
            }
}

MT_TEST(yarn_inverse_frequencies_and_attention_factor) {
    /* Llama 2's head (HS 128, theta 10000) at YaRN's 16x over 4096 with
     * beta 32 and 1: the ramp runs over pairs 20..46 (floor 20.9, ceil
     * 45.03); Python's float64 of the formula */
    const mt_rope_scaling s = {.kind = MT_ROPE_SCALING_YARN, .factor = 16.0f,
                               .original_context = 4096, .beta_fast = 32.0f, .beta_slow = 1.0f};
    static const struct { int i; double f; } table[] = {
        {0, 1.0},
        {20, 0.05623413251903491},      /* the ramp's start: kept */
        {21, 0.046940859997959404},
        {33, 0.004600435467850348},
        {45, 0.0001517716047318249},
        {46, 8.334508951020775e-05},    /* the ramp's end: divided by 16 */
        {63, 7.217387404309114e-06},
    };
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
        check_rel(mt_rope_inv_freq(&s, 10000.0, 128, table[k].i), table[k].f, 1e-13,
                  "YaRN table", table[k].i);
    /* YaRN's sqrt(1/t) = 0.1 ln(16) + 1 (Python: 1.2772588722239782), or
     * the factor given */
    MT_CHECK(fabs(mt_rope_mscale(&s) - 1.2772588722239782) < 1e-7, "mscale %.17g",
             mt_rope_mscale(&s));
    mt_rope_scaling own = s;
    own.attn_factor = 1.5f;
    MT_CHECK(mt_rope_mscale(&own) == 1.5, "attn_factor given: %g", mt_rope_mscale(&own));
    own.factor = 1.0f;
    own.attn_factor = 0.0f;
    MT_CHECK(mt_rope_mscale(&own) == 1.0, "factor 1: no temperature");

    const int heads[] = {8, 16, 64, 128};
    const double thetas[] = {10000.0, 500000.0};
    const struct { float factor, bf, bs; int L; } rules[] = {
        {16, 32, 1, 4096}, {4, 32, 1, 64}, {8, 16, 2, 8192}, {2, 4, 1, 32},
    };
    for (size_t h = 0; h < 4; h++)
        for (size_t t = 0; t < 2; t++)
            for (size_t r = 0; r < 4; r++) {
                mt_rope_scaling y = {.kind = MT_ROPE_SCALING_YARN, .factor = rules[r].factor,
                                     .original_context = rules[r].L, .beta_fast = rules[r].bf,
                                     .beta_slow = rules[r].bs};
                MT_CHECK_OK(mt_rope_scaling_check(&y));
                for (int i = 0; i < heads[h] / 2; i++)
                    check_rel(mt_rope_inv_freq(&y, thetas[t], heads[h], i),
                              ref_yarn(thetas[t], heads[h], i, rules[r].factor, rules[r].L,
                                       rules[r].bf, rules[r].bs), 1e-13, "yarn", i);
            }
}

MT_TEST(no_scaling_is_the_unscaled_frequency) {
    mt_rope_scaling none = LLAMA31;
    none.kind = MT_ROPE_SCALING_NONE;
    for (int i = 0; i < 64; i++) {
        double f = pow(500000.0, -(double)(2 * i) / 128.0);
        MT_CHECK(mt_rope_inv_freq(NULL, 500000.0, 128, i) == f &&
                 mt_rope_inv_freq(&none, 500000.0, 128, i) == f, "pair %d", i);
    }
    MT_CHECK(mt_rope_mscale(NULL) == 1.0 && mt_rope_mscale(&none) == 1.0, "mscale 1");
    MT_CHECK(strcmp(mt_rope_scaling_name(MT_ROPE_SCALING_NONE), "none") == 0 &&
             strcmp(mt_rope_scaling_name(MT_ROPE_SCALING_LLAMA3), "llama3") == 0 &&
             strcmp(mt_rope_scaling_name(MT_ROPE_SCALING_YARN), "yarn") == 0 &&
             mt_rope_scaling_name(3) == NULL, "names");
}

MT_TEST(scaling_refusals_name_the_flag) {
    mt_rope_scaling s = LLAMA31;
    s.kind = 7;
    MT_CHECK_FAILS(mt_rope_scaling_check(&s), MT_EINVAL, "kind 7", "--rope-scaling");
    s = LLAMA31;
    s.factor = 0.5f;
    MT_CHECK_FAILS(mt_rope_scaling_check(&s), MT_EINVAL, "--rope-factor 0.5", "at least 1");
    s = LLAMA31;
    s.original_context = 0;
    MT_CHECK_FAILS(mt_rope_scaling_check(&s), MT_EINVAL, "--rope-original-context 0");
    s = LLAMA31;
    s.low_freq_factor = 4.0f;
    MT_CHECK_FAILS(mt_rope_scaling_check(&s), MT_EINVAL, "--rope-low-freq-factor 4",
                   "--rope-high-freq-factor 4");
    s = (mt_rope_scaling){.kind = MT_ROPE_SCALING_YARN, .factor = 4, .original_context = 64,
                          .beta_fast = 1, .beta_slow = 32};
    MT_CHECK_FAILS(mt_rope_scaling_check(&s), MT_EINVAL, "--rope-beta-fast 1", "beta_slow");
    /* a setting out of range is refused whatever the kind; all zero passes */
    s = (mt_rope_scaling){.kind = MT_ROPE_SCALING_NONE, .attn_factor = -1.0f};
    MT_CHECK_FAILS(mt_rope_scaling_check(&s), MT_EINVAL, "--rope-attn-factor -1");
    s = (mt_rope_scaling){0};
    MT_CHECK_OK(mt_rope_scaling_check(&s));
    MT_CHECK_OK(mt_rope_scaling_check(NULL));
    /* the builder refuses it too, on the graph */
    mt_graph *g = mt_graph_create();
    const int64_t shape[3] = {1, 2, 8};
    mt_tensor *x = mt_param(g, "x", 3, shape, (mt_init){MT_INIT_NORMAL, 1.0f});
    s = LLAMA31;
    s.factor = 0.5f;
    MT_CHECK(!mt_rope_scaled(g, x, 1, 10000.0f, 0, &s), "a bad scaling builds nothing");
    MT_CHECK(mt_graph_status(g) == MT_EINVAL && strstr(mt_graph_errmsg(g), "--rope-factor"),
             "the graph's error: %s", mt_graph_errmsg(g));
    mt_graph_free(g);
}

/* ======================================================================== */
/* The op, forward and backward                                              */
/* ======================================================================== */

/* out (B,T,NH·HS) = rope of x at pos0.. under s, and dx = its transpose
 * applied to dout, computed through the graph on one device. */
static void graph_rope(const float *x, const float *dout, float *out, float *dx, int64_t B,
                       int64_t T, int NH, int64_t HS, float theta, int64_t pos0,
                       const mt_rope_scaling *s) {
    mt_graph *g = mt_graph_create();
    const int64_t shape[3] = {B, T, NH * HS}, n = B * T * NH * HS;
    mt_tensor *p = mt_param(g, "x", 3, shape, (mt_init){MT_INIT_NORMAL, 1.0f});
    mt_tensor *y = s ? mt_rope_scaled(g, p, NH, theta, pos0, s) : mt_rope(g, p, NH, theta, pos0);
    MT_CHECK(y, "build: %s", mt_graph_errmsg(g));
    mt_compile_opts opts = {.seed = 1, .seed_from_caller = true};
    MT_CHECK_OK(mt_graph_compile(g, y, &opts));
    memcpy(mt_tensor_f32(p), x, (size_t)n * sizeof *x);
    MT_CHECK_OK(mt_graph_forward(g));
    memcpy(out, mt_tensor_f32(y), (size_t)n * sizeof *out);
    memcpy(mt_tensor_f32(mt_tensor_grad(y)), dout, (size_t)n * sizeof *dout);
    MT_CHECK_OK(mt_graph_backward_b(g));
    MT_CHECK_OK(mt_graph_backward_w(g));
    memcpy(dx, mt_tensor_f32(mt_tensor_grad(p)), (size_t)n * sizeof *dx);
    mt_graph_free(g);
}

typedef struct {
    int     kind;
    int64_t B, T, NH, HS, pos0;
    double  theta;
} rope_case;

/* The case's scaling: llama3 or yarn over an original context of 64,
 * factor 4 (every band present at these head sizes). */
static mt_rope_scaling scaling_of(const rope_case *c) {
    return c->kind == MT_ROPE_SCALING_LLAMA3
               ? (mt_rope_scaling){.kind = c->kind, .factor = 4, .low_freq_factor = 1,
                                   .high_freq_factor = 4, .original_context = 64}
               : (mt_rope_scaling){.kind = c->kind, .factor = 4, .original_context = 64,
                                   .beta_fast = 32, .beta_slow = 1};
}

MT_TEST(scaled_rope_forward_and_backward_against_double) {
    const rope_case cases[] = {
        {MT_ROPE_SCALING_LLAMA3, 2, 5, 2, 16, 0, 10000},
        {MT_ROPE_SCALING_LLAMA3, 1, 4, 3, 128, 60000, 500000},
        {MT_ROPE_SCALING_YARN, 2, 5, 2, 16, 5000, 10000},
        {MT_ROPE_SCALING_YARN, 1, 3, 1, 200, 60000, 10000},   /* past the kernel's 64 pairs */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const rope_case *c = &cases[k];
        const mt_rope_scaling s = scaling_of(c);
        const int64_t n = c->B * c->T * c->NH * c->HS, C = c->NH * c->HS;
        float *x = malloc((size_t)n * sizeof *x), *r = malloc((size_t)n * sizeof *r);
        float *out = malloc((size_t)n * sizeof *out), *dx = malloc((size_t)n * sizeof *dx);
        for (int64_t i = 0; i < n; i++) {
            x[i] = (float)mt_rng_normal(7, 0, (uint64_t)i);
            r[i] = (float)mt_rng_normal(9, 1, (uint64_t)i);
        }
        graph_rope(x, r, out, dx, c->B, c->T, (int)c->NH, c->HS, (float)c->theta, c->pos0, &s);
        /* the rotation by (pos0 + t)·f_i times m, and its transpose, in double */
        const double m = c->kind == MT_ROPE_SCALING_YARN ? 0.1 * log(4.0) + 1.0 : 1.0;
        double worst_f = 0, worst_b = 0;
        for (int64_t b = 0; b < c->B; b++)
            for (int64_t t = 0; t < c->T; t++)
                for (int64_t j = 0; j < C; j += 2) {
                    int i = (int)((j % c->HS) / 2);
                    double f = c->kind == MT_ROPE_SCALING_LLAMA3
                                   ? ref_llama3((double)(float)c->theta, (int)c->HS, i, 4, 1,
                                                4, 64)
                                   : ref_yarn((double)(float)c->theta, (int)c->HS, i, 4, 64,
                                              32, 1);
                    double a = (double)(c->pos0 + t) * f, cs = m * cos(a), sn = m * sin(a);
                    int64_t o = (b * c->T + t) * C + j;
                    double y0 = x[o] * cs - x[o + 1] * sn, y1 = x[o] * sn + x[o + 1] * cs;
                    double d0 = r[o] * cs + r[o + 1] * sn, d1 = -r[o] * sn + r[o + 1] * cs;
                    worst_f = fmax(worst_f, fmax(fabs(out[o] - y0), fabs(out[o + 1] - y1)));
                    worst_b = fmax(worst_b, fmax(fabs(dx[o] - d0), fabs(dx[o + 1] - d1)));
                }
        MT_CHECK(worst_f < 2e-6 && worst_b < 2e-6, "%s HS=%lld pos0=%lld: forward off by %.3g, "
                 "backward by %.3g", mt_rope_scaling_name(c->kind), (long long)c->HS,
                 (long long)c->pos0, worst_f, worst_b);
        free(x);
        free(r);
        free(out);
        free(dx);
    }
}

MT_TEST(kind_none_is_mt_rope_bit_for_bit) {
    const int64_t B = 2, T = 6, NH = 3, HS = 130, n = B * T * NH * HS;   /* 65 pairs */
    float *x = malloc((size_t)n * sizeof *x), *r = malloc((size_t)n * sizeof *r);
    float *o1 = malloc((size_t)n * sizeof *o1), *d1 = malloc((size_t)n * sizeof *d1);
    float *o2 = malloc((size_t)n * sizeof *o2), *d2 = malloc((size_t)n * sizeof *d2);
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)mt_rng_normal(3, 0, (uint64_t)i);
        r[i] = (float)mt_rng_normal(4, 0, (uint64_t)i);
    }
    mt_rope_scaling none = LLAMA31;   /* its values set, its kind none */
    none.kind = MT_ROPE_SCALING_NONE;
    graph_rope(x, r, o1, d1, B, T, (int)NH, HS, 500000.0f, 70000, NULL);
    graph_rope(x, r, o2, d2, B, T, (int)NH, HS, 500000.0f, 70000, &none);
    MT_CHECK(memcmp(o1, o2, (size_t)n * sizeof *o1) == 0 &&
             memcmp(d1, d2, (size_t)n * sizeof *d1) == 0, "kind none differs from mt_rope");
    /* and a scaling does change it */
    graph_rope(x, r, o2, d2, B, T, (int)NH, HS, 500000.0f, 70000, &LLAMA31);
    MT_CHECK(memcmp(o1, o2, (size_t)n * sizeof *o1) != 0, "llama3 scaling changed nothing");
    free(x);
    free(r);
    free(o1);
    free(d1);
    free(o2);
    free(d2);
}

/* ======================================================================== */
/* A LLaMA trained with scaling, on meshes                                   */
/* ======================================================================== */

#define STEPS 6

/* L=2 C=32 NH=4 KV=2 (HS 8, pairs with wavelengths 6.3, 63, 628, 6283 at
 * theta 10000), T=16; original context 64, factor 4: llama3 keeps pair 0,
 * smooths 1, divides 2 and 3. */
static mt_llama_config scaled_llama(int kind) {
    mt_llama_config m = {.dim = 32, .ffn_dim = 64, .n_layers = 2, .n_heads = 4,
                         .n_kv_heads = 2, .vocab = 0, .max_seq = 16, .rope_theta = 10000.0f,
                         .norm_eps = 1e-5f, .multiple_of = 32, .ffn_mult = 1.0f};
    rope_case c = {.kind = kind};
    m.rope_scaling = kind == MT_ROPE_SCALING_NONE ? (mt_rope_scaling){0} : scaling_of(&c);
    return m;
}

/* STEPS steps of c; its curve, and device 0's parameters into *p. */
static mt_test_curve run_steps(const mt_train_config *c, mt_test_params *p) {
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(c, &tr));
    mt_test_curve got = mt_test_steps(tr, STEPS);
    if (p) *p = mt_test_params_of(tr);
    mt_trainer_free(tr);
    return got;
}

/* The model m on each mesh against one device. */
static void meshes_equal_one_device(const char *path, const mt_llama_config *m,
                                    const char *const *meshes, const bool *sp) {
    mt_train_config c = mt_test_config(MT_MODEL_LLAMA, path);
    c.data = path;
    c.T = 16;
    MT_TEST_MODEL_CONFIG(&c, m);
    mt_test_params one;
    mt_test_curve want = run_steps(&c, &one);
    MT_CHECK(want.loss[STEPS - 1] < want.loss[0], "training lowers the loss");
    for (int i = 0; meshes[i]; i++) {
        mt_train_config d = c;
        d.mesh = meshes[i];
        d.sequence_parallel = sp[i];
        mt_test_params p;
        mt_test_curve got = run_steps(&d, &p);
        for (int s = 0; s < STEPS; s++)
            MT_CHECK_CLOSE(got.loss[s], want.loss[s], 1e-5, "%s on %s%s: loss at step %d",
                           mt_rope_scaling_name(m->rope_scaling.kind), meshes[i],
                           sp[i] ? " sp" : "", s + 1);
        int split = 0;
        double worst = mt_test_params_diff(&p, &one, &split);
        MT_CHECK(worst < 1e-4, "%s on %s: parameters differ by %g",
                 mt_rope_scaling_name(m->rope_scaling.kind), meshes[i], worst);
        fprintf(stderr, "  %s on %s%s: loss %.4f -> %.4f, parameters within %.2g\n",
                mt_rope_scaling_name(m->rope_scaling.kind), meshes[i], sp[i] ? " sp" : "",
                got.loss[0], got.loss[STEPS - 1], worst);
        free(p.params);
    }
    free(one.params);
}

MT_TEST(llama_with_scaling_trains_alike_on_meshes) {
    char path[] = "/tmp/mt_test_rope_scaling_XXXXXX";
    mt_test_write_text(path);
    const char *const meshes[] = {"data=2", "tensor=2", "tensor=2", "context=2", NULL};
    const bool sp[] = {false, false, true, false};
    const mt_llama_config l3 = scaled_llama(MT_ROPE_SCALING_LLAMA3);
    meshes_equal_one_device(path, &l3, meshes, sp);
    const char *const yarn_meshes[] = {"tensor=2", NULL};
    const mt_llama_config yarn = scaled_llama(MT_ROPE_SCALING_YARN);
    meshes_equal_one_device(path, &yarn, yarn_meshes, sp + 2);

    /* the scaling is in the model: the runs differ from an unscaled one
     * after the first update (the first loss too, as the angles differ) */
    const mt_llama_config plain = scaled_llama(MT_ROPE_SCALING_NONE);
    mt_train_config c = mt_test_config(MT_MODEL_LLAMA, path);
    c.data = path;
    c.T = 16;
    MT_TEST_MODEL_CONFIG(&c, &plain);
    mt_test_curve a = run_steps(&c, NULL);
    MT_TEST_MODEL_CONFIG(&c, &l3);
    mt_test_curve b = run_steps(&c, NULL);
    MT_CHECK(a.loss[STEPS - 1] != b.loss[STEPS - 1], "llama3 scaling trains as none does");
    unlink(path);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
