/*
 * memory_forms.c — the published closed forms of memory per device
 * (plan/memory.h): the ZeRO paper's model states, Korthikanti et al.'s
 * 16-bit activations per layer, the scaling book's saved widths.
 */
#include "plan/memory.h"

/* The paper's K: fp32 master weights, momentum and variance, 4 bytes each. */
#define ZERO_K 12.0

double mt__plan_mem_zero_paper(double psi, int nd, int stage) {
    if (nd < 1) return -1;
    switch (stage) {
    case 0: return (2 + 2 + ZERO_K) * psi;
    case 1: return 4 * psi + ZERO_K * psi / nd;
    case 2: return 2 * psi + (2 + ZERO_K) * psi / nd;
    case 3: return (2 + 2 + ZERO_K) * psi / nd;
    default: return -1;
    }
}

double mt__plan_mem_korthikanti_layer(const mt__plan_mem_layout *l) {
    const double s = l->s, b = l->b, h = l->h, a = l->a, t = l->tensor;
    if (!(s > 0 && b > 0 && h > 0 && a > 0 && t > 0)) return -1;
    const double kv = l->kv_heads > 0 ? l->kv_heads : a;
    /* the attention's width, a·hd: h itself at the default head size */
    const double q = l->hd > 0 ? a * l->hd : h;
    const double F = l->ffn > 0 ? l->ffn : 4 * h;
    const bool sp = l->sequence_parallel;
    if (l->remat == MT_REMAT_FULL) return 2 * s * b * h / (sp ? t : 1);
    /* the paper's breakdown (attention 11sbh + 5as²b, MLP 19sbh, norms 4sbh),
     * as what tensor parallelism splits and what it leaves whole */
    const double whole = 10 * s * b * h;
    const double split = 2 * s * b * q                    /* the query */
                         + 4 * s * b * q * kv / a         /* keys and values */
                         + 2 * s * b * q                  /* the output projection's input */
                         + (l->gated ? 4 : 2) * 2 * s * b * F;   /* the MLP's F-wide values */
    /* an MoE layer: its F-wide values moe_ffn wide, the dispatched rows and
       the experts' outputs (k·h each), the router's f32 logits */
    const double moe = (l->gated ? 4 : 2) * 2 * s * b * (l->moe_ffn - F)
                       + 2 * 2 * s * b * l->moe_k * h + 4 * s * b * l->moe_experts;
    const double share = l->moe_share > 0 ? l->moe_share : 0;
    /* per element of the (a, s, s) scores: the softmax's output 2 bytes, its
     * dropout's mask 1 and output 2 */
    const double scores = 5 * a * s * s * b;
    const bool selective = l->remat == MT_REMAT_ATTENTION || l->remat == MT_REMAT_DOTS;
    return (sp ? whole / t : whole) + (split + share * moe) / t + (selective ? 0 : scores / t);
}

double mt__plan_mem_book_width(mt_remat remat, double D, double F) {
    if (!(D > 0 && F > 0)) return -1;
    switch (remat) {
    case MT_REMAT_NONE: return 20 * D;
    case MT_REMAT_ATTENTION: return D + 2 * F;
    case MT_REMAT_DOTS: return 4 * D;
    case MT_REMAT_FULL: return D;
    default: return -1;
    }
}
