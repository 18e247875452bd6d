/*
 * tok_bpe_json.c — Hugging Face's tokenizer.json, byte-level BPE (GPT-2,
 * Llama 3, Qwen2) and Metaspace BPE (Llama 2, Mistral: SentencePiece's BPE
 * as transformers converts it), read into the model of tok_bpe.c. The
 * fields read, byte-level BPE:
 *
 *   model            type "BPE"; vocab {token: id}; merges, "a b" strings
 *                    or [a, b] pairs, in rank order; ignore_merges
 *   added_tokens     [{id, content, lstrip, rstrip, single_word}]: found
 *                    whole in a text before it is split
 *   normalizer       null (the text is used as it is) or NFC (Qwen2's)
 *   pre_tokenizer    ByteLevel (GPT-2's regex when use_regex), or
 *                    Sequence[Split{pattern: Regex|String, behavior
 *                    "Isolated"}, ByteLevel{use_regex false}]
 *   post_processor   TemplateProcessing's "single": the special token
 *                    before $A, what the library adds to a text (Llama 3's
 *                    <|begin_of_text|>; one after $A is refused); ByteLevel
 *                    adds nothing
 *   decoder          null or ByteLevel (decoding is the tokens' bytes)
 *
 * Metaspace BPE (told by model.byte_fallback, a Metaspace pre-tokeniser or
 * a Prepend/Replace normalizer), the same model, added_tokens and
 * post_processor, pieces spelled with "▁" for a space, and:
 *
 *   model            byte_fallback true: a character outside the vocabulary
 *                    is its UTF-8 bytes' pieces "<0x00>".."<0xFF>"
 *   normalizer       Sequence[Prepend "▁", Replace " " -> "▁"] (Llama 2's,
 *                    Mistral's; Replace alone: no space before a text) with
 *                    no pre_tokenizer, or null with
 *   pre_tokenizer    Metaspace{replacement "▁", prepend_scheme first|always|
 *                    never (or add_prefix_space), split false}
 *   decoder          Sequence[Replace "▁" -> " ", ByteFallback, Fuse,
 *                    Strip " " 1 0 (where a space is put before a text)]
 *
 * Anything else that changes the ids is refused, naming the field, rather
 * than encoded differently from the library.
 */
#include "base/json.h"
#include "io/tok_bpe_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A JSON value the reader looks at, NULL when missing. */
static const mt_json *get(const mt_json *o, const char *key) { return mt__json_get(o, key); }

static bool is_null(const mt_json *j) { return !j || j->type == MT_JSON_NULL; }

static bool is_true(const mt_json *j) { return j && j->type == MT_JSON_BOOL && j->b; }

static const char *str_of(const mt_json *j) { return j && j->type == MT_JSON_STR ? j->str : NULL; }

static const char *str_or(const mt_json *j, const char *dflt) { return str_of(j) ? j->str : dflt; }

/* A whole number in [0, INT32_MAX), or -1. */
static int id_of(const mt_json *j) {
    if (!j || j->type != MT_JSON_NUM || j->num < 0 || j->num >= 2147483647.0 ||
        j->num != floor(j->num))
        return -1;
    return (int)j->num;
}

static mt_status refuse(const char *path, const char *field, const char *found,
                        const char *supported) {
    return mt_fail(MT_EFORMAT, "'%s': %s is %s, which meshtrain does not support (it reads %s); "
                   "use a BPE tokenizer.json such as GPT-2's, Llama 3's, Qwen2's (byte-level) "
                   "or Llama 2's and Mistral's (Metaspace)", path, field, found, supported);
}

/* ======================================================================== */
/* model: the vocabulary and the merges                                      */
/* ======================================================================== */

/* The largest id of model.vocab and added_tokens, checking their shapes. */
static mt_status count_ids(const char *path, const mt_json *vocab, const mt_json *added, int *V) {
    int top = -1;
    for (int i = 0; i < vocab->n; i++) {
        int id = id_of(vocab->kids[i]);
        if (id < 0)
            return mt_fail(MT_EFORMAT, "'%s': model.vocab[\"%.64s\"] is not an id (a whole "
                           "number from 0)", path, vocab->keys[i]);
        if (id > top) top = id;
    }
    for (int i = 0; added && i < added->n; i++) {
        const mt_json *t = added->kids[i];
        int id = id_of(get(t, "id"));
        const char *content = str_of(get(t, "content"));
        if (id < 0 || !content || !content[0])
            return mt_fail(MT_EFORMAT, "'%s': added_tokens[%d] needs an \"id\" (a whole number "
                           "from 0) and a non-empty \"content\"", path, i);
        const char *flags[] = {"lstrip", "rstrip", "single_word"};
        for (int f = 0; f < 3; f++)
            if (is_true(get(t, flags[f])))
                return mt_fail(MT_EFORMAT, "'%s': added_tokens[%d] ('%s') has %s true, which "
                               "meshtrain does not support (it matches added tokens exactly)",
                               path, i, content, flags[f]);
        if (id > top) top = id;
    }
    if (top < 0) return mt_fail(MT_EFORMAT, "'%s': model.vocab is empty", path);
    *V = top + 1;
    return MT_OK;
}

/* Whether id is one of added_tokens'. */
static bool is_added(const mt_json *added, int id) {
    for (int i = 0; added && i < added->n; i++)
        if (id_of(get(added->kids[i], "id")) == id) return true;
    return false;
}

/* A piece as the vocabulary spells it into its bytes (out: room for n):
 * GPT-2's map, or (meta) SentencePiece's "▁". */
static bool unspell(bool meta, const char *s, size_t n, char *out, size_t *out_n) {
    if (!meta) return mt__bpe_unspell(s, n, out, out_n);
    *out_n = mt__bpe_unspell_meta(s, n, out);
    return true;
}

static mt_status read_vocab(mt__bpe *m, const char *path, const mt_json *vocab,
                            const mt_json *added, bool meta) {
    char field[96], *buf = NULL;
    size_t cap = 0;
    mt_status s = MT_OK;
    for (int i = 0; s == MT_OK && i < vocab->n; i++) {
        const char *key = vocab->keys[i];
        size_t n = strlen(key), got;
        if (n + 1 > cap && !(buf = realloc(buf, cap = 2 * n + 64)))
            return mt_fail(MT_ENOMEM, "no memory to read '%s'", path);
        int id = id_of(vocab->kids[i]);
        snprintf(field, sizeof field, "model.vocab[\"%.48s\"]", key);
        int b = meta ? mt__bpe_byte_piece(key, n) : -1;
        if (b >= 0) s = mt__bpe_set_byte_token(m, id, b, field);
        else if (unspell(meta, key, n, buf, &got)) s = mt__bpe_set(m, id, buf, got, false, field);
        else if (!is_added(added, id))   /* an added token's own spelling is its content */
            s = mt_fail(MT_EFORMAT, "'%s': %s holds a character outside the byte-level "
                        "alphabet (GPT-2's map of the 256 bytes), so it is not byte-level BPE",
                        path, field);
    }
    free(buf);
    return s;
}

/* One merge: "a b", or ["a", "b"]. */
static mt_status read_merge(mt__bpe *m, const char *path, const mt_json *j, int rank, bool meta) {
    char field[48];
    snprintf(field, sizeof field, "model.merges[%d]", rank);
    const char *a = NULL, *b = NULL;
    char *copy = NULL;
    if (j->type == MT_JSON_ARR && j->n == 2) {
        a = str_of(j->kids[0]);
        b = str_of(j->kids[1]);
    } else if (j->type == MT_JSON_STR) {
        const char *sp = strchr(j->str, ' ');
        if (sp && !strchr(sp + 1, ' ') && (copy = strdup(j->str))) {
            copy[sp - j->str] = '\0';
            a = copy;
            b = copy + (sp - j->str) + 1;
        }
    }
    if (!a || !b) {
        free(copy);
        return mt_fail(MT_EFORMAT, "'%s': %s is not a merge (\"a b\", one space, or [\"a\", "
                       "\"b\"])", path, field);
    }
    char ua[512], ub[512];
    size_t na, nb;
    int ia = -1, ib = -1;
    if (strlen(a) <= sizeof ua && unspell(meta, a, strlen(a), ua, &na)) ia = mt__bpe_find(m, ua, na);
    if (strlen(b) <= sizeof ub && unspell(meta, b, strlen(b), ub, &nb)) ib = mt__bpe_find(m, ub, nb);
    const char *miss = ia < 0 ? a : b;
    bool byte = meta && mt__bpe_byte_piece(miss, strlen(miss)) >= 0;
    mt_status s = ia < 0 || ib < 0
                      ? mt_fail(MT_EFORMAT, "'%s': %s merges '%s', which is %s", path, field, miss,
                                byte ? "a byte piece (byte fallback's; meshtrain merges none)"
                                     : "not in model.vocab")
                      : mt__bpe_merge(m, ia, ib, rank, field);
    free(copy);
    return s;
}

static mt_status read_model(mt__bpe *m, const char *path, const mt_json *model,
                            const mt_json *added, bool meta) {
    const char *type = str_of(get(model, "type"));
    if (type && strcmp(type, "BPE") != 0) return refuse(path, "model.type", type, "\"BPE\"");
    const char *nulls[] = {"dropout", "continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 3; i++) {
        const mt_json *j = get(model, nulls[i]);
        if (!is_null(j) && !(j->type == MT_JSON_STR && !j->str[0]))
            return refuse(path, nulls[i][0] == 'd' ? "model.dropout" : nulls[i][0] == 'c'
                          ? "model.continuing_subword_prefix" : "model.end_of_word_suffix",
                          "set", "null");
    }
    mt_status s = read_vocab(m, path, get(model, "vocab"), added, meta);
    const mt_json *merges = get(model, "merges");
    if (s == MT_OK && (!merges || merges->type != MT_JSON_ARR))
        return mt_fail(MT_EFORMAT, "'%s': model.merges is missing or not an array", path);
    for (int i = 0; s == MT_OK && i < merges->n; i++)
        s = read_merge(m, path, merges->kids[i], i, meta);
    mt__bpe_set_rules(m, is_true(get(model, "ignore_merges")));
    return s;
}

/* ======================================================================== */
/* The pipeline around the model                                             */
/* ======================================================================== */

static mt_status check_byte_level(const char *path, const mt_json *bl, const char *field,
                                  bool *use_regex) {
    char f[96];
    snprintf(f, sizeof f, "%s.add_prefix_space", field);
    if (is_true(get(bl, "add_prefix_space"))) return refuse(path, f, "true", "false");
    const mt_json *r = get(bl, "use_regex");
    *use_regex = !r || is_true(r);   /* the library's default is true */
    return MT_OK;
}

static mt_status read_split(mt__bpe *m, const char *path, const mt_json *sp) {
    const char *behavior = str_of(get(sp, "behavior"));
    if (!behavior || strcmp(behavior, "Isolated") != 0)
        return refuse(path, "pre_tokenizer's Split.behavior", behavior ? behavior : "missing",
                      "\"Isolated\"");
    if (is_true(get(sp, "invert"))) return refuse(path, "pre_tokenizer's Split.invert", "true", "false");
    const mt_json *pat = get(sp, "pattern");
    const char *re = str_of(get(pat, "Regex")), *lit = str_of(get(pat, "String"));
    if (!re && !lit)
        return mt_fail(MT_EFORMAT, "'%s': pre_tokenizer's Split.pattern has neither \"Regex\" "
                       "nor \"String\"", path);
    return mt__bpe_set_pattern(m, re ? re : lit, !re, "pre_tokenizer's Split.pattern");
}

static mt_status read_pre(mt__bpe *m, const char *path, const mt_json *pre) {
    const char *type = str_of(get(pre, "type"));
    bool use_regex;
    if (type && strcmp(type, "ByteLevel") == 0) {
        mt_status s = check_byte_level(path, pre, "pre_tokenizer", &use_regex);
        if (s == MT_OK && use_regex) s = mt__bpe_set_pattern(m, MT__BPE_PAT_GPT2, false, "pre_tokenizer");
        return s;
    }
    const mt_json *list = get(pre, "pretokenizers");
    if (!type || strcmp(type, "Sequence") != 0 || !list || list->type != MT_JSON_ARR ||
        list->n != 2 || strcmp(str_or(get(list->kids[0], "type"), ""), "Split") != 0 ||
        strcmp(str_or(get(list->kids[1], "type"), ""), "ByteLevel") != 0)
        return refuse(path, "pre_tokenizer", type ? type : "missing",
                      "ByteLevel, or Sequence[Split, ByteLevel]");
    mt_status s = check_byte_level(path, list->kids[1], "pre_tokenizer.pretokenizers[1]", &use_regex);
    if (s == MT_OK && use_regex)
        return refuse(path, "pre_tokenizer.pretokenizers[1].use_regex", "true",
                      "false after a Split");
    return s == MT_OK ? read_split(m, path, list->kids[0]) : s;
}

/* TemplateProcessing's "single": the special token before $A. One after it
 * (an EOS the library appends) is refused: meshtrain adds none. */
static mt_status read_template(const char *path, const mt_json *tp, int *bos) {
    const mt_json *single = get(tp, "single"), *specials = get(tp, "special_tokens");
    bool after = false;
    for (int i = 0; single && single->type == MT_JSON_ARR && i < single->n; i++) {
        const mt_json *it = single->kids[i], *st = get(it, "SpecialToken");
        if (get(it, "Sequence")) { after = true; continue; }
        const char *name = str_of(get(st, "id"));
        const mt_json *ids = get(get(specials, name ? name : ""), "ids");
        int id = ids && ids->type == MT_JSON_ARR && ids->n == 1 ? id_of(ids->kids[0]) : -1;
        if (id < 0 || after || *bos >= 0)
            return mt_fail(MT_EFORMAT, "'%s': post_processor.single[%d] (%s) is %s; meshtrain "
                           "puts one special token of one id before a text (--bos) and none "
                           "after it", path, i, name ? name : "not a SpecialToken",
                           after ? "after the text" : id < 0 ? "not one token of one id"
                           : "a second token before the text");
        *bos = id;
    }
    return MT_OK;
}

static mt_status read_post(const char *path, const mt_json *post, int *bos) {
    if (is_null(post)) return MT_OK;
    const char *type = str_of(get(post, "type"));
    if (type && strcmp(type, "ByteLevel") == 0) return MT_OK;
    if (type && strcmp(type, "TemplateProcessing") == 0) return read_template(path, post, bos);
    const mt_json *list = get(post, "processors");
    if (type && strcmp(type, "Sequence") == 0 && list && list->type == MT_JSON_ARR) {
        mt_status s = MT_OK;
        for (int i = 0; s == MT_OK && i < list->n; i++) s = read_post(path, list->kids[i], bos);
        return s;
    }
    return refuse(path, "post_processor", type ? type : "untyped",
                  "null, ByteLevel, TemplateProcessing or a Sequence of them");
}

/* ======================================================================== */
/* Metaspace BPE: SentencePiece's scheme                                     */
/* ======================================================================== */

#define META "\xE2\x96\x81"   /* U+2581 "▁" */

static bool type_is(const mt_json *j, const char *type) {
    const char *t = str_of(get(j, "type"));
    return t && strcmp(t, type) == 0;
}

/* Whether j is Replace{pattern: {String: from}, content: to}. */
static bool is_replace(const mt_json *j, const char *from, const char *to) {
    const char *p = str_of(get(get(j, "pattern"), "String")), *c = str_of(get(j, "content"));
    return type_is(j, "Replace") && p && c && strcmp(p, from) == 0 && strcmp(c, to) == 0;
}

/* Whether the file is SentencePiece's scheme rather than byte-level: its
 * normalizer or pre-tokeniser, or byte_fallback with no pre-tokeniser. */
static bool is_metaspace(const mt_json *root) {
    const mt_json *norm = get(root, "normalizer"), *list = get(norm, "normalizers");
    bool spm_norm = type_is(norm, "Prepend") || type_is(norm, "Replace");
    for (int i = 0; list && list->type == MT_JSON_ARR && i < list->n; i++)
        spm_norm |= type_is(list->kids[i], "Prepend") || type_is(list->kids[i], "Replace");
    const mt_json *pre = get(root, "pre_tokenizer");   /* byte-level's 256 make a fallback moot */
    return spm_norm || type_is(pre, "Metaspace") ||
           (is_null(pre) && is_true(get(get(root, "model"), "byte_fallback")));
}

/* normalizer Sequence[Prepend "▁", Replace " " -> "▁"], or Replace alone. */
static mt_status read_meta_norm(const char *path, const mt_json *norm, int *prefix) {
    const mt_json *list = get(norm, "normalizers"), *last = norm;
    *prefix = MT__BPE_PREFIX_NONE;
    if (type_is(norm, "Sequence") && list && list->type == MT_JSON_ARR && list->n >= 1 &&
        list->n <= 2) {
        const char *pre = list->n == 2 ? str_of(get(list->kids[0], "prepend")) : NULL;
        if (list->n == 2 && (!type_is(list->kids[0], "Prepend") || !pre || strcmp(pre, META) != 0))
            return refuse(path, "normalizer.normalizers[0]", "not Prepend(\"" META "\")",
                          "Prepend(\"" META "\") then Replace(\" \", \"" META "\")");
        if (list->n == 2) *prefix = MT__BPE_PREFIX_EVERY;
        last = list->kids[list->n - 1];
    }
    if (!is_replace(last, " ", META))
        return refuse(path, "normalizer", str_or(get(norm, "type"), "untyped"),
                      "Sequence[Prepend(\"" META "\"), Replace(\" \", \"" META "\")] for "
                      "SentencePiece's BPE");
    return MT_OK;
}

/* pre_tokenizer Metaspace{replacement "▁", prepend_scheme, split false}. */
static mt_status read_metaspace(const char *path, const mt_json *pre, int *prefix) {
    if (!type_is(pre, "Metaspace"))
        return refuse(path, "pre_tokenizer", str_or(get(pre, "type"), is_null(pre) ? "null" : "untyped"),
                      "Metaspace, or null after a Prepend/Replace normalizer");
    const char *rep = str_of(get(pre, "replacement")), *scheme = str_of(get(pre, "prepend_scheme"));
    const mt_json *aps = get(pre, "add_prefix_space"), *split = get(pre, "split");
    if (!rep || strcmp(rep, META) != 0)
        return refuse(path, "pre_tokenizer.replacement", rep ? rep : "missing", "\"" META "\"");
    if (!split || is_true(split))   /* the library's default is true */
        return refuse(path, "pre_tokenizer.split", split ? "true" : "missing (true)",
                      "false: the text is one piece, as transformers writes Llama's");
    if (scheme && strcmp(scheme, "first") == 0) *prefix = MT__BPE_PREFIX_FIRST;
    else if (scheme && strcmp(scheme, "always") == 0) *prefix = MT__BPE_PREFIX_ALWAYS;
    else if (scheme && strcmp(scheme, "never") == 0) *prefix = MT__BPE_PREFIX_NONE;
    else if (scheme) return refuse(path, "pre_tokenizer.prepend_scheme", scheme, "first, always or never");
    else *prefix = !aps || is_true(aps) ? MT__BPE_PREFIX_ALWAYS : MT__BPE_PREFIX_NONE;
    return MT_OK;
}

/* decoder Sequence[Replace "▁" -> " ", ByteFallback, Fuse, Strip(" ", 1, 0)?]. */
static mt_status read_meta_decoder(const char *path, const mt_json *dec, bool *strip) {
    const mt_json *list = get(dec, "decoders");
    const mt_json *st = list && list->type == MT_JSON_ARR && list->n == 4 ? list->kids[3] : NULL;
    const char *content = str_of(get(st, "content"));
    *strip = st != NULL;
    if (!type_is(dec, "Sequence") || !list || list->type != MT_JSON_ARR || list->n < 3 ||
        list->n > 4 || !is_replace(list->kids[0], META, " ") ||
        !type_is(list->kids[1], "ByteFallback") || !type_is(list->kids[2], "Fuse") ||
        (st && (!type_is(st, "Strip") || !content || strcmp(content, " ") != 0 ||
                id_of(get(st, "start")) != 1 || id_of(get(st, "stop")) != 0)))
        return refuse(path, "decoder", str_or(get(dec, "type"), is_null(dec) ? "null" : "untyped"),
                      "Sequence[Replace(\"" META "\", \" \"), ByteFallback, Fuse, Strip(\" \", 1, "
                      "0)] for SentencePiece's BPE");
    return MT_OK;
}

/* The pipeline of a Metaspace BPE, set on m before its vocabulary is read. */
static mt_status read_meta(mt__bpe *m, const char *path, const mt_json *root) {
    const mt_json *norm = get(root, "normalizer"), *pre = get(root, "pre_tokenizer");
    if (!is_true(get(get(root, "model"), "byte_fallback")))
        return refuse(path, "model.byte_fallback", "false", "true: a character outside the "
                      "vocabulary as its bytes' pieces, not <unk>");
    int prefix = MT__BPE_PREFIX_NONE;
    bool strip = false;
    mt_status s = MT_OK;
    if (!is_null(norm) && !is_null(pre))
        s = refuse(path, "pre_tokenizer", str_or(get(pre, "type"), "set"),
                   "null after a Prepend/Replace normalizer");
    else if (!is_null(norm)) s = read_meta_norm(path, norm, &prefix);
    else s = read_metaspace(path, pre, &prefix);
    if (s == MT_OK) s = read_meta_decoder(path, get(root, "decoder"), &strip);
    if (s == MT_OK) mt__bpe_set_metaspace(m, prefix, strip);
    return s;
}

/* The end-of-text token: the first of these names that is an added token. */
static int find_eos(const mt__bpe *m, const mt_json *added) {
    static const char *const names[] = {"<|end_of_text|>", "<|endoftext|>", "</s>", "<|im_end|>"};
    for (int k = 0; k < 4; k++)
        for (int i = 0; added && i < added->n; i++)
            if (strcmp(str_of(get(added->kids[i], "content")), names[k]) == 0)
                return id_of(get(added->kids[i], "id"));
    (void)m;
    return -1;
}

static mt_status read_all(mt__bpe *m, const char *path, const mt_json *root) {
    const mt_json *added = get(root, "added_tokens");
    const bool meta = is_metaspace(root);
    mt_status s = meta ? read_meta(m, path, root) : MT_OK;
    if (s == MT_OK) s = read_model(m, path, get(root, "model"), added, meta);
    for (int i = 0; s == MT_OK && added && i < added->n; i++) {
        const char *c = str_of(get(added->kids[i], "content"));
        char field[48];
        snprintf(field, sizeof field, "added_tokens[%d]", i);
        s = mt__bpe_set(m, id_of(get(added->kids[i], "id")), c, strlen(c), true, field);
    }
    if (s == MT_OK) s = mt__bpe_finish(m, false);
    int bos = -1;
    if (s == MT_OK) s = read_post(path, get(root, "post_processor"), &bos);
    if (s == MT_OK) mt__bpe_set_specials(m, bos, find_eos(m, added));
    if (meta || s != MT_OK) return s;
    const mt_json *norm = get(root, "normalizer"), *dec = get(root, "decoder");
    const char *nt = str_of(get(norm, "type"));
    if (s == MT_OK && !is_null(norm) && !(nt && strcmp(nt, "NFC") == 0))
        s = refuse(path, "normalizer", nt ? nt : "set", "null or NFC");
    mt__bpe_set_nfc(m, nt && strcmp(nt, "NFC") == 0);
    if (s == MT_OK) s = read_pre(m, path, get(root, "pre_tokenizer"));
    const char *dt = str_of(get(dec, "type"));
    if (s == MT_OK && !is_null(dec) && (!dt || strcmp(dt, "ByteLevel") != 0))
        s = refuse(path, "decoder", dt ? dt : "untyped", "null or ByteLevel");
    return s;
}

mt_status mt__bpe_read_json(const char *path, const char *text, size_t len, mt__bpe **out) {
    *out = NULL;
    mt_json *root;
    mt_status s = mt__json_parse(text, len, path, &root);
    if (s != MT_OK) return s;
    const mt_json *model = get(root, "model"), *vocab = get(model, "vocab");
    const mt_json *added = get(root, "added_tokens");
    int V = 0;
    if (root->type != MT_JSON_OBJ || !vocab || vocab->type != MT_JSON_OBJ)
        s = mt_fail(MT_EFORMAT, "'%s' is JSON without a model.vocab object: it is not a Hugging "
                    "Face tokenizer.json", path);
    else if (added && added->type != MT_JSON_ARR)
        s = mt_fail(MT_EFORMAT, "'%s': added_tokens is not an array", path);
    if (s == MT_OK) s = count_ids(path, vocab, added, &V);
    mt__bpe *m = NULL;
    if (s == MT_OK) s = mt__bpe_new(path, V, &m);
    if (s == MT_OK) s = read_all(m, path, root);
    mt__json_free(root);
    if (s != MT_OK) {
        mt__bpe_free(m);
        return s;
    }
    *out = m;
    return MT_OK;
}
