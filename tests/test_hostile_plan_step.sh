#!/usr/bin/env bash
# test_hostile_plan_step.sh — `meshtrain plan` must never answer the
# impossible (issues 37 and 40): every layout it ranks has a step no
# shorter than its compute, exposed communication >= 0, and MFU <= 100 %.
# Before, a replica of more than 4 sequences had its times extrapolated
# from its 2- and 4-sequence programs (evaluate.c), past latency floors and
# stream waits that are no straight lines: the small LLaMA of
# test_plan_cli.sh ranked first a 3.54 ms step of 8.23 ms compute
# (exposed -4.7 ms, "233 %"), and a GPT on 32 A100s with collective matmul
# a 143 % MFU. The table's format is tests/hostile.sh's; the after-check
# reads the --json output (every ranked layout, --top 1000).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
test_start test_hostile_plan_step.sh "$@"
# a whole search under ASan takes tens of seconds on a loaded 2-core machine
HOSTILE_TIMEOUT=${HOSTILE_TIMEOUT:-300}
hostile_fixtures
cat >"$WORK/fix/sane.py" <<'PY'
# every layout of a plan's --json: step >= compute, exposed >= 0, MFU <= 1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["best"], "no layout ranked"
for l in d["best"]:
    what = (l["mesh"], l["zero"], l["remat"], l["collective_matmul"], l["microbatches"])
    s, c, e, m = (l["step_seconds"], l["compute_seconds"], l["exposed_comm_seconds"], l["mfu"])
    assert e >= 0, ("exposed communication below 0", what, e)
    assert s >= c * (1 - 1e-9), ("step shorter than its compute", what, s, c)
    assert 0 < m <= 1, ("MFU past 100 %", what, m)
    assert abs(c + e + l["bubble_seconds"] + l["optimizer_seconds"] - s) <= 1e-6 * s, \
        ("step != compute + exposed + bubble + optimizer", what)
print(len(d["best"]), "layouts sane")
PY

# test_plan_cli.sh's small llama, 8 H100, 64k tokens of 512
L="--model llama --channels 256 --layers 8 --heads 8 --kv-heads 4 --ffn-dim 512 --vocab 1024 --max-seq 512 --hardware h100-sxm --chips 8 --seq 512"
# a 4-block GPT of width 4096 on 32 A100, 2M tokens of 2048: the mesh searched
# (fsdp x tensor with collective matmul gave 143 % MFU)
G="--model gpt --layers 4 --channels 4096 --heads 32 --vocab 32000 --max-seq 2048 --hardware a100-80gb --chips 32 --seq 2048"

hostile_cases <<EOF
# exit | stderr fragment | arguments of meshtrain | after
0 | - | plan $L --batch-tokens 64k --top 1000 --json | python3 sane.py out.txt
0 | - | plan $L --batch-tokens 64k --mesh fsdp=2,tensor=4 --remat full --json | python3 sane.py out.txt
0 | - | plan $G --batch-tokens 2M --remat none --zero 0 --sequence-parallel on --top 1000 --json | python3 sane.py out.txt
EOF
test_end
