/*
 * test_moe_route.c — the MoE router on one device (src/ops/moe.h) against
 * tests/moe_ref.h's float64 reference and hand cases (../shared/MOE.md §1):
 *
 *  - the scores, selection and gates for softmax and sigmoid, renormalised
 *    or not, with a bias and group-limited routing; ties go to the lower
 *    expert (and group); the bias only chooses;
 *  - the softmax over rows of 1 to 1500 experts (mt_moe_softmax_rows), split
 *    or not, with and without scores, and the top-k of 300 experts;
 *  - the router's settings refused with messages.
 * The gradients against central finite differences: test_moe_layer.c.
 */
#include "meshtrain.h"
#include "harness.h"
#include "moe_ref.h"

#include <stdlib.h>
#include <string.h>

/* scores, ids and gates of T random rows against the reference */
static void check_route(const char *what, mt_moe_route_params p, bool with_bias) {
    const int64_t T = p.T, E = p.E, k = p.k;
    uint64_t st = 42 + (uint64_t)E;
    float *u = malloc((size_t)(T * E) * sizeof *u), *s = malloc((size_t)(T * E) * sizeof *s);
    float *g = malloc((size_t)(T * k) * sizeof *g), *b = malloc((size_t)E * sizeof *b);
    int32_t *ids = malloc((size_t)(T * k) * sizeof *ids), want[64];
    double ud[64], sd[64], gd[64];
    ref_fill(u, T * E, 3.0, &st);
    ref_fill(b, E, 0.3, &st);
    MT_CHECK_OK(mt_moe_route_check(&p));
    mt_moe_route_fwd(&p, u, with_bias ? b : NULL, s, ids, g);
    for (int64_t t = 0; t < T; t++) {
        for (int64_t i = 0; i < E; i++) ud[i] = u[t * E + i];
        ref_scores(sd, ud, E, p.score);
        for (int64_t i = 0; i < E; i++)
            MT_CHECK_CLOSE(s[t * E + i], sd[i], 1e-6, "%s: score [%lld,%lld]", what,
                           (long long)t, (long long)i);
        ref_select(want, sd, with_bias ? b : NULL, &p);
        for (int64_t j = 0; j < k; j++)
            MT_CHECK(ids[t * k + j] == want[j], "%s: row %lld slot %lld chose expert %d, the "
                     "reference %d", what, (long long)t, (long long)j, ids[t * k + j], want[j]);
        ref_gates(gd, sd, want, &p);
        for (int64_t j = 0; j < k; j++)
            MT_CHECK_CLOSE(g[t * k + j], gd[j], 1e-6, "%s: gate [%lld,%lld]", what,
                           (long long)t, (long long)j);
    }
    free(u), free(s), free(g), free(b), free(ids);
}

MT_TEST(route_forward) {
    const mt_moe_route_params base = {.T = 64, .E = 8, .k = 2, .route_scale = 1.0f};
    mt_moe_route_params p = base;
    p.renorm = true;
    check_route("softmax, renormalised (Mixtral)", p, false);
    p.renorm = false;
    check_route("softmax, top-k of the full softmax (Qwen2-MoE)", p, false);
    p.k = 1;
    check_route("softmax, top-1 (Switch)", p, false);
    p = base;
    p.score = MT_MOE_SIGMOID, p.renorm = true, p.k = 4, p.route_scale = 2.5f;
    check_route("sigmoid, bias, scale 2.5", p, true);
    p.E = 16, p.groups = 4, p.groups_kept = 2;
    check_route("sigmoid, bias, 4 groups keep 2 (DeepSeek-V3)", p, true);
    p.groups_kept = 4, p.k = 8;
    check_route("sigmoid, every group kept", p, true);
    p = base;
    p.E = 12, p.groups = 3, p.groups_kept = 1, p.k = 3, p.renorm = true;
    check_route("softmax, 3 groups keep 1", p, true);
}

MT_TEST(route_ties_lower_index) {
    /* equal logits: experts 0, 1, ... */
    mt_moe_route_params p = {.T = 1, .E = 4, .k = 2, .renorm = true, .route_scale = 1.0f};
    float u[8] = {0.5f, 0.5f, 0.5f, 0.5f}, s[8], g[4];
    int32_t ids[4];
    mt_moe_route_fwd(&p, u, NULL, s, ids, g);
    MT_CHECK(ids[0] == 0 && ids[1] == 1, "equal scores chose %d, %d; want 0, 1", ids[0], ids[1]);
    /* [1,3,3,1], k = 3: the two 3s in index order, then the first 1 */
    const float u2[4] = {1, 3, 3, 1};
    p.k = 3;
    mt_moe_route_fwd(&p, u2, NULL, s, ids, g);
    MT_CHECK(ids[0] == 1 && ids[1] == 2 && ids[2] == 0, "[1,3,3,1] top-3 chose %d %d %d; want "
             "1 2 0", ids[0], ids[1], ids[2]);
    /* two groups of equal sums, one kept: the lower group */
    const float u3[4] = {2, 1, 1, 2};
    p.k = 2, p.groups = 2, p.groups_kept = 1;
    mt_moe_route_fwd(&p, u3, NULL, s, ids, g);
    MT_CHECK(ids[0] == 0 && ids[1] == 1, "tied groups chose %d %d; want group 0: 0 1", ids[0],
             ids[1]);
}

MT_TEST(route_bias_only_chooses) {
    /* the bias turns the choice from expert 0 to expert 2; the gates stay
     * the unbiased scores of the experts chosen */
    mt_moe_route_params p = {.T = 1, .E = 3, .k = 1, .score = MT_MOE_SIGMOID,
                             .route_scale = 1.0f};
    const float u[3] = {2.0f, -1.0f, 1.0f}, b[3] = {0.0f, 0.0f, 0.5f};
    float s[3], g[1];
    int32_t ids[1];
    mt_moe_route_fwd(&p, u, b, s, ids, g);
    MT_CHECK(ids[0] == 2, "biased choice %d; want 2 (0.731 + 0.5 > 0.881)", ids[0]);
    MT_CHECK_CLOSE(g[0], 1.0 / (1.0 + exp(-1.0)), 1e-7, "the gate of expert 2, unbiased");
    p.renorm = true, p.route_scale = 2.5f;
    mt_moe_route_fwd(&p, u, b, s, ids, g);
    MT_CHECK_CLOSE(g[0], 2.5, 1e-7, "one gate renormalised, times the route scale");
}

/* The router's softmax over a block of rows (mt_moe_softmax_rows) at E
 * from 1 to past a stack piece (1024 floats, so rows straddle pieces and
 * one row spans two) and T past a 64-row block: scores, lse and the
 * z-loss's gradient rows against the float64 softmax; without scores (the
 * exps taken piecewise, twice) the same lse and rows bit for bit; rows run
 * in two calls the same bits as in one. And the top-k of many experts
 * (one pass, insertion) against the reference's sort. */
MT_TEST(softmax_rows_long_and_split) {
    static const int64_t Es[] = {1, 5, 8, 300, 1500};
    for (size_t c = 0; c < sizeof Es / sizeof *Es; c++) {
        const int64_t E = Es[c], T = 70, n = T * E;
        uint64_t st = 11 + (uint64_t)E;
        float *u = malloc((size_t)n * sizeof *u), *s = malloc((size_t)n * sizeof *s);
        float *s2 = malloc((size_t)n * sizeof *s2), *z = malloc((size_t)n * sizeof *z);
        float *z2 = malloc((size_t)n * sizeof *z2), *z3 = malloc((size_t)n * sizeof *z3);
        double *ud = malloc((size_t)E * sizeof *ud), *sd = malloc((size_t)E * sizeof *sd);
        double lse[70], lse2[70], lse3[70];
        ref_fill(u, n, 4.0, &st);
        ref_fill(z, n, 1.0, &st);   /* acc adds to what is there */
        memcpy(z2, z, (size_t)n * sizeof *z);
        memcpy(z3, z, (size_t)n * sizeof *z);
        const double zf = 0.25;
        mt_moe_softmax_rows(u, T, E, s, zf, lse, z, true);
        for (int64_t t = 0; t < T; t++) {
            for (int64_t i = 0; i < E; i++) ud[i] = u[t * E + i];
            ref_scores(sd, ud, E, MT_MOE_SOFTMAX);
            double sum = 0;
            for (int64_t i = 0; i < E; i++) sum += exp(ud[i]);
            MT_CHECK_CLOSE(lse[t], log(sum), 1e-6, "E=%lld: lse of row %lld", (long long)E,
                           (long long)t);
            for (int64_t i = 0; i < E; i++) {
                MT_CHECK_CLOSE(s[t * E + i], sd[i], 1e-6 * (sd[i] > 1e-3 ? sd[i] : 1e-3),
                               "E=%lld: score [%lld,%lld]", (long long)E, (long long)t,
                               (long long)i);
                const double want = z2[t * E + i] + zf * log(sum) * sd[i];
                MT_CHECK_CLOSE(z[t * E + i], want, 2e-6, "E=%lld: z row [%lld,%lld]",
                               (long long)E, (long long)t, (long long)i);
            }
        }
        mt_moe_softmax_rows(u, T, E, NULL, zf, lse2, z2, true);
        MT_CHECK(memcmp(lse, lse2, sizeof lse) == 0 && memcmp(z, z2, (size_t)n * sizeof *z) == 0,
                 "E=%lld: without scores the lse or the z rows differ", (long long)E);
        mt_moe_softmax_rows(u, 17, E, s2, zf, lse3, z3, true);
        mt_moe_softmax_rows(u + 17 * E, T - 17, E, s2 + 17 * E, zf, lse3 + 17, z3 + 17 * E, true);
        MT_CHECK(memcmp(s, s2, (size_t)n * sizeof *s) == 0 && memcmp(lse, lse3, sizeof lse) == 0 &&
                 memcmp(z, z3, (size_t)n * sizeof *z) == 0,
                 "E=%lld: rows run in two calls differ from one call", (long long)E);
        free(u), free(s), free(s2), free(z), free(z2), free(z3), free(ud), free(sd);
    }
    /* top-8 of 300 experts, with a bias and with many equal logits */
    mt_moe_route_params p = {.T = 40, .E = 300, .k = 8, .renorm = true, .route_scale = 1.0f};
    float *u = malloc(40 * 300 * sizeof *u), *s = malloc(40 * 300 * sizeof *s), b[300], g[320];
    int32_t ids[320], want[8];
    double *sd = malloc(300 * sizeof *sd);
    uint64_t st = 5;
    ref_fill(u, 40 * 300, 2.0, &st);
    ref_fill(b, 300, 0.01, &st);
    for (int64_t i = 0; i < 20 * 300; i += 3) u[i] = 1.0f;   /* ties in the first 20 rows */
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        mt_moe_route_fwd(&p, u, with_bias ? b : NULL, s, ids, g);
        for (int64_t t = 0; t < p.T; t++) {
            for (int64_t i = 0; i < 300; i++) sd[i] = s[t * 300 + i];   /* the kernel's scores */
            ref_select(want, sd, with_bias ? b : NULL, &p);
            for (int64_t j = 0; j < 8; j++)
                MT_CHECK(ids[t * 8 + j] == want[j], "top-8 of 300%s: row %lld slot %lld chose "
                         "%d, the reference %d", with_bias ? " with a bias" : "", (long long)t,
                         (long long)j, ids[t * 8 + j], want[j]);
        }
    }
    free(u), free(s), free(sd);
}

MT_TEST(route_settings_refused) {
    mt_moe_route_params p = {.T = 4, .E = 8, .k = 9, .route_scale = 1.0f};
    MT_CHECK_FAILS(mt_moe_route_check(&p), MT_EINVAL, "top-k 9", "--moe-top-k");
    p.k = 2, p.route_scale = 0.0f;
    MT_CHECK_FAILS(mt_moe_route_check(&p), MT_EINVAL, "route scale 0");
    p.route_scale = 1.0f, p.groups = 3, p.groups_kept = 1;
    MT_CHECK_FAILS(mt_moe_route_check(&p), MT_EINVAL, "3 groups", "dividing E");
    p.groups = 4, p.groups_kept = 3;
    MT_CHECK_FAILS(mt_moe_route_check(&p), MT_EINVAL, "3 kept", "dividing k");
    p.groups = 4, p.groups_kept = 1, p.k = 4;   /* one group of 2 experts cannot give 4 */
    MT_CHECK_FAILS(mt_moe_route_check(&p), MT_EINVAL, "cannot give top-4");
    p.groups = 0, p.groups_kept = 2;
    MT_CHECK_FAILS(mt_moe_route_check(&p), MT_EINVAL, "2 groups kept");
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
