/*
 * tok_bytemap.c — how BPE vocabularies spell bytes: GPT-2's byte-to-unicode
 * map (its encoder.py's bytes_to_unicode: bytes as printable characters,
 * "Ġ" for a space) of byte-level BPE, and SentencePiece's "▁" for a space
 * and "<0xAB>" byte pieces (Metaspace BPE, llama2.c's tokenizer.bin); each
 * undone when a vocabulary is read and redone to spell a piece
 * (tok_bpe_impl.h).
 */
#include "io/tok_bpe_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SPACE_SYMBOL[] = "\xE2\x96\x81";   /* U+2581 "▁" */

/* The printable bytes are themselves; the other 68, in order, 256.. */
uint32_t mt__bpe_byte_char(int b) {
    if (b <= 32) return 256u + (uint32_t)b;
    if (b >= 127 && b <= 160) return 256u + 33u + (uint32_t)(b - 127);
    if (b == 173) return 256u + 33u + 34u;
    return (uint32_t)b;
}

static int char_byte(uint32_t cp) {
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255))
        return (int)cp;
    if (cp >= 256 && cp < 256 + 33) return (int)(cp - 256);
    if (cp >= 256 + 33 && cp < 256 + 67) return (int)(cp - 256 - 33 + 127);
    if (cp == 256 + 67) return 173;
    return -1;
}

bool mt__bpe_unspell(const char *s, size_t n, char *out, size_t *out_n) {
    const uint8_t *u = (const uint8_t *)s;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        if (u[i] < 0x80) cp = u[i++];
        else if ((u[i] & 0xE0) == 0xC0 && i + 1 < n) { cp = (u[i] & 0x1Fu) << 6 | (u[i + 1] & 0x3Fu); i += 2; }
        else return false;   /* every char of the map is below U+0800 */
        int b = char_byte(cp);
        if (b < 0) return false;
        out[k++] = (char)b;
    }
    *out_n = k;
    return true;
}

char *mt__bpe_spell(const char *s, size_t n) {
    char *o = malloc(2 * n + 1), *p = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = mt__bpe_byte_char((uint8_t)s[i]);
        if (cp < 0x80) *p++ = (char)cp;
        else { *p++ = (char)(0xC0 | cp >> 6); *p++ = (char)(0x80 | (cp & 0x3F)); }
    }
    *p = '\0';
    return o;
}

/* ======================================================================== */
/* SentencePiece's spelling                                                  */
/* ======================================================================== */

int mt__bpe_byte_piece(const char *s, size_t n) {
    unsigned v;
    char end;
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    return sscanf(s + 3, "%2X%c", &v, &end) == 2 && end == '>' ? (int)v : -1;
}

size_t mt__bpe_unspell_meta(const char *s, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 3 <= n && memcmp(s + i, SPACE_SYMBOL, 3) == 0) {
            out[k++] = ' ';
            i += 2;
        } else {
            out[k++] = s[i];
        }
    }
    return k;
}

char *mt__bpe_spell_meta(const char *s, size_t n) {
    char *o = malloc(3 * n + 1), *p = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') { memcpy(p, SPACE_SYMBOL, 3); p += 3; }
        else *p++ = s[i];
    }
    *p = '\0';
    return o;
}
