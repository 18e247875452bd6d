#!/usr/bin/env bash
# test_context_parallel.sh — the context axis (issue 41, items 2 and 3:
# context parallelism with its three attention lowerings, all-gather, ring
# and Ulysses, ../shared/CONTEXT_PARALLEL.md).
#
#   bash tests/test_context_parallel.sh <meshtrain binary> [<build dir>]
#
# Every parallel run trains the one-device run (DESIGN.md's invariant): the
# GPT and the LLaMA (GQA, KV=2) on context=2 and context=4, and context=2
# composed with data=2, fsdp=2, tensor=2 and tensor=2 with sequence
# parallelism (the default all-gather; ring and Ulysses below too): each
# step's loss and gradient norm within 1e-5 of one device's (same_metrics),
# and the final parameters (the
# llm.c-family file, every float) within 1e-4. A checkpoint written on
# context=2 resumes on one device where the one-device run is. explain's
# all-gathers and reduce-scatters per layer move the closed form's bytes
# (the LLaMA: 2·B·S·KV·HS·4 gathered, k and v; the GPT: its packed qkv,
# B·S·3C·4, q riding along). The same runs with --cp-attention ring (also
# MQA) and ulysses (the LLaMA with 8 heads over 4 kv heads, so that heads and kv heads divide over
# context=4 and over tensor=2 x context=2), and explain's bytes per layer
# against §4's and §6's closed forms, worked out here. T not a multiple of
# 2·context and Ulysses with heads that do not divide over context are
# turned away before any work, exit 2, naming the numbers. Sequence
# parallelism beside context really splits each device's rows over tensor
# (explain: reduce-scatters onto context+tensor rows, no all-reduce), and
# is turned away where the mesh names tensor before context or T/context
# does not divide over tensor. explain --doc-mask on and plan --doc-mask on
# count the document ids beside the keys (closed forms). Every run is
# under `timeout 120`.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_context_parallel.sh "$@"

for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog."; done >text.txt

GPT=(--data text.txt --model gpt --layers 2 --channels 32 --heads 4 --max-seq 16 --seq 16
     --batch 4 --steps 3 --threads 2 --quiet)
LLAMA=(--data text.txt --model llama --layers 2 --channels 32 --heads 4 --kv-heads 2
       --vocab 256 --max-seq 16 --seq 16 --batch 4 --steps 3 --threads 2 --quiet)

# run NAME METRICS ARGS...: the run exits 0 (lib.sh's train_run)
run() { train_run "$@"; }

for model in gpt llama; do
    if [ $model = gpt ]; then ARGS=("${GPT[@]}"); else ARGS=("${LLAMA[@]}"); fi
    run "$model one device" one.jsonl "${ARGS[@]}" --llmc-out one.bin
    for mesh in context=2 context=4 data=2,context=2 context=2,tensor=2 fsdp=2,context=2 \
                context=2,tensor=2,sp; do
        sp=()
        case $mesh in *,sp) sp=(--sequence-parallel) ;; esac
        run "$model $mesh" r.jsonl "${ARGS[@]}" --mesh "${mesh%,sp}" "${sp[@]}" --llmc-out r.bin
        same_metrics "$model: $mesh losses and gradient norms equal one device's" one.jsonl r.jsonl
        same_floats "$model: $mesh parameters equal one device's" one.bin r.bin
    done
done

# the ring and Ulysses lowerings: every mesh against one device
MQA=(--data text.txt --model llama --layers 2 --channels 32 --heads 4 --kv-heads 1
     --vocab 256 --max-seq 16 --seq 16 --batch 4 --steps 3 --threads 2 --quiet)
LLAMA8=(--data text.txt --model llama --layers 2 --channels 32 --heads 8 --kv-heads 4
        --vocab 256 --max-seq 16 --seq 16 --batch 4 --steps 3 --threads 2 --quiet)
for model in gpt llama mqa llama8; do
    case $model in
    gpt) ARGS=("${GPT[@]}"); kinds="ring ulysses" ;;
    llama) ARGS=("${LLAMA[@]}"); kinds="ring" ;;
    mqa) ARGS=("${MQA[@]}"); kinds="ring" ;;
    llama8) ARGS=("${LLAMA8[@]}"); kinds="ulysses" ;;
    esac
    run "$model one device" one.jsonl "${ARGS[@]}" --llmc-out one.bin
    for kind in $kinds; do
        meshes="context=2 context=4 data=2,context=2 context=2,tensor=2"
        [ $model != mqa ] && meshes="$meshes fsdp=2,context=2 context=2,tensor=2,sp"
        for mesh in $meshes; do
            sp=()
            case $mesh in *,sp) sp=(--sequence-parallel) ;; esac
            run "$model $kind $mesh" r.jsonl "${ARGS[@]}" --mesh "${mesh%,sp}" "${sp[@]}" \
                --cp-attention $kind --llmc-out r.bin
            same_metrics "$model $kind: $mesh losses and gradient norms equal one device's" one.jsonl r.jsonl
            same_floats "$model $kind: $mesh parameters equal one device's" one.bin r.bin
        done
    done
done

# a checkpoint written on context=2 resumes on one device
run "gpt 5 steps" one.jsonl "${GPT[@]}" --steps 5
run "gpt context=2 3 steps" r.jsonl "${GPT[@]}" --mesh context=2 --ckpt-out cp.ckpt
run "gpt resumed on one device" r2.jsonl "${GPT[@]}" --steps 5 --ckpt-in cp.ckpt
if python3 - one.jsonl r2.jsonl <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
b = [json.loads(l) for l in open(sys.argv[2]) if '"loss"' in l]
ok = len(b) > 0 and abs(a[-1]["loss"] - b[-1]["loss"]) <= 1e-5 * max(1.0, abs(a[-1]["loss"]))
sys.exit(0 if ok else 1)
PY
then ok "a context=2 checkpoint resumed on one device ends at one device's step-5 loss"
else bad "context=2 checkpoint resumed on one device" "$(tail -c 200 r2.jsonl)"; fi

# explain's bytes per layer, against the closed form (B=2, S=16, L=2)
bytes() {   # bytes [PHASE] OP ARGS...: the sum of OP's bytes over context in explain's listing
    local phase=.
    case $1 in F|B|W) phase=$1; shift ;; esac
    local op=$1
    shift
    timeout 120 "$BIN" explain "$@" 2>/dev/null |
        awk -v op="$op" -v ph="$phase" '$2 == op && $1 ~ ph && /over context/ { for (i = 1; i <= NF; i++) if ($(i+1) ~ /^bytes/) s += $i } END { print s + 0 }'
}
EX=(--layers 2 --channels 32 --heads 4 --seq 16 --batch 2 --devices 2 --mesh context=2)
want=$((2 * 2 * 2 * 16 * 2 * 8 * 4))   # L · (k and v) · B · S · KV · HS · 4
got=$(bytes all_gather --model llama --kv-heads 2 "${EX[@]}")
[ "$got" = "$want" ] && ok "llama: all-gathered bytes $got = L·2·B·S·KV·HS·4" ||
    bad "llama all-gather bytes" "got $got, want $want"
got=$(bytes psum_scatter --model llama --kv-heads 2 "${EX[@]}")
[ "$got" = "$want" ] && ok "llama: reduce-scattered bytes $got = L·2·B·S·KV·HS·4" ||
    bad "llama reduce-scatter bytes" "got $got, want $want"
want=$((2 * 2 * 16 * 3 * 32 * 4))   # L · B · S · 3C · 4
got=$(bytes all_gather --model gpt "${EX[@]}")
[ "$got" = "$want" ] && ok "gpt: all-gathered bytes $got = L·B·S·3C·4" ||
    bad "gpt all-gather bytes" "got $got, want $want"

# ring (§4): per layer the forward's P-1 sends of k, v, 2·B·(S/P)·KV·HS
# floats each, the backward's as many of k, v and of dK, dV; P = 2 and 4
for P in 2 4; do
    EXR=(--layers 2 --channels 32 --heads 4 --seq 16 --batch 2 --devices $P --mesh context=$P
         --cp-attention ring)
    want=$((2 * (P - 1) * 2 * 2 * (16 / P) * 2 * 8 * 4))   # L · (P-1) · (k and v) · B · S/P · KV · HS · 4
    got=$(bytes F ring_attention --model llama --kv-heads 2 "${EXR[@]}")
    [ "$got" = "$want" ] && ok "llama ring P=$P: forward bytes $got = L·(P-1)·2·B·(S/P)·KV·HS·4" ||
        bad "llama ring P=$P forward bytes" "got $got, want $want"
    got=$(bytes B ring_attention_bwd --model llama --kv-heads 2 "${EXR[@]}")
    [ "$got" = "$((2 * want))" ] && ok "llama ring P=$P: backward bytes $got = twice (k, v and dK, dV)" ||
        bad "llama ring P=$P backward bytes" "got $got, want $((2 * want))"
    steps=$(timeout 120 "$BIN" explain --model llama --kv-heads 2 "${EXR[@]}" 2>/dev/null |
            grep -c "step [0-9]*: k, v of rank")
    [ "$steps" = "$((2 * 2 * P))" ] && ok "llama ring P=$P: explain lists each of the $P steps of both nodes, every layer" ||
        bad "llama ring P=$P steps listed" "$steps lines, want $((2 * 2 * P))"
done
# with packed documents (explain --doc-mask on) the keys' ids travel too: an
# int32 a row beside each ring step's k and v, and under all-gather one
# gather of B·S ids a layer
want=$((2 * 1 * 2 * 8 * (2 * 2 * 8 * 4 + 4)))   # L · (P-1) · B · S/P · (2·KV·HS·4 + 4)
got=$(bytes F ring_attention --model llama --kv-heads 2 "${EX[@]}" --cp-attention ring --doc-mask on)
[ "$got" = "$want" ] && ok "llama ring, documents: forward bytes $got = L·(P-1)·B·(S/P)·(2·KV·HS·4 + 4)" ||
    bad "llama ring forward bytes with documents" "got $got, want $want"
got=$(timeout 120 "$BIN" explain --model llama --kv-heads 2 "${EX[@]}" --doc-mask on 2>/dev/null |
      awk '$2 == "all_gather" && / i32\[/ && /over context/ { n++; for (i = 1; i <= NF; i++) if ($(i+1) ~ /^bytes/) s += $i }
           END { print n + 0, s + 0 }')
[ "$got" = "2 $((2 * 2 * 16 * 4))" ] && ok "llama all-gather, documents: the ids gathered once a layer, L·B·S·4 bytes" ||
    bad "llama all-gather of document ids (count, bytes)" "got $got, want 2 $((2 * 2 * 16 * 4))"
# plan --doc-mask on costs the same ids: the ring's sends a step grow by
# L · 2 (forward, backward) · (P-1) · B · (S/P) · 4 bytes (B = 4 sequences)
permute() {
    timeout 120 "$BIN" plan --model llama --layers 2 --channels 32 --heads 4 --kv-heads 2 \
        --vocab 256 --seq 16 --hardware h100-sxm --chips 2 --mesh context=2 --cp-attention ring \
        --remat none --batch-tokens 64 --microbatches 1 --json "$@" 2>/dev/null |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["best"][0]["comm_bytes_per_step"]["context"]["permute"]["size"])'
}
off=$(permute --doc-mask off) on=$(permute --doc-mask on)
[ -n "$off" ] && [ -n "$on" ] && [ $((on - off)) = $((2 * 2 * 1 * 4 * 8 * 4)) ] &&
    ok "plan --doc-mask on: the ring sends L·2·(P-1)·B·(S/P)·4 = $((on - off)) bytes more a step" ||
    bad "plan --doc-mask on ring bytes" "off $off, on $on, want a difference of $((2 * 2 * 1 * 4 * 8 * 4))"
want=$((2 * 1 * 2 * 8 * 2 * 32 * 4))   # GPT: L · (P-1) · B · S/P · (k and v: 2C) · 4
got=$(bytes F ring_attention --model gpt "${EX[@]}" --cp-attention ring)
[ "$got" = "$want" ] && ok "gpt ring: forward bytes $got = L·(P-1)·B·(S/P)·2C·4" ||
    bad "gpt ring forward bytes" "got $got, want $want"
# Ulysses (§6): four all-to-alls a layer forward, each counted as its
# output buffer (nccl-tests' size): q and out B·S·(NH/P)·HS, k and v
# B·S·(KV/P)·HS floats (the GPT: qkv B·S·3·C/P and out)
want=$((2 * 2 * 16 * (2 * 32 + 2 * 16) / 2 * 4))   # L · B · S · (2·NH·HS + 2·KV·HS) / P · 4
got=$(bytes F all_to_all --model llama --kv-heads 2 "${EX[@]}" --cp-attention ulysses)
[ "$got" = "$want" ] && ok "llama ulysses: forward all-to-all bytes $got = L·B·S·(2·NH + 2·KV)·HS/P·4" ||
    bad "llama ulysses all-to-all bytes" "got $got, want $want"
n=$(timeout 120 "$BIN" explain --model llama --kv-heads 2 "${EX[@]}" --cp-attention ulysses 2>/dev/null |
    awk '$1 == "F" && $2 == "all_to_all"' | wc -l)
[ "$n" = 8 ] && ok "llama ulysses: four forward all-to-alls a layer" || bad "llama ulysses all-to-alls" "$n, want 8"
want=$((2 * 2 * 16 * (3 * 32 + 32) / 2 * 4))   # L · B · S · (3C + C) / P · 4
got=$(bytes F all_to_all --model gpt "${EX[@]}" --cp-attention ulysses)
[ "$got" = "$want" ] && ok "gpt ulysses: forward all-to-all bytes $got = L·B·S·4C/P·4" ||
    bad "gpt ulysses all-to-all bytes" "got $got, want $want"

# refused before any work, exit 2, naming the numbers
refuse() {
    local name=$1 frag=$2
    shift 2
    timeout 120 "$BIN" train "$@" >out.txt 2>err.txt
    local rc=$?
    if [ $rc -eq 2 ] && grep -q -- "$frag" err.txt && head -1 err.txt | grep -q '^meshtrain: '; then
        ok "refused: $name"
    else
        bad "refused: $name" "exit $rc: $(head -2 err.txt | tr '\n' ' ')"
    fi
}
# sequence parallelism under context parallelism: each device's head-tail
# rows split again over tensor (context major), the partial sums of the
# row-parallel products reduce-scattered onto them, not all-reduced; a layer
# of the LLaMA has two such scatters in the forward (after wo and w2), each
# of the device's B·(S/2)·C floats, and no all-reduce over tensor
EXS=(--model llama --kv-heads 2 --layers 2 --channels 32 --heads 4 --seq 16 --batch 2 --devices 4
     --mesh context=2,tensor=2 --sequence-parallel --collective-matmul off)
timeout 120 "$BIN" explain "${EXS[@]}" >sp.txt 2>&1
n=$(awk '$1 == "F" && $2 == "psum_scatter" && /@context\+tensor/ && /over tensor, 2048 bytes/' sp.txt | wc -l)
[ "$n" -ge 4 ] && ok "context x tensor+SP: $n forward reduce-scatters onto context+tensor rows, B·(S/2)·C·4 = 2048 bytes each" ||
    bad "context x tensor+SP reduce-scatters" "$n lines, want >= 4: $(grep -m3 psum sp.txt)"
# one gather of the rows per norm output, whatever reads it (q, k, v share
# one; w1, w3 another; the head the last): 2L + 1, as Megatron's fused products
n=$(awk '$1 == "F" && $2 == "all_gather" && /over tensor/' sp.txt | wc -l)
[ "$n" = 5 ] && ok "context x tensor+SP: 2L+1 = 5 forward gathers over tensor (q, k, v share one)" ||
    bad "context x tensor+SP gathers over tensor" "$n, want 5"
n=$(awk '$1 == "F" && $2 == "psum" && /over tensor/' sp.txt | wc -l)
[ "$n" = 0 ] && ok "context x tensor+SP: no forward all-reduce over tensor" ||
    bad "context x tensor+SP all-reduces" "$n: $(awk '$2 == "psum"' sp.txt | head -2)"

refuse "T=12 on context=4" "T=12 (--seq) does not divide by 8" "${GPT[@]}" --seq 12 --mesh context=4
refuse "ulysses with MQA" "a device holds 4 and 1, and both must divide by 2" "${MQA[@]}" \
    --mesh context=2 --cp-attention ulysses
refuse "ulysses, kv heads 2 on tensor=2 x context=2" "a device holds 2 and 1, and both must divide by 2" \
    "${LLAMA[@]}" --mesh context=2,tensor=2 --cp-attention ulysses
refuse "sequence parallel, tensor named before context" "must name context before tensor" \
    "${LLAMA[@]}" --mesh tensor=2,context=2 --sequence-parallel
refuse "sequence parallel, T/context not split by tensor" "does not divide it; pick T a multiple of 8" \
    "${LLAMA[@]}" --seq 12 --mesh context=2,tensor=4 --sequence-parallel --threads 8

test_end
