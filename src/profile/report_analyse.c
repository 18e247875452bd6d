/*
 * report_analyse.c — the tables of mt_report (report.h gives the
 * definitions): op kinds against the roofline, devices' busy / idle /
 * exposed / hidden time from unions of intervals, steps' MFU, HFU and
 * bubble, and the three biggest things to fix.
 */
#include "report_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Sets of time as sorted, disjoint intervals                                */
/* ======================================================================== */

typedef struct { double a, b; } ival;
typedef struct { ival *v; int n; } iset;

static int by_start(const void *x, const void *y) {
    const ival *p = x, *q = y;
    return (p->a > q->a) - (p->a < q->a);
}

/* Sorts and merges s in place. */
static void iset_norm(iset *s) {
    if (s->n == 0) return;
    qsort(s->v, (size_t)s->n, sizeof *s->v, by_start);
    int k = 0;
    for (int i = 1; i < s->n; i++) {
        if (s->v[i].a <= s->v[k].b) {
            if (s->v[i].b > s->v[k].b) s->v[k].b = s->v[i].b;
        } else {
            s->v[++k] = s->v[i];
        }
    }
    s->n = k + 1;
}

static double iset_len(const iset *s) {
    double t = 0;
    for (int i = 0; i < s->n; i++) t += s->v[i].b - s->v[i].a;
    return t;
}

/* out = x ∩ y (x, y normalised; out has room for x.n + y.n) */
static void iset_and(const iset *x, const iset *y, iset *out) {
    out->n = 0;
    for (int i = 0, j = 0; i < x->n && j < y->n;) {
        double a = fmax(x->v[i].a, y->v[j].a), b = fmin(x->v[i].b, y->v[j].b);
        if (a < b) out->v[out->n++] = (ival){a, b};
        if (x->v[i].b < y->v[j].b) i++;
        else j++;
    }
}

/* out = x − y (normalised; out has room for x.n + y.n) */
static void iset_minus(const iset *x, const iset *y, iset *out) {
    out->n = 0;
    int j = 0;
    for (int i = 0; i < x->n; i++) {
        double a = x->v[i].a, b = x->v[i].b;
        while (j < y->n && y->v[j].b <= a) j++;
        for (int k = j; k < y->n && y->v[k].a < b; k++) {
            if (y->v[k].a > a) out->v[out->n++] = (ival){a, y->v[k].a};
            if (y->v[k].b > a) a = y->v[k].b;
        }
        if (a < b) out->v[out->n++] = (ival){a, b};
    }
}

/* ======================================================================== */
/* Op kinds                                                                  */
/* ======================================================================== */

bool mt__report_is_collective(const char *kind) {
    static const char *const COLL[] = {"psum", "pmax", "pmin", "pmean", "all_gather",
                                       "all_to_all", "psum_scatter", "reduce_scatter",
                                       "ppermute", "send", "recv", "broadcast"};
    for (size_t i = 0; i < sizeof COLL / sizeof COLL[0]; i++)
        if (strncmp(kind, COLL[i], strlen(COLL[i])) == 0) return true;
    return false;
}

static int by_time(const void *x, const void *y) {
    const mt_report_op *p = x, *q = y;
    return (p->time_us < q->time_us) - (p->time_us > q->time_us);
}

static mt_status op_kinds(mt_report *r) {
    const double peak = r->machine.peak_gflops, bw = r->machine.bandwidth_gbs;
    r->ops = calloc((size_t)r->n_ev + 1, sizeof *r->ops);
    if (!r->ops) return mt_fail(MT_ENOMEM, "out of memory analysing a trace");
    double total = 0;
    for (int i = 0; i < r->n_ev; i++) {
        const mt__report_ev *e = &r->ev[i];
        if (e->cat != MT__EV_OP) continue;
        int k = 0;
        while (k < r->n_ops && strcmp(r->ops[k].kind, e->name) != 0) k++;
        mt_report_op *o = &r->ops[k];
        if (k == r->n_ops) snprintf(o->kind, sizeof o->kind, "%.31s", e->name), r->n_ops++;
        o->count++, o->time_us += e->dur, o->flops += e->flops, o->bytes += e->bytes;
        total += e->dur;
    }
    for (int k = 0; k < r->n_ops; k++) {
        mt_report_op *o = &r->ops[k];
        double sec = o->time_us * 1e-6;
        o->share = total > 0 ? o->time_us / total : 0;
        o->gflops = sec > 0 ? o->flops / sec * 1e-9 : NAN;
        o->gbs = sec > 0 ? o->bytes / sec * 1e-9 : NAN;
        o->intensity = o->bytes > 0 ? o->flops / o->bytes : NAN;
        o->bound_gflops = o->of_bound = NAN;
        o->bound = MT_BOUND_UNKNOWN;
        if (mt__report_is_collective(o->kind)) {
            o->bound = MT_BOUND_COMM;
        } else if (peak > 0 && bw > 0 && o->flops > 0 && o->bytes > 0) {
            double mem = o->intensity * bw;
            o->bound = mem >= peak ? MT_BOUND_COMPUTE : MT_BOUND_MEMORY;
            o->bound_gflops = fmin(peak, mem);
            o->of_bound = o->gflops / o->bound_gflops;
        } else if (bw > 0 && o->flops == 0 && o->bytes > 0) {
            /* moves data only (a copy, a lookup): its roof is the bandwidth */
            o->bound = MT_BOUND_MEMORY;
            o->of_bound = o->gbs / bw;
        }
    }
    qsort(r->ops, (size_t)r->n_ops, sizeof *r->ops, by_time);
    return MT_OK;
}

/* ======================================================================== */
/* Devices                                                                   */
/* ======================================================================== */

static bool is_wait(const mt__report_ev *e) {
    return e->cat == MT__EV_COMPUTE && strncmp(e->name, "wait", 4) == 0;
}

/* A collective matched across devices by its sequence number: not a send
 * or a receive (they pair two devices, not a group). */
static bool matched(const mt__report_ev *e) {
    return e->cat == MT__EV_COMM && e->seq >= 0 && strncmp(e->name, "send", 4) != 0 &&
           strncmp(e->name, "recv", 4) != 0;
}

/* A matched collective's key for sorting: its (seq, name) and its index. */
typedef struct {
    long        seq;
    const char *name;
    int         i;
} coll_key;

static int by_seq_name(const void *x, const void *y) {
    const coll_key *p = x, *q = y;
    if (p->seq != q->seq) return (p->seq > q->seq) - (p->seq < q->seq);
    return strcmp(p->name, q->name);
}

/* Sets every event's arrival: for a matched collective the latest start of
 * its (seq, name) over the devices, else its own start. `keys` has room for
 * n_ev keys. */
static void arrivals(mt_report *r, coll_key *keys) {
    int m = 0;
    for (int i = 0; i < r->n_ev; i++) {
        r->ev[i].arrival = r->ev[i].ts;
        if (matched(&r->ev[i])) keys[m++] = (coll_key){r->ev[i].seq, r->ev[i].name, i};
    }
    qsort(keys, (size_t)m, sizeof *keys, by_seq_name);
    for (int a = 0, b; a < m; a = b) {
        double last = -INFINITY;
        for (b = a; b < m && by_seq_name(&keys[a], &keys[b]) == 0; b++)
            last = fmax(last, r->ev[keys[b].i].ts);
        for (int k = a; k < b; k++) r->ev[keys[k].i].arrival = last;
    }
}

/* The part of e (on its device's own track) spent waiting for the other
 * devices: a matched collective up to its arrival; a "wait: ..." region up to
 * the latest arrival of the device's asynchronous collectives that end in it. */
static double sync_end(const mt_report *r, const mt__report_ev *e) {
    const double end = e->ts + e->dur;
    if (matched(e)) return fmin(e->arrival, end);
    if (!is_wait(e)) return e->ts;
    double last = e->ts;
    for (int j = 0; j < r->n_ev; j++) {
        const mt__report_ev *a = &r->ev[j];
        double a_end = a->ts + a->dur;
        if (a->device == e->device && a->lane > 0 && matched(a) && a_end > e->ts &&
            a_end <= end + 1e-3)
            last = fmax(last, a->arrival);
    }
    return fmin(last, end);
}

/* Fills the devices' busy, idle, sync, exposed, hidden and async times.
 * `buf` has room for 7 sets of n_ev intervals each. */
static void devices(mt_report *r, ival *buf) {
    const int n = r->n_ev;
    for (int d = 0; d < r->n_devs; d++) {
        iset work = {buf, 0}, waits = {buf + n, 0}, lanes = {buf + 2 * n, 0};
        iset busy = {buf + 3 * n, 0}, hid = {buf + 4 * n, 0}, sync = {buf + 5 * n, 0};
        iset synced = {buf + 6 * n, 0};
        mt_report_device *dv = &r->devs[d];
        for (int i = 0; i < n; i++) {
            mt__report_ev *e = &r->ev[i];
            ival v = {e->ts, e->ts + e->dur};
            if (e->device != dv->device) continue;
            if (e->lane > 0) {
                if (e->cat == MT__EV_COMM) lanes.v[lanes.n++] = v;
            } else if (e->cat == MT__EV_COMM || is_wait(e)) {
                waits.v[waits.n++] = v;
                double s1 = sync_end(r, e);
                e->sync = s1 - e->ts;
                if (s1 > e->ts) sync.v[sync.n++] = (ival){e->ts, s1};
            } else if (e->cat == MT__EV_OP || e->cat == MT__EV_COMPUTE) {
                work.v[work.n++] = v;
            } else if (e->cat == MT__EV_IDLE) {
                dv->idle_us += e->dur;
            }
        }
        iset_norm(&work), iset_norm(&waits), iset_norm(&lanes), iset_norm(&sync);
        iset_minus(&work, &waits, &busy);
        iset_and(&lanes, &busy, &hid);
        iset_and(&sync, &waits, &synced);
        dv->busy_us = iset_len(&busy);
        dv->sync_us = iset_len(&synced);
        dv->exposed_us = iset_len(&waits) - dv->sync_us;
        dv->hidden_us = iset_len(&hid);
        dv->async_us = iset_len(&lanes);
    }
}

/* ======================================================================== */
/* Steps                                                                     */
/* ======================================================================== */

/* The step's pipeline bubble, or NaN when no phase region is named "mb". */
static double bubble(const mt_report *r, int step) {
    double max_span = 0, max_busy = 0;
    for (int d = 0; d < r->n_devs; d++) {
        double t0 = INFINITY, t1 = -INFINITY, busy = 0, s0 = 0, s1 = -1;
        for (int i = 0; i < r->n_ev; i++) {
            const mt__report_ev *e = &r->ev[i];
            int k;
            if (e->device == r->devs[d].device && e->lane == 0 && e->cat == MT__EV_STEP &&
                sscanf(e->name, "step %d", &k) == 1 && k == step)
                s0 = e->ts, s1 = e->ts + e->dur;
        }
        for (int i = 0; i < r->n_ev; i++) {
            const mt__report_ev *e = &r->ev[i];
            if (e->device != r->devs[d].device || e->lane != 0 || e->cat != MT__EV_COMPUTE ||
                !strstr(e->name, " mb ") || e->ts < s0 || e->ts >= s1)
                continue;
            busy += e->dur;
            t0 = fmin(t0, e->ts), t1 = fmax(t1, e->ts + e->dur);
        }
        if (t1 > t0) max_span = fmax(max_span, t1 - t0), max_busy = fmax(max_busy, busy);
    }
    return max_span > 0 ? (max_span - max_busy) / max_span : NAN;
}

static mt_status steps(mt_report *r) {
    const double peak = r->machine.peak_gflops * 1e9;
    r->steps = calloc((size_t)r->n_ev + 1, sizeof *r->steps);
    if (!r->steps) return mt_fail(MT_ENOMEM, "out of memory analysing a trace");
    for (int i = 0; i < r->n_ev; i++) {
        const mt__report_ev *e = &r->ev[i];
        int k, j = 0;
        if (e->cat != MT__EV_STEP || e->lane != 0 || sscanf(e->name, "step %d", &k) != 1) continue;
        while (j < r->n_steps && r->steps[j].step != k) j++;
        if (j == r->n_steps) r->steps[r->n_steps++].step = k;
        mt_report_step *st = &r->steps[j];
        st->wall_us = fmax(st->wall_us, e->dur);
        for (int o = 0; o < r->n_ev; o++) {
            const mt__report_ev *op = &r->ev[o];
            if (op->cat == MT__EV_OP && op->device == e->device && op->lane == 0 &&
                op->ts >= e->ts && op->ts < e->ts + e->dur)
                st->flops += op->flops;
        }
    }
    r->total_wall_us = 0;
    for (int j = 0; j < r->n_steps; j++) {
        mt_report_step *st = &r->steps[j];
        double sec = st->wall_us * 1e-6;
        st->mfu = peak > 0 && r->machine.model_flops > 0 && sec > 0
                      ? r->machine.model_flops / (sec * peak * r->n_devs) : NAN;
        st->hfu = peak > 0 && sec > 0 ? st->flops / (sec * peak * r->n_devs) : NAN;
        st->bubble = bubble(r, st->step);
        r->total_wall_us += st->wall_us;
    }
    return MT_OK;
}

/* ======================================================================== */
/* The entry point                                                           */
/* ======================================================================== */

static int by_device(const void *x, const void *y) {
    const mt_report_device *p = x, *q = y;
    return (p->device > q->device) - (p->device < q->device);
}

mt_status mt_report_analyse(mt_report *r, const mt_report_machine *machine) {
    free(r->ops), free(r->devs), free(r->steps);
    r->ops = NULL, r->devs = NULL, r->steps = NULL;
    r->n_ops = r->n_devs = r->n_steps = r->n_fixes = 0;
    r->machine = machine ? *machine : (mt_report_machine){0};
    /* the figure given wins over the trace's */
    r->model_flops_traced = !(r->machine.model_flops > 0) && r->traced_model_flops > 0;
    if (r->model_flops_traced) r->machine.model_flops = r->traced_model_flops;
    r->devs = calloc((size_t)r->n_ev + 1, sizeof *r->devs);
    ival *buf = malloc(7 * ((size_t)r->n_ev + 1) * sizeof *buf);
    coll_key *idx = malloc(((size_t)r->n_ev + 1) * sizeof *idx);
    if (!r->devs || !buf || !idx) {
        free(buf), free(idx);
        return mt_fail(MT_ENOMEM, "out of memory analysing a trace of %d events", r->n_ev);
    }
    for (int i = 0; i < r->n_ev; i++) {
        int d = 0;
        while (d < r->n_devs && r->devs[d].device != r->ev[i].device) d++;
        if (d == r->n_devs) r->devs[r->n_devs++].device = r->ev[i].device;
    }
    qsort(r->devs, (size_t)r->n_devs, sizeof *r->devs, by_device);
    arrivals(r, idx);
    devices(r, buf);
    free(buf), free(idx);
    mt_status s = op_kinds(r);
    if (s == MT_OK) s = steps(r);
    if (s != MT_OK) return s;
    if (r->n_steps == 0)
        return mt_fail(MT_EINVAL, "the trace has no \"step N\" span on a device track; was it "
                       "written by `meshtrain train --trace`?");
    mt__report_fixes(r);
    return MT_OK;
}

const mt_report_op *mt_report_ops(const mt_report *r, int *n) { *n = r->n_ops; return r->ops; }
const mt_report_device *mt_report_devices(const mt_report *r, int *n) {
    *n = r->n_devs;
    return r->devs;
}
const mt_report_step *mt_report_steps(const mt_report *r, int *n) { *n = r->n_steps; return r->steps; }
const mt_report_fix *mt_report_fixes(const mt_report *r, int *n) { *n = r->n_fixes; return r->fixes; }
