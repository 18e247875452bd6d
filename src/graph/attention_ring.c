/*
 * attention_ring.c — the ring attention node of a device-local graph
 * (../shared/CONTEXT_PARALLEL.md §4): its builder, which the context
 * lowering calls (attention_split.c, --cp-attention ring), its gradient
 * rule and the graph half of the descriptors of ring_attention and
 * ring_attention_bwd (op_desc.h). The kernel half, the ring itself, is
 * ops/attention_ring.c's.
 *
 * The forward saves only the rows' log-sum-exp (B,NH,T); the backward
 * rotates k and v again rather than keeping the P-1 received copies, so
 * the op keeps memory linear in the local rows, and its dK, dV come home
 * inside the op (no reduce-scatter after it). The packed GPT form has one
 * gradient, d(qkv); the grouped-query form's three are dq (out), dk (out2)
 * and dv, which the backward writes into a buffer of its own (aux[0]: an
 * op has two outputs) that a copy then adds into v's gradient.
 * Packed documents: the rows' document ids (B,T) are the last input of
 * both ops, and each k, v block travels with its rows' ids.
 */
#include "graph/builders_impl.h"
#include "graph/op_desc.h"

#include <stdlib.h>

#define SHAPE(t, buf) mt__shape_str((t), (buf), sizeof (buf))

/* The ring {k, k+1 mod P}, kept by g; NULL (g's error set) out of memory. */
static const int (*ring_of(mt_graph *g, int P))[2] {
    int (*pp)[2] = malloc((size_t)P * sizeof *pp);
    if (!pp) {
        mt__graph_error(g, MT_ENOMEM, "out of memory for a ring of %d devices", P);
        return NULL;
    }
    for (int k = 0; k < P; k++) {
        pp[k][0] = k;
        pp[k][1] = (k + 1) % P;
    }
    const int (*kept)[2] = mt__graph_keep(g, pp, (size_t)P * sizeof *pp);
    free(pp);
    return kept;
}

mt_tensor *mt__attention_ring(mt_graph *g, mt_tensor *q, mt_tensor *k, mt_tensor *v, int NH,
                              int KV, int G, int hoff, mt_axes axes) {
    return mt__attention_ring_docs(g, q, k, v, NULL, NH, KV, G, hoff, axes);
}

mt_tensor *mt__attention_ring_docs(mt_graph *g, mt_tensor *q, mt_tensor *k, mt_tensor *v,
                                   mt_tensor *docs, int NH, int KV, int G, int hoff,
                                   mt_axes axes) {
    const bool packed = !k;
    mt_tensor *ops[3] = {q, k, v};
    if (!mt__build_ready(g, packed ? 1 : 3, ops)) return NULL;
    if (!g->ctx)
        return mt__graph_error(g, MT_ESTATE, "ring attention of '%s': the graph has no device "
                               "to run on; call mt_graph_set_ctx first", q->name);
    const int P = mt_axis_size(g->ctx, axes);
    char sq[64], sk[64];
    const int64_t B = q->shape[0], T = q->shape[1];
    const int64_t C = packed ? (q->ndim == 4 ? q->shape[3] : q->shape[2] / 3) : q->shape[2];
    const bool shapes = packed ? (q->ndim == 3 && q->shape[2] % 3 == 0) ||
                                     (q->ndim == 4 && q->shape[2] == 3)
                               : q->ndim == 3 && k->ndim == 3 && v->ndim == 3 &&
                                     k->shape[0] == B && v->shape[0] == B &&
                                     k->shape[1] == T && v->shape[1] == T &&
                                     v->shape[2] == k->shape[2];
    if (!shapes || NH <= 0 || C % NH != 0 || (!packed && k->shape[2] != KV * (C / NH)))
        return mt__graph_error(g, MT_ESHAPE, "ring attention: q '%s' %s%s%s must be (B,T,3C), "
                               "(B,T,3,C), or (B,T,NH·HS) with k, v (B,T,KV·HS), NH=%d KV=%d",
                               q->name, SHAPE(q, sq), packed ? "" : " and k ",
                               packed ? "" : SHAPE(k, sk), NH, KV);
    if (P < 2 || T % 2 != 0)
        return mt__graph_error(g, MT_EINVAL, "ring attention of '%s' over %d devices: the "
                               "head-tail split needs 2 or more devices and T=%lld local rows "
                               "even (two chunks)", q->name, P, (long long)T);
    if (!packed && (G <= 0 || hoff < 0 || (hoff + NH - 1) / G >= KV))
        return mt__graph_error(g, MT_EINVAL, "ring attention: query heads %d..%d in groups of "
                               "G=%d read kv heads past the KV=%d that k '%s' holds", hoff,
                               hoff + NH - 1, G, KV, k->name);
    if (docs && !mt__build_ready(g, 1, &docs)) return NULL;
    if (docs && (docs->dtype != MT_I32 || docs->ndim != 2 || docs->shape[0] != B ||
                 docs->shape[1] != T))
        return mt__graph_error(g, MT_ESHAPE, "ring attention: document ids '%s' %s must be "
                               "int32 (B,T) of q '%s' %s", docs->name, SHAPE(docs, sk), q->name,
                               SHAPE(q, sq));
    if (!packed && (q->needs_grad != k->needs_grad || q->needs_grad != v->needs_grad))
        return mt__graph_error(g, MT_EUNSUPPORTED, "ring attention: q '%s', k '%s' and v '%s' "
                               "must all take gradients or none (one backward makes them)",
                               q->name, k->name, v->name);
    mt_op_call c = {.op = MT_OP_RING_ATTENTION, .n_in = packed ? 1 : 3, .in = {q, k, v}};
    c.p.ring = (mt_ring_params){
        .cm = {.axes = axes, .dim = 1, .P = P, .outer = B, .R = T},
        .B = B, .T = T, .NH = NH, .KV = packed ? NH : KV, .HS = C / NH,
        .G = packed ? 1 : G, .hoff = packed ? 0 : hoff, .packed = packed};
    c.p.ring.cm.K = 2 * c.p.ring.KV * c.p.ring.HS + (docs ? 1 : 0);   /* a k and a v row, its id */
    if (docs) {
        c.p.ring.doc = c.n_in;
        c.in[c.n_in++] = docs;
    }
    c.p.ring.cm.N = c.p.ring.cm.K;
    if (!(c.p.ring.cm.ring = ring_of(g, P))) return NULL;
    const int64_t shape[3] = {B, T, C}, lse_shape[3] = {B, NH, T};
    c.out = mt__tensor_new(g, NULL, MT_F32, MT_ACT, 3, shape);
    c.aux[0] = c.out ? mt__tensor_new(g, NULL, MT_F32, MT_AUX, 3, lse_shape) : NULL;
    if (!c.aux[0]) return NULL;
    mt_node n = {.call = c, .phase = MT_PHASE_F};
    if (!mt__vma_operands(g, &n.call, "ring_attention", axes)) return NULL;
    return mt__node_add(g, &n) < 0 ? NULL : c.out;
}

static void grad_ring_attention(mt_graph *g, const mt_op_call *f) {
    mt_op_call d = {.op = MT_OP_RING_ATTENTION_BWD, .p = f->p};
    /* k, v (and their ids) and dK, dV on the wire */
    const int64_t kv = 2 * f->p.ring.KV * f->p.ring.HS, doc = f->p.ring.doc;
    d.p.ring.cm.K = d.p.ring.cm.N = 2 * kv + (doc ? 1 : 0);
    if (f->p.ring.packed) {
        d.n_in = 4;
        d.in[0] = f->out->grad; d.in[1] = f->in[0]; d.in[2] = f->out; d.in[3] = f->aux[0];
        if (doc) d.in[d.n_in++] = f->in[doc];
        d.p.ring.doc = doc ? 4 : 0;
        mt__emit_grad(g, f->in[0], &d);
        return;
    }
    mt_tensor *v = f->in[2];
    if (!v->needs_grad) return;
    d.n_in = 6;
    d.in[0] = f->out->grad; d.in[1] = f->in[0]; d.in[2] = f->in[1]; d.in[3] = v;
    d.in[4] = f->out; d.in[5] = f->aux[0];
    if (doc) d.in[d.n_in++] = f->in[doc];
    d.p.ring.doc = doc ? 6 : 0;
    /* dv, written by the backward, added into v's gradient by a copy */
    if (!(d.aux[0] = mt__tensor_new(g, NULL, MT_F32, MT_AUX, v->ndim, v->shape))) return;
    mt__emit_grad2(g, f->in[0], f->in[1], &d);
    mt_op_call copy = {.op = MT_OP_SCALE_BWD, .n_in = 1, .in = {d.aux[0]}, .p.scale.s = 1.0f};
    mt__emit_grad(g, v, &copy);
}

/* ring_attention: a device-local forward op (the context lowering's), its
 * ring's sends counted as the collective matmuls' (listing.c, p.cm). */
const mt_op_gdesc mt__gop_ring_attention = {
    .role = MT_ROLE_LOCAL, .grad = grad_ring_attention, .recomp = MT_RECOMP_NEVER,
    .comm = MT_COMM_RING_GATHER,
};

/* ring_attention_bwd: made by grad_ring_attention only; it sends too. */
const mt_op_gdesc mt__gop_ring_attention_bwd = {
    .role = MT_ROLE_BACKWARD, .recomp = MT_RECOMP_NEVER, .comm = MT_COMM_RING_GATHER,
};
