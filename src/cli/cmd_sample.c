/*
 * cmd_sample.c — `meshtrain sample`: generates text from a checkpoint.
 *
 * stdout receives exactly the sampled bytes (not the prompt), so the output
 * can be piped and measured; the library writes each byte as it is produced.
 */
#include "cli/args.h"
#include "meshtrain.h"
#include "meshtrain/tokenizer.h"

#include <math.h>
#include <unistd.h>

static const char SAMPLE_USAGE[] =
    "usage: meshtrain sample --ckpt FILE [flags]\n"
    "\n"
    "Writes --tokens sampled tokens that continue --prompt to stdout. FILE is a\n"
    "meshtrain checkpoint (from train --ckpt-out) or an llm.c GPT-2 checkpoint.\n"
    "Tokens are bytes, or, with --tokenizer, pieces of the SentencePiece model\n"
    "the model was trained with (meshtrain tokenize), which encodes the prompt.\n"
    "\n"
    "examples:\n"
    "  meshtrain sample --ckpt model.ckpt --prompt \"The \" --tokens 300 --temperature 0.8\n"
    "  meshtrain sample --ckpt model.ckpt --tokenizer tok.model --prompt \"The \"\n";

int cli_cmd_sample(int argc, char **argv) {
    mt_sample_config cfg = {
        .ckpt = NULL, .prompt = "\n", .n = 256, .temperature = 1.0f,
        .top_k = 0, .seed = 1337, .threads = 0, .tokenizer = NULL,
    };
    const double INF = HUGE_VAL;
    const cli_opt opts[] = {
        {"ckpt", CLI_STR, &cfg.ckpt, 0, 0, 0, 0, NULL, "FILE", "checkpoint to sample from (required)"},
        {"prompt", CLI_STR, &cfg.prompt, 0, 0, 0, 0, NULL, "TEXT", "text to continue (bytes)"},
        {"tokens", CLI_INT, &cfg.n, 1, 1e7, 0, 0, NULL, "N", "tokens to generate"},
        {"temperature", CLI_FLOAT, &cfg.temperature, 0, INF, 0, 0, NULL, "X", "softmax temperature (0: greedy)"},
        {"top-k", CLI_INT, &cfg.top_k, 0, 1 << 24, 0, 0, NULL, "K", "sample among the K likeliest (0: all)"},
        {"seed", CLI_U64, &cfg.seed, 0, 0, 0, 0, NULL, "N", "sampling seed"},
        {"threads", CLI_INT, &cfg.threads, 0, 4096, 0, 0, NULL, "N", "kernel threads (0: all cores)"},
        {"tokenizer", CLI_STR, &cfg.tokenizer, 0, 0, 0, 0, NULL, "MODEL",
         "SentencePiece model to encode the prompt and decode the tokens (default: bytes)"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    int rc = cli_parse("sample", opts, argc, argv, NULL);
    if (rc < 0) {
        cli_print_help(stdout, SAMPLE_USAGE, opts);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK) return rc;
    if (!cfg.ckpt) {
        cli_error("sample needs --ckpt FILE; see `meshtrain sample --help`");
        return CLI_EXIT_USAGE;
    }
    /* the tokenizer is opened, and the tools found, before the model is built */
    mt_tokenizer *tok = NULL;
    mt_status st = MT_OK;
    if (cfg.tokenizer && ((st = mt_tokenizer_open(cfg.tokenizer, &tok)) != MT_OK ||
                          (st = mt_tokenizer_find_tool(MT_SPM_ENCODE, NULL, 0)) != MT_OK)) {
        cli_error("--tokenizer: %s", mt_errmsg());
        mt_tokenizer_free(tok);
        return CLI_EXIT_FAIL;
    }
    mt_tokenizer_free(tok);

    /* mt_sample flushes every byte and fails, with the system's message, at
     * the first that cannot be written; main() checks stdout once more */
    st = mt_sample(&cfg, stdout);
    /* end a terminal's line so the shell prompt does not follow the text */
    if (isatty(STDOUT_FILENO)) fputc('\n', stdout);
    if (st != MT_OK) {
        cli_error("%s", mt_errmsg()[0] ? mt_errmsg() : mt_status_text(st));
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}
