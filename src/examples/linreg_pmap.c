/*
 * linreg_pmap.c — the pmap linear-regression example of the JAX docs
 * ("Parallel evaluation in JAX"), as mt_example_linreg.
 *
 * Learns y = x·[2, -3.4, 1.7] + 4.2 (+ 0.01·noise), the models layer's
 * mt_linreg_data, with SGD on the mean squared error. As in the JAX example
 * the parameters (w[3], b) are replicated, every device takes its contiguous
 * slice of the global batch, computes its loss and gradients locally
 * (device-local code, as inside shard_map / pmap: plain C here), and pmean
 * over the "data" axis makes the update the same on every device.
 *
 * Why this equals the one-device run: the global batch of step s is examples
 * [s·batch, (s+1)·batch) of the training split, each a pure function of
 * (seed, example index) — the same examples `meshtrain train --model linreg`
 * draws — so every mesh sees the same global batch. With P devices of
 * n = batch/P examples each,
 *     mean over the global batch = (1/(P·n)) Σ_all = (1/P) Σ_r (1/n) Σ_{slice r},
 * i.e. the pmean of the local means is exactly the global mean, for the loss
 * and for its gradient, because the slices are equal (which is why the batch
 * must divide by the devices).
 *
 * Only rounding can differ, and here it matters: a pmean in float32 rounds
 * the local means and their sum differently on every mesh, the float32
 * parameters then differ in the last bit, and near the noise floor (loss
 * ~1e-4) one ulp of b (4.8e-7) moves the loss by ~1e-5 relative (measured
 * 2026-11-29, 2-core AMD Zen 5 dev VM: up to 2.3e-5 over 30 seeds and 60
 * steps). So the local means are taken in float64 and pmean'd in float64
 * (pmean_f64: an all_gather of the means, summed in rank order — mt_pmean is
 * float32 only); both are exact to ~1e-16, every mesh rounds them to the
 * same float32 gradient and loss, and the runs agree to the bit except for a
 * rounding tie one in ~1e9.
 */
#include "meshtrain/examples.h"
#include "meshtrain/models.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define FEATURES MT_LINREG_DATA_FEATURES

typedef struct {
    int         steps, batch;
    float       lr;
    uint64_t    seed;
    float      *losses;      /* (steps) */
    float      *params;      /* (4) w0 w1 w2 b */
    atomic_int  reporter;    /* 0 until one device of this process claims the outputs */
} linreg_job;

/* pmean in float64: out[n] = the mean over the group of every device's
 * v[n], summed in group-rank order. `gathered` holds (P, n). */
static mt_status pmean_f64(mt_ctx *ctx, mt_axes axes, const double *v, int n, int P,
                           double *gathered, double *out) {
    /* doubles travel as pairs of int32 words: the gather moves bytes only */
    mt_status s = mt_all_gather(ctx, axes, v, gathered, (size_t)n * 2, MT_I32);
    if (s != MT_OK) return s;
    for (int i = 0; i < n; i++) {
        double sum = 0;
        for (int r = 0; r < P; r++) sum += gathered[(size_t)r * (size_t)n + (size_t)i];
        out[i] = sum / P;
    }
    return MT_OK;
}

static mt_status linreg_device(mt_ctx *ctx, void *arg) {
    linreg_job *job = arg;
    mt_axes data;
    mt_status s = mt_ctx_axes(ctx, "data", &data);
    if (s != MT_OK) return s;
    const int P = mt_axis_size(ctx, data), r = mt_axis_index(ctx, data);
    /* checked before the launch for threads; under MPI the size is known only here */
    if (job->batch % P != 0)
        return mt_fail(MT_EINVAL, "the global batch %d does not divide over %d devices; use a "
                       "batch that is a multiple of %d", job->batch, P, P);
    const int n = job->batch / P;
    /* one device per process writes the outputs: all hold the same values */
    int expected = 0;
    const bool report = atomic_compare_exchange_strong(&job->reporter, &expected, 1);

    enum { NV = FEATURES + 2 };      /* loss, dL/dw0..2, dL/db */
    double *gathered = malloc((size_t)P * NV * sizeof *gathered);
    if (!gathered)
        return mt_fail(MT_ENOMEM, "linreg example: cannot allocate %d x %d doubles", P, NV);
    float w[FEATURES] = {0}, b = 0;   /* replicated parameters, initialised to zero */
    float x[FEATURES];
    for (int step = 0; step < job->steps; step++) {
        mt_trace_begin(ctx, "step");
        /* this device's slice of the global batch: examples first .. first+n-1 */
        const uint64_t first = (uint64_t)step * (uint64_t)job->batch + (uint64_t)r * (uint64_t)n;
        double loss = 0, g[FEATURES + 1] = {0};
        for (int e = 0; e < n; e++) {
            float y = mt_linreg_data(job->seed, 0, first + (uint64_t)e, x);
            double pred = b;
            for (int i = 0; i < FEATURES; i++) pred += (double)w[i] * x[i];
            double res = pred - y;
            loss += res * res;
            for (int i = 0; i < FEATURES; i++) g[i] += 2 * res * x[i];
            g[FEATURES] += 2 * res;
        }
        /* [loss, dL/dw0..2, dL/db], each the mean over the local slice */
        double local[NV], mean[NV];
        local[0] = loss / n;
        for (int i = 0; i <= FEATURES; i++) local[1 + i] = g[i] / n;
        mt_trace_end(ctx);
        if ((s = pmean_f64(ctx, data, local, NV, P, gathered, mean)) != MT_OK) break;
        float buf[NV];
        for (int i = 0; i < NV; i++) buf[i] = (float)mean[i];
        /* Every value of the step is checked, not only the loss: a large
         * learning rate overflows the update (1e38 x a gradient of 10 is inf
         * in float) while the loss that preceded it was finite, and the run
         * would end "successfully" with inf parameters. All devices hold the
         * same values, so all stop at the same step. */
        static const char *const what[NV] = {"loss", "dL/dw0", "dL/dw1", "dL/dw2", "dL/db"};
        int bad = -1;
        for (int i = 0; i < NV && bad < 0; i++)
            if (!isfinite(buf[i])) bad = i;
        if (bad >= 0) {
            s = mt_fail(MT_ENAN, "%s is %g at step %d; lower the learning rate (now %g)",
                        what[bad], (double)buf[bad], step + 1, (double)job->lr);
            break;
        }
        for (int i = 0; i < FEATURES; i++) w[i] -= job->lr * buf[1 + i];
        b -= job->lr * buf[1 + FEATURES];
        static const char *const pname[FEATURES + 1] = {"w0", "w1", "w2", "b"};
        for (int i = 0; i <= FEATURES && bad < 0; i++)
            if (!isfinite(i < FEATURES ? w[i] : b)) bad = i;
        if (bad >= 0) {
            s = mt_fail(MT_ENAN, "the update of step %d made parameter %s %g; lower the "
                        "learning rate (now %g)", step + 1, pname[bad],
                        (double)(bad < FEATURES ? w[bad] : b), (double)job->lr);
            break;
        }
        if (report) job->losses[step] = buf[0];
    }
    free(gathered);
    if (s != MT_OK) return s;
    if (report) {
        for (int i = 0; i < FEATURES; i++) job->params[i] = w[i];
        job->params[FEATURES] = b;
    }
    return MT_OK;
}

mt_status mt_example_linreg(const mt_linreg_example_opts *opts, float *losses, float params[4]) {
    if (!opts || !losses || !params)
        return mt_fail(MT_EINVAL, "mt_example_linreg needs opts, losses[steps] and params[4] "
                       "(got %s NULL)", !opts ? "opts" : !losses ? "losses" : "params");
    linreg_job job;
    memset(&job, 0, sizeof job);
    job.steps = opts->steps ? opts->steps : 20;
    job.batch = opts->batch ? opts->batch : 128;
    job.lr = opts->lr != 0 ? opts->lr : 0.1f;
    job.seed = opts->seed;
    job.losses = losses;
    job.params = params;
    atomic_init(&job.reporter, 0);
    if (job.steps < 0)
        return mt_fail(MT_EINVAL, "linreg example: steps %d must be positive", job.steps);
    if (job.batch < 0)
        return mt_fail(MT_EINVAL, "linreg example: batch %d must be positive", job.batch);
    if (!isfinite(job.lr))
        return mt_fail(MT_EINVAL, "linreg example: learning rate %g must be finite",
                       (double)job.lr);
    if (opts->devices < 0)
        return mt_fail(MT_EINVAL, "linreg example: devices %d must be positive (or 0: the MPI "
                       "world size)", opts->devices);
    if (opts->devices > 0 && job.batch % opts->devices != 0)
        return mt_fail(MT_EINVAL, "the global batch %d does not divide over %d devices; use a "
                       "batch that is a multiple of %d", job.batch, opts->devices, opts->devices);

    char mesh[32];
    if (opts->devices > 0) snprintf(mesh, sizeof mesh, "data=%d", opts->devices);
    else snprintf(mesh, sizeof mesh, "data=-1");
    mt_launch_opts lo;
    memset(&lo, 0, sizeof lo);
    lo.mesh = mesh;
    lo.devices = opts->devices;
    lo.transport = opts->transport;
    lo.trace = opts->trace;
    /* the example is a few FLOPs per example: kernel threads would only compete */
    lo.kernel_threads = 1;
    return mt_launch(&lo, linreg_device, &job);
}
