#!/usr/bin/env bash
# test_hostile_bench.sh — `meshtrain bench` against hostile inputs (issue
# 21): numbers that were half-read (--min-bytes 4.5, --devices 2,,4), flags
# that do nothing where they are given (another benchmark's, --devices under
# MPI, --step with one size), the --csv log and the machine file written to
# directories, FIFOs, devices or missing directories, and machine files read
# from FIFOs, devices, directories, huge, empty or truncated files. The
# table's format is tests/hostile.sh's. The benchmarks that do run are the
# smallest there are (bytes, not megabytes; --quick).
#
#   bash tests/test_hostile_bench.sh <meshtrain binary> [build dir]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
test_start test_hostile_bench.sh "$@"
hostile_fixtures

cd "$WORK/fix" || exit 1
# the one probe that runs whole (the slowest command here, under ASan most):
# it replaces a machine file already there, whole, and leaves no .tmp
printf '{"stale": true}\n' >machine.json
"$BIN" bench machine --quick --out machine.json >/dev/null || exit 1
if ! grep -q stale machine.json && ! ls ./*.tmp >/dev/null 2>&1; then
    ok "bench machine --out replaces an existing machine file and leaves no .tmp"
else
    bad "bench machine --out replaces an existing machine file and leaves no .tmp" "$(ls)"
fi
head -c 100 machine.json >truncated.json
truncate -s 2M big.json                     # sparse: over the 1 MiB a machine file may be
printf 'threads,all_reduce,2,8,1.0,0.1,0.1,0,0\nthreads,all_reduce,2,16,1.0,0.1,0.1,0,0\n' >log.csv
cd "$WORK" || exit 1

# the smallest run of bench collectives
SMALL="--devices 2 --min-bytes 8 --max-bytes 64 --ops all_reduce --iters 5 --warmup 0"
MM="--m 8 --n 8 --k 8 --reps 1"
hostile_cases <<EOF
# ---- silent: numbers that were half-read, lists with holes --------------------
2 | --min-bytes '4.5' is not a size | bench collectives --min-bytes 4.5
2 | --max-bytes '1e3' is not a size | bench collectives --max-bytes 1e3
2 | --max-bytes '0x40' is not a size | bench collectives --max-bytes 0x40
2 | --max-bytes '-64' is not a size | bench collectives --max-bytes -64
2 | --max-bytes ' 64' is not a size | bench collectives --max-bytes ' 64'
2 | --max-bytes 'nan' is not a size | bench collectives --max-bytes nan
2 | --max-bytes '99999999999999999999' is out of range | bench collectives --max-bytes 99999999999999999999
2 | --max-bytes '99999999999G' is out of range | bench collectives --max-bytes 99999999999G
2 | is above 4G | bench collectives --max-bytes 8G
2 | need 4 <= min <= max | bench collectives --min-bytes 2
2 | need 4 <= min <= max | bench collectives --min-bytes 1M --max-bytes 1k
2 | --devices '2,,4' has an empty item | bench collectives --devices 2,,4
2 | --devices '2,4,' has an empty item | bench collectives --devices 2,4,
2 | --devices ',2' has an empty item | bench collectives --devices ,2
2 | --devices '0' has an item out of range | bench collectives --devices 0
2 | --devices '2,-4' has a negative item | bench collectives --devices 2,-4
2 | --devices '2.5' has an item that is not an integer | bench collectives --devices 2.5
2 | --devices '4294967298' has an item out of range | bench collectives --devices 4294967298
2 | --devices '1025' has an item out of range | bench collectives --devices 1025
2 | has too many items | bench collectives --devices 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1
2 | --ops 'all_reduce,,all_gather': an empty item | bench collectives --ops all_reduce,,all_gather
2 | unknown collective 'all_sum' | bench collectives --ops all_sum
2 | --step: '1' is out of range | bench collectives --step 1
2 | --m: '4.5' is not an integer | bench matmul --m 4.5
2 | --m: '0' is out of range | bench matmul --m 0
2 | needs over 3 GiB | bench matmul --m 65536 --n 65536 --k 65536
# ---- flags that do nothing where they are given --------------------------------
2 | --step 2: --min-bytes equals --max-bytes | bench collectives --min-bytes 64 --max-bytes 64 --step 2
2 | --devices does nothing with the MPI transport | bench collectives --transport mpi --devices 2
2 | --devices is a flag of \`bench collectives\`; it does nothing in \`bench machine\` | bench machine --devices 2 --quick | ! ls machine.json.tmp
2 | --csv is a flag of \`bench collectives\`; it does nothing in \`bench matmul\` | bench matmul $MM --csv x.csv | ! ls x.csv
2 | --quick is a flag of \`bench machine\`; it does nothing in \`bench matmul\` | bench matmul --quick
2 | --out is a flag of \`bench machine\`; it does nothing in \`bench collectives\` | bench collectives --out m.json
2 | --machine is a flag of \`bench matmul\`; it does nothing in \`bench machine\` | bench machine --machine machine.json
2 | --m is a flag of \`bench matmul\`; it does nothing in \`bench collectives\` | bench collectives --m=8
2 | unknown benchmark 'matmull' | bench matmull
# ---- the --csv log: appended in place, never to a FIFO, a device or a directory -
1 | --csv 'dir' is a directory | bench collectives $SMALL --csv dir
1 | --csv 'fifo' is a FIFO | bench collectives $SMALL --csv fifo
1 | --csv '/dev/full' is a character device | bench collectives $SMALL --csv /dev/full
1 | No such file or directory | bench collectives $SMALL --csv nodir/log.csv | ! ls nodir
0 | - | bench collectives $SMALL --csv log.csv | cmp -s <(head -n 2 log.csv) ../fix/log.csv && [ \$(wc -l <log.csv) -gt 2 ]
0 | - | bench collectives $SMALL --csv new.csv | grep -q '^threads,all_reduce,2,64,' new.csv
# ---- the machine file written: claimed before the probe -------------------------
1 | machine file 'dir': it is a directory | bench machine --quick --out dir | ! ls dir.tmp
1 | machine file 'fifo': it is a FIFO | bench machine --quick --out fifo | ! ls fifo.tmp
1 | machine file '/dev/full': it is a character device | bench machine --quick --out /dev/full
1 | No such file or directory | bench machine --quick --out nodir/m.json | ! ls nodir
2 | names ending in '.tmp' | bench machine --quick --out m.json.tmp | ! ls m.json*
# ---- the machine file read: never blocking, size-checked ------------------------
1 | --machine: machine file 'fifo' is a FIFO | bench matmul $MM --machine fifo
1 | --machine: machine file '/dev/zero' is a character device | bench matmul $MM --machine /dev/zero
1 | --machine: machine file 'dir' is a directory | bench matmul $MM --machine dir
1 | is 2.0 MiB, more than the 1.0 MiB a machine file may be | bench matmul $MM --machine big.json
1 | machine file 'empty', byte 0: expected '{' | bench matmul $MM --machine empty
1 | machine file 'truncated.json', byte | bench matmul $MM --machine truncated.json
1 | machine file 'text.txt', byte 0: expected '{' | bench matmul $MM --machine text.txt
1 | write it with \`meshtrain bench machine\` | bench matmul $MM --machine nope.json
0 | - | bench matmul $MM --machine machine.json | grep -q 'machine file machine.json' out.txt
EOF

# a read-only directory (root writes anyway)
if ro_ok; then
    hostile_cases <<'EOF'
1 | Permission denied | bench machine --quick --out ro/m.json
1 | Permission denied | bench collectives --devices 2 --max-bytes 64 --ops all_reduce --csv ro/log.csv
EOF
fi

# a second probe writing the same machine file is refused at once
if command -v flock >/dev/null; then
    rm -rf case && cp -a fix case && cd case || exit 1
    : >busy.json.tmp
    flock busy.json.tmp timeout 60 "$BIN" bench machine --quick --out busy.json >out.txt 2>err.txt
    rc=$?
    if [ $rc -eq 1 ] && grep -q 'another run is writing it' err.txt && [ ! -e busy.json ]; then
        ok "a second writer of the machine file is refused before the probe"
    else
        bad "a second writer of the machine file is refused before the probe" "exit $rc; $(ls)"
    fi
    cd "$WORK" || exit 1
fi
test_end
