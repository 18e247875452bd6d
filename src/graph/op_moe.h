/*
 * op_moe.h — the MoE ops' builder for the graph layer (internal): the one
 * builder behind meshtrain/graph_moe.h's (op_moe_build.c), which the
 * lowerings (op_moe.c) call with a global call's parameters.
 */
#ifndef MT_GRAPH_OP_MOE_H
#define MT_GRAPH_OP_MOE_H

#include "graph/graph_impl.h"

/* Appends the forward node of MoE op `op` (MT_OP_MOE_ROUTE, _GATES,
 * _DISPATCH, _EXPERTS, _COMBINE, _ROUTER_LOSS) on its n_in inputs (as
 * ops_impl.h's MT_OP_LIST line lists them) with parameters p, after
 * checking their shapes and dtypes; its output, or NULL with g's error
 * naming the op and the operands. */
mt_tensor *mt__moe_build(mt_graph *g, mt_op op, mt_tensor *const *in, int n_in,
                         const mt_moe_op_params *p);

#endif /* MT_GRAPH_OP_MOE_H */
