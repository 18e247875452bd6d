/*
 * search_workers.c — the threads of one `meshtrain plan` search: the
 * classes they claim, the steps to beat they share, the barrier between
 * the enumeration's passes, and their reports merged into one
 * (plan/search_workers.h says why the answer is a single thread's).
 */
#include "plan/search_workers.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A feasible layout as the ranking reads it. */
typedef struct {
    double    step, total;
    long long seq;
} rank;

struct mt__plan_shared {
    pthread_mutex_t lock;
    pthread_cond_t  turn;             /* the barrier's */
    int             n;                /* threads */
    int             live, arrived;    /* the barrier: threads not yet left, and waiting */
    unsigned long long round;         /* barriers passed */
    bool            stop;             /* a thread failed: no class is claimed any more */
    mt_status       failed;           /* a claim's own failure (MT_ENOMEM) */
    int            *owner;            /* (cap_owner) each class's thread + 1; 0: unclaimed */
    int             cap_owner;
    int             top, n_best;
    rank           *best;             /* (top) the fastest over every thread, best first */
    rank            family[MT__PLAN_N_FAMILIES], all;
    bool            has_family[MT__PLAN_N_FAMILIES], has_all;
    long long       n_feasible;       /* layouts that fit, pruned ones included */
};

static bool rank_better(const rank *a, const rank *b) {
    if (a->step != b->step) return a->step < b->step;
    if (a->total != b->total) return a->total < b->total;
    return a->seq < b->seq;
}

bool mt__plan_result_better(const mt_plan_result *a, const mt_plan_result *b) {
    const rank x = {a->step, a->total, a->seq}, y = {b->step, b->total, b->seq};
    return rank_better(&x, &y);
}

mt_status mt__plan_shared_new(int n, int top, struct mt__plan_shared **out) {
    *out = NULL;
    struct mt__plan_shared *sh = calloc(1, sizeof *sh);
    rank *best = calloc((size_t)(top > 0 ? top : 1), sizeof *best);
    if (!sh || !best || pthread_mutex_init(&sh->lock, NULL) != 0) {
        free(sh);
        free(best);
        return mt_fail(MT_ENOMEM, "out of memory for the plan search's shared state");
    }
    if (pthread_cond_init(&sh->turn, NULL) != 0) {
        pthread_mutex_destroy(&sh->lock);
        free(sh);
        free(best);
        return mt_fail(MT_ENOMEM, "cannot make the plan search's barrier");
    }
    sh->n = sh->live = n;
    sh->top = top;
    sh->best = best;
    *out = sh;
    return MT_OK;
}

void mt__plan_shared_free(struct mt__plan_shared *sh) {
    if (!sh) return;
    pthread_cond_destroy(&sh->turn);
    pthread_mutex_destroy(&sh->lock);
    free(sh->owner);
    free(sh->best);
    free(sh);
}

bool mt__plan_claim(mt__plan_search *s) {
    const int k = s->n_classes++;
    s->next_seq = (long long)k << 40;   /* a class's layouts are fewer than 2^40 */
    struct mt__plan_shared *sh = s->shared;
    if (!sh || sh->n == 1) return true;
    pthread_mutex_lock(&sh->lock);
    if (k >= sh->cap_owner && !sh->stop) {
        int cap = sh->cap_owner ? 2 * sh->cap_owner : 256;
        while (cap <= k) cap *= 2;
        int *o = realloc(sh->owner, (size_t)cap * sizeof *o);
        if (o) {
            memset(o + sh->cap_owner, 0, (size_t)(cap - sh->cap_owner) * sizeof *o);
            sh->owner = o;
            sh->cap_owner = cap;
        } else {   /* unrecorded, two threads could take one class: none goes on */
            sh->stop = true;
            sh->failed = MT_ENOMEM;
        }
    }
    bool mine = false;
    if (!sh->stop) {
        if (!sh->owner[k]) sh->owner[k] = s->worker + 1;
        mine = sh->owner[k] == s->worker + 1;
    }
    pthread_mutex_unlock(&sh->lock);
    return mine;
}

/* Releases the barrier's waiters once every live thread is there. */
static void barrier_check(struct mt__plan_shared *sh) {
    if (sh->arrived > 0 && sh->arrived >= sh->live) {
        sh->arrived = 0;
        sh->round++;
        pthread_cond_broadcast(&sh->turn);
    }
}

bool mt__plan_any_feasible(mt__plan_search *s) {
    struct mt__plan_shared *sh = s->shared;
    if (!sh) return s->rep->n_feasible > 0;
    pthread_mutex_lock(&sh->lock);
    const unsigned long long round = sh->round;
    sh->arrived++;
    barrier_check(sh);
    while (sh->round == round) pthread_cond_wait(&sh->turn, &sh->lock);
    const bool any = sh->n_feasible > 0;
    pthread_mutex_unlock(&sh->lock);
    return any;
}

/* Thread s leaves the search: the barrier no longer waits for it. */
static void leave(mt__plan_search *s, bool failed) {
    struct mt__plan_shared *sh = s->shared;
    pthread_mutex_lock(&sh->lock);
    sh->live--;
    sh->stop |= failed;
    barrier_check(sh);
    pthread_mutex_unlock(&sh->lock);
}

void mt__plan_shared_publish(mt__plan_search *s, const mt_plan_result *r, int family, bool all) {
    struct mt__plan_shared *sh = s->shared;
    pthread_mutex_lock(&sh->lock);
    sh->n_feasible++;
    if (r) {
        const rank x = {r->step, r->total, r->seq};
        if (!sh->has_family[family] || rank_better(&x, &sh->family[family]))
            sh->family[family] = x, sh->has_family[family] = true;
        if (all && (!sh->has_all || rank_better(&x, &sh->all))) sh->all = x, sh->has_all = true;
        if (sh->n_best < sh->top || rank_better(&x, &sh->best[sh->top - 1])) {
            int i = sh->n_best < sh->top ? sh->n_best++ : sh->top - 1;
            for (; i > 0 && rank_better(&x, &sh->best[i - 1]); i--) sh->best[i] = sh->best[i - 1];
            sh->best[i] = x;
        }
    }
    pthread_mutex_unlock(&sh->lock);
}

double mt__plan_shared_to_beat(const mt__plan_search *s, int family, bool all) {
    struct mt__plan_shared *sh = s->shared;
    pthread_mutex_lock(&sh->lock);
    double v = 0;
    if (sh->n_best >= sh->top && sh->has_family[family] && (!all || sh->has_all)) {
        const double last = sh->best[sh->top - 1].step;
        const double most = sh->family[family].step > last ? sh->family[family].step : last;
        v = all && sh->all.step > most ? sh->all.step : most;
    }
    pthread_mutex_unlock(&sh->lock);
    return v;
}

/* ======================================================================== */
/* Running                                                                   */
/* ======================================================================== */

typedef struct {
    mt__plan_worker *w;
    mt_status (*fn)(mt__plan_worker *);
} job;

static void run_one(mt__plan_worker *w, mt_status (*fn)(mt__plan_worker *)) {
    w->status = fn(w);
    if (w->status != MT_OK) snprintf(w->why, sizeof w->why, "%s", mt_errmsg());
    leave(&w->base, w->status != MT_OK);
}

static void *thread_main(void *arg) {
    const job *j = arg;
    run_one(j->w, j->fn);
    return NULL;
}

mt_status mt__plan_workers_run(mt__plan_worker *w, int n,
                               mt_status (*fn)(mt__plan_worker *)) {
    pthread_t tid[MT__PLAN_MAX_WORKERS];
    job jobs[MT__PLAN_MAX_WORKERS];
    bool started[MT__PLAN_MAX_WORKERS] = {false};
    for (int i = 1; i < n && i < MT__PLAN_MAX_WORKERS; i++) {
        jobs[i] = (job){&w[i], fn};
        started[i] = pthread_create(&tid[i], NULL, thread_main, &jobs[i]) == 0;
        if (!started[i]) leave(&w[i].base, false);   /* it claims nothing: the others do all */
    }
    run_one(&w[0], fn);
    for (int i = 1; i < n && i < MT__PLAN_MAX_WORKERS; i++)
        if (started[i]) pthread_join(tid[i], NULL);
    for (int i = 0; i < n; i++)
        if (w[i].status != MT_OK) return mt_fail(w[i].status, "%s", w[i].why);
    const mt_status claimed = w[0].base.shared->failed;
    return claimed == MT_OK ? MT_OK
                            : mt_fail(claimed, "out of memory for the plan search's classes");
}

/* ======================================================================== */
/* Merging                                                                   */
/* ======================================================================== */

/* r at the end of (*arr)[*n] (capacity *cap, at most max > 0). */
static mt_status append(mt_plan_result **arr, int *n, int *cap, int max, const mt_plan_result *r) {
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 16;
        if (max > 0 && c > max) c = max;
        if (c <= *n) return MT_OK;
        mt_plan_result *g = realloc(*arr, (size_t)c * sizeof *g);
        if (!g) return mt_fail(MT_ENOMEM, "out of memory for %d plan results", c);
        *arr = g;
        *cap = c;
    }
    (*arr)[(*n)++] = *r;
    return MT_OK;
}

mt_status mt__plan_keep_best(mt__plan_search *s, const mt_plan_result *r, int top) {
    mt_plan_report *rep = s->rep;
    if (rep->n_best == top && !mt__plan_result_better(r, &rep->best[top - 1])) return MT_OK;
    if (rep->n_best < top) {
        mt_status st = append(&rep->best, &rep->n_best, &s->cap_best, top, r);
        if (st != MT_OK) return st;
    } else {
        rep->best[top - 1] = *r;
    }
    for (int i = rep->n_best - 1; i > 0 && mt__plan_result_better(&rep->best[i], &rep->best[i - 1]);
         i--) {
        mt_plan_result t = rep->best[i];
        rep->best[i] = rep->best[i - 1];
        rep->best[i - 1] = t;
    }
    return MT_OK;
}

mt_status mt__plan_keep_infeasible(mt__plan_search *s, const mt_plan_result *r) {
    return append(&s->rep->infeasible, &s->rep->n_infeasible, &s->cap_infeasible, 0, r);
}

static int by_seq(const void *a, const void *b) {
    const long long x = ((const mt_plan_result *)a)->seq, y = ((const mt_plan_result *)b)->seq;
    return (x > y) - (x < y);
}

mt_status mt__plan_worker_merge(mt__plan_worker *into, const mt__plan_worker *from, int top) {
    mt_plan_report *a = into->base.rep;
    const mt_plan_report *b = from->base.rep;
    a->n_evaluated += b->n_evaluated;
    a->n_feasible += b->n_feasible;
    a->n_feasible_all += b->n_feasible_all;
    a->n_pruned += b->n_pruned;
    /* a best not yet set has chips 0 (pruned layouts count without one) */
    if (b->best_all.chips && (!a->best_all.chips ||
                              mt__plan_result_better(&b->best_all, &a->best_all)))
        a->best_all = b->best_all;
    for (int f = 0; f < MT__PLAN_N_FAMILIES; f++) {
        mt_plan_family *x = &a->families[f];
        const mt_plan_family *y = &b->families[f];
        x->n_feasible += y->n_feasible;
        if (y->best.chips && (!x->best.chips || mt__plan_result_better(&y->best, &x->best)))
            x->best = y->best;
        /* the family's example: the first out-of-memory one, else the first */
        const mt__plan_notes *ny = &from->notes;
        mt__plan_notes *nx = &into->notes;
        if (ny->example[f][0] &&
            (!nx->example[f][0] || (ny->oom[f] && !nx->oom[f]) ||
             (ny->oom[f] == nx->oom[f] && ny->at[f] < nx->at[f]))) {
            memcpy(nx->example[f], ny->example[f], sizeof nx->example[f]);
            nx->oom[f] = ny->oom[f];
            nx->at[f] = ny->at[f];
        }
    }
    mt_status st = MT_OK;
    for (int i = 0; i < b->n_best && st == MT_OK; i++)
        st = mt__plan_keep_best(&into->base, &b->best[i], top);
    for (int i = 0; i < b->n_infeasible && st == MT_OK; i++)
        st = append(&a->infeasible, &a->n_infeasible, &into->base.cap_infeasible, 0,
                    &b->infeasible[i]);
    if (st == MT_OK && a->n_infeasible > 1)
        qsort(a->infeasible, (size_t)a->n_infeasible, sizeof *a->infeasible, by_seq);
    if (st == MT_OK) st = mt__plan_refusals_merge(&into->refusals, &from->refusals);
    return st;
}
