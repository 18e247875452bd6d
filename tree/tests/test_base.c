/* test_base.c — status table, error messages, Philox known answers, RNG moments. */
#include "meshtrain.h"
#include "harness.h"

MT_TEST(status_names_and_messages) {
    MT_CHECK(strcmp(mt_status_name(MT_EINVAL), "MT_EINVAL") == 0, "name of MT_EINVAL");
    MT_CHECK(strcmp(mt_status_name(-999), "MT_E?") == 0, "unknown code");
    MT_CHECK(strcmp(mt_status_text(MT_ECHECKSUM), "checksum mismatch") == 0, "text");
    mt_status s = mt_fail(MT_ESHAPE, "tensor '%s' is (%d,%d)", "x", 2, 3);
    MT_CHECK(s == MT_ESHAPE, "mt_fail returns its code");
    MT_CHECK(strcmp(mt_errmsg(), "tensor 'x' is (2,3)") == 0, "message: %s", mt_errmsg());
    mt_errclear();
    MT_CHECK(mt_errmsg()[0] == '\0', "cleared");
}

/* Known-answer vectors of Philox-4x32-10 from the Random123 distribution. */
MT_TEST(philox_known_answers) {
    struct { uint64_t key, hi, lo; uint32_t want[4]; } kat[] = {
        {0, 0, 0, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
        {0xffffffffffffffffull, 0xffffffffffffffffull, 0xffffffffffffffffull,
         {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
        {0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull,
         {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
    };
    for (size_t k = 0; k < sizeof kat / sizeof kat[0]; k++) {
        uint32_t out[4];
        mt_philox4x32(kat[k].key, kat[k].hi, kat[k].lo, out);
        for (int j = 0; j < 4; j++)
            MT_CHECK(out[j] == kat[k].want[j], "vector %zu word %d: %08x, want %08x", k, j,
                     out[j], kat[k].want[j]);
    }
}

MT_TEST(rng_moments_and_determinism) {
    double s = 0, s2 = 0, u_min = 1, u_max = 0;
    int n = 200000;
    for (int i = 0; i < n; i++) {
        double x = mt_rng_normal(7, 3, (uint64_t)i);
        s += x;
        s2 += x * x;
        double u = mt_rng_uniform(7, 3, (uint64_t)i);
        if (u < u_min) u_min = u;
        if (u > u_max) u_max = u;
    }
    MT_CHECK(fabs(s / n) < 0.01, "normal mean %g", s / n);
    MT_CHECK(fabs(s2 / n - 1) < 0.02, "normal variance %g", s2 / n);
    MT_CHECK(u_min >= 0 && u_max < 1 && u_min < 1e-3 && u_max > 0.999, "uniform range [%g, %g]",
             u_min, u_max);
    /* a value depends only on (seed, stream, index) */
    MT_CHECK(mt_rng_normal(7, 3, 12345) == mt_rng_normal(7, 3, 12345), "deterministic");
    MT_CHECK(mt_rng_normal(7, 3, 12345) != mt_rng_normal(8, 3, 12345), "seed matters");
    MT_CHECK(mt_rng_normal(7, 3, 12345) != mt_rng_normal(7, 4, 12345), "stream matters");
    MT_CHECK(mt_hash_name("wte") != mt_hash_name("wpe"), "names hash apart");
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
