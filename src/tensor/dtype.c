/* dtype.c — element types: sizes, names, and bf16 and IEEE half <-> f32 conversion. */
#include "tensor/tensor_impl.h"

#include <math.h>

size_t mt_dtype_size(mt_dtype dtype) {
    switch (dtype) {
    case MT_F32: return 4;
    case MT_BF16: return 2;
    case MT_I32: return 4;
    }
    return 0;
}

const char *mt_dtype_name(mt_dtype dtype) {
    switch (dtype) {
    case MT_F32: return "f32";
    case MT_BF16: return "bf16";
    case MT_I32: return "i32";
    }
    return "?";
}

const char *mt_precision_name(mt_precision p) {
    return p == MT_PRECISION_BF16 ? "bf16" : "fp32";
}

mt_status mt_precision_parse(const char *s, mt_precision *out) {
    if (s && strcmp(s, "fp32") == 0) *out = MT_PRECISION_FP32;
    else if (s && strcmp(s, "bf16") == 0) *out = MT_PRECISION_BF16;
    else return mt_fail(MT_EINVAL, "unknown precision '%s'; use fp32 or bf16", s ? s : "(null)");
    return MT_OK;
}

/* Loops run in fixed blocks of 16 so gcc vectorises them at -O2 (its cheap
 * cost model wants a known trip count); the tail runs scalar. restrict
 * parameters (not restrict locals) are what lets it. */
#define RB 16

void mt__bf16_to_f32(float *restrict dst, const uint16_t *restrict src, size_t n) {
    const int64_t n_ = (int64_t)n, nb_ = n_ - n_ % RB;
    for (int64_t i0 = 0; i0 < nb_; i0 += RB)
        for (int64_t i = i0; i < i0 + RB; i++) dst[i] = mt__bf16_to_f32_1(src[i]);
    for (int64_t i = nb_; i < n_; i++) dst[i] = mt__bf16_to_f32_1(src[i]);
}

void mt__f32_to_bf16(uint16_t *restrict dst, const float *restrict src, size_t n) {
    const int64_t n_ = (int64_t)n, nb_ = n_ - n_ % RB;
    for (int64_t i0 = 0; i0 < nb_; i0 += RB)
        for (int64_t i = i0; i < i0 + RB; i++) dst[i] = mt__f32_to_bf16_1(src[i]);
    for (int64_t i = nb_; i < n_; i++) dst[i] = mt__f32_to_bf16_1(src[i]);
}

/* IEEE binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits. */
float mt__f16_to_f32_1(uint16_t h) {
    const uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t u;
    if (e == 0) {   /* zero or subnormal: m · 2^-24, exact in f32 */
        float f = (float)m * 0x1p-24f;
        memcpy(&u, &f, sizeof u);
        u |= sign;
    } else if (e == 31) {   /* inf, or NaN with its payload (quieted) */
        u = sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0);
    } else {
        u = sign | ((e + 127 - 15) << 23) | (m << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t mt__f32_to_f16_1(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));   /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);   /* >= 65520: rounds to inf */
    if (a < 0x38800000u) {   /* below 2^-14: a subnormal (or 2^-14 itself after rounding) */
        float x;
        memcpy(&x, &a, sizeof x);
        return (uint16_t)(sign | (uint16_t)rintf(x * 0x1p24f));   /* exact product; ties even */
    }
    const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);   /* round to nearest even at bit 13 */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}
