/*
 * moe_ref.h — a float64 reference of the MoE pieces, written apart from
 * src/ops/moe_*.c for tests/test_moe_ops.c and tests/test_moe_layer.c:
 * selection by sorting every (biased score, index) pair (the kernels pick
 * one at a time), gates, counts, the aux loss, the z-loss and a whole MoE
 * layer with linear experts, each token's experts applied directly (no
 * sort, no dispatch). Static functions in a header: each test program
 * includes it once.
 */
#ifndef MT_TEST_MOE_REF_H
#define MT_TEST_MOE_REF_H

#include "ops/moe.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* A small deterministic generator: uniform in [-1, 1). */
static inline double ref_rand(uint64_t *st) {
    *st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*st >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* x (n) uniform in [-a, a) as floats. */
static inline void ref_fill(float *x, int64_t n, double a, uint64_t *st) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)(a * ref_rand(st));
}

/* s (E) = softmax or sigmoid of u (E). */
static inline void ref_scores(double *s, const double *u, int64_t E, mt_moe_score kind) {
    double sum = 0;
    for (int64_t i = 0; i < E; i++) {
        s[i] = kind == MT_MOE_SIGMOID ? 1.0 / (1.0 + exp(-u[i])) : exp(u[i]);
        sum += s[i];
    }
    if (kind == MT_MOE_SOFTMAX)
        for (int64_t i = 0; i < E; i++) s[i] /= sum;
}

/* idx[0..n) = the indices 0..n-1 sorted by v descending, ties by the lower
 * index first (an insertion sort: the tie rule is explicit). */
static inline void ref_rank(int64_t *idx, const double *v, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        int64_t j = i;
        while (j > 0 && v[idx[j - 1]] < v[i]) { idx[j] = idx[j - 1]; j--; }
        idx[j] = i;
    }
}

/* ids (k) of one row of scores s (E) and bias b (E, or NULL): group-limited
 * routing masks the groups out of the best groups_kept (a group's score the
 * sum of its top k/groups_kept biased scores), then the k best biased
 * scores. */
static inline void ref_select(int32_t *ids, const double *s, const float *b,
                       const mt_moe_route_params *p) {
    const int64_t E = p->E, G = p->groups > 1 ? p->groups : 1, n = E / G;
    double *v = malloc((size_t)E * sizeof *v), gs[64];
    int64_t *idx = malloc((size_t)E * sizeof *idx), gi[64];
    for (int64_t i = 0; i < E; i++) v[i] = s[i] + (b ? (double)b[i] : 0.0);
    if (G > 1) {
        for (int64_t g = 0; g < G; g++) {
            ref_rank(idx, v + g * n, n);
            gs[g] = 0;
            for (int64_t j = 0; j < p->k / p->groups_kept; j++) gs[g] += v[g * n + idx[j]];
        }
        ref_rank(gi, gs, G);
        for (int64_t j = p->groups_kept; j < G; j++)
            for (int64_t i = 0; i < n; i++) v[gi[j] * n + i] = -INFINITY;
    }
    ref_rank(idx, v, E);
    for (int64_t j = 0; j < p->k; j++) ids[j] = (int32_t)idx[j];
    free(v);
    free(idx);
}

/* g (k) = route_scale · s[ids] (/ their sum when renorm): unbiased. */
static inline void ref_gates(double *g, const double *s, const int32_t *ids,
                      const mt_moe_route_params *p) {
    double sum = 0;
    for (int64_t j = 0; j < p->k; j++) sum += s[ids[j]];
    for (int64_t j = 0; j < p->k; j++)
        g[j] = p->route_scale * s[ids[j]] / (p->renorm ? sum : 1.0);
}

/* α·E·Σ_i f_i·P_i averaged over S sequences of L rows, from the logits u
 * (S·L,E) and the ids (S·L,k) as given. */
static inline double ref_aux(const mt_moe_route_params *p, const double *u, const int32_t *ids,
                      int64_t S, int64_t L, double alpha) {
    const int64_t E = p->E;
    double *s = malloc((size_t)E * sizeof *s), *P = calloc((size_t)E, sizeof *P);
    double *f = calloc((size_t)E, sizeof *f), loss = 0;
    for (int64_t q = 0; q < S; q++) {
        for (int64_t i = 0; i < E; i++) P[i] = f[i] = 0;
        for (int64_t t = q * L; t < (q + 1) * L; t++) {
            ref_scores(s, u + t * E, E, p->score);
            double z = 0;
            for (int64_t i = 0; i < E; i++) z += s[i];
            for (int64_t i = 0; i < E; i++)
                P[i] += (p->score == MT_MOE_SIGMOID ? s[i] / z : s[i]) / (double)L;
            for (int64_t j = 0; j < p->k; j++) f[ids[t * p->k + j]] += 1.0 / (double)(p->k * L);
        }
        for (int64_t i = 0; i < E; i++) loss += alpha * (double)E * f[i] * P[i] / (double)S;
    }
    free(s);
    free(P);
    free(f);
    return loss;
}

/* β · mean_t (log Σ_i e^{u_ti})² over u (T,E). */
static inline double ref_z(const double *u, int64_t T, int64_t E, double beta) {
    double loss = 0;
    for (int64_t t = 0; t < T; t++) {
        double sum = 0;
        for (int64_t i = 0; i < E; i++) sum += exp(u[t * E + i]);
        loss += log(sum) * log(sum);
    }
    return beta * loss / (double)T;
}

/* A whole MoE layer with linear experts, routing held at ids (T,k):
 * u = x (T,D) · wg (D,E), out_t = Σ_j g_tj · x_t · we[id_tj] (D,O), loss
 * = Σ out ⊙ r (T,O) + ref_aux (S sequences) + ref_z. With kept (T,k)
 * (a capacity's drops: -1), a dropped pair adds nothing to out_t; the
 * gates and the aux loss stay the router's ids'. */
typedef struct {
    mt_moe_route_params p;
    int64_t             D, O, S;
    double              alpha, beta;
    const int32_t      *ids, *kept;
    const double       *r;
} ref_layer;

static inline double ref_layer_loss(const ref_layer *L, const double *x, const double *wg,
                             const double *we) {
    const int64_t T = L->p.T, E = L->p.E, k = L->p.k, D = L->D, O = L->O;
    double *u = calloc((size_t)(T * E), sizeof *u), *s = malloc((size_t)E * sizeof *s);
    double *g = malloc((size_t)k * sizeof *g), loss = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < E; i++)
            for (int64_t d = 0; d < D; d++) u[t * E + i] += x[t * D + d] * wg[d * E + i];
    for (int64_t t = 0; t < T; t++) {
        ref_scores(s, u + t * E, E, L->p.score);
        ref_gates(g, s, L->ids + t * k, &L->p);
        for (int64_t j = 0; j < k; j++) {
            if (L->kept && L->kept[t * k + j] < 0) continue;   /* dropped */
            const double *w = we + (int64_t)L->ids[t * k + j] * D * O;
            for (int64_t o = 0; o < O; o++) {
                double y = 0;
                for (int64_t d = 0; d < D; d++) y += x[t * D + d] * w[d * O + o];
                loss += g[j] * y * L->r[t * O + o];
            }
        }
    }
    loss += ref_aux(&L->p, u, L->ids, L->S, T / L->S, L->alpha) + ref_z(u, T, E, L->beta);
    free(u);
    free(s);
    free(g);
    return loss;
}

#endif /* MT_TEST_MOE_REF_H */
