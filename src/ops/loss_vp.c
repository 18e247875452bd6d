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
#include "ops/vec_impl.h"

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

void mt__run_cross_entropy_vp(const mt_op_env *env, const mt_op_call *c) {
    const mt_ce_params *p = &c->p.ce;
    const int64_t rows = p->rows, Vp = p->Vp, valid = valid_columns(p);
    const float *x = F32(c->in[0]);          /* (rows, Vp) */
    const int32_t *tg = I32(c->in[1]);       /* (rows) */
    float *lse = F32(c->aux[0]);             /* (rows): the max first, then lse */
    float *sums = env->scratch;              /* (2, rows): Σ exp, then the target logit */
    if (!env->ctx || !sums) {
        comm_ok(env, mt_fail(MT_ESTATE, "vocabulary-parallel cross_entropy needs the graph's "
                             "device (mt_graph_set_ctx) and its scratch"));
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        float m = -INFINITY;
        for (int64_t j = 0; j < valid; j++) m = fmaxf(m, x[r * Vp + j]);
        lse[r] = m;
    }
    if (!comm_ok(env, mt_pmax(env->ctx, p->vp_axes, lse, (size_t)rows))) return;
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t j = 0; j < valid; j++) s += exp(x[r * Vp + j] - lse[r]);
        sums[r] = (float)s;
        int64_t t = (int64_t)tg[r] - p->lo;
        sums[rows + r] = tg[r] >= 0 && t >= 0 && t < valid ? x[r * Vp + t] : 0.0f;
    }
    if (!comm_ok(env, mt_psum(env->ctx, p->vp_axes, sums, (size_t)(2 * rows)))) return;
    double loss = 0;
    for (int64_t r = 0; r < rows; r++) {
        lse[r] += logf(sums[r]);
        if (tg[r] >= 0) loss += (double)lse[r] - (double)sums[rows + r];
    }
    F32(c->out)[0] = (float)(p->scale * loss);
}

/* dlogits (rows, Vp) (+)= dloss · scale · (softmax - onehot(target)) over
 * this block's columns; padding and rows without a target get 0. */
void mt__run_ce_bwd_vp(const mt_op_env *env, const mt_op_call *c) {
    (void)env;
    const mt_ce_params *p = &c->p.ce;
    const int64_t rows = p->rows, Vp = p->Vp, valid = valid_columns(p);
    float *d = F32(c->out);
    const float *x = F32(c->in[1]), *lse = F32(c->in[2]);
    const int32_t *tg = I32(c->in[3]);
    const float k = F32(c->in[0])[0] * p->scale;
    for (int64_t r = 0; r < rows; r++) {
        float *dr = d + r * Vp;
        const float *xr = x + r * Vp;
        if (!c->acc) memset(dr, 0, (size_t)Vp * sizeof *dr);
        if (tg[r] < 0) continue;
        for (int64_t j = 0; j < valid; j++) dr[j] += k * expf(xr[j] - lse[r]);
        int64_t t = (int64_t)tg[r] - p->lo;
        if (t >= 0 && t < valid) dr[t] -= k;
    }
}
