/*
 * validate.c — the rules every schedule keeps (mt_schedule_validate lists
 * them): ops well formed and on their chunk's device, each (microbatch,
 * chunk) with one F and one B and W or one BW, same-device dependencies in
 * list order, and lists that drain without deadlock. The drain is also the
 * simulator's clock: with costs it times every op.
 */
#include "pipeline/pipeline_impl.h"

#include <stdlib.h>
#include <string.h>

/* "device 1 op #4 (F mb 3 chunk 5)" */
static void op_where(const mt_schedule *s, int d, int i, char *buf, size_t cap) {
    char t[64];
    mt__op_text(s->ops[d][i], t, sizeof t);
    snprintf(buf, cap, "device %d op #%d (%s)", d, i, t);
}

/* ---- rules 1 and 2: the index ----------------------------------------------- */

static mt_status check_op(const mt_schedule *s, int d, int i) {
    mt_pipe_op op = s->ops[d][i];
    int K = s->p * s->v;
    if ((unsigned)op.type > MT_PIPE_BW)
        return mt_fail(MT_EINVAL, "device %d op #%d has type %d, which is not F, B, W or BW",
                       d, i, (int)op.type);
    const bool mb_ok = op.mb >= 0 && op.mb < s->m, chunk_ok = op.chunk >= 0 && op.chunk < K;
    if (mb_ok && chunk_ok && s->chunk_device[op.chunk] == d) return MT_OK;
    /* the op's text only for the message: formatted for every op it took a
       fifth of a plan search's time (each layout's schedule is checked) */
    char w[128];
    op_where(s, d, i, w, sizeof w);
    if (!mb_ok)
        return mt_fail(MT_EINVAL, "%s: microbatch %d is out of range [0, %d)", w, op.mb, s->m);
    if (!chunk_ok)
        return mt_fail(MT_EINVAL, "%s: chunk %d is out of range [0, %d) (p = %d stages × v = "
                       "%d chunks)", w, op.chunk, K, s->p, s->v);
    return mt_fail(MT_EINVAL, "%s: chunk %d lives on device %d, not %d (%s places %s)", w,
                   op.chunk, s->chunk_device[op.chunk], d, mt_schedule_kind_name(s->kind),
                   mt__sched_kind_get(s->kind)->v_shape ? "chunks i and 2p-1-i on device i"
                                                        : "chunks i, i+p, i+2p, ... on device i");
}

/* Records op #i of device d in `slot` (a position, -1 when empty). */
static mt_status claim(const mt_schedule *s, int d, int i, int *slot, const char *rule) {
    if (*slot < 0) {
        *slot = i;
        return MT_OK;
    }
    char w[128], other[64];
    op_where(s, d, i, w, sizeof w);
    mt__op_text(s->ops[d][*slot], other, sizeof other);
    return mt_fail(MT_EINVAL, "%s clashes with op #%d (%s) of the same device: %s", w, *slot,
                   other, rule);
}

void mt__sched_index_free(mt__sched_index *ix) {
    free(ix->f);
    free(ix->b);
    free(ix->w);
    memset(ix, 0, sizeof *ix);
}

mt_status mt__sched_index_build(const mt_schedule *s, mt__sched_index *ix) {
    size_t n = (size_t)s->m * s->p * s->v;
    int K = s->p * s->v;
    ix->f = malloc(n * sizeof(int));
    ix->b = malloc(n * sizeof(int));
    ix->w = malloc(n * sizeof(int));
    int *bw = malloc(n * sizeof(int));   /* positions of BW only, to tell them apart */
    if (!ix->f || !ix->b || !ix->w || !bw) {
        free(bw);
        mt__sched_index_free(ix);
        return mt_fail(MT_ENOMEM, "out of memory for the index of %zu (microbatch, chunk) pairs",
                       n);
    }
    for (size_t e = 0; e < n; e++) ix->f[e] = ix->b[e] = ix->w[e] = bw[e] = -1;
    mt_status st = MT_OK;
    for (int d = 0; d < s->p && st == MT_OK; d++)
        for (int i = 0; i < s->n_ops[d] && st == MT_OK; i++) {
            st = check_op(s, d, i);
            if (st != MT_OK) break;
            mt_pipe_op op = s->ops[d][i];
            size_t e = (size_t)op.mb * K + op.chunk;
            switch (op.type) {
            case MT_PIPE_F:
                st = claim(s, d, i, &ix->f[e], "each (microbatch, chunk) has exactly one F");
                break;
            case MT_PIPE_B:
                st = claim(s, d, i, &ix->b[e], "each (microbatch, chunk) has exactly one B "
                           "(with one W) or one BW");
                break;
            case MT_PIPE_W:
                st = claim(s, d, i, &ix->w[e], "each (microbatch, chunk) has exactly one W "
                           "(with one B) or one BW");
                break;
            case MT_PIPE_BW:
                st = claim(s, d, i, &bw[e], "each (microbatch, chunk) has exactly one BW "
                           "(or one B and one W)");
                if (st == MT_OK && ix->b[e] >= 0)
                    st = claim(s, d, i, &ix->b[e], "a (microbatch, chunk) has one B and one W, "
                               "or one BW, not both");
                if (st == MT_OK && ix->w[e] >= 0)
                    st = claim(s, d, i, &ix->w[e], "a (microbatch, chunk) has one B and one W, "
                               "or one BW, not both");
                break;
            }
            /* a B or W that comes after a BW of the same pair */
            if (st == MT_OK && op.type != MT_PIPE_BW && op.type != MT_PIPE_F && bw[e] >= 0)
                st = claim(s, d, i, &bw[e], "a (microbatch, chunk) has one B and one W, or one "
                           "BW, not both");
        }
    /* completeness, and a BW stands for both B and W */
    for (int j = 0; j < s->m && st == MT_OK; j++)
        for (int k = 0; k < K && st == MT_OK; k++) {
            size_t e = (size_t)j * K + k;
            int d = s->chunk_device[k];
            if (bw[e] >= 0) {
                ix->b[e] = ix->w[e] = bw[e];
            } else if (ix->b[e] >= 0 && ix->w[e] < 0) {
                char w[128];
                op_where(s, d, ix->b[e], w, sizeof w);
                st = mt_fail(MT_EINVAL, "%s has no W: each B needs its own W later on the same "
                             "device (or use one BW)", w);
            } else if (ix->w[e] >= 0 && ix->b[e] < 0) {
                char w[128];
                op_where(s, d, ix->w[e], w, sizeof w);
                st = mt_fail(MT_EINVAL, "%s has no B: each W needs its own B earlier on the "
                             "same device", w);
            } else if (ix->b[e] < 0) {
                st = mt_fail(MT_EINVAL, "device %d has no backward of mb %d chunk %d: each "
                             "(microbatch, chunk) needs one B and one W, or one BW", d, j, k);
            }
            if (st == MT_OK && ix->f[e] < 0)
                st = mt_fail(MT_EINVAL, "device %d has no F mb %d chunk %d: each (microbatch, "
                             "chunk) needs exactly one F", d, j, k);
        }
    free(bw);
    if (st != MT_OK) mt__sched_index_free(ix);
    return st;
}

/* ---- dependencies ------------------------------------------------------------ */

int mt__sched_deps(const mt_schedule *s, const mt__sched_index *ix, mt_pipe_op op,
                   mt__sched_dep out[2]) {
    int K = s->p * s->v, n = 0;
    size_t e = (size_t)op.mb * K + op.chunk;
    switch (op.type) {
    case MT_PIPE_F:
        if (op.chunk > 0)
            out[n++] = (mt__sched_dep){s->chunk_device[op.chunk - 1], ix->f[e - 1]};
        break;
    case MT_PIPE_B:
    case MT_PIPE_BW:
        out[n++] = (mt__sched_dep){s->chunk_device[op.chunk], ix->f[e]};
        if (op.chunk < K - 1)
            out[n++] = (mt__sched_dep){s->chunk_device[op.chunk + 1], ix->b[e + 1]};
        break;
    case MT_PIPE_W:
        out[n++] = (mt__sched_dep){s->chunk_device[op.chunk], ix->b[e]};
        break;
    }
    return n;
}

static const char *dep_rule(mt_pipe_op_type consumer, mt_pipe_op_type producer) {
    if (consumer == MT_PIPE_W) return "a W runs after its own B";
    if (consumer == MT_PIPE_F) return "an F runs after the F of the chunk before it";
    if (producer == MT_PIPE_F) return "a backward runs after the F of its microbatch and chunk";
    return "a backward runs after the backward of the chunk after it";
}

/* ---- rules 3 and 4: order and drain ----------------------------------------- */

static mt_status check_local_order(const mt_schedule *s, const mt__sched_index *ix) {
    for (int d = 0; d < s->p; d++)
        for (int i = 0; i < s->n_ops[d]; i++) {
            mt__sched_dep dep[2];
            int n = mt__sched_deps(s, ix, s->ops[d][i], dep);
            for (int k = 0; k < n; k++) {
                if (dep[k].device != d || dep[k].pos < i) continue;
                char w[128], other[64];
                op_where(s, d, i, w, sizeof w);
                mt__op_text(s->ops[d][dep[k].pos], other, sizeof other);
                return mt_fail(MT_EINVAL, "%s comes before op #%d (%s) on the same device, "
                               "which it depends on: %s", w, dep[k].pos, other,
                               dep_rule(s->ops[d][i].type, s->ops[d][dep[k].pos].type));
            }
        }
    return MT_OK;
}

/* The message for lists that stopped: the head op of each stuck device (up
 * to 4 of them) and the op it waits for. */
static mt_status deadlock(const mt_schedule *s, const mt__sched_index *ix, const int *head,
                          char *const *done) {
    char msg[900];
    size_t at = 0;
    int stuck = 0, shown = 0;
    for (int d = 0; d < s->p; d++) {
        if (head[d] >= s->n_ops[d]) continue;
        stuck++;
        if (shown == 4) continue;
        mt__sched_dep dep[2];
        int n = mt__sched_deps(s, ix, s->ops[d][head[d]], dep), k = 0;
        while (k < n && done[dep[k].device][dep[k].pos]) k++;
        char w[128], other[64];
        op_where(s, d, head[d], w, sizeof w);
        mt__op_text(s->ops[dep[k].device][dep[k].pos], other, sizeof other);
        int len = snprintf(msg + at, sizeof msg - at, "%s%s waits for %s on device %d (its op "
                           "#%d)", shown ? "; " : "", w, other, dep[k].device, dep[k].pos);
        if (len > 0 && (size_t)len < sizeof msg - at) at += (size_t)len;
        shown++;
    }
    return mt_fail(MT_EINVAL, "deadlock: the lists' orders form a cycle; %d device%s %s ops "
                   "left and none can go on: %s%s", stuck, stuck == 1 ? "" : "s",
                   stuck == 1 ? "has" : "have", msg, stuck > shown ? "; ..." : "");
}

mt_status mt__sched_drain(const mt_schedule *s, const mt__sched_index *ix,
                          const mt__costs *costs, double **start, double **end) {
    mt_status st = check_local_order(s, ix);
    if (st != MT_OK) return st;
    int p = s->p;
    size_t np = p > 0 ? (size_t)p : 1;
    int *head = calloc(np, sizeof(int));
    char **done = calloc(np, sizeof(char *));
    double *free_at = calloc(np, sizeof(double));
    bool ok = head && done && free_at;
    for (int d = 0; d < p && ok; d++) ok = (done[d] = calloc((size_t)s->n_ops[d] + 1, 1)) != NULL;
    if (!ok) {
        st = mt_fail(MT_ENOMEM, "out of memory checking a schedule of %d devices", p);
        goto out;
    }
    /* Sweep the devices, running each one's head ops while their inputs are
     * done. Any order of sweeps drains the same lists (a device's progress
     * only ever unblocks others), so a sweep that runs nothing is final. */
    for (bool progress = true; progress;) {
        progress = false;
        for (int d = 0; d < p; d++)
            for (; head[d] < s->n_ops[d]; head[d]++) {
                mt_pipe_op op = s->ops[d][head[d]];
                mt__sched_dep dep[2];
                int n = mt__sched_deps(s, ix, op, dep), k;
                for (k = 0; k < n && done[dep[k].device][dep[k].pos]; k++) {}
                if (k < n) break;
                if (costs) {
                    double t = free_at[d];
                    for (k = 0; k < n; k++) {
                        double arrive = end[dep[k].device][dep[k].pos] +
                                        (dep[k].device != d ? mt__comm_cost(costs, op) : 0.0);
                        if (arrive > t) t = arrive;
                    }
                    start[d][head[d]] = t;
                    end[d][head[d]] = free_at[d] = t + mt__op_cost(s, costs, op);
                }
                done[d][head[d]] = 1;
                progress = true;
            }
    }
    for (int d = 0; d < p; d++)
        if (head[d] < s->n_ops[d]) {
            st = deadlock(s, ix, head, done);
            break;
        }
out:
    if (done)
        for (int d = 0; d < p; d++) free(done[d]);
    free(done);
    free(head);
    free(free_at);
    return st;
}

/* ---- peaks and the entry point ---------------------------------------------- */

void mt__sched_peaks(const mt_schedule *s, double w_memory, double *peak) {
    for (int d = 0; d < s->p; d++) {
        double held = 0, top = 0;   /* in chunk activations (1/v of a stage) */
        for (int i = 0; i < s->n_ops[d]; i++) {
            switch (s->ops[d][i].type) {
            case MT_PIPE_F: held += 1; break;
            case MT_PIPE_B: held -= 1 - w_memory; break;
            case MT_PIPE_W: held -= w_memory; break;
            case MT_PIPE_BW: held -= 1; break;
            }
            if (held > top) top = held;
        }
        peak[d] = top / s->v;
    }
}

mt_status mt_schedule_validate(const mt_schedule *s, double *peak_activations) {
    mt__sched_index ix;
    mt_status st = mt__sched_index_build(s, &ix);
    if (st != MT_OK) return st;
    st = mt__sched_drain(s, &ix, NULL, NULL, NULL);
    mt__sched_index_free(&ix);
    if (st == MT_OK && peak_activations) mt__sched_peaks(s, 0.0, peak_activations);
    return st;
}
