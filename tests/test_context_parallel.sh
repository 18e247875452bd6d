#!/usr/bin/env bash
# test_context_parallel.sh — the context axis (issue 41, items 2 and 3:
# context parallelism with the all-gather lowering, ../shared/CONTEXT_PARALLEL.md).
#
#   bash tests/test_context_parallel.sh <meshtrain binary> [<build dir>]
#
# Every parallel run trains the one-device run (DESIGN.md's invariant): the
# GPT and the LLaMA (GQA, KV=2) on context=2 and context=4, and context=2
# composed with data=2 and with tensor=2: each step's loss and gradient norm
# within 1e-5 of one device's (same_metrics), and the final parameters (the
# llm.c-family file, every float) within 1e-4. A checkpoint written on
# context=2 resumes on one device where the one-device run is. explain's
# all-gathers and reduce-scatters per layer move the closed form's bytes
# (the LLaMA: 2·B·S·KV·HS·4 gathered, k and v; the GPT: its packed qkv,
# B·S·3C·4, q riding along). T not a multiple of 2·context and
# --cp-attention ring|ulysses are refused before any work, exit 2, naming
# the numbers. Every run is under `timeout 120`.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_context_parallel.sh "$@"

for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog."; done >text.txt

GPT=(--data text.txt --model gpt --layers 2 --channels 32 --heads 4 --max-seq 16 --seq 16
     --batch 4 --steps 3 --threads 2 --quiet)
LLAMA=(--data text.txt --model llama --layers 2 --channels 32 --heads 4 --kv-heads 2
       --vocab 256 --max-seq 16 --seq 16 --batch 4 --steps 3 --threads 2 --quiet)

# run NAME METRICS ARGS...: the run exits 0
run() {
    local name=$1 out=$2
    shift 2
    rm -f "$out"
    timeout 120 "$BIN" train "$@" --metrics "$out" >out.txt 2>err.txt ||
        bad "$name" "exit $?: $(head -2 err.txt | tr '\n' ' ')"
}

# same_floats NAME A B: two files of as many bytes whose 4-byte words, as
# floats, agree within 1e-4 (relative, or absolute below 1), or are equal
same_floats() {
    local name=$1
    if python3 - "$2" "$3" <<'PY'
import array, sys
ra, rb = open(sys.argv[1], 'rb').read(), open(sys.argv[2], 'rb').read()
a, b, ia, ib = array.array('f'), array.array('f'), array.array('I'), array.array('I')
a.frombytes(ra); b.frombytes(rb); ia.frombytes(ra); ib.frombytes(rb)
# the header's integers compare as bits (llama2.c's negative vocabulary reads as a NaN)
ok = len(a) == len(b) > 0 and all(
    i == j or abs(x - y) <= 1e-4 * max(1.0, abs(x)) for x, y, i, j in zip(a, b, ia, ib))
sys.exit(0 if ok else 1)
PY
    then ok "$name"; else bad "$name" "parameters differ ($2 vs $3)"; fi
}

for model in gpt llama; do
    if [ $model = gpt ]; then ARGS=("${GPT[@]}"); else ARGS=("${LLAMA[@]}"); fi
    run "$model one device" one.jsonl "${ARGS[@]}" --llmc-out one.bin
    for mesh in context=2 context=4 data=2,context=2 context=2,tensor=2; do
        run "$model $mesh" r.jsonl "${ARGS[@]}" --mesh $mesh --llmc-out r.bin
        same_metrics "$model: $mesh losses and gradient norms equal one device's" one.jsonl r.jsonl
        same_floats "$model: $mesh parameters equal one device's" one.bin r.bin
    done
done

# a checkpoint written on context=2 resumes on one device
run "gpt 5 steps" one.jsonl "${GPT[@]}" --steps 5
run "gpt context=2 3 steps" r.jsonl "${GPT[@]}" --mesh context=2 --ckpt-out cp.ckpt
run "gpt resumed on one device" r2.jsonl "${GPT[@]}" --steps 5 --ckpt-in cp.ckpt
if python3 - one.jsonl r2.jsonl <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
b = [json.loads(l) for l in open(sys.argv[2]) if '"loss"' in l]
ok = len(b) > 0 and abs(a[-1]["loss"] - b[-1]["loss"]) <= 1e-5 * max(1.0, abs(a[-1]["loss"]))
sys.exit(0 if ok else 1)
PY
then ok "a context=2 checkpoint resumed on one device ends at one device's step-5 loss"
else bad "context=2 checkpoint resumed on one device" "$(tail -c 200 r2.jsonl)"; fi

# explain's bytes per layer, against the closed form (B=2, S=16, L=2)
bytes() {   # bytes OP ARGS...: the sum of OP's bytes over context in explain's listing
    local op=$1
    shift
    timeout 120 "$BIN" explain "$@" 2>/dev/null |
        awk -v op="$op" '$2 == op && /over context/ { for (i = 1; i <= NF; i++) if ($(i+1) ~ /^bytes/) s += $i } END { print s + 0 }'
}
EX=(--layers 2 --channels 32 --heads 4 --seq 16 --batch 2 --devices 2 --mesh context=2)
want=$((2 * 2 * 2 * 16 * 2 * 8 * 4))   # L · (k and v) · B · S · KV · HS · 4
got=$(bytes all_gather --model llama --kv-heads 2 "${EX[@]}")
[ "$got" = "$want" ] && ok "llama: all-gathered bytes $got = L·2·B·S·KV·HS·4" ||
    bad "llama all-gather bytes" "got $got, want $want"
got=$(bytes psum_scatter --model llama --kv-heads 2 "${EX[@]}")
[ "$got" = "$want" ] && ok "llama: reduce-scattered bytes $got = L·2·B·S·KV·HS·4" ||
    bad "llama reduce-scatter bytes" "got $got, want $want"
want=$((2 * 2 * 16 * 3 * 32 * 4))   # L · B · S · 3C · 4
got=$(bytes all_gather --model gpt "${EX[@]}")
[ "$got" = "$want" ] && ok "gpt: all-gathered bytes $got = L·B·S·3C·4" ||
    bad "gpt all-gather bytes" "got $got, want $want"

# refused before any work, exit 2, naming the numbers
refuse() {
    local name=$1 frag=$2
    shift 2
    timeout 120 "$BIN" train "$@" >out.txt 2>err.txt
    local rc=$?
    if [ $rc -eq 2 ] && grep -q -- "$frag" err.txt && head -1 err.txt | grep -q '^meshtrain: '; then
        ok "refused: $name"
    else
        bad "refused: $name" "exit $rc: $(head -2 err.txt | tr '\n' ' ')"
    fi
}
refuse "T=12 on context=4" "T=12 (--seq) does not divide by 8" "${GPT[@]}" --seq 12 --mesh context=4
refuse "--cp-attention ring" "ring is not built yet" "${GPT[@]}" --mesh context=2 --cp-attention ring
refuse "--cp-attention ulysses" "ulysses is not built yet" "${LLAMA[@]}" --mesh context=2 --cp-attention ulysses

test_end
