/*
 * tokenizer_impl.h — what the tokenizer's files share: the model as read
 * from its file (tokenizer.c; a byte-level BPE is tok_bpe_impl.h's), the
 * newline and byte ids the encoder joins lines with (tokenizer_spm.c runs the SentencePiece tools), and the bytes
 * of a text spm_encode must not see (tokenizer_raw.c).
 */
#ifndef MT_IO_TOKENIZER_IMPL_H
#define MT_IO_TOKENIZER_IMPL_H

#include "io/tok_bpe_impl.h"
#include "meshtrain/tokenizer.h"

#include <stdio.h>

/* SentencePiece's piece types (sentencepiece_model.proto). */
enum {
    MT__SPM_NORMAL = 1, MT__SPM_UNKNOWN = 2, MT__SPM_CONTROL = 3, MT__SPM_USER_DEFINED = 4,
    MT__SPM_UNUSED = 5, MT__SPM_BYTE = 6
};

struct mt_tokenizer {
    char    *path;          /* the model file */
    int      V;             /* pieces */
    mt__bpe *bpe;           /* a byte-level BPE (tokenizer.json, tiktoken), NULL for
                               SentencePiece, whose fields follow */
    char   **piece;         /* (V) each piece as spelled, NUL-terminated, in `arena` */
    char   **text;          /* (V) the bytes each piece decodes to, in `arena` */
    int     *text_len;      /* (V) */
    float   *score;         /* (V) */
    uint8_t *type;          /* (V) MT__SPM_* */
    char    *arena;         /* every piece and text */
    bool     strip_space;   /* the model adds a dummy space before a text, or folds
                               whitespace: decoding drops a text's leading space */
    bool     dummy_prefix;  /* the model adds a dummy space before a text (Llama 2's) */
    int      newline;       /* the id that decodes to "\n", -1 if none */
    int      byte_id[256];  /* the byte piece "<0xAB>" of each byte, -1 if none */
};

/* A run of raw bytes: text bytes spm_encode would not give back (not
 * well-formed UTF-8, or a literal U+2581), encoded as byte pieces. */
typedef struct {
    int64_t line;    /* the line of spm_encode's text the run ends (it gets a newline there) */
    int64_t first;   /* its bytes: mt__raw_text.bytes[first .. first + len) */
    int64_t len;
} mt__raw_run;

typedef struct {
    mt__raw_run *run;        /* (n_run) in text order */
    int64_t      n_run, cap_run;
    uint8_t     *bytes;      /* (n_bytes) every run's bytes */
    int64_t      n_bytes, cap_bytes;
    bool         ends_in_newline;   /* spm_encode's text ends in '\n' (or is empty) */
} mt__raw_text;

/* Reads the text of fd (from offset 0, with pread: the offset is left as
 * it is) and finds its runs of raw bytes into *r; when out is not NULL,
 * writes it there as spm_encode must get it: each run replaced by one
 * '\n'. Fails with MT_EFORMAT when a raw byte has no byte piece in tok
 * (naming it and its offset), MT_EIO, MT_ENOMEM. *r is emptied first and
 * freed with mt__raw_free. */
mt_status mt__raw_scan(const mt_tokenizer *tok, int fd, FILE *out, mt__raw_text *r);
void      mt__raw_free(mt__raw_text *r);

/* Writes a copy of SentencePiece model tok with NormalizerSpec's
 * add_dummy_prefix false into a new temporary file (in $TMPDIR), its path
 * into path[n]; the caller unlinks it. spm_encode encodes a text line by
 * line, each line as a text of its own with a dummy space before it; with
 * this copy, the lines after the first are encoded as the rest of one
 * text, as SentencePiece encodes a whole text (its BPE merges nothing
 * across a newline, which no piece holds). MT_EIO, MT_EINVAL, MT_ENOMEM. */
mt_status mt__spm_without_dummy(const mt_tokenizer *tok, char *path, size_t n);

/* What the text of fd (read from offset 0 with pread) gives spm_train:
 * *chars, its distinct characters (each byte that is not well-formed UTF-8
 * counted as spm_train reads it, U+FFFD; a newline ends a sentence and is
 * none), and *pairs, whether two characters side by side in a line could
 * be merged into a piece (an over-estimate: tokenizer_raw.c says which
 * rules it checks). Without pairs a BPE model has no piece past its
 * characters. MT_EIO, MT_ENOMEM. */
mt_status mt__text_stats(int fd, int64_t *chars, bool *pairs);

/* Appends id to the growing array *v of *n ids (room for *cap), doubling
 * it when full; false when out of memory (*v unchanged). The encoders'
 * one way to grow their ids (tok_ids.c). */
bool mt__ids_append(int32_t **v, int64_t *n, int64_t *cap, int32_t id);

#endif /* MT_IO_TOKENIZER_IMPL_H */
