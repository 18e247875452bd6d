#!/usr/bin/env bash
# test_context_pipe.sh — the pipe axis composed with the context axis and
# with packed documents (issue 41, items 3 and 4: "each composes with ...
# pipe"; ../shared/CONTEXT_PARALLEL.md §7: CP runs inside each stage).
#
#   bash tests/test_context_pipe.sh <meshtrain binary> [<build dir>]
#
# Every parallel run trains the one-device run (DESIGN.md's invariant), as
# test_context_parallel.sh checks it: each step's loss and gradient norm
# within 1e-5 (same_metrics), the final parameters (the llm.c-family file,
# every float) within 1e-4.
#   - context=2 x pipe=2, the GPT and the LLaMA (GQA, 4 heads over 2 kv
#     heads), L=4 so that ZB-V's four chunks each hold a block: schedules
#     1f1b and zb-v under each lowering (allgather, ring, ulysses), gpipe
#     and interleaved under allgather; data=2 x context=2 x pipe=2 once;
#     context=2 x tensor=2 x pipe=2 with sequence parallelism (1f1b, zb-v).
#   - explain on context=2 x pipe=2: device 0 (chunk 0, blocks 0-1) gathers
#     k and v over context in each of its blocks and nothing else,
#     L0 · 2 · B · S · KV · HS · 4 bytes with L0 = 2 blocks (§5's form), so
#     the sequence is split inside the stage, not only at the input.
#   - --doc-mask on with pipe=2 (1f1b and zb-v) against one device with
#     --doc-mask on, documents split at every space (--eot-id 32) on bytes,
#     and at tokenize --doc-sep's </s> on a SentencePiece file (when
#     spm_train is there); and one device's --doc-mask on against off
#     differs, so that documents fed to no stage would fail.
#   - --doc-mask on with context=2 x pipe=2 (1f1b, zb-v under each
#     lowering) against one device with --doc-mask on.
# Each run also evaluates once (step 3): its validation loss within 1e-5 of
# one device's.
# Every run is under `timeout 120`.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_context_pipe.sh "$@"

for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog."; done >text.txt

# accum 4 microbatches of 2 sequences: m >= p for every schedule; a
# validation loss at step 3 (the pipeline's forward-only pass)
GPT=(--data text.txt --model gpt --layers 4 --channels 32 --heads 4 --max-seq 16 --seq 16
     --batch 2 --microbatches 4 --steps 3 --eval-every 3 --eval-batches 2 --threads 2 --quiet)
LLAMA=(--data text.txt --model llama --layers 4 --channels 32 --heads 4 --kv-heads 2
       --vocab 256 --max-seq 16 --seq 16 --batch 2 --microbatches 4 --steps 3 --eval-every 3
       --eval-batches 2 --threads 2 --quiet)

# run NAME METRICS ARGS...: the run exits 0 (lib.sh's train_run)
run() { train_run "$@"; }

# same_val NAME A B: both --metrics files hold validation losses, as many,
# each pair within 1e-5 (relative, or absolute below 1)
same_val() {
    local name=$1
    if python3 - "$2" "$3" <<'PY'
import json, sys
a = [json.loads(l)["val_loss"] for l in open(sys.argv[1]) if '"val_loss"' in l]
b = [json.loads(l)["val_loss"] for l in open(sys.argv[2]) if '"val_loss"' in l]
sys.exit(0 if len(a) == len(b) > 0 and all(
    abs(x - y) <= 1e-5 * max(1.0, abs(x)) for x, y in zip(a, b)) else 1)
PY
    then ok "$name"; else bad "$name" "$(grep -o '"val_loss":[^,]*' "$2") vs $(grep -o '"val_loss":[^,]*' "$3")"; fi
}

# same_run NAME ARGS...: the run on the given mesh equals one.jsonl, one.bin
same_run() {
    local name=$1
    shift
    run "$name" r.jsonl "$@" --llmc-out r.bin
    same_metrics "$name: losses and gradient norms equal one device's" one.jsonl r.jsonl
    same_val "$name: validation loss equals one device's" one.jsonl r.jsonl
    same_floats "$name: parameters equal one device's" one.bin r.bin
}

for model in gpt llama; do
    if [ $model = gpt ]; then ARGS=("${GPT[@]}"); else ARGS=("${LLAMA[@]}"); fi
    run "$model one device" one.jsonl "${ARGS[@]}" --llmc-out one.bin
    for kind in allgather ring ulysses; do
        for sched in 1f1b zb-v; do
            same_run "$model context=2,pipe=2 $sched $kind" "${ARGS[@]}" --mesh context=2,pipe=2 \
                --schedule $sched --cp-attention $kind
        done
    done
    for sched in gpipe interleaved; do
        same_run "$model context=2,pipe=2 $sched allgather" "${ARGS[@]}" --mesh context=2,pipe=2 \
            --schedule $sched
    done
    same_run "$model data=2,context=2,pipe=2 1f1b ring" "${ARGS[@]}" --mesh data=2,context=2,pipe=2 \
        --cp-attention ring
    # sequence parallelism in each stage: the rows at a stage boundary over
    # context+tensor on both sides (each device's head-tail share, split again)
    for sched in 1f1b zb-v; do
        same_run "$model context=2,tensor=2,pipe=2 +SP $sched" "${ARGS[@]}" \
            --mesh context=2,tensor=2,pipe=2 --sequence-parallel --schedule $sched --threads 8
    done
done

# explain: device 0's program on context=2 x pipe=2 (B=2, S=16, KV=2, HS=8)
got=$(timeout 120 "$BIN" explain --model llama --kv-heads 2 --layers 4 --channels 32 --heads 4 \
      --seq 16 --batch 2 --microbatches 2 --devices 4 --mesh context=2,pipe=2 2>err.txt |
      awk '$2 == "all_gather" && /over context/ { n++; for (i = 1; i <= NF; i++) if ($(i+1) ~ /^bytes/) s += $i }
           END { print n + 0, s + 0 }')
want="4 $((2 * 2 * 2 * 16 * 2 * 8 * 4))"   # 2 blocks x (k, v); L0 · 2 · B · S · KV · HS · 4
[ "$got" = "$want" ] && ok "explain context=2,pipe=2: chunk 0 gathers k, v in each of its 2 blocks, $want bytes" ||
    bad "explain context=2,pipe=2 all-gathers (count, bytes)" "got $got, want $want"

# packed documents on a pipeline: a document a word (space, byte 32)
DOCS=(--doc-mask on --eot-id 32)
for model in gpt llama; do
    if [ $model = gpt ]; then ARGS=("${GPT[@]}"); else ARGS=("${LLAMA[@]}"); fi
    run "$model one device, doc-mask off" off.jsonl "${ARGS[@]}"
    run "$model one device, doc-mask on" one.jsonl "${ARGS[@]}" "${DOCS[@]}" --llmc-out one.bin
    if python3 - off.jsonl one.jsonl <<'PY'
import json, sys
a = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"loss"' in l]
b = [json.loads(l)["loss"] for l in open(sys.argv[2]) if '"loss"' in l]
sys.exit(0 if len(a) == len(b) > 0 and abs(a[0] - b[0]) > 1e-4 * abs(a[0]) else 1)
PY
    then ok "$model: --doc-mask on changes step 1's loss (the test can tell documents from none)"
    else bad "$model: --doc-mask on against off" "$(head -c 120 off.jsonl) vs $(head -c 120 one.jsonl)"; fi
    for sched in 1f1b zb-v; do
        same_run "$model pipe=2 $sched doc-mask" "${ARGS[@]}" "${DOCS[@]}" --mesh pipe=2 \
            --schedule $sched
        for kind in allgather ring ulysses; do
            same_run "$model context=2,pipe=2 $sched $kind doc-mask" "${ARGS[@]}" "${DOCS[@]}" \
                --mesh context=2,pipe=2 --schedule $sched --cp-attention $kind
        done
    done
done

# tokenize --doc-sep's documents (</s> between them) on a LLaMA pipeline
need_spm
for i in $(seq 1 60); do printf 'story %d begins here.\nit goes on a while\n\n' "$i"; done >docs.txt
timeout 120 "$BIN" tokenize --text docs.txt --vocab 300 --model-out tok --out docs.bin --doc-sep \
    >out.txt 2>err.txt || bad "tokenize --doc-sep" "exit $?"
SPM=(--data docs.bin --tokenizer tok.model --model llama --layers 4 --channels 32 --heads 4
     --kv-heads 2 --max-seq 16 --seq 16 --batch 2 --microbatches 2 --steps 3 --val-frac 0.2
     --eval-every 3 --eval-batches 1 --threads 2 --quiet)
run "llama --doc-sep one device, doc-mask off" off.jsonl "${SPM[@]}"
SPM+=(--doc-mask on)
run "llama --doc-sep one device" one.jsonl "${SPM[@]}" --llmc-out one.bin
if ! cmp -s <(grep -o '"loss":[^,]*' off.jsonl) <(grep -o '"loss":[^,]*' one.jsonl); then
    ok "llama --doc-sep: --doc-mask on changes the losses"
else bad "llama --doc-sep: --doc-mask on against off" "the same losses"; fi
same_run "llama --doc-sep pipe=2 1f1b doc-mask" "${SPM[@]}" --mesh pipe=2
test_end
