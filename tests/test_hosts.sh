#!/usr/bin/env bash
# test_hosts.sh — meshtrain across hosts: 2 and 4 "hosts" made of network
# namespaces on this machine (tests/hosts.sh: veth pairs into a bridge,
# mpirun starting its daemons in them through an rsh agent, TCP on
# 192.0.2.0/24 only), each run against the one-device run's losses:
#
#   2 hosts  linreg data=2; MLP data=2, data=2,tensor=2 (4 ranks: tensor inside
#            a host, data across); GPT data=2, fsdp=2, tensor=2, pipe=2 (1f1b)
#   4 hosts  linreg data=4; GPT data=2,fsdp=2; a checkpoint written on
#            data=2,tensor=2 after 3 steps, resumed on one device to step 5
#
# plus what makes them hosts (each rank's hostname and address are its
# host's, and nothing else is there), that the gradients cross the link (at
# least 8 bytes a parameter a step on data=2: each rank must receive the
# other's 4-byte gradient, whatever the algorithm), and that the namespaces
# and the processes in them are gone after mpirun is killed mid-job, an exit
# and a SIGTERM. Losses are compared step by step (the --metrics lines, 7 digits)
# to relative 1e-5. Needs root (network namespaces); otherwise, or without
# an MPI build, it says so and exits 77, which ctest reports as skipped.
#
#   bash tests/test_hosts.sh <meshtrain binary> [<build dir>]
#
# Prints, as "info" lines, the bytes a step sends over the veths and the
# median step time on 2 hosts (the 4-host runs share 2 cores among 4 ranks
# that each think they have a core of their own: see docs/multinode.md).
set -u

here=$(realpath "$(dirname "${BASH_SOURCE[0]}")")
source "$here/lib.sh"
source "$here/hosts.sh"
test_start test_hosts.sh "$@"

export MT_COMM_TIMEOUT=${MT_COMM_TIMEOUT:-60}
hosts_ready_or_skip "$BIN"   # skips (77) without MPI or namespaces; sets MPI_ENV

# ---- helpers --------------------------------------------------------------------

# same_losses NAME REF GOT FIRST LAST: GOT's steps are FIRST..LAST, once each,
# and each one's loss is REF's to relative 1e-5 (both JSONL, as --metrics;
# no '=' in the names: awk takes an argument a=b for an assignment).
same_losses() {
    local name=$1 why
    why=$(awk -v first="$4" -v last="$5" '
        function parse() {
            s = ""; l = ""
            n = split($0, f, /[{}:,]/)
            for (i = 1; i < n; i++) { if (f[i] == "\"step\"") s = f[i + 1]; if (f[i] == "\"loss\"") l = f[i + 1] }
        }
        FNR == NR { parse(); want[s] = l; next }
        !done {
            parse()
            if (s < first || s > last || (s in seen)) { print "step " s " unexpected"; done = 1; next }
            if (!(s in want)) { print "step " s " not in the one-device run"; done = 1; next }
            seen[s] = 1
            d = l - want[s]; if (d < 0) d = -d
            w = want[s]; if (w < 0) w = -w
            if (d > 1e-5 * w) { print "step " s ": loss " l ", one device " want[s]; done = 1 }
        }
        END {
            if (done) exit
            for (k = first; k <= last; k++) if (!(k in seen)) { print "no step " k; exit }
        }' "$2" "$3")
    if [ -z "$why" ]; then ok "$name"; else : >err.txt; bad "$name" "$why"; fi
}

# linreg_jsonl: the example's "step N  loss X" lines as metrics lines
linreg_jsonl() { awk '$1 == "step" { printf "{\"step\":%d,\"loss\":%s}\n", $2, $4 }'; }

# across NAME NP ARGS...: `meshtrain ARGS` on NP ranks across the hosts, out
# in out.txt, stderr (every rank's, and mpirun's) in err.txt; 0 when it ran
across() {
    local name=$1 np=$2
    shift 2
    hosts_mpirun "$np" "${MPI_ENV[@]}" "$BIN" "$@" >out.txt 2>err.txt
    local rc=$?
    if [ "$rc" -ne 0 ]; then bad "$name" "exit $rc"; return 1; fi
    return 0
}

# median_ms FILE: the median of a metrics file's step times
median_ms() { sed -n 's/.*"ms":\([0-9.e+-]*\).*/\1/p' "$1" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# ---- the one-device references ----------------------------------------------------

for i in $(seq 40); do printf 'the quick brown fox jumps over the lazy dog; one run on any mesh. '; done >text.txt
LINREG=(example linreg --steps 20 --batch 128 --seed 7)
MLP=(train --model mlp --layers 3 --channels 32 --batch 8 --steps 6 --threads 1)
# 5 steps inside the 10-step warmup: the rates do not depend on --steps, so a
# 3-step run resumed to 5 follows the 5-step run; --accum 2 is the pipeline's
# 2 microbatches on one device
GPT=(train --data text.txt --layers 2 --channels 32 --heads 2 --max-seq 16 --seq 16 --batch 4
     --accum 2 --steps 5 --seed 7 --threads 1)
GPT_PARAMS=$((256 * 32 + 16 * 32 + 2 * (12 * 32 * 32 + 13 * 32) + 2 * 32))   # Vp·C + maxT·C + L(12C²+13C) + 2C

refs_ok=1
timeout 120 "$BIN" "${LINREG[@]}" --devices 1 2>err.txt | linreg_jsonl >linreg1.jsonl
timeout 120 "$BIN" "${MLP[@]}" --metrics mlp1.jsonl >out.txt 2>err.txt || { bad "one-device MLP" "exit $?"; refs_ok=0; }
timeout 120 "$BIN" "${GPT[@]}" --metrics gpt1.jsonl >out.txt 2>err.txt || { bad "one-device GPT" "exit $?"; refs_ok=0; }
[ "$(wc -l <linreg1.jsonl)" -eq 20 ] || { bad "one-device linreg" "$(wc -l <linreg1.jsonl) steps"; refs_ok=0; }
grep -q "($(awk -v p="$GPT_PARAMS" 'BEGIN { printf "%.1fk", p / 1000 }') parameters)" out.txt ||
    { bad "the GPT has the parameters counted here ($GPT_PARAMS)" "$(grep -m1 model out.txt)"; refs_ok=0; }
[ "$refs_ok" -eq 1 ] || { test_end; exit 1; }

# ---- 2 hosts ------------------------------------------------------------------------

hosts_up 2 "$WORK/hosts2" || { bad "2 hosts up" "see above"; test_end; exit 1; }

# what makes them hosts: rank r runs on host r/2 (192.0.2.11, .12), under its
# own hostname, with its own network namespace, and sees no other address
hosts_mpirun 4 sh -c 'echo "$OMPI_COMM_WORLD_RANK $(hostname) $(readlink /proc/self/ns/net)" \
    "$(ip -o -4 addr show | awk "{ print \$2 \"=\" \$4 }" | sort | tr "\n" " ")"' >ranks.txt 2>err.txt
want=$(for r in 0 1 2 3; do echo "$r ${HOSTS_NS[r / 2]} eth0=${HOSTS_ADDR[r / 2]}/24 lo=127.0.0.1/8"; done)
got=$(sort -n ranks.txt | awk '{ print $1, $2, $4, $5 }')
if [ "$got" = "$want" ] && [ "$(awk '{ print $3 }' ranks.txt | sort -u | wc -l)" -eq 2 ] &&
   [ "$(awk '{ print $3 }' ranks.txt | sort -u | grep -c "$(readlink /proc/self/ns/net)")" -eq 0 ]; then
    ok "2 hosts: ranks 0,1 on ${HOSTS_ADDR[0]}, 2,3 on ${HOSTS_ADDR[1]}, each its own hostname and namespace"
else
    bad "2 hosts: each rank on its host" "$(tr '\n' ';' <ranks.txt)"
fi

if across "2 hosts: linreg data=2" 2 "${LINREG[@]}"; then
    linreg_jsonl <out.txt >linreg2.jsonl
    same_losses "2 hosts: linreg data=2 = 1 device" linreg1.jsonl linreg2.jsonl 1 20
fi
across "2 hosts: MLP data=2" 2 "${MLP[@]}" --devices 2 --mesh data=2 --metrics mlp_d2.jsonl &&
    same_losses "2 hosts: MLP data=2 = 1 device" mlp1.jsonl mlp_d2.jsonl 1 6
across "2 hosts: MLP data=2,tensor=2 (4 ranks)" 4 "${MLP[@]}" --devices 4 --mesh data=2,tensor=2 \
    --metrics mlp_d2t2.jsonl &&
    same_losses "2 hosts: MLP data=2,tensor=2 (4 ranks) = 1 device" mlp1.jsonl mlp_d2t2.jsonl 1 6

# GPT data=2, and what crosses the link: the bytes of a 2-step run taken
# from a 5-step one's are 3 steps' worth
b0=$(hosts_sent)
across "2 hosts: GPT data=2 (2 steps)" 2 "${GPT[@]}" --steps 2 --devices 2 --mesh data=2
b1=$(hosts_sent)
if across "2 hosts: GPT data=2" 2 "${GPT[@]}" --devices 2 --mesh data=2 --metrics gpt_d2.jsonl; then
    b2=$(hosts_sent)
    same_losses "2 hosts: GPT data=2 = 1 device" gpt1.jsonl gpt_d2.jsonl 1 5
    per_step=$(( ((b2 - b1) - (b1 - b0)) / 3 ))
    echo "info  2 hosts, GPT data=2 ($GPT_PARAMS parameters): $per_step bytes a step over the veths" \
         "($(( b1 - b0 )) for a 2-step run), median step $(median_ms gpt_d2.jsonl) ms"
    if [ "$per_step" -ge $((8 * GPT_PARAMS)) ] && [ "$per_step" -le $((32 * GPT_PARAMS)) ]; then
        ok "2 hosts: the gradients cross the link ($per_step bytes a step, 8-32 a parameter)"
    else
        : >err.txt; bad "2 hosts: the gradients cross the link" \
            "$per_step bytes a step, want $((8 * GPT_PARAMS))..$((32 * GPT_PARAMS))"
    fi
fi
for mesh in fsdp=2 tensor=2; do
    across "2 hosts: GPT $mesh" 2 "${GPT[@]}" --devices 2 --mesh $mesh --metrics "gpt_${mesh%=2}.jsonl" &&
        same_losses "2 hosts: GPT $mesh = 1 device" gpt1.jsonl "gpt_${mesh%=2}.jsonl" 1 5
done
across "2 hosts: GPT pipe=2" 2 "${GPT[@]/--accum/--microbatches}" --devices 2 --mesh pipe=2 \
    --schedule 1f1b --metrics gpt_p2.jsonl &&
    same_losses "2 hosts: GPT pipe=2 (1f1b, 2 microbatches) = 1 device" gpt1.jsonl gpt_p2.jsonl 1 5
echo "info  2 hosts, median step: MLP data=2 $(median_ms mlp_d2.jsonl) ms, GPT fsdp=2" \
     "$(median_ms gpt_fsdp.jsonl) ms, tensor=2 $(median_ms gpt_tensor.jsonl) ms," \
     "pipe=2 $(median_ms gpt_p2.jsonl) ms"

# mpirun killed (SIGKILL) in the middle of a job leaves its ranks running
# (here the one on the first host, beside it); hosts_down ends them
hosts_mpirun 2 sleep 300 >out.txt 2>err.txt &
for i in $(seq 100); do [ -n "$(ip netns pids "${HOSTS_NS[1]}")" ] && break; sleep 0.1; done
sleep 0.5
procs() { ip netns pids "$1" 2>/dev/null | xargs -r ps -o comm= -p | sort | tr '\n' ' '; }
mpirun_pid=$(ip netns pids "${HOSTS_NS[0]}" | xargs -r ps -o pid=,comm= -p | awk '$2 == "mpirun" { print $1 }')
[ -n "$mpirun_pid" ] && kill -KILL "$mpirun_pid"
wait
sleep 0.5
before="$(procs "${HOSTS_NS[0]}")/ $(procs "${HOSTS_NS[1]}")"
ns=("${HOSTS_NS[@]}")
hosts_down
left=$(for n in "${ns[@]}"; do ip netns pids "$n" 2>/dev/null; done)
if [ -n "$mpirun_pid" ] && [ "$before" != "/ " ] && [ -z "$left" ] && ! ip netns list | grep -q "^mt$$"; then
    ok "mpirun killed mid-job: hosts_down ends what it left ($before) and the namespaces"
else
    : >err.txt; bad "mpirun killed mid-job: nothing left" \
        "mpirun ${mpirun_pid:-not found}; left before: $before; after: $left $(ip netns list | grep "^mt$$")"
fi

# ---- 4 hosts ------------------------------------------------------------------------

hosts_up 4 "$WORK/hosts4" || { bad "4 hosts up" "see above"; test_end; exit 1; }
if across "4 hosts: linreg data=4" 4 "${LINREG[@]}"; then
    linreg_jsonl <out.txt >linreg4.jsonl
    same_losses "4 hosts: linreg data=4 = 1 device" linreg1.jsonl linreg4.jsonl 1 20
fi
across "4 hosts: GPT data=2,fsdp=2" 4 "${GPT[@]}" --devices 4 --mesh data=2,fsdp=2 --metrics gpt_d2f2.jsonl &&
    same_losses "4 hosts: GPT data=2,fsdp=2 = 1 device" gpt1.jsonl gpt_d2f2.jsonl 1 5
echo "info  4 hosts (4 ranks on $(nproc) cores), median step: GPT data=2,fsdp=2 $(median_ms gpt_d2f2.jsonl) ms"

# a checkpoint written on 4 hosts (one file: the hosts share this filesystem)
# and resumed on one device ends as the one-device run does
if across "4 hosts: GPT data=2,tensor=2, 3 steps to a checkpoint" 4 "${GPT[@]}" --steps 3 --devices 4 \
        --mesh data=2,tensor=2 --ckpt-out c.ckpt --metrics gpt_ckpt.jsonl; then
    same_losses "4 hosts: GPT data=2,tensor=2 = 1 device" gpt1.jsonl gpt_ckpt.jsonl 1 3
    if timeout 120 "$BIN" "${GPT[@]}" --ckpt-in c.ckpt --metrics gpt_resumed.jsonl >out.txt 2>err.txt; then
        grep -v '"step":[123],' gpt_resumed.jsonl >gpt_resumed45.jsonl
        same_losses "checkpoint of 4 hosts resumed on 1 device = 1 device" gpt1.jsonl gpt_resumed45.jsonl 4 5
    else
        bad "checkpoint of 4 hosts resumed on 1 device" "exit $?"
    fi
fi
hosts_down

# ---- the trap ---------------------------------------------------------------------

# a script that made hosts and exits, or is killed, leaves none behind
for how in "exit 3" "kill -TERM \$\$; sleep 5"; do
    bash -c 'source "$1"; hosts_up 2 "$2" || exit 9; echo "$$"; '"$how" _ "$here/hosts.sh" "$WORK/trap.$RANDOM" \
        >pid.txt 2>err.txt
    rc=$? pid=$(cat pid.txt)
    if [ -n "$pid" ] && [ "$rc" -ne 9 ] && ! ip netns list | grep -q "^mt${pid}"; then
        ok "hosts removed on '${how%%;*}' (exit $rc)"
    else
        bad "hosts removed on '${how%%;*}'" "exit $rc; left: $(ip netns list | grep "^mt${pid:-none}" | tr '\n' ' ')"
    fi
done

test_end
