/*
 * shard_rules_impl.h — what the sharding rules share (internal to
 * shard_rules*.c): a rule's context, types printed for messages, and the
 * moves, each applied to the operand's type as it is recorded so that every
 * move's before/after and bytes come from one place.
 *
 *   shard_moves.c      the move algebra, the result checks, types as text
 *   shard_rules_ops.c  matmul, linear, elementwise add/sub/mul, reshard
 *   shard_rules.c      dispatch through the op descriptors (op_desc.c),
 *                      mt_shard_rule()
 *   shard_rules_nn.c   scale, gelu, layernorm, attention, embedding, losses,
 *                      sum, transpose, reshape
 */
#ifndef MT_SHARD_RULES_IMPL_H
#define MT_SHARD_RULES_IMPL_H

#include "graph/op_desc.h"
#include "graph/shard_rules.h"
#include "mesh/mesh_impl.h"

/* One rule being worked out. */
typedef struct mt_srule {
    const mt_mesh   *mesh;
    mt_shard_mode    mode;
    const char      *op;            /* the op's name in messages ("add", "layernorm") */
    mt_shard_result *out;
} mt_srule;

/* Text for messages, returned by value: use it within one expression. */
typedef struct { char s[192]; } mt_stext;
mt_stext mt__stype(const mt_mesh *mesh, const mt_type *t);     /* "f32[8@x,4]" */
mt_stext mt__saxes(const mt_mesh *mesh, uint32_t set);         /* "x+y" */

/* Devices along the axes of `set` (the product of their sizes). */
int64_t  mt__saxes_size(const mt_mesh *mesh, uint32_t set);
/* The first mesh axis t uses twice (over its dims and its partial sums), or -1. */
int      mt__stype_axis_twice(const mt_type *t);

/* Records a move of `kind` on `operand` (an input index, MT_MOVE_RESULT or
 * MT_MOVE_INSIDE) and applies it to *t: all-gather removes `axes` from dim,
 * slice adds them, all-reduce drops them from the partial sums,
 * reduce-scatter drops them there and splits dim over them, all-to-all moves
 * them from dim to dim2. Fails when the rule asks for more than MT_MAX_MOVES. */
mt_status mt__smove(mt_srule *r, mt_move_kind kind, int operand, int dim, int dim2,
                    uint32_t axes, mt_type *t);

/* The moves that take *t to the layout of `target` (same dtype and shape),
 * in this order: partial sums reduced (reduce-scatter onto a dim the target
 * splits over exactly some of them, all-reduce for the rest), axes moved
 * between dims (all-to-all), dims made whole (all-gather), dims split
 * (slice). MT_ESHARDING when the target holds partial sums *t does not. */
mt_status mt__smove_to(mt_srule *r, int operand, mt_type *t, const mt_type *target);

/* For an op that is not linear in operand `name`: all-reduces its partial
 * sums (auto) or fails naming the operand and the reshard (explicit). */
mt_status mt__sneed_summed(mt_srule *r, int operand, const char *name, mt_type *t);

/* For an op that needs dim `dim` of operand `name` whole: all-gathers it
 * (auto) or fails (explicit) with `why` (what the op needs it for and the
 * alternatives), saying that a reshard resolves it. */
mt_status mt__sneed_whole(mt_srule *r, int operand, const char *name, mt_type *t, int dim,
                          const char *why);

/* MT_ESHARDING naming the op, the axis and the operand types when `result`
 * would use one mesh axis twice; `names` name in[0 .. n_in). */
mt_status mt__scheck_result(mt_srule *r, const mt_type *result, const mt_type *in, int n_in,
                            const char *const *names);

/* The rules of shard_rules_ops.c, which its mt__shard_<op> (op_desc.h) call
 * with the call's parameters: in[] are the call's global input types
 * (copied: a rule updates them as it moves them). The rest of the per-op
 * rules are op_desc.h's mt__shard_<op>. */
mt_status mt__srule_matmul(mt_srule *r, mt_type *in, bool ta, bool tb);
mt_status mt__srule_linear(mt_srule *r, mt_type *in, int n_in);
mt_status mt__srule_elementwise(mt_srule *r, mt_type *in, bool linear);
/* reshard in[0] to in[1]'s layout (the same dtype and shape; MT_ESHAPE
 * otherwise): mt_shard_rule("reshard") and the reshard op's rule. */
mt_status mt__srule_reshard(mt_srule *r, const mt_type *in);

#endif /* MT_SHARD_RULES_IMPL_H */
