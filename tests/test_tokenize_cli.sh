#!/usr/bin/env bash
# test_tokenize_cli.sh — `meshtrain tokenize` and the tokenizer path through
# `train --tokenizer` and `sample --tokenizer` (issue 23 §4).
#
#   bash tests/test_tokenize_cli.sh <meshtrain binary> [<build dir>]
#
# The reference is SentencePiece itself, run directly on the same text: the
# ids of the token file are spm_encode's, line by line, joined by the id of
# the newline piece; the vocabulary is the model's own .vocab file; spm_decode
# of those ids gives the text back byte for byte (the model is lossless).
# Then a GPT trains two steps on the token file, samples through the
# tokenizer, and the bad inputs are refused before any work (the table's
# format is tests/hostile.sh's).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
test_start test_tokenize_cli.sh "$@"

need_spm
hostile_fixtures
cd fix || exit 1

# ---- the corpus: some fortunes (the demo's), else a text made here ----------
FORTUNES=${FORTUNES:-/usr/share/games/fortunes}
find "$FORTUNES" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' 2>/dev/null | LC_ALL=C sort |
    head -4 | xargs -r cat 2>/dev/null | head -c 150000 >corpus.txt
if [ ! -s corpus.txt ]; then
    for i in $(seq 1 3000); do
        printf 'line %d: the %s sat on the %s,\tcafé ✓\n' "$i" "$((i % 17))cat" "$((i % 5))mat"
    done >corpus.txt
fi
printf '\n  two spaces, a tab\t, and é\n' >>corpus.txt   # ends in a newline, as spm_decode writes

# u16 FILE: the ids of an llm.c token file, one per line
u16() { od -An -v -tu2 -j1024 "$1" | tr -s ' ' '\n' | sed '/^$/d'; }
# header FILE: magic, version, count
header() { od -An -v -td4 -N12 "$1" | tr -s ' ' ' ' | sed 's/^ //'; }

# ---- tokenize, against spm_encode ------------------------------------------
V=512
if "$BIN" tokenize --text corpus.txt --vocab $V --model-out tok --out all.bin --json \
    >tok.json 2>err.txt; then ok "tokenize corpus.txt --vocab $V"
else bad "tokenize corpus.txt --vocab $V" "exit $?"; fi
read -r j_vocab j_tokens < <(python3 -c 'import json; d = json.load(open("tok.json"));
print(d["vocab"], d["tokens"])' 2>/dev/null)
[ "${j_vocab:-}" = "$V" ] && ok "--json says vocab $V" || bad "--json vocab" "got '${j_vocab:-}'"
[ "$(wc -l <tok.vocab)" -eq $V ] && ok "tok.vocab has $V pieces" ||
    bad "tok.vocab" "$(wc -l <tok.vocab) lines, want $V"
nl_id=$(($(grep -n -m1 -F '<0x0A>' tok.vocab | cut -d: -f1) - 1))
spm_encode --model=tok.model --output_format=id corpus.txt >ref_lines.txt
# every line's ids, then the newline's (the corpus ends in one)
awk -v nl="$nl_id" '{ for (i = 1; i <= NF; i++) print $i; print nl }' ref_lines.txt >ref.txt
u16 all.bin >got.txt
n_ref=$(wc -l <ref.txt)
if cmp -s ref.txt got.txt; then ok "the token file is spm_encode's ids ($n_ref tokens)"
else bad "token file ids" "$(wc -l <got.txt) ids, spm_encode gives $n_ref; first difference: $(cmp ref.txt got.txt | head -1)"; fi
[ "$(header all.bin)" = "20240520 1 $n_ref" ] && ok "header: magic, version 1, $n_ref tokens" ||
    bad "header" "'$(header all.bin)', want '20240520 1 $n_ref'"
[ "${j_tokens:-}" = "$n_ref" ] && ok "--json says $n_ref tokens" || bad "--json tokens" "got '${j_tokens:-}'"
spm_decode --model=tok.model --input_format=id ref_lines.txt >decoded.txt
cmp -s decoded.txt corpus.txt && ok "spm_decode gives the text back byte for byte" ||
    bad "round trip" "$(cmp decoded.txt corpus.txt | head -1)"

# ---- the validation split: the tail, as train --val-frac cuts it -----------
if "$BIN" tokenize --text corpus.txt --model-in tok.model --out tr.bin --val-out va.bin \
    --val-frac 0.1 >split.txt 2>err.txt; then ok "tokenize --model-in --val-out"
else bad "tokenize --model-in --val-out" "exit $?"; fi
n_val=$((n_ref / 10))
[ "$(header va.bin)" = "20240520 1 $n_val" ] && [ "$(header tr.bin)" = "20240520 1 $((n_ref - n_val))" ] &&
    ok "split: $((n_ref - n_val)) + $n_val tokens" || bad "split" "'$(header tr.bin)' + '$(header va.bin)'"
cat <(u16 tr.bin) <(u16 va.bin) | cmp -s - ref.txt && ok "train + validation = all the ids, in order" ||
    bad "split ids" "the two files are not the whole in order"
grep -q "meshtrain train --data tr.bin --tokenizer tok.model" split.txt && ok "says how to train" ||
    bad "report" "$(cat split.txt)"

# ---- train on it with the tokenizer's vocabulary, sample through it --------
TINY="--layers 1 --channels 32 --heads 2 --max-seq 32 --seq 32 --batch 2"
if "$BIN" train --model gpt --data all.bin --tokenizer tok.model --steps 2 $TINY \
    --ckpt-out m.ckpt >train.txt 2>err.txt; then ok "train --data all.bin --tokenizer tok.model"
else bad "train --tokenizer" "exit $?"; fi
grep -q "V=$V " train.txt && ok "the model's vocabulary is the tokenizer's ($V)" ||
    bad "vocabulary" "$(grep model train.txt)"
# the tokenizer sets the vocabulary and nothing else: the run of --vocab $V
"$BIN" train --model gpt --data all.bin --vocab $V --steps 2 $TINY >train_v.txt 2>/dev/null
losses() { grep -oE '^step [0-9]+/[0-9]+ \| loss [0-9.]+' "$1"; }
[ -n "$(losses train.txt)" ] && [ "$(losses train.txt)" = "$(losses train_v.txt)" ] &&
    ok "the same losses as train --vocab $V" || bad "losses" "$(losses train.txt) vs $(losses train_v.txt)"
if "$BIN" sample --ckpt m.ckpt --tokenizer tok.model --prompt "The " --tokens 30 \
    >sample.txt 2>err.txt && [ -s sample.txt ]; then ok "sample --tokenizer"
else bad "sample --tokenizer" "exit $? or no output"; fi
grep -qE '<[0-9]+>' sample.txt && bad "sample decoding" "ids printed as <N>: $(cat sample.txt)" ||
    ok "the sample is text, not ids"
# greedy sampling is deterministic: two runs, the same text
"$BIN" sample --ckpt m.ckpt --tokenizer tok.model --tokens 12 --temperature 0 >g1.txt 2>/dev/null
"$BIN" sample --ckpt m.ckpt --tokenizer tok.model --tokens 12 --temperature 0 >g2.txt 2>/dev/null
[ -s g1.txt ] && cmp -s g1.txt g2.txt && ok "greedy sample with no prompt" || bad "greedy" "differs or empty"

# ---- llama2.c's tokenizer.bin, against export.py's rule on tok.vocab --------
# export.py (llama2.c's tokenizer.py): ids 1 and 2 (SentencePiece's <s> and
# </s>) as "\n<s>\n" and "\n</s>\n", every "▁" a space; a uint32 of the
# longest piece's bytes, then per piece a float32 score, an int32 length and
# the bytes. The pieces and scores are spm_train's own .vocab file.
if "$BIN" tokenize --text corpus.txt --model-in tok.model --llama2c-out tok.bin >l2c.txt 2>err.txt
then ok "tokenize --model-in --llama2c-out"; else bad "tokenize --llama2c-out" "$(cat err.txt)"; fi
python3 - tok.vocab >ref_tok.bin <<'PY' 2>err.txt
import struct, sys
pieces, scores = [], []
for line in open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]:
    piece, score = line.rsplit("\t", 1)
    pieces.append(piece)
    scores.append(float(score))
pieces[1], pieces[2] = "\n<s>\n", "\n</s>\n"
raw = [p.replace("\u2581", " ").encode("utf-8") for p in pieces]
out = sys.stdout.buffer
out.write(struct.pack("<I", max(len(b) for b in raw)))
for b, s in zip(raw, scores):
    out.write(struct.pack("<fi", s, len(b)) + b)
PY
if [ -s ref_tok.bin ] && cmp -s ref_tok.bin tok.bin; then
    ok "tokenizer.bin is export.py's bytes ($(wc -c <tok.bin) bytes, $V pieces)"
else bad "tokenizer.bin bytes" "$(cmp ref_tok.bin tok.bin 2>&1 | head -1) $(head -c 200 err.txt)"; fi
grep -q "^llama2.c    tok.bin" l2c.txt && ok "the report names tokenizer.bin" || bad "report" "$(cat l2c.txt)"

# a second tokenizer, larger: its ids do not fit the first
"$BIN" tokenize --text corpus.txt --vocab 700 --model-out big --out big.bin >/dev/null 2>&1 ||
    echo "cannot make big.bin"
"$BIN" train --model gpt --data big.bin --tokenizer big.model --steps 1 $TINY --ckpt-out big.ckpt \
    --quiet >/dev/null 2>&1 || echo "cannot make big.ckpt"
# a model of 65537 pieces "a" (none for a newline): more ids than uint16 holds, which
# llm.c's uint32 token files take (test_tokens32), and no text it can encode by lines
python3 -c 'import sys; sys.stdout.buffer.write(b"\x0a\x03\x0a\x01a" * 65537)' >huge.model
cd "$WORK" || exit 1

# ---- bad input: one line, before any work -----------------------------------
hostile_cases <<EOF
# tokenize: the flags
2 | tokenize needs --text | tokenize --vocab 300 --model-out t
2 | give its size with --vocab | tokenize --text text.txt --model-out t
2 | not both | tokenize --text text.txt --model-out t --model-in tok.model --vocab 300
2 | drop --vocab | tokenize --text text.txt --model-in tok.model --vocab 300 --out o.bin
2 | nothing to do | tokenize --text text.txt --model-in tok.model
2 | same file | tokenize --text text.txt --model-in tok.model --out o.bin --llama2c-out o.bin
2 | add --val-out | tokenize --text text.txt --model-in tok.model --out o.bin --val-frac 0.2
2 | add --out | tokenize --text text.txt --model-in tok.model --val-out v.bin
2 | expected an integer in [1, 65536] | tokenize --text text.txt --vocab 65537 --model-out t | test ! -e t.model
2 | expected an integer in [1, 65536] | tokenize --text text.txt --vocab 100000 --model-out t
# tokenize: the text, the model, the outputs
1 | is empty | tokenize --text empty --vocab 300 --model-out t | test ! -e t.model
1 | FIFO | tokenize --text fifo --vocab 300 --model-out t
1 | directory | tokenize --text dir --vocab 300 --model-out t
1 | nope.txt | tokenize --text nope.txt --vocab 300 --model-out t
1 | not a SentencePiece model | tokenize --text text.txt --model-in text.txt --out o.bin | test ! -e o.bin
1 | nope.model | tokenize --text text.txt --model-in nope.model --out o.bin
1 | has no piece for a newline | tokenize --text text.txt --model-in huge.model --out o.bin | test ! -e o.bin
1 | Vocabulary size is smaller | tokenize --text corpus.txt --vocab 260 --model-out t | test ! -e t.model && test ! -e t.model.tmp
2 | --vocab 100 is too small: a byte-fallback tokenizer has at least 259 pieces | tokenize --text corpus.txt --vocab 100 --model-out t | test ! -e t.model
1 | Vocabulary size too high | tokenize --text text.txt --vocab 5000 --model-out t | test ! -e t.model
2 | same file as --text | tokenize --text text.txt --model-in tok.model --out text.txt | cmp -s text.txt ../fix/text.txt
2 | same file | tokenize --text text.txt --model-in tok.model --out o.bin --val-out o.bin
1 | it is a directory | tokenize --text text.txt --model-in tok.model --out dir
# train --tokenizer
1 | holds id | train --model gpt --data big.bin --tokenizer tok.model --steps 1 $TINY
1 | not an llm.c token file | train --model gpt --data text.txt --tokenizer tok.model --steps 1 $TINY
1 | nope.model | train --model gpt --data all.bin --tokenizer nope.model --steps 1 $TINY
1 | not a SentencePiece model | train --model gpt --data all.bin --tokenizer text.txt --steps 1 $TINY
2 | conflicts with --tokenizer | train --model gpt --data all.bin --tokenizer tok.model --vocab 300 --steps 1 $TINY
2 | and --model mlp has none | train --model mlp --tokenizer tok.model --steps 1
# sample --tokenizer
1 | --tokenizer: | sample --ckpt m.ckpt --tokenizer nope.model
2 | has a vocabulary of V=700 tokens but tokenizer | sample --ckpt big.ckpt --tokenizer tok.model
EOF
hostile_busy "tokenize: a token file another run is writing" out.bin.tmp \
    tokenize --text text.txt --model-in tok.model --out out.bin
hostile_busy "tokenize: a model another run is writing" t.model.tmp \
    tokenize --text corpus.txt --vocab 300 --model-out t

# the tools missing: said before any work, naming the package
cd "$WORK/fix" || exit 1
expect_fail "tokenize without spm_train on PATH" 1 "spm_train is not in any directory.*apt-get install sentencepiece" \
    env PATH=/nonexistent "$BIN" tokenize --text text.txt --vocab 300 --model-out nt
[ ! -e nt.model ] && ok "no model without the tool" || bad "no tool" "nt.model was written"
expect_fail "tokenize without spm_encode on PATH" 1 "spm_encode is not in any directory" \
    env PATH=/nonexistent "$BIN" tokenize --text text.txt --model-in tok.model --out nt.bin
expect_fail "sample --tokenizer without spm_encode on PATH" 1 "spm_encode" \
    env PATH=/nonexistent "$BIN" sample --ckpt m.ckpt --tokenizer tok.model --tokens 3
cd "$WORK" || exit 1
test_end
