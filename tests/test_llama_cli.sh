#!/usr/bin/env bash
# test_llama_cli.sh — `meshtrain train --model llama` and `meshtrain explain
# --model llama` from the command line: a short run on a text file whose
# loss falls, on one device and on a mesh; the published presets explained
# at full size on the shape-only backend; the model's flags parsed strictly,
# a preset written over by the flags after it, and bad settings refused with
# one line naming the flag; llama2.c's model.bin through --llmc-out and
# --llmc-in (written, read back and written again byte for byte, the same
# greedy sample as the meshtrain checkpoint), what it cannot hold refused
# before step 1, and sampling a LLaMA checkpoint through a tokenizer; a
# head size of its own (--head-dim): trained on one device and tensor=2
# alike, its checkpoint resumed and sampled, one without it read as C/NH,
# llama2.c's format refusing it, and explain's widths.
#
#   bash tests/test_llama_cli.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_llama_cli.sh "$@"

# run ARGS...: the program under `timeout 120`, stdout to out.txt, stderr to err.txt.
run() { timeout 120 "$BIN" "$@" >out.txt 2>err.txt; }

for i in $(seq 400); do echo "line $i: the quick brown fox jumps over the lazy dog"; done >data.txt
MODEL=(--model llama --layers 2 --channels 32 --heads 4 --kv-heads 2 --max-seq 16 --seq 16
       --batch 4)
TINY=("${MODEL[@]}" --threads 1)

# ---- training ---------------------------------------------------------------

# first and last loss of a run's step lines in out.txt
losses() { sed -n 's/^step [0-9]*\/[0-9]* | loss \([0-9.]*\) .*/\1/p' out.txt | sed -n '1p;$p'; }

run train "${TINY[@]}" --data data.txt --steps 8 --lr 3e-3
l=($(losses))
if [ $? -eq 0 ] && [ "${#l[@]}" -eq 2 ] && awk -v a="${l[0]}" -v b="${l[1]}" 'BEGIN{exit !(b < a)}'; then
    ok "train --model llama: the loss falls (${l[0]} -> ${l[1]})"
else
    bad "train --model llama: the loss falls" "losses '${l[*]:-none}'"
fi
if grep -q '^  model        llama L=2 C=32 NH=4 KV=2 F=96 multiple_of=32 ffn_mult=1 maxT=16 V=256 theta=10000 eps=1e-05 tie=0' out.txt; then
    ok "the model line names the settings, F from Llama's rule"
else
    bad "the model line names the settings" "$(grep '  model' out.txt)"
fi

run train "${TINY[@]}" --data data.txt --steps 2 --mesh data=2,tensor=2 --tie-embeddings \
    --rope-theta 500000 --ffn-dim 48
if [ $? -eq 0 ] && grep -q 'F=48 .*theta=500000 .*tie=1' out.txt && grep -q '^step 2/2' out.txt; then
    ok "train --model llama on data=2,tensor=2, tied, Llama 3's theta"
else
    bad "train --model llama on data=2,tensor=2" "$(tail -3 out.txt)"
fi

# ---- llama2.c's model.bin (--llmc-out, --llmc-in) -------------------------------

# no step line in out.txt: a refusal came before step 1
no_step() { ! grep -q '^step ' out.txt; }

run train "${TINY[@]}" --data data.txt --steps 3 --llmc-out m.bin --ckpt-out m.ckpt --quiet
# 7 int32: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab (negative: own classifier), seq_len
hdr=$(od -An -v -td4 -N28 m.bin 2>/dev/null | tr -s ' \n' ' ' | sed 's/^ //; s/ $//')
[ "$hdr" = "32 96 2 4 2 -256 16" ] && ok "--llmc-out writes llama2.c's header ($hdr)" ||
    bad "--llmc-out header" "'$hdr', want '32 96 2 4 2 -256 16'"
# read back with no change (lr 0) and written again: the same bytes
run train --model llama --data data.txt --seq 16 --batch 4 --threads 1 --llmc-in m.bin \
    --llmc-out m2.bin --lr 0 --steps 1 --quiet
if [ $? -eq 0 ] && cmp -s m.bin m2.bin; then ok "--llmc-in m.bin, then --llmc-out: the same bytes"
else bad "--llmc-in round trip" "$(cat err.txt; cmp m.bin m2.bin 2>&1 | head -1)"; fi
"$BIN" sample --ckpt m.ckpt --tokens 24 --temperature 0 --threads 1 >s_ckpt.txt 2>err.txt
"$BIN" sample --llmc-in m.bin --model llama --tokens 24 --temperature 0 --threads 1 >s_l2c.txt 2>>err.txt
if [ "$(wc -c <s_ckpt.txt)" -gt 0 ] && cmp -s s_ckpt.txt s_l2c.txt; then
    ok "greedy samples of the checkpoint and of model.bin agree ($(wc -c <s_ckpt.txt) bytes)"
else bad "samples of m.ckpt and m.bin" "$(head -c 200 err.txt) $(od -c s_ckpt.txt | head -2) vs $(od -c s_l2c.txt | head -2)"; fi

expect_fail "--llmc-out with Llama 3's theta, before step 1" 2 "--llmc-out 'x.bin' is llama2.c's model.bin.*RoPE theta 10000.*--rope-theta 500000" \
    timeout 60 "$BIN" train "${TINY[@]}" --data data.txt --steps 2 --llmc-out x.bin --rope-theta 500000
run train "${TINY[@]}" --data data.txt --steps 2 --llmc-out x.bin --rope-theta 500000
no_step && [ ! -e x.bin ] && ok "no step and no file before the refusal" || bad "refusal" "$(head -2 out.txt)"
expect_fail "--llmc-out with another epsilon" 2 "--norm-eps 1e-06; give --norm-eps 1e-5" \
    timeout 60 "$BIN" train "${TINY[@]}" --data data.txt --steps 2 --llmc-out x.bin --norm-eps 1e-6
expect_fail "--llmc-in with Llama 3's theta" 2 "--llmc-in 'm.bin'.*--rope-theta 500000" \
    timeout 60 "$BIN" train --model llama --data data.txt --seq 16 --batch 4 --llmc-in m.bin \
    --rope-theta 500000 --steps 1
expect_fail "--llmc-in with a contradicting --layers" 2 "--layers 3 conflicts with --llmc-in 'm.bin'.*L=2" \
    timeout 60 "$BIN" train --model llama --data data.txt --seq 16 --batch 4 --llmc-in m.bin --layers 3 --steps 1
expect_fail "--llmc-in with a --preset" 2 "--preset sets the model, and --llmc-in" \
    timeout 60 "$BIN" train --model llama --data data.txt --seq 16 --batch 4 --llmc-in m.bin \
    --preset stories15m --steps 1
expect_fail "--seq past model.bin's seq_len" 2 "T=32 .*maxT=16 \\(its seq_len\\) of --llmc-in" \
    timeout 60 "$BIN" train --model llama --data data.txt --seq 32 --batch 4 --llmc-in m.bin --steps 1
run train --data data.txt --seq 16 --batch 4 --layers 1 --channels 16 --heads 2 --steps 1 \
    --llmc-out g.llmc --quiet
expect_fail "an llm.c GPT-2 file given to --model llama" 1 "'g.llmc' is an llm.c GPT-2 checkpoint.*--model gpt" \
    timeout 60 "$BIN" train --model llama --data data.txt --seq 16 --batch 4 --llmc-in g.llmc --steps 1
expect_fail "sample --ckpt model.bin says --llmc-in" 1 "no magic.*--llmc-in FILE --model llama" \
    timeout 60 "$BIN" sample --ckpt m.bin --tokens 3
expect_fail "sample --model without --llmc-in" 2 "drop --model" \
    timeout 60 "$BIN" sample --ckpt m.ckpt --model llama --tokens 3

# ---- a head size of its own (--head-dim) -------------------------------------------

# C=32, NH=4: heads of 12 (q 48 wide, not C/NH = 8)
run train "${TINY[@]}" --data data.txt --steps 4 --head-dim 12 --ckpt-out hd.ckpt --metrics hd1.jsonl
if [ $? -eq 0 ] && grep -q '^  model        llama L=2 C=32 NH=4 KV=2 F=96 .*tie=0 hd=12 ' out.txt; then
    ok "train --head-dim 12: the model line says hd=12"
else
    bad "train --head-dim 12" "$(grep '  model' out.txt; tail -2 err.txt)"
fi
run train "${TINY[@]}" --data data.txt --steps 4 --head-dim 12 --mesh tensor=2 --metrics hd2.jsonl
same_metrics "--head-dim 12 on tensor=2 trains the one-device run" hd1.jsonl hd2.jsonl
"$BIN" sample --ckpt hd.ckpt --tokens 8 --temperature 0 --threads 1 >s_hd.txt 2>err.txt
[ $? -eq 0 ] && [ -s s_hd.txt ] && ok "sample reads the checkpoint's head size (hd=12)" ||
    bad "sample --ckpt hd.ckpt" "$(cat err.txt)"
run train "${TINY[@]}" --data data.txt --steps 5 --head-dim 12 --ckpt-in hd.ckpt --quiet
[ $? -eq 0 ] && ok "--head-dim 12 resumes its checkpoint" || bad "resume hd.ckpt" "$(cat err.txt)"
expect_fail "a resume without the checkpoint's head size" 2 "hd.ckpt holds model '.*hd=12'" \
    timeout 60 "$BIN" train "${TINY[@]}" --data data.txt --steps 5 --ckpt-in hd.ckpt
# m.ckpt's model says no hd=: C/NH, which --head-dim 8 gives too
run train "${TINY[@]}" --data data.txt --steps 4 --head-dim 8 --ckpt-in m.ckpt --quiet
[ $? -eq 0 ] && ok "a checkpoint without hd= resumes with --head-dim C/NH" ||
    bad "resume m.ckpt with --head-dim 8" "$(cat err.txt)"
# C=30 is no multiple of NH=4: heads of 8 make it a model
run train "${TINY[@]}" --data data.txt --steps 2 --channels 30 --head-dim 8 --quiet
[ $? -eq 0 ] && ok "--channels 30 --heads 4 --head-dim 8 trains" || bad "C=30 hd=8" "$(cat err.txt)"
expect_fail "--channels 30 --heads 4 without --head-dim" 2 "--channels 30 is not divisible by --heads 4.*--head-dim" \
    timeout 60 "$BIN" train "${TINY[@]}" --data data.txt --steps 1 --channels 30
expect_fail "an odd --head-dim" 2 "--head-dim 7 is odd" \
    timeout 60 "$BIN" train "${TINY[@]}" --data data.txt --steps 1 --head-dim 7
expect_fail "--llmc-out with a head size run.c cannot load, before step 1" 2 "--llmc-out 'x.bin' is llama2.c's model.bin.*dim / n_heads.*--head-dim 12" \
    timeout 60 "$BIN" train "${TINY[@]}" --data data.txt --steps 2 --llmc-out x.bin --head-dim 12
[ ! -e x.bin ] && ok "no model.bin written" || bad "--llmc-out --head-dim 12" "x.bin exists"
expect_fail "--llmc-in with another --head-dim" 2 "--head-dim 12 conflicts with --llmc-in 'm.bin'.*hd=8" \
    timeout 60 "$BIN" train --model llama --data data.txt --seq 16 --batch 4 --llmc-in m.bin \
    --head-dim 12 --steps 1
run explain "${MODEL[@]}" --head-dim 12 --kv-heads 1 --mesh tensor=2
if [ $? -eq 0 ] && grep -q 'f32\[48@tensor,32\]' out.txt && grep -q 'f32\[32,48@tensor\]' out.txt &&
   grep -q 'f32\[12,32\]' out.txt; then
    ok "explain --head-dim 12: wq (48,32) and wo (32,48) split, the one kv head (12,32) whole"
else
    bad "explain --head-dim 12" "$(grep 'attn\.w' out.txt | head -4)"
fi

# ---- a LLaMA on SentencePiece tokens, sampled through the tokenizer -------------

if command -v spm_train >/dev/null && command -v spm_encode >/dev/null; then
    "$BIN" tokenize --text data.txt --vocab 300 --model-out tok --out tok.bin >/dev/null 2>err.txt ||
        echo "tokenize: $(cat err.txt)"
    run train "${TINY[@]}" --data tok.bin --tokenizer tok.model --steps 3 --ckpt-out t.ckpt --quiet
    "$BIN" sample --ckpt t.ckpt --tokenizer tok.model --prompt "line " --tokens 20 --threads 1 \
        >s_tok.txt 2>err.txt
    if [ $? -eq 0 ] && [ -s s_tok.txt ] && ! grep -qE '<[0-9]+>' s_tok.txt; then
        ok "sample --tokenizer from a LLaMA checkpoint prints text ($(wc -c <s_tok.txt) bytes)"
    else bad "sample --tokenizer from a LLaMA checkpoint" "$(cat err.txt) $(head -c 100 s_tok.txt)"; fi
else
    echo "skipped: the tokenizer cases (spm_train or spm_encode missing)"
fi

# ---- explain at full size -----------------------------------------------------

run explain --model llama --preset llama3-70b --mesh data=2,fsdp=2,tensor=8 --seq 8192 --batch 4
if [ $? -eq 0 ] && grep -q 'attention_gqa' out.txt && grep -q 'f32\[128256@tensor,8192' out.txt; then
    ok "explain --preset llama3-70b: the program at full size, the vocabulary over tensor"
else
    bad "explain --preset llama3-70b" "$(head -3 out.txt)"
fi
run explain --model llama --preset stories15m --layers 1 --json
if [ $? -eq 0 ] && grep -q '"h.0.attn.wq.w"\|h\.0\.attn\.wq\.w' out.txt && ! grep -q 'h\.1\.' out.txt; then
    ok "a flag after --preset overrides it (--layers 1)"
else
    bad "a flag after --preset overrides it" "$(head -c 300 out.txt)"
fi
tied_preset=$(grep -c 'lm_head\.w' out.txt)
run explain --model llama --preset stories15m --layers 1 --no-tie-embeddings --json
if [ $? -eq 0 ] && [ "$tied_preset" = 0 ] && grep -q 'lm_head\.w' out.txt; then
    ok "stories15m ties; --no-tie-embeddings unties it (an lm_head.w of its own)"
else
    bad "--no-tie-embeddings unties a preset" "$(head -c 300 out.txt)"
fi

# ---- refusals: one line naming the flag, exit 2 ---------------------------------

expect_fail "an unknown preset names the known ones" 2 "--preset: unknown LLaMA preset 'llama9'.*llama3-8b" \
    timeout 60 "$BIN" train --model llama --data data.txt --preset llama9
expect_fail "kv heads that do not divide the heads" 2 "--kv-heads 3 does not divide --heads 4" \
    timeout 60 "$BIN" train "${TINY[@]}" --data data.txt --kv-heads 3 --steps 1
expect_fail "a float flag parsed strictly" 2 "--rope-theta" \
    timeout 60 "$BIN" train "${TINY[@]}" --data data.txt --rope-theta 1e4x --steps 1
expect_fail "a float out of the model's range" 2 "--norm-eps" \
    timeout 60 "$BIN" train "${TINY[@]}" --data data.txt --norm-eps 0 --steps 1
expect_fail "--tie-embeddings takes no value" 2 "--tie-embeddings takes no value" \
    timeout 60 "$BIN" train "${TINY[@]}" --data data.txt --tie-embeddings=1 --steps 1
expect_fail "--tie-embeddings with --no-tie-embeddings" 2 "contradict each other" \
    timeout 60 "$BIN" train "${TINY[@]}" --data data.txt --tie-embeddings --no-tie-embeddings
expect_fail "a llama flag on the GPT" 2 "--kv-heads applies to --model llama only" \
    timeout 60 "$BIN" train --data data.txt --kv-heads 2 --steps 1
expect_fail "tensor parallelism needs the heads to divide" 2 "--heads 4 does not divide by 8" \
    timeout 60 "$BIN" explain "${MODEL[@]}" --mesh tensor=8

test_end
