/*
 * plan/step.h — the time of one training step of one layout (step.c, the
 * step; step_phase.c, one phase of one program on two streams), from the
 * per-device programs of its pipeline chunks, with what binds it.
 *
 * The model, as meshtrain runs a step (graph/exec.c, train/trainer.c,
 * train/pipe.c, pipeline/executor.c):
 *
 *   - Every compute node is on the roofline (cost.c's mt__plan_op_seconds, as the report's),
 *     every collective on the mesh levels it crosses (cost.h's
 *     mt__plan_collective_seconds on the layout's map).
 *   - Two streams a phase (F, B, W each run on their own: exec.c leaves
 *     nothing in flight when a phase returns). The compute stream runs the
 *     nodes in run order; the communication stream runs the deferred
 *     collectives, one after another, each issued when the compute stream
 *     reaches it:
 *       * a gradient reduction (grad_reduce) runs under the nodes after it;
 *         at most MT__PLAN_DEFER_WINDOW are in flight (the compute waits for
 *         the oldest before a later one is issued, plan.c's window), and
 *         what is still in flight at the end of the phase is exposed (exec.c's
 *         "wait: gradient reductions"); W's f32 ones in buckets of the
 *         trainer's size (bucket_bytes, graph/buckets.c), one collective a
 *         bucket, outside the window;
 *       * a parameter gather (param_gather: fsdp, ZeRO) is prefetched one
 *         parameter ahead, as the partitioner places it (right after the
 *         previous parameter's gather): the compute waits for gather k when it
 *         reaches gather k+1 (k+1's readers follow it; the last gather of a
 *         phase is waited for at the next compute node, one parameter early);
 *       * any other collective (tensor and sequence parallel, the loss's)
 *         blocks the compute stream for its own time (and, if it computes,
 *         flops > 0 as the vocabulary-parallel loss does, its own work on
 *         the roofline after it), unless it is a collective matmul's ring
 *         (overlapped): max(its products, the ring).
 *     A blocking collective does not queue behind the communication stream
 *     (the tensor axis's links are not the data axis's). On a threads host
 *     (every level a collective crosses MT_LINK_THREADS, cost.h's
 *     mt__plan_copies_on_cores) nothing is deferred: the threads transport
 *     moves the bytes on the waiting devices' own threads, so every
 *     collective, a collective matmul's ring too, blocks the compute stream.
 *   - Gradient accumulation without a pipe axis: the microbatches run F, B,
 *     W one after another, each W reducing its gradients; or,
 *     MT__PLAN_REDUCE_ONCE (the trainer's loop, mt_graph_set_reduce_later),
 *     whole gradients are all-reduced once, under the last microbatch's
 *     backward (sharded gradients, reduce-scattered, still every
 *     microbatch).
 *   - A pipeline: mt_schedule_simulate_chunks on each chunk's F, B and W
 *     seconds (W's with its reductions' exposed tail) and the message
 *     between stages (a permute over `pipe` of message_bytes); with
 *     MT__PLAN_REDUCE_ONCE, whatever the schedule, the whole gradients'
 *     all-reduces run after the flush, exposed (the scaling book's "DP grad
 *     reduction can only start after the last microbatch").
 *   - The optimizer: AdamW over the device's stored elements, memory-bound.
 *
 * The accounting device (the stage that ends last) satisfies
 *   step = compute + exposed communication + bubble + optimizer
 * exactly; each part is seconds of the step (on a time-shared threads
 * host, compute and exposed communication as long as the sharing made the
 * device's ops: busy over their seconds at the static share).
 *
 * Every step satisfies, and mt__plan_step_check says MT_EINTERNAL where it
 * does not (step_check.c): every part >= 0 (no collective exposes less
 * than nothing); the identity above; step >= floor (no device runs its
 * FLOPs faster than the chip's peak or its bytes faster than its HBM);
 * 0 <= MFU <= HFU <= 1; a recomputing program's recomputation is in its
 * FLOPs.
 */
#ifndef MT_PLAN_STEP_H
#define MT_PLAN_STEP_H

#include "plan/plan_impl.h"
#include "plan/cost.h"
#include "meshtrain/pipeline.h"

/* Gradient reductions in flight at once (graph/plan.c's MT_DEFER_WINDOW). */
#define MT__PLAN_DEFER_WINDOW 4

/* AdamW's bytes per stored element, meshtrain's fp32 optimizer (optim.c):
 * the gradient norm reads g (4), the update reads p, g, m, v (16) and
 * writes p, m, v (12). */
#define MT__PLAN_ADAMW_BYTES 32.0
/* With bf16 products: the weight copies cast again at the next forward
 * (graph/precision.c): p read (4), its bf16 copy written (2). */
#define MT__PLAN_BF16_CAST_BYTES 6.0

/* The distinct (kind, axes) collectives a step names. */
#define MT__PLAN_STEP_MAX_COMM 24

/* When whole gradients (data parallel, ZeRO-1: all-reduced) are reduced. */
typedef enum {
    MT__PLAN_REDUCE_EACH,   /* every microbatch's W */
    MT__PLAN_REDUCE_ONCE,   /* once a step where the trainer can: without a pipe under
                               the last microbatch's backward (trainer.c); in a pipeline
                               after the flush, exposed (the book's), with a chunk's last
                               BW or W (pipeline/executor.c) */
    MT__PLAN_REDUCE_AFTER   /* once a step, after the last backward, exposed, pipe or
                               not: Megatron-LM as SC21 and Korthikanti et al. ran it (its
                               local DDP's allreduce_gradients, and the distributed
                               optimizer's reduce-scatter, called by train_step after the
                               forward-backward; overlapping them came in 2023,
                               --overlap-grad-reduce): the megatron convention */
} mt__plan_reduce;

/* What MFU counts: 6N + 6·L·H·Q·T FLOPs a token (PaLM's appendix B with
 * causal attention's half of the T x T pairs, as llm.c and MaxText count
 * it), or the model's own count. */
typedef struct {
    double n_params;        /* N, the whole model's parameters; 0 (and no flops_per_token):
                               no MFU (NaN) */
    int    layers;          /* L */
    int    heads;           /* H */
    int    head_dim;        /* Q */
    int    seq;             /* T, tokens a sequence */
    double tokens;          /* tokens of one step, all devices together */
    double flops_per_token; /* the model's own count (mt_model_flops_per_token); 0:
                               6N + 6·L·H·Q·T from the fields above */
} mt__plan_model;

/* ======================================================================== */
/* One phase of one program (step_phase.c)                                   */
/* ======================================================================== */

/* The (kind, axes) collectives seen so far: indices into a step's comm[]. */
typedef struct {
    int           n;
    mt__plan_coll kind[MT__PLAN_STEP_MAX_COMM];
    mt_axes       axes[MT__PLAN_STEP_MAX_COMM];
} mt__plan_comm_keys;

/* One phase of one program for one microbatch. */
typedef struct {
    double seconds;                          /* the compute stream's span, waits included */
    double flop_bound, memory_bound;         /* its ops' time by the roof that binds */
    double coll[MT__PLAN_STEP_MAX_COMM];     /* the collectives' own seconds, by key */
    double exposed[MT__PLAN_STEP_MAX_COMM];  /* what the compute waited for, by key */
    double skipped[MT__PLAN_STEP_MAX_COMM];  /* whole-gradient all-reduces left out (skip) */
    double flops;                            /* run: ops and collective matmuls' products */
    double bytes;                            /* the same ops' HBM traffic (their roofline's) */
    double recompute;                        /* of flop_bound + memory_bound, the recomputed
                                                forward's ops (remat; B only) */
    double size[MT__PLAN_STEP_MAX_COMM];     /* bytes of the collectives run (not skipped),
                                                by key: nccl-tests' size of each call, a
                                                collective matmul's ring as the all-gather
                                                or reduce-scatter it replaces (P chunks) */
} mt__plan_phase;

/* The bucket size the trainer runs c's W with, in bytes: c->bucket_mb
 * MiB for f32 gradient reductions, 0 (none) for bf16 ones, which go one a
 * gradient (graph/plan.c's bucketable). */
double mt__plan_bucket_bytes(const mt_train_config *c);

/* Phase `phase` ('F', 'B', 'W') of program p on the two streams (step.h's
 * comment), into *out; with skip_whole, the whole gradients' all-reduces
 * (grad_reduce, MT__PC_ALL_REDUCE) are not run but their seconds put in
 * skipped[]. With bucket_bytes > 0 (f32 gradient reductions:
 * mt_train_config.bucket_mb), W's reductions of gradients smaller than
 * that go in buckets as graph/buckets.c makes them: one collective a
 * bucket of the same kind and axes, started when the next gradient would
 * not fit or when it is full (the phase's first at 1 MiB), and at the end
 * of the phase. Collectives are keyed in *keys (added as met). MT_ENOMEM;
 * MT_EINVAL when a step has more than MT__PLAN_STEP_MAX_COMM distinct
 * collectives. */
mt_status mt__plan_phase_run(const mt_hardware *hw, const mt__plan_map *map, mt_precision precision,
                             const mt__plan_program *p, char phase, bool skip_whole,
                             double bucket_bytes, mt__plan_comm_keys *keys, mt__plan_phase *out);

/* One layout's step. */
typedef struct {
    const mt_hardware      *hw;
    const mt_mesh          *mesh;         /* the layout's: collectives' groups, axis names */
    mt_precision            precision;    /* the matrix products' */
    const mt__plan_program *programs;     /* (stages x chunks): global chunk k's program as
                                             one device of its stage runs it */
    int                     stages;       /* p, the pipe axis's size; 1 without one */
    int                     chunks;       /* v, chunks a device; 1 without a pipe */
    mt_schedule_kind        schedule;     /* with stages > 1 */
    int                     microbatches; /* m: accumulated, or the pipeline's */
    double                  message_bytes;/* bytes one device sends from a chunk to the next
                                             for one microbatch (its B,T,C activation slice;
                                             the gradient back is the same) */
    mt__plan_reduce         reduce;
    double                  optim_bytes;  /* per stored element; 0: MT__PLAN_ADAMW_BYTES
                                             (+ MT__PLAN_BF16_CAST_BYTES under bf16) */
    mt__plan_model          model;
    double                  bucket_bytes; /* W's f32 gradient reductions in buckets of this
                                             many bytes (mt__plan_phase_run); 0: none */
    double                  host_slots;   /* thread devices past a host's cores: the devices
                                             it runs at full speed at once (plan/host.h),
                                             hw being one device's static share; 0: none */
} mt__plan_step_in;

/* One collective (kind over axes) over the step, on the accounting device. */
typedef struct {
    mt__plan_coll kind;
    mt_axes       axes;
    double        seconds;     /* its own time, hidden or not */
    double        exposed;     /* of which the compute waited for (or ran after the flush) */
    double        size;        /* bytes a step: nccl-tests' size of each call, summed over
                                  the calls the step runs (every microbatch's, `once` ones
                                  once) */
    double        sent;        /* bytes the device sends a step, on a ring: an all-reduce
                                  2(n-1)/n of size, an all-gather, reduce-scatter or
                                  all-to-all (n-1)/n, a permute size; it receives as much */
    char          label[64];   /* "all-reduce over data", "all-gather over fsdp,tensor" */
} mt__plan_step_comm;

/* What binds a step. */
typedef enum {
    MT__PLAN_BOUND_COMPUTE,   /* FLOP-bound ops */
    MT__PLAN_BOUND_MEMORY,    /* bandwidth-bound ops and the optimizer */
    MT__PLAN_BOUND_COMM,      /* exposed communication (comm[bound_comm] the most) */
    MT__PLAN_BOUND_BUBBLE     /* the pipeline's idle time */
} mt__plan_bound;

typedef struct {
    double step;                /* seconds of one step */
    double compute;             /* the compute stream's op time: flop_bound + memory_bound */
    double flop_bound, memory_bound;
    double comm_exposed;        /* every collective's exposed seconds together */
    double comm_kind[MT__PC_N_KINDS];   /* ... by kind */
    int    n_comm;
    mt__plan_step_comm comm[MT__PLAN_STEP_MAX_COMM];   /* ... by kind and axes */
    double bubble;              /* pipeline idle seconds of the accounting device */
    double bubble_fraction;     /* bubble / step */
    double optimizer;           /* AdamW's seconds, and the chunks' post_step */
    double message;             /* one pipeline message's seconds (0 without a pipe) */
    double message_sent;        /* bytes the accounting device sends a step in the
                                   pipeline's permutes over pipe (activations forward,
                                   their gradients back, to a chunk on another device) */
    double ops[3];              /* of compute, the ops of F, B and W over the step */
    double recompute;           /* of ops[1], the recomputed forward's */
    double phase[3];            /* one microbatch's F, B, W on the accounting device (its
                                   chunks together), waits included */
    int    device;              /* the accounting device's pipe coordinate (0 without) */
    double peak_in_flight;      /* the schedule's most microbatches in flight, in stages'
                                   activations (mt_pipe_sim.peak_activations); 1 without */
    mt__plan_bound bound;
    int    bound_comm;          /* comm[] index, with MT__PLAN_BOUND_COMM; -1 otherwise */
    char   reason[192];         /* one line: what binds and by how much */
    double flops_per_token;     /* 6N + 6·L·H·Q·T (causal) */
    double mfu;                 /* tokens x flops_per_token / (step x devices x peak) */
    double hfu;                 /* PaLM's hardware FLOPs utilisation: MFU's count plus the
                                   recomputation, mfu x flops_run / (flops_run -
                                   flops_recompute), so hfu >= mfu, equal without remat */
    double flops_run;           /* the FLOPs one step runs, every chunk m times (the model
                                   once), recomputation included */
    double flops_recompute;     /* of which the recomputed forwards' */
    double bytes_run;           /* the HBM bytes of the same ops and of every chunk's
                                   optimizer */
    double floor;               /* seconds no device's step can beat: over the devices, the
                                   most of (its ops' FLOPs at the chip's matrix peak, their
                                   HBM bytes and the optimizer's at its bandwidth), no
                                   fractions applied */
} mt__plan_step_result;

/* The time of one step of the layout in *in into *out (zeroed first):
 * each chunk's program timed (mt__plan_chunk_time_of), then put together
 * (mt__plan_step_chunks). MT_EINVAL, naming the field and its value, for a
 * missing hardware, mesh or programs, stages or chunks or microbatches
 * below 1, chunks above 1 without a pipe, a mesh without a `pipe` axis of
 * `stages` devices when stages > 1, a negative or non-finite message_bytes
 * or optim_bytes; the schedule's own refusals (mt_schedule_make) pass
 * through; MT_ENOMEM. */
mt_status mt__plan_step(const mt__plan_step_in *in, mt__plan_step_result *out);

/* One chunk's program timed once, for any number of steps: its phases with
 * every reduction (variant 0) and without the whole gradients' all-reduces
 * (1), and its stored elements. Every field is a sum of seconds, FLOPs or
 * elements, so chunk times keyed in ONE mt__plan_comm_keys table can be
 * interpolated field by field (as evaluate.c does over blocks and
 * sequences): exactly where each block adds the same seconds and waits
 * (repeated layers), approximately where a wait is a max that changes
 * side between the points. */
typedef struct {
    mt__plan_phase phase[2][3];   /* [variant][F, B, W] of one microbatch */
    double         stored_elems;  /* AdamW's: the program's param_elems less its
                                     pad_unstored_elems */
    double         flops_recompute;  /* of phase[.][1].flops, the recomputed forward's
                                        (the program's flops_recompute) */
    double         post_step;     /* seconds after the optimizer: DeepSpeed's (before
                                     0.5.5) gather of its P persistent parameters, one
                                     all-gather of their bytes and (P + 1) copies a rank
                                     of the group, each a kernel (program.c) */
} mt__plan_chunk_time;

/* Times program p on hw and mesh into *out, W's gradient reductions in
 * buckets of bucket_bytes (0: none; mt__plan_phase_run), keying its
 * collectives in *keys (shared by the chunks of a step). Fails as
 * mt__plan_phase_run. */
mt_status mt__plan_chunk_time_of(const mt_hardware *hw, const mt_mesh *mesh,
                                 mt_precision precision, const mt__plan_program *p,
                                 double bucket_bytes, mt__plan_comm_keys *keys,
                                 mt__plan_chunk_time *out);

/* Whether a and b are one program built at two batches: node for node the
 * same phase, class, collective, axes and role (FLOPs and bytes may
 * differ). */
bool mt__plan_program_same_nodes(const mt__plan_program *a, const mt__plan_program *b);

/* The time of a program at b sequences a replica from two builds of it, p0
 * at b0 and p1 at b1 (mt__plan_program_same_nodes): every node's FLOPs,
 * bytes and collective bytes, affine in the batch, taken at b (between the
 * builds or past them), then that program timed as mt__plan_chunk_time_of
 * times one (its waits and latency floors are its own: timing the builds
 * and extrapolating the seconds put waits below zero). MT_EINVAL, naming
 * both, where the programs are not the same nodes, b0 == b1 or b is not
 * finite; else fails as mt__plan_chunk_time_of. */
mt_status mt__plan_chunk_time_at(const mt_hardware *hw, const mt_mesh *mesh,
                                 mt_precision precision, const mt__plan_program *p0, double b0,
                                 const mt__plan_program *p1, double b1, double b,
                                 double bucket_bytes, mt__plan_comm_keys *keys,
                                 mt__plan_chunk_time *out);

/* mt__plan_step from chunk times already made: chunks[stages x chunks],
 * global chunk k's, keyed in *keys (in->programs is not read). The same
 * refusals, less the programs', and mt__plan_step_check's. */
mt_status mt__plan_step_chunks(const mt__plan_step_in *in, const mt__plan_chunk_time *chunks,
                               const mt__plan_comm_keys *keys, mt__plan_step_result *out);

/* A lower bound of the step mt__plan_step_chunks makes of *in and the
 * chunks' times on a pipeline, without simulating its schedule: m times
 * the busiest device's F, B and W seconds (every schedule runs each once a
 * microbatch and chunk, one op after another on a device, so the makespan
 * is no shorter) plus the most any device spends after the flush (the
 * optimizer, the whole gradients' reductions), dev_of[k] the device of
 * global chunk k (mt_schedule_chunk_device). chunks[k] is global chunk k's
 * time (stages x chunks of them), or NULL for one not known yet, counted
 * as a chunk of no time (the bound only grows with its time). 0 (no bound)
 * without a pipe axis and on a time-shared host. */
double mt__plan_step_lower(const mt__plan_step_in *in, const mt__plan_chunk_time *const *chunks,
                           const int *dev_of);

/* The invariants of the file's comment on step *r of *in (step_check.c):
 * MT_OK, or MT_EINTERNAL with a message naming the mesh, the invariant and
 * its numbers (a planner bug: no layout may come to an impossible step). */
mt_status mt__plan_step_check(const mt__plan_step_in *in, const mt__plan_step_result *r);

#endif /* MT_PLAN_STEP_H */
