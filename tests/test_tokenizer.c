/*
 * test_tokenizer.c — the SentencePiece tokenizer (meshtrain/tokenizer.h).
 *
 * The model files of the decoding cases are protocol buffers written here
 * byte by byte from sentencepiece_model.proto's field numbers, and what they
 * decode to is written out by hand. The round trip trains a model with
 * Debian's spm_train on a corpus made here and compares decode(encode(text))
 * with the text's own bytes. Every case works in its own mkdtemp directory.
 */
#include "meshtrain.h"
#include "meshtrain/tokenizer.h"
#include "harness.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct { char dir[64]; char path[384]; } tmpdir;

static void tmp_open(tmpdir *td) {
    snprintf(td->dir, sizeof td->dir, "/tmp/mt_test_tok_XXXXXX");
    MT_CHECK(mkdtemp(td->dir) != NULL, "mkdtemp failed");
}

static const char *tmp_path(tmpdir *td, const char *name) {
    snprintf(td->path, sizeof td->path, "%s/%.255s", td->dir, name);
    return td->path;
}

/* Removes the directory and the files in it (the cases make no others). */
static void tmp_close(tmpdir *td) {
    DIR *d = opendir(td->dir);
    MT_CHECK(d, "opening %s", td->dir);
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlink(tmp_path(td, e->d_name));
    closedir(d);
    MT_CHECK(rmdir(td->dir) == 0, "removing %s", td->dir);
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    MT_CHECK(f && fwrite(data, 1, n, f) == n && fclose(f) == 0, "writing %s", path);
}

/* A protocol buffer under construction. */
typedef struct { uint8_t b[4096]; size_t n; } pb;

static void pb_byte(pb *p, uint8_t c) { p->b[p->n++] = c; }

/* A length-delimited field (wire type 2) of number `field` < 16, length < 128. */
static void pb_bytes(pb *p, int field, const void *data, size_t n) {
    pb_byte(p, (uint8_t)(field << 3 | 2));
    pb_byte(p, (uint8_t)n);
    memcpy(p->b + p->n, data, n);
    p->n += n;
}

/* One SentencePiece message: piece (1, string), score (2, float), type (3). */
static void pb_piece(pb *model, const char *piece, float score, int type) {
    pb m = {.n = 0};
    pb_bytes(&m, 1, piece, strlen(piece));
    pb_byte(&m, 2 << 3 | 5);
    memcpy(m.b + m.n, &score, 4);
    m.n += 4;
    pb_byte(&m, 3 << 3 | 0);
    pb_byte(&m, (uint8_t)type);
    pb_bytes(model, 1, m.b, m.n);
}

/* ids 0..9 of the hand-built model: types 1 normal, 2 unknown, 3 control, 6 byte */
static const char *const PIECES[] = {
    "<unk>", "<s>", "</s>", "<0x0A>", "<0xC3>", "<0xA9>",
    "\xE2\x96\x81the", "cat", "\xE2\x96\x81\xE2\x96\x81", "caf",
};
static const int TYPES[] = {2, 3, 3, 6, 6, 6, 1, 1, 1, 1};

/* The model above; `normalizer` adds a NormalizerSpec (field 3) with
 * add_dummy_prefix (3) and remove_extra_whitespaces (4) false, as
 * mt_tokenizer_train makes them; without it both are the proto's true. */
static void write_model(const char *path, bool normalizer) {
    pb model = {.n = 0};
    for (int i = 0; i < 10; i++) pb_piece(&model, PIECES[i], -(float)i, TYPES[i]);
    if (normalizer) {
        const uint8_t spec[] = {1 << 3 | 2, 8, 'i', 'd', 'e', 'n', 't', 'i', 't', 'y',
                                3 << 3 | 0, 0, 4 << 3 | 0, 0};
        pb_bytes(&model, 3, spec, sizeof spec);
    }
    write_file(path, model.b, model.n);
}

/* A new directory holding the hand-built model, opened. */
static mt_tokenizer *open_hand_model(tmpdir *td, bool normalizer) {
    tmp_open(td);
    const char *path = tmp_path(td, "hand.model");
    write_model(path, normalizer);
    mt_tokenizer *tok;
    MT_CHECK_OK(mt_tokenizer_open(path, &tok));
    return tok;
}

static bool have_tools(void) {
    return mt_tokenizer_find_tool(MT_SPM_TRAIN, NULL, 0) == MT_OK &&
           mt_tokenizer_find_tool(MT_SPM_ENCODE, NULL, 0) == MT_OK;
}

/* ------------------------------------------------------------------------ */
/* Reading a model, decoding                                                 */
/* ------------------------------------------------------------------------ */

MT_TEST(pieces_of_a_hand_built_model) {
    tmpdir td;
    mt_tokenizer *tok = open_hand_model(&td, true);
    MT_CHECK(mt_tokenizer_vocab(tok) == 10, "vocab %d, want 10", mt_tokenizer_vocab(tok));
    for (int i = 0; i < 10; i++) {
        float score = 1;
        const char *p = mt_tokenizer_piece(tok, i, &score);
        MT_CHECK(p && strcmp(p, PIECES[i]) == 0, "piece %d is '%s', want '%s'", i, p, PIECES[i]);
        MT_CHECK(score == -(float)i, "score of piece %d is %g, want %d", i, (double)score, -i);
    }
    MT_CHECK(mt_tokenizer_piece(tok, 10, NULL) == NULL && mt_tokenizer_piece(tok, -1, NULL) == NULL,
             "ids outside [0, 10) have no piece");
    MT_CHECK(strstr(mt_tokenizer_path(tok), "/hand.model"), "path %s", mt_tokenizer_path(tok));
    mt_tokenizer_free(tok);
    tmp_close(&td);
}

MT_TEST(decode_spaces_bytes_and_controls) {
    tmpdir td;
    mt_tokenizer *tok = open_hand_model(&td, true);
    /* <s> ▁the ▁▁ cat <0x0A> caf <0xC3> <0xA9> </s>: ▁ a space, bytes as they are
     * (C3 A9 is "é" in UTF-8), controls nothing; no dummy space dropped */
    const int32_t ids[] = {1, 6, 8, 7, 3, 9, 4, 5, 2};
    const char want[] = " the  cat\ncaf\xC3\xA9";
    char buf[64];
    size_t len = 0;
    MT_CHECK_OK(mt_tokenizer_decode(tok, ids, 9, true, buf, sizeof buf, &len));
    MT_CHECK(len == sizeof want - 1 && memcmp(buf, want, len) == 0 && buf[len] == '\0',
             "decoded '%s' (%zu bytes), want '%s'", buf, len, want);
    /* the unknown piece is SentencePiece's " ⁇ " */
    const int32_t unk[] = {7, 0, 7};
    MT_CHECK_OK(mt_tokenizer_decode(tok, unk, 3, false, buf, sizeof buf, &len));
    MT_CHECK(strcmp(buf, "cat \xE2\x81\x87 cat") == 0, "unknown decoded as '%s'", buf);
    /* nothing to decode: the empty string */
    MT_CHECK_OK(mt_tokenizer_decode(tok, NULL, 0, true, buf, sizeof buf, &len));
    MT_CHECK(len == 0 && buf[0] == '\0', "no ids give '%s'", buf);
    /* an id outside the vocabulary, named with its position */
    const int32_t bad[] = {7, 10};
    MT_CHECK_FAILS(mt_tokenizer_decode(tok, bad, 2, false, buf, sizeof buf, &len), MT_EINVAL,
                   "id 10", "position 1", "0..9");
    /* a buffer too small says how much is needed: "cat" "cat" + NUL */
    const int32_t two[] = {7, 7};
    MT_CHECK_FAILS(mt_tokenizer_decode(tok, two, 2, false, buf, 6, &len), MT_EINVAL, "7 bytes");
    MT_CHECK(len == 6, "needed %zu bytes, want 6", len);
    mt_tokenizer_free(tok);
    tmp_close(&td);
}

/* A model with SentencePiece's default normaliser adds a dummy space before
 * a text: decoding at the start of a text drops it from the first visible
 * piece (after controls), and only there. */
MT_TEST(decode_drops_the_dummy_space_at_a_texts_start) {
    tmpdir td;
    mt_tokenizer *tok = open_hand_model(&td, false);
    const int32_t ids[] = {1, 6, 6};
    char buf[64];
    MT_CHECK_OK(mt_tokenizer_decode(tok, ids, 3, true, buf, sizeof buf, NULL));
    MT_CHECK(strcmp(buf, "the the") == 0, "at the start: '%s', want 'the the'", buf);
    MT_CHECK_OK(mt_tokenizer_decode(tok, ids, 3, false, buf, sizeof buf, NULL));
    MT_CHECK(strcmp(buf, " the the") == 0, "continuing: '%s', want ' the the'", buf);
    mt_tokenizer_free(tok);
    tmp_close(&td);
}

MT_TEST(open_refuses_what_is_not_a_model) {
    tmpdir td;
    tmp_open(&td);
    mt_tokenizer *tok = NULL;
    const char *empty = tmp_path(&td, "empty.model");
    write_file(empty, "", 0);
    MT_CHECK_FAILS(mt_tokenizer_open(empty, &tok), MT_EFORMAT, "empty.model", "0 pieces");
    const char *text = tmp_path(&td, "text.model");
    write_file(text, "hello world\n", 12);   /* 'h' is field 13, wire type 0, then bad varints */
    MT_CHECK_FAILS(mt_tokenizer_open(text, &tok), MT_EFORMAT, "text.model", "SentencePiece");
    const uint8_t cut[] = {1 << 3 | 2, 50, 1 << 3 | 2, 3, 'a'};   /* a length past the end */
    const char *trunc = tmp_path(&td, "cut.model");
    write_file(trunc, cut, sizeof cut);
    MT_CHECK_FAILS(mt_tokenizer_open(trunc, &tok), MT_EFORMAT, "cut.model", "malformed");
    MT_CHECK_FAILS(mt_tokenizer_open(tmp_path(&td, "missing.model"), &tok), MT_EIO,
                   "missing.model");
    MT_CHECK_FAILS(mt_tokenizer_open(td.dir, &tok), MT_EIO, "directory");
    MT_CHECK(tok == NULL, "a failed open leaves no tokenizer");
    tmp_close(&td);
}

MT_TEST(check_tokens_names_an_id_past_the_vocabulary) {
    tmpdir td;
    mt_tokenizer *tok = open_hand_model(&td, true);
    const int32_t ok_ids[] = {9, 0, 3, 7};
    const int32_t bad_ids[] = {9, 0, 12, 7};
    char good[512];
    snprintf(good, sizeof good, "%s", tmp_path(&td, "good.bin"));
    MT_CHECK_OK(mt_tokens_write(good, ok_ids, 4));
    int64_t n = 0;
    MT_CHECK_OK(mt_tokenizer_check_tokens(tok, good, &n));
    MT_CHECK(n == 4, "%lld tokens, want 4", (long long)n);
    const char *bad = tmp_path(&td, "bad.bin");
    MT_CHECK_OK(mt_tokens_write(bad, bad_ids, 4));
    MT_CHECK_FAILS(mt_tokenizer_check_tokens(tok, bad, NULL), MT_EFORMAT, "bad.bin", "id 12",
                   "10 pieces");
    const char *text = tmp_path(&td, "text.txt");
    write_file(text, "plain text\n", 11);
    MT_CHECK_FAILS(mt_tokenizer_check_tokens(tok, text, NULL), MT_EFORMAT, "not an llm.c token");
    mt_tokenizer_free(tok);
    tmp_close(&td);
}

/* 65537 pieces "a" (field 1 of each, wire type 2, one byte): ids past
 * uint16, which llm.c's uint32 token files hold */
MT_TEST(check_vocab_takes_ids_past_uint16) {
    tmpdir td;
    mt_tokenizer *tok = open_hand_model(&td, true);
    MT_CHECK_OK(mt_tokenizer_check_vocab(tok));
    mt_tokenizer_free(tok);
    const char *path = tmp_path(&td, "huge.model");
    FILE *f = fopen(path, "wb");
    const uint8_t piece[] = {1 << 3 | 2, 3, 1 << 3 | 2, 1, 'a'};
    for (int i = 0; f && i < MT_TOKENIZER_MAX_VOCAB + 1; i++) fwrite(piece, 1, sizeof piece, f);
    MT_CHECK(f && fclose(f) == 0, "writing %s", path);
    MT_CHECK_OK(mt_tokenizer_open(path, &tok));
    MT_CHECK(mt_tokenizer_vocab(tok) == 65537, "vocab %d", mt_tokenizer_vocab(tok));
    MT_CHECK_OK(mt_tokenizer_check_vocab(tok));
    /* a uint32 token file of its ids checks; one id past them is named */
    int32_t ids[4] = {0, 65536, 3, 65535};
    const char *bin = tmp_path(&td, "ids.bin");
    MT_CHECK_OK(mt_tokens_write(bin, ids, 4));
    int64_t n = 0;
    MT_CHECK_OK(mt_tokenizer_check_tokens(tok, bin, &n));
    MT_CHECK(n == 4, "%lld tokens", (long long)n);
    ids[2] = 65537;
    MT_CHECK_OK(mt_tokens_write(bin, ids, 4));
    MT_CHECK_FAILS(mt_tokenizer_check_tokens(tok, bin, NULL), MT_EFORMAT, "holds id 65537",
                   "65537 pieces");
    mt_tokenizer_free(tok);
    tmp_close(&td);
}

MT_TEST(a_missing_tool_names_the_package) {
    setenv("PATH", "/nonexistent-dir", 1);   /* this case runs in its own child */
    MT_CHECK_FAILS(mt_tokenizer_find_tool(MT_SPM_TRAIN, NULL, 0), MT_EIO, "spm_train",
                   "/nonexistent-dir", "apt-get install sentencepiece");
    tmpdir td;
    tmp_open(&td);
    char text[512];
    snprintf(text, sizeof text, "%s", tmp_path(&td, "t.txt"));
    write_file(text, "some text\n", 10);
    MT_CHECK_FAILS(mt_tokenizer_train(text, 300, tmp_path(&td, "m"), 1), MT_EIO, "spm_train");
    tmp_close(&td);
}

/* ------------------------------------------------------------------------ */
/* Training and encoding with the tools                                      */
/* ------------------------------------------------------------------------ */

/* A corpus with what a lossless tokenizer must keep: runs of spaces, tabs,
 * an empty line, UTF-8 outside ASCII ("é", "✓" and a character rare enough
 * to be left to byte fallback), a carriage return, no newline at the end. */
static void write_corpus(const char *path) {
    static const char *const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog",
                                        "ran", "to", "café", "✓", "in", "sun"};
    FILE *f = fopen(path, "wb");
    MT_CHECK(f, "writing %s", path);
    for (int i = 0; i < 400; i++) {
        for (int w = 0; w < 6; w++)
            fprintf(f, "%s%s", w ? (i % 7 == w ? "  " : " ") : (i % 5 == 0 ? "\t" : ""),
                    words[(i * 7 + w * 3 + i / 14) % 14]);
        fputs(i % 50 == 0 ? "\n\n" : i % 61 == 0 ? " \xF0\x9D\x84\x9E\r\n" : "\n", f);
    }
    fputs("last line, no newline", f);
    MT_CHECK(fclose(f) == 0, "closing %s", path);
}

/* A directory holding the corpus, and the prefix of a model beside it. */
typedef struct { tmpdir td; char text[512], prefix[512]; } corpus_dir;

/* False (the case is skipped) when the tools are missing. */
static bool corpus_open(corpus_dir *c) {
    if (!have_tools()) {
        printf("skipped: spm_train or spm_encode missing (apt-get install sentencepiece)\n");
        return false;
    }
    tmp_open(&c->td);
    snprintf(c->text, sizeof c->text, "%s", tmp_path(&c->td, "corpus.txt"));
    snprintf(c->prefix, sizeof c->prefix, "%s", tmp_path(&c->td, "tok"));
    write_corpus(c->text);
    return true;
}

MT_TEST(round_trip_through_spm) {
    corpus_dir c;
    if (!corpus_open(&c)) return;
    tmpdir td = c.td;
    const char *text = c.text, *prefix = c.prefix;
    char model[600];
    snprintf(model, sizeof model, "%s.model", prefix);
    MT_CHECK_OK(mt_tokenizer_train(text, 300, prefix, 1));
    MT_CHECK(access(tmp_path(&td, "tok.vocab"), R_OK) == 0, "no tok.vocab");
    MT_CHECK(access(tmp_path(&td, "tok.model.tmp"), F_OK) != 0, "a temporary file stayed");
    mt_tokenizer *tok;
    MT_CHECK_OK(mt_tokenizer_open(model, &tok));
    MT_CHECK(mt_tokenizer_vocab(tok) == 300, "vocab %d, want 300", mt_tokenizer_vocab(tok));

    int32_t *ids = NULL;
    int64_t n = 0;
    MT_CHECK_OK(mt_tokenizer_encode_file(tok, text, &ids, &n));
    char *want = NULL;
    size_t want_len = 0;
    MT_CHECK_OK(mt_input_read_all(text, "corpus", 0, &want, &want_len));
    MT_CHECK(n > 0 && n < (int64_t)want_len, "%lld tokens for %zu bytes", (long long)n, want_len);
    char *got = malloc(want_len + 1);
    size_t got_len = 0;
    MT_CHECK_OK(mt_tokenizer_decode(tok, ids, n, true, got, want_len + 1, &got_len));
    for (size_t i = 0; i < want_len && i < got_len; i++)
        MT_CHECK(got[i] == want[i], "decoded text differs at byte %zu: 0x%02x, want 0x%02x", i,
                 (unsigned char)got[i], (unsigned char)want[i]);
    MT_CHECK(got_len == want_len, "decoded %zu bytes, want %zu", got_len, want_len);

    /* a string encodes as the same text in a file does */
    int32_t *p = NULL;
    int64_t pn = 0;
    MT_CHECK_OK(mt_tokenizer_encode(tok, want, want_len, &p, &pn));
    MT_CHECK(pn == n && memcmp(p, ids, (size_t)n * sizeof *ids) == 0, "string and file differ");
    free(p);
    MT_CHECK_OK(mt_tokenizer_encode(tok, "", 0, &p, &pn));
    MT_CHECK(pn == 0, "the empty text gives %lld ids", (long long)pn);
    free(p);
    MT_CHECK_OK(mt_tokenizer_encode(tok, "\n\n", 2, &p, &pn));
    MT_CHECK(pn == 2 && strcmp(mt_tokenizer_piece(tok, p[0], NULL), "<0x0A>") == 0 &&
             p[1] == p[0], "two newlines give %lld ids", (long long)pn);
    free(p);
    free(got);
    free(want);
    free(ids);
    mt_tokenizer_free(tok);
    tmp_close(&td);
}

MT_TEST(train_refuses_bad_sizes_and_texts) {
    corpus_dir c;
    if (!corpus_open(&c)) return;
    tmpdir td = c.td;
    const char *text = c.text, *prefix = c.prefix;
    MT_CHECK_FAILS(mt_tokenizer_train(text, 65537, prefix, 1), MT_EINVAL, "65537", "uint16");
    /* spm_train's own reasons, quoted: too few pieces for the characters, too many
     * for the corpus */
    MT_CHECK_FAILS(mt_tokenizer_train(text, 260, prefix, 1), MT_EFORMAT, "spm_train",
                   "Vocabulary size is smaller");
    MT_CHECK_FAILS(mt_tokenizer_train(text, 60000, prefix, 1), MT_EFORMAT, "spm_train",
                   "Vocabulary size too high");
    MT_CHECK(access(tmp_path(&td, "tok.model"), F_OK) != 0, "a failed training wrote a model");
    const char *empty = tmp_path(&td, "empty.txt");
    write_file(empty, "", 0);
    MT_CHECK_FAILS(mt_tokenizer_train(empty, 300, prefix, 1), MT_EIO, "empty");
    tmp_close(&td);
}

/* decode(encode(text)) against the text's own bytes, through a file and a
 * string, for `n` bytes that spm_encode alone would not give back */
static void check_round_trip(const mt_tokenizer *tok, tmpdir *td, const char *what,
                             const char *text, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s", tmp_path(td, "hostile.txt"));
    write_file(path, text, n);
    int32_t *ids = NULL, *sids = NULL;
    int64_t k = 0, sk = 0;
    MT_CHECK_OK(mt_tokenizer_encode_file(tok, path, &ids, &k));
    MT_CHECK_OK(mt_tokenizer_encode(tok, text, n, &sids, &sk));
    MT_CHECK(sk == k && memcmp(sids, ids, (size_t)k * sizeof *ids) == 0,
             "%s: the string and the file encode differently", what);
    char *got = malloc(n + 1);
    size_t len = 0;
    MT_CHECK_OK(mt_tokenizer_decode(tok, ids, k, true, got, n + 1, &len));
    for (size_t i = 0; i < n && i < len; i++)
        MT_CHECK(got[i] == text[i], "%s: decoded byte %zu is 0x%02x, want 0x%02x", what, i,
                 (unsigned char)got[i], (unsigned char)text[i]);
    MT_CHECK(len == n, "%s: decoded %zu bytes, want %zu", what, len, n);
    free(got);
    free(ids);
    free(sids);
}

/* The id of the piece spelled `piece`, looked up by its spelling. */
static int id_of(const mt_tokenizer *tok, const char *piece) {
    for (int id = 0; id < mt_tokenizer_vocab(tok); id++)
        if (strcmp(mt_tokenizer_piece(tok, id, NULL), piece) == 0) return id;
    return -1;
}

/* Issue 37, finding 7: spm_encode makes U+FFFD of every byte that is not
 * UTF-8 and a space of a literal "▁"; the encoder keeps them as bytes. */
MT_TEST(round_trip_keeps_every_byte) {
    corpus_dir c;
    if (!corpus_open(&c)) return;
    char model[600];
    snprintf(model, sizeof model, "%s.model", c.prefix);
    MT_CHECK_OK(mt_tokenizer_train(c.text, 300, c.prefix, 1));
    mt_tokenizer *tok;
    MT_CHECK_OK(mt_tokenizer_open(model, &tok));

    /* Latin-1: "café naïve", two lines, no newline at the end */
    static const char latin1[] = "caf\xE9 na\xEFve\nthe cat \xE0 la mode\n\xFF\xFE";
    check_round_trip(tok, &c.td, "Latin-1", latin1, sizeof latin1 - 1);
    /* a lone byte is its own byte piece, not U+FFFD's three */
    int32_t *ids = NULL;
    int64_t n = 0;
    MT_CHECK_OK(mt_tokenizer_encode(tok, "\xE9", 1, &ids, &n));
    MT_CHECK(n == 1 && ids[0] == id_of(tok, "<0xE9>"), "\"\\xE9\" gives %lld ids, the first %d; "
             "want the one id of <0xE9>, %d", (long long)n, n ? ids[0] : -1,
             id_of(tok, "<0xE9>"));
    free(ids);
    /* sequences cut short, overlong forms, a surrogate, past U+10FFFF, a
     * stray continuation byte; at the end a character cut off */
    static const char cut[] = "a\xC3 b\xE2\x9C c\xF0\x9D\x84 d\xC0\xAF e\xED\xA0\x80 "
                              "f\xF4\x90\x80\x80 g\x80\xBF h\xE2\x9C\x93 \xF0\x9D\x84";
    check_round_trip(tok, &c.td, "cut sequences", cut, sizeof cut - 1);
    /* the model's own symbols as text: "▁" (a space inside pieces), a
     * byte piece's and the controls' spellings, U+FFFD itself */
    static const char symbols[] = "\xE2\x96\x81x \xE2\x96\x81\xE2\x96\x81 <0x41> <s></s><unk> "
                                  "\xEF\xBF\xBD\r\n\t";
    check_round_trip(tok, &c.td, "symbols", symbols, sizeof symbols - 1);
    /* binary: every byte value, NULs among them, then 4096 random bytes */
    char bin[256 + 4096];
    for (int i = 0; i < 256; i++) bin[i] = (char)(255 - i);
    uint64_t x = 88172645463325252ull;   /* xorshift64 */
    for (int i = 256; i < (int)sizeof bin; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bin[i] = (char)(x >> 24);
    }
    check_round_trip(tok, &c.td, "binary", bin, sizeof bin);
    check_round_trip(tok, &c.td, "NULs", "\0\0a\0\n\0", 6);
    mt_tokenizer_free(tok);
    tmp_close(&c.td);
}

/* A model without byte pieces cannot keep a byte that is not UTF-8: refused,
 * naming the byte and where it is, before spm_encode runs. */
MT_TEST(encode_refuses_a_raw_byte_without_its_piece) {
    tmpdir td;
    mt_tokenizer *tok = open_hand_model(&td, true);   /* bytes 0x0A, 0xC3, 0xA9 only */
    int32_t *ids = NULL;
    int64_t n = 0;
    MT_CHECK_FAILS(mt_tokenizer_encode(tok, "cat\xFF", 4, &ids, &n), MT_EFORMAT, "0xFF",
                   "offset 3", "byte fallback");
    mt_tokenizer_free(tok);
    tmp_close(&td);
}

/* Issue 37, finding 14: a vocabulary below a byte-fallback model's own
 * pieces, and a text with nothing to merge, are refused before spm_train
 * (which fails inside, or crashes with signal 11). */
MT_TEST(train_refuses_a_tiny_vocabulary_and_a_tiny_text) {
    corpus_dir c;
    if (!corpus_open(&c)) return;
    MT_CHECK_FAILS(mt_tokenizer_train(c.text, 1, c.prefix, 1), MT_EINVAL, "259", "256 bytes");
    MT_CHECK_FAILS(mt_tokenizer_train(c.text, 258, c.prefix, 1), MT_EINVAL, "259");
    char tiny[512];
    snprintf(tiny, sizeof tiny, "%s", tmp_path(&c.td, "tiny.txt"));
    write_file(tiny, "a", 1);   /* one character: 259 + 1 pieces at most */
    MT_CHECK_FAILS(mt_tokenizer_train(tiny, 300, c.prefix, 1), MT_EINVAL,
                   "the text is too small", "(1 byte)", "at most 260 pieces");
    write_file(tiny, "12 34\n", 6);   /* digits stay alone, a space ends no piece */
    MT_CHECK_FAILS(mt_tokenizer_train(tiny, 300, c.prefix, 1), MT_EINVAL,
                   "the text is too small", "(6 bytes)", "at most 264 pieces");
    MT_CHECK(access(tmp_path(&c.td, "tok.model"), F_OK) != 0, "a refused training wrote a model");
    /* exactly the pieces it has: no merge to make, and spm_train makes them */
    MT_CHECK_OK(mt_tokenizer_train(tiny, 264, c.prefix, 1));
    tmp_close(&c.td);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
