/*
 * svg.c — a simulated schedule drawn as SVG: one row per device, time to
 * the right, one box per op in its type's colour (a device's later chunks
 * in darker shades), labelled with its microbatch; idle time stays empty
 * inside each row's outline. The statistics go in the title, a time axis
 * and a legend below.
 */
#include "pipeline/pipeline_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { LEFT = 78, RIGHT = 24, TOP = 58, ROW = 30, BOX = 24, FONT = 12 };

/* F, B, W, BW: blue, orange, green, purple (Tableau 10) */
static const int COLOUR[4][3] = {{78, 121, 167}, {242, 142, 43}, {89, 161, 79}, {176, 122, 161}};
static const char *const TYPE_NAME[4] = {"F forward", "B input gradient", "W weight gradient",
                                         "BW whole backward"};

/* The fill of an op of `type` on local chunk c of v: the first chunk mixed
 * 45% with white, the last the colour itself, those between in steps. */
static void fill(int type, int c, int v, int rgb[3]) {
    double white = v == 1 ? 0.0 : 0.45 * (double)(v - 1 - c) / (v - 1);
    for (int k = 0; k < 3; k++)
        rgb[k] = (int)lround(COLOUR[type][k] + (255 - COLOUR[type][k]) * white);
}

static const char *text_colour(const int rgb[3]) {
    double lum = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];
    return lum > 150 ? "#1a1a1a" : "#ffffff";
}

/* Pixels per time unit: the shortest op gets 26 px, room for a 3-digit label. */
static double px_per_unit(const mt_schedule *s, const mt_pipe_sim *sim) {
    double shortest = 0;
    for (int d = 0; d < s->p; d++)
        for (int i = 0; i < s->n_ops[d]; i++) {
            double dur = sim->end[d][i] - sim->start[d][i];
            if (dur > 1e-12 && (shortest == 0 || dur < shortest)) shortest = dur;
        }
    double ppu = shortest > 0 ? 26.0 / shortest : 26.0;
    if (ppu > 400) ppu = 400;
    /* at most 20000 px of time: beyond, short ops lose their labels */
    if (sim->makespan * ppu > 20000) ppu = 20000 / sim->makespan;
    return ppu;
}

static void legend_box(FILE *out, double x, double y, const int rgb[3], const char *text) {
    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"14\" fill=\"rgb(%d,%d,%d)\"/>"
                 "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n",
            x, y, rgb[0], rgb[1], rgb[2], x + 21, y + 11.5, text);
}

mt_status mt_schedule_write_svg(const mt_schedule *s, const mt_pipe_sim *sim,
                                const mt_pipe_costs *costs, FILE *out) {
    mt_pipe_costs c = costs ? *costs : mt_pipe_costs_default();
    /* the time axis ticks up to the makespan: it must be a positive number
     * (mt_schedule_simulate's always is) */
    if (!(isfinite(sim->makespan) && sim->makespan > 0))
        return mt_fail(MT_EINVAL, "schedule SVG: makespan %g is not a positive finite time; "
                       "draw a simulation of finite costs", sim->makespan);
    double ppu = px_per_unit(s, sim), plot = sim->makespan * ppu;
    double width = LEFT + plot + RIGHT;
    if (width < 720) width = 720;
    double rows_end = TOP + s->p * ROW, axis = rows_end + 6, legend = axis + 34;
    double height = legend + (s->v > 1 ? 44 : 26);
    fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                 "viewBox=\"0 0 %.0f %.0f\" font-family=\"DejaVu Sans, Arial, sans-serif\" "
                 "font-size=\"%d\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
            width, height, width, height, FONT);
    /* the title: what it is and the statistics */
    char v_text[24] = "";
    if (s->v > 1) snprintf(v_text, sizeof v_text, ", v = %d", s->v);
    fprintf(out, "<text x=\"%d\" y=\"22\" font-size=\"15\" font-weight=\"bold\">%s, p = %d, "
                 "m = %d%s: bubble rate %.1f%%, makespan %.4g</text>\n",
            LEFT, mt_schedule_kind_name(s->kind), s->p, s->m, v_text, 100 * sim->bubble_rate,
            sim->makespan);
    fprintf(out, "<text x=\"%d\" y=\"42\" fill=\"#444444\">costs F %g, B %g, W %g, COMM %g "
                 "(per stage); bubble fraction %.1f%%; peak activations",
            LEFT, c.f, c.b, c.w, c.comm, 100 * sim->bubble_fraction);
    for (int d = 0; d < s->p && d < 16; d++)
        fprintf(out, "%s %.3g", d ? "," : "", sim->peak_activations[d]);
    fprintf(out, "%s</text>\n", s->p > 16 ? ", ..." : "");
    /* rows: the device's name, an outline (idle time shows as its empty
     * inside), and a box per op */
    for (int d = 0; d < s->p; d++) {
        double y = TOP + d * ROW;
        fprintf(out, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">device %d</text>\n"
                     "<rect x=\"%d\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"none\" "
                     "stroke=\"#c8c8c8\"/>\n",
                LEFT - 8, y + BOX / 2.0 + 4, d, LEFT, y, plot, BOX);
        for (int i = 0; i < s->n_ops[d]; i++) {
            mt_pipe_op op = s->ops[d][i];
            double x0 = LEFT + sim->start[d][i] * ppu, w = (sim->end[d][i] - sim->start[d][i]) * ppu;
            int rgb[3];
            fill(op.type, mt__local_chunk(s, op.chunk), s->v, rgb);
            fprintf(out, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%d\" "
                         "fill=\"rgb(%d,%d,%d)\" stroke=\"#ffffff\" stroke-width=\"1\"/>",
                    x0, y, w, BOX, rgb[0], rgb[1], rgb[2]);
            char label[16];
            int n = snprintf(label, sizeof label, "%d", op.mb);
            if (w >= 7.5 * n + 4)
                fprintf(out, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"%s\">%s"
                             "</text>", x0 + w / 2, y + BOX / 2.0 + 4, text_colour(rgb), label);
            fputc('\n', out);
        }
    }
    /* the time axis: a tick every 1, 2, 5, 10, ... units, 40 px apart or more */
    double step = 1;
    for (int k = 0; step * ppu < 40; k++) step *= k % 3 == 1 ? 2.5 : 2;
    fprintf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888888\"/>\n",
            LEFT, axis, LEFT + plot, axis);
    for (double t = 0; t <= sim->makespan + 1e-9; t += step)
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888888\"/>"
                     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#444444\">%g"
                     "</text>\n",
                LEFT + t * ppu, axis, LEFT + t * ppu, axis + 4, LEFT + t * ppu, axis + 17, t);
    fprintf(out, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#444444\">time</text>\n",
            LEFT - 8, axis + 17);
    /* the legend: the types present; with chunks, which shade is which */
    bool present[4] = {false, false, false, false};
    for (int d = 0; d < s->p; d++)
        for (int i = 0; i < s->n_ops[d]; i++) present[s->ops[d][i].type] = true;
    double x = LEFT;
    for (int t = 0; t < 4; t++) {
        if (!present[t]) continue;
        int rgb[3];
        fill(t, s->v - 1, s->v, rgb);
        legend_box(out, x, legend, rgb, TYPE_NAME[t]);
        x += 21 + 7.2 * strlen(TYPE_NAME[t]) + 22;
    }
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#444444\">box label: microbatch; empty: "
                 "idle</text>\n", x, legend + 11.5);
    if (s->v > 1) {
        int light[3], dark[3];
        fill(MT_PIPE_F, 0, s->v, light);
        fill(MT_PIPE_F, s->v - 1, s->v, dark);
        legend_box(out, LEFT, legend + 22, light, "first chunk of the device");
        legend_box(out, LEFT + 230, legend + 22, dark,
                   mt__sched_kind_get(s->kind)->v_shape
                       ? "second chunk (chunk 2p-1-i on device i, the V's way back up)"
                       : "last chunk (later chunks darker: chunk i + c·p on device i)");
    }
    fputs("</svg>\n", out);
    if (ferror(out)) return mt_fail(MT_EIO, "cannot write the SVG: the stream failed");
    return MT_OK;
}
