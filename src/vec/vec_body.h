/*
 * vec_body.h — the vector kernels, written once against the level's macros
 * (internal; included only by vec_<level>.c, each of which defines):
 *
 *   vf                 the vector type, V_W floats
 *   V_LOAD(p) V_STORE(p, v) V_SET1(x)           unaligned load / store, broadcast
 *   V_ADD V_SUB V_MUL V_DIV (a, b)  V_SQRT(a)   lanewise, IEEE-rounded
 *   V_EXP(a)                                    SLEEF's 1-ulp exp
 *   V_FMA(a, b, c)         a·b + c fused        (levels with vectors: the
 *                          tile products of vec_tile.h only)
 *   V_ROUND(a)             to the nearest integer, ties to even  (levels with
 *   V_POW2I(n)             2^n, n integer-valued in [-126, 128]   vectors: vec_tile.h's exp)
 *   V_SEL_GT(a, b, x, y)   a > b ? x : y        (false on a NaN)
 *   V_SEL_NAN(a, x, y)     a is NaN ? x : y
 *   V_TABLE                the name of the table this file exports
 *   V_ISA                  its mt_cpu_isa
 *
 * No FMA contraction (the tile products' V_FMA aside, vec_tile.h): a·b + c
 * is a multiply then an add at every level, as
 * in ISO C (gcc does not contract in -std=c11), so the levels differ only by
 * SLEEF's rounding and the order of the horizontal sums.
 *
 * vec.h states what each kernel computes; the comments here say how.
 */
#include "vec/vec.h"

#include <math.h>
#include <string.h>

/* ---- partial vectors ------------------------------------------------------ */

/* The r < V_W floats at p, the other lanes `pad`. */
static inline vf load_part(const float *p, int64_t r, float pad) {
    float t[V_W];
    for (int l = 0; l < V_W; l++) t[l] = l < r ? p[l] : pad;
    return V_LOAD(t);
}

/* The first r < V_W lanes of v to p. */
static inline void store_part(float *p, vf v, int64_t r) {
    float t[V_W];
    V_STORE(t, v);
    for (int64_t l = 0; l < r; l++) p[l] = t[l];
}

/* Σ of the lanes, as a tree (lane l + lane l + w/2): fixed per level. */
static inline float hsum(vf v) {
    float t[V_W];
    V_STORE(t, v);
    for (int w = V_W / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) t[l] += t[l + w];
    return t[0];
}

/* max of the lanes, skipping NaN (as V_SEL_GT does). */
static inline float hmax(vf v) {
    float t[V_W];
    V_STORE(t, v);
    float m = t[0];
    for (int l = 1; l < V_W; l++) m = t[l] > m ? t[l] : m;
    return m;
}

/* An elementwise loop: BODY(i, n) handles the V_W (or, once, n < V_W)
 * elements from i; every element takes the vector path. */
#define V_EACH(n, BODY)                                                          \
    do {                                                                         \
        const int64_t n_ = (n), nv_ = n_ - n_ % V_W;                             \
        for (int64_t i_ = 0; i_ < nv_; i_ += V_W) BODY(i_, V_W);                 \
        if (nv_ < n_) BODY(nv_, n_ - nv_);                                       \
    } while (0)
/* load or store V_W floats at p + i, or the r < V_W there when r < V_W */
#define V_LD(p, i, r, pad) ((r) == V_W ? V_LOAD((p) + (i)) : load_part((p) + (i), (r), (pad)))
#define V_ST(p, i, r, v)                                                         \
    do {                                                                         \
        if ((r) == V_W) V_STORE((p) + (i), (v));                                 \
        else store_part((p) + (i), (v), (r));                                    \
    } while (0)

/* p[i .. i+r) = v, or += v when acc (r as V_ST's) */
static inline void st_acc(float *p, int64_t i, int64_t r, vf v, bool acc) {
    if (acc) v = V_ADD(V_LD(p, i, r, 0.0f), v);
    V_ST(p, i, r, v);
}

/* ======================================================================== */
/* Softmax and cross-entropy rows                                            */
/* ======================================================================== */

static float k_max(const float *restrict x, int64_t n) {
    vf acc = V_SET1(-INFINITY);
#define B_(i, r) { vf xi = V_LD(x, i, r, -INFINITY); acc = V_SEL_GT(xi, acc, xi, acc); }
    V_EACH(n, B_);
#undef B_
    return hmax(acc);
}

/* Two accumulators: exp's latency is what bounds the loop. The padding
 * lanes hold -inf, whose exp is 0. */
static float k_sum_exp(const float *restrict x, int64_t n, float m) {
    const vf vm = V_SET1(m);
    vf s0 = V_SET1(0.0f), s1 = V_SET1(0.0f);
    int64_t i = 0;
    for (; i + 2 * V_W <= n; i += 2 * V_W) {
        s0 = V_ADD(s0, V_EXP(V_SUB(V_LOAD(x + i), vm)));
        s1 = V_ADD(s1, V_EXP(V_SUB(V_LOAD(x + i + V_W), vm)));
    }
    for (; i < n; i += V_W) {
        int64_t r = n - i < V_W ? n - i : V_W;
        s0 = V_ADD(s0, V_EXP(V_SUB(V_LD(x, i, r, -INFINITY), vm)));
    }
    return hsum(V_ADD(s0, s1));
}

static void k_scale_exp(float *restrict y, const float *restrict x, int64_t n, float l, float k,
                        bool acc) {
    const vf vl = V_SET1(l), vk = V_SET1(k);
#define B_(i, r) V_ST(y, i, r, V_MUL(vk, V_EXP(V_SUB(V_LD(x, i, r, 0.0f), vl))))
#define A_(i, r) V_ST(y, i, r, V_ADD(V_LD(y, i, r, 0.0f), V_MUL(vk, V_EXP(V_SUB(V_LD(x, i, r, 0.0f), vl)))))
    if (acc) V_EACH(n, A_);
    else     V_EACH(n, B_);
#undef A_
#undef B_
}

/* exp in place and the sum, as softmax's first pass; padding lanes load
 * -inf, so they add exp(-inf) = 0 (flash attention's tiles: ops/attention.c) */
static float k_exp_sum(float *restrict a, int64_t n, float m) {
    const vf vm = V_SET1(m);
    vf s = V_SET1(0.0f);
#define B_(i, r) { vf e = V_EXP(V_SUB(V_LD(a, i, r, -INFINITY), vm)); s = V_ADD(s, e); V_ST(a, i, r, e); }
    V_EACH(n, B_);
#undef B_
    return hsum(s);
}

static void k_softmax(float *restrict a, int64_t n) {
    const float m = k_max(a, n);
    const vf vm = V_SET1(m);
    vf s = V_SET1(0.0f);
    /* exp in place and its sum in one pass (padding lanes: exp(-inf) = 0) */
#define B_(i, r) { vf e = V_EXP(V_SUB(V_LD(a, i, r, -INFINITY), vm)); s = V_ADD(s, e); V_ST(a, i, r, e); }
    V_EACH(n, B_);
#undef B_
    /* Σ >= exp(0) = 1 from the max entry: no division by 0 */
    const vf inv = V_SET1(1.0f / hsum(s));
#define B_(i, r) V_ST(a, i, r, V_MUL(V_LD(a, i, r, 0.0f), inv))
    V_EACH(n, B_);
#undef B_
}

static float k_dot(const float *restrict x, const float *restrict y, int64_t n) {
    vf s = V_SET1(0.0f);
#define B_(i, r) s = V_ADD(s, V_MUL(V_LD(x, i, r, 0.0f), V_LD(y, i, r, 0.0f)))
    V_EACH(n, B_);
#undef B_
    return hsum(s);
}

static void k_softmax_bwd(float *restrict d, const float *restrict a, int64_t n, float s, float k) {
    const vf vs = V_SET1(s), vk = V_SET1(k);
#define B_(i, r) V_ST(d, i, r, V_MUL(V_MUL(V_LD(a, i, r, 0.0f), V_SUB(V_LD(d, i, r, 0.0f), vs)), vk))
    V_EACH(n, B_);
#undef B_
}

/* ======================================================================== */
/* GELU                                                                      */
/* ======================================================================== */

#define GELU_SCALE 0.7978845608028654f   /* sqrt(2/pi) */
#define GELU_CUBE  0.044715f

/* tanh(√(2/π)·(x + 0.044715·x³)), as 1 - 2/(exp(2u) + 1): one SLEEF exp and
 * a division, twice as fast as SLEEF's tanh. GELU reads tanh only through
 * 1 ± tanh and 1 - tanh², so its absolute error is what counts: within 2
 * ulps of 1 (near u = 0 the relative error of tanh itself grows, harmlessly
 * here). Far from 0 it is exactly ±1 (exp overflows to inf or underflows to
 * 0), which keeps gelu(x) = x and 0 and gelu' = 1 and 0 there; a NaN passes. */
static inline vf gelu_tanh(vf x) {
    const vf u = V_MUL(V_SET1(GELU_SCALE),
                       V_ADD(x, V_MUL(V_MUL(V_MUL(V_SET1(GELU_CUBE), x), x), x)));
    const vf one = V_SET1(1.0f);
    return V_SUB(one, V_DIV(V_SET1(2.0f), V_ADD(V_EXP(V_ADD(u, u)), one)));
}

static void k_gelu_fwd(float *restrict out, const float *restrict x, int64_t n) {
    const vf half = V_SET1(0.5f), one = V_SET1(1.0f);
#define B_(i, r) { vf xi = V_LD(x, i, r, 0.0f);                                     \
                   V_ST(out, i, r, V_MUL(V_MUL(half, xi), V_ADD(one, gelu_tanh(xi)))); }
    V_EACH(n, B_);
#undef B_
}

/* gelu'(x) = 0.5·(1 + th) + 0.5·x·(1 - th²)·√(2/π)·(1 + 3·0.044715·x²), with
 * sech² as 1 - tanh² (no cosh) */
static inline vf gelu_grad(vf x) {
    const vf half = V_SET1(0.5f), one = V_SET1(1.0f);
    const vf th = gelu_tanh(x);
    const vf du = V_MUL(V_SET1(GELU_SCALE),
                        V_ADD(one, V_MUL(V_MUL(V_SET1(3.0f * GELU_CUBE), x), x)));
    return V_ADD(V_MUL(half, V_ADD(one, th)),
                 V_MUL(V_MUL(V_MUL(half, x), V_SUB(one, V_MUL(th, th))), du));
}

static void k_gelu_bwd(float *restrict dx, const float *restrict x, const float *restrict dout,
                       int64_t n, bool acc) {
#define B_(i, r) V_ST(dx, i, r, V_MUL(gelu_grad(V_LD(x, i, r, 0.0f)), V_LD(dout, i, r, 0.0f)))
#define A_(i, r) V_ST(dx, i, r, V_ADD(V_LD(dx, i, r, 0.0f),                               \
                                      V_MUL(gelu_grad(V_LD(x, i, r, 0.0f)), V_LD(dout, i, r, 0.0f))))
    if (acc) V_EACH(n, A_);
    else     V_EACH(n, B_);
#undef A_
#undef B_
}

/* ======================================================================== */
/* SwiGLU                                                                    */
/* ======================================================================== */

#if V_W > 1
/* exp inlined into a loop (flash attention's column softmax, SwiGLU's
 * sigmoid): SLEEF's is a call, which the loop's live vectors are spilled
 * around, and at 1 ulp it was most of SwiGLU's time. Cody and Waite's
 * reduction x = n·ln2 + r, |r| <= ln2/2, in two parts of ln2, then
 * Cephes's degree-7 expf polynomial (1 + r + r²·P(r)) scaled by 2^n:
 * within 3 ulps of exp in float's normal range. Below -87.3365 (exp under
 * the smallest normal float) it gives 0, -inf included; from 88.3763 on
 * inf (n = 128; exp's own overflow is at 88.7228); a NaN passes. */
static inline vf exp3(vf x) {
    const vf lo = V_SET1(-87.33654f), hi = V_SET1(88.72284f);
    const vf xc = V_SEL_GT(lo, x, lo, V_SEL_GT(x, hi, hi, x));   /* a NaN passes both */
    const vf n = V_ROUND(V_MUL(xc, V_SET1(1.44269504088896341f)));
    vf r = V_FMA(n, V_SET1(-0.693359375f), xc);
    r = V_FMA(n, V_SET1(2.12194440e-4f), r);
    vf y = V_SET1(1.9875691500e-4f);
    y = V_FMA(y, r, V_SET1(1.3981999507e-3f));
    y = V_FMA(y, r, V_SET1(8.3334519073e-3f));
    y = V_FMA(y, r, V_SET1(4.1665795894e-2f));
    y = V_FMA(y, r, V_SET1(1.6666665459e-1f));
    y = V_FMA(y, r, V_SET1(5.0000001201e-1f));
    y = V_ADD(V_FMA(y, V_MUL(r, r), r), V_SET1(1.0f));
    return V_SEL_GT(lo, x, V_SET1(0.0f), V_MUL(y, V_POW2I(n)));
}
#define EXP3(x) exp3(x)
#else
#define EXP3(x) V_EXP(x)   /* generic: SLEEF's */
#endif

/* σ(a) = 1/(1 + exp(-a)), exp by exp3 (a vector level's; SLEEF's at
 * generic): exactly 0 and 1 far out (exp overflows to inf or underflows to
 * 0); a NaN passes. */
static inline vf sigmoid(vf a) {
    const vf one = V_SET1(1.0f);
    return V_DIV(one, V_ADD(one, EXP3(V_SUB(V_SET1(0.0f), a))));
}

static void k_swiglu_fwd(float *restrict out, const float *restrict a, const float *restrict b,
                         int64_t n) {
#define B_(i, r) { vf ai = V_LD(a, i, r, 0.0f);                                      \
                   V_ST(out, i, r, V_MUL(V_MUL(ai, sigmoid(ai)), V_LD(b, i, r, 0.0f))); }
    V_EACH(n, B_);
#undef B_
}

/* silu'(a) = σ(a)·(1 + a·(1 - σ(a))), s = σ(a) */
static inline vf silu_grad(vf a, vf s) {
    const vf one = V_SET1(1.0f);
    return V_MUL(s, V_ADD(one, V_MUL(a, V_SUB(one, s))));
}

static void k_swiglu_bwd_a(float *restrict da, const float *restrict a, const float *restrict b,
                           const float *restrict dout, int64_t n, bool acc) {
#define B_(i, r) { vf ai = V_LD(a, i, r, 0.0f);                                             \
                   st_acc(da, i, r, V_MUL(V_MUL(V_LD(dout, i, r, 0.0f), V_LD(b, i, r, 0.0f)), \
                                          silu_grad(ai, sigmoid(ai))), acc); }
    V_EACH(n, B_);
#undef B_
}

static void k_swiglu_bwd_b(float *restrict db, const float *restrict a,
                           const float *restrict dout, int64_t n, bool acc) {
#define B_(i, r) { vf ai = V_LD(a, i, r, 0.0f);                                           \
                   st_acc(db, i, r, V_MUL(V_LD(dout, i, r, 0.0f), V_MUL(ai, sigmoid(ai))), acc); }
    V_EACH(n, B_);
#undef B_
}

/* k_swiglu_bwd_a and k_swiglu_bwd_b in one pass: σ(a) once, a, b and dout
 * read once; each output the same expression as theirs, so the same bits. */
static void k_swiglu_bwd(float *restrict da, float *restrict db, const float *restrict a,
                         const float *restrict b, const float *restrict dout, int64_t n,
                         bool acc_a, bool acc_b) {
#define B_(i, r) { vf ai = V_LD(a, i, r, 0.0f), s = sigmoid(ai), d = V_LD(dout, i, r, 0.0f); \
                   st_acc(da, i, r, V_MUL(V_MUL(d, V_LD(b, i, r, 0.0f)), silu_grad(ai, s)),  \
                          acc_a);                                                           \
                   st_acc(db, i, r, V_MUL(d, V_MUL(ai, s)), acc_b); }
    V_EACH(n, B_);
#undef B_
}

/* ======================================================================== */
/* Layernorm                                                                 */
/* ======================================================================== */

#define LN_EPS 1e-5f

/* The variance is the mean of (x - mean)², a second pass over a row that is
 * in L1 anyway, which avoids the cancellation of E[x²] - mean². */
static void k_layernorm_fwd(float *restrict out, float *restrict mean, float *restrict rstd,
                            const float *restrict x, const float *restrict w,
                            const float *restrict b, int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * C;
        float *restrict o = out + r * C;
        vf s = V_SET1(0.0f);
#define B_(i, n) s = V_ADD(s, V_LD(xr, i, n, 0.0f))
        V_EACH(C, B_);
#undef B_
        const float m = hsum(s) / (float)C;
        const vf vm = V_SET1(m);
        vf v = V_SET1(0.0f);
#define B_(i, n) { vf d = V_SUB(V_LD(xr, i, n, m), vm); v = V_ADD(v, V_MUL(d, d)); }
        V_EACH(C, B_);
#undef B_
        const float rs = 1.0f / sqrtf(hsum(v) / (float)C + LN_EPS);
        const vf vrs = V_SET1(rs);
#define B_(i, n) V_ST(o, i, n, V_ADD(V_MUL(V_MUL(vrs, V_SUB(V_LD(xr, i, n, 0.0f), vm)),      \
                                           V_LD(w, i, n, 0.0f)), V_LD(b, i, n, 0.0f)))
        V_EACH(C, B_);
#undef B_
        mean[r] = m;
        rstd[r] = rs;
    }
}

/* dx = rstd · (w·dout - mean_C(w·dout) - xhat · mean_C(w·dout·xhat)) */
static void k_layernorm_bwd_input(float *restrict dx, const float *restrict dout,
                                  const float *restrict x, const float *restrict w,
                                  const float *restrict mean, const float *restrict rstd,
                                  int64_t rows, int64_t C, bool acc) {
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * C, *restrict dr = dout + r * C;
        float *restrict d = dx + r * C;
        const vf vm = V_SET1(mean[r]), vrs = V_SET1(rstd[r]);
        vf sa = V_SET1(0.0f), sb = V_SET1(0.0f);
        /* padding lanes: w = dout = 0, so dn = 0 adds nothing */
#define B_(i, n) { vf xhat = V_MUL(V_SUB(V_LD(xr, i, n, 0.0f), vm), vrs);                   \
                   vf dn = V_MUL(V_LD(w, i, n, 0.0f), V_LD(dr, i, n, 0.0f));               \
                   sa = V_ADD(sa, dn); sb = V_ADD(sb, V_MUL(dn, xhat)); }
        V_EACH(C, B_);
#undef B_
        const vf dn_mean = V_SET1(hsum(sa) / (float)C), dnx_mean = V_SET1(hsum(sb) / (float)C);
#define DX_(i, n) V_MUL(vrs, V_SUB(V_SUB(V_MUL(V_LD(w, i, n, 0.0f), V_LD(dr, i, n, 0.0f)), dn_mean), \
                                   V_MUL(V_MUL(V_SUB(V_LD(xr, i, n, 0.0f), vm), vrs), dnx_mean)))
#define B_(i, n) V_ST(d, i, n, DX_(i, n))
#define A_(i, n) V_ST(d, i, n, V_ADD(V_LD(d, i, n, 0.0f), DX_(i, n)))
        if (acc) V_EACH(C, A_);
        else     V_EACH(C, B_);
#undef A_
#undef B_
#undef DX_
    }
}

static void k_layernorm_bwd_params(float *restrict dw, float *restrict db,
                                   const float *restrict dout, const float *restrict x,
                                   const float *restrict mean, const float *restrict rstd,
                                   int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * C, *restrict dr = dout + r * C;
        const vf vm = V_SET1(mean[r]), vrs = V_SET1(rstd[r]);
#define B_(i, n) { vf g = V_LD(dr, i, n, 0.0f);                                               \
                   V_ST(dw, i, n, V_ADD(V_LD(dw, i, n, 0.0f),                                 \
                                        V_MUL(V_MUL(V_SUB(V_LD(xr, i, n, 0.0f), vm), vrs), g))); \
                   V_ST(db, i, n, V_ADD(V_LD(db, i, n, 0.0f), g)); }
        V_EACH(C, B_);
#undef B_
    }
}

/* ======================================================================== */
/* RMS normalisation (LLaMA's): no mean, no bias                             */
/* ======================================================================== */

static void k_rmsnorm_fwd(float *restrict out, float *restrict rstd, const float *restrict x,
                          const float *restrict w, int64_t rows, int64_t C, float eps) {
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * C;
        float *restrict o = out + r * C;
        const float rs = 1.0f / sqrtf(k_dot(xr, xr, C) / (float)C + eps);
        const vf vrs = V_SET1(rs);
#define B_(i, n) V_ST(o, i, n, V_MUL(V_MUL(V_LD(xr, i, n, 0.0f), vrs), V_LD(w, i, n, 0.0f)))
        V_EACH(C, B_);
#undef B_
        rstd[r] = rs;
    }
}

/* y = x·r·w with r = (mean x² + eps)^(-1/2), dr/dx_j = -r³·x_j/C, so
 * dx_j = r·w_j·dout_j - k·x_j with k = r³·mean_C(dout·w·x) */
static void k_rmsnorm_bwd_input(float *restrict dx, const float *restrict dout,
                                const float *restrict x, const float *restrict w,
                                const float *restrict rstd, int64_t rows, int64_t C, bool acc) {
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * C, *restrict dr = dout + r * C;
        float *restrict d = dx + r * C;
        const float rs = rstd[r];
        vf sk = V_SET1(0.0f);
#define B_(i, n) sk = V_ADD(sk, V_MUL(V_MUL(V_LD(dr, i, n, 0.0f), V_LD(w, i, n, 0.0f)),      \
                                      V_LD(xr, i, n, 0.0f)))
        V_EACH(C, B_);
#undef B_
        const vf vrs = V_SET1(rs), vk = V_SET1(rs * rs * rs * hsum(sk) / (float)C);
#define B_(i, n) st_acc(d, i, n, V_SUB(V_MUL(V_MUL(vrs, V_LD(w, i, n, 0.0f)), V_LD(dr, i, n, 0.0f)), \
                                      V_MUL(vk, V_LD(xr, i, n, 0.0f))), acc)
        V_EACH(C, B_);
#undef B_
    }
}

static void k_rmsnorm_bwd_params(float *restrict dw, const float *restrict dout,
                                 const float *restrict x, const float *restrict rstd,
                                 int64_t rows, int64_t C) {
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = x + r * C, *restrict dr = dout + r * C;
        const vf vrs = V_SET1(rstd[r]);
#define B_(i, n) st_acc(dw, i, n, V_MUL(V_MUL(V_LD(dr, i, n, 0.0f), V_LD(xr, i, n, 0.0f)), vrs), true)
        V_EACH(C, B_);
#undef B_
    }
}

/* ======================================================================== */
/* AdamW                                                                     */
/* ======================================================================== */

static void k_adamw(float *restrict p, const float *restrict g, float *restrict m,
                    float *restrict v, int64_t n, float lr, float b1, float b2, float eps,
                    float wd, float gscale, float c1, float c2) {
    const vf vgs = V_SET1(gscale), vb1 = V_SET1(b1), vb2 = V_SET1(b2);
    const vf vob1 = V_SET1(1.0f - b1), vob2 = V_SET1(1.0f - b2);
    const vf vc1 = V_SET1(c1), vc2 = V_SET1(c2), veps = V_SET1(eps);
    const vf vlr = V_SET1(lr), vwd = V_SET1(wd);
#define B_(i, r) {                                                                       \
        vf gi = V_MUL(vgs, V_LD(g, i, r, 0.0f));                                         \
        vf mi = V_ADD(V_MUL(vb1, V_LD(m, i, r, 0.0f)), V_MUL(vob1, gi));                 \
        vf vi = V_ADD(V_MUL(vb2, V_LD(v, i, r, 0.0f)), V_MUL(V_MUL(vob2, gi), gi));      \
        V_ST(m, i, r, mi);                                                               \
        V_ST(v, i, r, vi);                                                               \
        vf pi = V_LD(p, i, r, 0.0f);                                                     \
        vf step = V_ADD(V_DIV(V_DIV(mi, vc1), V_ADD(V_SQRT(V_DIV(vi, vc2)), veps)),      \
                        V_MUL(vwd, pi));                                                 \
        V_ST(p, i, r, V_SUB(pi, V_MUL(vlr, step))); }
    V_EACH(n, B_);
#undef B_
}

/* ======================================================================== */
/* The collectives' reductions                                               */
/* ======================================================================== */

/* a op b, lanewise; max and min let a NaN win from either side (as
 * jax.lax.pmax / pmin): (b > a || b != b) ? b : a. */
static inline vf op_sum(vf a, vf b) { return V_ADD(a, b); }
static inline vf op_max(vf a, vf b) { return V_SEL_NAN(b, b, V_SEL_GT(b, a, b, a)); }
static inline vf op_min(vf a, vf b) { return V_SEL_NAN(b, b, V_SEL_GT(a, b, b, a)); }

#define DEF_REDUCE(NAME, OP)                                                     \
    static void NAME(float *restrict d, const float *restrict s, size_t n) {     \
        _Pragma("GCC unroll 4")                                                  \
        for (size_t i = 0; i + V_W <= n; i += V_W)                               \
            V_STORE(d + i, OP(V_LOAD(d + i), V_LOAD(s + i)));                    \
        const size_t i = n - n % V_W;                                            \
        if (i < n) store_part(d + i, OP(load_part(d + i, (int64_t)(n - i), 0.0f), \
                                        load_part(s + i, (int64_t)(n - i), 0.0f)), \
                              (int64_t)(n - i));                                 \
    }
DEF_REDUCE(k_reduce_sum, op_sum)
DEF_REDUCE(k_reduce_max, op_max)
DEF_REDUCE(k_reduce_min, op_min)
#undef DEF_REDUCE

/* One 64-byte line (16 floats) of every source reduced in registers, then
 * stored to every destination; the last partial line through the same
 * vector code, padded. */
#define DEF_REDUCE_BCAST(NAME, OP)                                                      \
    static void NAME(const float *const *src, int P, size_t soff, float *const *dst,    \
                     int nd, size_t doff, size_t n, mt_vec_line_store_fn *line) {       \
        for (size_t i0 = 0; i0 < n; i0 += 16) {                                         \
            const int64_t r = n - i0 < 16 ? (int64_t)(n - i0) : 16;                     \
            float acc[16];                                                              \
            for (int q = 0; q < 16; q += V_W) {                                         \
                if (r <= q) break;                                                      \
                const int64_t rq = r - q < V_W ? r - q : V_W;                           \
                vf a = V_LD(src[0] + soff + i0, q, rq, 0.0f);                           \
                for (int k = 1; k < P; k++) a = OP(a, V_LD(src[k] + soff + i0, q, rq, 0.0f)); \
                V_STORE(acc + q, a);                                                    \
            }                                                                           \
            for (int k = 0; k < nd; k++) {                                              \
                float *d = dst[k] + doff + i0;                                          \
                if (line && r == 16) line(d, acc);                                      \
                else memcpy(d, acc, (size_t)r * sizeof *d);                             \
            }                                                                           \
        }                                                                               \
    }
DEF_REDUCE_BCAST(k_reduce_bcast_sum, op_sum)
DEF_REDUCE_BCAST(k_reduce_bcast_max, op_max)
DEF_REDUCE_BCAST(k_reduce_bcast_min, op_min)
#undef DEF_REDUCE_BCAST

#include "vec/vec_tile.h"

/* ======================================================================== */
/* The table                                                                 */
/* ======================================================================== */

const mt_vec_ops V_TABLE = {
    .isa = V_ISA,
    .width = V_W,
    .max = k_max,
    .sum_exp = k_sum_exp,
    .scale_exp = k_scale_exp,
    .exp_sum = k_exp_sum,
    .softmax = k_softmax,
    .dot = k_dot,
    .softmax_bwd = k_softmax_bwd,
    .cols_max = k_cols_max,
    .cols_exp = k_cols_exp,
    .cols_softmax_bwd = k_cols_softmax_bwd,
    .gemm_tile = GEMM_TILE,
    .gelu_fwd = k_gelu_fwd,
    .gelu_bwd = k_gelu_bwd,
    .swiglu_fwd = k_swiglu_fwd,
    .swiglu_bwd_a = k_swiglu_bwd_a,
    .swiglu_bwd_b = k_swiglu_bwd_b,
    .swiglu_bwd = k_swiglu_bwd,
    .layernorm_fwd = k_layernorm_fwd,
    .layernorm_bwd_input = k_layernorm_bwd_input,
    .layernorm_bwd_params = k_layernorm_bwd_params,
    .rmsnorm_fwd = k_rmsnorm_fwd,
    .rmsnorm_bwd_input = k_rmsnorm_bwd_input,
    .rmsnorm_bwd_params = k_rmsnorm_bwd_params,
    .adamw = k_adamw,
    .reduce_into = {k_reduce_sum, k_reduce_max, k_reduce_min},
    .reduce_bcast = {k_reduce_bcast_sum, k_reduce_bcast_max, k_reduce_bcast_min},
};
