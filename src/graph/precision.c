/*
 * precision.c — bf16 mixed precision: which products run in bf16, the bf16
 * copies of the weights, and when those copies are refreshed.
 *
 * At compile (after the buffer plan) every MATMUL, LINEAR and GEMM node gets
 * a planned bf16 product from the graph's backend (backend_impl.h:
 * plans_create, plan_matmul; the CPU's makes oneDNN primitives, once per
 * shape): this file decides which calls are bf16 products and what their
 * operands are, the backend plans and runs them (nothing here drives a
 * library). An operand whose storage is a parameter's (the parameter
 * itself, a view of it, or a pvary reading its bytes) reads a bf16 copy of
 * that parameter; every other operand (activations, their gradients) is
 * cast into the graph's workspace as the product reads it.
 *
 * FSDP. An all-gather of a parameter shard whose result only bf16 products
 * read (every reader checked, through reshapes and pvary) gathers the
 * shard's bf16 copy instead (refreshed as the weights' are): half the bytes
 * on the wire, and the gathered bytes hold bf16 that the products read as
 * their operand, uncast. A gather that also feeds another op (the tied
 * embedding's table) stays f32.
 *
 * Activation storage. Before the plan (the backward exists, so every reader
 * is known), an activation that only bf16 products read (as an operand, in
 * F, B or W: a GPT's layernorm, attention and GELU outputs) becomes a bf16
 * tensor: the plan gives it 2 bytes an element, its producer writes an f32
 * tensor that lives only while the producer runs, and run_node casts that
 * into it with the products' own cast (the backend's convert), so the products,
 * reading it without a cast, see the very bf16 values they would have made.
 * Anything else touching the tensor (another op, a bias, a view, a pvary, an
 * accumulation, a collective producing it) keeps it f32.
 *
 * Staleness. A copy is cast from its parameter at the first forward after
 * the parameters changed: compile counts as a change, and so does every
 * mt_graph_params_changed() (mt_optim_step calls it, as do the checkpoint
 * loaders and the trainer when they write parameters). So a training step
 * casts each weight once, however many microbatches it runs, and a copy
 * older than its parameter is never read.
 */
#include "backend/backend_impl.h"
#include "graph/graph_impl.h"
#include "graph/op_desc.h"

#include <stdio.h>
#include <stdlib.h>

/* A parameter read by some bf16 product, and its bf16 copy. */
typedef struct {
    mt_tensor *param;
    uint16_t  *bf16;                      /* (numel of param) */
} shadow;

struct mt_bf16_state {
    mt_backend_plans *plans;              /* the backend's plans of the products */
    shadow           *shadows; int n_shadows;
    uint16_t         *ws;                 /* the activations' casts, shared by every product */
    bool              stale;              /* the parameters changed since the copies were cast */
};

void mt_graph_params_changed(mt_graph *g) {
    if (g && g->prog) g->prog->kept_stale = true;   /* the kept gathered copies too (exec.c) */
    if (g && g->prog && g->prog->bf16) g->prog->bf16->stale = true;
}

/* A product bf16 precision runs in bf16: the op's descriptor says. */
static bool is_product(mt_op op) { return mt__op_gdesc(op)->bf16_product; }

/* Whether the call runs as a bf16 product (a zero-size shard runs sgemm's
 * edge cases in f32 instead). */
static bool runs_bf16(const mt_op_call *c) {
    if (!is_product(c->op) || c->f32) return false;
    bool ta, tb;
    int64_t M, N, K;
    mt__product_shape(c, &ta, &tb, &M, &N, &K);
    return M > 0 && N > 0 && K > 0;
}

/* The tensor whose bytes t reads (through reshapes and pvary). */
static mt_tensor *bytes_root(mt_tensor *t) {
    for (;;) {
        if (t->view_of) t = t->view_of;
        else if (t->data_of) t = t->data_of;
        else return t;
    }
}

/* The parameter whose bytes t reads (through reshapes and pvary), or NULL. */
static mt_tensor *param_root(mt_tensor *t) {
    t = bytes_root(t);
    return t->kind == MT_PARAM ? t : NULL;
}

/* Whether the all-gather call c of a parameter shard may move bf16: every
 * node reading its output (through reshapes and pvary's aliases) is a
 * planned bf16 product or such an alias, nothing else writes it, and it
 * does not accumulate. Then the gathered bytes hold bf16 and the products
 * read them as their bf16 operand. */
static bool gather_in_bf16(const mt_graph *g, const mt_op_call *c) {
    if (c->op != MT_OP_ALL_GATHER || c->acc || !param_root(c->in[0]) ||
        mt_tensor_numel(c->in[0]) != mt_tensor_numel(param_root(c->in[0])))
        return false;
    const mt_tensor *out = c->out;
    for (int i = 0; i < g->n_nodes; i++) {
        const mt_op_call *r = &g->nodes[i].call;
        if (r == c) continue;
        if (bytes_root(r->out) == out || (r->out2 && bytes_root(r->out2) == out)) {
            if (r->op == MT_OP_PVARY && r->out->data_of == r->in[0] && !r->acc) continue;
            return false;   /* written by another node */
        }
        for (int k = 0; k < 2; k++)
            if (r->aux[k] && bytes_root(r->aux[k]) == out) return false;
        bool reads = false;
        for (int k = 0; k < r->n_in; k++) reads |= r->in[k] && bytes_root(r->in[k]) == out;
        if (!reads) continue;
        if (runs_bf16(r)) {
            for (int k = 2; k < r->n_in; k++)   /* a bias is read as f32 */
                if (r->in[k] && bytes_root(r->in[k]) == out) return false;
            continue;
        }
        if (r->op == MT_OP_PVARY && r->out->data_of == r->in[0] && !r->acc) continue;
        return false;
    }
    return true;
}

/* Whether t reads the bytes of a bf16 all-gather's output. */
static bool reads_gather16(const mt_graph *g, mt_tensor *t) {
    mt_tensor *root = bytes_root(t);
    for (int i = 0; i < g->n_nodes; i++) {
        const mt_op_call *c = &g->nodes[i].call;
        if (c->op == MT_OP_ALL_GATHER && c->p.coll.gather16 && c->out == root) return true;
    }
    return false;
}

/* The bf16 copy of parameter p, made on first request in a buffer of the
 * graph's backend (NULL: out of memory). */
static const uint16_t *shadow_of(const mt_graph *g, struct mt_bf16_state *st, mt_tensor *p) {
    for (int i = 0; i < st->n_shadows; i++)
        if (st->shadows[i].param == p) return st->shadows[i].bf16;
    void *b = NULL;
    size_t bytes = (size_t)mt_tensor_numel(p) * sizeof(uint16_t);
    if (mt_backend_alloc(g->prog->env.backend, bytes, &b) != MT_OK || !b) return NULL;
    st->shadows[st->n_shadows++] = (shadow){p, b};
    return b;
}

mt_status mt__precision_prepare(mt_graph *g, mt_precision prec) {
    if (prec != MT_PRECISION_BF16) return MT_OK;
    const mt_backend *be = g->prog->env.backend;
    mt_backend_plans *plans = NULL;
    mt_status s = mt__backend_plans_create(be, &g->prog->env, &plans);
    if (s != MT_OK) return s;
    struct mt_bf16_state *st = calloc(1, sizeof *st);
    if (!st) {
        mt__backend_plans_free(be, plans);
        return mt_fail(MT_ENOMEM, "out of memory for the bf16 plans");
    }
    g->prog->bf16 = st;
    st->plans = plans;
    st->stale = true;
    st->shadows = calloc((size_t)(g->n_params ? g->n_params : 1), sizeof *st->shadows);
    if (!st->shadows) return mt_fail(MT_ENOMEM, "out of memory for the bf16 plans");
    /* FSDP's gathers of weights only bf16 products read: gather the
     * shard's bf16 copy (half the bytes), the products read the result */
    for (int i = 0; i < g->n_nodes; i++) {
        mt_op_call *c = &g->nodes[i].call;
        if (!gather_in_bf16(g, c)) continue;
        mt_tensor *shard = param_root(c->in[0]);
        if (!(c->p.coll.gather16 = shadow_of(g, st, shard)))
            return mt_fail(MT_ENOMEM, "out of memory for the bf16 copy of '%s'", shard->name);
    }
    size_t ws = 0;   /* bytes: the most any product's runs need */
    for (int i = 0; i < g->n_nodes && s == MT_OK; i++) {
        mt_op_call *c = &g->nodes[i].call;
        if (!runs_bf16(c)) continue;   /* a zero-size shard: sgemm's edge cases */
        mt_product_operands ops = {{NULL, NULL}, {false, false}};
        mt_tensor *pa = param_root(c->in[0]), *pb = param_root(c->in[1]);
        if ((pa && !(ops.copy16[0] = shadow_of(g, st, pa))) ||
            (pb && !(ops.copy16[1] = shadow_of(g, st, pb))))
            return mt_fail(MT_ENOMEM, "out of memory for the bf16 copy of '%s'",
                           (pa ? pa : pb)->name);
        ops.is16[0] = !pa && reads_gather16(g, c->in[0]);
        ops.is16[1] = !pb && reads_gather16(g, c->in[1]);
        size_t w = 0;
        s = mt__backend_plan_matmul(be, st->plans, c, &ops, &c->plan, &w);
        if (s != MT_OK)
            return mt_fail_wrap(s, "planning node %d (%s -> '%s') in bf16", i,
                                mt__op_def(c->op)->name, c->out->name);
        if (w > ws) ws = w;
    }
    void *wsb = NULL;
    if (ws && (mt_backend_alloc(be, ws, &wsb) != MT_OK || !wsb))
        return mt_fail(MT_ENOMEM, "out of memory for %zu bytes of bf16 workspace", ws);
    st->ws = wsb;
    mt__backend_plans_workspace(be, st->plans, st->ws);
    return MT_OK;
}

/* ======================================================================== */
/* bf16 activation storage                                                   */
/* ======================================================================== */

/* Per tensor id, what the graph's nodes do with it. */
typedef struct {
    int  writers;        /* nodes writing it as out (=) */
    int  writer;         /* the last of them (node index) */
    int  readers;        /* reads as in[0] or in[1] of a bf16 product */
    bool other;          /* any other use: read by another op or as a bias, written
                            with +=, as out2 or aux, viewed, aliased */
} act_use;

/* Whether the activation t may be stored in bf16: an arena activation of
 * its own bytes, written once (=) by a node that is no collective (a
 * deferred one completes after its node) and read only by bf16 products. */
static bool bf16_storable(const mt_graph *g, const mt_tensor *t, const act_use *u) {
    /* MT_AUX: what compile adds, e.g. remat's recomputed copies (a
     * forward's saved statistics are aux of their node: `other`) */
    if ((t->kind != MT_ACT && t->kind != MT_AUX) || t->dtype != MT_F32 || t->view_of ||
        t->data_of)
        return false;
    if (g->loss && (t == mt__storage_root(g->loss) || t == g->loss)) return false;
    if (u->other || u->writers != 1 || u->readers == 0) return false;
    switch (mt__op_gdesc(g->nodes[u->writer].call.op)->comm) {
    case MT_COMM_COLL_OUT: case MT_COMM_COLL_IN:   /* a collective's output */
    case MT_COMM_RING_GATHER: case MT_COMM_RING_SCATTER: return false;
    default: return true;
    }
}

mt_status mt__precision_store_bf16(mt_graph *g) {
    act_use *use = calloc((size_t)g->n_tensors + 1, sizeof *use);
    if (!use) return mt_fail(MT_ENOMEM, "out of memory choosing the bf16 activations");
    for (int i = 0; i < g->n_tensors; i++) {   /* a viewed or aliased tensor stays f32 */
        const mt_tensor *t = g->tensors[i];
        if (t->view_of) use[mt__storage_root((mt_tensor *)t)->id].other = true;
        if (t->data_of) use[t->data_of->id].other = true;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const mt_op_call *c = &g->nodes[i].call;
        act_use *o = &use[c->out->id];
        if (c->acc) o->other = true;
        o->writers++;
        o->writer = i;
        if (c->out2) use[c->out2->id].other = true;
        for (int k = 0; k < 2; k++)
            if (c->aux[k]) use[c->aux[k]->id].other = true;
        bool bf = runs_bf16(c);
        for (int k = 0; k < c->n_in; k++) {
            if (!c->in[k]) continue;
            if (bf && k < 2) use[c->in[k]->id].readers++;
            else use[c->in[k]->id].other = true;
        }
    }
    /* (the tensors made below are not in `use`: count first) */
    int n_tensors = g->n_tensors;
    for (int i = 0; i < n_tensors; i++) {
        mt_tensor *t = g->tensors[i];
        if (!bf16_storable(g, t, &use[i])) continue;
        mt_node *w = &g->nodes[use[i].writer];
        /* the producer's f32 value, alive only while its node runs */
        char name[MT_MAX_NAME];
        mt__name_derived(name, sizeof name, "", t->name, MT_MAX_NAME - 5, ".f32");
        mt_tensor *f = mt__tensor_new(g, mt_graph_find(g, name) ? NULL : name, MT_F32, MT_AUX,
                                      t->ndim, t->shape);
        if (!f) {
            free(use);
            return mt_fail(g->status, "%s", g->errmsg);
        }
        f->sharding = t->sharding;
        f->data_dep = t->data_dep;
        w->call.out = f;
        w->cast_out = t;
        t->dtype = MT_BF16;
        g->prog->stats.n_bf16_act++;
        g->prog->stats.bf16_act_bytes += mt__tensor_bytes(t);
    }
    free(use);
    return MT_OK;
}

void mt__precision_unstore_bf16(mt_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        mt_node *n = &g->nodes[i];
        if (!n->cast_out) continue;
        n->call.out->first_use = n->call.out->last_use = -1;
        n->call.out->in_arena = false;
        n->call.out = n->cast_out;
        n->cast_out->dtype = MT_F32;
        n->cast_out = NULL;
    }
    g->prog->stats.n_bf16_act = 0;
    g->prog->stats.bf16_act_bytes = 0;
}

mt_status mt__precision_cast_out(mt_graph *g, const mt_node *n) {
    if (!n->cast_out) return MT_OK;
    return mt__backend_convert(g->prog->env.backend, &g->prog->env, MT_CONVERT_TO_BF16,
                               n->cast_out->data, n->call.out->data,
                               mt_tensor_numel(n->cast_out), false);
}

mt_status mt__grad_reduce_prepare(mt_graph *g, mt_precision prec) {
    if (prec != MT_PRECISION_FP32 && prec != MT_PRECISION_BF16)
        return mt_fail(MT_EINVAL, "mt_compile_opts.grad_reduce is %d; use MT_PRECISION_FP32 or "
                       "MT_PRECISION_BF16", (int)prec);
    if (prec != MT_PRECISION_BF16) return MT_OK;
    for (int i = 0; i < g->n_nodes; i++) {
        mt_node *n = &g->nodes[i];
        mt_op_call *c = &n->call;
        /* async: the input is the reduction's alone, so it is cast in place */
        if (n->phase == MT_PHASE_W && (c->op == MT_OP_PSUM || c->op == MT_OP_PSUM_SCATTER) &&
            c->p.coll.async && mt__storage_root(c->out) != mt__storage_root(c->in[0]))
            c->p.coll.bf16 = true;
    }
    return MT_OK;
}

mt_status mt__precision_refresh(mt_graph *g) {
    struct mt_bf16_state *st = g->prog->bf16;
    if (!st || !st->stale) return MT_OK;
    for (int i = 0; i < st->n_shadows; i++) {
        mt_tensor *p = st->shadows[i].param;
        mt_status s = mt__backend_convert(g->prog->env.backend, &g->prog->env, MT_CONVERT_TO_BF16,
                                          st->shadows[i].bf16, p->data, mt_tensor_numel(p),
                                          false);
        if (s != MT_OK)
            return mt_fail_wrap(s, "casting the parameter '%s' to its bf16 copy", p->name);
    }
    st->stale = false;
    return MT_OK;
}

void mt__precision_free(mt_graph *g) {
    struct mt_bf16_state *st = g->prog->bf16;
    if (!st) return;
    const mt_backend *be = g->prog->env.backend;
    mt__backend_plans_free(be, st->plans);
    for (int i = 0; i < st->n_shadows; i++) mt_backend_free(be, st->shadows[i].bf16);
    free(st->shadows);
    mt_backend_free(be, st->ws);
    free(st);
    g->prog->bf16 = NULL;
}
