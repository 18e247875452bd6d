/* vec_avx512.c — the vector kernels at level avx512: AVX-512 F/BW/DQ/VL,
 * 16 floats a vector (vec_body.h; built with -mavx512f -mavx512bw
 * -mavx512dq -mavx512vl -mfma, and run only on a CPU that has them). */
#if defined(__x86_64__)
#include <immintrin.h>
#include <sleef.h>

typedef __m512 vf;
#define V_W 16
#define V_LOAD(p)            _mm512_loadu_ps(p)
#define V_STORE(p, v)        _mm512_storeu_ps((p), (v))
#define V_SET1(x)            _mm512_set1_ps(x)
#define V_ADD(a, b)          _mm512_add_ps((a), (b))
#define V_SUB(a, b)          _mm512_sub_ps((a), (b))
#define V_MUL(a, b)          _mm512_mul_ps((a), (b))
#define V_DIV(a, b)          _mm512_div_ps((a), (b))
#define V_SQRT(a)            _mm512_sqrt_ps(a)
#define V_EXP(a)             Sleef_expf16_u10avx512f(a)
#define V_FMA(a, b, c)       _mm512_fmadd_ps((a), (b), (c))
#define V_ROUND(a)           _mm512_roundscale_ps((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V_POW2I(n)           _mm512_castsi512_ps(_mm512_slli_epi32(                                \
                                 _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23))
#define V_SEL_GT(a, b, x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask((a), (b), _CMP_GT_OQ), (y), (x))
#define V_SEL_NAN(a, x, y)   _mm512_mask_blend_ps(_mm512_cmp_ps_mask((a), (a), _CMP_UNORD_Q), (y), (x))
#define V_TABLE              mt__vec_ops_avx512
#define V_ISA                MT_ISA_AVX512

#include "vec/vec_body.h"
#endif
