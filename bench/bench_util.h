/*
 * bench_util.h — what the C benchmarks share: the median of a sample, and a
 * token file of random tokens.
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

#endif /* MT_BENCH_UTIL_H */
