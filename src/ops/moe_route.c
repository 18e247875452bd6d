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

#include <assert.h>
#include <math.h>

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

double mt_moe_softmax_row(const float *u, int64_t E, float *s, double zf, float *zg, bool acc) {
    double mx = u[0], sum = 0, e[MT_MOE_ROW_EXPS];
    const bool keep = (s || zg) && E <= MT_MOE_ROW_EXPS;
    for (int64_t i = 1; i < E; i++) mx = u[i] > mx ? u[i] : mx;
    for (int64_t i = 0; i < E; i++) {
        const double v = exp((double)u[i] - mx);
        if (keep) e[i] = v;
        sum += v;
    }
    for (int64_t i = 0; s && i < E; i++)
        s[i] = (float)((keep ? e[i] : exp((double)u[i] - mx)) / sum);
    const double lse = mx + log(sum), f = zf * lse;
    for (int64_t i = 0; zg && i < E; i++) {
        const double v = f * (keep ? e[i] : exp((double)u[i] - mx)) / sum;
        zg[i] = acc ? zg[i] + (float)v : (float)v;
    }
    return lse;
}

/* The z-loss's share of a softmax row (NULLs: none): its log-sum-exp into
 * *lse, and its gradient row into zg (E), zf = 2β/T (mt_moe_softmax_row). */
typedef struct { double *lse; float *zg; double zf; } z_row_out;

/* scores (E) of one row of logits (E): softmax (mt_moe_softmax_row) or
 * sigmoid, and for a softmax z's share where z is not NULL. */
static void row_scores(float *s, const float *u, int64_t E, mt_moe_score kind,
                       const z_row_out *z) {
    if (kind == MT_MOE_SIGMOID) {
        for (int64_t i = 0; i < E; i++) s[i] = (float)(1.0 / (1.0 + exp(-(double)u[i])));
        return;
    }
    const double lse = mt_moe_softmax_row(u, E, s, z ? z->zf : 0.0, z ? z->zg : NULL, false);
    if (z && z->lse) *z->lse = lse;
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

void mt_moe_route_fwd(const mt_moe_route_params *p, const float *logits, const float *bias,
                      float *scores, int32_t *ids, float *gates) {
    const int64_t E = p->E, k = p->k, n = p->groups > 1 ? E / p->groups : E;
    for (int64_t t = 0; t < p->T; t++) {
        float *s = scores + t * E, *g = gates + t * k;
        int32_t *id = ids + t * k;
        row_scores(s, logits + t * E, E, p->score, NULL);
        const uint64_t kept = kept_groups(p, s, bias);
        double pv = INFINITY;
        int64_t pi = -1;
        for (int64_t j = 0; j < k; j++) {
            int64_t best = -1;
            double bv = 0;
            for (int64_t i = 0; i < E; i++) {
                if (!(kept >> (i / n) & 1)) continue;
                const double v = biased(s, bias, i);
                if (below(v, i, pv, pi) && (best < 0 || below(bv, best, v, i))) best = i, bv = v;
            }
            assert(best >= 0);
            id[j] = (int32_t)best, pv = bv, pi = best;
        }
        row_gates(p, s, id, g);
    }
}

void mt_moe_gates_fwd(const mt_moe_route_params *p, const float *logits, const int32_t *ids,
                      float *scores, float *gates) {
    mt_moe_gates_z_fwd(p, logits, ids, scores, gates, 0.0, NULL, NULL);
}

void mt_moe_gates_z_fwd(const mt_moe_route_params *p, const float *logits, const int32_t *ids,
                        float *scores, float *gates, double zf, double *lse, float *zg) {
    assert(p->score == MT_MOE_SOFTMAX || (!lse && !zg));
    const int64_t E = p->E;
    for (int64_t t = 0; t < p->T; t++) {
        const z_row_out z = {lse ? lse + t : NULL, zg ? zg + t * E : NULL, zf};
        row_scores(scores + t * E, logits + t * E, E, p->score, lse || zg ? &z : NULL);
        row_gates(p, scores + t * E, ids + t * p->k, gates + t * p->k);
    }
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
