#!/usr/bin/env bash
# test_fsdp_choices.sh — `--reshard-after-forward on|off` and `--fsdp-gather
# once|microbatch` (issue 39, item 3): what FSDP does with a parameter
# gathered from its shards between a microbatch's forward and its backward,
# and across the microbatches of a step.
#
#   bash tests/test_fsdp_choices.sh <meshtrain binary> [<build dir>]
#
# On fsdp=2 the GPT (L=2) trains the one-device run with auto, on and off
# (every step's loss and gradient norm within 1e-5). explain counts the
# all-gathers in device 0's program: off gathers each of the 28 stored
# parameters once, before the forward; on (auto's choice for fsdp) gathers
# again, in the backward, each one a backward reads: the 4 products'
# weights and 2 layernorm weights of each block, the final layernorm's and
# the tied embedding, 6·L + 2 = 14 more (by hand). off keeps the gathered
# copies, so the trainer's memory line counts more activations, and so do
# plan's layouts. --fsdp-gather once|microbatch on fsdp=2 and ZeRO-3 with 1
# and 4 microbatches, and with --reshard-after-forward off, trains the
# one-device run; once gathers each stored parameter once a step (28 in
# explain's program, marked "once a step"; the trainer's metrics count Ψ
# gathered and Ψ reduce-scattered a step), and its memory line holds the
# whole parameters and gradients. The flags without parameters stored split
# (no mesh, ZeRO-1 and 2 which keep them for the step) are refused, exit 2.
# Every run is under `timeout 120`.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_fsdp_choices.sh "$@"

for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog."; done >text.txt

GPT=(--data text.txt --model gpt --layers 2 --channels 32 --heads 4 --max-seq 16 --seq 16
     --batch 4 --steps 4 --threads 2)


timeout 120 "$BIN" train "${GPT[@]}" --metrics one.jsonl >/dev/null 2>err.txt ||
    bad "one device" "$(head -2 err.txt)"
for mode in auto on off; do
    rm -f f.jsonl
    if timeout 120 "$BIN" train "${GPT[@]}" --mesh fsdp=2 --reshard-after-forward "$mode" \
            --metrics f.jsonl >"out_$mode.txt" 2>err.txt; then
        same_metrics "fsdp=2 --reshard-after-forward $mode equals one device" one.jsonl f.jsonl
    else
        bad "fsdp=2 --reshard-after-forward $mode" "$(head -2 err.txt)"
    fi
done

# --fsdp-gather: fsdp=2 and ZeRO-3 over data=2, 1 and 4 microbatches, the
# one-device run (every microbatch count its own)
timeout 120 "$BIN" train "${GPT[@]}" --accum 4 --metrics one4.jsonl >/dev/null 2>err.txt ||
    bad "one device, 4 microbatches" "$(head -2 err.txt)"
for mesh in "fsdp=2" "data=2 --zero 3"; do
    for when in once microbatch; do
        for accum in 1 4; do
            for raf in auto off; do
                [ "$when" = once ] && [ "$raf" = off ] && continue   # nothing regathered
                ref=one.jsonl; [ "$accum" = 4 ] && ref=one4.jsonl
                name="--mesh $mesh --fsdp-gather $when --accum $accum --reshard-after-forward $raf"
                rm -f f.jsonl
                # shellcheck disable=SC2086
                if timeout 120 "$BIN" train "${GPT[@]}" --mesh $mesh --fsdp-gather "$when" \
                        --accum "$accum" --reshard-after-forward "$raf" --metrics f.jsonl \
                        >"out_g.txt" 2>err.txt; then
                    same_metrics "$name equals one device" "$ref" f.jsonl
                else
                    bad "$name" "$(head -2 err.txt)"
                fi
            done
        done
    done
done
# once: Ψ gathered and Ψ reduce-scattered a step, 4 microbatches or 1 (the
# metrics' elements against the parameter count the header prints)
# Ψ by hand: V·C + T·C + L·(12C² + 13C) + 2C at V=256, T=16, C=32, L=2
psi=$((256 * 32 + 16 * 32 + 2 * (12 * 32 * 32 + 13 * 32) + 2 * 32))
for accum in 1 4; do
    rm -f f.jsonl
    timeout 120 "$BIN" train "${GPT[@]}" --mesh fsdp=2 --fsdp-gather once --accum "$accum" \
        --metrics f.jsonl >out_once.txt 2>err.txt || bad "once, accum $accum" "$(head -2 err.txt)"
    if python3 - f.jsonl "$psi" <<'PY'
import json, sys
psi = int(sys.argv[2])
for l in open(sys.argv[1]):
    r = json.loads(l)
    assert r["param_gather"] == psi and r["grad_scatter"] == psi and r["grad_reduce"] == 0, (r, psi)
PY
    then ok "once, $accum microbatches: $psi gathered and reduce-scattered every step"
    else bad "once, $accum microbatches: the step's collectives" "want $psi each"; fi
done
# its memory line: the whole parameters kept beside the shards (1.5x the
# microbatch gather's, which holds shards only), and with 4 microbatches the
# whole gradients too
mem() { sed -n "s/.*$2 \([0-9.]*\) MiB.*/\1/p" "$1" | head -1; }
timeout 120 "$BIN" train "${GPT[@]}" --mesh fsdp=2 --accum 4 --fsdp-gather microbatch \
    >out_mb.txt 2>err.txt || bad "microbatch, accum 4" "$(head -2 err.txt)"
p_once=$(mem out_once.txt parameters) p_mb=$(mem out_mb.txt parameters)
g_once=$(mem out_once.txt gradients) g_mb=$(mem out_mb.txt gradients)
if awk -v a="$p_once" -v b="$p_mb" -v c="$g_once" -v d="$g_mb" \
        'BEGIN { exit !(a > 2.5 * b && a < 3.5 * b && c > 2.5 * d && c < 3.5 * d) }'; then
    ok "memory: once holds parameters $p_once and gradients $g_once MiB, microbatch $p_mb and $g_mb"
else
    bad "memory" "once: parameters $p_once, gradients $g_once MiB; microbatch $p_mb, $g_mb (want 3x)"
fi

# the all-gathers of device 0's program
EX=(--model gpt --layers 2 --channels 32 --heads 4 --max-seq 16 --seq 16 --batch 4 --mesh fsdp=2)
gathers() { timeout 120 "$BIN" explain "${EX[@]}" "$@" 2>&1 | grep -c ' all_gather '; }
on=$(gathers --reshard-after-forward on)
off=$(gathers --reshard-after-forward off)
auto=$(gathers)
once=$(gathers --fsdp-gather once)
marked=$(timeout 120 "$BIN" explain "${EX[@]}" --fsdp-gather once 2>&1 |
         grep ' all_gather ' | grep -c 'once a step')
if [ "$off" -eq 28 ] && [ "$on" -eq $((28 + 14)) ] && [ "$auto" -eq "$on" ] &&
   [ "$once" -eq 28 ] && [ "$marked" -eq 28 ]; then
    ok "all-gathers: off $off (each stored parameter once), on $on (14 gathered again), auto as on, once $once (each marked once a step)"
else
    bad "all-gathers" "off $off (want 28), on $on (want 42), auto $auto (want on's), once $once and marked $marked (want 28)"
fi

# off keeps the gathered parameters: more activation memory than on
act() { sed -n 's/.*activations \([0-9.]*\) MiB.*/\1/p' "$1" | head -1; }
a_on=$(act out_on.txt) a_off=$(act out_off.txt)
if [ -n "$a_on" ] && [ -n "$a_off" ] && awk -v a="$a_off" -v b="$a_on" 'BEGIN { exit !(a > b) }'; then
    ok "memory: activations $a_off MiB kept off, $a_on MiB on"
else
    bad "memory" "activations off '$a_off' MiB, on '$a_on' MiB (want off > on)"
fi

# plan takes the choice too: on fsdp=2 (a small LLaMA) off holds more
# activation memory than on, by at most the whole model's parameters (the
# gathered copies kept; each device stores half of them), and no more
# exposed communication; auto plans as on; the JSON says the choice only
# when given
M=(--model llama --channels 256 --layers 8 --heads 8 --kv-heads 4 --ffn-dim 512 --vocab 1024
   --max-seq 512)
PLAN=(plan "${M[@]}" --hardware h100-sxm --batch-tokens 64k --seq 512 --zero 0 --remat none
      --sequence-parallel off --chips 2 --mesh fsdp=2 --microbatches 1 --json)
for mode in auto on off; do
    timeout 300 "$BIN" "${PLAN[@]}" --reshard-after-forward "$mode" >"plan_$mode.json" 2>err.txt ||
        bad "plan --reshard-after-forward $mode" "exit $?: $(head -2 err.txt)"
done
if python3 - plan_auto.json plan_on.json plan_off.json <<'PY'
import json, sys
a, on, off = (json.load(open(f)) for f in sys.argv[1:4])
ba, bn, bf = (d["best"][0] for d in (a, on, off))
m_on, m_off = bn["memory_per_device"], bf["memory_per_device"]
extra = m_off["activations"] - m_on["activations"]
assert 0 < extra <= 2 * m_on["parameters"], (extra, m_on["parameters"])
assert bf["exposed_comm_seconds"] <= bn["exposed_comm_seconds"], (bf, bn)
assert ba["memory_per_device"] == m_on and ba["step_seconds"] == bn["step_seconds"], (ba, bn)
assert "reshard_after_forward" not in a and on["reshard_after_forward"] == "on" \
    and off["reshard_after_forward"] == "off"
PY
then ok "plan: off keeps the gathered parameters (more activations, no more exposed comm), auto is on"
else bad "plan --reshard-after-forward" "see above"; fi

# plan --fsdp-gather: at 4 microbatches once holds the whole parameters and
# gradients beside the shards (3x the shards' bytes at fsdp=2, as the
# trainer allocates) and exposes less communication (one gather and one
# reduce-scatter a step, not 2 gathers and a reduce-scatter a microbatch)
for when in microbatch once; do
    timeout 300 "$BIN" "${PLAN[@]}" --microbatches 4 --fsdp-gather "$when" \
        >"plan_$when.json" 2>err.txt || bad "plan --fsdp-gather $when" "exit $?: $(head -2 err.txt)"
done
if python3 - plan_microbatch.json plan_once.json <<'PY'
import json, sys
mb, once = (json.load(open(f)) for f in sys.argv[1:3])
a, b = mb["best"][0], once["best"][0]
ma, mb_ = a["memory_per_device"], b["memory_per_device"]
assert abs(mb_["parameters"] - 3 * ma["parameters"]) <= 0.01 * ma["parameters"], (ma, mb_)
assert abs(mb_["gradients"] - 3 * ma["gradients"]) <= 0.01 * ma["gradients"], (ma, mb_)
assert b["exposed_comm_seconds"] < a["exposed_comm_seconds"], (a, b)
assert once["fsdp_gather"] == "once" and mb["fsdp_gather"] == "microbatch"
PY
then ok "plan --fsdp-gather once: 3x the parameters and gradients of microbatch, less exposed communication"
else bad "plan --fsdp-gather" "see above"; fi

# refusals: nothing stored split
refuse() {
    local name=$1 frag=$2
    shift 2
    timeout 120 "$BIN" "$@" >out.txt 2>err.txt
    local rc=$?
    if [ "$rc" -eq 2 ] && grep -qF -- "$frag" err.txt; then ok "$name"
    else bad "$name" "exit $rc: $(head -c 300 err.txt)"; fi
}
refuse "without a mesh" "without a mesh none is stored split" \
    train "${GPT[@]}" --reshard-after-forward on
refuse "with ZeRO-1" "kept for the whole step" \
    train "${GPT[@]}" --mesh data=2 --zero 1 --reshard-after-forward off
refuse "with ZeRO-2" "kept for the whole step" \
    train "${GPT[@]}" --mesh data=2 --zero 2 --reshard-after-forward on
refuse "reshard with --fsdp-gather once" "kept for the whole step" \
    train "${GPT[@]}" --mesh fsdp=2 --fsdp-gather once --reshard-after-forward on
refuse "--fsdp-gather without a mesh" "without a mesh none is" \
    train "${GPT[@]}" --fsdp-gather once
refuse "--fsdp-gather on data=2" "stores none split" \
    train "${GPT[@]}" --mesh data=2 --fsdp-gather once
refuse "--fsdp-gather microbatch with ZeRO-2" "gather them once a step" \
    train "${GPT[@]}" --mesh data=2 --zero 2 --fsdp-gather microbatch
refuse "explain, on data=2" "stores none split" \
    explain "${EX[@]/fsdp=2/data=2}" --reshard-after-forward on

test_end
