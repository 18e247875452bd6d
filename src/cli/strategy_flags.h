/*
 * strategy_flags.h — the flags of the parallel strategy, declared once for
 * `meshtrain train`, `meshtrain explain --model` and `meshtrain plan`:
 * --zero, --rules, --sequence-parallel, --collective-matmul, --schedule,
 * --microbatches, --chunks and --remat.
 *
 * One table (strategy_flags.c) gives each flag its name, values, help and
 * the commands that read it. train and explain take one value of each, as
 * the trainer runs it (mt_train_config); plan takes a value or, for the
 * settings it searches (ZeRO stage, remat policy, sequence parallelism,
 * collective matmul, schedule), "auto": every value (mt_plan_request's
 * -1), and for --chunks and --microbatches a value or none (0: searched).
 * A command puts the table's options into its own
 * (cli_strategy_flags_opts), parses, then writes the values into its
 * configuration (cli_strategy_flags_apply or cli_strategy_flags_plan).
 */
#ifndef MT_CLI_STRATEGY_FLAGS_H
#define MT_CLI_STRATEGY_FLAGS_H

#include "cli/args.h"
#include "meshtrain.h"

/* The commands that read strategy flags. */
typedef enum {
    CLI_STRATEGY_TRAIN,     /* meshtrain train */
    CLI_STRATEGY_EXPLAIN,   /* meshtrain explain --model */
    CLI_STRATEGY_PLAN,      /* meshtrain plan: "auto" searches */
    CLI_STRATEGY_N
} cli_strategy_cmd;

#define CLI_MAX_STRATEGY_FLAGS 12

/* The flags' values as parsed, and the text their help is made of. */
typedef struct {
    cli_strategy_cmd cmd;
    /* one value (train, explain; rules and microbatches for plan too) */
    int         zero;          /* ZeRO stage, 0 to 3 */
    const char *rules;         /* NULL: the default rows (points into argv) */
    bool        sp;            /* --sequence-parallel */
    int         cpa;           /* --cp-attention: index in allgather|ring|ulysses */
    int         cm;            /* --collective-matmul: index in auto|on|off */
    int         raf;           /* --reshard-after-forward: index in auto|on|off */
    int         fg;            /* --fsdp-gather: index in auto|once|microbatch */
    const char *schedule;      /* NULL: the trainer's default (1f1b) */
    int         microbatches;  /* train and explain: 1; plan: 0, every count */
    int         chunks;        /* 0: the schedule's own (plan: searched) */
    int         remat;         /* an mt_remat */
    /* plan's: an index in "auto|<values>", 0 auto (every value) */
    int         zero_pick, sp_pick, schedule_pick, remat_pick;
    int         cpa_pick;      /* plan's --cp-attention: index in auto|allgather|ring|ulysses */
    char        kinds[160];            /* "gpipe|1f1b|...": the schedule kinds */
    char        plan_kinds[168];       /* "auto|gpipe|1f1b|..." */
    char        help[CLI_MAX_STRATEGY_FLAGS][480];   /* each option's, as cmd shows it */
} cli_strategy_flags;

/* Fills sf for command cmd with each flag's default: for train and
 * explain the values of c (mt_train_defaults() as the command starts
 * from), for plan mt_plan_request_defaults()'s (every setting searched). */
void cli_strategy_flags_init(cli_strategy_flags *sf, cli_strategy_cmd cmd,
                             const mt_train_config *c);

/* Writes the options of the flags sf's command reads into opts (room for
 * CLI_MAX_STRATEGY_FLAGS), pointing at sf (valid as long as sf); returns
 * how many. */
int cli_strategy_flags_opts(cli_strategy_flags *sf, cli_opt *opts);

/* train and explain: writes the values into cfg (zero, rules,
 * sequence_parallel, collective_matmul, schedule, remat; pipe_chunks for
 * train), and --microbatches, when given (seen in opts, the command's whole
 * table), into cfg->accum unless --accum was given too. */
void cli_strategy_flags_apply(const cli_strategy_flags *sf, const cli_opt *opts, const bool *seen,
                              mt_train_config *cfg);

/* train and explain: the flags that would be silently ignored — a
 * --collective-matmul given (auto included) without --sequence-parallel,
 * --microbatches and --accum (train's) given with different counts.
 * Returns CLI_EXIT_OK, or CLI_EXIT_USAGE after the message. */
int cli_strategy_flags_check(const cli_strategy_flags *sf, const cli_opt *opts, const bool *seen,
                             const mt_train_config *cfg);

/* plan: writes the picks into q (zero, remat, sequence_parallel,
 * collective_matmul and schedule: -1 for auto), chunks and microbatches
 * (0: searched) and the rules (q->model.rules). */
void cli_strategy_flags_plan(const cli_strategy_flags *sf, mt_plan_request *q);

#endif /* MT_CLI_STRATEGY_FLAGS_H */
