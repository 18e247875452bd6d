#!/usr/bin/env bash
# test_moe_compose.sh — a mixture of experts on the axes beside expert
# (issue 42 item 4; docs/moe.md "Composition"):
#
#  - tensor: the experts split by their columns (Megatron's expert-tensor
#    split): w1 and w3 by F, w2 by its F rows, a partial sum that combine
#    passes on and the residual sums (or, with sequence parallelism,
#    reduce-scatters: the block's tokens are gathered first, a reshard by
#    logical axes, so every tensor device routes the same tokens);
#  - context: each device routes its chunks' tokens; the router loss
#    gathers its sequences' logits; the loads are summed over context too;
#  - pipe: each stage's router losses attached to its output (aux_attach:
#    their gradient the loss's factor, whatever the output's), their values
#    added to the step's loss, the loads counted after each chunk's F;
#    under 1F1B and composed with expert, tensor with SP and context, and
#    DualPipeV (4 microbatches) with expert;
#  - tensor and context with expert and data; the experts folded over the
#    context or data devices by a rule (--rules experts=context), the
#    exchange then running over that axis (Megatron's parallel folding).
#
#   bash tests/test_moe_compose.sh <meshtrain binary> [<build dir>]
#
# Each layout trains moe-tiny (8 experts, top-2, a shared expert, aux loss
# and z-loss) for 10 AdamW steps as one device does: each step's loss and
# gradient norm within 1e-5, every parameter and moment within 1e-4, MaxVio
# equal (the loads summed over the devices that split the rows, not over
# the tensor devices that share them). Also: the aux-loss-free bias and a
# capacity on tensor=2; explain shows the experts' weights split over tensor
# and never gathered, and the block's input gradient summed over tensor
# once; a capacity on a context axis is refused. Every run is
# under `timeout 120`.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_moe_compose.sh "$@"

moe_setup

train_run "moe-tiny one device" one.jsonl "${TINY[@]}" --steps 10 --ckpt-out one.ckpt
LAYOUTS=("tensor=2 --sequence-parallel" context=2 "expert=2,tensor=2" tensor=2
         "data=2,context=2" "expert=2,context=2" "fsdp=2,tensor=2 --sequence-parallel"
         "expert=2,tensor=2 --sequence-parallel"
         # Megatron's parallel folding by a rule: the experts split over the
         # devices that split the sequences, or the batch
         "context=2 --rules experts=context" "data=2 --rules experts=data")
# a sanitizer build (3-10x slower; `make test` runs the whole script on the
# release build too) trains the first two and one pipeline: each new path once
SAN=0
if ldd "$BIN" 2>/dev/null | grep -Eq 'lib(a|t)san'; then SAN=1; LAYOUTS=("${LAYOUTS[@]:0:2}"); fi
for layout in "${LAYOUTS[@]}"; do moe_same_run one "$layout" "${TINY[@]}" --steps 10; done

# pipelines of 2 microbatches (against one device with 2): the stage
# that is not the last holds MoE blocks 1 and 2 of moe-tiny's 3
train_run "moe-tiny one device, 2 microbatches" one2.jsonl "${TINY[@]}" --steps 10 \
    --microbatches 2 --ckpt-out one2.ckpt
PIPES=("pipe=2,expert=2" pipe=2 "pipe=2,tensor=2 --sequence-parallel" "pipe=2,context=2")
if [ "$SAN" = 1 ]; then PIPES=("${PIPES[@]:0:1}"); fi
for layout in "${PIPES[@]}"; do
    moe_same_run one2 "$layout" "${TINY[@]}" --steps 10 --microbatches 2
done
# the rest on the release build only (under a sanitizer, the paths above)
if [ "$SAN" = 0 ]; then
    # DualPipeV (4 microbatches) on pipe=2 x expert=2, with the bias, a
    # capacity and the validation loss (every stage's router losses taken out)
    X=(--moe-bias-update 0.01 --moe-capacity 0.5 --eval-every 2)
    train_run "moe-tiny one device, 4 microbatches" one4.jsonl "${TINY[@]}" --steps 4 \
        --microbatches 4 "${X[@]}"
    train_run "moe-tiny pipe=2,expert=2 dualpipev" r.jsonl "${TINY[@]}" --steps 4 \
        --microbatches 4 --mesh pipe=2,expert=2 --schedule dualpipev "${X[@]}"
    same_metrics "moe-tiny pipe=2,expert=2 dualpipev: losses equal one device's" one4.jsonl r.jsonl
    same_maxvio "moe-tiny pipe=2,expert=2 dualpipev: MaxVio equals one device's" one4.jsonl r.jsonl
    V="moe-tiny pipe=2,expert=2 dualpipev: validation losses, aux and drops equal one device's"
    if python3 - one4.jsonl r.jsonl <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"loss"' in l] for f in sys.argv[1:3])
keys = ("val_loss", "moe_aux", "moe_dropped")
sys.exit(0 if len(a) == len(b) == 4 and sum("val_loss" in x for x in b) == 2 and all(
    (k in x) == (k in y) and (k not in x or abs(x[k] - y[k]) <= 1e-5 * max(1, abs(x[k])))
    for x, y in zip(a, b) for k in keys) else 1)
PY
    then ok "$V"; else bad "$V" "$(head -c 300 r.jsonl)"; fi

    # the router's aux-loss-free bias (moved by the step's global loads) and a
    # capacity (each sequence's pairs past it dropped) on tensor=2 with SP
    for extra in "--moe-bias-update 0.01" "--moe-capacity 0.5"; do
        read -r -a X <<<"$extra"
        train_run "moe-tiny $extra one device" a.jsonl "${TINY[@]}" --steps 4 "${X[@]}"
        train_run "moe-tiny $extra tensor=2 SP" b.jsonl "${TINY[@]}" --steps 4 "${X[@]}" \
            --mesh tensor=2 --sequence-parallel
        same_metrics "moe-tiny $extra on tensor=2 with SP: losses equal one device's" \
            a.jsonl b.jsonl
        same_maxvio "moe-tiny $extra on tensor=2 with SP: MaxVio equals one device's" \
            a.jsonl b.jsonl
    done
fi

# explain: a device holds half of each expert weight's F columns (w1, w3:
# (8,64,32); w2: (8,32,64)) and gathers none of them
if timeout 120 "$BIN" explain --model llama --preset moe-tiny --seq 32 --batch 4 --vocab 256 \
        --mesh tensor=2 --sequence-parallel >out.txt 2>err.txt; then
    if grep -Eq 'moe\.w1\.w.*local \(8,64,32\)' out.txt &&
       grep -Eq 'moe\.w2\.w.*local \(8,32,64\)' out.txt &&
       ! grep -E 'all_gather' out.txt | grep -q 'moe\.w'; then
        ok "explain tensor=2: the experts split by columns, never gathered"
    else
        bad "explain tensor=2: the experts split by columns" "$(grep -E 'moe\.w' out.txt | head -5)"
    fi
else
    bad "explain tensor=2 with SP" "exit $?"
fi

# without SP, each MoE block's backward sums its input's gradient over
# tensor once, on (B,T,C) = (4,32,64) (the block's input marked varying,
# mt_graph_varies), never the sorted rows' (4,32,2,64), k times wider
if timeout 120 "$BIN" explain --model llama --preset moe-tiny --seq 32 --batch 4 --vocab 256 \
        --mesh tensor=2 >out.txt 2>err.txt; then
    if ! grep -Eq ' B +psum .*f32\[4,32,2,64\]' out.txt &&
       [ "$(grep -Ec ' B +psum .*f32\[4,32,64\] ' out.txt)" -ge 3 ]; then
        ok "explain tensor=2: the experts' input gradient summed once a block, not per sorted row"
    else
        bad "explain tensor=2: the experts' input gradient" \
            "$(grep -E ' B +psum' out.txt | head -5)"
    fi
else
    bad "explain tensor=2" "exit $?"
fi

expect_fail "a capacity on a context axis is refused" 2 "moe-capacity 0.5.*context.*dropless" \
    timeout 120 "$BIN" train "${TINY[@]}" --steps 2 --moe-capacity 0.5 --mesh context=2

test_end
