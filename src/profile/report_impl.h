/*
 * report_impl.h — the fields of mt_report (include/meshtrain/report.h): the
 * events read from a trace (report_read.c), and the tables computed from them
 * (report_analyse.c) that report_write.c prints.
 */
#ifndef MT_PROFILE_REPORT_IMPL_H
#define MT_PROFILE_REPORT_IMPL_H

#include "meshtrain/report.h"

enum { MT__REPORT_NAME = 64, MT__REPORT_MAX_FIXES = 3 };

typedef enum { MT__EV_OP, MT__EV_COMPUTE, MT__EV_COMM, MT__EV_IDLE, MT__EV_STEP, MT__EV_OTHER } mt__ev_cat;

/* One "X" event. `device` is the track's device; `lane` is 0 on the device's
 * own track and K on its comm lane K. */
typedef struct {
    char       name[MT__REPORT_NAME];
    mt__ev_cat cat;
    long       tid;
    int        device, lane;      /* from tid and the thread names, after reading */
    double     ts, dur;           /* µs */
    double     flops, bytes;      /* op spans' args (0 when absent) */
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
};

/* Fills r->fixes from the tables (report_fixes.c). */
void mt__report_fixes(mt_report *r);

/* true for an op kind that is a collective (communication-bound). */
bool mt__report_is_collective(const char *kind);

#endif /* MT_PROFILE_REPORT_IMPL_H */
