#!/usr/bin/env bash
# test_bench_cli.sh — `meshtrain bench machine` and `bench matmul`: the probe
# prints its table and writes a machine file that reads back (through
# `bench matmul --machine`, which uses mt_machine_read), its figures are
# positive and sane, the matmul prints both rates and their ratio, and bad
# flags exit 2.
#   bash tests/test_bench_cli.sh <meshtrain binary> [build dir]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_bench_cli.sh "$@"

# ---- bench machine --quick -------------------------------------------------
timeout 120 "$BIN" bench machine --quick --out m.json >out.txt 2>err.txt
rc=$?
if [ $rc -eq 0 ] && grep -q '^sgemm 256^3' out.txt && grep -q '^sgemm 256^3 cold' out.txt &&
   grep -q '^FMA peak' out.txt &&
   grep -q '^triad' out.txt && grep -q '^threads' out.txt && grep -q '^nominal' out.txt &&
   grep -q 'written to m.json' out.txt; then
    ok "machine --quick prints the table"
else
    bad "machine --quick prints the table" "exit $rc: $(head -5 out.txt)"
fi
# the figures, from the file (one key per line at the top level)
num() { sed -n "s/.*\"$1\": {\"1\": \([0-9.e+-]*\), \"all\": \([0-9.e+-]*\).*/\1 \2/p" m.json; }
read -r sg1 sgall <<<"$(num sgemm_gflops)"
read -r tr1 trall <<<"$(num triad_gbs)"
read -r fm1 fmall <<<"$(num fma_gflops)"
read -r co1 coall <<<"$(num sgemm_cold_gflops)"
# (no ratio between them and no floor: each is a best-of-few on a shared
# machine, and under a sanitizer beside other tests one probe's sgemm read
# 4 GFLOP/s and one triad 0.88 GB/s; a floor is a timed bound, bench/'s)
if awk -v a="$sg1" -v b="$sgall" -v c="$tr1" -v d="$trall" -v e="$fm1" -v f="$fmall" \
       -v g="$co1" -v h="$coall" \
       'BEGIN { exit !(a > 0 && b > 0 && c > 0 && d > 0 && e > 0 && f > 0 && g > 0 && h > 0) }'; then
    ok "machine figures are sane (sgemm $sg1/$sgall, cold $co1/$coall, triad $tr1/$trall GB/s, FMA $fm1/$fmall)"
else
    bad "machine figures are sane" "sgemm '$sg1' '$sgall' cold '$co1' '$coall' triad '$tr1' '$trall' fma '$fm1' '$fmall': $(cat m.json)"
fi
if grep -Eq '"bf16_dot_gflops": \{"1": ([0-9]|null)' m.json; then
    ok "machine file: the bf16 dot peak (or null without AVX512-BF16)"
else
    bad "machine file: bf16 dot peak" "$(grep bf16 m.json)"
fi
if grep -q '"mpi": null' m.json && grep -Eq '"latency_us": [0-9]' m.json &&
   grep -Eq '"measured_at": "[0-9]{4}-[0-9]{2}-[0-9]{2}T' m.json; then
    ok "machine file: threads all-reduce, no mpi, a date"
else
    bad "machine file: threads all-reduce, no mpi, a date" "$(cat m.json)"
fi

# ---- bench matmul ------------------------------------------------------------
timeout 120 "$BIN" bench matmul --m 256 --n 256 --k 256 --machine m.json >out.txt 2>err.txt
rc=$?
if [ $rc -eq 0 ] && grep -Eq '^meshtrain \(graph, op\) +[0-9.]+ +[0-9.]+$' out.txt &&
   grep -Eq '^Open BLAS cblas_sgemm +[0-9.]+ +[0-9.]+$' out.txt &&
   grep -Eq '^ratio engine/sgemm [0-9.]+: (PASS|MISS)' out.txt &&
   grep -q 'roofline bound' out.txt && grep -q 'machine file m.json' out.txt; then
    ok "matmul prints both rates, the ratio and the roofline (the machine file read back)"
else
    bad "matmul prints both rates, the ratio and the roofline" "exit $rc: $(cat out.txt)"
fi
timeout 120 "$BIN" bench matmul --m 64 --n 32 --k 16 --threads 1 --reps 3 >out.txt 2>err.txt
if [ $? -eq 0 ] && grep -q '1 thread,' out.txt && grep -q '^ratio' out.txt; then
    ok "matmul: a non-square shape on 1 thread"
else
    bad "matmul: a non-square shape on 1 thread" "$(cat out.txt)"
fi

# ---- failures ------------------------------------------------------------------
echo '{"cpu": "x", "cores": "2"}' >broken.json
expect_fail "matmul: a malformed machine file names the byte" 1 "broken.json', byte 22: expected a number" \
    timeout 60 "$BIN" bench matmul --m 8 --n 8 --k 8 --machine broken.json
expect_fail "matmul: a missing machine file" 1 "cannot read the machine file 'nope.json'" \
    timeout 60 "$BIN" bench matmul --m 8 --n 8 --k 8 --machine nope.json
expect_fail "matmul: --m 0" 2 "--m: '0' is out of range" timeout 60 "$BIN" bench matmul --m 0
expect_fail "matmul: too large" 2 "over 3 GiB" timeout 60 "$BIN" bench matmul --m 65536 --n 65536 --k 65536
expect_fail "machine: unknown flag" 2 "unknown flag '--quik' \(did you mean --quick\?\)" \
    timeout 60 "$BIN" bench machine --quik
expect_fail "machine: --out without a value" 2 "--out needs a value" timeout 60 "$BIN" bench machine --out
expect_fail "machine: an unwritable --out" 1 "cannot write machine file 'no/such/dir/m.json'.*No such file or directory" \
    sh -c "\"$BIN\" bench machine --quick --out no/such/dir/m.json >/dev/null 2>err2.txt; rc=\$?; cat err2.txt >&2; exit \$rc"
expect_fail "bench: an unknown benchmark" 2 "unknown benchmark 'machin' \(benchmarks: collectives, machine, matmul\)" \
    timeout 60 "$BIN" bench machin

timeout 60 "$BIN" bench --help >out.txt 2>err.txt
if [ $? -eq 0 ] && grep -q 'machine' out.txt && grep -q 'matmul' out.txt; then
    ok "bench --help names machine and matmul"
else
    bad "bench --help names machine and matmul" "$(head -5 out.txt)"
fi
timeout 60 "$BIN" bench machine --help >out.txt 2>err.txt
if [ $? -eq 0 ] && grep -q -- '--quick' out.txt; then ok "bench machine --help"; else bad "bench machine --help" "$(head -3 out.txt)"; fi

test_end
