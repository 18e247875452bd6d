/*
 * bench_attention.c — flash attention (ops/attention.c) forward + backward
 * against the kernel it replaced (below, copied from commit a820823: row
 * blocks of 64, the (T,T) probabilities saved and re-read) and against the
 * same run's one-thread sgemm, on one thread.
 *
 *   bench_attention [T ...]          (default: 1024 4096)
 *
 * Shapes: B = 1, NH = 4 heads of HS = 64 (the GPT's and LLaMA-7B's head
 * size), causal, the LLaMA layout (q, k, v separate, KV = NH). FLOP
 * convention (model FLOPs, as op_cost.c): a causal forward does 4·HS per
 * (query, key) pair with key <= query, pairs = B·NH·T(T+1)/2 ≈ B·NH·T²/2,
 * so forward = 2·B·NH·T²·HS, backward twice that, forward + backward =
 * 6·B·NH·T²·HS; flash's recomputed scores are not counted. The softmax's
 * exp and sums are not counted either. Each figure is the best of REPS.
 * The sgemm reference is (1024 × 1024) · (1024 × 1024), 2·1024³ FLOPs.
 */
#include "meshtrain.h"
#include "ops/kernels.h"
#include "vec/vec.h"

#include <assert.h>
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 3

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ======================================================================== */
/* The kernel flash attention replaced (a820823:src/ops/attention.c)         */
/* ======================================================================== */

#define ATT_BLOCK 64

/* a (T) holds the n = t+1 scores of query row t (keys 0..t), then anything.
 * Makes it the causal softmax row: probabilities over [0, n), 0 over [n, T). */
static inline void softmax_causal_row(const mt_vec_ops *vec, float *restrict a, int64_t n,
                                      int64_t T) {
    vec->softmax(a, n);
    /* the future is stored as 0 so att is a true (T,T) matrix per pair */
    memset(a + n, 0, (size_t)(T - n) * sizeof *a);
}

/* ======================================================================== */
/* Forward                                                                   */
/* ======================================================================== */

/* The kv head query head h reads. */
static inline int64_t old_kv_of(const mt_attn_layout *L, int64_t h) { return (L->hoff + h) / L->G; }

static void old_check_layout(const mt_attn_layout *L) {
    assert(L->NH > 0 && L->KV > 0 && L->HS > 0 && L->G > 0 && L->hoff >= 0);
    assert(old_kv_of(L, 0) >= 0 && old_kv_of(L, L->NH - 1) < L->KV);
}

/* out_h = softmax_causal(q_h·k_jᵀ/√HS) · v_j for the pairs [bh0, bh1); saves
 * their att (T,T) blocks of att (B,NH,T,T) with zeros above the diagonal. */
static void old_attention_fwd(float *restrict out, float *restrict att, const float *q,
                             const float *k, const float *v, const mt_attn_layout *L,
                             int64_t bh0, int64_t bh1) {
    old_check_layout(L);
    assert(0 <= bh0 && bh0 <= bh1 && bh1 <= L->B * L->NH);
    const int64_t T = L->T, NH = L->NH, HS = L->HS;
    const int64_t ldq = L->ldq, ldk = L->ldk, ldv = L->ldv, ldo = L->ldo;
    const float scale = 1.0f / sqrtf((float)HS);
    const mt_vec_ops *vec = mt__vec();
    for (int64_t bh = bh0; bh < bh1; bh++) {
        const int64_t b = bh / NH, h = bh % NH, j = old_kv_of(L, h);
        const float *qh = q + b * T * ldq + h * HS;
        const float *kj = k + b * T * ldk + j * HS, *vj = v + b * T * ldv + j * HS;
        float *o = out + b * T * ldo + h * HS, *a = att + bh * T * T;
        for (int64_t r0 = 0; r0 < T; r0 += ATT_BLOCK) {
            const int64_t r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, m = r1 - r0;
            /* scores a[r0:r1, 0:r1] (m,r1) = scale · q[r0:r1] (m,HS) · k[0:r1]ᵀ (HS,r1) */
            mt_kernel_gemm(false, true, m, r1, HS, scale, qh + r0 * ldq, ldq, kj, ldk,
                           0.0f, a + r0 * T, T);
            for (int64_t t = r0; t < r1; t++) softmax_causal_row(vec, a + t * T, t + 1, T);
            /* o[r0:r1] (m,HS) = a[r0:r1, 0:r1] (m,r1) · v[0:r1] (r1,HS); the
             * zeros above the diagonal make the causal sum exact */
            mt_kernel_gemm(false, false, m, HS, r1, 1.0f, a + r0 * T, T, vj, ldv,
                           0.0f, o + r0 * ldo, ldo);
        }
    }
}

/* ======================================================================== */
/* Backward                                                                  */
/* ======================================================================== */

/* rows (T,HS) at p, leading dimension ld, set to 0 */
static void old_zero_head(float *p, int64_t T, int64_t HS, int64_t ld) {
    for (int64_t t = 0; t < T; t++) memset(p + t * ld, 0, (size_t)HS * sizeof *p);
}

/* The gradients of query head h (whose kv head is j) into d: dq_h (+)= with
 * beta_q, dk_j and dv_j (+)= with beta_kv (the group's first head writes or
 * adds as the call says, the others add). scratch (T·T) holds datt, turned
 * into dpre in place. */
static void old_bwd_head(const mt_attn_grads *d, const float *dout, const float *q, const float *k,
                     const float *v, const float *att, const mt_attn_layout *L, int64_t b,
                     int64_t h, float beta_q, float beta_kv, float *restrict scratch) {
    const int64_t T = L->T, HS = L->HS, j = old_kv_of(L, h);
    const int64_t ldq = L->ldq, ldk = L->ldk, ldv = L->ldv, ldo = L->ldo;
    const float scale = 1.0f / sqrtf((float)HS);
    const mt_vec_ops *vec = mt__vec();
    const float *qh = q + b * T * ldq + h * HS;
    const float *kj = k + b * T * ldk + j * HS, *vj = v + b * T * ldv + j * HS;
    const float *dO = dout + b * T * ldo + h * HS, *a = att + (b * L->NH + h) * T * T;
    float *dq = d->dq ? d->dq + b * T * ldq + h * HS : NULL;
    float *dk = d->dk ? d->dk + b * T * ldk + j * HS : NULL;
    float *dv = d->dv ? d->dv + b * T * ldv + j * HS : NULL;
    float *dp = scratch;
    const bool need_dpre = dq || dk;

    /* by query block: dpre, then dq, which needs only keys [0, r1) */
    for (int64_t r0 = 0; need_dpre && r0 < T; r0 += ATT_BLOCK) {
        const int64_t r1 = r0 + ATT_BLOCK < T ? r0 + ATT_BLOCK : T, m = r1 - r0;
        /* out = att·v: datt[r0:r1, 0:r1] (m,r1) = dO[r0:r1] (m,HS) · v[0:r1]ᵀ */
        mt_kernel_gemm(false, true, m, r1, HS, 1.0f, dO + r0 * ldo, ldo, vj, ldv,
                       0.0f, dp + r0 * T, T);
        /* softmax: dpre = att·(datt - Σ att·datt), with the 1/√HS of the
         * scores folded in; above the diagonal (inside this block) dpre is
         * 0, which the dq and dk products below rely on */
        for (int64_t t = r0; t < r1; t++) {
            const float *restrict ar = a + t * T;
            float *restrict dr = dp + t * T;
            vec->softmax_bwd(dr, ar, t + 1, vec->dot(ar, dr, t + 1), scale);
            memset(dr + t + 1, 0, (size_t)(r1 - t - 1) * sizeof *dr);
        }
        /* pre = q·kᵀ: dq[r0:r1] (m,HS) (+)= dpre[r0:r1, 0:r1] (m,r1) · k[0:r1] */
        if (dq)
            mt_kernel_gemm(false, false, m, HS, r1, 1.0f, dp + r0 * T, T, kj, ldk,
                           beta_q, dq + r0 * ldq, ldq);
    }
    /* by key block [c0, c1): only queries [c0, T) see these keys.
     * dk[c0:c1] (m,HS) (+)= dpre[c0:T, c0:c1]ᵀ (m,T-c0) · q[c0:T] (T-c0,HS)
     * dv[c0:c1] (m,HS) (+)= att [c0:T, c0:c1]ᵀ (m,T-c0) · dO[c0:T] (T-c0,HS) */
    for (int64_t c0 = 0; c0 < T; c0 += ATT_BLOCK) {
        const int64_t c1 = c0 + ATT_BLOCK < T ? c0 + ATT_BLOCK : T, m = c1 - c0;
        if (dk)
            mt_kernel_gemm(true, false, m, HS, T - c0, 1.0f, dp + c0 * T + c0, T,
                           qh + c0 * ldq, ldq, beta_kv, dk + c0 * ldk, ldk);
        if (dv)
            mt_kernel_gemm(true, false, m, HS, T - c0, 1.0f, a + c0 * T + c0, T,
                           dO + c0 * ldo, ldo, beta_kv, dv + c0 * ldv, ldv);
    }
}

/* The gradients (d's, each NULL or (+)= as its acc says) from dout, q, k, v
 * and the saved att, for the (batch, kv head) groups [g0, g1). Each of a
 * row block's gemms writes it once per head, so acc is the first head's
 * beta: no memset, except for a kv head that none of this call's query
 * heads reads (a device's share of the heads), whose dk, dv are 0. */
static void old_attention_bwd(const mt_attn_grads *d, const float *dout, const float *q,
                             const float *k, const float *v, const float *att,
                             const mt_attn_layout *L, float *restrict scratch,
                             int64_t g0, int64_t g1) {
    old_check_layout(L);
    assert(0 <= g0 && g0 <= g1 && g1 <= L->B * L->KV);
    const int64_t T = L->T, HS = L->HS, KV = L->KV;
    for (int64_t g = g0; g < g1; g++) {
        const int64_t b = g / KV, j = g % KV;
        /* the query heads [h0, h1) that read kv head j */
        int64_t h0 = j * L->G - L->hoff, h1 = h0 + L->G;
        if (h0 < 0) h0 = 0;
        if (h1 > L->NH) h1 = L->NH;
        if (h0 >= h1) {
            if (d->dk && !d->acc_kv) old_zero_head(d->dk + b * T * L->ldk + j * HS, T, HS, L->ldk);
            if (d->dv && !d->acc_kv) old_zero_head(d->dv + b * T * L->ldv + j * HS, T, HS, L->ldv);
            continue;
        }
        for (int64_t h = h0; h < h1; h++)
            old_bwd_head(d, dout, q, k, v, att, L, b, h, d->acc_q ? 1.0f : 0.0f,
                     h == h0 && !d->acc_kv ? 0.0f : 1.0f, scratch);
    }
}

/* ======================================================================== */
/* The benchmark                                                             */
/* ======================================================================== */

static float *randv(size_t n, unsigned seed) {
    float *p = malloc(n * sizeof *p);
    if (!p) { fprintf(stderr, "meshtrain: bench_attention: out of memory (%zu floats)\n", n); exit(1); }
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * mt_rng_uniform(seed, 0, i) - 1.0f;
    return p;
}

static double sgemm_gflops(void) {
    const int n = 1024;
    float *a = randv((size_t)n * n, 1), *b = randv((size_t)n * n, 2), *c = randv((size_t)n * n, 3);
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double t = now() - t0;
        best = t < best ? t : best;
    }
    free(a); free(b); free(c);
    return 2.0 * n * (double)n * n / best * 1e-9;
}

int main(int argc, char **argv) {
    mt_set_num_threads(1);   /* Open BLAS on one thread */
    int64_t Ts[16] = {1024, 4096};
    int nT = 2;
    if (argc > 1) {
        nT = 0;
        for (int i = 1; i < argc && nT < 16; i++) {
            Ts[nT] = atoll(argv[i]);
            if (Ts[nT] < 1) {
                fprintf(stderr, "meshtrain: bench_attention: T '%s' must be a positive integer\n", argv[i]);
                return 2;
            }
            nT++;
        }
    }
    const int64_t B = 1, NH = 4, HS = 64, C = NH * HS;
    const double sg = sgemm_gflops();
    printf("one thread, B=%lld NH=%lld HS=%lld causal; sgemm 1024^3: %.1f GFLOP/s\n",
           (long long)B, (long long)NH, (long long)HS, sg);
    printf("%-8s %-6s %10s %10s %10s %12s %10s\n", "kernel", "T", "fwd ms", "bwd ms",
           "GFLOP/s", "saved bytes", "/ sgemm");
    for (int i = 0; i < nT; i++) {
        const int64_t T = Ts[i];
        mt_attn_layout L = {.B = B, .T = T, .NH = NH, .KV = NH, .HS = HS, .G = 1,
                            .ldq = C, .ldk = C, .ldv = C, .ldo = C};
        const size_t n = (size_t)(B * T * C);
        float *q = randv(n, 4), *k = randv(n, 5), *v = randv(n, 6), *dout = randv(n, 7);
        float *out = malloc(n * sizeof *out), *dq = malloc(n * sizeof *dq);
        float *dk = malloc(n * sizeof *dk), *dv = malloc(n * sizeof *dv);
        const double pairs = (double)(B * NH) * (double)T * (double)(T + 1) / 2;
        const double flops = 12.0 * pairs * (double)HS;   /* forward 4·HS a pair, backward 8·HS */
        double rate[2] = {0};
        for (int flash = 0; flash < 2; flash++) {
            /* old: att (B,NH,T,T) and a (T,T) scratch; flash: lse (B,NH,T), tiles */
            const size_t saved = flash ? (size_t)(B * NH * T) : (size_t)(B * NH * T * T);
            const size_t scr = flash ? mt_kernel_attention_scratch() : (size_t)(T * T);
            float *aux = malloc(saved * sizeof *aux), *scratch = malloc(scr * sizeof *scratch);
            if (!aux || !scratch) {
                printf("%-8s %-6lld (no memory for %zu floats)\n", flash ? "flash" : "old",
                       (long long)T, saved + scr);
                free(aux); free(scratch);
                continue;
            }
            mt_attn_grads g = {dq, dk, dv, false, false};
            double bf = 1e30, bb = 1e30;
            for (int r = 0; r < REPS; r++) {
                double t0 = now();
                if (flash) mt_kernel_attention_fwd(out, aux, q, k, v, &L, scratch, 0, B * NH);
                else old_attention_fwd(out, aux, q, k, v, &L, 0, B * NH);
                double t1 = now();
                if (flash) mt_kernel_attention_bwd(&g, dout, q, k, v, out, aux, &L, scratch, 0, B * NH);
                else old_attention_bwd(&g, dout, q, k, v, aux, &L, scratch, 0, B * NH);
                double t2 = now();
                bf = t1 - t0 < bf ? t1 - t0 : bf;
                bb = t2 - t1 < bb ? t2 - t1 : bb;
            }
            rate[flash] = flops / (bf + bb) * 1e-9;
            printf("%-8s %-6lld %10.2f %10.2f %10.1f %12zu %10.2f\n", flash ? "flash" : "old",
                   (long long)T, bf * 1e3, bb * 1e3, rate[flash], saved * sizeof(float),
                   rate[flash] / sg);
            if (flash && rate[0] > 0) printf("%-8s %-6lld flash / old: %.2fx\n", "", (long long)T,
                                             rate[1] / rate[0]);
            free(aux); free(scratch);
        }
        free(q); free(k); free(v); free(dout); free(out); free(dq); free(dk); free(dv);
    }
    return 0;
}
