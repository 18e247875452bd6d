/* dtype.c — element types: sizes, names, and bf16 <-> f32 conversion. */
#include "tensor/tensor_impl.h"

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
