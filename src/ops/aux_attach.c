/*
 * aux_attach.c — a side loss attached to a pipeline stage's output: the
 * kernel half of the descriptors of aux_attach and aux_seed (mt__opdef_*,
 * ops_impl.h); graph/op_aux_attach.c is the graph half and the builder
 * (mt_aux_attach, meshtrain/graph.h).
 *
 * A stage that is not the last differentiates from the cotangent of its
 * output, which the next stage sends back; a loss computed inside it (a
 * mixture's router loss) reaches no output. aux_attach's output is its
 * first input, copied; its backward passes the output's gradient on and
 * gives the scalar second input the gradient s, whatever the output's:
 * the scalar counts in the model's loss times s (Megatron-LM's
 * MoEAuxLossAutoScaler).
 */
#include "ops/kernels.h"
#include "ops/op_cost.h"
#include "ops/ops_impl.h"

/* aux_attach: out (+)= in0; in1 (the scalar) is not read. */
static void run_attach(const mt_op_env *env, const mt_op_call *c) {
    (void)env;
    mt_kernel_scale((float *)c->out->data, (const float *)c->in[0]->data, 1.0f,
                    mt_tensor_numel(c->out), c->acc);
}

/* aux_seed: out (a scalar) (+)= p.scale.s; in0 (the output's gradient)
 * orders it after the backward has started, and is not read. */
static void run_seed(const mt_op_env *env, const mt_op_call *c) {
    (void)env;
    mt_kernel_fill((float *)c->out->data, c->p.scale.s, mt_tensor_numel(c->out), c->acc);
}

const mt_op_def mt__opdef_aux_attach = {
    .name = "aux_attach", .min_in = 2, .max_in = 2, .cost_class = MT_COST_VECTOR,
    .cost = mt__cost_unary, .meet = 1,   /* the loss meets nothing (its gradient is s) */
};
const mt_op_kernel mt__kernel_aux_attach = {.run = run_attach};

const mt_op_def mt__opdef_aux_seed = {
    .name = "aux_seed", .min_in = 1, .max_in = 1, .cost_class = MT_COST_VECTOR,
    .cost = mt__cost_unary,
};
const mt_op_kernel mt__kernel_aux_seed = {.run = run_seed};
