#!/usr/bin/env bash
# test_hostile_train.sh — `meshtrain train` given hostile inputs, as a new
# user gives them (issue 21): outputs that would destroy an input or cannot
# be written are refused before step 1, inputs that would block are refused
# at once, flags that do nothing in their context are errors naming the flag
# that would make them count, mistakes of the command line alone exit 2, and
# two runs writing one output do not destroy each other's work. The table's
# format is tests/hostile.sh's.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
test_start test_hostile_train.sh "$@"
hostile_fixtures

# a tiny GPT: one step is milliseconds
T="--layers 1 --channels 16 --heads 2 --batch 2 --seq 8 --steps 1 --quiet"
cd fix || exit 1
"$BIN" train --data text.txt $T --ckpt-out model.ckpt >/dev/null 2>&1 || echo "cannot make model.ckpt"
"$BIN" train --data text.txt $T --metrics run.jsonl >/dev/null 2>&1 || echo "cannot make run.jsonl"
cd "$WORK" || exit 1
# the after-check: the fixture file $1 is as it was
same() { echo "cmp -s $1 ../fix/$1"; }

hostile_cases <<EOF
# ---- data loss: an output that is an input, or another output ----
2 | --trace 'text.txt' is the same file as --data | train --data text.txt $T --trace text.txt | $(same text.txt)
2 | --trace './text.txt' is the same file as --data 'text.txt' (the same file under another name) | train --data text.txt $T --trace ./text.txt | $(same text.txt)
2 | is the same file as --ckpt-in | train --data text.txt $T --steps 2 --ckpt-in model.ckpt --trace model.ckpt | $(same model.ckpt)
2 | are the same file | train --data text.txt $T --metrics run.jsonl --trace run.jsonl | $(same run.jsonl)
2 | are the same file | train --data text.txt $T --ckpt-out a.ckpt --trace a.ckpt | test ! -e a.ckpt
2 | is saved through the temporary file | train --data text.txt $T --ckpt-out text --trace text.tmp | test ! -e text
2 | is the same file as --data | train --data text.txt $T --metrics text.txt | $(same text.txt)
2 | is the same file as --data | train --data text.txt $T --ckpt-out text.txt | $(same text.txt)
# ---- data loss: an output that cannot be written fails before step 1 ----
1 | --trace: cannot write file '/dev/full': it is a character device | train --data text.txt $T --trace /dev/full | test ! -s out.txt
1 | --trace: cannot write file 'nodir/t.json': creating its temporary file 'nodir/t.json.tmp' failed: No such file | train --data text.txt $T --trace nodir/t.json --ckpt-out c.ckpt | test ! -e c.ckpt
1 | it is a directory | train --data text.txt $T --trace dir | test -d dir
1 | it is a FIFO | train --data text.txt $T --trace fifo | test -p fifo
1 | it is a FIFO | train --data text.txt $T --ckpt-out fifo | test -p fifo
1 | is a FIFO (named pipe), not a regular file | train --data text.txt $T --metrics fifo | test -p fifo
2 | names ending in '.tmp' are the temporary files of saves | train --data text.txt $T --trace t.json.tmp | test ! -e t.json.tmp
# ---- hangs: inputs that would block ----
1 | FIFO | train --data fifo $T
1 | FIFO | train --data text.txt $T --ckpt-in fifo
1 | a directory | train --data dir $T
# ---- crashes and overflows ----
2 | data=65536,tensor=65537 | train --data text.txt $T --mesh data=65536,tensor=65537
2 | - | train --data text.txt $T --mesh data=99999999999999999999
2 | - | train --data text.txt $T --mesh data=0
# ---- silent: flags that do nothing here ----
2 | add --sequence-parallel | train --data text.txt $T --collective-matmul on
2 | add --sequence-parallel | train --data text.txt $T --collective-matmul off --devices 2 --mesh tensor=2
2 | add --precision bf16 | train --data text.txt $T --f32-activations
2 | one device reduces nothing | train --data text.txt $T --grad-reduce bf16
2 | --model mlp | train --model mlp --layers 2 --channels 8 --steps 1 --remat full
2 | --model linreg | train --model linreg --steps 1 --remat attention
2 | add --trace FILE | train --data text.txt $T --trace-steps 5
2 | add --eval-every | train --data text.txt $T --eval-batches 2
2 | add --ckpt-out | train --data text.txt $T --ckpt-every 1
2 | tensor | train --data text.txt $T --sequence-parallel
# ---- exit codes: the command line alone decides ----
2 | - | train --data text.txt --layers 1 --channels 16 --heads 3 --batch 2 --seq 8 --steps 1
2 | - | train --data text.txt --layers 1 --channels 16 --heads 2 --batch 2 --seq 128 --max-seq 64 --steps 1
2 | - | train --data text.txt $T --mesh foo=2 --devices 2
2 | - | train --data text.txt $T --mesh data=2,data=2 --devices 4
2 | - | train --data text.txt $T --mesh data= --devices 2
2 | - | train --data text.txt $T --mesh data=3 --devices 2
2 | - | train --data text.txt $T --zero 1 --mesh tensor=2 --devices 2
2 | - | train --data text.txt $T --zero 1
2 | zb-h3 | train --data text.txt $T --mesh pipe=2 --devices 2 --schedule zb-h3
2 | - | train --data text.txt $T --schedule 1f1b
2 | - | train --data text.txt $T --mesh pipe=2 --devices 2 --chunks 3 --schedule 1f1b
2 | --model gpt or --model llama only | train --model mlp --steps 1 --heads 2
2 | --model mlp trains on examples, not sequences: drop --seq | train --model mlp --steps 1 --seq 4
2 | --layers applies to --model gpt or --model mlp or --model llama only, not to --model linreg | train --model linreg --steps 1 --layers 2
2 | - | train --data text.txt $T --steps 1.5
EOF

# ---- a failed trace still leaves the checkpoint ----
# Files over 100 KiB fail with EFBIG (SIGXFSZ ignored): the 20-step trace
# (~160 KB) cannot be written, the 43 KB checkpoint can. The run says so,
# exits 1, and leaves the checkpoint and no temporary file.
cd fix || exit 1
(trap '' XFSZ; ulimit -f 100; exec "$BIN" train --data text.txt --layers 1 --channels 8 --heads 1 \
    --batch 2 --seq 8 --steps 20 --quiet --ckpt-out big.ckpt --trace big.json) >out.txt 2>err.txt
rc=$?
if [ $rc -eq 1 ] && grep -q "trace.*big.json" err.txt && "$BIN" sample --ckpt big.ckpt \
        --tokens 2 >/dev/null 2>&1 && [ ! -e big.json ] && ! ls ./*.tmp >/dev/null 2>&1; then
    ok "a trace that cannot be written fails the run but not its checkpoint"
else
    bad "a failed trace and the checkpoint" "exit $rc; $(ls); $(cat err.txt)"
fi
rm -f big.ckpt
cd "$WORK" || exit 1

# ---- data loss: two runs writing one output ----
# The first run holds its outputs from its start; the second is refused at
# its start, naming the output, and the first run's checkpoint is whole.
cd fix || exit 1
"$BIN" train --data text.txt --layers 1 --channels 16 --heads 2 --batch 2 --seq 8 --steps 1000000 \
    --quiet --ckpt-out shared.ckpt --metrics shared.jsonl >first.out 2>first.err &
first=$!
for _ in $(seq 1 200); do [ -e shared.ckpt.tmp ] && [ -s shared.jsonl ] && break; sleep 0.1; done
"$BIN" train --data text.txt $T --ckpt-out shared.ckpt >out.txt 2>err.txt
rc=$?
if [ $rc -eq 1 ] && grep -q -- "--ckpt-out: cannot write file 'shared.ckpt': another run is writing it" err.txt; then
    ok "a second run writing the first's --ckpt-out is refused at its start"
else
    bad "a second --ckpt-out writer" "exit $rc: $(cat err.txt)"
fi
"$BIN" train --data text.txt $T --metrics shared.jsonl >out.txt 2>err.txt
rc=$?
if [ $rc -eq 1 ] && grep -q -- "--metrics 'shared.jsonl': another run is writing it" err.txt &&
    [ -s shared.jsonl ]; then
    ok "a second run writing the first's --metrics is refused, the log kept"
else
    bad "a second --metrics writer" "exit $rc: $(cat err.txt)"
fi
kill -TERM $first
wait $first
rc=$?
if [ $rc -eq 143 ] && "$BIN" sample --ckpt shared.ckpt --tokens 4 >/dev/null 2>err.txt; then
    ok "the first run saved a whole checkpoint (sampled from it)"
else
    bad "the first run's checkpoint" "exit $rc; $(cat first.err err.txt)"
fi
[ -e shared.ckpt.tmp ] && bad "temporary files" "shared.ckpt.tmp left behind" || ok "no temporary file left"
cd "$WORK" || exit 1

test_end
