/*
 * tensor_global.c — a device's block of a parameter written from the
 * global tensor's elements (graph.h: mt_tensor_global_box,
 * mt_tensor_write_global), so that a loader of whole tensors (a Hugging
 * Face directory, io/hf_*.c) fills a partitioned graph directly: each
 * device reads the rows of its block and keeps them, no whole copy of the
 * model in between (issue 43).
 *
 * A shard (mt_partition's parameter blocks: is_shard) holds the box of
 * shape t->shape at t->shard_offset of the global tensor (global_shape);
 * every other tensor is its own global tensor. Both are row-major, so a
 * run of the block's last dim is a run of consecutive global indices: a
 * write intersects each run with [e0, e0 + n) and copies the overlap
 * through the backend (mt_tensor_write), in global order.
 */
#include "graph/graph_impl.h"
#include "meshtrain/graph.h"

mt_status mt_tensor_global_box(const mt_tensor *t, int64_t *origin, int64_t *shape) {
    if (!t || !origin || !shape)
        return mt_fail(MT_EINVAL, "mt_tensor_global_box: a NULL tensor or array");
    for (int d = 0; d < t->ndim; d++) {
        origin[d] = t->is_shard ? t->shard_offset[d] : 0;
        shape[d] = t->shape[d];
    }
    return MT_OK;
}

mt_status mt_tensor_write_global(mt_tensor *t, const void *src, int64_t e0, int64_t n) {
    if (!t || (!src && n > 0))
        return mt_fail(MT_EINVAL, "mt_tensor_write_global: a NULL tensor or source");
    if (!t->is_shard) return mt_tensor_write(t, src, e0, n);
    const int nd = t->ndim;
    int64_t global_numel = 1;
    for (int d = 0; d < nd; d++) global_numel *= t->global_shape[d];
    if (e0 < 0 || n < 0 || e0 > global_numel || n > global_numel - e0)
        return mt_fail(MT_EINVAL, "mt_tensor_write_global: elements [%lld, %lld) of tensor "
                       "'%s', whose global tensor has %lld; stay inside it", (long long)e0,
                       (long long)(e0 + n), t->name, (long long)global_numel);
    const int64_t run = nd ? t->shape[nd - 1] : 1, runs = run ? mt_tensor_numel(t) / run : 0;
    const size_t esize = mt_dtype_size(t->dtype);
    const int64_t end = e0 + n;
    int64_t idx[MT_MAX_DIMS] = {0};   /* the run's index over dims 0..nd-2 */
    mt_status s = MT_OK;
    for (int64_t r = 0; r < runs && s == MT_OK; r++) {
        /* the global flat index of the run's first element */
        int64_t g = 0, stride = 1;
        for (int d = nd - 1; d >= 0; d--) {
            g += (t->shard_offset[d] + (d == nd - 1 ? 0 : idx[d])) * stride;
            stride *= t->global_shape[d];
        }
        if (g >= end) break;   /* runs ascend in global order */
        const int64_t lo = g > e0 ? g : e0, hi = g + run < end ? g + run : end;
        if (lo < hi)
            s = mt_tensor_write(t, (const char *)src + (size_t)(lo - e0) * esize,
                                r * run + (lo - g), hi - lo);
        for (int d = nd - 2; d >= 0; d--) {
            if (++idx[d] < t->shape[d]) break;
            idx[d] = 0;
        }
    }
    return s;
}
