#!/usr/bin/env bash
# run_long_context.sh — long sequences on one device against context
# parallelism (issue 41's long-context table).
#
#   bash bench/run_long_context.sh [BUILD_DIR] [T ...]     (default T: 8192 16384 32768)
#
# A LLaMA of L=4 blocks, C=256, 4 query heads on 2 kv heads (HS 64), byte
# tokens of the fortunes ($BUILD/fortunes.txt, as `make demo` makes it),
# batch 1, trained one step at each T with the threads transport on the
# machine's cores (--threads 2): one device (--mesh data=1) against
# --mesh context=2 (allgather). For each point: the trainer's planned
# memory per device (parameters, gradients, AdamW state, activations,
# temporary: the "memory" line it prints, the same figure `meshtrain
# explain` prints), the process's peak RSS (/usr/bin/time; the devices of
# context=2 are threads of one process, so RSS/devices is a device's share),
# the step's time and tokens/s, and its FLOP rate over an Open BLAS sgemm
# (1024^3, `meshtrain bench matmul`, 2 threads) timed just before it. One
# step a point: it is the first, so it includes the arena's first touch.
#
# Then the longest T (a multiple of 1024) whose planned memory per device
# fits in 20 GiB on one device, context=2 and context=4: `meshtrain
# explain` on the shape-only backend (no run), by bisection.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build}
shift || true
TS=("$@")
[[ ${#TS[@]} -gt 0 ]] || TS=(8192 16384 32768)
source bench/blas_env.sh
MT=$BUILD/meshtrain
DATA=$BUILD/fortunes.txt
[[ -s $DATA ]] || { echo "meshtrain: run_long_context.sh: $DATA is missing; make it with" \
    "'make $DATA' (the fortunes corpus, as make demo does)" >&2; exit 1; }
OUT=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-longctx.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
MODEL=(--model llama --layers 4 --channels 256 --heads 4 --kv-heads 2)
LIMIT_MIB=$((20 * 1024))

# the sum of a "memory ... per device:" line's sizes, in MiB
mem_mib() {
    grep -m1 'per device:' | grep -oE '[0-9.]+ (KiB|MiB|GiB|TiB)' | awk '
        { f = $2 == "KiB" ? 1 / 1024 : $2 == "MiB" ? 1 : $2 == "GiB" ? 1024 : 1048576; s += $1 * f }
        END { printf "%.1f\n", s }'
}

sgemm_gflops() {
    "$MT" bench matmul --m 1024 --n 1024 --k 1024 --threads 2 | awk '/^Open BLAS/ { print $NF }'
}

printf '%-10s %6s %12s %10s %12s %10s %9s %8s %8s %7s\n' mesh T "planned/dev" "RSS" "RSS/dev" \
       "step ms" "tokens/s" "GFLOP/s" "sgemm" "/sgemm"
for T in "${TS[@]}"; do
    for mesh in data=1 context=2; do
        ndev=${mesh#*=}
        sg=$(sgemm_gflops)
        cmd=("$MT" train "${MODEL[@]}" --data "$DATA" --max-seq "$T" --seq "$T" --batch 1
             --steps 1 --warmup 0 --threads 2 --devices "$ndev" --mesh "$mesh"
             --metrics "$OUT/m.jsonl")
        echo "== ${cmd[*]}" >&2
        rm -f "$OUT/m.jsonl"
        /usr/bin/time -v -o "$OUT/time.txt" "${cmd[@]}" > "$OUT/train.txt" 2>&1
        planned=$(mem_mib < "$OUT/train.txt")
        rss_kib=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$OUT/time.txt")
        read -r ms tps gf < <(sed -E 's/.*"tokens_per_s":([0-9.e+-]+).*"gflops":([0-9.e+-]+).*"ms":([0-9.e+-]+).*/\3 \1 \2/' \
                                   "$OUT/m.jsonl" | tail -1)
        awk -v m="$mesh" -v T="$T" -v p="$planned" -v r="$rss_kib" -v n="$ndev" -v ms="$ms" \
            -v tps="$tps" -v gf="$gf" -v sg="$sg" 'BEGIN {
            printf "%-10s %6d %8.0f MiB %6.0f MiB %8.0f MiB %10.0f %9.0f %8.1f %8.1f %7.2f\n",
                   m, T, p, r / 1024, r / 1024 / n, ms, tps, gf, sg, gf / sg }'
    done
done

# longest T within 20 GiB per device, by the shape-only explain
planned_at() {   # devices, T
    "$MT" explain "${MODEL[@]}" --vocab 256 --max-seq "$2" --seq "$2" --batch 1 \
        --devices "$1" --mesh "context=$1" | mem_mib
}
echo
echo "longest T whose planned memory per device fits in 20 GiB (meshtrain explain, shape-only;" \
     "T a multiple of 1024)"
printf '%-10s %9s %16s\n' mesh "T max" "planned/dev MiB"
for P in 1 2 4; do
    lo=1 hi=1   # in units of 1024 tokens: lo fits, hi does not
    while awk -v a="$(planned_at "$P" $((hi * 1024)))" -v l=$LIMIT_MIB 'BEGIN { exit !(a <= l) }'; do
        lo=$hi; hi=$((hi * 2))
    done
    while ((hi - lo > 1)); do
        mid=$(((lo + hi) / 2))
        if awk -v a="$(planned_at "$P" $((mid * 1024)))" -v l=$LIMIT_MIB 'BEGIN { exit !(a <= l) }'; then
            lo=$mid
        else
            hi=$mid
        fi
    done
    printf "%-10s %9d %16s\n" "$([[ $P == 1 ]] && echo "one device" || echo "context=$P")" $((lo * 1024)) "$(planned_at "$P" $((lo * 1024)))"
done
