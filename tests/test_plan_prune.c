/* test_plan_prune.c — the search's pruning (evaluate.c's step_time: a
 * pipeline whose step's lower bound, mt__plan_step_lower, passes every step
 * it would have to beat to be in the report is counted as fitting without
 * its schedule simulated) leaves the report as it was:
 *   1. the bound is a bound: on every pipeline layout of a free search,
 *      with prune_above set to the layout's own step (evaluated without
 *      pruning), the layout is not pruned;
 *   2. the report: mt_plan_search (pruning) against a reference made here
 *      from every layout evaluated without pruning, ranked by step then
 *      memory in the order laid out: the counts, the top list (mesh, step,
 *      memory, schedule, microbatches) and each family's count and best,
 *      under meshtrain's convention and megatron's; the test fails unless
 *      some layout was pruned (else it checks nothing).
 * A GPT of 8 blocks on 8 A100s, 16 sequences a step: pipelines of 2 to 8
 * stages with up to 16 microbatches, most of them far from the best (2161
 * of its 2588 feasible layouts are pruned). Under the sanitizers megatron's
 * convention only (the pruning is one for every convention). Under megatron
 * a pipeline is also pruned before its later roles are built, once the roles
 * built pass the bound (evaluate.c's bound_passes: 2089 of this search's
 * layouts), which the report's comparison covers too. */
#include "meshtrain.h"
#include "harness.h"
#include "plan_request.h"
#include "plan/search_impl.h"

#include <stdlib.h>
#include <string.h>

#define CHIPS 8
#define MAX_KEPT 20000

typedef struct {
    mt__plan_search base;   /* first: the callback's search is this */
    mt_plan_result *kept;   /* (n_kept) the feasible layouts, in the order laid out */
    int n_kept, n_evaluated, bound_broken, pipelines;
} ref_state;

/* Every layout without pruning; feasible ones kept; and on a pipeline the
 * layout again with prune_above its own step, which must not prune it. */
static mt_status reference(mt__plan_search *s, const mt_plan_layout *l) {
    ref_state *c = (ref_state *)(void *)s;
    mt_plan_result r, again;
    mt_status st = mt__plan_evaluate(s, l, &r);
    if (st != MT_OK) return st;
    c->n_evaluated++;
    s->last_feasible = r.feasible;
    if (!r.feasible) return MT_OK;
    s->rep->n_feasible++;
    if (c->n_kept < MAX_KEPT) c->kept[c->n_kept++] = r;
    if (l->pipe > 1) {
        c->pipelines++;
        s->prune_above = r.step;
        st = mt__plan_evaluate(s, l, &again);
        s->prune_above = 0;
        if (st != MT_OK) return st;
        if (s->last_pruned && c->bound_broken++ < 5)
            MT_CHECK(false, "%s %s mb %d: pruned at its own step %.17g s (the bound passes it)",
                     r.mesh, mt_schedule_kind_name((mt_schedule_kind)l->schedule),
                     l->microbatches, r.step);
    }
    return MT_OK;
}

/* The report's families, as search.c groups them (its family_of), by hand:
 * one chip, pure data, ZeRO over data, pure FSDP, FSDP x tensor, pipeline;
 * on 8 chips the report lists the five past the first, in that order. */
static int family(const mt_plan_layout *l) {
    return l->pipe > 1 ? 5 : l->tensor > 1 ? 4 : l->fsdp > 1 ? 3 : l->data > 1 ? (l->zero ? 2 : 1)
                                                                               : 0;
}

static bool faster(const mt_plan_result *a, const mt_plan_result *b) {
    return a->step < b->step || (a->step == b->step && a->total < b->total);
}

static bool same(const mt_plan_result *a, const mt_plan_result *b) {
    return !strcmp(a->mesh, b->mesh) && a->step == b->step && a->total == b->total &&
           a->layout.schedule == b->layout.schedule &&
           a->layout.microbatches == b->layout.microbatches &&
           a->layout.zero == b->layout.zero && a->layout.remat == b->layout.remat;
}

static void check_convention(mt_plan_memory conv) {
    mt_gpt_config m;
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_GPT, &m, sizeof m));
    m.L = 8;
    m.C = 64;
    m.NH = 4;
    m.maxT = 64;
    m.V = 256;
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("a100-80gb", &hw, NULL, 0));
    mt_plan_request r = plan_request_of(MT_MODEL_GPT, &m, sizeof m, 64, 16, MT_PRECISION_BF16,
                                        conv);
    r.hw = hw;
    r.chips = CHIPS;
    const char *what = mt_plan_memory_name(conv);

    mt_plan_report rep;
    MT_CHECK_OK(mt_plan_search(&r, &rep));
    MT_CHECK(rep.n_pruned > 0, "--memory %s: no layout pruned of %d feasible (the test checks "
             "nothing)", what, rep.n_feasible);

    ref_state c;
    memset(&c, 0, sizeof c);
    c.kept = calloc(MAX_KEPT, sizeof *c.kept);
    mt_plan_report ref;
    memset(&ref, 0, sizeof ref);
    MT_CHECK_OK(mt__plan_search_begin(&c.base, &r, CHIPS));
    c.base.rep = &ref;
    MT_CHECK_OK(mt__plan_each_layout(&c.base, reference));
    mt__plan_cache_free(&c.base);
    MT_CHECK(c.bound_broken == 0, "--memory %s: %d of %d pipelines pruned at their own step",
             what, c.bound_broken, c.pipelines);
    MT_CHECK(c.n_kept < MAX_KEPT, "--memory %s: more than %d feasible layouts", what, MAX_KEPT);
    MT_CHECK(rep.n_evaluated == c.n_evaluated && rep.n_feasible == c.n_kept,
             "--memory %s: %d evaluated, %d fit; without pruning %d, %d", what, rep.n_evaluated,
             rep.n_feasible, c.n_evaluated, c.n_kept);

    /* the top list: the fastest in order, the first laid out of equals */
    const int top = r.top;
    bool *taken = calloc((size_t)c.n_kept + 1, sizeof *taken);
    MT_CHECK(rep.n_best == (c.n_kept < top ? c.n_kept : top), "--memory %s: %d in the top list",
             what, rep.n_best);
    for (int i = 0; i < rep.n_best; i++) {
        int at = -1;
        for (int k = 0; k < c.n_kept; k++)
            if (!taken[k] && (at < 0 || faster(&c.kept[k], &c.kept[at]))) at = k;
        if (at < 0) break;
        taken[at] = true;
        MT_CHECK(same(&rep.best[i], &c.kept[at]), "--memory %s: top %d is %s %.17g s, without "
                 "pruning %s %.17g s", what, i + 1, rep.best[i].mesh, rep.best[i].step,
                 c.kept[at].mesh, c.kept[at].step);
    }
    /* each family's count and best */
    MT_CHECK(rep.n_families == 5, "--memory %s: %d families", what, rep.n_families);
    for (int f = 1; f <= 5 && rep.n_families == 5; f++) {
        int n = 0, at = -1;
        for (int k = 0; k < c.n_kept; k++) {
            if (family(&c.kept[k].layout) != f) continue;
            n++;
            if (at < 0 || faster(&c.kept[k], &c.kept[at])) at = k;
        }
        const mt_plan_family *g = &rep.families[f - 1];
        MT_CHECK(g->n_feasible == n, "--memory %s: family %s: %d fit, without pruning %d", what,
                 g->name, g->n_feasible, n);
        if (at >= 0 && g->n_feasible == n)
            MT_CHECK(same(&g->best, &c.kept[at]), "--memory %s: family %s's best %s %.17g s, "
                     "without pruning %s %.17g s", what, g->name, g->best.mesh, g->best.step,
                     c.kept[at].mesh, c.kept[at].step);
    }
    free(taken);
    free(c.kept);
    mt_plan_report_free(&rep);
    mt_hardware_free(hw);
}

MT_TEST(pruned_search_reports_as_unpruned_meshtrain) {
    if (!MT_TEST_SANITIZED) check_convention(MT_PLAN_MEMORY_MESHTRAIN);
}

MT_TEST(pruned_search_reports_as_unpruned_megatron) {
    check_convention(MT_PLAN_MEMORY_MEGATRON);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
