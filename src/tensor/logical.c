/*
 * logical.c — logical axes and the rules that map them onto a mesh
 * (MaxText's logical_axis_rules): a model names what each dim of its
 * leaves is ("vocab,embed", "batch,seq"), and a strategy is a table from
 * those names to mesh axes ("mlp=tensor,heads=tensor,batch=data+fsdp").
 * The sharding of a leaf is then data, read off its logical axes and the
 * table (mt_rules_sharding), not a layout written per parameter name.
 *
 * A rule's mesh axes apply to a dim when the mesh has them with a size
 * above 1, no earlier dim of the same tensor took them (a mesh axis splits
 * at most one dim), and their product divides the dim; otherwise the dim
 * (or that axis) stays whole. So one table serves every mesh: a rule for
 * "tensor" does nothing on a mesh without one, and a grouped-query model's
 * kv heads stay whole when they do not divide over the tensor axis.
 */
#include "tensor/tensor_impl.h"
#include "mesh/mesh_impl.h"
#include "meshtrain/sharding.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Logical axes of a tensor                                                  */
/* ======================================================================== */

/* A logical axis name: letters, digits and '_' (not "_" alone, which means
 * none), at most MT_LOGICAL_NAME - 1 bytes. */
static bool name_ok(const char *s, size_t len) {
    if (len == 0 || len >= MT_LOGICAL_NAME || (len == 1 && s[0] == '_')) return false;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_'))
            return false;
    }
    return true;
}

mt_status mt_tensor_set_logical(mt_tensor *t, const char *axes) {
    if (!t || !axes) return mt_fail(MT_EINVAL, "mt_tensor_set_logical: tensor or axes is NULL");
    char names[MT_MAX_DIMS][MT_LOGICAL_NAME];
    int64_t units[MT_MAX_DIMS];
    memset(names, 0, sizeof names);
    for (int d = 0; d < MT_MAX_DIMS; d++) units[d] = 1;
    int dim = 0;
    for (const char *p = axes; *p;) {
        size_t len = strcspn(p, ",");
        if (dim >= t->ndim)
            return mt_fail(MT_EINVAL, "logical axes '%s' of '%s': more names than its %d dim%s; "
                           "give one name a dim ('_' for none)", axes, t->name, t->ndim,
                           t->ndim == 1 ? "" : "s");
        const char *star = memchr(p, '*', len);
        if (star) {   /* "heads*64": the dim is units of 64 elements, split whole */
            char *end;
            long long u = strtoll(star + 1, &end, 10);
            if (end != p + len || u < 1 || t->shape[dim] % u != 0)
                return mt_fail(MT_EINVAL, "logical axes '%s' of '%s': dim %d's unit '%.*s' is "
                               "not a positive count that divides its size %lld", axes, t->name,
                               dim, (int)(p + len - star - 1), star + 1,
                               (long long)t->shape[dim]);
            units[dim] = u;
            len = (size_t)(star - p);
        }
        if (!(len == 1 && p[0] == '_') && len > 0) {
            if (!name_ok(p, len))
                return mt_fail(MT_EINVAL, "logical axes '%s' of '%s': dim %d's name '%.*s' is not "
                               "a name (letters, digits and '_', at most %d bytes; '_' for none)",
                               axes, t->name, dim, (int)len, p, MT_LOGICAL_NAME - 1);
            memcpy(names[dim], p, len);
            for (int e = 0; e < dim; e++)
                if (!strcmp(names[e], names[dim]))
                    return mt_fail(MT_EINVAL, "logical axes '%s' of '%s': '%s' names dims %d and "
                                   "%d; a logical axis names one dim of a tensor", axes, t->name,
                                   names[dim], e, dim);
        }
        p += strcspn(p, ",");
        dim++;
        if (!*p) break;
        p++;   /* the ',' */
    }
    memcpy(t->logical, names, sizeof names);
    memcpy(t->logical_unit, units, sizeof units);
    return MT_OK;
}

const char *mt_tensor_logical(const mt_tensor *t, int dim) {
    return t && dim >= 0 && dim < t->ndim ? t->logical[dim] : "";
}

/* ======================================================================== */
/* Rules                                                                     */
/* ======================================================================== */

/* Adds or replaces the rule for `logical` (len bytes) with mesh axes `mesh`
 * (mlen bytes, '+'-joined; empty: the logical axis stays whole). */
static mt_status put_rule(mt_rules *r, const char *text, const char *logical, size_t len,
                          const char *mesh, size_t mlen) {
    if (!name_ok(logical, len))
        return mt_fail(MT_EINVAL, "rules '%s': '%.*s' is not a logical axis name (letters, "
                       "digits and '_', at most %d bytes)", text, (int)len, logical,
                       MT_LOGICAL_NAME - 1);
    if (mlen >= sizeof r->rule[0].mesh)
        return mt_fail(MT_EINVAL, "rules '%s': the mesh axes of '%.*s' are longer than %zu bytes",
                       text, (int)len, logical, sizeof r->rule[0].mesh - 1);
    for (size_t i = 0; i < mlen;) {   /* each mesh axis a name, '+'-joined */
        size_t a = strcspn(mesh + i, "+");
        if (a > mlen - i) a = mlen - i;
        if (!name_ok(mesh + i, a))
            return mt_fail(MT_EINVAL, "rules '%s': '%.*s=%.*s' names a mesh axis '%.*s' that is "
                           "not a name; join mesh axes with '+' (batch=data+fsdp)", text,
                           (int)len, logical, (int)mlen, mesh, (int)a, mesh + i);
        i += a + 1;
    }
    int k = 0;
    while (k < r->n && (strlen(r->rule[k].logical) != len ||
                        strncmp(r->rule[k].logical, logical, len)))
        k++;
    if (k == r->n) {
        if (r->n == MT_RULES_MAX)
            return mt_fail(MT_EINVAL, "rules '%s': more than %d logical axes", text, MT_RULES_MAX);
        r->n++;
        memset(&r->rule[k], 0, sizeof r->rule[k]);
        memcpy(r->rule[k].logical, logical, len);
    }
    memset(r->rule[k].mesh, 0, sizeof r->rule[k].mesh);
    memcpy(r->rule[k].mesh, mesh, mlen);
    return MT_OK;
}

mt_status mt_rules_parse(const char *text, mt_rules *r) {
    if (!text || !r) return mt_fail(MT_EINVAL, "mt_rules_parse: text or rules is NULL");
    mt_rules out = {0};
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, ",");
        const char *eq = memchr(p, '=', len);
        if (!eq)
            return mt_fail(MT_EINVAL, "rules '%s': '%.*s' is not logical=mesh axes (e.g. "
                           "mlp=tensor, batch=data+fsdp, embed= to keep it whole)", text,
                           (int)len, p);
        for (int k = 0; k < out.n; k++)
            if (strlen(out.rule[k].logical) == (size_t)(eq - p) &&
                !strncmp(out.rule[k].logical, p, (size_t)(eq - p)))
                return mt_fail(MT_EINVAL, "rules '%s': logical axis '%s' has two rules; give "
                               "each one once", text, out.rule[k].logical);
        mt_status s = put_rule(&out, text, p, (size_t)(eq - p), eq + 1, len - (size_t)(eq - p) - 1);
        if (s != MT_OK) return s;
        p += len;
        if (*p) p++;
    }
    *r = out;
    return MT_OK;
}

mt_status mt_rules_merge(mt_rules *base, const mt_rules *over) {
    if (!base || !over) return mt_fail(MT_EINVAL, "mt_rules_merge: rules are NULL");
    for (int k = 0; k < over->n; k++) {
        mt_status s = put_rule(base, "(merged)", over->rule[k].logical,
                               strlen(over->rule[k].logical), over->rule[k].mesh,
                               strlen(over->rule[k].mesh));
        if (s != MT_OK) return s;
    }
    return MT_OK;
}

const char *mt_rules_find(const mt_rules *r, const char *logical) {
    for (int k = 0; r && logical && k < r->n; k++)
        if (!strcmp(r->rule[k].logical, logical)) return r->rule[k].mesh;
    return NULL;
}

size_t mt_rules_format(const mt_rules *r, char *buf, size_t cap) {
    size_t at = 0;
    if (cap) buf[0] = '\0';
    for (int k = 0; r && k < r->n; k++) {
        int w = snprintf(at < cap ? buf + at : NULL, at < cap ? cap - at : 0, "%s%s=%s",
                         k ? "," : "", r->rule[k].logical, r->rule[k].mesh);
        if (w < 0) break;
        at += (size_t)w;
    }
    return at;
}

mt_status mt_rules_sharding(const mt_rules *r, const mt_mesh *mesh, const mt_tensor *t,
                            mt_sharding *out) {
    if (!r || !mesh || !t || !out)
        return mt_fail(MT_EINVAL, "mt_rules_sharding: an argument is NULL");
    mt_sharding sh = {{0}, 0};
    uint32_t used = 0;
    for (int d = 0; d < t->ndim; d++) {
        const char *axes = mt_rules_find(r, t->logical[d]);
        if (!t->logical[d][0] || !axes) continue;
        uint32_t bits = 0;
        int64_t parts = 1, units = t->shape[d] / (t->logical_unit[d] > 0 ? t->logical_unit[d] : 1);
        for (const char *p = axes; *p;) {
            size_t len = strcspn(p, "+");
            int a = mt__mesh_find_axis(mesh, p, len);
            if (a >= 0 && mesh->sizes[a] > 1 && !((used | bits) & (1u << a)) &&
                units % (parts * mesh->sizes[a]) == 0) {
                bits |= 1u << a;
                parts *= mesh->sizes[a];
            }
            p += len;
            if (*p) p++;
        }
        sh.dim_axes[d] = bits;
        used |= bits;
    }
    *out = sh;
    return MT_OK;
}
