/*
 * autodiff.c — reverse-mode differentiation of a built graph.
 *
 * Walks the forward nodes backwards from the loss and asks each op's backward
 * builder (ops/op_table.c) to emit the nodes that compute the gradients of its
 * inputs. Each emitted node is tagged:
 *   B  when the tensor it differentiates depends on the data (an activation):
 *      its gradient is needed to keep propagating towards the inputs;
 *   W  when that tensor is derived from parameters only: nothing upstream
 *      waits for it, so a pipeline schedule may defer it (zero bubble).
 * Gradients accumulate: the first contribution to an activation gradient
 * writes, later ones add; parameter gradients always add, so running F+B+W
 * over several microbatches accumulates their gradient.
 */
#include "graph/graph_impl.h"

#include <stdlib.h>

mt_tensor *mt__grad_of(mt_graph *g, mt_tensor *t) {
    if (t->grad) return t->grad;
    char name[MT_MAX_NAME + 8];
    snprintf(name, sizeof name, "grad.%s", t->name);
    name[MT_MAX_NAME - 1] = '\0';
    mt_tensor *root = mt__storage_root(t);
    mt_tensor *gr = mt__tensor_new(g, NULL, MT_F32, MT_GRAD, t->ndim, t->shape);
    if (!gr) return NULL;
    if (!mt_graph_find(g, name)) mt_tensor_set_name(gr, name);
    gr->grad_of = t;
    gr->data_dep = t->data_dep;
    if (root != t) {
        mt_tensor *rg = mt__grad_of(g, root);
        if (!rg) return NULL;
        gr->view_of = rg;
    }
    t->grad = gr;
    return gr;
}

void mt__emit_grad(mt_graph *g, mt_tensor *wrt, mt_node *node) {
    if (!wrt->needs_grad || wrt->dtype != MT_F32) return;
    mt_tensor *root = mt__storage_root(wrt);
    node->out = mt__grad_of(g, wrt);
    if (!node->out) return;
    node->phase = wrt->data_dep ? MT_PHASE_B : MT_PHASE_W;
    node->acc = root->kind == MT_PARAM || root->grad_emitted > 0;
    if (root->kind == MT_PARAM && root->grad_emitted == 0) node->param_first |= 1;
    root->grad_emitted++;
    int idx = mt__node_add(g, node);
    if (idx < 0) return;
    int **order = node->phase == MT_PHASE_B ? &g->order_b : &g->order_w;
    int *n = node->phase == MT_PHASE_B ? &g->n_b : &g->n_w;
    int *p = realloc(*order, (size_t)(*n + 1) * sizeof **order);
    if (!p) { mt__graph_error(g, MT_ENOMEM, "out of memory for the backward schedule"); return; }
    *order = p;
    (*order)[(*n)++] = idx;
}

/* A tensor and everything it is a view of. */
static void mark(mt_tensor *t, bool *on_path) {
    for (; t; t = t->view_of) on_path[t->id] = true;
}

mt_status mt__autodiff(mt_graph *g) {
    int n_fwd = g->n_forward;
    if (!g->loss->needs_grad)
        return mt_fail(MT_EINVAL, "the loss '%s' does not depend on any parameter; "
                       "there is nothing to train", g->loss->name);

    /* 1. Nodes on a path to the loss. */
    bool *on_path = calloc((size_t)g->n_tensors, sizeof *on_path);
    if (!on_path) return mt_fail(MT_ENOMEM, "out of memory in autodiff");
    mark(g->loss, on_path);
    for (int i = n_fwd - 1; i >= 0; i--) {
        mt_node *n = &g->nodes[i];
        if (!on_path[n->out->id]) continue;
        for (int k = 0; k < n->n_in; k++) mark(n->in[k], on_path);
    }

    /* 2. Emit, last forward node first. The seed d(loss)/d(loss) = 1 is
     *    written by mt_graph_backward_b into the loss's gradient. */
    mt_tensor *seed = mt__grad_of(g, g->loss);
    if (seed) mt__storage_root(g->loss)->grad_emitted = 1;
    for (int i = n_fwd - 1; i >= 0 && g->status == MT_OK; i--) {
        mt_node n = g->nodes[i];   /* copy: emitting may move the node array */
        if (!on_path[n.out->id] || !n.out->needs_grad) continue;
        if (mt__storage_root(n.out)->grad_emitted == 0) continue;  /* no gradient arrives */
        mt__op_def(n.op)->backward(g, &n);
    }
    free(on_path);
    if (g->status != MT_OK) return mt_fail(g->status, "%s", g->errmsg);
    return MT_OK;
}
