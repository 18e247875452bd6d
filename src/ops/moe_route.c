/*
 * moe_route.c — the MoE router on one device (ops/moe.h; ../shared/MOE.md
 * §1): scores from logits, top-k of the biased scores with optional
 * group-limited routing, the gates from the unbiased scores, and the
 * backward with the selected set held fixed.
 *
 * Selection keeps no scratch: the j-th pick is the largest candidate
 * strictly below the (j-1)-th in the order "larger value first, then lower
 * index", so ties go to the lower expert (and the lower group) and a row
 * costs O(k·E). Group scores (at most MT_MOE_MAX_GROUPS) sit on the stack.
 * Logits must be finite.
 */
#include "ops/moe.h"
#include "vec/vec.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* The most expert groups group-limited routing takes (a kept set is a
 * 64-bit mask; DeepSeek-V3 has 8). */
#define MT_MOE_MAX_GROUPS 64

mt_status mt_moe_route_check(const mt_moe_route_params *p) {
    if (p->T < 0 || p->E < 1 || p->k < 1 || p->k > p->E)
        return mt_fail(MT_EINVAL, "MoE router: T=%lld tokens, E=%lld experts, top-k %lld: want "
                       "T >= 0 and 1 <= k <= E (--moe-top-k at most --moe-experts)",
                       (long long)p->T, (long long)p->E, (long long)p->k);
    if (p->score != MT_MOE_SOFTMAX && p->score != MT_MOE_SIGMOID)
        return mt_fail(MT_EINVAL, "MoE router: score kind %d is neither softmax (0) nor "
                       "sigmoid (1)", (int)p->score);
    if (!(isfinite(p->route_scale) && p->route_scale > 0.0f))
        return mt_fail(MT_EINVAL, "MoE router: route scale %g must be finite and positive (1: "
                       "none; DeepSeek-V3's 2.5)", (double)p->route_scale);
    const int64_t G = p->groups, M = p->groups_kept;
    if (G <= 1) {
        if (M > 1)
            return mt_fail(MT_EINVAL, "MoE router: %lld groups kept of %lld groups; set the "
                           "groups (> 1) with the groups kept, or neither", (long long)M,
                           (long long)G);
        return MT_OK;
    }
    if (G > MT_MOE_MAX_GROUPS || p->E % G != 0 || M < 1 || M > G || p->k % M != 0)
        return mt_fail(MT_EINVAL, "MoE router: group-limited routing with %lld groups, %lld "
                       "kept, E=%lld, k=%lld: want groups <= %d dividing E, 1 <= kept <= "
                       "groups and kept dividing k (DeepSeek-V3: 8 groups, 4 kept, E=256, "
                       "k=8)", (long long)G, (long long)M, (long long)p->E, (long long)p->k,
                       MT_MOE_MAX_GROUPS);
    if (p->k / M > p->E / G || M * (p->E / G) < p->k)
        return mt_fail(MT_EINVAL, "MoE router: %lld kept groups of %lld experts cannot give "
                       "top-%lld with %lld from each group: keep more groups or route fewer "
                       "experts", (long long)M, (long long)(p->E / G), (long long)p->k,
                       (long long)(p->k / M));
    return MT_OK;
}

/* (va, ia) ranks below (vb, ib): a smaller value, or an equal one at a
 * higher index. */
static bool below(double va, int64_t ia, double vb, int64_t ib) {
    return va < vb || (va == vb && ia > ib);
}

/* The biased score of expert i of a row. */
static double biased(const float *s, const float *bias, int64_t i) {
    return (double)s[i] + (bias ? (double)bias[i] : 0.0);
}

/* The sum of the top m biased scores of experts [lo, hi). */
static double top_sum(const float *s, const float *bias, int64_t lo, int64_t hi, int64_t m) {
    double sum = 0, pv = INFINITY;
    int64_t pi = -1;
    for (int64_t j = 0; j < m; j++) {
        int64_t best = -1;
        double bv = 0;
        for (int64_t i = lo; i < hi; i++) {
            const double v = biased(s, bias, i);
            if (below(v, i, pv, pi) && (best < 0 || below(bv, best, v, i))) best = i, bv = v;
        }
        assert(best >= 0);
        sum += bv, pv = bv, pi = best;
    }
    return sum;
}

/* The mask of the groups_kept groups of largest top-(k/kept) sums (ties:
 * the lower group), or all ones without group-limited routing. */
static uint64_t kept_groups(const mt_moe_route_params *p, const float *s, const float *bias) {
    const int64_t G = p->groups, M = p->groups_kept;
    if (G <= 1) return ~(uint64_t)0;
    const int64_t n = p->E / G;
    double gs[MT_MOE_MAX_GROUPS];
    for (int64_t g = 0; g < G; g++) gs[g] = top_sum(s, bias, g * n, (g + 1) * n, p->k / M);
    uint64_t kept = 0;
    for (int64_t j = 0; j < M; j++) {
        int64_t best = -1;
        for (int64_t g = 0; g < G; g++)
            if (!(kept >> g & 1) && (best < 0 || below(gs[best], best, gs[g], g))) best = g;
        kept |= (uint64_t)1 << best;
    }
    return kept;
}

/* Rows a block of the softmax takes, and floats a piece of it holds on the
 * stack when the caller keeps no scores. */
enum { SOFTMAX_ROWS = 64, SOFTMAX_PIECE = 1024 };

/* The softmax's piece [f0, f0+n) of a block's elements (rows E long) runs
 * row segment by row segment: segment i … i+len of the piece is row r's
 * columns c … c+len (one division a piece). */
#define EACH_SEGMENT(f0, n, E, body)                                                   \
    for (int64_t i = 0, r = (f0) / (E), c = (f0) % (E), len; i < (n); i += len, r++, c = 0) { \
        len = (E) - c < (n) - i ? (E) - c : (n) - i;                                    \
        body;                                                                           \
    }

/* e (n) = exp(u − the max of each element's row), elements f0 … f0+n of
 * the block's rows u (E long, mx their maxes), on the vector layer: one
 * element's exp does not depend on which piece it is in. Each row's sum
 * (+)= its exps in double in column order (sum NULL: none). */
static void exps(float *e, const float *u, const float *mx, double *sum, int64_t f0, int64_t n,
                 int64_t E) {
    EACH_SEGMENT(f0, n, E, for (int64_t j = 0; j < len; j++) e[i + j] = u[f0 + i + j] - mx[r]);
    mt__vec()->exp_sum(e, n, 0.0f);
    if (sum) EACH_SEGMENT(f0, n, E, for (int64_t j = 0; j < len; j++) sum[r] += e[i + j]);
}

void mt_moe_softmax_rows(const float *u, int64_t T, int64_t E, float *s, double zf, double *lse,
                         float *zg, bool acc) {
    float mx[SOFTMAX_ROWS], piece[SOFTMAX_PIECE];
    double sum[SOFTMAX_ROWS], inv[SOFTMAX_ROWS], f[SOFTMAX_ROWS];
    for (int64_t t0 = 0; t0 < T; t0 += SOFTMAX_ROWS) {
        const int64_t R = T - t0 < SOFTMAX_ROWS ? T - t0 : SOFTMAX_ROWS, n = R * E;
        const float *ub = u + t0 * E;
        for (int64_t r = 0; r < R; r++) {
            float m = ub[r * E];
            for (int64_t i = 1; i < E; i++) m = ub[r * E + i] > m ? ub[r * E + i] : m;
            mx[r] = m, sum[r] = 0;
        }
        /* the exps into s where the caller keeps scores, else piece by piece */
        const int64_t P = s ? n : SOFTMAX_PIECE;
        for (int64_t f0 = 0; f0 < n; f0 += P)
            exps(s ? s + t0 * E : piece, ub, mx, sum, f0, n - f0 < P ? n - f0 : P, E);
        for (int64_t r = 0; r < R; r++) inv[r] = 1.0 / sum[r];
        for (int64_t r = 0; (lse || zg) && r < R; r++) {
            const double l = (double)mx[r] + log(sum[r]);
            f[r] = zf * l;
            if (lse) lse[t0 + r] = l;
        }
        for (int64_t f0 = 0; zg && f0 < n; f0 += P) {   /* z's rows before the scores */
            const int64_t m = n - f0 < P ? n - f0 : P;
            const float *e = s ? s + t0 * E : piece;
            float *z = zg + t0 * E + f0;
            if (!s) exps(piece, ub, mx, NULL, f0, m, E);   /* the same exps again */
            EACH_SEGMENT(f0, m, E, for (int64_t j = 0; j < len; j++) {
                const float v = (float)(f[r] * (e[i + j] * inv[r]));
                z[i + j] = acc ? z[i + j] + v : v;
            });
        }
        if (s) EACH_SEGMENT(0, n, E, for (int64_t j = 0; j < len; j++) {
            float *e = s + t0 * E + i + j;
            *e = (float)(*e * inv[r]);
        });
    }
}

/* scores (T,E) of logits (T,E): softmax (mt_moe_softmax_rows, with the
 * z-loss's lse and gradient rows where zg or lse is not NULL, zf = 2β/T)
 * or sigmoid. */
static void scores_of(float *s, const float *u, int64_t T, int64_t E, mt_moe_score kind,
                      double zf, double *lse, float *zg) {
    if (kind == MT_MOE_SIGMOID) {
        for (int64_t i = 0; i < T * E; i++) s[i] = (float)(1.0 / (1.0 + exp(-(double)u[i])));
        return;
    }
    mt_moe_softmax_rows(u, T, E, s, zf, lse, zg, false);
}

/* gates (k) of one row: route_scale · s_id (/ Σ_selected s when renorm),
 * the sum in double in slot order. */
static void row_gates(const mt_moe_route_params *p, const float *s, const int32_t *id,
                      float *g) {
    double sum = 0;
    for (int64_t j = 0; j < p->k; j++) sum += s[id[j]];
    const double f = (double)p->route_scale / (p->renorm ? sum : 1.0);
    for (int64_t j = 0; j < p->k; j++) g[j] = (float)(f * s[id[j]]);
}

/* Experts up to which a row's top-k is taken by k branch-free arg-max
 * passes over a copy of the row rather than by insertion (whose branches
 * a random row's scores mispredict): both give the same ids. */
enum { ARGMAX_PASSES = 32 };

/* id (k) of one row of scores s (E): the k largest biased scores among the
 * experts of the kept groups (groups of n), larger first, ties to the
 * lower index. Up to ARGMAX_PASSES experts: k passes each taking the
 * first largest value (strictly larger replaces it) and setting it to
 * -inf (a group not kept is -inf from the start; the kept groups hold at
 * least k finite values: mt_moe_route_check). Past it, one pass in index
 * order inserts each candidate into the sorted picks (strictly larger
 * moves it ahead, so of equal values the earlier index stays first). */
static void row_top_k(const float *s, const float *bias, int64_t E, int64_t k, int64_t n,
                      uint64_t kept, int32_t *id) {
    if (E <= ARGMAX_PASSES) {
        double v[ARGMAX_PASSES];
        for (int64_t g0 = 0; g0 < E; g0 += n)
            for (int64_t i = g0; i < g0 + n; i++)
                v[i] = kept >> (g0 / n) & 1 ? biased(s, bias, i) : -INFINITY;
        for (int64_t j = 0; j < k; j++) {
            int64_t b = 0;
            double bv = v[0];
            for (int64_t i = 1; i < E; i++) {
                const bool gt = v[i] > bv;
                bv = gt ? v[i] : bv, b = gt ? i : b;
            }
            id[j] = (int32_t)b, v[b] = -INFINITY;
        }
        return;
    }
    int64_t m = 0;   /* picks so far */
    for (int64_t g0 = 0; g0 < E; g0 += n) {
        if (!(kept >> (g0 / n) & 1)) continue;
        for (int64_t i = g0; i < g0 + n; i++) {
            const double v = biased(s, bias, i);
            if (m == k && !(v > biased(s, bias, id[k - 1]))) continue;
            int64_t q = m < k ? m++ : k - 1;
            for (; q > 0 && v > biased(s, bias, id[q - 1]); q--) id[q] = id[q - 1];
            id[q] = (int32_t)i;
        }
    }
    assert(m == k);
}

void mt_moe_route_fwd(const mt_moe_route_params *p, const float *logits, const float *bias,
                      float *scores, int32_t *ids, float *gates) {
    const int64_t E = p->E, k = p->k, n = p->groups > 1 ? E / p->groups : E;
    scores_of(scores, logits, p->T, E, p->score, 0.0, NULL, NULL);
    for (int64_t t = 0; t < p->T; t++) {
        const float *s = scores + t * E;
        row_top_k(s, bias, E, k, n, kept_groups(p, s, bias), ids + t * k);
        if (gates) row_gates(p, s, ids + t * k, gates + t * k);
    }
}

void mt_moe_gates_z_fwd(const mt_moe_route_params *p, const float *logits, const int32_t *ids,
                        float *scores, float *gates, double zf, double *lse, float *zg) {
    assert(p->score == MT_MOE_SOFTMAX || (!lse && !zg));
    scores_of(scores, logits, p->T, p->E, p->score, zf, lse, zg);
    for (int64_t t = 0; t < p->T; t++)
        row_gates(p, scores + t * p->E, ids + t * p->k, gates + t * p->k);
}

void mt_moe_route_bwd(const mt_moe_route_params *p, float *dlogits, const float *dgates,
                      const float *dscores, const float *scores, const int32_t *ids, bool acc) {
    const int64_t E = p->E, k = p->k;
    const double rs = p->route_scale;
    for (int64_t t = 0; t < p->T; t++) {
        const float *s = scores + t * E, *dg = dgates + t * k;
        const float *dsc = dscores ? dscores + t * E : NULL;
        const int32_t *id = ids + t * k;
        float *du = dlogits + t * E;
        /* c_j, the gradient reaching the selected score s_{id_j} from the
         * gates: rs·dg_j, renormalised rs/Σ·(dg_j − Σ_l dg_l·ŝ_l) */
        double sum = 0, dot_g = 0;
        for (int64_t j = 0; j < k; j++) sum += s[id[j]];
        if (p->renorm)
            for (int64_t j = 0; j < k; j++) dot_g += (double)dg[j] * s[id[j]] / sum;
        const double f = p->renorm ? rs / sum : rs;
        /* softmax: du_i = s_i (ds_i − Σ_l ds_l s_l); sigmoid: ds_i s_i (1 − s_i) */
        double dot = 0;
        if (p->score == MT_MOE_SOFTMAX) {
            if (dsc)
                for (int64_t i = 0; i < E; i++) dot += (double)dsc[i] * s[i];
            for (int64_t j = 0; j < k; j++) dot += f * (dg[j] - dot_g) * s[id[j]];
        }
        for (int64_t i = 0; i < E; i++) {
            const double d = dsc ? dsc[i] : 0.0;
            const double v = p->score == MT_MOE_SOFTMAX ? s[i] * (d - dot)
                                                        : d * s[i] * (1.0 - s[i]);
            du[i] = acc ? du[i] + (float)v : (float)v;
        }
        for (int64_t j = 0; j < k; j++) {
            const double si = s[id[j]], c = f * (dg[j] - dot_g);
            du[id[j]] += (float)(p->score == MT_MOE_SOFTMAX ? si * c : c * si * (1.0 - si));
        }
    }
}
