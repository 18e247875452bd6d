/*
 * bf16_impl.h — bf16 matrix products on oneDNN (internal; matmul_bf16.c).
 *
 * A product C (M,N) (+)= op(A) (M,K) · op(B) (K,N) with A and B cast to bf16
 * (round to nearest even), accumulated and written in float32, as oneDNN's
 * matmul primitive runs it. Everything a product needs is made when it is
 * planned (at graph compile): its blocks over the kernel threads, one
 * primitive per distinct block shape (shared through the engine's cache),
 * the memory objects, and the scratchpads. Running one allocates nothing.
 *
 * Threads: C is split into blocks of rows (M >= N) or columns, one per
 * kernel thread of the env's pool, as the fp32 products are; each block is
 * one single-threaded oneDNN call. Debian's oneDNN threads with OpenMP, so
 * every thread that plans or runs a product sets its OpenMP thread count to
 * 1 first: a device's kernel threads are the only threads its products use,
 * and two devices on two threads never oversubscribe the cores.
 *
 * Without oneDNN (a build without MT_HAVE_DNNL) planning fails with
 * MT_EUNSUPPORTED and a message saying how to get it.
 */
#ifndef MT_OPS_BF16_IMPL_H
#define MT_OPS_BF16_IMPL_H

#include "ops/ops_impl.h"

/* MT_OK in a build with oneDNN; else MT_EUNSUPPORTED saying how to get it. */
mt_status mt__bf16_available(void);
/* Whether the CPU has AVX512-BF16 (or AMX) for oneDNN; false without
 * oneDNN. Without it oneDNN emulates bf16 products, slower than fp32. */
bool      mt__bf16_native(void);

/* oneDNN's engine, the primitive cache, and per kernel thread a stream and
 * a scratchpad. One per graph (device); used by one device's threads only. */
typedef struct mt_bf16_engine mt_bf16_engine;

/* An engine for products run on a pool of n_workers threads (its size). */
mt_status mt__bf16_engine_create(int n_workers, mt_bf16_engine **out);
void      mt__bf16_engine_free(mt_bf16_engine *e);

typedef struct mt_bf16_block mt_bf16_block;   /* matmul_bf16.c */

/* One planned product. The caller fills the first three fields; the rest is
 * the plan's. */
typedef struct mt_bf16_gemm {
    /* bf16 copies of A and B (the same layout as the f32 operand) that the
     * caller keeps, a weight's cast once per change; NULL: the run casts
     * that operand into ws. */
    const uint16_t *a16, *b16;
    /* the f32 operand's bytes already hold its bf16 values (a weight an
     * FSDP all-gather gathered in bf16): read as bf16, never cast */
    bool            a_is16, b_is16;
    /* mt__bf16_ws_elems() bf16 of workspace for those casts */
    uint16_t       *ws;
    /* the plan */
    mt_bf16_engine *eng;
    bool            ta, tb, split_rows;
    int64_t         M, N, K, block;
    int             n_blocks;
    mt_bf16_block  *blocks;               /* (n_blocks) */
} mt_bf16_gemm;

/* Plans C (M,N) (+)= op(A) · op(B) over the engine's threads, the operands
 * dense (lda, ldb, ldc the densest, as mt__gemm_pool's): makes the
 * primitives for out = (acc false) and, when both_acc, for out += too.
 * MT_EUNSUPPORTED without oneDNN; MT_EINTERNAL naming oneDNN's status when
 * it refuses the shape. */
mt_status mt__bf16_gemm_plan(mt_bf16_engine *e, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                             bool both_acc, mt_bf16_gemm *out);
/* Frees what the plan made (not a16, b16, ws). */
void      mt__bf16_gemm_free(mt_bf16_gemm *p);
/* bf16 elements of ws the run needs: M·K unless a16 or a_is16, plus K·N
 * unless b16 or b_is16. */
size_t    mt__bf16_ws_elems(const mt_bf16_gemm *p);

/* Runs a planned product: casts the operands without a copy into ws (over
 * env->pool), then C (M,N) (+)= op(A) · op(B) (+ bias (N) on every row)
 * block by block. acc must have a primitive (both_acc, or the planned one).
 * A and B are read only where a16 / b16 are NULL. */
void      mt__bf16_gemm_run(const mt_op_env *env, const mt_bf16_gemm *p, const float *A,
                            const float *B, const float *bias, float *C, bool acc);

/* The same, where an operand may already be bf16 (an activation the graph
 * stores in bf16): A16 / B16 non-NULL are read as they are (the layout of
 * the f32 operand) and A / B are then ignored; NULL: as mt__bf16_gemm_run. */
void      mt__bf16_gemm_run16(const mt_op_env *env, const mt_bf16_gemm *p, const float *A,
                              const uint16_t *A16, const float *B, const uint16_t *B16,
                              const float *bias, float *C, bool acc);

/* dst (n) = bf16(src (n)), round to nearest even, split over the pool. */
void      mt__bf16_cast_pool(mt_pool *pool, uint16_t *dst, const float *src, int64_t n);

#endif /* MT_OPS_BF16_IMPL_H */
