/*
 * test_vec.c — the vector kernels (src/vec) at every kernel level this CPU
 * runs, side by side, against float64 references (softmax, GELU, SwiGLU,
 * layernorm, rmsnorm, AdamW, the reductions, flash attention's tiles): every length from 0 past
 * two vectors (so every partial last vector), NaN and infinity where a
 * kernel promises something of them, and the promise that an elementwise
 * kernel's result does not depend on how its range is split.
 */
#include "harness.h"
#include "meshtrain.h"
#include "vec/vec.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 72   /* past two AVX-512 vectors plus a partial one */

static const int LENS[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65, 71};
#define N_LENS ((int)(sizeof LENS / sizeof LENS[0]))

/* x (n) uniform in [lo, hi), from (seed, i) */
static void fill(float *x, int n, float lo, float hi, uint64_t seed) {
    for (int i = 0; i < n; i++) x[i] = lo + (hi - lo) * mt_rng_uniform(seed, 3, (uint64_t)i);
}

/* Runs the statement after it with v each level this CPU runs, in order. */
#define FOR_LEVELS(v)                                                                 \
    for (int li_ = MT_ISA_GENERIC; li_ <= MT_ISA_AVX512; li_++)                       \
        for (const mt_vec_ops *v = mt__vec_at((mt_cpu_isa)li_); v; v = NULL)

static double gelu64(double x) {
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

MT_TEST(levels_match_the_cpu) {
    /* the table in use is the one mt_get_cpu_isa names, and it is there */
    MT_CHECK(mt__vec() == mt__vec_at(mt_get_cpu_isa()), "mt__vec() is the level in use");
    MT_CHECK(mt__vec_at(mt_cpu_isa_best()) != NULL, "the best level has a table");
    MT_CHECK(mt__vec_at(MT_ISA_GENERIC) != NULL, "generic runs everywhere");
    FOR_LEVELS(v) MT_CHECK(v->width >= 1 && v->width <= 16, "%s width %d", mt_cpu_isa_name(v->isa), v->width);
    /* a cap: the level in use never exceeds it, and a bad name is an error */
    MT_CHECK_OK(mt_set_cpu_isa("generic"));
    MT_CHECK(mt_get_cpu_isa() == MT_ISA_GENERIC && mt__vec()->isa == MT_ISA_GENERIC, "capped");
    MT_CHECK_FAILS(mt_set_cpu_isa("avx1024"), MT_EINVAL, "avx1024", "generic");
    /* names of every architecture parse (a trace from another machine) */
    MT_CHECK(mt_cpu_isa_parse("neon") == MT_ISA_NEON && mt_cpu_isa_parse("avx512") == MT_ISA_AVX512 &&
             mt_cpu_isa_parse("generic") == MT_ISA_GENERIC, "levels by name");
    MT_CHECK(mt_cpu_isa_parse("avx1024") == -1 && mt_cpu_isa_parse("") == -1 &&
             mt_cpu_isa_parse(NULL) == -1, "a name that is no level");
}

MT_TEST(softmax_rows_against_float64) {
    float x[MAXN], y[MAXN], y2[MAXN];
    FOR_LEVELS(v) for (int li = 0; li < N_LENS; li++) {
        const int n = LENS[li];
        const char *L = mt_cpu_isa_name(v->isa);
        fill(x, n, -20.0f, 20.0f, (uint64_t)n);
        double m = -INFINITY, se = 0, dot = 0;
        for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
        MT_CHECK(v->max(x, n) == (float)m, "%s max n=%d", L, n);
        if (n == 0) continue;
        for (int i = 0; i < n; i++) se += exp((double)x[i] - m);
        MT_CHECK_CLOSE(v->sum_exp(x, n, (float)m), se, 1e-6, "%s sum_exp n=%d", L, n);
        /* scale_exp = and += */
        v->scale_exp(y, x, n, (float)m, 0.5f, false);
        for (int i = 0; i < n; i++)
            MT_CHECK_CLOSE(y[i], 0.5 * exp((double)x[i] - m), 1e-6, "%s scale_exp n=%d i=%d", L, n, i);
        v->scale_exp(y, x, n, (float)m, 0.5f, true);
        for (int i = 0; i < n; i++)
            MT_CHECK_CLOSE(y[i], exp((double)x[i] - m), 1e-6, "%s scale_exp acc n=%d i=%d", L, n, i);
        /* softmax in place */
        for (int i = 0; i < n; i++) y[i] = x[i];
        v->softmax(y, n);
        for (int i = 0; i < n; i++)
            MT_CHECK_CLOSE(y[i], exp((double)x[i] - m) / se, 2e-6, "%s softmax n=%d i=%d", L, n, i);
        /* dot, and the softmax backward d = a·(d - s)·k */
        fill(y2, n, -1.0f, 1.0f, 99);
        for (int i = 0; i < n; i++) dot += (double)y[i] * (double)y2[i];
        MT_CHECK_CLOSE(v->dot(y, y2, n), dot, 1e-6, "%s dot n=%d", L, n);
        float d[MAXN];
        for (int i = 0; i < n; i++) d[i] = y2[i];
        v->softmax_bwd(d, y, n, (float)dot, 0.125f);
        for (int i = 0; i < n; i++)
            MT_CHECK_CLOSE(d[i], (double)y[i] * ((double)y2[i] - dot) * 0.125, 1e-6,
                           "%s softmax_bwd n=%d i=%d", L, n, i);
    }
    /* a NaN is skipped by max, as the kernels' max always did */
    float z[5] = {1, NAN, 3, 2, -1};
    FOR_LEVELS(v) MT_CHECK(v->max(z, 5) == 3.0f, "%s max skips NaN", mt_cpu_isa_name(v->isa));
}

/* Flash attention's tiles (vec_tile.h): the column kernels on a transposed
 * tile (n rows, m columns, ld = m + 3: the 3 past m must not move), and the
 * tile product against float64 at shapes around the 6-row blocks and the
 * vector widths, C's columns past N untouched, beta = 0 not reading C. */
MT_TEST(attention_tiles_against_float64) {
    enum { R = 9, LDX = MAXN + 3 };
    static float a[R * LDX], d[R * LDX], p[R * LDX];
    float mx[LDX], sub[LDX], sum[LDX], D[LDX];
    FOR_LEVELS(v) for (int li = 0; li < N_LENS; li++) {
        const int m = LENS[li], ld = m + 3, n = 1 + li % R;
        const char *L = mt_cpu_isa_name(v->isa);
        fill(a, n * ld, -8.0f, 8.0f, 40 + (uint64_t)m);
        a[(n / 2) * ld] = -INFINITY;   /* a masked score */
        for (int i = 0; i < ld; i++) mx[i] = i % 3 ? -INFINITY : 1.5f, sub[i] = 0.25f * (float)i;
        memcpy(p, a, sizeof a);
        v->cols_max(mx, a, ld, n, m);
        for (int i = 0; i < ld; i++) {
            double want = i % 3 ? -INFINITY : 1.5;
            for (int r = 0; r < n && i < m; r++) want = a[r * ld + i] > want ? a[r * ld + i] : want;
            MT_CHECK(mx[i] == (float)want, "%s cols_max m=%d col %d", L, m, i);
        }
        v->cols_exp(p, ld, n, m, sub, sum);
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int r = 0; r < n; r++) {
                const double e = exp((double)(a[r * ld + i] - sub[i]));   /* the kernel's float x */
                s += e;
                MT_CHECK(fabs(p[r * ld + i] - e) <= 3e-7 * e, "%s cols_exp m=%d (%d,%d): %.9g, "
                         "want %.9g", L, m, r, i, (double)p[r * ld + i], e);
            }
            MT_CHECK_CLOSE(sum[i], s, 2e-6, "%s cols_exp sum m=%d col %d", L, m, i);
        }
        for (int r = 0; r < n; r++)
            for (int i = m; i < ld; i++)
                MT_CHECK(memcmp(&p[r * ld + i], &a[r * ld + i], 4) == 0, "%s cols_exp wrote past m", L);
        fill(d, n * ld, -1.0f, 1.0f, 50 + (uint64_t)m);
        fill(D, ld, -1.0f, 1.0f, 60);
        memcpy(a, d, sizeof d);
        v->cols_softmax_bwd(d, p, ld, n, m, D, 0.125f);
        for (int r = 0; r < n; r++)
            for (int i = 0; i < ld; i++)
                MT_CHECK_CLOSE(d[r * ld + i],
                               i < m ? (double)p[r * ld + i] * ((double)a[r * ld + i] - D[i]) * 0.125
                                     : (double)a[r * ld + i],
                               1e-6, "%s cols_softmax_bwd m=%d (%d,%d)", L, m, r, i);
    }
    /* cols_exp's exp at its edges: -inf gives 0, under the smallest normal
     * 0 or a subnormal, NaN passes, 0 gives 1, overflow inf; and at 4001 points of
     * [-87, 88], within 3 ulps (float's 2^-23 relative) of exp */
    float ex[8] = {-INFINITY, -90.0f, NAN, 0.0f, 89.0f, INFINITY, -87.0f, 88.0f}, z8[8] = {0};
    FOR_LEVELS(v) {
        float e8[8];
        memcpy(e8, ex, sizeof ex);
        v->cols_exp(e8, 8, 1, 8, z8, NULL);
        const char *L = mt_cpu_isa_name(v->isa);
        MT_CHECK(e8[0] == 0.0f && e8[1] >= 0.0f && e8[1] < 1.2e-38f && e8[2] != e8[2] &&
                 e8[3] == 1.0f, "%s exp edges "
                 "%g %g %g %g", L, (double)e8[0], (double)e8[1], (double)e8[2], (double)e8[3]);
        MT_CHECK(isinf(e8[4]) && isinf(e8[5]), "%s exp overflows to inf", L);
        static float xs[4001], es[4001];
        for (int i = 0; i < 4001; i++) xs[i] = es[i] = -87.0f + 175.0f * (float)i / 4000.0f;
        static float zs[4001];
        v->cols_exp(es, 4001, 1, 4001, zs, NULL);
        for (int i = 0; i < 4001; i++)
            MT_CHECK(fabs(es[i] - exp((double)xs[i])) <= 3.6e-7 * exp((double)xs[i]),
                     "%s exp(%.9g) = %.9g", L, (double)xs[i], (double)es[i]);
    }
    /* the product: op(A) (M,K), B (K,N), C (M,N) at ldc = N + 5 */
    static const int MS[] = {1, 4, 5, 6, 7, 10, 11, 13, 64}, NS[] = {1, 7, 8, 9, 16, 17, 33, 64};
    static float A[64 * 70], B[70 * 70], C[64 * 70], C0[64 * 70];
    FOR_LEVELS(v) if (v->gemm_tile) for (int mi = 0; mi < 9; mi++) for (int ni = 0; ni < 8; ni++) {
        const int M = MS[mi], N = NS[ni], K = 1 + (mi * 8 + ni) % 67, ldc = N + 5;
        const bool ta = (mi + ni) % 2, acc = ni % 3 == 0;
        const int lda = (ta ? M : K) + 2, ldb = N + 1;
        fill(A, 64 * 70, -1.0f, 1.0f, 70);
        fill(B, 70 * 70, -1.0f, 1.0f, 71);
        fill(C0, 64 * 70, -1.0f, 1.0f, 72);
        for (int i = 0; i < 64 * 70; i++) C[i] = acc || i % ldc >= N ? C0[i] : NAN;
        v->gemm_tile(ta, M, N, K, 0.5f, A, lda, B, ldb, acc ? 1.0f : 0.0f, C, ldc);
        for (int r = 0; r < M; r++)
            for (int c = 0; c < ldc; c++) {
                double want = C0[r * ldc + c], mag = 0;
                if (c < N) {
                    double dot = 0;
                    for (int k = 0; k < K; k++) {
                        const double x = ta ? A[k * lda + r] : A[r * lda + k], y = B[k * ldb + c];
                        dot += x * y;
                        mag += fabs(x * y);
                    }
                    want = 0.5 * dot + (acc ? want : 0.0);
                }
                MT_CHECK(fabs(C[r * ldc + c] - want) <= 1e-6 * (mag + 1.0), "%s gemm_tile ta=%d "
                         "M=%d N=%d K=%d (%d,%d): %g, want %g", mt_cpu_isa_name(v->isa), ta, M, N,
                         K, r, c, (double)C[r * ldc + c], want);
            }
    }
}

MT_TEST(gelu_against_float64) {
    float x[MAXN], y[MAXN], g[MAXN], dx[MAXN];
    FOR_LEVELS(v) for (int li = 0; li < N_LENS; li++) {
        const int n = LENS[li];
        const char *L = mt_cpu_isa_name(v->isa);
        fill(x, n, -6.0f, 6.0f, 7 + (uint64_t)n);
        fill(g, n, -1.0f, 1.0f, 8);
        v->gelu_fwd(y, x, n);
        v->gelu_bwd(dx, x, g, n, false);
        for (int i = 0; i < n; i++) {
            MT_CHECK_CLOSE(y[i], gelu64(x[i]), 2e-6, "%s gelu n=%d x=%g", L, n, x[i]);
            double h = 1e-4, fd = (gelu64(x[i] + h) - gelu64(x[i] - h)) / (2 * h);
            MT_CHECK_CLOSE(dx[i], fd * g[i], 1e-5, "%s gelu' n=%d x=%g", L, n, x[i]);
        }
        v->gelu_bwd(dx, x, g, n, true);   /* += : twice the gradient */
        for (int i = 0; i < n; i++) {
            double h = 1e-4, fd = (gelu64(x[i] + h) - gelu64(x[i] - h)) / (2 * h);
            MT_CHECK_CLOSE(dx[i], 2 * fd * g[i], 2e-5, "%s gelu' acc n=%d", L, n);
        }
    }
    /* far from 0 tanh is exactly ±1: gelu(x) = x and 0, gelu' = 1 and 0 */
    float big[4] = {12.0f, -12.0f, 30.0f, -30.0f}, o[4], one[4] = {1, 1, 1, 1};
    FOR_LEVELS(v) {
        v->gelu_fwd(o, big, 4);
        MT_CHECK(o[0] == 12.0f && o[1] == 0.0f && o[2] == 30.0f && o[3] == 0.0f,
                 "%s gelu at ±12, ±30: %g %g %g %g", mt_cpu_isa_name(v->isa), o[0], o[1], o[2], o[3]);
        v->gelu_bwd(o, big, one, 4, false);
        MT_CHECK(o[0] == 1.0f && fabsf(o[1]) < 1e-30f, "%s gelu' at ±12: %g %g",
                 mt_cpu_isa_name(v->isa), o[0], o[1]);
    }
}

MT_TEST(layernorm_against_float64) {
    enum { R = 3 };
    float x[R * MAXN], w[MAXN], b[MAXN], out[R * MAXN], mean[R], rstd[R], dout[R * MAXN];
    float dx[R * MAXN], dw[MAXN], db[MAXN];
    FOR_LEVELS(v) for (int li = 1; li < N_LENS; li++) {
        const int C = LENS[li];
        const char *L = mt_cpu_isa_name(v->isa);
        fill(x, R * C, -2.0f, 3.0f, 11 + (uint64_t)C);
        fill(w, C, 0.5f, 1.5f, 12);
        fill(b, C, -0.5f, 0.5f, 13);
        fill(dout, R * C, -1.0f, 1.0f, 14);
        v->layernorm_fwd(out, mean, rstd, x, w, b, R, C);
        v->layernorm_bwd_input(dx, dout, x, w, mean, rstd, R, C, false);
        memset(dw, 0, sizeof dw);
        memset(db, 0, sizeof db);
        v->layernorm_bwd_params(dw, db, dout, x, mean, rstd, R, C);
        double dw64[MAXN] = {0}, db64[MAXN] = {0};
        for (int r = 0; r < R; r++) {
            const float *xr = x + r * C, *dr = dout + r * C;
            double m = 0, var = 0, a = 0, c = 0;
            for (int i = 0; i < C; i++) m += xr[i];
            m /= C;
            for (int i = 0; i < C; i++) var += (xr[i] - m) * (xr[i] - m);
            const double rs = 1.0 / sqrt(var / C + 1e-5);
            MT_CHECK_CLOSE(mean[r], m, 1e-6, "%s ln mean C=%d", L, C);
            MT_CHECK_CLOSE(rstd[r], rs, 1e-5, "%s ln rstd C=%d", L, C);
            for (int i = 0; i < C; i++) {
                double xh = (xr[i] - m) * rs;
                MT_CHECK_CLOSE(out[r * C + i], xh * w[i] + b[i], 1e-5, "%s ln out C=%d", L, C);
                a += w[i] * dr[i];
                c += w[i] * dr[i] * xh;
                dw64[i] += dr[i] * xh;
                db64[i] += dr[i];
            }
            a /= C;
            c /= C;
            for (int i = 0; i < C; i++) {
                double xh = (xr[i] - m) * rs;
                MT_CHECK_CLOSE(dx[r * C + i], rs * (w[i] * dr[i] - a - xh * c), 1e-4,
                               "%s ln dx C=%d i=%d", L, C, i);
            }
        }
        for (int i = 0; i < C; i++) {
            MT_CHECK_CLOSE(dw[i], dw64[i], 1e-5, "%s ln dw C=%d", L, C);
            MT_CHECK_CLOSE(db[i], db64[i], 1e-5, "%s ln db C=%d", L, C);
        }
    }
}

static double sigmoid64(double a) { return 1.0 / (1.0 + exp(-a)); }

MT_TEST(swiglu_against_float64) {
    float a[MAXN], b[MAXN], g[MAXN], y[MAXN], da[MAXN], db[MAXN];
    FOR_LEVELS(v) {
        const char *L = mt_cpu_isa_name(v->isa);
        for (int k = 0; k < N_LENS; k++) {
            const int n = LENS[k];
            fill(a, n, -8.0f, 8.0f, 21 + (uint64_t)n);
            fill(b, n, -2.0f, 2.0f, 22);
            fill(g, n, -1.0f, 1.0f, 23);
            v->swiglu_fwd(y, a, b, n);
            v->swiglu_bwd_a(da, a, b, g, n, false);
            v->swiglu_bwd_b(db, a, g, n, false);
            for (int i = 0; i < n; i++) {
                /* silu(a) b, and its derivatives by central differences */
                const double s = a[i] * sigmoid64(a[i]), h = 1e-4;
                const double fd = ((a[i] + h) * sigmoid64(a[i] + h) -
                                   (a[i] - h) * sigmoid64(a[i] - h)) / (2 * h);
                MT_CHECK_CLOSE(y[i], s * b[i], 2e-6, "%s swiglu n=%d a=%g", L, n, a[i]);
                MT_CHECK_CLOSE(da[i], fd * b[i] * g[i], 1e-5, "%s swiglu da n=%d a=%g", L, n,
                               a[i]);
                MT_CHECK_CLOSE(db[i], s * g[i], 2e-6, "%s swiglu db n=%d a=%g", L, n, a[i]);
            }
            /* the fused backward: the two kernels' bits, each acc on and off */
            float fa[MAXN], fb[MAXN];
            for (int acc = 0; acc < 4; acc++) {
                memcpy(fa, da, sizeof fa), memcpy(fb, db, sizeof fb);
                v->swiglu_bwd(fa, fb, a, b, g, n, acc & 1, acc >> 1);
                float wa[MAXN], wb[MAXN];
                memcpy(wa, da, sizeof wa), memcpy(wb, db, sizeof wb);
                v->swiglu_bwd_a(wa, a, b, g, n, acc & 1);
                v->swiglu_bwd_b(wb, a, g, n, acc >> 1);
                MT_CHECK(!memcmp(fa, wa, (size_t)n * sizeof *fa) &&
                         !memcmp(fb, wb, (size_t)n * sizeof *fb),
                         "%s swiglu_bwd n=%d acc %d: not the bits of bwd_a and bwd_b", L, n, acc);
            }
            v->swiglu_bwd_a(da, a, b, g, n, true);   /* += : twice */
            v->swiglu_bwd_b(db, a, g, n, true);
            for (int i = 0; i < n; i++) {
                const double s = a[i] * sigmoid64(a[i]);
                MT_CHECK_CLOSE(db[i], 2 * s * g[i], 4e-6, "%s swiglu db acc n=%d", L, n);
            }
        }
    }
}

MT_TEST(rmsnorm_against_float64) {
    enum { R = 3 };
    float x[R * MAXN], w[MAXN], dout[R * MAXN], out[R * MAXN], rstd[R], dx[R * MAXN],
          dw[MAXN];
    const float eps = 1e-5f;
    FOR_LEVELS(v) {
        const char *L = mt_cpu_isa_name(v->isa);
        for (int k = 0; k < N_LENS; k++) {
            const int C = LENS[k];
            if (C == 0) continue;
            fill(x, R * C, -2.0f, 3.0f, 31 + (uint64_t)C);
            fill(w, C, 0.5f, 1.5f, 32);
            fill(dout, R * C, -1.0f, 1.0f, 33);
            v->rmsnorm_fwd(out, rstd, x, w, R, C, eps);
            v->rmsnorm_bwd_input(dx, dout, x, w, rstd, R, C, false);
            memset(dw, 0, sizeof dw);
            v->rmsnorm_bwd_params(dw, dout, x, rstd, R, C);
            double dw64[MAXN] = {0};
            for (int r = 0; r < R; r++) {
                const float *xr = x + r * C, *dr = dout + r * C;
                double ms = 0, c = 0;
                for (int i = 0; i < C; i++) ms += (double)xr[i] * xr[i];
                const double rs = 1.0 / sqrt(ms / C + eps);
                MT_CHECK_CLOSE(rstd[r], rs, 1e-5, "%s rms rstd C=%d", L, C);
                /* out = x·rs·w; dx = rs·(w·dout - xh·mean(w·dout·xh)), xh = x·rs */
                for (int i = 0; i < C; i++) {
                    const double xh = xr[i] * rs;
                    MT_CHECK_CLOSE(out[r * C + i], xh * w[i], 1e-5, "%s rms out C=%d", L, C);
                    c += w[i] * dr[i] * xh;
                    dw64[i] += dr[i] * xh;
                }
                c /= C;
                for (int i = 0; i < C; i++) {
                    const double xh = xr[i] * rs;
                    MT_CHECK_CLOSE(dx[r * C + i], rs * (w[i] * dr[i] - xh * c), 1e-4,
                                   "%s rms dx C=%d i=%d", L, C, i);
                }
            }
            for (int i = 0; i < C; i++)
                MT_CHECK_CLOSE(dw[i], dw64[i], 1e-5, "%s rms dw C=%d", L, C);
        }
    }
}

MT_TEST(adamw_against_float64) {
    float p[MAXN], g[MAXN], m[MAXN], vv[MAXN];
    const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
    const float c1 = 1.0f - 0.9f * 0.9f, c2 = 1.0f - 0.95f * 0.95f;   /* step 2 */
    FOR_LEVELS(v) for (int li = 0; li < N_LENS; li++) {
        const int n = LENS[li];
        fill(p, n, -1, 1, 21);
        fill(g, n, -1, 1, 22);
        fill(m, n, -0.1f, 0.1f, 23);
        fill(vv, n, 0, 0.01f, 24);
        double p0[MAXN], m0[MAXN], v0[MAXN];
        for (int i = 0; i < n; i++) p0[i] = p[i], m0[i] = m[i], v0[i] = vv[i];
        v->adamw(p, g, m, vv, n, lr, b1, b2, eps, wd, gs, c1, c2);
        for (int i = 0; i < n; i++) {
            double gi = (double)gs * g[i], mi = b1 * m0[i] + (1 - (double)b1) * gi;
            double vi = b2 * v0[i] + (1 - (double)b2) * gi * gi;
            double pi = p0[i] - lr * ((mi / c1) / (sqrt(vi / c2) + eps) + wd * p0[i]);
            MT_CHECK_CLOSE(m[i], mi, 1e-6, "%s adamw m n=%d", mt_cpu_isa_name(v->isa), n);
            MT_CHECK_CLOSE(vv[i], vi, 1e-6, "%s adamw v n=%d", mt_cpu_isa_name(v->isa), n);
            MT_CHECK_CLOSE(p[i], pi, 1e-6, "%s adamw p n=%d", mt_cpu_isa_name(v->isa), n);
        }
    }
}

/* Any split of an elementwise kernel's range gives the whole range's
 * numbers bit for bit (how threads and shards call them). */
MT_TEST(elementwise_results_do_not_depend_on_the_split) {
    enum { N = 301 };
    float x[N], g[N], whole[N], parts[N];
    fill(x, N, -5, 5, 31);
    fill(g, N, -1, 1, 32);
    FOR_LEVELS(v) for (int cut = 0; cut <= N; cut += 7) {
        const char *L = mt_cpu_isa_name(v->isa);
        v->gelu_fwd(whole, x, N);
        v->gelu_fwd(parts, x, cut);
        v->gelu_fwd(parts + cut, x + cut, N - cut);
        MT_CHECK(memcmp(whole, parts, sizeof whole) == 0, "%s gelu split at %d", L, cut);
        v->gelu_bwd(whole, x, g, N, false);
        v->gelu_bwd(parts, x, g, cut, false);
        v->gelu_bwd(parts + cut, x + cut, g + cut, N - cut, false);
        MT_CHECK(memcmp(whole, parts, sizeof whole) == 0, "%s gelu' split at %d", L, cut);
        v->scale_exp(whole, x, N, 1.0f, 0.25f, false);
        v->scale_exp(parts, x, cut, 1.0f, 0.25f, false);
        v->scale_exp(parts + cut, x + cut, N - cut, 1.0f, 0.25f, false);
        MT_CHECK(memcmp(whole, parts, sizeof whole) == 0, "%s scale_exp split at %d", L, cut);
        float p1[N], m1[N], v1[N], p2[N], m2[N], v2[N];
        for (int i = 0; i < N; i++) p1[i] = p2[i] = x[i], m1[i] = m2[i] = 0.1f * g[i], v1[i] = v2[i] = 0.01f;
        v->adamw(p1, g, m1, v1, N, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0.1f, 0.05f);
        v->adamw(p2, g, m2, v2, cut, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0.1f, 0.05f);
        v->adamw(p2 + cut, g + cut, m2 + cut, v2 + cut, N - cut, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f,
                 1.0f, 0.1f, 0.05f);
        MT_CHECK(memcmp(p1, p2, sizeof p1) == 0 && memcmp(m1, m2, sizeof m1) == 0 &&
                 memcmp(v1, v2, sizeof v1) == 0, "%s adamw split at %d", L, cut);
    }
}

/* (b > a || b != b) ? b : a and its min: the scalar definition the
 * transports' NaN-propagating max and min keep */
static float max_nan(float a, float b) { return (b > a || b != b) ? b : a; }
static float min_nan(float a, float b) { return (b < a || b != b) ? b : a; }

static int lines_stored;
static void count_line(void *dst, const float *src) {
    memcpy(dst, src, 64);
    lines_stored++;
}

MT_TEST(reductions_exact_with_nan) {
    float d[MAXN], s[MAXN], d0[MAXN];
    FOR_LEVELS(v) for (int li = 0; li < N_LENS; li++) {
        const int n = LENS[li];
        const char *L = mt_cpu_isa_name(v->isa);
        for (int op = 0; op < MT_VEC_N_OPS; op++) {
            fill(d0, n, -4, 4, 41);
            fill(s, n, -4, 4, 42);
            if (n > 3) { d0[1] = NAN; s[2] = NAN; s[3] = INFINITY; }
            for (int i = 0; i < n; i++) d[i] = d0[i];
            v->reduce_into[op](d, s, (size_t)n);
            for (int i = 0; i < n; i++) {
                float want = op == MT_VEC_SUM ? d0[i] + s[i]
                           : op == MT_VEC_MAX ? max_nan(d0[i], s[i]) : min_nan(d0[i], s[i]);
                MT_CHECK(memcmp(&d[i], &want, sizeof want) == 0 || (want != want && d[i] != d[i]),
                         "%s reduce op %d n=%d i=%d: %g, want %g", L, op, n, i, d[i], want);
            }
        }
        /* three sources into two destinations (one of them a source: in
         * place), with and without the line store */
        enum { P = 3 };
        float a[P][MAXN], out2[MAXN];
        for (int k = 0; k < P; k++) fill(a[k], n, -1, 1, 50 + (uint64_t)k);
        if (n > 5) a[1][5] = NAN;
        for (int op = 0; op < MT_VEC_N_OPS; op++)
            for (int use_line = 0; use_line < 2; use_line++) {
                float src0[MAXN];
                memcpy(src0, a[0], sizeof src0);
                const float *src[P] = {src0, a[1], a[2]};
                float *dst[2] = {src0, out2};
                lines_stored = 0;
                v->reduce_bcast[op](src, P, 0, dst, 2, 0, (size_t)n, use_line ? count_line : NULL);
                MT_CHECK(lines_stored == (use_line ? 2 * (n / 16) : 0), "%s lines %d n=%d", L,
                         lines_stored, n);
                for (int i = 0; i < n; i++) {
                    float want = a[0][i];
                    for (int k = 1; k < P; k++)
                        want = op == MT_VEC_SUM ? want + a[k][i]
                             : op == MT_VEC_MAX ? max_nan(want, a[k][i]) : min_nan(want, a[k][i]);
                    for (int t = 0; t < 2; t++)
                        MT_CHECK(memcmp(&dst[t][i], &want, sizeof want) == 0 ||
                                 (want != want && dst[t][i] != dst[t][i]),
                                 "%s reduce_bcast op %d n=%d i=%d dst %d", L, op, n, i, t);
                }
            }
    }
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
