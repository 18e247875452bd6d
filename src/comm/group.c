/*
 * group.c — each device's cache of groups: a group is created here, on the
 * device's first collective over its axes, handed to the transport's
 * group_init, and freed here with the ctx (after group_fini); and the
 * axes' label that names a group in messages.
 */
#include "comm/coll_impl.h"

#include <stdio.h>
#include <stdlib.h>

/* The label is the group's name in every message (g->label), so it lives
 * with the groups: the records, the match check and the sends below name
 * groups through it. */
void mt__axes_label(const mt_mesh *mesh, uint32_t key, char *buf, size_t cap) {
    size_t off = (size_t)snprintf(buf, cap, "'");
    for (int i = 0; key >> (4 * i) && i < 8 && off < cap; i++) {
        int a = (int)((key >> (4 * i)) & 15) - 1;
        off += (size_t)snprintf(buf + off, cap - off, "%s%s", i ? "," : "", mt_mesh_axis_name(mesh, a));
    }
    if (off < cap) snprintf(buf + off, cap - off, key ? "'" : "' (no axes)");
}

/* Frees a group's memory (not its transport state: see mt__ctx_groups_free). */
static void group_free(mt_group *g) {
    free(g->members);
    free(g->check_buf);
    free(g);
}

mt_status mt__ctx_group(mt_ctx *ctx, mt_axes axes, mt_group **out) {
    mt_launch_state *ls = ctx->launch;
    /* every collective, send and receive resolves its group here first */
    if (!ls->ops)
        return mt_fail(MT_ESTATE, "device %d's context is virtual (mt_ctx_virtual_create: a "
                       "coordinate for partitioning and shape-only compiles) and runs no "
                       "communication; run the program under mt_launch", ctx->device);
    /* the key packs axis+1 in 4 bits each: it is a safe read and names one
     * axis list only for n <= ndim (<= MT_MESH_MAX_AXES) axes of the mesh,
     * so those come first; a cached key then is a valid group (no repeats) */
    const int ndim = mt_mesh_ndim(ls->mesh);
    bool in_range = axes.n >= 0 && axes.n <= ndim;
    for (int i = 0; in_range && i < axes.n; i++) in_range = axes.axis[i] < ndim;
    if (!in_range) return mt_mesh_axes_check(ls->mesh, axes);
    uint32_t key = mt__axes_key(axes);
    for (int i = 0; i < ctx->n_groups; i++)
        if (ctx->groups[i]->key == key) { *out = ctx->groups[i]; return MT_OK; }
    mt_status st = mt_mesh_axes_check(ls->mesh, axes);
    if (st != MT_OK) return st;
    if (ctx->n_groups == ctx->cap_groups) {
        int cap = ctx->cap_groups ? 2 * ctx->cap_groups : 16;
        mt_group **grown = realloc(ctx->groups, (size_t)cap * sizeof *grown);
        if (!grown) return mt_fail(MT_ENOMEM, "out of memory for %d groups", cap);
        ctx->groups = grown;
        ctx->cap_groups = cap;
    }
    mt_group *g = calloc(1, sizeof *g);
    if (!g) return mt_fail(MT_ENOMEM, "out of memory for a group");
    g->key = key;
    g->axes = axes;
    g->size = mt_mesh_group_size(ls->mesh, axes);
    g->rank = mt_mesh_group_rank(ls->mesh, axes, ctx->device);
    g->members = malloc((size_t)g->size * sizeof *g->members);
    g->check_buf = ls->check ? calloc((size_t)g->size, 64) : NULL;
    if (!g->members || (ls->check && !g->check_buf)) {
        int size = g->size;
        group_free(g);
        return mt_fail(MT_ENOMEM, "out of memory for a group of %d devices", size);
    }
    mt_mesh_group(ls->mesh, axes, ctx->device, g->members);
    mt__axes_label(ls->mesh, key, g->label, sizeof g->label);
    if (ls->ops->group_init && (st = ls->ops->group_init(ctx, g)) != MT_OK) {
        group_free(g);
        return st;
    }
    ctx->groups[ctx->n_groups++] = g;
    *out = g;
    return MT_OK;
}

void mt__ctx_groups_free(mt_ctx *ctx) {
    const mt_transport_ops *ops = ctx->launch ? ctx->launch->ops : NULL;
    for (int i = 0; i < ctx->n_groups; i++) {
        if (ops && ops->group_fini) ops->group_fini(ctx, ctx->groups[i]);
        group_free(ctx->groups[i]);
    }
    free(ctx->groups);
    ctx->groups = NULL;
    ctx->n_groups = ctx->cap_groups = 0;
}
