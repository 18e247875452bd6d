/*
 * probe.c — the machine probe: what this machine can do, measured, for the
 * roofline (the machine file, profile.h; `meshtrain bench machine` runs it).
 *
 *  - sgemm: Open BLAS cblas_sgemm, square, the largest power of two up to
 *    4096 whose one-thread call stays near 0.2 s, on 1 thread and all cores
 *    (Open BLAS's threads); and "cold", as the engine runs its products
 *    (its pool splits them, Open BLAS on one thread each; their operands
 *    come from memory): one thread, and each core its own at once, every
 *    call on the next of its sets of operands (128 MiB of them in all, at
 *    least 16 MiB a thread), of that size up to 1024^3;
 *  - FMA peak at every kernel level, and the bf16 dot peak (probe_fma.c);
 *  - triad: STREAM's a[i] = b[i] + s*c[i] on float arrays 6 x the L3 of this
 *    class of machine, bytes counted as STREAM does (12 per element).
 *
 * Every figure is the best of its repetitions (as STREAM reports): a peak is
 * what the machine can do, and this shared machine only ever subtracts. The
 * measurements that run on all cores run on a team (probe_team.c).
 */
#define _GNU_SOURCE   /* strcasecmp */
#include "profile/probe_impl.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ======================================================================== */
/* The CPU: name, flags, frequency, Open BLAS's kernel                       */
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


/* ======================================================================== */
/* STREAM triad                                                              */
/* ======================================================================== */

typedef struct { float *a, *b, *c; size_t n; int reps; } triad_job;

static void triad_member(mt_team *t, int i) {
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
        double slowest = mt__team_slowest(t, i, mt_time_now() - t0);
        best = slowest < best ? slowest : best;
    }
    if (i == 0) t->out[0] = best;
}

/* GB/s, 12 bytes per element; NAN when the arrays cannot be allocated. */
static double triad_gbs(mt_probe *p, int threads) {
    triad_job j = {.n = (size_t)(p->quick ? 4 : 16) << 20, .reps = p->quick ? 4 : 10};
    j.a = malloc(j.n * sizeof(float)), j.b = malloc(j.n * sizeof(float)), j.c = malloc(j.n * sizeof(float));
    double gbs = NAN;
    if (j.a && j.b && j.c) {
        mt_team t = {.arg = &j};
        if (mt__team_run(&t, threads, triad_member)) gbs = 12.0 * (double)j.n / t.out[0] / 1e9;
        else p->failed = true;
    }
    free(j.a), free(j.b), free(j.c);
    return gbs;
}

/* ======================================================================== */
/* sgemm                                                                     */
/* ======================================================================== */

double mt_sgemm_gflops(int m, int n, int k, int threads, int reps) {
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
static void sgemm_member(mt_team *t, int i) {
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
        double slowest = mt__team_slowest(t, i, mem ? (mt_time_now() - t0) / sets : INFINITY);
        if (r >= 0 && slowest < best) best = slowest;
    }
    free(mem);
    if (i == 0) t->out[0] = best;
}

double mt_sgemm_cold_gflops(int n, int threads, int reps) {
    openblas_set_num_threads(1);
    sgemm_job j = {.n = n, .reps = reps};
    mt_team t = {.arg = &j};
    const bool ran = mt__team_run(&t, threads, sgemm_member);
    mt_set_num_threads(mt_get_num_threads());   /* as mt_sgemm_gflops leaves it */
    return ran && isfinite(t.out[0]) ? 2.0 * n * n * (double)n * t.n / t.out[0] / 1e9 : NAN;
}

/* ======================================================================== */
/* The probe                                                                 */
/* ======================================================================== */

mt_status mt_machine_probe(bool quick, mt_machine *m, char *note, size_t note_cap,
                           const char **ghz_source) {
    char flags[4096];
    cpuinfo("model name", m->cpu, sizeof m->cpu);
    if (!m->cpu[0]) snprintf(m->cpu, sizeof m->cpu, "unknown");
    cpuinfo("flags", flags, sizeof flags);
    mt_set_num_threads(0);
    mt_probe p = {.quick = quick, .cores = mt_get_num_threads(), .best = mt_cpu_isa_best(),
                  .bf16 = mt__cpu_has_bf16_dot()};
    m->cores = p.cores;
    blas_kernel(flags, m->blas_core, sizeof m->blas_core, note, note_cap);

    /* the largest power of two up to 4096 whose one-thread sgemm is near 0.2 s */
    int n = quick ? 256 : 1024;
    while (!quick && n < 4096 && 2.0 * n * n * n / (mt_sgemm_gflops(n, n, n, 1, 1) * 1e9) < 0.1)
        n *= 2;
    m->sgemm_size = n;
    m->sgemm_gflops_1 = mt_sgemm_gflops(n, n, n, 1, quick ? 2 : 3);
    m->sgemm_gflops_all = mt_sgemm_gflops(n, n, n, p.cores, quick ? 2 : 3);
    /* the engine's products: one Open BLAS thread each, operands from memory */
    m->sgemm_cold_size = n < COLD_MAX_N ? n : COLD_MAX_N;
    m->sgemm_cold_gflops_1 = mt_sgemm_cold_gflops(m->sgemm_cold_size, 1, quick ? 2 : 3);
    m->sgemm_cold_gflops_all = mt_sgemm_cold_gflops(m->sgemm_cold_size, p.cores, quick ? 2 : 3);
    /* every level this CPU runs (mt__fma_peak: NAN for another architecture's) */
    for (int l = 0; l < (int)(sizeof m->fma_isa_gflops_1 / sizeof(double)); l++) {
        p.level = (mt_cpu_isa)l;
        m->fma_isa_gflops_1[l] = mt__fma_peak(&p, 1);
        m->fma_isa_gflops_all[l] = mt__fma_peak(&p, p.cores);
    }
    m->fma_gflops_1 = m->fma_isa_gflops_1[p.best];
    m->fma_gflops_all = m->fma_isa_gflops_all[p.best];
    snprintf(m->isa_best, sizeof m->isa_best, "%s", mt_cpu_isa_name(p.best));
    snprintf(m->isa_in_use, sizeof m->isa_in_use, "%s", mt_cpu_isa_name(mt_get_cpu_isa()));
    p.dot = true;
    m->bf16_gflops_1 = mt__fma_peak(&p, 1);
    m->bf16_gflops_all = mt__fma_peak(&p, p.cores);
    p.dot = false;
    m->triad_gbs_1 = triad_gbs(&p, 1);
    m->triad_gbs_all = triad_gbs(&p, p.cores);
    if (p.failed || (p.cores > 1 && !isfinite(m->fma_gflops_all)))
        return mt_fail(MT_ENOMEM, "machine probe: cannot start %d threads at once (one a core); "
                       "free some memory or threads, or cap them with MT_NUM_THREADS", p.cores);
    const double ghz = cpu_ghz(ghz_source);
    if (isfinite(ghz)) {
        m->nominal_ghz = ghz;
        m->nominal_gflops = p.cores * 2.0 * mt_cpu_isa_floats(p.best) * 2.0 * ghz;
    }
    return MT_OK;
}
