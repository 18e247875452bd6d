#!/usr/bin/env bash
# run_precision.sh — fp32 against bf16 (issue 12): a GPT training step in
# both precisions, meshtrain (bench_gpt, MT_BENCH_PRECISION) and PyTorch
# (gpt_torch.py, TORCH_PRECISION=bf16: torch.autocast("cpu", bfloat16)) in
# one table, then one 2048^3 matmul through the engine in f32 and bf16
# beside sgemm, on 1 and 2 threads.
#
#   bash bench/run_precision.sh [BUILD_DIR] [CONFIGS [THREADS [STEPS]]]
#   (CONFIGS: space-separated bench_gpt configs, default "gpt2 v50k")
#
# FLOPs and the floor. A step is mt_gpt_train_flops (6·params·tokens plus
# attention, as bench_gpt counts it): GPT-2 small
# (124M with the Vp=50304 embedding, B=1, T=1024) is about 0.88 TFLOP; the
# V=50257 GPT (L4 C256, B4 T64) about 0.025 TFLOP, 80% of it in the tied LM
# head. The floor of a step is its FLOPs over the product rate: the matmul
# rows below give the rates of this machine in each precision.
#
# MFU is over the fp32 peak bench_gpt assumes (264 GFLOP/s a core) for both
# precisions, so the bf16 column's MFU is comparable with the fp32 one.
# Target (issue 12): bf16 >= 1.6x the fp32 step on gpt2, >= 1.4x on v50k.
# On a shared machine the numbers are noisy: compare the rows of one run.
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

for cfg in $CONFIGS; do
    for p in fp32 bf16; do
        echo "== meshtrain $cfg $p ($BUILD/bench_gpt $cfg $THREADS $STEPS)"
        MT_BENCH_PRECISION=$p "$BUILD/bench_gpt" "$cfg" "$THREADS" $STEPS | tee -a "$OUT/all.txt"
        if [ $have_torch = 1 ]; then
            echo "== PyTorch $cfg $p"
            TORCH_PRECISION=$p OMP_WAIT_POLICY=passive "$PY" bench/gpt_torch.py "$cfg" "$THREADS" $STEPS \
                | tee -a "$OUT/all.txt"
        fi
    done
done
[ $have_torch = 1 ] || echo "== PyTorch: $PY cannot import torch (apt-get install python3-torch); its columns stay empty"

echo
awk '
    function field(line, key,   n, i, kv, parts) {
        n = split(line, parts, " ")
        for (i = 2; i <= n; i++) { split(parts[i], kv, "="); if (kv[1] == key) return kv[2] }
        return ""
    }
    /^RESULT / {
        k = field($0, "config") " " field($0, "threads"); p = field($0, "precision")
        if (!(k in seen)) { seen[k] = 1; order[++n] = k }
        if (field($0, "impl") == "meshtrain") { mt[k, p] = field($0, "ms"); pk[k, p] = field($0, "peak_pct") }
        else th[k, p] = field($0, "ms")
    }
    function ms(a, k, p) { return ((k, p) in a) ? sprintf("%.1f", a[k, p]) : "-" }
    function ratio(a, k) {
        if (!((k, "fp32") in a) || !((k, "bf16") in a) || a[k, "bf16"] <= 0) return "-"
        return sprintf("%.2fx", a[k, "fp32"] / a[k, "bf16"])
    }
    END {
        printf "%-6s %4s | %10s %10s %7s %6s %6s | %10s %10s %7s\n", "config", "thr",
               "mt fp32 ms", "mt bf16 ms", "bf16 x", "MFU32", "MFU16", "pt fp32 ms", "pt bf16 ms", "bf16 x"
        for (i = 1; i <= n; i++) {
            k = order[i]; split(k, c, " ")
            printf "%-6s %4s | %10s %10s %7s %5.1f%% %5.1f%% | %10s %10s %7s\n", c[1], c[2],
                   ms(mt, k, "fp32"), ms(mt, k, "bf16"), ratio(mt, k), pk[k, "fp32"], pk[k, "bf16"],
                   ms(th, k, "fp32"), ms(th, k, "bf16"), ratio(th, k)
        }
        print "bf16 x: the fp32 step over the bf16 step (above 1: bf16 is faster); target 1.6x gpt2, 1.4x v50k"
    }' "$OUT/all.txt"

echo
for t in 1 2; do
    echo "== meshtrain bench matmul --m 2048 --n 2048 --k 2048 --threads $t --bf16"
    "$BUILD/meshtrain" bench matmul --m 2048 --n 2048 --k 2048 --threads "$t" --bf16 | sed -n '3,7p'
done
