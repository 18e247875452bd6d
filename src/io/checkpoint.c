/*
 * checkpoint.c — meshtrain's own checkpoint: parameters, optimizer moments and
 * the run's position, enough to resume a run bit for bit on any mesh.
 *
 * Format, version 1. All integers little-endian; offsets in bytes.
 *
 *   header (308 bytes)
 *     0   char[8]   magic "MTCKPT\0\0"
 *     8   u32       version (1)
 *     12  u32       n_params: parameter records that follow
 *     16  i64       meta.step
 *     24  i64       meta.data_pos
 *     32  u64       meta.seed
 *     40  i64       optimizer steps (mt_optim_steps), -1 if saved without one
 *     48  char[256] meta.model, NUL-padded
 *     304 u32       CRC-32 of bytes [0, 304): lets mt_ckpt_read_meta trust the
 *                   meta block without reading a multi-gigabyte file
 *   n_params records, in the graph's declaration order
 *     u32           name length n (1..MT_MAX_NAME-1), then n bytes of name (no NUL)
 *     u32           dtype (mt_dtype; only MT_F32 so far)
 *     u32           ndim (1..4)
 *     i64[4]        global shape (unused dims 1)
 *     u32[4], u32   sharding: dim_axes[4], partial_axes (mt_sharding, as saved;
 *                   informational: the data is the whole global tensor, so any
 *                   mesh can load it)
 *     u32           moments: bit 0 = m follows, bit 1 = v follows
 *     i64           numel
 *     numel·4       data (f32, row-major)
 *     numel·4       m (f32), if bit 0
 *     numel·4       v (f32), if bit 1
 *   trailer
 *     u32           CRC-32 (IEEE, as zlib) of every byte before it
 *
 * The file is written to "<path>.tmp" (files.c: one temporary name per
 * output), flushed, fsynced and renamed over <path>, and the directory is
 * fsynced: a crash leaves the previous checkpoint or the new one, never a torn
 * one. Load verifies the CRC before anything else, then checks every record
 * against the graph and every value it will copy for NaN and infinity, and
 * only then copies: a bad file leaves the graph and the optimizer as they were. Tensor values
 * and moments live in the graph's backend: they are written and read through
 * its copy_out and copy_in (backend_io.c), never touched here. Moments the file holds but
 * the optimizer has no room for are an error (a resume would silently differ);
 * moments the file lacks (saved with opt = NULL) leave the optimizer's as they
 * are, which is what fine-tuning from a parameters-only checkpoint wants.
 */
#include "graph/tensor_data.h"
#include "io/io_impl.h"

#include <limits.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint.c writes tensor data in place and assumes a little-endian host"
#endif

#define CK_MAGIC        "MTCKPT\0\0"
#define CK_MAGIC_BYTES  8
#define CK_VERSION      1
#define CK_MODEL_BYTES  256
#define CK_HEADER_CRC_AT 304
#define CK_HEADER_BYTES 308
#define CK_RECORD_FIXED 72   /* record bytes after the name, before the data */

/* ------------------------------------------------------------------------ */
/* Little-endian fields                                                      */
/* ------------------------------------------------------------------------ */

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* "(768,2304)" */
static void shape_str(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < ndim && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, i ? ",%lld" : "%lld", (long long)shape[i]);
    if (k < size) snprintf(buf + k, size - k, ")");
}

/* ------------------------------------------------------------------------ */
/* Save                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct {
    FILE    *f;
    uint32_t crc;   /* of everything written so far */
    bool     ok;
    int      err;   /* errno of the first failed write */
    mt_status fail; /* a failure that is not a write's (no memory, the backend), or MT_OK */
    char     msg[512];
} writer;

static void w_bytes(writer *w, const void *p, size_t n) {
    if (!w->ok || n == 0) return;
    w->crc = mt_crc32(w->crc, p, n);
    if (fwrite(p, 1, n, w->f) != n) { w->ok = false; w->err = errno; }
}

/* Writes n bytes of a backend buffer (a tensor's values, a moment). */
static void w_backend(writer *w, const mt_backend *be, const void *p, size_t n) {
    if (!w->ok || n == 0) return;
    mt_status s = mt__fwrite_backend(w->f, be, p, n, &w->crc, &w->err);
    if (s == MT_OK || s == MT_EIO) { w->ok = s == MT_OK; return; }
    w->ok = false;
    w->fail = s;
    snprintf(w->msg, sizeof w->msg, "%s", s == MT_ENOMEM ? "out of memory" : mt_errmsg());
}

/* Checks that every parameter can be written before the file is created. */
static mt_status check_params_for_save(const char *path, mt_graph *g) {
    int n = mt_graph_n_params(g);
    for (int i = 0; i < n; i++) {
        mt_tensor *t = mt_graph_param_at(g, i);
        const char *name = t ? mt_tensor_name(t) : NULL;
        if (!t || !name)
            return mt_fail(MT_EINTERNAL, "saving checkpoint '%s': parameter %d of %d is missing "
                           "from the graph", path, i, n);
        size_t len = strlen(name);
        if (len == 0 || len >= MT_MAX_NAME)
            return mt_fail(MT_EINVAL, "saving checkpoint '%s': parameter %d has a name of %zu "
                           "bytes; names are 1 to %d bytes", path, i, len, MT_MAX_NAME - 1);
        if (mt_tensor_dtype(t) != MT_F32)
            return mt_fail(MT_EUNSUPPORTED, "saving checkpoint '%s': parameter '%s' is not f32; "
                           "checkpoints hold f32 parameters only", path, name);
        int nd = mt_tensor_ndim(t);
        if (nd < 1 || nd > MT_MAX_DIMS)
            return mt_fail(MT_EINTERNAL, "saving checkpoint '%s': parameter '%s' has %d dims",
                           path, name, nd);
        if (!mt__tensor_buffer(t))
            return mt_fail(MT_ESTATE, "saving checkpoint '%s': parameter '%s' has no storage; "
                           "call mt_graph_compile first", path, name);
    }
    return MT_OK;
}

/* The save, through `claim` (NULL: one of its own). */
static mt_status ckpt_save(const char *path, mt_output *claim, mt_graph *g, mt_optim *opt,
                           const mt_ckpt_meta *meta) {
    if (!path || !g || !meta)
        return mt_fail(MT_EINVAL, "mt_ckpt_save: path, g or meta is NULL");
    if (mt_graph_status(g) != MT_OK)
        return mt_fail(MT_ESTATE, "cannot save checkpoint '%s' from a graph in error: %s", path,
                       mt_graph_errmsg(g));
    mt_status s = check_params_for_save(path, g);
    if (s != MT_OK) return s;
    int n = mt_graph_n_params(g);

    mt__save sv;
    if ((s = mt__save_begin(path, "checkpoint", claim, &sv)) != MT_OK) return s;
    writer w = {.f = sv.f, .crc = 0, .ok = true, .fail = MT_OK};
    const mt_backend *be = mt__graph_backend(g);

    unsigned char h[CK_HEADER_BYTES] = {0};
    memcpy(h, CK_MAGIC, CK_MAGIC_BYTES);
    put_u32(h + 8, CK_VERSION);
    put_u32(h + 12, (uint32_t)n);
    put_u64(h + 16, (uint64_t)(int64_t)meta->step);
    put_u64(h + 24, (uint64_t)meta->data_pos);
    put_u64(h + 32, meta->seed);
    put_u64(h + 40, (uint64_t)(int64_t)(opt ? mt_optim_steps(opt) : -1));
    size_t mlen = strnlen(meta->model, CK_MODEL_BYTES - 1);   /* keep a NUL */
    memcpy(h + 48, meta->model, mlen);
    put_u32(h + CK_HEADER_CRC_AT, mt_crc32(0, h, CK_HEADER_CRC_AT));
    w_bytes(&w, h, sizeof h);

    for (int i = 0; i < n && w.ok; i++) {
        mt_tensor *t = mt_graph_param_at(g, i);
        const char *name = mt_tensor_name(t);
        size_t len = strlen(name);
        int nd = mt_tensor_ndim(t);
        int64_t numel = mt_tensor_numel(t);
        mt_sharding sh = mt_tensor_sharding(t);
        const float *m = opt ? mt_optim_moment(opt, i, 1) : NULL;
        const float *v = opt ? mt_optim_moment(opt, i, 2) : NULL;

        unsigned char r[4 + MT_MAX_NAME + CK_RECORD_FIXED] = {0};
        unsigned char *p = r;
        put_u32(p, (uint32_t)len);                 p += 4;
        memcpy(p, name, len);                      p += len;
        put_u32(p, (uint32_t)mt_tensor_dtype(t));  p += 4;
        put_u32(p, (uint32_t)nd);                  p += 4;
        for (int d = 0; d < MT_MAX_DIMS; d++, p += 8)
            put_u64(p, (uint64_t)(d < nd ? mt_tensor_dim(t, d) : 1));
        for (int d = 0; d < MT_MAX_DIMS; d++, p += 4) put_u32(p, sh.dim_axes[d]);
        put_u32(p, sh.partial_axes);               p += 4;
        put_u32(p, (m ? 1u : 0u) | (v ? 2u : 0u)); p += 4;
        put_u64(p, (uint64_t)numel);               p += 8;
        w_bytes(&w, r, (size_t)(p - r));
        w_backend(&w, be, mt__tensor_buffer(t), (size_t)numel * sizeof(float));
        if (m) w_backend(&w, be, m, (size_t)numel * sizeof(float));
        if (v) w_backend(&w, be, v, (size_t)numel * sizeof(float));
    }
    unsigned char trailer[4];
    put_u32(trailer, w.crc);
    if (w.ok && fwrite(trailer, 1, 4, w.f) != 4) { w.ok = false; w.err = errno; }
    s = mt__save_end(&sv, w.ok, w.err);
    if (w.fail != MT_OK)   /* the previous file is untouched */
        return mt_fail(w.fail, "saving checkpoint '%s': %s", path, w.msg);
    return s;
}

mt_status mt_ckpt_save(const char *path, mt_graph *g, mt_optim *opt, const mt_ckpt_meta *meta) {
    return ckpt_save(path, NULL, g, opt, meta);
}

mt_status mt_ckpt_save_to(mt_output *out, mt_graph *g, mt_optim *opt, const mt_ckpt_meta *meta) {
    if (!out) return mt_fail(MT_EINVAL, "mt_ckpt_save_to: out is NULL");
    return ckpt_save(mt_output_path(out), out, g, opt, meta);
}

/* ------------------------------------------------------------------------ */
/* Load                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct {
    uint32_t version, n_params;
    int64_t  opt_steps;
    mt_ckpt_meta meta;
} ck_header;

/* Opens `path`, checks the magic and that the file can hold a header and a
 * trailer; fills *size. */
static mt_status open_ckpt(const char *path, FILE **fp, int64_t *size) {
    *fp = NULL;
    FILE *f;
    int64_t bytes = 0;
    mt_status s = mt__file_check_not_tmp(path, "checkpoint");
    if (s == MT_OK) s = mt_input_open(path, "checkpoint", 0, &f, &bytes);
    if (s != MT_OK) return s;
    unsigned char magic[CK_MAGIC_BYTES] = {0};
    size_t got = fread(magic, 1, sizeof magic, f);
    if (got != sizeof magic || memcmp(magic, CK_MAGIC, CK_MAGIC_BYTES) != 0)
        s = mt_fail(MT_EFORMAT, "'%s' is not a meshtrain checkpoint (no \"MTCKPT\" magic)%s",
                    path, got >= 4 && get_u32(magic) == 20240326
                    ? "; it is an llm.c checkpoint: load it with mt_llmc_load" : "");
    else if (bytes < CK_HEADER_BYTES + 4)
        s = mt_fail(MT_EFORMAT, "checkpoint '%s' is truncated: %lld bytes, less than its "
                    "%d-byte header and trailer", path, (long long)bytes, CK_HEADER_BYTES + 4);
    if (s != MT_OK) { fclose(f); return s; }
    *fp = f;
    *size = bytes;
    return MT_OK;
}

/* Reads and parses the header block at offset 0. */
static mt_status read_header(const char *path, FILE *f, ck_header *h) {
    unsigned char b[CK_HEADER_BYTES];
    if (fseeko(f, 0, SEEK_SET) != 0 || fread(b, 1, sizeof b, f) != sizeof b)
        return mt_fail(MT_EIO, "reading the header of checkpoint '%s': %s", path,
                       ferror(f) ? strerror(errno) : "unexpected end of file");
    uint32_t want = get_u32(b + CK_HEADER_CRC_AT), got = mt_crc32(0, b, CK_HEADER_CRC_AT);
    if (want != got)
        return mt_fail(MT_ECHECKSUM, "checkpoint '%s' is corrupted: its meta block has crc "
                       "0x%08x, stored 0x%08x; the previous one, if any, is untouched",
                       path, got, want);
    h->version = get_u32(b + 8);
    if (h->version != CK_VERSION)
        return mt_fail(MT_EFORMAT, "checkpoint '%s' has format version %u, expected %d; it was "
                       "written by a different meshtrain", path, h->version, CK_VERSION);
    h->n_params = get_u32(b + 12);
    memset(&h->meta, 0, sizeof h->meta);
    int64_t step = (int64_t)get_u64(b + 16);
    h->meta.data_pos = (int64_t)get_u64(b + 24);
    h->meta.seed = get_u64(b + 32);
    h->opt_steps = (int64_t)get_u64(b + 40);
    /* the CRC says the bytes are as written, not that a writer was sane */
    if (step < 0 || step > INT_MAX || h->meta.data_pos < 0 || h->opt_steps < -1 ||
        h->opt_steps > INT_MAX)
        return mt_fail(MT_EFORMAT, "checkpoint '%s' has an impossible step %lld, data position "
                       "%lld or optimizer step %lld", path, (long long)step,
                       (long long)h->meta.data_pos, (long long)h->opt_steps);
    h->meta.step = (int)step;
    memcpy(h->meta.model, b + 48, CK_MODEL_BYTES);
    h->meta.model[CK_MODEL_BYTES - 1] = '\0';
    return MT_OK;
}

/* CRC of bytes [0, size-4) against the trailer. */
static mt_status verify_crc(const char *path, FILE *f, int64_t size) {
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf) return mt_fail(MT_ENOMEM, "no memory to verify checkpoint '%s'", path);
    uint32_t crc = 0;
    int64_t left = size - 4;
    bool ok = fseeko(f, 0, SEEK_SET) == 0;
    while (ok && left > 0) {
        size_t want = left < CHUNK ? (size_t)left : CHUNK;
        ok = fread(buf, 1, want, f) == want;
        if (ok) crc = mt_crc32(crc, buf, want);
        left -= (int64_t)want;
    }
    unsigned char t[4];
    ok = ok && fread(t, 1, 4, f) == 4;
    free(buf);
    if (!ok)
        return mt_fail(MT_EIO, "reading checkpoint '%s': %s", path,
                       ferror(f) ? strerror(errno) : "file shrank while reading");
    if (crc != get_u32(t))
        return mt_fail(MT_ECHECKSUM, "checkpoint '%s' is corrupted (crc 0x%08x != stored "
                       "0x%08x); nothing was loaded, and the previous one, if any, is untouched",
                       path, crc, get_u32(t));
    return MT_OK;
}

mt_status mt_ckpt_read_meta(const char *path, mt_ckpt_meta *meta) {
    if (!path || !meta) return mt_fail(MT_EINVAL, "mt_ckpt_read_meta: path or meta is NULL");
    FILE *f;
    int64_t size;
    mt_status s = open_ckpt(path, &f, &size);
    if (s != MT_OK) return s;
    ck_header h;
    s = read_header(path, f, &h);
    fclose(f);
    if (s == MT_OK) *meta = h.meta;
    return s;
}

/* One parameter record, checked against the graph, ready to copy. */
typedef struct {
    char     name[MT_MAX_NAME];
    void    *data;       /* the parameter's buffer in the graph's backend */
    float   *m, *v;      /* optimizer slots to fill (the backend's), NULL to skip */
    int64_t  offset;     /* of the data in the file */
    int64_t  numel;
    uint32_t moments;
} ck_entry;

/* Parses the record at *off and matches it against g (and opt); advances *off
 * past its data. `seen` marks graph parameters already matched. */
static mt_status check_record(const char *path, FILE *f, int64_t *off, int64_t end, mt_graph *g,
                              mt_optim *opt, const char *model, bool *seen, ck_entry *e) {
    unsigned char b[4 + MT_MAX_NAME + CK_RECORD_FIXED];
    if (*off + 4 > end || fseeko(f, *off, SEEK_SET) != 0 || fread(b, 1, 4, f) != 4)
        return mt_fail(MT_EFORMAT, "checkpoint '%s' ends inside a parameter record at byte %lld",
                       path, (long long)*off);
    uint32_t len = get_u32(b);
    if (len == 0 || len >= MT_MAX_NAME)
        return mt_fail(MT_EFORMAT, "checkpoint '%s' has a parameter name of %u bytes at byte "
                       "%lld; names are 1 to %d bytes", path, len, (long long)*off,
                       MT_MAX_NAME - 1);
    if (*off + 4 + len + CK_RECORD_FIXED > end ||
        fread(b + 4, 1, len + CK_RECORD_FIXED, f) != len + CK_RECORD_FIXED)
        return mt_fail(MT_EFORMAT, "checkpoint '%s' ends inside a parameter record at byte %lld",
                       path, (long long)*off);
    char name[MT_MAX_NAME];
    memcpy(name, b + 4, len);
    name[len] = '\0';
    const unsigned char *p = b + 4 + len;
    uint32_t dtype = get_u32(p), nd = get_u32(p + 4);
    int64_t shape[MT_MAX_DIMS];
    for (int d = 0; d < MT_MAX_DIMS; d++) shape[d] = (int64_t)get_u64(p + 8 + 8 * d);
    /* p + 40: sharding, informational */
    uint32_t moments = get_u32(p + 60);
    int64_t numel = (int64_t)get_u64(p + 64);
    int64_t data_at = *off + 4 + len + CK_RECORD_FIXED;

    int64_t prod = 1;
    bool shape_ok = nd >= 1 && nd <= MT_MAX_DIMS;
    for (uint32_t d = 0; shape_ok && d < nd; d++) {
        shape_ok = shape[d] >= 1 && shape[d] <= end;
        if (shape_ok) prod *= shape[d];
        shape_ok = shape_ok && prod <= end;
    }
    int n_arrays = 1 + !!(moments & 1) + !!(moments & 2);
    if (!shape_ok || prod != numel || moments > 3 ||
        data_at + numel * 4 * n_arrays > end)
        return mt_fail(MT_EFORMAT, "checkpoint '%s' has a malformed record for '%s' (ndim %u, "
                       "numel %lld, moments %u) or ends inside its data", path, name, nd,
                       (long long)numel, moments);
    if (dtype != MT_F32)
        return mt_fail(MT_EUNSUPPORTED, "checkpoint '%s' holds '%s' as dtype %u; only f32 (%d) "
                       "is supported", path, name, dtype, MT_F32);

    mt_tensor *t = mt_graph_find(g, name);
    int index = -1;
    for (int i = 0; t && i < mt_graph_n_params(g) && index < 0; i++)
        if (mt_graph_param_at(g, i) == t) index = i;
    if (index < 0)
        return mt_fail(MT_ESHAPE, "checkpoint '%s' has parameter '%s' but the graph has no "
                       "parameter of that name; build the model the checkpoint describes (%s)",
                       path, name, model[0] ? model : "no model string");
    if (seen[index])
        return mt_fail(MT_EFORMAT, "checkpoint '%s' holds parameter '%s' twice", path, name);
    seen[index] = true;

    /* the same shape, or the same storage with the leading dims grouped
     * otherwise (GPT's q, k, v: (3C,C) in checkpoints before 2026-11-30,
     * (3,C,C) now): the last dim and the element count agree */
    int gnd = mt_tensor_ndim(t);
    int64_t gshape[MT_MAX_DIMS] = {0}, gnumel = 1;
    for (int d = 0; d < gnd && d < MT_MAX_DIMS; d++) {
        gshape[d] = mt_tensor_dim(t, d);
        gnumel *= gshape[d];
    }
    bool same = gnd >= 1 && gnumel == numel && gshape[gnd - 1] == shape[nd - 1];
    if (!same) {
        char gs[96], fs[96];
        shape_str(gshape, gnd < MT_MAX_DIMS ? gnd : MT_MAX_DIMS, gs, sizeof gs);
        shape_str(shape, (int)nd, fs, sizeof fs);
        return mt_fail(MT_ESHAPE, "parameter '%s' has shape %s in the graph but %s in checkpoint "
                       "'%s'; build the model the checkpoint describes (%s)", name, gs, fs,
                       path, model[0] ? model : "no model string");
    }
    if (mt_tensor_dtype(t) != MT_F32)
        return mt_fail(MT_EUNSUPPORTED, "parameter '%s' is not f32 in the graph; checkpoint "
                       "'%s' holds f32", name, path);

    *e = (ck_entry){.data = mt__tensor_buffer(t), .offset = data_at, .numel = numel,
                    .moments = moments};
    memcpy(e->name, name, sizeof e->name);
    if (!e->data)
        return mt_fail(MT_ESTATE, "parameter '%s' has no storage; call mt_graph_compile before "
                       "loading checkpoint '%s'", name, path);
    if (opt) {
        for (int k = 1; k <= 2; k++) {
            if (!(moments & (uint32_t)k)) continue;
            float *slot = mt_optim_moment(opt, index, k);
            if (!slot)
                return mt_fail(MT_EINVAL, "checkpoint '%s' holds optimizer moment %c of '%s' "
                               "but this optimizer keeps none; use the optimizer the run was "
                               "saved with, or pass opt = NULL to load parameters only",
                               path, k == 1 ? 'm' : 'v', name);
            if (k == 1) e->m = slot; else e->v = slot;
        }
    }
    *off = data_at + numel * 4 * n_arrays;
    return MT_OK;
}

/* Checks that every value a load will copy is finite: the CRC only says the
 * bytes are as written, and a NaN parameter would sample NUL bytes or make
 * a resume fail at its first step, blaming the learning rate. */
static mt_status check_finite(const char *path, FILE *f, const ck_entry *es, uint32_t n) {
    static const char *const array_of[3] = {"parameter ", "the optimizer moment m of ",
                                            "the optimizer moment v of "};
    for (uint32_t r = 0; r < n; r++) {
        const ck_entry *e = &es[r];
        /* array 0: the parameter; 1, 2: the moments m and v, when loaded */
        for (int a = 0; a < 3; a++) {
            if ((a == 1 && !e->m) || (a == 2 && !e->v)) continue;
            int before = a == 0 ? 0 : a == 1 ? 1 : 1 + !!(e->moments & 1);
            int64_t at = e->offset + e->numel * 4 * before, bad = 0;
            float value = 0;
            int err = 0;
            mt_status s = fseeko(f, at, SEEK_SET) == 0 ? mt__scan_finite(f, e->numel, &bad, &value, &err)
                                                       : (err = errno, MT_EIO);
            if (s == MT_ENOMEM) return mt_fail(s, "no memory to check checkpoint '%s'", path);
            if (s == MT_EIO)
                return mt_fail(s, "reading %s'%s' from checkpoint '%s': %s", array_of[a], e->name,
                               path, err ? strerror(err) : "file shrank while reading");
            if (s == MT_ENAN)
                return mt_fail(s, "checkpoint '%s' holds %g in %s'%s' at element %lld; it was "
                               "saved from a run that had diverged, or damaged before its CRC "
                               "was computed: load an earlier checkpoint", path, (double)value,
                               array_of[a], e->name, (long long)bad);
        }
    }
    return MT_OK;
}

/* Copies the checked records into their tensors and optimizer slots, all
 * buffers of the backend `be`. */
static mt_status copy_records(const char *path, FILE *f, const mt_backend *be,
                              const ck_entry *es, uint32_t n) {
    for (uint32_t r = 0; r < n; r++) {
        const ck_entry *e = &es[r];
        size_t bytes = (size_t)e->numel * 4;
        int err = 0;
        mt_status s = fseeko(f, e->offset, SEEK_SET) == 0 ? MT_OK : (err = errno, MT_EIO);
        if (s == MT_OK) s = mt__fread_backend(f, be, e->data, bytes, &err);
        if (s == MT_OK && (e->moments & 1)) {
            if (e->m) s = mt__fread_backend(f, be, e->m, bytes, &err);
            else if (fseeko(f, e->offset + e->numel * 8, SEEK_SET) != 0) {
                err = errno;
                s = MT_EIO;
            }
        }
        if (s == MT_OK && e->v && (e->moments & 2)) s = mt__fread_backend(f, be, e->v, bytes, &err);
        if (s == MT_ENOMEM) return mt_fail(s, "no memory to load checkpoint '%s'", path);
        if (s == MT_EIO)
            return mt_fail(MT_EIO, "reading checkpoint '%s' at byte %lld: %s", path,
                           (long long)e->offset, err ? strerror(err) : "file shrank while reading");
        if (s != MT_OK)
            return mt_fail_wrap(s, "loading '%s' from checkpoint '%s'", e->name, path);
    }
    return MT_OK;
}

mt_status mt_ckpt_load(const char *path, mt_graph *g, mt_optim *opt, mt_ckpt_meta *meta) {
    if (!path || !g) return mt_fail(MT_EINVAL, "mt_ckpt_load: path or g is NULL");
    FILE *f;
    int64_t size;
    mt_status s = open_ckpt(path, &f, &size);
    if (s != MT_OK) return s;
    s = verify_crc(path, f, size);
    ck_header h;
    if (s == MT_OK) s = read_header(path, f, &h);
    if (s != MT_OK) { fclose(f); return s; }

    int n_graph = mt_graph_n_params(g);
    int64_t end = size - 4;
    if ((int64_t)h.n_params > (end - CK_HEADER_BYTES) / (4 + CK_RECORD_FIXED)) {
        fclose(f);
        return mt_fail(MT_EFORMAT, "checkpoint '%s' claims %u parameters, more than its %lld "
                       "bytes can hold", path, h.n_params, (long long)size);
    }
    ck_entry *es = calloc(h.n_params ? h.n_params : 1, sizeof *es);
    bool *seen = calloc(n_graph > 0 ? (size_t)n_graph : 1, sizeof *seen);
    if (!es || !seen) s = mt_fail(MT_ENOMEM, "no memory to load checkpoint '%s'", path);

    int64_t off = CK_HEADER_BYTES;
    for (uint32_t r = 0; s == MT_OK && r < h.n_params; r++)
        s = check_record(path, f, &off, end, g, opt, h.meta.model, seen, &es[r]);
    if (s == MT_OK && off != end)
        s = mt_fail(MT_EFORMAT, "checkpoint '%s' has %lld bytes after its %u parameters",
                    path, (long long)(end - off), h.n_params);
    for (int i = 0; s == MT_OK && i < n_graph; i++)
        if (!seen[i])
            s = mt_fail(MT_ESHAPE, "graph parameter '%s' is not in checkpoint '%s'; build the "
                        "model the checkpoint describes (%s)",
                        mt_tensor_name(mt_graph_param_at(g, i)), path,
                        h.meta.model[0] ? h.meta.model : "no model string");
    if (s == MT_OK) s = check_finite(path, f, es, h.n_params);
    if (s == MT_OK) s = copy_records(path, f, mt__graph_backend(g), es, h.n_params);
    fclose(f);
    free(es);
    free(seen);
    mt_graph_params_changed(g);   /* written, or partly written on a failure */
    if (s != MT_OK) return s;

    if (opt) mt_optim_set_steps(opt, h.opt_steps >= 0 ? (int)h.opt_steps : h.meta.step);
    if (meta) *meta = h.meta;
    return MT_OK;
}
