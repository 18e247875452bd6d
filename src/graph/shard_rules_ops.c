/*
 * shard_rules_ops.c — the sharding rules of the contractions (matmul,
 * linear) and of elementwise add, sub and mul with broadcasting.
 *
 * Contractions: batch and free dims keep their axes. One split contracting
 * dim is all-gathered (the FSDP pattern); both split over the same axes give
 * a partial sum, which auto mode keeps (the consumer reduces where it needs
 * to) and explicit mode refuses, listing the four answers; both split over
 * different axes: auto gathers both, explicit refuses. A free dim of a split
 * over an axis that also splits b's output dims (the rows of a sequence-
 * parallel activation meeting a column-parallel weight): auto gathers a's
 * dim, explicit refuses (the axis would be used twice).
 *
 * Elementwise: per aligned dim (b's dims align with a's trailing ones) equal
 * axes pass, a split dim against a whole one takes the split (the whole
 * operand is sliced, no communication), two different splits are resolved by
 * resharding b to a's layout (auto) or refused (explicit).
 *
 * Reshard: a sharding constraint, the moves from its operand's layout to the
 * one it names, in either mode.
 */
#include "graph/shard_rules_impl.h"

#include <stdio.h>

#define TRY(call) do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

static const char *const AB[2] = {"a", "b"};
static const char *const XWB[3] = {"x", "w", "bias"};

/* ======================================================================== */
/* Contractions                                                              */
/* ======================================================================== */

/* The explicit-mode refusal of a partial sum: the op, both operand types,
 * the contracting axes and the four answers on `base` (the result without
 * partial sums). */
static mt_status ambiguous(mt_srule *r, const mt_type *in, const char *const *names,
                           uint32_t ka, uint32_t kb, const mt_type *base) {
    const mt_mesh *mesh = r->mesh;
    char head[2048];
    uint32_t p = ka;   /* the partial-sum axes of the answers */
    if (ka == kb)
        snprintf(head, sizeof head, "%s: both contracting dims are split over %s (%s %s · %s "
                 "%s), so every device holds a partial sum of the result and explicit mode "
                 "does not choose what to do with it", r->op, mt__saxes(mesh, ka).s, names[0],
                 mt__stype(mesh, &in[0]).s, names[1], mt__stype(mesh, &in[1]).s);
    else
        snprintf(head, sizeof head, "%s: the contracting dims are split over different axes, "
                 "%s in %s %s and %s in %s %s, and explicit mode does not choose how to line "
                 "them up: gather both (all-gather %s over %s and %s over %s), or reshard %s's "
                 "contracting dim to %s too, which makes the result a partial sum over %s",
                 r->op, mt__saxes(mesh, ka).s, names[0], mt__stype(mesh, &in[0]).s,
                 mt__saxes(mesh, kb).s, names[1], mt__stype(mesh, &in[1]).s, names[0],
                 mt__saxes(mesh, ka).s, names[1], mt__saxes(mesh, kb).s, names[1],
                 mt__saxes(mesh, ka).s, mt__saxes(mesh, ka).s);
    int nd = base->ndim;
    mt_type rs0 = *base, rs1 = *base, keep = *base;
    rs0.sharding.dim_axes[nd - 2] |= p;
    rs1.sharding.dim_axes[nd - 1] |= p;
    keep.sharding.partial_axes |= p;
    const mt_stext ax = mt__saxes(mesh, p);
    const char *axes = ax.s;
    return mt_fail(MT_ESHARDING, "%s. The four answers: all-reduce over %s → %s; "
                   "reduce-scatter over %s on dim %d → %s; reduce-scatter over %s on dim %d → "
                   "%s; or keep the partial sum → %s. A reshard (sharding constraint) of an "
                   "operand or of the result to the layout you want resolves it",
                   head, axes, mt__stype(mesh, base).s, axes, nd - 2, mt__stype(mesh, &rs0).s,
                   axes, nd - 1, mt__stype(mesh, &rs1).s, mt__stype(mesh, &keep).s);
}

/* out = in[0] contracted with in[1] over dim ka_d of in[0] and kb_d of in[1]:
 * the result's dims are in[0]'s other dims in order, then in[1]'s dims
 * [n_d, n_d + n_n). */
static mt_status contract(mt_srule *r, mt_type *in, const char *const *names, int ka_d,
                          int kb_d, int n_d, int n_n, mt_type *res) {
    mt_type *a = &in[0], *b = &in[1];
    const mt_type orig[2] = {*a, *b};
    if (a->sharding.partial_axes && b->sharding.partial_axes) {
        if (r->mode == MT_SHARD_EXPLICIT)
            return mt_fail(MT_ESHARDING, "%s: both operands hold partial sums (%s %s, %s %s) "
                           "and the product of two partial sums is not one; a reshard "
                           "(sharding constraint) of %s to whole values (an all-reduce) "
                           "resolves it", r->op, names[0], mt__stype(r->mesh, a).s, names[1],
                           mt__stype(r->mesh, b).s, names[1]);
        TRY(mt__smove(r, MT_MOVE_ALL_REDUCE, 1, -1, -1, b->sharding.partial_axes, b));
    }
    /* a free dim of a split over an axis that also splits b's output dims
     * would use that axis twice in the result: auto mode gathers a's dim (a
     * is the activation: sequence parallelism's all-gather of the rows
     * before a column-parallel product); explicit mode refuses below */
    uint32_t b_out = 0;
    for (int d = n_d; d < n_d + n_n; d++) b_out |= b->sharding.dim_axes[d];
    for (int d = 0; d < a->ndim && r->mode == MT_SHARD_AUTO; d++) {
        uint32_t clash = d == ka_d ? 0 : a->sharding.dim_axes[d] & b_out;
        if (clash) TRY(mt__smove(r, MT_MOVE_ALL_GATHER, 0, d, -1, clash, a));
    }
    uint32_t ka = a->sharding.dim_axes[ka_d], kb = b->sharding.dim_axes[kb_d];

    /* the result without the contracting decision */
    *res = (mt_type){.dtype = a->dtype};
    for (int d = 0; d < a->ndim; d++) {
        if (d == ka_d) continue;
        res->shape[res->ndim] = a->shape[d];
        res->sharding.dim_axes[res->ndim++] = a->sharding.dim_axes[d];
    }
    for (int d = n_d; d < n_d + n_n; d++) {
        res->shape[res->ndim] = b->shape[d];
        res->sharding.dim_axes[res->ndim++] = b->sharding.dim_axes[d];
    }
    res->sharding.partial_axes = a->sharding.partial_axes | b->sharding.partial_axes;

    if (ka && kb) {
        if (r->mode == MT_SHARD_EXPLICIT) {
            TRY(mt__scheck_result(r, res, orig, 2, names));
            return ambiguous(r, orig, names, ka, kb, res);
        }
        if (ka == kb) {
            res->sharding.partial_axes |= ka;
        } else {
            TRY(mt__smove(r, MT_MOVE_ALL_GATHER, 0, ka_d, -1, ka, a));
            TRY(mt__smove(r, MT_MOVE_ALL_GATHER, 1, kb_d, -1, kb, b));
        }
    } else if (ka) {
        TRY(mt__smove(r, MT_MOVE_ALL_GATHER, 0, ka_d, -1, ka, a));
    } else if (kb) {
        TRY(mt__smove(r, MT_MOVE_ALL_GATHER, 1, kb_d, -1, kb, b));
    }
    return mt__scheck_result(r, res, orig, 2, names);
}

/* out (...,M,N) = a (...,M,K) · b (K,N); ta: a is (K,M); tb: b is (N,K). */
mt_status mt__srule_matmul(mt_srule *r, mt_type *in, bool ta, bool tb) {
    mt_type *a = &in[0], *b = &in[1];
    if (a->ndim < 2 || b->ndim != 2 || (ta && a->ndim != 2) || a->dtype != b->dtype)
        return mt_fail(MT_ESHAPE, "%s: a %s · b %s: b must be 2-D, a 2-D or more (2-D when "
                       "transposed), both of one dtype", r->op, mt__stype(r->mesh, a).s,
                       mt__stype(r->mesh, b).s);
    int ka_d = ta ? 0 : a->ndim - 1, kb_d = tb ? 1 : 0, n_d = tb ? 0 : 1;
    if (a->shape[ka_d] != b->shape[kb_d])
        return mt_fail(MT_ESHAPE, "%s: a %s · b %s: the contracting dims differ (%lld and "
                       "%lld)", r->op, mt__stype(r->mesh, a).s, mt__stype(r->mesh, b).s,
                       (long long)a->shape[ka_d], (long long)b->shape[kb_d]);
    return contract(r, in, AB, ka_d, kb_d, n_d, 1, &r->out->result);
}

/* out (...,O1..Ok) = x (...,C) · w (O1..Ok,C)ᵀ + bias (O1..Ok). The bias
 * takes the result's layout of the O dims (sliced when whole). A
 * partial-sum result would add the bias once per device: auto mode
 * all-reduces the result, and the op must then add the bias only where the
 * partial axes' coordinates are all 0 (the all-reduce sums it in once);
 * explicit mode refuses. */
mt_status mt__srule_linear(mt_srule *r, mt_type *in, int n_in) {
    mt_type *x = &in[0], *w = &in[1];
    int k = w->ndim - 1;
    if (x->ndim < 1 || w->ndim < 2 || w->shape[k] != x->shape[x->ndim - 1] ||
        x->dtype != w->dtype || x->ndim - 1 + k > MT_MAX_DIMS)
        return mt_fail(MT_ESHAPE, "%s: x %s, w %s: w must be (OC,C) or (O1,..,Ok,C) with C "
                       "the last dim of x", r->op, mt__stype(r->mesh, x).s,
                       mt__stype(r->mesh, w).s);
    const mt_type orig[3] = {in[0], in[1], n_in == 3 ? in[2] : in[0]};
    mt_type res;
    TRY(contract(r, in, XWB, x->ndim - 1, k, 0, k, &res));
    if (n_in == 3) {
        mt_type *bias = &in[2];
        bool bias_ok = bias->ndim == k;
        for (int d = 0; bias_ok && d < k; d++) bias_ok = bias->shape[d] == w->shape[d];
        if (!bias_ok)
            return mt_fail(MT_ESHAPE, "%s: bias %s must have the output dims of w %s (all but "
                           "the last)", r->op, mt__stype(r->mesh, bias).s,
                           mt__stype(r->mesh, w).s);
        TRY(mt__sneed_summed(r, 2, "bias", bias));
        mt_type target = *bias;
        uint32_t have = 0, want = 0;
        bool differ = false;
        for (int d = 0; d < k; d++) {
            target.sharding.dim_axes[d] = res.sharding.dim_axes[res.ndim - k + d];
            have |= bias->sharding.dim_axes[d];
            want |= target.sharding.dim_axes[d];
            differ |= bias->sharding.dim_axes[d] && bias->sharding.dim_axes[d] !=
                                                    target.sharding.dim_axes[d];
        }
        if (differ && r->mode == MT_SHARD_EXPLICIT)
            return mt_fail(MT_ESHARDING, "%s: bias %s is split over %s but the result %s "
                           "splits OC over %s; a reshard (sharding constraint) of the bias to "
                           "%s resolves it", r->op, mt__stype(r->mesh, bias).s,
                           mt__saxes(r->mesh, have).s, mt__stype(r->mesh, &res).s,
                           want ? mt__saxes(r->mesh, want).s : "nothing (whole)",
                           mt__stype(r->mesh, &target).s);
        if (mt__stype_axis_twice(&target) >= 0)
            return mt__scheck_result(r, &target, orig, 3, XWB);
        TRY(mt__smove_to(r, 2, bias, &target));
        if (res.sharding.partial_axes) {
            if (r->mode == MT_SHARD_EXPLICIT)
                return mt_fail(MT_ESHARDING, "%s: the result %s is a partial sum over %s, and "
                               "the bias would be added on every device; a reshard (sharding "
                               "constraint) of x %s or w %s to whole values (an all-reduce) "
                               "resolves it", r->op, mt__stype(r->mesh, &res).s,
                               mt__saxes(r->mesh, res.sharding.partial_axes).s,
                               mt__stype(r->mesh, &orig[0]).s, mt__stype(r->mesh, &orig[1]).s);
            TRY(mt__smove(r, MT_MOVE_ALL_REDUCE, MT_MOVE_RESULT, -1, -1,
                          res.sharding.partial_axes, &res));
        }
    }
    r->out->result = res;
    return MT_OK;
}

/* ======================================================================== */
/* Elementwise                                                               */
/* ======================================================================== */

/* a (...,D) op b (D): `linear` for add and sub (a sum of partial sums is
 * one), false for mul (linear in each operand alone). */
mt_status mt__srule_elementwise(mt_srule *r, mt_type *in, bool linear) {
    const mt_mesh *mesh = r->mesh;
    mt_type *a = &in[0], *b = &in[1];
    const mt_type orig[2] = {*a, *b};
    bool fits = a->dtype == b->dtype && b->ndim <= a->ndim;
    int off = a->ndim - b->ndim;
    for (int i = 0; fits && i < b->ndim; i++) fits = a->shape[off + i] == b->shape[i];
    if (!fits)
        return mt_fail(MT_ESHAPE, "%s: a %s and b %s do not broadcast; b's shape must equal "
                       "the trailing dims of a's, and the dtypes must agree", r->op,
                       mt__stype(mesh, a).s, mt__stype(mesh, b).s);

    /* partial sums */
    uint32_t pa = a->sharding.partial_axes, pb = b->sharding.partial_axes;
    bool clash = linear ? pa != pb : (pa && pb);
    if (clash && r->mode == MT_SHARD_EXPLICIT) {
        int k = linear ? ((pa & ~pb) ? 0 : 1) : 1;
        mt_type summed = in[k];
        summed.sharding.partial_axes = linear ? (pa & pb) : 0;
        return mt_fail(MT_ESHARDING, "%s: %s %s holds partial sums over %s that %s %s does "
                       "not match (%s), so the result would not be a partial sum; a reshard "
                       "(sharding constraint) of %s to %s (an all-reduce) resolves it", r->op,
                       AB[k], mt__stype(mesh, &in[k]).s,
                       mt__saxes(mesh, in[k].sharding.partial_axes).s, AB[1 - k],
                       mt__stype(mesh, &in[1 - k]).s,
                       linear ? "a sum of partial sums is one only over the same axes"
                              : "a product of two partial sums is not one",
                       AB[k], mt__stype(mesh, &summed).s);
    }
    if (clash && linear) {
        if (pa & ~pb) TRY(mt__smove(r, MT_MOVE_ALL_REDUCE, 0, -1, -1, pa & ~pb, a));
        if (pb & ~pa) TRY(mt__smove(r, MT_MOVE_ALL_REDUCE, 1, -1, -1, pb & ~pa, b));
    } else if (clash) {
        TRY(mt__smove(r, MT_MOVE_ALL_REDUCE, 1, -1, -1, pb, b));
    }
    uint32_t partial = linear ? a->sharding.partial_axes
                              : a->sharding.partial_axes | b->sharding.partial_axes;

    /* dims: the targets of a and b */
    mt_type ta = *a, tb = *b;
    for (int i = 0; i < b->ndim; i++) {
        int ai = off + i;
        uint32_t xa = a->sharding.dim_axes[ai], xb = b->sharding.dim_axes[i];
        if (xa == xb) continue;
        if (!xb) {                    /* whole b dim against split a: slice b */
            tb.sharding.dim_axes[i] = xa;
            continue;
        }
        if (!xa) {                    /* split b dim against whole a: slice a, unless the */
            uint32_t elsewhere = partial;   /* axes are taken in a already */
            for (int d = 0; d < a->ndim; d++)
                if (d != ai) elsewhere |= a->sharding.dim_axes[d];
            if (!(xb & elsewhere)) {
                ta.sharding.dim_axes[ai] = xb;
                continue;
            }
            if (r->mode == MT_SHARD_EXPLICIT) {
                mt_type res = *a;
                res.sharding.dim_axes[ai] = xb;
                res.sharding.partial_axes = partial;
                return mt__scheck_result(r, &res, orig, 2, AB);
            }
            tb.sharding.dim_axes[i] = 0;   /* gather b */
            continue;
        }
        if (r->mode == MT_SHARD_EXPLICIT) {
            mt_type want = *b;
            for (int k = 0; k < b->ndim; k++) want.sharding.dim_axes[k] = a->sharding.dim_axes[off + k];
            return mt_fail(MT_ESHARDING, "%s got incompatible shardings for broadcasting: a %s "
                           "and b %s: dim %d of a is split over %s, dim %d of b over %s; a "
                           "reshard (sharding constraint) of b to %s (or of a to b's layout) "
                           "resolves it", r->op, mt__stype(mesh, &orig[0]).s,
                           mt__stype(mesh, &orig[1]).s, ai, mt__saxes(mesh, xa).s, i,
                           mt__saxes(mesh, xb).s, mt__stype(mesh, &want).s);
        }
        tb.sharding.dim_axes[i] = xa;  /* auto: b takes a's layout */
    }
    ta.sharding.partial_axes = a->sharding.partial_axes;
    tb.sharding.partial_axes = b->sharding.partial_axes;
    if (mt__stype_axis_twice(&tb) >= 0) return mt__scheck_result(r, &tb, orig, 2, AB);
    TRY(mt__smove_to(r, 0, a, &ta));
    TRY(mt__smove_to(r, 1, b, &tb));

    mt_type res = *a;
    res.sharding.partial_axes = partial;
    TRY(mt__scheck_result(r, &res, orig, 2, AB));
    r->out->result = res;
    return MT_OK;
}

/* ======================================================================== */
/* Reshard                                                                   */
/* ======================================================================== */

mt_status mt__srule_reshard(mt_srule *r, const mt_type *in) {
    bool same = in[0].dtype == in[1].dtype && in[0].ndim == in[1].ndim;
    for (int d = 0; same && d < in[0].ndim; d++) same = in[0].shape[d] == in[1].shape[d];
    if (!same)
        return mt_fail(MT_ESHAPE, "reshard: %s and %s differ in dtype or shape; a reshard only "
                       "changes the layout", mt__stype(r->mesh, &in[0]).s,
                       mt__stype(r->mesh, &in[1]).s);
    mt_type t = in[0];
    TRY(mt__smove_to(r, 0, &t, &in[1]));
    r->out->result = t;
    return MT_OK;
}

/* A reshard call: to the layout the constraint names, in either mode. */
mt_status mt__shard_reshard(mt_srule *r, const mt_op_call *call, mt_type *in) {
    mt_type pair[2] = {in[0], in[0]};
    pair[1].sharding = call->p.reshard;
    return mt__srule_reshard(r, pair);
}

/* ======================================================================== */
/* The rules over a call, as the ops' descriptors name them (op_desc.c)      */
/* ======================================================================== */

/* out = op(a) · op(b), the transposes of the call. */
mt_status mt__shard_matmul(mt_srule *r, const mt_op_call *call, mt_type *in) {
    return mt__srule_matmul(r, in, call->p.gemm.ta, call->p.gemm.tb);
}

/* out = x · wᵀ [+ bias]. */
mt_status mt__shard_linear(mt_srule *r, const mt_op_call *call, mt_type *in) {
    return mt__srule_linear(r, in, call->n_in);
}

/* a + b, a - b: linear, partial sums pass; a ∘ b: not. */
mt_status mt__shard_add(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    return mt__srule_elementwise(r, in, true);
}
mt_status mt__shard_sub(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    return mt__srule_elementwise(r, in, true);
}
mt_status mt__shard_mul(mt_srule *r, const mt_op_call *call, mt_type *in) {
    (void)call;
    return mt__srule_elementwise(r, in, false);
}
