#!/usr/bin/env bash
# test_context_ckpt.sh — checkpoints across the context axis (issue 41's
# "checkpoints written on context=2 load on one device and on tensor=2").
#
#   bash tests/test_context_ckpt.sh <meshtrain binary> [<build dir>]
#
# For the GPT and the LLaMA (GQA, 4 heads over 2 kv heads): a run of 3
# steps on context=2 writes a checkpoint (--ckpt-out); runs resumed from it
# (--ckpt-in) to step 5 on one device, on tensor=2 and on context=2 x pipe=2
# train steps 4 and 5 as the uninterrupted one-device run of 5 steps does
# (each step's loss and gradient norm within 1e-5) and end on its
# parameters (every float of the llm.c-family file within 1e-4). A
# checkpoint written on context=2 x pipe=2 (each stage's parameters
# gathered to whole tensors) resumes on one device the same way. Every run
# is under `timeout 120`.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_context_ckpt.sh "$@"

for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog."; done >text.txt

GPT=(--data text.txt --model gpt --layers 2 --channels 32 --heads 4 --max-seq 16 --seq 16
     --batch 2 --microbatches 2 --threads 2 --quiet)
LLAMA=(--data text.txt --model llama --layers 2 --channels 32 --heads 4 --kv-heads 2
       --vocab 256 --max-seq 16 --seq 16 --batch 2 --microbatches 2 --threads 2 --quiet)

# same_tail NAME ONE R: every step R holds (some) has ONE's loss and
# gradient norm at that step within 1e-5 (relative, or absolute below 1)
same_tail() {
    local name=$1
    if python3 - "$2" "$3" <<'PY'
import json, sys
a = {r["step"]: r for r in map(json.loads, open(sys.argv[1])) if "loss" in r}
b = [r for r in map(json.loads, open(sys.argv[2])) if "loss" in r]
ok = len(b) > 0 and all(r["step"] in a and all(
    abs(a[r["step"]][k] - r[k]) <= 1e-5 * max(1.0, abs(r[k])) for k in ("loss", "grad_norm"))
    for r in b)
sys.exit(0 if ok else 1)
PY
    then ok "$name"; else bad "$name" "$(tail -c 300 "$2") vs $(tail -c 300 "$3")"; fi
}

# resumed NAME CKPT ARGS...: a run resumed from CKPT to step 5 trains the
# one-device run's steps 4 and 5 and ends on its parameters
resumed() {
    local name=$1 ckpt=$2
    shift 2
    train_run "$name" r.jsonl "$@" --steps 5 --ckpt-in "$ckpt" --llmc-out r.bin
    local steps
    steps=$(grep -c '"loss"' r.jsonl 2>/dev/null)
    [ "$steps" = 2 ] && ok "$name: runs steps 4 and 5 only" || bad "$name: steps run" "$steps, want 2"
    same_tail "$name: steps 4 and 5 equal the uninterrupted run's" one.jsonl r.jsonl
    same_floats "$name: parameters equal the uninterrupted run's" one.bin r.bin
}

for model in gpt llama; do
    if [ $model = gpt ]; then ARGS=("${GPT[@]}"); else ARGS=("${LLAMA[@]}"); fi
    train_run "$model one device, 5 steps" one.jsonl "${ARGS[@]}" --steps 5 --llmc-out one.bin
    train_run "$model context=2, 3 steps" w.jsonl "${ARGS[@]}" --steps 3 --mesh context=2 \
        --ckpt-out cp.ckpt
    same_tail "$model context=2: steps 1-3 equal one device's" one.jsonl w.jsonl
    resumed "$model context=2 checkpoint on one device" cp.ckpt "${ARGS[@]}"
    resumed "$model context=2 checkpoint on tensor=2" cp.ckpt "${ARGS[@]}" --mesh tensor=2
    resumed "$model context=2 checkpoint on context=2,pipe=2" cp.ckpt "${ARGS[@]}" \
        --mesh context=2,pipe=2 --cp-attention ring
    train_run "$model context=2,pipe=2, 3 steps" w.jsonl "${ARGS[@]}" --steps 3 \
        --mesh context=2,pipe=2 --ckpt-out cpp.ckpt
    resumed "$model context=2,pipe=2 checkpoint on one device" cpp.ckpt "${ARGS[@]}"
done
test_end
