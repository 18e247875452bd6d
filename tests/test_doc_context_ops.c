/*
 * test_doc_context_ops.c — attention within documents on a sequence split
 * over a context axis, at the op level (issue 41, item 4 with item 3's
 * lowerings; ../shared/CONTEXT_PARALLEL.md §4, §5): P devices of a threads
 * mesh each hold the head-tail rows (mt_headtail_pos) of one batch of
 * packed sequences, q, k, v and the rows' document ids, and run
 *  - the ring (mt__attention_ring_docs: the ids rotate with the k, v
 *    block), and
 *  - the all-gather form (mt__attention_split / _gqa_split on k, v and the
 *    ids all-gathered over the axis, in device order),
 * forward and backward. Each device's output rows and dq, dk, dv rows must
 * equal a float64 reference written here from the definition (no flash
 * kernel): row i of document d attends the keys j <= i of document d,
 * softmax(q·k/√HS)·v, and its gradient for the loss Σ out ⊙ W (dO = W, a
 * fixed random cotangent): dv_j = Σ_i p_ij dO_i, ds_ij = p_ij (dO_i·v_j −
 * D_i) with D_i = Σ_j p_ij dO_i·v_j, dq_i = Σ_j ds_ij k_j /√HS, dk_j =
 * Σ_i ds_ij q_i /√HS; within 2e-6 of the largest magnitude (f32 sums).
 *
 * The documents are cut at random places (a fixed hash), some shorter than
 * a chunk, some longer than a device's rows, so ring blocks have rows that
 * see none of the block's keys (their merge is skipped) and the all-gather
 * form's key tiles straddle ids in device order. Cases: the GPT's packed
 * qkv, GQA and MQA, P = 2, 3 and 4, one key tile and several (local rows
 * 384). And the ring's listing bytes: each of the P-1 sends carries the id
 * of a row with its k, v (2·KV·HS + 1 words a row), the backward's the ids
 * once and the k, v and dK, dV (4·KV·HS + 1), worked out here.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"
#include "graph/graph_impl.h"   /* mt__attention_ring_docs, mt__attention_split */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define TRY_DEV(call)                                                                      \
    do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

typedef enum { RING, GATHER } lowering;

typedef struct {
    const char *mesh;
    lowering    how;
    int         P, B, S, NH, KV, HS;
    bool        packed;   /* the GPT's qkv (KV = NH) */
    int         cut;      /* a document ends after a token with probability 1/cut */
} spec;

/* A fixed hash of (salt, i) to [0, 1). */
static double unit(int salt, int64_t i) {
    uint64_t h = (uint64_t)(i + 1) * 0xD1B54A32D192ED03ull + (uint64_t)salt * 0x9E3779B97F4A7C15ull;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return (double)(h >> 11) / 9007199254740992.0;
}

/* The whole batch: q (B,S,NH·HS), k, v (B,S,KV·HS), W (B,S,NH·HS), the ids
 * (B,S), and the float64 reference's out, dq, dk, dv. */
typedef struct {
    int64_t  nq, nk;
    float   *q, *k, *v, *w;
    int32_t *doc;
    double  *out, *dq, *dk, *dv;
} batch;

static void batch_free(batch *x) {
    free(x->q); free(x->k); free(x->v); free(x->w); free(x->doc);
    free(x->out); free(x->dq); free(x->dk); free(x->dv);
}

/* One (b, h): the reference's forward and backward, by the definition. */
static void reference_head(const spec *sp, batch *x, int64_t b, int64_t h, double *p) {
    const int64_t S = sp->S, HS = sp->HS, C = sp->NH * HS, CK = sp->KV * HS;
    const int64_t j_head = h / (sp->NH / sp->KV);
    const double scale = 1.0 / sqrt((double)HS);
    const int32_t *doc = x->doc + b * S;
#define Q(t) (x->q + (b * S + (t)) * C + h * HS)
#define K(t) (x->k + (b * S + (t)) * CK + j_head * HS)
#define V(t) (x->v + (b * S + (t)) * CK + j_head * HS)
#define W(t) (x->w + (b * S + (t)) * C + h * HS)
    for (int64_t i = 0; i < S; i++) {
        double mx = -INFINITY, sum = 0, D = 0;
        for (int64_t j = 0; j <= i; j++) {
            p[j] = -INFINITY;
            if (doc[j] != doc[i]) continue;
            double s = 0;
            for (int64_t e = 0; e < HS; e++) s += (double)Q(i)[e] * K(j)[e];
            p[j] = s * scale;
            mx = fmax(mx, p[j]);
        }
        for (int64_t j = 0; j <= i; j++) sum += p[j] == -INFINITY ? 0 : exp(p[j] - mx);
        double *o = x->out + (b * S + i) * C + h * HS;
        for (int64_t j = 0; j <= i; j++) {
            p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - mx) / sum;
            for (int64_t e = 0; e < HS; e++) o[e] += p[j] * V(j)[e];
        }
        for (int64_t j = 0; j <= i; j++) {
            double dp = 0;
            for (int64_t e = 0; e < HS; e++) dp += (double)W(i)[e] * V(j)[e];
            D += p[j] * dp;
        }
        for (int64_t j = 0; j <= i; j++) {
            if (p[j] == 0) continue;
            double dp = 0;
            for (int64_t e = 0; e < HS; e++) dp += (double)W(i)[e] * V(j)[e];
            const double ds = p[j] * (dp - D) * scale;
            double *dq = x->dq + (b * S + i) * C + h * HS;
            double *dk = x->dk + (b * S + j) * CK + j_head * HS;
            double *dv = x->dv + (b * S + j) * CK + j_head * HS;
            for (int64_t e = 0; e < HS; e++) {
                dq[e] += ds * K(j)[e];
                dk[e] += ds * Q(i)[e];
                dv[e] += p[j] * W(i)[e];
            }
        }
    }
#undef Q
#undef K
#undef V
#undef W
}

static bool batch_make(const spec *sp, batch *x) {
    const int64_t rows = (int64_t)sp->B * sp->S;
    x->nq = rows * sp->NH * sp->HS;
    x->nk = rows * sp->KV * sp->HS;
    x->q = malloc(x->nq * 4); x->w = malloc(x->nq * 4);
    x->k = malloc(x->nk * 4); x->v = malloc(x->nk * 4);
    x->doc = malloc(rows * 4);
    x->out = calloc(x->nq, 8); x->dq = calloc(x->nq, 8);
    x->dk = calloc(x->nk, 8); x->dv = calloc(x->nk, 8);
    double *p = malloc((size_t)sp->S * 8);
    bool okay = x->q && x->w && x->k && x->v && x->doc && x->out && x->dq && x->dk && x->dv && p;
    for (int64_t i = 0; okay && i < x->nq; i++)
        x->q[i] = (float)(2 * unit(1, i) - 1), x->w[i] = (float)(2 * unit(4, i) - 1);
    for (int64_t i = 0; okay && i < x->nk; i++)
        x->k[i] = (float)(2 * unit(2, i) - 1), x->v[i] = (float)(2 * unit(3, i) - 1);
    for (int64_t b = 0; okay && b < sp->B; b++) {
        int32_t d = 0;   /* a row starts document 0; a cut after t starts the next at t+1 */
        for (int64_t t = 0; t < sp->S; t++) {
            x->doc[b * sp->S + t] = d;
            if (unit(5, b * sp->S + t) * sp->cut < 1.0) d++;
        }
    }
    for (int64_t b = 0; okay && b < sp->B; b++)
        for (int64_t h = 0; h < sp->NH; h++) reference_head(sp, x, b, h, p);
    free(p);
    return okay;
}

/* dst (B,T) rows of ld floats from col = this device's head-tail rows of
 * src (B,S,n) */
static void rows_of(float *dst, int64_t ld, int64_t col, const float *src, int64_t n,
                    const spec *sp, int r) {
    const int64_t T = sp->S / sp->P;
    for (int64_t b = 0; b < sp->B; b++)
        for (int64_t i = 0; i < T; i++)
            memcpy(dst + (b * T + i) * ld + col,
                   src + (b * sp->S + mt_headtail_pos(i, T, sp->P, r)) * n,
                   (size_t)n * sizeof *dst);
}

/* got's rows (n columns from col of ld) against the reference's (B,S,n) */
static mt_status agree(const char *what, const float *got, int64_t ld, int64_t col,
                       const double *want, int64_t n, const spec *sp, int r) {
    const int64_t T = sp->S / sp->P;
    double big = 1e-3;
    for (int64_t i = 0; i < (int64_t)sp->B * sp->S * n; i++) big = fmax(big, fabs(want[i]));
    for (int64_t b = 0; b < sp->B; b++)
        for (int64_t i = 0; i < T; i++) {
            const int64_t pos = mt_headtail_pos(i, T, sp->P, r);
            for (int64_t e = 0; e < n; e++) {
                const double g = got[(b * T + i) * ld + col + e];
                const double w = want[(b * sp->S + pos) * n + e];
                if (!(fabs(g - w) <= 2e-6 * big))
                    return mt_fail(MT_EINTERNAL, "%s: device %d %s [b=%lld, position %lld, %lld] "
                                   "= %.9g, the float64 reference's %.9g (tolerance 2e-6 of %g)",
                                   sp->mesh, r, what, (long long)b, (long long)pos,
                                   (long long)e, g, w, big);
            }
        }
    return MT_OK;
}

/* The ring nodes' bytes on the wire, with the ids riding along. */
static mt_status ring_bytes(mt_graph *g, const spec *sp) {
    const double rows = (double)sp->B * (sp->S / sp->P), kv = 2.0 * sp->KV * sp->HS;
    const double want[2] = {(sp->P - 1) * rows * (kv + 1) * 4, (sp->P - 1) * rows * (2 * kv + 1) * 4};
    int seen = 0;
    for (int i = 0; i < mt_graph_n_nodes(g); i++) {
        mt_node_info info;
        TRY_DEV(mt_graph_node(g, i, &info));
        const int k = strcmp(info.op, "ring_attention") == 0       ? 0
                      : strcmp(info.op, "ring_attention_bwd") == 0 ? 1 : -1;
        if (k < 0) continue;
        if (info.comm_bytes != want[k])
            return mt_fail(MT_EINTERNAL, "%s: %s moves %g bytes, want %g", sp->mesh, info.op,
                           info.comm_bytes, want[k]);
        seen |= 1 << k;
    }
    return seen == 3 ? MT_OK : mt_fail(MT_EINTERNAL, "%s: ring nodes seen %d", sp->mesh, seen);
}

/* The op under test on this device's rows: q (or qkv), k, v and docs. */
static mt_tensor *build(mt_graph *g, const spec *sp, mt_axes ax, int r, mt_tensor **t,
                        mt_tensor *docs) {
    if (sp->how == RING)
        return mt__attention_ring_docs(g, t[0], t[1], t[2], docs, sp->NH, sp->KV,
                                       sp->NH / sp->KV, 0, ax);
    mt_tensor *dg = mt_graph_all_gather(g, docs, ax, 1);   /* (B,S): the keys' ids */
    if (sp->packed)
        return mt__attention_split(g, t[0], mt_graph_all_gather(g, t[0], ax, 1), sp->NH, sp->P,
                                   r, dg);
    return mt__attention_gqa_split(g, t[0], mt_graph_all_gather(g, t[1], ax, 1),
                                   mt_graph_all_gather(g, t[2], ax, 1), sp->NH, sp->KV,
                                   sp->NH / sp->KV, 0, sp->P, r, dg);
}

static mt_status run_device(mt_graph *g, const spec *sp, const batch *x, mt_axes ax, int r) {
    const int64_t T = sp->S / sp->P, C = sp->NH * sp->HS, CK = sp->KV * sp->HS;
    const mt_init zeros = {MT_INIT_ZEROS, 0};
    mt_tensor *t[3] = {0};
    if (sp->packed) {
        t[0] = mt_param(g, "qkv", 3, (int64_t[]){sp->B, T, 3 * C}, zeros);
    } else {
        t[0] = mt_param(g, "q", 3, (int64_t[]){sp->B, T, C}, zeros);
        t[1] = mt_param(g, "k", 3, (int64_t[]){sp->B, T, CK}, zeros);
        t[2] = mt_param(g, "v", 3, (int64_t[]){sp->B, T, CK}, zeros);
    }
    for (int i = 0; i < 3; i++)   /* each device's own rows */
        if (t[i]) TRY_DEV(mt_tensor_set_varying(t[i], ax));
    mt_tensor *docs = mt_input(g, "docs", MT_I32, 2, (int64_t[]){sp->B, T});
    mt_tensor *w = mt_input(g, "w", MT_F32, 3, (int64_t[]){sp->B, T, C});
    mt_tensor *out = build(g, sp, ax, r, t, docs);
    mt_tensor *loss = mt_sum(g, mt_mul(g, out, w));
    if (!loss) return mt_fail(MT_EINTERNAL, "%s: building: %s", sp->mesh, mt_graph_errmsg(g));
    TRY_DEV(mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1}));
    if (sp->packed) {
        for (int part = 0; part < 3; part++)
            rows_of(mt_tensor_f32(t[0]), 3 * C, part * C, part == 0 ? x->q : part == 1 ? x->k : x->v,
                    C, sp, r);
    } else {
        rows_of(mt_tensor_f32(t[0]), C, 0, x->q, C, sp, r);
        rows_of(mt_tensor_f32(t[1]), CK, 0, x->k, CK, sp, r);
        rows_of(mt_tensor_f32(t[2]), CK, 0, x->v, CK, sp, r);
    }
    rows_of(mt_tensor_f32(w), C, 0, x->w, C, sp, r);
    int32_t *ids = malloc((size_t)(sp->B * T) * sizeof *ids);
    if (!ids) return mt_fail(MT_ENOMEM, "out of memory");
    rows_of((float *)ids, 1, 0, (const float *)x->doc, 1, sp, r);   /* 4-byte words alike */
    mt_status st = mt_tensor_write(docs, ids, 0, sp->B * T);
    free(ids);
    TRY_DEV(st);
    TRY_DEV(mt_graph_forward(g));
    TRY_DEV(agree("out", mt_tensor_f32(out), C, 0, x->out, C, sp, r));
    TRY_DEV(mt_graph_backward(g));
    if (sp->packed) {
        const float *d = mt_tensor_f32(mt_tensor_grad(t[0]));
        TRY_DEV(agree("dq", d, 3 * C, 0, x->dq, C, sp, r));
        TRY_DEV(agree("dk", d, 3 * C, C, x->dk, C, sp, r));
        TRY_DEV(agree("dv", d, 3 * C, 2 * C, x->dv, C, sp, r));
    } else {
        TRY_DEV(agree("dq", mt_tensor_f32(mt_tensor_grad(t[0])), C, 0, x->dq, C, sp, r));
        TRY_DEV(agree("dk", mt_tensor_f32(mt_tensor_grad(t[1])), CK, 0, x->dk, CK, sp, r));
        TRY_DEV(agree("dv", mt_tensor_f32(mt_tensor_grad(t[2])), CK, 0, x->dv, CK, sp, r));
    }
    return sp->how == RING ? ring_bytes(g, sp) : MT_OK;
}

static mt_status run_case(mt_ctx *ctx, void *arg) {
    const spec *sp = arg;
    mt_axes ax;
    TRY_DEV(mt_ctx_axes(ctx, "context", &ax));
    batch x = {0};
    mt_graph *g = mt_graph_create();
    mt_status st = !g || !batch_make(sp, &x) ? mt_fail(MT_ENOMEM, "out of memory")
                                             : mt_graph_set_ctx(g, ctx);
    if (st == MT_OK) st = run_device(g, sp, &x, ax, mt_axis_index(ctx, ax));
    mt_graph_free(g);
    batch_free(&x);
    return st;
}

static void run_spec(spec sp) {
    mt_launch_opts o = mt_test_launch_opts(sp.mesh, sp.P);
    MT_CHECK_OK(mt_launch(&o, run_case, &sp));
}

MT_TEST(ring_documents_packed_equal_reference) {
    run_spec((spec){"context=2", RING, 2, 2, 16, 4, 4, 8, true, 4});
    run_spec((spec){"context=4", RING, 4, 1, 32, 2, 2, 8, true, 3});
}

MT_TEST(ring_documents_gqa_mqa_equal_reference) {
    run_spec((spec){"context=2", RING, 2, 2, 16, 4, 2, 8, false, 5});
    run_spec((spec){"context=3", RING, 3, 1, 24, 4, 2, 4, false, 4});
    run_spec((spec){"context=4", RING, 4, 2, 16, 2, 1, 4, false, 3});
}

MT_TEST(gather_documents_equal_reference) {
    run_spec((spec){"context=2", GATHER, 2, 2, 16, 4, 4, 8, true, 4});
    run_spec((spec){"context=4", GATHER, 4, 1, 32, 4, 2, 8, false, 3});
    run_spec((spec){"context=2", GATHER, 2, 1, 16, 4, 1, 4, false, 5});
}

/* local rows 384 (chunks of 192): several query and key tiles in every
 * block, documents of ~100 tokens crossing tiles, chunks and devices */
MT_TEST(documents_several_tiles_equal_reference) {
    run_spec((spec){"context=2", RING, 2, 1, 768, 2, 1, 16, false, 100});
    run_spec((spec){"context=2", GATHER, 2, 1, 768, 2, 1, 16, false, 100});
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
