#!/usr/bin/env bash
# test_lower_hooks.sh — the partitioner's loop knows no op (issue 22): the
# file that lowers a node, src/partition/node.c (from its "steps of a node"
# banner on), names no op kind (MT_OP_...), compares no
# call's op, and picks no hook by name: an op's lowering with the moves
# around it is its descriptor's (src/graph/op_desc.c). Every hook the
# descriptors name is defined in src/graph/. The check is run once on a copy
# with an op test planted in the loop, so that a check that can no longer
# fail is caught too.
#
#   bash tests/test_lower_hooks.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
test_start test_lower_hooks.sh "$@"

# op_names FILE: the lines of FILE's node section that name an op.
op_names() {
    sed -n '/^\/\* ---- the steps of a node/,/^\/\* ---- the entry points/p' "$1" |
        grep -nE 'MT_OP_[A-Z]|->op *[!=]=|\.op *[!=]=|mt__lower_moves_[a-z]'
}

node="$root/src/partition/node.c"
section=$(sed -n '/^\/\* ---- the steps of a node/,/^\/\* ---- the entry points/p' "$node" | wc -l)
if [ "$section" -gt 50 ] && grep -q '^mt_status mt__part_partition_node' \
       <(sed -n '/^\/\* ---- the steps of a node/,/^\/\* ---- the entry points/p' "$node"); then
    ok "node.c has the node section ($section lines, mt__part_partition_node in it)"
else
    bad "node.c has the node section" "no banner, or mt__part_partition_node outside it"
fi

found=$(op_names "$node")
if [ -z "$found" ]; then ok "the node loop names no op"
else bad "the node loop names no op" "$found"; fi

cp "$node" planted.c
sed -i '/^mt_status mt__part_partition_node/a\    if (c->op == MT_OP_LINEAR) return MT_OK;' planted.c
if op_names planted.c | grep -q 'MT_OP_LINEAR'; then ok "a planted op test is caught"
else bad "a planted op test is caught" "the check passed on a loop that tests MT_OP_LINEAR"; fi

# every hook a descriptor line names (GLOBAL(op, hook, ...)) is defined
missing=""
for hook in $(grep -oE '= GLOBAL(_PRODUCT)?\([a-z_]+, *[a-z_]+' "$root/src/graph/op_desc.c" |
              sed -E 's/.*, *//' | sort -u); do
    grep -qE "^mt_status mt__lower_moves_$hook\(" "$root"/src/graph/lower*.c ||
        missing="$missing mt__lower_moves_$hook"
done
if [ -z "$missing" ]; then ok "every hook op_desc.c names is defined in src/graph/lower*.c"
else bad "every hook op_desc.c names is defined" "missing:$missing"; fi

# the two ops whose rules move data inside or after them name their own hooks
for pair in linear:linear cross_entropy:cross_entropy; do
    op=${pair%%:*} hook=${pair##*:}
    if grep -qE "GLOBAL(_PRODUCT)?\($op, *$hook," "$root/src/graph/op_desc.c"; then
        ok "$op's descriptor names mt__lower_moves_$hook"
    else
        bad "$op's descriptor names mt__lower_moves_$hook" \
            "$(grep "($op," "$root/src/graph/op_desc.c")"
    fi
done

test_end
