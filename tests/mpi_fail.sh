#!/bin/bash
# mpi_fail.sh — a failure under the mpi transport must end the whole job, with
# a message, well within the timeout (not named test_*.sh: ctest runs it
# through mpirun with arguments, see CMakeLists.txt).
#
#   mpi_fail.sh MPIRUN TEST_MPI skip   device 1 skips a collective: the job
#                                      exits non-zero within ~MT_COMM_TIMEOUT and
#                                      the message names device 1 as never arrived
#   mpi_fail.sh MPIRUN TEST_MPI exit   device 1 calls exit(3): the others do not hang
#   mpi_fail.sh MPIRUN TEST_MPI hang   device 1 never returns to MPI: the timeout
#                                      names it as not answering; the job ends
set -u
mpirun=$1 prog=$2 mode=$3
out=$(mktemp)
trap 'rm -f "$out"' EXIT
limit=60   # far beyond what either case needs (~2 s timeout + start-up)
start=$(date +%s%N)
timeout -k 5 $limit "$mpirun" --allow-run-as-root --oversubscribe -np 2 \
    -x MT_COMM_TIMEOUT=2 "$prog" "$mode" >"$out" 2>&1
rc=$?
took=$(( ($(date +%s%N) - start) / 1000000 ))   # ms
cat "$out"
echo "mpi_fail.sh: mode $mode: exit status $rc after ${took} ms"
fail() { echo "mpi_fail.sh: FAIL: $*"; exit 1; }
[ $rc -eq 124 ] || [ $rc -eq 137 ] && fail "the job hung (killed after $limit s)"
[ $rc -ne 0 ] || fail "the job exited 0; a failed rank must end it with a non-zero status"
case $mode in
skip)
    grep -q "timed out after" "$out" || fail "no timeout message"
    grep -q "device 1 (never arrived; its last collective: #1 psum" "$out" \
        || fail "the message does not name device 1 and its last collective"
    grep -q "stopping every rank" "$out" || fail "the job was not stopped by meshtrain"
    [ $took -lt 30000 ] || fail "took ${took} ms for a 2 s timeout"
    ;;
hang)
    grep -q "device 1 (did not answer" "$out" || fail "the message does not name device 1"
    grep -q "stopping every rank" "$out" || fail "the job was not stopped by meshtrain"
    [ $took -lt 30000 ] || fail "took ${took} ms for a 2 s timeout"
    ;;
exit)
    grep -qi "exit code: *3\|exited on signal\|non-zero status" "$out" \
        || fail "mpirun did not report the rank that exited"
    ;;
esac
echo "mpi_fail.sh: ok"
