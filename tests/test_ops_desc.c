/*
 * test_ops_desc.c — every op's descriptor is complete: walks every op kind
 * from 0 to MT_OP_COUNT-1 and fails naming the op and the member that is
 * missing, in what it is (ops/op_table.c: name, arity, cost class, cost),
 * in the CPU backend's kernel of it (backend/cpu_kernels.c: run, scratch;
 * its scratch on the caller exactly for the ops that communicate, which
 * bf16 storage reads as "a collective's output") and in the graph half
 * (graph/op_desc.c: role, and the gradient
 * rule, sharding rule, lowering, remat class and communication class the
 * role requires or forbids). Then: the names are unique, so a listing names
 * an op by its descriptor, never by its place in the enum; the sharding
 * dispatch checks the arity the descriptor gives; a compiled program lists
 * every node under its op's name; an op whose rule asks for moves the
 * partitioner's generic order cannot lower (inside the op, or on a linear's
 * result before its bias) names a hook of its own; and linear's hook, run on
 * recording stand-ins for the partitioner's services, calls the steps a
 * hand-written list gives (late bias, sequence parallelism's scatter).
 * The tables are generated from ops_impl.h's MT_OP_LIST: each line's enum
 * value indexes its own named halves, and rope, the op in files of its own,
 * reads as its old lines did.
 * The planner classes every op as the name lists it used before op
 * descriptors had a cost class (kept here as the reference).
 * tests/test_lower_hooks.sh checks that the partitioner's node loop
 * (src/partition/node.c) names no op.
 */
#include "harness.h"
#include "meshtrain.h"
#include "backend/cpu_impl.h"
#include "graph/op_desc.h"
#include "graph/shard_rules.h"
#include "plan/plan_impl.h"

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
        const mt_op_kernel *k = mt__cpu_kernel((mt_op)op);
        MT_CHECK(d->name && d->name[0], "op %d: op_table.c has no name (a missing entry?)", op);
        MT_CHECK(k && k->run, "op %d '%s': the CPU has no kernel run", op, op_name(op));
        MT_CHECK(d->cost, "op %d '%s': op_table.c has no cost", op, op_name(op));
        MT_CHECK(d->min_in >= 1 && d->min_in <= d->max_in && d->max_in <= MT_MAX_INPUTS,
                 "op %d '%s': op_table.c's arity %d to %d is not within 1 to %d", op,
                 op_name(op), d->min_in, d->max_in, MT_MAX_INPUTS);
        MT_CHECK(!k->scratch_caller || k->scratch,
                 "op %d '%s': scratch_caller without a scratch function", op, op_name(op));
        mt_op_comm comm = mt__op_gdesc((mt_op)op)->comm;
        bool communicates = comm == MT_COMM_COLL_OUT || comm == MT_COMM_COLL_IN ||
                            comm == MT_COMM_RING_GATHER || comm == MT_COMM_RING_SCATTER ||
                            comm == MT_COMM_MOE_EXCHANGE;
        MT_CHECK(k->scratch_caller == communicates, "op %d '%s': its kernel's scratch is %s the "
                 "caller's, but it %s communicate", op, op_name(op),
                 k->scratch_caller ? "" : "not", communicates ? "does" : "does not");
        MT_CHECK(d->cost_class > MT_COST_UNSET && d->cost_class <= MT_COST_COLLECTIVE,
                 "op %d '%s': op_table.c gives no cost class (product, attention, vector or "
                 "collective): the planner would not know how to time it", op, op_name(op));
    }
}

/* The planner's classes before op descriptors had a cost class: a list of
 * names (plan/program.c until issue 38), kept here as the reference. */
static mt__plan_node_class old_class_of(const char *op, const mt_tensor *out, double *seq) {
    static const char *const MATMUL_OPS[] = {
        "attention", "attention_gqa", "attention_bwd", "gqa_bwd_qk", "gqa_bwd_v",
        "matmul", "linear", "gemm", "cm_wgrad",
        "moe_experts", "moe_experts_bwd_x", "moe_experts_bwd_w",   /* issue 42's */
    };
    *seq = 0;
    for (int i = 0; i < 12; i++)
        if (strcmp(op, MATMUL_OPS[i]) == 0) {
            if (i < 5 && mt_tensor_ndim(out) >= 3) *seq = (double)mt_tensor_dim(out, 1);
            return MT__PN_MATMUL;
        }
    return MT__PN_VECTOR;
}

/* Every op's class, as the planner reads it from the descriptor, is the
 * old name list's, and so is attention's sequence length: the same plans. */
MT_TEST(ops_planner_classes_are_the_name_lists) {
    mt_graph *g = mt_graph_create();
    int64_t s3[3] = {2, 7, 4}, s2[2] = {14, 4};
    mt_tensor *outs[2] = {mt_input(g, "btc", MT_F32, 3, s3), mt_input(g, "rows", MT_F32, 2, s2)};
    int products = 0, attention = 0;
    for (int op = 0; op < MT_OP_COUNT; op++)
        for (int k = 0; k < 2; k++) {
            mt_node_info in = {.op = op_name(op), .out = outs[k]};
            double seq_new = -1, seq_old = -1;
            mt__plan_node_class got = mt__plan_class_of(&in, &seq_new);
            mt__plan_node_class want = old_class_of(in.op, outs[k], &seq_old);
            MT_CHECK(got == want, "op '%s': the planner classes it %d, the name list %d",
                     in.op, (int)got, (int)want);
            MT_CHECK(seq_new == seq_old, "op '%s' on a %d-d output: sequence %g, want %g",
                     in.op, mt_tensor_ndim(outs[k]), seq_new, seq_old);
            if (k == 0) {
                products += got == MT__PN_MATMUL;
                attention += seq_new == 7;
            }
        }
    /* the counts of the list: 12 products, 5 of them attention's */
    MT_CHECK(products == 12 && attention == 5, "%d products, %d attention; want 12 and 5",
             products, attention);
    double seq = -1;
    mt_node_info unknown = {.op = "no_such_op", .out = outs[0]};
    MT_CHECK(mt__plan_class_of(&unknown, &seq) == MT__PN_VECTOR && seq == 0,
             "an op the table does not know is vector work");
    mt_graph_free(g);
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
        MT_CHECK(!global || d->lower_moves, "op %d '%s' (%s): no lowering with moves (its own "
                 "hook or mt__lower_moves_generic)", op, n, role);
        MT_CHECK(global || !d->lower_moves, "op %d '%s' (%s): only a global op has a lowering "
                 "with moves", op, n, role);
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

/* The tables are the list: every MT_OP_LIST line's enum value indexes its own
 * named halves (mt__opdef_<name>, mt__gop_<name>, wherever they are
 * defined), whose name is the line's, and the list has MT_OP_COUNT lines in
 * the enum's order. A half left out does not link; one given another op's
 * line fails here. */
MT_TEST(ops_tables_are_the_list) {
    int n = 0;
#define CHECK_LINE_(N_, n_)                                                           \
    do {                                                                              \
        MT_CHECK(MT_OP_##N_ == n, "MT_OP_LIST line %d '%s' is enum value %d", n, #n_, \
                 (int)MT_OP_##N_);                                                    \
        MT_CHECK(mt__op_def(MT_OP_##N_) == &mt__opdef_##n_,                           \
                 "op '%s': mt__op_def is not mt__opdef_%s", #n_, #n_);                \
        MT_CHECK(mt__op_gdesc(MT_OP_##N_) == &mt__gop_##n_,                           \
                 "op '%s': mt__op_gdesc is not mt__gop_%s", #n_, #n_);                \
        MT_CHECK(strcmp(mt__opdef_##n_.name, #n_) == 0,                               \
                 "op '%s': its kernel half is named '%s'", #n_, mt__opdef_##n_.name); \
        MT_CHECK(mt__op_def_named(#n_) == &mt__opdef_##n_,                            \
                 "mt__op_def_named(\"%s\") is not its descriptor", #n_);              \
        n++;                                                                          \
    } while (0);
    MT_OP_LIST(CHECK_LINE_)
#undef CHECK_LINE_
    MT_CHECK(n == MT_OP_COUNT, "MT_OP_LIST has %d lines, MT_OP_COUNT is %d", n, MT_OP_COUNT);
}

/* The worked example of an op in files of its own (docs/extending.md): rope's
 * halves are ops/rope.c's and graph/op_rope.c's, and read as the lines they
 * replaced in op_table.c and op_desc.c (vector work, recomputed, a generic
 * lowering; its backward one input, no rules). */
MT_TEST(ops_rope_in_its_own_files) {
    const mt_op_def *k = mt__op_def(MT_OP_ROPE), *kb = mt__op_def(MT_OP_ROPE_BWD);
    const mt_op_kernel *r = mt__cpu_kernel(MT_OP_ROPE), *rb = mt__cpu_kernel(MT_OP_ROPE_BWD);
    MT_CHECK(k->min_in == 1 && k->max_in == 1 && k->cost_class == MT_COST_VECTOR && k->cost &&
             r == &mt__kernel_rope && r->run && !r->scratch && !r->scratch_caller,
             "rope's kernel half");
    MT_CHECK(kb->min_in == 1 && kb->max_in == 1 && kb->cost_class == MT_COST_VECTOR &&
             rb == &mt__kernel_rope_bwd && rb->run == r->run && kb->cost == k->cost &&
             !rb->scratch, "rope_bwd's kernel half");
    const mt_op_gdesc *g = mt__op_gdesc(MT_OP_ROPE), *gb = mt__op_gdesc(MT_OP_ROPE_BWD);
    MT_CHECK(g->role == MT_ROLE_GLOBAL && g->grad && g->shard && g->lower &&
             g->lower_moves == mt__lower_moves_generic && g->recomp == MT_RECOMP_LOCAL &&
             g->comm == MT_COMM_NONE && !g->bf16_product, "rope's graph half");
    MT_CHECK(gb->role == MT_ROLE_BACKWARD && !gb->grad && !gb->shard && !gb->lower &&
             gb->recomp == MT_RECOMP_NEVER && gb->comm == MT_COMM_NONE, "rope_bwd's graph half");
    /* its cost, as op_cost.c gave it: 3 FLOPs an element and 40 a (t, pair) */
    mt_graph *gr = mt_graph_create();
    int64_t sh[3] = {2, 5, 8};
    mt_tensor *x = mt_input(gr, "x", MT_F32, 3, sh);
    mt_op_call c = {.op = MT_OP_ROPE, .n_in = 1, .in = {x}, .out = x,
                    .p.rope = {.B = 2, .T = 5, .NH = 2, .HS = 4, .theta = 10000.0f}};
    double fl = 0, by = 0;
    k->cost(&c, &fl, &by);
    MT_CHECK(fl == 3 * 80 + 40 * 5 * 2 && by == 8 * 80, "rope's cost %g FLOPs %g bytes", fl, by);
    c.acc = true;
    kb->cost(&c, &fl, &by);
    MT_CHECK(by == 12 * 80, "rope_bwd accumulating moves %g bytes, want %d", by, 12 * 80);
    mt_graph_free(gr);
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

/* ---- lowering hooks ------------------------------------------------------- */

/* Rules that ask for a move inside the op or on its result (a probe each:
 * the op and input types that make its rule ask for one): the generic order
 * refuses the first and would add a linear's bias on every device before
 * the second, so each op here must name a hook of its own. */
MT_TEST(ops_special_moves_have_hooks) {
    static const struct {
        mt_op op;
        int n_in;
        const char *in[3];
        mt_lower_moves_fn hook;
    } probes[] = {
        /* w split over C: the product is a partial sum, reduced before the bias */
        {MT_OP_LINEAR, 3, {"f32[4,8@x]", "f32[6,8@x]", "f32[6]"}, mt__lower_moves_linear},
        /* logits split over V: the row statistics are all-reduced inside */
        {MT_OP_CROSS_ENTROPY, 2, {"f32[4,8@x]", "i32[4]"}, mt__lower_moves_cross_entropy},
    };
    mt_mesh *m = NULL;
    MT_CHECK_OK(mt_mesh_create("x=2", 2, &m));
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        mt_graph *g = mt_graph_create();
        mt_type in[3];
        mt_tensor *t[3];
        for (int k = 0; k < probes[i].n_in; k++) {
            MT_CHECK_OK(mt_type_parse(m, probes[i].in[k], &in[k]));
            char name[16];
            snprintf(name, sizeof name, "t%d", k);
            t[k] = mt_input(g, name, in[k].dtype, in[k].ndim, in[k].shape);
        }
        mt_tensor *out = probes[i].op == MT_OP_LINEAR ? mt_linear(g, t[0], t[1], t[2])
                       : mt_cross_entropy(g, t[0], t[1], 8, 1.0f);
        MT_CHECK(out, "probe %zu: %s", i, mt_graph_errmsg(g));
        const mt_op_call *c = &g->nodes[g->n_nodes - 1].call;
        mt_shard_result r;
        MT_CHECK_OK(mt__shard_rule(m, c, in, MT_SHARD_AUTO, &r));
        bool special = false;
        for (int k = 0; k < r.n_moves; k++) special |= r.moves[k].operand < 0;
        const char *n = op_name(probes[i].op);
        MT_CHECK(special, "probe of '%s': its rule asks for no move inside or on the result; "
                 "update the probe", n);
        MT_CHECK(mt__op_gdesc(probes[i].op)->lower_moves == probes[i].hook,
                 "op '%s': its rule moves data inside or after it, but its descriptor does not "
                 "name its own lowering hook", n);
        mt_graph_free(g);
    }
    mt_mesh_free(m);
}

/* Stand-ins for the partitioner's services: each records its call in
 * `log` and does what a hand count says the partitioner would. */
typedef struct {
    mt_graph *g;
    char      log[512];
    bool      scatter;   /* constraint_scatter says yes */
} fake;

static void note(fake *f, const char *fmt, int v) {
    size_t n = strlen(f->log);
    snprintf(f->log + n, sizeof f->log - n, fmt, v);
}

static mt_status f_operand(void *ctx, mt_lower_step *st, int skip) {
    note(ctx, "operand(%d) ", skip);
    while (st->next < st->rule->n_moves && st->rule->moves[st->next].operand >= 0) st->next++;
    return MT_OK;
}
static mt_status f_inside(void *ctx, mt_lower_step *st, bool accept) {
    (void)st;
    note(ctx, "inside(%d) ", accept);
    return MT_OK;
}
static mt_status f_pvary_inputs(void *ctx, mt_lower_step *st) {
    note(ctx, "pvary_inputs(%d) ", st->n_in);
    return MT_OK;
}
static mt_status f_lower(void *ctx, mt_lower_step *st) {
    fake *f = ctx;
    note(f, "lower(%d) ", st->n_in);
    st->out = mt_linear(f->g, st->in[0], st->in[1], st->n_in > 2 ? st->in[2] : NULL);
    st->type = st->rule->result;
    return MT_OK;
}
static mt_status f_result(void *ctx, mt_lower_step *st) {
    note(ctx, "result ", 0);
    st->next = st->rule->n_moves;
    return MT_OK;
}
static mt_status f_constrain(void *ctx, mt_lower_step *st) {
    (void)st;
    note(ctx, "constrain ", 0);
    return MT_OK;
}
static mt_tensor *f_move(void *ctx, mt_tensor *x, const mt_move *mv, uint32_t *vary) {
    fake *f = ctx;
    if (mv->kind == MT_MOVE_ALL_REDUCE) *vary &= ~mv->axes;   /* the sum is the same everywhere */
    note(f, mv->kind == MT_MOVE_ALL_REDUCE ? "all-reduce " : mv->kind == MT_MOVE_REDUCE_SCATTER
                                                                 ? "reduce-scatter "
                                                                 : "move%d ", mv->kind);
    /* a stand-in tensor of the moved shape */
    int64_t shape[MT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    if (mv->kind == MT_MOVE_REDUCE_SCATTER) shape[mv->dim] /= 2;
    return mt_input(f->g, "moved", MT_F32, x->ndim, shape);
}
static mt_tensor *f_pvary(void *ctx, const mt_tensor *global_in, mt_tensor *x, uint32_t vary,
                          uint32_t want) {
    (void)global_in, (void)vary;
    note(ctx, "pvary(%d) ", (int)want);
    return x;
}
static bool f_scatter(void *ctx, const mt_lower_step *st, const mt_type *t, uint32_t axes,
                      mt_move *mv) {
    fake *f = ctx;
    (void)st;
    if (!f->scatter) return false;
    *mv = (mt_move){.kind = MT_MOVE_REDUCE_SCATTER, .operand = MT_MOVE_RESULT, .dim = 1,
                    .dim2 = -1, .axes = axes, .before = *t, .after = *t};
    mv->after.sharding.partial_axes = 0;
    mv->after.sharding.dim_axes[1] = axes;
    return true;
}
static mt_axes f_axes(void *ctx, uint32_t bits) {
    (void)ctx, (void)bits;
    return (mt_axes){0};
}
static mt_status f_failed(void *ctx, const mt_lower_step *st) {
    (void)ctx, (void)st;
    return MT_EINTERNAL;
}

/* Runs linear's hook on y (4,8,6) = x (4,8,16) · w (6,16)ᵀ + b (6) with the
 * rule result `r`; returns the step. */
static mt_lower_step run_linear_hook(fake *f, const mt_shard_result *r, int n_in) {
    int64_t xs[3] = {4, 8, 16}, ws[2] = {6, 16}, bs[1] = {6};
    mt_tensor *x = mt_input(f->g, "x", MT_F32, 3, xs), *w = mt_input(f->g, "w", MT_F32, 2, ws);
    mt_tensor *b = mt_input(f->g, "b", MT_F32, 1, bs);
    mt_tensor *y = mt_linear(f->g, x, w, n_in > 2 ? b : NULL);
    MT_CHECK(y, "%s", mt_graph_errmsg(f->g));
    mt_lower_step st = {.call = &f->g->nodes[f->g->n_nodes - 1].call, .rule = r, .n_in = n_in,
                        .in = {x, w, b}, .vary = {1, 2, 0}};
    const mt_lower_services sv = {
        .ctx = f, .operand_moves = f_operand, .inside_moves = f_inside,
        .pvary_inputs = f_pvary_inputs, .lower = f_lower, .result_moves = f_result,
        .constrain = f_constrain, .move = f_move, .pvary = f_pvary,
        .constraint_scatter = f_scatter, .axes = f_axes, .failed = f_failed};
    MT_CHECK_OK(mt__lower_moves_linear(f->g, &st, &sv));
    MT_CHECK(st.next == r->n_moves, "the hook left moves %d to %d", st.next, r->n_moves);
    return st;
}

/* Hand-written: the rule's result f32[4,8,6]{U:y} all-reduced over y (bit
 * 2); x varies over bit 1, w over bit 2, b over none. */
MT_TEST(ops_linear_hook_late_bias_and_scatter) {
    mt_type partial = {.dtype = MT_F32, .ndim = 3, .shape = {4, 8, 6}};
    partial.sharding.partial_axes = 2;
    mt_type reduced = partial;
    reduced.sharding.partial_axes = 0;
    const mt_shard_result r = {
        .result = reduced, .n_moves = 1,
        .moves = {{.kind = MT_MOVE_ALL_REDUCE, .operand = MT_MOVE_RESULT, .dim = -1, .dim2 = -1,
                   .axes = 2, .before = partial, .after = reduced}}};
    /* late bias: the product without it (2 inputs), the all-reduce, then the
     * bias with a pvary over what the reduced product varies over (x's bit
     * 1: the sum is the same over bit 2), added last */
    fake f = {.g = mt_graph_create()};
    mt_lower_step st = run_linear_hook(&f, &r, 3);
    MT_CHECK(strcmp(f.log, "operand(-1) inside(0) pvary_inputs(2) lower(2) all-reduce pvary(1) ")
             == 0, "late bias: the steps were '%s'", f.log);
    const mt_op_call *last = &f.g->nodes[f.g->n_nodes - 1].call;
    MT_CHECK(last->op == MT_OP_ADD && st.out == last->out && strcmp(last->in[1]->name, "b") == 0,
             "late bias: the result is not the moved product plus b (last node '%s')",
             op_name(last->op));
    MT_CHECK(st.out_vary == 1, "late bias: the result varies over %#x, want 0x1", st.out_vary);
    mt_graph_free(f.g);
    /* a constraint splitting T over bit 2 (sequence parallelism): the
     * all-reduce becomes a reduce-scatter onto T, which the result's type
     * and vary then split over bit 2 */
    f = (fake){.g = mt_graph_create(), .scatter = true};
    st = run_linear_hook(&f, &r, 3);
    MT_CHECK(strcmp(f.log, "operand(-1) inside(0) pvary_inputs(2) lower(2) reduce-scatter "
                           "pvary(3) ") == 0, "sequence parallel: the steps were '%s'", f.log);
    MT_CHECK(st.type.sharding.dim_axes[1] == 2 && st.type.sharding.partial_axes == 0 &&
             st.out_vary == 3 && st.out->shape[1] == 4,
             "sequence parallel: the result is not T split over bit 2 (dim 1 axes %#x, partial "
             "%#x, vary %#x, local T %lld)", st.type.sharding.dim_axes[1],
             st.type.sharding.partial_axes, st.out_vary, (long long)st.out->shape[1]);
    mt_graph_free(f.g);
    /* no move on the result: the bias stays in the product (the hook runs
     * the result moves itself: none), and a kept partial sum is the
     * generic step's */
    const mt_shard_result none = {.result = partial};
    f = (fake){.g = mt_graph_create()};
    st = run_linear_hook(&f, &none, 3);
    MT_CHECK(strcmp(f.log, "operand(-1) inside(0) pvary_inputs(3) lower(3) constrain ")
             == 0, "no result move: the steps were '%s'", f.log);
    MT_CHECK(f.g->nodes[f.g->n_nodes - 1].call.op == MT_OP_LINEAR, "no result move: the last "
             "node is not the linear");
    mt_graph_free(f.g);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
