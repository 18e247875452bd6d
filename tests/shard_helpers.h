/*
 * shard_helpers.h — what test_shard.c (the float forms) and
 * test_shard_typed.c (every dtype) share: a round-trip case, element
 * counts, each device's block per dim computed from its coordinates (the
 * reference the library's copy loops are checked against), the partial-sum
 * layout both check, and device 0's errors kept for the test to read.
 */
#ifndef MT_TEST_SHARD_HELPERS_H
#define MT_TEST_SHARD_HELPERS_H

#include "meshtrain.h"

#include <stdio.h>

typedef struct {
    const char *mesh;        /* mesh spec */
    int         devices;
    const char *spec;        /* partition spec */
    int         ndim;
    int64_t     shape[MT_MAX_DIMS];
} mt_test_shard_case;

static inline int64_t mt_test_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

/* Per dim: the number of blocks and the device's block, from its
 * coordinates (row-major over the dim's axes in mesh order: JAX's layout),
 * not through the library's group ranks. */
static inline void mt_test_shard_blocks(const mt_mesh *mesh, const mt_sharding *sh, int ndim,
                                        int device, int64_t *parts, int64_t *block) {
    int coords[MT_MESH_MAX_AXES];
    mt_mesh_coords(mesh, device, coords);
    for (int d = 0; d < ndim; d++) {
        parts[d] = 1;
        block[d] = 0;
        for (int a = 0; a < mt_mesh_ndim(mesh); a++) {
            if (!(sh->dim_axes[d] & (1u << a))) continue;
            int size = mt_mesh_axis_size(mesh, mt_mesh_axis_name(mesh, a));
            block[d] = block[d] * size + coords[a];
            parts[d] *= size;
        }
    }
}

/* The partial-sum case, on mesh data=2,tensor=2: a (4,6) array split on
 * data, partial over tensor. *t and *P: the device's rank on tensor and
 * tensor's size; *dr: its rank on data (its rows start at dr·12). */
static inline mt_status mt_test_partial_layout(mt_ctx *ctx, mt_sharding *sh, int *t, int *P,
                                               int *dr) {
    mt_status s = mt_sharding_parse(mt_ctx_mesh(ctx), "data,_", 2, sh);
    if (s != MT_OK) return s;
    mt_axes tensor, data;
    if ((s = mt_ctx_axes(ctx, "tensor", &tensor)) != MT_OK) return s;
    if ((s = mt_ctx_axes(ctx, "data", &data)) != MT_OK) return s;
    sh->partial_axes = 1u << tensor.axis[0];
    *t = mt_axis_index(ctx, tensor);
    *P = mt_axis_size(ctx, tensor);
    *dr = mt_axis_index(ctx, data);
    return MT_OK;
}

/* A call's status and message on device 0 (mt_errmsg is per device), kept
 * for the test to check after the launch. */
typedef struct {
    mt_status status;
    char      msg[512];
} mt_test_kept;

static inline void mt_test_keep(mt_ctx *ctx, mt_status s, mt_test_kept *k) {
    if (mt_ctx_device(ctx) != 0) return;
    k->status = s;
    snprintf(k->msg, sizeof k->msg, "%s", mt_errmsg());
}

#endif
