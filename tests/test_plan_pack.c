/* test_plan_pack.c — a shared program kept packed past the cache's trim
 * (cache_pack.c: its distinct nodes once and the run order as indexes)
 * comes back node for node and byte for byte the program a direct build
 * makes (mt__plan_program_uncached, built a second time: nothing shared
 * with the packed one), packed and unpacked twice, on a GPT of 8 blocks
 * whose repeated blocks the packing stores once, under each remat policy
 * and with and without a pipeline. So a search that unpacks a program
 * where it built it again gives the same answers. */
#include "meshtrain.h"
#include "harness.h"
#include "plan/search_impl.h"

#include <string.h>

/* Whether a and b are one program: every summary field and every node. */
static bool same_program(const mt__plan_program *a, const mt__plan_program *b) {
    mt__plan_program x = *a, y = *b;
    x.nodes = y.nodes = NULL;
    return a->n_nodes == b->n_nodes && !memcmp(&x, &y, sizeof x) &&
           !memcmp(a->nodes, b->nodes, (size_t)a->n_nodes * sizeof *a->nodes);
}

static void check_key(mt__plan_search *s, mt__plan_prog_key key) {
    mt__plan_cached ref, e;
    MT_CHECK_OK(mt__plan_program_uncached(s, &key, &ref));
    MT_CHECK_OK(mt__plan_program_uncached(s, &key, &e));
    MT_CHECK(ref.status == MT_OK, "remat %d pipe %d: the build was refused: %s", key.remat,
             key.p, ref.why);
    const size_t unpacked = (size_t)e.prog.n_nodes * sizeof *e.prog.nodes;
    for (int round = 0; round < 2; round++) {
        MT_CHECK_OK(mt__plan_cache_pack(&e));
        MT_CHECK(e.prog.nodes == NULL && e.packed_order != NULL,
                 "remat %d pipe %d: packed, the nodes are not freed", key.remat, key.p);
        /* 8 blocks of the same nodes: well under half the bytes */
        MT_CHECK(2 * mt__plan_cache_packed_bytes(&e) < unpacked,
                 "remat %d pipe %d: %zu packed bytes for %zu unpacked (%d distinct of %d nodes)",
                 key.remat, key.p, mt__plan_cache_packed_bytes(&e), unpacked, e.n_packed,
                 e.prog.n_nodes);
        MT_CHECK_OK(mt__plan_cache_unpack(&e));
        MT_CHECK(same_program(&e.prog, &ref.prog),
                 "remat %d pipe %d round %d: unpacked, %d nodes against the build's %d: not "
                 "the program built", key.remat, key.p, round, e.prog.n_nodes, ref.prog.n_nodes);
    }
    mt__plan_program_free(&ref.prog);
    mt__plan_program_free(&e.prog);
    free(e.packed_nodes);
    free(e.packed_order);
    free(e.packed_live);
}

MT_TEST(packed_programs_unpack_to_the_program_built) {
    mt_gpt_config m;
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_GPT, &m, sizeof m));
    m.L = 16;
    m.C = 64;
    m.NH = 4;
    m.maxT = 64;
    m.V = 256;
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("h100-sxm", &hw, NULL, 0));
    mt_plan_request q = mt_plan_request_defaults();
    q.model = mt_train_defaults();
    q.model.model = MT_MODEL_GPT;
    q.model.model_config = &m;
    q.model.model_config_size = sizeof m;
    q.hw = hw;
    q.chips = 8;
    q.seq = 64;
    q.batch_tokens = 64.0 * 64;
    q.precision = MT_PRECISION_BF16;
    q.memory = MT_PLAN_MEMORY_MEGATRON;
    mt__plan_search s;
    MT_CHECK_OK(mt__plan_search_begin(&s, &q, 8));
    for (int remat = 0; remat < 4; remat++) {
        /* data=2,fsdp=2,tensor=2; and a pipeline's middle chunk, pipe=2 x 2 chunks */
        check_key(&s, (mt__plan_prog_key){.d = 2, .f = 2, .t = 2, .p = 1, .v = 1, .zero = 0,
                                          .remat = remat, .blocks = 8, .batch = 2});
        check_key(&s, (mt__plan_prog_key){.d = 2, .f = 1, .t = 2, .p = 2, .v = 2, .zero = 0,
                                          .remat = remat, .blocks = 8, .batch = 2, .chunk = 1});
    }
    mt__plan_cache_free(&s);
    mt_hardware_free(hw);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
