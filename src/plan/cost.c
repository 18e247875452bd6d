/*
 * cost.c — the time of one collective over a mesh's axes, on the levels
 * cost_map.c laid them on, and the roofline of one op (plan/cost.h).
 *
 * Collectives (the scaling book, ch. 3 and 12; ../shared/PLANNER.md 2.3).
 * V is nccl-tests' size (cost.h). A group over some axes has members[i]
 * (the product of its axes') in one instance of level i: at each level
 * with D = members[i] / members[i-1] > 1 it crosses, the level carries:
 *
 *  - a switch (NVLink node, InfiniBand, DCN), W = link_bandwidth x links x
 *    collective_fraction a device: an all-gather's or reduce-scatter's
 *    V (D-1) / D over the members[i-1] devices of each inner instance,
 *    each with its own W: V (D-1) / (D g W) (the book's GPU forms: in a
 *    node "B·(8−1)/(8·W)", across nodes the node's egress, 8 x 50e9 =
 *    400e9, the hierarchical "min over levels of D_i·W_i/(D_i−1)"); the
 *    rounded form drops (D-1)/D (the book's B/W). An all-to-all: each
 *    device sends V / X to each of the members[i] - members[i-1] peers
 *    whose lowest common level is this one ("B·7/(64·W)" for 8 GPUs, with
 *    V = B/8 a GPU's buffer). A permute: V / W. Latency: NCCL's levels
 *    (NVLink, PCIe, the networks) a ring's steps, each its level's hop
 *    (nccl_hop), added to the bandwidth term as NCCL's model adds them;
 *    a permute's and an all-to-all's, and other switches', the level's
 *    latency once, a floor (plan.h);
 *
 *  - a TPU torus (the slice), W1 = link_bandwidth x links / (2 x axes) x
 *    collective_fraction one way to one neighbour: along each slice axis j
 *    the group runs c members at stride a (cost_map.c). A closing ring
 *    gathers in a V / (2 W1) (the bidirectional ring, "T_AG = V / W_ici",
 *    W_ici = 2 W1, X-independent), a line (no wraparound) in
 *    a (c-1) (V/c) / W1 (the book's v5e "3·8.4e6/4.5e10"); a stride of a
 *    shares each link with a - 1 other groups, so a times slower. Several
 *    axes at once add their bandwidths (the book's "V/(W_ici·N_axes)").
 *    An all-to-all is bound by the bisection across the slowest axis:
 *    V·c·a / (4 X' W) with X' the group, W the links crossing a cut (the
 *    book's "V·max(A,B,C,…)/(4·N·W_ici)" and, on a ring, "AllGather / 4",
 *    V there the whole array, X' times a device's buffer). A permute: one
 *    hop of the smallest stride, V a / W1. Latency: ceil(c/2) hops a ring,
 *    c - 1 a line, a physical hops each (the book's "T_min·X/2", "3 hops",
 *    summed over axes: "T_min·Σ|X_i|/2").
 *
 * The group's seconds a byte are its slowest level's (the levels'
 * transfers pipelined); its latency floor the sum of the levels'. A
 * collective takes max(floor, V x seconds a byte) (the book's "T_AG =
 * max(T_min·X/2, V/W)"); reduce-scatter = all-gather; all-reduce = twice
 * an all-gather's bandwidth term (RS + AG; NVLink SHARP's 1x is not
 * modelled), with a torus's hops twice and a switch's floor once.
 *
 * Ops: the roofline (PLANNER.md 2.2), cost.h.
 */
#include "plan/cost.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- collectives ---------------------------------------------------------- */

/* NCCL's model of a collective (src/graph/tuning.cc of NCCL 2.8-2.9, 2020-21,
 * the releases of the SC21 and Korthikanti et al. runs): time = latency +
 * bytes / bandwidth, a ring's latency one hop's for each of its n - 1 steps
 * (2(n - 1) for an all-reduce), nNodes - 1 of them on the network, the
 * node's hops 1.8 times longer once the ring leaves the node (its LL
 * protocol's). A level's `latency` is its hop's (the GPU files: NCCL's LL
 * figures, the smallest its model holds; its base latency, 3.6 us a
 * collective, is left out, so this is a floor on what NCCL predicts).
 * One hop's latency on level lv; -1 for a level NCCL does not run on
 * (threads, ICI, DCN), whose own latency floors a collective once. */
static double nccl_hop(const mt_hw_level *lv, bool multi_node) {
    switch (lv->kind) {
    case MT_LINK_NVLINK:
    case MT_LINK_PCIE:       return (multi_node ? 1.8 : 1.0) * lv->latency;
    case MT_LINK_INFINIBAND:
    case MT_LINK_ETHERNET:
    case MT_LINK_OMNIPATH:   return lv->latency;
    default:                 return -1;
    }
}

static bool network_kind(mt_link_kind k) {
    return k == MT_LINK_INFINIBAND || k == MT_LINK_ETHERNET || k == MT_LINK_OMNIPATH;
}

/* The slice part of a group over `axes` with g members on the slice. */
static void torus_cost(const mt__plan_map *map, mt_axes axes, int X, int g, mt__plan_group *gc) {
    const mt_hw_level *lv = &map->hw->levels[map->torus_level];
    int n = map->slice_n_dims;
    double per = lv->links / (2.0 * (lv->topology == MT_TOPO_RING ? 1 : lv->n_dims));
    double W1 = lv->link_bandwidth * (per > 0 ? per : 1) * lv->collective_fraction;
    double inv = 0, a2a = 0, lat = 0, amin = INFINITY;
    for (int j = 0; j < n; j++) {
        long C = 1, span = 1, smin = 0;
        for (int k = 0; k < axes.n; k++) {
            const mt__plan_axis_place *p = &map->axis[axes.axis[k]];
            int c = p->torus_count[j], a = p->torus_stride[j];
            if (c <= 1) continue;
            C *= c;
            if ((long)c * a > span) span = (long)c * a;
            if (!smin || a < smin) smin = a;
        }
        if (C <= 1) continue;
        /* two axes on one side: a regular lattice when they tile it,
           otherwise costed as the regular one of the same span */
        bool regular = C * smin == span;
        double a = regular ? (double)smin : (double)span / (double)C;
        bool wrap = regular && span == map->slice_dims[j] && map->slice_wrap[j];
        double coef = wrap ? a / (2 * W1) : a * (double)(C - 1) / ((double)C * W1);
        inv += 1 / coef;
        double cut = (double)g / (double)C * (wrap ? 2 : 1) * W1 / a;   /* B/s across a cut */
        double t = (double)g * (double)g / 4 / ((double)X * (double)X) / cut;
        if (t > a2a) a2a = t;
        lat += (wrap ? ceil(C / 2.0) : (double)(C - 1)) * ceil(a) * lv->latency;
        if (a < amin) amin = a;
    }
    if (inv <= 0) return;
    double ag = 1 / inv;
    if (ag > gc->ag) gc->ag = ag;
    /* a2a above is per byte of the group's whole array; V is a device's */
    if (a2a * X > gc->a2a) gc->a2a = a2a * X;
    if (amin / W1 > gc->perm) gc->perm = amin / W1;
    gc->lat_ag += lat;
    gc->lat_ar += 2 * lat;
    if (ceil(amin) * lv->latency > gc->lat_perm) gc->lat_perm = ceil(amin) * lv->latency;
}

/* false when `axes` are not the map's */
static bool group_of(const mt__plan_map *map, mt_axes axes, bool precise, mt__plan_group *gc) {
    memset(gc, 0, sizeof *gc);
    if (axes.n < 0 || axes.n > map->n_axes) return false;
    gc->X = 1;
    for (int k = 0; k < axes.n; k++) {
        if (axes.axis[k] >= map->n_axes) return false;
        for (int l = 0; l < k; l++)
            if (axes.axis[l] == axes.axis[k]) return false;
        gc->X *= map->axis[axes.axis[k]].size;
    }
    if (gc->X <= 1) return true;
    const mt_hardware *hw = map->hw;
    /* the levels it crosses: all NCCL's, and one of them a network */
    bool multi_node = false;
    gc->nccl = true;
    long prev = 1;
    for (int i = 0; i < hw->n_levels; i++) {
        long gi = 1;
        for (int k = 0; k < axes.n; k++) gi *= map->axis[axes.axis[k]].members[i];
        if (gi > prev) {
            multi_node |= network_kind(hw->levels[i].kind);
            gc->nccl &= i != map->torus_level && nccl_hop(&hw->levels[i], false) >= 0;
        }
        prev = gi;
    }
    prev = 1;
    for (int i = 0; i < hw->n_levels; i++) {
        long gi = 1;
        for (int k = 0; k < axes.n; k++) gi *= map->axis[axes.axis[k]].members[i];
        long D = gi / prev;
        if (D > 1) {
            const mt_hw_level *lv = &hw->levels[i];
            if (i == map->torus_level) {
                torus_cost(map, axes, gc->X, (int)gi, gc);
            } else {
                double W = lv->link_bandwidth * lv->links * lv->collective_fraction;
                double ag = (precise ? (double)(D - 1) / (double)D : 1.0) / ((double)prev * W);
                double a2a = (double)(gi - prev) / ((double)gc->X * W);
                if (ag > gc->ag) gc->ag = ag;
                if (a2a > gc->a2a) gc->a2a = a2a;
                if (1 / W > gc->perm) gc->perm = 1 / W;
                gc->lat_a2a += lv->latency;
                if (gc->nccl) {
                    /* the ring's hops whose lowest common level is this one:
                       X / gi instances of it, D - 1 hops in each */
                    double hops = (double)gc->X / (double)gi * (double)(D - 1);
                    gc->lat_ag += hops * nccl_hop(lv, multi_node);
                    gc->lat_ar += 2 * hops * nccl_hop(lv, multi_node);
                } else {
                    gc->lat_ag += lv->latency;
                    gc->lat_ar += lv->latency;
                }
                if (lv->latency > gc->lat_perm) gc->lat_perm = lv->latency;
            }
        }
        prev = gi;
    }
    return true;
}

bool mt__plan_group_make(const mt__plan_map *map, mt_axes axes, mt__plan_group *out) {
    if (!map || !map->hw || !group_of(map, axes, true, out)) {
        out->valid = false;
        return false;
    }
    out->valid = true;
    out->on_cores = out->X > 1;
    const mt_hardware *hw = map->hw;
    long prev = 1;
    for (int i = 0; i < hw->n_levels && out->on_cores; i++) {
        long gi = 1;
        for (int k = 0; k < axes.n; k++) gi *= map->axis[axes.axis[k]].members[i];
        if (gi > prev && hw->levels[i].kind != MT_LINK_THREADS) out->on_cores = false;
        prev = gi;
    }
    return true;
}

double mt__plan_collective_seconds(const mt__plan_map *map, mt__plan_coll kind, mt_axes axes,
                                   double bytes) {
    mt__plan_group gc;
    mt__plan_group_make(map, axes, &gc);
    return mt__plan_group_seconds(&gc, kind, bytes);
}

double mt__plan_group_seconds(const mt__plan_group *gc, mt__plan_coll kind, double bytes) {
    if (!gc->valid) return NAN;
    if (gc->X <= 1 || !(bytes > 0)) return 0;
    double t, lat;
    switch (kind) {
    case MT__PC_ALL_GATHER:
    case MT__PC_REDUCE_SCATTER: t = bytes * gc->ag, lat = gc->lat_ag; break;
    case MT__PC_ALL_REDUCE:     t = 2 * bytes * gc->ag, lat = gc->lat_ar; break;
    case MT__PC_ALL_TO_ALL:     t = bytes * gc->a2a, lat = gc->lat_a2a; break;
    case MT__PC_PERMUTE:        t = bytes * gc->perm, lat = gc->lat_perm; break;
    default: return NAN;
    }
    /* NCCL's rings; its all-to-all and permute are point-to-point sends
       whose level latencies floor them, as everywhere else */
    if (gc->nccl && kind != MT__PC_PERMUTE && kind != MT__PC_ALL_TO_ALL) return lat + t;
    return t > lat ? t : lat;
}

bool mt__plan_copies_on_cores(const mt__plan_map *map, mt_axes axes) {
    mt__plan_group gc;
    return mt__plan_group_make(map, axes, &gc) && gc.on_cores;
}

/* ---- ops and intensities -------------------------------------------------- */

double mt__plan_matmul_peak(const mt_hardware *hw, mt_hw_dtype dtype) {
    double p = dtype >= 0 && dtype < MT_HW_N_DTYPES ? hw->peak_flops[dtype] : 0;
    return p > 0 ? p : hw->peak_flops[MT_HW_BF16];
}

double mt__plan_op_seconds(const mt_hardware *hw, mt__plan_node_class cls, mt_hw_dtype dtype,
                           double flops, double bytes, bool *flop_bound) {
    double tb = bytes / (hw->hbm_bandwidth * hw->hbm_fraction);
    double tf = 0;
    if (cls == MT__PN_MATMUL)
        tf = flops / (mt__plan_matmul_peak(hw, dtype) * hw->gemm_fraction);
    else if (hw->vector_flops > 0)
        tf = flops / hw->vector_flops;
    else if (hw->peak_flops[MT_HW_FP32] > 0)
        tf = flops / hw->peak_flops[MT_HW_FP32];
    if (flop_bound) *flop_bound = tf > 0 && tf >= tb;
    return tf > tb ? tf : tb;
}

double mt__plan_attention_fraction(const mt_hardware *hw, double seq) {
    const int n = hw->n_attention;
    if (n <= 0 || !(seq > 0)) return 1;
    const double *x = hw->attention_seq, *y = hw->attention_fraction;
    if (seq <= x[0]) return y[0];
    if (seq >= x[n - 1]) return y[n - 1];
    int i = 1;
    while (x[i] < seq) i++;
    const double w = log(seq / x[i - 1]) / log(x[i] / x[i - 1]);
    return y[i - 1] + w * (y[i] - y[i - 1]);
}

/* A product's kernel, as cuBLAS picks one (NVIDIA's Matrix Multiplication
 * Background guide, 2.3 and ch. 3): an output tile from the library's set,
 * the large one the hardware file names (256 x 128 either way) and the
 * smaller ones the guide lists, each at its own share of the large tile's
 * rate (TILES[].rate); the tiles run in waves of gemm_units; a product of
 * few tiles may split K over s tiles (split-K, at least SPLIT_K_MIN of K
 * each); and each tile pays a fixed GEMM_K0 of K-steps (its prologue and
 * epilogue), so a tile over k runs at k / (k + K0) of its rate, relative to
 * the large products of k = 4096 that gemm_fraction describes (a longer k
 * at theirs: the table measures none faster); and every kernel costs the
 * file's kernel_overhead besides (mt__plan_node_seconds). The constants
 * here and that overhead are calibrated on OpenXLA's measured H100 table
 * (xla/service/gpu/model/matmul_interpolator_data.h, sm_90, bf16: 72
 * products from 256 to 4096 a side; with them this model is within 8 % on
 * average of every point, 12 % of those of 1024 and more a side:
 * tests/test_plan_cost.c), not on any training run; other chips with a
 * tile in their file take them as cuBLAS's. */
static const struct { double dm, dn, rate; } TILES[] = {
    {1, 1, 1.0},   /* 256 x 128 (and, transposed below, 128 x 256) */
    {2, 1, 0.7},   /* 128 x 128 */
    {2, 2, 0.4},   /* 128 x 64 */
    {4, 2, 0.3},   /* 64 x 64 */
};
#define GEMM_K0 256.0
#define SPLIT_K_MIN 256.0
#define GEMM_K_LARGE 4096.0

/* A tile's share of its rate over a K loop of k steps: the fixed GEMM_K0
 * amortised, relative to the large products' k = GEMM_K_LARGE (a longer
 * k at theirs: the table measures none faster). */
static double k_fraction(double k) {
    return k < GEMM_K_LARGE ? k / (k + GEMM_K0) * (GEMM_K_LARGE + GEMM_K0) / GEMM_K_LARGE : 1;
}

/* The best kernel's share of a large product's rate, for tiles tm x tn. */
static double best_kernel(const mt_hardware *hw, double M, double N, double K, double tm,
                          double tn, double rate) {
    const double units = hw->gemm_units;
    double tiles = ceil(M / tm) * ceil(N / tn), best = 0;
    for (double s = 1; s <= 16 && (s == 1 || K / s >= SPLIT_K_MIN); s *= 2) {
        double k = K / s, slots = ceil(tiles * s / units) * units;
        double fill = (M * N) / (tiles * tm * tn) * (tiles * s) / slots;
        double kf = k_fraction(k);
        if (rate * fill * kf > best) best = rate * fill * kf;
    }
    return best;
}

double mt__plan_gemm_efficiency(const mt_hardware *hw, double M, double N, double K) {
    if (!(hw->gemm_units > 0 && hw->gemm_tile_m > 0 && hw->gemm_tile_n > 0) || !(M >= 1) ||
        !(N >= 1) || !(K >= 1))
        return 1;
    double best = 0;
    for (size_t i = 0; i < sizeof TILES / sizeof TILES[0]; i++) {
        double tm = hw->gemm_tile_m / TILES[i].dm, tn = hw->gemm_tile_n / TILES[i].dn;
        double a = best_kernel(hw, M, N, K, tm, tn, TILES[i].rate);
        double b = best_kernel(hw, M, N, K, tn, tm, TILES[i].rate);
        if (a > best) best = a;
        if (b > best) best = b;
    }
    return best < 1 ? best : 1;
}

/* mt__plan_gemm_efficiency of (M, N, K) on hw through memo (or none). */
static double gemm_efficiency_memo(const mt_hardware *hw, mt__plan_gemm_memo *memo, double M,
                                   double N, double K) {
    if (!memo) return mt__plan_gemm_efficiency(hw, M, N, K);
    /* the shapes are multiples of large powers of 2: mixed by a
       multiplier (Fibonacci hashing), the top 4 bits (M, N, K >= 1 here,
       and below 2^53) */
    const uint64_t h = ((uint64_t)M * 0x9E3779B97F4A7C15u) ^ ((uint64_t)N * 0xC2B2AE3D27D4EB4Fu) ^
                       ((uint64_t)K * 0x165667B19E3779F9u);
    const unsigned at = (unsigned)((h * 0x9E3779B97F4A7C15u) >> 60);
    if (!(memo->m[at] == M && memo->n[at] == N && memo->k[at] == K)) {
        memo->eff[at] = mt__plan_gemm_efficiency(hw, M, N, K);
        memo->m[at] = M, memo->n[at] = N, memo->k[at] = K;
    }
    return memo->eff[at];
}

/* A fused attention kernel (FlashAttention-2, Dao 2023, §3: a thread
 * block holds a block of query rows of one head and loops over the key
 * blocks, skipping those wholly above the causal diagonal) is a product
 * whose K loop is the keys a query row visits: costed by this file's own
 * product model, no constant of its own. Its blocks of gemm_tile_n rows
 * (FA2's 128 on the A100) run in waves of gemm_units, and each pays the
 * per-tile GEMM_K0 over a loop of about keys / 2 (causal: every model
 * here is). So a causal kernel at T = 512 runs at 0.53 of a large
 * product's rate, at 2048 at 0.85, from 8192 on at 1: the rise with T
 * FlashAttention-2's A100 benchmarks show (its abstract: 50-73 % of the
 * theoretical peak, where cuBLAS's large products reach about 80 %). */
double mt__plan_flash_efficiency(const mt_hardware *hw, double rows, double keys) {
    if (!(hw->gemm_units > 0 && hw->gemm_tile_n > 0) || !(rows >= 1) || !(keys >= 1)) return 1;
    const double blocks = ceil(rows / hw->gemm_tile_n);
    const double slots = ceil(blocks / hw->gemm_units) * hw->gemm_units;
    const double loop = keys / 2 > 1 ? keys / 2 : 1;
    return blocks / slots * k_fraction(loop);
}

/* n's FLOPs over its kernel's efficiency (mt__plan_node_flops), the
 * products' efficiencies through memo (or none). */
static double node_flops(const mt_hardware *hw, const mt__plan_node *n,
                         mt__plan_gemm_memo *memo) {
    double flops = n->flops;
    if (n->attention_seq > 0 && hw->n_attention > 0)
        flops /= mt__plan_attention_fraction(hw, n->attention_seq);
    else if (n->attention_keys > 0)
        flops /= mt__plan_flash_efficiency(hw, n->attention_rows, n->attention_keys);
    else if (n->cls == MT__PN_MATMUL && n->gemm_m > 0)   /* attention has no gemm_m */
        flops /= gemm_efficiency_memo(hw, memo, n->gemm_m, n->gemm_n, n->gemm_k);
    return flops;
}

double mt__plan_node_flops(const mt_hardware *hw, const mt__plan_node *n) {
    return node_flops(hw, n, NULL);
}

double mt__plan_node_seconds(const mt_hardware *hw, const mt__plan_node *n, mt_hw_dtype dtype,
                             bool *flop_bound) {
    return mt__plan_node_seconds_memo(hw, n, dtype, NULL, flop_bound);
}

double mt__plan_node_seconds_memo(const mt_hardware *hw, const mt__plan_node *n,
                                  mt_hw_dtype dtype, mt__plan_gemm_memo *memo, bool *flop_bound) {
    double flops = node_flops(hw, n, memo);
    double t = mt__plan_op_seconds(hw, n->cls, dtype, flops, n->bytes, flop_bound);
    return t > 0 ? hw->kernel_overhead + t : 0;
}

mt_hw_dtype mt__plan_dtype_of(mt_precision precision) {
    return precision == MT_PRECISION_BF16 ? MT_HW_BF16 : MT_HW_FP32;
}

double mt__plan_chip_intensity(const mt_hardware *hw, mt_hw_dtype dtype) {
    return mt__plan_matmul_peak(hw, dtype) * hw->gemm_fraction /
           (hw->hbm_bandwidth * hw->hbm_fraction);
}

double mt__plan_level_intensity(const mt_hardware *hw, int level, mt_hw_dtype dtype) {
    if (level < 0 || level >= hw->n_levels) return NAN;
    const mt_hw_level *lv = &hw->levels[level];
    double W;
    if (lv->topology == MT_TOPO_SWITCH) {
        W = lv->link_bandwidth * lv->links;
    } else {
        double per = lv->links / (2.0 * (lv->topology == MT_TOPO_RING ? 1 : lv->n_dims));
        W = 2 * lv->link_bandwidth * (per > 0 ? per : 1);
    }
    return mt__plan_matmul_peak(hw, dtype) * hw->gemm_fraction / (W * lv->collective_fraction);
}

double mt__plan_axes_intensity(const mt__plan_map *map, mt_axes axes, mt_hw_dtype dtype,
                               bool precise) {
    mt__plan_group gc;
    if (!map || !map->hw || !group_of(map, axes, precise, &gc)) return NAN;
    if (gc.X <= 1) return 0;
    return mt__plan_matmul_peak(map->hw, dtype) * map->hw->gemm_fraction * gc.ag;
}
