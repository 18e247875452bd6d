#!/usr/bin/env bash
# test_plan_choices.sh — what the trainer can run, `meshtrain plan` plans,
# with the trainer's flags (issue 40, item 4), and says why it refuses
# layouts once a reason (item 5):
#
#  - --collective-matmul on|off fixes it on every layout with sequence
#    parallelism (auto: both); on a tensor=2 H100 layout on exposes less
#    communication than off (its ring runs under the products), auto plans
#    both and ranks the faster first; off with --sequence-parallel off is
#    refused as train refuses it;
#  - a microbatch count that is no power of two plans, and its 1F1B bubble
#    over the compute is the schedule simulator's idle over busy at unit
#    costs ((p-1)/m: 3/18 at p=2, m=6); the free search over data=3,pipe=2
#    plans every count a replica's 12 sequences divide into (3, 6, 12 beside
#    2 and 4: by hand) and picks 12, which no power of two reaches;
#  - interleaving at v = 2 and every v to 8 whose p·v divides the layers
#    (12 layers, p=2: 2, 3 and 6, by hand); --chunks 3 plans v=3 only, its
#    v in the text and --json; its bubble at the same p, m is lower than
#    v=2's and at least the simulator's (p-1)/(v·m) of the compute;
#    --chunks with a schedule that does not run it is refused;
#  - the refusals: one line per reason with its count, the reasons distinct,
#    the counts adding up to the refused layouts (text and --json).
#
#   bash tests/test_plan_choices.sh <meshtrain binary> [<build dir>]
set -u

HWDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../hardware" && pwd)"   # before test_start's cd
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_plan_choices.sh "$@"

# a small llama: 12 layers, width 256, 8 heads (kv 4), sequences of 512 on H100s,
# their products not tile-quantized and no kernel overhead (the cases below
# reason about bubbles and microbatch counts; a tiny model's products fill few
# of the 132 SMs, which test_plan_cost checks on its own)
python3 - "$HWDIR/h100-sxm.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("gemm_tile_m", "gemm_tile_n", "gemm_units", "kernel_overhead"):
    d["achievable"].pop(k, None)
json.dump(d, open("h100-untiled.json", "w"), indent=1)
PY
M=(--model llama --channels 256 --layers 12 --heads 8 --kv-heads 4 --ffn-dim 512 --vocab 256
   --max-seq 512 --hardware "$WORK/h100-untiled.json" --seq 512)
FIX=(--zero 0 --remat none)

# ---- collective matmul -----------------------------------------------------
for cm in on off auto; do
    "$BIN" plan "${M[@]}" "${FIX[@]}" --chips 2 --batch-tokens 24k --mesh tensor=2 \
        --sequence-parallel on --microbatches 1 --collective-matmul $cm --json >cm_$cm.json \
        2>err.txt || bad "--collective-matmul $cm" "exit $?"
done
python3 - cm_on.json cm_off.json cm_auto.json <<'PY' && ok "--collective-matmul on|off|auto: one layout each, on exposes less, auto both" || bad "--collective-matmul" "see above"
import json, sys
on, off, auto = (json.load(open(f)) for f in sys.argv[1:4])
assert on["evaluated"] == off["evaluated"] == 1, (on["evaluated"], off["evaluated"])
a, b = on["best"][0], off["best"][0]
assert a["collective_matmul"] is True and b["collective_matmul"] is False, (a, b)
assert a["sequence_parallel"] and b["sequence_parallel"]
# the ring's chunks run under the products: less exposed communication
assert a["exposed_comm_seconds"] < b["exposed_comm_seconds"], (a["exposed_comm_seconds"], b["exposed_comm_seconds"])
assert auto["evaluated"] == 2 and {r["collective_matmul"] for r in auto["best"]} == {True, False}
assert auto["best"][0]["step_seconds"] == min(a["step_seconds"], b["step_seconds"])
PY
# a free search with it on: every sequence-parallel layout has it on, the others none
"$BIN" plan "${M[@]}" "${FIX[@]}" --chips 4 --batch-tokens 24k --collective-matmul on \
    --microbatches 2 --top 1000 --json >cm_free.json 2>err.txt
python3 - cm_free.json <<'PY' && ok "--collective-matmul on: every sp layout of a free search" || bad "--collective-matmul on, free" "see above"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["best"]
assert any(r["sequence_parallel"] for r in rows) and any(not r["sequence_parallel"] for r in rows)
for r in rows:
    assert r["collective_matmul"] == r["sequence_parallel"], r
PY
expect_fail "--collective-matmul with --sequence-parallel off" 2 \
    "--collective-matmul off with --sequence-parallel off.*give --sequence-parallel on" \
    "$BIN" plan "${M[@]}" --chips 2 --batch-tokens 24k --mesh tensor=2 --sequence-parallel off \
    --collective-matmul off

# ---- microbatch counts that are no power of two --------------------------------
# the simulator's bubble at unit costs as idle over busy: its bubble rate
# r = (max span - busy) / max span, so r / (1 - r)
sim() {
    "$BIN" schedule --json "$@" | python3 -c "
import json, sys
r = json.load(sys.stdin)['bubble_rate']
print(r / (1 - r))"
}
"$BIN" plan "${M[@]}" "${FIX[@]}" --chips 2 --batch-tokens 24k --mesh pipe=2 --schedule 1f1b \
    --microbatches 6 --json >m6.json 2>err.txt || bad "--microbatches 6" "exit $?"
s6=$(sim --kind 1f1b --stages 2 --microbatches 6)
python3 - m6.json "$s6" <<'PY' && ok "--microbatches 6: plans, its 1F1B bubble the simulator's (p-1)/m ($s6)" || bad "--microbatches 6" "see above"
import json, sys
d, want = json.load(open(sys.argv[1])), float(sys.argv[2])
assert abs(want - 3 / 18) < 1e-9, want      # (p-1)/m by hand: 1/6
b = d["best"][0]
assert b["microbatches"] == 6 and b["chunks"] == 1, b
got = b["bubble_seconds"] / b["compute_seconds"]
assert abs(got - want) < 0.1 * want, (got, want)
PY
"$BIN" plan "${M[@]}" "${FIX[@]}" --chips 6 --batch-tokens 18k --mesh data=3,pipe=2 \
    --schedule 1f1b --top 1000 --json >m36.json 2>err.txt
python3 - m36.json <<'PY' && ok "free counts: 36 sequences over data=3 plan m = 2, 3, 4, 6, 12; best 12" || bad "free counts" "see above"
import json, sys
d = json.load(open(sys.argv[1]))
# by hand: m divides 36 with 36/m a multiple of 3, m >= p = 2
want = {m for m in range(2, 37) if 36 % m == 0 and (36 // m) % 3 == 0}
assert want == {2, 3, 4, 6, 12}, want
got = {r["microbatches"] for r in d["best"]}
assert got == want, (got, want)
assert d["best"][0]["microbatches"] == 12, d["best"][0]
PY

# ---- interleaving depth ----------------------------------------------------------
"$BIN" plan "${M[@]}" "${FIX[@]}" --chips 2 --batch-tokens 24k --mesh pipe=2 \
    --schedule interleaved --microbatches 8 --top 100 --json >il.json 2>err.txt
s2=$(sim --kind interleaved --stages 2 --microbatches 8 --chunks 2)
s3=$(sim --kind interleaved --stages 2 --microbatches 8 --chunks 3)
python3 - il.json "$s2" "$s3" <<'PY' && ok "interleaved: v = 2, 3, 6 of 12 layers on p=2; v=3's bubble below v=2's, at least (p-1)/(v·m)" || bad "interleaved depth" "see above"
import json, sys
d = json.load(open(sys.argv[1]))
sim = {2: float(sys.argv[2]), 3: float(sys.argv[3])}
for v in (2, 3):   # the simulator's idle over busy: (p-1)/(v·m) by hand
    assert abs(sim[v] - 1 / (v * 8)) < 1e-9, (v, sim[v])
by_v = {r["chunks"]: r for r in d["best"]}
assert set(by_v) == {2, 3, 6}, sorted(by_v)
assert d["evaluated"] == 3, d["evaluated"]
b2, b3 = by_v[2], by_v[3]
assert b3["bubble_seconds"] < b2["bubble_seconds"], (b3["bubble_seconds"], b2["bubble_seconds"])
# the messages between chunks: their permute bytes at the H100 file's NVLink
# egress, 18 links x 25e9 x NCCL's 370/450 = 370e9 B/s, each one hop's 0.47 us
# of latency, the 2v - 1 chunk boundaries x 2 ways x 8 microbatches of them
for v, b in ((2, b2), (3, b3)):
    rate = b["bubble_seconds"] / b["compute_seconds"]
    size = b["comm_bytes_per_step"]["pipe"]["permute"]["size"]
    msgs = size / 370e9 + (2 * v - 1) * 2 * 8 * 0.47e-6
    # at least the schedule's, at most that and the messages on the critical path
    assert sim[v] <= rate <= sim[v] + msgs / b["compute_seconds"], (v, rate, sim[v], msgs)
PY
"$BIN" plan "${M[@]}" "${FIX[@]}" --chips 2 --batch-tokens 24k --mesh pipe=2 --chunks 3 \
    --microbatches 8 --json >c3.json 2>err.txt
"$BIN" plan "${M[@]}" "${FIX[@]}" --chips 2 --batch-tokens 24k --mesh pipe=2 --chunks 3 \
    --microbatches 8 >c3.txt 2>err.txt
python3 - c3.json <<'PY' && ok "--chunks 3: interleaved at v=3 only" || bad "--chunks 3" "see above"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["evaluated"] == 1 and d["best"][0]["chunks"] == 3, d["best"]
assert d["best"][0]["schedule"] == "interleaved"
PY
grep -Eq "^  1  pipe=2 +0  none +off off interleaved +3 +8 " c3.txt \
    && ok "--chunks 3: v in the text's row" || bad "--chunks 3 text" "$(grep '^  1' c3.txt)"
expect_fail "--chunks 3 with 1f1b" 2 "--chunks 3 with --schedule 1f1b, which runs 1 chunk" \
    "$BIN" plan "${M[@]}" --chips 2 --batch-tokens 24k --mesh pipe=2 --chunks 3 --schedule 1f1b
expect_fail "--chunks 9" 2 "--chunks" \
    "$BIN" plan "${M[@]}" --chips 2 --batch-tokens 24k --mesh pipe=2 --chunks 9

# ---- refusals: one line a reason, with counts -------------------------------------
# --microbatches 5 of 48 sequences: every layout of the mesh refused for one reason
"$BIN" plan "${M[@]}" --chips 4 --batch-tokens 24k --mesh data=2,pipe=2 --microbatches 5 \
    >r5.txt 2>err.txt
rc=$?
n=$(grep -c "do not split into 5 microbatches" r5.txt)
if [ "$rc" -eq 1 ] && [ "$n" -eq 1 ] && ! grep -q "^infeasible:" r5.txt &&
    grep -Eq "^refused: ([0-9]+) of the \1 layouts, for 1 reason:$" r5.txt; then
    ok "--microbatches 5: one refusal line for every layout"
else
    bad "--microbatches 5" "exit $rc, $n lines: $(grep -A2 '^refused' r5.txt)"
fi
"$BIN" plan "${M[@]}" --chips 4 --batch-tokens 24k --json >free.json 2>err.txt
"$BIN" plan "${M[@]}" --chips 4 --batch-tokens 24k >free.txt 2>err.txt
python3 - free.json free.txt <<'PY' && ok "refusals: distinct reasons, counts adding up (text and --json)" || bad "refusals" "see above"
import json, re, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read().splitlines()
refused = d["evaluated"] - d["feasible"]
rs = d["refusals"]
assert refused > 0 and len(rs) >= 2, (refused, rs)
assert sum(r["count"] for r in rs) == refused, ([r["count"] for r in rs], refused)
assert len({r["reason"] for r in rs}) == len(rs), "a reason twice"
assert [r["count"] for r in rs] == sorted((r["count"] for r in rs), reverse=True)
for r in rs:
    assert r["count"] > 0 and r["example"].split(" ")[0] and r["reason"]
head = [i for i, l in enumerate(text) if l.startswith("refused: ")]
assert len(head) == 1, head
m = re.match(r"refused: (\d+) of the (\d+) layouts, for (\d+) reasons?:$", text[head[0]])
assert m and int(m[1]) == refused and int(m[2]) == d["evaluated"] and int(m[3]) == len(rs), text[head[0]]
lines = text[head[0] + 1: head[0] + 1 + len(rs)]
counts = [int(l.split()[0]) for l in lines]
assert counts == [r["count"] for r in rs], (counts, rs)
reasons = [l.split(None, 1)[1] for l in lines]
assert len(set(reasons)) == len(reasons)
PY

test_end
