#!/usr/bin/env bash
# test_hostile_example.sh — `meshtrain example linreg` given hostile inputs
# (issue 21): its one output, --trace, keeps the output contract of every
# command (refused before the run when it cannot be written or names a
# temporary file, claimed so a second writer is refused, written through a
# temporary file), and its numbers are checked. The table's format is
# tests/hostile.sh's.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
test_start test_hostile_example.sh "$@"
hostile_fixtures

hostile_cases <<'EOF2'
# ---- outputs that cannot be written fail before the run ----
1 | it is a character device | example linreg --trace /dev/full | test ! -s out.txt
1 | it is a FIFO | example linreg --trace fifo | test -p fifo
1 | it is a directory | example linreg --trace dir | test -d dir
1 | No such file | example linreg --trace nodir/t.json | test ! -e nodir
2 | names ending in '.tmp' | example linreg --trace t.json.tmp | test ! -e t.json.tmp
0 | - | example linreg --steps 3 --devices 2 --trace t.json | python3 -c 'import json; json.load(open("t.json"))' && ! ls ./*.tmp
# ---- numbers ----
2 | - | example linreg --batch 3 --devices 2
2 | - | example linreg --steps 0
2 | - | example linreg --lr nan
2 | - | example linreg --devices 2.5
2 | unknown | example quadratic
EOF2

# a trace another process is writing is refused before the run
hostile_busy "a --trace another process is writing is refused before the run" \
    held.json.tmp example linreg --trace held.json

test_end
