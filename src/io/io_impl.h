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

#endif /* MT_IO_IMPL_H */
