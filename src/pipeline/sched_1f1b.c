/*
 * sched_1f1b.c — the schedules that keep the backward whole (BW): GPipe,
 * 1F1B and Megatron's interleaved 1F1B.
 *
 * With unit costs (F = B = W = 1, so BW = 2) each has the bubble of its
 * paper, measured as max span - busy: GPipe and 1F1B 3(p-1), interleaved
 * 3(p-1)/v. Peak activations (stage units): GPipe m on every stage, 1F1B
 * p-i on stage i, interleaved min(2(p-1-i) + (v-1)p + 1, m·v)/v.
 */
#include "pipeline/pipeline_impl.h"

/* GPipe: every forward, then every whole backward, both in microbatch
 * order. (Reverse order would let the last stage start its backward one F
 * earlier, but changes neither the makespan at unit costs nor the peak,
 * which is m: all activations are held at the turn.) */
mt_status mt__sched_build_gpipe(mt_schedule *s) {
    for (int i = 0; i < s->p; i++) {
        for (int j = 0; j < s->m; j++) mt__sched_push(s, i, MT_PIPE_F, j, i);
        for (int j = 0; j < s->m; j++) mt__sched_push(s, i, MT_PIPE_BW, j, i);
    }
    return MT_OK;
}

/* 1F1B (PipeDream-flush): stage i runs p-1-i warm-up forwards, then one
 * forward and one whole backward in turn, then the backwards left. */
mt_status mt__sched_build_1f1b(mt_schedule *s) {
    int p = s->p, m = s->m;
    for (int i = 0; i < p; i++) {
        int warm = p - 1 - i < m ? p - 1 - i : m;
        for (int j = 0; j < warm; j++) mt__sched_push(s, i, MT_PIPE_F, j, i);
        for (int k = 0; k < m; k++) {
            if (k + warm < m) mt__sched_push(s, i, MT_PIPE_F, k + warm, i);
            mt__sched_push(s, i, MT_PIPE_BW, k, i);
        }
    }
    return MT_OK;
}

/* Megatron-LM's interleaved 1F1B. Device i runs m·v "virtual" microbatches
 * per direction; the k-th forward is microbatch (k / (p·v))·p + k mod p on
 * its local chunk (k / p) mod v, i.e. p microbatches through one chunk, then
 * the same p through the next; backwards go through the chunks in reverse.
 * Warm-up: 2(p-1-i) + (v-1)p forwards (all of them if that is more), then
 * one forward and one backward in turn. Local chunk c of device i is global
 * chunk c·p + i. */
mt_status mt__sched_build_interleaved(mt_schedule *s) {
    int p = s->p, m = s->m, v = s->v, total = m * v;
    for (int i = 0; i < p; i++) {
        int warm = 2 * (p - 1 - i) + (v - 1) * p;
        if (warm > total) warm = total;
        for (int k = 0; k < total + warm; k++) {
            /* step k: the forward k (while k < total), after the warm-up each
             * forward is followed by the backward k - warm */
            if (k < total) {
                int mb = k / (p * v) * p + k % p, local = k / p % v;
                mt__sched_push(s, i, MT_PIPE_F, mb, local * p + i);
            }
            int kb = k - warm;
            if (kb >= 0) {
                int mb = kb / (p * v) * p + kb % p, local = v - 1 - kb / p % v;
                mt__sched_push(s, i, MT_PIPE_BW, mb, local * p + i);
            }
        }
    }
    return MT_OK;
}
