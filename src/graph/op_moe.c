/*
 * op_moe.c — the MoE ops to a graph beyond their builders (op_moe_build.c):
 * gradient rules, sharding rules, lowerings and the graph halves of the
 * descriptors (mt__gop_moe_*; op_desc.h). The kernel halves are
 * ops/moe_ops.c's.
 *
 * Sharding: routing is per token, so the rows (every leading dim) may be
 * split over any axes, each device routing, sorting and combining its own
 * rows; the trailing dims (E, k, D, C, OC) are made whole, and so are the
 * expert weights (E,C,OC), whose gradient the partitioner then sums over the
 * axes the rows vary over (its pvary) — but for the experts dim split over
 * axes that also split the rows: the product then runs expert-parallel
 * (ops/moe_ep.c: the rows travel to their experts' owners inside the op),
 * and its weights' gradient sums over the other axes only — and for the
 * columns split over axes that do not split the rows (the expert-tensor
 * split, Megatron's ETP: the rows the same on those devices, each runs its
 * block of every expert's OC, or of its C with xs's features split alike,
 * a partial sum that combine passes on). A tensor of sorted rows holds a
 * device's own pairs in expert order, which is no block of the global
 * order: it keeps the split of its ids, and every other operand is moved to
 * that split (a rule never moves the sorted rows, only their features). The router loss needs
 * whole sequences (dim 1 of 3-D logits): its result is a partial sum over
 * the axes splitting the sequences, each device's share over the global
 * counts (mt_moe_op_params).
 */
#include "graph/op_desc.h"
#include "graph/op_moe.h"
#include "graph/shard_rules_impl.h"

#include <stdio.h>

/* ---- gradients ------------------------------------------------------------ */

/* A backward call of the MoE op `op` on n inputs with f's parameters. */
static mt_op_call bwd(const mt_op_call *f, mt_op op, int n, mt_tensor *a, mt_tensor *b,
                      mt_tensor *c, mt_tensor *d) {
    mt_op_call call = {.op = op, .n_in = n, .in = {a, b, c, d}};
    call.p.moe = f->p.moe;
    return call;
}

/* The ids are int32: no gradient reaches them (emit.c takes f32 only), nor
 * the gates through the capacity's choice (piecewise constant). */
static void grad_moe_route(mt_graph *g, const mt_op_call *f) { (void)g, (void)f; }
static void grad_moe_capacity(mt_graph *g, const mt_op_call *f) { (void)g, (void)f; }

static void grad_moe_gates(mt_graph *g, const mt_op_call *f) {
    mt_op_call d = bwd(f, MT_OP_MOE_GATES_BWD, 3, f->out->grad, f->aux[0], f->in[1], NULL);
    mt__emit_grad(g, f->in[0], &d);
}

static void grad_moe_dispatch(mt_graph *g, const mt_op_call *f) {
    mt_op_call d = bwd(f, MT_OP_MOE_DISPATCH_BWD, 2, f->out->grad, f->in[1], NULL, NULL);
    mt__emit_grad(g, f->in[0], &d);
}

static void grad_moe_experts(mt_graph *g, const mt_op_call *f) {
    mt_tensor *dy = f->out->grad, *xs = f->in[0], *w = f->in[1], *ids = f->in[2];
    mt_op_call dx = bwd(f, MT_OP_MOE_EXPERTS_BWD_X, 3, dy, w, ids, NULL);
    mt__emit_grad(g, xs, &dx);
    mt_op_call dw = bwd(f, MT_OP_MOE_EXPERTS_BWD_W, 3, dy, xs, ids, NULL);
    mt__emit_grad(g, w, &dw);
}

static void grad_moe_combine(mt_graph *g, const mt_op_call *f) {
    mt_tensor *dout = f->out->grad, *ys = f->in[0], *gates = f->in[1], *ids = f->in[2];
    mt_op_call dy = bwd(f, MT_OP_MOE_COMBINE_BWD_Y, 3, dout, gates, ids, NULL);
    mt__emit_grad(g, ys, &dy);
    mt_op_call dg = bwd(f, MT_OP_MOE_COMBINE_BWD_G, 4, dout, ys, gates, ids);
    mt__emit_grad(g, gates, &dg);
}

static void grad_moe_router_loss(mt_graph *g, const mt_op_call *f) {
    mt_op_call d = bwd(f, MT_OP_MOE_ROUTER_LOSS_BWD, 3, f->out->grad, f->in[0], f->in[1], NULL);
    mt__emit_grad(g, f->in[0], &d);
}

/* ---- sharding ------------------------------------------------------------- */

#define TRY(call) do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

/* What an operand is to the rule: token rows, rows sorted by expert, an
 * expert weight, or the router's bias (whole everywhere). */
typedef enum { ROWS, SORTED, WEIGHT, WHOLE } moe_role;

typedef struct {
    int             n;
    const moe_role *role;
    const char     *const *name;
} moe_operands;

/* The operands of each forward call, as its MT_OP_LIST line lists them. */
static moe_operands operands_of(const mt_op_call *call) {
    static const moe_role R2[] = {ROWS, ROWS}, RB[] = {ROWS, WHOLE};
    static const moe_role EX[] = {SORTED, WEIGHT, ROWS}, CO[] = {SORTED, ROWS, ROWS};
    static const char *const LOGITS[] = {"logits", "ids"}, *const X[] = {"x", "ids"};
    static const char *const XS[] = {"xs", "w", "ids"}, *const YS[] = {"ys", "gates", "ids"};
    static const char *const ROUTE[] = {"logits", "bias"}, *const CAP[] = {"ids", "gates"};
    switch (call->op) {
    case MT_OP_MOE_ROUTE: return (moe_operands){call->n_in, RB, ROUTE};
    case MT_OP_MOE_CAPACITY: return (moe_operands){call->n_in, R2, CAP};
    case MT_OP_MOE_DISPATCH: return (moe_operands){2, R2, X};
    case MT_OP_MOE_EXPERTS: return (moe_operands){3, EX, XS};
    case MT_OP_MOE_COMBINE: return (moe_operands){3, CO, YS};
    default: return (moe_operands){2, R2, LOGITS};   /* gates, router loss */
    }
}

/* Operand k (token rows) to rows split as lead[0..nlead) and its other dims
 * whole: moved in auto mode, refused in explicit mode. */
static mt_status rows_to(mt_srule *r, int k, const char *name, mt_type *t,
                         const uint32_t *lead, int nlead) {
    mt_type want = *t;
    for (int d = 0; d < t->ndim; d++) want.sharding.dim_axes[d] = d < nlead ? lead[d] : 0;
    bool same = true;
    for (int d = 0; d < t->ndim; d++)
        same = same && want.sharding.dim_axes[d] == t->sharding.dim_axes[d];
    if (same) return MT_OK;
    if (r->mode == MT_SHARD_EXPLICIT)
        return mt_fail(MT_ESHARDING, "%s: %s %s must have its rows split as the op's other "
                       "token operands and its last dims whole (%s); a reshard of %s "
                       "resolves it", r->op, name, mt__stype(r->mesh, t).s,
                       mt__stype(r->mesh, &want).s, name);
    return mt__smove_to(r, k, t, &want);
}

/* The rule of every MoE forward op (the result's shape from the operands). */
static mt_status shard_moe(mt_srule *r, const mt_op_call *call, mt_type *in) {
    const moe_operands ops = operands_of(call);
    /* the operand whose rows the result has: the ids, the route's logits */
    const bool first = call->op == MT_OP_MOE_ROUTE || call->op == MT_OP_MOE_CAPACITY;
    mt_type *ids = first ? &in[0] : &in[ops.n - 1];
    const int nlead = ids->ndim - 1;
    if (nlead < 0 || (call->op == MT_OP_MOE_EXPERTS && in[1].ndim != 3))
        return mt_fail(MT_ESHAPE, "%s: operands of rank %d: want (rows...,·) token operands "
                       "and w (E,C,OC)", r->op, ids->ndim);
    /* the rows' split: operand 0's, the sorted rows where there are (never
     * moved) */
    uint32_t lead[MT_MAX_DIMS] = {0};
    for (int d = 0; d < nlead; d++) lead[d] = in[0].sharding.dim_axes[d];
    if ((call->op == MT_OP_MOE_ROUTER_LOSS || call->op == MT_OP_MOE_CAPACITY) && nlead == 2)
        lead[1] = 0;   /* whole sequences: the loss's balance, a capacity's groups */
    uint32_t rows_axes = 0;
    for (int d = 0; d < nlead; d++) rows_axes |= lead[d];
    /* the expert-tensor split (Megatron's ETP): weights whose OC (col) or C
     * (red) split over axes that do not split the rows; the rows are then
     * the same on those devices, each runs its block of every expert's
     * columns, and a split C (xs's features split alike) leaves a partial
     * sum. combine is linear in ys: the partial sum passes through it, to
     * be summed once on (rows,D) rather than on the k-times wider ys. */
    uint32_t col = 0, red = 0, passed = 0;
    if (call->op == MT_OP_MOE_EXPERTS) {
        if (!(in[1].sharding.dim_axes[2] & rows_axes)) col = in[1].sharding.dim_axes[2];
        if (!(in[1].sharding.dim_axes[1] & rows_axes)) red = in[1].sharding.dim_axes[1];
    }
    for (int k = 0; k < ops.n; k++) {
        if (call->op == MT_OP_MOE_COMBINE && k == 0 && !(in[0].sharding.partial_axes & rows_axes)) {
            passed = in[0].sharding.partial_axes;
            continue;
        }
        TRY(mt__sneed_summed(r, k, ops.name[k], &in[k]));
    }
    for (int k = 0; k < ops.n; k++) {
        mt_type *t = &in[k];
        if (ops.role[k] == ROWS) {
            TRY(rows_to(r, k, ops.name[k], t, lead, nlead));
            continue;
        }
        for (int d = ops.role[k] == SORTED ? nlead : 0; d < t->ndim; d++) {
            if (!t->sharding.dim_axes[d]) continue;
            if (ops.role[k] == WHOLE) {
                TRY(mt__sneed_whole(r, k, ops.name[k], t, d, "the router's bias chooses "
                                    "among all E experts on every device"));
                continue;
            }
            /* the experts split over axes that also split the rows: expert
             * parallelism, each device's rows sent to their experts' owners
             * inside the op (moe_ep.c) */
            if (ops.role[k] == WEIGHT && d == 0 && !(t->sharding.dim_axes[0] & ~rows_axes))
                continue;
            if (ops.role[k] == WEIGHT && ((d == 2 && col) || (d == 1 && red))) continue;
            if (ops.role[k] == SORTED && red && d == t->ndim - 1 &&
                t->sharding.dim_axes[d] == red)
                continue;   /* xs's features split as w's C: the partial products */
            char why[256];
            snprintf(why, sizeof why, "the MoE %s needs its dim %d whole (%s)",
                     ops.role[k] == WEIGHT ? "expert weights" : "rows'", d,
                     ops.role[k] == WEIGHT ? "the experts split only over axes that split "
                     "the rows too, their columns over axes that do not" : "features");
            TRY(mt__sneed_whole(r, k, ops.name[k], t, d, why));
        }
    }
    if (red && in[0].sharding.dim_axes[in[0].ndim - 1] != red) {   /* whole: its block */
        mt_type want = in[0];
        want.sharding.dim_axes[in[0].ndim - 1] = red;
        if (r->mode == MT_SHARD_EXPLICIT)
            return mt_fail(MT_ESHARDING, "%s: w's dim 1 (C) is split over %s, and xs %s must "
                           "have its features split alike; a reshard of xs to %s resolves it",
                           r->op, mt__saxes(r->mesh, red).s, mt__stype(r->mesh, &in[0]).s,
                           mt__stype(r->mesh, &want).s);
        TRY(mt__smove_to(r, 0, &in[0], &want));
    }
    mt_type res = {.dtype = MT_F32, .ndim = nlead + 1};
    for (int d = 0; d < nlead; d++) {
        res.shape[d] = ids->shape[d];
        res.sharding.dim_axes[d] = lead[d];
    }
    switch (call->op) {
    case MT_OP_MOE_ROUTE:
        res.dtype = MT_I32;
        res.shape[nlead] = call->p.moe.k;
        break;
    case MT_OP_MOE_GATES: res.shape[nlead] = ids->shape[nlead]; break;
    case MT_OP_MOE_CAPACITY:
        res.dtype = MT_I32;
        res.shape[nlead] = ids->shape[nlead];
        break;
    case MT_OP_MOE_DISPATCH:
        res.ndim = nlead + 2;
        res.shape[nlead] = ids->shape[nlead];
        res.shape[nlead + 1] = in[0].shape[nlead];
        break;
    case MT_OP_MOE_EXPERTS:
        res.ndim = nlead + 2;
        res.shape[nlead] = ids->shape[nlead];
        res.shape[nlead + 1] = in[1].shape[2];
        res.sharding.dim_axes[nlead + 1] = col;
        res.sharding.partial_axes = red;
        break;
    case MT_OP_MOE_COMBINE:
        res.shape[nlead] = in[0].shape[in[0].ndim - 1];
        res.sharding.partial_axes = passed;
        break;
    default: {   /* the router loss: a partial sum over the rows' axes */
        uint32_t axes = 0;
        for (int d = 0; d < nlead; d++) axes |= lead[d];
        res = (mt_type){.dtype = MT_F32, .ndim = 0, .sharding = {.partial_axes = axes}};
    }
    }
    r->out->result = res;
    return MT_OK;
}

/* ---- lowering: the op on a device's rows, with the global parameters ---- */

/* The experts split over axes (the rows split over them too, as the rule
 * checked): the product runs expert-parallel over their group, this
 * device's experts its block of w. */
static mt_tensor *lower_moe(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                            const mt_lower_env *e) {
    mt_moe_op_params p = c->p.moe;
    const uint32_t ep = c->op == MT_OP_MOE_EXPERTS ? e->types[1].sharding.dim_axes[0] : 0;
    if (ep) {
        p.ep = (mt_axes){0};
        for (int a = 0; a < MT_MESH_MAX_AXES; a++)
            if (ep & (1u << a)) p.ep.axis[p.ep.n++] = (uint8_t)a;
        p.ep_size = (int)(c->p.moe.E / in[1]->shape[0]);
    }
    return mt__moe_build(g, c->op, in, c->n_in, &p);
}

/* ---- the graph halves ------------------------------------------------------ */

/* The grouped products exchange their rows over the expert axis when their
 * experts are split over it (MT_COMM_MOE_EXCHANGE); the other ops never
 * communicate. */
#define MOE_GOP(name_, recomp_, comm_)                                                       \
    const mt_op_gdesc mt__gop_##name_ = {                                                    \
        .role = MT_ROLE_GLOBAL, .grad = grad_##name_, .shard = shard_moe,                    \
        .lower = lower_moe, .lower_moves = mt__lower_moves_generic, .recomp = recomp_,       \
        .comm = comm_,                                                                       \
    }
#define MOE_BWD(name_, comm_)                                                                \
    const mt_op_gdesc mt__gop_##name_ = {                                                    \
        .role = MT_ROLE_BACKWARD, .recomp = MT_RECOMP_NEVER, .comm = comm_,                  \
    }

/* the router's ids and loss are kept, never recomputed: T·k int32 and a
 * scalar a layer, read by the step's load count and loss (train/
 * moe_load.c) after the forward, and the routing decided once whatever the
 * remat policy */
MOE_GOP(moe_route, MT_RECOMP_NEVER, MT_COMM_NONE);
MOE_GOP(moe_gates, MT_RECOMP_LOCAL, MT_COMM_NONE);
MOE_GOP(moe_capacity, MT_RECOMP_NEVER, MT_COMM_NONE);   /* the drops decided once, as the ids */
MOE_GOP(moe_dispatch, MT_RECOMP_LOCAL, MT_COMM_NONE);
MOE_GOP(moe_experts, MT_RECOMP_DOT, MT_COMM_MOE_EXCHANGE);
MOE_GOP(moe_combine, MT_RECOMP_LOCAL, MT_COMM_NONE);
MOE_GOP(moe_router_loss, MT_RECOMP_NEVER, MT_COMM_NONE);
MOE_BWD(moe_gates_bwd, MT_COMM_NONE);
MOE_BWD(moe_dispatch_bwd, MT_COMM_NONE);
MOE_BWD(moe_experts_bwd_x, MT_COMM_MOE_EXCHANGE);
MOE_BWD(moe_experts_bwd_w, MT_COMM_MOE_EXCHANGE);
MOE_BWD(moe_combine_bwd_y, MT_COMM_NONE);
MOE_BWD(moe_combine_bwd_g, MT_COMM_NONE);
MOE_BWD(moe_router_loss_bwd, MT_COMM_NONE);
