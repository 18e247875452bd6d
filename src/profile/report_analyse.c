/*
 * report_analyse.c — the tables of mt_report (report.h gives the
 * definitions): op kinds against the roofline, devices' busy / idle /
 * exposed / hidden time from unions of intervals, steps' MFU, HFU and
 * bubble, and the three biggest things to fix.
 *
 * In O(n log n) for n events: the events are bucketed by device once, and
 * every question of the form "which spans of this device start inside that
 * one" is a binary search in the device's spans sorted by start. The sums
 * are taken in the events' order, as a scan of all events would, so that
 * the figures do not depend on how they were found.
 */
#include "report_impl.h"

#include <math.h>
#include <stdint.h>
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

/* FNV-1a of the first n bytes of s (up to its end). */
static uint64_t hash_name(const char *s, size_t n) {
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < n && s[i]; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211u;
    return h;
}

/* The kinds of op in the order they first appear, found through an open
 * addressing table of (n_ev + 1) · 2 rounded up to a power of two slots. A
 * kind is the op's name cut to 31 bytes (mt_report_op.kind). */
static mt_status op_kinds(mt_report *r) {
    const double peak = r->machine.peak_gflops, bw = r->machine.bandwidth_gbs;
    const size_t KIND = sizeof r->ops[0].kind - 1;
    size_t slots = 2;
    while (slots < 2 * ((size_t)r->n_ev + 1)) slots *= 2;
    int *table = malloc(slots * sizeof *table);
    r->ops = calloc((size_t)r->n_ev + 1, sizeof *r->ops);
    if (!r->ops || !table) {
        free(table);
        return mt_fail(MT_ENOMEM, "out of memory analysing a trace");
    }
    for (size_t i = 0; i < slots; i++) table[i] = -1;
    double total = 0;
    for (int i = 0; i < r->n_ev; i++) {
        const mt__report_ev *e = &r->ev[i];
        if (e->cat != MT__EV_OP) continue;
        size_t h = (size_t)hash_name(e->name, KIND) & (slots - 1);
        while (table[h] >= 0 && strncmp(r->ops[table[h]].kind, e->name, KIND) != 0)
            h = (h + 1) & (slots - 1);
        if (table[h] < 0) {
            table[h] = r->n_ops;
            snprintf(r->ops[r->n_ops++].kind, sizeof r->ops[0].kind, "%.31s", e->name);
        }
        mt_report_op *o = &r->ops[table[h]];
        o->count++, o->time_us += e->dur, o->flops += e->flops, o->bytes += e->bytes;
        total += e->dur;
    }
    free(table);
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

/* ======================================================================== */
/* Spans by start, per device                                                */
/* ======================================================================== */

/* An event's index under a sort key (a start, an end, a step number). */
typedef struct {
    double key;
    int    i;
} keyed;

/* qsort: by key, then by event (so a sort keeps the events' order among
 * equal keys). */
static int by_key(const void *x, const void *y) {
    const keyed *p = x, *q = y;
    if (p->key != q->key) return (p->key > q->key) - (p->key < q->key);
    return (p->i > q->i) - (p->i < q->i);
}

/* qsort: ints ascending. */
static int by_int(const void *x, const void *y) {
    int p = *(const int *)x, q = *(const int *)y;
    return (p > q) - (p < q);
}

/* The first of v[lo..hi) (sorted by key) whose key is >= key, or, with
 * `after`, > key. */
static int lower(const keyed *v, int lo, int hi, double key, bool after) {
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (v[mid].key < key || (after && v[mid].key == key)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The events of v[lo..hi) (sorted by start) that start in [a, b), into
 * out[] in the events' order; returns their count. */
static int window(const keyed *v, int lo, int hi, double a, double b, int *out) {
    int m = 0;
    bool in_order = true;
    for (int k = lower(v, lo, hi, a, false); k < hi && v[k].key < b; k++) {
        if (m > 0 && v[k].i < out[m - 1]) in_order = false;
        out[m++] = v[k].i;
    }
    if (!in_order) qsort(out, (size_t)m, sizeof *out, by_int);
    return m;
}

/* Per device (index into r->devs), the events that pass `pick`, sorted by
 * `key`: v[at[d] .. at[d + 1]). v has room for n_ev, at for n_devs + 1. */
typedef struct {
    keyed *v;
    int   *at;
} per_device;

static void sort_per_device(const mt_report *r, bool (*pick)(const mt__report_ev *),
                            double (*key)(const mt__report_ev *), per_device *out) {
    for (int d = 0; d <= r->n_devs; d++) out->at[d] = 0;
    for (int i = 0; i < r->n_ev; i++)
        if (pick(&r->ev[i])) out->at[r->ev[i].dix + 1]++;
    for (int d = 0; d < r->n_devs; d++) out->at[d + 1] += out->at[d];
    int *fill = out->at + r->n_devs + 1;   /* scratch: n_devs more ints */
    for (int d = 0; d < r->n_devs; d++) fill[d] = out->at[d];
    for (int i = 0; i < r->n_ev; i++)
        if (pick(&r->ev[i])) out->v[fill[r->ev[i].dix]++] = (keyed){key(&r->ev[i]), i};
    for (int d = 0; d < r->n_devs; d++) {   /* mostly in order already: the events' */
        keyed *v = out->v + out->at[d];
        const int m = out->at[d + 1] - out->at[d];
        int k = 1;
        while (k < m && by_key(&v[k - 1], &v[k]) <= 0) k++;
        if (k < m) qsort(v, (size_t)m, sizeof *v, by_key);
    }
}

/* ======================================================================== */
/* Sync: a segment tree of arrivals                                          */
/* ======================================================================== */

/* The max over a range of values: tree[m + k] = value k, tree[k] the max of
 * its two children (tree has room for 2m). */
static void max_tree_build(double *tree, int m) {
    for (int k = m - 1; k > 0; k--) tree[k] = fmax(tree[2 * k], tree[2 * k + 1]);
}

/* max(values[lo..hi)), -inf when empty */
static double max_tree_query(const double *tree, int m, int lo, int hi) {
    double best = -INFINITY;
    for (lo += m, hi += m; lo < hi; lo /= 2, hi /= 2) {
        if (lo & 1) best = fmax(best, tree[lo++]);
        if (hi & 1) best = fmax(best, tree[--hi]);
    }
    return best;
}

/* The matched async collectives of one device (on its comm lanes) by end,
 * and their arrivals' tree. */
typedef struct {
    keyed  *by_end;   /* (m) */
    double *tree;     /* (2m) */
    int     m;
} async_set;

/* The part of e (on its device's own track) spent waiting for the other
 * devices: a matched collective up to its arrival; a "wait: ..." region up to
 * the latest arrival of the device's asynchronous collectives that end in it. */
static double sync_end(const mt__report_ev *e, const async_set *as) {
    const double end = e->ts + e->dur;
    if (matched(e)) return fmin(e->arrival, end);
    if (!is_wait(e)) return e->ts;
    /* those with e->ts < their end <= end + 1e-3 */
    int lo = lower(as->by_end, 0, as->m, e->ts, true);
    int hi = lower(as->by_end, 0, as->m, end + 1e-3, true);
    double last = fmax(e->ts, max_tree_query(as->tree, as->m, lo, hi));
    return fmin(last, end);
}

/* Picks and keys for sort_per_device. */
static bool on_lane_matched(const mt__report_ev *e) { return e->lane > 0 && matched(e); }
static double end_of(const mt__report_ev *e) { return e->ts + e->dur; }
static bool any(const mt__report_ev *e) { (void)e; return true; }
static double zero(const mt__report_ev *e) { (void)e; return 0; }

/* Fills the devices' busy, idle, sync, exposed, hidden and async times.
 * `buf` has room for 7 sets of n_ev intervals each; `all` and `lanes` are
 * per_device scratch, tree room for 2 n_ev. */
static void devices(mt_report *r, ival *buf, per_device *all, per_device *lanes_by_end,
                    double *tree) {
    const int n = r->n_ev;
    sort_per_device(r, any, zero, all);   /* by event order: the key ties, i decides */
    sort_per_device(r, on_lane_matched, end_of, lanes_by_end);
    for (int d = 0; d < r->n_devs; d++) {
        iset work = {buf, 0}, waits = {buf + n, 0}, lanes = {buf + 2 * n, 0};
        iset busy = {buf + 3 * n, 0}, hid = {buf + 4 * n, 0}, sync = {buf + 5 * n, 0};
        iset synced = {buf + 6 * n, 0};
        mt_report_device *dv = &r->devs[d];
        async_set as = {lanes_by_end->v + lanes_by_end->at[d], tree,
                        lanes_by_end->at[d + 1] - lanes_by_end->at[d]};
        for (int k = 0; k < as.m; k++) tree[as.m + k] = r->ev[as.by_end[k].i].arrival;
        max_tree_build(tree, as.m);
        for (int k = all->at[d]; k < all->at[d + 1]; k++) {
            mt__report_ev *e = &r->ev[all->v[k].i];
            ival v = {e->ts, e->ts + e->dur};
            if (e->lane > 0) {
                if (e->cat == MT__EV_COMM) lanes.v[lanes.n++] = v;
            } else if (e->cat == MT__EV_COMM || is_wait(e)) {
                waits.v[waits.n++] = v;
                double s1 = sync_end(e, &as);
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

/* Picks and keys for sort_per_device: a device's own steps (by number), op
 * spans and pipeline phase regions (by start). */
static bool own_step(const mt__report_ev *e) {
    return e->cat == MT__EV_STEP && e->lane == 0 && e->step >= 0;
}
static bool own_op(const mt__report_ev *e) { return e->cat == MT__EV_OP && e->lane == 0; }
static bool phase_region(const mt__report_ev *e) {
    return e->cat == MT__EV_COMPUTE && e->lane == 0 && strstr(e->name, " mb ") != NULL;
}
static double start_of(const mt__report_ev *e) { return e->ts; }
static double step_of(const mt__report_ev *e) { return e->step; }

/* What steps() works with: per device its steps by number, its op spans and
 * its phase regions by start; `idx` scratch for a window's events. */
typedef struct {
    per_device steps, ops, phases;
    int       *idx;   /* (n_ev) */
} step_index;

/* The step's pipeline bubble, or NaN when no phase region is named "mb". */
static double bubble(const mt_report *r, const step_index *x, int step) {
    double max_span = 0, max_busy = 0;
    for (int d = 0; d < r->n_devs; d++) {
        double t0 = INFINITY, t1 = -INFINITY, busy = 0;
        /* the device's span of the step (the last, as a scan would keep) */
        int lo = x->steps.at[d], hi = x->steps.at[d + 1];
        int k = lower(x->steps.v, lo, hi, step, true) - 1;
        if (k < lo || x->steps.v[k].key != step) continue;
        const mt__report_ev *st = &r->ev[x->steps.v[k].i];
        int m = window(x->phases.v, x->phases.at[d], x->phases.at[d + 1], st->ts,
                       st->ts + st->dur, x->idx);
        for (int j = 0; j < m; j++) {
            const mt__report_ev *e = &r->ev[x->idx[j]];
            busy += e->dur;
            t0 = fmin(t0, e->ts), t1 = fmax(t1, e->ts + e->dur);
        }
        if (t1 > t0) max_span = fmax(max_span, t1 - t0), max_busy = fmax(max_busy, busy);
    }
    return max_span > 0 ? (max_span - max_busy) / max_span : NAN;
}

/* Numbers the steps in the order they first appear: slot[i] is step event
 * i's row in r->steps (-1 for other events); fills r->steps[].step and
 * n_steps. v and f: scratch of n_ev + 1. */
static void number_steps(mt_report *r, int *slot, keyed *v, keyed *f) {
    int m = 0, g = 0;
    for (int i = 0; i < r->n_ev; i++) {
        slot[i] = -1;
        if (own_step(&r->ev[i])) v[m++] = (keyed){r->ev[i].step, i};
    }
    qsort(v, (size_t)m, sizeof *v, by_key);   /* by number, then by place */
    for (int a = 0; a < m; a++)
        if (a == 0 || v[a].key != v[a - 1].key) f[g++] = (keyed){v[a].i, a};
    qsort(f, (size_t)g, sizeof *f, by_key);   /* by each number's first event */
    for (int j = 0; j < g; j++) {
        int a = f[j].i;
        r->steps[j].step = r->ev[v[a].i].step;
        for (int b = a; b < m && v[b].key == v[a].key; b++) slot[v[b].i] = j;
    }
    r->n_steps = g;
}

/* The steps' rows: wall time, FLOPs of the op spans that start inside a
 * device's span of the step (summed in the events' order), MFU, HFU, the
 * bubble. */
static mt_status steps(mt_report *r, step_index *x) {
    const double peak = r->machine.peak_gflops * 1e9;
    const size_t n = (size_t)r->n_ev + 1;
    r->steps = calloc(n, sizeof *r->steps);
    int *slot = malloc(n * sizeof *slot);
    keyed *v = malloc(n * sizeof *v), *f = malloc(n * sizeof *f);
    if (!r->steps || !slot || !v || !f) {
        free(slot), free(v), free(f);
        return mt_fail(MT_ENOMEM, "out of memory analysing a trace");
    }
    number_steps(r, slot, v, f);
    free(v), free(f);
    sort_per_device(r, own_step, step_of, &x->steps);
    sort_per_device(r, own_op, start_of, &x->ops);
    sort_per_device(r, phase_region, start_of, &x->phases);
    for (int i = 0; i < r->n_ev; i++) {
        const mt__report_ev *e = &r->ev[i];
        if (slot[i] < 0) continue;
        mt_report_step *st = &r->steps[slot[i]];
        st->wall_us = fmax(st->wall_us, e->dur);
        const int d = e->dix;
        int m = window(x->ops.v, x->ops.at[d], x->ops.at[d + 1], e->ts, e->ts + e->dur, x->idx);
        for (int k = 0; k < m; k++) st->flops += r->ev[x->idx[k]].flops;
    }
    free(slot);
    r->total_wall_us = 0;
    for (int j = 0; j < r->n_steps; j++) {
        mt_report_step *st = &r->steps[j];
        double sec = st->wall_us * 1e-6;
        st->mfu = peak > 0 && r->machine.model_flops > 0 && sec > 0
                      ? r->machine.model_flops / (sec * peak * r->n_devs) : NAN;
        st->hfu = peak > 0 && sec > 0 ? st->flops / (sec * peak * r->n_devs) : NAN;
        st->bubble = bubble(r, x, st->step);
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

/* r->devs (room for n_ev + 1): every device of an event, by number; each
 * event's dix. The devices are found through a hash set (`table`, room for
 * 2 (n_ev + 1) rounded up to a power of two, as op_kinds), then sorted. */
static mt_status find_devices(mt_report *r) {
    size_t slots = 2;
    while (slots < 2 * ((size_t)r->n_ev + 1)) slots *= 2;
    int *table = malloc(slots * sizeof *table);
    if (!table) return mt_fail(MT_ENOMEM, "out of memory analysing a trace");
    for (size_t i = 0; i < slots; i++) table[i] = -1;
    int n = 0, last = -1;
    for (int i = 0; i < r->n_ev; i++) {
        const int dev = r->ev[i].device;
        if (dev == last) continue;   /* the common case: a run of one track */
        last = dev;
        size_t h = ((size_t)dev * 0x9E3779B97F4A7C15u >> 7) & (slots - 1);
        while (table[h] >= 0 && table[h] != dev) h = (h + 1) & (slots - 1);
        if (table[h] < 0) table[h] = dev, r->devs[n++].device = dev;
    }
    free(table);
    qsort(r->devs, (size_t)n, sizeof *r->devs, by_device);
    r->n_devs = n;
    for (int i = 0, dix = 0; i < r->n_ev; i++) {
        mt_report_device key = {.device = r->ev[i].device};
        if (r->devs[dix].device != key.device) {
            const mt_report_device *d = bsearch(&key, r->devs, (size_t)n, sizeof key, by_device);
            dix = (int)(d - r->devs);
        }
        r->ev[i].dix = dix;
    }
    return MT_OK;
}

mt_status mt_report_analyse(mt_report *r, const mt_report_machine *machine) {
    free(r->ops), free(r->devs), free(r->steps);
    r->ops = NULL, r->devs = NULL, r->steps = NULL;
    r->n_ops = r->n_devs = r->n_steps = r->n_fixes = 0;
    r->machine = machine ? *machine : (mt_report_machine){0};
    /* the figure given wins over the trace's */
    r->model_flops_traced = !(r->machine.model_flops > 0) && r->traced_model_flops > 0;
    if (r->model_flops_traced) r->machine.model_flops = r->traced_model_flops;
    const size_t n = (size_t)r->n_ev + 1;
    r->devs = calloc(n, sizeof *r->devs);
    ival *buf = malloc(7 * n * sizeof *buf);
    coll_key *idx = malloc(n * sizeof *idx);
    /* three per_device sorts of n keys and their offsets (2 n + 1 each: see
     * sort_per_device), a window's events, the arrivals' tree */
    keyed *keys = malloc(3 * n * sizeof *keys);
    int *at = malloc(3 * (2 * n + 1) * sizeof *at), *win = malloc(n * sizeof *win);
    double *tree = malloc(2 * n * sizeof *tree);
    mt_status s = MT_OK;
    if (!r->devs || !buf || !idx || !keys || !at || !win || !tree) {
        s = mt_fail(MT_ENOMEM, "out of memory analysing a trace of %d events", r->n_ev);
        goto done;
    }
    if ((s = find_devices(r)) != MT_OK) goto done;
    step_index x = {{keys, at}, {keys + n, at + (2 * n + 1)},
                    {keys + 2 * n, at + 2 * (2 * n + 1)}, win};
    arrivals(r, idx);
    devices(r, buf, &x.steps, &x.ops, tree);   /* their scratch, before steps() fills them */
    s = op_kinds(r);
    if (s == MT_OK) s = steps(r, &x);
    if (s == MT_OK && r->n_steps == 0)
        s = mt_fail(MT_EFORMAT, "the trace has no \"step N\" span on a device track; was it "
                    "written by `meshtrain train --trace`?");
    if (s == MT_OK) mt__report_fixes(r);
done:
    free(buf), free(idx), free(keys), free(at), free(win), free(tree);
    return s;
}

const mt_report_op *mt_report_ops(const mt_report *r, int *n) { *n = r->n_ops; return r->ops; }
const mt_report_device *mt_report_devices(const mt_report *r, int *n) {
    *n = r->n_devs;
    return r->devs;
}
const mt_report_step *mt_report_steps(const mt_report *r, int *n) { *n = r->n_steps; return r->steps; }
const mt_report_fix *mt_report_fixes(const mt_report *r, int *n) { *n = r->n_fixes; return r->fixes; }
