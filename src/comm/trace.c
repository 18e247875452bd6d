/*
 * trace.c — the trace of a launch, as far as it needs devices and
 * collectives: compute regions (mt_trace_begin/end) on the calling device's
 * timeline, and at the end of a launch the tracks of every device handed to
 * the profile layer's Chrome trace writer (src/profile/trace.c, which owns
 * the events, the timeline and the file format). The collectives add their
 * own spans (record.c); the graph's nodes and a trainer's steps theirs
 * (mt_trace_op_begin/end, mt_trace_step_begin/end). With a trace run
 * (trace_run.c) the timelines go on across launches.
 *
 * Under MPI every rank holds only its own device's events. mt__trace_write
 * gathers them with the launch's own transport (an all_gather over every
 * mesh axis: no MPI code here, and it works across machines), and rank 0
 * writes the file. If the launch failed (a gather could hang or abort), or
 * the gather itself fails, each rank writes its own events to "<path>.<rank>"
 * instead, which is a valid trace on its own. When rank 0 cannot write the
 * file, that is the error (naming the path); mpi_launch.c then makes every
 * rank return the same trace status.
 */
#include "comm/runtime_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Regions                                                                   */
/* ======================================================================== */

static bool tracing(const mt_ctx *ctx) {
    return ctx && ctx->trace.events;
}

bool mt_trace_on(const mt_ctx *ctx) { return tracing(ctx); }

void mt_trace_begin(mt_ctx *ctx, const char *name) {
    if (!tracing(ctx)) return;
    mt__trace_region_begin(&ctx->trace, mt_time_now() - ctx->t_start, name);
}

void mt_trace_end(mt_ctx *ctx) {
    if (!tracing(ctx) || ctx->trace.open < 0) return;
    mt__trace_region_end(&ctx->trace, mt_time_now() - ctx->t_start);
}

/* ======================================================================== */
/* Steps and ops                                                             */
/* ======================================================================== */

void mt_trace_step_begin(mt_ctx *ctx, int step) {
    if (!tracing(ctx)) return;
    mt__trace_step_begin(&ctx->trace, mt_time_now() - ctx->t_start, step,
                         mt__trace_run_keep(ctx->launch->trace_run));
}

void mt_trace_step_end(mt_ctx *ctx) {
    if (tracing(ctx)) mt__trace_step_end(&ctx->trace, mt_time_now() - ctx->t_start);
}

/* The span is pushed when the op begins, so that events stay in the order
 * they began; its index survives the timeline growing under the op (a
 * collective's own span). */
int mt_trace_op_begin(mt_ctx *ctx) {
    if (!tracing(ctx)) return -1;
    mt_trace_event *e = mt__trace_push(&ctx->trace);
    if (!e) return -1;
    e->kind = MT_TRACE_OP;
    e->t0 = e->t1 = mt_time_now() - ctx->t_start;
    return ctx->trace.n - 1;
}

void mt_trace_op_end(mt_ctx *ctx, int span, const char *op, char phase, int layer, double flops,
                     double bytes, const char *out) {
    if (span < 0 || !tracing(ctx) || span >= ctx->trace.n) return;
    mt_trace_event *e = &ctx->trace.events[span];
    e->t1 = mt_time_now() - ctx->t_start;
    mt__trace_copy_name(e->name, sizeof e->name, op);
    mt__trace_copy_name(e->out, sizeof e->out, out ? out : "");
    e->phase = phase;
    e->layer = (int16_t)(layer >= 0 && layer < INT16_MAX ? layer : -1);
    e->flops = flops;
    e->bytes = bytes > 0 ? (uint64_t)bytes : 0;
}

/* ======================================================================== */
/* Writing                                                                   */
/* ======================================================================== */

/* The writer's view of a local ctx (its events stay where they are). */
static mt_trace_track local_track(mt_ctx *ctx) {
    return mt__trace_list_track(&ctx->trace, ctx->device, mt_time_now() - ctx->t_start);
}

/* Writes the tracks of ctxs[n] to `path` through `claim` (NULL: a claim of
 * the writer's own; model_flops: the launch's). */
static mt_status write_local(mt_output *claim, const char *path, mt_ctx **ctxs, int n,
                             double model_flops) {
    mt_trace_track *tracks = calloc((size_t)n, sizeof *tracks);
    if (!tracks) return mt_fail(MT_ENOMEM, "cannot allocate the trace of %d devices", n);
    for (int i = 0; i < n; i++) tracks[i] = local_track(ctxs[i]);
    mt_status s = mt__trace_write_json(claim, path, tracks, n, model_flops);
    free(tracks);
    return s;
}

/* Every axis of the mesh in mesh order: the group of all devices, whose rank
 * order is the device id order. */
static mt_axes all_axes(const mt_mesh *mesh) {
    mt_axes a;
    memset(&a, 0, sizeof a);
    a.n = mt_mesh_ndim(mesh);
    for (int i = 0; i < a.n; i++) a.axis[i] = (uint8_t)i;
    return a;
}

/* The event record travels as int32 words through the transport. */
_Static_assert(sizeof(mt_trace_event) % 4 == 0, "trace events travel as int32 words");
#define EVENT_WORDS (sizeof(mt_trace_event) / 4)

/* MPI, one device per rank: all_gather every rank's events, rank 0 writes.
 * Every rank must call this (the gathers are collectives). *gathered says
 * whether the events arrived: a failure after that is rank 0's write, which
 * per-rank files would not help (the same directory). */
static mt_status gather_and_write(mt_launch_state *ls, mt_ctx *ctx, bool *gathered) {
    const mt_mesh *mesh = ls->mesh;
    const mt_axes all = all_axes(mesh);
    const int P = mt_mesh_size(mesh);
    mt_trace_track mine = local_track(ctx);
    /* copy first: the gathers below are collectives that record.c records,
     * which may grow (move) the ctx's events */
    int32_t n_mine = mine.n, open_mine = mine.open;
    int32_t *counts = calloc((size_t)P * 2, sizeof *counts);
    mt_trace_event *send = malloc(((size_t)n_mine + 1) * sizeof *send);
    mt_trace_event *all_ev = NULL;
    mt_trace_track *tracks = calloc((size_t)P, sizeof *tracks);
    mt_status s = MT_OK;
    if (!counts || !send || !tracks) {
        s = mt_fail(MT_ENOMEM, "cannot allocate the trace of %d devices", P);
        goto done;
    }
    if (n_mine) memcpy(send, mine.events, (size_t)n_mine * sizeof *send);
    int32_t head[2] = {n_mine, open_mine};
    s = mt_all_gather(ctx, all, head, counts, 2, MT_I32);
    if (s != MT_OK) goto done;
    int32_t max_n = 0;
    for (int r = 0; r < P; r++)
        if (counts[2 * r] > max_n) max_n = counts[2 * r];
    /* equal sizes for the gather: pad every rank to the longest track */
    mt_trace_event *padded = realloc(send, ((size_t)max_n + 1) * sizeof *send);
    if (!padded) { s = mt_fail(MT_ENOMEM, "cannot allocate %d trace events", max_n); goto done; }
    send = padded;
    if (max_n > n_mine) memset(send + n_mine, 0, (size_t)(max_n - n_mine) * sizeof *send);
    all_ev = malloc(((size_t)max_n * (size_t)P + 1) * sizeof *all_ev);
    if (!all_ev) { s = mt_fail(MT_ENOMEM, "cannot allocate %d trace events", max_n * P); goto done; }
    s = mt_all_gather(ctx, all, send, all_ev, (size_t)max_n * EVENT_WORDS, MT_I32);
    if (s != MT_OK) goto done;
    *gathered = true;
    if (ls->process_rank == 0) {
        for (int r = 0; r < P; r++) {
            tracks[r].device = r;
            tracks[r].events = all_ev + (size_t)r * (size_t)max_n;
            tracks[r].n = counts[2 * r];
            tracks[r].open = counts[2 * r + 1];
            tracks[r].t_end = mine.t_end;   /* rank clocks differ; near enough for an open region */
        }
        s = mt__trace_write_json(ls->trace_out, ls->trace_path, tracks, P, ls->trace_model_flops);
    }
done:
    free(tracks);
    free(all_ev);
    free(send);
    free(counts);
    return s;
}

mt_status mt__trace_write(mt_launch_state *ls, mt_ctx **ctxs, int n) {
    if (!ls || !ls->trace_path) return MT_OK;
    if (n <= 0 || !ctxs) return MT_OK;
    /* one process holds every device: write them all */
    if (ls->process_size <= 1)
        return write_local(ls->trace_out, ls->trace_path, ctxs, n, ls->trace_model_flops);
    if (n == 1 && !atomic_load(&ls->abort)) {
        bool gathered = false;
        mt_status s = gather_and_write(ls, ctxs[0], &gathered);
        if (s == MT_OK || gathered) return s;
        /* the gather failed: keep at least this rank's timeline */
    }
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", ls->trace_path, ls->process_rank);
    return write_local(NULL, path, ctxs, n, ls->trace_model_flops);
}
