/*
 * listing.c — a program node by node, for listings such as `meshtrain
 * explain` (mt_graph_n_nodes, mt_graph_node) and mt_graph_print.
 */
#include "graph/op_desc.h"

#include <stdio.h>

int mt_graph_n_nodes(const mt_graph *g) { return g->prog ? g->n_forward + g->prog->n_b + g->prog->n_w : 0; }

/* The node index of the i-th node in run order (forward, B, W). */
static int run_order(const mt_graph *g, int i) {
    if (i < g->n_forward) return i;
    i -= g->n_forward;
    return i < g->prog->n_b ? g->prog->order_b[i] : g->prog->order_w[i - g->prog->n_b];
}

/* The axes a call communicates (or pvary and slice name) over, and the dims
 * it gathers, scatters or slices: dim[1] >= 0 only for all_to_all (split
 * dim, then concat dim). False for a call without axes. From the op's
 * communication class (op_desc.c); a collective's unused dims are -1
 * (mt_coll_params). */
static bool call_axes(const mt_op_call *c, mt_axes *axes, int dim[2]) {
    dim[0] = dim[1] = -1;
    switch (mt__op_gdesc(c->op)->comm) {
    case MT_COMM_COLL_OUT:
    case MT_COMM_COLL_IN:
    case MT_COMM_COLL_LOCAL:
        *axes = c->p.coll.axes;
        dim[0] = c->p.coll.dim;
        dim[1] = c->p.coll.dim2;
        return true;
    case MT_COMM_RING_GATHER:
    case MT_COMM_RING_SCATTER:
        *axes = c->p.cm.axes;
        dim[0] = c->p.cm.dim;
        return true;
    case MT_COMM_VP_STATS:
        *axes = c->p.ce.vp_axes;
        return c->p.ce.vp_axes.n > 0;
    case MT_COMM_MOE_EXCHANGE:
        *axes = c->p.moe.ep;
        return c->p.moe.ep_size > 1;
    case MT_COMM_UNSET:
    case MT_COMM_NONE:
        break;
    }
    return false;
}

/* Whether call c moves data between devices, its axes (pvary's and
 * slice's too: they move nothing) and its size as nccl-tests counts it:
 * the buffer it reduces or fills (psum_scatter: its input; bf16 on the
 * wire: half), a collective matmul's P-1 ring chunks, the
 * vocabulary-parallel loss's row statistics. */
static bool comm_of(const mt_op_call *c, mt_axes *axes, double *bytes) {
    *bytes = 0;
    const mt_op_comm comm = mt__op_gdesc(c->op)->comm;   /* op_desc.c */
    switch (comm) {
    case MT_COMM_COLL_OUT:
    case MT_COMM_COLL_IN: {
        /* the buffer it reduces or fills, not the memory traffic of the call */
        const mt_tensor *t = comm == MT_COMM_COLL_IN ? c->in[0] : c->out;
        *axes = c->p.coll.axes;
        *bytes = (double)mt__tensor_bytes(t);
        if (c->p.coll.gather16 || c->p.coll.bf16) *bytes /= 2;   /* bf16 on the wire */
        return true;
    }
    case MT_COMM_COLL_LOCAL:   /* pvary, slice: axes, no communication */
        *axes = c->p.coll.axes;
        break;
    case MT_COMM_RING_GATHER:
    case MT_COMM_RING_SCATTER: {
        /* a collective matmul moves its operand around the ring: P-1
         * ppermutes of one chunk each, what its trace shows (the all-gather
         * or reduce-scatter it replaces moves as much, but nccl's size counts
         * the device's own chunk too: P chunks) */
        const mt_cm_params *p = &c->p.cm;
        *axes = p->axes;
        *bytes = 4.0 * (p->P - 1) * (double)p->outer * (double)p->R *
                 (double)(comm == MT_COMM_RING_GATHER ? p->K : p->N);
        return true;
    }
    case MT_COMM_VP_STATS:
        /* the vocabulary-parallel loss all-reduces its row statistics
         * inside: the max (rows), then the sums and the target logits (2, rows) */
        if (c->p.ce.vp_axes.n) {
            *axes = c->p.ce.vp_axes;
            *bytes = 3.0 * (double)c->p.ce.rows * sizeof(float);
            return true;
        }
        break;
    case MT_COMM_MOE_EXCHANGE:
        /* an expert product over the expert axis: its size depends on the
         * routing, so the listing gives it at balance, the bytes that leave
         * the device (ops/moe_ep.c): the counts' all-to-all (el int32 to
         * each of P-1 peers), then (P-1)/P of the N rows, C wide one way
         * and OC the other (the forward and bwd_x: out and back; bwd_w:
         * the rows and their gradients out) */
        if (c->p.moe.ep_size > 1) {
            const mt_moe_op_params *p = &c->p.moe;
            const mt_tensor *w = c->op == MT_OP_MOE_EXPERTS_BWD_W ? c->out : c->in[1];
            const double P = p->ep_size, N = (double)mt_tensor_numel(c->in[c->n_in - 1]);
            *axes = p->ep;
            *bytes = 4.0 * ((double)(p->E / p->ep_size) * (P - 1) +
                            N * (P - 1) / P * (double)(w->shape[1] + w->shape[2]));
            return true;
        }
        break;
    case MT_COMM_UNSET:
    case MT_COMM_NONE:
        break;
    }
    return false;
}

/* Attention's query rows B·NH·T and keys Tk (0: T) into info, with its
 * score elements rows·Tk. */
static void attention_shape(mt_node_info *info, int64_t B, int64_t NH, int64_t T, int64_t Tk) {
    info->attention_rows = (double)B * (double)NH * (double)T;
    info->attention_keys = (double)(Tk ? Tk : T);
    info->attention_scores = info->attention_rows * info->attention_keys;
}

/* A product's M, N, K and attention's rows, keys and score elements
 * (mt_node_info). */
static void product_shape(const mt_op_call *c, mt_node_info *info) {
    switch (c->op) {
    case MT_OP_MATMUL:
    case MT_OP_GEMM:
        info->gemm_m = (double)c->p.gemm.M;
        info->gemm_n = (double)c->p.gemm.N;
        info->gemm_k = (double)c->p.gemm.K;
        break;
    case MT_OP_LINEAR:
        info->gemm_m = (double)c->p.linear.rows;
        info->gemm_n = (double)c->p.linear.OC;
        info->gemm_k = (double)c->p.linear.C;
        break;
    case MT_OP_ATTENTION:
    case MT_OP_ATTENTION_BWD:
        attention_shape(info, c->p.attention.B, c->p.attention.NH, c->p.attention.T,
                        c->p.attention.Tk);
        break;
    case MT_OP_ATTENTION_GQA:
    case MT_OP_GQA_BWD_QK:
    case MT_OP_GQA_BWD_V:
        attention_shape(info, c->p.gqa.B, c->p.gqa.NH, c->p.gqa.T, c->p.gqa.Tk);
        break;
    case MT_OP_RING_ATTENTION:
    case MT_OP_RING_ATTENTION_BWD:
        /* one ring step's kernel: the local rows against the T keys of the
           block that arrived (its scores are not counted as the unfused
           path's: no framework convention runs a ring unfused) */
        info->attention_rows = (double)c->p.ring.B * (double)c->p.ring.NH * (double)c->p.ring.T;
        info->attention_keys = (double)c->p.ring.T;
        break;
    default:
        break;
    }
}

mt_status mt_graph_node(const mt_graph *g, int i, mt_node_info *info) {
    if (!g->prog)
        return mt_fail(MT_EINVAL, "mt_graph_node: compile the graph first (mt_graph_compile)");
    if (i < 0 || i >= mt_graph_n_nodes(g))
        return mt_fail(MT_EINVAL, "mt_graph_node: node %d of a program of %d", i,
                       mt_graph_n_nodes(g));
    const mt_node *n = &g->nodes[run_order(g, i)];
    const mt_op_call *c = &n->call;
    static const char PHASE[3] = {'F', 'B', 'W'};
    memset(info, 0, sizeof *info);
    info->phase = PHASE[n->phase];
    info->op = mt__op_def(c->op)->name;
    info->out = c->out;
    info->stored = n->cast_out ? n->cast_out : c->out;
    info->accumulates = c->acc;
    info->n_in = c->n_in;
    _Static_assert(MT_MAX_INPUTS <= (int)(sizeof info->in / sizeof info->in[0]),
                   "mt_node_info.in holds every input an op reads");
    for (int k = 0; k < c->n_in; k++) info->in[k] = c->in[k];
    mt__op_def(c->op)->cost(c, &info->flops, &info->mem_bytes);
    info->collective = comm_of(c, &info->axes, &info->comm_bytes);
    info->once_a_step = (c->op == MT_OP_ALL_GATHER && mt__storage_root(c->out)->step_kept) ||
                        mt__step_reduced(n) || mt__later_reducible(n);
    product_shape(c, info);
    info->recompute = n->recompute;
    info->block = n->block;
    info->live_bytes = (double)n->live_bytes;
    return MT_OK;
}

/* Whether t's storage is a gradient of a parameter or of a kept gathered copy. */
static bool param_grad(mt_tensor *t) {
    const mt_tensor *r = mt__storage_root(t);
    if (r->kind != MT_GRAD || !r->grad_of) return false;
    const mt_tensor *of = mt__storage_root(r->grad_of);
    return of->kind == MT_PARAM || of->grad_kept;
}

void mt__comm_count_node(mt_graph *g, const mt_node *n) {
    const mt_op_call *c = &n->call;
    mt_axes axes;
    double bytes;
    if (!comm_of(c, &axes, &bytes)) return;
    mt_comm_count *k = &g->prog->comm;
    k->n_collectives++;
    if (c->op == MT_OP_ALL_GATHER && mt__storage_root(c->in[0])->kind == MT_PARAM) {
        k->param_gather += (double)mt_tensor_numel(c->out);
        k->param_gather_bytes += bytes;
    } else if (c->op == MT_OP_PSUM_SCATTER && param_grad(c->out)) {
        k->grad_scatter += (double)mt_tensor_numel(c->in[0]);
        k->grad_scatter_bytes += bytes;
    } else if (c->op == MT_OP_PSUM && param_grad(c->out)) {
        k->grad_reduce += (double)mt_tensor_numel(c->out);
        k->grad_reduce_bytes += bytes;
    } else {
        k->other_bytes += bytes;
    }
}

mt_comm_count mt_graph_comm_count(const mt_graph *g) {
    return g && g->prog ? g->prog->comm : (mt_comm_count){0};
}

void mt_graph_comm_reset(mt_graph *g) {
    if (g && g->prog) g->prog->comm = (mt_comm_count){0};
}

/* "psum[data]", "all_gather[tensor] dim=1", "all_to_all[x] dim=0->1",
 * "psum[data,tensor]" (the names as mt_mesh_axes takes them; "axis<k>" on
 * a graph bound to no device); the op's name alone when it has no axes. */
static const char *op_text(const mt_graph *g, const mt_op_call *c, char *buf, size_t cap) {
    mt_axes axes;
    int dim[2];
    const char *name = mt__op_def(c->op)->name;
    if (!call_axes(c, &axes, dim)) return name;
    const mt_mesh *mesh = g->ctx ? mt_ctx_mesh(g->ctx) : NULL;
    int at = snprintf(buf, cap, "%s[", name);
    for (int k = 0; k < axes.n && at >= 0 && (size_t)at < cap; k++) {
        const char *sep = k ? "," : "";
        at += mesh ? snprintf(buf + at, cap - (size_t)at, "%s%s", sep,
                              mt_mesh_axis_name(mesh, axes.axis[k]))
                   : snprintf(buf + at, cap - (size_t)at, "%saxis%d", sep, axes.axis[k]);
    }
    if (at >= 0 && (size_t)at < cap) {
        if (dim[1] >= 0) snprintf(buf + at, cap - (size_t)at, "] dim=%d->%d", dim[0], dim[1]);
        else if (dim[0] >= 0) snprintf(buf + at, cap - (size_t)at, "] dim=%d", dim[0]);
        else snprintf(buf + at, cap - (size_t)at, "]");
    }
    return buf;
}

void mt_graph_print(const mt_graph *g, FILE *out) {
    static const char phase_name[3] = {'F', 'B', 'W'};
    for (int i = 0; i < g->n_nodes; i++) {
        const mt_node *n = &g->nodes[i];
        const mt_op_call *c = &n->call;
        char buf[64], op[96];
        double fl = 0, by = 0;
        mt__op_def(c->op)->cost(c, &fl, &by);
        fprintf(out, "%c %-16s %-22s %-18s %s", phase_name[n->phase], op_text(g, c, op, sizeof op),
                c->out->name, mt__shape_str(c->out, buf, sizeof buf), c->acc ? "+=" : "= ");
        for (int k = 0; k < c->n_in; k++) fprintf(out, " %s", c->in[k]->name);
        fprintf(out, "   %.3g MFLOP %.3g MB\n", fl * 1e-6, by * 1e-6);
    }
}
