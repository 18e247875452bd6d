/*
 * trace_run.c — timelines that outlive a launch: a training run is one
 * launch per step, and its trace holds every step (or the last K). The run
 * keeps one timeline per device between launches; a launch's ctx takes its
 * device's at set-up, records into it as into its own, and gives it back
 * when freed. Times count from the first launch's start, so the steps follow
 * one another on one clock (under MPI each rank's first launch starts on the
 * ranks' common set-up, which lines the ranks up as in one launch).
 */
#include "comm/runtime_impl.h"

#include <stdlib.h>

struct mt_trace_run {
    int            n_devices;
    int            keep_steps;   /* 0: all */
    bool           started;      /* t0 is set */
    double         t0;           /* mt_time_now() at the first launch */
    mt_trace_list *lists;        /* (n_devices) */
};

mt_status mt_trace_run_create(int n_devices, int keep_steps, mt_trace_run **out) {
    *out = NULL;
    if (n_devices < 1) return mt_fail(MT_EINVAL, "a trace run needs a device (got %d)", n_devices);
    mt_trace_run *r = calloc(1, sizeof *r);
    if (r) r->lists = calloc((size_t)n_devices, sizeof *r->lists);
    if (!r || !r->lists) {
        free(r);
        return mt_fail(MT_ENOMEM, "out of memory for the trace of %d devices", n_devices);
    }
    r->n_devices = n_devices;
    r->keep_steps = keep_steps > 0 ? keep_steps : 0;
    for (int i = 0; i < n_devices; i++) r->lists[i].open = r->lists[i].step = -1;
    *out = r;
    return MT_OK;
}

void mt_trace_run_free(mt_trace_run *r) {
    if (!r) return;
    for (int i = 0; i < r->n_devices; i++) mt__trace_list_free(&r->lists[i]);
    free(r->lists);
    free(r);
}

int mt__trace_run_keep(const mt_trace_run *r) { return r ? r->keep_steps : 0; }

bool mt__trace_run_take(mt_launch_state *ls, mt_ctx *ctx) {
    mt_trace_run *r = ls->trace_run;
    if (!r->started) {
        r->t0 = ls->t_start;
        r->started = true;
    }
    ctx->t_start = r->t0;
    if (ctx->device >= r->n_devices) return mt__trace_list_init(&ctx->trace, 256);
    mt_trace_list *l = &r->lists[ctx->device];
    if (!l->events && !mt__trace_list_init(l, 256)) return false;
    ctx->trace = *l;
    ctx->trace.open = ctx->trace.step = -1;   /* what a launch left open ended with it */
    l->events = NULL;
    l->n = l->cap = l->first = 0;
    return true;
}

void mt__trace_run_give_back(mt_launch_state *ls, mt_ctx *ctx) {
    mt_trace_run *r = ls->trace_run;
    if (ctx->device >= r->n_devices || !ctx->trace.events) return;
    mt__trace_list_free(&r->lists[ctx->device]);
    r->lists[ctx->device] = ctx->trace;
    ctx->trace.events = NULL;
    ctx->trace.n = ctx->trace.cap = ctx->trace.first = 0;
}
