/*
 * dataset.c — token datasets: llm.c token files and plain text.
 *
 * An llm.c token file (the format of llm.c's dev/data scripts) is a header of
 * 256 int32 — magic 20240520, version 1, token count N — followed by N uint16
 * tokens, little-endian. Any other file is text, read through the byte
 * tokenizer (token = byte, vocabulary 256).
 *
 * The tokens are split once: the head is the training split, the last
 * floor(N·val_frac) tokens are the validation split. mt_dataset_batch cuts B
 * consecutive windows of T+1 tokens out of a split, so the global batch is a
 * pure function of the position: every device and every mesh sees the same
 * tokens for the same step.
 */
#include "io/io_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "llm.c token files are little-endian; dataset.c reads them in place"
#endif

#define TOKENS_MAGIC   20240520
#define TOKENS_VERSION 1
#define HEADER_INTS    256
#define HEADER_BYTES   (HEADER_INTS * (int64_t)sizeof(int32_t))

struct mt_dataset {
    uint16_t *tok;      /* (n) all tokens; train = [0, n_train), val = [n_train, n) */
    int64_t   n;
    int64_t   n_train;
    int       vocab;
};

/* ------------------------------------------------------------------------ */
/* Reading                                                                   */
/* ------------------------------------------------------------------------ */

/* Reads an llm.c token file whose header is already in `hdr`; `f` is just
 * past the header. */
static mt_status read_token_file(const char *path, FILE *f, int64_t size,
                                 const int32_t *hdr, mt_dataset *ds) {
    if (size < HEADER_BYTES)
        return mt_fail(MT_EFORMAT, "token file '%s' is truncated: it holds %lld bytes, "
                       "less than the %lld-byte llm.c header", path, (long long)size,
                       (long long)HEADER_BYTES);
    if (hdr[1] != TOKENS_VERSION)
        return mt_fail(MT_EFORMAT, "token file '%s' has version %d, expected %d "
                       "(uint16 GPT-2 tokens)%s", path, hdr[1], TOKENS_VERSION,
                       hdr[1] == 2 ? "; version 2 (uint32 tokens, LLaMA 3) is not supported" : "");
    int64_t n = hdr[2];
    int64_t held = (size - HEADER_BYTES) / 2;
    if (n <= 0)
        return mt_fail(MT_EFORMAT, "token file '%s' has a token count of %lld in its header; "
                       "it must hold at least one token", path, (long long)n);
    if (held < n)
        return mt_fail(MT_EFORMAT, "token file '%s' is truncated: the header says %lld tokens, "
                       "the file holds %lld", path, (long long)n, (long long)held);
    if (size != HEADER_BYTES + 2 * n)
        return mt_fail(MT_EFORMAT, "token file '%s' has %lld bytes after its %lld tokens; "
                       "the header's token count is wrong or the file was appended to",
                       path, (long long)(size - HEADER_BYTES - 2 * n), (long long)n);

    ds->tok = malloc((size_t)n * sizeof *ds->tok);
    if (!ds->tok)
        return mt_fail(MT_ENOMEM, "no memory for the %lld tokens of '%s'", (long long)n, path);
    size_t got = fread(ds->tok, sizeof *ds->tok, (size_t)n, f);
    if (got != (size_t)n)
        return mt_fail(MT_EIO, "reading token file '%s': got %zu of %lld tokens (%s)", path,
                       got, (long long)n, ferror(f) ? strerror(errno) : "file shrank while reading");
    ds->n = n;
    int maxtok = 0;
    for (int64_t i = 0; i < n; i++)
        if (ds->tok[i] > maxtok) maxtok = ds->tok[i];
    ds->vocab = maxtok + 1;
    return MT_OK;
}

/* Reads the whole of `f` as bytes; `head` holds its first `n_head` bytes,
 * already consumed while sniffing for the llm.c magic. */
static mt_status read_text_file(const char *path, FILE *f, int64_t size,
                                const unsigned char *head, size_t n_head, mt_dataset *ds) {
    ds->tok = malloc((size_t)size * sizeof *ds->tok);
    if (!ds->tok)
        return mt_fail(MT_ENOMEM, "no memory for the %lld bytes of '%s'", (long long)size, path);
    int64_t n = 0;
    for (size_t i = 0; i < n_head; i++) ds->tok[n++] = head[i];
    unsigned char buf[1 << 14];
    while (n < size) {
        size_t want = (size_t)(size - n) < sizeof buf ? (size_t)(size - n) : sizeof buf;
        size_t got = fread(buf, 1, want, f);
        if (got == 0) break;
        for (size_t i = 0; i < got; i++) ds->tok[n++] = buf[i];
    }
    if (n != size)
        return mt_fail(MT_EIO, "reading text file '%s': got %lld of %lld bytes (%s)", path,
                       (long long)n, (long long)size,
                       ferror(f) ? strerror(errno) : "file shrank while reading");
    ds->n = n;
    ds->vocab = MT_BYTE_VOCAB;
    return MT_OK;
}

mt_status mt_dataset_open(const char *path, double val_frac, mt_dataset **out) {
    if (!out) return mt_fail(MT_EINVAL, "mt_dataset_open: out is NULL");
    *out = NULL;
    if (!path) return mt_fail(MT_EINVAL, "mt_dataset_open: path is NULL");
    if (!(val_frac >= 0.0 && val_frac < 1.0))   /* also rejects NaN */
        return mt_fail(MT_EINVAL, "val_frac %g for dataset '%s' is outside [0, 1); "
                       "give the fraction of tokens to hold out, e.g. 0.1", val_frac, path);

    /* opened without blocking: a FIFO is refused, not waited on */
    FILE *f;
    int64_t size = 0;
    mt_status s = mt_input_open(path, "dataset", 0, &f, &size);
    if (s != MT_OK) return s;
    if (size == 0) {
        fclose(f);
        return mt_fail(MT_EFORMAT, "dataset '%s' is empty; give a text file or an llm.c "
                       "token file with at least one token", path);
    }

    mt_dataset *ds = calloc(1, sizeof *ds);
    if (!ds) {
        fclose(f);
        return mt_fail(MT_ENOMEM, "no memory for dataset '%s'", path);
    }

    /* Sniff: a file that starts with the llm.c magic is a token file. */
    int32_t hdr[HEADER_INTS] = {0};
    size_t n_head = fread(hdr, 1, size < HEADER_BYTES ? (size_t)size : (size_t)HEADER_BYTES, f);
    if (n_head >= sizeof(int32_t) && hdr[0] == TOKENS_MAGIC)
        s = read_token_file(path, f, size, hdr, ds);
    else
        s = read_text_file(path, f, size, (const unsigned char *)hdr, n_head, ds);
    fclose(f);
    if (s != MT_OK) {
        mt_dataset_free(ds);
        return s;
    }

    int64_t n_val = (int64_t)floor((double)ds->n * val_frac);
    if (n_val > ds->n - 1) n_val = ds->n - 1;   /* rounding near val_frac = 1 */
    ds->n_train = ds->n - n_val;
    *out = ds;
    return MT_OK;
}

void mt_dataset_free(mt_dataset *ds) {
    if (!ds) return;
    free(ds->tok);
    free(ds);
}

int64_t mt_dataset_tokens(const mt_dataset *ds, int split) {
    if (!ds) return 0;
    if (split == 0) return ds->n_train;
    if (split == 1) return ds->n - ds->n_train;
    return 0;
}

int mt_dataset_vocab(const mt_dataset *ds) { return ds ? ds->vocab : 0; }

/* ------------------------------------------------------------------------ */
/* Batches                                                                   */
/* ------------------------------------------------------------------------ */

/* Window b of the batch starts at p; a window never straddles the end of the
 * split (it restarts at 0 instead), so every target is the token that really
 * follows its input. A split shorter than T+1 cannot hold one window: callers
 * should check mt_dataset_tokens first; here it gives the split padded with
 * token 0 and target -1 (skipped by the loss) rather than reading past it. */
void mt_dataset_batch(const mt_dataset *ds, int split, int64_t *pos, int B, int T,
                      int32_t *tokens, int32_t *targets) {
    if (B <= 0 || T <= 0 || !tokens || !targets) return;
    const uint16_t *base = NULL;
    int64_t len = 0;
    if (ds && split == 0) { base = ds->tok; len = ds->n_train; }
    if (ds && split == 1) { base = ds->tok + ds->n_train; len = ds->n - ds->n_train; }
    int64_t p = pos ? *pos : 0;

    if (len < (int64_t)T + 1) {
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                tokens[(int64_t)b * T + t] = t < len ? base[t] : 0;
                targets[(int64_t)b * T + t] = t + 1 < len ? base[t + 1] : -1;
            }
        if (pos) *pos = 0;
        return;
    }
    for (int b = 0; b < B; b++) {
        if (p < 0 || p + T + 1 > len) p = 0;
        const uint16_t *w = base + p;   /* (T+1) */
        for (int t = 0; t < T; t++) {
            tokens[(int64_t)b * T + t] = w[t];
            targets[(int64_t)b * T + t] = w[t + 1];
        }
        p += T;
    }
    if (pos) *pos = p;
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
    /* Check everything before creating the file, so a bad token leaves no file. */
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] > UINT16_MAX)
            return mt_fail(MT_EINVAL, "token %lld is %d, outside [0, %d] that an llm.c token "
                           "file (uint16) can hold; nothing was written to '%s'",
                           (long long)i, tokens[i], UINT16_MAX, path);

    /* through a temporary file and a rename, as every output (files.h) */
    mt__save sv;
    mt_status s = mt__save_begin(path, "token file", NULL, &sv);
    if (s != MT_OK) return s;
    int32_t hdr[HEADER_INTS] = {TOKENS_MAGIC, TOKENS_VERSION, (int32_t)n};
    bool ok = fwrite(hdr, sizeof hdr, 1, sv.f) == 1;
    uint16_t buf[8192];
    for (int64_t i = 0; ok && i < n; i += 8192) {
        size_t m = (size_t)(n - i < 8192 ? n - i : 8192);
        for (size_t j = 0; j < m; j++) buf[j] = (uint16_t)tokens[i + (int64_t)j];
        ok = fwrite(buf, sizeof *buf, m, sv.f) == m;
    }
    return mt__save_end(&sv, ok, ok ? 0 : errno);
}
