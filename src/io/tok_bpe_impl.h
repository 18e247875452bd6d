/*
 * tok_bpe_impl.h — byte-level BPE, the model behind Hugging Face's
 * tokenizer.json (GPT-2, Llama 3, Qwen2; Llama 2's and Mistral's Metaspace
 * BPE with byte fallback) and OpenAI's tiktoken ranks files (cl100k_base,
 * o200k_base, Llama 3's tokenizer.model): what the files share.
 *
 *   tok_bpe.c          the model: tokens as raw bytes, the merge table, the
 *                      special tokens, encoding (special tokens first, then
 *                      the pre-tokeniser's regex through PCRE2, then merges
 *                      by rank) and decoding (the tokens' bytes)
 *   tok_text.c         the text before it is split: NFC, Metaspace's "▁"
 *                      and the space put before a text
 *   tok_bytemap.c      GPT-2's byte-to-unicode map; SentencePiece's "▁" and
 *                      "<0xAB>" byte pieces
 *   tok_bpe_json.c     reading a tokenizer.json into a model
 *   tok_tiktoken.c     reading a tiktoken ranks file into a model
 *   tok_llama2c.c      reading llama2.c's tokenizer.bin (run.c's encoder:
 *                      characters first, merges by score)
 *
 * Every token is kept as the bytes it stands for, so the encoder works on
 * the text's own bytes and decoding is concatenation: GPT-2's byte-to-
 * unicode map (bytes as printable characters, "Ġ" for a space) is undone
 * when a tokenizer.json is read, and redone only to spell a piece.
 */
#ifndef MT_IO_TOK_BPE_IMPL_H
#define MT_IO_TOK_BPE_IMPL_H

#include "meshtrain/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mt__bpe mt__bpe;

/* The regexes of the pre-tokenisers meshtrain knows by name (tiktoken
 * files carry none). GPT-2's is also tokenizer.json's ByteLevel default. */
extern const char MT__BPE_PAT_GPT2[];
extern const char MT__BPE_PAT_CL100K[];   /* also Llama 3's */
extern const char MT__BPE_PAT_O200K[];

/* A new empty model for the file `path` (named in messages) with room for
 * ids 0..V-1. MT_ENOMEM. */
mt_status mt__bpe_new(const char *path, int V, mt__bpe **out);
void      mt__bpe_free(mt__bpe *m);

/* Sets token `id` to the `n` bytes at s. `special`: an added token, found
 * whole in a text before pre-tokenisation and never merged into. MT_EFORMAT
 * naming `field` when the id is out of range or taken, or (for an ordinary
 * token) the bytes are already another id's. */
mt_status mt__bpe_set(mt__bpe *m, int id, const char *s, size_t n, bool special,
                      const char *field);
/* The id of the ordinary token of those bytes, -1 if none. */
int       mt__bpe_find(const mt__bpe *m, const char *s, size_t n);

/* Adds merge number `rank` (lower merges first): tokens a and b side by
 * side become the token of their bytes together. MT_EFORMAT naming `field`
 * when that token is not in the vocabulary (Hugging Face refuses it too). */
mt_status mt__bpe_merge(mt__bpe *m, int a, int b, int rank, const char *field);

/* Without merges (a tiktoken file) a pair merges into the token of its
 * bytes together, ranked by that token's id. `ignore_merges`: a piece of
 * the pre-tokeniser that is a token itself is that token (tiktoken's rule,
 * and tokenizer.json's model.ignore_merges). */
void      mt__bpe_set_rules(mt__bpe *m, bool ignore_merges);
/* false: special tokens are not looked for in a text (tiktoken's
 * encode_ordinary); their ids come only from the caller (BOS). */
void      mt__bpe_match_specials(mt__bpe *m, bool match);
/* true: the text between special tokens is put in Unicode's NFC before it
 * is split (tokenizer.json's normalizer NFC, Qwen2's), as the library does. */
void      mt__bpe_set_nfc(mt__bpe *m, bool nfc);
/* When a stretch of text between special tokens gets a space before it
 * (SentencePiece's dummy prefix, spelled "▁"). */
enum {
    MT__BPE_PREFIX_NONE,     /* never */
    MT__BPE_PREFIX_EVERY,    /* every stretch that is not empty (a Prepend("▁") normalizer;
                                run.c, whose text is one stretch) */
    MT__BPE_PREFIX_ALWAYS,   /* every one that does not begin with a space (Metaspace's
                                prepend_scheme "always") */
    MT__BPE_PREFIX_FIRST,    /* the same, only the stretch at the text's start
                                (prepend_scheme "first") */
};
/* What is done to a stretch before it is split (mt__bpe_text_prepare). */
typedef struct {
    bool nfc;      /* Unicode's NFC first (tokenizer.json's normalizer NFC, Qwen2's) */
    bool meta;     /* Metaspace BPE: a U+2581 in the text is a space, as the
                      vocabulary's "▁" is kept */
    int  prefix;   /* MT__BPE_PREFIX_* */
} mt__bpe_text;

/* llama2.c's run.c: a piece starts as its characters (a character that
 * is not a token as its bytes' tokens, set with mt__bpe_set_byte), a pair
 * merges into the token of its bytes ranked by rank[that token] (owned by
 * the model now), and a text gets a space before it. */
void      mt__bpe_set_llama2c(mt__bpe *m, int32_t *rank);
void      mt__bpe_set_byte(mt__bpe *m, int b, int id);
/* SentencePiece's BPE as a tokenizer.json has it (Llama 2, Mistral): a
 * piece starts as its characters, a character that is not a token as its
 * byte tokens (mt__bpe_set_byte_token: byte_fallback), merges by rank; the
 * vocabulary's "▁" is a space (set before the vocabulary is read: pieces
 * are spelled with "▁"), a space goes before a stretch by `prefix`
 * (MT__BPE_PREFIX_*), and decoding drops a text's first space when
 * `strip` (the decoder's Strip). */
void      mt__bpe_set_metaspace(mt__bpe *m, int prefix, bool strip);
/* Token id is the byte fallback of byte b, spelled "<0xAB>": never found
 * in a text, never merged into, decoded to the byte. MT_EFORMAT naming
 * `field` when the id is out of range or taken. */
mt_status mt__bpe_set_byte_token(mt__bpe *m, int id, int b, const char *field);
/* Whether decoding drops the space a text begins with (run.c's dummy
 * prefix; a tokenizer.json decoder's Strip). */
bool      mt__bpe_dummy(const mt__bpe *m);
/* "byte-level BPE", "Metaspace BPE" or "llama2.c BPE". */
const char *mt__bpe_kind(const mt__bpe *m);

/* A stretch s[0..n) of text as the pipeline `how` gives it to the
 * pre-tokeniser (tok_text.c); `first`: it begins the text. *out is a new
 * buffer of *out_n bytes (free() it), NULL when the text is used as it is
 * (*out_n then n). MT_ENOMEM. */
mt_status mt__bpe_text_prepare(const char *s, size_t n, const mt__bpe_text *how, bool first,
                               char **out, size_t *out_n);

/* Compiles the pre-tokeniser's regex (PCRE2, UTF-8 with Unicode
 * properties; NULL: no split, the whole text between special tokens is one
 * piece); `literal` takes it as a plain string. MT_EFORMAT with PCRE2's
 * message and offset, naming `field`. */
mt_status mt__bpe_set_pattern(mt__bpe *m, const char *pattern, bool literal, const char *field);

/* The id a text begins with when the tokenizer's own library adds special
 * tokens, and the end-of-text id (-1: none). */
void      mt__bpe_set_specials(mt__bpe *m, int bos, int eos);

/* Checks the model is whole: every id 0..V-1 has bytes (unless `holes`:
 * tiktoken's encodings leave ids unused, which decode to nothing and are
 * refused by decoding), every single byte is a token (byte-level BPE
 * encodes any text). MT_EFORMAT naming the first id or byte missing. */
mt_status mt__bpe_finish(mt__bpe *m, bool holes);

int         mt__bpe_vocab(const mt__bpe *m);
int         mt__bpe_bos(const mt__bpe *m);
int         mt__bpe_eos(const mt__bpe *m);
/* Token id's spelling: its bytes through GPT-2's byte-to-unicode map, or
 * a special token's text; NULL outside [0, V). */
const char *mt__bpe_piece(const mt__bpe *m, int id);

/* Encodes text[0..len) (any bytes: what is not UTF-8 becomes byte tokens)
 * into a new array *ids (free() it) of *n ids; special tokens in the text
 * are their ids, no BOS is added. MT_ENOMEM, MT_EINTERNAL (a PCRE2 error). */
mt_status mt__bpe_encode(const mt__bpe *m, const char *text, size_t len, int32_t **ids,
                         int64_t *n);

/* The bytes of token id into *s, *n; false outside [0, V) or for an unused id. */
bool        mt__bpe_bytes(const mt__bpe *m, int id, const char **s, size_t *n);

/* GPT-2's byte-to-unicode map (tok_bytemap.c): the code point byte b is
 * spelled with. */
uint32_t    mt__bpe_byte_char(int b);
/* The bytes s[0..n) spelled through the map, into a new string (free() it);
 * NULL when out of memory. */
char       *mt__bpe_spell(const char *s, size_t n);
/* Undoes it: the n bytes of spelling s (UTF-8) into out (room for n
 * bytes); false when a character is not one of the 256 of the map. */
bool        mt__bpe_unspell(const char *s, size_t n, char *out, size_t *out_n);
/* SentencePiece's spelling: each "▁" of s[0..n) a space into out (room for
 * n bytes), the bytes written returned; and back, each space "▁", into a
 * new string (free() it; NULL when out of memory). */
size_t      mt__bpe_unspell_meta(const char *s, size_t n, char *out);
char       *mt__bpe_spell_meta(const char *s, size_t n);
/* The byte a byte piece "<0xAB>" (s[0..n)) stands for, -1 for another piece. */
int         mt__bpe_byte_piece(const char *s, size_t n);

/* Reads a tokenizer.json (tok_bpe_json.c) or a tiktoken ranks file
 * (tok_tiktoken.c) from its text[len]. MT_EFORMAT naming the field or line
 * that is wrong or not supported; MT_ENOMEM. */
mt_status mt__bpe_read_json(const char *path, const char *text, size_t len, mt__bpe **out);
mt_status mt__bpe_read_tiktoken(const char *path, const char *text, size_t len, mt__bpe **out);
/* Reads llama2.c's tokenizer.bin (tok_llama2c.c); whether text is one:
 * records that end exactly at the end of the file. */
mt_status mt__bpe_read_llama2c(const char *path, const char *text, size_t len, mt__bpe **out);
bool      mt__bpe_is_llama2c(const char *text, size_t len);
/* Whether text looks like a tiktoken ranks file: a first line "BASE64 RANK". */
bool      mt__bpe_is_tiktoken(const char *text, size_t len);

#endif /* MT_IO_TOK_BPE_IMPL_H */
