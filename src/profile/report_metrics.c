/*
 * report_metrics.c — the metrics log of `meshtrain train --metrics FILE`
 * for mt_report (report.h): read strictly, line by line (each line a flat
 * JSON object of numbers, as src/cli/metrics.c writes it), summarised, and
 * drawn as loss.svg.
 */
#include "report_impl.h"

#include "meshtrain/files.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ======================================================================== */
/* One line                                                                  */
/* ======================================================================== */

typedef struct {
    const char *path, *s, *p;   /* the line and the position in it */
    long        line;           /* 1-based */
} cursor;

static mt_status bad_line(const cursor *c, const char *fmt, ...) {
    char what[160], got[24];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (*c->p == '\0') snprintf(got, sizeof got, "the end of the line");
    else snprintf(got, sizeof got, "'%.12s'", c->p);
    return mt_fail(MT_EFORMAT, "metrics '%s', line %ld (column %ld): %s, found %s; is it the "
                   "log of `meshtrain train --metrics FILE`?", c->path, c->line,
                   (long)(c->p - c->s) + 1, what, got);
}

static void skip_ws(cursor *c) {
    while (*c->p == ' ' || *c->p == '\t' || *c->p == '\r') c->p++;
}

static bool eat(cursor *c, char ch) {
    skip_ws(c);
    if (*c->p != ch) return false;
    c->p++;
    return true;
}

/* A key: a string without escapes (the writer's keys). */
static mt_status read_key(cursor *c, char *out, size_t n) {
    if (!eat(c, '"')) return bad_line(c, "expected a key in quotes");
    size_t k = 0;
    while (*c->p && *c->p != '"') {
        if (*c->p == '\\') return bad_line(c, "expected a key without escapes");
        if (k + 1 < n) out[k++] = *c->p;
        c->p++;
    }
    out[k] = '\0';
    if (*c->p != '"') return bad_line(c, "expected the key's closing '\"'");
    c->p++;
    return MT_OK;
}

/* A JSON number, or null for NaN. */
static mt_status read_value(cursor *c, const char *key, double *v) {
    skip_ws(c);
    if (strncmp(c->p, "null", 4) == 0) {
        c->p += 4;
        *v = NAN;
        return MT_OK;
    }
    /* a JSON number: strtod alone would take "nan", "-inf" and hex */
    const char *q = c->p + (*c->p == '-');
    if (!isdigit((unsigned char)*q)) return bad_line(c, "the value of \"%s\" is not a number", key);
    char *end;
    errno = 0;
    *v = strtod(c->p, &end);
    for (q = c->p; q < end; q++)
        if (!isdigit((unsigned char)*q) && !strchr("+-.eE", *q)) break;
    if (end == c->p || q != end || errno == ERANGE || !isfinite(*v))
        return bad_line(c, "the value of \"%s\" is not a finite JSON number (null stands for "
                        "NaN)", key);
    c->p = end;
    return MT_OK;
}

static mt_status read_line(cursor *c, mt__report_metric *m) {
    bool has_step = false, has_loss = false;
    double step = 0;
    *m = (mt__report_metric){0, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    if (!eat(c, '{')) return bad_line(c, "expected '{' opening the line's object");
    if (!eat(c, '}')) {
        for (;;) {
            char key[32];
            double v = 0;
            mt_status s = read_key(c, key, sizeof key);
            if (s == MT_OK && !eat(c, ':')) s = bad_line(c, "expected ':' after \"%s\"", key);
            if (s == MT_OK) s = read_value(c, key, &v);
            if (s != MT_OK) return s;
            if (strcmp(key, "step") == 0) step = v, has_step = true;
            else if (strcmp(key, "loss") == 0) m->loss = v, has_loss = true;
            else if (strcmp(key, "val_loss") == 0) m->val_loss = v;
            else if (strcmp(key, "tokens_per_s") == 0) m->tokens_per_s = v;
            else if (strcmp(key, "ms") == 0) m->ms = v;
            else if (strcmp(key, "moe_maxvio") == 0) m->maxvio = v;
            else if (strcmp(key, "moe_aux") == 0) m->moe_aux = v;
            else if (strcmp(key, "moe_dropped") == 0) m->moe_dropped = v;
            if (eat(c, '}')) break;
            if (!eat(c, ',')) return bad_line(c, "expected ',' or '}' after the value of \"%s\"", key);
        }
    }
    skip_ws(c);
    if (*c->p) return bad_line(c, "expected the end of the line after the object");
    if (!has_step || !has_loss) {
        c->p = c->s;
        return bad_line(c, "expected an object with \"step\" and \"loss\" (it has no \"%s\")",
                        has_step ? "loss" : "step");
    }
    if (!(step >= 0 && step <= 2e9 && step == floor(step))) {
        c->p = c->s;
        return bad_line(c, "expected \"step\" to be a whole number >= 0 (it is %g)", step);
    }
    m->step = (int)step;
    return MT_OK;
}

/* ======================================================================== */
/* The file and its summary                                                  */
/* ======================================================================== */

static int by_value(const void *x, const void *y) {
    double p = *(const double *)x, q = *(const double *)y;
    return (p > q) - (p < q);
}

/* The median of the finite values v[i].<field>, NaN when there is none;
 * tmp has room for n. */
static double median(const mt__report_metric *v, int n, size_t field, double *tmp) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        double x = *(const double *)((const char *)&v[i] + field);
        if (isfinite(x)) tmp[k++] = x;
    }
    if (k == 0) return NAN;
    qsort(tmp, (size_t)k, sizeof *tmp, by_value);
    return k % 2 ? tmp[k / 2] : 0.5 * (tmp[k / 2 - 1] + tmp[k / 2]);
}

static mt_status summarise(mt_report_metrics *m) {
    mt_report_run *run = &m->run;
    *run = (mt_report_run){.steps = m->n, .first_step = m->v[0].step,
                           .last_step = m->v[m->n - 1].step, .first_loss = m->v[0].loss,
                           .last_loss = m->v[m->n - 1].loss, .last_val_loss = NAN,
                           .best_val_loss = NAN};
    for (int i = 0; i < m->n; i++) {
        double val = m->v[i].val_loss;
        if (isnan(val)) continue;
        run->last_val_loss = val, run->last_val_step = m->v[i].step;
        if (isnan(run->best_val_loss) || val < run->best_val_loss)
            run->best_val_loss = val, run->best_val_step = m->v[i].step;
    }
    /* a mixture's balance: MaxVio's last and largest, the means of the rest */
    run->last_maxvio = run->max_maxvio = run->mean_moe_aux = run->mean_moe_dropped = NAN;
    double sum[2] = {0, 0};
    int n[2] = {0, 0};
    for (int i = 0; i < m->n; i++) {
        const mt__report_metric *v = &m->v[i];
        if (isfinite(v->maxvio)) {
            run->moe_steps++;
            run->last_maxvio = v->maxvio;
            if (isnan(run->max_maxvio) || v->maxvio > run->max_maxvio) run->max_maxvio = v->maxvio;
        }
        if (isfinite(v->moe_aux)) sum[0] += v->moe_aux, n[0]++;
        if (isfinite(v->moe_dropped)) sum[1] += v->moe_dropped, n[1]++;
    }
    if (n[0]) run->mean_moe_aux = sum[0] / n[0];
    if (n[1]) run->mean_moe_dropped = sum[1] / n[1];
    double *tmp = malloc((size_t)m->n * sizeof *tmp);
    if (!tmp) return mt_fail(MT_ENOMEM, "out of memory summarising %d metrics lines", m->n);
    run->median_tokens_per_s = median(m->v, m->n, offsetof(mt__report_metric, tokens_per_s), tmp);
    run->median_ms = median(m->v, m->n, offsetof(mt__report_metric, ms), tmp);
    free(tmp);
    return MT_OK;
}

static mt_status read_lines(mt_report_metrics *m, FILE *fp, const char *path) {
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    ssize_t len;
    mt_status s = MT_OK;
    while (s == MT_OK && (len = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
        cursor c = {path, line, line, lineno};
        skip_ws(&c);
        if (*c.p == '\0') continue;   /* a blank line says nothing */
        if (m->n == m->cap) {
            int ncap = m->cap ? 2 * m->cap : 256;
            void *p = realloc(m->v, (size_t)ncap * sizeof *m->v);
            if (!p) { s = mt_fail(MT_ENOMEM, "out of memory reading '%s'", path); break; }
            m->v = p, m->cap = ncap;
        }
        s = read_line(&c, &m->v[m->n]);
        if (s == MT_OK) m->n++;
    }
    free(line);
    if (s != MT_OK) return s;
    if (ferror(fp)) return mt_fail(MT_EIO, "cannot read metrics '%s': %s", path, strerror(errno));
    if (m->n == 0)
        return mt_fail(MT_EFORMAT, "metrics '%s' has no line; give the file of a run's "
                       "`meshtrain train --metrics FILE`", path);
    return summarise(m);
}

/* A metrics log larger than this is refused before it is read (a line is
 * about 150 bytes: 7 million steps). */
#define MAX_METRICS_BYTES (INT64_C(1) << 30)

mt_status mt_report_metrics_read(const char *path, mt_report_metrics **out) {
    *out = NULL;
    FILE *fp = NULL;
    mt_status s = mt_input_open(path, "metrics", MAX_METRICS_BYTES, &fp, NULL);
    if (s != MT_OK && access(path, F_OK) != 0)
        return mt_fail(s, "%s; give the file of `meshtrain train --metrics FILE`", mt_errmsg());
    if (s != MT_OK) return s;
    mt_report_metrics *m = calloc(1, sizeof *m);
    if (!m) {
        fclose(fp);
        return mt_fail(MT_ENOMEM, "out of memory reading '%s'", path);
    }
    s = read_lines(m, fp, path);
    fclose(fp);
    if (s != MT_OK) {
        mt_report_metrics_free(m);
        return s;
    }
    *out = m;
    return MT_OK;
}

const mt_report_run *mt_report_metrics_run(const mt_report_metrics *m) { return &m->run; }

void mt_report_set_run(mt_report *r, const mt_report_run *run) {
    r->has_run = run != NULL;
    if (run) r->run = *run;
}

void mt_report_metrics_free(mt_report_metrics *m) {
    if (!m) return;
    free(m->v);
    free(m);
}

/* ======================================================================== */
/* loss.svg                                                                  */
/* ======================================================================== */

enum { W = 800, H = 480, X0 = 80, X1 = 770, Y0 = 410, Y1 = 64 };   /* plot: x X0..X1, y Y0 (bottom)..Y1 */

static const char TRAIN[] = "#4e79a7", VAL[] = "#e15759";

typedef struct { double lo, hi, step; } axis;

/* Whole ticks around [lo, hi], at least `least` apart (1 on the step axis). */
static axis nice_axis(double lo, double hi, int want, double least) {
    if (!(hi > lo)) lo -= 0.5, hi += 0.5;
    double step = mt__svg_nice_step(lo, hi, want);
    step = fmax(step, least);
    return (axis){floor(lo / step + 1e-9) * step, ceil(hi / step - 1e-9) * step, step};
}

static double map_x(const axis *a, double v) { return X0 + (X1 - X0) * (v - a->lo) / (a->hi - a->lo); }
static double map_y(const axis *a, double v) { return Y0 - (Y0 - Y1) * (v - a->lo) / (a->hi - a->lo); }

static void ticks(FILE *f, const axis *ax, const axis *ay) {
    fprintf(f, "<g stroke=\"#e6e6e6\">\n");
    for (double v = ax->lo; v <= ax->hi + ax->step * 1e-6; v += ax->step)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", map_x(ax, v), Y0,
                map_x(ax, v), Y1);
    for (double v = ay->lo; v <= ay->hi + ay->step * 1e-6; v += ay->step)
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", X0, map_y(ay, v), X1,
                map_y(ay, v));
    fprintf(f, "</g>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#444444\"/>\n<g fill=\"#333333\">\n", X0, Y1, X1 - X0, Y0 - Y1);
    for (double v = ax->lo; v <= ax->hi + ax->step * 1e-6; v += ax->step)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.6g</text>\n", map_x(ax, v),
                Y0 + 18, fabs(v) < ax->step * 1e-6 ? 0 : v);
    for (double v = ay->lo; v <= ay->hi + ay->step * 1e-6; v += ay->step)
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.6g</text>\n", X0 - 8,
                map_y(ay, v) + 4, fabs(v) < ay->step * 1e-6 ? 0 : v);
    fprintf(f, "</g>\n<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"13\">step</text>\n"
               "<text transform=\"translate(24,%d) rotate(-90)\" text-anchor=\"middle\" "
               "font-size=\"13\">loss</text>\n", (X0 + X1) / 2, Y0 + 42, (Y0 + Y1) / 2);
}

/* A <polyline class="cls"> through (step, the metric at byte offset `field`)
 * of every line whose value there is finite. */
static void curve(FILE *f, const char *cls, const char *colour, const mt_report_metrics *m,
                  size_t field, const axis *ax, const axis *ay) {
    fprintf(f, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
               "stroke-linejoin=\"round\" points=\"", cls, colour);
    for (int i = 0, k = 0; i < m->n; i++) {
        double v = *(const double *)((const char *)&m->v[i] + field);
        if (isfinite(v))
            fprintf(f, "%s%.1f,%.1f", k++ ? " " : "", map_x(ax, m->v[i].step), map_y(ay, v));
    }
    fprintf(f, "\"/>\n");
}

mt_status mt_report_write_svg_loss(const mt_report_metrics *m, FILE *f) {
    const mt_report_run *run = &m->run;
    double lo = INFINITY, hi = -INFINITY;
    int n_val = 0;
    for (int i = 0; i < m->n; i++) {
        const double v[2] = {m->v[i].loss, m->v[i].val_loss};
        for (int k = 0; k < 2; k++)
            if (isfinite(v[k])) lo = fmin(lo, v[k]), hi = fmax(hi, v[k]);
        n_val += isfinite(m->v[i].val_loss);
    }
    if (!(hi >= lo)) lo = 0, hi = 1;   /* no finite loss: empty axes */
    double pad = 0.04 * (hi - lo);
    axis ax = nice_axis(m->v[0].step, m->v[m->n - 1].step, 8, 1);
    axis ay = nice_axis(lo - pad, hi + pad, 7, 0);
    for (int i = 0; i < m->n; i++)   /* steps out of order (a hand-made log): widen */
        if (m->v[i].step < ax.lo || m->v[i].step > ax.hi) {
            ax = nice_axis(fmin(ax.lo, m->v[i].step), fmax(ax.hi, m->v[i].step), 8, 1);
        }

    mt__svg_open(f, W, H);
    fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"15\" font-weight=\"bold\">loss over %d "
               "steps (%d..%d): train %.4f &#8594; %.4f</text>\n", X0, run->steps,
            run->first_step, run->last_step, run->first_loss, run->last_loss);
    if (n_val > 0)
        fprintf(f, "<text x=\"%d\" y=\"44\" fill=\"#444444\">validation: last %.4f (step %d), "
                   "best %.4f (step %d)</text>\n", X0, run->last_val_loss, run->last_val_step,
                run->best_val_loss, run->best_val_step);
    else
        fprintf(f, "<text x=\"%d\" y=\"44\" fill=\"#444444\">no validation loss in the log "
                   "(train --eval-every N writes one)</text>\n", X0);
    ticks(f, &ax, &ay);
    /* the train curve: one point per finite loss */
    curve(f, "train", TRAIN, m, offsetof(mt__report_metric, loss), &ax, &ay);
    if (n_val > 0) {
        curve(f, "val", VAL, m, offsetof(mt__report_metric, val_loss), &ax, &ay);
        for (int i = 0; i < m->n; i++)
            if (isfinite(m->v[i].val_loss))
                fprintf(f, "<circle class=\"val\" cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" "
                           "stroke=\"#ffffff\"><title>step %d: val_loss %.5g</title></circle>\n",
                        map_x(&ax, m->v[i].step), map_y(&ay, m->v[i].val_loss), VAL,
                        m->v[i].step, m->v[i].val_loss);
    }
    /* the legend, top right inside the plot, on white */
    double lx = X1 - 170, ly = Y1 + 10;
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"160\" height=\"%d\" fill=\"#ffffff\" "
               "stroke=\"#c8c8c8\"/>\n<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" "
               "stroke=\"%s\" stroke-width=\"2\"/><text x=\"%.0f\" y=\"%.0f\">train loss</text>\n",
            lx, ly, n_val > 0 ? 48 : 26, lx + 8, ly + 13, lx + 36, ly + 13, TRAIN, lx + 44, ly + 17);
    if (n_val > 0)
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
                   "stroke-width=\"2\"/><circle cx=\"%.0f\" cy=\"%.0f\" r=\"4\" fill=\"%s\"/>"
                   "<text x=\"%.0f\" y=\"%.0f\">validation loss</text>\n",
                lx + 8, ly + 35, lx + 36, ly + 35, VAL, lx + 22, ly + 35, VAL, lx + 44, ly + 39);
    fputs("</svg>\n", f);
    if (ferror(f)) return mt_fail(MT_EIO, "cannot write loss.svg: the stream failed");
    return MT_OK;
}
