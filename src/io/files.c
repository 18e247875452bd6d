/*
 * files.c — the rules every file of the io layer follows.
 *
 * Reading: a path is opened without blocking and refused unless it is a
 * regular file. A FIFO opened for reading waits for a writer, forever if
 * none comes, and a directory reads as an "empty or truncated" file; both
 * deserve a message saying what the path is.
 *
 * Saving: a save writes "<path>.tmp" and renames it over <path>. One name per
 * output (not one per process) means a killed save leaves at most one
 * temporary file per output, and the next save removes it. A rename replaces
 * whatever is at <path>, so a target that exists and is not a regular file
 * (/dev/null, a FIFO) is refused: as root, renaming over /dev/null replaces
 * the device node. Names ending in ".tmp" are reserved for these files:
 * loads refuse them (a torn save must never be taken for a checkpoint) and
 * so do saves (their own temporary name would be "<x>.tmp.tmp").
 */
#include "io/io_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_SUFFIX_LEN (sizeof MT_TMP_SUFFIX - 1)

/* ======================================================================== */
/* Reading                                                                   */
/* ======================================================================== */

const char *mt__file_type_name(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

mt_status mt__file_open_read(const char *path, const char *what, FILE **out, int64_t *size) {
    *out = NULL;
    const char *sp = what ? " " : "";
    if (!what) what = "";
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return mt_fail(MT_EIO, "cannot open %s%s'%s': %s", what, sp, path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        mt_status s = mt_fail(MT_EIO, "cannot stat %s%s'%s': %s", what, sp, path,
                              strerror(errno));
        close(fd);
        return s;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return mt_fail(MT_EIO, "%s%s'%s' is %s, not a regular file%s", what, sp, path,
                       mt__file_type_name(st.st_mode),
                       S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode)
                           ? " (reading it could wait forever)" : "");
    }
    /* a regular file never blocks; plain blocking reads from here on */
    int flags = fcntl(fd, F_GETFL);
    FILE *f = NULL;
    if (flags == -1 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1 || !(f = fdopen(fd, "rb"))) {
        mt_status s = mt_fail(MT_EIO, "cannot open %s%s'%s': %s", what, sp, path,
                              strerror(errno));
        close(fd);
        return s;
    }
    if (size) *size = (int64_t)st.st_size;
    *out = f;
    return MT_OK;
}

bool mt__file_is_tmp(const char *path, char *real, size_t n) {
    size_t len = strlen(path), end = len;
    /* ".tmp.<digits>": meshtrain 0.1.0 named its temporary files per process */
    while (end > 0 && path[end - 1] >= '0' && path[end - 1] <= '9') end--;
    if (end < len && end > 0 && path[end - 1] == '.') end--;
    else end = len;
    if (end < TMP_SUFFIX_LEN || strncmp(path + end - TMP_SUFFIX_LEN, MT_TMP_SUFFIX,
                                        TMP_SUFFIX_LEN) != 0)
        return false;
    if (real && n > 0) snprintf(real, n, "%.*s", (int)(end - TMP_SUFFIX_LEN), path);
    return true;
}

mt_status mt__file_check_not_tmp(const char *path, const char *what) {
    char real[PATH_MAX];
    if (!mt__file_is_tmp(path, real, sizeof real)) return MT_OK;
    return mt_fail(MT_EINVAL, "'%s' is the temporary file of a save that did not finish (the "
                   "run was killed while saving); it is never loaded: load '%s', the last "
                   "completed save, as the %s", path, real, what);
}

mt_status mt__scan_finite(FILE *f, int64_t n, int64_t *bad, float *value, int *err) {
    enum { CHUNK = 1 << 14 };
    float *buf = malloc(CHUNK * sizeof *buf);
    if (!buf) return MT_ENOMEM;
    mt_status s = MT_OK;
    for (int64_t at = 0; s == MT_OK && at < n; at += CHUNK) {
        size_t cnt = (size_t)(n - at < CHUNK ? n - at : CHUNK);
        errno = 0;
        if (fread(buf, sizeof *buf, cnt, f) != cnt) {
            *err = ferror(f) ? (errno ? errno : EIO) : 0;
            s = MT_EIO;
            break;
        }
        for (size_t k = 0; k < cnt; k++)
            if (!isfinite(buf[k])) {
                *bad = at + (int64_t)k;
                *value = buf[k];
                s = MT_ENAN;
                break;
            }
    }
    free(buf);
    return s;
}

/* ======================================================================== */
/* The public side: what a file holds, where saves write                    */
/* ======================================================================== */

#define MAGIC_CKPT   "MTCKPT\0\0"
#define MAGIC_LLMC   20240326
#define MAGIC_TOKENS 20240520

mt_status mt_file_detect(const char *path, mt_file_kind *kind) {
    if (!path || !kind) return mt_fail(MT_EINVAL, "mt_file_detect: path or kind is NULL");
    *kind = MT_FILE_OTHER;
    FILE *f;
    mt_status s = mt__file_open_read(path, NULL, &f, NULL);
    if (s != MT_OK) return s;
    unsigned char b[8] = {0};
    size_t got = fread(b, 1, sizeof b, f);
    fclose(f);
    int32_t magic = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                              (uint32_t)b[3] << 24);
    if (got == 8 && memcmp(b, MAGIC_CKPT, 8) == 0) *kind = MT_FILE_CKPT;
    else if (got >= 4 && magic == MAGIC_LLMC) *kind = MT_FILE_LLMC;
    else if (got >= 4 && magic == MAGIC_TOKENS) *kind = MT_FILE_TOKENS;
    return MT_OK;
}

mt_status mt_file_tmp_path(const char *path, char *buf, size_t n) {
    if (!path || !buf) return mt_fail(MT_EINVAL, "mt_file_tmp_path: path or buf is NULL");
    int w = snprintf(buf, n, "%s%s", path, MT_TMP_SUFFIX);
    if (w < 0 || (size_t)w >= n)
        return mt_fail(MT_EINVAL, "'%s' is too long: its temporary name '%s%s' needs %d bytes, "
                       "more than %zu; choose a shorter path", path, path, MT_TMP_SUFFIX, w + 1, n);
    return MT_OK;
}

/* "cannot save checkpoint 'x'", or "cannot save to 'x'" when what is NULL. */
static const char *lead(char *buf, size_t n, const char *what, const char *path) {
    if (what) snprintf(buf, n, "cannot save %s '%s'", what, path);
    else snprintf(buf, n, "cannot save to '%s'", path);
    return buf;
}

/* The system's message, and what to do about the one a user can fix here. */
static const char *why(int err) {
    return err == ENAMETOOLONG ? "File name too long; choose a shorter name" : strerror(err);
}

/* Removes a stale temporary file. Only files and links are removed: anything
 * else at that name was not left by a save. */
static mt_status remove_stale_tmp(const char *path, const char *what, const char *tmp) {
    char l[PATH_MAX + 64];
    struct stat st;
    if (lstat(tmp, &st) != 0) {
        if (errno == ENOENT) return MT_OK;
        return mt_fail(MT_EIO, "%s: its temporary file '%s': %s", lead(l, sizeof l, what, path),
                       tmp, why(errno));
    }
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
        return mt_fail(MT_EIO, "%s: its temporary name '%s' is taken by %s; remove it or "
                       "choose another name", lead(l, sizeof l, what, path), tmp,
                       mt__file_type_name(st.st_mode));
    if (unlink(tmp) != 0 && errno != ENOENT)
        return mt_fail(MT_EIO, "%s: cannot remove the stale temporary file '%s': %s",
                       lead(l, sizeof l, what, path), tmp, strerror(errno));
    return MT_OK;
}

/* The checks of a target shared by mt_file_check_save and mt__save_begin. */
static mt_status check_target(const char *path, const char *what) {
    char real[PATH_MAX], l[PATH_MAX + 64];
    if (!path || !path[0])
        return mt_fail(MT_EINVAL, "cannot save %s: the path is empty", what ? what : "a file");
    if (mt__file_is_tmp(path, real, sizeof real))
        return mt_fail(MT_EINVAL, "%s: names ending in '%s' are the temporary files of saves, "
                       "which loads refuse; choose another name (e.g. '%s')",
                       lead(l, sizeof l, what, path), MT_TMP_SUFFIX,
                       real[0] ? real : "model.ckpt");
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return mt_fail(MT_EINVAL, "%s: it is %s, not a regular file, and a save would "
                           "replace it; give a file name", lead(l, sizeof l, what, path),
                           mt__file_type_name(st.st_mode));
    } else if (errno != ENOENT) {
        return mt_fail(MT_EIO, "%s: %s", lead(l, sizeof l, what, path), why(errno));
    }
    return MT_OK;
}

mt_status mt_file_check_save(const char *path) {
    const char *what = NULL;
    mt_status s = check_target(path, what);
    if (s != MT_OK) return s;
    char tmp[PATH_MAX];
    if ((s = mt_file_tmp_path(path, tmp, sizeof tmp)) != MT_OK) return s;
    if ((s = remove_stale_tmp(path, what, tmp)) != MT_OK) return s;
    /* the same create the save makes: a missing or read-only directory, or a
     * name too long once ".tmp" is added, fails here and not after the run */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return mt_fail(MT_EIO, "cannot save to '%s': creating its temporary file '%s' failed: "
                       "%s", path, tmp, why(errno));
    close(fd);
    if (unlink(tmp) != 0)
        return mt_fail(MT_EIO, "cannot save to '%s': removing the test file '%s' failed: %s",
                       path, tmp, strerror(errno));
    return MT_OK;
}

/* ======================================================================== */
/* Saves                                                                     */
/* ======================================================================== */

mt_status mt__save_begin(const char *path, const char *what, mt__save *sv) {
    sv->tmp = NULL;
    sv->f = NULL;
    mt_status s = check_target(path, what);
    if (s != MT_OK) return s;
    size_t n = strlen(path) + sizeof MT_TMP_SUFFIX;
    if (!(sv->tmp = malloc(n))) return mt_fail(MT_ENOMEM, "no memory to save %s '%s'", what, path);
    snprintf(sv->tmp, n, "%s%s", path, MT_TMP_SUFFIX);
    if ((s = remove_stale_tmp(path, what, sv->tmp)) != MT_OK) goto fail;
    /* O_EXCL: a link planted at the temporary name is never followed */
    int fd = open(sv->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 || !(sv->f = fdopen(fd, "wb"))) {
        s = mt_fail(MT_EIO, "cannot create '%s' to save %s '%s': %s", sv->tmp, what, path,
                    strerror(errno));
        if (fd >= 0) { close(fd); unlink(sv->tmp); }
        goto fail;
    }
    return MT_OK;
fail:
    free(sv->tmp);
    sv->tmp = NULL;
    return s;
}

/* fsyncs the directory holding `path`, so the rename itself survives a crash.
 * Returns 0 or an errno. Some file systems refuse fsync on a directory
 * (EINVAL); there is nothing more to do then. */
static int fsync_dir_of(const char *path) {
    char *dir = strdup(path);
    if (!dir) return ENOMEM;
    char *slash = strrchr(dir, '/');
    const char *d = !slash ? "." : slash == dir ? "/" : (*slash = '\0', dir);
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) {
        if (fsync(fd) != 0 && errno != EINVAL) err = errno;
        close(fd);
    }
    free(dir);
    return err;
}

mt_status mt__save_end(const char *path, const char *what, mt__save *sv, bool ok, int err) {
    if (ok && (fflush(sv->f) != 0 || fsync(fileno(sv->f)) != 0)) { ok = false; err = errno; }
    if (fclose(sv->f) != 0 && ok) { ok = false; err = errno; }
    sv->f = NULL;
    if (ok && rename(sv->tmp, path) != 0) { ok = false; err = errno; }
    mt_status s = MT_OK;
    if (!ok) {
        unlink(sv->tmp);
        s = mt_fail(MT_EIO, "writing %s '%s' (through '%s'): %s; the previous %s, if any, is "
                    "untouched", what, path, sv->tmp, strerror(err ? err : EIO), what);
    } else if ((err = fsync_dir_of(path)) != 0) {
        s = mt_fail(MT_EIO, "%s '%s' was written, but syncing its directory failed (%s): it "
                    "may not survive a power loss", what, path, strerror(err));
    }
    free(sv->tmp);
    sv->tmp = NULL;
    return s;
}
