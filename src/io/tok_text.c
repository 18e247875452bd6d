/*
 * tok_text.c — what a BPE tokenizer's pipeline does to a text before the
 * pre-tokeniser splits it (tok_bpe_impl.h): each stretch between special
 * tokens put in Unicode's NFC (a tokenizer.json's normalizer NFC, Qwen2's),
 * or, for SentencePiece's scheme (Metaspace BPE), every U+2581 "▁" read as
 * the space it stands for (the vocabulary's "▁" is kept as a space: the
 * library maps spaces to "▁", both become one token) and a space put
 * before the stretch by the prefix rule.
 */
#include "io/tok_bpe_impl.h"

#include <stdlib.h>
#include <string.h>
#include <uninorm.h>
#include <unistr.h>

/* s[0..n) in Unicode's NFC (libunistring), into a new *out of *out_n bytes:
 * each run of well-formed UTF-8 normalised, each byte that is not UTF-8
 * kept as it is. */
static mt_status nfc_text(const char *s, size_t n, char **out, size_t *out_n) {
    char *o = NULL;
    size_t k = 0, cap = 0;
    for (const uint8_t *p = (const uint8_t *)s, *end = p + n; p < end;) {
        const uint8_t *bad = u8_check(p, (size_t)(end - p)), *stop = bad ? bad : end;
        size_t len = 0;
        uint8_t *norm = stop > p ? u8_normalize(UNINORM_NFC, p, (size_t)(stop - p), NULL, &len) : NULL;
        if (stop > p && !norm) { free(o); return mt_fail(MT_ENOMEM, "no memory to normalise a text"); }
        size_t need = k + len + (bad ? 1 : 0);
        if (need > cap) {
            char *g = realloc(o, cap = need + n);
            if (!g) { free(o); free(norm); return mt_fail(MT_ENOMEM, "no memory to normalise a text"); }
            o = g;
        }
        if (len) memcpy(o + k, norm, len);
        free(norm);
        k += len;
        if (bad) o[k++] = (char)*bad;
        p = bad ? bad + 1 : end;
    }
    *out = o;
    *out_n = k;
    return MT_OK;
}

/* Whether a stretch (already mapped, `starts_space`: its first byte is a
 * space) gets a space before it. */
static bool wants_prefix(int prefix, size_t n, bool first, bool starts_space) {
    switch (prefix) {
    case MT__BPE_PREFIX_EVERY: return n > 0;
    case MT__BPE_PREFIX_ALWAYS: return n > 0 && !starts_space;
    case MT__BPE_PREFIX_FIRST: return n > 0 && first && !starts_space;
    default: return false;
    }
}

mt_status mt__bpe_text_prepare(const char *s, size_t n, const mt__bpe_text *how, bool first,
                               char **out, size_t *out_n) {
    *out = NULL;
    *out_n = n;
    char *norm = NULL;
    if (how->nfc && n > 0) {
        mt_status st = nfc_text(s, n, &norm, &n);
        if (st != MT_OK) return st;
        s = norm;
        *out = norm;
        *out_n = n;
    }
    if (!how->meta && how->prefix == MT__BPE_PREFIX_NONE) return MT_OK;
    char *t = malloc(n + 2);   /* "▁" only shrinks; one space before */
    if (!t) {
        free(norm);
        *out = NULL;
        return mt_fail(MT_ENOMEM, "no memory for a text of %zu bytes", n);
    }
    size_t k = n;
    if (how->meta) k = mt__bpe_unspell_meta(s, n, t + 1);
    else if (n > 0) memcpy(t + 1, s, n);
    bool pre = wants_prefix(how->prefix, k, first, k > 0 && t[1] == ' ');
    t[0] = ' ';
    if (!pre) memmove(t, t + 1, k);
    free(norm);
    *out = t;
    *out_n = k + pre;
    return MT_OK;
}
