/*
 * train_loop.c — the step loop of `meshtrain train`: progress, evaluation,
 * the metrics log, periodic and final saves, and the summary.
 *
 * The loop lives in the program rather than in the library so that what is
 * printed (and how often) is a property of the program, while the library's
 * trainer stays a plain "one step" API that tests and other programs drive
 * directly.
 *
 * A save that fails (a full disk) does not end the run: the work of the
 * steps is still in memory, the previous checkpoint is intact (saves write a
 * temporary file and rename it), and the next save retries. The run ends
 * with exit 1 and names the saves that failed.
 */
#include "cli/args.h"
#include "cli/files.h"
#include "cli/model_flags.h"
#include "cli/train_run.h"

#include <errno.h>
#include <math.h>
#include <string.h>

/* Ends a progress line that \r redraws, before anything else is printed. */
static void end_line(bool *line_open) {
    if (*line_open) fputc('\n', stdout);
    *line_open = false;
}

static const char *or_dash(const char *s) { return s ? s : "-"; }

int train_failed(train_run *run, mt_status st) {
    end_line(&run->line_open);
    fflush(stdout);
    cli_error("%s", mt_errmsg()[0] ? mt_errmsg() : mt_status_text(st));
    return CLI_EXIT_FAIL;
}

/* ======================================================================== */
/* The configuration                                                         */
/* ======================================================================== */

void train_print_config(train_run *run) {
    const mt_train_config *c = run->c;
    mt_trainer *tr = run->tr;
    mt_graph_stats gs = mt_graph_get_stats(mt_trainer_graph(tr));
    char params[32];
    cli_fmt_count(params, sizeof params, (double)gs.n_param_elems);

    printf("meshtrain %s train\n", MT_VERSION_STRING);
    /* the model's settings as resolved (V from the data), from its table */
    const mt_model_about *about = mt_model_about_of(c->model);
    char settings[512];   /* LLaMA's with every --rope-* setting: about 250 */
    cli_model_flags_describe(c, settings, sizeof settings);
    printf("  model        %s%s (%s parameters)\n", about->name, settings, params);
    if (c->data && mt_dataset_is_sharded(c->data))
        printf("  data         %s (llm.c shards: the *_val_*.bin ones validate)\n", c->data);
    else
        printf("  data         %s (val_frac %g)\n", c->data ? c->data : "synthetic", c->val_frac);
    printf("  batch        B=%d T=%d accum=%d (%lld %s per step)\n", c->B, c->T, c->accum,
           (long long)c->B * (about->sequences ? c->T : 1) * c->accum,
           about->sequences ? "tokens" : "examples");
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
    int devices = mt_trainer_devices(tr);
    if (devices > 1 || c->mesh)
        printf("  mesh         %s%s%s (%d devices, %s; the batch over data and fsdp, "
               "parameters over fsdp and tensor)\n", c->mesh,
               c->zero == 1 ? " zero=1" : c->zero == 2 ? " zero=2" : c->zero == 3 ? " zero=3" : "",
               c->sequence_parallel ? " sequence-parallel" : "", devices,
               mt_transport_resolve(c->transport) == MT_TRANSPORT_MPI ? "one per MPI rank"
                                                                       : "threads");
    if (c->rules && *c->rules)   /* the user's rules over the default rows */
        printf("  rules        %s (over batch=data+fsdp, vocab/heads/kv_heads/mlp=tensor)\n",
               c->rules);
    const char *layout = mt_trainer_pipeline(tr);
    if (layout) printf("  pipeline     %s\n", layout);
    printf("  threads      %d\n", c->threads > 0 ? c->threads : mt_get_num_threads());
    if (c->precision == MT_PRECISION_BF16)
        printf("  precision    bf16 products (oneDNN, f32 accumulation); f32 parameters, "
               "gradients, optimizer\n");
    if (c->grad_reduce == MT_PRECISION_BF16)
        printf("  grad-reduce  bf16 gradient reductions (half the bytes); f32 gradients\n");
    /* per device, as allocated (shards on a mesh that splits parameters) */
    mt_memory_report mem = mt_trainer_memory(tr);
    const double MiB = 1 << 20;
    printf("  memory       per device: parameters %.2f MiB, gradients %.2f MiB, optimizer %.2f "
           "MiB, activations %.2f MiB, temporary %.2f MiB\n", mem.parameters / MiB,
           mem.gradients / MiB, mem.optimizer / MiB, mem.activations / MiB, mem.temporary / MiB);
    if (c->precision == MT_PRECISION_BF16) {
        mt_graph *tg = mt_trainer_graph(tr);   /* NULL in a pipeline: its chunks' graphs */
        mt_graph_stats st = tg ? mt_graph_get_stats(tg) : (mt_graph_stats){0};
        if (mem.activations_f32 > mem.activations)
            printf("  bf16 acts    %d activations stored in bf16 (%.2f MiB): activations %.2f MiB "
                   "instead of %.2f MiB in f32, %.2f MiB saved (--f32-activations: off)\n",
                   st.n_bf16_act, st.bf16_act_bytes / MiB, mem.activations / MiB,
                   mem.activations_f32 / MiB, (mem.activations_f32 - mem.activations) / MiB);
        else
            printf("  bf16 acts    none: activations kept f32%s\n",
                   c->f32_activations ? " (--f32-activations)" : "");
    }
    if (c->remat != MT_REMAT_NONE) {
        mt_graph_stats st = mt_graph_get_stats(mt_trainer_graph(tr));
        printf("  remat        %s: %d recompute nodes, %.3g GFLOP a microbatch (+%.0f%% of "
               "the forward); activations above are with it\n", mt_remat_name(c->remat),
               st.n_recompute, st.flops_recompute * 1e-9,
               st.flops_forward > 0 ? 100 * st.flops_recompute / st.flops_forward : 0.0);
    }
    printf("  metrics      %s", or_dash(run->metrics.path));
    if (run->metrics.dropped > 0)
        printf(" (resumed: kept %d lines up to step %d, dropped %d past it)", run->metrics.kept,
               run->start, run->metrics.dropped);
    printf("\n");
    cli_flush(stdout, &run->stdout_err);
}

/* ======================================================================== */
/* Steps                                                                     */
/* ======================================================================== */

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
        char vio[96] = "";   /* a mixture of experts' router losses, balance and drops */
        if (!isnan(r->moe_maxvio))
            snprintf(vio, sizeof vio, "%s%.4f | maxvio %.2f", isnan(r->moe_aux) ? "" : " | aux ",
                     isnan(r->moe_aux) ? 0.0 : r->moe_aux, r->moe_maxvio);
        if (!isnan(r->moe_dropped))
            snprintf(vio + strlen(vio), sizeof vio - strlen(vio), " | dropped %.1f%%",
                     100 * r->moe_dropped);
        printf("%sstep %*d/%d | loss %.4f%s | %s %s | %.1f GFLOP/s | %.*f ms | ETA %s%s",
               run->tty ? "\r\033[K" : "", snprintf(NULL, 0, "%d", run->total), r->step,
               run->total, (double)r->loss, vio, tbuf, run->unit, gflops,
               ms < 10 ? 2 : ms < 100 ? 1 : 0, ms, eta, run->tty ? "" : "\n");
        run->last_print = now;
        run->line_open = run->tty;
    }
    if (!isnan(val)) {
        end_line(&run->line_open);
        printf("eval step %d: val loss %.4f (train %.4f)\n", r->step, (double)val,
               (double)r->loss);
    }
    /* a failed write to stdout does not stop the run; it is reported at the end */
    cli_flush(stdout, &run->stdout_err);
}

/* One save, periodic or final; a failure is printed and counted, not fatal. */
static bool save(train_run *run, bool final) {
    const int step = mt_trainer_step_count(run->tr);
    run->saves++;
    mt_status st = mt_trainer_save(run->tr);
    if (st == MT_OK) {
        run->last_saved = step;
        return true;
    }
    if (run->failed_saves < (int)(sizeof run->failed_steps / sizeof run->failed_steps[0]))
        run->failed_steps[run->failed_saves] = step;
    run->failed_saves++;
    end_line(&run->line_open);
    fflush(stdout);
    cli_error("saving at step %d failed: %s%s", step,
              mt_errmsg()[0] ? mt_errmsg() : mt_status_text(st),
              final ? "" : "; training goes on, and the next save retries");
    return false;
}

int train_run_steps(train_run *run) {
    const mt_train_config *c = run->c;
    /* under MPI each rank has its own signal flag: the loop and the periodic
     * saves (collective on a split mesh) follow only the stop the ranks
     * agreed on at the end of each step, so that no rank leaves the others
     * waiting in a launch or a save */
    const bool agreed_only = run->c->mesh && *run->c->mesh &&
                             mt_transport_resolve(run->c->transport) == MT_TRANSPORT_MPI;
    for (int step = run->start; step < run->total && !run->stopped && (agreed_only || !*run->stop);
         step++) {
        mt_step_report r;
        mt_status st = mt_trainer_step(run->tr, &r);
        if (st != MT_OK) return train_failed(run, st);
        if (r.stop) run->stopped = true;   /* agreed with the other ranks */
        run->done++;
        run->sum_s += r.seconds;
        run->sum_tokens += r.tokens;
        run->sum_flops += r.flops;
        if (run->done == 1) run->first_loss = r.loss;
        run->last_loss = r.loss;
        run->last = r;
        if (!isnan(r.bubble_rate) && (run->done > 1 || run->total - run->start == 1)) {
            run->bubble_sum[0] += r.bubble_rate;
            run->bubble_sum[1] += r.bubble_predicted;
            run->stage_sum[0] += r.stage_f;
            run->stage_sum[1] += r.stage_b;
            run->stage_sum[2] += r.stage_w;
            run->bubble_steps++;
        }

        float val = NAN;
        if (c->eval_every > 0 && (r.step % c->eval_every == 0 || r.step == run->total)) {
            if ((st = mt_trainer_eval(run->tr, &val)) != MT_OK) return train_failed(run, st);
            run->last_val = val;
        }
        double tps = r.seconds > 0 ? (double)r.tokens / r.seconds : NAN;
        double gflops = r.seconds > 0 ? r.flops / r.seconds / 1e9 : NAN;
        cli_metrics_log(&run->metrics, &r, val, tps, gflops);
        if (!run->quiet) show_progress(run, &r, val, tps, gflops);

        /* the last step's checkpoint is written after the loop, stopped or not */
        if (c->ckpt_out && c->ckpt_every > 0 && r.step % c->ckpt_every == 0 &&
            r.step != run->total && !r.stop && (agreed_only || !*run->stop))
            save(run, false);
    }
    end_line(&run->line_open);
    return CLI_EXIT_OK;
}

bool train_save_final(train_run *run) { return save(run, true); }

/* ======================================================================== */
/* The end                                                                   */
/* ======================================================================== */

void train_print_summary(train_run *run, bool saved) {
    const mt_train_config *c = run->c;
    if (run->done == 0) {
        printf("nothing to do: already at step %d of %d\n", run->start, run->total);
    } else {
        char tbuf[32], wall[32];
        cli_fmt_count(tbuf, sizeof tbuf,
                      run->sum_s > 0 ? (double)run->sum_tokens / run->sum_s : NAN);
        cli_fmt_duration(wall, sizeof wall, mt_time_now() - run->t0);
        printf("%s %d steps (%d..%d) in %s | loss %.4f -> %.4f",
               *run->stop || run->stopped ? "interrupted after" : "done:", run->done, run->start + 1,
               run->start + run->done, wall, (double)run->first_loss, (double)run->last_loss);
        if (!isnan(run->last_val)) printf(" | val %.4f", (double)run->last_val);
        printf(" | mean %s %s, %.1f GFLOP/s\n", tbuf, run->unit,
               run->sum_s > 0 ? run->sum_flops / run->sum_s / 1e9 : 0.0);
        if (run->bubble_steps > 0) {
            const double n = run->bubble_steps;
            printf("pipeline %s: bubble rate %.1f%% measured, %.1f%% predicted by the simulator "
                   "from the measured op costs (a stage's F %.2f ms, B %.2f ms, W %.2f ms; "
                   "mean of %d steps)\n", c->schedule, 100 * run->bubble_sum[0] / n,
                   100 * run->bubble_sum[1] / n, 1e3 * run->stage_sum[0] / n,
                   1e3 * run->stage_sum[1] / n, 1e3 * run->stage_sum[2] / n, run->bubble_steps);
        }
        const mt_comm_count *k = &run->last.comm;
        if (k->param_gather + k->grad_scatter + k->grad_reduce > 0 && run->last.psi > 0) {
            const double MB = 1e6, psi = run->last.psi;
            printf("collectives of device 0 in step %d: parameters all-gathered %.4g MB, "
                   "gradients reduce-scattered %.4g MB, all-reduced %.4g MB (%.3g psi: the ZeRO "
                   "paper's units, an all-reduce 2; psi = %.0f parameters), other %.4g MB\n",
                   run->last.step, k->param_gather_bytes / MB, k->grad_scatter_bytes / MB,
                   k->grad_reduce_bytes / MB,
                   (k->param_gather + k->grad_scatter + 2 * k->grad_reduce) / psi, psi,
                   k->other_bytes / MB);
        }
    }
    if (saved) {
        if (c->ckpt_out) printf("wrote %s", c->ckpt_out);
        if (c->llmc_out) printf("%swrote %s", c->ckpt_out ? ", " : "", c->llmc_out);
        if (c->hf_out)
            printf("%swrote %s/", c->ckpt_out || c->llmc_out ? ", " : "", c->hf_out);
        if (c->ckpt_out || c->llmc_out || c->hf_out) putchar('\n');
    }
    cli_flush(stdout, &run->stdout_err);
}

int train_report_stdout(train_run *run) {
    if (cli_flush(stdout, &run->stdout_err) && run->stdout_err == 0) return CLI_EXIT_OK;
    cli_error("cannot write to standard output: %s; the progress lines were lost, the run "
              "itself went on", strerror(run->stdout_err ? run->stdout_err : EIO));
    return CLI_EXIT_FAIL;
}

int train_report_saves(const train_run *run) {
    if (run->failed_saves == 0) return CLI_EXIT_OK;
    char steps[128] = "";
    size_t at = 0;
    int listed = run->failed_saves < (int)(sizeof run->failed_steps / sizeof run->failed_steps[0])
                     ? run->failed_saves
                     : (int)(sizeof run->failed_steps / sizeof run->failed_steps[0]);
    for (int i = 0; i < listed && at < sizeof steps; i++) {
        int w = snprintf(steps + at, sizeof steps - at, "%s%d", i ? ", " : "",
                         run->failed_steps[i]);
        if (w > 0) at += (size_t)w;
    }
    if (listed < run->failed_saves && at < sizeof steps)
        snprintf(steps + at, sizeof steps - at, ", ...");
    if (run->saves > run->failed_saves)
        cli_error("%d of %d saves failed (at step %s); the last completed save is of step %d",
                  run->failed_saves, run->saves, steps, run->last_saved);
    else
        cli_error("%d of %d saves failed (at step %s); no save completed, and the files of "
                  "earlier runs, if any, are untouched", run->failed_saves, run->saves, steps);
    return CLI_EXIT_FAIL;
}
