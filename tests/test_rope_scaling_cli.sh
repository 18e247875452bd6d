#!/usr/bin/env bash
# test_rope_scaling_cli.sh — RoPE scaling from the command line (issue 41, item
# 5): the --rope-* flags in --help; the llama3.1 presets planned (the same
# step as llama3's at the same shapes: scaling changes angles, not work) and
# explained at full size on the shape-only backend, their scaling on the
# model line; a model trained with llama3 and yarn scaling, its checkpoint
# naming the scaling, resumed only with it and sampled from; --rope-scaling
# none and a checkpoint without scaling exactly as before the flags (the
# same losses bit for bit, the model string of the old format); and bad
# settings refused with one line naming the flag.
#
#   bash tests/test_rope_scaling_cli.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_rope_scaling_cli.sh "$@"

# run ARGS...: the program under `timeout 120`, stdout to out.txt, stderr to err.txt.
run() { timeout 120 "$BIN" "$@" >out.txt 2>err.txt; }
# the model string a checkpoint holds (meta.model: 256 bytes at offset 48)
ckpt_model() { python3 -c "import sys; print(open(sys.argv[1], 'rb').read()[48:304].split(b'\0')[0].decode())" "$1"; }

for i in $(seq 400); do echo "line $i: the quick brown fox jumps over the lazy dog"; done >data.txt
TINY=(--model llama --layers 2 --channels 32 --heads 4 --kv-heads 2 --max-seq 16 --seq 16
      --batch 4 --threads 1 --data data.txt)
L3=(--rope-scaling llama3 --rope-factor 4 --rope-original-context 16)

# ---- help ------------------------------------------------------------------------

run train --help
if grep -q -- '--rope-scaling NAME .*none|llama3|yarn, default none' out.txt &&
   [ "$(grep -c -- '--rope-\(factor\|low-freq-factor\|high-freq-factor\|original-context\|beta-fast\|beta-slow\|attn-factor\) ' out.txt)" -eq 7 ] &&
   grep -q 'llama3.1-8b, llama3.1-70b, llama3.1-405b' out.txt; then
    ok "train --help: --rope-scaling, the seven --rope-* settings, the llama3.1 presets"
else
    bad "train --help" "$(grep -- '--rope\|--preset' out.txt)"
fi

# ---- the presets: plan and explain ------------------------------------------------

ONE=(--hardware h100-sxm --chips 8 --batch-tokens 1M --seq 8192 --mesh fsdp=8 --remat dots
     --microbatches 16 --json)
run plan --model llama --preset llama3.1-8b "${ONE[@]}" && cp out.txt p31.json
run plan --model llama --preset llama3-8b "${ONE[@]}" && cp out.txt p3.json
python3 - p31.json p3.json <<'PY' && ok "plan --preset llama3.1-8b: Llama 3 8B's parameters and step" || bad "plan llama3.1-8b" "see above"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert 8.0e9 < a["parameters"] == b["parameters"] < 8.1e9, (a["parameters"], b["parameters"])
assert a["best"] and a["best"][0]["step_seconds"] == b["best"][0]["step_seconds"], (a["best"], b["best"])
PY
for p in llama3.1-70b llama3.1-405b; do
    run plan --model llama --preset $p --hardware h100-sxm --chips 1024 --batch-tokens 4M \
        --seq 8192 --mesh data=16,fsdp=8,tensor=8 --remat full --json
    python3 - out.txt "$p" <<'PY' && ok "plan --preset $p: evaluated" || bad "plan $p" "$(head -3 err.txt)"
import json, sys
d = json.load(open(sys.argv[1]))
want = {"llama3.1-70b": (70.0e9, 71.0e9), "llama3.1-405b": (405e9, 406.5e9)}[sys.argv[2]]
assert want[0] < d["parameters"] < want[1], d["parameters"]
assert d["evaluated"] >= 1, d["evaluated"]
PY
done
run explain --model llama --preset llama3.1-70b --mesh data=2,fsdp=2,tensor=8 --seq 8192 --batch 4
if [ $? -eq 0 ] && grep -q ' rope .*f32\[4@data+fsdp,8192,8192@tensor\]' out.txt &&
   grep -q 'f32\[128256@tensor,8192' out.txt; then
    ok "explain --preset llama3.1-70b: the program at full size, rope on the heads over tensor"
else
    bad "explain --preset llama3.1-70b" "$(head -3 out.txt)"
fi
run explain --model llama --preset llama3.1-405b --layers 1 --mesh tensor=8 --seq 131072 --batch 1
[ $? -eq 0 ] && grep -q ' rope ' out.txt && ok "explain --preset llama3.1-405b at its context 131072" ||
    bad "explain llama3.1-405b" "$(head -3 err.txt)"
# the preset's scaling under smaller shapes: one step, the model line
run train --preset llama3.1-8b "${TINY[@]}" --ffn-dim 64 --vocab 256 --steps 1
if [ $? -eq 0 ] && grep -q 'theta=500000 .*rope=llama3 rope_factor=8 rope_low=1 rope_high=4 rope_orig=8192 ' out.txt; then
    ok "--preset llama3.1-8b scales RoPE by Llama 3.1's rule (factor 8, 1, 4, 8192)"
else
    bad "--preset llama3.1-8b's scaling" "$(grep '  model' out.txt)"
fi

# ---- training with scaling, its checkpoint ----------------------------------------

run train "${TINY[@]}" "${L3[@]}" --steps 4 --ckpt-out l3.ckpt
model=$(ckpt_model l3.ckpt)
if [ "$model" = "llama L=2 C=32 NH=4 KV=2 F=96 maxT=16 V=256 theta=10000 eps=1e-05 tie=0 rope=llama3 factor=4 low=1 high=4 orig=16" ]; then
    ok "a checkpoint names its scaling"
else
    bad "the checkpoint's model with llama3" "$model"
fi
expect_fail "a resume without the checkpoint's scaling" 2 "l3.ckpt holds model '.*rope=llama3 factor=4" \
    timeout 120 "$BIN" train "${TINY[@]}" --steps 6 --ckpt-in l3.ckpt
run train "${TINY[@]}" "${L3[@]}" --steps 6 --ckpt-in l3.ckpt
[ $? -eq 0 ] && grep -q '^step 6/6' out.txt && ok "it resumes with its scaling" ||
    bad "resume with llama3" "$(tail -2 out.txt)"
run sample --ckpt l3.ckpt --tokens 8 --prompt "the" --temperature 0
[ $? -eq 0 ] && [ -s out.txt ] && ok "sample reads the scaling from the checkpoint" ||
    bad "sample with llama3" "$(cat err.txt)"
run train "${TINY[@]}" --rope-scaling yarn --rope-factor 4 --rope-original-context 16 \
    --rope-attn-factor 1.25 --steps 2 --ckpt-out y.ckpt
model=$(ckpt_model y.ckpt)
[[ "$model" == *"tie=0 rope=yarn factor=4 orig=16 beta_fast=32 beta_slow=1 attn=1.25" ]] &&
    ok "yarn: trained, its checkpoint names it" || bad "yarn's checkpoint" "$model"
run sample --ckpt y.ckpt --tokens 8 --prompt "the" --temperature 0
[ $? -eq 0 ] && [ -s out.txt ] && ok "sample reads yarn" || bad "sample with yarn" "$(cat err.txt)"

# ---- none: as before ----------------------------------------------------------------

run train "${TINY[@]}" --steps 4 --ckpt-out plain.ckpt && cp out.txt plain.txt
run train "${TINY[@]}" --steps 4 --rope-scaling none --rope-factor 4 --rope-original-context 16
if [ "$(grep '^step' plain.txt | cut -d'|' -f2)" = "$(grep '^step' out.txt | cut -d'|' -f2)" ] &&
   [ "$(grep -c '^step' out.txt)" -eq 4 ]; then
    ok "--rope-scaling none: the losses of no scaling, bit for bit"
else
    bad "--rope-scaling none" "$(grep '^step' plain.txt out.txt)"
fi
model=$(ckpt_model plain.ckpt)
[ "$model" = "llama L=2 C=32 NH=4 KV=2 F=96 maxT=16 V=256 theta=10000 eps=1e-05 tie=0" ] &&
    ok "without scaling the checkpoint's model reads as before --rope-scaling" ||
    bad "the model string without scaling" "$model"
run train "${TINY[@]}" --steps 6 --ckpt-in plain.ckpt --rope-scaling none
[ $? -eq 0 ] && grep -q '^step 6/6' out.txt && ok "a checkpoint without scaling resumes" ||
    bad "resume without scaling" "$(cat err.txt)"

# ---- refusals ---------------------------------------------------------------------------

expect_fail "an unknown kind" 2 "--rope-scaling: 'ntk' is not one of none\|llama3\|yarn" \
    timeout 60 "$BIN" train "${TINY[@]}" --rope-scaling ntk --steps 1
expect_fail "llama3 with low >= high" 2 "--rope-low-freq-factor 4 and --rope-high-freq-factor 4" \
    timeout 60 "$BIN" train "${TINY[@]}" "${L3[@]}" --rope-low-freq-factor 4 --steps 1
expect_fail "a scaling without its original context" 2 "--rope-original-context 0 must be positive" \
    timeout 60 "$BIN" train "${TINY[@]}" --rope-scaling yarn --rope-original-context 0 --steps 1
expect_fail "yarn with beta_fast <= beta_slow" 2 "--rope-beta-fast 1 and --rope-beta-slow 2" \
    timeout 60 "$BIN" train "${TINY[@]}" --rope-scaling yarn --rope-beta-fast 1 --rope-beta-slow 2 --steps 1
expect_fail "a factor below 1" 2 "--rope-factor: '0.5' is out of range" \
    timeout 60 "$BIN" train "${TINY[@]}" --rope-factor 0.5 --steps 1
expect_fail "the GPT has no RoPE" 2 "--rope-scaling applies to --model llama only" \
    timeout 60 "$BIN" train --model gpt --data data.txt --rope-scaling llama3 --steps 1
expect_fail "llama2.c's model.bin holds no scaling" 2 "--llmc-out 'x.bin' is llama2.c's model.bin.*--rope-scaling llama3" \
    timeout 60 "$BIN" train "${TINY[@]}" "${L3[@]}" --steps 1 --llmc-out x.bin

test_end
