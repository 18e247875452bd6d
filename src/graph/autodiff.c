/*
 * autodiff.c — reverse-mode differentiation of a built graph.
 *
 * Walks the forward nodes backwards from the loss and asks each op's gradient
 * rule (grad_rules.c) to emit the nodes that compute the gradients of its
 * inputs. Each emitted node is tagged:
 *   B  when the tensor it differentiates depends on the data (an activation):
 *      its gradient is needed to keep propagating towards the inputs;
 *   W  when that tensor is derived from parameters only: nothing upstream
 *      waits for it, so a pipeline schedule may defer it (zero bubble).
 * Gradients accumulate: the first contribution to an activation gradient
 * writes, later ones add; parameter gradients always add, so running F+B+W
 * over several microbatches accumulates their gradient. The rules only say
 * what to compute from what; emit.c decides where the result goes and
 * whether it adds, for every output of a node (one or two).
 */
#include "graph/graph_impl.h"

#include <assert.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

/* A tensor and everything it is a view of. */
static void mark(mt_tensor *t, bool *on_path) {
    for (; t; t = t->view_of) on_path[t->id] = true;
}

/* FSDP's re-gather: every forward all-gather whose output is marked
 * `regather` (a parameter gathered whole from its shards) runs again in the
 * backward, and the backward nodes that read its output read the new copy.
 * The forward copy then dies at its last forward reader and the plan reuses
 * its bytes; the backward copy lives from the re-gather to its last reader.
 * Each re-gather is prefetched: placed before the first reader of the one
 * before it (in the backward's order; the first one just before its own
 * reader), and marked async, so that the executor starts it there and it
 * travels under that parameter's work (plan.c, exec.c). About two layers'
 * gathered parameters are alive at a time, instead of all of them. */
typedef struct {
    int     clone;     /* node index of the re-gather */
    mt_phase phase;    /* of its first reader */
    int     at;        /* the first reader's position in its phase's order */
    int     before;    /* where the re-gather goes: before this position */
} regather_site;

static int by_site(const void *a, const void *b) {
    const regather_site *x = a, *y = b;
    if (x->phase != y->phase) return x->phase < y->phase ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

/* Rebuilds a phase's order with the re-gathers of `sites` (sorted) put
 * before their positions; the order holds `n_old` original entries, then
 * the re-gathers appended at its end. */
static mt_status place_regathers(mt_graph *g, int *order, int n_old, int n_all,
                                 const regather_site *sites, int n_sites, mt_phase phase) {
    int *placed = malloc((size_t)n_all * sizeof *placed);
    if (!placed) return mt_fail(MT_ENOMEM, "out of memory placing the re-gathers");
    int k = 0, out = 0;
    while (k < n_sites && sites[k].phase != phase) k++;
    for (int j = 0; j < n_old; j++) {
        for (int q = k; q < n_sites && sites[q].phase == phase; q++)
            if (sites[q].before == j) placed[out++] = sites[q].clone;
        placed[out++] = order[j];
    }
    memcpy(order, placed, (size_t)out * sizeof *order);
    free(placed);
    (void)g;
    return out == n_all ? MT_OK : mt_fail(MT_EINTERNAL, "placing the re-gathers lost nodes");
}

static void regather_params(mt_graph *g) {
    const int n_fwd = g->n_forward, n_b0 = g->prog->n_b, n_w0 = g->prog->n_w;
    const int n_t0 = g->n_tensors, n_nodes0 = g->n_nodes;
    /* each gathered parameter's first backward reader, in run order (B,
       then W): one pass over the orders (a search a parameter was
       quadratic in the model's size: 16 % of a 1024-device MoE's explain) */
    int *first = malloc(((size_t)n_t0 + 1) * sizeof *first);   /* (n_t0) position, -1 */
    mt_phase *first_phase = malloc(((size_t)n_t0 + 1) * sizeof *first_phase);   /* (n_t0) */
    mt_tensor **copy_of = calloc((size_t)n_t0 + 1, sizeof *copy_of);   /* (n_t0) its re-gather */
    regather_site *sites = NULL;
    int n_sites = 0;
    if (!first || !first_phase || !copy_of) {
        mt__graph_error(g, MT_ENOMEM, "out of memory for the re-gathers");
        goto done;
    }
    for (int t = 0; t < n_t0; t++) first[t] = -1;
    for (int ph = 0; ph < 2; ph++) {
        const int *order = ph == 0 ? g->prog->order_b : g->prog->order_w;
        const int n = ph == 0 ? n_b0 : n_w0;
        for (int j = 0; j < n; j++) {
            const mt_op_call *c = &g->nodes[order[j]].call;
            for (int k = 0; k < c->n_in; k++) {
                const mt_tensor *x = c->in[k];
                if (!x || !x->regather || x->id >= n_t0 || first[x->id] >= 0) continue;
                first[x->id] = j;
                first_phase[x->id] = ph == 0 ? MT_PHASE_B : MT_PHASE_W;
            }
        }
    }
    for (int i = 0; i < n_fwd && g->status == MT_OK; i++) {
        const mt_op_call f = g->nodes[i].call;   /* copy: appending moves the array */
        if (!f.out->regather || f.out->id >= n_t0 || first[f.out->id] < 0) continue;
        const int at = first[f.out->id];
        const mt_phase phase = first_phase[f.out->id];
        char name[MT_MAX_NAME];
        mt__name_derived(name, sizeof name, "regather(", f.out->name, MT_MAX_NAME - 12, ")");
        mt_tensor *copy = mt__tensor_new(g, name, f.out->dtype, MT_AUX, f.out->ndim, f.out->shape);
        if (!copy) break;
        copy->sharding = f.out->sharding;
        copy_of[f.out->id] = copy;
        mt_op_call again = f;
        again.out = copy;
        again.p.coll.async = true;   /* prefetched: the plan defers it where it can */
        g->cur_block = g->nodes[i].block;   /* the re-gather is in its gather's block */
        mt__emit_node(g, phase, &again);    /* at the end of its phase's order, for now */
        g->cur_block = -1;
        regather_site *grown = realloc(sites, (size_t)(n_sites + 1) * sizeof *sites);
        if (!grown) { mt__graph_error(g, MT_ENOMEM, "out of memory for the re-gathers"); break; }
        sites = grown;
        sites[n_sites++] = (regather_site){g->n_nodes - 1, phase, at, at};
    }
    /* every backward reader reads the copy (the re-gathers read the shards) */
    for (int j = n_fwd; g->status == MT_OK && j < n_nodes0; j++) {
        mt_op_call *c = &g->nodes[j].call;
        for (int k = 0; k < c->n_in; k++)
            if (c->in[k] && c->in[k]->id < n_t0 && copy_of[c->in[k]->id])
                c->in[k] = copy_of[c->in[k]->id];
    }
    if (g->status == MT_OK && n_sites) {
        qsort(sites, (size_t)n_sites, sizeof *sites, by_site);
        for (int k = 1; k < n_sites; k++)   /* one parameter ahead */
            if (sites[k].phase == sites[k - 1].phase) sites[k].before = sites[k - 1].at;
        mt_status s = place_regathers(g, g->prog->order_b, n_b0, g->prog->n_b, sites, n_sites, MT_PHASE_B);
        if (s == MT_OK)
            s = place_regathers(g, g->prog->order_w, n_w0, g->prog->n_w, sites, n_sites, MT_PHASE_W);
        if (s != MT_OK) mt__graph_error(g, s, "%s", mt_errmsg());
    }
done:
    free(first), free(first_phase), free(copy_of), free(sites);
}

mt_status mt__autodiff(mt_graph *g) {
    int n_fwd = g->n_forward;
    if (!g->loss->needs_grad)
        return mt_fail(MT_EINVAL, "the loss '%s' does not depend on any parameter (or input "
                       "marked with mt_input_set_needs_grad); there is nothing to train",
                       g->loss->name);

    /* 1. Nodes on a path to the loss. */
    bool *on_path = calloc((size_t)g->n_tensors, sizeof *on_path);
    if (!on_path) return mt_fail(MT_ENOMEM, "out of memory in autodiff");
    mark(g->loss, on_path);
    for (int i = n_fwd - 1; i >= 0; i--) {
        const mt_op_call *c = &g->nodes[i].call;
        if (!on_path[c->out->id]) continue;
        for (int k = 0; k < c->n_in; k++) mark(c->in[k], on_path);
    }

    /* 2. Emit, last forward node first. The seed d(loss)/d(loss) = 1 is
     *    written by mt_graph_backward_b into the loss's gradient (or, with
     *    seed_from_caller, by the caller; nothing emitted here writes it). */
    mt_tensor *seed = mt__grad_of(g, g->loss);
    if (seed) mt__storage_root(g->loss)->grad_emitted = 1;
    for (int i = n_fwd - 1; i >= 0 && g->status == MT_OK; i--) {
        mt_op_call fwd = g->nodes[i].call;   /* copy: emitting may move the node array */
        if (!on_path[fwd.out->id] || !fwd.out->needs_grad) continue;
        if (mt__storage_root(fwd.out)->grad_emitted == 0) continue;  /* no gradient arrives */
        mt_grad_rule rule = mt__grad_rule(fwd.op);
        assert(rule);   /* every forward op has one */
        g->cur_block = g->nodes[i].block;   /* its backward nodes are in its block */
        g->cur_f32 = fwd.f32;               /* and keep its precision */
        rule(g, &fwd);
    }
    g->cur_block = -1;
    g->cur_f32 = false;
    free(on_path);
    if (g->status == MT_OK) mt__remat(g, g->prog->opts.remat);   /* remat.c: before the re-gathers */
    if (g->status == MT_OK) regather_params(g);
    if (g->status == MT_OK && g->prog->opts.interleave_w) mt__interleave_w(g);
    if (g->status != MT_OK) return mt_fail(g->status, "%s", g->errmsg);
    return MT_OK;
}
