#!/usr/bin/env bash
# test_explain_scale.sh — `meshtrain explain --model` on the shape-only
# backend (backend.h): GPT-3 175B on 1,024 devices (data=8, tensor=8,
# pipe=16) prints in under 30 s with under 1 GiB of peak memory
# (/usr/bin/time -v), and each pipeline stage's parameter, gradient and
# optimizer bytes per device are the hand count below (from the GPT-2
# layout, independent of the code); on small configurations the shape-only
# output is byte for byte the real compile's (MT_EXPLAIN_BACKEND=cpu).
#
#   bash tests/test_explain_scale.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_explain_scale.sh "$@"

# ---- GPT-3 175B, 1,024 devices ---------------------------------------------
L=96 C=12288 NH=96 MAXT=2048 V=51200
BIG=(--model gpt --layers $L --channels $C --heads $NH --max-seq $MAXT --vocab $V
     --devices 1024 --mesh data=8,tensor=8,pipe=16 --json)
if [ ! -x /usr/bin/time ]; then
    bad "175B: /usr/bin/time" "is missing; install the Debian package 'time' (make deps)"
else
    /usr/bin/time -v "$BIN" explain "${BIG[@]}" >big.json 2>time.txt
    rc=$?
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' time.txt)
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' time.txt)
    echo "#     175B explain: wall $wall, peak RSS ${rss} kB"
    secs=$(python3 -c "import sys; p=sys.argv[1].split(':'); print(sum(float(x)*60**i for i,x in enumerate(reversed(p))))" "$wall")
    if [ "$rc" -ne 0 ]; then bad "175B: exit" "exit $rc: $(grep -v '^	' time.txt | head -3)"
    else ok "175B: exit 0"; fi
    python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < 30 else 1)" "$secs" \
        && ok "175B: under 30 s ($secs s)" || bad "175B: wall" "$secs s, want under 30"
    [ "${rss:-9999999}" -lt $((1 << 20)) ] && ok "175B: under 1 GiB peak ($rss kB)" \
        || bad "175B: peak RSS" "$rss kB, want under 1048576"
    # The hand count, per device, in f32 (4 bytes), tensor=8 splitting what
    # Megatron splits, data=8 replicating (no ZeRO), pipe=16 cutting the 96
    # blocks into 16 stages of 6 (1f1b: one chunk a device):
    #   a block: ln_1, ln_2 (w, b: 4C, whole), qkv (3C·C + 3C, split),
    #   attention projection (C·C split, bias C whole), MLP fc (4C·C + 4C,
    #   split), MLP projection (C·4C split, bias C whole);
    #   stage 0 also the token embedding wte (V·C, vocabulary split) and the
    #   positions wpe (maxT·C, whole); stage 15 the head's tied copy of wte
    #   (split) and ln_f (2C, whole).
    if python3 - "$L" "$C" "$MAXT" "$V" >check.txt 2>&1 <<'PY'
import json, sys
L, C, T, V = map(int, sys.argv[1:])
tp, pp = 8, 16
Vp = (V + 63) // 64 * 64
block = 4 * C + (3 * C * C + 3 * C) // tp + C * C // tp + C + (4 * C * C + 4 * C) // tp \
        + 4 * C * C // tp + C
want = {}
for s in range(pp):
    n = (L // pp) * block
    if s == 0: n += Vp * C // tp + T * C
    if s == pp - 1: n += Vp * C // tp + 2 * C
    want[s] = 4 * n
d = json.load(open("big.json"))
bad = []
for st in d["stages"]:
    s = st["stage"]
    for key, mult in (("parameters", 1), ("gradients", 1), ("optimizer", 2)):
        if st[key] != mult * want[s]:
            bad.append("stage %d %s: %d, hand count %d" % (s, key, st[key], mult * want[s]))
m = d["memory_per_device"]
if (m["parameters"], m["gradients"], m["optimizer"]) != (want[0], want[0], 2 * want[0]):
    bad.append("memory_per_device %s, want stage 0's %d" % (m, want[0]))
if len(d["stages"]) != pp: bad.append("%d stages, want %d" % (len(d["stages"]), pp))
if not d["spmd"]: bad.append("spmd false")
if len(d["devices"]) != 1024: bad.append("%d devices" % len(d["devices"]))
print("; ".join(bad) if bad else "stage 0 %d, stage 1 %d, stage 15 %d bytes" % (want[0], want[1], want[15]))
sys.exit(1 if bad else 0)
PY
    then ok "175B: bytes per device are the hand count ($(cat check.txt))"
    else bad "175B: bytes per device" "$(cat check.txt)"; fi
fi

# ---- small: shape-only is the real compile ----------------------------------
G=(--model gpt --layers 4 --channels 32 --heads 4 --vocab 100 --batch 4 --seq 8)
same() {
    local name=$1
    shift
    timeout 120 "$BIN" explain "$@" --json >shape.json 2>shape.err
    local a=$?
    MT_EXPLAIN_BACKEND=cpu timeout 120 "$BIN" explain "$@" --json >cpu.json 2>cpu.err
    local b=$?
    if [ "$a" -ne 0 ] || [ "$b" -ne 0 ]; then
        bad "$name" "exit $a (shape-only), $b (cpu): $(cat shape.err cpu.err | head -2)"
    elif ! cmp -s shape.json cpu.json; then
        bad "$name" "shape-only and cpu differ: $(diff shape.json cpu.json | head -4)"
    else
        ok "$name"
    fi
}
same "small: one device" "${G[@]}"
same "small: data=2,tensor=2" "${G[@]}" --mesh data=2,tensor=2
same "small: fsdp=2,tensor=2" "${G[@]}" --mesh fsdp=2,tensor=2
same "small: ZeRO-3 on data=4" "${G[@]}" --mesh data=4 --zero 3
same "small: remat full, data=2" "${G[@]}" --mesh data=2 --remat full
same "small: data=2,tensor=2,pipe=2 (one microbatch a stage)" "${G[@]}" --mesh data=2,tensor=2,pipe=2
same "small: pipe=2 zb-v (two chunks a device)" "${G[@]}" --mesh pipe=2 --schedule zb-v --microbatches 4
same "small: mlp on tensor=2" --model mlp --mesh data=2,tensor=2

# a pipe axis without --microbatches: one per stage, and every stage listed
if timeout 60 "$BIN" explain "${G[@]}" --mesh pipe=4 --json >p.json 2>p.err &&
   python3 -c "import json; d=json.load(open('p.json')); assert [s['stage'] for s in d['stages']]==[0,1,2,3] and d['spmd']"; then
    ok "pipe=4 without --microbatches: four stages"
else
    bad "pipe=4 without --microbatches" "$(head -2 p.err)"
fi
MT_EXPLAIN_BACKEND=gpu "$BIN" explain "${G[@]}" >/dev/null 2>err.txt
rc=$?
[ "$rc" -eq 1 ] && grep -q "no backend named 'gpu'; the backends are cpu, shape-only" err.txt \
    && ok "an unknown MT_EXPLAIN_BACKEND" || bad "an unknown MT_EXPLAIN_BACKEND" "exit $rc: $(cat err.txt)"

test_end
