/*
 * test_flash_attention.c — the flash attention kernels (ops/attention.c)
 * against a float64 reference that holds each row's whole softmax (the
 * textbook formulas, no tiles, no log-sum-exp merging), and against central
 * finite differences of that reference on small cases.
 *
 * Covered: T = 1, 2, 63, 64, 65 (one query tile, its edge, the next), 1000,
 * 1030 and 1100 (the kv heads packed) and 4096 (many tiles; few heads and
 * small HS, so that the reference stays fast under ASan); causal and full;
 * without and with document ids (contiguous packed documents, one-token
 * documents, and interleaved ids, which no tile skip may get wrong); MHA,
 * GQA (NH = 8, KV = 2) and MQA (KV = 1); the GPT's packed qkv layout and
 * the LLaMA family's separate q, k, v. Then: two threads running halves of
 * the pairs (forward) and of the kv groups (backward) at once give the
 * one-thread results bit for bit; and a compiled graph's memory grows
 * linearly with T (its aux is the (B,NH,T) log-sum-exp, not a (T,T)
 * matrix).
 */
#include "harness.h"
#include "meshtrain.h"
#include "ops/kernels.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- inputs ---------------------------------------------------------------- */

/* uniform in [-1, 1): the library's counter-based generator, one stream a
 * case (each case runs in its own process) */
static uint64_t rng_index;
static double rnd(void) { return 2.0 * (double)mt_rng_uniform(41, 0, rng_index++) - 1.0; }

static void *xalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    MT_CHECK(p != NULL, "out of memory for %zu bytes", bytes);
    return p;
}

/* How the documents of a case are laid out. */
typedef enum { DOC_NONE, DOC_PACKED, DOC_SINGLETONS, DOC_INTERLEAVED } doc_kind;

/* One case: shapes, layout and masks. */
typedef struct {
    int64_t  B, T, NH, KV, HS;
    bool     packed;             /* the GPT's qkv (B,T,3C), KV = NH */
    bool     full;               /* no causal mask */
    doc_kind docs;
} fcase;

/* The case's operands in float (what the kernel reads) and double (what
 * the reference reads): one buffer for q, k, v (the packed qkv (B,T,3C), or
 * q (B,T,NH·HS), k and v (B,T,KV·HS) one after the other), dout (B,T,NH·HS)
 * and the document ids (B,T). */
typedef struct {
    fcase          c;
    mt_attn_layout L;
    int64_t        n_in, n_out, koff, voff;   /* floats; k's and v's offsets in in */
    float         *in, *dout;
    double        *din, *ddout;
    int32_t       *doc;
} fdata;

static fdata make_data(fcase c, double scale) {
    fdata d = {.c = c};
    const int64_t C = c.NH * c.HS, Ck = c.KV * c.HS, BT = c.B * c.T;
    if (c.packed) {
        d.L = (mt_attn_layout){.ldq = 3 * C, .ldk = 3 * C, .ldv = 3 * C};
        d.n_in = BT * 3 * C, d.koff = C, d.voff = 2 * C;
    } else {
        d.L = (mt_attn_layout){.ldq = C, .ldk = Ck, .ldv = Ck};
        d.n_in = BT * (C + 2 * Ck), d.koff = BT * C, d.voff = BT * (C + Ck);
    }
    d.L.B = c.B, d.L.T = c.T, d.L.NH = c.NH, d.L.KV = c.KV, d.L.HS = c.HS;
    d.L.G = c.NH / c.KV, d.L.ldo = C, d.L.full = c.full;
    d.n_out = BT * C;
    d.in = xalloc((size_t)d.n_in * sizeof *d.in);
    d.din = xalloc((size_t)d.n_in * sizeof *d.din);
    d.dout = xalloc((size_t)d.n_out * sizeof *d.dout);
    d.ddout = xalloc((size_t)d.n_out * sizeof *d.ddout);
    for (int64_t i = 0; i < d.n_in; i++) d.din[i] = d.in[i] = (float)(scale * rnd());
    for (int64_t i = 0; i < d.n_out; i++) d.ddout[i] = d.dout[i] = (float)rnd();
    d.doc = NULL;
    if (c.docs != DOC_NONE) {
        d.doc = xalloc((size_t)BT * sizeof *d.doc);
        for (int64_t b = 0; b < c.B; b++) {
            int32_t id = 0;
            int64_t left = 1;
            for (int64_t t = 0; t < c.T; t++) {
                int32_t *x = &d.doc[b * c.T + t];
                if (c.docs == DOC_SINGLETONS) *x = (int32_t)t;
                else if (c.docs == DOC_INTERLEAVED) *x = (int32_t)((t * 7 + b) % 3);
                else {   /* lengths 1 .. T/3 + 1, starting anywhere in a tile */
                    if (--left == 0) {
                        id++;
                        left = 1 + (int64_t)((rnd() + 1.0) * 0.5 * (double)(c.T / 3 + 1));
                    }
                    *x = id;
                }
            }
        }
        d.L.doc = d.doc;
    }
    return d;
}

static void free_data(fdata *d) {
    free(d->in); free(d->din); free(d->dout); free(d->ddout); free(d->doc);
}

/* ---- the float64 reference --------------------------------------------------- */

/* Whether query t of batch b sees key u. */
static bool sees(const fdata *d, int64_t b, int64_t t, int64_t u) {
    if (!d->c.full && u > t) return false;
    return !d->doc || d->doc[b * d->c.T + u] == d->doc[b * d->c.T + t];
}

/* out (B,T,NH·HS), lse (B,NH,T) and, when grad is not NULL, the gradient
 * (the in buffer's layout) of Σ dout·out, from x (the in buffer) in double:
 * per row the whole softmax p, then dv += p dO, dp = dO·v, ds = p (dp −
 * Σ p dp), dq += ds k / √HS, dk += ds q / √HS. */
static void reference(const fdata *d, const double *x, const double *dout, double *out,
                      double *lse, double *grad) {
    const fcase *c = &d->c;
    const int64_t T = c->T, HS = c->HS, G = c->NH / c->KV;
    const double scale = 1.0 / sqrt((double)HS);
    double *p = xalloc((size_t)T * sizeof *p), *dp = xalloc((size_t)T * sizeof *dp);
    if (grad) memset(grad, 0, (size_t)d->n_in * sizeof *grad);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->NH; h++)
            for (int64_t t = 0; t < T; t++) {
                const int64_t j = h / G, qi = (b * T + t) * d->L.ldq + h * HS;
                const int64_t oi = (b * T + t) * d->L.ldo + h * HS;
                double mx = -INFINITY, sum = 0.0;
                for (int64_t u = 0; u < T; u++) {
                    if (!sees(d, b, t, u)) continue;
                    const double *k = x + d->koff + (b * T + u) * d->L.ldk + j * HS;
                    double s = 0.0;
                    for (int64_t i = 0; i < HS; i++) s += x[qi + i] * k[i];
                    p[u] = s * scale;
                    mx = p[u] > mx ? p[u] : mx;
                }
                for (int64_t u = 0; u < T; u++)
                    if (sees(d, b, t, u)) sum += (p[u] = exp(p[u] - mx));
                if (lse) lse[(b * c->NH + h) * T + t] = mx + log(sum);
                for (int64_t i = 0; i < HS; i++) out[oi + i] = 0.0;
                for (int64_t u = 0; u < T; u++) {
                    if (!sees(d, b, t, u)) continue;
                    p[u] /= sum;
                    const double *v = x + d->voff + (b * T + u) * d->L.ldv + j * HS;
                    for (int64_t i = 0; i < HS; i++) out[oi + i] += p[u] * v[i];
                }
                if (!grad) continue;
                const double *dO = dout + oi;
                double D = 0.0;
                for (int64_t u = 0; u < T; u++) {
                    if (!sees(d, b, t, u)) continue;
                    const int64_t vi = d->voff + (b * T + u) * d->L.ldv + j * HS;
                    dp[u] = 0.0;
                    for (int64_t i = 0; i < HS; i++) {
                        dp[u] += dO[i] * x[vi + i];
                        grad[vi + i] += p[u] * dO[i];
                    }
                    D += p[u] * dp[u];
                }
                for (int64_t u = 0; u < T; u++) {
                    if (!sees(d, b, t, u)) continue;
                    const int64_t ki = d->koff + (b * T + u) * d->L.ldk + j * HS;
                    const double ds = p[u] * (dp[u] - D) * scale;
                    for (int64_t i = 0; i < HS; i++) {
                        grad[qi + i] += ds * x[ki + i];
                        grad[ki + i] += ds * x[qi + i];
                    }
                }
            }
    free(p);
    free(dp);
}

/* ---- the kernels --------------------------------------------------------------- */

static void run_fwd(const fdata *d, float *out, float *lse, int64_t bh0, int64_t bh1) {
    float *scratch = xalloc(mt_kernel_attention_scratch(d->c.T, d->c.HS) * sizeof(float));
    mt_kernel_attention_fwd(out, lse, d->in, d->in + d->koff, d->in + d->voff, &d->L, scratch,
                            bh0, bh1);
    free(scratch);
}

/* grad (the in buffer's layout) (+)= as acc says */
static void run_bwd(const fdata *d, const float *out, const float *lse, float *grad, bool acc,
                    int64_t g0, int64_t g1) {
    float *scratch = xalloc(mt_kernel_attention_scratch(d->c.T, d->c.HS) * sizeof(float));
    mt_attn_grads g = {grad, grad + d->koff, grad + d->voff, acc, acc};
    mt_kernel_attention_bwd(&g, d->dout, d->in, d->in + d->koff, d->in + d->voff, out, lse,
                            &d->L, scratch, g0, g1);
    free(scratch);
}

static const char *doc_name(doc_kind k) {
    static const char *const n[] = {"none", "packed", "singletons", "interleaved"};
    return n[k];
}

/* The kernels' out, lse and gradients against the reference's, and the
 * gradient added into a base (acc) against base + the written one. */
static void check_case(fcase c, double tol) {
    fdata d = make_data(c, 1.5);
    const int64_t n_lse = c.B * c.NH * c.T;
    char what[160];
    snprintf(what, sizeof what, "T=%lld NH=%lld KV=%lld HS=%lld %s %s docs=%s", (long long)c.T,
             (long long)c.NH, (long long)c.KV, (long long)c.HS, c.packed ? "packed" : "separate",
             c.full ? "full" : "causal", doc_name(c.docs));
    float *out = xalloc((size_t)d.n_out * sizeof *out), *lse = xalloc((size_t)n_lse * sizeof *lse);
    for (int64_t i = 0; i < n_lse; i++) lse[i] = NAN;
    run_fwd(&d, out, lse, 0, c.B * c.NH);
    double *wout = xalloc((size_t)d.n_out * sizeof *wout), *wlse = xalloc((size_t)n_lse * sizeof *wlse);
    double *wgrad = xalloc((size_t)d.n_in * sizeof *wgrad);
    reference(&d, d.din, d.ddout, wout, wlse, wgrad);
    for (int64_t i = 0; i < d.n_out; i++)
        MT_CHECK_CLOSE(out[i], wout[i], tol, "%s: out[%lld]", what, (long long)i);
    for (int64_t i = 0; i < n_lse; i++)
        MT_CHECK_CLOSE(lse[i], wlse[i], tol, "%s: lse[%lld]", what, (long long)i);

    float *grad = xalloc((size_t)d.n_in * sizeof *grad);
    for (int64_t i = 0; i < d.n_in; i++) grad[i] = NAN;   /* every element must be written */
    run_bwd(&d, out, lse, grad, false, 0, c.B * c.KV);
    for (int64_t i = 0; i < d.n_in; i++)
        MT_CHECK_CLOSE(grad[i], wgrad[i], tol, "%s: gradient of in[%lld]", what, (long long)i);
    float *base = xalloc((size_t)d.n_in * sizeof *base), *acc = xalloc((size_t)d.n_in * sizeof *acc);
    for (int64_t i = 0; i < d.n_in; i++) acc[i] = base[i] = (float)rnd();
    run_bwd(&d, out, lse, acc, true, 0, c.B * c.KV);
    /* dk and dv add each query tile's share into the base (T/64 roundings
     * of about 2^-24 each, against one for base + grad): at T = 4096 the
     * generic level's products drift 1.1e-6 from the sum, past 1e-6 */
    const double acc_tol = fmax(1e-6, (double)c.T / 64 * 0x1p-24);
    for (int64_t i = 0; i < d.n_in; i++)
        MT_CHECK_CLOSE(acc[i], (double)base[i] + (double)grad[i], acc_tol, "%s: acc gradient "
                       "of in[%lld]", what, (long long)i);
    free(out); free(lse); free(wout); free(wlse); free(wgrad); free(grad); free(base); free(acc);
    free_data(&d);
}

/* ---- forward and backward against the reference ------------------------------- */

MT_TEST(gpt_packed_lengths_around_the_tiles) {
    const int64_t Ts[] = {1, 2, 63, 64, 65, 130};
    for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++)
        for (int docs = 0; docs < 2; docs++)
            check_case((fcase){.B = 2, .T = Ts[i], .NH = 2, .KV = 2, .HS = 8, .packed = true,
                               .docs = docs ? DOC_PACKED : DOC_NONE}, 1e-5);
}

MT_TEST(llama_gqa_and_mqa_lengths_around_the_tiles) {
    const int64_t Ts[] = {1, 2, 63, 64, 65};
    const int64_t KVs[] = {8, 2, 1};
    for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++)
        for (size_t k = 0; k < 3; k++)
            for (int docs = 0; docs < 2; docs++)
                check_case((fcase){.B = 1, .T = Ts[i], .NH = 8, .KV = KVs[k], .HS = 4,
                                   .docs = docs ? DOC_PACKED : DOC_NONE}, 1e-5);
}

MT_TEST(full_attention_and_every_document_layout) {
    for (int full = 0; full < 2; full++)
        for (int docs = 0; docs < 4; docs++) {
            check_case((fcase){.B = 2, .T = 150, .NH = 4, .KV = 2, .HS = 8, .full = full,
                               .docs = (doc_kind)docs}, 1e-5);
            check_case((fcase){.B = 1, .T = 70, .NH = 2, .KV = 2, .HS = 8, .packed = true,
                               .full = full, .docs = (doc_kind)docs}, 1e-5);
        }
}

/* a real head size (64: the products' full width) at T = 1000 */
MT_TEST(t1000_gqa_and_packed) {
    MT_TEST_SKIP_IF(MT_TEST_SANITIZED, "the many-tile cases are the release build's (their "
                    "float64 references take most of the sanitizers' 17 s); the tiles' code "
                    "runs under them at T = 150 and 70");
    check_case((fcase){.B = 1, .T = 1000, .NH = 2, .KV = 1, .HS = 64}, 2e-5);
    check_case((fcase){.B = 1, .T = 1000, .NH = 2, .KV = 2, .HS = 16, .packed = true,
                       .docs = DOC_PACKED}, 2e-5);
}

/* a head size past the kernel's packed chunk (KC = 128 floats: the scores
 * summed over two chunks, the row operands read where they lie) */
MT_TEST(head_size_past_the_packed_chunk) {
    check_case((fcase){.B = 1, .T = 150, .NH = 2, .KV = 1, .HS = 136}, 2e-5);
    check_case((fcase){.B = 1, .T = 70, .NH = 2, .KV = 2, .HS = 130, .packed = true,
                       .docs = DOC_PACKED}, 2e-5);
}

MT_TEST(t4096_mqa_and_packed_documents) {
    MT_TEST_SKIP_IF(MT_TEST_SANITIZED, "the release build's (above)");
    check_case((fcase){.B = 1, .T = 4096, .NH = 2, .KV = 1, .HS = 4}, 5e-5);
    check_case((fcase){.B = 1, .T = 4096, .NH = 1, .KV = 1, .HS = 4, .packed = true,
                       .docs = DOC_PACKED}, 5e-5);
}

/* Scores in the hundreds: the running max keeps every exp finite. */
MT_TEST(large_scores_are_stable) {
    fcase c = {.B = 1, .T = 200, .NH = 2, .KV = 1, .HS = 16, .docs = DOC_PACKED};
    fdata d = make_data(c, 6.0);
    float *out = xalloc((size_t)d.n_out * sizeof *out), *lse = xalloc((size_t)(c.NH * c.T) * sizeof *lse);
    double *wout = xalloc((size_t)d.n_out * sizeof *wout);
    run_fwd(&d, out, lse, 0, c.NH);
    reference(&d, d.din, d.ddout, wout, NULL, NULL);
    for (int64_t i = 0; i < d.n_out; i++)
        MT_CHECK_CLOSE(out[i], wout[i], 1e-4, "out[%lld] with large scores", (long long)i);
    free(out); free(lse); free(wout);
    free_data(&d);
}

/* ---- finite differences ---------------------------------------------------------- */

typedef struct { const fdata *d; double *x, *out; } fd_ctx;

static double fd_loss(fd_ctx *f) {
    reference(f->d, f->x, NULL, f->out, NULL, NULL);
    double L = 0.0;
    for (int64_t i = 0; i < f->d->n_out; i++) L += f->d->ddout[i] * f->out[i];
    return L;
}

/* The kernel's gradient against central differences of the reference's
 * forward alone (no backward formula involved). */
static void check_fd(fcase c) {
    fdata d = make_data(c, 1.5);
    float *out = xalloc((size_t)d.n_out * sizeof *out), *lse = xalloc((size_t)(c.B * c.NH * c.T) * sizeof *lse);
    float *grad = xalloc((size_t)d.n_in * sizeof *grad);
    run_fwd(&d, out, lse, 0, c.B * c.NH);
    run_bwd(&d, out, lse, grad, false, 0, c.B * c.KV);
    fd_ctx f = {&d, d.din, xalloc((size_t)d.n_out * sizeof(double))};
    const double eps = 1e-5;
    for (int64_t i = 0; i < d.n_in; i++) {
        const double save = f.x[i];
        f.x[i] = save + eps;
        const double lp = fd_loss(&f);
        f.x[i] = save - eps;
        const double lm = fd_loss(&f);
        f.x[i] = save;
        MT_CHECK_CLOSE(grad[i], (lp - lm) / (2 * eps), 2e-5, "T=%lld KV=%lld docs=%s: "
                       "d loss / d in[%lld]", (long long)c.T, (long long)c.KV, doc_name(c.docs),
                       (long long)i);
    }
    free(out); free(lse); free(grad); free(f.out);
    free_data(&d);
}

MT_TEST(gradients_match_finite_differences) {
    check_fd((fcase){.B = 2, .T = 9, .NH = 2, .KV = 2, .HS = 3, .packed = true});
    check_fd((fcase){.B = 1, .T = 11, .NH = 4, .KV = 2, .HS = 3, .docs = DOC_PACKED});
    check_fd((fcase){.B = 1, .T = 10, .NH = 3, .KV = 1, .HS = 2, .docs = DOC_INTERLEAVED});
    check_fd((fcase){.B = 1, .T = 8, .NH = 2, .KV = 1, .HS = 3, .full = true,
                     .docs = DOC_PACKED});
}

/* ---- threads -------------------------------------------------------------------- */

typedef struct {
    const fdata *d;
    float *out, *lse, *grad;
    int64_t r0, r1;
    bool bwd;
} half_job;

static void *run_half(void *arg) {
    half_job *j = arg;
    if (j->bwd) run_bwd(j->d, j->out, j->lse, j->grad, false, j->r0, j->r1);
    else run_fwd(j->d, j->out, j->lse, j->r0, j->r1);
    return NULL;
}

/* Two threads at once on [0, s) and [s, n), for the forward's pairs and
 * the backward's kv groups, against one call over [0, n): bit for bit. */
static void check_threads(fcase c, int64_t split_pairs, int64_t split_groups) {
    fdata d = make_data(c, 1.5);
    const int64_t n_lse = c.B * c.NH * c.T;
    float *o1 = xalloc((size_t)d.n_out * sizeof *o1), *o2 = xalloc((size_t)d.n_out * sizeof *o2);
    float *l1 = xalloc((size_t)n_lse * sizeof *l1), *l2 = xalloc((size_t)n_lse * sizeof *l2);
    float *g1 = xalloc((size_t)d.n_in * sizeof *g1), *g2 = xalloc((size_t)d.n_in * sizeof *g2);
    memset(g1, 0, (size_t)d.n_in * sizeof *g1);
    memset(g2, 0, (size_t)d.n_in * sizeof *g2);
    run_fwd(&d, o1, l1, 0, c.B * c.NH);
    run_bwd(&d, o1, l1, g1, false, 0, c.B * c.KV);
    for (int bwd = 0; bwd < 2; bwd++) {
        const int64_t n = bwd ? c.B * c.KV : c.B * c.NH, s = bwd ? split_groups : split_pairs;
        half_job j[2] = {{&d, bwd ? o1 : o2, bwd ? l1 : l2, g2, 0, s, bwd},
                         {&d, bwd ? o1 : o2, bwd ? l1 : l2, g2, s, n, bwd}};
        pthread_t th[2];
        for (int k = 0; k < 2; k++)
            MT_CHECK(pthread_create(&th[k], NULL, run_half, &j[k]) == 0, "pthread_create");
        for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    }
    MT_CHECK(memcmp(o1, o2, (size_t)d.n_out * sizeof *o1) == 0, "two threads change out");
    MT_CHECK(memcmp(l1, l2, (size_t)n_lse * sizeof *l1) == 0, "two threads change lse");
    MT_CHECK(memcmp(g1, g2, (size_t)d.n_in * sizeof *g1) == 0, "two threads change the "
             "gradients (KV=%lld)", (long long)c.KV);
    free(o1); free(o2); free(l1); free(l2); free(g1); free(g2);
    free_data(&d);
}

MT_TEST(two_threads_give_one_threads_bits) {
    check_threads((fcase){.B = 2, .T = 200, .NH = 8, .KV = 2, .HS = 8, .docs = DOC_PACKED}, 5, 1);
    check_threads((fcase){.B = 3, .T = 130, .NH = 8, .KV = 1, .HS = 8}, 13, 2);
    check_threads((fcase){.B = 2, .T = 100, .NH = 4, .KV = 4, .HS = 8, .packed = true}, 3, 5);
}

/* From 1024 keys on, a kv head whose rows are not HS apart (a GQA's KV·HS,
 * the GPT's 3C) is copied to contiguous rows, with its dk and dv
 * (attention.c's PACK_MIN_KEYS): GQA with documents and the GPT's qkv past
 * that, a partial last tile each; and two threads' halves give one's bits.
 * Small heads, so that the float64 reference stays fast under ASan. */
MT_TEST(kv_heads_packed_past_1024_keys) {
    check_case((fcase){.B = 1, .T = 1100, .NH = 4, .KV = 2, .HS = 4, .docs = DOC_PACKED}, 5e-5);
    check_case((fcase){.B = 2, .T = 1030, .NH = 2, .KV = 2, .HS = 4, .packed = true}, 5e-5);
    check_threads((fcase){.B = 1, .T = 1100, .NH = 4, .KV = 2, .HS = 4}, 1, 1);
}

/* ---- memory linear in T --------------------------------------------------------- */

/* The activation arena of a compiled GPT attention (qkv a parameter, the
 * loss Σ out) at T: a (B,NH,T,T) aux would make it grow 4x from T to 2T. */
static size_t arena_at(int64_t T) {
    const int64_t B = 1, C = 32, NH = 4;
    mt_graph *g = mt_graph_create();
    mt_tensor *qkv = mt_param(g, "qkv", 3, (int64_t[]){B, T, 3 * C},
                              (mt_init){MT_INIT_NORMAL, 1.0f});
    mt_tensor *loss = mt_sum(g, mt_attention(g, qkv, (int)NH));
    MT_CHECK_OK(mt_graph_compile(g, loss, NULL));
    size_t bytes = mt_graph_get_stats(g).arena_bytes;
    mt_graph_free(g);
    return bytes;
}

MT_TEST(memory_is_linear_in_t) {
    const size_t a = arena_at(2048), b = arena_at(4096);
    printf("arena %zu bytes at T = 2048, %zu at T = 4096 (%.2fx)\n", a, b, (double)b / (double)a);
    MT_CHECK((double)b <= 2.2 * (double)a, "the arena grows %.2fx from T = 2048 to 4096 (%zu to "
             "%zu bytes): more than linear", (double)b / (double)a, a, b);
    /* one (T,T) matrix of one head alone would be 64 MiB at T = 4096 */
    MT_CHECK(b < (size_t)4096 * 4096 * 4 / 8, "arena %zu bytes at T = 4096", b);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
