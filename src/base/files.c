/*
 * files.c — the input and output contract of every file (meshtrain/files.h
 * says the rules; this is how they are kept).
 *
 * An output's claim is its temporary file "<path>.tmp", open and locked with
 * flock(LOCK_EX | LOCK_NB) for as long as the claim is held. The lock, not
 * the file's existence, says who owns the name: a temporary file nobody has
 * locked was left by a killed process and is taken over (emptied and
 * reused) when it is empty or starts as a file meshtrain saves (anything
 * else may be a user's own file of that name, and is refused), and one that
 * is locked belongs to a live process, which a second claim leaves alone
 * and reports. Taking a file over is race-free: after the
 * lock is won, the name must still lead to the locked file (the owner may
 * have renamed it away between our open and our lock), else the claim starts
 * again.
 *
 * A commit renames the temporary file over the target, so the lock then
 * sits on the target's inode and the temporary name is free: the claim
 * creates it again at once (O_EXCL). If another process created it in that
 * instant, that process owns the name now; this claim is lost, and says so
 * at its next write. flock locks belong to the open file description, so a
 * process that claims one output twice is refused as another would be.
 */
#include "meshtrain/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_LEN (sizeof MT_TMP_SUFFIX - 1)

/* ======================================================================== */
/* Names                                                                     */
/* ======================================================================== */

const char *mt_file_type_name(unsigned mode) {
    mode_t m = (mode_t)mode;
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

bool mt_file_is_tmp(const char *path, char *real, size_t n) {
    size_t len = strlen(path), end = len;
    /* ".tmp.<digits>": meshtrain 0.1.0 named its temporary files per process */
    while (end > 0 && path[end - 1] >= '0' && path[end - 1] <= '9') end--;
    if (end < len && end > 0 && path[end - 1] == '.') end--;
    else end = len;
    if (end < TMP_LEN || strncmp(path + end - TMP_LEN, MT_TMP_SUFFIX, TMP_LEN) != 0)
        return false;
    if (real && n > 0) snprintf(real, n, "%.*s", (int)(end - TMP_LEN), path);
    return true;
}

/* "trace 'x'" or "'x'" into buf. */
static const char *named(char *buf, size_t n, const char *what, const char *path) {
    if (what && *what) snprintf(buf, n, "%s '%s'", what, path);
    else snprintf(buf, n, "'%s'", path);
    return buf;
}

/* 1.5 GiB, 12 KiB, 300 bytes. */
static void fmt_bytes(char *buf, size_t n, int64_t b) {
    static const char *const UNIT[] = {"KiB", "MiB", "GiB", "TiB"};
    if (b < 1024) { snprintf(buf, n, "%lld bytes", (long long)b); return; }
    double v = (double)b / 1024;
    int u = 0;
    while (v >= 1024 && u < 3) { v /= 1024; u++; }
    snprintf(buf, n, "%.1f %s", v, UNIT[u]);
}

/* ======================================================================== */
/* Inputs                                                                    */
/* ======================================================================== */

mt_status mt_input_open(const char *path, const char *what, int64_t max_bytes, FILE **out,
                        int64_t *size) {
    char nm[PATH_MAX + 64];
    if (out) *out = NULL;
    if (!out) return mt_fail(MT_EINVAL, "mt_input_open: out is NULL");
    if (!path || !*path)
        return mt_fail(MT_EINVAL, "no %s given: the path is empty", what ? what : "file");
    named(nm, sizeof nm, what, path);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return mt_fail(MT_EIO, "cannot open %s: %s", nm, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        mt_status s = mt_fail(MT_EIO, "cannot stat %s: %s", nm, strerror(errno));
        close(fd);
        return s;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        if (S_ISDIR(st.st_mode))
            return mt_fail(MT_EIO, "%s is a directory, not a file; give the %s inside it", nm,
                           what ? what : "file");
        return mt_fail(MT_EIO, "%s is %s, not a regular file%s", nm,
                       mt_file_type_name(st.st_mode),
                       S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode)
                           ? " (reading it could wait forever)" : "");
    }
    if (max_bytes > 0 && (int64_t)st.st_size > max_bytes) {
        char have[32], most[32];
        fmt_bytes(have, sizeof have, (int64_t)st.st_size);
        fmt_bytes(most, sizeof most, max_bytes);
        close(fd);
        return mt_fail(MT_EIO, "%s is %s, more than the %s a %s may be; is it the right file?",
                       nm, have, most, what ? what : "file");
    }
    /* a regular file never blocks: plain blocking reads from here on */
    int flags = fcntl(fd, F_GETFL);
    FILE *f = NULL;
    if (flags == -1 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1 || !(f = fdopen(fd, "rb"))) {
        mt_status s = mt_fail(MT_EIO, "cannot open %s: %s", nm, strerror(errno));
        close(fd);
        return s;
    }
    if (size) *size = (int64_t)st.st_size;
    *out = f;
    return MT_OK;
}

mt_status mt_input_read_all(const char *path, const char *what, int64_t max_bytes, char **text,
                            size_t *len) {
    char nm[PATH_MAX + 64];
    if (!text) return mt_fail(MT_EINVAL, "mt_input_read_all: text is NULL");
    *text = NULL;
    FILE *f;
    int64_t size;
    mt_status s = mt_input_open(path, what, max_bytes, &f, &size);
    if (s != MT_OK) return s;
    named(nm, sizeof nm, what, path);
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        fclose(f);
        return mt_fail(MT_ENOMEM, "no memory to read %s (%lld bytes)", nm, (long long)size);
    }
    errno = 0;
    size_t got = fread(buf, 1, (size_t)size, f);
    bool more = got == (size_t)size && fgetc(f) != EOF;
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (err || got != (size_t)size || more) {
        free(buf);
        if (err) return mt_fail(MT_EIO, "cannot read %s: %s", nm, strerror(err));
        return mt_fail(MT_EIO, "%s changed while it was read (%lld bytes, then %s); is another "
                       "program writing it?", nm, (long long)size,
                       more ? "more" : "fewer");
    }
    buf[size] = '\0';
    *text = buf;
    if (len) *len = (size_t)size;
    return MT_OK;
}

/* ======================================================================== */
/* Outputs                                                                   */
/* ======================================================================== */

struct mt_output {
    char *path;   /* the target */
    char *tmp;    /* "<path>.tmp" */
    char *what;   /* for messages: "checkpoint" */
    int   fd;     /* the temporary file, locked; -1 when the claim was lost */
    FILE *f;      /* the write in progress (a dup of fd), or NULL */
};

const char *mt_output_path(const mt_output *o) { return o ? o->path : NULL; }
const char *mt_output_tmp_path(const mt_output *o) { return o ? o->tmp : NULL; }

/* "cannot write checkpoint 'x'" into buf. */
static const char *lead(char *buf, size_t n, const mt_output *o) {
    snprintf(buf, n, "cannot write %s '%s'", o->what, o->path);
    return buf;
}

/* The system's message, with what to do about the one a user can fix here. */
static const char *why(int err) {
    return err == ENAMETOOLONG ? "File name too long; choose a shorter name" : strerror(err);
}

static mt_status busy(const mt_output *o) {
    return mt_fail(MT_EBUSY, "cannot write %s '%s': another run is writing it (its temporary "
                   "file '%s' is locked by a live process); wait for that run to end, or give "
                   "another name", o->what, o->path, o->tmp);
}

/* The first bytes of every file meshtrain saves through a claim, where the
 * format has fixed ones (the writers are in the layers above, which this
 * one cannot name: keep the table in step with them; test_files.c and
 * tests/test_hostile_shards.sh take over each one). A stale temporary file
 * is taken over only when it is empty or starts with one of these: a
 * killed save leaves the start of its file (stdio writes in blocks of at
 * least the first few KiB), while "notes.ckpt.tmp" may be a user's own
 * file, which a claim must not empty. Formats without fixed first bytes
 * (llama2.c's model and tokenizer, SentencePiece's model and vocabulary)
 * have no entry: a non-empty leftover of theirs is refused, and the
 * message says to remove it. */
static const struct { const char *bytes; size_t n; } SAVE_STARTS[] = {
    {"MTCKPT\0\0", 8},                                 /* checkpoint (io/checkpoint.c) */
    {"\xc6\xd7\x34\x01", 4},                            /* llm.c checkpoint: int32 20240326 */
    {"\x88\xd8\x34\x01", 4},                            /* llm.c token file: int32 20240520 */
    {"{\"traceEvents\":[", 16},                          /* trace (profile/trace.c) */
    {"{\"cpu\": ", 8},                                   /* machine file (profile/machine.c) */
    {"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 44},   /* report pictures */
    {"<svg xmlns=\"http://www.w3.org/2000/svg\" ", 40},  /* schedule picture (pipeline/svg.c) */
};

/* Whether the n bytes b (the start of a stale temporary file of `size`
 * bytes) can be what a killed save left: empty, or the whole first bytes
 * of a format of SAVE_STARTS (every file meshtrain saves is longer than
 * them, and its first write to disk holds at least them). */
static bool left_by_a_save(const unsigned char *b, size_t n, int64_t size) {
    if (size == 0) return true;
    for (size_t i = 0; i < sizeof SAVE_STARTS / sizeof SAVE_STARTS[0]; i++)
        if (n >= SAVE_STARTS[i].n && memcmp(b, SAVE_STARTS[i].bytes, SAVE_STARTS[i].n) == 0)
            return true;
    return false;
}

/* The stale temporary file fd (of `size` bytes, locked by us) may be
 * emptied: MT_OK, or the refusal naming it. */
static mt_status check_stale(const mt_output *o, int fd, int64_t size) {
    char l[PATH_MAX + 128];
    unsigned char b[64];
    ssize_t got = size > 0 ? pread(fd, b, sizeof b, 0) : 0;
    if (got < 0)
        return mt_fail(MT_EIO, "%s: cannot read the file at its temporary name '%s': %s",
                       lead(l, sizeof l, o), o->tmp, strerror(errno));
    if (left_by_a_save(b, (size_t)got, size)) return MT_OK;
    char sz[32];
    fmt_bytes(sz, sizeof sz, size);
    return mt_fail(MT_EIO, "%s: its temporary name '%s' holds a file of %s that no save of "
                   "meshtrain left (it is not empty and does not start as a file meshtrain "
                   "writes), and saving would overwrite it; it may be yours: move it away, or "
                   "remove it if it is the leftover of a killed save, or give another name",
                   lead(l, sizeof l, o), o->tmp, sz);
}

/* Opens and locks the temporary file, taking over one left by a dead
 * process. `fresh`: the name must not exist (a re-claim after a rename).
 * Sets o->fd, or returns the failure (MT_EBUSY: someone else holds it). */
static mt_status lock_tmp(mt_output *o, bool fresh) {
    char l[PATH_MAX + 128];
    for (int attempt = 0; attempt < 8; attempt++) {
        struct stat st, now;
        int there = lstat(o->tmp, &st) == 0;
        if (there && S_ISLNK(st.st_mode)) {
            /* a symbolic link at the temporary name is never followed: a
             * leftover of an older version, or planted; removed */
            if (unlink(o->tmp) != 0 && errno != ENOENT)
                return mt_fail(MT_EIO, "%s: its temporary name '%s' is a link that cannot be "
                               "removed: %s", lead(l, sizeof l, o), o->tmp, strerror(errno));
            continue;
        }
        if (there && !S_ISREG(st.st_mode))
            return mt_fail(MT_EIO, "%s: its temporary name '%s' is taken by %s; remove it or "
                           "choose another name", lead(l, sizeof l, o), o->tmp,
                           mt_file_type_name(st.st_mode));
        int flags = O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (fresh ? O_EXCL : 0);
        int fd = open(o->tmp, flags, 0666);
        if (fd < 0 && errno == EEXIST && fresh) return busy(o);
        if (fd < 0 && errno == ELOOP) continue;   /* a link appeared meanwhile */
        if (fd < 0)
            return mt_fail(MT_EIO, "%s: creating its temporary file '%s' failed: %s",
                           lead(l, sizeof l, o), o->tmp, why(errno));
        if (fstat(fd, &st) != 0) {
            mt_status s = mt_fail(MT_EIO, "%s: cannot stat its temporary file '%s': %s",
                                  lead(l, sizeof l, o), o->tmp, strerror(errno));
            close(fd);
            return s;
        }
        if (!S_ISREG(st.st_mode)) {   /* replaced between the lstat and the open */
            close(fd);
            return mt_fail(MT_EIO, "%s: its temporary name '%s' is taken by %s; remove it or "
                           "choose another name", lead(l, sizeof l, o), o->tmp,
                           mt_file_type_name(st.st_mode));
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int err = errno;
            close(fd);
            if (err == EWOULDBLOCK) return busy(o);
            return mt_fail(MT_EIO, "%s: cannot lock its temporary file '%s': %s",
                           lead(l, sizeof l, o), o->tmp, strerror(err));
        }
        /* the lock is ours; is the name still this file? */
        if (stat(o->tmp, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino) {
            /* a file we did not create: only a save's leftover is emptied */
            mt_status keep = check_stale(o, fd, (int64_t)now.st_size);
            if (keep != MT_OK) {
                close(fd);
                return keep;
            }
            if (now.st_size > 0 && ftruncate(fd, 0) != 0) {
                mt_status s = mt_fail(MT_EIO, "%s: cannot empty the stale temporary file "
                                      "'%s': %s", lead(l, sizeof l, o), o->tmp, strerror(errno));
                close(fd);
                return s;
            }
            o->fd = fd;
            return MT_OK;
        }
        close(fd);   /* renamed or removed by its owner meanwhile: again */
    }
    return busy(o);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

mt_status mt_output_claim(const char *path, const char *what, mt_output **out) {
    char real[PATH_MAX];
    if (!out) return mt_fail(MT_EINVAL, "mt_output_claim: out is NULL");
    *out = NULL;
    if (!what || !*what) what = "file";
    if (!path || !*path) return mt_fail(MT_EINVAL, "cannot write the %s: the path is empty", what);
    if (mt_file_is_tmp(path, real, sizeof real))
        return mt_fail(MT_EINVAL, "cannot write %s '%s': names ending in '%s' are the "
                       "temporary files of saves, which loads refuse; choose another name "
                       "(e.g. '%s')", what, path, MT_TMP_SUFFIX, real[0] ? real : "out");
    size_t plen = strlen(path);
    if (plen + sizeof MT_TMP_SUFFIX > PATH_MAX)
        return mt_fail(MT_EINVAL, "cannot write %s '%s': its temporary name needs %zu bytes, "
                       "more than %d; choose a shorter path", what, path,
                       plen + sizeof MT_TMP_SUFFIX, PATH_MAX);
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return mt_fail(MT_EIO, "cannot write %s '%s': it is %s, not a regular file, and "
                           "writing replaces it; give a file name", what, path,
                           mt_file_type_name(st.st_mode));
    } else if (errno != ENOENT) {
        return mt_fail(MT_EIO, "cannot write %s '%s': %s", what, path, why(errno));
    }
    mt_output *o = calloc(1, sizeof *o);
    if (o) {
        o->fd = -1;
        o->path = dup_str(path);
        o->what = dup_str(what);
        o->tmp = malloc(plen + sizeof MT_TMP_SUFFIX);
    }
    if (!o || !o->path || !o->what || !o->tmp) {
        mt_output_close(o);
        return mt_fail(MT_ENOMEM, "no memory to claim %s '%s'", what, path);
    }
    memcpy(o->tmp, path, plen);
    memcpy(o->tmp + plen, MT_TMP_SUFFIX, sizeof MT_TMP_SUFFIX);
    mt_status s = lock_tmp(o, false);
    if (s != MT_OK) {
        free(o->tmp);
        o->tmp = NULL;   /* not ours: close must not remove it */
        mt_output_close(o);
        return s;
    }
    *out = o;
    return MT_OK;
}

mt_status mt_output_begin(mt_output *o, FILE **f) {
    char l[PATH_MAX + 128];
    if (!o || !f) return mt_fail(MT_EINVAL, "mt_output_begin: o or f is NULL");
    *f = NULL;
    if (o->f)
        return mt_fail(MT_ESTATE, "%s: a write is already in progress", lead(l, sizeof l, o));
    if (o->fd < 0) {
        mt_status s = lock_tmp(o, false);   /* lost at the last commit: try once more */
        if (s != MT_OK) return s;
    }
    int fd2 = -1;
    if (ftruncate(o->fd, 0) != 0 || lseek(o->fd, 0, SEEK_SET) != 0 || (fd2 = dup(o->fd)) < 0 ||
        !(o->f = fdopen(fd2, "wb"))) {
        mt_status s = mt_fail(MT_EIO, "%s: cannot open its temporary file '%s': %s",
                              lead(l, sizeof l, o), o->tmp, strerror(errno));
        if (fd2 >= 0) close(fd2);
        return s;
    }
    *f = o->f;
    return MT_OK;
}

/* fsyncs the directory holding `path`, so the rename survives a crash.
 * Returns 0 or an errno; EINVAL (a file system without directory fsync) is
 * not a failure. */
static int fsync_dir_of(const char *path) {
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    int err = fsync(fd) != 0 && errno != EINVAL ? errno : 0;
    close(fd);
    return err;
}

mt_status mt_output_commit(mt_output *o, bool ok, int err) {
    char l[PATH_MAX + 128];
    if (!o || !o->f) return mt_fail(MT_ESTATE, "mt_output_commit: no write in progress");
    if (ok && (fflush(o->f) != 0 || ferror(o->f) || fsync(fileno(o->f)) != 0)) {
        ok = false;
        err = errno ? errno : EIO;
    }
    if (fclose(o->f) != 0 && ok) { ok = false; err = errno; }
    o->f = NULL;
    if (ok && rename(o->tmp, o->path) != 0) { ok = false; err = errno; }
    if (!ok) {
        if (ftruncate(o->fd, 0) != 0) { /* the next begin empties it too */ }
        return mt_fail(MT_EIO, "writing %s '%s' (through '%s'): %s; the previous %s, if any, "
                       "is untouched", o->what, o->path, o->tmp, strerror(err ? err : EIO),
                       o->what);
    }
    /* the lock now sits on the target: claim the temporary name again */
    int old = o->fd;
    o->fd = -1;
    mt_status again = lock_tmp(o, true);
    close(old);
    (void)again;   /* lost: said by the next begin (see files.h) */
    if ((err = fsync_dir_of(o->path)) != 0)
        return mt_fail(MT_EIO, "%s: it was written, but syncing its directory failed (%s): it "
                       "may not survive a power loss", lead(l, sizeof l, o), strerror(err));
    return MT_OK;
}

void mt_output_close(mt_output *o) {
    if (!o) return;
    if (o->f) fclose(o->f);
    if (o->fd >= 0) {
        if (o->tmp) unlink(o->tmp);   /* ours: we hold its lock */
        close(o->fd);
    }
    free(o->path);
    free(o->tmp);
    free(o->what);
    free(o);
}

mt_status mt_output_write(mt_output *o, mt_status (*write)(FILE *f, void *arg), void *arg) {
    FILE *f;
    mt_status s = mt_output_begin(o, &f);
    if (s != MT_OK) return s;
    errno = 0;
    s = write(f, arg);
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    if (s != MT_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", mt_errmsg());
        mt_output_commit(o, false, 0);
        return mt_fail(s, "%s", msg);
    }
    return mt_output_commit(o, err == 0, err);
}
