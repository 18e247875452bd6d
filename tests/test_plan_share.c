/* test_plan_share.c — the programs the planner's cache shares between
 * layouts (cache.c's shared_key) are the same program, node for node and
 * byte for byte, when each is built directly as the trainer builds it
 * (mt__plan_program_uncached: no cache, no sharing), on a GPT and a LLaMA
 * with grouped kv heads, fp32 and bf16 (whose traffic the mixed16
 * convention halves), each remat policy and sequence parallelism:
 *   1. ZeRO 2 and 3 over data x fsdp (the trainer refuses ZeRO-1 beside
 *      fsdp): data=2,fsdp=4 against data=4,fsdp=2;
 *   2. ZeRO-3 over data=4 against fsdp=4 without ZeRO;
 *   3. ZeRO-2 over data=4 against ZeRO-1 over data=4;
 *   4. no ZeRO: data=2 against data=4 beside fsdp=2, and data=2 against
 *      data=8 alone;
 *   5. a pipeline's first, middle and last chunk of as many blocks at 2
 *      stages against 4 (interleaved, v = 2), beside data and tensor.
 * And a program whose mesh the system cannot lay out, left unbuilt by the
 * cache (cache.c's build), is refused with the status and words of its
 * direct build, which builds it and fails in its timing.
 * What shares a program shares its memory counts and, timed on each
 * layout's own mesh, its step: so the search's answers are the ones it
 * gave building each layout's programs (bench/run_plan_speed.sh's
 * comparison of the --json outputs, before and after). */
#include "meshtrain.h"
#include "harness.h"
#include "plan_request.h"
#include "plan/search_impl.h"

#include <string.h>

static mt_hardware *h100(void) {
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("h100-sxm", &hw, NULL, 0));
    return hw;
}

/* Whether a and b are one program: every summary field and every node. */
static bool same_program(const mt__plan_program *a, const mt__plan_program *b) {
    mt__plan_program x = *a, y = *b;
    x.nodes = y.nodes = NULL;
    return a->n_nodes == b->n_nodes && !memcmp(&x, &y, sizeof x) &&
           !memcmp(a->nodes, b->nodes, (size_t)a->n_nodes * sizeof *a->nodes);
}

/* Builds `a` and `b` directly and checks they are one program (both built). */
static void check_pair(mt__plan_search *s, const char *what, mt__plan_prog_key a,
                       mt__plan_prog_key b) {
    mt__plan_cached ea, eb;
    MT_CHECK_OK(mt__plan_program_uncached(s, &a, &ea));
    MT_CHECK_OK(mt__plan_program_uncached(s, &b, &eb));
    MT_CHECK(ea.status == MT_OK && eb.status == MT_OK, "%s: builds refused: '%s' / '%s'", what,
             ea.why, eb.why);
    MT_CHECK(same_program(&ea.prog, &eb.prog),
             "%s (zero %d/%d remat %d sp %d chunk %d/%d): %d and %d nodes, %zu and %zu arena "
             "bytes, %lld and %lld parameters stored: not one program", what, a.zero, b.zero,
             a.remat, a.sp, a.chunk, b.chunk, ea.prog.n_nodes, eb.prog.n_nodes,
             ea.prog.arena_bytes, eb.prog.arena_bytes, (long long)ea.prog.param_elems,
             (long long)eb.prog.param_elems);
    mt__plan_program_free(&ea.prog);
    mt__plan_program_free(&eb.prog);
}

static mt__plan_prog_key key_of(int d, int f, int t, int p, int zero, int remat, int sp,
                                int chunk) {
    return (mt__plan_prog_key){.d = d, .f = f, .t = t, .p = p, .v = p > 1 ? 2 : 1,
                               .zero = zero, .remat = remat, .sp = sp, .blocks = 2,
                               .batch = 3, .chunk = chunk};
}

/* Every class of the file's comment on the model of request r. */
static void check_classes(const mt_plan_request *r, const char *model) {
    mt__plan_search s;
    MT_CHECK_OK(mt__plan_search_begin(&s, r, 64));
    char what[96];
    for (int remat = 0; remat < 4; remat++) {
        for (int sp = 0; sp <= 1; sp++) {
            const int t = 2;   /* sequence parallelism needs a tensor axis */
            for (int zero = 2; zero <= 3; zero++) {   /* ZeRO-1 beside fsdp: refused */
                snprintf(what, sizeof what, "%s: class 1", model);
                check_pair(&s, what, key_of(2, 4, t, 1, zero, remat, sp, 0),
                           key_of(4, 2, t, 1, zero, remat, sp, 0));
            }
            snprintf(what, sizeof what, "%s: class 2", model);
            check_pair(&s, what, key_of(4, 1, t, 1, 3, remat, sp, 0),
                       key_of(1, 4, t, 1, 0, remat, sp, 0));
            snprintf(what, sizeof what, "%s: class 3", model);
            check_pair(&s, what, key_of(4, 1, t, 1, 2, remat, sp, 0),
                       key_of(4, 1, t, 1, 1, remat, sp, 0));
            snprintf(what, sizeof what, "%s: class 4", model);
            check_pair(&s, what, key_of(2, 2, t, 1, 0, remat, sp, 0),
                       key_of(4, 2, t, 1, 0, remat, sp, 0));
            check_pair(&s, what, key_of(2, 1, t, 1, 0, remat, sp, 0),
                       key_of(8, 1, t, 1, 0, remat, sp, 0));
            /* the chunks of 2 stages x 2 (0, 1, 3) and of 4 x 2 (0, 1, 7) */
            snprintf(what, sizeof what, "%s: pipeline stages", model);
            static const int role2[3] = {0, 1, 3}, role4[3] = {0, 1, 7};
            for (int k = 0; k < 3; k++)
                check_pair(&s, what, key_of(2, 1, t, 2, 0, remat, sp, role2[k]),
                           key_of(2, 1, t, 4, 0, remat, sp, role4[k]));
        }
    }
    mt__plan_cache_free(&s);
}

/* Keys whose mesh straddles the h100-sxm's 8-device nodes (data=3 at
 * device stride 4 over 12 devices, alone and beside a pipeline, each
 * remat policy): the cache leaves them unbuilt, with the direct build's
 * refusal, and a mesh that lays out is built as before. */
static void check_unlaid(const mt_plan_request *r, const char *model) {
    mt__plan_search s;
    MT_CHECK_OK(mt__plan_search_begin(&s, r, 64));
    for (int remat = 0; remat < 4; remat++)
        for (int p = 1; p <= 2; p++) {
            const mt__plan_prog_key key = key_of(3, 1, 4, p, 0, remat, 1, 0);
            const mt__plan_cached *e = NULL;
            mt__plan_cached direct;
            MT_CHECK_OK(mt__plan_program_cached(&s, &key, &e));
            MT_CHECK_OK(mt__plan_program_uncached(&s, &key, &direct));
            MT_CHECK(e->unbuilt && e->prog.n_nodes == 0,
                     "%s: data=3,tensor=4 pipe=%d remat %d: built (%d nodes) on a mesh that "
                     "does not lay out", model, p, remat, e->prog.n_nodes);
            MT_CHECK(direct.prog_ok && direct.status != MT_OK,
                     "%s: pipe=%d remat %d: the direct build %s (status %d): no refusal by "
                     "its timing to compare with", model, p, remat,
                     direct.prog_ok ? "timed" : "refused", (int)direct.status);
            MT_CHECK(e->status == direct.status && !strcmp(e->why, direct.why),
                     "%s: pipe=%d remat %d: refused with %d '%s', the direct build with %d "
                     "'%s'", model, p, remat, (int)e->status, e->why, (int)direct.status,
                     direct.why);
            mt__plan_program_free(&direct.prog);
            const mt__plan_prog_key laid = key_of(2, 1, 4, p, 0, remat, 1, 0);
            MT_CHECK_OK(mt__plan_program_cached(&s, &laid, &e));
            MT_CHECK(e->status == MT_OK && !e->unbuilt && e->prog.n_nodes > 0,
                     "%s: data=2,tensor=4 pipe=%d remat %d: not built (%s)", model, p, remat,
                     e->why);
        }
    mt__plan_cache_free(&s);
}

/* A free search's request of 64 chips for the model (kind, its config). */
static mt_plan_request request_of(mt_model_kind kind, const void *config, size_t size,
                                  const mt_hardware *hw, mt_precision precision,
                                  mt_plan_memory memory) {
    mt_plan_request q = plan_request_of(kind, config, size, 64, 64, precision, memory);
    q.hw = hw;
    q.chips = 64;
    return q;
}

MT_TEST(shared_programs_are_one_program_gpt) {
    mt_gpt_config m;
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_GPT, &m, sizeof m));
    m.L = 8;
    m.C = 64;
    m.NH = 4;
    m.maxT = 64;
    m.V = 256;
    mt_hardware *hw = h100();
    mt_plan_request q = request_of(MT_MODEL_GPT, &m, sizeof m, hw, MT_PRECISION_FP32,
                                   MT_PLAN_MEMORY_MESHTRAIN);
    check_classes(&q, "gpt fp32");
    q = request_of(MT_MODEL_GPT, &m, sizeof m, hw, MT_PRECISION_BF16, MT_PLAN_MEMORY_MIXED16);
    check_classes(&q, "gpt bf16 mixed16");
    check_unlaid(&q, "gpt bf16 mixed16");
    mt_hardware_free(hw);
}

MT_TEST(shared_programs_are_one_program_llama) {
    mt_llama_config m;
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_LLAMA, &m, sizeof m));
    m.dim = 128;
    m.n_layers = 8;
    m.n_heads = 4;
    m.n_kv_heads = 2;
    m.vocab = 512;
    m.max_seq = 64;
    mt_hardware *hw = h100();
    mt_plan_request q = request_of(MT_MODEL_LLAMA, &m, sizeof m, hw, MT_PRECISION_BF16,
                                   MT_PLAN_MEMORY_MEGATRON);
    check_classes(&q, "llama bf16 megatron");
    mt_hardware_free(hw);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
