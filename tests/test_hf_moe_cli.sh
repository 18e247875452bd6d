#!/usr/bin/env bash
# test_hf_moe_cli.sh — mixtures of experts through `meshtrain train --hf-in
# DIR / --hf-out DIR` and `sample --hf-in DIR` (issue 43): a LLaMA with
# --moe-experts written as a MixtralForCausalLM, with --qk-norm and a dense
# first block as a Qwen3MoeForCausalLM (mlp_only_layers [0]); fine-tuned
# from on one device and on expert=2 and fsdp=2 (each device's experts cut
# from the stacked tensors), every step's loss and gradient norm within
# 1e-5 of one device's; a run at learning rate 0 writes back
# model.safetensors and config.json byte for byte, from one device and
# from expert=2; `sample --hf-in` writes the text the checkpoint of the
# same weights gives; refused before step 1: what no Hugging Face
# architecture holds (shared experts, a router bias, a Mixtral with dense
# blocks), a --moe-* flag beside --hf-in. The numerics against Hugging
# Face's equations are tests/test_hf_moe.c's.
#
#   bash tests/test_hf_moe_cli.sh <meshtrain binary> [build dir]
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_hf_moe_cli.sh "$@"

english_text text.txt
RUN=(--data text.txt --seq 32 --batch 4 --threads 1 --quiet)
MODEL=(--layers 2 --channels 64 --heads 4 --kv-heads 2 --max-seq 64 --moe-experts 4
       --moe-ffn-dim 32)

for arch in "mixtral MixtralForCausalLM" "qwen3moe Qwen3MoeForCausalLM"; do
    read -r d cls <<<"$arch"
    extra=()
    [ "$d" = qwen3moe ] && extra=(--qk-norm --moe-first-dense 1)
    "$BIN" train --model llama "${RUN[@]}" "${MODEL[@]}" "${extra[@]}" --steps 2 --hf-out $d \
        >out.txt 2>err.txt && grep -q "\"$cls\"" $d/config.json &&
        ok "--moe-experts${extra[*]:+ ${extra[*]}} --hf-out writes a $cls" ||
        bad "$cls --hf-out" "$(tail -3 err.txt)"
    [ "$d" = qwen3moe ] && { grep -q '"mlp_only_layers": \[0\]' $d/config.json &&
        ok "$cls: the dense first block in mlp_only_layers" ||
        bad "$cls mlp_only_layers" "$(grep mlp_only $d/config.json)"; }

    "$BIN" train --model llama "${RUN[@]}" --steps 3 --hf-in $d --metrics one.jsonl \
        >out.txt 2>err.txt || bad "$cls --hf-in on one device" "$(tail -3 err.txt)"
    for mesh in expert=2 fsdp=2; do
        "$BIN" train --model llama "${RUN[@]}" --steps 3 --hf-in $d --devices 2 --mesh $mesh \
            --metrics two.jsonl >out.txt 2>err.txt ||
            { bad "$cls --hf-in on $mesh" "$(tail -3 err.txt)"; continue; }
        same_metrics "$cls --hf-in on $mesh: losses and gradient norms equal one device's" \
            one.jsonl two.jsonl
    done

    # nothing changes at learning rate 0: the bytes, from one device and expert=2
    for mesh in "" "--devices 2 --mesh expert=2"; do
        read -r -a M <<<"$mesh"
        rm -rf b
        "$BIN" train --model llama "${RUN[@]}" --steps 1 --lr 0 --hf-in $d "${M[@]}" --hf-out b \
            >out.txt 2>err.txt && cmp -s $d/model.safetensors b/model.safetensors &&
            cmp -s $d/config.json b/config.json &&
            ok "$cls --hf-in then --hf-out at lr 0 ${mesh:-on one device}: the same bytes" ||
            bad "$cls --hf-in then --hf-out ${mesh:-on one device}" "$(tail -2 err.txt)"
    done

    "$BIN" train --model llama "${RUN[@]}" --steps 1 --lr 0 --hf-in $d --ckpt-out $d.ckpt \
        >out.txt 2>err.txt || bad "$cls --hf-in --ckpt-out" "$(tail -3 err.txt)"
    "$BIN" sample --ckpt $d.ckpt --prompt "The " --tokens 40 --seed 5 --threads 1 >s1.txt 2>err.txt
    "$BIN" sample --hf-in $d --prompt "The " --tokens 40 --seed 5 --threads 1 >s2.txt 2>>err.txt
    [ -s s1.txt ] && cmp -s s1.txt s2.txt &&
        ok "sample --hf-in of a $cls: the checkpoint's text" ||
        bad "sample --hf-in of a $cls" "$(tail -2 err.txt)"
done

expect_fail "--moe-shared with --hf-out" 2 "shared experts.*MixtralForCausalLM" \
    "$BIN" train --model llama "${RUN[@]}" "${MODEL[@]}" --moe-shared 1 --steps 1 --hf-out x
expect_fail "--moe-bias-update with --hf-out" 2 "aux-loss-free router bias" \
    "$BIN" train --model llama "${RUN[@]}" "${MODEL[@]}" --moe-bias-update 1e-3 --steps 1 \
    --hf-out x
expect_fail "a Mixtral with a dense block" 2 "dense blocks.*--qk-norm" \
    "$BIN" train --model llama "${RUN[@]}" "${MODEL[@]}" --moe-first-dense 1 --steps 1 --hf-out x
[ ! -e x ] && ok "refused before step 1: no directory written" || bad "refusals" "x was written"
expect_fail "--moe-top-k beside --hf-in" 2 "--moe-top-k sets the model.*config.json" \
    "$BIN" train --model llama "${RUN[@]}" --steps 1 --hf-in mixtral --moe-top-k 1
test_end
