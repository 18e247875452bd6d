/*
 * sched_zb.c — the handcrafted zero-bubble schedules of Qi et al. (ICLR
 * 2024), ZB-H1 and ZB-H2: B and W split, each stage deferring its W so that
 * the backward chain between stages runs on B alone.
 *
 * Both share one shape, written for stage i:
 *
 *   warm-up   `warm` forwards F0 .. F(warm-1)
 *   steady    for k = 0 .. m-1:  B(k), then the next forward if any, then
 *             W(k - lag) once k >= lag
 *   tail      the W left, in microbatch order
 *
 *              warm                lag   bubble (unit costs)   peak on stage i
 *   ZB-H1      p - i               i     p - 1                 p - i
 *   ZB-H2      min(2p-1-2i, m)     2i    max(0, 2p-1-m)        min(2p-1-2i, m)
 *
 * ZB-H1 keeps 1F1B's warm-up (p-1-i, plus the first steady forward) and so
 * its peak. With unit costs its bubble is (p-1)(T_F+T_B-T_W) = p-1: the
 * first stage waits p-1 after its p forwards for the first B, and the
 * deferred W fill every later gap. ZB-H2 fills that wait with forwards:
 * stage 0 runs 2p-1 of them before its first B arrives at t = 2p-1, and the
 * W deferred by 2i let the B chain of the last microbatches pass without
 * waiting, so every stage is busy from its first op to its last:
 * (p-1)(T_F+T_B-2T_W) = 0. With fewer than 2p-1 microbatches the warm-up
 * is cut to m and the first stage idles 2p-1-m before its first B; the
 * schedule's note says so.
 */
#include "pipeline/pipeline_impl.h"

#include <stdio.h>

static void build_deferred_w(mt_schedule *s, int i, int warm, int lag) {
    int m = s->m, next_f = 0, next_w = 0;
    for (; next_f < warm; next_f++) mt__sched_push(s, i, MT_PIPE_F, next_f, i);
    for (int k = 0; k < m; k++) {
        mt__sched_push(s, i, MT_PIPE_B, k, i);
        if (next_f < m) mt__sched_push(s, i, MT_PIPE_F, next_f++, i);
        if (k >= lag) mt__sched_push(s, i, MT_PIPE_W, next_w++, i);
    }
    for (; next_w < m; next_w++) mt__sched_push(s, i, MT_PIPE_W, next_w, i);
}

mt_status mt__sched_build_zb_h1(mt_schedule *s) {
    for (int i = 0; i < s->p; i++) build_deferred_w(s, i, s->p - i, i);
    return MT_OK;
}

mt_status mt__sched_build_zb_h2(mt_schedule *s) {
    int p = s->p, m = s->m;
    for (int i = 0; i < p; i++) {
        int warm = 2 * p - 1 - 2 * i;
        build_deferred_w(s, i, warm < m ? warm : m, 2 * i);
    }
    if (m < 2 * p - 1)
        snprintf(s->note, sizeof s->note,
                 "zb-h2 wants m >= 2p-1 = %d microbatches for its full warm-up; with m = %d, "
                 "stage i warms up with min(2p-1-2i, m) forwards instead, which leaves a "
                 "bubble of 2p-1-m = %d time units at unit costs (0 from m = %d on)",
                 2 * p - 1, m, 2 * p - 1 - m, 2 * p - 1);
    return MT_OK;
}
