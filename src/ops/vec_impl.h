/*
 * vec_impl.h — helpers the kernels share for loops gcc vectorises (internal).
 */
#ifndef MT_VEC_IMPL_H
#define MT_VEC_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* exp(x) to about 1 ulp (Cephes expf: x = n·ln2 + r, |r| ≤ ln2/2, a degree-6
 * polynomial in r, then 2^n put into the exponent bits). libm's expf is a
 * call gcc cannot vectorise without -ffast-math; this inlines into the
 * softmax loops. Below -87.3 the result is flushed to 0 (exp(-inf) = 0);
 * the softmax never asks for more than exp(0). A NaN passes through. */
static inline float exp_f(float x) {
    float xc = x < -87.3f ? -87.3f : x;
    xc = xc > 88.3f ? 88.3f : xc;
    /* round to nearest by the 1.5·2^23 trick: gcc keeps (a + c) - c as written */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    float nc = n == n ? n : 0.0f;   /* a NaN must not reach the int conversion */
    int32_t bits = ((int32_t)nc + 127) * (1 << 23);
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float e = p * scale;
    return x < -87.3f ? 0.0f : e;
}

/* max over x (n), in sixteen lanes: gcc vectorises a reduction it may not
 * reorder only so. -INFINITY for n = 0. */
static inline float mt_vec_max(const float *restrict x, int64_t n) {
    const int64_t nb = n - n % 16;
    float lane[16];
    for (int l = 0; l < 16; l++) lane[l] = -INFINITY;
    for (int64_t j0 = 0; j0 < nb; j0 += 16)
        for (int l = 0; l < 16; l++) lane[l] = x[j0 + l] > lane[l] ? x[j0 + l] : lane[l];
    float m = -INFINITY;
    for (int64_t j = nb; j < n; j++) m = x[j] > m ? x[j] : m;
    for (int l = 0; l < 16; l++) m = lane[l] > m ? lane[l] : m;
    return m;
}

/* Σ exp(x (n) - m), in sixteen lanes (as mt_vec_max). */
static inline float mt_vec_sum_exp(const float *restrict x, int64_t n, float m) {
    const int64_t nb = n - n % 16;
    float lane[16] = {0};
    for (int64_t j0 = 0; j0 < nb; j0 += 16)
        for (int l = 0; l < 16; l++) lane[l] += exp_f(x[j0 + l] - m);
    float s = 0.0f;
    for (int64_t j = nb; j < n; j++) s += exp_f(x[j] - m);
    for (int l = 0; l < 16; l++) s += lane[l];
    return s;
}

#endif /* MT_VEC_IMPL_H */
