/*
 * llama_desc.c — a LLaMA checkpoint's model description (train_impl.h's
 * mt__llama_describe, mt__llama_parse): the settings line a meshtrain
 * checkpoint holds, written and read back, each optional part (the head
 * size, RoPE's scaling, a mixture of experts and its capacity and gates,
 * Qwen's attention) only where it differs from a plain Llama's, so that
 * every older checkpoint reads as it did.
 */
#include "train/train_impl.h"

#include <stdio.h>
#include <string.h>

/* True when m's head size is not C/NH: the description then says hd=. */
static bool own_head_dim(const mt_llama_config *m) {
    return m->n_heads > 0 &&
           (m->dim % m->n_heads != 0 || mt_llama_head_dim(m) != m->dim / m->n_heads);
}

/* A checkpoint's model: " hd=HS" at the end only where HS is not C/NH,
 * then " rope=KIND ..." only where RoPE is scaled, with the settings its
 * kind reads (%.9g: a float's digits, read back exactly), so that every
 * model without them (and each checkpoint written before --head-dim or
 * --rope-scaling) reads as it always has. */
void mt__llama_describe(const mt_llama_config *config, char *buf, size_t n) {
    const mt_llama_config m = *config;
    const mt_rope_scaling *r = &m.rope_scaling;
    int at = snprintf(buf, n, "llama L=%d C=%d NH=%d KV=%d F=%d maxT=%d V=%d theta=%g eps=%g "
                      "tie=%d", m.n_layers, m.dim, m.n_heads, m.n_kv_heads, m.ffn_dim,
                      m.max_seq, m.vocab, (double)m.rope_theta, (double)m.norm_eps,
                      m.tie_embeddings);
    if (own_head_dim(&m) && at >= 0 && (size_t)at < n)
        at += snprintf(buf + at, n - (size_t)at, " hd=%d", m.head_dim);
    if (r->kind == MT_ROPE_SCALING_LLAMA3 && at >= 0 && (size_t)at < n)
        at += snprintf(buf + at, n - (size_t)at, " rope=llama3 factor=%.9g low=%.9g high=%.9g "
                       "orig=%d",
                 (double)r->factor, (double)r->low_freq_factor, (double)r->high_freq_factor,
                 r->original_context);
    if (r->kind == MT_ROPE_SCALING_YARN && at >= 0 && (size_t)at < n)
        at += snprintf(buf + at, n - (size_t)at, " rope=yarn factor=%.9g orig=%d "
                       "beta_fast=%.9g beta_slow=%.9g attn=%.9g", (double)r->factor,
                       r->original_context, (double)r->beta_fast, (double)r->beta_slow,
                       (double)r->attn_factor);
    const mt_llama_moe *e = &m.moe;
    if (e->experts > 0 && at >= 0 && (size_t)at < n)
        at += snprintf(buf + at, n - (size_t)at, " moe=%d,%d,%d,%d,%d,%d,%d,%.9g,%.9g,%.9g",
                       e->experts, e->top_k, e->ffn_dim, e->shared, e->first_dense, e->every,
                       e->score, (double)e->route_scale, (double)e->aux_alpha,
                       (double)e->z_beta);
    /* the bias's γ, an 11th number where there is a bias (a model without
     * one reads as before) */
    if (e->experts > 0 && e->bias_update > 0.0f && at >= 0 && (size_t)at < n)
        at += snprintf(buf + at, n - (size_t)at, ",%.9g", (double)e->bias_update);
    /* a capacity, where there is one (a dropless model reads as before) */
    if (e->experts > 0 && e->capacity > 0.0f && at >= 0 && (size_t)at < n)
        at += snprintf(buf + at, n - (size_t)at, " capacity=%.9g,%s", (double)e->capacity,
                       e->drop ? "gate" : "position");
    if (e->experts > 0 && e->renorm_off && at >= 0 && (size_t)at < n)   /* only when off */
        at += snprintf(buf + at, n - (size_t)at, " renorm=off");
    /* Qwen's attention, only when on: a Llama's description reads as before */
    if (m.qkv_bias && at >= 0 && (size_t)at < n)
        at += snprintf(buf + at, n - (size_t)at, " qkv_bias=1");
    if (m.qk_norm && at >= 0 && (size_t)at < n)
        snprintf(buf + at, n - (size_t)at, " qk_norm=1");
}

/* The " qkv_bias=1" and " qk_norm=1" tails of a description into m; the
 * characters read (0 for neither). */
static int parse_qwen(const char *d, mt_llama_config *m) {
    int at = 0;
    m->qkv_bias = m->qk_norm = 0;
    if (strncmp(d, " qkv_bias=1", 11) == 0) m->qkv_bias = 1, at += 11;
    if (strncmp(d + at, " qk_norm=1", 10) == 0) m->qk_norm = 1, at += 10;
    return at;
}

/* The " moe=..." tail of a description (llama_describe's) into m's
 * mixture of experts; the characters read, 0 for none, -1 for a tail that
 * is not one. */
static int parse_moe(const char *d, mt_llama_config *m) {
    mt_llama_moe *e = &m->moe;
    double rs = 0, a = 0, b = 0;
    int end = 0;
    if (strncmp(d, " moe=", 5) != 0) return 0;
    if (sscanf(d, " moe=%d,%d,%d,%d,%d,%d,%d,%lg,%lg,%lg%n", &e->experts, &e->top_k,
               &e->ffn_dim, &e->shared, &e->first_dense, &e->every, &e->score, &rs, &a, &b,
               &end) != 10)
        return -1;
    e->route_scale = (float)rs, e->aux_alpha = (float)a, e->z_beta = (float)b;
    double g = 0;
    int more = 0;
    if (d[end] == ',' && sscanf(d + end, ",%lg%n", &g, &more) == 1) end += more;
    e->bias_update = (float)g;
    double cf = 0;   /* a capacity: " capacity=cf,position|gate" */
    char drop[16] = "";
    more = 0, e->capacity = 0.0f, e->drop = 0;
    if (strncmp(d + end, " capacity=", 10) == 0) {
        if (sscanf(d + end, " capacity=%lg,%15[a-z]%n", &cf, drop, &more) != 2 || !more ||
            (strcmp(drop, "position") != 0 && strcmp(drop, "gate") != 0))
            return -1;
        e->capacity = (float)cf, e->drop = strcmp(drop, "gate") == 0, end += more;
    }
    e->renorm_off = strncmp(d + end, " renorm=off", 11) == 0;
    return end + 11 * e->renorm_off;
}

/* The " rope=..." tail of a description (llama_describe's) into m's
 * scaling; the number of characters read, 0 for none, -1 for a tail that
 * is not one. */
static int parse_rope(const char *d, mt_llama_config *m) {
    mt_rope_scaling *r = &m->rope_scaling;
    double f = 0, a = 0, b = 0, e = 0;
    int end = 0;
    if (strncmp(d, " rope=", 6) != 0) return 0;
    if (sscanf(d, " rope=llama3 factor=%lg low=%lg high=%lg orig=%d%n", &f, &a, &b,
               &r->original_context, &end) == 4) {
        r->kind = MT_ROPE_SCALING_LLAMA3;
        r->low_freq_factor = (float)a;
        r->high_freq_factor = (float)b;
    } else if (sscanf(d, " rope=yarn factor=%lg orig=%d beta_fast=%lg beta_slow=%lg attn=%lg%n",
                      &f, &r->original_context, &a, &b, &e, &end) == 5) {
        r->kind = MT_ROPE_SCALING_YARN;
        r->beta_fast = (float)a;
        r->beta_slow = (float)b;
        r->attn_factor = (float)e;
    } else {
        return -1;
    }
    r->factor = (float)f;
    return end;
}

/* The inverse of describe, for mt_sample: theta and eps come back with the
 * description's %g digits (exact for 10000, 500000 and 1e-5); without hd=
 * the head size is C/NH, without rope= RoPE is not scaled, without
 * qkv_bias= and qk_norm= the attention is Llama's. */
mt_status mt__llama_parse(const char *desc, void *mc, int *maxT, int *V) {
    mt_llama_config *m = mc;
    double theta = 0, eps = 0;
    int end = 0, hd_end = 0;
    m->head_dim = 0;
    m->rope_scaling = (mt_rope_scaling){0};
    if (sscanf(desc, "llama L=%d C=%d NH=%d KV=%d F=%d maxT=%d V=%d theta=%lg eps=%lg tie=%d%n",
               &m->n_layers, &m->dim, &m->n_heads, &m->n_kv_heads, &m->ffn_dim, &m->max_seq,
               &m->vocab, &theta, &eps, &m->tie_embeddings, &end) != 10)
        return mt_fail(MT_EINVAL, "'%s' is not a LLaMA model's description", desc);
    if (strncmp(desc + end, " hd=", 4) == 0 && sscanf(desc + end, " hd=%d%n", &m->head_dim,
                                                      &hd_end) == 1)
        end += hd_end;
    m->moe = (mt_llama_moe){0};
    int rope_end = parse_rope(desc + end, m);
    int moe_end = rope_end < 0 ? -1 : parse_moe(desc + end + rope_end, m);
    if (moe_end >= 0) moe_end += parse_qwen(desc + end + rope_end + moe_end, m);
    if (moe_end < 0 || desc[end + rope_end + moe_end] != '\0')
        return mt_fail(MT_EINVAL, "'%s' is not a LLaMA model's description", desc);
    m->rope_theta = (float)theta;
    m->norm_eps = (float)eps;
    *maxT = m->max_seq;
    *V = m->vocab;
    return mt_llama_config_check(m);
}
