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
#include <string.h>
#include <unistd.h>

static const char SAMPLE_USAGE[] =
    "usage: meshtrain sample --ckpt FILE [flags]\n"
    "       meshtrain sample --llmc-in FILE [--model NAME] [flags]\n"
    "\n"
    "Writes --tokens sampled tokens that continue --prompt to stdout. --ckpt FILE\n"
    "is a meshtrain checkpoint (from train --ckpt-out) of a GPT or a LLaMA model,\n"
    "or an llm.c GPT-2 checkpoint; --llmc-in FILE is the model's llm.c-family\n"
    "checkpoint: llm.c's for gpt, llama2.c's model.bin for llama (--model llama).\n"
    "Tokens are bytes, or, with --tokenizer, pieces of the tokenizer the model was\n"
    "trained with (any kind meshtrain tokenize reads), which encodes the prompt;\n"
    "the model's vocabulary must be 256 (bytes) or the tokenizer's pieces. The\n"
    "tokenizer's beginning-of-sequence id goes first where it defines one, as\n"
    "llama2.c's run.c and Hugging Face's encode put it (--bos off: the prompt alone).\n"
    "\n"
    "examples:\n"
    "  meshtrain sample --ckpt model.ckpt --prompt \"The \" --tokens 300 --temperature 0.8\n"
    "  meshtrain sample --ckpt model.ckpt --tokenizer tok.model --prompt \"The \"\n"
    "  meshtrain sample --llmc-in model.bin --model llama --tokenizer tok.model\n";

/* The models with an llm.c-family file, "gpt|llama", and their kinds. */
static int llmc_models(char *buf, size_t n, int *kinds, int max) {
    size_t at = 0;
    int count = 0;
    buf[0] = '\0';
    for (int k = 0; mt_model_about_of((mt_model_kind)k) && count < max && at < n; k++) {
        if (!mt_model_about_of((mt_model_kind)k)->llmc) continue;
        int w = snprintf(buf + at, n - at, "%s%s", count ? "|" : "", mt_model_name((mt_model_kind)k));
        if (w < 0) break;
        at += (size_t)w;
        kinds[count++] = k;
    }
    return count;
}

int cli_cmd_sample(int argc, char **argv) {
    mt_sample_config cfg = {
        .ckpt = NULL, .prompt = NULL, .n = 256, .temperature = 1.0f,
        .top_k = 0, .seed = 1337, .threads = 0, .tokenizer = NULL,
    };
    const double INF = HUGE_VAL;
    char choices[64];
    int kinds[16], model = 0, bos = MT_SAMPLE_BOS_AUTO;   /* "auto|on|off": mt_sample_bos */
    llmc_models(choices, sizeof choices, kinds, 16);
    const cli_opt opts[] = {
        {"ckpt", CLI_STR, &cfg.ckpt, 0, 0, 0, 0, NULL, "FILE", "checkpoint to sample from (or --llmc-in, --hf-in)"},
        {"prompt", CLI_STR, &cfg.prompt, 0, 0, 0, 0, NULL, "TEXT",
         "text to continue (bytes; none: the BOS alone, or a newline)"},
        {"tokens", CLI_INT, &cfg.n, 1, 1e7, 0, 0, NULL, "N", "tokens to generate"},
        {"temperature", CLI_FLOAT, &cfg.temperature, 0, INF, 0, 0, NULL, "X", "softmax temperature (0: greedy)"},
        {"top-k", CLI_INT, &cfg.top_k, 0, 1 << 24, 0, 0, NULL, "K", "sample among the K likeliest (0: all)"},
        {"seed", CLI_U64, &cfg.seed, 0, 0, 0, 0, NULL, "N", "sampling seed"},
        {"threads", CLI_INT, &cfg.threads, 0, 4096, 0, 0, NULL, "N", "kernel threads (0: all cores)"},
        {"tokenizer", CLI_STR, &cfg.tokenizer, 0, 0, 0, 0, NULL, "FILE",
         "tokenizer to encode the prompt and decode the tokens (SentencePiece .model, "
         "tokenizer.json, tiktoken ranks, llama2.c's tokenizer.bin; default: bytes)"},
        {"bos", CLI_CHOICE, &bos, 0, 0, 0, 0, "auto|on|off", "MODE",
         "the tokenizer's beginning-of-sequence id before the prompt (auto: where it "
         "defines one)"},
        {"llmc-in", CLI_STR, &cfg.llmc_in, 0, 0, 0, 0, NULL, "FILE",
         "instead of --ckpt: the model's llm.c-family checkpoint (llm.c's for gpt, llama2.c's "
         "model.bin for llama)"},
        {"model", CLI_CHOICE, &model, 0, 0, 0, 0, choices, "NAME",
         "with --llmc-in: the model the file holds"},
        {"hf-in", CLI_STR, &cfg.hf_in, 0, 0, 0, 0, NULL, "DIR",
         "instead of --ckpt: a Hugging Face directory (config.json, model.safetensors) of a "
         "LLaMA or a GPT-2"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    bool seen[sizeof opts / sizeof opts[0]] = {0};
    int rc = cli_parse("sample", opts, argc, argv, seen);
    if (rc < 0) {
        cli_print_help(stdout, SAMPLE_USAGE, opts);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK) return rc;
    const int sources = (cfg.ckpt != NULL) + (cfg.llmc_in != NULL) + (cfg.hf_in != NULL);
    if (sources != 1) {
        cli_error("sample needs --ckpt FILE%s; see `meshtrain sample --help`",
                  sources ? ", --llmc-in FILE or --hf-in DIR: one of them"
                          : " (or --llmc-in FILE, or --hf-in DIR)");
        return CLI_EXIT_USAGE;
    }
    bool model_given = false;
    for (int i = 0; opts[i].name; i++) model_given |= seen[i] && strcmp(opts[i].name, "model") == 0;
    if (model_given && !cfg.llmc_in) {
        cli_error("--model says what --llmc-in's file holds; a meshtrain checkpoint (--ckpt) "
                  "says it itself: drop --model");
        return CLI_EXIT_USAGE;
    }
    cfg.model = (mt_model_kind)kinds[model];
    cfg.bos = (mt_sample_bos)bos;
    /* the tokenizer is opened, and the tools found, before the model is built */
    mt_tokenizer *tok = NULL;
    mt_status st = MT_OK;
    if (cfg.tokenizer && ((st = mt_tokenizer_open(cfg.tokenizer, &tok)) != MT_OK ||
                          (st = mt_tokenizer_check_tools(tok)) != MT_OK)) {
        cli_error("--tokenizer: %s", mt_errmsg());
        mt_tokenizer_free(tok);
        return CLI_EXIT_FAIL;
    }
    mt_tokenizer_free(tok);
    /* the model's vocabulary and the tokenizer's (or the 256 bytes): a
     * mismatch is the wrong pair of files on the command line */
    bool mismatch = false;
    if ((st = mt_sample_check(&cfg, &mismatch)) != MT_OK) {
        cli_error("%s", mt_errmsg());
        return mismatch ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }

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
