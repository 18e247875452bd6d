/*
 * plan/search_workers.h — the threads of one `meshtrain plan` search
 * (search_workers.c) and what they share.
 *
 * Every thread walks the same enumeration of layouts (layouts.c) and
 * evaluates the classes it claims (mt__plan_claim: the first thread to
 * reach a tensor x pipe class takes it, as a dynamic schedule hands out
 * loop chunks in order), each with its own cache of programs and its own
 * report. What they share, under one lock: who holds each class, and the
 * steps a layout must beat to be printed (the top list's last, each
 * family's best, the best on all the chips), which every thread's pruning
 * reads (search.c's prune_above) and every feasible layout updates. A
 * layout pruned by another thread's steps cannot be printed either: the
 * layouts that beat it are in the answer. The reports are merged at the
 * end; each layout carries its place in the enumeration (its seq), and
 * ties between equal steps go to the earlier, so the answer is the one a
 * single thread gives.
 */
#ifndef MT_PLAN_SEARCH_WORKERS_H
#define MT_PLAN_SEARCH_WORKERS_H

#include "plan/refusals.h"
#include "plan/search_impl.h"

/* The families of layouts a report keeps the best of (search.c's FAMILY). */
#define MT__PLAN_N_FAMILIES 7

/* An infeasible layout's reason per family, the first met (an out-of-memory
 * one before one whose sizes do not divide), and where it was met. */
typedef struct {
    char      example[MT__PLAN_N_FAMILIES][256];
    bool      oom[MT__PLAN_N_FAMILIES];
    long long at[MT__PLAN_N_FAMILIES];   /* its layout's seq */
} mt__plan_notes;

/* One thread's search: its state (base first: visit casts), its report's
 * notes and its refusals. */
typedef struct {
    mt__plan_search   base;
    mt__plan_notes    notes;
    mt__plan_refusals refusals;   /* every refused layout, by reason */
    mt_plan_report    rep;        /* what base.rep points at */
    mt_status         status;     /* its run's (mt__plan_workers_run) */
    char              why[1024];  /* ... and the message, taken from its thread */
} mt__plan_worker;

/* Whether a ranks before b: the shorter step, then the less memory, then
 * the earlier in the enumeration. */
bool mt__plan_result_better(const mt_plan_result *a, const mt_plan_result *b);

/* The shared state of a search of n threads keeping `top` layouts, into
 * *out (free with mt__plan_shared_free). MT_ENOMEM. */
mt_status mt__plan_shared_new(int n, int top, struct mt__plan_shared **out);
void mt__plan_shared_free(struct mt__plan_shared *sh);

/* Feasible layout r of family `family` (on all the chips: `all`) in the
 * shared steps to beat, and counted as fitting (a pruned one too: r NULL). */
void mt__plan_shared_publish(mt__plan_search *s, const mt_plan_result *r, int family, bool all);

/* The slowest step a layout of `family` (on all the chips: `all`) would
 * have to beat to change the report, over every thread: the top list's
 * last when full, its family's best, and on all the chips the best of
 * those; 0 while one is missing (any step changes it). */
double mt__plan_shared_to_beat(const mt__plan_search *s, int family, bool all);

/* Runs fn on each of the n workers, worker 0 on the calling thread and the
 * others each on a thread of its own, and waits for them; each leaves the
 * search's barrier when fn returns. The first worker's failure (in order),
 * with its message; MT_ENOMEM where a thread cannot start. */
mt_status mt__plan_workers_run(mt__plan_worker *w, int n,
                               mt_status (*fn)(mt__plan_worker *));

/* Worker from's report, notes and refusals merged into into's (the top
 * list of `top`), as one thread that had evaluated both workers' layouts
 * in the enumeration's order would hold them. MT_ENOMEM. */
mt_status mt__plan_worker_merge(mt__plan_worker *into, const mt__plan_worker *from, int top);

/* r in the report's top list of `top` (sorted, best first), if it ranks
 * there. MT_ENOMEM. */
mt_status mt__plan_keep_best(mt__plan_search *s, const mt_plan_result *r, int top);

/* r at the end of the report's infeasible layouts (a search of one mesh
 * lists them all). MT_ENOMEM. */
mt_status mt__plan_keep_infeasible(mt__plan_search *s, const mt_plan_result *r);

#endif /* MT_PLAN_SEARCH_WORKERS_H */
