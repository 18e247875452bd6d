/*
 * tokenize_docs.c — the ids `meshtrain tokenize` writes for a text
 * (tokenize_docs.h): whole, or as documents with the end-of-text id between
 * them and, with --bos, the beginning-of-sequence id before each.
 */
#include "cli/tokenize_docs.h"

#include <stdlib.h>
#include <string.h>

static bool is_spm(const mt_tokenizer *tok) {
    return strcmp(mt_tokenizer_kind(tok), "SentencePiece") == 0;
}

/* The id of the piece spelled `piece`, or -1. */
static int piece_id(const mt_tokenizer *tok, const char *piece) {
    for (int id = 0; id < mt_tokenizer_vocab(tok); id++)
        if (strcmp(mt_tokenizer_piece(tok, id, NULL), piece) == 0) return id;
    return -1;
}

mt_status cli_docs_check(const mt_tokenizer *tok, const char *path) {
    if (is_spm(tok)) {
        int nl = piece_id(tok, "<0x0A>"), eos = piece_id(tok, "</s>");
        if (nl < 0 || eos < 0)
            return mt_fail(MT_EFORMAT, "--doc-sep writes </s> where blank lines separate "
                           "documents, and SentencePiece model '%s' has no %s piece; use a "
                           "model tokenize trained", path, nl < 0 ? "newline (<0x0A>)" : "</s>");
    } else if (mt_tokenizer_eos(tok) < 0) {
        return mt_fail(MT_EFORMAT, "--doc-sep writes the tokenizer's end-of-text id where blank "
                       "lines separate documents, and '%s' (%s) has none: drop --doc-sep", path,
                       mt_tokenizer_kind(tok));
    }
    return MT_OK;
}

/* SentencePiece: the text's ids as spm_encode gives them (*ids, n), each
 * run of empty lines (newline ids after the newline that ends a line)
 * made one </s>, the end-of-text train --doc-mask on splits at (LLaMA's
 * default --eot-id); `bos` >= 0 begins every document, the first and
 * each after a </s> that more text follows. Rewrites *ids into a new array. */
static mt_status mark_documents(const mt_tokenizer *tok, int bos, int32_t **ids, int64_t *n) {
    int nl = piece_id(tok, "<0x0A>"), eos = piece_id(tok, "</s>");
    const int32_t *in = *ids;
    int64_t docs = 1;   /* an upper bound: a </s> (and a BOS) at most every second id */
    for (int64_t i = 0; i + 1 < *n; i++) docs += in[i] == nl && in[i + 1] == nl;
    int32_t *out = malloc((size_t)(*n + 2 * docs) * sizeof *out);   /* (n + 2 docs) */
    if (!out)
        return mt_fail(MT_ENOMEM, "no memory for the %lld ids of the documents", (long long)*n);
    int64_t w = 0;
    if (bos >= 0 && *n > 0) out[w++] = bos;
    for (int64_t i = 0; i < *n; i++) {
        out[w++] = in[i];
        if (in[i] != nl || i + 1 >= *n || in[i + 1] != nl) continue;
        while (i + 1 < *n && in[i + 1] == nl) i++;   /* the empty lines */
        out[w++] = eos;
        if (bos >= 0 && i + 1 < *n) out[w++] = bos;
    }
    free(*ids);
    *ids = out;
    *n = w;
    return MT_OK;
}

/* A growing array of ids. */
typedef struct { int32_t *v; int64_t n, cap; } id_buf;

static bool put(id_buf *b, const int32_t *ids, int64_t n) {
    if (b->n + n > b->cap) {
        int64_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        int32_t *v = realloc(b->v, (size_t)cap * sizeof *v);
        if (!v) return false;
        b->v = v;
        b->cap = cap;
    }
    if (n > 0) memcpy(b->v + b->n, ids, (size_t)n * sizeof *ids);
    b->n += n;
    return true;
}

/* A tokenizer that encodes in this process: each document of the text a
 * text of its own, `bos` (>= 0) before it, the end-of-text id after it
 * where empty lines follow. */
static mt_status encode_documents(const mt_tokenizer *tok, const char *path, int bos,
                                  int32_t **ids, int64_t *n) {
    char *text;
    size_t len;
    mt_status s = mt_input_read_all(path, "text", 0, &text, &len);
    if (s != MT_OK) return s;
    const int32_t eos = mt_tokenizer_eos(tok), b = bos;
    id_buf out = {0};
    for (size_t at = 0; s == MT_OK && at < len;) {
        size_t end = at;   /* the newline an empty line follows, or the text's end */
        while (end < len && !(text[end] == '\n' && end + 1 < len && text[end + 1] == '\n')) end++;
        size_t doc = end < len ? end + 1 : len, next = doc;   /* the document keeps its newline */
        while (next < len && text[next] == '\n') next++;      /* the empty lines */
        int32_t *d = NULL;
        int64_t dn = 0;
        s = mt_tokenizer_encode(tok, text + at, doc - at, &d, &dn);
        if (s == MT_OK && ((b >= 0 && !put(&out, &b, 1)) || !put(&out, d, dn) ||
                           (next > doc && !put(&out, &eos, 1))))
            s = mt_fail(MT_ENOMEM, "no memory for the ids of '%s'", path);
        free(d);
        at = next;
    }
    free(text);
    if (s == MT_OK && !out.v && !(out.v = malloc(sizeof *out.v)))
        s = mt_fail(MT_ENOMEM, "no memory for the ids of '%s'", path);
    if (s != MT_OK) {
        free(out.v);
        return s;
    }
    *ids = out.v;
    *n = out.n;
    return MT_OK;
}

/* The BOS before the text's ids (*ids, n). */
static mt_status prepend_bos(int bos, int32_t **ids, int64_t *n) {
    int32_t *v = realloc(*ids, (size_t)(*n + 1) * sizeof *v);
    if (!v) return mt_fail(MT_ENOMEM, "no memory for %lld ids", (long long)*n + 1);
    memmove(v + 1, v, (size_t)*n * sizeof *v);
    v[0] = bos;
    *ids = v;
    (*n)++;
    return MT_OK;
}

mt_status cli_docs_encode(const mt_tokenizer *tok, const char *path, bool doc_sep, bool bos,
                          int32_t **ids, int64_t *n) {
    const int b = bos ? mt_tokenizer_bos(tok) : -1;
    mt_status s = doc_sep ? cli_docs_check(tok, path) : MT_OK;
    if (s != MT_OK) return s;
    if (doc_sep && !is_spm(tok)) return encode_documents(tok, path, b, ids, n);
    if ((s = mt_tokenizer_encode_file(tok, path, ids, n)) != MT_OK) return s;
    if (doc_sep) s = mark_documents(tok, b, ids, n);
    else if (b >= 0) s = prepend_bos(b, ids, n);
    if (s != MT_OK) {
        free(*ids);
        *ids = NULL;
    }
    return s;
}
