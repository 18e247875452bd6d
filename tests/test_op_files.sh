#!/usr/bin/env bash
# test_op_files.sh — a new op is four files plus its tests (issue 38, item 5;
# docs/extending.md, "A new op"): its MT_OP_LIST line in src/ops/ops_impl.h,
# src/ops/<op>.c (kernel, run, cost, kernel half), src/graph/op_<op>.c
# (builder, gradient, sharding and lowering rules, graph half) and its
# builder's declaration in include/meshtrain/graph.h. Checked two ways:
#   - no file of src/ indexes a table by op by hand ([MT_OP_X] = ...): the
#     op tables (ops/op_table.c, graph/op_desc.c) are generated from
#     MT_OP_LIST, so no central table takes a line per op;
#   - rope, the worked example, is named by exactly those four files: its
#     enum values, its parameters' type, its two halves and its builder's
#     definition (mt_rope's callers, e.g. models/llama.c, are users).
# Each check is run once more on a planted copy, so that a check that can no
# longer fail is caught too. test_ops_desc.c checks the tables' contents.
#
#   bash tests/test_op_files.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
test_start test_op_files.sh "$@"

# by_hand DIR: lines of DIR's sources that index by an op by hand
by_hand() { grep -rnE '(^|[[:space:]{,])\[MT_OP_[A-Z0-9_]+\][[:space:]]*=' "$1" --include='*.[ch]'; }

found=$(by_hand "$root/src")
if [ -z "$found" ]; then ok "no table of src/ has a hand-written line per op"
else bad "no table of src/ has a hand-written line per op" "$found"; fi

mkdir -p planted
cp "$root/src/graph/op_desc.c" planted/
sed -i '/^GDESC(gemm)/i static const int order[] = {[MT_OP_GEMM] = 1};' planted/op_desc.c
if by_hand planted | grep -q 'MT_OP_GEMM'; then ok "a planted per-op table line is caught"
else bad "a planted per-op table line is caught" "the check passed on a [MT_OP_GEMM] = line"; fi

# names_rope DIR...: the files under DIRs that name rope's op (not its users)
pattern='MT_OP_ROPE|mt_rope_params|mt__opdef_rope|mt__gop_rope|kernel_rope|mt_tensor \*mt_rope\('
names_rope() { grep -rlE "$pattern" "$@" --include='*.[ch]' | sed "s|^$root/||" | sort; }

want=$'include/meshtrain/graph.h\nsrc/graph/op_rope.c\nsrc/ops/ops_impl.h\nsrc/ops/rope.c'
got=$(names_rope "$root/src" "$root/include")
if [ "$got" = "$want" ]; then ok "rope is named by its four files alone"
else bad "rope is named by its four files alone" "files: $(echo $got), want: $(echo $want)"; fi

# each of the four files holds its part
grep -qE '^[[:space:]]*X\(ROPE, rope\)' "$root/src/ops/ops_impl.h" &&
    grep -qE '^[[:space:]]*X\(ROPE_BWD, rope_bwd\)' "$root/src/ops/ops_impl.h" &&
    ok "ops_impl.h has rope's and rope_bwd's MT_OP_LIST lines" ||
    bad "ops_impl.h has rope's and rope_bwd's MT_OP_LIST lines" "not found"
for def in 'const mt_op_def mt__opdef_rope ' 'const mt_op_def mt__opdef_rope_bwd ' \
           'static void run_rope(' 'static void cost_rope('; do
    grep -qF "$def" "$root/src/ops/rope.c" && ok "ops/rope.c defines ${def%(}" ||
        bad "ops/rope.c defines ${def%(}" "not found"
done
for def in 'const mt_op_gdesc mt__gop_rope ' 'const mt_op_gdesc mt__gop_rope_bwd ' \
           'mt_tensor *mt_rope(' 'static void grad_rope(' 'static mt_status shard_rope(' \
           'static mt_tensor *lower_rope('; do
    grep -qF "$def" "$root/src/graph/op_rope.c" && ok "graph/op_rope.c defines ${def%(}" ||
        bad "graph/op_rope.c defines ${def%(}" "not found"
done

mkdir -p planted2/src/graph
cp "$root/src/graph/lower.c" planted2/src/graph/
echo 'static const int rope_op = MT_OP_ROPE;' >>planted2/src/graph/lower.c
if grep -rlE "$pattern" planted2 --include='*.[ch]' | grep -q lower.c; then
    ok "rope named in a fifth file is caught"
else bad "rope named in a fifth file is caught" "the check missed MT_OP_ROPE in lower.c"; fi

test_end
