#!/usr/bin/env bash
# test_plan_cli.sh — `meshtrain plan`: its refusals (exit 2 for a wrong
# command line or request (MT_EINVAL), 1 for what cannot be read, one "meshtrain: " line naming
# the setting), its text table and its --json object (parsed by python3:
# the keys users rely on, the best layout first, infeasible layouts never
# ranked), one mesh with its infeasible options listed, --head-dim's
# widths in N and the FLOPs, and --min-chips.
#
#   bash tests/test_plan_cli.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_plan_cli.sh "$@"

# a small llama: 8 layers, width 256, 8 heads (kv 4), on H100s
M=(--model llama --channels 256 --layers 8 --heads 8 --kv-heads 4 --ffn-dim 512 --vocab 1024
   --max-seq 512)

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
expect_fail "mesh larger than the chips" 2 "16 devices, more than --chips 8" \
    "$BIN" plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512 --mesh data=16
expect_fail "mesh axis" 2 "'stage'" \
    "$BIN" plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512 \
    --mesh data=4,stage=2
# an expert axis on a dense model: laid out, and every layout refused (exit 1, the report)
"$BIN" plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512 \
    --mesh data=4,expert=2 >out.txt 2>err.txt
rc=$?
if [ "$rc" -eq 1 ] && grep -q "expert=2: the model has no experts to split" err.txt; then
    ok "expert axis of a dense model"
else
    bad "expert axis of a dense model" "exit $rc; $(head -c 300 err.txt)"
fi
expect_fail "min-chips with a mesh" 2 "leave out --mesh" \
    "$BIN" plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512 \
    --mesh data=8 --min-chips
expect_fail "a DeepSpeed release is MAJOR.MINOR[.PATCH]" 2 "is not a release" \
    "$BIN" plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512 \
    --memory deepspeed --deepspeed-version 0.3.x
expect_fail "a DeepSpeed release needs --memory deepspeed" 2 "costed under --memory deepspeed" \
    "$BIN" plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512 \
    --memory megatron --deepspeed-version 0.4
expect_fail "mlp is no sequence model" 2 "examples, not sequences" \
    "$BIN" plan --model mlp --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512
expect_fail "negative --bucket-mb" 2 "--bucket-mb" \
    "$BIN" plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512 --bucket-mb -1

# ---- the table and the JSON ------------------------------------------------
P=(plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512)
if "$BIN" "${P[@]}" >table.txt 2>err.txt; then ok "table: exit 0"; else bad "table: exit" "exit $?"; fi
for want in "^plan: llama" "layouts evaluated" "^  1  " "^best: " "memory per device: parameters" \
            "^  bound: " "^families:" "pure data: " "pipeline: " "^MFU: [0-9.e+]+ FLOPs a token [(]6N [+] 6·L·H·Q·T: causal" \
            "MFU +HFU +bound$" "^  step [0-9.]+ [mu]?s: forward " "^  throughput: " \
            "^  communication a step, per device" "^units: GiB = 2\^30 bytes"; do
    grep -Eq -- "$want" table.txt && ok "table: /$want/" || bad "table" "no line matches /$want/"
done
"$BIN" "${P[@]}" --json >plan.json 2>err.txt
# N by hand: embedding and head V·C each (untied), per layer two norms 2C,
# wq and wo C·C, wk and wv C·(KV·C/NH), w1 w2 w3 3·F·C; the final norm C
python3 - plan.json <<'PY' && ok "json: keys, N by hand, ranked, feasible only" || bad "json" "see above"
import json, sys
d = json.load(open(sys.argv[1]))
C, L, NH, KV, F, V = 256, 8, 8, 4, 512, 1024
N = 2 * V * C + L * (2 * C + 2 * C * C + 2 * C * (KV * C // NH) + 3 * F * C) + C
assert d["parameters"] == N, (d["parameters"], N)
# the trainer's count (mt_llama_train_flops): the untied lookup table is no product;
# causal attention 6·L·C·T (the pairs key <= query: half PaLM's 12·L·C·T)
assert d["flops_per_token"] == 6 * (N - V * C) + 6 * L * C * 512, d["flops_per_token"]
for k in ("model", "hardware", "chips", "batch_tokens", "seq", "precision", "memory_convention",
          "evaluated", "feasible", "programs", "seconds", "best", "infeasible", "families"):
    assert k in d, k
assert d["batch_tokens"] == 65536 and d["chips"] == 8
best = d["best"]
assert 1 <= len(best) <= 5, len(best)
steps = [b["step_seconds"] for b in best]
assert steps == sorted(steps), steps
for b in best:
    assert b["feasible"] and b["memory_per_device"]["total"] <= 80e9, b
    for k in ("mesh", "data", "fsdp", "tensor", "pipe", "zero", "remat", "sequence_parallel",
              "collective_matmul", "schedule", "microbatches", "step_seconds",
              "tokens_per_s_per_device", "mfu", "hfu", "bound", "bound_why", "forward_seconds",
              "backward_seconds", "recompute_seconds", "tokens_per_s", "comm_bytes_per_step"):
        assert k in b, k
    assert 0 < b["mfu"] <= b["hfu"] <= 1, (b["mfu"], b["hfu"])
    split = b["forward_seconds"] + b["backward_seconds"] + b["recompute_seconds"]
    assert abs(split - b["compute_seconds"]) <= 1e-6 * b["compute_seconds"], split
    m = b["memory_per_device"]
    assert abs(m["total"] - sum(m[k] for k in ("parameters", "gradients", "optimizer",
                                                "activations", "temporaries"))) < 1e-3 * m["total"]
    # tokens/s per device and MFU from the step, by hand
    assert abs(b["tokens_per_s_per_device"] - 65536 / b["step_seconds"] / b["chips"]) < 1e-6 * b["tokens_per_s_per_device"]
    assert abs(b["mfu"] - d["flops_per_token"] * 65536 / (b["chips"] * 9.9e14 * b["step_seconds"])) < 1e-6
    assert b["bound"] in ("compute", "memory bandwidth", "communication", "pipeline bubble"), b["bound"]
assert d["infeasible"] == [], "infeasible layouts are listed only for a given mesh"
assert len(d["families"]) == 5 and all(f["line"].startswith(f["family"] + ": ") for f in d["families"])
PY

# ---- a head size of its own: --head-dim 64 (q 512 wide over width 256) --------
# N by hand with wq and wo NH·HS·C, wk and wv KV·HS·C; causal attention's 6·L·NH·HS·T, 6 a product
# weight (not the untied lookup table's)
"$BIN" plan "${M[@]}" --head-dim 64 --hardware h100-sxm --chips 2 --batch-tokens 64k --seq 512 \
    --mesh tensor=2 --json >hd.json 2>err.txt
python3 - hd.json <<'PY' && ok "--head-dim 64: N and FLOPs from the q, k, v, o widths" || bad "plan --head-dim" "see above"
import json, sys
d = json.load(open(sys.argv[1]))
C, L, NH, KV, F, V, HS = 256, 8, 8, 4, 512, 1024, 64
N = 2 * V * C + L * (2 * C + 2 * NH * HS * C + 2 * KV * HS * C + 3 * F * C) + C
assert d["parameters"] == N, (d["parameters"], N)
assert d["flops_per_token"] == 6 * (N - V * C) + 6 * L * NH * HS * 512, d["flops_per_token"]
b = d["best"][0]
assert abs(b["mfu"] - d["flops_per_token"] * 65536 / (b["chips"] * 9.9e14 * b["step_seconds"])) < 1e-6
PY

# ---- gradient buckets: fp32 reductions go as the trainer's --bucket-mb ------
# (test_plan_step's gradient_buckets times them by hand): on data=8 the
# small llama's 28 MB of gradients go one a tensor under the backward with
# --bucket-mb 0, and with 25 MiB buckets mostly in one bucket at W's end,
# exposed after the backward: the step is longer with buckets
B=(plan "${M[@]}" --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512 --precision fp32
   --mesh data=8 --zero 0 --remat none --json)
"$BIN" "${B[@]}" --bucket-mb 0 >b0.json 2>err.txt && "$BIN" "${B[@]}" >b25.json 2>>err.txt
python3 - b0.json b25.json <<'PY' && ok "buckets: the last bucket exposed after W" || bad "buckets" "see above"
import json, sys
s0, s25 = (json.load(open(f))["best"][0]["step_seconds"] for f in sys.argv[1:3])
assert s25 > s0, (s0, s25)
PY

# ---- one mesh: its options, infeasible ones with why ------------------------
"$BIN" plan --model llama --preset llama3-8b --hardware h100-sxm --chips 1 --batch-tokens 1M \
    --seq 4096 --mesh data=1 --remat none --microbatches 1 --json >oom.json 2>err.txt
rc=$?
python3 - oom.json "$rc" <<'PY' && ok "one mesh out of memory: listed with why, exit 1" || bad "oom" "see above"
import json, sys
d = json.load(open(sys.argv[1]))
assert sys.argv[2] == "1", "exit " + sys.argv[2]
assert d["best"] == [] and d["evaluated"] == len(d["infeasible"]) >= 1, d["evaluated"]
for r in d["infeasible"]:
    assert not r["feasible"] and r["why"].startswith("out of memory"), r["why"]
    assert r["memory_per_device"]["total"] > 80e9
PY

# ---- --min-chips: the count found fits, the smooth count below it does not --
"$BIN" plan --model llama --preset llama3-8b --hardware h100-sxm --batch-tokens 256k --seq 2048 \
    --memory mixed16 --min-chips --json >min.json 2>err.txt
n=$(python3 -c "import json,sys; d=json.load(open('min.json')); print(d['chips'] if d['best'] else 0)")
below=$(python3 -c "
n=$n
c=n-1
def smooth(x):
    for p in (2,3,5,7):
        while x % p == 0: x //= p
    return x == 1
while c > 0 and not smooth(c): c -= 1
print(c)")
if [ "$n" -gt 1 ]; then
    ok "min-chips: $n chips"
    "$BIN" plan --model llama --preset llama3-8b --hardware h100-sxm --batch-tokens 256k \
        --seq 2048 --memory mixed16 --chips "$below" >below.txt 2>err.txt
    [ $? -eq 1 ] && grep -q "no layout fits" below.txt && ok "min-chips: $below chips do not fit" \
        || bad "min-chips" "$below chips fit, yet --min-chips said $n"
else
    bad "min-chips" "found $n"
fi

test_end
