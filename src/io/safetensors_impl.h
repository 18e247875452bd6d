/*
 * safetensors_impl.h — what safetensors.c (the files' headers and reads)
 * and safetensors_index.c (model.safetensors.index.json) share: the handle.
 */
#ifndef MT_SAFETENSORS_IMPL_H
#define MT_SAFETENSORS_IMPL_H

#include "meshtrain/io.h"

#include <stdio.h>

struct mt_safetensors {
    int           n_files;
    char        **paths;       /* [n_files] */
    FILE        **files;       /* [n_files] */
    int64_t      *data_at;     /* [n_files]: each data section's offset, 8 + N */
    int           n;           /* tensors, in the order of their files and offsets */
    mt_st_tensor *t;           /* [n] */
    int           n_meta;
    char        **meta;        /* [2·n_meta]: key, value (the first file's __metadata__) */
    /* an index's weight map: tensor name -> file, and its total_size */
    char        **map_names;   /* [n_map] */
    int          *map_file;    /* [n_map] */
    int           n_map;
    int64_t       total_size;  /* -1: not given */
    char         *index_path;
};

/* Reads the index at `path` into st: the weight map, and st->paths (one a
 * distinct shard, in the order the map first names them; n_files set).
 * MT_EFORMAT naming the index and the entry; MT_EIO; MT_ENOMEM. */
mt_status mt__st_open_index(mt_safetensors *st, const char *path);

/* After every shard's header is read: each tensor of the map in the shard
 * it names, each shard's tensors in the map, total_size the sum of the
 * tensors' bytes. MT_EFORMAT naming the tensor, the index and the shard. */
mt_status mt__st_check_index(const mt_safetensors *st);

/* Frees the index's part of st. */
void mt__st_index_free(mt_safetensors *st);

/* "(2,3)": a tensor's shape for messages. */
typedef struct { char s[160]; } mt__st_shape_text;
mt__st_shape_text mt__st_shape_str(const mt_st_tensor *t);

#endif /* MT_SAFETENSORS_IMPL_H */
