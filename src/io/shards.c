/*
 * shards.c — llm.c's sharded corpora: which files a directory or a glob
 * names, and which split each one is.
 *
 * llm.c's data scripts (dev/data/fineweb.py and the others) write a corpus
 * as shards of at most 100M tokens named <name>_val_000000.bin (the first
 * shard, held out) and <name>_train_000001.bin, ... . --data DIR takes every
 * *_train_*.bin and *_val_*.bin in DIR; --data 'DIR/fineweb_*.bin' (quoted,
 * so that the shell leaves it alone) takes the glob's matches, each of which
 * must be one or the other. Shards of a split are read in name order, as one
 * stream of tokens.
 */
#include "io/io_impl.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool mt_dataset_is_sharded(const char *path) {
    if (!path || !*path) return false;
    struct stat st;
    if (stat(path, &st) == 0) return S_ISDIR(st.st_mode);
    return strpbrk(path, "*?[") != NULL;
}

/* The split a shard's file name says: 0 train, 1 val, -1 neither. */
static int split_of(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n < 4 || strcmp(base + n - 4, ".bin") != 0) return -1;
    if (strstr(base, "_val_")) return 1;
    if (strstr(base, "_train_")) return 0;
    return -1;
}

/* The shards of a directory or glob, split 0 train and 1 val. */
typedef struct {
    char **path[2];
    int    n[2];
} shard_list;

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void shard_list_free(shard_list *l) {
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < l->n[s]; i++) free(l->path[s][i]);
        free(l->path[s]);
        l->path[s] = NULL;
        l->n[s] = 0;
    }
}

/* Appends a copy of `path` to split `s` of l. */
static mt_status add(shard_list *l, int s, const char *path) {
    char **p = realloc(l->path[s], (size_t)(l->n[s] + 1) * sizeof *p);
    if (!p) return mt_fail(MT_ENOMEM, "no memory for the list of shards");
    l->path[s] = p;
    if (!(p[l->n[s]] = strdup(path))) return mt_fail(MT_ENOMEM, "no memory for the list of shards");
    l->n[s]++;
    return MT_OK;
}

static mt_status list_dir(const char *dir, shard_list *l) {
    DIR *d = opendir(dir);
    if (!d) return mt_fail(MT_EIO, "cannot list dataset directory '%s': %s", dir, strerror(errno));
    mt_status s = MT_OK;
    struct dirent *e;
    while (s == MT_OK && (e = readdir(d)) != NULL) {
        int sp = split_of(e->d_name);
        if (sp < 0) continue;   /* the directory may hold other things (a tokenizer, logs) */
        char path[PATH_MAX];
        int w = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (w < 0 || (size_t)w >= sizeof path)
            s = mt_fail(MT_EINVAL, "shard '%s' in '%s': the path is too long", e->d_name, dir);
        else
            s = add(l, sp, path);
    }
    closedir(d);
    return s;
}

static mt_status list_glob(const char *pattern, shard_list *l) {
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);   /* an unreadable directory matches nothing */
    if (rc == GLOB_NOMATCH) {
        globfree(&g);
        return mt_fail(MT_EIO, "dataset pattern '%s' matches no file; give a text file, an "
                       "llm.c token file, or a directory or glob of llm.c shards "
                       "(*_train_*.bin, *_val_*.bin)", pattern);
    }
    if (rc != 0) {
        globfree(&g);
        return mt_fail(MT_EIO, "cannot expand dataset pattern '%s': %s", pattern,
                       rc == GLOB_NOSPACE ? "out of memory" : "a read error");
    }
    mt_status s = MT_OK;
    for (size_t i = 0; s == MT_OK && i < g.gl_pathc; i++) {
        int sp = split_of(g.gl_pathv[i]);
        if (sp < 0)
            s = mt_fail(MT_EINVAL, "dataset pattern '%s' matches '%s', which is neither a train "
                        "shard (*_train_*.bin) nor a val shard (*_val_*.bin); narrow the "
                        "pattern to the shards", pattern, g.gl_pathv[i]);
        else
            s = add(l, sp, g.gl_pathv[i]);
    }
    globfree(&g);
    return s;
}

/* Lists the shards of `path` (mt__shard_paths says which and how it fails),
 * each split in name order. */
static mt_status shard_list_make(const char *path, shard_list *l) {
    memset(l, 0, sizeof *l);
    struct stat st;
    bool dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    mt_status s = dir ? list_dir(path, l) : list_glob(path, l);
    if (s == MT_OK && l->n[0] == 0)
        s = dir ? mt_fail(MT_EIO, "dataset '%s' is a directory with no llm.c train shards in it "
                          "(files named *_train_*.bin, as llm.c's data scripts write them); "
                          "give a text file, an llm.c token file, or a directory of shards", path)
                : mt_fail(MT_EIO, "dataset pattern '%s' matches no train shard (*_train_*.bin), "
                          "only %d val shard%s; include the train shards", path, l->n[1],
                          l->n[1] == 1 ? "" : "s");
    if (s != MT_OK) {
        shard_list_free(l);
        return s;
    }
    for (int sp = 0; sp < 2; sp++)
        if (l->n[sp] > 1) qsort(l->path[sp], (size_t)l->n[sp], sizeof *l->path[sp], by_name);
    return MT_OK;
}

mt_status mt__shard_paths(const char *path, char ***paths, int *n, int *n_train) {
    *paths = NULL;
    *n = *n_train = 0;
    shard_list l;
    mt_status s = shard_list_make(path, &l);
    if (s != MT_OK) return s;
    /* one array: the train shards' names, then the val shards', each moved */
    int total = l.n[0] + l.n[1];
    char **p = malloc((size_t)total * sizeof *p);
    if (!p) {
        shard_list_free(&l);
        return mt_fail(MT_ENOMEM, "no memory for the list of shards");
    }
    memcpy(p, l.path[0], (size_t)l.n[0] * sizeof *p);
    if (l.n[1]) memcpy(p + l.n[0], l.path[1], (size_t)l.n[1] * sizeof *p);
    free(l.path[0]);   /* the names now belong to p */
    free(l.path[1]);
    *paths = p;
    *n_train = l.n[0];
    *n = total;
    return MT_OK;
}

mt_status mt_dataset_shards(const char *path, char ***paths, int *n) {
    if (!paths || !n) return mt_fail(MT_EINVAL, "mt_dataset_shards: paths or n is NULL");
    *paths = NULL;
    *n = 0;
    if (!path) return mt_fail(MT_EINVAL, "mt_dataset_shards: path is NULL");
    int n_train;
    return mt__shard_paths(path, paths, n, &n_train);
}

void mt_dataset_shards_free(char **paths, int n) {
    for (int i = 0; paths && i < n; i++) free(paths[i]);
    free(paths);
}
