/*
 * io_impl.h — what the io layer's files share (files.c): opening an input
 * without ever blocking on it, and the temporary file every save writes
 * through. The public side of the same rules is in meshtrain/io.h
 * (mt_file_detect, mt_file_tmp_path, mt_file_check_save).
 */
#ifndef MT_IO_IMPL_H
#define MT_IO_IMPL_H

#include "meshtrain/backend.h"
#include "meshtrain/io.h"
#include "meshtrain/files.h"

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

/* Refuses to load a save's temporary file as the `what` ("checkpoint"),
 * naming the file to load instead. MT_OK for any other name. */
mt_status mt__file_check_not_tmp(const char *path, const char *what);

/* Reads n floats from f's current position, in chunks, and looks for the
 * first value that is not finite (the CRC only says bytes are as written).
 * MT_OK: all finite, f just past them. MT_ENAN: *bad and *value say which;
 * MT_EIO: a short read (*err: errno, or 0 when the file shrank); MT_ENOMEM.
 * Sets no message: the caller names the file and the tensor. */
mt_status mt__scan_finite(FILE *f, int64_t n, int64_t *bad, float *value, int *err);

/* Tensor values and optimizer state between a file and a backend's buffer
 * (backend_io.c), through a host chunk and the backend's copy_out/copy_in:
 * write `bytes` bytes of `src` at f's position, adding them to *crc when
 * crc is not NULL; read `bytes` bytes from f's position into `dst`.
 * MT_EIO on a short write or read, *err its errno (0 when the file ended);
 * MT_ENOMEM; or the backend's failure (its message set). Sets no message
 * for the first two: the caller names the file and the tensor. */
mt_status mt__fwrite_backend(FILE *f, const mt_backend *be, const void *src, size_t bytes,
                             uint32_t *crc, int *err);
mt_status mt__fread_backend(FILE *f, const mt_backend *be, void *dst, size_t bytes, int *err);

/* A save in progress: the claimed output and its temporary file, open. */
typedef struct {
    mt_output *out;   /* the claim written through */
    mt_output *own;   /* the same, when the save claimed it itself (closed at the end) */
    FILE      *f;     /* the temporary file */
} mt__save;

/* Starts a save to `path` (`what` names it in messages) through `claim`,
 * or, when claim is NULL, through a claim of its own made now (refused as
 * mt_output_claim refuses: not a regular file, a temporary name, another
 * run writing it). sv->f is the emptied temporary file. */
mt_status mt__save_begin(const char *path, const char *what, mt_output *claim, mt__save *sv);

/* Ends a save: `ok` false means a write failed with errno `err`. Commits
 * (mt_output_commit: fsync, rename, the previous file untouched on any
 * failure) and releases a claim the save made itself. */
mt_status mt__save_end(mt__save *sv, bool ok, int err);

/* ------------------------------------------------------------------------ */
/* Other programs' fp32 weight files (weights.c: llmc.c, llama2c.c)          */
/* ------------------------------------------------------------------------ */

/* In the messages below `what` names the file kind ("llm.c checkpoint"),
 * `path` the file and `name` the tensor. */

/* Writes a shape as "(768,2304)" into buf (size bytes), as a tensor's
 * mt__shape_str (tensor/tensor_impl.h) writes it. */
void mt__dims_str(const int64_t *shape, int ndim, char *buf, size_t size);
/* A parameter that takes a file's tensor is f32 (MT_EUNSUPPORTED) and has
 * storage (MT_ESTATE: the graph is not compiled). */
mt_status mt__weights_check_storage(mt_tensor *t, const char *what, const char *path);
/* Reads n floats at f's position and checks they are finite
 * (mt__scan_finite): MT_ENAN naming the element, MT_EIO, MT_ENOMEM. */
mt_status mt__weights_scan(FILE *f, int64_t n, const char *what, const char *path,
                           const char *name);
/* Reads n floats at f's position into t's storage, through its backend. */
mt_status mt__weights_read(FILE *f, mt_tensor *t, int64_t n, const char *what,
                           const char *path);
/* Ends a save whose writing returned s (errno err for MT_EIO): commits it
 * when s is MT_OK, else leaves the previous file and says why. */
mt_status mt__weights_save_end(mt__save *sv, mt_status s, int err, const char *what,
                               const char *path);

/* ------------------------------------------------------------------------ */
/* Datasets' files (token_files.c, shards.c: dataset.c reads through them)   */
/* ------------------------------------------------------------------------ */

/* llm.c's token files: a header of 256 int32 (magic, version, token
 * count), then the tokens, little-endian: uint16 (GPT-2's, magic 20240520
 * version 1) or uint32 (its Llama 3 files, magic 20240801 version 7: llm.c's
 * dev/data/data_common.py HEADERS_INFO, for vocabularies past 65,536). */
#define MT__TOKENS_MAGIC        20240520
#define MT__TOKENS_VERSION      1
#define MT__TOKENS32_MAGIC      20240801
#define MT__TOKENS32_VERSION    7
#define MT__TOKENS_HEADER_INTS  256

/* A file tokens are read from, checked at open and held open until
 * closed. */
typedef struct {
    char    *path;
    int      fd;       /* read-only, close-on-exec */
    int64_t  size;     /* bytes, as opened: a file that changes size is refused on read */
    int64_t  header;   /* bytes before token 0: 1024 (llm.c), 0 (text) */
    int      width;    /* bytes a token: 2 (llm.c uint16), 4 (llm.c uint32), 1 (text: token
                          = byte) */
    int64_t  n;        /* tokens */
} mt__tokfile;

/* Opens `path` as an llm.c token file, checking its header against its
 * size (MT_EFORMAT naming the file: short, bad version, a count that is not
 * the file's), or, unless `shard`, as text. A shard must be a token file.
 * MT_EIO as mt_input_open (missing, not a regular file). */
mt_status mt__tokfile_open(const char *path, bool shard, mt__tokfile *tf);
void      mt__tokfile_close(mt__tokfile *tf);
/* What one pass over a file's tokens found (mt__tokfile_scan). */
typedef struct {
    int     vocab;       /* the vocabulary the tokens need: max + 1; 256 for text */
    int     max_id;      /* the largest token; -1 when not read (text, no bound below 256) */
    int64_t first_bad;   /* the index of the first token >= the bound; -1: none */
    int     bad_id;      /* that token */
} mt__tokscan;
/* Reads every token of tf once, with pread in 1 MiB chunks (the pages are
 * never mapped into the process), for the vocabulary they need and, when
 * bound > 0, the first token >= bound. Text is read only for a bound
 * below 256. MT_EIO naming the file when a read fails. */
mt_status mt__tokfile_scan(const mt__tokfile *tf, int bound, mt__tokscan *out);

/* The bounded window of mappings over a set of token files (the caller
 * keeps `files` alive). Safe to read from many threads at once. */
typedef struct mt__tokmap mt__tokmap;
mt_status mt__tokmap_create(const mt__tokfile *files, int n_files, mt__tokmap **out);
void      mt__tokmap_free(mt__tokmap *m);
/* out (n) = tokens [first, first+n) of file f (first + n <= its n), through
 * the mapping window (pread where a block cannot be mapped). MT_EIO naming
 * the file when it cannot be read or has changed size since it was opened. */
mt_status mt__tokmap_read(mt__tokmap *m, int f, int64_t first, int64_t n, int32_t *out);
/* Blocks mapped now (for tests: the window stays bounded). */
int       mt__tokmap_mapped(mt__tokmap *m);

/* The shards a directory or glob names (shards.c): the *_train_*.bin and
 * *_val_*.bin of directory `path` (other files are skipped), or the matches
 * of glob `path` (one that is neither: MT_EINVAL naming it); MT_EIO when
 * nothing matches or there is no train shard. As mt_dataset_shards gives
 * them: *n new strings in *paths (mt_dataset_shards_free), the *n_train
 * train shards in name order, then the val shards. */
mt_status mt__shard_paths(const char *path, char ***paths, int *n, int *n_train);

/* Blocks of ds's files mapped now (for tests: the window stays bounded). */
int       mt__dataset_mapped(const mt_dataset *ds);

#endif /* MT_IO_IMPL_H */
