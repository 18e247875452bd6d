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

/* Calls visit(ctx, s, len, at) for each unit of the text of fd, read from
 * offset 0 with pread, in order: a well-formed UTF-8 sequence of len bytes,
 * or (len 0) one byte s[0] that begins none, at offset `at` of the text.
 * Stops at the first status visit returns that is not MT_OK; MT_EIO. */
typedef mt_status (*unit_visit)(void *ctx, const uint8_t *s, int len, int64_t at);

static mt_status utf8_walk(int fd, unit_visit visit, void *ctx) {
    uint8_t buf[1 << 16];
    size_t have = 0;          /* bytes in buf, from offset `base` of the text */
    int64_t base = 0;
    bool eof = false;
    while (have > 0 || !eof) {
        if (!eof && have < sizeof buf) {
            ssize_t got = pread(fd, buf + have, sizeof buf - have, base + (int64_t)have);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) return mt_fail(MT_EIO, "reading the text: %s", strerror(errno));
            if (got == 0) eof = true;
            have += (size_t)got;
        }
        size_t i = 0;
        while (i < have) {
            int len = utf8_len(buf + i, have - i);
            if (len < 0 && !eof) break;   /* a sequence cut by the buffer: read on */
            if (len < 0) len = 0;         /* cut by the end: a raw byte alone */
            mt_status s = visit(ctx, buf + i, len, base + (int64_t)i);
            if (s != MT_OK) return s;
            i += (size_t)(len > 0 ? len : 1);
        }
        memmove(buf, buf + i, have - i);
        base += (int64_t)i;
        have -= i;
    }
    return MT_OK;
}

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

/* mt__raw_scan's state between the units of the text. */
typedef struct {
    const mt_tokenizer *tok;
    FILE               *out;
    mt__raw_text       *r;
    int64_t             line;     /* spm_encode's line */
    bool                in_run;   /* the unit before was raw */
    char                last;     /* the last byte spm_encode's text holds ('\n' when empty) */
} raw_scan;

static mt_status raw_unit(void *ctx, const uint8_t *s, int len, int64_t at) {
    raw_scan *sc = ctx;
    bool raw = len == 0 || (len == 3 && memcmp(s, SPACE_SYMBOL, 3) == 0);
    if (len == 0) len = 1;
    bool written;
    if (raw) {
        for (int k = 0; k < len; k++) {
            mt_status st = raw_push(sc->tok, sc->r, s[k], at + k, !sc->in_run && k == 0,
                                    sc->line);
            if (st != MT_OK) return st;
        }
        written = true;
        if (!sc->in_run) {            /* the run ends spm_encode's line here */
            sc->line++;
            sc->last = '\n';
            written = !sc->out || fputc('\n', sc->out) != EOF;
        }
        sc->in_run = true;
    } else {
        sc->in_run = false;
        if (s[0] == '\n') sc->line++;
        sc->last = (char)s[len - 1];
        written = !sc->out || fwrite(s, 1, (size_t)len, sc->out) == (size_t)len;
    }
    if (!written)
        return mt_fail(MT_EIO, "writing the text for spm_encode to a temporary file: %s",
                       strerror(errno));
    return MT_OK;
}

mt_status mt__raw_scan(const mt_tokenizer *tok, int fd, FILE *out, mt__raw_text *r) {
    mt__raw_free(r);
    raw_scan sc = {.tok = tok, .out = out, .r = r, .last = '\n'};
    mt_status s = utf8_walk(fd, raw_unit, &sc);
    if (s != MT_OK) return s;
    r->ends_in_newline = sc.last == '\n';
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

/* mt__text_stats' state between the units of the text. */
typedef struct {
    uint8_t *seen;    /* a bit per code point */
    int64_t  chars;
    int64_t  prev;    /* the character before, in this line; -1 at a line's start */
    bool     pairs;
} text_stats;

static mt_status stats_unit(void *ctx, const uint8_t *s, int len, int64_t at) {
    (void)at;
    text_stats *ts = ctx;
    const uint32_t REPLACEMENT = 0xFFFD;   /* what spm makes of a raw byte */
    uint32_t cp = len > 0 ? code_point(s, len) : REPLACEMENT;
    if (cp == '\n') {
        ts->prev = -1;
        return MT_OK;
    }
    if (!(ts->seen[cp / 8] & (1u << (cp % 8)))) {
        ts->seen[cp / 8] |= (uint8_t)(1u << (cp % 8));
        ts->chars++;
    }
    if (ts->prev >= 0 && mergeable((uint32_t)ts->prev, cp)) ts->pairs = true;
    ts->prev = cp;
    return MT_OK;
}

mt_status mt__text_stats(int fd, int64_t *chars, bool *pairs) {
    const uint32_t N_CP = 0x110000;
    text_stats ts = {.seen = calloc(N_CP / 8, 1), .prev = -1};
    if (!ts.seen) return mt_fail(MT_ENOMEM, "no memory to count the characters of the text");
    mt_status s = utf8_walk(fd, stats_unit, &ts);
    free(ts.seen);
    *chars = ts.chars;
    *pairs = ts.pairs;
    return s;
}
