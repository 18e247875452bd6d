/*
 * test_ring_attention.c — the ring attention op (--cp-attention ring;
 * ../shared/CONTEXT_PARALLEL.md §4, §8 checks 3 and 4) against one device's
 * attention: P devices of a threads mesh each hold the head-tail rows of
 * one sequence batch (device r: chunks r and 2P-1-r, mt_headtail_pos) of q,
 * k and v, run the ring (P steps of k, v sends, the blocks merged by the
 * log-sum-exp identity) and its backward (k, v rotated again, the dK, dV
 * accumulator travelling home), and each device's output rows and its dq,
 * dk, dv rows must equal those rows of the one-device flash kernel's causal
 * attention over the whole sequence and its gradients, within 1e-6 of the
 * largest magnitude (f32; the merge sums in another order). The loss is
 * Σ out ⊙ W over every device, so dO = W (a fixed random cotangent).
 *
 * Cases: the GPT's packed qkv (multi-head), grouped-query (KV = 2) and
 * multi-query (KV = 1), P = 2, 3 and 4, sequences of one key tile and of
 * several (the kernel's tiles skipped, open and masked in every block).
 *
 * And the listing (explain): the forward moves (P-1) sends of the k, v rows,
 * 2·(S/P)·KV·HS floats a sequence (§4), the backward twice that (k, v again
 * and dK, dV), worked out here by hand for each case.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"
#include "graph/graph_impl.h"   /* mt__attention_ring */
#include "ops/kernels.h"        /* the one-device kernel, the reference */

#define DEV_OK(call)                                                                       \
    do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)
#define DEV_FAIL(...) return mt_fail(MT_EINTERNAL, __VA_ARGS__)

/* Pseudo-random in [-1, 1], by tensor (salt) and element: the same on every
 * device (the one sequence batch all of them split). */
static float val(int salt, int64_t i) {
    uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull ^ (uint64_t)(salt + 1) * 0x165667B19E3779F9ull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return (float)((double)(h % 20001) / 10000.0 - 1.0);
}

typedef struct {
    const char *mesh;
    int         P, B, S, NH, KV, HS;
    bool        packed;   /* the GPT's qkv (KV = NH) */
} spec;

/* The one-device reference: whole q (B,S,NH·HS), k, v (B,S,KV·HS), dO = W;
 * out, dq, dk, dv by the flash kernel (causal). */
typedef struct {
    float *q, *k, *v, *w, *out, *lse, *dq, *dk, *dv;
} whole;

static void whole_free(whole *r) {
    float *all[] = {r->q, r->k, r->v, r->w, r->out, r->lse, r->dq, r->dk, r->dv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

static bool whole_make(const spec *sp, whole *r) {
    const int64_t nq = (int64_t)sp->B * sp->S * sp->NH * sp->HS;
    const int64_t nk = (int64_t)sp->B * sp->S * sp->KV * sp->HS;
    r->q = malloc(nq * 4); r->w = malloc(nq * 4); r->out = malloc(nq * 4); r->dq = malloc(nq * 4);
    r->k = malloc(nk * 4); r->v = malloc(nk * 4); r->dk = malloc(nk * 4); r->dv = malloc(nk * 4);
    r->lse = malloc((size_t)sp->B * sp->NH * sp->S * 4);
    float *scratch = malloc(mt_kernel_attention_scratch(sp->S, sp->HS) * 4);
    if (!r->q || !r->w || !r->out || !r->dq || !r->k || !r->v || !r->dk || !r->dv || !r->lse ||
        !scratch) {
        free(scratch);
        return false;
    }
    for (int64_t i = 0; i < nq; i++) r->q[i] = val(1, i), r->w[i] = val(4, i);
    for (int64_t i = 0; i < nk; i++) r->k[i] = val(2, i), r->v[i] = val(3, i);
    mt_attn_layout L = {.B = sp->B, .T = sp->S, .NH = sp->NH, .KV = sp->KV, .HS = sp->HS,
                        .G = sp->NH / sp->KV, .ldq = sp->NH * sp->HS, .ldk = sp->KV * sp->HS,
                        .ldv = sp->KV * sp->HS, .ldo = sp->NH * sp->HS};
    mt_kernel_attention_fwd(r->out, r->lse, r->q, r->k, r->v, &L, scratch, 0, sp->B * sp->NH);
    mt_kernel_attention_bwd(&(mt_attn_grads){r->dq, r->dk, r->dv, false, false}, r->w, r->q,
                            r->k, r->v, r->out, r->lse, &L, scratch, 0, sp->B * sp->KV);
    free(scratch);
    return true;
}

/* dst (B,T,n) local = src (B,S,n) whole at this device's head-tail rows
 * (src_ld and the column offset for the packed qkv) */
static void rows_of(float *dst, int64_t dst_ld, int64_t col, const float *src, int64_t n,
                    const spec *sp, int r) {
    const int64_t T = sp->S / sp->P;
    for (int64_t b = 0; b < sp->B; b++)
        for (int64_t i = 0; i < T; i++) {
            const int64_t pos = mt_headtail_pos(i, T, sp->P, r);
            memcpy(dst + (b * T + i) * dst_ld + col, src + (b * sp->S + pos) * n,
                   (size_t)n * sizeof *dst);
        }
}

/* got (B,T,·) rows, n columns from col of ld, against the whole's rows */
static mt_status same_rows(const char *what, const float *got, int64_t ld, int64_t col,
                           const float *want, int64_t n, const spec *sp, int r) {
    const int64_t T = sp->S / sp->P, all = (int64_t)sp->B * sp->S * n;
    double scale = 1e-3;
    for (int64_t i = 0; i < all; i++) scale = fmax(scale, fabs(want[i]));
    for (int64_t b = 0; b < sp->B; b++)
        for (int64_t i = 0; i < T; i++) {
            const int64_t pos = mt_headtail_pos(i, T, sp->P, r);
            for (int64_t e = 0; e < n; e++) {
                const double g = got[(b * T + i) * ld + col + e], w = want[(b * sp->S + pos) * n + e];
                if (!(fabs(g - w) <= 1e-6 * scale))
                    DEV_FAIL("device %d %s [b=%lld, row %lld = position %lld, %lld] = %.9g, one "
                             "device's %.9g (tolerance 1e-6 of %g)", r, what, (long long)b,
                             (long long)i, (long long)pos, (long long)e, g, w, scale);
            }
        }
    return MT_OK;
}

/* The listing's bytes of the ring's forward and backward nodes against §4:
 * (P-1) sends of 2·T·KV·HS floats a sequence, the backward's twice. */
static mt_status check_listing(mt_graph *g, const spec *sp) {
    const double kv_send = 2.0 * sp->B * (sp->S / sp->P) * sp->KV * sp->HS * 4;
    const double want[2] = {(sp->P - 1) * kv_send, 2 * (sp->P - 1) * kv_send};
    int seen = 0;
    for (int i = 0; i < mt_graph_n_nodes(g); i++) {
        mt_node_info info;
        DEV_OK(mt_graph_node(g, i, &info));
        const int k = strcmp(info.op, "ring_attention") == 0       ? 0
                      : strcmp(info.op, "ring_attention_bwd") == 0 ? 1 : -1;
        if (k < 0) continue;
        if (!info.collective || info.comm_bytes != want[k] || info.flops <= 0)
            DEV_FAIL("listing: %s collective %d, %g bytes, %g FLOPs; want %g bytes",
                     info.op, (int)info.collective, info.comm_bytes, info.flops, want[k]);
        seen |= 1 << k;
    }
    if (seen != 3) DEV_FAIL("listing: ring nodes seen %d, want the forward and the backward", seen);
    return MT_OK;
}

static mt_status run_case(mt_ctx *ctx, void *arg) {
    const spec *sp = arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "context", &ax));
    const int r = mt_axis_index(ctx, ax);
    whole ref;
    if (!whole_make(sp, &ref)) {
        whole_free(&ref);
        DEV_FAIL("out of memory");
    }
    const int64_t T = sp->S / sp->P, C = sp->NH * sp->HS, KC = sp->KV * sp->HS;
    mt_graph *g = mt_graph_create();
    if (!g) DEV_FAIL("out of memory");
    mt_status st = mt_graph_set_ctx(g, ctx);
    mt_axes every = ax;   /* each device's own rows */
    const mt_init zeros = {MT_INIT_ZEROS, 0};
    mt_tensor *q, *k = NULL, *v = NULL, *out;
    if (sp->packed) {
        q = mt_param(g, "qkv", 3, (int64_t[]){sp->B, T, 3 * C}, zeros);
        if (st == MT_OK) st = mt_tensor_set_varying(q, every);
        out = mt__attention_ring(g, q, NULL, NULL, sp->NH, sp->NH, 1, 0, ax);
    } else {
        q = mt_param(g, "q", 3, (int64_t[]){sp->B, T, C}, zeros);
        k = mt_param(g, "k", 3, (int64_t[]){sp->B, T, KC}, zeros);
        v = mt_param(g, "v", 3, (int64_t[]){sp->B, T, KC}, zeros);
        if (st == MT_OK) st = mt_tensor_set_varying(q, every);
        if (st == MT_OK) st = mt_tensor_set_varying(k, every);
        if (st == MT_OK) st = mt_tensor_set_varying(v, every);
        out = mt__attention_ring(g, q, k, v, sp->NH, sp->KV, sp->NH / sp->KV, 0, ax);
    }
    mt_tensor *w = mt_input(g, "w", MT_F32, 3, (int64_t[]){sp->B, T, C});
    mt_tensor *loss = mt_sum(g, mt_mul(g, out, w));
    if (st == MT_OK && !loss) st = mt_fail(MT_EINTERNAL, "building: %s", mt_graph_errmsg(g));
    if (st == MT_OK) st = mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1});
    if (st == MT_OK) {
        if (sp->packed) {
            rows_of(mt_tensor_f32(q), 3 * C, 0, ref.q, C, sp, r);
            rows_of(mt_tensor_f32(q), 3 * C, C, ref.k, C, sp, r);
            rows_of(mt_tensor_f32(q), 3 * C, 2 * C, ref.v, C, sp, r);
        } else {
            rows_of(mt_tensor_f32(q), C, 0, ref.q, C, sp, r);
            rows_of(mt_tensor_f32(k), KC, 0, ref.k, KC, sp, r);
            rows_of(mt_tensor_f32(v), KC, 0, ref.v, KC, sp, r);
        }
        rows_of(mt_tensor_f32(w), C, 0, ref.w, C, sp, r);
        st = mt_graph_forward(g);
    }
    if (st == MT_OK) st = same_rows("out", mt_tensor_f32(out), C, 0, ref.out, C, sp, r);
    if (st == MT_OK) st = mt_graph_backward(g);
    if (st == MT_OK && sp->packed) {
        const float *d = mt_tensor_f32(mt_tensor_grad(q));
        st = same_rows("dq", d, 3 * C, 0, ref.dq, C, sp, r);
        if (st == MT_OK) st = same_rows("dk", d, 3 * C, C, ref.dk, C, sp, r);
        if (st == MT_OK) st = same_rows("dv", d, 3 * C, 2 * C, ref.dv, C, sp, r);
    } else if (st == MT_OK) {
        st = same_rows("dq", mt_tensor_f32(mt_tensor_grad(q)), C, 0, ref.dq, C, sp, r);
        if (st == MT_OK) st = same_rows("dk", mt_tensor_f32(mt_tensor_grad(k)), KC, 0, ref.dk, KC, sp, r);
        if (st == MT_OK) st = same_rows("dv", mt_tensor_f32(mt_tensor_grad(v)), KC, 0, ref.dv, KC, sp, r);
    }
    if (st == MT_OK) st = check_listing(g, sp);
    mt_graph_free(g);
    whole_free(&ref);
    return st;
}

static void run_spec(spec sp) {
    mt_launch_opts o = mt_test_launch_opts(sp.mesh, sp.P);
    MT_CHECK_OK(mt_launch(&o, run_case, &sp));
}

MT_TEST(ring_packed_equals_one_device) {
    run_spec((spec){.mesh = "context=2", .P = 2, .B = 2, .S = 16, .NH = 4, .KV = 4, .HS = 8,
                    .packed = true});
    run_spec((spec){.mesh = "context=4", .P = 4, .B = 1, .S = 32, .NH = 2, .KV = 2, .HS = 8,
                    .packed = true});
}

MT_TEST(ring_gqa_equals_one_device) {
    run_spec((spec){.mesh = "context=2", .P = 2, .B = 2, .S = 16, .NH = 4, .KV = 2, .HS = 8});
    run_spec((spec){.mesh = "context=3", .P = 3, .B = 1, .S = 24, .NH = 4, .KV = 2, .HS = 4});
    run_spec((spec){.mesh = "context=4", .P = 4, .B = 1, .S = 32, .NH = 6, .KV = 3, .HS = 8});
}

MT_TEST(ring_mqa_equals_one_device) {
    run_spec((spec){.mesh = "context=2", .P = 2, .B = 1, .S = 16, .NH = 4, .KV = 1, .HS = 8});
    run_spec((spec){.mesh = "context=4", .P = 4, .B = 2, .S = 16, .NH = 2, .KV = 1, .HS = 4});
}

/* local halves of 192 rows: several key tiles in every block */
MT_TEST(ring_several_tiles_equals_one_device) {
    run_spec((spec){.mesh = "context=2", .P = 2, .B = 1, .S = 768, .NH = 2, .KV = 1, .HS = 16});
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
