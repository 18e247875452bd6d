/*
 * type.c — tensor types read and written: "f32[8@x+y,4]{U:z}" is an f32
 * array of global shape (8,4) whose dim 0 is split over mesh axes x (major)
 * and y, holding partial sums over z. The notation is JAX's sharding in types
 * and the scaling book's; mt_sharding_type_format (sharding.c) writes it.
 *
 * The reader is strict: every message names the text and what was wrong in
 * it, because these strings are typed by people (`meshtrain explain`).
 */
#include "mesh/mesh_impl.h"
#include "tensor/tensor_impl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

/* ======================================================================== */
/* The reader                                                                */
/* ======================================================================== */

static bool is_name_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Reads axes joined by '+' at *p into *set (bits), advancing *p. `used` holds
 * every axis the type has named so far (an axis appears at most once in a
 * type); `ordered` asks for mesh order (the axes of one dim: major first). */
static mt_status read_axes(const mt_mesh *mesh, const char *text, const char **p,
                           uint32_t *used, bool ordered, const char *where, uint32_t *set) {
    *set = 0;
    int last = -1;
    for (;;) {
        const char *q = *p;
        while (is_name_char(**p)) (*p)++;
        size_t len = (size_t)(*p - q);
        if (len == 0)
            return mt_fail(MT_EINVAL, "type '%s': expected a mesh axis name at column %d (%s)",
                           text, (int)(q - text) + 1, where);
        int a = mt__mesh_find_axis(mesh, q, len);
        if (a < 0) {
            char list[256];
            mt__mesh_list_axes(mesh, list, sizeof list);
            return mt_fail(MT_EINVAL, "type '%s': %s names axis '%.*s', which the mesh '%s' "
                           "does not have; its axes are %s", text, where, (int)len, q,
                           mesh->spec, list);
        }
        if (*used & (1u << a))
            return mt_fail(MT_EINVAL, "type '%s': axis '%s' is used twice; a mesh axis may "
                           "appear at most once in a type", text, mesh->names[a]);
        if (ordered && a < last)
            return mt_fail(MT_EINVAL, "type '%s': %s lists axis '%s' after '%s'; list the "
                           "axes of a dim major first, in mesh order ('%s')", text, where,
                           mesh->names[a], mesh->names[last], mesh->spec);
        last = a;
        *used |= 1u << a;
        *set |= 1u << a;
        if (**p != '+') return MT_OK;
        (*p)++;
    }
}

/* "x+y" of an axis set, for messages. */
static void axes_text(const mt_mesh *mesh, uint32_t set, char *buf, size_t cap) {
    size_t off = 0;
    buf[0] = '\0';
    for (int a = 0; a < mesh->ndim && off < cap; a++)
        if (set & (1u << a))
            off += (size_t)snprintf(buf + off, cap - off, "%s%s", off ? "+" : "", mesh->names[a]);
}

mt_status mt_type_parse(const mt_mesh *mesh, const char *text, mt_type *out) {
    memset(out, 0, sizeof *out);
    if (!text) return mt_fail(MT_EINVAL, "type: no text given");
    /* dtype */
    size_t dl = strcspn(text, "[");
    static const struct { const char *name; mt_dtype dt; } DTYPES[] = {
        {"f32", MT_F32}, {"bf16", MT_BF16}, {"i32", MT_I32}};
    int found = -1;
    for (int k = 0; k < 3; k++)
        if (strlen(DTYPES[k].name) == dl && strncmp(text, DTYPES[k].name, dl) == 0) found = k;
    if (found < 0)
        return mt_fail(MT_EINVAL, "type '%s': unknown dtype '%.*s'; a type starts with f32, "
                       "bf16 or i32, as in 'f32[8@x,4]'", text, (int)dl, text);
    out->dtype = DTYPES[found].dt;
    if (text[dl] != '[')
        return mt_fail(MT_EINVAL, "type '%s': expected '[' after the dtype, as in 'f32[8@x,4]'",
                       text);
    const char *p = text + dl + 1;
    uint32_t used = 0;

    /* dims: size[@axes], separated by ',' */
    if (*p != ']') {
        for (;;) {
            if (out->ndim == MT_MAX_DIMS)
                return mt_fail(MT_EINVAL, "type '%s': more than %d dims", text, MT_MAX_DIMS);
            if (!isdigit((unsigned char)*p))
                return mt_fail(MT_EINVAL, "type '%s': expected the size of dim %d at column %d",
                               text, out->ndim, (int)(p - text) + 1);
            char *end;
            long long v = strtoll(p, &end, 10);
            if (v <= 0 || v > ((long long)1 << 50))
                return mt_fail(MT_EINVAL, "type '%s': dim %d has size %.*s; sizes are integers "
                               "from 1 to 2^50", text, out->ndim, (int)(end - p), p);
            p = end;
            int d = out->ndim++;
            out->shape[d] = v;
            if (*p == '@') {
                p++;
                char where[32];
                snprintf(where, sizeof where, "dim %d", d);
                mt_status s = read_axes(mesh, text, &p, &used, true, where,
                                        &out->sharding.dim_axes[d]);
                if (s != MT_OK) return s;
            }
            if (*p == ']') break;
            if (*p != ',')
                return mt_fail(MT_EINVAL, "type '%s': expected ',' or ']' after dim %d at "
                               "column %d", text, d, (int)(p - text) + 1);
            p++;
        }
    }
    p++;   /* the ']' */

    /* partial sums: {U:axes} */
    if (*p == '{') {
        if (strncmp(p, "{U:", 3) != 0)
            return mt_fail(MT_EINVAL, "type '%s': expected '{U:' at column %d (partial sums "
                           "are written {U:x+y})", text, (int)(p - text) + 1);
        p += 3;
        mt_status s = read_axes(mesh, text, &p, &used, false, "the partial sums",
                                &out->sharding.partial_axes);
        if (s != MT_OK) return s;
        if (*p != '}')
            return mt_fail(MT_EINVAL, "type '%s': expected '}' at column %d", text,
                           (int)(p - text) + 1);
        p++;
    }
    if (*p)
        return mt_fail(MT_EINVAL, "type '%s': unexpected '%s' at column %d after the type",
                       text, p, (int)(p - text) + 1);

    /* its bytes fit in an int64 (each dim is at most 2^50, their product need
     * not be): every byte count of the type is then exact */
    double bytes = (double)mt_dtype_size(out->dtype);
    for (int d = 0; d < out->ndim; d++) bytes *= (double)out->shape[d];
    if (bytes > 0x1p62)
        return mt_fail(MT_EINVAL, "type '%s' holds %.3g bytes; a type holds at most 2^62 bytes: "
                       "make its dims smaller", text, bytes);

    /* every split dim divides by its axes' product */
    for (int d = 0; d < out->ndim; d++) {
        int64_t parts = 1;
        for (int a = 0; a < mesh->ndim; a++)
            if (out->sharding.dim_axes[d] & (1u << a)) parts *= mesh->sizes[a];
        if (out->shape[d] % parts != 0) {
            char names[128];
            axes_text(mesh, out->sharding.dim_axes[d], names, sizeof names);
            return mt_fail(MT_EINVAL, "type '%s': dim %d of size %lld does not divide over "
                           "%s (%lld devices); use a multiple of %lld or split it over "
                           "fewer axes", text, d, (long long)out->shape[d], names,
                           (long long)parts, (long long)parts);
        }
    }
    return MT_OK;
}

/* ======================================================================== */
/* Writing, local shapes                                                     */
/* ======================================================================== */

size_t mt_type_format(const mt_mesh *mesh, const mt_type *t, char *buf, size_t cap) {
    return mt_sharding_type_format(mesh, t->dtype, t->ndim, t->shape, &t->sharding, buf, cap);
}

mt_status mt_type_local_shape(const mt_mesh *mesh, const mt_type *t, int64_t *local) {
    return mt_sharding_local_shape(mesh, &t->sharding, t->ndim, t->shape, local);
}
