/* vec_avx2.c — the vector kernels at level avx2: AVX2 + FMA, 8 floats a
 * vector (vec_body.h; built with -mavx2 -mfma and without AVX-512, so it
 * runs on any x86-64 CPU from Haswell and Zen 1 on). */
#if defined(__x86_64__)
#include <immintrin.h>
#include <sleef.h>

typedef __m256 vf;
#define V_W 8
#define V_LOAD(p)            _mm256_loadu_ps(p)
#define V_STORE(p, v)        _mm256_storeu_ps((p), (v))
#define V_SET1(x)            _mm256_set1_ps(x)
#define V_ADD(a, b)          _mm256_add_ps((a), (b))
#define V_SUB(a, b)          _mm256_sub_ps((a), (b))
#define V_MUL(a, b)          _mm256_mul_ps((a), (b))
#define V_DIV(a, b)          _mm256_div_ps((a), (b))
#define V_SQRT(a)            _mm256_sqrt_ps(a)
#define V_EXP(a)             Sleef_expf8_u10avx2(a)
#define V_FMA(a, b, c)       _mm256_fmadd_ps((a), (b), (c))
#define V_ROUND(a)           _mm256_round_ps((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_POW2I(n)           _mm256_castsi256_ps(_mm256_slli_epi32(                                \
                                 _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23))
#define V_SEL_GT(a, b, x, y) _mm256_blendv_ps((y), (x), _mm256_cmp_ps((a), (b), _CMP_GT_OQ))
#define V_SEL_NAN(a, x, y)   _mm256_blendv_ps((y), (x), _mm256_cmp_ps((a), (a), _CMP_UNORD_Q))
#define V_TABLE              mt__vec_ops_avx2
#define V_ISA                MT_ISA_AVX2

#include "vec/vec_body.h"
#endif
