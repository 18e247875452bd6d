/*
 * test_llama_ops.c — the LLaMA family's ops (rmsnorm, rope, swiglu,
 * grouped-query attention) through the graph, each against an independent
 * naive implementation in double written here:
 *
 *  - the forward output against the double reference (rope at positions
 *    past 1000; attention for KV = NH, 1 < KV < NH and KV = 1);
 *  - every input's gradient of loss = Σ out ⊙ r (r a fixed random
 *    cotangent, given through seed_from_caller) against central finite
 *    differences of the double reference's loss, in double;
 *  - partitioned programs (a small LLaMA block over tensor=2 with the kv
 *    heads split and replicated; rows split over T through rmsnorm and
 *    rope) against the same program on one device.
 *
 * The sharding rules are checked against a hand table in test_rules.c
 * (rules_of_llama_ops).
 */
#include "meshtrain.h"
#include "harness.h"
#include "part_helpers.h"
#include "ops/kernels.h"   /* the attention kernel's ranges, split as threads split them */

/* ======================================================================== */
/* The references, in double                                                 */
/* ======================================================================== */

static void ref_rmsnorm(double *out, const double *x, const double *w, int64_t rows, int64_t C,
                        double eps) {
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t c = 0; c < C; c++) ss += x[r * C + c] * x[r * C + c];
        double rs = 1.0 / sqrt(ss / (double)C + eps);
        for (int64_t c = 0; c < C; c++) out[r * C + c] = x[r * C + c] * rs * w[c];
    }
}

/* llama2.c's run.c: in each head, the pair (i, i+1), i even, rotated by
 * pos / theta^(i/HS) */
static void ref_rope(double *out, const double *x, int64_t B, int64_t T, int64_t NH, int64_t HS,
                     double theta, int64_t pos0) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t c = 0; c < NH * HS; c += 2) {
                int64_t head_dim = c % HS, o = (b * T + t) * NH * HS + c;
                double angle = (double)(pos0 + t) / pow(theta, (double)head_dim / (double)HS);
                double x0 = x[o], x1 = x[o + 1];
                out[o] = x0 * cos(angle) - x1 * sin(angle);
                out[o + 1] = x0 * sin(angle) + x1 * cos(angle);
            }
}

static void ref_swiglu(double *out, const double *a, const double *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = a[i] / (1.0 + exp(-a[i])) * b[i];
}

/* causal attention, query head h reading kv head h / (NH/KV) */
static void ref_gqa(double *out, const double *q, const double *k, const double *v, int64_t B,
                    int64_t T, int64_t NH, int64_t KV, int64_t HS) {
    double *s = malloc((size_t)T * sizeof *s);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < NH; h++) {
            int64_t j = h / (NH / KV);
            for (int64_t t = 0; t < T; t++) {
                const double *qt = q + (b * T + t) * NH * HS + h * HS;
                double mx = -INFINITY, sum = 0;
                for (int64_t u = 0; u <= t; u++) {
                    const double *ku = k + (b * T + u) * KV * HS + j * HS;
                    double d = 0;
                    for (int64_t i = 0; i < HS; i++) d += qt[i] * ku[i];
                    s[u] = d / sqrt((double)HS);
                    if (s[u] > mx) mx = s[u];
                }
                for (int64_t u = 0; u <= t; u++) sum += (s[u] = exp(s[u] - mx));
                for (int64_t i = 0; i < HS; i++) {
                    double o = 0;
                    for (int64_t u = 0; u <= t; u++)
                        o += s[u] / sum * v[(b * T + u) * KV * HS + j * HS + i];
                    out[(b * T + t) * NH * HS + h * HS + i] = o;
                }
            }
        }
    free(s);
}

/* ======================================================================== */
/* One op against its reference                                              */
/* ======================================================================== */

#define MAX_IN 3

/* An op case: its inputs (activations, made data-dependent as x = ones ⊙ p
 * so their gradients are B work, or weights, W work), how the graph builds
 * it, and how the reference computes it. */
typedef struct op_case op_case;
struct op_case {
    const char *name;
    int         n_in;
    int         ndim[MAX_IN];
    int64_t     shape[MAX_IN][4];
    bool        weight[MAX_IN];
    double      scale[MAX_IN];   /* the inputs' spread */
    int64_t     p[6];            /* the op's parameters, as each op reads them */
    double      fp;              /* a float parameter (eps, theta) */
    mt_tensor *(*build)(mt_graph *g, const op_case *c, mt_tensor **in);
    void       (*ref)(const op_case *c, double *out, double *const *in);
};

static int64_t numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

/* Σ ref(in) ⊙ r */
static double ref_loss(const op_case *c, double *const *in, const double *r, double *out,
                       int64_t n_out) {
    c->ref(c, out, in);
    double L = 0;
    for (int64_t i = 0; i < n_out; i++) L += out[i] * r[i];
    return L;
}

static void check_op(const op_case *c, double fwd_tol, double grad_tol) {
    mt_graph *g = mt_graph_create();
    mt_tensor *in[MAX_IN], *p[MAX_IN], *ones[MAX_IN] = {0};
    for (int k = 0; k < c->n_in; k++) {
        char name[32];
        snprintf(name, sizeof name, "p%d", k);
        p[k] = mt_param(g, name, c->ndim[k], c->shape[k], (mt_init){MT_INIT_NORMAL, 1.0f});
        if (c->weight[k]) {
            in[k] = p[k];
        } else {
            snprintf(name, sizeof name, "ones%d", k);
            ones[k] = mt_input(g, name, MT_F32, c->ndim[k], c->shape[k]);
            in[k] = mt_mul(g, ones[k], p[k]);
        }
    }
    mt_tensor *out = c->build(g, c, in);
    MT_CHECK(out, "%s: building failed: %s", c->name, mt_graph_errmsg(g));
    mt_compile_opts opts = {.seed = 1, .seed_from_caller = true};
    MT_CHECK_OK(mt_graph_compile(g, out, &opts));

    /* the inputs' values, float and double */
    double *din[MAX_IN];
    int64_t n_in[MAX_IN];
    for (int k = 0; k < c->n_in; k++) {
        n_in[k] = numel(c->ndim[k], c->shape[k]);
        din[k] = malloc((size_t)n_in[k] * sizeof(double));
        float *f = mt_tensor_f32(p[k]);
        for (int64_t i = 0; i < n_in[k]; i++) {
            f[i] = (float)(c->scale[k] * mt_rng_normal(7, (uint64_t)k, (uint64_t)i));
            din[k][i] = f[i];
        }
        if (ones[k]) {
            float *o = mt_tensor_f32(ones[k]);
            for (int64_t i = 0; i < n_in[k]; i++) o[i] = 1.0f;
        }
    }
    int64_t n_out = mt_tensor_numel(out);
    double *want = malloc((size_t)n_out * sizeof *want), *r = malloc((size_t)n_out * sizeof *r);
    for (int64_t i = 0; i < n_out; i++) r[i] = mt_rng_normal(9, 1, (uint64_t)i);

    /* forward */
    MT_CHECK_OK(mt_graph_forward(g));
    c->ref(c, want, din);
    const float *got = mt_tensor_f32(out);
    for (int64_t i = 0; i < n_out; i++)
        MT_CHECK_CLOSE(got[i], want[i], fwd_tol, "%s: out[%lld]", c->name, (long long)i);

    /* backward from the cotangent r */
    float *seed = mt_tensor_f32(mt_tensor_grad(out));
    for (int64_t i = 0; i < n_out; i++) seed[i] = (float)r[i];
    MT_CHECK_OK(mt_graph_backward_b(g));
    MT_CHECK_OK(mt_graph_backward_w(g));
    for (int k = 0; k < c->n_in; k++) {
        const float *grad = mt_tensor_f32(mt_tensor_grad(p[k]));
        int64_t stride = n_in[k] > 64 ? n_in[k] / 64 + 1 : 1;   /* sample big inputs */
        for (int64_t i = 0; i < n_in[k]; i += stride) {
            double keep = din[k][i], h = 1e-5 * (1 + fabs(keep));
            din[k][i] = keep + h;
            double lp = ref_loss(c, din, r, want, n_out);
            din[k][i] = keep - h;
            double lm = ref_loss(c, din, r, want, n_out);
            din[k][i] = keep;
            double num = (lp - lm) / (2 * h);
            MT_CHECK(fabs(grad[i] - num) <= grad_tol * (1 + fabs(num)),
                     "%s: d loss / d in%d[%lld]: graph %.8g, finite differences %.8g", c->name,
                     k, (long long)i, grad[i], num);
        }
    }
    for (int k = 0; k < c->n_in; k++) free(din[k]);
    free(want);
    free(r);
    mt_graph_free(g);
}

/* ---- rmsnorm ---------------------------------------------------------------- */

static mt_tensor *build_rmsnorm(mt_graph *g, const op_case *c, mt_tensor **in) {
    return mt_rmsnorm(g, in[0], in[1], (float)c->fp);
}
static void run_rmsnorm(const op_case *c, double *out, double *const *in) {
    int64_t C = c->shape[0][c->ndim[0] - 1];
    ref_rmsnorm(out, in[0], in[1], numel(c->ndim[0], c->shape[0]) / C, C, (double)(float)c->fp);
}

MT_TEST(rmsnorm_forward_and_gradients) {
    /* C = 40: the vector loops' 16-lane blocks and their tail */
    op_case c = {.name = "rmsnorm", .n_in = 2, .ndim = {3, 1}, .shape = {{2, 3, 40}, {40}},
                 .weight = {false, true}, .scale = {1.5, 1.0}, .fp = 1e-5,
                 .build = build_rmsnorm, .ref = run_rmsnorm};
    check_op(&c, 1e-5, 1e-4);
    /* a small row, where eps counts */
    op_case d = c;
    d.shape[0][2] = d.shape[1][0] = 5;
    d.scale[0] = 0.01;
    d.fp = 1e-3;
    check_op(&d, 1e-5, 1e-4);
}

/* ---- rope ------------------------------------------------------------------- */

/* p: B, T, NH, HS, pos0 */
static mt_tensor *build_rope(mt_graph *g, const op_case *c, mt_tensor **in) {
    return mt_rope(g, in[0], (int)c->p[2], (float)c->fp, c->p[4]);
}
static void run_rope(const op_case *c, double *out, double *const *in) {
    ref_rope(out, in[0], c->p[0], c->p[1], c->p[2], c->p[3], (double)(float)c->fp, c->p[4]);
}

static op_case rope_case(int64_t B, int64_t T, int64_t NH, int64_t HS, int64_t pos0, double theta) {
    op_case c = {.name = "rope", .n_in = 1, .ndim = {3}, .shape = {{B, T, NH * HS}},
                 .scale = {1.0}, .p = {B, T, NH, HS, pos0}, .fp = theta,
                 .build = build_rope, .ref = run_rope};
    return c;
}

MT_TEST(rope_forward_and_gradients) {
    /* positions 1500..1506 past 1000, and from 0; Llama 3's theta; 3 heads of
     * 6 (an odd number of pairs), one of 2 */
    op_case cases[] = {rope_case(2, 7, 3, 6, 1500, 10000), rope_case(2, 5, 2, 8, 0, 10000),
                       rope_case(1, 4, 2, 16, 1500, 500000), rope_case(3, 3, 1, 2, 4000, 10000)};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_op(&cases[i], 1e-5, 1e-4);
}

/* A long head (HS = 200: the angle buffer's chunks of 64 pairs) at a far
 * position against the reference, forward only. */
MT_TEST(rope_long_head_far_position) {
    op_case c = rope_case(1, 3, 2, 200, 60000, 10000);
    check_op(&c, 1e-5, 1e-3);
}

/* ---- swiglu ----------------------------------------------------------------- */

static mt_tensor *build_swiglu(mt_graph *g, const op_case *c, mt_tensor **in) {
    (void)c;
    return mt_swiglu(g, in[0], in[1]);
}
static void run_swiglu(const op_case *c, double *out, double *const *in) {
    ref_swiglu(out, in[0], in[1], numel(c->ndim[0], c->shape[0]));
}

MT_TEST(swiglu_forward_and_gradients) {
    /* 3·37 elements: whole vectors and a tail at every level; a spread of 4
     * reaches where σ saturates */
    op_case c = {.name = "swiglu", .n_in = 2, .ndim = {2, 2}, .shape = {{3, 37}, {3, 37}},
                 .scale = {4.0, 1.0}, .build = build_swiglu, .ref = run_swiglu};
    check_op(&c, 1e-5, 1e-4);
}

/* ---- grouped-query attention -------------------------------------------------- */

/* p: B, T, NH, KV, HS */
static mt_tensor *build_gqa(mt_graph *g, const op_case *c, mt_tensor **in) {
    return mt_attention_gqa(g, in[0], in[1], in[2], (int)c->p[2], (int)c->p[3]);
}
static void run_gqa(const op_case *c, double *out, double *const *in) {
    ref_gqa(out, in[0], in[1], in[2], c->p[0], c->p[1], c->p[2], c->p[3], c->p[4]);
}

static op_case gqa_case(int64_t B, int64_t T, int64_t NH, int64_t KV, int64_t HS, bool kv_weights) {
    op_case c = {.name = "attention_gqa", .n_in = 3, .ndim = {3, 3, 3},
                 .shape = {{B, T, NH * HS}, {B, T, KV * HS}, {B, T, KV * HS}},
                 .weight = {false, false, kv_weights}, .scale = {1.0, 1.0, 1.0},
                 .p = {B, T, NH, KV, HS}, .build = build_gqa, .ref = run_gqa};
    return c;
}

MT_TEST(attention_gqa_forward_and_gradients) {
    /* KV = NH, 1 < KV < NH, KV = 1; v a weight once (its gradient in W) */
    op_case cases[] = {gqa_case(2, 5, 4, 4, 4, false), gqa_case(2, 5, 4, 2, 4, false),
                       gqa_case(2, 6, 6, 1, 4, false), gqa_case(1, 7, 6, 3, 2, true)};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_op(&cases[i], 1e-5, 2e-4);
}

/* T past one row block of the kernel (64) so the blocked products and the
 * diagonal blocks are exercised with shared kv heads; forward and a sample
 * of the gradients. */
MT_TEST(attention_gqa_long_sequence) {
    op_case c = gqa_case(1, 70, 4, 2, 8, false);
    check_op(&c, 1e-5, 2e-4);
}

/* The GPT's packed attention is the KV = NH case of the same kernel: the
 * same q, k, v through mt_attention (qkv packed) and mt_attention_gqa give
 * the same output bit for bit. */
MT_TEST(attention_gqa_equals_packed_when_kv_is_nh) {
    enum { B = 2, T = 9, NH = 3, HS = 4, C = NH * HS };
    mt_graph *g = mt_graph_create();
    mt_init init = {MT_INIT_ZEROS, 0};
    mt_tensor *qkv = mt_param(g, "qkv", 3, (int64_t[]){B, T, 3 * C}, init);
    mt_tensor *q = mt_param(g, "q", 3, (int64_t[]){B, T, C}, init);
    mt_tensor *k = mt_param(g, "k", 3, (int64_t[]){B, T, C}, init);
    mt_tensor *v = mt_param(g, "v", 3, (int64_t[]){B, T, C}, init);
    /* the difference, kept after the forward as a caller-seeded result */
    mt_tensor *diff = mt_sub(g, mt_attention(g, qkv, NH), mt_attention_gqa(g, q, k, v, NH, NH));
    MT_CHECK(diff, "%s", mt_graph_errmsg(g));
    MT_CHECK_OK(mt_graph_compile(g, diff, &(mt_compile_opts){.seed = 1, .seed_from_caller = true}));
    float *pk = mt_tensor_f32(qkv), *s[3] = {mt_tensor_f32(q), mt_tensor_f32(k), mt_tensor_f32(v)};
    for (int64_t r = 0; r < B * T; r++)
        for (int w = 0; w < 3; w++)
            for (int64_t c = 0; c < C; c++)
                s[w][r * C + c] = pk[r * 3 * C + w * C + c] =
                    mt_rng_normal(3, (uint64_t)w, (uint64_t)(r * C + c));
    MT_CHECK_OK(mt_graph_forward(g));
    const float *d = mt_tensor_f32(diff);
    for (int64_t i = 0; i < B * T * C; i++)
        MT_CHECK(d[i] == 0.0f, "out[%lld]: attention_gqa with KV = NH differs from the packed "
                 "attention by %g", (long long)i, d[i]);
    mt_graph_free(g);
}

MT_TEST(llama_ops_refuse_bad_operands) {
    mt_graph *g = mt_graph_create();
    mt_tensor *x = mt_input(g, "x", MT_F32, 3, (int64_t[]){2, 4, 12});
    mt_tensor *kv = mt_input(g, "kv", MT_F32, 3, (int64_t[]){2, 4, 8});
    MT_CHECK(!mt_attention_gqa(g, x, kv, kv, 3, 2), "KV=2 does not divide NH=3");
    MT_CHECK(strstr(mt_graph_errmsg(g), "KV=2") && strstr(mt_graph_errmsg(g), "NH=3"), "%s",
             mt_graph_errmsg(g));
    mt_graph_free(g);
    g = mt_graph_create();
    x = mt_input(g, "x", MT_F32, 3, (int64_t[]){2, 4, 12});
    MT_CHECK(!mt_rope(g, x, 4, 10000.0f, 0), "HS=3 is odd");
    MT_CHECK(strstr(mt_graph_errmsg(g), "even"), "%s", mt_graph_errmsg(g));
    mt_graph_free(g);
    g = mt_graph_create();
    x = mt_input(g, "x", MT_F32, 3, (int64_t[]){2, 4, 12});
    mt_tensor *w = mt_param(g, "w", 1, (int64_t[]){8}, (mt_init){MT_INIT_ONES, 0});
    MT_CHECK(!mt_rmsnorm(g, x, w, 1e-5f), "w (8) against C = 12");
    MT_CHECK(strstr(mt_graph_errmsg(g), "(12)"), "%s", mt_graph_errmsg(g));
    mt_graph_free(g);
}

/* ======================================================================== */
/* Partitioned: the same run as one device                                   */
/* ======================================================================== */

enum { PB = 2, PT = 8, PC = 16, PF = 24, N_PARAMS = 9, MAX_DEV = 4, MAX_P = PF * PC };

/* A LLaMA block: x + attention_gqa(rope(q), rope(k), v) · wo, then + the
 * SwiGLU MLP, each after an rmsnorm; the mse against y. */
static const char *const PARAMS[N_PARAMS] = {"wn", "wq", "wk", "wv", "wo", "wn2", "w1", "w3", "w2"};

typedef struct {
    const char *mesh;            /* NULL: one device */
    int         devices;
    int         NH, KV, HS;
    bool        rows;            /* x, y split over T (tensor), weights replicated */
    mt_remat    remat;           /* activation checkpointing of the block */
    float       loss;
    float       grad[MAX_DEV][N_PARAMS][MAX_P];   /* each device's local gradients */
    mt_status   status;
    char        msg[512];
} part_case;

static void param_shape(const part_case *pc, int k, int64_t *s) {
    int64_t q = pc->NH * pc->HS, kv = pc->KV * pc->HS;
    const int64_t shapes[N_PARAMS][2] = {{PC, 1}, {q, PC}, {kv, PC}, {kv, PC}, {PC, q},
                                         {PC, 1}, {PF, PC}, {PF, PC}, {PC, PF}};
    s[0] = shapes[k][0];
    s[1] = shapes[k][1];
}

/* Megatron's: q, k, v and the MLP's first products column-parallel, the
 * outputs row-parallel; k and v replicated where KV does not divide. */
static const char *param_spec(const part_case *pc, int k, int n) {
    if (pc->rows || !pc->mesh) return "";
    static const char *const SPEC[N_PARAMS] = {"", "tensor", "tensor", "tensor", "_,tensor",
                                               "", "tensor", "tensor", "_,tensor"};
    if ((k == 2 || k == 3) && pc->KV % n != 0) return "";
    return SPEC[k];
}

static mt_tensor *block(mt_graph *g, const part_case *pc) {
    int64_t xs[3] = {PB, PT, PC}, ps[2];
    mt_tensor *x = mt_input(g, "x", MT_F32, 3, xs), *y = mt_input(g, "y", MT_F32, 3, xs);
    mt_tensor *w[N_PARAMS];
    for (int k = 0; k < N_PARAMS; k++) {
        param_shape(pc, k, ps);
        bool norm = k == 0 || k == 5;
        w[k] = mt_param(g, PARAMS[k], norm ? 1 : 2, ps,
                        norm ? (mt_init){MT_INIT_ONES, 0} : (mt_init){MT_INIT_NORMAL, 0.3f});
    }
    mt_graph_set_block(g, 0);
    mt_tensor *h = mt_rmsnorm(g, x, w[0], 1e-5f);
    mt_tensor *q = mt_rope(g, mt_linear(g, h, w[1], NULL), pc->NH, 10000.0f, 1500);
    mt_tensor *k = mt_rope(g, mt_linear(g, h, w[2], NULL), pc->KV, 10000.0f, 1500);
    mt_tensor *v = mt_linear(g, h, w[3], NULL);
    mt_tensor *a = mt_attention_gqa(g, q, k, v, pc->NH, pc->KV);
    mt_tensor *r1 = mt_add(g, x, mt_linear(g, a, w[4], NULL));
    mt_tensor *h2 = mt_rmsnorm(g, r1, w[5], 1e-5f);
    mt_tensor *m = mt_swiglu(g, mt_linear(g, h2, w[6], NULL), mt_linear(g, h2, w[7], NULL));
    mt_tensor *out = mt_add(g, r1, mt_linear(g, m, w[8], NULL));
    mt_graph_set_block(g, -1);
    return mt_mse(g, out, y, 1.0f / (PB * PT * PC));
}

/* this device's first index of a dim split over the axes of `set` */
static int64_t first_index(mt_ctx *ctx, uint32_t set, int64_t local) {
    mt_axes ax = {0};
    for (int a = 0; a < mt_mesh_ndim(mt_ctx_mesh(ctx)); a++)
        if (set & (1u << a)) ax.axis[ax.n++] = (uint8_t)a;
    return ax.n ? (int64_t)mt_axis_index(ctx, ax) * local : 0;
}

static mt_status part_device(mt_ctx *ctx, void *arg) {
    part_case *pc = arg;
    mt_graph *g = mt_graph_create(), *local = g;
    mt_tensor *loss = block(g, pc), *lloss = loss;
    mt_status s = mt_graph_status(g);
    mt_sharding rows = {{0}, 0};
    if (ctx) {
        const mt_mesh *mesh = mt_ctx_mesh(ctx);
        int n = mt_mesh_axis_size(mesh, "tensor");
        for (int k = 0; k < N_PARAMS && s == MT_OK; k++) {
            mt_tensor *p = mt_graph_find(g, PARAMS[k]);
            mt_sharding sh;
            s = mt_sharding_parse(mesh, param_spec(pc, k, n), mt_tensor_ndim(p), &sh);
            if (s == MT_OK) s = mt_tensor_set_sharding(p, &sh);
        }
        if (s == MT_OK) s = mt_sharding_parse(mesh, pc->rows ? "_,tensor" : "", 3, &rows);
        for (int k = 0; k < 2 && s == MT_OK; k++)
            s = mt_tensor_set_sharding(mt_graph_find(g, k ? "y" : "x"), &rows);
        mt_partition_opts po = {.mode = MT_SHARD_AUTO};
        if (s == MT_OK) s = mt_partition(g, loss, ctx, &po, &local, &lloss);
    }
    if (s == MT_OK) s = mt_graph_compile(local, lloss, &(mt_compile_opts){.seed = 3, .remat = pc->remat});
    for (int k = 0; k < 2 && s == MT_OK; k++) {
        mt_tensor *t = mt_graph_find(local, k ? "y" : "x");
        int64_t T = mt_tensor_dim(t, 1), t0 = ctx ? first_index(ctx, rows.dim_axes[1], T) : 0;
        float *d = mt_tensor_f32(t);
        for (int64_t b = 0; b < PB; b++)
            for (int64_t i = 0; i < T; i++)
                for (int64_t c = 0; c < PC; c++)
                    d[(b * T + i) * PC + c] =
                        mt_rng_normal(11, (uint64_t)k, (uint64_t)((b * PT + t0 + i) * PC + c));
    }
    int dev = ctx ? mt_ctx_device(ctx) : 0;
    return mt_test_step_grads(s, g, local, dev, PARAMS, N_PARAMS, pc->grad[dev][0], MAX_P,
                              &pc->loss, pc->msg, sizeof pc->msg);
}

static void part_run(part_case *pc) {
    pc->status = mt_test_run_devices(pc->mesh, pc->devices, part_device, pc, pc->msg,
                                     sizeof pc->msg);
}

/* Each device's shard of each parameter's gradient against the one-device
 * gradient's block at the device's tensor index. */
static void check_part(const part_case *got, const part_case *one, const char *what) {
    MT_CHECK(got->status == MT_OK, "%s: %s", what, got->msg);
    MT_CHECK_CLOSE(got->loss, one->loss, 1e-5, "%s: loss", what);
    int n = got->devices;
    for (int dev = 0; dev < n; dev++)
        for (int k = 0; k < N_PARAMS; k++) {
            int64_t s[2];
            param_shape(got, k, s);
            const char *spec = param_spec(got, k, n);
            bool split0 = strcmp(spec, "tensor") == 0, split1 = strcmp(spec, "_,tensor") == 0;
            int64_t r = split0 ? s[0] / n : s[0], c = split1 ? s[1] / n : s[1];
            for (int64_t i = 0; i < r; i++)
                for (int64_t j = 0; j < c; j++) {
                    int64_t gi = split0 ? dev * r + i : i, gj = split1 ? dev * c + j : j;
                    MT_CHECK_CLOSE(got->grad[dev][k][i * c + j], one->grad[0][k][gi * s[1] + gj],
                                   1e-4, "%s: device %d: d %s[%lld,%lld]", what, dev, PARAMS[k],
                                   (long long)gi, (long long)gj);
                }
        }
}

MT_TEST(partitioned_llama_block_equals_one_device) {
    static const struct { const char *mesh; int n, NH, KV, HS; bool rows; } CASES[] = {
        {"tensor=2", 2, 4, 2, 4, false},   /* kv heads split with the query heads */
        {"tensor=2", 2, 4, 4, 4, false},   /* multi-head */
        {"tensor=2", 2, 4, 1, 4, false},   /* multi-query: k, v replicated */
        {"tensor=4", 4, 4, 2, 4, false},   /* one query head a device, two share a kv head */
        {"tensor=2", 2, 6, 3, 2, false},   /* a device's heads straddle kv heads */
        {"tensor=2", 2, 4, 2, 4, true},    /* rows split over T: rmsnorm, rope on T/2 */
    };
    static part_case one, got;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        memset(&one, 0, sizeof one);
        one = (part_case){.devices = 1, .NH = CASES[i].NH, .KV = CASES[i].KV, .HS = CASES[i].HS};
        part_run(&one);
        MT_CHECK(one.status == MT_OK, "one device: %s", one.msg);
        memset(&got, 0, sizeof got);
        got = (part_case){.mesh = CASES[i].mesh, .devices = CASES[i].n, .NH = CASES[i].NH,
                          .KV = CASES[i].KV, .HS = CASES[i].HS, .rows = CASES[i].rows};
        part_run(&got);
        char what[128];
        snprintf(what, sizeof what, "mesh %s, NH=%d KV=%d%s", CASES[i].mesh, CASES[i].NH,
                 CASES[i].KV, CASES[i].rows ? ", rows split over T" : "");
        check_part(&got, &one, what);
    }
}

/* The backward's (batch, kv head) groups split in two (as two threads would
 * run them) give the whole range's dq, dk, dv bit for bit: the query heads
 * that share a kv head add into it in one order, inside one group. */
MT_TEST(attention_gqa_backward_split_is_bitwise) {
    enum { B = 2, T = 11, NH = 6, KV = 2, HS = 4, NQ = B * T * NH * HS, NK = B * T * KV * HS };
    static float q[NQ], k[NK], v[NK], out[NQ], dout[NQ], att[B * NH * T], scratch[1 << 17];
    MT_CHECK(mt_kernel_attention_scratch(T, HS) <= 1 << 17, "attention scratch %zu floats",
             mt_kernel_attention_scratch(T, HS));
    static float d1[2][NQ + 2 * NK], d2[2][NQ + 2 * NK];
    for (int i = 0; i < NQ; i++) q[i] = mt_rng_normal(1, 0, i), dout[i] = mt_rng_normal(1, 1, i);
    for (int i = 0; i < NK; i++) k[i] = mt_rng_normal(1, 2, i), v[i] = mt_rng_normal(1, 3, i);
    mt_attn_layout L = {.B = B, .T = T, .NH = NH, .KV = KV, .HS = HS, .G = NH / KV,
                        .ldq = NH * HS, .ldk = KV * HS, .ldv = KV * HS, .ldo = NH * HS};
    mt_kernel_attention_fwd(out, att, q, k, v, &L, scratch, 0, B * NH);
    for (int acc = 0; acc < 2; acc++) {
        for (int i = 0; i < NQ + 2 * NK; i++) d1[acc][i] = d2[acc][i] = (float)i;
        float *a = d1[acc], *b = d2[acc];
        mt_attn_grads whole = {a, a + NQ, a + NQ + NK, acc, acc};
        mt_attn_grads part = {b, b + NQ, b + NQ + NK, acc, acc};
        mt_kernel_attention_bwd(&whole, dout, q, k, v, out, att, &L, scratch, 0, B * KV);
        mt_kernel_attention_bwd(&part, dout, q, k, v, out, att, &L, scratch, 3, B * KV);
        mt_kernel_attention_bwd(&part, dout, q, k, v, out, att, &L, scratch, 0, 3);
        MT_CHECK(memcmp(a, b, sizeof d1[0]) == 0, "acc=%d: a split of the groups changes the "
                 "gradients", acc);
    }
}

/* Activation checkpointing re-runs the block's rmsnorms, ropes and swiglu
 * (LOCAL) and attention_gqa (SAVES_AUX: under ATTENTION only its
 * log-sum-exp): losses and gradients bitwise those of no remat. */
MT_TEST(remat_of_llama_ops_is_bitwise) {
    static part_case none, got;
    memset(&none, 0, sizeof none);
    none = (part_case){.devices = 1, .NH = 4, .KV = 2, .HS = 4};
    part_run(&none);
    MT_CHECK(none.status == MT_OK, "no remat: %s", none.msg);
    const mt_remat policies[3] = {MT_REMAT_FULL, MT_REMAT_ATTENTION, MT_REMAT_DOTS};
    for (int i = 0; i < 3; i++) {
        memset(&got, 0, sizeof got);
        got = (part_case){.devices = 1, .NH = 4, .KV = 2, .HS = 4, .remat = policies[i]};
        part_run(&got);
        MT_CHECK(got.status == MT_OK, "remat %s: %s", mt_remat_name(policies[i]), got.msg);
        MT_CHECK(got.loss == none.loss && memcmp(got.grad[0], none.grad[0], sizeof got.grad[0]) == 0,
                 "remat %s changes the loss or the gradients", mt_remat_name(policies[i]));
    }
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
