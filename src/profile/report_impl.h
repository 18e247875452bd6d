/*
 * report_impl.h — the fields of mt_report (include/meshtrain/report.h): the
 * events read from a trace (report_read.c), and the tables computed from them
 * (report_analyse.c) that report_write.c prints.
 */
#ifndef MT_PROFILE_REPORT_IMPL_H
#define MT_PROFILE_REPORT_IMPL_H

#include "meshtrain/report.h"

enum { MT__REPORT_NAME = 64, MT__REPORT_MAX_FIXES = 3 };

/* What the reader accepts (report_read.c): device ids below 2^20 (a mesh's
 * limit), the writer's comm lanes 1..63 (tids 100000 + 64 device + lane),
 * times and durations up to 1e15 µs (31 years), FLOPs and bytes per event up
 * to 1e21, sequence numbers up to 2^53 (exact in a double). */
#define MT__REPORT_MAX_DEVICE (1 << 20)
#define MT__REPORT_MAX_LANE   63
#define MT__REPORT_LANE_TID   100000L
#define MT__REPORT_MAX_TID    (MT__REPORT_LANE_TID + 64L * MT__REPORT_MAX_DEVICE)
#define MT__REPORT_MAX_US     1e15
#define MT__REPORT_MAX_COUNT  1e21
#define MT__REPORT_MAX_SEQ    9007199254740992.0

typedef enum { MT__EV_OP, MT__EV_COMPUTE, MT__EV_COMM, MT__EV_IDLE, MT__EV_STEP, MT__EV_OTHER } mt__ev_cat;

/* One "X" event. `device` is the track's device; `lane` is 0 on the device's
 * own track and K on its comm lane K. */
typedef struct {
    char       name[MT__REPORT_NAME];
    mt__ev_cat cat;
    long       tid;
    long       line;              /* its line in the file, for messages */
    int        step;              /* a "step N" span's N (cat step), else -1 */
    int        device, lane;      /* from tid and the thread names, after reading */
    int        dix;               /* the index of its device in mt_report.devs (analysis) */
    double     ts, dur;           /* µs */
    double     flops, bytes;      /* op spans' args (0 when absent) */
    long       seq;               /* a collective's sequence number ("seq"), -1 none */
    double     arrival;           /* a collective's: the latest start of the same (seq,
                                     name) over the devices, its start when alone (analysis) */
    double     sync;              /* of a comm span or wait region on a device's own
                                     track: how much of it waited for other devices */
} mt__report_ev;

/* A tid's name from the thread_name metadata. */
typedef struct {
    long tid;
    int  device, lane;
} mt__report_track;

struct mt_report {
    mt__report_ev    *ev;
    int               n_ev, cap_ev;
    mt__report_track *tracks;
    int               n_tracks, cap_tracks;
    double            traced_model_flops;   /* the trace's "model" metadata (0: none) */
    bool              model_flops_traced;   /* the analysis took model_flops from it */
    char              traced_isa[16];       /* the "cpu_isa" metadata's level ("": none) */
    mt_report_machine machine;
    mt_report_op     *ops;
    int               n_ops;
    mt_report_device *devs;
    int               n_devs;
    mt_report_step   *steps;
    int               n_steps;
    mt_report_fix     fixes[MT__REPORT_MAX_FIXES];
    int               n_fixes;
    double            total_wall_us;   /* Σ steps' wall */
    mt_report_run     run;             /* from a metrics log (mt_report_set_run) */
    bool              has_run;
};

/* ======================================================================== */
/* The metrics log and the pictures (report_metrics.c, report_svg*.c)        */
/* ======================================================================== */

/* One line of a metrics log; NaN for a key absent or null. */
typedef struct {
    int    step;
    double loss, val_loss, tokens_per_s, ms;
    double maxvio, moe_aux, moe_dropped;   /* a mixture's balance (NaN: none) */
} mt__report_metric;

struct mt_report_metrics {
    mt__report_metric *v;
    int                n, cap;
    mt_report_run      run;
};

/* The run section of the text report and the "run" object of the JSON
 * (report_write.c); nothing without a run. */
void mt__report_write_run_text(const mt_report *r, FILE *f);
void mt__report_write_run_json(const mt_report *r, FILE *f);

/* SVG pieces the pictures share (report_svg.c). */
void mt__svg_open(FILE *f, int width, int height);   /* <svg ...> and the white background */
void mt__svg_text(FILE *f, const char *s);           /* s with & < > " escaped */
/* Tick spacing of 1, 2 or 5 · 10^k giving about `want` ticks over [lo, hi]. */
double mt__svg_nice_step(double lo, double hi, int want);
/* A text's width in px at `font` px (DejaVu Sans, an estimate on the wide side). */
double mt__svg_text_width(const char *s, double font);

/* Fills r->fixes from the tables (report_fixes.c). */
void mt__report_fixes(mt_report *r);

/* true for an op kind that is a collective (communication-bound). */
bool mt__report_is_collective(const char *kind);

#endif /* MT_PROFILE_REPORT_IMPL_H */
