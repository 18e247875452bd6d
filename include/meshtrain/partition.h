/*
 * meshtrain/partition.h — the partitioner: one global program, written with
 * global shapes and shardings on its leaves, becomes the calling device's
 * program, with local shapes and the collectives its types require.
 */
#ifndef MESHTRAIN_PARTITION_H
#define MESHTRAIN_PARTITION_H

#include "meshtrain/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the sharding of a leaf (input, parameter, constant) of a global graph
 * before mt_partition(); MT_EINVAL naming the tensor for an op output, a
 * partial sum, or a split of a dim the tensor does not have. It writes the
 * tensor: on a global graph that device threads share, call it before they
 * start (mt_partition, "Threads"). */
mt_status mt_tensor_set_sharding(mt_tensor *t, const mt_sharding *sh);

/* A strategy as data: sets the sharding of every leaf (input, parameter,
 * constant) of the global graph g that names logical axes
 * (mt_tensor_set_logical, mt_graph_logical) to the one `rules` give it on
 * `mesh` (mt_rules_sharding), replacing what it had, the constraint
 * (mt_tensor_set_constraint) of every op output that names them, and the
 * target of every mt_reshard whose output names them (MaxText's
 * with_logical_constraint: a builder moves a value to a layout it names by
 * logical axes alone, e.g. the rows of an MoE block's input made whole over
 * the sequence-parallel axes); tensors without logical axes are left as
 * they are. Call before mt_partition, before device threads share g (it
 * writes the leaves, as mt_tensor_set_sharding). */
mt_status mt_graph_shard_by_rules(mt_graph *g, const mt_rules *rules, const mt_mesh *mesh);

/* Sets the layout an op's output should have (JAX's
 * with_sharding_constraint), as far as the partitioner meets one: where the
 * op's result is a partial sum over mesh axes that the constraint splits a
 * dim over (that dim whole in the result and divided by them, and the sum
 * over nothing else), the sum is reduce-scattered onto that dim instead of
 * all-reduced or kept partial. Such a value varies over those axes, and an
 * op that needs the dim whole all-gathers it back, a gather whose gradient
 * is the reduce-scatter (it meets operands varying over the same axes).
 * Megatron's sequence parallelism is this constraint on the residual
 * stream, (B,T,C) with T split over the tensor axes: the layernorms and
 * residual adds between the tensor-parallel pairs then run on T/n rows, and
 * each all-reduce becomes a reduce-scatter and an all-gather of half its
 * bytes. Other differences between the result and the constraint are left
 * to the readers' rules. MT_EINVAL naming the tensor for a leaf (give it
 * its sharding: mt_tensor_set_sharding), partial sums or a dim it does not
 * have. mt_graph_shard_by_rules sets it from logical axes. */
mt_status mt_tensor_set_constraint(mt_tensor *t, const mt_sharding *sh);

/* The name of the i-th (from 0) lowering variant mt_partition_opts.lowerings
 * takes, or NULL past the last. */
const char *mt_partition_lowering(int i);

#define MT_LOWERINGS_MAX 128   /* mt_partition_opts.lowerings' bytes, with its terminator */

typedef struct {
    mt_shard_mode mode;   /* auto: move data where types disagree; explicit: refuse */
    /* For tests only: leave out the pvary nodes, hence the reduction of
     * replicated parameters' gradients. The run is then wrong; the
     * equivalence tests use it to show that their checks catch that. */
    bool          test_skip_grad_reduction;
    /* Mesh axes (bit set, mesh order) over which parameters are stored split
     * and gathered whole before use: FSDP / ZeRO-3. Such a parameter's dims
     * split over these axes are all-gathered once, before its first use, and
     * its gradient is reduce-scattered back onto the shards (the gather's
     * transpose). 0: parameters are used as they are split (tensor parallel). */
    uint32_t      gather_axes;
    /* Of gather_axes, those gathered as a value that counts once
     * (all_gather_invariant): the gradient is then all-reduced over them and
     * each device keeps its slice, as ZeRO-1 does, instead of reduce-scattered. */
    uint32_t      gather_allreduce_axes;
    /* Variants of ops' lowerings to use where they apply, ','-separated
     * names (mt_partition_lowering lists them; "": none).
     * "collective_matmul": a linear whose input rows are gathered over axes
     * they vary over, or whose partial result is reduce-scattered onto the
     * rows a constraint splits (mt_tensor_set_constraint), runs that
     * collective inside its product, as XLA's collective matmul (graph.h,
     * mt_graph_all_gather_linear and mt_graph_linear_reduce_scatter): the
     * rows travel around the ring one chunk at a time, each transfer in
     * flight while the previous chunk's product runs. The same run up to
     * rounding. MT_EINVAL from mt_partition for a name it does not know. */
    char          lowerings[MT_LOWERINGS_MAX];
    /* FSDP's memory saving (PyTorch FSDP's reshard_after_forward, ZeRO-3): a
     * parameter gathered over gather_axes (not gather_allreduce_axes) is
     * freed after its forward use and gathered again in the backward, just
     * before its first backward reader, so that the gathered parameters of
     * about one layer are alive at a time rather than all of them for the
     * whole step; it costs one more all-gather per parameter and step.
     * false: the gathered copies are kept from forward to backward. */
    bool          reshard_after_forward;
    /* Axes over which a split sequence dim (the T of attention and rope) is
     * laid out head-tail (mt_headtail_pos: device r of n holds chunks r and
     * 2n-1-r of 2n; ../shared/CONTEXT_PARALLEL.md §3) instead of in
     * contiguous blocks: attention then all-gathers k and v over them and
     * attends its rows by position (dK, dV reduce-scattered back), rope
     * rotates each row by its position. The caller lays the inputs out so.
     * Over other axes a split T is contiguous: attention gathers it whole
     * and keeps its own block of the result. 0: none. */
    uint32_t      headtail_axes;
    /* The ZeRO paper's stages 1 and 2, and FSDP's gather once a step
     * (Llama 3's): a parameter gathered over gather_axes keeps its gathered
     * copy for the whole step and between steps (persistent memory, counted
     * with the parameters): its all-gather runs at the first forward after
     * the parameters changed (mt_graph_params_changed, which the optimizer
     * calls), and the step's later forwards read the copy. No regather
     * (reshard_after_forward is ignored). */
    bool          gather_once;
    /* With gather_once: the gathered copy's gradient is persistent too
     * (counted with the gradients), accumulated over the step's passes, and
     * reduce-scattered onto the shard once, by the pass that reduces
     * (mt_graph_set_reduce_later false); false: reduce-scattered by every
     * pass, the whole-size gradient a temporary. */
    bool          grads_once;
} mt_partition_opts;

/* Partitions the forward program of `global` (built with global shapes, not
 * compiled; its leaves sharded with mt_tensor_set_sharding, the rest
 * replicated) that computes the scalar `loss`, for the device of `ctx`:
 *  - every op is rebuilt on local tensors in a new graph bound to ctx,
 *    following its sharding rule; where the rule moves data, collective
 *    nodes (graph.h) are inserted;
 *  - a replicated leaf that meets device-varying values gets a pvary node,
 *    so its gradient is reduced over those axes (data parallelism's
 *    all-reduce) in the W phase;
 *  - the loss, a partial sum over the batch axes, is reduced, so every
 *    device's mt_graph_loss() is the global loss. `loss` may also be a
 *    pipeline stage's output (any shape, compiled with seed_from_caller):
 *    partial sums are reduced the same way, and the result is the device's
 *    block of it as its sharding lays it out (the batch split over data).
 * Leaves keep their names; a split parameter becomes its shard, initialised
 * from the global element indices (the one-device numbers), and laid out as
 * its sharding says (mt_tensor_sharding); *local is then compiled and run as
 * any graph, and
 * *local_loss is its loss. Fails (MT_ESHARDING, MT_ESHAPE, MT_EINVAL) naming
 * the op and the types when a rule refuses (explicit mode: where the
 * sharding is ambiguous, with the reshard that resolves it); the message is
 * mt_errmsg()'s, *local and *local_loss are NULL, and `global` is left as it
 * was: its status stays clean, so the same graph can be partitioned again,
 * e.g. in auto mode after explicit mode refused, or after a reshard is added
 * to it. A global graph that already holds a build error (mt_graph_status)
 * is refused with that error.
 *
 * Threads: mt_partition only reads `global`, so every device thread may
 * partition one shared global graph at the same time (graph.h, "Threads"),
 * each with its own ctx, and owns the *local it gets: it compiles, runs and
 * frees it on its own thread. Build `global` and set its shardings
 * (mt_tensor_set_sharding writes the tensor) before the threads start, and
 * free it after they have all returned: calling mt_tensor_set_sharding, a
 * builder or mt_graph_compile on the shared graph from a device thread is a
 * data race, even when every device sets the same sharding. `opts` is read
 * only too and may be shared. */
mt_status mt_partition(mt_graph *global, mt_tensor *loss, mt_ctx *ctx,
                       const mt_partition_opts *opts, mt_graph **local, mt_tensor **local_loss);

/* The global type of a tensor of a partitioned (device's) graph: the
 * global shape it is a block of (mt_tensor_global_dim), or for a tensor the
 * partitioner added between those, its local shape with each dim times the
 * sizes of the axes that split it on `mesh`. A tensor of an unpartitioned
 * graph is its own global type, whatever sharding it carries. */
mt_type mt_tensor_global_type(const mt_tensor *t, const mt_mesh *mesh);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_PARTITION_H */
