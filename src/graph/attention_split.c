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
 *
 * Packed documents (--doc-mask on): the document ids (B,T) come split as
 * the queries' rows, and the keys' ids travel with the keys: all-gathered
 * with k and v here (int32, in device order as the gathered keys, so the
 * kernel's kpos and key ids agree), rotated with the k, v block in the
 * ring (ops/attention_ring.c), gathered for Ulysses (the ids are the same
 * for every head; the all-to-all's rows come in device order too). The
 * queries' ids are this device's rows of the gathered ones (ops/op_table.c).
 *
 * The other two lowerings (variants by name, op_desc.c: ring_attention, ulysses_attention):
 *  - ring (§4): the ring_attention node (attention_ring.c), k and v sent
 *    around the devices of the split, the dK, dV accumulator travelling home;
 *  - Ulysses (§6): all-to-alls [T, H, d] -> [parts·T, H/parts, d] of q, k
 *    and v (each device then holds every row of its share of the heads, the
 *    rows in device order, each device's head-tail share), attention over
 *    them by position (the "whole" split form: the queries are the keys,
 *    Tk = T), and the inverse all-to-all of the output. Needs the heads and
 *    the kv heads (after tensor parallelism's share) to divide over the
 *    devices of the split.
 */
#include "graph/builders_impl.h"
#include "graph/op_desc.h"
#include "mesh/mesh_impl.h"

#include <stdio.h>

#define SHAPE(t, buf) mt__shape_str((t), (buf), sizeof (buf))

/* parts > 1 devices of the split; local rows T even (two chunks). */
/* Or the whole form (Ulysses'): the queries are every device's rows, Tk = T,
 * T a multiple of 2·parts. */
static bool check_split(mt_graph *g, const char *op, const mt_tensor *q, int64_t Tk, int parts,
                        int part) {
    const int64_t T = q->shape[1];
    const bool share = Tk == parts * T && T % 2 == 0, whole = Tk == T && T % (2 * parts) == 0;
    if (parts < 2 || part < 0 || part >= parts || !(share || whole)) {
        mt__graph_error(g, MT_EINVAL, "%s split over %d devices (this one %d): q '%s' holds "
                        "T=%lld rows of a sequence of %lld; the head-tail split needs the "
                        "sequence to divide into 2·%d chunks, T even and keys of parts·T rows "
                        "(make the sequence length a multiple of %d)", op, parts, part, q->name,
                        (long long)T, (long long)Tk, parts, 2 * parts);
        return false;
    }
    return true;
}

/* The gathered document ids (B,Tk) int32 of a split call with keys k
 * (B,Tk,...), or NULL (none). */
static bool check_docs(mt_graph *g, const char *op, const mt_tensor *k, mt_tensor *docs) {
    if (!docs) return true;
    if (!mt__build_ready(g, 1, &docs)) return false;
    if (docs->dtype != MT_I32 || docs->ndim != 2 || docs->shape[0] != k->shape[0] ||
        docs->shape[1] != k->shape[1]) {
        char s1[64], s2[64];
        mt__graph_error(g, MT_ESHAPE, "%s (split): document ids '%s' %s must be int32 (B,Tk) "
                        "of the gathered keys '%s' %s", op, docs->name, SHAPE(docs, s1),
                        k->name, SHAPE(k, s2));
        return false;
    }
    return true;
}

mt_tensor *mt__attention_split(mt_graph *g, mt_tensor *qkv, mt_tensor *kv, int NH, int parts,
                               int part, mt_tensor *docs) {
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
    if (!check_split(g, "attention", qkv, kv->shape[1], parts, part) ||
        !check_docs(g, "attention", kv, docs))
        return NULL;
    int64_t C = packed ? qkv->shape[2] / 3 : qkv->shape[3];
    if (NH <= 0 || C % NH != 0)
        return mt__graph_error(g, MT_EINVAL, "attention: C=%lld channels do not split into "
                               "NH=%d heads; pick NH dividing C", (long long)C, NH);
    int64_t B = qkv->shape[0], T = qkv->shape[1];
    int64_t shape[3] = {B, T, C}, lse_shape[3] = {B, NH, T};
    /* the whole form (kv the queries' own tensor) reads one operand; the
     * ids after the operands */
    mt_op_call c = {.op = MT_OP_ATTENTION, .n_in = kv == qkv ? 1 : 2, .in = {qkv, kv},
                    .p.attention = {.B = B, .T = T, .C = C, .NH = NH, .Tk = kv->shape[1],
                                    .parts = parts, .part = part}};
    if (docs) {
        c.p.attention.doc = c.n_in;
        c.in[c.n_in++] = docs;
    }
    c.out = mt__build_act(g, 3, shape);
    c.aux[0] = mt__build_aux(g, 3, lse_shape);   /* lse (B,NH,T) */
    return mt__build_emit(g, &c);
}

mt_tensor *mt__attention_gqa_split(mt_graph *g, mt_tensor *q, mt_tensor *k, mt_tensor *v,
                                   int NH, int KV, int G, int hoff, int parts, int part,
                                   mt_tensor *docs) {
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
    if (!check_split(g, "attention_gqa", q, k->shape[1], parts, part) ||
        !check_docs(g, "attention_gqa", k, docs))
        return NULL;
    if (G <= 0 || hoff < 0 || (hoff + NH - 1) / G >= KV)
        return mt__graph_error(g, MT_EINVAL, "attention_gqa (split): query heads %d..%d in "
                               "groups of G=%d read kv heads past the KV=%d that k '%s' holds",
                               hoff, hoff + NH - 1, G, KV, k->name);
    if (q->needs_grad != k->needs_grad)
        return mt__graph_error(g, MT_EUNSUPPORTED, "attention_gqa: q '%s' and k '%s' must both "
                               "take gradients or neither", q->name, k->name);
    int64_t B = q->shape[0], T = q->shape[1];
    int64_t lse_shape[3] = {B, NH, T};
    mt_op_call c = {.op = MT_OP_ATTENTION_GQA, .n_in = docs ? 4 : 3, .in = {q, k, v, docs},
                    .p.gqa = {.B = B, .T = T, .NH = NH, .KV = KV, .HS = C / NH, .G = G,
                              .hoff = hoff, .Tk = k->shape[1], .parts = parts, .part = part,
                              .doc = docs ? 3 : 0}};
    c.out = mt__build_act(g, 3, q->shape);
    c.aux[0] = mt__build_aux(g, 3, lse_shape);   /* lse (B,NH,T) */
    return mt__build_emit(g, &c);
}

void mt__grad_attention_split(mt_graph *g, const mt_op_call *f) {
    /* dq into qkv's gradient, dk and dv into the gathered kv's (whose
     * gradient the gather's rule reduce-scatters to their owners); the
     * gathered ids last */
    const int64_t doc = f->p.attention.doc;
    /* the whole form's keys are its queries' tensor (in[1] may be the ids) */
    mt_tensor *kv = f->p.attention.Tk == f->p.attention.T ? f->in[0] : f->in[1];
    mt_op_call d = {.op = MT_OP_ATTENTION_BWD, .n_in = doc ? 6 : 5,
                    .in = {f->out->grad, f->in[0], f->out, f->aux[0], kv,
                           doc ? f->in[doc] : NULL}};
    d.p.attention = f->p.attention;
    d.p.attention.doc = doc ? 5 : 0;
    mt__emit_grad2(g, f->in[0], kv, &d);
}

/* ---- the lowering: T split over the axes `rows` ---------------------------- */

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
    return mt_graph_all_gather_invariant(g, x, mt__mesh_axes_of(rows), 1);
}
static mt_tensor *own_block(mt_graph *g, mt_tensor *x, uint32_t rows) {
    return mt_graph_slice(g, x, mt__mesh_axes_of(rows), 1);
}

/* ---- Ulysses (§6) ---------------------------------------------------------- */

/* n heads (of `what`) must divide over the parts devices of the split. */
static bool heads_divide(mt_graph *g, const char *what, int n, int parts) {
    if (n % parts == 0) return true;
    mt__graph_error(g, MT_EINVAL, "--cp-attention ulysses splits the %s over context=%d, and "
                    "this device holds %d of them (after tensor parallelism's share), which do "
                    "not divide by %d; pick head counts divisible by %d on every device, or use "
                    "--cp-attention allgather or ring", what, parts, n, parts, parts);
    return false;
}

/* x (B,T,..,X) with its last dim cut into parts blocks of heads: block j to
 * device j, the rows received stacked in device order -> (B,parts·T,..,X/parts) */
static mt_tensor *to_heads(mt_graph *g, mt_tensor *x, uint32_t rows) {
    return mt_graph_all_to_all(g, x, mt__mesh_axes_of(rows), x->ndim - 1, 1);
}
/* the inverse: o (B,parts·T,Y) -> (B,T,parts·Y), the heads in device order */
static mt_tensor *to_rows(mt_graph *g, mt_tensor *o, uint32_t rows) {
    return mt_graph_all_to_all(g, o, mt__mesh_axes_of(rows), 1, 2);
}

/* The ids of every device's rows (B,parts·T), in device order: the gathered
 * keys' (all-gather) and the all-to-all's rows (Ulysses); NULL for none. */
static mt_tensor *gather_docs(mt_graph *g, mt_tensor *docs, uint32_t rows) {
    return docs ? mt_graph_all_gather(g, docs, mt__mesh_axes_of(rows), 1) : NULL;
}

static mt_tensor *ulysses_packed(mt_graph *g, mt_tensor *qkv, mt_tensor *docs, int NH,
                                 uint32_t rows, int parts, int part) {
    if (!heads_divide(g, "heads", NH, parts)) return NULL;
    mt_tensor *x = qkv;
    if (x->ndim == 3) {   /* (B,T,3C) -> (B,T,3,C): one storage, q, k, v cut apart */
        const int64_t shape[4] = {x->shape[0], x->shape[1], 3, x->shape[2] / 3};
        x = mt_reshape(g, x, 4, shape);
    }
    x = to_heads(g, x, rows);   /* (B,parts·T,3,C/parts) */
    return to_rows(g, mt__attention_split(g, x, x, NH / parts, parts, part,
                                          gather_docs(g, docs, rows)), rows);
}

static mt_tensor *ulysses_gqa(mt_graph *g, mt_tensor **in, mt_tensor *docs, int NH, int KV,
                              int G, int hoff, uint32_t rows, int parts, int part) {
    if (!heads_divide(g, "heads", NH, parts) || !heads_divide(g, "kv heads", KV, parts))
        return NULL;
    /* device `part` keeps query heads [part·NH/parts, ..) and kv heads
     * [part·KV/parts, ..): the offset of its first query head in its kv
     * heads' groups */
    const int h = hoff + part * (NH / parts) - part * (KV / parts) * G;
    mt_tensor *o = mt__attention_gqa_split(g, to_heads(g, in[0], rows), to_heads(g, in[1], rows),
                                           to_heads(g, in[2], rows), NH / parts, KV / parts, G,
                                           h, parts, part, gather_docs(g, docs, rows));
    return to_rows(g, o, rows);
}

mt_tensor *mt__lower_attention_split(mt_graph *g, mt_tensor *qkv, mt_tensor *docs, int NH,
                                     const mt_lower_env *e) {
    uint32_t rows = e->types[0].sharding.dim_axes[1];
    if (rows & ~e->headtail)
        return own_block(g, mt_attention_docs(g, whole(g, qkv, rows), NH,
                                              docs ? whole(g, docs, rows) : NULL), rows);
    int parts, part;
    split_place(e, rows, e->types[0].shape[1], qkv->shape[1], &parts, &part);
    if (e->cp_attention == MT_CP_RING)
        return mt__attention_ring_docs(g, qkv, NULL, NULL, docs, NH, NH, 1, 0,
                                       mt__mesh_axes_of(rows));
    if (e->cp_attention == MT_CP_ULYSSES)
        return ulysses_packed(g, qkv, docs, NH, rows, parts, part);
    mt_tensor *kv = mt_graph_all_gather(g, qkv, mt__mesh_axes_of(rows), 1);   /* (B,Tk,3,C) */
    return mt__attention_split(g, qkv, kv, NH, parts, part, gather_docs(g, docs, rows));
}

mt_tensor *mt__lower_attention_gqa_split(mt_graph *g, mt_tensor **in, mt_tensor *docs, int NH,
                                         int KV, int G, int hoff, const mt_lower_env *e) {
    uint32_t rows = e->types[0].sharding.dim_axes[1];
    if (rows & ~e->headtail)
        return own_block(g, mt__attention_gqa_at(g, whole(g, in[0], rows), whole(g, in[1], rows),
                                                 whole(g, in[2], rows), NH, KV, G, hoff,
                                                 docs ? whole(g, docs, rows) : NULL),
                         rows);
    int parts, part;
    split_place(e, rows, e->types[0].shape[1], in[0]->shape[1], &parts, &part);
    mt_axes ax = mt__mesh_axes_of(rows);
    if (e->cp_attention == MT_CP_RING)
        return mt__attention_ring_docs(g, in[0], in[1], in[2], docs, NH, KV, G, hoff, ax);
    if (e->cp_attention == MT_CP_ULYSSES)
        return ulysses_gqa(g, in, docs, NH, KV, G, hoff, rows, parts, part);
    mt_tensor *k = mt_graph_all_gather(g, in[1], ax, 1);   /* (B,Tk,KV·HS) */
    mt_tensor *v = mt_graph_all_gather(g, in[2], ax, 1);
    return mt__attention_gqa_split(g, in[0], k, v, NH, KV, G, hoff, parts, part,
                                   gather_docs(g, docs, rows));
}
