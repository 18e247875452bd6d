/*
 * collective_matmul.c — the collective matmul nodes of a device-local graph:
 * the builders mt_graph_all_gather_linear and mt_graph_linear_reduce_scatter
 * (graph.h documents them) and their gradient rules, which grad_rules.c's
 * table names.
 *
 * A builder checks its operands against the device's group (axes valid, the
 * split dim not the contracted last one, sizes that fit and divide), works
 * out the block view of the rows (p.cm: outer, R, K, N; ops_impl.h) and
 * appends one forward node; ops/collective_matmul.c runs it as a ring.
 *
 * Gradients (B/W split as everywhere; the quantity differentiated is the sum
 * over devices of each device's loss, graph.h):
 *
 *   Y = all_gather(x) · op(w) + b      dx = psum_scatter(dY · op(w)ᵀ)
 *                                         -> a linear_rs (overlapped too)
 *                                      dw = dYᵀ · X, X the gathered x the
 *                                         forward saved (W: cm_wgrad)
 *                                      db = Σ_rows dY (W: bias_grad)
 *   out = psum_scatter(h · op(w))      dh = all_gather(dout) · op(w)ᵀ
 *                                         -> an ag_linear, which saves the
 *                                         gathered dout (its out2)
 *                                      dw = Gᵀ · h, G that gathered dout
 *                                         (W: cm_wgrad)
 *
 * Memory: ag_linear saves its gathered x, (P, outer·R, K): the size of the
 * all_gather's output the unfused composition keeps alive for its weight
 * gradient. linear_rs's backward saves the gathered dout, P times its
 * output's size; when h takes no gradient, a plain all_gather makes it for
 * the weight gradient alone. linear_rs runs in three chunks of kernel
 * scratch (ops_impl.h).
 */
#include "graph/graph_impl.h"

#include <stdlib.h>
#include <string.h>

#define SHAPE(t, buf) mt__shape_str((t), (buf), sizeof (buf))

/* ======================================================================== */
/* Checks                                                                    */
/* ======================================================================== */

/* The operands a builder takes, each named for its messages. */
typedef struct {
    const char *op;            /* "all_gather_linear", "linear_reduce_scatter" */
    const char *xname;         /* what the split operand is called: "x", "h" */
} cm_names;

/* Everything a builder checks before shapes: operands present (NULL: an
 * earlier error, passed on), a bound device, valid axes, f32 operands.
 * Returns the group size P, or 0 after recording the error. */
static int check_common(mt_graph *g, const cm_names *nm, mt_tensor *x, mt_tensor *w,
                        mt_tensor *bias, mt_axes axes) {
    if (!g || g->status != MT_OK || !x || !w) return 0;
    if (!g->ctx) {
        mt__graph_error(g, MT_ESTATE, "%s of '%s': the graph has no device to run collectives "
                        "on; call mt_graph_set_ctx(g, ctx) in the device function before "
                        "building collective nodes", nm->op, x->name);
        return 0;
    }
    const mt_mesh *mesh = mt_ctx_mesh(g->ctx);
    mt_status s = mt_mesh_axes_check(mesh, axes);
    if (s != MT_OK) {
        mt__graph_error(g, s, "%s of '%s' over mesh '%s': %s", nm->op, x->name,
                        mt_mesh_spec(mesh), mt_errmsg());
        return 0;
    }
    mt_tensor *ops[3] = {x, w, bias};
    const char *role[3] = {nm->xname, "w", "bias"};
    for (int k = 0; k < 3; k++)
        if (ops[k] && ops[k]->dtype != MT_F32) {
            mt__graph_error(g, MT_EUNSUPPORTED, "%s: %s '%s' is %s; collective matmuls take "
                            "f32", nm->op, role[k], ops[k]->name, mt_dtype_name(ops[k]->dtype));
            return 0;
        }
    return mt_axis_size(g->ctx, axes);
}

/* The shapes every collective matmul shares: `dim` a dim of x other than
 * its last (which the product contracts), w (O1..Ok, K) with K x's last
 * dim, a result of at most MT_MAX_DIMS dims, and bias (O1..Ok). Sets *N =
 * O1·..·Ok and fills `shape` with x's shape, its last dim replaced by
 * O1..Ok (*ndim dims). False after recording the error. */
static bool check_shapes(mt_graph *g, const cm_names *nm, mt_tensor *x, mt_tensor *w,
                         mt_tensor *bias, int dim, int64_t *N, int *ndim, int64_t *shape) {
    char sx[64], sw[64], sb[64];
    if (x->ndim < 2) {
        mt__graph_error(g, MT_ESHAPE, "%s: %s '%s' %s needs at least 2 dims: one to split "
                        "and the last, which the product contracts", nm->op, nm->xname,
                        x->name, SHAPE(x, sx));
        return false;
    }
    if (dim < 0 || dim > x->ndim - 2) {
        mt__graph_error(g, MT_ESHAPE, "%s: %s '%s' %s cannot be split along dim %d; the split "
                        "dim must be one of its dims but the last (0 to %d), which the product "
                        "contracts", nm->op, nm->xname, x->name, SHAPE(x, sx), dim, x->ndim - 2);
        return false;
    }
    const int64_t K = x->shape[x->ndim - 1];
    const int k = w->ndim - 1;
    if (w->ndim < 2 || w->shape[k] != K || x->ndim - 1 + k > MT_MAX_DIMS) {
        mt__graph_error(g, MT_ESHAPE, "%s: weight w '%s' %s must be (OC,%lld) or "
                        "(O1,..,Ok,%lld), its last dim the last dim of %s '%s' %s, and the "
                        "result at most %d-D", nm->op, w->name, SHAPE(w, sw), (long long)K,
                        (long long)K, nm->xname, x->name, SHAPE(x, sx), MT_MAX_DIMS);
        return false;
    }
    bool bias_ok = !bias || bias->ndim == k;
    for (int d = 0; bias_ok && bias && d < k; d++) bias_ok = bias->shape[d] == w->shape[d];
    if (!bias_ok) {
        mt__graph_error(g, MT_ESHAPE, "%s: bias '%s' %s must have weight w '%s' %s's output "
                        "dims (all but the last)", nm->op, bias->name, SHAPE(bias, sb), w->name,
                        SHAPE(w, sw));
        return false;
    }
    *N = 1;
    for (int d = 0; d < k; d++) *N *= w->shape[d];
    *ndim = x->ndim - 1 + k;
    memcpy(shape, x->shape, (size_t)(x->ndim - 1) * sizeof *shape);
    for (int d = 0; d < k; d++) shape[x->ndim - 1 + d] = w->shape[d];
    return true;
}

/* The ring {k, k+1 mod P} of p, kept by g; false (g's error set) when out
 * of memory. */
static bool ring_pairs(mt_graph *g, mt_cm_params *p) {
    int pairs[64][2], (*big)[2] = NULL;
    int (*pp)[2] = pairs;
    if (p->P > 64 && !(pp = big = malloc((size_t)p->P * sizeof *big))) {
        mt__graph_error(g, MT_ENOMEM, "out of memory for a ring of %d devices", p->P);
        return false;
    }
    for (int k = 0; k < p->P; k++) {
        pp[k][0] = k;
        pp[k][1] = (k + 1) % p->P;
    }
    p->ring = mt__graph_keep(g, pp, (size_t)p->P * sizeof *pp);
    free(big);
    return p->ring != NULL;
}

/* The block view of x's rows split along dim (x's shape local or whole, as
 * `chunk_dim` says: its size along dim for one chunk): outer, R, K. */
static void block_view(const mt_tensor *x, int dim, int64_t chunk_dim, mt_cm_params *p) {
    p->outer = 1;
    for (int d = 0; d < dim; d++) p->outer *= x->shape[d];
    p->R = chunk_dim;
    for (int d = dim + 1; d < x->ndim - 1; d++) p->R *= x->shape[d];
    p->K = x->shape[x->ndim - 1];
}

/* ======================================================================== */
/* Builders                                                                  */
/* ======================================================================== */

mt_tensor *mt_graph_all_gather_linear(mt_graph *g, mt_tensor *x, mt_tensor *w, mt_tensor *bias,
                                      mt_axes axes, int dim) {
    const cm_names nm = {"all_gather_linear", "x"};
    int P = check_common(g, &nm, x, w, bias, axes);
    int64_t N, shape[MT_MAX_DIMS];
    int ndim;
    if (!P || !check_shapes(g, &nm, x, w, bias, dim, &N, &ndim, shape)) return NULL;
    shape[dim] *= P;   /* Y (.., P·s, .., O1..Ok) */
    mt_op_call c = {.op = MT_OP_AG_LINEAR, .n_in = bias ? 3 : 2, .in = {x, w, bias}};
    c.p.cm = (mt_cm_params){.axes = axes, .dim = dim, .P = P};
    block_view(x, dim, x->shape[dim], &c.p.cm);
    c.p.cm.N = N;
    if (!ring_pairs(g, &c.p.cm)) return NULL;
    c.out = mt__tensor_new(g, NULL, MT_F32, MT_ACT, ndim, shape);
    /* the gathered x, chunk-major (P, outer·R, K): the weight gradient's */
    const int64_t saved[3] = {P, c.p.cm.outer * c.p.cm.R, c.p.cm.K};
    c.aux[0] = c.out ? mt__tensor_new(g, NULL, MT_F32, MT_AUX, 3, saved) : NULL;
    if (!c.aux[0]) return NULL;
    mt_node n = {.call = c, .phase = MT_PHASE_F};
    /* device variance as the unfused all_gather then linear's */
    if (!mt__vma_operands(g, &n.call, nm.op, axes)) return NULL;
    return mt__node_add(g, &n) < 0 ? NULL : c.out;
}

mt_tensor *mt_graph_linear_reduce_scatter(mt_graph *g, mt_tensor *h, mt_tensor *w, mt_axes axes,
                                          int dim) {
    const cm_names nm = {"linear_reduce_scatter", "h"};
    int P = check_common(g, &nm, h, w, NULL, axes);
    int64_t N, shape[MT_MAX_DIMS];
    int ndim;
    if (!P || !check_shapes(g, &nm, h, w, NULL, dim, &N, &ndim, shape)) return NULL;
    if (h->shape[dim] % P != 0) {
        char sh[64];
        return mt__graph_error(g, MT_ESHAPE, "linear_reduce_scatter: h '%s' %s: dim %d has size "
                               "%lld, which does not split into %d blocks (the group size); make "
                               "it a multiple of %d", h->name, SHAPE(h, sh), dim,
                               (long long)h->shape[dim], P, P);
    }
    shape[dim] /= P;   /* out (.., s, .., O1..Ok) */
    mt_op_call c = {.op = MT_OP_LINEAR_RS, .n_in = 2, .in = {h, w}};
    c.p.cm = (mt_cm_params){.axes = axes, .dim = dim, .P = P};
    block_view(h, dim, h->shape[dim] / P, &c.p.cm);
    c.p.cm.N = N;
    if (!ring_pairs(g, &c.p.cm)) return NULL;
    c.out = mt__tensor_new(g, NULL, MT_F32, MT_ACT, ndim, shape);
    if (!c.out) return NULL;
    mt_node n = {.call = c, .phase = MT_PHASE_F};
    /* device variance as the unfused linear then psum_scatter's */
    if (!mt__vma_operands(g, &n.call, nm.op, axes)) return NULL;
    return mt__node_add(g, &n) < 0 ? NULL : c.out;
}

/* ======================================================================== */
/* Gradient rules                                                            */
/* ======================================================================== */

/* The ring product of the backward: the forward's group and blocks, the
 * contraction the other way (K and N swapped, op(w) transposed). */
static mt_cm_params transposed(const mt_cm_params *f) {
    mt_cm_params p = *f;
    p.K = f->N;
    p.N = f->K;
    p.w_kn = !f->w_kn;
    p.a_cm = p.b_cm = false;
    return p;
}

/* The weight gradient of w in a product with op(w), from the rows `rows_k`
 * (the product's contracted side, K long) and `rows_n` (its output side, N
 * long), either chunk-major: dw (N,K) = Σ rows_nᵀ · rows_k for w (N,K),
 * dw (K,N) = Σ rows_kᵀ · rows_n when w_kn. */
static void emit_wgrad(mt_graph *g, const mt_cm_params *f, mt_tensor *w, mt_tensor *rows_k,
                       bool k_cm, mt_tensor *rows_n, bool n_cm) {
    mt_op_call d = {.op = MT_OP_CM_WGRAD, .n_in = 2};
    d.p.cm = *f;
    if (f->w_kn) {
        d.in[0] = rows_k; d.p.cm.a_cm = k_cm;
        d.in[1] = rows_n; d.p.cm.b_cm = n_cm;
    } else {
        d.in[0] = rows_n; d.p.cm.a_cm = n_cm;
        d.in[1] = rows_k; d.p.cm.b_cm = k_cm;
        d.p.cm.K = f->N;
        d.p.cm.N = f->K;
    }
    mt__emit_grad(g, w, &d);
}

/* Y (outer,P,R,N) = gather(x (outer,R,K)) · op(w) + b; aux X (P,outer·R,K). */
void mt__grad_ag_linear(mt_graph *g, const mt_op_call *f) {
    mt_tensor *x = f->in[0], *w = f->in[1], *dy = f->out->grad;
    const mt_cm_params *p = &f->p.cm;
    /* dx (outer,R,K) = block r of Σ_group dY · op(w)ᵀ: the reduce-scatter ring */
    mt_op_call dx = {.op = MT_OP_LINEAR_RS, .n_in = 2, .in = {dy, w}};
    dx.p.cm = transposed(p);
    mt__emit_grad(g, x, &dx);
    emit_wgrad(g, p, w, f->aux[0], true, dy, false);
    if (f->n_in == 3) {
        mt_op_call db = {.op = MT_OP_BIAS_GRAD, .n_in = 1, .in = {dy}};
        db.p.rows = (mt_rows_params){.rows = p->outer * p->P * p->R, .C = p->N};
        mt__emit_grad(g, f->in[2], &db);
    }
}

/* out (outer,R,N) = block r of Σ_group h (outer,P,R,K) · op(w). */
void mt__grad_linear_rs(mt_graph *g, const mt_op_call *f) {
    mt_tensor *h = f->in[0], *w = f->in[1], *dout = f->out->grad;
    const mt_cm_params *p = &f->p.cm;
    /* the gathered cotangent, chunk-major (P, outer·R, N): dh's ring saves
     * it as it passes; the weight gradient reads it */
    const int64_t shape[3] = {p->P, p->outer * p->R, p->N};
    mt_tensor *gathered = mt__tensor_new(g, NULL, MT_F32, MT_AUX, 3, shape);
    if (!gathered) return;
    if (h->needs_grad) {
        /* dh (outer,P,R,K) = gather(dout) · op(w)ᵀ: the all-gather ring */
        mt_op_call dh = {.op = MT_OP_AG_LINEAR, .n_in = 2, .in = {dout, w}, .out2 = gathered};
        dh.p.cm = transposed(p);
        mt__emit_grad(g, h, &dh);
    } else if (w->needs_grad) {
        /* no dh to gather it on the way: a plain all_gather, whole buffers
         * one after the other (chunk-major), in the weight gradient's phase */
        mt_op_call ag = {.op = MT_OP_ALL_GATHER, .n_in = 1, .in = {dout}, .out = gathered};
        ag.p.coll = (mt_coll_params){.axes = p->axes, .dim = 0, .dim2 = -1};
        mt__emit_node(g, w->data_dep ? MT_PHASE_B : MT_PHASE_W, &ag);
    }
    emit_wgrad(g, p, w, h, false, gathered, true);
}
