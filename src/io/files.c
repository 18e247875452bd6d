/*
 * files.c — the io layer's side of the file contract (meshtrain/files.h,
 * src/base/files.c, holds the rules: inputs are regular files opened without
 * blocking, outputs are claimed, written to "<path>.tmp" and renamed).
 * Here: what a file holds (its magic), the refusal to load a save's
 * temporary file, and a save as the checkpoint writers use it.
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

/* ======================================================================== */
/* Reading                                                                   */
/* ======================================================================== */

mt_status mt__file_check_not_tmp(const char *path, const char *what) {
    char real[PATH_MAX];
    if (!mt_file_is_tmp(path, real, sizeof real)) return MT_OK;
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
#define MAGIC_TOKENS32 20240801   /* uint32 tokens (io_impl.h) */

mt_status mt_file_detect(const char *path, mt_file_kind *kind) {
    if (!path || !kind) return mt_fail(MT_EINVAL, "mt_file_detect: path or kind is NULL");
    *kind = MT_FILE_OTHER;
    FILE *f;
    mt_status s = mt_input_open(path, NULL, 0, &f, NULL);
    if (s != MT_OK) return s;
    unsigned char b[8] = {0};
    size_t got = fread(b, 1, sizeof b, f);
    fclose(f);
    int32_t magic = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                              (uint32_t)b[3] << 24);
    if (got == 8 && memcmp(b, MAGIC_CKPT, 8) == 0) *kind = MT_FILE_CKPT;
    else if (got >= 4 && magic == MAGIC_LLMC) *kind = MT_FILE_LLMC;
    else if (got >= 4 && (magic == MAGIC_TOKENS || magic == MAGIC_TOKENS32))
        *kind = MT_FILE_TOKENS;
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

mt_status mt_file_check_save(const char *path) {
    mt_output *o;
    mt_status s = mt_output_claim(path, "file", &o);
    mt_output_close(o);
    return s;
}

/* ======================================================================== */
/* Saves                                                                     */
/* ======================================================================== */

mt_status mt__save_begin(const char *path, const char *what, mt_output *claim, mt__save *sv) {
    sv->f = NULL;
    sv->own = NULL;
    sv->out = claim;
    mt_status s;
    if (!claim) {
        if ((s = mt_output_claim(path, what, &sv->own)) != MT_OK) return s;
        sv->out = sv->own;
    }
    if ((s = mt_output_begin(sv->out, &sv->f)) != MT_OK) {
        mt_output_close(sv->own);
        sv->own = sv->out = NULL;
    }
    return s;
}

mt_status mt__save_end(mt__save *sv, bool ok, int err) {
    mt_status s = mt_output_commit(sv->out, ok, err);
    mt_output_close(sv->own);
    sv->f = NULL;
    sv->own = sv->out = NULL;
    return s;
}
