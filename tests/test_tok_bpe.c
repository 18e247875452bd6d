/*
 * test_tok_bpe.c — byte-level BPE tokenizers read from Hugging Face's
 * tokenizer.json (meshtrain/tokenizer.h), on files written here.
 *
 * Each file has the 256 byte tokens at ids 0..255, spelled with GPT-2's
 * byte-to-unicode map as this file writes it (spell_byte: the printable
 * bytes are themselves, the 68 others U+0100.. in byte order), and a few
 * merges; the ids each text encodes to are worked out by hand in the
 * comments beside them (the pre-tokeniser's pieces, then the merges lowest
 * rank first, the leftmost of equal ranks). The library-against-library
 * comparison on real vocabularies is tests/test_tokenizer_bpe.sh's.
 */
#include "meshtrain.h"
#include "meshtrain/tokenizer.h"
#include "harness.h"
#include "tok_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Writing a tokenizer.json                                                  */
/* ------------------------------------------------------------------------ */

/* The UTF-8 spelling of byte b in GPT-2's map, into out (3 bytes). */
static void spell_byte(int b, char *out) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    int n = 0;
    for (int c = 0; c < b; c++)   /* the non-printable bytes before b */
        n += !((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF));
    unsigned cp = printable ? (unsigned)b : 256u + (unsigned)n;
    if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; return; }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    out[2] = 0;
}

/* A JSON string of the spelling, escaped where JSON needs it. */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* The file's parts; NULL leaves the default written below. */
typedef struct {
    const char *model_head;    /* "model"'s first members, in place of type BPE, dropout null */
    const char *model_extra;   /* more members of "model" */
    const char *merges;        /* the merges array's members */
    const char *vocab_extra;   /* more members of "vocab", after the 256 bytes */
    const char *added, *normalizer, *pre, *post, *decoder;
    int         skip_byte;     /* a byte left out of the vocabulary, -1 none */
} tok_json;

/* Ġ is U+0120 (the space), spelled here as UTF-8. */
#define SP "\xC4\xA0"
/* 256 Ġt, 257 he, 258 Ġthe, 259 in, 260 ing, 261 Ġc, 262 at, 263 Ġcat, 264 ĠĠ,
 * 265 aa, 266 Ã© (é, bytes C3 A9); merges in that order, ranks 0..10 */
static const char DEFAULT_VOCAB[] =
    "\"" SP "t\": 256, \"he\": 257, \"" SP "the\": 258, \"in\": 259, \"ing\": 260, "
    "\"" SP "c\": 261, \"at\": 262, \"" SP "cat\": 263, \"" SP SP "\": 264, \"aa\": 265, "
    "\"\xC3\x83\xC2\xA9\": 266";
static const char DEFAULT_MERGES[] =
    "\"" SP " t\", \"h e\", \"" SP "t he\", \"i n\", \"in g\", \"" SP " c\", \"a t\", "
    "\"" SP "c at\", \"" SP " " SP "\", \"a a\", \"\xC3\x83 \xC2\xA9\"";
static const char GPT2_PRE[] =
    "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, "
    "\"use_regex\": true}";

static void write_json(const char *path, const tok_json *t) {
    FILE *f = fopen(path, "w");
    MT_CHECK(f, "writing %s", path);
    fprintf(f, "{\"version\": \"1.0\", \"added_tokens\": [%s],\n",
            t->added ? t->added : "{\"id\": 267, \"content\": \"<|end|>\", \"single_word\": false, "
                                  "\"lstrip\": false, \"rstrip\": false, \"normalized\": false, "
                                  "\"special\": true}");
    fprintf(f, "\"normalizer\": %s, \"pre_tokenizer\": %s, \"post_processor\": %s, "
            "\"decoder\": %s,\n", t->normalizer ? t->normalizer : "null",
            t->pre ? t->pre : GPT2_PRE, t->post ? t->post : "null",
            t->decoder ? t->decoder : "{\"type\": \"ByteLevel\"}");
    fprintf(f, "\"model\": {%s, \"unk_token\": null%s%s, \"vocab\": {",
            t->model_head ? t->model_head : "\"type\": \"BPE\", \"dropout\": null",
            t->model_extra ? ", " : "", t->model_extra ? t->model_extra : "");
    char s[4];
    for (int b = 0; b < 256; b++) {
        if (b == t->skip_byte) continue;
        spell_byte(b, s);
        json_str(f, s);
        fprintf(f, ": %d, ", b);
    }
    fprintf(f, "%s}, \"merges\": [%s]}}\n", t->vocab_extra ? t->vocab_extra : DEFAULT_VOCAB,
            t->merges ? t->merges : DEFAULT_MERGES);
    MT_CHECK(fclose(f) == 0, "closing %s", path);
}

static const char *tmp_file(tmp *t, tok_json j) {
    write_json(tmp_path(t), &j);
    return t->path;
}


/* ------------------------------------------------------------------------ */
/* Cases                                                                     */
/* ------------------------------------------------------------------------ */

MT_TEST(gpt2_shape_encodes_as_worked_out_by_hand) {
    tmp t;
    mt_tokenizer *tok;
    MT_CHECK_OK(mt_tokenizer_open(tmp_file(&t, (tok_json){.skip_byte = -1}), &tok));
    MT_CHECK(mt_tokenizer_vocab(tok) == 268, "vocab %d, want 268", mt_tokenizer_vocab(tok));
    MT_CHECK(strcmp(mt_tokenizer_piece(tok, 32, NULL), SP) == 0, "the space is spelled Ġ");
    MT_CHECK(strcmp(mt_tokenizer_piece(tok, 263, NULL), SP "cat") == 0, "263 is Ġcat");
    MT_CHECK(mt_tokenizer_bos(tok) == -1, "a ByteLevel post-processor adds no BOS");
    /* "the" | " cat": t h e -> (h e) rank 1 -> [t][he]; Ġ c a t -> (Ġ c) 5, (a t) 6,
     * (Ġc at) 7 -> [Ġcat] */
    check_ids(tok, TEXT("the cat"), IDS(116, 257, 263));
    /* " the": (Ġ t) 0 -> [Ġt][h][e], (h e) 1 -> [Ġt][he], (Ġt he) 2 -> [Ġthe] */
    check_ids(tok, TEXT(" the"), IDS(258));
    /* "aaa": (a a) rank 9 at 0 and at 1: the leftmost -> [aa][a] */
    check_ids(tok, TEXT("aaa"), IDS(265, 97));
    /* "café" is one piece (é is a letter): c a f C3 A9 -> (C3 A9) 10 -> [c][a][f][é] */
    check_ids(tok, TEXT("caf\xC3\xA9"), IDS(99, 97, 102, 266));
    /* "a  b": "a", then \s+(?!\S) takes one space (the second is followed by b), then
     * " b": the spaces are in two pieces, so ĠĠ never forms */
    check_ids(tok, TEXT("a  b"), IDS(97, 32, 32, 98));
    /* "a   " at the end: the three spaces are one piece; (Ġ Ġ) 8 at 0 and 1 -> [ĠĠ][Ġ] */
    check_ids(tok, TEXT("a   "), IDS(97, 264, 32));
    /* "it's": "it" (no merge: i t is none), "'s" (GPT-2's contraction): i t ' s */
    check_ids(tok, TEXT("it's"), IDS(105, 116, 39, 115));
    /* the added token is found first, then each side encodes alone */
    check_ids(tok, TEXT("the<|end|>the"), IDS(116, 257, 267, 116, 257));
    /* "sing\n": "sing" -> (i n) 3, (in g) 4 -> [s][ing]; "\n" alone */
    check_ids(tok, TEXT("sing\n"), IDS(115, 260, 10));
    /* bytes that are not UTF-8 match no pattern: each is a piece of its own */
    check_ids(tok, TEXT("a\xFF" "b\xC3"), IDS(97, 255, 98, 195));
    check_ids(tok, TEXT(""), (const int32_t[]){0}, 0);
    mt_tokenizer_free(tok);
    tmp_done(&t);
}

/* Llama 3's shape: a Split regex then ByteLevel without one, merges as [a, b]
 * pairs, ignore_merges, <|begin_of_text|> put first by TemplateProcessing. */
MT_TEST(llama3_shape_split_ignore_merges_and_bos) {
    static const char pre[] =
        "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
        "{\"Regex\": \"\\\\p{L}+|\\\\s+\"}, \"behavior\": \"Isolated\", \"invert\": false}, "
        "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": false}]}";
    static const char post[] =
        "{\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\"}, {\"type\": "
        "\"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<|b|>\", "
        "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], "
        "\"special_tokens\": {\"<|b|>\": {\"id\": \"<|b|>\", \"ids\": [258], "
        "\"tokens\": [\"<|b|>\"]}}}]}";
    static const char added[] =
        "{\"id\": 258, \"content\": \"<|b|>\", \"special\": true}, "
        "{\"id\": 259, \"content\": \"<|end_of_text|>\", \"special\": true}";
    /* 256 "ab" with no merge that makes it; 257 "bc" from the merge [b, c] */
    tok_json j = {.skip_byte = -1, .pre = pre, .post = post, .added = added,
                  .vocab_extra = "\"ab\": 256, \"bc\": 257", .merges = "[\"b\", \"c\"]"};
    for (int ignore = 0; ignore < 2; ignore++) {
        tmp t;
        mt_tokenizer *tok;
        j.model_extra = ignore ? "\"ignore_merges\": true" : "\"ignore_merges\": false";
        MT_CHECK_OK(mt_tokenizer_open(tmp_file(&t, j), &tok));
        MT_CHECK(mt_tokenizer_bos(tok) == 258, "BOS %d, want 258", mt_tokenizer_bos(tok));
        MT_CHECK(mt_tokenizer_eos(tok) == 259, "EOS %d, want 259", mt_tokenizer_eos(tok));
        /* pieces "ab", " ", "abc", "!", "1" (gaps of the regex are pieces too):
         * "ab" is a token: with ignore_merges it is 256, without it a b (no merge);
         * "abc": not a token: (b c) -> [a][bc] either way */
        if (ignore) check_ids(tok, TEXT("ab abc!1"), IDS(256, 32, 97, 257, 33, 49));
        else check_ids(tok, TEXT("ab abc!1"), IDS(97, 98, 32, 97, 257, 33, 49));
        mt_tokenizer_free(tok);
        tmp_done(&t);
    }
}

/* byte_fallback true beside a ByteLevel pre-tokeniser changes nothing (every
 * byte is a token): the file stays byte-level, not SentencePiece's scheme. */
MT_TEST(byte_fallback_beside_byte_level_stays_byte_level) {
    tmp t;
    mt_tokenizer *tok;
    MT_CHECK_OK(mt_tokenizer_open(tmp_file(&t, (tok_json){.skip_byte = -1,
                                                         .model_extra = "\"byte_fallback\": true"}),
                                  &tok));
    MT_CHECK(strcmp(mt_tokenizer_kind(tok), "byte-level BPE") == 0, "kind %s", mt_tokenizer_kind(tok));
    check_ids(tok, TEXT("the cat"), IDS(116, 257, 263));   /* as in the GPT-2 case */
    mt_tokenizer_free(tok);
    tmp_done(&t);
}

/* Qwen2's normaliser: the text between special tokens is put in NFC first. */
MT_TEST(nfc_normalizer_composes_before_the_merges) {
    tmp t;
    mt_tokenizer *tok;
    MT_CHECK_OK(mt_tokenizer_open(tmp_file(&t, (tok_json){.skip_byte = -1,
                                                         .normalizer = "{\"type\": \"NFC\"}"}),
                                  &tok));
    /* "cafe" + U+0301 (combining acute, CC 81) is "café" in NFC: c a f C3 A9 ->
     * (C3 A9) 10 -> [c][a][f][é] */
    int32_t *ids = NULL;
    int64_t n = 0;
    const int32_t want[] = {99, 97, 102, 266, 267};
    static const char text[] = "cafe\xCC\x81<|end|>";
    MT_CHECK_OK(mt_tokenizer_encode(tok, text, sizeof text - 1, &ids, &n));
    MT_CHECK(n == 5, "%lld ids, want 5", (long long)n);
    for (int i = 0; i < 5 && i < n; i++) MT_CHECK(ids[i] == want[i], "id %d is %d, want %d", i, ids[i], want[i]);
    free(ids);
    /* bytes that are not UTF-8 are kept around the normalised runs */
    check_ids(tok, TEXT("\xFF" "caf\xC3\xA9\xFE"), IDS(255, 99, 97, 102, 266, 254));
    mt_tokenizer_free(tok);
    tmp_done(&t);
}

/* What meshtrain does not do is refused, naming the field. */
MT_TEST(unsupported_and_broken_files_are_refused) {
    struct { tok_json j; const char *want1, *want2; } cases[] = {
        {{.skip_byte = -1, .model_head = "\"type\": \"WordPiece\""}, "model.type", "WordPiece"},
        {{.skip_byte = -1, .normalizer = "{\"type\": \"NFKC\"}"}, "normalizer is NFKC", "null"},
        {{.skip_byte = -1, .pre = "{\"type\": \"Whitespace\"}"}, "pre_tokenizer is Whitespace",
         "ByteLevel"},
        {{.skip_byte = -1, .pre = "{\"type\": \"ByteLevel\", \"add_prefix_space\": true}"},
         "add_prefix_space", "true"},
        {{.skip_byte = -1, .pre = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
                                  "\"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": "
                                  "\"Removed\"}, {\"type\": \"ByteLevel\", \"use_regex\": "
                                  "false}]}"},
         "Split.behavior", "Removed"},
        {{.skip_byte = -1, .pre = "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": "
                                  "\"Split\", \"pattern\": {\"Regex\": \"(a\"}, \"behavior\": "
                                  "\"Isolated\"}, {\"type\": \"ByteLevel\", \"use_regex\": "
                                  "false}]}"},
         "does not compile in PCRE2", "Split.pattern"},
        {{.skip_byte = -1, .decoder = "{\"type\": \"Metaspace\"}"}, "decoder is Metaspace", ""},
        {{.skip_byte = -1, .post = "{\"type\": \"RobertaProcessing\"}"}, "post_processor",
         "RobertaProcessing"},
        {{.skip_byte = -1, .post = "{\"type\": \"TemplateProcessing\", \"single\": [{\"Sequence\": "
                                   "{\"id\": \"A\"}}, {\"SpecialToken\": {\"id\": \"<|end|>\"}}], "
                                   "\"special_tokens\": {\"<|end|>\": {\"ids\": [267]}}}"},
         "post_processor.single[1] (<|end|>)", "after the text"},
        {{.skip_byte = -1, .added = "{\"id\": 267, \"content\": \"<x>\", \"lstrip\": true}"},
         "added_tokens[0]", "lstrip"},
        {{.skip_byte = -1, .model_head = "\"type\": \"BPE\", \"dropout\": 0.1"}, "model.dropout", ""},
        {{.skip_byte = -1, .merges = "\"q z\""}, "model.merges[0]", "not in model.vocab"},
        {{.skip_byte = -1, .merges = "\"a b c\""}, "model.merges[0]", "one space"},
        {{.skip_byte = -1, .merges = "\"a q\""}, "model.merges[0]", "not in model.vocab"},
        {{.skip_byte = 0x41, .vocab_extra = "\"xy\": 65", .merges = "", .added = ""},
         "single byte 0x41", "all 256"},
        {{.skip_byte = -1, .vocab_extra = "\"xy\": 300", .merges = "", .added = ""},
         "no token of id 256", "without a gap"},
        {{.skip_byte = -1, .vocab_extra = "\"xy\": 65"}, "id 65", "already"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tmp t;
        tmp_file(&t, cases[i].j);
        check_refused(&t, cases[i].want1, cases[i].want2);
    }
}

/* Decoding refuses an id outside the vocabulary, naming it. */
MT_TEST(decode_refuses_an_id_outside) {
    tmp t;
    mt_tokenizer *tok;
    MT_CHECK_OK(mt_tokenizer_open(tmp_file(&t, (tok_json){.skip_byte = -1}), &tok));
    char buf[16];
    MT_CHECK_FAILS(mt_tokenizer_decode(tok, (const int32_t[]){97, 268}, 2, true, buf, sizeof buf,
                                       NULL), MT_EINVAL, "id 268", "position 1");
    /* the special token decodes to its text */
    size_t n = 0;
    MT_CHECK_OK(mt_tokenizer_decode(tok, (const int32_t[]){267, 97}, 2, true, buf, sizeof buf, &n));
    MT_CHECK(n == 8 && memcmp(buf, "<|end|>a", 8) == 0, "267 97 decode to '%s'", buf);
    mt_tokenizer_free(tok);
    tmp_done(&t);
}

/* llama2.c's tokenizer.bin (written by mt_llama2c_tokenizer_write, as
 * export.py's) into dir/tokenizer.bin, its path into path:
 * 0 <unk>, 1 BOS, 2 EOS, 3..258 the bytes, then 259 " " 260 "a" 261 "b" 262 "ab"
 * (score -10) 263 " a" (-20) 264 " ab" (-30) 265 "é" */
static void write_llama2c(char *dir, char *path, size_t n) {
    const char *pieces[266];
    float scores[266] = {0};
    char bytes[256][8];
    pieces[0] = "<unk>";
    pieces[1] = "\n<s>\n";
    pieces[2] = "\n</s>\n";
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        pieces[3 + b] = bytes[b];
    }
    const char *rest[] = {" ", "a", "b", "ab", " a", " ab", "\xC3\xA9"};
    const float rest_score[] = {-1, -2, -3, -10, -20, -30, -4};
    for (int i = 0; i < 7; i++) {
        pieces[259 + i] = rest[i];
        scores[259 + i] = rest_score[i];
    }
    MT_CHECK(mkdtemp(dir), "mkdtemp");
    snprintf(path, n, "%s/tokenizer.bin", dir);
    MT_CHECK_OK(mt_llama2c_tokenizer_write(path, 266, pieces, scores));
}

/* run.c's encoding, a space before the text, characters, then the pair
 * making the highest-scored token first. */
MT_TEST(llama2c_tokenizer_bin_encodes_as_run_c) {
    char dir[] = "/tmp/mt_test_l2c_XXXXXX", path[64];
    write_llama2c(dir, path, sizeof path);
    mt_tokenizer *tok;
    MT_CHECK_OK(mt_tokenizer_open(path, &tok));
    MT_CHECK(strcmp(mt_tokenizer_kind(tok), "llama2.c BPE") == 0, "kind %s", mt_tokenizer_kind(tok));
    MT_CHECK(mt_tokenizer_bos(tok) == 1 && mt_tokenizer_eos(tok) == 2, "BOS %d EOS %d",
             mt_tokenizer_bos(tok), mt_tokenizer_eos(tok));
    /* " ab": (" " a) makes " a" (-20), (a b) "ab" (-10): ab first, then (" " ab) " ab" */
    check_ids(tok, TEXT("ab"), IDS(264));
    /* " ba": neither " b" nor "ba" is a token */
    check_ids(tok, TEXT("ba"), IDS(259, 261, 260));
    /* " aé\n": é is a character token, \n is not: its byte piece 3 + 0x0A; " a" merges */
    check_ids(tok, TEXT("a\xC3\xA9\n"), IDS(263, 265, 13));
    /* "x" is no token: its byte, 3 + 0x78 */
    check_ids(tok, TEXT("x"), IDS(259, 123));
    check_ids(tok, TEXT(""), (const int32_t[]){0}, 0);
    char buf[16];
    size_t n = 0;   /* not at the start, the space stays */
    MT_CHECK_OK(mt_tokenizer_decode(tok, (const int32_t[]){264}, 1, false, buf, sizeof buf, &n));
    MT_CHECK(n == 3 && memcmp(buf, " ab", 3) == 0, "264 decodes to '%s' inside a text", buf);
    mt_tokenizer_free(tok);
    unlink(path);
    rmdir(dir);
}

/* The ids `sample` feeds (mt_sample_prompt) for a prompt, against want[n]. */
static void check_prompt(const char *tokenizer, const char *prompt, mt_sample_bos bos,
                         const int32_t *want, int64_t n) {
    mt_sample_config cfg = {.tokenizer = tokenizer, .prompt = prompt, .bos = bos};
    int32_t *ids = NULL;
    int64_t got = -1;
    MT_CHECK_OK(mt_sample_prompt(&cfg, &ids, &got));
    bool same = got == n;
    for (int64_t i = 0; same && i < n; i++) same = ids[i] == want[i];
    MT_CHECK(same, "prompt '%s' (bos %d): %lld ids, the first %d, want %lld, the first %d",
             prompt ? prompt : "(none)", (int)bos, (long long)got, got > 0 ? ids[0] : -1,
             (long long)n, n > 0 ? want[0] : -1);
    free(ids);
}

/* sample's prompt as run.c feeds it: BOS (1) first, then the text as
 * run.c encodes it (the ids worked out by hand above); --bos off the text
 * alone; no prompt: BOS alone (run.c's empty prompt), or without a BOS a
 * newline. A tokenizer without a BOS (GPT-2's shape) and bytes get none,
 * and asking for one there is refused. */
MT_TEST(sample_feeds_bos_then_the_prompt_as_run_c) {
    char dir[] = "/tmp/mt_test_l2c_XXXXXX", path[64];
    write_llama2c(dir, path, sizeof path);
    check_prompt(path, "ab", MT_SAMPLE_BOS_AUTO, IDS(1, 264));
    check_prompt(path, "ab", MT_SAMPLE_BOS_ON, IDS(1, 264));
    check_prompt(path, "ab", MT_SAMPLE_BOS_OFF, IDS(264));
    /* " a\nb": (" " a) " a"; \n its byte piece 13; b alone */
    check_prompt(path, "a\nb", MT_SAMPLE_BOS_AUTO, IDS(1, 263, 13, 261));
    check_prompt(path, NULL, MT_SAMPLE_BOS_AUTO, IDS(1));
    check_prompt(path, "", MT_SAMPLE_BOS_AUTO, IDS(1));
    check_prompt(path, NULL, MT_SAMPLE_BOS_OFF, IDS(259, 13));   /* " \n" */
    check_prompt(NULL, "ab", MT_SAMPLE_BOS_AUTO, IDS(97, 98));
    check_prompt(NULL, NULL, MT_SAMPLE_BOS_AUTO, IDS(10));
    int32_t *ids = NULL;
    int64_t n = 0;
    mt_sample_config cfg = {.prompt = "ab", .bos = MT_SAMPLE_BOS_ON};
    MT_CHECK_FAILS(mt_sample_prompt(&cfg, &ids, &n), MT_EINVAL, "without a tokenizer", "--bos off");
    tmp t;
    cfg.tokenizer = tmp_file(&t, (tok_json){.skip_byte = -1});
    MT_CHECK_FAILS(mt_sample_prompt(&cfg, &ids, &n), MT_EINVAL, "defines none", "--bos off");
    /* "the cat" as worked out by hand in gpt2_shape_encodes_as_worked_out_by_hand */
    check_prompt(cfg.tokenizer, "the cat", MT_SAMPLE_BOS_AUTO, IDS(116, 257, 263));
    tmp_done(&t);
    unlink(path);
    rmdir(dir);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
