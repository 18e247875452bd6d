#!/bin/bash
# mpi_fail.sh — a failure under the mpi transport must end the whole job, with
# a message, within the timeout plus a second (not named test_*.sh: ctest runs
# it through mpirun with arguments, see CMakeLists.txt).
#
#   mpi_fail.sh MPIRUN TEST_MPI skip   device 1 skips a collective: the job
#                                      exits non-zero and the message names
#                                      device 1 as never arrived
#   mpi_fail.sh MPIRUN TEST_MPI exit   device 1 calls exit(3): the others do not hang
#   mpi_fail.sh MPIRUN TEST_MPI hang   device 1 never returns to MPI: the timeout
#                                      names it as not answering; the job ends
#   mpi_fail.sh MPIRUN TEST_MPI stop   device 1 stops itself (SIGSTOP): as hang,
#                                      and the stopped process is gone after
#   mpi_fail.sh MPIRUN TEST_MPI stop0  device 0 stops itself between launches:
#                                      device 1 names it as lost at the next
#                                      launch's start; it is gone after
#   mpi_fail.sh MPIRUN TEST_MPI badenv MT_COMM_TIMEOUT=abc (and -1): every rank
#                                      refuses it at once, naming the variable
#                                      and the value; nothing waits for a timeout
#
# Time limits. The script first measures mpirun's overhead, in the same
# environment and under the same load:
#   STARTUP  a passing job (`test_mpi pass`: MPI start-up, one launch with one
#            psum, shut-down), and
#   FAILEND  a job whose ranks fail at once (`mpirun -np 2 false`, the slower
#            of two): how long mpirun takes to end a failed job (Open MPI
#            4.1 here: 1 or 2 s, at random, against 0.08 s for `true`),
#   OVERHEAD = STARTUP + FAILEND.
# Then, with MT_COMM_TIMEOUT=T (2 s), every line the job prints is stamped
# with the time since the job started, and:
#   skip, hang, stop,
#   stop0:             the timeout's message is printed by  T + 1 s + OVERHEAD + 1 s
#                      and the job has ended by             T + 1 s + OVERHEAD + 1 s
#   badenv:            both ranks' refusal is printed by            STARTUP + 1 s
#                      and the job has ended by             T + 1 s + OVERHEAD + 1 s
# T + 1 s is what meshtrain promises (a timeout ends the job within a second
# of firing, and prints its message when it fires: before, the message came,
# with the end, after ~2·T + 2 s more); OVERHEAD stands for mpirun's start-up
# (before the collective starts) and shut-down; the last second is a margin
# for a loaded CI machine. A refused MT_COMM_TIMEOUT waits for nothing: its
# message comes within the start-up (before, it meant 300 s, and the job hung).
set -u
mpirun=$1 prog=$2 mode=$3
T=2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
limit=60   # far beyond what any case needs: a hang is killed, and fails below
fail() { echo "mpi_fail.sh: FAIL: $*"; exit 1; }

now_ms() { local t=${EPOCHREALTIME//[.,]/}; echo $((t / 1000)); }

# job TIMEOUT_VALUE MODE: runs the job (2 ranks), every output line into $out
# as "<ms since start> <line>"; sets rc and took (ms).
job() {
    local start line
    start=$(now_ms)
    timeout -k 5 $limit "$mpirun" --allow-run-as-root --oversubscribe -np 2 \
        -x MT_COMM_TIMEOUT="$1" "$prog" "$2" 2>&1 |
    while IFS= read -r line; do echo "$(( $(now_ms) - start )) $line"; done >"$out"
    rc=${PIPESTATUS[0]}
    took=$(( $(now_ms) - start ))
}

# mpirun's overhead: a job that passes, and one that fails at once
job $T pass
[ $rc -eq 0 ] || { cat "$out"; fail "the passing job (test_mpi pass) exited $rc"; }
startup=$took
failend=0
for _ in 1 2; do
    t0=$(now_ms)
    timeout -k 5 $limit "$mpirun" --allow-run-as-root --oversubscribe -np 2 false >/dev/null 2>&1
    t=$(( $(now_ms) - t0 ))
    [ $t -gt $failend ] && failend=$t
done
overhead=$(( startup + failend ))
echo "mpi_fail.sh: overhead $overhead ms = a passing job $startup ms + ending a failed job $failend ms"

if [ "$mode" = badenv ]; then
    said_by=$(( startup + 1000 ))
    bound=$(( T * 1000 + 1000 + overhead + 1000 ))
    for bad in abc -1; do
        job "$bad" skip
        cat "$out"
        echo "mpi_fail.sh: MT_COMM_TIMEOUT='$bad': exit status $rc after $took ms (limit $bound ms = T + 1 s + overhead + 1 s)"
        [ $rc -eq 124 ] || [ $rc -eq 137 ] && fail "the job hung (killed after $limit s)"
        [ $rc -ne 0 ] || fail "MT_COMM_TIMEOUT='$bad': the job exited 0"
        said="MT_COMM_TIMEOUT='$bad' is not a number of seconds > 0"
        n=$(grep -c -- "$said" "$out")
        [ "$n" -eq 2 ] || fail "MT_COMM_TIMEOUT='$bad': $n of 2 ranks named the variable and the value"
        grep -q "unset it for the default of 300 s" "$out" || fail "the message does not say what to do"
        at=$(grep -- "$said" "$out" | tail -1 | cut -d' ' -f1)
        echo "mpi_fail.sh: MT_COMM_TIMEOUT='$bad': refused at $at ms (limit $said_by ms = start-up + 1 s)"
        [ "$at" -le $said_by ] || fail "MT_COMM_TIMEOUT='$bad': refused at $at ms; a refused timeout must not wait"
        [ $took -le $bound ] || fail "MT_COMM_TIMEOUT='$bad': took $took ms; a refused timeout must not wait"
    done
    echo "mpi_fail.sh: ok"
    exit 0
fi

job $T "$mode"
cat "$out"
bound=$(( T * 1000 + 1000 + overhead + 1000 ))
echo "mpi_fail.sh: mode $mode: exit status $rc after $took ms (limit $bound ms = T + 1 s + overhead + 1 s)"
[ $rc -eq 124 ] || [ $rc -eq 137 ] && fail "the job hung (killed after $limit s)"
[ $rc -ne 0 ] || fail "the job exited 0; a failed rank must end it with a non-zero status"

# when the message came: the stamp of its first line
said_at() { grep -m1 -- "$1" "$out" | cut -d' ' -f1; }
# check_timeout_message [FIRST WHOLE]: the message whose first line has
# FIRST ("timed out after") came within the bound, and it is WHOLE (device 0
# naming the collective that timed out), then the job ended within it too
check_timeout_message() {
    local at first=${1:-timed out after}
    local whole=${2:-meshtrain: device 0: collective #2 psum}
    at=$(said_at "$first")
    [ -n "$at" ] || fail "no message with '$first'"
    grep -q -- "$whole" "$out" || fail "the message does not say '$whole'"
    [ "$at" -le $bound ] || fail "the message came at $at ms, after the limit of $bound ms: it must be printed when the timeout fires"
    grep -q "stopping every rank" "$out" || fail "the job was not stopped by meshtrain"
    [ $took -le $bound ] || fail "took $took ms for a $T s timeout (limit $bound ms)"
    echo "mpi_fail.sh: the message came at $at ms"
}
# the processes a mode announced ("(pid N)") are gone once the job has ended
# (a zombie waiting for its reaper is gone too)
alive() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [ "${stat%% *}" != Z ] && [ "${stat%% *}" != X ]
}
check_gone() {
    local pid
    for pid in $(grep -o "(pid [0-9]*)" "$out" | tr -dc '0-9\n'); do
        for _ in 1 2 3 4 5 6 7 8 9 10; do alive "$pid" || continue 2; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
        fail "process $pid of the job outlived it"
    done
}

case $mode in
skip)
    check_timeout_message
    grep -q "device 1 (never arrived; its last collective: #1 psum" "$out" \
        || fail "the message does not name device 1 and its last collective"
    ;;
hang|stop)
    check_timeout_message
    grep -q "device 1 (did not answer" "$out" || fail "the message does not name device 1"
    grep -q "(pid [0-9]*)" "$out" || fail "device 1 did not say its pid"
    check_gone
    ;;
stop0)
    check_timeout_message "device 0 is lost" \
        "meshtrain: device 1: launch 2 did not start within 2 s, and device 0, which names the missing ranks, did not ask"
    grep -q "(pid [0-9]*)" "$out" || fail "device 0 did not say its pid"
    check_gone
    ;;
exit)
    grep -qi "exit code: *3\|exited on signal\|non-zero status" "$out" \
        || fail "mpirun did not report the rank that exited"
    ;;
*)
    fail "unknown mode '$mode'"
    ;;
esac
echo "mpi_fail.sh: ok"
