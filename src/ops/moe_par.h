/*
 * moe_par.h — the MoE kernels of ops/moe.h over the kernel pool (moe_par.c;
 * internal to ops/): each is its kernel's call, same arguments, split over
 * env->pool by rows, tokens or product tiles, and gives the one-thread
 * kernel's result bit for bit on any number of threads.
 */
#ifndef MT_OPS_MOE_PAR_H
#define MT_OPS_MOE_PAR_H

#include "ops/moe.h"
#include "ops/ops_impl.h"

/* mt_moe_gemm_run over all of g's tiles. */
void mt__moe_gemm_par(const mt_op_env *env, const mt_moe_gemm *g);

/* mt_moe_route_fwd of p->T rows of logits (T,E) with bias (E, or NULL):
 * ids (T,k), and the scores (T,E) it makes beside them in scratch (T·E
 * floats); no gates (moe_gates makes them from the ids). */
void mt__moe_route_par(const mt_op_env *env, const mt_moe_route_params *p, const float *logits,
                       const float *bias, float *scratch, int32_t *ids);
/* mt_moe_gates_z_fwd (zf 0, lse and zg NULL: the gates alone). */
void mt__moe_gates_z_par(const mt_op_env *env, const mt_moe_route_params *p,
                         const float *logits, const int32_t *ids, float *scores, float *gates,
                         double zf, double *lse, float *zg);
/* out (rows,D) += in (rows,D), by rows. */
void mt__moe_add_par(const mt_op_env *env, float *out, const float *in, int64_t rows,
                     int64_t D);
/* mt_moe_route_bwd (dscores NULL: the gates' backward alone). */
void mt__moe_gates_bwd_par(const mt_op_env *env, const mt_moe_route_params *p, float *dlogits,
                           const float *dgates, const float *dscores, const float *scores,
                           const int32_t *ids, bool acc);
/* mt_moe_z_loss_rows over all T rows (mt_moe_z_loss_sum then gives the
 * loss from lse). */
void mt__moe_z_loss_par(const mt_op_env *env, const float *logits, int64_t T, int64_t E,
                        double beta, double *lse, float *dlogits, bool acc);

/* mt_moe_dispatch_fwd, by sorted rows. */
void mt__moe_dispatch_par(const mt_op_env *env, float *xs, const float *x,
                          const int32_t *order, int64_t N, int64_t k, int64_t D);
/* mt_moe_dispatch_bwd, by tokens. */
void mt__moe_dispatch_bwd_par(const mt_op_env *env, float *dx, const float *dxs,
                              const int32_t *pos, int64_t T, int64_t k, int64_t D, bool acc);
/* mt_moe_combine_fwd, by tokens. */
void mt__moe_combine_par(const mt_op_env *env, float *out, const float *y, const float *gates,
                         const int32_t *pos, int64_t T, int64_t k, int64_t D, bool acc);
/* The combine's backward: mt_moe_combine_bwd_dy by rows of dy (N, order's),
 * mt_moe_combine_bwd_dgates by tokens (T, pos'); either output may be
 * NULL. */
void mt__moe_combine_bwd_par(const mt_op_env *env, float *dy, float *dgates, const float *dout,
                             const float *y, const float *gates, const int32_t *pos,
                             const int32_t *order, int64_t T, int64_t k, int64_t N, int64_t D,
                             bool acc);

/* mt_moe_gather_rows and mt_moe_scatter_rows (idx a permutation), by rows. */
void mt__moe_gather_par(const mt_op_env *env, float *out, const float *in, const int32_t *idx,
                        int64_t n, int64_t D);
void mt__moe_scatter_par(const mt_op_env *env, float *out, const float *in, const int32_t *idx,
                         int64_t n, int64_t D, bool acc);

#endif /* MT_OPS_MOE_PAR_H */
