/* test_plan_memory_stages.c — the activations each pipeline stage holds
 * under every schedule (mt_plan_result.stage_activations), against the
 * published in-flight counts, computed by hand here in layers' worth of
 * Korthikanti et al.'s per-layer bytes:
 * - GPipe: every stage all m microbatches of its L/p layers;
 * - 1F1B: stage i holds p - i microbatches, the first L layers' worth
 *   whatever p (Korthikanti §4.2.3);
 * - interleaved (v chunks): the first stage L·(1 + (p-1)/(p·v))
 *   (Korthikanti §4.2.3, their m the chunks a device);
 * - ZB-H1 and ZB-V: p microbatches; ZB-H2: 2p - 1 (Qi et al., "Zero
 *   Bubble Pipeline Parallelism", ICLR 2024, Table 1); DualPipeV: PP + 1
 *   microbatches of one of its PP = 2p chunks (the DualPipe repository's
 *   table), counted freed at B; the planner holds
 *   them until W, so at least those counts and at most GPipe's.
 * The result's total is its peak stage's. */
#include "meshtrain.h"
#include "harness.h"
#include "plan/memory.h"
#include "plan/search_impl.h"

enum { P = 4, M = 8, L = 8 };

/* GPT L=8 C=64 NH=4 at s = 16, one sequence a microbatch: Korthikanti's
 * layer sbh(34 + 5as/h) = 16·64·(34 + 5·4·16/64) = 1024·39 bytes. */
static const double LAYER = 16.0 * 64 * (34 + 5.0 * 4 * 16 / 64);

static mt_plan_result stages_of(mt__plan_search *s, int kind) {
    mt_plan_layout l = {.data = 1, .fsdp = 1, .tensor = 1, .pipe = P, .zero = 0,
                        .remat = MT_REMAT_NONE, .schedule = kind, .chunks = 0,
                        .microbatches = M};
    mt_plan_result r;
    MT_CHECK_OK(mt__plan_evaluate(s, &l, &r));
    MT_CHECK(r.feasible, "%s: %s", mt_schedule_kind_name((mt_schedule_kind)kind), r.why);
    return r;
}

/* The result's total is its peak stage's, the most of any, and the margin
 * is the chip's memory less it. */
static void check_peak(const mt_plan_result *r, const mt_hardware *hw, const char *name) {
    double most = 0;
    for (int st = 0; st < r->n_stages; st++) most = fmax(most, r->stage_total[st]);
    MT_CHECK(r->total == most && r->total == r->stage_total[r->peak_stage], "%s: total %g is "
             "not the peak stage %d's (%g)", name, r->total, r->peak_stage, most);
    MT_CHECK(r->margin == hw->hbm_bytes - r->total, "%s: margin %g", name, r->margin);
}

MT_TEST(stage_activations_are_the_published_counts) {
    mt_gpt_config g;
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_GPT, &g, sizeof g));
    g.L = L, g.C = 64, g.NH = 4, g.V = 256, g.maxT = 64;
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("h100-sxm", &hw, NULL, 0));
    mt_plan_request q = mt_plan_request_defaults();
    q.model = mt_train_defaults();
    q.model.model_config = &g;
    q.model.model_config_size = sizeof g;
    q.hw = hw;
    q.chips = P;
    q.seq = 16;
    q.batch_tokens = (double)M * 16;   /* one sequence a microbatch */
    q.memory = MT_PLAN_MEMORY_MIXED16;
    mt__plan_search s;
    MT_CHECK_OK(mt__plan_search_begin(&s, &q, P));
    /* by hand, layers' worth on stages 0..3 */
    const double lp = (double)L / P;   /* a stage's layers */
    const struct { int kind; double want[P]; } exact[] = {
        {MT_SCHEDULE_GPIPE, {M * lp, M * lp, M * lp, M * lp}},
        {MT_SCHEDULE_1F1B, {4 * lp, 3 * lp, 2 * lp, 1 * lp}},
        /* Korthikanti's first stage, v = 2: L(1 + (p-1)/(p·v)) = 11 layers; the
           others by Megatron's warm-up, 2(p-1-i) + (v-1)p + 1 chunks of L/(p·v) */
        {MT_SCHEDULE_INTERLEAVED, {L * (1 + (P - 1.0) / (P * 2)), 9, 7, 5}},
    };
    for (size_t i = 0; i < sizeof exact / sizeof *exact; i++) {
        mt_plan_result r = stages_of(&s, exact[i].kind);
        const char *name = mt_schedule_kind_name((mt_schedule_kind)exact[i].kind);
        MT_CHECK(r.n_stages == P, "%s: %d stages", name, r.n_stages);
        for (int st = 0; st < P; st++)
            MT_CHECK_CLOSE(r.stage_activations[st] / LAYER, exact[i].want[st], 1e-12,
                           "%s stage %d: %g layers' worth, published %g", name, st,
                           r.stage_activations[st] / LAYER, exact[i].want[st]);
        MT_CHECK(r.peak_stage == 0 || r.stage_total[r.peak_stage] == r.stage_total[0],
                 "%s: the first stage needs most, not %d", name, r.peak_stage);
        check_peak(&r, hw, name);
    }
    /* The zero-bubble schedules: the planner holds a microbatch's activations
     * from its F until its W (W needs the layers' inputs), where the papers'
     * p·M_B (ZB-H1, ZB-V) and (2p-1)·M_B (ZB-H2) count them freed at B
     * (`meshtrain schedule --w-memory 0`). So each holds at least the papers'
     * count, one microbatch more at most, and never more than GPipe's m. */
    const struct { int kind; double paper; } zb[] = {
        {MT_SCHEDULE_ZB_H1, P * lp}, {MT_SCHEDULE_ZB_H2, (2 * P - 1) * lp},
        {MT_SCHEDULE_ZB_V, P * lp}, {MT_SCHEDULE_DUALPIPEV, (2 * P + 1) * lp / 2},
    };
    for (size_t i = 0; i < sizeof zb / sizeof *zb; i++) {
        mt_plan_result r = stages_of(&s, zb[i].kind);
        const char *name = mt_schedule_kind_name((mt_schedule_kind)zb[i].kind);
        double most = 0;
        for (int st = 0; st < P; st++) most = fmax(most, r.stage_activations[st] / LAYER);
        MT_CHECK(most >= zb[i].paper && most <= M * lp, "%s: the most a stage holds, %g "
                 "layers' worth, is outside the paper's %g .. GPipe's %g", name, most,
                 zb[i].paper, M * lp);
        check_peak(&r, hw, name);
    }
    mt__plan_cache_free(&s);
    mt_hardware_free(hw);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
