/*
 * train_run.h — the parts of `meshtrain train` shared by its files:
 * cmd_train.c (flags, checks, the command), train_loop.c (the step loop,
 * progress, saves, summary) and metrics.c (the JSONL log).
 */
#ifndef MT_CLI_TRAIN_RUN_H
#define MT_CLI_TRAIN_RUN_H

#include "meshtrain.h"

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

/* ---- the metrics log (metrics.c) ---------------------------------------- */

/* One JSON object per step, written with one write(2) each, so that a line
 * that cannot be written (a full disk) is lost whole: a partial one is cut
 * off again, and the log stays one valid line per step. A lost line does not
 * stop the run; the run ends with exit 1 and says how many were lost. */
typedef struct {
    const char *path;       /* NULL: no log */
    int         fd;
    off_t       good;       /* bytes of whole lines in the file */
    int         kept, dropped;   /* on a resume: lines kept, lines past the checkpoint dropped */
    int         written, lost;
    int         first_lost_step;
    int         err;        /* errno of the first lost line */
} cli_metrics;

/* Opens the log for a run whose first step is start+1. A new run (start 0)
 * empties the file; a resume keeps the lines of steps 1..start and drops the
 * rest (and a line torn by a kill), so the log reads as one run with every
 * step once. A file with a line that is not a metrics line is refused on a
 * resume rather than cut. Returns CLI_EXIT_OK, or CLI_EXIT_FAIL after
 * printing the message. path NULL: no log, every call a no-op. */
int  cli_metrics_open(cli_metrics *m, const char *path, int start);
/* Appends the line of one step (val: NaN when not evaluated). */
void cli_metrics_log(cli_metrics *m, const mt_step_report *r, float val, double tps,
                     double gflops);
/* Closes the log. Returns CLI_EXIT_OK, or CLI_EXIT_FAIL after saying how
 * many lines were lost and why, or that closing failed. */
int  cli_metrics_close(cli_metrics *m);

/* ---- the step loop (train_loop.c) --------------------------------------- */

/* One run of the loop: what it prints to, and what it has added up so far. */
typedef struct {
    mt_trainer            *tr;
    const mt_train_config *c;          /* as resolved by the trainer */
    cli_metrics            metrics;
    const volatile sig_atomic_t *stop; /* non-zero: the signal that asks to stop */
    bool                   stopped;    /* under MPI: another rank's signal, agreed on */
    bool                   quiet, tty;
    int                    start, total, every;
    const char            *unit;       /* tok/s, or ex/s for the synthetic models */
    double                 t0, sum_s, sum_flops, last_print;
    int64_t                sum_tokens;
    float                  first_loss, last_loss, last_val;
    /* a pipeline: sums over the steps after the first (its warm-up) of the
     * measured and predicted bubble rates and the stage's F, B, W times */
    double                 bubble_sum[2], stage_sum[3];
    int                    bubble_steps;
    mt_step_report         last;       /* the last step's report (its collectives) */
    int                    done;
    bool                   line_open;  /* a \r-redrawn progress line awaits its newline */
    /* saves: a failed one does not stop the run; the next one retries */
    int                    saves, failed_saves, last_saved;
    int                    failed_steps[8];   /* the first failures' steps */
    int                    stdout_err;  /* errno of stdout's first failed write, 0 if none */
} train_run;

/* Prints the configuration as resolved. */
void train_print_config(train_run *run);
/* Steps from where the trainer is to the last step, or until *run->stop;
 * writes the periodic checkpoints. CLI_EXIT_OK, or CLI_EXIT_FAIL after the
 * message of a failed step or evaluation. */
int  train_run_steps(train_run *run);
/* The save at the end (also after a stop signal). Returns whether it
 * succeeded; a failure is printed and counted. */
bool train_save_final(train_run *run);
/* The summary line, and "wrote ..." for the files the last save wrote. */
void train_print_summary(train_run *run, bool saved);
/* CLI_EXIT_OK, or CLI_EXIT_FAIL after saying that writing to stdout failed
 * (the system's message of the first failure: stdio forgets it). A failed
 * progress line does not stop the run; the checkpoint is what it is for. */
int  train_report_stdout(train_run *run);
/* CLI_EXIT_OK, or CLI_EXIT_FAIL after saying which saves failed. */
int  train_report_saves(const train_run *run);
/* Prints a failure of the library (its message) and returns CLI_EXIT_FAIL. */
int  train_failed(train_run *run, mt_status st);

#endif /* MT_CLI_TRAIN_RUN_H */
