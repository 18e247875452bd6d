/*
 * tok_test.h — what the tokenizer.json tests (test_tok_bpe.c,
 * test_tok_meta.c) share: a temporary file for the tokenizer each case
 * writes, and the check of a text's ids and of decoding them. Each test
 * program includes it once.
 */
#ifndef MT_TEST_TOK_TEST_H
#define MT_TEST_TOK_TEST_H

#include "meshtrain/tokenizer.h"
#include "harness.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A temporary directory and the tokenizer.json in it. */
typedef struct { char dir[64]; char path[128]; } tmp;

/* Makes the directory; t->path names the file in it (not written yet). */
static const char *tmp_path(tmp *t) {
    snprintf(t->dir, sizeof t->dir, "/tmp/mt_test_tok_XXXXXX");
    MT_CHECK(mkdtemp(t->dir), "mkdtemp");
    snprintf(t->path, sizeof t->path, "%s/tokenizer.json", t->dir);
    return t->path;
}

static void tmp_done(tmp *t) {
    unlink(t->path);
    rmdir(t->dir);
}

/* Encodes text (len bytes), checks the ids against want[n_want], then that
 * decoding them from a text's start gives `back` (NULL: the text itself). */
static void check_ids_back(const mt_tokenizer *tok, const char *text, size_t len,
                           const int32_t *want, int n_want, const char *back) {
    int32_t *ids = NULL;
    int64_t n = 0;
    MT_CHECK_OK(mt_tokenizer_encode(tok, text, len, &ids, &n));
    MT_CHECK(n == n_want, "'%.*s': %lld ids, want %d", (int)len, text, (long long)n, n_want);
    for (int i = 0; i < n_want && i < n; i++)
        MT_CHECK(ids[i] == want[i], "'%.*s': id %d is %d, want %d", (int)len, text, i, ids[i],
                 want[i]);
    char buf[256];
    size_t got = 0, blen = back ? strlen(back) : len;
    MT_CHECK_OK(mt_tokenizer_decode(tok, ids, n, true, buf, sizeof buf, &got));
    MT_CHECK(got == blen && memcmp(buf, back ? back : text, blen) == 0,
             "'%.*s' decodes to '%.*s'", (int)len, text, (int)got, buf);
    free(ids);
}

/* The same, decoding giving the text's bytes back. */
static void check_ids(const mt_tokenizer *tok, const char *text, size_t len, const int32_t *want,
                      int n_want) {
    check_ids_back(tok, text, len, want, n_want, NULL);
}

/* The tokenizer file written at t->path is refused (MT_EFORMAT) with a
 * message naming want1, want2 and the file's name; t is removed. */
static void check_refused(tmp *t, const char *want1, const char *want2) {
    mt_tokenizer *tok = NULL;
    MT_CHECK_FAILS(mt_tokenizer_open(t->path, &tok), MT_EFORMAT, want1, want2, "tokenizer.json");
    MT_CHECK(tok == NULL, "'%s' left a tokenizer open", t->path);
    mt_tokenizer_free(tok);
    tmp_done(t);
}

#define IDS(...) (const int32_t[]){__VA_ARGS__}, (int)(sizeof (const int32_t[]){__VA_ARGS__} / 4)
#define TEXT(s) s, sizeof s - 1

#endif /* MT_TEST_TOK_TEST_H */
