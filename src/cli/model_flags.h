/*
 * model_flags.h — the flags of the models' own settings, read from the
 * models' tables (mt_model_about, meshtrain/train.h), so that `train` and
 * `explain --model` have no branch on the model kind: a new model's flags
 * appear in both, with their ranges and help, from its table entry alone.
 *
 * Every model's flags are merged by name into one set of slots (GPT's and
 * the MLP's --layers are one flag); after parsing, the chosen model's
 * settings (its own struct, mt_model_about.config_size bytes) are made in
 * a buffer here, the slots given written into them at the offsets the
 * model gives, and the configuration pointed at them; a flag the chosen
 * model does not read is an error naming the models that do.
 */
#ifndef MT_CLI_MODEL_FLAGS_H
#define MT_CLI_MODEL_FLAGS_H

#include "cli/args.h"
#include "meshtrain.h"

#include <stddef.h>

#define CLI_MAX_MODEL_FLAGS 48
#define CLI_MODEL_CONFIG_MAX 256   /* bytes of a model's settings, at most */

/* Room for one model's settings, aligned for any struct. */
typedef union {
    max_align_t   align;
    unsigned char bytes[CLI_MODEL_CONFIG_MAX];
} cli_model_config;

/* One flag, merged by name over the models that read it. A bool flag
 * --X has a second slot, --no-X, that sets the setting to 0 (a preset that
 * ties, untied): `negated` names it, `flag` stays X. */
typedef struct {
    const char *flag, *metavar;
    bool        negates;     /* the --no-X slot of the bool flag X */
    char        negated[48]; /* with negates: "no-X" */
    mt_model_flag_type type;   /* the first model's that reads it (all read one type) */
    /* parsed here (as its type says); the default from the model's settings */
    int         value;       /* MT_MODEL_FLAG_INT */
    float       fvalue;      /* MT_MODEL_FLAG_FLOAT */
    bool        bvalue;      /* MT_MODEL_FLAG_BOOL */
    const char *svalue;      /* MT_MODEL_FLAG_PRESET (NULL: none; points into argv) */
    char        help[200];   /* "gpt: transformer blocks L; mlp: linear layers" */
} cli_model_flags_slot;

typedef struct {
    int n;
    cli_model_flags_slot f[CLI_MAX_MODEL_FLAGS];
    bool             without_data;   /* the settings of a build without data (explain) */
    cli_model_config config;         /* the chosen model's, once applied */
} cli_model_flags;

/* Fills mf with every model's flags, each slot's value the one the first
 * model that reads it starts from: its defaults, or with `without_data`
 * mt_model_config_without_data's for c (`meshtrain explain`). */
void cli_model_flags_init(cli_model_flags *mf, const mt_train_config *c, bool without_data);

/* Writes mf's cli_opt entries into opts (room for mf->n); returns mf->n. */
int cli_model_flags_opts(cli_model_flags *mf, cli_opt *opts);

/* For --model cfg->model: makes its settings in mf (as init says, for cfg
 * as parsed), applies a preset given (its slot's name, through the flag's
 * `preset`) over them, then copies every other slot given (seen[first + i]
 * for slot i) into them at the model's offset, checked against the model's
 * range, and
 * points cfg->model_config at them (valid as long as mf). A given flag the
 * model does not read, and --seq (the option named "seq" in opts, when
 * given) on a model without sequences, are errors. Returns CLI_EXIT_OK or
 * CLI_EXIT_USAGE (CLI_EXIT_FAIL when the settings do not fit) after the
 * message. */
int cli_model_flags_apply(cli_model_flags *mf, const cli_opt *opts, const bool *seen, int first,
                          mt_train_config *cfg);

/* The int setting `f` (an MT_MODEL_FLAG_INT, _BOOL or _CHOICE) of the model
 * settings at mc. */
int cli_model_setting(const void *mc, const mt_model_flag *f);

/* The name of choice i of the MT_MODEL_FLAG_CHOICE flag f (its metavar's
 * i-th of "a|b|c"), into buf (n bytes); i in digits where it names none.
 * Returns buf. */
const char *cli_model_choice(const mt_model_flag *f, int i, char *buf, size_t n);

/* The models' names in kind order, joined by `sep` ("gpt|mlp|linreg|llama":
 * a --model flag's choices, choice i being kind i), into buf (n bytes). */
void cli_model_names(char *buf, size_t n, const char *sep);

/* " L=2 C=64 NH=4 ..." : the settings of cfg's model (cfg->model_config,
 * or the model's defaults where it is NULL), as its fields. */
void cli_model_flags_describe(const mt_train_config *cfg, char *buf, size_t n);

#endif /* MT_CLI_MODEL_FLAGS_H */
