/*
 * tok_tiktoken.c — OpenAI's tiktoken ranks files ("*.tiktoken", and Llama
 * 3's tokenizer.model): one line per token, its bytes in base64, a space,
 * its rank, which is also its id. Byte-level BPE by rank (tok_bpe.c, with
 * tiktoken's rule that a piece which is a token is that token).
 *
 * The file holds neither the pre-tokeniser's regex nor the special tokens:
 * they belong to the encoding, which is known here by the number of ranks:
 *
 *   ranks     encoding     regex     special tokens (ids after the ranks)
 *   50256     r50k_base    GPT-2's   <|endoftext|> 50256
 *   100256    cl100k_base  cl100k's  <|endoftext|> 100257, <|fim_prefix|>
 *                                    100258, <|fim_middle|> 100259,
 *                                    <|fim_suffix|> 100260, <|endofprompt|>
 *                                    100276
 *   199998    o200k_base   o200k's   <|endoftext|> 199999, <|endofprompt|> 200018
 *   128000    Llama 3      cl100k's  256 from 128000: <|begin_of_text|> (the
 *                                    BOS Meta's tokenizer adds), <|end_of_text|>,
 *                                    <|start_header_id|> ..., as Meta's
 *                                    tokenizer.py names them
 *
 * As in tiktoken's encode_ordinary and Meta's encode, special tokens in a
 * text are text: only ids put in by the caller (BOS) are special.
 */
#include "io/tok_bpe_impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct { const char *name; int id; } special;

static const special R50K[] = {{"<|endoftext|>", 50256}};
static const special CL100K[] = {{"<|endoftext|>", 100257}, {"<|fim_prefix|>", 100258},
                                 {"<|fim_middle|>", 100259}, {"<|fim_suffix|>", 100260},
                                 {"<|endofprompt|>", 100276}};
static const special O200K[] = {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}};

typedef struct {
    int            ranks;
    const char    *name, *pattern;
    const special *specials;
    int            n_specials, V, bos, eos;
} encoding;

static const encoding ENCODINGS[] = {
    {50256, "r50k_base", MT__BPE_PAT_GPT2, R50K, 1, 50257, -1, 50256},
    {100256, "cl100k_base", MT__BPE_PAT_CL100K, CL100K, 5, 100277, -1, 100257},
    {199998, "o200k_base", MT__BPE_PAT_O200K, O200K, 2, 200019, -1, 199999},
    {128000, "Llama 3", MT__BPE_PAT_CL100K, NULL, 256, 128256, 128000, 128001},
};

static int b64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decodes base64 s[0..n) into out (room for n bytes); false when malformed. */
static bool b64_decode(const char *s, size_t n, char *out, size_t *out_n) {
    if (n == 0 || n % 4 != 0) return false;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4], pad = 0;
        for (int j = 0; j < 4; j++) {
            v[j] = s[i + j] == '=' && i + 4 == n && j >= 2 ? (pad++, 0) : b64_value(s[i + j]);
            if (v[j] < 0 || (pad && s[i + j] != '=')) return false;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[k++] = (char)(w >> 16);
        if (pad < 2) out[k++] = (char)(w >> 8);
        if (pad < 1) out[k++] = (char)w;
    }
    *out_n = k;
    return true;
}

/* One line's token and rank; false when it is not "BASE64 RANK". */
static bool parse_line(const char *l, size_t n, const char **b64, size_t *nb, long *rank) {
    const char *sp = memchr(l, ' ', n);
    if (!sp || sp == l || sp + 1 == l + n) return false;
    *b64 = l;
    *nb = (size_t)(sp - l);
    long r = 0;
    for (const char *p = sp + 1; p < l + n; p++) {
        if (*p < '0' || *p > '9' || r > 100000000) return false;
        r = r * 10 + (*p - '0');
    }
    *rank = r;
    return true;
}

bool mt__bpe_is_tiktoken(const char *text, size_t len) {
    const char *nl = memchr(text, '\n', len), *b;
    size_t nb;
    long r;
    return nl && parse_line(text, (size_t)(nl - text), &b, &nb, &r) && nb % 4 == 0 &&
           strspn(b, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") >= nb;
}

/* Counts the lines (ranks) of the file, checking each. */
static mt_status count_lines(const char *path, const char *text, size_t len, int *n) {
    *n = 0;
    for (size_t at = 0, line = 1; at < len; line++) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t ln = nl ? (size_t)(nl - (text + at)) : len - at;
        const char *b;
        size_t nb;
        long r;
        if (ln > 0 && !parse_line(text + at, ln, &b, &nb, &r))
            return mt_fail(MT_EFORMAT, "'%s', line %zu: not \"BASE64 RANK\", the line of a "
                           "tiktoken ranks file", path, line);
        if (ln > 0 && r != *n)
            return mt_fail(MT_EFORMAT, "'%s', line %zu: rank %ld where %d comes next; the ranks "
                           "of a tiktoken file run 0, 1, 2, ...", path, line, r, *n);
        if (ln > 0) (*n)++;
        at += ln + 1;
    }
    return MT_OK;
}

/* Llama 3's special tokens as Meta's tokenizer.py names them. */
static void llama3_name(int k, char *out, size_t n) {
    static const char *const first[] = {
        "<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
        "<|reserved_special_token_1|>", "<|reserved_special_token_2|>",
        "<|reserved_special_token_3|>", "<|start_header_id|>", "<|end_header_id|>",
        "<|reserved_special_token_4|>", "<|eot_id|>"};
    if (k < 10) snprintf(out, n, "%s", first[k]);
    else snprintf(out, n, "<|reserved_special_token_%d|>", k - 5);
}

static mt_status read_ranks(mt__bpe *m, const char *path, const char *text, size_t len) {
    char buf[1024];
    mt_status s = MT_OK;
    int rank = 0;
    for (size_t at = 0, line = 1; s == MT_OK && at < len; line++) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t ln = nl ? (size_t)(nl - (text + at)) : len - at, nb, got;
        const char *b;
        long r;
        if (ln > 0 && parse_line(text + at, ln, &b, &nb, &r)) {
            char field[48];
            snprintf(field, sizeof field, "line %zu", line);
            if (nb > sizeof buf || !b64_decode(b, nb, buf, &got))
                return mt_fail(MT_EFORMAT, "'%s', line %zu: the token is not base64 (of at "
                               "most %zu characters)", path, line, sizeof buf);
            s = mt__bpe_set(m, rank++, buf, got, false, field);
        }
        at += ln + 1;
    }
    return s;
}

mt_status mt__bpe_read_tiktoken(const char *path, const char *text, size_t len, mt__bpe **out) {
    *out = NULL;
    int n;
    mt_status s = count_lines(path, text, len, &n);
    if (s != MT_OK) return s;
    const encoding *e = NULL;
    for (size_t i = 0; i < sizeof ENCODINGS / sizeof ENCODINGS[0]; i++)
        if (ENCODINGS[i].ranks == n) e = &ENCODINGS[i];
    if (!e)
        return mt_fail(MT_EFORMAT, "'%s' is a tiktoken ranks file of %d ranks, and meshtrain "
                       "knows the regex and special tokens of r50k_base (50256 ranks), "
                       "cl100k_base (100256), o200k_base (199998) and Llama 3 (128000) only",
                       path, n);
    mt__bpe *m;
    if ((s = mt__bpe_new(path, e->V, &m)) != MT_OK) return s;
    s = read_ranks(m, path, text, len);
    char name[64];
    for (int k = 0; s == MT_OK && k < e->n_specials; k++) {
        if (e->specials) snprintf(name, sizeof name, "%s", e->specials[k].name);
        else llama3_name(k, name, sizeof name);
        int id = e->specials ? e->specials[k].id : e->ranks + k;
        s = mt__bpe_set(m, id, name, strlen(name), true, e->name);
    }
    mt__bpe_set_rules(m, true);
    mt__bpe_match_specials(m, false);
    mt__bpe_set_specials(m, e->bos, e->eos);
    if (s == MT_OK) s = mt__bpe_set_pattern(m, e->pattern, false, e->name);
    if (s == MT_OK) s = mt__bpe_finish(m, true);
    if (s != MT_OK) {
        mt__bpe_free(m);
        return s;
    }
    *out = m;
    return MT_OK;
}
