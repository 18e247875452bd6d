/*
 * meshtrain/tensor.h — element types and tensors: what a tensor is (dtype,
 * shape, kind) and how to read it. Tensors are made by a graph
 * (graph.h); their layout over a mesh is in sharding.h.
 */
#ifndef MESHTRAIN_TENSOR_H
#define MESHTRAIN_TENSOR_H

#include "meshtrain/base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MT_MAX_DIMS 4
#define MT_MAX_NAME 64

typedef enum { MT_F32 = 0, MT_BF16 = 1, MT_I32 = 2 } mt_dtype;

/* The size in bytes of one element of `dtype`; 0 for an unknown one. */
size_t      mt_dtype_size(mt_dtype dtype);
/* "f32", "bf16", "i32"; "?" for an unknown one. */
const char *mt_dtype_name(mt_dtype dtype);

typedef enum {
    MT_INPUT = 0,   /* set by the caller before each forward (data, targets) */
    MT_PARAM = 1,   /* trainable, persistent, has a gradient */
    MT_ACT   = 2,   /* intermediate result of the forward pass */
    MT_GRAD  = 3,   /* gradient (of a parameter or an activation) */
    MT_AUX   = 4,   /* saved by an op's forward for its backward (stats, probs) */
    MT_CONST = 5    /* filled once at compile (e.g. position ids), persistent */
} mt_tensor_kind;

/* Parameter initialisation, evaluated per element from (seed, name, index). */
typedef enum {
    MT_INIT_ZEROS = 0,
    MT_INIT_ONES,
    MT_INIT_NORMAL,   /* N(0, std²) */
    MT_INIT_UNIFORM   /* U(-a, a), a = std */
} mt_init_kind;

typedef struct { mt_init_kind kind; float std; } mt_init;

typedef struct mt_tensor mt_tensor;

const char    *mt_tensor_name(const mt_tensor *t);
mt_dtype       mt_tensor_dtype(const mt_tensor *t);
mt_tensor_kind mt_tensor_kind_of(const mt_tensor *t);
int            mt_tensor_ndim(const mt_tensor *t);
/* The size of dimension `dim` (0-based) as this tensor's graph holds it; 1
 * past ndim. On a partitioned graph (mt_partition: one device's program)
 * that is the local size, the block the device stores: a (B,T) input split
 * over data=4 answers B/4. On any other graph it is the whole size. Its
 * storage (mt_tensor_f32, mt_tensor_i32) has these dims. */
int64_t        mt_tensor_dim(const mt_tensor *t, int dim);
/* The global size of dimension `dim` (0-based); 1 past ndim. For a tensor
 * of a partitioned graph that stands for a tensor of the global program (a
 * leaf, a parameter's shard, an op's result) the size of the global tensor
 * it is a block of: mt_tensor_dim times the sizes of the axes that split
 * the dim. For a tensor of a graph that is not partitioned, its own size,
 * as mt_tensor_dim. Tensors the partitioner adds between those (a
 * collective's result) answer their local size: mt_tensor_global_type(t,
 * mesh) (partition.h) computes theirs from their sharding. */
int64_t        mt_tensor_global_dim(const mt_tensor *t, int dim);
/* Number of elements this graph holds: the product of mt_tensor_dim (local
 * on a partitioned graph). */
int64_t        mt_tensor_numel(const mt_tensor *t);
/* Storage of the tensor after mt_graph_compile(); NULL before, and NULL when
 * the dtype differs. f32 and i32 tensors are dense, row-major. */
float         *mt_tensor_f32(mt_tensor *t);
int32_t       *mt_tensor_i32(mt_tensor *t);

/* What the matrix products compute in (docs/precision.md).
 *   MT_PRECISION_FP32  every product in float32 (Open BLAS's sgemm); the default.
 *   MT_PRECISION_BF16  mixed precision: the products of matmul, linear and their
 *            backward (MT_OP_MATMUL, MT_OP_LINEAR, MT_OP_GEMM) cast their
 *            operands to bf16 (round to nearest even) and run as oneDNN
 *            matmul primitives, accumulating and writing float32. A weight
 *            operand (a parameter, or a view of one) is cast once into a
 *            bf16 copy that is refreshed at the first forward after the
 *            parameters changed (mt_graph_params_changed); activations are
 *            cast as each product reads them. Parameters, gradients,
 *            optimizer state, layernorm, softmax, GELU and the loss stay
 *            float32, and so do the collective matmuls (ag_linear,
 *            linear_rs: tensor parallel's overlapped products) and every
 *            collective. Needs a build with oneDNN (mt_precision_check). */
typedef enum { MT_PRECISION_FP32 = 0, MT_PRECISION_BF16 = 1 } mt_precision;
/* "fp32" / "bf16". */
const char *mt_precision_name(mt_precision p);
/* Parses "fp32" or "bf16" into *out; MT_EINVAL naming the word otherwise. */
mt_status   mt_precision_parse(const char *s, mt_precision *out);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_TENSOR_H */
