/*
 * graph_impl.h — the fields behind mt_tensor and mt_graph, and the op table
 * (internal).
 *
 * A graph is a list of nodes in execution order: the forward nodes as the
 * model built them, then, after mt_graph_compile(), the backward nodes the
 * autodiff emitted, each tagged B (gradient with respect to something that
 * depends on the data, needed to keep propagating backwards) or W (gradient
 * with respect to something derived from parameters only). Nothing in B reads
 * what W writes, so B and W can run at different times — zero-bubble pipeline
 * schedules depend on that.
 */
#ifndef MT_GRAPH_IMPL_H
#define MT_GRAPH_IMPL_H

#include "meshtrain/graph.h"
#include "base/pool.h"
#include "tensor/tensor_impl.h"

typedef enum { MT_PHASE_F = 0, MT_PHASE_B = 1, MT_PHASE_W = 2 } mt_phase;

/* Every op, forward ones and the backward ones the autodiff emits. */
typedef enum {
    /* forward */
    MT_OP_MATMUL, MT_OP_LINEAR, MT_OP_ADD, MT_OP_SUB, MT_OP_MUL, MT_OP_SCALE,
    MT_OP_GELU, MT_OP_LAYERNORM, MT_OP_ATTENTION, MT_OP_EMBEDDING,
    MT_OP_CROSS_ENTROPY, MT_OP_MSE, MT_OP_SUM, MT_OP_TRANSPOSE,
    /* backward */
    MT_OP_GEMM,            /* out (+)= op(in0) · op(in1), flags in i[] */
    MT_OP_BIAS_GRAD,       /* out (+)= Σ_rows in0 */
    MT_OP_REDUCE_BCAST,    /* out (nb) (+)= f[0] · Σ_repeats in0 */
    MT_OP_SCALE_BWD,       /* out (+)= f[0] · in0 */
    MT_OP_MUL_BWD_A,       /* out (+)= in0 (dout) · in1 (b, broadcast) */
    MT_OP_MUL_BWD_B,       /* out (nb) (+)= Σ in0 (dout) · in1 (a) */
    MT_OP_GELU_BWD,        /* out (+)= gelu'(in0 x) · in1 dout */
    MT_OP_LN_BWD_INPUT,    /* out (+)= dx; in: dout x w mean rstd */
    MT_OP_LN_BWD_PARAMS,   /* out += dw, out2 += db; in: dout x mean rstd */
    MT_OP_ATTENTION_BWD,   /* out (+)= dqkv; in: dout qkv att */
    MT_OP_EMBEDDING_BWD,   /* out += scatter(in0 dout) at in1 ids */
    MT_OP_CE_BWD,          /* out (+)= dlogits; in: dloss logits lse targets */
    MT_OP_MSE_BWD,         /* out (+)= d pred; in: dloss pred target; f[1] sign */
    MT_OP_FILL_BWD,        /* out (+)= f[0] · dloss (in0, a scalar) */
    MT_OP_TRANSPOSE_BWD,   /* out (+)= transpose(in0) */
    MT_OP_COUNT
} mt_op;

#define MT_MAX_INPUTS 5


typedef struct {
    mt_op      op;
    mt_phase   phase;
    bool       acc;                       /* out (+)= */
    /* bit 0 (out) / bit 1 (out2): the first contribution to a parameter's
     * gradient, which overwrites instead of adding when the gradients are
     * marked zero (saves clearing them after every optimizer step) */
    uint8_t    param_first;
    mt_tensor *out, *out2;                /* out2: second output (ln params bwd db) */
    mt_tensor *in[MT_MAX_INPUTS];
    int        n_in;
    mt_tensor *aux[2];                    /* saved by forward for backward */
    int64_t    i[4];                      /* integer attributes */
    float      f[2];                      /* float attributes */
} mt_node;

/* Accumulated cost of one op kind while profiling. */
typedef struct {
    int64_t calls;
    double  seconds, flops, bytes;
} mt_op_profile;

struct mt_graph {
    mt_tensor **tensors;  int n_tensors, cap_tensors;
    mt_node    *nodes;    int n_nodes,   cap_nodes;
    int         n_forward;                /* nodes [0, n_forward) are F */
    int        *order_b, n_b;             /* node indices of B nodes, in run order */
    int        *order_w, n_w;             /* node indices of W nodes, in run order */
    mt_tensor  *loss;
    mt_status   status;                   /* first build/compile error, sticky */
    char        errmsg[1024];
    bool        compiled, no_grad;
    bool        grads_zero;               /* parameter gradients read as zero */
    uint64_t    seed;
    void       *arena;      size_t arena_bytes, arena_bytes_unplanned;
    void       *persistent; size_t persistent_bytes;
    float      *scratch;    size_t scratch_floats;    /* attention backward, per thread */
    mt_pool    *pool;                                 /* threads for our own kernels */
    mt_op_profile *profile;                           /* (MT_OP_COUNT) or NULL: off */
    float       loss_value;
    mt_graph_stats stats;
};

/* ---- graph.c ---- */

/* Records the first error in g (later ones are dropped) and returns NULL, so
 * builders can `return mt__graph_error(g, ...)`. Also sets mt_errmsg(). */
mt_tensor *mt__graph_error(mt_graph *g, mt_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A new tensor owned by g (name NULL: "<prefix>.<id>"). NULL on error. */
mt_tensor *mt__tensor_new(mt_graph *g, const char *name, mt_dtype dtype, mt_tensor_kind kind,
                          int ndim, const int64_t *shape);
/* Appends a node (copied); returns its index or -1. */
int        mt__node_add(mt_graph *g, const mt_node *node);

/* ---- op table (ops/op_table.c) ---- */

typedef struct {
    const char *name;
    /* runs the node on its buffers */
    void (*run)(mt_graph *g, const mt_node *n);
    /* emits the backward nodes of forward node n (NULL for backward ops) */
    void (*backward)(mt_graph *g, const mt_node *n);
    /* FLOPs and bytes moved by one run */
    void (*cost)(const mt_node *n, double *flops, double *bytes);
} mt_op_def;

const mt_op_def *mt__op_def(mt_op op);

/* ---- autodiff.c ---- */

/* The gradient tensor of t, made on first request (a view's gradient is a
 * view of its root's gradient). */
mt_tensor *mt__grad_of(mt_graph *g, mt_tensor *t);
/* Emits a backward node that contributes to the gradient of `wrt`: fills in
 * out = grad(wrt), the phase (B if wrt depends on the data, else W) and acc
 * (first contribution to an activation gradient writes; the rest, and every
 * parameter gradient, add). */
void       mt__emit_grad(mt_graph *g, mt_tensor *wrt, mt_node *node);
mt_status  mt__autodiff(mt_graph *g);

/* Marks parameter gradients zero without touching them: the next backward
 * overwrites where it would add. */
void       mt__graph_mark_grads_zero(mt_graph *g);

/* ---- plan.c ---- */
mt_status  mt__plan_buffers(mt_graph *g);

#endif /* MT_GRAPH_IMPL_H */
