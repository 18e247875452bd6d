/*
 * shard_rules.h — the sharding rule of every forward op over its call, for
 * the partitioner (internal). mt_shard_rule() (graph.h) is the public face of
 * the same rules for a few ops named by text.
 *
 * A rule reads global types: in[i] is the type of call->in[i] (global shape,
 * sharding, partial sums), and the op's parameters are call->p as the
 * builder set them for the global shapes. It writes the result type and the
 * moves, in the order they run: moves on operands (before the op), moves
 * inside the op (MT_MOVE_INSIDE), moves on the result (after it).
 *
 * What the partitioner must know beyond the types (shard_rules*.c):
 *   - linear with a bias whose product is a partial sum (auto mode): the
 *     result is all-reduced (a move on MT_MOVE_RESULT); the partitioner runs
 *     the linear without its bias, the all-reduce, then adds the bias, so
 *     that it is counted once;
 *   - embedding with the table split over V: each device looks its ids up in
 *     its rows and writes zeros for the others (masked lookup); the result is
 *     partial over those axes and has no move;
 *   - cross-entropy with logits split over Vp: two MT_MOVE_INSIDE all-reduces
 *     of the row statistics (max, then sum of exp), each rows × 4 bytes.
 */
#ifndef MT_SHARD_RULES_H
#define MT_SHARD_RULES_H

#include "graph/graph_impl.h"

/* The rule of forward op call->op. MT_EINVAL naming the op for an op without
 * a rule; otherwise as mt_shard_rule(). */
mt_status mt__shard_rule(const mt_mesh *mesh, const mt_op_call *call, const mt_type *in,
                         mt_shard_mode mode, mt_shard_result *out);

/* The rule of a reshape (a view, not a node) of `in` to (ndim, shape): a
 * split dim may be merged with whole minor dims after it, or split into a
 * split major dim and whole minor ones, keeping its axes; anything else
 * gathers first (auto) or fails naming the reshape (explicit). */
mt_status mt__shard_reshape(const mt_mesh *mesh, const mt_type *in, int ndim,
                            const int64_t *shape, mt_shard_mode mode, mt_shard_result *out);

#endif /* MT_SHARD_RULES_H */
