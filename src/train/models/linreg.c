/*
 * linreg.c — linear regression's entry in the trainer's table of models
 * (train_impl.h documents each member; model_table.c registers it as
 * MT_MODEL_LINREG, "linreg"): no settings of its own, its description, and
 * its batches drawn from the JAX pmap example's problem (mt_linreg_data).
 * The builder and the data are src/models/linreg/.
 */
#include "train/train_impl.h"

#include <stdio.h>

static void linreg_describe(const mt_train_config *c, char *buf, size_t n) {
    (void)c;
    snprintf(buf, n, "linreg features=%d", MT_LINREG_DATA_FEATURES);
}

static mt_tensor *linreg_build(const mt_train_config *c, mt_graph *g, float scale) {
    return mt_linreg_build(g, c->B, MT_LINREG_DATA_FEATURES, scale);
}

/* x (B,MT_LINREG_DATA_FEATURES), y (B) */
static mt_status linreg_fill_batch(const mt_train_config *c, const mt_dataset *ds, int split,
                                   int64_t *pos, int row0, int rows, void *in, void *target) {
    (void)ds;
    float *x = in, *y = target;
    for (int e = 0; e < rows; e++)
        y[e] = mt_linreg_data(c->seed, split, (uint64_t)(*pos + row0 + e),
                              x + (size_t)e * MT_LINREG_DATA_FEATURES);
    *pos += c->B;
    return MT_OK;
}

const mt__train_model mt__model_linreg = {
    .about = {.name = "linreg"},   /* no settings of its own */
    .input = "x", .target = "y",
    .describe = linreg_describe, .build = linreg_build, .fill_batch = linreg_fill_batch,
    .logical_axes = "batch",
};
