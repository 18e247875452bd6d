/*
 * reduce.c — element-wise reduction for the transports (mt__reduce_into):
 * sum, max and min over f32, i32 and bf16 (which reduces through f32 and
 * rounds to nearest even). max and min propagate NaN, as jax.lax does: a NaN
 * wins whichever side it is on. f32's loops are the vector layer's
 * (vec/vec.h), at the kernel level in use.
 */
#include "comm/transport_impl.h"
#include "vec/vec.h"

#include <string.h>

/* ======================================================================== */
/* Element-wise reduction                                                    */
/* ======================================================================== */

/* Loops run in fixed blocks of 16 so gcc vectorises them at -O2 (its cheap
 * cost model wants a known trip count); the tail runs scalar. */
#define RB 16

/* restrict parameters (not restrict locals) are what lets gcc vectorise */
#define DEF_REDUCE(NAME, T, EXPR)                                            \
    static void NAME(T *restrict d, const T *restrict s, size_t n) {         \
        const int64_t n_ = (int64_t)n, nb_ = n_ - n_ % RB;                   \
        for (int64_t i0 = 0; i0 < nb_; i0 += RB)                             \
            for (int64_t i = i0; i < i0 + RB; i++) {                         \
                T a = d[i], b = s[i];                                        \
                d[i] = (EXPR);                                               \
            }                                                                \
        for (int64_t i = nb_; i < n_; i++) {                                 \
            T a = d[i], b = s[i];                                            \
            d[i] = (EXPR);                                                   \
        }                                                                    \
    }

DEF_REDUCE(sum_i32, uint32_t, a + b)   /* unsigned: wraps instead of signed overflow (UB) */
DEF_REDUCE(max_i32, int32_t, b > a ? b : a)
DEF_REDUCE(min_i32, int32_t, b < a ? b : a)

void mt__reduce_into(void *dst, const void *src, size_t n, mt_dtype dtype, mt_reduce_op op) {
    switch (dtype) {
    case MT_F32:   /* vectorised at the kernel level in use */
        mt__vec()->reduce_into[op](dst, src, n);
        break;
    case MT_I32:
        if (op == MT_REDUCE_SUM) sum_i32(dst, src, n);
        else if (op == MT_REDUCE_MAX) max_i32(dst, src, n);
        else min_i32(dst, src, n);
        break;
    case MT_BF16: {
        uint16_t *d = dst;
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) {
            float a = mt__bf16_to_f32_1(d[i]), b = mt__bf16_to_f32_1(s[i]);
            float r = op == MT_REDUCE_SUM ? a + b
                    : op == MT_REDUCE_MAX ? ((b > a || b != b) ? b : a)
                                          : ((b < a || b != b) ? b : a);
            d[i] = mt__f32_to_bf16_1(r);
        }
        break;
    }
    }
}

_Static_assert((int)MT_REDUCE_SUM == (int)MT_VEC_SUM && (int)MT_REDUCE_MAX == (int)MT_VEC_MAX &&
               (int)MT_REDUCE_MIN == (int)MT_VEC_MIN, "vec/vec.h indexes its reductions as mt_reduce_op");
