#!/usr/bin/env bash
# test_hostile_plan.sh — `meshtrain plan` given hostile inputs (issue 37,
# findings 4, 6, 9, 11, 12 and 13): hardware files whose numbers overflow
# or would make the plan non-finite are refused naming the field, requests
# that would run for minutes answer in seconds or are refused (the hardware
# bounds the chips), the plan refuses what train refuses (--seq past
# --max-seq, a mesh that is not the chips), says why when nothing fits, and
# its messages say what is so. The table's format is tests/hostile.sh's.
#
#   bash tests/test_hostile_plan.sh <meshtrain binary> [<build dir>]
HW="$(cd "$(dirname "${BASH_SOURCE[0]}")/../hardware" && pwd)"   # before test_start's cd
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
test_start test_hostile_plan.sh "$@"
hostile_fixtures

# the hardware files: h100-sxm as shipped, and variants of it, each with one
# hostile field (python3 writes them: the harness's JSON check needs it too)
python3 - "$HW" "$WORK/fix" <<'PY' || echo "cannot write the hardware files"
import copy, json, shutil, sys
hw, fix = sys.argv[1], sys.argv[2]
h = json.load(open(hw + "/h100-sxm.json"))
shutil.copy(hw + "/h100-sxm.json", fix + "/h100.json")
shutil.copy(hw + "/devvm-epyc-2core.json", fix + "/machine.json")   # a 2-core machine file
def variant(name, edit):
    d = copy.deepcopy(h)
    edit(d)
    json.dump(d, open(fix + "/" + name, "w"), indent=1)
variant("node8.json", lambda d: d.update(levels=d["levels"][:1]))      # one node: 8 devices
# products not tile-quantized: a tiny model's fill few SMs, and on 7 chips
# pipe=7 would win (case 13 wants a best on fewer chips than asked)
variant("untiled.json", lambda d: [d["achievable"].pop(k) for k in
                                   ("gemm_tile_m", "gemm_tile_n", "gemm_units",
                                    "kernel_overhead")])
variant("torus.json", lambda d: d["levels"][0].update(topology="torus", dims=[1000000] * 4,
                                                      wrap=[False] * 4))
variant("hbmbw.json", lambda d: d["chip"]["hbm_bandwidth"].update(value=1e-300))
variant("peak.json", lambda d: d["chip"]["flops"]["bf16"].update(value=1e-300))
variant("link.json", lambda d: d["levels"][0]["link_bandwidth"].update(value=1e-300))
variant("gemm.json", lambda d: d["achievable"]["gemm"].update(value=1e-300))
# a fabric file whose NICs a device have no source (issue 40, item 6)
f = json.load(open(hw + "/fabrics/ib-ndr.json"))
del f["level"]["links"]["source"]
json.dump(f, open(fix + "/nosrc.json", "w"), indent=1)
PY

# test_plan_cli.sh's small llama: 8 layers, width 256, 8 heads (kv 4)
L="--model llama --channels 256 --layers 8 --heads 8 --kv-heads 4 --ffn-dim 512 --vocab 1024"
M="$L --max-seq 512"
P="plan $M --seq 512"
ONE="--remat none --zero 0 --sequence-parallel off"   # one option of each: a quick plan
# the after-check: stdout holds no non-finite number
finite() { echo "! grep -qiE '(^|[^a-z])-?(nan|inf)([^a-z]|$)' out.txt"; }

hostile_cases <<EOF
# ---- 4: a torus whose dims multiply past 2^63 ----
1 | levels[0].dims multiply to more than 1000000000 | $P --hardware torus.json --chips 8 --batch-tokens 64k
# ---- 6: requests that ran for minutes ----
0 | - | $P --hardware h100.json --chips 8 --batch-tokens 16G | grep -q '^best: ' out.txt
1 | , which its devices share | plan --model llama --preset llama3-405b --hardware machine.json --batch-tokens 4M --seq 8192 --min-chips
# ---- 9: --seq past --max-seq; figures that made the plan -nan ----
2 | exceeds the model's context maxT=512 (--max-seq) | plan $M --hardware h100.json --chips 8 --batch-tokens 64k --seq 1024
1 | chip.hbm_bandwidth is 1e-300, outside | $P --hardware hbmbw.json --chips 8 --batch-tokens 64k --mesh data=8 $ONE | $(finite)
1 | chip.flops.bf16 is 1e-300, outside | $P --hardware peak.json --chips 8 --batch-tokens 64k --mesh data=8 $ONE --json | $(finite)
1 | levels[0].link_bandwidth is 1e-300, outside | $P --hardware link.json --chips 8 --batch-tokens 64k --mesh data=8 $ONE | $(finite)
1 | achievable.gemm is 1e-300, outside | $P --hardware gemm.json --chips 8 --batch-tokens 64k --mesh data=8 $ONE | $(finite)
# ---- 11: what the plan says of the chips and the mesh is so ----
0 | - | $P --hardware untiled.json --chips 7 --batch-tokens 64k | grep -q 'faster than the best of all 7, pipe=7' out.txt && ! grep -q 'factor into no layout' out.txt
2 | --mesh 'data=4' has 4 devices but --chips is 8 | $P --hardware h100.json --chips 8 --batch-tokens 64k --mesh data=4
2 | --chips 16 is more than the 8 devices of hardware | $P --hardware node8.json --chips 16 --batch-tokens 64k
0 | - | $P --hardware h100.json --chips 8 --batch-tokens 64k --mesh tensor=8 $ONE | grep -q '^best: tensor=8' out.txt
# ---- 12: --min-chips for a model that never fits says why ----
1 | need 15 chips of 74.5 GiB | plan --model llama --preset llama3-70b --hardware h100.json --batch-tokens 64k --seq 512 --min-chips --chips 8 | ! grep -q ' 0 parameters' out.txt
1 | no count of chips up to 64 (sequences x tensor x pipe) fits | plan $L --max-seq 1048576 --hardware h100.json --batch-tokens 1M --seq 1048576 --min-chips $ONE
# ---- many sequences a replica: the memory counts extrapolated from 2 and 4
# sequences went below zero ("count 10 of its program is -6.4e+10") ----
0 | - | plan --model llama --preset llama3-8b --hardware h100.json --chips 8 --batch-tokens 4M --seq 64 $ONE | grep -q '^best: ' out.txt
# ---- 13: --batch-tokens' messages name tokens ----
2 | a step needs 1 or more tokens | $P --hardware h100.json --chips 8 --batch-tokens 0
2 | --batch-tokens '1e30' is more than 2^50 tokens | $P --hardware h100.json --chips 8 --batch-tokens 1e30
2 | --batch-tokens '-64k' is negative | $P --hardware h100.json --chips 8 --batch-tokens -64k
# ---- issue 40, item 6: --fabric and --slice-chips name the value they refuse ----
2 | no fabric 'ib-xdr' in | $P --hardware h100.json --fabric ib-xdr --chips 16 --batch-tokens 64k
2 | fabric file 'nosrc.json': level.links has no "source" | $P --hardware h100.json --fabric nosrc.json --chips 16 --batch-tokens 64k
2 | fabric 'ib-ndr': hardware 'this-machine' has no scale-out level | $P --hardware machine.json --fabric ib-ndr --chips 2 --batch-tokens 64k
2 | --slice-chips 97 forms no slice of tpu-v5p's 16x20x28 torus | $P --hardware tpu-v5p --slice-chips 97 --chips 194 --batch-tokens 64k
2 | --slice-chips 64: hardware 'h100-sxm' has no torus | $P --hardware h100.json --slice-chips 64 --chips 128 --batch-tokens 64k
2 | --chips 100 is no whole number of slices of --slice-chips 64 | $P --hardware tpu-v5p --slice-chips 64 --chips 100 --batch-tokens 64k
2 | --slice-chips: '0' is out of range | $P --hardware tpu-v5p --slice-chips 0 --chips 64 --batch-tokens 64k
2 | a slice of tpu-v5p holds 1 to 8960 chips | $P --hardware tpu-v5p --slice-chips 16384 --chips 16384 --batch-tokens 64k
EOF

test_end
