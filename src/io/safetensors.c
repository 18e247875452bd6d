/*
 * safetensors.c — Hugging Face's safetensors files, read strictly (issue
 * 43): one file, or a model's shards through model.safetensors.index.json.
 *
 * A file (the format's README, huggingface/safetensors): 8 bytes, the
 * header's length N as a little-endian u64; N bytes of JSON, an object
 * whose members are tensors — "name": {"dtype": "F32", "shape": [2, 3],
 * "data_offsets": [begin, end]} — and an optional "__metadata__" object of
 * strings; then the data section, the offsets relative to its start.
 * Checked here as the format's own library validates it: the header's
 * length within the file and at most 100,000,000 bytes (the Rust crate's
 * MAX_HEADER_SIZE), the JSON strict (base/json.h: duplicate names
 * refused), every tensor's byte size numel · dtype size exactly
 * end - begin (numel overflowing 2^53 refused), and the tensors sorted by
 * offset tiling the data section from 0 to its end with no gap or overlap.
 * Every refusal names the file and the tensor.
 *
 * An index (transformers' sharded save): {"metadata": {"total_size": S},
 * "weight_map": {"name": "model-00001-of-00002.safetensors", ...}}: the
 * shards are file names in the index's directory (no '/'), each tensor
 * in the file the map names, every tensor of a shard in the map, and S
 * (when given) the sum of the tensors' bytes.
 */
#include "base/json.h"
#include "io/io_impl.h"
#include "io/safetensors_impl.h"
#include "tensor/tensor_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors files are little-endian; safetensors.c reads them in place"
#endif

#define WHAT          "safetensors file"
#define MAX_HEADER    100000000LL        /* the safetensors crate's MAX_HEADER_SIZE */
#define MAX_EXACT     9007199254740992.0 /* 2^53: a JSON number's exact integers */


/* the format's other dtypes: named as such in refusals */
static const char *const OTHER_DTYPES[] = {"BOOL", "U8", "I8", "U16", "I16", "U32", "I32",
                                           "U64", "I64", "F64", "F8_E4M3", "F8_E5M2", "F4",
                                           "F6_E2M3", "F6_E3M2", "F8_E8M0", "C64", NULL};

/* A JSON number that is an integer in [0, 2^53), into *v. */
static bool exact_count(const mt_json *j, int64_t *v) {
    if (!j || j->type != MT_JSON_NUM || !(j->num >= 0) || j->num >= MAX_EXACT ||
        j->num != floor(j->num))
        return false;
    *v = (int64_t)j->num;
    return true;
}

static int cmp_begin(const void *a, const void *b) {
    const mt_st_tensor *x = a, *y = b;
    if (x->file != y->file) return x->file - y->file;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

/* One tensor's entry `e` (named `name`) of file `path`, into *t. */
static mt_status parse_entry(const char *path, const char *name, const mt_json *e,
                             mt_st_tensor *t) {
    if (e->type != MT_JSON_OBJ)
        return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s' is %s, not an object with dtype, "
                       "shape and data_offsets", path, name, mt__json_type_name(e->type));
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->keys[i], "dtype") && strcmp(e->keys[i], "shape") &&
            strcmp(e->keys[i], "data_offsets"))
            return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s' has an unknown field '%s' "
                           "(a tensor has dtype, shape and data_offsets)", path, name,
                           e->keys[i]);
    const mt_json *dt = mt__json_get(e, "dtype"), *sh = mt__json_get(e, "shape"),
                  *off = mt__json_get(e, "data_offsets");
    if (!dt || !sh || !off)
        return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s' has no %s", path, name,
                       !dt ? "dtype" : !sh ? "shape" : "data_offsets");
    if (dt->type != MT_JSON_STR)
        return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s': dtype is %s, not a string", path,
                       name, mt__json_type_name(dt->type));
    int size = 0;
    for (mt_st_dtype d = MT_ST_F32; d <= MT_ST_F16; d++)
        if (!strcmp(dt->str, mt_st_dtype_name(d))) t->dtype = d, size = mt_st_dtype_size(d);
    if (!size) {
        for (int i = 0; OTHER_DTYPES[i]; i++)
            if (!strcmp(dt->str, OTHER_DTYPES[i]))
                return mt_fail(MT_EUNSUPPORTED, WHAT " '%s': tensor '%s' is %s; meshtrain "
                               "reads F32, BF16 and F16 weights", path, name, dt->str);
        return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s' has an unknown dtype '%.32s'",
                       path, name, dt->str);
    }
    if (sh->type != MT_JSON_ARR || sh->n > MT_ST_MAX_DIMS)
        return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s': shape must be an array of at most "
                       "%d sizes", path, name, MT_ST_MAX_DIMS);
    t->ndim = sh->n;
    double numel = 1;
    for (int d = 0; d < sh->n; d++) {
        if (!exact_count(sh->kids[d], &t->shape[d]))
            return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s': shape[%d] is not a size (an "
                           "integer from 0 to 2^53)", path, name, d);
        numel *= (double)t->shape[d];
    }
    if (numel * size >= MAX_EXACT)
        return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s': its shape holds %.4g bytes, past "
                       "2^53", path, name, numel * size);
    t->numel = (int64_t)numel;
    if (off->type != MT_JSON_ARR || off->n != 2 || !exact_count(off->kids[0], &t->begin) ||
        !exact_count(off->kids[1], &t->end))
        return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s': data_offsets must be two byte "
                       "offsets [begin, end]", path, name);
    if (t->end < t->begin || t->end - t->begin != t->numel * size)
        return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s': data_offsets [%lld, %lld] hold "
                       "%lld bytes where %s%s holds %lld", path, name, (long long)t->begin,
                       (long long)t->end, (long long)(t->end - t->begin), dt->str,
                       mt__st_shape_str(t).s, (long long)(t->numel * size));
    if (!(t->name = strdup(name))) return mt_fail(MT_ENOMEM, "safetensors: tensor names");
    return MT_OK;
}

/* The metadata object m (string values only) of file `path`, kept. */
static mt_status parse_meta(mt_safetensors *st, const char *path, const mt_json *m) {
    if (m->type != MT_JSON_OBJ)
        return mt_fail(MT_EFORMAT, WHAT " '%s': __metadata__ is %s, not an object of strings",
                       path, mt__json_type_name(m->type));
    if (st->meta) return MT_OK;   /* the first file's, as transformers writes every shard's */
    if (!(st->meta = calloc((size_t)(2 * m->n + 1), sizeof *st->meta)))
        return mt_fail(MT_ENOMEM, "safetensors: metadata");
    for (int i = 0; i < m->n; i++) {
        if (m->kids[i]->type != MT_JSON_STR)
            return mt_fail(MT_EFORMAT, WHAT " '%s': __metadata__ '%s' is %s, not a string", path,
                           m->keys[i], mt__json_type_name(m->kids[i]->type));
        st->n_meta++;
        if (!(st->meta[2 * i] = strdup(m->keys[i])) || !(st->meta[2 * i + 1] =
                                                            strdup(m->kids[i]->str)))
            return mt_fail(MT_ENOMEM, "safetensors: metadata");
    }
    return MT_OK;
}

/* Reads file `path`'s header as file number `fi` of st: its tensors
 * appended, checked to tile its data section. */
static mt_status read_file(mt_safetensors *st, const char *path, int fi) {
    int64_t size = 0;
    FILE *f = NULL;
    mt_status s = mt_input_open(path, WHAT, 0, &f, &size);
    if (s != MT_OK) return s;
    st->files[fi] = f;
    uint8_t b[8];
    if (size < 8 || pread(fileno(f), b, 8, 0) != 8)
        return mt_fail(MT_EFORMAT, WHAT " '%s': %lld bytes, shorter than the 8-byte header "
                       "length", path, (long long)size);
    uint64_t N = 0;
    for (int i = 7; i >= 0; i--) N = N << 8 | b[i];
    if (N > (uint64_t)(size - 8) || N > (uint64_t)MAX_HEADER || N < 2)
        return mt_fail(MT_EFORMAT, WHAT " '%s': the header's length %llu is past the file's %lld "
                       "bytes or the format's limit of %lld (not a safetensors file?)", path,
                       (unsigned long long)N, (long long)size, MAX_HEADER);
    char *text = malloc(N + 1);
    if (!text) return mt_fail(MT_ENOMEM, "safetensors: a header of %llu bytes",
                              (unsigned long long)N);
    if (pread(fileno(f), text, N, 8) != (ssize_t)N) {
        free(text);
        return mt_fail(MT_EIO, WHAT " '%s': reading the header: %s", path, strerror(errno));
    }
    text[N] = 0;
    mt_json *h = NULL;
    s = text[0] == '{' ? mt__json_parse(text, N, path, &h)
                       : mt_fail(MT_EFORMAT, WHAT " '%s': the header does not start with '{'",
                                 path);
    free(text);
    st->data_at[fi] = 8 + (int64_t)N;
    const int64_t data = size - st->data_at[fi];
    if (s == MT_OK && h->type != MT_JSON_OBJ)
        s = mt_fail(MT_EFORMAT, WHAT " '%s': the header is %s, not an object", path,
                    mt__json_type_name(h->type));
    const int first = st->n;
    if (s == MT_OK) {
        mt_st_tensor *t = realloc(st->t, (size_t)(st->n + h->n) * sizeof *t);
        if (!t) s = mt_fail(MT_ENOMEM, "safetensors: %d tensors", st->n + h->n);
        else st->t = t;
    }
    for (int i = 0; s == MT_OK && i < h->n; i++) {
        if (!strcmp(h->keys[i], "__metadata__")) {
            s = parse_meta(st, path, h->kids[i]);
            continue;
        }
        mt_st_tensor *t = &st->t[st->n];
        memset(t, 0, sizeof *t);
        t->file = fi;
        if ((s = parse_entry(path, h->keys[i], h->kids[i], t)) == MT_OK) st->n++;
    }
    mt__json_free(h);
    if (s != MT_OK) return s;
    /* sorted by offset, the tensors tile [0, data) */
    qsort(st->t + first, (size_t)(st->n - first), sizeof *st->t, cmp_begin);
    int64_t at = 0;
    for (int i = first; i < st->n; i++) {
        const mt_st_tensor *t = &st->t[i];
        if (t->begin != at)
            return mt_fail(MT_EFORMAT, WHAT " '%s': tensor '%s' starts at byte %lld of the data "
                           "where the one before it ends at %lld (%s)", path, t->name,
                           (long long)t->begin, (long long)at,
                           t->begin < at ? "they overlap" : "a gap");
        at = t->end;
    }
    if (at != data)
        return mt_fail(MT_EFORMAT, WHAT " '%s': the tensors end at byte %lld of a data section "
                       "of %lld bytes (%s)", path, (long long)at, (long long)data,
                       at > data ? "past the file's end: truncated?" : "bytes left over");
    return MT_OK;
}

/* st's file list: one path. */
static mt_status files_alloc(mt_safetensors *st, int n) {
    st->paths = calloc((size_t)n, sizeof *st->paths);
    st->files = calloc((size_t)n, sizeof *st->files);
    st->data_at = calloc((size_t)n, sizeof *st->data_at);
    if (!st->paths || !st->files || !st->data_at)
        return mt_fail(MT_ENOMEM, "safetensors: %d files", n);
    st->n_files = n;
    return MT_OK;
}

mt_status mt_safetensors_open(const char *path, mt_safetensors **out) {
    *out = NULL;
    if (!path || !*path) return mt_fail(MT_EINVAL, "safetensors: no path given");
    struct stat sb;
    char buf[4096];
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {   /* a model's directory */
        snprintf(buf, sizeof buf, "%s/model.safetensors.index.json", path);
        if (access(buf, F_OK) != 0) snprintf(buf, sizeof buf, "%s/model.safetensors", path);
        if (access(buf, F_OK) != 0)
            return mt_fail(MT_EIO, "safetensors: directory '%s' holds neither "
                           "model.safetensors nor model.safetensors.index.json", path);
        path = buf;
    }
    mt_safetensors *st = calloc(1, sizeof *st);
    if (!st) return mt_fail(MT_ENOMEM, "safetensors: the handle");
    const size_t len = strlen(path);
    mt_status s = len > 5 && !strcmp(path + len - 5, ".json") ? mt__st_open_index(st, path)
                                                                : files_alloc(st, 1);
    if (s == MT_OK && st->n_files == 1 && !st->paths[0] && !(st->paths[0] = strdup(path)))
        s = mt_fail(MT_ENOMEM, "safetensors: a path");
    for (int i = 0; s == MT_OK && i < st->n_files; i++) s = read_file(st, st->paths[i], i);
    if (s == MT_OK && st->index_path) s = mt__st_check_index(st);
    if (s != MT_OK) {
        mt_safetensors_close(st);
        return s;
    }
    *out = st;
    return MT_OK;
}

void mt_safetensors_close(mt_safetensors *st) {
    if (!st) return;
    for (int i = 0; i < st->n_files; i++) {
        if (st->files[i]) fclose(st->files[i]);
        free(st->paths[i]);
    }
    for (int i = 0; i < st->n; i++) free(st->t[i].name);
    for (int i = 0; i < 2 * st->n_meta; i++) free(st->meta[i]);
    mt__st_index_free(st);
    free(st->paths), free(st->files), free(st->data_at), free(st->t), free(st->meta);
    free(st);
}

int mt_safetensors_count(const mt_safetensors *st) { return st->n; }

const mt_st_tensor *mt_safetensors_tensor(const mt_safetensors *st, int i) {
    return i >= 0 && i < st->n ? &st->t[i] : NULL;
}

const mt_st_tensor *mt_safetensors_find(const mt_safetensors *st, const char *name) {
    for (int i = 0; i < st->n; i++)
        if (!strcmp(st->t[i].name, name)) return &st->t[i];
    return NULL;
}

const char *mt_safetensors_metadata(const mt_safetensors *st, const char *key) {
    for (int i = 0; i < st->n_meta; i++)
        if (!strcmp(st->meta[2 * i], key)) return st->meta[2 * i + 1];
    return NULL;
}

const char *mt_safetensors_file(const mt_safetensors *st, const mt_st_tensor *t) {
    return st->paths[t->file];
}

mt_status mt_safetensors_read_f32(const mt_safetensors *st, const mt_st_tensor *t, int64_t first,
                                  int64_t n, float *out) {
    if (first < 0 || n < 0 || first > t->numel || n > t->numel - first)
        return mt_fail(MT_EINVAL, "safetensors: elements [%lld, +%lld) of tensor '%s' are past "
                       "its %lld", (long long)first, (long long)n, t->name, (long long)t->numel);
    const int es = mt_st_dtype_size(t->dtype);
    const int fd = fileno(st->files[t->file]);
    int64_t at = st->data_at[t->file] + t->begin + first * es;
    enum { CHUNK = 1 << 16 };   /* elements a read */
    uint16_t *half = NULL;      /* (CHUNK) a 16-bit tensor's read, on the heap: device
                                   threads' stacks are small */
    if (t->dtype != MT_ST_F32 && n > 0 &&
        !(half = malloc((size_t)(n < CHUNK ? n : CHUNK) * sizeof *half)))
        return mt_fail(MT_ENOMEM, WHAT " '%s': a read buffer for tensor '%s'",
                       st->paths[t->file], t->name);
    mt_status s = MT_OK;
    for (int64_t done = 0; done < n && s == MT_OK;) {
        const int64_t m = n - done < CHUNK ? n - done : CHUNK;
        void *dst = t->dtype == MT_ST_F32 ? (void *)(out + done) : (void *)half;
        const ssize_t got = pread(fd, dst, (size_t)(m * es), at);
        if (got != (ssize_t)(m * es)) {
            s = mt_fail(MT_EIO, WHAT " '%s': reading tensor '%s': %s", st->paths[t->file],
                        t->name, got < 0 ? strerror(errno) : "the file ended early");
            break;
        }
        if (t->dtype == MT_ST_BF16) mt__bf16_to_f32(out + done, half, (size_t)m);
        else if (t->dtype == MT_ST_F16)
            for (int64_t i = 0; i < m; i++) out[done + i] = mt__f16_to_f32_1(half[i]);
        done += m;
        at += m * es;
    }
    free(half);
    return s;
}

mt__st_shape_text mt__st_shape_str(const mt_st_tensor *t) {
    mt__st_shape_text r;
    mt__dims_str(t->shape, t->ndim, r.s, sizeof r.s);
    return r;
}
