# hosts.sh — several "hosts" on one machine, for the tests (sourced, not run):
# Linux network namespaces, each with its own interface and address, joined
# by veth pairs into a bridge that lives in a namespace of its own (the
# switch), and mpirun across them, Open MPI starting its daemons in them
# through an rsh agent that enters the namespace instead of ssh.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/hosts.sh"
#   hosts_can || echo "skip: $HOSTS_WHY"     may this process make namespaces?
#   hosts_ready_or_skip BIN      in a test: exits 77 (ctest's skip) with a
#                                "skip" line unless BIN links Open MPI and
#                                hosts_can; exports ASAN_OPTIONS with
#                                detect_leaks=0 (Open MPI's allocations count
#                                as leaks under ASan) and sets MPI_ENV to the
#                                -x options that pass the sanitizers' and
#                                MT_COMM_TIMEOUT's settings to the ranks
#   hosts_up N DIR               N hosts (1..16), named by their addresses
#                                192.0.2.11, .12, ...; DIR (new) holds the
#                                agent, hostfiles and rankfiles. Removed again
#                                on EXIT, INT and TERM (any trap set before is
#                                still run), or by hosts_down.
#   hosts_mpirun NP ARGS...      mpirun -np NP ARGS across the hosts: the ranks
#                                in blocks of NP/N a host (ranks 0..NP/N-1 on
#                                the first), rank r bound to core r % cores
#                                (a rankfile: without one every host binds
#                                its first rank to core 0), TCP on
#                                192.0.2.0/24 only, mpi_yield_when_idle
#                                (ranks may outnumber the cores). mpirun itself
#                                runs in the first host's namespace. Under
#                                `timeout $HOSTS_TIMEOUT` (default 120 s).
#   hosts_link I down|up         sets host I's link (0-based) down or up: its
#                                eth0 in its namespace, or the hub's port
#   hosts_sent                   bytes all hosts have sent into the switch so
#                                far (the veths' counters, switch side)
#   hosts_down                   kills what still runs in the namespaces (the
#                                daemons and ranks a failed job left) and
#                                deletes them; harmless when nothing is up
#
# A slow or lossy network: set before hosts_up,
#   HOSTS_DELAY_MS=D             every frame held D ms on its way to a host
#                                (so a round trip between hosts takes 2·D)
#   HOSTS_LOSS=P                 and dropped with probability P (0 <= P < 1)
# With either, the switch is netem on the switch side of each veth where the
# kernel has sch_netem (tc qdisc add ... netem), otherwise tests/net_hub.c (a
# hub holding and dropping frames, its path in HOSTS_HUB: the build's
# net_hub) with a TAP device a host instead of the veths and the bridge; the
# hub's losses come from a fixed seed. HOSTS_SWITCH_KIND says which ran
# (bridge, netem or hub).
#
# Only the namespaces made here are touched: the veth pairs are created
# inside the switch namespace with one end moved into a host's, so no
# interface, address or route of the namespace the test runs in changes, and
# the names carry this shell's pid (mt<pid>h1, mt<pid>sw) so concurrent runs
# and a killed run's leftovers do not collide. The hosts share the machine's
# filesystem (as a cluster shares /home): paths mean the same on every host.

HOSTS_N=0
HOSTS_DIR=
HOSTS_NS=()       # host i's namespace (0-based)
HOSTS_ADDR=()     # host i's address, also its name in the hostfile
HOSTS_SWITCH=
HOSTS_WHY=
HOSTS_TIMEOUT=${HOSTS_TIMEOUT:-120}
HOSTS_DELAY_MS=${HOSTS_DELAY_MS:-0}
HOSTS_LOSS=${HOSTS_LOSS:-0}
HOSTS_HUB=${HOSTS_HUB:-}
HOSTS_SWITCH_KIND=

# hosts_can: 0 when this process may make network namespaces and veth pairs
# and mpirun is there; otherwise 1, with the reason in HOSTS_WHY.
hosts_can() {
    HOSTS_WHY=
    if [ "$(id -u)" -ne 0 ]; then HOSTS_WHY="not root (network namespaces need CAP_SYS_ADMIN)"
    elif ! command -v ip >/dev/null 2>&1; then HOSTS_WHY="no ip command (Debian's iproute2)"
    elif ! command -v mpirun >/dev/null 2>&1; then HOSTS_WHY="no mpirun (Debian's openmpi-bin)"
    else
        local probe=mt$$probe
        if ! ip netns add "$probe" 2>/dev/null; then
            HOSTS_WHY="ip netns add fails here (a container without CAP_SYS_ADMIN?)"
        elif ! ip -n "$probe" link add name a type veth peer name b 2>/dev/null; then
            HOSTS_WHY="veth pairs cannot be made here (no veth module?)"
        fi
        ip netns del "$probe" 2>/dev/null
    fi
    [ -z "$HOSTS_WHY" ]
}

hosts_ready_or_skip() {
    # meshtrain was built with MPI when it links libmpi (as in test_example.sh)
    if ! ldd "$1" 2>/dev/null | grep -q 'libmpi'; then
        echo "skip  meshtrain was built without MPI: no runs across hosts"
        exit 77
    fi
    if ! hosts_can; then
        echo "skip  no namespace hosts here: $HOSTS_WHY"
        exit 77
    fi
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    MPI_ENV=(-x ASAN_OPTIONS -x MT_COMM_TIMEOUT)
    [ -n "${UBSAN_OPTIONS:-}" ] && MPI_ENV+=(-x UBSAN_OPTIONS)
    return 0
}

# hosts__sw ARGS...: `ip ARGS` in the switch namespace; says which failed.
hosts__sw() {
    ip -n "$HOSTS_SWITCH" "$@" || { echo "hosts.sh: ip -n $HOSTS_SWITCH $* failed" >&2; return 1; }
}

hosts_up() {
    local n=$1 i p=mt$$
    HOSTS_DIR=$2
    [ "$n" -ge 1 ] && [ "$n" -le 16 ] || { echo "hosts_up: $n hosts, want 1..16" >&2; return 1; }
    [ "$HOSTS_N" -eq 0 ] || { echo "hosts_up: hosts are up already; hosts_down first" >&2; return 1; }
    mkdir "$HOSTS_DIR" || return 1
    hosts__trap
    HOSTS_SWITCH=${p}sw
    ip netns add "$HOSTS_SWITCH" || return 1
    HOSTS_N=$n   # from here on hosts_down has something to remove
    for ((i = 0; i < n; i++)); do
        HOSTS_NS[i]=${p}h$((i + 1))
        HOSTS_ADDR[i]=192.0.2.$((11 + i))
        ip netns add "${HOSTS_NS[i]}" || return 1
    done
    HOSTS_SWITCH_KIND=bridge
    if [ "$HOSTS_DELAY_MS" != 0 ] || [ "$HOSTS_LOSS" != 0 ]; then
        if hosts__netem_works; then HOSTS_SWITCH_KIND=netem; else HOSTS_SWITCH_KIND=hub; fi
    fi
    if [ "$HOSTS_SWITCH_KIND" = hub ]; then hosts__hub || return 1; else hosts__bridge || return 1; fi
    for ((i = 0; i < n; i++)); do
        ip -n "${HOSTS_NS[i]}" link set lo up || return 1
        ip -n "${HOSTS_NS[i]}" addr add "${HOSTS_ADDR[i]}/24" dev eth0 || return 1
        ip -n "${HOSTS_NS[i]}" link set eth0 up || return 1
    done
    hosts__agent >"$HOSTS_DIR/agent" && chmod +x "$HOSTS_DIR/agent" || return 1
    # the links come up asynchronously: wait for every host's eth0
    for ((i = 0; i < n; i++)); do
        hosts__wait_up "${HOSTS_NS[i]}" eth0 || return 1
    done
}

# hosts__bridge: each host's eth0 a veth into br0 in the switch namespace
# (the switch's end h<i>), with netem on the switch's ends when asked for.
hosts__bridge() {
    local i
    hosts__sw link add br0 type bridge || return 1
    hosts__sw link set br0 up || return 1
    for ((i = 0; i < HOSTS_N; i++)); do
        hosts__sw link add name "h$((i + 1))" type veth peer name eth0 netns "${HOSTS_NS[i]}" || return 1
        hosts__sw link set "h$((i + 1))" master br0 up || return 1
        if [ "$HOSTS_SWITCH_KIND" = netem ]; then
            tc -n "$HOSTS_SWITCH" qdisc add dev "h$((i + 1))" root netem delay "${HOSTS_DELAY_MS}ms" \
                loss "$(awk -v p="$HOSTS_LOSS" 'BEGIN { print p * 100 }')%" || return 1
        fi
    done
}

# hosts__netem_works: 0 when this kernel has sch_netem (tried on a dummy
# device in a namespace of its own).
hosts__netem_works() {
    local probe=mt$$netem ok=1
    command -v tc >/dev/null 2>&1 || return 1
    ip netns add "$probe" 2>/dev/null || return 1
    ip -n "$probe" link add d0 type dummy 2>/dev/null &&
        tc -n "$probe" qdisc add dev d0 root netem delay 1ms 2>/dev/null && ok=0
    ip netns del "$probe" 2>/dev/null
    return $ok
}

# hosts__hub: tests/net_hub.c in the switch namespace, one TAP device a
# host, each moved into its host's namespace as eth0 (the hub keeps its
# descriptor); the hub's control FIFO is $HOSTS_DIR/hub.ctl.
hosts__hub() {
    local i taps=() t
    [ -x "$HOSTS_HUB" ] || { echo "hosts_up: no sch_netem here, and HOSTS_HUB ('$HOSTS_HUB') is not the net_hub program" >&2; return 1; }
    for ((i = 0; i < HOSTS_N; i++)); do taps+=("h$((i + 1))"); done
    mkfifo "$HOSTS_DIR/hub.ctl" || return 1
    ip netns exec "$HOSTS_SWITCH" "$HOSTS_HUB" --delay-ms "$HOSTS_DELAY_MS" --loss "$HOSTS_LOSS" \
        --seed 7 --ctl "$HOSTS_DIR/hub.ctl" "${taps[@]}" >"$HOSTS_DIR/hub.out" 2>"$HOSTS_DIR/hub.err" &
    for ((t = 0; t < 50; t++)); do grep -q ready "$HOSTS_DIR/hub.out" 2>/dev/null && break; sleep 0.1; done
    grep -q ready "$HOSTS_DIR/hub.out" || { echo "hosts_up: net_hub did not start: $(cat "$HOSTS_DIR/hub.err")" >&2; return 1; }
    for ((i = 0; i < HOSTS_N; i++)); do
        hosts__sw link set "h$((i + 1))" netns "${HOSTS_NS[i]}" || return 1
        ip -n "${HOSTS_NS[i]}" link set "h$((i + 1))" name eth0 || return 1
    done
}

hosts_link() {
    local i=$1 how=$2
    if [ "$HOSTS_SWITCH_KIND" = hub ]; then echo "$how $i" >"$HOSTS_DIR/hub.ctl"
    else ip -n "${HOSTS_NS[i]}" link set eth0 "$how"; fi
}

# hosts__wait_up NS DEV: waits (up to 5 s) for DEV's carrier in NS.
hosts__wait_up() {
    local t
    for ((t = 0; t < 50; t++)); do
        # a TAP device's state is "unknown" when up (it has no carrier to report)
        case $(ip netns exec "$1" cat "/sys/class/net/$2/operstate" 2>/dev/null) in up | unknown) return 0 ;; esac
        sleep 0.1
    done
    echo "hosts_up: $2 in $1 is not up after 5 s" >&2
    return 1
}

# The rsh agent: Open MPI runs `agent [options] HOST COMMAND...` as it would
# run ssh, the command being words for a shell (PATH=...; export PATH; ...
# orted ...), joined by spaces as ssh joins them.
hosts__agent() {
    local i
    echo '#!/bin/sh'
    echo '# written by tests/hosts.sh: Open MPI rsh agent into network namespaces'
    echo 'while [ $# -gt 0 ]; do case $1 in -*) shift ;; *) break ;; esac; done'
    echo 'host=$1; shift'
    echo 'case $host in'
    for ((i = 0; i < HOSTS_N; i++)); do
        echo "    ${HOSTS_ADDR[i]}) ns=${HOSTS_NS[i]} ;;"
    done
    echo '    *) echo "agent: no host named $host here" >&2; exit 255 ;;'
    echo 'esac'
    echo 'exec ip netns exec "$ns" unshare --uts sh -c "hostname $ns && $*"'
}

hosts_mpirun() {
    local np=$1 per i r cores
    shift
    [ "$HOSTS_N" -ge 1 ] || { echo "hosts_mpirun: no hosts (hosts_up first)" >&2; return 1; }
    [ $((np % HOSTS_N)) -eq 0 ] || { echo "hosts_mpirun: $np ranks on $HOSTS_N hosts" >&2; return 1; }
    per=$((np / HOSTS_N))
    cores=$(nproc)
    : >"$HOSTS_DIR/hostfile.$np"
    : >"$HOSTS_DIR/rankfile.$np"
    for ((i = 0; i < HOSTS_N; i++)); do
        echo "${HOSTS_ADDR[i]} slots=$per" >>"$HOSTS_DIR/hostfile.$np"
    done
    for ((r = 0; r < np; r++)); do
        echo "rank $r=${HOSTS_ADDR[r / per]} slot=$((r % cores))" >>"$HOSTS_DIR/rankfile.$np"
    done
    timeout -k 5 "$HOSTS_TIMEOUT" ip netns exec "${HOSTS_NS[0]}" unshare --uts \
        sh -c 'hostname "$0" && exec "$@"' "${HOSTS_NS[0]}" mpirun --allow-run-as-root -np "$np" \
        --hostfile "$HOSTS_DIR/hostfile.$np" --rankfile "$HOSTS_DIR/rankfile.$np" \
        --mca plm_rsh_agent "$HOSTS_DIR/agent" --mca plm_rsh_no_tree_spawn 1 \
        --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include 192.0.2.0/24 --mca oob_tcp_if_include 192.0.2.0/24 \
        --mca mpi_yield_when_idle 1 "$@"
}

hosts_sent() {
    local i total=0 b
    for ((i = 1; i <= HOSTS_N; i++)); do
        if [ "$HOSTS_SWITCH_KIND" = hub ]; then   # no switch-side device: the host's own count
            b=$(ip netns exec "${HOSTS_NS[i - 1]}" cat /sys/class/net/eth0/statistics/tx_bytes) || return 1
        else
            b=$(ip netns exec "$HOSTS_SWITCH" cat "/sys/class/net/h$i/statistics/rx_bytes") || return 1
        fi
        total=$((total + b))
    done
    echo "$total"
}

hosts_down() {
    local i ns pids
    [ "$HOSTS_N" -gt 0 ] || return 0
    # the switch's namespace holds the hub, when there is one
    for ns in "${HOSTS_NS[@]}" "$HOSTS_SWITCH"; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -n "$pids" ] && kill -TERM $pids 2>/dev/null
    done
    for ((i = 0; i < 20; i++)); do
        pids=
        for ns in "${HOSTS_NS[@]}" "$HOSTS_SWITCH"; do pids+=$(ip netns pids "$ns" 2>/dev/null); done
        [ -z "$pids" ] && break
        sleep 0.1
    done
    for ns in "${HOSTS_NS[@]}" "$HOSTS_SWITCH"; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    done
    # deleting a namespace deletes its veth end, and so the pair
    for ns in "${HOSTS_NS[@]}" "$HOSTS_SWITCH"; do ip netns del "$ns" 2>/dev/null; done
    HOSTS_N=0 HOSTS_NS=() HOSTS_ADDR=()
}

# The cleanup runs first, then whatever EXIT trap the script had (lib.sh's
# removal of WORK); INT and TERM exit, which runs the EXIT trap.
hosts__trap() {
    local prior
    [ -n "${HOSTS_TRAPPED:-}" ] && return   # once: the prior trap would be ours
    HOSTS_TRAPPED=1
    prior=$(trap -p EXIT)
    eval "set -- $prior"
    HOSTS_PRIOR_EXIT=${3:-}
    trap 'hosts_down; eval "$HOSTS_PRIOR_EXIT"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}
