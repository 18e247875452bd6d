#!/usr/bin/env bash
# aarch64.sh — the cross-built aarch64 programs under qemu-user, against the
# native build (`make test-aarch64`, which `make test` runs):
#
#   bash tests/aarch64.sh <native meshtrain> <aarch64 build dir>
#
# What runs (Open BLAS on one thread: OPENBLAS_NUM_THREADS=1):
#   - test_base, test_tensor, test_vec, test_kernels: every case, forked
#     under the harness's timeout, as ctest runs them natively (test_vec
#     holds the NEON kernels against generic and float64);
#   - test_dp and a subset of test_comm's cases: the threads transport with
#     2 and 4 device threads (small and large messages, async, p2p, abort and
#     timeout), each case in its own process under `timeout`;
#   - `meshtrain train` of a tiny GPT on one device, whose losses and
#     gradient norms must equal the native x86 build's (an independent
#     reference: other compiler back end, other vector kernels, other Open
#     BLAS) to float32 rounding, and on meshes of 2 and 4 devices, which must
#     equal the aarch64 one-device run.
#
# qemu-user on an x86 host runs the guest's loads and stores with the host's
# ordering (TSO), so this checks that the ARM build compiles under -Werror and
# computes the same numbers; it cannot catch a missing barrier (that review
# is by reading: src/base/arch_impl.h, src/comm/threads.c).
#
# The loader: QEMU_LD_PREFIX=/ so that qemu loads /lib/ld-linux-aarch64.so.1
# from libc6:arm64, the same glibc as the libc.so.6 the loader then finds
# (libopenblas0:arm64 depends on libc6:arm64, and the host's ld.so.cache
# lists /usr/lib/aarch64-linux-gnu). With -L /usr/aarch64-linux-gnu the loader
# is the cross toolchain's (libc6-arm64-cross, an older Debian revision) and
# the libc.so.6 still libc6:arm64's: their private _rtld_global layouts differ
# by 8 bytes (0x11a0 against 0x11a8 in Debian 12), so libc walks a list in the
# loader's state that never ends — pthread_create's stack cache and fork's
# child both spin in user space without a system call.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ARM=$(realpath "${2:?usage: aarch64.sh <native meshtrain> <aarch64 build dir>}")
test_start aarch64.sh "$@"
NATIVE=$BIN

export QEMU_LD_PREFIX=/ OPENBLAS_NUM_THREADS=1 MT_TEST_TIMEOUT=300
if ! command -v qemu-aarch64 >/dev/null || [ ! -e /lib/ld-linux-aarch64.so.1 ]; then
    echo "FAIL  setup: needs qemu-aarch64 (qemu-user) and /lib/ld-linux-aarch64.so.1 (libc6:arm64)"
    exit 1
fi
QEMU=qemu-aarch64

# run NAME SECONDS CMD...: CMD under a timeout; stdout and stderr to log.txt.
run() {
    local name=$1 limit=$2 t0=$SECONDS
    shift 2
    timeout -k 5 "$limit" "$@" >log.txt 2>&1
    local rc=$?
    if [ "$rc" -eq 0 ]; then
        ok "$name ($((SECONDS - t0)) s)"
    else
        cp log.txt err.txt
        bad "$name" "exit $rc$([ "$rc" -eq 124 ] && echo ", timed out after $limit s")"
    fi
    return "$rc"
}

# ---- the unit tests ------------------------------------------------------------

for t in test_base test_tensor test_vec test_kernels test_dp; do
    run "$t" 600 "$QEMU" "$ARM/$t"
done

# Threads transport: 2 to 8 device threads on the cores there are, the latency
# path and the rendezvous. flat_large and the many-outstanding cases take
# minutes under qemu and add no path; async_overlaps_compute times device
# threads against each other, which a loaded emulator does not honour.
COMM_CASES=(flat_1d_meshes flat_2d_meshes pmax_pmin_propagate_nan async_start_wait
            async_start_then_fail committed_rendezvous_outlives_deadline
            deadline_at_last_arrival_is_no_timeout failing_device_aborts_the_rest
            timeout_names_missing_device p2p_tags_in_any_order_fifo_within_a_tag
            p2p_failing_sender_aborts_receiver)
for c in "${COMM_CASES[@]}"; do
    run "test_comm $c" 120 "$QEMU" "$ARM/test_comm" "$c"
done

# ---- training: aarch64 against x86, and meshes against one device ---------------

awk 'BEGIN { srand(7); split("the quick brown fox jumps over a lazy dog while seven " \
     "wizards box", w, " "); for (i = 0; i < 3000; i++) printf "%s ", w[int(rand() * 14) + 1] }' \
    >data.txt
GPT=(train --data data.txt --layers 1 --channels 32 --heads 2 --max-seq 32 --seq 32 --batch 4
     --steps 4 --threads 1 --quiet)

# same_run NAME A.jsonl B.jsonl: every step's loss and gradient norm agree to
# a relative 1e-4 (float32 rounding of a few reassociated sums; a wrong
# kernel or a lost reduction is off by far more).
same_run() {
    local name=$1 why
    why=$(awk -F'[:,}]' '
        { for (i = 1; i < NF; i++) { if ($i ~ /"loss"$/) l = $(i + 1); if ($i ~ /"grad_norm"$/) g = $(i + 1) }
          if (FNR == NR) { L[FNR] = l; G[FNR] = g; n++; next }
          m++
          if (!(FNR in L)) { print "step " FNR " missing from the reference"; exit }
          dl = l - L[FNR]; dg = g - G[FNR]; if (dl < 0) dl = -dl; if (dg < 0) dg = -dg
          if (dl > 1e-4 * (L[FNR] < 0 ? -L[FNR] : L[FNR]) || dg > 1e-4 * G[FNR]) {
              printf "step %d: loss %s grad_norm %s, reference %s %s", FNR, l, g, L[FNR], G[FNR]; exit }
        }
        END { if (m != n && m > 0) print m " steps, reference " n; if (n == 0) print "no steps" }' "$2" "$3")
    if [ -z "$why" ] && [ -s "$3" ]; then ok "$name"; else : >err.txt; bad "$name" "${why:-no metrics}"; fi
}

if run "native x86 gpt, 1 device" 60 "$NATIVE" "${GPT[@]}" --metrics x86.jsonl &&
   run "aarch64 gpt, 1 device" 120 "$QEMU" "$ARM/meshtrain" "${GPT[@]}" --metrics arm.jsonl; then
    same_run "aarch64 1 device equals x86" x86.jsonl arm.jsonl
    for mesh in data=2 tensor=2 data=2,tensor=2; do
        n=$(( $(echo "$mesh" | tr -cd '0-9,' | tr ',' '*') ))
        run "aarch64 gpt, mesh $mesh" 120 "$QEMU" "$ARM/meshtrain" "${GPT[@]}" --devices "$n" \
            --mesh "$mesh" --metrics "mesh.jsonl" &&
            same_run "aarch64 mesh $mesh equals 1 device" arm.jsonl mesh.jsonl
    done
fi

test_end
