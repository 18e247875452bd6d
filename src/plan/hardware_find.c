/*
 * hardware_find.c — finding a shipped description by name: the search
 * path of meshtrain/plan.h.
 */
#include "meshtrain/plan.h"

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

mt_status mt_hardware_find(const char *name, mt_hardware **out, char *found_path, size_t found_n) {
    if (!out) return mt_fail(MT_EINVAL, "mt_hardware_find: out is NULL");
    *out = NULL;
    if (!name || !name[0])
        return mt_fail(MT_EINVAL, "no hardware named: give a name such as h100-sxm or a path");
    size_t len = strlen(name);
    char path[4096];
    if (strchr(name, '/') || (len > 5 && strcmp(name + len - 5, ".json") == 0)) {
        snprintf(path, sizeof path, "%s", name);
    } else {
        const char *dirs[4];
        int n = mt_hardware_dirs(dirs, 4);
        bool found = false;
        char searched[2048] = "";
        for (int i = 0; i < n && !found; i++) {
            struct stat st;
            snprintf(path, sizeof path, "%s/%s.json", dirs[i], name);
            found = stat(path, &st) == 0;
            size_t k = strlen(searched);
            snprintf(searched + k, sizeof searched - k, "%s%s", k ? ", " : "", dirs[i]);
        }
        if (!found)
            return mt_fail(MT_EIO, "no hardware description '%s' in %s; the shipped ones are "
                           "a100-80gb, h100-sxm, h200, b200, tpu-v4p, tpu-v5e, tpu-v5p, tpu-v6e "
                           "(set MESHTRAIN_HARDWARE_DIR to add a folder, or give a path)",
                           name, n ? searched : "no folder (none compiled in, none set)");
    }
    mt_status s = mt_hardware_load(path, out);
    if (s == MT_OK && found_path && found_n) snprintf(found_path, found_n, "%s", path);
    return s;
}
