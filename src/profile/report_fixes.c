/*
 * report_fixes.c — the three things most worth fixing in a report: every
 * exposed communication (by name), waiting for other devices (sync), the
 * pipeline bubble, idle time and every
 * op kind below its roofline bound is a candidate, scored by the share of
 * the step it would give back if fixed; the best three are kept.
 */
#include "report_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_CAND = 64 };

typedef struct {
    mt_report_fix fix;
    double        score;   /* the share of the step a fix would give back */
} cand;

static int by_score(const void *x, const void *y) {
    const cand *p = x, *q = y;
    return (p->score < q->score) - (p->score > q->score);
}

/* Exposed communication by name: comm spans on device tracks and "wait: "
 * regions less their waiting for other devices (sync), per device on
 * average, over the steps' wall time. */
static int exposed(const mt_report *r, cand *c, int n) {
    const double per = r->n_devs * r->total_wall_us;
    char names[16][MT__REPORT_NAME];
    double t[16] = {0};
    int k = 0;
    for (int i = 0; i < r->n_ev; i++) {
        const mt__report_ev *e = &r->ev[i];
        bool wait = e->cat == MT__EV_COMPUTE && strncmp(e->name, "wait", 4) == 0;
        if (e->lane != 0 || !(e->cat == MT__EV_COMM || wait)) continue;
        int j = 0;
        while (j < k && strcmp(names[j], e->name) != 0) j++;
        if (j == k) {
            if (k == 16) continue;
            memcpy(names[k++], e->name, MT__REPORT_NAME);
        }
        t[j] += e->dur - fmax(0, e->sync);
    }
    for (int j = 0; j < k && n < MAX_CAND; j++, n++) {
        c[n].score = per > 0 ? t[j] / per : 0;
        c[n].fix.figure = c[n].score;
        snprintf(c[n].fix.text, sizeof c[n].fix.text, "%.60s exposed: %.1f%% of the step%s", names[j],
                 100 * c[n].score, strncmp(names[j], "wait", 4) == 0 ? "; overlap more of it" : "");
    }
    return n;
}

void mt__report_fixes(mt_report *r) {
    cand c[MAX_CAND];
    int n = exposed(r, c, 0);
    double bub = 0, idle = 0;
    int nb = 0;
    for (int j = 0; j < r->n_steps; j++)
        if (!isnan(r->steps[j].bubble)) bub += r->steps[j].bubble, nb++;
    if (nb > 0 && n < MAX_CAND) {
        c[n].score = c[n].fix.figure = bub / nb;
        snprintf(c[n].fix.text, sizeof c[n].fix.text, "pipeline bubble: %.1f%% of the step; "
                 "more microbatches or a zero-bubble schedule", 100 * bub / nb);
        n++;
    }
    double sync = 0;
    for (int d = 0; d < r->n_devs; d++) idle += r->devs[d].idle_us, sync += r->devs[d].sync_us;
    if (r->total_wall_us > 0 && n < MAX_CAND) {
        c[n].score = c[n].fix.figure = sync / (r->n_devs * r->total_wall_us);
        snprintf(c[n].fix.text, sizeof c[n].fix.text, "waiting for other devices at collectives "
                 "(load imbalance): %.1f%% of the step; balance the work per device",
                 100 * c[n].score);
        n++;
    }
    if (r->total_wall_us > 0 && n < MAX_CAND) {
        c[n].score = c[n].fix.figure = idle / (r->n_devs * r->total_wall_us);
        snprintf(c[n].fix.text, sizeof c[n].fix.text, "idle: %.1f%% of the step",
                 100 * c[n].score);
        n++;
    }
    for (int k = 0; k < r->n_ops && n < MAX_CAND; k++) {
        const mt_report_op *o = &r->ops[k];
        double step_share = r->total_wall_us > 0 ? o->time_us / (r->n_devs * r->total_wall_us) : 0;
        if (o->bound == MT_BOUND_COMM) continue;
        if (isnan(o->of_bound)) {
            c[n].score = 0.5 * step_share, c[n].fix.figure = o->share;
            snprintf(c[n].fix.text, sizeof c[n].fix.text, "%s: %.1f%% of op time (its roofline "
                     "needs --peak-gflops and --bandwidth-gbs)", o->kind, 100 * o->share);
        } else {
            c[n].score = step_share * fmax(0, 1 - o->of_bound), c[n].fix.figure = o->of_bound;
            snprintf(c[n].fix.text, sizeof c[n].fix.text, "%s at %.0f%% of its %s bound "
                     "(%.1f%% of op time)", o->kind, 100 * o->of_bound,
                     o->bound == MT_BOUND_COMPUTE ? "compute" : "memory-bandwidth",
                     100 * o->share);
        }
        n++;
    }
    qsort(c, (size_t)n, sizeof *c, by_score);
    r->n_fixes = 0;
    for (int i = 0; i < n && r->n_fixes < MT__REPORT_MAX_FIXES; i++)
        if (c[i].score > 0) r->fixes[r->n_fixes++] = c[i].fix;
}
