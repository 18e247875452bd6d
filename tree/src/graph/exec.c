/*
 * exec.c — running a compiled graph: forward, then B, then W.
 */
#include "graph/graph_impl.h"

#include <string.h>

static mt_status check_compiled(const mt_graph *g, const char *what) {
    if (g->status != MT_OK) return mt_fail(g->status, "%s", g->errmsg);
    if (!g->compiled) return mt_fail(MT_ESTATE, "%s: compile the graph first (mt_graph_compile)", what);
    return MT_OK;
}

mt_status mt_graph_forward(mt_graph *g) {
    mt_status s = check_compiled(g, "mt_graph_forward");
    if (s != MT_OK) return s;
    for (int i = 0; i < g->n_forward; i++) {
        const mt_node *n = &g->nodes[i];
        mt__op_def(n->op)->run(g, n);
    }
    g->loss_value = *(const float *)g->loss->data;
    return MT_OK;
}

mt_status mt_graph_backward_b(mt_graph *g) {
    mt_status s = check_compiled(g, "mt_graph_backward_b");
    if (s != MT_OK) return s;
    if (g->no_grad) return mt_fail(MT_ESTATE, "graph was compiled with no_grad; it has no backward");
    *(float *)g->loss->grad->data = 1.0f;   /* d loss / d loss */
    for (int j = 0; j < g->n_b; j++) {
        const mt_node *n = &g->nodes[g->order_b[j]];
        mt__op_def(n->op)->run(g, n);
    }
    return MT_OK;
}

mt_status mt_graph_backward_w(mt_graph *g) {
    mt_status s = check_compiled(g, "mt_graph_backward_w");
    if (s != MT_OK) return s;
    if (g->no_grad) return mt_fail(MT_ESTATE, "graph was compiled with no_grad; it has no backward");
    for (int j = 0; j < g->n_w; j++) {
        const mt_node *n = &g->nodes[g->order_w[j]];
        mt__op_def(n->op)->run(g, n);
    }
    return MT_OK;
}

mt_status mt_graph_backward(mt_graph *g) {
    mt_status s = mt_graph_backward_b(g);
    return s == MT_OK ? mt_graph_backward_w(g) : s;
}

void mt_graph_zero_grad(mt_graph *g) {
    for (int i = 0; i < g->n_tensors; i++) {
        mt_tensor *t = g->tensors[i];
        if (t->kind == MT_PARAM && t->grad && t->grad->data)
            memset(t->grad->data, 0, (size_t)mt_tensor_numel(t) * sizeof(float));
    }
}

float mt_graph_loss(const mt_graph *g) { return g->loss_value; }
