/*
 * mesh.c — device meshes: named axes with sizes, device coordinates, groups
 * over a subset of axes. Partition specs over a mesh are in
 * tensor/sharding.c.
 *
 * Device ids are row-major over the axes (the last axis varies fastest), as
 * jax.sharding.Mesh lays out a reshaped device list. A group over axes
 * (a1, ..., ak) is every device that shares the other coordinates; its ranks
 * are row-major in the order the axes were *given* (ak fastest), which is what
 * jax.lax.axis_index returns for a tuple of axis names.
 */
#include "base/base_impl.h"
#include "mesh/mesh_impl.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define MAX_AXIS_SIZE    (1 << 20)
#define MAX_DEVICES      (1 << 20)   /* a whole mesh: what the sizes may multiply to */

/* ======================================================================== */
/* Creation                                                                  */
/* ======================================================================== */

static bool name_ok(const char *s, size_t n) {
    if (n == 0 || n >= MT_MESH_MAX_NAME) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_') return false;
    return true;
}

/* Parses "name=size" entries into m (sizes may hold one -1). */
static mt_status parse_spec(const char *spec, mt_mesh *m) {
    const char *p = spec;
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq)
            return mt_fail(MT_EINVAL, "mesh '%s': axis '%.*s' has no size; write it as name=size "
                           "(e.g. data=2), or name=-1 to fill in the rest", spec, (int)(end - p), p);
        const char *name = p;
        size_t name_len = (size_t)(eq - p);
        while (name_len && isspace((unsigned char)*name)) { name++; name_len--; }
        while (name_len && isspace((unsigned char)name[name_len - 1])) name_len--;
        if (!name_ok(name, name_len))
            return mt_fail(MT_EINVAL, "mesh '%s': axis name '%.*s' is not valid; use 1 to %d "
                           "letters, digits or '_'", spec, (int)name_len, name, MT_MESH_MAX_NAME - 1);
        if (m->ndim == MT_MESH_MAX_AXES)
            return mt_fail(MT_EINVAL, "mesh '%s' has more than %d axes", spec, MT_MESH_MAX_AXES);
        for (int a = 0; a < m->ndim; a++)
            if (strlen(m->names[a]) == name_len && memcmp(m->names[a], name, name_len) == 0)
                return mt_fail(MT_EINVAL, "mesh '%s': axis '%.*s' appears twice; axis names "
                               "must be unique", spec, (int)name_len, name);
        char num[32];
        size_t num_len = (size_t)(end - eq - 1);
        if (num_len == 0)
            return mt_fail(MT_EINVAL, "mesh '%s': axis '%.*s' has no size after '='; write it "
                           "as name=size (e.g. data=2)", spec, (int)name_len, name);
        if (num_len >= sizeof num) {   /* too long for any size: too large, or not a number */
            size_t digits = 0;
            while (digits < num_len && isdigit((unsigned char)eq[1 + digits])) digits++;
            if (digits == num_len)
                return mt_fail(MT_EINVAL, "mesh '%s': size '%.*s' of axis '%.*s' is too large; "
                               "the limit is %d devices per axis", spec, (int)num_len, eq + 1,
                               (int)name_len, name, MAX_AXIS_SIZE);
            return mt_fail(MT_EINVAL, "mesh '%s': the size of axis '%.*s' must be a positive "
                           "integer (or -1: the devices left over), not '%.*s'", spec,
                           (int)name_len, name, (int)num_len, eq + 1);
        }
        memcpy(num, eq + 1, num_len);
        num[num_len] = '\0';
        char *stop;
        errno = 0;
        long v = strtol(num, &stop, 10);
        while (isspace((unsigned char)*stop)) stop++;
        if (*stop || stop == num || (errno && v != LONG_MAX) || (v < 1 && v != -1))
            return mt_fail(MT_EINVAL, "mesh '%s': the size of axis '%.*s' must be a positive "
                           "integer (or -1: the devices left over), not '%s'", spec,
                           (int)name_len, name, num);
        if (v > MAX_AXIS_SIZE)   /* also what strtol clamps an overflow to */
            return mt_fail(MT_EINVAL, "mesh '%s': size '%s' of axis '%.*s' is too large; the "
                           "limit is %d devices per axis", spec, num, (int)name_len, name,
                           MAX_AXIS_SIZE);
        memcpy(m->names[m->ndim], name, name_len);
        m->names[m->ndim][name_len] = '\0';
        m->sizes[m->ndim++] = (int)v;
        p = *end ? end + 1 : end;
        if (*end && !*p)
            return mt_fail(MT_EINVAL, "mesh '%s' ends with ','; remove it", spec);
    }
    return MT_OK;
}

mt_status mt_mesh_spec_devices(const char *spec, int *out) {
    if (!out) return mt_fail(MT_EINVAL, "mt_mesh_spec_devices: out is NULL");
    *out = 0;
    if (!spec || !*spec)
        return mt_fail(MT_EINVAL, "the mesh spec is empty; give its axes with their sizes "
                       "(e.g. data=2), or the number of devices");
    mt_mesh m;
    memset(&m, 0, sizeof m);
    mt_status st = parse_spec(spec, &m);
    if (st != MT_OK) return st;
    /* in double: six sizes of up to 2^20 overflow any integer type but are
     * exact there, so the message says the real product */
    double prod = 1;
    for (int a = 0; a < m.ndim; a++) {
        if (m.sizes[a] == -1)
            return mt_fail(MT_EINVAL, "mesh '%s' leaves axis '%s' to the device count (-1), "
                           "but none was given; give the axis a size, or give the number of "
                           "devices", spec, m.names[a]);
        prod *= m.sizes[a];
    }
    if (prod > MAX_DEVICES)
        return mt_fail(MT_EINVAL, "mesh '%s' has %.0f devices; a mesh has at most %d: make the "
                       "axes smaller", spec, prod, MAX_DEVICES);
    *out = (int)prod;
    return MT_OK;
}

mt_status mt_mesh_create(const char *spec, int n_devices, mt_mesh **out) {
    if (!out) return mt_fail(MT_EINVAL, "mt_mesh_create: out is NULL");
    *out = NULL;
    if (n_devices < 1)
        return mt_fail(MT_EINVAL, "mesh '%s': %d devices; a mesh needs at least 1",
                       spec ? spec : "", n_devices);
    mt_mesh *m = calloc(1, sizeof *m);
    if (!m) return mt_fail(MT_ENOMEM, "mesh: out of memory");
    if (!spec || !*spec) {
        strcpy(m->names[0], "d");
        m->sizes[0] = n_devices;
        m->ndim = 1;
    } else {
        mt_status st = parse_spec(spec, m);
        if (st != MT_OK) { free(m); return st; }
        /* every axis is scanned (a second -1 may come late). Up to 6 sizes
         * of at most 2^20 can overflow an integer: a double holds the
         * product, exact up to 2^53 (far above any device count), so the
         * messages say the real product */
        int fill = -1;
        double prod = 1;
        for (int a = 0; a < m->ndim; a++) {
            if (m->sizes[a] == -1) {
                if (fill >= 0) {
                    st = mt_fail(MT_EINVAL, "mesh '%s': axes '%s' and '%s' are both -1; "
                                 "only one size can be filled in", spec, m->names[fill],
                                 m->names[a]);
                    free(m);
                    return st;
                }
                fill = a;
            } else {
                prod *= m->sizes[a];
            }
        }
        if (fill >= 0) {
            if (prod > n_devices || n_devices % (int)prod != 0) {
                st = mt_fail(MT_EINVAL, "mesh '%s': the other axes multiply to %.0f, which does "
                             "not divide %d devices, so '%s=-1' cannot be filled in",
                             spec, prod, n_devices, m->names[fill]);
                free(m);
                return st;
            }
            m->sizes[fill] = n_devices / (int)prod;
            prod = n_devices;
        }
        if (prod != n_devices) {
            free(m);
            return mt_fail(MT_EINVAL, "mesh '%s' has %.0f devices but %d were given; make the axis "
                           "sizes multiply to %d or use -1 for one axis",
                           spec, prod, n_devices, n_devices);
        }
    }
    m->size = n_devices;
    int stride = 1;
    for (int a = m->ndim - 1; a >= 0; a--) {
        m->strides[a] = stride;
        stride *= m->sizes[a];
    }
    size_t off = 0;
    for (int a = 0; a < m->ndim; a++)
        off += (size_t)mt__text_format(m->spec + off, sizeof m->spec - off, "%s%s=%d",
                                       a ? "," : "", m->names[a], m->sizes[a]);
    *out = m;
    return MT_OK;
}

void mt_mesh_free(mt_mesh *mesh) { free(mesh); }

int mt_mesh_size(const mt_mesh *mesh) { return mesh->size; }
int mt_mesh_ndim(const mt_mesh *mesh) { return mesh->ndim; }
const char *mt_mesh_spec(const mt_mesh *mesh) { return mesh->spec; }

const char *mt_mesh_axis_name(const mt_mesh *mesh, int axis) {
    return axis >= 0 && axis < mesh->ndim ? mesh->names[axis] : "?";
}

int mt_mesh_axis_size(const mt_mesh *mesh, const char *axis) {
    for (int a = 0; a < mesh->ndim; a++)
        if (axis && strcmp(mesh->names[a], axis) == 0) return mesh->sizes[a];
    return 0;
}

void mt_mesh_coords(const mt_mesh *mesh, int device, int *coords) {
    for (int a = 0; a < mesh->ndim; a++)
        coords[a] = device / mesh->strides[a] % mesh->sizes[a];
}

int mt_mesh_device(const mt_mesh *mesh, const int *coords) {
    int d = 0;
    for (int a = 0; a < mesh->ndim; a++) d += coords[a] * mesh->strides[a];
    return d;
}

/* ======================================================================== */
/* Axes and groups                                                           */
/* ======================================================================== */

void mt__mesh_list_axes(const mt_mesh *mesh, char *buf, size_t cap) {
    size_t off = 0;
    buf[0] = '\0';
    for (int a = 0; a < mesh->ndim && off < cap; a++)
        off += (size_t)snprintf(buf + off, cap - off, "%s'%s'", a ? ", " : "", mesh->names[a]);
}

int mt__mesh_find_axis(const mt_mesh *mesh, const char *name, size_t len) {
    for (int a = 0; a < mesh->ndim; a++)
        if (strlen(mesh->names[a]) == len && memcmp(mesh->names[a], name, len) == 0) return a;
    return -1;
}

mt_status mt_mesh_axes(const mt_mesh *mesh, const char *names, mt_axes *out) {
    memset(out, 0, sizeof *out);
    if (!names) return MT_OK;
    const char *p = names;
    while (*p) {
        while (*p == ' ') p++;
        size_t len = strcspn(p, ", ");
        if (len == 0) {
            if (!*p) break;
            return mt_fail(MT_EINVAL, "axes '%s': empty axis name; separate names with ','", names);
        }
        int a = mt__mesh_find_axis(mesh, p, len);
        if (a < 0) {
            char list[256];
            mt__mesh_list_axes(mesh, list, sizeof list);
            return mt_fail(MT_EINVAL, "axes '%s': the mesh '%s' has no axis '%.*s'; its axes are %s",
                           names, mesh->spec, (int)len, p, list);
        }
        for (int i = 0; i < out->n; i++)
            if (out->axis[i] == a)
                return mt_fail(MT_EINVAL, "axes '%s': axis '%.*s' is named twice", names,
                               (int)len, p);
        out->axis[out->n++] = (uint8_t)a;
        p += len;
        while (*p == ' ') p++;
        if (*p == ',') p++;
    }
    return MT_OK;
}

mt_status mt_mesh_axis_set(const mt_mesh *mesh, const char *names, uint32_t *bits) {
    if (!mesh || !bits)
        return mt_fail(MT_EINVAL, "mt_mesh_axis_set: %s is NULL", !mesh ? "mesh" : "bits");
    *bits = 0;
    if (!names) return MT_OK;
    /* a set: the order is the mesh's whatever the text's, so ',' and '+'
     * (a partition spec's "data+fsdp") both separate; every name must be
     * one of the mesh's, once, and none empty (a stray separator is a typo
     * that should not silently name fewer axes) */
    char list[256];
    uint32_t set = 0;
    const char *p = names;
    while (*p == ' ') p++;
    if (!*p) return MT_OK;
    for (;;) {
        size_t len = strcspn(p, ",+ ");
        if (len == 0) {
            mt__mesh_list_axes(mesh, list, sizeof list);
            return mt_fail(MT_EINVAL, "axis set '%s': an empty axis name (at offset %d); "
                           "separate the names of the mesh's axes (%s) with ','", names,
                           (int)(p - names), list);
        }
        int a = mt__mesh_find_axis(mesh, p, len);
        if (a < 0 || (set & (1u << a))) {
            mt__mesh_list_axes(mesh, list, sizeof list);
            if (a < 0)
                return mt_fail(MT_EINVAL, "axis set '%s': the mesh '%s' has no axis '%.*s'; its "
                               "axes are %s", names, mesh->spec, (int)len, p, list);
            return mt_fail(MT_EINVAL, "axis set '%s': axis '%.*s' is named twice; name each of "
                           "the mesh's axes (%s) at most once", names, (int)len, p, list);
        }
        set |= 1u << a;
        p += len;
        while (*p == ' ') p++;
        if (!*p) break;
        if (*p != ',' && *p != '+') {   /* two names with only spaces between */
            mt__mesh_list_axes(mesh, list, sizeof list);
            return mt_fail(MT_EINVAL, "axis set '%s': '%s' follows an axis name without a ','; "
                           "separate the names of the mesh's axes (%s) with ','", names, p,
                           list);
        }
        p++;
        while (*p == ' ') p++;
    }
    *bits = set;
    return MT_OK;
}

mt_status mt_mesh_axes_check(const mt_mesh *mesh, mt_axes axes) {
    if (axes.n < 0 || axes.n > mesh->ndim)
        return mt_fail(MT_EINVAL, "axes: %d axes on the mesh '%s' of %d; resolve names with "
                       "mt_mesh_axes or mt_ctx_axes", axes.n, mesh->spec, mesh->ndim);
    for (int i = 0; i < axes.n; i++) {
        if (axes.axis[i] >= mesh->ndim)
            return mt_fail(MT_EINVAL, "axes: axis %d does not exist on the mesh '%s'; resolve "
                           "names with mt_mesh_axes or mt_ctx_axes", axes.axis[i], mesh->spec);
        for (int j = 0; j < i; j++)
            if (axes.axis[j] == axes.axis[i])
                return mt_fail(MT_EINVAL, "axes: axis '%s' appears twice",
                               mesh->names[axes.axis[i]]);
    }
    return MT_OK;
}

int mt_mesh_group_size(const mt_mesh *mesh, mt_axes axes) {
    int n = 1;
    for (int i = 0; i < axes.n; i++) n *= mesh->sizes[axes.axis[i]];
    return n;
}

int mt_mesh_group_rank(const mt_mesh *mesh, mt_axes axes, int device) {
    int rank = 0;
    for (int i = 0; i < axes.n; i++) {
        int a = axes.axis[i];
        rank = rank * mesh->sizes[a] + device / mesh->strides[a] % mesh->sizes[a];
    }
    return rank;
}

int mt_mesh_group(const mt_mesh *mesh, mt_axes axes, int device, int *members) {
    /* the device with every coordinate of `axes` zeroed, then walk the ranks */
    int base = device;
    for (int i = 0; i < axes.n; i++) {
        int a = axes.axis[i];
        base -= device / mesh->strides[a] % mesh->sizes[a] * mesh->strides[a];
    }
    int P = mt_mesh_group_size(mesh, axes);
    for (int r = 0; r < P; r++) {
        int d = base, rest = r;
        for (int i = axes.n - 1; i >= 0; i--) {
            int a = axes.axis[i];
            d += rest % mesh->sizes[a] * mesh->strides[a];
            rest /= mesh->sizes[a];
        }
        members[r] = d;
    }
    return P;
}
