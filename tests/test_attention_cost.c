/*
 * test_attention_cost.c — the op table's FLOPs and bytes for attention
 * split over a `context` axis, against numbers worked by hand (in the
 * comments) and against a brute-force count of the causal (query, key)
 * pairs each device's head-tail rows see (CONTEXT_PARALLEL.md §3: chunks
 * r and 2P-1-r of c = S/(2P) rows, 2P·c² + c pairs each, summing to the
 * whole sequence's S(S+1)/2).
 */
#include "harness.h"
#include "meshtrain.h"
#include "ops/ops_impl.h"

static void cost_of(const mt_op_call *c, double *fl, double *by) {
    *fl = *by = -1;
    mt__op_def(c->op)->cost(c, fl, by);
}

/* Pairs of rank r of P under head-tail chunks of c rows, counted row by
 * row: global row g sees keys 0..g. */
static double brute_pairs(int P, int r, int c) {
    double n = 0;
    for (int half = 0; half < 2; half++) {
        int chunk = half ? 2 * P - 1 - r : r;
        for (int i = 0; i < c; i++) n += chunk * c + i + 1;
    }
    return n;
}

MT_TEST(attention_cost_pairs_closed_form_against_brute_force) {
    for (int P = 2; P <= 16; P *= 2)
        for (int c = 1; c <= 9; c += 4) {
            double whole = 0;
            for (int r = 0; r < P; r++) {
                double want = brute_pairs(P, r, c);
                whole += want;
                /* one head, one sequence, fwd FLOPs / (4·HS + 5) = pairs */
                mt_op_call k = {.op = MT_OP_ATTENTION_GQA,
                                .p.gqa = {.B = 1, .T = 2 * c, .NH = 1, .KV = 1, .HS = 1, .G = 1,
                                          .Tk = 2 * c * P, .parts = P, .part = r}};
                double fl, by;
                cost_of(&k, &fl, &by);
                MT_CHECK(fl == 9 * want, "P=%d c=%d rank %d: %.0f FLOPs, want 9 x %.0f pairs", P,
                         c, r, fl, want);
            }
            double S = 2.0 * P * c;
            MT_CHECK(whole == S * (S + 1) / 2, "P=%d c=%d: %.0f pairs over the ranks, want %.0f",
                     P, c, whole, S * (S + 1) / 2);
        }
}

/* GQA, all-gather form: B=1, NH=4, KV=2, HS=8, P=4, local T=4 (c=2), Tk=16.
 * Pairs a head 2·4·2² + 2 = 34 (the sequence's 136 = 4 x 34), 4 heads: 136.
 * Forward 136·(4·8+5) = 5032; dq,dk 136·(6·8+5) = 7208; dv 136·2·8 = 2176.
 * Bytes: q,out 4·4·8 = 128 floats each, k,v 16·2·8 = 256 each, lse 16:
 * forward 4·(2·128 + 2·256 + 16) = 3136; dq,dk 4·(4·128 + 3·256 + 16) = 5184;
 * dv 4·(2·128 + 2·256 + 16) = 3136. */
MT_TEST(attention_cost_gqa_split_by_hand) {
    mt_gqa_params p = {.B = 1, .T = 4, .NH = 4, .KV = 2, .HS = 8, .G = 2, .Tk = 16, .parts = 4,
                       .part = 1};
    const struct { mt_op op; double fl, by; } want[] = {
        {MT_OP_ATTENTION_GQA, 5032, 3136}, {MT_OP_GQA_BWD_QK, 7208, 5184},
        {MT_OP_GQA_BWD_V, 2176, 3136}};
    for (int i = 0; i < 3; i++) {
        mt_op_call c = {.op = want[i].op, .p.gqa = p};
        double fl, by;
        cost_of(&c, &fl, &by);
        MT_CHECK(fl == want[i].fl && by == want[i].by, "%s: %.0f FLOPs %.0f bytes, want %.0f "
                 "and %.0f", mt__op_def(want[i].op)->name, fl, by, want[i].fl, want[i].by);
    }
    /* the ring's own cost entry counts the same pairs: its forward 5032;
       bytes q,out and P=4 steps of k|v (4·2·2·8 = 128 floats): 4·(256 + 512) */
    mt_op_call r = {.op = MT_OP_RING_ATTENTION,
                    .p.ring = {.cm = {.P = 4}, .B = 1, .T = 4, .NH = 4, .KV = 2, .HS = 8, .G = 2}};
    double fl, by;
    cost_of(&r, &fl, &by);
    MT_CHECK(fl == 5032 && by == 3072, "ring: %.0f FLOPs %.0f bytes, want 5032 and 3072", fl, by);
}

/* Packed (GPT) attention, all-gather form: B=2, C=16, NH=2 (HS 8), P=2,
 * T=4 (c=2), Tk=8. Pairs a head 2·2·4 + 2 = 18, B·NH = 4: 72. Forward
 * 72·37 = 2664, backward twice: 5328. Bytes forward 4·(B·(2T + 2Tk)·C +
 * B·NH·T) = 4·(2·24·16 + 16) = 3136; backward 4·(2·48·16 + 16) = 6208.
 * Ulysses' whole form (Tk = T = 8, parts 2), B=1 C=8 NH=1: 36 pairs, 1332.
 * One device, T=8: the same 36 pairs, 1332 FLOPs, bytes 4·(4·8·8 + 8). */
MT_TEST(attention_cost_packed_split_by_hand) {
    mt_op_call f = {.op = MT_OP_ATTENTION,
                    .p.attention = {.B = 2, .T = 4, .C = 16, .NH = 2, .Tk = 8, .parts = 2}};
    mt_op_call b = f;
    b.op = MT_OP_ATTENTION_BWD;
    double fl, by;
    cost_of(&f, &fl, &by);
    MT_CHECK(fl == 2664 && by == 3136, "forward: %.0f FLOPs %.0f bytes, want 2664, 3136", fl, by);
    cost_of(&b, &fl, &by);
    MT_CHECK(fl == 5328 && by == 6208, "backward: %.0f FLOPs %.0f bytes, want 5328, 6208", fl,
             by);
    mt_op_call u = {.op = MT_OP_ATTENTION,
                    .p.attention = {.B = 1, .T = 8, .C = 8, .NH = 1, .Tk = 8, .parts = 2}};
    cost_of(&u, &fl, &by);
    MT_CHECK(fl == 1332, "ulysses' whole form: %.0f FLOPs, want 1332", fl);
    mt_op_call one = {.op = MT_OP_ATTENTION, .p.attention = {.B = 1, .T = 8, .C = 8, .NH = 1}};
    cost_of(&one, &fl, &by);
    MT_CHECK(fl == 1332 && by == 4 * (4 * 8 * 8 + 8), "one device: %.0f FLOPs %.0f bytes", fl,
             by);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
