/*
 * bench_report.c — how writing a trace and reporting on it grow with the
 * steps traced (issue 21: both were quadratic).
 *
 *   bench_report [MAX_STEPS (default 8000)] [layers (default 2)] [channels (default 64)]
 *
 * Two trainers of `meshtrain train`'s default GPT (L=2, C=64, B=8, T=64) on
 * data=2 (threads), one tracing every
 * step (trace_steps = MAX_STEPS) and one not, step in turn, so that the
 * shared machine's noise falls on both alike (as bench_trace). At 1000,
 * 2000, 4000 and 8000 steps the tracing one writes its trace so far
 * (mt_trainer_write_trace, timed), and the trace is read and analysed
 * (mt_report_read + mt_report_analyse, timed) as `meshtrain report` does.
 * Columns:
 *   write ms   writing the trace of all the steps so far;
 *   record     recording's cost: the median traced step over the median
 *              untraced one, less 1 (noisy on a shared machine: bench_trace
 *              measures a span's cost apart);
 *   write %    the write spread over the untraced steps;
 *   overhead   their sum, tracing's cost over the untraced run (target < 3 %);
 *   report ms  reading and analysing that trace (target: 4000 steps < 3 s);
 *   growth     the exponent k of time ∝ steps^k from the row before, for the
 *              write and the report: 1 when linear, 2 when quadratic.
 * The last line gives both exponents from 1000 to 8000 steps (target ≈ 1).
 */
#include "bench_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what) {
    fprintf(stderr, "bench_report: %s: %s\n", what, mt_errmsg());
    return 1;
}

/* Reads and analyses the trace at path: seconds, or a negative on failure. */
static double report_seconds(const char *path, int *n_steps) {
    double t0 = mt_time_now();
    mt_report *r = NULL;
    if (mt_report_read(path, &r) != MT_OK) return -1;
    mt_status s = mt_report_analyse(r, NULL);
    double t = mt_time_now() - t0;
    mt_report_steps(r, n_steps);
    mt_report_free(r);
    return s == MT_OK ? t : -1;
}

static long file_bytes(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

int main(int argc, char **argv) {
    const int max_steps = argc > 1 ? atoi(argv[1]) : 8000;
    const int L = argc > 2 ? atoi(argv[2]) : 2, C = argc > 3 ? atoi(argv[3]) : 64;
    if (argc > 4 || max_steps < 1000 || L < 1 || C < 4 || C % 4) {
        fprintf(stderr, "usage: bench_report [MAX_STEPS >= 1000] [layers] [channels, a multiple "
                        "of 4]\n");
        return 2;
    }
    char data[] = "/tmp/meshtrain-bench-report-data-XXXXXX";
    char trace[] = "/tmp/meshtrain-bench-report-XXXXXX";
    int tfd = mkstemp(trace);
    if (tfd < 0 || bench_write_tokens(data, 256) != 0) return fail("temporary files");
    close(tfd);
    mt_trainer *tr[2] = {NULL, NULL};
    if (bench_trace_pair(data, trace, L, C, max_steps, max_steps + 2, tr) != 0)
        return fail("mt_trainer_create");
    double *t[2] = {calloc((size_t)max_steps, sizeof(double)),
                    calloc((size_t)max_steps, sizeof(double))};
    double *tmp = calloc((size_t)max_steps, sizeof(double));
    if (!t[0] || !t[1] || !tmp) return fail("memory");
    printf("GPT L=%d C=%d B=8 T=64 on data=2 (threads); a trace of every step, written at each "
           "row\n", L, C);
    printf("%6s %7s %9s %9s %8s %9s %8s %9s %7s %7s %7s\n", "steps", "MB", "step off", "step on",
           "record", "write ms", "write", "overhead", "growth", "report", "growth");
    printf("%6s %7s %9s %9s %8s %9s %8s %9s %7s %7s %7s\n", "", "", "ms", "ms", "", "", "", "",
           "write", "ms", "report");
    double first_w = NAN, first_r = NAN, prev_w = NAN, prev_r = NAN, at_4000 = NAN;
    int first_n = 0, prev_n = 0, done = 0;
    for (int i = -2; i < max_steps; i++) {
        for (int j = 0; j < 2; j++) {   /* in turn, each first every other step */
            const int k = (i & 1) ^ j;
            mt_step_report rep;
            if (mt_trainer_step(tr[k], &rep) != MT_OK) return fail("step");
            if (i >= 0) t[k][i] = rep.seconds;
        }
        const int n = i + 1;
        /* the rows: 1000, 2000, 4000, 8000 (up to MAX_STEPS) and MAX_STEPS */
        if (n != 1000 && n != 2000 && n != 4000 && n != 8000 && n != max_steps) continue;
        double w0 = mt_time_now();
        if (mt_trainer_write_trace(tr[1]) != MT_OK) return fail("mt_trainer_write_trace");
        const double w = mt_time_now() - w0;
        int steps_read = 0;
        const double rs = report_seconds(trace, &steps_read);
        if (rs < 0) return fail("mt_report_read/analyse");
        memcpy(tmp, t[0], (size_t)n * sizeof *tmp);
        const double off = bench_median(tmp, n);
        memcpy(tmp, t[1], (size_t)n * sizeof *tmp);
        const double on = bench_median(tmp, n);
        const double record = on / off - 1, write = w / (n * off);
        char gw[16] = "-", gr[16] = "-";
        if (prev_n > 0) {
            snprintf(gw, sizeof gw, "%.2f", log(w / prev_w) / log((double)n / prev_n));
            snprintf(gr, sizeof gr, "%.2f", log(rs / prev_r) / log((double)n / prev_n));
        }
        printf("%6d %7.1f %9.3f %9.3f %+7.2f%% %9.1f %7.2f%% %+8.2f%% %7s %7.0f %7s%s\n", n,
               file_bytes(trace) / 1e6, off * 1e3, on * 1e3, 100 * record, w * 1e3,
               100 * write, 100 * (record + write), gw, rs * 1e3, gr,
               steps_read == n + 2 ? "" : "  (steps read differ)");
        fflush(stdout);
        if (first_n == 0) first_n = n, first_w = w, first_r = rs;
        if (n == 4000) at_4000 = rs;
        prev_n = n, prev_w = w, prev_r = rs;
        done++;
    }
    if (done >= 2)
        printf("\nexponent from %d to %d steps: write %.2f, report %.2f (target about 1: "
               "linear)\n", first_n, prev_n, log(prev_w / first_w) / log((double)prev_n / first_n),
               log(prev_r / first_r) / log((double)prev_n / first_n));
    if (!isnan(at_4000))
        printf("report of 4000 steps: %.2f s (target < 3 s)   %s\n", at_4000,
               at_4000 < 3 ? "met" : "MISSED");
    mt_trainer_free(tr[0]);
    mt_trainer_free(tr[1]);
    free(t[0]), free(t[1]), free(tmp);
    unlink(data);
    unlink(trace);
    return 0;
}
