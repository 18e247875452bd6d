/*
 * op_desc.c — the graph half of every op's descriptor, one line per op (see
 * op_desc.h): its role, gradient rule, sharding rule, lowering, lowering
 * with the moves around it, remat class and what it communicates. The
 * kernel half is ops/op_table.c's.
 *
 * A member an op's role does not need is left out (NULL); a class is always
 * named, so a missing line reads as MT_*_UNSET and tests/test_ops_desc.c
 * fails naming it.
 */
#include "graph/op_desc.h"

#include <string.h>

/* GLOBAL: a forward op of global programs, its rules mt__grad_<op>,
 * mt__shard_<op> and mt__lower_<op>, lowered with the moves around it by
 * mt__lower_moves_<moves> (generic: the partitioner's order; op_desc.h).
 * LOCAL: a device-local forward op, its gradient rule mt__grad_<op>.
 * BACKWARD: a backward op. */
#define GLOBAL(op, moves, recomp_, comm_)                                             \
    {.role = MT_ROLE_GLOBAL, .grad = mt__grad_##op, .shard = mt__shard_##op,         \
     .lower = mt__lower_##op, .lower_moves = mt__lower_moves_##moves,                \
     .recomp = MT_RECOMP_##recomp_, .comm = MT_COMM_##comm_}
#define LOCAL(op, comm_)                                                              \
    {.role = MT_ROLE_LOCAL, .grad = mt__grad_##op, .recomp = MT_RECOMP_NEVER,        \
     .comm = MT_COMM_##comm_}
#define BACKWARD                                                                      \
    {.role = MT_ROLE_BACKWARD, .recomp = MT_RECOMP_NEVER, .comm = MT_COMM_NONE}
/* The same, for the matrix products bf16 precision runs in bf16. */
#define GLOBAL_PRODUCT(op, moves, recomp_, comm_)                                     \
    {.role = MT_ROLE_GLOBAL, .grad = mt__grad_##op, .shard = mt__shard_##op,         \
     .lower = mt__lower_##op, .lower_moves = mt__lower_moves_##moves,                \
     .recomp = MT_RECOMP_##recomp_, .comm = MT_COMM_##comm_, .bf16_product = true}
#define BACKWARD_PRODUCT                                                              \
    {.role = MT_ROLE_BACKWARD, .recomp = MT_RECOMP_NEVER, .comm = MT_COMM_NONE,      \
     .bf16_product = true}

static const mt_op_gdesc op_gdesc[MT_OP_COUNT] = {
    /*                           op: its rules   with moves     remat      communicates */
    /* forward ops of global programs: builders.c */
    [MT_OP_MATMUL]        = GLOBAL_PRODUCT(matmul, generic, DOT,   NONE),
    [MT_OP_LINEAR]        = GLOBAL_PRODUCT(linear, linear,  DOT,   NONE),
    [MT_OP_ADD]           = GLOBAL(add,           generic,       LOCAL,     NONE),
    [MT_OP_SUB]           = GLOBAL(sub,           generic,       LOCAL,     NONE),
    [MT_OP_MUL]           = GLOBAL(mul,           generic,       LOCAL,     NONE),
    [MT_OP_SCALE]         = GLOBAL(scale,         generic,       LOCAL,     NONE),
    [MT_OP_GELU]          = GLOBAL(gelu,          generic,       LOCAL,     NONE),
    [MT_OP_LAYERNORM]     = GLOBAL(layernorm,     generic,       LOCAL,     NONE),
    [MT_OP_ATTENTION]     = GLOBAL(attention,     generic,       SAVES_AUX, NONE),
    [MT_OP_EMBEDDING]     = GLOBAL(embedding,     generic,       NEVER,     NONE),
    [MT_OP_CROSS_ENTROPY] = GLOBAL(cross_entropy, cross_entropy, NEVER,     VP_STATS),
    [MT_OP_MSE]           = GLOBAL(mse,           generic,       NEVER,     NONE),
    [MT_OP_SUM]           = GLOBAL(sum,           generic,       NEVER,     NONE),
    [MT_OP_TRANSPOSE]     = GLOBAL(transpose,     generic,       LOCAL,     NONE),
    [MT_OP_RESHARD]       = GLOBAL(reshard,       generic,       NEVER,     NONE),
    [MT_OP_RMSNORM]       = GLOBAL(rmsnorm,       generic,       LOCAL,     NONE),
    [MT_OP_ROPE]          = GLOBAL(rope,          generic,       LOCAL,     NONE),
    [MT_OP_SWIGLU]        = GLOBAL(swiglu,        generic,       LOCAL,     NONE),
    [MT_OP_ATTENTION_GQA] = GLOBAL(attention_gqa, generic,       SAVES_AUX, NONE),
    /* device-local forward ops: collectives.c and collective_matmul.c (the
     * partitioner's collective matmuls); their gradients are collectives too */
    [MT_OP_PSUM]          = LOCAL(psum,          COLL_OUT),
    [MT_OP_ALL_GATHER]    = LOCAL(all_gather,    COLL_OUT),
    [MT_OP_PSUM_SCATTER]  = LOCAL(psum_scatter,  COLL_IN),
    [MT_OP_PPERMUTE]      = LOCAL(ppermute,      COLL_OUT),
    [MT_OP_ALL_TO_ALL]    = LOCAL(all_to_all,    COLL_OUT),
    [MT_OP_PVARY]         = LOCAL(pvary,         COLL_LOCAL),
    [MT_OP_SLICE]         = LOCAL(slice,         COLL_LOCAL),
    [MT_OP_AG_LINEAR]     = LOCAL(ag_linear,     RING_GATHER),
    [MT_OP_LINEAR_RS]     = LOCAL(linear_rs,     RING_SCATTER),
    /* backward ops: made by the gradient rules (the vocabulary-parallel ce_bwd is
     * local: it has the statistics of the forward) */
    [MT_OP_GEMM]          = BACKWARD_PRODUCT,
    [MT_OP_BIAS_GRAD]     = BACKWARD,
    [MT_OP_REDUCE_BCAST]  = BACKWARD,
    [MT_OP_SCALE_BWD]     = BACKWARD,
    [MT_OP_MUL_BWD_A]     = BACKWARD,
    [MT_OP_MUL_BWD_B]     = BACKWARD,
    [MT_OP_GELU_BWD]      = BACKWARD,
    [MT_OP_LN_BWD_INPUT]  = BACKWARD,
    [MT_OP_LN_BWD_PARAMS] = BACKWARD,
    [MT_OP_ATTENTION_BWD] = BACKWARD,
    [MT_OP_EMBEDDING_BWD] = BACKWARD,
    [MT_OP_CE_BWD]        = BACKWARD,
    [MT_OP_MSE_BWD]       = BACKWARD,
    [MT_OP_FILL_BWD]      = BACKWARD,
    [MT_OP_TRANSPOSE_BWD] = BACKWARD,
    [MT_OP_CM_WGRAD]      = BACKWARD,
    [MT_OP_RMS_BWD_INPUT] = BACKWARD,
    [MT_OP_RMS_BWD_PARAMS] = BACKWARD,
    [MT_OP_ROPE_BWD]      = BACKWARD,
    [MT_OP_SWIGLU_BWD_A]  = BACKWARD,
    [MT_OP_SWIGLU_BWD_B]  = BACKWARD,
    [MT_OP_GQA_BWD_QK]    = BACKWARD,
    [MT_OP_GQA_BWD_V]     = BACKWARD,
};

const mt_op_gdesc *mt__op_gdesc(mt_op op) { return &op_gdesc[op]; }

mt_grad_rule mt__grad_rule(mt_op op) { return op_gdesc[op].grad; }

/* The variants of ops' lowerings, by name (mt_partition_opts.lowerings). */
static const mt_lower_variant variants[] = {
    /* XLA's collective matmul: a linear's row gather or reduce-scatter in
     * its product's ring (lower_linear_ring.c) */
    {"collective_matmul", MT_OP_LINEAR, mt__lower_moves_linear_ring},
};
#define N_VARIANTS (int)(sizeof variants / sizeof variants[0])

const mt_lower_variant *mt__lower_variant_find(const char *name, size_t len) {
    for (int i = 0; i < N_VARIANTS; i++)
        if (strlen(variants[i].name) == len && !strncmp(variants[i].name, name, len))
            return &variants[i];
    return NULL;
}

const mt_lower_variant *mt__lower_variant_at(int i) {
    return i >= 0 && i < N_VARIANTS ? &variants[i] : NULL;
}
