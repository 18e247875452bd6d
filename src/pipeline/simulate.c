/*
 * simulate.c — a schedule run on a model of the devices: each op's start
 * and end, each device's busy time, span and peak activations, and the
 * bubble measures (conventions in meshtrain/pipeline.h).
 */
#include "pipeline/pipeline_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

mt_pipe_costs mt_pipe_costs_default(void) {
    return (mt_pipe_costs){.f = 1.0, .b = 1.0, .w = 1.0, .comm = 0.0};
}

/* Costs are relative times. Above this one the simulation's sums could
 * overflow to inf (1e308 each made a makespan of inf, a bubble of NaN and
 * an SVG axis of endless ticks); a schedule's ops number far below 1e6,
 * so sums of costs up to 1e12 stay finite and exact to double rounding. */
#define MAX_COST 1e12

mt_status mt_pipe_costs_check(const mt_pipe_costs *c, double w_memory) {
    if (!c) return mt_fail(MT_EINVAL, "mt_pipe_costs_check: no costs given");
    if (!isfinite(c->f) || !isfinite(c->b) || !isfinite(c->w) || !isfinite(c->comm) ||
        !(c->f > 0) || !(c->b > 0) || !(c->w >= 0) || !(c->comm >= 0))
        return mt_fail(MT_EINVAL, "op costs F=%g B=%g W=%g COMM=%g: F and B must be > 0, W "
                       "and COMM >= 0, all finite", c->f, c->b, c->w, c->comm);
    if (c->f > MAX_COST || c->b > MAX_COST || c->w > MAX_COST || c->comm > MAX_COST)
        return mt_fail(MT_EINVAL, "op costs F=%g B=%g W=%g COMM=%g: each is at most %g; they "
                       "are relative times, so scale them down together", c->f, c->b, c->w,
                       c->comm, MAX_COST);
    if (!(w_memory >= 0 && w_memory <= 1))
        return mt_fail(MT_EINVAL, "w_memory %g is the share of a chunk's activations a B "
                       "keeps until its W: it must be in [0, 1]", w_memory);
    return MT_OK;
}

void mt_pipe_sim_free(mt_pipe_sim *sim) {
    if (sim->start)
        for (int d = 0; d < sim->stages; d++) free(sim->start[d]);
    free(sim->start);
    free(sim->end);   /* end[d] points into start[d]'s block */
    free(sim->busy);
    memset(sim, 0, sizeof *sim);
}

/* busy, span, peak per device; start[d] holds 2·n_ops doubles, the second
 * half being end[d] */
static mt_status alloc_sim(const mt_schedule *s, mt_pipe_sim *out) {
    int p = s->p;
    memset(out, 0, sizeof *out);
    out->stages = p;
    out->busy = calloc((size_t)3 * p, sizeof(double));
    out->start = calloc((size_t)p, sizeof(double *));
    out->end = calloc((size_t)p, sizeof(double *));
    bool ok = out->busy && out->start && out->end;
    for (int d = 0; d < p && ok; d++) {
        out->start[d] = calloc(2 * (size_t)s->n_ops[d] + 1, sizeof(double));
        ok = out->start[d] != NULL;
        if (ok) out->end[d] = out->start[d] + s->n_ops[d];
    }
    if (!ok) {
        mt_pipe_sim_free(out);
        return mt_fail(MT_ENOMEM, "out of memory for the simulation of %d devices", p);
    }
    out->span = out->busy + p;
    out->peak_activations = out->busy + 2 * p;
    return MT_OK;
}

/* With slots < replicas x p, on time-shared cores (simulate_shared.c): a
 * device's busy time is its ops' wall time, each as long as the sharing
 * made it. */
static mt_status simulate(const mt_schedule *s, const mt__costs *k, double w_memory,
                          int replicas, double slots, mt_pipe_sim *out) {
    const bool shared = slots < (double)replicas * s->p;
    mt__sched_index ix;
    mt_status st;
    st = mt__sched_index_build(s, &ix);
    if (st != MT_OK) return st;
    st = alloc_sim(s, out);
    if (st == MT_OK) st = mt__sched_drain(s, &ix, shared ? NULL : k, out->start, out->end);
    if (st == MT_OK && shared)
        st = mt__sched_drain_shared(s, &ix, k, replicas, slots, out->start, out->end);
    mt__sched_index_free(&ix);
    if (st != MT_OK) {
        mt_pipe_sim_free(out);
        return st;
    }
    int p = s->p;
    double max_span = 0, max_busy = 0, idle = 0;
    for (int d = 0; d < p; d++) {
        int n = s->n_ops[d];
        for (int i = 0; i < n; i++) {
            out->busy[d] += shared ? out->end[d][i] - out->start[d][i]
                                   : mt__op_cost(s, k, s->ops[d][i]);
            if (out->end[d][i] > out->makespan) out->makespan = out->end[d][i];
        }
        out->span[d] = n ? out->end[d][n - 1] - out->start[d][0] : 0;
        if (out->span[d] > max_span) max_span = out->span[d];
        if (out->busy[d] > max_busy) max_busy = out->busy[d];
    }
    for (int d = 0; d < p; d++) idle += out->makespan - out->busy[d];
    out->bubble_fraction = out->makespan > 0 ? idle / p / out->makespan : 0;
    out->bubble = max_span - max_busy;
    out->bubble_rate = max_span > 0 ? out->bubble / max_span : 0;
    mt__sched_peaks(s, w_memory, out->peak_activations);
    return MT_OK;
}

mt_status mt_schedule_simulate(const mt_schedule *s, const mt_pipe_costs *costs,
                               double w_memory, mt_pipe_sim *out) {
    memset(out, 0, sizeof *out);
    mt_pipe_costs c = costs ? *costs : mt_pipe_costs_default();
    mt_status st = mt_pipe_costs_check(&c, w_memory);
    if (st != MT_OK) return st;
    const mt__costs k = {&c, false};
    return simulate(s, &k, w_memory, 1, INFINITY, out);
}

/* mt_schedule_simulate_chunks's checks and run, on `slots` for `replicas`. */
static mt_status simulate_chunks(const mt_schedule *s, const mt_pipe_costs *chunk_costs,
                                 double w_memory, int replicas, double slots, mt_pipe_sim *out) {
    memset(out, 0, sizeof *out);
    if (!chunk_costs) return mt_fail(MT_EINVAL, "simulating a schedule needs the chunks' costs");
    for (int k = 0; k < s->p * s->v; k++) {
        mt_status st = mt_pipe_costs_check(&chunk_costs[k], w_memory);
        if (st != MT_OK) return mt_fail_wrap(st, "chunk %d", k);
    }
    const mt__costs k = {chunk_costs, true};
    return simulate(s, &k, w_memory, replicas, slots, out);
}

mt_status mt_schedule_simulate_chunks(const mt_schedule *s, const mt_pipe_costs *chunk_costs,
                                      double w_memory, mt_pipe_sim *out) {
    return simulate_chunks(s, chunk_costs, w_memory, 1, INFINITY, out);
}

mt_status mt_schedule_simulate_shared(const mt_schedule *s, const mt_pipe_costs *chunk_costs,
                                      double w_memory, int replicas, double slots,
                                      mt_pipe_sim *out) {
    memset(out, 0, sizeof *out);
    if (replicas < 1 || !(slots > 0) || !isfinite(slots))
        return mt_fail(MT_EINVAL, "mt_schedule_simulate_shared: %d replicas on %g slots; give "
                       "1 or more replicas of the schedule and a finite number of slots > 0 "
                       "(the devices the host runs at full speed at once)", replicas, slots);
    return simulate_chunks(s, chunk_costs, w_memory, replicas, slots, out);
}
