/* vec_neon.c — the vector kernels at level neon: aarch64 Advanced SIMD, 4
 * floats a vector (vec_body.h; part of every AArch64 CPU, no flags). */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <sleef.h>

typedef float32x4_t vf;
#define V_W 4
#define V_LOAD(p)            vld1q_f32(p)
#define V_STORE(p, v)        vst1q_f32((p), (v))
#define V_SET1(x)            vdupq_n_f32(x)
#define V_ADD(a, b)          vaddq_f32((a), (b))
#define V_SUB(a, b)          vsubq_f32((a), (b))
#define V_MUL(a, b)          vmulq_f32((a), (b))
#define V_DIV(a, b)          vdivq_f32((a), (b))
#define V_SQRT(a)            vsqrtq_f32(a)
#define V_EXP(a)             Sleef_expf4_u10advsimd(a)
#define V_FMA(a, b, c)       vfmaq_f32((c), (a), (b))
#define V_ROUND(a)           vrndnq_f32(a)
#define V_POW2I(n)           vreinterpretq_f32_s32(vshlq_n_s32(                                     \
                                 vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23))
#define V_SEL_GT(a, b, x, y) vbslq_f32(vcgtq_f32((a), (b)), (x), (y))
#define V_SEL_NAN(a, x, y)   vbslq_f32(vmvnq_u32(vceqq_f32((a), (a))), (x), (y))
#define V_TABLE              mt__vec_ops_neon
#define V_ISA                MT_ISA_NEON

#include "vec/vec_body.h"
#endif
