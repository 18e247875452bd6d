/*
 * lower_moves.c — how an op is lowered with the moves around it (op_desc.h):
 * the generic order, rule -> moves -> lower -> moves, which every op without
 * a hook of its own runs (and without the inputs' pvary, for an op whose
 * operands do not meet), cross-entropy's hook, which takes the collectives
 * inside it, and which kind of gather an operand move is.
 * Linear's hook is lower_linear.c's.
 *
 * The steps are the partitioner's services (partition/node.c): graph code cannot
 * call up into partition/, so a hook reaches them through `sv`.
 */
#include "graph/op_desc.h"

#define TRY(call) do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

/* The steps in the order the rule gives the moves; the moves inside the op
 * taken if `inside` (the op's lowering runs them), else refused; the
 * inputs given their pvary if `pvary`. */
static mt_status in_order(mt_lower_step *st, const mt_lower_services *sv, bool inside,
                          bool pvary) {
    TRY(sv->operand_moves(sv->ctx, st, -1));
    TRY(sv->inside_moves(sv->ctx, st, inside));
    if (pvary) TRY(sv->pvary_inputs(sv->ctx, st));
    TRY(sv->lower(sv->ctx, st));
    TRY(sv->result_moves(sv->ctx, st));
    return sv->constrain(sv->ctx, st);
}

mt_status mt__lower_moves_generic(mt_graph *g, mt_lower_step *st, const mt_lower_services *sv) {
    (void)g;
    return in_order(st, sv, false, true);
}

mt_status mt__lower_moves_no_pvary(mt_graph *g, mt_lower_step *st, const mt_lower_services *sv) {
    (void)g;
    return in_order(st, sv, false, false);
}

/* Logits split over the vocabulary: the loss all-reduces its row statistics
 * itself (mt__lower_cross_entropy reads st->inside through its env). */
mt_status mt__lower_moves_cross_entropy(mt_graph *g, mt_lower_step *st,
                                        const mt_lower_services *sv) {
    (void)g;
    return in_order(st, sv, true, true);
}

uint32_t mt__lower_vary_after(uint32_t vary, const mt_move *mv, bool varying) {
    switch (mv->kind) {
    case MT_MOVE_ALL_REDUCE: return vary & ~mv->axes;   /* the sum is the same everywhere */
    case MT_MOVE_ALL_GATHER:                            /* so is the gathered whole */
        return varying ? vary : vary & ~mv->axes;
    case MT_MOVE_SLICE:      return vary | mv->axes;    /* each device keeps its own block */
    default:                 return vary;
    }
}

uint32_t mt__lower_meets(const mt_lower_step *st, int k) {
    uint32_t meets = 0;
    for (int j = 0; j < st->n_in; j++) {
        if (j == k) continue;
        uint32_t v = st->vary[j];
        for (int m = st->next; m < st->rule->n_moves && st->rule->moves[m].operand >= 0; m++)
            if (st->rule->moves[m].operand == j)
                v = mt__lower_vary_after(v, &st->rule->moves[m], false);
        meets |= v;
    }
    return meets;
}

bool mt__lower_gather_varies(const mt_move *mv, uint32_t vary, uint32_t meets) {
    return mv->kind == MT_MOVE_ALL_GATHER && mv->axes && (vary & mv->axes) == mv->axes &&
           (meets & mv->axes) == mv->axes;
}
