/*
 * bench_util.h — what the C benchmarks share: the median of a sample, a
 * token file of random tokens, and the pair of trainers the tracing
 * benchmarks step in turn.
 */
#ifndef MT_BENCH_UTIL_H
#define MT_BENCH_UTIL_H

#include "meshtrain.h"

#include <stdlib.h>
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

#endif /* MT_BENCH_UTIL_H */
