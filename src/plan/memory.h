/*
 * plan/memory.h — bytes per device under a memory convention (memory.c) and
 * the published closed forms behind them (memory_forms.c).
 *
 * The conventions (mt_plan_memory, meshtrain/plan.h):
 *   MESHTRAIN  the program's own buffers as the allocator allocates them:
 *              fp32 parameters and gradients, AdamW's m and v, one planned
 *              activation arena per microbatch in flight, scratch;
 *   MIXED16    Rajbhandari et al.'s (ZeRO) model states, 2W + 2G + 12·O
 *              bytes for W fp16 parameter elements, G fp16 gradient elements
 *              and O elements of fp32 master weights, momentum and variance
 *              resident, with W, G and O counted from what the program
 *              stores, gathers and reduces (not from the ZeRO stage's
 *              number); activations by Korthikanti et al.'s Table 2;
 *   BOOK       the scaling book's (ch. 5/6): 2W + 8·O (bf16 weights, fp32
 *              Adam, gradients transient and not counted) and bf16 activation
 *              checkpoints 2 bytes × tokens × saved width × layers;
 *   MEGATRON   2W + 4G + 12·O (fp32 main gradients), Korthikanti's;
 *   DEEPSPEED  DeepSpeed's optimizers in bf16 (memory.c): 2W + 4G + 12·O
 *              without a storage axis (BF16_Optimizer), 2W + 2U + 16·O at
 *              ZeRO-1/2, 2W + 16·O + 4·(largest gathered) at ZeRO-3;
 *              Korthikanti's;
 *   TORCHTITAN FSDP2: 16·O fp32 (parameters, gradients, m, v), the bf16
 *              copies kept whole 2·kept, gathered and freed a temporary;
 *              Korthikanti's.
 * A parameter no storage axis divides is stored whole by meshtrain's
 * partitioner (unsplit_elems); DEEPSPEED and TORCHTITAN count it as if
 * split, as their frameworks pad it (ZeRO's ceil(numel/N) partitions,
 * FSDP2's ceil(rows/N) rows); the others count what the program stores.
 * Bytes are numbers (double): a plan for a trillion parameters overflows
 * nothing, and a search may interpolate the counts between programs.
 */
#ifndef MT_PLAN_MEMORY_H
#define MT_PLAN_MEMORY_H

#include "plan/plan_impl.h"

/* ======================================================================== */
/* What the conventions read                                                 */
/* ======================================================================== */

/* One chunk program's counts (mt__plan_program's, as numbers), so that a
 * search may take them field by field between programs of a few blocks. */
typedef struct {
    double param_elems;          /* stored on the device (its shards) */
    double param_global_elems;   /* the same parameters whole (Ψ of the chunk) */
    double gathered_elems;       /* parameter elements all-gathered in the forward */
    double gathered_kept_elems;  /* of which kept until the backward (ZeRO-1/2) */
    double gathered_max_elems;   /* the largest one gathered parameter */
    double grad_reduced_full_elems; /* gradient elements all-reduced whole */
    double grad_scattered_elems; /* gradient elements reduce-scattered, at the input's size */
    double grad_kept_elems;      /* of those, kept whole for the step (ZeRO-1/2, fsdp once) */
    double param_bytes, grad_bytes;  /* the allocator's (fp32) */
    double kept_grad_bytes;      /* of grad_bytes, the kept gradients' */
    double optim_bytes;          /* AdamW's m and v */
    double arena_bytes;          /* planned activations of one microbatch slot */
    double scratch_bytes;        /* kernels' temporary buffers */
    double largest_temp_bytes;   /* the program's largest activation */
    /* parameters the storage axes (fsdp, data under ZeRO) could not split
       on any dim, and so stored whole, and what the frameworks store of them */
    double unsplit_elems;        /* their elements (in param_elems) */
    double unsplit_zero_elems;   /* ZeRO's partitions of them: sum of ceil(numel / N) */
    double unsplit_rows_elems;   /* FSDP2's: sum of ceil(rows / N) x cols, the parameter as
                                    a 2-D (rows, cols) matrix (plan_impl.h) */
    double unsplit_max_elems;    /* the largest of them */
    double rows_pad_elems;       /* FSDP2's padding of the split ones: sum of
                                    ceil(rows / N) x cols - their stored elements (dims as
                                    before the storage split) */
} mt__plan_mem_counts;

/* p's counts into *out. */
void mt__plan_mem_counts_of(const mt__plan_program *p, mt__plan_mem_counts *out);

/* One chunk a device holds (the whole model off a pipeline). */
typedef struct {
    mt__plan_mem_counts counts;  /* its program's */
    double layers;               /* transformer blocks in it (Korthikanti's and the book's
                                    activations are per block; 0: none counted) */
    double in_flight;            /* microbatches of it whose activations the device holds at
                                    its peak: 1 off a pipeline, the schedule's peak on one
                                    (1F1B's first stage p; an interleaved schedule's
                                    (1 + (p-1)/(p·m)) factor is in this number) */
} mt__plan_mem_chunk;

/* The layout and model facts the published formulas need. Dims are numbers
 * so that the book's decimal token counts (4e6) can be given as they are. */
typedef struct {
    int      data, fsdp, tensor;  /* the mesh's axis sizes (1: absent) */
    int      zero;                /* ZeRO stage over data, 0 to 3 */
    bool     sequence_parallel;   /* Megatron's, over tensor */
    mt_remat remat;
    double   s;                   /* tokens per sequence */
    double   b;                   /* sequences of one microbatch on one data-parallel replica
                                     (the global microbatch / (data · fsdp)) */
    double   h;                   /* hidden width (D, C) */
    double   a;                   /* attention (query) heads */
    double   kv_heads;            /* key/value heads (GQA); 0: a */
    double   hd;                  /* the size of one head (q is a·hd wide, k and v
                                     kv_heads·hd); 0: h/a */
    double   ffn;                 /* MLP hidden width F; 0: 4h */
    bool     gated;               /* a gated MLP (SwiGLU: two up-projections) */
    /* a mixture of experts (docs/moe.md), every field 0 for a dense model */
    double   moe_share;           /* of the layers, the share that are MoE blocks (0 to 1) */
    double   moe_k;               /* rows a token is routed to (top-k) */
    double   moe_ffn;             /* an MoE block's F-wide width a token: k·F_e of the
                                     routed rows + shared·F_e of the shared experts */
    double   moe_experts;         /* E, the router's logits a token */
} mt__plan_mem_layout;

/* Bytes per device, by what they hold. */
typedef struct {
    double params;       /* weights (the 16-bit working copy; TORCHTITAN: the fp32 shards
                            and the bf16 copies kept whole) */
    double grads;        /* gradients (BOOK: 0, transient; DEEPSPEED at ZeRO-1/2: the
                            16-bit ones and the fp32 partition) */
    double optimizer;    /* MESHTRAIN: AdamW's m, v; MIXED16, MEGATRON, DEEPSPEED: fp32
                            master + m + v; BOOK, TORCHTITAN: m, v */
    double activations;  /* what the forward keeps for the backward, every microbatch in
                            flight */
    double temporaries;  /* MESHTRAIN: scratch; the others: the largest gathered parameter
                            in 16 bits when gathered copies are freed after use (fsdp,
                            ZeRO-3), else 0 (DEEPSPEED: and its gradient, 4 bytes an
                            element; TORCHTITAN: and its fp32 gradient, 6) */
    double total;        /* the sum (the reserve is mt__plan_mem_reserve's, apart) */
} mt__plan_mem_bytes;

/* ======================================================================== */
/* Memory per device (memory.c)                                              */
/* ======================================================================== */

/* Bytes per device under `conv` of a device holding chunks[0 .. n_chunks)
 * laid out as *lay, into *out. Each chunk's model states are counted from
 * its counts; activations are its arena (MESHTRAIN) or its layers' published
 * bytes (the others), times its in-flight microbatches; the chunks add.
 * MIXED16's W, G and O (memory.c's comment has the derivation):
 *   O = stored elements;
 *   W = stored + gathered_kept · (1 - 1/n), n the storage degree
 *       fsdp · (data if zero > 0): a kept gathered copy is resident whole;
 *   G = U - grad_scattered · (1 - 1/n), U = stored + gathered · (1 - 1/n)
 *       the parameters as the forward uses them: a scattered gradient is
 *       resident as its shard.
 * MT_EINVAL naming the field for: a convention out of range, no chunks, an
 * axis size below 1, a ZeRO stage outside 0..3, a negative count, layers or
 * in-flight count; with layers > 0 under MIXED16 or BOOK, s, b, h, a not
 * positive, kv_heads outside 0..a, hd or ffn negative, moe_share outside 0..1
 * or an moe size negative. *out is zeroed on failure. */
mt_status mt__plan_mem_device(mt_plan_memory conv, const mt__plan_mem_layout *lay,
                              const mt__plan_mem_chunk *chunks, int n_chunks,
                              mt__plan_mem_bytes *out);

/* The runtime's and the allocator's bytes a device holds besides what
 * mt__plan_mem_device counts, under `conv` on the chip named `hw_name`
 * ("h100-sxm"), with `communicators` NCCL communicators (the mesh axes of
 * size 2 or more) and `churn` bytes allocated and freed through a step (the
 * activations and temporaries): the CUDA context, one cuBLAS workspace and
 * NCCL's buffers by the chip's kind (memory.c's table, each with its
 * source; 0 for a chip the table does not know: TPUs, a host of threads),
 * plus the caching allocator's fragmentation of the churn. 0 under
 * MESHTRAIN, MIXED16 and BOOK, which model no framework. */
double mt__plan_mem_reserve(mt_plan_memory conv, const char *hw_name, int communicators,
                            double churn);

/* The verdict on `total` bytes a device against `hbm`: the margin hbm -
 * total into *margin, and when it does not fit, why into why[cap] in
 * binary units: "out of memory: 93.10 GiB a device, 18.60 GiB over the
 * h100-sxm's 74.50 GiB". `unsplit` (may be NULL or ""): under the
 * conventions that count what the program stores (all but DEEPSPEED and
 * TORCHTITAN), the largest parameter that the storage axes did not divide, as
 * "'wte' (50304, 768) over data x fsdp = 1120"; the why then says the sizes
 * do not divide, not merely that memory is short. why is "" when it fits. */
void mt__plan_mem_verdict(mt_plan_memory conv, double total, double hbm, const char *hw_name,
                          const char *unsplit, double *margin, char *why, size_t cap);

/* The fewest devices N on which replicated + sharded / N bytes fit in `hbm`
 * bytes each (to a part in 1e12, so that published round numbers divide
 * exactly), into *out. The book's minimum chip count is replicated 0,
 * sharded the total (LLaMA-3 70B: 21.6e12 / 96e9 → 225 v5p). MT_EINVAL
 * when hbm is not positive, a byte count is negative, or the replicated
 * bytes alone do not fit (no N does; the message says by how much). */
mt_status mt__plan_mem_min_chips(double replicated, double sharded, double hbm, int64_t *out);

/* ======================================================================== */
/* The published closed forms (memory_forms.c)                               */
/* ======================================================================== */

/* The ZeRO paper's model states per device (its §5 and Table 1): Ψ
 * parameters on nd data-parallel devices at ZeRO `stage` (0 the baseline),
 * K = 12: (2 + 2 + K)Ψ, 4Ψ + KΨ/nd, 2Ψ + (2 + K)Ψ/nd, (2 + 2 + K)Ψ/nd.
 * A reference for tests and documents; mt__plan_mem_device counts the
 * program instead. Returns -1 for nd < 1 or a stage outside 0..3. */
double mt__plan_mem_zero_paper(double psi, int nd, int stage);

/* Korthikanti et al.'s 16-bit activation bytes of one transformer layer and
 * one microbatch on one device (Table 2), for lay's s, b, h, a, tensor t,
 * sequence parallelism and remat:
 *   NONE       sbh(10 + 24/t + 5as/(ht)); with sequence parallelism
 *              sbh(34/t + 5as/(ht)); sbh(34 + 5as/h) at t = 1;
 *   ATTENTION  the paper's selective recompute (attention's scores, softmax
 *   DOTS       and dropout recomputed: the 5as/(ht) term dropped); DOTS
 *              recomputes the element-wise ops too, so keeps no more than
 *              that: it is counted alike (an upper bound);
 *   FULL       sbh·2 (the layer's input), /t with sequence parallelism
 *              (the input is then split over tensor).
 * Off the paper's GPT (MLP 4h, heads a for keys and values, head size
 * h/a) the terms are its breakdown's, generalised: 10sbh replicated (the
 * two norms' inputs, attention's and the MLP's inputs, two dropout masks);
 * split over t the query 2sb·q (q = a·hd, the attention's width: h when
 * hd is 0), keys and values 4sb·q·kv/a, the output projection's input
 * 2sb·q and the MLP's 2sbF per F-wide value (2 of them: the up projection's
 * output and its activation; 4 when gated); 5as²b the scores.
 * A mixture of experts (moe_share of the layers; the paper has none, and
 * Megatron's estimator ignores MoE activations): an MoE layer's F-wide
 * values are its routed rows' and shared experts', moe_ffn wide a token
 * for F, plus the rows dispatch copies (the experts' input) and the
 * experts' outputs combine reads, 2sb·k·h each, and the router's f32
 * logits 4sb·E, all split over t as the MLP's; the result is the layers'
 * mean, (1 - share)·dense + share·MoE. Returns -1 for a non-positive s,
 * b, h, a or t. */
double mt__plan_mem_korthikanti_layer(const mt__plan_mem_layout *lay);

/* The scaling book's saved width a token and a layer (elements) under
 * `remat`, for hidden D and MLP width F. The book states assumptions, not
 * policies; they are laid on meshtrain's policies in the order of what each
 * keeps (NONE ≥ ATTENTION ≥ DOTS ≥ FULL when F ≥ 1.5 D):
 *   NONE       20·D  "saving every intermediate ≈ 2·20·B·T·D·L" (ch. 4);
 *   ATTENTION  D + 2F  attention recomputed, the MLP's three products'
 *              outputs kept: LLaMA-2 13B's "after the 3 big matmuls: B·F,
 *              B·F, B·D" (ch. 6, 42 TB at 16M tokens);
 *   DOTS       4·D  "4 checkpoints/layer of size B×D": LLaMA-3 70B's
 *              (ch. 6, 20.9 TB at 4M tokens);
 *   FULL       D  block remat, the layer's input (ch. 4, 4.2 TB).
 * Returns -1 for an unknown policy or a non-positive D or F. */
double mt__plan_mem_book_width(mt_remat remat, double D, double F);

#endif /* MT_PLAN_MEMORY_H */
