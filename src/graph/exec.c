/*
 * exec.c — running a compiled graph: forward, then B, then W.
 *
 * Calls cannot fail except the collective ones (ops/collective.c), which
 * record their failure in g->run_status through the environment; a run
 * checks it after every node and stops at the first failure, returning it
 * with the node named before comm's message.
 */
#include "graph/graph_impl.h"

#include <stdlib.h>
#include <string.h>

/* Wraps a call's failure (its message in mt_errmsg()) with the node. */
static mt_status node_failed(mt_graph *g, const mt_node *n) {
    static const char *phase_name[3] = {"forward", "backward B", "backward W"};
    mt_status s = g->run_status;
    g->run_status = MT_OK;
    return mt_fail_wrap(s, "%s node %d (%s -> '%s')", phase_name[n->phase], (int)(n - g->nodes),
                        mt__op_def(n->call.op)->name, n->call.out->name);
}

/* Runs one node; with profiling on, adds its time to its op's row. While the
 * gradients are marked zero, a parameter gradient's first contribution
 * overwrites instead of adding, whichever output of the node receives it.
 * Returns the call's failure (a collective's), wrapped with the node. */
static mt_status run_node(mt_graph *g, const mt_node *n) {
    const mt_op_call *c = &n->call;
    mt_op_call first;
    if (g->grads_zero && n->param_first) {
        first = *c;
        if (n->param_first & MT_FIRST_OUT) first.acc = false;
        if (n->param_first & MT_FIRST_OUT2) first.acc2 = false;
        c = &first;
    }
    const mt_op_def *def = mt__op_def(c->op);
    if (!g->profile) {
        def->run(&g->env, c);
        return g->run_status == MT_OK ? MT_OK : node_failed(g, n);
    }
    double t0 = mt_time_now();
    def->run(&g->env, c);
    double fl = 0, by = 0;
    def->cost(c, &fl, &by);
    mt_op_profile *p = &g->profile[c->op];
    p->seconds += mt_time_now() - t0;
    p->calls++;
    p->flops += fl;
    p->bytes += by;
    return g->run_status == MT_OK ? MT_OK : node_failed(g, n);
}

static mt_status check_compiled(mt_graph *g, const char *what) {
    if (g->status != MT_OK) return mt_fail(g->status, "%s", g->errmsg);
    if (!g->compiled) return mt_fail(MT_ESTATE, "%s: compile the graph first (mt_graph_compile)", what);
    g->run_status = MT_OK;
    g->env.status = &g->run_status;
    return MT_OK;
}

mt_status mt_graph_forward(mt_graph *g) {
    mt_status s = check_compiled(g, "mt_graph_forward");
    if (s != MT_OK) return s;
    for (int i = 0; i < g->n_forward; i++)
        if ((s = run_node(g, &g->nodes[i])) != MT_OK) return s;
    g->loss_value = *(const float *)g->loss->data;
    return MT_OK;
}

mt_status mt_graph_backward_b(mt_graph *g) {
    mt_status s = check_compiled(g, "mt_graph_backward_b");
    if (s != MT_OK) return s;
    if (g->no_grad) return mt_fail(MT_ESTATE, "graph was compiled with no_grad; it has no backward");
    *(float *)g->loss->grad->data = 1.0f;   /* d loss / d loss */
    for (int j = 0; j < g->n_b; j++)
        if ((s = run_node(g, &g->nodes[g->order_b[j]])) != MT_OK) return s;
    return MT_OK;
}

mt_status mt_graph_backward_w(mt_graph *g) {
    mt_status s = check_compiled(g, "mt_graph_backward_w");
    if (s != MT_OK) return s;
    if (g->no_grad) return mt_fail(MT_ESTATE, "graph was compiled with no_grad; it has no backward");
    for (int j = 0; j < g->n_w; j++)
        if ((s = run_node(g, &g->nodes[g->order_w[j]])) != MT_OK) return s;
    g->grads_zero = false;
    return MT_OK;
}

mt_status mt_graph_backward(mt_graph *g) {
    mt_status s = mt_graph_backward_b(g);
    return s == MT_OK ? mt_graph_backward_w(g) : s;
}

void mt__graph_mark_grads_zero(mt_graph *g) { g->grads_zero = true; }

void mt_graph_zero_grad(mt_graph *g) {
    g->grads_zero = false;
    for (int i = 0; i < g->n_params; i++) {
        mt_tensor *t = g->params[i];
        if (t->grad && t->grad->data)
            memset(t->grad->data, 0, (size_t)mt_tensor_numel(t) * sizeof(float));
    }
}

float mt_graph_loss(const mt_graph *g) { return g->loss_value; }

mt_status mt_graph_set_profiling(mt_graph *g, bool on) {
    free(g->profile);
    g->profile = NULL;
    if (on && !(g->profile = calloc(MT_OP_COUNT, sizeof *g->profile)))
        return mt_fail(MT_ENOMEM, "out of memory for the profile");
    return MT_OK;
}

void mt_graph_print_profile(const mt_graph *g, FILE *out) {
    if (!g->profile) {
        fprintf(out, "profiling is off (mt_graph_set_profiling)\n");
        return;
    }
    double total = 0;
    for (int op = 0; op < MT_OP_COUNT; op++) total += g->profile[op].seconds;
    fprintf(out, "%-16s %8s %10s %6s %10s %9s\n", "op", "calls", "ms", "%", "GFLOP/s", "GB/s");
    for (int op = 0; op < MT_OP_COUNT; op++) {
        const mt_op_profile *p = &g->profile[op];
        if (!p->calls) continue;
        double s = p->seconds > 0 ? p->seconds : 1e-12;
        fprintf(out, "%-16s %8lld %10.3f %5.1f%% %10.2f %9.2f\n", mt__op_def((mt_op)op)->name,
                (long long)p->calls, p->seconds * 1e3, 100 * p->seconds / (total > 0 ? total : 1),
                p->flops / s * 1e-9, p->bytes / s * 1e-9);
    }
    fprintf(out, "%-16s %8s %10.3f\n", "total", "", total * 1e3);
}
