#!/usr/bin/env bash
# test_shards_cli.sh — `meshtrain train --data` on llm.c's sharded corpora (issue
# 25 §6): a directory or a quoted glob of *_train_*.bin / *_val_*.bin.
#
#   bash tests/test_shards_cli.sh <meshtrain binary> [<build dir>]
#
# The reference is the one-file dataset of the shards' concatenation, with
# --val-frac holding out exactly the val shard: the same losses and val
# losses to the digit, on one device and on data=2, and a resume across the
# shards continues at the same token. Then bad shards are refused naming
# the shard, and 4 GiB of (sparse) shards train under a 1 GiB address-space
# limit (ulimit -v) with a bounded peak RSS (512 MiB without the limit under
# a sanitizer, which cannot run under one).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_shards_cli.sh "$@"

if ! command -v python3 >/dev/null; then
    echo "skipped: python3 missing (it writes the shards)"
    exit 0
fi

# shard PATH N SEED [SPARSE_N]: an llm.c token file of N tokens (or a header
# for SPARSE_N tokens, N real ones at its start and the rest a hole)
shard() {
    python3 - "$@" <<'EOF'
import struct, sys
path, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
total = int(sys.argv[4]) if len(sys.argv) > 4 else n
with open(path, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, total, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *[(i * 37 + seed * 11 + i // 7) % 97 for i in range(n)]))
    f.truncate(1024 + 2 * total)
EOF
}
# losses FILE: "step loss [val_loss]" a line from a --metrics log
losses() { sed -E 's/.*"step":([0-9]+).*"loss":([^,}]*)(.*"val_loss":([^,}]*))?.*/\1 \2 \4/' "$1"; }

mkdir corpus
shard corpus/tiny_val_000000.bin 320 9
i=1
for n in 200 300 250 210; do shard corpus/tiny_train_00000$i.bin $n $i; i=$((i + 1)); done
echo "llm.c leaves other files beside its shards" >corpus/README
# the concatenation: train shards in name order, then the val shard (the last quarter)
python3 - <<'EOF'
import struct
toks = b""
for name in ["tiny_train_000001", "tiny_train_000002", "tiny_train_000003", "tiny_train_000004",
             "tiny_val_000000"]:
    toks += open("corpus/%s.bin" % name, "rb").read()[1024:]
open("all.bin", "wb").write(struct.pack("<256i", 20240520, 1, len(toks) // 2, *([0] * 253)) + toks)
EOF

M="--layers 1 --channels 32 --heads 2 --max-seq 16 --seq 16 --batch 8 --threads 1 --quiet"
M="$M --eval-every 4 --eval-batches 2"
run() {   # run NAME ARGS...: trains, the metrics log in NAME.jsonl
    local name=$1
    shift
    if "$BIN" train $M --metrics "$name.jsonl" "$@" >out.txt 2>err.txt; then ok "train $*"
    else bad "train $*" "exit $?"; fi
}
same() {   # same NAME A B: the losses of two logs
    if [ -s "$2.jsonl" ] && cmp -s <(losses "$2.jsonl") <(losses "$3.jsonl"); then ok "$1"
    else bad "$1" "$(diff <(losses "$2.jsonl") <(losses "$3.jsonl") | head -4 | tr '\n' ' ')"; fi
}

# ---- the shards are their concatenation: 8 steps of 128 tokens cross every shard
run one --data all.bin --val-frac 0.25 --steps 8
run dir --data corpus --steps 8
run glob --data 'corpus/tiny_*.bin' --steps 8
run dp --data corpus --steps 8 --devices 2 --mesh data=2
same "a directory of shards trains as the one file (losses and val losses)" one dir
same "a glob of shards trains as the one file" one glob
grep -q val_loss dir.jsonl && ok "the val shard is evaluated" || bad "val" "no val_loss in dir.jsonl"
# data=2 sums in another order: the same losses to 4 decimals
if cmp -s <(losses one.jsonl | awk '{printf "%d %.4f %.4f\n", $1, $2, $3}') \
          <(losses dp.jsonl | awk '{printf "%d %.4f %.4f\n", $1, $2, $3}'); then
    ok "data=2 on the shards trains the one-device run"
else bad "data=2" "$(paste <(losses one.jsonl) <(losses dp.jsonl) | head -3 | tr '\n' ' ')"; fi

# ---- resume: 4 steps, then 4 more on data=2, continue at the same token -----
run first --data corpus --steps 4 --ckpt-out run.ckpt
run second --data corpus --steps 8 --ckpt-in run.ckpt --devices 2 --mesh data=2
cat first.jsonl second.jsonl >resumed.jsonl
if cmp -s <(losses one.jsonl | awk '{printf "%d %.4f\n", $1, $2}') \
          <(losses resumed.jsonl | awk '{printf "%d %.4f\n", $1, $2}'); then
    ok "4 steps + 4 resumed on data=2 are the 8 steps"
else bad "resume" "$(paste <(losses one.jsonl) <(losses resumed.jsonl) | tr '\n' ' ')"; fi

# ---- refusals: each names the shard or the pattern --------------------------
mkdir empty broken
shard broken/b_train_000001.bin 64 1
printf 'not tokens at all' >broken/b_train_000002.bin
expect_fail "a directory without train shards" 1 "'empty' is a directory with no llm.c train shards" \
    "$BIN" train $M --data empty --steps 1
expect_fail "a shard that is not a token file is named" 1 \
    "shard 'broken/b_train_000002.bin' is not an llm.c token file" "$BIN" train $M --data broken --steps 1
shard broken/b_train_000002.bin 64 2
head -c 1100 broken/b_train_000002.bin >broken/b_train_000003.bin
expect_fail "a truncated shard is named" 1 "shard 'broken/b_train_000003.bin' is truncated" \
    "$BIN" train $M --data broken --steps 1
expect_fail "--val-frac with shards is refused" 2 "names shards, whose \*_val_\*.bin files are the validation split: drop --val-frac" \
    "$BIN" train $M --data corpus --val-frac 0.2 --steps 1
# with the vocabulary given every token is checked against it at open: a token past it
# fails before step 1, named by shard, index and id (seed 1's third token is
# (2*37 + 11) % 97 = 85; the largest of the corpus is 96)
expect_fail "a token past --vocab is named before step 1" 2 \
    "shard 'corpus/tiny_train_000001.bin' holds id 85 at token 2, outside the model's vocabulary of 50 .*largest id is 96" \
    "$BIN" train $M --data corpus --vocab 50 --steps 1
expect_fail "a glob that matches nothing" 1 "pattern 'nowhere/\*_train_\*.bin' matches no file" \
    "$BIN" train $M --data 'nowhere/*_train_*.bin' --steps 1
expect_fail "a glob match that is no shard" 2 "'corpus/README', which is neither" \
    "$BIN" train $M --data 'corpus/*' --steps 1

# ---- larger than the address space: 4 GiB of shards under ulimit -v 1 GiB ---
# AddressSanitizer reserves terabytes of shadow address space at start, so no
# address-space limit can be set under it: a sanitizer build runs without
# the limit (the peak RSS still bounds what it holds), and on 512 MiB of
# shards (the same code; the 4 GiB scan is the release build's: its subject
# is the limit, and it took 20 s of the sanitizer run)
N=$((64 << 20))   # 64M tokens, 128 MiB a shard, 32 shards
SIZE="4 GiB"
if ldd "$BIN" 2>/dev/null | grep -Eq 'lib(a|t)san'; then
    LIMIT=unlimited; WHAT="without an address-space limit (a sanitizer build)"
    N=$((8 << 20)); SIZE="512 MiB"
else LIMIT=$((1 << 20)); WHAT="under a 1 GiB address-space limit"; fi
mkdir big
shard big/big_val_000000.bin 4096 0 $N
for s in $(seq 1 31); do shard "$(printf 'big/big_train_%06d.bin' "$s")" 4096 "$s" $N; done
if [ -x /usr/bin/time ]; then TIME=(/usr/bin/time -f "%M" -o rss.txt); else TIME=(); fi
# --vocab 97, as a user gives --vocab 50257 for FineWeb: the shards are read once at open
# (pread, 1 MiB at a time: the scan adds nothing to the peak RSS), every id checked
if (ulimit -v $LIMIT; "${TIME[@]}" "$BIN" train $M --data big --vocab 97 --steps 3 \
        --devices 2 --mesh data=2 >out.txt 2>err.txt); then
    ok "$SIZE of shards train $WHAT"
else bad "$SIZE of shards $WHAT" "exit $?"; fi
if [ -s rss.txt ]; then
    rss=$(tail -1 rss.txt)
    [ "$rss" -lt $((400 << 10)) ] && ok "peak RSS $((rss >> 10)) MiB with $SIZE of shards" ||
        bad "peak RSS" "$((rss >> 10)) MiB"
fi

test_end
