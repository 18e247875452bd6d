/*
 * shard_rules.c — the move algebra every sharding rule is written in, the
 * reshard rule (a sharding constraint), shard_rules_ops.c's rules over a
 * call, the dispatch through the ops' descriptors (op_desc.c) and the public
 * mt_shard_rule().
 *
 * A move is recorded together with the operand type it changes, so before,
 * after and bytes are never computed twice. Bytes follow nccl-tests' "size",
 * per device: the all-gather and all-to-all output, the all-reduce buffer,
 * the reduce-scatter input; a slice moves nothing.
 */
#include "graph/shard_rules_impl.h"

#include <stdio.h>

/* ======================================================================== */
/* Types and axes for messages                                               */
/* ======================================================================== */

mt_stext mt__stype(const mt_mesh *mesh, const mt_type *t) {
    mt_stext x;
    mt_type_format(mesh, t, x.s, sizeof x.s);
    return x;
}

mt_stext mt__saxes(const mt_mesh *mesh, uint32_t set) {
    mt_stext x;
    size_t off = 0;
    x.s[0] = '\0';
    for (int a = 0; a < mesh->ndim && off < sizeof x.s; a++)
        if (set & (1u << a))
            off += (size_t)snprintf(x.s + off, sizeof x.s - off, "%s%s", off ? "+" : "",
                                    mesh->names[a]);
    return x;
}

int64_t mt__saxes_size(const mt_mesh *mesh, uint32_t set) {
    int64_t n = 1;
    for (int a = 0; a < mesh->ndim; a++)
        if (set & (1u << a)) n *= mesh->sizes[a];
    return n;
}

int mt__stype_axis_twice(const mt_type *t) {
    uint32_t seen = t->sharding.partial_axes;
    for (int d = 0; d < t->ndim; d++) {
        uint32_t both = seen & t->sharding.dim_axes[d];
        if (both) return __builtin_ctz(both);
        seen |= t->sharding.dim_axes[d];
    }
    return -1;
}

/* Bytes of t on one device. */
static int64_t local_bytes(const mt_mesh *mesh, const mt_type *t) {
    int64_t n = (int64_t)mt_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d] / mt__saxes_size(mesh, t->sharding.dim_axes[d]);
    return n;
}

/* ======================================================================== */
/* Moves                                                                     */
/* ======================================================================== */

const char *mt_move_name(mt_move_kind kind) {
    switch (kind) {
    case MT_MOVE_ALL_GATHER:     return "all-gather";
    case MT_MOVE_ALL_REDUCE:     return "all-reduce";
    case MT_MOVE_REDUCE_SCATTER: return "reduce-scatter";
    case MT_MOVE_ALL_TO_ALL:     return "all-to-all";
    case MT_MOVE_SLICE:          return "slice";
    }
    return "?";
}

mt_status mt__smove(mt_srule *r, mt_move_kind kind, int operand, int dim, int dim2,
                    uint32_t axes, mt_type *t) {
    if (r->out->n_moves == MT_MAX_MOVES)
        return mt_fail(MT_ESHARDING, "%s: the sharding rule needs more than %d moves; reshard "
                       "the operands closer to each other first", r->op, MT_MAX_MOVES);
    mt_move *m = &r->out->moves[r->out->n_moves++];
    *m = (mt_move){.kind = kind, .operand = operand, .dim = dim, .dim2 = dim2, .axes = axes,
                   .before = *t};
    mt_sharding *sh = &t->sharding;
    switch (kind) {
    case MT_MOVE_ALL_GATHER:     sh->dim_axes[dim] &= ~axes; break;
    case MT_MOVE_SLICE:          sh->dim_axes[dim] |= axes; break;
    case MT_MOVE_ALL_REDUCE:     sh->partial_axes &= ~axes; break;
    case MT_MOVE_REDUCE_SCATTER: sh->partial_axes &= ~axes; sh->dim_axes[dim] |= axes; break;
    case MT_MOVE_ALL_TO_ALL:     sh->dim_axes[dim] &= ~axes; sh->dim_axes[dim2] |= axes; break;
    }
    m->after = *t;
    switch (kind) {
    case MT_MOVE_ALL_GATHER:
    case MT_MOVE_ALL_TO_ALL:     m->bytes = local_bytes(r->mesh, &m->after); break;
    case MT_MOVE_ALL_REDUCE:
    case MT_MOVE_REDUCE_SCATTER: m->bytes = local_bytes(r->mesh, &m->before); break;
    case MT_MOVE_SLICE:          m->bytes = 0; break;
    }
    return MT_OK;
}

#define TRY(call) do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

mt_status mt__smove_to(mt_srule *r, int operand, mt_type *t, const mt_type *target) {
    const mt_mesh *mesh = r->mesh;
    mt_sharding *sh = &t->sharding;
    const mt_sharding *to = &target->sharding;
    uint32_t extra = to->partial_axes & ~sh->partial_axes;
    if (extra)
        return mt_fail(MT_ESHARDING, "%s: cannot move %s to %s: that would make partial sums "
                       "over %s out of whole values; partial sums only come out of ops (a "
                       "matmul over split contracting dims)", r->op, mt__stype(mesh, t).s,
                       mt__stype(mesh, target).s, mt__saxes(mesh, extra).s);

    /* partial sums: reduce-scatter onto a whole dim the target splits over
     * some of them, all-reduce the rest */
    uint32_t reduce = sh->partial_axes & ~to->partial_axes;
    for (int d = 0; reduce && d < t->ndim; d++)
        if (!sh->dim_axes[d] && to->dim_axes[d] && !(to->dim_axes[d] & ~reduce)) {
            uint32_t rs = to->dim_axes[d];
            TRY(mt__smove(r, MT_MOVE_REDUCE_SCATTER, operand, d, -1, rs, t));
            reduce &= ~rs;
        }
    if (reduce) TRY(mt__smove(r, MT_MOVE_ALL_REDUCE, operand, -1, -1, reduce, t));

    /* an axis that leaves dim i for dim j: all-to-all (axes with the same
     * i and j move together) */
    for (int i = 0; i < t->ndim; i++)
        for (int j = 0; j < t->ndim; j++) {
            if (i == j) continue;
            uint32_t move = sh->dim_axes[i] & ~to->dim_axes[i] & to->dim_axes[j];
            if (move) TRY(mt__smove(r, MT_MOVE_ALL_TO_ALL, operand, i, j, move, t));
        }
    for (int d = 0; d < t->ndim; d++) {
        uint32_t g = sh->dim_axes[d] & ~to->dim_axes[d];
        if (g) TRY(mt__smove(r, MT_MOVE_ALL_GATHER, operand, d, -1, g, t));
    }
    for (int d = 0; d < t->ndim; d++) {
        uint32_t s = to->dim_axes[d] & ~sh->dim_axes[d];
        if (s) TRY(mt__smove(r, MT_MOVE_SLICE, operand, d, -1, s, t));
    }
    return MT_OK;
}

mt_status mt__sneed_summed(mt_srule *r, int operand, const char *name, mt_type *t) {
    uint32_t p = t->sharding.partial_axes;
    if (!p) return MT_OK;
    if (r->mode == MT_SHARD_AUTO) return mt__smove(r, MT_MOVE_ALL_REDUCE, operand, -1, -1, p, t);
    mt_type summed = *t;
    summed.sharding.partial_axes = 0;
    return mt_fail(MT_ESHARDING, "%s: %s %s holds partial sums over %s and %s is not linear "
                   "in it, so they must be summed first; a reshard (sharding constraint) of %s "
                   "to %s (an all-reduce) resolves it", r->op, name, mt__stype(r->mesh, t).s,
                   mt__saxes(r->mesh, p).s, r->op, name, mt__stype(r->mesh, &summed).s);
}

mt_status mt__sneed_whole(mt_srule *r, int operand, const char *name, mt_type *t, int dim,
                          const char *why) {
    uint32_t ax = t->sharding.dim_axes[dim];
    if (!ax) return MT_OK;
    if (r->mode == MT_SHARD_AUTO) return mt__smove(r, MT_MOVE_ALL_GATHER, operand, dim, -1, ax, t);
    mt_type whole = *t;
    whole.sharding.dim_axes[dim] = 0;
    return mt_fail(MT_ESHARDING, "%s: dim %d of %s %s is split over %s, but %s; a reshard "
                   "(sharding constraint) of %s to %s resolves it", r->op, dim, name,
                   mt__stype(r->mesh, t).s, mt__saxes(r->mesh, ax).s, why, name,
                   mt__stype(r->mesh, &whole).s);
}

mt_status mt__scheck_result(mt_srule *r, const mt_type *result, const mt_type *in, int n_in,
                            const char *const *names) {
    int a = mt__stype_axis_twice(result);
    if (a < 0) return MT_OK;
    char list[512];
    size_t off = 0;
    list[0] = '\0';
    for (int k = 0; k < n_in && off < sizeof list; k++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%s %s", k ? ", " : "",
                                names[k], mt__stype(r->mesh, &in[k]).s);
    return mt_fail(MT_ESHARDING, "%s: the result would use mesh axis '%s' twice (%s), and a "
                   "mesh axis may appear at most once in a type; reshard (sharding "
                   "constraint) one operand so that '%s' splits only one of the result's "
                   "dims", r->op, r->mesh->names[a], list, r->mesh->names[a]);
}

/* ======================================================================== */
/* Reshard                                                                   */
/* ======================================================================== */

static mt_status rule_reshard(mt_srule *r, const mt_type *in) {
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
    return rule_reshard(r, pair);
}

/* ======================================================================== */
/* The rules of shard_rules_ops.c over a call                                */
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

/* ======================================================================== */
/* Dispatch                                                                  */
/* ======================================================================== */

mt_status mt__shard_rule(const mt_mesh *mesh, const mt_op_call *call, const mt_type *in,
                         mt_shard_mode mode, mt_shard_result *out) {
    memset(out, 0, sizeof *out);
    if (call->op >= MT_OP_COUNT)
        return mt_fail(MT_EINVAL, "op %d has no sharding rule", (int)call->op);
    const mt_op_def *def = mt__op_def(call->op);
    mt_shard_fn rule = mt__op_gdesc(call->op)->shard;
    if (!rule) return mt_fail(MT_EINVAL, "op '%s' has no sharding rule", def->name);
    if (call->n_in < def->min_in || call->n_in > def->max_in) {
        if (def->min_in == def->max_in)
            return mt_fail(MT_EINVAL, "%s: %d inputs; the op takes %d", def->name, call->n_in,
                           def->min_in);
        return mt_fail(MT_EINVAL, "%s: %d inputs; the op takes %d to %d", def->name, call->n_in,
                       def->min_in, def->max_in);
    }
    mt_srule r = {.mesh = mesh, .mode = mode, .op = def->name, .out = out};
    mt_type t[MT_MAX_INPUTS];
    for (int k = 0; k < call->n_in; k++) t[k] = in[k];
    mt_status s = rule(&r, call, t);
    if (s != MT_OK) out->n_moves = 0;
    return s;
}

mt_status mt_shard_rule(const mt_mesh *mesh, const char *op, const mt_type *in, int n_in,
                        mt_shard_mode mode, mt_shard_result *out) {
    memset(out, 0, sizeof *out);
    static const struct { const char *name; mt_op op; } NAMED[] = {
        {"matmul", MT_OP_MATMUL}, {"add", MT_OP_ADD}, {"sub", MT_OP_SUB}, {"mul", MT_OP_MUL}};
    if (!op) op = "(null)";
    bool reshard = strcmp(op, "reshard") == 0;
    int found = -1;
    for (int k = 0; k < 4; k++)
        if (strcmp(op, NAMED[k].name) == 0) found = k;
    if (!reshard && found < 0)
        return mt_fail(MT_EINVAL, "op '%s' has no sharding rule; the rules by name are "
                       "matmul, add, sub, mul and reshard", op);
    if (n_in != 2)
        return mt_fail(MT_EINVAL, "%s takes 2 operand types, got %d", op, n_in);
    if (reshard) {
        mt_srule r = {.mesh = mesh, .mode = mode, .op = "reshard", .out = out};
        mt_status s = rule_reshard(&r, in);
        if (s != MT_OK) out->n_moves = 0;
        return s;
    }
    mt_op_call call = {.op = NAMED[found].op, .n_in = 2};
    if (call.op == MT_OP_MATMUL && in[0].ndim >= 1 && in[1].ndim == 2)
        call.p.gemm = (mt_gemm_params){.ta = false, .tb = false, .K = in[0].shape[in[0].ndim - 1],
                                       .N = in[1].shape[1]};
    return mt__shard_rule(mesh, &call, in, mode, out);
}
