#!/usr/bin/env bash
# test_reliability.sh — issue 7: nothing a user types loses their data.
#
#   bash tests/test_reliability.sh <meshtrain binary> [<build dir>]
#
# One case per mistake of the issue, each checked against an expectation
# written here (exit code, message fragments, bytes and types of files),
# never against the program's own idea of success. Sections follow the issue:
#   §1 outputs never destroy what they should not
#   §2 fail before the work
#   §3 write errors are errors
#   §4 signals and resumes
#   §5 nothing hangs
#   §6 messages that point the right way
#
# Safety: the device cases run against copies of the scenario in a temporary
# directory (a symbolic link to /dev/null, a device node made with mknod, a
# FIFO), so a regression replaces a file of the test, not /dev/null. The real
# /dev/null and /dev/full are used as outputs only after the copies were
# refused, and only as a last check that they are still character devices.
# Every run has a time limit (`timeout`, or a watchdog for the runs that are
# signalled), so a hang fails its case instead of the suite.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_reliability.sh "$@"

# run ARGS...: the program under `timeout $LIMIT` (60 s), stdout in out.txt,
# stderr in err.txt, the exit code in $rc.
LIMIT=60
run() { timeout "$LIMIT" "$BIN" "$@" >out.txt 2>err.txt; rc=$?; note_san; }

# note_san: keeps err.txt when it holds a sanitizer report (ASan builds run
# this script too, and an expected exit 1 would hide one); checked at the end.
: >san.log
note_san() {
    if grep -Eq 'Sanitizer|runtime error:' err.txt; then
        { echo "---- $(head -c 200 out.txt | head -1)"; head -30 err.txt; } >>san.log
    fi
}

# expect NAME CODE REGEX ARGS...: exit CODE and stderr matching REGEX
# (extended, case-insensitive).
expect() {
    local name=$1 code=$2 re=$3
    shift 3
    run "$@"
    local why=""
    [ "$rc" -eq "$code" ] || why="exit $rc, want $code"
    grep -Eqi -- "$re" err.txt || why="${why:+$why; }stderr does not match /$re/"
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
}

# check NAME WHAT COMMAND...: a plain assertion; WHAT says what went wrong.
check() {
    local name=$1 what=$2
    shift 2
    if "$@"; then ok "$name"; else : >err.txt; bad "$name" "$what"; fi
}

# no_steps: the run did no training (it was refused before step 1).
no_steps() { ! grep -q 'step [0-9]' out.txt; }

# lines FILE: its number of lines (0 when missing).
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

# wait_lines FILE N SECONDS: until FILE has N lines; false after SECONDS.
wait_lines() {
    local end=$((SECONDS + $3))
    while [ "$(lines "$1")" -lt "$2" ]; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.05
    done
}

# start ARGS...: the program in the background (stdout bg.out, stderr
# bg.err), its pid in $pid, with a watchdog that kills it after 60 s.
start() {
    "$BIN" "$@" >bg.out 2>bg.err &
    pid=$!
    (sleep 60; kill -9 "$pid" 2>/dev/null) >/dev/null 2>&1 &
    dog=$!
}
# finish: waits for the background run; its exit code in $rc.
finish() {
    { wait "$pid"; rc=$?; } 2>/dev/null   # without bash's "Killed" notice
    kill "$dog" 2>/dev/null
    wait "$dog" 2>/dev/null
    cp bg.err err.txt
    note_san
}

# u32_at FILE OFFSET: the little-endian u32 stored there.
u32_at() {
    local b
    b=($(od -An -v -tu1 -j "$2" -N 4 "$1"))
    echo $((b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24))
}
# set_crc FILE: rewrites a checkpoint's trailer with the CRC-32 of the bytes
# before it. gzip's trailer holds the same CRC-32 (IEEE, little-endian).
set_crc() {
    local n=$(($(wc -c <"$1") - 4))
    head -c "$n" "$1" | gzip -c | tail -c 8 | head -c 4 |
        dd of="$1" bs=1 seek="$n" conv=notrunc status=none
}
# put_nan FILE OFFSET: a float NaN (0x7fc00000) at OFFSET.
put_nan() { printf '\000\000\300\177' | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }

# ---- inputs ----------------------------------------------------------------

for i in $(seq 400); do echo "line $i: the quick brown fox jumps over the lazy dog"; done >data.txt
cp data.txt data.orig
TINY=(--layers 1 --channels 16 --heads 2 --max-seq 16 --seq 16 --batch 4 --threads 1)
# steps of ~25 ms and saves of ~20 MB: a signal is likely to land in a save
BIG=(--layers 2 --channels 256 --heads 4 --max-seq 16 --seq 16 --batch 2 --threads 1)
run train --data data.txt "${TINY[@]}" --steps 5 --ckpt-out run.ckpt --llmc-out run.llmc --quiet
[ "$rc" -eq 0 ] || { echo "FAIL  setup: train exited $rc"; cat err.txt; exit 1; }
cp run.ckpt run.orig

# ==== §1 outputs never destroy what they should not ==========================

ln -s /dev/null null-link
expect "§1 --ckpt-out to /dev/null (a link to it) is refused" 1 "character device" \
       train --data data.txt "${TINY[@]}" --steps 2 --ckpt-out null-link
refused=0
[ "$rc" -eq 1 ] && no_steps && refused=1
check "§1 ... before training, and the link is still a link to a device" \
      "the link was replaced or steps ran" \
      eval 'no_steps && [ -L null-link ] && [ -c null-link ]'
ln -s /dev/full full-link
expect "§1 --llmc-out to /dev/full (a link to it) is refused" 1 "character device" \
       train --data data.txt "${TINY[@]}" --steps 2 --llmc-out full-link
[ "$rc" -eq 1 ] && no_steps || refused=0
check "§1 ... and the link is still a link to a device" "replaced" \
      eval '[ -L full-link ] && [ -c full-link ]'
if mknod devnull c 1 3 2>/dev/null; then
    expect "§1 --ckpt-out a device node (a copy of /dev/null) is refused" 1 "character device" \
           train --data data.txt "${TINY[@]}" --steps 2 --ckpt-out devnull
    check "§1 ... and it is still a character device" "replaced by a file" test -c devnull
else
    echo "skip  §1 --ckpt-out a device node (mknod needs root)"
fi
mkfifo out.fifo
expect "§1 --ckpt-out a FIFO is refused" 1 "FIFO" \
       train --data data.txt "${TINY[@]}" --steps 2 --ckpt-out out.fifo
check "§1 ... and it is still a FIFO" "replaced" test -p out.fifo
expect "§1 --metrics a FIFO is refused, not opened (which blocks)" 1 "FIFO" \
       train --data data.txt "${TINY[@]}" --steps 2 --metrics out.fifo
mkdir outdir
expect "§1 --ckpt-out a directory is refused" 1 "outdir.*directory" \
       train --data data.txt "${TINY[@]}" --steps 2 --ckpt-out outdir
check "§1 ... before step 1" "steps ran" no_steps
# the real nodes, only once the copies above were refused
if [ "$refused" -eq 1 ] && [ "$(id -u)" = 0 ]; then
    expect "§1 --ckpt-out /dev/null is refused" 1 "/dev/null.*character device" \
           train --data data.txt "${TINY[@]}" --steps 1 --ckpt-out /dev/null
    expect "§1 --llmc-out /dev/full is refused" 1 "/dev/full.*character device" \
           train --data data.txt "${TINY[@]}" --steps 1 --llmc-out /dev/full
    check "§1 /dev/null and /dev/full are still character devices" "replaced" \
          eval '[ -c /dev/null ] && [ -c /dev/full ]'
fi

expect "§1 --ckpt-out naming the --data file" 2 "--ckpt-out 'data.txt'.*same file.*--data" \
       train --data data.txt "${TINY[@]}" --steps 2 --ckpt-out data.txt
expect "§1 --metrics naming the --data file as ./data.txt" 2 "--metrics.*same file.*--data" \
       train --data data.txt "${TINY[@]}" --steps 2 --metrics ./data.txt
check "§1 ... and the data are untouched" "data.txt changed" cmp -s data.txt data.orig
expect "§1 --metrics naming the --ckpt-in file" 2 "--metrics.*same file.*--ckpt-in" \
       train --data data.txt "${TINY[@]}" --steps 7 --ckpt-in run.ckpt --metrics run.ckpt
check "§1 ... and the checkpoint is untouched" "run.ckpt changed" cmp -s run.ckpt run.orig
expect "§1 --llmc-out equal to --ckpt-out" 2 "--ckpt-out.*--llmc-out.*same file" \
       train --data data.txt "${TINY[@]}" --steps 2 --ckpt-out both.bin --llmc-out both.bin
ln data.txt hardlink.txt
expect "§1 --llmc-out a hard link of the --data file" 2 "--llmc-out.*same file.*--data" \
       train --data data.txt "${TINY[@]}" --steps 2 --llmc-out hardlink.txt
ln -s data.txt symlink.txt
expect "§1 --metrics a symbolic link to the --data file" 2 "--metrics.*same file.*--data" \
       train --data data.txt "${TINY[@]}" --steps 2 --metrics symlink.txt
check "§1 ... and the data are untouched" "data.txt changed" cmp -s data.txt data.orig
expect "§1 --ckpt-out whose temporary file is the --metrics file" 2 "temporary file.*--metrics" \
       train --data data.txt "${TINY[@]}" --steps 2 --ckpt-out m.log --metrics m.log.tmp
cp run.orig inplace.ckpt
run train --data data.txt "${TINY[@]}" --steps 7 --ckpt-in inplace.ckpt --ckpt-out ./inplace.ckpt
check "§1 --ckpt-in X --ckpt-out ./X (resume in place) is allowed" "exit $rc" \
      eval '[ "$rc" -eq 0 ] && grep -q "done: 2 steps (6..7)" out.txt'
run train --data data.txt "${TINY[@]}" --steps 8 --ckpt-in inplace.ckpt --ckpt-out inplace.ckpt
check "§1 ... and resuming from it again continues at step 8" "exit $rc" \
      eval '[ "$rc" -eq 0 ] && grep -q "done: 1 steps (8..8)" out.txt'
expect "§1 bench --csv to /dev/null (a link to it) is refused" 1 "--csv.*character device" \
       bench collectives --devices 2 --max-bytes 1k --csv null-link
expect "§1 example --trace a FIFO is refused" 1 "--trace.*FIFO" \
       example linreg --steps 2 --trace out.fifo
check "§1 ... and it is still a FIFO" "replaced" test -p out.fifo

# ==== §2 fail before the work ================================================

expect "§2 --ckpt-out in a missing directory" 1 "nodir/x\.ckpt.*No such file" \
       train --data data.txt "${TINY[@]}" --steps 2 --ckpt-out nodir/x.ckpt
check "§2 ... before step 1" "steps ran" no_steps
if [ "$(id -u)" = 0 ]; then ro=/sys; else mkdir ro; chmod 555 ro; ro=ro; fi
expect "§2 --ckpt-out in a read-only place" 1 "$ro/x\.ckpt.*(denied|read-only)" \
       train --data data.txt "${TINY[@]}" --steps 2 --ckpt-out "$ro/x.ckpt"
check "§2 ... before step 1" "steps ran" no_steps
long=$(printf 'n%.0s' $(seq 247)).ckpt   # 252 bytes: the name fits, "<name>.tmp" does not
expect "§2 --ckpt-out whose temporary name is longer than NAME_MAX" 1 "too long" \
       train --data data.txt "${TINY[@]}" --steps 2 --ckpt-out "$long"
check "§2 ... before step 1" "steps ran" no_steps
expect "§2 --llmc-out in a missing directory" 1 "nodir/x\.llmc" \
       train --data data.txt "${TINY[@]}" --steps 2 --llmc-out nodir/x.llmc
expect "§2 --ckpt-every without --ckpt-out" 2 "--ckpt-every.*--ckpt-out" \
       train --data data.txt "${TINY[@]}" --steps 2 --ckpt-every 1
expect "§2 --eval-batches without --eval-every" 2 "--eval-batches.*--eval-every" \
       train --data data.txt "${TINY[@]}" --steps 2 --eval-batches 4
expect "§2 --eval-every with --val-frac 0" 2 "val_frac.*(split|tokens)|validation" \
       train --data data.txt "${TINY[@]}" --steps 3 --eval-every 2 --val-frac 0
check "§2 ... before step 1" "steps ran" no_steps

# A save that fails mid-run: every save hits a file size limit (as a full disk
# would). Training goes on to the end, the run exits 1 naming the saves, and
# the checkpoint already there is untouched.
cp run.orig keep.ckpt
( trap '' XFSZ; ulimit -S -f 1000; exec timeout 60 "$BIN" train --data data.txt "${BIG[@]}" \
      --steps 6 --ckpt-every 2 --ckpt-out keep.ckpt ) >out.txt 2>err.txt
rc=$?
note_san
check "§2 failing saves: training goes on to the end, exit 1" "exit $rc, or no 'done: 6 steps'" \
      eval '[ "$rc" -eq 1 ] && grep -q "^done: 6 steps" out.txt'
check "§2 ... each failure says training goes on" "no 'training goes on' line" \
      grep -q 'saving at step 2 failed.*File too large.*training goes on' err.txt
check "§2 ... and the run names the saves that failed" "no summary of the failed saves" \
      grep -q '3 of 3 saves failed (at step 2, 4, 6)' err.txt
check "§2 ... the previous checkpoint is intact, no temporary file" "keep.ckpt changed" \
      eval 'cmp -s keep.ckpt run.orig && ! ls keep.ckpt.tmp* >/dev/null 2>&1'
# The same, with the limit lifted in the middle: the next save succeeds.
if command -v prlimit >/dev/null; then
    rm -f retry.ckpt retry.jsonl
    ( trap '' XFSZ; ulimit -S -f 1000; exec "$BIN" train --data data.txt "${BIG[@]}" \
          --steps 1000000 --ckpt-every 2 --ckpt-out retry.ckpt --metrics retry.jsonl ) \
        >bg.out 2>bg.err &
    pid=$!
    (sleep 60; kill -9 "$pid" 2>/dev/null) >/dev/null 2>&1 &
    dog=$!
    wait_lines retry.jsonl 5 30 && prlimit --pid "$pid" --fsize=unlimited:
    wait_lines retry.jsonl 12 30
    kill -TERM "$pid" 2>/dev/null
    finish
    check "§2 a save after failed ones succeeds; the run still exits 1" "exit $rc" \
          eval '[ "$rc" -eq 1 ] && grep -q "saves failed (at step 2, 4" err.txt &&
                grep -q "the last completed save is of step" err.txt'
    step=$(u32_at retry.ckpt 16 2>/dev/null || echo 0)
    run train --data data.txt "${BIG[@]}" --steps $((step + 1)) --ckpt-in retry.ckpt --quiet
    check "§2 ... and its checkpoint resumes" "exit $rc, step $step" \
          eval '[ "$rc" -eq 0 ] && [ "$step" -ge 6 ] && grep -q "done: 1 steps" out.txt'
else
    echo "skip  §2 a save after failed ones (no prlimit)"
fi

# ==== §3 write errors are errors =============================================

timeout 60 "$BIN" train --model linreg --steps 3 >/dev/full 2>err.txt
rc=$?
note_san
check "§3 train > /dev/full: exit 1, 'No space left on device'" "exit $rc" \
      eval '[ "$rc" -eq 1 ] && grep -q "standard output.*No space left on device" err.txt'
timeout 60 "$BIN" sample --ckpt run.ckpt --tokens 5 >/dev/full 2>err.txt
rc=$?
note_san
check "§3 sample > /dev/full: exit 1 with the system's message" "exit $rc" \
      eval '[ "$rc" -eq 1 ] && grep -q "No space left on device" err.txt'
timeout 60 "$BIN" bench collectives --devices 2 --max-bytes 1k >/dev/full 2>err.txt
rc=$?
note_san
check "§3 bench > /dev/full: exit 1 with the system's message" "exit $rc" \
      eval '[ "$rc" -eq 1 ] && grep -q "No space left on device" err.txt'
timeout 60 "$BIN" example linreg --steps 3 >/dev/full 2>err.txt
rc=$?
note_san
check "§3 example > /dev/full: exit 1 with the system's message" "exit $rc" \
      eval '[ "$rc" -eq 1 ] && grep -q "No space left on device" err.txt'
timeout 60 "$BIN" version >/dev/full 2>err.txt
rc=$?
note_san
check "§3 version > /dev/full: exit 1" "exit $rc" \
      eval '[ "$rc" -eq 1 ] && grep -q "No space left on device" err.txt'

# --metrics on a full disk: a 4 KiB file size limit; each lost line is whole
rm -f full.jsonl
( trap '' XFSZ; ulimit -S -f 4; exec timeout 60 "$BIN" train --model linreg --steps 300 \
      --metrics full.jsonl --quiet ) >out.txt 2>err.txt
rc=$?
note_san
lost=$(sed -n 's/.*: \([0-9]*\) of 300 lines were lost.*/\1/p' err.txt)
check "§3 --metrics on a full disk: training goes on, exit 1" "exit $rc" \
      eval '[ "$rc" -eq 1 ] && grep -q "^done: 300 steps" out.txt'
check "§3 ... says how many lines were lost, with the system's message" "stderr: $(head -c 300 err.txt)" \
      eval '[ -n "$lost" ] && grep -q "File too large" err.txt'
check "§3 ... the lines kept and lost add up to 300, every kept line whole" \
      "$(lines full.jsonl) kept, $lost lost" \
      eval '[ $(( $(lines full.jsonl) + ${lost:-0} )) -eq 300 ] &&
            [ "$(grep -c "^{\"step\":[0-9]*,.*\"ms\":[-0-9.e]*}$" full.jsonl)" -eq "$(lines full.jsonl)" ]'

# bench --csv on a full disk (the csv already over a 2 KiB limit); stdout
# goes to a pipe, which the limit does not apply to
head -c 3000 /dev/zero | tr '\0' '#' >full.csv
( trap '' XFSZ; ulimit -S -f 2; exec timeout 60 "$BIN" bench collectives --devices 2 \
      --max-bytes 1k --csv full.csv ) 2>err.txt | cat >out.txt
rc=${PIPESTATUS[0]}
note_san
check "§3 bench --csv on a full disk: exit 1 naming the csv and the error" "exit $rc" \
      eval '[ "$rc" -eq 1 ] && grep -q "csv.*File too large" err.txt &&
            grep -q "all_reduce" out.txt'

# ==== §4 signals and resumes =================================================

# SIGTERM: finish the step, save, say so, exit 143
rm -f term.ckpt term.jsonl
start train --data data.txt "${TINY[@]}" --steps 1000000000 --ckpt-out term.ckpt \
      --metrics term.jsonl
wait_lines term.jsonl 20 30
kill -TERM "$pid"
finish
n=$(lines term.jsonl)
check "§4 SIGTERM: exit 143 with the message" "exit $rc" \
      eval '[ "$rc" -eq 143 ] && grep -q "SIGTERM.*stopping after this step" err.txt'
check "§4 ... the summary counts the steps the metrics log holds" "$n lines; $(tail -2 bg.out)" \
      grep -q "^interrupted after $n steps (1..$n)" bg.out
check "§4 ... and the checkpoint is written at that step" "step $(u32_at term.ckpt 16 2>/dev/null)" \
      eval '[ "$(u32_at term.ckpt 16)" -eq "$n" ]'
run train --data data.txt "${TINY[@]}" --steps $((n + 2)) --ckpt-in term.ckpt --quiet
check "§4 ... and it resumes at step $((n + 1))" "exit $rc" \
      grep -q "done: 2 steps ($((n + 1))..$((n + 2)))" out.txt

# start_long_run NAME: a run that saves every step to NAME.ckpt and logs to
# NAME.jsonl, resuming from NAME.ckpt once there is one; signalled by the cases.
start_long_run() {
    local resume=()
    [ -f "$1.ckpt" ] && resume=(--ckpt-in "$1.ckpt")
    start train --data data.txt "${BIG[@]}" --steps 1000000 --ckpt-every 1 "${resume[@]}" \
          --ckpt-out "$1.ckpt" --metrics "$1.jsonl"
}

# Two Ctrl-Cs in a row land, most of the time, in the save the first one
# asked for: the abort must leave no temporary file, and the checkpoint must
# still load. Three tries.
rm -f dbl.ckpt* dbl.jsonl
left=""
for try in 1 2 3; do
    have=$(lines dbl.jsonl)
    start_long_run dbl
    wait_lines dbl.jsonl $((have + 3)) 30
    kill -INT "$pid"; sleep 0.03; kill -INT "$pid"
    finish
    [ "$rc" -eq 130 ] || left="$left exit $rc;"
    left="$left$(ls dbl.ckpt.tmp* 2>/dev/null | tr '\n' ' ')"
done
check "§4 double Ctrl-C leaves no temporary file (3 tries, exit 130)" "left:$left" \
      test -z "$left"
step=$(u32_at dbl.ckpt 16 2>/dev/null || echo 0)
run train --data data.txt "${BIG[@]}" --steps $((step + 1)) --ckpt-in dbl.ckpt --quiet
check "§4 ... and the checkpoint loads" "exit $rc" eval '[ "$rc" -eq 0 ] && [ "$step" -gt 0 ]'

# kill -9, four times, mostly in the middle of a save: at most one temporary
# file per output, removed by the next save; the metrics log of the resumed
# runs reads as one run, every step once.
rm -f k9.ckpt* k9.jsonl
most=0
for try in 1 2 3 4; do
    have=$(lines k9.jsonl)
    start_long_run k9
    wait_lines k9.jsonl $((have + 4)) 30
    sleep 0.0$((try * 2))
    kill -9 "$pid"
    finish
    k=$(ls k9.ckpt.tmp* 2>/dev/null | wc -l)
    [ "$k" -gt "$most" ] && most=$k
done
check "§4 kill -9 x4: at most one temporary file per output" "$most temporary files" \
      test "$most" -le 1
step=$(u32_at k9.ckpt 16 2>/dev/null || echo 0)
run train --data data.txt "${BIG[@]}" --steps $((step + 3)) --ckpt-in k9.ckpt \
    --ckpt-out k9.ckpt --metrics k9.jsonl --quiet
check "§4 ... the next save removes it" "exit $rc; $(ls k9.ckpt.tmp* 2>/dev/null)" \
      eval '[ "$rc" -eq 0 ] && ! ls k9.ckpt.tmp* >/dev/null 2>&1'
want=$(seq 1 $((step + 3)) | tr '\n' ' ')
got=$(sed 's/^{"step":\([0-9]*\),.*/\1/' k9.jsonl | tr '\n' ' ')
check "§4 ... and the metrics log holds every step once, in order" "steps: $got" \
      test "$got" = "$want"

# a stale temporary file of the same output is replaced by the next save
printf 'MTCKPT\0\0left by a killed save' >stale.ckpt.tmp   # a checkpoint's start
run train --data data.txt "${TINY[@]}" --steps 2 --ckpt-out stale.ckpt --quiet
check "§4 a stale <out>.tmp is removed by the next save" "exit $rc, stale.ckpt.tmp still there" \
      eval '[ "$rc" -eq 0 ] && [ ! -e stale.ckpt.tmp ] && [ -s stale.ckpt ]'

# a temporary file is never loaded, even a whole one; the message names the file to use
cp run.orig run.ckpt.tmp
expect "§4 --ckpt-in a save's temporary file is refused, naming the file to use" 2 \
       "run\.ckpt\.tmp.*temporary.*load 'run\.ckpt'" \
       train --data data.txt "${TINY[@]}" --steps 7 --ckpt-in run.ckpt.tmp
expect "§4 sample --ckpt a save's temporary file is refused" 1 "temporary.*'run\.ckpt'" \
       sample --ckpt run.ckpt.tmp --tokens 5
check "§4 ... and sample prints nothing" "stdout not empty" test ! -s out.txt
cp run.orig run.ckpt.tmp.12345
expect "§4 the per-process temporary names of 0.1.0 are refused too" 2 "temporary.*'run\.ckpt'" \
       train --data data.txt "${TINY[@]}" --steps 7 --ckpt-in run.ckpt.tmp.12345
expect "§4 --ckpt-out a temporary name is refused" 2 "\.tmp" \
       train --data data.txt "${TINY[@]}" --steps 2 --ckpt-out new.ckpt.tmp

# resuming with the same --metrics drops the lines past the checkpoint
rm -f res.jsonl c5.ckpt c8.ckpt
run train --data data.txt "${TINY[@]}" --steps 5 --ckpt-out c5.ckpt --metrics res.jsonl --quiet
run train --data data.txt "${TINY[@]}" --steps 8 --ckpt-in c5.ckpt --ckpt-out c8.ckpt \
    --metrics res.jsonl --quiet
printf '{"step":9,"loss":1.2' >>res.jsonl   # a line torn by a kill
run train --data data.txt "${TINY[@]}" --steps 10 --ckpt-in c5.ckpt --metrics res.jsonl
got=$(sed 's/^{"step":\([0-9]*\),.*/\1/' res.jsonl | tr '\n' ' ')
check "§4 resume from step 5 of a log at step 8 (+ a torn line): steps 1..10 once" \
      "exit $rc; steps: $got" test "$rc" -eq 0 -a "$got" = "1 2 3 4 5 6 7 8 9 10 "
check "§4 ... and says what it dropped" "no 'dropped 4' in the config" \
      grep -q "kept 5 lines up to step 5, dropped 4" out.txt
printf 'my notes\nabout the run\n' >notes.txt
cp notes.txt notes.orig
expect "§4 a resume refuses to cut a --metrics file that is not a metrics log" 1 \
       "notes\.txt.*not a meshtrain metrics line" \
       train --data data.txt "${TINY[@]}" --steps 7 --ckpt-in c5.ckpt --metrics notes.txt
check "§4 ... and leaves it as it was" "notes.txt changed" cmp -s notes.txt notes.orig

# ==== §5 nothing hangs =======================================================

mkfifo in.fifo
LIMIT=15   # a refusal is immediate; a hang (exit 124) fails in 15 s, not 60
expect "§5 --data a FIFO is refused, not read" 1 "in\.fifo.*FIFO" \
       train --data in.fifo "${TINY[@]}" --steps 2
expect "§5 --ckpt-in a FIFO is refused" 1 "in\.fifo.*FIFO" \
       train --data data.txt "${TINY[@]}" --steps 7 --ckpt-in in.fifo
expect "§5 --llmc-in a FIFO is refused" 1 "in\.fifo.*FIFO" \
       train --data data.txt --llmc-in in.fifo --seq 16 --batch 4 --steps 2
expect "§5 sample --ckpt a FIFO is refused" 1 "in\.fifo.*FIFO" sample --ckpt in.fifo --tokens 5
expect "§5 --data a character device is refused" 1 "/dev/zero.*character device" \
       train --data /dev/zero "${TINY[@]}" --steps 2
LIMIT=60

# ==== §6 messages that point the right way ==================================

expect "§6 --ckpt-in given an llm.c file says 'use --llmc-in'" 2 "run\.llmc.*use --llmc-in" \
       train --data data.txt "${TINY[@]}" --steps 7 --ckpt-in run.llmc
expect "§6 --llmc-in given a meshtrain checkpoint says 'use --ckpt-in'" 2 \
       "run\.ckpt.*use --ckpt-in" train --data data.txt --llmc-in run.ckpt --seq 16 --batch 4
expect "§6 --data given a checkpoint says 'use --ckpt-in'" 2 "run\.ckpt.*use --ckpt-in" \
       train --data run.ckpt "${TINY[@]}" --steps 2
mkdir ckdir
expect "§6 sample --ckpt a directory says it is a directory" 1 "ckdir.*is a directory" \
       sample --ckpt ckdir --tokens 5
expect "§6 --ckpt-in a directory says it is a directory" 1 "ckdir.*is a directory" \
       train --data data.txt "${TINY[@]}" --steps 7 --ckpt-in ckdir
expect "§6 --llmc-in with a contradicting --layers names both" 2 \
       "--layers 4.*run\.llmc.*L=1" \
       train --data data.txt --llmc-in run.llmc --layers 4 --seq 16 --batch 4 --steps 2
expect "§6 --llmc-in with a contradicting --channels names both" 2 "--channels 32.*C=16" \
       train --data data.txt --llmc-in run.llmc --channels 32 --seq 16 --batch 4 --steps 2
expect "§6 --llmc-in with a contradicting --heads names both" 2 "--heads 4.*NH=2" \
       train --data data.txt --llmc-in run.llmc --heads 4 --seq 16 --batch 4 --steps 2
run train --data data.txt --llmc-in run.llmc --layers 1 --channels 16 --heads 2 --seq 16 \
    --batch 4 --steps 2 --quiet
check "§6 ... while flags that agree with the file are fine" "exit $rc" test "$rc" -eq 0

# a NaN weight in a checkpoint whose CRC is right: the first parameter's
# first value (its record starts at byte 308: name length, name, 72 bytes)
cp run.orig nan.ckpt
put_nan nan.ckpt $((308 + 4 + $(u32_at nan.ckpt 308) + 72))
set_crc nan.ckpt
first=$(head -c $((312 + $(u32_at nan.ckpt 308))) nan.ckpt | tail -c +313)
expect "§6 sample from a CRC-valid checkpoint with a NaN weight fails naming it" 1 \
       "nan\.ckpt.*nan.*'$first'" sample --ckpt nan.ckpt --tokens 20
check "§6 ... and prints no sample" "$(wc -c <out.txt) bytes on stdout" test ! -s out.txt
expect "§6 resuming from it names the tensor, not the learning rate" 1 "nan\.ckpt.*'$first'" \
       train --data data.txt "${TINY[@]}" --steps 7 --ckpt-in nan.ckpt
check "§6 ... and does not blame the learning rate" "it does" \
      eval '! grep -q "learning rate" err.txt'
cp run.llmc nan.llmc
put_nan nan.llmc 1024    # the first value of wte, just past the 1024-byte header
expect "§6 sample from an llm.c file with a NaN weight fails naming it" 1 \
       "nan\.llmc.*'wte'" sample --ckpt nan.llmc --tokens 20
expect "§6 --llmc-in with a NaN weight fails naming it" 1 "nan\.llmc.*'wte'" \
       train --data data.txt --llmc-in nan.llmc --seq 16 --batch 4 --steps 2
expect "§6 sample --ckpt nosuch gives the system's message" 1 "nosuch.*No such file or directory" \
       sample --ckpt nosuch --tokens 5

run example linreg --help
check "§6 example linreg --help: --devices 0..1024 (the threads transport's limit)" \
      "$(grep -- '--devices' out.txt)" grep -q -- '--devices N .*0\.\.1024' out.txt
expect "§6 example linreg --devices 1025 is a usage error naming the limit" 2 \
       "--devices.*1025.*\[0, 1024\]" example linreg --devices 1025
run bench collectives --help
check "§6 bench collectives --help names the limit 1024" "$(grep -- '--devices' out.txt)" \
      grep -q -- '--devices .*1\.\.1024' out.txt
expect "§6 bench --devices 1025 names the limit" 2 "--devices.*1 to 1024" \
       bench collectives --devices 1025

check "no sanitizer report in any run" "$(head -40 san.log)" test ! -s san.log

test_end
