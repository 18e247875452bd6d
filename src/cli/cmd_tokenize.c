/*
 * cmd_tokenize.c — `meshtrain tokenize`: trains a SentencePiece BPE
 * tokenizer on a text (or takes one already made: `--tokenizer FILE`, a
 * SentencePiece model, a Hugging Face tokenizer.json, a tiktoken ranks
 * file or llama2.c's tokenizer.bin), then encodes the text into llm.c token files, the training split
 * and, optionally, the validation split, for `train --data FILE --tokenizer
 * MODEL`; `--ids-out` writes the ids as text, for any vocabulary size.
 *
 * The tools are Debian's spm_train and spm_encode, run by the library
 * (meshtrain/tokenizer.h says how, src/io/tokenizer.c why). Everything the
 * command line can get wrong is refused before spm_train starts: the flags,
 * the text (missing, empty, not a regular file), the tools, the outputs
 * (files.h), a given model that is not one.
 */
#include "cli/args.h"
#include "cli/files.h"
#include "cli/tokenize_docs.h"
#include "meshtrain.h"
#include "meshtrain/tokenizer.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char TOKENIZE_USAGE[] =
    "usage: meshtrain tokenize --text FILE (--vocab N --model-out PREFIX | --tokenizer FILE)\n"
    "                          [--out TOKENS.bin [--val-out VAL.bin --val-frac X]]\n"
    "                          [--ids-out IDS.txt] [--bos] [--llama2c-out tokenizer.bin]\n"
    "                          [--doc-sep] [--json]\n"
    "\n"
    "Trains a SentencePiece BPE tokenizer of N pieces on the lines of FILE (byte\n"
    "fallback, no normalisation: decoding gives the text back byte for byte) and\n"
    "writes PREFIX.model and PREFIX.vocab; or, with --model-in, uses a model\n"
    "trained before. Then encodes FILE into an llm.c token file (uint16 ids, or\n"
    "uint32 past 65535: llm.c's Llama 3 kind; newlines included); --val-out takes the last X of its tokens into a second\n"
    "file, the split train --val-frac X would make of the whole. Needs Debian's\n"
    "sentencepiece package (spm_train, spm_encode). --llama2c-out also writes the\n"
    "pieces and scores as llama2.c's tokenizer.bin (its export.py's), for its run.c\n"
    "with a model from train --model llama --llmc-out model.bin.\n"
    "\n"
    "--tokenizer FILE (or --model-in) encodes with a tokenizer made before, of any\n"
    "kind, told apart by the file: a SentencePiece .model, a Hugging Face\n"
    "tokenizer.json (byte-level BPE: GPT-2, Llama 3, Qwen2; Metaspace BPE with\n"
    "byte fallback: Llama 2, Mistral), a tiktoken ranks file (cl100k_base,\n"
    "o200k_base, Llama 3's tokenizer.model) or llama2.c's tokenizer.bin; the\n"
    "whole text at once, decoding gives its bytes back (NFC text where the\n"
    "tokenizer normalises). --bos puts the tokenizer's\n"
    "beginning-of-sequence id first, as its own library does for a model's text;\n"
    "with --doc-sep before every document, as llama2.c's data preparation does.\n"
    "\n"
    "examples:\n"
    "  meshtrain tokenize --text input.txt --vocab 4096 --model-out tok --out input.bin\n"
    "  meshtrain train --data input.bin --tokenizer tok.model --steps 500\n"
    "  meshtrain sample --ckpt model.ckpt --tokenizer tok.model --prompt \"The \"\n"
    "  meshtrain tokenize --text more.txt --model-in tok.model --out more.bin \\\n"
    "                     --val-out more_val.bin --val-frac 0.1\n"
    "  meshtrain tokenize --text input.txt --tokenizer gpt2/tokenizer.json --out input.bin\n"
    "  meshtrain tokenize --text input.txt --tokenizer cl100k_base.tiktoken --ids-out ids.txt\n";

typedef struct {
    const char *text, *model_out, *model_in, *out, *val_out, *llama2c_out, *ids_out;
    const char *in_flag;   /* "model-in" or "tokenizer": how model_in was given */
    int         vocab, threads;
    double      val_frac;
    bool        json, doc_sep, bos;
    char        model_path[PATH_MAX], vocab_path[PATH_MAX];   /* from --model-out */
} tokenize_args;

/* Flags that contradict each other or leave nothing to do. */
static int check_flags(tokenize_args *a, const bool *seen_vocab, const bool *seen_frac,
                       const char *tokenizer) {
    if (tokenizer && a->model_in) {
        cli_error("--tokenizer '%s' and --model-in '%s' name the same thing: give one",
                  tokenizer, a->model_in);
        return CLI_EXIT_USAGE;
    }
    a->in_flag = tokenizer ? "tokenizer" : "model-in";
    if (tokenizer) a->model_in = tokenizer;
    if (!a->text) {
        cli_error("tokenize needs --text FILE, the text to train on and encode");
        return CLI_EXIT_USAGE;
    }
    if (!a->model_out == !a->model_in) {
        cli_error("tokenize needs one of --model-out PREFIX (train a tokenizer) and --tokenizer "
                  "FILE (use one made before)%s", a->model_out ? ", not both" : "");
        return CLI_EXIT_USAGE;
    }
    if (a->model_out && !*seen_vocab) {
        cli_error("--model-out trains a tokenizer: give its size with --vocab N (e.g. 4096)");
        return CLI_EXIT_USAGE;
    }
    if (a->model_out && a->vocab < MT_TOKENIZER_MIN_VOCAB) {
        cli_error("--vocab %d is too small: a byte-fallback tokenizer has at least %d pieces "
                  "(<unk>, <s>, </s> and the 256 bytes) plus one for each character of the "
                  "text; give --vocab %d or more (e.g. 4096)", a->vocab, MT_TOKENIZER_MIN_VOCAB,
                  MT_TOKENIZER_MIN_VOCAB);
        return CLI_EXIT_USAGE;
    }
    if (a->model_in && *seen_vocab) {
        cli_error("--vocab %d sizes a tokenizer to train, and --%s '%s' is trained "
                  "already: drop --vocab", a->vocab, a->in_flag, a->model_in);
        return CLI_EXIT_USAGE;
    }
    if (a->model_in && !a->out && !a->llama2c_out && !a->ids_out) {
        cli_error("--%s '%s' with no --out FILE has nothing to do: add --out TOKENS.bin "
                  "(or --ids-out IDS.txt, --llama2c-out tokenizer.bin)", a->in_flag, a->model_in);
        return CLI_EXIT_USAGE;
    }
    if (a->val_out && !a->out) {
        cli_error("--val-out '%s' is the validation split of --out, which is missing: add "
                  "--out TOKENS.bin", a->val_out);
        return CLI_EXIT_USAGE;
    }
    if (*seen_frac && !a->val_out) {
        cli_error("--val-frac %g splits off a validation file, and there is none: add --val-out "
                  "FILE, or drop --val-frac (train --val-frac splits one file)", a->val_frac);
        return CLI_EXIT_USAGE;
    }
    if (a->model_out &&
        (snprintf(a->model_path, sizeof a->model_path, "%s.model", a->model_out) >=
             (int)sizeof a->model_path ||
         snprintf(a->vocab_path, sizeof a->vocab_path, "%s.vocab", a->model_out) >=
             (int)sizeof a->vocab_path)) {
        cli_error("--model-out '%s' is too long for a path", a->model_out);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* The text, the tools and the files, before any work. */
static int check_inputs(const tokenize_args *a) {
    FILE *f;
    int64_t size = 0;
    mt_status s = mt_input_open(a->text, "text", 0, &f, &size);
    if (s != MT_OK) {
        cli_error("--text: %s", mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    fclose(f);
    if (size == 0) {
        cli_error("--text '%s' is empty: a tokenizer trains on, and encodes, the lines of a "
                  "text", a->text);
        return CLI_EXIT_FAIL;
    }
    /* a tokenizer given may be byte-level BPE, which needs no tool: open_model checks */
    if ((a->model_out && (s = mt_tokenizer_find_tool(MT_SPM_TRAIN, NULL, 0)) != MT_OK) ||
        (a->model_out && a->out && (s = mt_tokenizer_find_tool(MT_SPM_ENCODE, NULL, 0)) != MT_OK)) {
        cli_error("%s", mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    const cli_file files[] = {
        {.flag = "text", .path = a->text, .role = CLI_FILE_IN},
        {.flag = a->in_flag, .path = a->model_in, .role = CLI_FILE_IN},
        {.flag = "model-out", .path = a->model_out ? a->model_path : NULL, .role = CLI_FILE_SAVE},
        {.flag = "model-out", .path = a->model_out ? a->vocab_path : NULL, .role = CLI_FILE_SAVE},
        {.flag = "out", .path = a->out, .role = CLI_FILE_SAVE},
        {.flag = "val-out", .path = a->val_out, .role = CLI_FILE_SAVE},
        {.flag = "llama2c-out", .path = a->llama2c_out, .role = CLI_FILE_SAVE},
        {.flag = "ids-out", .path = a->ids_out, .role = CLI_FILE_SAVE},
    };
    return cli_check_files(files, (int)(sizeof files / sizeof files[0]));
}

/* A tokenizer that can do what the flags ask: ids a token file can hold
 * (--out), spm_encode for a SentencePiece model, what only a SentencePiece
 * model has (--llama2c-out), an end-of-text id (--doc-sep), a BOS (--bos). */
static int open_model(const tokenize_args *a, const char *flag, const char *path,
                      mt_tokenizer **tok) {
    *tok = NULL;
    bool spm = false;
    mt_status s = mt_tokenizer_open(path, tok);
    if (s == MT_OK) spm = strcmp(mt_tokenizer_kind(*tok), "SentencePiece") == 0;
    if (s == MT_OK && a->out) s = mt_tokenizer_check_vocab(*tok);
    if (s == MT_OK && (a->out || a->ids_out)) s = mt_tokenizer_check_tools(*tok);
    if (s == MT_OK && !spm && a->llama2c_out)
        s = mt_fail(MT_EINVAL, "--llama2c-out is SentencePiece's (llama2.c's tokenizer.bin "
                    "holds a SentencePiece model's pieces), and '%s' is %s: drop it", path,
                    mt_tokenizer_kind(*tok));
    if (s == MT_OK && a->doc_sep) s = cli_docs_check(*tok, path);
    if (s == MT_OK && a->bos && mt_tokenizer_bos(*tok) < 0)
        s = mt_fail(MT_EINVAL, "--bos puts the tokenizer's beginning-of-sequence id first, and "
                    "'%s' has none its library adds (GPT-2's, cl100k_base and o200k_base add "
                    "none): drop --bos", path);
    if (s == MT_OK) return CLI_EXIT_OK;
    cli_error("--%s: %s", flag, mt_errmsg());
    mt_tokenizer_free(*tok);
    *tok = NULL;
    return CLI_EXIT_FAIL;
}

/* What was done, for the report. */
typedef struct {
    int64_t tokens, n_train, n_val;
    double  train_s, encode_s;
    int64_t text_bytes;
} tokenize_done;

/* Encodes the text and writes the split. */
/* --ids-out: the ids as text, one a line. */
typedef struct { const int32_t *ids; int64_t n; } id_span;

static mt_status write_id_lines(FILE *f, void *arg) {
    const id_span *sp = arg;
    for (int64_t i = 0; i < sp->n; i++) fprintf(f, "%d\n", sp->ids[i]);
    return MT_OK;
}

static mt_status write_ids(const char *path, const int32_t *ids, int64_t n) {
    mt_output *o;
    mt_status s = mt_output_claim(path, "ids", &o);
    if (s != MT_OK) return s;
    id_span sp = {ids, n};
    s = mt_output_write(o, write_id_lines, &sp);
    mt_output_close(o);
    return s;
}

static int encode_and_write(const tokenize_args *a, const mt_tokenizer *tok, tokenize_done *d) {
    int32_t *ids = NULL;
    int64_t n = 0;
    double t0 = mt_time_now();
    mt_status s = cli_docs_encode(tok, a->text, a->doc_sep, a->bos, &ids, &n);
    d->encode_s = mt_time_now() - t0;
    if (s != MT_OK) {
        cli_error("encoding --text '%s': %s", a->text, mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    d->tokens = n;
    d->n_val = a->val_out ? (int64_t)floor((double)n * a->val_frac) : 0;
    if (d->n_val > n - 1) d->n_val = n - 1;   /* as mt_dataset_open rounds */
    d->n_train = n - d->n_val;
    int rc = CLI_EXIT_OK;
    if (a->ids_out && (s = write_ids(a->ids_out, ids, n)) != MT_OK) {
        cli_error("--ids-out: %s", mt_errmsg());
        rc = CLI_EXIT_FAIL;
    } else if (a->out && a->val_out && d->n_val < 1) {
        cli_error("--text '%s' encodes to %lld tokens, and --val-frac %g of them is none: give "
                  "a larger --val-frac or more text", a->text, (long long)n, a->val_frac);
        rc = CLI_EXIT_USAGE;
    } else if (a->out && ((s = mt_tokens_write(a->out, ids, d->n_train)) != MT_OK ||
                          (a->val_out && (s = mt_tokens_write(a->val_out, ids + d->n_train,
                                                              d->n_val)) != MT_OK))) {
        cli_error("%s", mt_errmsg());
        rc = CLI_EXIT_FAIL;
    }
    free(ids);
    return rc;
}

/* llama2.c's tokenizer.bin of tok, as its export.py writes one: every
 * piece with "▁" as a space (mt_llama2c_piece), BOS and EOS as "\n<s>\n"
 * and "\n</s>\n", and each piece's score. The models trained here keep
 * SentencePiece's <unk>, <s>, </s> at 0, 1, 2 and the byte pieces at 3 +
 * byte, where run.c's encoder looks them up. */
static int write_llama2c(const char *path, const mt_tokenizer *tok) {
    const int n = mt_tokenizer_vocab(tok);
    char **pieces = calloc((size_t)n, sizeof *pieces);   /* (n) */
    float *scores = malloc((size_t)n * sizeof *scores);   /* (n) */
    mt_status s = pieces && scores ? MT_OK : mt_fail(MT_ENOMEM, "out of memory for %d pieces", n);
    for (int i = 0; i < n && s == MT_OK; i++) {
        const char *p = mt_tokenizer_piece(tok, i, &scores[i]);
        size_t len = strlen(p) + 8;   /* "▁" only shrinks; BOS and EOS gain 2 */
        if (!(pieces[i] = malloc(len))) {
            s = mt_fail(MT_ENOMEM, "out of memory for piece %d", i);
        } else if (strcmp(p, "<s>") == 0 || strcmp(p, "</s>") == 0) {
            snprintf(pieces[i], len, "\n%s\n", p);
        } else {
            s = mt_llama2c_piece(p, pieces[i], len);
        }
    }
    if (s == MT_OK) s = mt_llama2c_tokenizer_write(path, n, (const char *const *)pieces, scores);
    for (int i = 0; pieces && i < n; i++) free(pieces[i]);
    free(pieces);
    free(scores);
    if (s == MT_OK) return CLI_EXIT_OK;
    cli_error("--llama2c-out: %s", mt_errmsg());
    return CLI_EXIT_FAIL;
}

static void print_report(const tokenize_args *a, const mt_tokenizer *tok,
                         const tokenize_done *d) {
    const char *model = mt_tokenizer_path(tok);
    if (a->json) {
        printf("{\"tokenizer\": ");
        cli_json_string(stdout, model);
        printf(", \"kind\": \"%s\", \"vocab\": %d, \"bos\": %d, \"eos\": %d, \"trained\": %s, "
               "\"text\": ", mt_tokenizer_kind(tok), mt_tokenizer_vocab(tok),
               mt_tokenizer_bos(tok), mt_tokenizer_eos(tok), a->model_out ? "true" : "false");
        cli_json_string(stdout, a->text);
        printf(", \"text_bytes\": %lld, \"train_seconds\": %.3f", (long long)d->text_bytes,
               d->train_s);
        if (a->out || a->ids_out)
            printf(", \"tokens\": %lld, \"encode_seconds\": %.3f", (long long)d->tokens,
                   d->encode_s);
        if (a->ids_out) {
            printf(", \"ids\": ");
            cli_json_string(stdout, a->ids_out);
        }
        if (a->out) {
            printf(", \"train\": {\"path\": ");
            cli_json_string(stdout, a->out);
            printf(", \"tokens\": %lld}", (long long)d->n_train);
            if (a->val_out) {
                printf(", \"val\": {\"path\": ");
                cli_json_string(stdout, a->val_out);
                printf(", \"tokens\": %lld}", (long long)d->n_val);
            }
        }
        if (a->llama2c_out) {
            printf(", \"llama2c\": ");
            cli_json_string(stdout, a->llama2c_out);
        }
        printf("}\n");
        return;
    }
    if (a->model_out)
        printf("tokenizer   %s: SentencePiece BPE, %d pieces (byte fallback), trained on %s "
               "(%lld bytes) in %.1f s; pieces and scores in %s\n", model,
               mt_tokenizer_vocab(tok), a->text, (long long)d->text_bytes, d->train_s,
               a->vocab_path);
    else
        printf("tokenizer   %s: %s, %d pieces\n", model, mt_tokenizer_kind(tok),
               mt_tokenizer_vocab(tok));
    if (a->llama2c_out)
        printf("llama2.c    %s: the pieces and scores as llama2.c's tokenizer.bin\n",
               a->llama2c_out);
    if (a->out || a->ids_out)
        printf("tokens      %lld from %s in %.1f s, %.2f bytes a token%s\n", (long long)d->tokens,
               a->text, d->encode_s, d->tokens ? (double)d->text_bytes / (double)d->tokens : 0.0,
               a->bos ? ", BOS first" : "");
    if (a->ids_out) printf("ids         %s: one a line\n", a->ids_out);
    if (!a->out) return;
    printf("train       %s: %lld tokens\n", a->out, (long long)d->n_train);
    if (a->val_out)
        printf("validation  %s: %lld tokens (the last %g)\n", a->val_out, (long long)d->n_val,
               a->val_frac);
    printf("next        meshtrain train --data %s --tokenizer %s\n", a->out, model);
}

int cli_cmd_tokenize(int argc, char **argv) {
    tokenize_args a = {.vocab = 4096, .val_frac = 0.1};
    const char *tokenizer = NULL;
    const cli_opt opts[] = {
        {"text", CLI_STR, &a.text, 0, 0, 0, 0, NULL, "FILE", "text to train on and encode (required)"},
        {"vocab", CLI_INT, &a.vocab, 1, MT_TOKENIZER_MAX_VOCAB, 0, 0, NULL, "N",
         "pieces of the tokenizer to train (ids are uint16 in a token file)"},
        {"model-out", CLI_STR, &a.model_out, 0, 0, 0, 0, NULL, "PREFIX",
         "train a tokenizer: write PREFIX.model and PREFIX.vocab"},
        {"model-in", CLI_STR, &a.model_in, 0, 0, 0, 0, NULL, "MODEL",
         "encode with this tokenizer instead of training one (as --tokenizer)"},
        {"out", CLI_STR, &a.out, 0, 0, 0, 0, NULL, "FILE", "llm.c token file of the text (train split)"},
        {"val-out", CLI_STR, &a.val_out, 0, 0, 0, 0, NULL, "FILE", "llm.c token file of the validation split"},
        {"val-frac", CLI_DOUBLE, &a.val_frac, 0, 1, 1, 1, NULL, "X", "tail of the tokens in --val-out"},
        {"threads", CLI_INT, &a.threads, 0, 4096, 0, 0, NULL, "N", "spm_train threads (0: all cores)"},
        {"json", CLI_FLAG, &a.json, 0, 0, 0, 0, NULL, NULL, "print only one JSON object"},
        {"doc-sep", CLI_FLAG, &a.doc_sep, 0, 0, 0, 0, NULL, NULL,
         "documents are separated by blank lines: each run of empty lines is written as the "
         "tokenizer's end-of-text id (SentencePiece's </s>; train --doc-mask on splits at it); "
         "a tokenizer other than SentencePiece's encodes each document as a text of its own"},
        {"llama2c-out", CLI_STR, &a.llama2c_out, 0, 0, 0, 0, NULL, "FILE",
         "also write the tokenizer as llama2.c's tokenizer.bin (for its run.c)"},
        {"tokenizer", CLI_STR, &tokenizer, 0, 0, 0, 0, NULL, "FILE",
         "encode with this tokenizer: SentencePiece .model, tokenizer.json, tiktoken ranks "
         "or llama2.c's tokenizer.bin"},
        {"ids-out", CLI_STR, &a.ids_out, 0, 0, 0, 0, NULL, "FILE",
         "also write the ids as text, one a line (any vocabulary size)"},
        {"bos", CLI_FLAG, &a.bos, 0, 0, 0, 0, NULL, NULL,
         "put the tokenizer's beginning-of-sequence id first, as its library does; with "
         "--doc-sep before every document"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    bool seen[sizeof opts / sizeof opts[0]] = {0};
    int rc = cli_parse("tokenize", opts, argc, argv, seen);
    if (rc < 0) {
        cli_print_help(stdout, TOKENIZE_USAGE, opts);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK) return rc;
    if ((rc = check_flags(&a, &seen[1], &seen[6], tokenizer)) != CLI_EXIT_OK ||
        (rc = check_inputs(&a)) != CLI_EXIT_OK)
        return rc;
    mt_tokenizer *tok = NULL;
    if (a.model_in && (rc = open_model(&a, a.in_flag, a.model_in, &tok)) != CLI_EXIT_OK) return rc;

    tokenize_done d = {0};
    FILE *f;
    if (mt_input_open(a.text, "text", 0, &f, &d.text_bytes) == MT_OK) fclose(f);
    if (a.model_out) {
        double t0 = mt_time_now();
        mt_status s = mt_tokenizer_train(a.text, a.vocab, a.model_out, a.threads);
        d.train_s = mt_time_now() - t0;
        if (s != MT_OK) {
            cli_error("training the tokenizer on '%s': %s", a.text, mt_errmsg());
            return CLI_EXIT_FAIL;
        }
        if ((rc = open_model(&a, "model-out", a.model_path, &tok)) != CLI_EXIT_OK) return rc;
    }
    if (a.llama2c_out) rc = write_llama2c(a.llama2c_out, tok);
    if ((a.out || a.ids_out) && rc == CLI_EXIT_OK) rc = encode_and_write(&a, tok, &d);
    if (rc == CLI_EXIT_OK) print_report(&a, tok, &d);
    mt_tokenizer_free(tok);
    return rc;
}
