#!/usr/bin/env bash
# test_doc_mask_cli.sh — packed documents at the command line: tokenize
# --doc-sep writes </s> (id 2) where blank lines separate documents (the
# ids checked against the newline's, hand-read from the text), with --bos a
# BOS (id 1) before every document (against each document encoded alone), train
# --doc-mask on trains a LLaMA on them, and the refusals exit 2 with one
# line naming the flag (--eot-id without --doc-mask; a context axis and
# a pipe axis take documents: test_doc_context.sh, test_context_pipe.sh); an
# end-of-text id the data cannot hold exits 2 too, naming it and the vocabulary.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_doc_mask_cli.sh "$@"

printf 'some text to train on, long enough for a few sequences of tokens\n' >t.txt
expect_fail "eot-id without doc-mask refused" 2 'eot-id 7.*--doc-mask on' \
    "$BIN" train --data t.txt --eot-id 7 --steps 1
# GPT-2's end-of-text (50256) on a byte-level text (vocabulary 256): no
# boundary could ever be seen, refused before the first step
expect_fail "doc-mask with an end-of-text outside the data's vocabulary" 2 \
    'end-of-text id 50256 is not a token.*vocabulary is 256' \
    "$BIN" train --model gpt --data t.txt --doc-mask on --seq 8 --batch 1 --steps 1

need_spm
# three documents: two lines, then one, then one, blank lines between
printf 'one story here.\nsecond line\n\nanother story\n\n\nthird one\n' >docs.txt
"$BIN" tokenize --text docs.txt --vocab 300 --model-out tok --out docs.bin --doc-sep \
    >out.txt 2>err.txt || bad "tokenize --doc-sep" "exit $?"
if python3 - docs.bin tok.vocab <<'PY'
import struct, sys
d = open(sys.argv[1], 'rb').read()
n = struct.unpack('3i', d[:12])[2]
ids = struct.unpack('%dH' % n, d[1024:1024 + 2 * n])
pieces = [l.rsplit('\t', 1)[0] for l in open(sys.argv[2], encoding='utf-8')]
nl, eos = pieces.index('<0x0A>'), pieces.index('</s>')
# each document keeps its last newline; </s> follows it, twice; no blank line left
at = [i for i, t in enumerate(ids) if t == eos]
ok = (eos == 2 and len(at) == 2 and all(ids[i - 1] == nl for i in at)
      and ids.count(nl) == 4 and ids[-1] == nl
      and not any(a == nl and b == nl for a, b in zip(ids, ids[1:])))
sys.exit(0 if ok else 1)
PY
then ok "tokenize --doc-sep: </s> after each document's last newline"
else bad "tokenize --doc-sep" "ids of docs.bin"; fi
# --bos with --doc-sep: a BOS (id 1) begins every document, as llama2.c's data
# preparation puts one before every story. The reference is each document
# encoded on its own with --bos (BOS once, before the whole text), the three
# joined by </s> (id 2): tokenize's models add no dummy space, so a document
# encodes alone as it does inside the text.
printf 'one story here.\nsecond line\n' >d1.txt
printf 'another story\n' >d2.txt
printf 'third one\n' >d3.txt
for d in d1 d2 d3; do
    "$BIN" tokenize --text $d.txt --tokenizer tok.model --ids-out $d.ids --bos >out.txt 2>err.txt ||
        bad "tokenize --bos of $d.txt" "$(cat err.txt)"
done
"$BIN" tokenize --text docs.txt --tokenizer tok.model --ids-out docs_bos.ids --out docs_bos.bin \
    --doc-sep --bos >out.txt 2>err.txt || bad "tokenize --doc-sep --bos" "$(cat err.txt)"
{ cat d1.ids; echo 2; cat d2.ids; echo 2; cat d3.ids; } >want.ids
if [ "$(head -1 d1.ids)" = 1 ] && cmp -s docs_bos.ids want.ids; then
    ok "tokenize --doc-sep --bos: BOS before each of the 3 documents ($(wc -l <want.ids) ids)"
else bad "tokenize --doc-sep --bos" "$(tr '\n' ' ' <docs_bos.ids) against $(tr '\n' ' ' <want.ids)"; fi
printf 'only one\n\n\n' >one.txt
"$BIN" tokenize --text one.txt --tokenizer tok.model --ids-out one.ids --doc-sep --bos >out.txt 2>&1
[ "$(head -1 one.ids)" = 1 ] && [ "$(tail -1 one.ids)" = 2 ] && [ "$(grep -c '^1$' one.ids)" = 1 ] &&
    ok "a </s> at the end of the text begins no document" ||
    bad "--doc-sep --bos, blank lines at the end" "$(tr '\n' ' ' <one.ids)"
if "$BIN" train --model llama --data docs.bin --tokenizer tok.model --doc-mask on --seq 8 \
    --batch 1 --steps 2 --val-frac 0 --quiet >out.txt 2>err.txt; then
    ok "train --doc-mask on on tokenize --doc-sep's file"
else bad "train --doc-mask on" "exit $?"; fi
test_end
