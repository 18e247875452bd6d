/*
 * test_moe_rules.c — the MoE ops' sharding rule (graph/op_moe.c) against a
 * table worked out by hand on the mesh data=2,fsdp=2: for each op and
 * operand types, the result type and the moves (kind, operand, dim, axes),
 * and where the rule must refuse (explicit mode), the words of its message.
 *
 * The rule, in short: the rows (leading dims) keep operand 0's split (the
 * sorted rows' where there are, never moved), the other token operands are
 * moved to it, trailing dims and the expert weights are gathered whole (but
 * for the expert-tensor split: w's columns over axes that do not split the
 * rows, a split C leaving a partial sum, which combine passes on), the
 * router loss gathers the sequence dim and is a partial sum over the rows'
 * axes.
 */
#include "harness.h"
#include "meshtrain.h"
#include "graph/shard_rules.h"

#include <string.h>

typedef struct {
    const char *what;
    mt_op       op;
    int         n_in;
    const char *in[3];
    mt_shard_mode mode;
    const char *result;     /* NULL: refused */
    const char *moves;      /* "kind operand dim axes; ..." or a word of the message */
} rule_case;

static void moves_text(const mt_mesh *m, const mt_shard_result *r, char *buf, size_t cap) {
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < r->n_moves && off < cap; i++) {
        const mt_move *mv = &r->moves[i];
        char axes[32] = "";
        for (int a = 0; a < mt_mesh_ndim(m); a++)
            if (mv->axes & (1u << a))
                snprintf(axes + strlen(axes), sizeof axes - strlen(axes), "%s%s",
                         axes[0] ? "+" : "", mt_mesh_axis_name(m, a));
        off += (size_t)snprintf(buf + off, cap - off, "%s%s %d %d %s", i ? "; " : "",
                                mt_move_name(mv->kind), mv->operand, mv->dim, axes);
    }
}

MT_TEST(moe_rules_against_the_hand_table) {
    static const rule_case CASES[] = {
        {"dispatch: rows over fsdp pass", MT_OP_MOE_DISPATCH, 2,
         {"f32[8@fsdp,16,32]", "i32[8@fsdp,16,2]"}, MT_SHARD_AUTO,
         "f32[8@fsdp,16,2,32]", ""},
        {"dispatch: x's channels gathered", MT_OP_MOE_DISPATCH, 2,
         {"f32[8@data,16,32@fsdp]", "i32[8@data,16,2]"}, MT_SHARD_AUTO,
         "f32[8@data,16,2,32]", "all-gather 0 2 fsdp"},
        {"experts: w's expert dim gathered (fsdp)", MT_OP_MOE_EXPERTS, 3,
         {"f32[8@data,16,2,32]", "f32[4@fsdp,32,64]", "i32[8@data,16,2]"}, MT_SHARD_AUTO,
         "f32[8@data,16,2,64]", "all-gather 1 0 fsdp"},
        {"experts: the ids sliced to the sorted rows' split", MT_OP_MOE_EXPERTS, 3,
         {"f32[8@data,16,2,32]", "f32[4,32,64]", "i32[8,16,2]"}, MT_SHARD_AUTO,
         "f32[8@data,16,2,64]", "slice 2 0 data"},
        {"experts: explicit mode refuses to move the ids", MT_OP_MOE_EXPERTS, 3,
         {"f32[8@data,16,2,32]", "f32[4,32,64]", "i32[8,16,2]"}, MT_SHARD_EXPLICIT, NULL,
         "ids"},
        /* the expert-tensor split: fsdp stands for tensor, an axis the rows
           (over data) are not split over */
        {"experts: w's OC over fsdp, the result's features too", MT_OP_MOE_EXPERTS, 3,
         {"f32[8@data,16,2,32]", "f32[4,32,64@fsdp]", "i32[8@data,16,2]"}, MT_SHARD_AUTO,
         "f32[8@data,16,2,64@fsdp]", ""},
        {"experts: w's C and xs's features over fsdp, a partial sum", MT_OP_MOE_EXPERTS, 3,
         {"f32[8@data,16,2,32@fsdp]", "f32[4,32@fsdp,64]", "i32[8@data,16,2]"}, MT_SHARD_AUTO,
         "f32[8@data,16,2,64]{U:fsdp}", ""},
        {"experts: w's C over fsdp, xs's whole features sliced", MT_OP_MOE_EXPERTS, 3,
         {"f32[8@data,16,2,32]", "f32[4,32@fsdp,64]", "i32[8@data,16,2]"}, MT_SHARD_AUTO,
         "f32[8@data,16,2,64]{U:fsdp}", "slice 0 3 fsdp"},
        {"experts: explicit mode refuses to slice xs's features", MT_OP_MOE_EXPERTS, 3,
         {"f32[8@data,16,2,32]", "f32[4,32@fsdp,64]", "i32[8@data,16,2]"}, MT_SHARD_EXPLICIT,
         NULL, "features split alike"},
        {"experts: w's OC over data, which splits the rows: gathered", MT_OP_MOE_EXPERTS, 3,
         {"f32[8@data,16,2,32]", "f32[4,32,64@data]", "i32[8@data,16,2]"}, MT_SHARD_AUTO,
         "f32[8@data,16,2,64]", "all-gather 1 2 data"},
        {"combine: ys' partial sum over fsdp passes to the result", MT_OP_MOE_COMBINE, 3,
         {"f32[8@data,16,2,32]{U:fsdp}", "f32[8@data,16,2]", "i32[8@data,16,2]"},
         MT_SHARD_AUTO, "f32[8@data,16,32]{U:fsdp}", ""},
        {"gates: a partial sum over fsdp summed", MT_OP_MOE_GATES, 2,
         {"f32[8@data,16,4]{U:fsdp}", "i32[8@data,16,2]"}, MT_SHARD_AUTO, "f32[8@data,16,2]",
         "all-reduce 0 -1 fsdp"},
        {"combine: ys' channels gathered, gates and ids pass", MT_OP_MOE_COMBINE, 3,
         {"f32[8@data,16,2,32@fsdp]", "f32[8@data,16,2]", "i32[8@data,16,2]"},
         MT_SHARD_AUTO, "f32[8@data,16,32]", "all-gather 0 3 fsdp"},
        {"gates: the logits' experts gathered", MT_OP_MOE_GATES, 2,
         {"f32[8@data,16,4@fsdp]", "i32[8@data,16,2]"}, MT_SHARD_AUTO, "f32[8@data,16,2]",
         "all-gather 0 2 fsdp"},
        {"router loss: sequences whole, a partial sum over data", MT_OP_MOE_ROUTER_LOSS, 2,
         {"f32[8@data,16@fsdp,4]", "i32[8@data,16@fsdp,2]"}, MT_SHARD_AUTO,
         "f32[]{U:data}", "all-gather 0 1 fsdp; all-gather 1 1 fsdp"},
    };
    mt_mesh *m = NULL;
    MT_CHECK_OK(mt_mesh_create("data=2,fsdp=2", 4, &m));
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const rule_case *c = &CASES[i];
        mt_type in[3];
        for (int k = 0; k < c->n_in; k++) MT_CHECK_OK(mt_type_parse(m, c->in[k], &in[k]));
        mt_op_call call = {.op = c->op, .n_in = c->n_in, .p.moe = {.E = 4, .k = 2}};
        mt_shard_result r;
        mt_status s = mt__shard_rule(m, &call, in, c->mode, &r);
        if (!c->result) {
            MT_CHECK(s == MT_ESHARDING && strstr(mt_errmsg(), c->moves), "%s: %s (%s), want "
                     "a refusal naming '%s'", c->what, mt_status_name(s), mt_errmsg(), c->moves);
            continue;
        }
        MT_CHECK(s == MT_OK, "%s: %s", c->what, mt_errmsg());
        char got[128], moves[256];
        mt_type_format(m, &r.result, got, sizeof got);
        moves_text(m, &r, moves, sizeof moves);
        MT_CHECK(strcmp(got, c->result) == 0, "%s: result %s, want %s", c->what, got,
                 c->result);
        MT_CHECK(strcmp(moves, c->moves) == 0, "%s: moves '%s', want '%s'", c->what, moves,
                 c->moves);
    }
    mt_mesh_free(m);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
