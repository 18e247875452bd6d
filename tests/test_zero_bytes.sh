#!/usr/bin/env bash
# test_zero_bytes.sh — ZeRO-1 and ZeRO-2 as the ZeRO paper defines them
# (issue 39, item 2): the parameters kept whole for the step, the gradients
# reduced once a step onto the shard, the optimizer on the shard, one
# all-gather of the parameters a step. The collectives a step moves,
# against the paper's closed forms (§7), exactly, per device:
#
#   data parallel   all-reduce Ψ            2Ψ  (an all-reduce counts 2)
#   ZeRO-1, ZeRO-2  all-gather Ψ + reduce-scatter Ψ                   2Ψ
#   ZeRO-3          m (Ψ + Ψ_B) gathered + m Ψ reduce-scattered, m microbatches
#                   (Ψ_B: the parameters a backward reads, gathered again;
#                   the biases are not: the paper's 3Ψ less them, a microbatch)
#   ZeRO-3, --reshard-after-forward off      m Ψ + m Ψ
#   ZeRO-3, --fsdp-gather once               Ψ + Ψ                    2Ψ
#
# with 1 and 4 microbatches (and under remat policies, and in pipelines
# whose every stage moves its own Ψ so), in f32 (4 bytes an element) and with bf16
# products and gradient reductions (--precision bf16 --grad-reduce bf16:
# the gradients 2 bytes an element; a gather 2 where only bf16 products
# read the parameter, the products' weights, else 4). Ψ and Ψ_B are counted
# by hand from the GPT's shapes (V=256, T=16, C=32, L=2, the embedding
# tied):
#   Ψ   = V·C + T·C + L·(12C² + 13C) + 2C                = 34176
#   Ψ_B = V·C + L·(12C² + 2C) + C   (weights, ln weights) = 32928
#   Ψ16 = L·12C²  (q,k,v, proj, fc, proj weights)         = 24576
# Every run trains the one-device run (losses and gradient norms within
# 1e-5 at every step; with bf16 reductions data parallelism's with them,
# which is the one device's within 5e-3), and so does LLaMA GQA under
# ZeRO-1 and ZeRO-2; the
# memory holds the whole parameters (and ZeRO-1's whole gradients) beside
# the shards, and the optimizer state of the shards; explain's step moves
# the trainer's bytes.
# Every run is under `timeout 120`.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_zero_bytes.sh "$@"

for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog."; done >text.txt

GPT=(--data text.txt --model gpt --layers 2 --channels 32 --heads 4 --max-seq 16 --seq 16
     --batch 4 --steps 3 --threads 2)
V=256 T=16 C=32 L=2
PSI=$((V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C))
PSI_B=$((V * C + L * (12 * C * C + 2 * C) + C))
PSI16=$((L * 12 * C * C))

for m in 1 4; do
    timeout 120 "$BIN" train "${GPT[@]}" --accum "$m" --metrics "one$m.jsonl" >/dev/null 2>err.txt ||
        bad "one device, $m microbatches" "$(head -2 err.txt)"
    timeout 120 "$BIN" train "${GPT[@]}" --accum "$m" --precision bf16 --metrics "one16_$m.jsonl" \
        >/dev/null 2>err.txt || bad "one device bf16, $m microbatches" "$(head -2 err.txt)"
done

# run NAME M WANT_GATHER WANT_SCATTER WANT_REDUCE GATHER_BYTES GRAD_BYTES_PER_ELEM -- FLAGS...
run() {
    local name=$1 m=$2 g=$3 s=$4 r=$5 gb=$6 eb=$7
    shift 8
    # bf16 gradient reductions round what they sum: the reference is data
    # parallelism's run with them (itself the one device's within bf16)
    local ref="one$m.jsonl" what="one device"
    [[ " $* " == *" bf16 "* ]] && ref="dp16_$m.jsonl" what="data parallel with bf16 reductions"
    rm -f z.jsonl
    if ! timeout 120 "$BIN" train "${GPT[@]}" --accum "$m" "$@" --metrics z.jsonl >z.txt 2>err.txt; then
        bad "$name, $m microbatches" "$(head -2 err.txt)"
        return
    fi
    if [ -e "$ref" ]; then same_metrics "$name, $m microbatches, equals $what" "$ref" z.jsonl
    else cp z.jsonl "$ref"; fi
    if python3 - z.jsonl "$g" "$s" "$r" "$gb" "$eb" "$PSI" <<'PY'
import json, sys
g, s, r, gb, eb, psi = (float(x) for x in sys.argv[2:8])
for line in open(sys.argv[1]):
    x = json.loads(line)
    got = (x["param_gather"], x["grad_scatter"], x["grad_reduce"])
    assert got == (g, s, r), ("step", x["step"], "elements", got, "want", (g, s, r))
    assert x["param_gather_bytes"] == gb, ("gather bytes", x["param_gather_bytes"], gb)
    assert x["grad_scatter_bytes"] == eb * s and x["grad_reduce_bytes"] == eb * r, x
    assert x["psi"] == psi, (x["psi"], psi)
PY
    then ok "$name, $m microbatches: gathered $g, reduce-scattered $s, all-reduced $r elements ($(awk -v a="$g" -v b="$s" -v c="$r" -v p="$PSI" 'BEGIN { printf "%.3g", (a + b + 2 * c) / p }') psi) every step"
    else bad "$name, $m microbatches: the step's collectives" "see above"; fi
}

for m in 1 4; do
    run "data parallel" "$m" 0 0 "$PSI" 0 4 -- --mesh data=2
    run "ZeRO-1" "$m" "$PSI" "$PSI" 0 $((4 * PSI)) 4 -- --mesh data=2 --zero 1
    run "ZeRO-2" "$m" "$PSI" "$PSI" 0 $((4 * PSI)) 4 -- --mesh data=2 --zero 2
    run "ZeRO-3" "$m" $((m * (PSI + PSI_B))) $((m * PSI)) 0 $((4 * m * (PSI + PSI_B))) 4 -- \
        --mesh data=2 --zero 3
    run "ZeRO-3 --reshard-after-forward off" "$m" $((m * PSI)) $((m * PSI)) 0 $((4 * m * PSI)) 4 -- \
        --mesh data=2 --zero 3 --reshard-after-forward off
    run "ZeRO-3 --fsdp-gather once" "$m" "$PSI" "$PSI" 0 $((4 * PSI)) 4 -- \
        --mesh data=2 --zero 3 --fsdp-gather once
    # bf16: the products' weights gathered as bf16, the rest f32; gradients
    # reduced in bf16 (data parallel's run first: the others' reference)
    run "data parallel bf16" "$m" 0 0 "$PSI" 0 2 -- --mesh data=2 --precision bf16 --grad-reduce bf16
    python3 - "one16_$m.jsonl" "dp16_$m.jsonl" <<'PY' && ok "data parallel bf16, $m microbatches: one device's within bf16 reductions (5e-3)" || bad "data parallel bf16, $m microbatches" "past 5e-3 of one device"
import json, sys
a, b = ([json.loads(l) for l in open(f)] for f in sys.argv[1:3])
assert len(a) == len(b) > 0
for x, y in zip(a, b):
    for k in ("loss", "grad_norm"):
        assert abs(x[k] - y[k]) <= 5e-3 * abs(x[k]), (k, x[k], y[k])
PY
    run "ZeRO-1 bf16" "$m" "$PSI" "$PSI" 0 $((2 * PSI16 + 4 * (PSI - PSI16))) 2 -- \
        --mesh data=2 --zero 1 --precision bf16 --grad-reduce bf16
    run "ZeRO-2 bf16" "$m" "$PSI" "$PSI" 0 $((2 * PSI16 + 4 * (PSI - PSI16))) 2 -- \
        --mesh data=2 --zero 2 --precision bf16 --grad-reduce bf16
done
# under a remat policy (W's reductions run beside B): still once a step
run "data parallel, remat full" 4 0 0 "$PSI" 0 4 -- --mesh data=2 --remat full
run "ZeRO-1, remat full" 4 "$PSI" "$PSI" 0 $((4 * PSI)) 4 -- --mesh data=2 --zero 1 --remat full
run "ZeRO-3 --fsdp-gather once, remat attention" 4 "$PSI" "$PSI" 0 $((4 * PSI)) 4 -- \
    --mesh data=2 --zero 3 --fsdp-gather once --remat attention

# pipelines (pipe=2,data=2, L=4, 4 microbatches): each stage gathers and
# reduce-scatters its own parameters once a step, under every schedule kind
# that splits or keeps the backward whole, the one-device run
P=(--data text.txt --model gpt --layers 4 --channels 32 --heads 4 --max-seq 16 --seq 16
   --batch 4 --steps 3 --threads 2 --accum 4)
timeout 120 "$BIN" train "${P[@]}" --metrics p1.jsonl >/dev/null 2>err.txt ||
    bad "L=4 one device" "$(head -2 err.txt)"
for row in "1f1b --zero 1" "zb-h1 --zero 2" "interleaved --zero 1" "dualpipev --zero 3 --fsdp-gather once"; do
    rm -f pz.jsonl
    # shellcheck disable=SC2086
    if timeout 120 "$BIN" train "${P[@]}" --mesh pipe=2,data=2 --schedule $row --metrics pz.jsonl \
            >/dev/null 2>err.txt; then
        same_metrics "pipe=2,data=2 --schedule $row equals one device" p1.jsonl pz.jsonl
        python3 - pz.jsonl <<'PY' && ok "pipe=2,data=2 --schedule $row: its stage's Ψ gathered and reduce-scattered once a step" || bad "pipe=2,data=2 --schedule $row: the step's collectives" "want psi each"
import json, sys
for line in open(sys.argv[1]):
    x = json.loads(line)
    assert x["param_gather"] == x["grad_scatter"] == x["psi"] > 0 and x["grad_reduce"] == 0, x
PY
    else
        bad "pipe=2,data=2 --schedule $row" "$(head -2 err.txt)"
    fi
done

# memory, exactly (explain's bytes, which the planner's tests hold equal to
# the trainer's allocator): ZeRO-1 holds the whole parameters and gradients
# beside their shards (4Ψ + 4Ψ/2 bytes each at data=2), ZeRO-2 at one
# microbatch the gradient's shard only (4Ψ/2) and over 4 its whole gradient
# too; AdamW's m and v on the shard (2 · 4Ψ/2)
EX=(explain --model gpt --layers 2 --channels 32 --heads 4 --max-seq 16 --seq 16 --batch 4
    --mesh data=2 --json)
for want in "1 1 $((6 * PSI)) $((6 * PSI))" "2 1 $((6 * PSI)) $((2 * PSI))" \
            "2 4 $((6 * PSI)) $((6 * PSI))"; do
    read -r z m p g <<<"$want"
    timeout 120 "$BIN" "${EX[@]}" --zero "$z" --microbatches "$m" >ex.json 2>err.txt ||
        bad "explain zero=$z" "$(head -2 err.txt)"
    if python3 - ex.json "$p" "$g" "$((4 * PSI))" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["memory_per_device"]
p, g, o = (int(x) for x in sys.argv[2:5])
assert (m["parameters"], m["gradients"], m["optimizer"]) == (p, g, o), (m, p, g, o)
PY
    then ok "memory: ZeRO-$z, $m microbatches: parameters $p, gradients $g, optimizer $((4 * PSI)) bytes"
    else bad "memory: ZeRO-$z, $m microbatches" "want parameters $p, gradients $g, optimizer $((4 * PSI))"; fi
done

# explain's step is the trainer's: its communication per step (each
# collective once a step or once a microbatch) is the bytes device 0's
# collectives moved in a trained step (--metrics comm_bytes), exactly
for row in "1|--zero 1" "4|--zero 1" "4|--zero 2" "1|--zero 3" "4|--zero 3" \
           "4|--zero 3 --fsdp-gather once" "4|--zero 3 --reshard-after-forward off" "4|--zero 0"; do
    m=${row%%|*} flags=${row#*|}
    rm -f t.jsonl
    # shellcheck disable=SC2086
    timeout 120 "$BIN" train "${GPT[@]}" --mesh data=2 --accum "$m" $flags --metrics t.jsonl \
        >/dev/null 2>err.txt || bad "train $flags, $m microbatches" "$(head -2 err.txt)"
    # shellcheck disable=SC2086
    timeout 120 "$BIN" "${EX[@]}" --microbatches "$m" $flags >ex.json 2>err.txt ||
        bad "explain $flags, $m microbatches" "$(head -2 err.txt)"
    if python3 - t.jsonl ex.json <<'PY'
import json, sys
t = [json.loads(l) for l in open(sys.argv[1])][-1]
e = json.load(open(sys.argv[2]))["communication_per_step"]
assert t["comm_bytes"] == e["bytes"], (t["comm_bytes"], e)
PY
    then ok "explain $flags, $m microbatches: a step's bytes are the trainer's"
    else bad "explain $flags, $m microbatches: a step's bytes" "explain and the trainer differ"; fi
done

# LLaMA (GQA 4/2) under ZeRO-1 and ZeRO-2, 4 microbatches: the one-device run
LL=(--data text.txt --model llama --layers 2 --channels 32 --heads 4 --kv-heads 2 --max-seq 16
    --seq 16 --batch 4 --steps 3 --threads 2 --accum 4)
timeout 120 "$BIN" train "${LL[@]}" --metrics l1.jsonl >/dev/null 2>err.txt ||
    bad "llama one device" "$(head -2 err.txt)"
for z in 1 2; do
    rm -f lz.jsonl
    if timeout 120 "$BIN" train "${LL[@]}" --mesh data=2 --zero "$z" --metrics lz.jsonl \
            >/dev/null 2>err.txt; then
        same_metrics "llama ZeRO-$z, 4 microbatches, equals one device" l1.jsonl lz.jsonl
    else
        bad "llama ZeRO-$z" "$(head -2 err.txt)"
    fi
done

test_end
