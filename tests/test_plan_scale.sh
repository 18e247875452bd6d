#!/usr/bin/env bash
# test_plan_scale.sh — issue 24 §6: `meshtrain plan` for Llama 3 405B on
# 16,384 H100s, enumerating every layout, finishes in under 60 s with under
# 2 GiB of peak memory (/usr/bin/time -v) on 2 cores: each distinct
# per-device program is built once (one device a pipeline stage, chunks of
# 4 and 8 blocks), not each device. The time bounded is the process's CPU
# time (user + system, of all the search's threads), which other
# processes on the cores do not stretch as they stretch the wall time (74 s
# of wall for 27 s of CPU beside two builds, 2026-12-06); the wall time is
# printed. Under the sanitizers the time is printed, not bounded (the build
# is several times slower); the memory bound holds everywhere.
#
# Issue 40 item 7: a published model's free search in a few seconds, CPU
# time and peak RSS bounded loosely (Llama 3 8B on 16 H100, meshtrain's
# memory: 5 s and 280 MiB in a Release build, bounded at 30 s and 512
# MiB; before the programs were shared and the cache bounded, 11.9 s and
# 340 MiB; the 405B case, 4 s and 190 MiB now, has its memory bounded at
# the issue's 1 GiB);
# and the programs the search shares between layouts (cache.c's
# shared_key) change no answer: the same search with --rules mlp=tensor
# (the default rule; any --rules turns the sharing off, every layout
# building its own programs) gives the same best layouts, numbers,
# families and refusals.
#
#   bash tests/test_plan_scale.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_plan_scale.sh "$@"

sanitized=$(sed -n 's/^MT_SANITIZE:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
ARGS=(plan --model llama --preset llama3-405b --hardware h100-sxm --chips 16384
      --batch-tokens 16M --seq 8192 --memory mixed16 --json)
if [ ! -x /usr/bin/time ]; then
    bad "405B: /usr/bin/time" "is missing; install the Debian package 'time' (make deps)"
else
    /usr/bin/time -v "$BIN" "${ARGS[@]}" >plan.json 2>time.txt
    rc=$?
    wall=$(sed -n 's/.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' time.txt)
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' time.txt)
    secs=$(python3 -c "import sys; p=sys.argv[1].split(':'); print(sum(float(x)*60**i for i,x in enumerate(reversed(p))))" "$wall")
    user=$(sed -n 's/.*User time (seconds): //p' time.txt)
    sys=$(sed -n 's/.*System time (seconds): //p' time.txt)
    cpu=$(python3 -c "import sys; print(round(float(sys.argv[1]) + float(sys.argv[2]), 2))" \
          "${user:-0}" "${sys:-0}")
    echo "#     405B on 16384: CPU $cpu s (wall $secs s), peak RSS $rss kB${sanitized:+ (sanitizers: $sanitized)}"
    [ "$rc" -eq 0 ] && ok "405B: exit 0" || bad "405B: exit" "exit $rc: $(head -3 time.txt)"
    if [ -z "$sanitized" ]; then
        python3 -c "import sys; sys.exit(0 if 0 < float(sys.argv[1]) < 60 else 1)" "$cpu" \
            && ok "405B: under 60 s of CPU ($cpu s; wall $secs s)" \
            || bad "405B: CPU time" "$cpu s (wall $secs s), want under 60"
    fi
    [ "${rss:-99999999}" -lt $((1 << 20)) ] && ok "405B: under 1 GiB peak ($rss kB)" \
        || bad "405B: peak RSS" "$rss kB, want under 1048576"
    # every layout enumerated: the mesh factorisations of 2^14 with tensor <= 64
    # and pipe <= 126 layers and every option; the report says how many, and
    # which programs it built
    python3 - plan.json <<'PY' && ok "405B: the report's counts and its best" || bad "405B: report" "see above"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["chips"] == 16384, d["chips"]
assert d["evaluated"] > 100000, d["evaluated"]
# each program serves many layouts: 6202 programs for 601790 layouts
# before sequence parallelism composed with pipelines (issue 39), 16922 for
# 537350 since (a pipeline's layouts planned with sp off, on and with
# collective matmul: their chunks' programs three times over)
assert 0 < d["programs"] < d["evaluated"] / 25, (d["programs"], d["evaluated"])
assert abs(d["parameters"] - 405.85e9) / 405.85e9 < 0.01, d["parameters"]
best = d["best"]
assert best and all(b["feasible"] for b in best), "no feasible best"
steps = [b["step_seconds"] for b in best]
assert steps == sorted(steps), steps
for b in best:
    assert b["data"] * b["fsdp"] * b["tensor"] * b["pipe"] == b["chips"] <= 16384, b
    assert b["memory_per_device"]["total"] <= 80e9, b
PY
fi

# CPU seconds (user + system) and peak RSS (kB) of the command after the
# file name, its --json into that file: "cpu rss rc".
measure() {
    local json=$1
    shift
    /usr/bin/time -v "$BIN" "$@" >"$json" 2>time8b.txt
    local rc=$? user sys rss
    user=$(sed -n 's/.*User time (seconds): //p' time8b.txt)
    sys=$(sed -n 's/.*System time (seconds): //p' time8b.txt)
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' time8b.txt)
    python3 -c "import sys; print(round(float(sys.argv[1]) + float(sys.argv[2]), 2), sys.argv[3], \
                sys.argv[4])" "${user:-0}" "${sys:-0}" "${rss:-99999999}" "$rc"
}

if [ -x /usr/bin/time ]; then
    A8=(plan --model llama --preset llama3-8b --hardware h100-sxm --chips 16 --batch-tokens 1M
        --seq 8192 --json --top 20)
    read -r cpu rss rc < <(measure plan8b.json "${A8[@]}")
    echo "#     8B on 16: CPU $cpu s, peak RSS $rss kB${sanitized:+ (sanitizers: $sanitized)}"
    [ "$rc" -eq 0 ] && ok "8B: exit 0" || bad "8B: exit" "exit $rc: $(head -3 time8b.txt)"
    if [ -z "$sanitized" ]; then
        python3 -c "import sys; sys.exit(0 if 0 < float(sys.argv[1]) < 30 else 1)" "$cpu" \
            && ok "8B: under 30 s of CPU ($cpu s)" || bad "8B: CPU time" "$cpu s, want under 30"
        [ "$rss" -lt $((512 << 10)) ] && ok "8B: under 512 MiB peak ($rss kB)" \
            || bad "8B: peak RSS" "$rss kB, want under 524288"
    fi
    read -r cpu2 rss2 rc2 < <(measure plan8b_own.json "${A8[@]}" --rules mlp=tensor)
    echo "#     8B on 16, every layout its own programs: CPU $cpu2 s, peak RSS $rss2 kB"
    python3 - plan8b.json plan8b_own.json <<'PY' \
        && ok "8B: the shared programs change no answer" || bad "8B: shared programs" "see above"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert b["programs"] > a["programs"], (a["programs"], b["programs"])
for k in ("parameters", "evaluated", "feasible", "best", "families", "refusals"):
    assert a[k] == b[k], (k, a[k], b[k])
assert len(a["best"]) == 20 and a["feasible"] > 20, (len(a["best"]), a["feasible"])
PY
fi

test_end
