/*
 * op_rope.c — rotary position embedding (RoPE) to a graph: its builder
 * (mt_rope, meshtrain/graph.h), its gradient, sharding and lowering rules,
 * and the graph half of the descriptors of rope and rope_bwd (mt__gop_rope,
 * mt__gop_rope_bwd; op_desc.h). The kernel half is ops/rope.c's, the line
 * in ops/ops_impl.h's MT_OP_LIST; nothing else names the op. The worked
 * example of docs/extending.md's "A new op".
 */
#include "graph/builders_impl.h"
#include "graph/op_desc.h"
#include "graph/shard_rules_impl.h"

#include <math.h>
#include <stdio.h>

#define SHAPE(t, buf) mt__shape_str((t), (buf), sizeof (buf))

/* The public kinds are the kernel's (ops sit below graph, so ops_impl.h
 * spells them again). */
_Static_assert((int)MT_ROPE_SCALING_NONE == (int)MT__ROPE_NONE &&
               (int)MT_ROPE_SCALING_LLAMA3 == (int)MT__ROPE_LLAMA3 &&
               (int)MT_ROPE_SCALING_YARN == (int)MT__ROPE_YARN,
               "graph.h's and ops_impl.h's RoPE scaling kinds");

const char *mt_rope_scaling_name(int kind) {
    switch (kind) {
    case MT_ROPE_SCALING_NONE: return "none";
    case MT_ROPE_SCALING_LLAMA3: return "llama3";
    case MT_ROPE_SCALING_YARN: return "yarn";
    default: return NULL;
    }
}

/* The kernel's copy of s (all zero for NULL: none). */
static mt_rope_scale scale_of(const mt_rope_scaling *s) {
    if (!s) return (mt_rope_scale){0};
    return (mt_rope_scale){.kind = s->kind, .factor = s->factor,
                           .low_freq_factor = s->low_freq_factor,
                           .high_freq_factor = s->high_freq_factor,
                           .original_context = s->original_context,
                           .beta_fast = s->beta_fast, .beta_slow = s->beta_slow,
                           .attn_factor = s->attn_factor};
}

mt_status mt_rope_scaling_check(const mt_rope_scaling *s) {
    if (!s) return MT_OK;
    const char *k = mt_rope_scaling_name(s->kind);
    if (!k)
        return mt_fail(MT_EINVAL, "RoPE scaling kind %d is none of none (0), llama3 (1) and "
                       "yarn (2) (--rope-scaling)", s->kind);
    /* every member, read or not, finite and not negative (0: not set), so
     * that a setting out of range is refused whatever the kind */
    const struct { const char *flag; float v; } m[] = {
        {"factor", s->factor}, {"low-freq-factor", s->low_freq_factor},
        {"high-freq-factor", s->high_freq_factor}, {"original-context",
        (float)s->original_context}, {"beta-fast", s->beta_fast},
        {"beta-slow", s->beta_slow}, {"attn-factor", s->attn_factor},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (!(isfinite(m[i].v) && m[i].v >= 0.0f))
            return mt_fail(MT_EINVAL, "--rope-%s %g must be finite and not negative (RoPE "
                           "scaling %s)", m[i].flag, (double)m[i].v, k);
    if (s->kind == MT_ROPE_SCALING_NONE) return MT_OK;
    if (!(s->factor >= 1.0f))
        return mt_fail(MT_EINVAL, "--rope-scaling %s: --rope-factor %g must be at least 1 "
                       "(Llama 3.1's: 8)", k, (double)s->factor);
    if (s->original_context <= 0)
        return mt_fail(MT_EINVAL, "--rope-scaling %s: --rope-original-context %d must be "
                       "positive, the context in positions the model was trained on (Llama "
                       "3.1's: 8192)", k, s->original_context);
    if (s->kind == MT_ROPE_SCALING_LLAMA3 &&
        !(s->low_freq_factor > 0.0f && s->high_freq_factor > s->low_freq_factor))
        return mt_fail(MT_EINVAL, "--rope-scaling llama3: --rope-low-freq-factor %g and "
                       "--rope-high-freq-factor %g must have 0 < low < high (Llama 3.1's: 1 "
                       "and 4)", (double)s->low_freq_factor, (double)s->high_freq_factor);
    if (s->kind == MT_ROPE_SCALING_YARN &&
        !(s->beta_slow > 0.0f && s->beta_fast > s->beta_slow))
        return mt_fail(MT_EINVAL, "--rope-scaling yarn: --rope-beta-fast %g and "
                       "--rope-beta-slow %g must have beta_fast > beta_slow > 0 (YaRN's: 32 "
                       "and 1)", (double)s->beta_fast, (double)s->beta_slow);
    return MT_OK;
}

double mt_rope_inv_freq(const mt_rope_scaling *s, double theta, int64_t HS, int64_t i) {
    const mt_rope_scale k = scale_of(s);
    return mt__rope_inv_freq(&k, theta, HS, i);
}

double mt_rope_mscale(const mt_rope_scaling *s) {
    const mt_rope_scale k = scale_of(s);
    return mt__rope_mscale(&k);
}

/* mt_rope_scaled with the kernel's copy of the scaling (a lowering passes
 * the global op's on). */
static mt_tensor *rope_build(mt_graph *g, mt_tensor *x, int n_heads, float theta, int64_t pos0,
                             const mt_rope_scale *scale) {
    if (!mt__build_ready(g, 1, &x) || !mt__build_want_dtype(g, "rope", x, MT_F32)) return NULL;
    char s[64];
    if (x->ndim != 3)
        return mt__graph_error(g, MT_ESHAPE, "rope: x '%s' %s must be (B,T,n_heads·HS)",
                               x->name, SHAPE(x, s));
    int64_t C = x->shape[2];
    if (n_heads <= 0 || C % n_heads != 0 || (C / n_heads) % 2 != 0)
        return mt__graph_error(g, MT_EINVAL, "rope: x '%s' %s has C=%lld channels, which must "
                               "split into n_heads=%d heads of an even size", x->name,
                               SHAPE(x, s), (long long)C, n_heads);
    if (!(theta > 1.0f) || pos0 < 0)
        return mt__graph_error(g, MT_EINVAL, "rope of '%s': theta=%g must be > 1 (10000, or "
                               "500000 for Llama 3) and pos0=%lld >= 0", x->name,
                               (double)theta, (long long)pos0);
    mt_op_params p = {.rope = {.B = x->shape[0], .T = x->shape[1], .NH = n_heads,
                               .HS = C / n_heads, .theta = theta, .pos0 = pos0,
                               .scale = *scale}};
    return mt__build_simple(g, MT_OP_ROPE, 3, x->shape, &x, 1, p);
}

mt_tensor *mt_rope(mt_graph *g, mt_tensor *x, int n_heads, float theta, int64_t pos0) {
    return mt_rope_scaled(g, x, n_heads, theta, pos0, NULL);
}

mt_tensor *mt_rope_scaled(mt_graph *g, mt_tensor *x, int n_heads, float theta, int64_t pos0,
                          const mt_rope_scaling *scaling) {
    if (!mt__build_ready(g, 1, &x)) return NULL;
    if (mt_rope_scaling_check(scaling) != MT_OK)
        return mt__graph_error(g, MT_EINVAL, "rope of '%s': %s", x->name, mt_errmsg());
    const mt_rope_scale k = scale_of(scaling);
    return rope_build(g, x, n_heads, theta, pos0, &k);
}

/* A rotation's transpose is the rotation back. */
static void grad_rope(mt_graph *g, const mt_op_call *f) {
    mt_op_call dx = {.op = MT_OP_ROPE_BWD, .n_in = 1, .in = {f->out->grad}};
    dx.p.rope = f->p.rope;
    mt__emit_grad(g, f->in[0], &dx);
}

/* out (B,T,NH·HS) = x rotated per (t, pair): linear, so partial sums pass;
 * B and T pass (a device's rows keep their global positions: the lowering
 * shifts pos0 by its first row); the last dim may be split only on whole
 * heads (every head has the same angles). */
static mt_status shard_rope(mt_srule *r, const mt_op_call *call, mt_type *in) {
    mt_type *x = &in[0];
    if (x->ndim != 3)
        return mt_fail(MT_ESHAPE, "%s: operands %s: want x (B,T,NH·HS)", r->op,
                       mt__stype(r->mesh, x).s);
    const int64_t NH = call->p.rope.NH;
    const uint32_t heads = x->sharding.dim_axes[2];
    if (heads && NH % mt__saxes_size(r->mesh, heads) != 0) {
        char why[512];
        snprintf(why, sizeof why, "rope rotates pairs inside each of its NH=%lld heads, which "
                 "do not divide over %s (%lld devices): split the channels over axes whose size "
                 "divides NH, or keep them whole", (long long)NH, mt__saxes(r->mesh, heads).s,
                 (long long)mt__saxes_size(r->mesh, heads));
        mt_status s = mt__sneed_whole(r, 0, "x", x, 2, why);
        if (s != MT_OK) return s;
    }
    r->out->result = *x;
    return MT_OK;
}

/* Rows split over T: over head-tail axes (mt_lower_env.headtail) this
 * device holds its head-tail share of the sequence (mt_headtail_pos, as
 * attention's split reads it), else a contiguous block whose first row is
 * at pos0 + its first index; heads split: its share of them. */
static mt_tensor *lower_rope(mt_graph *g, const mt_op_call *c, mt_tensor **in,
                             const mt_lower_env *e) {
    const mt_rope_params *p = &c->p.rope;
    uint32_t rows = e->types[0].sharding.dim_axes[1];
    if (rows && (rows & ~e->headtail))   /* contiguous blocks: the first row's position */
        return rope_build(g, in[0], (int)(in[0]->shape[2] / p->HS), p->theta,
                          p->pos0 + e->start(e->ctx, rows, in[0]->shape[1]), &p->scale);
    mt_tensor *out = rope_build(g, in[0], (int)(in[0]->shape[2] / p->HS), p->theta, p->pos0,
                                &p->scale);
    if (out && rows) {
        const int64_t T = in[0]->shape[1];
        mt_op_call *made = &g->nodes[g->n_nodes - 1].call;
        made->p.rope.parts = e->types[0].shape[1] / T;
        made->p.rope.part = e->start(e->ctx, rows, T) / T;
        if (made->p.rope.parts > 1 && T % 2 != 0)
            return mt__graph_error(g, MT_EINVAL, "rope of '%s': T=%lld rows of a sequence split "
                                   "over %lld devices; the head-tail split needs T even (a "
                                   "sequence length a multiple of %lld)", in[0]->name,
                                   (long long)T, (long long)made->p.rope.parts,
                                   2 * (long long)made->p.rope.parts);
    }
    return out;
}

/* rope: a forward op of global programs, recomputed by remat, no
 * communication; its moves the partitioner's generic order. */
const mt_op_gdesc mt__gop_rope = {
    .role = MT_ROLE_GLOBAL, .grad = grad_rope, .shard = shard_rope, .lower = lower_rope,
    .lower_moves = mt__lower_moves_generic, .recomp = MT_RECOMP_LOCAL, .comm = MT_COMM_NONE,
};

/* rope_bwd: made by grad_rope only. */
const mt_op_gdesc mt__gop_rope_bwd = {
    .role = MT_ROLE_BACKWARD, .recomp = MT_RECOMP_NEVER, .comm = MT_COMM_NONE,
};
