/*
 * tokenizer_raw.c — the bytes of a text that spm_encode would not give
 * back, kept aside so that decode(encode(text)) is the text's bytes for
 * any input (issue 37, finding 7).
 *
 * spm_encode reads UTF-8: every byte that does not belong to a well-formed
 * sequence (Unicode's table 3-7: no overlong forms, no surrogates, nothing
 * past U+10FFFF; a Latin-1 "é", binary data, a character cut at the end)
 * becomes U+FFFD, three bytes that decode to themselves and not to the
 * byte that was there; and a literal U+2581 "▁" in the text is the model's
 * own space symbol, so it decodes to a space. Those bytes never reach
 * spm_encode: each run of them ends the line there (spm_encode gets a
 * newline in its place), and the encoder puts the run's byte pieces
 * ("<0xE9>") where that line's newline id would go. A run cannot merge
 * with its neighbours anyway: it is no character of the vocabulary.
 */
#include "io/io_impl.h"
#include "io/tokenizer_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The length of the well-formed UTF-8 sequence at s (n bytes available, at
 * least 1), 0 when the first byte begins none (it is a raw byte alone), or
 * -1 when it may begin one but n is too short to tell. */
static int utf8_len(const uint8_t *s, size_t n) {
    uint8_t c = s[0];
    if (c < 0x80) return 1;
    int len;
    uint8_t lo = 0x80, hi = 0xBF;   /* the second byte's range (table 3-7) */
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) { len = 3; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) len = 3;
    else if (c == 0xED) { len = 3; hi = 0x9F; }   /* no surrogates */
    else if (c >= 0xEE && c <= 0xEF) len = 3;
    else if (c == 0xF0) { len = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) { len = 4; hi = 0x8F; }   /* nothing past U+10FFFF */
    else return 0;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return -1;
        uint8_t lo_i = i == 1 ? lo : 0x80, hi_i = i == 1 ? hi : 0xBF;
        if (s[i] < lo_i || s[i] > hi_i) return 0;
    }
    return len;
}

static const uint8_t SPACE_SYMBOL[3] = {0xE2, 0x96, 0x81};   /* U+2581 */

void mt__raw_free(mt__raw_text *r) {
    free(r->run);
    free(r->bytes);
    memset(r, 0, sizeof *r);
}

/* Appends byte b at text offset `at` to the run that ends line `line`,
 * starting a new run when the previous byte was not raw. */
static mt_status raw_push(const mt_tokenizer *tok, mt__raw_text *r, uint8_t b, int64_t at,
                          bool new_run, int64_t line) {
    if (tok->byte_id[b] < 0)
        return mt_fail(MT_EFORMAT, "byte 0x%02X at offset %lld of the text is not valid UTF-8 "
                       "(or is part of a literal U+2581), and tokenizer '%s' has no byte piece "
                       "<0x%02X> to keep it (it was trained without byte fallback): train one "
                       "with meshtrain tokenize, or convert the text to UTF-8", b,
                       (long long)at, tok->path, b);
    if (new_run) {
        if (r->n_run == r->cap_run) {
            int64_t cap = r->cap_run ? r->cap_run * 2 : 64;
            mt__raw_run *v = realloc(r->run, (size_t)cap * sizeof *v);
            if (!v) return mt_fail(MT_ENOMEM, "no memory for %lld runs of raw bytes",
                                   (long long)cap);
            r->run = v;
            r->cap_run = cap;
        }
        r->run[r->n_run++] = (mt__raw_run){.line = line, .first = r->n_bytes, .len = 0};
    }
    if (r->n_bytes == r->cap_bytes) {
        int64_t cap = r->cap_bytes ? r->cap_bytes * 2 : 256;
        uint8_t *v = realloc(r->bytes, (size_t)cap);
        if (!v) return mt_fail(MT_ENOMEM, "no memory for %lld raw bytes", (long long)cap);
        r->bytes = v;
        r->cap_bytes = cap;
    }
    r->bytes[r->n_bytes++] = b;
    r->run[r->n_run - 1].len++;
    return MT_OK;
}

mt_status mt__raw_scan(const mt_tokenizer *tok, int fd, FILE *out, mt__raw_text *r) {
    mt__raw_free(r);
    uint8_t buf[1 << 16];
    size_t have = 0;          /* bytes in buf, from offset `base` of the text */
    int64_t base = 0, line = 0;
    bool eof = false, in_run = false;
    char last = '\n';         /* the last byte spm_encode's text holds ('\n' when empty) */
    mt_status s = MT_OK;
    while (s == MT_OK && (have > 0 || !eof)) {
        if (!eof && have < sizeof buf) {
            ssize_t got = pread(fd, buf + have, sizeof buf - have, base + (int64_t)have);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) return mt_fail(MT_EIO, "reading the text: %s", strerror(errno));
            if (got == 0) eof = true;
            have += (size_t)got;
        }
        size_t i = 0;
        while (s == MT_OK && i < have) {
            int len = utf8_len(buf + i, have - i);
            if (len < 0 && !eof) break;   /* a sequence cut by the buffer: read on */
            bool raw = len <= 0 || (len == 3 && memcmp(buf + i, SPACE_SYMBOL, 3) == 0);
            if (len <= 0) len = 1;        /* a raw byte alone; the next starts afresh */
            if (raw) {
                for (int k = 0; s == MT_OK && k < len; k++)
                    s = raw_push(tok, r, buf[i + k], base + (int64_t)i + k, !in_run && k == 0,
                                 line);
                if (!in_run) {            /* the run ends spm_encode's line here */
                    line++;
                    last = '\n';
                    if (out && fputc('\n', out) == EOF) s = MT_EIO;
                }
                in_run = true;
            } else {
                in_run = false;
                if (buf[i] == '\n') line++;
                last = (char)buf[i + len - 1];
                if (out && fwrite(buf + i, 1, (size_t)len, out) != (size_t)len) s = MT_EIO;
            }
            i += (size_t)len;
        }
        memmove(buf, buf + i, have - i);
        base += (int64_t)i;
        have -= i;
    }
    if (s == MT_EIO && out)
        return mt_fail(MT_EIO, "writing the text for spm_encode to a temporary file: %s",
                       strerror(errno));
    if (s != MT_OK) return s;
    r->ends_in_newline = last == '\n';
    return MT_OK;
}

/* ======================================================================== */
/* What a text gives spm_train to train on                                   */
/* ======================================================================== */

/* The code point of the well-formed sequence s of len bytes. */
static uint32_t code_point(const uint8_t *s, int len) {
    static const uint8_t lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t cp = s[0] & lead_mask[len];
    for (int i = 1; i < len; i++) cp = cp << 6 | (s[i] & 0x3F);
    return cp;
}

/* Whether spm_train could merge characters a and b, side by side in a line,
 * into a piece. Its rules as meshtrain runs it: digits stay alone
 * (--split_digits), a space begins a piece and ends none unless the piece
 * is all spaces (--allow_whitespace_only_pieces). It also splits where the
 * Unicode script changes, which this does not check: it may say yes where
 * spm_train says no, never the other way. */
static bool mergeable(uint32_t a, uint32_t b) {
    bool digit_a = a >= '0' && a <= '9', digit_b = b >= '0' && b <= '9';
    return !digit_a && !digit_b && !(b == ' ' && a != ' ');
}

mt_status mt__text_stats(int fd, int64_t *chars, bool *pairs) {
    const uint32_t N_CP = 0x110000, REPLACEMENT = 0xFFFD;   /* what spm makes of a raw byte */
    uint8_t *seen = calloc(N_CP / 8, 1);   /* a bit per code point */
    if (!seen) return mt_fail(MT_ENOMEM, "no memory to count the characters of the text");
    uint8_t buf[1 << 16];
    size_t have = 0;
    int64_t base = 0;
    int64_t prev = -1;   /* the character before, in this line; -1 at a line's start */
    bool eof = false;
    *chars = 0;
    *pairs = false;
    while (have > 0 || !eof) {
        if (!eof && have < sizeof buf) {
            ssize_t got = pread(fd, buf + have, sizeof buf - have, base + (int64_t)have);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) {
                free(seen);
                return mt_fail(MT_EIO, "reading the text: %s", strerror(errno));
            }
            if (got == 0) eof = true;
            have += (size_t)got;
        }
        size_t i = 0;
        while (i < have) {
            int len = utf8_len(buf + i, have - i);
            if (len < 0 && !eof) break;
            uint32_t cp = len > 0 ? code_point(buf + i, len) : REPLACEMENT;
            i += (size_t)(len > 0 ? len : 1);
            if (cp == '\n') { prev = -1; continue; }
            if (!(seen[cp / 8] & (1u << (cp % 8)))) {
                seen[cp / 8] |= (uint8_t)(1u << (cp % 8));
                (*chars)++;
            }
            if (prev >= 0 && mergeable((uint32_t)prev, cp)) *pairs = true;
            prev = cp;
        }
        memmove(buf, buf + i, have - i);
        base += (int64_t)i;
        have -= i;
    }
    free(seen);
    return MT_OK;
}
