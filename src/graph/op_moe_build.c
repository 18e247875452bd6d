/*
 * op_moe_build.c — the MoE ops' builders (meshtrain/graph_moe.h): the
 * shape and dtype checks, the outputs (the ids an int32 activation) and
 * the forward nodes. One builder, mt__moe_build, takes the kernel's
 * parameters, so that a lowering (op_moe.c) rebuilds a call on a device's
 * rows with the global call's parameters (the router loss's global
 * sequence and row counts). The kernels are ops/moe_ops.c's.
 */
#include "graph/builders_impl.h"
#include "graph/op_moe.h"

#include <math.h>

#define SHAPE(t, buf) mt__shape_str((t), (buf), sizeof (buf))

/* Whether the leading n dims of a and b agree. */
static bool same_lead(const mt_tensor *a, const mt_tensor *b, int n) {
    if (a->ndim < n || b->ndim < n) return false;
    for (int d = 0; d < n; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

/* ids (...,k) int32 of the rows of x (..., ·): the same leading dims and
 * last dim k. */
static bool want_ids(mt_graph *g, const char *op, mt_tensor *ids, mt_tensor *x, int lead,
                     int64_t k) {
    if (!mt__build_want_dtype(g, op, ids, MT_I32)) return false;
    char si[64], sx[64];
    if (ids->ndim != lead + 1 || ids->shape[lead] != k || !same_lead(ids, x, lead)) {
        mt__graph_error(g, MT_ESHAPE, "%s: ids '%s' %s must be (rows...,k=%lld) over the rows "
                        "of '%s' %s (the ids mt_moe_route made for them)", op, ids->name,
                        SHAPE(ids, si), (long long)k, x->name, SHAPE(x, sx));
        return false;
    }
    return true;
}

/* A new output of `shape`, f32 or int32 (an int32 activation takes no
 * gradient: ir.c's needs_grad flows to f32 outputs only). */
static mt_tensor *output(mt_graph *g, mt_dtype dt, int ndim, const int64_t *shape) {
    if (dt == MT_F32) return mt__build_act(g, ndim, shape);
    return mt__tensor_new(g, NULL, dt, MT_ACT, ndim, shape);
}

mt_tensor *mt__moe_build(mt_graph *g, mt_op op, mt_tensor *const *in, int n_in,
                         const mt_moe_op_params *p) {
    if (!mt__build_ready(g, n_in, in)) return NULL;
    const char *name = mt__op_def(op)->name;
    mt_op_call c = {.op = op, .n_in = n_in, .p.moe = *p};
    for (int i = 0; i < n_in; i++) c.in[i] = in[i];
    mt_tensor *x = in[0];
    /* rows of f32 (the capacity's: the int32 ids, checked below) */
    if (op != MT_OP_MOE_CAPACITY && !mt__build_want_rows(g, name, x)) return NULL;
    if (x->ndim < 1) return mt__graph_error(g, MT_ESHAPE, "%s: '%s' is a scalar", name, x->name);
    const int lead = x->ndim - 1;   /* the rows' dims of a (rows...,·) operand */
    int64_t shape[MT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    char s0[64], s1[64];
    switch (op) {
    case MT_OP_MOE_ROUTE:
    case MT_OP_MOE_GATES:
        if (x->shape[lead] != p->E)
            return mt__graph_error(g, MT_ESHAPE, "%s: logits '%s' %s must have E=%lld "
                                   "columns", name, x->name, SHAPE(x, s0), (long long)p->E);
        shape[lead] = p->k;
        if (op == MT_OP_MOE_ROUTE) {
            if (n_in > 1 && (!mt__build_want_dtype(g, name, in[1], MT_F32) ||
                             in[1]->ndim != 1 || in[1]->shape[0] != p->E))
                return g->status != MT_OK ? NULL
                       : mt__graph_error(g, MT_ESHAPE, "%s: bias '%s' %s must be (E=%lld), "
                                         "one a routed expert", name, in[1]->name,
                                         SHAPE(in[1], s1), (long long)p->E);
            c.out = output(g, MT_I32, x->ndim, shape);
            break;
        }
        if (!want_ids(g, name, in[1], x, lead, p->k)) return NULL;
        c.out = output(g, MT_F32, x->ndim, shape);
        c.aux[0] = mt__build_aux(g, x->ndim, x->shape);   /* the scores */
        break;
    case MT_OP_MOE_CAPACITY:   /* x: the ids (rows...,k); gates of their shape */
        if (!mt__build_want_dtype(g, name, x, MT_I32) || x->shape[lead] != p->k ||
            x->ndim < 2 || x->ndim > 3)
            return g->status != MT_OK ? NULL
                   : mt__graph_error(g, MT_ESHAPE, "%s: ids '%s' %s must be (S,L,k=%lld) or "
                                     "(T,k): the router's", name, x->name, SHAPE(x, s0),
                                     (long long)p->k);
        if (n_in > 1 && (!mt__build_want_dtype(g, name, in[1], MT_F32) ||
                         in[1]->ndim != x->ndim || !same_lead(in[1], x, x->ndim)))
            return g->status != MT_OK ? NULL
                   : mt__graph_error(g, MT_ESHAPE, "%s: gates '%s' %s must have the ids' "
                                     "shape %s", name, in[1]->name, SHAPE(in[1], s0),
                                     SHAPE(x, s1));
        if (!(p->capacity > 0 && isfinite(p->capacity)))
            return mt__graph_error(g, MT_EINVAL, "%s: capacity factor %g must be above 0 "
                                   "(--moe-capacity; 0 is dropless: no capacity op)", name,
                                   p->capacity);
        c.out = output(g, MT_I32, x->ndim, shape);
        if (c.out) c.out->read_after = true;   /* the trainer counts the drops (moe_load.c) */
        break;
    case MT_OP_MOE_DISPATCH:
        if (x->ndim >= MT_MAX_DIMS || !want_ids(g, name, in[1], x, lead, p->k)) {
            if (g->status == MT_OK)
                return mt__graph_error(g, MT_ESHAPE, "%s: x '%s' %s has too many dims for "
                                       "(rows...,k,D)", name, x->name, SHAPE(x, s0));
            return NULL;
        }
        shape[lead] = p->k, shape[lead + 1] = x->shape[lead];
        c.out = output(g, MT_F32, x->ndim + 1, shape);
        break;
    case MT_OP_MOE_EXPERTS: {
        mt_tensor *w = in[1];
        if (!mt__build_want_dtype(g, name, w, MT_F32) ||
            !want_ids(g, name, in[2], x, lead - 1, p->k))
            return NULL;
        const int64_t el = p->ep_size > 1 ? p->E / p->ep_size : p->E;   /* local experts */
        if (w->ndim != 3 || w->shape[0] != el || w->shape[1] != x->shape[lead])
            return mt__graph_error(g, MT_ESHAPE, "%s: w '%s' %s must be (E=%lld,C,OC) over xs "
                                   "'%s' %s (rows...,k,C)", name, w->name, SHAPE(w, s0),
                                   (long long)el, x->name, SHAPE(x, s1));
        shape[lead] = w->shape[2];
        c.out = output(g, MT_F32, x->ndim, shape);
        break;
    }
    case MT_OP_MOE_COMBINE:
        if (lead < 1 || !mt__build_want_dtype(g, name, in[1], MT_F32) ||
            !want_ids(g, name, in[2], x, lead - 1, p->k) ||
            !want_ids(g, name, in[2], in[1], lead - 1, p->k)) {
            if (g->status == MT_OK)
                return mt__graph_error(g, MT_ESHAPE, "%s: ys '%s' %s must be (rows...,k,D)",
                                       name, x->name, SHAPE(x, s0));
            return NULL;
        }
        if (in[1]->ndim != lead)
            return mt__graph_error(g, MT_ESHAPE, "%s: gates '%s' %s must be (rows...,k)", name,
                                   in[1]->name, SHAPE(in[1], s0));
        shape[lead - 1] = x->shape[lead];
        c.out = output(g, MT_F32, lead, shape);
        break;
    case MT_OP_MOE_ROUTER_LOSS:
        if (x->shape[lead] != p->E || x->ndim < 2 || x->ndim > 3)
            return mt__graph_error(g, MT_ESHAPE, "%s: logits '%s' %s must be (S,L,E=%lld) or "
                                   "(T,E=%lld)", name, x->name, SHAPE(x, s0), (long long)p->E,
                                   (long long)p->E);
        if (!want_ids(g, name, in[1], x, lead, p->k)) return NULL;
        if (!(p->alpha >= 0.0f && p->beta >= 0.0f && isfinite(p->alpha) &&
              isfinite(p->beta)))
            return mt__graph_error(g, MT_EINVAL, "%s: aux-loss alpha %g and z-loss beta %g "
                                   "must be finite and not negative (--moe-aux-alpha, "
                                   "--moe-z-beta)", name, (double)p->alpha, (double)p->beta);
        c.out = output(g, MT_F32, 0, NULL);
        if (c.out) c.out->read_after = true;   /* the trainer reports it (train/moe_load.c) */
        break;
    default:
        return mt__graph_error(g, MT_EINTERNAL, "mt__moe_build: %s is no MoE forward op", name);
    }
    return mt__build_emit(g, &c);
}

/* ---- the public builders ---------------------------------------------------- */

/* The kernel's parameters of router r over E experts (g's error, false, where
 * r is out of range). */
static bool params_of(mt_graph *g, const char *op, const mt_moe_router *r, int64_t E,
                      mt_moe_op_params *p) {
    *p = (mt_moe_op_params){
        .E = E, .k = r->k,
        .route = {.T = 0, .E = E, .k = r->k, .renorm = r->renorm, .groups = r->groups,
                  .groups_kept = r->groups_kept, .route_scale = r->route_scale,
                  .score = r->sigmoid ? MT_MOE_SIGMOID : MT_MOE_SOFTMAX},
    };
    if (mt_moe_route_check(&p->route) == MT_OK) return true;
    mt__graph_error(g, MT_EINVAL, "%s: %s", op, mt_errmsg());
    return false;
}

/* The experts E of logits (...,E) (0 for a scalar: the builder refuses it). */
static int64_t experts_of(const mt_tensor *logits) {
    return logits && logits->ndim > 0 ? logits->shape[logits->ndim - 1] : 0;
}

mt_tensor *mt_moe_route(mt_graph *g, mt_tensor *logits, mt_tensor *bias,
                        const mt_moe_router *r) {
    mt_tensor *in[2] = {logits, bias};
    const int n = bias ? 2 : 1;
    mt_moe_op_params p;
    if (!mt__build_ready(g, n, in) || !params_of(g, "moe_route", r, experts_of(logits), &p))
        return NULL;
    return mt__moe_build(g, MT_OP_MOE_ROUTE, in, n, &p);
}

mt_tensor *mt_moe_gates(mt_graph *g, mt_tensor *logits, mt_tensor *ids, const mt_moe_router *r) {
    mt_tensor *in[2] = {logits, ids};
    mt_moe_op_params p;
    if (!mt__build_ready(g, 2, in) || !params_of(g, "moe_gates", r, experts_of(logits), &p))
        return NULL;
    return mt__moe_build(g, MT_OP_MOE_GATES, in, 2, &p);
}

mt_tensor *mt_moe_capacity(mt_graph *g, mt_tensor *ids, mt_tensor *gates, int E, double cf) {
    mt_tensor *in[2] = {ids, gates};
    const int n = gates ? 2 : 1;
    if (!mt__build_ready(g, n, in)) return NULL;
    mt_moe_op_params p = {.E = E, .k = ids->ndim ? ids->shape[ids->ndim - 1] : 0,
                          .capacity = cf};
    if (E < 1 || p.k < 1 || p.k > E)
        return mt__graph_error(g, MT_EINVAL, "moe_capacity: E=%d experts and k=%lld a token "
                               "must have 1 <= k <= E", E, (long long)p.k);
    return mt__moe_build(g, MT_OP_MOE_CAPACITY, in, n, &p);
}

/* The parameters of the ops that read only E and k (k the ids' last dim). */
static mt_moe_op_params sort_params(int64_t E, const mt_tensor *ids) {
    return (mt_moe_op_params){.E = E, .k = ids->ndim ? ids->shape[ids->ndim - 1] : 0};
}

mt_tensor *mt_moe_dispatch(mt_graph *g, mt_tensor *x, mt_tensor *ids, int E) {
    mt_tensor *in[2] = {x, ids};
    if (!mt__build_ready(g, 2, in)) return NULL;
    const mt_moe_op_params p = sort_params(E, ids);
    if (E < 1 || p.k < 1 || p.k > E)
        return mt__graph_error(g, MT_EINVAL, "moe_dispatch: E=%d experts and k=%lld a token "
                               "must have 1 <= k <= E", E, (long long)p.k);
    return mt__moe_build(g, MT_OP_MOE_DISPATCH, in, 2, &p);
}

mt_tensor *mt_moe_experts(mt_graph *g, mt_tensor *xs, mt_tensor *w, mt_tensor *ids) {
    mt_tensor *in[3] = {xs, w, ids};
    if (!mt__build_ready(g, 3, in)) return NULL;
    const mt_moe_op_params p = sort_params(w->ndim ? w->shape[0] : 0, ids);
    return mt__moe_build(g, MT_OP_MOE_EXPERTS, in, 3, &p);
}

mt_tensor *mt_moe_combine(mt_graph *g, mt_tensor *ys, mt_tensor *gates, mt_tensor *ids, int E) {
    mt_tensor *in[3] = {ys, gates, ids};
    if (!mt__build_ready(g, 3, in)) return NULL;
    const mt_moe_op_params p = sort_params(E, ids);
    if (E < 1 || p.k < 1 || p.k > E)
        return mt__graph_error(g, MT_EINVAL, "moe_combine: E=%d experts and k=%lld a token "
                               "must have 1 <= k <= E", E, (long long)p.k);
    return mt__moe_build(g, MT_OP_MOE_COMBINE, in, 3, &p);
}

mt_tensor *mt_moe_router_loss(mt_graph *g, mt_tensor *logits, mt_tensor *ids,
                              const mt_moe_router *r, float alpha, float beta) {
    mt_tensor *in[2] = {logits, ids};
    mt_moe_op_params p;
    if (!mt__build_ready(g, 2, in) ||
        !params_of(g, "moe_router_loss", r, experts_of(logits), &p))
        return NULL;
    p.alpha = alpha, p.beta = beta;
    p.S_all = logits->ndim == 3 ? logits->shape[0] : 1;
    p.T_all = p.E ? mt_tensor_numel(logits) / p.E : 0;
    return mt__moe_build(g, MT_OP_MOE_ROUTER_LOSS, in, 2, &p);
}

double mt_moe_load_maxvio(const int32_t *counts, int64_t E) { return mt_moe_maxvio(counts, E); }

void mt_moe_bias_step(float *bias, const int32_t *counts, int64_t E, float gamma) {
    mt_moe_bias_update(bias, counts, E, gamma);
}
