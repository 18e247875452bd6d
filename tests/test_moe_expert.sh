#!/usr/bin/env bash
# test_moe_expert.sh — expert parallelism (issue 42 item 4; docs/moe.md):
# the `expert` mesh axis splits a mixture's experts (their weights and AdamW
# state) and, folded over devices that hold different tokens, the batch; the
# grouped expert products exchange their rows with the experts' owners
# (all-to-all of the counts, all-to-all-v of the rows, ops/moe_ep.c).
#
#   bash tests/test_moe_expert.sh <meshtrain binary> [<build dir>]
#
#  - moe-tiny (8 experts, top-2, a shared expert, aux loss and z-loss) on
#    expert=2, expert=4, data=2 x expert=2, fsdp=2 x expert=2 (the expert
#    shards stored split over fsdp too, gathered before use) and data=2 x
#    expert=2 with ZeRO-2, and expert=2 recomputing each block (its
#    exchanges run again) trains the one-device run over 10 AdamW steps:
#    each step's loss and gradient norm within 1e-5 (same_metrics), every
#    parameter and moment of the final checkpoint within 1e-4 (same_ckpt),
#    the step's MaxVio equal (the router's ids are kept under --remat full);
#  - a checkpoint written on expert=2 resumes on expert=4 as the one-device
#    run that did not stop;
#  - expert=2 on 2 MPI ranks does too (where meshtrain is built with MPI);
#  - a sigmoid router with a route scale, no shared expert and every other
#    block MoE (4 experts) on expert=2 does too (4 steps);
#  - explain lists each grouped product's exchange with the closed form's
#    bytes at balance;
#  - an expert axis that does not divide the experts, on a dense LLaMA or on
#    a model without experts is turned away before any work (exit 2),
#    naming what is wrong.
# Every run is under `timeout 120`.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_moe_expert.sh "$@"

moe_setup

train_run "moe-tiny one device" one.jsonl "${TINY[@]}" --steps 10 --ckpt-out one.ckpt
LAYOUTS=(expert=2 expert=4 data=2,expert=2 fsdp=2,expert=2 "data=2,expert=2 --zero 2"
         "expert=2 --remat full")
# a sanitizer build (the suite's ASan run, 3-10x slower) runs the first
# four: the exchanges on each axis the experts fold over; ZeRO-2 and the
# recomputed exchanges run on the release build
if ldd "$BIN" 2>/dev/null | grep -Eq 'lib(a|t)san'; then LAYOUTS=("${LAYOUTS[@]:0:4}"); fi
for layout in "${LAYOUTS[@]}"; do moe_same_run one "$layout" "${TINY[@]}" --steps 10; done

# a checkpoint of expert=2 (the experts gathered whole) resumes on expert=4
# as the one-device run that did not stop
train_run "moe-tiny one device, 5 steps" full.jsonl "${TINY[@]}" --steps 5
train_run "moe-tiny expert=2, 3 steps" h.jsonl "${TINY[@]}" --steps 3 \
    --mesh expert=2 --ckpt-out h.ckpt
train_run "moe-tiny resumed on expert=4" res.jsonl "${TINY[@]}" --steps 5 --ckpt-in h.ckpt \
    --mesh expert=4
tail -n 2 full.jsonl >full_tail.jsonl
same_metrics "moe-tiny: expert=2's checkpoint resumed on expert=4 equals one device's steps 4-5" \
    full_tail.jsonl res.jsonl

# the same exchange between MPI ranks (mt_send / mt_recv over the mpi
# transport), where meshtrain has it
if ldd "$BIN" 2>/dev/null | grep -q libmpi && command -v mpirun >/dev/null 2>&1; then
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    if timeout 120 mpirun --allow-run-as-root --oversubscribe -x ASAN_OPTIONS -np 2 "$BIN" train \
            "${TINY[@]}" --steps 10 --devices 2 --mesh expert=2 --metrics m.jsonl \
            --ckpt-out m.ckpt >out.txt 2>err.txt; then
        same_metrics "moe-tiny expert=2 on 2 MPI ranks: losses equal one device's" one.jsonl m.jsonl
        same_ckpt "moe-tiny expert=2 on 2 MPI ranks: parameters equal one device's" one.ckpt m.ckpt
    else
        bad "moe-tiny expert=2 on 2 MPI ranks" "exit $?"
    fi
fi

train_run "sigmoid router one device" one.jsonl "${SIG[@]}" --steps 4 --ckpt-out one.ckpt
train_run "sigmoid router expert=2" r.jsonl "${SIG[@]}" --steps 4 --mesh expert=2 --ckpt-out r.ckpt
same_metrics "sigmoid router expert=2: losses equal one device's" one.jsonl r.jsonl
same_ckpt "sigmoid router expert=2: parameters equal one device's" one.ckpt r.ckpt

# explain lists every grouped product's exchange over expert with its bytes
# at balance, the closed form 4·(N·(P-1)/P·(C+OC) + el·(P-1)): moe-tiny on
# expert=2 (B=4, T=32, k=2: N = 2·32·2 = 128 rows a device; C = OC = 64;
# el = 4) gives 4·(64·128 + 4) = 32784 bytes, 9 products a MoE block
# (w1, w3, w2, each forward, bwd_x and bwd_w), 3 MoE blocks
if timeout 120 "$BIN" explain --model llama --preset moe-tiny --seq 32 --batch 4 --vocab 256 \
        --mesh expert=2 >out.txt 2>err.txt &&
   [ "$(grep -Ec 'moe_experts.* collective over expert, 32784 bytes' out.txt)" -eq 27 ] &&
   ! grep -E 'moe_experts' out.txt | grep -vq 'collective over expert, 32784 bytes'; then
    ok "explain: 27 expert products a step, each exchanging 32784 bytes over expert"
else
    bad "explain: 27 expert products a step, each exchanging 32784 bytes over expert" \
        "$(grep -E 'moe_experts' out.txt | head -3)"
fi

expect_fail "an expert axis that does not divide the experts is refused" 2 \
    "moe-experts 4 .*expert=8.*does not divide" \
    timeout 120 "$BIN" train "${SIG[@]}" --batch 8 --steps 2 --mesh expert=8
expect_fail "an expert axis on a dense LLaMA is refused" 2 "expert axis.*dense.*moe-experts" \
    timeout 120 "$BIN" train "${SIG[@]}" --moe-experts 0 --steps 2 --mesh expert=2
expect_fail "an expert axis on a model without experts is refused" 2 \
    "expert axis.*--model gpt has none" \
    timeout 120 "$BIN" train --data text.txt --model gpt --layers 1 --channels 32 --heads 2 \
    --seq 16 --batch 4 --steps 2 --mesh expert=2

test_end
