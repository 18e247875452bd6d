/*
 * test_hf_blocks.c — a Hugging Face directory loaded straight into each
 * device's parameter blocks (mt_hf_load_llama on a graph of mt_partition,
 * through mt_tensor_write_global; issue 43: "each device reading only its
 * shards' bytes"), on thread devices:
 *
 *  - a dense LLaMA (GQA: 4 heads, 2 kv heads of 16) on tensor=2 (heads,
 *    kv heads, the FFN and the vocabulary split) and a Mixtral-style MoE
 *    (8 experts) on expert=2: every device's every parameter block equals
 *    mt_shard_put's cut of the one-device graph's whole tensor
 *    (comm/shard.c, code the loader does not use), bit for bit;
 *  - what each device reads: a NaN written into a row that only device 1
 *    holds (the last row of block 0's gate_proj, an FFN row tensor=2
 *    gives device 1; an element of expert 7's w1, expert=2's second half)
 *    fails device 1's load with MT_ENAN naming that element, while device
 *    0's load succeeds: it never read those bytes.
 *
 * The one-device graph is written with mt_hf_save_llama (its round trip is
 * test_hf.c's), so its whole tensors are the reference.
 */
#include "meshtrain.h"
#include "harness.h"
#include "hf_test.h"
#include "part_helpers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { B = 1, T = 8, MAX_DEV = 2, MAX_PARAMS = 64 };

typedef struct {
    mt_llama_config c;
    const char     *dir, *rules;
    mt_graph       *whole;                 /* the one-device graph the directory holds */
    mt_status       st[MAX_DEV];           /* each device's mt_hf_load_llama */
    char            msg[MAX_DEV][512];
    int             compared[MAX_DEV];     /* parameters checked on each device */
    char            fail[512];             /* a block that differs */
} load_case;

/* moe-tiny's shapes: dense (no experts) or every block an MoE of 8
 * experts without a shared one (Mixtral's form, which Hugging Face holds). */
static mt_llama_config config(bool moe) {
    mt_llama_config c;
    MT_CHECK_OK(mt_llama_preset("moe-tiny", &c));
    c.moe.shared = 0, c.moe.first_dense = 0, c.moe.aux_alpha = 0, c.moe.z_beta = 0;
    if (!moe) memset(&c.moe, 0, sizeof c.moe);
    return c;
}

/* Device: the model partitioned by lc->rules, its parameters loaded from
 * the directory, each block compared with mt_shard_put's cut. */
static mt_status device(mt_ctx *ctx, void *arg) {
    load_case *lc = arg;
    const int dev = mt_ctx_device(ctx);
    mt_graph *g = mt_graph_create(), *local = NULL;
    mt_tensor *loss = mt_llama_build(g, &lc->c, B, T, 1.0f / (B * T)), *lloss = NULL;
    mt_status s = loss ? MT_OK : mt_graph_status(g);
    mt_rules r;
    if (s == MT_OK) s = mt_rules_parse(lc->rules, &r);
    if (s == MT_OK) s = mt_graph_shard_by_rules(g, &r, mt_ctx_mesh(ctx));
    mt_partition_opts po = {.mode = MT_SHARD_AUTO};
    if (s == MT_OK) s = mt_partition(g, loss, ctx, &po, &local, &lloss);
    if (s == MT_OK) s = mt_graph_compile(local, lloss, &(mt_compile_opts){.seed = 9});
    if (s != MT_OK) {
        snprintf(lc->msg[dev], sizeof lc->msg[dev], "set-up: %s", mt_errmsg());
        goto out;
    }
    lc->st[dev] = mt_hf_load_llama(lc->dir, local, &lc->c);
    if (lc->st[dev] != MT_OK) {
        snprintf(lc->msg[dev], sizeof lc->msg[dev], "%s", mt_errmsg());
        goto out;
    }
    for (int i = 0; i < mt_graph_n_params(local); i++) {
        mt_tensor *p = mt_graph_param_at(local, i);
        mt_tensor *w = mt_graph_find(lc->whole, mt_tensor_name(p));
        MT_CHECK(w, "parameter '%s' is not in the one-device graph", mt_tensor_name(p));
        const int nd = mt_tensor_ndim(w);
        int64_t shape[MT_MAX_DIMS];
        for (int d = 0; d < nd; d++) shape[d] = mt_tensor_dim(w, d);
        const int64_t n = mt_tensor_numel(p);
        const mt_sharding sh = mt_tensor_sharding(p);
        float *want = malloc((size_t)n * sizeof *want);
        MT_CHECK(want, "malloc");
        MT_CHECK_OK(mt_shard_put(ctx, &sh, mt_tensor_f32(w), nd, shape, want));
        if (memcmp(want, mt_tensor_f32(p), (size_t)n * sizeof *want) != 0 && !lc->fail[0])
            snprintf(lc->fail, sizeof lc->fail, "device %d's block of '%s' (%lld of %lld "
                     "elements) differs from its cut of the whole tensor", dev,
                     mt_tensor_name(p), (long long)n, (long long)mt_tensor_numel(w));
        free(want);
        lc->compared[dev]++;
    }
out:
    if (local) mt_graph_free(local);
    mt_graph_free(g);
    return MT_OK;   /* each device's load is judged by the test */
}

/* The one-device model of c at random (seed 3), saved to sub; with
 * nan_name, element nan_at of that parameter NaN first. */
static mt_graph *save_model(const mt_llama_config *c, const char *sub, const char *nan_name,
                            int64_t nan_at) {
    mt_graph *g = hf_build_llama(c, B, T);
    if (nan_name) {
        mt_tensor *t = mt_graph_find(g, nan_name);
        MT_CHECK(t && nan_at < mt_tensor_numel(t), "no parameter '%s' of %lld+ elements",
                 nan_name, (long long)nan_at + 1);
        mt_tensor_f32(t)[nan_at] = NAN;
    }
    MT_CHECK_OK(mt_hf_save_llama(hf_at(sub, ""), c, g));
    return g;
}

static void run(load_case *lc, const char *mesh) {
    char msg[512] = "";
    MT_CHECK_OK(mt_test_run_devices(mesh, MAX_DEV, device, lc, msg, sizeof msg));
}

/* Every block equals its cut of the whole tensor, on each device. */
static void blocks_equal_cuts(bool moe, const char *mesh, const char *rules) {
    hf_make_dir();
    load_case lc = {.c = config(moe), .rules = rules};
    lc.whole = save_model(&lc.c, "m", NULL, 0);
    lc.dir = hf_at("m", "");
    run(&lc, mesh);
    for (int d = 0; d < MAX_DEV; d++)
        MT_CHECK(lc.st[d] == MT_OK && lc.compared[d] > 0, "device %d: %s (%d parameters "
                 "compared)", d, lc.msg[d], lc.compared[d]);
    MT_CHECK(!lc.fail[0], "%s", lc.fail);
    mt_graph_free(lc.whole);
}

/* A NaN in a row only device 1 holds: device 1's load fails naming the
 * element (index `at` of Hugging Face tensor hf), device 0's succeeds. */
static void reads_only_its_rows(bool moe, const char *mesh, const char *rules,
                                const char *param, int64_t at, const char *hf, int64_t hf_at_) {
    hf_make_dir();
    load_case lc = {.c = config(moe), .rules = rules};
    lc.whole = save_model(&lc.c, "n", param, at);
    lc.dir = hf_at("n", "");
    run(&lc, mesh);
    MT_CHECK(lc.st[0] == MT_OK, "device 0 read a row it does not hold: %s", lc.msg[0]);
    MT_CHECK(lc.st[1] == MT_ENAN, "device 1: status %d (%s), want MT_ENAN", lc.st[1],
             lc.msg[1]);
    char want[256];
    snprintf(want, sizeof want, "tensor '%s' holds nan at element %lld", hf, (long long)hf_at_);
    MT_CHECK(strstr(lc.msg[1], want), "device 1's message '%s' lacks \"%s\"", lc.msg[1], want);
    mt_graph_free(lc.whole);
}

#define TENSOR_RULES "vocab=tensor,heads=tensor,kv_heads=tensor,mlp=tensor"
#define EXPERT_RULES "experts=expert,batch=expert"

MT_TEST(hf_dense_blocks_on_tensor2_equal_their_cuts) {
    blocks_equal_cuts(false, "tensor=2", TENSOR_RULES);
}

MT_TEST(hf_moe_blocks_on_expert2_equal_their_cuts) {
    blocks_equal_cuts(true, "expert=2", EXPERT_RULES);
}

/* gate_proj (F = 192 rows of C = 64): its last row is device 1's */
MT_TEST(hf_tensor2_device0_reads_only_its_rows) {
    const int64_t F = config(false).ffn_dim, C = config(false).dim, at = (F - 1) * C + 5;
    MT_CHECK(F == 192 && C == 64, "moe-tiny's shapes changed: F %lld C %lld", (long long)F,
             (long long)C);
    reads_only_its_rows(false, "tensor=2", TENSOR_RULES, "h.0.ffn.w1.w", at,
                        "model.layers.0.mlp.gate_proj.weight", at);
}

/* expert 7's w1: meshtrain's (E, C, F_e) block of expert 7, element (c, f)
 * = Hugging Face's experts.7.w1 (F_e, C) element (f, c) */
MT_TEST(hf_expert2_device0_reads_only_its_experts) {
    const mt_llama_config c = config(true);
    const int64_t E = c.moe.experts, C = c.dim, FE = c.moe.ffn_dim, row = 3, col = 10;
    MT_CHECK(E == 8 && FE == 64, "moe-tiny's experts changed: E %lld F_e %lld", (long long)E,
             (long long)FE);
    reads_only_its_rows(true, "expert=2", EXPERT_RULES, "h.1.moe.w1.w",
                        (E - 1) * C * FE + row * FE + col,
                        "model.layers.1.block_sparse_moe.experts.7.w1.weight", col * C + row);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
