/*
 * tensor_impl.h — the fields behind mt_tensor, shape helpers, and bf16
 * conversion (internal).
 *
 * A tensor is its type (dtype, shape, sharding), its kind, and its
 * storage once a graph is compiled. The graph layer creates tensors and keeps
 * its bookkeeping in the fields marked "graph" below (gradients, lifetimes,
 * placement); nothing in this layer reads them.
 */
#ifndef MT_TENSOR_IMPL_H
#define MT_TENSOR_IMPL_H

#include "meshtrain/sharding.h"

#include <string.h>

struct mt_tensor {
    char           name[MT_MAX_NAME];
    int            id;                     /* index in its graph's tensor list */
    mt_dtype       dtype;
    mt_tensor_kind kind;
    int            ndim;
    int64_t        shape[MT_MAX_DIMS];     /* the shape its graph holds: on a partitioned
                                              graph the local block's (mt_tensor_dim) */
    mt_sharding    sharding;
    /* an op output's wanted layout (mt_tensor_set_constraint; JAX's
     * with_sharding_constraint): the partitioner reduce-scatters a partial
     * result onto the dim it splits. has_constraint false: none */
    mt_sharding    constraint;
    bool           has_constraint;
    char           logical[MT_MAX_DIMS][MT_LOGICAL_NAME];   /* mt_tensor_set_logical; "" none */
    int64_t        logical_unit[MT_MAX_DIMS];  /* elements a unit of the logical axis ("heads*64":
                                                  64); a split keeps units whole. 0 read as 1 */
    mt_init        init;                   /* parameters */
    /* a shard of a global tensor (a partitioned parameter): the global shape
     * and where this block starts in it. Initialisation evaluates the global
     * element indices, so every layout holds the one-device numbers. */
    bool           is_shard;
    /* a tensor of a partitioned graph (any kind): global_shape holds the
     * shape of the global tensor it is the local block of (mt_tensor_global_dim,
     * mt_tensor_global_type); set for every slot mt_partition makes */
    bool           has_global;
    int64_t        global_shape[MT_MAX_DIMS], shard_offset[MT_MAX_DIMS];
    mt_tensor     *view_of;                /* reshape: shares this tensor's storage */
    void          *data;                   /* storage, set when the graph is compiled */
    struct mt_graph *graph;                /* graph: the one that made it (names are unique there) */
    /* graph: autodiff */
    mt_tensor     *grad;                   /* gradient tensor, made by compile */
    mt_tensor     *grad_of;                /* for a gradient: whose it is */
    bool           data_dep;               /* depends on an input (else params/consts only) */
    bool           needs_grad;             /* a gradient flows back to it */
    int            grad_emitted;           /* contributions to its gradient emitted so far */
    /* the output of a forward all-gather of a parameter shard that the
     * backward gathers again rather than keep (FSDP, ZeRO-3): autodiff
     * re-runs the gather before its first backward reader */
    bool           regather;
    /* graph: a parameter's gathered copy kept for the whole step (ZeRO-1/2,
     * --fsdp-gather once; mt_partition_opts.gather_once): persistent, its
     * gather run at the step's first forward only (exec.c, kept_stale);
     * grad_kept: its gradient persistent too, accumulated over the step's
     * microbatches and reduced onto the shard once (mt_partition_opts.
     * grads_once). Set on the gather's output, the storage root. */
    bool           step_kept, grad_kept;
    /* graph: a value the caller reads after the run (a router's loss, which
     * the trainer reports apart): persistent in the run's block, as the loss
     * is, its buffer never reused by a later node */
    bool           read_after;
    /* graph: buffer planning: a forward pvary's output reads its persistent
     * input's bytes (the identity needs no copy; its gradient stays its own) */
    mt_tensor     *data_of;
    /* graph: device variance in a device's graph (collectives.c), JAX's vma:
     * the mesh axes over which the value is known to be the same on every
     * device (vma_inv) and known to differ (vma_var); an axis in neither is
     * not known. Set for a leaf by its declaration (undeclared, untyped: its
     * kind's default, collectives.c's vma_default), for an op's output by
     * its builder (vma_typed); a view has its root's. */
    uint32_t       vma_inv, vma_var;
    bool           vma_typed;
    /* graph: buffer planning (execution-order interval, arena placement) */
    int            first_use, last_use;
    bool           in_arena;
    size_t         offset;
};

/* The storage owner of a tensor (follows view_of). */
mt_tensor  *mt__storage_root(mt_tensor *t);
/* Number of rows when the last dim is the row length (1 for a scalar). */
int64_t     mt__rows(const mt_tensor *t);
/* "(4,64,256)" into buf. */
const char *mt__shape_str(const mt_tensor *t, char *buf, size_t n);
/* Bytes of the tensor's dense storage. */
size_t      mt__tensor_bytes(const mt_tensor *t);

/* ---- bf16 (dtype.c) ----------------------------------------------------- */

static inline float mt__bf16_to_f32_1(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest even; NaN stays a (quiet) NaN. */
static inline uint16_t mt__f32_to_bf16_1(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = (u >> 16) | 0x40u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

/* The same over arrays (vectorised). */
void mt__bf16_to_f32(float *dst, const uint16_t *src, size_t n);
void mt__f32_to_bf16(uint16_t *dst, const float *src, size_t n);

/* ---- IEEE half (dtype.c: Hugging Face's F16 weights) ------------------- */

/* Exact: subnormals, infinities, NaN payloads (quieted) kept. */
float    mt__f16_to_f32_1(uint16_t h);
/* Round to nearest even; past 65504 (from 65520 on) ±inf; NaN stays NaN. */
uint16_t mt__f32_to_f16_1(float f);

#endif /* MT_TENSOR_IMPL_H */
