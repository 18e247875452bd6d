/*
 * hf_moe.c — a LLaMA's mixture-of-experts weights from and to a Hugging
 * Face directory (issue 43; hf_llama.c does the rest of the model).
 *
 * Names, block l, expert e (the router first, then each expert's three):
 *   Mixtral    model.layers.l.block_sparse_moe.gate.weight           (E,C)
 *              model.layers.l.block_sparse_moe.experts.e.w1.weight   (F,C) gate
 *              ....experts.e.w3.weight (F,C) up, ....experts.e.w2.weight (C,F) down
 *   Qwen3-MoE  model.layers.l.mlp.gate.weight                        (E,C)
 *              model.layers.l.mlp.experts.e.gate_proj.weight         (F,C)
 *              ....up_proj.weight (F,C), ....down_proj.weight (C,F)
 * meshtrain's (models/llama/llama_moe.c): the router h.l.moe.router.w
 * (E,C), as it is (both compute logits h · W_rᵀ); the experts stacked and
 * each one's matrix transposed, as mt_moe_experts multiplies rows by
 * w[e] (C,OC): h.l.moe.w1.w and .w3.w (E,C,F), h.l.moe.w2.w (E,F,C).
 * Expert e is block e of the stack: each is read and written alone, so no
 * (E,C,F) copy is made. The router bias h.l.moe.router.bias (the
 * aux-loss-free balancing's) has no counterpart in either architecture:
 * loaded as zeros, and a non-zero one is refused on saving (the model
 * written would route otherwise than the one trained).
 */
#include "io/hf_impl.h"
#include "io/io_impl.h"
#include "io/safetensors_impl.h"
#include "models/llama/llama_moe.h"

#include <stdlib.h>
#include <string.h>

#define WHAT "Hugging Face model"

/* meshtrain's stacked expert tensors, in the order of each expert's three */
static const char *const MT_EXPERT[3] = {"h.%d.moe.w1.w", "h.%d.moe.w3.w", "h.%d.moe.w2.w"};

/* The Hugging Face name of MoE tensor i of block l into hf (MT_MAX_NAME):
 * i 0 the router, 1 + 3e + j expert e's gate (j 0), up (1), down (2). */
static void moe_name(const mt_llama_config *c, int l, int i, char *hf) {
    static const char *const MIXTRAL[3] = {"w1", "w3", "w2"},
                             *const QWEN[3] = {"gate_proj", "up_proj", "down_proj"};
    const char *block = c->qk_norm ? "mlp" : "block_sparse_moe";
    if (i == 0)
        snprintf(hf, MT_MAX_NAME, "model.layers.%d.%s.gate.weight", l, block);
    else
        snprintf(hf, MT_MAX_NAME, "model.layers.%d.%s.experts.%d.%s.weight", l, block,
                 (i - 1) / 3, (c->qk_norm ? QWEN : MIXTRAL)[(i - 1) % 3]);
}

bool mt__hf_moe_known(const mt_llama_config *cfg, const char *name) {
    int l;
    if (sscanf(name, "model.layers.%d.", &l) != 1 || l < 0 || l >= cfg->n_layers ||
        !mt_llama_moe_block(cfg, l))
        return false;
    char hf[MT_MAX_NAME];
    for (int i = 0; i < 1 + 3 * cfg->moe.experts; i++) {
        moe_name(cfg, l, i, hf);
        if (!strcmp(hf, name)) return true;
    }
    return false;
}

/* The graph's parameter fmt of block l, or MT_EINVAL into *s. */
static mt_tensor *param(mt_graph *g, const char *fmt, int l, const char *hf, const char *dir,
                        mt_status *s) {
    char mt[MT_MAX_NAME];
    snprintf(mt, sizeof mt, fmt, l);
    mt_tensor *t = mt_graph_find(g, mt);
    if (!t)
        *s = mt_fail(MT_EINVAL, WHAT " '%s': the graph has no parameter '%s' for '%s'; build "
                     "it from the directory's config.json", dir, mt, hf);
    return t;
}

/* out (cols,rows) = in (rows,cols)ᵀ */
static void transpose(float *out, const float *in, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < cols; k++) out[k * rows + r] = in[r * cols + k];
}

/* The dims (F,C) of expert matrix j in Hugging Face's layout (out, in):
 * gate and up (F,C), down (C,F); meshtrain's block is the transpose. */
static void hf_dims(const mt_llama_config *c, int64_t F, int j, int64_t *dims) {
    dims[0] = j < 2 ? F : c->dim;
    dims[1] = j < 2 ? c->dim : F;
}

/* Block l's router (and bias) and experts from st into g. */
static mt_status load_block(const mt_safetensors *st, mt_graph *g, const mt_llama_config *c,
                            int l, const char *dir, int *used, float **buf, float **tmp) {
    const mt_llama_moe m = mt__llama_moe_resolved(c, mt_llama_ffn_dim(c));
    const int64_t C = c->dim, F = m.ffn_dim;
    char hf[MT_MAX_NAME];
    mt_status s = MT_OK;
    for (int i = 0; s == MT_OK && i < 1 + 3 * m.experts; i++) {
        moe_name(c, l, i, hf);
        const int j = (i - 1) % 3, e = (i - 1) / 3;
        const mt_st_tensor *x = mt_safetensors_find(st, hf);
        mt_tensor *t = param(g, i == 0 ? "h.%d.moe.router.w" : MT_EXPERT[j], l, hf, dir, &s);
        if (!t) break;
        if (!x) return mt_fail(MT_EFORMAT, WHAT " '%s': no tensor '%s' (meshtrain's '%s'%s)",
                               dir, hf, mt_tensor_name(t), i ? ", one expert's block" : "");
        int64_t dims[2] = {m.experts, C}, e0, e1;
        if (i > 0) hf_dims(c, F, j, dims);
        mt__hf_rows_of(t, 1, &e0, &e1);   /* the experts t's block holds (an expert axis) */
        if (i > 0 && (e < e0 || e >= e1)) {
            /* another device's expert: its shape checked, no byte read */
            s = mt__hf_read_checked(st, x, 2, dims, 0, 0, dir, buf);
        } else if (i == 0) {
            if ((s = mt__hf_read_checked(st, x, 2, dims, 0, dims[0], dir, buf)) == MT_OK)
                s = mt_tensor_write_global(t, *buf, 0, dims[0] * dims[1]);
        } else if ((s = mt__hf_read_checked(st, x, 2, dims, 0, dims[0], dir, buf)) == MT_OK) {
            float *q = realloc(*tmp, (size_t)(C * F) * sizeof *q);
            if (!q) return mt_fail(MT_ENOMEM, WHAT " '%s': tensor '%s'", dir, hf);
            *tmp = q;
            transpose(q, *buf, dims[0], dims[1]);
            s = mt_tensor_write_global(t, q, e * C * F, C * F);
        }
        if (s == MT_OK) ++*used;
    }
    char bn[MT_MAX_NAME];
    snprintf(bn, sizeof bn, "h.%d.moe.router.bias", l);
    mt_tensor *bias = mt_graph_find(g, bn);
    if (s == MT_OK && bias) {   /* no counterpart: balancing starts from zeros */
        float *z = calloc((size_t)m.experts, sizeof *z);
        s = z ? mt_tensor_write_global(bias, z, 0, m.experts)
              : mt_fail(MT_ENOMEM, WHAT " '%s': bias", dir);
        free(z);
    }
    return s;
}

mt_status mt__hf_load_moe(const mt_safetensors *st, mt_graph *g, const mt_llama_config *cfg,
                          const char *dir, int *used) {
    float *buf = NULL, *tmp = NULL;
    mt_status s = MT_OK;
    for (int l = 0; s == MT_OK && l < cfg->n_layers; l++)
        if (mt_llama_moe_block(cfg, l)) s = load_block(st, g, cfg, l, dir, used, &buf, &tmp);
    free(buf), free(tmp);
    return s;
}

/* Refuses block l's router bias of g where it is not all zero. */
static mt_status bias_is_zero(mt_graph *g, int l, int64_t E, const char *dir) {
    char bn[MT_MAX_NAME];
    snprintf(bn, sizeof bn, "h.%d.moe.router.bias", l);
    mt_tensor *t = mt_graph_find(g, bn);
    if (!t) return MT_OK;
    float *b = malloc((size_t)E * sizeof *b);
    mt_status s = b ? mt_tensor_read(t, b, 0, E) : mt_fail(MT_ENOMEM, WHAT " '%s': bias", dir);
    for (int64_t i = 0; s == MT_OK && i < E; i++)
        if (b[i] != 0.0f)
            s = mt_fail(MT_EUNSUPPORTED, WHAT " '%s': '%s'[%lld] is %g: Mixtral and Qwen3-MoE "
                        "route without the aux-loss-free bias, so the model written would "
                        "choose other experts than the one trained; save a meshtrain "
                        "checkpoint (--ckpt-out) instead, or train without "
                        "--moe-bias-update", dir, bn, (long long)i, (double)b[i]);
    free(b);
    return s;
}

mt_status mt__hf_save_moe(mt_graph *g, const mt_llama_config *cfg, const char *dir,
                          mt__hf_out *o) {
    const mt_llama_moe m = mt__llama_moe_resolved(cfg, mt_llama_ffn_dim(cfg));
    const int64_t C = cfg->dim, F = m.ffn_dim;
    mt_status s = MT_OK;
    for (int l = 0; s == MT_OK && l < cfg->n_layers; l++) {
        if (!mt_llama_moe_block(cfg, l)) continue;
        if ((s = bias_is_zero(g, l, m.experts, dir)) != MT_OK) break;
        for (int i = 0; s == MT_OK && i < 1 + 3 * m.experts; i++) {
            const int j = (i - 1) % 3, e = (i - 1) / 3;
            moe_name(cfg, l, i, o->names[o->n]);
            mt_tensor *t = param(g, i == 0 ? "h.%d.moe.router.w" : MT_EXPERT[j], l,
                                 o->names[o->n], dir, &s);
            if (!t) break;
            int64_t dims[2] = {m.experts, C};
            if (i > 0) hf_dims(cfg, F, j, dims);
            const int64_t n = dims[0] * dims[1];
            float *v = malloc((size_t)n * sizeof *v), *q = i ? malloc((size_t)n * sizeof *q)
                                                               : NULL;
            if (!v || (i && !q)) s = mt_fail(MT_ENOMEM, WHAT " '%s': tensor '%s'", dir,
                                             o->names[o->n]);
            else s = mt_tensor_read(t, v, i ? e * C * F : 0, n);
            if (s == MT_OK && i) {   /* meshtrain's block (dims[1], dims[0]) */
                transpose(q, v, dims[1], dims[0]);
                free(v);
                v = q, q = NULL;
            }
            free(q);
            if (s != MT_OK) {
                free(v);
                break;
            }
            mt__hf_out_add(o, 2, dims, v);
        }
    }
    return s;
}
