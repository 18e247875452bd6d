/*
 * plan.c — buffers, planned once per graph.
 *
 * Parameters, their gradients, inputs, constants and the loss live in one
 * persistent block. Everything else (activations, saved statistics,
 * activation gradients) lives in one arena, placed by liveness over the run
 * order F, B, W: two tensors share bytes only if their lifetimes do not
 * overlap. Placement is greedy by size (largest first, lowest offset that
 * fits), which is near-optimal for the chain-shaped graphs of these models.
 * After this nothing allocates while the graph runs.
 */
#include "graph/graph_impl.h"

#include <stdlib.h>
#include <string.h>

#define MT_ALIGN 64

static size_t align_up(size_t n) { return (n + MT_ALIGN - 1) / MT_ALIGN * MT_ALIGN; }

static bool is_persistent(const mt_graph *g, const mt_tensor *t) {
    if (t->kind == MT_PARAM || t->kind == MT_INPUT || t->kind == MT_CONST) return true;
    if (t->kind == MT_GRAD && t->grad_of && mt__storage_root(t->grad_of)->kind == MT_PARAM) return true;
    /* the loss (and its seed gradient) are read after the run: keep their
     * storage, which is the root when the loss is a view */
    if (g->loss && (t == mt__storage_root(g->loss) ||
                    (g->loss->grad && t == mt__storage_root(g->loss->grad))))
        return true;
    return false;
}

static void touch(mt_tensor *t, int pos) {
    if (!t) return;
    t = mt__storage_root(t);
    if (t->first_use < 0 || pos < t->first_use) t->first_use = pos;
    if (pos > t->last_use) t->last_use = pos;
}

static int by_size_desc(const void *a, const void *b) {
    size_t sa = mt__tensor_bytes(*(mt_tensor *const *)a), sb = mt__tensor_bytes(*(mt_tensor *const *)b);
    return sa < sb ? 1 : sa > sb ? -1 : 0;
}

mt_status mt__plan_buffers(mt_graph *g) {
    /* 1. Lifetimes, in run order: forward nodes, then B, then W. */
    int pos = 0;
    for (int i = 0; i < g->n_forward; i++, pos++) {
        const mt_op_call *c = &g->nodes[i].call;
        touch(c->out, pos); touch(c->out2, pos); touch(c->aux[0], pos); touch(c->aux[1], pos);
        for (int k = 0; k < c->n_in; k++) touch(c->in[k], pos);
    }
    for (int phase = 0; phase < 2; phase++) {
        int *order = phase == 0 ? g->order_b : g->order_w;
        int count = phase == 0 ? g->n_b : g->n_w;
        for (int j = 0; j < count; j++, pos++) {
            const mt_op_call *c = &g->nodes[order[j]].call;
            touch(c->out, pos); touch(c->out2, pos);
            for (int k = 0; k < c->n_in; k++) touch(c->in[k], pos);
        }
    }

    /* 2. Persistent block. */
    size_t persistent = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        mt_tensor *t = g->tensors[i];
        if (t->view_of || !is_persistent(g, t)) continue;
        t->offset = persistent;
        persistent += align_up(mt__tensor_bytes(t));
    }

    /* 3. Arena: greedy by size over lifetimes. */
    mt_tensor **list = malloc((size_t)g->n_tensors * sizeof *list);
    if (!list) return mt_fail(MT_ENOMEM, "out of memory planning buffers");
    int n_list = 0;
    size_t unplanned = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        mt_tensor *t = g->tensors[i];
        if (t->view_of || is_persistent(g, t) || t->first_use < 0) continue;
        t->in_arena = true;
        list[n_list++] = t;
        unplanned += align_up(mt__tensor_bytes(t));
    }
    qsort(list, (size_t)n_list, sizeof *list, by_size_desc);
    size_t arena = 0;
    for (int i = 0; i < n_list; i++) {
        mt_tensor *t = list[i];
        size_t need = align_up(mt__tensor_bytes(t));
        size_t off = 0;
        /* Lowest offset clear of every placed tensor that is alive at the
         * same time; restart the scan whenever we move past a conflict. */
        for (bool moved = true; moved;) {
            moved = false;
            for (int j = 0; j < i; j++) {
                mt_tensor *o = list[j];
                if (o->last_use < t->first_use || t->last_use < o->first_use) continue;
                size_t oend = o->offset + align_up(mt__tensor_bytes(o));
                if (off < oend && o->offset < off + need) { off = oend; moved = true; }
            }
        }
        t->offset = off;
        if (off + need > arena) arena = off + need;
    }
    free(list);

    /* 4. Allocate and point every tensor at its bytes. */
    g->persistent = persistent ? aligned_alloc(MT_ALIGN, persistent) : NULL;
    g->arena = arena ? aligned_alloc(MT_ALIGN, arena) : NULL;
    if ((persistent && !g->persistent) || (arena && !g->arena))
        return mt_fail(MT_ENOMEM, "cannot allocate %.1f MB of parameters and %.1f MB of "
                       "activations; use a smaller model or batch",
                       persistent / 1e6, arena / 1e6);
    if (g->persistent) memset(g->persistent, 0, persistent);
    g->persistent_bytes = persistent;
    g->arena_bytes = arena;
    g->arena_bytes_unplanned = unplanned;
    for (int i = 0; i < g->n_tensors; i++) {
        mt_tensor *t = g->tensors[i];
        if (t->view_of) continue;
        if (t->in_arena) t->data = (char *)g->arena + t->offset;
        else if (is_persistent(g, t)) t->data = (char *)g->persistent + t->offset;
    }
    for (int i = 0; i < g->n_tensors; i++) {
        mt_tensor *t = g->tensors[i];
        if (t->view_of) t->data = mt__storage_root(t)->data;
    }

    /* 5. Kernel scratch: the most any call asks for, per thread (today only
     *    attention's backward asks, T·T floats, hence the message). */
    size_t scratch = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const mt_op_call *c = &g->nodes[i].call;
        const mt_op_def *def = mt__op_def(c->op);
        size_t need = def->scratch ? def->scratch(c) : 0;
        if (need > scratch) scratch = need;
    }
    scratch *= (size_t)mt_pool_size(g->env.pool);
    if (scratch) {
        g->env.scratch = malloc(scratch * sizeof(float));
        if (!g->env.scratch) return mt_fail(MT_ENOMEM, "out of memory for attention scratch");
        g->env.scratch_floats = scratch;
    }
    return MT_OK;
}
