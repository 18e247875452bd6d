/*
 * model_flags.c — the models' own flags, from their tables (model_flags.h).
 */
#include "cli/model_flags.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int *field_at(void *mc, const mt_model_flag *f) {
    return (int *)(void *)((char *)mc + f->offset);
}

static float *float_at(void *mc, const mt_model_flag *f) {
    return (float *)(void *)((char *)mc + f->offset);
}

static float float_setting(const void *mc, const mt_model_flag *f) {
    return *(const float *)(const void *)((const char *)mc + f->offset);
}

int cli_model_setting(const void *mc, const mt_model_flag *f) {
    return *(const int *)(const void *)((const char *)mc + f->offset);
}

const char *cli_model_choice(const mt_model_flag *f, int i, char *buf, size_t n) {
    const char *p = f->metavar;
    for (int k = 0; k < i && p; k++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (i < 0 || !p) snprintf(buf, n, "%d", i);
    else snprintf(buf, n, "%.*s", (int)strcspn(p, "|"), p);
    return buf;
}

/* The settings model k starts from, into *buf: its defaults, or with
 * `without_data` those of a build without data for c. */
static mt_status start_settings(mt_model_kind k, bool without_data, const mt_train_config *c,
                                cli_model_config *buf) {
    const mt_model_about *a = mt_model_about_of(k);
    memset(buf, 0, sizeof *buf);
    if (a->config_size > sizeof buf->bytes)
        return mt_fail(MT_EINVAL, "--model %s's settings (%s) are %zu bytes, more than the "
                       "command line's %zu: raise CLI_MODEL_CONFIG_MAX", a->name,
                       a->config_type, a->config_size, sizeof buf->bytes);
    return without_data ? mt_model_config_without_data(k, c, buf->bytes, a->config_size)
                        : mt_model_config_defaults(k, buf->bytes, a->config_size);
}

/* The flag `name` of model k, or NULL. */
static const mt_model_flag *flag_of(mt_model_kind k, const char *name) {
    const mt_model_about *a = mt_model_about_of(k);
    for (int i = 0; a && i < a->n_flags; i++)
        if (strcmp(a->flags[i].flag, name) == 0) return &a->flags[i];
    return NULL;
}

/* The value of f in the settings mc, into the slot's member of its type (a
 * preset starts unset). */
static void start_value(int *value, float *fvalue, bool *bvalue, const void *mc,
                        const mt_model_flag *f) {
    switch (f->type) {
    case MT_MODEL_FLAG_INT:
    case MT_MODEL_FLAG_CHOICE: *value = cli_model_setting(mc, f); break;
    case MT_MODEL_FLAG_FLOAT: *fvalue = float_setting(mc, f); break;
    case MT_MODEL_FLAG_BOOL: *bvalue = cli_model_setting(mc, f) != 0; break;
    case MT_MODEL_FLAG_PRESET: break;
    }
}

void cli_model_flags_init(cli_model_flags *mf, const mt_train_config *c, bool without_data) {
    memset(mf, 0, sizeof *mf);
    mf->without_data = without_data;
    for (int k = 0; mt_model_about_of((mt_model_kind)k); k++) {
        const mt_model_about *a = mt_model_about_of((mt_model_kind)k);
        /* a model whose settings do not fit shows 0s; apply says why */
        cli_model_config start;
        (void)start_settings((mt_model_kind)k, without_data, c, &start);
        for (int i = 0; i < a->n_flags; i++) {
            const mt_model_flag *f = &a->flags[i];
            for (int neg = 0; neg <= (f->type == MT_MODEL_FLAG_BOOL); neg++) {
                int s = 0;
                while (s < mf->n && (strcmp(mf->f[s].flag, f->flag) != 0 ||
                                     mf->f[s].negates != neg))
                    s++;
                if (s == mf->n) {
                    if (mf->n == CLI_MAX_MODEL_FLAGS) continue;   /* raise the limit */
                    mf->n++;
                    mf->f[s].flag = f->flag;
                    mf->f[s].metavar = f->metavar;
                    mf->f[s].type = f->type;
                    mf->f[s].negates = neg;
                    snprintf(mf->f[s].negated, sizeof mf->f[s].negated, "no-%s", f->flag);
                    start_value(&mf->f[s].value, &mf->f[s].fvalue, &mf->f[s].bvalue, start.bytes,
                                f);
                    if (neg) mf->f[s].bvalue = false;   /* given: sets 0 */
                }
                size_t at = strlen(mf->f[s].help);
                if (neg)
                    snprintf(mf->f[s].help + at, sizeof mf->f[s].help - at,
                             "%s%s: not --%s (over a preset that sets it)", at ? "; " : "",
                             a->name, f->flag);
                else
                    snprintf(mf->f[s].help + at, sizeof mf->f[s].help - at, "%s%s: %s",
                             at ? "; " : "", a->name, f->help);
            }
        }
    }
}

/* The shortest decimal that reads back as f ("0.01", not 0.009999999776),
 * for a float bound that the range check and help take as a double. */
static double float_decimal(float f) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.7g", (double)f);
    return strtod(buf, NULL);
}

/* A slot of another type than int: its kind, value and widest float
 * range in *o. */
static void typed_opt(cli_model_flags_slot *slot, cli_opt *o) {
    switch (slot->type) {
    case MT_MODEL_FLAG_INT: break;
    case MT_MODEL_FLAG_FLOAT: {
        double lo = 1e300, hi = -1e300;
        for (int k = 0; mt_model_about_of((mt_model_kind)k); k++) {
            const mt_model_flag *f = flag_of((mt_model_kind)k, slot->flag);
            if (f && float_decimal(f->flo) < lo) lo = float_decimal(f->flo);
            if (f && float_decimal(f->fhi) > hi) hi = float_decimal(f->fhi);
        }
        *o = (cli_opt){slot->flag, CLI_FLOAT, &slot->fvalue, lo, hi, false, false, NULL,
                       slot->metavar, slot->help};
        break;
    }
    case MT_MODEL_FLAG_BOOL:
        *o = (cli_opt){slot->negates ? slot->negated : slot->flag, CLI_FLAG, &slot->bvalue, 0,
                       0, false, false, NULL, NULL, slot->help};
        break;
    case MT_MODEL_FLAG_PRESET:
        *o = (cli_opt){slot->flag, CLI_STR, &slot->svalue, 0, 0, false, false, NULL,
                       slot->metavar, slot->help};
        break;
    case MT_MODEL_FLAG_CHOICE:   /* the table's metavar lists the names */
        *o = (cli_opt){slot->flag, CLI_CHOICE, &slot->value, 0, 0, false, false,
                       slot->metavar, "NAME", slot->help};
        break;
    }
}

int cli_model_flags_opts(cli_model_flags *mf, cli_opt *opts) {
    for (int s = 0; s < mf->n; s++) {
        /* the widest range of the models that read it; apply checks the model's */
        double lo = 1e300, hi = -1e300;
        for (int k = 0; mt_model_about_of((mt_model_kind)k); k++) {
            const mt_model_flag *f = flag_of((mt_model_kind)k, mf->f[s].flag);
            if (f && f->lo < lo) lo = f->lo;
            if (f && f->hi > hi) hi = f->hi;
        }
        opts[s] = (cli_opt){mf->f[s].flag, CLI_INT, &mf->f[s].value, lo, hi, false, false, NULL,
                            mf->f[s].metavar, mf->f[s].help};
        typed_opt(&mf->f[s], &opts[s]);
    }
    return mf->n;
}

/* "gpt" or "gpt and mlp": the models that read `flag`. */
static void readers(const char *flag, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; mt_model_about_of((mt_model_kind)k) && at < n; k++)
        if (flag_of((mt_model_kind)k, flag)) {
            int w = snprintf(buf + at, n - at, "%s--model %s", at ? " or " : "",
                             mt_model_name((mt_model_kind)k));
            if (w < 0) break;
            at += (size_t)w;
        }
}

/* Writes the given slot into the settings mc of model a, by f's type,
 * checked against f's range. */
static int apply_slot(const cli_model_flags_slot *slot, const mt_model_flag *f,
                      const mt_model_about *a, void *mc) {
    switch (f->type) {
    case MT_MODEL_FLAG_INT:
    case MT_MODEL_FLAG_CHOICE:   /* the parser gave an index of the names */
        if (slot->value < f->lo || slot->value > f->hi) {
            cli_error("--%s: %d is out of range for --model %s; expected an integer in "
                      "[%d, %d]", f->flag, slot->value, a->name, f->lo, f->hi);
            return CLI_EXIT_USAGE;
        }
        *field_at(mc, f) = slot->value;
        break;
    case MT_MODEL_FLAG_FLOAT:
        if (!(slot->fvalue >= f->flo && slot->fvalue <= f->fhi)) {
            cli_error("--%s: %g is out of range for --model %s; expected a number in "
                      "[%g, %g]", f->flag, (double)slot->fvalue, a->name, (double)f->flo,
                      (double)f->fhi);
            return CLI_EXIT_USAGE;
        }
        *float_at(mc, f) = slot->fvalue;
        break;
    case MT_MODEL_FLAG_BOOL: *field_at(mc, f) = slot->bvalue && !slot->negates ? 1 : 0; break;
    case MT_MODEL_FLAG_PRESET:
        if (f->preset(slot->svalue, mc) != MT_OK) {
            cli_error("--%s: %s", f->flag, mt_errmsg());
            return CLI_EXIT_USAGE;
        }
        break;
    }
    return CLI_EXIT_OK;
}

/* Whether the bool flag of the --no-X slot s was given as --X too. */
static bool both_given(const cli_model_flags *mf, const bool *seen, int first, int s) {
    for (int k = 0; k < mf->n; k++)
        if (k != s && !mf->f[k].negates && strcmp(mf->f[k].flag, mf->f[s].flag) == 0)
            return seen[first + k];
    return false;
}

int cli_model_flags_apply(cli_model_flags *mf, const cli_opt *opts, const bool *seen, int first,
                          mt_train_config *cfg) {
    const mt_model_kind kind = cfg->model;
    const mt_model_about *a = mt_model_about_of(kind);
    if (start_settings(kind, mf->without_data, cfg, &mf->config) != MT_OK) {
        cli_error("%s", mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    /* a preset first, so that the other flags write over it */
    for (int pass = 0; pass < 2; pass++)
        for (int s = 0; s < mf->n; s++) {
            if (!seen[first + s] || (mf->f[s].type == MT_MODEL_FLAG_PRESET) != (pass == 0))
                continue;
            const mt_model_flag *f = flag_of(kind, mf->f[s].flag);
            const char *given = mf->f[s].negates ? mf->f[s].negated : mf->f[s].flag;
            if (!f) {
                char who[128];
                readers(mf->f[s].flag, who, sizeof who);
                cli_error("--%s applies to %s only, not to --model %s", given, who, a->name);
                return CLI_EXIT_USAGE;
            }
            if (mf->f[s].negates && both_given(mf, seen, first, s)) {
                cli_error("--%s and --%s contradict each other; give one", mf->f[s].flag, given);
                return CLI_EXIT_USAGE;
            }
            int rc = apply_slot(&mf->f[s], f, a, mf->config.bytes);
            if (rc != CLI_EXIT_OK) return rc;
        }
    cfg->model_config = a->config_size ? mf->config.bytes : NULL;
    cfg->model_config_size = a->config_size;
    for (int j = 0; opts[j].name; j++)
        if (seen[j] && !a->sequences && strcmp(opts[j].name, "seq") == 0) {
            cli_error("--seq sets the tokens of a sequence, and --model %s trains on examples, "
                      "not sequences: drop --seq", a->name);
            return CLI_EXIT_USAGE;
        }
    return CLI_EXIT_OK;
}

/* Whether f is a setting of a choice, a count or a switch
 * (mt_model_flag.setting_of) that is at its first, "none", 0 or off:
 * nothing reads it (a switch of its own: it is off). */
static bool setting_of_none(const mt_model_about *a, const void *mc, const mt_model_flag *f) {
    for (int i = 0; f->setting_of && i < a->n_flags; i++)
        if ((a->flags[i].type == MT_MODEL_FLAG_CHOICE || a->flags[i].type == MT_MODEL_FLAG_INT ||
             a->flags[i].type == MT_MODEL_FLAG_BOOL) &&
            strcmp(a->flags[i].flag, f->setting_of) == 0)
            return cli_model_setting(mc, &a->flags[i]) == 0;
    return false;
}

void cli_model_flags_describe(const mt_train_config *cfg, char *buf, size_t n) {
    const mt_model_about *a = mt_model_about_of(cfg->model);
    cli_model_config defaults;
    const void *mc = cfg->model_config;
    size_t at = 0;
    buf[0] = '\0';
    if (a && !mc && start_settings(cfg->model, false, cfg, &defaults) == MT_OK) mc = defaults.bytes;
    for (int i = 0; a && mc && i < a->n_flags && at < n; i++) {
        const mt_model_flag *f = &a->flags[i];
        if (f->type == MT_MODEL_FLAG_PRESET) continue;   /* the settings say it all */
        if (setting_of_none(a, mc, f)) continue;          /* --rope-factor without scaling */
        char name[32];
        int w = f->type == MT_MODEL_FLAG_FLOAT
                    ? snprintf(buf + at, n - at, " %s=%g", f->field,
                               (double)float_setting(mc, f))
                : f->type == MT_MODEL_FLAG_CHOICE
                    ? snprintf(buf + at, n - at, " %s=%s", f->field,
                               cli_model_choice(f, cli_model_setting(mc, f), name, sizeof name))
                    : snprintf(buf + at, n - at, " %s=%d", f->field, cli_model_setting(mc, f));
        if (w < 0) break;
        at += (size_t)w;
    }
}

void cli_model_names(char *buf, size_t n, const char *sep) {
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; mt_model_name((mt_model_kind)k) && at < n; k++) {
        int w = snprintf(buf + at, n - at, "%s%s", k ? sep : "", mt_model_name((mt_model_kind)k));
        if (w < 0) break;
        at += (size_t)w;
    }
}
