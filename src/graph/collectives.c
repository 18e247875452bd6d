/*
 * collectives.c — collective nodes in a graph (shard_map): binding a graph to
 * its device (mt_graph_set_ctx) and the builders mt_graph_psum,
 * mt_graph_all_gather, mt_graph_psum_scatter, mt_graph_ppermute,
 * mt_graph_all_to_all, mt_graph_pvary and mt_graph_slice (graph.h documents
 * them).
 *
 * The tensors of such a graph are one device's local arrays. Each builder
 * checks its operand against the device's mesh and group (axes valid, dims in
 * range and divisible by the group size P, f32), works out the local output
 * shape, and appends one forward node whose call (ops/collective.c runs it)
 * names the axes and dims in p.coll. Their gradient rules are in
 * grad_rules.c. Errors stick to the graph like any builder's and name the
 * op, the operand and the numbers that did not fit.
 *
 * Device variance (JAX's vma, check_vma): every tensor of a device's graph
 * carries the mesh axes over which it is known to be the same on every
 * device and those over which it is known to differ (tensor_impl.h). A leaf
 * has a default until declared (mt_tensor_set_varying): an input varies
 * over every axis, a parameter or constant over none; a collective sets its
 * result's (psum: the same over its axes; pvary, slice, psum_scatter, ...:
 * different); any other op's result is the same over an axis when all its
 * operands are, and differs when one does. Where an op's operand that takes
 * a gradient is the same over an axis and the result is not (an invariant
 * value meets a varying one), the builder inserts pvary over those axes on
 * it, as JAX does: its transpose sums the gradient over the devices, which
 * is what makes a replicated value's gradient that of every device's loss.
 * Where the variance cannot be known (ops built before the graph was bound
 * to a device; a slice of a value each device holds its own of), the
 * builder refuses, naming the op and the fix, instead of guessing: a wrong
 * guess is a silently wrong gradient. The partitioner's test knob
 * (mt_graph.vma_off) turns the defaults off, and then an unknown operand
 * meeting an invariant one is refused as before the defaults.
 */
#include "graph/graph_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHAPE(t, buf) mt__shape_str((t), (buf), sizeof (buf))
/* how a message names t: 'name', or the op that made it (errors.c) */
#define LABEL(t, buf) mt__tensor_label(g, (t), (buf), sizeof (buf))

/* ======================================================================== */
/* Binding and owned memory                                                  */
/* ======================================================================== */

mt_status mt_graph_set_ctx(mt_graph *g, mt_ctx *ctx) {
    if (!g) return mt_fail(MT_EINVAL, "mt_graph_set_ctx: the graph is NULL");
    if (!ctx)
        return mt_graph_fail(g, MT_EINVAL, "mt_graph_set_ctx: the ctx is NULL; pass the ctx "
                             "the device function received");
    /* variance is decided as each op is built (the pvary that sums a
     * replicated value's gradient over the devices among it): ops built
     * before the graph knew its device have none, so their gradients would
     * be each device's own share. Rebinding (a new launch) is fine. */
    if (!g->ctx && g->n_forward > 0 && !g->vma_off) {
        const mt_mesh *mesh = mt_ctx_mesh(ctx);
        char first[256];
        for (int a = 0; a < mt_mesh_ndim(mesh); a++)
            if (mt_mesh_axis_size(mesh, mt_mesh_axis_name(mesh, a)) > 1)
                return mt_graph_fail(g, MT_ESTATE, "mt_graph_set_ctx: %d op%s (the first: %s) "
                                     "were built before the graph was bound to a device of mesh "
                                     "'%s'; call mt_graph_set_ctx right after mt_graph_create, "
                                     "before building: whether each value differs between "
                                     "devices, and so the pvary that sums a replicated "
                                     "parameter's gradient over them, is decided as each op is "
                                     "built", g->n_forward, g->n_forward == 1 ? "" : "s",
                                     mt__call_label(g, &g->nodes[0].call, first, sizeof first),
                                     mt_mesh_spec(mesh));
    }
    g->ctx = ctx;
    /* a compiled graph is bound again for each launch (a new ctx): its
     * program's op environment follows; compile copies it otherwise */
    if (g->prog) g->prog->env.ctx = ctx;
    return MT_OK;
}

void *mt__graph_keep(mt_graph *g, const void *src, size_t bytes) {
    if (g->n_owned == g->cap_owned) {
        int cap = g->cap_owned ? 2 * g->cap_owned : 8;
        void **p = realloc(g->owned, (size_t)cap * sizeof *p);
        if (!p) return mt__graph_error(g, MT_ENOMEM, "out of memory keeping call parameters");
        g->owned = p;
        g->cap_owned = cap;
    }
    void *copy = malloc(bytes ? bytes : 1);
    if (!copy) return mt__graph_error(g, MT_ENOMEM, "out of memory keeping call parameters");
    if (bytes) memcpy(copy, src, bytes);
    g->owned[g->n_owned++] = copy;
    return copy;
}

/* ======================================================================== */
/* Checks                                                                    */
/* ======================================================================== */

/* "'data'" or "'data,tensor'" for messages. */
static const char *axes_str(const mt_mesh *mesh, mt_axes axes, char *buf, size_t n) {
    size_t off = (size_t)snprintf(buf, n, "'");
    for (int i = 0; i < axes.n && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? "," : "",
                                mt_mesh_axis_name(mesh, axes.axis[i]));
    if (off < n) snprintf(buf + off, n - off, "'");
    return buf;
}

/* What every collective builder checks first: an operand (NULL: an earlier
 * error, passed on), a bound device, valid axes, f32. Returns the group size
 * P, or 0 after recording the error. */
static int check_common_of(mt_graph *g, const char *op, mt_tensor *x, mt_axes axes, bool ints);
static int check_common(mt_graph *g, const char *op, mt_tensor *x, mt_axes axes) {
    return check_common_of(g, op, x, axes, false);
}
/* ints: int32 is taken too when x takes no gradient (a gather of ids: the
 * document ids that travel with the keys of a split attention). */
static int check_common_of(mt_graph *g, const char *op, mt_tensor *x, mt_axes axes, bool ints) {
    if (!g || g->status != MT_OK || !x) return 0;
    char lx[160];
    if (!g->ctx) {
        mt__graph_error(g, MT_ESTATE, "%s of %s: the graph has no device to run collectives "
                        "on; call mt_graph_set_ctx(g, ctx) in the device function before "
                        "building collective nodes", op, LABEL(x, lx));
        return 0;
    }
    const mt_mesh *mesh = mt_ctx_mesh(g->ctx);
    mt_status s = mt_mesh_axes_check(mesh, axes);
    if (s != MT_OK) {
        mt__graph_error(g, s, "%s of %s over mesh '%s': %s", op, LABEL(x, lx), mt_mesh_spec(mesh),
                        mt_errmsg());
        return 0;
    }
    if (x->dtype != MT_F32 && !(ints && x->dtype == MT_I32 && !x->needs_grad)) {
        mt__graph_error(g, MT_EUNSUPPORTED, "%s of %s: dtype %s is not supported; collective "
                        "nodes take f32 for now (a gather int32 ids that take no gradient)",
                        op, LABEL(x, lx), mt_dtype_name(x->dtype));
        return 0;
    }
    return mt_axis_size(g->ctx, axes);
}

/* `dim` (named `what` in messages) must be a dim of x and, when `split`, its
 * size a multiple of P. */
static bool check_dim(mt_graph *g, const char *op, mt_tensor *x, mt_axes axes, const char *what,
                      int dim, int P, bool split) {
    char sx[64], sa[64], lx[160];
    if (dim < 0 || dim >= x->ndim) {
        mt__graph_error(g, MT_ESHAPE, "%s of %s %s: %s %d is out of range; it has %d dim%s "
                        "(0 to %d)", op, LABEL(x, lx), SHAPE(x, sx), what, dim, x->ndim,
                        x->ndim == 1 ? "" : "s", x->ndim - 1);
        return false;
    }
    if (split && x->shape[dim] % P != 0) {
        mt__graph_error(g, MT_ESHAPE, "%s of %s %s over %s: %s %d has size %lld, which does "
                        "not split into %d blocks (the group size); make it a multiple of %d",
                        op, LABEL(x, lx), SHAPE(x, sx), axes_str(mt_ctx_mesh(g->ctx), axes, sa, sizeof sa),
                        what, dim, (long long)x->shape[dim], P, P);
        return false;
    }
    return true;
}

/* ======================================================================== */
/* Device variance                                                           */
/* ======================================================================== */

static uint32_t axes_bits(mt_axes axes) {
    uint32_t b = 0;
    for (int i = 0; i < axes.n; i++) b |= 1u << axes.axis[i];
    return b;
}

static mt_axes bits_axes(uint32_t bits) {
    mt_axes a = {0};
    for (int i = 0; i < MT_MESH_MAX_AXES; i++)
        if (bits & (1u << i)) a.axis[a.n++] = (uint8_t)i;
    return a;
}

/* The axes of g's mesh over which a value can differ (size > 1); 0 for a
 * graph bound to no device. */
static uint32_t real_axes(const mt_graph *g) {
    if (!g->ctx) return 0;
    const mt_mesh *mesh = mt_ctx_mesh(g->ctx);
    uint32_t b = 0;
    for (int a = 0; a < mt_mesh_ndim(mesh); a++)
        if (mt_mesh_axis_size(mesh, mt_mesh_axis_name(mesh, a)) > 1) b |= 1u << a;
    return b;
}

static void vma_get(mt_graph *g, mt_tensor *t, uint32_t *inv, uint32_t *var);

/* An op's output that its builder did not type (a node made elsewhere, as
 * the collective matmuls): the same over what all its inputs are, different
 * over what one is. */
static void vma_from_producer(mt_graph *g, mt_tensor *t) {
    uint32_t inv = ~0u, var = 0;
    bool found = false;
    for (int i = g->n_forward - 1; i >= 0 && !found; i--) {
        const mt_op_call *c = &g->nodes[i].call;
        if (c->out != t) continue;
        found = true;
        for (int k = 0; k < c->n_in; k++) {
            uint32_t ik, vk;
            vma_get(g, c->in[k], &ik, &vk);
            inv &= ik;
            var |= vk;
        }
    }
    t->vma_inv = found ? inv & ~var : 0;
    t->vma_var = found ? var : 0;
    t->vma_typed = true;
}

/* Every mesh axis of g's device (bit set, mesh order); 0 for a graph bound
 * to no device. */
static uint32_t all_axes(const mt_graph *g) {
    if (!g->ctx) return 0;
    int n = mt_mesh_ndim(mt_ctx_mesh(g->ctx));
    return n >= 32 ? ~0u : (1u << n) - 1;
}

/* The variance of a leaf nobody declared, as shard_map's in_specs would give
 * it: an input is fed per device, so each device may hold its own value
 * (varying over every axis of size > 1); a parameter or a constant is one
 * value that every device holds (invariant over every axis). Not stored: a
 * declaration before the first read still replaces it. On a graph bound to
 * no device nothing is known. */
static void vma_default(mt_graph *g, const mt_tensor *t, uint32_t *inv, uint32_t *var) {
    if (g->vma_off || !g->ctx) {
        *inv = *var = 0;
        return;
    }
    *var = t->kind == MT_INPUT ? real_axes(g) : 0;
    *inv = all_axes(g) & ~*var;
}

static void vma_get(mt_graph *g, mt_tensor *t, uint32_t *inv, uint32_t *var) {
    while (!t->vma_typed && t->view_of) t = t->view_of;
    bool leaf = t->kind == MT_INPUT || t->kind == MT_PARAM || t->kind == MT_CONST;
    if (!t->vma_typed && leaf) return vma_default(g, t, inv, var);
    if (!t->vma_typed) vma_from_producer(g, t);
    *inv = t->vma_inv;
    *var = t->vma_var;
}

static void vma_set(mt_tensor *t, uint32_t inv, uint32_t var) {
    t->vma_inv = inv & ~var;
    t->vma_var = var;
    t->vma_typed = true;
}

mt_status mt_tensor_set_varying(mt_tensor *leaf, mt_axes axes) {
    if (!leaf) return mt_fail(MT_EINVAL, "mt_tensor_set_varying: the tensor is NULL");
    mt_graph *g = leaf->graph;
    if (leaf->view_of || (leaf->kind != MT_INPUT && leaf->kind != MT_PARAM &&
                          leaf->kind != MT_CONST))
        return mt_fail(MT_EINVAL, "mt_tensor_set_varying: '%s' is not a leaf (an input, a "
                       "parameter or a constant); an op's result takes its variance from its "
                       "operands", leaf->name);
    if (!g || !g->ctx)
        return mt_fail(MT_ESTATE, "mt_tensor_set_varying of '%s': its graph has no device; call "
                       "mt_graph_set_ctx(g, ctx) first", leaf->name);
    const mt_mesh *mesh = mt_ctx_mesh(g->ctx);
    mt_status s = mt_mesh_axes_check(mesh, axes);
    if (s != MT_OK)
        return mt_fail(s, "mt_tensor_set_varying of '%s' over mesh '%s': %s", leaf->name,
                       mt_mesh_spec(mesh), mt_errmsg());
    for (int i = 0; i < g->n_forward; i++) {
        const mt_op_call *c = &g->nodes[i].call;
        for (int k = 0; k < c->n_in; k++)
            if (mt__storage_root(c->in[k]) == leaf)
                return mt_fail(MT_ESTATE, "mt_tensor_set_varying of '%s': an op already reads "
                               "it, and its result's variance came from what '%s' was then; "
                               "declare it right after making it", leaf->name, leaf->name);
    }
    uint32_t var = axes_bits(axes);
    vma_set(leaf, all_axes(g) & ~var, var);
    return MT_OK;
}

/* pvary of x over `axes` for an operand that meets what varies over them:
 * the one made for x over these axes before, if any, else a new node named
 * "pvary(x)". */
static mt_tensor *auto_pvary(mt_graph *g, mt_tensor *x, uint32_t axes) {
    for (int i = 0; i < g->n_forward; i++) {
        const mt_op_call *c = &g->nodes[i].call;
        if (c->op == MT_OP_PVARY && c->in[0] == x && axes_bits(c->p.coll.axes) == axes)
            return c->out;
    }
    mt_tensor *y = mt_graph_pvary(g, x, bits_axes(axes));
    if (!y) return NULL;
    char name[MT_MAX_NAME];
    mt__name_derived(name, sizeof name, "pvary(", x->name, MT_MAX_NAME - 8, ")");
    if (!mt_graph_find(g, name)) mt_tensor_set_name(y, name);
    return y;
}

bool mt__vma_operands(mt_graph *g, mt_op_call *c, const char *op, mt_axes varies) {
    uint32_t inv = ~0u, var = 0, ik[MT_MAX_INPUTS], vk[MT_MAX_INPUTS];
    /* the operands that meet (ops_impl.h's mt_op_def: meet, inside) */
    const mt_op_def *d = mt__op_def(c->op);
    const int n_in = d->meet > 0 && d->meet < c->n_in ? d->meet : c->n_in;
    for (int k = 0; k < n_in; k++) {
        vma_get(g, c->in[k], &ik[k], &vk[k]);
        inv &= ik[k];
        var |= vk[k];
    }
    if (n_in == 0) inv = 0;
    /* a fused collective's result differs over its axes whatever its
     * operands are (all_gather_linear, linear_reduce_scatter) */
    uint32_t extra = axes_bits(varies) & real_axes(g);
    inv &= ~extra;
    var |= extra;
    /* an op that all-reduces over axes inside it (the vocabulary-parallel loss) */
    uint32_t inside = d->inside ? axes_bits(d->inside(c)) : 0;
    inv = (inv | inside) & ~(var & ~inside);
    var &= ~inside;
    uint32_t real = real_axes(g);
    for (int k = 0; k < n_in; k++) {
        mt_tensor *x = c->in[k];
        if (x->dtype != MT_F32 || !x->needs_grad) continue;   /* no gradient to sum */
        uint32_t need = ik[k] & ~inv & ~inside & real;
        if (!need) continue;
        uint32_t unknown = need & ~var;
        if (unknown) {
            int j = 0;
            while (j < n_in && (j == k || !(~ik[j] & unknown))) j++;
            const mt_tensor *o = c->in[j < n_in ? j : k];
            char sa[64];
            axes_str(mt_ctx_mesh(g->ctx), bits_axes(unknown), sa, sizeof sa);
            mt__graph_error(g, MT_ESHARDING, "%s of '%s' and '%s': '%s' is the same on every "
                            "device over %s (a psum's result, or made from replicated values), "
                            "but '%s' is not known to be, nor to differ; if '%s' differs "
                            "between devices, declare the leaf it comes from varying "
                            "(mt_tensor_set_varying: a pvary of '%s' is then inserted here, and "
                            "its gradient sums every device's), or pvary '%s' yourself "
                            "(mt_graph_pvary); if it is the same on every device, declare that "
                            "leaf with mt_tensor_set_varying over the axes it does differ over "
                            "(none: replicated)", op, c->in[0]->name,
                            c->n_in > 1 ? c->in[1]->name : c->in[0]->name, x->name, sa, o->name,
                            o->name, x->name, x->name);
            return false;
        }
        if (!(c->in[k] = auto_pvary(g, x, need))) return false;
    }
    if (c->out) vma_set(c->out, inv, var);
    return true;
}

/* Appends the forward node of collective `op` on x with an output of
 * (x->ndim, shape); returns the output (NULL on error). Types the output
 * (see "Device variance" above): a psum's result and a gathered value that
 * counts once are the same over the axes, the other collectives' results
 * differ over them; an operand that is the same over the axes and takes a
 * gradient gets a pvary first (a psum of it is P times it, and its
 * gradient P times the result's), as JAX's collectives take varying
 * operands. */
static mt_tensor *emit(mt_graph *g, mt_op op, mt_tensor *x, const int64_t *shape,
                       mt_coll_params p) {
    uint32_t inv, var, ax = axes_bits(p.axes);
    vma_get(g, x, &inv, &var);
    /* a slice's gradient (an all-gather of the blocks' cotangents) is that
     * of one value all devices share; of a value each device holds its own
     * it would add the others' cotangents into this device's */
    if (op == MT_OP_SLICE && x->needs_grad && (var & ax & real_axes(g))) {
        char sa[64];
        axes_str(mt_ctx_mesh(g->ctx), bits_axes(var & ax & real_axes(g)), sa, sizeof sa);
        char lx[160];
        LABEL(x, lx);
        return mt__graph_error(g, MT_ESHARDING, "slice of %s over %s: %s differs between the "
                               "devices over %s (an input, fed per device, or made from one), "
                               "but slice takes each device's block of one value they share; "
                               "if the input is the same on every device, declare it so "
                               "(mt_tensor_set_varying(input, the axes it does differ over; "
                               "none: replicated)), or slice it on the host before feeding it",
                               lx, sa, lx, sa);
    }
    if (op != MT_OP_PVARY && op != MT_OP_SLICE && x->needs_grad && (inv & ax & real_axes(g))) {
        if (!(x = auto_pvary(g, x, inv & ax & real_axes(g)))) return NULL;
        vma_get(g, x, &inv, &var);
    }
    bool same = op == MT_OP_PSUM || (op == MT_OP_ALL_GATHER && p.invariant);
    mt_op_call c = {.op = op, .n_in = 1, .in = {x}, .p.coll = p};
    c.out = mt__tensor_new(g, NULL, x->dtype, MT_ACT, x->ndim, shape);
    if (!c.out) return NULL;
    vma_set(c.out, same ? inv | ax : inv & ~ax, same ? var & ~ax : var | ax);
    mt_node n = {.call = c, .phase = MT_PHASE_F};
    return mt__node_add(g, &n) < 0 ? NULL : c.out;
}

static mt_coll_params coll(mt_axes axes, int dim, int dim2) {
    return (mt_coll_params){.axes = axes, .dim = dim, .dim2 = dim2};
}

/* ======================================================================== */
/* Builders                                                                  */
/* ======================================================================== */

mt_tensor *mt_graph_psum(mt_graph *g, mt_tensor *x, mt_axes axes) {
    if (!check_common(g, "psum", x, axes)) return NULL;
    return emit(g, MT_OP_PSUM, x, x->shape, coll(axes, -1, -1));
}

mt_tensor *mt_graph_pvary(mt_graph *g, mt_tensor *x, mt_axes axes) {
    if (!check_common(g, "pvary", x, axes)) return NULL;
    /* over what x already differs over, a pvary is nothing: x itself */
    uint32_t inv, var;
    vma_get(g, x, &inv, &var);
    uint32_t left = axes_bits(axes) & ~var;
    if (!left) return x;
    if (left != axes_bits(axes)) axes = bits_axes(left);
    return emit(g, MT_OP_PVARY, x, x->shape, coll(axes, -1, -1));
}

static mt_tensor *gather(mt_graph *g, const char *name, mt_tensor *x, mt_axes axes, int dim,
                         bool invariant) {
    int P = check_common_of(g, name, x, axes, true);
    if (!P || !check_dim(g, name, x, axes, "dim", dim, P, false)) return NULL;
    int64_t shape[MT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] *= P;
    mt_coll_params p = coll(axes, dim, -1);
    p.invariant = invariant;
    return emit(g, MT_OP_ALL_GATHER, x, shape, p);
}

mt_tensor *mt_graph_all_gather(mt_graph *g, mt_tensor *x, mt_axes axes, int dim) {
    return gather(g, "all_gather", x, axes, dim, false);
}

mt_tensor *mt_graph_all_gather_invariant(mt_graph *g, mt_tensor *x, mt_axes axes, int dim) {
    return gather(g, "all_gather_invariant", x, axes, dim, true);
}

/* psum_scatter and slice: dim split into P blocks, this rank's kept. */
static mt_tensor *split_op(mt_graph *g, mt_op op, const char *name, mt_tensor *x, mt_axes axes,
                           int dim) {
    int P = check_common(g, name, x, axes);
    if (!P || !check_dim(g, name, x, axes, "dim", dim, P, true)) return NULL;
    int64_t shape[MT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] /= P;
    return emit(g, op, x, shape, coll(axes, dim, -1));
}

mt_tensor *mt_graph_psum_scatter(mt_graph *g, mt_tensor *x, mt_axes axes, int dim) {
    return split_op(g, MT_OP_PSUM_SCATTER, "psum_scatter", x, axes, dim);
}

mt_tensor *mt_graph_slice(mt_graph *g, mt_tensor *x, mt_axes axes, int dim) {
    return split_op(g, MT_OP_SLICE, "slice", x, axes, dim);
}

mt_tensor *mt_graph_all_to_all(mt_graph *g, mt_tensor *x, mt_axes axes, int split_dim,
                               int concat_dim) {
    int P = check_common(g, "all_to_all", x, axes);
    if (!P || !check_dim(g, "all_to_all", x, axes, "split dim", split_dim, P, true) ||
        !check_dim(g, "all_to_all", x, axes, "concat dim", concat_dim, P, false))
        return NULL;
    int64_t shape[MT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[split_dim] /= P;
    shape[concat_dim] *= P;
    return emit(g, MT_OP_ALL_TO_ALL, x, shape, coll(axes, split_dim, concat_dim));
}

mt_tensor *mt_graph_ppermute(mt_graph *g, mt_tensor *x, mt_axes axes, const int (*pairs)[2],
                             int n_pairs) {
    int P = check_common(g, "ppermute", x, axes);
    if (!P) return NULL;
    if (n_pairs < 0 || (n_pairs > 0 && !pairs) || n_pairs > P)
        return mt__graph_error(g, MT_EINVAL, "ppermute of '%s': %d pairs%s; give 0 to %d (the "
                               "group size) {source, destination} pairs", x->name, n_pairs,
                               n_pairs > 0 && !pairs ? " but pairs is NULL" : "", P);
    /* every rank at most once as a source and once as a destination */
    for (int k = 0; k < n_pairs; k++) {
        for (int e = 0; e < 2; e++)
            if (pairs[k][e] < 0 || pairs[k][e] >= P)
                return mt__graph_error(g, MT_EINVAL, "ppermute of '%s': pair %d {%d, %d} names "
                                       "rank %d, but the group has ranks 0 to %d", x->name, k,
                                       pairs[k][0], pairs[k][1], pairs[k][e], P - 1);
        for (int j = 0; j < k; j++)
            for (int e = 0; e < 2; e++)
                if (pairs[j][e] == pairs[k][e])
                    return mt__graph_error(g, MT_EINVAL, "ppermute of '%s': pairs %d and %d "
                                           "both have rank %d as %s; each rank may be a source "
                                           "once and a destination once", x->name, j, k,
                                           pairs[k][e], e ? "destination" : "source");
    }
    mt_coll_params p = coll(axes, -1, -1);
    p.n_pairs = n_pairs;
    p.pairs = mt__graph_keep(g, pairs, (size_t)n_pairs * sizeof *pairs);
    if (!p.pairs) return NULL;
    return emit(g, MT_OP_PPERMUTE, x, x->shape, p);
}
