/*
 * op_varies.c — a value marked as differing between devices by a logical
 * axis, to a graph: the builder (mt_graph_varies, meshtrain/graph.h), its
 * gradient, sharding and lowering rules, and the graph half of its
 * descriptor (op_desc.h); the kernel half is ops/op_table.c's copy.
 *
 * out = x. Partitioned, out is x with a pvary over the mesh axes the rules
 * give the logical axis (mt_graph_shard_by_rules writes them into the
 * call): every op reading out then meets a value that already varies over
 * them, so none gives its own operand a pvary, and the gradients those
 * readers send back are summed over the axes once, by this pvary's
 * transpose. A mixture's block marks its input so over the axes that split
 * its experts' columns: the sorted rows, k times the tokens, then need no
 * sum of their own.
 */
#include "graph/builders_impl.h"
#include "graph/op_desc.h"
#include "graph/shard_rules_impl.h"

#include <string.h>

#define TRY(call) do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

mt_tensor *mt_graph_varies(mt_graph *g, mt_tensor *x, const char *logical) {
    if (!mt__build_ready(g, 1, &x) || !mt__build_want_dtype(g, "varies", x, MT_F32)) return NULL;
    if (!logical || !*logical || strlen(logical) >= MT_LOGICAL_NAME)
        return mt__graph_error(g, MT_EINVAL, "varies of '%s': the logical axis must be a name "
                               "of 1 to %d bytes", x->name, MT_LOGICAL_NAME - 1);
    mt_op_params p = {0};
    memcpy(p.varies.logical, logical, strlen(logical) + 1);
    return mt__build_simple(g, MT_OP_VARIES, x->ndim, x->shape, &x, 1, p);
}

static void grad_varies(mt_graph *g, const mt_op_call *f) {
    mt_op_call dx = {.op = MT_OP_SCALE_BWD, .n_in = 1, .in = {f->out->grad}};
    dx.p.scale.s = 1.0f;
    mt__emit_grad(g, f->in[0], &dx);
}

static mt_status shard_varies(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    r->out->result = in[0];
    return MT_OK;
}

/* The local x itself: the pvary is the partitioner's (moves_varies). */
static mt_tensor *lower_varies(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                               const mt_lower_env *e) {
    (void)g, (void)c, (void)e;
    return in[0];
}

/* The generic order, then the partitioner's pvary of the result over the
 * call's axes (the same node as any other reader's pvary of x over them). */
static mt_status moves_varies(mt_graph *g, mt_lower_step *st, const mt_lower_services *sv) {
    (void)g;
    TRY(sv->operand_moves(sv->ctx, st, -1));
    TRY(sv->inside_moves(sv->ctx, st, false));
    TRY(sv->lower(sv->ctx, st));
    TRY(sv->result_moves(sv->ctx, st));
    const uint32_t axes = st->call->p.varies.axes;
    if (axes && st->out->needs_grad) {
        mt_tensor *y = sv->pvary(sv->ctx, st->call->in[0], st->out, st->out_vary, axes);
        if (!y) return sv->failed(sv->ctx, st);
        st->out = y;
        st->out_vary |= axes;
    }
    return sv->constrain(sv->ctx, st);
}

/* varies: a forward op of global programs, recomputed by remat (a copy),
 * no communication (its pvary's transpose is the partitioner's). */
const mt_op_gdesc mt__gop_varies = {
    .role = MT_ROLE_GLOBAL, .grad = grad_varies, .shard = shard_varies, .lower = lower_varies,
    .lower_moves = moves_varies, .recomp = MT_RECOMP_LOCAL, .comm = MT_COMM_NONE,
};
