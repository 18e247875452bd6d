/*
 * elementwise.c — add, sub, mul with broadcast, scale, GELU and transpose,
 * forward and backward.
 *
 * Broadcast is of one kind only: b (nb) repeats along a (n), so
 * b_i = b[i % nb] (a bias over rows, a scalar when nb == 1). A broadcast loop
 * therefore runs over blocks of nb with b read contiguously, never computing
 * i % nb per element. Outputs must not overlap inputs (the pointers are
 * restrict). The loops are single-threaded and written so gcc vectorises them
 * at -O2.
 */
#include "ops/kernels.h"
#include "ops/vec_impl.h"

#include <assert.h>
#include <string.h>

/* Σ x over n floats. Sixteen partial sums let gcc vectorise a reduction it
 * may not reorder, and keep each partial sum short (more accurate, too). */
static float sum_f(const float *restrict x, int64_t n) {
    float lane[16] = {0};
    int64_t nb = n - n % 16;
    for (int64_t i0 = 0; i0 < nb; i0 += 16)
        for (int l = 0; l < 16; l++) lane[l] += x[i0 + l];
    float s = 0.0f;
    for (int64_t i = nb; i < n; i++) s += x[i];
    for (int l = 0; l < 16; l++) s += lane[l];
    return s;
}

/* Σ x·y over n floats, as sum_f. */
static float dot_f(const float *restrict x, const float *restrict y, int64_t n) {
    float lane[16] = {0};
    int64_t nb = n - n % 16;
    for (int64_t i0 = 0; i0 < nb; i0 += 16)
        for (int l = 0; l < 16; l++) lane[l] += x[i0 + l] * y[i0 + l];
    float s = 0.0f;
    for (int64_t i = nb; i < n; i++) s += x[i] * y[i];
    for (int l = 0; l < 16; l++) s += lane[l];
    return s;
}

/* ---- binary ops with broadcast -------------------------------------------- */

enum { OP_ADD, OP_SUB, OP_MUL };

/* out (n) = a (n) op b (nb), or out += a op b if acc. Always inlined with a
 * constant op, so the choice of op folds away and each caller gets its own
 * vectorised loops. */
static inline __attribute__((always_inline)) void
binary(float *restrict out, const float *restrict a, const float *restrict b,
       int64_t n, int64_t nb, int op, bool acc) {
    assert(nb >= 1 && n % nb == 0);
#define MT__APPLY(x, y) (op == OP_ADD ? (x) + (y) : op == OP_SUB ? (x) - (y) : (x) * (y))
    if (nb == 1) {   /* a scalar: one long loop, not n loops of length 1 */
        const float s = b[0];
        if (acc) MT_VEC_FOR(i, n, out[i] += MT__APPLY(a[i], s));
        else     MT_VEC_FOR(i, n, out[i] = MT__APPLY(a[i], s));
        return;
    }
    for (int64_t i0 = 0; i0 < n; i0 += nb) {
        float *restrict o = out + i0;
        const float *restrict x = a + i0;
        if (acc) MT_VEC_FOR(j, nb, o[j] += MT__APPLY(x[j], b[j]));
        else     MT_VEC_FOR(j, nb, o[j] = MT__APPLY(x[j], b[j]));
    }
#undef MT__APPLY
}

/* out (n) = a (n) + b (nb, broadcast). */
void mt_kernel_add_fwd(float *out, const float *a, const float *b, int64_t n, int64_t nb) {
    binary(out, a, b, n, nb, OP_ADD, false);
}

/* out (n) = a (n) - b (nb, broadcast). */
void mt_kernel_sub_fwd(float *out, const float *a, const float *b, int64_t n, int64_t nb) {
    binary(out, a, b, n, nb, OP_SUB, false);
}

/* out (n) = a (n) · b (nb, broadcast). */
void mt_kernel_mul_fwd(float *out, const float *a, const float *b, int64_t n, int64_t nb) {
    binary(out, a, b, n, nb, OP_MUL, false);
}

/* out (n) (+)= s · a (n). */
void mt_kernel_scale(float *restrict out, const float *restrict a, float s, int64_t n, bool acc) {
    if (acc) MT_VEC_FOR(i, n, out[i] += s * a[i]);
    else     MT_VEC_FOR(i, n, out[i] = s * a[i]);
}

/* db (nb) (+)= s · Σ_{i ≡ j mod nb} dout[i] (n). */
void mt_kernel_reduce_broadcast(float *restrict db, const float *restrict dout, float s,
                                int64_t n, int64_t nb, bool acc) {
    assert(nb >= 1 && n % nb == 0);
    if (nb == 1) {
        float v = s * sum_f(dout, n);
        db[0] = acc ? db[0] + v : v;
        return;
    }
    if (!acc) memset(db, 0, (size_t)nb * sizeof *db);
    for (int64_t i0 = 0; i0 < n; i0 += nb) {
        const float *restrict d = dout + i0;
        MT_VEC_FOR(j, nb, db[j] += s * d[j]);
    }
}

/* da (n) (+)= dout (n) · b (nb, broadcast). */
void mt_kernel_mul_bwd_a(float *da, const float *dout, const float *b, int64_t n, int64_t nb,
                         bool acc) {
    binary(da, dout, b, n, nb, OP_MUL, acc);
}

/* db (nb) (+)= Σ_{i ≡ j mod nb} dout[i] · a[i] (n). */
void mt_kernel_mul_bwd_b(float *restrict db, const float *restrict dout, const float *restrict a,
                         int64_t n, int64_t nb, bool acc) {
    assert(nb >= 1 && n % nb == 0);
    if (nb == 1) {
        float v = dot_f(dout, a, n);
        db[0] = acc ? db[0] + v : v;
        return;
    }
    if (!acc) memset(db, 0, (size_t)nb * sizeof *db);
    for (int64_t i0 = 0; i0 < n; i0 += nb) {
        const float *restrict d = dout + i0, *restrict x = a + i0;
        MT_VEC_FOR(j, nb, db[j] += d[j] * x[j]);
    }
}

/* ---- GELU ------------------------------------------------------------------ */

#define GELU_SCALE 0.7978845608028654f   /* sqrt(2/pi) */
#define GELU_CUBE  0.044715f

/* tanh as Eigen's rational approximation (odd degree-13 over even degree-6)
 * on [-7.9, 7.9], accurate to a few float ulps. libm's tanhf is a call gcc
 * cannot vectorise (without -ffast-math), and GELU runs over B·T·4C elements
 * per layer. Past ±7.9 tanh is ±1 to within 3e-7, and the result is set to
 * exactly ±1 there: the rational at the clamp is 1 only when the compiler does
 * not contract it into FMAs (clang does), and an exact 1 keeps gelu(x) = 0
 * and gelu'(x) = 1 for large |x| whatever the compiler. The comparisons are
 * written so a NaN passes through. */
static inline float tanh_f(float x) {
    const float c = 7.90531110763549805f;
    float xc = x > c ? c : x;
    xc = xc < -c ? -c : xc;
    float x2 = xc * xc;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 - 8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    p = p * xc;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    float r = p / q;
    r = x >= c ? 1.0f : r;
    r = x <= -c ? -1.0f : r;
    return r;
}

/* out (n) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), x (n). */
void mt_kernel_gelu_fwd(float *restrict out, const float *restrict x, int64_t n) {
    MT_VEC_FOR(i, n,
        float xi = x[i];
        float u = GELU_SCALE * (xi + GELU_CUBE * xi * xi * xi);
        out[i] = 0.5f * xi * (1.0f + tanh_f(u)));
}

/* gelu'(x). sech² is 1 - tanh², which saves the cosh llm.c computes. */
static inline float gelu_grad(float x) {
    float th = tanh_f(GELU_SCALE * (x + GELU_CUBE * x * x * x));
    return 0.5f * (1.0f + th) +
           0.5f * x * (1.0f - th * th) * GELU_SCALE * (1.0f + 3.0f * GELU_CUBE * x * x);
}

/* dx (n) (+)= gelu'(x) (n) · dout (n). */
void mt_kernel_gelu_bwd(float *restrict dx, const float *restrict x, const float *restrict dout,
                        int64_t n, bool acc) {
    if (acc) MT_VEC_FOR(i, n, dx[i] += gelu_grad(x[i]) * dout[i]);
    else     MT_VEC_FOR(i, n, dx[i] = gelu_grad(x[i]) * dout[i]);
}

/* ---- transpose ------------------------------------------------------------- */

/* out (batch,Cc,R) (+)= in (batch,R,Cc) with the last two dims swapped. Done in
 * 32×32 tiles so both the rows read and the rows written stay in L1 while a
 * tile is moved (a naive loop misses the cache on every store for large R). */
void mt_kernel_transpose(float *restrict out, const float *restrict in, int64_t batch, int64_t R,
                         int64_t Cc, bool acc) {
    enum { TILE = 32 };
    for (int64_t bi = 0; bi < batch; bi++) {
        const float *restrict src = in + bi * R * Cc;
        float *restrict dst = out + bi * R * Cc;
        for (int64_t r0 = 0; r0 < R; r0 += TILE) {
            int64_t r1 = r0 + TILE < R ? r0 + TILE : R;
            for (int64_t c0 = 0; c0 < Cc; c0 += TILE) {
                int64_t c1 = c0 + TILE < Cc ? c0 + TILE : Cc;
                for (int64_t c = c0; c < c1; c++) {
                    float *restrict drow = dst + c * R;
                    if (acc) for (int64_t r = r0; r < r1; r++) drow[r] += src[r * Cc + c];
                    else     for (int64_t r = r0; r < r1; r++) drow[r] = src[r * Cc + c];
                }
            }
        }
    }
}
