/*
 * matmul_bf16.c — bf16 matrix products on oneDNN's matmul primitive, f32
 * accumulation and output (bf16_impl.h says what is planned when).
 *
 * A block of C is a plain oneDNN matmul on strided 2-D memory: a row block
 * of C (M >= N) reads rows of op(A) and all of op(B), a column block all of
 * op(A) and columns of op(B); the transposes are strides, never copies.
 * Blocks of the same shape share one primitive from the engine's cache (a
 * product has at most two shapes: full blocks and the last); each block has
 * its own memory objects, whose data handles are set when it runs.
 * Scratchpads are ours (user mode), one per kernel thread, sized at plan
 * time, so no run allocates and no two threads share one.
 *
 * The fallback (bf16_impl.h): where oneDNN has no bf16 matmul, a plan is
 * only its shape, and a run copies both operands into ws as f32 holding
 * bf16 values (an f32 operand rounded with the native path's own cast, a
 * bf16 one widened), then runs the fp32 product (mt__gemm_pool).
 */
#include "backend/bf16_impl.h"
#include "ops/kernels.h"
#include "tensor/tensor_impl.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Work below this many elements per thread is not worth a second thread
 * for the casts (as op_table.c's GRAIN_ELEMS). */
#define CAST_GRAIN 16384

typedef struct { uint16_t *dst; const float *src; } cast_job;

static void range_cast(void *arg, int64_t i0, int64_t i1, int w) {
    const cast_job *j = arg;
    mt__f32_to_bf16(j->dst + i0, j->src + i0, (size_t)(i1 - i0));
}

void mt__bf16_cast_pool(mt_pool *pool, uint16_t *dst, const float *src, int64_t n) {
    cast_job j = {dst, src};
    mt_pool_run(pool, n, CAST_GRAIN, range_cast, &j);
}

size_t mt__bf16_ws_elems(const mt_bf16_gemm *p) {
    if (p->fallback)   /* f32 copies of both: two bf16 elements each */
        return (size_t)(2 * (p->M * p->K + p->K * p->N));
    return (size_t)((p->a16 || p->a_is16 ? 0 : p->M * p->K) +
                    (p->b16 || p->b_is16 ? 0 : p->K * p->N));
}

#ifdef MT_HAVE_DNNL

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>

/* One cached primitive: a block shape, its layout and accumulation. */
typedef struct {
    bool             ta, tb, acc;
    int64_t          m, n, k, lda, ldb, ldc;
    dnnl_primitive_t prim;
} prim_entry;

struct mt_bf16_engine {
    dnnl_engine_t  engine;
    bool           fallback;              /* plans run as f32 sgemm (no bf16 matmul) */
    int            n_workers;
    dnnl_stream_t *streams;               /* (n_workers) */
    void         **scratch;               /* (n_workers) scratchpads of scratch_bytes */
    size_t         scratch_bytes;
    prim_entry    *cache;  int n_cache, cap_cache;
};

struct mt_bf16_block {
    int64_t          lo, hi;              /* rows (split_rows) or columns of C */
    dnnl_primitive_t prim[2];             /* [acc]: out = / out +=; NULL if not planned */
    dnnl_memory_t    a, b, c, pad;        /* handles set when the block runs */
};

static const char *dnnl_msg(dnnl_status_t st) {
    switch (st) {
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "unimplemented";
    case dnnl_runtime_error: return "runtime error";
    default: return "error";
    }
}
#define DNNL_TRY(call, what)                                                                     \
    do {                                                                                         \
        dnnl_status_t st_ = (call);                                                              \
        if (st_ != dnnl_success)                                                                 \
            return mt_fail(st_ == dnnl_out_of_memory ? MT_ENOMEM : MT_EINTERNAL,                \
                           "oneDNN: %s failed (%s, status %d)", what, dnnl_msg(st_), (int)st_);  \
    } while (0)

/* Makes the calling thread run oneDNN on itself alone (Debian's build is
 * OpenMP's): returns the count it had, for restore_omp. */
static int single_omp(void) {
    int old = omp_get_max_threads();
    if (old != 1) omp_set_num_threads(1);
    return old;
}

/* ======================================================================== */
/* The process's oneDNN: its ISA cap, and whether it has a bf16 matmul       */
/* ======================================================================== */

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

/* Caps oneDNN's ISA to the kernel level (base.h's promise for MT_CPU_ISA)
 * unless ONEDNN_MAX_CPU_ISA (or its old name DNNL_MAX_CPU_ISA) is set: it
 * takes effect only before oneDNN's first call that reads the ISA, so
 * every oneDNN entry of this file comes through here first. oneDNN refuses
 * once it has run (another library in the process used it first): then it
 * keeps its ISA, which is no error. */
static void cap_isa(void) {
#if defined(__x86_64__)
    mt_cpu_isa level = mt_get_cpu_isa();
    if (level >= MT_ISA_AVX512 || getenv("ONEDNN_MAX_CPU_ISA") || getenv("DNNL_MAX_CPU_ISA"))
        return;
    (void)dnnl_set_max_cpu_isa(level == MT_ISA_AVX2 ? dnnl_cpu_isa_avx2 : dnnl_cpu_isa_sse41);
#endif
}

static void dnnl_first(void) { pthread_once(&isa_once, cap_isa); }

/* The primitive descriptor of a bf16 matmul a (m,k) · b (k,n) -> c (m,n)
 * f32, out += when acc, with a user scratchpad, for the calling thread's
 * OpenMP thread count; oneDNN's status. */
static dnnl_status_t make_pd(dnnl_engine_t engine, bool acc, const dnnl_memory_desc_t *a,
                             const dnnl_memory_desc_t *b, const dnnl_memory_desc_t *c,
                             dnnl_primitive_desc_t *pd) {
    *pd = NULL;
    dnnl_matmul_desc_t desc;
    dnnl_status_t st = dnnl_matmul_desc_init(&desc, a, b, NULL, c);
    if (st != dnnl_success) return st;
    dnnl_primitive_attr_t attr;
    if ((st = dnnl_primitive_attr_create(&attr)) != dnnl_success) return st;
    st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    dnnl_post_ops_t po = NULL;
    if (st == dnnl_success && acc && (st = dnnl_post_ops_create(&po)) == dnnl_success &&
        (st = dnnl_post_ops_append_sum(po, 1.0f)) == dnnl_success)
        st = dnnl_primitive_attr_set_post_ops(attr, po);
    if (st == dnnl_success) st = dnnl_primitive_desc_create(pd, &desc, attr, engine, NULL);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    return st;
}

/* -1: not asked yet; 1: oneDNN has no bf16 matmul here (fallback), 0: it
 * has. Asked once per process: the ISA, all it depends on, is fixed once
 * oneDNN has run. */
static atomic_int no_bf16_matmul = -1;

/* Asks oneDNN for what a plan makes, a bf16 matmul in every layout (either
 * operand transposed, out = and +=), on a small product: *none is true when
 * it says unimplemented for one of them. Any other failure is an error. */
static mt_status ask_bf16_matmul(dnnl_engine_t engine, bool *none) {
    *none = false;
    const int64_t n = 32;
    for (int f = 0; f < 8 && !*none; f++) {
        bool ta = f & 1, tb = f & 2, acc = f & 4;
        dnnl_memory_desc_t a, b, c;
        dnnl_dims_t dims = {n, n}, plain = {n, 1}, trans = {1, n};
        dnnl_status_t st = dnnl_memory_desc_init_by_strides(&a, 2, dims, dnnl_bf16, ta ? trans : plain);
        if (st == dnnl_success)
            st = dnnl_memory_desc_init_by_strides(&b, 2, dims, dnnl_bf16, tb ? trans : plain);
        if (st == dnnl_success) st = dnnl_memory_desc_init_by_strides(&c, 2, dims, dnnl_f32, plain);
        dnnl_primitive_desc_t pd = NULL;
        int old = single_omp();   /* as get_prim makes them */
        if (st == dnnl_success) st = make_pd(engine, acc, &a, &b, &c, &pd);
        if (old != 1) omp_set_num_threads(old);
        if (pd) dnnl_primitive_desc_destroy(pd);
        if (st == dnnl_unimplemented) *none = true;
        else if (st != dnnl_success)
            return mt_fail(st == dnnl_out_of_memory ? MT_ENOMEM : MT_EINTERNAL,
                           "oneDNN: asking whether it has a bf16 matmul failed (%s, status %d); "
                           "use --precision fp32", dnnl_msg(st), (int)st);
    }
    return MT_OK;
}

/* ======================================================================== */
/* Engines                                                                   */
/* ======================================================================== */

mt_status mt__bf16_engine_create(int n_workers, mt_bf16_engine **out) {
    *out = NULL;
    dnnl_first();
    mt_bf16_engine *e = calloc(1, sizeof *e);
    if (!e) return mt_fail(MT_ENOMEM, "out of memory for the bf16 engine");
    e->n_workers = n_workers < 1 ? 1 : n_workers;
    e->streams = calloc((size_t)e->n_workers, sizeof *e->streams);
    e->scratch = calloc((size_t)e->n_workers, sizeof *e->scratch);
    mt_status s = MT_OK;
    if (!e->streams || !e->scratch) s = mt_fail(MT_ENOMEM, "out of memory for the bf16 engine");
    dnnl_status_t st = dnnl_success;
    if (s == MT_OK && (st = dnnl_engine_create(&e->engine, dnnl_cpu, 0)) != dnnl_success)
        s = mt_fail(MT_EINTERNAL, "oneDNN: cannot create a CPU engine (%s)", dnnl_msg(st));
    for (int w = 0; s == MT_OK && w < e->n_workers; w++)
        if ((st = dnnl_stream_create(&e->streams[w], e->engine, dnnl_stream_default_flags)))
            s = mt_fail(MT_EINTERNAL, "oneDNN: cannot create a stream (%s)", dnnl_msg(st));
    int known = atomic_load(&no_bf16_matmul);
    if (s == MT_OK && known < 0) {   /* two threads asking at once get the same answer */
        bool none = false;
        if ((s = ask_bf16_matmul(e->engine, &none)) == MT_OK) {
            known = none;
            atomic_store(&no_bf16_matmul, known);
        }
    }
    e->fallback = known == 1;
    if (s != MT_OK) {
        mt__bf16_engine_free(e);
        return s;
    }
    *out = e;
    return MT_OK;
}

void mt__bf16_engine_free(mt_bf16_engine *e) {
    if (!e) return;
    for (int i = 0; i < e->n_cache; i++) dnnl_primitive_destroy(e->cache[i].prim);
    free(e->cache);
    for (int w = 0; w < e->n_workers; w++) {
        if (e->streams && e->streams[w]) dnnl_stream_destroy(e->streams[w]);
        if (e->scratch) free(e->scratch[w]);
    }
    free(e->streams);
    free(e->scratch);
    if (e->engine) dnnl_engine_destroy(e->engine);
    free(e);
}

bool mt__bf16_engine_fallback(const mt_bf16_engine *e) { return e->fallback; }
void mt__bf16_engine_force_fallback(mt_bf16_engine *e) { e->fallback = true; }

bool mt__bf16_fallback(void) {
    int known = atomic_load(&no_bf16_matmul);
    if (known >= 0) return known == 1;
    mt_bf16_engine *e = NULL;   /* asks oneDNN, as the first engine does */
    if (mt__bf16_engine_create(1, &e) != MT_OK) return false;
    bool fb = e->fallback;
    mt__bf16_engine_free(e);
    return fb;
}

/* ======================================================================== */
/* Plans                                                                     */
/* ======================================================================== */

/* A 2-D (rows, cols) memory descriptor of `dt` with row stride ld, or, when
 * trans, the transpose of a (cols, rows) matrix of row stride ld. */
static mt_status md_2d(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int64_t ld, bool trans,
                       dnnl_data_type_t dt) {
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
    DNNL_TRY(dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides), "a memory descriptor");
    return MT_OK;
}

/* The cached primitive for a block (made on first request), and the
 * scratchpad it needs grown into every thread's. */
static mt_status get_prim(mt_bf16_engine *e, const prim_entry *key, const dnnl_memory_desc_t *a,
                          const dnnl_memory_desc_t *b, const dnnl_memory_desc_t *c,
                          dnnl_primitive_t *out) {
    for (int i = 0; i < e->n_cache; i++) {
        const prim_entry *x = &e->cache[i];
        if (x->ta == key->ta && x->tb == key->tb && x->acc == key->acc && x->m == key->m &&
            x->n == key->n && x->k == key->k && x->lda == key->lda && x->ldb == key->ldb &&
            x->ldc == key->ldc) {
            *out = x->prim;
            return MT_OK;
        }
    }
    if (e->n_cache == e->cap_cache) {
        int cap = e->cap_cache ? 2 * e->cap_cache : 16;
        prim_entry *c2 = realloc(e->cache, (size_t)cap * sizeof *c2);
        if (!c2) return mt_fail(MT_ENOMEM, "out of memory for the bf16 primitive cache");
        e->cache = c2;
        e->cap_cache = cap;
    }
    dnnl_primitive_desc_t pd = NULL;
    /* made for one thread, as it runs (a primitive sizes its work split
     * for the OpenMP thread count it sees here) */
    int old = single_omp();
    dnnl_status_t st = make_pd(e->engine, key->acc, a, b, c, &pd);
    dnnl_primitive_t prim = NULL;
    if (st == dnnl_success) st = dnnl_primitive_create(&prim, pd);
    if (old != 1) omp_set_num_threads(old);
    size_t pad = 0;
    if (st == dnnl_success)
        pad = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0));
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (st != dnnl_success)
        return mt_fail(st == dnnl_out_of_memory ? MT_ENOMEM : MT_EINTERNAL,
                       "oneDNN: no bf16 matmul for (%lld,%lld)·(%lld,%lld)%s%s (%s, status %d)",
                       (long long)key->m, (long long)key->k, (long long)key->k, (long long)key->n,
                       key->ta ? ", A transposed" : "", key->tb ? ", B transposed" : "",
                       dnnl_msg(st), (int)st);
    if (pad > e->scratch_bytes) {   /* every thread's scratchpad grows to the largest */
        for (int w = 0; w < e->n_workers; w++) {
            free(e->scratch[w]);
            e->scratch[w] = aligned_alloc(64, (pad + 63) / 64 * 64);
            if (!e->scratch[w]) {
                dnnl_primitive_destroy(prim);
                return mt_fail(MT_ENOMEM, "out of memory for a %zu-byte oneDNN scratchpad", pad);
            }
        }
        e->scratch_bytes = pad;
    }
    prim_entry *x = &e->cache[e->n_cache++];
    *x = *key;
    x->prim = prim;
    *out = prim;
    return MT_OK;
}

/* Plans block `bl` (its lo, hi set): memory objects and primitives. */
static mt_status plan_block(mt_bf16_engine *e, const mt_bf16_gemm *p, mt_bf16_block *bl,
                            bool both_acc) {
    int64_t lda = p->ta ? p->M : p->K, ldb = p->tb ? p->K : p->N, ldc = p->N;
    int64_t m = p->split_rows ? bl->hi - bl->lo : p->M;
    int64_t n = p->split_rows ? p->N : bl->hi - bl->lo;
    dnnl_memory_desc_t a, b, c;
    mt_status s;
    if ((s = md_2d(&a, m, p->K, lda, p->ta, dnnl_bf16)) != MT_OK) return s;
    if ((s = md_2d(&b, p->K, n, ldb, p->tb, dnnl_bf16)) != MT_OK) return s;
    if ((s = md_2d(&c, m, n, ldc, false, dnnl_f32)) != MT_OK) return s;
    for (int acc = 0; acc < 2; acc++) {
        if (acc && !both_acc) continue;
        prim_entry key = {p->ta, p->tb, acc, m, n, p->K, lda, ldb, ldc, NULL};
        if ((s = get_prim(e, &key, &a, &b, &c, &bl->prim[acc])) != MT_OK) return s;
    }
    DNNL_TRY(dnnl_memory_create(&bl->a, &a, e->engine, DNNL_MEMORY_NONE), "a memory object");
    DNNL_TRY(dnnl_memory_create(&bl->b, &b, e->engine, DNNL_MEMORY_NONE), "a memory object");
    DNNL_TRY(dnnl_memory_create(&bl->c, &c, e->engine, DNNL_MEMORY_NONE), "a memory object");
    dnnl_memory_desc_t pad;
    dnnl_dims_t pad_dims = {(int64_t)(e->scratch_bytes > 0 ? e->scratch_bytes : 1)};
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&pad, 1, pad_dims, dnnl_u8, dnnl_a), "a scratchpad descriptor");
    DNNL_TRY(dnnl_memory_create(&bl->pad, &pad, e->engine, DNNL_MEMORY_NONE), "a memory object");
    return MT_OK;
}

mt_status mt__bf16_gemm_plan(mt_bf16_engine *e, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                             bool both_acc, mt_bf16_gemm *p) {
    assert(M > 0 && N > 0 && K > 0);
    p->eng = e;
    p->ta = ta;
    p->tb = tb;
    p->M = M;
    p->N = N;
    p->K = K;
    p->split_rows = M >= N;
    p->fallback = e->fallback;
    p->n_blocks = 0;
    p->blocks = NULL;
    if (p->fallback) return MT_OK;   /* mt__gemm_pool splits it when it runs */
    int64_t side = p->split_rows ? M : N, other = p->split_rows ? N : M;
    /* one block per thread, each at least ~1 MFLOP and a multiple of 16 rows
     * or columns (the micro-kernels' width), as the fp32 products split */
    int64_t nb = (int64_t)(2.0 * (double)M * (double)N * (double)K / 1e6);
    if (nb > e->n_workers) nb = e->n_workers;
    if (nb > (side + 15) / 16) nb = (side + 15) / 16;
    if (nb < 1) nb = 1;
    (void)other;
    p->block = ((side + nb - 1) / nb + 15) / 16 * 16;
    p->n_blocks = (int)((side + p->block - 1) / p->block);
    p->blocks = calloc((size_t)p->n_blocks, sizeof *p->blocks);
    if (!p->blocks) return mt_fail(MT_ENOMEM, "out of memory for a bf16 product's blocks");
    for (int i = 0; i < p->n_blocks; i++) {
        mt_bf16_block *bl = &p->blocks[i];
        bl->lo = i * p->block;
        bl->hi = bl->lo + p->block < side ? bl->lo + p->block : side;
        mt_status s = plan_block(e, p, bl, both_acc);
        if (s != MT_OK) return s;   /* the caller frees the plan */
    }
    return MT_OK;
}

void mt__bf16_gemm_free(mt_bf16_gemm *p) {
    if (!p || !p->blocks) return;
    for (int i = 0; i < p->n_blocks; i++) {
        mt_bf16_block *bl = &p->blocks[i];
        if (bl->a) dnnl_memory_destroy(bl->a);
        if (bl->b) dnnl_memory_destroy(bl->b);
        if (bl->c) dnnl_memory_destroy(bl->c);
        if (bl->pad) dnnl_memory_destroy(bl->pad);
    }
    free(p->blocks);
    p->blocks = NULL;
}

/* ======================================================================== */
/* Runs                                                                      */
/* ======================================================================== */

typedef struct {
    const mt_bf16_gemm *p;
    const uint16_t     *A, *B;
    const float        *bias;
    float              *C;
    bool                acc;
} run_job;

static void range_blocks(void *arg, int64_t b0, int64_t b1, int w) {
    const run_job *j = arg;
    const mt_bf16_gemm *p = j->p;
    mt_bf16_engine *e = p->eng;
    (void)single_omp();
    int64_t lda = p->ta ? p->M : p->K, ldb = p->tb ? p->K : p->N;
    for (int64_t i = b0; i < b1; i++) {
        const mt_bf16_block *bl = &p->blocks[i];
        int64_t lo = bl->lo, width = bl->hi - bl->lo;
        const uint16_t *A = j->A, *B = j->B;
        float *C = j->C;
        if (p->split_rows) {
            A += p->ta ? lo : lo * lda;
            C += lo * p->N;
        } else {
            B += p->tb ? lo * ldb : lo;
            C += lo;
        }
        /* handles only: the memory objects were made with this layout */
        dnnl_memory_set_data_handle(bl->a, (void *)A);
        dnnl_memory_set_data_handle(bl->b, (void *)B);
        dnnl_memory_set_data_handle(bl->c, C);
        dnnl_memory_set_data_handle(bl->pad, e->scratch[w]);
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, bl->a}, {DNNL_ARG_WEIGHTS, bl->b},
                                   {DNNL_ARG_DST, bl->c}, {DNNL_ARG_SCRATCHPAD, bl->pad}};
        dnnl_primitive_t prim = bl->prim[j->acc];
        assert(prim && "a bf16 product ran with an accumulation it was not planned for");
        dnnl_status_t st = dnnl_primitive_execute(prim, e->streams[w], 4, args);
        if (st == dnnl_success) st = dnnl_stream_wait(e->streams[w]);
        assert(st == dnnl_success && "oneDNN failed to run a planned bf16 product");
        (void)st;
        if (!j->bias) continue;
        if (p->split_rows) mt_kernel_bias_add(C, j->bias, width, p->N);
        else
            for (int64_t r = 0; r < p->M; r++) mt_kernel_bias_add(C + r * p->N, j->bias + lo, 1, width);
    }
}

/* The fallback's operand copies: dst (n) f32 = src16 (n) widened, or, when
 * src16 is NULL, src (n) rounded to bf16 (mt__f32_to_bf16, the native
 * path's cast) and widened back. */
typedef struct { float *dst; const float *src; const uint16_t *src16; } widen_job;

static void range_widen(void *arg, int64_t i0, int64_t i1, int w) {
    const widen_job *j = arg;
    if (j->src16) {
        mt__bf16_to_f32(j->dst + i0, j->src16 + i0, (size_t)(i1 - i0));
        return;
    }
    uint16_t tmp[2048];   /* (chunk) the bf16 values on their way */
    for (int64_t i = i0; i < i1; i += 2048) {
        size_t n = (size_t)(i1 - i < 2048 ? i1 - i : 2048);
        mt__f32_to_bf16(tmp, j->src + i, n);
        mt__bf16_to_f32(j->dst + i, tmp, n);
    }
}

/* C (M,N) (+)= op(A) · op(B) (+ bias) in f32 on the operands' bf16 values:
 * A16 / B16 when non-NULL, else A / B rounded. */
static void run_fallback(const mt_op_env *env, const mt_bf16_gemm *p, const float *A,
                         const uint16_t *A16, const float *B, const uint16_t *B16,
                         const float *bias, float *C, bool acc) {
    assert(p->ws && (uintptr_t)p->ws % alignof(float) == 0 &&
           "the bf16 fallback's workspace must hold f32 (mt__bf16_ws_elems, from malloc)");
    float *Af = (float *)(void *)p->ws;   /* (M·K) op(A) */
    float *Bf = Af + p->M * p->K;         /* (K·N) op(B) */
    widen_job ja = {Af, A, A16}, jb = {Bf, B, B16};
    mt_pool_run(env->pool, p->M * p->K, CAST_GRAIN, range_widen, &ja);
    mt_pool_run(env->pool, p->K * p->N, CAST_GRAIN, range_widen, &jb);
    mt__gemm_pool(env, p->ta, p->tb, p->M, p->N, p->K, Af, Bf, bias, C, acc ? 1.0f : 0.0f);
}

void mt__bf16_gemm_run(const mt_op_env *env, const mt_bf16_gemm *p, const float *A,
                       const float *B, const float *bias, float *C, bool acc) {
    mt__bf16_gemm_run16(env, p, A, NULL, B, NULL, bias, C, acc);
}

void mt__bf16_gemm_run16(const mt_op_env *env, const mt_bf16_gemm *p, const float *A,
                         const uint16_t *A16, const float *B, const uint16_t *B16,
                         const float *bias, float *C, bool acc) {
    uint16_t *ws = p->ws;
    /* a bf16 operand: stored so (an activation), or bytes holding bf16 (a
     * gathered weight), else the weight's copy or a cast below */
    if (!A16) A16 = p->a_is16 ? (const uint16_t *)A : p->a16;
    if (!B16) B16 = p->b_is16 ? (const uint16_t *)B : p->b16;
    if (p->fallback) {
        run_fallback(env, p, A, A16, B, B16, bias, C, acc);
        return;
    }
    if (!A16) {   /* activations: cast as the product reads them */
        mt__bf16_cast_pool(env->pool, ws, A, p->M * p->K);
        A16 = ws;
        ws += p->M * p->K;
    }
    if (!B16) {
        mt__bf16_cast_pool(env->pool, ws, B, p->K * p->N);
        B16 = ws;
    }
    run_job j = {p, A16, B16, bias, C, acc};
    mt_pool_run(env->pool, p->n_blocks, 1, range_blocks, &j);
}

mt_status mt__bf16_available(void) { return MT_OK; }

bool mt__bf16_native(void) {
    dnnl_first();   /* reading the ISA fixes it: cap it first */
    if (mt__bf16_fallback()) return false;
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return ((unsigned)isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) ==
           (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}

#else /* no oneDNN: fp32 only; bf16 says how to get it */

static mt_status no_dnnl(void) {
    return mt_fail(MT_EUNSUPPORTED, "bf16 products need oneDNN, and this meshtrain was built "
                   "without it; install it (apt-get install libdnnl-dev, or `make deps`) and "
                   "rebuild (make build), or use --precision fp32");
}

mt_status mt__bf16_engine_create(int n_workers, mt_bf16_engine **out) {
    *out = NULL;
    return no_dnnl();
}
void mt__bf16_engine_free(mt_bf16_engine *e) { assert(!e); }
bool mt__bf16_engine_fallback(const mt_bf16_engine *e) { return false; }
void mt__bf16_engine_force_fallback(mt_bf16_engine *e) {}
bool mt__bf16_fallback(void) { return false; }
mt_status mt__bf16_gemm_plan(mt_bf16_engine *e, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                             bool both_acc, mt_bf16_gemm *p) {
    return no_dnnl();
}
void mt__bf16_gemm_free(mt_bf16_gemm *p) {}
void mt__bf16_gemm_run(const mt_op_env *env, const mt_bf16_gemm *p, const float *A,
                       const float *B, const float *bias, float *C, bool acc) {
    assert(!"bf16 product run in a build without oneDNN");
}
void mt__bf16_gemm_run16(const mt_op_env *env, const mt_bf16_gemm *p, const float *A,
                         const uint16_t *A16, const float *B, const uint16_t *B16,
                         const float *bias, float *C, bool acc) {
    assert(!"bf16 product run in a build without oneDNN");
}
mt_status mt__bf16_available(void) { return no_dnnl(); }
bool mt__bf16_native(void) { return false; }

#endif
