/*
 * report_svg_timeline.c — timeline.svg: the step of median wall time, one
 * row per device track and a thinner one per asynchronous comm lane, time
 * to the right; compute, communication and idle in their colours
 * (report.h gives the layout).
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

/* The comm lanes of device d, sorted; returns their count. */
static int lanes_of(const mt_report *r, int d, int *lane) {
    int n = 0;
    for (int i = 0; i < r->n_ev; i++) {
        const mt__report_ev *e = &r->ev[i];
        if (e->device != d || e->lane <= 0) continue;
        int k = 0;
        while (k < n && lane[k] != e->lane) k++;
        if (k == n && n < MAX_LANES) lane[n++] = e->lane;
    }
    for (int a = 1; a < n; a++)   /* insertion sort: a handful */
        for (int b = a; b > 0 && lane[b - 1] > lane[b]; b--) {
            int t = lane[b];
            lane[b] = lane[b - 1], lane[b - 1] = t;
        }
    return n;
}

/* true when an op span of the same track lies inside e */
static bool has_ops(const mt_report *r, const mt__report_ev *e) {
    for (int i = 0; i < r->n_ev; i++) {
        const mt__report_ev *o = &r->ev[i];
        if (o->cat == MT__EV_OP && o->tid == e->tid && o->ts >= e->ts && o->ts < e->ts + e->dur)
            return true;
    }
    return false;
}

/* Draws the boxes of one track (device d, lane) inside [t0, t1] at row y. */
static void track(FILE *f, const mt_report *r, int d, int lane, double y, double h, double t0,
                  double t1) {
    const double scale = (W - LEFT - RIGHT) / (t1 - t0);   /* px per µs */
    for (int k = 0; k < K_COUNT; k++)
        for (int i = 0; i < r->n_ev; i++) {
            const mt__report_ev *e = &r->ev[i];
            if (e->device != d || e->lane != lane || kind_of(e) != k) continue;
            double a = fmax(e->ts, t0), b = fmin(e->ts + e->dur, t1);
            if (b <= a) continue;
            double x = LEFT + (a - t0) * scale, w = (b - a) * scale;
            double by = k == K_OP && lane == 0 ? y + 5 : y, bh = k == K_OP && lane == 0 ? h - 10 : h;
            fprintf(f, "<rect class=\"%s\" x=\"%.2f\" y=\"%.1f\" width=\"%.3f\" height=\"%.1f\" "
                       "fill=\"%s\"><title>", KIND[k].cls, x, by, w, bh, KIND[k].fill);
            mt__svg_text(f, e->name);
            fprintf(f, ": %.3f ms</title></rect>\n", e->dur * 1e-3);
            /* a label where it fits; a region only when no op inside covers it */
            bool label = w >= mt__svg_text_width(e->name, 11) + 10 && h >= 14 &&
                         !(k == K_REGION && has_ops(r, e)) && k != K_IDLE;
            if (label) {
                fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" "
                           "fill=\"%s\">", x + w / 2, y + h / 2 + 4, KIND[k].ink);
                mt__svg_text(f, e->name);
                fputs("</text>\n", f);
            }
        }
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
        int k;
        if (e->cat == MT__EV_STEP && e->lane == 0 && sscanf(e->name, "step %d", &k) == 1 &&
            k == st->step)
            t0 = fmin(t0, e->ts), t1 = fmax(t1, e->ts + e->dur);
    }
    if (!(t1 > t0)) t1 = t0 + 1;   /* a step of no length: still a picture */
    /* the rows: their heights decide the picture's */
    int lanes[MAX_LANES];
    double y = TOP;
    for (int d = 0; d < r->n_devs; d++) y += ROW + 4 + lanes_of(r, r->devs[d].device, lanes) * (LANE + 3) + 8;
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
        int dev = r->devs[d].device, nl = lanes_of(r, dev, lanes);
        fprintf(f, "<rect class=\"row\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" "
                   "fill=\"#f7f7f7\" stroke=\"#c8c8c8\"/><text x=\"%d\" y=\"%.1f\" "
                   "text-anchor=\"end\" font-weight=\"bold\">device %d</text>\n",
                LEFT, y, W - LEFT - RIGHT, ROW, LEFT - 8, y + ROW / 2.0 + 4, dev);
        track(f, r, dev, 0, y, ROW, t0, t1);
        y += ROW + 4;
        for (int l = 0; l < nl; l++) {
            fprintf(f, "<rect class=\"row\" x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%d\" "
                       "fill=\"#f7f7f7\" stroke=\"#c8c8c8\"/><text x=\"%d\" y=\"%.1f\" "
                       "text-anchor=\"end\" font-size=\"11\" fill=\"#444444\">comm %d</text>\n",
                    LEFT, y, W - LEFT - RIGHT, LANE, LEFT - 8, y + LANE / 2.0 + 4, lanes[l]);
            track(f, r, dev, lanes[l], y, LANE, t0, t1);
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
    if (ferror(f)) return mt_fail(MT_EIO, "cannot write timeline.svg: the stream failed");
    return MT_OK;
}
