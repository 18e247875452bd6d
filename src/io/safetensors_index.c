/*
 * safetensors_index.c — model.safetensors.index.json, the map from each
 * tensor's name to the shard that holds it (transformers' sharded save):
 *
 *   {"metadata": {"total_size": 28966928384},
 *    "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors", ...}}
 *
 * The shards are plain file names in the index's directory: a name with a
 * '/' (or "..") is refused, so an index cannot point a run at another
 * directory's files. The map is checked against the shards' own headers
 * both ways after they are read (mt__st_check_index).
 */
#include "base/json.h"
#include "io/io_impl.h"
#include "io/safetensors_impl.h"

#include <stdlib.h>
#include <string.h>

#define WHAT      "safetensors index"
#define MAX_INDEX (256LL << 20)   /* bytes: a 1T-parameter model's map is a few MB */
#define MAX_EXACT 9007199254740992.0

/* The shard `file` of the index at `path` as a path beside it, into *out. */
static mt_status shard_path(const char *path, const char *file, char **out) {
    if (!*file || strchr(file, '/') || !strcmp(file, "..") || !strcmp(file, "."))
        return mt_fail(MT_EFORMAT, WHAT " '%s': shard '%s' is not a file name in the index's "
                       "directory", path, file);
    const char *slash = strrchr(path, '/');
    const size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    char *p = malloc(dir + strlen(file) + 1);
    if (!p) return mt_fail(MT_ENOMEM, "safetensors: a shard's path");
    memcpy(p, path, dir);
    strcpy(p + dir, file);
    *out = p;
    return MT_OK;
}

/* The index's fields into st (the weight map, the shards' paths). */
static mt_status read_map(mt_safetensors *st, const char *path, const mt_json *h) {
    for (int i = 0; i < h->n; i++)
        if (strcmp(h->keys[i], "metadata") && strcmp(h->keys[i], "weight_map"))
            return mt_fail(MT_EFORMAT, WHAT " '%s': unknown field '%s' (an index has metadata "
                           "and weight_map)", path, h->keys[i]);
    const mt_json *meta = mt__json_get(h, "metadata"), *map = mt__json_get(h, "weight_map");
    if (!map || map->type != MT_JSON_OBJ || map->n == 0)
        return mt_fail(MT_EFORMAT, WHAT " '%s': no weight_map object naming each tensor's "
                       "shard", path);
    const mt_json *ts = meta && meta->type == MT_JSON_OBJ ? mt__json_get(meta, "total_size")
                                                          : NULL;
    if (meta && meta->type != MT_JSON_OBJ)
        return mt_fail(MT_EFORMAT, WHAT " '%s': metadata is %s, not an object", path,
                       mt__json_type_name(meta->type));
    if (ts && (ts->type != MT_JSON_NUM || !(ts->num >= 0) || ts->num >= MAX_EXACT ||
               ts->num != (double)(int64_t)ts->num))
        return mt_fail(MT_EFORMAT, WHAT " '%s': metadata.total_size is not a byte count", path);
    st->total_size = ts ? (int64_t)ts->num : -1;
    st->map_names = calloc((size_t)map->n, sizeof *st->map_names);
    st->map_file = calloc((size_t)map->n, sizeof *st->map_file);
    st->paths = calloc((size_t)map->n, sizeof *st->paths);
    if (!st->map_names || !st->map_file || !st->paths)
        return mt_fail(MT_ENOMEM, "safetensors: an index of %d tensors", map->n);
    for (int i = 0; i < map->n; i++) {
        const mt_json *v = map->kids[i];
        if (v->type != MT_JSON_STR)
            return mt_fail(MT_EFORMAT, WHAT " '%s': weight_map['%s'] is %s, not a file name",
                           path, map->keys[i], mt__json_type_name(v->type));
        char *p = NULL;
        mt_status s = shard_path(path, v->str, &p);
        if (s != MT_OK) return s;
        int f = 0;
        while (f < st->n_files && strcmp(st->paths[f], p)) f++;
        if (f == st->n_files) st->paths[st->n_files++] = p;
        else free(p);
        st->map_file[i] = f;
        if (!(st->map_names[i] = strdup(map->keys[i])))
            return mt_fail(MT_ENOMEM, "safetensors: tensor names");
        st->n_map++;
    }
    return MT_OK;
}

mt_status mt__st_open_index(mt_safetensors *st, const char *path) {
    mt_json *h = NULL;
    mt_status s = mt__json_read_file(path, WHAT, MAX_INDEX, true, &h);
    if (s == MT_OK && !(st->index_path = strdup(path)))
        s = mt_fail(MT_ENOMEM, "safetensors: a path");
    if (s == MT_OK) s = read_map(st, path, h);
    mt__json_free(h);
    if (s != MT_OK) return s;
    st->files = calloc((size_t)st->n_files, sizeof *st->files);
    st->data_at = calloc((size_t)st->n_files, sizeof *st->data_at);
    if (!st->files || !st->data_at) return mt_fail(MT_ENOMEM, "safetensors: shards");
    return MT_OK;
}

/* The tensor of st named `name` (the first of its name), or NULL. */
static const mt_st_tensor *find(const mt_safetensors *st, const char *name) {
    for (int i = 0; i < st->n; i++)
        if (!strcmp(st->t[i].name, name)) return &st->t[i];
    return NULL;
}

mt_status mt__st_check_index(const mt_safetensors *st) {
    int64_t total = 0;
    for (int i = 0; i < st->n_map; i++) {
        const mt_st_tensor *t = find(st, st->map_names[i]);
        if (!t)
            return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s' is in no shard (the map names "
                           "'%s')", st->index_path, st->map_names[i],
                           st->paths[st->map_file[i]]);
        if (t->file != st->map_file[i])
            return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s' is in '%s', where the map names "
                           "'%s'", st->index_path, t->name, st->paths[t->file],
                           st->paths[st->map_file[i]]);
    }
    for (int j = 0; j < st->n; j++) {
        const mt_st_tensor *t = &st->t[j];
        int i = 0;
        while (i < st->n_map && strcmp(st->map_names[i], t->name)) i++;
        if (i == st->n_map)
            return mt_fail(MT_EFORMAT, WHAT " '%s': shard '%s' holds tensor '%s', which the map "
                           "does not name", st->index_path, st->paths[t->file], t->name);
        /* the same name in two shards: found above in the first, named here in the other */
        if (t->file != st->map_file[i])
            return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s' is in '%s' too, where the map "
                           "names '%s'", st->index_path, t->name, st->paths[t->file],
                           st->paths[st->map_file[i]]);
        total += t->end - t->begin;
    }
    if (st->total_size >= 0 && st->total_size != total)
        return mt_fail(MT_EFORMAT, WHAT " '%s': metadata.total_size is %lld bytes where the "
                       "shards' tensors hold %lld", st->index_path, (long long)st->total_size,
                       (long long)total);
    return MT_OK;
}

void mt__st_index_free(mt_safetensors *st) {
    for (int i = 0; i < st->n_map; i++) free(st->map_names[i]);
    free(st->map_names), free(st->map_file), free(st->index_path);
}
