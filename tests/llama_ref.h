/*
 * llama_ref.h — a naive float64 LLaMA, written from the math (Llama 2's
 * model.py and llama2.c's run.c), not from the code under test: embedding,
 * RMSNorm, linear layers, RoPE on pairs (x[2i], x[2i+1]) of each head as
 * run.c rotates them, grouped-query causal attention (heads of C/NH, or of
 * the configuration's head_dim: q NH·HS wide, k and v KV·HS, the output
 * projection NH·HS -> C), SwiGLU, the head and the mean cross entropy;
 * with the configuration's qkv_bias, q, k and v biases (Qwen2), with
 * qk_norm an RMSNorm over each head of q and k before RoPE (Qwen3: its
 * modeling_qwen3.py's q_norm and k_norm on the head_dim view).
 * A test may give its own feed-forward for some blocks (ffn: a mixture
 * of experts). Parameters are looked up by meshtrain's names, in double copies the test
 * may perturb (finite differences).
 */
#ifndef MT_TEST_LLAMA_REF_H
#define MT_TEST_LLAMA_REF_H

#include "meshtrain.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LLAMA_REF_MAX_PARAMS 64

typedef struct {
    char    name[MT_MAX_NAME];
    int64_t n;
    double *d;        /* (n) the values, row-major as meshtrain's */
} llama_ref_param;

typedef struct {
    mt_llama_config cfg;   /* ffn_dim resolved */
    int             rotate_half;   /* 1: Hugging Face's RoPE (llama_ref_rope) */
    /* where set and returning 1, block l's feed-forward y (n,C) of the
     * ffn_norm's h (n,C) in place of the dense SwiGLU (a test's mixture
     * of experts, test_hf_moe.c) */
    int           (*ffn)(const void *user, int l, const double *h, double *y, int64_t n, int C);
    const void     *ffn_user;
    int             n;
    llama_ref_param p[LLAMA_REF_MAX_PARAMS];
} llama_ref;

/* The parameter `name` (printf-style), or abort: the reference needs all. */
static const double *llama_ref_get(const llama_ref *m, const char *fmt, int l) {
    char name[MT_MAX_NAME];
    snprintf(name, sizeof name, fmt, l);
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->p[i].name, name) == 0) return m->p[i].d;
    fprintf(stderr, "llama_ref: no parameter %s\n", name);
    abort();
}

/* y (n,O) = x (n,I) · w (O,I)ᵀ */
static void llama_ref_linear(double *y, const double *x, const double *w, int64_t n, int I,
                             int O) {
    for (int64_t r = 0; r < n; r++)
        for (int o = 0; o < O; o++) {
            double s = 0;
            for (int i = 0; i < I; i++) s += x[r * I + i] * w[(int64_t)o * I + i];
            y[r * O + o] = s;
        }
}

/* y (n,C) = x / sqrt(mean(x²) + eps) · w */
static void llama_ref_rmsnorm(double *y, const double *x, const double *w, int64_t n, int C,
                              double eps) {
    for (int64_t r = 0; r < n; r++) {
        double ss = 0;
        for (int c = 0; c < C; c++) ss += x[r * C + c] * x[r * C + c];
        double inv = 1.0 / sqrt(ss / C + eps);
        for (int c = 0; c < C; c++) y[r * C + c] = x[r * C + c] * inv * w[c];
    }
}

/* x (B,T,H·HS) rotated in place: the pair (2i, 2i+1) of each head at
 * position t by t·theta^(-2i/HS) (run.c: freq = 1/theta^(head_dim/HS) with
 * head_dim = 2i); with rotate_half, Hugging Face's LlamaModel instead
 * (apply_rotary_pos_emb: x·cos + rotate_half(x)·sin, cos and sin of
 * cat(freqs, freqs)): the pair (j, j + HS/2) by t·theta^(-2j/HS). */
static void llama_ref_rope(double *x, int B, int T, int H, int HS, double theta,
                           int rotate_half) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < HS; i += 2) {
                    double *v = x + (((int64_t)b * T + t) * H + h) * HS;
                    double *v0p = rotate_half ? v + i / 2 : v + i;
                    double *v1p = rotate_half ? v + i / 2 + HS / 2 : v + i + 1;
                    double ang = (double)t * pow(theta, -(double)i / HS);
                    double c = cos(ang), s = sin(ang), v0 = *v0p, v1 = *v1p;
                    *v0p = v0 * c - v1 * s;
                    *v1p = v0 * s + v1 * c;
                }
}

/* out (B,T,NH·HS): causal attention of q (B,T,NH·HS) over k, v (B,T,KV·HS),
 * query head h reading kv head h / (NH/KV). */
static void llama_ref_attention(double *out, const double *q, const double *k, const double *v,
                                int B, int T, int NH, int KV, int HS) {
    double *p = malloc((size_t)T * sizeof *p);   /* (T) */
    const int group = NH / KV;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *qv = q + (((int64_t)b * T + t) * NH + h) * HS;
                double mx = -INFINITY, z = 0;
                for (int u = 0; u <= t; u++) {
                    const double *kv = k + (((int64_t)b * T + u) * KV + h / group) * HS;
                    double s = 0;
                    for (int i = 0; i < HS; i++) s += qv[i] * kv[i];
                    p[u] = s / sqrt((double)HS);
                    if (p[u] > mx) mx = p[u];
                }
                for (int u = 0; u <= t; u++) z += (p[u] = exp(p[u] - mx));
                double *o = out + (((int64_t)b * T + t) * NH + h) * HS;
                for (int i = 0; i < HS; i++) o[i] = 0;
                for (int u = 0; u <= t; u++) {
                    const double *vv = v + (((int64_t)b * T + u) * KV + h / group) * HS;
                    for (int i = 0; i < HS; i++) o[i] += p[u] / z * vv[i];
                }
            }
    free(p);
}

/* scale · Σ -log softmax(logits)[target] of the model on tokens (B,T),
 * over the rows whose target is not negative. */
static double llama_ref_loss(const llama_ref *m, const int32_t *tokens, const int32_t *targets,
                             int B, int T, double scale) {
    const mt_llama_config *c = &m->cfg;
    const int C = c->dim, F = c->ffn_dim, NH = c->n_heads, KV = c->n_kv_heads, V = c->vocab;
    /* the head size: its own where the configuration gives one, else C/NH;
     * the query and the attention's output NH·HS wide, not C */
    const int HS = c->head_dim > 0 ? c->head_dim : C / NH, QW = NH * HS;
    const int64_t n = (int64_t)B * T;
    double *x = malloc((size_t)(n * C) * sizeof *x);          /* (B,T,C) */
    double *h = malloc((size_t)(n * C) * sizeof *h);          /* (B,T,C) */
    double *q = malloc((size_t)(n * QW) * sizeof *q);         /* (B,T,NH·HS) */
    double *k = malloc((size_t)(n * KV * HS) * sizeof *k);    /* (B,T,KV·HS) */
    double *v = malloc((size_t)(n * KV * HS) * sizeof *v);    /* (B,T,KV·HS) */
    double *att = malloc((size_t)(n * QW) * sizeof *att);     /* (B,T,NH·HS) */
    double *u = malloc((size_t)(n * F) * sizeof *u);          /* (B,T,F) */
    double *gt = malloc((size_t)(n * F) * sizeof *gt);        /* (B,T,F) */
    double *y = malloc((size_t)(n * (C > V ? C : V)) * sizeof *y);   /* (B,T,C) or (B,T,V) */
    const double *emb = llama_ref_get(m, "tok_emb.w", 0);
    for (int64_t r = 0; r < n; r++) memcpy(x + r * C, emb + (int64_t)tokens[r] * C, C * sizeof *x);
    for (int l = 0; l < c->n_layers; l++) {
        llama_ref_rmsnorm(h, x, llama_ref_get(m, "h.%d.attn_norm.w", l), n, C, c->norm_eps);
        llama_ref_linear(q, h, llama_ref_get(m, "h.%d.attn.wq.w", l), n, C, QW);
        llama_ref_linear(k, h, llama_ref_get(m, "h.%d.attn.wk.w", l), n, C, KV * HS);
        llama_ref_linear(v, h, llama_ref_get(m, "h.%d.attn.wv.w", l), n, C, KV * HS);
        if (c->qkv_bias) {   /* Qwen2: q, k, v plus their biases */
            const double *bq = llama_ref_get(m, "h.%d.attn.wq.b", l),
                         *bk = llama_ref_get(m, "h.%d.attn.wk.b", l),
                         *bv = llama_ref_get(m, "h.%d.attn.wv.b", l);
            for (int64_t r = 0; r < n; r++) {
                for (int i = 0; i < QW; i++) q[r * QW + i] += bq[i];
                for (int i = 0; i < KV * HS; i++) {
                    k[r * KV * HS + i] += bk[i];
                    v[r * KV * HS + i] += bv[i];
                }
            }
        }
        if (c->qk_norm) {   /* Qwen3: each head of q and of k RMS-normalised, then RoPE */
            llama_ref_rmsnorm(q, q, llama_ref_get(m, "h.%d.attn.q_norm.w", l), n * NH, HS,
                              c->norm_eps);
            llama_ref_rmsnorm(k, k, llama_ref_get(m, "h.%d.attn.k_norm.w", l), n * KV, HS,
                              c->norm_eps);
        }
        llama_ref_rope(q, B, T, NH, HS, c->rope_theta, m->rotate_half);
        llama_ref_rope(k, B, T, KV, HS, c->rope_theta, m->rotate_half);
        llama_ref_attention(att, q, k, v, B, T, NH, KV, HS);
        llama_ref_linear(y, att, llama_ref_get(m, "h.%d.attn.wo.w", l), n, QW, C);
        for (int64_t i = 0; i < n * C; i++) x[i] += y[i];
        llama_ref_rmsnorm(h, x, llama_ref_get(m, "h.%d.ffn_norm.w", l), n, C, c->norm_eps);
        if (!m->ffn || !m->ffn(m->ffn_user, l, h, y, n, C)) {
            llama_ref_linear(u, h, llama_ref_get(m, "h.%d.ffn.w1.w", l), n, C, F);
            llama_ref_linear(gt, h, llama_ref_get(m, "h.%d.ffn.w3.w", l), n, C, F);
            /* silu(u) · g */
            for (int64_t i = 0; i < n * F; i++) u[i] = u[i] / (1.0 + exp(-u[i])) * gt[i];
            llama_ref_linear(y, u, llama_ref_get(m, "h.%d.ffn.w2.w", l), n, F, C);
        }
        for (int64_t i = 0; i < n * C; i++) x[i] += y[i];
    }
    llama_ref_rmsnorm(h, x, llama_ref_get(m, "norm.w", 0), n, C, c->norm_eps);
    const double *head = c->tie_embeddings ? emb : llama_ref_get(m, "lm_head.w", 0);
    llama_ref_linear(y, h, head, n, C, V);   /* logits (B,T,V) */
    double loss = 0;
    for (int64_t r = 0; r < n; r++) {
        if (targets[r] < 0) continue;   /* a skipped row, as mt_cross_entropy's */
        const double *z = y + r * V;
        double mx = z[0], s = 0;
        for (int j = 1; j < V; j++) mx = z[j] > mx ? z[j] : mx;
        for (int j = 0; j < V; j++) s += exp(z[j] - mx);
        loss += -(z[targets[r]] - mx - log(s));
    }
    free(x); free(h); free(q); free(k); free(v); free(att); free(u); free(gt); free(y);
    return loss * scale;
}

/* The reference of a compiled graph: cfg, and a double copy of each of its
 * parameters (the caller frees it with llama_ref_free). */
static inline void llama_ref_from_graph(llama_ref *m, mt_graph *g, const mt_llama_config *cfg) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->cfg.ffn_dim = mt_llama_ffn_dim(cfg);
    for (int i = 0; i < mt_graph_n_params(g) && m->n < LLAMA_REF_MAX_PARAMS; i++) {
        mt_tensor *t = mt_graph_param_at(g, i);
        llama_ref_param *p = &m->p[m->n++];
        snprintf(p->name, sizeof p->name, "%s", mt_tensor_name(t));
        p->n = mt_tensor_numel(t);
        p->d = malloc((size_t)p->n * sizeof *p->d);
        const float *src = mt_tensor_f32(t);
        for (int64_t j = 0; j < p->n; j++) p->d[j] = src[j];
    }
}

static void llama_ref_free(llama_ref *m) {
    for (int i = 0; i < m->n; i++) free(m->p[i].d);
    m->n = 0;
}

#endif /* MT_TEST_LLAMA_REF_H */
