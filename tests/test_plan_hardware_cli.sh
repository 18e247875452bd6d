#!/usr/bin/env bash
# test_plan_hardware_cli.sh — issue 40, item 6, through the command line:
#  - every hardware file and every fabric file is JSON in which every number
#    but the structural counts (a level's devices, a torus's dims) is an
#    object {"value", "source"} with a non-empty source (checked here by
#    python, apart from the reader), and the fabric files are one level each
#    of a kind that joins nodes;
#  - `plan` runs on the new chips and with each fabric, its first line
#    naming the system planned (h100-sxm+ib-hdr) and the 16-bit products the
#    chip runs: fp16 on the V100 (no bf16), bf16 on the H100 PCIe;
#  - 128 v5p chips as 2 slices of 64 (--slice-chips 64) put a data axis of 2
#    on DCN: its exposed communication exceeds the one-slice plan's (ICI).
# The refusals of the flags are rows of tests/test_hostile_plan.sh; the
# figures themselves are tests/test_plan_hardware_files.c's.
#
#   bash tests/test_plan_hardware_cli.sh <meshtrain binary> [<build dir>]
set -u
HW="$(cd "$(dirname "${BASH_SOURCE[0]}")/../hardware" && pwd)"   # before test_start's cd
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_plan_hardware_cli.sh "$@"

if python3 - "$HW" >py.txt 2>&1 <<'PY'
import glob, json, sys
hw = sys.argv[1]
bad = []
def walk(x, path, f):
    if isinstance(x, dict):
        if "value" in x:
            if set(x) != {"value", "source"} or not isinstance(x["source"], str) \
               or not x["source"].strip() or not isinstance(x["value"], (int, float)):
                bad.append("%s: %s is not {value, source}" % (f, path))
            return
        for k, v in x.items():
            walk(v, path + "." + k, f)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            walk(v, "%s[%d]" % (path, i), f)
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        last = path.rsplit(".", 1)[-1]
        if not (last == "devices" or last.startswith("dims[")):
            bad.append("%s: %s = %r has no source" % (f, path, x))
files = sorted(glob.glob(hw + "/*.json"))
fabrics = sorted(glob.glob(hw + "/fabrics/*.json"))
for f in files + fabrics:
    d = json.load(open(f))
    if "sgemm_gflops" in d:   # a machine file: measured, not sourced
        continue
    walk(d, "", f)
for f in fabrics:
    d = json.load(open(f))
    if d.get("format") != "meshtrain-fabric-1" or d["level"]["kind"] not in (
            "infiniband", "ethernet", "omnipath", "dcn"):
        bad.append("%s: not a fabric of a kind that joins nodes" % f)
names = [f.rsplit("/", 1)[1] for f in fabrics]
if names != ["ib-hdr.json", "ib-ndr.json", "opa.json", "roce.json"]:
    bad.append("fabrics shipped: %s" % names)
for n in ("h100-pcie", "h100-96gb"):
    if hw + "/" + n + ".json" not in files:
        bad.append("no %s.json" % n)
print("\n".join(bad) or "%d files, %d fabrics" % (len(files), len(fabrics)))
sys.exit(1 if bad else 0)
PY
then ok "every number of every hardware and fabric file has its source ($(cat py.txt))"
else bad "sources" "$(head -5 py.txt)"; fi

L=(--model llama --channels 256 --layers 8 --heads 8 --kv-heads 4 --ffn-dim 512 --vocab 1024
   --max-seq 512 --seq 512 --batch-tokens 64k --remat none --zero 0 --sequence-parallel off)

# plan_first NAME WANT ARGS...: exit 0 and the first line contains WANT
plan_first() {
    local name=$1 want=$2
    shift 2
    if timeout 300 "$BIN" plan "${L[@]}" "$@" >out.txt 2>err.txt; then
        if head -1 out.txt | grep -qF -- "$want"; then ok "$name"
        else bad "$name" "first line: $(head -1 out.txt)"; fi
    else bad "$name" "exit $?"; fi
}
plan_first "v100-32gb says fp16 products" "on 16 x v100-32gb; 65536 tokens a step (128 sequences of 512), fp16 products" \
    --hardware v100-32gb --chips 16 --mesh data=2,tensor=8
plan_first "h100-pcie plans, bf16 products" "on 16 x h100-pcie; 65536 tokens a step (128 sequences of 512), bf16 products" \
    --hardware h100-pcie --chips 16 --mesh data=2,tensor=8
plan_first "h100-96gb plans" "on 16 x h100-96gb;" --hardware h100-96gb --chips 16 --mesh data=2,tensor=8
for f in ib-hdr ib-ndr opa roce; do
    plan_first "--fabric $f names the system planned" "on 16 x h100-sxm+$f;" \
        --hardware h100-sxm --fabric "$f" --chips 16 --mesh data=2,tensor=8
done
plan_first "--fabric takes a path" "on 16 x a100-80gb+ib-ndr;" \
    --hardware a100-80gb --fabric "$HW/fabrics/ib-ndr.json" --chips 16 --mesh data=2,tensor=8

# exposed communication of the v5p plan of data=2,fsdp=64, with FLAGS
exposed() {
    timeout 300 "$BIN" plan "${L[@]}" --hardware tpu-v5p --chips 128 --mesh data=2,fsdp=64 \
        --json "$@" >plan.json 2>err.txt &&
        python3 -c 'import json,sys; print(json.load(open("plan.json"))["best"][0]["exposed_comm_seconds"])'
}
one=$(exposed) two=$(exposed --slice-chips 64)
if [ -n "$one" ] && [ -n "$two" ] && python3 -c "import sys; sys.exit(0 if $two > $one else 1)"; then
    ok "--slice-chips 64: data=2 over DCN exposes ${two} s, over one slice's ICI ${one} s"
else bad "--slice-chips 64 moves data=2 to DCN" "one slice '$one', two slices '$two'"; fi

test_end
