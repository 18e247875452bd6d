/*
 * probe_impl.h — what the machine probe's files share (internal), bottom
 * up: probe_team.c (threads that start together), probe_fma.c (the FMA and
 * bf16 dot peaks), probe.c (the CPU, sgemm, the triad, the driver).
 */
#ifndef MT_PROBE_IMPL_H
#define MT_PROBE_IMPL_H

#include "base/pool.h"
#include "meshtrain/profile.h"

#include <pthread.h>
#include <stdbool.h>

/* What one measurement runs with. */
typedef struct {
    bool       quick;
    int        cores;
    mt_cpu_isa best;    /* mt_cpu_isa_best(): the levels up to it run here */
    bool       bf16;    /* AVX512-BF16 (and AVX-512 F) */
    mt_cpu_isa level;   /* the FMA loop fma_run runs */
    bool       dot;     /* the peak loops run bf16 dot products instead of FMAs */
    bool       failed;  /* a team's threads could not be started */
} mt_probe;

/* ---- threads that start together (probe_team.c) ------------------------- */

/* fn(t, i) runs on thread i of t->n; it calls pthread_barrier_wait(&t->bar)
 * to start its timed part with the others, and leaves its figure in out[i]. */
typedef struct mt_team mt_team;
typedef void (*mt_team_fn)(mt_team *t, int i);
struct mt_team {
    int               n;
    pthread_barrier_t bar;
    void             *arg;
    double            out[MT_POOL_TEAM_MAX];
};

/* Runs fn on n threads at once (at most MT_POOL_TEAM_MAX), the caller being
 * thread 0, on a team pool of the library's thread pool (base/pool.h).
 * False, running nothing, when the threads cannot be started. */
bool mt__team_run(mt_team *t, int n, mt_team_fn fn);

/* Thread i's seconds of one repetition in, the repetition's (its slowest
 * thread's) out: every thread compares at the barrier. */
double mt__team_slowest(mt_team *t, int i, double seconds);

/* ---- the FMA and bf16 dot peaks (probe_fma.c) ---------------------------- */

/* Whether this CPU runs VDPBF16PS (and saves the zmm registers). */
bool mt__cpu_has_bf16_dot(void);

/* GFLOP/s of p->level's FMA loop (or the bf16 dots with p->dot) on
 * `threads` threads: the sum of each thread's best; NAN for a level this CPU
 * or build lacks, or when the threads cannot be started. */
double mt__fma_peak(const mt_probe *p, int threads);

#endif /* MT_PROBE_IMPL_H */
