/*
 * partition_impl.h — the partitioner's state and the helpers its two files
 * share (internal): partition.c makes the slots (leaves, views, the gathers
 * of stored-split parameters) and drives the pass; node.c partitions one
 * node (its rule, the steps of graph/op_desc.h's mt_lower_services).
 */
#ifndef MT_PARTITION_IMPL_H
#define MT_PARTITION_IMPL_H

#include "graph/op_desc.h"
#include "graph/shard_rules.h"
#include "mesh/mesh_impl.h"
#include "meshtrain/partition.h"

/* What the partitioner knows about one global tensor. */
typedef struct {
    mt_tensor *local;        /* its twin in the device's graph; NULL: not made yet */
    mt_type    type;         /* global type */
    uint32_t   vary;         /* mesh axes over which the local value differs */
    mt_tensor *pvaried;      /* local after a pvary over pvary_axes (cached) */
    uint32_t   pvary_axes;
    bool       to_gather;    /* a stored-split parameter not yet gathered (FSDP) */
    mt_tensor *prefetch;     /* the stored-split parameter first read after this one */
} slot;

typedef struct {
    mt_graph      *global, *lg;
    mt_ctx        *ctx;
    uint32_t       gather_axes;      /* opts->gather_axes */
    uint32_t       gather_invariant; /* opts->gather_allreduce_axes */
    uint32_t       headtail;         /* opts->headtail_axes */
    /* the hooks of the variants opts->lowerings chose, by op (NULL: the
     * descriptor's) */
    mt_lower_moves_fn lowering[MT_OP_COUNT];
    mt_lower_fn    lower_variant[MT_OP_COUNT];   /* a variant's lowering of the op (its
                                                    descriptor's where NULL) */
    bool           regather;         /* opts->reshard_after_forward */
    bool           gather_once, grads_once;   /* opts' */
    uint8_t       *only_resharded;   /* (n_tensors) read, and only by reshard nodes */
    const mt_mesh *mesh;
    mt_shard_mode  mode;
    bool           skip_pvary;   /* opts->test_skip_grad_reduction */
    slot          *slots;    /* (global->n_tensors) by tensor id */
    /* the last gathers of op outputs, so that the products reading one
     * activation (LLaMA's q, k and v under sequence parallelism) share one
     * gather, as Megatron's fused products do: its gradient then sums
     * before one reduce-scatter */
    struct { const mt_tensor *x; mt_tensor *y; uint32_t axes; int dim; bool varying; }
                   gathered[8];
    int            n_gathered;
} partitioner;

/* ---- slots.c ---- */

/* The named mesh axes of a bit set. */
mt_axes    mt__part_axes_of(const mt_mesh *mesh, uint32_t bits);
/* The axes that split any dim of t. */
uint32_t   mt__part_split_axes(const mt_type *t);
/* Records a partition error in mt_errmsg() and returns the code (the global
 * graph is left as it was). */
mt_status  mt__part_fail(partitioner *p, mt_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The local graph's error as the partitioner's. */
mt_status  mt__part_local_failed(partitioner *p, const char *what);
/* Runs move mv on local x; a gather is the varying kind if `varying`
 * (mt__lower_gather_varies), else the invariant one. NULL on error. */
mt_tensor *mt__part_apply_move(partitioner *p, mt_tensor *x, const mt_move *mv, bool varying);
/* The global type of a tensor of the global graph (its shape and sharding). */
mt_type    mt__part_type_of(const mt_tensor *t);
/* Names t, a tensor the partitioner made, after what it did to src:
 * "all-gather(h.0.fc.w)". */
void       mt__part_name_after(mt_tensor *t, const char *what, const mt_tensor *src);
/* Makes the slot of a leaf or a view read by a node (an op output has one). */
mt_status  mt__part_make_slot(partitioner *p, mt_tensor *t);
/* The slot of a tensor an op reads, made on first use (and a stored-split
 * parameter gathered). */
mt_status  mt__part_use_slot(partitioner *p, mt_tensor *t);
/* Plans which stored-split parameter each one's gather prefetches (FSDP's
 * one-ahead gather), in the order the forward reads them. */
void       mt__part_plan_prefetch(partitioner *p);
/* Whether the partial sums over `axes` of a result of type *t (of global
 * tensor `out`) are reduce-scattered onto a dim out's constraint splits
 * over them (mt_tensor_set_constraint): *mv set to that move. */
bool       mt__part_constraint_scatter(const partitioner *p, const mt_tensor *out,
                                       const mt_type *t, uint32_t axes, mt_move *mv);
/* x with a pvary over the axes of `want` it does not vary over. */
mt_tensor *mt__part_pvary_input(partitioner *p, const mt_tensor *global_in, mt_tensor *x,
                                uint32_t vary, uint32_t want);

/* ---- node.c ---- */

/* One global node: its rule, its moves and its lowering, leaving its slot. */
mt_status  mt__part_partition_node(partitioner *p, const mt_op_call *c);

#endif /* MT_PARTITION_IMPL_H */
