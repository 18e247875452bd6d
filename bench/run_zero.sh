#!/usr/bin/env bash
# run_zero.sh — issue 39's ZeRO table: data parallel against ZeRO-1/2/3 and
# FSDP's choices on data=2 (fsdp=2), GPT and LLaMA, 8 microbatches a step.
#
#   bash bench/run_zero.sh [BUILD_DIR [STEPS [ROUNDS]]]
#
# Each row is `meshtrain train` on two thread devices; its step time is the
# median of its steps after the first (the first gathers and plans), and
# the rows interleaved in each round so that the machine's drift falls on
# every row alike. The reference is data parallelism in the same run: a
# row's speed is the median over ROUNDS rounds of DP's step in that round
# over the row's; ms/step the median of the row's steps over the rounds. The bytes are what device 0's collectives moved in a step
# (--metrics: parameters gathered, gradients reduce-scattered and
# all-reduced), and psi their sum in the ZeRO paper's units (an all-reduce
# counting 2): DP, ZeRO-1 and ZeRO-2 move 2, ZeRO-3 about 3 a microbatch.
# Target (issue 39): ZeRO-1 and ZeRO-2 at 0.97 or more of DP's speed, since
# they move no more than it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build}
STEPS=${2:-5}
ROUNDS=${3:-5}
BIN=$BUILD/meshtrain
OUT=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-bench-zero.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
for i in $(seq 1 4000); do echo "the quick brown fox $i jumps over the lazy dog, said the cat."; done \
    >"$OUT/text.txt"

COMMON=(--data "$OUT/text.txt" --layers 4 --channels 128 --max-seq 64 --seq 64 --batch 8
        --accum 8 --steps "$STEPS" --threads 2 --quiet)
declare -A MODEL=([gpt]="--model gpt --heads 4"
                  [llama]="--model llama --heads 8 --kv-heads 4")
ROWS=("dp|--mesh data=2"
      "zero1|--mesh data=2 --zero 1"
      "zero2|--mesh data=2 --zero 2"
      "zero3|--mesh data=2 --zero 3"
      "zero3-raf-off|--mesh data=2 --zero 3 --reshard-after-forward off"
      "zero3-once|--mesh data=2 --zero 3 --fsdp-gather once"
      "fsdp2|--mesh fsdp=2"
      "fsdp2-once|--mesh fsdp=2 --fsdp-gather once")

echo "== $BIN train, data=2 (fsdp=2), 8 microbatches a step, $STEPS steps, $ROUNDS rounds"
lscpu | sed -n 's/^Model name: *//p'
for model in gpt llama; do
    for round in $(seq 1 "$ROUNDS"); do
        for row in "${ROWS[@]}"; do
            name=${row%%|*} flags=${row#*|}
            # shellcheck disable=SC2086
            "$BIN" train "${COMMON[@]}" ${MODEL[$model]} $flags \
                --metrics "$OUT/$model-$name-$round.jsonl" >/dev/null
        done
    done
done

python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = ["dp", "zero1", "zero2", "zero3", "zero3-raf-off", "zero3-once", "fsdp2", "fsdp2-once"]
for model in ("gpt", "llama"):
    print(f"\n{model}: {'row':<15} {'ms/step':>9} {'speed':>7} {'MB/step':>9} {'psi':>6}  "
          f"(gathered / reduce-scattered / all-reduced MB)")
    ms, speed, last = {}, {}, {}
    step = {}   # (row, round): the median of its steps after the first
    for r in rows:
        for k in range(1, rounds + 1):
            lines = [json.loads(l) for l in open(f"{out}/{model}-{r}-{k}.jsonl")]
            step[r, k] = statistics.median(x["ms"] for x in lines[1:])
            last[r] = lines[-1]
        ms[r] = statistics.median(step[r, k] for k in range(1, rounds + 1))
    for r in rows:   # each round's ratio to DP's run of the same round, their median
        speed[r] = statistics.median(step["dp", k] / step[r, k] for k in range(1, rounds + 1))
    for r in rows:
        x = last[r]
        mb = (x["param_gather_bytes"] + x["grad_scatter_bytes"] + x["grad_reduce_bytes"]) / 1e6
        psi = (x["param_gather"] + x["grad_scatter"] + 2 * x["grad_reduce"]) / x["psi"]
        note = "  (target >= 0.97)" if r in ("zero1", "zero2") else ""
        print(f"{model}: {r:<15} {ms[r]:9.1f} {speed[r]:6.3f}x {mb:9.2f} {psi:6.2f}  "
              f"({x['param_gather_bytes'] / 1e6:.2f} / {x['grad_scatter_bytes'] / 1e6:.2f} / "
              f"{x['grad_reduce_bytes'] / 1e6:.2f}){note}")
PY
