#!/usr/bin/env bash
# test_plan_deepspeed.sh — `plan --memory deepspeed`'s ZeRO-3 gathers a step
# against DeepSpeed's rules worked out by hand (src/plan/program_ds.c names
# the sources): its hooks fetch a module's parameters before each use and
# release them after unless the module is used again within 1e9 elements
# of other modules' parameters (stage3_max_reuse_distance); under full
# recomputation a block's modules are used three times (forward,
# recomputed forward, backward).
#
# The model: a 2-layer GPT of width h = 12288, vocabulary V = 51200, T =
# 2048, on data=64 with ZeRO-3. A block's parameters in forward order:
# ln_1 (2h), qkv (3h² + 3h), proj (h² + h), ln_2 (2h), fc (4h² + 4h), fc2
# (4h² + h). Between the recomputed forward's use of a module and its
# backward's, the later modules run twice (recomputed, then their
# gradients): fc2 nothing but its bias (kept: one fetch), fc 2·(4h² + h)
# = 1.2e9 elements (released: fetched twice), the earlier ones more. So a
# block's backward gathers 2·(12h² + 13h) − (4h² + h) elements; the head's
# tied table (Vh) once, its forward use a whole forward away; the final
# norm, one table away from its forward use, not at all. Without
# recomputation each block's modules are fetched again for the backward
# but the last block's fc2, whose forward use is a table (Vh) and norms
# away. Every parameter once in the forward: Ψ. Bytes: 2 an element.
# DeepSpeed 0.3.13 (--deepspeed-version): the parameters under 100,000
# elements (biases, norms: 13h a block and ln_f) are persistent, never
# gathered.
#
#   bash tests/test_plan_deepspeed.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_plan_deepspeed.sh "$@"

RUN=(plan --model gpt --layers 2 --channels 12288 --heads 96 --vocab 51200 --max-seq 2048
     --seq 2048 --hardware a100-80gb --chips 64 --mesh data=64 --batch-tokens 128K --zero 3
     --memory deepspeed --top 1 --json)

gathered() {   # the all-gather bytes a step over data of the plan's JSON on stdin
    python3 -c "
import json, sys
print(json.load(sys.stdin)['best'][0]['comm_bytes_per_step']['data']['all-gather']['size'])"
}

expected() {   # expected <release: 0 or 313> <remat: full or none>
    python3 - "$@" <<'PY'
import sys
release, remat = int(sys.argv[1]), sys.argv[2]
h, V, T, L = 12288, 51200, 2048, 2
small = 13 * h                          # a block's biases and norms
block = 12 * h * h + small
psi = L * block + V * h + T * h + 2 * h
persist = release and release < 505     # 0.3.13 to 0.5.4: kept whole
big = 12 * h * h                        # a block's four weights
fc2 = 4 * h * h + (0 if persist else h) # fc2's weight and bias
each = big if persist else block        # what a block gathers at one use
if remat == "full":                     # every block: recomputed, then fc2 kept
    back = L * (2 * each - fc2)
else:   # the backward reads no bias (9h) and no norm's shift (2h): not gathered;
        # the last block's fc2 is a table away from its forward use: kept
    back = L * (each - (0 if persist else 11 * h)) - 4 * h * h
forward = psi - (L * small + 2 * h if persist else 0)
print(2 * (forward + back + V * h))
PY
}

for case in "0 full" "313 full" "0 none" "313 none"; do
    read -r release remat <<<"$case"
    flags=(--remat "$remat")
    [ "$release" != 0 ] && flags+=(--deepspeed-version 0.3.13)
    got=$("$BIN" "${RUN[@]}" "${flags[@]}" | gathered)
    want=$(expected "$release" "$remat")
    if [ "$got" = "$want" ]; then
        ok "ZeRO-3 gathers, release ${release}, remat $remat: $got bytes"
    else
        bad "ZeRO-3 gathers, release ${release}, remat $remat" "$got bytes, want $want"
    fi
done

test_end
