/*
 * llama2c_tok.c — llama2.c's tokenizer.bin, as run.c's build_tokenizer
 * reads it: a uint32 max_token_length, then for each token a float32 score,
 * an int32 length and that many bytes (no NUL). The file does not say how
 * many tokens it holds: run.c reads the model's vocab_size of them.
 *
 * The pieces are export.py's (tokenizer.py's export): SentencePiece's
 * pieces with "▁" (U+2581) turned into a space, byte-fallback pieces
 * ("<0x0A>") as they are, and BOS and EOS written as "\n<s>\n" and
 * "\n</s>\n". run.c's encoder looks the single bytes up at ids 3 + byte
 * when a code point is not a piece, so a vocabulary meant for its encoder
 * keeps <unk>, <s>, </s> and then the 256 byte pieces first.
 */
#include "io/io_impl.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A tokenizer.bin of a 256k vocabulary is a few MB; anything much larger
 * is not one. */
#define MAX_FILE  ((int64_t)1 << 30)
#define MAX_PIECE (1 << 20)

/* ------------------------------------------------------------------------ */
/* Pieces                                                                    */
/* ------------------------------------------------------------------------ */

mt_status mt_llama2c_piece(const char *spm_piece, char *buf, size_t n) {
    if (!spm_piece || !buf || n == 0)
        return mt_fail(MT_EINVAL, "mt_llama2c_piece: spm_piece or buf is NULL, or n is 0");
    size_t k = 0;
    for (const char *p = spm_piece; *p; ) {
        char c = *p;
        if (strncmp(p, "\xe2\x96\x81", 3) == 0) { c = ' '; p += 3; }   /* U+2581 */
        else p++;
        if (k + 1 >= n)
            return mt_fail(MT_EINVAL, "mt_llama2c_piece: piece '%s' does not fit in %zu bytes",
                           spm_piece, n);
        buf[k++] = c;
    }
    buf[k] = '\0';
    return MT_OK;
}

/* ------------------------------------------------------------------------ */
/* Write                                                                     */
/* ------------------------------------------------------------------------ */

/* Every piece is one run.c can read back: present, not empty (run.c's
 * fread of 0 bytes fails), and every score is finite (NaN breaks its
 * merges). Returns the longest piece's length in *max_len. */
static mt_status check_vocab(const char *path, int n, const char *const *pieces,
                             const float *scores, size_t *max_len) {
    if (n <= 0)
        return mt_fail(MT_EINVAL, "llama2.c tokenizer '%s': %d tokens; a vocabulary has at "
                       "least one", path, n);
    *max_len = 0;
    for (int i = 0; i < n; i++) {
        size_t len = pieces[i] ? strlen(pieces[i]) : 0;
        if (len == 0)
            return mt_fail(MT_EINVAL, "llama2.c tokenizer '%s': token %d is %s; llama2.c's "
                           "run.c cannot read an empty piece", path, i,
                           pieces[i] ? "empty" : "NULL");
        if (len > MAX_PIECE)
            return mt_fail(MT_EINVAL, "llama2.c tokenizer '%s': token %d is %zu bytes long, "
                           "over %d", path, i, len, MAX_PIECE);
        if (!isfinite(scores[i]))
            return mt_fail(MT_EINVAL, "llama2.c tokenizer '%s': token %d ('%s') has score "
                           "%g; scores must be finite", path, i, pieces[i], (double)scores[i]);
        if (len > *max_len) *max_len = len;
    }
    return MT_OK;
}

mt_status mt_llama2c_tokenizer_write(const char *path, int n, const char *const *pieces,
                                     const float *scores) {
    if (!path || !pieces || !scores)
        return mt_fail(MT_EINVAL, "mt_llama2c_tokenizer_write: path, pieces or scores is NULL");
    size_t max_len = 0;
    mt_status s = check_vocab(path, n, pieces, scores, &max_len);
    if (s != MT_OK) return s;

    mt__save sv;
    if ((s = mt__save_begin(path, "llama2.c tokenizer", NULL, &sv)) != MT_OK) return s;
    uint32_t max32 = (uint32_t)max_len;
    bool ok = fwrite(&max32, sizeof max32, 1, sv.f) == 1;
    for (int i = 0; ok && i < n; i++) {
        int32_t len = (int32_t)strlen(pieces[i]);
        ok = fwrite(&scores[i], sizeof(float), 1, sv.f) == 1 &&
             fwrite(&len, sizeof len, 1, sv.f) == 1 &&
             fwrite(pieces[i], 1, (size_t)len, sv.f) == (size_t)len;
    }
    return mt__save_end(&sv, ok, ok ? 0 : errno);
}

/* ------------------------------------------------------------------------ */
/* Read                                                                      */
/* ------------------------------------------------------------------------ */

void mt_llama2c_vocab_free(mt_llama2c_vocab *v) {
    if (!v) return;
    for (int i = 0; v->pieces && i < v->n; i++) free(v->pieces[i]);
    free(v->pieces);
    free(v->scores);
    free(v);
}

/* The n-th record (token `i`) of the file at its position: its score and
 * its piece, NUL-terminated, into v. */
static mt_status read_token(const char *path, FILE *f, int i, uint32_t max_len,
                            mt_llama2c_vocab *v) {
    int32_t len;
    if (fread(&v->scores[i], sizeof(float), 1, f) != 1 || fread(&len, sizeof len, 1, f) != 1)
        return mt_fail(MT_EFORMAT, "llama2.c tokenizer '%s' is truncated: it ends inside "
                       "token %d's score and length", path, i);
    if (len <= 0 || (uint32_t)len > max_len)
        return mt_fail(MT_EFORMAT, "llama2.c tokenizer '%s': token %d has length %d, outside "
                       "1..%u (the header's max_token_length); the file is damaged or is not "
                       "a tokenizer.bin", path, i, len, max_len);
    if (!(v->pieces[i] = malloc((size_t)len + 1)))
        return mt_fail(MT_ENOMEM, "no memory to read llama2.c tokenizer '%s'", path);
    if (fread(v->pieces[i], 1, (size_t)len, f) != (size_t)len)
        return mt_fail(MT_EFORMAT, "llama2.c tokenizer '%s' is truncated: it ends inside "
                       "token %d's %d bytes", path, i, len);
    v->pieces[i][len] = '\0';
    if (!isfinite(v->scores[i]))
        return mt_fail(MT_EFORMAT, "llama2.c tokenizer '%s': token %d ('%s') has score %g; "
                       "the file is damaged", path, i, v->pieces[i], (double)v->scores[i]);
    return MT_OK;
}

/* Counts the records from f's position to the end (n == 0's reading). */
static mt_status count_tokens(const char *path, FILE *f, int64_t bytes, int *n) {
    int64_t at = 4;
    *n = 0;
    while (at < bytes) {
        int32_t len;
        if (fseeko(f, (off_t)(at + 4), SEEK_SET) != 0 || fread(&len, sizeof len, 1, f) != 1)
            return mt_fail(MT_EFORMAT, "llama2.c tokenizer '%s' is truncated: it ends inside "
                           "token %d's score and length", path, *n);
        if (len <= 0 || *n == INT32_MAX)
            return mt_fail(MT_EFORMAT, "llama2.c tokenizer '%s': token %d has length %d; the "
                           "file is damaged or is not a tokenizer.bin", path, *n, len);
        at += 8 + len;
        (*n)++;
    }
    if (fseeko(f, 4, SEEK_SET) != 0)
        return mt_fail(MT_EIO, "reading llama2.c tokenizer '%s': %s", path, strerror(errno));
    return MT_OK;
}

mt_status mt_llama2c_tokenizer_read(const char *path, int n, mt_llama2c_vocab **out) {
    if (!path || !out || n < 0)
        return mt_fail(MT_EINVAL, "mt_llama2c_tokenizer_read: path or out is NULL, or n < 0");
    *out = NULL;
    FILE *f;
    int64_t bytes = 0;
    mt_status s = mt__file_check_not_tmp(path, "llama2.c tokenizer");
    if (s == MT_OK) s = mt_input_open(path, "llama2.c tokenizer", MAX_FILE, &f, &bytes);
    if (s != MT_OK) return s;
    uint32_t max_len;
    if (fread(&max_len, sizeof max_len, 1, f) != 1)
        s = mt_fail(MT_EFORMAT, "llama2.c tokenizer '%s' is truncated: it is %lld bytes, "
                    "shorter than its 4-byte max_token_length", path, (long long)bytes);
    if (s == MT_OK && n == 0) s = count_tokens(path, f, bytes, &n);
    if (s == MT_OK && n == 0)
        s = mt_fail(MT_EFORMAT, "llama2.c tokenizer '%s' holds no tokens", path);
    mt_llama2c_vocab *v = s == MT_OK ? calloc(1, sizeof *v) : NULL;
    if (s == MT_OK && v) {
        v->pieces = calloc((size_t)n, sizeof *v->pieces);
        v->scores = calloc((size_t)n, sizeof *v->scores);
        v->n = n;
        v->max_token_length = (int)(max_len > INT32_MAX ? INT32_MAX : max_len);
    }
    if (s == MT_OK && (!v || !v->pieces || !v->scores))
        s = mt_fail(MT_ENOMEM, "no memory to read llama2.c tokenizer '%s'", path);
    for (int i = 0; s == MT_OK && i < n; i++) s = read_token(path, f, i, max_len, v);
    if (s == MT_OK && ftello(f) != (off_t)bytes)
        s = mt_fail(MT_EFORMAT, "llama2.c tokenizer '%s' holds more than the %d tokens asked "
                    "for (%lld bytes left); pass the model's vocabulary size, or 0 to read "
                    "them all", path, n, (long long)(bytes - ftello(f)));
    fclose(f);
    if (s != MT_OK) { mt_llama2c_vocab_free(v); return s; }
    *out = v;
    return MT_OK;
}
