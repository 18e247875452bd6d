/*
 * vec_impl.h — helpers the kernels share for loops gcc vectorises (internal).
 */
#ifndef MT_VEC_IMPL_H
#define MT_VEC_IMPL_H

#include <stdint.h>

/* gcc at -O2 (the build's level) vectorises only loops that need no scalar
 * epilogue, so hot loops run over full blocks of 16 (vectorised) and then a
 * scalar tail. The body may contain commas. */
#define MT_VEC_FOR(i, n, ...)                                                  \
    do {                                                                       \
        const int64_t i##_n = (n), i##_nb = i##_n - i##_n % 16;                \
        for (int64_t i##_0 = 0; i##_0 < i##_nb; i##_0 += 16)                   \
            for (int64_t i = i##_0; i < i##_0 + 16; i++) { __VA_ARGS__; }      \
        for (int64_t i = i##_nb; i < i##_n; i++) { __VA_ARGS__; }              \
    } while (0)

/* exp, tanh and the loops that call them are the vector layer's (vec/vec.h),
 * compiled per kernel level with SLEEF. */

#endif /* MT_VEC_IMPL_H */
