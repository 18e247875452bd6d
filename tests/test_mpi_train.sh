#!/usr/bin/env bash
# test_mpi_train.sh — `meshtrain train` under mpirun over one shared
# directory (issue 25 §2): only rank 0 checks and writes the outputs, and the
# ranks agree on the start-up checks before any of them starts.
#
#   bash tests/test_mpi_train.sh <meshtrain binary> [<build dir>]
#
# Checks, each run under `timeout 120`:
#   - 2 ranks on data=2 with --metrics, --ckpt-out and --trace in one
#     directory, five times over: every run exits 0 (every rank of a run
#     used to create and remove probe files beside the outputs, and "cannot
#     create it: File exists" came in 2 of 20 runs), the losses equal the
#     one-device run's (relative 1e-5), each output is there once and no
#     probe or temporary file is left;
#   - rank 1 alone fails its checks (its --data is missing, as on a host
#     without the file; an MPMD launch): both ranks exit 1 within 20 s, rank
#     0 names rank 1, and nothing is written;
#   - rank 0 alone fails (its --ckpt-out is being written by another run, a
#     lock only the writer takes): both ranks exit 1, rank 0 names the lock.
# Skips (exit 77) when meshtrain was built without MPI or mpirun is missing.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_mpi_train.sh "$@"

if ! ldd "$BIN" 2>/dev/null | grep -q libmpi || ! command -v mpirun >/dev/null 2>&1; then
    echo "skip: meshtrain was built without MPI, or mpirun is missing"
    exit 77
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPIRUN=(timeout 120 mpirun --allow-run-as-root --oversubscribe -x ASAN_OPTIONS)

head -c 100000 /dev/urandom | base64 >data.txt
STEPS=4
MODEL=(--layers 1 --channels 32 --heads 2 --max-seq 16 --seq 16 --batch 4 --steps $STEPS)
MESH=(--devices 2 --mesh data=2)

# losses FILE: the "loss" of each metrics line, one a line
losses() { sed -n 's/.*"loss":\([^,]*\),.*/\1/p' "$1"; }

# same_losses NAME A B: metrics A and B have $STEPS losses, equal to 1e-5
same_losses() {
    local why
    why=$(paste <(losses "$2") <(losses "$3") | awk -v n="$STEPS" '
        { m++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * ($1 < 0 ? -$1 : $1)) {
              print "step " m ": " $1 " vs " $2; exit } }
        END { if (m != n) print m " steps, want " n }')
    if [ -z "$why" ]; then ok "$1"; else bad "$1" "$why"; fi
}

# ranks OUT CMD...: runs CMD on each rank through sh, which prints
# "rank R exit C" to OUT; the ranks' stderr go to err.R.txt
rank_cmd() { echo 'ex=$1; shift; "$ex" "$@" 2>err.$OMPI_COMM_WORLD_RANK.txt; echo "rank $OMPI_COMM_WORLD_RANK exit $?"'; }

if timeout 120 "$BIN" train --data data.txt "${MODEL[@]}" --metrics one.jsonl >one.txt 2>err.txt
then ok "one device"; else bad "one device" "exit $?"; fi

# ---- one shared directory, five runs ------------------------------------------

clean=0
for i in 1 2 3 4 5; do
    rm -rf out && mkdir out
    "${MPIRUN[@]}" -np 2 "$BIN" train --data data.txt "${MODEL[@]}" "${MESH[@]}" \
        --metrics out/m.jsonl --ckpt-out out/m.ckpt --trace out/t.json >out.txt 2>err.txt
    rc=$?
    left=$(cd out && ls | grep -Evx 'm\.jsonl|m\.ckpt|t\.json' | tr '\n' ' ')
    if [ "$rc" -ne 0 ] || [ -n "$left" ] || [ ! -s out/m.ckpt ] || [ ! -s out/t.json ]; then
        bad "shared directory, run $i" "exit $rc; left behind: '${left}'; $(ls out | tr '\n' ' ')"
    else
        clean=$((clean + 1))
    fi
done
[ "$clean" -eq 5 ] && ok "five runs over one directory: exit 0, each output once, nothing left"
same_losses "mpirun data=2 = one device" one.jsonl out/m.jsonl
if [ "$(grep -c '^done:' out.txt)" -eq 1 ]; then ok "only rank 0 prints"
else bad "only rank 0 prints" "$(grep -c '^done:' out.txt) summaries"; fi

# ---- one rank fails its checks ------------------------------------------------

rm -rf out && mkdir out
t0=$(date +%s.%N)
"${MPIRUN[@]}" -np 1 sh -c "$(rank_cmd)" sh "$BIN" train --data data.txt "${MODEL[@]}" "${MESH[@]}" \
    --metrics out/m.jsonl --ckpt-out out/m.ckpt : \
    -np 1 sh -c "$(rank_cmd)" sh "$BIN" train --data missing.txt "${MODEL[@]}" "${MESH[@]}" \
    --metrics out/m.jsonl --ckpt-out out/m.ckpt >ranks.txt 2>err.txt
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
cat err.0.txt err.1.txt >err.txt 2>/dev/null
if grep -qx 'rank 0 exit 1' ranks.txt && grep -qx 'rank 1 exit 1' ranks.txt; then
    ok "rank 1 fails its checks: both ranks exit 1"
else bad "rank 1 fails its checks: both ranks exit 1" "$(tr '\n' ';' <ranks.txt)"; fi
grep -q "'missing.txt'" err.1.txt && grep -q "rank 1 of 2 failed its start-up checks" err.0.txt \
    && ok "rank 1 names its file, rank 0 names rank 1" \
    || bad "rank 1 names its file, rank 0 names rank 1" "see the messages"
awk -v s="$secs" 'BEGIN { exit !(s < 20) }' && ok "nobody waits for a timeout ($secs s)" \
    || bad "nobody waits for a timeout" "$secs s"
[ -z "$(ls out)" ] && ok "nothing written" || bad "nothing written" "$(ls out | tr '\n' ' ')"

# ---- rank 0 alone fails: another run holds the checkpoint ---------------------

timeout 120 "$BIN" train --data data.txt "${MODEL[@]}" --steps 1000000 --ckpt-out held.ckpt \
    >hold.txt 2>&1 &
holder=$!
for _ in $(seq 100); do [ -e held.ckpt.tmp ] && break; sleep 0.1; done
"${MPIRUN[@]}" -np 2 sh -c "$(rank_cmd)" sh "$BIN" train --data data.txt "${MODEL[@]}" "${MESH[@]}" \
    --ckpt-out held.ckpt >ranks.txt 2>err.txt
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
cat err.0.txt >err.txt
if grep -qx 'rank 0 exit 1' ranks.txt && grep -qx 'rank 1 exit 1' ranks.txt &&
   grep -q "another run is writing it" err.0.txt; then
    ok "rank 0's output is held by another run: both ranks exit 1"
else bad "rank 0's output is held by another run: both ranks exit 1" "$(tr '\n' ';' <ranks.txt)"; fi

test_end
