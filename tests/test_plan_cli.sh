#!/usr/bin/env bash
# test_plan_cli.sh — `meshtrain plan`: its refusals (exit 2 for a wrong
# command line or request (MT_EINVAL), 1 for what cannot be read, one "meshtrain: " line naming
# the setting), its text table and its --json object (parsed by python3:
# the keys users rely on, the best layout first, infeasible layouts never
# ranked), one mesh with its infeasible options listed, and --min-chips.
#
#   bash tests/test_plan_cli.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_plan_cli.sh "$@"

# a small llama: 8 layers, width 256, 8 heads (kv 4), on H100s
M=(--model llama --channels 256 --layers 8 --heads 8 --kv-heads 4 --vocab 1024 --max-seq 512)

# ---- refusals ------------------------------------------------------------
expect_fail "no --hardware" 2 "give --hardware" \
    "$BIN" plan "${M[@]}" --chips 8 --batch-tokens 64k --seq 512
expect_fail "unknown hardware names the shipped ones" 1 "h100-sxm" \
    "$BIN" plan "${M[@]}" --hardware h999 --chips 8 --batch-tokens 64k --seq 512
expect_fail "no --batch-tokens" 2 "--batch-tokens" \
    "$BIN" plan "${M[@]}" --hardware h100-sxm --chips 8 --seq 512
expect_fail "bad --batch-tokens" 2 "batch-tokens" \
    "$BIN" plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 4.5M --seq 512
expect_fail "batch not whole sequences" 2 "multiple of 512" \
    "$BIN" plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 1000 --seq 512
expect_fail "no --chips" 2 "--chips" \
    "$BIN" plan "${M[@]}" --hardware h100-sxm --batch-tokens 64k --seq 512
expect_fail "mesh product" 2 "--chips 8" \
    "$BIN" plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512 --mesh data=4
expect_fail "mesh axis" 2 "'expert'" \
    "$BIN" plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512 \
    --mesh data=4,expert=2
expect_fail "min-chips with a mesh" 2 "leave out --mesh" \
    "$BIN" plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512 \
    --mesh data=8 --min-chips
expect_fail "mlp is no sequence model" 2 "examples, not sequences" \
    "$BIN" plan --model mlp --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512

test_end
