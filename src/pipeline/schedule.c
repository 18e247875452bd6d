/*
 * schedule.c — the schedule record: the table of kinds, making a schedule
 * (the preconditions, then the kind's builder), creating an empty one for
 * hand-built or loaded lists, and the accessors.
 */
#include "pipeline/pipeline_impl.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- the kinds ------------------------------------------------------------ */

static const mt__sched_kind KINDS[MT_SCHEDULE_N_KINDS] = {
    [MT_SCHEDULE_GPIPE] = {.name = "gpipe", .build = mt__sched_build_gpipe,
                           .v_default = 1, .v_min = 1, .v_max = 1, .min_mb_per_stage = 1},
    [MT_SCHEDULE_1F1B] = {.name = "1f1b", .build = mt__sched_build_1f1b,
                          .v_default = 1, .v_min = 1, .v_max = 1, .min_mb_per_stage = 1},
    [MT_SCHEDULE_INTERLEAVED] = {.name = "interleaved", .build = mt__sched_build_interleaved,
                                 .v_default = 2, .v_min = 2, .v_max = MT_SCHEDULE_MAX_CHUNKS,
                                 .min_mb_per_stage = 1, .m_multiple_of_p = true},
    [MT_SCHEDULE_ZB_H1] = {.name = "zb-h1", .build = mt__sched_build_zb_h1,
                           .v_default = 1, .v_min = 1, .v_max = 1, .min_mb_per_stage = 1},
    [MT_SCHEDULE_ZB_H2] = {.name = "zb-h2", .build = mt__sched_build_zb_h2,
                           .v_default = 1, .v_min = 1, .v_max = 1, .min_mb_per_stage = 1},
    [MT_SCHEDULE_ZB_V] = {.name = "zb-v", .build = mt__sched_build_zb_v,
                          .v_default = 2, .v_min = 2, .v_max = 2, .v_shape = true,
                          .min_mb_per_stage = 1},
    [MT_SCHEDULE_DUALPIPEV] = {.name = "dualpipev", .build = mt__sched_build_dualpipev,
                               .v_default = 2, .v_min = 2, .v_max = 2, .v_shape = true,
                               .min_mb_per_stage = 2},
};

const mt__sched_kind *mt__sched_kind_get(mt_schedule_kind kind) {
    return (unsigned)kind < MT_SCHEDULE_N_KINDS ? &KINDS[kind] : NULL;
}

const char *mt_schedule_kind_name(mt_schedule_kind kind) {
    const mt__sched_kind *k = mt__sched_kind_get(kind);
    return k ? k->name : NULL;
}

mt_status mt_schedule_kind_parse(const char *name, mt_schedule_kind *out) {
    for (int k = 0; k < MT_SCHEDULE_N_KINDS; k++)
        if (name && strcmp(name, KINDS[k].name) == 0) {
            *out = (mt_schedule_kind)k;
            return MT_OK;
        }
    return mt_fail(MT_EINVAL, "unknown schedule kind '%s' (kinds: gpipe, 1f1b, interleaved, "
                   "zb-h1, zb-h2, zb-v, dualpipev)", name ? name : "(null)");
}

const char *mt_pipe_op_name(mt_pipe_op_type type) {
    static const char *const NAMES[] = {"F", "B", "W", "BW"};
    return (unsigned)type < 4 ? NAMES[type] : NULL;
}

void mt__op_text(mt_pipe_op op, char *buf, size_t cap) {
    const char *t = mt_pipe_op_name(op.type);
    snprintf(buf, cap, "%s mb %d chunk %d", t ? t : "?", op.mb, op.chunk);
}

/* ---- creating ------------------------------------------------------------- */

/* The kind's entry into *k, and p, m and v (0: the kind's own) checked. */
static mt_status check_sizes(mt_schedule_kind kind, int p, int m, int *v,
                             const mt__sched_kind **k_out) {
    const mt__sched_kind *k = *k_out = mt__sched_kind_get(kind);
    if (!k) return mt_fail(MT_EINVAL, "schedule kind %d is not one of the %d kinds", (int)kind,
                           MT_SCHEDULE_N_KINDS);
    if (p < 1 || p > MT_SCHEDULE_MAX_STAGES)
        return mt_fail(MT_EINVAL, "a schedule has 1 to %d stages; got %d",
                       MT_SCHEDULE_MAX_STAGES, p);
    if (m < 1) return mt_fail(MT_EINVAL, "a schedule needs at least 1 microbatch; got %d", m);
    if (*v == 0) *v = k->v_default;
    if (*v < k->v_min || *v > k->v_max) {
        if (k->v_min == k->v_max)
            return mt_fail(MT_EINVAL, "%s runs %d chunk%s per device; got %d", k->name,
                           k->v_min, k->v_min == 1 ? "" : "s", *v);
        return mt_fail(MT_EINVAL, "%s runs %d to %d chunks per device; got %d", k->name,
                       k->v_min, k->v_max, *v);
    }
    if ((double)p * m * *v * 3 > MT_SCHEDULE_MAX_OPS)
        return mt_fail(MT_EINVAL, "a schedule of %d stages, %d microbatches and %d chunks "
                       "per device has %.0f ops, more than the %d allowed", p, m, *v,
                       (double)p * m * *v * 3, MT_SCHEDULE_MAX_OPS);
    return MT_OK;
}

mt_status mt_schedule_create(mt_schedule_kind kind, int p, int m, int v, mt_schedule **out) {
    *out = NULL;
    const mt__sched_kind *k;
    mt_status st = check_sizes(kind, p, m, &v, &k);
    if (st != MT_OK) return st;
    mt_schedule *s = calloc(1, sizeof *s);
    if (!s) return mt_fail(MT_ENOMEM, "out of memory for a schedule");
    s->kind = kind;
    s->p = p;
    s->m = m;
    s->v = v;
    s->chunk_device = malloc(sizeof(int) * (size_t)(p * v));
    s->n_ops = calloc((size_t)p, sizeof(int));
    s->cap = calloc((size_t)p, sizeof(int));
    s->ops = calloc((size_t)p, sizeof(mt_pipe_op *));
    if (!s->chunk_device || !s->n_ops || !s->cap || !s->ops) {
        mt_schedule_free(s);
        return mt_fail(MT_ENOMEM, "out of memory for a schedule of %d stages", p);
    }
    for (int c = 0; c < p * v; c++)
        s->chunk_device[c] = k->v_shape ? (c < p ? c : 2 * p - 1 - c) : c % p;
    *out = s;
    return MT_OK;
}

mt_status mt_schedule_make(mt_schedule_kind kind, int p, int m, int v, mt_schedule **out) {
    *out = NULL;
    const mt__sched_kind *k;
    mt_status st = check_sizes(kind, p, m, &v, &k);
    if (st != MT_OK) return st;
    if (m < k->min_mb_per_stage * p) {
        if (k->min_mb_per_stage == 1)
            return mt_fail(MT_EINVAL, "%s needs at least as many microbatches as stages "
                           "(m >= p); got m = %d for p = %d: use %d microbatches or more",
                           k->name, m, p, p);
        return mt_fail(MT_EINVAL, "%s needs m >= %dp microbatches; got m = %d for p = %d: "
                       "use %d microbatches or more", k->name, k->min_mb_per_stage, m, p,
                       k->min_mb_per_stage * p);
    }
    if (k->m_multiple_of_p && m % p != 0)
        return mt_fail(MT_EINVAL, "%s needs m divisible by p (its order runs microbatches "
                       "in groups of p); got m = %d for p = %d: use %d or %d", k->name, m, p,
                       m / p * p, (m / p + 1) * p);
    mt_schedule *s;
    st = mt_schedule_create(kind, p, m, v, &s);
    if (st != MT_OK) return st;
    size_t cap = (size_t)3 * (size_t)m * (size_t)v;
    for (int d = 0; d < p; d++) {
        s->ops[d] = malloc(cap * sizeof(mt_pipe_op));
        if (!s->ops[d]) {
            mt_schedule_free(s);
            return mt_fail(MT_ENOMEM, "out of memory for %zu ops of device %d", cap, d);
        }
        s->cap[d] = (int)cap;
    }
    st = k->build(s);
    if (st != MT_OK) {
        mt_schedule_free(s);
        return st;
    }
    *out = s;
    return MT_OK;
}

mt_status mt_schedule_set_ops(mt_schedule *s, int device, const mt_pipe_op *ops, int n) {
    if (device < 0 || device >= s->p)
        return mt_fail(MT_EINVAL, "device %d is not one of the schedule's %d", device, s->p);
    long long total = n;
    for (int d = 0; d < s->p; d++)
        if (d != device) total += s->n_ops[d];
    if (n < 0 || total > MT_SCHEDULE_MAX_OPS)
        return mt_fail(MT_EINVAL, "%d ops for device %d: a schedule holds 0 to %d ops in all",
                       n, device, MT_SCHEDULE_MAX_OPS);
    mt_pipe_op *copy = malloc(sizeof(mt_pipe_op) * (size_t)(n > 0 ? n : 1));
    if (!copy) return mt_fail(MT_ENOMEM, "out of memory for %d ops", n);
    if (n > 0) memcpy(copy, ops, sizeof(mt_pipe_op) * (size_t)n);
    free(s->ops[device]);
    s->ops[device] = copy;
    s->n_ops[device] = n;
    s->cap[device] = n;
    return MT_OK;
}

void mt_schedule_free(mt_schedule *s) {
    if (!s) return;
    if (s->ops)
        for (int d = 0; d < s->p; d++) free(s->ops[d]);
    free(s->ops);
    free(s->n_ops);
    free(s->cap);
    free(s->chunk_device);
    free(s);
}

/* ---- accessors ------------------------------------------------------------ */

mt_schedule_kind mt_schedule_get_kind(const mt_schedule *s) { return s->kind; }
int mt_schedule_stages(const mt_schedule *s) { return s->p; }
int mt_schedule_microbatches(const mt_schedule *s) { return s->m; }
int mt_schedule_chunks(const mt_schedule *s) { return s->v; }
const char *mt_schedule_note(const mt_schedule *s) { return s->note; }

int mt_schedule_chunk_device(const mt_schedule *s, int chunk) {
    return chunk >= 0 && chunk < s->p * s->v ? s->chunk_device[chunk] : -1;
}

int mt_schedule_n_ops(const mt_schedule *s, int device) {
    return device >= 0 && device < s->p ? s->n_ops[device] : 0;
}

const mt_pipe_op *mt_schedule_ops(const mt_schedule *s, int device) {
    return device >= 0 && device < s->p ? s->ops[device] : NULL;
}

int mt__local_chunk(const mt_schedule *s, int chunk) {
    if (s->v == 1) return 0;
    if (mt__sched_kind_get(s->kind)->v_shape) return chunk < s->p ? 0 : 1;
    return chunk / s->p;
}

void mt__op_label(const mt_schedule *s, mt_pipe_op op, char *buf, size_t cap) {
    static const char *const UPPER[] = {"F", "B", "W", "BW"}, *const LOWER[] = {"f", "b", "w", "bw"};
    int local = mt__local_chunk(s, op.chunk);
    if (s->v == 2 && local == 1) snprintf(buf, cap, "%s%d", LOWER[op.type], op.mb);
    else if (s->v > 2) snprintf(buf, cap, "%s%d.%d", UPPER[op.type], op.mb, local);
    else snprintf(buf, cap, "%s%d", UPPER[op.type], op.mb);
}

double mt__op_cost(const mt_schedule *s, const mt__costs *k, mt_pipe_op op) {
    const mt_pipe_costs *c = k->per_chunk ? &k->c[op.chunk] : k->c;
    mt_pipe_op_type t = op.type;
    double cost = t == MT_PIPE_F ? c->f : t == MT_PIPE_B ? c->b : t == MT_PIPE_W ? c->w
                                                                                 : c->b + c->w;
    return k->per_chunk ? cost : cost / s->v;
}

double mt__comm_cost(const mt__costs *k, mt_pipe_op op) {
    return k->per_chunk ? k->c[op.chunk].comm : k->c->comm;
}
