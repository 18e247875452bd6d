/*
 * hardware_find.c — finding a shipped description or fabric by name: the
 * search path of meshtrain/plan.h; and putting a fabric in place of a
 * description's scale-out level.
 */
#include "meshtrain/plan.h"
#include "plan/plan_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Compiled in by CMakeLists.txt; empty when built without it. */
#ifndef MT_HARDWARE_INSTALL_DIR
#define MT_HARDWARE_INSTALL_DIR ""
#endif
#ifndef MT_HARDWARE_SOURCE_DIR
#define MT_HARDWARE_SOURCE_DIR ""
#endif

int mt_hardware_dirs(const char **dirs, int max) {
    const char *all[] = {getenv("MESHTRAIN_HARDWARE_DIR"), MT_HARDWARE_INSTALL_DIR,
                         MT_HARDWARE_SOURCE_DIR};
    int n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] && all[i][0] && n < max) dirs[n++] = all[i];
    return n;
}

/* The path of `name` into path[cap]: as it is when it has a '/' or ends in
 * ".json", else the first <dir><sub>/<name>.json that exists; false (with
 * the folders searched in searched[scap]) when none does. */
static bool locate(const char *name, const char *sub, char *path, size_t cap, char *searched,
                   size_t scap) {
    size_t len = strlen(name);
    searched[0] = '\0';
    if (strchr(name, '/') || (len > 5 && strcmp(name + len - 5, ".json") == 0)) {
        snprintf(path, cap, "%s", name);
        return true;
    }
    const char *dirs[4];
    int n = mt_hardware_dirs(dirs, 4);
    for (int i = 0; i < n; i++) {
        struct stat st;
        snprintf(path, cap, "%s%s/%s.json", dirs[i], sub, name);
        if (stat(path, &st) == 0) return true;
        size_t k = strlen(searched);
        snprintf(searched + k, scap - k, "%s%s%s", k ? ", " : "", dirs[i], sub);
    }
    if (!n) snprintf(searched, scap, "no folder (none compiled in, none set)");
    return false;
}

mt_status mt_hardware_find(const char *name, mt_hardware **out, char *found_path, size_t found_n) {
    if (!out) return mt_fail(MT_EINVAL, "mt_hardware_find: out is NULL");
    *out = NULL;
    if (!name || !name[0])
        return mt_fail(MT_EINVAL, "no hardware named: give a name such as h100-sxm or a path");
    char path[4096], searched[2048];
    if (!locate(name, "", path, sizeof path, searched, sizeof searched))
        return mt_fail(MT_EIO, "no hardware description '%s' in %s; the shipped ones are "
                       "v100-32gb, a100-40gb, a100-80gb, h100-pcie, h100-sxm, h100-96gb, h200, "
                       "b200, tpu-v4p, tpu-v5e, tpu-v5p, tpu-v6e (set MESHTRAIN_HARDWARE_DIR "
                       "to add a folder, or give a path)", name, searched);
    mt_status s = mt_hardware_load(path, out);
    if (s == MT_OK && found_path && found_n) snprintf(found_path, found_n, "%s", path);
    return s;
}

mt_status mt_hardware_set_fabric(mt_hardware *hw, const char *name, char *found_path,
                                 size_t found_n) {
    if (!hw) return mt_fail(MT_EINVAL, "mt_hardware_set_fabric: hw is NULL");
    if (!name || !name[0])
        return mt_fail(MT_EINVAL, "no fabric named: give a name such as ib-ndr or a path");
    const int top = hw->n_levels - 1;
    if (hw->n_levels < 2 || hw->levels[0].kind == MT_LINK_THREADS ||
        hw->levels[top].topology != MT_TOPO_SWITCH)
        return mt_fail(MT_EINVAL, "fabric '%s': hardware '%s' has no scale-out level to "
                       "replace (a fabric takes the place of the outermost level, a switch "
                       "above a node or a slice; this one has %d level%s, the outermost a %s "
                       "of %s)", name, hw->name, hw->n_levels, hw->n_levels == 1 ? "" : "s",
                       mt_topology_name(hw->levels[top].topology),
                       mt_link_kind_name(hw->levels[top].kind));
    char path[4096], searched[2048];
    if (!locate(name, "/fabrics", path, sizeof path, searched, sizeof searched))
        return mt_fail(MT_EINVAL, "no fabric '%s' in %s; the shipped ones are ib-hdr, ib-ndr, "
                       "opa, roce (or give a path to a fabric file)", name, searched);
    mt_hw_level lv;
    char fname[64];
    mt_status s = mt__fabric_load(path, &lv, fname, sizeof fname);
    if (s) return s;
    /* the chip file's bound on its outermost level stands (as many as wanted) */
    lv.devices = hw->levels[top].devices;
    hw->levels[top] = lv;
    snprintf(hw->fabric, sizeof hw->fabric, "%s", fname);
    /* "+<fabric>", as much as fits (the names are short: h100-sxm+ib-hdr) */
    size_t k = strlen(hw->name);
    for (size_t j = 0; k + 1 < sizeof hw->name && (j == 0 || fname[j - 1]); j++)
        hw->name[k++] = j ? fname[j - 1] : '+';
    hw->name[k < sizeof hw->name ? k : sizeof hw->name - 1] = '\0';
    if (found_path && found_n) snprintf(found_path, found_n, "%s", path);
    return MT_OK;
}
