/*
 * op_cost.h — the cost entries of the op table (op_cost.c): FLOPs and bytes
 * moved by one run of a call, as mt_op_def.cost (ops_impl.h) says. One per
 * family of ops; the op table names which each op uses.
 */
#ifndef MT_OPS_OP_COST_H
#define MT_OPS_OP_COST_H

#include "ops/ops_impl.h"

void mt__cost_gemm(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_linear(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_binary(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_unary(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_gelu(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_gelu_bwd(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_transpose(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_reduce_in(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_layernorm(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_ln_bwd(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_rmsnorm(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_rms_bwd(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_swiglu(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_attention(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_attention_bwd(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_gqa(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_embedding(const mt_op_call *c, double *flops, double *bytes);
void mt__cost_ce(const mt_op_call *c, double *flops, double *bytes);

#endif /* MT_OPS_OP_COST_H */
