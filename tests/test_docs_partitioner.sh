#!/usr/bin/env bash
# test_docs_partitioner.sh — docs/partitioner.md's program is what the suite
# runs, and it does what the guide says: the program block of the guide is
# docs/examples/partition_lm.c, byte for byte; that file builds against the
# library and headers as a user's program would (-Wall -Wextra -Werror, the
# build dir's shared library, the sanitizers of a sanitizer build); and its
# output, read as numbers, shows the partitioned runs equal to the one-device
# run (loss within 1e-5, largest gradient difference under 1e-5, on
# data=2,tensor=2 and on fsdp=2,tensor=2 with gather_axes), the shard_map
# program with nothing declared giving the global gradient, and explicit mode
# refusing the row-parallel product's partial sum with the reshard that
# decides it named.
#
#   bash tests/test_docs_partitioner.sh <meshtrain binary> <build dir>
set -u

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$SRC/tests/lib.sh"
[ $# -ge 2 ] && set -- "$1" "$(realpath "$2")" "${@:3}"   # test_start cds away
test_start test_docs_partitioner.sh "$@"

DOC=$SRC/docs/partitioner.md
PROG=$SRC/docs/examples/partition_lm.c

# the guide's block, between its markers, without the fence lines
sed -n '/<!-- partition_lm.c begins/,/<!-- partition_lm.c ends/p' "$DOC" | sed '1,2d;$d' | sed '$d' \
    >from_doc.c
if cmp -s from_doc.c "$PROG"; then
    ok "the guide's program is docs/examples/partition_lm.c"
else
    bad "the guide's program is docs/examples/partition_lm.c" \
        "they differ: $(diff from_doc.c "$PROG" | head -3 | tr '\n' ' ')"
fi

cache=$BUILD/CMakeCache.txt
CC=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$cache" 2>/dev/null | head -1)
[ -x "$CC" ] || CC=cc
SAN=$(sed -n 's/^MT_SANITIZE:[A-Z]*=//p' "$cache" 2>/dev/null | head -1)
SANFLAGS=""
[ -n "$SAN" ] && SANFLAGS="-fsanitize=$SAN"
if ! "$CC" -std=c11 -Wall -Wextra -Werror -g $SANFLAGS -I"$SRC/include" "$PROG" \
        -L"$BUILD" -lmeshtrain -Wl,-rpath,"$BUILD" -lm -o partition_lm 2>build.txt; then
    bad "partition_lm.c builds against the library" "$(head -5 build.txt | tr '\n' ' ')"
    test_end
    exit
fi
ok "partition_lm.c builds against the library with -Wall -Wextra -Werror"

timeout 120 ./partition_lm >out.txt 2>err.txt
rc=$?
if [ "$rc" -ne 0 ]; then
    bad "partition_lm runs" "exit $rc: $(head -3 err.txt | tr '\n' ' ')"
    test_end
    exit
fi
ok "partition_lm runs"
grep -qE 'runtime error:|Sanitizer' err.txt && bad "no sanitizer report" "$(head -3 err.txt)"

one=$(sed -n 's/^one device: loss \([0-9.]*\)$/\1/p' out.txt)
for mesh in data=2,tensor=2 fsdp=2,tensor=2; do
    line=$(grep "^$mesh: " out.txt)
    loss=$(sed -n 's/.*: loss \([0-9.]*\),.*/\1/p' <<<"$line")
    diff=$(sed -n 's/.*largest gradient difference \([0-9.e+-]*\)$/\1/p' <<<"$line")
    if [ -n "$one" ] && [ -n "$loss" ] && [ -n "$diff" ] &&
        awk -v a="$one" -v b="$loss" -v d="$diff" \
            'BEGIN { e = a - b; if (e < 0) e = -e; exit !(e <= 1e-5 && d + 0 < 1e-5) }'; then
        ok "$mesh: loss $loss against $one, gradients within $diff"
    else
        bad "$mesh equals one device" "line '$line', one device '$one'"
    fi
done

diff=$(sed -n 's/^shard_map, data=4, nothing declared: largest wte gradient difference \([0-9.e+-]*\)$/\1/p' out.txt)
if [ -n "$diff" ] && awk -v d="$diff" 'BEGIN { exit !(d + 0 < 1e-5) }'; then
    ok "shard_map with nothing declared: the global gradient (within $diff)"
else
    bad "shard_map with nothing declared gives the global gradient" "$(grep shard_map out.txt)"
fi

refusal=$(grep '^explicit mode refused: ' out.txt)
if [[ $refusal == *"partial sum"* && $refusal == *"reshard"* && $refusal == *"'w2'"* &&
      $refusal != *"act."* && $refusal != *"gather_axes"* ]]; then
    ok "explicit mode refuses the partial sum, naming w2 and the reshard"
else
    bad "explicit mode's refusal" "'$refusal'"
fi
grep -q '^explicit mode with a reshard: accepted$' out.txt &&
    ok "explicit mode accepts the program with the reshard" ||
    bad "explicit mode with a reshard" "$(tail -2 out.txt)"

test_end
