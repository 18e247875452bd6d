/*
 * pipeline_slots.c — what a pipeline schedule holds of each chunk: the
 * microbatches the executor gives it (its slots), those in flight at its
 * device's peak, and the device that holds it; remembered by (schedule, p,
 * m, v) for the search (search_impl.h).
 */
#include "plan/search_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The slots (microbatches between F and W at once) the pipeline executor
 * gives each global chunk, as it counts them (executor.c: each chunk its own
 * peak), into slots[S]; the microbatches of each chunk in flight at its
 * device's peak, the moment its chunks hold the most blocks' worth together
 * (what a framework that allocates as it runs holds: Korthikanti's and the
 * zero-bubble papers' counts), into peak[S]; and the device (stage) that
 * holds it into dev[S]; the schedule's refusal into why. L blocks weigh
 * the chunks (mt__plan_chunk_blocks). */
static void make_slots(const mt_plan_layout *l, int v, int L, int *slots, int *peak, int *dev,
                       char *why, size_t cap) {
    mt_schedule *sc = NULL;
    if (mt_schedule_make((mt_schedule_kind)l->schedule, l->pipe, l->microbatches, v, &sc) !=
        MT_OK) {
        snprintf(why, cap, "%s", mt_errmsg());
        return;
    }
    for (int c = 0; c < l->pipe * v; c++) {
        dev[c] = mt_schedule_chunk_device(sc, c);
        int n = mt_schedule_n_ops(sc, dev[c]);
        const mt_pipe_op *ops = mt_schedule_ops(sc, dev[c]);
        int live = 0, top = 0;
        for (int o = 0; o < n; o++) {
            if (ops[o].chunk != c) continue;
            if (ops[o].type == MT_PIPE_F) live++;
            if (ops[o].type == MT_PIPE_W || ops[o].type == MT_PIPE_BW) live--;
            if (live > top) top = live;
        }
        slots[c] = top < 1 ? 1 : top;
    }
    const int S = l->pipe * v;
    for (int d = 0; d < l->pipe; d++) {
        int mine[MT_SCHEDULE_MAX_CHUNKS], nm = 0, live[MT_SCHEDULE_MAX_CHUNKS] = {0};
        for (int k = 0; k < S && nm < MT_SCHEDULE_MAX_CHUNKS; k++)
            if (dev[k] == d) mine[nm++] = k;
        const int n = mt_schedule_n_ops(sc, d);
        const mt_pipe_op *ops = mt_schedule_ops(sc, d);
        int w = 0, most = -1;   /* blocks' worth in flight, and its peak */
        for (int o = 0; o < n; o++) {
            int j = 0;
            while (j < nm && mine[j] != ops[o].chunk) j++;
            if (j == nm) continue;
            const int dw = ops[o].type == MT_PIPE_F                                  ? 1
                           : ops[o].type == MT_PIPE_W || ops[o].type == MT_PIPE_BW ? -1
                                                                                   : 0;
            live[j] += dw;
            w += dw * mt__plan_chunk_blocks(L, S, mine[j]);
            if (w <= most) continue;
            most = w;
            for (int k = 0; k < nm; k++) peak[mine[k]] = live[k];
        }
    }
    mt_schedule_free(sc);
}

mt_status mt__plan_pipeline_slots(mt__plan_search *s, const mt_plan_layout *l, int v, int *slots,
                                int *peak, int *dev, char *why, size_t cap) {
    if (!s->slots_memo &&
        !(s->slots_memo = calloc(MT__PLAN_SLOTS_MEMO, sizeof *s->slots_memo)))
        return mt_fail(MT_ENOMEM, "out of memory for %d remembered schedules",
                       MT__PLAN_SLOTS_MEMO);
    const unsigned h = (unsigned)l->schedule * 7919u + (unsigned)l->pipe * 131u +
                       (unsigned)l->microbatches * 31u + (unsigned)v;
    mt__plan_slots_memo *m = &s->slots_memo[h % MT__PLAN_SLOTS_MEMO];
    if (m->kind != l->schedule || m->p != l->pipe || m->m != l->microbatches || m->v != v) {
        m->why[0] = '\0';
        make_slots(l, v, s->layers, m->slots, m->peak, m->dev, m->why, sizeof m->why);
        m->kind = l->schedule, m->p = l->pipe, m->m = l->microbatches, m->v = v;
    }
    if (m->why[0]) {
        snprintf(why, cap, "%s", m->why);
        return MT_OK;
    }
    memcpy(slots, m->slots, (size_t)(l->pipe * v) * sizeof *slots);
    memcpy(dev, m->dev, (size_t)(l->pipe * v) * sizeof *dev);
    memcpy(peak, m->peak, (size_t)(l->pipe * v) * sizeof *peak);
    return MT_OK;
}
