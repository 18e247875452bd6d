/*
 * rope.c — rotary position embedding (RoPE), forward and backward: the
 * kernel, how a call runs it on the pool, what a run costs, and the kernel
 * half of the descriptors of rope and rope_bwd (mt__opdef_rope,
 * mt__opdef_rope_bwd; ops_impl.h). An op in files of its own: this one, its
 * graph half in graph/op_rope.c, its line in ops_impl.h's MT_OP_LIST
 * (docs/extending.md, "A new op").
 *
 * llama2.c's convention (run.c): in every head of HS channels, the pair
 * (2i, 2i+1) of row t is rotated by the angle pos · theta^(-2i/HS), pos =
 * pos0 + t, as the complex number x[2i] + i·x[2i+1] times e^(i·angle). The
 * backward is the transposed rotation, the angle negated. Every head and
 * every batch row at one t shares the angles, so a row range computes its
 * sines and cosines once per t and applies them to B·NH heads. They are
 * computed in double and rounded once: at positions past a few thousand a
 * float angle would be off by more than float rounding of the result.
 * Outputs must not overlap inputs.
 */
#include "ops/op_par.h"

#include <assert.h>
#include <math.h>

/* Pairs whose angles are computed at a time (a stack buffer). */
#define ROPE_PAIRS 64

/* out (B,T,NH·HS) (+)= x (B,T,NH·HS) with the pair (2i, 2i+1) of every head
 * of row t rotated by sign · (pos0 + t) · theta^(-2i/HS), for the rows t in
 * [t0, t1) of every batch. sign -1 is the backward (the transposed
 * rotation). HS even. */
static void kernel_rope(float *restrict out, const float *restrict x, int64_t B, int64_t T,
                        int64_t NH, int64_t HS, float theta, int64_t pos0, int64_t parts,
                        int64_t part, int sign, bool acc, int64_t t0, int64_t t1) {
    assert(HS > 0 && HS % 2 == 0 && (sign == 1 || sign == -1));
    assert(0 <= t0 && t0 <= t1 && t1 <= T);
    const int64_t C = NH * HS, half = HS / 2;
    float cs[ROPE_PAIRS], sn[ROPE_PAIRS];
    for (int64_t t = t0; t < t1; t++) {
        const double pos = (double)(pos0 + mt_headtail_pos(t, T, (int)parts, (int)part));
        for (int64_t i0 = 0; i0 < half; i0 += ROPE_PAIRS) {
            const int64_t n = half - i0 < ROPE_PAIRS ? half - i0 : ROPE_PAIRS;
            for (int64_t i = 0; i < n; i++) {
                const double freq = pow((double)theta, -(double)(2 * (i0 + i)) / (double)HS);
                cs[i] = (float)cos(pos * freq);
                sn[i] = (float)(sign * sin(pos * freq));
            }
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < NH; h++) {
                    const int64_t off = (b * T + t) * C + h * HS + 2 * i0;
                    const float *restrict xi = x + off;
                    float *restrict o = out + off;
                    for (int64_t i = 0; i < n; i++) {
                        const float x0 = xi[2 * i], x1 = xi[2 * i + 1];
                        const float y0 = x0 * cs[i] - x1 * sn[i], y1 = x0 * sn[i] + x1 * cs[i];
                        if (acc) {
                            o[2 * i] += y0;
                            o[2 * i + 1] += y1;
                        } else {
                            o[2 * i] = y0;
                            o[2 * i + 1] = y1;
                        }
                    }
                }
        }
    }
}

/* ---- the op: rope (p.rope) and its backward, rope_bwd -------------------- */

/* out (B,T,NH·HS) (+)= in0 rotated (rope) or rotated back (rope_bwd); split
 * over T. */
static void range_rope(void *arg, int64_t t0, int64_t t1, int w) {
    (void)w;
    const mt_op_call *c = ((mt_op_par *)arg)->c;
    const mt_rope_params *p = &c->p.rope;
    kernel_rope((float *)c->out->data, (const float *)c->in[0]->data, p->B, p->T, p->NH,
                p->HS, p->theta, p->pos0, p->parts, p->part, c->op == MT_OP_ROPE ? 1 : -1, c->acc, t0, t1);
}

static void run_rope(const mt_op_env *env, const mt_op_call *c) {
    const mt_rope_params *p = &c->p.rope;
    mt_op_par ctx;
    mt__op_par_run(env, c, &ctx, p->T, p->B * p->NH * p->HS, range_rope);
}

/* 6 FLOPs a pair of elements, and the angles' sines and cosines (counted
 * as 20 each) once per (t, pair) */
static void cost_rope(const mt_op_call *c, double *fl, double *by) {
    const mt_rope_params *p = &c->p.rope;
    double e = (double)mt_tensor_numel(c->out);
    *fl = 3 * e + 40 * (double)p->T * (double)(p->HS / 2);
    *by = (c->acc ? 12 : 8) * e;
}

const mt_op_def mt__opdef_rope = {
    .name = "rope", .min_in = 1, .max_in = 1, .cost_class = MT_COST_VECTOR, .cost = cost_rope,
};
const mt_op_kernel mt__kernel_rope = {.run = run_rope};

const mt_op_def mt__opdef_rope_bwd = {
    .name = "rope_bwd", .min_in = 1, .max_in = 1, .cost_class = MT_COST_VECTOR,
    .cost = cost_rope,
};
const mt_op_kernel mt__kernel_rope_bwd = {.run = run_rope};
