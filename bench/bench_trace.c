/*
 * bench_trace.c — what tracing costs a training step: two trainers of the
 * same GPT on the same mesh (data=2, threads), one tracing (every op, step,
 * collective; mt_train_config.trace) and one not, stepping in turn, so that
 * the shared machine's noise falls on both alike (each goes first every
 * other step). Prints the median step
 * time of each, their ratio, and the time to write the trace at the end.
 * Then, without the noise: the cost of recording one op span (a
 * one-device launch recording spans in steady state) times the spans of a
 * step, against the untraced step. Target: under 3% (issue 11).
 *
 *   build/bench_trace [steps (default 60)] [layers (default 2)] [channels (default 64)]
 */
#include "bench_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The recording cost of one op span, in steady state: a one-device launch
 * recording 1000-span steps into a trace run keeping 1 step. */
enum { SPAN_STEPS = 200, SPANS_PER_STEP = 1000 };
static mt_status record_spans(mt_ctx *ctx, void *arg) {
    double *ns = arg;
    double t0 = mt_time_now();
    for (int st = 0; st < SPAN_STEPS; st++) {
        mt_trace_step_begin(ctx, st + 1);
        for (int i = 0; i < SPANS_PER_STEP; i++) {
            int span = mt_trace_op_begin(ctx);
            mt_trace_op_end(ctx, span, "matmul", 'F', 3, 1e6, 4e5, "h.3.mlp.fc.out");
        }
        mt_trace_step_end(ctx);
    }
    *ns = (mt_time_now() - t0) / (SPAN_STEPS * SPANS_PER_STEP) * 1e9;
    return MT_OK;
}

static double span_cost_ns(void) {
    mt_trace_run *run = NULL;
    double ns = NAN;
    if (mt_trace_run_create(1, 1, &run) != MT_OK) return NAN;
    mt_launch_opts o = {.mesh = "data=1", .devices = 1, .transport = MT_TRANSPORT_THREADS,
                        .kernel_threads = 1, .trace_run = run};
    if (mt_launch(&o, record_spans, &ns) != MT_OK) ns = NAN;
    mt_trace_run_free(run);
    return ns;
}

int main(int argc, char **argv) {
    const int steps = argc > 1 ? atoi(argv[1]) : 60;
    const int L = argc > 2 ? atoi(argv[2]) : 2, C = argc > 3 ? atoi(argv[3]) : 64;
    char data[] = "/tmp/meshtrain-bench-trace-data-XXXXXX";
    char trace[] = "/tmp/meshtrain-bench-trace-XXXXXX";
    int tfd = mkstemp(trace);
    if (steps < 1 || L < 1 || C < 4 || tfd < 0 || bench_write_tokens(data, 256) != 0) {
        fprintf(stderr, "bench_trace: bad arguments or no temporary files\n");
        return 1;
    }
    close(tfd);
    mt_trainer *tr[2] = {NULL, NULL};
    if (bench_trace_pair(data, trace, L, C, steps, 0, tr) != 0) {
        fprintf(stderr, "bench_trace: %s\n", mt_errmsg());
        return 1;
    }
    double *t[2] = {calloc((size_t)steps, sizeof(double)), calloc((size_t)steps, sizeof(double))};
    for (int i = -2; i < steps; i++)
        for (int j = 0; j < 2; j++) {   /* in turn, each first every other step */
            const int k = (i & 1) ^ j;
            mt_step_report r;
            if (mt_trainer_step(tr[k], &r) != MT_OK) {
                fprintf(stderr, "bench_trace: step: %s\n", mt_errmsg());
                return 1;
            }
            if (i >= 0) t[k][i] = r.seconds;
        }
    double w0 = mt_time_now();
    mt_status s = mt_trainer_write_trace(tr[1]);
    double write_s = mt_time_now() - w0;
    const double off = bench_median(t[0], steps), on = bench_median(t[1], steps);
    printf("GPT L=%d C=%d B=8 T=64 on data=2 (threads), %d steps each, in turn\n", L, C, steps);
    printf("%-10s %12s\n", "tracing", "step (ms)");
    printf("%-10s %12.3f\n", "off", off * 1e3);
    printf("%-10s %12.3f\n", "on", on * 1e3);
    printf("overhead   %+11.2f%%  (median on / median off - 1; target < 3%%)\n",
           (on / off - 1) * 100);
    printf("writing the trace of the last 20 steps at the end: %.1f ms%s\n", write_s * 1e3,
           s == MT_OK ? "" : " (failed)");
    /* the same bound without the machine's noise: spans a step x their cost */
    const double ns = span_cost_ns();
    const int nodes = mt_graph_n_nodes(mt_trainer_graph(tr[1]));
    printf("one op span: %.0f ns recorded; %d a step: %.3f ms, %.3f%% of the untraced step\n",
           ns, nodes, ns * nodes * 1e-6, ns * nodes * 1e-9 / off * 100);
    mt_trainer_free(tr[0]);
    mt_trainer_free(tr[1]);
    free(t[0]);
    free(t[1]);
    unlink(data);
    unlink(trace);
    return s == MT_OK ? 0 : 1;
}
