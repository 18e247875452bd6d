/* test_plan_timing.c — the planner's op and collective times (timing.c)
 * against the scaling book's worked numbers (../shared/PLANNER.md 2.2, 2.3),
 * with every level's collective_fraction set to 1 (the book's ideal
 * figures). (The two streams are test_plan_step's.) */
#include "meshtrain.h"
#include "harness.h"
#include "plan/timing.h"

static mt_hardware *ideal(const char *name) {
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find(name, &hw, NULL, 0));
    for (int i = 0; i < hw->n_levels; i++) hw->levels[i].collective_fraction = 1;
    hw->gemm_fraction = hw->hbm_fraction = 1;
    return hw;
}

static double coll(const mt_hardware *hw, const char *spec, int n, const char *axes,
                   mt__plan_coll kind, double bytes) {
    mt_mesh *m = NULL;
    MT_CHECK_OK(mt_mesh_create(spec, n, &m));
    mt_axes ax;
    MT_CHECK_OK(mt_mesh_axes(m, axes, &ax));
    double t = mt__plan_coll_time(hw, m, kind, ax, bytes);
    mt_mesh_free(m);
    return t;
}

/* "8×H100, AllGather(bf16[B_X,F]) with B=1024, F=16384: ≈ 2BF/450e9 = 74.6 µs;
 * precise ×7/8 = 65.2 µs"; AllReduce "2×". */
MT_TEST(h100_node_all_gather) {
    mt_hardware *hw = ideal("h100-sxm");
    double V = 2.0 * 1024 * 16384;
    double ag = coll(hw, "data=8", 8, "data", MT__PC_ALL_GATHER, V);
    MT_CHECK_CLOSE(ag * 1e6, 65.2, 0.002, "all-gather %.2f us", ag * 1e6);
    double ar = coll(hw, "data=8", 8, "data", MT__PC_ALL_REDUCE, V);
    MT_CHECK_CLOSE(ar, 2 * ag, 1e-9, "all-reduce %.2f us", ar * 1e6);
    /* 16 GPUs over 2 nodes: the node's 8 NICs carry (D-1)/D = 1/2 of V at
       8 x 50e9 B/s, under NVLink's 7/8 V / 450e9 */
    double two = coll(hw, "data=16", 16, "data", MT__PC_ALL_GATHER, V);
    MT_CHECK_CLOSE(two, V * 7 / 8 / 450e9, 1e-6, "16 GPUs %.2f us", two * 1e6);
    /* the outer axis alone (one GPU a node): one NIC, 1/2 V at 50e9 */
    double outer = coll(hw, "data=2,tensor=8", 16, "data", MT__PC_ALL_GATHER, V);
    MT_CHECK_CLOSE(outer, V / 2 / 50e9, 1e-6, "across nodes %.2f us", outer * 1e6);
    /* a group of one moves nothing */
    MT_CHECK(coll(hw, "data=1,tensor=8", 8, "data", MT__PC_ALL_REDUCE, V) == 0, "group of one");
    mt_hardware_free(hw);
}

/* "v5e ... AllGather_Y of bf16[E_Y,F] with E=2048, F=8192 (34 MB total):
 * ideal 34e6/9e10 ≈ 377 µs" (an axis of 4 on the torus, both directions of
 * one dim: W_bidi = 9e10); "latency-bound AllGather_X of bf16[128]: 2 hops ≈
 * 2 µs" (v4p, an axis of 4, 1 µs a hop). */
MT_TEST(tpu_ring_all_gather) {
    mt_hardware *v5e = ideal("tpu-v5e");
    double V = 2.0 * 2048 * 8192;
    double t = coll(v5e, "x=8,y=4", 32, "y", MT__PC_ALL_GATHER, V);
    MT_CHECK_CLOSE(t * 1e6, V / 9e10 * 1e6, 1e-6, "v5e AG_Y %.1f us (book ~377)", t * 1e6);
    MT_CHECK_CLOSE(t * 1e6, 377, 0.02, "v5e AG_Y %.1f us against the book's 377", t * 1e6);
    mt_hardware *v4p = ideal("tpu-v4p");
    /* v4p: AllGather_X of [B_X, D_Y], B=1024, D=4096 bf16 = 2BD/(9e10·4) = 23.3 µs */
    double a = coll(v4p, "x=16,z=4", 64, "z", MT__PC_ALL_GATHER, 2.0 * 1024 * 4096 / 4);
    MT_CHECK_CLOSE(a * 1e6, 23.3, 0.002, "v4p AG %.2f us", a * 1e6);
    double lat = coll(v4p, "x=16,z=4", 64, "z", MT__PC_ALL_GATHER, 2.0 * 128);
    MT_CHECK_CLOSE(lat * 1e6, 2.0, 1e-6, "latency-bound %.3f us", lat * 1e6);
    mt_hardware_free(v5e);
    mt_hardware_free(v4p);
}

/* The roofline: H100's critical intensity 9.9e14 / 3.35e12 ≈ 295.5 FLOPs a
 * byte (the book's "≈ 298" with 1e15): a product of that intensity is
 * equally bound both ways; above it FLOPs bind, below it bytes. */
MT_TEST(roofline_crossover) {
    mt_hardware *hw = ideal("h100-sxm");
    const double crit = 9.9e14 / 3.35e12;
    bool fb;
    double bytes = 1e9;
    double t = mt__plan_op_time(hw, MT_PRECISION_BF16, true, 2 * crit * bytes, bytes, &fb);
    MT_CHECK(fb, "intensity 2x critical: flop-bound");
    MT_CHECK_CLOSE(t, 2 * crit * bytes / 9.9e14, 1e-12, "flop time");
    t = mt__plan_op_time(hw, MT_PRECISION_BF16, true, 0.5 * crit * bytes, bytes, &fb);
    MT_CHECK(!fb, "intensity half critical: memory-bound");
    MT_CHECK_CLOSE(t, bytes / 3.35e12, 1e-12, "byte time");
    /* an element-wise op is costed by its bytes whatever its FLOPs */
    t = mt__plan_op_time(hw, MT_PRECISION_BF16, false, 1e15, bytes, &fb);
    MT_CHECK_CLOSE(t, bytes / 3.35e12, 1e-12, "vector op");
    mt_hardware_free(hw);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
