/*
 * devices.c — where the trainer's work runs: one device off a mesh, or every
 * device of a mesh, each step one launch (threads of this process, or one
 * MPI rank each). Each device holds its part of the run (mt__train_dev): the
 * model built as the global program, sharded as the strategies' presets say
 * (presets.c), partitioned (partition.h) and compiled (build.c); its
 * optimizer; and a buffer for its rows of the global microbatch (the only
 * ones it makes or reads), written into its inputs through their graph's
 * backend (graph/tensor_data.h).
 */
#include "graph/tensor_data.h"
#include "train/train_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Inputs                                                                    */
/* ======================================================================== */

/* Fills one microbatch of `split` at *pos into a device's inputs and
 * advances *pos. On a mesh every device makes (and reads the data of) only
 * its slice of the global microbatch's rows: its block in the group over the
 * batch axes. */
mt_status mt__train_fill_batch(const mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, int split,
                               int64_t *pos, mt_tensor *in, mt_tensor *target) {
    const mt_train_config *c = &tr->cfg;
    int parts = 1, r = 0;
    if (ctx) {
        mt_axes batch = mt__batch_axes(mt_ctx_mesh(ctx));
        parts = mt_axis_size(ctx, batch);
        r = mt_axis_index(ctx, batch);
    }
    int rows = c->B / parts;
    mt_status s = tr->m->fill_batch(c, tr->ds, split, pos, r * rows, rows, d->stage_in,
                                    d->stage_target);
    /* a sequence split over devices (context): this device's head-tail
     * share of each row, cut once here at the input */
    int seq_parts, seq_part;
    mt__train_seq_split(ctx, in, &seq_parts, &seq_part);
    /* packed documents: the ids come from whole rows, before any cut (a
     * document's start may lie in another device's share) */
    mt_tensor *docs = NULL;
    if (s == MT_OK && c->doc_mask) {
        docs = mt_graph_find(in == d->eval_in ? d->eval_g : d->g, "docs");
        if (!docs || !d->stage_docs)
            return mt_fail(MT_EINTERNAL, "doc_mask is on but the %s graph has no 'docs' input",
                           in == d->eval_in ? "evaluation" : "training");
        int64_t T = mt_tensor_dim(in, 1) * seq_parts;
        mt_dataset_doc_ids(d->stage_in, rows, T, mt__train_eot_id(tr), d->stage_docs);
    }
    if (s == MT_OK && seq_parts > 1) {
        mt__train_headtail_rows(d->stage_in, d->stage_in, rows, mt_tensor_dim(in, 1), seq_parts,
                                seq_part);
        mt__train_headtail_rows(d->stage_target, d->stage_target, rows, mt_tensor_dim(target, 1),
                                seq_parts, seq_part);
        if (docs)
            mt__train_headtail_rows(d->stage_docs, d->stage_docs, rows, mt_tensor_dim(docs, 1),
                                    seq_parts, seq_part);
    }
    if (s == MT_OK) s = mt_tensor_write(in, d->stage_in, 0, mt_tensor_numel(in));
    if (s == MT_OK) s = mt_tensor_write(target, d->stage_target, 0, mt_tensor_numel(target));
    if (s == MT_OK && docs) s = mt_tensor_write(docs, d->stage_docs, 0, mt_tensor_numel(docs));
    return s;
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
    /* off MPI this process holds every device, device 0 among them; under
     * MPI rank 0 holds device 0, and it is the rank that writes the files */
    return mt__train_writes_files(tr) ? &tr->dev[0] : NULL;
}

mt_status mt__train_create_dev(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, void *arg) {
    (void)arg;
    const mt_train_config *c = &tr->cfg;
    if (ctx && mt__train_pipe_size(mt_ctx_mesh(ctx)) > 1) return mt__train_pipe_create(tr, d, ctx);
    float scale = (float)(1.0 / ((double)mt__microbatch_size(tr->m, c) * c->accum));
    mt_status s = mt__train_make_graph(tr->m, c, ctx, scale, false, &d->g, &d->in, &d->target);
    if (s == MT_OK) s = mt_optim_create(d->g, &c->optim, &d->opt);
    if (s == MT_OK) {
        /* the device's rows of the global microbatch (the eval graph's are as
         * many), whole sequences: a split one is cut once they are read */
        int parts, part;
        mt__train_seq_split(ctx, d->in, &parts, &part);
        d->stage_in = malloc((size_t)mt_tensor_numel(d->in) * 4 * (size_t)parts);
        d->stage_target = malloc((size_t)mt_tensor_numel(d->target) * 4 * (size_t)parts);
        if (c->doc_mask)   /* as many as the tokens */
            d->stage_docs = malloc((size_t)mt_tensor_numel(d->in) * 4 * (size_t)parts);
        if (!d->stage_in || !d->stage_target || (c->doc_mask && !d->stage_docs))
            s = mt_fail(MT_ENOMEM, "out of memory for the device's rows of the microbatch");
    }
    return s;
}

/* On a mesh: the mesh mt_train_config_check has checked, its devices and
 * the launch, before any device starts. */
mt_status mt__train_setup_mesh(mt_trainer *tr) {
    mt_train_config *c = &tr->cfg;
    mt_transport_kind kind = mt_transport_resolve(c->transport);
    int n = 0;
    mt_status s = mt__train_mesh_devices(c, &n);
    if (s != MT_OK) return s;
    mt_mesh *mesh = NULL;
    if ((s = mt_mesh_create(c->mesh, n, &mesh)) != MT_OK) return s;
    tr->n_devices = mt_mesh_size(mesh);
    int pipe = mt__train_pipe_size(mesh);
    if (pipe > 1) c->schedule = mt__train_pipe_schedule(c);
    bool sharded = pipe > 1 || mt_mesh_axis_size(mesh, "fsdp") > 1 ||
                   mt_mesh_axis_size(mesh, "tensor") > 1 ||
                   mt_mesh_axis_size(mesh, "expert") > 1 ||
                   c->zero > 0 ||
                   /* a rule of the user's may split a parameter over any
                    * axis (experts=data: the experts folded over data) */
                   (c->rules && *c->rules);
    mt_mesh_free(mesh);
    /* a checkpoint holds whole tensors: split ones (and a pipeline's, which
     * each device holds some of) are gathered to save and cut into blocks
     * to load (ckpt_mesh.c) */
    tr->split_params = sharded;
    tr->n_dev = kind == MT_TRANSPORT_MPI ? 1 : tr->n_devices;
    /* threads in all, shared out; 0: the launch's cores / devices */
    int per_device = c->threads > 0 ? (c->threads >= tr->n_dev ? c->threads / tr->n_dev : 1) : 0;
    tr->launch = (mt_launch_opts){.mesh = tr->mesh,
                                  .devices = kind == MT_TRANSPORT_MPI ? 0 : tr->n_devices,
                                  .transport = kind, .kernel_threads = per_device,
                                  /* more devices than cores: a core holds whole pipelines */
                                  .colocate = pipe > 1 ? "pipe" : NULL};
    /* the steps' launches record into one run; mt_trainer_write_trace writes it */
    if (tr->trace) {
        s = mt_trace_run_create(tr->n_devices, c->trace_steps > 0 ? c->trace_steps : 20,
                                &tr->trace_run);
        tr->launch.trace_run = tr->trace_run;
    }
    return s;
}

