#!/usr/bin/env bash
# run_dp.sh — data parallel training through the partitioner: meshtrain on
# threads and under mpirun against one device, and PyTorch DDP (gloo) against
# one PyTorch process, all in one table.
#
#   bash bench/run_dp.sh [BUILD_DIR [STEPS]]
#
# The model is bench_gpt's v50k GPT (L=4 C=256 NH=4 T=64 V=50257), global
# batch 8, AdamW. Each ratio is tokens/s over its own implementation's
# 1-device 1-thread row; the target for meshtrain's dp=2 is >= 1.9x.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build}
STEPS=${2:-6}
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
OUT=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-bench-dp.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

echo "== meshtrain ($BUILD/bench_dp $STEPS)"
"$BUILD/bench_dp" "$STEPS" | tee "$OUT/mt.txt"
if command -v mpirun >/dev/null; then
    echo "== meshtrain under mpirun -np 2 (one device per rank)"
    mpirun --allow-run-as-root --oversubscribe -np 2 "$BUILD/bench_dp" --mpi "$STEPS" \
        | tee -a "$OUT/mt.txt"
fi
PY=/usr/bin/python3
if "$PY" -c 'import torch' 2>/dev/null; then
    echo "== PyTorch ($PY bench/dp_torch.py $STEPS)"
    OMP_WAIT_POLICY=passive "$PY" bench/dp_torch.py "$STEPS" | tee "$OUT/torch.txt"
else
    echo "== PyTorch: $PY cannot import torch (apt-get install python3-torch); its rows stay empty"
    : >"$OUT/torch.txt"
fi

echo
awk '
    function field(line, key,   n, i, kv, parts) {
        n = split(line, parts, " ")
        for (i = 2; i <= n; i++) { split(parts[i], kv, "="); if (kv[1] == key) return kv[2] }
        return ""
    }
    /^RESULT impl=sgemm/ { scaling = field($0, "ratio") }
    /^RESULT impl=meshtrain/ { r = field($0, "row"); mt[r] = field($0, "tok_s"); mord[++nm] = r
                               hid[r] = field($0, "hidden_pct")
                               tb[r] = field($0, "trace_bytes"); eb[r] = field($0, "explain_bytes") }
    /^RESULT impl=torch/ { r = field($0, "row"); th[r] = field($0, "tok_s"); tord[++nt] = r }
    END {
        printf "%-22s %12s %8s %s\n", "row", "tokens/s", "ratio", ""
        base = mt["1dev-1thread"]
        for (i = 1; i <= nm; i++) {
            r = mord[i]
            note = (r ~ /^dp2/) ? "(target >= 1.9x)" : ""
            if (r != "1dev-1thread" && r != "1dev-2threads")
                note = note sprintf(" %.2fx of 1 device on both cores", mt[r] / mt["1dev-2threads"])
            if (hid[r] != "") note = note sprintf("; async reductions hidden under the backward: %s%%", hid[r])
            if (tb[r] != "") note = note sprintf("; comm/step %.2f MB traced, %.2f MB explain", tb[r] / 1e6, eb[r] / 1e6)
            printf "meshtrain %-12s %12.1f %7.2fx %s\n", r, mt[r], mt[r] / base, note
        }
        tbase = th["1dev-1thread"]
        for (i = 1; i <= nt; i++) {
            r = tord[i]
            printf "torch     %-12s %12.1f %7.2fx\n", r, th[r], th[r] / tbase
        }
        if (scaling != "") printf "Open BLAS sgemm, 2 threads over 1: %.2fx (the most 2 cores give here)\n", scaling
        if (("dp2-threads" in mt) && ("ddp2-gloo" in th))
            printf "meshtrain dp=2 over PyTorch DDP: %.2fx\n", mt["dp2-threads"] / th["ddp2-gloo"]
    }' "$OUT/mt.txt" "$OUT/torch.txt"
