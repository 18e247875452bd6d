#!/usr/bin/env bash
# run_dp.sh — issue 9's strategies table: data parallel, ZeRO, FSDP, tensor
# and sequence parallel training through the partitioner, meshtrain on
# threads and under mpirun against one device, and PyTorch DDP (gloo) against
# one PyTorch process, all in one table.
#
#   bash bench/run_dp.sh [BUILD_DIR [STEPS]]
#
# Two models (bench_dp.c): bench_gpt's v50k GPT (L=4 C=256 NH=4 T=64
# V=50257, global batch 8) and c768 (L=4 C=768 NH=12 T=256, batch 4), AdamW.
# Each ratio is tokens/s over its own implementation's 1-device 1-thread row
# (meshtrain's: the median over rounds of each round's ratio); the targets
# are on the throughput over one device on both cores.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build}
STEPS=${2:-6}
source bench/blas_env.sh
OUT=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-bench-dp.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

echo "== one gradient reduction as a step runs it ($BUILD/bench_grad_reduce)"
"$BUILD/bench_grad_reduce"
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
    /^RESULT impl=sgemm/ { scaling[field($0, "model")] = field($0, "ratio") }
    /^RESULT impl=meshtrain/ { m = field($0, "model"); r = m ":" field($0, "row")
                               mt[r] = field($0, "tok_s"); mord[++nm] = r
                               vr[r] = field($0, "ratio"); vb[r] = field($0, "vs_both")
                               hid[r] = field($0, "hidden_pct")
                               tb[r] = field($0, "trace_bytes"); eb[r] = field($0, "explain_bytes") }
    /^RESULT impl=torch/ { r = field($0, "row"); th[r] = field($0, "tok_s"); tord[++nt] = r }
    END {
        printf "%-28s %12s %8s %s\n", "row", "tokens/s", "ratio", ""
        for (i = 1; i <= nm; i++) {
            r = mord[i]; split(r, mr, ":"); m = mr[1]; row = mr[2]
            base = mt[m ":1dev-1thread"]; both = mt[m ":1dev-2threads"]
            note = ""
            if (row == "dp2-threads" || row ~ /^zero/) note = "(target >= 0.95 of both cores)"
            if (row == "fsdp2") note = "(target >= 0.9 of both cores)"
            if (row == "tp2" && m == "c768") note = "(target >= 0.9 of both cores)"
            if (row != "1dev-1thread" && row != "1dev-2threads" && both != "")
                note = note sprintf(" %.2fx of 1 device on both cores", vb[r] != "" ? vb[r] : mt[r] / both)
            if (hid[r] != "") note = note sprintf("; async reductions hidden under the backward: %s%%", hid[r])
            if (tb[r] != "") note = note sprintf("; comm/step %.2f MB traced, %.2f MB explain", tb[r] / 1e6, eb[r] / 1e6)
            printf "meshtrain %-18s %12.1f %7.2fx %s\n", r, mt[r], vr[r] != "" ? vr[r] : (base ? mt[r] / base : 0), note
        }
        tbase = th["1dev-1thread"]
        for (i = 1; i <= nt; i++) {
            r = tord[i]
            printf "torch     v50k:%-13s %12.1f %7.2fx\n", r, th[r], th[r] / tbase
        }
        for (m in scaling) printf "Open BLAS sgemm (%s shape), 2 threads over 1: %.2fx (the most 2 cores give here)\n", m, scaling[m]
        if (("v50k:dp2-threads" in mt) && ("ddp2-gloo" in th))
            printf "meshtrain dp=2 over PyTorch DDP (v50k): %.2fx\n", mt["v50k:dp2-threads"] / th["ddp2-gloo"]
    }' "$OUT/mt.txt" "$OUT/torch.txt"
