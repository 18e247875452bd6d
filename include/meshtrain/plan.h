/*
 * meshtrain/plan.h — the planner's layer (src/plan/): what a system of
 * accelerators can do, read from a hardware description, so that memory
 * and step time can be predicted for hardware we do not have (issue 24).
 *
 * A hardware description is a JSON file, one per system, shipped in the
 * folder hardware/ of the source tree (docs/planning.md, "Hardware
 * descriptions", gives the format field by field). Every number in it is an
 * object {"value": number, "source": "where it comes from"}: a constant
 * without its source is refused. The achievable fractions come from
 * per-component measurements (a vendor GEMM, nccl-tests, the scaling
 * book's measured collectives), never from fitting an end-to-end run.
 *
 * The description is a public struct, read-only after loading, rather than
 * accessors: the planner reads every field in inner loops, the fields are
 * few and fixed, and mt_machine (meshtrain/profile.h) set the precedent.
 * Units are SI throughout: FLOP/s, bytes, bytes/s, seconds.
 */
#ifndef MESHTRAIN_PLAN_H
#define MESHTRAIN_PLAN_H

#include "meshtrain/base.h"
#include "meshtrain/graph.h"
#include "meshtrain/tensor.h"
#include "meshtrain/train.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The element types a chip's peak is given for. */
typedef enum {
    MT_HW_FP32,   /* IEEE single, on the vector units (GPUs) or the matrix units */
    MT_HW_TF32,   /* NVIDIA's TensorFloat-32 matrix products; none on TPUs */
    MT_HW_BF16,   /* bfloat16 matrix products (every file gives them, or fp16's) */
    MT_HW_FP8,    /* fp8 matrix products (Hopper and later) */
    MT_HW_INT8,   /* int8 matrix products, in OP/s */
    MT_HW_FP16,   /* IEEE half matrix products: a chip without bf16 (V100) gives these, and
                     its 16-bit products (the planner's bf16 precision) run at them */
    MT_HW_N_DTYPES
} mt_hw_dtype;

/* What joins the devices of a mesh level. */
typedef enum {
    MT_LINK_THREADS,     /* threads of one host, through shared memory (this machine) */
    MT_LINK_NVLINK,      /* NVLink (through NVSwitch) within a GPU node */
    MT_LINK_INFINIBAND,  /* InfiniBand between nodes */
    MT_LINK_ETHERNET,    /* Ethernet (RoCE) between nodes */
    MT_LINK_ICI,         /* a TPU slice's inter-chip interconnect */
    MT_LINK_DCN,         /* the data-centre network between TPU slices */
    MT_LINK_PCIE,        /* PCI Express within a server (PCIe cards without NVSwitch) */
    MT_LINK_OMNIPATH,    /* Intel Omni-Path between nodes */
    MT_LINK_N_KINDS
} mt_link_kind;

/* How a level's devices are wired. */
typedef enum {
    MT_TOPO_SWITCH,   /* every device to a switch: any pair at full egress */
    MT_TOPO_RING,     /* a ring */
    MT_TOPO_TORUS     /* an n-dimensional torus (dims, wrap) */
} mt_topology;

#define MT_HW_MAX_DIMS 4
#define MT_HW_MAX_LEVELS 8
#define MT_HW_MAX_ATTENTION 8

/* One level of the mesh, from the innermost out. A device's egress on this
 * level is link_bandwidth x links (one way). */
typedef struct {
    mt_link_kind kind;
    mt_topology  topology;
    int          devices;          /* devices one instance of this level spans (inner levels
                                      included); 0 on the outermost: as many as wanted */
    int          n_dims;           /* MT_TOPO_TORUS: the torus's axes; 0 otherwise */
    int          dims[MT_HW_MAX_DIMS];   /* [n_dims]: devices along each axis */
    bool         wrap[MT_HW_MAX_DIMS];   /* [n_dims]: the axis closes into a ring */
    int          slice_wrap;       /* MT_TOPO_TORUS: an axis of a slice (a run on fewer
                                      devices than the pod) closes into a ring when its size
                                      is a multiple of this (the book: 4 on v4p/v5p, 16 on
                                      v5e/v6e); 0 (absent): only a whole pod axis that wrap[]
                                      closes */
    double       link_bandwidth;   /* bytes/s, one way, one link */
    double       links;            /* links per device on this level (a torus: 2 per axis) */
    double       latency;          /* seconds: one hop (a ring step on NCCL's levels:
                                      NVLink, PCIe, the networks), or a small
                                      collective's floor (threads, DCN) */
    double       collective_fraction;   /* achieved bus bandwidth / link bandwidth x links,
                                           for large collectives, in (0, 1] */
} mt_hw_level;

/* A system: its chip and its mesh levels. */
typedef struct {
    char   name[64];                    /* "h100-sxm", "tpu-v5p" */
    char   description[256];
    double peak_flops[MT_HW_N_DTYPES];  /* FLOP/s (OP/s for int8), dense; 0 where the chip
                                           has no such unit or the file gives none (a file
                                           with fp16 but no bf16: bf16's is fp16's) */
    bool   products16_fp16;             /* the chip's 16-bit products are fp16 (no bf16) */
    double hbm_bytes;                   /* memory per device */
    double hbm_bandwidth;               /* bytes/s, peak */
    double gemm_fraction;               /* large GEMMs' achieved / peak FLOP/s, (0, 1] */
    double thread_gemm_fraction;        /* a threads host (a machine file) only: one kernel
                                           thread's sgemm, the other cores idle, / one
                                           core's share of the peak
                                           (peak / levels[0].devices); 0: not measured, the
                                           host's gemm_fraction holds for any thread count */
    double gemm_tile_m, gemm_tile_n;    /* the output tile the chip's GEMM library runs a
                                           large product in, and ... */
    double gemm_units;                  /* ... the units (SMs) that run the tiles in waves:
                                           a product of M x N runs ceil(M/tm)·ceil(N/tn)
                                           tiles in ceil(tiles/units) waves (NVIDIA's Matrix
                                           Multiplication Background guide, tile and wave
                                           quantization); 0: no quantization */
    double kernel_overhead;             /* seconds every kernel (a program's compute node)
                                           costs besides its work: its launch and ramp, the
                                           time of the smallest products (0: none) */
    double hbm_fraction;                /* streaming kernels' achieved / peak bandwidth */
    double vector_flops;                /* a machine file measured with meshtrain's kernels
                                           capped below the CPU's best level (MT_CPU_ISA):
                                           the FMA peak of the level in use, at which the
                                           ops other than products run; 0: the fp32 peak */
    int    n_attention;                 /* points of the attention curve; 0: attention's
                                           FLOPs at the GEMMs' rate */
    double attention_seq[MT_HW_MAX_ATTENTION];       /* ascending sequence lengths ... */
    double attention_fraction[MT_HW_MAX_ATTENTION];  /* ... and attention's achieved FLOP/s
                                           (forward and backward) there over the GEMMs'
                                           (a machine file's probe; log-linear between,
                                           the end points' beyond) */
    int         n_levels;
    mt_hw_level levels[MT_HW_MAX_LEVELS];   /* [n_levels], innermost first */
    char   fabric[64];                  /* the fabric file (mt_hardware_set_fabric) that
                                           replaced the outermost level: its name; "" when
                                           the file's own level stands */
    int    slice_chips;                 /* a TPU torus (levels[0]): the chips of one slice,
                                           a run being equal slices of it joined by the
                                           level above (mt_hardware_set_slice_chips); 0:
                                           the fewest slices the run's chips allow */
} mt_hardware;

/* Reads the hardware description at `path` into a new *out (free it with
 * mt_hardware_free). The file is opened through meshtrain/files.h's
 * contract (a regular file, at most 1 MiB). Also accepts a machine file
 * written by `meshtrain bench machine --out` (meshtrain/profile.h), mapped
 * onto a one-level description of this host: fp32 peak = the FMA peak on
 * all cores (bf16 = the bf16 dot peak, when measured), gemm_fraction =
 * measured sgemm / that peak (sgemm_cold_gflops' "all": every core its own
 * one-thread sgemm on operands from memory, as the engine runs its products;
 * in files without it, sgemm_gflops' "all"), thread_gemm_fraction = one
 * thread's sgemm (cold's "1", or sgemm_gflops') / (that peak / cores),
 * vector_flops = the FMA peak on all cores of the kernel level the probe ran
 * at when MT_CPU_ISA capped it below the best (0 otherwise), the attention
 * curve = the probe's attention GFLOP/s by T over one thread's sgemm,
 * hbm_bandwidth = the measured triad with hbm_fraction 1, hbm_bytes = the physical memory of the host that loads
 * it (the machine file does not record its own), and one level
 * MT_LINK_THREADS (switch, `cores` devices) whose link bandwidth and latency
 * are the threads all-reduce's bus bandwidth and 8-byte latency, fraction 1.
 * These are the whole host's figures: a mesh of N thread devices shares
 * them out (src/plan/host.h: each device k / max(cores, N k) of the FLOP/s
 * and bandwidth, k its kernel threads, its GEMMs at the sgemm of k threads;
 * 1/N of the memory).
 * Errors: MT_EIO when the file cannot be read; MT_EFORMAT for bad JSON
 * (byte offset) and for every violation of the format, in one line naming
 * the file, the field ("levels[1].latency.source") and what to do: a
 * missing or unknown key, a value of the wrong type, a non-finite or
 * non-positive number, a fraction outside (0, 1], an unknown level kind or
 * topology, a torus whose dims do not multiply to its devices, a level
 * that does not span whole instances of the one inside it, a value without
 * a source. *out is NULL after a failure. */
mt_status mt_hardware_load(const char *path, mt_hardware **out);

/* Frees a description; NULL is a no-op. */
void mt_hardware_free(mt_hardware *hw);

/* Loads the description called `name` ("h100-sxm", or a path: a name with
 * a '/' or ending in ".json" is loaded as it is). A bare name is looked
 * for as <dir>/<name>.json in, in turn: $MESHTRAIN_HARDWARE_DIR (when
 * set), the install folder (<prefix>/share/meshtrain/hardware) and the
 * source tree's hardware/ folder (both compiled in); the first that exists
 * is loaded. When found_path is not NULL it receives the path loaded
 * (found_n bytes). MT_EIO when no folder has it, naming the folders
 * searched and the names shipped; otherwise as mt_hardware_load. */
mt_status mt_hardware_find(const char *name, mt_hardware **out, char *found_path, size_t found_n);

/* The folders mt_hardware_find searches, in order: writes up to `max`
 * paths into dirs[] (pointers into static or environment strings) and
 * returns how many. */
int mt_hardware_dirs(const char **dirs, int max);

/* Replaces hw's scale-out level (the outermost, a switch above at least one
 * other level: a GPU file's InfiniBand, a TPU's DCN) with the fabric
 * `name`: a fabric file, hardware/fabrics/NAME.json, one level's
 * description (docs/planning.md, "Fabrics"): kind (infiniband, ethernet,
 * omnipath or dcn), link_bandwidth a NIC, links (NICs a device), latency
 * and collective_fraction, each {"value", "source"} as a hardware file's.
 * The level keeps the file's "devices" (as many as wanted) and is a switch.
 * A name with a '/' or ending in ".json" is a path; a bare one is looked
 * for as <dir>/fabrics/<name>.json in mt_hardware_dirs' folders, in order.
 * hw->fabric receives the fabric's name and hw->name gets "+<name>"
 * appended (as much as fits), so that what is planned says which fabric;
 * found_path (when not NULL) the path loaded. hw is unchanged on failure:
 * MT_EINVAL when hw has no scale-out level (one level, a threads host, or
 * an outermost level that is not a switch) or no folder has the name
 * (naming it, the folders searched and the fabrics shipped); MT_EIO when
 * the file cannot be read; MT_EFORMAT, naming the file and the field, for
 * every violation of the format (a missing or unknown key, a number without
 * its source, a value out of range, a kind that joins no nodes). */
mt_status mt_hardware_set_fabric(mt_hardware *hw, const char *name, char *found_path,
                                 size_t found_n);

/* Lays a run on hw's TPU torus (levels[0]) as slices of `chips` chips each,
 * joined over the level above it (DCN): a run of N chips is N / chips
 * slices, each the most nearly cubic box of `chips` inside the pod (the
 * rule src/plan/cost_map.c gives), its axes wrapping per slice_wrap; a run
 * of more chips that are no multiple of it is refused when planned, and a
 * run of at most `chips` is one slice of its own chips (as without the
 * setting: the planner's one-device programs among them). 0 restores the
 * default (one slice up to a pod, the fewest equal slices past it).
 * MT_EINVAL, naming the value, when hw has no torus, when its torus is its
 * only level (no level to join slices), or when `chips` is negative, more
 * than the pod, or forms no box inside it (100 chips of a 16x20x28 v5p pod:
 * give a count whose factors fit the pod's sides, e.g. 64 = 4x4x4); hw is
 * unchanged then. */
mt_status mt_hardware_set_slice_chips(mt_hardware *hw, int chips);

/* "fp32", "tf32", "bf16", "fp8", "int8": the keys of "flops" in the file. */
const char *mt_hw_dtype_name(mt_hw_dtype d);

/* "threads", "nvlink", "infiniband", "ethernet", "ici", "dcn", "pcie",
 * "omnipath". */
const char *mt_link_kind_name(mt_link_kind k);

/* "switch", "ring", "torus". */
const char *mt_topology_name(mt_topology t);

/* ======================================================================== */
/* The planner: a layout's memory and step time, and the search over them    */
/* ======================================================================== */

/* How bytes per device are counted (docs/planning.md, "Memory"):
 *   MESHTRAIN  the program's own buffers, as the allocator would allocate
 *              them: fp32 weights and gradients, AdamW's fp32 m and v, the
 *              planned activations of the in-flight microbatches, scratch;
 *   MIXED16    the literature's mixed precision: the ZeRO paper's model
 *              states (2 + 2 + 12 bytes a parameter, stored as the program
 *              stores them) and Korthikanti et al.'s 16-bit activations;
 *   BOOK       the scaling book's: 10 bytes a parameter (bf16 weights, fp32
 *              Adam) and bf16 activation checkpoints;
 *   MEGATRON   Megatron-LM's (docs/distrib_optimizer.md): 16-bit weights
 *              (2 bytes), fp32 main gradients (4), fp32 master weights and
 *              Adam's m and v (12): 18 bytes a parameter, 6 + 12/d with
 *              the distributed optimizer (meshtrain's ZeRO-1 over data);
 *              Korthikanti et al.'s 16-bit activations, as MIXED16;
 *   DEEPSPEED  DeepSpeed's ZeRO in bf16: without ZeRO its BF16_Optimizer
 *              (fp32 gradient accumulation: 2 + 4 + 12 = 18 bytes a
 *              parameter); ZeRO-1/2 its estimator's 4Ψ + 16Ψ/N (16-bit
 *              weights and gradients whole, fp32 master, m, v and gradient
 *              partitions); ZeRO-3 18Ψ/N + 4 bytes a largest-layer element;
 *              each partition ceil(Ψ/N), so any Ψ divides; Korthikanti's
 *              activations;
 *   TORCHTITAN torchtitan's FSDP2 (param_dtype bf16, reduce_dtype fp32):
 *              fp32 sharded parameters, gradients and Adam's m and v (16
 *              bytes a stored element), each parameter split along dim 0
 *              of its 2-D (out, in) view in ceil(rows/N) rows; the bf16
 *              gathered copies; Korthikanti's activations without the
 *              attention scores (SDPA keeps none).
 * MEGATRON, DEEPSPEED and TORCHTITAN add the runtime's and the allocator's
 * reserve (mt_plan_result.reserve; memory.c names each constant's source).
 * DEEPSPEED and TORCHTITAN count a parameter that the storage axes do not
 * divide as their frameworks pad it; the others count it as meshtrain's
 * partitioner stores it, whole, and a layout that does not fit for it says
 * that the sizes do not divide, naming the parameter. */
typedef enum {
    MT_PLAN_MEMORY_MESHTRAIN = 0,
    MT_PLAN_MEMORY_MIXED16,
    MT_PLAN_MEMORY_BOOK,
    MT_PLAN_MEMORY_MEGATRON,
    MT_PLAN_MEMORY_DEEPSPEED,
    MT_PLAN_MEMORY_TORCHTITAN,
    MT_PLAN_MEMORY_N
} mt_plan_memory;

/* "meshtrain", "mixed16", "book", "megatron", "deepspeed", "torchtitan";
 * "?" otherwise. */
const char *mt_plan_memory_name(mt_plan_memory m);

/* "allgather", "ring", "ulysses": a layout's cp_attention (MT_CP_*), as
 * --cp-attention takes it; "?" otherwise. */
const char *mt_plan_cp_attention_name(int cp_attention);

/* One way to lay a training step on the chips. */
typedef struct {
    int      data, fsdp, tensor, pipe;  /* the mesh's axis sizes (1: the axis absent); their
                                           product is the chips */
    int      zero;                      /* ZeRO stage over data, 0 to 3 */
    mt_remat remat;                     /* activation checkpointing */
    bool     sequence_parallel;         /* over tensor (Megatron's) */
    bool     collective_matmul;         /* with sequence parallelism */
    int      schedule;                  /* mt_schedule_kind with pipe > 1, else -1 */
    int      chunks;                    /* v, model chunks a device: the schedule's (2 to 8
                                           under interleaved, 2 under zb-v and dualpipev, 1
                                           under the others); 1 without a pipe axis; 0 (a
                                           layout made by hand): the kind's own */
    int      microbatches;              /* per step: gradient accumulation, or the
                                           pipeline's m */
    int      context;                   /* the context axis's size (0 or 1: absent): each
                                           sequence split head-tail over it (its product
                                           with the four above is the chips) */
    int      cp_attention;              /* with context > 1: attention's lowering over it,
                                           MT_CP_* (partition.h: all-gather, ring, Ulysses) */
    int      expert;                    /* the expert axis's size (0 or 1: absent), a
                                           mixture of experts only: its experts split over
                                           it, the batch folded over it as over data
                                           (docs/moe.md; its product with the others is the
                                           chips) */
} mt_plan_layout;

/* The bytes one kind of collective over one group of mesh axes moves in a
 * step, on the device the step's times are for (mt_plan_result.volumes). */
typedef struct {
    char   kind[16];     /* "all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                            "permute" */
    char   axes[32];     /* its group's mesh axes: "data", "fsdp,tensor", "pipe" */
    int    group;        /* devices in the group */
    double size;         /* bytes a step: nccl-tests' size of each call (an all-reduce's
                            buffer, an all-gather's output, a reduce-scatter's input, a
                            permute's message) summed over the calls the step runs: every
                            microbatch's, the once-a-step ones once */
    double sent;         /* bytes the device sends a step, on a ring: an all-reduce
                            2(n-1)/n of size, an all-gather, reduce-scatter or all-to-all
                            (n-1)/n, a permute all of it (n = group); it receives as much
                            (a pipeline's end stages: their one neighbour's) */
} mt_plan_volume;

/* Distinct (kind, axes) collectives a result lists, the pipeline's permutes
 * included. */
#define MT_PLAN_MAX_VOLUMES 25

/* The pipeline stages whose memory a result lists one by one; a deeper
 * pipeline's further stages count in its peak but are not listed. */
#define MT_PLAN_MAX_STAGE_MEMORY 64

/* What one layout comes to, per device (the device that needs most) and
 * per step. */
typedef struct {
    mt_plan_layout layout;
    long long seq;               /* its place in the search's order of layouts: of two
                                    with the same step and memory the earlier ranks first,
                                    whatever the threads that searched */
    char   mesh[96];             /* "data=2,fsdp=256,tensor=8", as --mesh takes it */
    int    chips;                /* the devices it uses: the mesh's product, the request's
                                    chips or (when they factor badly) their largest power
                                    of two */
    bool   feasible;
    char   why[256];             /* infeasible: what does not fit or divide, with numbers */
    /* bytes per device, under the request's convention: the device that needs most */
    double params, grads, optimizer, activations, temporaries;
    double reserve;              /* the runtime's and the allocator's (CUDA context, cuBLAS
                                    workspace, NCCL buffers, fragmentation): 0 under
                                    meshtrain, mixed16, book */
    double total;                /* the sum, reserve included */
    double margin;               /* hbm - total: free on the tightest device, negative
                                    when it does not fit (0 when a refusal came first) */
    int    n_stages;             /* pipeline stages (1 without a pipe axis) */
    int    peak_stage;           /* the stage whose device needs most (0: the first) */
    double stage_total[MT_PLAN_MAX_STAGE_MEMORY];        /* (min(n_stages, MAX)) bytes a
                                                            device of each stage, reserve
                                                            included */
    double stage_activations[MT_PLAN_MAX_STAGE_MEMORY];  /* (same) of which activations:
                                                            its chunks' microbatches in
                                                            flight under the schedule */
    double last_stage_total;     /* the last stage's (n_stages - 1) bytes and ... */
    double last_stage_activations;   /* ... activations, listed above or not: a report of a
                                        deeper pipeline names its last stage too */
    /* seconds per step */
    double step;                 /* the whole step */
    double compute;              /* every op on the roofline, recompute included: */
    double forward;              /*   of it, the forward's ops */
    double backward;             /*   the backward's (input and weight gradients), the
                                      recomputation excluded */
    double recompute;            /*   the recomputed forward in the backward (remat) */
    double comm_exposed;         /* communication that nothing hides */
    double bubble;               /* a pipeline's idle time on the busiest device */
    double optimizer_step;       /* the AdamW update */
    double tokens_per_s_per_device;
    double mfu;                  /* (6N + 6·L·H·Q·T) a token, causal; recompute excluded */
    double hfu;                  /* the FLOPs run (recompute included) / peak */
    double tokens_per_chip;      /* tokens of one step per data-parallel replica chip */
    char   bound[32];            /* "compute", "memory bandwidth", "communication",
                                    "pipeline bubble" */
    char   bound_why[192];       /* one line: what binds, with the numbers */
    int    n_volumes;            /* the communication of a step (feasible layouts), ... */
    mt_plan_volume volumes[MT_PLAN_MAX_VOLUMES];   /* ... (n_volumes), by kind and axes, on
                                    the device whose step the times are (a pipeline's stage
                                    that ends last) */
} mt_plan_result;

/* The layouts a search refused for one reason (mt_plan_report.refusals):
 * reasons that differ only in their numbers are one, each number that
 * differs between its layouts written as its range ("do not split over
 * tensor=3..48"). */
typedef struct {
    char reason[256];    /* why, as the layouts' `why` says it, numbers as ranges */
    char example[192];   /* one layout it refused: "pipe=2,data=2 zero=0 remat=none 1f1b v=1
                            mb=5" */
    int  count;          /* layouts refused for it */
} mt_plan_refusal;

/* The most distinct reasons a report keeps; past them the rest are counted
 * in the last, "other reasons". */
#define MT_PLAN_MAX_REFUSALS 64

/* A family of layouts (pure data, pure FSDP, FSDP x tensor, ...) and why its
 * best loses to the best overall. */
typedef struct {
    const char    *name;         /* "pure FSDP", static */
    int            n_feasible;
    mt_plan_result best;         /* its fastest feasible layout (n_feasible > 0) */
    char           line[256];    /* "pure FSDP: communication-bound at 468 tokens per chip,
                                    needs 850" */
} mt_plan_family;

#define MT_PLAN_MAX_FAMILIES 8

/* What to plan. */
typedef struct {
    /* the model: mt_train_config's model and model_config (the caller's
       struct, alive during the call); its rules (NULL or "": the default
       rows), with which every layout is built, each rule's mesh axes those
       the layout has (an axis of size 1 splits nothing), refused as the
       trainer refuses them (mt_train_config_check) and with a memory
       convention other than MESHTRAIN (whose activations are formulas of
       the default rows' splits); bucket_mb, the trainer's gradient
       buckets; reshard_after_forward and fsdp_gather, taken by the
       layouts that store parameters split over fsdp or under zero 3 (ZeRO-1
       and 2 gather once a step and keep the copies); and doc_mask, the
       packed documents' ids (their inputs, and their moves beside the keys
       under context parallelism). The rest of it is ignored */
    mt_train_config    model;
    const mt_hardware *hw;
    int                chips;          /* devices; with min_chips, the most to try */
    double             batch_tokens;   /* tokens per step (global) */
    int                seq;            /* tokens per sequence T */
    mt_precision       precision;      /* the matrix products' */
    int                remat;          /* an mt_remat, or -1: every policy (auto) */
    int                zero;           /* 0 to 3, or -1: every stage */
    int                sequence_parallel;  /* 0, 1, or -1: both */
    int                collective_matmul;  /* on the layouts with sequence parallelism: 0,
                                              1, or -1: both; 0 or 1 with sequence_parallel
                                              0 is refused (there is nothing to move) */
    const char        *mesh;           /* one mesh ("data=2,fsdp=256,tensor=8"), or NULL:
                                          every factorisation of the chips */
    int                schedule;       /* an mt_schedule_kind, or -1: every kind */
    int                chunks;         /* v, model chunks a device of a pipeline, 1 to 8 (the
                                          trainer's --chunks): only the schedules that run v
                                          are planned (1: gpipe, 1f1b, zb-h1, zb-h2; 2:
                                          interleaved, zb-v, dualpipev; 3 to 8:
                                          interleaved); 0: each kind's, interleaved at 2 and
                                          at every v from 3 to 8 whose p·v chunks divide the
                                          layers */
    int                microbatches;   /* or 0: the counts searched: powers of two, on a
                                          pipe axis whose p is not one p times them, and the
                                          counts that give a replica a power-of-two
                                          microbatch (a step's sequences / (data x fsdp) /
                                          2^k, Megatron's m = B / (b·dp)); a pipeline's at
                                          most 1024 */
    mt_plan_memory     memory;         /* the convention bytes are counted in */
    int                deepspeed_release;  /* with MT_PLAN_MEMORY_DEEPSPEED: the DeepSpeed
                                          release whose ZeRO-3 collectives are costed, as
                                          major x 10000 + minor x 100 + patch (0.3.13:
                                          313); 0: a current one (one flat buffer a
                                          collective). Before 0.5.5 (313 to 504) each
                                          parameter is gathered on its own, synchronously,
                                          through torch's list-form collectives: one copy
                                          a rank besides (docs/planning.md) */
    int                top;            /* how many feasible layouts to keep (best first) */
    bool               min_chips;      /* find the fewest chips on which a layout fits */
    int                context;        /* the context axis without a mesh: 0 or 1 none
                                          searched (the default); -1 every size > 1 dividing
                                          the chips and T/2; N that size alone (a --mesh
                                          gives its own) */
    int                cp_attention;   /* on layouts with a context axis: MT_CP_*, or -1
                                          every lowering */
    int                threads;        /* the search's worker threads: 0 as many as the
                                          library's (mt_get_num_threads: the cores), at
                                          most 8; 1 the calling thread alone. The answer is
                                          the same on any number (ties between equal steps
                                          go to the layout met first, mt_plan_result.seq) */
} mt_plan_request;

/* The search's outcome. */
typedef struct {
    int             chips;             /* planned for (min_chips: the fewest found) */
    int             n_evaluated, n_feasible, n_programs;   /* layouts, and distinct
                                                              programs built (min_chips:
                                                              over every count tried) */
    int             n_best;
    mt_plan_result *best;              /* (n_best), fastest first */
    int             n_infeasible;      /* with a mesh given: each of its layouts that did
                                          not fit, with why */
    mt_plan_result *infeasible;        /* (n_infeasible) */
    int             n_families;        /* 0 when a mesh was given */
    mt_plan_family  families[MT_PLAN_MAX_FAMILIES];
    double          model_params;      /* N, for MFU */
    double          flops_per_token;   /* 6N + 6·L·H·Q·T (causal attention) */
    double          seconds;           /* the search's wall time */
    int             n_feasible_all;    /* feasible layouts on all `chips` (the best may use
                                          fewer, when the count factors badly) */
    mt_plan_result  best_all;          /* the fastest of those (n_feasible_all > 0) */
    char            why_none[320];     /* n_best 0: why no layout fits, in one line */
    int             n_refusals;        /* the distinct reasons layouts were refused, ... */
    mt_plan_refusal *refusals;         /* ... (n_refusals), most layouts first; their counts
                                          add up to n_evaluated - n_feasible */
    int             n_pruned;          /* of n_feasible, pipelines counted without their
                                          schedule simulated: their step's lower bound passes
                                          every step they would have to beat to be in the
                                          report (not printed: no answer depends on it) */
} mt_plan_report;

/* The request's defaults: no model, no hardware, 0 chips, bf16, every
 * remat policy, ZeRO stage, schedule, chunk count and microbatch count,
 * both settings of sequence parallelism and of collective matmul,
 * meshtrain's memory, top 5. */
mt_plan_request mt_plan_request_defaults(void);

/* Plans req: builds each distinct per-device program once, on the
 * shape-only backend (one device per pipeline stage; blocks repeat, so a
 * chunk of n layers is costed from chunks of 1 and 2), counts its memory
 * under req->memory and its step time on req->hw, and ranks the feasible
 * layouts by step time. Infeasible layouts (out of memory, sizes that do
 * not divide) are never ranked. *out is the caller's: free its arrays with
 * mt_plan_report_free. MT_EINVAL naming the setting for a bad request (no
 * model or hardware, chips < 1, a batch that is not a whole number of
 * sequences, a mesh whose product is not the chips, an axis other than
 * data, fsdp, tensor, pipe, --seq past the model's context, chips past
 * the system's devices, rules the trainer refuses, collective matmul fixed
 * without sequence parallelism, chunks outside 1 to 8 or that the schedule
 * asked for does not run); MT_ENOMEM. A request none of whose layouts fits
 * returns MT_OK with n_best 0 and why_none saying why (with min_chips: no
 * count up to req->chips, or the system's devices, fits). */
mt_status mt_plan_search(const mt_plan_request *req, mt_plan_report *out);

/* Frees the report's arrays and zeroes it; safe on a zeroed one. */
void mt_plan_report_free(mt_plan_report *r);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_PLAN_H */
