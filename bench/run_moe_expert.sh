#!/usr/bin/env bash
# run_moe_expert.sh — expert parallelism on this machine's cores (issue 42,
# item 4): moe-tiny (3 MoE blocks of 8 experts, top-2, C = F_e = 64) on one
# device, data=2 and expert=2, the same global batch, in one run of this
# script: the median step time of steps 11..STEPS and its ratio to one
# device's, and on expert=2 the bytes of rows each device sends a step (the
# `send 'expert'` spans of a --trace) against the closed form at balance,
#   27 products x 4·(N·(P-1)/P·(C+F_e) + el·(P-1)),   N = (B/P)·T·k
# (each block's w1, w3 and w2 products, forward, bwd_x and bwd_w; docs/moe.md).
#
#   bash bench/run_moe_expert.sh [BUILD_DIR] [STEPS]
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-60}
BIN=$(realpath "$BUILD/meshtrain")
WORK=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-moe-expert.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog."; done >text.txt
B=8 T=32
ARGS=(--data text.txt --model llama --preset moe-tiny --seq $T --batch $B --threads 2 --quiet
      --steps "$STEPS")

"$BIN" train "${ARGS[@]}" --metrics one.jsonl >/dev/null
"$BIN" train "${ARGS[@]}" --mesh data=2 --metrics dp.jsonl >/dev/null
"$BIN" train "${ARGS[@]}" --mesh expert=2 --metrics ep.jsonl >/dev/null
# the bytes from a traced run of its own (tracing costs time)
"$BIN" train "${ARGS[@]}" --mesh expert=2 --metrics ept.jsonl --trace ep.trace \
    --trace-steps "$STEPS" >/dev/null

python3 - "$B" "$T" <<'PY'
import json, sys
B, T = int(sys.argv[1]), int(sys.argv[2])
def median_ms(path):
    ms = sorted(json.loads(l)["ms"] for l in open(path) if '"ms"' in l)
    ms = ms[10:] if len(ms) > 20 else ms
    return ms[len(ms) // 2]
one = median_ms("one.jsonl")
print("%-10s %12s %8s" % ("mesh", "ms/step", "ratio"))
for name, path in (("1 device", "one.jsonl"), ("data=2", "dp.jsonl"), ("expert=2", "ep.jsonl")):
    m = median_ms(path)
    print("%-10s %12.2f %7.2fx" % (name, m, m / one))
ev = json.load(open("ep.trace"))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
steps = sum(1 for l in open("ept.jsonl") if '"loss"' in l)
sent = {}
for e in ev:
    if e.get("name", "").startswith("send 'expert'"):
        sent[e["tid"]] = sent.get(e["tid"], 0) + e["args"]["bytes"]
P, k, C, F, E, blocks = 2, 2, 64, 64, 8, 3
N = B // P * T * k
closed = blocks * 9 * 4 * (N * (P - 1) / P * (C + F) + E // P * (P - 1))
print("\nexpert=2, bytes of rows a device sends a step (closed form at balance: %d)" % closed)
for d, b in sorted(sent.items()):
    print("  device %d: %10.0f  (%.3f of the closed form)" % (d, b / steps, b / steps / closed))
mean = sum(sent.values()) / len(sent) / steps
print("  mean:     %10.0f  (%.3f of the closed form)" % (mean, mean / closed))
PY
