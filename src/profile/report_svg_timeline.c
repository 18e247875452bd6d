/*
 * report_svg_timeline.c — timeline.svg: the step of median wall time, one
 * row per device track and a thinner one per asynchronous comm lane, time
 * to the right; compute, communication and idle in their colours
 * (report.h gives the layout). Linear in the trace but for two sorts: the
 * events are visited once to keep those inside the step drawn, bucketed by
 * device, and a region's ops are found by binary search.
 */
#include "report_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { W = 1200, LEFT = 110, RIGHT = 30, TOP = 62, ROW = 28, LANE = 16, MAX_LANES = 16 };

/* The kinds of box, in drawing order (ops last: on top of their regions). */
typedef enum { K_REGION, K_WAIT, K_IDLE, K_COMM, K_OP, K_COUNT } kind;

static const struct {
    const char *cls, *fill, *ink, *legend;   /* ink: the label's colour on the fill */
} KIND[K_COUNT] = {
    [K_REGION] = {"region", "#a0cbe8", "#1a1a1a", "compute region"},
    [K_WAIT]   = {"wait", "#e15759", "#ffffff", "wait: for communication"},
    [K_IDLE]   = {"idle", "#d4d4d4", "#1a1a1a", "idle"},
    [K_COMM]   = {"comm", "#f28e2b", "#1a1a1a", "communication"},
    [K_OP]     = {"op", "#2e5a87", "#ffffff", "op"},
};

static int kind_of(const mt__report_ev *e) {
    switch (e->cat) {
    case MT__EV_OP: return K_OP;
    case MT__EV_COMM: return K_COMM;
    case MT__EV_IDLE: return K_IDLE;
    case MT__EV_COMPUTE: return strncmp(e->name, "wait", 4) == 0 ? K_WAIT : K_REGION;
    default: return -1;
    }
}

static int by_wall(const void *x, const void *y) {
    const mt_report_step *p = *(const mt_report_step *const *)x, *q = *(const mt_report_step *const *)y;
    return (p->wall_us > q->wall_us) - (p->wall_us < q->wall_us);
}

/* The step of median wall time (the lower middle of an even count). */
static const mt_report_step *median_step(const mt_report *r) {
    const mt_report_step **s = malloc((size_t)r->n_steps * sizeof *s);
    if (!s) return NULL;
    for (int j = 0; j < r->n_steps; j++) s[j] = &r->steps[j];
    qsort(s, (size_t)r->n_steps, sizeof *s, by_wall);
    const mt_report_step *m = s[(r->n_steps - 1) / 2];
    free(s);
    return m;
}

/* An op span's track and start. */
typedef struct {
    double tid, ts;
} op_key;

/* What the drawing looks up: the events inside the window by device (their
 * order kept), each device's comm lanes, the op spans by (tid, start). */
typedef struct {
    int    *in, *at;           /* device dix's events: in[at[dix] .. at[dix + 1]) */
    int    *lane, *n_lanes;    /* device dix's lanes: lane[MAX_LANES dix ..], sorted */
    op_key *ops;               /* the op spans by tid, then start (n_ops) */
    int     n_ops;
} lookup;

/* The comm lanes of every device (up to MAX_LANES each, the first met),
 * sorted. */
static void find_lanes(const mt_report *r, lookup *x) {
    for (int d = 0; d < r->n_devs; d++) x->n_lanes[d] = 0;
    for (int i = 0; i < r->n_ev; i++) {
        const mt__report_ev *e = &r->ev[i];
        if (e->lane <= 0) continue;
        int *lane = x->lane + (size_t)MAX_LANES * e->dix, *n = &x->n_lanes[e->dix], k = 0;
        while (k < *n && lane[k] != e->lane) k++;
        if (k == *n && *n < MAX_LANES) lane[(*n)++] = e->lane;
    }
    for (int d = 0; d < r->n_devs; d++) {
        int *lane = x->lane + (size_t)MAX_LANES * d, n = x->n_lanes[d];
        for (int a = 1; a < n; a++)   /* insertion sort: a handful */
            for (int b = a; b > 0 && lane[b - 1] > lane[b]; b--) {
                int t = lane[b];
                lane[b] = lane[b - 1], lane[b - 1] = t;
            }
    }
}

/* qsort and search: op spans by tid, then start. */
static int by_tid_ts(const void *x, const void *y) {
    const op_key *p = x, *q = y;
    if (p->tid != q->tid) return (p->tid > q->tid) - (p->tid < q->tid);
    return (p->ts > q->ts) - (p->ts < q->ts);
}

/* true when an op span of the same track lies inside e (starts in it) */
static bool has_ops(const lookup *x, const mt__report_ev *e) {
    const op_key *v = x->ops;
    const op_key key = {(double)e->tid, e->ts};
    int lo = 0, hi = x->n_ops;
    while (lo < hi) {   /* the first at or after (tid, ts) */
        int mid = lo + (hi - lo) / 2;
        if (by_tid_ts(&v[mid], &key) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < x->n_ops && v[lo].tid == key.tid && v[lo].ts < e->ts + e->dur;
}

/* Draws the boxes of one track (device index dix, lane) inside [t0, t1] at
 * row y. */
static void track(FILE *f, const mt_report *r, const lookup *x, int dix, int lane, double y,
                  double h, double t0, double t1) {
    const double scale = (W - LEFT - RIGHT) / (t1 - t0);   /* px per µs */
    for (int k = 0; k < K_COUNT; k++)
        for (int j = x->at[dix]; j < x->at[dix + 1]; j++) {
            const mt__report_ev *e = &r->ev[x->in[j]];
            if (e->lane != lane || kind_of(e) != k) continue;
            double a = fmax(e->ts, t0), b = fmin(e->ts + e->dur, t1);
            if (b <= a) continue;
            double x0 = LEFT + (a - t0) * scale, w = (b - a) * scale;
            double by = k == K_OP && lane == 0 ? y + 5 : y, bh = k == K_OP && lane == 0 ? h - 10 : h;
            fprintf(f, "<rect class=\"%s\" x=\"%.2f\" y=\"%.1f\" width=\"%.3f\" height=\"%.1f\" "
                       "fill=\"%s\"><title>", KIND[k].cls, x0, by, w, bh, KIND[k].fill);
            mt__svg_text(f, e->name);
            fprintf(f, ": %.3f ms</title></rect>\n", e->dur * 1e-3);
            /* a label where it fits; a region only when no op inside covers it */
            bool label = w >= mt__svg_text_width(e->name, 11) + 10 && h >= 14 &&
                         !(k == K_REGION && has_ops(x, e)) && k != K_IDLE;
            if (label) {
                fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" "
                           "fill=\"%s\">", x0 + w / 2, y + h / 2 + 4, KIND[k].ink);
                mt__svg_text(f, e->name);
                fputs("</text>\n", f);
            }
        }
}

/* Fills x for the window [t0, t1]; false when out of memory (then free
 * what it holds with lookup_free). */
static bool lookup_fill(const mt_report *r, double t0, double t1, lookup *x) {
    const size_t n = (size_t)r->n_ev + 1, nd = (size_t)r->n_devs + 1;
    x->in = malloc(n * sizeof *x->in);
    x->at = calloc(nd + 1, sizeof *x->at);
    x->lane = malloc(nd * MAX_LANES * sizeof *x->lane);
    x->n_lanes = malloc(nd * sizeof *x->n_lanes);
    x->ops = malloc(n * sizeof *x->ops);
    if (!x->in || !x->at || !x->lane || !x->n_lanes || !x->ops) return false;
    /* inside the window: what track() would draw */
    for (int i = 0; i < r->n_ev; i++) {
        const mt__report_ev *e = &r->ev[i];
        if (fmin(e->ts + e->dur, t1) > fmax(e->ts, t0)) x->at[e->dix + 1]++;
    }
    for (int d = 0; d < r->n_devs; d++) x->at[d + 1] += x->at[d];
    int *fill = x->n_lanes;   /* scratch until find_lanes */
    for (int d = 0; d < r->n_devs; d++) fill[d] = x->at[d];
    for (int i = 0; i < r->n_ev; i++) {
        const mt__report_ev *e = &r->ev[i];
        if (fmin(e->ts + e->dur, t1) > fmax(e->ts, t0)) x->in[fill[e->dix]++] = i;
    }
    find_lanes(r, x);
    op_key *v = x->ops;
    x->n_ops = 0;
    for (int i = 0; i < r->n_ev; i++)
        if (r->ev[i].cat == MT__EV_OP) v[x->n_ops++] = (op_key){(double)r->ev[i].tid, r->ev[i].ts};
    qsort(v, (size_t)x->n_ops, sizeof *v, by_tid_ts);
    return true;
}

/* Frees what lookup_fill allocated (after a failure too). */
static void lookup_free(lookup *x) {
    free(x->in), free(x->at), free(x->lane), free(x->n_lanes), free(x->ops);
}

mt_status mt_report_write_svg_timeline(const mt_report *r, FILE *f) {
    if (r->n_steps == 0 || r->n_devs == 0)
        return mt_fail(MT_EINVAL, "the timeline needs an analysed report with a step; call "
                       "mt_report_analyse first");
    const mt_report_step *st = median_step(r);
    if (!st) return mt_fail(MT_ENOMEM, "out of memory drawing the timeline");
    /* the window: the devices' spans of that step */
    double t0 = INFINITY, t1 = -INFINITY;
    for (int i = 0; i < r->n_ev; i++) {
        const mt__report_ev *e = &r->ev[i];
        if (e->cat == MT__EV_STEP && e->lane == 0 && e->step == st->step)
            t0 = fmin(t0, e->ts), t1 = fmax(t1, e->ts + e->dur);
    }
    if (!(t1 > t0)) t1 = t0 + 1;   /* a step of no length: still a picture */
    lookup lk;
    if (!lookup_fill(r, t0, t1, &lk)) {
        lookup_free(&lk);
        return mt_fail(MT_ENOMEM, "out of memory drawing the timeline");
    }
    /* the rows: their heights decide the picture's */
    double y = TOP;
    for (int d = 0; d < r->n_devs; d++) y += ROW + 4 + lk.n_lanes[d] * (LANE + 3) + 8;
    double axis = y + 2, legend = axis + 50;
    int height = (int)legend + 30;

    mt__svg_open(f, W, height);
    fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"15\" font-weight=\"bold\">timeline of step %d: "
               "wall %.3f ms, the median of %d steps</text>\n<text x=\"%d\" y=\"44\" "
               "fill=\"#444444\">one row per device; the thinner rows under it: its asynchronous "
               "comm lanes. Hover a box for its name and duration.</text>\n",
            LEFT, st->step, st->wall_us * 1e-3, r->n_steps, LEFT);
    y = TOP;
    for (int d = 0; d < r->n_devs; d++) {
        const int dev = r->devs[d].device, nl = lk.n_lanes[d];
        const int *lanes = lk.lane + (size_t)MAX_LANES * d;
        fprintf(f, "<rect class=\"row\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" "
                   "fill=\"#f7f7f7\" stroke=\"#c8c8c8\"/><text x=\"%d\" y=\"%.1f\" "
                   "text-anchor=\"end\" font-weight=\"bold\">device %d</text>\n",
                LEFT, y, W - LEFT - RIGHT, ROW, LEFT - 8, y + ROW / 2.0 + 4, dev);
        track(f, r, &lk, d, 0, y, ROW, t0, t1);
        y += ROW + 4;
        for (int l = 0; l < nl; l++) {
            fprintf(f, "<rect class=\"row\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" "
                       "fill=\"#f7f7f7\" stroke=\"#c8c8c8\"/><text x=\"%d\" y=\"%.1f\" "
                       "text-anchor=\"end\" font-size=\"11\" fill=\"#444444\">comm %d</text>\n",
                    LEFT, y, W - LEFT - RIGHT, LANE, LEFT - 8, y + LANE / 2.0 + 4, lanes[l]);
            track(f, r, &lk, d, lanes[l], y, LANE, t0, t1);
            y += LANE + 3;
        }
        y += 8;
    }
    /* the time axis in ms from the window's start: ticks 1, 2 or 5 · 10^k apart */
    const double ms = (t1 - t0) * 1e-3, scale = (W - LEFT - RIGHT) / ms, step = mt__svg_nice_step(0, ms, 10);
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#444444\"/>\n<g "
               "fill=\"#333333\">\n", LEFT, axis, W - RIGHT, axis);
    for (double t = 0; t <= ms + step * 1e-6; t += step)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444444\"/>"
                   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.6g</text>\n",
                LEFT + t * scale, axis, LEFT + t * scale, axis + 5, LEFT + t * scale, axis + 19, t);
    fprintf(f, "</g>\n<text x=\"%d\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">ms since "
               "step %d began</text>\n", (LEFT + W - RIGHT) / 2, axis + 38, st->step);
    /* the legend: one swatch per kind, of the same class and fill as its boxes */
    double x = LEFT;
    for (int k = 0; k < K_COUNT; k++) {
        fprintf(f, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"14\" fill=\"%s\" "
                   "stroke=\"#888888\"/><text x=\"%.1f\" y=\"%.1f\">%s</text>\n", KIND[k].cls, x,
                legend, KIND[k].fill, x + 21, legend + 11.5, KIND[k].legend);
        x += 21 + mt__svg_text_width(KIND[k].legend, 12) + 24;
    }
    fputs("</svg>\n", f);
    lookup_free(&lk);
    if (ferror(f)) return mt_fail(MT_EIO, "cannot write timeline.svg: the stream failed");
    return MT_OK;
}
