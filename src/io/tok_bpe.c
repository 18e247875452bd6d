/*
 * tok_bpe.c — byte-level BPE (tok_bpe_impl.h): the tokens as bytes, the
 * merge table, and encoding a text the way Hugging Face's tokenizers and
 * OpenAI's tiktoken do:
 *
 *   1. special (added) tokens are found whole in the text, leftmost first
 *      and the longest at one place, and become their ids;
 *   2. each stretch between them is normalised (tok_text.c: NFC, or
 *      Metaspace's spaces and the space put before it), then split by the
 *      pre-tokeniser's regex (PCRE2, UTF-8 with Unicode properties): every
 *      match is a piece, and so is every gap between matches (Hugging
 *      Face's "Isolated" split); bytes that are not UTF-8 never match, so
 *      they fall in gaps; Metaspace BPE and run.c have no regex;
 *   3. a piece that is a token is that token when ignore_merges says so
 *      (tiktoken always, Llama 3's tokenizer.json); otherwise its bytes are
 *      single-byte tokens (Metaspace BPE, run.c: its characters, a
 *      character that is not a token its byte pieces) merged pair by pair,
 *      the lowest merge rank first and the leftmost of equal ranks, until
 *      no pair has a rank.
 *
 * Step 3 keeps the pairs in a binary heap keyed (rank, position), entries
 * checked when popped (a pair whose tokens changed since it was pushed is
 * skipped), so a piece of n bytes costs O(n log n), not a rescan per merge.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "io/tok_bpe_impl.h"
#include "io/tokenizer_impl.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char MT__BPE_PAT_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char MT__BPE_PAT_CL100K[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char MT__BPE_PAT_O200K[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
    "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* A merge: the pair key (a << 32 | b), its rank, the token it makes. */
typedef struct { uint64_t key; int32_t rank, id; } pair_slot;

struct mt__bpe {
    char       *path;
    int         V;
    char      **bytes;      /* (V) each token's bytes, NULL until set */
    uint32_t   *len;        /* (V) */
    char      **spell;      /* (V) each token as spelled (piece) */
    uint8_t    *special;    /* (V) 1: an added token, matched whole in a text */
    int32_t    *tab;        /* (n_tab) open addressing, ordinary tokens by bytes; -1 empty */
    size_t      n_tab;
    pair_slot  *pairs;      /* (n_pairs_cap) open addressing by key; id -1 empty */
    size_t      n_pairs, n_pairs_cap;
    bool        ignore_merges;
    bool        match_specials;   /* special tokens in a text are found (else text) */
    mt__bpe_text text;            /* what is done to a stretch before it is split */
    pcre2_code *re;         /* the pre-tokeniser, NULL: no split */
    int        *spec;       /* (n_spec) the special tokens' ids, matched in a text */
    int         n_spec;
    uint8_t     spec_first[32];   /* a bit per byte that begins a special token */
    int         byte_id[256];
    uint32_t    max_len;
    int         bos, eos;
    int32_t    *rank;       /* (V) the merge rank of the token a pair makes, NULL: its id */
    bool        chars;      /* a piece starts as its characters, not its bytes (run.c) */
    bool        strip;      /* decoding drops a text's first space (run.c's dummy prefix) */
    const char *kind;       /* mt_tokenizer_kind's name */
};

/* ======================================================================== */
/* The model                                                                 */
/* ======================================================================== */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_key(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    return k ^ (k >> 33);
}

mt_status mt__bpe_new(const char *path, int V, mt__bpe **out) {
    *out = NULL;
    mt__bpe *m = calloc(1, sizeof *m);
    size_t n_tab = 16;
    while (n_tab < 2 * (size_t)V) n_tab *= 2;
    if (m) {
        m->path = strdup(path);
        m->V = V;
        m->bytes = calloc((size_t)V, sizeof *m->bytes);
        m->len = calloc((size_t)V, sizeof *m->len);
        m->spell = calloc((size_t)V, sizeof *m->spell);
        m->special = calloc((size_t)V, 1);
        m->tab = malloc(n_tab * sizeof *m->tab);
        m->n_tab = n_tab;
        m->spec = malloc((size_t)V * sizeof *m->spec);
    }
    if (!m || !m->path || !m->bytes || !m->len || !m->spell || !m->special || !m->tab || !m->spec) {
        mt__bpe_free(m);
        return mt_fail(MT_ENOMEM, "no memory for the %d tokens of '%s'", V, path);
    }
    memset(m->tab, 0xff, n_tab * sizeof *m->tab);
    for (int b = 0; b < 256; b++) m->byte_id[b] = -1;
    m->bos = m->eos = -1;
    m->kind = "byte-level BPE";
    m->match_specials = true;
    *out = m;
    return MT_OK;
}

void mt__bpe_free(mt__bpe *m) {
    if (!m) return;
    for (int i = 0; m->bytes && i < m->V; i++) {
        free(m->bytes[i]);
        if (m->spell) free(m->spell[i]);
    }
    free(m->bytes);
    free(m->len);
    free(m->spell);
    free(m->special);
    free(m->tab);
    free(m->pairs);
    free(m->spec);
    free(m->rank);
    pcre2_code_free(m->re);
    free(m->path);
    free(m);
}

int mt__bpe_find(const mt__bpe *m, const char *s, size_t n) {
    size_t mask = m->n_tab - 1;
    for (size_t h = hash_bytes(s, n) & mask;; h = (h + 1) & mask) {
        int id = m->tab[h];
        if (id < 0) return -1;
        if (m->len[id] == n && memcmp(m->bytes[id], s, n) == 0) return id;
    }
}

mt_status mt__bpe_set(mt__bpe *m, int id, const char *s, size_t n, bool special,
                      const char *field) {
    if (id < 0 || id >= m->V)
        return mt_fail(MT_EFORMAT, "'%s': %s gives id %d, outside 0..%d", m->path, field, id,
                       m->V - 1);
    if (m->bytes[id]) {
        /* Hugging Face lists a special token of the vocabulary again in added_tokens */
        if (special && m->len[id] == n && memcmp(m->bytes[id], s, n) == 0) {
            if (!m->special[id]) m->spec[m->n_spec++] = id;
            m->special[id] = 1;
            m->spec_first[(uint8_t)s[0] / 8] |= (uint8_t)(1u << ((uint8_t)s[0] % 8));
            return MT_OK;
        }
        return mt_fail(MT_EFORMAT, "'%s': %s gives id %d to '%.*s', and it is already '%s'",
                       m->path, field, id, (int)(n > 64 ? 64 : n), s, m->spell[id]);
    }
    if (n == 0)
        return mt_fail(MT_EFORMAT, "'%s': %s gives id %d an empty token", m->path, field, id);
    if (!special && mt__bpe_find(m, s, n) >= 0)
        return mt_fail(MT_EFORMAT, "'%s': %s gives the bytes of token %d to id %d too", m->path,
                       field, mt__bpe_find(m, s, n), id);
    m->bytes[id] = malloc(n + 1);
    m->spell[id] = special ? malloc(n + 1) : m->text.meta ? mt__bpe_spell_meta(s, n)
                                                          : mt__bpe_spell(s, n);
    if (!m->bytes[id] || !m->spell[id])
        return mt_fail(MT_ENOMEM, "no memory for the tokens of '%s'", m->path);
    memcpy(m->bytes[id], s, n);
    m->bytes[id][n] = '\0';
    m->len[id] = (uint32_t)n;
    if (n > m->max_len) m->max_len = (uint32_t)n;
    if (special) {
        memcpy(m->spell[id], s, n);
        m->spell[id][n] = '\0';
        m->special[id] = 1;
        m->spec[m->n_spec++] = id;
        m->spec_first[(uint8_t)s[0] / 8] |= (uint8_t)(1u << ((uint8_t)s[0] % 8));
        return MT_OK;
    }
    size_t mask = m->n_tab - 1, h = hash_bytes(s, n) & mask;
    while (m->tab[h] >= 0) h = (h + 1) & mask;
    m->tab[h] = id;
    if (n == 1 && !m->text.meta) m->byte_id[(uint8_t)s[0]] = id;   /* Metaspace: byte pieces */
    return MT_OK;
}

static const pair_slot *pair_get(const mt__bpe *m, int a, int b) {
    if (!m->n_pairs_cap) return NULL;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t mask = m->n_pairs_cap - 1;
    for (size_t h = hash_key(key) & mask;; h = (h + 1) & mask) {
        if (m->pairs[h].id < 0) return NULL;
        if (m->pairs[h].key == key) return &m->pairs[h];
    }
}

static bool pair_put(pair_slot *tab, size_t cap, pair_slot p) {
    size_t mask = cap - 1;
    for (size_t h = hash_key(p.key) & mask;; h = (h + 1) & mask) {
        if (tab[h].id < 0) { tab[h] = p; return true; }
        if (tab[h].key == p.key) return false;   /* listed twice: the first rank stands */
    }
}

mt_status mt__bpe_merge(mt__bpe *m, int a, int b, int rank, const char *field) {
    if (2 * (m->n_pairs + 1) > m->n_pairs_cap) {
        size_t cap = m->n_pairs_cap ? 2 * m->n_pairs_cap : 1024;
        pair_slot *t = malloc(cap * sizeof *t);
        if (!t) return mt_fail(MT_ENOMEM, "no memory for the merges of '%s'", m->path);
        for (size_t i = 0; i < cap; i++) t[i].id = -1;
        for (size_t i = 0; i < m->n_pairs_cap; i++)
            if (m->pairs[i].id >= 0) pair_put(t, cap, m->pairs[i]);
        free(m->pairs);
        m->pairs = t;
        m->n_pairs_cap = cap;
    }
    size_t la = m->len[a], lb = m->len[b];
    char buf[512], *cat = la + lb <= sizeof buf ? buf : malloc(la + lb);
    if (!cat) return mt_fail(MT_ENOMEM, "no memory for the merges of '%s'", m->path);
    memcpy(cat, m->bytes[a], la);
    memcpy(cat + la, m->bytes[b], lb);
    int id = mt__bpe_find(m, cat, la + lb);
    if (cat != buf) free(cat);
    if (id < 0)
        return mt_fail(MT_EFORMAT, "'%s': %s merges '%s' and '%s' into a token that is not in "
                       "model.vocab", m->path, field, m->spell[a], m->spell[b]);
    pair_slot p = {(uint64_t)(uint32_t)a << 32 | (uint32_t)b, rank, id};
    if (pair_put(m->pairs, m->n_pairs_cap, p)) m->n_pairs++;
    return MT_OK;
}

void mt__bpe_set_rules(mt__bpe *m, bool ignore_merges) { m->ignore_merges = ignore_merges; }

void mt__bpe_match_specials(mt__bpe *m, bool match) { m->match_specials = match; }

void mt__bpe_set_nfc(mt__bpe *m, bool nfc) { m->text.nfc = nfc; }

void mt__bpe_set_llama2c(mt__bpe *m, int32_t *rank) {
    free(m->rank);
    m->rank = rank;
    m->chars = m->strip = true;
    m->text.prefix = MT__BPE_PREFIX_EVERY;   /* its one stretch: special tokens are text */
    m->kind = "llama2.c BPE";
}

void mt__bpe_set_byte(mt__bpe *m, int b, int id) { m->byte_id[b] = id; }

void mt__bpe_set_metaspace(mt__bpe *m, int prefix, bool strip) {
    m->chars = m->text.meta = true;
    m->text.prefix = prefix;
    m->strip = strip;
    m->kind = "Metaspace BPE";
}

mt_status mt__bpe_set_byte_token(mt__bpe *m, int id, int b, const char *field) {
    if (id < 0 || id >= m->V || m->bytes[id])
        return mt_fail(MT_EFORMAT, "'%s': %s gives the byte piece <0x%02X> id %d, %s", m->path,
                       field, b, id, id < 0 || id >= m->V ? "outside the vocabulary" : "taken");
    m->bytes[id] = malloc(2);
    m->spell[id] = malloc(7);
    if (!m->bytes[id] || !m->spell[id])
        return mt_fail(MT_ENOMEM, "no memory for the tokens of '%s'", m->path);
    m->bytes[id][0] = (char)b;
    m->bytes[id][1] = '\0';
    m->len[id] = 1;
    snprintf(m->spell[id], 7, "<0x%02X>", b);
    if (m->max_len < 1) m->max_len = 1;
    m->byte_id[b] = id;
    return MT_OK;
}

bool mt__bpe_dummy(const mt__bpe *m) { return m->strip; }

const char *mt__bpe_kind(const mt__bpe *m) { return m->kind; }

mt_status mt__bpe_set_pattern(mt__bpe *m, const char *pattern, bool literal, const char *field) {
    pcre2_code_free(m->re);
    m->re = NULL;
    if (!pattern) return MT_OK;
    int err;
    PCRE2_SIZE at;
    uint32_t opt = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : 0);
    m->re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opt, &err, &at, NULL);
    if (!m->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return mt_fail(MT_EFORMAT, "'%s': %s, the pre-tokeniser's regex, does not compile in "
                       "PCRE2: %s at offset %zu of \"%.120s\"", m->path, field, (char *)msg,
                       (size_t)at, pattern);
    }
    pcre2_jit_compile(m->re, PCRE2_JIT_COMPLETE);   /* faster where the JIT exists; optional */
    return MT_OK;
}

void mt__bpe_set_specials(mt__bpe *m, int bos, int eos) {
    m->bos = bos;
    m->eos = eos;
}

mt_status mt__bpe_finish(mt__bpe *m, bool holes) {
    for (int id = 0; id < m->V; id++) {
        if (!m->bytes[id] && holes && !m->spell[id] && !(m->spell[id] = strdup("")))
            return mt_fail(MT_ENOMEM, "no memory for the tokens of '%s'", m->path);
        if (!m->bytes[id] && !holes)
            return mt_fail(MT_EFORMAT, "'%s' has no token of id %d, and has ids up to %d: the "
                           "ids of a vocabulary run 0..V-1 without a gap", m->path, id, m->V - 1);
    }
    for (int b = 0; b < 256 && m->text.meta; b++)
        if (m->byte_id[b] < 0)
            return mt_fail(MT_EFORMAT, "'%s' has no byte piece <0x%02X> in model.vocab: "
                           "byte_fallback needs all 256, so that any text encodes", m->path, b);
    for (int b = 0; b < 256; b++)
        if (m->byte_id[b] < 0)
            return mt_fail(MT_EFORMAT, "'%s' has no token of the single byte 0x%02X (spelled "
                           "U+%04X): a byte-level BPE vocabulary holds all 256, so that any "
                           "text encodes", m->path, b, mt__bpe_byte_char(b));
    if (m->text.meta && mt__bpe_find(m, " ", 1) < 0)
        return mt_fail(MT_EFORMAT, "'%s' has no token \"\xE2\x96\x81\" (the space) in "
                       "model.vocab, which every SentencePiece vocabulary holds", m->path);
    return MT_OK;
}

int mt__bpe_vocab(const mt__bpe *m) { return m->V; }
int mt__bpe_bos(const mt__bpe *m) { return m->bos; }
int mt__bpe_eos(const mt__bpe *m) { return m->eos; }

const char *mt__bpe_piece(const mt__bpe *m, int id) {
    return id >= 0 && id < m->V ? m->spell[id] : NULL;
}

bool mt__bpe_bytes(const mt__bpe *m, int id, const char **s, size_t *n) {
    if (id < 0 || id >= m->V || !m->bytes[id]) return false;
    *s = m->bytes[id];
    *n = m->len[id];
    return true;
}

/* ======================================================================== */
/* Encoding                                                                  */
/* ======================================================================== */

/* One encode call's growing arrays: the ids, and the scratch of a piece. */
typedef struct {
    int32_t *ids;
    int64_t  n, cap;
    int32_t *sym, *next, *prev;          /* (piece bytes) the symbols of a piece */
    struct heap_e { int32_t rank, pos, a, b, to; } *heap;
    size_t   cap_piece;
    char    *cat;                        /* (2 max_len) two tokens' bytes, without merges */
} enc;

static bool push_id(enc *e, int32_t id) { return mt__ids_append(&e->ids, &e->n, &e->cap, id); }

/* The rank and result of tokens a, b side by side; false when they do not merge. */
static bool rank_of(const mt__bpe *m, enc *e, int a, int b, int32_t *rank, int32_t *id) {
    if (m->n_pairs_cap) {
        const pair_slot *p = pair_get(m, a, b);
        if (!p) return false;
        *rank = p->rank;
        *id = p->id;
        return true;
    }
    memcpy(e->cat, m->bytes[a], m->len[a]);
    memcpy(e->cat + m->len[a], m->bytes[b], m->len[b]);
    int t = mt__bpe_find(m, e->cat, m->len[a] + m->len[b]);
    if (t < 0) return false;
    *id = t;
    *rank = m->rank ? m->rank[t] : t;
    return true;
}

static bool heap_less(const struct heap_e *x, const struct heap_e *y) {
    return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}

static void heap_push(struct heap_e *h, size_t *n, struct heap_e v) {
    size_t i = (*n)++;
    while (i > 0 && heap_less(&v, &h[(i - 1) / 2])) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
    h[i] = v;
}

static struct heap_e heap_pop(struct heap_e *h, size_t *n) {
    struct heap_e top = h[0], v = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &v)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = v;
    return top;
}

/* Pushes the pair that begins at symbol i, if it merges. */
static void try_pair(const mt__bpe *m, enc *e, size_t *nh, int32_t i) {
    int32_t j = e->next[i], rank, id;
    if (j >= 0 && rank_of(m, e, e->sym[i], e->sym[j], &rank, &id))
        heap_push(e->heap, nh, (struct heap_e){rank, i, e->sym[i], e->sym[j], id});
}

static mt_status encode_piece(const mt__bpe *m, enc *e, const char *s, size_t n) {
    int id;
    if (n == 0) return MT_OK;
    if ((n == 1 || m->ignore_merges) && (id = mt__bpe_find(m, s, n)) >= 0)
        return push_id(e, id) ? MT_OK : mt_fail(MT_ENOMEM, "no memory for the ids");
    if (n > e->cap_piece) {
        size_t cap = n < 256 ? 256 : n;
        free(e->sym); free(e->next); free(e->prev); free(e->heap);
        e->sym = malloc(cap * sizeof *e->sym);
        e->next = malloc(cap * sizeof *e->next);
        e->prev = malloc(cap * sizeof *e->prev);
        e->heap = malloc(3 * cap * sizeof *e->heap);   /* n - 1 pairs, then 2 a merge */
        e->cap_piece = e->sym && e->next && e->prev && e->heap ? cap : 0;
        if (!e->cap_piece) return mt_fail(MT_ENOMEM, "no memory to encode a piece of %zu bytes", n);
    }
    size_t k = 0;   /* the symbols: its bytes, or (chars) its characters, bytes where not tokens */
    for (size_t i = 0, c; i < n; i += c) {
        c = 1;
        while (m->chars && i + c < n && c < 4 && ((uint8_t)s[i + c] & 0xC0) == 0x80) c++;
        if (m->chars && (id = mt__bpe_find(m, s + i, c)) >= 0) e->sym[k++] = id;
        else for (size_t b = 0; b < c; b++) e->sym[k++] = m->byte_id[(uint8_t)s[i + b]];
    }
    for (size_t i = 0; i < k; i++) {
        e->next[i] = i + 1 < k ? (int32_t)i + 1 : -1;
        e->prev[i] = (int32_t)i - 1;
    }
    n = k;
    size_t nh = 0;
    for (size_t i = 0; i + 1 < n; i++) try_pair(m, e, &nh, (int32_t)i);
    while (nh > 0) {
        struct heap_e t = heap_pop(e->heap, &nh);
        int32_t j = e->next[t.pos];
        if (e->sym[t.pos] != t.a || j < 0 || e->sym[j] != t.b) continue;   /* stale */
        e->sym[t.pos] = t.to;
        e->sym[j] = -1;
        e->next[t.pos] = e->next[j];
        if (e->next[j] >= 0) e->prev[e->next[j]] = t.pos;
        if (e->prev[t.pos] >= 0) try_pair(m, e, &nh, e->prev[t.pos]);
        try_pair(m, e, &nh, t.pos);
    }
    for (int32_t i = 0; i >= 0; i = e->next[i])
        if (!push_id(e, e->sym[i])) return mt_fail(MT_ENOMEM, "no memory for the ids");
    return MT_OK;
}

static mt_status encode_split(const mt__bpe *m, enc *e, pcre2_match_data *md, const char *s,
                              size_t n);

/* A stretch of text with no special token (`first`: at the text's start)
 * as the pipeline makes it (NFC, Metaspace's space), then the regex's
 * pieces and gaps. */
static mt_status encode_ordinary(const mt__bpe *m, enc *e, pcre2_match_data *md, const char *s,
                                 size_t n, bool first) {
    char *t = NULL;
    size_t tn = n;
    mt_status st = mt__bpe_text_prepare(s, n, &m->text, first, &t, &tn);
    if (st == MT_OK) st = encode_split(m, e, md, t ? t : s, tn);
    free(t);
    return st;
}

static mt_status encode_split(const mt__bpe *m, enc *e, pcre2_match_data *md, const char *s,
                              size_t n) {
    if (!m->re) return encode_piece(m, e, s, n);
    size_t at = 0, done = 0;
    mt_status st = MT_OK;
    while (st == MT_OK && at < n) {
        int rc = pcre2_match(m->re, (PCRE2_SPTR)s, n, at, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return mt_fail(MT_EINTERNAL, "'%s': the pre-tokeniser's regex failed at byte %zu "
                           "of a text: %s", m->path, at, (char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) {   /* an empty match splits nothing: look one byte on */
            at = ov[1] + 1;
            continue;
        }
        st = encode_piece(m, e, s + done, ov[0] - done);
        if (st == MT_OK) st = encode_piece(m, e, s + ov[0], ov[1] - ov[0]);
        at = done = ov[1];
    }
    return st == MT_OK ? encode_piece(m, e, s + done, n - done) : st;
}

/* The first special token in s[from..n), the longest where several begin:
 * its id and place into *id, *at; false when there is none. */
static bool find_special(const mt__bpe *m, const char *s, size_t from, size_t n, int *id,
                         size_t *at) {
    for (size_t i = from; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        if (!(m->spec_first[c / 8] & (1u << (c % 8)))) continue;
        int best = -1;
        for (int k = 0; k < m->n_spec; k++) {
            int t = m->spec[k];
            if (m->len[t] <= n - i && (best < 0 || m->len[t] > m->len[best]) &&
                memcmp(s + i, m->bytes[t], m->len[t]) == 0)
                best = t;
        }
        if (best >= 0) { *id = best; *at = i; return true; }
    }
    return false;
}

mt_status mt__bpe_encode(const mt__bpe *m, const char *text, size_t len, int32_t **ids,
                         int64_t *n) {
    enc e = {0};
    pcre2_match_data *md = m->re ? pcre2_match_data_create_from_pattern(m->re, NULL) : NULL;
    e.cat = malloc(2 * (size_t)m->max_len + 1);
    mt_status s = (m->re && !md) || !e.cat
                      ? mt_fail(MT_ENOMEM, "no memory to encode %zu bytes", len) : MT_OK;
    size_t pos = 0, at;
    int sp;
    while (s == MT_OK && pos < len && m->n_spec && m->match_specials && find_special(m, text, pos, len, &sp, &at)) {
        s = encode_ordinary(m, &e, md, text + pos, at - pos, pos == 0);
        if (s == MT_OK && !push_id(&e, sp)) s = mt_fail(MT_ENOMEM, "no memory for the ids");
        pos = at + m->len[sp];
    }
    if (s == MT_OK) s = encode_ordinary(m, &e, md, text + pos, len - pos, pos == 0);
    pcre2_match_data_free(md);
    free(e.sym); free(e.next); free(e.prev); free(e.heap); free(e.cat);
    if (s == MT_OK && !e.ids && !(e.ids = malloc(sizeof *e.ids)))
        s = mt_fail(MT_ENOMEM, "no memory for an empty array of ids");
    if (s != MT_OK) {
        free(e.ids);
        return s;
    }
    *ids = e.ids;
    *n = e.n;
    return MT_OK;
}
