/*
 * ctx.c — device contexts: what a device owns during a launch (its record,
 * scratch for the transports' wait loops, its kernel thread pool, its
 * timeline, its group cache), and the public accessors of mt_ctx.
 */
#include "comm/transport_impl.h"

#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Set-up and release                                                        */
/* ======================================================================== */

mt_status mt__ctx_init(mt_ctx *ctx, mt_launch_state *ls, int device) {
    memset(ctx, 0, sizeof *ctx);
    ctx->device = device;
    ctx->launch = ls;
    ctx->record = &ls->records[device];
    ctx->trace.open = -1;
    ctx->doze_at = -1;
    ctx->t_start = ls->t_start;
    ctx->wait_list = malloc(2 * (size_t)ls->n_devices * sizeof *ctx->wait_list);
    ctx->ptrs = malloc((size_t)ls->n_devices * sizeof *ctx->ptrs);
    ctx->dst_ptrs = malloc((size_t)ls->n_devices * sizeof *ctx->dst_ptrs);
    ctx->pool = mt_pool_create(ls->kernel_threads);
    bool traced = ls->trace_run ? mt__trace_run_take(ls, ctx)
                                : !ls->trace_path || mt__trace_list_init(&ctx->trace, 256);
    if (!ctx->wait_list || !ctx->ptrs || !ctx->dst_ptrs || !ctx->pool || !traced) {
        mt__ctx_free(ctx);
        return mt_fail(MT_ENOMEM, "device %d: out of memory for its context", device);
    }
    return MT_OK;
}

void mt__ctx_free(mt_ctx *ctx) {
    if (!ctx) return;
    mt__ctx_groups_free(ctx);
    free(ctx->wait_list);
    free(ctx->ptrs);
    free(ctx->dst_ptrs);
    free(ctx->scratch);
    if (ctx->launch && ctx->launch->trace_run) mt__trace_run_give_back(ctx->launch, ctx);
    mt__trace_list_free(&ctx->trace);
    mt_pool_free(ctx->pool);
    ctx->wait_list = NULL;
    ctx->ptrs = NULL;
    ctx->dst_ptrs = NULL;
    ctx->scratch = NULL;
    ctx->pool = NULL;
}

/* ======================================================================== */
/* Accessors                                                                 */
/* ======================================================================== */

int mt_ctx_device(const mt_ctx *ctx) { return ctx->device; }
const mt_mesh *mt_ctx_mesh(const mt_ctx *ctx) { return ctx->launch->mesh; }
int mt_ctx_process_rank(const mt_ctx *ctx) { return ctx->launch->process_rank; }

int mt_axis_index(const mt_ctx *ctx, mt_axes axes) {
    const mt_mesh *mesh = ctx->launch->mesh;
    return mt_mesh_axes_check(mesh, axes) == MT_OK ? mt_mesh_group_rank(mesh, axes, ctx->device) : -1;
}

int mt_axis_size(const mt_ctx *ctx, mt_axes axes) {
    const mt_mesh *mesh = ctx->launch->mesh;
    return mt_mesh_axes_check(mesh, axes) == MT_OK ? mt_mesh_group_size(mesh, axes) : -1;
}

mt_status mt_ctx_axes(const mt_ctx *ctx, const char *names, mt_axes *out) {
    return mt_mesh_axes(ctx->launch->mesh, names, out);
}

uint64_t mt_ctx_collectives(const mt_ctx *ctx) { return ctx->seq; }

const char *mt_ctx_last_collective(const mt_ctx *ctx) { return ctx->record->text; }
