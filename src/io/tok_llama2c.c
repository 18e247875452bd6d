/*
 * tok_llama2c.c — llama2.c's tokenizer.bin as a tokenizer of its own: the
 * file llama2c_tok.c reads and writes (a uint32 max_token_length, then per
 * token a float32 score, an int32 length and its bytes), encoded the way
 * run.c's encode() does, on tok_bpe.c's engine:
 *
 *   - the text gets a space before it (its dummy prefix; not an empty text);
 *   - each character (a lead byte and up to 3 continuation bytes) is its
 *     token, or else its bytes' tokens ("<0x41>", byte fallback);
 *   - the pair whose bytes together are the token of the highest score
 *     merges first, the leftmost of equal scores, until none is a token.
 *
 * The pieces are export.py's: SentencePiece's with "▁" as a space; the byte
 * pieces "<0x00>".."<0xFF>" decode to their byte, BOS and EOS ("\n<s>\n",
 * "\n</s>\n") to "<s>" and "</s>"; none of these is looked up in a text.
 */
#include "io/tok_bpe_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A record's fields at p: its score and length. */
static void record(const char *p, float *score, int32_t *len) {
    memcpy(score, p, 4);
    memcpy(len, p + 4, 4);
}

/* The records from offset 4 end exactly at len: how many there are, 0 if not. */
static int count_records(const char *text, size_t len) {
    if (len < 4) return 0;
    uint32_t max_len;
    memcpy(&max_len, text, 4);
    if (max_len == 0 || max_len > (1u << 20)) return 0;
    size_t at = 4;
    int n = 0;
    while (at + 8 <= len && n < (1 << 24)) {
        float score;
        int32_t l;
        record(text + at, &score, &l);
        if (l <= 0 || (uint32_t)l > max_len || !isfinite(score) || (size_t)l > len - at - 8) return 0;
        at += 8 + (size_t)l;
        n++;
    }
    return at == len ? n : 0;
}

bool mt__bpe_is_llama2c(const char *text, size_t len) { return count_records(text, len) >= 259; }

typedef struct { float score; int32_t id; } scored;

static int by_score(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Each token's merge rank: the tokens by score, highest first, equal
 * scores one rank (run.c takes the leftmost pair of the best score). */
static int32_t *ranks(const float *score, int V) {
    scored *order = malloc((size_t)V * sizeof *order);
    int32_t *rank = malloc((size_t)V * sizeof *rank);
    if (!order || !rank) { free(order); free(rank); return NULL; }
    for (int i = 0; i < V; i++) order[i] = (scored){score[i], i};
    qsort(order, (size_t)V, sizeof *order, by_score);
    for (int i = 0, r = 0; i < V; i++) {
        if (i > 0 && order[i].score != order[i - 1].score) r++;
        rank[order[i].id] = r;
    }
    free(order);
    return rank;
}

/* Token i of the file, the record at p. */
static mt_status read_token(mt__bpe *m, int i, const char *p, int32_t n, int *bos, int *eos) {
    char field[32];
    snprintf(field, sizeof field, "token %d", i);
    int b = mt__bpe_byte_piece(p, (size_t)n);
    if (b >= 0) {
        char c = (char)b;
        mt__bpe_set_byte(m, b, i);
        return mt__bpe_set(m, i, &c, 1, true, field);
    }
    if ((n == 5 && memcmp(p, "\n<s>\n", 5) == 0) || (n == 6 && memcmp(p, "\n</s>\n", 6) == 0)) {
        *(n == 5 ? bos : eos) = i;
        return mt__bpe_set(m, i, p + 1, (size_t)n - 2, true, field);
    }
    return mt__bpe_set(m, i, p, (size_t)n, false, field);
}

mt_status mt__bpe_read_llama2c(const char *path, const char *text, size_t len, mt__bpe **out) {
    *out = NULL;
    int V = count_records(text, len);
    if (V == 0)
        return mt_fail(MT_EFORMAT, "'%s' is not a llama2.c tokenizer.bin: its records do not "
                       "end at the end of the file", path);
    mt__bpe *m;
    mt_status s = mt__bpe_new(path, V, &m);
    float *score = s == MT_OK ? malloc((size_t)V * sizeof *score) : NULL;
    if (s == MT_OK && !score) s = mt_fail(MT_ENOMEM, "no memory for the %d scores of '%s'", V, path);
    int bos = -1, eos = -1;
    size_t at = 4;
    for (int i = 0; s == MT_OK && i < V; i++) {
        int32_t n;
        record(text + at, &score[i], &n);
        s = read_token(m, i, text + at + 8, n, &bos, &eos);
        at += 8 + (size_t)n;
    }
    int32_t *rank = s == MT_OK ? ranks(score, V) : NULL;
    if (s == MT_OK && !rank) s = mt_fail(MT_ENOMEM, "no memory for the ranks of '%s'", path);
    if (s == MT_OK) {
        mt__bpe_set_llama2c(m, rank);
        mt__bpe_match_specials(m, false);
        mt__bpe_set_specials(m, bos, eos);
        s = mt__bpe_finish(m, false);
    }
    free(score);
    if (s != MT_OK) {
        mt__bpe_free(m);
        return s;
    }
    *out = m;
    return MT_OK;
}
