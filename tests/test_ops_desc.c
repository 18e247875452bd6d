/*
 * test_ops_desc.c — every op's descriptor is complete: walks every op kind
 * from 0 to MT_OP_COUNT-1 and fails naming the op and the member that is
 * missing, in the kernel half (ops/op_table.c: name, arity, run, cost,
 * scratch) and in the graph half (graph/op_desc.c: role, and the gradient
 * rule, sharding rule, lowering, remat class and communication class the
 * role requires or forbids). Then: the names are unique, so a listing names
 * an op by its descriptor, never by its place in the enum; the sharding
 * dispatch checks the arity the descriptor gives; a compiled program lists
 * every node under its op's name.
 */
#include "harness.h"
#include "meshtrain.h"
#include "graph/op_desc.h"
#include "graph/shard_rules.h"

/* The op's name for messages, even when the descriptor has none. */
static const char *op_name(int op) {
    const char *n = mt__op_def((mt_op)op)->name;
    return n && n[0] ? n : "(no name)";
}

static const char *role_name(mt_op_role r) {
    switch (r) {
    case MT_ROLE_GLOBAL: return "global";
    case MT_ROLE_LOCAL: return "local";
    case MT_ROLE_BACKWARD: return "backward";
    case MT_ROLE_UNSET: break;
    }
    return "unset";
}

MT_TEST(ops_kernel_half_complete) {
    for (int op = 0; op < MT_OP_COUNT; op++) {
        const mt_op_def *d = mt__op_def((mt_op)op);
        MT_CHECK(d->name && d->name[0], "op %d: op_table.c has no name (a missing entry?)", op);
        MT_CHECK(d->run, "op %d '%s': op_table.c has no run", op, op_name(op));
        MT_CHECK(d->cost, "op %d '%s': op_table.c has no cost", op, op_name(op));
        MT_CHECK(d->min_in >= 1 && d->min_in <= d->max_in && d->max_in <= MT_MAX_INPUTS,
                 "op %d '%s': op_table.c's arity %d to %d is not within 1 to %d", op,
                 op_name(op), d->min_in, d->max_in, MT_MAX_INPUTS);
        MT_CHECK(!d->scratch_caller || d->scratch,
                 "op %d '%s': scratch_caller without a scratch function", op, op_name(op));
    }
}

MT_TEST(ops_graph_half_complete) {
    for (int op = 0; op < MT_OP_COUNT; op++) {
        const mt_op_gdesc *d = mt__op_gdesc((mt_op)op);
        const char *n = op_name(op), *role = role_name(d->role);
        MT_CHECK(d->role != MT_ROLE_UNSET, "op %d '%s': op_desc.c has no role (a missing line?)",
                 op, n);
        MT_CHECK(d->recomp != MT_RECOMP_UNSET, "op %d '%s': op_desc.c has no remat class", op, n);
        MT_CHECK(d->comm != MT_COMM_UNSET, "op %d '%s': op_desc.c has no communication class",
                 op, n);
        bool forward = d->role != MT_ROLE_BACKWARD, global = d->role == MT_ROLE_GLOBAL;
        MT_CHECK(!forward || d->grad, "op %d '%s' (%s): no gradient rule", op, n, role);
        MT_CHECK(forward || !d->grad, "op %d '%s' (%s): a backward op has no gradient rule",
                 op, n, role);
        MT_CHECK(!global || d->shard, "op %d '%s' (%s): no sharding rule", op, n, role);
        MT_CHECK(global || !d->shard, "op %d '%s' (%s): only a global op has a sharding rule",
                 op, n, role);
        MT_CHECK(!global || d->lower, "op %d '%s' (%s): no lowering", op, n, role);
        MT_CHECK(global || !d->lower, "op %d '%s' (%s): only a global op has a lowering", op,
                 n, role);
        MT_CHECK(global || d->recomp == MT_RECOMP_NEVER,
                 "op %d '%s' (%s): only a global op may be recomputed", op, n, role);
        MT_CHECK(mt__grad_rule((mt_op)op) == d->grad, "op %d '%s': mt__grad_rule is not the "
                 "descriptor's", op, n);
        /* bf16 precision casts a product's two operands (and keeps a bias f32) */
        MT_CHECK(!d->bf16_product || (mt__op_def((mt_op)op)->min_in >= 2 &&
                                      mt__op_def((mt_op)op)->max_in <= 3),
                 "op %d '%s': a bf16 product takes two operands and maybe a bias", op, n);
    }
}

/* A listing names ops by their descriptors' names: they must be unique. */
MT_TEST(ops_names_unique) {
    for (int a = 0; a < MT_OP_COUNT; a++)
        for (int b = a + 1; b < MT_OP_COUNT; b++)
            MT_CHECK(strcmp(op_name(a), op_name(b)) != 0, "ops %d and %d are both named '%s'",
                     a, b, op_name(a));
}

/* The sharding dispatch takes the arity from the descriptor: one input too
 * few or too many is refused naming the op, before the rule runs. */
MT_TEST(ops_shard_rule_checks_arity) {
    mt_mesh *m = NULL;
    MT_CHECK_OK(mt_mesh_create("x=2", 2, &m));
    mt_type t;
    MT_CHECK_OK(mt_type_parse(m, "f32[4,4]", &t));
    mt_type in[MT_MAX_INPUTS + 1];
    for (int k = 0; k <= MT_MAX_INPUTS; k++) in[k] = t;
    for (int op = 0; op < MT_OP_COUNT; op++) {
        const mt_op_def *d = mt__op_def((mt_op)op);
        mt_shard_result r;
        mt_op_call call = {.op = (mt_op)op};
        if (!mt__op_gdesc((mt_op)op)->shard) {
            call.n_in = d->min_in;
            MT_CHECK_FAILS(mt__shard_rule(m, &call, in, MT_SHARD_AUTO, &r), MT_EINVAL,
                           op_name(op), "has no sharding rule");
            continue;
        }
        call.n_in = d->min_in - 1;
        MT_CHECK_FAILS(mt__shard_rule(m, &call, in, MT_SHARD_AUTO, &r), MT_EINVAL, op_name(op),
                       "the op takes");
        if (d->max_in < MT_MAX_INPUTS) {
            call.n_in = d->max_in + 1;
            MT_CHECK_FAILS(mt__shard_rule(m, &call, in, MT_SHARD_AUTO, &r), MT_EINVAL,
                           op_name(op), "the op takes");
        }
    }
    mt_mesh_free(m);
}

/* A compiled program lists each node under a descriptor's name. */
MT_TEST(ops_listing_names) {
    mt_graph *g = mt_graph_create();
    int64_t xs[2] = {4, 3}, ws[2] = {3, 2}, ys[2] = {4, 2};
    mt_tensor *x = mt_input(g, "x", MT_F32, 2, xs);
    mt_tensor *y = mt_input(g, "y", MT_F32, 2, ys);
    mt_tensor *w = mt_param(g, "w", 2, ws, (mt_init){MT_INIT_NORMAL, 0.1f});
    mt_tensor *loss = mt_mse(g, mt_gelu(g, mt_matmul(g, x, w, false, false)), y, 1.0f);
    mt_compile_opts opts = {.seed = 1};
    MT_CHECK_OK(mt_graph_compile(g, loss, &opts));
    static const char *const WANT[] = {"matmul", "gelu", "mse", "mse_bwd", "gelu_bwd", "gemm"};
    bool seen[sizeof WANT / sizeof WANT[0]] = {0};
    for (int i = 0; i < mt_graph_n_nodes(g); i++) {
        mt_node_info info;
        MT_CHECK_OK(mt_graph_node(g, i, &info));
        int found = -1;
        for (int op = 0; op < MT_OP_COUNT && found < 0; op++)
            if (strcmp(info.op, op_name(op)) == 0) found = op;
        MT_CHECK(found >= 0, "node %d is listed as '%s', no op's name", i, info.op);
        for (size_t k = 0; k < sizeof WANT / sizeof WANT[0]; k++)
            seen[k] |= strcmp(info.op, WANT[k]) == 0;
    }
    for (size_t k = 0; k < sizeof WANT / sizeof WANT[0]; k++)
        MT_CHECK(seen[k], "the program lists no '%s' node", WANT[k]);
    mt_graph_free(g);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
