#!/usr/bin/env bash
# run_plan_speed.sh — issue 40 item 7's table: the free search (no --mesh)
# of each published case, its wall seconds on the machine's cores (the
# search's threads: --threads 0, all of them; PLAN_SPEED_THREADS=N runs N),
# its CPU seconds (user + system: other processes on the cores stretch the
# wall time, not these) and peak RSS (/usr/bin/time -v), with the layouts
# it evaluated and the programs it built. Target: each under 30 s (wall)
# and 1 GiB on 2 cores, Release build.
#
#   bash bench/run_plan_speed.sh [BUILD_DIR [LIMIT_S [CASE_PATTERN [BASE_BUILD_DIR]]]]
#
# LIMIT_S (default 600) stops a case past that many CPU seconds (ulimit -t:
# a loaded machine stretches the wall time, not the CPU's; its row says so);
# CASE_PATTERN (a grep -E pattern) runs only the cases whose name matches;
# PLAN_SPEED_MEMORY=megatron (or another convention) runs each case under
# that one convention only. With BASE_BUILD_DIR each case also runs on that
# build's meshtrain (another commit's), and its row says whether the two
# --json answers are the same, every field but the seconds and the programs
# built (a speed change must leave every layout, step, memory and refusal
# as it was), with that build's CPU seconds and RSS beside.
# The cases and their published sources:
#   gpt3-175b    Narayanan et al. SC21 Table 1, the 145.6B row's 1536 A100
#                at batch 2304 (GPT-3 175B's shape: 96 layers there, the
#                issue's 80 here as written in it)
#   1t           the same table's 1T row: 3072 A100, batch 3072
#   530b         Megatron-Turing NLG 530B (Smith et al. 2022): 2520 A100 at
#                batch 2520, and 280 A100 at batch 280
#   bloom-176b   BLOOM (Le Scao et al. 2022): 384 A100 80 GB, batch 2048
#   palm-540b    PaLM (Chowdhery et al. 2022): 6144 TPU v4, batch 2048
#   llama3-405b  Llama 3 (Dubey et al. 2024): 16384 H100, 16M tokens of 8192
#   llama3-8b    on 64 H100, 1M tokens of 8192
# --memory megatron where the issue shows it, and each also under the
# default convention (meshtrain's).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${1:-build}
LIMIT=${2:-600}
PATTERN=${3:-.}
BIN=$BUILD/meshtrain
BASE=${4:-}
if [ -n "$BASE" ] && [ ! -x "$BASE/meshtrain" ]; then
    echo "run_plan_speed.sh: no $BASE/meshtrain to compare with; build it first" >&2
    exit 1
fi
if [ ! -x "$BIN" ]; then
    echo "run_plan_speed.sh: no $BIN; build it first (make build, a Release build)" >&2
    exit 1
fi
if [ ! -x /usr/bin/time ]; then
    echo "run_plan_speed.sh: /usr/bin/time is missing; install the Debian package 'time'" >&2
    exit 1
fi
OUT=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-bench-plan-speed.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

GPT=(--model gpt --vocab 51200 --max-seq 2048 --seq 2048)
CASES=(
  "gpt3-175b-1536|megatron|${GPT[*]} --layers 80 --channels 12288 --heads 96 --hardware a100-80gb --chips 1536 --batch-tokens 4718592"
  "1t-3072|megatron|${GPT[*]} --layers 128 --channels 25600 --heads 160 --hardware a100-80gb --chips 3072 --batch-tokens 6291456"
  "530b-2520|megatron|${GPT[*]} --layers 105 --channels 20480 --heads 128 --hardware a100-80gb --chips 2520 --batch-tokens 5160960"
  "530b-280|megatron|${GPT[*]} --layers 105 --channels 20480 --heads 128 --hardware a100-80gb --chips 280 --batch-tokens 573440"
  "bloom-176b-384|megatron|--model gpt --layers 70 --channels 14336 --heads 112 --vocab 250880 --max-seq 2048 --seq 2048 --hardware a100-80gb --chips 384 --batch-tokens 4194304"
  "palm-540b-6144|megatron|--model gpt --layers 118 --channels 18432 --heads 48 --vocab 256000 --max-seq 2048 --seq 2048 --hardware tpu-v4p --chips 6144 --batch-tokens 4194304"
  "llama3-405b-16384|megatron|--model llama --preset llama3-405b --hardware h100-sxm --chips 16384 --batch-tokens 16M --seq 8192"
  "llama3-8b-64|megatron|--model llama --preset llama3-8b --hardware h100-sxm --chips 64 --batch-tokens 1M --seq 8192"
)

printf '%-20s %-9s %8s %8s %9s %9s %8s' case memory "CPU s" "RSS MiB" layouts programs "wall s"
[ -n "$BASE" ] && printf '  %-9s %8s %8s %9s' answers "base s" "base MiB" "base wall"
printf '\n'
for row in "${CASES[@]}"; do
    IFS='|' read -r name memory args <<<"$row"
    [[ "$name" =~ $PATTERN ]] || continue
    mems=("$memory" meshtrain)
    [ -n "${PLAN_SPEED_MEMORY:-}" ] && mems=("$PLAN_SPEED_MEMORY")
    for mem in "${mems[@]}"; do
        # shellcheck disable=SC2086  # the case's flags, split as written
        (ulimit -t "$LIMIT" && exec /usr/bin/time -v "$BIN" plan $args --memory "$mem" --json \
            --threads "${PLAN_SPEED_THREADS:-0}") \
            >"$OUT/plan.json" 2>"$OUT/time.txt"
        rc=$?
        user=$(sed -n 's/.*User time (seconds): //p' "$OUT/time.txt")
        sys=$(sed -n 's/.*System time (seconds): //p' "$OUT/time.txt")
        rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$OUT/time.txt")
        wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$OUT/time.txt")
        if [ "$rc" -ne 0 ]; then
            why="exit $rc"
            grep -q "signal 24\|signal 9" "$OUT/time.txt" && why="stopped at ${LIMIT} s of CPU"
            grep -q "no layout fits" "$OUT/time.txt" && why="exit 1: no layout fits"
            printf '%-20s %-9s %8s %8s %9s %9s %8s  (%s)\n' "$name" "$mem" - - - - - "$why"
            continue
        fi
        base=()
        if [ -n "$BASE" ]; then
            # shellcheck disable=SC2086
            (ulimit -t "$LIMIT" && exec /usr/bin/time -v "$BASE/meshtrain" plan $args \
                --memory "$mem" --json) >"$OUT/base.json" 2>"$OUT/base_time.txt"
            base=("$OUT/base.json" "$(sed -n 's/.*User time (seconds): //p' "$OUT/base_time.txt")"
                  "$(sed -n 's/.*System time (seconds): //p' "$OUT/base_time.txt")"
                  "$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$OUT/base_time.txt")"
                  "$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$OUT/base_time.txt")")
        fi
        python3 - "$OUT/plan.json" "$name" "$mem" "${user:-0}" "${sys:-0}" "${rss:-0}" "$wall" \
            "${base[@]}" <<'PY'
import json, sys
path, name, mem, user, sys_s, rss, wall = sys.argv[1:8]
d = json.load(open(path))
def seconds(hms):
    w = [float(x) for x in hms.split(':')]
    return sum(x * 60 ** i for i, x in enumerate(reversed(w)))
secs = seconds(wall)
row = (f"{name:<20} {mem:<9} {float(user) + float(sys_s):8.1f} {int(rss) / 1024:8.0f} "
       f"{d['evaluated']:9d} {d['programs']:9d} {secs:8.1f}")
if len(sys.argv) > 8:
    bpath, buser, bsys, brss, bwall = sys.argv[8:13]
    try:
        b = json.load(open(bpath))
    except ValueError:
        b = None
    # the answers: every field but how long the search took and how many
    # programs it built to give them
    def answers(x):
        return {k: v for k, v in x.items() if k not in ("seconds", "programs")}
    same = b is not None and answers(b) == answers(d)
    row += (f"  {'same' if same else 'DIFFERENT':<9} {float(buser or 0) + float(bsys or 0):8.1f}"
            f" {int(brss or 0) / 1024:8.0f} {seconds(bwall or '0'):9.1f}")
print(row)
PY
        [ "$mem" = meshtrain ] && break
    done
done
