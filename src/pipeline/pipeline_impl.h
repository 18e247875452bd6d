/*
 * pipeline_impl.h — what the files of src/pipeline/ share: the schedule
 * record, the table of kinds, the builders of each family, and the index
 * and dependency helpers the validator and the simulator both use.
 */
#ifndef MT_PIPELINE_IMPL_H
#define MT_PIPELINE_IMPL_H

#include "meshtrain/pipeline.h"

#include <assert.h>

struct mt_schedule {
    mt_schedule_kind kind;
    int          p, m, v;
    int         *chunk_device;   /* (p·v) the device of each global chunk */
    int         *n_ops, *cap;    /* (p) */
    mt_pipe_op **ops;            /* (p) each device's list */
    char         note[512];
};

/* ---- the kinds ------------------------------------------------------------ */

/* One entry per kind (schedule.c): adding a kind is one entry and one
 * builder. A builder fills the lists of an empty schedule whose p, m, v and
 * placement are set and whose preconditions have been checked, with
 * mt__sched_push; it may set s->note. */
typedef struct {
    const char *name;
    mt_status (*build)(mt_schedule *s);
    int  v_default, v_min, v_max;
    bool v_shape;          /* device i holds chunks i and 2p-1-i; else i, i+p, ... */
    int  min_mb_per_stage; /* m >= this · p (1, or 2 for dualpipev) */
    bool m_multiple_of_p;  /* interleaved */
} mt__sched_kind;

const mt__sched_kind *mt__sched_kind_get(mt_schedule_kind kind);

mt_status mt__sched_build_gpipe(mt_schedule *s);        /* sched_1f1b.c */
mt_status mt__sched_build_1f1b(mt_schedule *s);         /* sched_1f1b.c */
mt_status mt__sched_build_interleaved(mt_schedule *s);  /* sched_1f1b.c */
mt_status mt__sched_build_zb_h1(mt_schedule *s);        /* sched_zb.c */
mt_status mt__sched_build_zb_h2(mt_schedule *s);        /* sched_zb.c */
mt_status mt__sched_build_zb_v(mt_schedule *s);         /* sched_v.c */
mt_status mt__sched_build_dualpipev(mt_schedule *s);    /* sched_v.c */

/* Appends an op to device d's list (capacity 3·m·v, set by create). Inline:
 * the builders call it and schedule.c's table calls the builders, so it
 * lives in neither file (tests/test_file_cycles.sh). */
static inline void mt__sched_push(mt_schedule *s, int d, mt_pipe_op_type t, int mb, int chunk) {
    assert(d >= 0 && d < s->p && s->n_ops[d] < s->cap[d]);
    s->ops[d][s->n_ops[d]++] = (mt_pipe_op){.type = t, .mb = mb, .chunk = chunk};
}

/* "F mb 3 chunk 5" into buf. */
void mt__op_text(mt_pipe_op op, char *buf, size_t cap);

/* ---- index and dependencies (validate.c) ----------------------------------- */

/* Where each (type, microbatch, chunk) sits in its device's list: the
 * position, or -1. b holds the B or the BW, w the W or the BW, so a
 * dependency on "the backward of (j, k)" reads b and one on "its weight
 * gradient" reads w. Built by mt__sched_index_build, which also checks rules 1
 * and 2 of mt_schedule_validate. */
typedef struct {
    int *f, *b, *w;   /* (m · p·v), at j·K + k */
} mt__sched_index;

mt_status mt__sched_index_build(const mt_schedule *s, mt__sched_index *ix);
void      mt__sched_index_free(mt__sched_index *ix);

/* The ops `op` depends on, as (device, position) pairs: up to 2. */
typedef struct { int device, pos; } mt__sched_dep;
int mt__sched_deps(const mt_schedule *s, const mt__sched_index *ix, mt_pipe_op op,
                   mt__sched_dep out[2]);

/* Op costs as the simulator takes them: one mt_pipe_costs for a whole
 * stage (an op on a chunk costs 1/v of it), or, per_chunk, one for each
 * global chunk (p·v entries), each its chunk's own op costs. */
typedef struct {
    const mt_pipe_costs *c;
    bool                 per_chunk;
} mt__costs;

/* Rules 3 and 4 of mt_schedule_validate. With `costs` not NULL, also times
 * every op (start[d][i], end[d][i]) as the simulator defines; the schedule
 * must then be valid. */
mt_status mt__sched_drain(const mt_schedule *s, const mt__sched_index *ix,
                          const mt__costs *costs, double **start, double **end);

/* The times of a valid schedule's ops (mt__sched_drain checked it) on
 * time-shared cores, as mt_schedule_simulate_shared defines
 * (simulate_shared.c): `replicas` copies side by side, `slots` devices at
 * full speed at once. */
mt_status mt__sched_drain_shared(const mt_schedule *s, const mt__sched_index *ix,
                                 const mt__costs *costs, int replicas, double slots,
                                 double **start, double **end);

/* Each device's peak activations, in stage units (see mt_schedule_simulate). */
void mt__sched_peaks(const mt_schedule *s, double w_memory, double *peak);

/* The cost of one op under `costs` (1/v of the stage's, or its chunk's own),
 * and of a message into it from another device. */
double mt__op_cost(const mt_schedule *s, const mt__costs *costs, mt_pipe_op op);
double mt__comm_cost(const mt__costs *costs, mt_pipe_op op);

/* The label of an op for the text timeline and the SVG: "F3", lower case
 * for local chunk 1 when v = 2, "F3.2" for local chunk 2 when v > 2. */
void mt__op_label(const mt_schedule *s, mt_pipe_op op, char *buf, size_t cap);

/* The op's chunk number among its device's chunks, 0 .. v-1, in model order. */
int mt__local_chunk(const mt_schedule *s, int chunk);

#endif /* MT_PIPELINE_IMPL_H */
