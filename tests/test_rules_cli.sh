#!/usr/bin/env bash
# test_rules_cli.sh — `train --rules` and `explain --rules`: the strategy as
# rules from the model's logical axes to mesh axes (issue 38).
#
#   bash tests/test_rules_cli.sh <meshtrain binary> [<build dir>]
#
# A layout given only as rules trains the one-device run: the GPT with its
# embed dims stored over fsdp and its MLP left whole ('embed=fsdp,mlp=') on
# fsdp=2,tensor=2, the LLaMA with its heads whole on tensor=2, and the MLP
# model with its pairs whole; each step's loss and gradient norm (the
# metrics file) within 1e-5 of the one-device run's; so does sequence
# parallelism given as the rule 'act_length=tensor', whose program is
# --sequence-parallel's. A rule naming a
# logical axis the model lacks, a mesh axis the mesh lacks, a rule for the
# batch (the data loader's axes), a rule without '=' and rules without a
# mesh are refused before any work, exit 2, naming
# what was wrong. Every run is under `timeout 120`.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_rules_cli.sh "$@"

for i in $(seq 1 400); do echo "the quick brown fox $i jumps over the lazy dog."; done >text.txt

GPT=(--data text.txt --model gpt --layers 2 --channels 32 --heads 4 --max-seq 16 --seq 16
     --batch 4 --steps 4 --threads 2 --quiet)
LLAMA=(--data text.txt --model llama --layers 2 --channels 32 --heads 4 --kv-heads 2
       --vocab 256 --max-seq 16 --seq 16 --batch 4 --steps 4 --threads 2 --quiet)
MLP=(--model mlp --layers 4 --channels 32 --steps 4 --threads 2 --quiet)


# run NAME METRICS ARGS...: the run exits 0 (lib.sh's train_run)
run() { train_run "$@"; }

run "gpt one device" one.jsonl "${GPT[@]}"
run "gpt embed=fsdp,mlp=" r.jsonl "${GPT[@]}" --mesh fsdp=2,tensor=2 --rules 'embed=fsdp,mlp='
same_metrics "gpt: embed over fsdp and the MLP whole, on fsdp=2,tensor=2, equal one device" one.jsonl r.jsonl

run "llama one device" one.jsonl "${LLAMA[@]}"
run "llama heads=,kv_heads=" r.jsonl "${LLAMA[@]}" --mesh data=2,tensor=2 --rules 'heads=,kv_heads='
same_metrics "llama: heads whole on data=2,tensor=2, equal one device" one.jsonl r.jsonl

run "mlp one device" one.jsonl "${MLP[@]}"
run "mlp mlp=" r.jsonl "${MLP[@]}" --mesh tensor=2 --rules 'mlp='
same_metrics "mlp: its pairs whole on tensor=2, equal one device" one.jsonl r.jsonl

# refuse NAME FRAGMENT ARGS...: exit 2 before any work, one "meshtrain: "
# line naming FRAGMENT, nothing written
refuse() {
    local name=$1 frag=$2
    shift 2
    rm -f never.jsonl
    timeout 120 "$BIN" "$@" >out.txt 2>err.txt
    local rc=$? why=""
    [ "$rc" -eq 2 ] || why="exit $rc, want 2"
    head -n1 err.txt | grep -q '^meshtrain: ' || why="${why:+$why; }stderr does not start 'meshtrain: '"
    grep -qF -- "$frag" err.txt || why="${why:+$why; }stderr lacks '$frag': $(head -c 200 err.txt)"
    [ -e never.jsonl ] && why="${why:+$why; }a metrics file was written"
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
}

refuse "a logical axis the model lacks" "has no logical axis 'mpl'; its logical axes are" \
    train "${GPT[@]}" --mesh tensor=2 --rules 'mpl=tensor' --metrics never.jsonl
refuse "kv_heads on the GPT (it has none)" "has no logical axis 'kv_heads'" \
    train "${GPT[@]}" --mesh tensor=2 --rules 'kv_heads=tensor' --metrics never.jsonl
refuse "a mesh axis the mesh lacks" "'mlp' maps to axis set 'tensr': the mesh 'tensor=2' has no axis 'tensr'" \
    train "${GPT[@]}" --mesh tensor=2 --rules 'mlp=tensr' --metrics never.jsonl
refuse "a rule for the batch (the loader's axes)" "the batch is split over data, fsdp and expert" \
    train "${GPT[@]}" --mesh data=2,fsdp=2 --rules 'batch=data' --metrics never.jsonl
refuse "a rule without =" "'mlp' is not logical=mesh axes" \
    train "${GPT[@]}" --mesh tensor=2 --rules 'mlp' --metrics never.jsonl
refuse "a logical axis twice" "logical axis 'mlp' has two rules" \
    train "${GPT[@]}" --mesh tensor=2 --rules 'mlp=tensor,mlp=' --metrics never.jsonl
refuse "rules without a mesh" "--rules maps the model's logical axes onto a mesh's axes" \
    train "${GPT[@]}" --rules 'mlp=tensor' --metrics never.jsonl
refuse "explain: a logical axis the model lacks" "has no logical axis 'layers'" \
    explain --model llama --layers 2 --channels 32 --heads 4 --mesh tensor=2 --rules 'layers=tensor'

# explain shows the rules' layout: with mlp= the MLP's weights are whole
if timeout 120 "$BIN" explain --model gpt --layers 1 --channels 32 --heads 4 --mesh tensor=2 \
        --rules 'mlp=' >ex.txt 2>err.txt &&
    grep -q 'h.0.attn.qkv.w' ex.txt && ! grep -E 'mlp\.fc\.w .*@tensor' ex.txt >/dev/null; then
    ok "explain --rules 'mlp=': the MLP's weights whole"
else
    bad "explain --rules 'mlp='" "$(head -c 300 err.txt)"
fi

# sequence parallelism is the row 'act_length=tensor' (a constraint on the
# residual stream's rows): given as a rule alone it is the same program as
# --sequence-parallel (collective matmul off), with a reduce-scatter where
# tensor parallelism alone all-reduces; 'act_length=' takes it back out of
# --sequence-parallel; and it trains the one-device run
EX=(--model gpt --layers 2 --channels 32 --heads 4 --max-seq 16 --seq 16 --batch 4 --mesh tensor=2)
timeout 120 "$BIN" explain "${EX[@]}" --sequence-parallel --collective-matmul off >sp.txt 2>&1
timeout 120 "$BIN" explain "${EX[@]}" --rules 'act_length=tensor' >rule.txt 2>&1
timeout 120 "$BIN" explain "${EX[@]}" >tp.txt 2>&1
timeout 120 "$BIN" explain "${EX[@]}" --sequence-parallel --collective-matmul off \
    --rules 'act_length=' >off.txt 2>&1
# the programs, without the heading line (it names the flags)
prog() { tail -n +2 "$1"; }
if [ "$(prog sp.txt)" = "$(prog rule.txt)" ] && grep -q ' psum_scatter ' rule.txt &&
    ! grep -q ' psum_scatter ' tp.txt; then
    ok "explain --rules act_length=tensor: the sequence-parallel program (reduce-scatters)"
else
    bad "explain --rules act_length=tensor" "$(diff <(prog sp.txt) <(prog rule.txt) | head -c 300)"
fi
if [ "$(prog tp.txt)" = "$(prog off.txt)" ]; then
    ok "explain --sequence-parallel --rules act_length=: the tensor-parallel program"
else
    bad "explain --sequence-parallel --rules act_length=" "$(diff <(prog tp.txt) <(prog off.txt) | head -c 300)"
fi
run "gpt one device" one.jsonl "${GPT[@]}"
run "gpt act_length=tensor" r.jsonl "${GPT[@]}" --mesh tensor=2 --rules 'act_length=tensor'
same_metrics "gpt: the residual stream's rows over tensor (sequence parallel) equal one device" one.jsonl r.jsonl
# and under a pipeline: each stage sends its rows split over tensor
run "gpt one device, 2 microbatches" one.jsonl "${GPT[@]}" --accum 2
run "gpt act_length=tensor on pipe=2,tensor=2" r.jsonl "${GPT[@]}" --mesh pipe=2,tensor=2 \
    --microbatches 2 --rules 'act_length=tensor'
same_metrics "gpt: act_length=tensor under a pipeline equals one device" one.jsonl r.jsonl

test_end
