/*
 * test_kernels.c — every compute kernel of src/ops/kernels.h against an
 * independent reference written here.
 *
 * Forward kernels are compared with naive loops in double. Every backward
 * kernel is compared with central finite differences in double: the test
 * writes the op's forward in double, takes the scalar loss Σ w_i·out_i with
 * random w (so dout = w), perturbs each input element by ±eps and compares
 * (L(x+eps) - L(x-eps))/2eps with the kernel's gradient. Sizes are chosen so
 * the kernels' 16-wide blocks and their scalar tails both run. Attention at
 * lengths where differences would take minutes (its 64-row blocks) is
 * compared with a double backward through the full softmax Jacobian instead,
 * and splitting its (batch, head) pairs must give the same bits. Each case also
 * checks that acc=false overwrites (the output starts as NaN) and acc=true
 * adds onto what is there. The optimizers are checked against the formula of
 * kernels.h evaluated by hand in double.
 */
#include "harness.h"
#include "ops/kernels.h"

#include <float.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- helpers ---------------------------------------------------------------- */

/* xorshift64*: deterministic, and each case runs in its own process, so
 * every case sees the same sequence whatever ran before it. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static double rnd(void) {   /* uniform in [-1, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t r = rng_state * 0x2545F4914F6CDD1Dull;
    return (double)(r >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static float *fvec(int64_t n) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    MT_CHECK(p != NULL, "out of memory for %lld floats", (long long)n);
    return p;
}

static float *frand(int64_t n, double scale) {
    float *p = fvec(n);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(scale * rnd());
    return p;
}

static void ffill(float *p, int64_t n, float v) {
    for (int64_t i = 0; i < n; i++) p[i] = v;
}

static double *dcopy(const float *x, int64_t n) {
    double *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    MT_CHECK(p != NULL, "out of memory for %lld doubles", (long long)n);
    for (int64_t i = 0; i < n; i++) p[i] = (double)x[i];
    return p;
}

static float *fcopy(const float *x, int64_t n) {
    float *p = fvec(n);
    memcpy(p, x, (size_t)n * sizeof *p);
    return p;
}

/* A scalar loss of double inputs; the inputs live in ctx, and check_fd
 * perturbs them in place through x. */
typedef double (*loss_fn)(const void *ctx);

/* grad (n) against central differences of f with respect to x (n). */
static void check_fd(const char *what, double *x, int64_t n, const float *grad, loss_fn f,
                     const void *ctx, double tol) {
    const double eps = 1e-5;
    for (int64_t i = 0; i < n; i++) {
        double save = x[i];
        x[i] = save + eps;
        double lp = f(ctx);
        x[i] = save - eps;
        double lm = f(ctx);
        x[i] = save;
        double num = (lp - lm) / (2 * eps);
        MT_CHECK_CLOSE(grad[i], num, tol, "%s: d(loss)/d[%lld]", what, (long long)i);
    }
}

/* got (n) == base (n) + add (n), the acc=true contract. */
static void check_added(const char *what, const float *got, const float *base, const float *add,
                        int64_t n, double tol) {
    for (int64_t i = 0; i < n; i++)
        MT_CHECK_CLOSE(got[i], (double)base[i] + (double)add[i], tol,
                       "%s with acc=true at %lld", what, (long long)i);
}

/* ---- gemm, bias ------------------------------------------------------------- */

static void gemm_case(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t pad,
                      float alpha, float beta) {
    const int64_t lda = (ta ? M : K) + pad, arows = ta ? K : M;
    const int64_t ldb = (tb ? K : N) + pad, brows = tb ? N : K;
    const int64_t ldc = N + pad;
    float *A = frand(arows * lda, 1.0), *B = frand(brows * ldb, 1.0);
    float *Cm = frand(M * ldc, 1.0);
    /* padding holds NaN in A and B (reading it would show) and a sentinel in C */
    for (int64_t r = 0; r < arows; r++) for (int64_t c = lda - pad; c < lda; c++) A[r * lda + c] = NAN;
    for (int64_t r = 0; r < brows; r++) for (int64_t c = ldb - pad; c < ldb; c++) B[r * ldb + c] = NAN;
    for (int64_t r = 0; r < M; r++) for (int64_t c = N; c < ldc; c++) Cm[r * ldc + c] = 12345.0f;
    /* with beta 0, C must not be read: make it NaN */
    if (beta == 0.0f)
        for (int64_t r = 0; r < M; r++) for (int64_t c = 0; c < N; c++) Cm[r * ldc + c] = NAN;
    double *want = dcopy(Cm, M * ldc);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0.0;
            for (int64_t k = 0; k < K; k++) {
                double a = ta ? A[k * lda + i] : A[i * lda + k];
                double b = tb ? B[j * ldb + k] : B[k * ldb + j];
                s += a * b;
            }
            double c0 = beta == 0.0f ? 0.0 : want[i * ldc + j];
            want[i * ldc + j] = alpha * s + beta * c0;
        }
    mt_kernel_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cm, ldc);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldc; j++)
            MT_CHECK_CLOSE(Cm[i * ldc + j], want[i * ldc + j], 1e-5,
                           "gemm ta=%d tb=%d M=%lld N=%lld K=%lld pad=%lld beta=%g: C[%lld,%lld]",
                           ta, tb, (long long)M, (long long)N, (long long)K, (long long)pad,
                           (double)beta, (long long)i, (long long)j);
    free(A); free(B); free(Cm); free(want);
}

MT_TEST(gemm_matches_naive_all_transposes) {
    const int64_t shapes[][3] = {{7, 5, 3}, {33, 17, 65}, {1, 9, 4}, {64, 48, 130}, {5, 1, 1}, {6, 1, 9}, {1, 1, 7}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int pad = 0; pad <= 3; pad += 3) {
                    gemm_case(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], pad, 1.0f, 0.0f);
                    gemm_case(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], pad, 0.5f, 1.0f);
                }
}

MT_TEST(gemm_empty_inner_dimension) {
    /* K = 0 (an empty shard): C = beta·C, with lda = 0 accepted */
    const int64_t M = 3, N = 4;
    float a = 1.0f, b = 1.0f, *Cm = fvec(M * N);
    ffill(Cm, M * N, NAN);
    mt_kernel_gemm(false, false, M, N, 0, 1.0f, &a, 0, &b, N, 0.0f, Cm, N);
    for (int64_t i = 0; i < M * N; i++) MT_CHECK(Cm[i] == 0.0f, "K=0, beta=0: C[%lld] = %g", (long long)i, (double)Cm[i]);
    ffill(Cm, M * N, 2.0f);
    mt_kernel_gemm(true, true, M, N, 0, 1.0f, &a, M, &b, 0, 0.5f, Cm, N);
    for (int64_t i = 0; i < M * N; i++) MT_CHECK(Cm[i] == 1.0f, "K=0, beta=0.5: C[%lld] = %g", (long long)i, (double)Cm[i]);
    free(Cm);
}

MT_TEST(bias_add_and_grad) {
    const int64_t rows = 5, OC = 37;
    float *out = frand(rows * OC, 1.0), *bias = frand(OC, 1.0), *before = fcopy(out, rows * OC);
    mt_kernel_bias_add(out, bias, rows, OC);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < OC; j++)
            MT_CHECK_CLOSE(out[r * OC + j], (double)before[r * OC + j] + bias[j], 1e-6,
                           "bias_add [%lld,%lld]", (long long)r, (long long)j);

    float *dout = frand(rows * OC, 1.0), *db = fvec(OC);
    ffill(db, OC, NAN);
    mt_kernel_bias_grad(db, dout, rows, OC, false);
    float *want = fvec(OC);
    for (int64_t j = 0; j < OC; j++) {
        double s = 0.0;
        for (int64_t r = 0; r < rows; r++) s += dout[r * OC + j];
        want[j] = (float)s;
        MT_CHECK_CLOSE(db[j], s, 1e-6, "bias_grad [%lld]", (long long)j);
    }
    float *base = frand(OC, 1.0), *db2 = fcopy(base, OC);
    mt_kernel_bias_grad(db2, dout, rows, OC, true);
    check_added("bias_grad", db2, base, want, OC, 1e-6);
    free(out); free(bias); free(before); free(dout); free(db); free(want); free(base); free(db2);
}

/* ---- elementwise ------------------------------------------------------------ */

enum { ADD, SUB, MUL };
static const char *const op_name[] = {"add", "sub", "mul"};

static double ref_binary(int op, double a, double b) {
    return op == ADD ? a + b : op == SUB ? a - b : a * b;
}

MT_TEST(binary_forward_broadcast) {
    const int64_t n = 84, nbs[] = {84, 1, 12, 7, 42};
    for (int op = 0; op < 3; op++)
        for (size_t k = 0; k < sizeof nbs / sizeof nbs[0]; k++) {
            const int64_t nb = nbs[k];
            float *a = frand(n, 2.0), *b = frand(nb, 2.0), *out = fvec(n);
            ffill(out, n, NAN);
            if (op == ADD) mt_kernel_add_fwd(out, a, b, n, nb);
            if (op == SUB) mt_kernel_sub_fwd(out, a, b, n, nb);
            if (op == MUL) mt_kernel_mul_fwd(out, a, b, n, nb);
            for (int64_t i = 0; i < n; i++)
                MT_CHECK_CLOSE(out[i], ref_binary(op, a[i], b[i % nb]), 1e-6,
                               "%s nb=%lld at %lld", op_name[op], (long long)nb, (long long)i);
            free(a); free(b); free(out);
        }
}

MT_TEST(scale_overwrites_and_adds) {
    const int64_t n = 37;
    float *a = frand(n, 1.0), *out = fvec(n), *want = fvec(n);
    ffill(out, n, NAN);
    mt_kernel_scale(out, a, -1.5f, n, false);
    for (int64_t i = 0; i < n; i++) {
        want[i] = -1.5f * a[i];
        MT_CHECK_CLOSE(out[i], -1.5 * a[i], 1e-6, "scale at %lld", (long long)i);
    }
    float *base = frand(n, 1.0), *out2 = fcopy(base, n);
    mt_kernel_scale(out2, a, -1.5f, n, true);
    check_added("scale", out2, base, want, n, 1e-6);
    free(a); free(out); free(want); free(base); free(out2);
}

typedef struct { int op; int64_t n, nb; double *a, *b, *w; } binary_ctx;

static double binary_loss(const void *p) {
    const binary_ctx *c = p;
    double L = 0.0;
    for (int64_t i = 0; i < c->n; i++) L += c->w[i] * ref_binary(c->op, c->a[i], c->b[i % c->nb]);
    return L;
}

/* the gradients of a op b with respect to a and b, as the graph computes
 * them from these kernels */
static void binary_grads(int op, float *da, float *db, const float *dout, const float *a,
                         const float *b, int64_t n, int64_t nb, bool acc) {
    if (op == ADD) { mt_kernel_scale(da, dout, 1.0f, n, acc); mt_kernel_reduce_broadcast(db, dout, 1.0f, n, nb, acc); }
    if (op == SUB) { mt_kernel_scale(da, dout, 1.0f, n, acc); mt_kernel_reduce_broadcast(db, dout, -1.0f, n, nb, acc); }
    if (op == MUL) { mt_kernel_mul_bwd_a(da, dout, b, n, nb, acc); mt_kernel_mul_bwd_b(db, dout, a, n, nb, acc); }
}

MT_TEST(binary_backward_broadcast_finite_differences) {
    const int64_t n = 84, nbs[] = {84, 1, 12, 7, 42};
    for (int op = 0; op < 3; op++)
        for (size_t k = 0; k < sizeof nbs / sizeof nbs[0]; k++) {
            const int64_t nb = nbs[k];
            float *a = frand(n, 2.0), *b = frand(nb, 2.0), *w = frand(n, 1.0);
            float *da = fvec(n), *db = fvec(nb);
            ffill(da, n, NAN);
            ffill(db, nb, NAN);
            binary_grads(op, da, db, w, a, b, n, nb, false);
            binary_ctx c = {op, n, nb, dcopy(a, n), dcopy(b, nb), dcopy(w, n)};
            char what[64];
            snprintf(what, sizeof what, "%s nb=%lld da", op_name[op], (long long)nb);
            check_fd(what, c.a, n, da, binary_loss, &c, 1e-5);
            snprintf(what, sizeof what, "%s nb=%lld db", op_name[op], (long long)nb);
            check_fd(what, c.b, nb, db, binary_loss, &c, 1e-5);

            float *ba = frand(n, 1.0), *bb = frand(nb, 1.0);
            float *da2 = fcopy(ba, n), *db2 = fcopy(bb, nb);
            binary_grads(op, da2, db2, w, a, b, n, nb, true);
            check_added(what, da2, ba, da, n, 1e-5);
            check_added(what, db2, bb, db, nb, 1e-5);
            free(a); free(b); free(w); free(da); free(db); free(c.a); free(c.b); free(c.w);
            free(ba); free(bb); free(da2); free(db2);
        }
}

static double ref_gelu(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

MT_TEST(gelu_forward) {
    const int64_t n = 120;
    float *x = frand(n, 4.0), *out = fvec(n);
    /* the tails of tanh, zero, and the clamp region of the approximation */
    const float special[] = {0.0f, -0.0f, 1e-6f, -1e-6f, 8.0f, -8.0f, 10.0f, -10.0f, 30.0f, -30.0f,
                             3.0f, -3.0f, 4.7f, -4.7f, 5.0f, -5.0f, 4.85f, -4.85f};
    memcpy(x, special, sizeof special);
    mt_kernel_gelu_fwd(out, x, n);
    for (int64_t i = 0; i < n; i++)
        MT_CHECK_CLOSE(out[i], ref_gelu(x[i]), 1e-6, "gelu(%g)", (double)x[i]);
    free(x); free(out);
}

typedef struct { int64_t n; double *x, *w; } gelu_ctx;

static double gelu_loss(const void *p) {
    const gelu_ctx *c = p;
    double L = 0.0;
    for (int64_t i = 0; i < c->n; i++) L += c->w[i] * ref_gelu(c->x[i]);
    return L;
}

MT_TEST(gelu_backward_finite_differences) {
    const int64_t n = 120;
    float *x = frand(n, 4.0), *w = frand(n, 1.0), *dx = fvec(n);
    const float special[] = {0.0f, 9.0f, -9.0f, 2.5f, -2.5f, 4.7f, -4.7f, 5.0f, -5.0f, 4.85f, -4.85f};
    memcpy(x, special, sizeof special);
    ffill(dx, n, NAN);
    mt_kernel_gelu_bwd(dx, x, w, n, false);
    gelu_ctx c = {n, dcopy(x, n), dcopy(w, n)};
    check_fd("gelu dx", c.x, n, dx, gelu_loss, &c, 1e-5);
    float *base = frand(n, 1.0), *dx2 = fcopy(base, n);
    mt_kernel_gelu_bwd(dx2, x, w, n, true);
    check_added("gelu dx", dx2, base, dx, n, 1e-6);
    free(x); free(w); free(dx); free(c.x); free(c.w); free(base); free(dx2);
}

typedef struct { int64_t batch, R, Cc; double *in, *w; } transpose_ctx;

static double transpose_loss(const void *p) {
    const transpose_ctx *c = p;
    double L = 0.0;
    for (int64_t b = 0; b < c->batch; b++)
        for (int64_t j = 0; j < c->Cc; j++)
            for (int64_t r = 0; r < c->R; r++)
                L += c->w[(b * c->Cc + j) * c->R + r] * c->in[(b * c->R + r) * c->Cc + j];
    return L;
}

MT_TEST(transpose_forward_and_backward) {
    const int64_t batch = 2, R = 37, Cc = 45, n = batch * R * Cc;   /* tiles with ragged edges */
    float *in = frand(n, 1.0), *out = fvec(n);
    ffill(out, n, NAN);
    mt_kernel_transpose(out, in, batch, R, Cc, false);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t r = 0; r < R; r++)
            for (int64_t j = 0; j < Cc; j++)
                MT_CHECK(out[(b * Cc + j) * R + r] == in[(b * R + r) * Cc + j],
                         "transpose out[%lld,%lld,%lld]", (long long)b, (long long)j, (long long)r);
    float *base = frand(n, 1.0), *out2 = fcopy(base, n);
    mt_kernel_transpose(out2, in, batch, R, Cc, true);
    check_added("transpose", out2, base, out, n, 1e-6);

    /* the backward of a transpose is the transpose back: din (batch,R,Cc) from
     * dout (batch,Cc,R) */
    float *w = frand(n, 1.0), *din = fvec(n);
    ffill(din, n, NAN);
    mt_kernel_transpose(din, w, batch, Cc, R, false);
    transpose_ctx c = {batch, R, Cc, dcopy(in, n), dcopy(w, n)};
    check_fd("transpose din", c.in, n, din, transpose_loss, &c, 1e-6);
    free(in); free(out); free(base); free(out2); free(w); free(din); free(c.in); free(c.w);
}

/* ---- layernorm -------------------------------------------------------------- */

static void ref_layernorm(double *out, double *mean, double *rstd, const double *x,
                          const double *w, const double *b, int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * C;
        double m = 0.0, v = 0.0;
        for (int64_t i = 0; i < C; i++) m += xr[i];
        m /= (double)C;
        for (int64_t i = 0; i < C; i++) v += (xr[i] - m) * (xr[i] - m);
        v /= (double)C;
        double rs = 1.0 / sqrt(v + 1e-5);
        for (int64_t i = 0; i < C; i++) out[r * C + i] = (xr[i] - m) * rs * w[i] + b[i];
        if (mean) mean[r] = m;
        if (rstd) rstd[r] = rs;
    }
}

typedef struct { int64_t rows, C; double *x, *w, *b, *wt, *tmp; } ln_ctx;

static double ln_loss(const void *p) {
    const ln_ctx *c = p;
    ref_layernorm(c->tmp, NULL, NULL, c->x, c->w, c->b, c->rows, c->C);
    double L = 0.0;
    for (int64_t i = 0; i < c->rows * c->C; i++) L += c->wt[i] * c->tmp[i];
    return L;
}

MT_TEST(layernorm_forward) {
    const int64_t rows = 6, C = 37;
    float *x = frand(rows * C, 2.0), *w = frand(C, 1.0), *b = frand(C, 1.0);
    for (int64_t i = 0; i < rows * C; i++) x[i] += 3.0f;   /* a mean far from 0 */
    float *out = fvec(rows * C), *mean = fvec(rows), *rstd = fvec(rows);
    mt_kernel_layernorm_fwd(out, mean, rstd, x, w, b, rows, C);
    double *dx = dcopy(x, rows * C), *dw = dcopy(w, C), *dbb = dcopy(b, C);
    double *want = malloc((size_t)(rows * C) * sizeof *want), wm[6], wr[6];
    ref_layernorm(want, wm, wr, dx, dw, dbb, rows, C);
    for (int64_t r = 0; r < rows; r++) {
        MT_CHECK_CLOSE(mean[r], wm[r], 1e-6, "layernorm mean[%lld]", (long long)r);
        MT_CHECK_CLOSE(rstd[r], wr[r], 1e-5, "layernorm rstd[%lld]", (long long)r);
    }
    for (int64_t i = 0; i < rows * C; i++)
        MT_CHECK_CLOSE(out[i], want[i], 1e-5, "layernorm out[%lld]", (long long)i);
    free(x); free(w); free(b); free(out); free(mean); free(rstd);
    free(dx); free(dw); free(dbb); free(want);
}

MT_TEST(layernorm_backward_finite_differences) {
    const int64_t rows = 6, C = 37, n = rows * C;
    float *x = frand(n, 2.0), *w = frand(C, 1.0), *b = frand(C, 1.0), *wt = frand(n, 1.0);
    for (int64_t i = 0; i < n; i++) x[i] -= 1.0f;
    float *out = fvec(n), *mean = fvec(rows), *rstd = fvec(rows);
    mt_kernel_layernorm_fwd(out, mean, rstd, x, w, b, rows, C);
    ln_ctx c = {rows, C, dcopy(x, n), dcopy(w, C), dcopy(b, C), dcopy(wt, n),
                malloc((size_t)n * sizeof(double))};

    /* B part: the input gradient alone */
    float *dx = fvec(n);
    ffill(dx, n, NAN);
    mt_kernel_layernorm_bwd_input(dx, wt, x, w, mean, rstd, rows, C, false);
    check_fd("layernorm dx", c.x, n, dx, ln_loss, &c, 1e-4);
    float *base = frand(n, 1.0), *dx2 = fcopy(base, n);
    mt_kernel_layernorm_bwd_input(dx2, wt, x, w, mean, rstd, rows, C, true);
    check_added("layernorm dx", dx2, base, dx, n, 1e-5);

    /* W part: the parameter gradients, which always add */
    float *dw = fvec(C), *db = fvec(C);
    ffill(dw, C, 0.0f);
    ffill(db, C, 0.0f);
    mt_kernel_layernorm_bwd_params(dw, db, wt, x, mean, rstd, rows, C);
    check_fd("layernorm dw", c.w, C, dw, ln_loss, &c, 1e-4);
    check_fd("layernorm db", c.b, C, db, ln_loss, &c, 1e-4);
    float *bw = frand(C, 1.0), *bb = frand(C, 1.0), *dw2 = fcopy(bw, C), *db2 = fcopy(bb, C);
    mt_kernel_layernorm_bwd_params(dw2, db2, wt, x, mean, rstd, rows, C);
    check_added("layernorm dw", dw2, bw, dw, C, 1e-5);
    check_added("layernorm db", db2, bb, db, C, 1e-5);
    free(x); free(w); free(b); free(wt); free(out); free(mean); free(rstd);
    free(c.x); free(c.w); free(c.b); free(c.wt); free(c.tmp);
    free(dx); free(base); free(dx2); free(dw); free(db); free(bw); free(bb); free(dw2); free(db2);
}

/* ---- attention -------------------------------------------------------------- */

/* The GPT's packed qkv (B,T,3C) as the kernels' layout. */
static mt_attn_layout packed(int64_t B, int64_t T, int64_t C, int64_t NH) {
    return (mt_attn_layout){.B = B, .T = T, .NH = NH, .KV = NH, .HS = C / NH, .G = 1,
                            .ldq = 3 * C, .ldk = 3 * C, .ldv = 3 * C, .ldo = C};
}
/* out (B,T,C) and lse (B,NH,T) of pairs [bh0, bh1) */
static void attn_fwd(float *out, float *lse, const float *qkv, int64_t B, int64_t T, int64_t C,
                     int64_t NH, int64_t bh0, int64_t bh1) {
    mt_attn_layout L = packed(B, T, C, NH);
    float *scratch = fvec((int64_t)mt_kernel_attention_scratch(T, C / NH));
    mt_kernel_attention_fwd(out, lse, qkv, qkv + C, qkv + 2 * C, &L, scratch, bh0, bh1);
    free(scratch);
}
/* scratch: attn_scratch(T, C / NH)'s floats */
static void attn_bwd(float *dqkv, const float *dout, const float *qkv, const float *out,
                     const float *lse, int64_t B, int64_t T, int64_t C, int64_t NH, bool acc,
                     float *scratch, int64_t bh0, int64_t bh1) {
    mt_attn_layout L = packed(B, T, C, NH);
    mt_attn_grads d = {dqkv, dqkv + C, dqkv + 2 * C, acc, acc};
    mt_kernel_attention_bwd(&d, dout, qkv, qkv + C, qkv + 2 * C, out, lse, &L, scratch, bh0,
                            bh1);
}
static float *attn_scratch(int64_t T, int64_t HS) {
    return fvec((int64_t)mt_kernel_attention_scratch(T, HS));
}

/* out (B,T,C), att (B,NH,T,T) and lse (B,NH,T), each NULL if not wanted */
static void ref_attention_lse(double *out, double *att, double *lse, const double *qkv, int64_t B,
                              int64_t T, int64_t C, int64_t NH) {
    const int64_t HS = C / NH, C3 = 3 * C;
    double *s = malloc((size_t)T * sizeof *s);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < NH; h++)
            for (int64_t t = 0; t < T; t++) {
                const double *q = qkv + (b * T + t) * C3 + h * HS;
                double mx = -INFINITY, sum = 0.0;
                for (int64_t t2 = 0; t2 <= t; t2++) {
                    const double *k = qkv + (b * T + t2) * C3 + C + h * HS;
                    double d = 0.0;
                    for (int64_t i = 0; i < HS; i++) d += q[i] * k[i];
                    s[t2] = d / sqrt((double)HS);
                    if (s[t2] > mx) mx = s[t2];
                }
                for (int64_t t2 = 0; t2 <= t; t2++) { s[t2] = exp(s[t2] - mx); sum += s[t2]; }
                for (int64_t t2 = 0; t2 <= t; t2++) s[t2] /= sum;
                if (lse) lse[(b * NH + h) * T + t] = mx + log(sum);
                if (att)
                    for (int64_t t2 = 0; t2 < T; t2++)
                        att[((b * NH + h) * T + t) * T + t2] = t2 <= t ? s[t2] : 0.0;
                for (int64_t i = 0; i < HS; i++) {
                    double o = 0.0;
                    for (int64_t t2 = 0; t2 <= t; t2++) o += s[t2] * qkv[(b * T + t2) * C3 + 2 * C + h * HS + i];
                    out[(b * T + t) * C + h * HS + i] = o;
                }
            }
    free(s);
}
static void ref_attention(double *out, double *att, const double *qkv, int64_t B, int64_t T,
                          int64_t C, int64_t NH) {
    ref_attention_lse(out, att, NULL, qkv, B, T, C, NH);
}

/* lse (n) against the reference's */
static void check_lse(const float *lse, const double *want, int64_t n, int64_t T) {
    for (int64_t i = 0; i < n; i++)
        MT_CHECK_CLOSE(lse[i], want[i], 1e-5, "attention T=%lld lse[%lld]", (long long)T,
                       (long long)i);
}

typedef struct { int64_t B, T, C, NH; double *qkv, *w, *tmp; } attn_ctx;

static double attn_loss(const void *p) {
    const attn_ctx *c = p;
    ref_attention(c->tmp, NULL, c->qkv, c->B, c->T, c->C, c->NH);
    double L = 0.0;
    for (int64_t i = 0; i < c->B * c->T * c->C; i++) L += c->w[i] * c->tmp[i];
    return L;
}

static void attention_case(int64_t B, int64_t T, int64_t C, int64_t NH) {
    const int64_t nq = B * T * 3 * C, no = B * T * C, nl = B * NH * T;
    float *qkv = frand(nq, 1.5), *out = fvec(no), *lse = fvec(nl);
    ffill(lse, nl, NAN);
    attn_fwd(out, lse, qkv, B, T, C, NH, 0, B * NH);
    double *dq = dcopy(qkv, nq), *wo = malloc((size_t)no * sizeof *wo), *wl = malloc((size_t)nl * sizeof *wl);
    ref_attention_lse(wo, NULL, wl, dq, B, T, C, NH);
    for (int64_t i = 0; i < no; i++)
        MT_CHECK_CLOSE(out[i], wo[i], 1e-5, "attention T=%lld out[%lld]", (long long)T, (long long)i);
    check_lse(lse, wl, nl, T);

    /* the backward against finite differences, through every q, k and v */
    float *w = frand(no, 1.0), *dqkv = fvec(nq), *scratch = attn_scratch(T, C / NH);
    ffill(dqkv, nq, NAN);
    attn_bwd(dqkv, w, qkv, out, lse, B, T, C, NH, false, scratch, 0, B * NH);
    attn_ctx c = {B, T, C, NH, dq, dcopy(w, no), malloc((size_t)no * sizeof(double))};
    check_fd("attention dqkv", c.qkv, nq, dqkv, attn_loss, &c, 1e-5);
    float *base = frand(nq, 1.0), *dqkv2 = fcopy(base, nq);
    attn_bwd(dqkv2, w, qkv, out, lse, B, T, C, NH, true, scratch, 0, B * NH);
    check_added("attention dqkv", dqkv2, base, dqkv, nq, 1e-5);

    /* causality: a gradient on output row t of batch 1 reaches only q of row t
     * and k, v of rows <= t, and nothing in batch 0 */
    const int64_t tsel = T / 2, C3 = 3 * C;
    float *dsel = fvec(no);
    ffill(dsel, no, 0.0f);
    for (int64_t i = 0; i < C; i++) dsel[((B - 1) * T + tsel) * C + i] = (float)rnd();
    attn_bwd(dqkv, dsel, qkv, out, lse, B, T, C, NH, false, scratch, 0, B * NH);
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < C3; j++) {
                const float g = dqkv[(b * T + t) * C3 + j];
                const bool reach = b == B - 1 && (j < C ? t == tsel : t <= tsel);
                if (!reach)
                    MT_CHECK(g == 0.0f, "dqkv[b=%lld,t=%lld,%lld] = %g but row %lld cannot see it",
                             (long long)b, (long long)t, (long long)j, (double)g, (long long)tsel);
            }
    free(qkv); free(out); free(lse); free(dq); free(wo); free(wl); free(w); free(dqkv);
    free(scratch); free(c.w); free(c.tmp); free(base); free(dqkv2); free(dsel);
}

MT_TEST(attention_small_forward_backward_causal) { attention_case(2, 5, 8, 2); }

/* HS = 20 and T = 19 run the 16-wide blocks of the kernels and their tails */
MT_TEST(attention_wider_heads_forward_backward) { attention_case(2, 19, 40, 2); }

MT_TEST(attention_large_scores_are_stable) {
    /* scores in the hundreds overflow a naive exp */
    const int64_t B = 1, T = 7, C = 16, NH = 1;
    float *qkv = frand(B * T * 3 * C, 8.0), *out = fvec(B * T * C), *att = fvec(B * NH * T);
    attn_fwd(out, att, qkv, B, T, C, NH, 0, B * NH);
    double *dq = dcopy(qkv, B * T * 3 * C), *wo = malloc((size_t)(B * T * C) * sizeof *wo);
    ref_attention(wo, NULL, dq, B, T, C, NH);
    for (int64_t i = 0; i < B * T * C; i++)
        MT_CHECK_CLOSE(out[i], wo[i], 1e-4, "attention out[%lld] with large scores", (long long)i);
    free(qkv); free(out); free(att); free(dq); free(wo);
}

/* dqkv (B,T,3C) = the gradient of Σ dout·out, in double, through the full
 * softmax Jacobian (dpre_j = Σ_i datt_i·att_i·(δ_ij - att_j)), not the
 * kernel's shortcut; for sizes where finite differences would take minutes. */
static void ref_attention_bwd(double *dqkv, const double *dout, const double *qkv,
                              const double *att, int64_t B, int64_t T, int64_t C, int64_t NH) {
    const int64_t HS = C / NH, C3 = 3 * C;
    const double scale = 1.0 / sqrt((double)HS);
    double *datt = malloc((size_t)T * sizeof *datt), *dpre = malloc((size_t)T * sizeof *dpre);
    for (int64_t i = 0; i < B * T * C3; i++) dqkv[i] = 0.0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < NH; h++)
            for (int64_t t = 0; t < T; t++) {
                const double *a = att + ((b * NH + h) * T + t) * T;
                const double *dO = dout + (b * T + t) * C + h * HS;
                for (int64_t t2 = 0; t2 <= t; t2++) {
                    const int64_t v = (b * T + t2) * C3 + 2 * C + h * HS;
                    datt[t2] = 0.0;
                    for (int64_t i = 0; i < HS; i++) {
                        datt[t2] += dO[i] * qkv[v + i];
                        dqkv[v + i] += a[t2] * dO[i];
                    }
                }
                for (int64_t j = 0; j <= t; j++) {
                    dpre[j] = 0.0;
                    for (int64_t i = 0; i <= t; i++)
                        dpre[j] += datt[i] * a[i] * ((i == j ? 1.0 : 0.0) - a[j]);
                }
                const int64_t q = (b * T + t) * C3 + h * HS;
                for (int64_t t2 = 0; t2 <= t; t2++) {
                    const int64_t k = (b * T + t2) * C3 + C + h * HS;
                    for (int64_t i = 0; i < HS; i++) {
                        dqkv[q + i] += dpre[t2] * scale * qkv[k + i];
                        dqkv[k + i] += dpre[t2] * scale * qkv[q + i];
                    }
                }
            }
    free(datt); free(dpre);
}

/* Sizes on both sides of the kernel's 64-row query blocks (and HS = 64, a
 * real head), forward and backward against the double references. */
static void attention_blocks_case(int64_t B, int64_t T, int64_t C, int64_t NH) {
    const int64_t nq = B * T * 3 * C, no = B * T * C, na = B * NH * T * T, nl = B * NH * T;
    float *qkv = frand(nq, 1.5), *out = fvec(no), *lse = fvec(nl);
    ffill(out, no, NAN);
    ffill(lse, nl, NAN);
    attn_fwd(out, lse, qkv, B, T, C, NH, 0, B * NH);
    double *dq = dcopy(qkv, nq), *wo = malloc((size_t)no * sizeof *wo), *wa = malloc((size_t)na * sizeof *wa);
    double *wl = malloc((size_t)nl * sizeof *wl);
    ref_attention_lse(wo, wa, wl, dq, B, T, C, NH);
    for (int64_t i = 0; i < no; i++)
        MT_CHECK_CLOSE(out[i], wo[i], 1e-5, "attention T=%lld out[%lld]", (long long)T, (long long)i);
    check_lse(lse, wl, nl, T);

    float *w = frand(no, 1.0), *dqkv = fvec(nq), *scratch = attn_scratch(T, C / NH);
    ffill(dqkv, nq, NAN);
    /* the kernel must not read scratch it has not written */
    ffill(scratch, (int64_t)mt_kernel_attention_scratch(T, C / NH), NAN);
    attn_bwd(dqkv, w, qkv, out, lse, B, T, C, NH, false, scratch, 0, B * NH);
    double *dw = dcopy(w, no), *want = malloc((size_t)nq * sizeof *want);
    ref_attention_bwd(want, dw, dq, wa, B, T, C, NH);
    for (int64_t i = 0; i < nq; i++)
        MT_CHECK_CLOSE(dqkv[i], want[i], 1e-5, "attention T=%lld dqkv[%lld]", (long long)T, (long long)i);
    float *base = frand(nq, 1.0), *dqkv2 = fcopy(base, nq);
    attn_bwd(dqkv2, w, qkv, out, lse, B, T, C, NH, true, scratch, 0, B * NH);
    check_added("attention dqkv", dqkv2, base, dqkv, nq, 1e-5);
    free(qkv); free(out); free(lse); free(dq); free(wo); free(wa); free(wl); free(w); free(dqkv);
    free(scratch); free(dw); free(want); free(base); free(dqkv2);
}

MT_TEST(attention_row_blocks_tiny)  { attention_blocks_case(2, 1, 8, 2); attention_blocks_case(1, 5, 16, 2); }
MT_TEST(attention_row_blocks_edges) {
    attention_blocks_case(1, 63, 16, 2);
    attention_blocks_case(1, 64, 16, 2);
    attention_blocks_case(2, 65, 20, 2);
}
MT_TEST(attention_row_blocks_long)  { attention_blocks_case(1, 130, 24, 3); attention_blocks_case(1, 257, 128, 2); }

/* Pairs [0, split) then [split, B·NH) give bit for bit the whole range, for
 * the forward and for the backward with acc either way; and a range leaves
 * the other pairs' slices of out, att and dqkv untouched (still NaN). */
MT_TEST(attention_pair_ranges_compose_exactly) {
    const int64_t B = 2, T = 70, C = 40, NH = 4, HS = C / NH, C3 = 3 * C, split = 3;
    const int64_t nq = B * T * C3, no = B * T * C, na = B * NH * T;
    float *qkv = frand(nq, 1.5), *w = frand(no, 1.0), *base = frand(nq, 1.0);
    float *out = fvec(no), *att = fvec(na), *out2 = fvec(no), *att2 = fvec(na);
    float *scratch = attn_scratch(T, C / NH);
    attn_fwd(out, att, qkv, B, T, C, NH, 0, B * NH);

    ffill(out2, no, NAN);
    ffill(att2, na, NAN);
    attn_fwd(out2, att2, qkv, B, T, C, NH, 0, split);
    for (int64_t i = 0; i < no; i++) {
        const int64_t bh = (i / (T * C)) * NH + (i % C) / HS;
        MT_CHECK((bh < split) == !isnan(out2[i]), "pairs [0,%lld) wrote out[%lld] of pair %lld: %g",
                 (long long)split, (long long)i, (long long)bh, (double)out2[i]);
    }
    for (int64_t i = 0; i < na; i++)
        MT_CHECK((i / T < split) == !isnan(att2[i]), "pairs [0,%lld) and lse[%lld]",
                 (long long)split, (long long)i);
    attn_fwd(out2, att2, qkv, B, T, C, NH, split, B * NH);
    MT_CHECK(memcmp(out, out2, (size_t)no * sizeof *out) == 0, "split forward out differs");
    MT_CHECK(memcmp(att, att2, (size_t)na * sizeof *att) == 0, "split forward lse differs");

    for (int acc = 0; acc <= 1; acc++) {
        float *d1 = acc ? fcopy(base, nq) : fvec(nq), *d2 = acc ? fcopy(base, nq) : fvec(nq);
        if (!acc) { ffill(d1, nq, NAN); ffill(d2, nq, NAN); }
        attn_bwd(d1, w, qkv, out, att, B, T, C, NH, acc, scratch, 0, B * NH);
        attn_bwd(d2, w, qkv, out, att, B, T, C, NH, acc, scratch, 0, split);
        for (int64_t i = 0; i < nq; i++) {
            const int64_t bh = (i / (T * C3)) * NH + (i % C3 % C) / HS;
            if (bh >= split)
                MT_CHECK(acc ? d2[i] == base[i] : isnan(d2[i]),
                         "pairs [0,%lld) with acc=%d wrote dqkv[%lld] of pair %lld",
                         (long long)split, acc, (long long)i, (long long)bh);
        }
        attn_bwd(d2, w, qkv, out, att, B, T, C, NH, acc, scratch, split, B * NH);
        MT_CHECK(memcmp(d1, d2, (size_t)nq * sizeof *d1) == 0, "split backward (acc=%d) differs", acc);
        free(d1); free(d2);
    }
    free(qkv); free(w); free(base); free(out); free(att); free(out2); free(att2); free(scratch);
}

/* ---- embedding -------------------------------------------------------------- */

typedef struct { int64_t n, C; const int32_t *ids; double *table, *w; } emb_ctx;

static double emb_loss(const void *p) {
    const emb_ctx *c = p;
    double L = 0.0;
    for (int64_t i = 0; i < c->n; i++)
        for (int64_t j = 0; j < c->C; j++) L += c->w[i * c->C + j] * c->table[c->ids[i] * c->C + j];
    return L;
}

MT_TEST(embedding_gather_and_scatter_with_repeats) {
    const int64_t V = 6, C = 19, n = 9;
    const int32_t ids[9] = {3, 1, 3, 0, 5, 3, 1, 2, 3};   /* 4 never appears, 3 four times */
    float *table = frand(V * C, 1.0), *out = fvec(n * C);
    mt_kernel_embedding_fwd(out, table, ids, n, C);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < C; j++)
            MT_CHECK(out[i * C + j] == table[ids[i] * C + j], "embedding out[%lld,%lld]",
                     (long long)i, (long long)j);

    float *w = frand(n * C, 1.0), *dt = fvec(V * C);
    ffill(dt, V * C, 0.0f);
    mt_kernel_embedding_bwd(dt, w, ids, n, C);
    emb_ctx c = {n, C, ids, dcopy(table, V * C), dcopy(w, n * C)};
    check_fd("embedding dtable", c.table, V * C, dt, emb_loss, &c, 1e-5);
    for (int64_t j = 0; j < C; j++) MT_CHECK(dt[4 * C + j] == 0.0f, "row 4 is never used");
    float *base = frand(V * C, 1.0), *dt2 = fcopy(base, V * C);
    mt_kernel_embedding_bwd(dt2, w, ids, n, C);
    check_added("embedding dtable (always adds)", dt2, base, dt, V * C, 1e-5);
    free(table); free(out); free(w); free(dt); free(c.table); free(c.w); free(base); free(dt2);
}

/* ---- losses ----------------------------------------------------------------- */

static double ref_cross_entropy(double *lse, const double *logits, const int32_t *targets,
                                int64_t rows, int64_t V, int64_t Vp, double scale) {
    double L = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        const double *x = logits + r * Vp;
        double mx = -INFINITY, s = 0.0;
        for (int64_t j = 0; j < V; j++) if (x[j] > mx) mx = x[j];
        for (int64_t j = 0; j < V; j++) s += exp(x[j] - mx);
        double l = mx + log(s);
        if (lse) lse[r] = l;
        if (targets[r] >= 0) L += l - x[targets[r]];
    }
    return scale * L;
}

typedef struct { int64_t rows, V, Vp; const int32_t *targets; double *logits, scale, dloss; } ce_ctx;

static double ce_loss(const void *p) {
    const ce_ctx *c = p;
    return c->dloss * ref_cross_entropy(NULL, c->logits, c->targets, c->rows, c->V, c->Vp, c->scale);
}

MT_TEST(cross_entropy_forward_backward_padding_and_skip) {
    const int64_t rows = 5, V = 37, Vp = 48, n = rows * Vp;
    const int32_t targets[5] = {3, -1, 36, 0, 17};
    const float scale = 0.25f, dloss = 1.7f;   /* 1 / (number of counted rows) */
    float *logits = frand(n, 3.0);
    /* padding columns must never be read: a NaN there would poison the row */
    for (int64_t r = 0; r < rows; r++) for (int64_t j = V; j < Vp; j++) logits[r * Vp + j] = NAN;
    float *lse = fvec(rows);
    double loss = mt_kernel_cross_entropy_fwd(lse, logits, targets, rows, V, Vp, scale);
    double *dl = dcopy(logits, n), wl[5];
    double want = ref_cross_entropy(wl, dl, targets, rows, V, Vp, scale);
    MT_CHECK_CLOSE(loss, want, 1e-6, "cross-entropy loss");
    for (int64_t r = 0; r < rows; r++) MT_CHECK_CLOSE(lse[r], wl[r], 1e-6, "lse[%lld]", (long long)r);

    float *dlog = fvec(n);
    ffill(dlog, n, NAN);
    mt_kernel_cross_entropy_bwd(dlog, logits, lse, targets, dloss, rows, V, Vp, scale, false);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < Vp; j++)
            if (j >= V || targets[r] < 0)
                MT_CHECK(dlog[r * Vp + j] == 0.0f, "dlogits[%lld,%lld] = %g, want 0 (%s)",
                         (long long)r, (long long)j, (double)dlog[r * Vp + j],
                         j >= V ? "padding" : "skipped row");
    ce_ctx c = {rows, V, Vp, targets, dl, scale, dloss};
    for (int64_t r = 0; r < rows; r++) {
        char what[64];
        snprintf(what, sizeof what, "cross-entropy dlogits row %lld", (long long)r);
        check_fd(what, dl + r * Vp, V, dlog + r * Vp, ce_loss, &c, 1e-5);
    }
    float *base = frand(n, 1.0), *dlog2 = fcopy(base, n);
    mt_kernel_cross_entropy_bwd(dlog2, logits, lse, targets, dloss, rows, V, Vp, scale, true);
    check_added("cross-entropy dlogits", dlog2, base, dlog, n, 1e-6);
    free(logits); free(lse); free(dl); free(dlog); free(base); free(dlog2);
}

MT_TEST(cross_entropy_uniform_is_log_V_and_large_logits_stable) {
    const int64_t rows = 3, V = 50257, Vp = 50304;
    const int32_t targets[3] = {0, 50256, 12345};
    float *logits = fvec(rows * Vp), *lse = fvec(rows);
    ffill(logits, rows * Vp, 2.5f);
    double loss = mt_kernel_cross_entropy_fwd(lse, logits, targets, rows, V, Vp, 1.0f / 3.0f);
    MT_CHECK_CLOSE(loss, log((double)V), 1e-6, "uniform logits give log(V)");

    /* logits near 1000: exp would overflow without the max shift */
    for (int64_t i = 0; i < rows * Vp; i++) logits[i] = 1000.0f + (float)rnd();
    loss = mt_kernel_cross_entropy_fwd(lse, logits, targets, rows, V, Vp, 1.0f / 3.0f);
    double *dl = dcopy(logits, rows * Vp);
    double want = ref_cross_entropy(NULL, dl, targets, rows, V, Vp, 1.0 / 3.0);
    MT_CHECK(isfinite(loss), "loss with large logits is %g", loss);
    MT_CHECK_CLOSE(loss, want, 1e-5, "cross-entropy with logits near 1000");
    free(logits); free(lse); free(dl);
}

typedef struct { int64_t n; double *pred, *target, scale, dloss; } mse_ctx;

static double mse_loss(const void *p) {
    const mse_ctx *c = p;
    double s = 0.0;
    for (int64_t i = 0; i < c->n; i++) s += (c->pred[i] - c->target[i]) * (c->pred[i] - c->target[i]);
    return c->dloss * c->scale * s;
}

MT_TEST(mse_forward_backward) {
    const int64_t n = 37;
    const float scale = 1.0f / 37.0f, dloss = 0.8f;
    float *pred = frand(n, 2.0), *target = frand(n, 2.0), *dp = fvec(n);
    mse_ctx c = {n, dcopy(pred, n), dcopy(target, n), scale, dloss};
    MT_CHECK_CLOSE(mt_kernel_mse_fwd(pred, target, n, scale), mse_loss(&c) / dloss, 1e-7, "mse loss");
    ffill(dp, n, NAN);
    mt_kernel_mse_bwd(dp, pred, target, dloss, n, scale, false);
    check_fd("mse dpred", c.pred, n, dp, mse_loss, &c, 1e-6);
    float *base = frand(n, 1.0), *dp2 = fcopy(base, n);
    mt_kernel_mse_bwd(dp2, pred, target, dloss, n, scale, true);
    check_added("mse dpred", dp2, base, dp, n, 1e-6);
    free(pred); free(target); free(dp); free(c.pred); free(c.target); free(base); free(dp2);
}

/* ---- reductions ------------------------------------------------------------- */

MT_TEST(sum_sumsq_in_double_and_fill) {
    const int64_t n = 1003;
    float *x = frand(n, 1.0);
    double s = 0.0, s2 = 0.0;
    for (int64_t i = 0; i < n; i++) { s += x[i]; s2 += (double)x[i] * x[i]; }
    MT_CHECK_CLOSE(mt_kernel_sum(x, n), s, 1e-12, "sum");
    MT_CHECK_CLOSE(mt_kernel_sumsq(x, n), s2, 1e-12, "sumsq");

    /* 1 + a million terms of 1e-8: a float accumulator keeps 1 and loses them */
    const int64_t m = 1000001;
    float *y = fvec(m);
    ffill(y, m, 1e-8f);
    y[0] = 1.0f;
    double want = 1.0 + (double)(m - 1) * (double)1e-8f;
    MT_CHECK_CLOSE(mt_kernel_sum(y, m), want, 1e-12, "sum accumulates in double");
    ffill(y, m, 1e-4f);   /* squares of 1e-8, as above */
    y[0] = 1.0f;
    MT_CHECK_CLOSE(mt_kernel_sumsq(y, m), 1.0 + (double)(m - 1) * (double)1e-4f * (double)1e-4f,
                   1e-12, "sumsq accumulates in double");

    float *dx = fvec(n);
    ffill(dx, n, NAN);
    mt_kernel_fill(dx, 0.25f, n, false);
    for (int64_t i = 0; i < n; i++) MT_CHECK(dx[i] == 0.25f, "fill at %lld", (long long)i);
    float *add = fvec(n), *dx2 = fcopy(x, n);
    ffill(add, n, 0.25f);
    mt_kernel_fill(dx2, 0.25f, n, true);
    check_added("fill", dx2, x, add, n, 1e-7);
    free(x); free(y); free(dx); free(add); free(dx2);
}

/* ---- optimizers ------------------------------------------------------------- */

MT_TEST(adamw_two_steps_by_hand) {
    const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1, gs = 0.5;
    float p[3] = {0.5f, -1.0f, 2.0f}, m[3] = {0}, v[3] = {0};
    const float g1[3] = {0.1f, -0.2f, 0.3f}, g2[3] = {-0.4f, 0.05f, 0.3f};

    /* step 1 by hand for p[0]: g' = 0.05, m = 0.005, v = 2.5e-6; the bias
     * corrections give mhat = 0.05, vhat = 0.0025, so the step is
     * lr·(0.05/(0.05 + 1e-8) + 0.1·0.5) = 0.01·(0.9999998 + 0.05) */
    mt_kernel_adamw(p, g1, m, v, 3, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, (float)gs, 1);
    MT_CHECK_CLOSE(m[0], 0.005, 1e-8, "adamw m after step 1");
    MT_CHECK_CLOSE(v[0], 2.5e-6, 1e-10, "adamw v after step 1");
    MT_CHECK_CLOSE(p[0], 0.5 - 0.01 * (0.05 / (0.05 + 1e-8) + 0.05), 1e-7, "adamw p[0] after step 1");

    /* both steps for all three elements, from the formula in double */
    double P[3] = {0.5, -1.0, 2.0}, M[3] = {0}, Vv[3] = {0};
    const float *gg[2] = {g1, g2};
    for (int t = 1; t <= 2; t++)
        for (int i = 0; i < 3; i++) {
            double g = gs * (double)gg[t - 1][i];
            M[i] = b1 * M[i] + (1 - b1) * g;
            Vv[i] = b2 * Vv[i] + (1 - b2) * g * g;
            double mhat = M[i] / (1 - pow(b1, t)), vhat = Vv[i] / (1 - pow(b2, t));
            P[i] -= lr * (mhat / (sqrt(vhat) + eps) + wd * P[i]);
            if (t == 1) MT_CHECK_CLOSE(p[i], P[i], 1e-6, "adamw p[%d] after step 1", i);
        }
    mt_kernel_adamw(p, g2, m, v, 3, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, (float)gs, 2);
    for (int i = 0; i < 3; i++) {
        MT_CHECK_CLOSE(p[i], P[i], 1e-6, "adamw p[%d] after step 2", i);
        MT_CHECK_CLOSE(m[i], M[i], 1e-7, "adamw m[%d] after step 2", i);
        MT_CHECK_CLOSE(v[i], Vv[i], 1e-9, "adamw v[%d] after step 2", i);
    }
}

MT_TEST(adamw_long_vector_matches_formula) {
    /* 37 elements run the 16-wide blocks and the tail */
    const int64_t n = 37;
    const int t = 5;
    const double lr = 3e-4, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, gs = 0.8;
    float *p = frand(n, 1.0), *g = frand(n, 1.0), *m = frand(n, 0.1), *v = frand(n, 0.1);
    for (int64_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    double *P = dcopy(p, n), *M = dcopy(m, n), *Vv = dcopy(v, n);
    mt_kernel_adamw(p, g, m, v, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, (float)gs, t);
    for (int64_t i = 0; i < n; i++) {
        double gi = gs * g[i];
        M[i] = b1 * M[i] + (1 - b1) * gi;
        Vv[i] = b2 * Vv[i] + (1 - b2) * gi * gi;
        P[i] -= lr * ((M[i] / (1 - pow(b1, t))) / (sqrt(Vv[i] / (1 - pow(b2, t))) + eps) + wd * P[i]);
        MT_CHECK_CLOSE(p[i], P[i], 1e-6, "adamw p[%lld]", (long long)i);
        MT_CHECK_CLOSE(m[i], M[i], 1e-7, "adamw m[%lld]", (long long)i);
        MT_CHECK_CLOSE(v[i], Vv[i], 1e-7, "adamw v[%lld]", (long long)i);
    }
    free(p); free(g); free(m); free(v); free(P); free(M); free(Vv);
}

MT_TEST(sgd_momentum_two_steps_by_hand) {
    const float lr = 0.1f, mu = 0.9f, wd = 0.01f, gs = 2.0f;
    float p[3] = {0.5f, -1.0f, 2.0f}, mom[3] = {0};
    const float g1[3] = {0.1f, -0.2f, 0.3f}, g2[3] = {-0.4f, 0.05f, 0.3f};
    /* p[0]: step 1 mom = 0.2, p = 0.5 - 0.1·(0.2 + 0.005) = 0.4795;
     *       step 2 mom = 0.9·0.2 - 0.8 = -0.62, p = 0.4795 - 0.1·(-0.62 + 0.004795) */
    mt_kernel_sgd(p, g1, mom, 3, lr, mu, wd, gs);
    MT_CHECK_CLOSE(mom[0], 0.2, 1e-7, "sgd mom[0] after step 1");
    MT_CHECK_CLOSE(p[0], 0.4795, 1e-7, "sgd p[0] after step 1");
    mt_kernel_sgd(p, g2, mom, 3, lr, mu, wd, gs);
    MT_CHECK_CLOSE(mom[0], -0.62, 1e-7, "sgd mom[0] after step 2");
    MT_CHECK_CLOSE(p[0], 0.4795 - 0.1 * (-0.62 + 0.004795), 1e-7, "sgd p[0] after step 2");

    double P[3] = {0.5, -1.0, 2.0}, Mo[3] = {0};
    const float *gg[2] = {g1, g2};
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < 3; i++) {
            Mo[i] = (double)mu * Mo[i] + (double)gs * gg[t][i];
            P[i] -= (double)lr * (Mo[i] + (double)wd * P[i]);
        }
    for (int i = 0; i < 3; i++) {
        MT_CHECK_CLOSE(p[i], P[i], 1e-6, "sgd p[%d] after step 2", i);
        MT_CHECK_CLOSE(mom[i], Mo[i], 1e-6, "sgd mom[%d] after step 2", i);
    }

    /* no momentum buffer: plain decoupled-decay SGD, over blocks and a tail */
    const int64_t n = 37;
    float *q = frand(n, 1.0), *g = frand(n, 1.0);
    double *Q = dcopy(q, n);
    mt_kernel_sgd(q, g, NULL, n, lr, 0.0f, wd, gs);
    for (int64_t i = 0; i < n; i++) {
        double want = Q[i] - (double)lr * ((double)gs * g[i] + (double)wd * Q[i]);
        MT_CHECK_CLOSE(q[i], want, 1e-6, "sgd without momentum p[%lld]", (long long)i);
    }
    free(q); free(g); free(Q);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
