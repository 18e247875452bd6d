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
 *     writes ("<path>.tmp") be another of the command's files. The inputs
 *     of a dataset given as a directory or a glob of shards are its shards.
 *     The one pair allowed is the one a file declares in `may_equal`: `train
 *     --ckpt-in X --ckpt-out X` resumes a run in place (the save replaces X
 *     only once the new checkpoint is complete).
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

#include "meshtrain.h"

#include <stdbool.h>
#include <stdint.h>
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
    /* An input that may name llm.c shards (--data DIR or a glob,
     * mt_dataset_is_sharded): every shard it names is an input of its own,
     * which no output may be. */
    bool          dataset;
    /* An output checked by stat only, creating and claiming nothing: under
     * mpirun every rank checks the same path at the same time, and one
     * rank's claim would be another's "another run is writing it". The type
     * and the directory are checked. */
    bool          stat_only;
} cli_file;

/* Checks the n files of a command as said above. Returns CLI_EXIT_OK, or,
 * after printing one line naming the flags and paths, CLI_EXIT_USAGE (two
 * flags name the same file, an output is a shard of a dataset, a temporary
 * name given as an output) or CLI_EXIT_FAIL (an output that cannot be
 * written: the system's message; another run writing it; a "<path>.tmp"
 * that no save left). Touches no file but the temporary ones it claims and
 * releases (and a stale "<path>.tmp" a killed save left, empty or the start
 * of a file meshtrain saves, which it removes: meshtrain/files.h). A
 * dataset's shards that cannot be listed are left to the dataset's open,
 * which says why. */
int cli_check_files(const cli_file *files, int n);

/* For `meshtrain train`: checks that the file of --data, --ckpt-in or
 * --llmc-in (`flag`) is a regular file (never blocking on a FIFO) and is not
 * the kind of file another of those flags takes: an llm.c checkpoint given
 * as --ckpt-in says "use --llmc-in". Files of no known kind pass (the loader
 * says what is wrong with them). Returns CLI_EXIT_OK, CLI_EXIT_FAIL (cannot
 * be opened, not a regular file) or CLI_EXIT_USAGE (the wrong flag), after
 * printing the message. */
int cli_check_input_kind(const char *flag, const char *path);

/* For `meshtrain train` under mpirun (MT_TRANSPORT_MPI for cfg->transport,
 * more than one rank; with or without a mesh: a rank without one would
 * train alone), before step 1. Every rank passes the exit code of its own
 * start-up checks (files, inputs, flags) and gets back the same agreed one:
 * rank 0's when it failed, else the lowest failing rank's (rank 0 then
 * prints a line naming that rank; the rank printed its own message). When
 * every rank passed, the ranks also compare the settings every one must
 * share (cli_agree_record_make: the model, batch, steps, optimizer, seed,
 * mesh and strategies, precision, the inputs' contents, which outputs are
 * given; not --threads, --metrics, --quiet, --profile or the output paths);
 * when they differ every rank gets CLI_EXIT_USAGE, and rank 0 prints one
 * line naming the first setting that differs, its value on rank 0 and on
 * the lowest rank that differs, e.g. "the ranks disagree on --layers: rank
 * 0 has 2, rank 1 has 3; every rank must run the same command". Else
 * CLI_EXIT_OK. So either every rank starts the work or none does, and all
 * exit alike. The exchange is one launch of the mpi transport, bounded by
 * MT_COMM_TIMEOUT: an all-gather of each rank's exit code and its record's
 * hash, and of the records themselves only when the hashes differ; when it
 * fails (CLI_EXIT_FAIL after a message) nobody starts. Off MPI it returns
 * rc. agree.c. */
int cli_agree_train(int rc, const mt_train_config *cfg, const char *tokenizer);

/* A rank's settings as text, one a line, "key\tvalue\tshown\n": key the
 * flag ("--layers"), value what is compared ("2"), shown what a message says
 * instead when not empty (an input's path with its size and checksum). hash
 * is FNV-1a over the keys and values. */
typedef struct {
    char    *text;   /* NUL-terminated, len bytes; the caller frees it (cli_agree_record_free) */
    size_t   len;
    uint64_t hash;
} cli_agree_record;

/* Writes the record of cfg as resolved (the model's settings after
 * --tokenizer, whose file is `tokenizer` or NULL) on a launch of `world`
 * ranks (what --devices 0 means on a mesh). Inputs are compared by size and
 * a checksum of their first and last 64 KiB (shards: their names too), not
 * by path. Returns CLI_EXIT_OK, or CLI_EXIT_FAIL when out of memory (rec
 * then empty). agree_config.c. */
int  cli_agree_record_make(const mt_train_config *cfg, const char *tokenizer, int world,
                           cli_agree_record *rec);
void cli_agree_record_free(cli_agree_record *rec);

/* Whether records a (rank 0's) and b (rank rank_b's) differ; if so, msg
 * gets the first setting that differs and both values: "--layers: rank 0
 * has 2, rank 1 has 3". */
bool cli_agree_record_diff(const char *a, const char *b, int rank_b, char *msg, size_t n);

/* Flushes f. On the first failure of a stream, stores its errno in *err
 * (EIO when the stream had failed earlier without one). Returns false
 * when the stream has failed, now or before. */
bool cli_flush(FILE *f, int *err);

#endif /* MT_CLI_FILES_H */
