#!/usr/bin/env bash
# test_strategy_free.sh — the partitioner knows no parallel strategy (issue
# 38, item 2): no member of its state (partition/partition_impl.h's
# `partitioner`), of the services it hands the lowering hooks
# (graph/op_desc.h's `mt_lower_services`) or of its public options
# (meshtrain/partition.h's `mt_partition_opts`) names one. A strategy is a
# row of rules (train/presets.c), a constraint on activations
# (mt_tensor_set_constraint) or a lowering variant chosen by name; its name
# belongs there, not in a member that every strategy after it would copy.
#
#   bash tests/test_strategy_free.sh [MESHTRAIN BUILD_DIR]   (ctest passes both; unused)
#
# A member name is split at '_' and each word compared with the strategy
# words below. The test first runs its reader on a struct with
# `seq_axes` and `collective_matmul` (the members this issue removed), and
# fails if it does not catch both: the check can fail.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# words that name a parallel strategy (or its usual abbreviation)
WORDS="seq sequence sp coll collective matmul cm ring megatron tensor tp fsdp zero
       pipe pipeline pp data dp expert experts ep moe context cp ulysses"

# members FILE STRUCT: the member names of `typedef struct { ... } STRUCT;`
members() {
    awk -v name="$2" '
        /^typedef struct[[:space:]]*\{/ { body = ""; inside = 1; next }
        inside && $0 ~ "^}[[:space:]]*" name "[[:space:]]*;" { print body; inside = 0; exit }
        inside { body = body "\n" $0 }
    ' "$1" |
    perl -0pe 's{/\*.*?\*/}{}gs' | tr '\n' ' ' | tr ';' '\n' |
    awk '/\(\*/ { if (match($0, /\(\*[ ]*[A-Za-z_][A-Za-z0-9_]*/)) {
                        n = substr($0, RSTART + 2, RLENGTH - 2); gsub(/ /, "", n); print n }
                    next }
         { n = split($0, piece, ",")
           for (i = 1; i <= n; i++) {
               p = piece[i]; sub(/\[[^]]*\][ ]*$/, "", p); sub(/[ ]+$/, "", p)
               if (match(p, /[A-Za-z_][A-Za-z0-9_]*$/)) print substr(p, RSTART, RLENGTH) } }'
}

# strategic NAME...: the names among NAME... that contain a strategy word
strategic() {
    for m in "$@"; do
        for part in ${m//_/ }; do
            for w in $WORDS; do
                if [ "$part" = "$w" ]; then echo "$m"; continue 3; fi
            done
        done
    done
    return 0
}

fail=0
# the reader can fail: a struct as the partitioner's was before
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
cat >"$tmp" <<'C'
typedef struct {
    void          *ctx;
    uint32_t       seq_axes;      /* sequence parallelism's axes (0: off) */
    bool           coll_matmul;
    mt_status  (*keep_partial)(void *ctx, mt_lower_step *st);
    char           lowerings[128];
} old_services;
C
found=$(strategic $(members "$tmp" old_services) | tr '\n' ' ')
if [ "$found" != "seq_axes coll_matmul " ]; then
    echo "strategy_free: the reader found '$found' in a struct with seq_axes and coll_matmul"
    fail=1
fi

check() {   # FILE STRUCT
    local names
    names=$(members "$1" "$2")
    if [ -z "$names" ]; then
        echo "strategy_free: no struct '$2' in $1 (renamed? update this test)"
        fail=1
        return
    fi
    local n
    n=$(echo "$names" | wc -w)
    for m in $(strategic $names); do
        echo "strategy_free: $2 ($1) has member '$m', which names a strategy; make the strategy" \
             "a row of rules, a constraint or a lowering variant instead"
        fail=1
    done
    [ $fail -eq 0 ] && echo "strategy_free: $2: $n members, none names a strategy"
    return 0
}
check src/partition/partition_impl.h partitioner
check src/graph/op_desc.h mt_lower_services
check include/meshtrain/partition.h mt_partition_opts
exit $fail
