#!/usr/bin/env bash
# test_doc_context.sh — packed documents on a sequence split over the
# context axis (issue 41, item 4 under item 3's lowerings): `train
# --doc-mask on` with --cp-attention allgather, ring and ulysses, for the
# GPT, the LLaMA with grouped-query attention (4 heads over 2 kv heads), MQA
# (one kv head) and, for Ulysses, 8 heads over 4 kv heads (so that heads and
# kv heads divide over context=4 and over tensor=2 x context=2), on
# context=2, context=4, data=2 x context=2 and context=2 x tensor=2 (and
# fsdp=2 x context=2 for the 8-head LLaMA). Each
# run must train the one-device run with the same documents (DESIGN.md's
# invariant): every step's loss and gradient norm within 1e-5 (relative
# above 1), and every float of the final parameters (the llm.c-family
# file) within 1e-4. The end-of-text id is the space (32) of a byte-level
# text, so a row of 16 tokens holds three or four documents and every
# chunk boundary of context=4 (chunks of 2 tokens) meets a document edge
# somewhere. And the test can fail: on one device the mask changes the
# first step's loss by more than 1e-4 (the documents are seen), so a split
# run that dropped the ids would miss the reference. Every run is under
# `timeout 120`.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_doc_context.sh "$@"

for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog."; done >text.txt

COMMON=(--data text.txt --max-seq 16 --seq 16 --batch 4 --steps 3 --threads 2 --quiet
        --layers 2 --channels 32 --vocab 256)
DOCS=(--doc-mask on --eot-id 32)
model_args() {
    case $1 in
    gpt) echo --model gpt --heads 4 ;;
    gqa) echo --model llama --heads 4 --kv-heads 2 ;;
    mqa) echo --model llama --heads 4 --kv-heads 1 ;;
    gqa8) echo --model llama --heads 8 --kv-heads 4 ;;
    esac
}

# train NAME OUT ARGS...: runs train with its metrics in OUT.jsonl and its
# parameters in OUT.bin; a failed run is reported and its files removed
train() {
    local name=$1 out=$2
    shift 2
    rm -f "$out.jsonl" "$out.bin"
    timeout 120 "$BIN" train "${COMMON[@]}" "$@" --metrics "$out.jsonl" --llmc-out "$out.bin" \
        >out.txt 2>err.txt || {
        bad "$name" "exit $?: $(head -2 err.txt | tr '\n' ' ')"
        rm -f "$out.jsonl" "$out.bin"
    }
}

# meshes_of MODEL KIND: the meshes MODEL trains on under --cp-attention KIND
# (Ulysses needs the heads and kv heads a device holds to divide by context)
ALL="context=2 context=4 data=2,context=2 context=2,tensor=2"
meshes_of() {
    case $1/$2 in
    gpt/*|gqa/allgather|gqa/ring) echo "$ALL" ;;
    gqa8/ulysses) echo "$ALL fsdp=2,context=2" ;;
    gqa8/*) echo "fsdp=2,context=2" ;;
    gqa/ulysses) echo "context=2 data=2,context=2" ;;
    mqa/allgather) echo "context=2 context=4" ;;
    mqa/ring) echo "context=2 context=2,tensor=2" ;;
    esac
}

# The pairs to compare, one line each: NAME REFERENCE RUN
: >pairs.txt
for model in gpt gqa mqa gqa8; do
    # shellcheck disable=SC2207
    M=($(model_args $model))
    train "$model one device" "$model.one" "${M[@]}" "${DOCS[@]}"
    for kind in allgather ring ulysses; do
        for mesh in $(meshes_of $model $kind); do
            out="$model.$kind.${mesh//[=,]/_}"
            train "$model $kind $mesh" "$out" "${M[@]}" "${DOCS[@]}" --mesh "$mesh" \
                --cp-attention "$kind"
            echo "$model/$kind/$mesh $model.one $out" >>pairs.txt
        done
    done
done
train "gpt one device, no mask" gpt.off $(model_args gpt)

# every pair: losses and gradient norms (1e-5), parameters (1e-4); and the
# mask's own effect on one device
python3 - pairs.txt <<'PY' >verdicts.txt
import array, json, os, sys

def metrics(path):
    return [json.loads(l) for l in open(path) if '"loss"' in l]

def params(path):
    raw = open(path, 'rb').read()
    f, i = array.array('f'), array.array('I')
    f.frombytes(raw)
    i.frombytes(raw)
    return f, i

for line in open(sys.argv[1]):
    name, ref, run = line.split()
    if not (os.path.exists(run + '.jsonl') and os.path.exists(ref + '.jsonl')):
        continue   # the failed run was reported already
    a, b = metrics(ref + '.jsonl'), metrics(run + '.jsonl')
    worst = max((abs(x[k] - y[k]) / max(1.0, abs(x[k]))
                 for x, y in zip(a, b) for k in ('loss', 'grad_norm')), default=1.0)
    if len(a) != len(b) or not a or worst > 1e-5:
        print('bad %s losses and gradient norms differ from one device by %.3g (steps %d, %d)'
              % (name, worst, len(a), len(b)))
    else:
        print('ok %s losses and gradient norms equal one device\'s' % name)
    (fa, ia), (fb, ib) = params(ref + '.bin'), params(run + '.bin')
    # the header's integers compare as bits (llama2.c's negative vocabulary reads as a NaN)
    far = [k for k, (x, y, p, q) in enumerate(zip(fa, fb, ia, ib))
           if p != q and not abs(x - y) <= 1e-4 * max(1.0, abs(x))]
    if len(fa) != len(fb) or not fa or far:
        print('bad %s parameters differ from one device\'s at %d floats (first %s)'
              % (name, len(far), far[:3]))
    else:
        print('ok %s parameters equal one device\'s' % name)

on, off = metrics('gpt.one.jsonl'), metrics('gpt.off.jsonl')
d = abs(on[0]['loss'] - off[0]['loss'])
print(('ok' if d > 1e-4 else 'bad') + ' the mask changes one device\'s first loss (by %.3g)' % d)
PY
while read -r verdict name rest; do
    if [ "$verdict" = ok ]; then ok "$name $rest"; else bad "$name" "$rest"; fi
done <verdicts.txt
[ "$(grep -c '' verdicts.txt)" -eq $((2 * $(grep -c '' pairs.txt) + 1)) ] ||
    bad "every pair compared" "$(grep -c '' verdicts.txt) verdicts for $(grep -c '' pairs.txt) pairs"
test_end
