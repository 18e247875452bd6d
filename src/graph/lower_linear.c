/*
 * lower_linear.c — linear's lowering with the moves around it (op_desc.h's
 * mt_lower_moves_fn): what the partitioner's generic order would get wrong
 * or leave slow for y = x · wᵀ + b.
 *
 *   - late bias: when the product is a partial sum that the rule reduces
 *     (w split over C), the bias is added after the reduction, once, not on
 *     every device before it;
 *   - sequence parallelism: that reduction (before the late bias) becomes a
 *     reduce-scatter onto the rows, T split over the sequence axes;
 *   - collective matmul: x's rows gathered by sequence parallelism (its only
 *     move) go into the product's ring (mt_graph_all_gather_linear), and the
 *     reduce-scatter of the line above runs in the product's ring
 *     (mt_graph_linear_reduce_scatter).
 *
 * The rule's types say which applies; the partitioner's services
 * (mt_lower_services) run every move the linear does not take itself.
 */
#include "graph/op_desc.h"

#define TRY(call) do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

/* The index of the move that gathers x's rows for sequence parallelism when
 * it is x's only move and collective matmul is on: the ring's; else -1. */
static int ring_gather(const mt_lower_step *st, const mt_lower_services *sv) {
    const mt_shard_result *r = st->rule;
    int x_moves = 0, found = -1;
    for (int m = 0; m < r->n_moves; m++) x_moves += r->moves[m].operand == 0;
    if (!sv->coll_matmul || x_moves != 1) return -1;
    for (int m = st->next; m < r->n_moves && r->moves[m].operand >= 0; m++)
        if (r->moves[m].operand == 0 && sv->sequence_gather(sv->ctx, &r->moves[m], st->vary[0]))
            found = m;
    return found;
}

/* Runs the result moves from st->next on; the all-reduce of the partial
 * sums, when last, becomes sequence parallelism's reduce-scatter. */
static mt_status result_moves(mt_lower_step *st, const mt_lower_services *sv) {
    const mt_shard_result *r = st->rule;
    for (; st->next < r->n_moves; st->next++) {
        mt_move mv = r->moves[st->next];
        if (mv.kind == MT_MOVE_ALL_REDUCE && st->next == r->n_moves - 1 &&
            sv->sequence_scatter(sv->ctx, &mv.before, mv.axes, &mv)) {
            st->type = mv.after;
            st->out_vary |= mv.axes;
        }
        if (!(st->out = sv->move(sv->ctx, st->out, &mv, &st->out_vary)))
            return sv->failed(sv->ctx, st);
    }
    return MT_OK;
}

mt_status mt__lower_moves_linear(mt_graph *g, mt_lower_step *st, const mt_lower_services *sv) {
    const mt_shard_result *r = st->rule;
    int gather = ring_gather(st, sv);   /* x stays this device's rows; its vary too */
    TRY(sv->operand_moves(sv->ctx, st, gather));
    TRY(sv->inside_moves(sv->ctx, st, false));
    /* late bias: left out of the product while moves on the result remain */
    mt_tensor *bias = NULL;
    uint32_t bias_vary = 0;
    if (st->n_in > 2 && st->next < r->n_moves) {
        bias = st->in[2];
        bias_vary = st->vary[2];
        st->n_in = 2;
    }
    TRY(sv->pvary_inputs(sv->ctx, st));
    mt_move scatter;
    bool scatter_in_ring = sv->coll_matmul && st->n_in == 2 && gather < 0 &&
                           st->next == r->n_moves - 1 &&
                           r->moves[st->next].kind == MT_MOVE_ALL_REDUCE &&
                           sv->sequence_scatter(sv->ctx, &r->moves[st->next].before,
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
    if (!st->out) return sv->failed(sv->ctx, st);
    st->out_vary = mt__lower_vary(st);
    TRY(result_moves(st, sv));
    if (!bias) return sv->keep_partial(sv->ctx, st);
    /* the bias meets the reduced product, which may still vary (over the
     * batch axes): a pvary over those, as for any other input */
    if (!(bias = sv->pvary(sv->ctx, st->call->in[2], bias, bias_vary, st->out_vary)) ||
        !(st->out = mt_add(g, st->out, bias)))
        return sv->failed(sv->ctx, st);
    return MT_OK;
}
