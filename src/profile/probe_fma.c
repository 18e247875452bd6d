/*
 * probe_fma.c — the machine probe's FMA peaks: fused multiply-adds on
 * registers only, at every kernel level (mt_cpu_isa) this CPU runs: 16
 * independent zmm accumulators for avx512, 12 ymm for avx2, 16 q registers
 * for neon, 16 one-lane floats for generic; so nothing waits on memory or on
 * an FMA's latency; and VDPBF16PS's bf16 dot products where the CPU has them.
 * One thread per core for "all" (the team of probe.c).
 */
#include "profile/probe_impl.h"

#include <math.h>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

int mt_cpu_isa_floats(mt_cpu_isa isa) {
    return isa == MT_ISA_AVX512 ? 16 : isa == MT_ISA_AVX2 ? 8 : isa == MT_ISA_NEON ? 4 : 1;
}

/* Whether this build has an FMA loop for level `isa` (another
 * architecture's has none). */
static bool level_of_this_arch(mt_cpu_isa isa) {
#if defined(__x86_64__)
    return isa != MT_ISA_NEON;
#elif defined(__aarch64__)
    return isa == MT_ISA_GENERIC || isa == MT_ISA_NEON;
#else
    return isa == MT_ISA_GENERIC;
#endif
}

/* Whether this CPU runs VDPBF16PS: libgcc's probe, which checks that the OS
 * saves the zmm registers too. */
bool mt__cpu_has_bf16_dot(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

/* Each returns the flops it did: `iters` rounds of one FMA on every
 * accumulator, 2 flops per lane. The accumulators are independent chains, more
 * than latency x units (4 x 2 on current cores), so the FMA units never wait.
 * The x86 loops carry their instruction set in a target attribute, so that a
 * portable build (-DMT_NATIVE=OFF) has them too; fma_run calls one only when
 * the CPU has its instructions. */
#define FMA4(v, a, b) v##0 = F(v##0, a, b), v##1 = F(v##1, a, b), v##2 = F(v##2, a, b), \
                      v##3 = F(v##3, a, b)

/* generic: portable C, one lane, as the generic kernels are. 16 float chains;
 * the empty asm keeps each in a register of its own, so that the compiler
 * cannot pack them into a vector (which would measure another level). A
 * compiler that fuses a*x + y runs an FMA a round, else a multiply and an
 * add: 2 flops either way. */
#if defined(__x86_64__) && defined(__GNUC__)
#define SCALAR_REGS "+x"
#elif defined(__aarch64__) && defined(__GNUC__)
#define SCALAR_REGS "+w"
#endif
static double fma_generic(long iters, float *sink) {
#define F(v, a, b) ((v) * (a) + (b))
#define S(k) (1.0f + (k) * 1e-3f)
    float a0 = S(0), a1 = S(1), a2 = S(2), a3 = S(3), b0 = S(4), b1 = S(5), b2 = S(6),
          b3 = S(7), c0 = S(8), c1 = S(9), c2 = S(10), c3 = S(11), d0 = S(12), d1 = S(13),
          d2 = S(14), d3 = S(15);
#undef S
    const float x = 0.9999999f, y = 1e-7f;
    for (long i = 0; i < iters; i++) {
        FMA4(a, x, y); FMA4(b, x, y); FMA4(c, x, y); FMA4(d, x, y);
#ifdef SCALAR_REGS
        /* two statements: an asm takes at most 30 operands, and "+" counts twice */
        __asm__("" : SCALAR_REGS(a0), SCALAR_REGS(a1), SCALAR_REGS(a2), SCALAR_REGS(a3),
                     SCALAR_REGS(b0), SCALAR_REGS(b1), SCALAR_REGS(b2), SCALAR_REGS(b3));
        __asm__("" : SCALAR_REGS(c0), SCALAR_REGS(c1), SCALAR_REGS(c2), SCALAR_REGS(c3),
                     SCALAR_REGS(d0), SCALAR_REGS(d1), SCALAR_REGS(d2), SCALAR_REGS(d3));
#endif
    }
#undef F
    *sink = a0 + a1 + a2 + a3 + b0 + b1 + b2 + b3 + c0 + c1 + c2 + c3 + d0 + d1 + d2 + d3;
    return (double)iters * 16 * 2;
}

#if defined(__aarch64__)
/* neon: 16 q-register accumulators of 4 floats (vfmaq_f32: v + x*y). */
static double fma_neon(long iters, float *sink) {
#define F(v, a, b) vfmaq_f32(b, v, a)
#define V(k) vdupq_n_f32(1.0f + (k) * 1e-3f)
    float32x4_t a0 = V(0), a1 = V(1), a2 = V(2), a3 = V(3), b0 = V(4), b1 = V(5), b2 = V(6),
                b3 = V(7), c0 = V(8), c1 = V(9), c2 = V(10), c3 = V(11), d0 = V(12),
                d1 = V(13), d2 = V(14), d3 = V(15);
#undef V
    const float32x4_t x = vdupq_n_f32(0.9999999f), y = vdupq_n_f32(1e-7f);
    for (long i = 0; i < iters; i++) {
        FMA4(a, x, y); FMA4(b, x, y); FMA4(c, x, y); FMA4(d, x, y);
    }
#undef F
    float32x4_t s = vaddq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)),
                              vaddq_f32(vaddq_f32(b0, b1), vaddq_f32(b2, b3)));
    s = vaddq_f32(s, vaddq_f32(vaddq_f32(c0, c1), vaddq_f32(c2, c3)));
    s = vaddq_f32(s, vaddq_f32(vaddq_f32(d0, d1), vaddq_f32(d2, d3)));
    *sink = vaddvq_f32(s);
    return (double)iters * 16 * 4 * 2;
}
#endif

#if defined(__x86_64__)
/* 16 zmm float accumulators a0..d3 with distinct starting values (identical
 * chains would be merged into one), and their sum into *sink. */
#define ZV(k) _mm512_set1_ps(1.0f + (k) * 1e-3f)
#define ZMM16_DECL                                                                        \
    __m512 a0 = ZV(0), a1 = ZV(1), a2 = ZV(2), a3 = ZV(3), b0 = ZV(4), b1 = ZV(5),         \
           b2 = ZV(6), b3 = ZV(7), c0 = ZV(8), c1 = ZV(9), c2 = ZV(10), c3 = ZV(11),      \
           d0 = ZV(12), d1 = ZV(13), d2 = ZV(14), d3 = ZV(15)
#define ZMM16_SUM(sink)                                                                      \
    do {                                                                                     \
        __m512 s_ = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)), \
                                  _mm512_add_ps(_mm512_add_ps(b0, b1), _mm512_add_ps(b2, b3))); \
        s_ = _mm512_add_ps(s_, _mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3))); \
        s_ = _mm512_add_ps(s_, _mm512_add_ps(_mm512_add_ps(d0, d1), _mm512_add_ps(d2, d3))); \
        *(sink) = _mm512_reduce_add_ps(s_);                                                  \
    } while (0)

__attribute__((target("avx512f"))) static double fma_avx512(long iters, float *sink) {
#define F _mm512_fmadd_ps
    ZMM16_DECL;
    const __m512 x = _mm512_set1_ps(0.9999999f), y = _mm512_set1_ps(1e-7f);
    for (long i = 0; i < iters; i++) {
        FMA4(a, x, y); FMA4(b, x, y); FMA4(c, x, y); FMA4(d, x, y);
    }
#undef F
    ZMM16_SUM(sink);
    return (double)iters * 16 * 16 * 2;
}

__attribute__((target("avx2,fma"))) static double fma_avx2(long iters, float *sink) {
#define F _mm256_fmadd_ps
#define V(k) _mm256_set1_ps(1.0f + (k) * 1e-3f)
    __m256 a0 = V(0), a1 = V(1), a2 = V(2), a3 = V(3), b0 = V(4), b1 = V(5), b2 = V(6),
           b3 = V(7), c0 = V(8), c1 = V(9), c2 = V(10), c3 = V(11);
#undef V
    const __m256 x = _mm256_set1_ps(0.9999999f), y = _mm256_set1_ps(1e-7f);
    for (long i = 0; i < iters; i++) {
        FMA4(a, x, y); FMA4(b, x, y); FMA4(c, x, y);
    }
#undef F
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(b0, b1), _mm256_add_ps(b2, b3)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)));
    float v[8];
    _mm256_storeu_ps(v, s);
    *sink = v[0] + v[7];
    return (double)iters * 12 * 8 * 2;
}

/* The same with bf16 dot products: VDPBF16PS adds the products of 16 pairs
 * of bf16 numbers to 16 floats, 64 flops an instruction, as a bf16 matrix
 * product's inner loop does. Its peak is the bf16 products' roof. */
__attribute__((target("avx512f,avx512bf16"))) static double dot_bf16(long iters, float *sink) {
#define F _mm512_dpbf16_ps
    ZMM16_DECL;
    /* bf16 1.0 and 2^-24: the sums stay finite */
    const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3380);
    for (long i = 0; i < iters; i++) {
        FMA4(a, x, y); FMA4(b, x, y); FMA4(c, x, y); FMA4(d, x, y);
    }
#undef F
    ZMM16_SUM(sink);
    return (double)iters * 16 * 16 * 2 * 2;
}
#endif /* __x86_64__ */

/* The sums land here, so that no loop is dead code. */
static volatile float fma_sink;

/* The loop of p->level (or the bf16 dots with p->dot), which the caller
 * checked the CPU has (probe_has); 0 flops for one this build lacks. */
static double fma_run(const mt_probe *p, long iters, float *sink) {
    *sink = 0;
    double fl = 0;
#if defined(__x86_64__)
    if (p->dot) fl = dot_bf16(iters, sink);
    else if (p->level == MT_ISA_AVX512) fl = fma_avx512(iters, sink);
    else if (p->level == MT_ISA_AVX2) fl = fma_avx2(iters, sink);
#elif defined(__aarch64__)
    if (!p->dot && p->level == MT_ISA_NEON) fl = fma_neon(iters, sink);
#endif
    if (!p->dot && p->level == MT_ISA_GENERIC) fl = fma_generic(iters, sink);
    fma_sink = *sink;
    return fl;
}

typedef struct { const mt_probe *p; long iters; int reps; float sink; } fma_job;

static void fma_member(mt_team *t, int i) {
    fma_job *j = t->arg;
    double best = 0;
    float sink = 0;
    for (int r = 0; r < j->reps; r++) {
        pthread_barrier_wait(&t->bar);
        double t0 = mt_time_now(), fl = fma_run(j->p, j->iters, &sink);
        double g = fl / (mt_time_now() - t0) / 1e9;
        best = g > best ? g : best;
    }
    t->out[i] = best;
    if (i == 0) j->sink = sink;
}

/* GFLOP/s on `threads` threads: the sum of each thread's best. */
double mt__fma_peak(const mt_probe *p, int threads) {
    if (p->dot ? !p->bf16 : (int)p->level > (int)p->best || !level_of_this_arch(p->level))
        return NAN;
    float sink = 0;
    double t0 = mt_time_now(), fl = fma_run(p, 1 << 20, &sink);   /* calibrate */
    double rate = fl / (mt_time_now() - t0);
    const double target_s = p->quick ? 0.03 : 0.15;
    fma_job j = {.p = p, .reps = p->quick ? 3 : 5};
    j.iters = (long)(target_s * rate / (fl / (1 << 20)));
    j.iters = j.iters < 1000 ? 1000 : j.iters > (1L << 32) ? 1L << 32 : j.iters;
    mt_team t = {.arg = &j};
    if (!mt__team_run(&t, threads, fma_member)) return NAN;
    double sum = 0;
    for (int i = 0; i < t.n; i++) sum += t.out[i];
    return sum;
}
