/* test_plan_memory_first.c — the search's memory-first refusals
 * (evaluate.c's memory_first: under a convention other than meshtrain a
 * layout is refused for memory from the programs mt__plan_memory_proxy
 * names, at remat none and one sequence, without building its own) give
 * every layout the result its own builds give: each layout of free
 * searches (a GPT whose 12 blocks interpolate between 4 and 8, on 6 chips
 * whose axes of 3 leave parameters whole and, on nodes of 2, straddle them,
 * under meshtrain's convention too, where only those meshes are refused
 * from the proxies; a LLaMA with grouped kv heads
 * and pipelines on 8), under each framework convention, evaluated twice
 * on one search, once building its own programs (the reference: what the
 * search did before) and once memory first (a mesh the nodes cannot lay
 * out refused from the proxies too); every field compared. The
 * device's memory is set between the layouts' smallest and largest, so
 * that both verdicts occur, and the test fails unless some layout was
 * refused from the proxies. */
#include "meshtrain.h"
#include "harness.h"
#include "plan_request.h"
#include "plan/search_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mt__plan_search base;   /* first: the callback's search is this */
    double lo, hi;          /* the totals of the layouts laid out, their range */
    int    compared, differ;
} check_state;

static mt_status totals(mt__plan_search *s, const mt_plan_layout *l) {
    check_state *c = (check_state *)(void *)s;
    mt_plan_result r;
    s->own_builds = true;
    mt_status st = mt__plan_evaluate(s, l, &r);
    s->last_feasible = false;   /* every microbatch count laid out */
    if (st == MT_OK && r.total > 0) {
        if (c->lo == 0 || r.total < c->lo) c->lo = r.total;
        if (r.total > c->hi) c->hi = r.total;
    }
    return st;
}

/* Whether a and b are one result, field by field (strings to their end). */
static bool same_result(const mt_plan_result *a, const mt_plan_result *b) {
    mt_plan_result x = *a, y = *b;
    return !strcmp(x.why, y.why) && !strcmp(x.mesh, y.mesh) && x.feasible == y.feasible &&
           x.total == y.total && x.params == y.params && x.grads == y.grads &&
           x.optimizer == y.optimizer && x.activations == y.activations &&
           x.temporaries == y.temporaries && x.reserve == y.reserve && x.margin == y.margin &&
           x.peak_stage == y.peak_stage && x.n_stages == y.n_stages &&
           x.last_stage_total == y.last_stage_total &&
           x.last_stage_activations == y.last_stage_activations &&
           !memcmp(x.stage_total, y.stage_total, sizeof x.stage_total) &&
           !memcmp(x.stage_activations, y.stage_activations, sizeof x.stage_activations) &&
           x.step == y.step && x.mfu == y.mfu && !strcmp(x.bound_why, y.bound_why);
}

static mt_status compare(mt__plan_search *s, const mt_plan_layout *l) {
    check_state *c = (check_state *)(void *)s;
    mt_plan_result own, first;
    s->own_builds = true;
    mt_status st = mt__plan_evaluate(s, l, &own);
    if (st != MT_OK) return st;
    s->own_builds = false;
    if ((st = mt__plan_evaluate(s, l, &first)) != MT_OK) return st;
    s->last_feasible = false;
    c->compared++;
    if (!same_result(&own, &first)) {
        if (c->differ++ < 5)
            MT_CHECK(false, "%s zero %d remat %d sp %d mb %d: own builds '%s' %.17g B, memory "
                     "first '%s' %.17g B", own.mesh, l->zero, (int)l->remat,
                     l->sequence_parallel, l->microbatches, own.why, own.total, first.why,
                     first.total);
    }
    return MT_OK;
}

/* Every layout of request r on `chips` chips, own builds against memory
 * first, with the device's memory between the layouts' totals: `wide` a
 * quarter and three quarters along, else half way. */
static void check_search(mt_plan_request r, mt_hardware *hw, int chips, const char *what,
                         bool wide) {
    check_state c;
    memset(&c, 0, sizeof c);
    mt_plan_report rep;
    memset(&rep, 0, sizeof rep);
    hw->hbm_bytes = 1e18;
    r.hw = hw;
    MT_CHECK_OK(mt__plan_search_begin(&c.base, &r, chips));
    c.base.rep = &rep;
    MT_CHECK_OK(mt__plan_each_layout(&c.base, totals));
    MT_CHECK(c.hi > c.lo && c.lo > 0, "%s: totals %g..%g", what, c.lo, c.hi);
    mt__plan_cache_free(&c.base);
    for (int k = wide ? 1 : 2; k <= (wide ? 3 : 2); k += 2) {
        hw->hbm_bytes = c.lo + (c.hi - c.lo) * k / 4;
        MT_CHECK_OK(mt__plan_search_begin(&c.base, &r, chips));
        c.base.rep = &rep;
        c.compared = c.differ = 0;
        c.base.n_proxy_refused = 0;
        MT_CHECK_OK(mt__plan_each_layout(&c.base, compare));
        MT_CHECK(c.differ == 0, "%s: %d of %d layouts differ", what, c.differ, c.compared);
        MT_CHECK(c.base.n_proxy_refused > 0, "%s at %.4g bytes: no layout refused memory "
                 "first of %d compared (the test checks nothing)", what, hw->hbm_bytes,
                 c.compared);
        mt__plan_cache_free(&c.base);
    }
}

/* 24 sequences of 64 tokens a step in bf16 under `memory`. */
static mt_plan_request request_of(mt_model_kind kind, const void *config, size_t size,
                                  mt_plan_memory memory) {
    return plan_request_of(kind, config, size, 64, 24, MT_PRECISION_BF16, memory);
}

/* The GPT's search under convention `conv`. Under the sanitizers (5x
 * slower: 225 s of the suite's ASan run with every convention, 70 s with
 * megatron's GPT and the LLaMA) none: the LLaMA's case runs megatron's
 * counts-from-the-proxies path there (with grouped kv heads and
 * pipelines), the path each other convention shares (meshtrain's arena
 * path refuses from the proxies only the meshes that straddle nodes); the
 * release build runs every convention at both sizes (CMake's label
 * release). */
static void check_gpt(mt_plan_memory conv) {
    MT_TEST_SKIP_IF(MT_TEST_SANITIZED, "under the sanitizers the LLaMA's megatron search covers "
                    "the proxies' path; the release build runs this convention");
    mt_gpt_config m;
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_GPT, &m, sizeof m));
    m.L = 12;
    m.C = 64;
    m.NH = 4;
    m.maxT = 64;
    m.V = 256;
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("a100-80gb", &hw, NULL, 0));
    /* nodes of 2: an axis of 3 inside one straddles them (a mesh the system
       does not lay out, refused from the proxies too) */
    hw->levels[0].devices = 2;
    char what[64];
    snprintf(what, sizeof what, "gpt --memory %s", mt_plan_memory_name(conv));
    check_search(request_of(MT_MODEL_GPT, &m, sizeof m, conv), hw, 6, what,
                 conv == MT_PLAN_MEMORY_MEGATRON);
    mt_hardware_free(hw);
}

MT_TEST(memory_first_gives_own_builds_results_gpt_meshtrain) {
    check_gpt(MT_PLAN_MEMORY_MESHTRAIN);
}

MT_TEST(memory_first_gives_own_builds_results_gpt_megatron) {
    check_gpt(MT_PLAN_MEMORY_MEGATRON);
}

MT_TEST(memory_first_gives_own_builds_results_gpt_deepspeed) {
    check_gpt(MT_PLAN_MEMORY_DEEPSPEED);
}

MT_TEST(memory_first_gives_own_builds_results_gpt_torchtitan) {
    check_gpt(MT_PLAN_MEMORY_TORCHTITAN);
}

MT_TEST(memory_first_gives_own_builds_results_gpt_mixed16) {
    check_gpt(MT_PLAN_MEMORY_MIXED16);
}

MT_TEST(memory_first_gives_own_builds_results_gpt_book) {
    check_gpt(MT_PLAN_MEMORY_BOOK);
}

MT_TEST(memory_first_gives_own_builds_results_llama) {
    mt_llama_config m;
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_LLAMA, &m, sizeof m));
    m.dim = 128;
    m.n_layers = 10;
    m.n_heads = 4;
    m.n_kv_heads = 2;
    m.vocab = 512;
    m.max_seq = 64;
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("h100-sxm", &hw, NULL, 0));
    check_search(request_of(MT_MODEL_LLAMA, &m, sizeof m, MT_PLAN_MEMORY_MEGATRON), hw, 8,
                 "llama --memory megatron", false);
    mt_hardware_free(hw);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
