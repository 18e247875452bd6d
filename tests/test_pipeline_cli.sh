#!/usr/bin/env bash
# test_pipeline_cli.sh — `meshtrain train` on a pipe axis: the layout it
# prints (blocks per chunk and device, the schedule's fallback note), the
# bubble line of its summary and the metrics' bubble keys, the final loss
# against one device accumulating the same microbatches, and the flag errors
# (exit 2) and configuration errors (exit 1, the library's message).
#
#   bash tests/test_pipeline_cli.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_pipeline_cli.sh "$@"

for i in $(seq 40); do printf 'the quick brown fox jumps over the lazy dog; one run on any mesh. '; done >text.txt
MODEL=(--data text.txt --layers 4 --channels 32 --heads 4 --seq 16 --max-seq 16 --batch 2
       --steps 3 --threads 2 --seed 7)

# train NAME ARGS...: runs train, exit status into $rc, output in out.txt/err.txt
train() {
    timeout 120 "$BIN" train "${MODEL[@]}" "$@" >out.txt 2>err.txt
    rc=$?
}

final_loss() { sed -n 's/.*| loss [0-9.]* -> \([0-9.]*\).*/\1/p' out.txt; }

# one device, 4 microbatches accumulated: the reference
train --accum 4
[ "$rc" -eq 0 ] && ref=$(final_loss) || { bad "one device" "exit $rc"; ref=x; }

# zb-h1 over pipe=2 with 4 microbatches: same loss, the layout and the bubble
train --devices 2 --mesh pipe=2 --schedule zb-h1 --microbatches 4 --metrics m.jsonl
if [ "$rc" -ne 0 ]; then
    bad "zb-h1 pipe=2 trains" "exit $rc"
else
    ok "zb-h1 pipe=2 trains"
    got=$(final_loss)
    [ "$got" = "$ref" ] && ok "zb-h1 pipe=2 ends at one device's loss ($ref)" \
                        || bad "zb-h1 pipe=2 loss" "got $got, want $ref"
    grep -q '^  pipeline     zb-h1 over pipe=2, 4 microbatches, 1 chunk a device; device 0: chunk 0 (embedding, blocks 0-1); 1: chunk 1 (blocks 2-3, head)$' out.txt \
        && ok "layout line" || bad "layout line" "$(grep pipeline out.txt)"
    grep -Eq '^pipeline zb-h1: bubble rate [0-9.]+% measured, [0-9.]+% predicted by the simulator from the measured op costs \(a stage.s F [0-9.]+ ms, B [0-9.]+ ms, W [0-9.]+ ms; mean of 2 steps\)$' out.txt \
        && ok "bubble line" || bad "bubble line" "$(tail -2 out.txt)"
    [ "$(grep -c '"bubble_rate":' m.jsonl)" -eq 3 ] && [ "$(grep -c '"bubble_predicted":' m.jsonl)" -eq 3 ] \
        && ok "metrics carry the bubble" || bad "metrics carry the bubble" "$(cat m.jsonl)"
fi

# the trace: each device's F, B and W regions named by microbatch and chunk, the waits
train --devices 2 --mesh pipe=2 --schedule zb-h1 --microbatches 4 --trace t.json
if [ "$rc" -eq 0 ] && grep -q '"forward mb 3 chunk 1"' t.json && grep -q '"backward B mb 0 chunk 0"' t.json &&
   grep -q '"backward W mb 2 chunk 1"' t.json && grep -q "\"recv 'pipe'\"" t.json; then
    ok "trace regions per microbatch"
else
    bad "trace regions per microbatch" "exit $rc; $(grep -o '"name":"[^"]*"' t.json | sort -u | head)"
fi

# the V shape: 2 chunks a device, the last one back on device 0
train --devices 2 --mesh pipe=2 --schedule zb-v --microbatches 4
if [ "$rc" -eq 0 ] && [ "$(final_loss)" = "$ref" ] &&
   grep -q 'device 0: chunk 0 (embedding, block 0), chunk 3 (block 3, head); 1: chunk 1 (block 1), chunk 2 (block 2)$' out.txt; then
    ok "zb-v layout and loss"
else
    bad "zb-v layout and loss" "exit $rc; $(grep -E 'pipeline|done' out.txt)"
fi

# zb-h2 below m = 2p-1 falls back and says so
train --devices 2 --mesh pipe=2 --schedule zb-h2 --microbatches 2
if [ "$rc" -eq 0 ] && grep -q '^  pipeline     zb-h2 .*; note: ' out.txt; then
    ok "zb-h2 fallback note"
else
    bad "zb-h2 fallback note" "exit $rc; $(grep pipeline out.txt)"
fi

# checkpoints: 3 steps on pipe=2 saved, resumed to step 5 on one device, end where one
# device's 5 steps end (all 5 steps lie in the default 10-step warmup, whose rates do not
# depend on --steps)
MODEL5=("${MODEL[@]}")
MODEL5[${#MODEL5[@]}-5]=5    # --steps 5
timeout 120 "$BIN" train "${MODEL5[@]}" --accum 4 >out.txt 2>err.txt && ref5=$(final_loss) || ref5=x
timeout 120 "$BIN" train "${MODEL5[@]}" --devices 2 --mesh pipe=2 --schedule zb-v --microbatches 4 \
    --steps 3 --ckpt-out p.ckpt >out.txt 2>err.txt
rc1=$?
timeout 120 "$BIN" train "${MODEL5[@]}" --accum 4 --ckpt-in p.ckpt >out.txt 2>err.txt
rc2=$?
got5=$(final_loss)
if [ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && [ "$got5" = "$ref5" ]; then
    ok "pipe=2 checkpoint resumed on one device ends at $ref5"
else
    bad "pipe=2 checkpoint resumed on one device" "exits $rc1 $rc2; loss $got5, want $ref5"
fi

# fails NAME CODE REGEX ARGS...: exit CODE and a stderr line matching REGEX
fails() {
    local name=$1 code=$2 re=$3
    shift 3
    train "$@"
    if [ "$rc" -eq "$code" ] && grep -Eq "$re" err.txt; then ok "$name"; else
        bad "$name" "exit $rc, want $code; stderr: $(head -3 err.txt)"
    fi
}
fails "microbatches and accum disagree" 2 'microbatches 4 and --accum 2' \
    --devices 2 --mesh pipe=2 --microbatches 4 --accum 2
fails "a schedule without a pipe axis" 2 "pipe axis" --devices 2 --mesh data=2 --schedule 1f1b
fails "fewer microbatches than stages" 2 'm >= p' --devices 2 --mesh pipe=2 --microbatches 1
fails "interleaved m not divisible" 2 'divisible by p' --devices 2 --mesh pipe=2 --schedule interleaved \
    --microbatches 3
fails "an unknown kind" 2 'zb-q' --devices 2 --mesh pipe=2 --schedule zb-q --microbatches 4
fails "more chunks than blocks" 2 'L=4' --devices 4 --mesh pipe=4 --schedule zb-v --microbatches 8

test_end
