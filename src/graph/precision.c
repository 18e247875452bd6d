/*
 * precision.c — bf16 mixed precision: which products run in bf16, the bf16
 * copies of the weights, and when those copies are refreshed.
 *
 * At compile (after the buffer plan) every MATMUL, LINEAR and GEMM node gets
 * a planned bf16 product (ops/bf16_impl.h: oneDNN primitives made there,
 * once per shape). An operand whose storage is a parameter's (the parameter
 * itself, a view of it, or a pvary reading its bytes) reads a bf16 copy of
 * that parameter; every other operand (activations, their gradients, FSDP's
 * gathered parameters) is cast into the graph's workspace as the product
 * reads it.
 *
 * Staleness. A copy is cast from its parameter at the first forward after
 * the parameters changed: compile counts as a change, and so does every
 * mt_graph_params_changed() (mt_optim_step calls it, as do the checkpoint
 * loaders and the trainer when they write parameters). So a training step
 * casts each weight once, however many microbatches it runs, and a copy
 * older than its parameter is never read.
 */
#include "graph/graph_impl.h"
#include "ops/bf16_impl.h"

#include <stdlib.h>

/* A parameter read by some bf16 product, and its bf16 copy. */
typedef struct {
    mt_tensor *param;
    uint16_t  *bf16;                      /* (numel of param) */
} shadow;

struct mt_bf16_state {
    mt_bf16_engine *eng;
    mt_bf16_gemm   *plans;  int n_plans;
    shadow         *shadows; int n_shadows;
    uint16_t       *ws;                   /* the activations' casts, shared by every product */
    bool            stale;                /* the parameters changed since the copies were cast */
};

mt_status mt_precision_check(mt_precision p) {
    return p == MT_PRECISION_BF16 ? mt__bf16_available() : MT_OK;
}

bool mt_bf16_native(void) { return mt__bf16_native(); }

void mt_graph_params_changed(mt_graph *g) {
    if (g && g->bf16) g->bf16->stale = true;
}

static bool is_product(mt_op op) {
    return op == MT_OP_MATMUL || op == MT_OP_LINEAR || op == MT_OP_GEMM;
}

/* The parameter whose bytes t reads (through reshapes and pvary), or NULL. */
static mt_tensor *param_root(mt_tensor *t) {
    for (;;) {
        if (t->view_of) t = t->view_of;
        else if (t->data_of) t = t->data_of;
        else break;
    }
    return t->kind == MT_PARAM ? t : NULL;
}

/* The bf16 copy of parameter p, made on first request (NULL: out of
 * memory). */
static const uint16_t *shadow_of(struct mt_bf16_state *st, mt_tensor *p) {
    for (int i = 0; i < st->n_shadows; i++)
        if (st->shadows[i].param == p) return st->shadows[i].bf16;
    uint16_t *b = malloc((size_t)mt_tensor_numel(p) * sizeof *b);
    if (!b) return NULL;
    st->shadows[st->n_shadows++] = (shadow){p, b};
    return b;
}

mt_status mt__precision_prepare(mt_graph *g, mt_precision prec) {
    if (prec != MT_PRECISION_BF16) return MT_OK;
    mt_status s = mt__bf16_available();
    if (s != MT_OK) return s;
    struct mt_bf16_state *st = calloc(1, sizeof *st);
    if (!st) return mt_fail(MT_ENOMEM, "out of memory for the bf16 plans");
    g->bf16 = st;
    st->stale = true;
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += is_product(g->nodes[i].call.op);
    st->plans = calloc((size_t)(n ? n : 1), sizeof *st->plans);
    st->shadows = calloc((size_t)(g->n_params ? g->n_params : 1), sizeof *st->shadows);
    if (!st->plans || !st->shadows) return mt_fail(MT_ENOMEM, "out of memory for the bf16 plans");
    if ((s = mt__bf16_engine_create(mt_pool_size(g->env.pool), &st->eng)) != MT_OK) return s;
    size_t ws = 0;
    for (int i = 0; i < g->n_nodes && s == MT_OK; i++) {
        mt_op_call *c = &g->nodes[i].call;
        if (!is_product(c->op)) continue;
        bool ta = false, tb = true, both_acc = false;
        int64_t M, N, K;
        if (c->op == MT_OP_LINEAR) {   /* x (rows,C) · w (OC,C)ᵀ; never accumulates */
            M = c->p.linear.rows, N = c->p.linear.OC, K = c->p.linear.C;
        } else {   /* an accumulating call may also run as the first contribution (=) */
            ta = c->p.gemm.ta, tb = c->p.gemm.tb, both_acc = c->acc;
            M = c->p.gemm.M, N = c->p.gemm.N, K = c->p.gemm.K;
        }
        if (M == 0 || N == 0 || K == 0) continue;   /* a zero-size shard: sgemm's edge cases */
        mt_bf16_gemm *p = &st->plans[st->n_plans++];
        mt_tensor *pa = param_root(c->in[0]), *pb = param_root(c->in[1]);
        if ((pa && !(p->a16 = shadow_of(st, pa))) || (pb && !(p->b16 = shadow_of(st, pb))))
            return mt_fail(MT_ENOMEM, "out of memory for the bf16 copy of '%s'",
                           (pa ? pa : pb)->name);
        s = mt__bf16_gemm_plan(st->eng, ta, tb, M, N, K, both_acc || c->acc, p);
        if (s != MT_OK)
            return mt_fail_wrap(s, "planning node %d (%s -> '%s') in bf16", i,
                                mt__op_def(c->op)->name, c->out->name);
        size_t w = mt__bf16_ws_elems(p);
        if (w > ws) ws = w;
        c->bf16 = p;
    }
    if (ws && !(st->ws = malloc(ws * sizeof *st->ws)))
        return mt_fail(MT_ENOMEM, "out of memory for %zu bytes of bf16 workspace", ws * 2);
    for (int i = 0; i < st->n_plans; i++) st->plans[i].ws = st->ws;
    return MT_OK;
}

void mt__precision_refresh(mt_graph *g) {
    struct mt_bf16_state *st = g->bf16;
    if (!st || !st->stale) return;
    for (int i = 0; i < st->n_shadows; i++) {
        mt_tensor *p = st->shadows[i].param;
        mt__bf16_cast_pool(g->env.pool, st->shadows[i].bf16, mt_tensor_f32(p), mt_tensor_numel(p));
    }
    st->stale = false;
}

void mt__precision_free(mt_graph *g) {
    struct mt_bf16_state *st = g->bf16;
    if (!st) return;
    for (int i = 0; i < st->n_plans; i++) mt__bf16_gemm_free(&st->plans[i]);
    free(st->plans);
    for (int i = 0; i < st->n_shadows; i++) free(st->shadows[i].bf16);
    free(st->shadows);
    free(st->ws);
    mt__bf16_engine_free(st->eng);
    free(st);
    g->bf16 = NULL;
}
