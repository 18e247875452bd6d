/*
 * seq_split.c — a device's share of the sequence when the time dim (T) of
 * the model's inputs is split over mesh axes (the context axis: head-tail
 * chunks, mt_headtail_pos): which share, and the position ids it holds.
 * Below build.c and devices.c, which both read it.
 */
#include "graph/tensor_data.h"
#include "train/train_impl.h"

#include <stdlib.h>

void mt__train_seq_split(mt_ctx *ctx, const mt_tensor *t, int *parts, int *part) {
    *parts = 1;
    *part = 0;
    if (!ctx || !t || mt_tensor_ndim(t) < 2) return;
    uint32_t bits = mt_tensor_sharding(t).dim_axes[1];
    mt_axes ax = {0};
    for (int a = 0; a < MT_MESH_MAX_AXES; a++)
        if (bits & (1u << a)) ax.axis[ax.n++] = (uint8_t)a;
    if (!ax.n) return;
    *parts = mt_axis_size(ctx, ax);
    *part = mt_axis_index(ctx, ax);
}

mt_status mt__train_seq_positions(mt_ctx *ctx, mt_graph *g, const char *name) {
    mt_tensor *pos = name ? mt_graph_find(g, name) : NULL;
    int parts, part;
    mt__train_seq_split(ctx, pos, &parts, &part);
    if (parts < 2) return MT_OK;
    const int64_t B = mt_tensor_dim(pos, 0), T = mt_tensor_dim(pos, 1);
    int32_t *row = malloc((size_t)T * sizeof *row);   /* (T) */
    if (!row) return mt_fail(MT_ENOMEM, "out of memory for %lld position ids", (long long)T);
    for (int64_t i = 0; i < T; i++) row[i] = (int32_t)mt_headtail_pos(i, T, parts, part);
    mt_status s = MT_OK;
    for (int64_t b = 0; b < B && s == MT_OK; b++) s = mt_tensor_write(pos, row, b * T, T);
    free(row);
    return s;
}

