/*
 * shard_rules.c — the dispatch of a call to its op's sharding rule, through
 * the ops' descriptors (op_desc.c), and the public mt_shard_rule() by name.
 * The rules are shard_rules_ops.c's and shard_rules_nn.c's, written in the
 * move algebra of shard_moves.c.
 */
#include "graph/op_desc.h"
#include "graph/shard_rules_impl.h"

#include <stdio.h>
#include <string.h>

/* ======================================================================== */
/* Dispatch                                                                  */
/* ======================================================================== */

mt_status mt__shard_rule(const mt_mesh *mesh, const mt_op_call *call, const mt_type *in,
                         mt_shard_mode mode, mt_shard_result *out) {
    memset(out, 0, sizeof *out);
    if (call->op >= MT_OP_COUNT)
        return mt_fail(MT_EINVAL, "op %d has no sharding rule", (int)call->op);
    const mt_op_def *def = mt__op_def(call->op);
    mt_shard_fn rule = mt__op_gdesc(call->op)->shard;
    if (!rule) return mt_fail(MT_EINVAL, "op '%s' has no sharding rule", def->name);
    if (call->n_in < def->min_in || call->n_in > def->max_in) {
        if (def->min_in == def->max_in)
            return mt_fail(MT_EINVAL, "%s: %d inputs; the op takes %d", def->name, call->n_in,
                           def->min_in);
        return mt_fail(MT_EINVAL, "%s: %d inputs; the op takes %d to %d", def->name, call->n_in,
                       def->min_in, def->max_in);
    }
    mt_srule r = {.mesh = mesh, .mode = mode, .op = def->name, .out = out};
    mt_type t[MT_MAX_INPUTS];
    for (int k = 0; k < call->n_in; k++) t[k] = in[k];
    mt_status s = rule(&r, call, t);
    if (s != MT_OK) out->n_moves = 0;
    return s;
}

mt_status mt_shard_rule(const mt_mesh *mesh, const char *op, const mt_type *in, int n_in,
                        mt_shard_mode mode, mt_shard_result *out) {
    memset(out, 0, sizeof *out);
    static const struct { const char *name; mt_op op; } NAMED[] = {
        {"matmul", MT_OP_MATMUL}, {"add", MT_OP_ADD}, {"sub", MT_OP_SUB}, {"mul", MT_OP_MUL}};
    if (!op) op = "(null)";
    bool reshard = strcmp(op, "reshard") == 0;
    int found = -1;
    for (int k = 0; k < 4; k++)
        if (strcmp(op, NAMED[k].name) == 0) found = k;
    if (!reshard && found < 0)
        return mt_fail(MT_EINVAL, "op '%s' has no sharding rule; the rules by name are "
                       "matmul, add, sub, mul and reshard", op);
    if (n_in != 2)
        return mt_fail(MT_EINVAL, "%s takes 2 operand types, got %d", op, n_in);
    if (reshard) {
        mt_srule r = {.mesh = mesh, .mode = mode, .op = "reshard", .out = out};
        mt_status s = mt__srule_reshard(&r, in);
        if (s != MT_OK) out->n_moves = 0;
        return s;
    }
    mt_op_call call = {.op = NAMED[found].op, .n_in = 2};
    if (call.op == MT_OP_MATMUL && in[0].ndim >= 1 && in[1].ndim == 2)
        call.p.gemm = (mt_gemm_params){.ta = false, .tb = false, .K = in[0].shape[in[0].ndim - 1],
                                       .N = in[1].shape[1]};
    return mt__shard_rule(mesh, &call, in, mode, out);
}
