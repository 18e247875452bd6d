/*
 * test_bf16_comm.c — collectives in bf16 (docs/precision.md, "Collectives").
 *
 * FSDP under --precision bf16: the all-gathers of weights that only bf16
 * products read move the shard's bf16 copy, half the bytes of fp32's, read
 * from the graph's collective nodes (mt_graph_node's bytes, what explain
 * and the trace show), node by node against the fp32 program: the weights
 * of the four linears and the backward's re-gather of the tied embedding
 * (read there by the logits' dX product alone) halve; the forward gather of
 * the embedding (also read by the embedding lookup), the biases and the
 * layernorm parameters stay f32. The losses of that run match bf16 on one
 * device step by step (a gathered bf16 weight is the bf16 rounding of the
 * same f32 weight, so only the order of the f32 sums differs). A product
 * reading the gathered bf16 bytes as f32, or a stale bf16 shard, would be
 * far off.
 *
 * --grad-reduce bf16 (mt_train_config.grad_reduce): the data-parallel
 * gradient all-reduces and FSDP's reduce-scatters move bf16, half the bytes,
 * and the losses stay within relative 1e-2 of fp32 reductions.
 */
#include "graph/graph_impl.h"   /* sync_reduce: the reductions as they come */
#include "harness.h"
#include "pvary_loss.h"
#include "meshtrain.h"
#include "train_helpers.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* A varied English text every Debian system has (base-files). */
#define CORPUS "/usr/share/common-licenses/GPL-3"
#define STEPS 5

static bool available(void) {
    if (mt_precision_check(MT_PRECISION_BF16) == MT_OK) return true;
    printf("  skipped: this build has no oneDNN (bf16 products)\n");
    return false;
}

static mt_train_config gpt_config(mt_precision prec, const char *mesh, int zero) {
    mt_train_config c = mt_test_config(MT_MODEL_GPT, CORPUS);
    static const mt_gpt_config gpt = {.L = 2, .C = 64, .NH = 4, .maxT = 32};
    MT_TEST_MODEL_CONFIG(&c, &gpt);
    c.T = 32;
    c.B = 8;
    c.steps = c.optim.total_steps = STEPS;
    c.optim.lr = 1e-3f;
    c.precision = prec;
    c.mesh = mesh;
    c.zero = zero;
    if (mesh) c.threads = 2;   /* one kernel thread per device */
    return c;
}

/* The losses of STEPS steps; the graph's collective bytes by node (device
 * 0's program) into bytes / names when given. */
static void train(const mt_train_config *c, float *loss, double *bytes, char (*names)[96],
                  const char **ops, int *n_coll) {
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(c, &tr));
    if (n_coll) {
        mt_graph *g = mt_trainer_graph(tr);
        *n_coll = 0;
        for (int i = 0; i < mt_graph_n_nodes(g); i++) {
            mt_node_info in;
            MT_CHECK_OK(mt_graph_node(g, i, &in));
            if (!in.collective) continue;
            MT_CHECK(*n_coll < 256, "more than 256 collectives");
            bytes[*n_coll] = in.comm_bytes;
            ops[*n_coll] = in.op;
            snprintf(names[*n_coll], sizeof names[0], "%s", mt_tensor_name(in.out));
            (*n_coll)++;
        }
    }
    for (int i = 0; i < STEPS; i++) {
        mt_step_report r;
        MT_CHECK_OK(mt_trainer_step(tr, &r));
        loss[i] = r.loss;
    }
    mt_trainer_free(tr);
}

/* The weights every reader of whose gather is a bf16 product. */
static bool product_weight(const char *name) {
    static const char *const w[] = {".attn.qkv.w)", ".attn.proj.w)", ".mlp.fc.w)", ".mlp.proj.w)"};
    for (size_t k = 0; k < sizeof w / sizeof w[0]; k++)
        if (strstr(name, w[k])) return true;
    return strcmp(name, "regather(all-gather(wte))") == 0;
}

static void check_losses(const float *got, const float *want, double tol, const char *what) {
    double worst = 0;
    for (int i = 0; i < STEPS; i++) {
        double rel = fabs((double)got[i] - want[i]) / fabs((double)want[i]);
        MT_CHECK(rel <= tol, "%s: step %d loss %.7f, reference %.7f (relative %.2g > %g)", what,
                 i + 1, got[i], want[i], rel, tol);
        if (rel > worst) worst = rel;
    }
    printf("  %s, %d steps: worst relative loss difference %.2g (limit %g)\n", what, STEPS,
           worst, tol);
}

/* FSDP, bf16 against fp32 programs and bf16 on one device; `mesh`, `zero`
 * as the trainer takes them. */
static void fsdp_case(const char *mesh, int zero) {
    static double b32[256], b16[256];
    static char n32[256][96], n16[256][96];
    const char *o32[256], *o16[256];
    int c32 = 0, c16 = 0;
    float l32[STEPS], l16[STEPS], one[STEPS];
    mt_train_config c = gpt_config(MT_PRECISION_FP32, mesh, zero);
    train(&c, l32, b32, n32, o32, &c32);
    c = gpt_config(MT_PRECISION_BF16, mesh, zero);
    train(&c, l16, b16, n16, o16, &c16);
    c = gpt_config(MT_PRECISION_BF16, NULL, 0);
    train(&c, one, NULL, NULL, NULL, NULL);

    MT_CHECK(c32 == c16, "%s: %d collectives in fp32, %d in bf16", mesh, c32, c16);
    int halved = 0;
    double ag32 = 0, ag16 = 0;
    for (int k = 0; k < c32; k++) {
        MT_CHECK(strcmp(n32[k], n16[k]) == 0, "collective %d: '%s' in fp32, '%s' in bf16", k,
                 n32[k], n16[k]);
        bool gather = strcmp(o32[k], "all_gather") == 0;
        double want = gather && product_weight(n32[k]) ? b32[k] / 2 : b32[k];
        MT_CHECK(b16[k] == want, "%s: %s '%s' moves %.0f bytes in bf16, %.0f in fp32 (want %.0f)",
                 mesh, o32[k], n32[k], b16[k], b32[k], want);
        halved += want != b32[k];
        if (gather && product_weight(n32[k])) ag32 += b32[k], ag16 += b16[k];
    }
    /* 2 layers x (4 gathers + 4 re-gathers) + the embedding's re-gather */
    MT_CHECK(halved == 17, "%s: %d all-gathers halved, want 17", mesh, halved);
    printf("  %s: the weights' all-gathers move %.0f bytes in bf16, %.0f in fp32 (%d of %d "
           "collectives halved)\n", mesh, ag16, ag32, halved, c32);
    check_losses(l16, one, 1e-3, "bf16 FSDP vs bf16 on one device");
    (void)l32;
}

MT_TEST(fsdp_gathers_bf16) {
    if (!available()) return;
    fsdp_case("fsdp=2", 0);
}

MT_TEST(zero3_gathers_bf16) {
    if (!available()) return;
    fsdp_case("data=2", 3);
}

/* --grad-reduce bf16 against fp32 reductions, products in `prec`: the W
 * gradient reductions halve, nothing else changes, the losses stay within
 * relative 1e-2, and differ (the reductions really ran in bf16). */
static void grad_reduce_case(const char *mesh, int zero, mt_precision prec, mt_remat remat) {
    static double b32[256], b16[256];
    static char n32[256][96], n16[256][96];
    const char *o32[256], *o16[256];
    int c32 = 0, c16 = 0;
    float l32[STEPS], l16[STEPS];
    mt_train_config c = gpt_config(prec, mesh, zero);
    c.remat = remat;
    train(&c, l32, b32, n32, o32, &c32);
    c.grad_reduce = MT_PRECISION_BF16;
    train(&c, l16, b16, n16, o16, &c16);

    MT_CHECK(c32 == c16, "%s: %d collectives with fp32 reductions, %d with bf16", mesh, c32, c16);
    int halved = 0;
    double r32 = 0, r16 = 0;
    for (int k = 0; k < c32; k++) {
        MT_CHECK(strcmp(n32[k], n16[k]) == 0, "collective %d: '%s', then '%s'", k, n32[k], n16[k]);
        /* a parameter's gradient: "grad.<parameter>" reduced in W */
        bool red = (strcmp(o32[k], "psum") == 0 || strcmp(o32[k], "psum_scatter") == 0) &&
                   strncmp(n32[k], "grad.", 5) == 0 && !strstr(n32[k], "act.");
        double want = red ? b32[k] / 2 : b32[k];
        MT_CHECK(b16[k] == want, "%s: %s '%s' moves %.0f bytes with bf16 reductions, %.0f with "
                 "fp32 (want %.0f)", mesh, o32[k], n32[k], b16[k], b32[k], want);
        if (red) halved++, r32 += b32[k], r16 += b16[k];
    }
    /* a GPT L2: wte, wpe, ln_f (2) and 12 per block */
    MT_CHECK(halved == 28, "%s: %d gradient reductions halved, want 28", mesh, halved);
    printf("  %s: the gradient reductions move %.0f bytes in bf16, %.0f in fp32\n", mesh, r16, r32);
    check_losses(l16, l32, 1e-2, "bf16 gradient reductions vs fp32");
    double diff = 0;
    for (int i = 0; i < STEPS; i++) diff += fabs((double)l16[i] - l32[i]);
    MT_CHECK(diff > 0, "%s: bf16 reductions gave exactly fp32's losses: they did not run in bf16",
             mesh);
}

MT_TEST(grad_reduce_bf16_data_parallel) {
    grad_reduce_case("data=2", 0, MT_PRECISION_FP32, MT_REMAT_NONE);
}

/* remat: W runs inside B, its reductions as they come (not deferred) */
MT_TEST(grad_reduce_bf16_data_parallel_remat) {
    grad_reduce_case("data=2", 0, MT_PRECISION_FP32, MT_REMAT_FULL);
}

MT_TEST(grad_reduce_bf16_fsdp) {
    grad_reduce_case("fsdp=2", 0, MT_PRECISION_FP32, MT_REMAT_NONE);
}

MT_TEST(grad_reduce_bf16_with_bf16_products) {
    if (!available()) return;
    grad_reduce_case("fsdp=2", 0, MT_PRECISION_BF16, MT_REMAT_NONE);
}

MT_TEST(grad_reduce_rejects_unknown) {
    mt_train_config c = gpt_config(MT_PRECISION_FP32, "data=2", 0);
    c.grad_reduce = (mt_precision)7;
    mt_trainer *tr = NULL;
    MT_CHECK_FAILS(mt_trainer_create(&c, &tr), MT_EINVAL, "grad_reduce 7", "MT_PRECISION_BF16");
}

/* ---- the reduction itself, exactly ---------------------------------------- */

/* bf16 rounding, to nearest even, by the bits (finite inputs). */
static float rb(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

enum { NP = 6, NX = 1000 };

static float xval(int d, int i) { return 1.0f + 0.001237f * (float)i + 0.3711f * (float)d; }

/* L = Σ_k Σ x ⊙ pvary(p_k) on data=2 with bf16 reductions: grad p_k[i] =
 * bf16(bf16(x_0[i]) + bf16(x_1[i])) exactly (one addition in f32, rounded),
 * deferred (sync false) or as they come (sync true). */
static mt_status exact_device(mt_ctx *ctx, void *arg) {
    const bool sync = *(const bool *)arg;
    const int me = mt_ctx_device(ctx);
    mt_axes data;
    mt_status s = mt_ctx_axes(ctx, "data", &data);
    if (s != MT_OK) return s;
    mt_graph *g = mt_graph_create();
    if ((s = mt_graph_set_ctx(g, ctx)) != MT_OK) { mt_graph_free(g); return s; }
    mt_tensor *x = mt_input(g, "x", MT_F32, 1, (int64_t[]){NX}), *p[NP];
    mt_tensor *loss = mt_test_pvary_loss(g, x, NP, NX, data, p);
    s = mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1, .grad_reduce = MT_PRECISION_BF16});
    if (s == MT_OK) {
        g->prog->sync_reduce = sync;
        float *xd = mt_tensor_f32(x);
        for (int i = 0; i < NX; i++) xd[i] = xval(me, i);
        mt_graph_zero_grad(g);
        s = mt_graph_forward(g);
        if (s == MT_OK) s = mt_graph_backward(g);
    }
    for (int k = 0; k < NP && s == MT_OK; k++) {
        const float *gd = mt_tensor_f32(mt_tensor_grad(p[k]));
        for (int i = 0; i < NX && s == MT_OK; i++) {
            float want = rb(rb(xval(0, i)) + rb(xval(1, i)));
            if (gd[i] != want)
                s = mt_fail(MT_EINTERNAL, "%s: grad p%d[%d] = %.9g, want bf16(bf16(%.9g) + "
                            "bf16(%.9g)) = %.9g (f32 sum %.9g)", sync ? "as they come" : "deferred",
                            k, i, gd[i], xval(0, i), xval(1, i), want, xval(0, i) + xval(1, i));
        }
    }
    mt_graph_free(g);
    return s;
}

MT_TEST(grad_reduce_bf16_is_exact) {
    for (int sync = 0; sync < 2; sync++) {
        bool b = sync;
        mt_launch_opts o;
        memset(&o, 0, sizeof o);
        o.mesh = "data=2";
        o.devices = 2;
        o.transport = MT_TRANSPORT_THREADS;
        o.timeout_s = 30;
        o.kernel_threads = 1;
        mt_status s = mt_launch(&o, exact_device, &b);
        MT_CHECK(s == MT_OK, "%s", mt_errmsg());
    }
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
