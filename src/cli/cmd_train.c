/*
 * cmd_train.c — `meshtrain train`: flags -> mt_train_config, the checks that
 * must pass before step 1, signals, then the run (train_loop.c).
 *
 * Everything a user can get wrong is refused before the first step: flags
 * that conflict, files given to the wrong flag, outputs that would destroy
 * an input or cannot be written (files.c), a model flag that contradicts
 * --llmc-in. A run that fails after an hour for a reason known at start-up
 * loses the hour.
 */
#include "cli/args.h"
#include "cli/files.h"
#include "cli/model_flags.h"
#include "cli/strategy_flags.h"
#include "cli/train_run.h"
#include "meshtrain.h"
#include "meshtrain/tokenizer.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char TRAIN_USAGE[] =
    "usage: meshtrain train --data FILE|DIR|GLOB [flags]\n"
    "\n"
    "Trains a model and prints a line per step (step, loss, throughput, ETA).\n"
    "FILE is a text file (byte tokens, vocabulary 256) or an llm.c token file (with\n"
    "--tokenizer, the vocabulary is the SentencePiece model's it was encoded with).\n"
    "DIR or a quoted GLOB names llm.c's shards (*_train_*.bin, read in name order as\n"
    "one stream, and *_val_*.bin, the validation split): streamed, never loaded.\n"
    "Ctrl-C or SIGTERM stops after the current step and still saves (exit 130 or\n"
    "143); a second one aborts at once, leaving the previous checkpoint. Outputs\n"
    "must be new names or regular files other than the inputs; --ckpt-out may be\n"
    "the --ckpt-in file, to resume in place.\n"
    "\n"
    "examples:\n"
    "  meshtrain train --data input.txt --layers 4 --channels 128 --steps 500 \\\n"
    "                  --eval-every 100 --ckpt-out model.ckpt --metrics run.jsonl\n"
    "  meshtrain train --data input.txt --ckpt-in model.ckpt --ckpt-out model.ckpt --steps 1000\n"
    "  meshtrain train --data fineweb10B --vocab 50257 --steps 1000    (llm.c's shards)\n"
    "  meshtrain train --model mlp --layers 3 --channels 64 --steps 200\n"
    "  meshtrain train --data input.txt --devices 4 --mesh data=4      (data parallel, threads)\n"
    "  mpirun -np 2 meshtrain train --data input.txt --devices 2 --mesh data=2   (one per rank)\n";

/* ======================================================================== */
/* Signals                                                                   */
/* ======================================================================== */

/* SIGINT (Ctrl-C) and SIGTERM (what batch schedulers send before they kill a
 * job) stop the run after the current step, which then still saves; the
 * exit status is 128 + the signal. A second signal aborts at once: the
 * handler removes the temporary files of the saves first (unlink is
 * async-signal-safe; the names are filled in before the handlers are
 * installed), so an abort in the middle of a save leaves the previous
 * checkpoint and no temporary file. This is the handlers' state: */
static volatile sig_atomic_t stop_signal;      /* the first signal, 0 before */
static char abort_unlink[2][PATH_MAX];         /* temporary names of the saves, "" unused */

static void on_stop(int sig) {
    /* a device waiting on a peer says what for, at once: under mpirun a
     * SIGTERM is the job ending because a rank died (mt_launch_signal) */
    mt_launch_signal(sig);
    if (stop_signal) {
        for (int i = 0; i < 2; i++)
            if (abort_unlink[i][0]) unlink(abort_unlink[i]);
        signal(sig, SIG_DFL);
        raise(sig);   /* delivered when the handler returns: die of the signal, as an abort should */
        return;
    }
    const int saved_errno = errno;   /* the step goes on, and may be reading errno */
    stop_signal = sig;
    static const char int_msg[] =
        "\nmeshtrain: interrupted; stopping after this step (Ctrl-C again to abort)\n";
    static const char term_msg[] =
        "\nmeshtrain: terminated (SIGTERM); stopping after this step and saving "
        "(a second SIGTERM aborts)\n";
    ssize_t n = sig == SIGTERM ? write(STDERR_FILENO, term_msg, sizeof term_msg - 1)
                               : write(STDERR_FILENO, int_msg, sizeof int_msg - 1);
    (void)n;
    errno = saved_errno;
}

static void install_stop_handlers(const mt_train_config *c) {
    const char *outs[2] = {c->ckpt_out, c->llmc_out};
    for (int i = 0; i < 2; i++)
        if (!outs[i] || mt_file_tmp_path(outs[i], abort_unlink[i], sizeof abort_unlink[i]) != MT_OK)
            abort_unlink[i][0] = '\0';
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ---- flags -> config ---------------------------------------------------- */

static const char TRAIN_CHOICES_OPTIM[] = "adamw|sgd";   /* index 0 is AdamW */

/* The model's own flags, from its table (model_flags.h): written into the
 * model's settings in mf (cfg->model_config) when given, refused when the
 * model does not read them. */
static int apply_model_flags(mt_train_config *cfg, cli_model_flags *mf, const cli_opt *opts,
                             const bool *seen, int first) {
    const mt_model_about *a = mt_model_about_of(cfg->model);
    if (a->dataset && !cfg->data) {
        cli_error("--model %s needs --data FILE|DIR|GLOB (a text file, an llm.c token "
                  "file, or llm.c shards)", a->name);
        return CLI_EXIT_USAGE;
    }
    return cli_model_flags_apply(mf, opts, seen, first, cfg);
}

/* Flags that would be silently ignored, or would fail only later. */
static int check_flag_conflicts(const mt_train_config *cfg, const cli_opt *opts,
                                const bool *seen, const cli_strategy_flags *sf) {
    if (cfg->ckpt_every > 0 && !cfg->ckpt_out) {
        cli_error("--ckpt-every %d has no checkpoint to write: add --ckpt-out FILE, or drop "
                  "--ckpt-every", cfg->ckpt_every);
        return CLI_EXIT_USAGE;
    }
    if (cli_given(opts, seen, "val-frac") && cfg->data && mt_dataset_is_sharded(cfg->data)) {
        cli_error("--val-frac holds out the tail of one file, but --data '%s' names shards, "
                  "whose *_val_*.bin files are the validation split: drop --val-frac",
                  cfg->data);
        return CLI_EXIT_USAGE;
    }
    if (cli_given(opts, seen, "eval-batches") && cfg->eval_every == 0) {
        cli_error("--eval-batches %d has no evaluation to size: add --eval-every N, or drop "
                  "--eval-batches", cfg->eval_batches);
        return CLI_EXIT_USAGE;
    }
    if (cli_given(opts, seen, "trace-steps") && !cfg->trace) {
        cli_error("--trace-steps %d sizes a trace, but there is none: add --trace FILE, or drop "
                  "--trace-steps", cfg->trace_steps);
        return CLI_EXIT_USAGE;
    }
    if (cli_given(opts, seen, "eot-id") && !cfg->doc_mask) {
        cli_error("--eot-id %d separates documents for --doc-mask on, which is off: add "
                  "--doc-mask on, or drop --eot-id", cfg->eot_id);
        return CLI_EXIT_USAGE;
    }
    /* --microbatches beside --accum, --collective-matmul without sp */
    return cli_strategy_flags_check(sf, opts, seen, cfg);
}

/* --llmc-in takes the model's sizes from the file: an explicit flag that says
 * otherwise is a mistake, not something to override silently. */
static int check_llmc_flags(const mt_train_config *cfg, const cli_opt *opts, const bool *seen) {
    const mt_model_about *a = mt_model_about_of(cfg->model);
    /* a model llm.c files do not hold: mt_train_config_check's to refuse */
    if (!cfg->llmc_in || !a->llmc) return CLI_EXIT_OK;
    cli_model_config file;   /* the model's settings as the file has them */
    if (a->config_size > sizeof file.bytes ||
        mt_model_config_from_llmc(cfg->model, cfg->llmc_in, file.bytes, a->config_size) != MT_OK) {
        cli_error("--llmc-in: %s", mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    for (int i = 0; i < a->n_flags; i++) {
        const mt_model_flag *f = &a->flags[i];
        if (f->type == MT_MODEL_FLAG_PRESET && cli_given(opts, seen, f->flag)) {
            cli_error("--%s sets the model, and --llmc-in '%s' holds one: drop --%s (the model "
                      "comes from the file)", f->flag, cfg->llmc_in, f->flag);
            return CLI_EXIT_USAGE;
        }
        if (f->type == MT_MODEL_FLAG_PRESET || f->type == MT_MODEL_FLAG_FLOAT)
            continue;   /* floats: the model's check, which knows what the file can hold */
        int mine = cli_model_setting(cfg->model_config, f);
        int theirs = cli_model_setting(file.bytes, f);
        /* --vocab 0 and --padded-vocab 0 mean "from elsewhere", never a conflict */
        if (!cli_given(opts, seen, f->flag) || mine == theirs || (f->zero_is_auto && mine == 0))
            continue;
        cli_error("--%s %d conflicts with --llmc-in '%s', which holds a model with %s=%d: drop "
                  "--%s (the model comes from the file) or give --%s %d", f->flag, mine,
                  cfg->llmc_in, f->field, theirs, f->flag, f->flag, theirs);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* --hf-in takes the whole model from config.json: a model flag beside it is
 * a mistake, not something to override silently. --hf-in must be a
 * directory; --hf-out a directory or a new name in one that exists. */
static int check_hf(const mt_train_config *cfg, const cli_opt *opts, const bool *seen) {
    const mt_model_about *a = mt_model_about_of(cfg->model);
    for (int i = 0; cfg->hf_in && i < a->n_flags; i++)
        if (cli_given(opts, seen, a->flags[i].flag)) {
            cli_error("--%s sets the model, and --hf-in '%s' holds one (its config.json): drop "
                      "--%s", a->flags[i].flag, cfg->hf_in, a->flags[i].flag);
            return CLI_EXIT_USAGE;
        }
    struct stat sb;
    if (cfg->hf_in && (stat(cfg->hf_in, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
        cli_error("--hf-in '%s' is not a directory: give the folder that holds config.json and "
                  "model.safetensors", cfg->hf_in);
        return CLI_EXIT_USAGE;
    }
    if (cfg->hf_out && stat(cfg->hf_out, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
        cli_error("--hf-out '%s' exists and is not a directory: give a directory (made if "
                  "missing) to write config.json and model.safetensors into", cfg->hf_out);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* --tokenizer (a SentencePiece model, from `meshtrain tokenize`): the
 * model's vocabulary is the tokenizer's, and every id of --data must be
 * below it, found before step 1. */
static int apply_tokenizer(mt_train_config *cfg, cli_model_flags *mf, const char *path,
                           const cli_opt *opts, const bool *seen) {
    if (!path) return CLI_EXIT_OK;
    const mt_model_about *a = mt_model_about_of(cfg->model);
    const mt_model_flag *vf = NULL;
    for (int i = 0; i < a->n_flags; i++)
        if (strcmp(a->flags[i].flag, "vocab") == 0 && a->flags[i].type == MT_MODEL_FLAG_INT)
            vf = &a->flags[i];
    if (!vf) {
        cli_error("--tokenizer '%s' sets a vocabulary, and --model %s has none: drop "
                  "--tokenizer", path, a->name);
        return CLI_EXIT_USAGE;
    }
    if (!cfg->data) {
        cli_error("--tokenizer '%s' is the vocabulary of a token file, and there is no --data: "
                  "add --data TOKENS.bin (from meshtrain tokenize)", path);
        return CLI_EXIT_USAGE;
    }
    mt_tokenizer *tok;
    if (mt_tokenizer_open(path, &tok) != MT_OK) {
        cli_error("--tokenizer: %s", mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    int V = mt_tokenizer_vocab(tok), rc = CLI_EXIT_OK;
    if (mt_tokenizer_check_tokens(tok, cfg->data, NULL) != MT_OK) {
        cli_error("%s", mt_errmsg());   /* it names both files */
        rc = CLI_EXIT_FAIL;
    } else if (cli_given(opts, seen, vf->flag) && cli_model_setting(cfg->model_config, vf) != V) {
        cli_error("--%s %d conflicts with --tokenizer '%s', which has %d pieces: drop --%s (the "
                  "vocabulary comes from the tokenizer)", vf->flag,
                  cli_model_setting(cfg->model_config, vf), path, V, vf->flag);
        rc = CLI_EXIT_USAGE;
    } else {
        memcpy(mf->config.bytes + vf->offset, &V, sizeof V);   /* cfg->model_config's */
    }
    mt_tokenizer_free(tok);
    return rc;
}

/* The inputs are files (a FIFO would block the loaders forever) given to the
 * right flags. */
static int check_inputs(const mt_train_config *cfg) {
    int rc;
    if ((rc = cli_check_input_kind("data", cfg->data)) != CLI_EXIT_OK ||
        (rc = cli_check_input_kind("ckpt-in", cfg->ckpt_in)) != CLI_EXIT_OK ||
        (rc = cli_check_input_kind("llmc-in", cfg->llmc_in)) != CLI_EXIT_OK)
        return rc;
    return CLI_EXIT_OK;
}

/* The outputs can be written and destroy nothing (files.h). Under mpirun
 * every rank runs this at once, and rank 0 alone writes (`writer`): the
 * others only stat the paths, so that no rank finds another's claim. */
static int check_outputs(const mt_train_config *cfg, const char *metrics_path, bool writer) {
    const cli_file files[] = {
        {.flag = "data", .path = cfg->data, .role = CLI_FILE_IN, .dataset = true},
        {.flag = "ckpt-in", .path = cfg->ckpt_in, .role = CLI_FILE_IN},
        {.flag = "llmc-in", .path = cfg->llmc_in, .role = CLI_FILE_IN},
        /* a resume in place: the save replaces the checkpoint once the new one is whole */
        {.flag = "ckpt-out", .path = cfg->ckpt_out, .role = CLI_FILE_SAVE, .may_equal = "ckpt-in",
         .stat_only = !writer},
        {.flag = "llmc-out", .path = cfg->llmc_out, .role = CLI_FILE_SAVE, .stat_only = !writer},
        {.flag = "trace", .path = cfg->trace, .role = CLI_FILE_SAVE, .stat_only = !writer},
        {.flag = "metrics", .path = metrics_path, .role = CLI_FILE_LOG, .stat_only = !writer},
    };
    return cli_check_files(files, (int)(sizeof files / sizeof files[0]));
}

/* ---- the command -------------------------------------------------------- */

int cli_cmd_train(int argc, char **argv) {
    mt_train_config cfg = mt_train_defaults();
    int model = (int)cfg.model;
    int optim = cfg.optim.kind == MT_OPT_SGD ? 1 : 0;
    const char *metrics_path = NULL, *tokenizer = NULL;
    bool quiet = false, profile = false;
    int precision = 0, grad_reduce = 0;   /* indices in "fp32|bf16" */
    int doc_mask = 0;                     /* index in "off|on" */
    const double INF = HUGE_VAL;
    char choices_model[64];
    cli_model_names(choices_model, sizeof choices_model, "|");

    /* The table is the single source for parsing and --help: the model's
     * own flags come from the models' tables, after --model */
    cli_model_flags mf;
    cli_model_flags_init(&mf, &cfg, false);
    cli_strategy_flags sf;   /* and the strategy's from their table, after --mesh */
    cli_strategy_flags_init(&sf, CLI_STRATEGY_TRAIN, &cfg);
    enum { MODEL_FLAGS_AT = 1 };
    cli_opt opts[64 + CLI_MAX_MODEL_FLAGS + CLI_MAX_STRATEGY_FLAGS] = {
        {"model", CLI_CHOICE, &model, 0, 0, 0, 0, choices_model, "NAME", "model to train"},
    };
    const cli_opt common[] = {
        {"data", CLI_STR, &cfg.data, 0, 0, 0, 0, NULL, "FILE|DIR|GLOB",
         "text or llm.c token file, or a directory or quoted glob of llm.c shards"},
        {"tokenizer", CLI_STR, &tokenizer, 0, 0, 0, 0, NULL, "MODEL",
         "the SentencePiece model --data was encoded with (meshtrain tokenize): the vocabulary"},
        {"val-frac", CLI_DOUBLE, &cfg.val_frac, 0, 1, 0, 1, NULL, "X", "tail of the data held out for eval"},
        {"doc-mask", CLI_CHOICE, &doc_mask, 0, 0, 0, 0, "off|on", "MODE",
         "packed documents (gpt, llama): on keeps attention within documents, a token after "
         "--eot-id starting a new one (positions stay the row's 0..T-1); off (default) "
         "attends across them; with a context axis under every --cp-attention (the keys' ids "
         "travel with the keys) and with a pipe axis"},
        {"eot-id", CLI_INT, &cfg.eot_id, 0, 1 << 24, 0, 0, NULL, "N",
         "with --doc-mask on: the end-of-text id between documents (default: gpt 50256, "
         "GPT-2's <|endoftext|>; llama 2, </s>, as tokenize --doc-sep writes)"},
        {"batch", CLI_INT, &cfg.B, 1, 1 << 20, 0, 0, NULL, "N", "sequences per microbatch B"},
        {"seq", CLI_INT, &cfg.T, 1, 1 << 20, 0, 0, NULL, "N", "tokens per sequence T (<= maxT)"},
        {"accum", CLI_INT, &cfg.accum, 1, 1 << 20, 0, 0, NULL, "N", "microbatches per step"},
        {"steps", CLI_INT, &cfg.steps, 1, 1e9, 0, 0, NULL, "N", "optimizer steps in total (counting resumed)"},
        {"lr", CLI_FLOAT, &cfg.optim.lr, 0, INF, 0, 0, NULL, "X", "peak learning rate"},
        {"min-lr-frac", CLI_FLOAT, &cfg.optim.min_lr_frac, 0, 1, 0, 0, NULL, "X", "final lr as a fraction of --lr"},
        {"warmup", CLI_INT, &cfg.optim.warmup_steps, 0, 1e9, 0, 0, NULL, "N", "linear warmup steps"},
        {"optim", CLI_CHOICE, &optim, 0, 0, 0, 0, TRAIN_CHOICES_OPTIM, "NAME", "optimizer"},
        {"weight-decay", CLI_FLOAT, &cfg.optim.weight_decay, 0, INF, 0, 0, NULL, "X", "decoupled weight decay"},
        {"grad-clip", CLI_FLOAT, &cfg.optim.grad_clip, 0, INF, 0, 0, NULL, "X", "global gradient-norm clip (0: off)"},
        {"seed", CLI_U64, &cfg.seed, 0, 0, 0, 0, NULL, "N", "initialisation and data seed"},
        {"eval-every", CLI_INT, &cfg.eval_every, 0, 1e9, 0, 0, NULL, "N", "steps between validation losses (0: never)"},
        {"eval-batches", CLI_INT, &cfg.eval_batches, 1, 1e6, 0, 0, NULL, "N", "microbatches per validation loss"},
        {"ckpt-in", CLI_STR, &cfg.ckpt_in, 0, 0, 0, 0, NULL, "FILE", "resume from a meshtrain checkpoint"},
        {"ckpt-out", CLI_STR, &cfg.ckpt_out, 0, 0, 0, 0, NULL, "FILE", "write a meshtrain checkpoint at the end"},
        {"ckpt-every", CLI_INT, &cfg.ckpt_every, 0, 1e9, 0, 0, NULL, "N", "also write it every N steps (0: end only)"},
        {"llmc-in", CLI_STR, &cfg.llmc_in, 0, 0, 0, 0, NULL, "FILE",
         "start from the model's llm.c-family checkpoint: llm.c's for gpt, llama2.c's model.bin "
         "for llama"},
        {"llmc-out", CLI_STR, &cfg.llmc_out, 0, 0, 0, 0, NULL, "FILE",
         "also write the model's llm.c-family checkpoint at the end (as --llmc-in's)"},
        {"hf-in", CLI_STR, &cfg.hf_in, 0, 0, 0, 0, NULL, "DIR",
         "start from a Hugging Face model directory (config.json, model.safetensors or its "
         "shards; LlamaForCausalLM, MistralForCausalLM with --model llama, GPT2LMHeadModel "
         "with --model gpt): the model is its config's"},
        {"hf-out", CLI_STR, &cfg.hf_out, 0, 0, 0, 0, NULL, "DIR",
         "also write the model as a Hugging Face directory at the end (config.json, "
         "model.safetensors in F32)"},
        {"threads", CLI_INT, &cfg.threads, 0, 4096, 0, 0, NULL, "N", "kernel threads (0: all cores)"},
        {"precision", CLI_CHOICE, &precision, 0, 0, 0, 0, "fp32|bf16", "P",
         "matrix products in fp32 (default) or bf16 (oneDNN, f32 accumulation; parameters, "
         "gradients and optimizer stay fp32; docs/precision.md)"},
        {"f32-activations", CLI_FLAG, &cfg.f32_activations, 0, 0, 0, 0, NULL, NULL,
         "with --precision bf16, keep every activation f32 (by default those only bf16 "
         "products read are stored in bf16, half their memory, the same run)"},
        {"grad-reduce", CLI_CHOICE, &grad_reduce, 0, 0, 0, 0, "fp32|bf16", "P",
         "gradient reductions (data parallel all-reduces, FSDP/ZeRO reduce-scatters) in fp32 "
         "(default) or bf16: half the bytes, gradients stay fp32"},
        {"bucket-mb", CLI_DOUBLE, &cfg.bucket_mb, 0, 1048576, 0, 0, NULL, "MB",
         "gradient reductions (all-reduces, FSDP/ZeRO reduce-scatters) in buckets of MB MiB, "
         "one message a bucket "
         "(default 25, as PyTorch DDP; 0: one a gradient)"},
        {"devices", CLI_INT, &cfg.devices, 1, CLI_MAX_THREAD_DEVICES, 0, 0, NULL, "N",
         "devices of the mesh (threads; under mpirun one per rank)"},
        {"mesh", CLI_STR, &cfg.mesh, 0, 0, 0, 0, NULL, "SPEC",
         "device mesh, e.g. data=2,fsdp=2,tensor=2 (default data=N with --devices)"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    const cli_opt outputs[] = {
        {"trace", CLI_STR, &cfg.trace, 0, 0, 0, 0, NULL, "FILE",
         "the steps' Chrome trace, written at the end (a track per device: steps, phases, "
         "every op with its FLOPs and bytes, collectives, optimizer, idle time; without "
         "--mesh: one device, as --mesh data=1); `meshtrain report FILE` reads it"},
        {"trace-steps", CLI_INT, &cfg.trace_steps, 1, 100000, 0, 0, NULL, "N",
         "the trace keeps the last N steps (default 20)"},
        {"metrics", CLI_STR, &metrics_path, 0, 0, 0, 0, NULL, "FILE", "JSONL log, one object per step"},
        {"quiet", CLI_FLAG, &quiet, 0, 0, 0, 0, NULL, NULL, "print only errors and the summary"},
        {"profile", CLI_FLAG, &profile, 0, 0, 0, 0, NULL, NULL,
         "time every op; print a table (ms, GFLOP/s, GB/s per op) at the end"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    int n_opts = MODEL_FLAGS_AT + cli_model_flags_opts(&mf, opts + MODEL_FLAGS_AT);
    for (size_t i = 0; common[i].name; i++) opts[n_opts++] = common[i];
    n_opts += cli_strategy_flags_opts(&sf, opts + n_opts);
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++) opts[n_opts++] = outputs[i];
    bool seen[sizeof opts / sizeof opts[0]] = {0};

    int rc = cli_parse("train", opts, argc, argv, seen);
    if (rc < 0) {
        cli_print_help(stdout, TRAIN_USAGE, opts);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK) return rc;
    cfg.model = (mt_model_kind)model;
    cfg.optim.kind = optim == 1 ? MT_OPT_SGD : MT_OPT_ADAMW;
    cfg.precision = precision == 1 ? MT_PRECISION_BF16 : MT_PRECISION_FP32;
    cfg.grad_reduce = grad_reduce == 1 ? MT_PRECISION_BF16 : MT_PRECISION_FP32;
    cfg.doc_mask = doc_mask == 1;
    cli_strategy_flags_apply(&sf, opts, seen, &cfg);
    if ((rc = apply_model_flags(&cfg, &mf, opts, seen, MODEL_FLAGS_AT)) != CLI_EXIT_OK) return rc;
    /* the cosine schedule spans the whole run, unless the defaults say constant */
    if (cfg.optim.total_steps != 0) cfg.optim.total_steps = cfg.steps;
    /* the flags: the same on every rank */
    if ((rc = check_flag_conflicts(&cfg, opts, seen, &sf)) != CLI_EXIT_OK) return rc;

    /* a mesh: --devices alone means data parallel over all of them */
    char mesh_buf[32];
    if (!cfg.mesh && cfg.devices > 1) {
        snprintf(mesh_buf, sizeof mesh_buf, "data=%d", cfg.devices);
        cfg.mesh = mesh_buf;
    }
    /* under mpirun every rank runs this command; rank 0 alone prints and logs */
    int rank = 0, world = 1;
    mt_launcher_world(&rank, &world);
    bool on_mpi = cfg.mesh && mt_transport_resolve(cfg.transport) == MT_TRANSPORT_MPI;
    bool writer = !(on_mpi && rank != 0);
    /* the files, which each rank sees from its own host (and only the writer
       claims): every rank agrees on the outcome before any starts */
    if ((rc = check_inputs(&cfg)) == CLI_EXIT_OK &&
        (rc = apply_tokenizer(&cfg, &mf, tokenizer, opts, seen)) == CLI_EXIT_OK &&
        (rc = check_llmc_flags(&cfg, opts, seen)) == CLI_EXIT_OK &&
        (rc = check_hf(&cfg, opts, seen)) == CLI_EXIT_OK)
        rc = check_outputs(&cfg, metrics_path, writer);
    if ((rc = cli_agree_train(rc, &cfg, tokenizer)) != CLI_EXIT_OK) return rc;   /* and the settings */
    if (!writer) {
        quiet = true;
        metrics_path = NULL;
        if (!freopen("/dev/null", "w", stdout)) quiet = true;   /* not even the summary */
    }

    cfg.stop_flag = &stop_signal;

    /* ---- build ---- */
    train_run run = {.quiet = quiet, .tty = isatty(STDOUT_FILENO) != 0, .stop = &stop_signal,
                     .first_loss = NAN, .last_loss = NAN, .last_val = NAN};
    run.metrics.fd = -1;
    mt_status st = mt_trainer_create(&cfg, &run.tr);
    if (st != MT_OK) {
        /* nothing has run: a configuration the library refuses is a usage
         * error (2), a file it cannot read a failure (1) */
        train_failed(&run, st);
        return cli_exit_of(st);
    }
    run.c = mt_trainer_config(run.tr);
    run.start = mt_trainer_step_count(run.tr);
    run.total = run.c->steps;
    run.every = run.total - run.start <= 200 ? 1 : (run.total - run.start) / 100;
    run.unit = mt_model_about_of(run.c->model)->sequences ? "tok/s" : "ex/s";
    if ((rc = cli_metrics_open(&run.metrics, metrics_path, run.start)) != CLI_EXIT_OK) {
        mt_trainer_free(run.tr);
        return rc;
    }
    if (!quiet) train_print_config(&run);
    if (!quiet && cfg.precision == MT_PRECISION_BF16 && mt_bf16_fallback())
        printf("note: this CPU has no bf16 matrix instruction for oneDNN (kernel level %s); the "
               "bf16 products run as f32 sgemm on bf16-rounded operands: bf16's numbers at f32 "
               "speed\n", mt_cpu_isa_name(mt_get_cpu_isa()));
    else if (!quiet && cfg.precision == MT_PRECISION_BF16 && !mt_bf16_native())
        printf("note: this CPU has no AVX512-BF16; oneDNN emulates the bf16 products, "
               "slower than fp32 here\n");
    if (profile && (st = mt_graph_set_profiling(mt_trainer_graph(run.tr), true)) != MT_OK) {
        cli_metrics_close(&run.metrics);
        rc = train_failed(&run, st);
        mt_trainer_free(run.tr);
        return rc;
    }
    install_stop_handlers(run.c);

    /* ---- run, save, summarise ---- */
    run.t0 = mt_time_now();
    rc = train_run_steps(&run);
    /* a trace that cannot be written is reported, and fails the run, but the
     * checkpoints are still saved: each output is its own file */
    bool trace_failed = false;
    if (rc == CLI_EXIT_OK && (st = mt_trainer_write_trace(run.tr)) != MT_OK) {
        train_failed(&run, st);
        trace_failed = true;
    }
    /* a stopped run still saves: that is what the stop signal is for here */
    bool saved = false;
    if (rc == CLI_EXIT_OK && (run.c->ckpt_out || run.c->llmc_out || run.c->hf_out))
        saved = train_save_final(&run);
    if (rc == CLI_EXIT_OK) {
        train_print_summary(&run, saved);
        if (profile) {
            printf("\nper op, over all steps (mt_graph_set_profiling):\n");
            mt_graph_print_profile(mt_trainer_graph(run.tr), stdout);
        }
    }
    /* lost metrics lines, failed saves and lost output are failures, but only
     * after the work they could not record is done; each is reported, and
     * any of them makes the exit 1, also after a stop signal */
    if (cli_metrics_close(&run.metrics) != CLI_EXIT_OK) rc = CLI_EXIT_FAIL;
    if (train_report_saves(&run) != CLI_EXIT_OK) rc = CLI_EXIT_FAIL;
    if (train_report_stdout(&run) != CLI_EXIT_OK) rc = CLI_EXIT_FAIL;
    if (trace_failed) rc = CLI_EXIT_FAIL;
    if (rc == CLI_EXIT_OK && stop_signal) rc = 128 + stop_signal;   /* 130, 143 */
    mt_trainer_free(run.tr);
    return rc;
}
