/*
 * attention_split.c — causal attention over a sequence split over devices
 * (context parallelism, ../shared/CONTEXT_PARALLEL.md §5, Llama 3's
 * all-gather variant): each device holds its head-tail share of every
 * sequence (mt_headtail_pos), all-gathers the keys and values over the
 * devices of the split, and attends its queries to them by position
 * (causal on the diagonal: the kernel's qpos/kpos, ops/kernels.h). The
 * gather is the varying kind, so its gradient is the reduce-scatter that
 * brings each device the sum of every device's dK, dV of its own rows.
 * Here: the builders of the split forms of attention and attention_gqa (the
 * partitioner's lowering builds them), the lowering of both when their T
 * dim comes split, and the split packed form's gradient.
 * Only attention talks: everything else runs on the device's rows as it is.
 */
#include "graph/builders_impl.h"
#include "graph/op_desc.h"

#include <stdio.h>

#define SHAPE(t, buf) mt__shape_str((t), (buf), sizeof (buf))

/* parts > 1 devices of the split; local rows T even (two chunks). */
static bool check_split(mt_graph *g, const char *op, const mt_tensor *q, int64_t Tk, int parts,
                        int part) {
    const int64_t T = q->shape[1];
    if (parts < 2 || part < 0 || part >= parts || Tk != parts * T || T % 2 != 0) {
        mt__graph_error(g, MT_EINVAL, "%s split over %d devices (this one %d): q '%s' holds "
                        "T=%lld rows of a sequence of %lld; the head-tail split needs the "
                        "sequence to divide into 2·%d chunks, T even and keys of parts·T rows "
                        "(make the sequence length a multiple of %d)", op, parts, part, q->name,
                        (long long)T, (long long)Tk, parts, 2 * parts);
        return false;
    }
    return true;
}

mt_tensor *mt__attention_split(mt_graph *g, mt_tensor *qkv, mt_tensor *kv, int NH, int parts,
                               int part) {
    mt_tensor *ops[2] = {qkv, kv};
    if (!mt__build_ready(g, 2, ops)) return NULL;
    char s1[64], s2[64];
    bool packed = qkv->ndim == 3 && qkv->shape[2] % 3 == 0;
    bool same = kv->ndim == qkv->ndim && kv->shape[0] == qkv->shape[0];
    for (int d = 2; same && d < qkv->ndim; d++) same = kv->shape[d] == qkv->shape[d];
    if (!(packed || (qkv->ndim == 4 && qkv->shape[2] == 3)) || !same)
        return mt__graph_error(g, MT_ESHAPE, "attention (split): qkv '%s' %s and the gathered "
                               "'%s' %s must be (B,T,3C) or (B,T,3,C) and (B,Tk,...) alike",
                               qkv->name, SHAPE(qkv, s1), kv->name, SHAPE(kv, s2));
    if (!check_split(g, "attention", qkv, kv->shape[1], parts, part)) return NULL;
    int64_t C = packed ? qkv->shape[2] / 3 : qkv->shape[3];
    if (NH <= 0 || C % NH != 0)
        return mt__graph_error(g, MT_EINVAL, "attention: C=%lld channels do not split into "
                               "NH=%d heads; pick NH dividing C", (long long)C, NH);
    int64_t B = qkv->shape[0], T = qkv->shape[1];
    int64_t shape[3] = {B, T, C}, lse_shape[3] = {B, NH, T};
    mt_op_call c = {.op = MT_OP_ATTENTION, .n_in = 2, .in = {qkv, kv},
                    .p.attention = {.B = B, .T = T, .C = C, .NH = NH, .Tk = kv->shape[1],
                                    .parts = parts, .part = part}};
    c.out = mt__build_act(g, 3, shape);
    c.aux[0] = mt__build_aux(g, 3, lse_shape);   /* lse (B,NH,T) */
    return mt__build_emit(g, &c);
}

mt_tensor *mt__attention_gqa_split(mt_graph *g, mt_tensor *q, mt_tensor *k, mt_tensor *v,
                                   int NH, int KV, int G, int hoff, int parts, int part) {
    mt_tensor *ops[3] = {q, k, v};
    if (!mt__build_ready(g, 3, ops)) return NULL;
    char sq[64], sk[64];
    bool dims = q->ndim == 3 && k->ndim == 3 && v->ndim == 3 && k->shape[0] == q->shape[0] &&
                v->shape[0] == q->shape[0] && v->shape[1] == k->shape[1] &&
                v->shape[2] == k->shape[2];
    int64_t C = dims ? q->shape[2] : 0;
    if (!dims || NH <= 0 || KV <= 0 || C % NH != 0 || k->shape[2] != KV * (C / NH))
        return mt__graph_error(g, MT_ESHAPE, "attention_gqa (split): q '%s' %s and k '%s' %s "
                               "must be (B,T,NH·HS) and (B,Tk,KV·HS), NH=%d KV=%d", q->name,
                               SHAPE(q, sq), k->name, SHAPE(k, sk), NH, KV);
    if (!check_split(g, "attention_gqa", q, k->shape[1], parts, part)) return NULL;
    if (q->needs_grad != k->needs_grad)
        return mt__graph_error(g, MT_EUNSUPPORTED, "attention_gqa: q '%s' and k '%s' must both "
                               "take gradients or neither", q->name, k->name);
    int64_t B = q->shape[0], T = q->shape[1];
    int64_t lse_shape[3] = {B, NH, T};
    mt_op_call c = {.op = MT_OP_ATTENTION_GQA, .n_in = 3, .in = {q, k, v},
                    .p.gqa = {.B = B, .T = T, .NH = NH, .KV = KV, .HS = C / NH, .G = G,
                              .hoff = hoff, .Tk = k->shape[1], .parts = parts, .part = part}};
    c.out = mt__build_act(g, 3, q->shape);
    c.aux[0] = mt__build_aux(g, 3, lse_shape);   /* lse (B,NH,T) */
    return mt__build_emit(g, &c);
}

void mt__grad_attention_split(mt_graph *g, const mt_op_call *f) {
    /* dq into qkv's gradient, dk and dv into the gathered kv's (whose
     * gradient the gather's rule reduce-scatters to their owners) */
    mt_op_call d = {.op = MT_OP_ATTENTION_BWD, .n_in = 5,
                    .in = {f->out->grad, f->in[0], f->out, f->aux[0], f->in[1]}};
    d.p.attention = f->p.attention;
    mt__emit_grad2(g, f->in[0], f->in[1], &d);
}

/* ---- the lowering: T split over the axes `rows` ---------------------------- */

/* The mesh axes of a bit set, in mesh order (a sharding's order). */
static mt_axes axes_of(uint32_t bits) {
    mt_axes ax = {0};
    for (int a = 0; a < 32 && ax.n < MT_MESH_MAX_AXES; a++)
        if (bits & (1u << a)) ax.axis[ax.n++] = (uint8_t)a;
    return ax;
}

/* This device's place in the split of T (global Tg, local in q). */
static void split_place(const mt_lower_env *e, uint32_t rows, int64_t Tg, int64_t T, int *parts,
                        int *part) {
    *parts = (int)(Tg / T);
    *part = (int)(e->start(e->ctx, rows, T) / T);
}

/* T split in contiguous blocks (axes that are not head-tail): x gathered
 * whole over them for the op, whose result's block this device keeps. */
static mt_tensor *whole(mt_graph *g, mt_tensor *x, uint32_t rows) {
    /* the invariant gather: every device then runs the whole op (as the
     * gather the rule used to make did), its gradient each device's block */
    return mt_graph_all_gather_invariant(g, x, axes_of(rows), 1);
}
static mt_tensor *own_block(mt_graph *g, mt_tensor *x, uint32_t rows) {
    return mt_graph_slice(g, x, axes_of(rows), 1);
}

mt_tensor *mt__lower_attention_split(mt_graph *g, mt_tensor *qkv, int NH, const mt_lower_env *e) {
    uint32_t rows = e->types[0].sharding.dim_axes[1];
    if (rows & ~e->headtail) return own_block(g, mt_attention(g, whole(g, qkv, rows), NH), rows);
    int parts, part;
    split_place(e, rows, e->types[0].shape[1], qkv->shape[1], &parts, &part);
    mt_tensor *kv = mt_graph_all_gather(g, qkv, axes_of(rows), 1);   /* (B,Tk,3,C) */
    return mt__attention_split(g, qkv, kv, NH, parts, part);
}

mt_tensor *mt__lower_attention_gqa_split(mt_graph *g, mt_tensor **in, int NH, int KV, int G,
                                         int hoff, const mt_lower_env *e) {
    uint32_t rows = e->types[0].sharding.dim_axes[1];
    if (rows & ~e->headtail)
        return own_block(g, mt__attention_gqa_at(g, whole(g, in[0], rows), whole(g, in[1], rows),
                                                 whole(g, in[2], rows), NH, KV, G, hoff),
                         rows);
    int parts, part;
    split_place(e, rows, e->types[0].shape[1], in[0]->shape[1], &parts, &part);
    mt_axes ax = axes_of(rows);
    mt_tensor *k = mt_graph_all_gather(g, in[1], ax, 1);   /* (B,Tk,KV·HS) */
    mt_tensor *v = mt_graph_all_gather(g, in[2], ax, 1);
    return mt__attention_gqa_split(g, in[0], k, v, NH, KV, G, hoff, parts, part);
}
