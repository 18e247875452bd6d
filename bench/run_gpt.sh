#!/usr/bin/env bash
# run_gpt.sh — GPT training step, meshtrain against PyTorch, in one table.
#
#   bash bench/run_gpt.sh [BUILD_DIR] [CONFIG [THREADS [STEPS]]]
#
# Both contenders run in the same environment: Open BLAS's kernel as
# bench/blas_env.sh picks it (the machine's own, which bench_gpt prints), and
# OMP_WAIT_POLICY=passive for torch, whose OpenMP
# threads would otherwise spin against Open BLAS's pool. The ratio is torch's
# time over meshtrain's: above 1, meshtrain is faster.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build}
shift || true
source bench/blas_env.sh

OUT=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-bench.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

echo "== meshtrain ($BUILD/bench_gpt $*)"
"$BUILD/bench_gpt" "$@" | tee "$OUT/mt.txt"

PY=/usr/bin/python3   # Debian's, with python3-torch; not a pyenv or venv python
echo
if "$PY" -c 'import torch' 2>/dev/null; then
    echo "== PyTorch ($PY bench/gpt_torch.py $*)"
    OMP_WAIT_POLICY=passive "$PY" bench/gpt_torch.py "$@" | tee "$OUT/torch.txt"
else
    echo "== PyTorch: $PY cannot import torch (apt-get install python3-torch); its column stays empty"
    : >"$OUT/torch.txt"
fi

# RESULT key=value lines -> one row per (config, threads)
echo
awk '
    function field(line, key,   n, i, kv, parts) {
        n = split(line, parts, " ")
        for (i = 2; i <= n; i++) { split(parts[i], kv, "="); if (kv[1] == key) return kv[2] }
        return ""
    }
    /^RESULT / {
        k = field($0, "config") " " field($0, "threads")
        if (field($0, "impl") == "meshtrain") {
            if (!(k in mt)) order[++n] = k
            mt[k] = field($0, "ms"); gf[k] = field($0, "gflops"); pk[k] = field($0, "peak_pct")
            sg[k] = field($0, "sgemm_gflops")
        } else {
            th[k] = field($0, "ms")
        }
    }
    END {
        printf "%-7s %7s %13s %10s %7s %9s %7s %12s\n", "config", "threads", "meshtrain ms",
               "torch ms", "ratio", "GFLOP/s", "% peak", "sgemm GF/s"
        for (i = 1; i <= n; i++) {
            k = order[i]; split(k, c, " ")
            ratio = (k in th && mt[k] > 0) ? sprintf("%.2fx", th[k] / mt[k]) : "-"
            printf "%-7s %7s %13.1f %10s %7s %9.1f %6.1f%% %12.1f\n", c[1], c[2], mt[k],
                   (k in th) ? sprintf("%.1f", th[k]) : "-", ratio, gf[k], pk[k], sg[k]
        }
    }' "$OUT/mt.txt" "$OUT/torch.txt"
