#!/usr/bin/env bash
# test_hostile_mpi.sh — `meshtrain train` under mpirun with ranks that were
# not given the same command (issue 37, finding 5): an MPMD launch, as a
# wrapper script that adds a flag by rank, or a host with another copy of
# the data gives it. Before, a rank with other --layers made Open MPI abort
# (MPI_ERR_TRUNCATE, exit 15, no message of meshtrain's), one with fewer
# --steps exited 0 and left the other waiting for the timeout, and other
# --seed or --lr trained diverging replicas and exited 0. Now the ranks
# compare their settings before step 1: every rank exits 2, and rank 0 alone
# prints one line naming the first setting that differs and both values.
#
#   bash tests/test_hostile_mpi.sh <meshtrain binary> [<build dir>]
#
# The table is hostile.sh's, run by hostile_cases through mpi_one: exit |
# fragment of rank 0's stderr ("-": none wanted) | rank 0's flags : rank 1's
# flags (as mpirun's MPMD launch separates them; "-": none) | after-check
# (optional, a shell command run in the case's directory). Each rank runs
# `meshtrain train --data data.txt $MODEL <its flags>` (a flag given twice:
# the last one counts). A case
# passes when both ranks exit with the table's code, within the case's
# timeout (a hang fails: 124); for a failure, rank 0's stderr is one line
# starting "meshtrain: " and holding the fragment and rank 1 prints nothing;
# for a success, neither prints an error; no sanitizer spoke; and the
# after-check succeeds.
# Skips (exit 77) when meshtrain was built without MPI or mpirun is missing.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
test_start test_hostile_mpi.sh "$@"

if ! ldd "$BIN" 2>/dev/null | grep -q libmpi || ! command -v mpirun >/dev/null 2>&1; then
    echo "skip: meshtrain was built without MPI, or mpirun is missing"
    exit 77
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
# a rank left waiting (the old --steps case) ends at the collective's
# timeout, well inside the case's
export MT_COMM_TIMEOUT=${MT_COMM_TIMEOUT:-15}
CASE_TIMEOUT=60
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -x ASAN_OPTIONS -x MT_COMM_TIMEOUT)

mkdir fix && cd fix || exit 1
head -c 60000 /dev/urandom | base64 >data.txt
cp data.txt copy.txt                        # the same data under another name
head -c 60000 /dev/urandom | base64 >other.txt   # other data of the same kind
# llm.c shards (tests/test_shards_cli.sh's): corpus, the same in corpus2,
# and corpus3 with one train shard of the same size but other tokens
shard() {
    python3 - "$@" <<'PY'
import struct, sys
path, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with open(path, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *[(i * 37 + seed * 11 + i // 7) % 97 for i in range(n)]))
PY
}
mkdir corpus corpus3
shard corpus/tiny_val_000000.bin 200 9
shard corpus/tiny_train_000001.bin 300 1
shard corpus/tiny_train_000002.bin 300 2
cp -a corpus corpus2
cp corpus/tiny_val_000000.bin corpus/tiny_train_000001.bin corpus3/
shard corpus3/tiny_train_000002.bin 300 5
cd "$WORK" || exit 1

MODEL="--layers 1 --channels 16 --heads 2 --max-seq 8 --seq 8 --batch 4 --steps 3"
M="--devices 2 --mesh data=2"

# each rank through sh, which writes its exit status to exit.R and its
# stderr to err.R.txt
RANK_CMD='ex=$1; shift; "$ex" "$@" 2>err.$OMPI_COMM_WORLD_RANK.txt; echo $? >exit.$OMPI_COMM_WORLD_RANK'

mpi_one() {
    local n=$1 code=$2 frag=$3 f0=${4%% : *} f1=${4#* : } after=$5
    local name="case $n: rank 0 [$f0] rank 1 [$f1]"
    rm -rf "$WORK/case" && cp -a "$WORK/fix" "$WORK/case" && cd "$WORK/case" || exit 1
    local -a a0 a1
    [ "$f0" = "-" ] && f0=""
    [ "$f1" = "-" ] && f1=""
    eval "a0=($f0)"
    eval "a1=($f1)"
    timeout -k 5 "$CASE_TIMEOUT" "${MPIRUN[@]}" \
        -np 1 sh -c "$RANK_CMD" sh "$BIN" train --data data.txt $MODEL "${a0[@]}" : \
        -np 1 sh -c "$RANK_CMD" sh "$BIN" train --data data.txt $MODEL "${a1[@]}" \
        >out.txt 2>mpirun.txt </dev/null
    local rc=$? why="" r e
    [ "$rc" -eq 124 ] && why="timed out after $CASE_TIMEOUT s: a hang"
    for r in 0 1; do
        e=$(cat "exit.$r" 2>/dev/null || echo "none")
        [ "$e" = "$code" ] || why="${why:+$why; }rank $r exit $e, want $code"
    done
    cat err.0.txt >err.txt 2>/dev/null   # where bad() looks
    if [ "$frag" != "-" ] && ! grep -qF -- "$frag" err.0.txt 2>/dev/null; then
        why="${why:+$why; }rank 0's stderr lacks '$frag'"
    fi
    if [ "$code" -ne 0 ]; then
        [ "$(grep -c . err.0.txt 2>/dev/null)" = 1 ] && head -1 err.0.txt | grep -q '^meshtrain: ' ||
            why="${why:+$why; }rank 0's stderr is not one line starting 'meshtrain: '"
        [ -s err.1.txt ] && why="${why:+$why; }rank 1 printed: $(head -c 200 err.1.txt)"
    elif grep -q '^meshtrain: ' err.0.txt err.1.txt 2>/dev/null; then
        why="${why:+$why; }a rank printed an error"
    fi
    grep -qE 'runtime error:|AddressSanitizer|LeakSanitizer' err.0.txt err.1.txt 2>/dev/null &&
        why="${why:+$why; }a sanitizer reported"
    if [ -n "$after" ] && ! (eval "$after") >/dev/null 2>&1; then
        why="${why:+$why; }after-check failed: $after"
    fi
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
    cd "$WORK" || exit 1
}

D="the ranks disagree on"
hostile_cases mpi_one <<EOF
# ---- the settings differ: every rank exits 2 before step 1, rank 0 names the first ----
2 | $D --layers: rank 0 has 1, rank 1 has 2; every rank must run the same command | $M : $M --layers 2
2 | $D --steps: rank 0 has 3, rank 1 has 2 | $M : $M --steps 2
2 | $D --seed: rank 0 has 1, rank 1 has 2 | $M --seed 1 : $M --seed 2
2 | $D --lr: rank 0 has 0.001, rank 1 has 0.002 | $M --lr 0.001 : $M --lr 0.002
2 | $D --mesh: rank 0 has data=2, rank 1 has none | $M : -
2 | $D --mesh: rank 0 has data=2, rank 1 has fsdp=2 | $M : --mesh fsdp=2
# a flag on one rank only
2 | $D --sequence-parallel: rank 0 has off, rank 1 has on | $M : $M --sequence-parallel
2 | $D --ckpt-out: rank 0 has 'a.ckpt', rank 1 has none | $M --ckpt-out a.ckpt : $M | test ! -e a.ckpt
2 | $D --accum (--microbatches): rank 0 has 1, rank 1 has 2 | $M : $M --microbatches 2
2 | $D --remat: rank 0 has none, rank 1 has full | $M : $M --remat full
# the data by its contents: another file of the same kind is other data
2 | $D --data: rank 0 has 'data.txt' ( | $M : $M --data other.txt
2 | $D --data: rank 0 has 'corpus' (3 shards, 4672 bytes, checksum | $M --data corpus : $M --data corpus3
# ---- what may differ: the paths of the same data, the outputs' paths (rank 0 writes), threads, logs ----
0 | - | $M --threads 1 --metrics m.jsonl --ckpt-out a.ckpt : $M --data copy.txt --threads 2 --ckpt-out b.ckpt --quiet --profile | test -s a.ckpt && test ! -e b.ckpt && test ! -e b.ckpt.tmp && [ \$(grep -c loss m.jsonl) = 3 ]
0 | - | $M --data corpus : $M --data 'corpus2/*.bin'
# --devices 2 alone is the mesh data=2, and no --devices on a mesh is one a rank
0 | - | --devices 2 : --mesh data=2
EOF

# ---- a flag one rank cannot parse: that rank says so, and nobody waits ----------
rm -rf "$WORK/case" && cp -a "$WORK/fix" "$WORK/case" && cd "$WORK/case" || exit 1
t0=$(date +%s)
timeout -k 5 "$CASE_TIMEOUT" "${MPIRUN[@]}" \
    -np 1 "$BIN" train --data data.txt $MODEL $M : \
    -np 1 "$BIN" train --data data.txt $MODEL $M --no-such-flag >out.txt 2>err.txt </dev/null
rc=$?
secs=$(($(date +%s) - t0))
if [ "$rc" -eq 2 ] && grep -q "no-such-flag" err.txt && [ "$secs" -lt 30 ]; then
    ok "a flag only rank 1 has and cannot parse: mpirun exits 2 in $secs s, naming it"
else bad "a flag only rank 1 has and cannot parse" "mpirun exit $rc after $secs s"; fi
cd "$WORK" || exit 1

test_end
