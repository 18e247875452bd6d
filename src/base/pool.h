/*
 * pool.h — a small fork-join thread pool for meshtrain's own kernels (internal).
 *
 * Open BLAS keeps its own threads for matrix products; this pool runs the
 * rest (attention, layernorm, losses, optimizer updates) over the same
 * cores, one region at a time. Idle workers spin only briefly, then sleep,
 * so they never steal a core from Open BLAS between regions.
 */
#ifndef MT_POOL_H
#define MT_POOL_H

#include <stdint.h>

typedef struct mt_pool mt_pool;

/* Work on [begin, end) of a range; `worker` (0 = the caller) indexes
 * per-thread scratch and partial results. */
typedef void (*mt_range_fn)(void *ctx, int64_t begin, int64_t end, int worker);

/* Most threads a pool may have. */
#define MT_POOL_MAX 64
/* Most threads a team pool may have (mt_pool_create_team). */
#define MT_POOL_TEAM_MAX 256

/* A pool of n_threads (counting the caller); n_threads <= 1 makes a pool
 * that runs everything on the caller. NULL if threads cannot be started. */
mt_pool *mt_pool_create(int n_threads);
/* A pool that counts n_threads (mt_pool_size: what per-thread scratch is
 * sized by) but starts no thread, every region running on the caller: for
 * a program that runs nothing (the shape-only backend), which would
 * otherwise start and join the workers of every program it compiles (the
 * planner compiles tens of thousands). */
mt_pool *mt_pool_create_idle(int n_threads);
void     mt_pool_free(mt_pool *pool);
/* A pool of up to MT_POOL_TEAM_MAX threads for running one function on
 * every thread at once (mt_pool_run(pool, mt_pool_size(pool), 1, ...): each
 * thread gets one item, its own index): the machine probe's teams, one
 * thread per core however many cores there are. Its worker indices may pass
 * MT_POOL_MAX, so kernels, whose per-worker arrays hold MT_POOL_MAX, never
 * run on it. Freed by mt_pool_free. */
mt_pool *mt_pool_create_team(int n_threads);
int      mt_pool_size(const mt_pool *pool);

/* Splits [0, n) into contiguous chunks of at least `grain` items, one per
 * thread, runs fn on each (the caller takes the first), and returns when all
 * are done. A NULL pool runs fn(ctx, 0, n, 0) on the caller. One region at
 * a time: fn must not call mt_pool_run on the same pool, and one pool
 * belongs to one calling thread (each graph and each device has its own). */
void mt_pool_run(mt_pool *pool, int64_t n, int64_t grain, mt_range_fn fn, void *ctx);

#endif
