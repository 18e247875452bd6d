/*
 * meshtrain/files.h — the contract every file of every command keeps (base
 * layer, src/base/files.c): how an input is opened and how an output is
 * written. Checkpoints, llm.c files, traces, report pictures, schedule
 * SVG/JSON and machine files all go through it, so the rules are said and
 * kept in one place:
 *
 * Inputs (mt_input_open):
 *   - must be a regular file: a directory, FIFO, socket or device is refused
 *     saying what it is, and the open never blocks (a FIFO opened for reading
 *     waits for a writer, forever if none comes);
 *   - are size-checked before a byte is read: a file over the reader's limit
 *     is refused at once (reading /dev/zero or a 40 GB file by mistake would
 *     take minutes before failing);
 *   - fail with one line that names what the file was for, the path and
 *     what is wrong with it.
 *
 * Outputs (mt_output_*):
 *   - are claimed before any work starts (mt_output_claim): the target must
 *     be a regular file or a new name, never a temporary name; its
 *     temporary file "<path>.tmp" is created, which proves the directory
 *     exists and is writable and the name is not too long, and locked
 *     (flock, advisory) for as long as the claim is held. A second process
 *     claiming the same output finds the lock and is refused with a message
 *     saying another run is writing it: two runs never delete each other's
 *     temporary files.
 *   - are written to the temporary file and renamed over the target only
 *     when complete and fsynced (mt_output_begin, mt_output_commit), so a
 *     crash, a full disk or a failed write leaves the previous file whole.
 *   - fail independently: a failed commit of one output does not touch any
 *     other claim, so the caller can still write its other outputs.
 *   - a released claim (mt_output_close) removes its temporary file; a
 *     killed process leaves an empty "<path>.tmp", unlocked, or the start
 *     of the file it was saving, which the next claim takes over. An
 *     unlocked "<path>.tmp" that is neither empty nor starts as a file
 *     meshtrain saves (a checkpoint, an llm.c checkpoint or token file, a
 *     trace, a machine file, an SVG picture) is not meshtrain's: the claim
 *     refuses it (MT_EIO) and leaves it as it is.
 *
 * Names ending in MT_TMP_SUFFIX (".tmp", and ".tmp.<digits>", the
 * per-process temporary names of meshtrain 0.1.0) belong to saves: claims
 * refuse them as targets, and loaders refuse them as inputs.
 */
#ifndef MESHTRAIN_FILES_H
#define MESHTRAIN_FILES_H

#include "meshtrain/base.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The suffix of every save's temporary file. */
#define MT_TMP_SUFFIX ".tmp"

/* ======================================================================== */
/* Inputs                                                                    */
/* ======================================================================== */

/* Opens `path` for reading if it is a regular file of at most max_bytes
 * bytes (max_bytes <= 0: no limit). `what` names the file in messages
 * ("trace", "schedule", "machine file"; NULL: the path alone). The open does
 * not block. Fills *size (may be NULL) with the file's size. Fails, with a
 * message naming `what` and the path, with MT_EIO: missing or unreadable
 * (the system's message), not a regular file (says what it is, and for a
 * directory that a file inside it is wanted), or larger than max_bytes
 * (says both sizes). MT_EINVAL for a NULL or empty path. */
mt_status mt_input_open(const char *path, const char *what, int64_t max_bytes, FILE **f,
                        int64_t *size);

/* Reads the whole of `path` (as mt_input_open, same limit) into a new
 * NUL-terminated buffer *text (free() it) of *len bytes (may be NULL). A
 * file shorter or longer than its size said fails with MT_EIO. */
mt_status mt_input_read_all(const char *path, const char *what, int64_t max_bytes, char **text,
                            size_t *len);

/* True when `path` is a save's temporary name (see above); writes the name
 * of the file it was saving into real[n] when real is not NULL. */
bool mt_file_is_tmp(const char *path, char *real, size_t n);

/* "a directory", "a FIFO (named pipe)", "a character device", ...: what a
 * file of this st_mode is, for messages ("not a regular file" for anything
 * else). */
const char *mt_file_type_name(unsigned mode);

/* ======================================================================== */
/* Outputs                                                                   */
/* ======================================================================== */

/* A claimed output: its path, its locked temporary file. */
typedef struct mt_output mt_output;

/* Claims `path` as an output (`what` names it in messages: "checkpoint",
 * "trace", "picture"). Refuses, naming the path: an empty path or a
 * temporary name (MT_EINVAL: the command line alone is wrong), a path that
 * exists and is not a regular file (MT_EIO: a rename over /dev/null as root
 * replaces the device node), a temporary name holding a file that no save
 * left (MT_EIO: not empty, not the start of a file meshtrain saves),
 * a temporary file that cannot be created (MT_EIO, the system's message: a
 * missing or read-only directory, a name too long), and a temporary file
 * locked by another process (MT_EBUSY: "another run is writing it").
 * `path` itself is not touched. */
mt_status mt_output_claim(const char *path, const char *what, mt_output **out);

/* Starts writing the next version of the output: *f is the temporary file,
 * emptied. Write to it with stdio, then call mt_output_commit (never
 * fclose *f). MT_ESTATE when a write is already open or the claim was lost
 * (see mt_output_commit). */
mt_status mt_output_begin(mt_output *o, FILE **f);

/* Ends the write begun by mt_output_begin. ok true: flushes, fsyncs and
 * renames the temporary file over the path, fsyncs the directory, then
 * claims the temporary name again for the next version. ok false (the
 * caller's write failed with errno `err`, 0 when unknown) or any failure
 * here: the temporary file is emptied and the previous file is untouched;
 * MT_EIO names both files and the system's message. A claim that another
 * process took over between the rename and the new claim is lost: this
 * commit succeeds, and the next mt_output_begin fails with MT_EBUSY. */
mt_status mt_output_commit(mt_output *o, bool ok, int err);

/* Releases the claim: removes the temporary file (aborting a write in
 * progress) and frees o. NULL is a no-op. */
void mt_output_close(mt_output *o);

/* The path claimed, and its temporary name. */
const char *mt_output_path(const mt_output *o);
const char *mt_output_tmp_path(const mt_output *o);

/* Writes a whole output through an existing claim: begin, write(f, arg),
 * commit. `write` returns MT_OK or a failure with its message; a stream
 * error (a full disk) fails the commit with the system's message. */
mt_status mt_output_write(mt_output *o, mt_status (*write)(FILE *f, void *arg), void *arg);

#ifdef __cplusplus
}
#endif

#endif /* MESHTRAIN_FILES_H */
