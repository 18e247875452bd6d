/*
 * trainer.c — the training loop behind `meshtrain train`: resolves the
 * configuration, opens the data (or makes synthetic data for MLP and linear
 * regression), builds and compiles the model, and runs optimizer steps of
 * `accum` microbatches, validation, checkpoints and resumes. What differs
 * between models comes from their entry in the model table (model_table.c);
 * this file never asks which model it trains.
 *
 * The loss of every microbatch is scaled by 1/(examples in the GLOBAL batch),
 * so the sum over microbatches is the mean over the global batch: that is
 * what makes any accum (and, later, any mesh) compute the same step.
 */
#include "train/train_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mt_trainer {
    mt_train_config cfg;        /* as resolved; its strings point at the copies below */
    const mt__train_model *m;   /* the model's table entry */
    char           *data, *ckpt_in, *ckpt_out, *llmc_in, *llmc_out;   /* owned copies */
    char            model[256]; /* model description, checked on resume */
    mt_dataset     *ds;         /* models trained on a dataset only (GPT) */
    mt_graph       *g;          /* training graph */
    mt_tensor      *in, *target;/* its inputs, named by the model's entry */
    mt_optim       *opt;
    mt_graph       *eval_g;     /* forward-only graph, built on the first eval */
    mt_tensor      *eval_in, *eval_target;
    int             step;       /* optimizer steps taken */
    int64_t         data_pos;   /* training data consumed: tokens or examples (m->sequences) */
};

/* ======================================================================== */
/* Defaults and validation                                                   */
/* ======================================================================== */

mt_train_config mt_train_defaults(void) {
    mt_train_config c;
    memset(&c, 0, sizeof c);
    c.model = MT_MODEL_GPT;
    /* every model's own sizes, so that switching c.model needs no other call */
    for (int k = 0; k < mt__train_model_count(); k++) {
        const mt__train_model *m = mt__train_model_of((mt_model_kind)k);
        if (m && m->defaults) m->defaults(&c);
    }
    c.val_frac = 0.1;
    c.B = 8;
    c.T = 64;
    c.accum = 1;
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

/* "gpt, mlp or linreg": the names of the table, for messages. */
static void model_names(char *buf, size_t n) {
    const int count = mt__train_model_count();
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < count && at < n; k++) {
        const mt__train_model *m = mt__train_model_of((mt_model_kind)k);
        if (!m) continue;
        int w = snprintf(buf + at, n - at, "%s%s", at == 0 ? "" : k == count - 1 ? " or " : ", ",
                         m->name);
        if (w < 0) break;
        at += (size_t)w;
    }
}

static mt_status check_config(const mt_train_config *c) {
    const mt__train_model *m = mt__train_model_of(c->model);
    if (!m) {
        char names[128];
        model_names(names, sizeof names);
        return mt_fail(MT_EINVAL, "unknown model kind %d; use %s", (int)c->model, names);
    }
    if (c->B <= 0) return mt_fail(MT_EINVAL, "batch size B=%d must be positive", c->B);
    if (m->sequences && c->T <= 0)
        return mt_fail(MT_EINVAL, "sequence length T=%d must be positive", c->T);
    if (c->accum <= 0)
        return mt_fail(MT_EINVAL, "accum=%d microbatches per step must be positive", c->accum);
    if (c->steps < 0) return mt_fail(MT_EINVAL, "steps=%d must not be negative", c->steps);
    if (c->eval_every < 0)
        return mt_fail(MT_EINVAL, "eval_every=%d must not be negative (0 = never)", c->eval_every);
    if (c->eval_every > 0 && c->eval_batches <= 0)
        return mt_fail(MT_EINVAL, "eval_batches=%d must be positive when eval_every=%d",
                       c->eval_batches, c->eval_every);
    if (c->ckpt_every < 0)
        return mt_fail(MT_EINVAL, "ckpt_every=%d must not be negative (0 = at the end only)",
                       c->ckpt_every);
    /* without a path the periodic saves would silently not happen */
    if (c->ckpt_every > 0 && !c->ckpt_out)
        return mt_fail(MT_EINVAL, "ckpt_every=%d has no checkpoint to write: set ckpt_out, "
                       "or set ckpt_every to 0", c->ckpt_every);
    if (c->threads < 0)
        return mt_fail(MT_EINVAL, "threads=%d must not be negative (0 = all cores)", c->threads);
    mt_status s;
    if (m->check && (s = m->check(c)) != MT_OK) return s;
    if (!m->llmc && (c->llmc_in || c->llmc_out)) {
        return mt_fail(MT_EINVAL, "llm.c checkpoints (%s) hold GPT-2 models only; drop them "
                       "or train a GPT", c->llmc_in ? c->llmc_in : c->llmc_out);
    }
    if (c->ckpt_in && c->llmc_in)
        return mt_fail(MT_EINVAL, "give either ckpt_in (%s, a resume) or llmc_in (%s, an "
                       "initialisation), not both", c->ckpt_in, c->llmc_in);
    return MT_OK;
}

/* ======================================================================== */
/* Models and data                                                           */
/* ======================================================================== */

/* Creates, builds and compiles a graph; finds its two inputs. */
static mt_status make_graph(const mt__train_model *m, const mt_train_config *c, float scale,
                            bool no_grad, mt_graph **out, mt_tensor **in, mt_tensor **target) {
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
    mt_compile_opts opts = {.seed = c->seed, .no_grad = no_grad};
    s = mt_graph_compile(g, loss, &opts);
    if (s == MT_OK && m->fill_constants) s = m->fill_constants(g);
    if (s != MT_OK) { mt_graph_free(g); return s; }
    *in = mt_graph_find(g, m->input);
    *target = mt_graph_find(g, m->target);
    *out = g;
    return MT_OK;
}

/* Tokens or examples (m->sequences) in one microbatch. */
static int64_t microbatch_size(const mt__train_model *m, const mt_train_config *c) {
    return m->sequences ? (int64_t)c->B * c->T : c->B;
}

/* Fills one microbatch of `split` at *pos into the inputs and advances *pos. */
static void fill_batch(const mt_trainer *tr, int split, int64_t *pos, mt_tensor *in,
                       mt_tensor *target) {
    tr->m->fill_batch(&tr->cfg, tr->ds, split, pos, in, target);
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

mt_status mt_trainer_create(const mt_train_config *cfg, mt_trainer **out) {
    if (!out) return mt_fail(MT_EINVAL, "mt_trainer_create needs somewhere to put the trainer");
    *out = NULL;
    if (!cfg) return mt_fail(MT_EINVAL, "mt_trainer_create needs a configuration (got NULL)");
    mt_status s = check_config(cfg);
    if (s != MT_OK) return s;
    mt_trainer *tr = calloc(1, sizeof *tr);
    if (!tr) return mt_fail(MT_ENOMEM, "out of memory for the trainer");
    tr->cfg = *cfg;
    tr->m = mt__train_model_of(cfg->model);   /* not NULL: check_config found it */
    mt_train_config *c = &tr->cfg;
    tr->data = dup_or_null(cfg->data);
    tr->ckpt_in = dup_or_null(cfg->ckpt_in);
    tr->ckpt_out = dup_or_null(cfg->ckpt_out);
    tr->llmc_in = dup_or_null(cfg->llmc_in);
    tr->llmc_out = dup_or_null(cfg->llmc_out);
    if ((cfg->data && !tr->data) || (cfg->ckpt_in && !tr->ckpt_in) ||
        (cfg->ckpt_out && !tr->ckpt_out) || (cfg->llmc_in && !tr->llmc_in) ||
        (cfg->llmc_out && !tr->llmc_out)) {
        s = mt_fail(MT_ENOMEM, "out of memory copying the trainer's paths");
        goto fail;
    }
    c->data = tr->data; c->ckpt_in = tr->ckpt_in; c->ckpt_out = tr->ckpt_out;
    c->llmc_in = tr->llmc_in; c->llmc_out = tr->llmc_out;
    mt_set_num_threads(c->threads);

    if (tr->m->open && (s = tr->m->open(c, &tr->ds)) != MT_OK) goto fail;
    if ((s = check_eval_split(tr)) != MT_OK) goto fail;
    tr->m->describe(c, tr->model, sizeof tr->model);

    mt_ckpt_meta meta;
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

    float scale = (float)(1.0 / ((double)microbatch_size(tr->m, c) * c->accum));
    if ((s = make_graph(tr->m, c, scale, false, &tr->g, &tr->in, &tr->target)) != MT_OK)
        goto fail;
    if ((s = mt_optim_create(tr->g, &c->optim, &tr->opt)) != MT_OK) goto fail;

    if (c->llmc_in && (s = mt_llmc_load(c->llmc_in, tr->g, &c->gpt)) != MT_OK) goto fail;
    if (c->ckpt_in) {
        if ((s = mt_ckpt_load(c->ckpt_in, tr->g, tr->opt, &meta)) != MT_OK) goto fail;
        tr->step = meta.step;
        tr->data_pos = meta.data_pos;
        mt_optim_set_steps(tr->opt, meta.step);
    }
    *out = tr;
    return MT_OK;
fail:
    mt_trainer_free(tr);
    return s;
}

void mt_trainer_free(mt_trainer *tr) {
    if (!tr) return;
    mt_optim_free(tr->opt);
    mt_graph_free(tr->g);
    mt_graph_free(tr->eval_g);
    mt_dataset_free(tr->ds);
    free(tr->data);
    free(tr->ckpt_in);
    free(tr->ckpt_out);
    free(tr->llmc_in);
    free(tr->llmc_out);
    free(tr);
}

const mt_train_config *mt_trainer_config(const mt_trainer *tr) { return &tr->cfg; }
int mt_trainer_step_count(const mt_trainer *tr) { return tr->step; }
mt_graph *mt_trainer_graph(mt_trainer *tr) { return tr->g; }

/* ======================================================================== */
/* Step, eval, save                                                          */
/* ======================================================================== */

mt_status mt_trainer_step(mt_trainer *tr, mt_step_report *report) {
    const mt_train_config *c = &tr->cfg;
    const int step = tr->step + 1;            /* 1-based, as reported */
    const float lr = mt_optim_lr_at(&c->optim, tr->step);
    double t0 = mt_time_now();
    double loss = 0;   /* Σ over microbatches of scaled losses = mean over the global batch */
    mt_status s;
    for (int m = 0; m < c->accum; m++) {
        fill_batch(tr, 0, &tr->data_pos, tr->in, tr->target);
        if ((s = mt_graph_forward(tr->g)) != MT_OK) return s;
        if ((s = mt_graph_backward(tr->g)) != MT_OK) return s;
        loss += mt_graph_loss(tr->g);
    }
    if (!isfinite(loss)) {
        mt_graph_zero_grad(tr->g);   /* leave no half-step behind */
        return mt_fail(MT_ENAN, "loss is %g at step %d; lower the learning rate (now %g) or "
                       "check the data", loss, step, (double)lr);
    }
    float grad_norm = 0;
    if ((s = mt_optim_step(tr->opt, &grad_norm)) != MT_OK) {
        mt_graph_zero_grad(tr->g);   /* a retried step must not add onto these */
        if (s == MT_ENAN)
            return mt_fail(s, "at step %d: %s; lower the learning rate (now %g)", step,
                           mt_errmsg(), (double)lr);
        return mt_fail_wrap(s, "at step %d", step);
    }
    tr->step = step;
    if (report) {
        memset(report, 0, sizeof *report);
        report->step = step;
        report->loss = (float)loss;
        report->grad_norm = grad_norm;
        report->lr = lr;
        report->seconds = mt_time_now() - t0;
        report->tokens = microbatch_size(tr->m, c) * c->accum;
        if (tr->m->step_flops) {
            report->flops = tr->m->step_flops(c, report->tokens);
        } else {
            mt_graph_stats st = mt_graph_get_stats(tr->g);
            report->flops = (st.flops_forward + st.flops_backward) * c->accum;
        }
    }
    return MT_OK;
}

mt_status mt_trainer_eval(mt_trainer *tr, float *val_loss) {
    const mt_train_config *c = &tr->cfg;
    mt_status s;
    if (c->eval_batches <= 0)
        return mt_fail(MT_EINVAL, "eval_batches=%d must be positive to evaluate", c->eval_batches);
    if (tr->ds) {
        int64_t n_val = mt_dataset_tokens(tr->ds, 1);
        if (n_val < (int64_t)c->T + 1)
            return mt_fail(MT_EINVAL, "the validation split of %s has %lld tokens, fewer than "
                           "T+1=%d; raise val_frac or lower T", c->data, (long long)n_val,
                           c->T + 1);
    }
    if (!tr->eval_g) {
        /* forward only, its loss the mean over one microbatch */
        float scale = (float)(1.0 / (double)microbatch_size(tr->m, c));
        s = make_graph(tr->m, c, scale, true, &tr->eval_g, &tr->eval_in, &tr->eval_target);
        if (s != MT_OK) return s;
    }
    /* the evaluation graph shares no storage: copy the current parameters in */
    for (int i = 0; i < mt_graph_n_params(tr->eval_g); i++) {
        mt_tensor *dst = mt_graph_param_at(tr->eval_g, i);
        mt_tensor *src = mt_graph_find(tr->g, mt_tensor_name(dst));
        if (!src || mt_tensor_numel(src) != mt_tensor_numel(dst))
            return mt_fail(MT_EINTERNAL, "evaluation parameter '%s' has no twin in the "
                           "training graph", mt_tensor_name(dst));
        memcpy(mt_tensor_f32(dst), mt_tensor_f32(src), (size_t)mt_tensor_numel(dst) * sizeof(float));
    }
    int64_t pos = 0;   /* the same validation batches every time */
    double sum = 0;
    for (int i = 0; i < c->eval_batches; i++) {
        fill_batch(tr, 1, &pos, tr->eval_in, tr->eval_target);
        if ((s = mt_graph_forward(tr->eval_g)) != MT_OK) return s;
        sum += mt_graph_loss(tr->eval_g);
    }
    *val_loss = (float)(sum / c->eval_batches);
    return MT_OK;
}

mt_status mt_trainer_save(mt_trainer *tr) {
    const mt_train_config *c = &tr->cfg;
    mt_status s;
    if (c->ckpt_out) {
        mt_ckpt_meta meta;
        memset(&meta, 0, sizeof meta);
        meta.step = tr->step;
        meta.data_pos = tr->data_pos;
        meta.seed = c->seed;
        snprintf(meta.model, sizeof meta.model, "%s", tr->model);
        if ((s = mt_ckpt_save(c->ckpt_out, tr->g, tr->opt, &meta)) != MT_OK) return s;
    }
    if (c->llmc_out && (s = mt_llmc_save(c->llmc_out, tr->g, &c->gpt)) != MT_OK) return s;
    return MT_OK;
}
