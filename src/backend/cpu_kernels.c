/*
 * cpu_kernels.c — how the CPU backend runs each op: its table of the ops'
 * kernels (ops_impl.h's mt_op_kernel, mt__kernel_<name>, defined beside
 * each op's mt__opdef_<name> in ops/), generated from MT_OP_LIST, and the
 * scratch a call's kernel asks for (mt_backend.scratch). What an op is
 * (name, arity, cost, cost class) is ops' table; this one is the CPU's
 * alone: another backend brings its own kernels.
 */
#include "backend/cpu_impl.h"

#define MT_KERNEL_ENTRY_(NAME, name) [MT_OP_##NAME] = &mt__kernel_##name,
static const mt_op_kernel *const kernels[MT_OP_COUNT] = {MT_OP_LIST(MT_KERNEL_ENTRY_)};
#undef MT_KERNEL_ENTRY_

const mt_op_kernel *mt__cpu_kernel(mt_op op) { return kernels[op]; }

size_t mt__cpu_scratch(const mt_op_call *call, bool *caller) {
    const mt_op_kernel *k = kernels[call->op];
    *caller = k->scratch_caller;
    return k->scratch ? k->scratch(call) : 0;
}
