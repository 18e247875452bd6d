/*
 * builders.c — the public op constructors (mt_matmul, mt_layernorm, ...).
 *
 * Each checks its operands' shapes and dtypes, creates the output tensor (and
 * the tensors its op saves for the backward, if any) and appends one forward
 * node whose call names its parameters (ops/ops_impl.h). Errors stick to the
 * graph (mt_graph_status) and name the op, the operands and their shapes; a
 * NULL operand means an earlier error and is passed on silently.
 */
#include "graph/builders_impl.h"

#include <string.h>

/* ---- helpers ------------------------------------------------------------ */

#define SHAPE(t, buf) mt__shape_str((t), (buf), sizeof (buf))

static bool ready(mt_graph *g, int n, mt_tensor *const *ts) {
    if (!g || g->status != MT_OK) return false;
    for (int i = 0; i < n; i++) if (!ts[i]) return false;
    return true;
}

static bool want_dtype(mt_graph *g, const char *op, mt_tensor *t, mt_dtype dt) {
    if (t->dtype == dt) return true;
    mt__graph_error(g, MT_EINVAL, "%s: operand '%s' must be %s", op, t->name,
                    dt == MT_I32 ? "int32" : "f32");
    return false;
}

/* Operands that are rows of channels need at least one dim (a scalar has no
 * last dim to read). */
static bool want_rows(mt_graph *g, const char *op, mt_tensor *t) {
    if (!want_dtype(g, op, t, MT_F32)) return false;
    if (t->ndim >= 1) return true;
    mt__graph_error(g, MT_ESHAPE, "%s: operand '%s' is a scalar; it needs at least one dim",
                    op, t->name);
    return false;
}

/* A forward op's output, an f32 activation (NULL on error). */
static mt_tensor *act(mt_graph *g, int ndim, const int64_t *shape) {
    return mt__tensor_new(g, NULL, MT_F32, MT_ACT, ndim, shape);
}

/* A tensor a forward op saves for its backward (NULL on error). Builders make
 * it after the output: creation order sets tensor ids, hence default names
 * and the buffer plan's order among tensors of equal size. */
static mt_tensor *aux(mt_graph *g, int ndim, const int64_t *shape) {
    return mt__tensor_new(g, NULL, MT_F32, MT_AUX, ndim, shape);
}

/* Appends the forward node of `call`, whose tensors the builder has made;
 * returns its output, or NULL if anything failed on the way. */
static mt_tensor *emit(mt_graph *g, const mt_op_call *call) {
    if (g->status != MT_OK) return NULL;
    mt_node n = {.call = *call, .phase = MT_PHASE_F};
    /* device variance: pvary where an invariant operand meets a varying one */
    if (!mt__vma_operands(g, &n.call, mt__op_def(call->op)->name, (mt_axes){0})) return NULL;
    return mt__node_add(g, &n) < 0 ? NULL : call->out;
}

/* Appends the node of a forward op that saves nothing, given its inputs and
 * parameters, with an output of `shape` (NULL, ndim 0: a scalar). */
static mt_tensor *emit_simple(mt_graph *g, mt_op op, int ndim, const int64_t *shape,
                              mt_tensor *const *in, int n_in, mt_op_params p) {
    mt_op_call c = {.op = op, .n_in = n_in, .p = p};
    for (int k = 0; k < n_in; k++) c.in[k] = in[k];
    c.out = act(g, ndim, shape);
    return emit(g, &c);
}

/* The same, for builders in files of their own (builders_impl.h). */
bool mt__build_ready(mt_graph *g, int n, mt_tensor *const *ts) { return ready(g, n, ts); }
bool mt__build_want_dtype(mt_graph *g, const char *op, mt_tensor *t, mt_dtype dt) {
    return want_dtype(g, op, t, dt);
}
bool mt__build_want_rows(mt_graph *g, const char *op, mt_tensor *t) {
    return want_rows(g, op, t);
}
mt_tensor *mt__build_act(mt_graph *g, int ndim, const int64_t *shape) {
    return act(g, ndim, shape);
}
mt_tensor *mt__build_aux(mt_graph *g, int ndim, const int64_t *shape) {
    return aux(g, ndim, shape);
}
mt_tensor *mt__build_emit(mt_graph *g, const mt_op_call *call) { return emit(g, call); }
mt_tensor *mt__build_simple(mt_graph *g, mt_op op, int ndim, const int64_t *shape,
                            mt_tensor *const *in, int n_in, mt_op_params p) {
    return emit_simple(g, op, ndim, shape, in, n_in, p);
}

/* ---- matmul family ------------------------------------------------------ */

mt_tensor *mt_matmul(mt_graph *g, mt_tensor *a, mt_tensor *b, bool trans_a, bool trans_b) {
    mt_tensor *ops[2] = {a, b};
    if (!ready(g, 2, ops)) return NULL;
    if (!want_dtype(g, "matmul", a, MT_F32) || !want_dtype(g, "matmul", b, MT_F32)) return NULL;
    char sa[64], sb[64];
    if (a->ndim < 2 || b->ndim != 2 || (trans_a && a->ndim != 2))
        return mt__graph_error(g, MT_ESHAPE, "matmul: a %s%s · b %s%s: b must be 2-D, a 2-D "
                               "(or 3-D/4-D without transpose)", SHAPE(a, sa), trans_a ? "ᵀ" : "",
                               SHAPE(b, sb), trans_b ? "ᵀ" : "");
    int64_t K = trans_a ? a->shape[0] : a->shape[a->ndim - 1];
    int64_t M = trans_a ? a->shape[1] : mt__rows(a);
    int64_t Kb = trans_b ? b->shape[1] : b->shape[0];
    int64_t N = trans_b ? b->shape[0] : b->shape[1];
    if (K != Kb)
        return mt__graph_error(g, MT_ESHAPE, "matmul: inner dimensions differ: a '%s' %s%s has "
                               "K=%lld, b '%s' %s%s has K=%lld", a->name, SHAPE(a, sa),
                               trans_a ? "ᵀ" : "", (long long)K, b->name, SHAPE(b, sb),
                               trans_b ? "ᵀ" : "", (long long)Kb);
    int64_t shape[MT_MAX_DIMS];
    int ndim = trans_a ? 2 : a->ndim;
    if (trans_a) shape[0] = M;
    else for (int d = 0; d < a->ndim - 1; d++) shape[d] = a->shape[d];
    shape[ndim - 1] = N;
    mt_op_params p = {.gemm = {.ta = trans_a, .tb = trans_b, .M = M, .N = N, .K = K}};
    return emit_simple(g, MT_OP_MATMUL, ndim, shape, ops, 2, p);
}

mt_tensor *mt_linear(mt_graph *g, mt_tensor *x, mt_tensor *w, mt_tensor *bias) {
    mt_tensor *ops[3] = {x, w, bias};
    if (!ready(g, 2, ops)) return NULL;
    char sx[64], sw[64];
    if (!want_rows(g, "linear", x) || !want_dtype(g, "linear", w, MT_F32)) return NULL;
    int64_t C = x->shape[x->ndim - 1];
    /* w (O1..Ok, C): the output dims O1..Ok replace x's last dim */
    int k = w->ndim - 1;
    if (w->ndim < 2 || w->shape[k] != C || x->ndim - 1 + k > MT_MAX_DIMS)
        return mt__graph_error(g, MT_ESHAPE, "linear: weight '%s' %s must be (OC,C) or "
                               "(O1,..,Ok,C) with C=%lld from x '%s' %s, and the result at most "
                               "%d-D", w->name, SHAPE(w, sw), (long long)C, x->name,
                               SHAPE(x, sx), MT_MAX_DIMS);
    int64_t OC = 1;
    for (int d = 0; d < k; d++) OC *= w->shape[d];
    bool bias_ok = !bias || bias->ndim == k;
    for (int d = 0; bias_ok && bias && d < k; d++) bias_ok = bias->shape[d] == w->shape[d];
    if (!bias_ok)
        return mt__graph_error(g, MT_ESHAPE, "linear: bias '%s' %s must have weight '%s' %s's "
                               "output dims (all but the last)", bias->name, SHAPE(bias, sx),
                               w->name, SHAPE(w, sw));
    int64_t shape[MT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    for (int d = 0; d < k; d++) shape[x->ndim - 1 + d] = w->shape[d];
    mt_op_params p = {.linear = {.rows = mt__rows(x), .OC = OC, .C = C}};
    return emit_simple(g, MT_OP_LINEAR, x->ndim - 1 + k, shape, ops, bias ? 3 : 2, p);
}

/* ---- elementwise -------------------------------------------------------- */

static mt_tensor *binary(mt_graph *g, mt_op op, const char *name, mt_tensor *a, mt_tensor *b) {
    mt_tensor *ops[2] = {a, b};
    if (!ready(g, 2, ops)) return NULL;
    if (!want_dtype(g, name, a, MT_F32) || !want_dtype(g, name, b, MT_F32)) return NULL;
    bool suffix = b->ndim <= a->ndim;
    for (int d = 0; suffix && d < b->ndim; d++)
        suffix = b->shape[b->ndim - 1 - d] == a->shape[a->ndim - 1 - d];
    if (!suffix) {
        char sa[64], sb[64];
        return mt__graph_error(g, MT_ESHAPE, "%s: '%s' %s and '%s' %s do not broadcast; the "
                               "second shape must equal the trailing dims of the first",
                               name, a->name, SHAPE(a, sa), b->name, SHAPE(b, sb));
    }
    return emit_simple(g, op, a->ndim, a->shape, ops, 2, (mt_op_params){0});
}

mt_tensor *mt_add(mt_graph *g, mt_tensor *a, mt_tensor *b) { return binary(g, MT_OP_ADD, "add", a, b); }
mt_tensor *mt_sub(mt_graph *g, mt_tensor *a, mt_tensor *b) { return binary(g, MT_OP_SUB, "sub", a, b); }
mt_tensor *mt_mul(mt_graph *g, mt_tensor *a, mt_tensor *b) { return binary(g, MT_OP_MUL, "mul", a, b); }

mt_tensor *mt_scale(mt_graph *g, mt_tensor *a, float s) {
    if (!ready(g, 1, &a) || !want_dtype(g, "scale", a, MT_F32)) return NULL;
    mt_op_params p = {.scale = {.s = s}};
    return emit_simple(g, MT_OP_SCALE, a->ndim, a->shape, &a, 1, p);
}

mt_tensor *mt_gelu(mt_graph *g, mt_tensor *x) {
    if (!ready(g, 1, &x) || !want_dtype(g, "gelu", x, MT_F32)) return NULL;
    return emit_simple(g, MT_OP_GELU, x->ndim, x->shape, &x, 1, (mt_op_params){0});
}

/* ---- normalisation, attention, embedding -------------------------------- */

mt_tensor *mt_layernorm(mt_graph *g, mt_tensor *x, mt_tensor *w, mt_tensor *b) {
    mt_tensor *ops[3] = {x, w, b};
    if (!ready(g, 3, ops)) return NULL;
    if (!want_rows(g, "layernorm", x) || !want_dtype(g, "layernorm", w, MT_F32) ||
        !want_dtype(g, "layernorm", b, MT_F32))
        return NULL;
    int64_t C = x->shape[x->ndim - 1];
    for (int k = 1; k < 3; k++)
        if (ops[k]->ndim != 1 || ops[k]->shape[0] != C) {
            char s1[64], s2[64];
            return mt__graph_error(g, MT_ESHAPE, "layernorm: '%s' %s must be (%lld) to match x "
                                   "'%s' %s", ops[k]->name, SHAPE(ops[k], s1), (long long)C,
                                   x->name, SHAPE(x, s2));
        }
    /* one backward call computes both gradients, in the W phase: both take
     * one, and neither depends on the data (parameters, or values made from
     * them only, such as a parameter after pvary) */
    if ((w->needs_grad || b->needs_grad) &&
        (w->needs_grad != b->needs_grad || w->data_dep || b->data_dep))
        return mt__graph_error(g, MT_EUNSUPPORTED, "layernorm: weight '%s' and bias '%s' must "
                               "both be parameters (or both made from parameters only)",
                               w->name, b->name);
    int64_t rows = mt__rows(x);
    mt_op_call c = {.op = MT_OP_LAYERNORM, .n_in = 3, .in = {x, w, b},
                    .p.rows = {.rows = rows, .C = C}};
    c.out = act(g, x->ndim, x->shape);
    c.aux[0] = aux(g, 1, &rows);   /* mean (rows) */
    c.aux[1] = aux(g, 1, &rows);   /* rstd (rows) */
    return emit(g, &c);
}

/* Document ids (B,T) int32 for a call on q (B,T,...), or NULL: one document. */
static bool want_docs(mt_graph *g, const char *op, const mt_tensor *q, mt_tensor *docs) {
    if (!docs) return true;
    if (!ready(g, 1, &docs) || !want_dtype(g, op, docs, MT_I32)) return false;
    if (docs->ndim != 2 || docs->shape[0] != q->shape[0] || docs->shape[1] != q->shape[1]) {
        char s1[64], s2[64];
        mt__graph_error(g, MT_ESHAPE, "%s: document ids '%s' %s must be (B,T) of q '%s' %s",
                        op, docs->name, SHAPE(docs, s1), q->name, SHAPE(q, s2));
        return false;
    }
    return true;
}

mt_tensor *mt_attention(mt_graph *g, mt_tensor *qkv, int NH) {
    return mt_attention_docs(g, qkv, NH, NULL);
}

mt_tensor *mt_attention_docs(mt_graph *g, mt_tensor *qkv, int NH, mt_tensor *docs) {
    if (!ready(g, 1, &qkv) || !want_dtype(g, "attention", qkv, MT_F32)) return NULL;
    char s[64];
    /* (B,T,3C) and (B,T,3,C) are one storage: q, k, v side by side per row */
    bool packed = qkv->ndim == 3 && qkv->shape[2] % 3 == 0;
    bool split = qkv->ndim == 4 && qkv->shape[2] == 3;
    if (!packed && !split)
        return mt__graph_error(g, MT_ESHAPE, "attention: qkv '%s' %s must be (B,T,3C) or "
                               "(B,T,3,C)", qkv->name, SHAPE(qkv, s));
    int64_t C = packed ? qkv->shape[2] / 3 : qkv->shape[3];
    if (NH <= 0 || C % NH != 0)
        return mt__graph_error(g, MT_EINVAL, "attention: C=%lld channels do not split into "
                               "NH=%d heads; pick NH dividing C", (long long)C, NH);
    int64_t B = qkv->shape[0], T = qkv->shape[1];
    int64_t shape[3] = {B, T, C}, lse_shape[3] = {B, NH, T};
    if (!want_docs(g, "attention", qkv, docs)) return NULL;
    mt_op_call c = {.op = MT_OP_ATTENTION, .n_in = docs ? 2 : 1, .in = {qkv, docs},
                    .p.attention = {.B = B, .T = T, .C = C, .NH = NH, .doc = docs ? 1 : 0}};
    c.out = act(g, 3, shape);
    c.aux[0] = aux(g, 3, lse_shape);   /* lse (B,NH,T): each row's log-sum-exp (flash) */
    return emit(g, &c);
}

/* ---- the LLaMA family's: rmsnorm, swiglu, grouped-query attention ------- */
/* (rope is graph/op_rope.c's) */

mt_tensor *mt_rmsnorm(mt_graph *g, mt_tensor *x, mt_tensor *w, float eps) {
    mt_tensor *ops[2] = {x, w};
    if (!ready(g, 2, ops)) return NULL;
    if (!want_rows(g, "rmsnorm", x) || !want_dtype(g, "rmsnorm", w, MT_F32)) return NULL;
    char s1[64], s2[64];
    int64_t C = x->shape[x->ndim - 1];
    if (w->ndim != 1 || w->shape[0] != C)
        return mt__graph_error(g, MT_ESHAPE, "rmsnorm: weight '%s' %s must be (%lld) to match x "
                               "'%s' %s", w->name, SHAPE(w, s1), (long long)C, x->name,
                               SHAPE(x, s2));
    if (!(eps > 0.0f && eps < 1.0f))
        return mt__graph_error(g, MT_EINVAL, "rmsnorm of '%s': eps=%g must be in (0, 1) (LLaMA "
                               "uses 1e-5 or 1e-6)", x->name, (double)eps);
    int64_t rows = mt__rows(x);
    mt_op_call c = {.op = MT_OP_RMSNORM, .n_in = 2, .in = {x, w},
                    .p.rmsnorm = {.rows = rows, .C = C, .eps = eps}};
    c.out = act(g, x->ndim, x->shape);
    c.aux[0] = aux(g, 1, &rows);   /* rstd (rows) */
    return emit(g, &c);
}

mt_tensor *mt_swiglu(mt_graph *g, mt_tensor *a, mt_tensor *b) {
    mt_tensor *ops[2] = {a, b};
    if (!ready(g, 2, ops)) return NULL;
    if (!want_dtype(g, "swiglu", a, MT_F32) || !want_dtype(g, "swiglu", b, MT_F32)) return NULL;
    bool same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; d++) same = a->shape[d] == b->shape[d];
    if (!same) {
        char sa[64], sb[64];
        return mt__graph_error(g, MT_ESHAPE, "swiglu: '%s' %s and '%s' %s must have one shape",
                               a->name, SHAPE(a, sa), b->name, SHAPE(b, sb));
    }
    return emit_simple(g, MT_OP_SWIGLU, a->ndim, a->shape, ops, 2, (mt_op_params){0});
}

mt_tensor *mt__attention_gqa_at(mt_graph *g, mt_tensor *q, mt_tensor *k, mt_tensor *v, int NH,
                                int KV, int G, int hoff, mt_tensor *docs) {
    mt_tensor *ops[3] = {q, k, v};
    if (!ready(g, 3, ops)) return NULL;
    for (int i = 0; i < 3; i++)
        if (!want_dtype(g, "attention_gqa", ops[i], MT_F32)) return NULL;
    char sq[64], sk[64], sv[64];
    bool dims = q->ndim == 3 && k->ndim == 3 && v->ndim == 3;
    for (int d = 0; dims && d < 2; d++)
        dims = k->shape[d] == q->shape[d] && v->shape[d] == q->shape[d];
    if (!dims)
        return mt__graph_error(g, MT_ESHAPE, "attention_gqa: q '%s' %s, k '%s' %s and v '%s' %s "
                               "must be (B,T,NH·HS), (B,T,KV·HS), (B,T,KV·HS) of one B and T",
                               q->name, SHAPE(q, sq), k->name, SHAPE(k, sk), v->name,
                               SHAPE(v, sv));
    int64_t C = q->shape[2];
    if (NH <= 0 || KV <= 0 || C % NH != 0 || k->shape[2] != KV * (C / NH) ||
        v->shape[2] != k->shape[2])
        return mt__graph_error(g, MT_EINVAL, "attention_gqa: q '%s' %s must split into NH=%d "
                               "heads, and k '%s' %s and v '%s' %s into KV=%d heads of that "
                               "size", q->name, SHAPE(q, sq), NH, k->name, SHAPE(k, sk),
                               v->name, SHAPE(v, sv), KV);
    if (G <= 0 || hoff < 0 || (hoff + NH - 1) / G >= KV)
        return mt__graph_error(g, MT_EINVAL, "attention_gqa: query heads %d..%d in groups of "
                               "G=%d read kv heads past the KV=%d that k '%s' holds", hoff,
                               hoff + NH - 1, G, KV, k->name);
    /* dq and dk come from one backward call (grad_rules.c) */
    if (q->needs_grad != k->needs_grad)
        return mt__graph_error(g, MT_EUNSUPPORTED, "attention_gqa: q '%s' and k '%s' must both "
                               "take gradients or neither", q->name, k->name);
    if (!want_docs(g, "attention_gqa", q, docs)) return NULL;
    int64_t B = q->shape[0], T = q->shape[1];
    int64_t lse_shape[3] = {B, NH, T};
    mt_op_call c = {.op = MT_OP_ATTENTION_GQA, .n_in = docs ? 4 : 3, .in = {q, k, v, docs},
                    .p.gqa = {.B = B, .T = T, .NH = NH, .KV = KV, .HS = C / NH, .G = G,
                              .hoff = hoff, .doc = docs ? 3 : 0}};
    c.out = act(g, 3, q->shape);
    c.aux[0] = aux(g, 3, lse_shape);   /* lse (B,NH,T): each row's log-sum-exp (flash) */
    return emit(g, &c);
}

mt_tensor *mt_attention_gqa(mt_graph *g, mt_tensor *q, mt_tensor *k, mt_tensor *v, int NH,
                            int KV) {
    return mt_attention_gqa_docs(g, q, k, v, NH, KV, NULL);
}

mt_tensor *mt_attention_gqa_docs(mt_graph *g, mt_tensor *q, mt_tensor *k, mt_tensor *v, int NH,
                                 int KV, mt_tensor *docs) {
    if (g && g->status == MT_OK && (NH <= 0 || KV <= 0 || NH % KV != 0))
        return mt__graph_error(g, MT_EINVAL, "attention_gqa: KV=%d kv heads must divide NH=%d "
                               "query heads", KV, NH);
    return mt__attention_gqa_at(g, q, k, v, NH, KV, NH / (KV > 0 ? KV : 1), 0, docs);
}

static mt_tensor *embedding(mt_graph *g, mt_tensor *table, mt_tensor *ids, bool masked,
                            int64_t lo) {
    mt_tensor *ops[2] = {table, ids};
    if (!ready(g, 2, ops)) return NULL;
    if (!want_dtype(g, "embedding", ids, MT_I32) || !want_dtype(g, "embedding", table, MT_F32))
        return NULL;
    char s[64];
    if (table->ndim != 2 || ids->ndim >= MT_MAX_DIMS)
        return mt__graph_error(g, MT_ESHAPE, "embedding: table '%s' %s must be (V,C) and ids "
                               "at most %d-D", table->name, SHAPE(table, s), MT_MAX_DIMS - 1);
    int64_t shape[MT_MAX_DIMS];
    memcpy(shape, ids->shape, sizeof shape);
    shape[ids->ndim] = table->shape[1];
    mt_op_params p = {.embedding = {.n = mt_tensor_numel(ids), .C = table->shape[1],
                                    .V = table->shape[0], .masked = masked, .lo = lo}};
    return emit_simple(g, MT_OP_EMBEDDING, ids->ndim + 1, shape, ops, 2, p);
}

mt_tensor *mt_embedding(mt_graph *g, mt_tensor *table, mt_tensor *ids) {
    return embedding(g, table, ids, false, 0);
}

mt_tensor *mt__embedding_masked(mt_graph *g, mt_tensor *table, mt_tensor *ids, int64_t lo) {
    return embedding(g, table, ids, true, lo);
}

/* ---- losses and reductions ---------------------------------------------- */

/* vp NULL: the whole vocabulary; else the logits are columns [lo, lo+Vp) of
 * a vocabulary of V split over *vp. */
static mt_tensor *cross_entropy(mt_graph *g, mt_tensor *logits, mt_tensor *targets, int V,
                                float scale, const mt_axes *vp, int64_t lo) {
    mt_tensor *ops[2] = {logits, targets};
    if (!ready(g, 2, ops)) return NULL;
    if (!want_dtype(g, "cross_entropy", targets, MT_I32) || !want_rows(g, "cross_entropy", logits))
        return NULL;
    char s1[64], s2[64];
    int64_t Vp = logits->shape[logits->ndim - 1];
    if (V <= 0 || (!vp && V > Vp))
        return mt__graph_error(g, MT_EINVAL, "cross_entropy: V=%d must be in [1, %lld] (the "
                               "last dim of logits '%s')", V, (long long)Vp, logits->name);
    if (mt_tensor_numel(targets) != mt__rows(logits))
        return mt__graph_error(g, MT_ESHAPE, "cross_entropy: targets '%s' %s need one entry per "
                               "row of logits '%s' %s", targets->name, SHAPE(targets, s1),
                               logits->name, SHAPE(logits, s2));
    int64_t rows = mt__rows(logits);
    mt_op_call c = {.op = MT_OP_CROSS_ENTROPY, .n_in = 2, .in = {logits, targets},
                    .p.ce = {.rows = rows, .V = V, .Vp = Vp, .scale = scale, .lo = lo}};
    if (vp) c.p.ce.vp_axes = *vp;
    c.out = act(g, 0, NULL);
    c.aux[0] = aux(g, 1, &rows);   /* lse (rows) */
    return emit(g, &c);
}

mt_tensor *mt_cross_entropy(mt_graph *g, mt_tensor *logits, mt_tensor *targets, int V, float scale) {
    return cross_entropy(g, logits, targets, V, scale, NULL, 0);
}

mt_tensor *mt__cross_entropy_vp(mt_graph *g, mt_tensor *logits, mt_tensor *targets, int V,
                                float scale, mt_axes axes, int64_t lo) {
    if (g && !g->ctx) return mt__graph_error(g, MT_ESTATE, "vocabulary-parallel cross_entropy: "
                                             "bind the graph to a device (mt_graph_set_ctx) first");
    return cross_entropy(g, logits, targets, V, scale, &axes, lo);
}

mt_tensor *mt_mse(mt_graph *g, mt_tensor *pred, mt_tensor *target, float scale) {
    mt_tensor *ops[2] = {pred, target};
    if (!ready(g, 2, ops)) return NULL;
    if (!want_dtype(g, "mse", pred, MT_F32) || !want_dtype(g, "mse", target, MT_F32)) return NULL;
    if (mt_tensor_numel(pred) != mt_tensor_numel(target)) {
        char s1[64], s2[64];
        return mt__graph_error(g, MT_ESHAPE, "mse: pred '%s' %s and target '%s' %s differ in size",
                               pred->name, SHAPE(pred, s1), target->name, SHAPE(target, s2));
    }
    mt_op_params p = {.mse = {.scale = scale}};
    return emit_simple(g, MT_OP_MSE, 0, NULL, ops, 2, p);
}

mt_tensor *mt_sum(mt_graph *g, mt_tensor *x) {
    if (!ready(g, 1, &x) || !want_dtype(g, "sum", x, MT_F32)) return NULL;
    mt_op_params p = {.scale = {.s = 1.0f}};
    return emit_simple(g, MT_OP_SUM, 0, NULL, &x, 1, p);
}

mt_tensor *mt_mean(mt_graph *g, mt_tensor *x) {
    if (!ready(g, 1, &x) || !want_dtype(g, "mean", x, MT_F32)) return NULL;
    mt_op_params p = {.scale = {.s = (float)(1.0 / (double)mt_tensor_numel(x))}};
    return emit_simple(g, MT_OP_SUM, 0, NULL, &x, 1, p);
}

/* ---- shapes ------------------------------------------------------------- */

mt_tensor *mt_reshape(mt_graph *g, mt_tensor *x, int ndim, const int64_t *shape) {
    if (!ready(g, 1, &x)) return NULL;
    mt_tensor *v = mt__tensor_new(g, NULL, x->dtype, x->kind == MT_PARAM ? MT_ACT : x->kind,
                                  ndim, shape);
    if (!v) return NULL;
    if (mt_tensor_numel(v) != mt_tensor_numel(x)) {
        char s1[64], s2[64];
        return mt__graph_error(g, MT_ESHAPE, "reshape: '%s' %s has %lld elements, the new shape "
                               "%s has %lld", x->name, SHAPE(x, s1), (long long)mt_tensor_numel(x),
                               SHAPE(v, s2), (long long)mt_tensor_numel(v));
    }
    v->view_of = x;
    v->data_dep = x->data_dep;
    v->needs_grad = x->needs_grad;
    return v;
}

mt_tensor *mt_reshard(mt_graph *g, mt_tensor *x, const mt_sharding *sh) {
    if (!ready(g, 1, &x) || !want_dtype(g, "reshard", x, MT_F32)) return NULL;
    if (!sh) return mt__graph_error(g, MT_EINVAL, "reshard of '%s': the layout is NULL", x->name);
    for (int d = x->ndim; d < MT_MAX_DIMS; d++)
        if (sh->dim_axes[d])
            return mt__graph_error(g, MT_EINVAL, "reshard of '%s': it has %d dims, but the "
                                   "layout splits dim %d", x->name, x->ndim, d);
    mt_op_params p = {.reshard = *sh};
    return emit_simple(g, MT_OP_RESHARD, x->ndim, x->shape, &x, 1, p);
}

mt_tensor *mt_transpose(mt_graph *g, mt_tensor *x) {
    if (!ready(g, 1, &x) || !want_dtype(g, "transpose", x, MT_F32)) return NULL;
    char s[64];
    if (x->ndim < 2)
        return mt__graph_error(g, MT_ESHAPE, "transpose: '%s' %s needs at least 2 dims",
                               x->name, SHAPE(x, s));
    int64_t shape[MT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 2] = x->shape[x->ndim - 1];
    shape[x->ndim - 1] = x->shape[x->ndim - 2];
    int64_t R = x->shape[x->ndim - 2], Cc = x->shape[x->ndim - 1];
    mt_op_params p = {.transpose = {.batch = mt_tensor_numel(x) / (R * Cc), .R = R, .Cc = Cc}};
    return emit_simple(g, MT_OP_TRANSPOSE, x->ndim, shape, &x, 1, p);
}
