/*
 * meshtrain/optim.h — optimizers (SGD, AdamW), gradient clipping and the
 * learning-rate schedule, over the parameters of a compiled graph.
 */
#ifndef MESHTRAIN_OPTIM_H
#define MESHTRAIN_OPTIM_H

#include "meshtrain/partition.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { MT_OPT_SGD = 0, MT_OPT_ADAMW = 1 } mt_optim_kind;

typedef struct {
    mt_optim_kind kind;
    float lr;             /* peak learning rate */
    float beta1, beta2, eps;  /* AdamW */
    float weight_decay;   /* decoupled; applied to parameters of 2+ dims only (not
                             to biases and layernorm gains), as in GPT-2 training */
    float momentum;       /* SGD */
    float grad_clip;      /* global-norm clip; 0 disables */
    int   warmup_steps;   /* linear warmup from 0 */
    int   total_steps;    /* cosine decay to min_lr_frac·lr at total_steps; 0 = constant */
    float min_lr_frac;
} mt_optim_config;

/* Defaults: AdamW, lr 3e-4, betas (0.9, 0.95), eps 1e-8, decay 0.1, clip 1.0. */
mt_optim_config mt_optim_defaults(void);

typedef struct mt_optim mt_optim;

/* Creates optimizer state (moments) for every parameter of a compiled graph,
 * in the graph's backend (mt_compile_opts.backend): its buffers hold the
 * state and it runs the update. On a backend that holds no data
 * ("shape-only") the state is planned (mt_optim_state_bytes) but not
 * allocated, and mt_optim_step fails with MT_EUNSUPPORTED. */
mt_status mt_optim_create(mt_graph *g, const mt_optim_config *cfg, mt_optim **out);
void      mt_optim_free(mt_optim *opt);

/* The learning rate at `step` (0-based) under the schedule. */
float mt_optim_lr_at(const mt_optim_config *cfg, int step);

/* One update from the accumulated gradients, then marks them zero: the next
 * backward overwrites them instead of adding (cheaper than clearing them;
 * until then they still hold the old values). Returns the
 * global gradient norm (before clipping) in *grad_norm if not NULL. Fails with
 * MT_ENAN, naming the parameter, if a gradient is not finite. */
mt_status mt_optim_step(mt_optim *opt, float *grad_norm);

/* The update in two halves, for runs whose parameters several optimizers
 * hold (a pipeline: one per stage graph, on different devices), which must
 * clip by one global norm. mt_optim_sumsq writes this optimizer's part of
 * the squared global gradient norm: Σ g² over its parameters, each element
 * of the global parameters counted once over the mesh axes its graph is
 * partitioned on (the psums over split axes run here, so every device of
 * those groups calls it), parameters left out by mt_optim_exclude_from_norm
 * skipped. A non-finite gradient is not an error here: the sum is returned
 * non-finite, so that the caller can add every part first and all devices
 * stop together. mt_optim_step_norm then updates with `norm`, the square
 * root of the sum of all parts, clipping by it; MT_ENAN (naming this
 * optimizer's bad parameter, if it has one) when norm is not finite.
 * mt_optim_step(opt, &n) is both with this optimizer's part alone. */
mt_status mt_optim_sumsq(mt_optim *opt, double *sumsq);
mt_status mt_optim_step_norm(mt_optim *opt, float norm);
/* Leaves the parameter named `name` out of mt_optim_sumsq: a copy of a
 * parameter another optimizer also holds and counts (a pipeline's tied
 * embedding on its last stage). It is still updated. MT_EINVAL when the
 * optimizer has no such parameter. */
mt_status mt_optim_exclude_from_norm(mt_optim *opt, const char *name);

/* Steps taken so far. */
int mt_optim_steps(const mt_optim *opt);
/* Bytes the optimizer allocated for its state (AdamW: m and v; SGD: the
 * momentum, when on), for this device's (shards of the) parameters. */
size_t mt_optim_state_bytes(const mt_optim *opt);

/* Optimizer state for checkpoints: per parameter i, the first and second
 * moments (NULL for SGD without momentum), numel floats each, a buffer of
 * the graph's backend: host memory on the CPU backend, as mt_tensor_f32();
 * on any backend read and write it with mt_backend_copy_out/copy_in. */
float *mt_optim_moment(mt_optim *opt, int param_index, int which /* 1 or 2 */);
void   mt_optim_set_steps(mt_optim *opt, int steps);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_OPTIM_H */
