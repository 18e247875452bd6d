#!/usr/bin/env bash
# run_gpt.sh — GPT training step, meshtrain against PyTorch, in one table.
#
#   bash bench/run_gpt.sh [BUILD_DIR] [CONFIG [THREADS [STEPS]]]
#   BENCH_ISA=avx2 bash bench/run_gpt.sh ...    an AVX2-only CPU's rows, here
#
# BENCH_ISA=avx2 (or generic) caps every contender at that level, so that an
# AVX-512 machine measures what an AVX2-only one would run: meshtrain's
# kernel level (MT_CPU_ISA, which caps oneDNN as well), Open BLAS's kernel
# (OPENBLAS_CORETYPE=Haswell, for both: they load the same library) and
# PyTorch's own vector kernels (ATEN_CPU_CAPABILITY). The CPU's caches,
# bandwidth and clocks stay this machine's: say so next to such figures.
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
case "${BENCH_ISA:-}" in
    "") ;;
    avx2|generic)
        export MT_CPU_ISA=$BENCH_ISA OPENBLAS_CORETYPE=Haswell
        [[ $BENCH_ISA == avx2 ]] && export ATEN_CPU_CAPABILITY=avx2 || export ATEN_CPU_CAPABILITY=default
        [[ $BENCH_ISA == generic ]] && export OPENBLAS_CORETYPE=Prescott
        echo "BENCH_ISA=$BENCH_ISA: MT_CPU_ISA=$MT_CPU_ISA OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE" \
             "ATEN_CPU_CAPABILITY=$ATEN_CPU_CAPABILITY (this machine's caches and clocks)" ;;
    *) echo "run_gpt.sh: BENCH_ISA=$BENCH_ISA is not avx2 or generic" >&2; exit 2 ;;
esac

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
