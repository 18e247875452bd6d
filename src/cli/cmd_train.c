/*
 * cmd_train.c — `meshtrain train`: flags -> mt_train_config, then the step
 * loop with progress, evaluation, checkpoints and a JSONL metrics log.
 *
 * The loop lives here rather than in the library so that what is printed
 * (and how often) is a property of the program, while the library's trainer
 * stays a plain "one step" API that tests and other programs drive directly.
 */
#include "cli/args.h"
#include "meshtrain.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char TRAIN_USAGE[] =
    "usage: meshtrain train --data FILE [flags]\n"
    "\n"
    "Trains a model and prints a line per step (step, loss, throughput, ETA).\n"
    "FILE is a text file (byte tokens, vocabulary 256) or an llm.c token file.\n"
    "\n"
    "examples:\n"
    "  meshtrain train --data input.txt --layers 4 --channels 128 --steps 500 \\\n"
    "                  --eval-every 100 --ckpt-out model.ckpt --metrics run.jsonl\n"
    "  meshtrain train --data input.txt --ckpt-in model.ckpt --ckpt-out model.ckpt --steps 1000\n"
    "  meshtrain train --model mlp --layers 3 --channels 64 --steps 200\n";

/* Ctrl-C stops after the current step (which then still writes its
 * checkpoint); a second Ctrl-C uses the default action (SA_RESETHAND). */
static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    static const char msg[] =
        "\nmeshtrain: interrupted; stopping after this step (Ctrl-C again to abort)\n";
    (void)sig;
    interrupted = 1;
    ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);   /* async-signal-safe */
    (void)n;
}

/* ---- output helpers ----------------------------------------------------- */

/* JSON has no NaN or infinity; null keeps every line parseable. */
static void json_num(FILE *f, const char *key, double v, bool comma) {
    if (isfinite(v)) fprintf(f, "\"%s\":%.7g", key, v);
    else fprintf(f, "\"%s\":null", key);
    if (comma) fputc(',', f);
}

/* Ends a progress line that \r redraws, before anything else is printed. */
static void end_line(bool *line_open) {
    if (*line_open) fputc('\n', stdout);
    *line_open = false;
}

static const char *or_dash(const char *s) { return s ? s : "-"; }

static void print_config(const mt_train_config *c, mt_trainer *tr, const char *metrics) {
    mt_graph_stats gs = mt_graph_get_stats(mt_trainer_graph(tr));
    char params[32];
    cli_fmt_count(params, sizeof params, (double)gs.n_param_elems);

    printf("meshtrain %s train\n", MT_VERSION_STRING);
    const char *mname = mt_model_name(c->model) ? mt_model_name(c->model) : "?";
    if (c->model == MT_MODEL_GPT)
        printf("  model        gpt L=%d C=%d NH=%d maxT=%d V=%d Vp=%d (%s parameters)\n", c->gpt.L,
               c->gpt.C, c->gpt.NH, c->gpt.maxT, c->gpt.V, c->gpt.Vp, params);
    else if (c->model == MT_MODEL_MLP)
        printf("  model        mlp layers=%d hidden=%d (%s parameters)\n", c->mlp_layers,
               c->mlp_hidden, params);
    else
        printf("  model        %s (%s parameters)\n", mname, params);
    printf("  data         %s (val_frac %g)\n", c->data ? c->data : "synthetic", c->val_frac);
    printf("  batch        B=%d T=%d accum=%d (%lld %s per step)\n", c->B, c->T, c->accum,
           (long long)c->B * (c->model == MT_MODEL_GPT ? c->T : 1) * c->accum,
           c->model == MT_MODEL_GPT ? "tokens" : "examples");
    printf("  steps        %d (starting at %d)\n", c->steps, mt_trainer_step_count(tr));
    const mt_optim_config *o = &c->optim;
    if (o->kind == MT_OPT_ADAMW)
        printf("  optimizer    adamw lr=%g betas=(%g, %g) eps=%g weight_decay=%g grad_clip=%g\n",
               o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, o->grad_clip);
    else
        printf("  optimizer    sgd lr=%g momentum=%g weight_decay=%g grad_clip=%g\n", o->lr,
               o->momentum, o->weight_decay, o->grad_clip);
    if (o->total_steps > 0)
        printf("  schedule     warmup %d, cosine to %g x lr at step %d\n", o->warmup_steps,
               o->min_lr_frac, o->total_steps);
    else
        printf("  schedule     warmup %d, then constant\n", o->warmup_steps);
    printf("  seed         %llu\n", (unsigned long long)c->seed);
    if (c->eval_every > 0)
        printf("  eval         every %d steps, %d batches\n", c->eval_every, c->eval_batches);
    else
        printf("  eval         off\n");
    printf("  checkpoint   in %s, out %s", or_dash(c->ckpt_in), or_dash(c->ckpt_out));
    if (c->ckpt_every > 0) printf(" every %d steps", c->ckpt_every);
    printf("\n  llm.c        in %s, out %s\n", or_dash(c->llmc_in), or_dash(c->llmc_out));
    printf("  threads      %d\n", c->threads > 0 ? c->threads : mt_get_num_threads());
    printf("  memory       %.1f MiB of activations (planned)\n", (double)gs.arena_bytes / (1 << 20));
    printf("  metrics      %s\n", or_dash(metrics));
    fflush(stdout);
}

/* An output path in a missing or read-only directory would otherwise fail
 * only when it is first written: after the whole run, for --ckpt-out. */
static bool output_dir_ok(const char *flag, const char *path) {
    if (!path) return true;
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (access(dir, W_OK | X_OK) == 0) return true;
    cli_error("--%s '%s': cannot write in directory '%s': %s", flag, path, dir, strerror(errno));
    return false;
}

/* ---- the step loop ------------------------------------------------------ */

/* One run of the loop: what it prints to, and what it has added up so far. */
typedef struct {
    mt_trainer            *tr;
    const mt_train_config *c;          /* as resolved by the trainer */
    FILE                  *metrics;    /* NULL: no log */
    bool                   quiet, tty;
    int                    start, total, every;
    const char            *unit;       /* tok/s, or ex/s for the synthetic models */
    double                 t0, sum_s, sum_flops, last_print;
    int64_t                sum_tokens;
    float                  first_loss, last_loss, last_val;
    int                    done;
    bool                   line_open;  /* a \r-redrawn progress line awaits its newline */
} train_run;

static int run_failed(train_run *run, mt_status st) {
    end_line(&run->line_open);
    fflush(stdout);
    cli_error("%s", mt_errmsg()[0] ? mt_errmsg() : mt_status_text(st));
    return CLI_EXIT_FAIL;
}

static void log_metrics(train_run *run, const mt_step_report *r, float val, double tps,
                        double gflops) {
    FILE *f = run->metrics;
    fprintf(f, "{\"step\":%d,", r->step);
    json_num(f, "loss", r->loss, true);
    if (!isnan(val)) json_num(f, "val_loss", val, true);
    json_num(f, "lr", r->lr, true);
    json_num(f, "grad_norm", r->grad_norm, true);
    json_num(f, "tokens_per_s", tps, true);
    json_num(f, "gflops", gflops, true);
    json_num(f, "ms", r->seconds * 1e3, false);
    fputs("}\n", f);
    fflush(f);   /* readable (and plottable) while the run goes on */
}

static void show_progress(train_run *run, const mt_step_report *r, float val, double tps,
                          double gflops) {
    bool last = r->step == run->total;
    double now = mt_time_now();
    /* A terminal line is redrawn at most ~10 times a second (fast steps would
     * otherwise spend their time in the terminal); a log gets every step, or
     * every hundredth of the run when it is long. */
    bool show = run->tty ? (run->done == 1 || last || !isnan(val) || now - run->last_print >= 0.1)
                         : (run->done == 1 || last || run->done % run->every == 0);
    if (show) {
        char tbuf[32], eta[32];
        double ms = r->seconds * 1e3;
        cli_fmt_count(tbuf, sizeof tbuf, tps);
        cli_fmt_duration(eta, sizeof eta, (now - run->t0) / run->done * (run->total - r->step));
        printf("%sstep %*d/%d | loss %.4f | %s %s | %.1f GFLOP/s | %.*f ms | ETA %s%s",
               run->tty ? "\r\033[K" : "", snprintf(NULL, 0, "%d", run->total), r->step,
               run->total, (double)r->loss, tbuf, run->unit, gflops,
               ms < 10 ? 2 : ms < 100 ? 1 : 0, ms, eta, run->tty ? "" : "\n");
        run->last_print = now;
        run->line_open = run->tty;
    }
    if (!isnan(val)) {
        end_line(&run->line_open);
        printf("eval step %d: val loss %.4f (train %.4f)\n", r->step, (double)val,
               (double)r->loss);
    }
    fflush(stdout);
}

/* Steps from where the trainer is to the last step, or to Ctrl-C. */
static int run_steps(train_run *run) {
    const mt_train_config *c = run->c;
    for (int step = run->start; step < run->total && !interrupted; step++) {
        mt_step_report r;
        mt_status st = mt_trainer_step(run->tr, &r);
        if (st != MT_OK) return run_failed(run, st);
        run->done++;
        run->sum_s += r.seconds;
        run->sum_tokens += r.tokens;
        run->sum_flops += r.flops;
        if (run->done == 1) run->first_loss = r.loss;
        run->last_loss = r.loss;

        float val = NAN;
        if (c->eval_every > 0 && (r.step % c->eval_every == 0 || r.step == run->total)) {
            if ((st = mt_trainer_eval(run->tr, &val)) != MT_OK) return run_failed(run, st);
            run->last_val = val;
        }
        double tps = r.seconds > 0 ? (double)r.tokens / r.seconds : NAN;
        double gflops = r.seconds > 0 ? r.flops / r.seconds / 1e9 : NAN;
        if (run->metrics) log_metrics(run, &r, val, tps, gflops);
        if (!run->quiet) show_progress(run, &r, val, tps, gflops);

        /* the last step's checkpoint is written after the loop, Ctrl-C or not */
        if (c->ckpt_out && c->ckpt_every > 0 && r.step % c->ckpt_every == 0 &&
            r.step != run->total && (st = mt_trainer_save(run->tr)) != MT_OK)
            return run_failed(run, st);
    }
    end_line(&run->line_open);
    return CLI_EXIT_OK;
}

static void print_summary(const train_run *run) {
    const mt_train_config *c = run->c;
    if (run->done == 0) {
        printf("nothing to do: already at step %d of %d\n", run->start, run->total);
        return;
    }
    char tbuf[32], wall[32];
    cli_fmt_count(tbuf, sizeof tbuf, run->sum_s > 0 ? (double)run->sum_tokens / run->sum_s : NAN);
    cli_fmt_duration(wall, sizeof wall, mt_time_now() - run->t0);
    printf("%s %d steps (%d..%d) in %s | loss %.4f -> %.4f",
           interrupted ? "interrupted after" : "done:", run->done, run->start + 1,
           run->start + run->done, wall, (double)run->first_loss, (double)run->last_loss);
    if (!isnan(run->last_val)) printf(" | val %.4f", (double)run->last_val);
    printf(" | mean %s %s, %.1f GFLOP/s\n", tbuf, run->unit,
           run->sum_s > 0 ? run->sum_flops / run->sum_s / 1e9 : 0.0);
    if (c->ckpt_out) printf("wrote %s", c->ckpt_out);
    if (c->llmc_out) printf("%swrote %s", c->ckpt_out ? ", " : "", c->llmc_out);
    if (c->ckpt_out || c->llmc_out) putchar('\n');
}

/* ---- flags -> config ---------------------------------------------------- */

static const char TRAIN_CHOICES_OPTIM[] = "adamw|sgd";   /* index 0 is AdamW */

/* "gpt|mlp|linreg": the library's models, choice i being mt_model_kind i. */
static void model_choices(char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; mt_model_name((mt_model_kind)k) && at < n; k++) {
        int w = snprintf(buf + at, n - at, "%s%s", k ? "|" : "", mt_model_name((mt_model_kind)k));
        if (w < 0) break;
        at += (size_t)w;
    }
}

/* The checks that span several flags, and the flags whose meaning depends on
 * the model (--layers and --channels size a GPT or an MLP). */
static int apply_model_flags(mt_train_config *cfg, const cli_opt *opts, const bool *seen,
                             const int *layers, const int *channels) {
    if (cfg->model == MT_MODEL_GPT) {
        cfg->gpt.L = *layers;
        cfg->gpt.C = *channels;
        if (!cfg->data) {
            cli_error("--model gpt needs --data FILE (a text file or an llm.c token file)");
            return CLI_EXIT_USAGE;
        }
        return CLI_EXIT_OK;
    }
    static const char *gpt_only[] = {"heads", "max-seq", "vocab", "padded-vocab",
                                     "data", "llmc-in", "llmc-out"};
    for (int j = 0; opts[j].name; j++) {
        if (!seen[j]) continue;
        for (size_t i = 0; i < sizeof gpt_only / sizeof gpt_only[0]; i++)
            if (strcmp(opts[j].name, gpt_only[i]) == 0) {
                cli_error("--%s applies to --model gpt only", opts[j].name);
                return CLI_EXIT_USAGE;
            }
        bool sizing = opts[j].dest == layers || opts[j].dest == channels;
        if (sizing && cfg->model == MT_MODEL_LINREG) {
            cli_error("--%s does not apply to --model linreg", opts[j].name);
            return CLI_EXIT_USAGE;
        }
        if (opts[j].dest == layers) cfg->mlp_layers = *layers;
        if (opts[j].dest == channels) cfg->mlp_hidden = *channels;
    }
    return CLI_EXIT_OK;
}

/* ---- the command -------------------------------------------------------- */

int cli_cmd_train(int argc, char **argv) {
    mt_train_config cfg = mt_train_defaults();
    int model = (int)cfg.model;
    int optim = cfg.optim.kind == MT_OPT_SGD ? 1 : 0;
    int layers = cfg.gpt.L, channels = cfg.gpt.C;
    const char *metrics_path = NULL;
    bool quiet = false, profile = false;
    const double INF = HUGE_VAL;
    char choices_model[64];
    model_choices(choices_model, sizeof choices_model);

    /* The table is the single source for parsing and --help. */
    const cli_opt opts[] = {
        {"model", CLI_CHOICE, &model, 0, 0, 0, 0, choices_model, "NAME", "model to train"},
        {"layers", CLI_INT, &layers, 1, 1000, 0, 0, NULL, "N", "GPT blocks L (mlp: linear layers)"},
        {"channels", CLI_INT, &channels, 1, 65536, 0, 0, NULL, "N", "GPT width C (mlp: hidden width)"},
        {"heads", CLI_INT, &cfg.gpt.NH, 1, 1024, 0, 0, NULL, "N", "attention heads NH (C % NH == 0)"},
        {"max-seq", CLI_INT, &cfg.gpt.maxT, 1, 1 << 20, 0, 0, NULL, "N", "context length maxT"},
        {"vocab", CLI_INT, &cfg.gpt.V, 0, 1 << 24, 0, 0, NULL, "N", "vocabulary V (0: from the data)"},
        {"padded-vocab", CLI_INT, &cfg.gpt.Vp, 0, 1 << 24, 0, 0, NULL, "N", "padded vocabulary Vp >= V (0: V rounded up to 64)"},
        {"data", CLI_STR, &cfg.data, 0, 0, 0, 0, NULL, "FILE", "text or llm.c token file (gpt)"},
        {"val-frac", CLI_DOUBLE, &cfg.val_frac, 0, 1, 0, 1, NULL, "X", "tail of the data held out for eval"},
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
        {"llmc-in", CLI_STR, &cfg.llmc_in, 0, 0, 0, 0, NULL, "FILE", "start from an llm.c GPT-2 checkpoint"},
        {"llmc-out", CLI_STR, &cfg.llmc_out, 0, 0, 0, 0, NULL, "FILE", "also write an llm.c checkpoint at the end"},
        {"threads", CLI_INT, &cfg.threads, 0, 4096, 0, 0, NULL, "N", "kernel threads (0: all cores)"},
        {"metrics", CLI_STR, &metrics_path, 0, 0, 0, 0, NULL, "FILE", "JSONL log, one object per step"},
        {"quiet", CLI_FLAG, &quiet, 0, 0, 0, 0, NULL, NULL, "print only errors and the summary"},
        {"profile", CLI_FLAG, &profile, 0, 0, 0, 0, NULL, NULL,
         "time every op; print a table (ms, GFLOP/s, GB/s per op) at the end"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    bool seen[sizeof opts / sizeof opts[0]] = {0};

    int rc = cli_parse("train", opts, argc, argv, seen);
    if (rc < 0) {
        cli_print_help(stdout, TRAIN_USAGE, opts);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK) return rc;
    cfg.model = (mt_model_kind)model;
    cfg.optim.kind = optim == 1 ? MT_OPT_SGD : MT_OPT_ADAMW;
    if ((rc = apply_model_flags(&cfg, opts, seen, &layers, &channels)) != CLI_EXIT_OK) return rc;
    /* the cosine schedule spans the whole run, unless the defaults say constant */
    if (cfg.optim.total_steps != 0) cfg.optim.total_steps = cfg.steps;
    if (!output_dir_ok("ckpt-out", cfg.ckpt_out) || !output_dir_ok("llmc-out", cfg.llmc_out) ||
        !output_dir_ok("metrics", metrics_path))
        return CLI_EXIT_FAIL;

    /* ---- build ---- */
    train_run run = {.quiet = quiet, .tty = isatty(STDOUT_FILENO) != 0,
                     .first_loss = NAN, .last_loss = NAN, .last_val = NAN};
    mt_status st = mt_trainer_create(&cfg, &run.tr);
    if (st != MT_OK) return run_failed(&run, st);
    run.c = mt_trainer_config(run.tr);
    run.start = mt_trainer_step_count(run.tr);
    run.total = run.c->steps;
    run.every = run.total - run.start <= 200 ? 1 : (run.total - run.start) / 100;
    run.unit = run.c->model == MT_MODEL_GPT ? "tok/s" : "ex/s";
    if (metrics_path) {
        /* appending on resume keeps one log for the whole run */
        run.metrics = fopen(metrics_path, run.start > 0 ? "a" : "w");
        if (!run.metrics) {
            cli_error("cannot open metrics file '%s': %s", metrics_path, strerror(errno));
            mt_trainer_free(run.tr);
            return CLI_EXIT_FAIL;
        }
    }
    if (!quiet) print_config(run.c, run.tr, metrics_path);
    if (profile && (st = mt_graph_set_profiling(mt_trainer_graph(run.tr), true)) != MT_OK) {
        if (run.metrics) fclose(run.metrics);
        rc = run_failed(&run, st);
        mt_trainer_free(run.tr);
        return rc;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    /* ---- run, save, summarise ---- */
    run.t0 = mt_time_now();
    rc = run_steps(&run);
    /* an interrupted run still saves: that is what Ctrl-C is for here */
    if (rc == CLI_EXIT_OK && (run.c->ckpt_out || run.c->llmc_out) &&
        (st = mt_trainer_save(run.tr)) != MT_OK)
        rc = run_failed(&run, st);
    if (run.metrics && fclose(run.metrics) != 0 && rc == CLI_EXIT_OK) {
        cli_error("cannot write metrics file '%s': %s", metrics_path, strerror(errno));
        rc = CLI_EXIT_FAIL;
    }
    if (rc == CLI_EXIT_OK) {
        print_summary(&run);
        if (profile) {
            printf("\nper op, over all steps (mt_graph_set_profiling):\n");
            mt_graph_print_profile(mt_trainer_graph(run.tr), stdout);
        }
        if (interrupted) rc = CLI_EXIT_INTERRUPTED;
    }
    fflush(stdout);
    mt_trainer_free(run.tr);
    return rc;
}
