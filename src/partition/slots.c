/*
 * slots.c — the partitioner's slots (partition_impl.h): each global tensor's
 * local twin, global type and varying axes; the leaves and views made on
 * first use, a stored-split parameter gathered before its first reader (one
 * ahead: the prefetch plan), the moves run as collective nodes, and the
 * pvary of an input that meets values varying where it does not.
 */
#include "base/base_impl.h"
#include "partition/partition_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers -------------------------------------------------------- */

/* The axes of a bit set, in mesh order (major first). */
mt_axes mt__part_axes_of(const mt_mesh *mesh, uint32_t bits) {
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

uint32_t mt__part_split_axes(const mt_type *t) {
    uint32_t bits = 0;
    for (int d = 0; d < t->ndim; d++) bits |= t->sharding.dim_axes[d];
    return bits;
}

mt_type mt__part_type_of(const mt_tensor *t) {
    mt_type ty = {.dtype = t->dtype, .ndim = t->ndim, .sharding = t->sharding};
    memcpy(ty.shape, t->shape, sizeof ty.shape);
    return ty;
}

/* Records a partition error in mt_errmsg() (the calling device's) and
 * returns the code. The global graph is left as it was: device threads read
 * it at once (partition.h), and a refused partition may be retried on it
 * (e.g. in auto mode after explicit mode refused). */
mt_status mt__part_fail(partitioner *p, mt_status code, const char *fmt, ...) {
    (void)p;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);   /* before mt_fail: an argument may be mt_errmsg() */
    va_end(ap);
    return mt_fail(code, "%s", msg);
}

/* The local graph's error as the partitioner's. */
mt_status mt__part_local_failed(partitioner *p, const char *what) {
    mt_status s = mt_graph_status(p->lg);
    if (s == MT_OK) s = MT_EINTERNAL;
    return mt__part_fail(p, s, "partition: %s: %s", what, mt_graph_errmsg(p->lg));
}

/* Names a tensor the partitioner made after what it did to `src`:
 * "all-gather(h.0.fc.w)" (op outputs keep their global names). */
void mt__part_name_after(mt_tensor *t, const char *what, const mt_tensor *src) {
    char name[MT_MAX_NAME];
    size_t at = 0;   /* "%s(%.*s)" without printf (base/text.c) */
    name[0] = '\0';
    mt__text_put(name, sizeof name, &at, what, (size_t)-1);
    mt__text_put(name, sizeof name, &at, "(", 1);
    mt__text_put(name, sizeof name, &at, src->name, MT_MAX_NAME - 16);
    mt__text_put(name, sizeof name, &at, ")", 1);
    mt_tensor_set_name(t, name);
}

/* Runs one move on a local tensor: the collective node (or local slice). */
mt_tensor *mt__part_apply_move(partitioner *p, mt_tensor *x, const mt_move *mv, bool varying) {
    mt_axes ax = mt__part_axes_of(p->mesh, mv->axes);
    mt_tensor *y = NULL;
    /* an op output gathered again the same way: the first gather's result
       (a leaf's gathers are the slots' own, FSDP's regathers included) */
    const bool memo = mv->kind == MT_MOVE_ALL_GATHER && x->kind != MT_PARAM &&
                      x->kind != MT_INPUT && x->kind != MT_CONST;
    const int n_memo = (int)(sizeof p->gathered / sizeof p->gathered[0]);
    for (int i = 0; memo && i < n_memo && i < p->n_gathered; i++)
        if (p->gathered[i].x == x && p->gathered[i].axes == mv->axes &&
            p->gathered[i].dim == mv->dim && p->gathered[i].varying == varying)
            return p->gathered[i].y;
    switch (mv->kind) {
    /* a gathered value is the same on every device and counts once, but
     * where it meets values that vary as it did (mt__lower_gather_varies) */
    case MT_MOVE_ALL_GATHER:
        y = varying ? mt_graph_all_gather(p->lg, x, ax, mv->dim)
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
        mt__part_name_after(y, mt_move_name(mv->kind), x);
    }
    if (y && memo) {
        const int at = p->n_gathered++ % n_memo;
        p->gathered[at].x = x, p->gathered[at].y = y, p->gathered[at].axes = mv->axes;
        p->gathered[at].dim = mv->dim, p->gathered[at].varying = varying;
    }
    return y;
}

/* ---- leaves and views ------------------------------------------------------ */

/* FSDP: a parameter stored split over gather axes is gathered whole over
 * them once, before its first use. The gather is the varying kind: the
 * gathered copy meets data split over the same axes, and its gradient is
 * reduce-scattered back onto the shard. The optimizer sees the shard. */
/* The dims of t that gather_param gathers. */
static int gathered_dims(const partitioner *p, const mt_tensor *t) {
    int n = 0;
    for (int d = 0; d < t->ndim; d++) n += (t->sharding.dim_axes[d] & p->gather_axes) != 0;
    return n;
}

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
            return mt__part_fail(p, MT_ESHARDING, "partition: parameter '%s': dim %d is split "
                                 "over the gathered axes and, minor to them, over others; split "
                                 "it over the gathered axes on a dim of its own, or make them "
                                 "minor", t->name, d);
        /* ZeRO-1's gather counts once: its gradient is all-reduced (the pvary
         * the partitioner adds where it meets the batch) and sliced */
        bool invariant = (ax & p->gather_invariant) != 0;
        if (invariant && (ax & ~p->gather_invariant))
            return mt__part_fail(p, MT_ESHARDING, "partition: parameter '%s': dim %d is "
                                 "gathered over axes of both kinds (all-reduced and "
                                 "reduce-scattered gradients)", t->name, d);
        mt_axes axes = mt__part_axes_of(p->mesh, ax);
        mt_tensor *y = invariant ? mt_graph_all_gather_invariant(p->lg, x, axes, d)
                                 : mt_graph_all_gather(p->lg, x, axes, d);
        if (y) {
            sl->type.sharding.dim_axes[d] &= ~ax;
            y->sharding = sl->type.sharding;
            mt__part_name_after(y, "all-gather", sl->local);
            if (invariant) sl->vary &= ~ax;
            /* FSDP: the backward gathers it again (the last gather of the
             * parameter's dims: the whole value) */
            y->regather = p->regather && !invariant;
            if (x != sl->local) x->regather = false;
            /* kept for the step (ZeRO-1/2, --fsdp-gather once): a gather of
             * several dims keeps each of its steps; its gradient is kept
             * only when one gather makes it (the reductions of a chain run
             * every pass, each on what the one after it gave) */
            y->step_kept = p->gather_once;
            y->grad_kept = p->grads_once && !invariant && x == sl->local && gathered_dims(p, t) == 1;
            /* prefetched (use_slot emits it one parameter ahead): the
             * executor starts it and completes it before its first reader */
            mt_node *made = &p->lg->nodes[p->lg->n_nodes - 1];
            if (made->call.out == y) made->call.p.coll.async = true;
        }
        x = y;
    }
    if (!x) return mt__part_local_failed(p, t->name);
    sl->local = x;   /* a varying gather keeps its axes in the vary set */
    return MT_OK;
}


static mt_status make_leaf(partitioner *p, mt_tensor *t) {
    slot *sl = &p->slots[t->id];
    sl->type = mt__part_type_of(t);
    int64_t local[MT_MAX_DIMS] = {0};
    if (mt_type_local_shape(p->mesh, &sl->type, local) != MT_OK)
        return mt__part_fail(p, MT_ESHARDING, "partition: '%s': %s", t->name, mt_errmsg());
    switch (t->kind) {
    case MT_INPUT:
        sl->local = mt_input(p->lg, t->name, t->dtype, t->ndim, local);
        /* a pipeline stage's input: its gradient goes back to the stage before */
        if (sl->local && t->needs_grad && mt_input_set_needs_grad(sl->local) != MT_OK)
            return mt__part_fail(p, MT_EINTERNAL, "partition: '%s': %s", t->name, mt_errmsg());
        break;
    case MT_CONST: sl->local = mt_constant(p->lg, t->name, t->dtype, t->ndim, local); break;
    case MT_PARAM:
        sl->local = mt_param(p->lg, t->name, t->ndim, local, t->init);
        if (sl->local && mt__part_split_axes(&sl->type)) {
            /* a shard: this device's block of the global tensor */
            mt_tensor *x = sl->local;
            x->is_shard = true;
            for (int d = 0; d < t->ndim; d++) {
                x->global_shape[d] = t->shape[d];
                uint32_t ax = t->sharding.dim_axes[d];
                x->shard_offset[d] =
                    ax ? (int64_t)mt_axis_index(p->ctx, mt__part_axes_of(p->mesh, ax)) * local[d]
                       : 0;
            }
        }
        break;
    default:
        return mt__part_fail(p, MT_EINTERNAL, "partition: '%s' is used before the op that "
                             "makes it", t->name);
    }
    if (!sl->local) return mt__part_local_failed(p, t->name);
    sl->local->sharding = t->sharding;
    sl->vary = mt__part_split_axes(&sl->type);
    /* the local graph's types (device variance) agree with the slots', so its
     * builders insert no pvary of their own (the test knob leaves them
     * undeclared: it skips the gradient reductions on purpose) */
    if (!p->skip_pvary &&
        mt_tensor_set_varying(sl->local, mt__part_axes_of(p->mesh, sl->vary)) != MT_OK)
        return mt__part_fail(p, MT_EINTERNAL, "partition: '%s': %s", t->name, mt_errmsg());
    /* gathered at its first use (one layer's parameters at a time), not here */
    sl->to_gather = t->kind == MT_PARAM && (mt__part_split_axes(&sl->type) & p->gather_axes);
    return MT_OK;
}

static mt_status make_view(partitioner *p, mt_tensor *t) {
    mt_status s = mt__part_use_slot(p, t->view_of);
    if (s != MT_OK) return s;
    slot *src = &p->slots[t->view_of->id], *sl = &p->slots[t->id];
    mt_shard_result res;
    if ((s = mt__shard_reshape(p->mesh, &src->type, t->ndim, t->shape, p->mode, &res)) != MT_OK)
        return mt__part_fail(p, s, "partition: reshape to '%s': %s", t->name, mt_errmsg());
    mt_tensor *x = src->local;
    uint32_t vary = src->vary;
    for (int i = 0; i < res.n_moves && x; i++) {
        x = mt__part_apply_move(p, x, &res.moves[i], false);   /* it meets nothing */
        vary = mt__lower_vary_after(vary, &res.moves[i], false);
    }
    int64_t local[MT_MAX_DIMS] = {0};
    if ((s = mt_type_local_shape(p->mesh, &res.result, local)) != MT_OK)
        return mt__part_fail(p, MT_ESHARDING, "partition: reshape to '%s': %s", t->name,
                             mt_errmsg());
    sl->local = x ? mt_reshape(p->lg, x, t->ndim, local) : NULL;
    if (!sl->local) return mt__part_local_failed(p, t->name);
    sl->local->sharding = res.result.sharding;
    sl->type = res.result;
    sl->vary = vary;
    return MT_OK;
}

/* Makes the slot of a tensor read by a node: a leaf or a view on first use;
 * an op output already has one. */
mt_status mt__part_make_slot(partitioner *p, mt_tensor *t) {
    if (p->slots[t->id].local) return MT_OK;
    return t->view_of ? make_view(p, t) : make_leaf(p, t);
}

/* The slot of a tensor an op reads: made, and a stored-split parameter
 * gathered whole, just before its first reader. */
mt_status mt__part_use_slot(partitioner *p, mt_tensor *t) {
    mt_status s = mt__part_make_slot(p, t);
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
void mt__part_plan_prefetch(partitioner *p) {
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

bool mt__part_constraint_scatter(const partitioner *p, const mt_tensor *out, const mt_type *t,
                                 uint32_t axes, mt_move *mv) {
    if (!out->has_constraint || !axes || (t->sharding.partial_axes & ~axes)) return false;
    for (int d = 0; d < t->ndim; d++) {
        /* a dim split already (the rows over context) takes axes as its
           minor split: each device scatters its own rows, which is the
           layout of (held | axes) only where every held axis comes before
           every one of axes in mesh order (sharding.h: major to minor) */
        const uint32_t held = t->sharding.dim_axes[d];
        if ((out->constraint.dim_axes[d] & axes) != axes || (held & axes) ||
            (held && (held >> __builtin_ctz(axes))) ||
            (t->shape[d] / axes_size(p->mesh, held)) % axes_size(p->mesh, axes) != 0)
            continue;
        mt_type after = *t;
        after.sharding.partial_axes &= ~axes;
        after.sharding.dim_axes[d] = held | axes;
        int64_t numel = 1;
        for (int e = 0; e < t->ndim; e++) numel *= t->shape[e];
        *mv = (mt_move){.kind = MT_MOVE_REDUCE_SCATTER, .operand = MT_MOVE_RESULT, .dim = d,
                        .dim2 = -1, .axes = axes, .before = *t, .after = after,
                        .bytes = numel / axes_size(p->mesh, mt__part_split_axes(t)) *
                                 (int64_t)mt_dtype_size(t->dtype)};
        return true;
    }
    return false;
}

/* Gives input k a pvary over the axes the op's other inputs vary over and it
 * does not, when a gradient flows back to it (once per tensor and axes). */
mt_tensor *mt__part_pvary_input(partitioner *p, const mt_tensor *global_in, mt_tensor *x,
                                uint32_t vary, uint32_t want) {
    uint32_t missing = want & ~vary;
    /* nothing differs over an axis of one device: its gradient needs no sum */
    for (int a = 0; a < p->mesh->ndim; a++)
        if (p->mesh->sizes[a] == 1) missing &= ~(1u << a);
    if (!missing || !x->needs_grad || p->skip_pvary) return x;
    slot *sl = &p->slots[global_in->id];
    if (x == sl->local && sl->pvaried && sl->pvary_axes == missing) return sl->pvaried;
    mt_tensor *y = mt_graph_pvary(p->lg, x, mt__part_axes_of(p->mesh, missing));
    if (y) {
        y->sharding = x->sharding;
        mt__part_name_after(y, "pvary", x);
    }
    if (y && x == sl->local) {
        sl->pvaried = y;
        sl->pvary_axes = missing;
    }
    return y;
}
