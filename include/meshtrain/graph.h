/*
 * meshtrain/graph.h — graphs: build once (leaves and ops), compile once
 * (autodiff with B/W-tagged backward nodes, one buffer plan, parameter
 * initialisation), run many times without allocating.
 */
#ifndef MESHTRAIN_GRAPH_H
#define MESHTRAIN_GRAPH_H

#include "meshtrain/backend.h"
#include "meshtrain/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_graph mt_graph;

/* Threads. A graph, its tensors and its nodes belong to one thread at a
 * time: every function that builds, names, shards, compiles, runs, profiles
 * or frees a graph, or writes a tensor's data, writes the graph, and two
 * threads must not call them on one graph at once (nor one of them while
 * another thread reads that graph). A device's graph (a shard_map graph
 * bound with mt_graph_set_ctx, or what mt_partition makes) is its device
 * thread's: it must be built, compiled, run and freed on that thread.
 *
 * What may be shared: a finished global program (built, its shardings set,
 * not compiled), read by every device thread at once through mt_partition()
 * (partition.h) and the read-only accessors (mt_graph_status,
 * mt_graph_errmsg, mt_graph_find, mt_graph_n_params, mt_graph_param_at and
 * the tensor getters such as mt_tensor_name, mt_tensor_dim,
 * mt_tensor_sharding). Finish it before the threads start (before
 * mt_launch), and free it after they have all returned (after mt_launch).
 * Unsafe, though natural on a shared graph: setting the shardings
 * (mt_tensor_set_sharding) or renaming tensors from inside the device
 * function, even to the same values on every device (each is a write); a
 * builder call, such as adding a device's own loss; compiling it. Such a
 * device function must build its own global graph (cheap: no memory is
 * allocated for tensors before compile), as the trainer does.
 *
 * Errors: mt_errmsg() is per thread; a graph's sticky error (mt_graph_status)
 * is part of the graph, so only its owner's calls set it. */

/* Creates an empty graph. Returns NULL only when out of memory. */
mt_graph *mt_graph_create(void);
void      mt_graph_free(mt_graph *g);

/* The nodes built from now on belong to transformer block `block` (0, 1,
 * ...), or to none (-1, the default): a model's builder says where each of
 * its blocks begins and ends, as the GPT's does per layer. Activation
 * checkpointing (mt_compile_opts.remat) recomputes by block, and traces
 * label each op with its block ("layer"); a node's backward nodes, and the
 * nodes a partition makes of it, belong to its block. Nothing reads tensor
 * names for this. MT_EINVAL (also the graph's status) below -1. */
mt_status mt_graph_set_block(mt_graph *g, int block);

/* Products (matmul, linear) built while on keep f32 under
 * MT_PRECISION_BF16 (operands uncast, sgemm), and so do their gradients'
 * products and the nodes a partition makes of them: for the few products
 * whose rounding decides something, a MoE router's logits (the top-k),
 * as every reference trainer keeps them. Off by default; f32 precision
 * runs every product in f32 anyway. MT_EINVAL for a NULL g. */
mt_status mt_graph_set_f32(mt_graph *g, bool on);

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

/* Marks an f32 input so that the backward computes its gradient, as a
 * pipeline stage that is not the first must send d loss / d x back to the
 * stage before it: after mt_graph_backward_b, mt_tensor_grad(input) holds
 * d loss / d input (input-gradient work, B: it does not wait for W). Each
 * backward overwrites it (it never accumulates across runs, unlike a
 * parameter's); it keeps its value until the next backward_b of the same
 * slot. Its gradient is NULL when the loss does not depend on the input.
 * Call before mt_graph_compile, before or after building the ops that read
 * the input. MT_EINVAL for NULL or a tensor that is not an f32 input made by
 * mt_input (a view of one included); MT_ESTATE once the graph is compiled. */
mt_status mt_input_set_needs_grad(mt_tensor *input);

/* The gradient tensor of a parameter (or of an activation that has one, or
 * of an input marked with mt_input_set_needs_grad) after mt_graph_compile();
 * NULL if it has none. */
mt_tensor *mt_tensor_grad(mt_tensor *t);

/* Copies elements [e0, e0 + n) of t (in t's dtype, row-major over its local
 * shape) into host memory `dst` (read), or from host memory `src` into t
 * (write), through its graph's backend (meshtrain/backend.h: copy_out,
 * copy_in): the way to reach a tensor's values on any backend, where
 * mt_tensor_f32() is a host pointer on the CPU's only. MT_EINVAL naming the
 * tensor for a range outside it; MT_ESTATE before mt_graph_compile (no
 * storage); MT_EUNSUPPORTED on a backend that holds no data (shape-only). A
 * write does not tell the graph that a parameter changed: call
 * mt_graph_params_changed after writing parameters. */
mt_status mt_tensor_read(mt_tensor *t, void *dst, int64_t e0, int64_t n);
mt_status mt_tensor_write(mt_tensor *t, const void *src, int64_t e0, int64_t n);

/* For loaders of whole tensors into a partitioned graph (a device's
 * parameter blocks, mt_partition), so that no whole copy of the model is
 * needed. mt_tensor_global_box: the box of the global tensor that t holds,
 * its offset along each of its ndim dims (origin) and its shape (shape;
 * mt_tensor_global_dim gives the global one); a tensor that is not a
 * parameter's block holds all of itself (origin 0). Read only those
 * elements of a file. mt_tensor_write_global: src holds elements [e0,
 * e0 + n) of t's global tensor (row-major over mt_tensor_global_dim); the
 * ones inside t's box are written (through mt_tensor_write), the rest
 * skipped, so every device may be handed the same whole rows. On a tensor
 * that is not a block, mt_tensor_write. MT_EINVAL naming the tensor for a
 * range outside the global tensor; mt_tensor_write's errors. */
mt_status mt_tensor_global_box(const mt_tensor *t, int64_t *origin, int64_t *shape);
mt_status mt_tensor_write_global(mt_tensor *t, const void *src, int64_t e0, int64_t n);

/* Renames a tensor (op outputs are named "<kind>.<id>" by default), so it
 * can be found with mt_graph_find(); names must stay unique in a graph. */
void mt_tensor_set_name(mt_tensor *t, const char *name);

/* mt_tensor_set_logical (sharding.h) for a model builder: names the logical
 * axes of t's dims ("heads,embed"), and a failure (or a NULL t, an earlier
 * builder's failure) becomes g's build error, so a chain of builders is
 * checked once. Returns t. */
mt_tensor *mt_graph_logical(mt_graph *g, mt_tensor *t, const char *axes);

/* Looks up a tensor by name (in constant time); NULL if there is none. */
mt_tensor *mt_graph_find(mt_graph *g, const char *name);

/* Parameters in declaration order. */
int        mt_graph_n_params(const mt_graph *g);
mt_tensor *mt_graph_param_at(const mt_graph *g, int i);

/* --- ops (each has a forward, a backward split into B and W parts, and a cost) --- */

/* out (M,N) = op(a) · op(b), op = transpose when the flag is set; leading dims
 * of a 3-D or 4-D `a` are folded into M (a (B,T,K) · b (K,N) -> (B,T,N)). */
mt_tensor *mt_matmul(mt_graph *g, mt_tensor *a, mt_tensor *b, bool trans_a, bool trans_b);
/* out (...,OC) = x (...,C) · w (OC,C)ᵀ + bias (OC); bias may be NULL. The
 * output may have several dims: w (O1,..,Ok,C) and bias (O1,..,Ok) give
 * out (...,O1,..,Ok), the same product on the same storage (GPT's q, k, v
 * as (3,C,C), whose C a mesh may split by heads). */
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
/* Causal multi-head self-attention: qkv (B,T,3C) packed [q|k|v], or the same
 * storage as (B,T,3,C), NH heads -> out (B,T,C) (heads concatenated; no
 * output projection). The (B,T,3,C) form lets a mesh split C, hence the
 * heads: tensor parallelism (each device then runs NH/n heads). */
mt_tensor *mt_attention(mt_graph *g, mt_tensor *qkv, int NH);
/* mt_attention within documents (packed sequences): docs int32 (B,T) holds
 * each token's document id, and a query sees only the keys of its own
 * document (and, causal, not later ones); NULL is mt_attention. The ids
 * are an input the caller fills (no gradient). Not yet with the sequence
 * split over devices (the partitioner refuses a split T). */
mt_tensor *mt_attention_docs(mt_graph *g, mt_tensor *qkv, int NH, mt_tensor *docs);
/* The LLaMA family's ops. Errors stick to the graph as for the others
 * (MT_ESHAPE for shapes, MT_EINVAL for parameters, naming the operands).
 *
 * out (...,C) = x (...,C) / sqrt(mean_c x² + eps) · w (C); eps in (0, 1).
 * A mesh must keep C whole (the rule gathers it, or explicit mode refuses);
 * every other dim may be split. */
mt_tensor *mt_rmsnorm(mt_graph *g, mt_tensor *x, mt_tensor *w, float eps);
/* out = silu(a) ⊙ b, silu(a) = a·σ(a), a and b the same shape (LLaMA's
 * w2(silu(w1 x) ⊙ w3 x) middle). Elementwise: any split passes when a and b
 * agree. */
mt_tensor *mt_swiglu(mt_graph *g, mt_tensor *a, mt_tensor *b);
/* Rotary position embedding of x (B,T,n_heads·HS), HS even, in llama2.c's
 * convention (run.c: each head's pairs (x[2i], x[2i+1]) rotated by the angle
 * pos·theta^(-2i/HS)), positions pos0 .. pos0+T-1; theta > 1 (10000;
 * Llama 3: 500000), pos0 >= 0. The angles are computed in double. A mesh
 * may split B, T (sequence parallelism: each device's rows keep their
 * global positions) and the last dim on whole heads. */
mt_tensor *mt_rope(mt_graph *g, mt_tensor *x, int n_heads, float theta, int64_t pos0);

/* RoPE's frequency scaling for contexts past the one trained on: which
 * rule changes the inverse frequencies theta^(-2i/HS) of the pairs. */
typedef enum {
    MT_ROPE_SCALING_NONE = 0,   /* the frequencies as they are */
    MT_ROPE_SCALING_LLAMA3,     /* Llama 3.1's piecewise rule (Meta's apply_scaling) */
    MT_ROPE_SCALING_YARN,       /* YaRN's ramp and attention factor (Peng et al. 2023) */
} mt_rope_scaling_kind;

/* The settings of a rule (the members a rule does not read are ignored;
 * an all-zero struct is no scaling). With wavelength λ_i = 2π / f_i of the
 * pair i's frequency f_i = theta^(-2i/HS), and L the original context:
 *  - llama3: λ_i < L / high_freq_factor keeps f_i; λ_i > L / low_freq_factor
 *    gives f_i / factor; between, (1 − s)·f_i/factor + s·f_i with
 *    s = (L/λ_i − low_freq_factor) / (high_freq_factor − low_freq_factor).
 *  - yarn: the pair index d_r = HS·ln(L / (2π·r)) / (2·ln theta) where
 *    a frequency turns r times over L; lo = floor(d_beta_fast) and hi =
 *    ceil(d_beta_slow), clamped to [0, HS−1]; the ramp γ_i = clamp((i − lo)
 *    / (hi − lo), 0, 1) (hi − lo at least 0.001) mixes f_i·(1 − γ_i) +
 *    (f_i / factor)·γ_i, and q and k are multiplied by attn_factor (0:
 *    YaRN's 0.1·ln(factor) + 1), which scales the logits by its square. */
typedef struct {
    int   kind;                /* mt_rope_scaling_kind */
    float factor;              /* s, the context's extension (Llama 3.1: 8) */
    float low_freq_factor;     /* llama3 (Llama 3.1: 1) */
    float high_freq_factor;    /* llama3 (Llama 3.1: 4) */
    int   original_context;    /* L, positions: the context trained on (Llama 3.1: 8192) */
    float beta_fast;           /* yarn: rotations over L where the ramp starts (YaRN: 32) */
    float beta_slow;           /* yarn: rotations over L where it ends (YaRN: 1) */
    float attn_factor;         /* yarn: q and k's multiplier; 0: 0.1·ln(factor) + 1 */
} mt_rope_scaling;

/* "none", "llama3" or "yarn" for a kind (NULL for another value); static. */
const char *mt_rope_scaling_name(int kind);
/* Checks s: a known kind; every member finite and not negative whatever
 * the kind (0: not set; an all-zero struct passes); and for a scaling
 * factor >= 1, original_context > 0, llama3's 0 < low_freq_factor <
 * high_freq_factor, yarn's beta_fast > beta_slow > 0. MT_EINVAL naming the
 * setting by its flag (--rope-factor, ...) with its value. NULL passes. */
mt_status mt_rope_scaling_check(const mt_rope_scaling *s);
/* The inverse frequency (radians per position) of the pair i (0 <= i <
 * HS/2) of a head of HS channels under s (NULL: none), in double. */
double mt_rope_inv_freq(const mt_rope_scaling *s, double theta, int64_t HS, int64_t i);
/* What q and k are multiplied by under s: yarn's attn_factor (0: YaRN's
 * 0.1·ln(factor) + 1), 1 otherwise. */
double mt_rope_mscale(const mt_rope_scaling *s);
/* mt_rope with the frequencies of `scaling` (mt_rope_inv_freq) and the
 * rotation multiplied by mt_rope_mscale(scaling); NULL or kind NONE is
 * mt_rope exactly. NULL with g's error set (MT_EINVAL) where
 * mt_rope_scaling_check refuses it. */
mt_tensor *mt_rope_scaled(mt_graph *g, mt_tensor *x, int n_heads, float theta, int64_t pos0,
                          const mt_rope_scaling *scaling);
/* Causal grouped-query attention: q (B,T,NH·HS), k and v (B,T,KV·HS), KV
 * divides NH, query head h reads kv head h / (NH/KV); out (B,T,NH·HS)
 * (heads concatenated; no output projection). KV == NH is multi-head, KV == 1
 * multi-query; the kernel is the GPT's (mt_attention). q and k must both
 * take gradients or neither (MT_EUNSUPPORTED). A mesh may split B and the
 * heads: q's last dim over axes of n devices when n divides NH; k's and v's
 * with it when n divides KV, else they stay whole (replicated) and each
 * device reads the kv heads its query heads read, their gradients summed
 * over the devices that share them. T must be whole. */
mt_tensor *mt_attention_gqa(mt_graph *g, mt_tensor *q, mt_tensor *k, mt_tensor *v, int NH, int KV);
/* mt_attention_gqa within documents: docs int32 (B,T) or NULL, as
 * mt_attention_docs. */
mt_tensor *mt_attention_gqa_docs(mt_graph *g, mt_tensor *q, mt_tensor *k, mt_tensor *v, int NH,
                                 int KV, mt_tensor *docs);
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
/* A sharding constraint (JAX's reshard / with_sharding_constraint): out = x,
 * laid out as `sh` (per dim the mesh axes; partial_axes keeps partial sums
 * that x holds). On one device it is a copy; the partitioner moves the data
 * (mt_shard_rule's "reshard"). In explicit mode it is the way out of every
 * ambiguity: a reshard right after an op whose result is ambiguous decides
 * it (e.g. a matmul with both contracting dims split: an all-reduce, a
 * reduce-scatter, or keeping the partial sum). */
mt_tensor *mt_reshard(mt_graph *g, mt_tensor *x, const mt_sharding *sh);
/* out = y, with the scalar `loss` attached: the backward gives y out's
 * gradient and loss the gradient s whatever out's is, so loss counts in
 * the model's loss times s though no path leads from it to out (Megatron's
 * MoEAuxLossAutoScaler): a pipeline stage that is not the last attaches
 * its mixture's router losses to its output so. loss may be a partial sum
 * over the axes splitting its rows; each device's share gets s. NULL with
 * g's error for a loss that is no f32 scalar (MT_ESHAPE) or s not finite. */
mt_tensor *mt_aux_attach(mt_graph *g, mt_tensor *y, mt_tensor *loss, float s);
/* out = x, marked as differing between the devices of the mesh axes that
 * the strategy's rules map the logical axis `logical` to ("mlp": the
 * tensor axes, under Megatron's rules): once partitioned, a pvary over them
 * (mt_graph_shard_by_rules resolves the name; no rule, or one device: a
 * copy). The ops reading out then need no pvary of their own, so the
 * gradients they send back to x are summed over those axes once, here,
 * rather than each on its own (a mixture's sorted rows are k times the
 * tokens). NULL with g's error (MT_EINVAL) for an empty or too long name. */
mt_tensor *mt_graph_varies(mt_graph *g, mt_tensor *x, const char *logical);

/* --- collectives inside a graph (shard_map) and the collective matmuls:
 * meshtrain/graph_spmd.h, included at the end of this header --- */

/* --- sharding rules ---
 * Every op has a sharding rule beside its gradient rule: from the types of
 * its inputs, the type of its result and the data movement it needs. Auto
 * mode moves data where the types disagree; explicit mode ("sharding in
 * types") refuses to guess and names the ambiguity and the reshard that
 * resolves it. */
typedef enum { MT_SHARD_AUTO = 0, MT_SHARD_EXPLICIT = 1 } mt_shard_mode;

typedef enum {
    MT_MOVE_ALL_GATHER = 0,   /* dim `dim` made whole over `axes` */
    MT_MOVE_ALL_REDUCE,       /* partial sums over `axes` summed; replicated after */
    MT_MOVE_REDUCE_SCATTER,   /* partial sums over `axes` summed, dim `dim` split over them */
    MT_MOVE_ALL_TO_ALL,       /* `axes` move from dim `dim` to dim `dim2` */
    MT_MOVE_SLICE             /* dim `dim` split over `axes` by keeping the local block:
                                 no communication */
} mt_move_kind;

/* "all-gather", "all-reduce", "reduce-scatter", "all-to-all", "slice"; "?" otherwise. */
const char *mt_move_name(mt_move_kind kind);

/* One data movement a rule asks for, on an operand before the op runs or on
 * its result after. */
typedef struct {
    mt_move_kind kind;
    int          operand;        /* index of the input moved; MT_MOVE_RESULT: the op's
                                    result; MT_MOVE_INSIDE: a collective inside the op
                                    (the Megatron recipes: statistics, masked lookup) */
    int          dim, dim2;      /* see mt_move_kind; -1 when unused */
    uint32_t     axes;           /* mesh axis bit set */
    mt_type      before, after;
    int64_t      bytes;          /* per device, nccl-tests' "size": the all-gather or
                                    all-to-all output, the all-reduce buffer, the
                                    reduce-scatter input; 0 for a slice */
} mt_move;

#define MT_MOVE_RESULT (-1)
#define MT_MOVE_INSIDE (-2)
#define MT_MAX_MOVES 8

typedef struct {
    mt_type result;
    int     n_moves;
    mt_move moves[MT_MAX_MOVES]; /* in the order they run */
} mt_shard_result;

/* The sharding rule of `op` on input types in[0 .. n_in):
 *   "matmul"   in[0] (...,M,K) · in[1] (K,N) -> (...,M,N)
 *   "add", "sub", "mul"  in[1] broadcast over the leading dims of in[0]
 *   "reshard"  in[0] moved to the layout of in[1] (same dtype and shape)
 * Fails with MT_ESHARDING and a message naming the op, the operand types and
 * the axes: both contracting dims sharded in explicit mode (listing the four
 * answers: all-reduce, reduce-scatter on either dim, keep the partial sum,
 * and that a reshard resolves it), incompatible shardings for broadcasting in
 * explicit mode ("add got incompatible shardings for broadcasting: ..."), a
 * result that would use one axis twice (both modes). MT_ESHAPE when the
 * shapes do not fit the op; MT_EINVAL for an op without a rule (named). */
mt_status mt_shard_rule(const mt_mesh *mesh, const char *op, const mt_type *in, int n_in,
                        mt_shard_mode mode, mt_shard_result *out);

/* --- compile and run --- */

/* Activation checkpointing policies (after MaxText's remat policies): what a
 * transformer block keeps from its forward for its backward, the rest being
 * recomputed at the start of the block's backward.
 *   NONE       keeps everything (the default);
 *   FULL       keeps only the block's inputs and output (the residual
 *              stream): its whole forward runs again, about one forward
 *              more per step;
 *   ATTENTION  recomputes only attention's probabilities (B,NH,T,T), the
 *              largest activation: attention's forward runs again;
 *   DOTS       keeps the matrix products' outputs (linear, matmul,
 *              attention's output) and recomputes the elementwise ops
 *              (layernorm, GELU, adds) and attention's probabilities.
 * Values a collective made, views, and values other blocks read are always
 * kept. */
typedef enum {
    MT_REMAT_NONE = 0,
    MT_REMAT_FULL,
    MT_REMAT_ATTENTION,
    MT_REMAT_DOTS,
} mt_remat;

/* "none", "full", "attention", "dots"; "?" otherwise. */
const char *mt_remat_name(mt_remat r);
/* The policy named `name` into *out; MT_EINVAL naming the four otherwise. */
mt_status   mt_remat_parse(const char *name, mt_remat *out);
/* mt_precision (meshtrain/tensor.h) is what the matrix products compute in;
 * whether this build and CPU run bf16 products (mt_precision_check,
 * mt_bf16_native, mt_bf16_fallback) is the CPU backend's, in
 * meshtrain/backend.h. */

/* The cap of a backward's first gradient bucket (mt_compile_opts.bucket_bytes),
 * PyTorch DDP's _DEFAULT_FIRST_BUCKET_BYTES: 1 MiB. */
#define MT_FIRST_BUCKET_BYTES (1024.0 * 1024.0)

typedef struct {
    uint64_t seed;          /* parameter initialisation seed */
    bool     no_grad;       /* forward only: no backward, no gradient buffers */
    /* The backward starts from a cotangent the caller supplies, as a
     * pipeline stage that is not the last (its result y goes to the next
     * stage, which sends back d loss / d y): `loss` may be any f32 tensor,
     * and before each mt_graph_backward_b the caller fills
     * mt_tensor_grad(loss) with d loss / d loss-tensor (a scalar loss
     * otherwise gets the constant 1). Nothing in the graph writes that seed
     * and its bytes are never reused: it keeps its value through B and W
     * (W reads it, e.g. the last linear's weight gradient). The result
     * (mt_tensor_f32(loss)) keeps its value after the forward too.
     * mt_graph_loss() then returns NAN. */
    bool     seed_from_caller;
    /* Activation checkpointing: which forward values of each transformer
     * block (the forward nodes the model's builder tagged with one block,
     * mt_graph_set_block) are recomputed in the backward instead of kept
     * (mt_remat).
     * The recomputation runs as B nodes just before the first B node that
     * reads one of the block's recomputed values; the block's backward
     * nodes (B and W) read the recomputed copies, so the originals die in
     * the forward and the plan reuses their bytes. Deterministic kernels:
     * losses and gradients are bitwise those of MT_REMAT_NONE. */
    mt_remat remat;
    /* The caller runs B and W back to back (mt_graph_backward, never a
     * forward in between): each W node runs as soon as the B nodes it reads
     * from are done, so a block's saved and recomputed values die within
     * its backward instead of waiting for the whole B phase. The W nodes
     * join B's run order (mt_graph_backward_b runs them, in their relative
     * order; mt_graph_backward_w then runs none). Gradients are bitwise
     * the same. Not for pipeline stages, whose schedules run W later. */
    bool     interleave_w;
    /* The matrix products' precision (MT_PRECISION_FP32, the zero value, by
     * default). With MT_PRECISION_BF16 every bf16 product's oneDNN primitive is made
     * here, once per shape; compile fails with mt_precision_check's error
     * in a build without oneDNN. */
    mt_precision precision;
    /* With MT_PRECISION_BF16: keep every activation in f32. By default
     * (false) an activation whose every reader, forward and backward, is a
     * bf16 product (the layernorms', attention's and GELU's outputs of a
     * GPT) is stored in bf16: half its bytes in the arena, and the products
     * read it without a cast. Its producer computes in f32 and rounds to
     * nearest even, as a product casting it would: losses and gradients are
     * bitwise those of true. Such a tensor's mt_tensor_f32() is NULL (its
     * dtype is MT_BF16). Ignored for MT_PRECISION_FP32. */
    bool     f32_activations;
    /* The precision gradient reductions move in (MT_PRECISION_FP32, the
     * zero value, by default). MT_PRECISION_BF16: the parameter gradients'
     * reductions in W (data parallelism's all-reduces, FSDP's and ZeRO's
     * reduce-scatters) cast each gradient to bf16, reduce it in bf16 (each
     * addition in f32, rounded to bf16) and cast the result back: half the
     * bytes. Independent of `precision`. */
    mt_precision grad_reduce;
    /* Gradient buckets (PyTorch DDP's bucket_cap_mb): W's deferred f32
     * all-reduces of parameter gradients (data parallelism's) are copied,
     * in the order W reaches them, into one contiguous bucket of up to
     * bucket_bytes (a gradient of that or more goes alone, uncopied),
     * and a bucket's one all-reduce starts when its last gradient is
     * complete, so a step costs a few messages, not one a tensor. The first
     * bucket of a backward holds at most MT_FIRST_BUCKET_BYTES (as DDP's), so
     * that the reductions start early. Completion
     * adds each gradient's slice of the bucket to it. A bucket starts early
     * when a later node needs a gradient in it. The f32 reduce-scatters
     * (fsdp, ZeRO 2 and 3) are bucketed the same way, laid out shard-major
     * (each device's shard of every gradient together), one reduce-scatter
     * a bucket; bf16 reductions (grad_reduce) stay one a tensor. The
     * program keeps one bucket block of every bucketed gradient's floats
     * (a reduce-scatter's: its shards, its result and one bucket's worth
     * more). 0 (the zero value): one reduction per gradient. */
    size_t   bucket_bytes;
    /* Where the graph's buffers live and its nodes run (backend.h); NULL is
     * mt_backend_cpu(), host memory and the CPU kernels. On
     * mt_backend_shape_only() compile plans every buffer (the stats' byte
     * counts are the CPU backend's, exactly) but allocates none, initialises
     * no parameter and prepares no bf16 product; every tensor's data is NULL
     * and running the graph fails with MT_EUNSUPPORTED. */
    const mt_backend *backend;
} mt_compile_opts;

/* Marks `loss` (a scalar, or with seed_from_caller any f32 tensor) as the
 * value to differentiate, builds the backward graph (each node tagged B or
 * W), plans every buffer once, allocates, and initialises parameters. After
 * this the graph runs without allocating. MT_ESHAPE for a loss that is not
 * an f32 scalar (without seed_from_caller); MT_EINVAL for a loss that
 * depends on no parameter and no input marked with mt_input_set_needs_grad. */
mt_status mt_graph_compile(mt_graph *g, mt_tensor *loss, const mt_compile_opts *opts);

/* Runs the forward pass, then the input-gradient (B) nodes, then the weight-
 * gradient (W) nodes. Parameter gradients ACCUMULATE across calls (that is
 * gradient accumulation); mt_graph_zero_grad() clears them. F, then B, then W
 * gives exactly the gradient mt_graph_backward() gives. Buffers are planned
 * for that order: do not run a forward between the B and the W of the same
 * slot (mt_graph_set_slots gives a graph several, to interleave
 * microbatches). A parameter the loss does not use gets no gradient (its
 * mt_tensor_grad() is NULL) and optimizers leave it as it is.
 * On a device (mt_graph_set_ctx), pvary's gradient all-reduce overlaps the
 * rest of W: it starts (mt_all_reduce_start, on the device's request queue,
 * at most MT_MAX_PENDING in flight) when W reaches it and completes before
 * anything needs it, at the latest when mt_graph_backward_w returns; every
 * device of the group must run the same graph. Requests the caller holds
 * across a backward share that queue (when it is full a reduction runs as it
 * comes), so every device must hold as many. Each phase is a region on the
 * device's trace track ("forward", "backward B", "backward W"), which ends a
 * region the caller opened, and holds a span per node (mt_trace_op_begin:
 * its op, phase, layer, FLOPs and bytes, output). */
mt_status mt_graph_forward(mt_graph *g);
mt_status mt_graph_backward_b(mt_graph *g);
mt_status mt_graph_backward_w(mt_graph *g);
mt_status mt_graph_backward(mt_graph *g);
/* Gradient accumulation without a reduction a microbatch (DDP's no_sync):
 * with `later` set, the next backwards leave the parameter gradients'
 * data-parallel all-reduces (W's, pvary's backward) to a later one: each
 * device adds its own gradient into the parameter's, nothing is sent. The
 * first backward with it cleared again reduces every pass's sum once, so k
 * microbatches cost one all-reduce a gradient, not k; the gradients are
 * those of reducing each pass (up to the order of additions). It applies
 * only from zeroed gradients (mt_graph_zero_grad, or an optimizer step
 * since the last backward) or after such local passes: onto gradients that
 * already hold a reduced sum a backward reduces as without it. Every
 * device of the group must set it alike. Reduce-scatters (fsdp, ZeRO 2/3)
 * and all-reduces into a buffer (ZeRO-1's) are not left. MT_ESTATE before
 * compile. Read when the W pass starts (mt_graph_backward_w; mt_graph_backward
 * runs B then W). */
mt_status mt_graph_set_reduce_later(mt_graph *g, bool later);
void      mt_graph_zero_grad(mt_graph *g);

/* Tells a graph compiled with MT_PRECISION_BF16 that its parameters were written, so
 * that the next forward casts them into its bf16 weight copies again (a
 * stale copy is never read). mt_optim_step, the checkpoint loaders and the
 * trainer call it; code that writes parameters through mt_tensor_f32()
 * after the graph's first forward must call it too. Compiling counts as a
 * change. Free for an fp32 graph. */
void      mt_graph_params_changed(mt_graph *g);

/* Adds `label` to the names of the phases' trace regions ("forward mb 3
 * chunk 1" for label "mb 3 chunk 1"; at most 23 characters are kept):
 * a pipeline marks which microbatch each region ran. NULL or "" removes it. */
void mt_graph_set_trace_label(mt_graph *g, const char *label);

/* The loss after the last forward of the current slot; NAN for a graph
 * compiled with seed_from_caller (its "loss" is no scalar). */
float mt_graph_loss(const mt_graph *g);

/* --- slots: several microbatches in flight ---
 * A pipeline stage runs, per microbatch j, F(j), B(j) and W(j) in a
 * schedule that interleaves microbatches (F0 F1 F2 B0 F3 W0 B1 ...). Each
 * microbatch in flight needs its own per-run state; a slot is one such set:
 * the activation arena (every planned buffer: activations, saved
 * statistics, activation gradients, gathered parameters), the inputs and
 * their gradients (mt_input_set_needs_grad), the loss or caller-supplied
 * seed (and the result it belongs to) and mt_graph_loss()'s value.
 * Parameters, their gradients, constants and the kernels' scratch are
 * shared by all slots. */

/* Gives a compiled graph n slots. Slot 0 is the graph's existing state and
 * keeps its contents; slots 1..n-1 are allocated here (each one arena of
 * the planned size, contents undefined, and zeroed inputs); an n smaller
 * than before frees the slots past n-1 (n = 1: all but slot 0), switching
 * to slot 0 first when the current slot goes. mt_graph_get_stats() reports
 * n_slots and arena_bytes over all of them. MT_ESTATE before
 * mt_graph_compile, MT_EINVAL for n < 1, MT_ENOMEM when a slot cannot be
 * allocated (the graph keeps the slots it has, as the message says). */
mt_status mt_graph_set_slots(mt_graph *g, int n);

/* Makes slot k the one the next runs use, and the one mt_tensor_f32() and
 * mt_tensor_grad() of inputs, of the loss (or the output and its seed) and
 * of any activation refer to, and mt_graph_loss() reads: pointers taken
 * from mt_tensor_f32() of those tensors before the switch point into the
 * previous slot. Parameters and their gradients are the same in every slot.
 * A slot's F, B and W must run in that order, as always, but other slots'
 * phases may run between them: F(slot 0), F(slot 1), B(slot 0), W(slot 0),
 * B(slot 1), W(slot 1) computes exactly (bitwise) what running each slot's
 * F, B, W back to back computes, parameter gradients accumulating over all
 * W runs in the order the W runs come, as over repeated backwards (after an
 * optimizer step the first W of any slot starts them from zero; step only
 * when no slot is between its F and its W). Costs a pass over the graph's
 * tensors (pointers only, no copy); switching to the current slot is free.
 * MT_ESTATE before mt_graph_compile, MT_EINVAL for k outside [0, n). */
mt_status mt_graph_use_slot(mt_graph *g, int k);

#ifdef __cplusplus
}
#endif

#include "meshtrain/graph_spmd.h"
#include "meshtrain/graph_inspect.h"
#include "meshtrain/graph_moe.h"

/* How attention over a sequence split head-tail talks
 * (../shared/CONTEXT_PARALLEL.md; mt_train_config.cp_attention): all-gather
 * k and v (§5), the ring of k, v sends with the dK, dV accumulator
 * travelling home (§4), or Ulysses' all-to-alls over heads (§6). The
 * partitioner takes ring and Ulysses as lowering variants by name
 * (mt_partition_opts.lowerings: "ring_attention,ring_attention_gqa",
 * "ulysses_attention,ulysses_attention_gqa"). */
enum { MT_CP_ALLGATHER = 0, MT_CP_RING = 1, MT_CP_ULYSSES = 2 };

#endif /* MESHTRAIN_GRAPH_H */
