/*
 * probe_team.c — the machine probe's teams: one thread a core, started
 * together, each timing its own part from a common barrier. The threads
 * are a team pool of the library's one thread pool (base/pool.h).
 */
#include "profile/probe_impl.h"

#include <stdint.h>

typedef struct { mt_team *t; mt_team_fn fn; } team_region;

/* Item i of the region is thread i's member. */
static void team_range(void *arg, int64_t begin, int64_t end, int worker) {
    const team_region *r = arg;
    (void)worker;
    for (int64_t i = begin; i < end; i++) r->fn(r->t, (int)i);
}

/* The threads are a team pool of the library's pool, made for the team and
 * freed after it, as the team's own threads were before (the pool's workers
 * only wake at the region's start; every timed part starts at the barrier,
 * so the figures do not see how the threads were started). */
bool mt__team_run(mt_team *t, int n, mt_team_fn fn) {
    t->n = n < 1 ? 1 : n > MT_POOL_TEAM_MAX ? MT_POOL_TEAM_MAX : n;
    mt_pool *pool = mt_pool_create_team(t->n);
    /* fewer threads than members would leave the others at the barrier */
    if (!pool || mt_pool_size(pool) != t->n) {
        mt_pool_free(pool);
        return false;
    }
    pthread_barrier_init(&t->bar, NULL, (unsigned)t->n);
    mt_pool_run(pool, t->n, 1, team_range, &(team_region){.t = t, .fn = fn});
    pthread_barrier_destroy(&t->bar);
    mt_pool_free(pool);
    return true;
}

static double team_max(const mt_team *t) {
    double v = 0;
    for (int i = 0; i < t->n; i++) v = t->out[i] > v ? t->out[i] : v;
    return v;
}

double mt__team_slowest(mt_team *t, int i, double seconds) {
    t->out[i] = seconds;
    pthread_barrier_wait(&t->bar);
    double slowest = team_max(t);
    pthread_barrier_wait(&t->bar);
    return slowest;
}
