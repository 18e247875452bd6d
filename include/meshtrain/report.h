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
 *   exposed = |waits|.
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
 * memory-bound; collectives (psum, all_gather, ppermute, ...) are
 * communication-bound whatever their numbers.
 */
#ifndef MESHTRAIN_REPORT_H
#define MESHTRAIN_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "meshtrain/base.h"

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

/* Reads the trace at `path` into *out (free with mt_report_free). MT_EIO when
 * it cannot be opened; MT_EINVAL for a truncated or malformed trace, the
 * message naming the line, the byte offset and what was expected there. */
mt_status mt_report_read(const char *path, mt_report **out);

/* Computes the tables from the events read, with the machine's figures
 * (NULL: all unknown). May be called again with other figures. MT_EINVAL when
 * the trace has no device track or no step; MT_ENOMEM. */
mt_status mt_report_analyse(mt_report *r, const mt_report_machine *machine);

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

/* Frees a report; NULL is allowed. */
void mt_report_free(mt_report *r);

#ifdef __cplusplus
}
#endif

#endif /* MESHTRAIN_REPORT_H */
