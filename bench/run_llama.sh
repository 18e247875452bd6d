#!/usr/bin/env bash
# run_llama.sh — LLaMA training step, meshtrain against PyTorch, in one table.
#
#   bash bench/run_llama.sh [BUILD_DIR] [--quick] [ROUNDS]
#
# Issue 23's shape (bench/bench_llama.c) on 1 and 2 threads. The machine is
# shared, so the contenders are interleaved: each of ROUNDS rounds (3; 1
# with --quick) runs bench_llama and bench/llama_torch.py on 1 thread, then
# both on 2, and the table gives the medians over the rounds with the
# highest 1-minute load seen. The ratio is torch's time over meshtrain's,
# the median of the rounds' (target >= 3 on 2 threads); /sgemm is the
# step's FLOP rate over the same-run sgemm's (target >= 0.70); the
# attention rows are forward and backward of the GPT's attention and of
# grouped-query attention (KV=2, and KV=NH through the same op) at the
# model's sizes, per FLOP of one count (target: gqa no slower than gpt).
#
# Both contenders run in the environment bench/run_gpt.sh describes: Open
# BLAS's kernel as bench/blas_env.sh picks it, OMP_WAIT_POLICY=passive for
# torch.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build}
shift || true
QUICK=()
if [[ ${1:-} == --quick ]]; then QUICK=(--quick); shift; fi
ROUNDS=${1:-$([[ ${#QUICK[@]} -gt 0 ]] && echo 1 || echo 3)}
source bench/blas_env.sh

OUT=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-bench.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

source bench/torch_env.sh   # PY, HAVE_TORCH

for ((r = 1; r <= ROUNDS; r++)); do
    for th in 1 2; do
        echo "== round $r/$ROUNDS, $th thread(s): $BUILD/bench_llama ${QUICK[*]} $th" \
             "(load $(cut -d' ' -f1 /proc/loadavg))"
        "$BUILD/bench_llama" "${QUICK[@]}" "$th" | tee -a "$OUT/results.txt"
        if [[ $HAVE_TORCH == 1 ]]; then
            echo "== round $r/$ROUNDS, $th thread(s): $PY bench/llama_torch.py ${QUICK[*]} $th"
            OMP_WAIT_POLICY=passive "$PY" bench/llama_torch.py "${QUICK[@]}" "$th" |
                tee -a "$OUT/results.txt"
        fi
    done
done

# RESULT key=value lines -> medians per (impl, threads) and (attention kind, threads)
echo
awk -v rounds="$ROUNDS" '
    function field(line, key,   n, i, kv, parts) {
        n = split(line, parts, " ")
        for (i = 2; i <= n; i++) { split(parts[i], kv, "="); if (kv[1] == key) return kv[2] }
        return ""
    }
    function add(name, k, v) { cnt[name, k]++; val[name, k, cnt[name, k]] = v + 0 }
    function median(name, k,   n, i, j, t, a) {
        n = cnt[name, k]
        if (!n) return -1
        for (i = 1; i <= n; i++) a[i] = val[name, k, i]
        for (i = 2; i <= n; i++)   # insertion sort: a handful of rounds
            for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    /^RESULT / {
        impl = field($0, "impl"); th = field($0, "threads"); l = field($0, "load") + 0
        if (impl == "attention") k = field($0, "kind") " " th; else k = th
        if (!(k in seen)) {
            seen[k] = 1
            if (impl == "attention") akeys[++na] = k; else if (impl == "meshtrain") skeys[++ns] = k
        }
        if (l > maxload[k]) maxload[k] = l
        add(impl "_ms", k, field($0, "ms"))
        if (impl == "meshtrain") {
            add("gf", k, field($0, "gflops")); add("frac", k, field($0, "frac"))
            add("sg", k, field($0, "sgemm_gflops"))
        }
        if (impl == "attention") add("agf", k, field($0, "gflops"))
    }
    END {
        printf "LLaMA step (medians of %d rounds)\n", rounds
        printf "%7s %13s %10s %7s %9s %10s %7s %9s\n", "threads", "meshtrain ms", "torch ms",
               "ratio", "GFLOP/s", "sgemm GF/s", "/sgemm", "max load"
        for (i = 1; i <= ns; i++) {
            k = skeys[i]; m = median("meshtrain_ms", k); t = median("torch_ms", k)
            # the ratio of each round (the two ran back to back), then their median
            for (j = 1; j <= cnt["torch_ms", k] && j <= cnt["meshtrain_ms", k]; j++)
                add("ratio", k, val["torch_ms", k, j] / val["meshtrain_ms", k, j])
            r = median("ratio", k)
            printf "%7s %13.1f %10s %7s %9.1f %10.1f %7.2f %9.2f\n", k, m,
                   (t > 0) ? sprintf("%.1f", t) : "-", (r > 0) ? sprintf("%.2fx", r) : "-",
                   median("gf", k), median("sg", k), median("frac", k), maxload[k]
        }
        printf "\nattention forward+backward per FLOP (medians)\n"
        printf "%-5s %7s %9s %9s %10s %9s\n", "kind", "threads", "ms", "GFLOP/s", "gpt ms/this",
               "max load"
        for (i = 1; i <= na; i++) {
            k = akeys[i]; split(k, c, " "); m = median("attention_ms", k)
            g = median("attention_ms", "gpt " c[2])
            printf "%-5s %7s %9.3f %9.1f %9.2fx %9.2f\n", c[1], c[2], m, median("agf", k),
                   (g > 0) ? g / m : 0, maxload[k]
        }
    }' "$OUT/results.txt"
