/*
 * test_schedule.c — pipeline schedules (meshtrain/pipeline.h) against what
 * is known of them without this code: for every kind and (p, m) of issue 10
 * and over a grid, the unit-cost bubble from each schedule's formula, the
 * spans and peaks from hand-counted tables; the preconditions; corrupted
 * schedules (a missing W, a duplicated op, a swapped dependency, ...) and
 * the op each message must name; the simulator's communication and
 * w_memory against timelines worked out by hand; the JSON round trip and
 * its errors; the text and SVG writers.
 */
#include "meshtrain.h"
#include "harness.h"

#include <math.h>
#include <stdlib.h>

/* ---- what the schedules must give, from their formulas -------------------- */
/* Unit costs (F = B = W = 1 per stage, COMM 0); "bubble" is max span - busy,
 * busy being m(T_F+T_B+T_W) = 3m on every device. */

static double want_bubble(mt_schedule_kind k, int p, int m, int v) {
    switch (k) {
    case MT_SCHEDULE_GPIPE:
    case MT_SCHEDULE_1F1B: return 3.0 * (p - 1);          /* (p-1)(T_F+T_B+T_W) */
    case MT_SCHEDULE_INTERLEAVED: return 3.0 * (p - 1) / v;
    case MT_SCHEDULE_ZB_H1: return p - 1;                 /* (p-1)(T_F+T_B-T_W) */
    case MT_SCHEDULE_ZB_H2:                               /* (p-1)(T_F+T_B-2T_W) = 0 */
        return m >= 2 * p - 1 ? 0.0 : 2 * p - 1 - m;      /* fallback: 2p-1-m idle slots */
    case MT_SCHEDULE_ZB_V:                                /* slots of 1/2 on device 0 */
        return m >= 2 * p - 1 ? 0.0 : (2 * p - 1 - m) / 2.0;
    case MT_SCHEDULE_DUALPIPEV: return (p - 1) / 2.0;     /* (p-1-r) half slots on device r */
    default: return -1;
    }
}

/* Device i's span where a table for it is known (-1: none). */
static double want_span(mt_schedule_kind k, int p, int m, int v, int i) {
    switch (k) {
    case MT_SCHEDULE_GPIPE:
    case MT_SCHEDULE_1F1B: return 3.0 * m + 3.0 * (p - 1 - i);
    case MT_SCHEDULE_INTERLEAVED: return 3.0 * m + 3.0 * (p - 1 - i) / v;
    case MT_SCHEDULE_ZB_H1: return 3.0 * m + (p - 1 - i);
    case MT_SCHEDULE_ZB_H2:
    case MT_SCHEDULE_ZB_V: return m >= 2 * p - 1 ? 3.0 * m : -1;
    case MT_SCHEDULE_DUALPIPEV: return 3.0 * m + (p - 1 - i) / 2.0;
    default: return -1;
    }
}

/* Device i's peak activations (units of one microbatch on a whole stage);
 * for zb-v below 2p-1 only a bound is known: -(bound). */
static double want_peak(mt_schedule_kind k, int p, int m, int v, int i) {
    switch (k) {
    case MT_SCHEDULE_GPIPE: return m;
    case MT_SCHEDULE_1F1B:
    case MT_SCHEDULE_ZB_H1: return p - i;
    case MT_SCHEDULE_INTERLEAVED: {
        int n = 2 * (p - 1 - i) + (v - 1) * p + 1;   /* warm-up + the first steady F */
        return (double)(n < m * v ? n : m * v) / v;
    }
    case MT_SCHEDULE_ZB_H2: return 2 * p - 1 - 2 * i < m ? 2 * p - 1 - 2 * i : m;
    case MT_SCHEDULE_ZB_V: return m >= 2 * p - 1 ? p : -p;
    case MT_SCHEDULE_DUALPIPEV: return p + 0.5;     /* 2p chunk activations after step 2, +1 */
    default: return -1;
    }
}

/* The first device starts at 0 and the last one at (p-1)/v; which ends last. */
static double want_makespan(mt_schedule_kind k, int p, int m, int v) {
    switch (k) {
    case MT_SCHEDULE_ZB_H2: return m >= 2 * p - 1 ? 3.0 * m + (p - 1) : -1;
    case MT_SCHEDULE_ZB_V: return m >= 2 * p - 1 ? 3.0 * m + (p - 1) / 2.0 : -1;
    default: return 3.0 * m + want_bubble(k, p, m, v);   /* device 0 ends last */
    }
}

static const char *kname(mt_schedule_kind k) { return mt_schedule_kind_name(k); }

/* Makes, validates and simulates kind k at unit costs and checks it against
 * the tables above. */
static void check_kind(mt_schedule_kind k, int p, int m, int v) {
    mt_schedule *s;
    MT_CHECK_OK(mt_schedule_make(k, p, m, v, &s));
    v = mt_schedule_chunks(s);
    double peak[64];
    MT_CHECK_OK(mt_schedule_validate(s, peak));
    mt_pipe_sim sim;
    MT_CHECK_OK(mt_schedule_simulate(s, NULL, 0.0, &sim));
    double max_span = 0;
    for (int i = 0; i < p; i++) {
        MT_CHECK_CLOSE(sim.busy[i], 3.0 * m, 1e-9, "%s p=%d m=%d: busy of device %d", kname(k),
                       p, m, i);
        double span = want_span(k, p, m, v, i);
        if (span >= 0)
            MT_CHECK_CLOSE(sim.span[i], span, 1e-9, "%s p=%d m=%d: span of device %d", kname(k),
                           p, m, i);
        double pk = want_peak(k, p, m, v, i);
        if (pk >= 0)
            MT_CHECK_CLOSE(peak[i], pk, 1e-9, "%s p=%d m=%d v=%d: peak of device %d", kname(k),
                           p, m, v, i);
        else
            MT_CHECK(peak[i] <= -pk + 1e-9, "%s p=%d m=%d: peak %g of device %d above %g",
                     kname(k), p, m, peak[i], i, -pk);
        MT_CHECK_CLOSE(sim.peak_activations[i], peak[i], 1e-12, "%s: the simulator's peak "
                       "with w_memory 0 is the validator's (device %d)", kname(k), i);
        if (sim.span[i] > max_span) max_span = sim.span[i];
    }
    double bubble = want_bubble(k, p, m, v);
    MT_CHECK_CLOSE(sim.bubble, bubble, 1e-9, "%s p=%d m=%d v=%d: bubble", kname(k), p, m, v);
    MT_CHECK_CLOSE(max_span - 3.0 * m, bubble, 1e-9, "%s p=%d m=%d: max span - busy", kname(k),
                   p, m);
    MT_CHECK_CLOSE(sim.bubble_rate, bubble / (3.0 * m + bubble), 1e-12, "%s p=%d m=%d: "
                   "bubble rate", kname(k), p, m);
    double mk = want_makespan(k, p, m, v);
    if (mk >= 0)
        MT_CHECK_CLOSE(sim.makespan, mk, 1e-9, "%s p=%d m=%d: makespan", kname(k), p, m);
    MT_CHECK_CLOSE(sim.bubble_fraction, (sim.makespan - 3.0 * m) / sim.makespan, 1e-12,
                   "%s p=%d m=%d: bubble fraction", kname(k), p, m);
    bool noted = mt_schedule_note(s)[0] != '\0';
    bool fallback = (k == MT_SCHEDULE_ZB_H2 || k == MT_SCHEDULE_ZB_V) && m < 2 * p - 1;
    MT_CHECK(noted == fallback, "%s p=%d m=%d: note '%s'", kname(k), p, m, mt_schedule_note(s));
    mt_pipe_sim_free(&sim);
    mt_schedule_free(s);
}

/* ---- the kinds ---------------------------------------------------------------- */

MT_TEST(kind_names_round_trip) {
    const char *names[] = {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v", "dualpipev"};
    for (int k = 0; k < MT_SCHEDULE_N_KINDS; k++) {
        MT_CHECK(strcmp(mt_schedule_kind_name((mt_schedule_kind)k), names[k]) == 0, "kind %d", k);
        mt_schedule_kind back;
        MT_CHECK_OK(mt_schedule_kind_parse(names[k], &back));
        MT_CHECK((int)back == k, "parse '%s'", names[k]);
    }
    MT_CHECK(mt_schedule_kind_name(MT_SCHEDULE_N_KINDS) == NULL, "past the last kind");
    mt_schedule_kind k;
    MT_CHECK_FAILS(mt_schedule_kind_parse("zb-h3", &k), MT_EINVAL, "'zb-h3'", "zb-h1", "dualpipev");
}

/* Issue 10's cases: every kind at (2,4), (2,8), (4,4), (4,8), (8,16). */
MT_TEST(every_kind_matches_its_formulas_at_the_issues_sizes) {
    static const int PM[5][2] = {{2, 4}, {2, 8}, {4, 4}, {4, 8}, {8, 16}};
    for (int k = 0; k < MT_SCHEDULE_N_KINDS; k++)
        for (int c = 0; c < 5; c++) {
            int p = PM[c][0], m = PM[c][1];
            if (k == MT_SCHEDULE_DUALPIPEV && m < 2 * p) {
                mt_schedule *s;
                MT_CHECK_FAILS(mt_schedule_make(MT_SCHEDULE_DUALPIPEV, p, m, 0, &s), MT_EINVAL,
                               "m >= 2p", "m = 4", "p = 4");
                continue;
            }
            check_kind((mt_schedule_kind)k, p, m, 0);
        }
}

/* The same tables over a grid: p up to 8, m from p to 3p+1, interleaved with
 * v = 2, 3, 4 where p divides m; the fallbacks of zb-h2 and zb-v included. */
MT_TEST(every_kind_matches_its_formulas_over_a_grid) {
    for (int p = 1; p <= 8; p++)
        for (int m = p; m <= 3 * p + 1; m++)
            for (int k = 0; k < MT_SCHEDULE_N_KINDS; k++) {
                if (k == MT_SCHEDULE_DUALPIPEV && m < 2 * p) continue;
                if (k == MT_SCHEDULE_INTERLEAVED) {
                    if (m % p == 0)
                        for (int v = 2; v <= 4; v++) check_kind((mt_schedule_kind)k, p, m, v);
                    continue;
                }
                check_kind((mt_schedule_kind)k, p, m, 0);
            }
}

/* ZB-H1 at p = 4, m = 8, device 0 by hand: 4 forwards, 3 idle, then B, F,
 * W in turn (W not deferred on the first stage), the last B and W paired. */
MT_TEST(zb_h1_first_stage_by_hand) {
    mt_schedule *s;
    MT_CHECK_OK(mt_schedule_make(MT_SCHEDULE_ZB_H1, 4, 8, 0, &s));
    const char *want = "F0 F1 F2 F3 B0 F4 W0 B1 F5 W1 B2 F6 W2 B3 F7 W3 B4 W4 B5 W5 B6 W6 B7 W7";
    char got[256] = "";
    size_t at = 0;
    const mt_pipe_op *ops = mt_schedule_ops(s, 0);
    for (int i = 0; i < mt_schedule_n_ops(s, 0); i++)
        at += (size_t)snprintf(got + at, sizeof got - at, "%s%s%d", i ? " " : "",
                               mt_pipe_op_name(ops[i].type), ops[i].mb);
    MT_CHECK(strcmp(got, want) == 0, "device 0: %s\nwant:     %s", got, want);
    mt_pipe_sim sim;
    MT_CHECK_OK(mt_schedule_simulate(s, NULL, 0, &sim));
    MT_CHECK_CLOSE(sim.start[0][4], 7, 0, "B0 on device 0 starts at 2p-1 = 7");
    mt_pipe_sim_free(&sim);
    mt_schedule_free(s);
}

/* The V shape places chunks i and 2p-1-i on device i; interleaved i + c·p. */
MT_TEST(chunk_placement) {
    mt_schedule *s;
    MT_CHECK_OK(mt_schedule_make(MT_SCHEDULE_ZB_V, 4, 8, 0, &s));
    static const int V[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    for (int c = 0; c < 8; c++)
        MT_CHECK(mt_schedule_chunk_device(s, c) == V[c], "zb-v chunk %d", c);
    MT_CHECK(mt_schedule_chunk_device(s, 8) == -1, "out of range");
    mt_schedule_free(s);
    MT_CHECK_OK(mt_schedule_make(MT_SCHEDULE_INTERLEAVED, 4, 8, 3, &s));
    for (int c = 0; c < 12; c++)
        MT_CHECK(mt_schedule_chunk_device(s, c) == c % 4, "interleaved chunk %d", c);
    mt_schedule_free(s);
}

MT_TEST(preconditions_name_the_rule_and_the_numbers) {
    mt_schedule *s;
    MT_CHECK_FAILS(mt_schedule_make(MT_SCHEDULE_1F1B, 4, 3, 0, &s), MT_EINVAL, "1f1b", "m >= p",
                   "m = 3", "p = 4");
    MT_CHECK_FAILS(mt_schedule_make(MT_SCHEDULE_ZB_V, 4, 2, 0, &s), MT_EINVAL, "m >= p");
    MT_CHECK_FAILS(mt_schedule_make(MT_SCHEDULE_INTERLEAVED, 4, 6, 2, &s), MT_EINVAL,
                   "divisible", "m = 6", "p = 4", "4 or 8");
    MT_CHECK_FAILS(mt_schedule_make(MT_SCHEDULE_DUALPIPEV, 4, 7, 0, &s), MT_EINVAL, "dualpipev",
                   "m >= 2p", "m = 7", "8");
    MT_CHECK_FAILS(mt_schedule_make(MT_SCHEDULE_ZB_H1, 4, 8, 2, &s), MT_EINVAL, "zb-h1", "1 chunk",
                   "got 2");
    MT_CHECK_FAILS(mt_schedule_make(MT_SCHEDULE_ZB_V, 4, 8, 3, &s), MT_EINVAL, "2 chunks", "got 3");
    MT_CHECK_FAILS(mt_schedule_make(MT_SCHEDULE_INTERLEAVED, 4, 8, 1, &s), MT_EINVAL,
                   "2 to 64 chunks", "got 1");
    MT_CHECK_FAILS(mt_schedule_make(MT_SCHEDULE_1F1B, 0, 8, 0, &s), MT_EINVAL, "stages", "got 0");
    MT_CHECK(s == NULL, "no schedule on failure");
    /* the fallbacks build and say so */
    MT_CHECK_OK(mt_schedule_make(MT_SCHEDULE_ZB_H2, 4, 5, 0, &s));
    MT_CHECK(strstr(mt_schedule_note(s), "2p-1 = 7") && strstr(mt_schedule_note(s), "= 2 time"),
             "zb-h2 note: %s", mt_schedule_note(s));
    mt_schedule_free(s);
    MT_CHECK_OK(mt_schedule_make(MT_SCHEDULE_ZB_V, 4, 5, 0, &s));
    MT_CHECK(strstr(mt_schedule_note(s), "2p-1 = 7") && strstr(mt_schedule_note(s), "= 1 time"),
             "zb-v note: %s", mt_schedule_note(s));
    mt_schedule_free(s);
}

/* ---- corrupted schedules ------------------------------------------------------ */

/* A copy of kind's lists at (p, m), to corrupt; rebuilt with rebuild(). */
typedef struct {
    mt_schedule *s;
    mt_pipe_op  *ops[16];
    int          n[16];
} lists;

static lists copy_of(mt_schedule_kind k, int p, int m) {
    lists L = {0};
    MT_CHECK_OK(mt_schedule_make(k, p, m, 0, &L.s));
    for (int d = 0; d < p; d++) {
        L.n[d] = mt_schedule_n_ops(L.s, d);
        L.ops[d] = malloc(sizeof(mt_pipe_op) * (size_t)(L.n[d] + 1));
        memcpy(L.ops[d], mt_schedule_ops(L.s, d), sizeof(mt_pipe_op) * (size_t)L.n[d]);
    }
    return L;
}

static int find(const lists *L, int d, mt_pipe_op_type t, int mb, int chunk) {
    for (int i = 0; i < L->n[d]; i++)
        if (L->ops[d][i].type == t && L->ops[d][i].mb == mb && L->ops[d][i].chunk == chunk)
            return i;
    MT_CHECK(0, "device %d has no %s mb %d chunk %d", d, mt_pipe_op_name(t), mb, chunk);
    return -1;
}

/* Moves device d's op from position `from` to position `to`. */
static void move(lists *L, int d, int from, int to) {
    mt_pipe_op op = L->ops[d][from];
    if (from < to) memmove(&L->ops[d][from], &L->ops[d][from + 1], sizeof op * (size_t)(to - from));
    else memmove(&L->ops[d][to + 1], &L->ops[d][to], sizeof op * (size_t)(from - to));
    L->ops[d][to] = op;
}

static void rebuild(lists *L) {
    for (int d = 0; d < mt_schedule_stages(L->s); d++)
        MT_CHECK_OK(mt_schedule_set_ops(L->s, d, L->ops[d], L->n[d]));
}

static void done(lists *L) {
    for (int d = 0; d < mt_schedule_stages(L->s); d++) free(L->ops[d]);
    mt_schedule_free(L->s);
}

MT_TEST(a_missing_w_is_named) {
    lists L = copy_of(MT_SCHEDULE_ZB_H1, 4, 8);
    int i = find(&L, 2, MT_PIPE_W, 5, 2);
    move(&L, 2, i, L.n[2] - 1);
    L.n[2]--;
    rebuild(&L);
    int b = find(&L, 2, MT_PIPE_B, 5, 2);
    char op[64];
    snprintf(op, sizeof op, "device 2 op #%d (B mb 5 chunk 2) has no W", b);
    MT_CHECK_FAILS(mt_schedule_validate(L.s, NULL), MT_EINVAL, op, "its own W");
    mt_pipe_sim sim;
    MT_CHECK_FAILS(mt_schedule_simulate(L.s, NULL, 0, &sim), MT_EINVAL, op);
    done(&L);
}

MT_TEST(a_duplicated_op_is_named) {
    lists L = copy_of(MT_SCHEDULE_1F1B, 4, 8);
    int i = find(&L, 1, MT_PIPE_F, 3, 1);
    L.ops[1][L.n[1]++] = L.ops[1][i];
    rebuild(&L);
    char op[96];
    snprintf(op, sizeof op, "device 1 op #%d (F mb 3 chunk 1) clashes with op #%d", L.n[1] - 1, i);
    MT_CHECK_FAILS(mt_schedule_validate(L.s, NULL), MT_EINVAL, op, "exactly one F");
    done(&L);
}

/* Device 0 runs B0 before F1: its B0 waits for device 1's B0, which waits
 * (through device 1's F1) for device 0's F1, behind the B0: a cycle. */
MT_TEST(a_swapped_dependency_deadlocks_and_names_the_ops) {
    lists L = copy_of(MT_SCHEDULE_ZB_H1, 4, 8);
    move(&L, 0, find(&L, 0, MT_PIPE_B, 0, 0), 1);
    rebuild(&L);
    MT_CHECK_FAILS(mt_schedule_validate(L.s, NULL), MT_EINVAL, "deadlock",
                   "device 0 op #1 (B mb 0 chunk 0) waits for B mb 0 chunk 1 on device 1",
                   "device 1 op #1 (F mb 1 chunk 1) waits for F mb 1 chunk 0 on device 0 "
                   "(its op #2)");
    done(&L);
}

/* Swapping two B's across the chunk order on one device of the V: device
 * p-1 holds chunks p-1 and p, and B of chunk p-1 must follow B of chunk p. */
MT_TEST(a_swapped_dependency_on_one_device_is_named) {
    lists L = copy_of(MT_SCHEDULE_ZB_V, 4, 8);
    int lo = find(&L, 3, MT_PIPE_B, 2, 3), hi = find(&L, 3, MT_PIPE_B, 2, 4);
    MT_CHECK(hi < lo, "B of chunk 4 runs first");
    mt_pipe_op t = L.ops[3][lo];
    L.ops[3][lo] = L.ops[3][hi];
    L.ops[3][hi] = t;
    rebuild(&L);
    char op[96];
    snprintf(op, sizeof op, "device 3 op #%d (B mb 2 chunk 3) comes before op #%d (B mb 2 chunk "
             "4)", hi, lo);
    MT_CHECK_FAILS(mt_schedule_validate(L.s, NULL), MT_EINVAL, op,
                   "after the backward of the chunk after it");
    done(&L);
    /* and a W before its own B */
    L = copy_of(MT_SCHEDULE_ZB_H2, 4, 8);
    int b = find(&L, 3, MT_PIPE_B, 0, 3), w = find(&L, 3, MT_PIPE_W, 0, 3);
    move(&L, 3, w, b);
    rebuild(&L);
    snprintf(op, sizeof op, "device 3 op #%d (W mb 0 chunk 3) comes before op #%d (B mb 0 chunk "
             "3)", b, b + 1);
    MT_CHECK_FAILS(mt_schedule_validate(L.s, NULL), MT_EINVAL, op, "a W runs after its own B");
    done(&L);
}

MT_TEST(ops_out_of_place_are_named) {
    lists L = copy_of(MT_SCHEDULE_1F1B, 4, 8);
    L.ops[2][3].chunk = 1;   /* chunk 1 lives on device 1 */
    rebuild(&L);
    MT_CHECK_FAILS(mt_schedule_validate(L.s, NULL), MT_EINVAL, "device 2 op #3",
                   "chunk 1 lives on device 1, not 2");
    L.ops[2][3].chunk = 2;
    L.ops[2][3].mb = 8;
    rebuild(&L);
    MT_CHECK_FAILS(mt_schedule_validate(L.s, NULL), MT_EINVAL, "device 2 op #3",
                   "microbatch 8 is out of range [0, 8)");
    done(&L);
    /* a B and W where the pair already has a BW */
    L = copy_of(MT_SCHEDULE_1F1B, 2, 2);
    mt_pipe_op extra = {MT_PIPE_W, 1, 1};
    L.ops[1][L.n[1]++] = extra;
    rebuild(&L);
    MT_CHECK_FAILS(mt_schedule_validate(L.s, NULL), MT_EINVAL, "(W mb 1 chunk 1)",
                   "one B and one W, or one BW");
    done(&L);
    /* a missing F */
    L = copy_of(MT_SCHEDULE_GPIPE, 2, 2);
    move(&L, 1, find(&L, 1, MT_PIPE_F, 1, 1), L.n[1] - 1);
    L.n[1]--;
    rebuild(&L);
    MT_CHECK_FAILS(mt_schedule_validate(L.s, NULL), MT_EINVAL, "device 1 has no F mb 1 chunk 1");
    done(&L);
}

/* ---- the simulator against timelines by hand ----------------------------------- */

/* 1F1B, p = 2, m = 2, costs 1,1,1 and COMM c (BW = 2):
 *   device 0: F0 [0,1] F1 [1,2]; device 1: F0 [1+c, 2+c] BW0 [2+c, 4+c]
 *   F1 [4+c, 5+c] BW1 [5+c, 7+c]; device 0: BW0 [4+2c, 6+2c] BW1 [7+2c, 9+2c]. */
/* kind k at (p, m) simulated at costs c into *sim; the schedule is the caller's */
static mt_schedule *simulated(mt_schedule_kind k, int p, int m, mt_pipe_costs c, mt_pipe_sim *sim) {
    mt_schedule *s;
    MT_CHECK_OK(mt_schedule_make(k, p, m, 0, &s));
    MT_CHECK_OK(mt_schedule_simulate(s, &c, 0, sim));
    return s;
}

MT_TEST(communication_delays_messages_only) {
    mt_pipe_sim sim;
    mt_schedule *s = simulated(MT_SCHEDULE_1F1B, 2, 2, (mt_pipe_costs){1, 1, 1, 0.5}, &sim);
    static const double S0[4] = {0, 1, 5, 8}, S1[4] = {1.5, 2.5, 4.5, 5.5};
    for (int i = 0; i < 4; i++) {
        MT_CHECK_CLOSE(sim.start[0][i], S0[i], 1e-12, "device 0 op %d", i);
        MT_CHECK_CLOSE(sim.start[1][i], S1[i], 1e-12, "device 1 op %d", i);
    }
    MT_CHECK_CLOSE(sim.makespan, 10, 1e-12, "makespan 9 + 2c");
    MT_CHECK_CLOSE(sim.span[1], 6, 1e-12, "device 1's span");
    mt_pipe_sim_free(&sim);
    mt_schedule_free(s);
}

/* The V's turn on device p-1 is local: chunk p-1 hands chunk p its output
 * without a message. zb-v at p = 1, m = 1, COMM 5: F0 F1 B1 B0 W W, no wait. */
MT_TEST(same_device_dependencies_cost_no_message) {
    mt_pipe_sim sim;
    mt_schedule *s = simulated(MT_SCHEDULE_ZB_V, 1, 1, (mt_pipe_costs){1, 1, 1, 5}, &sim);
    MT_CHECK_CLOSE(sim.makespan, 3, 1e-12, "six half-unit ops back to back");
    mt_pipe_sim_free(&sim);
    mt_schedule_free(s);
}

/* ZB-H1, p = 2, m = 2, device 1 (W deferred by 1): F0 B0 F1 B1 W0 W1. With
 * w_memory 0.5: 1, 0.5, 1.5, 1, 0.5, 0 -> peak 1.5 (1 with w_memory 0). */
MT_TEST(w_memory_holds_activations_until_w) {
    mt_schedule *s;
    MT_CHECK_OK(mt_schedule_make(MT_SCHEDULE_ZB_H1, 2, 2, 0, &s));
    mt_pipe_sim sim;
    MT_CHECK_OK(mt_schedule_simulate(s, NULL, 0.5, &sim));
    MT_CHECK_CLOSE(sim.peak_activations[1], 1.5, 1e-12, "device 1");
    MT_CHECK_CLOSE(sim.peak_activations[0], 2, 1e-12, "device 0: F0 F1 first");
    mt_pipe_sim_free(&sim);
    mt_pipe_costs bad = {.f = 1, .b = 0, .w = 1, .comm = 0};
    MT_CHECK_FAILS(mt_schedule_simulate(s, &bad, 0, &sim), MT_EINVAL, "B=0", "> 0");
    MT_CHECK_FAILS(mt_schedule_simulate(s, NULL, 1.5, &sim), MT_EINVAL, "w_memory 1.5", "[0, 1]");
    /* finite but huge: the sums would overflow to inf (a makespan of inf,
     * a NaN bubble, an SVG axis that never ends) */
    mt_pipe_costs huge = {1e308, 1e308, 1e308, 0};
    MT_CHECK_FAILS(mt_schedule_simulate(s, &huge, 0, &sim), MT_EINVAL, "F=1e+308", "at most 1e+12");
    mt_pipe_costs big = {1e12, 1e12, 1e12, 1e12};   /* the largest allowed: finite results */
    MT_CHECK_OK(mt_schedule_simulate(s, &big, 0, &sim));
    MT_CHECK(isfinite(sim.makespan) && sim.makespan > 0 && isfinite(sim.bubble_rate),
             "makespan %g, bubble rate %g", sim.makespan, sim.bubble_rate);
    mt_pipe_sim_free(&sim);
    mt_schedule_free(s);
}

/* ---- JSON, text, SVG ----------------------------------------------------------- */

static char *json_of(const mt_schedule *s, size_t *len) {
    mt_pipe_sim sim;
    MT_CHECK_OK(mt_schedule_simulate(s, NULL, 0, &sim));
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    MT_CHECK_OK(mt_schedule_write_json(s, &sim, f));
    fclose(f);
    mt_pipe_sim_free(&sim);
    return buf;
}

MT_TEST(json_round_trip) {
    for (int k = 0; k < MT_SCHEDULE_N_KINDS; k++) {
        mt_schedule *s, *back;
        int v = k == MT_SCHEDULE_INTERLEAVED ? 3 : 0;
        MT_CHECK_OK(mt_schedule_make((mt_schedule_kind)k, 4, 8, v, &s));
        size_t len;
        char *text = json_of(s, &len);
        MT_CHECK(strncmp(text, "{\"kind\":\"", 9) == 0 && strstr(text, "\"stages\":4") &&
                 strstr(text, "\"microbatches\":8") && strstr(text, "\"bubble_rate\":") &&
                 strstr(text, "\"peak_activations\":[") && strstr(text, "\"ops\":[") &&
                 strstr(text, "{\"type\":\"F\",\"mb\":0,\"chunk\":0,\"start\":0,\"end\":"),
                 "%s: %.300s", kname((mt_schedule_kind)k), text);
        MT_CHECK_OK(mt_schedule_read_json(text, len, &back));
        MT_CHECK(mt_schedule_get_kind(back) == (mt_schedule_kind)k &&
                 mt_schedule_stages(back) == 4 && mt_schedule_microbatches(back) == 8 &&
                 mt_schedule_chunks(back) == mt_schedule_chunks(s), "%s: header", kname(k));
        for (int d = 0; d < 4; d++) {
            MT_CHECK(mt_schedule_n_ops(back, d) == mt_schedule_n_ops(s, d), "device %d", d);
            MT_CHECK(memcmp(mt_schedule_ops(back, d), mt_schedule_ops(s, d),
                            sizeof(mt_pipe_op) * (size_t)mt_schedule_n_ops(s, d)) == 0,
                     "%s device %d: the same ops", kname(k), d);
        }
        MT_CHECK_OK(mt_schedule_validate(back, NULL));
        free(text);
        mt_schedule_free(back);
        mt_schedule_free(s);
    }
}

/* Hand edits: start and end are ignored, statistics may be stale or gone;
 * a W taken out is caught by the validator, naming the op. */
MT_TEST(json_hand_edited) {
    const char *text =
        "{ \"kind\": \"1f1b\", \"stages\": 2, \"microbatches\": 2, \"makespan\": 123,\n"
        "  \"ops\": [ [ {\"type\":\"F\",\"mb\":0,\"chunk\":0}, {\"type\":\"F\",\"mb\":1,\"chunk\":0},\n"
        "               {\"type\":\"BW\",\"mb\":0,\"chunk\":0,\"start\":-7}, {\"chunk\":0,\"mb\":1,\"type\":\"BW\"} ],\n"
        "             [ {\"type\":\"F\",\"mb\":0,\"chunk\":1}, {\"type\":\"B\",\"mb\":0,\"chunk\":1},\n"
        "               {\"type\":\"W\",\"mb\":0,\"chunk\":1}, {\"type\":\"F\",\"mb\":1,\"chunk\":1},\n"
        "               {\"type\":\"B\",\"mb\":1,\"chunk\":1} ] ] }\n";
    mt_schedule *s;
    MT_CHECK_OK(mt_schedule_read_json(text, strlen(text), &s));
    MT_CHECK(mt_schedule_n_ops(s, 1) == 5, "5 ops on device 1");
    MT_CHECK_FAILS(mt_schedule_validate(s, NULL), MT_EINVAL,
                   "device 1 op #4 (B mb 1 chunk 1) has no W");
    mt_schedule_free(s);
}

static void json_fails(const char *text, const char *want1, const char *want2) {
    mt_schedule *s = NULL;
    MT_CHECK_FAILS(mt_schedule_read_json(text, strlen(text), &s), MT_EFORMAT, want1, want2);
    MT_CHECK(s == NULL, "no schedule for '%s'", text);
}

MT_TEST(json_errors_give_the_place) {
    json_fails("{\"kind\":\"1f1b\",\"stages\":1,\"microbatches\":1,\"ops\":[[]]", "byte 53",
               "',' or '}'");
    json_fails("{\"kind\":\"1f1b\",\"stages\":1,\"colour\":1}", "byte 26", "unknown key \"colour\"");
    json_fails("{\"kind\":\"1f1b\",\"stages\":1.5}", "byte 24", "\"stages\" must be an integer");
    json_fails("{\"kind\":\"1f1b\",\"stages\":1,\"microbatches\":1,\"ops\":[[{\"type\":\"F\","
               "\"chunk\":0}]]}", "device 0 op #0", "missing \"mb\"");
    json_fails("{\"kind\":\"1f1b\",\"stages\":1,\"microbatches\":1,\"ops\":[[{\"type\":\"F\","
               "\"mb\":0,\"chunk\":0},{\"type\":\"X\",\"mb\":0,\"chunk\":0}]]}",
               "device 0 op #1", "type 'X' is not F, B, W or BW");
    json_fails("{\"kind\":\"zb-h9\",\"stages\":1,\"microbatches\":1,\"ops\":[[]]}", "zb-h9",
               "kinds:");
    json_fails("{\"kind\":\"1f1b\",\"stages\":2,\"microbatches\":1,\"ops\":[[]]}",
               "1 device list", "\"stages\" is 2");
    json_fails("{\"kind\":\"1f1b\",\"stages\":1,\"microbatches\":1}", "missing \"ops\"", "needs");
    json_fails("{\"kind\":\"1f1b\",\"stages\":1,\"stages\":1}", "\"stages\" appears twice",
               "byte 26");
    json_fails("{\"kind\":\"1f1b\"} x", "byte 16", "the end of the text");
    json_fails("", "byte 0", "'{'");
}

/* Sizes a schedule cannot have are the file's fault (MT_EFORMAT, so the CLI
 * exits 1, not 2), found before anything divides by them: "stages":0 of an
 * interleaved schedule divided by p to find v (SIGFPE). */
MT_TEST(json_sizes_out_of_range) {
    static const char *const KINDS[] = {"interleaved", "1f1b", "zb-v", "dualpipev"};
    for (int k = 0; k < 4; k++) {
        char text[256];
        snprintf(text, sizeof text, "{\"kind\":\"%s\",\"stages\":0,\"microbatches\":8,"
                 "\"ops\":[]}", KINDS[k]);
        json_fails(text, "\"stages\" must be an integer from 1 to 1024", "got 0");
        snprintf(text, sizeof text, "{\"kind\":\"%s\",\"stages\":-1,\"microbatches\":8,"
                 "\"ops\":[]}", KINDS[k]);
        json_fails(text, "\"stages\" must be an integer from 1 to 1024", "got -1");
    }
    json_fails("{\"kind\":\"1f1b\",\"stages\":2147483647,\"microbatches\":8,\"ops\":[]}",
               "from 1 to 1024", "got 2147483647");
    json_fails("{\"kind\":\"1f1b\",\"stages\":1,\"microbatches\":0,\"ops\":[[]]}",
               "\"microbatches\" must be an integer from 1", "got 0");
    json_fails("{\"kind\":\"1f1b\",\"stages\":1,\"microbatches\":-5,\"ops\":[[]]}",
               "\"microbatches\"", "got -5");
    json_fails("{\"kind\":\"1f1b\",\"stages\":1,\"microbatches\":99999999,\"ops\":[[]]}",
               "\"microbatches\"", "got 99999999");
    /* within each bound, but p·m·v·3 past MT_SCHEDULE_MAX_OPS */
    json_fails("{\"kind\":\"interleaved\",\"stages\":1024,\"microbatches\":16777216,"
               "\"ops\":[]}", "\"ops\" has 0 device lists", "\"stages\" is 1024");
    json_fails("{\"kind\":\"zb-v\",\"stages\":1,\"microbatches\":16777216,\"ops\":[[]]}",
               "schedule JSON:", "more than the 16777216 allowed");
    json_fails("{\"kind\":\"1f1b\",\"stages\":1,\"microbatches\":1,\"ops\":[[{\"type\":"
               "\"F\",\"mb\":-1,\"chunk\":0}]]}", "\"mb\" must be an integer from 0", "got -1");
    json_fails("{\"kind\":\"1f1b\",\"stages\":1,\"microbatches\":1,\"ops\":[[{\"type\":"
               "\"F\",\"mb\":0,\"chunk\":2147483648}]]}", "\"chunk\"", "got 2147483648");
}

/* ---- time-shared cores (mt_schedule_simulate_shared) ------------------------ */

/* 1F1B, p = 2, m = 2, F = 1, BW = 2 (B = W = 1), no messages, both devices on
 * one core (slots 1): by hand, with the rate 1/2 while both work.
 *   t 0-1  d0 F0 alone                      t 5-7  d0 BW0, d1 F1 at 1/2
 *   t 1-3  d0 F1, d1 F0 at 1/2              t 7-9  d0 BW0 (1 left), d1 BW1 at 1/2
 *   t 3-5  d1 BW0 alone (d0 waits for it)   t 9-10 d1 BW1 (1 left) alone
 *   t 10-12 d0 BW1 alone
 * Unshared (slots 2) it is 9 (communication_delays_messages_only at c = 0);
 * two copies side by side on two slots are one copy on one. */
MT_TEST(shared_cores_by_hand) {
    mt_schedule *s;
    MT_CHECK_OK(mt_schedule_make(MT_SCHEDULE_1F1B, 2, 2, 0, &s));
    const mt_pipe_costs c[2] = {{1, 1, 1, 0}, {1, 1, 1, 0}};
    static const double S0[4] = {0, 1, 5, 10}, E0[4] = {1, 3, 9, 12};
    static const double S1[4] = {1, 3, 5, 7}, E1[4] = {3, 5, 7, 10};
    for (int copies = 1; copies <= 2; copies++) {
        mt_pipe_sim sim;
        MT_CHECK_OK(mt_schedule_simulate_shared(s, c, 0, copies, copies, &sim));
        for (int i = 0; i < 4; i++) {
            MT_CHECK_CLOSE(sim.start[0][i], S0[i], 1e-12, "%d copies: device 0 op %d", copies, i);
            MT_CHECK_CLOSE(sim.end[0][i], E0[i], 1e-12, "%d copies: device 0 op %d", copies, i);
            MT_CHECK_CLOSE(sim.start[1][i], S1[i], 1e-12, "%d copies: device 1 op %d", copies, i);
            MT_CHECK_CLOSE(sim.end[1][i], E1[i], 1e-12, "%d copies: device 1 op %d", copies, i);
        }
        MT_CHECK_CLOSE(sim.makespan, 12, 1e-12, "%d copies: the work of one copy", copies);
        MT_CHECK_CLOSE(sim.busy[0], 1 + 2 + 4 + 2, 1e-12, "device 0's ops' wall time");
        mt_pipe_sim_free(&sim);
    }
    mt_pipe_sim sim;
    MT_CHECK_OK(mt_schedule_simulate_shared(s, c, 0, 1, 2, &sim));
    MT_CHECK_CLOSE(sim.makespan, 9, 1e-12, "a slot a device: unshared");
    mt_pipe_sim_free(&sim);
    MT_CHECK_FAILS(mt_schedule_simulate_shared(s, c, 0, 0, 1, &sim), MT_EINVAL, "0 replicas");
    MT_CHECK_FAILS(mt_schedule_simulate_shared(s, c, 0, 1, 0, &sim), MT_EINVAL, "slots > 0");
    mt_schedule_free(s);
}

/* Every kind, against what holds whatever the schedule:
 *  - one slot, no messages: a core that never idles while work is left (a
 *    valid schedule always has an op ready), so the makespan is the sum of
 *    every op's cost;
 *  - any slots: no device ever runs slower than its static share
 *    slots / (replicas p), so no later than the unshared simulation at costs
 *    scaled by replicas p / slots, and no sooner than the work over the
 *    slots allows;
 *  - slots >= replicas p: exactly the unshared simulation. */
MT_TEST(shared_cores_bounds_every_kind) {
    for (int k = 0; k < MT_SCHEDULE_N_KINDS; k++) {
        const int p = 4, m = 8;
        mt_schedule *s;
        MT_CHECK_OK(mt_schedule_make((mt_schedule_kind)k, p, m, 0, &s));
        mt_pipe_costs c[64], scaled[64];
        int n_chunks = 0;
        for (int d = 0; d < p; d++)
            for (int i = 0; i < mt_schedule_n_ops(s, d); i++)
                if (mt_schedule_ops(s, d)[i].chunk + 1 > n_chunks)
                    n_chunks = mt_schedule_ops(s, d)[i].chunk + 1;
        MT_CHECK(n_chunks <= 64, "%d chunks", n_chunks);
        for (int j = 0; j < n_chunks; j++)   /* unequal chunks, as a model's are */
            c[j] = (mt_pipe_costs){.f = 1 + 0.25 * (j % 3), .b = 1.5 + 0.1 * j, .w = 0.5, .comm = 0};
        mt_pipe_sim one, base;
        MT_CHECK_OK(mt_schedule_simulate_chunks(s, c, 0, &base));
        double work = 0;
        for (int d = 0; d < p; d++) work += base.busy[d];
        MT_CHECK_OK(mt_schedule_simulate_shared(s, c, 0, 1, 1, &one));
        MT_CHECK_CLOSE(one.makespan, work, 1e-9, "%s: one slot: the sum of the costs",
                       mt_schedule_kind_name((mt_schedule_kind)k));
        mt_pipe_sim_free(&one);
        static const struct { int replicas; double slots; } G[] = {
            {1, 1.5}, {1, 3}, {2, 2}, {2, 3}, {4, 2}, {2, 8}, {1, 4}};
        for (size_t g = 0; g < sizeof G / sizeof G[0]; g++) {
            const double f = G[g].replicas * p / G[g].slots;
            for (int j = 0; j < n_chunks; j++) {
                scaled[j] = c[j];
                scaled[j].comm = 0.5;
                if (f > 1) scaled[j].f *= f, scaled[j].b *= f, scaled[j].w *= f;
            }
            mt_pipe_costs cm[64];
            for (int j = 0; j < n_chunks; j++) cm[j] = c[j], cm[j].comm = 0.5;
            mt_pipe_sim sh, st;
            MT_CHECK_OK(mt_schedule_simulate_shared(s, cm, 0, G[g].replicas, G[g].slots, &sh));
            MT_CHECK_OK(mt_schedule_simulate_chunks(s, scaled, 0, &st));
            const char *name = mt_schedule_kind_name((mt_schedule_kind)k);
            MT_CHECK(sh.makespan <= st.makespan * (1 + 1e-12), "%s on %d x %g slots: %g after "
                     "the static share's %g", name, G[g].replicas, G[g].slots, sh.makespan,
                     st.makespan);
            MT_CHECK(sh.makespan >= G[g].replicas * work / G[g].slots * (1 - 1e-12) - 1e-12,
                     "%s on %d x %g slots: %g before the work allows", name, G[g].replicas,
                     G[g].slots, sh.makespan);
            if (f <= 1) {
                for (int d = 0; d < p; d++)
                    for (int i = 0; i < mt_schedule_n_ops(s, d); i++)
                        MT_CHECK(sh.end[d][i] == st.end[d][i], "%s on %d x %g slots: device "
                                 "%d op %d ends at %g, unshared %g", name, G[g].replicas,
                                 G[g].slots, d, i, sh.end[d][i], st.end[d][i]);
            }
            mt_pipe_sim_free(&sh);
            mt_pipe_sim_free(&st);
        }
        mt_pipe_sim_free(&base);
        mt_schedule_free(s);
    }
}

/* mt_pipe_costs_check on its own: what simulate refuses, before any other
 * work; NaN and infinities among them. */
MT_TEST(costs_check) {
    MT_CHECK_OK(mt_pipe_costs_check(&(mt_pipe_costs){1, 2, 1, 0.5}, 0.5));
    MT_CHECK_FAILS(mt_pipe_costs_check(&(mt_pipe_costs){NAN, 1, 1, 0}, 0), MT_EINVAL, "F=nan",
                   "finite");
    MT_CHECK_FAILS(mt_pipe_costs_check(&(mt_pipe_costs){1, INFINITY, 1, 0}, 0), MT_EINVAL,
                   "B=inf", "finite");
    MT_CHECK_FAILS(mt_pipe_costs_check(&(mt_pipe_costs){1, 1, -1, 0}, 0), MT_EINVAL, "W=-1",
                   ">= 0");
    MT_CHECK_FAILS(mt_pipe_costs_check(&(mt_pipe_costs){1, 1, 1, 2e12}, 0), MT_EINVAL,
                   "COMM=2e+12", "at most 1e+12");
    MT_CHECK_FAILS(mt_pipe_costs_check(&(mt_pipe_costs){1, 1, 1, 0}, NAN), MT_EINVAL,
                   "w_memory nan", "[0, 1]");
    MT_CHECK_FAILS(mt_pipe_costs_check(NULL, 0), MT_EINVAL, "no costs");
}

MT_TEST(text_and_svg_writers) {
    mt_schedule *s;
    MT_CHECK_OK(mt_schedule_make(MT_SCHEDULE_ZB_H1, 4, 8, 0, &s));
    mt_pipe_sim sim;
    MT_CHECK_OK(mt_schedule_simulate(s, NULL, 0, &sim));
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    MT_CHECK_OK(mt_schedule_write_timeline(s, &sim, f));
    fclose(f);
    /* 3 columns a unit: device 0 idles 3 units (9 columns) after F3 */
    MT_CHECK(strstr(buf, "dev 0 | F0 F1 F2 F3 .........B0 F4 W0 B1") != NULL, "%s", buf);
    MT_CHECK(strstr(buf, "dev 3 | .........F0 B0 F1 B1") != NULL, "%s", buf);
    free(buf);
    f = open_memstream(&buf, &len);
    MT_CHECK_OK(mt_schedule_write_svg(s, &sim, NULL, f));
    fclose(f);
    MT_CHECK(strncmp(buf, "<svg ", 5) == 0 && strstr(buf, "</svg>\n") &&
             strstr(buf, "zb-h1, p = 4, m = 8: bubble rate 11.1%, makespan 27") &&
             strstr(buf, "font-size=\"12\"") && strstr(buf, "W weight gradient") &&
             strstr(buf, ">device 3</text>"), "%.600s", buf);
    int boxes = 0;
    for (const char *p = buf; (p = strstr(p, "stroke-width=\"1\"")); p++) boxes++;
    MT_CHECK(boxes == 4 * 3 * 8, "one box per op: %d", boxes);
    free(buf);
    mt_pipe_sim_free(&sim);
    mt_schedule_free(s);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
