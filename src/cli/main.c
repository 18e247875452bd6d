/*
 * main.c — `meshtrain <command>`: dispatches to the commands.
 *
 * The program is thin on purpose: everything it does is reachable through the
 * library (include/meshtrain.h), so what the CLI can do, a user program can.
 * Exit codes: 0 success, 1 failure (the library's message), 2 usage error,
 * 130 and 143 training stopped by Ctrl-C or SIGTERM (after saving), 75 under
 * mpirun a device lost and the job stopped (CLI_EXIT_LOST, src/cli/args.h). A
 * command whose output to stdout was lost (a full disk) fails, with the
 * system's message, even when everything else went well.
 */
#include "cli/args.h"
#include "cli/model_flags.h"
#include "meshtrain.h"

#include <errno.h>
#include <string.h>

static int cmd_version(int argc, char **argv);
static int cmd_help(int argc, char **argv);

/* ---- the commands ------------------------------------------------------- */

/* One entry per command: the dispatcher, `meshtrain help` and the "unknown
 * command" message all read this table, so a command added here is listed
 * everywhere. */
typedef struct {
    const char *name;
    int       (*run)(int argc, char **argv);   /* argv: the words after the name */
    /* one line for `meshtrain help`; MODELS in it stands for the models of
     * the trainer's table, "gpt, mlp, ..." */
    const char *summary;
    const char *aliases[2];                    /* other spellings, or NULL */
} cli_command;

static const cli_command COMMANDS[] = {
    {"train", cli_cmd_train, "train a model (MODELS) and write checkpoints and metrics",
     {NULL, NULL}},
    {"sample", cli_cmd_sample, "generate text from a checkpoint", {NULL, NULL}},
    {"tokenize", cli_cmd_tokenize, "train a SentencePiece tokenizer on a text and encode it into "
     "llm.c token files", {NULL, NULL}},
    {"example", cli_cmd_example, "run a built-in example: linreg (the JAX pmap linear regression)",
     {NULL, NULL}},
    {"bench", cli_cmd_bench, "benchmark: collectives (as nccl-tests), machine (peaks for the "
     "roofline), matmul (engine vs sgemm)",
     {NULL, NULL}},
    {"explain", cli_cmd_explain, "why communication happens: an op's result type and moves on "
     "typed operands", {NULL, NULL}},
    {"schedule", cli_cmd_schedule, "pipeline schedules (gpipe, 1f1b, zb-h1, zb-v, ...): check, "
     "simulate, draw", {NULL, NULL}},
    {"plan", cli_cmd_plan, "the best mesh for a model on hardware we do not have: memory, step "
     "time, MFU, what binds", {NULL, NULL}},
    {"report", cli_cmd_report, "where a traced run's time went: roofline, exposed comm, MFU, "
     "bubble", {NULL, NULL}},
    {"version", cmd_version, "print the version", {"--version", NULL}},
    {"help", cmd_help, "print this help, or a command's: meshtrain help train", {"--help", "-h"}},
};

#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static const cli_command *find_command(const char *word) {
    for (size_t i = 0; i < N_COMMANDS; i++) {
        const cli_command *c = &COMMANDS[i];
        if (strcmp(word, c->name) == 0) return c;
        for (size_t a = 0; a < sizeof c->aliases / sizeof c->aliases[0]; a++)
            if (c->aliases[a] && strcmp(word, c->aliases[a]) == 0) return c;
    }
    return NULL;
}

/* ---- usage -------------------------------------------------------------- */

/* c's summary, with MODELS replaced by the models' names. */
static void print_summary(FILE *out, const cli_command *c) {
    const char *at = strstr(c->summary, "MODELS");
    if (!at) {
        fprintf(out, "%s\n", c->summary);
        return;
    }
    char names[256];
    cli_model_names(names, sizeof names, ", ");
    fprintf(out, "%.*s%s%s\n", (int)(at - c->summary), c->summary, names, at + strlen("MODELS"));
}

static void print_usage(FILE *out) {
    fputs("usage: meshtrain <command> [flags]\n"
          "\n"
          "Trains neural networks, from a linear regression to GPT-2, on a mesh of devices.\n"
          "\n"
          "commands:\n", out);
    int width = 0;
    for (size_t i = 0; i < N_COMMANDS; i++) {
        int n = (int)strlen(COMMANDS[i].name);
        if (n > width) width = n;
    }
    for (size_t i = 0; i < N_COMMANDS; i++) {
        fprintf(out, "  %-*s ", width + 2, COMMANDS[i].name);
        print_summary(out, &COMMANDS[i]);
    }
    fputs("\nEvery command takes --help.\n", out);
}

/* "train, sample, ..., help": every command, for messages. */
static void command_names(char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_COMMANDS && at < n; i++) {
        int w = snprintf(buf + at, n - at, "%s%s", i ? ", " : "", COMMANDS[i].name);
        if (w < 0) break;
        at += (size_t)w;
    }
}

/* ---- version and help --------------------------------------------------- */

static bool is_help_flag(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

static int cmd_version(int argc, char **argv) {
    if (argc > 0 && is_help_flag(argv[0])) {
        printf("usage: meshtrain version\n\nPrints the version of meshtrain.\n");
        return CLI_EXIT_OK;
    }
    if (argc > 0) {
        cli_error("version takes no arguments (got '%s')", argv[0]);
        return CLI_EXIT_USAGE;
    }
    printf("meshtrain %s\n", MT_VERSION_STRING);
    return CLI_EXIT_OK;
}

static int dispatch(const char *word, int argc, char **argv);

/* `meshtrain help [command]`: this usage, or the command's own --help. */
static int cmd_help(int argc, char **argv) {
    if (argc == 0 || is_help_flag(argv[0]) || strcmp(argv[0], "help") == 0) {
        print_usage(stdout);
        return CLI_EXIT_OK;
    }
    char help_flag[] = "--help";
    char *args[] = {help_flag, NULL};
    return dispatch(argv[0], 1, args);
}

/* ---- dispatch ----------------------------------------------------------- */

static int dispatch(const char *word, int argc, char **argv) {
    const cli_command *c = find_command(word);
    if (c) return c->run(argc, argv);
    char names[256];
    command_names(names, sizeof names);
    if (word[0] == '-')
        cli_error("expected a command before '%s' (%s); see `meshtrain help`", word, names);
    else
        cli_error("unknown command '%s' (commands: %s); see `meshtrain help`", word, names);
    return CLI_EXIT_USAGE;
}

/* stdout is written through stdio, whose errors only show when it is flushed:
 * this flush is the last one, and a write that failed before still fails
 * (stdio keeps the bytes it could not write). A command that failed has said
 * why already; one that did not would otherwise exit 0 with its output lost. */
static int finish_stdout(int rc) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
    if (rc != CLI_EXIT_OK) return rc;
    cli_error("cannot write to standard output: %s",
              errno ? strerror(errno) : "an earlier write failed");
    return CLI_EXIT_FAIL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    /* the kernel level, capped by MT_CPU_ISA: a misspelt value fails every
     * command here rather than running at a level nobody asked for */
    if (mt_set_cpu_isa(NULL) != MT_OK) {
        cli_error("%s", mt_errmsg());
        return CLI_EXIT_USAGE;
    }
    return finish_stdout(dispatch(argv[1], argc - 2, argv + 2));
}
