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
#include "harness.h"
#include "meshtrain.h"
#include "train_helpers.h"

#include <math.h>
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
    c.gpt = (mt_gpt_config){.L = 2, .C = 64, .NH = 4, .maxT = 32};
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
            bytes[*n_coll] = in.bytes;
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

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
