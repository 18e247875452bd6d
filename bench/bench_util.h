/*
 * bench_util.h — what the C benchmarks share: the median of a sample, a
 * token file of random tokens, the pair of trainers the tracing
 * benchmarks step in turn, the same-run sgemm reference and the rows of a
 * graph's per-op profile.
 */
#ifndef MT_BENCH_UTIL_H
#define MT_BENCH_UTIL_H

#include "meshtrain.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v (n > 0 values; sorted in place). */
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Writes 2^17 random tokens below V as an llm.c token file at a new name
 * made from `path` (a mkstemp template, rewritten in place). 0 on success,
 * -1 on failure (mt_errmsg() says why when the write failed). */
static inline int bench_write_tokens(char *path, int V) {
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    close(fd);
    enum { N = 1 << 17 };
    int32_t *tok = malloc(N * sizeof *tok);
    if (!tok) return -1;
    for (int i = 0; i < N; i++) tok[i] = (int32_t)(mt_rng_uniform(5, 1, (uint64_t)i) * V) % V;
    mt_status s = mt_tokens_write(path, tok, N);
    free(tok);
    return s == MT_OK ? 0 : -1;
}

/* Two trainers of a GPT (L, C, NH=4, maxT=T=64, B=8; 2 threads) on data=2
 * over the token file `data`, for `steps` steps (and 2 to warm up):
 * tr[0] untraced, tr[1] tracing into `trace`, keeping `keep` steps (0: the
 * default). 0, or -1 after mt_trainer_create failed (mt_errmsg()). */
static inline int bench_trace_pair(const char *data, const char *trace, int L, int C, int steps,
                                   int keep, mt_trainer *tr[2]) {
    for (int k = 0; k < 2; k++) {
        mt_train_config c = mt_train_defaults();
        c.model = MT_MODEL_GPT;
        c.data = data;
        const mt_gpt_config gpt = {.L = L, .C = C, .NH = 4, .maxT = 64, .V = 0, .Vp = 0};
        c.model_config = &gpt;   /* copied by mt_trainer_create */
        c.model_config_size = sizeof gpt;
        c.B = 8;
        c.T = 64;
        c.steps = c.optim.total_steps = steps + 2;
        c.threads = 2;
        c.mesh = "data=2";
        c.trace = k ? trace : NULL;
        c.trace_steps = keep;
        if (mt_trainer_create(&c, &tr[k]) != MT_OK) return -1;
    }
    return 0;
}

/* The same-run sgemm reference: c (n,n) = a (n,n) · b (n,n), row-major,
 * through Open BLAS's own threading (the library at its best: the most a
 * matmul-bound step could hope for in the same process). */
typedef struct {
    int    n;
    float *a, *b, *c;
} bench_sgemm;

/* Allocates and fills the operands (uniform in [-0.5, 0.5)). 0, or -1 when
 * out of memory or n <= 0 (nothing left to free). */
static inline int bench_sgemm_init(bench_sgemm *s, int n) {
    size_t nn = (size_t)(n > 0 ? n : 0) * (size_t)(n > 0 ? n : 0);
    s->n = n;
    s->a = malloc(nn * sizeof *s->a);
    s->b = malloc(nn * sizeof *s->b);
    s->c = malloc(nn * sizeof *s->c);
    if (n <= 0 || !s->a || !s->b || !s->c) {
        free(s->a); free(s->b); free(s->c);
        return -1;
    }
    for (size_t i = 0; i < nn; i++) {
        s->a[i] = mt_rng_uniform(1, 1, i) - 0.5f;
        s->b[i] = mt_rng_uniform(1, 2, i) - 0.5f;
    }
    return 0;
}

static inline void bench_sgemm_free(bench_sgemm *s) { free(s->a); free(s->b); free(s->c); }

/* One product on `threads` Open BLAS threads, its seconds on the clock now
 * (mt_time_now, or bench_thread_cpu_now on one thread); leaves meshtrain
 * on `threads` kernel threads (it runs Open BLAS single-threaded inside its
 * own pool), so it may sit between the steps it is compared with. */
static inline double bench_sgemm_seconds_on(bench_sgemm *s, int threads, double (*now)(void)) {
    const int n = s->n;
    openblas_set_num_threads(threads);
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, s->a, n, s->b, n,
                0.0f, s->c, n);
    double t = now() - t0;
    mt_set_num_threads(threads);
    return t;
}

/* bench_sgemm_seconds_on the wall clock */
static inline double bench_sgemm_seconds(bench_sgemm *s, int threads) {
    return bench_sgemm_seconds_on(s, threads, mt_time_now);
}

/* The calling thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID): on a
 * shared machine, what a one-thread kernel cost without the time it was
 * preempted. */
static inline double bench_thread_cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The sgemm rate in GFLOP/s on an n³ product: the median of `reps` runs
 * (1..16) after two untimed ones (they warm the pool and caches). NAN when
 * out of memory or for bad arguments. */
static inline double bench_sgemm_gflops(int threads, int n, int reps) {
    bench_sgemm s;
    if (reps < 1 || reps > 16 || bench_sgemm_init(&s, n) != 0) return NAN;
    double t[16];
    for (int r = -2; r < reps; r++) {
        double sec = bench_sgemm_seconds(&s, threads);
        if (r >= 0) t[r] = sec;
    }
    bench_sgemm_free(&s);
    return 2.0 * n * (double)n * n / bench_median(t, reps) / 1e9;
}

/* Sums the rows of g's per-op profile (mt_graph_print_profile: op, calls,
 * ms, %, GFLOP/s) whose op name is one of `ops` (NULL-terminated; NULL:
 * every row): *ms the
 * time recorded, *gflop the FLOPs (rate times time, so to the printed
 * rate's 2 decimals). Returns the rows found; -1 when the profile could not
 * be read (profiling off prints no rows: 0). */
static inline int bench_profile_sum(const mt_graph *g, const char *const *ops, double *ms,
                                    double *gflop) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return -1;
    mt_graph_print_profile(g, f);
    fclose(f);
    int found = 0;
    char *save = NULL;
    *ms = *gflop = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[64];
        long long calls;
        double t, pct, rate;
        if (sscanf(line, "%63s %lld %lf %lf%% %lf", name, &calls, &t, &pct, &rate) != 5) continue;
        bool match = !ops;
        for (int i = 0; ops && ops[i] && !match; i++) match = strcmp(name, ops[i]) == 0;
        if (!match) continue;
        *ms += t;
        *gflop += rate * t * 1e-3;
        found++;
    }
    free(text);
    return found;
}

#endif /* MT_BENCH_UTIL_H */
