/*
 * cpu_bf16.c — the CPU backend's bf16 products (backend_impl.h's
 * plans_create, plan_matmul, plans_workspace and plans_free, in
 * backend_cpu.c's table), on oneDNN (matmul_bf16.c, bf16_impl.h): a set is
 * one graph's oneDNN engine and the plans made on it, a plan one product's
 * mt_bf16_gemm. A call planned so (mt_op_call.plan) runs here, never
 * through the op table's f32 kernels. Also the public face of whether this
 * build and CPU run bf16 products (backend.h: mt_precision_check,
 * mt_bf16_native, mt_bf16_fallback).
 */
#include "backend/cpu_impl.h"

#include <stdlib.h>

#define F32(t) ((float *)(t)->data)

struct mt_backend_plans {
    mt_bf16_engine *eng;
    mt_bf16_gemm  **plans;  int n, cap;   /* each its own allocation: calls point at them */
};

mt_status mt__cpu_plans_create(const mt_op_env *env, mt_backend_plans **out) {
    *out = NULL;
    mt_status s = mt__bf16_available();   /* without oneDNN: how to get it */
    if (s != MT_OK) return s;
    mt_backend_plans *set = calloc(1, sizeof *set);
    if (!set) return mt_fail(MT_ENOMEM, "out of memory for the bf16 plans");
    if ((s = mt__bf16_engine_create(mt_pool_size(env->pool), &set->eng)) != MT_OK) {
        free(set);
        return s;
    }
    *out = set;
    return MT_OK;
}

mt_status mt__cpu_plan_matmul(mt_backend_plans *set, const mt_op_call *call,
                              const mt_product_operands *ops, const void **plan,
                              size_t *ws_bytes) {
    *plan = NULL;
    *ws_bytes = 0;
    if (set->n == set->cap) {
        int cap = set->cap ? 2 * set->cap : 16;
        mt_bf16_gemm **p2 = realloc(set->plans, (size_t)cap * sizeof *p2);
        if (!p2) return mt_fail(MT_ENOMEM, "out of memory for the bf16 plans");
        set->plans = p2;
        set->cap = cap;
    }
    mt_bf16_gemm *p = calloc(1, sizeof *p);
    if (!p) return mt_fail(MT_ENOMEM, "out of memory for a bf16 plan");
    set->plans[set->n++] = p;   /* the set's from here, freed with it even if planning fails */
    p->a16 = ops->copy16[0];
    p->b16 = ops->copy16[1];
    p->a_is16 = ops->is16[0];
    p->b_is16 = ops->is16[1];
    bool ta, tb;
    int64_t M, N, K;
    mt__product_shape(call, &ta, &tb, &M, &N, &K);
    /* an accumulating call may also run as the first (=) */
    mt_status s = mt__bf16_gemm_plan(set->eng, ta, tb, M, N, K, call->acc, p);
    if (s != MT_OK) return s;
    *ws_bytes = mt__bf16_ws_elems(p) * sizeof(uint16_t);
    *plan = p;
    return MT_OK;
}

void mt__cpu_plans_workspace(mt_backend_plans *set, void *ws) {
    for (int i = 0; i < set->n; i++) set->plans[i]->ws = ws;
}

void mt__cpu_plans_free(mt_backend_plans *set) {
    if (!set) return;
    for (int i = 0; i < set->n; i++) {
        mt__bf16_gemm_free(set->plans[i]);
        free(set->plans[i]);
    }
    free(set->plans);
    mt__bf16_engine_free(set->eng);
    free(set);
}

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
    mt__bf16_gemm_run16(env, c->plan, F32(c->in[0]), bf16_operand(c->in[0]), F32(c->in[1]),
                        bf16_operand(c->in[1]), bias, F32(c->out), acc);
}

/* ---- backend.h: whether this build and CPU run bf16 products ------------ */

mt_status mt_precision_check(mt_precision p) {
    return p == MT_PRECISION_BF16 ? mt__bf16_available() : MT_OK;
}

bool mt_bf16_native(void) { return mt__bf16_native(); }
bool mt_bf16_fallback(void) { return mt__bf16_fallback(); }
