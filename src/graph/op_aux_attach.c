/*
 * op_aux_attach.c — a side loss attached to a pipeline stage's output, to a
 * graph: the builder (mt_aux_attach, meshtrain/graph.h), its gradient,
 * sharding and lowering rules, and the graph half of the descriptors of
 * aux_attach and aux_seed (op_desc.h). The kernel half is ops/aux_attach.c's.
 *
 * out = y; in the backward y gets out's gradient and the scalar loss the
 * constant s, so the loss counts in the model's loss times s though no
 * path leads from it to the stage's output (a mixture's router loss in a
 * stage that is not the last: Megatron-LM's MoEAuxLossAutoScaler). The
 * loss may be a partial sum over the axes that split its rows (each
 * device's share of it): each share gets s, as each would in the loss.
 */
#include "graph/builders_impl.h"
#include "graph/op_desc.h"
#include "graph/shard_rules_impl.h"

#include <math.h>


mt_tensor *mt_aux_attach(mt_graph *g, mt_tensor *y, mt_tensor *loss, float s) {
    mt_tensor *in[2] = {y, loss};
    if (!mt__build_ready(g, 2, in) || !mt__build_want_dtype(g, "aux_attach", y, MT_F32) ||
        !mt__build_want_dtype(g, "aux_attach", loss, MT_F32))
        return NULL;
    if (loss->ndim != 0)
        return mt__graph_error(g, MT_ESHAPE, "aux_attach: the loss '%s' must be a scalar (it "
                               "has %d dims)", loss->name, loss->ndim);
    if (!isfinite(s))
        return mt__graph_error(g, MT_EINVAL, "aux_attach: the loss's factor %g must be finite",
                               (double)s);
    mt_op_params p = {.scale = {.s = s}};
    return mt__build_simple(g, MT_OP_AUX_ATTACH, y->ndim, y->shape, in, 2, p);
}

/* dy = dout; d loss = s, whatever dout is (aux_seed reads it only to come
 * after it). */
static void grad_aux_attach(mt_graph *g, const mt_op_call *f) {
    mt_op_call dy = {.op = MT_OP_SCALE_BWD, .n_in = 1, .in = {f->out->grad}};
    dy.p.scale.s = 1.0f;
    mt__emit_grad(g, f->in[0], &dy);
    mt_op_call dl = {.op = MT_OP_AUX_SEED, .n_in = 1, .in = {f->out->grad}};
    dl.p.scale = f->p.scale;
    mt__emit_grad(g, f->in[1], &dl);
}

/* The result is y's type; the loss stays as it is (a partial sum: each
 * share gets s). */
static mt_status shard_aux_attach(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    if (in[1].ndim != 0)
        return mt_fail(MT_ESHAPE, "%s: the loss %s must be a scalar", r->op,
                       mt__stype(r->mesh, &in[1]).s);
    r->out->result = in[0];
    return MT_OK;
}

static mt_tensor *lower_aux_attach(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                                   const mt_lower_env *e) {
    (void)e;
    return mt_aux_attach(g, in[0], in[1], c->p.scale.s);
}

/* aux_attach: a forward op of global programs, never recomputed (a stage's
 * last node, outside every block), no communication. Its loss meets
 * nothing (its gradient is s, not the output's): no pvary of the inputs,
 * in the builder's types (the kernel half's meet: the output alone) and in
 * the lowering (a loss the devices of an axis share, tensor parallelism's
 * replicas, gets s once, not the sum of the replicas' s a pvary's backward
 * makes). */
const mt_op_gdesc mt__gop_aux_attach = {
    .role = MT_ROLE_GLOBAL, .grad = grad_aux_attach, .shard = shard_aux_attach,
    .lower = lower_aux_attach, .lower_moves = mt__lower_moves_no_pvary,
    .recomp = MT_RECOMP_NEVER, .comm = MT_COMM_NONE,
};

/* aux_seed: made by grad_aux_attach only. */
const mt_op_gdesc mt__gop_aux_seed = {
    .role = MT_ROLE_BACKWARD, .recomp = MT_RECOMP_NEVER, .comm = MT_COMM_NONE,
};
