/*
 * graph.c — graph objects: tensors, nodes, leaves, accessors, the sticky
 * build error, and compile (autodiff, buffer plan, parameter init).
 */
#include "base/base_impl.h"
#include "graph/graph_impl.h"
#include "ops/backend_impl.h"

#include <assert.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Errors                                                                    */
/* ======================================================================== */

/* Records the first error in g and (re)raises g's error as mt_errmsg(). The
 * arguments may include mt_errmsg() itself: it is read before mt_fail
 * replaces it. */
static void graph_verror(mt_graph *g, mt_status code, const char *fmt, va_list ap) {
    if (g->status == MT_OK) {
        vsnprintf(g->errmsg, sizeof g->errmsg, fmt, ap);
        g->status = code;
    }
    mt_fail(g->status, "%s", g->errmsg);
}

mt_tensor *mt__graph_error(mt_graph *g, mt_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    graph_verror(g, code, fmt, ap);
    va_end(ap);
    return NULL;
}

mt_status mt_graph_fail(mt_graph *g, mt_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    graph_verror(g, code, fmt, ap);
    va_end(ap);
    return code;
}

mt_status mt_graph_status(const mt_graph *g) { return g->status; }
const char *mt_graph_errmsg(const mt_graph *g) { return g->errmsg; }

/* ======================================================================== */
/* Creation                                                                  */
/* ======================================================================== */

mt_graph *mt_graph_create(void) {
    mt_graph *g = calloc(1, sizeof *g);
    if (g) g->cur_block = -1;
    return g;
}

mt_status mt_graph_set_block(mt_graph *g, int block) {
    if (!g) return mt_fail(MT_EINVAL, "mt_graph_set_block: g is NULL");
    if (block < -1)
        return mt_graph_fail(g, MT_EINVAL, "mt_graph_set_block: block %d; give a block number "
                             ">= 0, or -1 for none", block);
    g->cur_block = block;
    return MT_OK;
}

void mt_graph_free(mt_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_tensors; i++) free(g->tensors[i]);
    free(g->tensors);
    free(g->params);
    free(g->names);
    free(g->nodes);
    free(g->order_b);
    free(g->order_w);
    /* the plan's blocks: the backend's (a graph never compiled has none) */
    const mt_backend *be = g->env.backend ? g->env.backend : mt_backend_cpu();
    be->buffer_free(g->defer_block);
    mt__slots_free(g);
    be->buffer_free(g->persistent);
    be->buffer_free(g->env.scratch);
    mt_pool_free(g->env.pool);
    free(g->profile);
    mt__precision_free(g);
    for (int i = 0; i < g->n_owned; i++) free(g->owned[i]);
    free(g->owned);
    free(g);
}

static const char *kind_prefix(mt_tensor_kind kind) {
    switch (kind) {
    case MT_INPUT: return "input";
    case MT_PARAM: return "param";
    case MT_ACT: return "act";
    case MT_GRAD: return "grad";
    case MT_AUX: return "aux";
    case MT_CONST: return "const";
    }
    return "t";
}

mt_tensor *mt__tensor_new(mt_graph *g, const char *name, mt_dtype dtype, mt_tensor_kind kind,
                          int ndim, const int64_t *shape) {
    if (g->status != MT_OK) return NULL;
    if (g->compiled && kind != MT_GRAD && kind != MT_AUX)
        return mt__graph_error(g, MT_ESTATE, "cannot add tensor '%s' to a compiled graph; "
                               "build the whole model before mt_graph_compile()",
                               name ? name : kind_prefix(kind));
    if (ndim < 0 || ndim > MT_MAX_DIMS)
        return mt__graph_error(g, MT_EINVAL, "tensor '%s' has %d dims; 0 to %d are supported",
                               name ? name : "?", ndim, MT_MAX_DIMS);
    for (int d = 0; d < ndim; d++)
        if (shape[d] <= 0)
            return mt__graph_error(g, MT_EINVAL, "tensor '%s' has dimension %d of size %lld; "
                                   "sizes must be positive", name ? name : "?", d,
                                   (long long)shape[d]);
    if (name && mt_graph_find(g, name))
        return mt__graph_error(g, MT_EINVAL, "a tensor named '%s' already exists in the graph; "
                               "names must be unique", name);
    if (g->n_tensors == g->cap_tensors) {
        int cap = g->cap_tensors ? 2 * g->cap_tensors : 64;
        mt_tensor **p = realloc(g->tensors, (size_t)cap * sizeof *p);
        if (!p) return mt__graph_error(g, MT_ENOMEM, "out of memory growing the tensor list");
        g->tensors = p;
        g->cap_tensors = cap;
    }
    if (kind == MT_PARAM && g->n_params == g->cap_params) {
        int cap = g->cap_params ? 2 * g->cap_params : 64;
        mt_tensor **p = realloc(g->params, (size_t)cap * sizeof *p);
        if (!p) return mt__graph_error(g, MT_ENOMEM, "out of memory growing the parameter list");
        g->params = p;
        g->cap_params = cap;
    }
    mt_tensor *t = calloc(1, sizeof *t);
    if (!t) return mt__graph_error(g, MT_ENOMEM, "out of memory for a tensor");
    t->graph = g;
    t->id = g->n_tensors;
    if (name) snprintf(t->name, sizeof t->name, "%s", name);
    else snprintf(t->name, sizeof t->name, "%s.%d", kind_prefix(kind), t->id);
    t->dtype = dtype;
    t->kind = kind;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->first_use = t->last_use = -1;
    if (!mt__names_add(g, t)) {
        free(t);
        return mt__graph_error(g, MT_ENOMEM, "out of memory indexing the name '%s'",
                               name ? name : kind_prefix(kind));
    }
    g->tensors[g->n_tensors++] = t;
    if (kind == MT_PARAM) g->params[g->n_params++] = t;
    return t;
}

int mt__node_add(mt_graph *g, const mt_node *node) {
    if (g->status != MT_OK) return -1;
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? 2 * g->cap_nodes : 64;
        mt_node *p = realloc(g->nodes, (size_t)cap * sizeof *p);
        if (!p) { mt__graph_error(g, MT_ENOMEM, "out of memory growing the node list"); return -1; }
        g->nodes = p;
        g->cap_nodes = cap;
    }
    int idx = g->n_nodes++;
    g->nodes[idx] = *node;
    g->nodes[idx].block = g->cur_block;
    if (node->phase == MT_PHASE_F) {
        /* Known at build time, so views made later (reshape) inherit them. */
        const mt_op_call *c = &node->call;
        for (int k = 0; k < c->n_in; k++) {
            c->out->data_dep |= c->in[k]->data_dep;
            if (c->in[k]->dtype == MT_F32) c->out->needs_grad |= c->in[k]->needs_grad;
        }
        g->n_forward = g->n_nodes;
    }
    return idx;
}

/* ======================================================================== */
/* Leaves                                                                    */
/* ======================================================================== */

static bool check_leaf(mt_graph *g, const char *what, const char *name, int ndim,
                       const int64_t *shape) {
    if (!g) return false;
    if (!name || !name[0]) { mt__graph_error(g, MT_EINVAL, "%s needs a name", what); return false; }
    if (strlen(name) >= MT_MAX_NAME) {
        mt__graph_error(g, MT_EINVAL, "%s name '%s' is longer than %d characters", what, name,
                        MT_MAX_NAME - 1);
        return false;
    }
    if (ndim < 1 || !shape) {
        mt__graph_error(g, MT_EINVAL, "%s '%s' needs 1 to %d dims, got %d", what, name,
                        MT_MAX_DIMS, ndim);
        return false;
    }
    return true;
}

mt_tensor *mt_input(mt_graph *g, const char *name, mt_dtype dtype, int ndim, const int64_t *shape) {
    if (!check_leaf(g, "input", name, ndim, shape)) return NULL;
    mt_tensor *t = mt__tensor_new(g, name, dtype, MT_INPUT, ndim, shape);
    if (t) t->data_dep = true;
    return t;
}

/* needs_grad flows from every f32 input of a forward node to its output,
 * and from a tensor to its views; called again when an input starts wanting
 * a gradient after ops already read it. Tensors and nodes come in creation
 * order, which follows the data, so this settles in a pass or two. */
static void propagate_needs_grad(mt_graph *g) {
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < g->n_tensors; i++) {
            mt_tensor *t = g->tensors[i];
            if (t->view_of && t->view_of->needs_grad && !t->needs_grad)
                changed = t->needs_grad = true;
        }
        for (int i = 0; i < g->n_forward; i++) {
            const mt_op_call *c = &g->nodes[i].call;
            for (int k = 0; k < c->n_in; k++)
                if (c->in[k]->dtype == MT_F32 && c->in[k]->needs_grad && !c->out->needs_grad)
                    changed = c->out->needs_grad = true;
        }
    }
}

mt_status mt_input_set_needs_grad(mt_tensor *input) {
    if (!input) return mt_fail(MT_EINVAL, "mt_input_set_needs_grad: the tensor is NULL");
    mt_graph *g = input->graph;
    if (input->kind != MT_INPUT || input->view_of || input->dtype != MT_F32)
        return mt_fail(MT_EINVAL, "mt_input_set_needs_grad: '%s' is not an f32 input; only "
                       "a tensor made by mt_input (not a view of one) can take a gradient "
                       "this way", input->name);
    if (g->compiled)
        return mt_fail(MT_ESTATE, "mt_input_set_needs_grad: the graph of '%s' is already "
                       "compiled; mark the input before mt_graph_compile", input->name);
    input->needs_grad = true;
    propagate_needs_grad(g);
    return MT_OK;
}

mt_tensor *mt_param(mt_graph *g, const char *name, int ndim, const int64_t *shape, mt_init init) {
    if (!check_leaf(g, "parameter", name, ndim, shape)) return NULL;
    mt_tensor *t = mt__tensor_new(g, name, MT_F32, MT_PARAM, ndim, shape);
    if (t) {
        t->init = init;
        t->needs_grad = true;
    }
    return t;
}

mt_tensor *mt_constant(mt_graph *g, const char *name, mt_dtype dtype, int ndim, const int64_t *shape) {
    if (!check_leaf(g, "constant", name, ndim, shape)) return NULL;
    return mt__tensor_new(g, name, dtype, MT_CONST, ndim, shape);
}

/* ======================================================================== */
/* Accessors                                                                 */
/* ======================================================================== */

mt_tensor *mt_tensor_grad(mt_tensor *t) { return t->grad; }

int mt_graph_n_params(const mt_graph *g) { return g->n_params; }

mt_tensor *mt_graph_param_at(const mt_graph *g, int idx) {
    return idx >= 0 && idx < g->n_params ? g->params[idx] : NULL;
}

/* ======================================================================== */
/* Compile                                                                   */
/* ======================================================================== */

/* Filling one parameter: elements [i0, i1) from (seed, name, element index),
 * the same numbers on any mesh whatever slice of it a device holds, and
 * whichever kernel thread computes them. */
typedef struct {
    const mt_tensor *t;
    uint64_t         seed, stream;
    uint64_t         first;     /* the global index of t->data[0] (shards: of the row) */
} init_job;

static void init_range(void *arg, int64_t i0, int64_t i1, int worker) {
    const init_job *job = arg;
    const mt_tensor *t = job->t;
    float *p = t->data;
    switch (t->init.kind) {
    case MT_INIT_ZEROS:
        memset(p + i0, 0, (size_t)(i1 - i0) * sizeof *p);
        break;
    case MT_INIT_ONES:
        for (int64_t i = i0; i < i1; i++) p[i] = 1.0f;
        break;
    case MT_INIT_NORMAL:   /* p[i] = std · mt_rng_normal(seed, stream, i) */
        mt__rng_normal_fill(job->seed, job->stream, job->first + (uint64_t)i0, i1 - i0,
                            t->init.std, p + i0);
        break;
    case MT_INIT_UNIFORM:  /* p[i] = std · (2 · mt_rng_uniform(seed, stream, i) - 1) */
        mt__rng_uniform_fill(job->seed, job->stream, job->first + (uint64_t)i0, i1 - i0,
                             t->init.std, p + i0);
        break;
    }
}

/* A shard: rows of its last dim are runs of consecutive global indices;
 * [i0, i1) counts rows here. */
static void init_shard_rows(void *arg, int64_t i0, int64_t i1, int worker) {
    const init_job *job = arg;
    const mt_tensor *t = job->t;
    const int nd = t->ndim;
    const int64_t row = nd ? t->shape[nd - 1] : 1;
    for (int64_t r = i0; r < i1; r++) {
        /* the global flat index of the row's first element */
        int64_t rem = r, g = 0, stride = 1;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t idx = d == nd - 1 ? 0 : rem % t->shape[d];
            if (d != nd - 1) rem /= t->shape[d];
            g += (t->shard_offset[d] + idx) * stride;
            stride *= t->global_shape[d];
        }
        init_job one = *job;
        mt_tensor view = *t;
        view.data = (float *)t->data + r * row;
        one.t = &view;
        one.first = (uint64_t)g;
        init_range(&one, 0, row, worker);
    }
}

/* A normal costs ~40 ns (Philox, log, cos; measured 2026-11-30 on the 2-core
 * dev VM), so a 50M-parameter model spends a second or two here: split each
 * parameter over the kernel threads, in chunks worth waking one for. */
static void init_param(mt_graph *g, const mt_tensor *t) {
    init_job job = {t, g->seed, mt_hash_name(t->name), 0};
    if (!t->is_shard) {
        mt_pool_run(g->env.pool, mt_tensor_numel(t), 4096, init_range, &job);
        return;
    }
    int64_t row = t->ndim ? t->shape[t->ndim - 1] : 1;
    mt_pool_run(g->env.pool, mt_tensor_numel(t) / row, 4096 / row + 1, init_shard_rows, &job);
}

mt_status mt_graph_compile(mt_graph *g, mt_tensor *loss, const mt_compile_opts *opts) {
    if (g->status != MT_OK) return mt_fail(g->status, "%s", g->errmsg);
    if (g->compiled)
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
    g->seed = opts->seed;
    g->no_grad = opts->no_grad;
    g->seed_from_caller = opts->seed_from_caller;
    g->remat = opts->remat;
    g->interleave_w = opts->interleave_w;
    g->compiled = true;
    g->env.backend = opts->backend ? opts->backend : mt_backend_cpu();
    const bool holds_data = mt_backend_runs(g->env.backend);
    g->env.pool = mt_pool_create(mt_get_num_threads());
    mt_status s = MT_OK;
    if (!g->env.pool)
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
    for (int i = 0; i < g->n_params; i++)
        if (g->params[i]->data) init_param(g, g->params[i]);
    mt_graph_zero_grad(g);
    g->stats.init_seconds = mt_time_now() - t_init;

    /* counts for the stats */
    mt_graph_stats *st = &g->stats;
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
    st->arena_bytes = g->arena_bytes;
    st->arena_bytes_unplanned = g->arena_bytes_unplanned;
    st->arena_bytes_f32 = g->arena_bytes_f32;
    st->n_slots = 1;
    st->compile_seconds = mt_time_now() - t0;
    return MT_OK;
}

mt_graph_stats mt_graph_get_stats(const mt_graph *g) { return g->stats; }
