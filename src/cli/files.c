/*
 * files.c — a command's files, checked before it does any work (see files.h
 * for the rules). Everything here runs before the first step of a run, so a
 * mistake costs a message instead of a run, or the file it would overwrite.
 */
#include "cli/files.h"
#include "cli/args.h"
#include "meshtrain/files.h"
#include "meshtrain.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ======================================================================== */
/* Which file a path names                                                   */
/* ======================================================================== */

/* A file is its device and inode. A name that does not exist yet is its
 * directory's device and inode plus its last component, so that two spellings
 * of one new output ("out/m.jsonl" and "out/../out/m.jsonl") still match. */
typedef struct {
    bool  known;     /* false: neither the file nor its directory could be stat'ed */
    bool  exists;
    dev_t dev;
    ino_t ino;
    char  base[NAME_MAX + 1];   /* the last component, when !exists */
} file_id;

/* The directory holding `path` ("." for a bare name) into dir[n]; returns
 * the last component. */
static const char *split_dir(const char *path, char *dir, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, n, ".");
    else snprintf(dir, n, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    return slash ? slash + 1 : path;
}

static file_id id_of(const char *path) {
    file_id id;
    memset(&id, 0, sizeof id);
    struct stat st;
    if (stat(path, &st) == 0) {
        id.known = id.exists = true;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
        return id;
    }
    if (errno != ENOENT) return id;
    char dir[PATH_MAX];
    const char *base = split_dir(path, dir, sizeof dir);
    if (strlen(base) > NAME_MAX || stat(dir, &st) != 0) return id;
    id.known = true;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    snprintf(id.base, sizeof id.base, "%s", base);
    return id;
}

static bool same_file(const file_id *a, const file_id *b) {
    return a->known && b->known && a->exists == b->exists && a->dev == b->dev &&
           a->ino == b->ino && (a->exists || strcmp(a->base, b->base) == 0);
}

static bool may_be(const cli_file *a, const cli_file *b) {
    return (a->may_equal && strcmp(a->may_equal, b->flag) == 0) ||
           (b->may_equal && strcmp(b->may_equal, a->flag) == 0);
}

/* " (the same file under another name)" when the spellings differ */
static const char *other_name(const char *a, const char *b) {
    return strcmp(a, b) == 0 ? "" : " (the same file under another name)";
}

/* An output (or a save's temporary file) that is a shard of a dataset input
 * given as a directory or a glob: ids/tmp_ids as check_same_files made them.
 * Shards that cannot be listed are the dataset open's to report. */
static int check_shards(const cli_file *files, int n, const file_id *ids,
                        const file_id *tmp_ids) {
    for (int j = 0; j < n; j++) {
        const cli_file *d = &files[j];
        if (!d->path || d->role != CLI_FILE_IN || !d->dataset || !mt_dataset_is_sharded(d->path))
            continue;
        char **shard;
        int n_shards;
        if (mt_dataset_shards(d->path, &shard, &n_shards) != MT_OK) continue;
        int rc = CLI_EXIT_OK;
        for (int k = 0; k < n_shards && rc == CLI_EXIT_OK; k++) {
            file_id sid = id_of(shard[k]);
            for (int i = 0; i < n && rc == CLI_EXIT_OK; i++) {
                const cli_file *a = &files[i];
                if (!a->path || a->role == CLI_FILE_IN) continue;
                if (same_file(&ids[i], &sid)) {
                    cli_error("--%s '%s' is the same file as shard '%s' of --%s '%s'%s: writing "
                              "it would destroy the shard; give --%s another name", a->flag,
                              a->path, shard[k], d->flag, d->path, other_name(a->path, shard[k]),
                              a->flag);
                    rc = CLI_EXIT_USAGE;
                } else if (a->role == CLI_FILE_SAVE && same_file(&tmp_ids[i], &sid)) {
                    cli_error("--%s '%s' is saved through the temporary file '%s%s', which is "
                              "shard '%s' of --%s '%s': the save would overwrite it; give --%s "
                              "another name", a->flag, a->path, a->path, MT_TMP_SUFFIX, shard[k],
                              d->flag, d->path, a->flag);
                    rc = CLI_EXIT_USAGE;
                }
            }
        }
        mt_dataset_shards_free(shard, n_shards);
        if (rc != CLI_EXIT_OK) return rc;
    }
    return CLI_EXIT_OK;
}

/* Two flags that name one file, or a save's temporary file that is another
 * flag's file; the output is named first. */
static int check_same_files(const cli_file *files, int n) {
    file_id ids[16], tmp_ids[16];
    if (n > 16) n = 16;   /* no command has more */
    for (int i = 0; i < n; i++) {
        if (!files[i].path) continue;
        ids[i] = id_of(files[i].path);
        char tmp[PATH_MAX];
        memset(&tmp_ids[i], 0, sizeof tmp_ids[i]);
        if (files[i].role == CLI_FILE_SAVE &&
            mt_file_tmp_path(files[i].path, tmp, sizeof tmp) == MT_OK)
            tmp_ids[i] = id_of(tmp);
    }
    for (int i = 0; i < n; i++) {
        const cli_file *a = &files[i];
        if (!a->path || a->role == CLI_FILE_IN) continue;   /* a: an output */
        for (int j = 0; j < n; j++) {
            const cli_file *b = &files[j];
            if (j == i || !b->path) continue;
            /* each pair of outputs once; an output and an input always */
            bool pair_once = b->role == CLI_FILE_IN || j > i;
            if (pair_once && same_file(&ids[i], &ids[j]) && !may_be(a, b)) {
                if (b->role == CLI_FILE_IN)
                    cli_error("--%s '%s' is the same file as --%s '%s'%s: writing it would "
                              "destroy the --%s file; give --%s another name", a->flag, a->path,
                              b->flag, b->path, other_name(a->path, b->path), b->flag, a->flag);
                else
                    cli_error("--%s '%s' and --%s '%s' are the same file%s: one would "
                              "overwrite the other; give them different names", a->flag,
                              a->path, b->flag, b->path, other_name(a->path, b->path));
                return CLI_EXIT_USAGE;
            }
            if (a->role == CLI_FILE_SAVE && same_file(&tmp_ids[i], &ids[j])) {
                cli_error("--%s '%s' is saved through the temporary file '%s%s', which is "
                          "--%s '%s': the save would overwrite it; give --%s another name",
                          a->flag, a->path, a->path, MT_TMP_SUFFIX, b->flag, b->path, a->flag);
                return CLI_EXIT_USAGE;
            }
        }
    }
    return check_shards(files, n, ids, tmp_ids);
}

/* ======================================================================== */
/* Trying the outputs                                                        */
/* ======================================================================== */

/* A new name whose directory is missing, or is not a directory. */
static int check_dir_of(const char *flag, const char *path) {
    char dir[PATH_MAX];
    struct stat st;
    split_dir(path, dir, sizeof dir);
    int err = stat(dir, &st) != 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR : 0;
    if (err == 0) return CLI_EXIT_OK;
    cli_error("--%s '%s': cannot create it in '%s': %s", flag, path, dir, strerror(err));
    return CLI_EXIT_FAIL;
}

/* A log is written in place: it must be a regular file we may append to
 * (tried without truncating it) or a new name we may create (created and
 * removed again). */
static int try_log(const char *flag, const char *path, bool stat_only) {
    struct stat st;
    int fd;
    if (stat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
            cli_error("--%s '%s' is %s, not a regular file; give the name of a file to write "
                      "(a new one, or one to overwrite)", flag, path,
                      mt_file_type_name(st.st_mode));
            return CLI_EXIT_FAIL;
        }
        if (stat_only) return CLI_EXIT_OK;
        if ((fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)) < 0) {
            cli_error("--%s '%s': cannot write it: %s", flag, path, strerror(errno));
            return CLI_EXIT_FAIL;
        }
        close(fd);
        return CLI_EXIT_OK;
    }
    if (errno != ENOENT) {
        cli_error("--%s '%s': %s", flag, path, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    if (stat_only) return check_dir_of(flag, path);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666)) < 0) {
        cli_error("--%s '%s': cannot create it: %s", flag, path, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    close(fd);
    if (unlink(path) != 0) {
        cli_error("--%s '%s': cannot remove the test file: %s", flag, path, strerror(errno));
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

int cli_check_files(const cli_file *files, int n) {
    int rc = check_same_files(files, n);
    for (int i = 0; i < n && rc == CLI_EXIT_OK; i++) {
        const cli_file *f = &files[i];
        if (!f->path || f->role == CLI_FILE_IN) continue;
        if (f->role == CLI_FILE_LOG || f->stat_only) {
            rc = try_log(f->flag, f->path, f->stat_only);
        } else {
            mt_status s = mt_file_check_save(f->path);
            if (s != MT_OK) {
                cli_error("--%s: %s", f->flag, mt_errmsg());
                rc = cli_exit_of(s);   /* a temporary name: 2; a file that cannot be: 1 */
            }
        }
    }
    return rc;
}

/* ======================================================================== */
/* Inputs given to the wrong flag                                            */
/* ======================================================================== */

/* The flag of `meshtrain train` that takes each kind of file. */
static const struct {
    mt_file_kind kind;
    const char  *flag, *what, *use;
} TRAIN_INPUTS[] = {
    {MT_FILE_CKPT, "ckpt-in", "a meshtrain checkpoint", "to resume from it"},
    {MT_FILE_LLMC, "llmc-in", "an llm.c GPT-2 checkpoint", "to start from its weights"},
    {MT_FILE_TOKENS, "data", "an llm.c token file", "to train on it"},
};

int cli_check_input_kind(const char *flag, const char *path) {
    if (!path) return CLI_EXIT_OK;
    /* a directory or glob of llm.c shards: the dataset checks each shard */
    if (strcmp(flag, "data") == 0 && mt_dataset_is_sharded(path)) return CLI_EXIT_OK;
    mt_file_kind kind;
    if (mt_file_detect(path, &kind) != MT_OK) {
        cli_error("--%s: %s", flag, mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    for (size_t i = 0; i < sizeof TRAIN_INPUTS / sizeof TRAIN_INPUTS[0]; i++) {
        if (TRAIN_INPUTS[i].kind != kind || strcmp(TRAIN_INPUTS[i].flag, flag) == 0) continue;
        cli_error("--%s '%s' is %s: use --%s '%s' %s", flag, path, TRAIN_INPUTS[i].what,
                  TRAIN_INPUTS[i].flag, path, TRAIN_INPUTS[i].use);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* ======================================================================== */
/* Streams                                                                   */
/* ======================================================================== */

bool cli_flush(FILE *f, int *err) {
    errno = 0;
    bool ok = fflush(f) == 0;
    if (!ok && *err == 0) *err = errno ? errno : EIO;
    if (ferror(f) && *err == 0) *err = EIO;
    return ok && !ferror(f);
}
