/*
 * cmd_bench_machine.c — `meshtrain bench machine`: what this machine can do,
 * measured, for the roofline (include/meshtrain/profile.h holds the file).
 *
 *  - sgemm: Open BLAS cblas_sgemm, square, the largest power of two up to
 *    4096 whose one-thread call stays near 0.2 s, on 1 thread and all cores
 *    (Open BLAS's threads); and "cold", as the engine runs its products
 *    (its pool splits them, Open BLAS on one thread each; their operands
 *    come from memory): one thread, and each core its own at once, every
 *    call on the next of its sets of operands (128 MiB of them in all, at
 *    least 16 MiB a thread), of that size up to 1024^3;
 *  - FMA peak: fused multiply-adds on registers only, at every kernel level
 *    (mt_cpu_isa) this CPU runs: 16 independent zmm accumulators for avx512,
 *    12 ymm for avx2, 16 q registers for neon, 16 one-lane floats for
 *    generic; so nothing waits on memory or on an FMA's latency; one thread
 *    per core for "all". With the kernel level in use (MT_CPU_ISA caps it)
 *    and oneDNN's ISA, so that a report finds the roof of a run's level;
 *  - attention: meshtrain's causal attention and its gradient on one
 *    thread, 4 heads of 64, 2048 tokens a run, at T = 64 to 1024: its cost
 *    entries' FLOPs over its time (the planner costs attention by it);
 *  - triad: STREAM's a[i] = b[i] + s*c[i] on float arrays 6 x the L3 of this
 *    class of machine, bytes counted as STREAM does (12 per element);
 *  - all-reduce: 2 devices on threads (and, under mpirun, the MPI ranks):
 *    8 bytes for latency, 64 MiB for nccl-tests' busbw.
 *
 * Every figure is the best of its repetitions (as STREAM reports): a peak is
 * what the machine can do, and this shared machine only ever subtracts.
 */
#include "cli/args.h"
#include "cli/bench_machine.h"
#include "cli/files.h"
#include "meshtrain.h"

#ifdef MT_HAVE_MPI
#include <mpi.h>
#endif

#ifdef MT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <cblas.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

static const char MACHINE_USAGE[] =
    "usage: meshtrain bench machine [--out FILE] [--quick]\n"
    "\n"
    "Measures the figures a roofline needs: Open BLAS sgemm and a register-only FMA\n"
    "peak at every kernel level the CPU runs (generic, avx2, avx512; neon on ARM), in\n"
    "GFLOP/s, and STREAM triad bandwidth (GB/s), on 1 thread and on all cores, and the\n"
    "all-reduce latency and bus bandwidth of each transport (MPI under mpirun). Prints\n"
    "the kernel level in use (MT_CPU_ISA caps it) and oneDNN's ISA, the figures beside\n"
    "the nominal peak (cores x FMA units x SIMD width x 2 x GHz), and saves them as JSON\n"
    "for --machine FILE (default: machine.json beside the meshtrain binary).\n"
    "\n"
    "examples:\n"
    "  meshtrain bench machine\n"
    "  mpirun -np 2 meshtrain bench machine --out machine.json\n";

typedef struct {
    bool       quick;
    int        cores;
    mt_cpu_isa best;    /* mt_cpu_isa_best(): the levels up to it run here */
    bool       bf16;    /* AVX512-BF16 (and AVX-512 F) */
    mt_cpu_isa level;   /* the FMA loop fma_run runs */
    bool       dot;     /* the peak loops run bf16 dot products instead of FMAs */
} probe;

/* SIMD floats of a level's vector register. */
static int level_lanes(mt_cpu_isa isa) {
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
static bool cpu_has_bf16_dot(void) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

/* ======================================================================== */
/* The CPU: name, flags, frequency, the default file                         */
/* ======================================================================== */

/* The value of the first "key : value" line of /proc/cpuinfo, or "". */
static void cpuinfo(const char *key, char *buf, size_t n) {
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon || strncmp(line, key, strlen(key)) != 0) continue;
        const char *v = colon + 1 + (colon[1] == ' ');
        snprintf(buf, n, "%.*s", (int)strcspn(v, "\n"), v);
        break;
    }
    if (f) fclose(f);
}

static bool has_flag(const char *flags, const char *flag) {
    size_t k = strlen(flag);
    for (const char *p = flags; (p = strstr(p, flag)); p += k)
        if ((p == flags || p[-1] == ' ') && (p[k] == ' ' || p[k] == '\0')) return true;
    return false;
}

/* GHz and where it came from: cpufreq's maximum, else /proc/cpuinfo's "cpu MHz". */
static double cpu_ghz(const char **source) {
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    long khz = 0;
    if (f) {
        if (fscanf(f, "%ld", &khz) != 1) khz = 0;
        fclose(f);
    }
    if (khz > 0) {
        *source = "cpufreq max";
        return khz / 1e6;
    }
    char mhz[64];
    cpuinfo("cpu MHz", mhz, sizeof mhz);
    double v = atof(mhz);
    *source = v > 0 ? "/proc/cpuinfo cpu MHz" : "unknown";
    return v > 0 ? v / 1e3 : NAN;
}

void cli_machine_default_path(char *buf, size_t n) {
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) {
        snprintf(buf, n, "machine.json");
        return;
    }
    exe[k] = '\0';
    snprintf(buf, n, "%s/machine.json", dirname(exe));
}

bool cli_machine_load(const char *path, mt_machine *out, bool *found, char *used, size_t n) {
    *found = false;
    if (path) {
        if (mt_machine_read(path, out) != MT_OK) {
            cli_error("--machine: %s", mt_errmsg());
            return false;
        }
        *found = true;
        snprintf(used, n, "%s", path);
        return true;
    }
    cli_machine_default_path(used, n);
    if (access(used, F_OK) != 0) return true;   /* none: the caller says so */
    *found = mt_machine_read(used, out) == MT_OK;
    if (!*found)   /* there but unreadable: not silently ignored */
        fprintf(stderr, "meshtrain: warning: ignoring the default machine file: %s\n",
                mt_errmsg());
    return true;
}

/* "Cooperlake", and a note when Open BLAS runs a kernel below this CPU's,
 * as bench/blas_env.sh decides: a fallback kernel, or an AVX2 one on an
 * AVX-512 CPU (the environment's OPENBLAS_CORETYPE=Haswell). */
static void blas_kernel(const char *flags, char *core, size_t n, char *note, size_t nn) {
    const char *name = openblas_get_corename();
    snprintf(core, n, "%s", name ? name : "unknown");
    note[0] = '\0';
    const char *best = has_flag(flags, "avx512_bf16") ? "Cooperlake"
                     : has_flag(flags, "avx512f")     ? "SkylakeX"
                     : has_flag(flags, "avx2")        ? "Haswell" : NULL;
    const char *env = getenv("OPENBLAS_CORETYPE");
    if (best && strcasecmp(core, best) != 0 && strcasecmp(core, "SkylakeX") != 0 &&
        strcasecmp(core, "Cooperlake") != 0 && strcasecmp(core, "SapphireRapids") != 0)
        snprintf(note, nn, "Open BLAS runs its %s kernel%s%s%s; this CPU supports %s's: run with "
                 "OPENBLAS_CORETYPE=%s (as bench/blas_env.sh does) for its peak", core,
                 env ? " (OPENBLAS_CORETYPE=" : "", env ? env : "", env ? ")" : "", best, best);
}

#ifdef MT_HAVE_DNNL
/* dnnl_cpu_isa_t's names as ONEDNN_MAX_CPU_ISA spells them (lower case) */
static const char *dnnl_isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41:             return "sse41";
    case dnnl_cpu_isa_avx:               return "avx";
    case dnnl_cpu_isa_avx2:              return "avx2";
    case dnnl_cpu_isa_avx2_vnni:         return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:       return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:  return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:  return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:   return "avx512_core_amx";
    case dnnl_cpu_isa_all:               return "all";
    default:                             return NULL;
    }
}
#endif

void cli_onednn_isa(char *buf, size_t n) {
#ifdef MT_HAVE_DNNL
    /* reading oneDNN's ISA fixes it: let the library apply MT_CPU_ISA's cap
     * first (mt_bf16_native does, before its own read) */
    (void)mt_bf16_native();
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    const char *name = dnnl_isa_name(isa);
    if (name) snprintf(buf, n, "%s", name);
    else snprintf(buf, n, "isa 0x%x", (unsigned)isa);   /* a newer oneDNN's */
#else
    snprintf(buf, n, "none");
#endif
}

/* ======================================================================== */
/* Threads that start together                                               */
/* ======================================================================== */

#define MAX_TEAM 256

/* fn(t, i) runs on thread i of t->n; it calls pthread_barrier_wait(&t->bar)
 * to start its timed part with the others, and leaves its figure in out[i]. */
typedef struct team team;
typedef void (*team_fn)(team *t, int i);
struct team {
    int               n;
    pthread_barrier_t bar;
    void             *arg;
    double            out[MAX_TEAM];
};

typedef struct { team *t; int i; team_fn fn; } member;

static void *team_main(void *p) {
    member *m = p;
    m->fn(m->t, m->i);
    return NULL;
}

/* Runs fn on n threads, this one being thread 0. */
static void team_run(team *t, int n, team_fn fn) {
    member m[MAX_TEAM];
    pthread_t th[MAX_TEAM];
    t->n = n > MAX_TEAM ? MAX_TEAM : n;
    pthread_barrier_init(&t->bar, NULL, (unsigned)t->n);
    for (int i = 0; i < t->n; i++) m[i] = (member){.t = t, .i = i, .fn = fn};
    for (int i = 1; i < t->n; i++)
        if (pthread_create(&th[i], NULL, team_main, &m[i]) != 0) {
            /* the others would wait at the barrier for ever */
            fprintf(stderr, "meshtrain: bench machine: cannot start thread %d of %d\n", i, t->n);
            exit(CLI_EXIT_FAIL);
        }
    fn(t, 0);
    for (int i = 1; i < t->n; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&t->bar);
}

static double team_max(const team *t) {
    double v = 0;
    for (int i = 0; i < t->n; i++) v = t->out[i] > v ? t->out[i] : v;
    return v;
}

/* Thread i's seconds of one repetition in, the repetition's (its slowest
 * thread's) out: every thread compares at the barrier, and out[] is read
 * before the next repetition writes it. */
static double team_slowest(team *t, int i, double seconds) {
    t->out[i] = seconds;
    pthread_barrier_wait(&t->bar);
    double slowest = team_max(t);
    pthread_barrier_wait(&t->bar);
    return slowest;
}

/* ======================================================================== */
/* FMA peak                                                                  */
/* ======================================================================== */

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
static double fma_run(const probe *p, long iters, float *sink) {
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

typedef struct { const probe *p; long iters; int reps; float sink; } fma_job;

static void fma_member(team *t, int i) {
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
static double fma_peak(const probe *p, int threads) {
    if (p->dot ? !p->bf16 : (int)p->level > (int)p->best || !level_of_this_arch(p->level))
        return NAN;
    float sink = 0;
    double t0 = mt_time_now(), fl = fma_run(p, 1 << 20, &sink);   /* calibrate */
    double rate = fl / (mt_time_now() - t0);
    const double target_s = p->quick ? 0.03 : 0.15;
    fma_job j = {.p = p, .reps = p->quick ? 3 : 5};
    j.iters = (long)(target_s * rate / (fl / (1 << 20)));
    j.iters = j.iters < 1000 ? 1000 : j.iters > (1L << 32) ? 1L << 32 : j.iters;
    team t = {.arg = &j};
    team_run(&t, threads, fma_member);
    double sum = 0;
    for (int i = 0; i < t.n; i++) sum += t.out[i];
    return sum;
}

/* ======================================================================== */
/* STREAM triad                                                              */
/* ======================================================================== */

typedef struct { float *a, *b, *c; size_t n; int reps; } triad_job;

static void triad_member(team *t, int i) {
    triad_job *j = t->arg;
    const size_t lo = j->n * (size_t)i / (size_t)t->n, hi = j->n * (size_t)(i + 1) / (size_t)t->n;
    float *a = j->a, *b = j->b, *c = j->c;
    for (size_t k = lo; k < hi; k++) a[k] = 0, b[k] = 1, c[k] = 2;   /* first touch: this thread's memory */
    double best = INFINITY;
    for (int r = 0; r < j->reps; r++) {
        pthread_barrier_wait(&t->bar);
        double t0 = mt_time_now();
        const float s = 3.0f;
        for (size_t k = lo; k < hi; k++) a[k] = b[k] + s * c[k];
        /* the repetition took as long as its slowest thread */
        double slowest = team_slowest(t, i, mt_time_now() - t0);
        best = slowest < best ? slowest : best;
    }
    if (i == 0) t->out[0] = best;
}

/* GB/s, 12 bytes per element; NAN when the arrays cannot be allocated. */
static double triad_gbs(const probe *p, int threads) {
    triad_job j = {.n = (size_t)(p->quick ? 4 : 16) << 20, .reps = p->quick ? 4 : 10};
    j.a = malloc(j.n * sizeof(float)), j.b = malloc(j.n * sizeof(float)), j.c = malloc(j.n * sizeof(float));
    double gbs = NAN;
    if (j.a && j.b && j.c) {
        team t = {.arg = &j};
        team_run(&t, threads, triad_member);
        gbs = 12.0 * (double)j.n / t.out[0] / 1e9;
    }
    free(j.a), free(j.b), free(j.c);
    return gbs;
}

/* ======================================================================== */
/* sgemm                                                                     */
/* ======================================================================== */

double cli_sgemm_gflops(int m, int n, int k, int threads, int reps) {
    float *a = malloc((size_t)m * k * sizeof *a), *b = malloc((size_t)k * n * sizeof *b);
    float *c = calloc((size_t)m * n, sizeof *c);
    double best = NAN;
    if (a && b && c) {
        for (size_t i = 0; i < (size_t)m * k; i++) a[i] = (float)(i % 7) * 0.1f;
        for (size_t i = 0; i < (size_t)k * n; i++) b[i] = (float)(i % 5) * 0.1f;
        /* Open BLAS's own threads: mt_set_num_threads leaves it at 1 (the
         * engine splits work over its pool itself) */
        openblas_set_num_threads(threads);
        for (int r = -1; r < reps; r++) {   /* r = -1: warm-up (Open BLAS starts its pool) */
            double t0 = mt_time_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n,
                        0.0f, c, n);
            double g = 2.0 * m * n * k / (mt_time_now() - t0) / 1e9;
            if (r >= 0 && !(g <= best)) best = g;
        }
    }
    mt_set_num_threads(mt_get_num_threads());   /* Open BLAS back to 1 thread */
    free(a), free(b), free(c);
    return best;
}

/* Operands from memory, as a training step's are (its working set is larger
 * than the caches: the ops before a product wrote them): the threads rotate
 * through sets of (a, b, c), this many bytes of them in all (a 2-core
 * EPYC's L3 is 32 MiB), and at least COLD_THREAD_BYTES each (a core's
 * share of a large host's L3 is a few MiB). */
#define COLD_BYTES ((size_t)128 << 20)
#define COLD_THREAD_BYTES ((size_t)16 << 20)
/* and of at most this size (a set: 12 MiB) */
#define COLD_MAX_N 1024

typedef struct { int n, reps; } sgemm_job;

/* One core's own n^3 sgemms on one Open BLAS thread, each on the next of its
 * sets (cold), started with the others each repetition; out[0]: the
 * seconds of one sgemm in the best repetition, as long as its slowest
 * thread. */
static void sgemm_member(team *t, int i) {
    sgemm_job *j = t->arg;
    const size_t nn = (size_t)j->n * (size_t)j->n, set = 3 * nn * sizeof(float);
    const size_t mine = COLD_BYTES / (size_t)t->n > COLD_THREAD_BYTES
                            ? COLD_BYTES / (size_t)t->n : COLD_THREAD_BYTES;
    const int sets = (int)((mine + set - 1) / set);
    float *mem = malloc((size_t)sets * set);   /* per set: a, b, c (n,n) */
    if (mem)
        for (size_t k = 0; k < 3 * nn * (size_t)sets; k++) mem[k] = (float)(k % 7) * 0.1f;
    double best = INFINITY;
    for (int r = -1; r < j->reps; r++) {   /* r = -1: warm-up */
        pthread_barrier_wait(&t->bar);
        double t0 = mt_time_now();
        for (int q = 0; mem && q < sets; q++) {
            float *a = mem + 3 * nn * (size_t)q, *b = a + nn, *c = b + nn;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, j->n, j->n, j->n, 1.0f, a,
                        j->n, b, j->n, 0.0f, c, j->n);
        }
        double slowest = team_slowest(t, i, mem ? (mt_time_now() - t0) / sets : INFINITY);
        if (r >= 0 && slowest < best) best = slowest;
    }
    free(mem);
    if (i == 0) t->out[0] = best;
}

double cli_sgemm_cold_gflops(int n, int threads, int reps) {
    openblas_set_num_threads(1);
    sgemm_job j = {.n = n, .reps = reps};
    team t = {.arg = &j};
    team_run(&t, threads, sgemm_member);
    mt_set_num_threads(mt_get_num_threads());   /* as cli_sgemm_gflops leaves it */
    return isfinite(t.out[0]) ? 2.0 * n * n * (double)n * t.n / t.out[0] / 1e9 : NAN;
}

/* ======================================================================== */
/* Attention                                                                 */
/* ======================================================================== */

#define ATT_HEADS 4
#define ATT_HEAD_SIZE 64
#define ATT_TOKENS 2048   /* B x T of each run */

/* meshtrain's causal attention at sequence length T on the engine's current
 * threads: mt_attention on a (B, T, 3C) qkv and its gradient (through a
 * mean), `reps` runs after a warm-up; the FLOPs of the attention nodes' cost
 * entries over their profiled time, GFLOP/s, into *gflops. */
static mt_status attention_gflops(int T, int reps, double *gflops) {
    const int64_t B = T < ATT_TOKENS ? ATT_TOKENS / T : 1, C = ATT_HEADS * ATT_HEAD_SIZE;
    mt_graph *g = mt_graph_create();
    if (!g) return mt_fail(MT_ENOMEM, "bench machine: cannot create a graph");
    mt_tensor *qkv = mt_param(g, "qkv", 3, (const int64_t[]){B, T, 3 * C},
                              (mt_init){.kind = MT_INIT_NORMAL, .std = 1.0f});
    mt_tensor *loss = mt_mean(g, mt_attention(g, qkv, ATT_HEADS));
    mt_status s = mt_graph_status(g);
    if (s == MT_OK) s = mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1});
    for (int r = -1; r < reps && s == MT_OK; r++) {   /* r = -1: warm-up */
        if (r == 0) s = mt_graph_set_profiling(g, true);
        if (s == MT_OK) s = mt_graph_forward(g);
        if (s == MT_OK) s = mt_graph_backward(g);
    }
    mt_op_totals f = {0}, b = {0};
    if (s == MT_OK) s = mt_graph_profile_op(g, "attention", &f);
    if (s == MT_OK) s = mt_graph_profile_op(g, "attention_bwd", &b);
    if (s == MT_OK)
        *gflops = f.seconds + b.seconds > 0 ? (f.flops + b.flops) / (f.seconds + b.seconds) / 1e9
                                            : NAN;
    else if (mt_graph_status(g) != MT_OK)
        s = mt_fail(s, "%s", mt_graph_errmsg(g));
    mt_graph_free(g);
    return s;
}

/* Every sequence length of m->attention_gflops_1 on one thread. */
static mt_status attention_curve(const probe *p, mt_machine *m) {
    const int threads = mt_get_num_threads();
    mt_set_num_threads(1);
    mt_status s = MT_OK;
    for (int i = 0; i < MT_MACHINE_N_ATTENTION && s == MT_OK; i++)
        s = attention_gflops(64 << i, p->quick ? 2 : 4, &m->attention_gflops_1[i]);
    mt_set_num_threads(threads);
    m->attention_head_size = ATT_HEAD_SIZE;
    return s;
}

/* ======================================================================== */
/* All-reduce                                                                */
/* ======================================================================== */

typedef struct { size_t big; int lat_iters, bw_iters; mt_machine_link out; } ar_job;

static mt_status ar_device(mt_ctx *ctx, void *p) {
    ar_job *j = p;
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    if (s != MT_OK) return s;
    const int P = mt_axis_size(ctx, ax);
    const size_t n = j->big / sizeof(float);
    float *buf = calloc(n, sizeof *buf);
    if (!buf) return mt_fail(MT_ENOMEM, "bench machine: cannot allocate %zu bytes", j->big);
    /* latency: the best of 5 runs of lat_iters 8-byte all-reduces; bandwidth: the best one */
    double lat = INFINITY, bw = INFINITY;
    for (int r = 0; r < 5 && s == MT_OK; r++) {
        s = mt_barrier(ctx, ax);
        double t0 = mt_time_now();
        for (int i = 0; i < j->lat_iters && s == MT_OK; i++)
            s = mt_all_reduce(ctx, ax, buf, 2, MT_F32, MT_REDUCE_SUM);
        double dt = (mt_time_now() - t0) / j->lat_iters;
        lat = dt < lat ? dt : lat;
    }
    for (int r = -1; r < j->bw_iters && s == MT_OK; r++) {   /* r = -1: warm-up */
        double t0 = mt_time_now();
        s = mt_all_reduce(ctx, ax, buf, n, MT_F32, MT_REDUCE_SUM);
        double dt = mt_time_now() - t0;
        if (r >= 0) bw = dt < bw ? dt : bw;
    }
    free(buf);
    if (s == MT_OK && mt_ctx_device(ctx) == 0)
        j->out = (mt_machine_link){.latency_us = lat * 1e6,
                                   .busbw_gbs = (double)j->big / bw / 1e9 * 2.0 * (P - 1) / P};
    return s;
}

static mt_status allreduce(const probe *p, bool mpi, mt_machine_link *out) {
    ar_job j = {.big = (size_t)(p->quick ? 4 : 64) << 20, .lat_iters = p->quick ? 200 : 2000,
                .bw_iters = p->quick ? 3 : 5};
    mt_launch_opts lo = {.mesh = mpi ? "d=-1" : "d=2", .devices = mpi ? 0 : 2,
                         .transport = mpi ? MT_TRANSPORT_MPI : MT_TRANSPORT_THREADS};
    mt_status s = mt_launch(&lo, ar_device, &j);
    *out = j.out;
    return s;
}

/* ======================================================================== */
/* The command                                                               */
/* ======================================================================== */

static void print_row(const char *what, double one, double all, const char *unit) {
    printf("%-34s %10.1f %10.1f  %s\n", what, one, all, unit);
}

static void print_table(const mt_machine *m, const char *ghz_src) {
    char sg[64];
    const mt_cpu_isa best = mt_cpu_isa_best(), in_use = mt_get_cpu_isa();
    printf("machine: %s, %d cores, Open BLAS kernel %s\n", m->cpu, m->cores, m->blas_core);
    if (in_use == best)
        printf("kernel level: %s (the best this CPU has)", m->isa_in_use);
    else
        printf("kernel level: %s, capped (MT_CPU_ISA=%s); this CPU's best is %s", m->isa_in_use,
               getenv("MT_CPU_ISA") ? getenv("MT_CPU_ISA") : "?", m->isa_best);
    printf("; oneDNN ISA (bf16 products): %s\n\n", m->onednn_isa);
    printf("%-34s %10s %10s\n", "figure (best of repetitions)", "1 thread", "all cores");
    snprintf(sg, sizeof sg, "sgemm %d^3 (Open BLAS)", m->sgemm_size);
    print_row(sg, m->sgemm_gflops_1, m->sgemm_gflops_all, "GFLOP/s");
    snprintf(sg, sizeof sg, "sgemm %d^3 cold, a core each", m->sgemm_cold_size);
    print_row(sg, m->sgemm_cold_gflops_1, m->sgemm_cold_gflops_all,
              "GFLOP/s  <- the engine's products");
    for (int l = (int)best; l >= 0; l--) {
        const double one = mt_machine_isa_gflops(m, (mt_cpu_isa)l, false);
        if (!isfinite(one)) continue;   /* another architecture's level */
        snprintf(sg, sizeof sg, "FMA peak, registers only (%s)", mt_cpu_isa_name((mt_cpu_isa)l));
        print_row(sg, one, mt_machine_isa_gflops(m, (mt_cpu_isa)l, true),
                  l == (int)in_use ? "GFLOP/s  <- the kernels' level" : "GFLOP/s");
    }
    if (isfinite(m->bf16_gflops_1))
        print_row("bf16 dot peak, registers (VDPBF16PS)", m->bf16_gflops_1, m->bf16_gflops_all,
                  "GFLOP/s");
    else
        printf("%-34s %21s\n", "bf16 dot peak", "none (no AVX512-BF16)");
    print_row("triad a=b+s*c, float (12 B/elem)", m->triad_gbs_1, m->triad_gbs_all, "GB/s");
    printf("%-34s", "attention, 1 thread, by T");
    for (int i = 0; i < MT_MACHINE_N_ATTENTION; i++)
        printf(" %d: %.1f", 64 << i, m->attention_gflops_1[i]);
    printf("  GFLOP/s (head size %d)\n", m->attention_head_size);
    print_row("sgemm / FMA peak", m->sgemm_gflops_1 / m->fma_gflops_1,
              m->sgemm_gflops_all / m->fma_gflops_all, "ratio");
    if (isfinite(m->bf16_gflops_1))
        print_row("bf16 dot / FMA peak", m->bf16_gflops_1 / m->fma_gflops_1,
                  m->bf16_gflops_all / m->fma_gflops_all, "ratio: bf16 products' best speed-up");
    printf("\n%-34s %10s %10s\n", "all-reduce, 2 devices", "8 B (us)", "busbw GB/s");
    printf("%-34s %10.2f %10.2f\n", "threads (64 MiB; --quick 4 MiB)", m->threads.latency_us,
           m->threads.busbw_gbs);
    if (m->has_mpi)
        printf("%-34s %10.2f %10.2f\n", "mpi (the ranks of mpirun)", m->mpi.latency_us, m->mpi.busbw_gbs);
    else
        printf("%-34s %21s\n", "mpi", "not measured (run under mpirun -np 2)");
    const int simd = level_lanes(best);
    if (isfinite(m->nominal_gflops))
        printf("\nnominal: %d cores x 2 FMA units (assumed) x %d floats x 2 flops x %.2f GHz (%s) "
               "= %.1f GFLOP/s; the FMA peak reaches %.0f %% of it%s\n", m->cores, simd,
               m->nominal_ghz, ghz_src, m->nominal_gflops, 100 * m->fma_gflops_all / m->nominal_gflops,
               m->fma_gflops_all > m->nominal_gflops ? " (the cores run above that frequency)" : "");
    else
        printf("\nnominal: unknown (no frequency in cpufreq or /proc/cpuinfo)\n");
}

static int claim_out(const char *path, mt_output **claim);
static int probe_and_write(bool quick, bool mpi, const char *out_path, mt_output **claim);

int cli_bench_machine(int argc, char **argv) {
    const char *out_path = NULL;
    bool quick = false;
    const cli_opt opts[] = {
        {"out", CLI_STR, &out_path, 0, 0, 0, 0, NULL, "FILE",
         "write the figures here (default: machine.json beside the meshtrain binary)"},
        {"quick", CLI_FLAG, &quick, 0, 0, 0, 0, NULL, NULL,
         "small sizes and few repetitions (a few seconds; for tests)"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    int rc;
    if (!cli_parse_named("bench", "machine", "benchmark", MACHINE_USAGE, opts, argc, argv, &rc))
        return rc;
    char def_path[4096];
    cli_machine_default_path(def_path, sizeof def_path);
    if (!out_path) out_path = def_path;

    /* The output is claimed before the probe (which takes a minute): a
     * directory, FIFO or device, a missing or read-only directory, or
     * another probe writing the same file fails now. Under mpirun every
     * rank checks it by stat only (they would all claim one name), and
     * rank 0, the one that writes, claims it once it knows its rank. */
    const bool mpi = mt_transport_resolve(MT_TRANSPORT_AUTO) == MT_TRANSPORT_MPI;
    mt_output *claim = NULL;
    if (mpi) {
        const cli_file files[] = {
            {.flag = "out", .path = out_path, .role = CLI_FILE_LOG, .stat_only = true}};
        if ((rc = cli_check_files(files, 1)) != CLI_EXIT_OK) return rc;
    } else if ((rc = claim_out(out_path, &claim)) != CLI_EXIT_OK) {
        return rc;
    }
    rc = probe_and_write(quick, mpi, out_path, &claim);
    mt_output_close(claim);
    return rc;
}

/* Claims the machine file `path` (*claim); the exit code of a failure,
 * after its message. */
static int claim_out(const char *path, mt_output **claim) {
    mt_status s = mt_output_claim(path, "machine file", claim);
    if (s == MT_OK) return CLI_EXIT_OK;
    cli_error("--out: %s", mt_errmsg());
    return cli_exit_of(s);
}

/* The probe, its table, and the machine file written to out_path, whose
 * claim *claim holds (NULL under mpirun until rank 0 claims it here); the
 * caller closes it. */
static int probe_and_write(bool quick, bool mpi, const char *out_path, mt_output **claim) {
    int rc;
    /* MPI first, on every rank, so that the other ranks do not share the
     * cores while rank 0 measures them; then only rank 0 goes on. */
    mt_machine m = {.triad_bytes_per_element = 12, .nominal_gflops = NAN, .nominal_ghz = NAN};
    if (mpi) {
#ifdef MT_HAVE_MPI
        if (allreduce(&(probe){.quick = quick}, true, &m.mpi) != MT_OK) {
            cli_error("bench machine: the MPI all-reduce failed: %s", mt_errmsg());
            return CLI_EXIT_FAIL;
        }
        int rank = 0, size = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (rank != 0) return CLI_EXIT_OK;
        m.has_mpi = size > 1;
#endif
        if ((rc = claim_out(out_path, claim)) != CLI_EXIT_OK) return rc;
    }

    char flags[4096], note[512];
    cpuinfo("model name", m.cpu, sizeof m.cpu);
    if (!m.cpu[0]) snprintf(m.cpu, sizeof m.cpu, "unknown");
    cpuinfo("flags", flags, sizeof flags);
    mt_set_num_threads(0);
    probe p = {.quick = quick, .cores = mt_get_num_threads(), .best = mt_cpu_isa_best(),
               .bf16 = cpu_has_bf16_dot()};
    m.cores = p.cores;
    blas_kernel(flags, m.blas_core, sizeof m.blas_core, note, sizeof note);
    if (note[0]) printf("note: %s\n", note);

    /* the largest power of two up to 4096 whose one-thread sgemm is near 0.2 s */
    int n = quick ? 256 : 1024;
    while (!quick && n < 4096 && 2.0 * n * n * n / (cli_sgemm_gflops(n, n, n, 1, 1) * 1e9) < 0.1)
        n *= 2;
    m.sgemm_size = n;
    m.sgemm_gflops_1 = cli_sgemm_gflops(n, n, n, 1, quick ? 2 : 3);
    m.sgemm_gflops_all = cli_sgemm_gflops(n, n, n, p.cores, quick ? 2 : 3);
    /* the engine's products: one Open BLAS thread each, operands from memory */
    m.sgemm_cold_size = n < COLD_MAX_N ? n : COLD_MAX_N;
    m.sgemm_cold_gflops_1 = cli_sgemm_cold_gflops(m.sgemm_cold_size, 1, quick ? 2 : 3);
    m.sgemm_cold_gflops_all = cli_sgemm_cold_gflops(m.sgemm_cold_size, p.cores, quick ? 2 : 3);
    /* every level this CPU runs (fma_peak: NAN for another architecture's) */
    for (int l = 0; l < (int)(sizeof m.fma_isa_gflops_1 / sizeof(double)); l++) {
        p.level = (mt_cpu_isa)l;
        m.fma_isa_gflops_1[l] = fma_peak(&p, 1);
        m.fma_isa_gflops_all[l] = fma_peak(&p, p.cores);
    }
    m.fma_gflops_1 = m.fma_isa_gflops_1[p.best];
    m.fma_gflops_all = m.fma_isa_gflops_all[p.best];
    snprintf(m.isa_best, sizeof m.isa_best, "%s", mt_cpu_isa_name(p.best));
    snprintf(m.isa_in_use, sizeof m.isa_in_use, "%s", mt_cpu_isa_name(mt_get_cpu_isa()));
    cli_onednn_isa(m.onednn_isa, sizeof m.onednn_isa);
    p.dot = true;
    m.bf16_gflops_1 = fma_peak(&p, 1);
    m.bf16_gflops_all = fma_peak(&p, p.cores);
    p.dot = false;
    if (attention_curve(&p, &m) != MT_OK) {
        cli_error("bench machine: the attention probe failed: %s", mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    m.triad_gbs_1 = triad_gbs(&p, 1);
    m.triad_gbs_all = triad_gbs(&p, p.cores);
    if (allreduce(&p, false, &m.threads) != MT_OK) {
        cli_error("bench machine: the threads all-reduce failed: %s", mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    const char *ghz_src;
    const double ghz = cpu_ghz(&ghz_src);
    const int simd = level_lanes(p.best);
    if (isfinite(ghz)) {
        m.nominal_ghz = ghz;
        m.nominal_gflops = p.cores * 2.0 * simd * 2.0 * ghz;
    }
    time_t now = time(NULL);
    strftime(m.measured_at, sizeof m.measured_at, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));

    print_table(&m, ghz_src);
    /* through the claim that kept other probes off the file during the
     * measurements (temporary file, rename) */
    mt_status st = mt_machine_write_to(&m, *claim);
    if (st != MT_OK) {
        cli_error("bench machine: %s", mt_errmsg());
        return cli_exit_of(st);
    }
    printf("written to %s (read it with --machine FILE)\n", out_path);
    if (fflush(stdout) != 0) {
        cli_error("cannot write to standard output: %s", strerror(errno));
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}
