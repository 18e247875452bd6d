// tok_ref.cjs — the independent references of tests/test_tokenizer_bpe.sh:
// OpenAI's tiktoken (its WASM build, npm "tiktoken") and Hugging Face's
// JavaScript tokenizers (npm "@huggingface/tokenizers").
//
//   node tok_ref.cjs make DIR TEXT...     writes the tokenizer files into DIR
//                                          and each reference's ids of each text
//   node tok_ref.cjs decode DIR IDS...     tiktoken's bytes of meshtrain's ids
//   node tok_ref.cjs hfdecode DIR IDS...   tokenizers.js's text of meshtrain's ids
//
// The tokenizer files come only from what the npm packages ship: tiktoken's
// bundled ranks of cl100k_base, o200k_base and GPT-2 (r50k_base), written
// as *.tiktoken files, and two tokenizer.json files made from those ranks
// the way transformers converts a tiktoken encoding (each token's merge is
// every split of it into two tokens, ranked by the token's rank):
//   gpt2.json    GPT-2's shape: ByteLevel pre-tokeniser (its regex), merges
//                as "a b" strings, <|endoftext|> in the vocabulary and added
//   llama3.json  Llama 3's shape, from cl100k's first 30000 ranks (ids fit
//                an llm.c token file): Sequence[Split(regex), ByteLevel],
//                ignore_merges, merges as [a, b] pairs, <|begin_of_text|>
//                put first by a TemplateProcessing post-processor
//   qwen2.json   Qwen2's shape, from the same ranks: the NFC normaliser,
//                Qwen2's regex (digits one by one), merges applied to every
//                piece (no ignore_merges), <|endoftext|> <|im_start|> <|im_end|>
// and two Metaspace BPE files (SentencePiece's scheme with byte fallback) whose
// pieces are learnt here from the first text (metaBpe says how):
//   llama2.json  Llama 2's shape: Prepend("▁") and Replace(" ", "▁")
//                normalisers, no pre-tokeniser, merges as "a b" strings
//   mistral.json the newer shape transformers writes (legacy false): a
//                Metaspace pre-tokeniser, prepend_scheme "first", split false,
//                merges as [a, b] pairs
// both with <unk> <s> </s>, the 256 byte pieces <0x00>..<0xFF>, <s> put first
// by TemplateProcessing, and the decoder Replace, ByteFallback, Fuse, Strip.
// Ids are written one a line into DIR/ref.<tokenizer>.<text name>.ids.
'use strict';
const fs = require('fs');
const path = require('path');
const { get_encoding } = require('tiktoken');
const { Tokenizer } = require('@huggingface/tokenizers');

const [mode, dir, ...files] = process.argv.slice(2);

// tiktoken's bundled ranks: "! START b64 b64 ...", consecutive ranks from START
function bundled(name) {
    const j = require(`tiktoken/encoders/${name}.json`);
    const f = j.bpe_ranks.split(' ');
    const start = Number(f[1]);
    const toks = [];
    for (let i = 2; i < f.length; i++) toks[start + i - 2] = f[i];
    return { toks, pat: j.pat_str };
}

// GPT-2's bytes_to_unicode (its encoder.py): printable bytes are themselves,
// the others 256, 257, ... in byte order
function byteChars() {
    const keep = [];
    for (let b = 0; b < 256; b++)
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) keep.push(b);
    const map = new Array(256);
    let n = 0;
    for (let b = 0; b < 256; b++) map[b] = String.fromCodePoint(keep.includes(b) ? b : 256 + n++);
    return map;
}
const BC = byteChars();
const spell = (buf) => Array.from(buf, (b) => BC[b]).join('');

// vocab {spelling: id} and the merges of the first `limit` ranks (made once:
// llama3.json and qwen2.json share them)
const made = new Map();
function bpeOf(toks, limit) {
    const key = `${toks.length} ${limit}`;
    if (!made.has(key)) made.set(key, makeBpe(toks, limit));
    const { vocab, merges } = made.get(key);
    return { vocab: { ...vocab }, merges };
}

function makeBpe(toks, limit) {
    const vocab = {}, rank = new Map();
    for (let r = 0; r < limit; r++) {
        const s = spell(Buffer.from(toks[r], 'base64'));
        vocab[s] = r;
        rank.set(s, r);
    }
    const merges = [];
    for (let r = 0; r < limit; r++) {
        const s = Array.from(spell(Buffer.from(toks[r], 'base64')));
        const local = [];
        for (let k = 1; k < s.length; k++) {
            const a = s.slice(0, k).join(''), b = s.slice(k).join('');
            if (rank.has(a) && rank.has(b)) local.push([a, b]);
        }
        local.sort((x, y) => rank.get(x[0]) - rank.get(y[0]) || rank.get(x[1]) - rank.get(y[1]));
        merges.push(...local);
    }
    return { vocab, merges };
}

const added = (id, content) => ({ id, content, single_word: false, lstrip: false, rstrip: false,
                                  normalized: false, special: true });
const byteLevel = (use_regex) => ({ type: 'ByteLevel', add_prefix_space: false,
                                    trim_offsets: true, use_regex });

function gpt2Json() {
    const { toks } = bundled('gpt2');
    const { vocab, merges } = bpeOf(toks, 50256);
    vocab['<|endoftext|>'] = 50256;
    return {
        version: '1.0', truncation: null, padding: null, added_tokens: [added(50256, '<|endoftext|>')],
        normalizer: null, pre_tokenizer: byteLevel(true), post_processor: byteLevel(true),
        decoder: byteLevel(true),
        model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '',
                 end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, vocab,
                 merges: merges.map(([a, b]) => `${a} ${b}`) },
    };
}

function llama3Json() {
    const { toks, pat } = bundled('cl100k_base');
    const { vocab, merges } = bpeOf(toks, 30000);
    const bos = '<|begin_of_text|>';
    return {
        version: '1.0', truncation: null, padding: null,
        added_tokens: [added(30000, bos), added(30001, '<|end_of_text|>')], normalizer: null,
        pre_tokenizer: { type: 'Sequence', pretokenizers: [
            { type: 'Split', pattern: { Regex: pat }, behavior: 'Isolated', invert: false },
            byteLevel(false)] },
        post_processor: { type: 'Sequence', processors: [byteLevel(true), {
            type: 'TemplateProcessing',
            single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
            pair: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
                   { SpecialToken: { id: bos, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
            special_tokens: { [bos]: { id: bos, ids: [30000], tokens: [bos] } } }] },
        decoder: byteLevel(true),
        model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
                 end_of_word_suffix: null, fuse_unk: false, byte_fallback: false,
                 ignore_merges: true, vocab, merges },
    };
}

const QWEN2_PAT = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| " +
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

function qwen2Json() {
    const { toks } = bundled('cl100k_base');
    const { vocab, merges } = bpeOf(toks, 30000);
    return {
        version: '1.0', truncation: null, padding: null,
        added_tokens: ['<|endoftext|>', '<|im_start|>', '<|im_end|>'].map((c, i) => added(30000 + i, c)),
        normalizer: { type: 'NFC' },
        pre_tokenizer: { type: 'Sequence', pretokenizers: [
            { type: 'Split', pattern: { Regex: QWEN2_PAT }, behavior: 'Isolated', invert: false },
            byteLevel(false)] },
        post_processor: byteLevel(false), decoder: byteLevel(false),
        model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '',
                 end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, vocab,
                 merges: merges.map(([a, b]) => `${a} ${b}`) },
    };
}

// A Metaspace BPE vocabulary learnt from text: its characters seen 3 times or
// more (not the controls: newlines and tabs fall back to their byte pieces),
// then 400 merges, each the most frequent pair of neighbouring pieces of the
// words ("▁" + word, the text cut before each "▁" as SentencePiece cuts it),
// the first counted of equal counts.
const META = '\u2581';
function metaBpe(text) {
    const words = new Map(), chars = new Map();
    for (const w of (META + text.replaceAll(' ', META)).split(/(?=\u2581)/)) {
        words.set(w, (words.get(w) || 0) + 1);
        for (const c of w) chars.set(c, (chars.get(c) || 0) + 1);
    }
    const vocab = { '<unk>': 0, '<s>': 1, '</s>': 2 };
    for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = 3 + b;
    let next = 259;
    for (const [c, n] of chars) if (n >= 3 && c.codePointAt(0) >= 32 && !(c in vocab)) vocab[c] = next++;
    const wl = [...words].map(([w, n]) => [Array.from(w), n]);
    const merges = [];
    for (let m = 0; m < 400; m++) {
        const pairs = new Map();
        for (const [sy, n] of wl)
            for (let i = 0; i + 1 < sy.length; i++)
                if (sy[i] in vocab && sy[i + 1] in vocab) {
                    const k = sy[i] + '\0' + sy[i + 1];
                    pairs.set(k, (pairs.get(k) || 0) + n);
                }
        let best = null, most = 0;
        for (const [k, n] of pairs) if (n > most) { best = k; most = n; }
        if (!best) break;
        const [a, b] = best.split('\0');
        merges.push([a, b]);
        if (!(a + b in vocab)) vocab[a + b] = next++;
        for (const w of wl) {
            const sy = w[0], out = [];
            for (let i = 0; i < sy.length; i++)
                if (i + 1 < sy.length && sy[i] === a && sy[i + 1] === b) { out.push(a + b); i++; }
                else out.push(sy[i]);
            w[0] = out;
        }
    }
    return { vocab, merges };
}

function metaJson(text, legacy) {
    const { vocab, merges } = metaBpe(text);
    const replace = (from, to) => ({ type: 'Replace', pattern: { String: from }, content: to });
    return {
        version: '1.0', truncation: null, padding: null,
        added_tokens: ['<unk>', '<s>', '</s>'].map((c, i) => added(i, c)),
        normalizer: legacy ? { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: META },
                                                               replace(' ', META)] } : null,
        pre_tokenizer: legacy ? null : { type: 'Metaspace', replacement: META,
                                         prepend_scheme: 'first', split: false },
        post_processor: { type: 'TemplateProcessing',
            single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
            pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
                   { SpecialToken: { id: '<s>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
            special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } } },
        decoder: { type: 'Sequence', decoders: [replace(META, ' '), { type: 'ByteFallback' },
                                                { type: 'Fuse' },
                                                { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
        model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null,
                 end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false,
                 vocab, merges: legacy ? merges.map(([a, b]) => `${a} ${b}`) : merges },
    };
}

const writeIds = (file, ids) => fs.writeFileSync(file, Array.from(ids).join('\n') + '\n');
const textName = (f) => path.basename(f).replace(/\.txt$/, '');

if (mode === 'make') {
    const tik = ['cl100k_base', 'o200k_base'].map((name) => {
        const { toks } = bundled(name);
        fs.writeFileSync(path.join(dir, `${name}.tiktoken`),
                         toks.map((t, r) => `${t} ${r}`).join('\n') + '\n');
        return [name, get_encoding(name)];
    });
    const first = fs.readFileSync(files[0], 'utf8');
    const hf = [['gpt2', gpt2Json()], ['llama3', llama3Json()], ['qwen2', qwen2Json()],
                ['llama2', metaJson(first, true)], ['mistral', metaJson(first, false)]].map(([name, json]) => {
        fs.writeFileSync(path.join(dir, `${name}.json`), JSON.stringify(json));
        return [name, new Tokenizer(json, {})];
    });
    // a text named docs*.txt is documents separated by blank lines: each encoded
    // alone with the special tokens the library adds (BOS), the end-of-text
    // token between them (tokenize --doc-sep [--bos])
    const EOT = { gpt2: '<|endoftext|>', llama3: '<|end_of_text|>', qwen2: '<|endoftext|>',
                  llama2: '</s>', mistral: '</s>' };
    for (const f of files.filter((f) => path.basename(f).startsWith('docs'))) {
        const docs = fs.readFileSync(f, 'utf8').split(/(?<=\n)\n+/);
        for (const [name, tok] of hf) {
            const ids = [];
            docs.forEach((d, i) => {
                ids.push(...tok.encode(d, { add_special_tokens: true }).ids);
                if (i + 1 < docs.length) ids.push(tok.token_to_id(EOT[name]));
            });
            writeIds(path.join(dir, `ref.${name}.${textName(f)}.ids`), ids);
        }
    }
    for (const f of files.filter((f) => !path.basename(f).startsWith('docs'))) {
        const text = fs.readFileSync(f, 'utf8');
        for (const [name, enc] of tik)   // special tokens in the text are text
            writeIds(path.join(dir, `ref.${name}.${textName(f)}.ids`), enc.encode_ordinary(text));
        for (const [name, tok] of hf)    // with the special tokens the library adds (BOS)
            writeIds(path.join(dir, `ref.${name}.${textName(f)}.ids`),
                     tok.encode(text, { add_special_tokens: true }).ids);
    }
    for (const [, enc] of tik) enc.free();
} else if (mode === 'hfdecode') {
    // IDS files are named ours.<tokenizer>.<text name>.ids; tokenizers.js's text of
    // them, special tokens skipped, goes beside them as .bytes
    for (const f of files) {
        const name = path.basename(f).split('.')[1];
        const tok = new Tokenizer(JSON.parse(fs.readFileSync(path.join(dir, `${name}.json`), 'utf8')), {});
        const ids = fs.readFileSync(f, 'utf8').split('\n').filter((l) => l).map(Number);
        fs.writeFileSync(f.replace(/\.ids$/, '.bytes'),
                         tok.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces: false }));
    }
} else if (mode === 'decode') {
    // IDS files are named ours.<encoding>.<text name>.ids; the bytes go beside them
    const encs = {};
    for (const f of files) {
        const name = path.basename(f).split('.')[1];
        encs[name] = encs[name] || get_encoding(name);
        const ids = fs.readFileSync(f, 'utf8').split('\n').filter((l) => l).map(Number);
        fs.writeFileSync(f.replace(/\.ids$/, '.bytes'), encs[name].decode(Uint32Array.from(ids)));
    }
    for (const e of Object.values(encs)) e.free();
} else {
    console.error('usage: node tok_ref.cjs make|decode|hfdecode DIR FILE...');
    process.exit(2);
}
