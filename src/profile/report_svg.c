/*
 * report_svg.c — the SVG pieces the report's pictures share, and
 * roofline.svg: op kinds at (FLOP/byte, GFLOP/s) on log-log axes under the
 * roof min(peak, intensity · bandwidth) (report.h gives the layout).
 */
#include "report_impl.h"

#include <math.h>
#include <string.h>

/* ======================================================================== */
/* Shared pieces                                                             */
/* ======================================================================== */

void mt__svg_open(FILE *f, int width, int height) {
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" "
               "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Arial, "
               "sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
               "fill=\"#ffffff\"/>\n", width, height, width, height);
}

void mt__svg_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            /* XML 1.0 has no control characters but tab and newline */
            if ((unsigned char)*s >= 0x20 || *s == '\t' || *s == '\n') fputc(*s, f);
        }
    }
}

double mt__svg_nice_step(double lo, double hi, int want) {
    double raw = (hi - lo) / (want > 0 ? want : 1);
    if (!(raw > 0) || !isfinite(raw)) return 1;
    double mag = pow(10, floor(log10(raw))), x = raw / mag;
    return mag * (x < 1.5 ? 1 : x < 3.5 ? 2 : x < 7.5 ? 5 : 10);
}

double mt__svg_text_width(const char *s, double font) {
    int n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;   /* characters, not UTF-8 bytes */
    return 0.62 * font * n;
}

/* ======================================================================== */
/* roofline.svg                                                              */
/* ======================================================================== */

enum { W = 800, H = 560, X0 = 90, X1 = 770, Y0 = 500, Y1 = 60, MAX_PTS = 64, FONT = 12 };

static const char COMPUTE[] = "#4e79a7", MEMORY[] = "#f28e2b", UNKNOWN[] = "#9d9d9d";

typedef struct { double lo, hi; } decades;   /* log10 of the axis' ends */

static void widen(decades *d, double v) {
    if (!(v > 0) || !isfinite(v)) return;
    d->lo = fmin(d->lo, floor(log10(v) - 0.1));
    d->hi = fmax(d->hi, ceil(log10(v) + 0.1));
}

static double px(const decades *d, double v) { return X0 + (X1 - X0) * (log10(v) - d->lo) / (d->hi - d->lo); }
static double py(const decades *d, double v) { return Y0 - (Y0 - Y1) * (log10(v) - d->lo) / (d->hi - d->lo); }

static void decade_label(char *buf, size_t n, int k) {
    if (k >= -3 && k <= 4) snprintf(buf, n, "%g", pow(10, k));
    else snprintf(buf, n, "1e%d", k);
}

static void axes(FILE *f, const decades *dx, const decades *dy) {
    fprintf(f, "<g stroke=\"#e6e6e6\">\n");
    for (int k = (int)dx->lo; k <= (int)dx->hi; k++)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", px(dx, pow(10, k)), Y0,
                px(dx, pow(10, k)), Y1);
    for (int k = (int)dy->lo; k <= (int)dy->hi; k++)
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", X0, py(dy, pow(10, k)),
                X1, py(dy, pow(10, k)));
    fprintf(f, "</g>\n<g stroke=\"#666666\">\n");   /* minor ticks 2..9 on the axes */
    for (int k = (int)dx->lo; k < (int)dx->hi; k++)
        for (int m = 2; m <= 9; m++)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n",
                    px(dx, m * pow(10, k)), Y0, px(dx, m * pow(10, k)), Y0 - 4);
    for (int k = (int)dy->lo; k < (int)dy->hi; k++)
        for (int m = 2; m <= 9; m++)
            fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", X0,
                    py(dy, m * pow(10, k)), X0 + 4, py(dy, m * pow(10, k)));
    fprintf(f, "</g>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#444444\"/>\n<g fill=\"#333333\">\n", X0, Y1, X1 - X0, Y0 - Y1);
    char buf[16];
    for (int k = (int)dx->lo; k <= (int)dx->hi; k++) {
        decade_label(buf, sizeof buf, k);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                px(dx, pow(10, k)), Y0 + 18, buf);
    }
    for (int k = (int)dy->lo; k <= (int)dy->hi; k++) {
        decade_label(buf, sizeof buf, k);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", X0 - 8,
                py(dy, pow(10, k)) + 4, buf);
    }
    fprintf(f, "</g>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"13\">arithmetic "
               "intensity (FLOP/byte)</text>\n<text transform=\"translate(26,%d) rotate(-90)\" "
               "text-anchor=\"middle\" font-size=\"13\">GFLOP/s</text>\n",
            (X0 + X1) / 2, Y0 + 42, (Y0 + Y1) / 2);
}

/* A label's box and where its text goes. */
typedef struct {
    double x0, y0, x1, y1;   /* the box */
    double tx, ty;           /* the text's anchor point */
    const char *anchor;
} label;

static bool overlaps(const label *a, double x0, double y0, double x1, double y1) {
    return a->x0 < x1 && x0 < a->x1 && a->y0 < y1 && y0 < a->y1;
}

/* Places point i's label beside its circle: right, left, above, below, then
 * further up and down, the first spot inside the plot that covers no placed
 * label and no other circle; the right side when none is free. */
static label place(const double *cx, const double *cy, const double *rad, int n, int i,
                   const char *name, const label *placed, int n_placed) {
    double w = mt__svg_text_width(name, FONT), h = 14;
    label first = {0};
    for (int t = 0; t < 2 + 2 * 8 + 2; t++) {
        label l;
        if (t == 2) {   /* above, below */
            l = (label){cx[i] - w / 2, cy[i] - rad[i] - 4 - h, cx[i] + w / 2, cy[i] - rad[i] - 4,
                        cx[i], cy[i] - rad[i] - 7, "middle"};
        } else if (t == 3) {
            l = (label){cx[i] - w / 2, cy[i] + rad[i] + 3, cx[i] + w / 2, cy[i] + rad[i] + 3 + h,
                        cx[i], cy[i] + rad[i] + 14, "middle"};
        } else {
            int k = t < 2 ? 0 : (t - 2) / 2;   /* 0, 1, 1, 2, 2, ...: steps of 16 px */
            double dy = t < 2 ? 0 : (k % 2 ? -1 : 1) * 16.0 * ((k + 1) / 2);
            bool right = t % 2 == 0;
            double x = right ? cx[i] + rad[i] + 4 : cx[i] - rad[i] - 4, y = cy[i] + 4 + dy;
            l = (label){right ? x : x - w, y - 11, right ? x + w : x, y + 3, x, y,
                        right ? "start" : "end"};
        }
        if (t == 0) first = l;
        bool ok = l.x0 >= X0 + 2 && l.x1 <= X1 - 2 && l.y0 >= Y1 + 2 && l.y1 <= Y0 - 2;
        for (int j = 0; ok && j < n_placed; j++) ok = !overlaps(&placed[j], l.x0, l.y0, l.x1, l.y1);
        for (int j = 0; ok && j < n; j++)
            ok = j == i || !overlaps(&l, cx[j] - rad[j], cy[j] - rad[j], cx[j] + rad[j], cy[j] + rad[j]);
        if (ok) return l;
    }
    return first;
}

/* "memory B GB/s" along the roof's slope: the first of a few spots along it,
 * above the line or below, whose box covers no label and no circle. */
static void bandwidth_label(FILE *f, const decades *dx, const decades *dy, double peak, double bw,
                            const double *cx, const double *cy, const double *rad, int n,
                            const label *lab) {
    static const double AT[] = {0.35, 0.5, 0.2, 0.65, 0.1, 0.8};
    char text[48];
    snprintf(text, sizeof text, "memory %.4g GB/s", bw);
    double xl = pow(10, dx->lo), x0 = px(dx, xl), y0 = py(dy, fmin(peak, xl * bw));
    double x1 = px(dx, peak / bw), y1 = py(dy, peak), len = hypot(x1 - x0, y1 - y0);
    double tw = mt__svg_text_width(text, FONT);
    if (len < tw + 20) return;   /* no room: the title has the figure */
    double ux = (x1 - x0) / len, uy = (y1 - y0) / len, nx = uy, ny = -ux;   /* n: up the page */
    for (int t = 0; t < 12; t++) {
        double off = t % 2 ? -16 : 5;   /* baseline 5 px above the line, or 16 below */
        double sx = x0 + AT[t / 2] * (x1 - x0) + off * nx, sy = y0 + AT[t / 2] * (y1 - y0) + off * ny;
        /* the rotated text's corners: the baseline from s along u, 12 px up along n */
        double ax[4] = {sx, sx + tw * ux, sx + 12 * nx, sx + tw * ux + 12 * nx};
        double ay[4] = {sy, sy + tw * uy, sy + 12 * ny, sy + tw * uy + 12 * ny};
        label b = {INFINITY, INFINITY, -INFINITY, -INFINITY, 0, 0, NULL};
        for (int k = 0; k < 4; k++)
            b.x0 = fmin(b.x0, ax[k]), b.y0 = fmin(b.y0, ay[k]), b.x1 = fmax(b.x1, ax[k]),
            b.y1 = fmax(b.y1, ay[k]);
        bool ok = b.x0 >= X0 && b.x1 <= X1 && b.y0 >= Y1 && b.y1 <= Y0;
        for (int j = 0; ok && j < n; j++)
            ok = !overlaps(&lab[j], b.x0, b.y0, b.x1, b.y1) &&
                 !overlaps(&b, cx[j] - rad[j], cy[j] - rad[j], cx[j] + rad[j], cy[j] + rad[j]);
        if (ok) {
            fprintf(f, "<text transform=\"translate(%.1f,%.1f) rotate(%.1f)\" fill=\"#222222\">"
                       "%s</text>\n", sx, sy, atan2(uy, ux) * 180 / M_PI, text);
            return;
        }
    }
}

mt_status mt_report_write_svg_roofline(const mt_report *r, FILE *f) {
    const double peak = r->machine.peak_gflops, bw = r->machine.bandwidth_gbs;
    const bool roof = peak > 0 && bw > 0;
    const mt_report_op *pt[MAX_PTS];   /* the points, most time first (as r->ops) */
    int n = 0;
    decades dx = {INFINITY, -INFINITY}, dy = {INFINITY, -INFINITY};
    for (int k = 0; k < r->n_ops && n < MAX_PTS; k++) {
        const mt_report_op *o = &r->ops[k];
        if (o->flops <= 0 || o->bytes <= 0 || !(o->gflops > 0) || mt__report_is_collective(o->kind))
            continue;
        pt[n++] = o;
        widen(&dx, o->intensity), widen(&dy, o->gflops);
    }
    if (roof) widen(&dx, peak / bw);
    if (!(dx.hi > dx.lo)) dx = (decades){-1, 3};
    if (roof) widen(&dy, peak), widen(&dy, fmin(peak, pow(10, dx.lo) * bw));
    if (!(dy.hi > dy.lo)) dy = (decades){-1, 3};

    mt__svg_open(f, W, H);
    if (roof)
        fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"15\" font-weight=\"bold\">roofline: "
                   "peak %.4g GFLOP/s, bandwidth %.4g GB/s, ridge at %.3g FLOP/byte</text>\n",
                X0, peak, bw, peak / bw);
    else
        fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"14\" font-weight=\"bold\">roofline: the "
                   "roof is unknown; give --machine FILE or --peak-gflops and --bandwidth-gbs"
                   "</text>\n", 12);
    /* the legend line: what the colours and the areas say */
    if (!roof)
        fprintf(f, "<text x=\"%d\" y=\"44\" fill=\"#444444\">grey: bound unknown without the "
                   "roof; circle area: share of op time (%d op kinds)</text>\n", X0, n);
    else fprintf(f, "<g><circle cx=\"%d\" cy=\"40\" r=\"6\" fill=\"%s\" fill-opacity=\"0.6\"/>"
               "<text x=\"%d\" y=\"44\">compute-bound</text><circle cx=\"%d\" cy=\"40\" r=\"6\" "
               "fill=\"%s\" fill-opacity=\"0.6\"/><text x=\"%d\" y=\"44\">memory-bound</text>"
               "<text x=\"%d\" y=\"44\" fill=\"#444444\">circle area: share of op time "
               "(%d op kinds)</text></g>\n",
            X0 + 6, COMPUTE, X0 + 16, X0 + 136, MEMORY, X0 + 146, X0 + 256, n);
    axes(f, &dx, &dy);
    label lab_peak = {0};
    char peak_text[48] = "";   /* drawn last, over the circles, on a white halo */
    if (roof) {   /* the roof, the ridge and their labels */
        double ridge = peak / bw, xl = pow(10, dx.lo), xr = pow(10, dx.hi);
        double yl = fmin(peak, xl * bw), rx = px(&dx, ridge), ry = py(&dy, peak);
        fprintf(f, "<polyline class=\"roof\" fill=\"none\" stroke=\"#222222\" stroke-width=\"2\" "
                   "points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"/>\n",
                px(&dx, xl), py(&dy, yl), rx, ry, px(&dx, xr), ry);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222222\" "
                   "stroke-dasharray=\"4 3\"/><circle class=\"ridge\" cx=\"%.1f\" cy=\"%.1f\" "
                   "r=\"4\" fill=\"#222222\"/>\n", rx, Y0, rx, ry, rx, ry);
        /* the ridge's figure at the foot of its dashed line, the peak's above
         * the flat roof at the right (below it when the plot's top is near):
         * apart, whatever the ridge's place */
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" fill=\"#222222\">ridge %.3g FLOP/B</text>\n",
                rx + 5, Y0 - 6, ridge);
        snprintf(peak_text, sizeof peak_text, "peak %.4g GFLOP/s", peak);
        double tw = mt__svg_text_width(peak_text, FONT), ty = ry - Y1 > 18 ? ry - 6 : ry + 16;
        lab_peak = (label){X1 - 6 - tw, ty - 11, X1 - 6, ty + 3, X1 - 6, ty, "end"};
    }
    /* the points: the biggest first, so that the small ones stay on top; the
     * labels keep off the peak's label (lab[0] when there is a roof) */
    double cx[MAX_PTS], cy[MAX_PTS], rad[MAX_PTS];
    label all[MAX_PTS + 1];
    const int skip = roof ? 1 : 0;
    label *lab = all + skip;
    all[0] = lab_peak;
    for (int i = 0; i < n; i++) {
        cx[i] = px(&dx, pt[i]->intensity), cy[i] = py(&dy, pt[i]->gflops);
        rad[i] = fmax(3, 40 * sqrt(pt[i]->share));
    }
    for (int i = 0; i < n; i++) lab[i] = place(cx, cy, rad, n, i, pt[i]->kind, all, i + skip);
    if (roof) bandwidth_label(f, &dx, &dy, peak, bw, cx, cy, rad, n, lab);
    for (int i = 0; i < n; i++) {
        const mt_report_op *o = pt[i];
        const char *fill = o->bound == MT_BOUND_COMPUTE ? COMPUTE
                         : o->bound == MT_BOUND_MEMORY ? MEMORY : UNKNOWN;
        fprintf(f, "<circle class=\"op\" cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\" fill=\"%s\" "
                   "fill-opacity=\"0.55\" stroke=\"%s\"><title>", cx[i], cy[i], rad[i], fill, fill);
        mt__svg_text(f, o->kind);
        fprintf(f, ": %.3g FLOP/B, %.3g GFLOP/s, %.1f%% of op time</title></circle>\n",
                o->intensity, o->gflops, 100 * o->share);
    }
    for (int i = 0; i < n; i++) {
        const label *l = &lab[i];
        /* a leader line from the circle's edge when the label sits off its circle */
        double ux = l->tx - cx[i], uy = l->ty - 4 - cy[i], d = hypot(ux, uy);
        if (fabs(uy) > rad[i] + 2 && strcmp(l->anchor, "middle") != 0 && d > rad[i])
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888888\"/>\n",
                    cx[i] + ux / d * rad[i], cy[i] + uy / d * rad[i], l->tx, l->ty - 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", l->tx, l->ty, l->anchor);
        mt__svg_text(f, pt[i]->kind);
        fputs("</text>\n", f);
    }
    if (roof)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#222222\" "
                   "stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\">%s</text>\n",
                lab_peak.tx, lab_peak.ty, peak_text);
    if (n == 0)
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" fill=\"#444444\">no op kind "
                   "with FLOPs and bytes in the trace</text>\n", (X0 + X1) / 2, (Y0 + Y1) / 2);
    fputs("</svg>\n", f);
    if (ferror(f)) return mt_fail(MT_EIO, "cannot write roofline.svg: the stream failed");
    return MT_OK;
}
