# lib.sh — what the shell tests of the program share (sourced, not run):
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   test_start <name> "$@"      BIN = the program (absolute), BUILD = the build
#                               dir (2nd argument, or the program's folder),
#                               WORK = a new scratch directory, removed at exit;
#                               the script runs in it
#   ok NAME / bad NAME WHY      count a check; bad also shows err.txt, the
#                               stderr of the last run, when there is one
#   test_end                    "N passed, M failed"; the script's status
#
# Each test script runs the program its own way (expect, run, ...); this is
# only the bookkeeping every one of them needs.

pass=0
fail=0

test_start() {
    local name=$1
    shift
    BIN=$(realpath "${1:?usage: $name <meshtrain binary> [build dir]}")
    BUILD=${2:-$(dirname "$BIN")}
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-${name%.sh}.XXXXXX")
    # chmod: a case may leave a read-only directory behind
    trap 'chmod -R u+rwX "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
    cd "$WORK" || exit 1
}

ok() { pass=$((pass + 1)); echo "ok    $1"; }

bad() {
    fail=$((fail + 1))
    echo "FAIL  $1: $2"
    [ -s err.txt ] && sed 's/^/      | /' err.txt | head -20
    return 0
}

test_end() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
