/*
 * lower_linear_ring.c — collective matmul (Wang et al. 2023, XLA's windowed
 * einsum), a variant of linear's hook (op_desc.c's variants table, chosen by
 * mt_partition_opts.lowerings "collective_matmul"): the collectives around
 * y = x · wᵀ run inside the product's ring, each chunk's transfer in flight
 * while the previous chunk's product runs.
 *
 *   - x's rows gathered over axes they vary over, w varying over them too
 *     (the varying gather, x's only move): mt_graph_all_gather_linear;
 *   - a partial product that y's constraint reduce-scatters onto its rows
 *     (the rule's last move, no bias left in the product):
 *     mt_graph_linear_reduce_scatter.
 *
 * Anything else is linear's plain hook (lower_linear.c), whose pieces this
 * one shares: the late bias, the result moves and the constraint.
 */
#include "graph/op_desc.h"

#define TRY(call) do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

/* The index of the move that gathers x's rows as the varying kind when it
 * is x's only move: the ring's; else -1. */
static int ring_gather(const mt_lower_step *st) {
    const mt_shard_result *r = st->rule;
    int x_moves = 0, found = -1;
    for (int m = 0; m < r->n_moves; m++) x_moves += r->moves[m].operand == 0;
    if (x_moves != 1) return -1;
    uint32_t meets = mt__lower_meets(st, 0);
    for (int m = st->next; m < r->n_moves && r->moves[m].operand >= 0; m++)
        if (r->moves[m].operand == 0 && mt__lower_gather_varies(&r->moves[m], st->vary[0], meets))
            found = m;
    return found;
}

mt_status mt__lower_moves_linear_ring(mt_graph *g, mt_lower_step *st,
                                      const mt_lower_services *sv) {
    const mt_shard_result *r = st->rule;
    int gather = ring_gather(st);   /* x stays this device's rows; its vary too */
    TRY(sv->operand_moves(sv->ctx, st, gather));
    TRY(sv->inside_moves(sv->ctx, st, false));
    uint32_t bias_vary;
    mt_tensor *bias = mt__linear_take_bias(st, &bias_vary);
    TRY(sv->pvary_inputs(sv->ctx, st));
    mt_move scatter;
    bool scatter_in_ring = st->n_in == 2 && gather < 0 && st->next == r->n_moves - 1 &&
                           r->moves[st->next].kind == MT_MOVE_ALL_REDUCE &&
                           sv->constraint_scatter(sv->ctx, st, &r->moves[st->next].before,
                                                  r->moves[st->next].axes, &scatter);
    if (gather >= 0) {
        const mt_move *mv = &r->moves[gather];
        st->out = mt_graph_all_gather_linear(g, st->in[0], st->in[1],
                                             st->n_in > 2 ? st->in[2] : NULL,
                                             sv->axes(sv->ctx, mv->axes), mv->dim);
        st->type = r->result;
    } else if (scatter_in_ring) {
        st->out = mt_graph_linear_reduce_scatter(g, st->in[0], st->in[1],
                                                 sv->axes(sv->ctx, scatter.axes), scatter.dim);
        st->type = scatter.after;
        if (st->out) st->out->sharding = st->type.sharding;   /* its type, for listings */
        st->next = r->n_moves;
    } else {
        TRY(sv->lower(sv->ctx, st));
    }
    return mt__linear_finish(g, st, sv, bias, bias_vary);
}
