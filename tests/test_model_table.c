/*
 * test_model_table.c — the models' tables as a command line reads them
 * (mt_model_about, meshtrain/train.h), and the models' own settings: every
 * kind has a table, its flags point at int fields inside the model's own
 * struct that the model really reads (a value the model refuses, written
 * through the flag's offset, fails mt_train_config_check), the defaults
 * are inside each flag's range and equal the structs written out here, the
 * trainer copies the settings it is given, and wrong settings get the
 * model's own message.
 */
#include "harness.h"
#include "meshtrain.h"

#include <stddef.h>

/* Room for any model's settings, aligned for any struct. */
typedef union {
    max_align_t   align;
    unsigned char bytes[256];
} settings;

static int *at(settings *s, const mt_model_flag *f) {
    return (int *)(void *)(s->bytes + f->offset);
}

/* Model k's defaults into *s, and c pointed at them. */
static mt_train_config config_of(int k, settings *s) {
    const mt_model_about *a = mt_model_about_of((mt_model_kind)k);
    MT_CHECK(a->config_size <= sizeof s->bytes, "%s: %zu bytes of settings", a->name,
             a->config_size);
    memset(s, 0, sizeof *s);
    MT_CHECK_OK(mt_model_config_defaults((mt_model_kind)k, s->bytes, a->config_size));
    mt_train_config c = mt_train_defaults();
    c.model = (mt_model_kind)k;
    c.data = a->dataset ? "input.txt" : NULL;   /* the check opens no file */
    c.model_config = a->config_size ? s->bytes : NULL;
    c.model_config_size = a->config_size;
    return c;
}

/* A flag of one name is of one type in every model that reads it (the
 * command line merges them into one slot). */
static void same_type_everywhere(const mt_model_flag *f) {
    for (int k = 0; mt_model_name((mt_model_kind)k); k++) {
        const mt_model_about *a = mt_model_about_of((mt_model_kind)k);
        for (int i = 0; i < a->n_flags; i++)
            MT_CHECK(strcmp(a->flags[i].flag, f->flag) != 0 || a->flags[i].type == f->type,
                     "--%s is of type %d in %s and %d elsewhere", f->flag,
                     (int)a->flags[i].type, a->name, (int)f->type);
    }
}

/* A float, bool or preset flag: its default in range, and the model reads
 * it (a float below its range, a bool of 2, an unknown preset are refused;
 * a known preset passes the check). */
static void typed_flag_is_read(const mt_model_about *a, const mt_model_flag *f, settings *s,
                               mt_train_config *c) {
    switch (f->type) {
    case MT_MODEL_FLAG_INT: break;
    case MT_MODEL_FLAG_FLOAT: {
        float *v = (float *)(void *)(s->bytes + f->offset);
        MT_CHECK(f->flo < f->fhi && *v >= f->flo && *v <= f->fhi, "%s --%s: the default %g "
                 "is outside [%g, %g]", a->name, f->flag, (double)*v, (double)f->flo,
                 (double)f->fhi);
        *v = -1.0f;
        break;
    }
    case MT_MODEL_FLAG_BOOL:
        MT_CHECK(*at(s, f) == 0 || *at(s, f) == 1, "%s --%s: default %d", a->name, f->flag,
                 *at(s, f));
        *at(s, f) = 2;
        break;
    case MT_MODEL_FLAG_CHOICE:   /* an index past the names */
        MT_CHECK(*at(s, f) >= f->lo && *at(s, f) <= f->hi && strchr(f->metavar, '|'),
                 "%s --%s: default %d of [%d, %d] (%s)", a->name, f->flag, *at(s, f), f->lo,
                 f->hi, f->metavar);
        *at(s, f) = f->hi + 1;
        break;
    case MT_MODEL_FLAG_PRESET:
        MT_CHECK(f->preset != NULL, "%s --%s: a preset flag without its function", a->name,
                 f->flag);
        MT_CHECK(f->preset("no-such-preset", s->bytes) == MT_EINVAL &&
                 strstr(mt_errmsg(), "no-such-preset"), "%s --%s: an unknown name: %s",
                 a->name, f->flag, mt_errmsg());
        return;
    }
    MT_CHECK(mt_train_config_check(c) != MT_OK, "%s --%s: a value out of its range passed the "
             "check: the model does not read the field at offset %zu", a->name, f->flag,
             f->offset);
}

MT_TEST(every_model_has_a_table_and_its_flags_are_read) {
    int kinds = 0;
    for (int k = 0; mt_model_name((mt_model_kind)k); k++, kinds++) {
        const mt_model_about *a = mt_model_about_of((mt_model_kind)k);
        MT_CHECK(a && strcmp(a->name, mt_model_name((mt_model_kind)k)) == 0,
                 "kind %d: no table, or its name differs from mt_model_name", k);
        MT_CHECK(a->n_flags >= 0 && (a->n_flags == 0 || a->flags), "%s: flags", a->name);
        MT_CHECK((a->config_size == 0) == (a->config_type == NULL), "%s: settings %s of %zu "
                 "bytes", a->name, a->config_type ? a->config_type : "(none)", a->config_size);
        MT_CHECK(a->n_flags == 0 || a->config_size > 0, "%s: flags without settings", a->name);
        for (int i = 0; i < a->n_flags; i++) {
            const mt_model_flag *f = &a->flags[i];
            MT_CHECK(f->flag && f->field && f->help && f->metavar, "%s flag %d: a name is NULL",
                     a->name, i);
            MT_CHECK(f->offset + sizeof(int) <= a->config_size && f->offset % sizeof(int) == 0,
                     "%s --%s: offset %zu is no int of %s (%zu bytes)", a->name, f->flag,
                     f->offset, a->config_type, a->config_size);
            MT_CHECK(f->lo <= f->hi, "%s --%s: range [%d, %d]", a->name, f->flag, f->lo, f->hi);
            for (int j = 0; j < i; j++)
                MT_CHECK(strcmp(a->flags[j].flag, f->flag) != 0, "%s: --%s twice", a->name,
                         f->flag);
            same_type_everywhere(f);
            settings s;
            mt_train_config c = config_of(k, &s);
            if (f->type != MT_MODEL_FLAG_INT) {
                typed_flag_is_read(a, f, &s, &c);
                continue;
            }
            int v = *at(&s, f);
            MT_CHECK(v >= f->lo && v <= f->hi, "%s --%s: the default %d is outside [%d, %d]",
                     a->name, f->flag, v, f->lo, f->hi);
            MT_CHECK_OK(mt_train_config_check(&c));
            /* the model reads the field: a value below its range is refused
             * (0 means "from the data" where zero_is_auto, and is allowed) */
            if (f->zero_is_auto) continue;
            *at(&s, f) = f->lo - 1;
            MT_CHECK(mt_train_config_check(&c) != MT_OK,
                     "%s --%s %d (below its range) passed the check: the model does not read "
                     "the field at offset %zu", a->name, f->flag, f->lo - 1, f->offset);
        }
    }
    MT_CHECK(kinds >= 4, "%d models", kinds);
    MT_CHECK(mt_model_about_of((mt_model_kind)kinds) == NULL, "a table past the last kind");
    MT_CHECK(mt_model_about_of((mt_model_kind)-1) == NULL, "a table for kind -1");
    settings s;
    MT_CHECK_FAILS(mt_model_config_defaults((mt_model_kind)kinds, s.bytes, 8), MT_EINVAL,
                   "unknown model kind");
}

/* The defaults the tables give, against the structs written out here (as
 * train.h documents them); a buffer of another size is refused. */
MT_TEST(the_defaults_are_the_documented_structs) {
    const mt_gpt_config gpt_want = {.L = 2, .C = 64, .NH = 4, .maxT = 64, .V = 0, .Vp = 0};
    const mt_mlp_config mlp_want = {.hidden = 64, .layers = 3};
    mt_gpt_config gpt;
    mt_mlp_config mlp;
    memset(&gpt, 0xff, sizeof gpt);
    memset(&mlp, 0xff, sizeof mlp);
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_GPT, &gpt, sizeof gpt));
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_MLP, &mlp, sizeof mlp));
    MT_CHECK(memcmp(&gpt, &gpt_want, sizeof gpt) == 0, "GPT defaults L=%d C=%d NH=%d maxT=%d "
             "V=%d Vp=%d", gpt.L, gpt.C, gpt.NH, gpt.maxT, gpt.V, gpt.Vp);
    MT_CHECK(memcmp(&mlp, &mlp_want, sizeof mlp) == 0, "MLP defaults hidden=%d layers=%d",
             mlp.hidden, mlp.layers);
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_LINREG, NULL, 0));
    MT_CHECK(mt_model_about_of(MT_MODEL_GPT)->config_size == sizeof(mt_gpt_config) &&
             mt_model_about_of(MT_MODEL_MLP)->config_size == sizeof(mt_mlp_config) &&
             mt_model_about_of(MT_MODEL_LINREG)->config_size == 0, "config sizes");
    /* the struct of another model: the size tells them apart */
    char gpt_bytes[32];   /* the struct's own size, whatever fields it grows */
    snprintf(gpt_bytes, sizeof gpt_bytes, "%zu bytes", sizeof(mt_gpt_config));
    MT_CHECK_FAILS(mt_model_config_defaults(MT_MODEL_GPT, &mlp, sizeof mlp), MT_EINVAL,
                   "mt_gpt_config", gpt_bytes);
    MT_CHECK_FAILS(mt_model_config_defaults(MT_MODEL_MLP, NULL, sizeof mlp), MT_EINVAL, "NULL");
    /* without data (explain): the GPT's vocabulary a text file's, its
     * context the sequence; the MLP reads no data */
    mt_train_config c = mt_train_defaults();
    c.T = 32;
    const mt_gpt_config gpt_nodata = {.L = 2, .C = 64, .NH = 4, .maxT = 32, .V = 256, .Vp = 0};
    MT_CHECK_OK(mt_model_config_without_data(MT_MODEL_GPT, &c, &gpt, sizeof gpt));
    MT_CHECK(memcmp(&gpt, &gpt_nodata, sizeof gpt) == 0, "GPT without data V=%d maxT=%d Vp=%d",
             gpt.V, gpt.maxT, gpt.Vp);
    MT_CHECK_OK(mt_model_config_without_data(MT_MODEL_MLP, &c, &mlp, sizeof mlp));
    MT_CHECK(memcmp(&mlp, &mlp_want, sizeof mlp) == 0, "MLP without data");
    /* LLaMA: a small model, F from the rule, V from the data (train.h) */
    const mt_llama_config llama_want = {
        .dim = 64, .ffn_dim = 0, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab = 0,
        .max_seq = 64, .rope_theta = 10000.0f, .norm_eps = 1e-5f, .tie_embeddings = 0,
        .multiple_of = 32, .ffn_mult = 1.0f,
        .rope_scaling = MT_LLAMA31_ROPE_SCALING(MT_ROPE_SCALING_NONE)};
    mt_llama_config llama;
    memset(&llama, 0xff, sizeof llama);
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_LLAMA, &llama, sizeof llama));
    MT_CHECK(memcmp(&llama, &llama_want, sizeof llama) == 0 && mt_llama_ffn_dim(&llama) == 192,
             "LLaMA defaults C=%d L=%d NH=%d KV=%d F=%d", llama.dim, llama.n_layers,
             llama.n_heads, llama.n_kv_heads, mt_llama_ffn_dim(&llama));
    MT_CHECK_OK(mt_model_config_without_data(MT_MODEL_LLAMA, &c, &llama, sizeof llama));
    MT_CHECK(llama.vocab == 256 && llama.max_seq == 32 && llama.dim == 64,
             "LLaMA without data V=%d maxT=%d", llama.vocab, llama.max_seq);
    /* llm.c-family files hold the GPT (llm.c's) and the LLaMA (llama2.c's) only */
    MT_CHECK_FAILS(mt_model_config_from_llmc(MT_MODEL_MLP, "/nonexistent/model.bin", &mlp,
                                             sizeof mlp), MT_EINVAL, "gpt or llama", "mlp");
}

/* Three steps of `tr` and of the reference `ref`, which must lose the
 * same, bit for bit; frees both. */
static void same_run(mt_trainer *tr, mt_trainer *ref, const char *what) {
    for (int i = 0; i < 3; i++) {
        mt_step_report got, want;
        MT_CHECK_OK(mt_trainer_step(tr, &got));
        MT_CHECK_OK(mt_trainer_step(ref, &want));
        MT_CHECK(got.loss == want.loss, "step %d: %s's loss %.9g, the reference's %.9g", i + 1,
                 what, got.loss, want.loss);
    }
    mt_trainer_free(tr);
    mt_trainer_free(ref);
}

/* The trainer copies the settings at create: a struct overwritten (here
 * with settings the check would refuse) after mt_trainer_create changes
 * nothing. The reference is a trainer whose struct is never touched; and
 * model_config NULL trains the defaults, as a struct of them does. */
MT_TEST(the_trainer_copies_the_settings_at_create) {
    const mt_mlp_config kept = {.hidden = 16, .layers = 2};
    mt_mlp_config overwritten = kept;
    mt_train_config c = mt_train_defaults();
    c.model = MT_MODEL_MLP;
    c.threads = 1;
    c.B = 16;
    c.model_config = &kept;
    c.model_config_size = sizeof kept;
    mt_trainer *ref = NULL, *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &ref));
    c.model_config = &overwritten;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    overwritten = (mt_mlp_config){.hidden = -1, .layers = 1000000};
    const mt_mlp_config *held = mt_trainer_config(tr)->model_config;
    MT_CHECK(held && (const void *)held != (const void *)&overwritten && held->hidden == 16 &&
             held->layers == 2, "the trainer's settings: hidden=%d layers=%d",
             held ? held->hidden : -1, held ? held->layers : -1);
    same_run(tr, ref, "the overwritten struct");

    /* NULL: the model's defaults, the same run as a struct holding them */
    mt_mlp_config defaults;
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_MLP, &defaults, sizeof defaults));
    c.model_config = &defaults;
    MT_CHECK_OK(mt_trainer_create(&c, &ref));
    c.model_config = NULL;
    c.model_config_size = 0;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    held = mt_trainer_config(tr)->model_config;
    MT_CHECK(held && held->hidden == 64 && held->layers == 3, "NULL resolved to hidden=%d "
             "layers=%d", held ? held->hidden : -1, held ? held->layers : -1);
    same_run(tr, ref, "model_config NULL");
}

/* Settings a model refuses get that model's message, naming the field, and
 * the struct of another model is refused by its size before any is read. */
MT_TEST(wrong_settings_get_the_models_own_message) {
    mt_train_config c = mt_train_defaults();
    c.data = "input.txt";
    const mt_gpt_config gpt = {.L = 2, .C = 30, .NH = 4, .maxT = 64};
    c.model_config = &gpt;
    c.model_config_size = sizeof gpt;
    MT_CHECK_FAILS(mt_train_config_check(&c), MT_EINVAL, "C=30", "NH=4");
    const mt_gpt_config no_layers = {.L = 0, .C = 64, .NH = 4, .maxT = 64};
    c.model_config = &no_layers;
    MT_CHECK_FAILS(mt_train_config_check(&c), MT_EINVAL, "L=0");
    mt_trainer *tr = NULL;
    MT_CHECK(mt_trainer_create(&c, &tr) == MT_EINVAL && !tr && strstr(mt_errmsg(), "L=0"),
             "the trainer: %s", mt_errmsg());

    c = mt_train_defaults();
    c.model = MT_MODEL_MLP;
    const mt_mlp_config mlp = {.hidden = 0, .layers = 2};
    c.model_config = &mlp;
    c.model_config_size = sizeof mlp;
    MT_CHECK_FAILS(mt_train_config_check(&c), MT_EINVAL, "MLP", "hidden=0", "--channels");

    /* a GPT's struct given to the MLP, and the other way round */
    c.model_config = &gpt;
    c.model_config_size = sizeof gpt;
    char gpt_size[48];
    snprintf(gpt_size, sizeof gpt_size, "model_config_size=%zu", sizeof gpt);
    MT_CHECK_FAILS(mt_train_config_check(&c), MT_EINVAL, gpt_size, "mt_mlp_config");
    c.model = MT_MODEL_GPT;
    c.data = "input.txt";
    c.model_config = &mlp;
    c.model_config_size = sizeof mlp;
    MT_CHECK_FAILS(mt_train_config_check(&c), MT_EINVAL, "model_config_size=8", "mt_gpt_config");
}

/* A model that reads no data refuses a data file instead of ignoring it. */
MT_TEST(a_model_without_data_refuses_a_data_file) {
    for (int k = 0; mt_model_name((mt_model_kind)k); k++) {
        const mt_model_about *a = mt_model_about_of((mt_model_kind)k);
        if (a->dataset) continue;
        mt_train_config c = mt_train_defaults();
        c.model = (mt_model_kind)k;
        c.data = "input.txt";
        MT_CHECK_FAILS(mt_train_config_check(&c), MT_EINVAL, "drop --data", a->name);
    }
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
