/* test_plan_threads.c — a search on several threads (mt_plan_request.threads,
 * search_workers.c) gives the answer of the search on one, field for field:
 * the counts, the top list in order (ties between equal steps to the layout
 * met first), each family's count, best and line, every refusal reason with
 * its count, ranges and example, the infeasible layouts of one mesh in the
 * order laid out, why nothing fits (the passes on fewer chips, behind the
 * threads' barrier) and the fewest chips. The reference is the one-thread
 * search, which walks the layouts in order and is checked against every
 * layout evaluated without pruning by test_plan_prune. Run under TSan too
 * (the threads share the classes claimed and the steps to beat). The small
 * searches' ties fall within one class, one thread's: the merge's ties
 * between threads are checked by hand on two made-up reports. */
#include "meshtrain.h"
#include "harness.h"
#include "plan_request.h"
#include "plan/search_workers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void same_result(const char *what, int i, const mt_plan_result *a,
                        const mt_plan_result *b) {
    MT_CHECK(!strcmp(a->mesh, b->mesh) && a->step == b->step && a->total == b->total &&
                 a->seq == b->seq && !memcmp(&a->layout, &b->layout, sizeof a->layout) &&
                 !strcmp(a->why, b->why) && !strcmp(a->bound_why, b->bound_why) &&
                 a->mfu == b->mfu && a->feasible == b->feasible,
             "%s: result %d: %s %.17g s %.17g B (seq %lld) '%s' on several threads, %s %.17g s "
             "%.17g B (seq %lld) '%s' on one", what, i, a->mesh, a->step, a->total, a->seq,
             a->why, b->mesh, b->step, b->total, b->seq, b->why);
}

static void same_report(const char *what, const mt_plan_report *a, const mt_plan_report *b) {
    MT_CHECK(a->chips == b->chips && a->n_evaluated == b->n_evaluated &&
                 a->n_feasible == b->n_feasible && a->n_feasible_all == b->n_feasible_all &&
                 a->n_best == b->n_best && a->n_infeasible == b->n_infeasible &&
                 a->n_families == b->n_families && a->n_refusals == b->n_refusals,
             "%s: %d chips, %d evaluated, %d fit (%d on all), %d best, %d infeasible, %d "
             "families, %d reasons on several threads; %d, %d, %d (%d), %d, %d, %d, %d on one",
             what, a->chips, a->n_evaluated, a->n_feasible, a->n_feasible_all, a->n_best,
             a->n_infeasible, a->n_families, a->n_refusals, b->chips, b->n_evaluated,
             b->n_feasible, b->n_feasible_all, b->n_best, b->n_infeasible, b->n_families,
             b->n_refusals);
    for (int i = 0; i < a->n_best && i < b->n_best; i++)
        same_result(what, i, &a->best[i], &b->best[i]);
    for (int i = 0; i < a->n_infeasible && i < b->n_infeasible; i++)
        same_result(what, 100 + i, &a->infeasible[i], &b->infeasible[i]);
    if (a->n_feasible_all) same_result(what, -1, &a->best_all, &b->best_all);
    for (int f = 0; f < a->n_families && f < b->n_families; f++) {
        const mt_plan_family *x = &a->families[f], *y = &b->families[f];
        MT_CHECK(x->n_feasible == y->n_feasible && !strcmp(x->line, y->line),
                 "%s: family %s: %d fit, '%s' on several threads; %d, '%s' on one", what,
                 x->name, x->n_feasible, x->line, y->n_feasible, y->line);
        if (x->n_feasible) same_result(what, -2 - f, &x->best, &y->best);
    }
    for (int i = 0; i < a->n_refusals && i < b->n_refusals; i++) {
        const mt_plan_refusal *x = &a->refusals[i], *y = &b->refusals[i];
        MT_CHECK(x->count == y->count && !strcmp(x->reason, y->reason) &&
                     !strcmp(x->example, y->example),
                 "%s: reason %d: %d x '%s' (e.g. %s) on several threads; %d x '%s' (e.g. %s) "
                 "on one", what, i, x->count, x->reason, x->example, y->count, y->reason,
                 y->example);
    }
    MT_CHECK(!strcmp(a->why_none, b->why_none), "%s: '%s' on several threads, '%s' on one",
             what, a->why_none, b->why_none);
}

/* r searched on 1 thread and on 2 and 3 (2 under the sanitizers), the
 * answers compared; the search must refuse some layouts and (unless
 * `none`) fit some, or it checks little. */
static void check(const char *what, mt_plan_request r, bool none) {
    mt_plan_report one, many;
    r.threads = 1;
    MT_CHECK_OK(mt_plan_search(&r, &one));
    MT_CHECK(one.n_refusals > 0 && (none ? one.n_feasible == 0 : one.n_best > 0),
             "%s: %d reasons, %d fit: the case checks little", what, one.n_refusals,
             one.n_feasible);
    for (int threads = 2; threads <= (MT_TEST_SANITIZED ? 2 : 3); threads++) {
        r.threads = threads;
        MT_CHECK_OK(mt_plan_search(&r, &many));
        same_report(what, &many, &one);
        mt_plan_report_free(&many);
    }
    mt_plan_report_free(&one);
}

/* A GPT of `layers` blocks of width 64 and 4 heads, T = 64. */
static mt_plan_request gpt(mt_gpt_config *m, int layers, double sequences, mt_plan_memory conv,
                           const mt_hardware *hw, int chips) {
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_GPT, m, sizeof *m));
    m->L = layers;
    m->C = 64;
    m->NH = 4;
    m->maxT = 64;
    m->V = 256;
    mt_plan_request r = plan_request_of(MT_MODEL_GPT, m, sizeof *m, 64, sequences,
                                        MT_PRECISION_BF16, conv);
    r.hw = hw;
    r.chips = chips;
    return r;
}

MT_TEST(free_search_is_the_one_thread_answer) {
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("a100-80gb", &hw, NULL, 0));
    mt_gpt_config m;
    /* ties: ZeRO-1 and -2 of one mesh come to one step and memory */
    check("megatron, 8 chips", gpt(&m, 4, 16, MT_PLAN_MEMORY_MEGATRON, hw, 8), false);
    if (!MT_TEST_SANITIZED)   /* 30 s under TSan */
        check("meshtrain, 12 chips", gpt(&m, 4, 24, MT_PLAN_MEMORY_MESHTRAIN, hw, 12), false);
    mt_hardware_free(hw);
}

MT_TEST(one_mesh_lists_its_refusals_in_order) {
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("a100-80gb", &hw, NULL, 0));
    mt_gpt_config m;
    mt_plan_request r = gpt(&m, 4, 6, MT_PLAN_MEMORY_MEGATRON, hw, 8);
    r.mesh = "pipe=2,data=2,tensor=2";   /* 6 sequences: some counts do not split */
    check("one mesh", r, false);
    mt_hardware_free(hw);
}

MT_TEST(nothing_fits_and_fewest_chips) {
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("a100-80gb", &hw, NULL, 0));
    mt_gpt_config m;
    /* 3 sequences a step in 2 microbatches: no layout fits on 12 chips, nor on
       the passes on 8, 4 and 2 that follow while nothing fits (layouts.c) */
    mt_plan_request r = gpt(&m, 4, 3, MT_PLAN_MEMORY_MEGATRON, hw, 12);
    r.microbatches = 2;
    check("nothing fits", r, true);
    /* 9.7e9 parameters at Megatron's 18 bytes: 3 A100s at least */
    r = gpt(&m, 48, 16, MT_PLAN_MEMORY_MEGATRON, hw, 64);
    m.C = 4096;
    m.NH = 32;
    r.min_chips = true;
    check("fewest chips", r, false);
    mt_hardware_free(hw);
}

/* The merge by hand: layouts of equal step and memory from two threads,
 * the second thread's met first (its class came earlier in the order), in
 * the top list, a family's best and the best on all the chips: the one met
 * first wins wherever the threads' reports are merged from. */
MT_TEST(merge_breaks_ties_by_the_order_met) {
    mt__plan_worker *w = calloc(2, sizeof *w);
    mt_plan_result r = {.chips = 8, .feasible = true, .step = 1.0, .total = 2.0};
    for (int i = 0; i < 2; i++) {
        w[i].base.rep = &w[i].rep;
        r.seq = i == 0 ? 7 : 3;   /* thread 1's layout met first */
        snprintf(r.mesh, sizeof r.mesh, "data=%d", i == 0 ? 8 : 4);
        MT_CHECK_OK(mt__plan_keep_best(&w[i].base, &r, 2));
        w[i].rep.n_feasible = w[i].rep.n_feasible_all = w[i].rep.families[1].n_feasible = 1;
        w[i].rep.best_all = w[i].rep.families[1].best = r;
    }
    MT_CHECK_OK(mt__plan_worker_merge(&w[0], &w[1], 2));
    const mt_plan_report *m = &w[0].rep;
    MT_CHECK(m->n_best == 2 && m->best[0].seq == 3 && m->best[1].seq == 7,
             "top list: %d, seq %lld then %lld; want 3 then 7", m->n_best, m->best[0].seq,
             m->n_best > 1 ? m->best[1].seq : -1);
    MT_CHECK(m->families[1].best.seq == 3 && m->best_all.seq == 3 && m->n_feasible == 2,
             "family best seq %lld, best on all seq %lld, %d fit; want 3, 3, 2",
             m->families[1].best.seq, m->best_all.seq, m->n_feasible);
    for (int i = 0; i < 2; i++) mt_plan_report_free(&w[i].rep);
    free(w);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
