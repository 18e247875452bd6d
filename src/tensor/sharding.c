/*
 * sharding.c — a tensor's layout over a mesh: partition specs read and
 * written, local shapes, and the printed type ("f32[8@data,4]{U:x}").
 *
 * A sharding holds, per dim, the bit set of mesh axes it is split over; a dim
 * over several axes is split major-to-minor in mesh order, which is the order
 * the printed forms list them in.
 */
#include "mesh/mesh_impl.h"
#include "tensor/tensor_impl.h"

#include <stdarg.h>
#include <stdio.h>

/* ======================================================================== */
/* Reading specs, local shapes                                               */
/* ======================================================================== */

mt_status mt_sharding_parse(const mt_mesh *mesh, const char *spec, int ndim, mt_sharding *out) {
    memset(out, 0, sizeof *out);
    if (ndim < 0 || ndim > MT_MAX_DIMS)
        return mt_fail(MT_EINVAL, "partition spec '%s': %d dims; at most %d are supported",
                       spec ? spec : "", ndim, MT_MAX_DIMS);
    if (!spec || !*spec) return MT_OK;   /* replicated */
    uint32_t used = 0;
    int dim = 0;
    const char *p = spec;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (dim == ndim)
            return mt_fail(MT_EINVAL, "partition spec '%s' has more entries than the %d dims of "
                           "the array", spec, ndim);
        if (len == 0)
            return mt_fail(MT_EINVAL, "partition spec '%s': dim %d is empty; write '_' for a "
                           "whole (unsplit) dim", spec, dim);
        if (!(len == 1 && p[0] == '_')) {
            const char *q = p, *end = p + len;
            while (q < end) {
                size_t alen = strcspn(q, "+,");
                if (q + alen > end) alen = (size_t)(end - q);
                int a = alen ? mt__mesh_find_axis(mesh, q, alen) : -1;
                if (a < 0) {
                    char list[256];
                    mt__mesh_list_axes(mesh, list, sizeof list);
                    return mt_fail(MT_EINVAL, "partition spec '%s': dim %d names axis '%.*s', "
                                   "which the mesh '%s' does not have; its axes are %s",
                                   spec, dim, (int)alen, q, mesh->spec, list);
                }
                if (used & (1u << a))
                    return mt_fail(MT_EINVAL, "partition spec '%s': axis '%s' is used twice; a "
                                   "mesh axis can split at most one dim", spec, mesh->names[a]);
                used |= 1u << a;
                out->dim_axes[dim] |= 1u << a;
                q += alen;
                if (q < end) q++;   /* the '+' */
            }
        }
        dim++;
        p += len;
        if (!*p) break;
        p++;
    }
    /* fewer entries than dims: the rest are whole, as in JAX's PartitionSpec */
    return MT_OK;
}

mt_status mt_sharding_local_shape(const mt_mesh *mesh, const mt_sharding *sh, int ndim,
                                  const int64_t *global, int64_t *local) {
    if (ndim < 0 || ndim > MT_MAX_DIMS)
        return mt_fail(MT_EINVAL, "local shape: %d dims; at most %d are supported", ndim, MT_MAX_DIMS);
    for (int d = 0; d < ndim; d++) {
        int64_t parts = 1;
        for (int a = 0; a < mesh->ndim; a++)
            if (sh->dim_axes[d] & (1u << a)) parts *= mesh->sizes[a];
        if (sh->dim_axes[d] >> mesh->ndim)
            return mt_fail(MT_EINVAL, "local shape: dim %d is split over axis bits 0x%x, but the "
                           "mesh '%s' has %d axes", d, sh->dim_axes[d], mesh->spec, mesh->ndim);
        if (global[d] < 0 || global[d] % parts != 0) {
            /* the axes' names only for the message: formatted on every call
               they were a tenth of a plan search's time (issue 40's speed) */
            char names[160] = "";
            size_t off = 0;
            for (int a = 0; a < mesh->ndim; a++)
                if ((sh->dim_axes[d] & (1u << a)) && off < sizeof names)
                    off += (size_t)snprintf(names + off, sizeof names - off, "%s%s",
                                            off ? "+" : "", mesh->names[a]);
            return mt_fail(MT_ESHAPE, "dim %d of size %lld does not divide by %lld (the size of "
                           "mesh axes '%s'); pad it to a multiple of %lld or split another dim",
                           d, (long long)global[d], (long long)parts, names, (long long)parts);
        }
        local[d] = global[d] / parts;
    }
    return MT_OK;
}

/* ======================================================================== */
/* Printing                                                                  */
/* ======================================================================== */

/* Text built with snprintf semantics: `need` counts every byte asked for,
 * what fits lands in buf. */
typedef struct {
    char  *buf;
    size_t cap, need;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t at = t->need < t->cap ? t->need : t->cap;
    int n = vsnprintf(t->buf ? t->buf + at : NULL, t->buf ? t->cap - at : 0, fmt, ap);
    va_end(ap);
    if (n > 0) t->need += (size_t)n;
}

/* The axes of bit set `set` joined by '+', in mesh order; '?' for a bit the
 * mesh does not have. */
static void put_axes(text *t, const mt_mesh *mesh, uint32_t set) {
    bool first = true;
    for (int a = 0; a < 32; a++) {
        if (!(set & (1u << a))) continue;
        put(t, "%s%s", first ? "" : "+", a < mesh->ndim ? mesh->names[a] : "?");
        first = false;
    }
}

static text text_start(char *buf, size_t cap) {
    text t = {cap ? buf : NULL, cap, 0};
    if (t.buf) buf[0] = '\0';
    return t;
}

size_t mt_sharding_format(const mt_mesh *mesh, const mt_sharding *sh, int ndim, char *buf,
                          size_t cap) {
    text t = text_start(buf, cap);
    if (ndim > MT_MAX_DIMS) ndim = MT_MAX_DIMS;
    for (int d = 0; d < ndim; d++) {
        if (d) put(&t, ",");
        if (sh->dim_axes[d]) put_axes(&t, mesh, sh->dim_axes[d]);
        else put(&t, "_");
    }
    return t.need;
}

size_t mt_sharding_type_format(const mt_mesh *mesh, mt_dtype dtype, int ndim,
                               const int64_t *shape, const mt_sharding *sh, char *buf,
                               size_t cap) {
    text t = text_start(buf, cap);
    if (ndim > MT_MAX_DIMS) ndim = MT_MAX_DIMS;
    put(&t, "%s[", mt_dtype_name(dtype));
    for (int d = 0; d < ndim; d++) {
        put(&t, "%s%lld", d ? "," : "", (long long)shape[d]);
        if (sh->dim_axes[d]) {
            put(&t, "@");
            put_axes(&t, mesh, sh->dim_axes[d]);
        }
    }
    put(&t, "]");
    if (sh->partial_axes) {
        put(&t, "{U:");
        put_axes(&t, mesh, sh->partial_axes);
        put(&t, "}");
    }
    return t.need;
}
