/*
 * mlp.c — the MLP's entry in the trainer's table of models (train_impl.h
 * documents each member; model_table.c registers it as MT_MODEL_MLP,
 * "mlp"): its flags and defaults, its check, its description, and its
 * batches drawn from the synthetic teacher (mt_mlp_data). The builder and
 * the data are src/models/mlp/.
 */
#include "train/train_impl.h"

#include <stddef.h>
#include <stdio.h>

static const mt_mlp_config MLP_DEFAULTS = {.hidden = 64, .layers = 3};

/* c's MLP settings: its own, or the defaults (model_config NULL). */
static const mt_mlp_config *mlp_of(const mt_train_config *c) {
    return c->model_config ? c->model_config : &MLP_DEFAULTS;
}

static mt_status mlp_check(const mt_train_config *c) {
    const mt_mlp_config *m = mlp_of(c);
    if (m->hidden <= 0 || m->layers <= 0)
        return mt_fail(MT_EINVAL, "MLP hidden=%d (--channels) and layers=%d (--layers) must "
                       "be positive", m->hidden, m->layers);
    return MT_OK;
}

static void mlp_describe(const mt_train_config *c, char *buf, size_t n) {
    snprintf(buf, n, "mlp in=%d hidden=%d out=%d layers=%d", MT_MLP_DATA_IN, mlp_of(c)->hidden,
             MT_MLP_DATA_OUT, mlp_of(c)->layers);
}

static mt_tensor *mlp_build(const mt_train_config *c, mt_graph *g, float scale) {
    const mt_mlp_config *m = mlp_of(c);
    return mt_mlp_build(g, c->B, MT_MLP_DATA_IN, m->hidden, MT_MLP_DATA_OUT, m->layers, scale);
}

/* x (B,MT_MLP_DATA_IN), targets (B,MT_MLP_DATA_OUT) */
static mt_status mlp_fill_batch(const mt_train_config *c, const mt_dataset *ds, int split,
                                int64_t *pos, int row0, int rows, void *in, void *target) {
    (void)ds;
    float *x = in, *y = target;
    for (int e = 0; e < rows; e++)
        mt_mlp_data(c->seed, split, (uint64_t)(*pos + row0 + e), x + (size_t)e * MT_MLP_DATA_IN,
                    y + (size_t)e * MT_MLP_DATA_OUT);
    *pos += c->B;
    return MT_OK;
}

static const mt_model_flag MLP_FLAGS[] = {
    {"layers", "layers", offsetof(mt_mlp_config, layers), 1, 1000, false, "N", "linear layers",
     MT_MODEL_FLAG_INT, 0, 0, NULL, NULL},
    {"channels", "hidden", offsetof(mt_mlp_config, hidden), 1, 65536, false, "N",
     "hidden width", MT_MODEL_FLAG_INT, 0, 0, NULL, NULL},
};

/* Tensor parallelism is Megatron's MLP, from the rules over the builder's
 * logical axis "mlp" (presets.c): the linear layers in pairs, the first
 * column-parallel (its weight's and bias's output dim split over `tensor`:
 * each device computes its share of the hidden units), the second
 * row-parallel (its weight's input dim split: each device's partial sums
 * are all-reduced, then the bias). An unpaired last layer, or a pair whose
 * width the axis does not divide, stays replicated. */
const mt__train_model mt__model_mlp = {
    .about = {.name = "mlp", MT__MODEL_CONFIG(mt_mlp_config), MT__MODEL_FLAGS(MLP_FLAGS)},
    .config_defaults = &MLP_DEFAULTS,
    .input = "x", .target = "targets",
    .check = mlp_check,
    .describe = mlp_describe, .build = mlp_build, .fill_batch = mlp_fill_batch,
    .logical_axes = "batch,mlp",
};
