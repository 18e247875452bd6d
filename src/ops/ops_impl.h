/*
 * ops_impl.h — the ops: the list of them (MT_OP_LIST), what one call of an
 * op reads and writes, and the kernel half of its descriptor {name, arity,
 * cost, cost class; run, scratch} (internal).
 *
 * This layer knows tensors and kernels, not graphs. A call (mt_op_call) names
 * its output(s), inputs, saved tensors, accumulate flags and parameters; an
 * environment (mt_op_env) lends it threads and scratch, and the collective
 * ops (collective.c) the device they run on. Who makes calls, in
 * which order they run and how gradients flow is the graph layer's business:
 * its builders make the forward calls and its gradient rules the backward
 * ones (graph/grad_rules.c), as ggml's core builds the graph and its backends
 * only compute.
 *
 * Shape letters: B batch, T time, C channels, NH heads, OC output channels,
 * V vocabulary, Vp padded vocabulary, rows = any number of leading rows.
 */
#ifndef MT_OPS_IMPL_H
#define MT_OPS_IMPL_H

#include "base/pool.h"
#include "meshtrain/comm.h"
#include "ops/moe.h"
#include "tensor/tensor_impl.h"

/* Every op, forward ones and the backward ones the gradient rules emit: one
 * X(NAME, name) line each, from which the enum (MT_OP_NAME), the kernel
 * half of the descriptors (op_table.c: mt__opdef_name) and the graph half
 * (graph/op_desc.c: mt__gop_name) are generated, so an op's two halves are
 * named definitions in its own files (ops/rope.c, graph/op_rope.c). Each
 * line says which member of mt_op_params it reads. The order is the enum's,
 * which only the profiler's rows follow. */
#define MT_OP_LIST(X)                                                                              \
    /* forward */                                                                                  \
    X(MATMUL, matmul)          /* p.gemm */                                                        \
    X(LINEAR, linear)          /* p.linear */                                                      \
    X(ADD, add) X(SUB, sub) X(MUL, mul)                                                            \
    X(SCALE, scale)            /* p.scale */                                                       \
    X(GELU, gelu)                                                                                  \
    X(LAYERNORM, layernorm)    /* p.rows; aux = {mean, rstd} (rows) */                             \
    X(ATTENTION, attention)    /* p.attention; aux = {lse} (B,NH,T) */                             \
    X(EMBEDDING, embedding)    /* p.embedding */                                                   \
    X(CROSS_ENTROPY, cross_entropy) /* p.ce; aux = {lse} (rows) */                                 \
    X(MSE, mse)                /* p.mse (scale) */                                                 \
    X(SUM, sum)                /* p.scale: out = s · Σ in0 (1/n for a mean) */                     \
    X(TRANSPOSE, transpose)    /* p.transpose */                                                   \
    X(RESHARD, reshard)        /* out = in0, a sharding constraint: p.reshard is the */            \
                               /* layout the partitioner gives out (one device: a copy) */         \
    /* the LLaMA family's (norm.c, rope.c, elementwise.c, attention.c) */                          \
    X(RMSNORM, rmsnorm)        /* p.rmsnorm; in: x w; aux = {rstd} (rows) */                       \
    X(ROPE, rope)              /* p.rope; in: x (B,T,NH·HS) */                                     \
    X(SWIGLU, swiglu)          /* out = silu(in0 a) · in1 b, same shapes */                        \
    X(ATTENTION_GQA, attention_gqa) /* p.gqa; in: q k v; aux = {lse} (B,NH,T) */                   \
    /* collectives (collective.c): device-local tensors, comm.h over p.coll.axes;                  \
     * the gradient rules use them as backward calls too */                                        \
    X(PSUM, psum)              /* out (+)= Σ_group in0; same shape */                              \
    X(ALL_GATHER, all_gather)  /* out (+)= in0 of every rank concatenated on p.coll.dim */         \
    X(PSUM_SCATTER, psum_scatter) /* out (+)= block r of Σ_group in0 along p.coll.dim */           \
    X(PPERMUTE, ppermute)      /* out (+)= in0 of the rank whose pair sends here (p.coll.pairs) */ \
    X(ALL_TO_ALL, all_to_all)  /* split p.coll.dim into P blocks, concat received on */            \
                               /* p.coll.dim2 */                                                   \
    X(PVARY, pvary)            /* out (+)= in0 (identity, no communication) */                     \
    X(SLICE, slice)            /* out (+)= block r of in0 along p.coll.dim (no communication) */   \
    /* collective matmuls (collective_matmul.c): a product whose operand is                        \
     * split over p.cm.axes, run as a ring of ppermutes, each step's transfer                      \
     * overlapping the step's product; forward ops, used as backward calls too */                  \
    X(AG_LINEAR, ag_linear)    /* out (+)= all_gather(in0) · op(in1) [+ in2]; p.cm; the */         \
                               /* gathered in0 saved chunk-major in aux[0] (a forward) */          \
                               /* or out2 (a backward) */                                          \
    X(LINEAR_RS, linear_rs)    /* out (+)= block r of Σ_group in0 · op(in1); p.cm */               \
    /* ring attention (attention_ring.c): k, v around the ring of p.ring.cm */                     \
    X(RING_ATTENTION, ring_attention) /* p.ring; in: qkv, or q k v; aux = {lse} (B,NH,T) */        \
    /* mixtures of experts (moe_ops.c): rows are tokens, ids int32 (rows,k); the                   \
     * sorted rows (rows,k,.) are a device's (token, slot) pairs in expert order */                \
    X(MOE_ROUTE, moe_route)    /* p.moe; in: logits (rows,E) [bias (E)] -> ids (rows,k) int32 */   \
    X(MOE_GATES, moe_gates)    /* p.moe; in: logits ids -> gates (rows,k); aux = {scores} */       \
    X(MOE_CAPACITY, moe_capacity) /* p.moe; in: ids (S,L,k) [gates] -> ids, -1 past capacity */     \
    X(MOE_DISPATCH, moe_dispatch) /* p.moe; in: x (rows,D) ids -> xs (rows,k,D) sorted */          \
    X(MOE_EXPERTS, moe_experts) /* p.moe; in: xs (rows,k,C) w (E,C,OC) ids -> (rows,k,OC) */       \
    X(MOE_COMBINE, moe_combine) /* p.moe; in: ys (rows,k,D) gates ids -> (rows,D) */               \
    X(MOE_ROUTER_LOSS, moe_router_loss) /* p.moe; in: logits (S,L,E) ids -> () */                  \
    X(AUX_ATTACH, aux_attach)  /* out = in0; in1 a scalar loss whose gradient is p.scale.s */       \
    X(VARIES, varies)          /* out = in0, differing over p.varies.axes once partitioned */     \
    /* backward */                                                                                 \
    X(GEMM, gemm)              /* out (+)= op(in0) · op(in1); p.gemm */                            \
    X(BIAS_GRAD, bias_grad)    /* out (OC) (+)= Σ_rows in0; p.rows (C = OC) */                     \
    X(REDUCE_BCAST, reduce_bcast) /* out (nb) (+)= s · Σ_repeats in0; p.scale */                   \
    X(SCALE_BWD, scale_bwd)    /* out (+)= s · in0; p.scale */                                     \
    X(MUL_BWD_A, mul_bwd_a)    /* out (+)= in0 (dout) · in1 (b, broadcast) */                      \
    X(MUL_BWD_B, mul_bwd_b)    /* out (nb) (+)= Σ in0 (dout) · in1 (a) */                          \
    X(GELU_BWD, gelu_bwd)      /* out (+)= gelu'(in0 x) · in1 dout */                              \
    X(LN_BWD_INPUT, ln_bwd_input) /* out (+)= dx; in: dout x w mean rstd; p.rows */                \
    X(LN_BWD_PARAMS, ln_bwd_params) /* out (+)= dw, out2 (+)= db; in: dout x mean rstd; p.rows */  \
    X(ATTENTION_BWD, attention_bwd) /* out (+)= dqkv; in: dout qkv out lse; p.attention */         \
    X(EMBEDDING_BWD, embedding_bwd) /* out (+)= scatter(in0 dout) at in1 ids; p.embedding */       \
    X(CE_BWD, ce_bwd)          /* out (+)= dlogits; in: dloss logits lse targets; p.ce */          \
    X(MSE_BWD, mse_bwd)        /* out (+)= sign · d pred; in: dloss pred target; p.mse */          \
    X(FILL_BWD, fill_bwd)      /* out (+)= s · dloss (in0, a scalar); p.scale */                   \
    X(TRANSPOSE_BWD, transpose_bwd) /* out (+)= transpose(in0); p.transpose */                     \
    X(CM_WGRAD, cm_wgrad)      /* out (K,N) (+)= Σ_blocks in0ᵀ · in1, either chunk-major; p.cm */  \
    X(RMS_BWD_INPUT, rms_bwd_input) /* out (+)= dx; in: dout x w rstd; p.rmsnorm */                \
    X(RMS_BWD_PARAMS, rms_bwd_params) /* out (+)= dw; in: dout x rstd; p.rmsnorm */                \
    X(ROPE_BWD, rope_bwd)      /* out (+)= dx, dout (in0) rotated back; p.rope */                  \
    X(SWIGLU_BWD_A, swiglu_bwd_a) /* out (+)= da; in: a b dout */                                  \
    X(SWIGLU_BWD_B, swiglu_bwd_b) /* out (+)= db; in: a dout */                                    \
    X(SWIGLU_BWD, swiglu_bwd)  /* out (+)= da, out2 (+)= db; in: a b dout (both take grads) */   \
    X(GQA_BWD_QK, gqa_bwd_qk)  /* out (+)= dq, out2 (+)= dk; in: dout q k v out lse; p.gqa */      \
    X(GQA_BWD_V, gqa_bwd_v)    /* out (+)= dv; in: dout q k lse; p.gqa */                          \
    X(RING_ATTENTION_BWD, ring_attention_bwd) /* p.ring; in: dout qkv out lse -> out dqkv, or */   \
                               /* dout q k v out lse -> out dq, out2 dk, aux[0] dv (written) */    \
    X(MOE_GATES_BWD, moe_gates_bwd) /* out (+)= dlogits; in: dgates scores ids; p.moe */           \
    X(MOE_DISPATCH_BWD, moe_dispatch_bwd) /* out (+)= dx; in: dxs ids; p.moe */                    \
    X(MOE_EXPERTS_BWD_X, moe_experts_bwd_x) /* out (+)= dxs; in: dy w ids; p.moe */                \
    X(MOE_EXPERTS_BWD_W, moe_experts_bwd_w) /* out (+)= dw; in: dy xs ids; p.moe */                \
    X(MOE_COMBINE_BWD_Y, moe_combine_bwd_y) /* out (+)= dys; in: dout gates ids; p.moe */          \
    X(MOE_COMBINE_BWD_G, moe_combine_bwd_g) /* out (+)= dgates; in: dout ys ids; p.moe */          \
    X(MOE_ROUTER_LOSS_BWD, moe_router_loss_bwd) /* out (+)= dlogits; in: dloss logits ids */     \
    X(AUX_SEED, aux_seed)      /* out (a scalar) (+)= p.scale.s; in: dout (ordering only) */

typedef enum {
#define MT_OP_ENUM_(NAME, name) MT_OP_##NAME,
    MT_OP_LIST(MT_OP_ENUM_)
#undef MT_OP_ENUM_
    MT_OP_COUNT
} mt_op;

/* gqa_bwd_qk's six: dout, q, k, v and the forward's out and lse */
#define MT_MAX_INPUTS 7   /* gqa_bwd_qk with document ids */

/* ---- parameters, one struct per op family ------------------------------- */

/* out (M,N) (+)= op(A) (M,K) · op(B) (K,N), op() a transpose when ta / tb. */
typedef struct { bool ta, tb; int64_t M, N, K; } mt_gemm_params;
/* out (rows,OC) = x (rows,C) · w (OC,C)ᵀ + b (OC). */
typedef struct { int64_t rows, OC, C; } mt_linear_params;
/* rows of C channels, each reduced or normalised on its own. */
typedef struct { int64_t rows, C; } mt_rows_params;
/* causal self-attention over qkv (B,T,3C) with NH heads. Split (parts >
 * 1): the T query rows are a device's head-tail share of a sequence of Tk =
 * parts·T (mt_headtail_pos, device `part`), read from in0, and the keys and
 * values the whole sequence's, gathered from the parts in device order, read
 * from in1 (B,Tk,3C) (its q columns unread). parts 0 or 1: one operand, Tk = T. */
/* doc: the index in the call's in[] of the document ids, int32 (B,T) (each
 * token's document: a query sees only its own document's keys, packed
 * sequences), or 0: one document. Not with parts > 1 (the kernel's
 * position masks and document ids do not combine). */
typedef struct { int64_t B, T, C, NH; int64_t Tk, parts, part; int64_t doc; } mt_attention_params;
/* RMS normalisation of rows of C channels: x / sqrt(mean x² + eps). */
typedef struct { int64_t rows, C; float eps; } mt_rmsnorm_params;
/* RoPE's frequency scaling, the members of meshtrain/graph.h's
 * mt_rope_scaling (documented there; ops sit below graph): kind 0 (none)
 * leaves the frequencies and the rotation's scale as they are. */
enum { MT__ROPE_NONE = 0, MT__ROPE_LLAMA3 = 1, MT__ROPE_YARN = 2 };   /* = graph.h's kinds */
typedef struct {
    int   kind;                                   /* MT__ROPE_*: mt_rope_scaling_kind */
    float factor, low_freq_factor, high_freq_factor;
    int   original_context;                       /* positions */
    float beta_fast, beta_slow, attn_factor;
} mt_rope_scale;
/* Rotary embedding of x (B,T,NH·HS) at positions pos0 .. pos0+T-1, angle
 * pos · f_i for the pair (2i, 2i+1) of every head, f_i = theta^(-2i/HS)
 * changed by `scale` (mt__rope_inv_freq), the rotation times
 * mt__rope_mscale(&scale). parts > 1: row t is at pos0 +
 * mt_headtail_pos(t, T, parts, part) (a device's head-tail share of a
 * split sequence). */
typedef struct {
    int64_t       B, T, NH, HS;
    float         theta;
    int64_t       pos0, parts, part;
    mt_rope_scale scale;
} mt_rope_params;

/* The inverse frequency of the pair i (0 <= i < HS/2) of a head of HS
 * channels, theta^(-2i/HS) changed by s (ops/rope.c; meshtrain/graph.h's
 * mt_rope_inv_freq states the rules). */
double mt__rope_inv_freq(const mt_rope_scale *s, double theta, int64_t HS, int64_t i);
/* What the rotation is multiplied by under s: yarn's attention factor, else
 * 1 exactly. */
double mt__rope_mscale(const mt_rope_scale *s);
/* Causal grouped-query attention: q (B,T,NH·HS), k and v (B,T,KV·HS); query
 * head h reads kv head (hoff + h) / G, G the query heads per kv head of the
 * whole op and hoff the query heads before this one's first (0 on one
 * device; a device holding a share of the heads, partition's lowering, sets
 * it so that its heads read the kv heads they read globally). */
/* Split (parts > 1): q holds a device's head-tail share of T rows of a
 * sequence of Tk = parts·T, k and v the whole sequence's Tk rows gathered
 * from the parts in device order (as mt_attention_params). */
/* doc: the index of the document ids in in[], or 0 (as mt_attention_params). */
typedef struct {
    int64_t B, T, NH, KV, HS, G, hoff;
    int64_t Tk, parts, part;
    int64_t doc;
} mt_gqa_params;
/* n ids into a table (V,C). */
/* masked (vocabulary parallel): the table holds rows [lo, lo+V) of the
 * vocabulary; an id outside reads zeros and scatters nothing. */
typedef struct { int64_t n, C, V; bool masked; int64_t lo; } mt_embedding_params;
/* softmax cross-entropy over the first V of Vp columns of logits (rows,Vp);
 * the loss is scale · Σ_rows. */
/* Vocabulary parallel (vp_axes.n > 0): the logits hold columns [lo, lo+Vp)
 * of the vocabulary, V is the global one, and the row statistics (max, sum
 * of exponentials, the target's logit) are all-reduced over vp_axes inside
 * the op (Megatron); every device then has the whole loss. */
typedef struct {
    int64_t rows, V, Vp;
    float   scale;
    mt_axes vp_axes;
    int64_t lo;
} mt_ce_params;
/* loss = scale · Σ (pred - target)²; sign (backward only) is +1 for d pred,
 * -1 for d target. */
typedef struct { float scale, sign; } mt_mse_params;
/* a scalar factor. */
typedef struct { float s; } mt_scale_params;
/* out (batch,Cc,R) = in (batch,R,Cc) with the last two dims swapped. */
typedef struct { int64_t batch, R, Cc; } mt_transpose_params;

/* a collective over the group of the running device over `axes`: `dim`
 * (all_gather, psum_scatter, slice; all_to_all's split dim), `dim2`
 * (all_to_all's concat dim), -1 where unused; ppermute's pairs[k] = {source
 * rank, destination rank}, owned by the graph that made the call. The group
 * size P and rank r come from env->ctx when the call runs; the local shapes
 * from the tensors. `async` (PSUM only): the call's input is read by this
 * call alone and nothing in its phase waits for its output but later writers
 * of the same gradient, so a runner may start the reduction in place on the
 * input and complete it later (graph/exec.c does so in W: pvary's backward,
 * the data-parallel gradient all-reduce). run() ignores it. `invariant`
 * (ALL_GATHER only): the result is the same on every device and counts
 * once, so its gradient is this device's block of the cotangent (a slice),
 * not a psum_scatter; run() ignores it. */
typedef struct {
    mt_axes     axes;
    int         dim, dim2;
    int         n_pairs;
    const int (*pairs)[2];
    bool        async;
    bool        invariant;
    /* bf16 on the wire (graph/precision.c sets these; NULL / false: f32).
     * ALL_GATHER: gather16 is a bf16 copy of in0 (its numel), gathered as
     * bf16 into the first half of out's bytes, which only bf16 products read
     * (they read those bytes as their bf16 operand). PSUM, PSUM_SCATTER:
     * bf16 reduces in bf16 (f32 in and out, cast around the transport). */
    const uint16_t *gather16;
    bool        bf16;
} mt_coll_params;

/* A collective matmul over the group of the running device over `axes` (P
 * devices, this one group rank r), its operand split along `dim` (not the
 * last). Rows are read as blocks: with outer = Π of the whole operand's dims
 * before `dim` and R = (dim size / P) · Π of its dims between `dim` and the
 * last, a whole operand is (outer, P, R, ·) rows and chunk j (device j's
 * share) is its blocks [o, j, :, :] for every o; a local chunk is
 * (outer, R, ·), and a gathered operand saved "chunk-major" is
 * (P, outer, R, ·), device j's chunk at [j] (contiguous, as a ring step
 * moves it). K is the contracted size, N the product's; op(w) = wᵀ for
 * w (N,K), mt_linear's layout, or w itself for w (K,N) when w_kn. P is the
 * group size the graph was built for; ring its pairs {k, k+1 mod P} (every
 * step sends to the next rank), owned by the graph.
 *   AG_LINEAR  in0 x (outer,R,K), in1 w, [in2 bias (N)] -> out (outer,P,R,N);
 *              the gathered x (P,outer,R,K) goes to aux[0] or out2.
 *   LINEAR_RS  in0 h (outer,P,R,K), in1 w -> out (outer,R,N) = block r of
 *              the sum over the group.
 *   CM_WGRAD   out (K,N) (+)= Σ_{o,j} in0[o,j]ᵀ (R,K) · in1[o,j] (R,N): a
 *              weight gradient; a_cm / b_cm: in0 / in1 is chunk-major, else
 *              whole (outer,P,R,·) rows. No communication. */
typedef struct {
    mt_axes     axes;
    int         dim;
    int         P;
    const int (*ring)[2];
    int64_t     outer, R, K, N;
    bool        w_kn;
    bool        a_cm, b_cm;
} mt_cm_params;

/* Ring attention (attention_ring.c; ../shared/CONTEXT_PARALLEL.md §4): each
 * device of the group over cm.axes holds its head-tail share of T rows of
 * every sequence (mt_headtail_pos); q (B,T,NH·HS), k and v (B,T,KV·HS),
 * query head h reading kv head (hoff + h) / G as mt_gqa_params; packed:
 * one qkv (B,T,3·NH·HS) (KV = NH, G = 1). cm is the ring as the collective
 * matmuls' (P, the pairs {k, k+1}, dim 1) and what listing.c counts: the
 * forward's P-1 sends of outer·R·K floats (outer B, R T, K 2·KV·HS: the k
 * and v rows), the backward's K twice that (k, v and their dK, dV). doc:
 * the index in in[] of the rows' document ids (B,T) int32, the last input
 * (0: none); they travel with the k, v rows, one word a row more in K. */
typedef struct {
    mt_cm_params cm;           /* first: listing.c reads p.cm */
    int64_t      B, T, NH, KV, HS, G, hoff;
    bool         packed;
    int64_t      doc;
} mt_ring_params;

/* The MoE ops' (moe_ops.c; ops/moe.h has the algorithm): E routed experts,
 * k a token, the router's settings in `route` (its T, E and k unused: a
 * call's rows are its ids' numel / k). moe_router_loss is alpha · the aux
 * loss averaged over S_all sequences (a sequence: the logits' dim 1, of L
 * rows; 2-D logits (T,E) are one) + beta · the z-loss averaged over T_all
 * rows. A device holding some of the sequences (rows split over batch
 * axes) computes its share over the global S_all and T_all, so the shares
 * sum to the loss. The grouped product and its backwards with ep_size > 1
 * run expert-parallel (moe_ep.c): the weights are this device's E/ep_size
 * experts, the ids global, and the rows travel to their experts' owners and
 * back over the group `ep` (the mesh's expert axis). */
typedef struct {
    int64_t             E, k;
    mt_moe_route_params route;
    /* moe_capacity: the capacity factor cf, an expert's capacity in each
     * sequence (dim 1 of 3-D ids; 2-D ids are one) ⌈(L·k/E)·cf⌉ pairs;
     * the earliest pairs kept, or with gates the highest-gated */
    double              capacity;
    float               alpha, beta;
    int64_t             S_all, T_all;
    mt_axes             ep;
    int                 ep_size;
} mt_moe_op_params;

/* An op's parameters: the member its mt_op line names (none for the rest). */
typedef union {
    mt_gemm_params      gemm;
    mt_linear_params    linear;
    mt_rows_params      rows;
    mt_attention_params attention;
    mt_rmsnorm_params   rmsnorm;
    mt_rope_params      rope;
    mt_gqa_params       gqa;
    mt_embedding_params embedding;
    mt_ce_params        ce;
    mt_mse_params       mse;
    mt_scale_params     scale;
    mt_transpose_params transpose;
    mt_coll_params      coll;
    mt_cm_params        cm;
    mt_ring_params      ring;
    mt_sharding         reshard;
    mt_moe_op_params    moe;
    /* varies: the logical axis its builder named, and the mesh axes (bits)
     * the rules map it to (mt_graph_shard_by_rules sets them) */
    struct { uint32_t axes; char logical[MT_LOGICAL_NAME]; } varies;
} mt_op_params;

/* ---- one call, where it runs, the table ---------------------------------- */

/* One run of an op on its tensors. acc / acc2 select out = result (false) or
 * out += result (true), for out / out2. */
typedef struct {
    mt_op        op;
    bool         acc, acc2;
    mt_tensor   *out, *out2;              /* out2: a second output (LN_BWD_PARAMS: db), else NULL */
    mt_tensor   *in[MT_MAX_INPUTS];
    int          n_in;
    mt_tensor   *aux[2];                  /* saved by a forward for its backward */
    /* a product kept in f32 under bf16 precision (mt_graph_set_f32: a
     * router's logits), and so are its gradient's products */
    bool         f32;
    mt_op_params p;
    /* The backend's plan for this call, or NULL: the op table's run (f32).
     * MATMUL, LINEAR, GEMM: a bf16 product, which the graph has its backend
     * plan when compiled with MT_PRECISION_BF16 (src/backend/backend_impl.h,
     * plan_matmul; the CPU's is a oneDNN plan). The backend's own type,
     * read by its run_op alone, as an mt_backend_event's impl is. */
    const void  *plan;
} mt_op_call;

/* What a call runs with: threads, scratch for the ops that ask for it, and
 * for the collective ops the device they run on. */
typedef struct {
    mt_pool   *pool;                      /* threads for our own kernels; NULL: the caller alone */
    float     *scratch;                   /* (pool size, n) for n the largest scratch() of the calls,
                                             or more for one on the caller (scratch_caller) */
    size_t     scratch_floats;            /* all of it */
    mt_ctx    *ctx;                       /* the calling device; NULL: collective ops must not run */
    /* Where a call that fails records its status (run() returns nothing):
     * the first failure sticks, its message left in mt_errmsg() of the
     * calling thread. Only collective ops fail today; the runner points it
     * at its own status, clears it before a run and checks it after every
     * call. */
    mt_status *status;
    /* Where the graph's buffers live and its calls run (backend_impl.h);
     * a compiled graph's is never NULL. */
    const struct mt_backend *backend;
} mt_op_env;

/* What kind of work an op is, as a cost model times it (the planner:
 * plan/program.c; a new op says which, and is costed so without naming it
 * anywhere else). */
typedef enum {
    MT_COST_UNSET = 0,     /* none given: tests/test_ops_desc.c fails naming the op */
    MT_COST_PRODUCT,       /* matrix products: at the products' peak */
    MT_COST_ATTENTION,     /* attention's products: as PRODUCT, its sequence length the
                              output's dim 1 (B, T, ...) */
    MT_COST_VECTOR,        /* element-wise, norms, softmax, lookups, reductions: vector
                              and memory bound */
    MT_COST_COLLECTIVE,    /* moves data between devices (or stands for a move: pvary,
                              slice); the collective matmuls too */
} mt_op_cost_class;

/* What an op is (mt__opdef_<name>, below; op_table.c indexes them by
 * mt_op): its name, its arity, what a run costs and its cost class, read by
 * the graph, the profiler and the planner, and which of its operands meet
 * (the graph's device variance). The graph half, its gradient,
 * sharding and remat rules, is graph/op_desc.c's; how a backend runs it is
 * the backend's (the CPU's kernels: mt_op_kernel, below). A call of the op
 * has from min_in to max_in inputs. */
typedef struct {
    const char *name;
    int8_t      min_in, max_in;           /* required: 1 <= min_in <= max_in <= MT_MAX_INPUTS */
    mt_op_cost_class cost_class;          /* required */
    /* FLOPs and bytes moved by one run (op_cost.h). Required. */
    void   (*cost)(const mt_op_call *call, double *flops, double *bytes);
    /* Device variance, as a builder types a node (graph/collectives.c's
     * mt__vma_operands). meet: how many leading operands meet each other,
     * a pvary added to one the others vary over (0: all of them;
     * aux_attach's 1: its loss meets nothing, its gradient a constant, not
     * the output's). inside: the mesh axes the op all-reduces over inside
     * it, over which its result is the same on every device (optional:
     * NULL, none; cross-entropy's vocabulary-parallel axes). */
    int8_t      meet;
    mt_axes   (*inside)(const mt_op_call *call);
} mt_op_def;

/* How the CPU backend runs an op on host buffers: its kernel
 * (mt__kernel_<name>, below, beside the op's mt__opdef_<name>; the CPU
 * backend's table, backend/cpu_kernels.c, indexes them by mt_op). */
typedef struct {
    /* Runs the call on its buffers. Required. Cannot fail, except the
     * collective ops, which record a failure in *env->status. */
    void   (*run)(const mt_op_env *env, const mt_op_call *call);
    /* Floats of scratch one worker of env->pool needs to run the call.
     * Optional: NULL means none. */
    size_t (*scratch)(const mt_op_call *call);
    /* scratch() is for the calling thread alone, not for each worker: the
     * collective ops run there and lend the pool none of it. Their scratch
     * is the start of env->scratch. Default false. */
    bool     scratch_caller;
} mt_op_kernel;

/* Each op's two named definitions, one per MT_OP_LIST line: what it is,
 * mt__opdef_<name>, which op_table.c's table points at, and its CPU
 * kernel, mt__kernel_<name>, which the CPU backend's does (an op without
 * either does not link). op_table.c defines most; an op in a file of its
 * own defines its own there (ops/rope.c: rope and rope_bwd). */
#define MT_OP_DEF_DECL_(NAME, name)                                                    \
    extern const mt_op_def mt__opdef_##name;                                           \
    extern const mt_op_kernel mt__kernel_##name;
MT_OP_LIST(MT_OP_DEF_DECL_)
#undef MT_OP_DEF_DECL_

/* Vocabulary-parallel cross-entropy (loss_vp.c): the forward, with its
 * all-reduces, and the backward (local); run_cross_entropy and run_ce_bwd
 * hand calls with p.ce.vp_axes over to them. */
void   mt__run_cross_entropy_vp(const mt_op_env *env, const mt_op_call *c);
/* The grouped expert product and its backwards over the expert axis
 * (p.moe.ep_size > 1; moe_ep.c), and the floats of scratch they need on
 * the calling thread. */
void   mt__moe_ep_experts(const mt_op_env *env, const mt_op_call *c);
void   mt__moe_ep_experts_bwd_x(const mt_op_env *env, const mt_op_call *c);
void   mt__moe_ep_experts_bwd_w(const mt_op_env *env, const mt_op_call *c);
size_t mt__moe_ep_scratch(const mt_op_call *c);
void   mt__run_ce_bwd_vp(const mt_op_env *env, const mt_op_call *c);

/* The table entry of op (op < MT_OP_COUNT). */
const mt_op_def *mt__op_def(mt_op op);
/* The entry of the op named `name` (mt_node_info.op), or NULL. */
const mt_op_def *mt__op_def_named(const char *name);

/* ---- collective.c: the table's entries for the collective ops ----------- */

void   mt__run_psum(const mt_op_env *env, const mt_op_call *call);
void   mt__run_all_gather(const mt_op_env *env, const mt_op_call *call);
void   mt__run_psum_scatter(const mt_op_env *env, const mt_op_call *call);
void   mt__run_ppermute(const mt_op_env *env, const mt_op_call *call);
void   mt__run_all_to_all(const mt_op_env *env, const mt_op_call *call);
void   mt__run_pvary(const mt_op_env *env, const mt_op_call *call);
void   mt__run_slice(const mt_op_env *env, const mt_op_call *call);
void   mt__cost_coll(const mt_op_call *call, double *flops, double *bytes);
/* bf16 gradient reductions (p.coll.bf16): buf's n floats cast to bf16 in
 * place, into the first 2n bytes (in order, so nothing is overwritten
 * before it is read). */
void   mt__coll_to_bf16_inplace(void *buf, size_t n);
/* out (n) (+)= the f32 of src (n bf16). */
void   mt__coll_from_bf16(float *out, const uint16_t *src, size_t n, bool acc);
size_t mt__scratch_coll(const mt_op_call *call);

/* ---- collective_matmul.c: the collective matmuls' entries ---------------- */

void   mt__run_ag_linear(const mt_op_env *env, const mt_op_call *call);
void   mt__run_linear_rs(const mt_op_env *env, const mt_op_call *call);
void   mt__run_cm_wgrad(const mt_op_env *env, const mt_op_call *call);
void   mt__cost_cm(const mt_op_call *call, double *flops, double *bytes);
size_t mt__scratch_cm(const mt_op_call *call);

/* A product call's shape (MATMUL, GEMM, LINEAR; gemm_pool.c) as C (M,N)
 * (+)= op(A) (M,K) · op(B) (K,N): MATMUL and GEMM their p.gemm, LINEAR
 * x (rows,C) · w (OC,C)ᵀ (ta false, tb true). */
void   mt__product_shape(const mt_op_call *c, bool *ta, bool *tb, int64_t *M, int64_t *N,
                         int64_t *K);

/* The pool-parallel product the matmul ops run (gemm_pool.c): C (M,N) =
 * op(A) · op(B) (+ bias (N) on every row) + beta · C, dense (lda, ldb from
 * the flags as mt_kernel_gemm's densest), split into blocks over env->pool. */
void   mt__gemm_pool(const mt_op_env *env, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                     const float *A, const float *B, const float *bias, float *C, float beta);

#endif /* MT_OPS_IMPL_H */
