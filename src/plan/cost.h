/*
 * plan/cost.h — the planner's cost model: how a mesh's axes lie on a
 * system's levels (cost_map.c), the time of one collective over some of
 * them (cost.c) and the roofline of one op (cost.c), each rule with its
 * source (the scaling book, ../shared/PLANNER.md 2.2-2.3).
 *
 * Every figure includes the hardware file's achievable fractions
 * (gemm_fraction, hbm_fraction, each level's collective_fraction); the
 * book's ideal numbers come out of a copy of the mt_hardware with the
 * fractions set to 1.
 */
#ifndef MT_PLAN_COST_H
#define MT_PLAN_COST_H

#include "plan/plan_impl.h"

/* ======================================================================== */
/* The map: a mesh's axes on a system's levels (cost_map.c)                  */
/* ======================================================================== */

#define MT__PLAN_MAX_AXES MT_MESH_MAX_AXES

/* One mesh axis on the system. Mesh device ids are row-major (the last axis
 * varies fastest), and they are laid on the levels in order: the devices of
 * one instance of level i are a block of instance[i] consecutive ids. On
 * the torus level the axes are instead laid on the slice's axes (below). */
typedef struct {
    int    size;                            /* devices along the axis */
    int    stride;                          /* its device-id stride */
    int    level;                           /* the innermost level one instance of which
                                               holds a whole group of it */
    int    members[MT_HW_MAX_LEVELS];       /* [n_levels]: a group's members inside one
                                               instance of level i (1..size, non-decreasing;
                                               size from `level` out) */
    /* on the torus level (mt__plan_map.torus_level; all 1 / 0 off it): */
    int    torus_count[MT_HW_MAX_DIMS];     /* [slice_n_dims]: members along slice axis j
                                               (1: the axis does not run along j) */
    int    torus_stride[MT_HW_MAX_DIMS];    /* chips between consecutive members along j
                                               (1: neighbours; k: k-1 other groups'
                                               chips in between, sharing the links) */
    int    torus_axes;                      /* slice axes it runs along */
    bool   wrap;                            /* every slice axis it runs along closes
                                               around its group (a bidirectional ring) */
    /* an all-gather over this axis alone (mt__plan_collective_seconds): */
    double bandwidth;                       /* bytes/s: V / seconds of a large one, the
                                               fractions applied; 0 for a size-1 axis */
    double latency;                         /* seconds: its latency floor */
} mt__plan_axis_place;

/* How a mesh lies on a system (mt__plan_map_make). Plain data: copy it,
 * keep it as long as `hw` lives. */
typedef struct {
    const mt_hardware  *hw;
    int                 n_devices;          /* the mesh's */
    int                 n_axes;             /* the mesh's */
    int                 instance[MT_HW_MAX_LEVELS];  /* [hw->n_levels]: devices one instance of
                                               level i holds in this run: the level's devices,
                                               the slice on a torus, n_devices from the level
                                               that holds the whole run */
    int                 torus_level;        /* the level laid as a slice (0), or -1 */
    int                 slice_n_dims;       /* the slice's axes (the torus's), 0 without one */
    int                 slice_dims[MT_HW_MAX_DIMS];  /* [slice_n_dims]: its shape, ascending */
    bool                slice_wrap[MT_HW_MAX_DIMS];  /* [slice_n_dims]: the axis closes */
    int                 slices;             /* instances of the torus level in the run */
    mt__plan_axis_place axis[MT__PLAN_MAX_AXES];     /* [n_axes], the mesh's order */
} mt__plan_map;

/* Lays `mesh` on `hw` into *out (cost_map.c's comment has the rules):
 * the instances each level holds in this run, each axis's members per
 * instance and its level, and on a TPU torus the slice's shape for the
 * mesh's device count and each axis's slice axes, counts and strides.
 * MT_EINVAL, with a message naming the axis, its size and the level,
 * when the mesh has more devices than the system's bounded levels hold,
 * its devices do not fill whole instances of a level, an axis's groups
 * would straddle instances, a device count forms no slice of the torus,
 * or an axis cannot be laid on the slice; also for a torus or ring
 * above the innermost level (not modelled). `hw` must outlive *out. */
mt_status mt__plan_map_make(const mt_hardware *hw, const mt_mesh *mesh, mt__plan_map *out);

/* ======================================================================== */
/* Times (cost.c)                                                            */
/* ======================================================================== */

/* A collective group over some axes of a map: what a collective's seconds
 * read of the map, but for its bytes (mt__plan_group_make). Plain data. */
typedef struct {
    bool   valid;       /* false: the axes are not the map's (every time NAN) */
    bool   on_cores;    /* mt__plan_copies_on_cores */
    int    X;           /* the group's devices */
    double ag, a2a, perm;              /* seconds a byte */
    double lat_ag, lat_ar, lat_perm;   /* latency floors, or NCCL's latencies (nccl) */
    double lat_a2a;     /* the levels' latencies once: an all-to-all's floor */
    bool   nccl;        /* every level it crosses is NCCL's (nccl_hop): time = latency +
                           bytes x seconds a byte, not the larger of the two */
} mt__plan_group;

/* The group over `axes` on `map` into *out; false (out->valid false) for
 * axes that are not the map's. A step's simulation makes one for each of
 * its collectives' axes and times every collective over them with
 * mt__plan_group_seconds, where mt__plan_collective_seconds made it again
 * for each. */
bool mt__plan_group_make(const mt__plan_map *map, mt_axes axes, mt__plan_group *out);

/* mt__plan_collective_seconds over the group `g` made. */
double mt__plan_group_seconds(const mt__plan_group *g, mt__plan_coll kind, double bytes);

/* Seconds of one collective of `kind` over the mesh axes `axes` (indices
 * into the map's mesh, each once) moving `bytes`, nccl-tests' size: an
 * all-gather's gathered output, a reduce-scatter's input, an
 * all-reduce's buffer, an all-to-all's per-device buffer (its send
 * buffer, every peer's share), a permute's message. Bandwidth-bound above
 * a size, latency-bound below it (cost.c's comment: rules and sources).
 * 0 for a group of one device or no bytes; NAN for axes that are not the
 * map's. */
double mt__plan_collective_seconds(const mt__plan_map *map, mt__plan_coll kind, mt_axes axes,
                                   double bytes);

/* Whether a collective over `axes` moves its bytes on the devices' own
 * cores: every level the group crosses is MT_LINK_THREADS (the threads
 * transport copies through shared memory on the threads of the devices that
 * wait on it, comm/threads.c: no engine moves them meanwhile), so it cannot
 * run under the compute; false for a group of one or bad axes. */
bool mt__plan_copies_on_cores(const mt__plan_map *map, mt_axes axes);

/* The peak FLOP/s a matrix product of `dtype` runs at on hw's chip: its
 * own, or, where the file gives none (fp32 or tf32 on a TPU, fp8 on an
 * A100), the bf16 matrix units' (a TPU's fp32 products at XLA's default
 * precision are single bf16 passes; a type without units of its own is
 * converted to bf16). No fraction applied. */
double mt__plan_matmul_peak(const mt_hardware *hw, mt_hw_dtype dtype);

/* Seconds of one op on one device, on the roofline (PLANNER.md 2.2): a
 * matrix product (MT__PN_MATMUL) takes max(flops / (mt__plan_matmul_peak
 * x gemm_fraction), bytes / (hbm_bandwidth x hbm_fraction)); any other op
 * takes bytes / (hbm_bandwidth x hbm_fraction), floored by flops / the
 * fp32 peak (the vector units; vector_flops, where a machine file measured
 * meshtrain's kernels capped below the CPU's best level) where the file
 * gives one (a TPU's does
 * not: its element-wise ops are costed by their bytes alone, the book's
 * v5p VPU being memory-bound above 3 FLOPs a byte). A collective node
 * (MT__PN_COLLECTIVE) is costed here by its local work only, as the
 * rest. *flop_bound (may be NULL) says whether the FLOPs term won. The step
 * model, the report's roofline and the search all cost ops here. */
double mt__plan_op_seconds(const mt_hardware *hw, mt__plan_node_class cls, mt_hw_dtype dtype,
                           double flops, double bytes, bool *flop_bound);

/* Attention's achieved FLOP/s over the GEMMs' at sequence length `seq` on
 * hw (its attention curve: log-linear in seq between its points, the end
 * points' beyond them); 1 for a description without a curve or seq <= 0. */
double mt__plan_attention_fraction(const mt_hardware *hw, double seq);

/* A product of M x N over K on hw, as a share of a large product's rate
 * (gemm_fraction's, products of 4096 a side): the best of the GEMM
 * library's kernels (cost.c's comment: the tile sizes of NVIDIA's Matrix
 * Multiplication Background guide, tile and wave quantization on
 * gemm_units, split-K, a fixed per-tile K overhead, calibrated on OpenXLA's
 * measured H100 table), at most 1. 1 for a description without a tile (a
 * TPU's, a CPU's) or no shape. */
double mt__plan_gemm_efficiency(const mt_hardware *hw, double M, double N, double K);

/* A fused (flash) attention kernel's share of a large product's rate on
 * hw: `rows` query rows (B·NH·T), each scored against `keys` keys, causal
 * (cost.c's comment: the product model's waves and per-tile K overhead over
 * a loop of keys / 2). 1 for a description without a tile or no shape. */
double mt__plan_flash_efficiency(const mt_hardware *hw, double rows, double keys);

/* Node n's FLOPs as the GEMMs' rate would take them: attention's over
 * mt__plan_attention_fraction of its sequence length where hw has a
 * measured curve (a CPU probe's), else over mt__plan_flash_efficiency where
 * it is the fused kernel; the other products over mt__plan_gemm_efficiency
 * of their shape; the rest as they are. */
double mt__plan_node_flops(const mt_hardware *hw, const mt__plan_node *n);

/* Seconds of node n of a program (not a collective) on hw, as
 * mt__plan_op_seconds costs mt__plan_node_flops and its bytes, plus the
 * file's kernel_overhead for a node that does any work. */
double mt__plan_node_seconds(const mt_hardware *hw, const mt__plan_node *n, mt_hw_dtype dtype,
                             bool *flop_bound);

/* Products' efficiencies (mt__plan_gemm_efficiency) remembered by shape for
 * one hardware: a program's blocks repeat a few shapes, each costed once.
 * Zeroed before use (all entries empty); lives no longer than its hw. */
typedef struct {
    double m[16], n[16], k[16], eff[16];   /* m 0: empty */
} mt__plan_gemm_memo;

/* mt__plan_node_seconds, the products' efficiencies taken from *memo
 * (filled as met; NULL: none): the same seconds, bit for bit. */
double mt__plan_node_seconds_memo(const mt_hardware *hw, const mt__plan_node *n,
                                  mt_hw_dtype dtype, mt__plan_gemm_memo *memo, bool *flop_bound);

/* The element type a run's matrix products use: bf16 or fp32. */
mt_hw_dtype mt__plan_dtype_of(mt_precision precision);

/* The chip's critical intensity (the book's, PLANNER.md 2.2): FLOPs a
 * byte of HBM traffic at which a matrix product of `dtype` is as much
 * compute- as memory-bound: matmul peak x gemm_fraction / (hbm_bandwidth
 * x hbm_fraction). */
double mt__plan_chip_intensity(const mt_hardware *hw, mt_hw_dtype dtype);

/* A level's critical intensity, the book's alpha = C / W (PLANNER.md 2.7):
 * matmul peak x gemm_fraction / W, W = one device's collective bandwidth
 * on the level, its collective_fraction applied: a torus's or ring's one
 * axis both ways (2 x link_bandwidth x links per neighbour: W_ici), a
 * switch's egress (link_bandwidth x links). NAN for a level hw lacks. */
double mt__plan_level_intensity(const mt_hardware *hw, int level, mt_hw_dtype dtype);

/* The critical intensity of a group over `axes`: matmul peak x
 * gemm_fraction x the seconds a byte of a large all-gather over it takes
 * (FLOPs per gathered byte; for data parallelism, tokens per device). With
 * `precise` false, switch levels drop their (D-1)/D, the book's rounded
 * B/W (990e12 / 450e9 = 2200 in an H100 node); torus rings are the
 * book's in both forms. 0 for a group of one, NAN for bad axes. */
double mt__plan_axes_intensity(const mt__plan_map *map, mt_axes axes, mt_hw_dtype dtype,
                               bool precise);

#endif /* MT_PLAN_COST_H */
