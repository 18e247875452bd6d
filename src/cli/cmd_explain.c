/*
 * cmd_explain.c — `meshtrain explain`: why communication happens. For one
 * op on typed operands (--op), prints the result type and every move the
 * sharding rule asks for, with its bytes per device:
 *
 *   $ meshtrain explain --mesh x=2,y=2 --op matmul 'f32[8,2@x]' 'f32[2,8]'
 *   result f32[8,8]
 *   collective all-gather of a dim 1 over x: f32[8,2@x] -> f32[8,2], 64 bytes per device
 *
 * The mesh is only a shape here: no devices are started. With --model the
 * command prints a whole model's partitioned program (cmd_explain_model.c).
 */
#include "cli/args.h"
#include "meshtrain.h"

#include <stdlib.h>
#include <string.h>

static const char EXPLAIN_USAGE[] =
    "usage: meshtrain explain --mesh AXES --op OP TYPE_A TYPE_B [--explicit] [--json]\n"
    "\n"
    "Prints the sharding rule of one op on two typed operands: the result type, then\n"
    "every move it needs (collectives with their bytes per device, local slices),\n"
    "or 'collectives none'. OP is matmul, add, sub, mul or reshard (TYPE_A moved to\n"
    "the layout of TYPE_B). A type is a dtype and the global dims, each optionally\n"
    "split over mesh axes (joined by '+', major first), then optional partial-sum\n"
    "axes: f32[8@x,4], f32[8@x+y,4], f32[8,16]{U:x}, f32[] (a scalar).\n"
    "--explicit refuses to guess (sharding in types): an ambiguous sharding fails\n"
    "and the message names the reshard that resolves it. No devices are needed.\n"
    "With --json a refused rule prints one object too: {\"refused\": true, \"op\",\n"
    "\"mode\", \"operands\", \"status\", \"message\", \"ways_out\": [{\"reshard\": \"a\"|\"b\"|\n"
    "\"result\", \"to\", \"result\", \"moves\"}]} (each way out checked; the exit is 1,\n"
    "or 2 for shapes the op cannot take). A type that does not parse exits 2.\n"
    "With --model, prints a model's partitioned program instead: see\n"
    "`meshtrain explain --model gpt --help`.\n"
    "\n"
    "example:\n"
    "  meshtrain explain --mesh x=2,y=2 --op matmul 'f32[8@x,2]' 'f32[2,8@y]'\n";

#define OPS "matmul, add, sub, mul, reshard"

/* ---- one op ------------------------------------------------------------- */

static const char *operand_name(int operand) {
    switch (operand) {
    case 0: return "a";
    case 1: return "b";
    case MT_MOVE_RESULT: return "result";
    case MT_MOVE_INSIDE: return "inside";
    default: return "?";
    }
}

/* "x+y" of an axis bit set. */
static void axes_text(const mt_mesh *mesh, uint32_t set, char *buf, size_t cap) {
    size_t off = 0;
    buf[0] = '\0';
    for (int a = 0; a < mt_mesh_ndim(mesh) && off < cap; a++)
        if (set & (1u << a))
            off += (size_t)snprintf(buf + off, cap - off, "%s%s", off ? "+" : "",
                                    mt_mesh_axis_name(mesh, a));
}

static void print_text(const mt_mesh *mesh, const mt_shard_result *res) {
    char t[256], before[256], after[256], axes[128];
    mt_type_format(mesh, &res->result, t, sizeof t);
    printf("result %s\n", t);
    bool any = false;
    for (int i = 0; i < res->n_moves; i++) {
        const mt_move *m = &res->moves[i];
        mt_type_format(mesh, &m->before, before, sizeof before);
        mt_type_format(mesh, &m->after, after, sizeof after);
        axes_text(mesh, m->axes, axes, sizeof axes);
        const char *who = operand_name(m->operand);
        if (m->kind == MT_MOVE_SLICE) {
            printf("local slice of %s dim %d over %s: %s -> %s\n", who, m->dim, axes, before,
                   after);
            continue;
        }
        any = true;
        printf("collective %s of %s ", mt_move_name(m->kind), who);
        if (m->kind == MT_MOVE_ALL_TO_ALL) printf("dim %d to %d ", m->dim, m->dim2);
        else if (m->dim >= 0) printf("dim %d ", m->dim);
        printf("over %s: %s -> %s, %lld bytes per device\n", axes, before, after,
               (long long)m->bytes);
    }
    if (!any) printf("collectives none\n");
}

static void print_json(const mt_mesh *mesh, const mt_shard_result *res) {
    char t[256], before[256], after[256], axes[128];
    mt_type_format(mesh, &res->result, t, sizeof t);
    printf("{\"result\": \"%s\", \"moves\": [", t);
    for (int i = 0; i < res->n_moves; i++) {
        const mt_move *m = &res->moves[i];
        mt_type_format(mesh, &m->before, before, sizeof before);
        mt_type_format(mesh, &m->after, after, sizeof after);
        axes_text(mesh, m->axes, axes, sizeof axes);
        printf("%s{\"kind\": \"%s\", \"operand\": \"%s\", \"dim\": %d, \"dim2\": %d, "
               "\"axes\": \"%s\", \"before\": \"%s\", \"after\": \"%s\", \"bytes\": %lld}",
               i ? ", " : "", mt_move_name(m->kind), operand_name(m->operand), m->dim, m->dim2,
               axes, before, after, (long long)m->bytes);
    }
    printf("]}\n");
}

/* ---- a refusal, as JSON ------------------------------------------------ */

/* One way out of a refusal: reshard `what` ("a", "b" or "result") to `to`,
 * which moves `moves` (the reshard rule's, from `from`). */
static void json_way(const mt_mesh *mesh, bool *first, const char *what, const mt_type *from,
                     const mt_type *to, const mt_type *result) {
    mt_type pair[2] = {*from, *to};
    mt_shard_result mv;
    if (mt_shard_rule(mesh, "reshard", pair, 2, MT_SHARD_AUTO, &mv) != MT_OK) return;
    char t[256];
    mt_type_format(mesh, to, t, sizeof t);
    printf("%s{\"reshard\": \"%s\", \"to\": ", *first ? "" : ", ", what);
    cli_json_string(stdout, t);
    mt_type_format(mesh, result, t, sizeof t);
    printf(", \"result\": ");
    cli_json_string(stdout, t);
    printf(", \"moves\": [");
    int k = 0;
    for (int i = 0; i < mv.n_moves; i++)
        if (mv.moves[i].kind != MT_MOVE_SLICE)
            printf("%s\"%s\"", k++ ? ", " : "", mt_move_name(mv.moves[i].kind));
    printf("]}");
    *first = false;
}

/* The ways out of an explicit-mode refusal, each checked: what auto mode
 * would do, as reshards. An operand auto mode moves, resharded to where it
 * moves it, when the op then passes in explicit mode; and a result auto mode
 * leaves holding partial sums the inputs did not, resharded to each
 * decision (all-reduced, reduce-scattered onto a dim, kept). None when auto
 * mode refuses too. */
static void json_ways_out(const mt_mesh *mesh, const char *op, const mt_type *in, int n) {
    bool first = true;
    mt_shard_result au;
    if (mt_shard_rule(mesh, op, in, n, MT_SHARD_AUTO, &au) != MT_OK) return;
    for (int k = 0; k < n; k++) {
        const mt_move *last = NULL;
        for (int i = 0; i < au.n_moves; i++)
            if (au.moves[i].operand == k) last = &au.moves[i];
        if (!last) continue;
        mt_type moved[2] = {in[0], in[n > 1 ? 1 : 0]};
        moved[k] = last->after;
        mt_shard_result ex;
        if (mt_shard_rule(mesh, op, moved, n, MT_SHARD_EXPLICIT, &ex) == MT_OK)
            json_way(mesh, &first, k ? "b" : "a", &in[k], &last->after, &ex.result);
    }
    uint32_t had = 0;
    for (int k = 0; k < n; k++) had |= in[k].sharding.partial_axes;
    const mt_type *r = &au.result;
    uint32_t p = r->sharding.partial_axes & ~had;
    if (!p) return;
    mt_type reduced = *r;
    reduced.sharding.partial_axes &= ~p;
    json_way(mesh, &first, "result", r, &reduced, &reduced);
    uint32_t used = 0;
    for (int d = 0; d < r->ndim; d++) used |= reduced.sharding.dim_axes[d];
    for (int d = 0; d < r->ndim && !(used & p); d++) {
        mt_type scattered = reduced;
        scattered.sharding.dim_axes[d] |= p;
        int64_t local[MT_MAX_DIMS];
        if (mt_type_local_shape(mesh, &scattered, local) == MT_OK)
            json_way(mesh, &first, "result", r, &scattered, &scattered);
    }
    json_way(mesh, &first, "result", r, r, r);
}

/* A refused rule as one JSON object on stdout (the message is on stderr too). */
static void print_refusal_json(const mt_mesh *mesh, const char *op, const mt_type *in, int n,
                               bool explicit_mode, mt_status s, const char *msg) {
    printf("{\"refused\": true, \"op\": ");
    cli_json_string(stdout, op);
    printf(", \"mode\": \"%s\", \"operands\": [", explicit_mode ? "explicit" : "auto");
    for (int k = 0; k < n; k++) {
        char t[256];
        mt_type_format(mesh, &in[k], t, sizeof t);
        if (k) printf(", ");
        cli_json_string(stdout, t);
    }
    printf("], \"status\": \"%s\", \"message\": ", mt_status_name(s));
    cli_json_string(stdout, msg);
    printf(", \"ways_out\": [");
    if (explicit_mode) json_ways_out(mesh, op, in, n);
    printf("]}\n");
}

/* The rule of `op` on the types written in types[0 .. n). An operand that
 * does not parse, and shapes the op cannot take (MT_ESHAPE), are the
 * command line's mistakes: exit 2 (README, "Exit status"); a sharding the
 * rule refuses (--explicit's ambiguities, MT_ESHARDING) is the answer, exit
 * 1 with the ways out. */
static int explain_op(const mt_mesh *mesh, const char *op, char **types, int n,
                      bool explicit_mode, bool json) {
    mt_type in[2];
    for (int k = 0; k < n; k++) {
        mt_status ps = mt_type_parse(mesh, types[k], &in[k]);
        if (ps != MT_OK) {
            cli_error("--op %s: operand %s: %s", op, operand_name(k), mt_errmsg());
            return cli_exit_of(ps);
        }
    }
    mt_shard_result res;
    mt_status s = mt_shard_rule(mesh, op, in, n,
                                explicit_mode ? MT_SHARD_EXPLICIT : MT_SHARD_AUTO, &res);
    if (s != MT_OK) {
        /* --json: the refusal as an object on stdout, the line on stderr as always */
        char msg[2048];
        snprintf(msg, sizeof msg, "%s", mt_errmsg());
        cli_error("%s", msg);
        if (json) print_refusal_json(mesh, op, in, n, explicit_mode, s, msg);
        return s == MT_ESHAPE ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    if (json) print_json(mesh, &res);
    else print_text(mesh, &res);
    return CLI_EXIT_OK;
}

/* ---- the command -------------------------------------------------------- */

int cli_cmd_explain(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--model") == 0 || strncmp(argv[i], "--model=", 8) == 0)
            return cli_explain_model(argc, argv);
    const char *mesh_spec = NULL, *op = NULL;
    bool explicit_mode = false, json = false;
    const cli_opt opts[] = {
        {"mesh", CLI_STR, &mesh_spec, 0, 0, 0, 0, NULL, "AXES", "mesh axes with sizes, e.g. x=2,y=2 (required)"},
        {"op", CLI_STR, &op, 0, 0, 0, 0, NULL, "OP", "the op: " OPS},
        {"explicit", CLI_FLAG, &explicit_mode, 0, 0, 0, 0, NULL, NULL, "explicit mode: fail where the sharding is ambiguous"},
        {"json", CLI_FLAG, &json, 0, 0, 0, 0, NULL, NULL, "print one JSON object"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    /* the operand types are positional: pass the flags (and their values) to
     * the parser and keep the rest */
    char *flags[argc + 1], *types[argc + 1];
    int n_flags = 0, n_types = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0') { types[n_types++] = argv[i]; continue; }
        flags[n_flags++] = argv[i];
        bool takes_value = strcmp(a, "--mesh") == 0 || strcmp(a, "--op") == 0;
        if (takes_value && i + 1 < argc) flags[n_flags++] = argv[++i];
    }
    int rc = cli_parse("explain", opts, n_flags, flags, NULL);
    if (rc < 0) {
        cli_print_help(stdout, EXPLAIN_USAGE, opts);
        return CLI_EXIT_OK;
    }
    if (rc != CLI_EXIT_OK) return rc;
    if (!mesh_spec) {
        cli_error("explain needs --mesh AXES (e.g. --mesh x=2,y=2); see `meshtrain explain --help`");
        return CLI_EXIT_USAGE;
    }
    if (!op) {
        cli_error("explain needs --op OP (%s); see `meshtrain explain --help`", OPS);
        return CLI_EXIT_USAGE;
    }
    static const char *const KNOWN[] = {"matmul", "add", "sub", "mul", "reshard"};
    bool known = false;
    for (size_t k = 0; k < sizeof KNOWN / sizeof KNOWN[0]; k++) known |= strcmp(op, KNOWN[k]) == 0;
    if (!known) {
        cli_error("--op: '%s' is not one of %s", op, OPS);
        return CLI_EXIT_USAGE;
    }
    if (n_types != 2) {
        cli_error("explain --op %s takes 2 operand types, got %d (e.g. 'f32[8@x,2]' "
                  "'f32[2,8]'); see `meshtrain explain --help`", op, n_types);
        return CLI_EXIT_USAGE;
    }
    /* no devices here: the mesh is a shape, every size given (no -1) */
    int n_devices = 0;
    mt_mesh *mesh = NULL;
    mt_status s = mt_mesh_spec_devices(mesh_spec, &n_devices);
    if (s == MT_OK) s = mt_mesh_create(mesh_spec, n_devices, &mesh);
    if (s != MT_OK) {
        cli_error("--mesh: %s", mt_errmsg());
        return cli_exit_of(s);
    }
    rc = explain_op(mesh, op, types, n_types, explicit_mode, json);
    mt_mesh_free(mesh);
    return rc;
}
