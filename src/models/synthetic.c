/*
 * synthetic.c — the synthetic problems the MLP and linear regression learn,
 * owned here so that `meshtrain train --model linreg|mlp` (train/) and the
 * pmap example (examples/) draw the very same numbers.
 *
 * Every example is a pure function of (seed, split, index), keyed through the
 * counter-based generator: a resumed run, any batch size and any mesh see the
 * same examples. The stream names ("data.train.x", "data.val.noise", ...) and
 * the arithmetic below are part of the data: changing either changes every
 * synthetic training run, and the losses tests compare with plain C.
 */
#include "meshtrain/models.h"

#include <math.h>

/* y = x·[2, -3.4, 1.7] + 4.2 (+ 0.01·noise), the JAX pmap example's problem.
 * The constants are floats (the example was written in float32), widened to
 * double for the sum. */
static const float linreg_true_w[MT_LINREG_DATA_FEATURES] = {2.0f, -3.4f, 1.7f};
#define LINREG_TRUE_B 4.2f
#define LINREG_NOISE 0.01f

/* Stream ids: train and validation draw disjoint numbers. */
static uint64_t stream(int split, const char *train_name, const char *val_name) {
    return mt_hash_name(split ? val_name : train_name);
}

/* x (n) of example `index`: standard normal, element i at counter index·n + i. */
static void fill_x(uint64_t seed, int split, uint64_t index, int n, float *x) {
    const uint64_t sx = stream(split, "data.train.x", "data.val.x");
    for (int i = 0; i < n; i++) x[i] = mt_rng_normal(seed, sx, index * (uint64_t)n + (uint64_t)i);
}

float mt_linreg_data(uint64_t seed, int split, uint64_t index, float *x) {
    const int n = MT_LINREG_DATA_FEATURES;
    fill_x(seed, split, index, n, x);
    const uint64_t sn = stream(split, "data.train.noise", "data.val.noise");
    /* b + noise is a float sum (as it always was); the dot product is double */
    double v = LINREG_TRUE_B + LINREG_NOISE * mt_rng_normal(seed, sn, index);
    for (int i = 0; i < n; i++) v += (double)linreg_true_w[i] * x[i];
    return (float)v;
}

void mt_mlp_data(uint64_t seed, int split, uint64_t index, float *x, float *y) {
    const int n_in = MT_MLP_DATA_IN, n_out = MT_MLP_DATA_OUT;
    fill_x(seed, split, index, n_in, x);
    /* the teacher A (n_out, n_in) is one for both splits: the same function */
    const uint64_t teacher = mt_hash_name("data.teacher");
    for (int j = 0; j < n_out; j++) {
        double v = 0;
        for (int i = 0; i < n_in; i++)
            v += mt_rng_normal(seed, teacher, (uint64_t)(j * n_in + i)) * x[i];
        y[j] = (float)sin(v / sqrt((double)n_in));
    }
}
