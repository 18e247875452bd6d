/*
 * presets.c — the parallel strategies as presets of shardings over the
 * partitioner (partition.h), not code paths of their own. From the mesh's
 * axes:
 *   data    splits the batch (data parallel: the gradients all-reduced);
 *   fsdp    splits the batch too, and stores every parameter split over it
 *           (on a dim it divides and tensor parallelism leaves free),
 *           gathered whole before use, its gradient reduce-scattered back
 *           (ZeRO-3's communication; the shards are what the optimizer sees);
 *   --zero  1, 2, 3: the data axis also stores the parameters and their
 *           optimizer state split (ZeRO), gathered like fsdp's; ZeRO-1 and 2
 *           gather them once a step and keep them whole, their gradients
 *           reduce-scattered once a step (the paper's 2Ψ); ZeRO-3 gathers
 *           for every microbatch (--fsdp-gather once: once a step);
 *   tensor  splits the layers' heads, MLP and vocabulary dims (Megatron's
 *           column- then row-parallel pairs), and with sequence
 *           parallelism the residual stream's rows between them too (a
 *           constraint on the activations the builders name act_length);
 *   expert  splits a mixture's experts (their weights and optimizer state)
 *           and, folded over devices that hold different tokens, the batch
 *           too: the dense gradients reduce over data x expert, the experts'
 *           over data (the devices that hold the same experts);
 *   pipe    cuts the layers into stages (pipe.c): each stage's program
 *           is sharded here over the other axes; nothing splits over pipe.
 * The batch, tensor and sequence-parallel strategies are rows of rules over
 * the models' logical axes (sharding.h: each builder names what its leaves'
 * and residual stream's dims are, "heads*64,embed"), collective matmul a
 * row of lowering variants; a user's --rules replaces a row's rule, axis by
 * axis.
 * What each sets is a sharding on a leaf; the partitioner derives the
 * rest, and every combination trains the one-device run.
 */
#include "train/train_impl.h"
#include "base/base_impl.h"   /* the registries */

#include <stdio.h>
#include <string.h>

uint32_t mt__axis_bit(const mt_mesh *mesh, const char *name) {
    for (int a = 0; a < mt_mesh_ndim(mesh); a++)
        if (strcmp(mt_mesh_axis_name(mesh, a), name) == 0) return 1u << a;
    return 0;
}

/* The strategies' rows: each a table from the models' logical axes to mesh
 * axes, with the lowering variants it runs, taken by the runs whose
 * configuration says so (`on`; NULL: every run). A row whose mesh axes a
 * mesh lacks (or has at size 1) does nothing there. */
static bool sequence_parallel(const mt_train_config *c) { return c->sequence_parallel; }
static bool collective_matmul(const mt_train_config *c) {
    return c->sequence_parallel &&
           (c->collective_matmul > 0 ||
            (c->collective_matmul == 0 && MT_COLLECTIVE_MATMUL_DEFAULT));
}

static const mt__strategy_row ROWS[] = {
    {"data parallel over data; FSDP's batch over fsdp", "batch=data+fsdp", NULL, NULL},
    {"Megatron tensor parallelism over tensor",
     "vocab=tensor,heads=tensor,kv_heads=tensor,mlp=tensor", NULL, NULL},
    /* the residual stream's rows between the tensor-parallel pairs split
     * over tensor (MaxText's activation_length): each partial sum the pair
     * makes is reduce-scattered onto them (mt_tensor_set_constraint) */
    {"Megatron sequence parallelism over tensor", "act_length=tensor", NULL, sequence_parallel},
    /* context parallelism: the inputs' sequence dim split over context (in
     * head-tail order: the trainer lays the batch out so, devices.c); the
     * partitioner then runs every op on the rows and attention gathers */
    {"context parallelism over context", "seq=context", NULL, NULL},
    /* expert parallelism: a mixture's experts split over expert, the batch
     * folded over it (torchtitan carves expert out of data x fsdp): each
     * expert rank routes its own tokens, and the MoE ops exchange them with
     * the experts' owners (graph/op_moe_ep.c) */
    {"expert parallelism over expert", "experts=expert,batch=data+fsdp+expert", NULL, NULL},
    {"collective matmul (sequence parallelism's collectives in the products' rings)", "",
     "collective_matmul", collective_matmul},
};

mt_status mt__train_rules(const mt_train_config *c, mt_rules *out, char *lowerings, size_t cap) {
    mt_rules r = {0}, row;
    mt_status s = MT_OK;
    const int builtin = (int)(sizeof ROWS / sizeof ROWS[0]);
    const int n = builtin + mt__registry_count(MT__REGISTRY_STRATEGIES);
    if (lowerings && cap) lowerings[0] = '\0';
    for (int k = 0; k < n && s == MT_OK; k++) {
        const mt__strategy_row *sr =
            k < builtin ? &ROWS[k] : mt__registry_get(MT__REGISTRY_STRATEGIES, k - builtin);
        if (sr->on && !sr->on(c)) continue;
        s = mt_rules_parse(sr->rules, &row);
        if (s == MT_OK) s = mt_rules_merge(&r, &row);
        if (s == MT_OK && lowerings && sr->lowerings && *sr->lowerings) {
            size_t used = strlen(lowerings);
            if ((size_t)snprintf(lowerings + used, cap - used, "%s%s", used ? "," : "",
                                 sr->lowerings) >= cap - used)
                s = mt_fail(MT_EINVAL, "strategy '%s': the run's lowering variants are longer "
                            "than %zu bytes", sr->strategy, cap - 1);
        }
    }
    if (s == MT_OK && c->rules && *c->rules) {
        s = mt_rules_parse(c->rules, &row);
        if (s == MT_OK) s = mt_rules_merge(&r, &row);
    }
    if (s == MT_OK) *out = r;
    return s;
}

mt_status mt__strategy_register(const mt__strategy_row *row) {
    if (!row || !row->strategy || !row->rules)
        return mt_fail(MT_EINVAL, "mt__strategy_register: a row needs a strategy and rules");
    mt_rules r;
    if (mt_rules_parse(row->rules, &r) != MT_OK)
        return mt_fail(MT_EINVAL, "registering strategy '%s': %s", row->strategy, mt_errmsg());
    if (mt__registry_add(MT__REGISTRY_STRATEGIES, row) < 0)
        return mt_fail(MT_ENOMEM, "registering strategy '%s': the registry holds %d rows "
                       "already", row->strategy, MT__REGISTRY_MAX);
    return MT_OK;
}

mt_axes mt__batch_axes(const mt_mesh *mesh) {
    mt_axes ax = {0};
    uint32_t bits = mt__axis_bit(mesh, "data") | mt__axis_bit(mesh, "fsdp") |
                    mt__axis_bit(mesh, "expert");
    for (int a = 0; a < mt_mesh_ndim(mesh); a++)
        if (bits & (1u << a)) ax.axis[ax.n++] = (uint8_t)a;
    return ax;
}

/* The size of the axes of a bit set. */
static int64_t parts_of(const mt_mesh *mesh, uint32_t bits) {
    int64_t n = 1;
    for (int a = 0; a < mt_mesh_ndim(mesh); a++)
        if (bits & (1u << a)) n *= mt_mesh_axis_size(mesh, mt_mesh_axis_name(mesh, a));
    return n;
}

/* FSDP (and ZeRO over data): every parameter stored split over `fsdp` (the
 * bit set of storage axes) on the first dim that has no tensor-parallel
 * split and that the axes divide; a parameter with none stays whole (its
 * gradient is then all-reduced like data parallel's). */
static mt_status shard_fsdp(mt_graph *g, const mt_mesh *mesh, uint32_t fsdp) {
    int64_t n = parts_of(mesh, fsdp);
    for (int i = 0; i < mt_graph_n_params(g); i++) {
        mt_tensor *p = mt_graph_param_at(g, i);
        mt_sharding sh = mt_tensor_sharding(p);
        bool stored = false;   /* a rule already stores it over these axes */
        for (int d = 0; d < mt_tensor_ndim(p); d++) stored |= (sh.dim_axes[d] & fsdp) != 0;
        if (stored) continue;
        for (int d = 0; d < mt_tensor_ndim(p); d++) {
            if (sh.dim_axes[d] || mt_tensor_dim(p, d) % n != 0) continue;
            sh.dim_axes[d] = fsdp;
            mt_status s = mt_tensor_set_sharding(p, &sh);
            if (s != MT_OK) return s;
            break;
        }
    }
    return MT_OK;
}

mt_status mt__shard_program(const mt__train_model *m, const mt_train_config *c, mt_graph *g,
                            const mt_mesh *mesh, mt_partition_opts *opts) {
    memset(opts, 0, sizeof *opts);
    uint32_t tensor = mt__axis_bit(mesh, "tensor"), fsdp = mt__axis_bit(mesh, "fsdp");
    mt_status s = MT_OK;
    if (tensor && parts_of(mesh, tensor) > 1 && m->tensor_check)
        s = m->tensor_check(c, (int)parts_of(mesh, tensor));
    /* every leaf with logical axes, as the rows and the user's rules say (a
     * pipeline stage holds some of them: the first the tokens, the others
     * the previous stage's output, the last the targets) */
    mt_rules rules;
    if (s == MT_OK) s = mt__train_rules(c, &rules, opts->lowerings, sizeof opts->lowerings);
    if (s == MT_OK) s = mt_graph_shard_by_rules(g, &rules, mesh);
    /* the trainer lays a sequence split over context out head-tail (devices.c) */
    uint32_t context = mt__axis_bit(mesh, "context");
    if (context && parts_of(mesh, context) > 1) opts->headtail_axes = context;
    /* attention's lowering over it: the all-gather its own, the ring and
       Ulysses variants by name */
    if (s == MT_OK && c->cp_attention != MT_CP_ALLGATHER) {
        const char *v = c->cp_attention == MT_CP_RING ? "ring_attention,ring_attention_gqa"
                                                      : "ulysses_attention,ulysses_attention_gqa";
        size_t used = strlen(opts->lowerings);
        if ((size_t)snprintf(opts->lowerings + used, sizeof opts->lowerings - used, "%s%s",
                             used ? "," : "", v) >= sizeof opts->lowerings - used)
            s = mt_fail(MT_EINVAL, "the lowerings \"%s\" and \"%s\" pass %zu bytes",
                        opts->lowerings, v, sizeof opts->lowerings);
    }
    /* ZeRO stores the parameters (and so the optimizer state) split over
     * data too; ZeRO-1 and 2 (the paper's) gather them once a step and keep
     * them whole, their gradients reduce-scattered once a step (ZeRO-1's
     * accumulated whole; ZeRO-2's only across microbatches), so a step
     * moves 2Ψ as data parallelism does; --fsdp-gather once does the same
     * for fsdp and ZeRO-3 */
    uint32_t data = mt__axis_bit(mesh, "data");
    uint32_t stored = (fsdp && parts_of(mesh, fsdp) > 1 ? fsdp : 0) |
                      (c->zero > 0 && data ? data : 0);
    if (s == MT_OK && stored) {
        s = shard_fsdp(g, mesh, stored);
        opts->gather_axes = stored;
        opts->gather_once = c->zero == 1 || c->zero == 2 || c->fsdp_gather > 0;
        opts->grads_once = opts->gather_once && (c->zero == 1 || c->accum > 1);
        /* fsdp and ZeRO-3 free the gathered parameters after the forward and
         * gather them again in the backward, unless the run says
         * (mt_train_config.reshard_after_forward; a copy kept for the step
         * is not gathered again) */
        opts->reshard_after_forward = c->reshard_after_forward
                                          ? c->reshard_after_forward > 0
                                          : (stored & fsdp) || c->zero == 3;
    }
    return s;
}
