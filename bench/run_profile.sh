#!/usr/bin/env bash
# run_profile.sh — issue 11's figures side by side in one run: the machine
# probe (the roofline's peaks), one engine matmul against the same-run
# Open BLAS sgemm at 4096³ (target: >= 0.90), and tracing's cost per step
# (bench_trace: two trainers stepping in turn, one tracing; target < 3 %).
#
#   bash bench/run_profile.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build}
source bench/blas_env.sh
OUT=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-bench-profile.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

echo "== machine probe ($BUILD/meshtrain bench machine)"
"$BUILD/meshtrain" bench machine --out "$OUT/machine.json"
echo
echo "== one matmul through the engine against sgemm"
"$BUILD/meshtrain" bench matmul --m 4096 --n 4096 --k 4096 --reps 7 --machine "$OUT/machine.json"
echo
echo "== tracing's cost ($BUILD/bench_trace)"
"$BUILD/bench_trace"
