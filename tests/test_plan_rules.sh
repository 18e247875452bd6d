#!/usr/bin/env bash
# test_plan_rules.sh — `meshtrain plan --rules` (issue 38): every layout the
# planner evaluates is built with the user's rules, as `train --rules` runs
# them.
#
#   bash tests/test_plan_rules.sh <meshtrain binary> [<build dir>]
#
# The small llama of test_plan_cli.sh (C=256, L=8, NH=8, KV=4, F=512,
# V=1024, untied) on one layout each (--mesh, the ZeRO stage, remat,
# sequence parallelism and microbatches fixed: a quick plan under ASan):
#  - on tensor=2 its parameters per device, by hand: the vocabulary of the
#    embedding and the head, the query heads (wq, wo), the kv heads (wk,
#    wv) and the MLP (w1, w2, w3) split in two, the norms whole; with
#    --rules 'mlp=' the MLP whole: L·3·F·C/2 elements more, 4 bytes each;
#  - on pipe=2,tensor=2 the same MLP rows of a stage's L/2 blocks;
#  - rules that restate the default rows give the plan without rules
#    (only the search's seconds and the "rules" key differ);
#  - 'embed=fsdp' on data=2, whose mesh has no fsdp axis, is the plan
#    without rules (an axis of size 1 splits nothing), not a refusal;
#  - what train refuses, plan refuses, exit 2, one line naming it: a
#    logical axis the model lacks, a mesh axis the planner does not lay
#    out, a rule for the batch, a rule without '='; and --rules with the
#    book's convention, whose activations are the default rows' formulas.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_plan_rules.sh "$@"

M=(--model llama --channels 256 --layers 8 --heads 8 --kv-heads 4 --ffn-dim 512 --vocab 1024
   --max-seq 512)
TEXT=(plan "${M[@]}" --hardware h100-sxm --batch-tokens 64k --seq 512 --zero 0 --remat none
      --sequence-parallel off)
ONE=("${TEXT[@]}" --json)

# plan_json NAME OUT ARGS...: the plan exits 0 with its JSON in OUT
plan_json() {
    local name=$1 out=$2
    shift 2
    if timeout 300 "$BIN" "$@" >"$out" 2>err.txt; then ok "$name: exit 0"
    else bad "$name" "exit $?"; fi
}

plan_json "tensor=2" t.json "${ONE[@]}" --chips 2 --mesh tensor=2 --microbatches 1
plan_json "tensor=2 mlp=" tm.json "${ONE[@]}" --chips 2 --mesh tensor=2 --microbatches 1 \
    --rules 'mlp='
python3 - t.json tm.json <<'PY' && ok "tensor=2: parameters by hand; mlp= adds L·3FC/2" ||
import json, sys
C, L, NH, KV, F, V = 256, 8, 8, 4, 512, 1024
t, tm = (json.load(open(f)) for f in sys.argv[1:3])
assert "rules" not in t and tm["rules"] == "mlp=", (t.get("rules"), tm.get("rules"))
layer = 2 * C + 2 * C * C // 2 + 2 * C * (KV * C // NH) // 2 + 3 * F * C // 2
want = 4 * (2 * V * C // 2 + L * layer + C)
got, gotm = (d["best"][0]["memory_per_device"]["parameters"] for d in (t, tm))
assert got == want, (got, want)
assert gotm == want + 4 * L * 3 * F * C // 2, (gotm, want + 4 * L * 3 * F * C // 2)
for d in (t, tm):
    b = d["best"][0]
    assert b["mesh"] == "tensor=2" and b["memory_per_device"]["gradients"] == \
        b["memory_per_device"]["parameters"], b
PY
    bad "tensor=2 parameters" "see above"

plan_json "pipe=2,tensor=2" p.json "${ONE[@]}" --chips 4 --mesh pipe=2,tensor=2 \
    --schedule 1f1b --microbatches 2
plan_json "pipe=2,tensor=2 mlp=" pm.json "${ONE[@]}" --chips 4 --mesh pipe=2,tensor=2 \
    --schedule 1f1b --microbatches 2 --rules 'mlp='
python3 - p.json pm.json <<'PY' && ok "pipe=2,tensor=2: a stage's MLPs whole with mlp=" ||
import json, sys
C, L, F = 256, 8, 512
p, pm = (json.load(open(f))["best"][0]["memory_per_device"]["parameters"] for f in sys.argv[1:3])
assert pm - p == 4 * (L // 2) * 3 * F * C // 2, (p, pm, pm - p)
PY
    bad "pipe=2,tensor=2 parameters" "see above"

# the default rows restated: the same plan, key for key but the seconds
plan_json "restated rows" r.json "${ONE[@]}" --chips 4 --mesh data=2,tensor=2 --microbatches 1 \
    --rules 'mlp=tensor,heads=tensor,kv_heads=tensor,vocab=tensor'
plan_json "no rules" n.json "${ONE[@]}" --chips 4 --mesh data=2,tensor=2 --microbatches 1
# embed=fsdp where there is no fsdp axis: nothing to split over
plan_json "embed=fsdp on data=2" f.json "${ONE[@]}" --chips 2 --mesh data=2 --microbatches 1 \
    --rules 'embed=fsdp'
plan_json "data=2" d.json "${ONE[@]}" --chips 2 --mesh data=2 --microbatches 1
python3 - r.json n.json f.json d.json <<'PY' && ok "rules of no effect: the plan without rules" ||
import json, sys
def plain(f):
    d = json.load(open(f))
    d.pop("seconds"), d.pop("rules", None)
    return d
r, n, f, d = (plain(x) for x in sys.argv[1:5])
assert r == n, "restated rows differ"
assert f == d, "embed=fsdp on data=2 differs"
assert n["best"] and d["best"], "no feasible layout"
PY
    bad "rules of no effect" "see above"

# the text says the rules
if timeout 300 "$BIN" "${TEXT[@]}" --chips 2 --mesh tensor=2 --microbatches 1 \
        --rules 'mlp=' >text.txt 2>err.txt && grep -q "^rules: mlp= " text.txt; then
    ok "text: a rules line"
else
    bad "text" "no 'rules: mlp= ' line: $(head -3 text.txt)"
fi

# ---- refusals, before any layout ---------------------------------------------
R=(plan "${M[@]}" --hardware h100-sxm --chips 2 --batch-tokens 64k --seq 512)
expect_fail "a logical axis the model lacks" 2 "has no logical axis 'mpl'; its logical axes are" \
    "$BIN" "${R[@]}" --rules 'mpl=tensor'
expect_fail "a mesh axis the planner does not lay out" 2 "'mlp' maps to axis set 'tensr'.*no axis 'tensr'" \
    "$BIN" "${R[@]}" --rules 'mlp=tensr'
expect_fail "a rule for the batch" 2 "the batch is split over data, fsdp and expert" \
    "$BIN" "${R[@]}" --rules 'batch=data'
expect_fail "a rule without =" 2 "'mlp' is not logical=mesh axes" \
    "$BIN" "${R[@]}" --rules 'mlp'
expect_fail "rules with the book's convention" 2 "--rules 'mlp=' with --memory book.*--memory meshtrain" \
    "$BIN" "${R[@]}" --rules 'mlp=' --memory book

test_end
