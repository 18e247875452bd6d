/* test_plan_step_pipe.c — a pipelined step's time (src/plan/step.c) with
 * messages between stages and data-parallel reductions, as meshtrain runs
 * them (each W) and as the scaling book does (once, after the flush), on
 * test_plan_step.c's hand-made system: products at 2e12 FLOP/s, a
 * 2-device all-reduce of V bytes V / 5e9 s, a permute V / (link 1e10 x
 * fraction 0.5) = V / 5e9 s, AdamW under bf16 38 bytes an element at
 * 5e10 B/s. */
#include "meshtrain.h"
#include "harness.h"
#include "plan/step.h"
#include "plan_unit_hw.h"

static mt__plan_node mm(char ph, double flops) {
    return (mt__plan_node){.phase = ph, .cls = MT__PN_MATMUL, .flops = flops, .bytes = 1e6};
}

/* data=2,pipe=2 (pipe innermost), GPipe, m = 2; each chunk: F a product
 * 1 s, B 1 s, W a product 0.5 s then its gradient's all-reduce over data
 * of 5e9 bytes (1 s, nothing after it to hide under); messages of 5e8
 * bytes (0.1 s); 1e6 stored elements (AdamW 7.6e-4 s).
 *
 * Each W reduces (meshtrain): f = 1, BW = 1 + 0.5 + 1 = 2.5. Stage 0 runs
 * F0 [0, 1], F1 [1, 2]; stage 1 F0 [1.1, 2.1], F1 [2.1, 3.1], BW0 [3.1,
 * 5.6], BW1 [5.6, 8.1]; stage 0 BW0 [5.7, 8.2], BW1 [8.2, 10.7]: the
 * makespan (m + p - 1)(f + BW) + 2 (p - 1) x 0.1 = 10.7 s, step 10.70076;
 * a stage is busy 2 x 3.5 = 7 s: bubble 3.7 s; exposed: 2 x 1 s.
 *
 * Reduced once (the book): BW = 1.5, makespan 3 x 2.5 + 0.2 = 7.7 s, then
 * the all-reduce after the flush, 1 s exposed, and AdamW: 8.70076 s;
 * bubble 7.7 - 2 x 2.5 = 2.7 s. */
MT_TEST(pipeline_with_messages_and_reductions) {
    mt_hardware hw = unit_hw();
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create("data=2,pipe=2", 4, &mesh));
    mt__plan_node ar = {.phase = 'W', .cls = MT__PN_COLLECTIVE, .kind = MT__PC_ALL_REDUCE,
                        .comm_bytes = 5e9, .grad_reduce = true};
    MT_CHECK_OK(mt_mesh_axes(mesh, "data", &ar.axes));
    mt__plan_node n[] = {mm('F', 2e12), mm('B', 2e12), mm('W', 1e12), ar};
    mt__plan_program p[2];
    for (int k = 0; k < 2; k++)
        p[k] = (mt__plan_program){.n_nodes = 4, .nodes = n, .param_elems = 1000000};
    mt__plan_step_in in = {.hw = &hw, .mesh = mesh, .precision = MT_PRECISION_BF16,
                           .programs = p, .stages = 2, .chunks = 1,
                           .schedule = MT_SCHEDULE_GPIPE, .microbatches = 2,
                           .message_bytes = 5e8, .reduce = MT__PLAN_REDUCE_EACH};
    mt__plan_step_result r;
    MT_CHECK_OK(mt__plan_step(&in, &r));
    MT_CHECK_CLOSE(r.message, 0.1, 1e-9, "message");
    MT_CHECK_CLOSE(r.step, 10.70076, 1e-9, "each: step");
    MT_CHECK_CLOSE(r.bubble, 3.7, 1e-9, "each: bubble");
    MT_CHECK_CLOSE(r.comm_exposed, 2.0, 1e-9, "each: exposed");
    MT_CHECK_CLOSE(r.phase[2], 1.5, 1e-9, "each: W with its reduction");
    MT_CHECK_CLOSE(r.peak_in_flight, 2, 1e-12, "GPipe holds m microbatches");
    MT_CHECK_CLOSE(r.compute + r.comm_exposed + r.bubble + r.optimizer, r.step, 1e-12,
                   "each: identity");
    in.reduce = MT__PLAN_REDUCE_ONCE;
    MT_CHECK_OK(mt__plan_step(&in, &r));
    MT_CHECK_CLOSE(r.step, 8.70076, 1e-9, "once: step");
    MT_CHECK_CLOSE(r.bubble, 2.7, 1e-9, "once: bubble");
    MT_CHECK_CLOSE(r.comm_exposed, 1.0, 1e-9, "once: exposed after the flush");
    MT_CHECK_CLOSE(r.comm[0].seconds, 1.0, 1e-9, "once: one all-reduce a step");
    MT_CHECK_CLOSE(r.compute + r.comm_exposed + r.bubble + r.optimizer, r.step, 1e-12,
                   "once: identity");
    /* a stage's products, 2 x 2.5 = 5 s, outweigh the bubble (2.7 s) and
       the exposed reduction (1 s): compute binds */
    MT_CHECK(r.bound == MT__PLAN_BOUND_COMPUTE, "once: %s", r.reason);
    /* ZB-H1 splits B and W: its W's leave their reductions to the chunk's
       last one too (the executor), so once moves one all-reduce a step,
       exposed after the flush (1 s), where each moves one a microbatch */
    in.schedule = MT_SCHEDULE_ZB_H1;
    in.reduce = MT__PLAN_REDUCE_EACH;
    mt__plan_step_result each;
    MT_CHECK_OK(mt__plan_step(&in, &each));
    MT_CHECK(fabs(each.comm[0].seconds - 2.0) < 1e-9, "zb-h1 each: an all-reduce a "
             "microbatch: %g s", each.comm[0].seconds);
    in.reduce = MT__PLAN_REDUCE_ONCE;
    MT_CHECK_OK(mt__plan_step(&in, &r));
    MT_CHECK(fabs(r.comm[0].seconds - 1.0) < 1e-9 && fabs(r.comm_exposed - 1.0) < 1e-9,
             "zb-h1 once: one all-reduce a step, exposed after the flush: %g s, exposed %g s",
             r.comm[0].seconds, r.comm_exposed);
    MT_CHECK(r.step < each.step, "zb-h1: once %g s, each %g s", r.step, each.step);
    MT_CHECK_CLOSE(r.compute + r.comm_exposed + r.bubble + r.optimizer, r.step, 1e-12,
                   "zb-h1 once: identity");
    mt_mesh_free(mesh);
}

/* Without a pipe axis named as the stages say, or with the wrong size. */
MT_TEST(pipeline_refusals) {
    mt_hardware hw = unit_hw();
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create("data=2,pipe=2", 4, &mesh));
    mt__plan_node n[] = {mm('F', 2e12), mm('B', 2e12)};
    mt__plan_program p[4];
    for (int k = 0; k < 4; k++) p[k] = (mt__plan_program){.n_nodes = 2, .nodes = n};
    mt__plan_step_in in = {.hw = &hw, .mesh = mesh, .programs = p, .stages = 4, .chunks = 1,
                           .schedule = MT_SCHEDULE_1F1B, .microbatches = 4};
    mt__plan_step_result r;
    MT_CHECK_FAILS(mt__plan_step(&in, &r), MT_EINVAL, "stages=4", "another size");
    /* the schedule's own rule (m >= p) passes through */
    in.stages = 2;
    in.microbatches = 1;
    MT_CHECK(mt__plan_step(&in, &r) == MT_EINVAL, "m < p refused: %s", mt_errmsg());
    mt_mesh_free(mesh);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
