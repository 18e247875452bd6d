/*
 * test_model_units.c — a model is one unit, reached by name (issue 38,
 * item 4):
 *  - the library's models are entries of the one table that registered
 *    models extend (model_table.c over the runtime's registry), each at its
 *    stable public kind: mt_model_find finds "gpt", "mlp", "linreg" and
 *    "llama" at MT_MODEL_GPT, ... and the table's entry at that kind is the
 *    model's own (train/models/<model>.c);
 *  - a model registered from outside takes the next kind, and is found by
 *    name the same way; a name no model has is refused, naming the models;
 *  - the library's models go through the registration's checks: their
 *    names are taken, so registering one again is refused;
 *  - pipeline stages are a model-neutral type (mt_model_stage), which
 *    mt_gpt_stage names for compatibility, and MT_GPT_STAGE_INPUT is
 *    MT_STAGE_INPUT; the LLaMA's stage builds from the neutral type.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train/train_impl.h"

#include <string.h>

static const struct { const char *name; mt_model_kind kind; const mt__train_model *entry; }
BUILTIN[] = {
    {"gpt", MT_MODEL_GPT, &mt__model_gpt},
    {"mlp", MT_MODEL_MLP, &mt__model_mlp},
    {"linreg", MT_MODEL_LINREG, &mt__model_linreg},
    {"llama", MT_MODEL_LLAMA, &mt__model_llama},
};
enum { N_BUILTIN = (int)(sizeof BUILTIN / sizeof BUILTIN[0]) };

MT_TEST(the_library_models_are_found_by_name_at_their_stable_kinds) {
    for (int i = 0; i < N_BUILTIN; i++) {
        mt_model_kind kind = (mt_model_kind)99;
        MT_CHECK_OK(mt_model_find(BUILTIN[i].name, &kind));
        MT_CHECK(kind == BUILTIN[i].kind, "'%s' found at kind %d, its stable kind is %d",
                 BUILTIN[i].name, (int)kind, (int)BUILTIN[i].kind);
        MT_CHECK(mt__train_model_of(kind) == BUILTIN[i].entry,
                 "the table's entry at kind %d is not train/models/%s.c's", (int)kind,
                 BUILTIN[i].name);
        MT_CHECK(mt_model_name(kind) && !strcmp(mt_model_name(kind), BUILTIN[i].name),
                 "kind %d is named '%s'", (int)kind,
                 mt_model_name(kind) ? mt_model_name(kind) : "(none)");
    }
    MT_CHECK(mt__train_model_count() >= N_BUILTIN, "the table holds %d models",
             mt__train_model_count());
    mt_model_kind kind;
    MT_CHECK_FAILS(mt_model_find("gpt3", &kind), MT_EINVAL, "'gpt3'", "gpt, mlp, linreg, llama");
    MT_CHECK_FAILS(mt_model_find(NULL, &kind), MT_EINVAL, "NULL");
    MT_CHECK(mt__train_model_of((mt_model_kind)-1) == NULL, "kind -1 is no model");
    MT_CHECK(mt_model_name((mt_model_kind)mt__train_model_count()) == NULL,
             "the kind past the last is no model");
}

MT_TEST(the_library_models_went_through_registration) {
    mt_model_kind kind;
    for (int i = 0; i < N_BUILTIN; i++)
        MT_CHECK_FAILS(mt__train_model_register(BUILTIN[i].entry, &kind), MT_EINVAL,
                       BUILTIN[i].name, "exists");
}

static const mt__train_model TINY = {
    .about = {.name = "tiny_linreg"},
    .input = "x", .target = "y",
    .logical_axes = "batch",
};

MT_TEST(a_registered_model_is_found_by_name_after_the_library_ones) {
    mt__train_model tiny = TINY;
    const mt__train_model *lin = &mt__model_linreg;
    tiny.build = lin->build;
    tiny.fill_batch = lin->fill_batch;
    tiny.describe = lin->describe;
    static mt__train_model keep;   /* it must outlive its use */
    keep = tiny;
    const int before = mt__train_model_count();
    mt_model_kind kind, found;
    MT_CHECK_OK(mt__train_model_register(&keep, &kind));
    MT_CHECK((int)kind == before && before >= N_BUILTIN, "registered at kind %d, want %d",
             (int)kind, before);
    MT_CHECK_OK(mt_model_find("tiny_linreg", &found));
    MT_CHECK(found == kind, "found at %d, registered at %d", (int)found, (int)kind);
    MT_CHECK_OK(mt_model_find("llama", &found));
    MT_CHECK(found == MT_MODEL_LLAMA, "a library model's kind moved: %d", (int)found);
}

MT_TEST(stages_are_a_model_neutral_type) {
    MT_CHECK(_Generic((mt_gpt_stage *)0, mt_model_stage *: 1, default: 0),
             "mt_gpt_stage is mt_model_stage");
    MT_CHECK(!strcmp(MT_GPT_STAGE_INPUT, MT_STAGE_INPUT), "the stage input's two names");
    MT_CHECK(mt__model_gpt.stage_input && !strcmp(mt__model_gpt.stage_input, MT_STAGE_INPUT) &&
             mt__model_llama.stage_input &&
             !strcmp(mt__model_llama.stage_input, MT_STAGE_INPUT), "the entries' stage input");
    const mt_llama_config cfg = {.dim = 32, .ffn_dim = 64, .n_layers = 2, .n_heads = 4,
                                 .n_kv_heads = 2, .vocab = 64, .max_seq = 8,
                                 .rope_theta = 10000.0f, .norm_eps = 1e-5f, .multiple_of = 32,
                                 .ffn_mult = 1.0f};
    mt_graph *g = mt_graph_create();
    const mt_model_stage st = {.layer0 = 1, .layers = 1, .first = false, .last = true};
    MT_CHECK(mt_llama_build_stage(g, &cfg, &st, 2, 4, 1.0f) != NULL,
             "a LLaMA stage from mt_model_stage: %s", mt_graph_errmsg(g));
    MT_CHECK(mt_graph_find(g, MT_STAGE_INPUT) != NULL, "the stage reads %s", MT_STAGE_INPUT);
    mt_graph_free(g);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
