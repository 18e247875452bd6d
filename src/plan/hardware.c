/*
 * hardware.c — the strict reader of hardware descriptions
 * (meshtrain/plan.h; the format is docs/planning.md's "Hardware
 * descriptions"). The file is parsed into a tree (base/json.h), then each
 * field is checked in plain code, so every message names the field's path.
 */
#include "meshtrain/plan.h"
#include "meshtrain/files.h"
#include "base/json.h"
#include "plan/plan_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILE_BYTES (1 << 20)
#define MAX_LEVEL_DEVICES 1000000000   /* a level's "devices" */
/* The range of every sourced number: rates as small as 1e-12 a second
 * still leave the planner's times finite (a step's 1e20 FLOPs over 1e-12
 * FLOP/s of 1e-12 of a peak is 1e44 s), and as large as 1e24 its products
 * (chips x peak x step); 1e-300 would make them infinite. */
#define SOURCED_MIN 1e-12
#define SOURCED_MAX 1e24

static const char *const DTYPES[MT_HW_N_DTYPES + 1] = {"fp32", "tf32", "bf16", "fp8", "int8",
                                                        "fp16", NULL};
static const char *const KINDS[MT_LINK_N_KINDS] = {"threads", "nvlink", "infiniband", "ethernet",
                                                   "ici", "dcn", "pcie", "omnipath"};
static const char *const TOPOS[] = {"switch", "ring", "torus"};

const char *mt_hw_dtype_name(mt_hw_dtype d) { return d >= 0 && d < MT_HW_N_DTYPES ? DTYPES[d] : "?"; }
const char *mt_link_kind_name(mt_link_kind k) { return k >= 0 && k < MT_LINK_N_KINDS ? KINDS[k] : "?"; }
const char *mt_topology_name(mt_topology t) { return t >= 0 && t <= MT_TOPO_TORUS ? TOPOS[t] : "?"; }

/* The checking context: the file, for messages. */
typedef struct {
    const char *path;
    bool        fabric;   /* a fabric file (hardware/fabrics/), not a hardware file */
} ck;

static mt_status field_fail(const ck *c, const char *field, const char *what) {
    return mt_fail(MT_EFORMAT, "%s file '%s': %s %s; see docs/planning.md, \"%s\"",
                   c->fabric ? "fabric" : "hardware", c->path, field, what,
                   c->fabric ? "Fabrics" : "Hardware descriptions");
}

/* Refuses keys of `obj` that are not in the NULL-terminated `known`. */
static mt_status only_keys(const ck *c, const mt_json *obj, const char *where,
                           const char *const *known) {
    for (int i = 0; i < obj->n; i++) {
        const char *const *k = known;
        while (*k && strcmp(*k, obj->keys[i])) k++;
        if (!*k) {
            char f[160];
            snprintf(f, sizeof f, "%s%s%s", where, *where ? "." : "", obj->keys[i]);
            return field_fail(c, f, "is not a known key: remove it or fix its spelling");
        }
    }
    return MT_OK;
}

/* The member `key` of obj, of type `type`; missing and optional: *out NULL. */
static mt_status member(const ck *c, const mt_json *obj, const char *where, const char *key,
                        mt_json_type type, bool optional, const mt_json **out) {
    char f[160];
    snprintf(f, sizeof f, "%s%s%s", where, *where ? "." : "", key);
    const mt_json *j = mt__json_get(obj, key);
    *out = j;
    if (!j) return optional ? MT_OK : field_fail(c, f, "is missing: add it");
    if (j->type != type) {
        char w[96];
        snprintf(w, sizeof w, "is %s, want %s", mt__json_type_name(j->type), mt__json_type_name(type));
        return field_fail(c, f, w);
    }
    return MT_OK;
}

/* A sourced number {"value": v, "source": "..."} at obj.key: v finite and
 * > 0, and <= 1 when `fraction`. Missing and optional: *v = 0. */
static mt_status sourced(const ck *c, const mt_json *obj, const char *where, const char *key,
                         bool optional, bool fraction, double *v) {
    static const char *const KEYS[] = {"value", "source", NULL};
    char f[160];
    snprintf(f, sizeof f, "%s%s%s", where, *where ? "." : "", key);
    const mt_json *j, *val, *src;
    mt_status s = member(c, obj, where, key, MT_JSON_OBJ, optional, &j);
    *v = 0;
    if (s || !j) return s;
    if ((s = only_keys(c, j, f, KEYS))) return s;
    if ((s = member(c, j, f, "value", MT_JSON_NUM, false, &val))) return s;
    if (!mt__json_get(j, "source"))
        return field_fail(c, f, "has no \"source\": say where the number comes from "
                                "(a datasheet, a chapter of the scaling book, a measurement)");
    if ((s = member(c, j, f, "source", MT_JSON_STR, false, &src))) return s;
    if (!src->str[0]) return field_fail(c, f, "has an empty \"source\": say where it comes from");
    if (!isfinite(val->num) || val->num <= 0)
        return field_fail(c, f, "must be a positive finite number");
    if (val->num < SOURCED_MIN || val->num > SOURCED_MAX) {
        char w[160];
        snprintf(w, sizeof w, "is %g, outside [%g, %g]: no chip or link is that %s, and the "
                 "planner's times would not be finite", val->num, SOURCED_MIN, SOURCED_MAX,
                 val->num < SOURCED_MIN ? "slow or small" : "fast or large");
        return field_fail(c, f, w);
    }
    if (fraction && val->num > 1)
        return field_fail(c, f, "is a fraction of a peak and must lie in (0, 1]");
    *v = val->num;
    return MT_OK;
}

static mt_status read_string(const ck *c, const mt_json *obj, const char *where, const char *key,
                             char *buf, size_t cap) {
    const mt_json *j;
    mt_status s = member(c, obj, where, key, MT_JSON_STR, false, &j);
    if (s) return s;
    if (!j->str[0] || strlen(j->str) >= cap) {
        char w[64];
        snprintf(w, sizeof w, "must be a string of 1 to %zu characters", cap - 1);
        return field_fail(c, key, w);
    }
    strcpy(buf, j->str);
    return MT_OK;
}

/* Index of `name` in names[n], or -1. */
static int lookup(const char *const *names, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return i;
    return -1;
}

static mt_status read_torus(const ck *c, const mt_json *lv, const char *where, mt_hw_level *l) {
    const mt_json *dims, *wrap;
    char f[160];
    mt_status s;
    if ((s = member(c, lv, where, "dims", MT_JSON_ARR, false, &dims))) return s;
    if ((s = member(c, lv, where, "wrap", MT_JSON_ARR, false, &wrap))) return s;
    snprintf(f, sizeof f, "%s.dims", where);
    if (dims->n < 1 || dims->n > MT_HW_MAX_DIMS)
        return field_fail(c, f, "must list 1 to 4 axis sizes");
    if (wrap->n != dims->n) {
        snprintf(f, sizeof f, "%s.wrap", where);
        return field_fail(c, f, "must have one true/false per axis of \"dims\"");
    }
    /* "devices" is at most 1e9 and each dim at most 1e6, so a product past
       1e9 cannot agree with it: stop there, before four dims of 1e6 would
       overflow a 64-bit product */
    long long prod = 1;
    for (int i = 0; i < dims->n; i++) {
        const mt_json *d = dims->kids[i], *w = wrap->kids[i];
        if (d->type != MT_JSON_NUM || d->num < 1 || d->num > 1e6 || d->num != floor(d->num))
            return field_fail(c, f, "must hold whole numbers from 1 to 1000000");
        if (w->type != MT_JSON_BOOL) {
            snprintf(f, sizeof f, "%s.wrap", where);
            return field_fail(c, f, "must hold true or false");
        }
        l->dims[i] = (int)d->num;
        l->wrap[i] = w->b;
        prod *= l->dims[i];
        if (prod > MAX_LEVEL_DEVICES) {
            char m[160];
            snprintf(m, sizeof m, "multiply to more than %d, the most a level's \"devices\" "
                     "may be (\"devices\" is %d): make them agree", MAX_LEVEL_DEVICES,
                     l->devices);
            return field_fail(c, f, m);
        }
    }
    l->n_dims = dims->n;
    if (prod != l->devices) {
        char w[96];
        snprintf(w, sizeof w, "multiply to %lld but \"devices\" is %d: make them agree", prod,
                 l->devices);
        return field_fail(c, f, w);
    }
    double sw;
    if ((s = sourced(c, lv, where, "slice_wrap", true, false, &sw))) return s;
    if (sw != floor(sw) || sw > 1e6) {
        snprintf(f, sizeof f, "%s.slice_wrap", where);
        return field_fail(c, f, "must be a whole number >= 1 (a slice axis wraps when its "
                                "size is a multiple of it)");
    }
    l->slice_wrap = (int)sw;
    return MT_OK;
}

/* A level's four sourced link figures (a hardware file's level, a fabric's). */
static mt_status read_link(const ck *c, const mt_json *lv, const char *where, mt_hw_level *l) {
    mt_status s;
    if ((s = sourced(c, lv, where, "link_bandwidth", false, false, &l->link_bandwidth))) return s;
    if ((s = sourced(c, lv, where, "links", false, false, &l->links))) return s;
    if ((s = sourced(c, lv, where, "latency", false, false, &l->latency))) return s;
    return sourced(c, lv, where, "collective_fraction", false, true, &l->collective_fraction);
}

static mt_status read_level(const ck *c, const mt_json *lv, int i, bool outermost,
                            mt_hw_level *l) {
    static const char *const KEYS[] = {"kind", "topology", "devices", "dims", "wrap", "slice_wrap",
                                       "link_bandwidth", "links", "latency",
                                       "collective_fraction", "note", NULL};
    char where[32], f[64];
    snprintf(where, sizeof where, "levels[%d]", i);
    if (lv->type != MT_JSON_OBJ) return field_fail(c, where, "must be an object");
    const mt_json *kind, *topo, *dev;
    mt_status s;
    if ((s = only_keys(c, lv, where, KEYS))) return s;
    if ((s = member(c, lv, where, "kind", MT_JSON_STR, false, &kind))) return s;
    int k = lookup(KINDS, MT_LINK_N_KINDS, kind->str);
    snprintf(f, sizeof f, "%s.kind", where);
    if (k < 0)
        return field_fail(c, f, "is not one of threads, nvlink, infiniband, ethernet, ici, dcn, "
                                "pcie, omnipath");
    l->kind = (mt_link_kind)k;
    if ((s = member(c, lv, where, "topology", MT_JSON_STR, false, &topo))) return s;
    int t = lookup(TOPOS, 3, topo->str);
    snprintf(f, sizeof f, "%s.topology", where);
    if (t < 0) return field_fail(c, f, "is not one of switch, ring, torus");
    l->topology = (mt_topology)t;
    if ((s = member(c, lv, where, "devices", MT_JSON_NUM, false, &dev))) return s;
    snprintf(f, sizeof f, "%s.devices", where);
    if (dev->num != floor(dev->num) || dev->num < (outermost ? 0 : 1) ||
        dev->num > MAX_LEVEL_DEVICES)
        return field_fail(c, f, outermost ? "must be a whole number >= 0 (0: unbounded)"
                                          : "must be a whole number >= 1 (only the outermost "
                                            "level may be 0, unbounded)");
    l->devices = (int)dev->num;
    if (l->topology == MT_TOPO_TORUS) {
        if ((s = read_torus(c, lv, where, l))) return s;
    } else if (mt__json_get(lv, "dims") || mt__json_get(lv, "wrap") ||
               mt__json_get(lv, "slice_wrap")) {
        snprintf(f, sizeof f, "%s.%s", where,
                 mt__json_get(lv, "dims") ? "dims" : mt__json_get(lv, "wrap") ? "wrap" : "slice_wrap");
        return field_fail(c, f, "belongs to a torus only: remove it or make the topology \"torus\"");
    }
    return read_link(c, lv, where, l);
}

static mt_status read_chip(const ck *c, const mt_json *root, mt_hardware *hw) {
    static const char *const CHIP[] = {"flops", "hbm_bytes", "hbm_bandwidth", "note", NULL};
    static const char *const ACH[] = {"gemm", "hbm", "gemm_tile_m", "gemm_tile_n",
                                      "gemm_units", "kernel_overhead", "note", NULL};
    const mt_json *chip, *flops, *ach;
    mt_status s;
    if ((s = member(c, root, "", "chip", MT_JSON_OBJ, false, &chip))) return s;
    if ((s = only_keys(c, chip, "chip", CHIP))) return s;
    if ((s = member(c, chip, "chip", "flops", MT_JSON_OBJ, false, &flops))) return s;
    if ((s = only_keys(c, flops, "chip.flops", DTYPES))) return s;
    /* bf16 is required, unless the chip has none and gives fp16 (V100): its
     * 16-bit products, which the planner's bf16 precision then runs at */
    const bool fp16_only = !mt__json_get(flops, "bf16") && mt__json_get(flops, "fp16");
    for (int d = 0; d < MT_HW_N_DTYPES; d++)
        if ((s = sourced(c, flops, "chip.flops", DTYPES[d],
                         d != (fp16_only ? MT_HW_FP16 : MT_HW_BF16), false, &hw->peak_flops[d])))
            return s;
    if (fp16_only) {
        hw->peak_flops[MT_HW_BF16] = hw->peak_flops[MT_HW_FP16];
        hw->products16_fp16 = true;
    }
    if ((s = sourced(c, chip, "chip", "hbm_bytes", false, false, &hw->hbm_bytes))) return s;
    if ((s = sourced(c, chip, "chip", "hbm_bandwidth", false, false, &hw->hbm_bandwidth))) return s;
    if ((s = member(c, root, "", "achievable", MT_JSON_OBJ, false, &ach))) return s;
    if ((s = only_keys(c, ach, "achievable", ACH))) return s;
    if ((s = sourced(c, ach, "achievable", "gemm", false, true, &hw->gemm_fraction))) return s;
    /* the tile and wave quantization of products: all three or none */
    if ((s = sourced(c, ach, "achievable", "gemm_tile_m", true, false, &hw->gemm_tile_m)) ||
        (s = sourced(c, ach, "achievable", "gemm_tile_n", true, false, &hw->gemm_tile_n)) ||
        (s = sourced(c, ach, "achievable", "gemm_units", true, false, &hw->gemm_units)))
        return s;
    if ((hw->gemm_tile_m > 0) != (hw->gemm_tile_n > 0) || (hw->gemm_tile_m > 0) != (hw->gemm_units > 0))
        return field_fail(c, "achievable", "gives some of gemm_tile_m, gemm_tile_n and "
                                           "gemm_units: give all three or none");
    if ((s = sourced(c, ach, "achievable", "kernel_overhead", true, false, &hw->kernel_overhead)))
        return s;
    return sourced(c, ach, "achievable", "hbm", false, true, &hw->hbm_fraction);
}

static mt_status read_root(const ck *c, const mt_json *root, mt_hardware *hw) {
    static const char *const KEYS[] = {"format", "name", "description", "chip", "achievable",
                                       "levels", NULL};
    const mt_json *fmt, *levels;
    mt_status s;
    if (root->type != MT_JSON_OBJ) return field_fail(c, "the file", "must hold one JSON object");
    if ((s = only_keys(c, root, "", KEYS))) return s;
    if ((s = member(c, root, "", "format", MT_JSON_STR, false, &fmt))) return s;
    if (strcmp(fmt->str, MT__HARDWARE_FORMAT))
        return field_fail(c, "format", "is not \"" MT__HARDWARE_FORMAT "\": this reader knows "
                                       "only that version");
    if ((s = read_string(c, root, "", "name", hw->name, sizeof hw->name))) return s;
    if ((s = read_string(c, root, "", "description", hw->description, sizeof hw->description)))
        return s;
    if ((s = read_chip(c, root, hw))) return s;
    if ((s = member(c, root, "", "levels", MT_JSON_ARR, false, &levels))) return s;
    if (levels->n < 1 || levels->n > MT_HW_MAX_LEVELS)
        return field_fail(c, "levels", "must list 1 to 8 mesh levels, innermost first");
    hw->n_levels = levels->n;
    for (int i = 0; i < levels->n; i++) {
        if ((s = read_level(c, levels->kids[i], i, i == levels->n - 1, &hw->levels[i]))) return s;
        int inner = i ? hw->levels[i - 1].devices : 1, mine = hw->levels[i].devices;
        if (i && mine && (mine <= inner || mine % inner)) {
            char f[32], w[160];
            snprintf(f, sizeof f, "levels[%d].devices", i);
            snprintf(w, sizeof w, "is %d but must be a multiple of levels[%d].devices, %d, "
                     "and larger: a level spans whole instances of the one inside it", mine,
                     i - 1, inner);
            return field_fail(c, f, w);
        }
    }
    return MT_OK;
}

mt_status mt_hardware_load(const char *path, mt_hardware **out) {
    if (!out) return mt_fail(MT_EINVAL, "mt_hardware_load: out is NULL");
    *out = NULL;
    mt_json *root;
    mt_status s = mt__json_read_file(path, "hardware file", MAX_FILE_BYTES, false, &root);
    if (s) return s;
    mt_hardware *hw = calloc(1, sizeof *hw);
    if (!hw) s = mt_fail(MT_ENOMEM, "hardware file '%s': out of memory", path);
    else if (root->type == MT_JSON_OBJ && mt__json_get(root, "sgemm_gflops")) {
        mt__json_free(root);
        root = NULL;
        s = mt__hardware_from_machine(path, hw);
    } else s = read_root(&(ck){.path = path}, root, hw);
    mt__json_free(root);
    if (s) { free(hw); return s; }
    *out = hw;
    return MT_OK;
}

void mt_hardware_free(mt_hardware *hw) { free(hw); }

/* ---- fabric files ------------------------------------------------------------ */

/* A fabric joins nodes: the kinds a scale-out level may be. */
static bool joins_nodes(mt_link_kind k) {
    return k == MT_LINK_INFINIBAND || k == MT_LINK_ETHERNET || k == MT_LINK_OMNIPATH ||
           k == MT_LINK_DCN;
}

static mt_status read_fabric(const ck *c, const mt_json *root, mt_hw_level *lv, char *name,
                             size_t name_n) {
    static const char *const KEYS[] = {"format", "name", "description", "level", NULL};
    static const char *const LEVEL[] = {"kind", "link_bandwidth", "links", "latency",
                                        "collective_fraction", "note", NULL};
    const mt_json *fmt, *level, *kind;
    char description[256];
    mt_status s;
    if (root->type != MT_JSON_OBJ) return field_fail(c, "the file", "must hold one JSON object");
    if ((s = only_keys(c, root, "", KEYS))) return s;
    if ((s = member(c, root, "", "format", MT_JSON_STR, false, &fmt))) return s;
    if (strcmp(fmt->str, MT__FABRIC_FORMAT))
        return field_fail(c, "format", "is not \"" MT__FABRIC_FORMAT "\": this reader knows "
                                        "only that version");
    if ((s = read_string(c, root, "", "name", name, name_n))) return s;
    if ((s = read_string(c, root, "", "description", description, sizeof description))) return s;
    if ((s = member(c, root, "", "level", MT_JSON_OBJ, false, &level))) return s;
    if ((s = only_keys(c, level, "level", LEVEL))) return s;
    if ((s = member(c, level, "level", "kind", MT_JSON_STR, false, &kind))) return s;
    int k = lookup(KINDS, MT_LINK_N_KINDS, kind->str);
    if (k < 0 || !joins_nodes((mt_link_kind)k))
        return field_fail(c, "level.kind", "is not one of infiniband, ethernet, omnipath, dcn "
                                            "(a fabric joins nodes)");
    *lv = (mt_hw_level){.kind = (mt_link_kind)k, .topology = MT_TOPO_SWITCH, .devices = 0};
    return read_link(c, level, "level", lv);
}

mt_status mt__fabric_load(const char *path, mt_hw_level *lv, char *name, size_t name_n) {
    mt_json *root;
    mt_status s = mt__json_read_file(path, "fabric file", MAX_FILE_BYTES, false, &root);
    if (s) return s;
    s = read_fabric(&(ck){.path = path, .fabric = true}, root, lv, name, name_n);
    mt__json_free(root);
    return s;
}
