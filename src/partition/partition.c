/*
 * partition.c — the partitioner: a global program (global shapes, shardings
 * on its leaves) becomes the calling device's program (local shapes, with
 * the collectives its types require), as GSPMD does.
 *
 * One pass over the global forward nodes, in order. Every global tensor gets
 * a slot: its local twin in the new graph, its global type (shape, sharding,
 * partial sums) and the axes over which its value differs between devices
 * ("varying", as in JAX's shard_map). For each node, rule -> moves -> lower
 * -> moves:
 *   1. the op's sharding rule (graph/shard_rules.h) reads the input types and
 *      says the result type and the moves; operand moves become collective
 *      nodes on the local inputs;
 *   2. an input that needs a gradient and is the same on every device of an
 *      axis over which the others vary gets a pvary node over that axis: its
 *      gradient is then a partial sum, reduced in the W phase (the
 *      data-parallel all-reduce of a replicated parameter's gradient);
 *   3. the op is rebuilt on the local inputs by its lowering (graph/lower.c,
 *      which derives every op parameter from the local shapes), and the
 *      result moves follow it; under sequence parallelism a result kept a
 *      partial sum is reduce-scattered onto its rows.
 * The steps are services here; the op's descriptor names the hook that runs
 * them (graph/op_desc.h, mt_lower_moves_fn): most ops the generic order, the
 * few that decide what happens to the moves around them their own (linear:
 * late bias, collective matmul; cross-entropy: collectives inside). The loop
 * names no op.
 * The loss, a partial sum over the axes that split the batch, is reduced
 * last, so every device's loss is the global loss.
 */
#include "graph/op_desc.h"
#include "graph/shard_rules.h"
#include "mesh/mesh_impl.h"
#include "meshtrain/partition.h"

#include <stdarg.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

/* What the partitioner knows about one global tensor. */
typedef struct {
    mt_tensor *local;        /* its twin in the device's graph; NULL: not made yet */
    mt_type    type;         /* global type */
    uint32_t   vary;         /* mesh axes over which the local value differs */
    mt_tensor *pvaried;      /* local after a pvary over pvary_axes (cached) */
    uint32_t   pvary_axes;
    bool       to_gather;    /* a stored-split parameter not yet gathered (FSDP) */
    mt_tensor *prefetch;     /* the stored-split parameter first read after this one */
} slot;

typedef struct {
    mt_graph      *global, *lg;
    mt_ctx        *ctx;
    uint32_t       gather_axes;      /* opts->gather_axes */
    uint32_t       gather_invariant; /* opts->gather_allreduce_axes */
    uint32_t       seq_axes;         /* opts->sequence_axes */
    bool           coll_matmul;      /* opts->collective_matmul (with seq_axes) */
    bool           regather;         /* opts->reshard_after_forward */
    uint8_t       *only_resharded;   /* (n_tensors) read, and only by reshard nodes */
    const mt_mesh *mesh;
    mt_shard_mode  mode;
    bool           skip_pvary;   /* opts->test_skip_grad_reduction */
    slot          *slots;    /* (global->n_tensors) by tensor id */
} partitioner;

/* ---- small helpers -------------------------------------------------------- */

/* The axes of a bit set, in mesh order (major first). */
static mt_axes axes_of(const mt_mesh *mesh, uint32_t bits) {
    mt_axes ax = {0};
    for (int a = 0; a < mesh->ndim; a++)
        if (bits & (1u << a)) ax.axis[ax.n++] = (uint8_t)a;
    return ax;
}

/* Devices along the axes of a bit set. */
static int64_t axes_size(const mt_mesh *mesh, uint32_t bits) {
    int64_t n = 1;
    for (int a = 0; a < mesh->ndim; a++)
        if (bits & (1u << a)) n *= mesh->sizes[a];
    return n;
}

static uint32_t split_axes(const mt_type *t) {
    uint32_t bits = 0;
    for (int d = 0; d < t->ndim; d++) bits |= t->sharding.dim_axes[d];
    return bits;
}

static mt_type type_of(const mt_tensor *t) {
    mt_type ty = {.dtype = t->dtype, .ndim = t->ndim, .sharding = t->sharding};
    memcpy(ty.shape, t->shape, sizeof ty.shape);
    return ty;
}

/* Records a partition error in mt_errmsg() (the calling device's) and
 * returns the code. The global graph is left as it was: device threads read
 * it at once (partition.h), and a refused partition may be retried on it
 * (e.g. in auto mode after explicit mode refused). */
static mt_status fail(partitioner *p, mt_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static mt_status fail(partitioner *p, mt_status code, const char *fmt, ...) {
    (void)p;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);   /* before mt_fail: an argument may be mt_errmsg() */
    va_end(ap);
    return mt_fail(code, "%s", msg);
}

/* The local graph's error as the partitioner's. */
static mt_status local_failed(partitioner *p, const char *what) {
    mt_status s = mt_graph_status(p->lg);
    if (s == MT_OK) s = MT_EINTERNAL;
    return fail(p, s, "partition: %s: %s", what, mt_graph_errmsg(p->lg));
}

/* Names a tensor the partitioner made after what it did to `src`:
 * "all-gather(h.0.fc.w)" (op outputs keep their global names). */
static void name_after(mt_tensor *t, const char *what, const mt_tensor *src) {
    char name[MT_MAX_NAME];
    snprintf(name, sizeof name, "%s(%.*s)", what, (int)(MT_MAX_NAME - 16), src->name);
    mt_tensor_set_name(t, name);
}

/* Sequence parallelism: a gather over the sequence axes of a value that
 * differs over them (its rows split, each device's own) is the varying
 * kind: the gathered rows meet a column-parallel weight, whose product's
 * input gradient is a partial sum over those axes, and the gather's
 * transpose reduce-scatters it back onto the rows. */
static bool sequence_gather(const partitioner *p, const mt_move *mv, uint32_t vary) {
    return mv->kind == MT_MOVE_ALL_GATHER && p->seq_axes && !(mv->axes & ~p->seq_axes) &&
           (vary & mv->axes) == mv->axes;
}

/* Runs one move on a local tensor whose value varies over `vary`: the
 * collective node (or local slice). */
static mt_tensor *apply_move(partitioner *p, mt_tensor *x, const mt_move *mv, uint32_t vary) {
    mt_axes ax = axes_of(p->mesh, mv->axes);
    mt_tensor *y = NULL;
    switch (mv->kind) {
    /* a gathered value is the same on every device and counts once, but
     * for sequence parallelism's */
    case MT_MOVE_ALL_GATHER:
        y = sequence_gather(p, mv, vary) ? mt_graph_all_gather(p->lg, x, ax, mv->dim)
                                         : mt_graph_all_gather_invariant(p->lg, x, ax, mv->dim);
        break;
    case MT_MOVE_ALL_REDUCE:     y = mt_graph_psum(p->lg, x, ax); break;
    case MT_MOVE_REDUCE_SCATTER: y = mt_graph_psum_scatter(p->lg, x, ax, mv->dim); break;
    /* the axes leave dim (made whole by concatenating) and split dim2 */
    case MT_MOVE_ALL_TO_ALL:     y = mt_graph_all_to_all(p->lg, x, ax, mv->dim2, mv->dim); break;
    case MT_MOVE_SLICE:          y = mt_graph_slice(p->lg, x, ax, mv->dim); break;
    }
    if (y) {
        y->sharding = mv->after.sharding;   /* its type, for listings (explain) */
        name_after(y, mt_move_name(mv->kind), x);
    }
    return y;
}

/* How the varying axes change through a move. */
static uint32_t vary_after(const partitioner *p, uint32_t vary, const mt_move *mv) {
    switch (mv->kind) {
    case MT_MOVE_ALL_REDUCE: return vary & ~mv->axes;   /* the sum is the same everywhere */
    case MT_MOVE_ALL_GATHER:                            /* so is the gathered whole */
        return sequence_gather(p, mv, vary) ? vary : vary & ~mv->axes;
    case MT_MOVE_SLICE:      return vary | mv->axes;    /* each device keeps its own block */
    default:                 return vary;
    }
}

/* ---- leaves and views ------------------------------------------------------ */

/* FSDP: a parameter stored split over gather axes is gathered whole over
 * them once, before its first use. The gather is the varying kind: the
 * gathered copy meets data split over the same axes, and its gradient is
 * reduce-scattered back onto the shard. The optimizer sees the shard. */
static mt_status gather_param(partitioner *p, mt_tensor *t) {
    slot *sl = &p->slots[t->id];
    mt_tensor *x = sl->local;
    for (int d = 0; d < t->ndim && x; d++) {
        uint32_t ax = t->sharding.dim_axes[d] & p->gather_axes;
        if (!ax) continue;
        /* gathering the minor axes of a dim leaves the major ones' blocks
         * whole; gathering major ones would interleave the blocks */
        uint32_t other = t->sharding.dim_axes[d] & ~ax;
        if (other && 31 - __builtin_clz(other) > __builtin_ctz(ax))
            return fail(p, MT_ESHARDING, "partition: parameter '%s': dim %d is split over the "
                        "gathered axes and, minor to them, over others; split it over the "
                        "gathered axes on a dim of its own, or make them minor", t->name, d);
        /* ZeRO-1's gather counts once: its gradient is all-reduced (the pvary
         * the partitioner adds where it meets the batch) and sliced */
        bool invariant = (ax & p->gather_invariant) != 0;
        if (invariant && (ax & ~p->gather_invariant))
            return fail(p, MT_ESHARDING, "partition: parameter '%s': dim %d is gathered over "
                        "axes of both kinds (all-reduced and reduce-scattered gradients)",
                        t->name, d);
        mt_tensor *y = invariant ? mt_graph_all_gather_invariant(p->lg, x, axes_of(p->mesh, ax), d)
                                 : mt_graph_all_gather(p->lg, x, axes_of(p->mesh, ax), d);
        if (y) {
            sl->type.sharding.dim_axes[d] &= ~ax;
            y->sharding = sl->type.sharding;
            name_after(y, "all-gather", sl->local);
            if (invariant) sl->vary &= ~ax;
            /* FSDP: the backward gathers it again (the last gather of the
             * parameter's dims: the whole value) */
            y->regather = p->regather && !invariant;
            if (x != sl->local) x->regather = false;
            /* prefetched (use_slot emits it one parameter ahead): the
             * executor starts it and completes it before its first reader */
            mt_node *made = &p->lg->nodes[p->lg->n_nodes - 1];
            if (made->call.out == y) made->call.p.coll.async = true;
        }
        x = y;
    }
    if (!x) return local_failed(p, t->name);
    sl->local = x;   /* a varying gather keeps its axes in the vary set */
    return MT_OK;
}

static mt_status make_slot(partitioner *p, mt_tensor *t);
static mt_status use_slot(partitioner *p, mt_tensor *t);

static mt_status make_leaf(partitioner *p, mt_tensor *t) {
    slot *sl = &p->slots[t->id];
    sl->type = type_of(t);
    int64_t local[MT_MAX_DIMS] = {0};
    if (mt_type_local_shape(p->mesh, &sl->type, local) != MT_OK)
        return fail(p, MT_ESHARDING, "partition: '%s': %s", t->name, mt_errmsg());
    switch (t->kind) {
    case MT_INPUT:
        sl->local = mt_input(p->lg, t->name, t->dtype, t->ndim, local);
        /* a pipeline stage's input: its gradient goes back to the stage before */
        if (sl->local && t->needs_grad && mt_input_set_needs_grad(sl->local) != MT_OK)
            return fail(p, MT_EINTERNAL, "partition: '%s': %s", t->name, mt_errmsg());
        break;
    case MT_CONST: sl->local = mt_constant(p->lg, t->name, t->dtype, t->ndim, local); break;
    case MT_PARAM:
        sl->local = mt_param(p->lg, t->name, t->ndim, local, t->init);
        if (sl->local && split_axes(&sl->type)) {
            /* a shard: this device's block of the global tensor */
            mt_tensor *x = sl->local;
            x->is_shard = true;
            for (int d = 0; d < t->ndim; d++) {
                x->global_shape[d] = t->shape[d];
                uint32_t ax = t->sharding.dim_axes[d];
                x->shard_offset[d] = ax ? (int64_t)mt_axis_index(p->ctx, axes_of(p->mesh, ax)) *
                                              local[d] : 0;
            }
        }
        break;
    default:
        return fail(p, MT_EINTERNAL, "partition: '%s' is used before the op that makes it",
                    t->name);
    }
    if (!sl->local) return local_failed(p, t->name);
    sl->local->sharding = t->sharding;
    sl->vary = split_axes(&sl->type);
    /* the local graph's types (device variance) agree with the slots', so its
     * builders insert no pvary of their own (the test knob leaves them
     * undeclared: it skips the gradient reductions on purpose) */
    if (!p->skip_pvary && mt_tensor_set_varying(sl->local, axes_of(p->mesh, sl->vary)) != MT_OK)
        return fail(p, MT_EINTERNAL, "partition: '%s': %s", t->name, mt_errmsg());
    /* gathered at its first use (one layer's parameters at a time), not here */
    sl->to_gather = t->kind == MT_PARAM && (split_axes(&sl->type) & p->gather_axes);
    return MT_OK;
}

static mt_status make_view(partitioner *p, mt_tensor *t) {
    mt_status s = use_slot(p, t->view_of);
    if (s != MT_OK) return s;
    slot *src = &p->slots[t->view_of->id], *sl = &p->slots[t->id];
    mt_shard_result res;
    if ((s = mt__shard_reshape(p->mesh, &src->type, t->ndim, t->shape, p->mode, &res)) != MT_OK)
        return fail(p, s, "partition: reshape to '%s': %s", t->name, mt_errmsg());
    mt_tensor *x = src->local;
    uint32_t vary = src->vary;
    for (int i = 0; i < res.n_moves && x; i++) {
        x = apply_move(p, x, &res.moves[i], vary);
        vary = vary_after(p, vary, &res.moves[i]);
    }
    int64_t local[MT_MAX_DIMS] = {0};
    if ((s = mt_type_local_shape(p->mesh, &res.result, local)) != MT_OK)
        return fail(p, MT_ESHARDING, "partition: reshape to '%s': %s", t->name, mt_errmsg());
    sl->local = x ? mt_reshape(p->lg, x, t->ndim, local) : NULL;
    if (!sl->local) return local_failed(p, t->name);
    sl->local->sharding = res.result.sharding;
    sl->type = res.result;
    sl->vary = vary;
    return MT_OK;
}

/* Makes the slot of a tensor read by a node: a leaf or a view on first use;
 * an op output already has one. */
static mt_status make_slot(partitioner *p, mt_tensor *t) {
    if (p->slots[t->id].local) return MT_OK;
    return t->view_of ? make_view(p, t) : make_leaf(p, t);
}

/* The slot of a tensor an op reads: made, and a stored-split parameter
 * gathered whole, just before its first reader. */
static mt_status use_slot(partitioner *p, mt_tensor *t) {
    mt_status s = make_slot(p, t);
    if (s != MT_OK || !p->slots[t->id].to_gather) return s;
    p->slots[t->id].to_gather = false;
    if ((s = gather_param(p, t)) != MT_OK) return s;
    /* prefetch: the next parameter's gather goes right after this one's, so
     * that it travels while this parameter's readers run */
    mt_tensor *next = p->slots[t->id].prefetch;
    if (!next || !p->slots[next->id].to_gather) return MT_OK;
    p->slots[next->id].to_gather = false;
    return gather_param(p, next);
}

/* Links every stored-split parameter to the one the forward first reads
 * after it (slot.prefetch). */
static void plan_prefetch(partitioner *p) {
    mt_tensor *prev = NULL;
    uint8_t *seen = calloc((size_t)p->global->n_tensors, 1);
    if (!seen) return;   /* no prefetch: gathers at first use */
    for (int i = 0; i < p->global->n_forward; i++) {
        const mt_op_call *c = &p->global->nodes[i].call;
        for (int k = 0; k < c->n_in; k++) {
            mt_tensor *t = c->in[k];
            if (t->kind != MT_PARAM || seen[t->id] || !p->slots[t->id].to_gather) continue;
            seen[t->id] = 1;
            if (prev) p->slots[prev->id].prefetch = t;
            prev = t;
        }
    }
    free(seen);
}

/* Sequence parallelism: when the partial sums over `axes` of an activation
 * of type *t (B,T,...) may be reduce-scattered onto T (the axes are
 * sequence axes, all of t's partial ones; T whole and divisible), sets *mv
 * to that move (t's partial sums over `axes` reduced, T split) and says so. */
static bool sequence_scatter(const partitioner *p, const mt_type *t, uint32_t axes, mt_move *mv) {
    if (!p->seq_axes || !axes || (axes & ~p->seq_axes) || t->ndim < 3 ||
        t->sharding.dim_axes[1] || t->shape[1] % axes_size(p->mesh, axes) != 0)
        return false;
    mt_type after = *t;
    after.sharding.partial_axes &= ~axes;
    if (after.sharding.partial_axes) return false;
    after.sharding.dim_axes[1] = axes;
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
    *mv = (mt_move){.kind = MT_MOVE_REDUCE_SCATTER, .operand = MT_MOVE_RESULT, .dim = 1,
                    .dim2 = -1, .axes = axes, .before = *t, .after = after,
                    .bytes = numel / axes_size(p->mesh, split_axes(t)) *
                             (int64_t)mt_dtype_size(t->dtype)};
    return true;
}

/* Gives input k a pvary over the axes the op's other inputs vary over and it
 * does not, when a gradient flows back to it (once per tensor and axes). */
static mt_tensor *pvary_input(partitioner *p, const mt_tensor *global_in, mt_tensor *x,
                              uint32_t vary, uint32_t want) {
    uint32_t missing = want & ~vary;
    /* nothing differs over an axis of one device: its gradient needs no sum */
    for (int a = 0; a < p->mesh->ndim; a++)
        if (p->mesh->sizes[a] == 1) missing &= ~(1u << a);
    if (!missing || !x->needs_grad || p->skip_pvary) return x;
    slot *sl = &p->slots[global_in->id];
    if (x == sl->local && sl->pvaried && sl->pvary_axes == missing) return sl->pvaried;
    mt_tensor *y = mt_graph_pvary(p->lg, x, axes_of(p->mesh, missing));
    if (y) {
        y->sharding = x->sharding;
        name_after(y, "pvary", x);
    }
    if (y && x == sl->local) {
        sl->pvaried = y;
        sl->pvary_axes = missing;
    }
    return y;
}

/* ---- the steps of a node (graph/op_desc.h's mt_lower_services) ---------------- */

static const char *op_name(const mt_lower_step *st) { return mt__op_def(st->call->op)->name; }

static mt_status step_failed(void *ctx, const mt_lower_step *st) {
    return local_failed(ctx, op_name(st));
}

static mt_status step_operand_moves(void *ctx, mt_lower_step *st, int skip) {
    partitioner *p = ctx;
    const mt_shard_result *r = st->rule;
    for (; st->next < r->n_moves && r->moves[st->next].operand >= 0; st->next++) {
        const mt_move *mv = &r->moves[st->next];
        int k = mv->operand;
        st->types[k] = mv->after;
        if (st->next == skip) continue;
        st->in[k] = apply_move(p, st->in[k], mv, st->vary[k]);
        st->vary[k] = vary_after(p, st->vary[k], mv);
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
        if (!(st->in[k] = pvary_input(ctx, st->call->in[k], st->in[k], st->vary[k], all)))
            return step_failed(ctx, st);
    return MT_OK;
}

/* This device's first index of a dim of `global` size split over `axes`. */
static int64_t block_start(partitioner *p, uint32_t axes, int64_t local) {
    return axes ? (int64_t)mt_axis_index(p->ctx, axes_of(p->mesh, axes)) * local : 0;
}

/* block_start for a lowering (mt_lower_env.start). */
static int64_t lower_start(void *ctx, uint32_t set, int64_t local) {
    return block_start(ctx, set, local);
}

/* The op rebuilt on the local inputs by its lowering (graph/lower.c, named
 * by its descriptor), on the first n_in of them. */
static mt_status step_lower(void *ctx, mt_lower_step *st) {
    partitioner *p = ctx;
    mt_lower_fn lower = mt__op_gdesc(st->call->op)->lower;
    if (!lower) {
        mt_graph_fail(p->lg, MT_EUNSUPPORTED, "op '%s' cannot be partitioned yet", op_name(st));
        return step_failed(p, st);
    }
    mt_op_call c = *st->call;
    c.n_in = st->n_in;
    mt_lower_env e = {.types = st->types, .inside = st->inside, .start = lower_start, .ctx = p};
    if (st->inside) e.inside_axes = axes_of(p->mesh, st->inside);
    if (!(st->out = lower(p->lg, &c, st->in, &e))) return step_failed(p, st);
    st->type = st->rule->result;
    st->out_vary = mt__lower_vary(st);
    return MT_OK;
}

static mt_tensor *step_move(void *ctx, mt_tensor *x, const mt_move *mv, uint32_t *vary) {
    mt_tensor *y = apply_move(ctx, x, mv, *vary);
    *vary = vary_after(ctx, *vary, mv);
    return y;
}

static mt_status step_result_moves(void *ctx, mt_lower_step *st) {
    for (; st->next < st->rule->n_moves; st->next++)
        if (!(st->out = step_move(ctx, st->out, &st->rule->moves[st->next], &st->out_vary)))
            return step_failed(ctx, st);
    return MT_OK;
}

static mt_status step_keep_partial(void *ctx, mt_lower_step *st) {
    mt_move scatter;
    if (!st->type.sharding.partial_axes ||
        !sequence_scatter(ctx, &st->type, st->type.sharding.partial_axes, &scatter))
        return MT_OK;
    if (!(st->out = apply_move(ctx, st->out, &scatter, st->out_vary))) return step_failed(ctx, st);
    st->type = scatter.after;
    return MT_OK;
}

static mt_tensor *service_pvary(void *ctx, const mt_tensor *global_in, mt_tensor *x,
                                uint32_t vary, uint32_t want) {
    return pvary_input(ctx, global_in, x, vary, want);
}

static bool service_sequence_gather(void *ctx, const mt_move *mv, uint32_t vary) {
    return sequence_gather(ctx, mv, vary);
}

static bool service_sequence_scatter(void *ctx, const mt_type *t, uint32_t axes, mt_move *mv) {
    return sequence_scatter(ctx, t, axes, mv);
}

static mt_axes service_axes(void *ctx, uint32_t bits) {
    return axes_of(((partitioner *)ctx)->mesh, bits);
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
            uint32_t stored = split_axes(&types[k]) & ~p->gather_axes & batch;
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
        return fail(p, s, "partition: %s: %s%s", mt__call_label(p->global, c, what, sizeof what),
                    mt_errmsg(), hint);
    }
    return MT_OK;
}

/* One global node: rule -> moves -> lower -> moves, in the order and with
 * the variations its op's descriptor names (mt_lower_moves_fn; most ops the
 * generic order), then its slot. */
static mt_status partition_node(partitioner *p, const mt_op_call *c) {
    mt_lower_step st = {.call = c, .n_in = c->n_in};
    mt_status s;
    for (int k = 0; k < c->n_in; k++) {
        if ((s = use_slot(p, c->in[k])) != MT_OK) return s;
        const slot *sl = &p->slots[c->in[k]->id];
        st.types[k] = sl->type;
        st.in[k] = sl->local;
        st.vary[k] = sl->vary;
    }
    mt_shard_result res;
    if ((s = node_rule(p, c, st.types, &res)) != MT_OK) return s;
    st.rule = &res;
    const mt_lower_services sv = {
        .ctx = p, .seq_axes = p->seq_axes, .coll_matmul = p->coll_matmul,
        .operand_moves = step_operand_moves, .inside_moves = step_inside_moves,
        .pvary_inputs = step_pvary_inputs, .lower = step_lower,
        .result_moves = step_result_moves, .keep_partial = step_keep_partial,
        .move = step_move, .pvary = service_pvary, .sequence_gather = service_sequence_gather,
        .sequence_scatter = service_sequence_scatter, .axes = service_axes,
        .failed = step_failed};
    const char *name = mt__op_def(c->op)->name;
    mt_lower_moves_fn lower_moves = mt__op_gdesc(c->op)->lower_moves;
    if (!lower_moves)
        return fail(p, MT_EUNSUPPORTED, "partition: op '%s' -> '%s' cannot be partitioned yet "
                    "(its descriptor has no lowering)", name, c->out->name);
    if ((s = lower_moves(p->lg, &st, &sv)) != MT_OK) return s;
    if (!st.out || st.next != res.n_moves)
        return fail(p, MT_EINTERNAL, "partition: %s -> '%s': its lowering left %d of the rule's "
                    "%d moves neither run nor taken", name, c->out->name, res.n_moves - st.next,
                    res.n_moves);
    mt_tensor *out = st.out;
    const mt_type ty = st.type;
    /* the builders derived the local shape; it must be the type's */
    int64_t want[MT_MAX_DIMS] = {0};
    if ((s = mt_type_local_shape(p->mesh, &ty, want)) != MT_OK)
        return fail(p, MT_ESHARDING, "partition: %s: %s",
                    mt__call_label(p->global, c, (char[256]){0}, 256), mt_errmsg());
    bool same = out->ndim == ty.ndim;
    for (int d = 0; same && d < ty.ndim; d++) same = out->shape[d] == want[d];
    if (!same) {
        char b1[64], b2[128];
        mt_type_format(p->mesh, &ty, b2, sizeof b2);
        return fail(p, MT_EINTERNAL, "partition: %s -> '%s' built the local shape %s, but its "
                    "type %s needs another", name, c->out->name, mt__shape_str(out, b1, sizeof b1),
                    b2);
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

/* ---- the entry points ---------------------------------------------------------- */

mt_type mt_tensor_global_type(const mt_tensor *t, const mt_mesh *mesh) {
    mt_type ty = type_of(t);
    if (t->is_shard || t->has_global) {   /* a slot of mt_partition's: its recorded shape */
        for (int d = 0; d < t->ndim; d++) ty.shape[d] = t->global_shape[d];
        return ty;
    }
    /* a tensor of an unpartitioned graph is its own global type, sharding
     * or not; one the partitioner made between slots, local times its axes */
    if (!t->graph || !t->graph->partitioned) return ty;
    for (int d = 0; d < t->ndim; d++)
        for (int a = 0; a < mesh->ndim; a++)
            if (t->sharding.dim_axes[d] & (1u << a)) ty.shape[d] *= mesh->sizes[a];
    return ty;
}

mt_status mt_tensor_set_sharding(mt_tensor *t, const mt_sharding *sh) {
    if (!t || !sh) return mt_fail(MT_EINVAL, "mt_tensor_set_sharding: tensor or sharding is NULL");
    if (t->kind != MT_INPUT && t->kind != MT_PARAM && t->kind != MT_CONST)
        return mt_fail(MT_EINVAL, "'%s' is an op's output; only leaves (inputs, parameters, "
                       "constants) take a sharding: the partitioner derives the rest", t->name);
    if (sh->partial_axes)
        return mt_fail(MT_EINVAL, "'%s': a leaf cannot hold partial sums; give it a layout "
                       "(per dim axes) only", t->name);
    for (int d = t->ndim; d < MT_MAX_DIMS; d++)
        if (sh->dim_axes[d])
            return mt_fail(MT_EINVAL, "'%s' has %d dims, but the sharding splits dim %d", t->name,
                           t->ndim, d);
    t->sharding = *sh;
    return MT_OK;
}

mt_status mt_partition(mt_graph *global, mt_tensor *loss, mt_ctx *ctx,
                       const mt_partition_opts *opts, mt_graph **local, mt_tensor **local_loss) {
    if (!local || !local_loss) return mt_fail(MT_EINVAL, "mt_partition: output pointers are NULL");
    *local = NULL;
    *local_loss = NULL;
    if (!global || !loss || !ctx) return mt_fail(MT_EINVAL, "mt_partition: graph, loss or ctx is NULL");
    if (mt_graph_status(global) != MT_OK)
        return mt_fail(mt_graph_status(global), "%s", mt_graph_errmsg(global));
    if (global->prog)
        return mt_fail(MT_ESTATE, "mt_partition: the global graph is compiled; partition the "
                       "program as built, then compile the device's graph");
    if (loss->graph != global)
        return mt_fail(MT_EINVAL, "mt_partition: the loss '%s' is not a tensor of the graph",
                       loss->name);
    partitioner p = {.global = global, .mesh = mt_ctx_mesh(ctx), .ctx = ctx,
                     .gather_axes = opts ? opts->gather_axes : 0,
                     .gather_invariant = opts ? opts->gather_allreduce_axes : 0,
                     .seq_axes = opts ? opts->sequence_axes : 0,
                     .coll_matmul = opts && opts->sequence_axes && opts->collective_matmul,
                     .regather = opts && opts->reshard_after_forward,
                     .mode = opts ? opts->mode : MT_SHARD_AUTO,
                     .skip_pvary = opts && opts->test_skip_grad_reduction};
    p.slots = calloc((size_t)global->n_tensors, sizeof *p.slots);
    p.only_resharded = calloc((size_t)global->n_tensors, 1);
    p.lg = mt_graph_create();
    mt_status s = MT_OK;
    if (!p.slots || !p.only_resharded || !p.lg) {
        s = mt_fail(MT_ENOMEM, "out of memory partitioning a graph of %d tensors",
                    global->n_tensors);
        goto out;
    }
    if ((s = mt_graph_set_ctx(p.lg, ctx)) != MT_OK) goto out;
    /* the test knob's leaves stay undeclared, and must not get the defaults
     * (a replicated parameter's pvary is what the knob leaves out) */
    p.lg->vma_off = p.skip_pvary;
    p.lg->partitioned = true;
    /* 1: read by a reshard; 2: read by anything else (then not "only") */
    for (int i = 0; i < global->n_forward; i++) {
        const mt_op_call *c = &global->nodes[i].call;
        for (int k = 0; k < c->n_in; k++)
            p.only_resharded[c->in[k]->id] |= c->op == MT_OP_RESHARD ? 1 : 2;
    }
    for (int i = 0; i < global->n_tensors; i++) p.only_resharded[i] = p.only_resharded[i] == 1;
    /* parameters first, in declaration order, as the global graph lists them
     * (optimizers and checkpoints walk them in that order) */
    for (int i = 0; i < global->n_params && s == MT_OK; i++) s = make_slot(&p, global->params[i]);
    if (s == MT_OK) plan_prefetch(&p);
    /* a node's device nodes belong to its block (mt_graph_set_block) */
    for (int i = 0; i < global->n_forward && s == MT_OK; i++) {
        p.lg->cur_block = global->nodes[i].block;
        s = partition_node(&p, &global->nodes[i].call);
    }
    p.lg->cur_block = -1;
    if (s == MT_OK) s = use_slot(&p, loss);   /* a loss that is a leaf or a view */
    if (s != MT_OK) goto out;
    slot *ls = &p.slots[loss->id];
    mt_tensor *l = ls->local;
    if (ls->type.sharding.partial_axes) {
        l = mt_graph_psum(p.lg, l, axes_of(p.mesh, ls->type.sharding.partial_axes));
        if (l) name_after(l, "all-reduce", ls->local);
        ls->vary &= ~ls->type.sharding.partial_axes;
        if (!l) { s = local_failed(&p, "the loss's reduction"); goto out; }
    }
    /* a pipeline stage's output (not a scalar) may differ between devices:
     * its layout is its sharding (the batch split), the next stage's input's */
    if (ls->vary && loss->ndim == 0) {
        char names[128];
        mt__mesh_list_axes(p.mesh, names, sizeof names);
        s = fail(&p, MT_ESHARDING, "partition: the loss '%s' differs between devices but is not "
                 "a partial sum; reduce it (mesh axes %s)", loss->name, names);
        goto out;
    }
    /* each slot's local tensor knows the global shape it is a block of */
    for (int i = 0; i < global->n_tensors; i++) {
        mt_tensor *x = p.slots[i].local;
        if (!x || x->is_shard || x->ndim != p.slots[i].type.ndim) continue;
        x->has_global = true;
        memcpy(x->global_shape, p.slots[i].type.shape, sizeof x->global_shape);
    }
    *local = p.lg;
    *local_loss = l;
    p.lg = NULL;
out:
    mt_graph_free(p.lg);
    free(p.slots);
    free(p.only_resharded);
    return s;
}
