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

/* Frees the entries' arrays and empties the table (its size kept). */
static void memo_clear(mt__plan_search *s) {
    for (size_t i = 0; i < s->n_slots_memo; i++) {
        free(s->slots_memo[i].why);
        free(s->slots_memo[i].ints);
    }
    if (s->slots_memo) memset(s->slots_memo, 0, s->n_slots_memo * sizeof *s->slots_memo);
    s->used_slots_memo = 0;
}

void mt__plan_pipeline_slots_free(mt__plan_search *s) {
    memo_clear(s);
    free(s->slots_memo);
    s->slots_memo = NULL;
    s->n_slots_memo = 0;
}

/* The slot of (kind, p, m, v) in s's table: its entry, or the empty one
 * where it goes. */
static mt__plan_slots_memo *memo_at(mt__plan_search *s, int kind, int p, int m, int v) {
    const size_t mask = s->n_slots_memo - 1;
    size_t h = ((size_t)(unsigned)kind * 7919u + (size_t)(unsigned)p * 131u +
                (size_t)(unsigned)m * 31u + (size_t)(unsigned)v) * 2654435761u;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        mt__plan_slots_memo *e = &s->slots_memo[i];
        if (!e->p || (e->kind == kind && e->p == p && e->m == m && e->v == v)) return e;
    }
}

/* Room for one more entry: the table grown (rehashed) by doubling, or
 * emptied past MT__PLAN_SLOTS_MEMO entries (the search's memory bounded). */
static mt_status memo_room(mt__plan_search *s) {
    if (s->used_slots_memo >= MT__PLAN_SLOTS_MEMO) memo_clear(s);
    if (2 * (s->used_slots_memo + 1) <= s->n_slots_memo) return MT_OK;
    const size_t n = s->n_slots_memo ? 2 * s->n_slots_memo : 256;
    mt__plan_slots_memo *old = s->slots_memo, *t = calloc(n, sizeof *t);
    if (!t) return mt_fail(MT_ENOMEM, "out of memory for %zu remembered schedules", n);
    const size_t n_old = s->n_slots_memo;
    s->slots_memo = t;
    s->n_slots_memo = n;
    for (size_t i = 0; i < n_old; i++)
        if (old[i].p) *memo_at(s, old[i].kind, old[i].p, old[i].m, old[i].v) = old[i];
    free(old);
    return MT_OK;
}

mt_status mt__plan_pipeline_slots(mt__plan_search *s, const mt_plan_layout *l, int v, int *slots,
                                  int *peak, int *dev, char *why, size_t cap) {
    const int S = l->pipe * v;
    mt__plan_slots_memo *m = s->n_slots_memo
                                 ? memo_at(s, l->schedule, l->pipe, l->microbatches, v) : NULL;
    if (!m || !m->p) {
        mt_status st = memo_room(s);
        if (st != MT_OK) return st;
        m = memo_at(s, l->schedule, l->pipe, l->microbatches, v);
        char made_why[256] = "";
        int *ints = malloc(3 * (size_t)S * sizeof *ints);
        if (!ints) return mt_fail(MT_ENOMEM, "out of memory for a schedule of %d chunks", S);
        make_slots(l, v, s->layers, ints, ints + 2 * S, ints + S, made_why, sizeof made_why);
        char *w = NULL;
        if (made_why[0] && !(w = malloc(strlen(made_why) + 1))) {
            free(ints);
            return mt_fail(MT_ENOMEM, "out of memory for a schedule's refusal");
        }
        if (w) memcpy(w, made_why, strlen(made_why) + 1);
        *m = (mt__plan_slots_memo){.kind = l->schedule, .p = l->pipe, .m = l->microbatches,
                                   .v = v, .why = w, .ints = ints};
        s->used_slots_memo++;
    }
    if (m->why) {
        snprintf(why, cap, "%s", m->why);
        return MT_OK;
    }
    memcpy(slots, m->ints, (size_t)S * sizeof *slots);
    memcpy(dev, m->ints + S, (size_t)S * sizeof *dev);
    memcpy(peak, m->ints + 2 * S, (size_t)S * sizeof *peak);
    return MT_OK;
}
