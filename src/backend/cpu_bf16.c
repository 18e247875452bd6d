/*
 * cpu_bf16.c — the CPU backend's bf16 products (backend_cpu.c's table): a
 * call the graph planned as a bf16 product (mt_op_call.bf16) runs here on
 * oneDNN (matmul_bf16.c), never through the op table's f32 kernels.
 */
#include "backend/cpu_impl.h"

#define F32(t) ((float *)(t)->data)

/* A product's operand stored in bf16 (mt_compile_opts.f32_activations
 * false), read as it is; NULL for an f32 one. */
static const uint16_t *bf16_operand(const mt_tensor *t) {
    return t->dtype == MT_BF16 ? (const uint16_t *)t->data : NULL;
}

void mt__cpu_run_product(const mt_op_env *env, const mt_op_call *c) {
    /* LINEAR: x (rows,C) · w (OC,C)ᵀ + b, never accumulating; MATMUL and
     * GEMM: op(in0) · op(in1), (+)= as the call says */
    const float *bias = c->op == MT_OP_LINEAR && c->n_in == 3 ? F32(c->in[2]) : NULL;
    bool acc = c->op == MT_OP_LINEAR ? false : c->acc;
    mt__bf16_gemm_run16(env, c->bf16, F32(c->in[0]), bf16_operand(c->in[0]), F32(c->in[1]),
                        bf16_operand(c->in[1]), bias, F32(c->out), acc);
}
