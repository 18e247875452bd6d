#!/usr/bin/env bash
# test_hosts_faults.sh — faults of the network and of ranks, across 2 "hosts"
# made of network namespaces (tests/hosts.sh), each in the middle of a GPT
# run on data=2 (one rank a host) that writes a checkpoint every 20 steps:
#
#   stop   rank 1 stopped (SIGSTOP)
#   link   host 2's eth0 set down (ip link set eth0 down in its namespace)
#   kill   rank 1 killed (SIGKILL)
#   stop0  rank 0 stopped: rank 1 is the survivor, and the one to speak (at
#          a launch's start rank 0 names the missing ranks; when it is the
#          one missing, its question never comes: "device 0, which names the
#          missing ranks, did not ask ...: device 0 is lost")
#
# For each, with MT_COMM_TIMEOUT=T (2 s):
#   - the surviving rank (rank 0, on host 1) is gone within T + 2 s of the fault;
#   - rank 0's message names device 1 as lost and the last collective each
#     reached ("launch N did not start ...: device 1 ... Each finished launch
#     N-1" between steps, "device 1 (did not answer ...; the last collective it
#     completed with device 0: device 0's #K)" inside one, "the launch's set-up
#     ... did not complete ...: another device (of device 1)" in its blocking
#     set-up, mpi_watchdog.c); not for kill (below);
#   - mpirun's exit status is meshtrain's distinct MT_MPI_EXIT_LOST, 75 (stop,
#     link); kill: 137, the killed rank's status, which mpirun reports itself;
#   - no meshtrain, orted or mpirun is left, in the namespaces or outside;
#   - the last periodic checkpoint loads (a one-device run resumes from it at
#     its step, a multiple of 20).
# Last, with 5 ms of delay and 5 % of the frames lost (netem, or where the
# kernel has none tests/net_hub.c: hosts.sh's HOSTS_DELAY_MS, HOSTS_LOSS),
# a 5-step run completes with the one-device losses.
# And after the stop: the resume on fewer hosts, one device (data=1) from the
# data=2 run's last checkpoint, continues the run: its 5 steps have the
# losses of the same data=2 run uninterrupted (on thread devices: a sum of
# two rounds alike on every transport) to relative 1e-5, the invariant's bar
# over tens of steps (the learning rate is constant after the warmup,
# --min-lr-frac 1, so no run depends on --steps). Not one device from step
# 0: the fault comes after 65 to some 500 steps of 1.5 ms, and over 460
# data=2's and one device's losses drifted 2.5e-5 apart.
#
# mpirun itself. A rank killed: Open MPI's daemon sees it die and mpirun ends
# the job 2 s later (SIGTERM, SIGKILL 2 s after), printing its own banners
# ("An MPI communication peer process has unexpectedly disconnected", "mpirun
# noticed that process rank 1 ... exited on signal 9"); with T = 2 s the
# SIGTERM comes about when the timeout would fire, and `train`'s handler
# tells the launch (mt_launch_signal), so a rank waiting on the dead one says
# what for before the SIGKILL ("signal 15 after 1.01 s waiting in #2 psum
# ...: device 1: device 0's #1"; test_mpi checks that line). Printed here,
# not checked: on 2026-12-03 it came in 10 of 13 runs on a quiet machine;
# in the others Open MPI's TCP transport saw the connection close inside an
# MPI call and ended rank 0 itself (its "peer process has unexpectedly
# disconnected" names the lost rank's host; perf showed rank 0 asleep in
# Open MPI's abort), once 46 ms after the death. A link
# down: the hosts' TCP retries (net.ipv4.tcp_retries2, 15 by default: some
# 15 minutes) keep mpirun and the cut-off daemon waiting for each other long
# after meshtrain's ranks are gone; the test lowers it to 3 in the hosts, as
# docs/multinode.md tells a user to (the survivors' stop does not depend on
# it: their timeout bounds it). Needs root; skips (77) otherwise or without
# an MPI build.
#
#   bash tests/test_hosts_faults.sh <meshtrain binary> [<build dir>]
#   (MT_DEBUG_FAULTS=1: each fault's job lines from meshtrain and Open MPI,
#   stamped in ms from the fault)
set -u

here=$(realpath "$(dirname "${BASH_SOURCE[0]}")")
source "$here/lib.sh"
source "$here/hosts.sh"
test_start test_hosts_faults.sh "$@"

T=2
export MT_COMM_TIMEOUT=$T
hosts_ready_or_skip "$BIN"
HOSTS_TIMEOUT=60   # a hung job is killed, and fails below

for i in $(seq 40); do printf 'the quick brown fox jumps over the lazy dog; one run on any mesh. '; done >text.txt
GPT=(train --data text.txt --layers 2 --channels 32 --heads 2 --max-seq 16 --seq 16 --batch 4
     --seed 7 --threads 1 --min-lr-frac 1 --quiet)
EVERY=20

now_ms() { local t=${EPOCHREALTIME//[.,]/}; echo $((t / 1000)); }
steps_in() { [ -f "$1" ] && wc -l <"$1" || echo 0; }
# whether process $1 still runs: a zombie has stopped (kill -0 would say
# yes): after MPI_Abort a rank waits ~1 s as one for its daemon to reap it
runs() { local st; st=$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null); [ -n "$st" ] && [ "$st" != Z ]; }
# meshtrain's processes in namespace $1 (pids)
ranks_in() { ip netns pids "$1" 2>/dev/null | xargs -r ps -o pid=,comm= -p | awk '$2 == "meshtrain" { print $1 }'; }
# what of Open MPI and meshtrain still runs: in the namespaces, and outside
# any process whose command line names this test's directory
leftovers() {
    local ns
    for ns in "${HOSTS_NS[@]}"; do ip netns pids "$ns" 2>/dev/null | xargs -r ps -o comm= -p; done
    pgrep -f "$WORK" | grep -vx "$$" | xargs -r ps -o comm= -p | grep -E 'meshtrain|orted|prted|mpirun'
}

# fault MODE: runs the job, applies MODE once 3 checkpoints are written, and
# checks the bounds, the status, the message and that nothing is left. The
# lost rank is 1 (rank 0 survives and speaks), but for stop0: rank 0 stopped,
# rank 1 survives.
fault() {
    local mode=$1 start t_fault t_gone=0 t_end rc pids lost=1 want_rc=75 i
    [ "$mode" = stop0 ] && lost=0
    local kept=$((1 - lost))
    rm -f run.jsonl c.ckpt
    start=$(now_ms)
    { hosts_mpirun 2 "${MPI_ENV[@]}" "$BIN" "${GPT[@]}" --steps 1000000 --devices 2 --mesh data=2 \
          --ckpt-every $EVERY --ckpt-out c.ckpt --metrics run.jsonl 2>&1
      echo "rc ${PIPESTATUS[0]}"; } |
        while IFS= read -r line; do echo "$(( $(now_ms) - start )) $line"; done >job.txt &
    local job=$!
    for ((i = 0; i < 600; i++)); do [ "$(steps_in run.jsonl)" -ge $((3 * EVERY + 5)) ] && break; sleep 0.05; done
    pids=("$(ranks_in "${HOSTS_NS[0]}")" "$(ranks_in "${HOSTS_NS[1]}")")
    if [ -z "${pids[0]}" ] || [ -z "${pids[1]}" ]; then
        cp job.txt err.txt; bad "$mode: the job runs" "ranks '${pids[*]}' after $(steps_in run.jsonl) steps"
        wait $job; return 1
    fi
    t_fault=$(( $(now_ms) - start ))
    case $mode in
    stop|stop0) kill -STOP "${pids[lost]}" ;;
    kill) kill -KILL "${pids[lost]}"; want_rc=137 ;;
    link) ip -n "${HOSTS_NS[lost]}" link set eth0 down ;;
    esac
    # the survivor's end, polled
    for ((i = 0; i < 400; i++)); do
        runs "${pids[kept]}" || { t_gone=$(( $(now_ms) - start - t_fault )); break; }
        sleep 0.025
    done
    wait $job
    t_end=$(( $(tail -1 job.txt | awk '{ print $1 }') - t_fault ))
    rc=$(awk '$2 == "rc" { print $3 }' job.txt)
    sed 's/^[0-9]* //' job.txt | grep -v '^rc ' >err.txt
    echo "info  $mode at $t_fault ms (step $(steps_in run.jsonl)): rank $kept gone after $t_gone ms," \
         "mpirun's end after $t_end ms, status $rc"
    if [ "$t_gone" -gt 0 ] && [ "$t_gone" -le $((T * 1000 + 2000)) ]; then
        ok "$mode: the surviving rank stops within T + 2 s ($t_gone ms)"
    else
        bad "$mode: the surviving rank stops within T + 2 s" "${t_gone} ms (0: still there after 10 s)"
    fi
    if [ "$rc" = "$want_rc" ]; then ok "$mode: mpirun's status is $want_rc"
    else bad "$mode: mpirun's status is $want_rc" "status $rc"; fi
    local msg
    # a collective's timeout, or (the fault during a launch's end) the launch's
    msg=$(grep -m1 -E "^meshtrain: (device $kept: |the end of the launch timed out .* on device $kept )" err.txt)
    echo "info  $mode: rank $kept said: ${msg:-nothing}" | cut -c1-300
    # what the job printed around the fault, in ms from it (MT_DEBUG_FAULTS=1)
    [ -n "${MT_DEBUG_FAULTS:-}" ] && awk -v f="$t_fault" '{ $1 = $1 - f; print }' job.txt |
        grep -E "meshtrain|signal|SIG|peer" | cut -c1-300
    if [ "$mode" = kill ]; then
        :   # printed above, not checked (the header says why)
    elif [[ "$msg" =~ (never\ arrived|stopped\ answering):\ device\ $lost\..*finished\ launch\ [0-9]+ ]] ||
         [[ "$msg" =~ device\ $lost\ \(did\ not\ answer.*(completed\ with\ device\ $kept|no\ collective) ]] ||
         [[ "$msg" =~ did\ not\ complete\ within.*arrived\ at\ the\ launch:\ another\ device\ \(of\ device\ $lost\) ]] ||
         [[ "$msg" =~ device\ 0,\ which\ names\ the\ missing\ ranks,\ did\ not\ ask.*device\ 0\ is\ lost.*finished\ launch\ [0-9]+ ]]; then
        ok "$mode: rank $kept names device $lost and the last collective each reached"
    else
        bad "$mode: rank $kept names device $lost and the last collective each reached" "${msg:-no message from device $kept}"
    fi
    # the cut-off host's daemon ends when its TCP gives up on mpirun: a few
    # seconds more with tcp_retries2=3
    local left
    for ((i = 0; i < 50; i++)); do
        left=$(leftovers | sort | tr '\n' ' ')
        [ -z "$left" ] && break
        sleep 0.1
    done
    if [ -z "$left" ]; then ok "$mode: no process left"
    else bad "$mode: no process left" "left: $left"; fi
    # the last periodic checkpoint loads: one device resumes at its step
    CKPT_STEP=$(timeout 60 "$BIN" "${GPT[@]}" --ckpt-in c.ckpt --steps 1 2>&1 |
                sed -n 's/^nothing to do: already at step \([0-9]*\) of 1$/\1/p')
    if [ -n "$CKPT_STEP" ] && [ $((CKPT_STEP % EVERY)) -eq 0 ] && [ "$CKPT_STEP" -ge $((3 * EVERY)) ]; then
        ok "$mode: the last periodic checkpoint loads (step $CKPT_STEP)"
    else
        : >err.txt; bad "$mode: the last periodic checkpoint loads" "step '${CKPT_STEP}', want a multiple of $EVERY from $((3 * EVERY))"
    fi
    return 0
}

# losses NAME REF GOT FIRST LAST: GOT has steps FIRST..LAST, each one's loss
# REF's to relative 1e-5 (both --metrics files)
losses() {
    local why
    why=$(awk -v first="$4" -v last="$5" '
        { match($0, /"step":[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7) + 0
          match($0, /"loss":[-0-9.e+]+/); l = substr($0, RSTART + 7, RLENGTH - 7) + 0 }
        FNR == NR { ref[s] = l; next }
        { got[s] = l; n++ }
        END {
            if (n != last - first + 1) { print n " steps, want " first ".." last; exit }
            for (k = first; k <= last; k++) {
                if (!(k in got) || !(k in ref)) { print "no step " k; exit }
                d = got[k] - ref[k]; if (d < 0) d = -d
                if (d > 1e-5 * (ref[k] < 0 ? -ref[k] : ref[k])) { print "step " k ": " got[k] ", want " ref[k]; exit }
            }
        }' "$2" "$3")
    if [ -z "$why" ]; then ok "$1"; else : >err.txt; bad "$1" "$why"; fi
}

hosts_up 2 "$WORK/hosts" || { bad "2 hosts up" "see above"; test_end; exit 1; }
for ns in "${HOSTS_NS[@]}"; do ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=3; done
fault stop
# the resume on fewer hosts: one device (data=1) from the last checkpoint of
# the stopped data=2 run, against the data=2 run uninterrupted
if [ -n "$CKPT_STEP" ]; then
    last=$((CKPT_STEP + 5))
    if timeout 120 "$BIN" "${GPT[@]}" --steps $last --devices 2 --mesh data=2 --metrics ref.jsonl >out.txt 2>err.txt &&
       timeout 120 "$BIN" "${GPT[@]}" --steps $last --ckpt-in c.ckpt --metrics resumed.jsonl >out.txt 2>err.txt; then
        losses "the stopped data=2 run resumed on one device from step $CKPT_STEP = data=2 uninterrupted" \
            ref.jsonl resumed.jsonl $((CKPT_STEP + 1)) $last
    else
        bad "the stopped data=2 run resumed on one device" "exit $?"
    fi
fi
fault link
hosts_down
hosts_up 2 "$WORK/hosts2" || { bad "2 hosts up again" "see above"; test_end; exit 1; }
for ns in "${HOSTS_NS[@]}"; do ip netns exec "$ns" sysctl -qw net.ipv4.tcp_retries2=3; done
fault kill
fault stop0
hosts_down

# ---- a slow, lossy network ----------------------------------------------------------

# 5 ms on the way to each host (10 ms a round trip) and 5 % of the frames
# lost: netem where the kernel has it, else tests/net_hub.c (built beside
# meshtrain); the run completes with the one-device losses
HOSTS_DELAY_MS=5 HOSTS_LOSS=0.05 HOSTS_HUB=${HOSTS_HUB:-$BUILD/net_hub}
if hosts_up 2 "$WORK/hosts3"; then
    timeout 120 "$BIN" "${GPT[@]}" --steps 5 --metrics one5.jsonl >out.txt 2>err.txt || bad "one device, 5 steps" "exit $?"
    start=$(now_ms)
    if MT_COMM_TIMEOUT=60 hosts_mpirun 2 "${MPI_ENV[@]}" "$BIN" "${GPT[@]}" --steps 5 --devices 2 --mesh data=2 \
            --metrics slow.jsonl >out.txt 2>err.txt; then
        echo "info  5 ms + 5 % loss ($HOSTS_SWITCH_KIND): 5 steps in $(( $(now_ms) - start )) ms, each step" \
             "$(sed -n 's/.*"ms":\([0-9.]*\).*/\1/p' slow.jsonl | awk '{ printf "%s%.0f", (NR > 1 ? ", " : ""), $1 }') ms"
        losses "5 ms + 5 % loss ($HOSTS_SWITCH_KIND): data=2 across 2 hosts = 1 device" one5.jsonl slow.jsonl 1 5
    else
        bad "5 ms + 5 % loss ($HOSTS_SWITCH_KIND): the run completes" "exit $?"
    fi
    hosts_down
else
    bad "2 hosts with 5 ms and 5 % loss up" "see above (no sch_netem and no $HOSTS_HUB?)"
fi
test_end
