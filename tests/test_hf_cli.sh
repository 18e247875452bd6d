#!/usr/bin/env bash
# test_hf_cli.sh — `meshtrain train --hf-in DIR / --hf-out DIR` (issue 43):
# a Hugging Face directory written at the end of a run, then fine-tuned from
# on one device, tensor=2 (+ sequence parallelism), fsdp=2 and pipe=2 (each
# device's blocks cut from the whole tensors), every step's loss and
# gradient norm within 1e-5 of one device's; a run at learning rate 0
# writes back model.safetensors and config.json byte for byte, from one
# device, tensor=2 and pipe=2 alike; `sample --hf-in` writes the text the
# checkpoint of the same weights gives; a GPT-2 (GPT2LMHeadModel) written,
# fine-tuned from on one device and tensor=2 alike and sampled; a Qwen2
# (q, k, v biases) and a Qwen3 (q and k norms) written and fine-tuned from on
# one device, tensor=2 and context=2 alike; and the
# refusals (a model flag beside --hf-in, a file given as a directory, a
# LLaMA's directory for a GPT, an MLP, two starts). The weights' numerics
# against Hugging Face's equations are tests/test_hf.c's and
# tests/test_hf_gpt2.c's.
#
#   bash tests/test_hf_cli.sh <meshtrain binary> [build dir]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_hf_cli.sh "$@"

english_text text.txt
RUN=(--data text.txt --seq 32 --batch 4 --threads 1 --quiet)

"$BIN" train --model llama "${RUN[@]}" --layers 2 --channels 64 --heads 4 --kv-heads 2 \
    --max-seq 64 --steps 2 --hf-out a >out.txt 2>err.txt &&
    [ -s a/config.json ] && [ -s a/model.safetensors ] &&
    ok "train --hf-out writes config.json and model.safetensors" ||
    bad "train --hf-out" "$(tail -3 err.txt)"

# one device, and with two microbatches a step (what pipe=2 runs)
for accum in 1 2; do
    "$BIN" train --model llama "${RUN[@]}" --steps 3 --hf-in a --accum $accum \
        --metrics one$accum.jsonl >out.txt 2>err.txt ||
        bad "train --hf-in on one device, accum $accum" "$(tail -3 err.txt)"
done
for mesh in "tensor=2 --sequence-parallel" fsdp=2 "pipe=2 --microbatches 2"; do
    read -r -a M <<<"--mesh $mesh"
    "$BIN" train --model llama "${RUN[@]}" --steps 3 --hf-in a --devices 2 "${M[@]}" \
        --metrics r.jsonl >out.txt 2>err.txt || { bad "--hf-in on $mesh" "$(tail -3 err.txt)"; continue; }
    one=one1.jsonl
    [[ $mesh == pipe* ]] && one=one2.jsonl
    same_metrics "--hf-in on $mesh: losses and gradient norms equal one device's" $one r.jsonl
done

# nothing changes at learning rate 0 (weight decay is lr-scaled): the bytes
"$BIN" train --model llama "${RUN[@]}" --steps 1 --lr 0 --hf-in a --hf-out b >out.txt \
    2>err.txt || bad "--hf-in a --hf-out b" "$(tail -3 err.txt)"
cmp -s a/model.safetensors b/model.safetensors && cmp -s a/config.json b/config.json &&
    ok "--hf-in then --hf-out at lr 0: the same bytes" ||
    bad "--hf-in then --hf-out at lr 0" "the files differ"
# and from devices that hold blocks: gathered whole before the write
for mesh in tensor=2 "pipe=2 --microbatches 2"; do
    read -r -a M <<<"--mesh $mesh"
    rm -rf c
    "$BIN" train --model llama "${RUN[@]}" --steps 1 --lr 0 --hf-in a --devices 2 "${M[@]}" \
        --hf-out c >out.txt 2>err.txt && cmp -s a/model.safetensors c/model.safetensors &&
        ok "--hf-out from $mesh at lr 0: the same bytes" ||
        bad "--hf-out from $mesh at lr 0" "$(tail -2 err.txt)"
done

# sample --hf-in: the same text as the checkpoint of the same weights
"$BIN" train --model llama "${RUN[@]}" --steps 1 --lr 0 --hf-in a --ckpt-out a.ckpt >out.txt \
    2>err.txt || bad "--hf-in a --ckpt-out" "$(tail -3 err.txt)"
"$BIN" sample --ckpt a.ckpt --prompt "The " --tokens 40 --seed 5 --threads 1 >s1.txt 2>err.txt
"$BIN" sample --hf-in a --prompt "The " --tokens 40 --seed 5 --threads 1 >s2.txt 2>>err.txt
[ -s s1.txt ] && cmp -s s1.txt s2.txt && ok "sample --hf-in: the text --ckpt of the same weights gives" ||
    bad "sample --hf-in" "$(tail -2 err.txt)"
expect_fail "sample --hf-in beside --ckpt" 2 "one of them" \
    "$BIN" sample --hf-in a --ckpt a.ckpt

expect_fail "--layers beside --hf-in" 2 "--layers sets the model.*config.json" \
    "$BIN" train --model llama "${RUN[@]}" --steps 1 --hf-in a --layers 4
expect_fail "--hf-in names a file" 2 "not a directory" \
    "$BIN" train --model llama "${RUN[@]}" --steps 1 --hf-in a/config.json
expect_fail "--hf-out names a file" 2 "exists and is not a directory" \
    "$BIN" train --model llama "${RUN[@]}" --steps 1 --hf-in a --hf-out text.txt
expect_fail "--hf-in of a LLaMA with --model gpt" 2 "'LlamaForCausalLM' is not GPT2LMHeadModel" \
    "$BIN" train --model gpt "${RUN[@]}" --steps 1 --hf-in a
expect_fail "--hf-in with --model mlp" 2 "LLaMA-family and GPT-2 models, not --model mlp" \
    "$BIN" train --model mlp --steps 1 --hf-in a

# GPT-2 (GPT2LMHeadModel): written, fine-tuned from on one device and on
# tensor=2 alike, sampled as its checkpoint
"$BIN" train --model gpt "${RUN[@]}" --layers 2 --channels 64 --heads 4 --max-seq 64 --steps 2 \
    --hf-out g --ckpt-out g.ckpt >out.txt 2>err.txt &&
    grep -q GPT2LMHeadModel g/config.json && ok "gpt --hf-out writes a GPT2LMHeadModel" ||
    bad "gpt --hf-out" "$(tail -3 err.txt)"
"$BIN" train --model gpt "${RUN[@]}" --steps 3 --hf-in g --metrics g1.jsonl >out.txt 2>err.txt ||
    bad "gpt --hf-in on one device" "$(tail -3 err.txt)"
"$BIN" train --model gpt "${RUN[@]}" --steps 3 --hf-in g --devices 2 --mesh tensor=2 \
    --metrics g2.jsonl >out.txt 2>err.txt || bad "gpt --hf-in on tensor=2" "$(tail -3 err.txt)"
same_metrics "gpt --hf-in on tensor=2: losses and gradient norms equal one device's" g1.jsonl g2.jsonl
"$BIN" sample --ckpt g.ckpt --prompt "The " --tokens 40 --seed 5 --threads 1 >s1.txt 2>err.txt
"$BIN" sample --hf-in g --prompt "The " --tokens 40 --seed 5 --threads 1 >s2.txt 2>>err.txt
[ -s s1.txt ] && cmp -s s1.txt s2.txt && ok "sample --hf-in of a GPT-2: the checkpoint's text" ||
    bad "sample --hf-in of a GPT-2" "$(tail -2 err.txt)"
"$BIN" train --model llama "${RUN[@]}" --layers 2 --channels 64 --heads 4 --max-seq 64 \
    --steps 1 --ckpt-out c.ckpt >out.txt 2>err.txt
expect_fail "--hf-in with --ckpt-in" 2 "give one start" \
    "$BIN" train --model llama "${RUN[@]}" --steps 2 --hf-in a --ckpt-in c.ckpt
# Qwen2 (--qkv-bias) and Qwen3 (--qk-norm): written as their architectures,
# fine-tuned from on one device and on tensor=2 and context=2 alike (the
# biases split with their heads, the per-head norms on split heads), the
# checkpoint's settings line naming them, and refused by llama2.c's format
for arch in "--qkv-bias Qwen2ForCausalLM" "--qk-norm Qwen3ForCausalLM"; do
    read -r flag cls <<<"$arch"
    rm -rf q
    "$BIN" train --model llama "${RUN[@]}" --layers 2 --channels 64 --heads 4 --kv-heads 2 \
        --max-seq 64 --steps 2 $flag --hf-out q >out.txt 2>err.txt && grep -q "$cls" q/config.json &&
        ok "$flag --hf-out writes a $cls" || bad "$flag --hf-out" "$(tail -3 err.txt)"
    "$BIN" train --model llama "${RUN[@]}" --steps 3 --hf-in q --metrics q1.jsonl \
        --ckpt-out q.ckpt >out.txt 2>err.txt || bad "$cls --hf-in on one device" "$(tail -3 err.txt)"
    for mesh in tensor=2 context=2; do
        "$BIN" train --model llama "${RUN[@]}" --steps 3 --hf-in q --devices 2 --mesh $mesh \
            --metrics q2.jsonl >out.txt 2>err.txt || bad "$cls --hf-in on $mesh" "$(tail -3 err.txt)"
        same_metrics "$cls --hf-in on $mesh: losses and gradient norms equal one device's" \
            q1.jsonl q2.jsonl
    done
    expect_fail "$flag into llama2.c's model.bin" 2 "no q, k, v biases and no q, k norms" \
        "$BIN" train --model llama "${RUN[@]}" --steps 1 --layers 2 --channels 64 --heads 4 \
        --kv-heads 2 --max-seq 64 $flag --ckpt-in q.ckpt --llmc-out q.bin
done

mkdir empty
expect_fail "--hf-in without config.json" 1 "empty/config.json" \
    "$BIN" train --model llama "${RUN[@]}" --steps 1 --hf-in empty
test_end
