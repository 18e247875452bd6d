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
 */
#include "graph/graph_impl.h"

#include <stdlib.h>
#include <string.h>

#define SHAPE(t, buf) mt__shape_str((t), (buf), sizeof (buf))

/* ======================================================================== */
/* Binding and owned memory                                                  */
/* ======================================================================== */

mt_status mt_graph_set_ctx(mt_graph *g, mt_ctx *ctx) {
    if (!g) return mt_fail(MT_EINVAL, "mt_graph_set_ctx: the graph is NULL");
    if (!ctx)
        return mt_graph_fail(g, MT_EINVAL, "mt_graph_set_ctx: the ctx is NULL; pass the ctx "
                             "the device function received");
    g->ctx = ctx;
    g->env.ctx = ctx;
    g->env.status = &g->run_status;
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
static int check_common(mt_graph *g, const char *op, mt_tensor *x, mt_axes axes) {
    if (!g || g->status != MT_OK || !x) return 0;
    if (!g->ctx) {
        mt__graph_error(g, MT_ESTATE, "%s of '%s': the graph has no device to run collectives "
                        "on; call mt_graph_set_ctx(g, ctx) in the device function before "
                        "building collective nodes", op, x->name);
        return 0;
    }
    const mt_mesh *mesh = mt_ctx_mesh(g->ctx);
    mt_status s = mt_mesh_axes_check(mesh, axes);
    if (s != MT_OK) {
        mt__graph_error(g, s, "%s of '%s' over mesh '%s': %s", op, x->name, mt_mesh_spec(mesh),
                        mt_errmsg());
        return 0;
    }
    if (x->dtype != MT_F32) {
        mt__graph_error(g, MT_EUNSUPPORTED, "%s of '%s': dtype %s is not supported; collective "
                        "nodes take f32 for now", op, x->name, mt_dtype_name(x->dtype));
        return 0;
    }
    return mt_axis_size(g->ctx, axes);
}

/* `dim` (named `what` in messages) must be a dim of x and, when `split`, its
 * size a multiple of P. */
static bool check_dim(mt_graph *g, const char *op, mt_tensor *x, mt_axes axes, const char *what,
                      int dim, int P, bool split) {
    char sx[64], sa[64];
    if (dim < 0 || dim >= x->ndim) {
        mt__graph_error(g, MT_ESHAPE, "%s of '%s' %s: %s %d is out of range; it has %d dim%s "
                        "(0 to %d)", op, x->name, SHAPE(x, sx), what, dim, x->ndim,
                        x->ndim == 1 ? "" : "s", x->ndim - 1);
        return false;
    }
    if (split && x->shape[dim] % P != 0) {
        mt__graph_error(g, MT_ESHAPE, "%s of '%s' %s over %s: %s %d has size %lld, which does "
                        "not split into %d blocks (the group size); make it a multiple of %d",
                        op, x->name, SHAPE(x, sx), axes_str(mt_ctx_mesh(g->ctx), axes, sa, sizeof sa),
                        what, dim, (long long)x->shape[dim], P, P);
        return false;
    }
    return true;
}

/* Appends the forward node of collective `op` on x with an output of
 * (x->ndim, shape); returns the output (NULL on error). */
static mt_tensor *emit(mt_graph *g, mt_op op, mt_tensor *x, const int64_t *shape,
                       mt_coll_params p) {
    mt_op_call c = {.op = op, .n_in = 1, .in = {x}, .p.coll = p};
    c.out = mt__tensor_new(g, NULL, MT_F32, MT_ACT, x->ndim, shape);
    if (!c.out) return NULL;
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
    return emit(g, MT_OP_PVARY, x, x->shape, coll(axes, -1, -1));
}

static mt_tensor *gather(mt_graph *g, const char *name, mt_tensor *x, mt_axes axes, int dim,
                         bool invariant) {
    int P = check_common(g, name, x, axes);
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
