#!/usr/bin/env bash
# test_hostile_shards.sh — `meshtrain train` on llm.c's sharded corpora (a
# directory or a quoted glob of *_train_*.bin / *_val_*.bin) given hostile
# inputs, as a new user gives them (issue 37, findings 1, 2, 3 and 15):
#   - an output that is a shard (or a save's temporary file that is one) is
#     refused before any work, naming the flag and the shard, as an output
#     that is a single --data file is;
#   - a shard holding an id past --vocab is found at the start (every token
#     is read once at open), naming the shard, the token's index and its id,
#     however far into the corpus it is and however short the run;
#   - a "<out>.tmp" that is not empty and does not start as a file meshtrain
#     saves (a user's own notes.ckpt.tmp) is refused and left alone; the
#     leftovers of killed saves are still taken over;
#   - --eval-every on shards without a val shard says what to do with the
#     shards, not to use --val-frac, which shards refuse.
# The table's format is tests/hostile.sh's.
#
#   bash tests/test_hostile_shards.sh <meshtrain binary> [<build dir>]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
test_start test_hostile_shards.sh "$@"

if ! command -v python3 >/dev/null; then
    echo "skipped: python3 missing (it writes the shards)"
    exit 0
fi
hostile_fixtures

# shard PATH N SEED [INDEX ID]: an llm.c token file (256 int32 header: magic
# 20240520, version 1, N; then N uint16) of ids below 97, but token INDEX = ID
shard() {
    python3 - "$@" <<'EOF'
import struct, sys
path, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
toks = [(i * 37 + seed * 11 + i // 7) % 97 for i in range(n)]
if len(sys.argv) > 5:
    toks[int(sys.argv[4])] = int(sys.argv[5])
with open(path, "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *toks))
EOF
}

cd fix || exit 1
mkdir sh nov badv badval tinyval
# sh: a val shard and three train shards of 400 tokens (a step reads 16)
shard sh/x_val_000000.bin 300 9
for i in 1 2 3; do shard "sh/x_train_00000$i.bin" 400 "$i"; done
echo "llm.c leaves other files beside its shards" >sh/README
# nov: train shards only
for i in 1 2; do shard "nov/x_train_00000$i.bin" 400 "$i"; done
# badv: id 150 at token 123 of the second train shard (step 34's batch; the
# largest id anywhere is 160, at token 7 of the third)
shard badv/x_val_000000.bin 300 9
shard badv/x_train_000001.bin 400 1
shard badv/x_train_000002.bin 400 2 123 150
shard badv/x_train_000003.bin 400 3 7 160
# badval: the train shards are fine, the val shard holds id 99 at token 250
shard badval/x_val_000000.bin 300 9 250 99
shard badval/x_train_000001.bin 400 1
# tinyval: a val shard of 5 tokens, shorter than one window of T+1 = 9
shard tinyval/x_val_000000.bin 5 9
shard tinyval/x_train_000001.bin 400 1
# a shard's hard link at a save's temporary name
ln sh/x_train_000001.bin hard.ckpt.tmp
ln -s sh/x_train_000003.bin link.bin

# a tiny GPT: one step is milliseconds
T="--layers 1 --channels 16 --heads 2 --batch 2 --seq 8 --steps 1 --quiet"
"$BIN" train --data text.txt $T --ckpt-out model.ckpt >/dev/null 2>&1 || echo "cannot make model.ckpt"
"$BIN" train --data text.txt $T --trace trace.json >/dev/null 2>&1 || echo "cannot make trace.json"
# a user's own files at the temporary names of outputs
echo "my notes: do not delete" >notes.ckpt.tmp
echo "my notes: do not delete" >notes.json.tmp
echo "my notes: do not delete" >notes.bin.tmp
# what killed saves leave: the first 4 KiB of a checkpoint and of a trace
head -c 4096 model.ckpt >partial.ckpt.tmp
head -c 100 trace.json >partial.json.tmp
cd "$WORK" || exit 1

# the after-checks: the fixture file $1 is as it was; every shard of $1 is
same() { echo "cmp -s $1 ../fix/$1"; }
shards_same() { echo "diff -r $1 ../fix/$1"; }

hostile_cases <<EOF
# ---- 1. data loss: an output that is a shard of --data DIR or a glob ----
2 | --ckpt-out 'sh/x_train_000002.bin' is the same file as shard 'sh/x_train_000002.bin' of --data 'sh' | train --data sh $T --ckpt-out sh/x_train_000002.bin | $(shards_same sh)
2 | --ckpt-out 'sh/x_val_000000.bin' is the same file as shard 'sh/x_val_000000.bin' of --data 'sh' | train --data sh $T --ckpt-out sh/x_val_000000.bin | $(shards_same sh)
2 | --metrics 'sh/x_train_000001.bin' is the same file as shard 'sh/x_train_000001.bin' of --data 'sh' | train --data sh $T --metrics sh/x_train_000001.bin | $(shards_same sh)
2 | --trace 'sh/x_train_000003.bin' is the same file as shard | train --data sh $T --trace sh/x_train_000003.bin | $(shards_same sh)
2 | --llmc-out 'sh/x_val_000000.bin' is the same file as shard | train --data sh $T --llmc-out sh/x_val_000000.bin | $(shards_same sh)
2 | of --data 'sh/x_*.bin' | train --data 'sh/x_*.bin' $T --ckpt-out sh/x_train_000002.bin | $(shards_same sh)
2 | of --data 'sh/*_train_*.bin' | train --data 'sh/*_train_*.bin' $T --metrics sh/x_train_000003.bin | $(shards_same sh)
2 | (the same file under another name) | train --data sh $T --ckpt-out ./sh/../sh/x_train_000002.bin | $(shards_same sh)
2 | --metrics 'link.bin' is the same file as shard 'sh/x_train_000003.bin' | train --data sh $T --metrics link.bin | $(shards_same sh)
2 | is saved through the temporary file 'hard.ckpt.tmp', which is shard 'sh/x_train_000001.bin' | train --data sh $T --ckpt-out hard.ckpt | $(shards_same sh) && test ! -e hard.ckpt
2 | --ckpt-out 'sh/x_train_000002.bin' is the same file as shard | train --data sh $T --steps 2 --ckpt-in model.ckpt --ckpt-out sh/x_train_000002.bin | $(shards_same sh) && $(same model.ckpt)
# a new name beside the shards, and the directory's other files, are no shards
0 | - | train --data sh $T --ckpt-out sh/x_train_000009.ckpt --metrics sh/run.jsonl | test -s sh/x_train_000009.ckpt && cmp -s sh/README ../fix/sh/README
# ---- 2. a shard holding an id past --vocab: found at the start ----
2 | shard 'badv/x_train_000002.bin' holds id 150 at token 123, outside the model's vocabulary of 100 (ids 0..99) | train --data badv $T --vocab 100 --ckpt-out m.ckpt | test ! -e m.ckpt
2 | its largest id is 160); raise V (--vocab) to at least 161 | train --data 'badv/x_*.bin' $T --vocab 100 --metrics m.jsonl | test ! -s m.jsonl
2 | shard 'badval/x_val_000000.bin' holds id 99 at token 250 | train --data badval $T --vocab 97 --eval-every 1
2 | shard 'badv/x_train_000002.bin' holds id 150 at token 123 | train --model llama --data badv --layers 1 --channels 16 --heads 2 --batch 2 --seq 8 --steps 1 --quiet --vocab 100
2 | shard 'badv/x_train_000002.bin' holds id 150 at token 123 | train --data badv $T --vocab 100 --devices 2 --mesh data=2
# the vocabulary the ids need passes, as does none given (taken from the data)
0 | - | train --data badv $T --vocab 161
0 | - | train --data badv $T
# ---- 3. a user's own <out>.tmp is not a save's leftover ----
1 | its temporary name 'notes.ckpt.tmp' holds a file of 24 bytes that no save of meshtrain left | train --data text.txt $T --ckpt-out notes.ckpt | $(same notes.ckpt.tmp) && test ! -e notes.ckpt
1 | its temporary name 'notes.json.tmp' holds a file | train --data text.txt $T --trace notes.json | $(same notes.json.tmp) && test ! -e notes.json
1 | its temporary name 'notes.bin.tmp' holds a file | train --data text.txt $T --llmc-out notes.bin | $(same notes.bin.tmp) && test ! -e notes.bin
1 | its temporary name 'notes.ckpt.tmp' holds a file | train --data text.txt $T --ckpt-out notes.ckpt --metrics m.jsonl | $(same notes.ckpt.tmp) && test ! -e m.jsonl
# the leftovers of killed saves are taken over, and gone after the run
0 | - | train --data text.txt $T --ckpt-out partial.ckpt | test -s partial.ckpt && test ! -e partial.ckpt.tmp
0 | - | train --data text.txt $T --trace partial.json | test -s partial.json && test ! -e partial.json.tmp
# ---- 15. --eval-every on shards without a val shard ----
2 | have none: no *_val_*.bin file | train --data nov $T --eval-every 1
2 | add a *_val_* shard beside the train shards, or set eval_every to 0 (drop --eval-every) | train --data 'nov/*_train_*.bin' $T --eval-every 5
2 | add a *_val_* shard | train --data 'sh/*_train_*.bin' $T --eval-every 1
2 | but the *_val_* shards of tinyval hold 5 | train --data tinyval $T --eval-every 1
EOF

test_end
