/*
 * test_report_svg.c — the report's pictures and the metrics log
 * (include/meshtrain/report.h) on a synthetic trace and log whose answers are
 * worked out by hand below: the SVGs are well-formed (a tag-balance check
 * here, and xmllint when it is installed), roofline.svg puts each op kind at
 * the x/y of report.h's documented axis mapping and leaves collectives out,
 * the timeline has a row per track and the known spans in their kinds'
 * colours, loss.svg has a point per finite train loss and a marker per eval
 * step; the run summary and its errors.
 */
#include "harness.h"
#include "meshtrain.h"
#include "trace_text.h"

#include <stdbool.h>

#define OP(name, tid, ts, dur, flops, bytes)                                           \
    "{\"name\":\"" name "\",\"cat\":\"op\",\"ph\":\"X\",\"ts\":" #ts ",\"dur\":" #dur \
    ",\"pid\":0,\"tid\":" #tid ",\"args\":{\"flops\":" #flops ",\"bytes\":" #bytes "}}"

/*
 * One step, 0..100 µs, two devices; device 0 has comm lane 1.
 *   device 0: idle 0-10 | region 10-40 (op matmul 10-30) | psum comm 40-50 |
 *             region 50-80 (op gemm 50-70) | wait 80-90 | idle 90-100
 *   lane 1:   psum (async) 60-85
 *   device 1: idle 0-30 | region 30-60 (op psum 30-40: a collective, 1e4 flops, 1e4 bytes) |
 *             region 60-90 | idle 90-100
 * Op time 50 µs: matmul and gemm 20 µs each (share 0.4), psum 10 (0.2).
 * matmul: 1e5 flops / 1e5 bytes = intensity 1, 1e5 / 20e-6 s = 5 GFLOP/s;
 * gemm: 1e6 / 1e4 = intensity 100, 50 GFLOP/s. At peak 100 GFLOP/s, 10 GB/s the ridge is at
 * 10 FLOP/byte and the roof at the left edge is 10^lo_x · 10.
 */
static const char TRACE[] =
    HEAD
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"device 0\"}},\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":100001,\"args\":{\"name\":\"device 0 comm 1\"}},\n"
    "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":1,\"args\":{\"name\":\"device 1\"}},\n"
    X("step 1", "step", 0, 0, 100) ",\n"
    X("idle", "idle", 0, 0, 10) ",\n"
    X("forward", "compute", 0, 10, 30) ",\n"
    OP("matmul", 0, 10, 20, 100000, 100000) ",\n"
    X("psum 'data'", "comm", 0, 40, 10) ",\n"
    X("backward", "compute", 0, 50, 30) ",\n"
    OP("gemm", 0, 50, 20, 1000000, 10000) ",\n"
    X("wait: gradient reductions", "compute", 0, 80, 10) ",\n"
    X("idle", "idle", 0, 90, 10) ",\n"
    X("psum (async) 'data'", "comm", 100001, 60, 25) ",\n"
    X("step 1", "step", 1, 0, 100) ",\n"
    X("idle", "idle", 1, 0, 30) ",\n"
    X("forward", "compute", 1, 30, 30) ",\n"
    OP("psum", 1, 30, 10, 10000, 10000) ",\n"
    X("backward", "compute", 1, 60, 30) ",\n"
    X("idle", "idle", 1, 90, 10)
    TAIL;

/* 5 lines; step 3's loss is null (a NaN); val_loss on steps 2 and 4, the best on 4.
 * tokens/s 100, 300, 200, 500, 400 -> median 300; ms 10, 12, 11, 14, 13 -> median 12. */
static const char METRICS[] =
    "{\"step\":1,\"loss\":5.5,\"lr\":0.001,\"tokens_per_s\":100,\"ms\":10}\n"
    "{\"step\":2,\"loss\":5.0,\"val_loss\":5.2,\"tokens_per_s\":300,\"ms\":12}\n"
    "{\"step\":3,\"loss\":null,\"tokens_per_s\":200,\"ms\":11}\n"
    "{\"step\":4,\"loss\":4.0,\"val_loss\":4.5,\"tokens_per_s\":500,\"ms\":14}\n"
    "{\"step\":5,\"loss\":3.5,\"tokens_per_s\":400,\"ms\":13}\n";

static const char *write_file(const char *name, const char *text) {
    FILE *f = fopen(name, "wb");
    MT_CHECK(f, "cannot write %s", name);
    MT_CHECK(fputs(text, f) >= 0, "short write to %s", name);
    fclose(f);
    return name;
}

static mt_report *analysed(const mt_report_machine *m) {
    mt_report *r = NULL;
    MT_CHECK_OK(mt_report_read(write_file("svg_trace.json", TRACE), &r));
    MT_CHECK_OK(mt_report_analyse(r, m));
    return r;
}

/* What a writer wrote to a file, as a string (the caller frees it); saved as `name`
 * so that a failure leaves it to look at. */
static char *drawn(const char *name, mt_status (*draw)(const void *, FILE *), const void *what) {
    FILE *f = fopen(name, "w+");
    MT_CHECK(f, "cannot write %s", name);
    MT_CHECK_OK(draw(what, f));
    long n = ftell(f);
    char *s = malloc((size_t)n + 1);
    rewind(f);
    MT_CHECK(s && fread(s, 1, (size_t)n, f) == (size_t)n, "cannot read %s back", name);
    s[n] = '\0';
    fclose(f);
    return s;
}
static mt_status roofline(const void *r, FILE *f) { return mt_report_write_svg_roofline(r, f); }
static mt_status timeline(const void *r, FILE *f) { return mt_report_write_svg_timeline(r, f); }
static mt_status loss(const void *m, FILE *f) { return mt_report_write_svg_loss(m, f); }

/* Tags balance: every <x ...> closed by </x> in order, <x .../> by itself. */
static void check_well_formed(const char *name, const char *s) {
    char stack[64][32];
    int depth = 0, roots = 0;
    for (const char *p = strchr(s, '<'); p; p = strchr(p + 1, '<')) {
        if (p[1] == '?' || p[1] == '!') continue;
        const char *end = strchr(p, '>');
        MT_CHECK(end, "%s: a tag at byte %ld is not closed", name, (long)(p - s));
        char tag[32];
        bool closing = p[1] == '/';
        MT_CHECK(sscanf(p + 1 + closing, "%31[a-zA-Z0-9]", tag) == 1, "%s: no tag name at byte %ld",
                 name, (long)(p - s));
        for (const char *q = p; q < end; q++)
            MT_CHECK(*q != '<' || q == p, "%s: '<' inside a tag at byte %ld", name, (long)(q - s));
        if (closing) {
            MT_CHECK(depth > 0 && strcmp(stack[depth - 1], tag) == 0, "%s: </%s> at byte %ld "
                     "closes %s", name, tag, (long)(p - s), depth ? stack[depth - 1] : "nothing");
            depth--;
        } else if (end[-1] != '/') {
            MT_CHECK(depth < 64, "%s: nested too deep", name);
            if (depth == 0) roots++;
            snprintf(stack[depth++], sizeof stack[0], "%s", tag);
        }
    }
    MT_CHECK(depth == 0, "%s: <%s> is never closed", name, depth ? stack[depth - 1] : "");
    MT_CHECK(roots == 1 && strncmp(strstr(s, "<svg"), "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39) == 0,
             "%s: want one <svg> root element", name);
    if (system("command -v xmllint >/dev/null 2>&1") == 0) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "xmllint --noout %s", name);
        MT_CHECK(system(cmd) == 0, "xmllint --noout %s fails", name);
    }
}

/* The number attribute `attr` of the element starting at `el` (NaN when absent). */
static double attr_of(const char *el, const char *attr) {
    char key[32];
    snprintf(key, sizeof key, " %s=\"", attr);
    const char *end = strchr(el, '>'), *p = strstr(el, key);
    return p && p < end ? atof(p + strlen(key)) : NAN;
}

/* The element `<tag` that holds the first <title> starting with `title`. */
static const char *element_titled(const char *s, const char *tag, const char *title) {
    char key[80];
    snprintf(key, sizeof key, "<title>%s", title);
    const char *t = strstr(s, key);
    if (!t) return NULL;
    const char *el = NULL;
    for (const char *p = strstr(s, tag); p && p < t; p = strstr(p + 1, tag)) el = p;
    return el;
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

/* report.h: x = 90 + 680 (log10 I - lo_x) / (hi_x - lo_x), y = 500 - 440 (log10 G - lo_y) / (...) */
static double map_x(double v, double lo, double hi) { return 90 + 680 * (log10(v) - lo) / (hi - lo); }
static double map_y(double v, double lo, double hi) { return 500 - 440 * (log10(v) - lo) / (hi - lo); }

MT_TEST(roofline_points_at_their_coordinates) {
    mt_report_machine m = {.peak_gflops = 100, .bandwidth_gbs = 10};
    mt_report *r = analysed(&m);
    char *s = drawn("roofline.svg", roofline, r);
    check_well_formed("roofline.svg", s);
    /* x: intensities 1 and 100, ridge 10 -> decades floor(0 - 0.1) = -1 .. ceil(2 + 0.1) = 3;
     * y: 5, 50, peak 100 and the roof at x = 0.1: 1 GFLOP/s -> -1 .. 3 */
    const struct { const char *kind; double i, g; } want[2] = {{"matmul", 1, 5}, {"gemm", 100, 50}};
    for (int k = 0; k < 2; k++) {
        const char *c = element_titled(s, "<circle", want[k].kind);
        MT_CHECK(c, "no circle titled '%s'", want[k].kind);
        MT_CHECK_CLOSE(attr_of(c, "cx"), map_x(want[k].i, -1, 3), 0.01, "%s cx", want[k].kind);
        MT_CHECK_CLOSE(attr_of(c, "cy"), map_y(want[k].g, -1, 3), 0.01, "%s cy", want[k].kind);
        /* area proportional to the share 0.4: radius 40 sqrt(0.4) */
        MT_CHECK_CLOSE(attr_of(c, "r"), 40 * sqrt(0.4), 0.01, "%s radius", want[k].kind);
        char label[40];
        snprintf(label, sizeof label, ">%s</text>", want[k].kind);
        MT_CHECK(strstr(s, label), "no label '%s'", want[k].kind);
    }
    MT_CHECK(!element_titled(s, "<circle", "psum"), "a collective is drawn as a point");
    MT_CHECK(count(s, "<circle class=\"op\"") == 2, "%d points, want 2", count(s, "<circle class=\"op\""));
    const char *ridge = strstr(s, "<circle class=\"ridge\"");
    MT_CHECK(ridge, "no ridge point");
    MT_CHECK_CLOSE(attr_of(ridge, "cx"), map_x(10, -1, 3), 0.01, "ridge x");
    MT_CHECK_CLOSE(attr_of(ridge, "cy"), map_y(100, -1, 3), 0.01, "ridge y");
    MT_CHECK(strstr(s, "ridge 10 FLOP/B") && strstr(s, ">0.1</text>") && strstr(s, ">1000</text>"),
             "ridge label or decade labels missing");
    MT_CHECK(strstr(s, "class=\"roof\""), "no roof");
    free(s);
    /* without the machine's figures: the points only, and how to give the roof */
    MT_CHECK_OK(mt_report_analyse(r, NULL));
    s = drawn("roofline_unknown.svg", roofline, r);
    check_well_formed("roofline_unknown.svg", s);
    MT_CHECK(!strstr(s, "class=\"roof\"") && strstr(s, "roof is unknown") &&
             strstr(s, "--peak-gflops") && strstr(s, "--machine"), "unknown roof not said");
    MT_CHECK(count(s, "<circle class=\"op\"") == 2, "points without a roof");
    free(s);
    mt_report_free(r);
}

/* The fill of the first element of `cls` and a check that every one of that class has it. */
static void class_fill(const char *s, const char *cls, char *fill, size_t n) {
    char key[48];
    snprintf(key, sizeof key, "<rect class=\"%s\"", cls);
    fill[0] = '\0';
    int seen = 0;
    for (const char *p = strstr(s, key); p; p = strstr(p + 1, key), seen++) {
        char f[16] = "";
        const char *q = strstr(p, " fill=\"");
        MT_CHECK(q && q < strchr(p, '>') && sscanf(q + 7, "%15[^\"]", f) == 1, "%s without fill", cls);
        if (!fill[0]) snprintf(fill, n, "%s", f);
        MT_CHECK(strcmp(fill, f) == 0, "%s boxes in %s and %s", cls, fill, f);
    }
    MT_CHECK(seen >= 2, "%d rects of class %s, want a box and a legend swatch", seen, cls);
}

/* A rect of class `cls` at x, y-independent, with `width`: x = 110 + 10.6 µs (1060 px / 100 µs). */
static bool has_box(const char *s, const char *cls, double t0, double t1) {
    char key[48];
    snprintf(key, sizeof key, "<rect class=\"%s\"", cls);
    for (const char *p = strstr(s, key); p; p = strstr(p + 1, key))
        if (fabs(attr_of(p, "x") - (110 + 10.6 * t0)) < 0.01 &&
            fabs(attr_of(p, "width") - 10.6 * (t1 - t0)) < 0.01)
            return true;
    return false;
}

MT_TEST(timeline_rows_and_colours) {
    mt_report *r = analysed(NULL);
    char *s = drawn("timeline.svg", timeline, r);
    check_well_formed("timeline.svg", s);
    MT_CHECK(strstr(s, "step 1: wall 0.100 ms"), "the title names the step and its wall");
    /* rows: device 0, its lane 1, device 1 */
    MT_CHECK(count(s, "<rect class=\"row\"") == 3, "%d rows, want 3", count(s, "<rect class=\"row\""));
    MT_CHECK(strstr(s, ">device 0</text>") && strstr(s, ">device 1</text>") &&
             strstr(s, ">comm 1</text>"), "row labels");
    const char *cls[5] = {"region", "op", "comm", "wait", "idle"};
    char fill[5][16];
    for (int k = 0; k < 5; k++) class_fill(s, cls[k], fill[k], sizeof fill[k]);
    for (int a = 0; a < 5; a++)
        for (int b = a + 1; b < 5; b++)
            MT_CHECK(strcmp(fill[a], fill[b]) != 0, "%s and %s share %s", cls[a], cls[b], fill[a]);
    const struct { const char *cls; double t0, t1; } box[] = {
        {"idle", 0, 10}, {"region", 10, 40}, {"op", 10, 30}, {"comm", 40, 50}, {"op", 50, 70},
        {"wait", 80, 90}, {"idle", 90, 100}, {"comm", 60, 85}, {"idle", 0, 30}, {"op", 30, 40}};
    for (size_t i = 0; i < sizeof box / sizeof box[0]; i++)
        MT_CHECK(has_box(s, box[i].cls, box[i].t0, box[i].t1), "no %s box for %g..%g us",
                 box[i].cls, box[i].t0, box[i].t1);
    MT_CHECK(strstr(s, ">matmul</text>"), "the 212 px matmul box is labelled");
    free(s);
    mt_report_free(r);
}

/* r's JSON (before the run is set, with json_first), then with run u its
 * text and JSON, as one string (free it). */
static char *with_run(mt_report *r, const mt_report_run *u, bool json_first) {
    FILE *f = fopen("report.txt", "w+");
    MT_CHECK(f, "cannot write report.txt");
    if (json_first) mt_report_write_json(r, f);
    mt_report_set_run(r, u);
    mt_report_write_text(r, f);
    mt_report_write_json(r, f);
    long len = ftell(f);
    char *out = calloc(1, (size_t)len + 1);
    rewind(f);
    MT_CHECK(fread(out, 1, (size_t)len, f) == (size_t)len, "read back");
    fclose(f);
    return out;
}

MT_TEST(loss_points_and_run_summary) {
    mt_report_metrics *m = NULL;
    MT_CHECK_OK(mt_report_metrics_read(write_file("metrics.jsonl", METRICS), &m));
    const mt_report_run *u = mt_report_metrics_run(m);
    MT_CHECK(u->steps == 5 && u->first_step == 1 && u->last_step == 5, "%d steps", u->steps);
    MT_CHECK_CLOSE(u->first_loss, 5.5, 1e-12, "first loss");
    MT_CHECK_CLOSE(u->last_loss, 3.5, 1e-12, "last loss");
    MT_CHECK_CLOSE(u->last_val_loss, 4.5, 1e-12, "last val");
    MT_CHECK_CLOSE(u->best_val_loss, 4.5, 1e-12, "best val");
    MT_CHECK(u->last_val_step == 4 && u->best_val_step == 4, "val steps %d %d", u->last_val_step,
             u->best_val_step);
    MT_CHECK_CLOSE(u->median_tokens_per_s, 300, 1e-12, "median tokens/s");
    MT_CHECK_CLOSE(u->median_ms, 12, 1e-12, "median ms");
    char *s = drawn("loss.svg", loss, m);
    check_well_formed("loss.svg", s);
    const char *train = strstr(s, "<polyline class=\"train\""), *val = strstr(s, "<polyline class=\"val\"");
    MT_CHECK(train && val, "no train or val line");
    const char *pts = strstr(train, "points=\"");
    int n = 0;
    for (const char *p = pts + 8; *p != '"'; p++) n += *p == ',';
    MT_CHECK(n == 4, "%d train points, want 4 (step 3's loss is null)", n);
    MT_CHECK(count(s, "<circle class=\"val\"") == 2, "%d val markers, want 2",
             count(s, "<circle class=\"val\""));
    MT_CHECK(strstr(s, "train loss") && strstr(s, "validation loss"), "legend");
    free(s);

    /* the report's run section and "run" object, only with a run */
    mt_report *r = analysed(NULL);
    char *out = with_run(r, u, true);
    MT_CHECK(count(out, "\"run\":{") == 1, "want one \"run\" object: only once a run is set");
    MT_CHECK(strstr(out, "\"run\":{\"steps\":5,\"first_step\":1,\"last_step\":5,\"first_loss\":5.5,"
                         "\"last_loss\":3.5,\"last_val_loss\":4.5,\"last_val_step\":4,"
                         "\"best_val_loss\":4.5,\"best_val_step\":4,\"median_tokens_per_s\":300,"
                         "\"median_ms\":12}}"), "the run object:\n%s", out);
    MT_CHECK(strstr(out, "\nrun (metrics: 5 lines, steps 1..5):\n") &&
             strstr(out, "train loss  5.5000 (step 1) -> 3.5000 (step 5)") &&
             strstr(out, "best 4.5000 (step 4)") && strstr(out, "300.0 tokens/s, 12.000 ms"),
             "the run section:\n%s", out);
    free(out);
    mt_report_free(r);
    mt_report_metrics_free(m);
}

/* A mixture's balance metrics, summarised by hand: MaxVio 0.5, 1.5, 1.0
 * (last 1.0, max 1.5; a dense line between them counts not), router losses
 * 0.02, 0.04 (mean 0.03), drops 0.25, 0.75, null (mean 0.5). */
MT_TEST(run_summary_of_a_mixture) {
    static const char MOE[] =
        "{\"step\":1,\"loss\":5,\"moe_maxvio\":0.5,\"moe_aux\":0.02,\"moe_dropped\":0.25}\n"
        "{\"step\":2,\"loss\":4,\"moe_maxvio\":1.5,\"moe_aux\":0.04,\"moe_dropped\":0.75}\n"
        "{\"step\":3,\"loss\":3}\n"
        "{\"step\":4,\"loss\":2,\"moe_maxvio\":1.0,\"moe_dropped\":null}\n";
    mt_report_metrics *m = NULL;
    MT_CHECK_OK(mt_report_metrics_read(write_file("moe.jsonl", MOE), &m));
    const mt_report_run *u = mt_report_metrics_run(m);
    MT_CHECK(u->moe_steps == 3, "%d steps with a MaxVio, want 3", u->moe_steps);
    MT_CHECK_CLOSE(u->last_maxvio, 1.0, 1e-12, "last MaxVio");
    MT_CHECK_CLOSE(u->max_maxvio, 1.5, 1e-12, "max MaxVio");
    MT_CHECK_CLOSE(u->mean_moe_aux, 0.03, 1e-12, "mean router losses");
    MT_CHECK_CLOSE(u->mean_moe_dropped, 0.5, 1e-12, "mean dropped");
    mt_report *r = analysed(NULL);
    char *out = with_run(r, u, false);
    MT_CHECK(strstr(out, "experts     MaxVio last 1.000, max 1.500 (3 steps); router losses "
                         "mean 0.03000; dropped mean 50.00%"), "the experts line:\n%s", out);
    MT_CHECK(strstr(out, "\"median_ms\":null,\"moe_steps\":3,\"last_maxvio\":1,"
                         "\"max_maxvio\":1.5,\"mean_moe_aux\":0.03,\"mean_moe_dropped\":0.5}"),
             "the run object's experts:\n%s", out);
    free(out);
    mt_report_free(r);
    mt_report_metrics_free(m);
}

MT_TEST(metrics_errors_name_the_line) {
    mt_report_metrics *m = NULL;
    MT_CHECK_FAILS(mt_report_metrics_read("absent.jsonl", &m), MT_EIO, "absent.jsonl",
                   "--metrics");
    write_file("noloss.jsonl", "{\"step\":1,\"loss\":5}\n{\"step\":2,\"lr\":0.1}\n");
    MT_CHECK_FAILS(mt_report_metrics_read("noloss.jsonl", &m), MT_EFORMAT, "'noloss.jsonl'",
                   "line 2", "no \"loss\"");
    write_file("nostep.jsonl", "{\"loss\":5}\n");
    MT_CHECK_FAILS(mt_report_metrics_read("nostep.jsonl", &m), MT_EFORMAT, "line 1", "no \"step\"");
    write_file("word.jsonl", "{\"step\":1,\"loss\":5}\n\n{\"step\":2,\"loss\":5,\"ms\":\"fast\"}\n");
    MT_CHECK_FAILS(mt_report_metrics_read("word.jsonl", &m), MT_EFORMAT, "line 3",
                   "\"ms\" is not a number", "'\"fast\"}'");
    write_file("torn.jsonl", "{\"step\":1,\"loss\":5}\n{\"step\":2,\"lo");
    MT_CHECK_FAILS(mt_report_metrics_read("torn.jsonl", &m), MT_EFORMAT, "line 2");
    /* NaN and infinities are no JSON: null stands for a NaN */
    write_file("inf.jsonl", "{\"step\":1,\"loss\":5}\n{\"step\":2,\"loss\":-inf}\n");
    MT_CHECK_FAILS(mt_report_metrics_read("inf.jsonl", &m), MT_EFORMAT, "'inf.jsonl'", "line 2",
                   "\"loss\" is not a number");
    write_file("nan.jsonl", "{\"step\":1,\"loss\":5,\"ms\":-nan}\n");
    MT_CHECK_FAILS(mt_report_metrics_read("nan.jsonl", &m), MT_EFORMAT, "line 1", "\"ms\"");
    write_file("big.jsonl", "{\"step\":1,\"loss\":1e999}\n");
    MT_CHECK_FAILS(mt_report_metrics_read("big.jsonl", &m), MT_EFORMAT, "line 1", "\"loss\"");
    write_file("hex.jsonl", "{\"step\":1,\"loss\":0x1p3}\n");
    MT_CHECK_FAILS(mt_report_metrics_read("hex.jsonl", &m), MT_EFORMAT, "line 1", "\"loss\"");
    write_file("null.jsonl", "{\"step\":1,\"loss\":null}\n");
    MT_CHECK_OK(mt_report_metrics_read("null.jsonl", &m));
    mt_report_metrics_free(m);
    m = NULL;
    write_file("empty.jsonl", "");
    MT_CHECK_FAILS(mt_report_metrics_read("empty.jsonl", &m), MT_EFORMAT, "no line");
    MT_CHECK(m == NULL, "no metrics after a failure");
}

int main(int argc, char **argv) { return mt_test_main_in_scratch(argc, argv); }
