#!/usr/bin/env bash
# test_trace_cli.sh — `meshtrain train --trace FILE` from the command line: the
# file is valid JSON (python3's json module, when there is one) with a track
# per device holding "step N", op spans with their phase and FLOPs, the
# optimizer and idle spans, for a data-parallel run and a pipeline (whose
# phase regions keep their "forward mb M chunk K" names); --trace-steps
# keeps the last steps; one device off a mesh is traced as data=1, the same
# run, with the model's FLOPs per step in the trace. The numbers (FLOPs
# against the graph's, bytes against explain's) are checked in test_trace.c.
#
#   bash tests/test_trace_cli.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_trace_cli.sh "$@"

for i in $(seq 40); do printf 'the quick brown fox jumps over the lazy dog; one run on any mesh. '; done >text.txt
MODEL=(--data text.txt --layers 2 --channels 32 --heads 4 --seq 16 --max-seq 16 --batch 4
       --threads 2 --seed 7 --quiet)

# check NAME FILE DEVICES STEPS: the trace's shape, with python3 when there is one
check() {
    local name=$1 file=$2 devices=$3 steps=$4
    if ! command -v python3 >/dev/null; then
        grep -q '"cat":"op"' "$file" && grep -q '"name":"optimizer"' "$file" \
            && ok "$name (no python3: grep only)" || bad "$name" "no op or optimizer span"
        return
    fi
    local why
    why=$(python3 - "$file" "$devices" "$steps" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
devices, steps = int(sys.argv[2]), sys.argv[3].split(",")
names = {e["tid"]: e["args"]["name"] for e in ev if e["name"] == "thread_name"}
for d in range(devices):
    if names.get(d) != "device %d" % d: print("no track 'device %d'" % d)
    mine = [e for e in ev if e.get("ph") == "X" and e["tid"] == d]
    got = sorted(e["name"] for e in mine if e["cat"] == "step")
    if got != sorted("step " + s for s in steps): print("device %d steps %s" % (d, got))
    ops = [e for e in mine if e["cat"] == "op"]
    if not ops or any(e["args"]["phase"] not in "FBW" or e["args"]["flops"] < 0 for e in ops):
        print("device %d: op spans missing or without phase/flops" % d)
    if not any("layer" in e["args"] for e in ops): print("device %d: no op has a layer" % d)
    if sum(e["name"] == "optimizer" for e in mine) != len(steps): print("device %d: optimizer spans" % d)
    if not any(e["cat"] == "idle" for e in mine): print("device %d: no idle span" % d)
PY
)
    [ $? -eq 0 ] && [ -z "$why" ] && ok "$name" || bad "$name" "$why"
}

"$BIN" train "${MODEL[@]}" --steps 3 --devices 2 --mesh data=2 --trace dp.json >out.txt 2>err.txt
[ $? -eq 0 ] && check "data=2: every step, ops, optimizer, idle, valid JSON" dp.json 2 1,2,3 \
             || bad "data=2 --trace" "exit status"

"$BIN" train "${MODEL[@]}" --steps 4 --trace-steps 2 --devices 2 --mesh data=2 --trace k.json \
    >out.txt 2>err.txt
[ $? -eq 0 ] && check "--trace-steps 2 keeps steps 3 and 4" k.json 2 3,4 \
             || bad "--trace-steps" "exit status"

"$BIN" train "${MODEL[@]}" --steps 2 --devices 2 --mesh pipe=2 --microbatches 2 --trace p.json \
    >out.txt 2>err.txt
if [ $? -eq 0 ] && grep -q '"forward mb 1 chunk 1"' p.json; then
    check "pipe=2: phase regions kept, ops inside" p.json 2 1,2
else
    bad "pipe=2 --trace" "exit status or no 'forward mb 1 chunk 1'"
fi

# One device, no mesh: traced as data=1, the same training run as untraced
# (the losses, byte for byte), and the trace carries the model's FLOPs per
# step: 6N + 6·L·C·T per token (llm.c's: PaLM's 6N, causal attention half
# PaLM's 12·L·C·T), worked out here from the model's
# sizes (V = 256 bytes, L 2, C 32, T 16, B 4: N = V·C + T·C + L·(12C² + 13C) + 2C).
"$BIN" train "${MODEL[@]}" --steps 3 --metrics plain.jsonl >out.txt 2>err.txt \
    || bad "one device, untraced" "exit status"
if "$BIN" train "${MODEL[@]}" --steps 3 --trace one.json --metrics traced.jsonl >out.txt 2>err.txt
then
    check "one device: traced as one track" one.json 1 1,2,3
    diff <(grep -o '"loss":[^,]*' plain.jsonl) <(grep -o '"loss":[^,]*' traced.jsonl) >/dev/null \
        && ok "one device: the traced run's losses are the untraced run's" \
        || bad "one device traced" "losses differ: $(paste -d' ' plain.jsonl traced.jsonl | head -3)"
    want=$(awk 'BEGIN { V = 256; T = 16; C = 32; L = 2; B = 4;
                        N = V*C + T*C + L*(12*C*C + 13*C) + 2*C;
                        printf "%.0f", (6*N + 6*L*C*T) * B*T }')
    got=$(grep -o '"name":"model".*"flops_per_step":[0-9.e+]*' one.json | grep -o '[0-9.e+]*$')
    awk -v g="${got:-0}" -v w="$want" 'BEGIN { exit !(g == w) }' \
        && ok "the model's FLOPs per step in the trace ($got = 6N + attention)" \
        || bad "model FLOPs in the trace" "got '${got}', want $want"
else
    bad "one device --trace" "exit status: $(cat err.txt)"
fi

test_end
