/*
 * emit.c — what a gradient rule's nodes write: the gradient tensors (made on
 * first request), whether a contribution writes or adds, and the phase and
 * run order each emitted node goes in. The rules (grad_rules.c,
 * collective_matmul.c) call it; autodiff.c walks the graph and calls them.
 */
#include "graph/graph_impl.h"

#include <stdio.h>
#include <stdlib.h>

mt_tensor *mt__grad_of(mt_graph *g, mt_tensor *t) {
    if (t->grad) return t->grad;
    char name[MT_MAX_NAME + 8];
    mt__name_derived(name, sizeof name, "grad.", t->name, (size_t)-1, "");
    name[MT_MAX_NAME - 1] = '\0';
    mt_tensor *root = mt__storage_root(t);
    /* named after t when that name is free (a user may have taken it) */
    mt_tensor *gr = mt__tensor_new(g, mt_graph_find(g, name) ? NULL : name, MT_F32, MT_GRAD,
                                   t->ndim, t->shape);
    if (!gr) return NULL;
    gr->grad_of = t;
    gr->data_dep = t->data_dep;
    gr->sharding = t->sharding;             /* laid out as its tensor (partitioned graphs) */
    gr->sharding.partial_axes = 0;
    if (root != t) {
        mt_tensor *rg = mt__grad_of(g, root);
        if (!rg) return NULL;
        gr->view_of = rg;
    }
    t->grad = gr;
    return gr;
}

/* Takes the next contribution to the gradient of wrt: returns grad(wrt) (NULL
 * on error) and sets *acc and, for a parameter's first one, `first_bit` in
 * *param_first. */
static mt_tensor *contribute(mt_graph *g, mt_tensor *wrt, bool *acc, uint8_t *param_first,
                             uint8_t first_bit) {
    mt_tensor *root = mt__storage_root(wrt);
    mt_tensor *gr = mt__grad_of(g, wrt);
    if (!gr) return NULL;
    /* a kept gradient (mt_tensor.grad_kept) accumulates over passes as a
     * parameter's does */
    const bool kept = root->kind == MT_PARAM || root->grad_kept;
    *acc = kept || root->grad_emitted > 0;
    if (kept && root->grad_emitted == 0) *param_first |= first_bit;
    root->grad_emitted++;
    return gr;
}

/* Appends node (its outputs filled in) and puts it in its phase's run order. */
static void append(mt_graph *g, const mt_node *node) {
    int idx = mt__node_add(g, node);
    if (idx < 0) return;
    int **order = node->phase == MT_PHASE_B ? &g->prog->order_b : &g->prog->order_w;
    int *n = node->phase == MT_PHASE_B ? &g->prog->n_b : &g->prog->n_w;
    /* both run orders have room for every node: they grow when the node list does */
    if (g->prog->cap_order < g->cap_nodes) {
        int *b = realloc(g->prog->order_b, (size_t)g->cap_nodes * sizeof *b);
        if (b) g->prog->order_b = b;
        int *w = b ? realloc(g->prog->order_w, (size_t)g->cap_nodes * sizeof *w) : NULL;
        if (w) g->prog->order_w = w;
        if (!b || !w) { mt__graph_error(g, MT_ENOMEM, "out of memory for the backward schedule"); return; }
        g->prog->cap_order = g->cap_nodes;
    }
    (*order)[(*n)++] = idx;
}

bool mt__takes_grad(const mt_tensor *t) { return t->needs_grad && t->dtype == MT_F32; }

void mt__emit_grad(mt_graph *g, mt_tensor *wrt, const mt_op_call *call) {
    if (!mt__takes_grad(wrt)) return;
    mt_node node = {.call = *call, .phase = wrt->data_dep ? MT_PHASE_B : MT_PHASE_W};
    node.call.out = contribute(g, wrt, &node.call.acc, &node.param_first, MT_FIRST_OUT);
    node.kept_out = mt__storage_root(wrt)->grad_kept;
    if (node.call.out) append(g, &node);
}

void mt__emit_grad2(mt_graph *g, mt_tensor *wrt, mt_tensor *wrt2, const mt_op_call *call) {
    if (!mt__takes_grad(wrt)) return;
    mt_node node = {.call = *call, .phase = wrt->data_dep ? MT_PHASE_B : MT_PHASE_W};
    /* out2's gradient tensor is made first, as layernorm's rule always made
     * db's before dw's: creation order sets tensor ids, hence default names
     * and the buffer plan's order among tensors of equal size */
    node.call.out2 = contribute(g, wrt2, &node.call.acc2, &node.param_first, MT_FIRST_OUT2);
    if (!node.call.out2) return;
    node.call.out = contribute(g, wrt, &node.call.acc, &node.param_first, MT_FIRST_OUT);
    node.kept_out = mt__storage_root(wrt)->grad_kept;   /* wrt2 is of the same kind */
    if (node.call.out) append(g, &node);
}

void mt__emit_node(mt_graph *g, mt_phase phase, const mt_op_call *call) {
    mt_node node = {.call = *call, .phase = phase};
    append(g, &node);
}
