/*
 * args.h — the flag parser behind every `meshtrain <command>`.
 *
 * A command describes its flags in a table (name, kind, where the value goes,
 * the accepted range, a help line); cli_parse() fills the destinations from
 * argv and, on bad input, prints one line "meshtrain: ..." naming the flag,
 * the value and what was expected. The same table prints --help, with each
 * flag's current value as its default, so help and parser cannot drift apart.
 */
#ifndef MT_CLI_ARGS_H
#define MT_CLI_ARGS_H

#include "meshtrain/base.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes of the program: usage errors are told apart from failures so
 * scripts can distinguish "you called it wrong" from "it went wrong". A run
 * stopped by a signal (after saving) exits 128 + the signal: 130 for SIGINT
 * (CLI_EXIT_INTERRUPTED), 143 for SIGTERM. Under mpirun, a job the MPI
 * transport stops because a device was lost (died, stopped, cut off, or a
 * collective timed out) exits CLI_EXIT_LOST, 75: the transport's
 * MT_MPI_EXIT_LOST (src/comm/mpi_impl.h), passed to MPI_Abort, not returned
 * through cli_exit_of. */
enum { CLI_EXIT_OK = 0, CLI_EXIT_FAIL = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_LOST = 75,
       CLI_EXIT_INTERRUPTED = 130 };

/* The exit code of a library status: the one place library statuses become
 * exit codes. MT_EINVAL, MT_ESHAPE, MT_ESHARDING and MT_EUNSUPPORTED say the
 * configuration the command line gave is wrong, found before any work:
 * CLI_EXIT_USAGE (2). Every other failure (files, their contents, memory,
 * the run) is CLI_EXIT_FAIL (1); MT_OK is CLI_EXIT_OK. A caller whose status
 * comes from a file's contents says MT_EFORMAT, never MT_EINVAL. */
int cli_exit_of(mt_status s);

/* The most devices the threads transport runs (MAX_THREADS in
 * src/comm/launch.c): the limit and the help of every --devices flag. */
#define CLI_MAX_THREAD_DEVICES 1024

typedef enum {
    CLI_INT,     /* int,        dest int*      */
    CLI_U64,     /* uint64_t,   dest uint64_t* */
    CLI_FLOAT,   /* float,      dest float*    */
    CLI_DOUBLE,  /* double,     dest double*   */
    CLI_STR,     /* string,     dest const char** (points into argv) */
    CLI_CHOICE,  /* one of "a|b|c", dest int* (index of the choice) */
    CLI_FLAG     /* no value,   dest bool*     */
} cli_kind;

/* Range ends may be open (lo_open/hi_open: the end itself is excluded), and
 * an end of ±HUGE_VAL means unbounded. */
typedef struct {
    const char *name;      /* without the leading "--" */
    cli_kind    kind;
    void       *dest;
    double      lo, hi;
    bool        lo_open, hi_open;
    const char *choices;   /* CLI_CHOICE: "gpt|mlp|linreg" */
    const char *metavar;   /* shown in help: N, X, FILE, ... */
    const char *help;
} cli_opt;

/* Parses argv[0..argc) (the words after the command name) against `opts`
 * (terminated by an entry with name == NULL). `seen`, if not NULL, has one
 * entry per option and is set for each flag given. Returns CLI_EXIT_OK,
 * CLI_EXIT_USAGE after printing the message, or -1 when --help/-h was given
 * (the caller prints help and exits 0). */
int cli_parse(const char *cmd, const cli_opt *opts, int argc, char **argv, bool *seen);

/* Whether the flag `name` of opts was given (seen as cli_parse left it). */
bool cli_given(const cli_opt *opts, const bool *seen, const char *name);

/* For commands of the form `meshtrain <cmd> <name> [flags]` that have one
 * name so far (`example linreg`, `bench collectives`; `kind` says what a name
 * is in messages: "example", "benchmark"): checks argv[0] is `name`, then
 * parses the rest as cli_parse("<cmd> <name>", ...). --help or -h, as the
 * name or among the flags, prints cli_print_help(usage, opts). Returns true
 * when the command should run; false when it should return *rc at once
 * (CLI_EXIT_OK after the help, CLI_EXIT_USAGE after the message). */
bool cli_parse_named(const char *cmd, const char *name, const char *kind, const char *usage,
                     const cli_opt *opts, int argc, char **argv, int *rc);

/* Prints `usage`, then one line per flag with its metavar, help, range and
 * current value (the default, when called before parsing). */
void cli_print_help(FILE *out, const char *usage, const cli_opt *opts);

/* Strict number parsing for flags whose value is parsed after cli_parse
 * (lists, sizes). Each returns CLI_EXIT_OK, or CLI_EXIT_USAGE after printing
 * one line naming --flag, the value and what was expected. */

/* A comma-separated list of integers, each in [lo, hi], at most max_n of
 * them, into out[0 .. *n): an empty list or item ("", "2,,4", "4,"), a sign
 * where lo >= 0, a fraction, a value out of range or past an int, and more
 * than max_n items are refused. */
int cli_parse_int_list(const char *flag, const char *text, int lo, int hi, int *out,
                       int max_n, int *n);

/* A byte count: decimal digits and an optional binary unit, k, M or G (any
 * case), then an optional "i" and "B" ("256M", "4KiB", "8"), into *out;
 * fractions ("4.5"), signs, exponents, hex, white space and counts past
 * 2^63 are refused. */
int cli_parse_bytes(const char *flag, const char *text, uint64_t *out);

/* Prints "meshtrain: <message>\n" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Human numbers for progress lines: 12.3k, 4.56M; 1m23s. */
void cli_fmt_count(char *buf, size_t n, double v);
void cli_fmt_duration(char *buf, size_t n, double seconds);

/* Writes s to f as a JSON string: quoted, with quotes, backslashes and
 * control characters escaped (UTF-8 passes through). */
void cli_json_string(FILE *f, const char *s);

/* ---- the commands (argv: the words after the command name) ----------- */
/* Each returns an exit code (CLI_EXIT_*) after printing its output or its
 * one-line message; main.c's table lists them. */

int cli_cmd_train(int argc, char **argv);     /* cmd_train.c */
int cli_cmd_sample(int argc, char **argv);    /* cmd_sample.c */
int cli_cmd_example(int argc, char **argv);   /* cmd_example.c */
int cli_cmd_bench(int argc, char **argv);     /* cmd_bench.c */
int cli_cmd_explain(int argc, char **argv);   /* cmd_explain.c */
int cli_cmd_schedule(int argc, char **argv);  /* cmd_schedule.c */
int cli_cmd_report(int argc, char **argv);    /* cmd_report.c */
int cli_cmd_tokenize(int argc, char **argv);  /* cmd_tokenize.c */
int cli_cmd_plan(int argc, char **argv);      /* cmd_plan.c */
/* `meshtrain explain --model ...` (cmd_explain_model.c), argv without the command. */
int cli_explain_model(int argc, char **argv);

#endif /* MT_CLI_ARGS_H */
