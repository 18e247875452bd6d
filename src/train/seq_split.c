/*
 * seq_split.c — a device's share of the sequence when the time dim (T) of
 * the model's inputs is split over mesh axes (the context axis: head-tail
 * chunks, mt_headtail_pos): which share, the position ids it holds and its
 * rows of the inputs; and the id that ends a document. Below build.c,
 * devices.c and pipe_data.c, which read it.
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

/* In place (dst == src) every element read lies at or after every element
 * written before it, so nothing is read overwritten. */
void mt__train_headtail_rows(void *dst, const void *src, int64_t rows, int64_t T, int parts,
                             int part) {
    uint32_t *e = dst;
    const uint32_t *from = src;
    for (int64_t b = 0; b < rows; b++)
        for (int64_t i = 0; i < T; i++)
            e[b * T + i] = from[b * T * parts + mt_headtail_pos(i, T, parts, part)];
}

int32_t mt__train_eot_id(const mt_trainer *tr) {
    return tr->cfg.eot_id >= 0 ? tr->cfg.eot_id : tr->m->eot_id;
}
