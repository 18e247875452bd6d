/*
 * trainer.c — the training loop behind `meshtrain train`: resolves the
 * configuration, opens the data (or makes synthetic data for MLP and linear
 * regression), builds and compiles the model, and runs optimizer steps of
 * `accum` microbatches, validation, checkpoints and resumes. What differs
 * between models comes from their entry in the model table (model_table.c);
 * this file never asks which model it trains. Where the work runs, on one
 * device or on every device of a mesh, is devices.c's business.
 *
 * The loss of every microbatch is scaled by 1/(examples in the GLOBAL batch),
 * so the sum over microbatches is the mean over the global batch: that is
 * what makes any accum, and any mesh, compute the same step.
 */
#include "graph/tensor_data.h"
#include "train/train_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Defaults and validation                                                   */
/* ======================================================================== */

mt_train_config mt_train_defaults(void) {
    mt_train_config c;
    memset(&c, 0, sizeof c);
    c.model = MT_MODEL_GPT;   /* model_config NULL: every model's own defaults */
    c.val_frac = 0.1;
    c.B = 8;
    c.T = 64;
    c.accum = 1;
    c.bucket_mb = 25;
    c.eot_id = -1;   /* the model's */
    c.steps = 100;
    c.optim = mt_optim_defaults();
    c.optim.lr = 1e-3f;
    c.optim.warmup_steps = 10;
    c.optim.total_steps = c.steps;   /* callers that change steps should change this too */
    c.seed = 1337;
    c.eval_every = 0;
    c.eval_batches = 8;
    c.threads = 0;
    return c;
}

/* --doc-mask on: the end-of-text id must be a token the data can hold, or
 * no boundary is ever seen and every row is one document, silently (GPT-2's
 * 50256 on a byte-level text file). */
static mt_status check_eot(const mt_trainer *tr) {
    const mt_train_config *c = &tr->cfg;
    if (!c->doc_mask || !tr->ds) return MT_OK;
    const int32_t eot = mt__train_eot_id(tr);
    const int V = mt_dataset_vocab(tr->ds);
    if (eot >= 0 && eot < V) return MT_OK;
    return mt_fail(MT_EINVAL, "--doc-mask on: the end-of-text id %d is not a token of %s "
                   "(its vocabulary is %d), so no document boundary would be seen; give the "
                   "id the data separates documents with (--eot-id N; `tokenize --doc-sep` "
                   "writes the tokenizer's </s>)", (int)eot, c->data, V);
}

/* A validation split too short for one window would fail the first
 * evaluation, after eval_every steps of work: say so before step 1. */
static mt_status check_eval_split(const mt_trainer *tr) {
    const mt_train_config *c = &tr->cfg;
    if (c->eval_every <= 0 || !tr->ds) return MT_OK;
    int64_t n_val = mt_dataset_tokens(tr->ds, 1);
    if (n_val >= (int64_t)c->T + 1) return MT_OK;
    return mt_fail(MT_EINVAL, "eval_every=%d needs a validation split of at least T+1=%d "
                   "tokens, but val_frac=%g leaves %lld of the %lld tokens of %s; raise "
                   "val_frac, lower T, or set eval_every to 0", c->eval_every, c->T + 1,
                   c->val_frac, (long long)n_val,
                   (long long)(n_val + mt_dataset_tokens(tr->ds, 0)), c->data);
}

/* ======================================================================== */
/* Create and free                                                           */
/* ======================================================================== */

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* A Hugging Face directory: each device loads its own graphs, on its own
 * thread: whole parameters, or on a mesh that splits them the blocks (a
 * pipeline's chunks: the tensors each holds), reading only the rows they
 * span (mt_hf_load_llama), with no whole copy of the model in between;
 * llm.c files and checkpoints go through the one-device twin where the
 * parameters are split (ckpt_mesh.c). */
static mt_status hf_load_dev(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, void *arg) {
    (void)ctx, (void)arg;
    if (!d->pipe) return tr->m->hf_load(&tr->cfg, d->g, false);
    mt_status s = MT_OK;
    for (int i = 0; s == MT_OK && mt__train_pipe_graph(d, i); i++)
        s = tr->m->hf_load(&tr->cfg, mt__train_pipe_graph(d, i), true);
    return s;
}

mt_status mt_trainer_create(const mt_train_config *cfg, mt_trainer **out) {
    if (!out) return mt_fail(MT_EINVAL, "mt_trainer_create needs somewhere to put the trainer");
    *out = NULL;
    if (!cfg) return mt_fail(MT_EINVAL, "mt_trainer_create needs a configuration (got NULL)");
    /* every check the configuration alone decides, before any file or device */
    mt_status s = mt_train_config_check(cfg);
    if (s != MT_OK) return s;
    mt_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return mt_fail(MT_ENOMEM, "out of memory for the trainer");
    tr->cfg = *cfg;
    tr->m = mt__train_model_of(cfg->model);   /* not NULL: mt_train_config_check found it */
    mt_train_config *c = &tr->cfg;
    mt__train_model_config_copy(tr->m, cfg, &tr->model_cfg);   /* the caller's may die */
    c->model_config = tr->m->about.config_size ? &tr->model_cfg : NULL;
    c->model_config_size = tr->m->about.config_size;
    tr->on_mesh = cfg->mesh && *cfg->mesh;
    /* a trace records the devices of a mesh: one device is the mesh data=1 */
    if (!tr->on_mesh && cfg->trace) {
        tr->on_mesh = true;
        c->mesh = "data=1";
        c->devices = 1;
    }
    tr->data = dup_or_null(cfg->data);
    tr->ckpt_in = dup_or_null(cfg->ckpt_in);
    tr->ckpt_out = dup_or_null(cfg->ckpt_out);
    tr->llmc_in = dup_or_null(cfg->llmc_in);
    tr->llmc_out = dup_or_null(cfg->llmc_out);
    tr->hf_in = dup_or_null(cfg->hf_in);
    tr->hf_out = dup_or_null(cfg->hf_out);
    tr->mesh = dup_or_null(tr->on_mesh ? c->mesh : NULL);
    tr->schedule = dup_or_null(cfg->schedule);
    tr->trace = dup_or_null(cfg->trace);
    if ((cfg->data && !tr->data) || (cfg->ckpt_in && !tr->ckpt_in) ||
        (cfg->ckpt_out && !tr->ckpt_out) || (cfg->llmc_in && !tr->llmc_in) ||
        (cfg->llmc_out && !tr->llmc_out) || (cfg->hf_in && !tr->hf_in) ||
        (cfg->hf_out && !tr->hf_out) || (tr->on_mesh && !tr->mesh) ||
        (cfg->schedule && !tr->schedule) ||
        (cfg->trace && !tr->trace)) {
        s = mt_fail(MT_ENOMEM, "out of memory copying the trainer's paths");
        goto fail;
    }
    c->data = tr->data; c->ckpt_in = tr->ckpt_in; c->ckpt_out = tr->ckpt_out;
    c->llmc_in = tr->llmc_in; c->llmc_out = tr->llmc_out; c->mesh = tr->mesh;
    c->hf_in = tr->hf_in; c->hf_out = tr->hf_out;
    c->trace = tr->trace;
    c->schedule = tr->schedule;
    /* before any work: another run writing one of the outputs is refused now */
    if ((s = mt__train_claim_outputs(tr)) != MT_OK) goto fail;
    tr->n_dev = 1;
    tr->n_devices = 1;
    if (tr->on_mesh && (s = mt__train_setup_mesh(tr)) != MT_OK) goto fail;
    if (!tr->on_mesh) mt_set_num_threads(c->threads);
    if (!(tr->dev = calloc((size_t)tr->n_dev, sizeof *tr->dev))) {
        s = mt_fail(MT_ENOMEM, "out of memory for %d devices", tr->n_dev);
        goto fail;
    }

    if (tr->m->open && (s = tr->m->open(c, &tr->model_cfg, &tr->ds)) != MT_OK) goto fail;
    if ((s = check_eval_split(tr)) != MT_OK) goto fail;
    if ((s = check_eot(tr)) != MT_OK) goto fail;
    tr->m->describe(c, tr->model, sizeof tr->model);

    mt_ckpt_meta meta;
    memset(&meta, 0, sizeof meta);
    if (c->ckpt_in) {
        if ((s = mt_ckpt_read_meta(c->ckpt_in, &meta)) != MT_OK) goto fail;
        if (strcmp(meta.model, tr->model) != 0) {
            s = mt_fail(MT_EINVAL, "checkpoint %s holds model '%s' but this configuration "
                        "builds '%s'; resume with the checkpoint's model settings",
                        c->ckpt_in, meta.model, tr->model);
            goto fail;
        }
        c->seed = meta.seed;   /* the synthetic data depend on it */
    }
    if ((s = mt__train_run_devices(tr, mt__train_create_dev, NULL)) != MT_OK) goto fail;

    /* --hf-in excludes --llmc-in and --ckpt-in (config_check.c) */
    if (c->hf_in && (s = mt__train_run_devices(tr, hf_load_dev, NULL)) != MT_OK) goto fail;
    if (tr->split_params && (c->llmc_in || c->ckpt_in)) {
        /* devices hold blocks: the whole tensors go into this process's
         * one-device twin, and every device copies its block out of it */
        s = mt__ckpt_twin(tr);
        if (s == MT_OK && c->llmc_in) s = tr->m->llmc_load(c, tr->twin_g);
        if (s == MT_OK && c->ckpt_in) s = mt_ckpt_load(c->ckpt_in, tr->twin_g, tr->twin_opt, &meta);
        if ((s = mt__ckpt_mesh_put(tr, s, c->ckpt_in ? meta.step : -1)) != MT_OK) goto fail;
        /* kept only where later saves go through it */
        if (!mt__train_dev0(tr) || (!c->ckpt_out && !c->llmc_out && !c->hf_out))
            mt__ckpt_twin_free(tr);
    }
    /* every device holds the whole (replicated) parameters: each loads them */
    for (int k = 0; !tr->split_params && k < tr->n_dev; k++) {
        mt__train_dev *d = &tr->dev[k];
        if (c->llmc_in && (s = tr->m->llmc_load(c, d->g)) != MT_OK) goto fail;
        if (c->ckpt_in) {
            if ((s = mt_ckpt_load(c->ckpt_in, d->g, d->opt, &meta)) != MT_OK) goto fail;
            mt_optim_set_steps(d->opt, meta.step);
        }
    }
    if (c->ckpt_in) {
        tr->step = meta.step;
        tr->data_pos = meta.data_pos;
    }
    *out = tr;
    return MT_OK;
fail:
    mt_trainer_free(tr);
    return s;
}

void mt_trainer_free(mt_trainer *tr) {
    if (!tr) return;
    for (int k = 0; tr->dev && k < tr->n_dev; k++) {
        mt__train_dev *d = &tr->dev[k];
        if (d->pipe) {   /* d->g and d->opt are its first chunk's */
            mt__train_pipe_free(d->pipe);
        } else {
            mt_optim_free(d->opt);
            mt__moe_load_free(&d->moe);
            mt__moe_load_free(&d->eval_moe);
            mt_graph_free(d->g);
        }
        mt_graph_free(d->eval_g);
        free(d->stage_in);
        free(d->stage_docs);
        free(d->stage_target);
    }
    free(tr->dev);
    mt__train_release_outputs(tr);
    mt__ckpt_twin_free(tr);
    mt_dataset_free(tr->ds);
    free(tr->data);
    free(tr->ckpt_in);
    free(tr->ckpt_out);
    free(tr->llmc_in);
    free(tr->llmc_out);
    free(tr->hf_in);
    free(tr->hf_out);
    free(tr->mesh);
    free(tr->trace);
    mt_trace_run_free(tr->trace_run);
    free(tr->schedule);
    free(tr);
}

const mt_train_config *mt_trainer_config(const mt_trainer *tr) { return &tr->cfg; }
int mt_trainer_step_count(const mt_trainer *tr) { return tr->step; }
mt_graph *mt_trainer_graph(mt_trainer *tr) { return tr->dev[0].g; }
int mt_trainer_devices(const mt_trainer *tr) { return tr->n_devices; }
const char *mt_trainer_pipeline(const mt_trainer *tr) {
    return tr->pipe_layout[0] ? tr->pipe_layout : NULL;
}

mt_memory_report mt_trainer_memory(mt_trainer *tr) {
    const mt__train_dev *d = &tr->dev[0];
    mt_memory_report m = {0};
    /* a pipeline's device holds several chunks: their sum */
    for (int i = 0;; i++) {
        mt_graph *g = d->pipe ? mt__train_pipe_graph(d, i) : i == 0 ? d->g : NULL;
        if (!g) break;
        mt_optim *o = d->pipe ? mt__train_pipe_optim(d, i) : d->opt;
        mt_graph_stats st = mt_graph_get_stats(g);
        m.parameters += st.param_bytes;
        m.gradients += st.grad_bytes;
        m.optimizer += mt_optim_state_bytes(o);
        m.activations += st.arena_bytes;
        m.activations_f32 += st.arena_bytes_f32;
        m.temporary += st.scratch_bytes;
    }
    return m;
}

/* ======================================================================== */
/* Step, eval, save                                                          */
/* ======================================================================== */

typedef struct {
    int   step;
    float lr;
} step_args;

static mt_status agree_stop(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx);

static mt_status step_dev(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, void *arg) {
    const step_args *a = arg;
    const mt_train_config *c = &tr->cfg;
    mt_status s;
    mt_trace_step_begin(ctx, a->step);
    if (d->pipe) {
        for (int i = 0; mt__train_pipe_graph(d, i); i++) mt_graph_comm_reset(mt__train_pipe_graph(d, i));
        if ((s = mt__train_pipe_step(tr, d, ctx, a->lr, a->step)) != MT_OK) return s;
        s = agree_stop(tr, d, ctx);
        mt_trace_step_end(ctx);
        return s;
    }
    mt_graph_comm_reset(d->g);
    d->loss = 0;   /* Σ over microbatches of scaled losses = mean over the global batch */
    d->pos = tr->data_pos;
    for (int m = 0; m < c->accum; m++) {
        if ((s = mt__train_fill_batch(tr, d, ctx, 0, &d->pos, d->in, d->target)) != MT_OK)
            return s;
        if ((s = mt_graph_forward(d->g)) != MT_OK) return s;
        if ((s = mt__moe_load_add(&d->moe, d->g)) != MT_OK) return s;
        /* the gradients reduced once a step, in the last microbatch's backward */
        if ((s = mt_graph_set_reduce_later(d->g, m < c->accum - 1)) != MT_OK) return s;
        if ((s = mt_graph_backward(d->g)) != MT_OK) return s;
        d->loss += mt_graph_loss(d->g);
    }
    if ((s = mt__moe_load_maxvio(&d->moe, ctx, &d->moe_maxvio, &d->moe_aux)) != MT_OK) return s;
    d->moe_dropped = d->moe.n_caps ? d->moe.dropped : NAN;
    /* the loss is the global one on every device: they all stop together */
    if (!isfinite(d->loss)) {
        mt_graph_zero_grad(d->g);   /* leave no half-step behind */
        return mt_fail(MT_ENAN, "loss is %g at step %d; lower the learning rate (now %g) or "
                       "check the data", d->loss, a->step, (double)a->lr);
    }
    d->grad_norm = 0;
    mt_trace_begin(ctx, "optimizer");
    s = mt_optim_step(d->opt, &d->grad_norm);
    /* the routers' aux-loss-free bias, by the step's global loads */
    if (s == MT_OK && tr->m->router_bias_update)
        s = mt__moe_load_bias(&d->moe, d->g, ctx, tr->m->router_bias_update(c));
    mt_trace_end(ctx);
    if (s != MT_OK) {
        mt_graph_zero_grad(d->g);   /* a retried step must not add onto these */
        if (s == MT_ENAN)
            return mt_fail(s, "at step %d: %s; lower the learning rate (now %g)", a->step,
                           mt_errmsg(), (double)a->lr);
        return mt_fail_wrap(s, "at step %d", a->step);
    }
    s = agree_stop(tr, d, ctx);
    mt_trace_step_end(ctx);
    return s;
}

static mt_status no_work(mt_ctx *ctx, void *arg) {
    (void)ctx, (void)arg;
    return MT_OK;
}

/* The model's FLOPs in a step, all devices together: the model's own count
 * (GPT: 6N + attention per token), else what the graph's ops do, less any
 * recomputation (remat's FLOPs are the hardware's, not the model's). */
static double step_model_flops(const mt_trainer *tr) {
    const mt_train_config *c = &tr->cfg;
    const int64_t units = mt__microbatch_size(tr->m, c) * c->accum;
    if (tr->m->step_flops) return tr->m->step_flops(c, units);
    mt_graph_stats st = mt_graph_get_stats(tr->dev[0].g);
    return (st.flops_forward + st.flops_backward - st.flops_recompute) * c->accum *
           tr->n_devices;
}

mt_status mt_trainer_write_trace(mt_trainer *tr) {
    if (!tr->trace_run) return MT_OK;
    /* a launch that does nothing but write the run's timelines (gathered
     * from the MPI ranks on rank 0), with the model's FLOPs for MFU */
    mt_launch_opts o = tr->launch;
    o.trace = tr->trace;
    o.trace_out = tr->out_trace;   /* claimed at create: written through it */
    o.trace_model_flops = step_model_flops(tr);
    return mt_launch(&o, no_work, NULL);
}

/* Whether to stop after this step: under MPI all ranks agree. */
static mt_status agree_stop(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx) {
    const mt_train_config *c = &tr->cfg;
    mt_status s;
    d->stop = c->stop_flag && *c->stop_flag;
    if (ctx && c->stop_flag && tr->launch.transport == MT_TRANSPORT_MPI) {
        /* each rank got its own signal, maybe not between the same steps:
         * agree, so that no rank starts a step the others will not */
        const mt_mesh *mesh = mt_ctx_mesh(ctx);
        mt_axes all = {.n = mt_mesh_ndim(mesh)};
        for (int i = 0; i < all.n; i++) all.axis[i] = (uint8_t)i;
        float f = d->stop ? 1.0f : 0.0f;
        if ((s = mt_pmax(ctx, all, &f, 1)) != MT_OK) return s;
        d->stop = f > 0;
    }
    return MT_OK;
}

/* Device 0's collectives this step, summed over its graphs (a pipeline's
 * chunks), and the parameters they are counted against (mt_step_report.psi). */
static void comm_of_dev(mt_trainer *tr, mt_step_report *r) {
    const mt__train_dev *d = &tr->dev[0];
    mt_mesh *mesh = NULL;   /* checked at the start: it parses */
    if (tr->on_mesh && mt_mesh_create(tr->cfg.mesh, tr->n_devices, &mesh) != MT_OK) mesh = NULL;
    const int data = mesh ? mt_mesh_axis_size(mesh, "data") : 1;
    const int fsdp = mesh ? mt_mesh_axis_size(mesh, "fsdp") : 1;
    const uint32_t data_bit = mesh ? mt__axis_bit(mesh, "data") : 0;
    const uint32_t fsdp_bit = mesh ? mt__axis_bit(mesh, "fsdp") : 0;
    const int ep = mesh ? mt_mesh_axis_size(mesh, "expert") : 1;
    const uint32_t ep_bit = mesh ? mt__axis_bit(mesh, "expert") : 0;
    for (int i = 0;; i++) {
        mt_graph *g = d->pipe ? mt__train_pipe_graph(d, i) : i == 0 ? d->g : NULL;
        if (!g) break;
        mt_comm_count k = mt_graph_comm_count(g);
        r->comm.param_gather += k.param_gather;
        r->comm.grad_scatter += k.grad_scatter;
        r->comm.grad_reduce += k.grad_reduce;
        r->comm.param_gather_bytes += k.param_gather_bytes;
        r->comm.grad_scatter_bytes += k.grad_scatter_bytes;
        r->comm.grad_reduce_bytes += k.grad_reduce_bytes;
        r->comm.other_bytes += k.other_bytes;
        r->comm.n_collectives += k.n_collectives;
        /* whole over data, fsdp and expert, the axes that store parameters split */
        for (int p = 0; p < mt_graph_n_params(g); p++) {
            mt_tensor *t = mt_graph_param_at(g, p);
            const mt_sharding sh = mt_tensor_sharding(t);
            double n = (double)mt_tensor_numel(t);
            for (int dim = 0; dim < mt_tensor_ndim(t); dim++) {
                if (sh.dim_axes[dim] & data_bit) n *= data;
                if (sh.dim_axes[dim] & fsdp_bit) n *= fsdp;
                if (sh.dim_axes[dim] & ep_bit) n *= ep;
            }
            r->psi += n;
        }
    }
    mt_mesh_free(mesh);
}

mt_status mt_trainer_step(mt_trainer *tr, mt_step_report *report) {
    const mt_train_config *c = &tr->cfg;
    step_args a = {.step = tr->step + 1, .lr = mt_optim_lr_at(&c->optim, tr->step)};
    double t0 = mt_time_now();
    mt_status s = mt__train_run_devices(tr, step_dev, &a);
    if (s != MT_OK) return s;
    const mt__train_dev *d = &tr->dev[0];   /* every device has the same loss and norm */
    tr->step = a.step;
    tr->data_pos = d->pos;
    if (report) {
        memset(report, 0, sizeof *report);
        report->step = a.step;
        report->loss = (float)d->loss;
        report->grad_norm = d->grad_norm;
        report->moe_maxvio = d->moe_maxvio;
        report->moe_aux = d->moe_aux;
        report->moe_dropped = d->moe_dropped;
        report->lr = a.lr;
        report->stop = d->stop;
        report->bubble_rate = d->pipe ? d->bubble[0] : NAN;
        report->bubble_predicted = d->pipe ? d->bubble[1] : NAN;
        report->stage_f = d->pipe ? d->stage_cost[0] : NAN;
        report->stage_b = d->pipe ? d->stage_cost[1] : NAN;
        report->stage_w = d->pipe ? d->stage_cost[2] : NAN;
        report->seconds = mt_time_now() - t0;
        report->tokens = mt__microbatch_size(tr->m, c) * c->accum;
        report->flops = step_model_flops(tr);
        comm_of_dev(tr, report);
    }
    return MT_OK;
}

static mt_status eval_dev(mt_trainer *tr, mt__train_dev *d, mt_ctx *ctx, void *arg) {
    (void)arg;
    const mt_train_config *c = &tr->cfg;
    mt_status s;
    if (d->pipe) return mt__train_pipe_eval(tr, d, ctx);
    if (!d->eval_g) {
        /* forward only, its loss the mean over one microbatch */
        float scale = (float)(1.0 / (double)mt__microbatch_size(tr->m, c));
        s = mt__train_make_graph(tr->m, c, ctx, scale, true, &d->eval_g, &d->eval_in, &d->eval_target);
        if (s != MT_OK) return s;
    }
    /* the evaluation graph shares no storage: copy the current parameters in */
    for (int i = 0; i < mt_graph_n_params(d->eval_g); i++) {
        mt_tensor *dst = mt_graph_param_at(d->eval_g, i);
        mt_tensor *src = mt_graph_find(d->g, mt_tensor_name(dst));
        if (!src || mt_tensor_numel(src) != mt_tensor_numel(dst))
            return mt_fail(MT_EINTERNAL, "evaluation parameter '%s' has no twin in the "
                           "training graph", mt_tensor_name(dst));
        /* a copy on the device's backend: the op scale by 1, exact */
        s = mt__buffer_scale(d->eval_g, mt__tensor_buffer(dst), mt__tensor_buffer(src), 1.0f,
                             mt_tensor_numel(dst), false);
        if (s != MT_OK) return s;
    }
    mt_graph_params_changed(d->eval_g);
    int64_t pos = 0;   /* the same validation batches every time */
    double sum = 0;
    for (int i = 0; i < c->eval_batches; i++) {
        if ((s = mt__train_fill_batch(tr, d, ctx, 1, &pos, d->eval_in, d->eval_target)) != MT_OK)
            return s;
        if ((s = mt_graph_forward(d->eval_g)) != MT_OK) return s;
        if ((s = mt__moe_load_add(&d->eval_moe, d->eval_g)) != MT_OK) return s;
        sum += mt_graph_loss(d->eval_g);
    }
    /* a mixture of experts' validation loss is its language model's: the
       router losses (a mean over the batches, as sum's) taken out */
    double vio, aux;
    if ((s = mt__moe_load_maxvio(&d->eval_moe, ctx, &vio, &aux)) != MT_OK) return s;
    d->loss = sum / c->eval_batches - (isnan(aux) ? 0 : aux);
    return MT_OK;
}

mt_status mt_trainer_eval(mt_trainer *tr, float *val_loss) {
    const mt_train_config *c = &tr->cfg;
    if (c->eval_batches <= 0)
        return mt_fail(MT_EINVAL, "eval_batches=%d must be positive to evaluate", c->eval_batches);
    if (tr->ds) {
        int64_t n_val = mt_dataset_tokens(tr->ds, 1);
        if (n_val < (int64_t)c->T + 1)
            return mt_fail(MT_EINVAL, "the validation split of %s has %lld tokens, fewer than "
                           "T+1=%d; raise val_frac or lower T", c->data, (long long)n_val,
                           c->T + 1);
    }
    mt_status s = mt__train_run_devices(tr, eval_dev, NULL);
    if (s != MT_OK) return s;
    *val_loss = (float)tr->dev[0].loss;
    return MT_OK;
}

mt_status mt_trainer_save(mt_trainer *tr) {
    const mt_train_config *c = &tr->cfg;
    mt_status s, first = MT_OK;
    char msg[1024] = "";
    if (tr->split_params && (c->ckpt_out || c->llmc_out || c->hf_out)) {
        /* every device joins the gather; the whole state lands in the twin
         * where device 0 lives, which writes it as one device would */
        if ((s = mt__ckpt_mesh_gather(tr)) != MT_OK) return s;
    }
    mt__train_dev *d = mt__train_dev0(tr);
    if (!d) return MT_OK;   /* an MPI rank other than 0: rank 0 writes */
    mt_graph *g = tr->split_params ? tr->twin_g : d->g;
    mt_optim *opt = tr->split_params ? tr->twin_opt : d->opt;
    if (c->ckpt_out) {
        mt_ckpt_meta meta;
        memset(&meta, 0, sizeof meta);
        meta.step = tr->step;
        meta.data_pos = tr->data_pos;
        meta.seed = c->seed;
        snprintf(meta.model, sizeof meta.model, "%s", tr->model);
        first = tr->out_ckpt ? mt_ckpt_save_to(tr->out_ckpt, g, opt, &meta)
                             : mt_ckpt_save(c->ckpt_out, g, opt, &meta);
        if (first != MT_OK) snprintf(msg, sizeof msg, "%s", mt_errmsg());
    }
    /* a failed checkpoint does not cancel the llm.c one: each is its own file */
    if (c->llmc_out) {
        s = tr->m->llmc_save(c, g, tr->out_llmc);
        if (first != MT_OK && s != MT_OK)
            return mt_fail(first, "%s; and %s", msg, mt_errmsg());
        if (s != MT_OK) return s;
    }
    if (c->hf_out) {
        s = tr->m->hf_save(c, g);
        if (first != MT_OK && s != MT_OK)
            return mt_fail(first, "%s; and %s", msg, mt_errmsg());
        if (s != MT_OK) return s;
    }
    return first == MT_OK ? MT_OK : mt_fail(first, "%s", msg);
}
