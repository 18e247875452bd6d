/*
 * program.c — a graph's compiled program (graph_impl.h, mt_program): compile
 * (autodiff, bf16 storage, the buffer plan, parameter init through the
 * backend, the counts) and freeing a graph with its program. The top of the
 * graph folder: it calls the transforms and the plan, and nothing in the
 * folder calls it.
 */
#include "backend/backend_impl.h"
#include "base/base_impl.h"
#include "graph/graph_impl.h"

#include <stdlib.h>
#include <string.h>

/* Frees g's program (compiled or half compiled) and every buffer it took. */
static void program_free(mt_graph *g) {
    mt_program *pr = g->prog;
    if (!pr) return;
    free(pr->order_b);
    free(pr->order_w);
    /* the plan's blocks are the backend's */
    const mt_backend *be = pr->env.backend ? pr->env.backend : mt_backend_cpu();
    be->buffer_free(pr->defer_block);
    mt__buckets_free(g);
    mt__slots_free(g);
    be->buffer_free(pr->persistent);
    be->buffer_free(pr->env.scratch);
    mt__backend_stream_free(pr->env.backend, pr->stream);
    mt_pool_free(pr->env.pool);
    free(pr->profile);
    mt__precision_free(g);
    free(pr);
    g->prog = NULL;
}

void mt_graph_free(mt_graph *g) {
    if (!g) return;
    program_free(g);
    for (int i = 0; i < g->n_slabs; i++) free(g->slabs[i]);
    free(g->slabs);
    free(g->tensors);
    free(g->params);
    free(g->names);
    free(g->nodes);
    for (int i = 0; i < g->n_owned; i++) free(g->owned[i]);
    free(g->owned);
    free(g);
}

/* ======================================================================== */
/* Compile                                                                   */
/* ======================================================================== */

/* Fills every parameter from its initialiser through the backend
 * (param_init): the numbers are a function of (seed, name, global element
 * index), the same on any mesh whatever slice of a parameter a device
 * holds. */
static mt_status init_params(mt_graph *g) {
    const mt_program *pr = g->prog;
    for (int i = 0; i < g->n_params; i++) {
        const mt_tensor *t = g->params[i];
        if (!t->data) continue;
        mt_status s = mt__backend_param_init(pr->env.backend, &pr->env, t, pr->opts.seed,
                                             mt_hash_name(t->name));
        if (s != MT_OK) return mt_fail_wrap(s, "initialising the parameter '%s'", t->name);
    }
    return MT_OK;
}

mt_status mt_graph_compile(mt_graph *g, mt_tensor *loss, const mt_compile_opts *opts) {
    if (g->status != MT_OK) return mt_fail(g->status, "%s", g->errmsg);
    if (g->prog)
        return mt_fail(MT_ESTATE, "graph is already compiled; build a new graph to change it");
    mt_compile_opts defaults = {0};
    if (!opts) opts = &defaults;
    if (!loss) return mt_fail(MT_EINVAL, "mt_graph_compile needs the loss tensor (got NULL)");
    if (opts->seed_from_caller && loss->dtype != MT_F32)
        return mt_fail(MT_EINVAL, "the output '%s' must be f32 to take a caller-supplied "
                       "gradient (seed_from_caller)", loss->name);
    if (!opts->seed_from_caller && (mt_tensor_numel(loss) != 1 || loss->dtype != MT_F32)) {
        char buf[64];
        return mt_fail(MT_ESHAPE, "the loss '%s' must be an f32 scalar, but has shape %s; "
                       "a pipeline stage's output takes seed_from_caller",
                       loss->name, mt__shape_str(loss, buf, sizeof buf));
    }
    if ((unsigned)opts->remat > MT_REMAT_DOTS)
        return mt_fail(MT_EINVAL, "mt_compile_opts.remat is %d; use one of MT_REMAT_NONE, "
                       "FULL, ATTENTION or DOTS", (int)opts->remat);
    const double t0 = mt_time_now();
    g->loss = loss;
    mt_program *pr = calloc(1, sizeof *pr);
    if (!pr) return mt_fail(MT_ENOMEM, "out of memory for the compiled program");
    g->prog = pr;   /* compiled from here on, even if a step below fails (sticky) */
    pr->opts = *opts;
    pr->kept_stale = true;   /* nothing gathered yet */
    pr->opts.backend = opts->backend ? opts->backend : mt_backend_cpu();
    pr->env.backend = pr->opts.backend;
    pr->env.ctx = g->ctx;
    const bool holds_data = mt_backend_runs(pr->env.backend);
    /* a backend that runs nothing starts no kernel threads (the scratch
       is still sized for them) */
    pr->env.pool = holds_data ? mt_pool_create(mt_get_num_threads())
                              : mt_pool_create_idle(mt_get_num_threads());
    mt_status s = MT_OK;
    if (!pr->env.pool)
        s = mt_fail(MT_ENOMEM, "cannot start %d kernel threads; set fewer with mt_set_num_threads",
                    mt_get_num_threads());
    if (s == MT_OK && !opts->no_grad) s = mt__autodiff(g);
    /* bf16 activations: after the backward (all readers known), before the plan */
    if (s == MT_OK && opts->precision == MT_PRECISION_BF16 && !opts->f32_activations)
        s = mt__precision_store_bf16(g);
    if (s == MT_OK) s = mt__grad_reduce_prepare(g, opts->grad_reduce);
    if (s == MT_OK) s = mt__plan_buffers(g);
    /* the bf16 products' plans and weight copies are for running: none on
     * a backend that runs nothing */
    if (s == MT_OK && holds_data) s = mt__precision_prepare(g, opts->precision);
    if (s != MT_OK) {
        mt__graph_error(g, s, "%s", mt_errmsg());   /* sticks to g; mt_errmsg() unchanged */
        return s;
    }
    const double t_init = mt_time_now();
    if ((s = init_params(g)) != MT_OK) {
        mt__graph_error(g, s, "%s", mt_errmsg());
        return s;
    }
    /* the gradients read as zero (and are: cleared), so that the first
     * step reduces once, as every later one (mt_graph_set_reduce_later) */
    mt_graph_zero_grad(g);
    mt__graph_mark_grads_zero(g);
    pr->stats.init_seconds = mt_time_now() - t_init;

    /* counts for the stats */
    mt_graph_stats *st = &pr->stats;
    for (int i = 0; i < g->n_nodes; i++) {
        const mt_node *n = &g->nodes[i];
        double fl = 0, by = 0;
        mt__op_def(n->call.op)->cost(&n->call, &fl, &by);
        if (n->phase == MT_PHASE_F) { st->n_forward++; st->flops_forward += fl; st->bytes_forward += by; }
        else {
            if (n->phase == MT_PHASE_B) st->n_backward_b++; else st->n_backward_w++;
            if (n->recompute) { st->n_recompute++; st->flops_recompute += fl; }
            st->flops_backward += fl;
            st->bytes_backward += by;
        }
    }
    for (int i = 0; i < g->n_params; i++) st->n_param_elems += mt_tensor_numel(g->params[i]);
    st->arena_bytes = pr->arena_bytes;
    st->arena_bytes_unplanned = pr->arena_bytes_unplanned;
    st->arena_bytes_f32 = pr->arena_bytes_f32;
    st->n_slots = 1;
    st->compile_seconds = mt_time_now() - t0;
    return MT_OK;
}

mt_graph_stats mt_graph_get_stats(const mt_graph *g) {
    return g->prog ? g->prog->stats : (mt_graph_stats){0};
}
