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
 * The fallback. Where oneDNN has no bf16 matmul (oneDNN 2.6 without
 * AVX-512, e.g. an AVX2 Zen 3, or capped so by ONEDNN_MAX_CPU_ISA or
 * MT_CPU_ISA) the same products run as f32 sgemm (mt__gemm_pool) on f32
 * copies of the bf16 operands: an f32 operand rounded to bf16 (round to
 * nearest even, the native path's cast) and back, a bf16 one widened
 * exactly. A product of two bf16 values is exact in f32, so this computes
 * what the native path does (bf16 operands, f32 accumulation), but for the
 * order of the sums, at f32 speed. Whether oneDNN has a bf16 matmul is asked
 * once per process, at the first engine, before which oneDNN's ISA is
 * capped to the kernel level (mt_get_cpu_isa) unless ONEDNN_MAX_CPU_ISA is
 * set.
 *
 * Without oneDNN (a build without MT_HAVE_DNNL) planning fails with
 * MT_EUNSUPPORTED and a message saying how to get it.
 */
#ifndef MT_BACKEND_BF16_IMPL_H
#define MT_BACKEND_BF16_IMPL_H

#include "ops/ops_impl.h"

/* MT_OK in a build with oneDNN; else MT_EUNSUPPORTED saying how to get it. */
mt_status mt__bf16_available(void);
/* Whether the CPU has AVX512-BF16 (or AMX) for oneDNN; false without
 * oneDNN and in fallback mode. Without it oneDNN emulates bf16 products,
 * slower than fp32. */
bool      mt__bf16_native(void);
/* Whether bf16 products run as f32 sgemm on bf16-rounded operands because
 * oneDNN has no bf16 matmul on this CPU (at its ISA cap); false without
 * oneDNN, and when asking oneDNN failed otherwise (the engine then says
 * why). Asks oneDNN on the first call (or engine). */
bool      mt__bf16_fallback(void);

/* oneDNN's engine, the primitive cache, and per kernel thread a stream and
 * a scratchpad. One per graph (device); used by one device's threads only. */
typedef struct mt_bf16_engine mt_bf16_engine;

/* An engine for products run on a pool of n_workers threads (its size),
 * in fallback mode where oneDNN has no bf16 matmul (mt__bf16_fallback). The
 * first caps oneDNN's ISA to mt_get_cpu_isa() unless ONEDNN_MAX_CPU_ISA is
 * set. MT_EINTERNAL (or MT_ENOMEM) when oneDNN fails other than by having
 * no bf16 matmul. */
mt_status mt__bf16_engine_create(int n_workers, mt_bf16_engine **out);
void      mt__bf16_engine_free(mt_bf16_engine *e);
/* Whether the engine's plans run as the fallback. */
bool      mt__bf16_engine_fallback(const mt_bf16_engine *e);
/* For tests: the plans made after this run as the fallback, whatever
 * oneDNN has, so one process can compare the two paths. */
void      mt__bf16_engine_force_fallback(mt_bf16_engine *e);

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
    /* mt__bf16_ws_elems() bf16 of workspace for those casts (in fallback
     * mode f32 copies, so aligned for float as malloc's memory is) */
    uint16_t       *ws;
    /* the plan */
    mt_bf16_engine *eng;
    bool            fallback;             /* f32 sgemm on bf16-rounded copies, no blocks */
    bool            ta, tb, split_rows;
    int64_t         M, N, K, block;
    int             n_blocks;
    mt_bf16_block  *blocks;               /* (n_blocks) */
} mt_bf16_gemm;

/* Plans C (M,N) (+)= op(A) · op(B) over the engine's threads, the operands
 * dense (lda, ldb, ldc the densest, as mt__gemm_pool's): makes the
 * primitives for out = (acc false) and, when both_acc, for out += too; in
 * fallback mode only records the shape. MT_EUNSUPPORTED without oneDNN;
 * MT_EINTERNAL naming oneDNN's status when it refuses the shape. */
mt_status mt__bf16_gemm_plan(mt_bf16_engine *e, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                             bool both_acc, mt_bf16_gemm *out);
/* Frees what the plan made (not a16, b16, ws). */
void      mt__bf16_gemm_free(mt_bf16_gemm *p);
/* bf16 elements of ws the planned run needs (call it after the plan): M·K
 * unless a16 or a_is16, plus K·N unless b16 or b_is16; in fallback mode
 * room for f32 copies of both operands, 2·(M·K + K·N) (every operand is
 * widened, a bf16 one too). */
size_t    mt__bf16_ws_elems(const mt_bf16_gemm *p);

/* Runs a planned product: casts the operands without a copy into ws (over
 * env->pool), then C (M,N) (+)= op(A) · op(B) (+ bias (N) on every row)
 * block by block. acc must have a primitive (both_acc, or the planned one).
 * A and B are read only where a16 / b16 are NULL. In fallback mode: f32
 * copies of the bf16 operands into ws, then mt__gemm_pool. */
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

#endif /* MT_BACKEND_BF16_IMPL_H */
