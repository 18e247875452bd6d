/*
 * moe.h — the mixture-of-experts kernels on one device (internal): the
 * router (moe_route.c), the balancing terms (moe_balance.c), dispatch and
 * combine (moe_dispatch.c) and the grouped expert product (moe_gemm.c).
 * ../shared/MOE.md is the algorithm; each function says which step it is.
 *
 * Pure functions over dense row-major buffers, as kernels.h's: no
 * allocation, no graph, no global state. `acc` selects out = result (false)
 * or out += result (true). Ids, positions and counts are int32 (a device's
 * T·k rows fit), sums over rows that are compared across layouts are taken
 * in double in a fixed order and rounded once, so that a result does not
 * depend on how rows were sorted or split.
 *
 * Shape letters (MOE.md's): T tokens in scope, D width, E routed experts, k
 * experts a token, N = T·k (token, slot) rows, P_e the expert-parallel
 * degree, el = E / P_e local experts, S sequences, L tokens a sequence,
 * C, OC an expert product's input and output channels (as linear's).
 *
 * How the expert axis splits it (moe_ep.c, the grouped product's
 * kernels when their call runs expert-parallel). Expert i lives on
 * expert rank ⌊i / el⌋, so the order mt_moe_sort makes is also by
 * destination, and its counts (E) read as (P_e, el) are the send splits:
 *   1. route, mt_moe_sort, mt_moe_dispatch_fwd        (local, T·k rows)
 *   2. all-to-all of the counts (P_e, el) -> received counts (P_e src, el)
 *   3. all-to-all-v of the rows, source-major on arrival
 *   4. mt_moe_permute_indices on the received counts, mt_moe_gather_rows
 *      -> expert-major rows and the el group sizes
 *   5. mt_moe_gemm_fwd over the el local experts
 *   6. mt_moe_scatter_rows back to source-major, all-to-all-v with the
 *      splits swapped, mt_moe_combine_fwd.
 * The backward runs the transposes in reverse (mt_moe_gather_rows and
 * mt_moe_scatter_rows are each other's transpose). On one device P_e = 1:
 * steps 2-4 and 6's exchange are identities and the sorted rows are already
 * expert-major.
 */
#ifndef MT_OPS_MOE_H
#define MT_OPS_MOE_H

#include "meshtrain/base.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- the router (moe_route.c; MOE.md §1) --------------------------------- */

/* How router logits become scores: softmax over the E experts (Mixtral,
 * Qwen) or a sigmoid per expert (DeepSeek-V3). */
typedef enum { MT_MOE_SOFTMAX = 0, MT_MOE_SIGMOID = 1 } mt_moe_score;

/* A router's settings.
 *   T, E, k     tokens, routed experts, experts a token (1 <= k <= E);
 *   score       MT_MOE_SOFTMAX or MT_MOE_SIGMOID;
 *   renorm      gates = selected scores / their sum (sigmoid: DeepSeek-V3;
 *               softmax: Mixtral, where it equals a softmax over the k
 *               selected logits), else the selected scores themselves
 *               (softmax: Qwen2-MoE, DeepSeek-V2);
 *   groups,     group-limited routing (DeepSeek-V3: 8 and 4): the experts in
 *   groups_kept `groups` contiguous groups of E/groups; a group's score is
 *               the sum of its top k/groups_kept biased scores; only the
 *               best groups_kept groups are eligible. 0 or 1: off;
 *   route_scale the gates' factor (DeepSeek-V3: 2.5; 1: none). */
typedef struct {
    int64_t      T, E, k;
    mt_moe_score score;
    bool         renorm;
    int64_t      groups, groups_kept;
    float        route_scale;
} mt_moe_route_params;

/* MT_OK, or MT_EINVAL naming the setting out of range and its bounds (k
 * above E, groups not dividing E or k, too few experts in the kept groups,
 * a route scale not finite and positive). */
mt_status mt_moe_route_check(const mt_moe_route_params *p);

/* The forward (MOE.md §1.2-1.5), p checked by mt_moe_route_check:
 *   scores (T,E) = softmax or sigmoid of logits (T,E), saved for the
 *                  backward (and read by mt_moe_aux_loss);
 *   ids (T,k)    the k experts of the largest scores + bias (E; NULL: 0),
 *                in order of that biased score, ties broken by the lower
 *                expert index (so equal scores pick experts 0, 1, ...);
 *                group-limited routing first masks the groups not kept
 *                (group ties: the lower group);
 *   gates (T,k)  from the unbiased scores: the bias only chooses.
 *                route_scale · s_id (/ Σ_selected s when renorm);
 *                NULL: not wanted (the graph's route op, whose gates
 *                moe_gates makes from the ids).
 * Rows are independent. */
void mt_moe_route_fwd(const mt_moe_route_params *p, const float *logits, const float *bias,
                      float *scores, int32_t *ids, float *gates);

/* scores (T,E) and gates (T,k) for given ids (T,k) (mt_moe_route_fwd's
 * selection, or any other): the forward's scores and gates of those experts,
 * so a graph op that takes the ids as an operand computes its gates from
 * them (ops/moe_ops.c). With them, the router z-loss's rows from the same
 * exps (a softmax router only; a sigmoid one's z-loss reads the logits
 * apart, mt_moe_z_loss_rows): lse (T doubles, NULL: not wanted) each row's
 * log-sum-exp, and zg (T,E) (NULL: not wanted) = each row's z-loss
 * gradient zf · lse · softmax, zf = 2β/T of mt_moe_z_loss_rows; both its
 * values bit for bit (added to dlogits afterwards, zg gives its dlogits). */
void mt_moe_gates_z_fwd(const mt_moe_route_params *p, const float *logits, const int32_t *ids,
                        float *scores, float *gates, double zf, double *lse, float *zg);

/* The backward with the selected set held fixed: dlogits (T,E) (+)= the
 * gradient through scores (T,E) of dgates (T,k) at ids (T,k), plus, where
 * dscores (T,E) is not NULL, of a gradient reaching the scores directly
 * (mt_moe_aux_loss's). A token's unselected experts get gradient only
 * through the softmax's normalisation and dscores. */
void mt_moe_route_bwd(const mt_moe_route_params *p, float *dlogits, const float *dgates,
                      const float *dscores, const float *scores, const int32_t *ids, bool acc);

/* ---- balancing (moe_balance.c; MOE.md §2) -------------------------------- */

/* counts (S,E) = for each of S sequences of L rows of ids (S·L,k), how many
 * of its (token, slot) pairs chose each expert (S = 1, L = T: the batch's).
 * Σ counts = S·L·k. */
void mt_moe_counts(int32_t *counts, const int32_t *ids, int64_t S, int64_t L, int64_t k,
                   int64_t E);

/* The auxiliary loss in Megatron's and DeepSeek's normalisation,
 * α · E · Σ_i f_i · P_i, averaged over S sequences (S = 1: batch-wise;
 * DeepSeek-V3's sequence-wise loss is S the batch's sequences), which is
 * exactly α at perfect balance (HF Mixtral and MaxText give α·k, Levanter
 * α/k). f_i = counts[s,i] / (k·L), P_i = (1/L) Σ_t p_{t,i}, p the scores
 * (softmax) or each row's sigmoid scores over their sum (DeepSeek-V3).
 * scores (S·Ll,E) are this device's Ll rows of each sequence; counts (S,E)
 * the whole sequences' (summed over the devices that share them), L their
 * length (Ll = L on one device): the returned loss is then this device's
 * share, and the shares sum to the loss. dscores (S·Ll,E) (+)= α·the
 * gradient (for mt_moe_route_bwd); NULL: none. The counts have none. */
double mt_moe_aux_loss(const mt_moe_route_params *p, const float *scores, const int32_t *counts,
                       int64_t S, int64_t Ll, int64_t L, double alpha, float *dscores,
                       bool acc);

/* The router z-loss β · mean_t (logsumexp_i u_{t,i})² over logits (T,E);
 * dlogits (T,E) (+)= its gradient, 2β/T · lse_t · softmax(u_t); NULL:
 * none. */
double mt_moe_z_loss(const float *logits, int64_t T, int64_t E, double beta, float *dlogits,
                     bool acc);
/* The same in two halves, for rows run apart (moe_par.c): rows [t0, t1) of
 * the T: lse[t] (T doubles, may be NULL) each row's logsumexp, dlogits'
 * rows (+)= their gradient (NULL: none); then the loss from all T lse, in
 * row order: mt_moe_z_loss's value bit for bit. */
void   mt_moe_z_loss_rows(const float *logits, int64_t t0, int64_t t1, int64_t T, int64_t E,
                          double beta, double *lse, float *dlogits, bool acc);
double mt_moe_z_loss_sum(const double *lse, int64_t T, double beta);

/* MaxVio = (max_i c_i − mean c) / mean c of counts (E) (0 when all are 0). */
double mt_moe_maxvio(const int32_t *counts, int64_t E);

/* The aux-loss-free bias update (DeepSeek-V3; torchtitan's centring): with
 * counts (E) the whole step's, summed over every device,
 * Δb_i = γ · sign(mean c − c_i), then Δb -= mean Δb so that Σ Δb = 0;
 * bias (E) += Δb. Every device given the same counts makes the same bias.
 * The bias has no gradient. */
void mt_moe_bias_update(float *bias, const int32_t *counts, int64_t E, float gamma);

/* ---- dispatch and combine (moe_dispatch.c; MOE.md §4) -------------------- */

/* The stable sort of the N = T·k (token, slot) pairs of ids (T,k) by expert
 * (MOE.md §4.2): order (N) lists the pairs t·k+j in expert order, ties in
 * (t, j) order; pos (N) is its inverse (pos[t·k+j] the row of pair (t,j)),
 * counts (E) the rows of each expert (the send splits, read as (P_e, el)).
 * A counting sort, O(N + E). ids lie in [0, E), or are -1: a pair dropped
 * past its expert's capacity (mt_moe_drop), which gets no row (pos -1);
 * the n kept pairs fill rows [0, n) and order is -1 past them. */
void mt_moe_sort(int32_t *order, int32_t *pos, int32_t *counts, const int32_t *ids, int64_t T,
                 int64_t k, int64_t E);

/* Row lists may name no row: an order entry of -1 is a padding row of a
 * capacity buffer (mt_moe_capacity_layout), a pos entry of -1 a dropped
 * (token, slot) pair, which reads and writes nothing (its output 0: the
 * residual carries the token). */

/* xs (N,D) = the rows of x (T,D) in sorted order: xs[r] = x[order[r] / k],
 * or zeros where order[r] = -1. */
void mt_moe_dispatch_fwd(float *xs, const float *x, const int32_t *order, int64_t N, int64_t k,
                         int64_t D);
/* The transpose: dx (T,D) (+)= Σ_j dxs[pos[t·k+j]], in j order, in double. */
void mt_moe_dispatch_bwd(float *dx, const float *dxs, const int32_t *pos, int64_t T, int64_t k,
                         int64_t D, bool acc);

/* out (T,D) (+)= Σ_j gates[t,j] · y[pos[t·k+j]] over y (N,D) in sorted
 * order (MOE.md §4.7): summed in double in slot order and rounded once, so
 * deterministic, and exact with gates 1/k (k a power of two) and equal
 * rows. */
void mt_moe_combine_fwd(float *out, const float *y, const float *gates, const int32_t *pos,
                        int64_t T, int64_t k, int64_t D, bool acc);
/* The combine's backward in two halves, each split by its own items:
 * dy (N,D) (+)= gates[p] · dout[p / k] at each row r of the expert-order
 * buffer whose pair is p = order[r] (mt_moe_sort's or a capacity layout's
 * order (N); -1: no pair, a zero row without acc, untouched with acc), a
 * row at a time in buffer order, so dy is written front to back and dout's
 * rows are the ones read out of order; */
void mt_moe_combine_bwd_dy(float *dy, const float *dout, const float *gates,
                           const int32_t *order, int64_t N, int64_t k, int64_t D, bool acc);
/* dgates (T,k) (+)= ⟨dout_t, y[pos[t·k+j]]⟩ by tokens (in double, in eight
 * running sums of every eighth element added in order, so the same bits
 * wherever the row lies; 0 for a dropped pair, pos -1). */
void mt_moe_combine_bwd_dgates(float *dgates, const float *dout, const float *y,
                               const int32_t *pos, int64_t T, int64_t k, int64_t D, bool acc);

/* ---- capacity instead of dropless (moe_dispatch.c; MOE.md §3) ------------ */

/* Which pairs an expert keeps when it has more than its capacity: the
 * earliest (token, slot) pairs, or those of the highest gates (ties: the
 * earlier pair). */
typedef enum { MT_MOE_DROP_POSITION = 0, MT_MOE_DROP_GATE = 1 } mt_moe_drop_policy;

/* An expert's capacity C = ⌈(T·k / E) · cf⌉ rows (cf > 0). */
int64_t mt_moe_capacity_rows(int64_t T, int64_t k, int64_t E, double cf);

/* Capacity by dropping ids: out (S,L,k) = ids (S,L,k), but -1 for each
 * pair past its expert's capacity C within its sequence (each of the S
 * sequences of L tokens its own group, as GShard's groups: the same pairs
 * are dropped however the sequences are split among devices), in policy
 * order (mt_moe_capacity_layout's); gates (S,L,k) read by
 * MT_MOE_DROP_GATE only. The dropless ops then route the kept pairs alone
 * (mt_moe_sort and mt_moe_counts skip -1). scratch: E·C + L·k + E int32.
 * Returns the pairs dropped. */
int64_t mt_moe_drop(int32_t *out, const int32_t *ids, const float *gates, int64_t S, int64_t L,
                    int64_t k, int64_t E, int64_t C, mt_moe_drop_policy policy,
                    int32_t *scratch);

/* The capacity layout of ids (T,k): a dense (E, C) buffer, expert e's kept
 * pairs at rows [e·C, e·C + kept[e]) in (t, j) order, the rest padding.
 * order (E·C) the pair t·k+j at each row or -1; pos (T·k) each pair's row
 * or -1 (dropped); kept (E) min(count, C). gates (T,k) are read by
 * MT_MOE_DROP_GATE only (NULL otherwise). Returns the pairs dropped.
 * Dispatch, combine and their backwards then run on N = E·C rows, and the
 * grouped product on E groups of C rows (padding rows are zeros). */
int64_t mt_moe_capacity_layout(int32_t *order, int32_t *pos, int32_t *kept, const int32_t *ids,
                               const float *gates, int64_t T, int64_t k, int64_t E, int64_t C,
                               mt_moe_drop_policy policy);

/* The source-major -> expert-major reorder of rows received from P_e
 * sources (MOE.md §4.5). counts (P_e, el) are the rows source s sent for
 * local expert e, stored source-major in the received buffer; idx (Σ
 * counts) gets, in expert-major order (expert, then source), the row of the
 * received buffer each comes from, and sizes (el) the rows of each expert.
 * counts [2,3,1,4] (P_e = el = 2) give idx [0,1,5,2,3,4,6,7,8,9], sizes
 * [3,7]. Zero counts are fine. O(E²) over the count table (E = P_e·el),
 * nothing beside idx. */
void mt_moe_permute_indices(int32_t *idx, int32_t *sizes, const int32_t *counts, int64_t P_e,
                            int64_t el);

/* out (n,D) = in[idx[r]] for each r (gather; source-major -> expert-major
 * with mt_moe_permute_indices' idx). */
void mt_moe_gather_rows(float *out, const float *in, const int32_t *idx, int64_t n, int64_t D);
/* out[idx[r]] (+)= in (n,D)[r] (scatter, the gather's transpose; idx a
 * permutation, so no row is written twice). */
void mt_moe_scatter_rows(float *out, const float *in, const int32_t *idx, int64_t n, int64_t D,
                         bool acc);

/* The router's softmax and the z-loss's rows, the one place both are
 * computed (moe_route.c; the router's scores, the router loss, the
 * z-loss), for logits u (T,E): each row less its max, the exps in float on
 * the vector layer (vec/vec.h: SLEEF's 1-ulp exp, elementwise, so a row's
 * bits do not depend on the rows it is run with), their sum in double in
 * expert order; s (T,E) = (float)(exp / Σ) (NULL: not wanted, the exps are
 * then taken piecewise on the stack, twice where zg wants them); lse (T) =
 * each row's log-sum-exp, max + log Σ (NULL: not wanted); zg (T,E) (+)=
 * (float)(zf · lse · exp / Σ), the z-loss's gradient rows for zf = 2β/T
 * (NULL: not wanted; acc adds). */
void mt_moe_softmax_rows(const float *u, int64_t T, int64_t E, float *s, double zf, double *lse,
                         float *zg, bool acc);

/* ---- the grouped expert product (moe_gemm.c; MOE.md §4.6) ---------------- */

/* The product's work in tiles fixed by the shapes alone, whatever the
 * threads: MT_MOE_TILE_ROWS rows of a group (y, dx), or MT_MOE_TILE_COLS
 * input channels of an expert's weight gradient (dw, each tile summing
 * over the whole group), one product a tile: the vector level's tile
 * micro-kernel when C and OC are at most 128 (moe_gemm.c), else an Open
 * BLAS sgemm. So a result is the same bit for bit however the tiles are
 * shared out (moe_par.c: over the kernel pool); Open BLAS's sgemm gives
 * other bits for the same rows cut otherwise. Each tile's sgemm packs the
 * other operand again (a weight, or a group's dy): tiles of a few hundred
 * keep that a few percent of the product. */
#define MT_MOE_TILE_ROWS 512
#define MT_MOE_TILE_COLS 256

typedef enum { MT_MOE_GEMM_Y, MT_MOE_GEMM_DX, MT_MOE_GEMM_DW } mt_moe_gemm_part;

/* One grouped product, as mt_moe_gemm_fwd and mt_moe_gemm_bwd state them:
 * part Y: out = y (N,OC) from x (N,C) and w (el,C,OC); DX: out = dx (N,C)
 * from dy (N,OC) and w; DW: out = dw (el,C,OC) from x and dy. sizes (el)
 * the groups' rows (Σ = N); acc: out += result. */
typedef struct {
    mt_moe_gemm_part part;
    float           *out;
    const float     *x, *w, *dy;
    const int32_t   *sizes;
    int64_t          el, C, OC;
    bool             acc;
} mt_moe_gemm;

/* The tiles of g (0 where Y's or DX's groups are all empty). */
int64_t mt_moe_gemm_tiles(const mt_moe_gemm *g);
/* Runs tiles [i0, i1) of g: disjoint ranges write disjoint parts of out. */
void    mt_moe_gemm_run(const mt_moe_gemm *g, int64_t i0, int64_t i1);

/* y (N,OC) (+)= x (N,C) · w_e (C,OC) on each of el row groups: group e is the
 * sizes[e] rows after the previous groups' (Σ sizes = N), w (el,C,OC) the
 * local experts' weights. A zero-row group is skipped. One cblas_sgemm per
 * tile (mt_kernel_gemm), as the dense products; all of g's tiles in order
 * (mt_moe_gemm_run). */
void mt_moe_gemm_fwd(float *y, const float *x, const float *w, const int32_t *sizes,
                     int64_t el, int64_t C, int64_t OC, bool acc);
/* The backward: dx (N,C) (+)= dy_e (rows,OC) · w_eᵀ, dw (el,C,OC) (+)=
 * x_eᵀ · dy_e per group; an expert with zero rows gets dw_e = 0 (or
 * unchanged with acc). Either output may be NULL. */
void mt_moe_gemm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                     const int32_t *sizes, int64_t el, int64_t C, int64_t OC, bool acc);

#endif /* MT_OPS_MOE_H */
