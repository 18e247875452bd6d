/*
 * vec.h — the vector kernels, one table per kernel level, picked at run time
 * (internal).
 *
 * The hot loops of the elementwise and reduction ops (softmax and
 * cross-entropy, GELU, SwiGLU, layernorm, rmsnorm, attention's softmax, AdamW) and the
 * collectives' adds are written once, in vec_body.h, against a handful of
 * vector macros, and compiled once per level (vec_generic.c, vec_avx2.c,
 * vec_avx512.c, vec_neon.c), each file with its own instruction-set flags:
 * one binary holds every level of its architecture and runs the one
 * mt_get_cpu_isa() names (the CPU's best, capped by MT_CPU_ISA). exp comes
 * from SLEEF (the vector math library PyTorch uses), at 1 ulp, one SLEEF
 * function per level (GELU's tanh is built on it), except in SwiGLU's
 * sigmoid and flash attention's tile columns, which inline a 3-ulp exp of
 * their own (vec_body.h's exp3; SLEEF's at generic); the auto-vectoriser
 * is not trusted with a loop that calls it.
 *
 * Every element of an elementwise kernel goes through the same vector code,
 * the last partial vector included (it is padded through a small buffer),
 * so a kernel's result does not depend on how its range was split over
 * threads: any split gives the whole range's numbers bit for bit. A
 * reduction over a row depends only on the row's length. Levels differ from
 * one another by rounding (a few ulps): a run is bitwise reproducible at a
 * given level, and close to any other level's.
 */
#ifndef MT_VEC_H
#define MT_VEC_H

#include "meshtrain/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reductions of the collectives, indexed as mt_reduce_op (comm.h: sum 0,
 * max 1, min 2; comm/reduce.c checks they agree). */
enum { MT_VEC_SUM = 0, MT_VEC_MAX = 1, MT_VEC_MIN = 2, MT_VEC_N_OPS = 3 };

/* Stores a 64-byte line: dst (16-byte aligned) = src, past the cache when
 * the transport asks (the threads transport's streaming stores, which live
 * above this layer). */
typedef void mt_vec_line_store_fn(void *dst, const float *src);

typedef struct mt_vec_ops {
    mt_cpu_isa isa;
    int        width;                 /* floats per vector */

    /* ---- softmax and cross-entropy rows ---------------------------------- */
    /* max of x (n); -INFINITY for n = 0; a NaN in x is skipped */
    float (*max)(const float *x, int64_t n);
    /* Σ exp(x (n) - m) */
    float (*sum_exp)(const float *x, int64_t n, float m);
    /* y (n) = k · exp(x (n) - l), or += if acc */
    void  (*scale_exp)(float *y, const float *x, int64_t n, float l, float k, bool acc);
    /* a (n) = exp(a - m) in place; returns Σ of the new a (-inf entries give 0) */
    float (*exp_sum)(float *a, int64_t n, float m);
    /* a (n) = softmax(a): exp(a - max) / Σ, in place */
    void  (*softmax)(float *a, int64_t n);
    /* Σ x·y over x, y (n) */
    float (*dot)(const float *x, const float *y, int64_t n);
    /* d (n) = a (n) · (d - s) · k: the softmax backward, in place on d */
    void  (*softmax_bwd)(float *d, const float *a, int64_t n, float s, float k);

    /* ---- flash attention's tiles (vec_tile.h): a tile transposed, a (n
     * keys, m query rows) at row stride ld, a query row's softmax down a
     * column ---------------------------------------------------------- */
    /* mx (m)[i] = max(mx[i], max over the n rows of column i); NaN skipped */
    void  (*cols_max)(float *mx, const float *a, int64_t ld, int64_t n, int64_t m);
    /* a = exp(a - sub[i]) down column i (m columns, n rows) in place; sum
     * (m) the new columns' sums, or NULL */
    void  (*cols_exp)(float *a, int64_t ld, int64_t n, int64_t m, const float *sub, float *sum);
    /* d = p · (d - D[i]) · k down column i, in place on d */
    void  (*cols_softmax_bwd)(float *d, const float *p, int64_t ld, int64_t n, int64_t m,
                              const float *D, float k);
    /* C (M,N) ldc = alpha · op(A) · B (K,N) ldb + beta · C (beta = 0: C is
     * not read); op(A) (M,K) is A (M,K) lda, or A (K,M) lda if ta. B's rows
     * are read as they lie (no packing). A register-blocked micro-kernel
     * with the level's fused multiply-add; NULL at generic (the caller
     * takes Open BLAS). */
    void  (*gemm_tile)(bool ta, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                       int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                       int64_t ldc);

    /* ---- GELU (tanh form) ------------------------------------------------ */
    /* out (n) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), x (n) */
    void  (*gelu_fwd)(float *out, const float *x, int64_t n);
    /* dx (n) (+)= gelu'(x (n)) · dout (n) */
    void  (*gelu_bwd)(float *dx, const float *x, const float *dout, int64_t n, bool acc);

    /* ---- SwiGLU: silu(a) = a·σ(a), σ(a) = 1/(1 + exp(-a)) ------------- */
    /* out (n) = silu(a (n)) · b (n) */
    void  (*swiglu_fwd)(float *out, const float *a, const float *b, int64_t n);
    /* da (n) (+)= dout · b · σ(a)·(1 + a·(1 - σ(a))) */
    void  (*swiglu_bwd_a)(float *da, const float *a, const float *b, const float *dout,
                          int64_t n, bool acc);
    /* db (n) (+)= dout · silu(a) */
    void  (*swiglu_bwd_b)(float *db, const float *a, const float *dout, int64_t n, bool acc);
    /* both at once, σ(a) once: da (+, acc_a) and db (+, acc_b) as the two
     * above, bit for bit */
    void  (*swiglu_bwd)(float *da, float *db, const float *a, const float *b, const float *dout,
                        int64_t n, bool acc_a, bool acc_b);

    /* ---- layernorm rows (ops/kernels.h states the maths) ---------------- */
    void  (*layernorm_fwd)(float *out, float *mean, float *rstd, const float *x, const float *w,
                           const float *b, int64_t rows, int64_t C);
    void  (*layernorm_bwd_input)(float *dx, const float *dout, const float *x, const float *w,
                                 const float *mean, const float *rstd, int64_t rows, int64_t C,
                                 bool acc);
    void  (*layernorm_bwd_params)(float *dw, float *db, const float *dout, const float *x,
                                  const float *mean, const float *rstd, int64_t rows, int64_t C);

    /* ---- rmsnorm rows (ops/kernels.h states the maths) ------------------ */
    void  (*rmsnorm_fwd)(float *out, float *rstd, const float *x, const float *w, int64_t rows,
                         int64_t C, float eps);
    void  (*rmsnorm_bwd_input)(float *dx, const float *dout, const float *x, const float *w,
                               const float *rstd, int64_t rows, int64_t C, bool acc);
    void  (*rmsnorm_bwd_params)(float *dw, const float *dout, const float *x, const float *rstd,
                                int64_t rows, int64_t C);

    /* ---- AdamW on p, g, m, v (n); c1, c2 the bias corrections 1 - b^t --- */
    void  (*adamw)(float *p, const float *g, float *m, float *v, int64_t n, float lr, float b1,
                   float b2, float eps, float wd, float gscale, float c1, float c2);

    /* ---- the collectives' reductions (f32; max and min propagate NaN) --- */
    /* d (n) = d op s (n) */
    void  (*reduce_into[MT_VEC_N_OPS])(float *d, const float *s, size_t n);
    /* dst[k][doff + i] = src[0][soff + i] op ... op src[P-1][soff + i] for
     * i < n and each of the nd destinations (one may be a source: in place),
     * 16 floats (a 64-byte line) at a time, reduced in registers and stored
     * right after being read; a whole line goes through `line` when it is
     * not NULL (streaming stores), else plain stores. */
    void  (*reduce_bcast[MT_VEC_N_OPS])(const float *const *src, int P, size_t soff,
                                        float *const *dst, int nd, size_t doff, size_t n,
                                        mt_vec_line_store_fn *line);
} mt_vec_ops;

/* The table of the level in use (mt_get_cpu_isa()). */
const mt_vec_ops *mt__vec(void);

/* The table of `isa`, or NULL when this build or this CPU has not got it:
 * for tests and benchmarks that run every level side by side. */
const mt_vec_ops *mt__vec_at(mt_cpu_isa isa);

#endif /* MT_VEC_H */
