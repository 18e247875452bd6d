/*
 * report_html.c — an analysed mt_report as one self-contained HTML page
 * (`meshtrain report TRACE --html FILE`): the things to fix first, the
 * roofline, the tables (ops, devices, steps, the run), the timeline and
 * loss pictures inline as SVG, and the text report itself. No script, no
 * style sheet or image from elsewhere: the page opens from a file, offline.
 */
#include "report_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char STYLE[] =
    "body{font-family:'DejaVu Sans',sans-serif;margin:24px;color:#222;max-width:1240px}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ccc}"
    "table{border-collapse:collapse;font-size:13px}"
    "th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "th:first-child,td:first-child{text-align:left}th{background:#f2f2f2}"
    "pre{background:#f7f7f7;padding:10px;font-size:12px;overflow-x:auto}"
    "figure{margin:12px 0}figcaption{font-size:13px;color:#555}";

/* A table cell of v · scale at `prec` decimals, "-" for NaN or infinity. */
static void td(FILE *f, double v, int prec, double scale) {
    if (isnan(v) || isinf(v)) fputs("<td>-</td>", f);
    else fprintf(f, "<td>%.*f</td>", prec, v * scale);
}

static const char *bound_name(mt_report_bound b) {
    return b == MT_BOUND_COMPUTE ? "compute" : b == MT_BOUND_MEMORY ? "memory"
         : b == MT_BOUND_COMM ? "comm" : "-";
}

/* What a writer puts into a FILE, caught in memory (open_memstream). */
typedef struct {
    char  *text;
    size_t len;
} caught;

/* Runs one of the SVG writers into memory; the page gets the <svg> element
 * (its XML declaration dropped: an HTML page holds the element alone).
 * False when the writer fails (the page says the picture is missing). */
static bool svg_inline(FILE *f, const mt_report *r, const mt_report_metrics *m, int which) {
    caught c = {NULL, 0};
    FILE *mem = open_memstream(&c.text, &c.len);
    if (!mem) return false;
    mt_status s = which == 0 ? mt_report_write_svg_roofline(r, mem)
                : which == 1 ? mt_report_write_svg_timeline(r, mem)
                             : mt_report_write_svg_loss(m, mem);
    if (fclose(mem) != 0) s = MT_EIO;
    const char *svg = s == MT_OK && c.text ? strstr(c.text, "<svg") : NULL;
    if (svg) fputs(svg, f);
    free(c.text);
    return svg != NULL;
}

/* The figure of picture `which` with its caption, or a line saying why not. */
static void figure(FILE *f, const mt_report *r, const mt_report_metrics *m, int which,
                   const char *id, const char *caption) {
    fprintf(f, "<figure id=\"%s\">\n", id);
    if (!svg_inline(f, r, m, which))
        fprintf(f, "<p>(no picture: %s)</p>", which == 1 ? "the trace has no whole step"
                                                         : "it could not be drawn");
    fprintf(f, "\n<figcaption>%s</figcaption></figure>\n", caption);
}

static void ops_table(FILE *f, const mt_report *r) {
    fputs("<table id=\"ops\"><tr><th>op</th><th>count</th><th>time ms</th><th>share %</th>"
          "<th>GFLOP/s</th><th>GB/s</th><th>flop/B</th><th>bound GF/s</th>"
          "<th>of bound %</th><th>bound</th></tr>\n", f);
    for (int k = 0; k < r->n_ops; k++) {
        const mt_report_op *o = &r->ops[k];
        fputs("<tr><td>", f);
        mt__svg_text(f, o->kind);
        fprintf(f, "</td><td>%ld</td>", o->count);
        td(f, o->time_us, 3, 1e-3), td(f, o->share, 1, 100), td(f, o->gflops, 2, 1);
        td(f, o->gbs, 2, 1), td(f, o->intensity, 3, 1), td(f, o->bound_gflops, 2, 1);
        td(f, o->of_bound, 1, 100);
        fprintf(f, "<td class=\"%s\">%s</td></tr>\n", bound_name(o->bound), bound_name(o->bound));
    }
    fputs("</table>\n", f);
}

static void devices_table(FILE *f, const mt_report *r) {
    fputs("<table id=\"devices\"><tr><th>device</th><th>busy ms</th><th>idle ms</th>"
          "<th>exposed ms</th><th>hidden ms</th><th>async ms</th><th>hidden %</th>"
          "<th>sync ms</th></tr>\n", f);
    for (int d = 0; d < r->n_devs; d++) {
        const mt_report_device *v = &r->devs[d];
        const double comm = v->exposed_us + v->hidden_us;
        fprintf(f, "<tr><td>%d</td>", v->device);
        td(f, v->busy_us, 3, 1e-3), td(f, v->idle_us, 3, 1e-3), td(f, v->exposed_us, 3, 1e-3);
        td(f, v->hidden_us, 3, 1e-3), td(f, v->async_us, 3, 1e-3);
        td(f, comm > 0 ? v->hidden_us / comm : NAN, 1, 100), td(f, v->sync_us, 3, 1e-3);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void steps_table(FILE *f, const mt_report *r) {
    fputs("<table id=\"steps\"><tr><th>step</th><th>wall ms</th><th>GFLOP</th><th>MFU %</th>"
          "<th>HFU %</th><th>bubble %</th></tr>\n", f);
    for (int j = 0; j < r->n_steps; j++) {
        const mt_report_step *s = &r->steps[j];
        fprintf(f, "<tr><td>%d</td>", s->step);
        td(f, s->wall_us, 3, 1e-3), td(f, s->flops, 4, 1e-9), td(f, s->mfu, 1, 100);
        td(f, s->hfu, 1, 100), td(f, s->bubble, 1, 100);
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

static void run_table(FILE *f, const mt_report_run *u) {
    fputs("<table id=\"run\"><tr><th>steps</th><th>first loss</th><th>last loss</th>"
          "<th>last val loss</th><th>best val loss</th><th>tokens/s</th><th>ms a step</th>"
          "</tr>\n", f);
    fprintf(f, "<tr><td>%d (%d to %d)</td>", u->steps, u->first_step, u->last_step);
    td(f, u->first_loss, 4, 1), td(f, u->last_loss, 4, 1), td(f, u->last_val_loss, 4, 1);
    td(f, u->best_val_loss, 4, 1), td(f, u->median_tokens_per_s, 0, 1), td(f, u->median_ms, 2, 1);
    fputs("</tr></table>\n", f);
    if (u->moe_steps == 0) return;
    fputs("<table id=\"experts\"><tr><th>steps with MaxVio</th><th>last MaxVio</th>"
          "<th>max MaxVio</th><th>router losses (mean)</th><th>dropped (mean %)</th></tr>\n", f);
    fprintf(f, "<tr><td>%d</td>", u->moe_steps);
    td(f, u->last_maxvio, 3, 1), td(f, u->max_maxvio, 3, 1), td(f, u->mean_moe_aux, 5, 1);
    td(f, u->mean_moe_dropped, 2, 100);
    fputs("</tr></table>\n", f);
}

mt_status mt_report_write_html(const mt_report *r, const mt_report_metrics *m, FILE *f) {
    if (!r || !f) return mt_fail(MT_EINVAL, "mt_report_write_html needs a report and a file");
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
               "<title>meshtrain report</title><style>%s</style></head><body>\n"
               "<h1>meshtrain report</h1>\n<p>A device's peak ", STYLE);
    if (r->machine.peak_gflops > 0) fprintf(f, "%.1f GFLOP/s", r->machine.peak_gflops);
    else fputs("unknown", f);
    if (r->machine.peak_gflops > 0 && r->machine.peak_source[0]) {
        fputs(" (", f);
        mt__svg_text(f, r->machine.peak_source);
        fputc(')', f);
    }
    fputs(", memory bandwidth ", f);
    if (r->machine.bandwidth_gbs > 0) fprintf(f, "%.1f GB/s", r->machine.bandwidth_gbs);
    else fputs("unknown", f);
    if (r->machine.model_flops > 0)
        fprintf(f, "; the model's FLOPs a step %.4g GFLOP", r->machine.model_flops * 1e-9);
    fputs(".</p>\n<h2>What to fix first</h2>\n<ol id=\"fixes\">\n", f);
    for (int i = 0; i < r->n_fixes; i++) {
        fputs("<li>", f);
        mt__svg_text(f, r->fixes[i].text);
        fputs("</li>\n", f);
    }
    if (r->n_fixes == 0) fputs("<li>nothing stands out</li>\n", f);
    fputs("</ol>\n<h2>Roofline</h2>\n", f);
    figure(f, r, m, 0, "roofline", "Each op kind at its FLOP/byte and GFLOP/s under the roof "
           "(blue: compute-bound, orange: memory-bound); a circle's area is its share of the "
           "op time.");
    fputs("<h2>Ops</h2>\n", f);
    ops_table(f, r);
    fputs("<h2>Devices</h2>\n<p>exposed: communication the device waited for; hidden: "
          "asynchronous communication under its compute; sync: waiting for the other devices "
          "to arrive (load imbalance).</p>\n", f);
    devices_table(f, r);
    fputs("<h2>Steps</h2>\n", f);
    steps_table(f, r);
    fputs("<h2>Timeline</h2>\n", f);
    figure(f, r, m, 1, "timeline", "The step of median wall time: a row a device and a row a "
           "comm lane.");
    if (m) {
        fputs("<h2>Run</h2>\n", f);
        run_table(f, mt_report_metrics_run(m));
        figure(f, r, m, 2, "loss", "Train and validation loss a step.");
    }
    /* the text report, every figure as `meshtrain report` prints it */
    caught c = {NULL, 0};
    FILE *mem = open_memstream(&c.text, &c.len);
    if (mem) {
        mt_report_write_text(r, mem);
        if (fclose(mem) == 0 && c.text) {
            fputs("<h2>As text</h2>\n<pre id=\"text\">", f);
            mt__svg_text(f, c.text);
            fputs("</pre>\n", f);
        }
        free(c.text);
    }
    fputs("</body></html>\n", f);
    return ferror(f) ? mt_fail(MT_EIO, "writing the report's page failed") : MT_OK;
}
