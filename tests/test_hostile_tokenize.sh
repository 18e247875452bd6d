#!/usr/bin/env bash
# test_hostile_tokenize.sh — `meshtrain tokenize` given hostile input
# (issue 37, findings 7 and 14). The table's format is tests/hostile.sh's.
#
#   bash tests/test_hostile_tokenize.sh <meshtrain binary> [<build dir>]
#
# 7: a text that is not UTF-8 (Latin-1, binary with NULs, characters cut
#    short, the model's own "▁") encodes to ids that decode to the very same
#    bytes. The decoder of the check is dec.py below, written from the
#    model's .vocab file (spm_train's own list of the pieces), not
#    meshtrain's: "<0xAB>" is byte AB, "▁" a space, <s> and </s> nothing;
#    its output is compared with the text by cmp. (spm_decode cannot be the
#    reference: it makes U+FFFD of byte pieces that are not UTF-8 itself.)
# 14: a vocabulary smaller than a byte-fallback model's own pieces exits 2
#    naming 259; a text too small to train on says so with its size and the
#    most pieces it gives, where spm_train fails inside or dies of signal 11.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
test_start test_hostile_tokenize.sh "$@"

need_spm
hostile_fixtures
cd fix || exit 1

# dec.py VOCAB TOKENS.bin OUT: the ids of an llm.c token file (a 1024-byte
# header, its count at bytes 8..11, then uint16 ids) decoded with the pieces
# of a .vocab file ("piece TAB score" a line, in id order)
cat >dec.py <<'PY'
import re, struct, sys
pieces = [l.rsplit("\t", 1)[0]
          for l in open(sys.argv[1], encoding="utf-8").read().split("\n")[:-1]]
data = open(sys.argv[2], "rb").read()
n = struct.unpack("<i", data[8:12])[0]
out = bytearray()
for i in struct.unpack("<%dH" % n, data[1024:1024 + 2 * n]):
    p = pieces[i]
    m = re.fullmatch(r"<0x([0-9A-F]{2})>", p)
    if m: out.append(int(m.group(1), 16))
    elif p == "<unk>": out += " \u2047 ".encode()
    elif p not in ("<s>", "</s>"): out += p.replace("\u2581", " ").encode()
open(sys.argv[3], "wb").write(out)
PY
python3 - <<'PY'
import random
# the issue's 36 bytes of Latin-1 (decoded to 46 before the fix)
open("latin1.txt", "wb").write("café, naïve façade: à la mode, über\n".encode("latin-1"))
# binary: every byte value, then 60 kB from a fixed seed (NULs included)
r = random.Random(37)
open("binary.dat", "wb").write(bytes(range(256)) + bytes(r.randrange(256) for _ in range(60000)))
# characters cut short (at a line's end, at the file's end), overlong forms,
# a surrogate, a code point past U+10FFFF, stray continuation bytes
open("cut.txt", "wb").write(b"a\xc3\nb\xe2\x9c c\xf0\x9d\x84 d\xc0\xaf e\xed\xa0\x80 "
                            b"f\xf4\x90\x80\x80 g\x80\xbf h\xe2\x9c\x93\n\xf0\x9d")
# the model's own spellings as text: its space symbol, a byte piece, the controls
open("symbols.txt", "wb").write("\u2581x \u2581\u2581 <0x41> <s></s><unk> \ufffd\r\n".encode())
# a Latin-1 corpus to train on: the fixture text with accents in Latin-1
lines = ["the caf\xe9 %d is na\xefve, %s \xe0 la mode\n" % (i, "\xfcber" * (i % 3))
         for i in range(300)]
open("latin1_corpus.txt", "wb").write("".join(lines).encode("latin-1"))
open("one.txt", "wb").write(b"a")
open("digits.txt", "wb").write(b"12 34\n")
open("latin1_tiny.txt", "wb").write(b"x\xe9\n")
PY
"$BIN" tokenize --text text.txt --vocab 300 --model-out tok >/dev/null 2>&1 || echo "cannot make tok.model"
cd "$WORK" || exit 1

# the after-check: FILE encoded into FILE.bin with VOCAB's model decodes to FILE's bytes
same() { echo "python3 dec.py ${2:-tok.vocab} $1.bin $1.dec && cmp -s $1.dec $1"; }

hostile_cases <<EOF
# ---- 7: every byte comes back (the issue's 36 -> 46 bytes, 60 kB -> 80 kB) ----
0 | - | tokenize --text latin1.txt --model-in tok.model --out latin1.txt.bin | $(same latin1.txt)
0 | - | tokenize --text binary.dat --model-in tok.model --out binary.dat.bin | $(same binary.dat)
0 | - | tokenize --text cut.txt --model-in tok.model --out cut.txt.bin | $(same cut.txt)
0 | - | tokenize --text symbols.txt --model-in tok.model --out symbols.txt.bin | $(same symbols.txt)
0 | - | tokenize --text latin1_corpus.txt --vocab 300 --model-out l1 --out latin1_corpus.txt.bin | $(same latin1_corpus.txt l1.vocab)
# ---- 14: a vocabulary below a byte-fallback model's own pieces ----
2 | --vocab 1 is too small: a byte-fallback tokenizer has at least 259 pieces | tokenize --text text.txt --vocab 1 --model-out t | test ! -e t.model
2 | give --vocab 259 or more | tokenize --text text.txt --vocab 258 --model-out t --out t.bin | test ! -e t.model && test ! -e t.bin
# ---- 14: a text too small to train on ----
1 | the text is too small: 'one.txt' (1 byte) has 1 distinct character | tokenize --text one.txt --vocab 300 --model-out t | test ! -e t.model
1 | at most 260 pieces (259 + 1), not 300 | tokenize --text one.txt --vocab 300 --model-out t --out t.bin | test ! -e t.bin
1 | the text is too small: 'digits.txt' (6 bytes) | tokenize --text digits.txt --vocab 4096 --model-out t | test ! -e t.model
1 | the text is too small | tokenize --text latin1_tiny.txt --vocab 300 --model-out t | test ! -e t.model
EOF

# the bound is the pieces spm_train makes of such a text: exactly them trains
cd "$WORK/fix" || exit 1
if "$BIN" tokenize --text one.txt --vocab 260 --model-out one >/dev/null 2>err.txt; then
    ok "one.txt trains at the 260 pieces the refusal names"
else bad "one.txt at 260 pieces" "exit $?"; fi
cd "$WORK" || exit 1
test_end
