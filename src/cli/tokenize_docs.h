/*
 * tokenize_docs.h — the ids `meshtrain tokenize` writes for a text
 * (tokenize_docs.c): the text whole, or its documents (--doc-sep: blank
 * lines separate them) joined by the end-of-text id, with the tokenizer's
 * beginning-of-sequence id before the text or before every document (--bos).
 */
#ifndef MT_CLI_TOKENIZE_DOCS_H
#define MT_CLI_TOKENIZE_DOCS_H

#include "meshtrain.h"
#include "meshtrain/tokenizer.h"

#include <stdbool.h>
#include <stdint.h>

/* Whether tok can separate documents (--doc-sep): SentencePiece needs its
 * newline byte piece <0x0A> and </s>, the others an end-of-text id
 * (mt_tokenizer_eos). MT_EINVAL naming `path`, its kind and what it lacks. */
mt_status cli_docs_check(const mt_tokenizer *tok, const char *path);

/* The ids of the text file `path` through tok into a new *ids (free() it)
 * of *n. Without doc_sep the text is encoded whole, the BOS first (bos).
 * With doc_sep a document ends at a line's newline that an empty line
 * follows; the run of empty lines becomes the end-of-text id, the
 * document keeping its own last newline, and with bos each document
 * begins with the BOS (llama2.c's data preparation puts BOS = 1 before
 * every story). A tokenizer that encodes in this process encodes each
 * document as a text of its own (each gets its dummy prefix, as each of
 * llama2.c's stories does); SentencePiece's spm_encode encodes the text
 * whole and the separators are found in its ids (tokenize's models have
 * no dummy prefix: the same ids). Fails as mt_tokenizer_encode_file and
 * mt_tokenizer_encode do, or with cli_docs_check's MT_EINVAL; MT_ENOMEM. */
mt_status cli_docs_encode(const mt_tokenizer *tok, const char *path, bool doc_sep, bool bos,
                          int32_t **ids, int64_t *n);

#endif /* MT_CLI_TOKENIZE_DOCS_H */
