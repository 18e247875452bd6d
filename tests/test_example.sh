#!/usr/bin/env bash
# test_example.sh — `meshtrain example linreg` computes the same training run
# on every mesh: the per-step losses of --devices 2, 4 and 8 (threads), and of
# `mpirun -np 2` and `-np 1` when meshtrain was built with MPI, equal the
# 1-device run's; under mpirun an unwritable trace fails every rank.
#
#   bash tests/test_example.sh <meshtrain binary> [<build dir>]
#
# Losses are compared as numbers (relative 1e-6) rather than with diff: they
# agree to the bit in practice (the example pmeans in float64, see
# src/examples/linreg_pmap.c), but a rounding tie could flip a last printed
# digit one run in a billion, and a diff would call that a failure. Also checks
# the --trace file (with python3's json module when there is one) and the
# usage errors. Every run is under `timeout 120`.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_example.sh "$@"

# run NAME OUTFILE ARGS...: runs ARGS (a command line) and keeps stdout in
# OUTFILE; fails the check when the exit code is not 0.
run() {
    local name=$1 out=$2
    shift 2
    timeout 120 "$@" >"$out" 2>err.txt
    local rc=$?
    if [ "$rc" -ne 0 ]; then bad "$name" "exit $rc"; return 1; fi
    return 0
}

# same_losses NAME A B: the "step N  loss X" lines of A and B agree, step by
# step, to relative 1e-6, and there are as many as expected.
same_losses() {
    local name=$1 a=$2 b=$3 why
    why=$(awk -v steps="$STEPS" '
        FNR == NR && $1 == "step" { want[$2] = $4; n++; next }
        $1 == "step" {
            m++
            if (!($2 in want)) { print "step " $2 " only in the second run"; exit }
            d = $4 - want[$2]; if (d < 0) d = -d
            w = want[$2]; if (w < 0) w = -w
            if (d > 1e-6 * w) { print "step " $2 ": loss " $4 ", 1 device " want[$2]; exit }
        }
        END { if (n != steps || m != steps) print n " and " m " loss lines, want " steps }
    ' "$a" "$b")
    if [ -z "$why" ]; then ok "$name"; else : >err.txt; bad "$name" "$why"; fi
}

STEPS=20
ARGS=(example linreg --steps "$STEPS" --batch 128 --seed 7)

# ---- threads ------------------------------------------------------------------

if run "1 device" one.txt "$BIN" "${ARGS[@]}" --devices 1; then
    if grep -Eq '^step +1  loss [0-9]\.[0-9]{6}e[+-][0-9]+$' one.txt &&
       grep -q '^params  w = \[' one.txt; then
        ok "1 device prints losses and params"
    else
        : >err.txt; bad "1 device prints losses and params" "$(head -3 one.txt)"
    fi
    last=$(awk '$1 == "step" { l = $4 } END { print l }' one.txt)
    if awk -v l="$last" 'BEGIN { exit !(l < 1e-2) }'; then ok "1 device learns (final loss $last)"
    else : >err.txt; bad "1 device learns" "final loss $last"; fi
fi

for n in 2 4 8; do
    if run "$n devices" dev$n.txt "$BIN" "${ARGS[@]}" --devices $n; then
        same_losses "$n devices = 1 device" one.txt dev$n.txt
    fi
done

# the default device count outside mpirun is 1
if run "default devices" default.txt "$BIN" "${ARGS[@]}"; then
    same_losses "default = 1 device" one.txt default.txt
fi

# ---- trace --------------------------------------------------------------------

if run "trace" trace_out.txt "$BIN" "${ARGS[@]}" --devices 4 --trace t.json; then
    if head -c 16 t.json | grep -q '^{"traceEvents":\[' &&
       [ "$(grep -o '"thread_name"' t.json | wc -l)" -eq 4 ] &&
       grep -q '"cat":"comm"' t.json && grep -q '"name":"step"' t.json; then
        ok "trace has 4 tracks, comm events and step regions"
    else
        : >err.txt; bad "trace has 4 tracks, comm events and step regions" "$(head -c 300 t.json)"
    fi
    if command -v python3 >/dev/null 2>&1; then
        if python3 - t.json >err.txt 2>&1 <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
assert x and all(e["dur"] >= 0 and "ts" in e and "tid" in e for e in x), "bad complete events"
assert {e["tid"] for e in x} == {0, 1, 2, 3}, "events on tracks %s" % {e["tid"] for e in x}
comm = [e for e in x if e["cat"] == "comm"]
assert comm and all("bytes" in e["args"] and "seq" in e["args"] for e in comm), "comm args"
EOF
        then ok "trace is valid JSON (python3)"; else bad "trace is valid JSON (python3)" "see above"; fi
    fi
    same_losses "tracing does not change the losses" one.txt trace_out.txt
fi

# ---- usage errors ---------------------------------------------------------------

expect_usage() {
    local name=$1 re=$2
    shift 2
    timeout 60 "$BIN" "$@" >out.txt 2>err.txt
    local rc=$?
    if [ "$rc" -eq 2 ] && grep -Eqi -- "$re" err.txt; then ok "$name"
    else bad "$name" "exit $rc (want 2), stderr should match /$re/"; fi
}
expect_usage "batch does not divide" "batch 100.*devices 3" example linreg --batch 100 --devices 3
expect_usage "unknown example" "unknown example 'mlp'" example mlp
expect_usage "example without a name" "linreg" example

# ---- MPI ----------------------------------------------------------------------

# meshtrain was built with MPI when it links libmpi (CMake builds the mpi
# transport whenever it finds Open MPI); the cache is a second opinion.
with_mpi=0
if ldd "$BIN" 2>/dev/null | grep -q 'libmpi'; then
    with_mpi=1
elif [ -f "$BUILD/CMakeCache.txt" ] && grep -Eq '^MT_HAVE_MPI[^=]*=(ON|TRUE|1)$' "$BUILD/CMakeCache.txt"; then
    with_mpi=1
fi
if [ "$with_mpi" -eq 1 ] && command -v mpirun >/dev/null 2>&1; then
    # Open MPI's own allocations count as leaks under ASan (as in CMakeLists.txt)
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    MPIRUN=(mpirun --allow-run-as-root --oversubscribe -x ASAN_OPTIONS)
    if run "mpirun -np 2" mpi2.txt "${MPIRUN[@]}" -np 2 "$BIN" "${ARGS[@]}"; then
        same_losses "mpirun -np 2 = 1 device" one.txt mpi2.txt
        if [ "$(grep -c '^params' mpi2.txt)" -eq 1 ]; then ok "only rank 0 prints"
        else : >err.txt; bad "only rank 0 prints" "$(grep -c '^params' mpi2.txt) params lines"; fi
    fi
    if run "mpirun -np 2 --trace" mpi2t.txt "${MPIRUN[@]}" -np 2 "$BIN" "${ARGS[@]}" --trace m.json; then
        if [ "$(grep -o '"thread_name"' m.json 2>/dev/null | wc -l)" -eq 2 ]; then
            ok "mpirun trace gathers both ranks"
        else : >err.txt; bad "mpirun trace gathers both ranks" "$(ls m.json* 2>&1)"; fi
    fi
    # one rank: auto picks the threads transport (as mt_launch does for a
    # world of 1), where the default device count must be 1, not "the world
    # size" (it failed: "no device count")
    if run "mpirun -np 1" mpi1.txt "${MPIRUN[@]}" -np 1 "$BIN" "${ARGS[@]}"; then
        same_losses "mpirun -np 1 = 1 device" one.txt mpi1.txt
    fi
    # rank 0 cannot write the trace: every rank fails, naming the path asked
    # for (rank 0 used to name '<path>.0' and rank 1 to exit 0)
    timeout 120 "${MPIRUN[@]}" -np 2 sh -c '"$0" "$@" 2>err.$OMPI_COMM_WORLD_RANK.txt; echo "rank $OMPI_COMM_WORLD_RANK exit $?"' \
        "$BIN" "${ARGS[@]}" --trace /nonexistent/t.json >ranks.txt 2>err.txt
    if grep -q '^rank 0 exit 1$' ranks.txt && grep -q '^rank 1 exit 1$' ranks.txt &&
       grep -q "'/nonexistent/t.json'" err.0.txt; then
        ok "mpirun: an unwritable trace fails every rank"
    else
        : >err.txt; bad "mpirun: an unwritable trace fails every rank" \
            "$(cat ranks.txt err.0.txt 2>&1 | tr '\n' ' ' | head -c 400)"
    fi
else
    echo "skip  mpirun runs (meshtrain built without MPI, or no mpirun)"
fi

test_end
