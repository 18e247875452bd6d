/*
 * listing.c — a compiled program node by node, for listings such as
 * `meshtrain explain` (mt_graph_n_nodes, mt_graph_node).
 */
#include "graph/graph_impl.h"

int mt_graph_n_nodes(const mt_graph *g) { return g->compiled ? g->n_forward + g->n_b + g->n_w : 0; }

/* The node index of the i-th node in run order (forward, B, W). */
static int run_order(const mt_graph *g, int i) {
    if (i < g->n_forward) return i;
    i -= g->n_forward;
    return i < g->n_b ? g->order_b[i] : g->order_w[i - g->n_b];
}

mt_status mt_graph_node(const mt_graph *g, int i, mt_node_info *info) {
    if (!g->compiled)
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
    info->accumulates = c->acc;
    info->n_in = c->n_in;
    for (int k = 0; k < c->n_in && k < 5; k++) info->in[k] = c->in[k];
    bool coll_op = c->op >= MT_OP_PSUM && c->op <= MT_OP_SLICE;
    info->collective = coll_op && c->op != MT_OP_PVARY && c->op != MT_OP_SLICE;
    if (coll_op) info->axes = c->p.coll.axes;
    mt__op_def(c->op)->cost(c, &info->flops, &info->bytes);
    /* a collective's size as nccl-tests counts it: the buffer it reduces or
     * fills (psum_scatter: its input), not the memory traffic of the call */
    if (info->collective) {
        const mt_tensor *t = c->op == MT_OP_PSUM_SCATTER ? c->in[0] : c->out;
        info->bytes = (double)mt__tensor_bytes(t);
        if (c->p.coll.gather16 || c->p.coll.bf16) info->bytes /= 2;   /* bf16 on the wire */
    }
    /* a collective matmul moves its operand around the ring: P-1 ppermutes
     * of one chunk each, what its trace shows (the all-gather or
     * reduce-scatter it replaces moves as much, but nccl's size counts the
     * device's own chunk too: P chunks) */
    if (c->op == MT_OP_AG_LINEAR || c->op == MT_OP_LINEAR_RS) {
        const mt_cm_params *p = &c->p.cm;
        info->collective = true;
        info->axes = p->axes;
        info->bytes = 4.0 * (p->P - 1) * (double)p->outer * (double)p->R *
                      (double)(c->op == MT_OP_AG_LINEAR ? p->K : p->N);
    }
    /* the vocabulary-parallel loss all-reduces its row statistics inside:
     * the max (rows), then the sums and the target logits (2, rows) */
    if (c->op == MT_OP_CROSS_ENTROPY && c->p.ce.vp_axes.n) {
        info->collective = true;
        info->axes = c->p.ce.vp_axes;
        info->bytes = 3.0 * (double)c->p.ce.rows * sizeof(float);
    }
    return MT_OK;
}
