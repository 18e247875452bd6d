/*
 * build.c — the programs the trainer builds: the model as the global
 * program (its loss the mean over the global microbatch), sharded as the
 * strategies' presets say (presets.c), partitioned for a device and
 * compiled. devices.c and pipe.c build through it, and explain through
 * mt_train_build_program.
 */
#include "train/train_impl.h"

#include <string.h>

/* ======================================================================== */
/* Graphs, on one device or partitioned over a mesh                          */
/* ======================================================================== */

mt_status mt_train_build_program(const mt_train_config *cfg, const mt_mesh *mesh, mt_graph *g,
                                 mt_tensor **loss, mt_partition_opts *opts) {
    *loss = NULL;
    mt_partition_opts unused;
    if (!opts) opts = &unused;
    memset(opts, 0, sizeof *opts);
    const mt__train_model *m = mt__train_model_of(cfg->model);
    if (!m) return mt_fail(MT_EINVAL, "unknown model kind %d", (int)cfg->model);
    float scale = (float)(1.0 / (double)mt__microbatch_size(m, cfg));
    mt_tensor *l = m->build(cfg, g, scale);
    if (!l) return mt_fail(mt_graph_status(g) != MT_OK ? mt_graph_status(g) : MT_EINVAL, "%s",
                           mt_graph_errmsg(g));
    mt_status s = mesh ? mt__shard_program(m, cfg, g, mesh, opts) : MT_OK;
    if (s == MT_OK) *loss = l;
    return s;
}

/* Builds the model into a new graph; on a mesh (ctx) builds the global
 * program, shards it as the presets say and partitions it.
 * Then compiles, fills the constants and finds the two inputs. */
mt_status mt__train_make_graph(const mt__train_model *m, const mt_train_config *c, mt_ctx *ctx,
                               float scale, bool no_grad, mt_graph **out, mt_tensor **in,
                               mt_tensor **target) {
    *out = NULL;
    mt_graph *g = mt_graph_create();
    if (!g) return mt_fail(MT_ENOMEM, "out of memory creating the %s graph",
                           no_grad ? "evaluation" : "training");
    mt_tensor *loss = m->build(c, g, scale);
    mt_status s = MT_OK;
    if (!loss) {
        s = mt_graph_status(g) != MT_OK ? mt_graph_status(g) : MT_EINVAL;
        if (mt_graph_status(g) != MT_OK) mt_fail(s, "%s", mt_graph_errmsg(g));
        mt_graph_free(g);
        return s;
    }
    if (ctx) {
        mt_graph *local = NULL;
        mt_tensor *local_loss = NULL;
        mt_partition_opts po;
        s = mt__shard_program(m, c, g, mt_ctx_mesh(ctx), &po);
        if (s == MT_OK) s = mt_partition(g, loss, ctx, &po, &local, &local_loss);
        mt_graph_free(g);
        if (s != MT_OK) return s;
        g = local;
        loss = local_loss;
    }
    mt_compile_opts opts = {.seed = c->seed, .no_grad = no_grad, .remat = c->remat,
                            .interleave_w = c->remat != MT_REMAT_NONE,
                            .precision = c->precision, .grad_reduce = c->grad_reduce,
                            .f32_activations = c->f32_activations,
                            .bucket_bytes = mt__train_bucket_bytes(c),
                            .backend = mt__train_backend(c)};
    s = mt_graph_compile(g, loss, &opts);
    if (s == MT_OK && m->fill_constants) s = m->fill_constants(g);
    /* a split sequence's positions are those of the device's head-tail rows */
    if (s == MT_OK && ctx && m->batch_const) s = mt__train_seq_positions(ctx, g, m->batch_const);
    if (s != MT_OK) { mt_graph_free(g); return s; }
    *in = mt_graph_find(g, m->input);
    *target = mt_graph_find(g, m->target);
    *out = g;
    return MT_OK;
}

/* Tokens or examples (m->about.sequences) in one microbatch. */
int64_t mt__microbatch_size(const mt__train_model *m, const mt_train_config *c) {
    return m->about.sequences ? (int64_t)c->B * c->T : c->B;
}
