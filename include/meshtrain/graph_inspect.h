/*
 * meshtrain/graph_inspect.h — what a compiled program holds and did: its
 * counts and buffers (mt_graph_get_stats), the collectives it ran
 * (mt_graph_comm_count), its nodes one by one (mt_graph_node, for listings
 * such as `meshtrain explain`) and the per-op profile. Part of the graph
 * layer's API; meshtrain/graph.h includes it.
 */
#ifndef MESHTRAIN_GRAPH_INSPECT_H
#define MESHTRAIN_GRAPH_INSPECT_H

#include "meshtrain/graph.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Counts of the compiled program. */
typedef struct {
    int     n_forward, n_backward_b, n_backward_w;  /* nodes per phase */
    int64_t n_param_elems;                          /* trainable elements */
    double  flops_forward, flops_backward;          /* per run */
    double  bytes_forward, bytes_backward;          /* memory traffic per run */
    size_t  param_bytes, grad_bytes;                /* allocated for the parameters (on a mesh:
                                                       this device's shards, and the gathered
                                                       copies kept for the step:
                                                       mt_partition_opts.gather_once) and their
                                                       gradients (the kept ones' too) */
    size_t  kept_param_bytes, kept_grad_bytes;      /* of those, the gathered copies and
                                                       gradients kept for the step */
    size_t  scratch_bytes;                          /* kernels' temporary buffers */
    size_t  arena_bytes;                            /* planned activation memory, over all
                                                       slots (n_slots × one slot's) */
    size_t  arena_bytes_unplanned;                  /* the same without reuse */
    size_t  arena_bytes_f32;                        /* arena_bytes had every activation been
                                                       kept f32 (the same plan, bf16-stored
                                                       tensors at 4 bytes an element): the
                                                       saving is this minus arena_bytes */
    int     n_bf16_act;                             /* activations stored in bf16
                                                       (mt_compile_opts.f32_activations) ... */
    size_t  bf16_act_bytes;                         /* ... and their bytes (one slot) */
    int     n_recompute;                            /* B nodes that recompute forward values
                                                       (mt_compile_opts.remat) ... */
    double  flops_recompute;                        /* ... and their FLOPs per run (in
                                                       flops_backward too) */
    int     n_slots;                                /* mt_graph_set_slots (1 by default) */
    double  compile_seconds;                        /* wall time of mt_graph_compile */
    double  init_seconds;                           /* of which parameter initialisation */
} mt_graph_stats;

mt_graph_stats mt_graph_get_stats(const mt_graph *g);

/* What the program's collectives moved (this device), since the graph was
 * compiled or mt_graph_comm_reset: the elements of the tensors the
 * parameters' and gradients' collectives gathered or reduced, by kind, and
 * their bytes at the precision each ran in (bf16: 2 an element; the size
 * nccl-tests gives a call). In the ZeRO paper's units (§7) an all-gather or
 * a reduce-scatter of n elements moves n, an all-reduce 2n (its
 * reduce-scatter and all-gather halves): param_gather + grad_scatter +
 * 2·grad_reduce.
 *   param_gather     all-gathers of parameter shards (FSDP, ZeRO), the
 *                    backward's regathers included;
 *   grad_scatter     reduce-scatters of gradients onto parameter shards;
 *   grad_reduce      all-reduces of gradients (data parallel; a gathered
 *                    parameter's over the axes that do not store it);
 *   other            everything else: activations, losses, pipelines' sends.
 * A collective a local pass leaves to a later one (mt_graph_set_reduce_later)
 * or a kept gather skips (mt_partition_opts.gather_once) is not counted: it
 * did not run. A DP step of Ψ parameters moves 2Ψ (grad_reduce Ψ), ZeRO-1/2
 * 2Ψ (param_gather Ψ + grad_scatter Ψ), ZeRO-3 3Ψ a microbatch. */
typedef struct {
    double param_gather, grad_scatter, grad_reduce;            /* elements (n each) */
    double param_gather_bytes, grad_scatter_bytes, grad_reduce_bytes, other_bytes;
    int    n_collectives;                                      /* calls, of every kind */
} mt_comm_count;

/* The counts since compile or the last mt_graph_comm_reset (zero before
 * compile). */
mt_comm_count mt_graph_comm_count(const mt_graph *g);
/* Zeroes the counts (a trainer resets them at each step's start). */
void mt_graph_comm_reset(mt_graph *g);

/* One node of a compiled program, for listings (`meshtrain explain`). */
typedef struct {
    char        phase;        /* 'F', 'B' (input gradient) or 'W' (weight gradient) */
    const char *op;           /* "matmul", "psum", ... */
    mt_tensor  *out;          /* what it writes */
    mt_tensor  *stored;       /* where its readers find it: out, or the bf16 tensor out is
                                 cast into as it is written (bf16 activation storage,
                                 graph/precision.c) */
    bool        accumulates;  /* out += result (else out = result) */
    int         n_in;
    mt_tensor  *in[8];        /* the first n_in (an op reads at most 8: attention's
                                 backward with document ids reads 7) */
    bool        collective;   /* moves data between devices (psum, all_gather, ..., and the
                                 vocabulary-parallel cross_entropy's all-reduces) */
    mt_axes     axes;         /* a collective's (or pvary's, slice's) axes */
    double      flops;        /* one run */
    double      comm_bytes;   /* one run, a collective's size as nccl-tests counts it: the
                                 buffer it reduces or fills (psum_scatter: its input; bf16 on
                                 the wire: half), a collective matmul's P-1 ring chunks, the
                                 vocabulary-parallel loss's row statistics; 0 for the rest
                                 (pvary and slice included: they move nothing) */
    double      mem_bytes;    /* one run: the memory the call reads and writes (its cost),
                                 for every node, collectives included */
    /* runs once a step, whatever the microbatches, when the caller defers
     * the reductions of all passes but the step's last
     * (mt_graph_set_reduce_later, as the trainer does): the gather of a
     * copy kept for the step (at the first forward after the parameters
     * changed), the reduction of a kept gradient (mt_partition_opts.
     * gather_once, grads_once), a parameter gradient's all-reduce */
    bool        once_a_step;
    /* a matrix product's shape (matmul, gemm, linear): its output's rows M
     * and columns N and the contraction K (2·M·N·K of its FLOPs); 0 for
     * every other op. The planner costs a product's tiles from it. */
    double      gemm_m, gemm_n, gemm_k;
    /* attention's score elements, B·NH·T·Tk of this device (the (T, Tk)
     * matrix of its T query rows against the Tk keys it reads, every head
     * and sequence, causal or not: T² on one device, T_local·S under a
     * context axis's all-gather); 0 for the rest */
    double      attention_scores;
    /* a fused attention kernel's work as its loop runs it: the query rows
     * of one call, B·NH·T (every head and sequence of this device), and
     * the keys each row is scored against in that call, Tk (T on one
     * device, the gathered S under a context axis's all-gather, one
     * ring step's T under the ring; causal rows visit about half: the
     * planner's mt__plan_flash_efficiency); 0 for the rest */
    double      attention_rows, attention_keys;
    bool        recompute;    /* a B node re-running a forward call (activation
                                 checkpointing): the planner shows its time apart */
    int         block;        /* the transformer block it belongs to (mt_graph_set_block),
                                 -1 for none: a block's recomputed nodes run at the
                                 start of its backward */
    /* the planned activations alive while it runs (one slot's arena): what
     * it reads and writes and every value alive across it. No plan's arena
     * is smaller than the largest over the nodes (the arena packs them to
     * within a few percent of it); each value's bytes are affine in the
     * batch, so this is too, node by node (the planner's memory at any
     * batch from two builds) */
    double      live_bytes;
} mt_node_info;

/* Nodes of a compiled graph in run order: the forward, then B, then W. */
int       mt_graph_n_nodes(const mt_graph *g);
/* The i-th node in that order; MT_EINVAL when i is out of range or the graph
 * is not compiled. */
mt_status mt_graph_node(const mt_graph *g, int i, mt_node_info *info);

/* Writes the graph's nodes in build order (compiled: the forward, then the
 * backward nodes as autodiff emitted them), one a line: phase, op, output
 * name and shape, "=" or "+=", the inputs, MFLOP and MB (memory traffic) of
 * one run. A node with mesh axes shows them by name after its op, with the
 * dims it gathers, scatters or slices: "psum[data]", "all_gather[tensor]
 * dim=1", "psum_scatter[data,tensor] dim=0", "all_to_all[x] dim=0->1",
 * "pvary[data]", "slice[tensor] dim=1", the collective matmuls
 * ("ag_linear[tensor] dim=1") and the vocabulary-parallel loss
 * ("cross_entropy[tensor]"); on a graph bound to no device the axes are
 * numbered ("psum[axis0]"). */
void mt_graph_print(const mt_graph *g, FILE *out);

/* Turns per-op timing on (clearing what was recorded) or off, on a compiled
 * graph (MT_ESTATE before mt_graph_compile: the profile is its program's).
 * While on, every run adds each node's wall time, FLOPs and bytes to its
 * op's row. */
mt_status mt_graph_set_profiling(mt_graph *g, bool on);
/* One line per op kind: calls, time, share, achieved GFLOP/s and GB/s. */
void      mt_graph_print_profile(const mt_graph *g, FILE *out);

/* One op kind's totals in the profile: over the runs since profiling was
 * turned on, its calls, their wall seconds, and the FLOPs and bytes of its
 * cost entry (mt_node_info's). */
typedef struct {
    int64_t calls;
    double  seconds, flops, bytes;
} mt_op_totals;

/* The totals of the op named `op` (as mt_graph_print names it: "attention",
 * "attention_bwd") into *out; zeros for an op that has not run. MT_ESTATE
 * when profiling is off, MT_EINVAL for a name that is no op. */
mt_status mt_graph_profile_op(const mt_graph *g, const char *op, mt_op_totals *out);

#ifdef __cplusplus
}
#endif

#endif /* MESHTRAIN_GRAPH_INSPECT_H */
