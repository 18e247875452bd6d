/* test_plan_memory.c — memory per device under the planner's conventions
 * (src/plan/memory.c, memory_forms.c) against the published closed forms:
 * - the ZeRO paper's 7.5B example on 64 devices and every cell of its
 *   Table 1, at the table's printed rounding;
 * - Korthikanti et al.'s Table 2 rows for GPT-3's layer with t = 8, and
 *   the pipeline's in-flight layers (1F1B, interleaved);
 * - the scaling book's LLaMA-3 70B and LLaMA-2 13B accounting, its
 *   checkpointing examples, minimum chips and the largest model pure data
 *   parallelism holds on a v5p.
 * The conventions counted from real programs are test_plan_memory_program.c's. */
#include "meshtrain.h"
#include "harness.h"
#include "plan/memory.h"

static const double GB = 1e9, TB = 1e12;

/* ======================================================================== */
/* The ZeRO paper                                                            */
/* ======================================================================== */

/* x as the paper prints it: `dp` decimals, rounded half up or truncated. */
static double printed(double x, int dp, bool truncate) {
    double u = pow(10, dp);
    return (truncate ? floor(x * u + 1e-9) : floor(x * u + 0.5)) / u;
}

/* PLANNER.md §2: "Worked: Ψ = 7.5B, Nd = 64 → 120 GB / 31.4 GB / 16.6 GB /
 * 1.9 GB (GB = 1e9 B)". By hand: 16·7.5 = 120; 4·7.5 + 12·7.5/64 = 30 +
 * 1.40625; 2·7.5 + 14·7.5/64 = 15 + 1.640625; 16·7.5/64 = 1.875. */
MT_TEST(zero_paper_7_5b_on_64) {
    const double want[4] = {120, 31.40625, 16.640625, 1.875}, text[4] = {120, 31.4, 16.6, 1.9};
    for (int st = 0; st < 4; st++) {
        double got = mt__plan_mem_zero_paper(7.5e9, 64, st) / GB;
        MT_CHECK(got == want[st], "stage %d: %.9g GB, by hand %.9g", st, got, want[st]);
        MT_CHECK(printed(got, st == 0 ? 0 : 1, false) == text[st], "stage %d prints %g, the "
                 "paper %g", st, printed(got, st == 0 ? 0 : 1, false), text[st]);
    }
    MT_CHECK(mt__plan_mem_zero_paper(7.5e9, 0, 1) < 0 && mt__plan_mem_zero_paper(1, 4, 4) < 0,
             "nd 0 or stage 4 refused");
}

/* Table 1 of the paper (PLANNER.md §2), GB per device, every cell. The
 * paper rounds the 7.5B columns (41.25 → 41.3, 1.875 → 1.88, 0.46875 →
 * 0.47) and truncates the 128B and 1T ones (513.5 → 513, 4187.5 → 4187,
 * 2218.75 → 2218, 15.625 → 15.6): each column is checked at its own. The
 * worked text's 1.9 for ZeRO-3 at 64 is the table's 1.88 (1.875) to one
 * decimal. */
MT_TEST(zero_paper_table_1) {
    static const int nd[6] = {1, 4, 16, 64, 256, 1024};
    static const double psi[3] = {7.5e9, 128e9, 1e12};
    /* [model][stage 1..3][row] as printed, and the decimals of each cell */
    static const double cell[3][3][6] = {
        {{120, 52.5, 35.6, 31.4, 30.4, 30.1}, {120, 41.3, 21.6, 16.6, 15.4, 15.1},
         {120, 30, 7.5, 1.88, 0.47, 0.12}},
        {{2048, 896, 608, 536, 518, 513}, {2048, 704, 368, 284, 263, 257},
         {2048, 512, 128, 32, 8, 2}},
        {{16000, 7000, 4750, 4187, 4046, 4011}, {16000, 5500, 2875, 2218, 2054, 2013},
         {16000, 4000, 1000, 250, 62.5, 15.6}},
    };
    static const int dp[3][3][6] = {
        {{0, 1, 1, 1, 1, 1}, {0, 1, 1, 1, 1, 1}, {0, 0, 1, 2, 2, 2}},
        {{0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}},
        {{0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 1, 1}},
    };
    for (int m = 0; m < 3; m++)
        for (int st = 1; st <= 3; st++)
            for (int r = 0; r < 6; r++) {
                double got = mt__plan_mem_zero_paper(psi[m], nd[r], st) / GB;
                double p = printed(got, dp[m][st - 1][r], m > 0);
                MT_CHECK(p == cell[m][st - 1][r], "Ψ %g, ZeRO-%d, Nd %d: %.6g GB prints %g, "
                         "the table %g", psi[m], st, nd[r], got, p, cell[m][st - 1][r]);
            }
    /* the DP column: 16Ψ whatever Nd */
    for (int r = 0; r < 6; r++)
        MT_CHECK(mt__plan_mem_zero_paper(7.5e9, nd[r], 0) == 120 * GB, "DP at Nd %d", nd[r]);
}

/* ======================================================================== */
/* Korthikanti et al.                                                        */
/* ======================================================================== */

/* GPT-3's layer (PLANNER.md §3: "GPT-3 (a 96, s 2048, h 12288): 5as/h = 80"). */
static mt__plan_mem_layout gpt3_layer(int t, bool sp, mt_remat remat) {
    return (mt__plan_mem_layout){.data = 1, .fsdp = 1, .tensor = t, .sequence_parallel = sp,
                                 .remat = remat, .s = 2048, .b = 1, .h = 12288, .a = 96};
}

/* Table 2's rows at t = 8, in units of sbh (by hand from the table):
 *   no parallelism (t = 1)          34 + 80                = 114
 *   tensor parallel                 10 + 24/8 + 80/8       = 23
 *   tensor + sequence parallel      34/8 + 80/8            = 14.25
 *   tensor + selective recompute    10 + 24/8              = 13
 *   tensor + sequence + selective   34/8                   = 4.25
 *   full recompute                  2 */
MT_TEST(korthikanti_table_2) {
    const double sbh = 2048.0 * 12288.0;
    MT_CHECK(5.0 * 96 * 2048 / 12288 == 80, "5as/h");
    struct { int t; bool sp; mt_remat r; double units; const char *row; } rows[] = {
        {1, false, MT_REMAT_NONE, 114, "no parallelism"},
        {8, false, MT_REMAT_NONE, 23, "tensor parallel"},
        {8, true, MT_REMAT_NONE, 14.25, "tensor + sequence parallel"},
        {8, false, MT_REMAT_ATTENTION, 13, "tensor parallel + selective recompute"},
        {8, true, MT_REMAT_ATTENTION, 4.25, "tensor + sequence + selective recompute"},
        {8, false, MT_REMAT_FULL, 2, "full recompute"},
        {1, false, MT_REMAT_FULL, 2, "full recompute, t = 1"},
        /* dots keeps no more than selective recompute: counted as it (memory.h) */
        {8, true, MT_REMAT_DOTS, 4.25, "dots as selective"},
        /* full recompute with sequence parallelism: the input split over t */
        {8, true, MT_REMAT_FULL, 2.0 / 8, "full recompute, sequence parallel"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        mt__plan_mem_layout l = gpt3_layer(rows[i].t, rows[i].sp, rows[i].r);
        MT_CHECK_CLOSE(mt__plan_mem_korthikanti_layer(&l), rows[i].units * sbh, 1e-14, "%s",
                       rows[i].row);
        /* linear in the microbatch: b = 4 is four times b = 1 */
        l.b = 4;
        MT_CHECK_CLOSE(mt__plan_mem_korthikanti_layer(&l), 4 * rows[i].units * sbh, 1e-14,
                       "%s, b = 4", rows[i].row);
    }
    mt__plan_mem_layout bad = gpt3_layer(8, false, MT_REMAT_NONE);
    bad.a = 0;
    MT_CHECK(mt__plan_mem_korthikanti_layer(&bad) < 0, "a = 0 refused");
    /* heads of twice h/a (--head-dim): the query, keys and values and the
     * output projection's input 2sb·2h, 4sb·2h, 2sb·2h: 24/t becomes 32/t,
     * 10 + 32/8 + 80/8 = 24 sbh; hd = h/a is the paper's own */
    mt__plan_mem_layout wide = gpt3_layer(8, false, MT_REMAT_NONE);
    wide.hd = 2 * 12288 / 96;
    MT_CHECK_CLOSE(mt__plan_mem_korthikanti_layer(&wide), 24 * sbh, 1e-14, "hd = 2h/a");
    wide.hd = 12288 / 96;
    MT_CHECK_CLOSE(mt__plan_mem_korthikanti_layer(&wide), 23 * sbh, 1e-14, "hd = h/a");
    wide.hd = -1;
    mt__plan_mem_chunk one = {.layers = 1, .in_flight = 1};
    mt__plan_mem_bytes m;
    MT_CHECK_FAILS(mt__plan_mem_device(MT_PLAN_MEMORY_MIXED16, &wide, &one, 1, &m), MT_EINVAL,
                   "hd=-1");
}

/* A chunk with no program bytes: only its layers count. */
static mt__plan_mem_chunk layers_chunk(double layers, double in_flight) {
    return (mt__plan_mem_chunk){.layers = layers, .in_flight = in_flight};
}

/* PLANNER.md §3: "With 1F1B the first stage holds L layers' worth whatever
 * p is (sbhL/t·(34 + 5as/h)); the interleaved schedule multiplies that by
 * (1 + (p−1)/(p·m))". GPT-3 175B: L = 96, t = 8, p = 8, sequence parallel:
 * the first stage has 12 layers and 8 microbatches in flight, so 96 · sbh ·
 * (34 + 80)/8 = 1368 sbh; interleaved with m = 2 chunks of 6 layers, each
 * 8 · (1 + 7/16) = 11.5 in flight: 1368 · 1.4375 = 1966.5 sbh. */
MT_TEST(korthikanti_pipeline_in_flight) {
    const double sbh = 2048.0 * 12288.0;
    mt__plan_mem_layout l = gpt3_layer(8, true, MT_REMAT_NONE);
    mt__plan_mem_chunk one = layers_chunk(12, 8);
    mt__plan_mem_bytes m;
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_MIXED16, &l, &one, 1, &m));
    MT_CHECK_CLOSE(m.activations, 1368 * sbh, 1e-14, "1F1B's first stage");
    MT_CHECK_CLOSE(m.activations, sbh * 96 / 8 * (34 + 80), 1e-14, "sbhL/t(34 + 5as/h)");
    MT_CHECK(m.total == m.activations, "no model states in a chunk of no parameters");
    mt__plan_mem_chunk two[2] = {layers_chunk(6, 8 * (1 + 7.0 / 16)),
                                 layers_chunk(6, 8 * (1 + 7.0 / 16))};
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_MIXED16, &l, two, 2, &m));
    MT_CHECK_CLOSE(m.activations, 1966.5 * sbh, 1e-14, "interleaved, m = 2");
}

/* ======================================================================== */
/* The scaling book                                                          */
/* ======================================================================== */

/* LLaMA's parameters by hand (PLANNER.md 2.5's terms): attention L·(2DNH +
 * 2DKH), MLP 3DFL, two norms a layer and the final one, embedding and the
 * untied head 2VD. */
static double llama_hand(double L, double D, double F, double N, double K, double H, double V) {
    return L * (2 * D * N * H + 2 * D * K * H + 3 * D * F + 2 * D) + D + 2 * V * D;
}

/* One device holding the whole of a P-parameter model: the book's counts. */
static mt__plan_mem_chunk whole_model(double P, double layers) {
    mt__plan_mem_chunk c = {.layers = layers, .in_flight = 1};
    c.counts.param_elems = c.counts.param_global_elems = P;
    return c;
}

/* PLANNER.md 2.5/2.6, LLaMA-3 70B: "total 70.4e9 (exact arithmetic gives
 * 70.55e9)"; "4M-token batch, bf16 params, fp32 Adam, 4 checkpoints/layer of
 * size B×D: params 2·70 GB = 140 GB, optimizer 8·70 GB = 560 GB,
 * checkpoints 2·8192·4e6·4·80 = 20.9 TB, total ≈21.6 TB → minimum chips =
 * 21.6e12/96e9 = 225 v5p; on 8960 chips → ≈2.4 GB/chip". The book's 4M is
 * 4e6 here (2·8192·4e6·4·80 = 20.97e12, printed 20.9 truncated; 4·2^20
 * would give 22.0 TB). */
MT_TEST(book_llama3_70b) {
    mt_llama_config cfg;
    MT_CHECK_OK(mt_llama_preset("llama3-70b", &cfg));
    double hand = llama_hand(80, 8192, 28672, 64, 8, 128, 128256);
    MT_CHECK(hand == 70553706496.0, "hand count %.0f", hand);
    MT_CHECK((double)mt_llama_num_params(&cfg) == hand, "the preset has %lld parameters, by "
             "hand %.0f", (long long)mt_llama_num_params(&cfg), hand);
    MT_CHECK(printed(hand / 1e9, 2, false) == 70.55, "70.55e9");
    mt__plan_mem_layout l = {.data = 1, .fsdp = 1, .tensor = 1, .remat = MT_REMAT_DOTS,
                             .s = 8192, .b = 4e6 / 8192, .h = 8192, .a = 64, .kv_heads = 8,
                             .ffn = 28672, .gated = true};
    /* at the book's P = 70e9 */
    mt__plan_mem_chunk c = whole_model(70e9, 80);
    mt__plan_mem_bytes m;
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_BOOK, &l, &c, 1, &m));
    MT_CHECK(m.params == 140 * GB && m.optimizer == 560 * GB && m.grads == 0,
             "params %g GB, optimizer %g GB, grads %g", m.params / GB, m.optimizer / GB, m.grads);
    MT_CHECK(m.activations == 2.0 * 8192 * 4e6 * 4 * 80, "checkpoints %.6g", m.activations);
    MT_CHECK(printed(m.activations / TB, 1, true) == 20.9, "checkpoints %.4g TB", m.activations / TB);
    MT_CHECK(m.total >= 21.6 * TB && m.total < 21.7 * TB, "total %.4g TB, the book ≈21.6",
             m.total / TB);
    /* minimum chips: the book's arithmetic on its rounded total, then ours */
    int64_t n = 0;
    MT_CHECK_OK(mt__plan_mem_min_chips(0, 21.6 * TB, 96 * GB, &n));
    MT_CHECK(n == 225, "21.6 TB on 96 GB chips: %lld, the book 225", (long long)n);
    /* [book-inconsistency]: 21.6 is 0.7 + 20.9 rounded down; the unrounded
     * 21.67 TB needs 226 (225.7 chips' worth) */
    MT_CHECK_OK(mt__plan_mem_min_chips(0, m.total, 96 * GB, &n));
    MT_CHECK(n == 226, "%.5g TB: %lld chips", m.total / TB, (long long)n);
    /* on 8960 chips, fully sharded: P/8960 stored, tokens/8960 each */
    mt__plan_mem_chunk s = whole_model(70e9 / 8960, 80);
    s.counts.param_global_elems = 70e9;
    mt__plan_mem_layout ls = l;
    ls.fsdp = 8960;
    ls.b = l.b / 8960;
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_BOOK, &ls, &s, 1, &m));
    MT_CHECK(printed(m.total / GB, 1, false) == 2.4, "%.4g GB a chip on 8960, the book ≈2.4",
             m.total / GB);
    /* at the exact count: 2 and 8 bytes each */
    c = whole_model(hand, 80);
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_BOOK, &l, &c, 1, &m));
    MT_CHECK(m.params == 2 * hand && m.optimizer == 8 * hand, "exact P");
}

/* PLANNER.md 2.6, LLaMA-2 13B: "FFW 8.5e9, attention 4.2e9, vocab 0.33e9 →
 * 13.0e9. Params+opt (2+4+4)·13e9 ≈ 130 GB; activations with 3
 * checkpoints/layer (after the 3 big matmuls: B·F, B·F, B·D) = 2·L·B·(D+2F)
 * → 16M tokens: 42 TB; 3M tokens: 7.86 TB (+0.13 TB ≈ 8 TB total)". By
 * hand: D + 2F = 5120 + 27648 = 32768; 2·40·16e6·32768 = 41.9e12;
 * 2·40·3e6·32768 = 7.864e12. */
MT_TEST(book_llama2_13b) {
    mt_llama_config cfg;
    MT_CHECK_OK(mt_llama_preset("llama2-13b", &cfg));
    double hand = llama_hand(40, 5120, 13824, 40, 40, 128, 32000);
    MT_CHECK((double)mt_llama_num_params(&cfg) == hand, "the preset has %lld, by hand %.0f",
             (long long)mt_llama_num_params(&cfg), hand);
    MT_CHECK(printed(hand / 1e9, 1, false) == 13.0, "13.0e9: %.5g", hand / 1e9);
    MT_CHECK(printed(3.0 * 5120 * 13824 * 40 / 1e9, 1, false) == 8.5 &&
             printed(4.0 * 5120 * 5120 * 40 / 1e9, 1, false) == 4.2 &&
             printed(2.0 * 32000 * 5120 / 1e9, 2, false) == 0.33, "the book's terms");
    mt__plan_mem_layout l = {.data = 1, .fsdp = 1, .tensor = 1, .remat = MT_REMAT_ATTENTION,
                             .s = 32768, .b = 16e6 / 32768, .h = 5120, .a = 40, .ffn = 13824,
                             .gated = true};
    mt__plan_mem_chunk c = whole_model(hand, 40);
    mt__plan_mem_bytes m;
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_BOOK, &l, &c, 1, &m));
    MT_CHECK(printed((m.params + m.optimizer) / GB, 0, false) == 130, "params + optimizer "
             "%.5g GB", (m.params + m.optimizer) / GB);
    MT_CHECK(m.activations == 2.0 * 40 * 16e6 * 32768, "16M tokens: %.6g", m.activations);
    MT_CHECK(printed(m.activations / TB, 0, false) == 42, "%.4g TB, the book 42",
             m.activations / TB);
    l.b = 3e6 / 32768;
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_BOOK, &l, &c, 1, &m));
    MT_CHECK(printed(m.activations / TB, 2, false) == 7.86, "3M tokens: %.4g TB, the book 7.86",
             m.activations / TB);
    MT_CHECK(printed((m.params + m.optimizer) / TB, 2, false) == 0.13 &&
             printed(m.total / TB, 0, false) == 8, "total %.4g TB, the book ≈8", m.total / TB);
}

/* PLANNER.md 2.5: "saving every intermediate ≈ 2·20·B·T·D·L bytes bf16
 * (BT=4M, L=64, D=8192 → 84 TB); block remat (save layer input only) →
 * 2·B·T·D·L = 4.2 TB". By hand 2·20·4e6·8192·64 = 83.9e12, 2·4e6·8192·64 =
 * 4.19e12; the book's widths are per policy (memory.h). */
MT_TEST(book_checkpoint_policies) {
    mt__plan_mem_layout l = {.data = 1, .fsdp = 1, .tensor = 1, .s = 4096, .b = 4e6 / 4096,
                             .h = 8192, .a = 64};
    mt__plan_mem_chunk c = layers_chunk(64, 1);
    mt__plan_mem_bytes m;
    l.remat = MT_REMAT_NONE;
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_BOOK, &l, &c, 1, &m));
    MT_CHECK(printed(m.activations / TB, 0, false) == 84, "every intermediate: %.4g TB",
             m.activations / TB);
    l.remat = MT_REMAT_FULL;
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_BOOK, &l, &c, 1, &m));
    MT_CHECK(printed(m.activations / TB, 1, false) == 4.2, "block remat: %.4g TB",
             m.activations / TB);
    /* the order of what the policies keep (F = 4D here) */
    double w[4];
    const mt_remat order[4] = {MT_REMAT_NONE, MT_REMAT_ATTENTION, MT_REMAT_DOTS, MT_REMAT_FULL};
    for (int i = 0; i < 4; i++) w[i] = mt__plan_mem_book_width(order[i], 8192, 4 * 8192);
    MT_CHECK(w[0] >= w[1] && w[1] >= w[2] && w[2] >= w[3] && w[3] == 8192, "widths %g %g %g %g",
             w[0], w[1], w[2], w[3]);
    /* sharded over the batch axes (b is a replica's) and tensor: data=2,
     * tensor=4 holds an eighth of one device's */
    l.data = 2;
    l.tensor = 4;
    l.b = 4e6 / 4096 / 2;
    mt__plan_mem_bytes q;
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_BOOK, &l, &c, 1, &q));
    MT_CHECK_CLOSE(q.activations, m.activations / 8, 1e-14, "data=2, tensor=4");
}

/* PLANNER.md 2.6: "Max model under pure DP = HBM/10 params → v5p (96 GB):
 * ~9B params". 9.6e9 parameters fill a v5p's 96e9 bytes (the shipped
 * hardware file's) under the book's 10 bytes a parameter, replicated; a
 * tenth of a percent more do not. */
MT_TEST(book_max_model_pure_dp) {
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("tpu-v5p", &hw, NULL, 0));
    const double hbm = hw->hbm_bytes;
    mt_hardware_free(hw);
    MT_CHECK(hbm == 96 * GB, "v5p HBM %g", hbm);
    mt__plan_mem_layout l = {.data = 8960, .fsdp = 1, .tensor = 1};
    mt__plan_mem_chunk c = whole_model(9.6e9, 0);
    mt__plan_mem_bytes m;
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_BOOK, &l, &c, 1, &m));
    MT_CHECK(m.total == hbm, "9.6e9 parameters: %.6g bytes", m.total);
    int64_t n = 0;
    MT_CHECK_OK(mt__plan_mem_min_chips(m.total, 0, hbm, &n));
    MT_CHECK(n == 1, "fits one chip");
    MT_CHECK_FAILS(mt__plan_mem_min_chips(m.total * 1.001, 1, hbm, &n), MT_EINVAL, "do not fit",
                   "shard");
    MT_CHECK(floor(m.total / 10 / 1e9) == 9, "≈9B");
}

MT_TEST(min_chips_with_replicated_bytes) {
    int64_t n = 0;
    /* 10 + 90/N <= 40: N >= 3 */
    MT_CHECK_OK(mt__plan_mem_min_chips(10, 90, 40, &n));
    MT_CHECK(n == 3, "10 + 90/N in 40: %lld", (long long)n);
    /* 10 + 91/N <= 40: N = 4 (91/3 = 30.3) */
    MT_CHECK_OK(mt__plan_mem_min_chips(10, 91, 40, &n));
    MT_CHECK(n == 4, "10 + 91/N in 40: %lld", (long long)n);
    /* a product of round numbers divides back (0.1·3 / 3 is 1 ulp above 0.1) */
    MT_CHECK_OK(mt__plan_mem_min_chips(0, 0.1 * 3, 0.1, &n));
    MT_CHECK(n == 3, "0.1·3 on chips of 0.1: %lld", (long long)n);
    MT_CHECK_OK(mt__plan_mem_min_chips(0, 0, 40, &n));
    MT_CHECK(n == 1, "nothing fits one chip");
    MT_CHECK_FAILS(mt__plan_mem_min_chips(1, 1, 0, &n), MT_EINVAL, "positive");
    MT_CHECK_FAILS(mt__plan_mem_min_chips(-1, 1, 1, &n), MT_EINVAL, "0 or more");
    MT_CHECK_FAILS(mt__plan_mem_min_chips(40, 1, 40, &n), MT_EINVAL, "do not fit");
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
