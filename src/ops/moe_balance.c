/*
 * moe_balance.c — what keeps an MoE router balanced, on one device
 * (ops/moe.h; ../shared/MOE.md §2): the counts, the auxiliary loss in
 * Megatron's and DeepSeek's normalisation (α at perfect balance), the
 * router z-loss, MaxVio, and DeepSeek-V3's aux-loss-free bias update.
 * Sums are taken in double.
 */
#include "ops/moe.h"

#include <math.h>
#include <string.h>

void mt_moe_counts(int32_t *counts, const int32_t *ids, int64_t S, int64_t L, int64_t k,
                   int64_t E) {
    memset(counts, 0, (size_t)(S * E) * sizeof *counts);
    for (int64_t s = 0; s < S; s++)
        for (int64_t r = 0; r < L * k; r++)
            if (ids[s * L * k + r] >= 0) counts[s * E + ids[s * L * k + r]]++;   /* -1: dropped */
}

double mt_moe_aux_loss(const mt_moe_route_params *p, const float *scores, const int32_t *counts,
                       int64_t S, int64_t Ll, int64_t L, double alpha, float *dscores,
                       bool acc) {
    const int64_t E = p->E, k = p->k;
    const bool sig = p->score == MT_MOE_SIGMOID;
    double loss = 0;
    for (int64_t sq = 0; sq < S; sq++) {
        const int32_t *c = counts + sq * E;
        /* d loss / d p_{t,i} = α·E·f_i / (S·L), the same for every row */
        const double w = alpha * (double)E / ((double)S * (double)L * (double)k * (double)L);
        for (int64_t t = 0; t < Ll; t++) {
            const float *s = scores + (sq * Ll + t) * E;
            double z = 1, dot = 0;   /* sigmoid: p_i = s_i / z */
            if (sig) {
                z = 0;
                for (int64_t i = 0; i < E; i++) z += s[i];
            }
            for (int64_t i = 0; i < E; i++) {
                loss += w * c[i] * s[i] / z;
                dot += w * c[i] * s[i] / z;
            }
            if (!dscores) continue;
            float *ds = dscores + (sq * Ll + t) * E;
            for (int64_t i = 0; i < E; i++) {
                /* sigmoid: ds_i = (dp_i − Σ_l dp_l p_l) / z */
                const double v = sig ? (w * c[i] - dot) / z : w * c[i];
                ds[i] = acc ? ds[i] + (float)v : (float)v;
            }
        }
    }
    return loss;
}

void mt_moe_z_loss_rows(const float *logits, int64_t t0, int64_t t1, int64_t T, int64_t E,
                        double beta, double *lse, float *dlogits, bool acc) {
    double l[64];   /* a block's lse where the caller keeps none */
    for (int64_t b = t0; b < t1; b += 64) {
        const int64_t n = t1 - b < 64 ? t1 - b : 64;
        mt_moe_softmax_rows(logits + b * E, n, E, NULL, 2.0 * beta / (double)T,
                            lse ? lse + b : l, dlogits ? dlogits + b * E : NULL, acc);
    }
}

double mt_moe_z_loss_sum(const double *lse, int64_t T, double beta) {
    double loss = 0;
    for (int64_t t = 0; t < T; t++) loss += lse[t] * lse[t];
    return T > 0 ? beta * loss / (double)T : 0.0;
}

double mt_moe_z_loss(const float *logits, int64_t T, int64_t E, double beta, float *dlogits,
                     bool acc) {
    double loss = 0, lse[64];
    for (int64_t b = 0; b < T; b += 64) {
        const int64_t n = T - b < 64 ? T - b : 64;
        mt_moe_z_loss_rows(logits + b * E, 0, n, T, E, beta, lse, dlogits ? dlogits + b * E : NULL,
                           acc);
        for (int64_t t = 0; t < n; t++) loss += lse[t] * lse[t];
    }
    return T > 0 ? beta * loss / (double)T : 0.0;
}

/* The mean of counts (E), in double. */
static double mean_count(const int32_t *counts, int64_t E) {
    double sum = 0;
    for (int64_t i = 0; i < E; i++) sum += counts[i];
    return sum / (double)E;
}

double mt_moe_maxvio(const int32_t *counts, int64_t E) {
    const double mean = mean_count(counts, E);
    if (mean == 0) return 0.0;
    int32_t mx = counts[0];
    for (int64_t i = 1; i < E; i++) mx = counts[i] > mx ? counts[i] : mx;
    return ((double)mx - mean) / mean;
}

void mt_moe_bias_update(float *bias, const int32_t *counts, int64_t E, float gamma) {
    const double mean = mean_count(counts, E);
    double sum = 0;
    for (int64_t i = 0; i < E; i++) sum += (counts[i] < mean) - (counts[i] > mean);
    const double centre = sum / (double)E;
    for (int64_t i = 0; i < E; i++) {
        const double sign = (counts[i] < mean) - (counts[i] > mean);
        bias[i] += (float)((double)gamma * (sign - centre));
    }
}
