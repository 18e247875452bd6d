/*
 * shard.c — host arrays on the mesh: mt_shard_put(_typed) cuts a device's slice
 * out of a global host array, mt_shard_gather(_typed) puts every device's slice
 * back together.
 *
 * The layout is JAX's: under a partition spec, tensor dim d split over the
 * mesh axes in sh->dim_axes[d] has prod(sizes) equal blocks, and a device
 * holds block i, where i is its rank in its group over those axes taken in
 * mesh order (row-major, major axis first). Both functions compute that rank
 * with mt_mesh_group_rank, so put and gather cannot disagree on the layout.
 *
 * Partial sums (sh->partial_axes): the value is the SUM over the partial
 * axes of what the devices hold. Put therefore gives the slice to group rank 0
 * over those axes and zeros to the others; gather sums them (psum) first.
 *
 * The data move as bytes (whole rows by memcpy), so every dtype round-trips
 * exactly: mt_shard_put_typed / mt_shard_gather_typed take any of them, and
 * mt_shard_put / mt_shard_gather are their f32 forms.
 *
 * These are set-up and inspection helpers, not step-loop code, so the
 * gather's scratch buffers are plain mallocs.
 */
#include "meshtrain/comm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Layout                                                                    */
/* ======================================================================== */

/* The axes of a bit set, in mesh order (the order the split is major-to-minor in). */
static mt_axes axes_of_bits(uint32_t bits) {
    mt_axes a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < MT_MESH_MAX_AXES; i++)
        if (bits & (1u << i)) a.axis[a.n++] = (uint8_t)i;
    return a;
}

/* Names of the axes in `bits` joined by '+' ("data+tensor"), for messages. */
static const char *axes_text(const mt_mesh *mesh, uint32_t bits, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < mt_mesh_ndim(mesh); i++) {
        if (!(bits & (1u << i))) continue;
        int w = snprintf(buf + used, n - used, "%s%s", used ? "+" : "", mt_mesh_axis_name(mesh, i));
        if (w < 0 || (size_t)w >= n - used) break;
        used += (size_t)w;
    }
    return buf;
}

/* "[2305843009213693953, 8]", for messages. */
static const char *shape_text(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t used = 1;
    snprintf(buf, n, "[");
    for (int d = 0; d < ndim; d++) {
        int w = snprintf(buf + used, n - used, "%s%lld", d ? ", " : "", (long long)shape[d]);
        if (w < 0 || (size_t)w >= n - used) break;
        used += (size_t)w;
    }
    if (used + 1 < n) snprintf(buf + used, n - used, "]");
    return buf;
}

/* The element count of a shape, or false when it does not fit: callers index
 * and allocate elements of `esize` bytes with it, so a product that wraps
 * (2^61+1 x 8 wraps to 8 in 64 bits) would turn into a too-small buffer or a
 * too-long copy. */
static bool numel_fits(int ndim, const int64_t *shape, size_t esize, int64_t *out) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        if (__builtin_mul_overflow(n, shape[d], &n)) return false;
    if ((uint64_t)n > SIZE_MAX / esize) return false;
    *out = n;
    return true;
}

/* Everything both directions check: arguments, a known dtype, axes that
 * exist, no axis used twice, a shape whose element count fits in memory
 * sizes, the local shape (whose error names the dim that does not divide),
 * and the two arrays when a shard has elements. `fn` is the public function
 * the caller called (the float forms or the typed ones), for messages;
 * `gather`: from the local shard to the global array, else the other way. */
static mt_status check_layout(const char *fn, bool gather, const mt_ctx *ctx,
                              const mt_sharding *sh, mt_dtype dtype, int ndim,
                              const int64_t *shape, const void *global, const void *local_data,
                              int64_t *local, int64_t *local_numel) {
    if (!ctx || !sh || (ndim > 0 && !shape))
        return mt_fail(MT_EINVAL, "%s needs a ctx, a sharding and a shape (got %s NULL)", fn,
                       !ctx ? "ctx" : !sh ? "sharding" : "shape");
    const size_t esize = mt_dtype_size(dtype);
    if (esize == 0)
        return mt_fail(MT_EINVAL, "%s: unknown dtype %d; use MT_F32, MT_BF16 or MT_I32", fn,
                       (int)dtype);
    const char *dt = mt_dtype_name(dtype);
    if (ndim < 0 || ndim > MT_MAX_DIMS)
        return mt_fail(MT_EINVAL, "%s: ndim %d is out of range; arrays have 0 to %d dims", fn,
                       ndim, MT_MAX_DIMS);
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    const int mesh_ndim = mt_mesh_ndim(mesh);
    const uint32_t valid = (1u << mesh_ndim) - 1;
    char names[128];
    uint32_t used = sh->partial_axes;
    if (sh->partial_axes & ~valid)
        return mt_fail(MT_EINVAL, "%s: partial_axes 0x%x names axes past the mesh's %d ('%s')",
                       fn, sh->partial_axes, mesh_ndim, mt_mesh_spec(mesh));
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return mt_fail(MT_ESHAPE, "%s: dim %d has negative size %lld", fn, d,
                           (long long)shape[d]);
        const uint32_t b = sh->dim_axes[d];
        if (b & ~valid)
            return mt_fail(MT_EINVAL, "%s: dim %d is split over axis bits 0x%x, but mesh '%s' "
                           "has only %d axes", fn, d, b, mt_mesh_spec(mesh), mesh_ndim);
        if (b & used)
            return mt_fail(MT_EINVAL, "%s: dim %d is split over '%s', which another dim or the "
                           "partial-sum axes already use; a mesh axis can split one dim only",
                           fn, d, axes_text(mesh, b & used, names, sizeof names));
        used |= b;
    }
    for (int d = ndim; d < MT_MAX_DIMS; d++)
        if (sh->dim_axes[d])
            return mt_fail(MT_EINVAL, "%s: the sharding splits dim %d, but the array has %d dims",
                           fn, d, ndim);
    int64_t global_numel = 0;
    if (!numel_fits(ndim, shape, esize, &global_numel)) {
        char st[MT_MAX_DIMS * 24 + 8];
        return mt_fail(MT_ESHAPE, "%s: shape %s has more elements than an array of %s can "
                       "hold (%zu at most)", fn, shape_text(ndim, shape, st, sizeof st), dt,
                       SIZE_MAX / esize);
    }
    mt_status s = mt_sharding_local_shape(mesh, sh, ndim, shape, local);
    if (s != MT_OK) return mt_fail_wrap(s, "%s", fn);
    /* the local shape divides the global one, so it fits when that does;
     * checked anyway, as it is what the callers size buffers with */
    int64_t n = 0;
    if (!numel_fits(ndim, local, esize, &n)) {
        char st[MT_MAX_DIMS * 24 + 8];
        return mt_fail(MT_ESHAPE, "%s: the local shape %s of one shard has more elements than "
                       "an array of %s can hold", fn, shape_text(ndim, local, st, sizeof st), dt);
    }
    if (n > 0 && (!global || !local_data))
        return gather ? mt_fail(MT_EINVAL, "%s needs a local shard of %lld %s elements and a "
                                "global buffer (got %s NULL)", fn, (long long)n, dt,
                                !local_data ? "local" : "global")
                      : mt_fail(MT_EINVAL, "%s needs a global array and a local buffer of %lld "
                                "%s elements (got %s NULL)", fn, (long long)n, dt,
                                !global ? "global" : "local");
    *local_numel = n;
    return MT_OK;
}

/* The element offset, per dim, of the block `device` holds. */
static void block_origin(const mt_mesh *mesh, const mt_sharding *sh, int ndim, int device,
                         const int64_t *local, int64_t *origin) {
    for (int d = 0; d < ndim; d++) {
        origin[d] = 0;
        if (sh->dim_axes[d])
            origin[d] = (int64_t)mt_mesh_group_rank(mesh, axes_of_bits(sh->dim_axes[d]), device)
                        * local[d];
    }
}

/* Copies the box of shape `local` at `origin` of the global array (shape
 * `global_shape`, row-major, elements of `esize` bytes) to the dense array
 * `dense`, or back when `to_global`. Whole innermost rows move with memcpy:
 * the bytes move as they are, so every dtype round-trips exactly. */
static void box_copy(int ndim, const int64_t *global_shape, const int64_t *local,
                     const int64_t *origin, size_t esize, char *global, char *dense,
                     bool to_global) {
    if (ndim == 0) {
        if (to_global) memcpy(global, dense, esize); else memcpy(dense, global, esize);
        return;
    }
    int64_t rows = 1, stride[MT_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        if (local[d] == 0) return;
    for (int d = 0; d < ndim - 1; d++) rows *= local[d];
    stride[ndim - 1] = 1;
    for (int d = ndim - 2; d >= 0; d--) stride[d] = stride[d + 1] * global_shape[d + 1];
    const size_t row_bytes = (size_t)local[ndim - 1] * esize;
    int64_t idx[MT_MAX_DIMS] = {0};   /* row counter over dims 0..ndim-2 */
    for (int64_t r = 0; r < rows; r++) {
        int64_t g = origin[ndim - 1];
        for (int d = 0; d < ndim - 1; d++) g += (origin[d] + idx[d]) * stride[d];
        char *gp = global + (size_t)g * esize, *lp = dense + (size_t)r * row_bytes;
        if (to_global) memcpy(gp, lp, row_bytes);
        else           memcpy(lp, gp, row_bytes);
        for (int d = ndim - 2; d >= 0; d--) {
            if (++idx[d] < local[d]) break;
            idx[d] = 0;
        }
    }
}

/* ======================================================================== */
/* Put and gather                                                            */
/* ======================================================================== */

static mt_status put(const char *fn, mt_ctx *ctx, const mt_sharding *sh, mt_dtype dtype,
                     const void *global, int ndim, const int64_t *shape, void *local) {
    int64_t lshape[MT_MAX_DIMS], n = 0;
    mt_status s = check_layout(fn, false, ctx, sh, dtype, ndim, shape, global, local, lshape, &n);
    if (s != MT_OK) return s;
    if (n == 0) return MT_OK;
    const size_t esize = mt_dtype_size(dtype);
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    const int device = mt_ctx_device(ctx);
    /* partial sums add up over the partial axes: one device holds the value
     * (all-zero bytes are 0 in f32, bf16 and i32 alike) */
    if (sh->partial_axes && mt_mesh_group_rank(mesh, axes_of_bits(sh->partial_axes), device) != 0) {
        memset(local, 0, (size_t)n * esize);
        return MT_OK;
    }
    int64_t origin[MT_MAX_DIMS];
    block_origin(mesh, sh, ndim, device, lshape, origin);
    /* box_copy only reads the global array in this direction */
    box_copy(ndim, shape, lshape, origin, esize, (char *)global, local, false);
    return MT_OK;
}

static mt_status gather(const char *fn, mt_ctx *ctx, const mt_sharding *sh, mt_dtype dtype,
                        const void *local, int ndim, const int64_t *shape, void *global) {
    int64_t lshape[MT_MAX_DIMS], n = 0;
    mt_status s = check_layout(fn, true, ctx, sh, dtype, ndim, shape, global, local, lshape, &n);
    if (s != MT_OK) return s;
    const size_t esize = mt_dtype_size(dtype);
    const char *dt = mt_dtype_name(dtype);
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    uint32_t split = 0;
    for (int d = 0; d < ndim; d++) split |= sh->dim_axes[d];
    const mt_axes split_axes = axes_of_bits(split);
    const int P = split ? mt_mesh_group_size(mesh, split_axes) : 1;

    /* One buffer: the summed local shard, then the P gathered shards. Every
     * device of a group calls the collectives even when n == 0, so the
     * sequence of collectives stays the same on all of them. */
    /* the shard fits in memory sizes, but the scratch holds 1 + P of them */
    const size_t nn = (size_t)n;
    size_t n_buf = 0;
    if (__builtin_mul_overflow(nn, (size_t)(1 + P), &n_buf) || n_buf >= SIZE_MAX / esize) {
        char st[MT_MAX_DIMS * 24 + 8];
        return mt_fail(MT_ESHAPE, "%s: shape %s gives shards of %lld %s elements; the gather "
                       "needs %d of them at once, more than an array of %s can hold (%zu at most)",
                       fn, shape_text(ndim, shape, st, sizeof st), (long long)n, dt, 1 + P, dt,
                       SIZE_MAX / esize);
    }
    char *buf = malloc((n_buf + 1) * esize);
    int *members = malloc((size_t)P * sizeof(int));
    if (!buf || !members) {
        free(buf);
        free(members);
        return mt_fail(MT_ENOMEM, "%s: cannot allocate %zu bytes for %d shards of %lld %s "
                       "elements", fn, n_buf * esize, P, (long long)n, dt);
    }
    char *summed = buf, *shards = buf + nn * esize;
    if (nn) memcpy(summed, local, nn * esize);
    /* psum in the dtype: i32 adds exactly (wrapping), bf16 adds in f32 and
     * rounds (comm.h); a value held by one device and zeros elsewhere, as
     * put leaves it, comes back exactly in every dtype */
    if (sh->partial_axes)
        s = mt_all_reduce(ctx, axes_of_bits(sh->partial_axes), summed, nn, dtype, MT_REDUCE_SUM);
    if (s == MT_OK && split)
        s = mt_all_gather(ctx, split_axes, summed, shards, nn, dtype);
    if (s == MT_OK && nn) {
        if (!split) {
            memcpy(global, summed, nn * esize);
        } else {
            /* shard r came from the group member of rank r; its block origin
             * follows from that device's coordinates */
            int got = mt_mesh_group(mesh, split_axes, mt_ctx_device(ctx), members);
            if (got != P) {
                s = mt_fail(MT_EINTERNAL, "%s: the group over the split axes has %d members, "
                            "expected %d", fn, got, P);
            } else {
                for (int r = 0; r < P; r++) {
                    int64_t origin[MT_MAX_DIMS];
                    block_origin(mesh, sh, ndim, members[r], lshape, origin);
                    box_copy(ndim, shape, lshape, origin, esize, global,
                             shards + (size_t)r * nn * esize, true);
                }
            }
        }
    }
    free(members);
    free(buf);
    return s;
}

mt_status mt_shard_put_typed(mt_ctx *ctx, const mt_sharding *sh, mt_dtype dtype,
                             const void *global, int ndim, const int64_t *shape, void *local) {
    return put("mt_shard_put_typed", ctx, sh, dtype, global, ndim, shape, local);
}

mt_status mt_shard_gather_typed(mt_ctx *ctx, const mt_sharding *sh, mt_dtype dtype,
                                const void *local, int ndim, const int64_t *shape, void *global) {
    return gather("mt_shard_gather_typed", ctx, sh, dtype, local, ndim, shape, global);
}

mt_status mt_shard_put(mt_ctx *ctx, const mt_sharding *sh, const float *global, int ndim,
                       const int64_t *shape, float *local) {
    return put("mt_shard_put", ctx, sh, MT_F32, global, ndim, shape, local);
}

mt_status mt_shard_gather(mt_ctx *ctx, const mt_sharding *sh, const float *local, int ndim,
                          const int64_t *shape, float *global) {
    return gather("mt_shard_gather", ctx, sh, MT_F32, local, ndim, shape, global);
}
