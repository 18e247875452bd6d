/*
 * plan/plan_impl.h — what the plan layer's files share.
 *
 * The planner's pieces, each in its own file:
 *   hardware*.c, json.c  the hardware descriptions (plan.h)
 *   program.c            one device's partitioned program, compiled on the
 *                        shape-only backend, summarised as mt__plan_program
 *   cost.c, cost_map.c   the roofline of one op and the time of one
 *                        collective on a system's mesh levels (cost.h)
 *   step.c, step_phase.c a step's time from its chunks' programs: two
 *                        streams a phase, accumulation, pipelines (step.h)
 *   memory.c, memory_forms.c  bytes per device under a convention
 *                        (meshtrain's own buffers, the ZeRO paper's mixed
 *                        precision with Korthikanti's 16-bit activations,
 *                        the scaling book's), and the closed forms (memory.h)
 *   layouts.c, evaluate.c, search.c  the search (search_impl.h), with
 *   layout_text.c, pipeline_slots.c  a layout as text and its chunks' blocks;
 *                        a schedule's slots, remembered
 *   refusals.c           the reasons layouts were refused, counted (refusals.h)
 */
#ifndef MT_PLAN_IMPL_H
#define MT_PLAN_IMPL_H

#include "meshtrain/plan.h"
#include "meshtrain/graph.h"
#include "meshtrain/mesh.h"
#include "meshtrain/train.h"

#include <stdint.h>

/* A gibibyte, 2^30 bytes: the unit the planner's messages give memory in
 * (issue 40: binary units throughout, as --batch-tokens' k, M, G). */
#define MT__GIB 1073741824.0

/* The "format" string of the hardware descriptions this reader knows. */
#define MT__HARDWARE_FORMAT "meshtrain-hardware-1"

/* Reads the machine file at `path` (meshtrain/profile.h) into *hw, mapped as
 * mt_hardware_load says. Fails as mt_machine_read does. */
mt_status mt__hardware_from_machine(const char *path, mt_hardware *hw);

/* The "format" string of the fabric files (hardware/fabrics/). */
#define MT__FABRIC_FORMAT "meshtrain-fabric-1"

/* Reads the fabric file at `path` (mt_hardware_set_fabric's format) into
 * *lv (a switch, devices 0) and its "name" into name (name_n bytes).
 * MT_EIO when it cannot be read, MT_EFORMAT naming the file and the field. */
mt_status mt__fabric_load(const char *path, mt_hw_level *lv, char *name, size_t name_n);

/* ======================================================================== */
/* One device's program (program.c)                                          */
/* ======================================================================== */

/* The collectives the planner costs, as nccl-tests names them. */
typedef enum {
    MT__PC_ALL_REDUCE,      /* psum, pmean, pmax; the vocabulary-parallel loss's statistics */
    MT__PC_ALL_GATHER,      /* all_gather; a collective matmul's ring (ag_linear) */
    MT__PC_REDUCE_SCATTER,  /* psum_scatter; linear_rs's ring */
    MT__PC_ALL_TO_ALL,
    MT__PC_PERMUTE,         /* ppermute; a pipeline's send to the next stage */
    MT__PC_N_KINDS
} mt__plan_coll;

/* nccl-tests' name of a collective kind: "all-reduce", "all-gather",
 * "reduce-scatter", "all-to-all", "permute"; "collective" otherwise
 * (program.c). */
const char *mt__plan_coll_name(mt__plan_coll k);

/* What a node of the program is for the step-time model. */
typedef enum {
    MT__PN_MATMUL,          /* a matrix product (matmul, linear, attention's products): peak
                               FLOP/s of the run's precision */
    MT__PN_VECTOR,          /* everything else that computes: element-wise, norms, softmax,
                               the optimizer: memory-bound, costed at HBM bandwidth */
    MT__PN_COLLECTIVE       /* moves data between devices */
} mt__plan_node_class;

/* One node in run order. */
typedef struct {
    char                phase;        /* 'F', 'B', 'W' */
    mt__plan_node_class cls;
    double              flops, bytes; /* one run: the op's own cost entry (mt_node_info) */
    double              attention_seq;   /* attention's products (MT__PN_MATMUL): the
                                            sequence length they run at; 0 for the rest */
    double              attention_scores;   /* and their score elements, B·NH·T² ... */
    float               score_bytes[2];     /* ... and the bytes a score element the op
                                            moves: [0] meshtrain's fused kernel (fp32),
                                            [1] Megatron-LM's unfused path in 16 bits
                                            (mt__plan_program_traffic16) */
    double              gemm_m, gemm_n, gemm_k;  /* a product's shape (mt_node_info's);
                                            0: not a plain product */
    double              attention_rows, attention_keys;   /* the fused attention kernel's
                                            query rows B·NH·T and keys a row is scored
                                            against (mt_node_info's), costed by
                                            mt__plan_flash_efficiency; keys 0: not the
                                            fused kernel (megatron's unfused path) */
    bool                recompute;    /* a B node re-running the forward (remat): its
                                         seconds are shown apart (mt_plan_result) */
    int                 block;        /* its transformer block (mt_node_info's), counted from
                                         the chunk's first; -1: none */
    double              live_bytes;   /* the arena's bytes alive while it runs
                                         (mt_node_info's): affine in the batch */
    /* MT__PN_COLLECTIVE only: */
    mt__plan_coll       kind;
    mt_axes             axes;         /* on the program's mesh */
    double              comm_bytes;   /* nccl-tests' size (mt_node_info.comm_bytes) */
    unsigned char       wire_width;   /* bytes an element of what it moves: its input's
                                         type (4 for f32, 2 for bf16), or 2 where the
                                         trainer casts an f32 buffer to bf16 on the wire */
    bool                grad_reduce;  /* reduces a parameter's gradient (data / ZeRO / fsdp):
                                         may overlap the rest of the backward */
    bool                param_gather; /* gathers a stored parameter (fsdp / ZeRO): may be
                                         prefetched under the previous layer's compute */
    bool                overlapped;   /* a collective matmul's ring: its chunks run under
                                         the products (the op's flops are its compute) */
    bool                once;         /* runs once a step (mt_node_info.once_a_step): a
                                         kept copy's gather, a kept gradient's reduction */
    bool                rank_copies;  /* a list-form collective: one copy a rank of its
                                         group besides, each a kernel
                                         (mt__plan_program_list_collectives) */
    int                 param;        /* a parameter's gather: the parameter (its index
                                         among the program's, by address), -1 for the
                                         rest; -1 too once the build's passes have run
                                         (cache.c), as `block` */
} mt__plan_node;

/* A use of a parameter the storage axes split on no dim (program.c's
 * storage_shares) that a framework which pads would turn into a
 * collective (mt__plan_program_pad_unsplit). */
typedef struct {
    int           node;     /* the parameter's first reader in its phase (a gather goes
                               before it), or its gradient's all-reduce */
    bool          reduce;   /* the all-reduce */
    unsigned char width;    /* the parameter's bytes an element */
    int64_t       numel;    /* its elements on this device, whole over the storage axes */
    int64_t       flat;     /* N x DeepSpeed's share of it, N x ceil(numel / N) ... */
    int64_t       rows;     /* ... and N x FSDP2's, N x ceil(rows / N) x cols */
    int           param;    /* the parameter, as mt__plan_node.param counts them (past
                               the program's split ones: their count + its index) */
} mt__plan_unsplit_use;

/* One program: one pipeline chunk (the whole model without a pipe axis) as
 * one device runs it for one microbatch, compiled on the shape-only
 * backend. Element counts are this device's. */
typedef struct {
    int            n_nodes;
    mt__plan_node *nodes;              /* (n_nodes), run order: forward, B, W */
    /* parameters */
    int64_t param_elems;               /* stored on this device (its shards) */
    int64_t param_global_elems;        /* the same parameters whole (Ψ of this chunk) */
    int64_t gathered_elems;            /* parameter elements all-gathered in the forward
                                          (fsdp / ZeRO): the gathered copies */
    int64_t gathered_kept_elems;       /* of which kept until the backward (ZeRO-1/2: not
                                          resharded after the forward) */
    int64_t gathered_max_elems;        /* the largest one gathered parameter */
    int64_t grad_reduced_full_elems;   /* gradient elements all-reduced whole (data parallel,
                                          ZeRO-1) ... */
    int64_t grad_scattered_elems;      /* ... and reduce-scattered to shards (ZeRO-2/3, fsdp),
                                          counted at their input's size */
    int64_t grad_kept_elems;           /* of those, kept whole for the step and reduced
                                          once (ZeRO-1/2, --fsdp-gather once) */
    size_t  kept_grad_bytes;           /* their bytes (in grad_bytes) */
    /* parameters the storage axes (fsdp, data under ZeRO: N devices) split
       on no dim, so stored whole (in param_elems), and the frameworks'
       shares of them (plan/memory.h) */
    int64_t unsplit_elems;
    int64_t unsplit_zero_elems;        /* sum of ceil(numel / N): ZeRO's partitions */
    int64_t unsplit_rows_elems;        /* sum of ceil(rows / N) x cols: FSDP2's, a parameter
                                          seen as the 2-D (rows, cols) matrix whose dim 0 it
                                          splits (cols its last dim, 1 for a vector) */
    int64_t unsplit_max_elems;         /* the largest one */
    int64_t rows_pad_elems;            /* FSDP2's padding of the split ones: sum of
                                          ceil(rows / N) x cols - stored */
    int64_t pad_unstored_elems;        /* of param_elems, what a padding framework does
                                          not store (the unsplit parameters less their
                                          shares: mt__plan_program_pad_unsplit); AdamW
                                          steps the rest */
    mt__plan_unsplit_use *unsplit_uses;  /* (n_unsplit_uses) in node order; NULL after
                                          mt__plan_program_pad_unsplit */
    int     n_unsplit_uses;
    bool    unsplit_once;              /* the layout gathers its parameters and reduces
                                          their gradients once a step (ZeRO-1/2, fsdp
                                          once): so would the padded ones */
    mt_axes storage_axes;              /* the storage axes (N devices) */
    char    unsplit_what[128];         /* the largest, "'wte' (50304, 768)" (the verdict
                                          names the layout's axes: programs are shared by
                                          layouts of other axes, cache.c); "" when none */
    /* the allocator's bytes (meshtrain's own convention) */
    size_t  param_bytes, grad_bytes;   /* mt_graph_stats' */
    size_t  optim_bytes;               /* AdamW's m and v: 2 x 4 bytes a stored element */
    size_t  arena_bytes;               /* the planned activations of one microbatch slot */
    size_t  scratch_bytes;             /* kernels' temporary buffers */
    size_t  largest_temp_bytes;        /* the largest activation of the program */
    /* totals of one run (the nodes' sums, for reports) */
    double  flops[3], bytes[3];        /* F, B, W (collectives excluded) */
    double  flops_recompute;           /* of flops[1], the recomputed forward */
    /* DeepSpeed before 0.5.5 (mt__plan_program_list_collectives): its
       persistent parameters, gathered again after each optimizer step */
    double  ds_persist_params;         /* how many */
    double  ds_persist_bytes;          /* their gathered bytes (2 an element) */
    mt_axes ds_persist_axes;           /* the axes they are gathered over */
} mt__plan_program;

/* The class of a compiled graph's node (not a collective: the caller
 * knows), and for attention's products the sequence length (its output's
 * dim 1: (B, T, C), the GPT's gradient (B, T, 3, C)) into *attention_seq, 0
 * for any other op. */
mt__plan_node_class mt__plan_class_of(const mt_node_info *in, double *attention_seq);

/* Builds, partitions and compiles pipeline chunk `chunk` of `n_chunks`
 * (mt_train_pipe_chunks; 0 of 1 without a pipe axis) of the model in `cfg`
 * as device `device` of `mesh` runs it, on the shape-only backend, through
 * a device context that knows its coordinate and runs no communication
 * (mt_ctx_virtual_create), and summarises it into *out (free with
 * mt__plan_program_free). cfg->B is the global batch of one microbatch.
 * Fails as the trainer's build, partition and compile fail. */
mt_status mt__plan_program_build(const mt_train_config *cfg, const mt_mesh *mesh, int device,
                                 int chunk, int n_chunks, mt__plan_program *out);

/* The program's traffic counted as a 16-bit training system moves it (the
 * ZeRO paper's mixed precision, Megatron-LM: activations, parameters and
 * gradients in 16 bits), for the step time under the 16-bit conventions:
 * every node's bytes halved; every collective's at 2 bytes an element of
 * what it moves (wire_width: meshtrain's own may be 4 or already 2), but a
 * gradient's reduction at `grad_width` (4 where the framework reduces its
 * fp32 main gradients: Megatron-LM's grad buffer, torchtitan's
 * reduce_dtype; 2 for the rest). With `unfused_attention` (the megatron
 * convention), attention's score elements move the bytes Megatron-LM's
 * unfused path moves (score_bytes[1]) in place of meshtrain's fused
 * kernel's. meshtrain's own convention keeps its fp32 activations; the
 * book's counts only memory its way. */
void mt__plan_program_traffic16(mt__plan_program *p, int grad_width, bool unfused_attention);

/* The program's recomputed forward as the frameworks run it: Megatron-LM's
 * full recomputation (tensor_parallel.checkpoint's CheckpointFunction runs
 * the block's forward function again in the backward), DeepSpeed's
 * (deepspeed.checkpointing, the same function) and torchtitan's
 * (torch.utils.checkpoint) re-run the block's tensor- and
 * sequence-parallel collectives with its products, where meshtrain's remat
 * keeps their outputs (remat.c recomputes local calls only). Adds, at the
 * end of each block's run of recomputed nodes, a copy of each of that
 * block's forward activation collectives (blocking, not a parameter's
 * gather or a gradient's reduction), in phase B, marked recompute. For the
 * megatron, deepspeed and torchtitan conventions under full remat
 * (cache.c). Fails only for MT_ENOMEM. */
mt_status mt__plan_program_recompute_comm(mt__plan_program *p);

/* DeepSpeed's ZeRO-3 before 0.5.5 (v0.3.13 to v0.5.4, March to October
 * 2021), as its code runs each parameter's collectives: a parameter of
 * fewer than MT__PLAN_DS_PERSIST elements is kept whole (persistent: no
 * gather; its gradient is still reduce-scattered); every other one is
 * gathered on its own and synchronously (param_gather cleared: the
 * compute waits for it, no prefetch under the previous layer's compute),
 * and each gather and each gradient's reduce-scatter goes through torch's
 * list-form collective, one copy a rank of the group (rank_copies). The
 * persistent ones are counted into ds_persist_*: after each optimizer step
 * DeepSpeed gathers them again (step.h's post_step). Nodes that run once a
 * step are left alone. For the deepspeed convention with
 * mt_plan_request.deepspeed_release before 0.5.5 (cache.c); after
 * traffic16 (a gather's comm_bytes, 2 an element, give its elements). */
void mt__plan_program_list_collectives(mt__plan_program *p);

/* DeepSpeed's ZeRO-3 fetches (every release since 0.3.13): its hooks
 * gather a module's parameters before each use, and after the use release
 * them unless the module is used again within MT__PLAN_DS_REUSE elements of
 * other modules' parameters (program_ds.c names the sources). A recomputed
 * block's modules are used three times a step under full_remat (the
 * forward, the recomputed forward, the backward: a whole block's forward
 * runs again, DeepSpeed's activation checkpointing and Megatron-LM's), so the planner's one backward gather
 * a parameter becomes the one or two DeepSpeed runs, or none where the use
 * before is near enough (a small model's last blocks). Reads each gather's
 * param; before mt__plan_program_list_collectives, after traffic16 (2 bytes
 * an element) and recompute_comm. For the deepspeed convention (cache.c).
 * MT_ENOMEM. */
mt_status mt__plan_program_ds_fetches(mt__plan_program *p, bool full_remat);

/* How a framework stores a parameter the storage axes do not divide. */
typedef enum {
    MT__PLAN_PAD_NONE,   /* whole, as meshtrain's partitioner keeps it (its gradient
                            all-reduced as data parallelism's) */
    MT__PLAN_PAD_FLAT,   /* DeepSpeed's flat partitions: ceil(numel / N) elements a rank */
    MT__PLAN_PAD_ROWS    /* FSDP2's: dim 0 padded, ceil(rows / N) x cols a rank */
} mt__plan_pad;

/* The program's unsplit parameters (unsplit_uses) as a framework that pads
 * runs them (program_pad.c): each gathered over the storage axes before its
 * first reader of each phase that reads it (the forward's, and with
 * resharding the backward's; once a step where the split ones are,
 * unsplit_once), moving N x its padded share; its gradient's
 * all-reduce a reduce-scatter over the storage axes of as many elements
 * (after an all-reduce of the whole over the batch axes that do not store,
 * as an HSDP layout reduces its split ones); pad_unstored_elems set. The
 * nodes are the program's own as the partitioner builds them for a split
 * parameter. MT__PLAN_PAD_NONE changes nothing. Either way unsplit_uses
 * is freed. Call before mt__plan_program_traffic16. Fails only for
 * MT_ENOMEM. */
mt_status mt__plan_program_pad_unsplit(mt__plan_program *p, mt__plan_pad pad);

/* The parameters of the compiled program g (on `mesh`) that the storage
 * axes `storage` split on no dim, counted into p (unsplit_*,
 * rows_pad_elems, unsplit_what; storage_axes), and their uses
 * (unsplit_uses: each one's forward reader, with `reshard` its
 * backward's, and its gradient's all-reduce; `once`: the layout gathers
 * and reduces its split ones once a step, unsplit_once), for
 * mt__plan_program_pad_unsplit (program_pad.c). Fails only for MT_ENOMEM
 * and as mt_graph_node fails. */
mt_status mt__plan_program_unsplit(const mt_graph *g, const mt_mesh *mesh, uint32_t storage,
                                   bool once, bool reshard, mt__plan_program *p);

/* Frees the nodes and zeroes *p; safe on a zeroed one. */
void mt__plan_program_free(mt__plan_program *p);

#endif /* MT_PLAN_IMPL_H */
