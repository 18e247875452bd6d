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

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The element types a chip's peak is given for. */
typedef enum {
    MT_HW_FP32,   /* IEEE single, on the vector units (GPUs) or the matrix units */
    MT_HW_TF32,   /* NVIDIA's TensorFloat-32 matrix products; none on TPUs */
    MT_HW_BF16,   /* bfloat16 matrix products (required in every file) */
    MT_HW_FP8,    /* fp8 matrix products (Hopper and later) */
    MT_HW_INT8,   /* int8 matrix products, in OP/s */
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
    double       link_bandwidth;   /* bytes/s, one way, one link */
    double       links;            /* links per device on this level (a torus: 2 per axis) */
    double       latency;          /* seconds: one hop, or a small collective's floor */
    double       collective_fraction;   /* achieved bus bandwidth / link bandwidth x links,
                                           for large collectives, in (0, 1] */
} mt_hw_level;

/* A system: its chip and its mesh levels. */
typedef struct {
    char   name[64];                    /* "h100-sxm", "tpu-v5p" */
    char   description[256];
    double peak_flops[MT_HW_N_DTYPES];  /* FLOP/s (OP/s for int8), dense; 0 where the chip
                                           has no such unit or the file gives none */
    double hbm_bytes;                   /* memory per device */
    double hbm_bandwidth;               /* bytes/s, peak */
    double gemm_fraction;               /* large GEMMs' achieved / peak FLOP/s, (0, 1] */
    double hbm_fraction;                /* streaming kernels' achieved / peak bandwidth */
    int         n_levels;
    mt_hw_level levels[MT_HW_MAX_LEVELS];   /* [n_levels], innermost first */
} mt_hardware;

/* Reads the hardware description at `path` into a new *out (free it with
 * mt_hardware_free). The file is opened through meshtrain/files.h's
 * contract (a regular file, at most 1 MiB). Also accepts a machine file
 * written by `meshtrain bench machine --out` (meshtrain/profile.h), mapped
 * onto a one-level description of this host: fp32 peak = the FMA peak on
 * all cores (bf16 = the bf16 dot peak, when measured), gemm_fraction =
 * measured sgemm / that peak, hbm_bandwidth = the measured triad with
 * hbm_fraction 1, hbm_bytes = the physical memory of the host that loads
 * it (the machine file does not record its own), and one level
 * MT_LINK_THREADS (switch, `cores` devices) whose link bandwidth and latency
 * are the threads all-reduce's bus bandwidth and 8-byte latency, fraction 1.
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

/* "fp32", "tf32", "bf16", "fp8", "int8": the keys of "flops" in the file. */
const char *mt_hw_dtype_name(mt_hw_dtype d);

/* "threads", "nvlink", "infiniband", "ethernet", "ici", "dcn". */
const char *mt_link_kind_name(mt_link_kind k);

/* "switch", "ring", "torus". */
const char *mt_topology_name(mt_topology t);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_PLAN_H */
