/*
 * io_impl.h — what the io layer's files share (files.c): opening an input
 * without ever blocking on it, and the temporary file every save writes
 * through. The public side of the same rules is in meshtrain/io.h
 * (mt_file_detect, mt_file_tmp_path, mt_file_check_save).
 */
#ifndef MT_IO_IMPL_H
#define MT_IO_IMPL_H

#include "meshtrain/io.h"

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

/* "a directory", "a FIFO (named pipe)", "a character device", ...: what a
 * file that is not a regular file is, for messages. */
const char *mt__file_type_name(mode_t mode);

/* Opens `path` for reading if it is a regular file. The open does not block
 * (O_NONBLOCK, cleared once the type is known), so a FIFO or a device is
 * refused instead of waiting forever for a writer. `what` names the file in
 * messages ("checkpoint", "dataset"; NULL: the path alone). Fills *size when not NULL. Fails with
 * MT_EIO (missing, unreadable: the system's message) or MT_EINVAL (not a
 * regular file: says what it is). */
mt_status mt__file_open_read(const char *path, const char *what, FILE **out, int64_t *size);

/* True when `path` is the temporary file of a save: it ends in ".tmp", or in
 * ".tmp.<digits>" (the per-process names of meshtrain 0.1.0). Writes the
 * name of the file the save was writing (the path without the suffix) into
 * real[n] when real is not NULL. */
bool mt__file_is_tmp(const char *path, char *real, size_t n);

/* Refuses to load a save's temporary file as the `what` ("checkpoint"),
 * naming the file to load instead. MT_OK for any other name. */
mt_status mt__file_check_not_tmp(const char *path, const char *what);

/* Reads n floats from f's current position, in chunks, and looks for the
 * first value that is not finite (the CRC only says bytes are as written).
 * MT_OK: all finite, f just past them. MT_ENAN: *bad and *value say which;
 * MT_EIO: a short read (*err: errno, or 0 when the file shrank); MT_ENOMEM.
 * Sets no message: the caller names the file and the tensor. */
mt_status mt__scan_finite(FILE *f, int64_t n, int64_t *bad, float *value, int *err);

/* A save in progress: the temporary file, open for writing. */
typedef struct {
    char *tmp;    /* "<path>.tmp", owned */
    FILE *f;
} mt__save;

/* Starts a save to `path` (`what` names it in messages): refuses a target
 * that exists and is not a regular file (a save renames over its target,
 * which would replace a device node or a FIFO) or that is itself a
 * temporary name, removes a stale temporary file left by a killed save, and
 * creates "<path>.tmp" exclusively (never following a link planted there). */
mt_status mt__save_begin(const char *path, const char *what, mt__save *sv);

/* Ends a save: flushes, fsyncs, closes, renames the temporary file over
 * `path` and fsyncs the directory, so a crash leaves the previous file or
 * the new one. `ok` false (a write failed with errno `err`) or any failure
 * here removes the temporary file and fails with MT_EIO naming both files
 * and the system's message; the previous file is untouched. Frees sv->tmp. */
mt_status mt__save_end(const char *path, const char *what, mt__save *sv, bool ok, int err);

#endif /* MT_IO_IMPL_H */
