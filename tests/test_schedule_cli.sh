#!/usr/bin/env bash
# test_schedule_cli.sh — `meshtrain schedule`: the text timeline and the
# statistics of the seven kinds at p=4, m=8 against their unit-cost formulas,
# the JSON object and --load of it (as written, and edited by hand), the
# fallback note, the SVG, and the failures: usage errors exit 2 (a schedule
# shape the flags give that the kind cannot run included), a loaded file's
# errors exit 1, each with one "meshtrain: " line on stderr. The hostile
# inputs (files that are FIFOs, outputs that are inputs, ...) are in
# test_hostile_schedule.sh.
#
#   bash tests/test_schedule_cli.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_schedule_cli.sh "$@"

run() { timeout 60 "$BIN" schedule "$@" >out.txt 2>err.txt; }

# succeeds NAME ARGS...: exit 0 and an empty stderr
succeeds() {
    local name=$1
    shift
    run "$@"
    local rc=$? why=""
    [ "$rc" -eq 0 ] || why="exit $rc, want 0"
    [ -s err.txt ] && why="${why:+$why; }stderr is not empty"
    if [ -z "$why" ]; then return 0; fi
    bad "$name" "$why"
    return 1
}

# has NAME TEXT: out.txt contains the line TEXT (fixed string)
has() {
    if grep -qxF -- "$2" out.txt; then ok "$1"; else bad "$1" "no line '$2' in:
$(head -30 out.txt)"; fi
}

# fails NAME CODE REGEX ARGS...: exit CODE, empty stdout, one "meshtrain: "
# line on stderr matching REGEX
fails() {
    local name=$1 code=$2 re=$3
    shift 3
    expect_fail "$name" "$code" "$re" timeout 60 "$BIN" schedule "$@"
}

P4M8=(--stages 4 --microbatches 8)

# ---- the text output: zb-h1 by hand ------------------------------------------
# Stage 0 runs F0-F3, waits 3 (its B0 comes back at 2p-1 = 7), then B, F, W in
# turn; 3 columns a time unit. Bubble (p-1)(F+B-W) = 3, span 3m+3 = 27.
if succeeds "zb-h1 text" --kind zb-h1 "${P4M8[@]}"; then
    has "zb-h1 header" "zb-h1: p = 4 stages, m = 8 microbatches, v = 1 chunk per device; costs F 1, B 1, W 1, COMM 0; w-memory 0"
    has "zb-h1 device 0" "dev 0 | F0 F1 F2 F3 .........B0 F4 W0 B1 F5 W1 B2 F6 W2 B3 F7 W3 B4 W4 B5 W5 B6 W6 B7 W7"
    has "zb-h1 device 3" "dev 3 | .........F0 B0 F1 B1 F2 B2 F3 B3 F4 W0 B4 F5 W1 B5 F6 W2 B6 F7 W3 B7 W4 W5 W6 W7"
    has "zb-h1 makespan" "makespan          27"
    has "zb-h1 bubble rate" "bubble rate       11.11%   (max span 27 - busy 24) / max span"
    has "zb-h1 device 0 row" "0                24         27          3          4"
    has "zb-h1 device 3 row" "3                24         24          0          1"
fi

# ---- the seven kinds: --json statistics ---------------------------------------
# Unit costs, p = 4, m = 8, busy 3m = 24 on every device. Spans and peaks from
# each kind's table (tests/test_schedule.c): gpipe and 1f1b 3m + 3(p-1-i);
# interleaved (v = 2) 3m + 3(p-1-i)/2, peak (2(p-1-i) + p + 1)/2; zb-h1 3m +
# p-1-i, peak p-i; zb-h2 3m everywhere, peak 2p-1-2i; zb-v 3m and p; dualpipev
# 3m + (p-1-i)/2 and p + 1/2. Rates: 9/33, 4.5/28.5, 3/27, 0, 0, 1.5/25.5.
declare -A HEAD=(
    [gpipe]='"makespan":33,"busy":[24,24,24,24],"bubble_fraction":0.272727272727,"span":[33,30,27,24],"bubble_rate":0.272727272727,"peak_activations":[8,8,8,8]'
    [1f1b]='"makespan":33,"busy":[24,24,24,24],"bubble_fraction":0.272727272727,"span":[33,30,27,24],"bubble_rate":0.272727272727,"peak_activations":[4,3,2,1]'
    [interleaved]='"makespan":28.5,"busy":[24,24,24,24],"bubble_fraction":0.157894736842,"span":[28.5,27,25.5,24],"bubble_rate":0.157894736842,"peak_activations":[5.5,4.5,3.5,2.5]'
    [zb-h1]='"makespan":27,"busy":[24,24,24,24],"bubble_fraction":0.111111111111,"span":[27,26,25,24],"bubble_rate":0.111111111111,"peak_activations":[4,3,2,1]'
    [zb-h2]='"makespan":27,"busy":[24,24,24,24],"bubble_fraction":0.111111111111,"span":[24,24,24,24],"bubble_rate":0,"peak_activations":[7,5,3,1]'
    [zb-v]='"makespan":25.5,"busy":[24,24,24,24],"bubble_fraction":0.0588235294118,"span":[24,24,24,24],"bubble_rate":0,"peak_activations":[4,4,4,4]'
    [dualpipev]='"makespan":25.5,"busy":[24,24,24,24],"bubble_fraction":0.0588235294118,"span":[25.5,25,24.5,24],"bubble_rate":0.0588235294118,"peak_activations":[4.5,4.5,4.5,4.5]'
)
for kind in gpipe 1f1b interleaved zb-h1 zb-h2 zb-v dualpipev; do
    succeeds "$kind --json" --kind "$kind" "${P4M8[@]}" --json || continue
    want="{\"kind\":\"$kind\",\"stages\":4,\"microbatches\":8,${HEAD[$kind]},\"ops\":["
    if [ "$(head -1 out.txt)" = "$want" ]; then ok "$kind --json statistics"; else
        bad "$kind --json statistics" "got  $(head -1 out.txt)
want $want"; fi
    # every op once: 3 chunk ops (F, B, W, or F and BW) per microbatch and chunk
    n=$(grep -o '"type":"[FBW]*"' out.txt | wc -l)
    nbw=$(grep -o '"type":"BW"' out.txt | wc -l)
    v=1; case $kind in interleaved|zb-v|dualpipev) v=2 ;; esac
    if [ $((n + nbw)) -eq $((3 * 8 * 4 * v)) ]; then ok "$kind --json: every op"; else
        bad "$kind --json: every op" "$n ops, $nbw of them BW"; fi
    # written, loaded back, simulated again: the same object
    cp out.txt "$kind.json"
    if succeeds "$kind --load" --load "$kind.json" --json && cmp -s out.txt "$kind.json"; then
        ok "$kind --load gives the same object"
    else
        bad "$kind --load gives the same object" "$(diff out.txt "$kind.json" | head -5)"
    fi
done

# ---- hand edits ---------------------------------------------------------------
# zb-h1 with device 2's W of microbatch 5 taken out: rejected, naming its B.
sed 's/{"type":"W","mb":5,"chunk":2,[^}]*},//' zb-h1.json >edited.json
fails "hand edit: a missing W" 1 "device 2 op #[0-9]+ \(B mb 5 chunk 2\) has no W" --load edited.json
# 1f1b with device 0's BW of microbatch 0 moved up behind its F 0: it waits
# for device 1's BW 0, which needs device 0's F 1, now behind it.
sed '2s/^\[\({[^}]*}\),\(.*\),\({"type":"BW","mb":0,"chunk":0,[^}]*}\)/[\1,\3,\2/' 1f1b.json >edited.json
fails "hand edit: a deadlock" 1 "deadlock: .*device 0 op #1 \(BW mb 0 chunk 0\) waits for BW mb 0 chunk 1 on device 1.*device 1 op #1 \(F mb 1 chunk 1\) waits for F mb 1 chunk 0 on device 0 \(its op #2\)" \
    --load edited.json
printf '{"kind":"1f1b","stages":1,"microbatches":1,"ops":[[{"type":"F","mb":0,"chunk":0}' >edited.json
fails "hand edit: truncated JSON" 1 "--load 'edited.json': schedule JSON, byte 80: expected" --load edited.json

# ---- the fallback note, other costs, the SVG ----------------------------------
if succeeds "zb-h2 below 2p-1" --kind zb-h2 --stages 4 --microbatches 5; then
    has "zb-h2 note" "note: zb-h2 wants m >= 2p-1 = 7 microbatches for its full warm-up; with m = 5, stage i warms up with min(2p-1-2i, m) forwards instead, which leaves a bubble of 2p-1-m = 2 time units at unit costs (0 from m = 7 on)"
    # stage 0 waits 2p-1-m = 2 for its first B: span 3m + 2 = 17
    has "zb-h2 fallback bubble" "bubble rate       11.76%   (max span 17 - busy 15) / max span"
fi
# non-integer costs: F 1, B 2, W 1.5, COMM 0.1 on 1f1b, p = 2, m = 2 (BW 3.5):
# dev 0: F0 [0,1] F1 [1,2]; dev 1: F0 [1.1,2.1] BW0 [2.1,5.6] F1 [5.6,6.6]
# BW1 [6.6,10.1]; dev 0: BW0 [5.7,9.2] BW1 [10.2,13.7]. 3 columns a unit,
# times rounded to the nearest: F0 at columns 3-5, BW0 6-16, F1 17-19, BW1
# 20-29 on device 1, idle to column round(41.1) = 41.
if succeeds "non-integer costs" --kind 1f1b --stages 2 --microbatches 2 --costs 1,2,1.5,0.1; then
    has "non-integer makespan" "makespan          13.7"
    has "non-integer device 0" "dev 0 | F0 F1 ...........BW0        ...BW1"
    has "non-integer device 1" "dev 1 | ...F0 BW0        F1 BW1       ..........."
fi
if succeeds "svg" --kind zb-v "${P4M8[@]}" --svg zbv.svg && grep -qx "wrote zbv.svg" out.txt &&
   grep -q '^<svg ' zbv.svg && grep -q 'zb-v, p = 4, m = 8, v = 2: bubble rate 0.0%, makespan 25.5' zbv.svg &&
   [ "$(tail -1 zbv.svg)" = "</svg>" ]; then
    ok "svg written, with the statistics in its title"
else
    bad "svg written, with the statistics in its title" "$(head -3 zbv.svg 2>/dev/null)"
fi

# ---- failures -----------------------------------------------------------------
fails "m < p" 2 "1f1b needs at least as many microbatches as stages \(m >= p\); got m = 3 for p = 4" \
    --kind 1f1b --stages 4 --microbatches 3
fails "interleaved m not divisible" 2 "interleaved needs m divisible by p.*got m = 6 for p = 4" \
    --kind interleaved --stages 4 --microbatches 6
fails "dualpipev m < 2p" 2 "dualpipev needs m >= 2p microbatches; got m = 7 for p = 4" \
    --kind dualpipev --stages 4 --microbatches 7
fails "zb-h1 with chunks" 2 "zb-h1 runs 1 chunk per device; got 2" --kind zb-h1 "${P4M8[@]}" --chunks 2
fails "unknown kind" 2 "--kind: 'zb-h3' is not one of gpipe\|1f1b\|interleaved\|zb-h1\|zb-h2\|zb-v\|dualpipev" \
    --kind zb-h3 "${P4M8[@]}"
fails "no kind" 2 "schedule needs --kind KIND" "${P4M8[@]}"
fails "bad costs" 2 "--costs: '1,2' is not 3 or 4 numbers" --kind 1f1b --costs 1,2
fails "zero B cost" 2 "--costs: '1,0,1': F and B must be > 0" --kind 1f1b --costs 1,0,1
# finite costs whose sums overflow: were a makespan of inf and an SVG that never ended
fails "huge costs" 2 "each is at most 1e\\+12" --kind 1f1b --costs 1e308,1e308,1e308 --svg huge.svg
fails "w-memory out of range" 2 "--w-memory: '2' is out of range" --kind 1f1b --w-memory 2
fails "load with kind" 2 "--load takes the kind.*drop --kind" --load zb-h1.json --kind 1f1b
fails "load a missing file" 1 "nope.json" --load nope.json
fails "unknown flag" 2 "unknown flag '--stage' \(did you mean --stages\?\)" --kind 1f1b --stage 4

run --help
if [ $? -eq 0 ] && grep -q -- "--load FILE" out.txt && grep -q -- "--costs F,B,W\[,COMM\]" out.txt &&
   grep -q "dualpipev" out.txt && grep -q -- "--w-memory X" out.txt; then
    ok "help documents the flags"
else
    bad "help documents the flags" "$(head -5 out.txt)"
fi
timeout 60 "$BIN" help >out.txt 2>err.txt
if grep -q "^  schedule " out.txt; then ok "meshtrain help lists schedule"; else
    bad "meshtrain help lists schedule" "$(cat out.txt)"; fi

test_end
