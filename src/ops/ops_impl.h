/*
 * ops_impl.h — the ops: what one call of an op reads and writes, and the op
 * table {name, run, cost} that runs it (internal).
 *
 * This layer knows tensors and kernels, not graphs. A call (mt_op_call) names
 * its output(s), inputs, saved tensors, accumulate flags and parameters; an
 * environment (mt_op_env) lends it threads and scratch. Who makes calls, in
 * which order they run and how gradients flow is the graph layer's business:
 * its builders make the forward calls and its gradient rules the backward
 * ones (graph/grad_rules.c), as ggml's core builds the graph and its backends
 * only compute.
 *
 * Shape letters: B batch, T time, C channels, NH heads, OC output channels,
 * V vocabulary, Vp padded vocabulary, rows = any number of leading rows.
 */
#ifndef MT_OPS_IMPL_H
#define MT_OPS_IMPL_H

#include "base/pool.h"
#include "tensor/tensor_impl.h"

/* Every op, forward ones and the backward ones the gradient rules emit. Each
 * line says which member of mt_op_params it reads. */
typedef enum {
    /* forward */
    MT_OP_MATMUL,          /* p.gemm */
    MT_OP_LINEAR,          /* p.linear */
    MT_OP_ADD, MT_OP_SUB, MT_OP_MUL,
    MT_OP_SCALE,           /* p.scale */
    MT_OP_GELU,
    MT_OP_LAYERNORM,       /* p.rows; aux = {mean, rstd} (rows) */
    MT_OP_ATTENTION,       /* p.attention; aux = {att} (B,NH,T,T) */
    MT_OP_EMBEDDING,       /* p.embedding */
    MT_OP_CROSS_ENTROPY,   /* p.ce; aux = {lse} (rows) */
    MT_OP_MSE,             /* p.mse (scale) */
    MT_OP_SUM,             /* p.scale: out = s · Σ in0 (1/n for a mean) */
    MT_OP_TRANSPOSE,       /* p.transpose */
    /* backward */
    MT_OP_GEMM,            /* out (+)= op(in0) · op(in1); p.gemm */
    MT_OP_BIAS_GRAD,       /* out (OC) (+)= Σ_rows in0; p.rows (C = OC) */
    MT_OP_REDUCE_BCAST,    /* out (nb) (+)= s · Σ_repeats in0; p.scale */
    MT_OP_SCALE_BWD,       /* out (+)= s · in0; p.scale */
    MT_OP_MUL_BWD_A,       /* out (+)= in0 (dout) · in1 (b, broadcast) */
    MT_OP_MUL_BWD_B,       /* out (nb) (+)= Σ in0 (dout) · in1 (a) */
    MT_OP_GELU_BWD,        /* out (+)= gelu'(in0 x) · in1 dout */
    MT_OP_LN_BWD_INPUT,    /* out (+)= dx; in: dout x w mean rstd; p.rows */
    MT_OP_LN_BWD_PARAMS,   /* out (+)= dw, out2 (+)= db; in: dout x mean rstd; p.rows */
    MT_OP_ATTENTION_BWD,   /* out (+)= dqkv; in: dout qkv att; p.attention */
    MT_OP_EMBEDDING_BWD,   /* out (+)= scatter(in0 dout) at in1 ids; p.embedding */
    MT_OP_CE_BWD,          /* out (+)= dlogits; in: dloss logits lse targets; p.ce */
    MT_OP_MSE_BWD,         /* out (+)= sign · d pred; in: dloss pred target; p.mse */
    MT_OP_FILL_BWD,        /* out (+)= s · dloss (in0, a scalar); p.scale */
    MT_OP_TRANSPOSE_BWD,   /* out (+)= transpose(in0); p.transpose */
    MT_OP_COUNT
} mt_op;

#define MT_MAX_INPUTS 5

/* ---- parameters, one struct per op family ------------------------------- */

/* out (M,N) (+)= op(A) (M,K) · op(B) (K,N), op() a transpose when ta / tb. */
typedef struct { bool ta, tb; int64_t M, N, K; } mt_gemm_params;
/* out (rows,OC) = x (rows,C) · w (OC,C)ᵀ + b (OC). */
typedef struct { int64_t rows, OC, C; } mt_linear_params;
/* rows of C channels, each reduced or normalised on its own. */
typedef struct { int64_t rows, C; } mt_rows_params;
/* causal self-attention over qkv (B,T,3C) with NH heads. */
typedef struct { int64_t B, T, C, NH; } mt_attention_params;
/* n ids into a table (V,C). */
typedef struct { int64_t n, C, V; } mt_embedding_params;
/* softmax cross-entropy over the first V of Vp columns of logits (rows,Vp);
 * the loss is scale · Σ_rows. */
typedef struct { int64_t rows, V, Vp; float scale; } mt_ce_params;
/* loss = scale · Σ (pred - target)²; sign (backward only) is +1 for d pred,
 * -1 for d target. */
typedef struct { float scale, sign; } mt_mse_params;
/* a scalar factor. */
typedef struct { float s; } mt_scale_params;
/* out (batch,Cc,R) = in (batch,R,Cc) with the last two dims swapped. */
typedef struct { int64_t batch, R, Cc; } mt_transpose_params;

/* An op's parameters: the member its mt_op line names (none for the rest). */
typedef union {
    mt_gemm_params      gemm;
    mt_linear_params    linear;
    mt_rows_params      rows;
    mt_attention_params attention;
    mt_embedding_params embedding;
    mt_ce_params        ce;
    mt_mse_params       mse;
    mt_scale_params     scale;
    mt_transpose_params transpose;
} mt_op_params;

/* ---- one call, where it runs, the table ---------------------------------- */

/* One run of an op on its tensors. acc / acc2 select out = result (false) or
 * out += result (true), for out / out2. */
typedef struct {
    mt_op        op;
    bool         acc, acc2;
    mt_tensor   *out, *out2;              /* out2: a second output (LN_BWD_PARAMS: db), else NULL */
    mt_tensor   *in[MT_MAX_INPUTS];
    int          n_in;
    mt_tensor   *aux[2];                  /* saved by a forward for its backward */
    mt_op_params p;
} mt_op_call;

/* What a call runs with: threads, and scratch for the ops that ask for it. */
typedef struct {
    mt_pool *pool;                        /* threads for our own kernels; NULL: the caller alone */
    float   *scratch;                     /* (pool size, n) for n the largest scratch() of the calls */
    size_t   scratch_floats;              /* all of it */
} mt_op_env;

typedef struct {
    const char *name;
    /* Runs the call on its buffers. Required. */
    void   (*run)(const mt_op_env *env, const mt_op_call *call);
    /* FLOPs and bytes moved by one run. Required. */
    void   (*cost)(const mt_op_call *call, double *flops, double *bytes);
    /* Floats of scratch one worker of env->pool needs to run the call.
     * Optional: NULL means none. */
    size_t (*scratch)(const mt_op_call *call);
} mt_op_def;

/* The table entry of op (op < MT_OP_COUNT). */
const mt_op_def *mt__op_def(mt_op op);

#endif /* MT_OPS_IMPL_H */
