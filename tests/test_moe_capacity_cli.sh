#!/usr/bin/env bash
# test_moe_capacity_cli.sh — capacity instead of dropless through the
# trainer (issue 42 item 1; --moe-capacity cf --moe-drop position|gate;
# docs/moe.md). The kernel's drops are checked against hand tables in
# test_moe_ops.c and the layer's gradients against a float64 reference in
# test_moe_layer.c; here, moe-tiny (E 8, k 2, T 32: C = ⌈(32·2/8)·cf⌉ pairs
# an expert a sequence):
#
#  - cf 0.5 (C 4: at most 8·4 = 32 of a sequence's 64 pairs kept) drops at
#    least half the pairs, which the training line and the JSONL's
#    moe_dropped say, each step;
#  - cf 8 (C 64: nothing can be dropped) trains the dropless run bit for
#    bit, and says 0 dropped;
#  - cf 0.5 on data=2, expert=2, fsdp=2 and 2 microbatches of 2, by
#    position and by gate, trains the one-device run (losses and gradient
#    norms within 1e-5, the dropped share equal): each sequence is its own
#    group, so a split batch drops the same pairs;
#  - a checkpoint written with a capacity holds it in the model's
#    description: resuming without the flag is turned away, `sample` reads
#    the model back with it;
#  - cf out of range and an unknown policy are refused naming the flag;
#  - --moe-renorm off (the gates the selected scores themselves, tested
#    against a float64 reference through Qwen3-MoE's norm_topk_prob false
#    in test_hf_moe.c) trains another run than renormalised gates, the
#    same on expert=2 as on one device, and its checkpoint's description
#    holds it (sample reads it back; a resume without it is refused).
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_moe_capacity_cli.sh "$@"

moe_setup
CAP=(--moe-capacity 0.5)

# moe_dropped of each step of a JSONL, and a check on them
dropped() {
    python3 - "$@" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
lo, hi = float(sys.argv[2]), float(sys.argv[3])
d = [r.get("moe_dropped") for r in rows]
sys.exit(0 if rows and all(x is not None and lo <= x <= hi for x in d) else 1)
PY
}

train_run "moe-tiny dropless" free.jsonl "${TINY[@]}" --steps 4
train_run "moe-tiny, capacity 8" big.jsonl "${TINY[@]}" --steps 4 --moe-capacity 8
python3 - free.jsonl big.jsonl <<'PY' && ok "capacity 8 (C 64) trains the dropless run bit for bit" || bad "capacity 8" "losses differ from dropless"
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"loss"' in l] for f in sys.argv[1:3])
sys.exit(0 if len(a) == len(b) == 4 and all(x["loss"] == y["loss"] and
         x["grad_norm"] == y["grad_norm"] for x, y in zip(a, b)) else 1)
PY
dropped big.jsonl 0 0 && ok "capacity 8: moe_dropped 0 each step" ||
    bad "capacity 8: moe_dropped" "$(head -c 300 big.jsonl)"
grep -q moe_dropped free.jsonl && bad "dropless: no moe_dropped" "it is in the JSONL" ||
    ok "dropless: no moe_dropped in the JSONL"

LOUD=()   # TINY without --quiet: the training line
for a in "${TINY[@]}"; do [ "$a" = --quiet ] || LOUD+=("$a"); done
"$BIN" train "${LOUD[@]}" --steps 2 "${CAP[@]}" >line.txt 2>err.txt &&
    grep -Eq '^step 2/2 .*\| dropped [0-9.]+%' line.txt &&
    ok "the training line shows the dropped share" ||
    bad "the training line" "$(grep step line.txt | tail -1) $(head -2 err.txt)"

for drop in position gate; do
    train_run "cf 0.5 by $drop, one device" one.jsonl "${TINY[@]}" --steps 4 "${CAP[@]}" \
        --moe-drop $drop
    dropped one.jsonl 0.5 1 && ok "cf 0.5 by $drop: at least half the pairs dropped" ||
        bad "cf 0.5 by $drop: moe_dropped" "$(head -c 300 one.jsonl)"
    python3 - free.jsonl one.jsonl <<'PY' && ok "cf 0.5 by $drop: another run than dropless" || bad "cf 0.5 by $drop" "the losses equal dropless: nothing was dropped"
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"loss"' in l] for f in sys.argv[1:3])
sys.exit(0 if a[0]["loss"] != b[0]["loss"] else 1)
PY
    for layout in "--mesh data=2" "--mesh expert=2" "--mesh fsdp=2" "--batch 2 --accum 2"; do
        read -r -a L <<<"$layout"
        train_run "cf 0.5 by $drop, $layout" r.jsonl "${TINY[@]}" --steps 4 "${CAP[@]}" \
            --moe-drop $drop "${L[@]}"
        same_metrics "cf 0.5 by $drop, $layout: losses equal one device's" one.jsonl r.jsonl
        python3 - one.jsonl r.jsonl <<'PY' && ok "cf 0.5 by $drop, $layout: the same share dropped" || bad "cf 0.5 by $drop, $layout: moe_dropped" "differs from one device's"
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"loss"' in l] for f in sys.argv[1:3])
sys.exit(0 if len(a) == len(b) > 0 and all(abs(x["moe_dropped"] - y["moe_dropped"]) < 1e-9
                                          for x, y in zip(a, b)) else 1)
PY
    done
done

# the checkpoint holds the capacity
train_run "cf 0.5, 2 steps, checkpoint" c.jsonl "${TINY[@]}" --steps 2 "${CAP[@]}" \
    --ckpt-out c.ckpt
"$BIN" train "${TINY[@]}" --steps 3 --ckpt-in c.ckpt >out.txt 2>err.txt &&
    bad "resume without --moe-capacity" "was taken" ||
    { grep -q "capacity=0.5" err.txt && ok "resume without the capacity: refused, naming it" ||
      bad "resume without the capacity" "$(head -2 err.txt)"; }
train_run "resumed with it" c2.jsonl "${TINY[@]}" --steps 3 "${CAP[@]}" --ckpt-in c.ckpt
"$BIN" sample --ckpt c.ckpt --tokens 4 --temperature 0 >out.txt 2>err.txt &&
    ok "sample reads the model with its capacity back" ||
    bad "sample --ckpt" "$(head -2 err.txt)"

"$BIN" train "${TINY[@]}" --steps 1 --moe-capacity 100 >out.txt 2>err.txt &&
    bad "--moe-capacity 100" "was taken" ||
    { grep -q -- "moe-capacity" err.txt && ok "--moe-capacity 100: refused naming the flag" ||
      bad "--moe-capacity 100" "$(head -2 err.txt)"; }
"$BIN" train "${TINY[@]}" --steps 1 --moe-capacity 1 --moe-drop random >out.txt 2>err.txt &&
    bad "--moe-drop random" "was taken" ||
    { grep -q -- "moe-drop" err.txt && ok "--moe-drop random: refused naming the flag" ||
      bad "--moe-drop random" "$(head -2 err.txt)"; }

train_run "--moe-renorm off, one device" u1.jsonl "${TINY[@]}" --steps 3 --moe-renorm off \
    --ckpt-out u.ckpt
train_run "--moe-renorm off, expert=2" u2.jsonl "${TINY[@]}" --steps 3 --moe-renorm off \
    --mesh expert=2
same_metrics "--moe-renorm off on expert=2: losses equal one device's" u1.jsonl u2.jsonl
python3 - free.jsonl u1.jsonl <<'PY' && ok "--moe-renorm off: another run than renormalised gates" || bad "--moe-renorm off" "the first loss equals the renormalised run's"
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"loss"' in l] for f in sys.argv[1:3])
sys.exit(0 if a[0]["loss"] != b[0]["loss"] else 1)
PY
"$BIN" train "${TINY[@]}" --steps 4 --ckpt-in u.ckpt >out.txt 2>err.txt &&
    bad "resume without --moe-renorm off" "was taken" ||
    { grep -q "renorm=off" err.txt && ok "resume without --moe-renorm off: refused, naming it" ||
      bad "resume without --moe-renorm off" "$(head -2 err.txt)"; }
"$BIN" sample --ckpt u.ckpt --tokens 4 --temperature 0 >out.txt 2>err.txt &&
    ok "sample reads the unnormalised gates' model back" ||
    bad "sample --ckpt u.ckpt" "$(head -2 err.txt)"

test_end
