#!/usr/bin/env bash
# test_strategy_flags.sh — the strategy flags, declared once
# (src/cli/strategy_flags.c) for `train`, `explain --model` and `plan`
# (issue 38).
#
#   bash tests/test_strategy_flags.sh <meshtrain binary> [<build dir>]
#
#  - each command's --help lists the flags it reads with the one help text
#    (written out here), plan's searched ones with "auto" as their default;
#    --collective-matmul is every command's, --chunks train's and plan's;
#  - plan's values reach the request: every setting fixed on one mesh is
#    one layout, with those settings; sequence parallelism on is two
#    (collective matmul off and on), one with --collective-matmul given;
#  - --collective-matmul without --sequence-parallel, auto included, is
#    refused by train and explain alike, in one message.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_strategy_flags.sh "$@"

"$BIN" train --help >train.txt 2>err.txt
"$BIN" explain --model gpt --help >explain.txt 2>>err.txt
"$BIN" plan --help >plan.txt 2>>err.txt

# has CMD FLAG TEXT: CMD's help line of --FLAG contains TEXT
has() {
    local cmd=$1 flag=$2 text=$3
    if grep -E -- "^  --$flag( |$)" "$cmd.txt" | grep -qF -- "$text"; then ok "$cmd --$flag: $text"
    else bad "$cmd --$flag" "no '$text' in: $(grep -E -- "^  --$flag( |$)" "$cmd.txt")"; fi
}
# lacks CMD FLAG: CMD has no --FLAG
lacks() {
    if grep -qE -- "^  --$2( |$)" "$1.txt"; then bad "$1 --$2" "listed"; else ok "$1 has no --$2"; fi
}

for cmd in train explain plan; do
    has $cmd zero "ZeRO stage over the data axis: 1 optimizer state split, 2 and gradients, 3 and parameters"
    has $cmd rules "the strategy as rules from the model's logical axes to mesh axes, e.g. 'mlp=tensor,heads=tensor,embed=fsdp'"
    has $cmd sequence-parallel "sequence parallelism over the tensor axis (gpt, llama)"
    has $cmd schedule "pipeline schedule over the pipe axis"
    has $cmd microbatches "microbatches per step"
    has $cmd remat "activation checkpointing, per transformer block: full keeps only the block's input"
done
for cmd in train explain plan; do
    has $cmd collective-matmul "with --sequence-parallel: its collectives inside the matmuls"
done
for cmd in train explain; do
    has $cmd schedule ": gpipe|1f1b|interleaved|zb-h1|zb-h2|zb-v|dualpipev (default 1f1b)"
    has $cmd zero "0..3, default 0"
    has $cmd remat "none|full|attention|dots, default none"
done
has train chunks "model chunks per device"
has plan chunks "model chunks per device (interleaved; zb-v and dualpipev use 2); only the schedules that run N are planned"
lacks explain chunks
has plan collective-matmul "every layout with sequence parallelism is planned so (auto: both); auto|on|off, default auto"
has plan zero "(auto: every stage); auto|0|1|2|3, default auto"
has plan remat "(auto: every policy); auto|none|full|attention|dots, default auto"
has plan sequence-parallel "(auto: both); auto|on|off, default auto"
has plan schedule "(auto: every kind but zb-h2); auto|gpipe|1f1b|interleaved|zb-h1|zb-h2|zb-v|dualpipev, default auto"
has plan microbatches "(default: powers of two, p times them on a pipeline of p stages, and the counts that give each replica a power-of-two microbatch); 1..16777216"

# ---- plan: the flags' values in the request ----------------------------------
M=(--model llama --channels 64 --layers 4 --heads 4 --kv-heads 2 --ffn-dim 128 --vocab 256
   --max-seq 128 --hardware h100-sxm --batch-tokens 4k --seq 128 --json)
# layouts FILE WANT...: evaluated is the count, every layout (best and
# infeasible) has the key=value pairs given (JSON values)
layouts() {
    python3 - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
n, pairs = int(sys.argv[2]), [a.split("=", 1) for a in sys.argv[3:]]
rows = d["best"] + d["infeasible"]
assert d["evaluated"] == n == len(rows), (d["evaluated"], n, len(rows))
for r in rows:
    for k, v in pairs:
        assert r[k] == json.loads(v), (k, r[k], v)
PY
}
if timeout 300 "$BIN" plan "${M[@]}" --chips 4 --mesh pipe=2,tensor=2 --zero 0 --remat full \
        --sequence-parallel off --schedule gpipe --microbatches 2 >one.json 2>err.txt &&
    layouts one.json 1 zero=0 remat='"full"' sequence_parallel=false schedule='"gpipe"' \
        microbatches=2 2>py.txt; then
    ok "plan: every setting given, one layout with them"
else
    bad "plan: every setting given" "$(cat py.txt 2>/dev/null)"
fi
if timeout 300 "$BIN" plan "${M[@]}" --chips 4 --mesh data=2,tensor=2 --zero 2 --remat dots \
        --sequence-parallel on --microbatches 1 >sp.json 2>err.txt &&
    layouts sp.json 2 zero=2 remat='"dots"' sequence_parallel=true microbatches=1 2>py.txt; then
    ok "plan: --sequence-parallel on, collective matmul off and on"
else
    bad "plan: --sequence-parallel on" "$(cat py.txt 2>/dev/null)"
fi
if timeout 300 "$BIN" plan "${M[@]}" --chips 4 --mesh pipe=2,tensor=2 --zero 0 --remat full \
        --sequence-parallel on --collective-matmul off --schedule interleaved --chunks 2 \
        --microbatches 2 >cm.json 2>err.txt &&
    layouts cm.json 1 sequence_parallel=true collective_matmul=false schedule='"interleaved"' \
        chunks=2 microbatches=2 2>py.txt; then
    ok "plan: --collective-matmul off and --chunks 2, one layout with them"
else
    bad "plan: --collective-matmul off, --chunks 2" "$(cat py.txt 2>/dev/null)"
fi

# ---- the same refusal from train and explain ----------------------------------
for i in $(seq 1 50); do echo "the quick brown fox $i jumps over the lazy dog."; done >text.txt
CM="--collective-matmul moves the collectives of sequence parallelism into the matmuls"
expect_fail "train: --collective-matmul auto without sp" 2 "$CM" \
    "$BIN" train --data text.txt --layers 1 --channels 16 --heads 2 --steps 1 --mesh tensor=2 \
    --collective-matmul auto
expect_fail "explain: --collective-matmul auto without sp" 2 "$CM" \
    "$BIN" explain --model gpt --layers 1 --channels 16 --heads 2 --mesh tensor=2 \
    --collective-matmul auto

test_end
