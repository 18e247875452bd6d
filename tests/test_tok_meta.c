/*
 * test_tok_meta.c — Metaspace BPE read from Hugging Face's tokenizer.json
 * (Llama 2's and Mistral's shape: SentencePiece's BPE with byte fallback,
 * meshtrain/tokenizer.h), on small files written here.
 *
 * Every file has <unk> <s> </s> at ids 0..2, the byte pieces <0x00>..<0xFF>
 * at 3 + byte, then the pieces below and their merges; the ids each text
 * encodes to are worked out by hand in the comments beside them (the space
 * before the text, spaces as "▁", then the characters, a character outside
 * the vocabulary as its bytes' pieces, merged lowest rank first, the
 * leftmost of equal ranks). The comparison with Hugging Face's own library
 * is tests/test_tokenizer_bpe.sh's.
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

#define U "\xE2\x96\x81"   /* "▁", the space */

/* 259 ▁, 260 a, 261 b, 262 ab, 263 ▁a, 264 ▁ab, 265 ▁▁, 266 é, 267 aa; merges
 * in this order, ranks 0..4: (a b) (▁ a) (▁ ab) (▁ ▁) (a a) */
#define VOCAB "\"" U "\": 259, \"a\": 260, \"b\": 261, \"ab\": 262, \"" U "a\": 263, " \
              "\"" U "ab\": 264, \"" U U "\": 265, \"\xC3\xA9\": 266, \"aa\": 267"
static const char MERGES[] = "\"a b\", \"" U " a\", \"" U " ab\", \"" U " " U "\", \"a a\"";

/* Llama 2's pipeline: a normalizer puts "▁" before a text and for its spaces */
static const char NORM_LLAMA2[] =
    "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": \"" U "\"}, "
    "{\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"" U "\"}]}";
static const char DECODER[] =
    "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
    "\"" U "\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, "
    "{\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]}";
static const char POST[] =
    "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", "
    "\"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"special_tokens\": "
    "{\"<s>\": {\"id\": \"<s>\", \"ids\": [1], \"tokens\": [\"<s>\"]}}}";

/* The file's parts; NULL: Llama 2's above. */
typedef struct {
    const char *normalizer, *pre, *decoder;
    const char *fallback;   /* model.byte_fallback's value ("true") */
    const char *vocab;      /* the pieces after the bytes */
    const char *merges;     /* the merges array's members */
    int         skip_byte;  /* a byte piece left out, -1 none */
} meta_json;

static const char *write_json(tmp *t, meta_json j) {
    FILE *f = fopen(tmp_path(t), "w");
    MT_CHECK(f, "writing %s", t->path);
    fprintf(f, "{\"version\": \"1.0\", \"added_tokens\": [");
    const char *special[] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++)
        fprintf(f, "%s{\"id\": %d, \"content\": \"%s\", \"single_word\": false, \"lstrip\": "
                "false, \"rstrip\": false, \"normalized\": false, \"special\": true}",
                i ? ", " : "", i, special[i]);
    fprintf(f, "],\n\"normalizer\": %s, \"pre_tokenizer\": %s, \"post_processor\": %s, "
            "\"decoder\": %s,\n", j.normalizer ? j.normalizer : NORM_LLAMA2,
            j.pre ? j.pre : "null", POST, j.decoder ? j.decoder : DECODER);
    fprintf(f, "\"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": \"<unk>\", "
            "\"fuse_unk\": true, \"byte_fallback\": %s, \"vocab\": {\"<unk>\": 0, \"<s>\": 1, "
            "\"</s>\": 2, ", j.fallback ? j.fallback : "true");
    for (int b = 0; b < 256; b++)
        if (b != j.skip_byte) fprintf(f, "\"<0x%02X>\": %d, ", b, 3 + b);
    fprintf(f, "%s}, \"merges\": [%s]}}\n", j.vocab ? j.vocab : VOCAB, j.merges ? j.merges : MERGES);
    MT_CHECK(fclose(f) == 0, "closing %s", t->path);
    return t->path;
}

static mt_tokenizer *open_meta(tmp *t, meta_json j) {
    mt_tokenizer *tok = NULL;
    MT_CHECK_OK(mt_tokenizer_open(write_json(t, j), &tok));
    return tok;
}


/* ------------------------------------------------------------------------ */
/* Cases                                                                     */
/* ------------------------------------------------------------------------ */

/* Llama 2's tokenizer.json: Prepend("▁") and Replace(" ", "▁") normalise each
 * stretch between special tokens; the decoder drops the first space. */
MT_TEST(llama2_shape_encodes_as_worked_out_by_hand) {
    tmp t;
    mt_tokenizer *tok = open_meta(&t, (meta_json){.skip_byte = -1});
    MT_CHECK(strcmp(mt_tokenizer_kind(tok), "Metaspace BPE") == 0, "kind %s", mt_tokenizer_kind(tok));
    MT_CHECK(mt_tokenizer_vocab(tok) == 268, "vocab %d, want 268", mt_tokenizer_vocab(tok));
    MT_CHECK(mt_tokenizer_bos(tok) == 1 && mt_tokenizer_eos(tok) == 2, "BOS %d EOS %d",
             mt_tokenizer_bos(tok), mt_tokenizer_eos(tok));
    MT_CHECK(strcmp(mt_tokenizer_piece(tok, 264, NULL), U "ab") == 0, "264 is ▁ab");
    MT_CHECK(strcmp(mt_tokenizer_piece(tok, 3 + 'x', NULL), "<0x78>") == 0, "the byte piece of x");
    /* "▁ab": ▁ a b; (a b) rank 0 before (▁ a) 1 -> ▁ [ab]; (▁ ab) 2 -> [▁ab] */
    check_ids(tok, TEXT("ab"), IDS(264));
    /* "▁ba": no pair merges */
    check_ids(tok, TEXT("ba"), IDS(259, 261, 260));
    /* "▁a▁▁b": (▁ a) 1 at 0, (▁ ▁) 3 at 2 -> [▁a][▁▁][b] */
    check_ids(tok, TEXT("a  b"), IDS(263, 265, 261));
    /* " ab" -> "▁▁ab": (a b) 0, then (▁ ab) 2 before (▁ ▁) 3 -> [▁][▁ab]; the decoder
     * strips one space of the two */
    check_ids(tok, TEXT(" ab"), IDS(259, 264));
    /* "▁aaa": (▁ a) 1 at 0, then (a a) 4 -> [▁a][aa] */
    check_ids(tok, TEXT("aaa"), IDS(263, 267));
    /* x is no piece: its byte piece 3 + 0x78; é is one; ü (C3 BC) is not: two byte pieces */
    check_ids(tok, TEXT("x"), IDS(259, 123));
    check_ids(tok, TEXT("\xC3\xA9"), IDS(259, 266));
    check_ids(tok, TEXT("\xC3\xBC"), IDS(259, 198, 191));
    /* "▁a\nb": the newline is its byte piece 3 + 0x0A */
    check_ids(tok, TEXT("a\nb"), IDS(263, 13, 261));
    /* special tokens are found first; each stretch after one gets its own "▁" */
    check_ids_back(tok, TEXT("<s>ab</s>ab"), IDS(1, 264, 2, 264), "<s> ab</s> ab");
    /* a literal "▁" is a space to the library too: "▁a▁b" */
    check_ids_back(tok, TEXT("a" U "b"), IDS(263, 259, 261), "a b");
    /* a byte that is not UTF-8 is its byte piece */
    check_ids(tok, TEXT("\xFF"), IDS(259, 258));
    check_ids(tok, TEXT(""), (const int32_t[]){0}, 0);
    /* inside a text (a sample after its prompt) the space stays */
    char buf[16];
    size_t n = 0;
    MT_CHECK_OK(mt_tokenizer_decode(tok, (const int32_t[]){264, 198, 191}, 3, false, buf,
                                    sizeof buf, &n));
    MT_CHECK(n == 5 && memcmp(buf, " ab\xC3\xBC", 5) == 0, "decodes to '%s' inside a text", buf);
    mt_tokenizer_free(tok);
    tmp_done(&t);
}

/* The newer shape: no normalizer, a Metaspace pre-tokeniser whose
 * prepend_scheme says which stretches get the "▁". */
MT_TEST(metaspace_pre_tokenizer_prepend_schemes) {
    static const char dec_nostrip[] =
        "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
        "\"" U "\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}]}";
    char pre[256];
    const char *schemes[] = {"first", "always", "never"};
    for (int k = 0; k < 3; k++) {
        snprintf(pre, sizeof pre, "{\"type\": \"Metaspace\", \"replacement\": \"" U "\", "
                 "\"prepend_scheme\": \"%s\", \"split\": false}", schemes[k]);
        tmp t;
        mt_tokenizer *tok = open_meta(&t, (meta_json){.skip_byte = -1, .normalizer = "null",
                                                      .pre = pre, .decoder = k == 2 ? dec_nostrip : NULL});
        if (k < 2) {
            check_ids(tok, TEXT("ab"), IDS(264));
            /* a text that begins with a space gets no second one: "▁ab"; decoded, the
             * space is dropped as the library's decoder drops it */
            check_ids_back(tok, TEXT(" ab"), IDS(264), "ab");
        } else {
            check_ids(tok, TEXT("ab"), IDS(262));   /* "ab": (a b) */
            check_ids(tok, TEXT("a b"), IDS(260, 259, 261));   /* a ▁ b */
        }
        /* after a special token: "first" puts no "▁" (the stretch is not the text's
         * start), "always" does */
        if (k == 0) check_ids(tok, TEXT("<s>ab"), IDS(1, 262));
        if (k == 1) check_ids_back(tok, TEXT("<s>ab"), IDS(1, 264), "<s> ab");
        mt_tokenizer_free(tok);
        tmp_done(&t);
    }
}

/* sample prompts as encode(text, add_special_tokens=True) does: the
 * post-processor's <s> (1), then the text's ids ("▁ab" as above). */
MT_TEST(sample_puts_the_template_bos_first) {
    tmp t;
    mt_sample_config cfg = {.tokenizer = write_json(&t, (meta_json){.skip_byte = -1}),
                            .prompt = "ab"};
    int32_t *ids = NULL;
    int64_t n = 0;
    MT_CHECK_OK(mt_sample_prompt(&cfg, &ids, &n));
    MT_CHECK(n == 2 && ids[0] == 1 && ids[1] == 264, "%lld ids, %d %d: want 1 264", (long long)n,
             n > 0 ? ids[0] : -1, n > 1 ? ids[1] : -1);
    free(ids);
    cfg.bos = MT_SAMPLE_BOS_OFF;
    MT_CHECK_OK(mt_sample_prompt(&cfg, &ids, &n));
    MT_CHECK(n == 1 && ids[0] == 264, "--bos off: %lld ids, the first %d", (long long)n, ids[0]);
    free(ids);
    tmp_done(&t);
}

/* What meshtrain does not do is refused, naming the field. */
MT_TEST(unsupported_metaspace_files_are_refused) {
    static const char split_true[] =
        "{\"type\": \"Metaspace\", \"replacement\": \"" U "\", \"prepend_scheme\": \"first\", "
        "\"split\": true}";
    static const char split_missing[] =
        "{\"type\": \"Metaspace\", \"replacement\": \"" U "\", \"add_prefix_space\": true}";
    static const char scheme_bad[] =
        "{\"type\": \"Metaspace\", \"replacement\": \"" U "\", \"prepend_scheme\": \"twice\", "
        "\"split\": false}";
    struct { meta_json j; const char *want1, *want2; } cases[] = {
        {{.skip_byte = -1, .fallback = "false"}, "model.byte_fallback", "<unk>"},
        {{.skip_byte = -1, .normalizer = "null", .pre = split_true}, "pre_tokenizer.split", "true"},
        {{.skip_byte = -1, .normalizer = "null", .pre = split_missing}, "pre_tokenizer.split",
         "missing"},
        {{.skip_byte = -1, .normalizer = "null", .pre = scheme_bad}, "prepend_scheme", "twice"},
        {{.skip_byte = -1, .pre = split_true}, "pre_tokenizer is Metaspace", "null after"},
        {{.skip_byte = -1, .normalizer = "{\"type\": \"NFKC\"}"}, "normalizer is NFKC", "Prepend"},
        {{.skip_byte = -1, .decoder = "{\"type\": \"Metaspace\", \"replacement\": \"" U "\"}"},
         "decoder is Metaspace", "ByteFallback"},
        {{.skip_byte = -1, .normalizer = "null", .pre = "null"}, "pre_tokenizer is null",
         "Metaspace"},
        {{.skip_byte = 0x41, .vocab = "\"q\": 68, " VOCAB}, "no byte piece <0x41>", "byte_fallback"},
        {{.skip_byte = -1, .merges = "\"a c\""}, "model.merges[0]", "not in model.vocab"},
        {{.skip_byte = -1, .merges = "\"<0x0A> a\""}, "model.merges[0]", "a byte piece"},
        {{.skip_byte = -1, .vocab = "\"a\": 259, \"b\": 260, \"ab\": 261", .merges = "\"a b\""},
         "no token \"" U "\"", "(the space)"},
        {{.skip_byte = -1, .vocab = "\"zz\": 68", .merges = ""}, "id 68", "already '<0x41>'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tmp t;
        write_json(&t, cases[i].j);
        check_refused(&t, cases[i].want1, cases[i].want2);
    }
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
