#!/usr/bin/env bash
# test_hostile_sample.sh — `meshtrain sample` given hostile input (issue 37,
# findings 7 and 8). The table's format is tests/hostile.sh's.
#
#   bash tests/test_hostile_sample.sh <meshtrain binary> [<build dir>]
#
# 8: a model samples only in its own vocabulary: a LLaMA of 300 pieces with
#    no --tokenizer (tokens would be bytes and "<N>"), a byte-level GPT
#    through a tokenizer of 300 pieces, a model through a tokenizer of
#    another size: exit 2 before any token, naming both sizes and the fix.
# 7: --prompt keeps every byte: a Latin-1 prompt is not the prompt with
#    U+FFFD in its place (before the fix both encoded to the same ids, so a
#    seeded sample of one was the sample of the other; the exact ids are
#    checked through the C API in tests/test_tokenizer.c).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
test_start test_hostile_sample.sh "$@"

need_spm
hostile_fixtures
cd fix || exit 1
# two tokenizers of the fixture text, of 300 and 320 pieces; a LLaMA of 300
# (its checkpoint and llama2.c's model.bin) and a byte-level GPT
"$BIN" tokenize --text text.txt --vocab 300 --model-out tok --out tok.bin >/dev/null 2>&1 ||
    echo "cannot make tok.model"
"$BIN" tokenize --text text.txt --vocab 320 --model-out big >/dev/null 2>&1 ||
    echo "cannot make big.model"
"$BIN" train --model llama --data tok.bin --tokenizer tok.model --layers 1 --channels 32 \
    --heads 2 --kv-heads 1 --seq 16 --max-seq 16 --batch 2 --steps 2 --ckpt-out llama.ckpt \
    --llmc-out llama.bin --quiet >/dev/null 2>&1 || echo "cannot make llama.ckpt"
"$BIN" train --data text.txt --layers 1 --channels 16 --heads 2 --batch 2 --seq 8 --steps 1 \
    --ckpt-out gpt.ckpt --quiet >/dev/null 2>&1 || echo "cannot make gpt.ckpt"
# the issue's prompts: Latin-1 "café", and "café" with U+FFFD for the é
printf 'caf\xe9 the' >latin1.txt
printf 'caf\xef\xbf\xbd the' >fffd.txt
S="--ckpt llama.ckpt --tokenizer tok.model --tokens 30 --seed 3 --threads 1"
"$BIN" sample $S --prompt "$(cat fffd.txt)" >s_fffd.txt 2>/dev/null || echo "cannot sample"
cd "$WORK" || exit 1

hostile_cases <<EOF
# ---- 8: the model's vocabulary is the tokens' ----
2 | checkpoint llama.ckpt has a vocabulary of V=300 tokens, and without a tokenizer the tokens are the 256 bytes | sample --ckpt llama.ckpt --tokens 5 | test ! -s out.txt
2 | give the SentencePiece model of 300 pieces it was trained with (sample --tokenizer MODEL | sample --ckpt llama.ckpt --prompt "the " --tokens 5 | test ! -s out.txt
2 | has a vocabulary of V=300 tokens, and without a tokenizer | sample --llmc-in llama.bin --model llama --tokens 5 | test ! -s out.txt
2 | checkpoint gpt.ckpt has a vocabulary of V=256 tokens but tokenizer tok.model has 300 pieces | sample --ckpt gpt.ckpt --tokenizer tok.model --tokens 5 | test ! -s out.txt
2 | or none: a model of 256 tokens reads bytes | sample --ckpt gpt.ckpt --tokenizer tok.model --prompt "the " --tokens 5 | test ! -s out.txt
2 | checkpoint llama.ckpt has a vocabulary of V=300 tokens but tokenizer big.model has 320 pieces | sample --ckpt llama.ckpt --tokenizer big.model --tokens 5 | test ! -s out.txt
# a BOS asked for where there is none: bytes (and the control, --bos off)
2 | a BOS before the prompt is a tokenizer's id, and without a tokenizer | sample --ckpt gpt.ckpt --bos on --tokens 5 | test ! -s out.txt
0 | - | sample --ckpt llama.ckpt --tokenizer tok.model --bos off --tokens 5 | test -s out.txt
# (controls: each model through its own tokens)
0 | - | sample --ckpt llama.ckpt --tokenizer tok.model --tokens 5 | test -s out.txt
0 | - | sample --ckpt gpt.ckpt --tokens 5 | test \$(wc -c <out.txt) -eq 5
# ---- 7: a Latin-1 prompt is its own bytes, not U+FFFD ----
0 | - | sample $S --prompt "\$(cat latin1.txt)" | test -s out.txt && ! cmp -s out.txt s_fffd.txt
EOF
test_end
