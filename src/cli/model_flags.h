/*
 * model_flags.h — the flags of the models' own settings, read from the
 * models' tables (mt_model_about, meshtrain/train.h), so that `train` and
 * `explain --model` have no branch on the model kind: a new model's flags
 * appear in both, with their ranges and help, from its table entry alone.
 *
 * Every model's flags are merged by name into one set of slots (GPT's and
 * the MLP's --layers are one flag); after parsing, the slots given are
 * copied into the configuration at the offsets the chosen model gives, and
 * a flag the chosen model does not read is an error naming the models that
 * do.
 */
#ifndef MT_CLI_MODEL_FLAGS_H
#define MT_CLI_MODEL_FLAGS_H

#include "cli/args.h"
#include "meshtrain.h"

#define CLI_MAX_MODEL_FLAGS 24

typedef struct {
    int n;
    struct {
        const char *flag, *metavar;
        int         value;       /* parsed here; the default from the default config */
        char        help[200];   /* "gpt: transformer blocks L; mlp: linear layers" */
    } f[CLI_MAX_MODEL_FLAGS];
} cli_model_flags;

/* Fills mf with every model's flags, each slot's value the one `defaults`
 * holds for the first model that reads it. */
void cli_model_flags_init(cli_model_flags *mf, const mt_train_config *defaults);

/* Writes mf's cli_opt entries into opts (room for mf->n); returns mf->n. */
int cli_model_flags_opts(cli_model_flags *mf, cli_opt *opts);

/* For --model `kind`: copies every slot given (seen[first + i] for slot i)
 * into cfg at the model's offset, checked against the model's range; a
 * given flag the model does not read, and --seq (the option named "seq" in
 * opts, when given) on a model without sequences, are errors. Returns
 * CLI_EXIT_OK or CLI_EXIT_USAGE after the message. */
int cli_model_flags_apply(const cli_model_flags *mf, mt_model_kind kind, const cli_opt *opts,
                          const bool *seen, int first, mt_train_config *cfg);

/* " L=2 C=64 NH=4 ..." : the model's settings in cfg, as its fields. */
void cli_model_flags_describe(mt_model_kind kind, const mt_train_config *cfg, char *buf,
                              size_t n);

#endif /* MT_CLI_MODEL_FLAGS_H */
