#!/usr/bin/env bash
# run_pipe.sh — issue 10's pipeline table: every schedule kind (gpipe, 1f1b,
# interleaved, zb-h1, zb-h2, zb-v, dualpipev) at pipe=2, m=8 on the two cores,
# one core a stage, against one device on both cores; the bubble as the
# trainer measures it, as the step's trace shows it and as the simulator
# predicts it from the measured op costs, and the issue's three targets.
#
#   bash bench/run_pipe.sh [BUILD_DIR [STEPS]]
#
# Two models (bench_pipe.c): the foundation GPT at L=8 (V=50257, whose head
# on the last stage outweighs all 8 blocks, so the stages cannot balance),
# and the same GPT with byte tokens (V=256), whose stages balance. About 3
# minutes on 2 idle cores at the default 3 steps.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build}
STEPS=${2:-3}
source bench/blas_env.sh
echo "load: $(uptime)"
echo "== meshtrain ($BUILD/bench_pipe $STEPS)"
"$BUILD/bench_pipe" "$STEPS"
echo "load: $(uptime)"
