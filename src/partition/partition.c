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
 *      result moves follow it; a result left a partial sum whose tensor has
 *      a constraint splitting a dim over those axes is reduce-scattered onto
 *      it (mt_tensor_set_constraint: Megatron's sequence parallelism).
 * The steps are services here; the op's descriptor names the hook that runs
 * them (graph/op_desc.h, mt_lower_moves_fn): most ops the generic order, the
 * few that decide what happens to the moves around them their own (linear:
 * late bias; cross-entropy: collectives inside), or a variant that
 * mt_partition_opts.lowerings chose (collective matmul). The loop names no
 * op and no strategy.
 * The loss, a partial sum over the axes that split the batch, is reduced
 * last, so every device's loss is the global loss.
 *
 * The files, bottom up (partition_impl.h): slots.c (the slots, the leaves and
 * views, the moves as collective nodes), node.c (one node: rule, steps,
 * refusals), this file (the entry points and the pass), rules.c (a rule
 * table onto a global graph's leaves).
 */
#include "partition/partition_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the entry points ---------------------------------------------------------- */

mt_type mt_tensor_global_type(const mt_tensor *t, const mt_mesh *mesh) {
    mt_type ty = mt__part_type_of(t);
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

mt_status mt_tensor_set_constraint(mt_tensor *t, const mt_sharding *sh) {
    if (!t || !sh)
        return mt_fail(MT_EINVAL, "mt_tensor_set_constraint: tensor or sharding is NULL");
    if (t->kind == MT_INPUT || t->kind == MT_PARAM || t->kind == MT_CONST)
        return mt_fail(MT_EINVAL, "'%s' is a leaf; give it its sharding (mt_tensor_set_sharding): "
                       "a constraint is for an op's output", t->name);
    if (sh->partial_axes)
        return mt_fail(MT_EINVAL, "'%s': a constraint is a layout (per dim axes); partial sums "
                       "are what it resolves", t->name);
    for (int d = t->ndim; d < MT_MAX_DIMS; d++)
        if (sh->dim_axes[d])
            return mt_fail(MT_EINVAL, "'%s' has %d dims, but the constraint splits dim %d",
                           t->name, t->ndim, d);
    t->constraint = *sh;
    t->has_constraint = true;
    return MT_OK;
}

const char *mt_partition_lowering(int i) {
    const mt_lower_variant *v = mt__lower_variant_at(i);
    return v ? v->name : NULL;
}

/* The hooks of the variants named in `names` (','-separated, at most cap
 * bytes), by op. */
static mt_status choose_lowerings(partitioner *p, const char *names, size_t cap) {
    if (names && !memchr(names, '\0', cap))
        return mt_fail(MT_EINVAL, "mt_partition: mt_partition_opts.lowerings is not a string of "
                       "fewer than %zu bytes", cap);
    for (const char *n = names; n && *n;) {
        size_t len = strcspn(n, ",");
        const mt_lower_variant *v = mt__lower_variant_find(n, len);
        if (!v && len) {
            char known[256] = "";
            for (int i = 0; mt__lower_variant_at(i); i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
                         i ? ", " : "", mt__lower_variant_at(i)->name);
            return mt_fail(MT_EINVAL, "mt_partition: lowering '%.*s' (in \"%s\") is not one "
                           "(known: %s)", (int)len, n, names, known);
        }
        if (v && v->lower_moves) p->lowering[v->op] = v->lower_moves;
        if (v && v->lower) p->lower_variant[v->op] = v->lower;
        n += len + (n[len] == ',');
    }
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
                     .headtail = opts ? opts->headtail_axes : 0,
                     .regather = opts && opts->reshard_after_forward && !opts->gather_once,
                     .gather_once = opts && opts->gather_once,
                     .grads_once = opts && opts->gather_once && opts->grads_once,
                     .mode = opts ? opts->mode : MT_SHARD_AUTO,
                     .skip_pvary = opts && opts->test_skip_grad_reduction};
    mt_status s = choose_lowerings(&p, opts ? opts->lowerings : NULL, sizeof opts->lowerings);
    if (s != MT_OK) return s;
    p.slots = calloc((size_t)global->n_tensors, sizeof *p.slots);
    p.only_resharded = calloc((size_t)global->n_tensors, 1);
    p.lg = mt_graph_create();
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
    for (int i = 0; i < global->n_params && s == MT_OK; i++) s = mt__part_make_slot(&p, global->params[i]);
    if (s == MT_OK) mt__part_plan_prefetch(&p);
    /* a node's device nodes belong to its block (mt_graph_set_block) */
    for (int i = 0; i < global->n_forward && s == MT_OK; i++) {
        p.lg->cur_block = global->nodes[i].block;
        p.lg->cur_f32 = global->nodes[i].call.f32;
        s = mt__part_partition_node(&p, &global->nodes[i].call);
    }
    p.lg->cur_block = -1;
    p.lg->cur_f32 = false;
    if (s == MT_OK) s = mt__part_use_slot(&p, loss);   /* a loss that is a leaf or a view */
    if (s != MT_OK) goto out;
    slot *ls = &p.slots[loss->id];
    mt_tensor *l = ls->local;
    if (ls->type.sharding.partial_axes) {
        l = mt_graph_psum(p.lg, l, mt__part_axes_of(p.mesh, ls->type.sharding.partial_axes));
        if (l) mt__part_name_after(l, "all-reduce", ls->local);
        ls->vary &= ~ls->type.sharding.partial_axes;
        if (!l) { s = mt__part_local_failed(&p, "the loss's reduction"); goto out; }
    }
    /* a pipeline stage's output (not a scalar) may differ between devices:
     * its layout is its sharding (the batch split), the next stage's input's */
    if (ls->vary && loss->ndim == 0) {
        char names[128];
        mt__mesh_list_axes(p.mesh, names, sizeof names);
        s = mt__part_fail(&p, MT_ESHARDING, "partition: the loss '%s' differs between devices "
                          "but is not a partial sum; reduce it (mesh axes %s)", loss->name, names);
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
