/*
 * step_output.c — a step's split and bytes into the public result
 * (step_output.h).
 */
#include "plan/step_output.h"

#include <stdio.h>
#include <string.h>

/* "data", "fsdp,tensor": the axes' names on the mesh. */
static void axes_text(const mt_mesh *mesh, mt_axes axes, char *buf, size_t cap) {
    int n = 0;
    buf[0] = '\0';
    for (int i = 0; i < axes.n && n >= 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "%s%s", i ? "," : "",
                      mt_mesh_axis_name(mesh, axes.axis[i]));
}

void mt__plan_step_output(const mt_mesh *mesh, const mt__plan_step_result *r,
                          mt_plan_result *res) {
    res->forward = r->ops[0];
    /* the recomputation runs in B (remat.c); what is left of B and W is
       the backward's own; never below 0 where rounding takes it there */
    double bw = r->ops[1] + r->ops[2] - r->recompute;
    res->backward = bw > 0 ? bw : 0;
    res->recompute = r->recompute;
    res->n_volumes = 0;
    for (int k = 0; k <= r->n_comm && res->n_volumes < MT_PLAN_MAX_VOLUMES; k++) {
        const bool message = k == r->n_comm;   /* past the keyed ones: the pipeline's */
        mt_axes axes = {0};
        if (message && (!(r->message_sent > 0) || mt_mesh_axes(mesh, "pipe", &axes) != MT_OK))
            break;
        const mt__plan_step_comm *c = message ? NULL : &r->comm[k];
        if (c && !(c->size > 0)) continue;   /* a group of one moves nothing */
        mt_plan_volume *v = &res->volumes[res->n_volumes++];
        memset(v, 0, sizeof *v);
        snprintf(v->kind, sizeof v->kind, "%s", mt__plan_coll_name(c ? c->kind : MT__PC_PERMUTE));
        axes_text(mesh, c ? c->axes : axes, v->axes, sizeof v->axes);
        v->group = mt_mesh_group_size(mesh, c ? c->axes : axes);
        v->size = c ? c->size : r->message_sent;
        v->sent = c ? c->sent : r->message_sent;
    }
}
