#!/usr/bin/env bash
# test_plan_output.sh — what `meshtrain plan` tells a planner's user (issue
# 40, item 5), against closed forms computed here by hand:
#
#   - the bytes a step by collective kind and mesh axes (--json's
#     comm_bytes_per_step: nccl-tests' size of every call summed over the
#     step, and what a device sends on a ring), on test_zero_bytes.sh's GPT
#     (V=256, T=16, C=32, L=2, tied; f32, 4 bytes an element) whose Ψ and
#     Ψ_B are counted from its shapes:
#       data parallel      all-reduce 4Ψ (the gradients, once a step) + 4m
#                          (the loss, a float a microbatch); sent 2(n-1)/n of it
#       ZeRO-1             all-gather 4Ψ + reduce-scatter 4Ψ, once a step (the
#                          ZeRO paper's 2Ψ, §7)
#       ZeRO-3             all-gather 4m(Ψ + Ψ_B), reduce-scatter 4mΨ
#                          (test_zero_bytes.sh's table)
#       Megatron tensor    all-reduce, a microbatch: 4 of b·s·h a layer (2 in
#       parallel           the forward, 2 in the backward: Korthikanti et al.
#                          §3, "f" and "g"), one of b·s·h for the vocabulary-
#                          parallel embedding (forward) and one for the head's
#                          input gradient (backward), and the vocabulary-parallel
#                          cross entropy's 3 row statistics (max, sum, target
#                          logit: 3·b·s floats); 4 bytes an element
#       collective matmul  the same bytes as the collectives it replaces
#       pipelines          a message of b·s·h floats a microbatch to each chunk
#                          on another device: 1f1b's first stage m of them,
#                          interleaved (v=2) 3m, dualpipev 2m
#   - the step split: forward + backward + recompute = compute, compute +
#     exposed communication + bubble + optimizer = step; recompute 0 without
#     remat and above 0 with full remat; MFU <= HFU, equal without remat
#   - --train-tokens: ceil(N / batch) steps, days = steps x step / 86400,
#     device-hours = chips x steps x step / 3600; K, M, B, T decimal; bad
#     counts refused (exit 2, one line)
#   - binary units: the text gives memory in MiB/GiB/TiB, says GiB = 2^30
#     bytes, and no decimal MB, GB or TB; the table's memory is the JSON's
#     bytes / 2^30; HFU beside MFU.
#   - memory's parts and margin: parameters + gradients + optimizer +
#     activations + temporaries + reserve = total, in --json and in the
#     text's line; margin = the hardware file's hbm_bytes - total (read here
#     from hardware/<name>.json), negative when over; no reserve under
#     --memory meshtrain, nor on a TPU (no CUDA runtime)
#   - memory by pipeline stage: 1F1B under --memory megatron holds p - s
#     microbatches' activations on stage s (Narayanan et al., SC21 §2.2.1;
#     Korthikanti et al. §4.2.3: the first stage p), so they fall stage by
#     stage from stage 0, the peak; past the 64 stages a result lists, the
#     first few, the peak and the last, with "…"
#
#   bash tests/test_plan_output.sh <meshtrain binary> [<build dir>]
set -u

HW=$(realpath "$(dirname "${BASH_SOURCE[0]}")/../hardware")
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_plan_output.sh "$@"

GPT=(--model gpt --layers 2 --channels 32 --heads 4 --vocab 256 --max-seq 16 --seq 16
     --hardware h100-sxm --precision fp32 --batch-tokens 256)

# plan NAME ARGS... : the JSON into NAME.json, ok when it ran
plan() {
    local name=$1
    shift
    if timeout 300 "$BIN" plan "$@" --json >"$name.json" 2>err.txt; then return 0; fi
    bad "$name" "exit $?: $(head -2 err.txt)"
    return 1
}

# ---- bytes a step: data parallel, ZeRO-1, ZeRO-3 --------------------------
plan dp1 "${GPT[@]}" --chips 4 --mesh data=4 --zero 0 --remat none --microbatches 1 &&
plan dp4 "${GPT[@]}" --chips 4 --mesh data=4 --zero 0 --remat none --microbatches 4 &&
plan z1 "${GPT[@]}" --chips 4 --mesh data=4 --zero 1 --remat none --microbatches 4 &&
plan z3 "${GPT[@]}" --chips 4 --mesh data=4 --zero 3 --remat none --microbatches 4 &&
python3 - <<'PY' && ok "bytes a step: data parallel 4Ψ + 4m, ZeRO-1 4Ψ + 4Ψ, ZeRO-3 4m(Ψ+Ψ_B) + 4mΨ" || bad "data-parallel bytes" "see above"
import json
V, T, C, L = 256, 16, 32, 2
PSI = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
PSI_B = V * C + L * (12 * C * C + 2 * C) + C
assert PSI == 34176 and PSI_B == 32928
def comm(name):
    d = json.load(open(name + ".json"))
    assert d["parameters"] == PSI, (d["parameters"], PSI)
    return d["best"][0]["comm_bytes_per_step"]
def check(name, want, n=4):
    c = comm(name)
    assert list(c) == ["data"] and c["data"]["devices"] == n, c
    got = {k: v for k, v in c["data"].items() if k != "devices"}
    assert {k: v["size"] for k, v in got.items()} == want, (name, got, want)
    for k, v in got.items():
        ring = 2 * (n - 1) / n if k == "all-reduce" else (n - 1) / n
        assert abs(v["sent"] - ring * v["size"]) <= 1, (name, k, v)
check("dp1", {"all-reduce": 4 * PSI + 4 * 1})
check("dp4", {"all-reduce": 4 * PSI + 4 * 4})
check("z1", {"all-gather": 4 * PSI, "reduce-scatter": 4 * PSI, "all-reduce": 4 * 4})
m = 4
check("z3", {"all-gather": 4 * m * (PSI + PSI_B), "reduce-scatter": 4 * m * PSI,
             "all-reduce": 4 * m})
PY

# ---- bytes a step: Megatron's tensor parallelism ----------------------------
plan tp "${GPT[@]}" --chips 2 --mesh tensor=2 --sequence-parallel off --remat none \
    --microbatches 2 &&
python3 - <<'PY' && ok "bytes a step: tensor=2, 4 all-reduces of b·s·h a layer a microbatch (Korthikanti §3) + embedding, head, loss" || bad "tensor-parallel bytes" "see above"
import json
C, L, S = 32, 2, 16
m, seqs = 2, 256 // 16
b = seqs // m                     # sequences a microbatch
bsh = b * S * C
want = m * 4 * (4 * L * bsh + 2 * bsh + 3 * b * S)
c = json.load(open("tp.json"))["best"][0]["comm_bytes_per_step"]
assert list(c) == ["tensor"] and list(c["tensor"]) == ["devices", "all-reduce"], c
ar = c["tensor"]["all-reduce"]
assert ar["size"] == want and ar["sent"] == want, (ar, want)   # n = 2: 2(n-1)/n = 1
PY

# ---- the same past the built points: 12 blocks (built at 4 and 8), 32 sequences
# a replica (built at 2 and 4): the bytes are taken along both exactly --------
G12=(--model gpt --layers 12 --channels 32 --heads 4 --vocab 256 --max-seq 16 --seq 16
     --hardware h100-sxm --precision fp32 --batch-tokens 2048 --remat none --microbatches 2)
plan dp12 "${G12[@]}" --chips 4 --mesh data=4 --zero 0 &&
plan tp12 "${G12[@]}" --chips 2 --mesh tensor=2 --sequence-parallel off &&
python3 - <<'PY' && ok "bytes a step past the built points (12 layers, 32 sequences a replica): 4Ψ + 4m, Megatron's" || bad "bytes past the points" "see above"
import json
V, T, C, L, S, m = 256, 16, 32, 12, 16, 2
PSI = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
d = json.load(open("dp12.json"))
assert d["parameters"] == PSI, (d["parameters"], PSI)
c = d["best"][0]["comm_bytes_per_step"]
assert c["data"]["all-reduce"]["size"] == 4 * PSI + 4 * m, c
b = 2048 // S // m
bsh = b * S * C
c = json.load(open("tp12.json"))["best"][0]["comm_bytes_per_step"]
assert c["tensor"]["all-reduce"]["size"] == m * 4 * (4 * L * bsh + 2 * bsh + 3 * b * S), c
PY

# ---- collective matmul moves what the collectives it replaces move ------------
plan sp "${GPT[@]}" --chips 2 --mesh tensor=2 --sequence-parallel on --collective-matmul off \
    --remat none --microbatches 2 &&
plan cm "${GPT[@]}" --chips 2 --mesh tensor=2 --sequence-parallel on --collective-matmul on \
    --remat none --microbatches 2 &&
python3 - <<'PY' && ok "bytes a step: collective matmul's rings = the all-gathers and reduce-scatters they replace" || bad "collective matmul bytes" "see above"
import json
C, L, S, m, b = 32, 2, 16, 2, 8
bsh = b * S * C
sp, cm = (json.load(open(f + ".json"))["best"][0]["comm_bytes_per_step"]["tensor"]
          for f in ("sp", "cm"))
assert sp == cm, (sp, cm)
# Korthikanti §4.2.2: with sequence parallelism each all-reduce of a block is
# a reduce-scatter and an all-gather: 4 of each a layer a microbatch
assert sp["all-gather"]["size"] >= m * 4 * 4 * L * bsh, sp
assert sp["reduce-scatter"]["size"] >= m * 4 * 4 * L * bsh, sp
assert sp["all-gather"]["sent"] == sp["all-gather"]["size"] / 2, sp
PY

# ---- bytes a step: a pipeline's messages ------------------------------------
G4=(--model gpt --layers 4 --channels 32 --heads 4 --vocab 256 --max-seq 16 --seq 16
    --hardware h100-sxm --precision fp32 --batch-tokens 256 --chips 2 --mesh pipe=2 --zero 0
    --remat none --microbatches 4)
plan p1 "${G4[@]}" --schedule 1f1b &&
plan pi "${G4[@]}" --schedule interleaved --chunks 2 &&
plan pv "${G4[@]}" --schedule dualpipev &&
python3 - <<'PY' && ok "bytes a step: pipeline permutes, m, 3m and 2m messages of b·s·h floats" || bad "pipeline bytes" "see above"
import json
C, S, m = 32, 16, 4
b = 256 // 16 // m
msg = 4 * b * S * C
for name, n in (("p1", m), ("pi", 3 * m), ("pv", 2 * m)):
    c = json.load(open(name + ".json"))["best"][0]["comm_bytes_per_step"]
    assert c == {"pipe": {"devices": 2, "permute": {"size": n * msg, "sent": n * msg}}}, (name, c)
PY

# ---- the step split, MFU and HFU -------------------------------------------
plan none "${GPT[@]}" --chips 4 --mesh data=2,tensor=2 --remat none --top 20 &&
plan full "${GPT[@]}" --chips 4 --mesh data=2,tensor=2 --remat full --top 20 &&
plan pipes "${G4[@]}" --remat full --top 20 &&
python3 - <<'PY' && ok "step split: forward + backward + recompute = compute; + exposed + bubble + optimizer = step; MFU <= HFU" || bad "step split" "see above"
import json
def close(a, b):
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b), 1e-12)
n = 0
for name in ("none", "full", "pipes"):
    for r in json.load(open(name + ".json"))["best"]:
        n += 1
        f, bw, rc = r["forward_seconds"], r["backward_seconds"], r["recompute_seconds"]
        assert f > 0 and bw > 0 and rc >= 0, r
        assert close(f + bw + rc, r["compute_seconds"]), (name, f, bw, rc, r["compute_seconds"])
        parts = r["compute_seconds"] + r["exposed_comm_seconds"] + r["bubble_seconds"] + \
            r["optimizer_seconds"]
        assert close(parts, r["step_seconds"]), (name, parts, r["step_seconds"])
        assert 0 < r["mfu"] <= r["hfu"] <= 1, (name, r["mfu"], r["hfu"])
        assert close(r["tokens_per_s"], 256 / r["step_seconds"]), r["tokens_per_s"]
        if r["remat"] == "none":
            assert rc == 0 and r["mfu"] == r["hfu"], (name, rc, r["mfu"], r["hfu"])
        if r["remat"] == "full":
            # the recomputed forward is a forward again: more than nothing,
            # no more than the forward itself
            assert 0 < rc <= f * (1 + 1e-9) and r["hfu"] > r["mfu"], (name, rc, f)
assert n >= 3, n
PY

# ---- --train-tokens ----------------------------------------------------------
M=(--model llama --channels 256 --layers 8 --heads 8 --kv-heads 4 --ffn-dim 512 --vocab 1024
   --max-seq 512 --hardware h100-sxm --chips 8 --batch-tokens 64k --seq 512 --mesh data=8
   --remat none --zero 0)
plan tt "${M[@]}" --train-tokens 300B &&
python3 - <<'PY' && ok "--train-tokens 300B: ceil(3e11 / 65536) steps, days and device-hours by hand" || bad "train tokens" "see above"
import json, math
d = json.load(open("tt.json"))
assert d["train_tokens"] == 3e11, d["train_tokens"]
steps = math.ceil(3e11 / 65536)
assert steps == 4577637
for r in [d] + d["best"]:
    step = d["best"][0]["step_seconds"] if r is d else r["step_seconds"]
    chips = d["best"][0]["chips"] if r is d else r["chips"]
    assert r["train_steps"] == steps, r["train_steps"]
    assert abs(r["train_days"] - steps * step / 86400) <= 1e-6 * r["train_days"], r["train_days"]
    assert abs(r["device_hours"] - chips * steps * step / 3600) <= 1e-6 * r["device_hours"]
PY
for spec in "1.5T:1500000000000" "12k:12000" "3e11:300000000000" "7M:7000000" "42:42"; do
    plan t "${M[@]}" --train-tokens "${spec%%:*}" && python3 -c "
import json, sys
d = json.load(open('t.json'))
assert d['train_tokens'] == ${spec#*:}, d['train_tokens']" &&
        ok "--train-tokens ${spec%%:*} = ${spec#*:} tokens" || bad "--train-tokens ${spec%%:*}" "not ${spec#*:}"
done
for badtok in -5 0 4.5 1x 2e18 B ""; do
    expect_fail "--train-tokens '$badtok' refused" 2 "--train-tokens" \
        "$BIN" plan "${M[@]}" --train-tokens "$badtok"
done

# ---- the text: binary units, HFU beside MFU, the split, the bytes ------------
if timeout 300 "$BIN" plan "${M[@]}" --train-tokens 300B >tt.txt 2>err.txt; then
    ok "text: exit 0"
else
    bad "text" "exit $?: $(head -2 err.txt)"
fi
for want in "MFU +HFU +bound$" "^units: GiB = 2\^30 bytes" "^  memory per device: parameters" \
            "^  memory in all: " "^  step [0-9.]+ [mu]?s: forward .*, backward .*, recompute .*, optimizer .*, exposed communication .*, bubble " \
            "^  throughput: [0-9]+ tokens/s in all, [0-9]+ tokens/s per device; MFU [0-9.]+%, HFU [0-9.]+%" \
            "^    data \(8\) +[0-9.]+ MiB" "^  training on 3e\+11 tokens: 4577637 steps of "; do
    grep -Eq -- "$want" tt.txt && ok "text: /$want/" || bad "text" "no line matches /$want/"
done
if grep -Eq '[0-9] (MB|GB|TB)([^/]|$)' tt.txt; then
    bad "text: binary units" "a decimal unit: $(grep -E '[0-9] (MB|GB|TB)([^/]|$)' tt.txt | head -1)"
else
    ok "text: no decimal MB, GB or TB"
fi
python3 - tt.txt tt.json <<'PY' && ok "text: the table's memory is the JSON's bytes / 2^30" || bad "text memory" "see above"
import json, re, sys
row = next(l for l in open(sys.argv[1]) if l.startswith("  1  "))
got = re.search(r"([0-9.]+) (MiB|GiB|TiB)", row)
scale = {"MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[got.group(2)]
want = json.load(open(sys.argv[2]))["best"][0]["memory_per_device"]["total"] / scale
assert f"{want:.2f}" == got.group(1), (got.group(0), want)
PY

# ---- memory: the parts add up, the margin, the reserve ------------------------
P8=(--model gpt --layers 8 --channels 32 --heads 4 --vocab 256 --max-seq 16 --seq 16
    --hardware h100-sxm --batch-tokens 256 --chips 4 --mesh pipe=4 --schedule 1f1b
    --microbatches 8 --remat none --zero 0)
plan meg "${P8[@]}" --memory megatron &&
plan own "${P8[@]}" --memory meshtrain &&
plan megdp "${GPT[@]}" --chips 4 --memory megatron --top 20 &&
plan tpu "${P8[@]}" --memory megatron --hardware tpu-v5p &&
python3 - "$HW" <<'PY' && ok "memory: the six parts add up to total; margin = hbm_bytes - total; reserve > 0 under megatron on an H100, 0 under meshtrain and on a TPU" || bad "memory parts and margin" "see above"
import json, sys
hbm = {n: json.load(open(f"{sys.argv[1]}/{n}.json"))["chip"]["hbm_bytes"]["value"]
       for n in ("h100-sxm", "tpu-v5p")}
assert hbm["h100-sxm"] == 8e10, hbm
PARTS = ("parameters", "gradients", "optimizer", "activations", "temporaries", "reserve")
n = 0
for name, hw in (("meg", "h100-sxm"), ("own", "h100-sxm"), ("megdp", "h100-sxm"),
                 ("tpu", "tpu-v5p")):
    d = json.load(open(name + ".json"))
    assert d["hardware"] == hw, d["hardware"]
    for r in d["best"]:
        n += 1
        m = r["memory_per_device"]
        # each part is printed rounded to a byte: at most 1/2 off each
        assert abs(sum(m[k] for k in PARTS) - m["total"]) <= 3, (name, m)
        assert abs(m["margin"] - (hbm[hw] - m["total"])) <= 1, (name, m, hbm[hw])
        assert m["margin"] > 0, (name, m)
        if name in ("own", "tpu"):
            assert m["reserve"] == 0, (name, m)
        else:
            # at least the CUDA context's 723 MiB (memory_reserve.c's source)
            assert m["reserve"] >= 723 * 2**20, (name, m)
assert n >= 4, n
PY

# a layout that does not fit: the margin is how far over, negative
if timeout 300 "$BIN" plan --model gpt --layers 4 --channels 1024 --heads 8 --vocab 50304 \
        --max-seq 2048 --seq 2048 --hardware v100-32gb --chips 2 --mesh data=2 \
        --batch-tokens 256k --memory megatron --zero 0 --remat none --microbatches 1 \
        --json >oom.json 2>err.txt; then
    bad "out of memory" "exit 0: a 64-sequence step of 2048 fit in a V100's 32 GB"
else
    python3 - "$HW" <<'PY' && ok "memory: a layout over the chip's memory has margin hbm_bytes - total < 0, its parts adding up" || bad "negative margin" "see above"
import json, sys
hbm = json.load(open(f"{sys.argv[1]}/v100-32gb.json"))["chip"]["hbm_bytes"]["value"]
d = json.load(open("oom.json"))
assert not d["best"] and len(d["infeasible"]) == 1, d
r = d["infeasible"][0]
m = r["memory_per_device"]
assert r["why"].startswith("out of memory"), r["why"]
assert abs(m["margin"] - (hbm - m["total"])) <= 1 and m["margin"] < 0, (m, hbm)
assert abs(sum(m[k] for k in ("parameters", "gradients", "optimizer", "activations",
                              "temporaries", "reserve")) - m["total"]) <= 3, m
# the refusal's "N GiB over" is the same margin
over = float(r["why"].split(", ")[1].split(" GiB over")[0])
assert f"{-m['margin'] / 2**30:.2f}" == f"{over:.2f}", (over, m["margin"])
PY
fi

# ---- memory by pipeline stage: 1F1B under megatron ------------------------------
python3 - <<'PY' && ok "stages: 1F1B p=4, megatron: activations p - s microbatches on stage s (4:3:2:1), peak stage 0 = total" || bad "1f1b stages" "see above"
import json
for name in ("meg", "own"):
    m = json.load(open(name + ".json"))["best"][0]["memory_per_device"]
    st = m["stages"]
    assert [s["stage"] for s in st] == [0, 1, 2, 3], (name, st)
    assert max(s["total"] for s in st) == m["total"], (name, st, m["total"])
    assert st[m["peak_stage"]]["total"] == m["total"], (name, m)
    if name != "meg":
        continue
    assert m["peak_stage"] == 0, m
    act = [s["activations"] for s in st]
    assert act[0] == m["activations"] and all(a > b for a, b in zip(act, act[1:])), act
    p = 4
    for s, a in enumerate(act):
        assert abs(a / act[-1] - (p - s)) <= 0.01 * (p - s), (s, act)
PY
plan dp "${GPT[@]}" --chips 4 --mesh data=4 --memory megatron &&
python3 - <<'PY' && ok "stages: none listed without a pipeline" || bad "stages without a pipeline" "see above"
import json
for r in json.load(open("dp.json"))["best"]:
    assert "stages" not in r["memory_per_device"] and "peak_stage" not in r["memory_per_device"], r
PY

# the text: the line's parts add up to "memory in all", the margin free, the stages
if timeout 300 "$BIN" plan "${P8[@]}" --memory megatron >meg.txt 2>err.txt; then
    python3 - meg.txt meg.json <<'PY' && ok "text: memory per device's parts (runtime reserve named) sum to memory in all; N GiB free = the JSON's margin; a stage line, stage 0 the peak" || bad "text memory lines" "see above"
import json, re, sys
text = open(sys.argv[1]).read()
m = json.load(open(sys.argv[2]))["best"][0]["memory_per_device"]
U = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
line = next(l for l in text.splitlines() if l.startswith("  memory per device: "))
parts = re.findall(r"(parameters|gradients|optimizer|activations|temporaries|runtime reserve) +"
                   r"([0-9.]+) (MiB|GiB|TiB)", line)
assert [p[0] for p in parts] == ["parameters", "gradients", "optimizer", "activations",
                                 "temporaries", "runtime reserve"], line
assert "CUDA context, cuBLAS workspace, NCCL buffers" in line, line
got = sum(float(v) * U[u] for _, v, u in parts)
allin = re.search(r"^  memory in all: ([0-9.]+) (\w+) of the h100-sxm's 74.51 GiB "
                  r"\(([0-9.]+)%\), ([0-9.]+) (\w+) free", text, re.M)
assert allin, text
total = float(allin.group(1)) * U[allin.group(2)]
# each part rounded to 0.005 of its unit
assert abs(got - total) <= 6 * 0.005 * 2**20 + 0.005 * U[allin.group(2)], (got, total)
assert f"{m['margin'] / U[allin.group(5)]:.2f}" == allin.group(4), (allin.group(0), m["margin"])
stages = next(l for l in text.splitlines() if l.startswith("  memory by pipeline stage, "))
listed = re.findall(r" (\d+): ([0-9.]+) \(([0-9.]+)\)( peak)?", stages)
assert [int(s[0]) for s in listed] == [0, 1, 2, 3], stages
assert [s[0] for s in listed if s[3]] == ["0"], stages
unit = U[re.search(r"stage, (\w+) a device", stages).group(1)]
for (k, tot, act, _), s in zip(listed, m["stages"]):
    assert f"{s['total'] / unit:.2f}" == tot and f"{s['activations'] / unit:.2f}" == act, (k, s)
PY
else
    bad "text stages" "exit $?: $(head -2 err.txt)"
fi

# ---- deeper than the 64 stages a result lists: 80 stages of a layer -------------
P80=(--model gpt --layers 80 --channels 32 --heads 4 --max-seq 16 --seq 16
     --hardware h100-sxm --batch-tokens 1280 --chips 80 --mesh pipe=80 --schedule 1f1b
     --microbatches 80 --remat none --zero 0)
plan deep "${P80[@]}" --vocab 256 --memory megatron &&
timeout 300 "$BIN" plan "${P80[@]}" --vocab 256 --memory megatron >deep.txt 2>err.txt &&
plan head "${P80[@]}" --vocab 65536 --memory meshtrain &&
timeout 300 "$BIN" plan "${P80[@]}" --vocab 65536 --memory meshtrain >head.txt 2>err.txt &&
python3 - <<'PY' && ok "stages: 80 of them: the JSON lists 0..63 and the last, activations 80 - s; the text the first 4, …, the last, the peak marked (stage 0; the last with a 65536-word head)" || bad "80 stages" "see above"
import json, re
m = json.load(open("deep.json"))["best"][0]["memory_per_device"]
st = m["stages"]
assert [s["stage"] for s in st] == list(range(64)) + [79], [s["stage"] for s in st]
assert m["peak_stage"] == 0 and st[0]["total"] == m["total"], m["peak_stage"]
last = st[-1]["activations"]
for s in st:
    assert abs(s["activations"] / last - (80 - s["stage"])) <= 0.01 * (80 - s["stage"]), s
line = next(l for l in open("deep.txt") if l.startswith("  memory by pipeline stage, "))
assert re.search(r": 0: [0-9.]+ \([0-9.]+\) peak, 1: [0-9.]+ \([0-9.]+\), 2: .*, 3: [0-9.]+ "
                 r"\([0-9.]+\), …, 79: [0-9.]+ \([0-9.]+\)$", line), line
# the peak past the listed stages: its own figures, listed once, marked
m = json.load(open("head.json"))["best"][0]["memory_per_device"]
st = m["stages"]
byst = {s["stage"]: s for s in st}
assert byst[m["peak_stage"]]["total"] == m["total"] >= max(s["total"] for s in st), m
assert len(byst) == len(st) == 65, [s["stage"] for s in st]
line = next(l for l in open("head.txt") if l.startswith("  memory by pipeline stage, "))
assert line.count(" peak") == 1 and re.search(rf" {m['peak_stage']}: [0-9.]+ \([0-9.]+\) peak",
                                              line), (m["peak_stage"], line)
PY

test_end
