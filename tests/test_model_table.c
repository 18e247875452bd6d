/*
 * test_model_table.c — the models' tables as a command line reads them
 * (mt_model_about, meshtrain/train.h): every kind has one, its flags point
 * at int fields of mt_train_config that the model really reads (a value the
 * model refuses, written through the flag's offset, fails
 * mt_train_config_check), and the defaults are inside each flag's range.
 */
#include "harness.h"
#include "meshtrain.h"

#include <stddef.h>

static int *at(mt_train_config *c, const mt_model_flag *f) {
    return (int *)(void *)((char *)c + f->offset);
}

MT_TEST(every_model_has_a_table_and_its_flags_are_read) {
    int kinds = 0;
    for (int k = 0; mt_model_name((mt_model_kind)k); k++, kinds++) {
        const mt_model_about *a = mt_model_about_of((mt_model_kind)k);
        MT_CHECK(a && strcmp(a->name, mt_model_name((mt_model_kind)k)) == 0,
                 "kind %d: no table, or its name differs from mt_model_name", k);
        MT_CHECK(a->n_flags >= 0 && (a->n_flags == 0 || a->flags), "%s: flags", a->name);
        for (int i = 0; i < a->n_flags; i++) {
            const mt_model_flag *f = &a->flags[i];
            MT_CHECK(f->flag && f->field && f->help && f->metavar, "%s flag %d: a name is NULL",
                     a->name, i);
            MT_CHECK(f->offset + sizeof(int) <= sizeof(mt_train_config) && f->offset % sizeof(int) == 0,
                     "%s --%s: offset %zu is no int of mt_train_config", a->name, f->flag,
                     f->offset);
            MT_CHECK(f->lo <= f->hi, "%s --%s: range [%d, %d]", a->name, f->flag, f->lo, f->hi);
            for (int j = 0; j < i; j++)
                MT_CHECK(strcmp(a->flags[j].flag, f->flag) != 0, "%s: --%s twice", a->name,
                         f->flag);
            mt_train_config c = mt_train_defaults();
            c.model = (mt_model_kind)k;
            c.data = a->dataset ? "input.txt" : NULL;   /* the check opens no file */
            int v = *at(&c, f);
            MT_CHECK(v >= f->lo && v <= f->hi, "%s --%s: the default %d is outside [%d, %d]",
                     a->name, f->flag, v, f->lo, f->hi);
            MT_CHECK_OK(mt_train_config_check(&c));
            /* the model reads the field: a value below its range is refused
             * (0 means "from the data" where zero_is_auto, and is allowed) */
            if (f->zero_is_auto) continue;
            *at(&c, f) = f->lo - 1;
            MT_CHECK(mt_train_config_check(&c) != MT_OK,
                     "%s --%s %d (below its range) passed the check: the model does not read "
                     "the field at offset %zu", a->name, f->flag, f->lo - 1, f->offset);
        }
    }
    MT_CHECK(kinds >= 3, "%d models", kinds);
    MT_CHECK(mt_model_about_of((mt_model_kind)kinds) == NULL, "a table past the last kind");
    MT_CHECK(mt_model_about_of((mt_model_kind)-1) == NULL, "a table for kind -1");
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
