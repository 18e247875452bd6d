#!/usr/bin/env bash
# test_cli.sh — the meshtrain program against bad input, then a happy path.
#
#   bash tests/test_cli.sh <meshtrain binary> [<build dir>]
#
# Every bad input must end in one line "meshtrain: <message>" on stderr that
# names what was wrong, with exit 2 for usage errors and 1 for failures; never
# a crash, a hang (each run is under `timeout 60`) or a sanitizer report.
# Binary files (llm.c headers, a patched checkpoint) are written with printf
# and od so the test needs nothing beyond bash and coreutils.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_cli.sh "$@"

# expect NAME CODE REGEX ARGS...: runs the program with ARGS and checks the
# exit code, that stderr is exactly one "meshtrain: " line, and that the line
# matches REGEX (extended, case-insensitive).
expect() {
    local name=$1 code=$2 re=$3
    shift 3
    timeout 60 "$BIN" "$@" >out.txt 2>err.txt
    local rc=$? why=""
    [ "$rc" -eq "$code" ] || why="exit $rc, want $code"
    [ "$(wc -l <err.txt)" -eq 1 ] || why="${why:+$why; }stderr has $(wc -l <err.txt) lines, want 1"
    head -n1 err.txt | grep -q '^meshtrain: ' || why="${why:+$why; }stderr does not start 'meshtrain: '"
    grep -Eqi -- "$re" err.txt || why="${why:+$why; }stderr does not match /$re/"
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
}

# succeed NAME ARGS...: exit 0 and a silent stderr.
succeed() {
    local name=$1
    shift
    timeout 60 "$BIN" "$@" >out.txt 2>err.txt
    local rc=$?
    if [ "$rc" -ne 0 ]; then bad "$name" "exit $rc, want 0"
    elif [ -s err.txt ]; then bad "$name" "stderr is not empty"
    else ok "$name"; fi
}

# check NAME CONDITION-DESCRIPTION COMMAND...: a plain assertion.
check() {
    local name=$1 what=$2
    shift 2
    if "$@"; then ok "$name"; else : >err.txt; bad "$name" "$what"; fi
}

# ---- binary helpers --------------------------------------------------------

# le32 V: the 4 little-endian bytes of the 32-bit integer V.
le32() {
    local v=$1
    printf "\\$(printf %03o $((v & 255)))\\$(printf %03o $(((v >> 8) & 255)))"
    printf "\\$(printf %03o $(((v >> 16) & 255)))\\$(printf %03o $(((v >> 24) & 255)))"
}
zeros() { head -c "$1" /dev/zero; }
# u32_at FILE OFFSET: the little-endian u32 stored there.
u32_at() {
    local b
    b=($(od -An -v -tu1 -j "$2" -N 4 "$1"))
    echo $((b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24))
}
# put_u32 FILE OFFSET V: overwrites 4 bytes in place.
put_u32() { le32 "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
# crc32 FILE N: CRC-32 (IEEE, as zlib) of the first N bytes.
crc32() {
    local crc=$((0xFFFFFFFF)) b k
    for b in $(head -c "$2" "$1" | od -An -v -tu1); do
        crc=$((crc ^ b))
        for k in 1 2 3 4 5 6 7 8; do
            if ((crc & 1)); then crc=$(((crc >> 1) ^ 0xEDB88320)); else crc=$((crc >> 1)); fi
        done
    done
    echo $((crc ^ 0xFFFFFFFF))
}
# llmc_header MAGIC VERSION: an llm.c GPT-2 header (256 int32) for a tiny model.
llmc_header() {
    le32 "$1"; le32 "$2"
    le32 16; le32 256; le32 1; le32 2; le32 16; le32 256   # maxT V L NH C Vp
    zeros $((248 * 4))
}

# ---- inputs ----------------------------------------------------------------

for i in $(seq 400); do echo "line $i: the quick brown fox jumps over the lazy dog"; done >data.txt
TINY=(--layers 1 --channels 16 --heads 2 --max-seq 16 --seq 16 --batch 4 --threads 1)

# ---- usage errors: exit 2 ----------------------------------------------------

expect "unknown flag"              2 "unknown flag '--bogus'.*meshtrain train --help" \
       train --data data.txt --bogus 1
expect "unknown flag, suggestion"  2 "unknown flag '--stesp'.*did you mean --steps" \
       train --data data.txt --stesp 5
expect "missing value (last)"      2 "--steps needs a value" train --data data.txt --steps
expect "missing value (flag next)" 2 "--data needs a value" train --data --steps 5
expect "missing value (--x=)"      2 "--lr needs a value" train --data data.txt --lr=
expect "non-numeric integer"       2 "--steps: 'abc' is not an integer.*\[1, " \
       train --data data.txt --steps abc
expect "trailing junk"             2 "--batch: '8x' is not an integer" train --data data.txt --batch=8x
expect "non-numeric float"         2 "--lr: 'fast' is not a number" train --data data.txt --lr fast
expect "nan is refused"            2 "--lr: 'nan' is not a finite number" train --data data.txt --lr nan
expect "negative steps"            2 "--steps: '-5' is out of range; expected an integer in \[1, " \
       train --data data.txt --steps -5
expect "integer overflow"          2 "--batch: '99999999999999999999' is out of range" \
       train --data data.txt --batch 99999999999999999999
expect "fraction out of range"     2 "--val-frac: '1.5' is out of range.*\[0, 1\)" \
       train --data data.txt --val-frac 1.5
expect "negative seed"             2 "--seed: '-1' is out of range" train --data data.txt --seed -1
expect "bad choice"                2 "--optim: 'adam' is not one of adamw\|sgd" \
       train --data data.txt --optim adam
expect "flag takes no value"       2 "--quiet takes no value" train --data data.txt --quiet=yes
expect "stray argument"            2 "unexpected argument 'data.txt'" train data.txt
expect "gpt needs data"            2 "needs --data" train --steps 5
expect "gpt-only flag on mlp"      2 "--heads applies to --model gpt or --model llama only" train --model mlp --heads 4
expect "unknown command"           2 "unknown command 'trian'" trian --steps 5
expect "sample needs --ckpt"       2 "needs --ckpt" sample --tokens 5
expect "sample: zero tokens"       2 "--tokens: '0' is out of range" sample --ckpt x --tokens 0
expect "sample: bad temperature"   2 "--temperature: '-1' is out of range" sample --ckpt x --temperature -1

timeout 60 "$BIN" >out.txt 2>err.txt
rc=$?
check "no command: usage, exit 2" "exit $rc, want 2 and usage on stderr" \
      test "$rc" -eq 2 -a -n "$(grep usage err.txt)"
cp err.txt no-command.txt
for cmd in train sample example bench version help; do
    succeed "$cmd --help" "$cmd" --help
    check "$cmd --help prints usage" "no 'usage:' line" grep -q '^usage: meshtrain' out.txt
done

# ---- the command list --------------------------------------------------------

# Every command with its one-line summary, written out here rather than read
# from the program: `meshtrain --help` must list exactly these, in this order.
COMMANDS=(
    "train|train a model (gpt, mlp, linreg, llama) and write checkpoints and metrics"
    "sample|generate text from a checkpoint"
    "tokenize|train a SentencePiece tokenizer on a text and encode it into llm.c token files"
    "example|run a built-in example: linreg (the JAX pmap linear regression)"
    "bench|benchmark: collectives (as nccl-tests), machine (peaks for the roofline), matmul (engine vs sgemm)"
    "explain|why communication happens: an op's result type and moves on typed operands"
    "schedule|pipeline schedules (gpipe, 1f1b, zb-h1, zb-v, ...): check, simulate, draw"
    "plan|the best mesh for a model on hardware we do not have: memory, step time, MFU, what binds"
    "report|where a traced run's time went: roofline, exposed comm, MFU, bubble"
    "version|print the version"
    "help|print this help, or a command's: meshtrain help train"
)
NAMES=()
for entry in "${COMMANDS[@]}"; do NAMES+=("${entry%%|*}"); done

# command_lines FILE: the lines of the "commands:" section, "name|summary".
command_lines() {
    awk '/^commands:$/ { on = 1; next } on && /^$/ { exit }
         on { name = $1; sub(/^ +[^ ]+ +/, ""); print name "|" $0 }' "$1"
}

# lists_commands NAME FILE: FILE's command section is COMMANDS, line for line.
lists_commands() {
    local name=$1 file=$2
    if [ "$(command_lines "$file")" = "$(printf '%s\n' "${COMMANDS[@]}")" ]; then ok "$name"
    else : >err.txt; bad "$name" "the commands listed are not the ${#COMMANDS[@]} of the test:
$(command_lines "$file")"; fi
}

succeed "--help" --help
lists_commands "--help lists every command with its summary" out.txt
succeed "help" help
lists_commands "help lists every command with its summary" out.txt
lists_commands "no command: the usage lists every command" no-command.txt

# names_every_command NAME: the one stderr line names every command.
names_every_command() {
    local name=$1 missing="" cmd
    for cmd in "${NAMES[@]}"; do
        grep -Eq "[(:, ]$cmd[,)]" err.txt || missing="$missing $cmd"
    done
    if [ -z "$missing" ]; then ok "$name"; else bad "$name" "does not name:$missing"; fi
}
expect "unknown command lists the commands" 2 "unknown command 'trian' \(commands: " trian
names_every_command "unknown command names every command"
expect "flag before the command" 2 "expected a command before '--bogus'" --bogus
names_every_command "flag before the command names every command"
expect "help for an unknown command" 2 "unknown command 'trian'" help trian

succeed "help example" help example
check "help example prints its usage" "no 'usage: meshtrain example linreg' line" \
      grep -q '^usage: meshtrain example linreg' out.txt
succeed "help bench" help bench
check "help bench prints its usage" "no 'usage: meshtrain bench collectives' line" \
      grep -q '^usage: meshtrain bench collectives' out.txt
succeed "version" version
check "version prints it" "no version" grep -q '^meshtrain [0-9]' out.txt

# ---- data errors: exit 1 ----------------------------------------------------

expect "missing data file"   1 "nope\.txt" train --data nope.txt "${TINY[@]}"
mkdir adir
expect "data is a directory" 1 "'adir'" train --data adir "${TINY[@]}"
cp data.txt locked.txt
chmod 000 locked.txt
if [ -r locked.txt ]; then
    echo "skip  unreadable data file (running as root, permissions are not enforced)"
else
    expect "unreadable data file" 1 "locked\.txt" train --data locked.txt "${TINY[@]}"
fi
: >empty.txt
expect "empty data file"     1 "empty\.txt" train --data empty.txt "${TINY[@]}"
{ le32 20240520; le32 1; le32 1000; zeros $((253 * 4)); zeros 20; } >trunc.bin
expect "truncated token file" 1 "trunc\.bin.*truncated" train --data trunc.bin "${TINY[@]}"
{ le32 20240520; le32 9; le32 10; zeros $((253 * 4)); zeros 20; } >badver.bin
expect "token file, wrong version" 1 "badver\.bin.*version" train --data badver.bin "${TINY[@]}"
expect "T larger than maxT"  2 "T=32.*maxT=16" train --data data.txt "${TINY[@]}" --seq 32

# ---- llm.c checkpoint errors -------------------------------------------------

llmc_header 12345 3 >magic.llmc
expect "llm.c: wrong magic"   1 "magic.llmc.*magic" train --data data.txt --llmc-in magic.llmc
llmc_header 20240326 99 >version.llmc
expect "llm.c: wrong version" 1 "version.llmc.*version" train --data data.txt --llmc-in version.llmc
llmc_header 20240326 3 >short.llmc
expect "llm.c: truncated"     1 "short.llmc.*truncated" train --data data.txt --llmc-in short.llmc
head -c 100 short.llmc >tiny.llmc
expect "llm.c: shorter than a header" 1 "tiny.llmc" train --data data.txt --llmc-in tiny.llmc
expect "sample: llm.c truncated" 1 "short.llmc" sample --ckpt short.llmc --tokens 5

# ---- the happy path ----------------------------------------------------------

succeed "train 5 steps" train --data=data.txt "${TINY[@]}" --steps=5 --eval-every 5 \
        --ckpt-out run.ckpt --metrics run.jsonl --llmc-out run.llmc
check "progress lines"     "no 'step 5/5' line"     grep -q 'step 5/5' out.txt
check "eval line"          "no eval line"           grep -q 'val loss' out.txt
check "summary line"       "no summary"             grep -q '^done: 5 steps' out.txt
check "config printed"     "no resolved V=256"      grep -q 'V=256 Vp=256' out.txt
check "checkpoint written" "run.ckpt missing"       test -s run.ckpt
check "llm.c written"      "run.llmc missing"       test -s run.llmc
check "metrics: 5 lines"   "$(wc -l <run.jsonl 2>/dev/null) lines" \
      test "$(wc -l <run.jsonl)" -eq 5
check "metrics: fields"    "a line lacks a field" \
      test "$(grep -c '^{"step":[0-9]*,"loss":[-0-9.e]*,.*"lr":.*"grad_norm":.*"tokens_per_s":.*"gflops":.*"ms":[-0-9.e]*}$' run.jsonl)" -eq 5
check "metrics: val_loss"  "step 5 lacks val_loss"  grep -q '"step":5,.*"val_loss"' run.jsonl

succeed "quiet train" train --data data.txt "${TINY[@]}" --steps 3 --quiet
check "quiet prints only the summary" "$(wc -l <out.txt) lines" test "$(wc -l <out.txt)" -eq 1

succeed "resume to step 7" train --data data.txt "${TINY[@]}" --steps 7 --ckpt-in run.ckpt \
        --ckpt-out run2.ckpt --metrics run.jsonl
check "resume starts at 6" "no 'done: 2 steps (6..7)'" grep -q 'done: 2 steps (6..7)' out.txt
check "resume appends metrics" "$(wc -l <run.jsonl) lines, want 7" test "$(wc -l <run.jsonl)" -eq 7

succeed "sample 50 tokens" sample --ckpt run.ckpt --prompt "line 1" --tokens 50 --seed 7
check "sample prints 50 bytes" "$(wc -c <out.txt) bytes" test "$(wc -c <out.txt)" -eq 50
cp out.txt sample1.txt
succeed "sample again, same seed" sample --ckpt run.ckpt --prompt "line 1" --tokens 50 --seed 7
check "sampling is deterministic" "two runs differ" cmp -s out.txt sample1.txt
succeed "sample from llm.c file" sample --ckpt run.llmc --tokens 20 --temperature 0
check "llm.c sample: 20 bytes" "$(wc -c <out.txt) bytes" test "$(wc -c <out.txt)" -eq 20
succeed "start from llm.c file" train --data data.txt --llmc-in run.llmc --seq 16 --batch 4 --steps 2

succeed "mlp 5 steps"    train --model mlp --layers 2 --channels 16 --steps 5 --threads 1
succeed "linreg 5 steps" train --model linreg --steps 5 --threads 1
succeed "profile" train --data data.txt "${TINY[@]}" --steps 3 --quiet --profile
check "profile: per-op table" "no gemm/attention rows with 3 calls each" \
    grep -Eq '^attention +[0-9]+ ' out.txt
check "profile: total row" "no total row" grep -Eq '^total +[0-9.]+' out.txt

# Ctrl-C: stop after the step, still write the checkpoint, exit 130
# --foreground: otherwise timeout signals the whole process group too, and the
# second SIGINT (the "abort now" one) arrives at once
timeout --foreground --preserve-status -s INT 3 "$BIN" train --data data.txt "${TINY[@]}" --steps 1000000000 \
        --ckpt-out int.ckpt >out.txt 2>err.txt
rc=$?
check "Ctrl-C exits 130" "exit $rc" test "$rc" -eq 130
check "Ctrl-C still saves" "no int.ckpt or no summary" \
      test -s int.ckpt -a -n "$(grep '^interrupted after' out.txt)"
check "Ctrl-C says so" "stderr: $(head -c 200 err.txt)" grep -q 'interrupted; stopping' err.txt

# ---- meshtrain checkpoint errors --------------------------------------------

expect "ckpt: wrong magic" 1 "data\.txt.*not a meshtrain checkpoint" \
       train --data data.txt "${TINY[@]}" --ckpt-in data.txt
# header: magic (8), version u32 at 8, ..., CRC-32 of bytes [0,304) at 304
if [ "$(crc32 run.ckpt 304)" != "$(u32_at run.ckpt 304)" ]; then
    : >err.txt
    bad "ckpt: header layout" "the CRC at byte 304 does not cover bytes [0,304); the format changed"
else
    cp run.ckpt version.ckpt
    put_u32 version.ckpt 8 99
    put_u32 version.ckpt 304 "$(crc32 version.ckpt 304)"
    expect "ckpt: wrong version" 1 "version\.ckpt.*version 99" \
           train --data data.txt "${TINY[@]}" --ckpt-in version.ckpt
fi
head -c $(($(wc -c <run.ckpt) / 2)) run.ckpt >trunc.ckpt
expect "ckpt: truncated" 1 "trunc\.ckpt.*(truncated|corrupt)" \
       train --data data.txt "${TINY[@]}" --ckpt-in trunc.ckpt
head -c 100 run.ckpt >stub.ckpt
expect "ckpt: shorter than a header" 1 "stub\.ckpt.*truncated" \
       train --data data.txt "${TINY[@]}" --ckpt-in stub.ckpt
cp run.ckpt flipped.ckpt
off=$(($(wc -c <run.ckpt) / 2))
byte=$(od -An -tu1 -j "$off" -N 1 run.ckpt | tr -d ' ')
printf "\\$(printf %03o $((byte ^ 0x40)))" | dd of=flipped.ckpt bs=1 seek="$off" conv=notrunc status=none
expect "ckpt: flipped byte" 1 "flipped\.ckpt.*corrupt" \
       train --data data.txt "${TINY[@]}" --ckpt-in flipped.ckpt
expect "sample: flipped byte" 1 "flipped\.ckpt.*corrupt" sample --ckpt flipped.ckpt --tokens 5
expect "ckpt: other model" 2 "run\.ckpt.*model" \
       train --data data.txt "${TINY[@]}" --channels 32 --ckpt-in run.ckpt
expect "sample: missing ckpt" 1 "nope\.ckpt" sample --ckpt nope.ckpt

# ---- failures while training -------------------------------------------------

expect "NaN loss names the step" 1 "(nan|inf|finite).*step [0-9]+|step [0-9]+.*(nan|inf|finite)" \
       train --data data.txt "${TINY[@]}" --lr 1e9 --warmup 0 --steps 50
expect "metrics file unwritable" 1 "/nonexistent/m\.jsonl" \
       train --data data.txt "${TINY[@]}" --steps 2 --metrics /nonexistent/m.jsonl
expect "checkpoint dir missing"  1 "/nonexistent/c\.ckpt" \
       train --data data.txt "${TINY[@]}" --steps 2 --ckpt-out /nonexistent/c.ckpt

# ---- training on a mesh (data parallel through the partitioner) -------------
expect "mesh product vs devices" 2 "data=2.*3"       train --model mlp --steps 2 --devices 3 --mesh data=2
expect "batch vs data axis"      2 "B=3.*data"       train --model mlp --steps 2 --devices 2 --batch 3
expect "unknown mesh axis"       2 "'dta'.*unknown"  train --model mlp --steps 2 --mesh dta=2
expect "axis twice in a mesh"    2 "'data'.*twice"   train --model mlp --steps 2 --mesh data=2,data=2
# the same run on 1, 2 and 4 devices: the summary's losses agree to the
# printed digits (test_dp checks every step to 1e-5)
for d in 1 2 4; do
    timeout 120 "$BIN" train --model mlp --steps 6 --batch 8 --devices $d --threads 2 >mesh$d.txt 2>err.txt
done
loss_of() { sed -n 's/.*| loss \([0-9.]*\) -> \([0-9.]*\).*/\1 \2/p' "$1"; }
check "dp=2 trains the 1-device run" "losses differ: $(loss_of mesh1.txt) / $(loss_of mesh2.txt)" \
      test -n "$(loss_of mesh1.txt)" -a "$(loss_of mesh1.txt)" = "$(loss_of mesh2.txt)"
check "dp=4 trains the 1-device run" "losses differ: $(loss_of mesh1.txt) / $(loss_of mesh4.txt)" \
      test "$(loss_of mesh1.txt)" = "$(loss_of mesh4.txt)"
check "the configuration shows the mesh" "no mesh line" grep -q '^  mesh  *data=2 (2 devices' mesh2.txt
check "the configuration shows memory per device" "no memory line" \
      grep -q '^  memory  *per device: parameters' mesh2.txt

# activation checkpointing: the same run with less activation memory
expect "train: --remat bogus"    2 "remat" train --model mlp --steps 2 --remat bogus
printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 60) >remat.txt
for r in none full; do
    timeout 120 "$BIN" train --data remat.txt --layers 2 --channels 32 --heads 2 --max-seq 32 \
        --seq 32 --batch 2 --steps 3 --threads 1 --remat $r >remat_$r.txt 2>err.txt
done
act_of() { sed -n 's/.*activations \([0-9.]*\) MiB.*/\1/p' "$1"; }
check "--remat full trains the same run" "losses differ: $(loss_of remat_none.txt) / $(loss_of remat_full.txt)" \
      test -n "$(loss_of remat_none.txt)" -a "$(loss_of remat_none.txt)" = "$(loss_of remat_full.txt)"
check "--remat full holds fewer activations" "$(act_of remat_full.txt) MiB vs $(act_of remat_none.txt)" \
      awk -v a="$(act_of remat_full.txt)" -v b="$(act_of remat_none.txt)" 'BEGIN { exit !(a > 0 && a < b) }'
check "--remat full says what it recomputes" "no remat line" grep -q '^  remat  *full: ' remat_full.txt

# ---- bench and example arguments ---------------------------------------------

# sizes strtod reads but that are not sizes: once cast to size_t (undefined;
# 'nan' was reported as "above 4G")
expect "bench: --max-bytes nan"  2 "max-bytes 'nan' is not a size" \
       bench collectives --devices 2 --max-bytes nan
expect "bench: --min-bytes inf"  2 "min-bytes 'inf' is not a size" \
       bench collectives --devices 2 --min-bytes inf
expect "bench: --max-bytes 1e30" 2 "--max-bytes '1e30' is not a size" \
       bench collectives --devices 2 --max-bytes 1e30
# lists that select nothing ran nothing and exited 0
expect "bench: --ops ,"     2 "--ops ',': an empty item" bench collectives --devices 2 --ops ,
expect "bench: --devices ," 2 "--devices ',' has an empty item" bench collectives --devices ,
# a learning rate whose update overflows while the loss before it is finite
expect "example: inf params name the step" 1 "step 1.*(inf|nan)|(inf|nan).*step 1" \
       example linreg --steps 1 --lr 1e38 --batch 4

test_end
