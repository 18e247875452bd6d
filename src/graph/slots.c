/*
 * slots.c — several microbatches in flight on one compiled graph
 * (mt_graph_set_slots, mt_graph_use_slot; graph.h documents them).
 *
 * A pipeline stage runs F(j), B(j) and W(j) of microbatch j in a schedule
 * that interleaves microbatches (F0 F1 F2 B0 F3 W0 B1 ...): between a
 * microbatch's F and its W, its activations, saved statistics, activation
 * gradients, inputs and seed must stay as they are while other microbatches
 * run. A slot is one set of that per-run state: an arena (the plan's, same
 * layout) and a run block (inputs, input gradients, the loss and its seed).
 * Parameters, their gradients, constants, the kernels' scratch and the
 * deferred reductions' buffers stay shared: the first three are the same
 * for every microbatch (gradients accumulate over W runs, as over repeated
 * backwards), the rest are used within one phase and nothing is in flight
 * between phases (exec.c). Call parameters that point at memory (ppermute
 * pairs, rings) are constants of the graph.
 *
 * Kernels read a tensor's storage through t->data, so switching slots is
 * pointing every tensor that lives in the arena or the run block (and every
 * alias and view of one) at the new slot's blocks: the plan's own pointing
 * pass (mt__plan_point), O(tensors), no copy.
 *
 * Every slot's blocks come from the graph's backend (backend.h): NULL on
 * the shape-only one, whose slots cost nothing.
 *
 * Ownership: without slots (n_slots 0) the graph owns g->prog->arena and
 * g->prog->run_block; with slots the array owns every slot's blocks and those two
 * point at the current slot's.
 */
#include "backend/backend_impl.h"
#include "graph/graph_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The backend the program's blocks came from. */
static const mt_backend *backend_of(const mt_graph *g) { return g->prog->env.backend; }

static void slot_free(const mt_graph *g, mt_slot *s) {
    backend_of(g)->buffer_free(s->arena);
    backend_of(g)->buffer_free(s->run_block);
    *s = (mt_slot){0};
}

void mt__slots_free(mt_graph *g) {
    if (!g->prog->slots) {
        backend_of(g)->buffer_free(g->prog->arena);
        backend_of(g)->buffer_free(g->prog->run_block);
    } else {
        for (int k = 0; k < g->prog->n_slots; k++) slot_free(g, &g->prog->slots[k]);
        free(g->prog->slots);
    }
    g->prog->slots = NULL;
    g->prog->arena = g->prog->run_block = NULL;
    g->prog->n_slots = g->prog->slot = 0;
}

/* A fresh slot: the plan's arena size (contents undefined, as slot 0's) and
 * a zeroed run block. False when out of memory (nothing kept). */
static bool slot_alloc(const mt_graph *g, mt_slot *s) {
    *s = (mt_slot){.loss_value = NAN};
    const mt_backend *be = backend_of(g);
    if (be->buffer_alloc(g->prog->arena_bytes, &s->arena) != MT_OK ||
        be->buffer_alloc(g->prog->run_bytes, &s->run_block) != MT_OK) {
        slot_free(g, s);
        return false;
    }
    be->buffer_clear(s->run_block, g->prog->run_bytes);
    return true;
}

static mt_status check_graph(const mt_graph *g, const char *what) {
    if (!g) return mt_fail(MT_EINVAL, "%s: the graph is NULL", what);
    if (g->status != MT_OK) return mt_fail(g->status, "%s", g->errmsg);
    if (!g->prog)
        return mt_fail(MT_ESTATE, "%s: compile the graph first (mt_graph_compile); slots "
                       "hold the planned buffers", what);
    return MT_OK;
}

static void update_stats(mt_graph *g) {
    int n = g->prog->slots ? g->prog->n_slots : 1;
    g->prog->stats.n_slots = n;
    g->prog->stats.arena_bytes = (size_t)n * g->prog->arena_bytes;
    g->prog->stats.arena_bytes_unplanned = (size_t)n * g->prog->arena_bytes_unplanned;
    g->prog->stats.arena_bytes_f32 = (size_t)n * g->prog->arena_bytes_f32;
}

mt_status mt_graph_use_slot(mt_graph *g, int k) {
    mt_status s = check_graph(g, "mt_graph_use_slot");
    if (s != MT_OK) return s;
    int n = g->prog->slots ? g->prog->n_slots : 1;
    if (k < 0 || k >= n)
        return mt_fail(MT_EINVAL, "mt_graph_use_slot: slot %d of a graph with %d slot%s; "
                       "use 0..%d or add slots with mt_graph_set_slots", k, n, n == 1 ? "" : "s",
                       n - 1);
    if (k == g->prog->slot) return MT_OK;
    mt_slot *from = &g->prog->slots[g->prog->slot], *to = &g->prog->slots[k];
    from->loss_value = g->prog->loss_value;
    g->prog->arena = to->arena;
    g->prog->run_block = to->run_block;
    g->prog->loss_value = to->loss_value;
    g->prog->slot = k;
    mt__plan_point(g);
    return MT_OK;
}

mt_status mt_graph_set_slots(mt_graph *g, int n) {
    mt_status s = check_graph(g, "mt_graph_set_slots");
    if (s != MT_OK) return s;
    if (n < 1)
        return mt_fail(MT_EINVAL, "mt_graph_set_slots: %d slots; a graph needs at least 1", n);
    int have = g->prog->slots ? g->prog->n_slots : 1;
    if (n == have) return MT_OK;
    if (g->prog->slot >= n) (void)mt_graph_use_slot(g, 0);   /* the current slot goes away */
    if (n == 1) {   /* back to the graph's own blocks: slot 0's */
        for (int k = 1; k < g->prog->n_slots; k++) slot_free(g, &g->prog->slots[k]);
        free(g->prog->slots);
        g->prog->slots = NULL;
        g->prog->n_slots = 0;
        update_stats(g);
        return MT_OK;
    }
    if (!g->prog->slots) {   /* slot 0 is the state the graph has */
        if (!(g->prog->slots = malloc(sizeof *g->prog->slots)))
            return mt_fail(MT_ENOMEM, "out of memory for the slot table");
        g->prog->slots[0] = (mt_slot){g->prog->arena, g->prog->run_block, g->prog->loss_value};
        g->prog->n_slots = 1;
    }
    for (int k = n; k < g->prog->n_slots; k++) slot_free(g, &g->prog->slots[k]);
    if (n < g->prog->n_slots) g->prog->n_slots = n;
    mt_slot *grown = realloc(g->prog->slots, (size_t)n * sizeof *grown);
    if (!grown) return mt_fail(MT_ENOMEM, "out of memory for %d slots", n);
    g->prog->slots = grown;
    for (; g->prog->n_slots < n; g->prog->n_slots++) {
        if (!slot_alloc(g, &g->prog->slots[g->prog->n_slots])) {
            update_stats(g);
            return mt_fail(MT_ENOMEM, "out of memory for slot %d of %d (%.1f MB of activations "
                           "and %.1f MB of inputs each); the graph keeps %d slots",
                           g->prog->n_slots, n, g->prog->arena_bytes / 1e6, g->prog->run_bytes / 1e6, g->prog->n_slots);
        }
    }
    update_stats(g);
    return MT_OK;
}
