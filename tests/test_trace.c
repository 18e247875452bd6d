/*
 * test_trace.c — the trace of a training run (mt_train_config.trace,
 * mt_trainer_write_trace), read back from the file:
 *
 *  - 2-device data-parallel GPT, 3 steps: on each device's track, the op
 *    spans inside each "step N" sum to the compiled graph's FLOPs
 *    (mt_graph_get_stats: forward + backward, counted at compile time); every
 *    step has an "optimizer" span; the collectives of a step before its
 *    optimizer carry the bytes of the graph's collective nodes (as `meshtrain
 *    explain` lists them); idle spans exist and overlap no other span of the
 *    device's own track.
 *  - trace_steps keeps only the last steps, their times after the earlier
 *    ones' (one clock for the run).
 *  - Off a mesh, one device is traced as the mesh data=1: the same losses as
 *    the untraced run, one track whose op spans sum to the graph's FLOPs
 *    each step, and the model's FLOPs per step (an MLP: the graph's) in the
 *    "model" metadata event.
 *
 *  - Keeping the last K steps of a long run (the list itself): the kept
 *    events are exactly the last K steps', in order, and the list's memory
 *    stays bounded by a small multiple of theirs (dropping is O(1) per
 *    event, not a memmove of K steps per step).
 *
 * The writer puts one event a line, so a line-by-line reader suffices.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"
#include "profile/profile_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ======================================================================== */
/* Reading the trace                                                         */
/* ======================================================================== */

typedef struct {
    char   name[64], cat[16];
    double ts, dur, flops, bytes;
    int    tid;
} span;

enum { MAX_SPANS = 20000 };
static span spans[MAX_SPANS];
static int  n_spans;

static double num_after(const char *line, const char *key, double none) {
    const char *p = strstr(line, key);
    return p ? atof(p + strlen(key)) : none;
}

static void str_after(const char *line, const char *key, char *out, size_t cap) {
    out[0] = '\0';
    const char *p = strstr(line, key);
    if (!p) return;
    p += strlen(key);
    size_t n = 0;
    while (p[n] && p[n] != '"' && n + 1 < cap) n++;
    memcpy(out, p, n);
    out[n] = '\0';
}

/* Reads the complete ("X") events of the file; false when it is missing. */
static bool read_trace(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    n_spans = 0;
    char line[2048];
    while (fgets(line, sizeof line, f) && n_spans < MAX_SPANS) {
        if (!strstr(line, "\"ph\":\"X\"")) continue;
        span *s = &spans[n_spans++];
        str_after(line, "{\"name\":\"", s->name, sizeof s->name);
        str_after(line, "\"cat\":\"", s->cat, sizeof s->cat);
        s->ts = num_after(line, "\"ts\":", 0);
        s->dur = num_after(line, "\"dur\":", 0);
        s->tid = (int)num_after(line, "\"tid\":", -1);
        s->flops = num_after(line, "\"flops\":", 0);
        s->bytes = num_after(line, "\"bytes\":", 0);
    }
    fclose(f);
    return true;
}

/* The span "step <step>" on track tid, NULL if none. */
static const span *step_span(int tid, int step) {
    char name[32];
    snprintf(name, sizeof name, "step %d", step);
    for (int i = 0; i < n_spans; i++)
        if (spans[i].tid == tid && strcmp(spans[i].name, name) == 0) return &spans[i];
    return NULL;
}

static bool inside(const span *s, const span *outer) {
    return s->ts >= outer->ts && s->ts + s->dur <= outer->ts + outer->dur + 1e-3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ======================================================================== */
/* A data-parallel run                                                       */
/* ======================================================================== */

/* Makes the empty file of mkstemp's template `path`. */
static void new_file(char *path) {
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0, "mkstemp %s", path);
    close(fd);
}

static mt_trainer *traced_trainer(const char *text, const char *trace, const char *mesh,
                                  int steps, int keep) {
    mt_train_config c = mt_test_config(MT_MODEL_GPT, text);
    c.mesh = mesh;
    c.trace = trace;
    c.trace_steps = keep;
    c.threads = 2;
    c.bucket_mb = 0;   /* one collective a graph node, the reference below (buckets: test_buckets) */
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    for (int i = 0; i < steps; i++) MT_CHECK_OK(mt_trainer_step(tr, NULL));
    MT_CHECK_OK(mt_trainer_write_trace(tr));
    return tr;
}

MT_TEST(data_parallel_trace_has_ops_optimizer_steps_idle_and_reductions) {
    char text[] = "/tmp/mt_trace_text_XXXXXX", trace[] = "/tmp/mt_trace_XXXXXX";
    mt_test_write_text(text);
    new_file(trace);
    mt_trainer *tr = traced_trainer(text, trace, "data=2", 3, 0);
    MT_CHECK(read_trace(trace), "no trace at %s", trace);
    mt_graph *g = mt_trainer_graph(tr);
    mt_graph_stats st = mt_graph_get_stats(g);
    const double want_flops = st.flops_forward + st.flops_backward;
    MT_CHECK(want_flops > 0, "the graph counts no FLOPs");
    /* the graph's collectives, as explain lists them */
    double want_bytes[512];
    int n_want = 0;
    for (int i = 0; i < mt_graph_n_nodes(g) && n_want < 512; i++) {
        mt_node_info in;
        if (mt_graph_node(g, i, &in) == MT_OK && in.collective) want_bytes[n_want++] = in.comm_bytes;
    }
    qsort(want_bytes, (size_t)n_want, sizeof *want_bytes, cmp_double);
    MT_CHECK(n_want > 0, "a data-parallel graph without collectives");

    for (int dev = 0; dev < 2; dev++) {
        int n_idle_run = 0;
        for (int step = 1; step <= 3; step++) {
            const span *sp = step_span(dev, step);
            MT_CHECK(sp, "device %d has no span 'step %d'", dev, step);
            double flops = 0;
            int n_ops = 0, n_opt = 0, n_idle = 0;
            const span *opt = NULL;
            for (int i = 0; i < n_spans; i++) {
                const span *s = &spans[i];
                if (s->tid != dev || !inside(s, sp)) continue;
                if (strcmp(s->cat, "op") == 0) flops += s->flops, n_ops++;
                if (strcmp(s->name, "optimizer") == 0) opt = s, n_opt++;
                if (strcmp(s->cat, "idle") == 0) n_idle++;
            }
            MT_CHECK(n_ops > 0, "device %d step %d: no op spans", dev, step);
            MT_CHECK(fabs(flops - want_flops) <= 1e-9 * want_flops,
                     "device %d step %d: op spans sum to %.17g FLOPs, the graph counts %.17g",
                     dev, step, flops, want_flops);
            MT_CHECK(n_opt == 1, "device %d step %d: %d optimizer spans", dev, step, n_opt);
            /* idle is the gaps of 1 µs or more between the device's spans: a
             * step on a fast CPU may have none (seen on a 2-core EPYC, 1 run in
             * 5), so one is asked of the run, not of each step; that each is a
             * gap is checked below */
            n_idle_run += n_idle;
            /* the collectives of the step before its optimizer: the graph's */
            double got[512];
            int n_got = 0;
            const int lane0 = 100000 + dev * 64;
            for (int i = 0; i < n_spans && n_got < 512; i++) {
                const span *s = &spans[i];
                if ((s->tid == dev || (s->tid > lane0 && s->tid < lane0 + 64)) &&
                    strcmp(s->cat, "comm") == 0 && inside(s, sp) && s->ts < opt->ts)
                    got[n_got++] = s->bytes;
            }
            qsort(got, (size_t)n_got, sizeof *got, cmp_double);
            MT_CHECK(n_got == n_want, "device %d step %d: %d collectives traced, the graph has %d",
                     dev, step, n_got, n_want);
            for (int k = 0; k < n_want; k++)
                MT_CHECK(got[k] == want_bytes[k], "device %d step %d: collective bytes %.0f, "
                         "the graph's %.0f (sorted, #%d)", dev, step, got[k], want_bytes[k], k);
        }
        MT_CHECK(n_idle_run > 0, "device %d: no idle span in 3 steps", dev);
        /* idle time overlaps nothing else on the device's own track */
        for (int i = 0; i < n_spans; i++) {
            const span *a = &spans[i];
            if (a->tid != dev || strcmp(a->cat, "idle") != 0) continue;
            for (int j = 0; j < n_spans; j++) {
                const span *b = &spans[j];
                if (b->tid != dev || j == i || strcmp(b->cat, "step") == 0) continue;
                bool overlap = b->ts < a->ts + a->dur - 2e-3 && a->ts < b->ts + b->dur - 2e-3;
                MT_CHECK(!overlap, "device %d: idle %.3f+%.3f overlaps '%s' %.3f+%.3f", dev,
                         a->ts, a->dur, b->name, b->ts, b->dur);
            }
        }
    }
    mt_trainer_free(tr);
    unlink(trace);
    unlink(text);
}

MT_TEST(trace_steps_keeps_the_last_steps_on_one_clock) {
    char text[] = "/tmp/mt_trace_text_XXXXXX", trace[] = "/tmp/mt_trace_XXXXXX";
    mt_test_write_text(text);
    new_file(trace);
    mt_trainer *tr = traced_trainer(text, trace, "data=2", 4, 2);
    MT_CHECK(read_trace(trace), "no trace at %s", trace);
    for (int dev = 0; dev < 2; dev++) {
        MT_CHECK(!step_span(dev, 1) && !step_span(dev, 2), "device %d kept an early step", dev);
        const span *s3 = step_span(dev, 3), *s4 = step_span(dev, 4);
        MT_CHECK(s3 && s4, "device %d lacks step 3 or 4", dev);
        MT_CHECK(s4->ts >= s3->ts + s3->dur, "device %d: step 4 at %.3f us, before step 3 ended "
                 "(%.3f)", dev, s4->ts, s3->ts + s3->dur);
    }
    for (int i = 0; i < n_spans; i++)
        MT_CHECK(spans[i].ts >= step_span(spans[i].tid < 2 ? spans[i].tid : 0, 3)->ts - 1e-3 ||
                 spans[i].tid >= 2,
                 "'%s' at %.3f us is from a dropped step", spans[i].name, spans[i].ts);
    mt_trainer_free(tr);
    unlink(trace);
    unlink(text);
}

MT_TEST(one_device_off_a_mesh_is_traced_as_the_same_run) {
    char trace[] = "/tmp/mt_trace_XXXXXX";
    new_file(trace);
    mt_train_config c = mt_test_config(MT_MODEL_MLP, NULL);
    mt_trainer *plain = NULL, *traced = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &plain));
    c.trace = trace;
    MT_CHECK_OK(mt_trainer_create(&c, &traced));
    for (int step = 1; step <= 3; step++) {
        mt_step_report a, b;
        MT_CHECK_OK(mt_trainer_step(plain, &a));
        MT_CHECK_OK(mt_trainer_step(traced, &b));
        MT_CHECK(a.loss == b.loss, "step %d: loss %.9g traced, %.9g not", step, b.loss, a.loss);
    }
    MT_CHECK_OK(mt_trainer_write_trace(traced));
    MT_CHECK(read_trace(trace), "no trace at %s", trace);
    /* the traced run's graph (data=1 adds the loss's one-element psum) */
    mt_graph_stats st = mt_graph_get_stats(mt_trainer_graph(traced));
    const double want = st.flops_forward + st.flops_backward;
    for (int step = 1; step <= 3; step++) {
        const span *sp = step_span(0, step);
        MT_CHECK(sp, "no span 'step %d' on device 0", step);
        double flops = 0;
        for (int i = 0; i < n_spans; i++)
            if (spans[i].tid == 0 && strcmp(spans[i].cat, "op") == 0 && inside(&spans[i], sp))
                flops += spans[i].flops;
        MT_CHECK(fabs(flops - want) <= 1e-9 * want, "step %d: op spans sum to %.17g FLOPs, the "
                 "graph counts %.17g", step, flops, want);
    }
    for (int i = 0; i < n_spans; i++)
        MT_CHECK(spans[i].tid == 0 || spans[i].tid >= 100000, "a span on track %d", spans[i].tid);
    /* the model's FLOPs per step, in the metadata */
    FILE *f = fopen(trace, "r");
    char line[2048];
    double model = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "\"name\":\"model\"")) model = num_after(line, "\"flops_per_step\":", 0);
    if (f) fclose(f);
    MT_CHECK(fabs(model - want) <= 1e-9 * want, "model FLOPs %.17g in the trace, want %.17g",
             model, want);
    mt_trainer_free(plain);
    mt_trainer_free(traced);
    unlink(trace);
}

MT_TEST(keeping_the_last_steps_of_a_long_run) {
    enum { KEEP = 3, STEPS = 2000, REGIONS = 5 };
    mt_trace_list l;
    MT_CHECK(mt__trace_list_init(&l, 4), "list");
    double t = 0;
    for (int s = 1; s <= STEPS; s++) {
        mt__trace_step_begin(&l, t, s, KEEP);
        for (int k = 0; k < REGIONS; k++) {
            mt__trace_region_begin(&l, t, "forward");
            t += 1e-6;
            mt__trace_region_end(&l, t);
        }
        mt__trace_step_end(&l, t += 1e-6);
        const mt_trace_track tr = mt__trace_list_track(&l, 0, t);
        const int want = s < KEEP ? s : KEEP;
        MT_CHECK(tr.n == want * (REGIONS + 1), "step %d: %d events kept, want %d", s, tr.n,
                 want * (REGIONS + 1));
        for (int j = 0; j < want; j++) {
            const mt_trace_event *e = &tr.events[j * (REGIONS + 1)];
            char name[32];
            snprintf(name, sizeof name, "step %d", s - want + 1 + j);
            MT_CHECK(e->kind == MT_TRACE_STEP && strcmp(e->name, name) == 0,
                     "step %d: event %d is '%s', want '%s'", s, j * (REGIONS + 1), e->name, name);
        }
        MT_CHECK(tr.open == -1, "step %d: no region open", s);
        MT_CHECK(l.cap <= 8 * KEEP * (REGIONS + 1), "step %d: the list holds room for %d events "
                 "to keep %d", s, l.cap, KEEP * (REGIONS + 1));
    }
    mt__trace_list_free(&l);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
