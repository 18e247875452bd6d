/*
 * kernels.h — the compute kernels behind the ops (internal).
 *
 * Pure functions over dense row-major float buffers; no allocation, no graph.
 * Each states its shapes. `acc` selects out = result (false) or out += result
 * (true): the autodiff sets it so the first contributor to a gradient writes
 * and later ones add, and parameter gradients always add (that is gradient
 * accumulation over microbatches).
 *
 * Shape letters: B batch, T time, C channels, NH heads, HS = C/NH head size,
 * V vocabulary, Vp padded vocabulary, rows = any number of leading rows.
 */
#ifndef MT_KERNELS_H
#define MT_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- matmul (matmul.c) --------------------------------------------------- */

/* C (M,N) = alpha · op(A) · op(B) + beta · C, through CBLAS sgemm, row-major.
 * op(A) is (M,K): A is (M,K) with lda >= K, or (K,M) with lda >= M if ta.
 * op(B) is (K,N): B is (K,N) with ldb >= N, or (N,K) with ldb >= K if tb. */
void mt_kernel_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                    const float *A, int64_t lda, const float *B, int64_t ldb,
                    float beta, float *C, int64_t ldc);

/* out (rows,OC) += bias (OC) on every row. */
void mt_kernel_bias_add(float *out, const float *bias, int64_t rows, int64_t OC);

/* dbias (OC) (+)= Σ_rows dout (rows,OC). */
void mt_kernel_bias_grad(float *dbias, const float *dout, int64_t rows, int64_t OC, bool acc);

/* ---- elementwise (elementwise.c) ----------------------------------------- */
/* Broadcast: a and out have n elements, b has nb elements, n % nb == 0, and
 * b repeats: b_i = b[i % nb]. */

void mt_kernel_add_fwd(float *out, const float *a, const float *b, int64_t n, int64_t nb);
void mt_kernel_sub_fwd(float *out, const float *a, const float *b, int64_t n, int64_t nb);
void mt_kernel_mul_fwd(float *out, const float *a, const float *b, int64_t n, int64_t nb);

/* out (n) (+)= s · a (n). */
void mt_kernel_scale(float *out, const float *a, float s, int64_t n, bool acc);

/* db (nb) (+)= s · Σ_{i ≡ j mod nb} dout[i]  (the backward of a broadcast). */
void mt_kernel_reduce_broadcast(float *db, const float *dout, float s, int64_t n, int64_t nb, bool acc);

/* da (n) (+)= dout (n) · b (nb, broadcast). */
void mt_kernel_mul_bwd_a(float *da, const float *dout, const float *b, int64_t n, int64_t nb, bool acc);

/* db (nb) (+)= Σ_{i ≡ j mod nb} dout[i] · a[i]. */
void mt_kernel_mul_bwd_b(float *db, const float *dout, const float *a, int64_t n, int64_t nb, bool acc);

/* GELU, tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))). */
void mt_kernel_gelu_fwd(float *out, const float *x, int64_t n);
/* dx (n) (+)= gelu'(x) · dout. */
void mt_kernel_gelu_bwd(float *dx, const float *x, const float *dout, int64_t n, bool acc);

/* SwiGLU's middle, silu(a) = a·σ(a), σ(a) = 1/(1 + exp(-a)), on the vector
 * layer: out (n) = silu(a (n)) · b (n); da (n) (+)= dout · b · σ(a)·(1 +
 * a·(1 - σ(a))); db (n) (+)= dout · silu(a). */
void mt_kernel_swiglu_fwd(float *out, const float *a, const float *b, int64_t n);
void mt_kernel_swiglu_bwd_a(float *da, const float *a, const float *b, const float *dout,
                            int64_t n, bool acc);
void mt_kernel_swiglu_bwd_b(float *db, const float *a, const float *dout, int64_t n, bool acc);
/* Both at once (one pass, σ once): da (+= with acc_a) and db (+= with
 * acc_b), bit for bit the two above. */
void mt_kernel_swiglu_bwd(float *da, float *db, const float *a, const float *b, const float *dout,
                          int64_t n, bool acc_a, bool acc_b);

/* out (batch,Cc,R) = in (batch,R,Cc) with the last two dims swapped; (+)= if acc. */
void mt_kernel_transpose(float *out, const float *in, int64_t batch, int64_t R, int64_t Cc, bool acc);

/* ---- layernorm (norm.c) -------------------------------------------------- */

/* out (rows,C) = (x - mean) · rstd · w (C) + b (C); saves mean (rows) and
 * rstd (rows) = 1/sqrt(var + 1e-5), var the biased variance. */
void mt_kernel_layernorm_fwd(float *out, float *mean, float *rstd, const float *x,
                             const float *w, const float *b, int64_t rows, int64_t C);
/* dx (rows,C) (+)= the input gradient (the B part). */
void mt_kernel_layernorm_bwd_input(float *dx, const float *dout, const float *x,
                                   const float *w, const float *mean, const float *rstd,
                                   int64_t rows, int64_t C, bool acc);
/* dw (C) += Σ_rows dout · xhat, db (C) += Σ_rows dout (the W part; always adds). */
void mt_kernel_layernorm_bwd_params(float *dw, float *db, const float *dout, const float *x,
                                    const float *mean, const float *rstd, int64_t rows, int64_t C);

/* ---- rmsnorm (norm.c) ---------------------------------------------------- */

/* out (rows,C) = x · rstd · w (C); saves rstd (rows) = 1/sqrt(mean_C x² + eps). */
void mt_kernel_rmsnorm_fwd(float *out, float *rstd, const float *x, const float *w,
                           int64_t rows, int64_t C, float eps);
/* dx (rows,C) (+)= rstd · (w·dout - xhat · mean_C(w·dout·xhat)), xhat = x·rstd
 * (the input gradient, the B part). */
void mt_kernel_rmsnorm_bwd_input(float *dx, const float *dout, const float *x, const float *w,
                                 const float *rstd, int64_t rows, int64_t C, bool acc);
/* dw (C) += Σ_rows dout · x · rstd (the W part; always adds). */
void mt_kernel_rmsnorm_bwd_params(float *dw, const float *dout, const float *x,
                                  const float *rstd, int64_t rows, int64_t C);

/* ---- attention (attention.c) --------------------------------------------- */

/* Where one attention call's operands live: q (B,T,NH·HS) row stride ldq,
 * k and v (B,T,KV·HS) row strides ldk and ldv, out (B,T,NH·HS) row stride
 * ldo; each gradient is laid out as its tensor (dq as q, dout as out).
 * Query head h reads kv head (hoff + h) / G, which must be in [0, KV): G =
 * NH / KV and hoff = 0 for a whole op; a device holding a share of the
 * heads keeps the whole op's G and sets hoff (ops_impl.h, mt_gqa_params).
 * The GPT's packed qkv (B,T,3C): q = qkv, k = qkv + C, v = qkv + 2C,
 * ldq = ldk = ldv = 3C, ldo = C, KV = NH, G = 1.
 * doc (B,T): each token's document id, a query seeing only the keys of its
 * own document (packed sequences), or NULL: one document. full: every key
 * is seen (no causal mask); false (the default) is causal.
 * Tk: keys (and k, v rows) per sequence, 0: T. qpos (T) and kpos (Tk): each
 * query row's and key row's position in the whole sequence, the same for
 * every b (a context-parallel device's queries against the gathered keys,
 * ../shared/CONTEXT_PARALLEL.md §5), or NULL: the row index (then Tk = T).
 * With positions the causal test is kpos <= qpos, and every query's own
 * position must be among the keys (or the call be one block of a split
 * row's keys: a row no key of the call can be seen from gets out = 0 and
 * lse = -inf, which the caller's log-sum-exp merge skips).
 * Documents with positions or Tk != T: kdoc (B,Tk) the keys' ids (NULL:
 * doc's, which needs Tk = T), and ldd doc's row stride (0: T), so doc may
 * point into kdoc's rows (a context-parallel device's queries are its
 * rows of the gathered ids). */
typedef struct {
    int64_t B, T, NH, KV, HS, G, hoff;
    int64_t ldq, ldk, ldv, ldo;
    const int32_t *doc;
    bool    full;
    int64_t Tk;
    const int32_t *qpos, *kpos;
    const int32_t *kdoc;
    int64_t ldd;
} mt_attn_layout;

/* The backward's outputs: each NULL (not computed) or (+)= as acc_q (dq)
 * and acc_kv (dk and dv) say. */
typedef struct {
    float *dq, *dk, *dv;
    bool   acc_q, acc_kv;
} mt_attn_grads;

/* Floats of scratch one concurrent caller of the attention kernels needs
 * for sequences of Tk keys (k, v rows) of head size HS: a few tiles, and
 * from 1024 keys on four (Tk,HS) copies of a kv head's rows (linear in T;
 * no T×T buffer). */
size_t mt_kernel_attention_scratch(int64_t Tk, int64_t HS);

/* Flash attention (FlashAttention-2's tiling on the CPU). out_h =
 * softmax(q_h·k_jᵀ/√HS, causal and document masks) · v_j for query head h
 * and its kv head j; saves each row's log-sum-exp of the masked scaled
 * scores, lse (B,NH,T): the only statistics the backward needs.
 *
 * The forward processes the (batch, query head) pairs bh = b·NH + h in
 * [bh0, bh1) (0 <= bh0 <= bh1 <= B·NH), touching only lse's row bh and
 * out's head-h columns of batch b; the backward the (batch, kv head) groups
 * g = b·KV + j in [g0, g1) (<= B·KV), touching only dq's columns of the
 * heads that read j and dk's and dv's of head j, which those heads add into
 * in head order. So threads may run disjoint ranges on the same buffers at
 * once, and any split gives bit for bit the result of the whole range.
 * Pointers are to the whole (B,...) buffers. scratch holds
 * mt_kernel_attention_scratch(Tk, HS) floats (Tk: L's keys, T when 0),
 * private to the call: give each
 * concurrent caller its own. The products run on the vector layer's tile
 * micro-kernel (vec/vec_tile.h), single-threaded; at the generic level on
 * Open BLAS (cblas_sgemm on tiles, with whatever threading it is set to:
 * the graph sets one thread and splits the work over its pool). */
void mt_kernel_attention_fwd(float *out, float *lse, const float *q, const float *k,
                             const float *v, const mt_attn_layout *L, float *scratch,
                             int64_t bh0, int64_t bh1);
/* The gradients of the groups [g0, g1), from dout, q, k, v and the
 * forward's out and lse (out may be NULL when neither dq nor dk is wanted);
 * a kv head no query head of the call reads (hoff > 0) gets dk = dv = 0
 * unless they add. */
void mt_kernel_attention_bwd(const mt_attn_grads *d, const float *dout, const float *q,
                             const float *k, const float *v, const float *out, const float *lse,
                             const mt_attn_layout *L, float *scratch, int64_t g0, int64_t g1);

/* ---- embedding (embedding.c) --------------------------------------------- */

/* out (n,C) = table (V,C)[ids (n)]. */
void mt_kernel_embedding_fwd(float *out, const float *table, const int32_t *ids, int64_t n, int64_t C);
/* dtable (V,C) += scatter of dout (n,C) at ids (n) (always adds). */
void mt_kernel_embedding_bwd(float *dtable, const float *dout, const int32_t *ids, int64_t n, int64_t C);
/* The masked forms (a vocabulary-parallel table holding rows [lo, lo+V)):
 * an id outside reads a row of zeros, and scatters nothing. */
void mt_kernel_embedding_fwd_masked(float *out, const float *table, const int32_t *ids, int64_t n,
                                    int64_t C, int64_t lo, int64_t V);
void mt_kernel_embedding_bwd_masked(float *dtable, const float *dout, const int32_t *ids, int64_t n,
                                    int64_t C, int64_t lo, int64_t V);

/* ---- losses (loss.c) ----------------------------------------------------- */

/* Fused softmax cross-entropy over the first V of Vp columns of logits
 * (rows,Vp). Saves lse (rows) = log Σ_{j<V} exp(logits[r,j]). Returns
 * scale · Σ_{rows with target >= 0} (lse - logits[r, target]). Accumulates in
 * double. */
double mt_kernel_cross_entropy_fwd(float *lse, const float *logits, const int32_t *targets,
                                   int64_t rows, int64_t V, int64_t Vp, float scale);
/* dlogits (rows,Vp) (+)= dloss · scale · (softmax - onehot(target)) for
 * columns < V of rows with target >= 0; 0 elsewhere (padding, skipped rows). */
void mt_kernel_cross_entropy_bwd(float *dlogits, const float *logits, const float *lse,
                                 const int32_t *targets, float dloss, int64_t rows,
                                 int64_t V, int64_t Vp, float scale, bool acc);

/* Returns scale · Σ (pred - target)² over n elements (in double). */
double mt_kernel_mse_fwd(const float *pred, const float *target, int64_t n, float scale);
/* dpred (n) (+)= dloss · 2 · scale · (pred - target). */
void mt_kernel_mse_bwd(float *dpred, const float *pred, const float *target, float dloss,
                       int64_t n, float scale, bool acc);

/* ---- reductions (reduce.c) ----------------------------------------------- */

/* Σ x over n elements, in double. */
double mt_kernel_sum(const float *x, int64_t n);
/* Σ x², in double. */
double mt_kernel_sumsq(const float *x, int64_t n);
/* dx (n) (+)= s (the backward of sum: a broadcast of the scalar). */
void   mt_kernel_fill(float *dx, float s, int64_t n, bool acc);

/* ---- optimizers (optim_kernels.c) ---------------------------------------- */

/* AdamW, decoupled weight decay, bias-corrected, on n elements. The gradient
 * is multiplied by gscale first (global-norm clipping). t is the 1-based step.
 *   g' = gscale·g; m = b1·m + (1-b1)·g'; v = b2·v + (1-b2)·g'²
 *   p -= lr · ( (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd·p ) */
void mt_kernel_adamw(float *p, const float *g, float *m, float *v, int64_t n, float lr,
                     float b1, float b2, float eps, float wd, float gscale, int t);
/* SGD with optional momentum (mom may be NULL when momentum == 0) and decoupled
 * weight decay: g' = gscale·g; mom = momentum·mom + g'; p -= lr·(mom + wd·p). */
void mt_kernel_sgd(float *p, const float *g, float *mom, int64_t n, float lr,
                   float momentum, float wd, float gscale);

#endif /* MT_KERNELS_H */
