/*
 * node.c — one global node partitioned (partition.c drives the pass): its
 * sharding rule on the inputs' global types, then the steps its op's
 * descriptor orders (graph/op_desc.h's mt_lower_services: operand moves,
 * pvary, lowering, result moves), and the messages of a refusal, which name
 * the op by what the user built (mt__call_label) and, for a parameter
 * stored split without its option, point at mt_partition_opts.gather_axes.
 */
#include "partition/partition_impl.h"

#include <stdio.h>
#include <string.h>

/* ---- the steps of a node (graph/op_desc.h's mt_lower_services) ---------------- */

static const char *op_name(const mt_lower_step *st) { return mt__op_def(st->call->op)->name; }

static mt_status step_failed(void *ctx, const mt_lower_step *st) {
    return mt__part_local_failed(ctx, op_name(st));
}

static mt_status step_operand_moves(void *ctx, mt_lower_step *st, int skip) {
    partitioner *p = ctx;
    const mt_shard_result *r = st->rule;
    for (; st->next < r->n_moves && r->moves[st->next].operand >= 0; st->next++) {
        const mt_move *mv = &r->moves[st->next];
        int k = mv->operand;
        st->types[k] = mv->after;
        if (st->next == skip) continue;
        bool varying = mt__lower_gather_varies(mv, st->vary[k], mt__lower_meets(st, k));
        st->in[k] = mt__part_apply_move(p, st->in[k], mv, varying);
        st->vary[k] = mt__lower_vary_after(st->vary[k], mv, varying);
        if (!st->in[k]) return step_failed(p, st);
    }
    return MT_OK;
}

static mt_status step_inside_moves(void *ctx, mt_lower_step *st, bool accept) {
    const mt_shard_result *r = st->rule;
    (void)ctx;
    for (; st->next < r->n_moves && r->moves[st->next].operand == MT_MOVE_INSIDE; st->next++) {
        if (!accept)
            return mt_fail(MT_EUNSUPPORTED, "partition: %s -> '%s' needs a collective inside "
                           "the op (%s over its split dim), which only an op whose lowering runs "
                           "it does (the cross-entropy's statistics; layernorm's come with "
                           "sequence parallelism); keep that dim whole", op_name(st),
                           st->call->out->name, mt_move_name(r->moves[st->next].kind));
        st->inside |= r->moves[st->next].axes;
    }
    return MT_OK;
}

static mt_status step_pvary_inputs(void *ctx, mt_lower_step *st) {
    uint32_t all = 0;
    for (int k = 0; k < st->n_in; k++) all |= st->vary[k];
    for (int k = 0; k < st->n_in; k++)
        if (!(st->in[k] = mt__part_pvary_input(ctx, st->call->in[k], st->in[k], st->vary[k], all)))
            return step_failed(ctx, st);
    return MT_OK;
}

/* This device's first index of a dim of `global` size split over `axes`. */
static int64_t block_start(partitioner *p, uint32_t axes, int64_t local) {
    return axes ? (int64_t)mt_axis_index(p->ctx, mt__part_axes_of(p->mesh, axes)) * local : 0;
}

/* block_start for a lowering (mt_lower_env.start). */
static int64_t lower_start(void *ctx, uint32_t set, int64_t local) {
    return block_start(ctx, set, local);
}

/* The op rebuilt on the local inputs by its lowering (graph/lower.c, named
 * by its descriptor), on the first n_in of them. */
static mt_status step_lower(void *ctx, mt_lower_step *st) {
    partitioner *p = ctx;
    mt_lower_fn lower = p->lower_variant[st->call->op] ? p->lower_variant[st->call->op]
                                                       : mt__op_gdesc(st->call->op)->lower;
    if (!lower) {
        mt_graph_fail(p->lg, MT_EUNSUPPORTED, "op '%s' cannot be partitioned yet", op_name(st));
        return step_failed(p, st);
    }
    mt_op_call c = *st->call;
    c.n_in = st->n_in;
    mt_lower_env e = {.types = st->types, .inside = st->inside, .start = lower_start, .ctx = p,
                      .headtail = p->headtail};
    if (st->inside) e.inside_axes = mt__part_axes_of(p->mesh, st->inside);
    if (!(st->out = lower(p->lg, &c, st->in, &e))) return step_failed(p, st);
    st->type = st->rule->result;
    st->out_vary = mt__lower_vary(st);
    return MT_OK;
}

/* a move on a result: it meets nothing yet, so a gather is the invariant kind */
static mt_tensor *step_move(void *ctx, mt_tensor *x, const mt_move *mv, uint32_t *vary) {
    mt_tensor *y = mt__part_apply_move(ctx, x, mv, false);
    *vary = mt__lower_vary_after(*vary, mv, false);
    return y;
}

static mt_status step_result_moves(void *ctx, mt_lower_step *st) {
    for (; st->next < st->rule->n_moves; st->next++)
        if (!(st->out = step_move(ctx, st->out, &st->rule->moves[st->next], &st->out_vary)))
            return step_failed(ctx, st);
    return MT_OK;
}

static mt_status step_constrain(void *ctx, mt_lower_step *st) {
    mt_move scatter;
    if (!st->type.sharding.partial_axes ||
        !mt__part_constraint_scatter(ctx, st->call->out, &st->type,
                                     st->type.sharding.partial_axes, &scatter))
        return MT_OK;
    if (!(st->out = mt__part_apply_move(ctx, st->out, &scatter, false)))
        return step_failed(ctx, st);
    st->type = scatter.after;
    return MT_OK;
}

static mt_tensor *service_pvary(void *ctx, const mt_tensor *global_in, mt_tensor *x,
                                uint32_t vary, uint32_t want) {
    return mt__part_pvary_input(ctx, global_in, x, vary, want);
}

static bool service_constraint_scatter(void *ctx, const mt_lower_step *st, const mt_type *t,
                                       uint32_t axes, mt_move *mv) {
    return mt__part_constraint_scatter(ctx, st->call->out, t, axes, mv);
}

static mt_axes service_axes(void *ctx, uint32_t bits) {
    return mt__part_axes_of(((partitioner *)ctx)->mesh, bits);
}

/* ---- nodes ------------------------------------------------------------------ */

/* The rule's result for call c on the inputs' global types. */
static mt_status node_rule(partitioner *p, const mt_op_call *c, const mt_type *types,
                           mt_shard_result *res) {
    mt_status s = mt__shard_rule(p->mesh, c, types, p->mode, res);
    if (s == MT_ESHARDING && p->mode == MT_SHARD_EXPLICIT && p->only_resharded[c->out->id]) {
        /* explicit mode: a result that only reshards read may stay ambiguous
         * (a partial sum): the reshard decides it, as in JAX's out_sharding */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", mt_errmsg());
        s = mt__shard_rule(p->mesh, c, types, MT_SHARD_AUTO, res);
        bool operands_moved = res->n_moves > 0 && res->moves[0].operand >= 0;
        if (s == MT_OK && operands_moved) s = mt_fail(MT_ESHARDING, "%s", msg);
    }
    if (s != MT_OK) {
        char what[256], hint[512] = "";
        /* a parameter stored split over an axis that also splits another
         * operand's batch (dim 0), and not gathered before use: FSDP's
         * layout, and the likely slip is its missing option, not a reshard */
        uint32_t batch = 0;
        for (int k = 0; k < c->n_in; k++)
            if (c->in[k]->kind != MT_PARAM && types[k].ndim > 0)
                batch |= types[k].sharding.dim_axes[0];
        for (int k = 0; k < c->n_in && !hint[0]; k++) {
            const mt_tensor *t = c->in[k];
            while (t->view_of) t = t->view_of;
            uint32_t stored = mt__part_split_axes(&types[k]) & ~p->gather_axes & batch;
            if (t->kind != MT_PARAM || !stored) continue;
            char ax[64] = "";
            for (int a = 0; a < mt_mesh_ndim(p->mesh); a++)
                if (stored & (1u << a) && strlen(ax) + strlen(mt_mesh_axis_name(p->mesh, a)) + 2 <
                                              sizeof ax) {
                    if (ax[0]) strcat(ax, ",");
                    strcat(ax, mt_mesh_axis_name(p->mesh, a));
                }
            snprintf(hint, sizeof hint, "; if parameter '%.64s' is stored split over '%.63s' to "
                     "be gathered whole before use (FSDP, ZeRO-3), say so: "
                     "mt_partition_opts.gather_axes (mt_mesh_axis_set(mesh, \"%.63s\", "
                     "&opts.gather_axes))", t->name, ax, ax);
        }
        return mt__part_fail(p, s, "partition: %s: %s%s",
                             mt__call_label(p->global, c, what, sizeof what), mt_errmsg(), hint);
    }
    return MT_OK;
}

/* One global node: rule -> moves -> lower -> moves, in the order and with
 * the variations its op's descriptor names (mt_lower_moves_fn; most ops the
 * generic order), then its slot. */
mt_status mt__part_partition_node(partitioner *p, const mt_op_call *c) {
    mt_lower_step st = {.call = c, .n_in = c->n_in};
    mt_status s;
    for (int k = 0; k < c->n_in; k++) {
        if ((s = mt__part_use_slot(p, c->in[k])) != MT_OK) return s;
        const slot *sl = &p->slots[c->in[k]->id];
        st.types[k] = sl->type;
        st.in[k] = sl->local;
        st.vary[k] = sl->vary;
    }
    mt_shard_result res;
    if ((s = node_rule(p, c, st.types, &res)) != MT_OK) return s;
    st.rule = &res;
    const mt_lower_services sv = {
        .ctx = p, .operand_moves = step_operand_moves, .inside_moves = step_inside_moves,
        .pvary_inputs = step_pvary_inputs, .lower = step_lower,
        .result_moves = step_result_moves, .constrain = step_constrain, .move = step_move,
        .pvary = service_pvary, .constraint_scatter = service_constraint_scatter,
        .axes = service_axes, .failed = step_failed};
    const char *name = mt__op_def(c->op)->name;
    mt_lower_moves_fn lower_moves = p->lowering[c->op] ? p->lowering[c->op]
                                                       : mt__op_gdesc(c->op)->lower_moves;
    if (!lower_moves)
        return mt__part_fail(p, MT_EUNSUPPORTED, "partition: op '%s' -> '%s' cannot be "
                             "partitioned yet (its descriptor has no lowering)", name,
                             c->out->name);
    if ((s = lower_moves(p->lg, &st, &sv)) != MT_OK) return s;
    if (!st.out || st.next != res.n_moves)
        return mt__part_fail(p, MT_EINTERNAL, "partition: %s -> '%s': its lowering left %d of "
                             "the rule's %d moves neither run nor taken", name, c->out->name,
                             res.n_moves - st.next, res.n_moves);
    mt_tensor *out = st.out;
    const mt_type ty = st.type;
    /* the builders derived the local shape; it must be the type's */
    int64_t want[MT_MAX_DIMS] = {0};
    if ((s = mt_type_local_shape(p->mesh, &ty, want)) != MT_OK)
        return mt__part_fail(p, MT_ESHARDING, "partition: %s: %s",
                             mt__call_label(p->global, c, (char[256]){0}, 256), mt_errmsg());
    bool same = out->ndim == ty.ndim;
    for (int d = 0; same && d < ty.ndim; d++) same = out->shape[d] == want[d];
    if (!same) {
        char b1[64], b2[128];
        mt_type_format(p->mesh, &ty, b2, sizeof b2);
        return mt__part_fail(p, MT_EINTERNAL, "partition: %s -> '%s' built the local shape %s, "
                             "but its type %s needs another", name, c->out->name,
                             mt__shape_str(out, b1, sizeof b1), b2);
    }
    /* a lowering that gave back an input unmoved (a reshard that moved
     * nothing) made no tensor: that one keeps its name */
    bool made = true;
    for (int k = 0; k < c->n_in; k++) made &= out != p->slots[c->in[k]->id].local;
    if (made) {
        mt_tensor_set_name(out, c->out->name);
        out->sharding = ty.sharding;
    }
    slot *sl = &p->slots[c->out->id];
    sl->local = out;
    sl->type = ty;
    sl->vary = st.out_vary;
    return MT_OK;
}
