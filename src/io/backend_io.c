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

/* `bytes` bytes between f and the backend buffer `data`, a chunk at a time:
 * written (out of the backend, into f, added to *crc) or read. */
static mt_status transfer(FILE *f, const mt_backend *be, unsigned char *data, size_t bytes,
                          bool write, uint32_t *crc, int *err) {
    *err = 0;
    if (!bytes) return MT_OK;
    size_t size = bytes < CHUNK ? bytes : CHUNK;
    unsigned char *buf = malloc(size);
    if (!buf) return MT_ENOMEM;
    mt_status s = MT_OK;
    for (size_t at = 0; at < bytes && s == MT_OK; at += size) {
        size_t n = bytes - at < size ? bytes - at : size;
        if (write) {
            s = mt_backend_copy_out(be, buf, data + at, n);
            if (s == MT_OK && crc) *crc = mt_crc32(*crc, buf, n);
            if (s == MT_OK && fwrite(buf, 1, n, f) != n) { *err = errno; s = MT_EIO; }
        } else {
            if (fread(buf, 1, n, f) != n) { *err = ferror(f) ? errno : 0; s = MT_EIO; }
            if (s == MT_OK) s = mt_backend_copy_in(be, data + at, buf, n);
        }
    }
    free(buf);
    return s;
}

mt_status mt__fwrite_backend(FILE *f, const mt_backend *be, const void *src, size_t bytes,
                             uint32_t *crc, int *err) {
    /* only read: transfer writes into the backend when reading the file */
    return transfer(f, be, (unsigned char *)src, bytes, true, crc, err);
}

mt_status mt__fread_backend(FILE *f, const mt_backend *be, void *dst, size_t bytes, int *err) {
    return transfer(f, be, dst, bytes, false, NULL, err);
}
