/*
 * op_desc.h — the graph half of every op's descriptor (internal): what the
 * op is to a graph, its gradient rule, its sharding rule, its lowering onto
 * a device's local inputs (and with the moves around it), what activation
 * checkpointing may do with it and what it communicates. The kernel half
 * {name, arity, cost, cost class, operands that meet; run, scratch} is
 * ops/'s (mt__op_def).
 * Both are generated from ops/ops_impl.h's MT_OP_LIST: each op's halves
 * are named definitions, mt__opdef_<name> and mt__gop_<name> (below), which
 * the tables (ops/op_table.c, graph/op_desc.c) point at in the enum's
 * order; an op without one does not link. Nothing reads the enum's order: a
 * property of an op is a member here or there.
 *
 * Most ops' graph halves are lines of op_desc.c, their rules beside their
 * kind (grad_rules.c, shard_rules*.c, lower.c, lower_moves.c,
 * lower_linear.c, collective_matmul.c). An op in files of its own keeps
 * everything in two: ops/<op>.c (kernel, run, cost, kernel half) and
 * graph/op_<op>.c (builder, gradient, sharding and lowering rules, graph
 * half); rope is the example. tests/test_ops_desc.c walks every op and
 * fails naming the op and the member that is missing. Adding an op: its
 * MT_OP_LIST line (ops/ops_impl.h), its two files, its builder's
 * declaration (include/meshtrain/graph.h) and its tests
 * (docs/extending.md, "A new op").
 */
#ifndef MT_OP_DESC_H
#define MT_OP_DESC_H

#include "graph/graph_impl.h"

/* What an op is to a graph; it decides which members are required. 0 is no
 * entry (a missing line). */
typedef enum {
    MT_ROLE_UNSET,
    /* a forward op of a global program, made by a builder: gradient rule,
     * sharding rule and lowering required */
    MT_ROLE_GLOBAL,
    /* a device-local forward op (collectives, collective matmuls): made by
     * shard_map code or by the partitioner, already per device, so no
     * sharding rule and no lowering; gradient rule required */
    MT_ROLE_LOCAL,
    /* a backward op, made by gradient rules only: nothing differentiates,
     * shards or lowers it */
    MT_ROLE_BACKWARD,
} mt_op_role;

/* What activation checkpointing (remat.c) may do with a forward node of the
 * op. 0 is no entry. */
typedef enum {
    MT_RECOMP_UNSET,
    MT_RECOMP_NEVER,       /* not re-run: it communicates, or is not in a block's list */
    MT_RECOMP_LOCAL,       /* re-run under FULL and DOTS */
    MT_RECOMP_DOT,         /* a matrix product: re-run under FULL; DOTS keeps it */
    MT_RECOMP_SAVES_AUX,   /* attention: re-run under FULL; ATTENTION and DOTS
                              recompute only its saved aux */
} mt_op_recomp;

/* What a node of the op communicates, for listings (listing.c: mt_node_info's
 * collective, axes and bytes). 0 is no entry. */
typedef enum {
    MT_COMM_UNSET,
    MT_COMM_NONE,          /* nothing */
    MT_COMM_COLL_OUT,      /* a collective over p.coll.axes; its size, out's bytes */
    MT_COMM_COLL_IN,       /* a collective over p.coll.axes; its size, in[0]'s bytes */
    MT_COMM_COLL_LOCAL,    /* over p.coll.axes without communication (pvary, slice) */
    MT_COMM_RING_GATHER,   /* a collective matmul over p.cm.axes: P-1 ppermutes of one chunk
                              of its input (K wide) */
    MT_COMM_RING_SCATTER,  /* the same, of one chunk of its partial output (N wide) */
    MT_COMM_VP_STATS,      /* with p.ce.vp_axes: all-reduces of the row statistics inside */
    MT_COMM_MOE_EXCHANGE,  /* with p.moe.ep_size > 1: an expert product's rows to their
                              experts' owners and back over p.moe.ep (all-to-all-v) */
} mt_op_comm;

struct mt_srule;   /* shard_rules_impl.h */

/* A sharding rule over a call of its op (shard_rules.h says what it reads
 * and writes); the arity is checked before it runs. */
typedef mt_status (*mt_shard_fn)(struct mt_srule *r, const mt_op_call *call, mt_type *in);

/* What a lowering knows of the device it lowers for (the partitioner fills
 * it in). */
typedef struct {
    const mt_type *types;     /* the global types of the inputs, after the rule's operand moves */
    uint32_t       inside;    /* the set of mesh axes the rule all-reduces inside the op */
    mt_axes        inside_axes;   /* the same axes, named */
    /* this device's first index of a dim split over the axes of `set`,
     * `local` the dim's local size */
    int64_t      (*start)(void *ctx, uint32_t set, int64_t local);
    void          *ctx;
    uint32_t       headtail;  /* mt_partition_opts.headtail_axes: a T split over them is head-tail */
    int            cp_attention;  /* MT_CP_*: attention's lowering over a head-tail T, set by
                                     its variants (ring_attention, ulysses_attention) */
} mt_lower_env;

/* A lowering: the op of the global call c rebuilt in g (a device's program)
 * on the local inputs `in`; NULL with g's status set on failure. */
typedef mt_tensor *(*mt_lower_fn)(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                                  const mt_lower_env *e);

/* ---- lowering with the moves around the op ---------------------------------
 * The partitioner lowers one global node in four steps, rule -> moves ->
 * lower -> moves: the op's sharding rule gives the result type and the moves
 * (on operands, inside the op, on the result, in that order); the operand
 * moves run on the local inputs; the op is lowered on them; the result moves
 * run on its output. Each step is a partitioner service (below), and an op
 * whose lowering decides what happens to the moves around it (linear: the
 * late bias and the collective-matmul rings; cross-entropy: the collectives
 * inside it) has a hook, mt_lower_moves_fn, that runs the steps itself and
 * takes the moves it consumes; every other op runs them in order
 * (mt__lower_moves_generic). The partitioner knows no op by name. */

/* One global node being lowered: what the partitioner hands the hook and
 * what the hook hands back. */
typedef struct {
    const mt_op_call      *call;     /* the global call */
    const mt_shard_result *rule;     /* its sharding rule's result type and moves */
    int        next;                 /* the first of rule's moves neither run nor consumed */
    /* the inputs, from the slots, then moved by the steps */
    int        n_in;                 /* the ones the op is lowered on (call->n_in, fewer when
                                        the hook adds the rest after the result moves) */
    mt_tensor *in[MT_MAX_INPUTS];    /* local */
    mt_type    types[MT_MAX_INPUTS]; /* global */
    uint32_t   vary[MT_MAX_INPUTS];  /* the mesh axes over which each differs between devices */
    uint32_t   inside;               /* the axes of the rule's moves inside the op taken */
    /* the result: set by the lowering, moved by the result moves */
    mt_tensor *out;                  /* local */
    mt_type    type;                 /* global */
    uint32_t   out_vary;
} mt_lower_step;

/* The partitioner's services to a hook (partition/node.c fills them in; graph
 * code cannot call up into partition/). ctx is the first argument of each.
 * A step or service that fails records the partition error in mt_errmsg()
 * and returns its code (the services returning a tensor: NULL, then
 * failed() says why). */
typedef struct {
    void          *ctx;
    /* the steps, in the order mt__lower_moves_generic runs them */
    /* runs the operand moves from st->next on (st->next then is the first
     * other move), all but move number `skip` (-1: none), which the hook
     * runs itself: that operand's type still becomes the move's result. A
     * gather of an operand over axes it varies over, when the op's other
     * operands vary over them too, is the varying kind
     * (mt__lower_gather_varies) */
    mt_status  (*operand_moves)(void *ctx, mt_lower_step *st, int skip);
    /* takes the moves inside the op from st->next into st->inside if
     * `accept`; refuses them, naming the node, if not */
    mt_status  (*inside_moves)(void *ctx, mt_lower_step *st, bool accept);
    /* gives each of the n_in inputs that needs a gradient a pvary over the
     * axes the others vary over and it does not */
    mt_status  (*pvary_inputs)(void *ctx, mt_lower_step *st);
    /* the op's lowering (its descriptor's lower) on the first n_in inputs:
     * st->out, its type the rule's result and st->out_vary (mt__lower_vary) */
    mt_status  (*lower)(void *ctx, mt_lower_step *st);
    /* runs the moves from st->next on, on st->out */
    mt_status  (*result_moves)(void *ctx, mt_lower_step *st);
    /* a result left a partial sum is reduce-scattered onto the dim its
     * tensor's constraint splits over the partial axes
     * (mt_tensor_set_constraint), when constraint_scatter says so */
    mt_status  (*constrain)(void *ctx, mt_lower_step *st);
    /* primitives */
    /* runs mv on local x whose value varies over *vary (updated) */
    mt_tensor *(*move)(void *ctx, mt_tensor *x, const mt_move *mv, uint32_t *vary);
    /* x, an input of the global tensor global_in varying over `vary`, with a
     * pvary over the axes of `want` it does not vary over (x itself when
     * none is needed) */
    mt_tensor *(*pvary)(void *ctx, const mt_tensor *global_in, mt_tensor *x, uint32_t vary,
                        uint32_t want);
    /* whether the partial sums over `axes` of st's result, of type *t, are
     * reduce-scattered onto a dim that its tensor's constraint splits over
     * them (mt_tensor_set_constraint): *mv set to that move */
    bool       (*constraint_scatter)(void *ctx, const mt_lower_step *st, const mt_type *t,
                                     uint32_t axes, mt_move *mv);
    /* the named mesh axes of a bit set */
    mt_axes    (*axes)(void *ctx, uint32_t bits);
    /* the local graph's error as the partition error of st's node */
    mt_status  (*failed)(void *ctx, const mt_lower_step *st);
} mt_lower_services;

/* An op's lowering with the moves around it: runs the steps on st (g is
 * the device's program), leaving st->out, st->type and st->out_vary, and
 * every move run or consumed (st->next == st->rule->n_moves). */
typedef mt_status (*mt_lower_moves_fn)(mt_graph *g, mt_lower_step *st,
                                       const mt_lower_services *sv);

/* The graph half of one op's descriptor. */
typedef struct {
    mt_op_role   role;
    mt_grad_rule grad;     /* GLOBAL and LOCAL: required; BACKWARD: NULL */
    mt_shard_fn  shard;    /* GLOBAL: required; else NULL (the op has no sharding rule) */
    mt_lower_fn  lower;    /* GLOBAL: required; else NULL (it cannot be partitioned) */
    /* GLOBAL: required (mt__lower_moves_generic for an op that leaves its
     * moves to the partitioner); else NULL */
    mt_lower_moves_fn lower_moves;
    mt_op_recomp recomp;   /* required */
    mt_op_comm   comm;     /* required */
    /* A matrix product that runs in bf16 under MT_PRECISION_BF16 (precision.c:
     * bf16 operands, f32 accumulation, oneDNN or its fallback) */
    bool         bf16_product;
} mt_op_gdesc;

/* The graph half of each op's descriptor: one named definition per
 * MT_OP_LIST line, mt__gop_<name>, which op_desc.c's table points at.
 * op_desc.c defines most; an op in a file of its own defines its own there
 * (graph/op_rope.c: rope and rope_bwd). */
#define MT_OP_GDESC_DECL_(NAME, name) extern const mt_op_gdesc mt__gop_##name;
MT_OP_LIST(MT_OP_GDESC_DECL_)
#undef MT_OP_GDESC_DECL_

/* The graph half of op's descriptor (op < MT_OP_COUNT). */
const mt_op_gdesc *mt__op_gdesc(mt_op op);

/* ---- the rules the table names ------------------------------------------ */

/* grad_rules.c */
void mt__grad_matmul(mt_graph *g, const mt_op_call *f);
void mt__grad_linear(mt_graph *g, const mt_op_call *f);
void mt__grad_add(mt_graph *g, const mt_op_call *f);
void mt__grad_sub(mt_graph *g, const mt_op_call *f);
void mt__grad_mul(mt_graph *g, const mt_op_call *f);
void mt__grad_scale(mt_graph *g, const mt_op_call *f);
void mt__grad_gelu(mt_graph *g, const mt_op_call *f);
void mt__grad_layernorm(mt_graph *g, const mt_op_call *f);
void mt__grad_attention(mt_graph *g, const mt_op_call *f);
void mt__grad_embedding(mt_graph *g, const mt_op_call *f);
void mt__grad_cross_entropy(mt_graph *g, const mt_op_call *f);
void mt__grad_mse(mt_graph *g, const mt_op_call *f);
void mt__grad_sum(mt_graph *g, const mt_op_call *f);
void mt__grad_transpose(mt_graph *g, const mt_op_call *f);
void mt__grad_reshard(mt_graph *g, const mt_op_call *f);
void mt__grad_rmsnorm(mt_graph *g, const mt_op_call *f);
void mt__grad_swiglu(mt_graph *g, const mt_op_call *f);
void mt__grad_attention_gqa(mt_graph *g, const mt_op_call *f);
void mt__grad_psum(mt_graph *g, const mt_op_call *f);
void mt__grad_all_gather(mt_graph *g, const mt_op_call *f);
void mt__grad_psum_scatter(mt_graph *g, const mt_op_call *f);
void mt__grad_ppermute(mt_graph *g, const mt_op_call *f);
void mt__grad_all_to_all(mt_graph *g, const mt_op_call *f);
void mt__grad_pvary(mt_graph *g, const mt_op_call *f);
void mt__grad_slice(mt_graph *g, const mt_op_call *f);
/* mt__grad_ag_linear, mt__grad_linear_rs: graph_impl.h (collective_matmul.c) */

/* shard_rules_ops.c */
mt_status mt__shard_matmul(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_linear(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_add(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_sub(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_mul(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_reshard(struct mt_srule *r, const mt_op_call *call, mt_type *in);
/* shard_rules_nn.c */
mt_status mt__shard_scale(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_gelu(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_layernorm(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_attention(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_embedding(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_cross_entropy(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_mse(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_sum(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_transpose(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_rmsnorm(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_swiglu(struct mt_srule *r, const mt_op_call *call, mt_type *in);
mt_status mt__shard_attention_gqa(struct mt_srule *r, const mt_op_call *call, mt_type *in);

/* lower.c */
mt_tensor *mt__lower_matmul(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e);
mt_tensor *mt__lower_linear(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e);
mt_tensor *mt__lower_add(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e);
mt_tensor *mt__lower_sub(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e);
mt_tensor *mt__lower_mul(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e);
mt_tensor *mt__lower_scale(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e);
mt_tensor *mt__lower_gelu(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e);
mt_tensor *mt__lower_layernorm(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                               const mt_lower_env *e);
mt_tensor *mt__lower_attention(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                               const mt_lower_env *e);
mt_tensor *mt__lower_embedding(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                               const mt_lower_env *e);
mt_tensor *mt__lower_cross_entropy(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                                   const mt_lower_env *e);
mt_tensor *mt__lower_mse(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e);
mt_tensor *mt__lower_sum(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e);
mt_tensor *mt__lower_transpose(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                               const mt_lower_env *e);
mt_tensor *mt__lower_reshard(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                             const mt_lower_env *e);
mt_tensor *mt__lower_rmsnorm(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                             const mt_lower_env *e);
mt_tensor *mt__lower_swiglu(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                            const mt_lower_env *e);
mt_tensor *mt__lower_attention_gqa(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                                   const mt_lower_env *e);

/* The axes a lowered result of st varies over: those its inputs 0..n_in
 * vary over but the ones all-reduced inside the op, and the ones its type
 * splits or sums over (st->type). */
uint32_t mt__lower_vary(const mt_lower_step *st);

/* attention_split.c: attention whose T comes split over axes (the global
 * type's dim 1): the keys and values all-gathered over them, the queries
 * attending by head-tail position (CONTEXT_PARALLEL.md §5); and the split
 * packed form's gradient (mt__grad_attention calls it for two operands) */
/* docs: the document ids (B,T) split as the queries' rows, or NULL (one
 * document); the keys' ids travel with the keys. */
mt_tensor *mt__lower_attention_split(mt_graph *g, mt_tensor *qkv, mt_tensor *docs, int NH,
                                     const mt_lower_env *e);
mt_tensor *mt__lower_attention_gqa_split(mt_graph *g, mt_tensor **in, mt_tensor *docs, int NH,
                                         int KV, int G, int hoff, const mt_lower_env *e);
void       mt__grad_attention_split(mt_graph *g, const mt_op_call *f);

/* lower_moves.c: the generic order (every op without a hook of its own),
 * and the hooks. no_pvary: the generic order without the pvary of the
 * inputs (pvary_inputs), for an op whose operands do not meet (aux_attach:
 * a loss the devices of an axis share gets its factor once, not the sum
 * of the replicas' that a pvary's backward would make) */
mt_status mt__lower_moves_generic(mt_graph *g, mt_lower_step *st, const mt_lower_services *sv);
mt_status mt__lower_moves_no_pvary(mt_graph *g, mt_lower_step *st, const mt_lower_services *sv);
mt_status mt__lower_moves_cross_entropy(mt_graph *g, mt_lower_step *st,
                                        const mt_lower_services *sv);
/* Whether a gather mv of a value varying over `vary` that meets values
 * varying over `meets` (mt__lower_meets) is the varying kind, JAX's
 * all_gather of a varying value (its gradient reduce-scattered): when the
 * value varies over mv's axes and so does what it meets. That is the
 * invariant gather followed by the pvary the meeting would add
 * (pvary_inputs), in one; a gather of anything else is the invariant kind
 * (its gradient sliced). */
bool     mt__lower_gather_varies(const mt_move *mv, uint32_t vary, uint32_t meets);
/* The axes the op's operands other than k vary over once the rule's operand
 * moves from st->next on have run on them (their gathers the invariant
 * kind): what operand k meets in the op. */
uint32_t mt__lower_meets(const mt_lower_step *st, int k);
/* How the axes a value varies over change through move mv (a gather the
 * varying kind if `varying`). */
uint32_t mt__lower_vary_after(uint32_t vary, const mt_move *mv, bool varying);

/* lower_linear.c: linear's hook (the late bias; a partial result reduced
 * onto its constraint's split, mt_lower_services.constraint_scatter), and
 * its pieces for the variants */
mt_status mt__lower_moves_linear(mt_graph *g, mt_lower_step *st, const mt_lower_services *sv);
/* The late bias: when moves on the result remain, the bias (input 2) is left
 * out of the product (st->n_in 2) and returned with its variance in *vary;
 * else NULL. */
mt_tensor *mt__linear_take_bias(mt_lower_step *st, uint32_t *vary);
/* After the product (st->out, st->type; NULL: the local graph's failure):
 * st->out_vary, the result moves, the partial sum's reduce-scatter onto the
 * constraint's split, then the late bias (from mt__linear_take_bias; NULL:
 * none) added to the reduced product. */
mt_status  mt__linear_finish(mt_graph *g, mt_lower_step *st, const mt_lower_services *sv,
                             mt_tensor *bias, uint32_t bias_vary);
/* lower_linear_ring.c: collective matmul, a variant of linear's hook */
mt_status mt__lower_moves_linear_ring(mt_graph *g, mt_lower_step *st,
                                      const mt_lower_services *sv);

/* ---- variants ----------------------------------------------------------------
 * A variant of an op's lowering with the moves around it, chosen by name
 * (mt_partition_opts.lowerings) and used in place of the descriptor's
 * lower_moves for the op it names. One table (op_desc.c); a variant is one
 * line there plus its hook's file. */
typedef struct {
    const char       *name;          /* "collective_matmul" */
    mt_op             op;
    mt_lower_moves_fn lower_moves;   /* in place of the descriptor's, or NULL */
    mt_lower_fn       lower;         /* in place of the descriptor's lowering, or NULL */
} mt_lower_variant;

/* lower.c: attention's lowering with T split head-tail, by the ring or by
 * Ulysses (variants of ATTENTION's and ATTENTION_GQA's lowering) */
mt_tensor *mt__lower_attention_ring(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                                    const mt_lower_env *e);
mt_tensor *mt__lower_attention_ulysses(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                                       const mt_lower_env *e);

/* The variant named by the len bytes at `name`, or NULL. */
const mt_lower_variant *mt__lower_variant_find(const char *name, size_t len);
/* The i-th variant (from 0), or NULL past the last. */
const mt_lower_variant *mt__lower_variant_at(int i);

#endif /* MT_OP_DESC_H */
