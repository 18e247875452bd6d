/*
 * ctx_virtual.c — a device context outside any launch (mt_ctx_virtual_create):
 * a mesh and a coordinate, no transport. The planner partitions and compiles
 * one device's program of a mesh far larger than the threads it could run;
 * partitioning asks only the coordinate (mt_axis_index, mt_axis_size), and
 * the first collective on the context fails in mt__ctx_group, which every
 * collective, send and receive goes through, because the launch state has
 * no transport table.
 */
#include "comm/transport_impl.h"

#include <stdlib.h>

/* The context, the launch state it points at and its one record, in one
 * allocation: the ctx first, so the ctx pointer frees the whole. */
typedef struct {
    mt_ctx           ctx;
    mt_launch_state  launch;
    mt_device_record record;
} virtual_ctx;

mt_status mt_ctx_virtual_create(const mt_mesh *mesh, int device, mt_ctx **out) {
    if (!out) return mt_fail(MT_EINVAL, "mt_ctx_virtual_create: out is NULL");
    *out = NULL;
    if (!mesh) return mt_fail(MT_EINVAL, "mt_ctx_virtual_create: mesh is NULL");
    int n = mt_mesh_size(mesh);
    if (device < 0 || device >= n)
        return mt_fail(MT_EINVAL, "mt_ctx_virtual_create: device %d is outside mesh '%s' "
                       "(devices 0 to %d)", device, mt_mesh_spec(mesh), n - 1);
    virtual_ctx *v = calloc(1, sizeof *v);
    if (!v) return mt_fail(MT_ENOMEM, "out of memory for a virtual device context");
    v->launch.mesh = mesh;
    v->launch.n_devices = n;
    v->launch.n_local = 1;
    v->launch.process_size = 1;
    v->launch.kernel_threads = 1;
    v->ctx.device = device;
    v->ctx.launch = &v->launch;
    v->ctx.record = &v->record;
    v->ctx.trace.open = -1;
    *out = &v->ctx;
    return MT_OK;
}

void mt_ctx_virtual_free(mt_ctx *ctx) {
    if (!ctx) return;
    mt__ctx_groups_free(ctx);
    free((virtual_ctx *)(void *)ctx);
}
