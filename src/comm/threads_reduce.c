/*
 * threads_reduce.c — the threads transport's reductions: many sources
 * reduced into one or many destinations, a 64-byte line at a time, with
 * the streaming stores and the f32 kernels of the vector layer; and the
 * copy past the cache. threads.c and threads_async.c run them on their
 * peers' buffers.
 */
#include "base/arch_impl.h"
#include "comm/threads_impl.h"
#include "vec/vec.h"

#include <stdint.h>
#include <string.h>

/* ======================================================================== */
/* Reduction of many sources                                                 */
/* ======================================================================== */

/* dst (n) = src[0] op src[1] op ... op src[nsrc-1], each at element offset
 * `off`. dst may be src[0] itself (no other). bf16 accumulates in f32 and
 * rounds once. Sub-blocks keep dst in L1 while the sources stream by. */
void mt__threads_combine(void *dst, const void **src, int nsrc, size_t off, size_t n, mt_dtype dtype,
                    mt_reduce_op op) {
    size_t es = mt_dtype_size(dtype);
    for (size_t i = 0; i < n; i += SUB_ELEMS) {
        size_t m = n - i < SUB_ELEMS ? n - i : SUB_ELEMS;
        char *d = (char *)dst + i * es;
        size_t at = (off + i) * es;
        if (dtype == MT_BF16) {
            float acc[SUB_ELEMS], tmp[SUB_ELEMS];   /* (m) */
            mt__bf16_to_f32(acc, (const uint16_t *)((const char *)src[0] + at), m);
            for (int k = 1; k < nsrc; k++) {
                mt__bf16_to_f32(tmp, (const uint16_t *)((const char *)src[k] + at), m);
                mt__reduce_into(acc, tmp, m, MT_F32, op);
            }
            mt__f32_to_bf16((uint16_t *)d, acc, m);
        } else {
            if (d != (const char *)src[0] + at) memcpy(d, (const char *)src[0] + at, m * es);
            for (int k = 1; k < nsrc; k++)
                mt__reduce_into(d, (const char *)src[k] + at, m, dtype, op);
        }
    }
}

/* ======================================================================== */
/* All-reduce                                                                */
/* ======================================================================== */

/* dst[k][doff + i] = src[0][soff + i] op ... op src[P-1][soff + i] for
 * i < n and each of the nd destinations (a destination may be a source at
 * the same element: in place): one 64-byte line of each source at a time,
 * reduced in registers and stored to every destination right after being
 * read. In place the stores hit lines just read, so memory sees each line
 * read once and written once. Into other buffers (all_reduce_into, a
 * reduce-scatter's block), when `stream` (a large op: its lines are not in
 * cache) the stores go past the cache (non-temporal), so the destinations
 * are not read first either; a store fence (x86: SFENCE) then orders them before whatever
 * publishes the result. */
static bool streamable(const void *const *src, int P, size_t soff, void *const *dst, int nd,
                       size_t doff, size_t es) {
    for (int k = 0; k < nd; k++) {
        const char *d = (const char *)dst[k] + doff * es;
        if ((uintptr_t)d & 15) return false;
        for (int j = 0; j < P; j++)
            if (d == (const char *)src[j] + soff * es) return false;
    }
    return true;
}

/* Stores 64 bytes at d (16-byte aligned) past the cache (base/arch_impl.h). */
static inline void stream_line(void *d, const void *v) { mt__stream_line(d, v); }

/* dst (n bytes) = src, the whole 64-byte lines of dst stored past the cache. */
void mt__threads_stream_copy(void *dst, const void *src, size_t n) {
    char *d = dst;
    const char *s = src;
    size_t head = (64 - ((uintptr_t)d & 63)) & 63;
    if (head > n) head = n;
    memcpy(d, s, head);
    size_t i = head;
    for (; i + 64 <= n; i += 64) stream_line(d + i, s + i);
    memcpy(d + i, s + i, n - i);
    mt__store_fence();
}

#define DEF_REDUCE_BCAST(NAME, T, EXPR)                                                 \
    static void NAME(const void *const *src, int P, size_t soff, void *const *dst, int nd, \
                     size_t doff, size_t n, bool stream) {                              \
        const bool nt = stream && streamable(src, P, soff, dst, nd, doff, sizeof(T));   \
        size_t i0 = 0;                                                                  \
        for (; i0 + 16 <= n; i0 += 16) {                                                \
            T acc[16];                                                                  \
            const T *s0 = (const T *)src[0] + soff + i0;                                \
            for (int i = 0; i < 16; i++) acc[i] = s0[i];                                \
            for (int k = 1; k < P; k++) {                                               \
                const T *s = (const T *)src[k] + soff + i0;                             \
                for (int i = 0; i < 16; i++) { T a = acc[i], b = s[i]; acc[i] = (EXPR); } \
            }                                                                           \
            for (int k = 0; k < nd; k++) {                                              \
                T *d = (T *)dst[k] + doff + i0;                                         \
                if (nt) stream_line(d, acc);                                            \
                else for (int i = 0; i < 16; i++) d[i] = acc[i];                        \
            }                                                                           \
        }                                                                               \
        for (; i0 < n; i0++) {                                                          \
            T a = ((const T *)src[0])[soff + i0];                                       \
            for (int k = 1; k < P; k++) { T b = ((const T *)src[k])[soff + i0]; a = (EXPR); } \
            for (int k = 0; k < nd; k++) ((T *)dst[k])[doff + i0] = a;                  \
        }                                                                               \
        if (nt) mt__store_fence();                                                      \
    }

DEF_REDUCE_BCAST(rb_sum_i32, uint32_t, a + b)   /* unsigned: wraps instead of UB */
DEF_REDUCE_BCAST(rb_max_i32, int32_t, b > a ? b : a)
DEF_REDUCE_BCAST(rb_min_i32, int32_t, b < a ? b : a)

/* f32: the vector layer's kernel at the kernel level in use (vec/vec.h; max
 * and min let a NaN win from any rank, as jax.lax.pmax / pmin do), the whole
 * lines through the streaming store when the destinations allow it */
static void stream_line_f32(void *d, const float *v) { mt__stream_line(d, v); }

static void rb_f32(mt_reduce_op op, const void *const *src, int P, size_t soff, void *const *dst,
                   int nd, size_t doff, size_t n, bool stream) {
    const bool nt = stream && streamable(src, P, soff, dst, nd, doff, sizeof(float));
    mt__vec()->reduce_bcast[op]((const float *const *)src, P, soff, (float *const *)dst, nd, doff,
                                n, nt ? stream_line_f32 : NULL);
    if (nt) mt__store_fence();
}
#define DEF_RB_F32(NAME, OP)                                                                 \
    static void NAME(const void *const *src, int P, size_t soff, void *const *dst, int nd,   \
                     size_t doff, size_t n, bool stream) {                                   \
        rb_f32(OP, src, P, soff, dst, nd, doff, n, stream);                                  \
    }
DEF_RB_F32(rb_sum_f32, MT_REDUCE_SUM)
DEF_RB_F32(rb_max_f32, MT_REDUCE_MAX)
DEF_RB_F32(rb_min_f32, MT_REDUCE_MIN)

mt_reduce_bcast_fn *mt__threads_reduce_bcast(mt_dtype dtype, mt_reduce_op op) {
    static mt_reduce_bcast_fn *const fused[2][3] = {{rb_sum_f32, rb_max_f32, rb_min_f32},
                                                 {rb_sum_i32, rb_max_i32, rb_min_i32}};
    return fused[dtype == MT_I32][op];
}
