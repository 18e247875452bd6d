/*
 * sched_v.c — the schedules on the V shape: device i holds chunk i (the way
 * down, "phase 0") and chunk 2p-1-i (the way back up, "phase 1"), so the
 * forward of a microbatch goes 0, 1, .., p-1 down the devices and p, ..,
 * 2p-1 back up; device p-1 passes chunk p-1's output to its own chunk p,
 * and device 0 ends the forward and starts the backward.
 *
 * ZB-V (Qi et al., the arXiv version's V schedule) is built by a greedy list
 * scheduler at unit costs, as the paper's own ZB-V is; DualPipeV follows the
 * eight steps of DeepSeek's DualPipeV. Both are described above their
 * builders; their unit-cost bubbles are in docs/pipelines.md.
 */
#include "pipeline/pipeline_impl.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- ZB-V ------------------------------------------------------------------- */

/* Time runs in slots of one chunk op (F = B = W = 1/2 at unit costs; every
 * op takes one slot, messages none). At each slot every idle device starts
 * the first of these that it can, in this order:
 *
 *   1. the next B of chunk i      (its gradient has arrived)
 *   2. the next F of chunk 2p-1-i (its input has arrived; < 2p chunk
 *                                  activations held)
 *   3. the next F of chunk i      (the same)
 *   4. the next B of chunk 2p-1-i
 *   5. the oldest W whose B has run
 *
 * and stays idle if none. B's and F's go in microbatch order per chunk; the
 * limit of 2p chunk activations is p microbatches on a whole stage, 1F1B's
 * peak on its first stage. Finishing microbatches first (1) and feeding the
 * way up (2) before taking new ones in (3) keeps the backward chain moving;
 * W only fills time that would otherwise be idle. For m >= 2p-1 this gives
 * no bubble at all at unit costs (every device busy from its first op to its
 * last) and a peak of exactly p on every device; with fewer microbatches the
 * first device idles (2p-1-m)/2 in the warm-up, having only m forwards for
 * the 2p-1 slots before the first backward reaches it. When this order was
 * chosen, three of the 24 orders of 1-4 reached both bounds for every p <= 8,
 * p <= m <= 3p+1 (some others deadlock on the memory limit); this one also
 * for every p <= 12, p <= m <= 5p+1. tests/test_schedule.c checks p <= 8. */

typedef struct {
    int nf[2], nb[2];      /* ops of each phase started so far */
    int held;              /* chunk activations held */
    int *wq, w_head, w_tail;   /* pending W: a queue of (mb, chunk) pairs */
} zbv_dev;

/* Whether device i can start F (type) or B of phase h at slot t; its
 * microbatch into *mb. end_f and end_b hold the end slot of each (j, k)'s
 * F and B, 0 while not run (every end is >= 1). */
static bool zbv_ready(const zbv_dev *d, int i, int K, int m, int type, int h, const int *end_f,
                      const int *end_b, int t, int *mb) {
    int k = h == 0 ? i : K - 1 - i;
    if (type == MT_PIPE_F) {
        int j = d->nf[h];
        if (j >= m || d->held >= K) return false;
        *mb = j;
        return k == 0 || (end_f[j * K + k - 1] && end_f[j * K + k - 1] <= t);
    }
    int j = d->nb[h];
    if (j >= d->nf[h]) return false;
    int e = k == K - 1 ? end_f[j * K + k] : end_b[j * K + k + 1];
    *mb = j;
    return e && e <= t;
}

mt_status mt__sched_build_zb_v(mt_schedule *s) {
    static const int ORDER[4][2] = {{MT_PIPE_B, 0}, {MT_PIPE_F, 1}, {MT_PIPE_F, 0},
                                    {MT_PIPE_B, 1}};
    int p = s->p, m = s->m, K = 2 * p;
    int *end_f = calloc((size_t)m * K, sizeof(int)), *end_b = calloc((size_t)m * K, sizeof(int));
    int *wq = malloc(sizeof(int) * 4 * (size_t)m * p);   /* 2m (mb, chunk) pairs a device */
    zbv_dev *dev = calloc((size_t)p, sizeof *dev);
    if (!end_f || !end_b || !wq || !dev) {
        free(end_f); free(end_b); free(wq); free(dev);
        return mt_fail(MT_ENOMEM, "out of memory building zb-v for p = %d, m = %d", p, m);
    }
    for (int i = 0; i < p; i++) dev[i].wq = wq + (size_t)i * 4 * m;
    long long left = 6LL * m * p;
    mt_status st = MT_OK;
    /* every op takes one slot, so every device is free again at the next */
    for (int t = 0; left > 0; t++) {
        int started = 0;
        for (int i = 0; i < p; i++) {
            zbv_dev *d = &dev[i];
            int mb = -1, o;
            for (o = 0; o < 4; o++)
                if (zbv_ready(d, i, K, m, ORDER[o][0], ORDER[o][1], end_f, end_b, t, &mb)) break;
            if (o < 4) {
                int type = ORDER[o][0], h = ORDER[o][1], c = h == 0 ? i : K - 1 - i;
                mt__sched_push(s, i, (mt_pipe_op_type)type, mb, c);
                if (type == MT_PIPE_F) {
                    d->nf[h]++; d->held++;
                    end_f[mb * K + c] = t + 1;
                } else {
                    d->nb[h]++; d->held--;
                    end_b[mb * K + c] = t + 1;
                    d->wq[2 * d->w_tail] = mb;
                    d->wq[2 * d->w_tail + 1] = c;
                    d->w_tail++;
                }
            } else if (d->w_head < d->w_tail) {
                mt__sched_push(s, i, MT_PIPE_W, d->wq[2 * d->w_head], d->wq[2 * d->w_head + 1]);
                d->w_head++;
            } else {
                continue;
            }
            started++;
            left--;
        }
        if (!started) {
            st = mt_fail(MT_EINTERNAL, "zb-v's greedy order stopped at slot %d with %lld ops "
                         "left for p = %d, m = %d (a bug: please report it)", t, left, p, m);
            break;
        }
    }
    free(end_f); free(end_b); free(wq); free(dev);
    if (st == MT_OK && m < 2 * p - 1)
        snprintf(s->note, sizeof s->note,
                 "zb-v wants m >= 2p-1 = %d microbatches to fill its warm-up; with m = %d the "
                 "first device has only %d forwards for the %d chunk slots before its first "
                 "backward, which leaves a bubble of (2p-1-m)/2 = %g time units at unit costs "
                 "(0 from m = %d on)", 2 * p - 1, m, m, 2 * p - 1, (2 * p - 1 - m) / 2.0,
                 2 * p - 1);
    return st;
}

/* ---- DualPipeV -------------------------------------------------------------- */

/* DeepSeek's DualPipeV ("DualPipe cut in half") on device r, with F0/B0 the
 * ops of chunk r and F1/B1 those of chunk 2p-1-r, each in microbatch order:
 *
 *   1. 2(p-r-1) × F0
 *   2. (r+1) × (F0, F1)
 *   3. (p-r-1) × (B1, W, F1)                   B split: its W right after
 *   4. (m-2p+r+1) × (F0, BW1, F1, BW0)         DualPipe overlaps F with BW
 *   5. (p-r-1) × (BW1, F1, BW0)
 *   6. (r+1) × (B1, B0)                        the second half split into B, W
 *   7. (p-r-1) × (W, B0)                       B split
 *   8. (r+1) × W
 *
 * A W always takes the oldest split B's weight gradient. In step 6 the
 * backwards from index ⌊(r+1)/2⌋ on are split (from B1 on for odd r, from
 * B0 on for even r), r+1 of them, which step 8's W finish. DualPipe runs
 * step 4's and 5's F and BW pairs at once on two streams; here they run one
 * after the other, which is where its unit-cost bubble of (p-1)/2 comes from
 * (docs/pipelines.md counts it). */

typedef struct {
    mt_schedule *s;
    int r, chunk[2], nf[2], nb[2];
    int *wq, w_head, w_tail;   /* pending W: (mb, chunk) pairs */
} dpv_dev;

static void dpv_f(dpv_dev *d, int h) {
    mt__sched_push(d->s, d->r, MT_PIPE_F, d->nf[h]++, d->chunk[h]);
}

static void dpv_b(dpv_dev *d, int h, bool split) {
    int j = d->nb[h]++;
    mt__sched_push(d->s, d->r, split ? MT_PIPE_B : MT_PIPE_BW, j, d->chunk[h]);
    if (split) {
        d->wq[2 * d->w_tail] = j;
        d->wq[2 * d->w_tail + 1] = d->chunk[h];
        d->w_tail++;
    }
}

static void dpv_w(dpv_dev *d) {
    mt__sched_push(d->s, d->r, MT_PIPE_W, d->wq[2 * d->w_head], d->wq[2 * d->w_head + 1]);
    d->w_head++;
}

mt_status mt__sched_build_dualpipev(mt_schedule *s) {
    int p = s->p, m = s->m;
    int *wq = malloc(sizeof(int) * 4 * (size_t)m);
    if (!wq) return mt_fail(MT_ENOMEM, "out of memory building dualpipev for m = %d", m);
    for (int r = 0; r < p; r++) {
        dpv_dev d = {.s = s, .r = r, .chunk = {r, 2 * p - 1 - r}, .wq = wq};
        int n;
        for (n = 0; n < 2 * (p - r - 1); n++) dpv_f(&d, 0);
        for (n = 0; n < r + 1; n++) { dpv_f(&d, 0); dpv_f(&d, 1); }
        for (n = 0; n < p - r - 1; n++) { dpv_b(&d, 1, true); dpv_w(&d); dpv_f(&d, 1); }
        for (n = 0; n < m - 2 * p + r + 1; n++) {
            dpv_f(&d, 0); dpv_b(&d, 1, false); dpv_f(&d, 1); dpv_b(&d, 0, false);
        }
        for (n = 0; n < p - r - 1; n++) { dpv_b(&d, 1, false); dpv_f(&d, 1); dpv_b(&d, 0, false); }
        bool split = false;
        for (n = 0; n < r + 1; n++) {
            if (n == (r + 1) / 2 && r % 2 == 1) split = true;
            dpv_b(&d, 1, split);
            if (n == (r + 1) / 2 && r % 2 == 0) split = true;
            dpv_b(&d, 0, split);
        }
        for (n = 0; n < p - r - 1; n++) { dpv_w(&d); dpv_b(&d, 0, true); }
        for (n = 0; n < r + 1; n++) dpv_w(&d);
    }
    free(wq);
    return MT_OK;
}
