#!/usr/bin/env bash
# test_plan_context.sh — `meshtrain plan` with a context axis, against closed
# forms: a one-block LLaMA at T = 1M on 4 H100s, counted in the book's
# convention (10 bytes a parameter, 2 bytes x tokens x 20·D x L checkpoints
# without remat, scaling book ch. 4/5), whose one sequence and one head
# leave no layout without context that fits (data and fsdp need sequences,
# tensor heads, pipe layers), while context=4 holds T/4 tokens a device;
# and the bytes a step each lowering puts on the wire (CONTEXT_PARALLEL.md
# §4-§6, fp32 activations of 4 bytes):
#   ring:      forward (P-1)·2·(S/P)·KV·HS, backward twice that (k, v; dK, dV)
#   allgather: all-gather of k and v, S·KV·HS each (nccl-tests' size: the
#              output); the backward's reduce-scatter of dK, dV the same
#   ulysses:   4 all-to-alls forward of (S/P)·C, 4 backward
# Usage: test_plan_context.sh MESHTRAIN
set -u
BIN=${1:?usage: test_plan_context.sh MESHTRAIN}
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; else echo "ok   $1"; fi; }

T=1048576 C=4096
ONE="--model llama --layers 1 --channels $C --heads 1 --kv-heads 1 --vocab 256 --max-seq $T
     --hardware h100-sxm --chips 4 --seq $T --batch-tokens $T --memory book --remat none --zero 0"

# without a context axis: nothing fits (the one chip's 2·T·20·D bytes)
out=$($BIN plan $ONE 2>&1); rc=$?
check "no context: refused (rc $rc)" '[ $rc -ne 0 ] && grep -q "no layout fits on 4 chips" <<<"$out"'

# with --context auto: context=4 fits, its bytes the closed form
json=$($BIN plan $ONE --context auto --json 2>/dev/null); rc=$?
check "context auto: plans (rc $rc)" '[ $rc -eq 0 ]'
check "context auto: memory against the closed form" 'python3 - "$json" "$T" "$C" <<"EOF"
import json, sys
d = json.loads(sys.argv[1]); T = int(sys.argv[2]); C = int(sys.argv[3])
b = d["best"][0]
N = d["parameters"]
want = 10 * N + 2 * (T / 4) * 20 * C * 1          # book: 2W + 8O, ckpt 2·s·b·20D·L
assert b["mesh"] == "context=4" and b["context"] == 4, b["mesh"]
assert b["cp_attention"] in ("allgather", "ring"), b["cp_attention"]   # ulysses: 1 head
got = b["memory_per_device"]["total"]
assert abs(got - want) <= 1e-9 * want, (got, want)
# context=2 holds T/2 tokens: 2·(T/2)·20·D + 10N is past the 80e9 bytes
assert 10 * N + 2 * (T / 2) * 20 * C > 80e9
EOF'
check "context auto: ulysses refused for 1 head" 'grep -q "ulysses over context=4: 1 heads" <<<"$($BIN plan $ONE --context auto 2>&1)"'

# the same layout from --mesh context=4, shown with its lowering
txt=$($BIN plan $ONE --mesh context=4 --cp-attention ring 2>&1)
check "--mesh context=4: one ring layout" 'grep -q "context=4 cp=ring" <<<"$txt" && grep -q "attention by ring" <<<"$txt"'

# bytes on the wire a step, each lowering (4 heads, 4 kv heads of 1024)
FOUR="${ONE/--heads 1 --kv-heads 1/--heads 4 --kv-heads 4}"
json=$($BIN plan $FOUR --context 4 --json 2>/dev/null)
check "bytes a step per lowering against §4-§6" 'python3 - "$json" "$T" "$C" <<"EOF"
import json, sys
d = json.loads(sys.argv[1]); S = int(sys.argv[2]); C = int(sys.argv[3])
P, KVHS, F = 4, 4 * 1024, 4
by = {b["cp_attention"]: b["comm_bytes_per_step"]["context"] for b in d["best"]}
assert set(by) == {"ring", "allgather", "ulysses"}, by.keys()
ring = (P - 1) * 2 * (S // P) * KVHS * F
assert by["ring"]["permute"]["size"] == 3 * ring, (by["ring"], 3 * ring)
ag = 2 * S * KVHS * F
assert by["allgather"]["all-gather"]["size"] == ag, by["allgather"]
assert by["allgather"]["reduce-scatter"]["size"] == ag, by["allgather"]
assert by["allgather"]["all-gather"]["sent"] == ag * (P - 1) // P
a2a = 8 * (S // P) * C * F
assert by["ulysses"]["all-to-all"]["size"] == a2a, (by["ulysses"], a2a)
EOF'

# refusals of the flags
$BIN plan $ONE --context 3 >/dev/null 2>&1; rc=$?
check "--context 3 (T not a multiple of 6) exits 2" '[ $rc -eq 2 ]'
$BIN plan $ONE --context 4 --mesh context=4 >/dev/null 2>&1; rc=$?
check "--context with --mesh exits 2" '[ $rc -eq 2 ]'
exit $fail
