#!/usr/bin/env bash
# test_hostile_schedule.sh — `meshtrain schedule` against hostile inputs, as
# a new user would give them (issue 21): schedule files that crash a reader
# ("stages":0 was a SIGFPE), that hang it (a FIFO), that are huge, empty,
# truncated or of the wrong kind; outputs that are inputs, directories,
# FIFOs, devices or in missing directories; costs that are NaN, infinite or
# huge; flags that do nothing; shape mistakes of the flags (exit 2) against
# mistakes of a file (exit 1). The table's format is tests/hostile.sh's.
#
#   bash tests/test_hostile_schedule.sh <meshtrain binary> [build dir]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
test_start test_hostile_schedule.sh "$@"
hostile_fixtures

# ---- the schedule files ------------------------------------------------------
cd "$WORK/fix" || exit 1
"$BIN" schedule --kind zb-h1 --stages 2 --microbatches 4 --json >good.json || exit 1
"$BIN" schedule --kind 1f1b --stages 2 --microbatches 4 --json >bw.json || exit 1
cp good.json good.json.tmp
head -c 80 good.json >truncated.json
truncate -s 65M big.json                    # sparse: over the 64 MiB a schedule may be
echo '<svg>an older picture</svg>' >old.svg
for k in interleaved 1f1b zb-v dualpipev; do
    echo "{\"kind\":\"$k\",\"stages\":0,\"microbatches\":8,\"ops\":[]}" >"stages0-$k.json"
done
echo '{"kind":"interleaved","stages":0,"microbatches":8,"chunks":2,"ops":[]}' >stages0-chunks.json
echo '{"kind":"interleaved","stages":-1,"microbatches":8,"ops":[]}' >stages-neg.json
echo '{"kind":"1f1b","stages":2147483647,"microbatches":8,"ops":[]}' >stages-huge.json
echo '{"kind":"1f1b","stages":1,"microbatches":0,"ops":[[]]}' >mb0.json
echo '{"kind":"1f1b","stages":1,"microbatches":2147483647,"ops":[[]]}' >mb-huge.json
echo '{"kind":"zb-v","stages":1024,"microbatches":16384,"ops":[]}' >ops-overflow.json
echo '{"kind":"1f1b","devices":0,"stages":1,"microbatches":1,"ops":[[]]}' >devices0.json
echo '{"kind":"1f1b","microbatches":1,"ops":[[]]}' >no-stages.json
echo '{"kind":"1f1b","stages":1,"microbatches":1}' >no-ops.json
echo '{"kind":"zb-v","stages":1,"microbatches":1,"ops":[[]]}' >no-backward.json
echo '{"kind":"zb-h3","stages":1,"microbatches":1,"ops":[[]]}' >kind-h3.json
echo '{"kind":"1f1b","stages":1,"microbatches":1,"ops":[[{"type":"F","mb":0,"chunk":2147483648}]]}' >chunk-huge.json
cd "$WORK" || exit 1

hostile_cases <<'EOF'
# ---- crashes: a division by the stage count before its check (SIGFPE) -------
1 | "stages" must be an integer from 1 to 1024, got 0 | schedule --load stages0-interleaved.json
1 | "stages" must be an integer from 1 to 1024, got 0 | schedule --load stages0-interleaved.json --svg x.svg | ! ls x.svg x.svg.tmp
1 | "stages" must be an integer from 1 to 1024, got 0 | schedule --load stages0-interleaved.json --json
1 | "stages" must be an integer from 1 to 1024, got 0 | schedule --load stages0-interleaved.json --costs 1,2,1,0.5
1 | got 0 | schedule --load stages0-1f1b.json
1 | got 0 | schedule --load stages0-zb-v.json
1 | got 0 | schedule --load stages0-dualpipev.json
1 | got 0 | schedule --load stages0-chunks.json
1 | got -1 | schedule --load stages-neg.json
1 | got 2147483647 | schedule --load stages-huge.json
1 | "microbatches" must be an integer from 1 | schedule --load mb0.json
1 | got 2147483647 | schedule --load mb-huge.json
1 | "ops" has 0 device lists but "stages" is 1024 | schedule --load ops-overflow.json
1 | unknown key "devices" | schedule --load devices0.json
1 | missing "stages" | schedule --load no-stages.json
1 | missing "ops" | schedule --load no-ops.json
1 | "chunk" must be an integer from 0 | schedule --load chunk-huge.json
# ---- exit codes: a file's mistakes are 1, the flags' are 2 --------------------
1 | --load 'no-backward.json': device 0 has no backward | schedule --load no-backward.json
1 | unknown schedule kind 'zb-h3' (kinds: gpipe, 1f1b | schedule --load kind-h3.json
2 | 1f1b needs at least as many microbatches as stages | schedule --kind 1f1b --stages 8 --microbatches 4
2 | interleaved needs m divisible by p | schedule --kind interleaved --stages 4 --microbatches 6
2 | dualpipev needs m >= 2p | schedule --kind dualpipev --stages 4 --microbatches 7
2 | zb-h1 runs 1 chunk per device; got 2 | schedule --kind zb-h1 --chunks 2
2 | more than the 16777216 allowed | schedule --kind 1f1b --stages 1024 --microbatches 1048576
2 | more than the 16777216 allowed | schedule --kind interleaved --stages 1024 --microbatches 1048576 --chunks 64
2 | --stages: '0' is out of range | schedule --kind 1f1b --stages 0
2 | --stages: '2147483648' is out of range | schedule --kind 1f1b --stages 2147483648
2 | --microbatches: '-1' is out of range | schedule --kind 1f1b --microbatches -1
# the unknown kind first, with the kinds, not the microbatches that do not fit it
2 | --kind: 'zb-h3' is not one of gpipe|1f1b|interleaved|zb-h1|zb-h2|zb-v|dualpipev | schedule --kind zb-h3 --stages 4 --microbatches 2
2 | unknown flag '--schedule' | schedule --schedule zb-h3
2 | --load takes the kind | schedule --load good.json --stages 4
# ---- hangs and slow reads: inputs that are not regular files -------------------
1 | schedule 'fifo' is a FIFO | schedule --load fifo
1 | schedule 'fifo' is a FIFO | schedule --load fifo --svg x.svg | ! ls x.svg x.svg.tmp
1 | schedule '/dev/zero' is a character device | schedule --load /dev/zero
1 | schedule 'dir' is a directory | schedule --load dir
1 | more than the 64.0 MiB a schedule may be | schedule --load big.json
1 | byte 0: expected '{' | schedule --load empty
1 | byte 80: expected | schedule --load truncated.json
1 | No such file or directory | schedule --load nope.json
1 | the temporary file of a save | schedule --load good.json.tmp
# ---- silent: costs that are not finite, flags that do nothing ------------------
2 | item 1 ('nan') is not a finite number | schedule --kind 1f1b --costs nan,1,1
2 | item 2 ('inf') is not a finite number | schedule --kind 1f1b --costs 1,inf,1
2 | item 3 ('-inf') is not a finite number | schedule --kind 1f1b --costs 1,1,-inf
2 | item 4 ('1e999') is not a finite number | schedule --kind 1f1b --costs 1,1,1,1e999
2 | item 1 ('NaN') is not a finite number | schedule --load good.json --costs NaN,1,1 --svg x.svg | ! ls x.svg x.svg.tmp
2 | item 2 ('') is not a number | schedule --kind 1f1b --costs 1,,1
2 | more than 4 numbers | schedule --kind 1f1b --costs 1,1,1,1,1
2 | F and B must be > 0 | schedule --kind 1f1b --costs 1,-1,1
2 | each is at most 1e+12 | schedule --load good.json --costs 1e308,1,1 --svg x.svg | ! ls x.svg x.svg.tmp
2 | --w-memory: 'nan' is not a finite number | schedule --kind zb-h1 --w-memory nan
2 | --w-memory counts only for schedules that split the backward | schedule --kind 1f1b --w-memory 0.5
2 | --w-memory counts only for schedules that split the backward | schedule --load bw.json --w-memory 0
2 | COMM 1 counts only between devices | schedule --kind 1f1b --stages 1 --microbatches 2 --costs 1,1,1,1
0 | - | schedule --kind zb-h1 --w-memory 0.5 --costs 1,2,1,0.5
# ---- data loss: outputs that are inputs, or cannot be written ------------------
2 | --svg 'good.json' is the same file as --load 'good.json' | schedule --load good.json --svg good.json | cmp -s good.json ../fix/good.json
2 | the same file under another name | schedule --load good.json --svg ./good.json | cmp -s good.json ../fix/good.json
2 | --svg 'good.json' is saved through the temporary file 'good.json.tmp' | schedule --load good.json.tmp --svg good.json | cmp -s good.json.tmp ../fix/good.json.tmp
2 | standard output is the --load file | schedule --load good.json --json >good.json
2 | names ending in '.tmp' are the temporary files | schedule --kind 1f1b --svg x.svg.tmp | ! ls x.svg*
1 | 'dir': it is a directory | schedule --kind 1f1b --svg dir | ! ls dir.tmp
1 | 'fifo': it is a FIFO | schedule --kind 1f1b --svg fifo | ! ls fifo.tmp
1 | '/dev/full': it is a character device | schedule --kind 1f1b --svg /dev/full
1 | No such file or directory | schedule --kind 1f1b --svg nodir/x.svg | ! ls nodir
1 | cannot write to standard output | schedule --kind 1f1b --json >/dev/full
1 | cannot write to standard output | schedule --kind 1f1b >/dev/full --svg x.svg
# a failed load leaves an older picture whole, and no temporary file
1 | byte 80: expected | schedule --load truncated.json --svg old.svg | cmp -s old.svg ../fix/old.svg && ! ls *.svg.tmp
0 | - | schedule --load good.json --svg old.svg | grep -q 'zb-h1, p = 2, m = 4' old.svg && ! ls *.svg.tmp
0 | - | schedule --load good.json --json --svg new.svg | python3 -c 'import json; json.load(open("out.txt"))' && test -s new.svg && ! ls *.svg.tmp
EOF

# a read-only directory (root writes anyway)
if ro_ok; then
    hostile_cases <<'EOF'
1 | Permission denied | schedule --kind 1f1b --svg ro/x.svg | ! ls ro/x.svg.tmp
EOF
fi

# a second run writing the same picture is refused, and leaves the first's
# temporary file alone (its lock is held here by flock)
if command -v flock >/dev/null; then
    rm -rf case && cp -a fix case && cd case || exit 1
    : >busy.svg.tmp
    flock busy.svg.tmp timeout 60 "$BIN" schedule --kind 1f1b --svg busy.svg >out.txt 2>err.txt
    rc=$?
    if [ $rc -eq 1 ] && grep -q 'another run is writing it' err.txt && [ -e busy.svg.tmp ] &&
       [ ! -e busy.svg ]; then
        ok "a second writer of --svg is refused"
    else
        bad "a second writer of --svg is refused" "exit $rc; $(ls)"
    fi
    cd "$WORK" || exit 1
fi
test_end
