/*
 * ir.c — the IR a user builds: tensors, nodes, leaves and their accessors.
 * Nothing here compiles or runs; program.c turns the IR into its program.
 */
#include "base/base_impl.h"
#include "graph/graph_impl.h"

#include <stdlib.h>
#include <string.h>

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

mt_status mt_graph_set_f32(mt_graph *g, bool on) {
    if (!g) return mt_fail(MT_EINVAL, "mt_graph_set_f32: g is NULL");
    g->cur_f32 = on;
    return MT_OK;
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

/* A zeroed tensor from g's blocks, NULL when out of memory: one calloc a
 * block of 64, where a calloc and a free a tensor were part of a planner's
 * search's malloc and free (11 % of 530B on 280 A100's, perf), which
 * builds graphs of thousands of tensors by the ten thousand. */
#define MT__TENSOR_SLAB 64
static mt_tensor *tensor_alloc(mt_graph *g) {
    if (g->slab_left == 0) {
        if (g->n_slabs == g->cap_slabs) {
            int cap = g->cap_slabs ? 2 * g->cap_slabs : 8;
            mt_tensor **p = realloc(g->slabs, (size_t)cap * sizeof *p);
            if (!p) return NULL;
            g->slabs = p;
            g->cap_slabs = cap;
        }
        mt_tensor *block = calloc(MT__TENSOR_SLAB, sizeof *block);
        if (!block) return NULL;
        g->slabs[g->n_slabs++] = block;
        g->slab_left = MT__TENSOR_SLAB;
    }
    return &g->slabs[g->n_slabs - 1][MT__TENSOR_SLAB - g->slab_left--];
}

mt_tensor *mt__tensor_new(mt_graph *g, const char *name, mt_dtype dtype, mt_tensor_kind kind,
                          int ndim, const int64_t *shape) {
    if (g->status != MT_OK) return NULL;
    if (g->prog && kind != MT_GRAD && kind != MT_AUX)
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
    mt_tensor *t = tensor_alloc(g);
    if (!t) return mt__graph_error(g, MT_ENOMEM, "out of memory for a tensor");
    t->graph = g;
    t->id = g->n_tensors;
    if (name) mt__name_copy(t->name, sizeof t->name, name);
    else mt__name_numbered(t->name, sizeof t->name, kind_prefix(kind), t->id);
    t->dtype = dtype;
    t->kind = kind;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->first_use = t->last_use = -1;
    if (!mt__names_add(g, t)) {   /* its slot stays unused in its block */
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
    g->nodes[idx].call.f32 |= g->cur_f32;
    if (node->phase == MT_PHASE_F) {
        /* Known at build time, so views made later (reshape) inherit them. */
        const mt_op_call *c = &node->call;
        for (int k = 0; k < c->n_in; k++) {
            c->out->data_dep |= c->in[k]->data_dep;
            if (c->in[k]->dtype == MT_F32 && c->out->dtype == MT_F32)
                c->out->needs_grad |= c->in[k]->needs_grad;
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

/* needs_grad flows from every f32 input of a forward node to its output
 * when that is f32 (an int32 output, the MoE router's ids, takes none),
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
                if (c->in[k]->dtype == MT_F32 && c->in[k]->needs_grad && !c->out->needs_grad &&
                    c->out->dtype == MT_F32)
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
    if (g->prog)
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

mt_tensor *mt_graph_logical(mt_graph *g, mt_tensor *t, const char *axes) {
    if (!g || !t || g->status != MT_OK) return t;
    mt_status s = mt_tensor_set_logical(t, axes);
    if (s != MT_OK) return mt__graph_error(g, s, "%s", mt_errmsg());
    return t;
}
