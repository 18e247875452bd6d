/*
 * moe_ep.c — the grouped expert product and its two backwards over the
 * expert axis (expert parallelism; ../shared/MOE.md §4, dropless): the
 * kernels of moe_experts, moe_experts_bwd_x and moe_experts_bwd_w when
 * their call's p.moe.ep_size is above 1 (moe_ops.c hands them over).
 *
 * The group over p.moe.ep has P = ep_size devices, each with its own token
 * rows (the batch is folded over the expert axis) and el = E/P experts:
 * expert i lives on group rank ⌊i / el⌋. A call's rows (N, ·) are its own
 * (token, slot) pairs sorted by expert (mt_moe_sort), so they are sorted by
 * destination too, and the counts (E) read as (P, el) are the send splits.
 *   1. counts (E) of the ids; all-to-all of the counts -> got (P src, el):
 *      the rows each source sends for each local expert;
 *   2. all-to-all-v of the rows (each block sent to its owner, received
 *      source-major; mt_send is buffered, so every device sends all its
 *      blocks and then receives, in rank order);
 *   3. source-major -> expert-major (mt_moe_permute_indices,
 *      mt_moe_gather_rows);
 *   4. the grouped product over the el local experts (or its backward);
 *   5. expert-major -> source-major (mt_moe_scatter_rows), and the
 *      all-to-all-v with the splits swapped brings each source its rows.
 * The backward of the rows (bwd_x) is the same exchange around the product's
 * backward (the transpose of an all-to-all-v is the one with the splits
 * swapped: the gradient rows go where their rows went and come back);
 * bwd_w sends the rows and their gradients to the owners, whose dw sums
 * over every source's rows (a partial sum over the axes beyond the group,
 * which the partitioner's pvary reduces). A device never holds more than
 * P·N received rows (every source's rows on one expert rank: the dropless
 * worst case), which the scratch is sized for.
 *
 * The exchanges are comm.h's all-to-all (the counts) and mt_send / mt_recv
 * (the rows, of sizes the counts give), on the calling thread; the reorders
 * and the products between them over the kernel pool (moe_par.h). A failure
 * goes to *env->status, as the collective ops' do.
 */
#include "ops/moe_par.h"

#include <string.h>

#define F(t) ((float *)(t)->data)
#define CF(t) ((const float *)(t)->data)
#define I(t) ((const int32_t *)(t)->data)

/* The channel of the rows' messages (mt_send's tag). */
enum { EP_TAG = 4242 };

/* One call's exchange: the group, the splits and the received rows. */
typedef struct {
    const mt_op_env *env;
    mt_axes   axes;
    int       P, r;        /* group size, this device's group rank */
    int64_t   el, N, R;    /* local experts, rows sent, rows received */
    int32_t  *cnt;         /* (P, el) rows sent to each owner's experts */
    int32_t  *got;         /* (P, el) rows received from each source */
    int32_t  *sizes;       /* (el) rows of each local expert */
    int32_t  *idx;         /* (R) expert-major row -> received row */
    float    *free;        /* the scratch after the integers */
} ep_call;

/* Records the first failure (later ones are usually MT_EABORTED). */
static bool failed(const ep_call *x, mt_status s) {
    if (s != MT_OK && x->env->status && *x->env->status == MT_OK) *x->env->status = s;
    return s != MT_OK;
}

/* The sum of the el counts of block b of a (P, el) table. */
static int64_t block_rows(const int32_t *t, int b, int64_t el) {
    int64_t n = 0;
    for (int64_t e = 0; e < el; e++) n += t[b * el + e];
    return n;
}

/* The counts, their all-to-all, the received total and the expert-major
 * order. false (the failure recorded) if the exchange failed. */
static bool ep_begin(ep_call *x, const mt_op_env *env, const mt_op_call *c, const int32_t *ids,
                     int64_t N) {
    const mt_moe_op_params *p = &c->p.moe;
    *x = (ep_call){.env = env, .axes = p->ep, .P = p->ep_size, .el = p->E / p->ep_size, .N = N};
    if (!env->ctx)
        return !failed(x, mt_fail(MT_ESTATE, "an expert product over the expert axis run "
                                  "without a device (a graph bound to none)"));
    x->r = mt_axis_index(env->ctx, x->axes);
    int32_t *s = (int32_t *)env->scratch;
    x->cnt = s, x->got = s + p->E, x->sizes = x->got + p->E, x->idx = x->sizes + x->el;
    x->free = (float *)(x->idx + (int64_t)x->P * N);
    mt_moe_counts(x->cnt, ids, 1, N / p->k, p->k, p->E);
    if (failed(x, mt_all_to_all(env->ctx, x->axes, x->cnt, x->got, (size_t)x->el, MT_I32)))
        return false;
    x->R = 0;
    for (int b = 0; b < x->P; b++) x->R += block_rows(x->got, b, x->el);
    mt_moe_permute_indices(x->idx, x->sizes, x->got, x->P, x->el);
    return true;
}

/* All-to-all-v of rows of D floats: block b of `send` (send_counts' block
 * b rows, in order) goes to rank b; block s of `recv` (recv_counts' block
 * s rows) comes from rank s. This device's own block is copied. */
static bool ep_exchange(const ep_call *x, const float *send, const int32_t *send_counts,
                        float *recv, const int32_t *recv_counts, int64_t D) {
    int64_t off = 0;
    for (int b = 0; b < x->P; b++) {
        const int64_t n = block_rows(send_counts, b, x->el);
        if (b != x->r && n &&
            failed(x, mt_send(x->env->ctx, x->axes, send + off * D, (size_t)(n * D), MT_F32, b,
                              EP_TAG)))
            return false;
        off += n;
    }
    int64_t own = 0;
    for (int b = 0; b < x->r; b++) own += block_rows(send_counts, b, x->el);
    off = 0;
    for (int s = 0; s < x->P; s++) {
        const int64_t n = block_rows(recv_counts, s, x->el);
        if (s == x->r) {
            if (n) memcpy(recv + off * D, send + own * D, (size_t)(n * D) * sizeof *recv);
        } else if (n && failed(x, mt_recv(x->env->ctx, x->axes, recv + off * D, (size_t)(n * D),
                                          MT_F32, s, EP_TAG))) {
            return false;
        }
        off += n;
    }
    return true;
}

/* rows (N,D) -> their owners, expert-major: out (R,D); tmp (R,D) scratch. */
static bool ep_dispatch(const ep_call *x, const float *rows, int64_t D, float *tmp, float *out) {
    if (!ep_exchange(x, rows, x->cnt, tmp, x->got, D)) return false;
    mt__moe_gather_par(x->env, out, tmp, x->idx, x->R, D);
    return true;
}

/* The reverse: expert-major y (R,D) back to the sources: out (N,D) (+)=
 * this device's rows' results; tmp (R,D), back (N,D) scratch. */
static bool ep_return(const ep_call *x, const float *y, int64_t D, float *tmp, float *back,
                      float *out, bool acc) {
    mt__moe_scatter_par(x->env, tmp, y, x->idx, x->R, D, false);
    float *dst = acc ? back : out;
    if (!ep_exchange(x, tmp, x->got, dst, x->cnt, D)) return false;
    /* rows past this device's kept pairs (ids -1: dropped past a
       capacity) come back from no one: zeros */
    int64_t kept = 0;
    for (int b = 0; b < x->P; b++) kept += block_rows(x->cnt, b, x->el);
    if (kept < x->N) memset(dst + kept * D, 0, (size_t)((x->N - kept) * D) * sizeof *dst);
    if (acc)
        for (int64_t i = 0; i < x->N * D; i++) out[i] += back[i];
    return true;
}

/* The widths of a call's product: C in, OC out (w (el,C,OC): in[1] of the
 * forward and bwd_x, out of bwd_w), and W the wider. */
static int64_t widths(const mt_op_call *c, int64_t *C, int64_t *OC) {
    const mt_tensor *w = c->op == MT_OP_MOE_EXPERTS_BWD_W ? c->out : c->in[1];
    *C = w->shape[1], *OC = w->shape[2];
    return *C > *OC ? *C : *OC;
}

/* The scratch: the counts (2E), sizes (el), idx (P·N), then four row
 * buffers of P·N rows and one of N rows, each W wide. */
size_t mt__moe_ep_scratch(const mt_op_call *c) {
    const mt_moe_op_params *p = &c->p.moe;
    const int64_t N = (int64_t)mt_tensor_numel(c->in[c->n_in - 1]), PN = p->ep_size * N;
    int64_t C, OC;
    const int64_t W = widths(c, &C, &OC);
    return (size_t)(2 * p->E + p->E / p->ep_size + PN + 4 * PN * W + N * W);
}

/* Row buffer i of the call's scratch (4: the one of N rows). */
static float *buf(const ep_call *x, int64_t W, int i) { return x->free + i * x->P * x->N * W; }

/* The exchange around a product on the owners' rows: the forward, ys (N,OC)
 * (+)= xs (N,C) · w_e, or bwd_x, dxs (N,C) (+)= dy (N,OC) · w_eᵀ: the rows
 * (in[0]) go out, their results come back. */
static void ep_product(const mt_op_env *env, const mt_op_call *c, bool bwd_x) {
    int64_t C, OC;
    const int64_t W = widths(c, &C, &OC), in_w = bwd_x ? OC : C, out_w = bwd_x ? C : OC;
    ep_call x;
    if (!ep_begin(&x, env, c, I(c->in[2]), (int64_t)mt_tensor_numel(c->in[2]))) return;
    float *rows = buf(&x, W, 1), *res = buf(&x, W, 2);
    if (!ep_dispatch(&x, CF(c->in[0]), in_w, buf(&x, W, 0), rows)) return;
    /* res (R,OC) = rows (R,C) · w_e, or (R,C) = rows (R,OC) · w_eᵀ */
    const mt_moe_gemm g = {.part = bwd_x ? MT_MOE_GEMM_DX : MT_MOE_GEMM_Y, .out = res,
                           .x = rows, .dy = rows, .w = CF(c->in[1]), .sizes = x.sizes,
                           .el = x.el, .C = C, .OC = OC};
    mt__moe_gemm_par(env, &g);
    ep_return(&x, res, out_w, buf(&x, W, 3), buf(&x, W, 4), F(c->out), c->acc);
}

void mt__moe_ep_experts(const mt_op_env *env, const mt_op_call *c) { ep_product(env, c, false); }

void mt__moe_ep_experts_bwd_x(const mt_op_env *env, const mt_op_call *c) {
    ep_product(env, c, true);
}

/* dw (el,C,OC) (+)= Σ over every source's rows of xs_eᵀ · dy_e. */
void mt__moe_ep_experts_bwd_w(const mt_op_env *env, const mt_op_call *c) {
    int64_t C, OC;
    const int64_t W = widths(c, &C, &OC);
    ep_call x;
    if (!ep_begin(&x, env, c, I(c->in[2]), (int64_t)mt_tensor_numel(c->in[2]))) return;
    float *dy = buf(&x, W, 1), *xs = buf(&x, W, 2);
    if (!ep_dispatch(&x, CF(c->in[0]), OC, buf(&x, W, 0), dy) ||
        !ep_dispatch(&x, CF(c->in[1]), C, buf(&x, W, 0), xs))
        return;
    const mt_moe_gemm g = {.part = MT_MOE_GEMM_DW, .out = F(c->out), .x = xs, .dy = dy,
                           .sizes = x.sizes, .el = x.el, .C = C, .OC = OC, .acc = c->acc};
    mt__moe_gemm_par(env, &g);
}
