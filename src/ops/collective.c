/*
 * collective.c — the collective ops: a graph's tensors are one device's local
 * arrays, and these calls run comm.h's collectives on them over the group of
 * env->ctx's device over p.coll.axes (see graph.h, "collectives inside a
 * graph").
 *
 * Every call runs on the calling thread (the device's own), never on the
 * kernel pool: a collective blocks until the group arrives, and its message,
 * on failure, is the calling thread's mt_errmsg(). A failure (another device
 * failed: MT_EABORTED; a timeout) goes to *env->status, the first one
 * sticking; out is then unspecified.
 *
 * Accumulating (acc: out += result), the result is first computed into
 * scratch the size of out — the op table's scratch() hook asks for it, on
 * the calling thread alone (scratch_caller), so the graph's plan allocates
 * it once and no run mallocs — then added.
 * Overwriting, the result goes straight into out. (comm's dimensioned forms
 * rearrange blocks in the ctx's own scratch, which grows once to the largest
 * size seen and is then reused.)
 *
 * Shapes: in (and out) are dense row-major with ndim dims; P is the group
 * size, r this device's group rank; outer = Π shape[:dim], inner =
 * Π shape[dim+1:].
 */
#include "ops/kernels.h"
#include "ops/ops_impl.h"

#include <assert.h>
#include <string.h>

#define F32(t) ((float *)(t)->data)
#define NUMEL(t) mt_tensor_numel(t)

/* ======================================================================== */
/* Helpers                                                                   */
/* ======================================================================== */

/* Records the first failure of a run; later ones (usually MT_EABORTED
 * caused by the first) are dropped. */
static void record(const mt_op_env *env, mt_status s) {
    if (s != MT_OK && env->status && *env->status == MT_OK) *env->status = s;
}

/* Where the call's result goes before it reaches out: out itself, or the
 * scratch (numel(out) floats) when the call accumulates. */
static float *dest(const mt_op_env *env, const mt_op_call *c) {
    return c->acc ? env->scratch : F32(c->out);
}

/* out += scratch when the call accumulates (the result went to scratch). */
static void finish(const mt_op_env *env, const mt_op_call *c, mt_status s) {
    if (s == MT_OK && c->acc) mt_kernel_scale(F32(c->out), env->scratch, 1.0f, NUMEL(c->out), true);
    record(env, s);
}

/* A collective op without a device: the graph was run without one (the
 * builders refuse to make these calls without a ctx, so this is a bug). The
 * op's name is exec.c's to add (run_node wraps every failure with its node):
 * the table that names ops calls these kernels, so they do not call it. */
static bool have_ctx(const mt_op_env *env, const mt_op_call *c) {
    if (env->ctx) return true;
    record(env, mt_fail(MT_ESTATE, "collective op on '%s' has no device to run on; call "
                        "mt_graph_set_ctx before building the graph", c->out->name));
    return false;
}

/* ======================================================================== */
/* Run                                                                       */
/* ======================================================================== */

/* ---- bf16 gradient reductions (p.coll.bf16) ------------------------------
 * Only on W's async reductions, whose input no other node reads: the input
 * is cast to bf16 in place (its first half), reduced there (a psum_scatter
 * receives into its second half), and out (+)= the result cast back. */

#define CAST_BLOCK 16

void mt__coll_to_bf16_inplace(void *buf, size_t n) {
    unsigned char *b = buf;
    float f[CAST_BLOCK];
    uint16_t h[CAST_BLOCK];
    /* block i0 reads floats [i0, i0+16) before writing halves [i0, i0+16),
     * which lie in floats [i0/2, i0/2+8): all read already */
    for (size_t i0 = 0; i0 < n; i0 += CAST_BLOCK) {
        size_t m = n - i0 < CAST_BLOCK ? n - i0 : CAST_BLOCK;
        memcpy(f, b + 4 * i0, 4 * m);
        for (size_t i = 0; i < m; i++) h[i] = mt__f32_to_bf16_1(f[i]);
        memcpy(b + 2 * i0, h, 2 * m);
    }
}

void mt__coll_from_bf16(float *out, const uint16_t *src, size_t n, bool acc) {
    if (acc)
        for (size_t i = 0; i < n; i++) out[i] += mt__bf16_to_f32_1(src[i]);
    else
        mt__bf16_to_f32(out, src, n);
}

/* PSUM in bf16: in0 cast in place, all-reduced there, out (+)= it. */
static void psum_bf16(const mt_op_env *env, const mt_op_call *c) {
    size_t n = (size_t)NUMEL(c->out);
    void *buf = c->in[0]->data;
    assert(buf != c->out->data && "a bf16 psum in place");
    mt__coll_to_bf16_inplace(buf, n);
    mt_status s = mt_all_reduce(env->ctx, c->p.coll.axes, buf, n, MT_BF16, MT_REDUCE_SUM);
    if (s == MT_OK) mt__coll_from_bf16(F32(c->out), buf, n, c->acc);
    record(env, s);
}

/* PSUM_SCATTER in bf16: in0 cast in place, this device's block received
 * into in0's second half, out (+)= it. */
static void psum_scatter_bf16(const mt_op_env *env, const mt_op_call *c) {
    const mt_tensor *x = c->in[0];
    uint16_t *send = x->data, *recv = send + NUMEL(x);
    mt__coll_to_bf16_inplace(send, (size_t)NUMEL(x));
    mt_status s = mt_psum_scatter_dim(env->ctx, c->p.coll.axes, send, recv, MT_BF16, x->ndim,
                                      x->shape, c->p.coll.dim, true);
    if (s == MT_OK) mt__coll_from_bf16(F32(c->out), recv, (size_t)NUMEL(c->out), c->acc);
    record(env, s);
}

/* PSUM: out (+)= Σ_group in0, any shape; in place on the destination. */
void mt__run_psum(const mt_op_env *env, const mt_op_call *c) {
    if (!have_ctx(env, c)) return;
    if (c->p.coll.bf16) {
        psum_bf16(env, c);
        return;
    }
    float *d = dest(env, c);
    size_t n = (size_t)NUMEL(c->out);
    if (d != F32(c->in[0])) memcpy(d, F32(c->in[0]), n * sizeof(float));
    finish(env, c, mt_all_reduce(env->ctx, c->p.coll.axes, d, n, MT_F32, MT_REDUCE_SUM));
}

/* ALL_GATHER: in (..., s, ...) -> out (..., P·s, ...) along dim, tiled.
 * With gather16 (never accumulating): its bf16 copy of in, gathered into
 * out's bytes as bf16. */
void mt__run_all_gather(const mt_op_env *env, const mt_op_call *c) {
    if (!have_ctx(env, c)) return;
    const mt_tensor *x = c->in[0];
    if (c->p.coll.gather16) {
        assert(!c->acc && "a bf16 all-gather accumulates");
        record(env, mt_all_gather_dim(env->ctx, c->p.coll.axes, c->p.coll.gather16, c->out->data,
                                      MT_BF16, x->ndim, x->shape, c->p.coll.dim, true));
        return;
    }
    assert((x->dtype == MT_F32 || !c->acc) && "an int32 all-gather accumulates");
    finish(env, c, mt_all_gather_dim(env->ctx, c->p.coll.axes, x->data, dest(env, c), x->dtype,
                                     x->ndim, x->shape, c->p.coll.dim, true));
}

/* PSUM_SCATTER: in (..., P·s, ...) -> out (..., s, ...): block r of the sum. */
void mt__run_psum_scatter(const mt_op_env *env, const mt_op_call *c) {
    if (!have_ctx(env, c)) return;
    if (c->p.coll.bf16) {
        psum_scatter_bf16(env, c);
        return;
    }
    const mt_tensor *x = c->in[0];
    finish(env, c, mt_psum_scatter_dim(env->ctx, c->p.coll.axes, x->data, dest(env, c), MT_F32,
                                       x->ndim, x->shape, c->p.coll.dim, true));
}

/* PPERMUTE: out (+)= in0 of the source whose pair names this rank (zeros if none). */
void mt__run_ppermute(const mt_op_env *env, const mt_op_call *c) {
    if (!have_ctx(env, c)) return;
    const mt_coll_params *p = &c->p.coll;
    finish(env, c, mt_ppermute(env->ctx, p->axes, F32(c->in[0]), dest(env, c),
                               (size_t)NUMEL(c->out), MT_F32, p->pairs, p->n_pairs));
}

/* ALL_TO_ALL: in (..split s·P..) -> out (..concat P·c..): dim split, dim2 concat. */
void mt__run_all_to_all(const mt_op_env *env, const mt_op_call *c) {
    if (!have_ctx(env, c)) return;
    const mt_tensor *x = c->in[0];
    finish(env, c, mt_all_to_all_dim(env->ctx, c->p.coll.axes, x->data, dest(env, c), MT_F32,
                                     x->ndim, x->shape, c->p.coll.dim, c->p.coll.dim2));
}

/* PVARY: out (+)= in0; nothing to do when the plan made out read in0's
 * bytes (a forward pvary of a parameter). */
void mt__run_pvary(const mt_op_env *env, const mt_op_call *c) {
    (void)env;
    if (F32(c->out) == F32(c->in[0]) && !c->acc) return;
    mt_kernel_scale(F32(c->out), F32(c->in[0]), 1.0f, NUMEL(c->out), c->acc);
}

/* SLICE: out (outer, s, inner) (+)= in (outer, P·s, inner)[:, r·s:(r+1)·s, :]. */
void mt__run_slice(const mt_op_env *env, const mt_op_call *c) {
    if (!have_ctx(env, c)) return;
    const mt_tensor *x = c->in[0];
    int dim = c->p.coll.dim;
    int r = mt_axis_index(env->ctx, c->p.coll.axes);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < dim; d++) outer *= x->shape[d];
    for (int d = dim + 1; d < x->ndim; d++) inner *= x->shape[d];
    int64_t s = c->out->shape[dim], row = s * inner;   /* one output row: s·inner floats */
    const float *in = F32(x) + (int64_t)r * row;
    float *out = F32(c->out);
    for (int64_t o = 0; o < outer; o++)
        mt_kernel_scale(out + o * row, in + o * x->shape[dim] * inner, 1.0f, row, c->acc);
}

/* ======================================================================== */
/* Costs and scratch                                                         */
/* ======================================================================== */

/* No FLOPs (a psum's additions are the transport's). Bytes: what the
 * collective moves per device, as nccl-tests counts its "size" — the
 * all-reduce buffer, the all-gather and all-to-all output, the
 * reduce-scatter input, the ppermute buffer — plus out read and written
 * again when accumulating. PVARY and SLICE move memory only: read and
 * write out's worth. */
void mt__cost_coll(const mt_op_call *c, double *fl, double *by) {
    double out = 4.0 * (double)NUMEL(c->out), in = 4.0 * (double)NUMEL(c->in[0]);
    /* bf16 on the wire (gather16, bf16): half the f32 bytes */
    double wire = c->p.coll.gather16 || c->p.coll.bf16 ? 0.5 : 1.0;
    *fl = 0;
    switch (c->op) {
    case MT_OP_PSUM_SCATTER: *by = wire * in; break;
    case MT_OP_PVARY:
    case MT_OP_SLICE:        *by = 2 * out; break;
    default:                 *by = wire * out; break;
    }
    if (c->acc) *by += 2 * out;
}

/* A call that accumulates computes into scratch the size of out first. */
size_t mt__scratch_coll(const mt_op_call *c) {
    return c->acc && !c->p.coll.bf16 ? (size_t)NUMEL(c->out) : 0;
}
