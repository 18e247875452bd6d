/*
 * graph_impl.h — the fields behind mt_graph (the IR), its nodes, and the
 * program compile makes of it (mt_program) (internal).
 *
 * A graph is a list of nodes in execution order: the forward nodes as the
 * model built them, then, after mt_graph_compile(), the backward nodes the
 * autodiff emitted, each tagged B (gradient with respect to something that
 * depends on the data, needed to keep propagating backwards) or W (gradient
 * with respect to something derived from parameters only). Nothing in B reads
 * what W writes, so B and W can run at different times — zero-bubble pipeline
 * schedules depend on that.
 *
 * A node is an op call (ops/ops_impl.h: what runs, on which tensors, with
 * which parameters) plus what only the graph knows: its phase, and which of
 * its outputs receive a parameter gradient's first contribution.
 *
 * The files of src/graph/, bottom up (tests/test_file_cycles.sh holds that
 * none calls a file above it): errors.c, names.c, ir.c (the IR's
 * primitives); collectives.c, builders.c (the builders); emit.c and the
 * rules (grad_rules.c, collective_matmul.c, shard_moves.c,
 * shard_rules_ops.c, shard_rules_nn.c, lower.c); op_desc.c (the table that
 * names the rules); shard_rules.c (dispatch), listing.c, remat.c,
 * autodiff.c, precision.c (the transforms); plan.c, slots.c, exec.c (the
 * program's buffers and runs); program.c (compile and free) on top.
 */
#ifndef MT_GRAPH_IMPL_H
#define MT_GRAPH_IMPL_H

#include "backend/backend_impl.h"
#include "base/pool.h"
#include "meshtrain/graph.h"
#include "ops/ops_impl.h"

typedef enum { MT_PHASE_F = 0, MT_PHASE_B = 1, MT_PHASE_W = 2 } mt_phase;

/* param_first bits: the first contribution to a parameter's gradient, which
 * overwrites instead of adding when the gradients are marked zero (saves
 * clearing them after every optimizer step). */
enum { MT_FIRST_OUT = 1, MT_FIRST_OUT2 = 2 };

typedef struct {
    mt_op_call call;                      /* what runs */
    mt_phase   phase;
    uint8_t    param_first;               /* MT_FIRST_OUT | MT_FIRST_OUT2 */
    /* its first-contribution bits are to a kept gradient (mt_tensor.
     * grad_kept), which restarts after each reduction of it, not only
     * after an optimizer step (kept_zero) */
    bool       kept_out;
    bool       recompute;                 /* a B node re-running a forward call (remat.c) */
    /* A node whose collective may be deferred (call.p.coll.async: a W
     * psum or psum_scatter, an F or B all-gather of a parameter): the
     * position in its phase's order before which it must be complete,
     * because the node there touches its input or output (the phase's
     * count: its end). -1 for every other node. Set by the plan, which
     * keeps the input and output alive until then. */
    int        defer_until;
    /* A deferred psum_scatter's result, until its completion adds it to the
     * output: an offset in floats into g->defer_block; -1 for the rest. */
    int64_t    defer_buf;
    /* A deferred W psum that goes in a gradient bucket (buckets.c,
     * mt_compile_opts.bucket_bytes): its input is copied out when reached,
     * so its defer_until is its output's next use alone. */
    bool       bucketed;
    /* A deferred W psum whose output is a parameter's gradient (plan.c): a
     * local pass may leave it to a later backward (exec.c, reduce_later). */
    bool       into_grad;
    /* A bucketed psum_scatter: the floats its bucket reserves a part
     * (buckets.c's prepare sets it once; 0 for the rest). */
    int64_t    bucket_seg;
    /* bf16 activation storage (precision.c): the bf16 tensor this node's
     * value is kept in. The call writes f32 into call.out (a short-lived
     * arena tensor), then run_node casts it here. NULL for every other node. */
    mt_tensor *cast_out;
    /* The transformer block the node belongs to (mt_graph_set_block), -1
     * for none: remat recomputes by block, traces label ops with it. Set by
     * mt__node_add from g->cur_block. */
    int        block;
    /* The arena's bytes alive while it runs, in the plan's lifetimes
     * (plan.c; mt_node_info.live_bytes): no plan beats the largest. */
    size_t     live_bytes;
} mt_node;

/* A deferred collective in flight (exec.c): the event of its backend's
 * stream it completes with (the host's holds its comm request). */
typedef struct {
    mt_backend_event ev;
    int        node;                      /* index in g->nodes */
    int        until;                     /* its node's defer_until */
    bool       direct;                    /* reducing straight into its output */
    int        bucket_first, bucket_n;    /* a bucket: its members in bucket_member
                                             (bucket_n 0: the node alone) */
} mt_inflight;

/* A gradient in a bucket (buckets.c): its node and where its floats are in
 * the bucket block. */
typedef struct {
    int     node;
    int64_t off;
} mt_bucket_member;

/* Accumulated cost of one op kind while profiling. */
typedef struct {
    int64_t calls;
    double  seconds, flops, bytes;
} mt_op_profile;

/* One set of per-run state (slots.c): the arena and the run block of one
 * microbatch in flight, and the loss its last forward left. */
typedef struct {
    void  *arena, *run_block;
    float  loss_value;
} mt_slot;

/* The compiled program of a graph (mt_graph_compile makes it, mt_graph_free
 * frees it): everything that runs, apart from the IR it runs. The IR (struct
 * mt_graph) is what the builders, the partitioner and the transforms of
 * compile (autodiff, remat, bf16 storage) read and write: tensors, nodes,
 * names, parameters. The program holds the run orders of the backward, the
 * buffers of the plan and every slot, the op environment (kernel threads,
 * scratch, backend), the deferred collectives in flight, the profile, the
 * loss and the statistics. A graph that never compiled has none (g->prog
 * NULL). */
typedef struct mt_program {
    mt_compile_opts opts;                 /* as compiled (backend resolved) */
    int        *order_b, n_b;             /* node indices of B nodes, in run order */
    int        *order_w, n_w;             /* node indices of W nodes, in run order */
    int         cap_order;                /* room in order_b and order_w (each) */
    bool        grads_zero;               /* parameter gradients read as zero */
    /* Reductions left to a later backward (mt_graph_set_reduce_later): asked;
     * this backward's psums add locally (local_pass, fixed when B starts);
     * the gradients hold local sums a reduction must take in (held). */
    bool        reduce_later, local_pass, held;
    /* What a step keeps (exec.c): the kept gathered parameters are older
     * than the parameters (kept_stale: compile, mt_graph_params_changed),
     * so the next forward gathers them; the kept gradients read as zero
     * (kept_zero: after a step, and after each pass that reduced them). */
    bool        kept_stale, kept_zero;
    mt_comm_count comm;                   /* mt_graph_comm_count: since the last reset */
    /* Buffers (plan.c). The persistent block holds what every run shares
     * (parameters, their gradients, constants); the run block what each run
     * has of its own but keeps after it (inputs, input gradients, the loss
     * and its seed); the arena everything else. arena and run_block are the
     * current slot's (slots.c): with slots, `slots` owns every slot's blocks
     * and these point at slot `slot`'s; without, the program owns them. */
    void       *arena;      size_t arena_bytes, arena_bytes_unplanned;
    size_t      arena_bytes_f32;          /* the arena had every activation been f32 (plan.c) */
    void       *persistent; size_t persistent_bytes;
    void       *run_block;  size_t run_bytes;
    mt_slot    *slots;      int n_slots, slot;        /* n_slots 0: one slot, no array */
    mt_op_env   env;                      /* kernel threads, per-thread scratch, ctx, &run_status */
    mt_status   run_status;               /* a failed call of the current run (env.status) */
    /* deferred gradient reductions of the running backward_w, in start
     * order (at most MT_MAX_PENDING: the oldest completes first) */
    mt_inflight inflight[MT_MAX_PENDING];
    /* the backend's stream the deferred collectives are recorded on, made
     * for the device stream_ctx at the first one of a launch (a compiled
     * graph is bound again for each launch: mt_graph_set_ctx) */
    struct mt_backend_stream *stream;
    mt_ctx     *stream_ctx;
    float      *defer_block;              /* deferred psum_scatters' results (plan.c) */
    /* gradient buckets (buckets.c): the block every bucketed gradient of a
     * run has its floats in (plan.c sizes it), the members of the run so
     * far (this phase's, reset by each), and the open bucket: its first
     * member, -1 when none, and how far its earliest member may wait; a
     * reduce-scatter bucket (parts > 1) lays its members out shard-major:
     * part r (seg floats reserved from base) holds shard r of each */
    float      *bucket_block;             /* (bucket_floats) */
    int64_t     bucket_floats, bucket_used, bucket_base, bucket_seg;
    int         bucket_parts;
    mt_bucket_member *bucket_member;      /* (cap_bucket) */
    int         n_bucket_member, cap_bucket, bucket_open, bucket_open_until;
    int         n_inflight;
    bool        sync_reduce;              /* tests, benchmarks: run them when reached
                                             (the same on every device of the group) */
    mt_op_profile *profile;                           /* (MT_OP_COUNT) or NULL: off */
    float       loss_value;
    bool        tracing;                  /* the running phase records op spans (ctx traces) */
    mt_graph_stats stats;
    /* precision.c: the bf16 products' plans, weight copies and workspace
     * (NULL for an fp32 graph) */
    struct mt_bf16_state *bf16;
} mt_program;

/* The IR: what the user (or the partitioner) builds. */
struct mt_graph {
    mt_tensor **tensors;  int n_tensors, cap_tensors;
    /* the tensors' storage (ir.c): blocks of MT__TENSOR_SLAB, the last one
       slab_left short of full; freed with the graph */
    mt_tensor **slabs;    int n_slabs,   cap_slabs,  slab_left;
    mt_tensor **params;   int n_params,  cap_params;  /* in declaration order */
    /* name -> tensor (names.c): open addressing, names_cap a power of two;
       name_hash[i] the hash of names[i]'s name (one block with names) */
    mt_tensor **names;    int n_names,   names_cap;
    uint64_t   *name_hash;
    bool        names_dup;                /* some tensors share a name */
    uint64_t    dup_hashes[64];           /* bit (its hash's top 12) of every name two tensors
                                             were seen to share (names.c): a rename of a
                                             name outside it looks for no other holder */
    mt_node    *nodes;    int n_nodes,   cap_nodes;
    bool        cur_f32;                  /* nodes added now keep their products in f32
                                             (mt_graph_set_f32; a node's backward and device
                                             nodes too) */
    int         cur_block;                /* the block of nodes added now (mt_graph_set_block;
                                             -1: none) */
    int         n_forward;                /* nodes [0, n_forward) are F */
    mt_tensor  *loss;
    mt_status   status;                   /* first build/compile error, sticky */
    char        errmsg[1024];
    mt_ctx     *ctx;                      /* mt_graph_set_ctx: the device collective nodes run on */
    bool        vma_off;                  /* undeclared leaves' variance unknown, not defaulted
                                             (mt_partition's test_skip_grad_reduction only) */
    bool        partitioned;              /* made by mt_partition: its tensors are local blocks */
    void      **owned;    int n_owned,   cap_owned;   /* blocks calls point at (ppermute pairs) */
    char        trace_label[24];          /* mt_graph_set_trace_label; "" none */
    mt_program *prog;                     /* the compiled program; NULL before compile */
};

/* ---- errors.c ---- */

/* Records the first error in g (later ones are dropped) and returns NULL, so
 * builders can `return mt__graph_error(g, ...)`. Also sets mt_errmsg(). */
mt_tensor *mt__graph_error(mt_graph *g, mt_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* How a message names t: 'name' when a user or a builder named it; for a
 * name the graph made ("act.13"), the op that made it and its operands, two
 * levels deep ("gelu(linear('x', 'w1', 'b1'))"). Writes buf (n bytes) and
 * returns it. */
const char *mt__tensor_label(const mt_graph *g, const mt_tensor *t, char *buf, size_t n);
/* How a message names call c of g: "<op> of <operand>, <operand> and
 * <operand>", each operand as mt__tensor_label one level deep, and
 * " (making 'out')" when the output has a chosen name. */
const char *mt__call_label(const mt_graph *g, const mt_op_call *c, char *buf, size_t n);

/* ---- ir.c ---- */

/* A new tensor owned by g (name NULL: "<prefix>.<id>"). NULL on error. */
mt_tensor *mt__tensor_new(mt_graph *g, const char *name, mt_dtype dtype, mt_tensor_kind kind,
                          int ndim, const int64_t *shape);
/* ---- builders.c: the vocabulary-parallel forms the partitioner builds ---- */

/* embedding over a table holding rows [lo, lo+V) of the vocabulary: ids
 * outside read zeros (their owner adds them in: the result is a partial sum
 * over the table's axes). */
mt_tensor *mt__embedding_masked(mt_graph *g, mt_tensor *table, mt_tensor *ids, int64_t lo);
/* cross_entropy over logits holding columns [lo, lo+Vp) of a vocabulary of
 * V split over `axes` (g must be bound to a device): Megatron's loss. */
mt_tensor *mt__cross_entropy_vp(mt_graph *g, mt_tensor *logits, mt_tensor *targets, int V,
                                float scale, mt_axes axes, int64_t lo);
/* grouped-query attention over a device's share of the heads: NH query
 * heads (q (B,T,NH·HS)) and the KV kv heads k, v (B,T,KV·HS) hold, query
 * head h reading kv head (hoff + h) / G (ops_impl.h, mt_gqa_params); docs
 * as mt_attention_gqa_docs. */
mt_tensor *mt__attention_gqa_at(mt_graph *g, mt_tensor *q, mt_tensor *k, mt_tensor *v, int NH,
                                int KV, int G, int hoff, mt_tensor *docs);
/* attention_split.c: the split forms (a device's head-tail share of T
 * query rows against the keys gathered from `parts` devices, Tk = parts·T;
 * ops_impl.h's mt_attention_params): the packed qkv (B,T,3C) with its
 * gathered copy kv (B,Tk,3C), and the grouped-query form with k, v
 * (B,Tk,KV·HS) gathered. */
/* docs: the document ids of the gathered keys (B,Tk) int32, in device
 * order as the keys, or NULL (one document); the queries' ids are this
 * device's rows of them (the whole form's: all of them). */
mt_tensor *mt__attention_split(mt_graph *g, mt_tensor *qkv, mt_tensor *kv, int NH, int parts,
                               int part, mt_tensor *docs);
mt_tensor *mt__attention_gqa_split(mt_graph *g, mt_tensor *q, mt_tensor *k, mt_tensor *v,
                                   int NH, int KV, int G, int hoff, int parts, int part,
                                   mt_tensor *docs);
/* attention_ring.c: ring attention over the devices of `axes`, each holding
 * its head-tail share of T rows (ops_impl.h's mt_ring_params): the packed
 * qkv (B,T,3C) or (B,T,3,C) when k and v are NULL (KV, G, hoff unread), else
 * q (B,T,NH·HS), k, v (B,T,KV·HS). Out (B,T,NH·HS). */
mt_tensor *mt__attention_ring(mt_graph *g, mt_tensor *q, mt_tensor *k, mt_tensor *v, int NH,
                              int KV, int G, int hoff, mt_axes axes);
/* The same within documents: docs (B,T) int32 the document ids of this
 * device's rows (NULL: one document); each k, v block travels with its
 * rows' ids. */
mt_tensor *mt__attention_ring_docs(mt_graph *g, mt_tensor *q, mt_tensor *k, mt_tensor *v,
                                   mt_tensor *docs, int NH, int KV, int G, int hoff,
                                   mt_axes axes);

/* ---- names.c ---- */

/* Indexes t under its name (the first tensor, by id, with a name wins);
 * false when out of memory. mt_graph_find() looks names up. */
/* src into dst (cap bytes, cap >= 1), cut at cap - 1 bytes as snprintf's
 * "%s" cuts it, without snprintf's parsing (the planner names tens of
 * millions of tensors). */
void       mt__name_copy(char *dst, size_t cap, const char *src);
/* "<prefix>.<id>" into dst (cap bytes), cut as snprintf's "%s.%d" cuts it. */
void       mt__name_numbered(char *dst, size_t cap, const char *prefix, int id);
/* "<before><at most `most` bytes of name><after>" into dst (cap bytes), cut
 * as snprintf cuts: a name made from another ("grad.x", "pvary(x)",
 * "x.f32"), without printf (base/text.c says why). */
void       mt__name_derived(char *dst, size_t cap, const char *before, const char *name,
                            size_t most, const char *after);
bool       mt__names_add(mt_graph *g, mt_tensor *t);
/* Takes t out of the index (before its name changes). */
void       mt__names_remove(mt_graph *g, mt_tensor *t);

/* Appends a node (copied); returns its index or -1. */
int        mt__node_add(mt_graph *g, const mt_node *node);

/* ---- collectives.c ---- */

/* A copy of `bytes` bytes of `src` owned by g (freed with it), for call
 * parameters that point at memory (ppermute's pairs). NULL, with g's sticky
 * error set, when out of memory. */
void      *mt__graph_keep(mt_graph *g, const void *src, size_t bytes);
/* Device variance of a forward op's call that a builder is about to append
 * (collectives.c, "Device variance"): gives each operand that takes a
 * gradient and is the same over axes where the result differs a pvary over
 * them (c->in[k] becomes the pvary's output, a node appended first), and
 * types c->out. The result differs over `varies` whatever the operands are
 * (a fused collective's axes; {0} for any other op). false, with g's sticky
 * error set (MT_ESHARDING naming the op, both operands and the fixes), when
 * such an operand meets one whose variance is not known (only on a graph
 * whose leaves get no defaults: mt_graph.vma_off): no guess. `op` names
 * the op in the message. */
bool       mt__vma_operands(mt_graph *g, mt_op_call *c, const char *op, mt_axes varies);

/* ---- emit.c: what the gradient rules' nodes write ---- */

/* The gradient tensor of t, made on first request (a view's gradient is a
 * view of its root's gradient). */
mt_tensor *mt__grad_of(mt_graph *g, mt_tensor *t);
/* Whether a gradient flows to t (it needs one and is f32). */
bool       mt__takes_grad(const mt_tensor *t);
/* Emits a backward node running `call` (op, inputs, parameters) that
 * contributes to the gradient of `wrt`: fills in out = grad(wrt), acc (the
 * first contribution to an activation gradient writes; the rest, and every
 * parameter gradient, add), the phase (B if wrt depends on the data, else W)
 * and the first-contribution bit. Does nothing if wrt takes no gradient. */
void       mt__emit_grad(mt_graph *g, mt_tensor *wrt, const mt_op_call *call);
/* The same for a call with two gradient outputs: out = grad(wrt) and
 * out2 = grad(wrt2), each with its own acc flag and first-contribution bit;
 * the phase follows wrt. Does nothing if wrt takes no gradient; wrt2 must
 * take one whenever wrt does (the builder checks: e.g. both parameters). */
void       mt__emit_grad2(mt_graph *g, mt_tensor *wrt, mt_tensor *wrt2, const mt_op_call *call);
/* Emits a backward node whose output is no gradient but a value a later
 * backward node reads (linear_rs's gathered cotangent for its weight
 * gradient), in `phase` (that reader's; B before W). call names its output. */
void       mt__emit_node(mt_graph *g, mt_phase phase, const mt_op_call *call);

/* ---- autodiff.c ---- */

/* Appends the backward nodes of g's loss (g->loss) and their B and W run
 * orders. On error g's sticky status holds it too. */
mt_status  mt__autodiff(mt_graph *g);

/* Marks parameter gradients zero without touching them: the next backward
 * overwrites where it would add. */
void       mt__graph_mark_grads_zero(mt_graph *g);

/* ---- grad_rules.c ---- */

/* A gradient rule: emits, through mt__emit_grad(2), the backward nodes of the
 * forward call `fwd`, whose output's gradient (fwd->out->grad) has arrived. */
typedef void (*mt_grad_rule)(mt_graph *g, const mt_op_call *fwd);
/* The rule of a forward op, as its descriptor names it (op_desc.c, where
 * the other members of the graph half are too); NULL for backward ops. */
mt_grad_rule mt__grad_rule(mt_op op);

/* ---- collective_matmul.c: the rules of the collective matmuls ---- */

void       mt__grad_ag_linear(mt_graph *g, const mt_op_call *fwd);
void       mt__grad_linear_rs(mt_graph *g, const mt_op_call *fwd);

/* ---- plan.c ---- */

/* Places every tensor (persistent block or liveness-shared arena), allocates,
 * points each tensor at its bytes, and sizes the kernels' scratch. Sets
 * every node's defer_until first (a deferred reduction's buffers live until
 * it completes). */
mt_status  mt__plan_buffers(mt_graph *g);
/* Points every tensor at its bytes in g->persistent, g->run_block and
 * g->arena (the current slot's): roots, then aliases (data_of), then views.
 * O(tensors); the plan calls it once, each slot switch again. */
void       mt__plan_point(mt_graph *g);
/* arena.c: places the n arena tensors, their lifetimes (first_use,
 * last_use in [0, pos)) set, each `align` bytes a multiple: two share bytes
 * only if their lifetimes do not overlap. Sets every offset and *arena_out
 * to the arena's size, the smaller of a heap simulated over the run order
 * and greedy by size (the latter up to a count of tensors). born and dying
 * hold the same tensors, ids ascending; they are sorted here (by birth, by
 * death). MT_ENOMEM. */
mt_status  mt__arena_place(mt_tensor **born, mt_tensor **dying, int n, int pos, size_t align,
                           size_t *arena_out);

/* ---- exec.c ---- */


/* ---- remat.c ---- */

/* Activation checkpointing (mt_compile_opts.remat): clones the recomputed
 * forward nodes of every block into B nodes placed before the block's first
 * B reader, and points the backward's readers at the clones' outputs. Runs
 * after the rules emitted the backward, before FSDP's re-gathers. */
void       mt__remat(mt_graph *g, mt_remat policy);
/* mt_compile_opts.interleave_w: moves every W node into B's run order, just
 * after the last B node that writes what it reads (W's relative order kept). */
void       mt__interleave_w(mt_graph *g);
/* ---- precision.c: bf16 products ---- */

/* With MT_PRECISION_BF16: has the graph's backend plan every MATMUL, LINEAR
 * and GEMM node as a bf16 product (plan_matmul; the CPU's makes oneDNN
 * primitives), with a bf16 copy of each parameter one reads and a workspace
 * for the activations' casts; the copies are marked stale. MT_EUNSUPPORTED
 * from a backend without bf16 products (or the CPU's without oneDNN).
 * MT_PRECISION_FP32: nothing. After the plan. */
mt_status  mt__precision_prepare(mt_graph *g, mt_precision p);
/* With MT_PRECISION_BF16, after the backward exists and before the plan:
 * stores in bf16 every activation whose every reader is a bf16 product (its
 * dtype becomes MT_BF16; its producer writes an f32 tensor made here, cast
 * into it by mt__precision_cast_out). Sets g->stats.n_bf16_act. */
mt_status  mt__precision_store_bf16(mt_graph *g);
/* Undoes mt__precision_store_bf16 after the lifetimes were taken (the plan
 * found it saves nothing): the producers write their tensors, f32 again, and
 * the f32 copies are left unused (first_use -1: no bytes). */
void       mt__precision_unstore_bf16(mt_graph *g);
/* After node n ran: casts its f32 value into n->cast_out (if any), through
 * the backend (its convert); its failure returned. */
mt_status  mt__precision_cast_out(mt_graph *g, const mt_node *n);
/* Before a forward: casts the parameters into their bf16 copies when they
 * changed since the last cast (mt_graph_params_changed, compile). */
mt_status  mt__precision_refresh(mt_graph *g);
/* mt_compile_opts.grad_reduce: with MT_PRECISION_BF16 marks the gradient
 * reductions (W's async psums and psum_scatters: their input has no other
 * reader) to reduce in bf16 (p.coll.bf16). After autodiff, before the plan. */
mt_status  mt__grad_reduce_prepare(mt_graph *g, mt_precision p);
void       mt__precision_free(mt_graph *g);

/* ---- slots.c ---- */

/* Frees the arenas and run blocks of every slot (the graph's own when it
 * has no slots). */
void       mt__slots_free(mt_graph *g);

/* ---- listing.c ---- */

/* Adds node n's collective, about to run, to g->prog->comm (mt_comm_count). */
void       mt__comm_count_node(mt_graph *g, const mt_node *n);

/* ---- the deferred W reductions' rules (exec.c, buckets.c) ---- */

/* Whether n is a parameter gradient's data-parallel all-reduce (pvary's
 * backward: an async psum of W on an input of its own, into the gradient
 * itself, plan.c's into_grad), which a local pass leaves to a later one
 * (mt_graph_set_reduce_later). */
static inline bool mt__later_reducible(const mt_node *n) {
    const mt_op_call *c = &n->call;
    return n->into_grad && n->phase == MT_PHASE_W && c->p.coll.async &&
           mt__storage_root(c->in[0]) != mt__storage_root(c->out);
}

/* Whether n is the once-a-step reduction of a kept gradient (a W
 * psum_scatter of a gathered parameter's gradient onto its shard): a local
 * pass skips it, the kept gradient having summed the
 * pass's contributions already; the reducing pass runs it on the sum. */
static inline bool mt__step_reduced(const mt_node *n) {
    const mt_op_call *c = &n->call;
    if (n->phase != MT_PHASE_W || c->op != MT_OP_PSUM_SCATTER) return false;
    const mt_tensor *g = mt__storage_root(c->in[0]);
    return g->grad_of && mt__storage_root(g->grad_of)->grad_kept;
}

/* Whether node n's first contributions (its param_first bits) write over
 * their gradient now rather than add: a parameter's while the gradients
 * read as zero, or when a reduction takes in the local sums of earlier
 * passes (held; a kept gradient's reduction then writes the shard's); a
 * kept gradient's while it reads as zero (kept_zero), or as a parameter's
 * reduction that took the held sums in. */
static inline bool mt__first_writes(const mt_graph *g, const mt_node *n) {
    const mt_program *p = g->prog;
    if (n->kept_out) return p->kept_zero || (p->held && mt__later_reducible(n));
    return p->grads_zero || (p->held && (mt__later_reducible(n) || mt__step_reduced(n)));
}

/* Whether a deferred reduction's result is added to its output (acc) rather
 * than written over it: the first contribution to a zeroed parameter
 * gradient writes, and so does a first reduction that took the local sums
 * of earlier passes in (held). */
static inline bool mt__completion_accumulates(const mt_graph *g, const mt_node *n) {
    return n->call.acc && !(mt__first_writes(g, n) && (n->param_first & MT_FIRST_OUT));
}

/* ---- buckets.c: gradient buckets (mt_compile_opts.bucket_bytes); exec.c
 * starts and completes them ---- */

/* The open bucket, closed: its members bucket_member[first, first+n), its
 * collective (op: psum, or psum_scatter into result), its floats buf
 * (count; a psum_scatter's: count a device, parts x count in buf), how long
 * it may wait (the earliest member's defer_until), and its last member's
 * node (for messages and the trace). */
typedef struct {
    int            first, n, until, parts;
    mt_op          op;
    float         *buf, *result;
    size_t         count;
    const mt_node *last;
} mt_bucket_range;

/* Sizes the bucket block for the bucketed nodes (plan.c marked them). */
mt_status  mt__buckets_prepare(mt_graph *g);
/* A phase begins: no member, no open bucket. */
void       mt__buckets_reset(mt_graph *g);
void       mt__buckets_free(mt_graph *g);
/* Whether bucketed node n may join the open bucket (true when none is open):
 * the same op and axes, and its bytes keep it within bucket_bytes (the
 * first bucket of a phase: 1 MiB). */
bool       mt__buckets_fits(const mt_graph *g, const mt_node *n);
/* Copies n's gradient into the open bucket (opening one); a psum_scatter's
 * shard r into part r. Every copy is the backend's (buffer_copy); its
 * failure returned. */
mt_status  mt__buckets_pack(mt_graph *g, const mt_node *n);
/* Whether the open bucket is full, or (due) one of its members must be
 * complete by position j (j < 0: any open bucket). */
bool       mt__buckets_full(const mt_graph *g);
bool       mt__buckets_due(const mt_graph *g, int j);
/* Closes the open bucket (there must be one) into *r; a reduce-scatter
 * bucket's parts are moved together (part r at r x count) and its members'
 * places become their shards' in the result. */
mt_status  mt__buckets_close(mt_graph *g, mt_bucket_range *r);
/* Bucket members [first, first+n) reduced: each member's output (+)= its
 * slice (the backend's buffer_scale). */
mt_status  mt__buckets_unpack(mt_graph *g, int first, int n);

#endif /* MT_GRAPH_IMPL_H */
