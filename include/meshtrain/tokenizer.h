/*
 * meshtrain/tokenizer.h — subword tokenizers (io layer): SentencePiece BPE
 * models, trained on a text corpus, and the BPE tokenizers people already
 * have (Hugging Face's tokenizer.json: byte-level GPT-2, Llama 3, Qwen2,
 * Metaspace Llama 2, Mistral; tiktoken ranks files: cl100k_base,
 * o200k_base, Llama 3's tokenizer.model) and llama2.c's tokenizer.bin,
 * encoding text into token ids and decoding ids back into text.
 * mt_tokenizer_open tells the kinds apart by the file's bytes.
 *
 * Byte-level BPE runs in this process (src/io/tok_bpe.c): added (special)
 * tokens found whole in the text, the pre-tokeniser's regex through PCRE2
 * (Unicode properties), merges by rank; a text is encoded whole, any bytes
 * at all (what is not UTF-8 never matches the regex and becomes byte
 * tokens), and decoding is the tokens' bytes, so it round-trips. A
 * tokenizer.json field that would change the ids and is not supported (a
 * normalizer other than NFC, another model type, add_prefix_space, a
 * template token after the text, ...) is refused, naming the field. A
 * Metaspace tokenizer.json (Llama 2's, Mistral's: SentencePiece's BPE as
 * transformers writes it) encodes here too: a space put before each
 * stretch between special tokens as its normalizer or pre-tokeniser says,
 * spaces as "▁", characters merged by rank, a character outside the
 * vocabulary as its bytes' pieces "<0xAB>" (byte_fallback); decoding is
 * the pieces' text and bytes, the decoder's Strip dropping a text's first
 * space (a literal U+2581 in a text reads as a space, as in the library). A
 * tokenizer.bin encodes in this process too, as llama2.c's run.c does (a
 * space before the text, then characters merged by score; decoding drops
 * that space). The SentencePiece part:
 *
 * Training and encoding run Debian's SentencePiece command-line tools
 * (package `sentencepiece`: spm_train, spm_encode) as child processes,
 * started without a shell; decoding, the vocabulary and the pieces are read
 * by meshtrain itself from the model file (a protocol buffer, ModelProto of
 * sentencepiece_model.proto), so sampling needs no tool. A model is one
 * file, "<prefix>.model"; training also writes "<prefix>.vocab" (one
 * "piece TAB score" line per id, for people).
 *
 * The models mt_tokenizer_train makes are lossless: byte fallback on (a
 * character outside the vocabulary becomes its UTF-8 bytes, pieces
 * "<0x00>".."<0xFF>"), the identity normalisation, no dummy space before a
 * text and no whitespace folding. A space is U+2581 "▁" inside pieces. The
 * encoder keeps what spm_encode would change away from it (a byte that is
 * not well-formed UTF-8 would become U+FFFD, a literal "▁" a space) and
 * writes those bytes as byte pieces, so decode(encode(text)) is the text's
 * bytes for any bytes at all: Latin-1, binary, NULs, a character cut off.
 *
 * spm_encode encodes a text line by line: the encoder here joins the lines'
 * ids with the id of the newline piece (byte fallback's "<0x0A>"), so a
 * text's newlines are tokens like any other character, and gives the ids
 * of SentencePiece's whole-text encoding (its library's encode, llama2.c's
 * run.c): a model with a dummy prefix (Llama 2's) puts its "▁" before the
 * text only, not before every line (tokenizer_spm.c says how).
 *
 * Normalisation: byte-level BPE applies a tokenizer.json's NFC (Qwen2's)
 * through libunistring, so only NFC text round-trips there; the others use
 * the text as it is.
 */
#ifndef MESHTRAIN_TOKENIZER_H
#define MESHTRAIN_TOKENIZER_H

#include "meshtrain/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The largest vocabulary whose ids an llm.c uint16 token file holds, and
 * the most pieces mt_tokenizer_train trains (its files stay the GPT-2 kind
 * llm.c's own code reads); a tokenizer of more pieces made elsewhere
 * encodes to llm.c's uint32 (Llama 3) token files (mt_tokens_write). */
#define MT_TOKENIZER_MAX_VOCAB 65536
/* The smallest vocabulary of a byte-fallback model: <unk>, <s>, </s> and
 * the 256 byte pieces; a text's characters each add one more. */
#define MT_TOKENIZER_MIN_VOCAB 259

/* The tools a tokenizer needs, and where Debian has them. */
#define MT_SPM_TRAIN "spm_train"
#define MT_SPM_ENCODE "spm_encode"
#define MT_SPM_PACKAGE "sentencepiece"

typedef struct mt_tokenizer mt_tokenizer;

/* Checks that the SentencePiece tool `tool` (MT_SPM_TRAIN, MT_SPM_ENCODE) is
 * an executable file in a directory of $PATH, and writes its path into
 * path[n] when path is not NULL. MT_EIO when it is not there (the message
 * names the tool, $PATH and the package to install: the machine lacks it,
 * the command line is not wrong); MT_EINVAL when the path does not fit in
 * n bytes. */
mt_status mt_tokenizer_find_tool(const char *tool, char *path, size_t n);

/* Checks that what the tokenizer's encoder runs is there: spm_encode for a
 * SentencePiece model (as mt_tokenizer_find_tool), nothing for byte-level
 * BPE, which encodes in this process. */
mt_status mt_tokenizer_check_tools(const mt_tokenizer *tok);

/* Trains a BPE SentencePiece model of exactly `vocab` pieces on the text
 * file `text_path` (each line a sentence) and writes "<prefix>.model" and
 * "<prefix>.vocab". Both outputs are claimed before spm_train starts and
 * written through their temporary files (meshtrain/files.h): a failure
 * leaves the previous files whole. spm_train runs with `threads` threads
 * (0: the cores online), its log kept in a temporary file. Fails with
 * MT_EINVAL (vocab outside [MT_TOKENIZER_MIN_VOCAB, MT_TOKENIZER_MAX_VOCAB];
 * a text too small for it, with no two characters BPE could merge, so no
 * piece past its characters: "the text is too small", with its size and
 * the most pieces it gives; a NULL argument, a prefix with no room for its
 * suffixes), MT_EIO (spm_train not found; the text is missing, empty or
 * not a regular file; an output cannot be claimed or written), MT_EBUSY
 * (another run writes an output) or MT_EFORMAT (spm_train refused the
 * corpus: its own reason, e.g. a vocabulary too small for the corpus's
 * characters or too large for its words, which says the bound; or it
 * crashed, as it does on a text too small for the vocabulary: "the text is
 * too small"). */
mt_status mt_tokenizer_train(const char *text_path, int vocab, const char *prefix, int threads);

/* Opens the tokenizer file `model_path`, of the kind its bytes say: a JSON
 * object is a Hugging Face tokenizer.json (byte-level or Metaspace BPE), lines "BASE64
 * RANK" a tiktoken ranks file (its encoding known by its number of ranks:
 * r50k_base, cl100k_base, o200k_base, Llama 3), anything else a
 * SentencePiece model ("<prefix>.model": its pieces, scores, types and
 * normaliser flags). *out is freed with mt_tokenizer_free. Fails with
 * MT_EIO (missing, not a regular file: the system's message), MT_EFORMAT
 * (not a tokenizer, or a field meshtrain does not support: says which and
 * where) or MT_ENOMEM. Any model opens, also one trained elsewhere. */
mt_status mt_tokenizer_open(const char *model_path, mt_tokenizer **out);
void      mt_tokenizer_free(mt_tokenizer *tok);

/* The number of pieces V; ids are 0..V-1. */
int         mt_tokenizer_vocab(const mt_tokenizer *tok);
/* The path the tokenizer was opened from. */
const char *mt_tokenizer_path(const mt_tokenizer *tok);
/* Piece `id` as the model spells it (UTF-8; SentencePiece: "▁" for a
 * space, "<0x0A>" for a byte; byte-level BPE: GPT-2's byte-to-unicode map,
 * "Ġ" for a space, a special token as written, "" for an id no token has;
 * Metaspace BPE: "▁" for a space, "<0x0A>" for a byte, as the file does),
 * and its score into *score when score is not NULL (0 for byte-level BPE,
 * whose order is its merges'); NULL for an id outside [0, V). Valid as
 * long as the tokenizer. */
const char *mt_tokenizer_piece(const mt_tokenizer *tok, int id, float *score);
/* "SentencePiece", "byte-level BPE", "Metaspace BPE" or "llama2.c BPE":
 * for messages and reports. */
const char *mt_tokenizer_kind(const mt_tokenizer *tok);
/* The id a text begins with for the model, as the tokenizer's own library
 * (or the model's reference code) prepends it: a SentencePiece model's <s>
 * (llama2.c's run.c and Llama 2 prepend it), a tokenizer.json's
 * post_processor TemplateProcessing token before the text (Llama 3's
 * <|begin_of_text|>), Llama 3's tiktoken <|begin_of_text|>; -1 when the
 * library adds none (GPT-2, cl100k_base, o200k_base). The encoders below
 * never add it: the caller prepends it to each document. */
int         mt_tokenizer_bos(const mt_tokenizer *tok);
/* The end-of-text id (SentencePiece's </s>; a tokenizer.json's added token
 * <|end_of_text|>, <|endoftext|>, </s> or <|im_end|>, the first found;
 * tiktoken's <|endoftext|>, Llama 3's <|end_of_text|>), -1 when none. */
int         mt_tokenizer_eos(const mt_tokenizer *tok);

/* Encodes the text file `text_path` (opened as every input: a regular file,
 * never blocking) into a new array *ids (free() it) of *n ids, no BOS added
 * (mt_tokenizer_bos). Byte-level BPE encodes the whole text in this
 * process, special tokens written in the text as their ids (tiktoken
 * files: as text, as tiktoken's encode_ordinary); its failures are
 * MT_EIO (the file) and MT_ENOMEM. SentencePiece runs spm_encode: the
 * lines' ids joined by the newline's id; the bytes spm_encode
 * would not give back (not well-formed UTF-8, a literal U+2581) are byte
 * pieces, so decoding the ids gives every byte of the file. Fails with
 * MT_EIO (the file; spm_encode not found), MT_EFORMAT (the model has no
 * piece for a newline, or none for a byte that needs one: a model trained
 * without byte fallback; spm_encode failed, with its message) or
 * MT_ENOMEM. */
mt_status mt_tokenizer_encode_file(const mt_tokenizer *tok, const char *text_path, int32_t **ids,
                                   int64_t *n);
/* The same for the `len` bytes of `text` (a prompt). */
mt_status mt_tokenizer_encode(const mt_tokenizer *tok, const char *text, size_t len,
                              int32_t **ids, int64_t *n);

/* Decodes ids[0..n) into buf (cap bytes), NUL-terminated, its length
 * (without the NUL) into *len when len is not NULL. Byte-level BPE: the
 * tokens' bytes one after another (a special token its text), so
 * decode(encode(text)) is the text's bytes; an id no token has is refused
 * as one outside the vocabulary. SentencePiece decodes: "▁" becomes a space, a byte piece its byte, a control piece
 * (<s>, </s>) nothing, the unknown piece " ⁇ ". `at_start`: the ids begin a
 * text, so a model that adds a dummy space before a text (not those
 * mt_tokenizer_train makes) drops it from the first piece; false for ids
 * that continue a text (a sample after its prompt). Byte pieces are written
 * as they are, so a sample cut inside a character still streams byte by
 * byte. Fails with MT_EINVAL for an id outside [0, V) (naming it and its
 * position) or when the text needs more than cap bytes (*len then says
 * how many). */
mt_status mt_tokenizer_decode(const mt_tokenizer *tok, const int32_t *ids, int64_t n,
                              bool at_start, char *buf, size_t cap, size_t *len);

/* Checks that the tokenizer's ids fit an llm.c token file: uint16 up to
 * MT_TOKENIZER_MAX_VOCAB pieces, uint32 past it (llm.c's Llama 3 files), to
 * INT32_MAX. MT_EFORMAT naming the model and its size otherwise. */
mt_status mt_tokenizer_check_vocab(const mt_tokenizer *tok);

/* Checks mt_tokenizer_check_vocab, then that `tokens_path` is an llm.c token
 * file (not text, which would train on bytes) whose every id is below the
 * tokenizer's vocabulary; *n_tokens (may be NULL) gets its token count.
 * Fails with MT_EFORMAT naming the largest id and both files, or as the
 * token file's reader does (MT_EIO, MT_EFORMAT: truncated, a bad header). */
mt_status mt_tokenizer_check_tokens(const mt_tokenizer *tok, const char *tokens_path,
                                    int64_t *n_tokens);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_TOKENIZER_H */
