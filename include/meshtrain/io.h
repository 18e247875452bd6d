/*
 * meshtrain/io.h — data and files: the byte tokenizer, datasets, llm.c token
 * files and GPT-2 checkpoints, and meshtrain's own checkpoints.
 */
#ifndef MESHTRAIN_IO_H
#define MESHTRAIN_IO_H

#include "meshtrain/files.h"
#include "meshtrain/models.h"
#include "meshtrain/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================== */
/* Files: what a path holds, and how saves write                             */
/* ======================================================================== */

/* Every file of this header keeps the contract of meshtrain/files.h: a
 * read opens a regular file without blocking, refusing anything else and
 * saying what it is; a save (mt_ckpt_save, mt_llmc_save) claims its output,
 * writes "<path>" MT_TMP_SUFFIX, fsyncs it and renames it over <path>, so a
 * crash leaves the previous file or the new one. Loads refuse a save's
 * temporary file, naming the file to load instead. The *_save_to variants
 * write through a claim the caller holds (mt_output_claim), so that a run
 * claims its outputs before it starts and keeps them to the end. */

/* What a file holds, from its first bytes. */
typedef enum {
    MT_FILE_OTHER = 0,   /* anything else: text, as far as datasets go */
    MT_FILE_CKPT,        /* a meshtrain checkpoint (magic "MTCKPT") */
    MT_FILE_LLMC,        /* an llm.c GPT-2 checkpoint (magic 20240326) */
    MT_FILE_TOKENS       /* an llm.c token file (magic 20240520) */
} mt_file_kind;

/* Sets *kind from the magic at the start of `path` (an empty or short file
 * is MT_FILE_OTHER). Only the magic is read: the file may still be
 * truncated or corrupt. Fails with MT_EIO naming the path and the system's
 * message when it cannot be opened, or saying what it is when it is not a
 * regular file (never blocking on a FIFO). */
mt_status mt_file_detect(const char *path, mt_file_kind *kind);

/* Writes the temporary name saves to `path` use ("<path>.tmp") into buf
 * (n bytes). MT_EINVAL when it does not fit. */
mt_status mt_file_tmp_path(const char *path, char *buf, size_t n);

/* Checks, before any work, that a save to `path` can succeed, the way the
 * save itself will go: `path` is a new name or a regular file, is not a
 * temporary name, and its temporary file can be created (so its directory
 * exists and is writable, and the temporary name is not too long): that file
 * is created and removed again, and a stale one left by a killed save is
 * removed. `path` itself is not touched. Fails with MT_EINVAL (not a regular
 * file, a temporary name) or MT_EIO (with the system's message), naming the
 * path. */
mt_status mt_file_check_save(const char *path);

/* ======================================================================== */
/* Datasets and llm.c files                                                  */
/* ======================================================================== */

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

/* Writes an llm.c token file (magic 20240520, version 1, uint16 tokens),
 * claimed and written through its temporary file as every save (files.h). */
mt_status mt_tokens_write(const char *path, const int32_t *tokens, int64_t n);

/* llm.c GPT-2 fp32 checkpoint (magic 20240326, version 3). Reading fills `cfg`
 * from the header and copies the weights into the GPT parameters of `g`
 * (compiled from mt_gpt_build with the same cfg), or, with g == NULL, only
 * reads the header. mt_llmc_load checks every value before it copies any:
 * a non-finite one fails with MT_ENAN naming the tensor and the element,
 * leaving g as it was. A save's temporary file is refused (MT_EINVAL).
 * mt_llmc_save claims `path` and writes through its temporary file as said
 * above, failing as mt_output_claim does (a path that is not a regular
 * file: MT_EIO; another run writing it: MT_EBUSY); mt_llmc_save_to writes
 * through the caller's claim. */
mt_status mt_llmc_read_config(const char *path, mt_gpt_config *cfg);
mt_status mt_llmc_load(const char *path, mt_graph *g, const mt_gpt_config *cfg);
mt_status mt_llmc_save(const char *path, mt_graph *g, const mt_gpt_config *cfg);
mt_status mt_llmc_save_to(mt_output *out, mt_graph *g, const mt_gpt_config *cfg);

/* meshtrain's own checkpoint: every parameter (name, dtype, global shape,
 * sharding, data), optimizer moments, step, data position and seed, plus a
 * model description string. Written to "<path>.tmp", fsynced, renamed (see
 * Files above); a CRC-32 over the contents is verified on load. */
typedef struct {
    int      step;
    int64_t  data_pos;
    uint64_t seed;
    char     model[256];   /* e.g. "gpt L=4 C=256 NH=4 maxT=64 V=256 Vp=256" */
} mt_ckpt_meta;

/* Saves the parameters of a compiled graph (and the moments of `opt`, if not
 * NULL) with `meta`. Fails as mt_output_claim does (a temporary name:
 * MT_EINVAL; a path that is not a regular file: MT_EIO; another run writing
 * it: MT_EBUSY), and with MT_EIO (the system's message) when writing fails,
 * leaving the previous checkpoint untouched. mt_ckpt_save_to writes through
 * the caller's claim instead of claiming `path` itself. */
mt_status mt_ckpt_save(const char *path, mt_graph *g, mt_optim *opt, const mt_ckpt_meta *meta);
mt_status mt_ckpt_save_to(mt_output *out, mt_graph *g, mt_optim *opt, const mt_ckpt_meta *meta);
/* Reads only the meta block (to learn which model to build). Refuses a save's
 * temporary file (MT_EINVAL) and anything but a regular file (MT_EIO). */
mt_status mt_ckpt_read_meta(const char *path, mt_ckpt_meta *meta);
/* Loads parameters (and moments, if opt is not NULL) into a compiled graph
 * with the same parameters; fails naming the first tensor that differs.
 * Everything is checked before anything is copied, so a failed load leaves
 * the graph and the optimizer as they were: the CRC (MT_ECHECKSUM), every
 * record against the graph (MT_ESHAPE), and every value loaded: a NaN or
 * infinity in a parameter or a loaded moment fails with MT_ENAN naming the
 * tensor (a CRC says the bytes are as written, not that the run was sane). */
mt_status mt_ckpt_load(const char *path, mt_graph *g, mt_optim *opt, mt_ckpt_meta *meta);

/* CRC-32 (IEEE) of a buffer, continuing from `crc` (start with 0). */
uint32_t mt_crc32(uint32_t crc, const void *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_IO_H */
