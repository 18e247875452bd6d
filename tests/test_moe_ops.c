/*
 * test_moe_ops.c — the MoE kernels on one device (src/ops/moe.h) against
 * tests/moe_ref.h's float64 reference and hand tables (../shared/MOE.md §7;
 * the router's own: test_moe_route.c):
 *
 *  - the counts (Σ = T·k), MaxVio, the bias update (a hand table, Σ Δb = 0);
 *  - the aux loss = α at forced uniform routing, sequence- and batch-wise,
 *    its value against the reference, and split over devices the shares
 *    summing to the one-device loss; the z-loss's value;
 *  - the stable sort (a hand table), the permutation test vectors
 *    ([2,3,1,4] -> [0,1,5,2,3,4,6,7,8,9], [3,7]; zero counts);
 *  - capacity ⌈(T·k/E)·cf⌉ and the dropped set under either policy (hand
 *    tables, and a layer against a double reference that drops by counting);
 *  - dispatch∘combine with gates 1/k (k = 1, 2, 4, 8) returns the input
 *    bitwise, and so does its backward;
 *  - the grouped product and its backward against a naive double loop,
 *    zero-row groups included;
 *  - the router's settings refused with messages.
 * The gradients against central finite differences: test_moe_layer.c.
 */
#include "meshtrain.h"
#include "harness.h"
#include "moe_ref.h"

#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Balancing                                                                 */
/* ======================================================================== */

MT_TEST(counts_maxvio_bias) {
    const int32_t ids[12] = {0, 1, 0, 2, 0, 3, 0, 1, 2, 1, 0, 3};   /* S 2, L 3, k 2 */
    int32_t c[8];
    mt_moe_counts(c, ids, 2, 3, 2, 4);
    const int32_t want[8] = {3, 1, 1, 1, 2, 2, 1, 1};
    int32_t sum = 0;
    for (int i = 0; i < 8; i++) {
        MT_CHECK(c[i] == want[i], "counts[%d] = %d, want %d", i, c[i], want[i]);
        sum += c[i];
    }
    MT_CHECK(sum == 2 * 3 * 2, "Σ counts = %d, want S·L·k = 12", sum);
    const int32_t c2[4] = {4, 1, 1, 2}, zero[4] = {0};
    MT_CHECK_CLOSE(mt_moe_maxvio(c2, 4), 1.0, 1e-12, "MaxVio of [4,1,1,2] (mean 2)");
    MT_CHECK_CLOSE(mt_moe_maxvio(zero, 4), 0.0, 1e-12, "MaxVio of no tokens");
    /* [4,1,1,2], mean 2: signs [-1,1,1,0], centred by 1/4 */
    float b[4] = {0.5f, 0, 0, -0.5f};
    const float gamma = 1e-3f;
    mt_moe_bias_update(b, c2, 4, gamma);
    const double dwant[4] = {-1.25, 0.75, 0.75, -0.25}, b0[4] = {0.5, 0, 0, -0.5};
    double dsum = 0;
    for (int i = 0; i < 4; i++) {
        MT_CHECK_CLOSE(b[i] - b0[i], gamma * dwant[i], 1e-7, "bias[%d]'s update (b0 rounds)", i);
        dsum += (double)b[i] - b0[i];
    }
    MT_CHECK(fabs(dsum) < 1e-7, "Σ Δb = %g, want 0 (centred)", dsum);
    /* a larger one: 37 experts of random counts, the updates sum to 0 */
    uint64_t st = 7;
    int32_t c3[37];
    float b3[37] = {0};
    for (int i = 0; i < 37; i++) c3[i] = (int32_t)(10 + 9 * ref_rand(&st));
    mt_moe_bias_update(b3, c3, 37, 1e-3f);
    dsum = 0;
    for (int i = 0; i < 37; i++) dsum += b3[i];
    MT_CHECK(fabs(dsum) < 37 * 1e-3 * 1e-6, "Σ Δb over 37 experts = %g, want 0", dsum);
}

MT_TEST(aux_loss_balanced_is_alpha) {
    /* uniform scores (logits 0) and round-robin routing: every f_i = P_i =
     * 1/E, the loss exactly α, batch-wise and per sequence */
    for (int kind = 0; kind < 2; kind++)
        for (int64_t S = 1; S <= 2; S++) {
            const int64_t T = 16, E = 8, k = 2, L = T / S;
            mt_moe_route_params p = {.T = T, .E = E, .k = k, .score = (mt_moe_score)kind,
                                     .route_scale = 1.0f};
            float u[16 * 8] = {0}, s[16 * 8], g[32];
            int32_t ids[32], c[16];
            mt_moe_route_fwd(&p, u, NULL, s, ids, g);
            for (int64_t r = 0; r < T * k; r++) ids[r] = (int32_t)(r % E);
            mt_moe_counts(c, ids, S, L, k, E);
            const double alpha = 1e-2;
            const double loss = mt_moe_aux_loss(&p, s, c, S, L, L, alpha, NULL, false);
            MT_CHECK_CLOSE(loss, alpha, 1e-12, "aux loss at perfect balance, %s, S=%lld",
                           kind ? "sigmoid" : "softmax", (long long)S);
        }
}

MT_TEST(aux_and_z_loss_values) {
    for (int kind = 0; kind < 2; kind++) {
        const int64_t S = 3, L = 8, T = S * L, E = 6, k = 2;
        mt_moe_route_params p = {.T = T, .E = E, .k = k, .score = (mt_moe_score)kind,
                                 .renorm = true, .route_scale = 1.0f};
        uint64_t st = 3;
        float u[24 * 6], s[24 * 6], g[48], ds[24 * 6], ds2[24 * 6];
        double ud[24 * 6];
        int32_t ids[48], c[3 * 6];
        ref_fill(u, T * E, 2.0, &st);
        for (int64_t i = 0; i < T * E; i++) ud[i] = u[i];
        mt_moe_route_fwd(&p, u, NULL, s, ids, g);
        mt_moe_counts(c, ids, S, L, k, E);
        const double a = mt_moe_aux_loss(&p, s, c, S, L, L, 0.1, ds, false);
        MT_CHECK_CLOSE(a, ref_aux(&p, ud, ids, S, L, 0.1), 1e-6, "aux loss (%s)",
                       kind ? "sigmoid" : "softmax");
        /* rows of each sequence split over two devices, the counts whole:
         * the shares sum to the loss, each row's gradient the same */
        double shares = 0;
        for (int dev = 0; dev < 2; dev++) {
            float sl[12 * 6], dsl[12 * 6];
            for (int64_t q = 0; q < S; q++)
                memcpy(sl + q * 4 * E, s + (q * L + dev * 4) * E, 4 * E * sizeof *s);
            shares += mt_moe_aux_loss(&p, sl, c, S, 4, L, 0.1, dsl, false);
            for (int64_t q = 0; q < S; q++)
                memcpy(ds2 + (q * L + dev * 4) * E, dsl + q * 4 * E, 4 * E * sizeof *s);
        }
        MT_CHECK_CLOSE(shares, a, 1e-12, "two devices' shares of the aux loss");
        MT_CHECK(memcmp(ds, ds2, sizeof ds) == 0, "split rows' aux gradient differs");
        const double z = mt_moe_z_loss(u, T, E, 1e-3, NULL, false);
        MT_CHECK_CLOSE(z, ref_z(ud, T, E, 1e-3), 1e-9, "z-loss");
    }
}

/* ======================================================================== */
/* Dispatch and combine                                                      */
/* ======================================================================== */

MT_TEST(sort_stable_by_expert) {
    /* pairs 0..5 at experts 2 0 | 0 1 | 2 0, E = 4 (expert 3 empty) */
    const int32_t ids[6] = {2, 0, 0, 1, 2, 0};
    int32_t order[6], pos[6], c[4];
    mt_moe_sort(order, pos, c, ids, 3, 2, 4);
    const int32_t wo[6] = {1, 2, 5, 3, 0, 4}, wp[6] = {4, 0, 1, 3, 5, 2}, wc[4] = {3, 1, 2, 0};
    for (int i = 0; i < 6; i++)
        MT_CHECK(order[i] == wo[i] && pos[i] == wp[i], "order[%d] %d pos[%d] %d; want %d, %d",
                 i, order[i], i, pos[i], wo[i], wp[i]);
    for (int i = 0; i < 4; i++) MT_CHECK(c[i] == wc[i], "counts[%d] %d, want %d", i, c[i], wc[i]);
}

MT_TEST(permute_test_vectors) {
    struct { int P, el; int32_t counts[8]; int n; int32_t idx[16], sizes[4]; } v[] = {
        /* torchtitan's: [r0e0, r0e1, r1e0, r1e1] */
        {2, 2, {2, 3, 1, 4}, 10, {0, 1, 5, 2, 3, 4, 6, 7, 8, 9}, {3, 7}},
        {2, 2, {0, 3, 2, 0}, 5, {3, 4, 0, 1, 2}, {2, 3}},
        {2, 2, {0, 0, 0, 0}, 0, {0}, {0, 0}},
        /* three sources, two experts: e0 gets r0 [0], r2 [4,5]; e1 r0 [1,2], r1 [3] */
        {3, 2, {1, 2, 0, 1, 2, 0}, 6, {0, 4, 5, 1, 2, 3}, {3, 3}},
    };
    for (size_t c = 0; c < sizeof v / sizeof v[0]; c++) {
        int32_t idx[16] = {0}, sizes[4] = {0};
        mt_moe_permute_indices(idx, sizes, v[c].counts, v[c].P, v[c].el);
        for (int i = 0; i < v[c].n; i++)
            MT_CHECK(idx[i] == v[c].idx[i], "vector %zu: idx[%d] = %d, want %d", c, i, idx[i],
                     v[c].idx[i]);
        for (int e = 0; e < v[c].el; e++)
            MT_CHECK(sizes[e] == v[c].sizes[e], "vector %zu: sizes[%d] = %d, want %d", c, e,
                     sizes[e], v[c].sizes[e]);
        /* gather then scatter back: the rows where they were */
        float in[16 * 3], mid[16 * 3], back[16 * 3];
        for (int i = 0; i < v[c].n * 3; i++) in[i] = (float)i;
        mt_moe_gather_rows(mid, in, idx, v[c].n, 3);
        for (int r = 0; r < v[c].n; r++)
            MT_CHECK(mid[r * 3 + 1] == in[idx[r] * 3 + 1], "vector %zu: gathered row %d", c, r);
        mt_moe_scatter_rows(back, mid, idx, v[c].n, 3, false);
        MT_CHECK(memcmp(in, back, (size_t)v[c].n * 3 * sizeof *in) == 0,
                 "vector %zu: scatter is not the gather's inverse", c);
    }
}

MT_TEST(dispatch_combine_identity) {
    /* gates 1/k and identity experts: out = x bitwise, and the backward of
     * dout = x gives dx = x bitwise (Σ of k halvings is exact) */
    const int64_t T = 13, D = 5, E = 10;
    for (int64_t k = 1; k <= 8; k *= 2) {
        mt_moe_route_params p = {.T = T, .E = E, .k = k, .route_scale = 1.0f};
        uint64_t st = 11 + (uint64_t)k;
        float x[13 * 5], u[13 * 10], s[13 * 10], g[13 * 8], xs[104 * 5], out[13 * 5];
        float dy[104 * 5], dx[13 * 5], dg[13 * 8];
        int32_t ids[13 * 8], order[104], pos[104], c[10];
        ref_fill(x, T * D, 1.0, &st);
        ref_fill(u, T * E, 1.0, &st);
        mt_moe_route_fwd(&p, u, NULL, s, ids, g);
        for (int64_t r = 0; r < T * k; r++) g[r] = 1.0f / (float)k;
        mt_moe_sort(order, pos, c, ids, T, k, E);
        mt_moe_dispatch_fwd(xs, x, order, T * k, k, D);
        mt_moe_combine_fwd(out, xs, g, pos, T, k, D, false);
        MT_CHECK(memcmp(out, x, sizeof x) == 0, "k=%lld: dispatch then combine changed x",
                 (long long)k);
        mt_moe_combine_bwd_dy(dy, x, g, order, T * k, k, D, false);
        mt_moe_combine_bwd_dgates(dg, x, xs, pos, T, k, D, false);
        mt_moe_dispatch_bwd(dx, dy, pos, T, k, D, false);
        MT_CHECK(memcmp(dx, x, sizeof x) == 0, "k=%lld: their backward changed x",
                 (long long)k);
        /* every gate's gradient is ⟨x_t, x_t⟩ */
        for (int64_t t = 0; t < T; t++) {
            double n2 = 0;
            for (int64_t d = 0; d < D; d++) n2 += (double)x[t * D + d] * x[t * D + d];
            for (int64_t j = 0; j < k; j++)
                MT_CHECK_CLOSE(dg[t * k + j], n2, 1e-6, "dgate [%lld,%lld]", (long long)t,
                               (long long)j);
        }
    }
}

/* combine and dispatch's backward against their element-at-a-time sums
 * (each in double, in slot order, rounded once), bit for bit: rows past
 * the kernels' 256-element chunk (D = 300), dropped pairs (pos -1), gates
 * of any value, written and added. */
MT_TEST(slot_sums_are_the_elementwise_ones) {
    enum { T = 7, K = 3, D = 300, N = T * K };
    static float y[N * D], out[T * D], dx[T * D], base[T * D];
    float g[N];
    int32_t pos[N];
    uint64_t st = 21;
    ref_fill(y, N * D, 2.0, &st), ref_fill(g, N, 1.0, &st), ref_fill(base, T * D, 1.0, &st);
    for (int64_t r = 0; r < N; r++) pos[r] = r % 4 == 3 ? -1 : (int32_t)((r * 5) % N);
    for (int acc = 0; acc < 2; acc++) {
        memcpy(out, base, sizeof out), memcpy(dx, base, sizeof dx);
        mt_moe_combine_fwd(out, y, g, pos, T, K, D, acc);
        mt_moe_dispatch_bwd(dx, y, pos, T, K, D, acc);
        for (int64_t t = 0; t < T; t++)
            for (int64_t d = 0; d < D; d++) {
                double c = 0, s = 0;
                for (int64_t j = 0; j < K; j++) {
                    const int32_t p = pos[t * K + j];
                    if (p < 0) continue;
                    c += (double)g[t * K + j] * (double)y[p * D + d];
                    s += (double)y[p * D + d];
                }
                const float wc = acc ? base[t * D + d] + (float)c : (float)c;
                const float ws = acc ? base[t * D + d] + (float)s : (float)s;
                MT_CHECK(out[t * D + d] == wc, "acc %d: combine [%lld,%lld] %.9g, want %.9g",
                         acc, (long long)t, (long long)d, (double)out[t * D + d], (double)wc);
                MT_CHECK(dx[t * D + d] == ws, "acc %d: dispatch_bwd [%lld,%lld] %.9g, want "
                         "%.9g", acc, (long long)t, (long long)d, (double)dx[t * D + d],
                         (double)ws);
            }
    }
}

MT_TEST(capacity_drop_tables) {
    MT_CHECK(mt_moe_capacity_rows(10, 2, 4, 1.25) == 7, "C of T=10 k=2 E=4 cf=1.25: %lld, want "
             "⌈6.25⌉ = 7", (long long)mt_moe_capacity_rows(10, 2, 4, 1.25));
    MT_CHECK(mt_moe_capacity_rows(8, 2, 4, 1.0) == 4 && mt_moe_capacity_rows(7, 1, 4, 1.0) == 2,
             "C of 8·2/4 (want 4) and ⌈7/4⌉ (want 2)");
    /* pairs 0..7 at experts 0 1 | 0 2 | 0 1 | 1 0, C = 2: expert 0 has 4
     * pairs (0 2 4 7), 1 three (1 5 6), 2 one (3) */
    const int32_t ids[8] = {0, 1, 0, 2, 0, 1, 1, 0};
    const float gates[8] = {0.6f, 0.4f, 0.5f, 0.5f, 0.7f, 0.3f, 0.1f, 0.9f}, flat[8] = {
        0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f};
    struct { const char *what; mt_moe_drop_policy pol; const float *g; int32_t order[6], pos[8]; }
    v[] = {
        {"earliest first", MT_MOE_DROP_POSITION, NULL, {0, 2, 1, 5, 3, -1},
         {0, 2, 1, 4, -1, 3, -1, -1}},
        /* expert 0 keeps gates .9 (7) and .7 (4), laid out 4 then 7; expert
         * 1 .4 (1) and .3 (5) */
        {"highest gate first", MT_MOE_DROP_GATE, gates, {4, 7, 1, 5, 3, -1},
         {-1, 2, -1, 4, 0, 3, -1, 1}},
        {"equal gates: earliest", MT_MOE_DROP_GATE, flat, {0, 2, 1, 5, 3, -1},
         {0, 2, 1, 4, -1, 3, -1, -1}},
    };
    for (size_t c = 0; c < sizeof v / sizeof v[0]; c++) {
        int32_t order[6], pos[8], kept[3];
        const int64_t dropped = mt_moe_capacity_layout(order, pos, kept, ids, v[c].g, 4, 2, 3, 2,
                                                       v[c].pol);
        MT_CHECK(dropped == 3, "%s: %lld dropped, want 3", v[c].what, (long long)dropped);
        MT_CHECK(kept[0] == 2 && kept[1] == 2 && kept[2] == 1, "%s: kept %d %d %d, want 2 2 1",
                 v[c].what, kept[0], kept[1], kept[2]);
        for (int i = 0; i < 6; i++)
            MT_CHECK(order[i] == v[c].order[i], "%s: order[%d] = %d, want %d", v[c].what, i,
                     order[i], v[c].order[i]);
        for (int i = 0; i < 8; i++)
            MT_CHECK(pos[i] == v[c].pos[i], "%s: pos[%d] = %d, want %d", v[c].what, i, pos[i],
                     v[c].pos[i]);
    }
}

/* mt_moe_drop: each sequence its own group (hand tables), then the
 * dropless sort skipping the dropped pairs. S = 2 sequences of L = 3
 * tokens, k = 2, E = 2, cf 0.5: C = ⌈(3·2/2)·0.5⌉ = 2 a sequence. */
MT_TEST(drop_past_capacity_per_sequence) {
    enum { S = 2, L = 3, K = 2, E = 2, N = S * L * K };
    const int64_t C = mt_moe_capacity_rows(L, K, E, 0.5);
    MT_CHECK(C == 2, "C = %lld, want 2", (long long)C);
    /* sequence 0: every token (0, 1); sequence 1: (1, 0) (1, 0) (0, 1) */
    const int32_t ids[N] = {0, 1, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1};
    /* sequence 0's expert 0 pairs 0 2 4 at gates .1 .3 .9, expert 1's 1 3
     * 5 at .2 .4 .5; sequence 1 all .5 (ties: the earlier pair kept) */
    const float gates[N] = {.1f, .2f, .3f, .4f, .9f, .5f, .5f, .5f, .5f, .5f, .5f, .5f};
    const int32_t by_pos[N] = {0, 1, 0, 1, -1, -1, 1, 0, 1, 0, -1, -1};
    const int32_t by_gate[N] = {-1, -1, 0, 1, 0, 1, 1, 0, 1, 0, -1, -1};
    int32_t out[N], scratch[E * 2 + L * K + E];
    int64_t dropped = mt_moe_drop(out, ids, NULL, S, L, K, E, C, MT_MOE_DROP_POSITION, scratch);
    MT_CHECK(dropped == 4 && !memcmp(out, by_pos, sizeof out), "earliest first: %lld dropped, "
             "ids %d %d %d %d %d %d | %d %d %d %d %d %d", (long long)dropped, out[0], out[1],
             out[2], out[3], out[4], out[5], out[6], out[7], out[8], out[9], out[10], out[11]);
    dropped = mt_moe_drop(out, ids, gates, S, L, K, E, C, MT_MOE_DROP_GATE, scratch);
    MT_CHECK(dropped == 4 && !memcmp(out, by_gate, sizeof out), "highest gate first: %lld "
             "dropped, ids %d %d %d %d %d %d | %d %d %d %d %d %d", (long long)dropped, out[0],
             out[1], out[2], out[3], out[4], out[5], out[6], out[7], out[8], out[9], out[10],
             out[11]);
    /* one group of 6 tokens (C = 3) would keep sequence 0's pairs 4 and 5:
     * the per-sequence groups are what make a batch split drop the same */
    MT_CHECK(mt_moe_capacity_rows(S * L, K, E, 0.5) == 3, "a batch-wide C would differ");
    /* the dropless sort of the kept pairs: 8 rows, the dropped get none */
    int32_t order[N], pos[N], counts[E];
    mt_moe_sort(order, pos, counts, by_pos, S * L, K, E);
    const int32_t want_order[N] = {0, 2, 7, 9, 1, 3, 6, 8, -1, -1, -1, -1};
    const int32_t want_pos[N] = {0, 4, 1, 5, -1, -1, 6, 2, 7, 3, -1, -1};
    MT_CHECK(counts[0] == 4 && counts[1] == 4 && !memcmp(order, want_order, sizeof order) &&
             !memcmp(pos, want_pos, sizeof pos), "the sort of the kept pairs: counts %d %d, "
             "order %d %d %d %d %d %d %d %d %d", counts[0], counts[1], order[0], order[1],
             order[2], order[3], order[4], order[5], order[6], order[7], order[8]);
    int32_t cnt[E];
    mt_moe_counts(cnt, by_pos, 1, S * L, K, E);
    MT_CHECK(cnt[0] == 4 && cnt[1] == 4, "counts of the kept pairs %d %d, want 4 4", cnt[0],
             cnt[1]);
}

MT_TEST(capacity_layer) {
    /* route, lay out at capacity, dispatch, product over E groups of C rows
     * (padding included), combine and back: against double sums over each
     * token's kept experts, the kept set chosen here by counting better
     * pairs. The buffers start as NaN: padding must be written. */
    const int64_t T = 24, E = 4, k = 2, D = 3, O = 2, N = T * k;
    for (int pol = 0; pol < 2; pol++) {
        mt_moe_route_params p = {.T = T, .E = E, .k = k, .renorm = true, .route_scale = 1.0f};
        uint64_t st = 77 + (uint64_t)pol;
        float u[24 * 4], s[24 * 4], g[48], x[24 * 3], w[4 * 3 * 2], out[24 * 2], dg[48];
        float rr[24 * 2], dx[24 * 3], dw[4 * 3 * 2], dxs[4 * 9 * 3], dys[4 * 9 * 2];
        int32_t ids[48], order[48], pos[48], kept[4], sizes[4];
        ref_fill(u, T * E, 2.0, &st), ref_fill(x, T * D, 1.0, &st), ref_fill(w, E * D * O, 1.0, &st);
        ref_fill(rr, T * O, 1.0, &st);
        mt_moe_route_fwd(&p, u, NULL, s, ids, g);
        const int64_t C = mt_moe_capacity_rows(T, k, E, 0.75);   /* 9 of 12 on average */
        float xs[4 * 9 * 3], ys[4 * 9 * 2];
        for (size_t i = 0; i < sizeof xs / sizeof *xs; i++) xs[i] = dxs[i] = NAN;
        for (size_t i = 0; i < sizeof ys / sizeof *ys; i++) ys[i] = dys[i] = NAN;
        const int64_t dropped = mt_moe_capacity_layout(order, pos, kept, ids, g, T, k, E, C,
                                                       (mt_moe_drop_policy)pol);
        int64_t want_dropped = 0;
        for (int64_t r = 0; r < N; r++) {
            int64_t better = 0;   /* pairs of the same expert ahead of r in policy order */
            for (int64_t q = 0; q < N; q++)
                if (ids[q] == ids[r] &&
                    (pol ? g[q] > g[r] || (g[q] == g[r] && q < r) : q < r)) better++;
            const bool keep = better < C;
            want_dropped += !keep;
            MT_CHECK(keep == (pos[r] >= 0), "policy %d: pair %lld (expert %d, %lld ahead) %s",
                     pol, (long long)r, ids[r], (long long)better, keep ? "dropped" : "kept");
            MT_CHECK(!keep || pos[r] / C == ids[r], "policy %d: pair %lld at row %d, not in "
                     "expert %d's", pol, (long long)r, pos[r], ids[r]);
        }
        MT_CHECK(dropped == want_dropped && want_dropped > 0, "policy %d: %lld dropped, want "
                 "%lld (> 0)", pol, (long long)dropped, (long long)want_dropped);
        for (int64_t e = 0; e < E; e++) sizes[e] = (int32_t)C;
        mt_moe_dispatch_fwd(xs, x, order, E * C, k, D);
        mt_moe_gemm_fwd(ys, xs, w, sizes, E, D, O, false);
        mt_moe_combine_fwd(out, ys, g, pos, T, k, O, false);
        mt_moe_combine_bwd_dy(dys, rr, g, order, E * C, k, O, false);
        mt_moe_combine_bwd_dgates(dg, rr, ys, pos, T, k, O, false);
        mt_moe_gemm_bwd(dxs, dw, dys, xs, w, sizes, E, D, O, false);
        mt_moe_dispatch_bwd(dx, dxs, pos, T, k, D, false);
        double dwd[4 * 3 * 2] = {0};
        for (int64_t t = 0; t < T; t++) {
            for (int64_t o = 0; o < O; o++) {
                double v = 0;
                for (int64_t j = 0; j < k; j++) {
                    if (pos[t * k + j] < 0) continue;
                    const float *we = w + ids[t * k + j] * D * O;
                    for (int64_t d = 0; d < D; d++)
                        v += (double)g[t * k + j] * x[t * D + d] * we[d * O + o];
                }
                MT_CHECK_CLOSE(out[t * O + o], v, 1e-5, "policy %d: out[%lld,%lld]", pol,
                               (long long)t, (long long)o);
            }
            for (int64_t d = 0; d < D; d++) {
                double v = 0;   /* dx_t = Σ_kept g · W_e rr_t; dW_e += g · x_t rr_tᵀ */
                for (int64_t j = 0; j < k; j++) {
                    if (pos[t * k + j] < 0) continue;
                    const int64_t e = ids[t * k + j];
                    for (int64_t o = 0; o < O; o++) {
                        v += (double)g[t * k + j] * w[(e * D + d) * O + o] * rr[t * O + o];
                        dwd[(e * D + d) * O + o] += (double)g[t * k + j] * x[t * D + d] *
                                                    rr[t * O + o];
                    }
                }
                MT_CHECK_CLOSE(dx[t * D + d], v, 1e-5, "policy %d: dx[%lld,%lld]", pol,
                               (long long)t, (long long)d);
            }
            for (int64_t j = 0; j < k; j++)
                MT_CHECK(pos[t * k + j] >= 0 || dg[t * k + j] == 0.0f, "policy %d: a dropped "
                         "pair's gate gradient %g, want 0", pol, (double)dg[t * k + j]);
        }
        for (int64_t i = 0; i < E * D * O; i++)
            MT_CHECK_CLOSE(dw[i], dwd[i], 1e-5, "policy %d: dW[%lld]", pol, (long long)i);
    }
}

/* ======================================================================== */
/* The grouped product                                                       */
/* ======================================================================== */

/* The grouped product of el experts' groups (sizes) at C = I, OC = O, and
 * its backward, written and added, against float64 by hand; tol is
 * relative past 1 (the sums of I or O products of entries in [-1, 1)). */
static void grouped_case(int64_t el, int64_t I, int64_t O, const int32_t *sizes, double tol) {
    int64_t N = 0;
    for (int64_t e = 0; e < el; e++) N += sizes[e];
    uint64_t st = 5;
    float *x = malloc((size_t)(N * I) * sizeof *x), *w = malloc((size_t)(el * I * O) * sizeof *w);
    float *y = malloc((size_t)(N * O) * sizeof *y), *dy = malloc((size_t)(N * O) * sizeof *dy);
    float *dx = malloc((size_t)(N * I) * sizeof *dx);
    float *dw = malloc((size_t)(el * I * O) * sizeof *dw);
    MT_CHECK(x && w && y && dy && dx && dw, "out of memory");
    ref_fill(x, N * I, 1.0, &st), ref_fill(w, el * I * O, 1.0, &st), ref_fill(dy, N * O, 1.0, &st);
    for (int acc = 0; acc < 2; acc++) {
        for (int64_t i = 0; i < N * O; i++) y[i] = acc ? 0.25f : 7.0f;
        for (int64_t i = 0; i < N * I; i++) dx[i] = acc ? 0.5f : 7.0f;
        for (int64_t i = 0; i < el * I * O; i++) dw[i] = acc ? -0.5f : 7.0f;
        mt_moe_gemm_fwd(y, x, w, sizes, el, I, O, acc);
        mt_moe_gemm_bwd(dx, dw, dy, x, w, sizes, el, I, O, acc);
        int64_t r0 = 0;
        for (int64_t e = 0; e < el; e++) {
            const float *we = w + e * I * O;
            for (int64_t r = r0; r < r0 + sizes[e]; r++) {
                for (int64_t o = 0; o < O; o++) {
                    double v = acc ? 0.25 : 0;
                    for (int64_t i = 0; i < I; i++) v += (double)x[r * I + i] * we[i * O + o];
                    MT_CHECK_CLOSE(y[r * O + o], v, tol, "%lldx%lld acc %d: y[%lld,%lld]",
                                   (long long)I, (long long)O, acc, (long long)r, (long long)o);
                }
                for (int64_t i = 0; i < I; i++) {
                    double v = acc ? 0.5 : 0;
                    for (int64_t o = 0; o < O; o++) v += (double)dy[r * O + o] * we[i * O + o];
                    MT_CHECK_CLOSE(dx[r * I + i], v, tol, "%lldx%lld acc %d: dx[%lld,%lld]",
                                   (long long)I, (long long)O, acc, (long long)r, (long long)i);
                }
            }
            for (int64_t i = 0; i < I; i++)
                for (int64_t o = 0; o < O; o++) {
                    double v = acc ? -0.5 : 0;   /* a zero-row expert: 0, or unchanged */
                    for (int64_t r = r0; r < r0 + sizes[e]; r++)
                        v += (double)x[r * I + i] * dy[r * O + o];
                    MT_CHECK_CLOSE(dw[(e * I + i) * O + o], v, tol,
                                   "%lldx%lld acc %d: dw[%lld][%lld,%lld]", (long long)I,
                                   (long long)O, acc, (long long)e, (long long)i, (long long)o);
                }
            r0 += sizes[e];
        }
    }
    free(x), free(w), free(y), free(dy), free(dx), free(dw);
}

MT_TEST(grouped_gemm) {
    const int32_t sizes[5] = {3, 0, 5, 1, 0};   /* N = 9, two empty experts */
    grouped_case(5, 6, 4, sizes, 1e-5);
}

/* Groups past a tile of rows (MT_MOE_TILE_ROWS = 512: 1214 rows, three
 * tiles in the first group, two in the third) and input channels
 * (MT_MOE_TILE_COLS = 256 for dw), at the narrow widths the vector level's
 * micro-kernel takes (moe-tiny's 64 x 64; 128, the widest) and at widths
 * past them on Open BLAS (136 and 264 in, 24 and 136 out), dx through the
 * transposed weight. */
MT_TEST(grouped_gemm_tiles_and_widths) {
    const int32_t sizes[4] = {1100, 0, 513, 1};
    const int64_t shapes[][2] = {{64, 64}, {128, 128}, {136, 24}, {24, 136}, {264, 8}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        grouped_case(4, shapes[i][0], shapes[i][1], sizes, 2e-5);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
