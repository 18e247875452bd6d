/*
 * files.h — the files a command reads and writes, checked before it does any
 * work (files.c), and the checks of its output streams while it runs.
 *
 * The rules, for every command:
 *   - An output is a regular file or a new name. A path that exists and is
 *     anything else (/dev/null, /dev/full, a FIFO, a directory) is refused:
 *     a save renames over its target, which replaces a device node, and a
 *     log written to a FIFO blocks.
 *   - An output may not be the same file as an input or as another output,
 *     compared by device and inode (stat), so "./a" and "a", symbolic links
 *     and hard links are all caught; nor may the temporary file a save
 *     writes ("<path>.tmp") be another of the command's files. The one pair
 *     allowed is the one a file declares in `may_equal`: `train --ckpt-in X
 *     --ckpt-out X` resumes a run in place (the save replaces X only once the
 *     new checkpoint is complete).
 *   - Every output is tried the way it will be written: a save is claimed
 *     and released (mt_file_check_save: meshtrain/files.h's contract, so a
 *     path another run is writing is refused here), a log is opened for
 *     appending or created and removed; a missing or read-only directory, or
 *     a name too long once ".tmp" is added, fails here and not after the run.
 *     The library then claims the saves for the whole run (mt_trainer_create)
 *     and the metrics log is locked when opened (metrics.c).
 */
#ifndef MT_CLI_FILES_H
#define MT_CLI_FILES_H

#include <stdbool.h>
#include <stdio.h>

typedef enum {
    CLI_FILE_IN,     /* read */
    CLI_FILE_SAVE,   /* written to "<path>.tmp", then renamed over it (checkpoints) */
    CLI_FILE_LOG     /* written in place, truncated or appended (metrics, csv, trace) */
} cli_file_role;

typedef struct {
    const char   *flag;        /* without "--": "ckpt-out" */
    const char   *path;        /* NULL: the flag was not given, and the entry is skipped */
    cli_file_role role;
    const char   *may_equal;   /* the flag of a file this one may be, or NULL */
    /* An output checked by stat only, creating and claiming nothing: under
     * mpirun every rank checks the same path at the same time, and one
     * rank's claim would be another's "another run is writing it". The type
     * and the directory are checked. */
    bool          stat_only;
} cli_file;

/* Checks the n files of a command as said above. Returns CLI_EXIT_OK, or,
 * after printing one line naming the flags and paths, CLI_EXIT_USAGE (two
 * flags name the same file, a temporary name given as an output) or
 * CLI_EXIT_FAIL (an output that cannot be written: the system's message;
 * another run writing it). Touches no file but the temporary ones it claims
 * and releases (and a stale "<path>.tmp" of a save, which it removes). */
int cli_check_files(const cli_file *files, int n);

/* For `meshtrain train`: checks that the file of --data, --ckpt-in or
 * --llmc-in (`flag`) is a regular file (never blocking on a FIFO) and is not
 * the kind of file another of those flags takes: an llm.c checkpoint given
 * as --ckpt-in says "use --llmc-in". Files of no known kind pass (the loader
 * says what is wrong with them). Returns CLI_EXIT_OK, CLI_EXIT_FAIL (cannot
 * be opened, not a regular file) or CLI_EXIT_USAGE (the wrong flag), after
 * printing the message. */
int cli_check_input_kind(const char *flag, const char *path);

/* Under mpirun (on_mpi: the command's devices are the world's ranks, more
 * than one), every rank passes the exit code of its own start-up checks
 * (files, inputs, flags) and gets back the same agreed one: rank 0's when it
 * failed, else the lowest failing rank's (rank 0 then prints a line naming
 * that rank; the rank printed its own message), else CLI_EXIT_OK. So either
 * every rank starts the work or none does, and all exit alike. The exchange
 * is one launch of the mpi transport, bounded by MT_COMM_TIMEOUT; when it
 * fails (CLI_EXIT_FAIL after a message) nobody starts. Off MPI it returns
 * rc. agree.c. */
int cli_agree_start(int rc, bool on_mpi);

/* Flushes f. On the first failure of a stream, stores its errno in *err
 * (EIO when the stream had failed earlier without one). Returns false
 * when the stream has failed, now or before. */
bool cli_flush(FILE *f, int *err);

#endif /* MT_CLI_FILES_H */
