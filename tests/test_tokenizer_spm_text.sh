#!/usr/bin/env bash
# test_tokenizer_spm_text.sh — SentencePiece models encode a text as one
# text (issue 43's multi-line fix): `meshtrain tokenize --tokenizer M.model`
# gives, id for id, what SentencePiece's own library gives for the whole
# text (Debian's python3-sentencepiece: SentencePieceProcessor.encode, the
# call llama2.c's data preparation makes), for a model with a dummy prefix
# (Llama 2's kind: only the text's start gets "▁", not each line) and one
# without (the kind meshtrain trains), on multi-line texts: leading and
# trailing newlines, blank lines, lines that begin with spaces, tabs,
# accents and CJK. A one-line text also equals spm_encode's line. And
# llama2.c's tokenizer.bin of the model without a dummy prefix (written by
# `tokenize --llama2c-out`) encodes as run.c does, which is SentencePiece's
# encoding of the text after a space (run.c's own dummy prefix).
#
# The models are trained here by Debian's spm_train. Without the
# sentencepiece tools, or python3-sentencepiece (installed with apt-get
# when root), the test prints "skip: <reason>" and exits 77.
#
#   bash tests/test_tokenizer_spm_text.sh <meshtrain binary> [build dir]
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/lib.sh"
test_start test_tokenizer_spm_text.sh "$@"

skip() { echo "skip: $1"; exit 77; }
command -v spm_train >/dev/null && command -v spm_encode >/dev/null ||
    skip "spm_train or spm_encode missing (apt-get install sentencepiece)"
PY=/usr/bin/python3   # Debian's, where python3-sentencepiece installs
if ! "$PY" -c 'import sentencepiece' 2>/dev/null; then
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null &&
        DEBIAN_FRONTEND=noninteractive timeout 300 apt-get -o DPkg::Lock::Timeout=240 install -y python3-sentencepiece \
            >apt.log 2>&1
    "$PY" -c 'import sentencepiece' 2>/dev/null ||
        skip "python3-sentencepiece is missing (apt-get install python3-sentencepiece, as root)"
fi

# ---- two models of one corpus, with and without a dummy prefix --------------
head -c 60000 /usr/share/common-licenses/GPL-3 >corpus.txt 2>/dev/null ||
    for i in $(seq 1 800); do echo "line $i of the corpus: the quick brown fox, café ✓"; done >corpus.txt
for dummy in true false; do
    spm_train --input=corpus.txt --model_prefix="d_$dummy" --vocab_size=500 --model_type=bpe \
        --byte_fallback=true --normalization_rule_name=identity --add_dummy_prefix=$dummy \
        --remove_extra_whitespaces=false --minloglevel=2 >train.log 2>&1 ||
        { bad "spm_train --add_dummy_prefix=$dummy" "$(tail -2 train.log)"; test_end; exit; }
done

# ---- the texts --------------------------------------------------------------
printf 'The line\nline two  has\n\n  spaces\tand tabs\nend caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\n' >t_lines.txt
printf '\nstarts with a newline\nand goes on' >t_lead.txt
printf '\n\n' >t_blank.txt
printf 'trailing\n\n\n' >t_trail.txt
printf '   \n  indented\n\tand tabbed\n' >t_indent.txt
printf 'one line of text, no newline' >t_one.txt
head -c 3000 corpus.txt >t_corpus.txt

"$PY" - d_true.model d_false.model t_*.txt <<'PY' >ref.log 2>&1 || bad "the reference" "$(tail -3 ref.log)"
import sys, sentencepiece as spm
for m in sys.argv[1:3]:
    sp = spm.SentencePieceProcessor(model_file=m)
    for t in sys.argv[3:]:
        text = open(t, encoding='utf-8', newline='').read()
        open(f"ref.{m[:-6]}.{t[:-4]}.ids", 'w').write(''.join(f"{i}\n" for i in sp.encode(text)))
        if m == 'd_false.model':   # run.c's: a space before the text
            open(f"ref.bin.{t[:-4]}.ids", 'w').write(''.join(f"{i}\n" for i in sp.encode(' ' + text)))
PY

for dummy in true false; do
    for t in t_*.txt; do
        name="d_$dummy ${t%.txt}"
        "$BIN" tokenize --text "$t" --tokenizer "d_$dummy.model" --ids-out ours.ids >out.txt 2>err.txt ||
            { bad "$name" "exit $?"; continue; }
        cmp -s ours.ids "ref.d_$dummy.${t%.txt}.ids" &&
            ok "$name: $(wc -l <ours.ids) ids equal SentencePiece's of the whole text" ||
            bad "$name" "$(tr '\n' ' ' <ours.ids | head -c 200) vs $(tr '\n' ' ' <"ref.d_$dummy.${t%.txt}.ids" | head -c 200)"
    done
    spm_encode --model="d_$dummy.model" --output_format=id t_one.txt | tr ' ' '\n' >spm.ids
    "$BIN" tokenize --text t_one.txt --tokenizer "d_$dummy.model" --ids-out ours.ids >out.txt 2>err.txt &&
        cmp -s ours.ids spm.ids && ok "d_$dummy: a one-line text equals spm_encode's" ||
        bad "d_$dummy one line against spm_encode" "$(tr '\n' ' ' <ours.ids) vs $(tr '\n' ' ' <spm.ids)"
done
# llama2.c's tokenizer.bin, as run.c encodes
"$BIN" tokenize --text t_one.txt --model-in d_false.model --llama2c-out d_false.bin >out.txt 2>err.txt ||
    bad "--llama2c-out d_false.bin" "exit $?"
for t in t_*.txt; do
    "$BIN" tokenize --text "$t" --tokenizer d_false.bin --ids-out ours.ids >out.txt 2>err.txt ||
        { bad "tokenizer.bin ${t%.txt}" "exit $?"; continue; }
    cmp -s ours.ids "ref.bin.${t%.txt}.ids" &&
        ok "tokenizer.bin ${t%.txt}: $(wc -l <ours.ids) ids equal SentencePiece's of ' ' + text" ||
        bad "tokenizer.bin ${t%.txt}" "$(tr '\n' ' ' <ours.ids | head -c 200) vs $(tr '\n' ' ' <"ref.bin.${t%.txt}.ids" | head -c 200)"
done

# the two models part where a line begins: "line" after a newline has no "▁"
grep -c . ref.d_true.t_lines.ids >/dev/null && ! cmp -s ref.d_true.t_lines.ids ref.d_false.t_lines.ids &&
    ok "the dummy prefix changes the ids (the references differ)" ||
    bad "the two models" "give the same ids: the test would not see a dummy prefix"

test_end
