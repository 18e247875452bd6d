/*
 * simulate_shared.c — a schedule's ops timed on devices that time-share a
 * host's cores (mt_schedule_simulate_shared, meshtrain/pipeline.h).
 *
 * `replicas` copies of the schedule run side by side (the devices of the
 * mesh's other axes: each copy's device d in the same state as the
 * others'), on a host that runs `slots` devices at full speed at once (its
 * cores over a device's kernel threads). While `a` devices of one copy have
 * an op under way, replicas x a devices compute, and each works at
 * min(1, slots / (replicas x a)) of its full speed: processor sharing, the
 * scheduler dividing the cores among the runnable devices and a device
 * waiting for a message (the threads transport sleeps there, comm/wait.c)
 * leaving its share to the others. Costs are at full speed; a message's
 * comm delays its arrival and takes no core.
 *
 * The run is event by event: an op starts when its inputs have arrived and
 * its device is free; between two events (an op's end, a message's
 * arrival) the rate is constant, so each running op's remaining work falls
 * linearly.
 */
#include "pipeline/pipeline_impl.h"

#include <math.h>
#include <stdlib.h>

/* When an op's inputs are all in: the latest dependency's end plus the
 * message's comm from another device; -1 while one is not done. */
static double arrival(const mt_schedule *s, const mt__sched_index *ix, const mt__costs *costs,
                      char *const *done, double *const *end, int d, mt_pipe_op op) {
    mt__sched_dep dep[2];
    int n = mt__sched_deps(s, ix, op, dep);
    double t = 0;
    for (int k = 0; k < n; k++) {
        if (!done[dep[k].device][dep[k].pos]) return -1;
        double at = end[dep[k].device][dep[k].pos] +
                    (dep[k].device != d ? mt__comm_cost(costs, op) : 0.0);
        if (at > t) t = at;
    }
    return t;
}

mt_status mt__sched_drain_shared(const mt_schedule *s, const mt__sched_index *ix,
                                 const mt__costs *costs, int replicas, double slots,
                                 double **start, double **end) {
    const int p = s->p;
    size_t np = p > 0 ? (size_t)p : 1;
    int *head = calloc(np, sizeof *head);
    bool *running = calloc(np, sizeof *running);
    double *left = calloc(np, sizeof *left), *scale = calloc(np, sizeof *scale);
    char **done = calloc(np, sizeof *done);
    bool ok = head && running && left && scale && done;
    for (int d = 0; d < p && ok; d++) ok = (done[d] = calloc((size_t)s->n_ops[d] + 1, 1)) != NULL;
    mt_status st = ok ? MT_OK : mt_fail(MT_ENOMEM, "out of memory simulating %d devices", p);
    int remaining = 0;
    for (int d = 0; d < p; d++) remaining += s->n_ops[d];
    for (double t = 0; st == MT_OK && remaining > 0;) {
        /* start every op whose inputs are in and whose device is free */
        double next = INFINITY;   /* the next arrival still to come */
        int a = 0;
        for (int d = 0; d < p; d++) {
            if (!running[d] && head[d] < s->n_ops[d]) {
                mt_pipe_op op = s->ops[d][head[d]];
                double at = arrival(s, ix, costs, done, end, d, op);
                if (at >= 0 && at <= t) {
                    running[d] = true;
                    start[d][head[d]] = t;
                    left[d] = mt__op_cost(s, costs, op);
                    scale[d] = left[d] > 1 ? left[d] : 1;
                } else if (at > t && at < next) {
                    next = at;
                }
            }
            a += running[d];
        }
        if (a == 0) {
            /* nothing under way: a valid schedule has a message in flight */
            if (!isfinite(next)) {
                st = mt_fail(MT_EINVAL, "simulating a schedule on shared cores: no op can "
                             "start at %g and none is running; validate the schedule first", t);
                break;
            }
            t = next;
            continue;
        }
        const double share = slots / ((double)replicas * a);
        const double rate = share < 1 ? share : 1;
        double dt = next - t;
        for (int d = 0; d < p; d++)
            if (running[d] && left[d] / rate < dt) dt = left[d] / rate;
        t += dt;
        for (int d = 0; d < p; d++) {
            if (!running[d]) continue;
            left[d] -= dt * rate;
            if (left[d] > 1e-12 * scale[d]) continue;
            end[d][head[d]] = t;
            done[d][head[d]++] = 1;
            running[d] = false;
            remaining--;
        }
    }
    if (done)
        for (int d = 0; d < p; d++) free(done[d]);
    free(done);
    free(head);
    free(running);
    free(left);
    free(scale);
    return st;
}
