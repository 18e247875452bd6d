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
 *
 * The frequencies may be scaled for contexts past training (p.rope.scale:
 * Llama 3.1's piecewise rule, YaRN's ramp and attention factor;
 * meshtrain/graph.h's mt_rope_scaling states both). A scaled rope is the
 * same rotation with other angles, times a constant: linear, so the
 * backward stays the transposed rotation times the same constant.
 */
#include "ops/op_par.h"

#include <assert.h>
#include <math.h>

/* Pairs whose angles are computed at a time (a stack buffer). */
#define ROPE_PAIRS 64
/* π to double precision (math.h's M_PI is not C11) */
#define ROPE_PI 3.14159265358979323846

/* ---- frequency scaling (meshtrain/graph.h's mt_rope_scaling) -------------- */

double mt__rope_mscale(const mt_rope_scale *s) {
    if (!s || s->kind != MT__ROPE_YARN) return 1.0;
    /* YaRN (Peng et al. 2023, eq. 22): sqrt(1/t) = 0.1 ln(s) + 1, on q and k
     * both (HF transformers' _compute_yarn_parameters: attention_factor) */
    if (s->attn_factor > 0.0f) return (double)s->attn_factor;
    return s->factor > 1.0f ? 0.1 * log((double)s->factor) + 1.0 : 1.0;
}

/* YaRN's pair index at which a frequency turns `rotations` times over the
 * original context L (find_correction_dim of YaRN's code and of HF's). */
static double yarn_dim(double rotations, double HS, double theta, double L) {
    return HS * log(L / (rotations * 2.0 * ROPE_PI)) / (2.0 * log(theta));
}

double mt__rope_inv_freq(const mt_rope_scale *s, double theta, int64_t HS, int64_t i) {
    /* exactly the unscaled kernel's expression, so that kind 0 is bitwise
     * the rope it always was */
    const double f = pow(theta, -(double)(2 * i) / (double)HS);
    if (!s || s->kind == MT__ROPE_NONE) return f;
    const double factor = (double)s->factor, L = (double)s->original_context;
    if (s->kind == MT__ROPE_LLAMA3) {   /* Meta's apply_scaling (llama3_1 reference code) */
        const double lo = (double)s->low_freq_factor, hi = (double)s->high_freq_factor;
        const double wavelen = 2.0 * ROPE_PI / f;
        if (wavelen < L / hi) return f;
        if (wavelen > L / lo) return f / factor;
        const double smooth = (L / wavelen - lo) / (hi - lo);
        return (1.0 - smooth) * f / factor + smooth * f;
    }
    /* MT__ROPE_YARN: the ramp over the pair index between where a
     * frequency turns beta_fast and beta_slow times over L (YaRN's code
     * truncates to whole pairs) */
    double lo = floor(yarn_dim((double)s->beta_fast, (double)HS, theta, L));
    double hi = ceil(yarn_dim((double)s->beta_slow, (double)HS, theta, L));
    if (lo < 0) lo = 0;
    if (hi > (double)(HS - 1)) hi = (double)(HS - 1);
    if (hi - lo < 0.001) hi = lo + 0.001;   /* as YaRN's linear_ramp_mask */
    double ramp = ((double)i - lo) / (hi - lo);
    ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
    return f * (1.0 - ramp) + f / factor * ramp;
}

/* ---- the kernel ------------------------------------------------------------ */

/* out (B,T,NH·HS) (+)= x (B,T,NH·HS) with the pair (2i, 2i+1) of every head
 * of row t rotated by sign · pos_t · f_i (pos_t = pos0 + t, or with parts > 1
 * pos0 + mt_headtail_pos(t, T, parts, part); f_i mt__rope_inv_freq of p's
 * scale) and multiplied by its mscale, for the rows t in [t0, t1) of every
 * batch. sign -1 is the backward (the transposed rotation). HS even. */
static void kernel_rope(float *restrict out, const float *restrict x, const mt_rope_params *p,
                        int sign, bool acc, int64_t t0, int64_t t1) {
    const int64_t B = p->B, T = p->T, NH = p->NH, HS = p->HS, pos0 = p->pos0;
    const int64_t parts = p->parts, part = p->part;
    assert(HS > 0 && HS % 2 == 0 && (sign == 1 || sign == -1));
    assert(0 <= t0 && t0 <= t1 && t1 <= T);
    const int64_t C = NH * HS, half = HS / 2;
    const double m = mt__rope_mscale(&p->scale);   /* 1 exactly without yarn */
    float cs[ROPE_PAIRS], sn[ROPE_PAIRS];
    for (int64_t t = t0; t < t1; t++) {
        const double pos = (double)(pos0 + mt_headtail_pos(t, T, (int)parts, (int)part));
        for (int64_t i0 = 0; i0 < half; i0 += ROPE_PAIRS) {
            const int64_t n = half - i0 < ROPE_PAIRS ? half - i0 : ROPE_PAIRS;
            for (int64_t i = 0; i < n; i++) {
                const double freq = mt__rope_inv_freq(&p->scale, (double)p->theta, HS, i0 + i);
                cs[i] = (float)(m * cos(pos * freq));
                sn[i] = (float)(m * (sign * sin(pos * freq)));
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
    kernel_rope((float *)c->out->data, (const float *)c->in[0]->data, p,
                c->op == MT_OP_ROPE ? 1 : -1, c->acc, t0, t1);
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
