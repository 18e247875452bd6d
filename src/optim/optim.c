/*
 * optim.c — SGD and AdamW over a compiled graph's parameters, global-norm
 * clipping, and the warmup + cosine learning-rate schedule.
 *
 * State (moments) is one buffer per parameter, shaped like it: when
 * parameters are sharded the state shards with them (ZeRO falls out).
 * Parameters, gradients and state are the graph's backend's: the state
 * comes from its buffer_alloc, the update and the gradient norm's sums are
 * its optim_update and sumsq members (graph/tensor_data.h,
 * ops/backend_impl.h); nothing here touches their values.
 */
#include "graph/graph_impl.h"
#include "graph/tensor_data.h"
#include "meshtrain/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct mt_optim {
    mt_optim_config cfg;
    mt_graph       *g;
    const mt_backend *be;       /* the graph's: where the state lives and the update runs */
    int             n;          /* parameters */
    mt_tensor     **params;     /* (n) */
    float         **m, **v;     /* (n) moment buffers of be, numel of each param; NULL if
                                   unused (and always on a backend that holds no data) */
    bool            has_m, has_v;
    bool           *no_norm;    /* (n) left out of the norm: a tied copy counted elsewhere */
    const char     *bad;        /* the last mt_optim_sumsq's non-finite parameter, or NULL */
    int             steps;
};

mt_optim_config mt_optim_defaults(void) {
    mt_optim_config c = {
        .kind = MT_OPT_ADAMW, .lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
        .weight_decay = 0.1f, .momentum = 0.0f, .grad_clip = 1.0f,
        .warmup_steps = 0, .total_steps = 0, .min_lr_frac = 0.1f,
    };
    return c;
}

static mt_status check_config(const mt_optim_config *c) {
    if (!(c->lr >= 0) || !isfinite(c->lr))
        return mt_fail(MT_EINVAL, "learning rate %g must be a finite number >= 0", c->lr);
    if (c->kind == MT_OPT_ADAMW) {
        if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
            return mt_fail(MT_EINVAL, "AdamW betas (%g, %g) must be in [0, 1)", c->beta1, c->beta2);
        if (!(c->eps > 0)) return mt_fail(MT_EINVAL, "AdamW eps %g must be > 0", c->eps);
    } else if (c->kind != MT_OPT_SGD) {
        return mt_fail(MT_EINVAL, "unknown optimizer kind %d; use MT_OPT_SGD or MT_OPT_ADAMW", c->kind);
    }
    if (!(c->grad_clip >= 0)) return mt_fail(MT_EINVAL, "grad_clip %g must be >= 0 (0 disables)", c->grad_clip);
    if (c->warmup_steps < 0 || c->total_steps < 0)
        return mt_fail(MT_EINVAL, "warmup_steps %d and total_steps %d must be >= 0",
                       c->warmup_steps, c->total_steps);
    if (!(c->min_lr_frac >= 0 && c->min_lr_frac <= 1))
        return mt_fail(MT_EINVAL, "min_lr_frac %g must be in [0, 1]", c->min_lr_frac);
    return MT_OK;
}

mt_status mt_optim_create(mt_graph *g, const mt_optim_config *cfg, mt_optim **out) {
    *out = NULL;
    if (!g->prog || g->prog->opts.no_grad)
        return mt_fail(MT_ESTATE, "mt_optim_create needs a graph compiled with gradients");
    mt_status s = check_config(cfg);
    if (s != MT_OK) return s;
    mt_optim *o = calloc(1, sizeof *o);
    if (!o) return mt_fail(MT_ENOMEM, "out of memory for the optimizer");
    o->cfg = *cfg;
    o->g = g;
    o->be = mt__graph_backend(g);
    o->n = mt_graph_n_params(g);
    o->params = calloc((size_t)o->n, sizeof *o->params);
    o->m = calloc((size_t)o->n, sizeof *o->m);
    o->v = calloc((size_t)o->n, sizeof *o->v);
    o->no_norm = calloc((size_t)o->n, sizeof *o->no_norm);
    if (!o->params || !o->m || !o->v || !o->no_norm) { mt_optim_free(o); return mt_fail(MT_ENOMEM, "out of memory for the optimizer"); }
    o->has_m = cfg->kind == MT_OPT_ADAMW || cfg->momentum != 0;
    o->has_v = cfg->kind == MT_OPT_ADAMW;
    for (int i = 0; i < o->n; i++) {
        mt_tensor *p = mt_graph_param_at(g, i);
        o->params[i] = p;
        size_t bytes = (size_t)mt_tensor_numel(p) * sizeof(float);
        for (int k = 0; k < 2; k++) {
            if (!(k ? o->has_v : o->has_m)) continue;
            float **slot = k ? &o->v[i] : &o->m[i];
            if ((s = mt_backend_alloc(o->be, bytes, (void **)slot)) != MT_OK) {
                mt_optim_free(o);
                return mt_fail_wrap(s, "optimizer state of '%s'", p->name);
            }
            o->be->buffer_clear(*slot, bytes);
        }
    }
    *out = o;
    return MT_OK;
}

void mt_optim_free(mt_optim *o) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) {
        if (o->m) mt_backend_free(o->be, o->m[i]);
        if (o->v) mt_backend_free(o->be, o->v[i]);
    }
    free(o->m);
    free(o->v);
    free(o->no_norm);
    free(o->params);
    free(o);
}

float mt_optim_lr_at(const mt_optim_config *c, int step) {
    if (c->warmup_steps > 0 && step < c->warmup_steps)
        return c->lr * (float)(step + 1) / (float)c->warmup_steps;
    if (c->total_steps <= 0) return c->lr;
    int decay_steps = c->total_steps - c->warmup_steps;
    if (decay_steps <= 0 || step >= c->total_steps) return c->lr * c->min_lr_frac;
    double progress = (double)(step - c->warmup_steps) / (double)decay_steps;
    double coeff = 0.5 * (1.0 + cos(M_PI * progress));
    double min_lr = (double)c->lr * c->min_lr_frac;
    return (float)(min_lr + coeff * ((double)c->lr - min_lr));
}

/* Updates parameter i through the backend. */
static mt_status update(mt_optim *o, int i, float gscale, float lr, int t) {
    const mt_optim_config *c = &o->cfg;
    mt_tensor *p = o->params[i];
    mt_optim_update u = {
        .kind = c->kind == MT_OPT_ADAMW ? MT_BACKEND_ADAMW : MT_BACKEND_SGD,
        .p = mt__tensor_buffer(p), .g = mt__tensor_buffer(p->grad), .m = o->m[i], .v = o->v[i],
        .n = mt_tensor_numel(p), .lr = lr, .beta1 = c->beta1, .beta2 = c->beta2, .eps = c->eps,
        /* No weight decay on vectors (biases, layernorm gains), as GPT-2 training does. */
        .weight_decay = p->ndim >= 2 ? c->weight_decay : 0.0f, .momentum = c->momentum,
        .gscale = gscale, .t = t,
    };
    return mt__backend_optim_update(o->be, &o->g->prog->env, &u);
}

/* Σ of every gradient element squared, each element of the global
 * parameters counted once. Off a mesh, and for a parameter that every
 * device holds whole (replicated: the same gradient everywhere), the local
 * sum is it. A shard's sum is one part of its parameter's: those are summed
 * over the axes that split them, one psum per distinct set of axes, in the
 * order the parameters come (the same on every device). A non-finite sum is
 * returned as it is, its parameter noted in o->bad: the caller's check, once
 * every part is in, makes all devices stop together. */
mt_status mt_optim_sumsq(mt_optim *o, double *out) {
    enum { MAX_SETS = 16 };
    uint32_t sets[MAX_SETS];
    float part[MAX_SETS];
    int n_sets = 0;
    double whole = 0;
    o->bad = NULL;
    if (o->g->prog->grads_zero) mt_graph_zero_grad(o->g);   /* no backward since the last step */
    for (int i = 0; i < o->n; i++) {
        mt_tensor *p = o->params[i];
        if (!p->grad || o->no_norm[i]) continue;   /* unused by the loss, or counted elsewhere */
        double s;
        mt_status st = mt__backend_sumsq(o->be, &o->g->prog->env, mt__tensor_buffer(p->grad),
                                         mt_tensor_numel(p), &s);
        if (st != MT_OK) return st;
        if (!isfinite(s) && !o->bad) o->bad = p->name;
        uint32_t axes = 0;
        for (int d = 0; p->is_shard && d < p->ndim; d++) axes |= p->sharding.dim_axes[d];
        if (!axes || !o->g->ctx) { whole += s; continue; }
        int k = 0;
        while (k < n_sets && sets[k] != axes) k++;
        if (k == n_sets) {
            if (n_sets == MAX_SETS)
                return mt_fail(MT_EUNSUPPORTED, "the parameters are split over more than %d sets "
                               "of mesh axes; the gradient norm handles at most that", MAX_SETS);
            sets[n_sets] = axes;
            part[n_sets++] = 0;
        }
        part[k] += (float)s;
    }
    const mt_mesh *mesh = o->g->ctx ? mt_ctx_mesh(o->g->ctx) : NULL;
    for (int k = 0; k < n_sets; k++) {
        mt_axes ax = {0};
        for (int a = 0; a < mt_mesh_ndim(mesh); a++)
            if (sets[k] & (1u << a)) ax.axis[ax.n++] = (uint8_t)a;
        mt_status st = mt_psum(o->g->ctx, ax, &part[k], 1);
        if (st != MT_OK) return st;
        whole += part[k];
    }
    *out = whole;
    return MT_OK;
}

mt_status mt_optim_exclude_from_norm(mt_optim *o, const char *name) {
    for (int i = 0; i < o->n; i++)
        if (strcmp(o->params[i]->name, name) == 0) {
            o->no_norm[i] = true;
            return MT_OK;
        }
    return mt_fail(MT_EINVAL, "the optimizer has no parameter '%s' to leave out of the norm; "
                   "give a parameter name of its graph", name);
}

mt_status mt_optim_step_norm(mt_optim *o, float norm) {
    const mt_optim_config *c = &o->cfg;
    if (o->g->prog->grads_zero) mt_graph_zero_grad(o->g);   /* no backward since the last step */
    /* a non-finite part makes every device's norm non-finite: all stop */
    if (!isfinite(norm))
        return mt_fail(MT_ENAN, "the gradient of parameter '%s' is not finite at step %d; "
                       "lower the learning rate (now %g) or check the data",
                       o->bad ? o->bad : "(another device's shard)", o->steps + 1,
                       mt_optim_lr_at(&o->cfg, o->steps));
    float gscale = (c->grad_clip > 0 && norm > c->grad_clip) ? c->grad_clip / norm : 1.0f;
    float lr = mt_optim_lr_at(c, o->steps);
    for (int i = 0; i < o->n; i++) {
        if (!o->params[i]->grad) continue;   /* left as it is, as PyTorch leaves grad=None */
        mt_status s = update(o, i, gscale, lr, o->steps + 1);
        if (s != MT_OK) return s;
    }
    o->steps++;
    mt__graph_mark_grads_zero(o->g);
    mt_graph_params_changed(o->g);   /* bf16 weight copies are cast again at the next forward */
    return MT_OK;
}

mt_status mt_optim_step(mt_optim *o, float *grad_norm) {
    double sumsq = 0;
    mt_status s = mt_optim_sumsq(o, &sumsq);
    if (s != MT_OK) return s;
    float norm = (float)sqrt(sumsq);
    if (grad_norm) *grad_norm = norm;
    return mt_optim_step_norm(o, norm);
}

int mt_optim_steps(const mt_optim *o) { return o->steps; }

size_t mt_optim_state_bytes(const mt_optim *o) {
    size_t n = 0;
    for (int i = 0; i < o->n; i++) {
        size_t bytes = (size_t)mt_tensor_numel(o->params[i]) * sizeof(float);
        n += (o->has_m ? bytes : 0) + (o->has_v ? bytes : 0);
    }
    return n;
}
void mt_optim_set_steps(mt_optim *o, int steps) { o->steps = steps; }

float *mt_optim_moment(mt_optim *o, int i, int which) {
    if (i < 0 || i >= o->n) return NULL;
    return which == 1 ? o->m[i] : which == 2 ? o->v[i] : NULL;
}
