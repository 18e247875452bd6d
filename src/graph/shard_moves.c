/*
 * shard_moves.c — the move algebra every sharding rule is written in: the
 * moves a rule records (all-reduce, reduce-scatter, all-gather, all-to-all,
 * slice), the moves from one layout to another, the checks a rule's result
 * must pass, and the types and axes as messages print them.
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
