/*
 * shard_rules_nn.c — the sharding rules of the network ops (scale, gelu,
 * layernorm, attention, embedding, cross-entropy, mse, sum, transpose; the
 * LLaMA family's rmsnorm, swiglu and grouped-query attention; rope's is
 * graph/op_rope.c's) and of reshape views.
 *
 * Rows pass: a dim an op treats row by row keeps its axes. A dim an op
 * reduces or mixes must be whole (auto gathers it, explicit refuses) unless a
 * Megatron recipe applies: a table split over the vocabulary gives a partial
 * sum (the masked lookup), logits split over the vocabulary all-reduce their
 * row statistics inside the op. A loss is a scalar partial-summed over every
 * axis that splits its rows.
 */
#include "graph/shard_rules_impl.h"

#include <stdio.h>

#define TRY(call) do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

static mt_status bad_shape(mt_srule *r, const mt_type *in, int n_in, const char *want) {
    char list[512];
    size_t off = 0;
    list[0] = '\0';
    for (int k = 0; k < n_in && off < sizeof list; k++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%s", k ? ", " : "",
                                mt__stype(r->mesh, &in[k]).s);
    return mt_fail(MT_ESHAPE, "%s: operands %s: %s", r->op, list, want);
}

/* The axes of every dim of t. */
static uint32_t dims_axes(const mt_type *t) {
    uint32_t u = 0;
    for (int d = 0; d < t->ndim; d++) u |= t->sharding.dim_axes[d];
    return u;
}

/* A scalar loss or sum of dtype f32, partial over `axes`. */
static mt_type scalar(uint32_t axes) {
    return (mt_type){.dtype = MT_F32, .ndim = 0, .sharding = {.partial_axes = axes}};
}

/* Operand `k` (named `name`) moved to `target`'s layout: in auto mode; in
 * explicit mode only when the layouts agree already. */
static mt_status match(mt_srule *r, int k, const char *name, mt_type *t, const mt_type *target,
                       const char *what) {
    bool same = t->sharding.partial_axes == target->sharding.partial_axes;
    for (int d = 0; same && d < t->ndim; d++)
        same = t->sharding.dim_axes[d] == target->sharding.dim_axes[d];
    if (same) return MT_OK;
    if (r->mode == MT_SHARD_EXPLICIT)
        return mt_fail(MT_ESHARDING, "%s: %s %s must be laid out as %s; a reshard (sharding "
                       "constraint) of %s to %s resolves it", r->op, name,
                       mt__stype(r->mesh, t).s, what, name, mt__stype(r->mesh, target).s);
    return mt__smove_to(r, k, t, target);
}

/* ======================================================================== */
/* Normalisation, attention, embedding                                       */
/* ======================================================================== */

/* out (...,C) = layernorm(x (...,C)) · w (C) + b (C) */
mt_status mt__shard_layernorm(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    mt_type *x = &in[0];
    int c = x->ndim - 1;
    if (x->ndim < 1 || in[1].ndim != 1 || in[2].ndim != 1 || in[1].shape[0] != x->shape[c] ||
        in[2].shape[0] != x->shape[c])
        return bad_shape(r, in, 3, "want x (...,C), w (C), b (C)");
    TRY(mt__sneed_summed(r, 0, "x", x));
    TRY(mt__sneed_whole(r, 0, "x", x, c, "layernorm reduces over its channels (C), which "
                        "must be whole (or the Megatron statistics all-reduce, issue 9, "
                        "must be used)"));
    static const char *const WB[3] = {"x", "w", "b"};
    for (int k = 1; k < 3; k++) {
        TRY(mt__sneed_summed(r, k, WB[k], &in[k]));
        TRY(mt__sneed_whole(r, k, WB[k], &in[k], 0, "the channels (C) of layernorm must be "
                            "whole"));
    }
    r->out->result = *x;
    return MT_OK;
}

/* The document ids (B,T) of an attention call (in[k], k = its p.doc, 0:
 * none) on q: laid out as q's rows, B and T split as q's (a context axis
 * splits them head-tail as the queries; the lowering gathers the keys'
 * ids with the keys, attention_split.c). */
static mt_status docs_rule(mt_srule *r, int k, const mt_type *q, mt_type *in) {
    if (!k) return MT_OK;
    mt_type want = in[k];
    want.sharding.partial_axes = 0;
    want.sharding.dim_axes[0] = q->sharding.dim_axes[0];
    want.sharding.dim_axes[1] = q->sharding.dim_axes[1];
    return match(r, k, "docs", &in[k], &want, "q's rows (B and T split as q's)");
}

/* out (B,T,C) = attention(qkv (B,T,3C) or (B,T,3,C)), NH heads. T may be
 * split over axes: each device then holds its head-tail share of the
 * sequence (mt_headtail_pos) and the lowering gathers the keys and values
 * (attention_split.c); the result's T is split the same. In the
 * (B,T,3,C) form C may be split over axes A when NH divides over them: each
 * device runs its NH/|A| heads (Megatron's head split), no communication,
 * and the result's C is split the same way. */
mt_status mt__shard_attention(mt_srule *r, const mt_op_call *call, mt_type *in) {
    mt_type *q = &in[0];
    bool packed = q->ndim == 3 && q->shape[2] % 3 == 0;
    if (!packed && !(q->ndim == 4 && q->shape[2] == 3))
        return bad_shape(r, in, 1, "want qkv (B,T,3C) or (B,T,3,C)");
    TRY(mt__sneed_summed(r, 0, "qkv", q));
    TRY(mt__sneed_whole(r, 0, "qkv", q, 2, packed
                        ? "the 3C dim holds q, k and v of every head and must be whole (to "
                          "split the heads, give qkv as (B,T,3,C) and split C)"
                        : "the 3 of (B,T,3,C) separates q, k and v and must be whole"));
    mt_type res = *q;
    res.ndim = 3;
    if (packed) {
        res.shape[2] = q->shape[2] / 3;
    } else {
        const int64_t NH = call->p.attention.NH;
        const uint32_t heads = q->sharding.dim_axes[3];
        const int64_t n = mt__saxes_size(r->mesh, heads);
        if (heads && NH % n != 0)
            return mt_fail(MT_ESHARDING, "%s: qkv %s splits C over %s (%lld devices) but the "
                           "NH=%lld heads do not divide over them; use a head count divisible "
                           "by %lld, or keep C whole", r->op, mt__stype(r->mesh, q).s,
                           mt__saxes(r->mesh, heads).s, (long long)n, (long long)NH,
                           (long long)n);
        res.shape[2] = q->shape[3];
        res.sharding.dim_axes[2] = heads;
        res.sharding.dim_axes[3] = 0;
    }
    TRY(docs_rule(r, (int)call->p.attention.doc, q, in));
    r->out->result = res;
    return MT_OK;
}

/* out (...,C) = rmsnorm(x (...,C)) · w (C): as layernorm's, without a bias. */
mt_status mt__shard_rmsnorm(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    mt_type *x = &in[0], *w = &in[1];
    int c = x->ndim - 1;
    if (x->ndim < 1 || w->ndim != 1 || w->shape[0] != x->shape[c])
        return bad_shape(r, in, 2, "want x (...,C), w (C)");
    TRY(mt__sneed_summed(r, 0, "x", x));
    TRY(mt__sneed_whole(r, 0, "x", x, c, "rmsnorm reduces over its channels (C), which must be "
                        "whole"));
    TRY(mt__sneed_summed(r, 1, "w", w));
    TRY(mt__sneed_whole(r, 1, "w", w, 0, "the channels (C) of rmsnorm must be whole"));
    r->out->result = *x;
    return MT_OK;
}

/* out = silu(a) · b: elementwise and linear in neither. */
mt_status mt__shard_swiglu(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    if (in[0].ndim != in[1].ndim) return bad_shape(r, in, 2, "want a and b of one shape");
    TRY(mt__sneed_summed(r, 0, "a", &in[0]));
    TRY(mt__sneed_summed(r, 1, "b", &in[1]));
    return mt__srule_elementwise(r, in, false);
}

/* out (B,T,NH·HS) = attention_gqa(q (B,T,NH·HS), k, v (B,T,KV·HS)). B
 * passes (k and v take q's), and so does T: split over axes, each device
 * holds its head-tail share of the sequence and the lowering gathers k and v
 * (attention_split.c). q's last dim may be split over
 * axes A of n devices when n divides NH: each device runs its NH/n query
 * heads (Megatron's head split), no communication. Then k and v: split over
 * A with it when n divides KV (each device's query heads read exactly its
 * kv heads); else whole (replicated over A): each device reads the kv heads
 * its query heads read (the lowering sets the head offset), and as q varies
 * over A and k, v do not, the partitioner's pvary makes their gradients the
 * sum over the devices of A. With q's heads whole, k and v are whole too. */
mt_status mt__shard_attention_gqa(mt_srule *r, const mt_op_call *call, mt_type *in) {
    static const char *const QKV[3] = {"q", "k", "v"};
    mt_type *q = &in[0];
    bool shapes = q->ndim == 3 && in[1].ndim == 3 && in[2].ndim == 3;
    for (int k = 1; shapes && k < 3; k++)
        shapes = in[k].shape[0] == q->shape[0] && in[k].shape[1] == q->shape[1];
    if (!shapes) return bad_shape(r, in, 3, "want q (B,T,NH·HS), k and v (B,T,KV·HS)");
    const int64_t NH = call->p.gqa.NH, KV = call->p.gqa.KV;
    for (int k = 0; k < 3; k++) {
        TRY(mt__sneed_summed(r, k, QKV[k], &in[k]));
    }
    uint32_t heads = q->sharding.dim_axes[2];
    const int64_t n = mt__saxes_size(r->mesh, heads);
    if (heads && NH % n != 0) {
        char why[512];
        snprintf(why, sizeof why, "the NH=%lld query heads do not divide over %s (%lld "
                 "devices); use a head count divisible by %lld, or keep the heads whole",
                 (long long)NH, mt__saxes(r->mesh, heads).s, (long long)n, (long long)n);
        TRY(mt__sneed_whole(r, 0, "q", q, 2, why));
        heads = 0;
    }
    const uint32_t kv_heads = heads && KV % n == 0 ? heads : 0;
    for (int k = 1; k < 3; k++) {
        mt_type want = in[k];
        want.sharding.dim_axes[0] = q->sharding.dim_axes[0];
        want.sharding.dim_axes[1] = q->sharding.dim_axes[1];   /* T split as q's (gathered) */
        want.sharding.dim_axes[2] = kv_heads;
        TRY(match(r, k, QKV[k], &in[k], &want, kv_heads
                  ? "q on the batch and its heads (KV divides over q's head axes)"
                  : "q on the batch, with its heads whole (replicated: each device reads the "
                    "kv heads its query heads read)"));
    }
    TRY(docs_rule(r, (int)call->p.gqa.doc, q, in));
    mt_type res = *q;
    TRY(mt__scheck_result(r, &res, in, 3, QKV));
    r->out->result = res;
    return MT_OK;
}

/* out (...,C) = table (V,C) [ids (...)]. A table split over V on axes A
 * gives a result partial over A: each device looks up the ids in its rows
 * and writes zeros for the others (the masked lookup); the consumer reduces. */
mt_status mt__shard_embedding(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    mt_type *table = &in[0], *ids = &in[1];
    if (table->ndim != 2 || ids->ndim >= MT_MAX_DIMS)
        return bad_shape(r, in, 2, "want table (V,C) and ids of at most 3 dims");
    TRY(mt__sneed_summed(r, 0, "table", table));
    mt_type res = {.dtype = table->dtype, .ndim = ids->ndim + 1};
    for (int d = 0; d < ids->ndim; d++) {
        res.shape[d] = ids->shape[d];
        res.sharding.dim_axes[d] = ids->sharding.dim_axes[d];
    }
    res.shape[ids->ndim] = table->shape[1];
    res.sharding.dim_axes[ids->ndim] = table->sharding.dim_axes[1];
    res.sharding.partial_axes = table->sharding.dim_axes[0];
    static const char *const TI[2] = {"table", "ids"};
    TRY(mt__scheck_result(r, &res, in, 2, TI));
    r->out->result = res;
    return MT_OK;
}

/* ======================================================================== */
/* Losses and reductions                                                     */
/* ======================================================================== */

/* loss () = scale · Σ_rows ce(logits (...,Vp), targets (...)). Logits split
 * over Vp on axes A: the Megatron recipe, an all-reduce (max) and an
 * all-reduce (sum) of the row statistics over A inside the op. */
mt_status mt__shard_cross_entropy(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    mt_type *lg = &in[0], *tg = &in[1];
    int nrow = lg->ndim - 1;
    if (lg->ndim < 1) return bad_shape(r, in, 2, "want logits (...,Vp) and targets (...)");
    TRY(mt__sneed_summed(r, 0, "logits", lg));
    bool rows_shape = tg->ndim == nrow;
    for (int d = 0; rows_shape && d < nrow; d++) rows_shape = tg->shape[d] == lg->shape[d];
    mt_type stats = {.dtype = MT_F32, .ndim = nrow};   /* (rows...) */
    for (int d = 0; d < nrow; d++) {
        stats.shape[d] = lg->shape[d];
        stats.sharding.dim_axes[d] = lg->sharding.dim_axes[d];
    }
    uint32_t rows_axes = dims_axes(&stats);
    if (rows_shape) {
        mt_type want = *tg;
        for (int d = 0; d < nrow; d++) want.sharding.dim_axes[d] = lg->sharding.dim_axes[d];
        want.sharding.partial_axes = 0;
        TRY(match(r, 1, "targets", tg, &want, "the row dims of logits"));
    } else if (rows_axes || dims_axes(tg)) {
        return bad_shape(r, in, 2, "sharded targets must have the row dims of logits; "
                         "reshape them to those dims");
    }
    uint32_t vocab = lg->sharding.dim_axes[nrow];
    for (int k = 0; vocab && k < 2; k++) {   /* max, then sum of exp */
        stats.sharding.partial_axes = vocab;
        TRY(mt__smove(r, MT_MOVE_ALL_REDUCE, MT_MOVE_INSIDE, -1, -1, vocab, &stats));
    }
    r->out->result = scalar(rows_axes);
    return MT_OK;
}

/* loss () = scale · Σ (pred - target)²: target takes pred's layout. */
mt_status mt__shard_mse(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    mt_type *pred = &in[0], *tg = &in[1];
    bool same = pred->ndim == tg->ndim;
    for (int d = 0; same && d < pred->ndim; d++) same = pred->shape[d] == tg->shape[d];
    if (!same && (dims_axes(pred) || dims_axes(tg)))
        return bad_shape(r, in, 2, "sharded pred and target must have one shape");
    TRY(mt__sneed_summed(r, 0, "pred", pred));
    TRY(mt__sneed_summed(r, 1, "target", tg));
    if (same) {
        mt_type want = *tg;
        want.sharding = pred->sharding;
        TRY(match(r, 1, "target", tg, &want, "pred"));
    }
    r->out->result = scalar(dims_axes(pred));
    return MT_OK;
}

/* ======================================================================== */
/* Scale, gelu, sum, transpose                                               */
/* ======================================================================== */

/* out = s · x: linear, so partial sums pass. */
mt_status mt__shard_scale(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    r->out->result = in[0];
    return MT_OK;
}

/* out = gelu(x), elementwise: any split passes, partial sums are summed. */
mt_status mt__shard_gelu(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    TRY(mt__sneed_summed(r, 0, "x", &in[0]));
    r->out->result = in[0];
    return MT_OK;
}

/* out () = s · Σ x: partial over the axes that split x and its partial ones. */
mt_status mt__shard_sum(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    mt_type res = scalar(dims_axes(&in[0]) | in[0].sharding.partial_axes);
    res.dtype = in[0].dtype;
    r->out->result = res;
    return MT_OK;
}

/* (...,R,Cc) -> (...,Cc,R): the two dims swap their axes too. */
mt_status mt__shard_transpose(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    mt_type res = in[0];
    int n = res.ndim;
    if (n < 2) return bad_shape(r, in, 1, "want at least 2 dims");
    res.shape[n - 2] = in[0].shape[n - 1];
    res.shape[n - 1] = in[0].shape[n - 2];
    res.sharding.dim_axes[n - 2] = in[0].sharding.dim_axes[n - 1];
    res.sharding.dim_axes[n - 1] = in[0].sharding.dim_axes[n - 2];
    r->out->result = res;
    return MT_OK;
}

/* ======================================================================== */
/* Reshape                                                                   */
/* ======================================================================== */

/* Dims of the input and of the output go in groups of equal product: (B,T,C)
 * -> (B*T,C) is {B,T}->{B*T}, {C}->{C}. A group whose only split dim is its
 * major input dim keeps those axes on its major output dim when that divides
 * by them: every device holds one contiguous block of the group either way. */
mt_status mt__shard_reshape(const mt_mesh *mesh, const mt_type *in, int ndim,
                            const int64_t *shape, mt_shard_mode mode, mt_shard_result *out) {
    memset(out, 0, sizeof *out);
    mt_srule r = {.mesh = mesh, .mode = mode, .op = "reshape", .out = out};
    mt_type t = *in, res = {.dtype = in->dtype, .ndim = ndim};
    int64_t n_in = 1, n_out = 1;
    for (int d = 0; d < in->ndim; d++) n_in *= in->shape[d];
    for (int d = 0; d < ndim; d++) n_out *= (res.shape[d] = shape[d]);
    if (ndim < 0 || ndim > MT_MAX_DIMS || n_in != n_out || n_in <= 0)
        return mt_fail(MT_ESHAPE, "reshape: %s has %lld elements, the new shape of %d dims has "
                       "%lld", mt__stype(mesh, in).s, (long long)n_in, ndim, (long long)n_out);
    res.sharding.partial_axes = in->sharding.partial_axes;
    int i = 0, j = 0;
    while (i < in->ndim || j < ndim) {
        int i0 = i, j0 = j;
        int64_t pi = i < in->ndim ? in->shape[i++] : 1, pj = j < ndim ? shape[j++] : 1;
        while (pi != pj) {
            if (pi < pj && i < in->ndim) pi *= in->shape[i++];
            else if (pj < pi && j < ndim) pj *= shape[j++];
            else break;
        }
        uint32_t major = t.sharding.dim_axes[i0];
        bool keep = major && j0 < ndim && shape[j0] % mt__saxes_size(mesh, major) == 0;
        for (int d = i0; d < i; d++) {
            uint32_t ax = t.sharding.dim_axes[d];
            if (!ax || (d == i0 && keep)) continue;
            if (mode == MT_SHARD_EXPLICIT) {
                return mt_fail(MT_ESHARDING, "reshape of %s to %d dims: dim %d, split over "
                               "%s, cannot stay split (only a split major dim of a merged or "
                               "split group can, and only when the new major dim divides by "
                               "its axes); a reshard (sharding constraint) that makes dim %d "
                               "whole first resolves it", mt__stype(mesh, in).s, ndim, d,
                               mt__saxes(mesh, ax).s, d);
            }
            TRY(mt__smove(&r, MT_MOVE_ALL_GATHER, 0, d, -1, ax, &t));
        }
        if (keep) res.sharding.dim_axes[j0] = major;
    }
    out->result = res;
    return MT_OK;
}
