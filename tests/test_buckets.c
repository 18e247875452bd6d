/*
 * test_buckets.c — gradient buckets (mt_train_config.bucket_mb,
 * mt_compile_opts.bucket_bytes; src/graph/buckets.c).
 *
 * The invariant: every bucket size trains the one-device run. The tests'
 * GPT (L=2, C=64, NH=4: 26 parameter tensors, about 110k floats, tensors of
 * 64 to 49k floats) 10 AdamW steps on each mesh, for bucket sizes of 0 (one
 * all-reduce a gradient), 1 byte (every gradient past it: one each),
 * 16 KiB (a few gradients a bucket, the largest ones alone), 25 MiB (the
 * default: all in one) — losses within 1e-5 and final parameters within
 * 1e-4 of one device (the measure of test_strategies.c); on data=2, data=4,
 * data=2,tensor=2, ZeRO-1, and the reduce-scatter buckets of fsdp=2,
 * data=2,fsdp=2, ZeRO-2 on data=2 and ZeRO-3 on data=4, with accumulation,
 * with bf16 gradient reductions (not bucketed), and a pipeline
 * (data=2,pipe=2).
 *
 * Accumulation reduces once a step (mt_graph_set_reduce_later), counted the
 * same way, and trains the one-device run.
 *
 * Then the messages: the all-reduces device 0 issues in a step (its
 * profile's psum calls). The reference is counted from the parameters, not
 * from buckets.c: one a parameter gradient without buckets; with one bucket
 * larger than the model, at most 1 + the gradients reduced more than once
 * in W (the tied embedding); and with buckets of S bytes at least the total
 * gradient bytes over S. The same for ZeRO-2's reduce-scatters.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"
#include "graph/graph_impl.h"   /* the profile's rows */
#include "ops/ops_impl.h"       /* MT_OP_PSUM */

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

/* steps a run (under a sanitizer 4: the first steps already run every
 * collective and update of the layout, at 3-15x the cost) */
#define TSTEPS (MT_TEST_SANITIZED ? 4 : 10)
#define TSTEPS_MAX 10

typedef struct {
    float          loss[TSTEPS_MAX];
    mt_test_params p;
} run;

static run train(mt_train_config c, const char *mesh, double bucket_mb) {
    c.mesh = mesh;
    c.bucket_mb = bucket_mb;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    run r = {0};
    for (int s = 0; s < TSTEPS; s++) {
        mt_step_report rep;
        MT_CHECK_OK(mt_trainer_step(tr, &rep));
        r.loss[s] = rep.loss;
    }
    r.p = mt_test_params_of(tr);
    mt_trainer_free(tr);
    return r;
}

static const double SIZES_MB[] = {0, 1.0 / (1 << 20), 16.0 / 1024, 25};

static void check_sizes(mt_train_config c, const char *mesh, const char *what) {
    mt_train_config ref = c;
    ref.zero = 0;
    ref.grad_reduce = MT_PRECISION_FP32;
    ref.schedule = NULL;
    ref.accum = c.schedule ? 1 : c.accum;   /* the pipeline's microbatches: one batch */
    ref.B = c.schedule ? c.B * c.accum : c.B;
    run one = train(ref, NULL, 0);
    for (size_t k = 0; k < sizeof SIZES_MB / sizeof SIZES_MB[0]; k++) {
        run got = train(c, mesh, SIZES_MB[k]);
        for (int s = 0; s < TSTEPS; s++)
            MT_CHECK_CLOSE(got.loss[s], one.loss[s], 1e-5, "%s on %s, buckets of %g MiB: loss "
                           "at step %d", what, mesh, SIZES_MB[k], s + 1);
        int n_split = 0;   /* a pipeline's device 0 holds its stage: the losses alone */
        double d = c.schedule ? 0 : mt_test_params_diff(&got.p, &one.p, &n_split);
        MT_CHECK(d <= 1e-4, "%s on %s, buckets of %g MiB: parameters %.3g from one device's",
                 what, mesh, SIZES_MB[k], d);
        free(got.p.params);
    }
    free(one.p.params);
}

/* Each case (a child of its own) writes the corpus and removes it. */
static char corpus[] = "/tmp/mt_test_buckets_XXXXXX";

static mt_train_config gpt(void) {
    mt_test_write_text(corpus);
    return mt_test_config(MT_MODEL_GPT, corpus);
}

MT_TEST(data_parallel_buckets_train_one_device) {
    mt_train_config c = gpt();
    check_sizes(c, "data=2", "gpt");
    check_sizes(c, "data=4", "gpt");
    check_sizes(c, "data=2,tensor=2", "gpt");
    c.zero = 1;
    check_sizes(c, "data=2", "gpt zero=1");
    unlink(corpus);
}

MT_TEST(buckets_with_accumulation_fsdp_bf16_and_pipelines) {
    mt_train_config c = gpt();
    c.accum = 2;
    check_sizes(c, "data=2", "gpt accum=2");
    c.accum = 1;
    /* reduce-scatter buckets, shard-major (each device's shard of each together) */
    check_sizes(c, "fsdp=2", "gpt");
    check_sizes(c, "data=2,fsdp=2", "gpt");
    c.zero = 2;
    check_sizes(c, "data=2", "gpt zero=2");
    c.zero = 3;
    check_sizes(c, "data=4", "gpt zero=3");
    c.zero = 0;
    if (mt_precision_check(MT_PRECISION_BF16) == MT_OK) {
        mt_train_config b = c;
        b.grad_reduce = MT_PRECISION_BF16;   /* bf16 sums: the bound of test_bf16_comm */
        run one = train(c, NULL, 0), got = train(b, "data=2", 25);
        for (int s = 0; s < TSTEPS; s++)
            MT_CHECK_CLOSE(got.loss[s], one.loss[s], 2e-2, "bf16 reductions, buckets on: "
                           "loss at step %d", s + 1);
        free(one.p.params);
        free(got.p.params);
    }
    c.accum = 4;
    c.schedule = "1f1b";
    check_sizes(c, "data=2,pipe=2", "gpt 1f1b m=4");
    unlink(corpus);
}

/* Device 0's collectives `op` in one step; its parameter gradients' count,
 * and those of more than `bytes` and the floats of the rest. */
static int64_t calls_of_a_step(mt_train_config c, const char *mesh, double bucket_mb, mt_op op,
                               double bytes, int *n_grads, int *n_big, int64_t *small_floats) {
    c.mesh = mesh;
    c.bucket_mb = bucket_mb;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    mt_step_report rep;
    MT_CHECK_OK(mt_trainer_step(tr, &rep));   /* the first: nothing special after */
    mt_graph *g = mt_trainer_graph(tr);
    MT_CHECK_OK(mt_graph_set_profiling(g, true));
    MT_CHECK_OK(mt_trainer_step(tr, &rep));
    int64_t calls = g->prog->profile[op].calls;
    *n_grads = *n_big = 0;
    *small_floats = 0;
    for (int i = 0; i < mt_graph_n_params(g); i++) {
        mt_tensor *p = mt_graph_param_at(g, i);
        if (!mt_tensor_grad(p)) continue;
        (*n_grads)++;
        if ((double)mt_tensor_numel(p) * 4 > bytes) (*n_big)++;
        else *small_floats += mt_tensor_numel(p);
    }
    mt_trainer_free(tr);
    return calls;
}

static int64_t psums_of_a_step(mt_train_config c, const char *mesh, double bucket_mb,
                               double bytes, int *n_grads, int *n_big, int64_t *small_floats) {
    return calls_of_a_step(c, mesh, bucket_mb, MT_OP_PSUM, bytes, n_grads, n_big, small_floats);
}

MT_TEST(a_step_costs_a_message_a_bucket) {
    mt_train_config c = gpt();
    const double S = 16.0 / 1024;   /* MiB */
    int n, big;
    int64_t small;
    int64_t per_tensor = psums_of_a_step(c, "data=2", 0, 0, &n, &big, &small);
    int64_t one = psums_of_a_step(c, "data=2", 1024, 0, &n, &big, &small);
    int64_t some = psums_of_a_step(c, "data=2", S, S * (1 << 20), &n, &big, &small);
    /* the psums that are no gradient's (the loss's mean over data, ...) are in all three */
    int64_t other = per_tensor - n;
    fprintf(stderr, "  data=2: %d gradients; all-reduces a step: %lld one a gradient, %lld in "
            "one bucket, %lld in buckets of 16 KiB (%d gradients past it, %lld floats in the "
            "rest)\n", n, (long long)per_tensor, (long long)one, (long long)some, big,
            (long long)small);
    MT_CHECK(other >= 0 && other <= 4, "%lld all-reduces a step for %d gradients: one a "
             "gradient and at most 4 others expected", (long long)per_tensor, n);
    MT_CHECK(one - other >= 1 && one - other <= 2, "one bucket: %lld gradient all-reduces a "
             "step, want 1 (2 with the tied embedding's second contribution)",
             (long long)(one - other));
    /* each gradient past S alone, the rest at most S a bucket; and fewer than one each */
    double least = big + ceil((double)small * 4 / (S * (1 << 20)));
    MT_CHECK(some - other >= least && some - other < n, "buckets of 16 KiB: %lld gradient "
             "all-reduces a step, want at least %.0f and fewer than %d",
             (long long)(some - other), least, n);
    unlink(corpus);
}

/* ZeRO-2's reduce-scatters of the gradients: one a gradient without
 * buckets, one (two: the tied embedding) in one bucket, and at 16 KiB at
 * least the gradients past it plus the rest's bytes over 16 KiB. */
MT_TEST(zero2_reduce_scatters_a_bucket_at_a_time) {
    mt_train_config c = gpt();
    c.zero = 2;
    const double S = 16.0 / 1024;   /* MiB */
    int n, big;
    int64_t small;
    int64_t per_tensor = calls_of_a_step(c, "data=2", 0, MT_OP_PSUM_SCATTER, 0, &n, &big, &small);
    int64_t one = calls_of_a_step(c, "data=2", 1024, MT_OP_PSUM_SCATTER, 0, &n, &big, &small);
    int64_t some = calls_of_a_step(c, "data=2", S, MT_OP_PSUM_SCATTER, S * (1 << 20), &n, &big,
                                   &small);
    fprintf(stderr, "  data=2 zero=2: %d gradients; reduce-scatters a step: %lld one a "
            "gradient, %lld in one bucket, %lld in buckets of 16 KiB (%d gradients past it)\n",
            n, (long long)per_tensor, (long long)one, (long long)some, big);
    MT_CHECK(per_tensor >= n && per_tensor <= n + 1, "zero=2 without buckets: %lld "
             "reduce-scatters a step for %d gradients, want one each (+1: the tied embedding)",
             (long long)per_tensor, n);
    MT_CHECK(one >= 1 && one <= 2, "zero=2, one bucket: %lld reduce-scatters a step, want 1 "
             "(2 with the tied embedding's second contribution)", (long long)one);
    double least = big + ceil((double)small * 4 / (S * (1 << 20)));
    MT_CHECK(some >= least && some < n, "zero=2, buckets of 16 KiB: %lld reduce-scatters a "
             "step, want at least %.0f and fewer than %d", (long long)some, least, n);
    unlink(corpus);
}

/* Accumulating k microbatches, the gradients are reduced in the last one
 * alone (mt_graph_set_reduce_later): a step's all-reduces are one a gradient
 * plus k times the forward's own (the loss's mean over data), not k times
 * both; and the run is the one-device run's. */
MT_TEST(accumulation_reduces_the_gradients_once_a_step) {
    mt_train_config c = gpt();
    int n, big;
    int64_t small;
    int64_t one = psums_of_a_step(c, "data=2", 0, 0, &n, &big, &small);
    c.accum = 4;
    int64_t four = psums_of_a_step(c, "data=2", 0, 0, &n, &big, &small);
    int64_t other = one - n;   /* the forward's, a microbatch */
    fprintf(stderr, "  data=2: %d gradients; all-reduces a step: %lld at accum 1, %lld at "
            "accum 4\n", n, (long long)one, (long long)four);
    MT_CHECK(four == n + 4 * other, "accum=4: %lld all-reduces a step, want %d gradients once "
             "and 4 x %lld others = %lld", (long long)four, n, (long long)other,
             (long long)(n + 4 * other));
    check_sizes(c, "data=2,tensor=2", "gpt accum=4");
    c.zero = 1;
    check_sizes(c, "data=2", "gpt accum=4 zero=1");
    unlink(corpus);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
