/*
 * lower.c — the lowering of every forward op of a global program: the op of
 * a global call rebuilt in a device's program on its local inputs, after the
 * sharding rule's operand moves (the partitioner calls them through the op
 * descriptors, op_desc.c). Most ops are their builder again; the rest read
 * the global call's parameters that a local shape does not give, or the
 * device's place in the mesh (mt_lower_env). What happens to the moves
 * around an op is its hook's (lower_moves.c, lower_linear.c).
 */
#include "graph/op_desc.h"

mt_tensor *mt__lower_matmul(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                            const mt_lower_env *e) {
    (void)e;
    return mt_matmul(g, in[0], in[1], c->p.gemm.ta, c->p.gemm.tb);
}

mt_tensor *mt__lower_linear(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                            const mt_lower_env *e) {
    (void)e;
    return mt_linear(g, in[0], in[1], c->n_in > 2 ? in[2] : NULL);
}

mt_tensor *mt__lower_add(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e) {
    (void)c, (void)e;
    return mt_add(g, in[0], in[1]);
}

mt_tensor *mt__lower_sub(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e) {
    (void)c, (void)e;
    return mt_sub(g, in[0], in[1]);
}

mt_tensor *mt__lower_mul(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e) {
    (void)c, (void)e;
    return mt_mul(g, in[0], in[1]);
}

mt_tensor *mt__lower_scale(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                           const mt_lower_env *e) {
    (void)e;
    return mt_scale(g, in[0], c->p.scale.s);
}

mt_tensor *mt__lower_gelu(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e) {
    (void)c, (void)e;
    return mt_gelu(g, in[0]);
}

mt_tensor *mt__lower_layernorm(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                               const mt_lower_env *e) {
    (void)c, (void)e;
    return mt_layernorm(g, in[0], in[1], in[2]);
}

/* C split by heads (qkv (B,T,3,C)): this device runs its share of them;
 * T split: its head-tail rows against the gathered keys (attention_split.c). */
mt_tensor *mt__lower_attention(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                               const mt_lower_env *e) {
    int64_t local_C = in[0]->ndim == 4 ? in[0]->shape[3] : in[0]->shape[2] / 3;
    int NH = (int)(c->p.attention.NH * local_C / c->p.attention.C);
    mt_tensor *docs = c->p.attention.doc ? in[c->p.attention.doc] : NULL;
    if (e->types[0].sharding.dim_axes[1]) return mt__lower_attention_split(g, in[0], docs, NH, e);
    return mt_attention_docs(g, in[0], NH, docs);
}

/* The attention ops' own lowerings with the lowering over a head-tail T set:
 * the variants ring_attention and ulysses_attention (op_desc.c). */
static mt_tensor *lower_attention_as(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                                     const mt_lower_env *e, int cp) {
    mt_lower_env v = *e;
    v.cp_attention = cp;
    return c->op == MT_OP_ATTENTION ? mt__lower_attention(g, c, in, &v)
                                    : mt__lower_attention_gqa(g, c, in, &v);
}

mt_tensor *mt__lower_attention_ring(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                                    const mt_lower_env *e) {
    return lower_attention_as(g, c, in, e, MT_CP_RING);
}

mt_tensor *mt__lower_attention_ulysses(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                                       const mt_lower_env *e) {
    return lower_attention_as(g, c, in, e, MT_CP_ULYSSES);
}

mt_tensor *mt__lower_rmsnorm(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                             const mt_lower_env *e) {
    (void)e;
    return mt_rmsnorm(g, in[0], in[1], c->p.rmsnorm.eps);
}

mt_tensor *mt__lower_swiglu(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                            const mt_lower_env *e) {
    (void)c, (void)e;
    return mt_swiglu(g, in[0], in[1]);
}

/* Heads split: this device runs its query heads, which read the kv heads
 * they read globally: the head offset is its first query head less the
 * query heads of the kv heads before its first (k, v split with q), or its
 * first query head (k, v whole). */
mt_tensor *mt__lower_attention_gqa(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                                   const mt_lower_env *e) {
    const mt_gqa_params *p = &c->p.gqa;
    const int64_t HS = p->HS;
    uint32_t qh = e->types[0].sharding.dim_axes[2], kh = e->types[1].sharding.dim_axes[2];
    int64_t h0 = qh ? e->start(e->ctx, qh, in[0]->shape[2]) / HS : 0;
    int64_t k0 = kh ? e->start(e->ctx, kh, in[1]->shape[2]) / HS : 0;
    if (e->types[0].sharding.dim_axes[1])
        return mt__lower_attention_gqa_split(g, in, p->doc ? in[p->doc] : NULL,
                                             (int)(in[0]->shape[2] / HS),
                                             (int)(in[1]->shape[2] / HS), (int)p->G,
                                             (int)(p->hoff + h0 - k0 * p->G), e);
    return mt__attention_gqa_at(g, in[0], in[1], in[2], (int)(in[0]->shape[2] / HS),
                                (int)(in[1]->shape[2] / HS), (int)p->G,
                                (int)(p->hoff + h0 - k0 * p->G), p->doc ? in[p->doc] : NULL);
}

/* A table split over the vocabulary: each device looks up its rows (a
 * partial sum over those axes, Megatron's masked lookup). */
mt_tensor *mt__lower_embedding(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                               const mt_lower_env *e) {
    (void)c;
    uint32_t vocab = e->types[0].sharding.dim_axes[0];
    if (vocab) return mt__embedding_masked(g, in[0], in[1], e->start(e->ctx, vocab, in[0]->shape[0]));
    return mt_embedding(g, in[0], in[1]);
}

/* Logits split over the vocabulary: Megatron's loss, its statistics
 * all-reduced inside the op. */
mt_tensor *mt__lower_cross_entropy(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                                   const mt_lower_env *e) {
    if (e->inside)
        return mt__cross_entropy_vp(g, in[0], in[1], (int)c->p.ce.V, c->p.ce.scale, e->inside_axes,
                                    e->start(e->ctx, e->inside, in[0]->shape[in[0]->ndim - 1]));
    return mt_cross_entropy(g, in[0], in[1], (int)c->p.ce.V, c->p.ce.scale);
}

mt_tensor *mt__lower_mse(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e) {
    (void)e;
    return mt_mse(g, in[0], in[1], c->p.mse.scale);
}

/* The factor is the global one (a mean's 1/n counts every device's elements). */
mt_tensor *mt__lower_sum(mt_graph *g, const mt_op_call *c, mt_tensor **in, const mt_lower_env *e) {
    (void)e;
    mt_tensor *s = mt_sum(g, in[0]);
    return c->p.scale.s == 1.0f ? s : mt_scale(g, s, c->p.scale.s);
}

mt_tensor *mt__lower_transpose(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                               const mt_lower_env *e) {
    (void)c, (void)e;
    return mt_transpose(g, in[0]);
}

/* The moves were the whole op. */
mt_tensor *mt__lower_reshard(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                             const mt_lower_env *e) {
    (void)g, (void)c, (void)e;
    return in[0];
}

/* An op that all-reduces inside gives the same result over those axes. */
uint32_t mt__lower_vary(const mt_lower_step *st) {
    uint32_t all = 0, own = st->type.sharding.partial_axes;
    for (int k = 0; k < st->n_in; k++) all |= st->vary[k];
    for (int d = 0; d < st->type.ndim; d++) own |= st->type.sharding.dim_axes[d];
    return (all & ~st->inside) | own;
}
