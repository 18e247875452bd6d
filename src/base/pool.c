/*
 * pool.c — fork-join pool: a generation counter wakes the workers, each takes
 * its chunk, a done counter brings them back.
 *
 * Waiting spins for a few microseconds (a region usually follows the last
 * one closely), then sleeps on a condition variable: an idle core takes
 * ~20 µs to wake (measured 2026-11-29, 2-core Zen 5 dev VM), but a spinning
 * worker would take a core from Open BLAS.
 */
#include "base/arch_impl.h"
#include "base/pool.h"
#include "meshtrain/base.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#define SPIN_ROUNDS 4000   /* the caller's wait for workers: ~ a few µs of pauses */
/* How long an idle worker spins before sleeping. Kernels follow each other
 * closely within a step (tens of µs apart), and waking a sleeping worker
 * costs 20-80 µs (measured 2026-11-29, 2-core Zen 5 dev VM); since matrix products run on this pool too (Open BLAS
 * is single-threaded inside it), nothing else wants the core meanwhile. */
#define SPIN_SECONDS 200e-6

struct mt_pool {
    int             n_threads;      /* counting the caller */
    pthread_t      *threads;        /* (n_threads - 1) workers */
    pthread_mutex_t mu;
    pthread_cond_t  wake;
    atomic_uint     generation;     /* bumped once per region */
    atomic_int      done;           /* workers finished with this region */
    atomic_bool     stop;
    /* the current region, written before generation is bumped */
    mt_range_fn     fn;
    void           *ctx;
    int64_t         n, chunk;
};

typedef struct { mt_pool *pool; int index; } worker_arg;

static void run_chunk(mt_pool *p, int index) {
    int64_t begin = (int64_t)index * p->chunk;
    int64_t end = begin + p->chunk < p->n ? begin + p->chunk : p->n;
    if (begin < end) p->fn(p->ctx, begin, end, index);
}

static void *worker_main(void *arg) {
    worker_arg wa = *(worker_arg *)arg;
    free(arg);
    mt_pool *p = wa.pool;
    unsigned seen = 0;
    for (;;) {
        unsigned gen;
        double give_up = mt_time_now() + SPIN_SECONDS;
        for (int spins = 0;
             (gen = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
             !atomic_load(&p->stop);
             spins++) {
            mt__cpu_relax();
            if ((spins & 63) == 63 && mt_time_now() > give_up) break;
        }
        if (gen == seen && !atomic_load(&p->stop)) {
            pthread_mutex_lock(&p->mu);
            while ((gen = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
                   !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = gen;
        run_chunk(p, wa.index);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

/* A pool of n_threads, at most `cap`; its workers started unless idle. */
static mt_pool *pool_create(int n_threads, int cap, bool idle) {
    mt_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads < 1 ? 1 : n_threads > cap ? cap : n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->stop, false);
    if (p->n_threads > 1 && !idle) {
        p->threads = calloc((size_t)p->n_threads - 1, sizeof *p->threads);
        if (!p->threads) { mt_pool_free(p); return NULL; }
        for (int i = 1; i < p->n_threads; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (!wa) { p->n_threads = i; mt_pool_free(p); return NULL; }
            wa->pool = p;
            wa->index = i;
            if (pthread_create(&p->threads[i - 1], NULL, worker_main, wa) != 0) {
                free(wa);
                p->n_threads = i;
                mt_pool_free(p);
                return NULL;
            }
        }
    }
    return p;
}

mt_pool *mt_pool_create(int n_threads) { return pool_create(n_threads, MT_POOL_MAX, false); }

mt_pool *mt_pool_create_idle(int n_threads) { return pool_create(n_threads, MT_POOL_MAX, true); }

mt_pool *mt_pool_create_team(int n_threads) {
    return pool_create(n_threads, MT_POOL_TEAM_MAX, false);
}

void mt_pool_free(mt_pool *p) {
    if (!p) return;
    if (p->threads) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->stop, true);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
        free(p->threads);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p);
}

int mt_pool_size(const mt_pool *p) { return p ? p->n_threads : 1; }

void mt_pool_run(mt_pool *p, int64_t n, int64_t grain, mt_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int workers = p ? p->n_threads : 1;
    if (workers > 1 && p->threads && n >= 2 * grain) {
        int64_t chunks = n / grain < workers ? n / grain : workers;
        int64_t chunk = (n + chunks - 1) / chunks;
        p->fn = fn;
        p->ctx = ctx;
        p->n = n;
        p->chunk = chunk;
        atomic_store_explicit(&p->done, 0, memory_order_relaxed);
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add_explicit(&p->generation, 1, memory_order_release);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        run_chunk(p, 0);
        int spins = 0;
        while (atomic_load_explicit(&p->done, memory_order_acquire) < workers - 1) {
            if (++spins < SPIN_ROUNDS) mt__cpu_relax();
            else sched_yield();
        }
        return;
    }
    fn(ctx, 0, n, 0);
}
