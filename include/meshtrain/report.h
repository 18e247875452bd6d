/*
 * report.h — `meshtrain report`: reads a training trace (the Chrome trace that
 * `meshtrain train --trace FILE` writes, src/profile/trace.c) and says where
 * the time went: per op kind against the roofline, per device, per step, and
 * the three things most worth fixing.
 *
 * The trace is read strictly, as the writer writes it: a first line
 * `{"traceEvents":[`, one event object per line (each but the last followed
 * by a comma), and a last line `],"displayTimeUnit":"ms"}`. Device N's track
 * is tid N ("device N" in thread_name metadata); its asynchronous comm lanes
 * are tids named "device N comm K".
 *
 * Definitions (times in µs, over the whole trace, per device):
 *   waits   = the union of the comm spans on the device's own track (a
 *             blocking collective, send or recv) and its "wait: ..." compute
 *             regions: time the device's compute stood still for communication.
 *   busy    = |union(op spans, compute regions other than "wait: ...") − waits|.
 *   idle    = the sum of its "idle" spans.
 *   sync    = the part of waits spent before the other devices arrived: a
 *             collective's arrival is the latest start of its (seq, name)
 *             over the devices (on a mesh of several axes, over every group
 *             that ran that step of the SPMD program); a blocking one's span
 *             is sync up to its arrival; a "wait: ..." region is sync up to
 *             the latest arrival of the asynchronous collectives that end
 *             inside it. Sends and receives are not matched (no sync). It is
 *             load imbalance, not communication.
 *   exposed = |waits| − sync: communication the device waited for.
 *   hidden  = |union(the spans on its comm lanes) ∩ (busy time)|: asynchronous
 *             communication that ran while the device computed.
 * The hidden share is hidden / (hidden + exposed).
 * Per step N (the "step N" spans of the device tracks): wall = the longest;
 * flops = the op spans' FLOPs that start inside a device's step N; MFU =
 * model_flops / (wall · peak · devices); HFU = flops / (wall · peak ·
 * devices): both over the peak of all the trace's devices together. The
 * bubble, for pipelines (phase regions named "... mb J chunk K"), is
 * (max span − max busy) / max span over devices, a device's span running
 * from its first phase region's start to its last's end and its busy being
 * the sum of those regions (as src/train/pipe.c and bench/bench_pipe.c).
 * Per op kind: intensity = flops / bytes; bound = min(peak, intensity ·
 * bandwidth); compute-bound when intensity · bandwidth >= peak, else
 * memory-bound; a kind without FLOPs that moves bytes (a copy, a lookup) is
 * memory-bound, of_bound its GB/s over the bandwidth (bound_gflops NaN);
 * collectives (psum, all_gather, ppermute, ...) are communication-bound
 * whatever their numbers.
 */
#ifndef MESHTRAIN_REPORT_H
#define MESHTRAIN_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "meshtrain/base.h"
#include "meshtrain/profile.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_report mt_report;   /* opaque: src/profile/report_impl.h */

/* What the machine and the model are; 0 means unknown (the roofline columns,
 * MFU and HFU then print "-" and are NaN in the accessors). */
typedef struct {
    double peak_gflops;     /* peak FLOP/s of one device, in GFLOP/s */
    double bandwidth_gbs;   /* memory bandwidth of one device, in GB/s */
    double model_flops;     /* the model's FLOPs per step (all devices together); 0:
                               the trace's own figure (the "model" metadata event
                               that `train --trace` writes: 6N + attention for GPT) */
    char   peak_source[128];   /* where peak_gflops came from, for the text and the
                                  JSON ("avx2 FMA peak, the run's kernel level");
                                  "" for a figure given as such */
} mt_report_machine;

typedef enum { MT_BOUND_UNKNOWN, MT_BOUND_COMPUTE, MT_BOUND_MEMORY, MT_BOUND_COMM } mt_report_bound;

/* One op kind over the whole trace. Rates are NaN where undefined. */
typedef struct {
    char   kind[32];
    long   count;
    double time_us, share;           /* share: of all op time */
    double flops, bytes;
    double gflops, gbs, intensity;   /* achieved; flops / bytes */
    double bound_gflops, of_bound;   /* roofline bound; achieved / bound */
    mt_report_bound bound;
} mt_report_op;

/* One device over the whole trace (definitions above). */
typedef struct {
    int    device;
    double busy_us, idle_us, exposed_us, hidden_us, async_us;   /* async: |union(lanes)| */
    double sync_us;   /* waiting for other devices to arrive at a collective */
} mt_report_device;

/* One step. `bubble` is NaN off a pipeline. */
typedef struct {
    int    step;
    double wall_us, flops, mfu, hfu, bubble;
} mt_report_step;

/* One thing to fix: a sentence with its figure, and the figure (a fraction). */
typedef struct {
    char   text[200];
    double figure;
} mt_report_fix;

/* Reads the trace at `path` into *out (free with mt_report_free), in time
 * O(n log n) for n events. The file is opened as every input is
 * (mt_input_open, files.h): MT_EIO when it is missing or unreadable, not a
 * regular file (a directory, a FIFO, a device: refused without blocking) or
 * over 4 GiB. MT_EFORMAT for an empty, truncated or malformed trace, the
 * message naming the file, the line, the byte offset and what was expected
 * there; and for a value the analysis cannot use, naming the file, the
 * line, the event and the field: "ts" not finite or beyond ±1e15 µs, "dur"
 * negative, not finite or above 1e15 µs, "tid" not a whole number from 0 to
 * 100000 + 64 · 2^20 ("pid" from 0 to INT_MAX), a thread name's device
 * outside 0 .. 2^20 - 1 or comm lane outside 1..63, "flops" or "bytes"
 * negative or above 1e21, "seq" not a whole number up to 2^53, a "step N"
 * span's N outside 0 .. INT_MAX, more than INT_MAX / 8 events, a device's
 * step named twice or starting before
 * its previous step ended (beyond the writer's 1 ns rounding). */
mt_status mt_report_read(const char *path, mt_report **out);

/* Computes the tables from the events read, with the machine's figures
 * (NULL: all unknown), in time O(n log n). May be called again with other
 * figures. MT_EFORMAT when the trace has no device track or no step;
 * MT_ENOMEM. */
mt_status mt_report_analyse(mt_report *r, const mt_report_machine *machine);

/* The kernel level the traced run's kernels ran at (mt_cpu_isa_name's
 * spelling, from the trace's "cpu_isa" metadata event), or "" for a trace
 * written before traces recorded it. */
const char *mt_report_cpu_isa(const mt_report *r);

/* Fills the figures of *out that are 0 (so that figures given otherwise win)
 * from the machine file `m` (`meshtrain bench machine`), for one of the
 * traced run's `n_devices` devices, which share the machine: each gets the
 * larger of the 1-thread figure and the all-cores figure over n_devices.
 *   peak:      the FMA peak of the run's kernel level (mt_report_cpu_isa)
 *              when the file has it ("fma_gflops_by_isa"); else, for a trace
 *              or a file from before kernel levels, Open BLAS sgemm's rate.
 *   bandwidth: STREAM triad.
 * out->peak_source says which peak, and why, when the peak came from here. */
void mt_report_machine_from_file(const mt_report *r, const mt_machine *m, int n_devices,
                                 mt_report_machine *out);

/* The tables of the last mt_report_analyse, owned by the report: op kinds by
 * time (most first), devices by number, steps by number, up to 3 fixes by
 * what they would save (most first). *n gets the count. */
const mt_report_op     *mt_report_ops(const mt_report *r, int *n);
const mt_report_device *mt_report_devices(const mt_report *r, int *n);
const mt_report_step   *mt_report_steps(const mt_report *r, int *n);
const mt_report_fix    *mt_report_fixes(const mt_report *r, int *n);

/* Prints the analysis as tables (text) or as one JSON object (json) to f. */
void mt_report_write_text(const mt_report *r, FILE *f);
void mt_report_write_json(const mt_report *r, FILE *f);

/* ======================================================================== */
/* The run's metrics and the pictures (report_metrics.c, report_svg*.c)      */
/* ======================================================================== */

/* The metrics log of `meshtrain train --metrics FILE` (src/cli/metrics.c):
 * one JSON object per line, {"step":N,"loss":X,...} with "val_loss" on eval
 * steps. Opaque: src/profile/report_impl.h. */
typedef struct mt_report_metrics mt_report_metrics;

/* A run's summary from its metrics. NaN where unknown (no val_loss line: the
 * val fields are NaN and their steps 0; no "tokens_per_s" or "ms" key: the
 * medians are NaN). A mixture of experts' lines (moe_maxvio, moe_aux,
 * moe_dropped: the trainer's balance metrics, docs/moe.md) give moe_steps,
 * the lines with a MaxVio, and the MoE fields (NaN without them; the drops
 * NaN without a capacity). */
typedef struct {
    int    steps;                        /* lines read */
    int    first_step, last_step;
    double first_loss, last_loss;        /* train loss of the first and the last line */
    double last_val_loss, best_val_loss; /* the last and the lowest "val_loss" */
    int    last_val_step, best_val_step;
    double median_tokens_per_s, median_ms;
    int    moe_steps;
    double last_maxvio, max_maxvio;      /* MaxVio of the last line, and the largest */
    double mean_moe_aux, mean_moe_dropped;   /* router losses; the share of pairs dropped */
} mt_report_run;

/* Reads the metrics log at `path` into *out (free with
 * mt_report_metrics_free). Each line must be a flat JSON object of finite
 * JSON numbers (null stands for a NaN, as the writer writes one; "nan",
 * "-inf" and hex are refused) with "step" and "loss". MT_EIO when the file
 * cannot be opened as an input (mt_input_open, files.h: missing, not a
 * regular file, over 1 GiB); MT_EFORMAT for an empty file or a line that is
 * not such an object, the message naming the file, the line and what was
 * wrong there. */
mt_status mt_report_metrics_read(const char *path, mt_report_metrics **out);

/* The summary of the metrics read, owned by m. */
const mt_report_run *mt_report_metrics_run(const mt_report_metrics *m);

/* Copies a run's summary into the report: from then on mt_report_write_text
 * ends with a "run" section and mt_report_write_json has a "run" object
 * (steps, first_loss, last_loss, last_val_loss, last_val_step, best_val_loss,
 * best_val_step, median_tokens_per_s, median_ms, and for a mixture of
 * experts moe_steps, last_maxvio, max_maxvio, mean_moe_aux,
 * mean_moe_dropped). NULL removes it. */
void mt_report_set_run(mt_report *r, const mt_report_run *run);

/* Frees metrics; NULL is allowed. */
void mt_report_metrics_free(mt_report_metrics *m);

/* The pictures, each one standalone SVG 1.1 document written to f (white
 * background, DejaVu Sans 12 px, nothing smaller than 11 px). They read the
 * tables of the last mt_report_analyse. MT_EIO when f fails.
 *
 * roofline.svg, 800 x 560 px: per op kind with flops and bytes (collectives
 * left out) one circle at (intensity, GFLOP/s), its area proportional to the
 * kind's share of the op time (radius 40 px · sqrt(share), at least 3 px),
 * filled by its bound (compute: blue, memory: orange, unknown: grey), with
 * the kind's name beside it and a <title> child "KIND: ...". The axes are
 * log10 and span whole decades: lo = floor(log10(min) - 0.1), hi =
 * ceil(log10(max) + 0.1), over the points' values and, when the roof is
 * known, the ridge (x) and the peak and the roof at the left edge (y). The
 * plot area runs from x = 90 to 770 and from y = 500 (bottom) up to 60, so a
 * point (I, G) sits at x = 90 + 680 (log10 I - lo_x) / (hi_x - lo_x), y = 500
 * - 440 (log10 G - lo_y) / (hi_y - lo_y). The roof min(peak, I · bandwidth)
 * is drawn with the ridge point (peak / bandwidth) marked; without a peak or
 * a bandwidth the title says the roof is unknown and how to give it. */
mt_status mt_report_write_svg_roofline(const mt_report *r, FILE *f);

/* timeline.svg: the step whose wall time is the median (the lower one of an
 * even count), named in the title with its wall ms. One 28 px row per device
 * (labelled "device N") and a 14 px row per comm lane under it ("comm K");
 * time runs from the earliest start to the latest end of the devices' spans
 * of that step, mapped linearly onto x = 110 .. 1170 (1200 px wide). Each
 * span is a <rect> of class "region" (compute regions), "op" (op spans, inset
 * in their row), "comm" (comm spans), "wait" ("wait: ..." regions) or "idle",
 * with a <title> of its name and duration; the legend shows one swatch of
 * the same class and fill per kind. Op names label boxes wide enough for
 * them. MT_EINVAL before mt_report_analyse found a step. */
mt_status mt_report_write_svg_timeline(const mt_report *r, FILE *f);

/* loss.svg, 800 x 480 px: the train loss per step as a <polyline
 * class="train"> (one point per line with a finite loss), the validation
 * loss as a <polyline class="val"> with one <circle class="val"> per eval
 * step, linear axes with ticks, labels and a legend. */
mt_status mt_report_write_svg_loss(const mt_report_metrics *m, FILE *f);

/* The report as one self-contained HTML5 page (UTF-8, no script, nothing
 * loaded from elsewhere), written to f: the things to fix first (<ol
 * id="fixes">), the roofline (<figure id="roofline">, the SVG above
 * inline), the ops, devices and steps as tables (<table id="ops">,
 * "devices", "steps": the text report's columns), the timeline (<figure
 * id="timeline">; a line saying why where the trace has no whole step),
 * with metrics (NULL: none) the run's table and the loss picture (id
 * "run", "loss"), and the text report itself (<pre id="text">). Reads the
 * tables of the last mt_report_analyse. MT_EINVAL for a NULL report or
 * file, MT_EIO when f fails. */
mt_status mt_report_write_html(const mt_report *r, const mt_report_metrics *m, FILE *f);

/* Frees a report; NULL is allowed. */
void mt_report_free(mt_report *r);

#ifdef __cplusplus
}
#endif

#endif /* MESHTRAIN_REPORT_H */
