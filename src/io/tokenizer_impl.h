/*
 * tokenizer_impl.h — what the tokenizer's two files share: the model as
 * read from its file (tokenizer.c) and the newline id the encoder joins
 * lines with (tokenizer_spm.c runs the SentencePiece tools).
 */
#ifndef MT_IO_TOKENIZER_IMPL_H
#define MT_IO_TOKENIZER_IMPL_H

#include "meshtrain/tokenizer.h"

/* SentencePiece's piece types (sentencepiece_model.proto). */
enum {
    MT__SPM_NORMAL = 1, MT__SPM_UNKNOWN = 2, MT__SPM_CONTROL = 3, MT__SPM_USER_DEFINED = 4,
    MT__SPM_UNUSED = 5, MT__SPM_BYTE = 6
};

struct mt_tokenizer {
    char    *path;          /* the model file */
    int      V;             /* pieces */
    char   **piece;         /* (V) each piece as spelled, NUL-terminated, in `arena` */
    char   **text;          /* (V) the bytes each piece decodes to, in `arena` */
    int     *text_len;      /* (V) */
    float   *score;         /* (V) */
    uint8_t *type;          /* (V) MT__SPM_* */
    char    *arena;         /* every piece and text */
    bool     strip_space;   /* the model adds a dummy space before a text, or folds
                               whitespace: decoding drops a text's leading space */
    int      newline;       /* the id that decodes to "\n", -1 if none */
};

#endif /* MT_IO_TOKENIZER_IMPL_H */
