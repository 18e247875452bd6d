#!/usr/bin/env bash
# run_remat.sh — activation checkpointing (issue 12 §2): step time and
# activation memory of --remat none|full|attention|dots, GPT-2 small
# (124M, B=1, T=1024, 2 threads), each against none in the same process.
#
#   bash bench/run_remat.sh [BUILD_DIR] [CONFIG [THREADS [STEPS]]]
#
# Targets for full: activation memory <= 1/3 of none, step <= 1.4x none
# (the FLOPs' floor is printed beside each ratio). Step times on a shared
# machine are noisy: compare the floor column with the measured one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build}
shift || true
source bench/blas_env.sh
echo "== meshtrain ($BUILD/bench_remat ${*:-gpt2})"
"$BUILD/bench_remat" "$@"
