/*
 * timing.c — the seconds of one op on the chip's roofline and of one
 * collective on the mesh levels it crosses (step.c puts them together on
 * the two streams meshtrain's executor runs).
 *
 * The roofline (the scaling book, ch. 1; ../shared/PLANNER.md 2.2): an op
 * takes max(FLOPs / (peak x gemm_fraction), bytes / (HBM x hbm_fraction)).
 * A matrix product runs at the peak of the run's precision (bf16, or fp32:
 * a chip that states no fp32 matrix peak, a TPU, is costed at its bf16
 * peak, the MXU's passes aside); every other op is costed by its bytes.
 *
 * A collective (PLANNER.md 2.3) of V bytes (nccl-tests' size) over a group
 * of X devices: the group's members are laid on the system's levels (mesh
 * device ids in order: the mesh's last axis innermost), and at each level
 * the group crosses, D instances of the level below talk over the level's
 * links, each instance's g members in parallel:
 *   all-gather = reduce-scatter = V (D - 1) / D / (g W) through a switch,
 *   ceil(D/2) 2V / (D g W) around a torus (the book's bidirectional ring,
 *   V / W_bidi at even D), the slowest level's,
 *   all-reduce = 2 x that, all-to-all = 1/4 of it on a ring or torus
 *   (the book's bidirectional-ring AllToAll) and (X-1)/X² V / W through a
 *   switch (the book's B·7/(64W) for 8 GPUs), a permute V / link bandwidth;
 * W is the level's per-device egress, link_bandwidth x links x
 * collective_fraction: a switch's whole egress, a torus's links along the
 * dims the group spans (two per dim, both ways: the book's bidirectional
 * ring, V / W_bidi). The latency floor is the ring's steps (X - 1 through a
 * ring, X/2 around a torus) x the level's latency, a hop's: the book's
 * T = max(T_min X/2, V/W); through a switch the level's latency is the
 * floor of a small collective (plan.h: "one hop, or a small collective's
 * floor"), paid once a level.
 */
#include "plan/timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double mt__plan_matmul_peak(const mt_hardware *hw, mt_precision precision) {
    double p = precision == MT_PRECISION_BF16 ? hw->peak_flops[MT_HW_BF16]
                                              : hw->peak_flops[MT_HW_FP32];
    if (!(p > 0)) p = hw->peak_flops[MT_HW_BF16];
    return p;
}

double mt__plan_op_time(const mt_hardware *hw, mt_precision precision, bool matmul, double flops,
                        double bytes, bool *flop_bound) {
    double bw = hw->hbm_bandwidth * hw->hbm_fraction;
    double tb = bytes / bw;
    double tf = matmul ? flops / (mt__plan_matmul_peak(hw, precision) * hw->gemm_fraction) : 0;
    if (flop_bound) *flop_bound = tf >= tb;
    return tf > tb ? tf : tb;
}

/* The level one instance of which holds devices [0, span). */
static int level_of(const mt_hardware *hw, int span) {
    for (int i = 0; i < hw->n_levels; i++)
        if (hw->levels[i].devices == 0 || hw->levels[i].devices >= span) return i;
    return hw->n_levels - 1;
}

/* Per-device egress on level i for a group whose extent inside one
 * instance of level i is `extent` devices. */
static double egress(const mt_hw_level *lv, int extent) {
    double links = lv->links;
    if (lv->topology == MT_TOPO_TORUS && lv->n_dims > 0) {
        /* the dims the group spans, innermost first: 2 links each */
        double spanned = 0;
        int left = extent;
        for (int d = lv->n_dims - 1; d >= 0 && left > 1; d--) {
            spanned += 1;
            left = (left + lv->dims[d] - 1) / lv->dims[d];
        }
        links = 2 * (spanned > 0 ? spanned : 1);
        if (links > lv->links) links = lv->links;
    }
    return lv->link_bandwidth * links * lv->collective_fraction;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* A collective's time is max(bytes x coef, latency) per kind: the
 * coefficients and latencies of one group, computed once for a program's
 * many collectives over the same axes. */
typedef struct {
    double coef[MT__PC_N_KINDS];   /* seconds a byte (all-reduce: both halves) */
    double lat[MT__PC_N_KINDS];    /* the latency floor */
    int    size;                   /* the group's devices */
} coll_profile;

static void profile_of(const mt_hardware *hw, const mt_mesh *mesh, mt_axes axes,
                       coll_profile *cp) {
    memset(cp, 0, sizeof *cp);
    int X = mt_mesh_group_size(mesh, axes);
    cp->size = X;
    if (X <= 1) return;
    int *m = malloc((size_t)X * sizeof *m);
    if (!m) {
        for (int k = 0; k < MT__PC_N_KINDS; k++) cp->coef[k] = INFINITY;
        return;
    }
    mt_mesh_group(mesh, axes, 0, m);
    qsort(m, (size_t)X, sizeof *m, cmp_int);
    int span = m[X - 1] + 1;
    int top = level_of(hw, span);
    double lat = 0;
    int inner = 1;   /* devices one instance of the level below spans */
    for (int i = 0; i <= top; i++) {
        const mt_hw_level *lv = &hw->levels[i];
        /* D: instances of the level below the group touches inside device
           0's instance of this one; g: the group's members in each */
        int below = i == 0 ? 1 : inner;
        int lim = lv->devices ? lv->devices : span;
        int D = 0, g = 0, last = -1;
        for (int k = 0; k < X && m[k] < lim; k++) {
            int inst = m[k] / below;
            if (inst != last) D++, last = inst;
            if (inst == 0) g++;
        }
        inner = lv->devices ? lv->devices : span;
        if (D <= 1) continue;
        double W = egress(lv, D) * g;
        /* a switch: the ring's (D-1)/D; a torus: the book's bidirectional
           ring, ceil(D/2) hops of 2V/(D W) (V/W at even D) */
        double ag = lv->topology == MT_TOPO_SWITCH ? (double)(D - 1) / D / W
                                                   : ceil(D / 2.0) * 2 / D / W;
        double a2a = lv->topology == MT_TOPO_SWITCH ? (double)(D - 1) / ((double)D * D) / W
                                                    : ag / 4;
        double perm = 1 / (lv->link_bandwidth * lv->collective_fraction);
        if (ag > cp->coef[MT__PC_ALL_GATHER]) cp->coef[MT__PC_ALL_GATHER] = ag;
        if (a2a > cp->coef[MT__PC_ALL_TO_ALL]) cp->coef[MT__PC_ALL_TO_ALL] = a2a;
        if (perm > cp->coef[MT__PC_PERMUTE]) cp->coef[MT__PC_PERMUTE] = perm;
        /* a torus's or ring's latency is a hop's (the book's 1 us), a
           switch's the floor of a small collective (nccl-tests' 8 bytes) */
        double steps = lv->topology == MT_TOPO_TORUS ? ceil(D / 2.0)
                       : lv->topology == MT_TOPO_RING ? D - 1 : 1;
        lat += steps * lv->latency;
    }
    free(m);
    cp->coef[MT__PC_REDUCE_SCATTER] = cp->coef[MT__PC_ALL_GATHER];
    cp->coef[MT__PC_ALL_REDUCE] = 2 * cp->coef[MT__PC_ALL_GATHER];
    for (int k = 0; k < MT__PC_N_KINDS; k++) cp->lat[k] = lat;
    cp->lat[MT__PC_ALL_REDUCE] = 2 * lat;
    cp->lat[MT__PC_PERMUTE] = hw->levels[top].latency;
}

static double profile_time(const coll_profile *cp, mt__plan_coll kind, double bytes) {
    if (cp->size <= 1 || !(bytes > 0)) return 0;
    double t = bytes * cp->coef[kind];
    return t > cp->lat[kind] ? t : cp->lat[kind];
}

double mt__plan_coll_time(const mt_hardware *hw, const mt_mesh *mesh, mt__plan_coll kind,
                          mt_axes axes, double bytes) {
    coll_profile cp;
    profile_of(hw, mesh, axes, &cp);
    return profile_time(&cp, kind, bytes);
}
