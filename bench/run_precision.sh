#!/usr/bin/env bash
# run_precision.sh — issue 12's table: fp32 against bf16 and remat none
# against full, one GPT training step each, meshtrain (bench_gpt with
# MT_BENCH_PRECISION and MT_BENCH_REMAT) and PyTorch (gpt_torch.py with
# TORCH_PRECISION=bf16: torch.autocast("cpu", bfloat16), TORCH_REMAT=full:
# torch.utils.checkpoint per block) in one table, all in one run. First the
# product rates of this machine: one 2048^3 matmul through the engine in f32
# and bf16 beside sgemm, on 1 and 2 threads.
#
#   bash bench/run_precision.sh [BUILD_DIR] [CONFIGS [THREADS [STEPS]]]
#   (CONFIGS: space-separated bench_gpt configs, default "gpt2 v50k"; the
#   remat rows run for gpt2)
#
# FLOPs and the floor. A step is mt_gpt_train_flops (6·params·tokens plus
# attention, as bench_gpt counts it): GPT-2 small (124M with the Vp=50304
# embedding, B=1, T=1024) is about 0.88 TFLOP; the V=50257 GPT (L4 C256, B4
# T64) about 0.025 TFLOP, 80% of it in the tied LM head. The floor of a step
# is its FLOPs over the product rate of its precision: the matmul rows give
# both. remat full adds the blocks' forward again (+24% of gpt2's FLOPs).
#
# MFU: the model's FLOPs per second over the measured product rate of the
# row's precision on THREADS threads (sgemm for fp32, the engine's bf16
# product for bf16). Activation memory: the planned arena (activations,
# saved statistics, activation gradients). Targets (issue 12): bf16 >= 1.6x
# the fp32 step on gpt2, >= 1.4x on v50k; remat full on gpt2: activation
# memory <= 1/3 of none, step <= 1.4x. A shared machine is noisy: compare the
# rows of one run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build}
CONFIGS=${2:-gpt2 v50k}
THREADS=${3:-2}
STEPS=${4:-}
source bench/blas_env.sh

OUT=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-precision.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
PY=/usr/bin/python3
have_torch=0
"$PY" -c 'import torch' 2>/dev/null && have_torch=1

# The cores' own roofs: fp32 FMAs and bf16 dot products (VDPBF16PS) on
# registers. Their ratio is the most bf16 products can gain on this CPU
# (2 where the bf16 dot issues on two ports, as on AMD Zen 4/5; 1 or less
# where it does not).
echo "== the cores' peaks: meshtrain bench machine --quick"
"$BUILD/meshtrain" bench machine --quick --out "$OUT/machine.json" | grep -E "^(machine|FMA peak|bf16 dot)"
echo
echo "== product rates: meshtrain bench matmul --m 2048 --n 2048 --k 2048 --bf16"
for t in 1 "$THREADS"; do
    "$BUILD/meshtrain" bench matmul --m 2048 --n 2048 --k 2048 --threads "$t" --bf16 \
        --machine "$OUT/machine.json" | tee "$OUT/matmul-$t.txt" | grep -Ev "^(intensity|machine file|  sgemm peak|  roofline)"
done
# GFLOP/s: sgemm's line ends with it; bf16's stands before "(0.58x the f32 engine)"
SGEMM=$(awk '/Open BLAS cblas_sgemm/ { print $NF; exit }' "$OUT/matmul-$THREADS.txt")
BF16=$(awk '/meshtrain bf16/ { for (i = 1; i <= NF; i++) if ($i ~ /^\([0-9.]+x$/) { print $(i - 1); exit } }' \
       "$OUT/matmul-$THREADS.txt")
echo "rates on $THREADS threads: sgemm ${SGEMM:-?} GFLOP/s, engine bf16 ${BF16:-?} GFLOP/s"
echo

for cfg in $CONFIGS; do
    combos="fp32/none bf16/none"
    [ "$cfg" = gpt2 ] && combos="$combos fp32/full bf16/full"
    for c in $combos; do
        p=${c%/*} r=${c#*/}
        echo "== meshtrain $cfg $p remat $r ($BUILD/bench_gpt $cfg $THREADS $STEPS)"
        MT_BENCH_PRECISION=$p MT_BENCH_REMAT=$r "$BUILD/bench_gpt" "$cfg" "$THREADS" $STEPS \
            | tee -a "$OUT/all.txt"
        if [ $have_torch = 1 ]; then
            echo "== PyTorch $cfg $p remat $r"
            TORCH_PRECISION=$p TORCH_REMAT=$r OMP_WAIT_POLICY=passive "$PY" bench/gpt_torch.py \
                "$cfg" "$THREADS" $STEPS | tee -a "$OUT/all.txt"
        fi
    done
done
[ $have_torch = 1 ] || echo "== PyTorch: $PY cannot import torch (apt-get install python3-torch); its columns stay empty"

echo
awk -v sgemm="${SGEMM:-0}" -v bf16="${BF16:-0}" '
    function field(line, key,   n, i, kv, parts) {
        n = split(line, parts, " ")
        for (i = 2; i <= n; i++) { split(parts[i], kv, "="); if (kv[1] == key) return kv[2] }
        return ""
    }
    /^RESULT / {
        cfg = field($0, "config"); k = cfg " " field($0, "precision") " " field($0, "remat")
        if (!(k in seen)) { seen[k] = 1; order[++n] = k }
        if (field($0, "impl") == "meshtrain") {
            mt[k] = field($0, "ms"); gf[k] = field($0, "gflops"); act[k] = field($0, "arena_mib")
            act32[k] = field($0, "arena_f32_mib")
        } else th[k] = field($0, "ms")
    }
    function ms(a, k) { return (k in a) ? sprintf("%.1f", a[k]) : "-" }
    function x(a, k, base) { return (k in a) && (base in a) && a[k] > 0 ? sprintf("%.2fx", a[base] / a[k]) : "-" }
    END {
        printf "%-6s %-4s %-5s | %10s %8s %6s %9s %9s %6s | %10s %8s\n", "config", "prec", "remat",
               "mt ms", "speed", "MFU", "act MiB", "f32 act", "act", "pt ms", "speed"
        for (i = 1; i <= n; i++) {
            k = order[i]; split(k, c, " "); base = c[1] " fp32 none"
            peak = c[2] == "bf16" ? bf16 : sgemm
            mfu = (k in gf) && peak > 0 ? sprintf("%5.1f%%", 100 * gf[k] / peak) : "-"
            ax = (k in act) && (base in act) && act[base] > 0 ? sprintf("%.3f", act[k] / act[base]) : "-"
            a32 = (k in act32) && act32[k] != "" ? sprintf("%.0f", act32[k]) : "-"
            printf "%-6s %-4s %-5s | %10s %8s %6s %9s %9s %6s | %10s %8s\n", c[1], c[2], c[3],
                   ms(mt, k), x(mt, k, base), mfu, (k in act) ? sprintf("%.0f", act[k]) : "-", a32, ax,
                   ms(th, k), x(th, k, base)
        }
        print "act MiB: the planned activation arena (bf16 rows: with the activations only bf16 products"
        print "read stored in bf16); f32 act: the same plan with every activation f32 (the saving is the"
        print "difference)."
        print "speed: the config'"'"'s fp32/none step over this row'"'"'s (above 1: faster); act: activation"
        print "memory over fp32/none'"'"'s. MFU: model FLOP/s over the measured product rate of the row'"'"'s"
        print "precision (sgemm " sgemm ", bf16 " bf16 " GFLOP/s). Targets: bf16 speed >= 1.6x gpt2,"
        print ">= 1.4x v50k; gpt2 fp32/full act <= 0.333 and speed >= 0.714x (step <= 1.4x)."
    }' "$OUT/all.txt"
