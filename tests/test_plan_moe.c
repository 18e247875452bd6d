/* test_plan_moe.c — the planner on mixtures of experts (issue 42 item 5;
 * docs/moe.md, "Planning a mixture of experts"), each figure against a
 * closed form computed by hand here:
 * - FLOPs a token of moe-tiny and of Mixtral 8x7B: ../shared/MOE.md §6
 *   (Megatron's convention: 18·D·F_e·k + 18·D·F_shared a MoE block, the
 *   router 6·D·E, a dense SwiGLU 18·D·F, attention's projections 6 a
 *   weight and its scores 6·L·NH·HS·T as a dense model's, the head 6·V·D,
 *   6 a norm weight as the trainer's 6N counts them), Mixtral's active
 *   parameters counted from its config.json (12.9B published);
 * - Mixtral 8x7B's model states on fsdp=64 H100 under --memory megatron:
 *   2Ψ/64, 4Ψ/64, 12Ψ/64 for Ψ = 46,702,792,704 (Hugging Face's total);
 * - its activations: Korthikanti's breakdown with the MoE block's routed
 *   rows (memory_forms.c), by hand;
 * - moe-tiny's step on a host of threads against the dense LLaMA of the
 *   same active FLOPs (its dense F = (k + shared)·F_e): within 2x;
 * - a 12-block MoE, its probes' MoE blocks on the line to its own
 *   (--moe-first-dense 1) or not (6, built whole), against Ψ by hand;
 * - plan --mesh on moe-tiny against explain's memory_per_device, with and
 *   without an expert axis, and on tensor (the experts split by their
 *   columns). */
#include "meshtrain.h"
#include "harness.h"
#include "plan_request.h"
#include "plan_unit_hw.h"
#include "explain_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static mt_llama_config preset(const char *name) {
    mt_llama_config m;
    MT_CHECK_OK(mt_llama_preset(name, &m));
    return m;
}

/* One fixed layout's report (mesh, no remat, ZeRO 0, bf16) on hw. */
static mt_plan_report one_layout(const mt_llama_config *m, const mt_hardware *hw,
                                 const char *mesh, int chips, int seq, double seqs,
                                 mt_plan_memory memory, mt_precision precision) {
    mt_plan_request q = plan_layout_request(m, hw, mesh, chips, seq, seqs, memory, precision);
    mt_plan_report rep;
    MT_CHECK_OK(mt_plan_search(&q, &rep));
    MT_CHECK(rep.n_evaluated == 1, "%s: %d layouts evaluated", mesh, rep.n_evaluated);
    return rep;
}

/* MOE.md §6 by hand: FLOPs a token, forward and backward, of LLaMA m at
 * T tokens a sequence; *active its active parameters (the lookup table
 * included, as the published counts do). */
static double moe_flops(const mt_llama_config *m, int T, double *active) {
    const double D = m->dim, L = m->n_layers, V = m->vocab, HS = m->dim / m->n_heads;
    const double NH = m->n_heads, KV = m->n_kv_heads, E = m->moe.experts, k = m->moe.top_k;
    const double Fe = m->moe.ffn_dim, Fs = m->moe.shared * m->moe.ffn_dim, F = m->ffn_dim;
    const double attn = 2 * NH * HS * D + 2 * KV * HS * D, norms = 2 * D;
    double flops = 6 * V * D + 6 * D, n = 2 * V * D + D;   /* the head, the last norm */
    for (int l = 0; l < m->n_layers; l++) {
        const bool moe = l >= m->moe.first_dense && (l - m->moe.first_dense) % m->moe.every == 0;
        flops += 6 * (attn + norms) + (moe ? 18 * D * Fe * k + 18 * D * Fs + 6 * D * E
                                           : 18 * D * F);
        n += attn + norms + (moe ? 3 * D * Fe * k + 3 * D * Fs + D * E : 3 * D * F);
    }
    *active = n;
    return flops + 6 * L * NH * HS * T;
}

static mt_hardware *h100(void) {
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("h100-sxm", &hw, NULL, 0));
    return hw;
}

MT_TEST(flops_a_token_are_megatrons_active_count) {
    mt_hardware *hw = h100();
    mt_llama_config tiny = preset("moe-tiny");
    MT_CHECK(tiny.ffn_dim == 192 && tiny.moe.top_k == 2 && tiny.moe.ffn_dim == 64 &&
             tiny.moe.shared == 1 && tiny.moe.first_dense == 1 && tiny.moe.every == 1,
             "moe-tiny's settings as this test reads them");
    double active = 0;
    mt_plan_report rep = one_layout(&tiny, hw, "data=1", 1, 256, 8, MT_PLAN_MEMORY_MESHTRAIN,
                                    MT_PRECISION_BF16);
    MT_CHECK_CLOSE(rep.flops_per_token, moe_flops(&tiny, 256, &active), 1e-12, "moe-tiny");
    mt_plan_report_free(&rep);
    /* Mixtral 8x7B: 4096 wide, 32 blocks of 32 heads (8 kv) of 128, 8 experts
       of 14336, top 2, vocab 32000, untied */
    mt_llama_config mx = preset("mixtral-8x7b");
    MT_CHECK(mx.dim == 4096 && mx.n_layers == 32 && mx.n_heads == 32 && mx.n_kv_heads == 8 &&
             mx.vocab == 32000 && mx.moe.experts == 8 && mx.moe.top_k == 2 &&
             mx.moe.ffn_dim == 14336 && mx.moe.shared == 0 && mx.moe.first_dense == 0,
             "mixtral-8x7b's config.json");
    rep = one_layout(&mx, hw, "fsdp=64", 64, 4096, 64, MT_PLAN_MEMORY_MEGATRON,
                     MT_PRECISION_BF16);
    const double want = moe_flops(&mx, 4096, &active);
    /* 12,879,925,248 active: Mistral's "12.9B active parameters" */
    MT_CHECK(active == 12879925248.0, "Mixtral's active parameters %.0f", active);
    MT_CHECK_CLOSE(want, 79714344960.0, 1e-15, "Mixtral's FLOPs a token by hand");
    MT_CHECK_CLOSE(rep.flops_per_token, want, 1e-12, "mixtral-8x7b");
    /* the dense count (6 × every parameter) would be 3.4x: the plan's N is total */
    MT_CHECK(rep.model_params == 46702792704.0, "the plan's N %.0f", rep.model_params);
    mt_plan_report_free(&rep);
    mt_hardware_free(hw);
}

MT_TEST(mixtral_states_on_fsdp64_are_megatrons) {
    mt_hardware *hw = h100();
    mt_llama_config mx = preset("mixtral-8x7b");
    const double psi = 46702792704.0, n = 64, T = 4096;
    mt_plan_report rep = one_layout(&mx, hw, "fsdp=64", 64, 4096, 64, MT_PLAN_MEMORY_MEGATRON,
                                    MT_PRECISION_BF16);
    const mt_plan_result *r = rep.n_best ? &rep.best[0] : &rep.infeasible[0];
    /* (it does not fit without remat: Korthikanti's scores, 5as²b, are 2.5 GiB a block) */
    MT_CHECK(rep.n_best + rep.n_infeasible == 1, "one layout");
    MT_CHECK_CLOSE(r->params, 2 * psi / n, 1e-12, "bf16 weights 2Ψ/64");
    MT_CHECK_CLOSE(r->grads, 4 * psi / n, 1e-12, "fp32 main gradients 4Ψ/64");
    MT_CHECK_CLOSE(r->optimizer, 12 * psi / n, 1e-12, "master, m, v 12Ψ/64");
    /* activations of one sequence (64 over 64 replicas, one microbatch):
       Korthikanti's sbh(34 + 5as/h) with the dense MLP's 8·sb·F replaced by
       the 2 routed rows' 8·sb·(2·14336) plus dispatch and combine's rows
       2·2·sb·(2h) and the f32 router logits 4·sb·8, a block; 32 blocks */
    const double s = T, b = 1, h = 4096, a = 32, q = 4096, kv = 8;
    const double layer = 10 * s * b * h + 2 * s * b * q + 4 * s * b * q * kv / a +
                         2 * s * b * q + 8 * s * b * (2 * 14336.0) + 4 * s * b * 2 * h +
                         4 * s * b * 8 + 5 * a * s * s * b;
    MT_CHECK_CLOSE(r->activations, 32 * layer, 1e-12, "Mixtral's activations");
    mt_plan_report_free(&rep);
    mt_hardware_free(hw);
}

MT_TEST(tiny_moe_steps_near_its_dense_twin) {
    /* the unit system's chip as a host of thread devices */
    mt_hardware host = unit_hw();
    host.levels[0].kind = MT_LINK_THREADS;
    host.levels[0].devices = 2;
    mt_llama_config moe = preset("moe-tiny"), dense = moe;
    dense.moe.experts = 0;   /* F 192 = (2 + 1)·64: the same active FLOPs but the router */
    double am = 0, ad = 0;
    const double fm = moe_flops(&moe, 256, &am), fd = moe_flops(&dense, 256, &ad);
    MT_CHECK(fm > fd && fm < 1.01 * fd, "active FLOPs %.0f and %.0f", fm, fd);
    for (int d = 1; d <= 2; d++) {
        const char *mesh = d == 1 ? "data=1" : "data=2";
        mt_plan_report rm = one_layout(&moe, &host, mesh, d, 256, 16, MT_PLAN_MEMORY_MESHTRAIN,
                                       MT_PRECISION_FP32);
        mt_plan_report rd = one_layout(&dense, &host, mesh, d, 256, 16,
                                       MT_PLAN_MEMORY_MESHTRAIN, MT_PRECISION_FP32);
        MT_CHECK(rm.n_best == 1 && rd.n_best == 1, "%s: both fit", mesh);
        const double ratio = rm.best[0].step / rd.best[0].step;
        MT_CHECK(ratio >= 1.0 && ratio <= 2.0, "%s: MoE step %.4g s, dense %.4g s, ratio %.3f",
                 mesh, rm.best[0].step, rd.best[0].step, ratio);
        mt_plan_report_free(&rm);
        mt_plan_report_free(&rd);
    }
}

MT_TEST(moe_blocks_are_counted_at_the_models_depth) {
    /* 12 blocks: the first dense (probes at 4 and 8 blocks hold 3 and 7 MoE
       blocks, on the line to 11: interpolated), or the first 6 dense (the
       probes' 0 and 2 MoE blocks would give 12 blocks 6 ... wrong: 8 by the
       line; built whole) */
    mt_hardware *hw = h100();
    for (int dense = 1; dense <= 6; dense += 5) {
        mt_llama_config m = preset("moe-tiny");
        m.n_layers = 12;
        m.moe.first_dense = dense;
        double active = 0;
        mt_plan_report rep = one_layout(&m, hw, "data=1", 1, 256, 8, MT_PLAN_MEMORY_MEGATRON,
                                        MT_PRECISION_BF16);
        MT_CHECK_CLOSE(rep.flops_per_token, moe_flops(&m, 256, &active), 1e-12, "FLOPs");
        /* Ψ: the active count plus the MoE blocks' idle experts (8 - 2 routed) */
        const double psi = active + (12 - dense) * 6.0 * 3 * 64 * 64;
        MT_CHECK_CLOSE(rep.model_params, psi, 1e-12, "%d dense: N at 12 blocks", dense);
        MT_CHECK_CLOSE(rep.best[0].params, 2 * psi, 1e-12, "%d dense: bf16 weights 2Ψ", dense);
        mt_plan_report_free(&rep);
    }
    mt_hardware_free(hw);
}

/* `meshtrain explain --json`'s memory_per_device for moe-tiny on `mesh`. */
static void explain_bytes(const char *mesh, int devices, double out[4]) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "./meshtrain explain --model llama --preset moe-tiny --batch 16 "
             "--seq 256 --devices %d --mesh %s --json 2>&1", devices, mesh);
    explain_memory(cmd, out);
}

MT_TEST(plan_on_a_mesh_is_what_explain_prints) {
    mt_hardware *hw = h100();
    mt_llama_config m = preset("moe-tiny");
    /* and with the expert axis (tests/test_plan_expert.c: its bytes) */
    const char *meshes[] = {"data=2", "fsdp=2", "data=2,fsdp=2", "expert=2", "expert=4",
                            "data=2,expert=2", "fsdp=2,expert=2",
                            /* the experts split by their columns */
                            "tensor=2", "expert=2,tensor=2"};
    const int n_devices[] = {2, 2, 4, 2, 4, 4, 4, 2, 4};
    for (int i = 0; i < 9; i++) {
        const int devices = n_devices[i];
        mt_plan_report rep = one_layout(&m, hw, meshes[i], devices, 256, 16,
                                        MT_PLAN_MEMORY_MESHTRAIN, MT_PRECISION_FP32);
        MT_CHECK(rep.n_best == 1, "%s: fits", meshes[i]);
        double ex[4];
        explain_bytes(meshes[i], devices, ex);
        const mt_plan_result *r = &rep.best[0];
        const double got[4] = {r->params, r->grads, r->optimizer, r->activations};
        const char *what[4] = {"parameters", "gradients", "optimizer", "activations"};
        for (int k = 0; k < 4; k++)
            MT_CHECK(got[k] == ex[k], "%s: %s %.0f bytes, explain %.0f", meshes[i], what[k],
                     got[k], ex[k]);
        mt_plan_report_free(&rep);
    }
    mt_hardware_free(hw);
}
int main(int argc, char **argv) { return mt_test_main(argc, argv); }
