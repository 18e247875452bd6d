/*
 * dataset.c — token datasets: one llm.c token file, one text file, or
 * llm.c's sharded corpora (a directory or glob of *_train_*.bin and
 * *_val_*.bin shards, shards.c).
 *
 * One file is split once: the head is the training split, the last
 * floor(N·val_frac) tokens are the validation split. Shards are split by
 * their names: the train shards in name order are the training split, one
 * stream of tokens, and the val shards the validation split; val_frac does
 * not apply. A split is a list of segments of files, and a position in it is
 * a token index across its segments, so a checkpoint's data position
 * resumes at the same token of the same shard.
 *
 * Nothing is read into memory: tokens are copied out of a bounded window of
 * mapped blocks (token_files.c) when a batch is cut, text at one byte a
 * token. mt_dataset_rows cuts B consecutive windows of T+1 tokens out of a
 * split and copies only the rows asked for, so the global batch is a pure
 * function of the position — every device and every mesh sees the same
 * tokens for the same step — while each device reads only its own rows.
 */
#include "io/io_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Tokens [first, first+count) of file `file` are tokens [start, start+count)
 * of their split. */
typedef struct {
    int     file;
    int64_t first, count, start;
} segment;

typedef struct {
    segment *seg;   /* (n_seg) in order, contiguous */
    int      n_seg;
    int64_t  n;     /* tokens */
} split_t;

struct mt_dataset {
    mt__tokfile *files;     /* (n_files) */
    int          n_files;
    split_t      split[2];  /* 0 train, 1 val */
    int          vocab;
    bool         bounded;   /* vocab was given: every token checked against it at open */
    mt__tokmap  *map;       /* the mapped window over files */
};

/* ------------------------------------------------------------------------ */
/* Opening                                                                   */
/* ------------------------------------------------------------------------ */

/* Appends tokens [first, first+count) of file f to split sp (nothing when
 * count is 0). */
static mt_status add_segment(mt_dataset *ds, int sp, int f, int64_t first, int64_t count) {
    if (count <= 0) return MT_OK;
    split_t *s = &ds->split[sp];
    segment *g = realloc(s->seg, (size_t)(s->n_seg + 1) * sizeof *g);
    if (!g) return mt_fail(MT_ENOMEM, "no memory for the dataset's segments");
    s->seg = g;
    g[s->n_seg++] = (segment){.file = f, .first = first, .count = count, .start = s->n};
    s->n += count;
    return MT_OK;
}

/* Opens every file of the dataset into ds->files (n of them) and reads
 * every token once: unless the vocabulary was given (ds->bounded) it is
 * taken from them, else a token past it fails here, before any step,
 * naming the file, the token's index and its id (a shard far into the
 * corpus would otherwise fail the run when training reached it, after
 * hours, its steps unsaved). A one-file dataset's files are `shard` false. */
static mt_status open_files(mt_dataset *ds, char *const *paths, int n, bool shard) {
    ds->files = calloc((size_t)n, sizeof *ds->files);
    if (!ds->files) return mt_fail(MT_ENOMEM, "no memory for the dataset's %d files", n);
    int bad = -1, need = 0;   /* the first file holding a token past the bound; max + 1 */
    mt__tokscan first = {0};
    for (int i = 0; i < n; i++) {
        mt_status s = mt__tokfile_open(paths[i], shard, &ds->files[i]);
        if (s != MT_OK) {
            mt__tokfile_close(&ds->files[i]);   /* what it holds of a file it refused */
            return s;
        }
        ds->n_files++;
        mt__tokscan sc;
        if ((s = mt__tokfile_scan(&ds->files[i], ds->bounded ? ds->vocab : 0, &sc)) != MT_OK)
            return s;
        if (!ds->bounded && sc.vocab > ds->vocab) ds->vocab = sc.vocab;
        if (sc.max_id + 1 > need) need = sc.max_id + 1;
        if (sc.first_bad >= 0 && bad < 0) {
            bad = i;
            first = sc;
        }
    }
    if (bad < 0) return MT_OK;
    /* the rest were read too: `need` is what the whole corpus needs */
    return mt_fail(MT_EINVAL, "%s '%s' holds id %d at token %lld, outside the model's "
                   "vocabulary of %d (ids 0..%d): the data was encoded with a larger "
                   "vocabulary (its largest id is %d); raise V (--vocab) to at least %d, or "
                   "leave it 0 to take it from the data", shard ? "shard" : "dataset",
                   ds->files[bad].path, first.bad_id, (long long)first.first_bad, ds->vocab,
                   ds->vocab - 1, need - 1, need);
}

static mt_status open_one(mt_dataset *ds, const char *path, double val_frac) {
    char *paths[1] = {(char *)path};
    mt_status s = open_files(ds, paths, 1, false);
    if (s != MT_OK) return s;
    int64_t n = ds->files[0].n;
    int64_t n_val = (int64_t)floor((double)n * val_frac);
    if (n_val > n - 1) n_val = n - 1;   /* rounding near val_frac = 1 */
    if ((s = add_segment(ds, 0, 0, 0, n - n_val)) != MT_OK) return s;
    return add_segment(ds, 1, 0, n - n_val, n_val);
}

static mt_status open_shards(mt_dataset *ds, const char *path) {
    char **paths;
    int n, n_train;
    mt_status s = mt__shard_paths(path, &paths, &n, &n_train);
    if (s != MT_OK) return s;
    s = open_files(ds, paths, n, true);
    for (int i = 0; s == MT_OK && i < n; i++)
        s = add_segment(ds, i < n_train ? 0 : 1, i, 0, ds->files[i].n);
    mt_dataset_shards_free(paths, n);
    return s;
}

mt_status mt_dataset_open(const char *path, double val_frac, mt_dataset **out) {
    return mt_dataset_open_bounded(path, val_frac, 0, out);
}

mt_status mt_dataset_open_bounded(const char *path, double val_frac, int vocab,
                                  mt_dataset **out) {
    if (!out) return mt_fail(MT_EINVAL, "mt_dataset_open: out is NULL");
    *out = NULL;
    if (!path) return mt_fail(MT_EINVAL, "mt_dataset_open: path is NULL");
    if (!(val_frac >= 0.0 && val_frac < 1.0))   /* also rejects NaN */
        return mt_fail(MT_EINVAL, "val_frac %g for dataset '%s' is outside [0, 1); "
                       "give the fraction of tokens to hold out, e.g. 0.1", val_frac, path);
    if (vocab < 0)
        return mt_fail(MT_EINVAL, "vocabulary %d for dataset '%s' is negative; give the "
                       "model's vocabulary, or 0 to take it from the tokens", vocab, path);
    mt_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) return mt_fail(MT_ENOMEM, "no memory for dataset '%s'", path);
    ds->vocab = vocab;
    ds->bounded = vocab > 0;
    mt_status s = mt_dataset_is_sharded(path) ? open_shards(ds, path)
                                              : open_one(ds, path, val_frac);
    if (s == MT_OK) s = mt__tokmap_create(ds->files, ds->n_files, &ds->map);
    if (s != MT_OK) {
        mt_dataset_free(ds);
        return s;
    }
    *out = ds;
    return MT_OK;
}

void mt_dataset_free(mt_dataset *ds) {
    if (!ds) return;
    mt__tokmap_free(ds->map);
    for (int i = 0; i < ds->n_files; i++) mt__tokfile_close(&ds->files[i]);
    free(ds->files);
    free(ds->split[0].seg);
    free(ds->split[1].seg);
    free(ds);
}

int64_t mt_dataset_tokens(const mt_dataset *ds, int split) {
    if (!ds || split < 0 || split > 1) return 0;
    return ds->split[split].n;
}

int mt_dataset_vocab(const mt_dataset *ds) { return ds ? ds->vocab : 0; }

int mt_dataset_files(const mt_dataset *ds, int split) {
    if (!ds || split < 0 || split > 1) return 0;
    return ds->split[split].n_seg;
}

int mt__dataset_mapped(const mt_dataset *ds) { return ds ? mt__tokmap_mapped(ds->map) : 0; }

/* ------------------------------------------------------------------------ */
/* Batches                                                                   */
/* ------------------------------------------------------------------------ */

/* Tokens [first, first+k) of g's file, read into x (k), are all inside the
 * vocabulary the dataset was opened with. The open checked every token; this
 * catches a file rewritten in place under the run at the same size. */
static mt_status check_tokens(const mt_dataset *ds, const segment *g, int64_t first, int64_t k,
                              const int32_t *x) {
    for (int64_t i = 0; i < k; i++)
        if (x[i] >= ds->vocab)
            return mt_fail(MT_EFORMAT, "token %lld of '%s' is id %d, outside the model's "
                           "vocabulary of %d (ids 0..%d): the data was encoded with a larger "
                           "vocabulary; raise V (--vocab) to hold it, or leave it 0 to take it "
                           "from the data", (long long)(first + i), ds->files[g->file].path,
                           (int)x[i], ds->vocab, ds->vocab - 1);
    return MT_OK;
}

/* out (n) = tokens [at, at+n) of split s, across its segments. */
static mt_status read_split(const mt_dataset *ds, const split_t *s, int64_t at, int64_t n,
                            int32_t *out) {
    int lo = 0, hi = s->n_seg - 1;   /* the segment holding `at` */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (s->seg[mid].start <= at) lo = mid;
        else hi = mid - 1;
    }
    for (int i = lo; n > 0 && i < s->n_seg; i++) {
        const segment *g = &s->seg[i];
        int64_t off = at - g->start;
        int64_t k = g->count - off < n ? g->count - off : n;
        mt_status st = mt__tokmap_read(ds->map, g->file, g->first + off, k, out);
        if (st != MT_OK) return st;
        if (ds->bounded && (st = check_tokens(ds, g, g->first + off, k, out)) != MT_OK)
            return st;
        at += k;
        out += k;
        n -= k;
    }
    return MT_OK;
}

/* Window b of the batch starts at p; a window never straddles the end of the
 * split (it restarts at 0 instead), so every target is the token that really
 * follows its input; it does cross from one shard into the next. A split
 * shorter than T+1 cannot hold one window: callers should check
 * mt_dataset_tokens first; here it gives the split padded with token 0 and
 * target -1 (skipped by the loss) rather than reading past it. */
mt_status mt_dataset_rows(const mt_dataset *ds, int split, int64_t *pos, int B, int T, int row0,
                          int rows, int32_t *tokens, int32_t *targets) {
    if (B <= 0 || T <= 0 || !tokens || !targets || row0 < 0 || rows < 0 || row0 > B - rows)
        return mt_fail(MT_EINVAL, "mt_dataset_rows: rows [%d, %d) of a batch B=%d T=%d (or NULL "
                       "buffers); give 0 <= row0 <= row0+rows <= B and positive B, T", row0,
                       row0 + rows, B, T);
    const split_t *s = ds && (split == 0 || split == 1) ? &ds->split[split] : NULL;
    int64_t len = s ? s->n : 0;
    int64_t p = pos ? *pos : 0;
    mt_status st = MT_OK;

    if (len < (int64_t)T + 1) {
        for (int r = 0; r < rows && st == MT_OK; r++) {
            int32_t *x = tokens + (int64_t)r * T, *y = targets + (int64_t)r * T;
            for (int t = 0; t < T; t++) x[t] = 0;
            if (len > 0) st = read_split(ds, s, 0, len, x);
            for (int t = 0; t < T; t++) y[t] = t + 1 < len ? x[t + 1] : -1;
        }
        if (pos && st == MT_OK) *pos = 0;
        return st;
    }
    for (int b = 0; b < B && st == MT_OK; b++) {
        if (p < 0 || p + T + 1 > len) p = 0;
        if (b >= row0 && b < row0 + rows) {
            /* (T+1) tokens from p: the inputs, and the targets one on */
            int32_t *x = tokens + (int64_t)(b - row0) * T, *y = targets + (int64_t)(b - row0) * T;
            st = read_split(ds, s, p, T, x);
            if (st == MT_OK) st = read_split(ds, s, p + T, 1, y + T - 1);
            memmove(y, x + 1, (size_t)(T - 1) * sizeof *y);
        }
        p += T;
    }
    if (pos && st == MT_OK) *pos = p;
    return st;
}

mt_status mt_dataset_batch(const mt_dataset *ds, int split, int64_t *pos, int B, int T,
                           int32_t *tokens, int32_t *targets) {
    return mt_dataset_rows(ds, split, pos, B, T, 0, B, tokens, targets);
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */
/* ------------------------------------------------------------------------ */

mt_status mt_tokens_write(const char *path, const int32_t *tokens, int64_t n) {
    if (!path) return mt_fail(MT_EINVAL, "mt_tokens_write: path is NULL");
    if (n < 0 || n > INT32_MAX)
        return mt_fail(MT_EINVAL, "cannot write %lld tokens to '%s': an llm.c token file "
                       "holds 0 to %d", (long long)n, path, INT32_MAX);
    if (n > 0 && !tokens)
        return mt_fail(MT_EINVAL, "mt_tokens_write: tokens is NULL for %lld tokens", (long long)n);
    /* Check everything before creating the file, so a bad token leaves no
     * file; an id past uint16 makes it llm.c's uint32 (Llama 3) kind */
    bool wide = false;
    for (int64_t i = 0; i < n; i++) {
        if (tokens[i] < 0)
            return mt_fail(MT_EINVAL, "token %lld is %d, a negative id; nothing was written to "
                           "'%s'", (long long)i, tokens[i], path);
        wide |= tokens[i] > UINT16_MAX;
    }

    /* through a temporary file and a rename, as every output (files.h) */
    mt__save sv;
    mt_status s = mt__save_begin(path, "token file", NULL, &sv);
    if (s != MT_OK) return s;
    int32_t hdr[MT__TOKENS_HEADER_INTS] = {
        wide ? MT__TOKENS32_MAGIC : MT__TOKENS_MAGIC,
        wide ? MT__TOKENS32_VERSION : MT__TOKENS_VERSION, (int32_t)n};
    bool ok = fwrite(hdr, sizeof hdr, 1, sv.f) == 1;
    uint16_t buf[8192];   /* uint16 tokens; the uint32 ones are the ids as they are */
    for (int64_t i = 0; ok && i < n; i += 8192) {
        size_t m = (size_t)(n - i < 8192 ? n - i : 8192);
        if (wide) {
            ok = fwrite(tokens + i, sizeof *tokens, m, sv.f) == m;
            continue;
        }
        for (size_t j = 0; j < m; j++) buf[j] = (uint16_t)tokens[i + (int64_t)j];
        ok = fwrite(buf, sizeof *buf, m, sv.f) == m;
    }
    return mt__save_end(&sv, ok, ok ? 0 : errno);
}

void mt_dataset_doc_ids(const int32_t *tokens, int64_t rows, int64_t T, int32_t eot,
                        int32_t *docs) {
    for (int64_t b = 0; b < rows; b++) {
        const int32_t *t = tokens + b * T;
        int32_t *d = docs + b * T;
        int32_t id = 0;
        for (int64_t i = 0; i < T; i++) {
            d[i] = id;
            if (t[i] == eot) id++;   /* the next token starts a new document */
        }
    }
}
