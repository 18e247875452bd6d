/*
 * cost_map.c — how a mesh's axes lie on a system's levels (plan/cost.h).
 *
 * Levels (GPUs' NVLink node, InfiniBand; a TPU's ICI slice, DCN). Mesh
 * device ids are row-major, the last axis fastest, and are laid on the
 * levels in order: one instance of level i holds a block of instance[i]
 * consecutive ids, so the last axis lies innermost (data=2,fsdp=256,tensor=8
 * on H100 puts tensor inside an 8-GPU node). instance[i] is the level's
 * devices, or the whole run from the level that holds it (a 4-GPU run
 * fills half a node). The run must fill whole instances of every level it
 * outgrows, and each axis's groups must not straddle an instance: with
 * stride s and size n, an instance of P devices either holds whole groups
 * (P a multiple of s n), or P/s members of each (s | P, (P/s) | n), or one
 * member (P | s). An axis lies on the innermost level that holds a whole
 * group of it.
 *
 * A TPU torus (level 0). The file describes a full pod (v4p 16x16x16, v5p
 * 16x20x28); a run on M chips gets a slice of M chips, a box inside the pod:
 * of the boxes whose sides (ascending) fit the pod's (ascending), the most
 * nearly cubic, that is the smallest largest side, then the largest
 * smallest side, then the first in ascending order of sides (64 v4p chips:
 * 4x4x4; 128: 4x4x8; 4096 v5p: 16x16x16; 32 v5e: 4x8; Google's slice
 * shapes). A run larger than the pod, or whose chips form no box of it,
 * gets k equal slices over DCN, k the fewest that divides the chips into
 * slices that exist (16384 v5p: 4 of 16x16x16; 8192: 2 of them). A size
 * of slice given (mt_hardware_set_slice_chips, `--slice-chips S`) lays a
 * run of N > S chips as N / S slices of S over DCN instead (128 v5p chips
 * at S = 64: 2 of 4x4x4, rather than one 4x4x8), N a multiple of S; a run
 * of at most S chips is one slice as before. A slice's axis closes into a
 * ring (wraparound) when its size is a multiple of the level's slice_wrap
 * (the book: "only on axes of size 16 (v5e/v6e) or multiples of 4 (v*p)");
 * the whole pod's axes as the file's wrap[] says. A ring topology is a
 * one-axis torus that wraps when whole.
 *
 * The mesh's axes are laid on the slice's axes as JAX's
 * create_device_mesh assigns physical axes to logical ones, the mesh's
 * innermost axis first (the tensor axis chooses first): an axis takes (1)
 * one unused slice axis of its size, the one that wraps, the last such;
 * else (2) the fewest unused slice axes whose sizes multiply to its size;
 * else (3) factors of what the slice axes have left whose product is its
 * size: each of the 4 places where its own all-gather is fastest (cost.c's
 * rule) is tried, and of the whole assignments the one whose axes'
 * all-gathers take the least time a byte in sum wins (so that a small
 * outer axis, data=2, is not left a strided pair). A factor t of a
 * slice axis of which factors u were taken before runs at stride u: t
 * members, u - 1 chips of other groups between consecutive ones sharing
 * the links; it closes when it takes all that is left (t u = the side)
 * and the side wraps, else it is a sub-ring without wraparound (a line).
 */
#include "plan/cost.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the slice ------------------------------------------------------------ */

typedef struct {
    int  n;                        /* slice axes */
    int  pod[MT_HW_MAX_DIMS];      /* the pod's sides, ascending */
    bool pod_wrap[MT_HW_MAX_DIMS]; /* [n]: the pod side wraps (wrap[] of the file) */
    int  best[MT_HW_MAX_DIMS];
    bool found;
} slice_search;

/* Ascending sides s[k..n) multiplying to m, each <= its pod side, >= lo. */
static void slice_rec(slice_search *ss, int *s, int k, int m, int lo) {
    if (k == ss->n - 1) {
        if (m < lo || m > ss->pod[k]) return;
        s[k] = m;
        if (!ss->found || s[k] < ss->best[k] ||
            (s[k] == ss->best[k] && s[0] > ss->best[0])) {
            memcpy(ss->best, s, sizeof ss->best);
            ss->found = true;
        }
        return;
    }
    for (int d = lo; d <= ss->pod[k] && d <= m; d++)
        if (m % d == 0) {
            s[k] = d;
            slice_rec(ss, s, k + 1, m / d, d);
        }
}

/* The slice of m chips on torus level lv into map (shape and wraparound);
 * false when no box of m chips fits the pod. */
static bool slice_of(const mt_hw_level *lv, int m, mt__plan_map *map) {
    slice_search ss = {0};
    if (lv->topology == MT_TOPO_RING) {
        ss.n = 1, ss.pod[0] = lv->devices, ss.pod_wrap[0] = true;
    } else {
        ss.n = lv->n_dims;
        int order[MT_HW_MAX_DIMS];
        for (int j = 0; j < ss.n; j++) order[j] = j;
        for (int a = 1; a < ss.n; a++)   /* insertion sort of the sides, with their wrap */
            for (int b = a; b > 0 && lv->dims[order[b]] < lv->dims[order[b - 1]]; b--) {
                int t = order[b]; order[b] = order[b - 1]; order[b - 1] = t;
            }
        for (int j = 0; j < ss.n; j++)
            ss.pod[j] = lv->dims[order[j]], ss.pod_wrap[j] = lv->wrap[order[j]];
    }
    int s[MT_HW_MAX_DIMS];
    slice_rec(&ss, s, 0, m, 1);
    if (!ss.found) return false;
    map->slice_n_dims = ss.n;
    for (int j = 0; j < ss.n; j++) {
        map->slice_dims[j] = ss.best[j];
        map->slice_wrap[j] = m == lv->devices || lv->slice_wrap == 0
                                 ? ss.best[j] == ss.pod[j] && ss.pod_wrap[j]
                                 : ss.best[j] % lv->slice_wrap == 0;
    }
    return true;
}

mt_status mt_hardware_set_slice_chips(mt_hardware *hw, int chips) {
    if (!hw) return mt_fail(MT_EINVAL, "mt_hardware_set_slice_chips: hw is NULL");
    const mt_hw_level *lv = &hw->levels[0];
    if (hw->n_levels < 1 || lv->topology == MT_TOPO_SWITCH)
        return mt_fail(MT_EINVAL, "--slice-chips %d: hardware '%s' has no torus (its "
                       "levels[0] is a switch of %s); slices are a TPU pod's", chips, hw->name,
                       hw->n_levels ? mt_link_kind_name(lv->kind) : "nothing");
    if (hw->n_levels < 2)
        return mt_fail(MT_EINVAL, "--slice-chips %d: hardware '%s' has no level above its "
                       "torus to join slices over; add one (a \"dcn\" switch)", chips,
                       hw->name);
    if (chips < 0 || chips > lv->devices)
        return mt_fail(MT_EINVAL, "--slice-chips %d: a slice of %s holds 1 to %d chips (the "
                       "pod); give a count in that range", chips,
                       hw->name, lv->devices);
    mt__plan_map m;
    if (chips > 0 && !slice_of(lv, chips, &m)) {
        char sides[64] = "";
        for (int j = 0; j < (lv->topology == MT_TOPO_RING ? 1 : lv->n_dims); j++)
            snprintf(sides + strlen(sides), sizeof sides - strlen(sides), "%s%d", j ? "x" : "",
                     lv->topology == MT_TOPO_RING ? lv->devices : lv->dims[j]);
        int below = chips - 1;   /* the nearest count under it that forms one */
        while (below > 1 && !slice_of(lv, below, &m)) below--;
        char shape[64] = "";
        slice_of(lv, below, &m);   /* its shape (1 chip always forms one) */
        for (int j = 0; j < m.slice_n_dims; j++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%d", j ? "x" : "",
                     m.slice_dims[j]);
        return mt_fail(MT_EINVAL, "--slice-chips %d forms no slice of %s's %s torus: a slice "
                       "is a box inside the pod, so its chips must factor into sides that fit "
                       "the pod's (the nearest count below that does: %d, %s)", chips,
                       hw->name, sides, below, shape);
    }
    hw->slice_chips = chips;
    return MT_OK;
}

/* ---- axes on the slice ---------------------------------------------------- */

/* Seconds a byte of a large all-gather over one slice axis: count c at
 * stride a, closing or not (cost.c's rule, duplicated here to choose among
 * placements; W1 = 1: only comparisons). */
static double dim_coef(int c, double a, bool wrap) {
    if (c <= 1) return 0;
    return wrap ? a / 2 : a * (c - 1) / c;
}

#define TOP_K 4   /* rule 3's placements an axis tries, fastest first */

typedef struct {
    int  n;
    int  side[MT_HW_MAX_DIMS];     /* the slice's sides */
    bool wrap[MT_HW_MAX_DIMS];
    int  used[MT_HW_MAX_DIMS];     /* the product of the factors taken from each so far */
    int  f[MT__PLAN_MAX_AXES];     /* each mesh axis's devices on the slice */
    int  n_axes;
    /* the search over all axes: the current and the best assignment */
    int    cur[MT__PLAN_MAX_AXES][MT_HW_MAX_DIMS], best[MT__PLAN_MAX_AXES][MT_HW_MAX_DIMS];
    double best_sum;
    bool   found;
} slice_fill;

/* One axis's candidate placements (t[j]: the factor of side j it takes). */
typedef struct {
    int    t[MT_HW_MAX_DIMS];
    int    n;
    int    c[TOP_K][MT_HW_MAX_DIMS];
    double coef[TOP_K];
    int    dims[TOP_K];
} cands;

static double place_coef(const slice_fill *sf, const int *t, int *dims) {
    double inv = 0;
    *dims = 0;
    for (int j = 0; j < sf->n; j++) {
        if (t[j] <= 1) continue;
        int rem = sf->side[j] / sf->used[j];
        bool closes = t[j] == rem && sf->wrap[j];
        inv += 1 / dim_coef(t[j], sf->used[j], closes);
        (*dims)++;
    }
    return inv > 0 ? 1 / inv : 0;
}

/* Rule 3's candidates: every t[j] | left[j] with product f, the TOP_K
 * fastest, then fewest axes, then (the search runs from the last side)
 * the innermost. */
static void cands_rec(const slice_fill *sf, cands *cs, int j, int f) {
    if (j < 0) {
        if (f != 1) return;
        int dims;
        double c = place_coef(sf, cs->t, &dims);
        int at = cs->n;
        while (at > 0 && (c < cs->coef[at - 1] * (1 - 1e-12) ||
                          (c <= cs->coef[at - 1] * (1 + 1e-12) && dims < cs->dims[at - 1])))
            at--;
        if (at >= TOP_K) return;
        int last = cs->n < TOP_K ? cs->n : TOP_K - 1;
        for (int k = last; k > at; k--) {
            memcpy(cs->c[k], cs->c[k - 1], sizeof cs->c[k]);
            cs->coef[k] = cs->coef[k - 1], cs->dims[k] = cs->dims[k - 1];
        }
        memcpy(cs->c[at], cs->t, sizeof cs->c[at]);
        cs->coef[at] = c, cs->dims[at] = dims;
        if (cs->n < TOP_K) cs->n++;
        return;
    }
    int left = sf->side[j] / sf->used[j];
    for (int t = 1; t <= left && t <= f; t++)
        if (left % t == 0 && f % t == 0) {
            cs->t[j] = t;
            cands_rec(sf, cs, j - 1, f / t);
        }
    cs->t[j] = 1;
}

/* Rules 1 and 2: unused whole sides multiplying to f, the fewest, the
 * closing ones and the innermost first, into t. */
static bool whole_sides(const slice_fill *sf, int f, int *t) {
    int best_n = 0, best_mask = 0, best_wraps = -1;
    for (int mask = 1; mask < 1 << sf->n; mask++) {
        long p = 1;
        int n = 0, wraps = 0;
        bool ok = true;
        for (int j = 0; j < sf->n && ok; j++)
            if (mask >> j & 1) {
                ok = sf->used[j] == 1 && sf->side[j] > 1;
                p *= sf->side[j], n++, wraps += sf->wrap[j];
            }
        if (!ok || p != f) continue;
        /* fewer sides; then more that close; then the higher (inner) mask */
        if (!best_n || n < best_n || (n == best_n && wraps >= best_wraps))
            best_n = n, best_mask = mask, best_wraps = wraps;
    }
    if (!best_n) return false;
    for (int j = 0; j < sf->n; j++) t[j] = best_mask >> j & 1 ? sf->side[j] : 1;
    return true;
}

/* Axes a, a-1, ..., 0 (the innermost first): an axis that rules 1-2 place
 * takes that place; otherwise each of its TOP_K fastest rule-3 places is
 * tried, and the assignment whose axes' all-gather seconds a byte sum the
 * least wins (the first found of equal sums: each axis's fastest). */
static void assign_rec(slice_fill *sf, int a, double sum) {
    if (a < 0) {
        if (!sf->found || sum < sf->best_sum * (1 - 1e-12)) {
            memcpy(sf->best, sf->cur, sizeof sf->best);
            sf->best_sum = sum, sf->found = true;
        }
        return;
    }
    cands cs = {.n = 0};
    for (int j = 0; j < MT_HW_MAX_DIMS; j++) cs.t[j] = 1;
    if (sf->f[a] <= 1) {
        cs.n = 1, cs.coef[0] = 0;
        for (int j = 0; j < MT_HW_MAX_DIMS; j++) cs.c[0][j] = 1;
    } else if (whole_sides(sf, sf->f[a], cs.c[0])) {
        cs.n = 1;
        cs.coef[0] = place_coef(sf, cs.c[0], &cs.dims[0]);
    } else {
        cands_rec(sf, &cs, sf->n - 1, sf->f[a]);
    }
    for (int k = 0; k < cs.n; k++) {
        for (int j = 0; j < MT_HW_MAX_DIMS; j++) sf->cur[a][j] = j < sf->n ? cs.c[k][j] : 1;
        for (int j = 0; j < sf->n; j++) sf->used[j] *= cs.c[k][j];
        assign_rec(sf, a - 1, sum + cs.coef[k]);
        for (int j = 0; j < sf->n; j++) sf->used[j] /= cs.c[k][j];
    }
}

static mt_status lay_on_slice(const mt_mesh *mesh, mt__plan_map *map) {
    slice_fill sf = {.n = map->slice_n_dims, .n_axes = map->n_axes};
    for (int j = 0; j < sf.n; j++)
        sf.side[j] = map->slice_dims[j], sf.wrap[j] = map->slice_wrap[j], sf.used[j] = 1;
    for (int a = 0; a < map->n_axes; a++) sf.f[a] = map->axis[a].members[map->torus_level];
    assign_rec(&sf, map->n_axes - 1, 0);
    if (!sf.found) {
        char sides[64] = "", axes[128] = "";
        for (int j = 0; j < sf.n; j++)
            snprintf(sides + strlen(sides), sizeof sides - strlen(sides), "%s%d", j ? "x" : "",
                     sf.side[j]);
        for (int a = 0; a < map->n_axes; a++)
            snprintf(axes + strlen(axes), sizeof axes - strlen(axes), "%s%s %d", a ? ", " : "",
                     mt_mesh_axis_name(mesh, a), sf.f[a]);
        return mt_fail(MT_EINVAL, "mesh '%s' cannot be laid on the %s slice of %s's levels[0] "
                       "(%s): its axes' devices on the slice (%s) are no products of factors "
                       "of the sides; choose axis sizes that are", mt_mesh_spec(mesh), sides,
                       map->hw->name, mt_link_kind_name(map->hw->levels[0].kind), axes);
    }
    for (int j = 0; j < sf.n; j++) sf.used[j] = 1;
    for (int a = map->n_axes - 1; a >= 0; a--) {
        mt__plan_axis_place *p = &map->axis[a];
        p->wrap = true;
        for (int j = 0; j < sf.n; j++) {
            int t = sf.best[a][j];
            if (t <= 1) continue;
            int rem = sf.side[j] / sf.used[j];
            p->torus_count[j] = t;
            p->torus_stride[j] = sf.used[j];
            p->torus_axes++;
            p->wrap = p->wrap && t == rem && sf.wrap[j];
            sf.used[j] *= t;
        }
    }
    return MT_OK;
}

/* ---- levels ----------------------------------------------------------------- */

static mt_status instances(const mt_hardware *hw, const mt_mesh *mesh, mt__plan_map *map) {
    int N = map->n_devices, below = 1;
    for (int i = 0; i < hw->n_levels; i++) {
        const mt_hw_level *lv = &hw->levels[i];
        int cap = lv->devices;
        bool torus = lv->topology != MT_TOPO_SWITCH;
        if (torus && i > 0)
            return mt_fail(MT_EINVAL, "%s: levels[%d] (%s) is a %s above the innermost level; "
                           "the planner models a torus or ring only innermost",
                           hw->name, i, mt_link_kind_name(lv->kind),
                           mt_topology_name(lv->topology));
        int inst;
        if (torus) {
            /* slices of the size asked for (mt_hardware_set_slice_chips), or
               the fewest equal slices that exist: one up to a pod when its
               chips form a box */
            int k = 1;
            const bool sliced = hw->slice_chips > 0 && N > hw->slice_chips;
            if (sliced) {   /* a run within one slice's chips is laid as without it */
                const int S = hw->slice_chips;
                if (N % S || !slice_of(lv, S, map))
                    return mt_fail(MT_EINVAL, "%d devices (mesh '%s') are no whole number of "
                                   "slices of %d chips (--slice-chips %d) of %s's torus: "
                                   "plan for a multiple of %d devices", N, mt_mesh_spec(mesh),
                                   S, S, hw->name, S);
                k = N / S;
            }
            while (!sliced && k <= N &&
                   (N % k || N / k > cap || !slice_of(lv, N / k, map)))
                k++;
            if (k > N || (k > 1 && i == hw->n_levels - 1))
                return mt_fail(MT_EINVAL, "%d devices (mesh '%s') form no slice of %s's torus "
                               "(levels[0], %s, %d devices): a slice is a box inside the pod, "
                               "and more than a pod is equal slices; choose a device count "
                               "whose factors fit the pod's sides", N, mt_mesh_spec(mesh),
                               hw->name, mt_link_kind_name(lv->kind), cap);
            inst = N / k;
            map->torus_level = 0;
            map->slices = k;
        } else if (cap == 0 || N <= cap) {
            inst = N;
        } else {
            inst = cap;
            if (N % cap || cap % below)
                return mt_fail(MT_EINVAL, "mesh '%s' has %d devices, which do not fill whole "
                               "instances of %s's levels[%d] (%s, %d devices, holding %d of "
                               "the level inside): use a multiple of %d devices",
                               mt_mesh_spec(mesh), N, hw->name, i, mt_link_kind_name(lv->kind),
                               cap, below, cap);
        }
        if (i == hw->n_levels - 1 && cap > 0 && N > cap && !torus)
            return mt_fail(MT_EINVAL, "mesh '%s' has %d devices but %s holds at most %d "
                           "(levels[%d], %s, the outermost level, is bounded): plan for at "
                           "most %d devices", mt_mesh_spec(mesh), N, hw->name, cap, i,
                           mt_link_kind_name(lv->kind), cap);
        if (i == hw->n_levels - 1 && torus && inst < N)
            return mt_fail(MT_EINVAL, "mesh '%s' has %d devices but %s's only level, a torus of "
                           "%d, holds at most %d: plan for at most %d devices",
                           mt_mesh_spec(mesh), N, hw->name, cap, cap, cap);
        map->instance[i] = inst;
        below = inst;
    }
    return MT_OK;
}

/* Members of the axis with stride s and size n in an instance of P
 * consecutive devices; -1 when its groups straddle instances. */
static int members_in(int s, int n, int P) {
    long sn = (long)s * n;
    if (P >= sn) return P % sn == 0 ? n : -1;
    if (P > s) return P % s == 0 && n % (P / s) == 0 ? P / s : -1;
    return s % P == 0 ? 1 : -1;
}

mt_status mt__plan_map_make(const mt_hardware *hw, const mt_mesh *mesh, mt__plan_map *out) {
    if (!hw || !mesh || !out) return mt_fail(MT_EINVAL, "mt__plan_map_make: a NULL argument");
    memset(out, 0, sizeof *out);
    mt__plan_map *map = out;
    map->hw = hw;
    map->n_devices = mt_mesh_size(mesh);
    map->n_axes = mt_mesh_ndim(mesh);
    map->torus_level = -1;
    map->slices = 1;
    mt_status s = instances(hw, mesh, map);
    if (s) { memset(out, 0, sizeof *out); return s; }
    int stride = 1;
    for (int a = map->n_axes - 1; a >= 0; a--) {
        mt__plan_axis_place *p = &map->axis[a];
        p->size = mt_mesh_axis_size(mesh, mt_mesh_axis_name(mesh, a));
        p->stride = stride;
        stride *= p->size;
        p->level = -1;
        for (int j = 0; j < MT_HW_MAX_DIMS; j++) p->torus_count[j] = 1, p->torus_stride[j] = 1;
        for (int i = 0; i < hw->n_levels; i++) {
            int m = members_in(p->stride, p->size, map->instance[i]);
            if (m < 0) {
                int P = map->instance[i], size = p->size, st = p->stride;
                memset(out, 0, sizeof *out);
                return mt_fail(MT_EINVAL, "mesh axis '%s' (size %d, device-id stride %d) of "
                               "mesh '%s' straddles the instances of %s's levels[%d] (%s, %d "
                               "devices in this run): its groups would be split unevenly; make "
                               "the axis and the axes after it multiply to a divisor or a "
                               "multiple of %d", mt_mesh_axis_name(mesh, a), size, st,
                               mt_mesh_spec(mesh), hw->name, i,
                               mt_link_kind_name(hw->levels[i].kind), P, P);
            }
            p->members[i] = m;
            if (m == p->size && p->level < 0) p->level = i;
        }
    }
    if (map->torus_level >= 0 && (s = lay_on_slice(mesh, map))) {
        memset(out, 0, sizeof *out);
        return s;
    }
    for (int a = 0; a < map->n_axes; a++) {
        mt__plan_axis_place *p = &map->axis[a];
        if (p->torus_axes == 0) p->wrap = false;
        mt_axes one = {.n = 1, .axis = {(uint8_t)a}};
        double big = 1e12;
        double t = mt__plan_collective_seconds(map, MT__PC_ALL_GATHER, one, big);
        p->bandwidth = t > 0 ? big / t : 0;
        p->latency = mt__plan_collective_seconds(map, MT__PC_ALL_GATHER, one, 1e-300);
    }
    return MT_OK;
}
