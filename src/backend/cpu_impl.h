/*
 * cpu_impl.h — what the CPU backend's files share (internal): its table is
 * backend_cpu.c's, its bf16 products cpu_bf16.c's (on oneDNN, bf16_impl.h).
 */
#ifndef MT_BACKEND_CPU_IMPL_H
#define MT_BACKEND_CPU_IMPL_H

#include "backend/backend_impl.h"
#include "backend/bf16_impl.h"

/* Runs a call planned as a bf16 product (MATMUL, GEMM or LINEAR with
 * call->bf16 set): bit for bit what the op table's run of it was before the
 * table left bf16 to the backend. */
void mt__cpu_run_product(const mt_op_env *env, const mt_op_call *call);

#endif
