/*
 * test_rules.c — tensor types read and written, and the sharding rules, each
 * against a table worked out by hand: for every op and pair of operand types
 * on the mesh x=2,y=2, the result type, the moves (kind, operand, dims, axes,
 * bytes per device) and, where the rule must refuse, the status and the words
 * its message must contain. The network ops' rules (mt__shard_rule) and
 * reshape are checked the same way on the mesh data=2,tensor=2.
 *
 * Bytes are hand-computed per device, f32: an all-gather of f32[8,4@x] to
 * f32[8,4] is 8·4·4 = 128 bytes (the output), an all-reduce of f32[4]{U:x}
 * 4·4 = 16 (the buffer), a reduce-scatter counts its input.
 */
#include "harness.h"
#include "meshtrain.h"
#include "graph/shard_rules.h"

static mt_mesh *make(const char *spec, int n) {
    mt_mesh *m = NULL;
    MT_CHECK_OK(mt_mesh_create(spec, n, &m));
    return m;
}

static mt_type parse(const mt_mesh *m, const char *text) {
    mt_type t;
    MT_CHECK_OK(mt_type_parse(m, text, &t));
    return t;
}

/* ---- moves as text: "all-gather a dim 1 over x (128)" ------------------ */

static const char *who(int operand) {
    static const char *const NAMES[] = {"a", "b", "c", "d", "e"};
    if (operand == MT_MOVE_RESULT) return "result";
    if (operand == MT_MOVE_INSIDE) return "inside";
    return operand >= 0 && operand < 5 ? NAMES[operand] : "?";
}

static void moves_text(const mt_mesh *m, const mt_shard_result *r, char *buf, size_t cap) {
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < r->n_moves && off < cap; i++) {
        const mt_move *mv = &r->moves[i];
        char axes[64] = "";
        size_t ao = 0;
        for (int a = 0; a < mt_mesh_ndim(m); a++)
            if (mv->axes & (1u << a))
                ao += (size_t)snprintf(axes + ao, sizeof axes - ao, "%s%s", ao ? "+" : "",
                                       mt_mesh_axis_name(m, a));
        char dims[32] = "";
        if (mv->kind == MT_MOVE_ALL_TO_ALL) snprintf(dims, sizeof dims, " dim %d to %d", mv->dim, mv->dim2);
        else if (mv->dim >= 0) snprintf(dims, sizeof dims, " dim %d", mv->dim);
        char bytes[32] = "";
        if (mv->kind != MT_MOVE_SLICE) snprintf(bytes, sizeof bytes, " (%lld)", (long long)mv->bytes);
        off += (size_t)snprintf(buf + off, cap - off, "%s%s %s%s over %s%s", i ? "; " : "",
                                mt_move_name(mv->kind), who(mv->operand), dims, axes, bytes);
    }
}

/* Every move's before and after agree with the chain: the first before of an
 * operand is its input type, each after is the next before. */
/* Checks one rule's outcome against its row: the failure (status, and the
 * words its message must name) when `result` is NULL, else the result type
 * and the moves as moves_text writes them. Returns whether it succeeded. */
static bool check_outcome(const mt_mesh *m, const char *what, mt_status s,
                          const mt_shard_result *r, mt_status status, const char *const *words,
                          int n_words, const char *result, const char *moves_want) {
    if (!result) {
        MT_CHECK(s == status, "%s: %s (%s), want %s", what, mt_status_name(s), mt_errmsg(),
                 mt_status_name(status));
        for (int k = 0; k < n_words && words[k]; k++)
            MT_CHECK(strstr(mt_errmsg(), words[k]), "%s: message '%s' does not name '%s'", what,
                     mt_errmsg(), words[k]);
        return false;
    }
    MT_CHECK(s == MT_OK, "%s: %s: %s", what, mt_status_name(s), mt_errmsg());
    char got[256], moves[1024];
    mt_type_format(m, &r->result, got, sizeof got);
    MT_CHECK(strcmp(got, result) == 0, "%s: result %s, want %s", what, got, result);
    moves_text(m, r, moves, sizeof moves);
    MT_CHECK(strcmp(moves, moves_want) == 0, "%s: moves '%s', want '%s'", what, moves, moves_want);
    return true;
}

static void check_chain(const mt_mesh *m, const mt_shard_result *r, const char *what) {
    for (int i = 0; i < r->n_moves; i++) {
        char b[160], a[160];
        mt_type_format(m, &r->moves[i].before, b, sizeof b);
        mt_type_format(m, &r->moves[i].after, a, sizeof a);
        MT_CHECK(b[0] == 'f' || b[0] == 'i' || b[0] == 'b', "%s: move %d has no before type", what, i);
        MT_CHECK(strcmp(a, b) != 0 || r->moves[i].kind == MT_MOVE_ALL_REDUCE,
                 "%s: move %d changes nothing (%s)", what, i, a);
    }
}

/* ---- the public rules on x=2,y=2 ---------------------------------------- */

typedef struct {
    const char   *op, *a, *b;
    mt_shard_mode mode;
    const char   *result;       /* NULL: the rule fails */
    const char   *moves;        /* "" for none */
    mt_status     status;
    const char   *words[6];     /* the message must contain each */
} rule_case;

#define A MT_SHARD_AUTO
#define E MT_SHARD_EXPLICIT
#define ES MT_ESHARDING

static const rule_case RULES[] = {
    /* matmul: no contracting split, batch and free dims keep their axes */
    {"matmul", "f32[8,4]", "f32[4,8]", A, "f32[8,8]", "", 0, {0}},
    {"matmul", "f32[8@x,2]", "f32[2,8@y]", A, "f32[8@x,8@y]", "", 0, {0}},
    {"matmul", "f32[8@x,2]", "f32[2,8@y]", E, "f32[8@x,8@y]", "", 0, {0}},
    {"matmul", "f32[4@x,8,4]", "f32[4,8@y]", E, "f32[4@x,8,8@y]", "", 0, {0}},
    /* one contracting dim split: gather it (FSDP), in both modes */
    {"matmul", "f32[8,4@x]", "f32[4,8]", A, "f32[8,8]", "all-gather a dim 1 over x (128)", 0, {0}},
    {"matmul", "f32[8,4@x]", "f32[4,8]", E, "f32[8,8]", "all-gather a dim 1 over x (128)", 0, {0}},
    {"matmul", "f32[8,4]", "f32[4@y,8]", A, "f32[8,8]", "all-gather b dim 0 over y (128)", 0, {0}},
    {"matmul", "f32[8@x,4]", "f32[4@x,8]", E, "f32[8@x,8]", "all-gather b dim 0 over x (128)", 0, {0}},
    /* both on the same axes: partial sum (auto), the four answers (explicit) */
    {"matmul", "f32[8,4@x]", "f32[4@x,8]", A, "f32[8,8]{U:x}", "", 0, {0}},
    {"matmul", "f32[8,4@x]", "f32[4@x,8]", E, NULL, NULL, ES,
     {"matmul", "f32[8,4@x]", "f32[4@x,8]", "all-reduce over x → f32[8,8]",
      "reduce-scatter over x on dim 0 → f32[8@x,8]", "reduce-scatter over x on dim 1 → f32[8,8@x]"}},
    {"matmul", "f32[8,4@x]", "f32[4@x,8]", E, NULL, NULL, ES,
     {"keep the partial sum → f32[8,8]{U:x}", "reshard", "sharding constraint"}},
    {"matmul", "f32[4@x,8,4@y]", "f32[4@y,8]", A, "f32[4@x,8,8]{U:y}", "", 0, {0}},
    /* both on different axes: gather both (auto), refuse (explicit) */
    {"matmul", "f32[8,4@x]", "f32[4@y,8]", A, "f32[8,8]",
     "all-gather a dim 1 over x (128); all-gather b dim 0 over y (128)", 0, {0}},
    {"matmul", "f32[8,4@x]", "f32[4@y,8]", E, NULL, NULL, ES,
     {"matmul", "f32[8,4@x]", "f32[4@y,8]", "different axes", "reshard"}},
    /* a result that would use one axis twice: auto gathers a's free dim
     * (sequence parallelism's gather of the rows), explicit refuses */
    {"matmul", "f32[8@x,2]", "f32[2,8@x]", A, "f32[8,8@x]", "all-gather a dim 0 over x (64)", 0, {0}},
    {"matmul", "f32[8@x,2@y]", "f32[2@y,8@x]", A, "f32[8,8@x]{U:y}", "all-gather a dim 0 over x (32)", 0, {0}},
    {"matmul", "f32[8@x,2]", "f32[2,8@x]", E, NULL, NULL, ES, {"matmul", "'x' twice", "reshard"}},
    /* partial-sum operands: linear in each */
    {"matmul", "f32[8,4]{U:x}", "f32[4,8@y]", E, "f32[8,8@y]{U:x}", "", 0, {0}},
    {"matmul", "f32[8,4]{U:x}", "f32[4,8@x]", A, NULL, NULL, ES, {"'x' twice", "f32[8,4]{U:x}"}},
    {"matmul", "f32[8,4]{U:x}", "f32[4,8]{U:y}", A, "f32[8,8]{U:x}", "all-reduce b over y (128)", 0, {0}},
    {"matmul", "f32[8,4]{U:x}", "f32[4,8]{U:y}", E, NULL, NULL, ES, {"partial sums", "f32[4,8]{U:y}"}},
    {"matmul", "f32[8,4]", "f32[5,8]", A, NULL, NULL, MT_ESHAPE, {"matmul", "f32[5,8]"}},

    /* broadcasting: equal axes pass, a split against a whole dim slices */
    {"add", "f32[8@x,4]", "f32[8@x,4]", E, "f32[8@x,4]", "", 0, {0}},
    {"add", "f32[8@x,4@y]", "f32[4@y]", E, "f32[8@x,4@y]", "", 0, {0}},
    {"add", "f32[8@x,4@y]", "f32[4]", E, "f32[8@x,4@y]", "slice b dim 0 over y", 0, {0}},
    {"sub", "f32[8@x,4]", "f32[4@y]", A, "f32[8@x,4@y]", "slice a dim 1 over y", 0, {0}},
    {"add", "f32[8,4@x]", "f32[4@y]", E, NULL, NULL, ES,
     {"add got incompatible shardings for broadcasting: ", "f32[8,4@x]", "f32[4@y]", "reshard"}},
    {"mul", "f32[8,4@x]", "f32[4@y]", E, NULL, NULL, ES,
     {"mul got incompatible shardings for broadcasting: ", "f32[8,4@x]", "f32[4@y]"}},
    {"add", "f32[8,4@x]", "f32[4@y]", A, "f32[8,4@x]",
     "all-gather b dim 0 over y (16); slice b dim 0 over x", 0, {0}},
    /* a result using one axis twice: gather b (auto), refuse (explicit) */
    {"add", "f32[8@x,4]", "f32[4@x]", A, "f32[8@x,4]", "all-gather b dim 0 over x (16)", 0, {0}},
    {"add", "f32[8@x,4]", "f32[4@x]", E, NULL, NULL, ES, {"add", "'x' twice", "f32[4@x]"}},
    {"add", "f32[8,4]", "f32[8]", A, NULL, NULL, MT_ESHAPE, {"add", "broadcast"}},
    /* partial sums through add, sub and mul */
    {"add", "f32[8,4]{U:x}", "f32[8,4]{U:x}", E, "f32[8,4]{U:x}", "", 0, {0}},
    {"sub", "f32[8@y,4]{U:x}", "f32[4]{U:x}", E, "f32[8@y,4]{U:x}", "", 0, {0}},
    {"add", "f32[8,4]{U:x}", "f32[4]", A, "f32[8,4]", "all-reduce a over x (128)", 0, {0}},
    {"add", "f32[8,4]{U:x}", "f32[4]", E, NULL, NULL, ES, {"add", "a f32[8,4]{U:x}", "partial", "reshard"}},
    {"mul", "f32[8,4]{U:x}", "f32[4]", E, "f32[8,4]{U:x}", "", 0, {0}},
    {"mul", "f32[8,4]", "f32[4]{U:y}", E, "f32[8,4]{U:y}", "", 0, {0}},
    {"mul", "f32[8,4]{U:x}", "f32[4]{U:x}", A, "f32[8,4]{U:x}", "all-reduce b over x (16)", 0, {0}},
    {"mul", "f32[8,4]{U:x}", "f32[4]{U:x}", E, NULL, NULL, ES, {"mul", "f32[4]{U:x}", "reshard"}},

    /* reshard: allowed in both modes */
    {"reshard", "f32[8@x,4]", "f32[8,4]", E, "f32[8,4]", "all-gather a dim 0 over x (128)", 0, {0}},
    {"reshard", "f32[8,4]", "f32[8,4@y]", A, "f32[8,4@y]", "slice a dim 1 over y", 0, {0}},
    {"reshard", "f32[8@x,4]", "f32[8,4@x]", A, "f32[8,4@x]", "all-to-all a dim 0 to 1 over x (64)", 0, {0}},
    {"reshard", "f32[8,4]{U:x}", "f32[8,4]", E, "f32[8,4]", "all-reduce a over x (128)", 0, {0}},
    {"reshard", "f32[8,4]{U:x}", "f32[8@x,4]", A, "f32[8@x,4]", "reduce-scatter a dim 0 over x (128)", 0, {0}},
    {"reshard", "f32[8,4@y]{U:x}", "f32[8@x,4]", A, "f32[8@x,4]",
     "reduce-scatter a dim 0 over x (64); all-gather a dim 1 over y (64)", 0, {0}},
    {"reshard", "f32[8,4]{U:x}", "f32[8@x+y,4]", A, "f32[8@x+y,4]",
     "all-reduce a over x (128); slice a dim 0 over x+y", 0, {0}},
    {"reshard", "f32[8@x,4@y]", "f32[8@y,4@x]", A, "f32[8@y,4@x]",
     "all-to-all a dim 0 to 1 over x (32); all-to-all a dim 1 to 0 over y (32)", 0, {0}},
    {"reshard", "f32[8,4]", "f32[4,8]", A, NULL, NULL, MT_ESHAPE, {"reshard", "f32[4,8]"}},
    {"reshard", "f32[8,4]", "i32[8,4]", A, NULL, NULL, MT_ESHAPE, {"reshard"}},

    {"conv", "f32[8,4]", "f32[8,4]", A, NULL, NULL, MT_EINVAL, {"op 'conv' has no sharding rule"}},
};

MT_TEST(rules_table) {
    mt_mesh *m = make("x=2,y=2", 4);
    for (size_t i = 0; i < sizeof RULES / sizeof RULES[0]; i++) {
        const rule_case *c = &RULES[i];
        char what[256];
        snprintf(what, sizeof what, "case %zu: %s %s %s (%s)", i, c->op, c->a, c->b,
                 c->mode == A ? "auto" : "explicit");
        mt_type in[2] = {parse(m, c->a), parse(m, c->b)};
        mt_shard_result r;
        mt_status s = mt_shard_rule(m, c->op, in, 2, c->mode, &r);
        if (check_outcome(m, what, s, &r, c->status, c->words, 6, c->result, c->moves))
            check_chain(m, &r, what);
    }
    mt_mesh_free(m);
}

/* The before and after of each move, written out for two cases. */
MT_TEST(rules_move_types) {
    mt_mesh *m = make("x=2,y=2", 4);
    mt_type in[2] = {parse(m, "f32[8,4@x]"), parse(m, "f32[4@y]")};
    mt_shard_result r;
    MT_CHECK_OK(mt_shard_rule(m, "add", in, 2, MT_SHARD_AUTO, &r));
    const char *want[2][2] = {{"f32[4@y]", "f32[4]"}, {"f32[4]", "f32[4@x]"}};
    MT_CHECK(r.n_moves == 2, "two moves");
    for (int i = 0; i < 2; i++) {
        char b[64], a[64];
        mt_type_format(m, &r.moves[i].before, b, sizeof b);
        mt_type_format(m, &r.moves[i].after, a, sizeof a);
        MT_CHECK(strcmp(b, want[i][0]) == 0 && strcmp(a, want[i][1]) == 0,
                 "move %d: %s -> %s, want %s -> %s", i, b, a, want[i][0], want[i][1]);
        MT_CHECK(r.moves[i].dim2 == -1, "move %d: dim2 unused", i);
    }
    MT_CHECK(strcmp(mt_move_name(MT_MOVE_SLICE), "slice") == 0 &&
             strcmp(mt_move_name(MT_MOVE_REDUCE_SCATTER), "reduce-scatter") == 0 &&
             strcmp(mt_move_name((mt_move_kind)99), "?") == 0, "move names");
    mt_mesh_free(m);
}

/* ---- types ---------------------------------------------------------------- */

MT_TEST(types_parse_and_format) {
    mt_mesh *m = make("x=2,y=2", 4);
    const char *round[] = {"f32[8@x,4]", "f32[8@x+y,4]", "f32[8,16]{U:x}", "f32[]", "i32[4,8@y]",
                           "bf16[2,2]", "f32[]{U:x+y}", "f32[4@y,6,2]{U:x}"};
    for (size_t i = 0; i < sizeof round / sizeof round[0]; i++) {
        mt_type t = parse(m, round[i]);
        char back[64];
        mt_type_format(m, &t, back, sizeof back);
        MT_CHECK(strcmp(back, round[i]) == 0, "'%s' reads back as '%s'", round[i], back);
    }
    mt_type t = parse(m, "f32[8@x+y,4]");
    MT_CHECK(t.dtype == MT_F32 && t.ndim == 2 && t.shape[0] == 8 && t.shape[1] == 4 &&
             t.sharding.dim_axes[0] == 3 && t.sharding.dim_axes[1] == 0 && !t.sharding.partial_axes,
             "fields of f32[8@x+y,4]");
    int64_t local[MT_MAX_DIMS];
    MT_CHECK_OK(mt_type_local_shape(m, &t, local));
    MT_CHECK(local[0] == 2 && local[1] == 4, "local (2,4), got (%lld,%lld)", (long long)local[0],
             (long long)local[1]);
    t = parse(m, "f32[]");
    MT_CHECK(t.ndim == 0, "scalar");
    t = parse(m, "f32[8,16]{U:y}");
    MT_CHECK(t.sharding.partial_axes == 2, "partial over y");
    mt_mesh_free(m);
}

MT_TEST(types_refuse_bad_text) {
    mt_mesh *m = make("x=2,y=2", 4);
    mt_type t;
    MT_CHECK_FAILS(mt_type_parse(m, "f64[8]", &t), MT_EINVAL, "'f64[8]'", "unknown dtype");
    MT_CHECK_FAILS(mt_type_parse(m, "f32[8@y+x,4]", &t), MT_EINVAL, "f32[8@y+x,4]", "major first");
    MT_CHECK_FAILS(mt_type_parse(m, "f32[8@z]", &t), MT_EINVAL, "'z'", "'x', 'y'");
    MT_CHECK_FAILS(mt_type_parse(m, "f32[8@x,4@x]", &t), MT_EINVAL, "'x'", "at most once");
    MT_CHECK_FAILS(mt_type_parse(m, "f32[8@x]{U:x}", &t), MT_EINVAL, "at most once");
    MT_CHECK_FAILS(mt_type_parse(m, "f32[6@x+y,4]", &t), MT_EINVAL,
                   "dim 0 of size 6 does not divide over x+y (4 devices)");
    MT_CHECK_FAILS(mt_type_parse(m, "f32[8,3@y]", &t), MT_EINVAL, "dim 1 of size 3", "y (2 devices)");
    MT_CHECK_FAILS(mt_type_parse(m, "f32[8,4", &t), MT_EINVAL, "'f32[8,4'", "column");
    MT_CHECK_FAILS(mt_type_parse(m, "f32[8,,4]", &t), MT_EINVAL, "dim 1", "column 7");
    MT_CHECK_FAILS(mt_type_parse(m, "f32[8]x", &t), MT_EINVAL, "column 7");
    MT_CHECK_FAILS(mt_type_parse(m, "f32[8]{x}", &t), MT_EINVAL, "{U:");
    MT_CHECK_FAILS(mt_type_parse(m, "f32[1,2,3,4,5]", &t), MT_EINVAL, "more than 4 dims");
    /* each dim within 2^50, their bytes past an int64: 4·4e9·4e9 = 6.4e19 */
    MT_CHECK_FAILS(mt_type_parse(m, "f32[4000000000,4000000000@x]", &t), MT_EINVAL,
                   "6.4e+19 bytes", "at most 2^62");
    /* 2^60 elements of bf16: 2^61 bytes, within the limit */
    MT_CHECK_OK(mt_type_parse(m, "bf16[1073741824,1073741824@x]", &t));
    mt_mesh_free(m);
}

/* ---- the network ops' rules and reshape on data=2,tensor=2 ---------------- */

typedef struct {
    mt_op         op;
    const char   *in[3];
    mt_shard_mode mode;
    const char   *result;       /* NULL: the rule fails */
    const char   *moves;
    mt_status     status;
    const char   *words[4];
} op_case;

static const op_case OPS[] = {
    /* layernorm: rows pass, C must be whole */
    {MT_OP_LAYERNORM, {"f32[4@data,8,16]", "f32[16]", "f32[16]"}, E, "f32[4@data,8,16]", "", 0, {0}},
    {MT_OP_LAYERNORM, {"f32[4@data,8,16@tensor]", "f32[16]", "f32[16]"}, A, "f32[4@data,8,16]",
     "all-gather a dim 2 over tensor (1024)", 0, {0}},
    {MT_OP_LAYERNORM, {"f32[4,8,16@tensor]", "f32[16]", "f32[16]"}, E, NULL, NULL, ES,
     {"layernorm", "whole", "issue 9", "reshard"}},
    {MT_OP_LAYERNORM, {"f32[4,16]", "f32[16@tensor]", "f32[16]"}, A, "f32[4,16]",
     "all-gather b dim 0 over tensor (64)", 0, {0}},
    /* cross-entropy: rows pass, the loss is partial over the row axes */
    {MT_OP_CROSS_ENTROPY, {"f32[4@data,8,32]", "i32[4@data,8]"}, E, "f32[]{U:data}", "", 0, {0}},
    {MT_OP_CROSS_ENTROPY, {"f32[4@data,8,32@tensor]", "i32[4@data,8]"}, A, "f32[]{U:data}",
     "all-reduce inside over tensor (64); all-reduce inside over tensor (64)", 0, {0}},
    {MT_OP_CROSS_ENTROPY, {"f32[4@data,8,32]", "i32[4,8]"}, A, "f32[]{U:data}",
     "slice b dim 0 over data", 0, {0}},
    {MT_OP_CROSS_ENTROPY, {"f32[4@data,8,32]", "i32[4,8]"}, E, NULL, NULL, ES,
     {"cross_entropy", "targets", "i32[4@data,8]", "reshard"}},
    {MT_OP_CROSS_ENTROPY, {"f32[4,8,32]{U:tensor}", "i32[4,8]"}, A, "f32[]",
     "all-reduce a over tensor (4096)", 0, {0}},
    /* mse, sum */
    {MT_OP_MSE, {"f32[4@data,8]", "f32[4,8]"}, A, "f32[]{U:data}", "slice b dim 0 over data", 0, {0}},
    {MT_OP_MSE, {"f32[4@data,8]", "f32[4,8@tensor]"}, E, NULL, NULL, ES, {"mse", "target", "f32[4@data,8]"}},
    {MT_OP_SUM, {"f32[4@data,8@tensor]"}, E, "f32[]{U:data+tensor}", "", 0, {0}},
    {MT_OP_SUM, {"f32[4@data,8]{U:tensor}"}, E, "f32[]{U:data+tensor}", "", 0, {0}},
    /* embedding: a table split over the vocabulary gives a partial sum */
    {MT_OP_EMBEDDING, {"f32[64@tensor,16]", "i32[4@data,8]"}, E, "f32[4@data,8,16]{U:tensor}", "", 0, {0}},
    {MT_OP_EMBEDDING, {"f32[64,16@tensor]", "i32[4@data,8]"}, E, "f32[4@data,8,16@tensor]", "", 0, {0}},
    {MT_OP_EMBEDDING, {"f32[64@data,16]", "i32[4@data,8]"}, A, NULL, NULL, ES, {"embedding", "'data' twice"}},
    /* attention: B passes, T and 3C whole */
    {MT_OP_ATTENTION, {"f32[4@data,8,48]"}, E, "f32[4@data,8,16]", "", 0, {0}},
    {MT_OP_ATTENTION, {"f32[4,8,48@tensor]"}, E, NULL, NULL, ES, {"attention", "(B,T,3,C)"}},
    /* (B,T,3,C): C split by heads (the table's calls have NH = 4) */
    {MT_OP_ATTENTION, {"f32[4@data,8,3,16@tensor]"}, E, "f32[4@data,8,16@tensor]", "", 0, {0}},
    {MT_OP_ATTENTION, {"f32[4,8,3,16]{U:tensor}"}, A, "f32[4,8,16]",
     "all-reduce a over tensor (6144)", 0, {0}},
    /* T split: each device its share of the sequence, the lowering gathers k
       and v (attention_split.c); no move, the result split as qkv */
    {MT_OP_ATTENTION, {"f32[4,8@tensor,48]"}, A, "f32[4,8@tensor,16]", "", 0, {0}},
    {MT_OP_ATTENTION, {"f32[4,8@tensor,48]"}, E, "f32[4,8@tensor,16]", "", 0, {0}},
    /* gelu needs whole values, scale keeps partial sums, transpose swaps */
    {MT_OP_GELU, {"f32[8,4]{U:tensor}"}, A, "f32[8,4]", "all-reduce a over tensor (128)", 0, {0}},
    {MT_OP_GELU, {"f32[8,4]{U:tensor}"}, E, NULL, NULL, ES, {"gelu", "f32[8,4]{U:tensor}", "reshard"}},
    {MT_OP_SCALE, {"f32[8@data,4]{U:tensor}"}, E, "f32[8@data,4]{U:tensor}", "", 0, {0}},
    {MT_OP_TRANSPOSE, {"f32[4@data,8,16@tensor]"}, E, "f32[4@data,16@tensor,8]", "", 0, {0}},
    /* linear: w transposed; the bias takes the result's OC layout */
    {MT_OP_LINEAR, {"f32[4@data,16]", "f32[32@tensor,16]", "f32[32]"}, E, "f32[4@data,32@tensor]",
     "slice c dim 0 over tensor", 0, {0}},
    {MT_OP_LINEAR, {"f32[4,16@tensor]", "f32[32,16@tensor]", "f32[32]"}, A, "f32[4,32]",
     "all-reduce result over tensor (512)", 0, {0}},
    {MT_OP_LINEAR, {"f32[4,16@tensor]", "f32[32,16@tensor]"}, A, "f32[4,32]{U:tensor}", "", 0, {0}},
    /* several output dims: w (3,32,16) gives (..,3,32), the bias its layout */
    {MT_OP_LINEAR, {"f32[4@data,16]", "f32[3,32@tensor,16]", "f32[3,32]"}, E,
     "f32[4@data,3,32@tensor]", "slice c dim 1 over tensor", 0, {0}},
    {MT_OP_LINEAR, {"f32[4,16]", "f32[3,32@tensor,16]", "f32[3,32@data]"}, E, NULL, NULL, ES,
     {"linear", "bias", "f32[3,32@data]", "reshard"}},
    {MT_OP_LINEAR, {"f32[4,16]", "f32[32@tensor,16]", "f32[32@data]"}, E, NULL, NULL, ES,
     {"linear", "bias", "f32[32@data]", "reshard"}},
    /* matmul with the transposes of the call */
    {MT_OP_GEMM, {"f32[4,8]", "f32[8,4]"}, A, NULL, NULL, MT_EINVAL, {"op 'gemm' has no sharding rule"}},
};

/* Runs the rule of `call` (its op and parameters) on the row's operands and
 * checks the outcome against the row; whether the rule succeeded. */
static bool check_row(const mt_mesh *m, mt_op_call *call, const char *const *in_text,
                      mt_shard_mode mode, const char *result, const char *moves, mt_status status,
                      const char *const *words, const char *what) {
    mt_type in[3];
    while (call->n_in < 3 && in_text[call->n_in]) {
        in[call->n_in] = parse(m, in_text[call->n_in]);
        call->n_in++;
    }
    mt_shard_result r;
    mt_status s = mt__shard_rule(m, call, in, mode, &r);
    if (!check_outcome(m, what, s, &r, status, words, 4, result, moves)) return false;
    check_chain(m, &r, what);
    return true;
}

MT_TEST(rules_of_network_ops) {
    mt_mesh *m = make("data=2,tensor=2", 4);
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++) {
        const op_case *c = &OPS[i];
        mt_op_call call = {.op = c->op, .p.attention.NH = c->op == MT_OP_ATTENTION ? 4 : 0};
        char what[256];
        snprintf(what, sizeof what, "case %zu: op %d on %s %s (%s)", i, (int)c->op, c->in[0],
                 c->in[1] ? c->in[1] : "", c->mode == A ? "auto" : "explicit");
        check_row(m, &call, c->in, c->mode, c->result, c->moves, c->status, c->words, what);
    }
    mt_mesh_free(m);
}

/* ---- the LLaMA family's ops on data=2,tensor=2 ---------------------------- */

/* The LLaMA family's, each row with its head counts (rope: NH;
 * attention_gqa: NH, KV, HS 8). */
typedef struct {
    op_case row;
    int64_t NH, KV;
} llama_case;

static const llama_case LLAMA_OPS[] = {
    /* rmsnorm: rows pass, C whole */
    {{MT_OP_RMSNORM, {"f32[4@data,8,16]", "f32[16]"}, E, "f32[4@data,8,16]", "", 0, {0}}, 0, 0},
    {{MT_OP_RMSNORM, {"f32[4@data,8,16@tensor]", "f32[16]"}, A, "f32[4@data,8,16]",
     "all-gather a dim 2 over tensor (1024)", 0, {0}}, 0, 0},
    {{MT_OP_RMSNORM, {"f32[4,8,16@tensor]", "f32[16]"}, E, NULL, NULL, ES,
     {"rmsnorm", "whole", "reshard"}}, 0, 0},
    {{MT_OP_RMSNORM, {"f32[4,16]", "f32[16@tensor]"}, A, "f32[4,16]",
     "all-gather b dim 0 over tensor (64)", 0, {0}}, 0, 0},
    /* rope: B and T pass, the channels split on whole heads, partial sums pass */
    {{MT_OP_ROPE, {"f32[4@data,8@tensor,16]"}, E, "f32[4@data,8@tensor,16]", "", 0, {0}}, 4, 0},
    {{MT_OP_ROPE, {"f32[4,8,16@tensor]"}, E, "f32[4,8,16@tensor]", "", 0, {0}}, 4, 0},
    {{MT_OP_ROPE, {"f32[4,8,16@tensor]"}, E, NULL, NULL, ES,
     {"rope", "NH=1", "tensor", "reshard"}}, 1, 0},
    {{MT_OP_ROPE, {"f32[4,8,16@tensor]"}, A, "f32[4,8,16]",
     "all-gather a dim 2 over tensor (2048)", 0, {0}}, 1, 0},
    {{MT_OP_ROPE, {"f32[4,8,16]{U:tensor}"}, E, "f32[4,8,16]{U:tensor}", "", 0, {0}}, 4, 0},
    /* swiglu: elementwise, no partial sums */
    {{MT_OP_SWIGLU, {"f32[4@data,8,32@tensor]", "f32[4@data,8,32@tensor]"}, E,
     "f32[4@data,8,32@tensor]", "", 0, {0}}, 0, 0},
    {{MT_OP_SWIGLU, {"f32[4,8,32]{U:tensor}", "f32[4,8,32]"}, A, "f32[4,8,32]",
     "all-reduce a over tensor (4096)", 0, {0}}, 0, 0},
    {{MT_OP_SWIGLU, {"f32[4,8,32]{U:tensor}", "f32[4,8,32]"}, E, NULL, NULL, ES,
     {"swiglu", "reshard"}}, 0, 0},
    /* grouped-query attention, HS 8: q's heads split, k and v with them when
     * KV divides by the axis, else whole */
    {{MT_OP_ATTENTION_GQA, {"f32[4@data,8,32@tensor]", "f32[4@data,8,16@tensor]",
     "f32[4@data,8,16@tensor]"}, E, "f32[4@data,8,32@tensor]", "", 0, {0}}, 4, 2},
    {{MT_OP_ATTENTION_GQA, {"f32[4@data,8,32@tensor]", "f32[4@data,8,8]", "f32[4@data,8,8]"},
     E, "f32[4@data,8,32@tensor]", "", 0, {0}}, 4, 1},
    {{MT_OP_ATTENTION_GQA, {"f32[4,8,32@tensor]", "f32[4,8,16]", "f32[4,8,16]"}, A,
     "f32[4,8,32@tensor]", "slice b dim 2 over tensor; slice c dim 2 over tensor", 0, {0}}, 4, 2},
    {{MT_OP_ATTENTION_GQA, {"f32[4,8,32@tensor]", "f32[4,8,16]", "f32[4,8,16]"}, E, NULL,
     NULL, ES, {"attention_gqa", "k", "reshard"}}, 4, 2},
    {{MT_OP_ATTENTION_GQA, {"f32[4,8,32@tensor]", "f32[4,8,8@tensor]", "f32[4,8,8]"}, A,
     "f32[4,8,32@tensor]", "all-gather b dim 2 over tensor (1024)", 0, {0}}, 4, 1},
    {{MT_OP_ATTENTION_GQA, {"f32[4@data,8,32]", "f32[4,8,16]", "f32[4,8,16]"}, A,
     "f32[4@data,8,32]", "slice b dim 0 over data; slice c dim 0 over data", 0, {0}}, 4, 2},
    /* T split: k and v split as q (the lowering gathers them); explicit mode
       refuses k and v laid out otherwise, auto slices them */
    {{MT_OP_ATTENTION_GQA, {"f32[4,8@tensor,32]", "f32[4,8@tensor,16]", "f32[4,8@tensor,16]"},
     E, "f32[4,8@tensor,32]", "", 0, {0}}, 4, 2},
    {{MT_OP_ATTENTION_GQA, {"f32[4,8@tensor,32]", "f32[4,8,16]", "f32[4,8,16]"}, E, NULL,
     NULL, ES, {"attention_gqa", "k", "f32[4,8@tensor,16]", "reshard"}}, 4, 2},
    {{MT_OP_ATTENTION_GQA, {"f32[4,8@tensor,32]", "f32[4,8,16]", "f32[4,8,16]"}, A,
     "f32[4,8@tensor,32]", "slice b dim 1 over tensor; slice c dim 1 over tensor", 0, {0}}, 4, 2},
    {{MT_OP_ATTENTION_GQA, {"f32[4,8,24@tensor]", "f32[4,8,8]", "f32[4,8,8]"}, E, NULL,
     NULL, ES, {"NH=3", "tensor", "reshard"}}, 3, 1},
    {{MT_OP_ATTENTION_GQA, {"f32[4,8,24@tensor]", "f32[4,8,8]", "f32[4,8,8]"}, A,
     "f32[4,8,24]", "all-gather a dim 2 over tensor (3072)", 0, {0}}, 3, 1},
};

MT_TEST(rules_of_llama_ops) {
    mt_mesh *m = make("data=2,tensor=2", 4);
    for (size_t i = 0; i < sizeof LLAMA_OPS / sizeof LLAMA_OPS[0]; i++) {
        const op_case *c = &LLAMA_OPS[i].row;
        const int64_t NH = LLAMA_OPS[i].NH, KV = LLAMA_OPS[i].KV;
        mt_op_call call = {.op = c->op};
        if (c->op == MT_OP_ROPE) call.p.rope = (mt_rope_params){.NH = NH, .HS = 16 / NH};
        if (c->op == MT_OP_ATTENTION_GQA)
            call.p.gqa = (mt_gqa_params){.NH = NH, .KV = KV, .HS = 8, .G = NH / KV};
        char what[256];
        snprintf(what, sizeof what, "llama case %zu: op %d on %s %s (%s)", i, (int)c->op,
                 c->in[0], c->in[1] ? c->in[1] : "", c->mode == A ? "auto" : "explicit");
        check_row(m, &call, c->in, c->mode, c->result, c->moves, c->status, c->words, what);
    }
    mt_mesh_free(m);
}

/* Attention's heads split over an axis they do not divide: an error in both
 * modes naming the count and the fix. */
MT_TEST(rules_attention_heads_must_divide) {
    mt_mesh *m = make("data=2,tensor=2", 4);
    mt_op_call call = {.op = MT_OP_ATTENTION, .n_in = 1, .p.attention = {.NH = 3, .C = 24}};
    for (int mode = 0; mode < 2; mode++) {
        mt_type in[1] = {parse(m, "f32[4,8,3,24@tensor]")};
        mt_shard_result r;
        MT_CHECK_FAILS(mt__shard_rule(m, &call, in, mode ? MT_SHARD_AUTO : MT_SHARD_EXPLICIT, &r),
                       MT_ESHARDING, "NH=3", "tensor", "divisible by 2");
    }
    mt_mesh_free(m);
}

/* matmul through the call: a transposed (K,M), b transposed (N,K). */
MT_TEST(rules_matmul_transposed) {
    mt_mesh *m = make("data=2,tensor=2", 4);
    mt_op_call call = {.op = MT_OP_MATMUL, .n_in = 2, .p.gemm = {.ta = true, .tb = true}};
    mt_type in[2] = {parse(m, "f32[4@data,8@tensor]"), parse(m, "f32[6,4]")};
    mt_shard_result r;
    MT_CHECK_OK(mt__shard_rule(m, &call, in, MT_SHARD_AUTO, &r));
    char got[64];
    mt_type_format(m, &r.result, got, sizeof got);
    /* a (K,M): K=4 split over data is gathered; M=8 keeps tensor; N=6 from b's dim 0 */
    MT_CHECK(strcmp(got, "f32[8@tensor,6]") == 0, "result %s", got);
    MT_CHECK(r.n_moves == 1 && r.moves[0].kind == MT_MOVE_ALL_GATHER && r.moves[0].operand == 0 &&
             r.moves[0].dim == 0, "one gather of a's K (dim 0)");
    mt_mesh_free(m);
}

typedef struct {
    const char   *in;
    int           ndim;
    int64_t       shape[4];
    mt_shard_mode mode;
    const char   *result;       /* NULL: fails */
    const char   *moves;
} reshape_case;

MT_TEST(rules_reshape) {
    static const reshape_case CASES[] = {
        {"f32[4@data,8,16]", 2, {32, 16}, E, "f32[32@data,16]", ""},
        {"f32[32@data,16]", 3, {4, 8, 16}, E, "f32[4@data,8,16]", ""},
        {"f32[4@data,8,16@tensor]", 2, {32, 16}, E, "f32[32@data,16@tensor]", ""},
        {"f32[4,8@data,16]", 2, {32, 16}, A, "f32[32,16]", "all-gather a dim 1 over data (2048)"},
        {"f32[4,8@data,16]", 2, {32, 16}, E, NULL, NULL},
        {"f32[32@data+tensor,16]", 3, {2, 16, 16}, A, "f32[2,16,16]",
         "all-gather a dim 0 over data+tensor (2048)"},
        {"f32[8,4]{U:tensor}", 1, {32}, E, "f32[32]{U:tensor}", ""},
    };
    mt_mesh *m = make("data=2,tensor=2", 4);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const reshape_case *c = &CASES[i];
        mt_type in = parse(m, c->in);
        mt_shard_result r;
        mt_status s = mt__shard_reshape(m, &in, c->ndim, c->shape, c->mode, &r);
        if (!c->result) {
            MT_CHECK(s == MT_ESHARDING && strstr(mt_errmsg(), "reshape") && strstr(mt_errmsg(), c->in),
                     "case %zu: %s: %s", i, mt_status_name(s), mt_errmsg());
            continue;
        }
        MT_CHECK(s == MT_OK, "case %zu: %s", i, mt_errmsg());
        char got[128], moves[512];
        mt_type_format(m, &r.result, got, sizeof got);
        MT_CHECK(strcmp(got, c->result) == 0, "case %zu: %s, want %s", i, got, c->result);
        moves_text(m, &r, moves, sizeof moves);
        MT_CHECK(strcmp(moves, c->moves) == 0, "case %zu: moves '%s', want '%s'", i, moves, c->moves);
    }
    int64_t bad[1] = {7};
    mt_type in = parse(m, "f32[8,4]");
    mt_shard_result r;
    MT_CHECK_FAILS(mt__shard_reshape(m, &in, 1, bad, MT_SHARD_AUTO, &r), MT_ESHAPE, "32", "7");
    mt_mesh_free(m);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
