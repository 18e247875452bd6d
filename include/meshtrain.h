/*
 * meshtrain.h — the public API of meshtrain, and its manual.
 *
 * meshtrain trains neural networks, from a linear regression to a GPT-2 style
 * transformer, on a mesh of devices. This header is the only one a user includes.
 *
 * Conventions
 *  - Every fallible function returns mt_status: 0 (MT_OK) on success, a negative
 *    code from the table below on failure. mt_errmsg() then returns a message that
 *    names what was wrong and what to do. Messages are per thread (per device).
 *  - Graph builder functions return a tensor handle, or NULL once the graph is in
 *    error; the first error sticks and mt_graph_status() returns it (like cairo):
 *    a model can be built without checking every call, then checked once.
 *  - Shapes are written in the letters used across the code base: B batch,
 *    T time, C channels, NH heads, HS head size, V vocabulary, Vp padded V,
 *    L layers, OC output channels, BT = B*T rows.
 *  - Objects are opaque; constructors and destructors pair up (_create/_free).
 */
#ifndef MESHTRAIN_H
#define MESHTRAIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MT_VERSION_STRING "0.1.0"

/* ======================================================================== */
/* Status codes and messages                                                 */
/* ======================================================================== */

typedef int mt_status;

#define MT_STATUS_TABLE(X)                                                   \
    X(MT_OK,           0,  "ok")                                             \
    X(MT_EINVAL,      -1,  "invalid argument")                               \
    X(MT_ENOMEM,      -2,  "out of memory")                                  \
    X(MT_EIO,         -3,  "input/output error")                             \
    X(MT_EFORMAT,     -4,  "bad file format")                                \
    X(MT_ESHAPE,      -5,  "shape mismatch")                                 \
    X(MT_ENAN,        -6,  "non-finite value")                               \
    X(MT_ETIMEOUT,    -7,  "timed out")                                      \
    X(MT_ESTATE,      -8,  "called in the wrong state")                      \
    X(MT_EUNSUPPORTED,-9,  "not supported")                                  \
    X(MT_ECHECKSUM,  -10,  "checksum mismatch")                              \
    X(MT_EINTERNAL,  -11,  "internal error")                                \
    X(MT_EABORTED,   -12,  "stopped because another device failed")         \
    X(MT_EMISMATCH,  -13,  "devices issued different collectives")

enum {
#define MT__STATUS_ENUM(name, value, text) name = value,
    MT_STATUS_TABLE(MT__STATUS_ENUM)
#undef MT__STATUS_ENUM
};

/* The symbolic name of a status ("MT_EINVAL"), or "MT_E?" for an unknown one. */
const char *mt_status_name(mt_status status);

/* A one-phrase description of a status code ("invalid argument"). */
const char *mt_status_text(mt_status status);

/* The message of the last failure on the calling thread; "" if none. The
 * pointer stays valid until the next failure on this thread. */
const char *mt_errmsg(void);

/* Records a failure message (printf-style) for the calling thread and returns
 * `code`, so that `return mt_fail(MT_EINVAL, "...", ...);` reads naturally. */
mt_status mt_fail(mt_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Clears the calling thread's message. */
void mt_errclear(void);

/* ======================================================================== */
/* Base: counter-based random numbers, clock                                  */
/* ======================================================================== */

/* Philox-4x32-10: four 32-bit random words for counter `ctr` under key `key`.
 * Stateless: the same (key, ctr) always gives the same words, which is what
 * lets a shard of a tensor fill its slice with exactly the numbers the whole
 * tensor holds there. */
void mt_philox4x32(uint64_t key, uint64_t ctr_hi, uint64_t ctr_lo, uint32_t out[4]);

/* Uniform float in [0, 1) and standard normal for stream `stream` (e.g. a
 * parameter id), element index `index`, under `seed`. */
float mt_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);
float mt_rng_normal(uint64_t seed, uint64_t stream, uint64_t index);

/* A 64-bit stream id from a name (FNV-1a), so a parameter's numbers depend on
 * its name, not on the order parameters were declared in. */
uint64_t mt_hash_name(const char *name);

/* Monotonic time in seconds. */
double mt_time_now(void);

/* ======================================================================== */
/* Tensors                                                                   */
/* ======================================================================== */

#define MT_MAX_DIMS 4
#define MT_MAX_NAME 64

typedef enum { MT_F32 = 0, MT_BF16 = 1, MT_I32 = 2 } mt_dtype;

/* The size in bytes of one element of `dtype`. */
size_t mt_dtype_size(mt_dtype dtype);

/* Sharding of a tensor over a device mesh: for each dimension, the bit set of
 * mesh axes it is split over (0: whole on every device), and the bit set of
 * axes over which the tensor holds partial sums (0: none). Until meshes land
 * every tensor is replicated (all zero). */
typedef struct {
    uint32_t dim_axes[MT_MAX_DIMS];
    uint32_t partial_axes;
} mt_sharding;

typedef enum {
    MT_INPUT = 0,   /* set by the caller before each forward (data, targets) */
    MT_PARAM = 1,   /* trainable, persistent, has a gradient */
    MT_ACT   = 2,   /* intermediate result of the forward pass */
    MT_GRAD  = 3,   /* gradient (of a parameter or an activation) */
    MT_AUX   = 4,   /* saved by an op's forward for its backward (stats, probs) */
    MT_CONST = 5    /* filled once at compile (e.g. position ids), persistent */
} mt_tensor_kind;

typedef struct mt_tensor mt_tensor;

const char    *mt_tensor_name(const mt_tensor *t);
mt_dtype       mt_tensor_dtype(const mt_tensor *t);
mt_tensor_kind mt_tensor_kind_of(const mt_tensor *t);
int            mt_tensor_ndim(const mt_tensor *t);
/* Global size of dimension `dim` (0-based); 1 past ndim. */
int64_t        mt_tensor_dim(const mt_tensor *t, int dim);
/* Number of elements. */
int64_t        mt_tensor_numel(const mt_tensor *t);
mt_sharding    mt_tensor_sharding(const mt_tensor *t);
/* Storage of the tensor after mt_graph_compile(); NULL before. f32 and i32
 * tensors are dense, row-major. */
float         *mt_tensor_f32(mt_tensor *t);
int32_t       *mt_tensor_i32(mt_tensor *t);
/* The gradient tensor of a parameter (or of an activation that has one) after
 * mt_graph_compile(); NULL if it has none. */
mt_tensor     *mt_tensor_grad(mt_tensor *t);

/* ======================================================================== */
/* Graphs: build once, compile once, run many times                          */
/* ======================================================================== */

typedef struct mt_graph mt_graph;

/* Parameter initialisation, evaluated per element from (seed, name, index). */
typedef enum {
    MT_INIT_ZEROS = 0,
    MT_INIT_ONES,
    MT_INIT_NORMAL,   /* N(0, std²) */
    MT_INIT_UNIFORM   /* U(-a, a), a = std */
} mt_init_kind;

typedef struct { mt_init_kind kind; float std; } mt_init;

/* Creates an empty graph. Returns NULL only when out of memory. */
mt_graph *mt_graph_create(void);
void      mt_graph_free(mt_graph *g);

/* The first error recorded while building or compiling the graph (MT_OK if
 * none); mt_graph_errmsg() gives its message. */
mt_status   mt_graph_status(const mt_graph *g);
const char *mt_graph_errmsg(const mt_graph *g);

/* Records a build error in g (the first one sticks) and returns `code`; for
 * model builders that reject their own arguments, so that mt_graph_status()
 * reports it like an op's error. Also sets mt_errmsg(). */
mt_status mt_graph_fail(mt_graph *g, mt_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Leaves: inputs the caller fills before each forward, parameters (trainable,
 * initialised at compile), and constants (filled by the caller once after
 * compile). `shape` has `ndim` entries (1..4). */
mt_tensor *mt_input(mt_graph *g, const char *name, mt_dtype dtype, int ndim, const int64_t *shape);
mt_tensor *mt_param(mt_graph *g, const char *name, int ndim, const int64_t *shape, mt_init init);
mt_tensor *mt_constant(mt_graph *g, const char *name, mt_dtype dtype, int ndim, const int64_t *shape);

/* Renames a tensor (op outputs are named "<op>.<id>" by default), so it can
 * be found with mt_graph_find(); names must stay unique in a graph. */
void mt_tensor_set_name(mt_tensor *t, const char *name);

/* Looks up a tensor by name; NULL if there is none. */
mt_tensor *mt_graph_find(mt_graph *g, const char *name);

/* Parameters in declaration order. */
int        mt_graph_n_params(const mt_graph *g);
mt_tensor *mt_graph_param_at(const mt_graph *g, int i);

/* --- ops (each has a forward, a backward split into B and W parts, and a cost) --- */

/* out (M,N) = op(a) · op(b), op = transpose when the flag is set; leading dims
 * of a 3-D or 4-D `a` are folded into M (a (B,T,K) · b (K,N) -> (B,T,N)). */
mt_tensor *mt_matmul(mt_graph *g, mt_tensor *a, mt_tensor *b, bool trans_a, bool trans_b);
/* out (...,OC) = x (...,C) · w (OC,C)ᵀ + bias (OC); bias may be NULL. */
mt_tensor *mt_linear(mt_graph *g, mt_tensor *x, mt_tensor *w, mt_tensor *bias);
/* Elementwise with broadcast of b over the leading dims of a (b's shape must be
 * a suffix of a's). */
mt_tensor *mt_add(mt_graph *g, mt_tensor *a, mt_tensor *b);
mt_tensor *mt_sub(mt_graph *g, mt_tensor *a, mt_tensor *b);
mt_tensor *mt_mul(mt_graph *g, mt_tensor *a, mt_tensor *b);
mt_tensor *mt_scale(mt_graph *g, mt_tensor *a, float s);
/* GELU, tanh approximation (as GPT-2). */
mt_tensor *mt_gelu(mt_graph *g, mt_tensor *x);
/* out = (x - mean) / sqrt(var + 1e-5) * w + b over the last dim C. */
mt_tensor *mt_layernorm(mt_graph *g, mt_tensor *x, mt_tensor *w, mt_tensor *b);
/* Causal multi-head self-attention: qkv (B,T,3C) packed [q|k|v], NH heads ->
 * out (B,T,C) (heads concatenated; no output projection). */
mt_tensor *mt_attention(mt_graph *g, mt_tensor *qkv, int NH);
/* out (...,C) = table (V,C)[ids (...)]; ids int32 in [0,V). */
mt_tensor *mt_embedding(mt_graph *g, mt_tensor *table, mt_tensor *ids);
/* loss () = scale · Σ_rows -log softmax(logits[row, :V])[targets[row]].
 * logits (...,Vp) with V <= Vp (columns past V are padding and ignored);
 * targets int32 (...); a target < 0 skips its row. Pass scale = 1/(tokens in
 * the global batch) so that microbatches and devices add up to the mean. */
mt_tensor *mt_cross_entropy(mt_graph *g, mt_tensor *logits, mt_tensor *targets, int V, float scale);
/* loss () = scale · Σ (pred - target)². */
mt_tensor *mt_mse(mt_graph *g, mt_tensor *pred, mt_tensor *target, float scale);
/* Reductions to a scalar: Σ x, and Σ x / numel. */
mt_tensor *mt_sum(mt_graph *g, mt_tensor *x);
mt_tensor *mt_mean(mt_graph *g, mt_tensor *x);
/* Same data, new shape (numel must match). No copy. */
mt_tensor *mt_reshape(mt_graph *g, mt_tensor *x, int ndim, const int64_t *shape);
/* out = x with the last two dims swapped. */
mt_tensor *mt_transpose(mt_graph *g, mt_tensor *x);

/* --- compile and run --- */

typedef struct {
    uint64_t seed;          /* parameter initialisation seed */
    bool     no_grad;       /* forward only: no backward, no gradient buffers */
} mt_compile_opts;

/* Marks `loss` (a scalar) as the value to differentiate, builds the backward
 * graph (each node tagged B or W), plans every buffer once, allocates, and
 * initialises parameters. After this the graph runs without allocating. */
mt_status mt_graph_compile(mt_graph *g, mt_tensor *loss, const mt_compile_opts *opts);

/* Runs the forward pass, then the input-gradient (B) nodes, then the weight-
 * gradient (W) nodes. Parameter gradients ACCUMULATE across calls (that is
 * gradient accumulation); mt_graph_zero_grad() clears them. F, then B, then W
 * gives exactly the gradient mt_graph_backward() gives. Buffers are planned
 * for that order: do not run a forward between the B and the W of the same
 * graph. A parameter the loss does not use gets no gradient (its
 * mt_tensor_grad() is NULL) and optimizers leave it as it is. */
mt_status mt_graph_forward(mt_graph *g);
mt_status mt_graph_backward_b(mt_graph *g);
mt_status mt_graph_backward_w(mt_graph *g);
mt_status mt_graph_backward(mt_graph *g);
void      mt_graph_zero_grad(mt_graph *g);

/* The loss after the last forward. */
float mt_graph_loss(const mt_graph *g);

/* Counts of the compiled program. */
typedef struct {
    int     n_forward, n_backward_b, n_backward_w;  /* nodes per phase */
    int64_t n_param_elems;                          /* trainable elements */
    double  flops_forward, flops_backward;          /* per run */
    double  bytes_forward, bytes_backward;          /* memory traffic per run */
    size_t  arena_bytes;                            /* planned activation memory */
    size_t  arena_bytes_unplanned;                  /* the same without reuse */
} mt_graph_stats;
mt_graph_stats mt_graph_get_stats(const mt_graph *g);

/* Writes the compiled program, one node a line (phase, op, shapes, FLOPs). */
void mt_graph_print(const mt_graph *g, FILE *out);

/* Turns per-op timing on (clearing what was recorded) or off. While on,
 * every run adds each node's wall time, FLOPs and bytes to its op's row. */
mt_status mt_graph_set_profiling(mt_graph *g, bool on);
/* One line per op kind: calls, time, share, achieved GFLOP/s and GB/s. */
void      mt_graph_print_profile(const mt_graph *g, FILE *out);

/* ======================================================================== */
/* Optimizers and learning-rate schedule                                     */
/* ======================================================================== */

typedef enum { MT_OPT_SGD = 0, MT_OPT_ADAMW = 1 } mt_optim_kind;

typedef struct {
    mt_optim_kind kind;
    float lr;             /* peak learning rate */
    float beta1, beta2, eps;  /* AdamW */
    float weight_decay;   /* decoupled; applied to parameters of 2+ dims only (not
                             to biases and layernorm gains), as in GPT-2 training */
    float momentum;       /* SGD */
    float grad_clip;      /* global-norm clip; 0 disables */
    int   warmup_steps;   /* linear warmup from 0 */
    int   total_steps;    /* cosine decay to min_lr_frac·lr at total_steps; 0 = constant */
    float min_lr_frac;
} mt_optim_config;

/* Defaults: AdamW, lr 3e-4, betas (0.9, 0.95), eps 1e-8, decay 0.1, clip 1.0. */
mt_optim_config mt_optim_defaults(void);

typedef struct mt_optim mt_optim;

/* Creates optimizer state (moments) for every parameter of a compiled graph. */
mt_status mt_optim_create(mt_graph *g, const mt_optim_config *cfg, mt_optim **out);
void      mt_optim_free(mt_optim *opt);

/* The learning rate at `step` (0-based) under the schedule. */
float mt_optim_lr_at(const mt_optim_config *cfg, int step);

/* One update from the accumulated gradients, then marks them zero: the next
 * backward overwrites them instead of adding (cheaper than clearing them;
 * until then they still hold the old values). Returns the
 * global gradient norm (before clipping) in *grad_norm if not NULL. Fails with
 * MT_ENAN, naming the parameter, if a gradient is not finite. */
mt_status mt_optim_step(mt_optim *opt, float *grad_norm);

/* Steps taken so far. */
int mt_optim_steps(const mt_optim *opt);

/* Optimizer state for checkpoints: per parameter i, the first and second
 * moments (NULL for SGD without momentum), numel floats each. */
float *mt_optim_moment(mt_optim *opt, int param_index, int which /* 1 or 2 */);
void   mt_optim_set_steps(mt_optim *opt, int steps);

/* ======================================================================== */
/* Models (built only through the graph API)                                 */
/* ======================================================================== */

typedef struct {
    int L;      /* layers */
    int C;      /* channels */
    int NH;     /* heads; C % NH == 0 */
    int maxT;   /* context length of the position table */
    int V;      /* vocabulary */
    int Vp;     /* padded vocabulary (>= V); rows past V never win the softmax */
} mt_gpt_config;

/* Builds a GPT-2 style model into `g` for microbatches of (B,T) tokens:
 * learned positions, pre-LayerNorm blocks (attention then 4C GELU MLP, each
 * with a residual), final LayerNorm, LM head tied to the token embedding.
 * Inputs are named "tokens" (B,T) and "targets" (B,T); the returned loss is
 * the cross entropy times `loss_scale`. Position ids are a constant, filled by
 * mt_gpt_fill_constants() after compile. Parameters are named as in GPT-2
 * ("wte", "wpe", "h.0.ln_1.w", ...), with llm.c's initialisation. */
mt_tensor *mt_gpt_build(mt_graph *g, const mt_gpt_config *cfg, int B, int T, float loss_scale);
mt_status  mt_gpt_fill_constants(mt_graph *g);
/* Parameter count (with the padded embedding) of a configuration. */
int64_t    mt_gpt_num_params(const mt_gpt_config *cfg);
/* Model FLOPs of one training step on `tokens` tokens of context T:
 * 6·N·tokens plus attention (12·L·C·T per token, fwd+bwd). */
double     mt_gpt_train_flops(const mt_gpt_config *cfg, int T, int64_t tokens);
/* Validates a configuration; the message names the bad field. */
mt_status  mt_gpt_config_check(const mt_gpt_config *cfg);

/* Multi-layer perceptron: x (B,n_in) -> [linear, gelu] × (n_layers-1) ->
 * linear -> (B,n_out), MSE loss against "targets" (B,n_out), times scale. */
mt_tensor *mt_mlp_build(mt_graph *g, int B, int n_in, int n_hidden, int n_out, int n_layers, float loss_scale);

/* Linear regression: pred (B) = x (B,n_features) · w (n_features) + b, MSE
 * against "y" (B) times scale; parameters "w" and "b" start at zero. */
mt_tensor *mt_linreg_build(mt_graph *g, int B, int n_features, float loss_scale);

/* ======================================================================== */
/* Data: tokenizer, datasets, llm.c files, checkpoints                        */
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

/* ======================================================================== */
/* Training: the loop behind `meshtrain train`                               */
/* ======================================================================== */

typedef enum { MT_MODEL_GPT = 0, MT_MODEL_MLP = 1, MT_MODEL_LINREG = 2 } mt_model_kind;

typedef struct {
    mt_model_kind   model;
    mt_gpt_config   gpt;         /* for MT_MODEL_GPT; V/Vp 0 = from the data */
    int             mlp_hidden, mlp_layers;   /* for MT_MODEL_MLP */
    const char     *data;        /* text file or llm.c token file (GPT); NULL for
                                    MLP/linreg, which make synthetic data */
    double          val_frac;    /* tail of the data held out (default 0.1) */
    int             B, T;        /* microbatch (B sequences of T tokens) */
    int             accum;       /* microbatches per step (gradient accumulation) */
    int             steps;       /* optimizer steps to take (in total, counting resumed ones) */
    mt_optim_config optim;
    uint64_t        seed;
    int             eval_every;  /* steps between validation losses; 0 = never */
    int             eval_batches;
    const char     *ckpt_in;     /* resume from a meshtrain checkpoint, or NULL */
    const char     *ckpt_out;    /* write a meshtrain checkpoint at the end (and every ckpt_every) */
    int             ckpt_every;
    const char     *llmc_in;     /* initialise GPT weights from an llm.c checkpoint */
    const char     *llmc_out;    /* also write an llm.c checkpoint at the end */
    int             threads;     /* kernel threads; 0 = all cores */
} mt_train_config;

/* Defaults: GPT L=2 C=64 NH=4 maxT=64, B=8 T=64, accum 1, 100 steps, AdamW
 * lr 1e-3 with 10 warmup steps and cosine decay, seed 1337, val_frac 0.1. */
mt_train_config mt_train_defaults(void);

typedef struct mt_trainer mt_trainer;

/* What one step did. */
typedef struct {
    int     step;          /* 1-based, after the update */
    float   loss;          /* mean over the global batch */
    float   grad_norm;
    float   lr;
    double  seconds;       /* wall time of the step */
    int64_t tokens;        /* tokens in the global batch (examples for MLP/linreg) */
    double  flops;         /* model FLOPs of the step */
} mt_step_report;

/* Validates the configuration (the message names the bad field and value),
 * opens the data, builds and compiles the model, creates the optimizer, and
 * loads ckpt_in / llmc_in if given. */
mt_status mt_trainer_create(const mt_train_config *cfg, mt_trainer **out);
void      mt_trainer_free(mt_trainer *tr);
/* The configuration as resolved (V from the data, step resumed from, ...). */
const mt_train_config *mt_trainer_config(const mt_trainer *tr);
/* Steps already taken (non-zero after a resume). */
int       mt_trainer_step_count(const mt_trainer *tr);
/* One optimizer step over accum microbatches. Fails with MT_ENAN naming the
 * step if the loss or a gradient is not finite. */
mt_status mt_trainer_step(mt_trainer *tr, mt_step_report *report);
/* Mean validation loss over eval_batches microbatches. */
mt_status mt_trainer_eval(mt_trainer *tr, float *val_loss);
/* Writes ckpt_out (and llmc_out for GPT). */
mt_status mt_trainer_save(mt_trainer *tr);
/* The compiled training graph (for inspection). */
mt_graph *mt_trainer_graph(mt_trainer *tr);

/* Samples `n` tokens after `prompt` (bytes) from a checkpoint (meshtrain or
 * llm.c, told apart by magic) with temperature and top-k (0 = all), writing
 * each decoded byte to `out` as it is produced. */
typedef struct {
    const char *ckpt;
    const char *prompt;
    int         n;
    float       temperature;
    int         top_k;
    uint64_t    seed;
    int         threads;
} mt_sample_config;
mt_status mt_sample(const mt_sample_config *cfg, FILE *out);

/* ======================================================================== */
/* Device meshes                                                             */
/* ======================================================================== */

#define MT_MESH_MAX_AXES 6

typedef struct mt_mesh mt_mesh;

/* Creates a mesh from a spec of named axes with sizes, e.g. "data=2,tensor=2"
 * (row-major: the last axis varies fastest over device ids). One size may be
 * -1 and is filled in from n_devices; otherwise the product must equal
 * n_devices, or the error names both. An empty spec is a 1-axis mesh "d" of
 * n_devices. Names: letters, digits, '_'; unique. */
mt_status mt_mesh_create(const char *spec, int n_devices, mt_mesh **out);
void      mt_mesh_free(mt_mesh *mesh);
int       mt_mesh_size(const mt_mesh *mesh);
int       mt_mesh_ndim(const mt_mesh *mesh);
const char *mt_mesh_axis_name(const mt_mesh *mesh, int axis);
/* Size of an axis by name; 0 if there is no such axis. */
int       mt_mesh_axis_size(const mt_mesh *mesh, const char *axis);
/* "data=2,tensor=2" */
const char *mt_mesh_spec(const mt_mesh *mesh);
/* The coordinates (ndim entries) of a device, and back. */
void      mt_mesh_coords(const mt_mesh *mesh, int device, int *coords);
int       mt_mesh_device(const mt_mesh *mesh, const int *coords);

/* An ordered set of mesh axes, resolved once from names: "data", or
 * "data,tensor" for a group over both (ranks row-major in the order given,
 * as JAX's axis_index over a tuple of axes). Collectives take this. */
typedef struct {
    int     n;
    uint8_t axis[MT_MESH_MAX_AXES];
} mt_axes;

/* Resolves names; the error names an unknown axis and lists the mesh's. */
mt_status mt_mesh_axes(const mt_mesh *mesh, const char *names, mt_axes *out);
/* Devices in the group of `device` over `axes` (the devices that differ from
 * it only in those coordinates), in group-rank order; returns the count. */
int       mt_mesh_group(const mt_mesh *mesh, mt_axes axes, int device, int *members);
/* The rank of `device` in its group over `axes`, and the group size. */
int       mt_mesh_group_rank(const mt_mesh *mesh, mt_axes axes, int device);
int       mt_mesh_group_size(const mt_mesh *mesh, mt_axes axes);

/* A partition spec, as JAX's PartitionSpec: per tensor dimension the mesh
 * axes it is split over. Text form: dims separated by ',', axes of one dim
 * joined by '+', '_' for a whole dim: "data,_" or "data+fsdp,tensor".
 * Fills a sharding (axis bit sets; a dim split over several axes is split
 * major-to-minor in mesh order). */
mt_status mt_sharding_parse(const mt_mesh *mesh, const char *spec, int ndim, mt_sharding *out);
/* The local shape of a global shape under a sharding; fails naming the dim
 * whose size does not divide by the product of its axes. */
mt_status mt_sharding_local_shape(const mt_mesh *mesh, const mt_sharding *sh, int ndim,
                                  const int64_t *global, int64_t *local);

/* ======================================================================== */
/* Running on a mesh: SPMD launch and collectives                            */
/* ======================================================================== */

/* One device's view during a launch (opaque; valid inside the device function). */
typedef struct mt_ctx mt_ctx;

typedef mt_status (*mt_device_fn)(mt_ctx *ctx, void *arg);

typedef enum {
    MT_TRANSPORT_AUTO = 0,   /* mpi when started by mpirun with > 1 rank, else threads */
    MT_TRANSPORT_THREADS,    /* every device a thread of this process */
    MT_TRANSPORT_MPI         /* one device per MPI rank */
} mt_transport_kind;

typedef struct {
    const char       *mesh;           /* mesh spec, e.g. "data=4" */
    int               devices;        /* threads: device count; mpi: 0 = the world size */
    mt_transport_kind transport;
    double            timeout_s;      /* how long a device waits for its group to arrive at
                                         a collective; 0 = MT_COMM_TIMEOUT env or 300 s.
                                         Once all have arrived the data movement completes
                                         (it is bounded), so no buffer is left in use */
    bool              check;          /* debug: verify every collective matches on all devices */
    const char       *trace;          /* write a Chrome trace JSON here at the end (NULL: none) */
    int               kernel_threads; /* per device; 0 = cores / devices (at least 1) */
} mt_launch_opts;

/* Runs fn(ctx, arg) on every device of the mesh, SPMD, and returns when all
 * have returned. If any device fails (returns non-zero) or a collective
 * times out, every other device's pending and later collectives return
 * MT_EABORTED, and mt_launch returns the first failure, its message prefixed
 * with the device ("device 2: ..."). A timeout's message names the devices
 * that never arrived and the last collective each one issued.
 * Under MPI every rank calls mt_launch and runs its own device; the result is
 * the same on every rank. MPI cannot cancel a collective already posted, so
 * when a failure leaves one unfinished on some rank, rank 0 prints the
 * agreed message and the job ends with MPI_Abort (exit 1) instead of
 * returning; no rank is left waiting. Device threads are pinned to their own
 * cores when they fit (MT_PIN=0 leaves placement to the OS). */
mt_status mt_launch(const mt_launch_opts *opts, mt_device_fn fn, void *arg);

/* pmap: mt_launch on a 1-axis mesh named `axis` (NULL: "i") of `devices`
 * devices (0 under MPI: the world size). fn resolves the axis with
 * mt_ctx_axes(ctx, axis, &ax) and calls collectives over it. */
mt_status mt_pmap(const char *axis, int devices, mt_device_fn fn, void *arg);

/* The calling device: id (row-major over the mesh), the mesh, and the MPI
 * rank / world size when running under MPI (else 0 / 1). */
int            mt_ctx_device(const mt_ctx *ctx);
const mt_mesh *mt_ctx_mesh(const mt_ctx *ctx);
int            mt_ctx_process_rank(const mt_ctx *ctx);
/* JAX's axis_index: this device's rank in its group over `axes`. */
int            mt_axis_index(const mt_ctx *ctx, mt_axes axes);
int            mt_axis_size(const mt_ctx *ctx, mt_axes axes);
/* Resolves axis names on the ctx's mesh (see mt_mesh_axes). */
mt_status      mt_ctx_axes(const mt_ctx *ctx, const char *names, mt_axes *out);

/* --- collectives over the group of the calling device over `axes` ---
 * All devices of a group must call the same collective with the same sizes,
 * in the same order. Buffers are dense; `count` counts elements of `dtype`.
 * bf16 reduces in f32. Send and receive buffers must not overlap unless
 * stated. Results follow jax.lax: */

typedef enum { MT_REDUCE_SUM = 0, MT_REDUCE_MAX = 1, MT_REDUCE_MIN = 2 } mt_reduce_op;

/* psum / pmax: buf (count) = reduction over the group of every device's buf. In place. */
mt_status mt_all_reduce(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype,
                        mt_reduce_op op);
mt_status mt_psum(mt_ctx *ctx, mt_axes axes, float *buf, size_t count);
/* psum divided by the group size (f32). */
mt_status mt_pmean(mt_ctx *ctx, mt_axes axes, float *buf, size_t count);
mt_status mt_pmax(mt_ctx *ctx, mt_axes axes, float *buf, size_t count);

/* all_gather: recv (P, count) = every device's send (count), in group-rank
 * order. "Stacked" and "tiled along dim 0" are the same bytes. */
mt_status mt_all_gather(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                        mt_dtype dtype);
/* psum_scatter: recv (count) = Σ over the group of send[r·count : (r+1)·count],
 * r = this device's group rank; send holds P·count. */
mt_status mt_psum_scatter(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                          mt_dtype dtype);
/* all_to_all: send (P, count) → recv (P, count), recv[j] = device j's send[r]. */
mt_status mt_all_to_all(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                        mt_dtype dtype);
/* ppermute: pairs[k] = {source rank, destination rank} in the group; each
 * rank appears at most once as a source and once as a destination. recv
 * (count) gets the source's send; a device that is no one's destination
 * receives zeros. */
mt_status mt_ppermute(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, size_t count,
                      mt_dtype dtype, const int (*pairs)[2], int n_pairs);
/* buf (count) on every device = buf of group rank `root`. In place. */
mt_status mt_broadcast(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype, int root);
mt_status mt_barrier(mt_ctx *ctx, mt_axes axes);

/* --- dimensioned forms over an array of `ndim` dims `shape` (local) ---
 * tiled all_gather concatenates along `dim` (recv dim = P·shape[dim]);
 * stacked inserts a new dim of size P before `dim`. tiled psum_scatter
 * splits `dim` into P blocks (shape[dim] % P must be 0, or MT_ESHAPE naming
 * both); untiled needs shape[dim] == P and drops the dim. all_to_all splits
 * `split_dim` into P blocks and concatenates the received ones on `concat_dim`. */
mt_status mt_all_gather_dim(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, mt_dtype dtype,
                            int ndim, const int64_t *shape, int dim, bool tiled);
mt_status mt_psum_scatter_dim(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                              mt_dtype dtype, int ndim, const int64_t *shape, int dim, bool tiled);
mt_status mt_all_to_all_dim(mt_ctx *ctx, mt_axes axes, const void *send, void *recv, mt_dtype dtype,
                            int ndim, const int64_t *shape, int split_dim, int concat_dim);

/* --- asynchronous forms: start, compute, wait. The buffers belong to the
 * collective until mt_wait returns (a device that returns without waiting
 * leaves them to its peers until the launch ends). At most MT_MAX_PENDING
 * per device. Requests complete in start order; a blocking collective first
 * completes the pending ones. On the threads transport a large request
 * (more than ~1-4 KiB per device) is started at once: when every device of
 * the group has started it, whichever devices are waiting move its data in
 * chunks, so a device computing between start and wait finds it done.
 * Small requests, check mode and MPI run it at the first wait (or blocking
 * collective) that needs it. */
#define MT_MAX_PENDING 16
typedef struct { int id; } mt_request;
mt_status mt_all_reduce_start(mt_ctx *ctx, mt_axes axes, void *buf, size_t count, mt_dtype dtype,
                              mt_reduce_op op, mt_request *req);
mt_status mt_all_gather_start(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                              size_t count, mt_dtype dtype, mt_request *req);
mt_status mt_psum_scatter_start(mt_ctx *ctx, mt_axes axes, const void *send, void *recv,
                                size_t count, mt_dtype dtype, mt_request *req);
mt_status mt_wait(mt_ctx *ctx, mt_request *req);

/* --- host arrays on the mesh --- */
/* local (the device's shard) = its slice of the global host array under the
 * sharding. global (ndim dims, shape) is read on every device (threads: one
 * shared array; MPI: each rank's copy). */
mt_status mt_shard_put(mt_ctx *ctx, const mt_sharding *sh, const float *global, int ndim,
                       const int64_t *shape, float *local);
/* global (full shape) on every device = all shards put back together (and
 * partial sums over sh->partial_axes summed). */
mt_status mt_shard_gather(mt_ctx *ctx, const mt_sharding *sh, const float *local, int ndim,
                          const int64_t *shape, float *global);

/* --- record of what happened --- */
/* Marks a compute region on the device's trace track (no-op when not tracing). */
void mt_trace_begin(mt_ctx *ctx, const char *name);
void mt_trace_end(mt_ctx *ctx);

/* Collectives this device issued so far, and the last one as text
 * ("#12 psum over 'data' f32 4096 bytes"). */
uint64_t    mt_ctx_collectives(const mt_ctx *ctx);
const char *mt_ctx_last_collective(const mt_ctx *ctx);

/* The pmap linear-regression example of the JAX docs, as a library function:
 * 3 features, replicated parameters, the global batch split over a 1-axis
 * mesh of `devices`, pmean of loss and gradients, SGD. Writes the loss of
 * every step to losses[steps] (same on every rank under MPI). The pmean is
 * taken in float64 (an all_gather of the local means, summed in rank order),
 * so every mesh gives the 1-device run's numbers bit for bit. */
typedef struct {
    int      devices;        /* mesh size (>= 1); under MPI, 0 = the world size */
    int      steps;          /* default 20 */
    int      batch;          /* global batch, divisible by devices; default 128 */
    float    lr;             /* default 0.1 */
    uint64_t seed;
    mt_transport_kind transport;
    const char *trace;
} mt_linreg_example_opts;
mt_status mt_example_linreg(const mt_linreg_example_opts *opts, float *losses, float params[4]);

/* ======================================================================== */
/* Runtime settings                                                          */
/* ======================================================================== */

/* Sets the number of threads kernels use (Open BLAS and meshtrain's own);
 * 0 picks the number of cores. */
void mt_set_num_threads(int n);
int  mt_get_num_threads(void);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_H */
