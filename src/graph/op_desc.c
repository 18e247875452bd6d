/*
 * op_desc.c — the graph half of every op's descriptor (see op_desc.h): its
 * role, gradient rule, sharding rule, lowering, lowering with the moves
 * around it, remat class and what it communicates; one named line per op
 * but those in files of their own (graph/op_rope.c), and the table of them
 * all, generated from ops/ops_impl.h's MT_OP_LIST. The kernel half is
 * ops/op_table.c's.
 *
 * A member an op's role does not need is left out (NULL); a class is always
 * named, so a missing line reads as MT_*_UNSET and tests/test_ops_desc.c
 * fails naming it.
 */
#include "graph/op_desc.h"

#include <string.h>

/* Each op's graph half, mt__gop_<op> (op_desc.h), in one line:
 * GDESC(op) and GLOBAL(op, moves, remat, comm): a forward op of global
 * programs, its rules mt__grad_<op>, mt__shard_<op> and mt__lower_<op>,
 * lowered with the moves around it by mt__lower_moves_<moves> (generic: the
 * partitioner's order; op_desc.h). LOCAL: a device-local forward op, its
 * gradient rule mt__grad_<op>. BACKWARD: a backward op. */
#define GDESC(op) const mt_op_gdesc mt__gop_##op
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

/* GDESC(op) and GLOBAL(op, with moves, remat, communicates); rope and
 * rope_bwd are graph/op_rope.c's */
/* forward ops of global programs: builders.c */
GDESC(matmul) = GLOBAL_PRODUCT(matmul, generic, DOT, NONE);
GDESC(linear) = GLOBAL_PRODUCT(linear, linear, DOT, NONE);
GDESC(add) = GLOBAL(add, generic, LOCAL, NONE);
GDESC(sub) = GLOBAL(sub, generic, LOCAL, NONE);
GDESC(mul) = GLOBAL(mul, generic, LOCAL, NONE);
GDESC(scale) = GLOBAL(scale, generic, LOCAL, NONE);
GDESC(gelu) = GLOBAL(gelu, generic, LOCAL, NONE);
GDESC(layernorm) = GLOBAL(layernorm, generic, LOCAL, NONE);
GDESC(attention) = GLOBAL(attention, generic, SAVES_AUX, NONE);
GDESC(embedding) = GLOBAL(embedding, generic, NEVER, NONE);
GDESC(cross_entropy) = GLOBAL(cross_entropy, cross_entropy, NEVER, VP_STATS);
GDESC(mse) = GLOBAL(mse, generic, NEVER, NONE);
GDESC(sum) = GLOBAL(sum, generic, NEVER, NONE);
GDESC(transpose) = GLOBAL(transpose, generic, LOCAL, NONE);
GDESC(reshard) = GLOBAL(reshard, generic, NEVER, NONE);
GDESC(rmsnorm) = GLOBAL(rmsnorm, generic, LOCAL, NONE);
GDESC(swiglu) = GLOBAL(swiglu, generic, LOCAL, NONE);
GDESC(attention_gqa) = GLOBAL(attention_gqa, generic, SAVES_AUX, NONE);
/* device-local forward ops: collectives.c and collective_matmul.c (the
 * partitioner's collective matmuls); their gradients are collectives too */
GDESC(psum) = LOCAL(psum, COLL_OUT);
GDESC(all_gather) = LOCAL(all_gather, COLL_OUT);
GDESC(psum_scatter) = LOCAL(psum_scatter, COLL_IN);
GDESC(ppermute) = LOCAL(ppermute, COLL_OUT);
GDESC(all_to_all) = LOCAL(all_to_all, COLL_OUT);
GDESC(pvary) = LOCAL(pvary, COLL_LOCAL);
GDESC(slice) = LOCAL(slice, COLL_LOCAL);
GDESC(ag_linear) = LOCAL(ag_linear, RING_GATHER);
GDESC(linear_rs) = LOCAL(linear_rs, RING_SCATTER);
/* backward ops: made by the gradient rules (the vocabulary-parallel ce_bwd is
 * local: it has the statistics of the forward) */
GDESC(gemm) = BACKWARD_PRODUCT;
GDESC(bias_grad) = BACKWARD;
GDESC(reduce_bcast) = BACKWARD;
GDESC(scale_bwd) = BACKWARD;
GDESC(mul_bwd_a) = BACKWARD;
GDESC(mul_bwd_b) = BACKWARD;
GDESC(gelu_bwd) = BACKWARD;
GDESC(ln_bwd_input) = BACKWARD;
GDESC(ln_bwd_params) = BACKWARD;
GDESC(attention_bwd) = BACKWARD;
GDESC(embedding_bwd) = BACKWARD;
GDESC(ce_bwd) = BACKWARD;
GDESC(mse_bwd) = BACKWARD;
GDESC(fill_bwd) = BACKWARD;
GDESC(transpose_bwd) = BACKWARD;
GDESC(cm_wgrad) = BACKWARD;
GDESC(rms_bwd_input) = BACKWARD;
GDESC(rms_bwd_params) = BACKWARD;
GDESC(swiglu_bwd_a) = BACKWARD;
GDESC(swiglu_bwd_b) = BACKWARD;
GDESC(swiglu_bwd) = BACKWARD;
GDESC(gqa_bwd_qk) = BACKWARD;
GDESC(gqa_bwd_v) = BACKWARD;

/* The table, from the list (ops/ops_impl.h): every op's entry, in the
 * enum's order. */
static const mt_op_gdesc *const op_gdesc[MT_OP_COUNT] = {
#define OP_ENTRY_(NAME, name) [MT_OP_##NAME] = &mt__gop_##name,
    MT_OP_LIST(OP_ENTRY_)
#undef OP_ENTRY_
};

const mt_op_gdesc *mt__op_gdesc(mt_op op) { return op_gdesc[op]; }

mt_grad_rule mt__grad_rule(mt_op op) { return op_gdesc[op]->grad; }

/* The variants of ops' lowerings, by name (mt_partition_opts.lowerings). */
static const mt_lower_variant variants[] = {
    /* XLA's collective matmul: a linear's row gather or reduce-scatter in
     * its product's ring (lower_linear_ring.c) */
    {"collective_matmul", MT_OP_LINEAR, mt__lower_moves_linear_ring, NULL},
    /* context parallelism's ring and Ulysses (attention_split.c); the
     * all-gather of k and v is attention's own lowering */
    {"ring_attention", MT_OP_ATTENTION, NULL, mt__lower_attention_ring},
    {"ring_attention_gqa", MT_OP_ATTENTION_GQA, NULL, mt__lower_attention_ring},
    {"ulysses_attention", MT_OP_ATTENTION, NULL, mt__lower_attention_ulysses},
    {"ulysses_attention_gqa", MT_OP_ATTENTION_GQA, NULL, mt__lower_attention_ulysses},
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
