#!/usr/bin/env bash
# test_hostile_report.sh — `meshtrain report` given hostile inputs (issue
# 21): inputs that are not regular files are refused at once (a FIFO never
# blocks, /dev/zero is not read for seconds, a directory says so), a trace
# with non-finite or impossible fields is refused naming the field, and the
# pictures of --out never overwrite an input, are claimed before the trace
# is read and written through temporary files. The table's format is
# tests/hostile.sh's.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
test_start test_hostile_report.sh "$@"
hostile_fixtures

cd fix || exit 1
"$BIN" train --data text.txt --layers 1 --channels 16 --heads 2 --batch 2 --seq 8 --steps 3 \
    --quiet --devices 2 --trace t.json --metrics m.jsonl >/dev/null 2>&1 || echo "cannot make t.json"
mkdir pics
cp t.json pics/timeline.svg
cp m.jsonl pics/loss.svg
# a trace whose first complete event (a line of its own) has a bad field
bad_field() { python3 - "$1" "$2" <<'PY'
import re, sys
field, value = sys.argv[1], sys.argv[2]
lines = open("t.json").read().split("\n")
for i, l in enumerate(lines):
    if '"ph":"X"' in l:
        lines[i] = re.sub('"%s":[-0-9.e]+' % field, '"%s":%s' % (field, value), l, count=1)
        break
open("bad_%s_%s.json" % (field, value.strip("-").replace(".", "")), "w").write("\n".join(lines))
PY
}
bad_field ts nan; bad_field dur inf; bad_field dur -5; bad_field tid -3
printf '{"traceEvents":[' >cut.json
cd "$WORK" || exit 1
same() { echo "cmp -s $1 ../fix/$1"; }

hostile_cases <<EOF
# ---- hangs: inputs that would block or never end ----
1 | FIFO | report fifo
1 | FIFO | report t.json --metrics fifo
1 | FIFO | report t.json --machine fifo
1 | character device | report /dev/zero
# ---- misleading: a directory is not "empty" ----
1 | is a directory | report dir
1 | is a directory | report t.json --metrics dir
1 | - | report empty
1 | - | report cut.json
# ---- silent: impossible fields are refused, naming them ----
1 | ts | report bad_ts_nan.json
1 | dur | report bad_dur_inf.json
1 | dur | report bad_dur_5.json
1 | - | report bad_tid_3.json
# ---- data loss: pictures never overwrite an input ----
2 | is the same file as --trace | report pics/timeline.svg --out pics | $(same pics/timeline.svg)
2 | is the same file as --metrics | report t.json --metrics pics/loss.svg --out pics | $(same pics/loss.svg)
2 | - | report pics/timeline.svg --metrics pics/loss.svg --out pics | $(same pics/timeline.svg) && $(same pics/loss.svg)
# ---- outputs that cannot be written fail before the trace is read ----
1 | is there but is not a directory | report t.json --out empty | $(same empty)
1 | cannot make the directory | report t.json --out nodir/pics | test ! -e nodir
1 | - | report t.json --out /dev/full
0 | - | report t.json --metrics m.jsonl --out new | test -s new/roofline.svg && test -s new/timeline.svg && test -s new/loss.svg && ! ls new/*.tmp
0 | - | report t.json --json | python3 -c 'import json; json.load(open("out.txt"))'
# ---- exit codes ----
2 | needs a trace file | report
2 | - | report t.json --peak-gflops nan
2 | - | report t.json --bandwidth-gbs -1
EOF

# A picture claimed by another process is refused before the trace is read.
hostile_busy "a picture another process is writing is refused, nothing printed" \
    pics/roofline.svg.tmp report t.json --out pics

test_end
