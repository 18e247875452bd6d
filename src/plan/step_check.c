/*
 * step_check.c — the invariants of every planned step (step.h's comment),
 * checked where a step is made (mt__plan_step_chunks), so that no layout
 * the planner ranks comes to an impossible answer: a planner bug fails
 * loudly, MT_EINTERNAL naming the mesh and the numbers, instead of a plan
 * at 179 % MFU (issue 40).
 */
#include "plan/step.h"

#include <math.h>
#include <stdio.h>

/* Relative slack for sums of seconds taken in another order (the identity
 * adds the same parts as the streams did, in another order: a few ulps a
 * term; 1e-9 leaves room for thousands of terms). */
#define CHECK_REL 1e-9

static bool close_to(double a, double b) {
    double scale = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    return fabs(a - b) <= CHECK_REL * (scale > 0 ? scale : 1);
}

/* a <= b, up to the slack */
static bool at_most(double a, double b) {
    return a <= b + CHECK_REL * (fabs(b) > 0 ? fabs(b) : 1);
}

static mt_status broken(const mt__plan_step_in *in, const char *what) {
    return mt_fail(MT_EINTERNAL, "the step of mesh '%s' (%d stages, %d chunks a device, "
                   "%d microbatches) breaks an invariant: %s; this is a planner bug: report it "
                   "with the command", mt_mesh_spec(in->mesh), in->stages, in->chunks,
                   in->microbatches, what);
}

mt_status mt__plan_step_check(const mt__plan_step_in *in, const mt__plan_step_result *r) {
    char what[320];
    /* every part is seconds spent: none is negative or not a number */
    const struct { const char *name; double v; } part[] = {
        {"step", r->step}, {"compute", r->compute}, {"exposed communication", r->comm_exposed},
        {"bubble", r->bubble}, {"optimizer", r->optimizer}, {"floor", r->floor},
    };
    for (size_t i = 0; i < sizeof part / sizeof part[0]; i++)
        if (!(part[i].v >= 0) || !isfinite(part[i].v)) {
            snprintf(what, sizeof what, "its %s is %g s (seconds spent: finite, >= 0)",
                     part[i].name, part[i].v);
            return broken(in, what);
        }
    for (int k = 0; k < r->n_comm; k++)
        if (!(r->comm[k].exposed >= 0) || !at_most(r->comm[k].exposed, r->comm[k].seconds)) {
            snprintf(what, sizeof what, "%s exposes %g s of its own %g s (from 0 to all of it)",
                     r->comm[k].label, r->comm[k].exposed, r->comm[k].seconds);
            return broken(in, what);
        }
    /* the accounting identity */
    const double sum = r->compute + r->comm_exposed + r->bubble + r->optimizer;
    if (!close_to(sum, r->step)) {
        snprintf(what, sizeof what, "compute %.9g + exposed %.9g + bubble %.9g + optimizer "
                 "%.9g = %.9g s, not the step's %.9g s", r->compute, r->comm_exposed, r->bubble,
                 r->optimizer, sum, r->step);
        return broken(in, what);
    }
    /* no device beats its roofline */
    if (!at_most(r->floor, r->step)) {
        snprintf(what, sizeof what, "a step of %.6g s, faster than the %.6g s its busiest "
                 "device's FLOPs or bytes take at the chip's peaks", r->step, r->floor);
        return broken(in, what);
    }
    /* recomputation is in the FLOPs run, and less than all of them */
    if (!(r->flops_recompute >= 0) || !(r->flops_recompute < r->flops_run || r->flops_run == 0)) {
        snprintf(what, sizeof what, "%g recomputed FLOPs of %g run", r->flops_recompute,
                 r->flops_run);
        return broken(in, what);
    }
    /* 0 <= MFU <= HFU (NaN only without the model's facts: no MFU), and
     * HFU <= 1 wherever the model's count is no more than the FLOPs its
     * devices run for it. The count is a convention (the GPT's 6N counts
     * its position table, a lookup; causal attention's 6·L·H·Q·T the
     * pairs key <= query, about what the ops run): where it counts more
     * than runs, MFU and HFU may pass 1 at
     * a step the floor above still bounds (the FLOPs that run, at peak) */
    if (!(in->model.n_params > 0 || in->model.flops_per_token > 0) || !(r->step > 0))
        return MT_OK;
    const double devices = mt_mesh_size(in->mesh);
    const double counted = in->model.tokens * r->flops_per_token / devices;
    const double runs = (r->flops_run - r->flops_recompute) / in->stages;
    if (!(r->mfu >= 0 && at_most(r->mfu, r->hfu) && (counted > runs || at_most(r->hfu, 1)))) {
        snprintf(what, sizeof what, "MFU %.4g and HFU %.4g (0 <= MFU <= HFU, <= 1 where the "
                 "model's %g FLOPs a device are no more than the %g it runs for them; %g "
                 "recomputed; a %.6g s step)", r->mfu, r->hfu, counted, runs,
                 r->flops_recompute / in->stages, r->step);
        return broken(in, what);
    }
    return MT_OK;
}
