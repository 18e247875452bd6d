#!/usr/bin/env bash
# test_tokenizer_bpe.sh — byte-level BPE tokenizers (issue 43 items 2 and 3)
# against their own libraries: `meshtrain tokenize --tokenizer FILE` gives,
# id for id, the ids of
#   - OpenAI's tiktoken (its WASM build, npm "tiktoken"), encode_ordinary,
#     for cl100k_base and o200k_base ranks files written from the ranks the
#     package ships;
#   - Hugging Face's JavaScript tokenizers (npm "@huggingface/tokenizers"),
#     encode with the special tokens it adds, for a GPT-2-, a Llama 3- and a
#     Qwen2-shaped (NFC) tokenizer.json made from those ranks, and two
#     Metaspace BPE files with byte fallback, Llama 2's shape and the newer
#     Metaspace pre-tokeniser's, their pieces learnt from the text
#     (tests/tok_ref.cjs says how);
# on a text of ASCII, accents (composed and not: NFC matters), Greek and
# Cyrillic, CJK, emoji (ZWJ
# sequences, flags, skin tones), digits, runs of spaces, tabs, newlines and
# CRLF, contractions, special tokens written in the text, runs of one
# letter or sign (where the leftmost of equal merges decides), and 20 kB of
# prose, and (Metaspace) a text that begins with spaces and writes <s> and
# </s>. tiktoken's decoder gives back the bytes of the text, and of one
# that is not UTF-8, from meshtrain's ids; tokenizers.js's decoder the text
# from the Metaspace files' ids. The token file (--out) holds the
# same ids; --bos puts the BOS first; what a tokenizer cannot do is refused.
#
# The npm packages are installed once into <build dir>/npm-tokenizers (only
# npm's registry is used); nodejs and npm come from apt-get when missing and
# the test runs as root. Without them the test prints "skip: <reason>" and
# exits 77 (ctest's skip).
#
#   bash tests/test_tokenizer_bpe.sh <meshtrain binary> [build dir]
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$HERE/lib.sh"
test_start test_tokenizer_bpe.sh "$@"

skip() { echo "skip: $1"; exit 77; }

# ---- the references: node and two npm packages -----------------------------
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive timeout 300 apt-get -o DPkg::Lock::Timeout=240 install -y nodejs npm >apt.log 2>&1 ||
            skip "nodejs and npm are missing and apt-get could not install them: $(tail -1 apt.log)"
    else
        skip "nodejs and npm are missing (apt-get install nodejs npm, as root)"
    fi
fi
NPM_DIR=$BUILD/npm-tokenizers
PKGS=(tiktoken@1.0.22 @huggingface/tokenizers@0.2.0)
if [ ! -f "$NPM_DIR/node_modules/tiktoken/package.json" ] ||
   [ ! -f "$NPM_DIR/node_modules/@huggingface/tokenizers/package.json" ]; then
    mkdir -p "$NPM_DIR"
    timeout 300 npm install --prefix "$NPM_DIR" --no-audit --no-fund --no-save "${PKGS[@]}" \
        >npm.log 2>&1 || skip "npm install ${PKGS[*]} failed: $(tail -2 npm.log | tr '\n' ' ')"
fi
export NODE_PATH=$NPM_DIR/node_modules

# ---- the texts --------------------------------------------------------------
{
    printf 'The quick brown fox jumps over the lazy dog. It'"'"'s 5 o'"'"'clock; we'"'"'ll see, '
    printf 'you'"'"'re late! I'"'"'VE DONE IT, he'"'"'d said.\n'
    printf 'Café, naïve, Ångström, façade, São Paulo, Dvořák, Łódź, ñandú, Œuvre. '
    printf 'Ελληνικά και Русский текст.\n'
    printf 'decomposed: cafe\xcc\x81 A\xcc\x8a \xe2\x84\xab \xe1\x84\x80\xe1\x85\xa1 n\xcc\x83o\xcc\x88\n'
    printf '日本語のテキストと中文文本，한국어 텍스트。東京タワー\n'
    printf '😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ ✓ 🤖🤖🤖 a😀b\n'
    printf '1 12 123 1234 12345 1234567890 3.14159 2026-12-07 0x1F +44 (0)20 ٣٤٥ ²³ 1,000,000\n'
    printf 'a  b   c    d\t\te \t f\n\n\ng\r\n  \n    indented\n\t\ttabbed   \n'
    printf 'before<|endoftext|>after <|begin_of_text|> <|end_of_text|>x <|endoftext|\n'
    printf 'aaaaaaa bbbbbbbbb ------------- ============ ......... zzzzzzzzzzz 00000000 '
    printf 'ababababab xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n'
    printf '   \n\n'
} >all.txt
head -c 20000 /usr/share/common-licenses/GPL-3 >>all.txt 2>/dev/null ||
    for i in $(seq 1 300); do echo "Line $i of the prose, with words and numbers ($((i * 37)))."; done >>all.txt
printf '   trailing spaces  ' >>all.txt
printf '   leading spaces\n\tand <s>inside</s>  text  \n' >lead.txt
# documents separated by blank lines (tokenize --doc-sep): two lines, one, then one
# that begins with spaces, with accents and CJK
printf 'Once upon a time.\nThe end.\n\n\nCaf\xc3\xa9 and \xe6\x97\xa5\xe6\x9c\xac.\n\n  Spaced story\n' >docs.txt
printf 'ok \xff\xfe bad \xc3( cut \xe2\x82 surrogate \xed\xa0\x80 overlong \xc0\xaf end \xc3' >invalid.txt

node "$HERE/tok_ref.cjs" make . all.txt lead.txt docs.txt >node.log 2>&1 ||
    { bad "the references (node tok_ref.cjs make)" "$(tail -5 node.log)"; test_end; exit; }

# first_diff A B: where two id files part, with the ids around
first_diff() {
    paste -d' ' <(cat -n "$1") "$2" | awk '$2 != $3 { printf "at id %d: %s here, %s in the reference", $1, $2, $3; exit }'
    [ "$(wc -l <"$1")" = "$(wc -l <"$2")" ] || printf '; %s ids here, %s in the reference' \
        "$(wc -l <"$1")" "$(wc -l <"$2")"
}

# ---- ids, id for id ----------------------------------------------------------
for tok in cl100k_base.tiktoken o200k_base.tiktoken gpt2.json llama3.json qwen2.json \
           llama2.json mistral.json lead:llama2.json lead:mistral.json; do
    t=all
    case $tok in lead:*) t=lead; tok=${tok#lead:} ;; esac
    name=${tok%.*}
    B=()
    case $name in llama3|llama2|mistral) B=(--bos) ;; esac
    if "$BIN" tokenize --text $t.txt --tokenizer "$tok" --ids-out "ours.$name.$t.ids" "${B[@]}" \
        >out.txt 2>err.txt; then
        if cmp -s "ours.$name.$t.ids" "ref.$name.$t.ids"; then
            ok "$name: $(wc -l <"ref.$name.$t.ids") ids of $t.txt equal the reference's"
        else
            bad "$name: ids of $t.txt" "$(first_diff "ours.$name.$t.ids" "ref.$name.$t.ids")"
        fi
    else
        bad "tokenize --tokenizer $tok --text $t.txt" "exit $?: $(cat err.txt)"
    fi
done
# the Metaspace files' references begin with <s> (1) and use byte pieces (3..258)
[ "$(head -1 ref.llama2.all.ids)" = 1 ] &&
    [ "$(sort -u ref.llama2.all.ids | awk '$1 >= 3 && $1 < 259' | wc -l)" -gt 5 ] &&
    ok "llama2: the reference's ids begin with <s> and hold byte pieces" ||
    bad "llama2.json" "its reference's ids lack <s> or byte pieces"


# ---- decoding: tiktoken's decoder gives the bytes back ----------------------
for name in cl100k_base o200k_base; do
    "$BIN" tokenize --text invalid.txt --tokenizer "$name.tiktoken" \
        --ids-out "ours.$name.invalid.ids" >out.txt 2>err.txt || bad "$name: invalid UTF-8" "exit $?"
done
node "$HERE/tok_ref.cjs" decode . ours.{cl100k,o200k}_base.{all,invalid}.ids >node.log 2>&1 ||
    bad "tiktoken's decode" "$(tail -3 node.log)"
for name in cl100k_base o200k_base; do
    for t in all invalid; do
        cmp -s "ours.$name.$t.bytes" "$t.txt" && ok "$name: tiktoken decodes our ids of $t.txt to its bytes" ||
            bad "$name: decode of $t.txt" "$(cmp "ours.$name.$t.bytes" "$t.txt" 2>&1 | head -1)"
    done
done

node "$HERE/tok_ref.cjs" hfdecode . ours.{llama2,mistral}.all.ids >node.log 2>&1 ||
    bad "tokenizers.js's decode" "$(tail -3 node.log)"
for name in llama2 mistral; do
    cmp -s "ours.$name.all.bytes" all.txt && ok "$name: tokenizers.js decodes our ids of all.txt to its bytes" ||
        bad "$name: decode of all.txt" "$(cmp "ours.$name.all.bytes" all.txt 2>&1 | head -1)"
done

# ---- the token file holds the same ids --------------------------------------
u16() { od -An -v -tu2 -j1024 "$1" | tr -s ' ' '\n' | sed '/^$/d'; }
for name in gpt2 llama3; do
    B=()
    [ "$name" = llama3 ] && B=(--bos)
    "$BIN" tokenize --text all.txt --tokenizer "$name.json" --out "$name.bin" "${B[@]}" --json \
        >out.json 2>err.txt || { bad "$name: --out" "exit $?"; continue; }
    cmp -s <(u16 "$name.bin") "ref.$name.all.ids" && ok "$name: the token file holds the ids" ||
        bad "$name: token file" "its ids differ from the reference's"
done
grep -q '"bos": 30000' out.json && grep -q '"eos": 30001' out.json &&
    ok "llama3.json: --json says BOS 30000 (TemplateProcessing) and EOS 30001" ||
    bad "llama3.json --json" "$(cat out.json)"

# o200k_base's 200,019 ids past uint16: llm.c's uint32 token file (its Llama 3
# kind: magic 20240801, version 7), the header and the ids read here with od
if "$BIN" tokenize --text all.txt --tokenizer o200k_base.tiktoken --out o.bin >out.txt 2>err.txt; then
    hdr=$(od -An -v -td4 -N12 o.bin | tr -s ' ' | sed 's/^ //')
    n=$(wc -l <ref.o200k_base.all.ids)
    [ "$hdr" = "20240801 7 $n" ] && ok "o200k_base --out: llm.c's uint32 header ($hdr)" ||
        bad "o200k_base --out header" "'$hdr', want '20240801 7 $n'"
    cmp -s <(od -An -v -tu4 -j1024 o.bin | tr -s ' ' '\n' | sed '/^$/d') ref.o200k_base.all.ids &&
        ok "o200k_base: the uint32 token file holds tiktoken's ids" ||
        bad "o200k_base: uint32 token file" "its ids differ from the reference's"
else
    bad "o200k_base --out" "exit $?: $(head -c 300 err.txt)"
fi

# ---- refusals ---------------------------------------------------------------
expect_fail "--bos where the library adds none" 1 "none its library adds" \
    "$BIN" tokenize --text all.txt --tokenizer gpt2.json --ids-out x.ids --bos
# ---- documents: each encoded alone (BOS first), the end-of-text id between ----
for tok in gpt2.json llama3.json llama2.json mistral.json; do
    name=${tok%.*}
    B=()
    case $name in llama3|llama2|mistral) B=(--bos) ;; esac
    if "$BIN" tokenize --text docs.txt --tokenizer "$tok" --ids-out "ours.$name.docs.ids" \
        --doc-sep "${B[@]}" >out.txt 2>err.txt; then
        cmp -s "ours.$name.docs.ids" "ref.$name.docs.ids" &&
            ok "$name --doc-sep ${B[*]}: $(wc -l <"ref.$name.docs.ids") ids equal the documents encoded alone" ||
            bad "$name --doc-sep: ids" "$(first_diff "ours.$name.docs.ids" "ref.$name.docs.ids")"
    else
        bad "tokenize --tokenizer $tok --doc-sep" "exit $?: $(cat err.txt)"
    fi
done
python3 -c 'import json; d=json.load(open("gpt2.json")); d["added_tokens"]=[];
json.dump(d, open("noeot.json","w"))'
expect_fail "--doc-sep where the tokenizer has no end-of-text id" 1 "has none: drop --doc-sep" \
    "$BIN" tokenize --text docs.txt --tokenizer noeot.json --ids-out x.ids --doc-sep
python3 -c 'import json,sys; d=json.load(open("gpt2.json")); d["normalizer"]={"type":"NFKC"};
json.dump(d, open("nfkc.json","w"))'
expect_fail "a normalizer meshtrain does not apply" 1 "normalizer is NFKC" \
    "$BIN" tokenize --text all.txt --tokenizer nfkc.json --ids-out x.ids
head -n 300 cl100k_base.tiktoken >short.tiktoken
expect_fail "a tiktoken file of an unknown encoding" 1 "ranks file of [0-9]+ ranks" \
    "$BIN" tokenize --text all.txt --tokenizer short.tiktoken --ids-out x.ids

test_end
