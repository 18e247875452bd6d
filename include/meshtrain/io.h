/*
 * meshtrain/io.h — data and files: the byte tokenizer, datasets, llm.c token
 * files and GPT-2 checkpoints, Hugging Face's safetensors, and meshtrain's
 * own checkpoints.
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
    MT_FILE_TOKENS       /* an llm.c token file (magic 20240520, or 20240801: uint32) */
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
 * removed (one that no save left, neither empty nor the start of a file
 * meshtrain saves, is refused and left alone: meshtrain/files.h). `path`
 * itself is not touched. Fails with MT_EINVAL (a temporary name) or MT_EIO
 * (not a regular file, a temporary name holding another file, the system's
 * message), naming the path. */
mt_status mt_file_check_save(const char *path);

/* ======================================================================== */
/* Datasets and llm.c files                                                  */
/* ======================================================================== */

/* The byte-level tokenizer: vocabulary 256, token = byte. */
#define MT_BYTE_VOCAB 256

typedef struct mt_dataset mt_dataset;

/* Opens a dataset, one of:
 *   - an llm.c token file (magic 20240520): its tokens, the last val_frac of
 *     them (the tail) the validation split;
 *   - any other file: text through the byte tokenizer (one byte a token),
 *     split as a token file;
 *   - a directory, or a glob (a path with * ? or [ that names no file),
 *     of llm.c's token shards as its data scripts write them: the
 *     *_train_*.bin files in name order are the training split, one stream
 *     of tokens across them, the *_val_*.bin the validation split; val_frac
 *     is not used (mt_dataset_is_sharded says which case a path is). A
 *     directory's other files are skipped; a glob match that is neither a
 *     train nor a val shard fails (MT_EINVAL naming it).
 * Every file's header is checked at open and every token read once (with
 * pread, nothing kept) for the vocabulary (with mt_dataset_open_bounded,
 * below: checked against the one given); the tokens stay on disk and are
 * read through a bounded window of read-only mappings as batches are cut, so
 * a corpus larger than memory (or than the address space) trains in a few
 * blocks of memory. Fails naming the file (the shard) when it is missing,
 * unreadable, not a regular file, truncated, has a bad header or too few
 * tokens (MT_EIO, MT_EFORMAT); MT_EIO for a directory or pattern without a
 * train shard. */
mt_status mt_dataset_open(const char *path, double val_frac, mt_dataset **out);
/* As mt_dataset_open, for a model whose vocabulary is known (vocab > 0):
 * mt_dataset_vocab returns vocab, and the one pass over the tokens at open
 * checks every token against it: a token >= vocab fails the open with
 * MT_EINVAL naming the file (the shard), the token's index in it, its id and
 * the largest id of the corpus, so a bad shard is found before the first
 * step rather than when training reaches it (the pass reads with pread at
 * the speed of the disk or page cache, and keeps nothing). Batches check
 * their tokens again (MT_EFORMAT), against a file rewritten in place. vocab
 * 0 is mt_dataset_open; a negative vocab fails (MT_EINVAL). */
mt_status mt_dataset_open_bounded(const char *path, double val_frac, int vocab,
                                  mt_dataset **out);
void      mt_dataset_free(mt_dataset *ds);
/* Whether mt_dataset_open reads `path` as shards: it is a directory, or it
 * does not exist and holds a glob character (* ? [). */
bool      mt_dataset_is_sharded(const char *path);
/* The shards a sharded `path` names, as mt_dataset_open would read them:
 * *n new strings in *paths (mt_dataset_shards_free), the train shards in name
 * order, then the val shards. Nothing is opened: a caller checks its outputs
 * against them before any work (an output that is a shard would destroy
 * it). Fails as mt_dataset_open lists them: MT_EIO (no match, no train
 * shard), MT_EINVAL (a glob match that is no shard), MT_ENOMEM. */
mt_status mt_dataset_shards(const char *path, char ***paths, int *n);
void      mt_dataset_shards_free(char **paths, int n);
int64_t   mt_dataset_tokens(const mt_dataset *ds, int split /* 0 train, 1 val */);
/* The files a split is read from: its shards, or 1 for a one-file dataset
 * (0 for an empty split). */
int       mt_dataset_files(const mt_dataset *ds, int split);
/* Vocabulary the tokens need (max token + 1; 256 for text), or the one
 * mt_dataset_open_bounded was given. */
int       mt_dataset_vocab(const mt_dataset *ds);
/* Fills tokens/targets (B,T) with B consecutive windows of the split starting
 * at *pos (in tokens across the split's files), targets shifted by one;
 * advances *pos by B·T, a window that would pass the end of the split
 * starting again at 0. Deterministic: the global batch depends only on *pos.
 * MT_EIO naming the file when a read fails (or a file changed size since it
 * was opened); MT_EINVAL for bad sizes. *pos is advanced only on MT_OK. */
mt_status mt_dataset_batch(const mt_dataset *ds, int split, int64_t *pos, int B, int T,
                           int32_t *tokens, int32_t *targets);
/* The rows [row0, row0+rows) of the batch mt_dataset_batch would cut at
 * *pos, into tokens/targets (rows,T); only their tokens are read (a data
 * parallel device reads its own rows). Advances *pos past the whole batch
 * of B rows, as mt_dataset_batch. MT_EINVAL unless 0 <= row0 <= row0+rows
 * <= B. Safe to call from many threads on one dataset. */
mt_status mt_dataset_rows(const mt_dataset *ds, int split, int64_t *pos, int B, int T, int row0,
                          int rows, int32_t *tokens, int32_t *targets);
/* Packed documents: docs (rows,T) = each token's document id within its
 * row of tokens (rows,T). A row starts document 0; a token right after
 * `eot` (the end-of-text id) starts the next one; the eot token belongs to
 * the document it ends. So tokens a b EOT c EOT EOT d give 0 0 0 1 1 2 3.
 * Rows are numbered apart (attention never crosses rows). docs may not
 * alias tokens. */
void      mt_dataset_doc_ids(const int32_t *tokens, int64_t rows, int64_t T, int32_t eot,
                             int32_t *docs);

/* Writes an llm.c token file: magic 20240520, version 1, uint16 tokens; or,
 * where an id is past 65,535, llm.c's Llama 3 kind, magic 20240801, version
 * 7, uint32 tokens (its dev/data/data_common.py); claimed and written
 * through its temporary file as every save (files.h). MT_EINVAL, writing
 * nothing, for a negative id or more than INT32_MAX tokens. The datasets
 * (mt_dataset_open) read both kinds, as shards too. */
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

/* llama2.c's fp32 checkpoint (model.bin: export.py's legacy version 0, as
 * karpathy/llama2.c's run.c reads it): 7 int32 (dim, hidden_dim, n_layers,
 * n_heads, n_kv_heads, vocab_size, negative when the classifier is not the
 * embedding, seq_len), then the weights in run.c's order, each (out,in) as
 * meshtrain's, layers stacked: tok_emb (V,C), attn_norm (L,C), wq (L,C,C),
 * wk and wv (L,KV·HS,C), wo (L,C,C), ffn_norm (L,C), w1 (L,F,C), w2
 * (L,C,F), w3 (L,F,C), norm (C), the RoPE table run.c skips (cos and sin,
 * (seq_len,HS/2) each), then lm_head (V,C) when not shared. There is no
 * magic: a file is recognised by its size, which must be the header's to
 * the byte.
 *
 * mt_llama2c_read_config fills *cfg from the header (ffn_dim = hidden_dim,
 * max_seq = seq_len, tie_embeddings from vocab_size's sign, and run.c's
 * fixed rope_theta 10000, norm_eps 1e-5 and head_dim dim / n_heads;
 * multiple_of 0, ffn_mult 1).
 * MT_EFORMAT naming the file and the field when a size is not positive (or
 * past Llama 3 405B's by far), dim is not divisible by n_heads, n_kv_heads
 * does not divide n_heads, the head size is odd, or the file's size is not
 * the header's (truncated, too long); MT_EIO when it cannot be opened;
 * MT_EINVAL for a save's temporary file.
 *
 * mt_llama2c_load copies the weights into the llama parameters of a
 * compiled graph built for `cfg` (mt_llama_build with mt_llama2c_read_config's
 * config; the names of models.h). Everything is checked before anything is
 * copied, so a failed load leaves g as it was: cfg's sizes against the
 * file's (MT_ESHAPE naming the field: equal shapes do not say how C splits
 * into heads, nor, with --head-dim, how wide a head is: cfg's head size
 * must be dim / n_heads; max_seq and the tying may differ), cfg's rope_theta and
 * norm_eps against run.c's (MT_EUNSUPPORTED), a missing parameter
 * (MT_EINVAL), a shape that differs (MT_ESHAPE naming the tensor and both
 * shapes), a file
 * with its own classifier for a graph with no "lm_head.w" (MT_ESHAPE), a
 * non-finite weight (MT_ENAN naming the tensor and the element). A shared
 * classifier loaded into an untied graph fills "lm_head.w" with the
 * embedding (the same logits).
 *
 * mt_llama2c_save writes g's parameters for `cfg` (its ffn_dim 0 resolved
 * by mt_llama_ffn_dim), the RoPE table with export.py's values (computed in
 * float), the classifier when cfg->tie_embeddings is 0. MT_EUNSUPPORTED for
 * a rope_theta other than 10000, a norm_eps other than 1e-5 or a head_dim
 * other than 0 or dim / n_heads (run.c fixes all three and the format
 * stores none); MT_EINVAL for a bad cfg; graph
 * errors as the load's. Claims `path` and writes through its temporary
 * file as said above; mt_llama2c_save_to writes through the caller's
 * claim. */
mt_status mt_llama2c_read_config(const char *path, mt_llama_config *cfg);
mt_status mt_llama2c_load(const char *path, mt_graph *g, const mt_llama_config *cfg);
mt_status mt_llama2c_save(const char *path, const mt_llama_config *cfg, mt_graph *g);
mt_status mt_llama2c_save_to(mt_output *out, const mt_llama_config *cfg, mt_graph *g);

/* llama2.c's tokenizer.bin (run.c's build_tokenizer): a uint32
 * max_token_length, then per token a float32 score, an int32 length and
 * that many bytes. The file does not hold the token count: run.c reads the
 * model's vocab_size tokens. */
typedef struct {
    int     n;                  /* tokens */
    int     max_token_length;   /* the header's */
    char  **pieces;             /* n NUL-terminated pieces, as stored */
    float  *scores;             /* (n) */
} mt_llama2c_vocab;

/* Writes n tokens (pieces[i], scores[i]) to `path` (claimed, through its
 * temporary file as every save), max_token_length the longest piece's
 * bytes. Pieces are written as given: for a SentencePiece vocabulary pass
 * export.py's pieces (mt_llama2c_piece; BOS and EOS as "\n<s>\n" and
 * "\n</s>\n"). MT_EINVAL naming the token for a NULL or empty piece
 * (run.c cannot read one back) or a non-finite score; save errors as
 * mt_llmc_save's. */
mt_status mt_llama2c_tokenizer_write(const char *path, int n, const char *const *pieces,
                                     const float *scores);
/* Reads `path`'s first n tokens, or with n == 0 every token to the end,
 * into a new *out (free with mt_llama2c_vocab_free). MT_EFORMAT naming the
 * file and the token when it ends inside a record, when a length is not in
 * 1..max_token_length (run.c's encoder would overrun its buffer), when a
 * score is not finite, or when tokens are left after the n asked for;
 * MT_EIO when it cannot be opened; MT_EINVAL for n < 0. */
mt_status mt_llama2c_tokenizer_read(const char *path, int n, mt_llama2c_vocab **out);
void      mt_llama2c_vocab_free(mt_llama2c_vocab *v);
/* export.py's piece for a SentencePiece piece: every "▁" (U+2581) becomes a
 * space; byte pieces ("<0x0A>") stay as they are. Writes it, NUL-terminated,
 * into buf (n bytes); MT_EINVAL when it does not fit. */
mt_status mt_llama2c_piece(const char *spm_piece, char *buf, size_t n);

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

/* ======================================================================== */
/* Hugging Face safetensors (safetensors.c, safetensors_index.c,            */
/* safetensors_write.c)                                                      */
/* ======================================================================== */

/* The element types meshtrain reads and writes (the format's others, I32,
 * F64, F8_*, ..., are refused by name). */
typedef enum { MT_ST_F32 = 0, MT_ST_BF16 = 1, MT_ST_F16 = 2 } mt_st_dtype;

#define MT_ST_MAX_DIMS 8

/* One tensor of an opened set: its element type, shape, and bytes
 * [begin, end) of the data section of the file that holds it. */
typedef struct {
    char       *name;
    mt_st_dtype dtype;
    int         ndim;
    int64_t     shape[MT_ST_MAX_DIMS];
    int64_t     numel;
    int         file;         /* which file of the set */
    int64_t     begin, end;
} mt_st_tensor;

/* An opened safetensors file or set of shards: every header read and
 * checked, the files kept open for reads. */
typedef struct mt_safetensors mt_safetensors;

/* Opens `path`: a .safetensors file, a model.safetensors.index.json (its
 * shards, file names in its directory), or a directory holding either
 * (the index first). Every header is checked before any tensor is read:
 * its length (at most the file's and the format's 100,000,000 bytes), the
 * JSON (strict; duplicate names refused), each tensor's dtype, shape and
 * data_offsets (its bytes exactly numel · dtype size), the tensors tiling
 * the data section without a gap or overlap, and for an index the map
 * against the shards both ways and its total_size. Fails naming the file
 * and the tensor: MT_EFORMAT (a malformed file), MT_EUNSUPPORTED (a dtype
 * meshtrain does not read), MT_EIO (missing, unreadable, not a regular
 * file), MT_ENOMEM. */
mt_status mt_safetensors_open(const char *path, mt_safetensors **out);
/* Closes the files and frees st. NULL is a no-op. */
void mt_safetensors_close(mt_safetensors *st);

/* The tensors, by index (0..count-1: the files' order, then offsets; NULL
 * out of range) or by name (NULL when absent). */
int                 mt_safetensors_count(const mt_safetensors *st);
const mt_st_tensor *mt_safetensors_tensor(const mt_safetensors *st, int i);
const mt_st_tensor *mt_safetensors_find(const mt_safetensors *st, const char *name);
/* The path of the file holding t. */
const char *mt_safetensors_file(const mt_safetensors *st, const mt_st_tensor *t);
/* The value of __metadata__'s `key` (the first file's), or NULL. */
const char *mt_safetensors_metadata(const mt_safetensors *st, const char *key);

/* Reads elements [first, first + n) of t (row-major) as f32 into out[n]:
 * F32 as stored, BF16 and F16 widened exactly. Only those bytes are read
 * (a device reads its shard's rows). MT_EINVAL for a range past t;
 * MT_EIO naming the file and the tensor when the read falls short. */
mt_status mt_safetensors_read_f32(const mt_safetensors *st, const mt_st_tensor *t,
                                  int64_t first, int64_t n, float *out);

/* A tensor to write: `data` holds numel f32 values, stored as `dtype`
 * (BF16 and F16 rounded to nearest even). */
typedef struct {
    const char   *name;
    mt_st_dtype   dtype;
    int           ndim;
    const int64_t *shape;
    const float  *data;
} mt_st_write_tensor;

/* Writes n tensors to `path` in the given order, with __metadata__ from
 * `meta` (key, value, key, value, ..., NULL; NULL for none), the header
 * padded with spaces to a multiple of 8 bytes as the format's library
 * pads it; through a claim (meshtrain/files.h: a crash leaves the previous
 * file). MT_EINVAL naming the tensor: an empty or duplicate name, a name
 * or metadata that JSON cannot carry as written (a quote, a backslash or a
 * control character), ndim past MT_ST_MAX_DIMS, a negative size; MT_EIO
 * as a save fails. */
mt_status mt_safetensors_write(const char *path, const mt_st_write_tensor *t, int n,
                               const char *const *meta);

/* "F32", "BF16", "F16"; and the bytes of one element. */
const char *mt_st_dtype_name(mt_st_dtype d);
int         mt_st_dtype_size(mt_st_dtype d);

/* ======================================================================== */
/* Hugging Face model directories (hf_config.c, hf_llama.c, hf_moe.c)      */
/* ======================================================================== */

/* A directory as transformers saves a model: config.json and
 * model.safetensors, or shards and model.safetensors.index.json. */

/* Reads dir/config.json of a LlamaForCausalLM, MistralForCausalLM,
 * Qwen2ForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM or
 * Qwen3MoeForCausalLM into cfg (every field set; transformers' defaults
 * where one is absent; the FFN size intermediate_size; rope_scaling
 * llama3's or yarn's; a mixture's experts, top-k, expert size and MoE
 * blocks into cfg->moe, its aux loss settings 0: docs/huggingface.md
 * says what maps to what). Also refused naming the field: a Qwen3-MoE
 * without norm_topk_prob true, mlp_only_layers that meshtrain's MoE block
 * placement cannot say, router_jitter_noise, a shared expert. Refuses
 * with MT_EUNSUPPORTED naming the field what meshtrain's LLaMA does not
 * compute (another architecture, hidden_act, attention_bias or mlp_bias
 * true, a sliding_window shorter than max_position_embeddings, another
 * rope_type), MT_EFORMAT a malformed or missing field, MT_EIO as an
 * input fails. */
mt_status mt_hf_read_llama_config(const char *dir, mt_llama_config *cfg);

/* Loads dir's weights into the compiled LLaMA graph g of cfg: one
 * device's whole parameters, or a device's graph of mt_partition, whose
 * parameter blocks it fills directly (mt_tensor_write_global), each
 * device reading from the files only the rows its blocks span (whole
 * heads of q and k; only its experts' tensors on an expert axis; a NaN
 * elsewhere is another device's to find). transformers' names to meshtrain's, q_proj's
 * and k_proj's rows from rotate-half order to adjacent pairs (hf_llama.c
 * says how), a mixture's experts stacked and transposed (hf_moe.c), a
 * router bias set to zeros, BF16 and F16 widened. Everything is checked: each tensor's
 * shape against g's (MT_ESHAPE), a missing one (MT_EFORMAT), one the
 * model does not have (MT_EUNSUPPORTED: a bias, say), a NaN or infinity
 * (MT_ENAN), each naming the tensor. A failure may leave g partly
 * loaded. */
mt_status mt_hf_load_llama(const char *dir, mt_graph *g, const mt_llama_config *cfg);
/* The same into a pipeline stage's graph, which holds some of the blocks:
 * a tensor of the directory whose parameter g lacks is skipped (another
 * stage loads it); every other check as mt_hf_load_llama's (a tensor no
 * stage of cfg has is still refused). */
mt_status mt_hf_load_llama_part(const char *dir, mt_graph *g, const mt_llama_config *cfg);

/* Writes g (a compiled LLaMA graph of cfg) as a directory transformers
 * loads: config.json and model.safetensors in F32 with metadata format
 * "pt", q and k rows in rotate-half order; the directory is made when
 * missing (its parent must exist). Each file through a claim. */
mt_status mt_hf_save_llama(const char *dir, const mt_llama_config *cfg, mt_graph *g);

/* MT_OK when mt_hf_save_llama can write a model of cfg to dir (checked
 * before training, so that --hf-out does not fail after the last step):
 * MT_EUNSUPPORTED naming the setting no Hugging Face architecture holds:
 * q, k, v biases with q and k norms; a mixture of experts with q, k, v
 * biases, shared experts, sigmoid scores, a route scale, dense blocks
 * without --qk-norm (Mixtral's are all MoE) or a router bias
 * (--moe-bias-update). */
mt_status mt_hf_llama_writable(const char *dir, const mt_llama_config *cfg);

/* The same for a GPT2LMHeadModel (hf_config.c, hf_gpt2.c): n_embd,
 * n_layer, n_head, n_positions, vocab_size into cfg (Vp meshtrain's
 * padding of V); refused naming the field: another layer_norm_epsilon than
 * meshtrain's 1e-5, activation_function other than gelu_new, an untied
 * head, n_inner other than 4·n_embd, layer-scaled attention. The weights:
 * transformers' Conv1D (in, out) transposed to meshtrain's (out, in),
 * names with or without "transformer.", the causal-mask buffers skipped, a
 * saved lm_head.weight checked equal to the embedding; the padding rows
 * of wte past V zero. Saved under "transformer." with V rows. */
mt_status mt_hf_read_gpt2_config(const char *dir, mt_gpt_config *cfg);
/* mt_hf_load_gpt2 fills a device's blocks as mt_hf_load_llama does, but
 * reads each tensor whole (a Conv1D's rows are meshtrain's columns). */
mt_status mt_hf_load_gpt2(const char *dir, mt_graph *g, const mt_gpt_config *cfg);
/* ... and into a pipeline stage's graph (as mt_hf_load_llama_part). */
mt_status mt_hf_load_gpt2_part(const char *dir, mt_graph *g, const mt_gpt_config *cfg);
mt_status mt_hf_save_gpt2(const char *dir, const mt_gpt_config *cfg, mt_graph *g);

/* CRC-32 (IEEE) of a buffer, continuing from `crc` (start with 0). */
uint32_t mt_crc32(uint32_t crc, const void *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_IO_H */
