#!/usr/bin/env bash
# test_explain.sh — `meshtrain explain`: for --op, the printed result type and
# moves of a few sharding rules, worked out by hand, and the failures (an
# ambiguous explicit matmul, a bad type, usage errors) with their exit codes
# and one "meshtrain: " line on stderr, and under --json a refusal's object on
# stdout (its ways out worked out by hand); for --model, whole programs
# against hand-counted collectives and bytes.
#
#   bash tests/test_explain.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_explain.sh "$@"

MESH=(--mesh x=2,y=2)

# prints NAME WANT ARGS...: exit 0, empty stderr, stdout exactly WANT.
prints() {
    local name=$1 want=$2
    shift 2
    timeout 60 "$BIN" explain "$@" >out.txt 2>err.txt
    local rc=$? why=""
    [ "$rc" -eq 0 ] || why="exit $rc, want 0"
    [ -s err.txt ] && why="${why:+$why; }stderr is not empty"
    [ "$(cat out.txt)" = "$want" ] || why="${why:+$why; }stdout is:
$(cat out.txt)
want:
$want"
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
}

# fails NAME CODE REGEX ARGS...: exit CODE, empty stdout, one "meshtrain: "
# line on stderr matching REGEX.
fails() {
    local name=$1 code=$2 re=$3
    shift 3
    expect_fail "$name" "$code" "$re" timeout 60 "$BIN" explain "$@"
}

# ---- results and moves ------------------------------------------------------

prints "matmul keeps free dims" "result f32[8@x,8@y]
collectives none" "${MESH[@]}" --op matmul 'f32[8@x,2]' 'f32[2,8@y]'

prints "matmul gathers a split K" "result f32[8,8]
collective all-gather of a dim 1 over x: f32[8,4@x] -> f32[8,4], 128 bytes per device" \
    "${MESH[@]}" --op matmul 'f32[8,4@x]' 'f32[4,8]'

prints "matmul auto keeps the partial sum" "result f32[8,8]{U:x}
collectives none" "${MESH[@]}" --op matmul 'f32[8,4@x]' 'f32[4@x,8]'

prints "matmul auto gathers a free dim b's output also splits" "result f32[8,8@x]
collective all-gather of a dim 0 over x: f32[8@x,2] -> f32[8,2], 64 bytes per device" \
    "${MESH[@]}" --op matmul 'f32[8@x,2]' 'f32[2,8@x]'

prints "add slices the whole operand" "result f32[8@x,4@y]
local slice of b dim 0 over y: f32[4] -> f32[4@y]
collectives none" "${MESH[@]}" --op add 'f32[8@x,4@y]' 'f32[4]' --explicit

prints "reshard all-to-all" "result f32[8,4@x]
collective all-to-all of a dim 0 to 1 over x: f32[8@x,4] -> f32[8,4@x], 64 bytes per device" \
    "${MESH[@]}" --op reshard 'f32[8@x,4]' 'f32[8,4@x]'

prints "reshard all-reduce has no dim" "result f32[8,4]
collective all-reduce of a over x: f32[8,4]{U:x} -> f32[8,4], 128 bytes per device" \
    "${MESH[@]}" --op reshard 'f32[8,4]{U:x}' 'f32[8,4]'

prints "json" '{"result": "f32[8,8]", "moves": [{"kind": "all-gather", "operand": "b", "dim": 0, "dim2": -1, "axes": "y", "before": "f32[4@y,8]", "after": "f32[4,8]", "bytes": 128}]}' \
    "${MESH[@]}" --op matmul 'f32[8,4]' 'f32[4@y,8]' --json

# ---- failures -----------------------------------------------------------------

fails "explicit ambiguous matmul" 1 \
    'matmul: both contracting dims are split over x.*all-reduce.*reduce-scatter over x on dim 0.*f32\[8,8\]\{U:x\}.*reshard' \
    "${MESH[@]}" --op matmul 'f32[8,4@x]' 'f32[4@x,8]' --explicit
fails "axis used twice in a result" 1 "'x' twice" "${MESH[@]}" --op matmul 'f32[8@x,2]' 'f32[2,8@x]' --explicit
fails "explicit broadcast clash" 1 '^meshtrain: add got incompatible shardings for broadcasting: ' \
    "${MESH[@]}" --op add 'f32[8,4@x]' 'f32[4@y]' --explicit

# refuses_json NAME REGEX PYCHECK ARGS...: a refusal under --json: exit 1, the
# one "meshtrain: " line on stderr matching REGEX, and on stdout one JSON object
# (python3's json module, when there is one) for which PYCHECK, a Python
# expression over it (o), holds.
refuses_json() {
    local name=$1 re=$2 check=$3 want=${REFUSE_RC:-1}
    shift 3
    timeout 60 "$BIN" explain "$@" --json >out.txt 2>err.txt
    local rc=$? why=""
    [ "$rc" -eq "$want" ] || why="exit $rc, want $want"
    [ "$(wc -l <err.txt)" -eq 1 ] || why="${why:+$why; }stderr has $(wc -l <err.txt) lines, want 1"
    grep -Eq -- "^meshtrain: .*$re" err.txt || why="${why:+$why; }stderr does not match /$re/"
    [ "$(wc -l <out.txt)" -eq 1 ] || why="${why:+$why; }stdout has $(wc -l <out.txt) lines, want 1"
    if command -v python3 >/dev/null; then
        python3 -c "import json, sys
o = json.load(open('out.txt'))
m = open('err.txt').read()
assert o['refused'] is True and 'meshtrain: ' + o['message'] + '\n' == m, 'refused, message as on stderr'
assert ($check), 'check: ' + json.dumps(o)" 2>py.txt || why="${why:+$why; }$(tail -1 py.txt): $(head -c 600 out.txt)"
    else
        grep -q '^{"refused": true, .*}$' out.txt || why="${why:+$why; }stdout is not a refusal object"
    fi
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
}
# the four answers of an ambiguous partial sum, as reshards of the result
refuses_json "explicit ambiguous matmul --json" "both contracting dims are split over x" \
    "o['op'] == 'matmul' and o['mode'] == 'explicit' and o['status'] == 'MT_ESHARDING' and
o['operands'] == ['f32[8,4@x]', 'f32[4@x,8]'] and
[(w['reshard'], w['to'], w['moves']) for w in o['ways_out']] == [
    ('result', 'f32[8,8]', ['all-reduce']), ('result', 'f32[8@x,8]', ['reduce-scatter']),
    ('result', 'f32[8,8@x]', ['reduce-scatter']), ('result', 'f32[8,8]{U:x}', [])]" \
    "${MESH[@]}" --op matmul 'f32[8,4@x]' 'f32[4@x,8]' --explicit
# broadcasting: b resharded to a's layout, an all-gather of y then a slice over x
refuses_json "explicit broadcast clash --json" "incompatible shardings for broadcasting" \
    "o['op'] == 'add' and o['ways_out'] == [{'reshard': 'b', 'to': 'f32[4@x]',
'result': 'f32[8,4@x]', 'moves': ['all-gather']}]" \
    "${MESH[@]}" --op add 'f32[8,4@x]' 'f32[4@y]' --explicit
# not a sharding question but the command line's shapes: the object, with no
# way out, and exit 2
REFUSE_RC=2 refuses_json "shapes that do not broadcast --json" "do not broadcast" \
    "o['status'] == 'MT_ESHAPE' and o['ways_out'] == [] and o['mode'] == 'auto'" \
    "${MESH[@]}" --op add 'f32[6,4]' 'f32[5]'
# an operand that does not parse is no refusal but a usage error (exit 2):
# nothing on stdout, as before
fails "bad type --json prints no JSON" 2 "operand a: type 'f32\[6@x\+y,4\]': dim 0 of size 6 does not divide" \
    "${MESH[@]}" --op add 'f32[6@x+y,4]' 'f32[4]' --json
fails "bad type" 2 "dim 0 of size 6 does not divide over x\+y \(4 devices\)" \
    "${MESH[@]}" --op add 'f32[6@x+y,4]' 'f32[4]'
fails "unknown axis" 2 "operand a: .*'z'.*'x', 'y'" "${MESH[@]}" --op add 'f32[8@z]' 'f32[8]'
fails "one type" 2 "2 operand types, got 1" "${MESH[@]}" --op add 'f32[8]'
fails "unknown op" 2 "'conv' is not one of" "${MESH[@]}" --op conv 'f32[8]' 'f32[8]'
fails "no mesh" 2 "--mesh" --op add 'f32[8]' 'f32[8]'
fails "no op" 2 "--op" "${MESH[@]}" 'f32[8]' 'f32[8]'
fails "mesh without sizes" 2 "axis 'x' has no size" --mesh x,y --op add 'f32[8]' 'f32[8]'
fails "mesh size 0" 2 "size of axis 'x' must be a positive integer" --mesh x=0 --op add 'f32[8]' 'f32[8]'
fails "mesh size past the limit" 2 "is too large; the limit is 1048576" \
    --mesh x=99999999999999999999 --op add 'f32[8]' 'f32[8]'

timeout 60 "$BIN" explain --help >out.txt 2>err.txt
if [ $? -eq 0 ] && grep -q -- "--model" out.txt && grep -q -- "--explicit" out.txt; then
    ok "help mentions --explicit and --model"
else
    bad "help" "exit or text wrong: $(head -3 out.txt)"
fi

# ---- --model: a whole model's partitioned program ---------------------------
# GPT L=1 C=32 V=64 T=8: 15072 parameters (wte 2048, wpe 256, the three
# layernorms 192, qkv 3168, attn proj 1056, fc 4224, fc proj 4128), each
# replicated: one all-reduce of its gradient over data (W), plus the loss's.
GPT=(--model gpt --layers 1 --channels 32 --heads 2 --vocab 64 --batch 4 --seq 8)
timeout 60 "$BIN" explain "${GPT[@]}" --devices 2 --mesh data=2 >out.txt 2>err.txt
rc=$?
w_psums=$(grep -c '^  W  psum .*collective over data' out.txt)
check_model() {
    if [ "$rc" -eq 0 ] && [ "$w_psums" -eq 16 ] &&
       grep -q '^  F  psum .*f32\[\] .*collective over data, 4 bytes' out.txt &&
       grep -q '^  F  cross_entropy .*f32\[\]{U:data}' out.txt &&
       grep -q '^  F  embedding .*f32\[4@data,8,32\] *local (2,8,32)' out.txt &&
       grep -q '^communication per step: 17 collectives' out.txt &&
       grep -q '^device 1 (data=1): the same program' out.txt; then
        ok "model: gpt data=2 program"
    else
        bad "model: gpt data=2 program" "exit $rc, $w_psums W psums: $(head -5 out.txt)"
    fi
}
check_model
# data=2,tensor=2: the vocabulary (wte 64x32), attention's q, k, v (3x32x32
# and its 3x32 bias, by heads) and output projection (32x32), the MLP's fc
# (128x32, its bias) and proj (32x128) split over tensor leave 15072 - 14560/2
# = 7792 parameters per device, each gradient all-reduced over data (16
# collectives), plus the loss's; tensor adds Megatron's all-reduces of
# (B/2,T,C) = 512 floats: the embedding's partial sums, attention's and the
# MLP's in the forward, the gradients of attention's, the MLP's and the LM
# head's inputs in the backward, and the vocabulary-parallel loss's row
# statistics (3 x 16 rows):
# 4*7792 + 4 + 6*2048 + 192 = 43652 bytes in 24 collectives
timeout 60 "$BIN" explain "${GPT[@]}" --devices 4 --mesh data=2,tensor=2 --json >out.txt 2>err.txt
if [ $? -eq 0 ] && grep -q '"communication_per_step": {"collectives": 24, "bytes": 43652}' out.txt &&
   grep -q '"spmd": true' out.txt && grep -q '"mode": "auto"' out.txt; then
    ok "model: gpt dp2 x tp2 --json bytes (4 x 7792 + 4 + 6 x 2048 + 192)"
else
    bad "model: gpt dp2 x tp2 --json bytes (4 x 7792 + 4 + 6 x 2048 + 192)" "$(grep communication out.txt)"
fi
# explicit mode will not reduce the vocabulary-parallel embedding's partial
# sums by itself: the first such place is named, with the reshard that resolves it
timeout 60 "$BIN" explain "${GPT[@]}" --devices 4 --mesh data=2,tensor=2 --explicit >out.txt 2>err.txt
if [ $? -eq 1 ] && grep -q "partial sums over tensor" err.txt && grep -q "reshard" err.txt; then
    ok "model: explicit mode names tensor parallelism's partial sums"
else
    bad "model: explicit mode names tensor parallelism's partial sums" "$(cat err.txt)"
fi
# MLP 8 -> 64 -> 64 -> 2: 4866 parameters in 6 tensors
timeout 60 "$BIN" explain --model mlp --batch 8 --devices 4 --json >out.txt 2>err.txt
if [ $? -eq 0 ] && grep -q '"collectives": 7, "bytes": 19468' out.txt; then
    ok "model: mlp on data=4"
else
    bad "model: mlp on data=4" "$(grep communication out.txt)"
fi
# tensor only: Megatron's six all-reduces of (4,8,32) floats and the loss's
# statistics (3 x 32 rows): 6*4096 + 384 bytes
timeout 60 "$BIN" explain "${GPT[@]}" --mesh tensor=2 --json >out.txt 2>err.txt
if [ $? -eq 0 ] && grep -q '"communication_per_step": {"collectives": 7, "bytes": 24960}' out.txt; then
    ok "model: tensor=2 communicates Megatron's all-reduces"
else
    bad "model: tensor=2 communicates Megatron's all-reduces" "$(grep communication out.txt)"
fi
# sequence parallelism on tensor=2: each of those six all-reduces becomes a
# reduce-scatter onto T and an all-gather back (12 collectives of 4096
# bytes, nccl's size: the scatter's input, the gather's output), the
# position embedding, whole, is sliced to the rows and its gradient gathered
# back (1 more), the loss's statistics (384), and the gradients of the
# parameters now applied to split rows, the three layernorms' w and b and
# the two row-parallel biases, all-reduced (8 x 128 bytes):
# 13*4096 + 384 + 8*128 = 54656 bytes in 22 collectives; no all-reduce of
# activations is left in the forward
timeout 60 "$BIN" explain "${GPT[@]}" --mesh tensor=2 --sequence-parallel --collective-matmul off --json >out.txt 2>err.txt
if [ $? -eq 0 ] && grep -q '"communication_per_step": {"collectives": 22, "bytes": 54656}' out.txt &&
   [ "$(grep -c '"phase": "F", "op": "psum_scatter"' out.txt)" -eq 3 ] &&
   [ "$(grep -c '"phase": "F", "op": "all_gather"' out.txt)" -eq 3 ] &&
   ! grep -q '"phase": "F", "op": "psum"' out.txt; then
    ok "model: tensor=2 --sequence-parallel scatters and gathers the rows"
else
    bad "model: tensor=2 --sequence-parallel scatters and gathers the rows" "$(grep -c psum out.txt) psums: $(grep communication out.txt)"
fi
# with collective matmul: the gathers before q, k, v and fc
# and the reduce-scatters after attention's and the MLP's projections run
# inside those products' rings (the LM head's gather, a matmul, and the
# embedding's reduce-scatter stay apart), as do their transposes in the
# backward. A ring of 2 devices is one ppermute of one chunk (2048 bytes),
# counted as sent, not as nccl's size (4096, the device's own chunk too):
# 54656 - 8 x 2048 = 38272 bytes
timeout 60 "$BIN" explain "${GPT[@]}" --mesh tensor=2 --sequence-parallel --collective-matmul on --json >out.txt 2>err.txt
if [ $? -eq 0 ] && grep -q '"communication_per_step": {"collectives": 22, "bytes": 38272}' out.txt &&
   [ "$(grep -c '"phase": "F", "op": "ag_linear"' out.txt)" -eq 2 ] &&
   [ "$(grep -c '"phase": "F", "op": "linear_rs".*"type": "f32\[4,8@tensor,32\]"' out.txt)" -eq 2 ] &&
   [ "$(grep -c '"phase": "B", "op": "ag_linear"' out.txt)" -eq 2 ] &&
   [ "$(grep -c '"phase": "B", "op": "linear_rs"' out.txt)" -eq 2 ]; then
    ok "model: tensor=2 --sequence-parallel runs collective matmuls"
else
    bad "model: tensor=2 --sequence-parallel runs collective matmuls" "$(grep -E 'ag_linear|linear_rs' out.txt)"
fi
timeout 60 "$BIN" explain "${GPT[@]}" --mesh data=2 --sequence-parallel >out.txt 2>err.txt
if [ $? -eq 2 ] && grep -q "no tensor axis" err.txt && [ ! -s out.txt ]; then
    ok "model: --sequence-parallel without a tensor axis is refused"
else
    bad "model: --sequence-parallel without a tensor axis is refused" "$(cat err.txt)"
fi
# nothing split: nothing to communicate (a pipe axis is checked as train
# checks it: 2 blocks, 2 microbatches)
timeout 60 "$BIN" explain "${GPT[@]}" --layers 2 --mesh pipe=2 --microbatches 2 >out.txt 2>err.txt
if [ $? -eq 0 ] && grep -q '^communication per step: 0 collectives' out.txt; then
    ok "model: a mesh that splits nothing communicates nothing"
else
    bad "model: a mesh that splits nothing communicates nothing" "$(tail -3 out.txt)"
fi
timeout 60 "$BIN" explain "${GPT[@]}" --devices 3 --mesh data=2 >out.txt 2>err.txt
if [ $? -eq 2 ] && grep -q "^meshtrain: .*data=2.*3" err.txt; then
    ok "model: mesh product vs devices"
else
    bad "model: mesh product vs devices" "$(cat err.txt)"
fi

# sizes whose product overflows an int (UBSan's signed overflow before), and a
# type whose bytes overflow an int64 (it printed a wrapped byte count)
fails "model: mesh product above the limit" 2 "4295032832 devices; a mesh has at most 1048576" \
    --model mlp --mesh data=65536,tensor=65537
fails "model: mesh size left to the count" 2 "leaves axis 'tensor' to the device count" \
    --model mlp --mesh data=2,tensor=-1

# the mesh and the layout checked as train checks them, through the same
# code (mt_train_config_check): the same message, exit 2, nothing on stdout
fails "model: an axis train does not know" 2 "axis 'foo' is unknown to the trainer" \
    "${GPT[@]}" --mesh foo=2
fails "model: a pipe axis with too few microbatches" 2 "needs at least 4 microbatches" \
    "${GPT[@]}" --layers 4 --mesh pipe=4 --microbatches 2
fails "model: an unknown schedule before the microbatches" 2 "unknown schedule kind 'zb-h3'" \
    "${GPT[@]}" --layers 2 --mesh pipe=2 --schedule zb-h3
fails "model: a batch the data axis does not divide names --batch" 2 "B=8 \\(--batch\\) does not divide" \
    --model mlp --mesh data=1024
fails "model: --json that fails prints no JSON" 2 "B=3 \\(--batch\\)" \
    "${GPT[@]}" --batch 3 --mesh data=2 --json
# a refusal inside the launch: no half a program, but the refusal as one
# JSON object (status and message as on stderr)
timeout 60 "$BIN" explain "${GPT[@]}" --devices 4 --mesh data=2,tensor=2 --explicit --json \
    >out.txt 2>err.txt
if [ $? -eq 1 ] && grep -q "^meshtrain: .*partial sums" err.txt && python3 -c '
import json, sys
o = json.load(open("out.txt"))
m = open("err.txt").read()
assert o["refused"] is True and o["mode"] == "explicit" and o["status"] == "MT_ESHARDING"
assert "meshtrain: " + o["message"] + "\n" == m' 2>/dev/null; then
    ok "model: a refused --json launch prints the refusal as JSON"
else
    bad "model: a refused --json launch prints the refusal as JSON" "$(head -c 300 out.txt) / $(cat err.txt)"
fi
fails "type bytes above 2^62" 2 "holds 6.4e\\+19 bytes; a type holds at most 2\\^62" \
    --mesh x=2,y=2 --op reshard 'f32[4000000000,4000000000@x]' 'f32[4000000000@y,4000000000]'

test_end
