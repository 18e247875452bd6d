/* test_plan_timing.c — the roofline the step model costs ops on (timing.c)
 * against the scaling book's critical intensity (../shared/PLANNER.md 2.2),
 * with the achievable fractions set to 1. (The collectives are
 * test_plan_cost's, the two streams test_plan_step's.) */
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
