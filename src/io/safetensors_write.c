/*
 * safetensors_write.c — a safetensors file from f32 arrays (issue 43's
 * writer): the 8-byte header length, the JSON header with the tensors in
 * the caller's order and their data_offsets laid end to end, padded with
 * spaces to a multiple of 8 bytes (as the format's library pads it, so
 * the data section starts aligned), then each tensor's elements in
 * row-major order, converted to its dtype (BF16 and F16 rounded to nearest
 * even). Written through a claimed output (meshtrain/files.h).
 */
#include "io/io_impl.h"
#include "io/safetensors_impl.h"
#include "tensor/tensor_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define WHAT "safetensors file"

int mt_st_dtype_size(mt_st_dtype d) { return d == MT_ST_F32 ? 4 : 2; }

const char *mt_st_dtype_name(mt_st_dtype d) {
    return d == MT_ST_F32 ? "F32" : d == MT_ST_BF16 ? "BF16" : "F16";
}

/* Whether s can be written inside JSON quotes as it is (no quote,
 * backslash or control character: nothing to escape). */
static bool json_plain(const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p == '"' || *p == '\\' || *p < 0x20) return false;
    return true;
}

static int64_t numel_of(const mt_st_write_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

static mt_status check(const char *path, const mt_st_write_tensor *t, int n,
                       const char *const *meta) {
    if (n < 0) return mt_fail(MT_EINVAL, WHAT " '%s': %d tensors", path, n);
    for (int i = 0; i < n; i++) {
        if (!t[i].name || !*t[i].name || !json_plain(t[i].name) ||
            !strcmp(t[i].name, "__metadata__"))
            return mt_fail(MT_EINVAL, WHAT " '%s': tensor %d's name '%s' is empty, reserved or "
                           "holds a quote, backslash or control character", path, i,
                           t[i].name ? t[i].name : "(null)");
        for (int j = 0; j < i; j++)
            if (!strcmp(t[i].name, t[j].name))
                return mt_fail(MT_EINVAL, WHAT " '%s': tensor '%s' is given twice", path,
                               t[i].name);
        if (t[i].ndim < 0 || t[i].ndim > MT_ST_MAX_DIMS || (unsigned)t[i].dtype > MT_ST_F16)
            return mt_fail(MT_EINVAL, WHAT " '%s': tensor '%s': %d dims (at most %d) or an "
                           "unknown dtype", path, t[i].name, t[i].ndim, MT_ST_MAX_DIMS);
        double numel = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            if (t[i].shape[d] < 0)
                return mt_fail(MT_EINVAL, WHAT " '%s': tensor '%s': size %lld in dim %d", path,
                               t[i].name, (long long)t[i].shape[d], d);
            numel *= (double)t[i].shape[d];
        }
        if (numel * 4 >= 9007199254740992.0)
            return mt_fail(MT_EINVAL, WHAT " '%s': tensor '%s' past 2^53 bytes", path,
                           t[i].name);
        if (numel > 0 && !t[i].data)
            return mt_fail(MT_EINVAL, WHAT " '%s': tensor '%s' has no data", path, t[i].name);
    }
    for (int i = 0; meta && meta[i]; i += 2)
        if (!meta[i + 1] || !json_plain(meta[i]) || !json_plain(meta[i + 1]))
            return mt_fail(MT_EINVAL, WHAT " '%s': metadata '%s' has no value, or a quote, "
                           "backslash or control character", path, meta[i]);
    return MT_OK;
}

/* The header's JSON into *out (free it), padded to a multiple of 8 with
 * spaces after 8 bytes of length; *len its length with the padding. */
static mt_status header(const mt_st_write_tensor *t, int n, const char *const *meta,
                        char **out, size_t *len) {
    size_t cap = 64;
    for (int i = 0; i < n; i++) cap += strlen(t[i].name) + 96 + 22 * (size_t)t[i].ndim;
    for (int i = 0; meta && meta[i]; i += 2) cap += strlen(meta[i]) + strlen(meta[i + 1]) + 8;
    char *h = malloc(cap + 8);
    if (!h) return mt_fail(MT_ENOMEM, "safetensors: a header of %zu bytes", cap);
    size_t at = 0;
    at += (size_t)snprintf(h + at, cap - at, "{");
    if (meta && meta[0]) {
        at += (size_t)snprintf(h + at, cap - at, "\"__metadata__\":{");
        for (int i = 0; meta[i]; i += 2)
            at += (size_t)snprintf(h + at, cap - at, "%s\"%s\":\"%s\"", i ? "," : "", meta[i],
                                   meta[i + 1]);
        at += (size_t)snprintf(h + at, cap - at, "}%s", n ? "," : "");
    }
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        const int64_t bytes = numel_of(&t[i]) * mt_st_dtype_size(t[i].dtype);
        at += (size_t)snprintf(h + at, cap - at, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                               i ? "," : "", t[i].name, mt_st_dtype_name(t[i].dtype));
        for (int d = 0; d < t[i].ndim; d++)
            at += (size_t)snprintf(h + at, cap - at, "%s%lld", d ? "," : "",
                                   (long long)t[i].shape[d]);
        at += (size_t)snprintf(h + at, cap - at, "],\"data_offsets\":[%lld,%lld]}",
                               (long long)off, (long long)(off + bytes));
        off += bytes;
    }
    at += (size_t)snprintf(h + at, cap - at, "}");
    while (at % 8) h[at++] = ' ';   /* the data section aligned (cap + 8 leaves room) */
    *out = h;
    *len = at;
    return MT_OK;
}

/* Tensor t's elements to f, converted, in chunks. */
static bool write_data(FILE *f, const mt_st_write_tensor *t) {
    const int64_t n = numel_of(t);
    if (t->dtype == MT_ST_F32) return fwrite(t->data, 4, (size_t)n, f) == (size_t)n;
    enum { CHUNK = 1 << 15 };
    uint16_t buf[CHUNK];
    for (int64_t i = 0; i < n; i += CHUNK) {
        const int64_t m = n - i < CHUNK ? n - i : CHUNK;
        if (t->dtype == MT_ST_BF16) mt__f32_to_bf16(buf, t->data + i, (size_t)m);
        else
            for (int64_t j = 0; j < m; j++) buf[j] = mt__f32_to_f16_1(t->data[i + j]);
        if (fwrite(buf, 2, (size_t)m, f) != (size_t)m) return false;
    }
    return true;
}

mt_status mt_safetensors_write(const char *path, const mt_st_write_tensor *t, int n,
                               const char *const *meta) {
    mt_status s = check(path ? path : "", t, n, meta);
    if (s != MT_OK) return s;
    char *h = NULL;
    size_t len = 0;
    if ((s = header(t, n, meta, &h, &len)) != MT_OK) return s;
    mt__save sv;
    if ((s = mt__save_begin(path, WHAT, NULL, &sv)) != MT_OK) {
        free(h);
        return s;
    }
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)len >> (8 * i));
    bool ok = fwrite(b, 1, 8, sv.f) == 8 && fwrite(h, 1, len, sv.f) == len;
    for (int i = 0; ok && i < n; i++) ok = write_data(sv.f, &t[i]);
    free(h);
    return mt__save_end(&sv, ok, ok ? 0 : errno);
}
