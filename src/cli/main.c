/*
 * main.c — `meshtrain <command>`: dispatches to the commands.
 *
 * The program is thin on purpose: everything it does is reachable through the
 * library (include/meshtrain.h), so what the CLI can do, a user program can.
 * Exit codes: 0 success, 1 failure (the library's message), 2 usage error,
 * 130 training stopped by Ctrl-C (after saving).
 */
#include "cli/args.h"
#include "meshtrain.h"

#include <string.h>

static const char USAGE[] =
    "usage: meshtrain <command> [flags]\n"
    "\n"
    "Trains neural networks, from a linear regression to GPT-2, on a mesh of devices.\n"
    "\n"
    "commands:\n"
    "  train     train a model (gpt, mlp, linreg) and write checkpoints and metrics\n"
    "  sample    generate text from a checkpoint\n"
    "  example   run a built-in example: linreg (the JAX pmap linear regression)\n"
    "  bench     benchmark: collectives (time, algbw, busbw per size, as nccl-tests)\n"
    "  version   print the version\n"
    "  help      print this help, or a command's: meshtrain help train\n"
    "\n"
    "Every command takes --help.\n";

static int cmd_version(int argc, char **argv) {
    if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
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

static int dispatch(const char *cmd, int argc, char **argv);
int cli_cmd_example(int argc, char **argv);   /* cmd_example.c */
int cli_cmd_bench(int argc, char **argv);     /* cmd_bench.c */

static int cmd_help(int argc, char **argv) {
    if (argc == 0 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        fputs(USAGE, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[0], "help") == 0) {
        fputs(USAGE, stdout);
        return CLI_EXIT_OK;
    }
    char help_flag[] = "--help";
    char *args[] = {help_flag, NULL};
    return dispatch(argv[0], 1, args);
}

static int dispatch(const char *cmd, int argc, char **argv) {
    if (strcmp(cmd, "train") == 0) return cli_cmd_train(argc, argv);
    if (strcmp(cmd, "sample") == 0) return cli_cmd_sample(argc, argv);
    if (strcmp(cmd, "example") == 0) return cli_cmd_example(argc, argv);
    if (strcmp(cmd, "bench") == 0) return cli_cmd_bench(argc, argv);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) return cmd_version(argc, argv);
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)
        return cmd_help(argc, argv);
    if (cmd[0] == '-')
        cli_error("expected a command before '%s' (train, sample, version, help); "
                  "see `meshtrain help`", cmd);
    else
        cli_error("unknown command '%s' (commands: train, sample, version, help); "
                  "see `meshtrain help`", cmd);
    return CLI_EXIT_USAGE;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(USAGE, stderr);
        return CLI_EXIT_USAGE;
    }
    return dispatch(argv[1], argc - 2, argv + 2);
}
