/*
 * cpu_impl.h — what the CPU backend's files share (internal): its table is
 * backend_cpu.c's, its bf16 products cpu_bf16.c's (on oneDNN, bf16_impl.h).
 */
#ifndef MT_BACKEND_CPU_IMPL_H
#define MT_BACKEND_CPU_IMPL_H

#include "backend/backend_impl.h"
#include "backend/bf16_impl.h"

/* The table's bf16 product members (backend_impl.h says what each does):
 * a set is a oneDNN engine for env's pool and its plans, a plan an
 * mt_bf16_gemm. plans_create fails with MT_EUNSUPPORTED, saying how to get
 * oneDNN, in a build without it. */
mt_status mt__cpu_plans_create(const mt_op_env *env, mt_backend_plans **out);
mt_status mt__cpu_plan_matmul(mt_backend_plans *set, const mt_op_call *call,
                              const mt_product_operands *ops, const void **plan,
                              size_t *ws_bytes);
void      mt__cpu_plans_workspace(mt_backend_plans *set, void *ws);
void      mt__cpu_plans_free(mt_backend_plans *set);

/* cpu_kernels.c: the CPU's kernel of op (ops' mt__kernel_<name>), and the
 * table's scratch member from it. */
const mt_op_kernel *mt__cpu_kernel(mt_op op);
size_t              mt__cpu_scratch(const mt_op_call *call, bool *caller);

/* Runs a call planned as a bf16 product (MATMUL, GEMM or LINEAR with
 * call->plan set): bit for bit what the op table's run of it was before the
 * table left bf16 to the backend. */
void      mt__cpu_run_product(const mt_op_env *env, const mt_op_call *call);

#endif
