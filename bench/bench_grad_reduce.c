/*
 * bench_grad_reduce.c — a data-parallel gradient reduction as training runs
 * it, on the threads transport: 2 devices, each writes a fresh gradient
 * (the W product's output), the reduction's result must land in the
 * parameter's gradient, and the optimizer then reads it; between rounds
 * other memory passes through the cache, as a step's work does.
 *
 *   bench_grad_reduce [MIB]      (default 64: the v50k GPT's gradient)
 *
 * Two ways, alternated round by round, medians of the rounds:
 *   in place + copy   mt_all_reduce_start on the gradient buffer, then a
 *                     copy into the parameter's gradient (how the executor
 *                     completed a reduction before mt_all_reduce_into_start)
 *   into              mt_all_reduce_into_start from the gradient buffer into
 *                     the parameter's gradient (how it does now)
 * Floor: each of the 2 devices' gradients read once and the result written
 * to both destinations, 4 x the size of memory traffic, at the machine's
 * bandwidth (meshtrain bench machine's triad on all cores). One "RESULT" line.
 */
#include "meshtrain.h"
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROUNDS = 9, EVICT_FLOATS = 64 << 20 };

typedef struct {
    size_t n;                       /* floats in a gradient */
    float *grad[2], *param_grad[2], *other[2];   /* per device: (n), (n), (EVICT_FLOATS) */
    double t_copy[ROUNDS], t_into[ROUNDS];       /* device 0's times */
} bench_arg;

/* The W product's output: fresh values in every line of the gradient. */
static void produce(float *g, size_t n, int round) {
    for (size_t i = 0; i < n; i++) g[i] = (float)(i & 1023) * 0.5f + (float)round;
}

/* A step's other work: 256 MB of lines through the cache. */
static void pass_other(float *o) {
    for (size_t i = 0; i < EVICT_FLOATS; i += 16) o[i] += 1.0f;
}

/* The optimizer's read of the reduced gradient (one float a line). */
static float read_lines(const float *g, size_t n) {
    float s = 0;
    for (size_t i = 0; i < n; i += 16) s += g[i];
    return s;
}

static mt_status bench_device(mt_ctx *ctx, void *p) {
    bench_arg *a = p;
    const int d = mt_ctx_device(ctx);
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    float *g = a->grad[d], *pg = a->param_grad[d];
    volatile float sink = 0;
    for (int r = -1; r < ROUNDS && s == MT_OK; r++) {
        mt_request q;
        /* in place, then copied into the parameter's gradient */
        produce(g, a->n, r);
        pass_other(a->other[d]);
        if ((s = mt_barrier(ctx, ax)) != MT_OK) break;
        double t0 = mt_time_now();
        if ((s = mt_all_reduce_start(ctx, ax, g, a->n, MT_F32, MT_REDUCE_SUM, &q)) != MT_OK ||
            (s = mt_wait(ctx, &q)) != MT_OK)
            break;
        memcpy(pg, g, a->n * sizeof *g);
        double t1 = mt_time_now();
        sink += read_lines(pg, a->n);
        /* straight into the parameter's gradient */
        produce(g, a->n, r);
        pass_other(a->other[d]);
        if ((s = mt_barrier(ctx, ax)) != MT_OK) break;
        double t2 = mt_time_now();
        if ((s = mt_all_reduce_into_start(ctx, ax, g, pg, a->n, MT_F32, MT_REDUCE_SUM, &q)) !=
                MT_OK ||
            (s = mt_wait(ctx, &q)) != MT_OK)
            break;
        double t3 = mt_time_now();
        sink += read_lines(pg, a->n);
        /* both devices wrote 2·(value) + 2·round into every element */
        if (pg[a->n - 1] != 2.0f * ((float)((a->n - 1) & 1023) * 0.5f + (float)r))
            s = mt_fail(MT_EINTERNAL, "bench_grad_reduce: wrong sum on device %d", d);
        if (d == 0 && r >= 0) {
            a->t_copy[r] = t1 - t0;
            a->t_into[r] = t3 - t2;
        }
    }
    (void)sink;
    return s;
}

int main(int argc, char **argv) {
    const long mib = argc > 1 ? atol(argv[1]) : 64;
    if (mib <= 0 || mib > 4096) {
        fprintf(stderr, "usage: bench_grad_reduce [MIB]   (1 .. 4096; default 64)\n");
        return 2;
    }
    bench_arg a = {.n = (size_t)mib << 18};
    for (int d = 0; d < 2; d++) {
        a.grad[d] = aligned_alloc(64, a.n * sizeof(float));
        a.param_grad[d] = aligned_alloc(64, a.n * sizeof(float));
        a.other[d] = calloc(EVICT_FLOATS, sizeof(float));
        if (!a.grad[d] || !a.param_grad[d] || !a.other[d]) {
            fprintf(stderr, "bench_grad_reduce: out of memory\n");
            return 1;
        }
        memset(a.param_grad[d], 0, a.n * sizeof(float));
    }
    mt_launch_opts o;
    memset(&o, 0, sizeof o);
    o.mesh = "d=2";
    o.devices = 2;
    o.transport = MT_TRANSPORT_THREADS;
    if (mt_launch(&o, bench_device, &a) != MT_OK) {
        fprintf(stderr, "bench_grad_reduce: %s\n", mt_errmsg());
        return 1;
    }
    const double copy = bench_median(a.t_copy, ROUNDS), into = bench_median(a.t_into, ROUNDS);
    printf("gradient reduction, %ld MiB on 2 devices (threads), medians of %d rounds:\n", mib,
           ROUNDS);
    printf("  in place + copy into the gradient  %8.2f ms\n", 1e3 * copy);
    printf("  into the gradient                  %8.2f ms  (%.2fx)\n", 1e3 * into, copy / into);
    printf("  memory traffic at least 4 x %ld MiB = %.0f MB\n", mib, 4.0 * (double)(mib << 20) / 1e6);
    printf("RESULT impl=meshtrain row=grad_reduce mib=%ld copy_ms=%.3f into_ms=%.3f\n", mib,
           1e3 * copy, 1e3 * into);
    for (int d = 0; d < 2; d++) free(a.grad[d]), free(a.param_grad[d]), free(a.other[d]);
    return 0;
}
