/* test_plan_expert.c — the planner's expert axis (issue 42 item 5;
 * docs/moe.md, "Planning a mixture of experts"), each figure against a
 * reference computed by hand here:
 * - the all-to-all bytes a device sends a step on --mesh expert=P (and
 *   data=2 x expert=2): each MoE block's three expert products (w1, w3:
 *   D -> F_e; w2: F_e -> D) exchange their N = tokens·k rows forward,
 *   in bwd_x and in bwd_w, (P-1)/P of them leaving, C + OC wide, f32, plus
 *   the counts' all-to-all (E/P int32 to each of P-1 peers): by hand from
 *   the config, times the MoE blocks;
 * - the parameters a device stores: Ψ less (1 - 1/P) of the experts'
 *   E·3·D·F_e a MoE block, Ψ counted from the config by hand; gradients
 *   as many, AdamW's moments twice;
 * - the receive buffers at the dropless worst case: every source's N rows
 *   on one device, four buffers of P·N rows max(C, OC) wide, and the
 *   temporaries the plan counts hold them;
 * - the exchanges' seconds: an expert axis inside a node at NVLink's bus
 *   bandwidth, one across two nodes at the network's, by hand;
 * - the free search of Qwen3-235B-A22B on 256 H100s, 4M tokens of 4096:
 *   its best layout has an expert axis and beats the best pure-FSDP one,
 *   which is communication-bound (docs/moe.md's table);
 * - a dense model's free search lays out no expert axis, and --mesh
 *   expert=2 on it is refused, counted among the refusals;
 * - an expert axis that does not divide E is refused, with the reason,
 *   counted among the refusals. */
#include "meshtrain.h"
#include "harness.h"
#include "plan_request.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static mt_llama_config preset(const char *name) {
    mt_llama_config m;
    MT_CHECK_OK(mt_llama_preset(name, &m));
    return m;
}

static mt_hardware *h100(void) {
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("h100-sxm", &hw, NULL, 0));
    return hw;
}

/* The report of one fixed layout of m (no remat, ZeRO 0, one microbatch,
 * fp32: the trainer's f32 rows on the wire) on `mesh`, `seqs` sequences of
 * `seq`. */
static mt_plan_report one_layout(const mt_llama_config *m, const mt_hardware *hw,
                                 const char *mesh, int chips, int seq, double seqs) {
    mt_plan_request q = plan_layout_request(m, hw, mesh, chips, seq, seqs,
                                            MT_PLAN_MEMORY_MESHTRAIN, MT_PRECISION_FP32);
    mt_plan_report rep;
    MT_CHECK_OK(mt_plan_search(&q, &rep));
    MT_CHECK(rep.n_evaluated == 1, "%s: %d layouts evaluated", mesh, rep.n_evaluated);
    return rep;
}

/* The MoE blocks of m. */
static int moe_blocks(const mt_llama_config *m) {
    int n = 0;
    for (int l = 0; l < m->n_layers; l++)
        n += m->moe.experts > 0 && l >= m->moe.first_dense &&
             (l - m->moe.first_dense) % (m->moe.every > 0 ? m->moe.every : 1) == 0;
    return n;
}

/* Ψ of LLaMA m (untied head), by hand: the table, the head, the last norm;
 * each block's attention, two norms, and its SwiGLU or its MoE (E experts
 * of 3·D·F_e, the shared ones, the router D·E). */
static double psi(const mt_llama_config *m) {
    const double D = m->dim, V = m->vocab, HS = m->dim / m->n_heads;
    const double NH = m->n_heads, KV = m->n_kv_heads, E = m->moe.experts;
    const double Fe = m->moe.ffn_dim, Fs = m->moe.shared * m->moe.ffn_dim, F = m->ffn_dim;
    const int moe = moe_blocks(m);
    double n = 2 * V * D + D;
    n += m->n_layers * (2 * NH * HS * D + 2 * KV * HS * D + 2 * D);
    n += (m->n_layers - moe) * 3 * D * F + moe * (E * 3 * D * Fe + 3 * D * Fs + D * E);
    return n;
}

/* The all-to-all over the expert axis in r's volumes (NULL: none). */
static const mt_plan_volume *expert_a2a(const mt_plan_result *r) {
    for (int i = 0; i < r->n_volumes; i++)
        if (!strcmp(r->volumes[i].kind, "all-to-all") && !strcmp(r->volumes[i].axes, "expert"))
            return &r->volumes[i];
    return NULL;
}

MT_TEST(expert_exchanges_and_memory_are_the_closed_forms) {
    mt_hardware *hw = h100();
    mt_llama_config m = preset("moe-tiny");
    MT_CHECK(m.tie_embeddings == 0, "moe-tiny's head is its own (the count below)");
    const double D = m.dim, Fe = m.moe.ffn_dim, E = m.moe.experts, k = m.moe.top_k;
    const double T = 256, seqs = 16, blocks = moe_blocks(&m);
    MT_CHECK(blocks == 3, "moe-tiny: %g MoE blocks (4 less its first dense one)", blocks);
    const struct {
        const char *mesh;
        int chips, P, replicas;
    } cases[] = {{"expert=2", 2, 2, 2}, {"expert=4", 4, 4, 4}, {"data=2,expert=2", 4, 2, 4}};
    for (int c = 0; c < 3; c++) {
        const double P = cases[c].P;
        mt_plan_report rep = one_layout(&m, hw, cases[c].mesh, cases[c].chips, (int)T, seqs);
        MT_CHECK(rep.n_best == 1, "%s: fits", cases[c].mesh);
        const mt_plan_result *r = &rep.best[0];
        MT_CHECK(r->layout.expert == cases[c].P, "%s: expert=%d", cases[c].mesh,
                 r->layout.expert);
        /* N rows a device: its sequences' tokens, k each */
        const double N = seqs / cases[c].replicas * T * k;
        /* dispatch + combine of each product: out C wide, back OC wide;
           the two of w1 and w3 (D -> F_e) and w2 (F_e -> D) all move
           D + F_e a row; forward, bwd_x, bwd_w: 9 a block */
        const double rows = 9 * blocks * N * (P - 1) / P * (D + Fe) * 4;
        const double counts = 9 * blocks * (E / P) * (P - 1) * 4;
        const mt_plan_volume *v = expert_a2a(r);
        MT_CHECK(v != NULL, "%s: an all-to-all over expert", cases[c].mesh);
        if (v) {
            MT_CHECK(v->group == cases[c].P, "%s: group %d", cases[c].mesh, v->group);
            MT_CHECK(fabs(v->sent - (rows + counts)) <= 1e-9 * (rows + counts),
                     "%s: all-to-all sent %.0f bytes a step, by hand %.0f", cases[c].mesh,
                     v->sent, rows + counts);
            MT_CHECK(fabs(v->size - (rows + counts) * P / (P - 1)) <= 1e-9 * v->size,
                     "%s: nccl size %.0f, by hand %.0f", cases[c].mesh, v->size,
                     (rows + counts) * P / (P - 1));
        }
        /* each device stores 1/P of every MoE block's experts */
        const double stored = psi(&m) - blocks * E * 3 * D * Fe * (1 - 1 / P);
        MT_CHECK(r->params == 4 * stored, "%s: parameters %.0f bytes, by hand %.0f",
                 cases[c].mesh, r->params, 4 * stored);
        MT_CHECK(r->grads == 4 * stored && r->optimizer == 8 * stored,
                 "%s: gradients %.0f, optimizer %.0f, by hand %.0f and %.0f", cases[c].mesh,
                 r->grads, r->optimizer, 4 * stored, 8 * stored);
        /* the dropless worst case: four row buffers of P·N rows, max(C, OC)
           = max(D, F_e) wide, f32 (every source's rows on this device) */
        const double worst = 4 * (4 * P * N * fmax(D, Fe));
        MT_CHECK(r->temporaries >= worst && r->temporaries < 1.25 * worst,
                 "%s: temporaries %.0f bytes, the worst-case receive buffers %.0f",
                 cases[c].mesh, r->temporaries, worst);
        mt_plan_report_free(&rep);
    }
    mt_hardware_free(hw);
}

MT_TEST(the_all_to_alls_ride_the_links_the_axis_spans) {
    /* moe-tiny with 16 experts, 4096 sequences of 256 on 16 H100s (nodes
       of 8): expert=8 inside a node exchanges over NVLink, 18 links of 25
       GB/s at NCCL's 370/450 (hardware/h100-sxm.json's sources); expert=16
       spans two nodes, and half of each device's buffer crosses the
       network, 50 GB/s a GPU at the same fraction. The rows' exchanges
       block the compute, so they are the step's exposed communication (the
       dense gradients' all-reduce is 0.6 MiB) */
    mt_hardware *hw = h100();
    mt_llama_config m = preset("moe-tiny");
    m.moe.experts = 16;
    const double nvlink = 18 * 25e9 * 370 / 450, ib = 50e9 * 370 / 450;
    mt_plan_report in = one_layout(&m, hw, "data=2,expert=8", 16, 256, 4096);
    mt_plan_report across = one_layout(&m, hw, "expert=16", 16, 256, 4096);
    MT_CHECK(in.n_best == 1 && across.n_best == 1, "both fit");
    if (in.n_best == 1 && across.n_best == 1) {
        const mt_plan_volume *a = expert_a2a(&in.best[0]), *b = expert_a2a(&across.best[0]);
        MT_CHECK(a && b, "all-to-alls over expert");
        if (a && b) {
            const double t_in = a->size * 7 / 8 / nvlink, t_across = b->size * 8 / 16 / ib;
            MT_CHECK(fabs(in.best[0].comm_exposed - t_in) < 0.03 * t_in,
                     "expert=8 in a node: %.4g s exposed, by hand %.4g s over NVLink",
                     in.best[0].comm_exposed, t_in);
            MT_CHECK(fabs(across.best[0].comm_exposed - t_across) < 0.03 * t_across,
                     "expert=16 over two nodes: %.4g s exposed, by hand %.4g s over the "
                     "network", across.best[0].comm_exposed, t_across);
        }
    }
    mt_plan_report_free(&in);
    mt_plan_report_free(&across);
    mt_hardware_free(hw);
}

MT_TEST(an_expert_axis_that_does_not_divide_is_refused) {
    mt_hardware *hw = h100();
    mt_llama_config m = preset("moe-tiny");
    /* 24 sequences split over 3 replicas: only the experts do not */
    mt_plan_report rep = one_layout(&m, hw, "expert=3", 3, 256, 24);
    MT_CHECK(rep.n_best == 0, "8 experts over expert=3: refused");
    bool counted = false;
    for (int i = 0; i < rep.n_refusals; i++)
        counted |= strstr(rep.refusals[i].reason, "8 experts do not split over expert=3") &&
                   rep.refusals[i].count == 1;
    MT_CHECK(counted, "the refusal is counted with its reason ('%s')",
             rep.n_refusals ? rep.refusals[0].reason : "none");
    mt_plan_report_free(&rep);
    /* a dense model has no experts to split */
    mt_llama_config d = preset("moe-tiny");
    memset(&d.moe, 0, sizeof d.moe);
    rep = one_layout(&d, hw, "expert=2", 2, 256, 16);
    MT_CHECK(rep.n_best == 0 && rep.n_refusals == 1 &&
             strstr(rep.refusals[0].reason, "no experts"),
             "dense on expert=2: refused for its experts ('%s')",
             rep.n_refusals ? rep.refusals[0].reason : "none");
    mt_plan_report_free(&rep);
    mt_hardware_free(hw);
}

/* A free search of m on `chips` h100s, seqs sequences of T. */
static mt_plan_report free_search(const mt_llama_config *m, const mt_hardware *hw, int chips,
                                  int T, double seqs) {
    mt_plan_request q = plan_request_of(MT_MODEL_LLAMA, m, sizeof *m, T, seqs,
                                        MT_PRECISION_BF16, MT_PLAN_MEMORY_MESHTRAIN);
    q.hw = hw;
    q.chips = chips;
    mt_plan_report rep;
    MT_CHECK_OK(mt_plan_search(&q, &rep));
    return rep;
}

static const mt_plan_family *family(const mt_plan_report *rep, const char *name) {
    for (int i = 0; i < rep->n_families; i++)
        if (!strcmp(rep->families[i].name, name)) return &rep->families[i];
    return NULL;
}

MT_TEST(a_dense_model_never_gets_an_expert_axis) {
    mt_hardware *hw = h100();
    mt_llama_config d = preset("moe-tiny");
    memset(&d.moe, 0, sizeof d.moe);
    mt_plan_report rep = free_search(&d, hw, 8, 256, 64);
    MT_CHECK(rep.n_best > 0, "the dense twin fits on 8 chips");
    for (int i = 0; i < rep.n_best; i++)
        MT_CHECK(rep.best[i].layout.expert <= 1 && !strstr(rep.best[i].mesh, "expert"),
                 "dense: %s", rep.best[i].mesh);
    MT_CHECK(family(&rep, "expert parallel") == NULL, "dense: no expert family");
    mt_plan_report_free(&rep);
    /* its MoE original searches the divisors of E = 8 on 8 chips */
    mt_llama_config m = preset("moe-tiny");
    rep = free_search(&m, hw, 8, 256, 64);
    const mt_plan_family *f = family(&rep, "expert parallel");
    MT_CHECK(f && f->n_feasible > 0 && f->best.layout.expert > 1 &&
             m.moe.experts % f->best.layout.expert == 0,
             "moe-tiny: expert layouts searched (%d feasible)", f ? f->n_feasible : -1);
    mt_plan_report_free(&rep);
    mt_hardware_free(hw);
}

MT_TEST(qwen3_235b_plans_an_expert_axis) {
    /* 256 H100s of 96 GB, 4M tokens of 4096 (1024 sequences, 4 a device):
       on fsdp alone every device gathers all 128 experts of every block
       each microbatch, and the step is communication-bound; an expert axis
       stores 1/P of them and exchanges only the routed rows. (On the 80 GB
       H100 the best expert layout, fsdp=128 x expert=2, sits within 0.1
       GiB of the memory: the 96 GB part leaves this check a margin.) */
    MT_TEST_SKIP_IF(MT_TEST_SANITIZED, "the 256-chip search takes 11 s in release: the "
                    "expert axis's parts run under the sanitizers in the tests above");
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("h100-96gb", &hw, NULL, 0));
    mt_llama_config m = preset("qwen3-235b-a22b");
    mt_plan_report rep = free_search(&m, hw, 256, 4096, 1024);
    MT_CHECK(rep.n_best > 0, "qwen3-235b-a22b fits on 256 h100-96gb");
    const mt_plan_family *fsdp = family(&rep, "pure FSDP");
    MT_CHECK(rep.n_best > 0 && rep.best[0].layout.expert > 1 &&
             m.moe.experts % rep.best[0].layout.expert == 0,
             "the best layout has an expert axis: %s", rep.n_best ? rep.best[0].mesh : "-");
    MT_CHECK(fsdp && fsdp->n_feasible > 0 && !strcmp(fsdp->best.bound, "communication"),
             "pure FSDP's best is communication-bound (%s)", fsdp ? fsdp->best.bound : "-");
    if (rep.n_best && fsdp && fsdp->n_feasible)
        MT_CHECK(rep.best[0].step < fsdp->best.step && rep.best[0].comm_exposed <
                                                            fsdp->best.comm_exposed,
                 "expert %s: %.2f s (%.2f s exposed) against pure FSDP %s: %.2f s (%.2f s)",
                 rep.best[0].mesh, rep.best[0].step, rep.best[0].comm_exposed,
                 fsdp->best.mesh, fsdp->best.step, fsdp->best.comm_exposed);
    if (rep.n_best) {
        const mt_plan_volume *v = expert_a2a(&rep.best[0]);
        MT_CHECK(v && v->sent > 0, "its all-to-alls are costed over expert");
    }
    mt_plan_report_free(&rep);
    mt_hardware_free(hw);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
