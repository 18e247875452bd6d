#!/usr/bin/env bash
# test_report_cli.sh — `meshtrain report` on the trace of a real 2-device
# data-parallel run (asynchronous gradient all-reduces, i.e. overlap on): it
# exits 0, its tables show the psum of the gradients, --json is one JSON
# object, and some of the gradient reductions' time is hidden under compute
# (async lanes), more than is exposed over the devices. On 2 shared cores,
# beside another test, a device's thread is often descheduled and the other
# then waits for it: as long as the peer has not arrived, that wait is sync
# (the report matches each collective's sequence number over the devices);
# but a peer descheduled in the middle of a reduction stretches it, which
# shows as exposed (seen under ctest -j2: hidden/exposed/sync 3862/9628/17909
# us). So CMake runs this test alone (RUN_SERIAL), and the comparison gets up
# to 3 runs (seen alone: 3846/200/2115). test_report.c asserts the arithmetic
# on traces with known answers. With --metrics and --out: the run section,
# and the three pictures are well-formed (xmllint) and render (rsvg-convert),
# each skipped with a message where the tool is missing. A truncated trace
# and a missing one fail with one line naming what was wrong.
#
#   bash tests/test_report_cli.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_report_cli.sh "$@"

for i in $(seq 60); do printf 'the quick brown fox jumps over the lazy dog; one run on any mesh. '; done >text.txt
# buckets of 64 KiB: this model's 0.4 MB of gradients in several, so that the
# first start while W still computes (the default 25 MiB makes one, at W's end)
"$BIN" train --data text.txt --layers 2 --channels 64 --heads 4 --seq 32 --max-seq 32 --batch 4 \
    --steps 4 --devices 2 --mesh data=2 --threads 2 --seed 7 --quiet --trace dp.json --bucket-mb 0.0625 \
    --metrics dp.jsonl --eval-every 2 >train.txt 2>&1 \
    || bad "train --trace" "$(tail -3 train.txt)"

if "$BIN" report dp.json --peak-gflops 100 --bandwidth-gbs 20 --model-flops 1e8 >rep.txt 2>err.txt; then
    ok "report exits 0"
else
    bad "report exits 0" "$(cat err.txt)"
fi
grep -q "^ops (a device's peak 100.0 GFLOP/s, bandwidth 20.0 GB/s):$" rep.txt \
    && ok "the given figures head the table" || bad "the given figures" "$(head -1 rep.txt)"

# the probe's file: each of the 2 devices gets the larger of one thread's figure and
# the all-cores one over 2 (worked out here from the file); the peak is the FMA peak of
# the kernel level the run ran at (the trace's "cpu_isa" event), or sgemm's for a
# machine file from before the levels. A run capped at generic (MT_CPU_ISA, on every
# CPU) gets generic's peak.
MT_CPU_ISA=generic "$BIN" train --data text.txt --layers 1 --channels 32 --heads 4 --seq 16 \
    --max-seq 16 --batch 2 --steps 2 --devices 2 --mesh data=2 --threads 2 --quiet \
    --trace generic.json >train.txt 2>&1 || bad "train --trace (MT_CPU_ISA=generic)" "$(tail -3 train.txt)"
grep -q '"name":"cpu_isa","ph":"M",.*"level":"generic"' generic.json \
    && ok "the trace records the kernel level (MT_CPU_ISA=generic)" \
    || bad "the trace's kernel level" "$(grep cpu_isa generic.json)"
if "$BIN" bench machine --quick --out m.json >probe.txt 2>&1 && command -v python3 >/dev/null; then
    want() {   # want TRACE FILE: the head line worked out from the two files
        python3 - "$1" "$2" <<'PY'
import json, re, sys
level = re.search(r'"name":"cpu_isa".*"level":"([a-z0-9]+)"', open(sys.argv[1]).read()).group(1)
m = json.load(open(sys.argv[2]))
lv = m.get("fma_gflops_by_isa", {}).get(level)
if lv:
    peak, src = max(lv["1"], lv["all"] / 2), "the %s FMA peak: the run's kernel level" % level
else:
    peak = max(m["sgemm_gflops"]["1"], m["sgemm_gflops"]["all"] / 2)
    src = "Open BLAS sgemm: the machine file has no %s FMA peak" % level
bw = max(m["triad_gbs"]["1"], m["triad_gbs"]["all"] / 2)
print("ops (a device's peak %.1f GFLOP/s (%s), bandwidth %.1f GB/s):" % (peak, src, bw))
PY
    }
    "$BIN" report dp.json --machine m.json >mrep.txt 2>err.txt
    w=$(want dp.json m.json)
    [ "$(head -1 mrep.txt)" = "$w" ] && ok "--machine: a device's share of the run's level's FMA peak" \
        || bad "--machine" "got '$(head -1 mrep.txt)', want '$w'"
    "$BIN" report generic.json --machine m.json >mrep.txt 2>err.txt
    w=$(want generic.json m.json)
    [ "$(head -1 mrep.txt)" = "$w" ] && grep -q "generic FMA peak" mrep.txt \
        && ok "--machine: MT_CPU_ISA=generic's run is held to the generic peak" \
        || bad "--machine, generic" "got '$(head -1 mrep.txt)', want '$w'"
    python3 -c '
import json
m = json.load(open("m.json")); del m["fma_gflops_by_isa"]; del m["cpu_isa"]
json.dump(m, open("old.json", "w"))'
    "$BIN" report dp.json --machine old.json >mrep.txt 2>err.txt
    w=$(want dp.json old.json)
    [ "$(head -1 mrep.txt)" = "$w" ] && ok "--machine: a file from before the levels: sgemm's peak" \
        || bad "--machine, an old file" "got '$(head -1 mrep.txt)', want '$w' ($(cat err.txt))"
    "$BIN" report dp.json --machine m.json --peak-gflops 100 >mrep.txt 2>err.txt
    grep -q "peak 100.0 GFLOP/s" mrep.txt && ok "--peak-gflops wins over the file" \
        || bad "--peak-gflops over --machine" "$(head -1 mrep.txt)"
else
    bad "bench machine --quick" "$(tail -3 probe.txt)"
fi
expect_fail "--machine that is not there" 1 "cannot read the machine file" \
    "$BIN" report dp.json --machine absent.json

grep -Eq '^  psum +[0-9]+ .* comm$' rep.txt && ok "the gradient psums are a comm-bound op kind" \
    || bad "psum row" "$(head -5 rep.txt)"
grep -q "psum (async) 'data'" dp.json && grep -Eq '^  [01] +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+' rep.txt \
    && ok "per-device table" || bad "per-device table" "$(cat rep.txt)"
grep -Eq '^  1\. ' rep.txt && ok "a thing to fix" || bad "fixes" "$(tail -4 rep.txt)"

"$BIN" report dp.json --json >rep.json || bad "report --json" "exit $?"
if command -v python3 >/dev/null; then
    why=$(python3 - rep.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
dev = r["devices"]
hidden = sum(d["hidden_us"] for d in dev); exposed = sum(d["exposed_us"] for d in dev)
print("hidden %.0f us, exposed %.0f us (per device: %s)" % (hidden, exposed,
      ", ".join("%.0f/%.0f" % (d["hidden_us"], d["exposed_us"]) for d in dev)), file=sys.stderr)
if len(dev) != 2: print("devices", len(dev))
elif len(r["steps"]) != 4: print("steps", len(r["steps"]))
elif not any(o["kind"] == "psum" and o["bound"] == "comm" for o in r["ops"]): print("no psum op")
elif not all(d["hidden_us"] > 0 for d in dev): print("no reduction hidden under compute on a device")
PY
)
    [ -z "$why" ] && ok "--json: the reductions appear, partly hidden under compute" || bad "--json" "$why"

    # With overlap on, the hidden share exceeds the exposed one, over the
    # devices. Waiting for a late peer is sync, not exposed communication;
    # but a device thread descheduled inside a wait (ctest runs two tests on
    # the 2 cores) still shows as exposed: up to 3 runs, one must show it.
    shares=""
    for try in 1 2 3; do
        f=dp.json
        if [ $try -gt 1 ]; then
            f=dp$try.json
            "$BIN" train --data text.txt --layers 2 --channels 64 --heads 4 --seq 32 --max-seq 32 \
                --batch 4 --steps 4 --devices 2 --mesh data=2 --threads 2 --seed 7 --quiet --bucket-mb 0.0625 \
                --trace $f >train.txt 2>&1 || { bad "train --trace (try $try)" "$(tail -3 train.txt)"; break; }
        fi
        "$BIN" report $f --json >share.json || { bad "report --json (try $try)" "exit $?"; break; }
        share=$(python3 -c '
import json, sys
dev = json.load(open("share.json"))["devices"]
h, e, s = (sum(d[k] for d in dev) for k in ("hidden_us", "exposed_us", "sync_us"))
print("%s hidden %.0f us, exposed %.0f us, sync %.0f us" % ("yes" if h > e else "no", h, e, s))')
        shares="$shares; try $try: ${share#* }"
        [ "${share%% *}" = yes ] && break
    done
    [ "${share%% *}" = yes ] && ok "overlap on: hidden exceeds exposed (${shares#; })" \
        || bad "hidden > exposed" "${shares#; }"
fi

# --metrics and --out: a run section, and three pictures that are well-formed XML and render
if "$BIN" report dp.json --peak-gflops 100 --bandwidth-gbs 20 --metrics dp.jsonl --out pics \
        >prep.txt 2>err.txt; then
    ok "report --metrics --out exits 0"
else
    bad "report --metrics --out exits 0" "$(cat err.txt)"
fi
[ "$(tail -1 prep.txt)" = "pictures: pics/roofline.svg pics/timeline.svg pics/loss.svg" ] \
    && ok "the pictures line names the three files" || bad "pictures line" "$(tail -1 prep.txt)"
grep -q "^run (metrics: 4 lines, steps 1..4):$" prep.txt && grep -q "^  val loss    last [0-9.]* (step 4)" prep.txt \
    && ok "the run section" || bad "run section" "$(tail -6 prep.txt)"
for f in roofline timeline loss; do
    [ -s "pics/$f.svg" ] || { bad "$f.svg written" "missing or empty"; continue; }
    if command -v xmllint >/dev/null; then
        xmllint --noout "pics/$f.svg" 2>err.txt && ok "$f.svg is well-formed XML" || bad "$f.svg: xmllint" "$(head -3 err.txt)"
    else
        echo "skip  xmllint not installed: $f.svg not checked (apt-get install libxml2-utils)"
    fi
    if command -v rsvg-convert >/dev/null; then
        rsvg-convert "pics/$f.svg" -o "$f.png" 2>err.txt && [ -s "$f.png" ] \
            && ok "$f.svg renders to a PNG" || bad "$f.svg: rsvg-convert" "$(head -3 err.txt)"
    else
        echo "skip  rsvg-convert not installed: $f.svg not rendered (apt-get install librsvg2-bin)"
    fi
done
"$BIN" report dp.json --metrics dp.jsonl --out pics2 --json >prep.json 2>perr.txt
if command -v python3 >/dev/null; then
    why=$(python3 - prep.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["run"]
want = {"steps", "first_step", "last_step", "first_loss", "last_loss", "last_val_loss", "last_val_step",
        "best_val_loss", "best_val_step", "median_tokens_per_s", "median_ms"}
if set(r) != want: print("keys", sorted(r))
elif r["steps"] != 4 or r["last_val_step"] != 4: print(r)
PY
)
    [ -z "$why" ] && ok "--json --metrics: a run object" || bad "--json run" "$why"
fi
grep -q "^pictures: pics2/roofline.svg" perr.txt && ok "--json: the pictures line on stderr" \
    || bad "--json pictures line" "$(cat perr.txt)"
grep -q '"run"' rep.json && bad "no run without --metrics" "a run object" || ok "no run object without --metrics"
printf '{"step":1,"loss":5}\n{"step":2,"loss":"x"}\n' >bad.jsonl
expect_fail "a bad metrics line" 1 "metrics 'bad.jsonl', line 2 .*\"loss\" is not a number" \
    "$BIN" report dp.json --metrics bad.jsonl
expect_fail "missing metrics" 1 "cannot open metrics 'none.jsonl'" "$BIN" report dp.json --metrics none.jsonl
touch afile
expect_fail "--out on a file" 1 "--out 'afile' is there but is not a directory" "$BIN" report dp.json --out afile
expect_fail "--out under a missing directory" 1 "cannot make the directory 'no/such'" \
    "$BIN" report dp.json --out no/such

# (where byte 4000 falls depends on the run's timings: inside a number the
# reader names the line and event, elsewhere the line and byte)
head -c 4000 dp.json >cut.json
expect_fail "truncated trace" 1 "line [0-9]+ \((byte|event) [0-9]+\)|truncated" "$BIN" report cut.json
expect_fail "missing trace" 1 "cannot open trace 'none.json'" "$BIN" report none.json
expect_fail "no trace given" 2 "needs a trace" "$BIN" report

test_end
