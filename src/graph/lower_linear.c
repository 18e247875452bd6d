/*
 * lower_linear.c — linear's lowering with the moves around it (op_desc.h's
 * mt_lower_moves_fn): what the partitioner's generic order would get wrong
 * for y = x · wᵀ + b.
 *
 *   - late bias: when the product is a partial sum that the rule reduces
 *     (w split over C), the bias is added after the reduction, once, not on
 *     every device before it;
 *   - a constraint on y (mt_tensor_set_constraint) that splits a dim over
 *     the axes of that reduction makes it a reduce-scatter onto that dim
 *     (Megatron's sequence parallelism: the rows T), before the late bias.
 *
 * The operands' types say which applies; the partitioner's services
 * (mt_lower_services) run every move the linear does not take itself.
 * Collective matmul, which runs those collectives inside the product, is a
 * variant of this hook (lower_linear_ring.c) made of the same pieces.
 */
#include "graph/op_desc.h"

#define TRY(call) do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

mt_tensor *mt__linear_take_bias(mt_lower_step *st, uint32_t *vary) {
    *vary = 0;
    if (st->n_in <= 2 || st->next >= st->rule->n_moves) return NULL;
    st->n_in = 2;
    *vary = st->vary[2];
    return st->in[2];
}

/* Runs the result moves from st->next on; the all-reduce of the partial
 * sums, when last, becomes the constraint's reduce-scatter. */
static mt_status result_moves(mt_lower_step *st, const mt_lower_services *sv) {
    const mt_shard_result *r = st->rule;
    for (; st->next < r->n_moves; st->next++) {
        mt_move mv = r->moves[st->next];
        if (mv.kind == MT_MOVE_ALL_REDUCE && st->next == r->n_moves - 1 &&
            sv->constraint_scatter(sv->ctx, st, &mv.before, mv.axes, &mv)) {
            st->type = mv.after;
            st->out_vary |= mv.axes;
        }
        if (!(st->out = sv->move(sv->ctx, st->out, &mv, &st->out_vary)))
            return sv->failed(sv->ctx, st);
    }
    return MT_OK;
}

mt_status mt__linear_finish(mt_graph *g, mt_lower_step *st, const mt_lower_services *sv,
                            mt_tensor *bias, uint32_t bias_vary) {
    if (!st->out) return sv->failed(sv->ctx, st);
    st->out_vary = mt__lower_vary(st);
    TRY(result_moves(st, sv));
    if (!bias) return sv->constrain(sv->ctx, st);
    /* the bias meets the reduced product, which may still vary (over the
     * batch axes): a pvary over those, as for any other input */
    if (!(bias = sv->pvary(sv->ctx, st->call->in[2], bias, bias_vary, st->out_vary)) ||
        !(st->out = mt_add(g, st->out, bias)))
        return sv->failed(sv->ctx, st);
    return MT_OK;
}

mt_status mt__lower_moves_linear(mt_graph *g, mt_lower_step *st, const mt_lower_services *sv) {
    TRY(sv->operand_moves(sv->ctx, st, -1));
    TRY(sv->inside_moves(sv->ctx, st, false));
    uint32_t bias_vary;
    mt_tensor *bias = mt__linear_take_bias(st, &bias_vary);
    TRY(sv->pvary_inputs(sv->ctx, st));
    TRY(sv->lower(sv->ctx, st));
    return mt__linear_finish(g, st, sv, bias, bias_vary);
}
