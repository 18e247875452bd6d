/*
 * loss_vp.c — softmax cross-entropy over a vocabulary split across devices
 * (Megatron's vocabulary-parallel loss).
 *
 * Each device holds the logits of columns [lo, lo+Vp) of every row. The
 * forward finds each row's statistics over the whole vocabulary with three
 * all-reduces over the vocabulary axes: the max (for a stable exponent), the
 * sum of exponentials, and the target's logit (only its owner adds it).
 * Every device then holds lse for its rows and the whole loss. The backward
 * needs no communication: each device's block of the gradient is
 * softmax - onehot over its own columns.
 *
 * Columns at or past the global V (padding) take no part. All-reduces run on
 * the op's device (env->ctx); a failure goes to *env->status.
 */
#include "ops/kernels.h"
#include "ops/ops_impl.h"
#include "base/pool.h"
#include "vec/vec.h"

#include <math.h>
#include <string.h>

#define F32(t) ((float *)(t)->data)
#define I32(t) ((const int32_t *)(t)->data)

static bool comm_ok(const mt_op_env *env, mt_status s) {
    if (s != MT_OK && env->status && *env->status == MT_OK) *env->status = s;
    return s == MT_OK;
}

/* The columns of this block that are vocabulary, not padding. */
static int64_t valid_columns(const mt_ce_params *p) {
    int64_t n = p->V - p->lo;
    return n < 0 ? 0 : n > p->Vp ? p->Vp : n;
}

/* What the row-range functions read: the call, its block's real columns. */
typedef struct {
    const mt_op_call *c;
    int64_t           valid;
    float            *sums;   /* the forward's (2, rows) scratch */
} vp_job;

/* Rows' max over their real columns. */
static void range_max(void *arg, int64_t r0, int64_t r1, int w) {
    (void)w;
    const vp_job *job = arg;
    const mt_ce_params *p = &job->c->p.ce;
    const float *x = F32(job->c->in[0]);     /* (rows, Vp) */
    float *mx = F32(job->c->aux[0]);         /* (rows) */
    const mt_vec_ops *vec = mt__vec();
    for (int64_t r = r0; r < r1; r++) mx[r] = vec->max(x + r * p->Vp, job->valid);
}

/* Rows' Σ exp(x - max) over their real columns, and their target's logit
 * where this block holds it (else 0). */
static void range_sums(void *arg, int64_t r0, int64_t r1, int w) {
    (void)w;
    const vp_job *job = arg;
    const mt_ce_params *p = &job->c->p.ce;
    const float *x = F32(job->c->in[0]), *mx = F32(job->c->aux[0]);
    const int32_t *tg = I32(job->c->in[1]);
    const int64_t n = job->valid, rows = p->rows;
    const mt_vec_ops *vec = mt__vec();
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * p->Vp;
        job->sums[r] = vec->sum_exp(xr, n, mx[r]);
        int64_t t = (int64_t)tg[r] - p->lo;
        job->sums[rows + r] = tg[r] >= 0 && t >= 0 && t < n ? xr[t] : 0.0f;
    }
}

void mt__run_cross_entropy_vp(const mt_op_env *env, const mt_op_call *c) {
    const mt_ce_params *p = &c->p.ce;
    const int64_t rows = p->rows;
    const int32_t *tg = I32(c->in[1]);       /* (rows) */
    float *lse = F32(c->aux[0]);             /* (rows): the max first, then lse */
    float *sums = env->scratch;              /* (2, rows): Σ exp, then the target logit */
    if (!env->ctx || !sums) {
        comm_ok(env, mt_fail(MT_ESTATE, "vocabulary-parallel cross_entropy needs the graph's "
                             "device (mt_graph_set_ctx) and its scratch"));
        return;
    }
    vp_job job = {c, valid_columns(p), sums};
    const int64_t grain = 1 + 16384 / (p->Vp > 0 ? p->Vp : 1);   /* rows worth a wake */
    mt_pool_run(env->pool, rows, grain, range_max, &job);
    if (!comm_ok(env, mt_pmax(env->ctx, p->vp_axes, lse, (size_t)rows))) return;
    mt_pool_run(env->pool, rows, grain, range_sums, &job);
    if (!comm_ok(env, mt_psum(env->ctx, p->vp_axes, sums, (size_t)(2 * rows)))) return;
    double loss = 0;
    for (int64_t r = 0; r < rows; r++) {
        lse[r] += logf(sums[r]);
        if (tg[r] >= 0) loss += (double)lse[r] - (double)sums[rows + r];
    }
    F32(c->out)[0] = (float)(p->scale * loss);
}

/* dlogits (rows, Vp) (+)= dloss · scale · (softmax - onehot(target)) over
 * this block's columns, for rows [r0, r1); padding and rows without a target
 * get 0. */
static void range_bwd(void *arg, int64_t r0, int64_t r1, int w) {
    (void)w;
    const vp_job *job = arg;
    const mt_op_call *c = job->c;
    const mt_ce_params *p = &c->p.ce;
    const int64_t Vp = p->Vp, valid = job->valid;
    float *d = F32(c->out);
    const float *x = F32(c->in[1]), *lse = F32(c->in[2]);
    const int32_t *tg = I32(c->in[3]);
    const float k = F32(c->in[0])[0] * p->scale;
    const mt_vec_ops *vec = mt__vec();
    for (int64_t r = r0; r < r1; r++) {
        float *dr = d + r * Vp;
        const float *xr = x + r * Vp;
        if (!c->acc) memset(dr, 0, (size_t)Vp * sizeof *dr);
        if (tg[r] < 0) continue;
        vec->scale_exp(dr, xr, valid, lse[r], k, true);
        int64_t t = (int64_t)tg[r] - p->lo;
        if (t >= 0 && t < valid) dr[t] -= k;
    }
}

void mt__run_ce_bwd_vp(const mt_op_env *env, const mt_op_call *c) {
    vp_job job = {c, valid_columns(&c->p.ce), NULL};
    mt_pool_run(env->pool, c->p.ce.rows, 1 + 16384 / (c->p.ce.Vp > 0 ? c->p.ce.Vp : 1),
                range_bwd, &job);
}
