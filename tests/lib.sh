# lib.sh — what the shell tests of the program share (sourced, not run):
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   test_start <name> "$@"      BIN = the program (absolute), BUILD = the build
#                               dir (2nd argument, or the program's folder),
#                               WORK = a new scratch directory, removed at exit;
#                               the script runs in it
#   ok NAME / bad NAME WHY      count a check; bad also shows err.txt, the
#                               stderr of the last run, when there is one
#   expect_fail NAME CODE REGEX CMD...   runs CMD (stdout to out.txt, stderr to
#                               err.txt) and checks: exit CODE, empty stdout,
#                               one "meshtrain: " line on stderr matching REGEX
#   test_end                    "N passed, M failed"; the script's status
#   need_spm                    ends the script, "skipped", when spm_train or
#                               spm_encode is missing (the tokenizer's tests)
#   train_run NAME METRICS ARGS...   `train ARGS --metrics METRICS` under
#                               `timeout 120` exits 0, or a bad line
#   same_floats NAME A B        two files' 4-byte words agree as floats within
#                               1e-4 (parameters written by --llmc-out)
#   same_ckpt NAME A B [SUFFIX] two meshtrain checkpoints hold the same
#                               parameter records within 1e-4 (those named
#                               *SUFFIX bit for bit, some of them non-zero)
#   same_maxvio NAME A B        two metrics files' moe_maxvio equal every step
#   moe_setup                   writes text.txt and sets TINY (moe-tiny) and
#                               SIG (a sigmoid router, every other block MoE),
#                               the MoE tests' train arguments
#
# Each test script runs the program its own way (expect, run, ...); this is
# only the bookkeeping every one of them needs.
#
# python3 in these scripts is Debian's, /usr/bin/python3, where there is one:
# the interpreter whose packages `make deps` installs, and one that starts in
# 60 ms where a version manager's shim first in PATH takes 240 ms (pyenv's,
# on these machines: 26 of test_context_pipe's 36 s under ASan went to it).
if [ -x /usr/bin/python3 ]; then python3() { /usr/bin/python3 "$@"; }; fi

pass=0
fail=0

test_start() {
    local name=$1
    shift
    BIN=$(realpath "${1:?usage: $name <meshtrain binary> [build dir]}")
    BUILD=${2:-$(dirname "$BIN")}
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-${name%.sh}.XXXXXX")
    # chmod: a case may leave a read-only directory behind
    trap 'chmod -R u+rwX "$WORK" 2>/dev/null; rm -rf "$WORK"' EXIT
    cd "$WORK" || exit 1
}

ok() { pass=$((pass + 1)); echo "ok    $1"; }

bad() {
    fail=$((fail + 1))
    echo "FAIL  $1: $2"
    [ -s err.txt ] && sed 's/^/      | /' err.txt | head -20
    return 0
}

expect_fail() {
    local name=$1 code=$2 re=$3
    shift 3
    "$@" >out.txt 2>err.txt
    local rc=$? why=""
    [ "$rc" -eq "$code" ] || why="exit $rc, want $code"
    [ -s out.txt ] && why="${why:+$why; }stdout is not empty"
    [ "$(wc -l <err.txt)" -eq 1 ] || why="${why:+$why; }stderr has $(wc -l <err.txt) lines, want 1"
    grep -q '^meshtrain: ' err.txt || why="${why:+$why; }stderr does not start 'meshtrain: '"
    grep -Eq -- "$re" err.txt || why="${why:+$why; }stderr does not match /$re/"
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
}

# english_text FILE: 200 kB of English prose (the GPL's, or a sentence
# repeated where the licence is not installed) for a byte-level model
english_text() {
    head -c 200000 /usr/share/common-licenses/GPL-3 >"$1" 2>/dev/null ||
        python3 -c 'print("the quick brown fox jumps over the lazy dog. " * 5000)' >"$1"
}

need_spm() {
    command -v spm_encode >/dev/null && command -v spm_train >/dev/null && return 0
    echo "skipped: spm_train or spm_encode missing (apt-get install sentencepiece)"
    exit 0
}

# same_metrics NAME FILE_A FILE_B: two --metrics files hold as many steps,
# some, and every step's loss and gradient norm agree within 1e-5 (relative,
# or absolute below 1): an ok or a bad line named NAME.
same_metrics() {
    local name=$1
    if python3 - "$2" "$3" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
b = [json.loads(l) for l in open(sys.argv[2]) if '"loss"' in l]
ok = len(a) == len(b) > 0 and all(
    abs(x[k] - y[k]) <= 1e-5 * max(1.0, abs(x[k])) for x, y in zip(a, b) for k in ("loss", "grad_norm"))
sys.exit(0 if ok else 1)
PY
    then ok "$name"; else bad "$name" "$(head -c 300 "$2") vs $(head -c 300 "$3")"; fi
}

# train_run NAME METRICS ARGS...: the run exits 0
train_run() {
    local name=$1 out=$2
    shift 2
    rm -f "$out"
    timeout 120 "$BIN" train "$@" --metrics "$out" >out.txt 2>err.txt ||
        bad "$name" "exit $?: $(head -2 err.txt | tr '\n' ' ')"
}

# same_floats NAME A B: two files of as many bytes whose 4-byte words, as
# floats, agree within 1e-4 (relative, or absolute below 1), or are equal
same_floats() {
    local name=$1
    if python3 - "$2" "$3" <<'PY'
import array, sys
ra, rb = open(sys.argv[1], 'rb').read(), open(sys.argv[2], 'rb').read()
a, b, ia, ib = array.array('f'), array.array('f'), array.array('I'), array.array('I')
a.frombytes(ra); b.frombytes(rb); ia.frombytes(ra); ib.frombytes(rb)
# the header's integers compare as bits (llama2.c's negative vocabulary reads as a NaN)
ok = len(a) == len(b) > 0 and all(
    i == j or abs(x - y) <= 1e-4 * max(1.0, abs(x)) for x, y, i, j in zip(a, b, ia, ib))
sys.exit(0 if ok else 1)
PY
    then ok "$name"; else bad "$name" "parameters differ ($2 vs $3)"; fi
}

# same_ckpt NAME A B [SUFFIX]: two checkpoints hold the same parameter
# records, their values (and moments) within 1e-4 (relative, or absolute
# below 1); the records' shardings (informational) may differ. With SUFFIX
# the records whose names end with it are equal bit for bit, and there are
# some, not all zero (a state every layout must compute the same: the
# routers' bias)
same_ckpt() {
    local name=$1
    if python3 - "$2" "$3" "${4:-}" <<'PY'
import struct, sys
def records(path):
    b = open(path, 'rb').read()
    n, off, out = struct.unpack_from('<I', b, 12)[0], 308, {}
    for _ in range(n):
        ln = struct.unpack_from('<I', b, off)[0]; off += 4
        name = b[off:off + ln].decode(); off += ln + 4 + 4 + 32 + 20
        moments = struct.unpack_from('<I', b, off)[0]; off += 4
        numel = struct.unpack_from('<q', b, off)[0]; off += 8
        k = numel * (1 + (moments & 1) + (moments >> 1 & 1))
        out[name] = struct.unpack_from('<%df' % k, b, off); off += 4 * k
    return out
a, b = records(sys.argv[1]), records(sys.argv[2])
ok = a.keys() == b.keys() and len(a) > 0 and all(
    len(a[k]) == len(b[k]) and all(abs(x - y) <= 1e-4 * max(1.0, abs(x)) for x, y in zip(a[k], b[k]))
    for k in a)
exact = [k for k in a if sys.argv[3] and k.endswith(sys.argv[3])]
if sys.argv[3]:
    ok = ok and exact and all(a[k] == b[k] for k in exact) and any(any(a[k]) for k in exact)
sys.exit(0 if ok else 1)
PY
    then ok "$name"; else bad "$name" "parameters differ ($2 vs $3)"; fi
}

# same_maxvio NAME A B: every step's moe_maxvio equal in two metrics files
same_maxvio() {
    if python3 - "$2" "$3" <<'PY'
import json, sys
a, b = ([json.loads(l) for l in open(f) if '"loss"' in l] for f in sys.argv[1:3])
sys.exit(0 if len(a) == len(b) > 0 and all(x["moe_maxvio"] == y["moe_maxvio"]
                                          for x, y in zip(a, b)) else 1)
PY
    then ok "$1"; else bad "$1" "$(head -c 300 "$3")"; fi
}

# moe_same_run REF LAYOUT ARGS...: trains ARGS on --mesh LAYOUT (its words
# split: "tensor=2 --sequence-parallel") into r.jsonl and r.ckpt, and checks
# each step's loss and gradient norm, every checkpointed parameter and
# MaxVio against REF.jsonl and REF.ckpt (the one-device run)
moe_same_run() {
    local ref=$1 layout=$2 L
    shift 2
    read -r -a L <<<"--mesh $layout"
    train_run "moe-tiny $layout" r.jsonl "$@" "${L[@]}" --ckpt-out r.ckpt
    same_metrics "moe-tiny $layout: losses and gradient norms equal one device's" "$ref.jsonl" \
        r.jsonl
    same_ckpt "moe-tiny $layout: parameters equal one device's" "$ref.ckpt" r.ckpt
    same_maxvio "moe-tiny $layout: MaxVio equals one device's" "$ref.jsonl" r.jsonl
}

moe_setup() {
    for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog."; done >text.txt
    TINY=(--data text.txt --model llama --preset moe-tiny --seq 32 --batch 4 --threads 2 --quiet)
    SIG=(--data text.txt --model llama --layers 3 --channels 32 --heads 4 --kv-heads 2
         --max-seq 16 --seq 16 --batch 4 --threads 2 --quiet --moe-experts 4 --moe-top-k 2
         --moe-ffn-dim 16 --moe-score sigmoid --moe-route-scale 2.5 --moe-every 2
         --moe-z-beta 0.001 --moe-aux-alpha 0.05)
}

test_end() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
}
