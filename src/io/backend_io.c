/*
 * backend_io.c — file bytes to and from a backend's buffers (io_impl.h):
 * tensor values and optimizer state pass through a host chunk, copied in
 * and out by the backend (copy_in, copy_out), so the savers and loaders
 * work on any backend's memory.
 */
#include "io/io_impl.h"

#include <errno.h>
#include <stdlib.h>

enum { CHUNK = 1 << 20 };

mt_status mt__fwrite_backend(FILE *f, const mt_backend *be, const void *src, size_t bytes,
                             uint32_t *crc, int *err) {
    *err = 0;
    if (!bytes) return MT_OK;
    size_t size = bytes < CHUNK ? bytes : CHUNK;
    unsigned char *buf = malloc(size);
    if (!buf) return MT_ENOMEM;
    mt_status s = MT_OK;
    for (size_t at = 0; at < bytes && s == MT_OK; at += size) {
        size_t n = bytes - at < size ? bytes - at : size;
        s = mt_backend_copy_out(be, buf, (const unsigned char *)src + at, n);
        if (s == MT_OK && crc) *crc = mt_crc32(*crc, buf, n);
        if (s == MT_OK && fwrite(buf, 1, n, f) != n) { *err = errno; s = MT_EIO; }
    }
    free(buf);
    return s;
}

mt_status mt__fread_backend(FILE *f, const mt_backend *be, void *dst, size_t bytes, int *err) {
    *err = 0;
    if (!bytes) return MT_OK;
    size_t size = bytes < CHUNK ? bytes : CHUNK;
    unsigned char *buf = malloc(size);
    if (!buf) return MT_ENOMEM;
    mt_status s = MT_OK;
    for (size_t at = 0; at < bytes && s == MT_OK; at += size) {
        size_t n = bytes - at < size ? bytes - at : size;
        if (fread(buf, 1, n, f) != n) { *err = ferror(f) ? errno : 0; s = MT_EIO; }
        if (s == MT_OK) s = mt_backend_copy_in(be, (unsigned char *)dst + at, buf, n);
    }
    free(buf);
    return s;
}
