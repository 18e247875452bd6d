/*
 * meshtrain/io.h — data and files: the byte tokenizer, datasets, llm.c token
 * files and GPT-2 checkpoints, and meshtrain's own checkpoints.
 */
#ifndef MESHTRAIN_IO_H
#define MESHTRAIN_IO_H

#include "meshtrain/models.h"
#include "meshtrain/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The byte-level tokenizer: vocabulary 256, token = byte. */
#define MT_BYTE_VOCAB 256

typedef struct mt_dataset mt_dataset;

/* Opens a dataset: an llm.c token file (magic 20240520) is read as tokens, any
 * other file as text through the byte tokenizer. `val_frac` of the tokens (the
 * tail) becomes the validation split. Fails naming the file if it is missing,
 * unreadable, truncated, has a bad header or too few tokens. */
mt_status mt_dataset_open(const char *path, double val_frac, mt_dataset **out);
void      mt_dataset_free(mt_dataset *ds);
int64_t   mt_dataset_tokens(const mt_dataset *ds, int split /* 0 train, 1 val */);
/* Vocabulary the tokens need (max token + 1; 256 for text). */
int       mt_dataset_vocab(const mt_dataset *ds);
/* Fills tokens/targets (B,T) with B consecutive windows of the split starting
 * at *pos (in tokens), targets shifted by one; advances *pos by B·T and wraps
 * around at the end. Deterministic: the global batch depends only on *pos. */
void      mt_dataset_batch(const mt_dataset *ds, int split, int64_t *pos, int B, int T,
                           int32_t *tokens, int32_t *targets);

/* Writes an llm.c token file (magic 20240520, version 1, uint16 tokens). */
mt_status mt_tokens_write(const char *path, const int32_t *tokens, int64_t n);

/* llm.c GPT-2 fp32 checkpoint (magic 20240326, version 3). Reading fills `cfg`
 * from the header and copies the weights into the GPT parameters of `g`
 * (compiled from mt_gpt_build with the same cfg), or, with g == NULL, only
 * reads the header. */
mt_status mt_llmc_read_config(const char *path, mt_gpt_config *cfg);
mt_status mt_llmc_load(const char *path, mt_graph *g, const mt_gpt_config *cfg);
mt_status mt_llmc_save(const char *path, mt_graph *g, const mt_gpt_config *cfg);

/* meshtrain's own checkpoint: every parameter (name, dtype, global shape,
 * sharding, data), optimizer moments, step, data position and seed, plus a
 * model description string. Written to a temporary name, fsynced, renamed;
 * a CRC-32 over the contents is verified on load. */
typedef struct {
    int      step;
    int64_t  data_pos;
    uint64_t seed;
    char     model[256];   /* e.g. "gpt L=4 C=256 NH=4 maxT=64 V=256 Vp=256" */
} mt_ckpt_meta;

mt_status mt_ckpt_save(const char *path, mt_graph *g, mt_optim *opt, const mt_ckpt_meta *meta);
/* Reads only the meta block (to learn which model to build). */
mt_status mt_ckpt_read_meta(const char *path, mt_ckpt_meta *meta);
/* Loads parameters (and moments, if opt is not NULL) into a compiled graph
 * with the same parameters; fails naming the first tensor that differs. */
mt_status mt_ckpt_load(const char *path, mt_graph *g, mt_optim *opt, mt_ckpt_meta *meta);

/* CRC-32 (IEEE) of a buffer, continuing from `crc` (start with 0). */
uint32_t mt_crc32(uint32_t crc, const void *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_IO_H */
