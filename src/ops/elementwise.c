/*
 * elementwise.c — add, sub, mul with broadcast, scale, GELU, SwiGLU and transpose,
 * forward and backward.
 *
 * Broadcast is of one kind only: b (nb) repeats along a (n), so
 * b_i = b[i % nb] (a bias over rows, a scalar when nb == 1). A broadcast loop
 * therefore runs over blocks of nb with b read contiguously, never computing
 * i % nb per element. Outputs must not overlap inputs (the pointers are
 * restrict). The loops are single-threaded and written so gcc vectorises them
 * at -O2; GELU's, which call tanh, are the vector layer's (vec/vec.h).
 */
#include "ops/kernels.h"
#include "ops/vec_impl.h"
#include "vec/vec.h"

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
/* Vectorised at the kernel level in use (vec/vec_body.h): tanh from SLEEF. */

/* out (n) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), x (n). */
void mt_kernel_gelu_fwd(float *restrict out, const float *restrict x, int64_t n) {
    mt__vec()->gelu_fwd(out, x, n);
}

/* dx (n) (+)= gelu'(x) (n) · dout (n). */
void mt_kernel_gelu_bwd(float *restrict dx, const float *restrict x, const float *restrict dout,
                        int64_t n, bool acc) {
    mt__vec()->gelu_bwd(dx, x, dout, n, acc);
}

/* ---- SwiGLU ---------------------------------------------------------------- */
/* Vectorised at the kernel level in use (vec/vec_body.h): exp from SLEEF. */

void mt_kernel_swiglu_fwd(float *restrict out, const float *restrict a, const float *restrict b,
                          int64_t n) {
    mt__vec()->swiglu_fwd(out, a, b, n);
}

void mt_kernel_swiglu_bwd_a(float *restrict da, const float *restrict a, const float *restrict b,
                            const float *restrict dout, int64_t n, bool acc) {
    mt__vec()->swiglu_bwd_a(da, a, b, dout, n, acc);
}

void mt_kernel_swiglu_bwd_b(float *restrict db, const float *restrict a,
                            const float *restrict dout, int64_t n, bool acc) {
    mt__vec()->swiglu_bwd_b(db, a, dout, n, acc);
}

void mt_kernel_swiglu_bwd(float *restrict da, float *restrict db, const float *restrict a,
                          const float *restrict b, const float *restrict dout, int64_t n,
                          bool acc_a, bool acc_b) {
    mt__vec()->swiglu_bwd(da, db, a, b, dout, n, acc_a, acc_b);
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
