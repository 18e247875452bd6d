/*
 * moe_par.c — the MoE kernels of ops/moe.h split over the kernel pool
 * (env->pool, as the dense products and the element-wise ops are; op_par.h)
 * for the MoE ops' runs (moe_ops.c, moe_ep.c).
 *
 * Every split is by independent rows, tokens or product tiles: each output
 * element is written by one thread, with the sums of the one-thread kernel
 * in their order (a token's slots in slot order, a tile's sgemm call the
 * same call whatever the threads: moe_gemm.c), and no sum ever crosses a
 * thread. So a result is the same bit for bit on any number of threads.
 */
#include "ops/moe_par.h"
#include "ops/op_par.h"
#include "ops/kernels.h"

typedef enum { PAR_GEMM, PAR_ROUTE, PAR_GATES, PAR_GATES_BWD, PAR_DISPATCH, PAR_DISPATCH_BWD,
               PAR_COMBINE, PAR_COMBINE_DY, PAR_COMBINE_DG, PAR_GATHER, PAR_SCATTER, PAR_Z,
               PAR_ADD } par_kind;

/* One split run: mt__op_par_run's context first (the range function gets
 * a pointer to it), then the kernel's arguments, named as ops/moe.h's. */
typedef struct {
    mt_op_par            par;
    par_kind             kind;
    const mt_moe_gemm   *g;
    mt_moe_route_params  r;
    float               *out, *out2;      /* the outputs (out2: the gates' scores) */
    const float         *a, *b, *gates;   /* the inputs */
    const float         *dscores;         /* the gates' backward's second gradient */
    double              *lse, beta;       /* the z-loss's (beta: zf for PAR_GATES) */
    float               *zg;              /* the z-loss's gradient rows (PAR_GATES) */
    const int32_t       *idx;             /* order, pos, ids or rows, a row or token each */
    int32_t             *ids_out;
    int64_t              k, D, N;
    bool                 acc;
} moe_job;

/* Items [i0, i1) of the job: rows, tokens or tiles. */
static void range(void *arg, int64_t i0, int64_t i1, int worker) {
    (void)worker;
    const moe_job *j = arg;
    const int64_t n = i1 - i0, k = j->k, D = j->D, E = j->r.E;
    mt_moe_route_params r = j->r;
    r.T = n;
    switch (j->kind) {
    case PAR_GEMM: mt_moe_gemm_run(j->g, i0, i1); break;
    case PAR_ROUTE:   /* the scores (T,E) into the scratch j->out; no gates */
        mt_moe_route_fwd(&r, j->a + i0 * E, j->b, j->out + i0 * E, j->ids_out + i0 * k, NULL);
        break;
    case PAR_GATES:
        mt_moe_gates_z_fwd(&r, j->a + i0 * E, j->idx + i0 * k, j->out2 + i0 * E, j->out + i0 * k,
                           j->beta, j->lse ? j->lse + i0 : NULL, j->zg ? j->zg + i0 * E : NULL);
        break;
    case PAR_GATES_BWD:
        mt_moe_route_bwd(&r, j->out + i0 * E, j->a + i0 * k,
                         j->dscores ? j->dscores + i0 * E : NULL, j->b + i0 * E,
                         j->idx + i0 * k, j->acc);
        break;
    case PAR_DISPATCH: mt_moe_dispatch_fwd(j->out + i0 * D, j->a, j->idx + i0, n, k, D); break;
    case PAR_DISPATCH_BWD:
        mt_moe_dispatch_bwd(j->out + i0 * D, j->a, j->idx + i0 * k, n, k, D, j->acc);
        break;
    case PAR_COMBINE:
        mt_moe_combine_fwd(j->out + i0 * D, j->a, j->gates + i0 * k, j->idx + i0 * k, n, k, D,
                           j->acc);
        break;
    case PAR_COMBINE_DY:
        mt_moe_combine_bwd_dy(j->out + i0 * D, j->a, j->gates, j->idx + i0, n, k, D, j->acc);
        break;
    case PAR_COMBINE_DG:
        mt_moe_combine_bwd_dgates(j->out + i0 * k, j->a + i0 * D, j->b, j->idx + i0 * k, n, k, D,
                                  j->acc);
        break;
    case PAR_GATHER: mt_moe_gather_rows(j->out + i0 * D, j->a, j->idx + i0, n, D); break;
    case PAR_SCATTER:
        mt_moe_scatter_rows(j->out, j->a + i0 * D, j->idx + i0, n, D, j->acc);
        break;
    case PAR_Z: mt_moe_z_loss_rows(j->a, i0, i1, j->N, D, j->beta, j->lse, j->out, j->acc); break;
    case PAR_ADD:   /* 1·a is exact: out + a */
        mt_kernel_scale(j->out + i0 * D, j->a + i0 * D, 1.0f, n * D, true);
        break;
    }
}

/* Runs job over `items` of `elems` floats each. */
static void run(const mt_op_env *env, moe_job *job, int64_t items, int64_t elems) {
    mt__op_par_run(env, NULL, &job->par, items, elems, range);
}

void mt__moe_gemm_par(const mt_op_env *env, const mt_moe_gemm *g) {
    /* a tile is at least 2·C·OC FLOPs a row or column: always worth a thread */
    run(env, &(moe_job){.kind = PAR_GEMM, .g = g}, mt_moe_gemm_tiles(g), 1 << 20);
}

void mt__moe_route_par(const mt_op_env *env, const mt_moe_route_params *p, const float *logits,
                       const float *bias, float *scratch, int32_t *ids) {
    moe_job j = {.kind = PAR_ROUTE, .r = *p, .a = logits, .b = bias, .out = scratch,
                 .ids_out = ids, .k = p->k};
    run(env, &j, p->T, 8 * p->E);   /* a softmax and k passes over E a row */
}

void mt__moe_gates_z_par(const mt_op_env *env, const mt_moe_route_params *p,
                         const float *logits, const int32_t *ids, float *scores, float *gates,
                         double zf, double *lse, float *zg) {
    moe_job j = {.kind = PAR_GATES, .r = *p, .a = logits, .idx = ids, .out = gates,
                 .out2 = scores, .k = p->k, .beta = zf, .lse = lse, .zg = zg};
    run(env, &j, p->T, 4 * p->E);
}

void mt__moe_add_par(const mt_op_env *env, float *out, const float *in, int64_t rows,
                     int64_t D) {
    run(env, &(moe_job){.kind = PAR_ADD, .out = out, .a = in, .D = D}, rows, D);
}

void mt__moe_gates_bwd_par(const mt_op_env *env, const mt_moe_route_params *p, float *dlogits,
                           const float *dgates, const float *dscores, const float *scores,
                           const int32_t *ids, bool acc) {
    moe_job j = {.kind = PAR_GATES_BWD, .r = *p, .out = dlogits, .a = dgates,
                 .dscores = dscores, .b = scores, .idx = ids, .k = p->k, .acc = acc};
    run(env, &j, p->T, 2 * p->E);
}

void mt__moe_z_loss_par(const mt_op_env *env, const float *logits, int64_t T, int64_t E,
                        double beta, double *lse, float *dlogits, bool acc) {
    moe_job j = {.kind = PAR_Z, .a = logits, .N = T, .D = E, .beta = beta, .lse = lse,
                 .out = dlogits, .acc = acc};
    run(env, &j, T, 8 * E);   /* an exp an element, twice with the gradient */
}

void mt__moe_dispatch_par(const mt_op_env *env, float *xs, const float *x,
                          const int32_t *order, int64_t N, int64_t k, int64_t D) {
    run(env, &(moe_job){.kind = PAR_DISPATCH, .out = xs, .a = x, .idx = order, .k = k, .D = D},
        N, D);
}

void mt__moe_dispatch_bwd_par(const mt_op_env *env, float *dx, const float *dxs,
                              const int32_t *pos, int64_t T, int64_t k, int64_t D, bool acc) {
    moe_job j = {.kind = PAR_DISPATCH_BWD, .out = dx, .a = dxs, .idx = pos, .k = k, .D = D,
                 .acc = acc};
    run(env, &j, T, k * D);
}

void mt__moe_combine_par(const mt_op_env *env, float *out, const float *y, const float *gates,
                         const int32_t *pos, int64_t T, int64_t k, int64_t D, bool acc) {
    moe_job j = {.kind = PAR_COMBINE, .out = out, .a = y, .gates = gates, .idx = pos, .k = k,
                 .D = D, .acc = acc};
    run(env, &j, T, k * D);
}

void mt__moe_combine_bwd_par(const mt_op_env *env, float *dy, float *dgates, const float *dout,
                             const float *y, const float *gates, const int32_t *pos,
                             const int32_t *order, int64_t T, int64_t k, int64_t N, int64_t D,
                             bool acc) {
    if (dy)
        run(env, &(moe_job){.kind = PAR_COMBINE_DY, .out = dy, .a = dout, .gates = gates,
                            .idx = order, .k = k, .D = D, .acc = acc}, N, D);
    if (dgates)
        run(env, &(moe_job){.kind = PAR_COMBINE_DG, .out = dgates, .a = dout, .b = y,
                            .idx = pos, .k = k, .D = D, .acc = acc}, T, k * D);
}

void mt__moe_gather_par(const mt_op_env *env, float *out, const float *in, const int32_t *idx,
                        int64_t n, int64_t D) {
    run(env, &(moe_job){.kind = PAR_GATHER, .out = out, .a = in, .idx = idx, .D = D}, n, D);
}

void mt__moe_scatter_par(const mt_op_env *env, float *out, const float *in, const int32_t *idx,
                         int64_t n, int64_t D, bool acc) {
    moe_job j = {.kind = PAR_SCATTER, .out = out, .a = in, .idx = idx, .D = D, .acc = acc};
    run(env, &j, n, D);
}
