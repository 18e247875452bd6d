/*
 * devices.c — where the trainer's work runs: one device off a mesh, or every
 * device of a mesh, each step one launch (threads of this process, or one
 * MPI rank each). Each device holds its part of the run (mt__train_dev): the
 * model built as the global program, sharded as the strategies' presets say
 * (presets.c), partitioned (partition.h) and compiled; its optimizer; and a
 * buffer for the global microbatch, of which it keeps its slice.
 */
#include "train/train_impl.h"

#include <stdio.h>
#include <stdlib.h>
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
                            .f32_activations = c->f32_activations};
    s = mt_graph_compile(g, loss, &opts);
    if (s == MT_OK && m->fill_constants) s = m->fill_constants(g);
    if (s != MT_OK) { mt_graph_free(g); return s; }
    *in = mt_graph_find(g, m->input);
    *target = mt_graph_find(g, m->target);
    *out = g;
    return MT_OK;
}

/* Tokens or examples (m->sequences) in one microbatch. */
int64_t mt__microbatch_size(const mt__train_model *m, const mt_train_config *c) {
    return m->sequences ? (int64_t)c->B * c->T : c->B;
}

/* The storage of an f32 or i32 input. */
static void *input_data(mt_tensor *t) {
    return mt_tensor_dtype(t) == MT_I32 ? (void *)mt_tensor_i32(t) : (void *)mt_tensor_f32(t);
}

/* Fills one microbatch of `split` at *pos into a device's inputs and
 * advances *pos. On a mesh every device makes the global microbatch and
 * keeps its slice of the rows: its block in the group over the batch axes. */
void mt__train_fill_batch(const mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, int split,
                          int64_t *pos, mt_tensor *in, mt_tensor *target) {
    if (!ctx) {
        tr->m->fill_batch(&tr->cfg, tr->ds, split, pos, input_data(in), input_data(target));
        return;
    }
    tr->m->fill_batch(&tr->cfg, tr->ds, split, pos, d->stage_in, d->stage_target);
    int r = mt_axis_index(ctx, mt__batch_axes(mt_ctx_mesh(ctx)));
    size_t nb_in = (size_t)mt_tensor_numel(in) * mt_dtype_size(mt_tensor_dtype(in));
    size_t nb_t = (size_t)mt_tensor_numel(target) * mt_dtype_size(mt_tensor_dtype(target));
    memcpy(input_data(in), (char *)d->stage_in + (size_t)r * nb_in, nb_in);
    memcpy(input_data(target), (char *)d->stage_target + (size_t)r * nb_t, nb_t);
}

/* ---- running on every device ------------------------------------------- */

typedef struct {
    mt_trainer *tr;
    mt__dev_fn  fn;
    void       *arg;
} dev_job;

static mt_status dev_entry(mt_ctx *ctx, void *arg) {
    dev_job *job = arg;
    mt_trainer *tr = job->tr;
    /* threads: this process holds every device; MPI: its own only */
    int k = tr->n_dev == 1 ? 0 : mt_ctx_device(ctx);
    mt__train_dev *d = &tr->dev[k];
    mt_status s = MT_OK;
    /* the graphs' collectives run on this launch's context */
    if (d->g) s = mt_graph_set_ctx(d->g, ctx);
    if (s == MT_OK && d->eval_g) s = mt_graph_set_ctx(d->eval_g, ctx);
    return s == MT_OK ? job->fn(tr, d, ctx, job->arg) : s;
}

/* Runs fn on every device: directly off a mesh, else in one launch. */
mt_status mt__train_run_devices(mt_trainer *tr, mt__dev_fn fn, void *arg) {
    if (!tr->on_mesh) return fn(tr, &tr->dev[0], NULL, arg);
    dev_job job = {tr, fn, arg};
    return mt_launch(&tr->launch, dev_entry, &job);
}

/* Device 0's state: the one that reports and saves (NULL on an MPI rank
 * without it). */
mt__train_dev *mt__train_dev0(mt_trainer *tr) {
    if (!tr->on_mesh || tr->n_dev > 1) return &tr->dev[0];
    int rank = 0, size = 1;
    mt_launcher_world(&rank, &size);
    return mt_transport_resolve(tr->cfg.transport) == MT_TRANSPORT_MPI && rank != 0 ? NULL
                                                                                   : &tr->dev[0];
}

mt_status mt__train_create_dev(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, void *arg) {
    (void)arg;
    const mt_train_config *c = &tr->cfg;
    if (ctx && mt__train_pipe_size(mt_ctx_mesh(ctx)) > 1) return mt__train_pipe_create(tr, d, ctx);
    float scale = (float)(1.0 / ((double)mt__microbatch_size(tr->m, c) * c->accum));
    mt_status s = mt__train_make_graph(tr->m, c, ctx, scale, false, &d->g, &d->in, &d->target);
    if (s == MT_OK) s = mt_optim_create(d->g, &c->optim, &d->opt);
    if (s == MT_OK && ctx) {
        /* the global microbatch: the local inputs times the batch split */
        int parts = mt_axis_size(ctx, mt__batch_axes(mt_ctx_mesh(ctx)));
        d->stage_in = malloc((size_t)parts * (size_t)mt_tensor_numel(d->in) * 4);
        d->stage_target = malloc((size_t)parts * (size_t)mt_tensor_numel(d->target) * 4);
        if (!d->stage_in || !d->stage_target)
            s = mt_fail(MT_ENOMEM, "out of memory for the global microbatch");
    }
    return s;
}

/* On a mesh: the mesh, the device count and the batch split, checked before
 * any device starts. */
mt_status mt__train_setup_mesh(mt_trainer *tr) {
    mt_train_config *c = &tr->cfg;
    mt_transport_kind kind = mt_transport_resolve(c->transport);
    int rank = 0, world = 1;
    mt_launcher_world(&rank, &world);
    int n = kind == MT_TRANSPORT_MPI ? (c->devices > 0 ? c->devices : world) : c->devices;
    if (kind == MT_TRANSPORT_MPI && n != world)
        return mt_fail(MT_EINVAL, "devices=%d, but mpirun started %d ranks; under MPI each rank "
                       "is one device: give -np %d or leave devices out", n, world, n);
    if (n <= 0) {   /* no device count: the product of the mesh's sizes */
        mt_status s = mt_mesh_spec_devices(c->mesh, &n);
        if (s != MT_OK) return s;
    }
    mt_mesh *mesh = NULL;
    mt_status s = mt_mesh_create(c->mesh, n, &mesh);
    if (s != MT_OK) return s;
    tr->n_devices = mt_mesh_size(mesh);
    /* the axes the strategies know (presets.c, pipe.c) */
    static const char *const KNOWN[] = {"data", "fsdp", "tensor", "pipe"};
    for (int a = 0; a < mt_mesh_ndim(mesh); a++) {
        bool known = false;
        for (size_t k = 0; k < sizeof KNOWN / sizeof KNOWN[0]; k++)
            known |= strcmp(mt_mesh_axis_name(mesh, a), KNOWN[k]) == 0;
        if (!known) {
            s = mt_fail(MT_EINVAL, "mesh '%s': axis '%s' is unknown to the trainer; name the "
                        "axes data (splits the batch), fsdp (the batch and the parameters), "
                        "tensor or pipe", c->mesh,
                        mt_mesh_axis_name(mesh, a));
            mt_mesh_free(mesh);
            return s;
        }
    }
    if (c->zero < 0 || c->zero > 3 || (c->zero > 0 && mt_mesh_axis_size(mesh, "data") < 2)) {
        s = mt_fail(MT_EINVAL, "zero=%d: ZeRO stages are 1, 2 or 3, and split over the mesh's "
                    "data axis, which '%s' %s", c->zero, c->mesh,
                    mt_mesh_axis_size(mesh, "data") ? "gives only 1 device" : "does not have");
        mt_mesh_free(mesh);
        return s;
    }
    if (c->zero == 1 && mt_mesh_axis_size(mesh, "fsdp") > 1) {
        s = mt_fail(MT_EINVAL, "zero=1 with an fsdp axis: ZeRO-1's all-reduced gradients and "
                    "fsdp's reduce-scattered ones cannot share a parameter; use zero=2 or 3");
        mt_mesh_free(mesh);
        return s;
    }
    int pipe = mt__train_pipe_size(mesh);
    if (pipe > 1) {
        if (!c->schedule) c->schedule = "1f1b";
        s = mt__train_pipe_check(c, tr->m, pipe, tr->pipe_layout, sizeof tr->pipe_layout);
    } else if (c->schedule || c->pipe_chunks) {
        s = mt_fail(MT_EINVAL, "schedule '%s' pipelines over the mesh's pipe axis, but mesh '%s' "
                    "has none of 2 or more devices; add one (e.g. pipe=2) or drop the schedule",
                    c->schedule ? c->schedule : "(chunks)", c->mesh);
    }
    if (s != MT_OK) {
        mt_mesh_free(mesh);
        return s;
    }
    mt_axes ax = mt__batch_axes(mesh);
    int parts = mt_mesh_group_size(mesh, ax);
    bool sharded = pipe > 1 || mt_mesh_axis_size(mesh, "fsdp") > 1 ||
                   mt_mesh_axis_size(mesh, "tensor") > 1 ||
                   c->zero > 0;
    mt_mesh_free(mesh);
    if (c->B % parts != 0)
        return mt_fail(MT_EINVAL, "batch B=%d does not divide over the axes that split it, "
                       "data and fsdp (%d devices): each takes B/%d of the global batch; pick B "
                       "a multiple of %d", c->B, parts, parts, parts);
    /* a checkpoint holds whole tensors: split ones (and a pipeline's, which
     * each device holds some of) are gathered to save and cut into blocks
     * to load (ckpt_mesh.c) */
    tr->split_params = sharded;
    tr->n_dev = kind == MT_TRANSPORT_MPI ? 1 : tr->n_devices;
    /* threads in all, shared out; 0: the launch's cores / devices */
    int per_device = c->threads > 0 ? (c->threads >= tr->n_dev ? c->threads / tr->n_dev : 1) : 0;
    tr->launch = (mt_launch_opts){.mesh = tr->mesh,
                                  .devices = kind == MT_TRANSPORT_MPI ? 0 : tr->n_devices,
                                  .transport = kind, .kernel_threads = per_device};
    /* the steps' launches record into one run; mt_trainer_write_trace writes it */
    if (tr->trace) {
        s = mt_trace_run_create(tr->n_devices, c->trace_steps > 0 ? c->trace_steps : 20,
                                &tr->trace_run);
        tr->launch.trace_run = tr->trace_run;
    }
    return s;
}

