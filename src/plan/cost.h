/*
 * plan/cost.h — the planner's cost model (cost.c): the roofline of one op and
 * the time of one collective on a system's mesh levels.
 */
#ifndef MT_PLAN_COST_H
#define MT_PLAN_COST_H

#include "plan/plan_impl.h"

/* ======================================================================== */
/* Costs (cost.c)                                                            */
/* ======================================================================== */

/* How a mesh's axes sit on a system's levels: the mesh's device ids laid on
 * the system's in order (row-major: the mesh's last axis varies fastest, so
 * it lies innermost), every axis placed on the levels and, on a torus, on
 * the torus's axes it spans. Filled by mt__plan_map. */
#define MT__PLAN_MAX_AXES 8
typedef struct {
    const mt_hardware *hw;
    int                n_axes;
    int                size[MT__PLAN_MAX_AXES];     /* each mesh axis's size */
    int                stride[MT__PLAN_MAX_AXES];   /* its device-id stride */
    /* cost.c may add what it derives per axis (level, torus dims, wrap) */
    int                level[MT__PLAN_MAX_AXES];    /* the innermost level one instance of
                                                       which holds a whole group of it */
    double             bandwidth[MT__PLAN_MAX_AXES];/* bytes/s a collective over it alone
                                                       moves per device, fractions applied */
    double             latency[MT__PLAN_MAX_AXES];  /* seconds per step of its ring */
    bool               wrap[MT__PLAN_MAX_AXES];     /* its ring closes (bidirectional) */
    int                torus_axes[MT__PLAN_MAX_AXES]; /* torus axes it spans (0: none) */
} mt__plan_map;

/* Places `mesh`'s axes on `hw` (mt__plan_map above). MT_EINVAL when the mesh
 * has more devices than the system's bounded levels allow, or an axis cannot
 * be laid on the levels (naming the axis, its size and the level). */
mt_status mt__plan_map_make(const mt_hardware *hw, const mt_mesh *mesh, mt__plan_map *out);

/* Seconds of one op on one device, on the roofline: max(flops / (peak of
 * `dtype` x gemm_fraction), bytes / (hbm_bandwidth x hbm_fraction)) for a
 * matrix product, bytes / (hbm_bandwidth x hbm_fraction) floored by flops /
 * fp32 peak for the rest. */
double mt__plan_op_seconds(const mt_hardware *hw, mt__plan_node_class cls, mt_hw_dtype dtype,
                           double flops, double bytes);

/* Seconds of one collective of `kind` over `axes` moving `bytes` (nccl-tests'
 * size: the reduced buffer, the gathered output, the scattered input, the
 * whole all-to-all buffer, a permute's message), on the map's levels:
 * bandwidth-bound above a size, latency-bound below it. */
double mt__plan_collective_seconds(const mt__plan_map *map, mt__plan_coll kind, mt_axes axes,
                                   double bytes);

#endif /* MT_PLAN_COST_H */
