/*
 * tokenizer.c — a SentencePiece model as meshtrain reads it: the pieces,
 * their scores and types from the model file, and decoding ids to text.
 *
 * Why the command-line tools and not libsentencepiece (the choice issue 23
 * leaves open): the project stays C only, with no C++ runtime in the
 * library and no C++ shim to keep in step with a C++ API; training and
 * encoding are whole-file batch jobs where a child process costs nothing
 * measurable (tokenizer_spm.c runs spm_train and spm_encode). What runs
 * inside meshtrain's own loops, decoding a sample token by token, needs
 * only the pieces, read here from the model file itself, the same table
 * llama2.c's tokenizer.bin holds (pieces and scores).
 *
 * The model file is a protocol buffer (ModelProto in SentencePiece's
 * sentencepiece_model.proto). The fields read:
 *   ModelProto      1 pieces (repeated SentencePiece), 3 normalizer_spec
 *   SentencePiece   1 piece (string), 2 score (float), 3 type (enum, NORMAL=1)
 *   NormalizerSpec  3 add_dummy_prefix (bool, true), 4 remove_extra_whitespaces
 *                   (bool, true)
 * Everything else is skipped by its wire type.
 */
#include "io/io_impl.h"
#include "io/tokenizer_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A model larger than this is not a SentencePiece model (Llama 2's is 0.5 MB). */
#define MODEL_MAX_BYTES (256 << 20)

static const char SPACE_SYMBOL[] = "\xE2\x96\x81";   /* U+2581 "▁" */
static const char UNK_SURFACE[] = " \xE2\x81\x87 ";  /* SentencePiece's default: " ⁇ " */

/* ======================================================================== */
/* Protocol buffer reading                                                   */
/* ======================================================================== */

typedef struct { const uint8_t *p, *end; } pb_buf;

static bool pb_varint(pb_buf *b, uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && b->p < b->end; shift += 7) {
        uint8_t c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return true;
    }
    return false;
}

/* One field: its number, wire type and value (varint and fixed32 into *v,
 * a length-delimited one into *sub). False at a malformed field. */
static bool pb_field(pb_buf *b, uint32_t *field, uint32_t *wire, uint64_t *v, pb_buf *sub) {
    uint64_t key;
    if (!pb_varint(b, &key)) return false;
    *field = (uint32_t)(key >> 3);
    *wire = (uint32_t)(key & 7);
    switch (*wire) {
    case 0: return pb_varint(b, v);
    case 1:
        if (b->end - b->p < 8) return false;
        b->p += 8;
        return true;
    case 2: {
        uint64_t n;
        if (!pb_varint(b, &n) || n > (uint64_t)(b->end - b->p)) return false;
        sub->p = b->p;
        sub->end = b->p + n;
        b->p += n;
        return true;
    }
    case 5: {
        if (b->end - b->p < 4) return false;
        uint32_t x;
        memcpy(&x, b->p, 4);   /* little-endian on every target meshtrain builds for */
        *v = x;
        b->p += 4;
        return true;
    }
    default: return false;   /* groups (3, 4) are not in sentencepiece_model.proto */
    }
}

/* ======================================================================== */
/* Reading the model                                                         */
/* ======================================================================== */

/* "<0xAB>" -> 0xAB; -1 when the piece is not spelled so. */
static int byte_of_piece(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The bytes piece `s` (n bytes) of type `type` decodes to, into out (room
 * for n + sizeof UNK_SURFACE bytes); returns their count. */
static int piece_text(const char *s, size_t n, int type, char *out) {
    int b = type == MT__SPM_BYTE ? byte_of_piece(s, n) : -1;
    if (b >= 0) { out[0] = (char)b; return 1; }
    if (type == MT__SPM_CONTROL) return 0;
    if (type == MT__SPM_UNKNOWN) {
        memcpy(out, UNK_SURFACE, sizeof UNK_SURFACE - 1);
        return (int)sizeof UNK_SURFACE - 1;
    }
    int m = 0;
    for (size_t i = 0; i < n;) {
        if (n - i >= 3 && memcmp(s + i, SPACE_SYMBOL, 3) == 0) {
            out[m++] = ' ';
            i += 3;
        } else {
            out[m++] = s[i++];
        }
    }
    return m;
}

/* Reads one SentencePiece message into piece i of tok, its strings at *at. */
static bool read_piece(pb_buf msg, mt_tokenizer *tok, int i, char **at) {
    pb_buf str = {NULL, NULL};
    uint64_t v = 0;
    uint32_t field, wire;
    pb_buf sub;
    float score = 0;
    int type = MT__SPM_NORMAL;
    while (msg.p < msg.end) {
        if (!pb_field(&msg, &field, &wire, &v, &sub)) return false;
        if (field == 1 && wire == 2) str = sub;
        if (field == 2 && wire == 5) { uint32_t x = (uint32_t)v; memcpy(&score, &x, 4); }
        if (field == 3 && wire == 0) type = (int)v;
    }
    size_t n = str.p ? (size_t)(str.end - str.p) : 0;
    tok->piece[i] = *at;
    if (n) memcpy(*at, str.p, n);
    (*at)[n] = '\0';
    *at += n + 1;
    tok->text[i] = *at;
    tok->text_len[i] = piece_text(tok->piece[i], n, type, *at);
    (*at)[tok->text_len[i]] = '\0';
    *at += tok->text_len[i] + 1;
    tok->score[i] = score;
    tok->type[i] = (uint8_t)(type >= 1 && type <= 6 ? type : MT__SPM_NORMAL);
    return true;
}

/* Counts the pieces and the bytes their strings take; reads the
 * normaliser's flags. False at a malformed field. */
static bool scan_model(pb_buf b, int64_t *n_pieces, size_t *bytes, bool *strip, bool *dummy_out) {
    bool dummy = true, fold = true;   /* the proto's defaults */
    uint32_t field, wire;
    uint64_t v;
    pb_buf sub;
    *n_pieces = 0;
    *bytes = 0;
    while (b.p < b.end) {
        if (!pb_field(&b, &field, &wire, &v, &sub)) return false;
        if (field == 1 && wire == 2) {
            (*n_pieces)++;
            *bytes += (size_t)(sub.end - sub.p) * 2 + sizeof UNK_SURFACE + 2;
        }
        if (field == 3 && wire == 2) {
            pb_buf spec = sub;
            while (spec.p < spec.end) {
                if (!pb_field(&spec, &field, &wire, &v, &sub)) return false;
                if (field == 3 && wire == 0) dummy = v != 0;
                if (field == 4 && wire == 0) fold = v != 0;
            }
        }
    }
    *strip = dummy || fold;
    *dummy_out = dummy;
    return true;
}

static mt_status parse_model(const char *path, const uint8_t *data, size_t size,
                             mt_tokenizer *tok) {
    pb_buf b = {data, data + size};
    int64_t n;
    size_t bytes;
    if (!scan_model(b, &n, &bytes, &tok->strip_space, &tok->dummy_prefix))
        return mt_fail(MT_EFORMAT, "'%s' is not a SentencePiece model: its protocol buffer is "
                       "malformed (give the .model file spm_train or meshtrain tokenize wrote); "
                       "nor is it a tokenizer.json (JSON) or a tiktoken file (\"BASE64 RANK\" "
                       "lines)", path);
    if (n == 0 || n > INT32_MAX)
        return mt_fail(MT_EFORMAT, "'%s' is not a SentencePiece model: it holds %lld pieces "
                       "(give the .model file spm_train or meshtrain tokenize wrote)", path,
                       (long long)n);
    tok->V = (int)n;
    tok->piece = calloc((size_t)n, sizeof *tok->piece);
    tok->text = calloc((size_t)n, sizeof *tok->text);
    tok->text_len = calloc((size_t)n, sizeof *tok->text_len);
    tok->score = calloc((size_t)n, sizeof *tok->score);
    tok->type = calloc((size_t)n, sizeof *tok->type);
    tok->arena = malloc(bytes);
    if (!tok->piece || !tok->text || !tok->text_len || !tok->score || !tok->type || !tok->arena)
        return mt_fail(MT_ENOMEM, "no memory for the %lld pieces of '%s'", (long long)n, path);
    char *at = tok->arena;
    int i = 0;
    uint32_t field, wire;
    uint64_t v;
    pb_buf sub;
    while (b.p < b.end) {
        pb_field(&b, &field, &wire, &v, &sub);   /* scan_model checked every field */
        if (field == 1 && wire == 2 && !read_piece(sub, tok, i++, &at))
            return mt_fail(MT_EFORMAT, "'%s' is not a SentencePiece model: piece %d is "
                           "malformed", path, i - 1);
    }
    for (int c = 0; c < 256; c++) tok->byte_id[c] = -1;
    for (int id = 0; id < tok->V; id++) {   /* the first piece of a byte, as SentencePiece's */
        int c = tok->type[id] == MT__SPM_BYTE
                    ? byte_of_piece(tok->piece[id], strlen(tok->piece[id])) : -1;
        if (c >= 0 && tok->byte_id[c] < 0) tok->byte_id[c] = id;
    }
    tok->newline = -1;
    for (int id = 0; id < tok->V; id++)   /* byte fallback's <0x0A> first, as the encoder's */
        if (tok->text_len[id] == 1 && tok->text[id][0] == '\n' &&
            (tok->newline < 0 || tok->type[id] == MT__SPM_BYTE))
            tok->newline = id;
    return MT_OK;
}

/* The kind of tokenizer the file holds, by its bytes: a JSON object is a
 * Hugging Face tokenizer.json, "BASE64 RANK" lines a tiktoken ranks file,
 * records that end at the file's end llama2.c's tokenizer.bin, anything
 * else a SentencePiece model (its own reader says if not). */
static mt_status parse_any(const char *path, const char *data, size_t size, mt_tokenizer *tok) {
    size_t ws = 0;
    while (ws < size && strchr(" \t\r\n", data[ws]) && data[ws]) ws++;
    mt_status s;
    if (ws < size && data[ws] == '{') s = mt__bpe_read_json(path, data, size, &tok->bpe);
    else if (mt__bpe_is_tiktoken(data, size)) s = mt__bpe_read_tiktoken(path, data, size, &tok->bpe);
    else if (mt__bpe_is_llama2c(data, size)) s = mt__bpe_read_llama2c(path, data, size, &tok->bpe);
    else return parse_model(path, (const uint8_t *)data, size, tok);
    if (s == MT_OK) tok->V = mt__bpe_vocab(tok->bpe);
    return s;
}

mt_status mt_tokenizer_open(const char *model_path, mt_tokenizer **out) {
    if (!out) return mt_fail(MT_EINVAL, "mt_tokenizer_open: out is NULL");
    *out = NULL;
    char *data = NULL;
    size_t size = 0;
    mt_status s = mt_input_read_all(model_path, "tokenizer", MODEL_MAX_BYTES, &data, &size);
    if (s != MT_OK) return s;
    mt_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok || !(tok->path = strdup(model_path))) {
        free(data);
        free(tok);
        return mt_fail(MT_ENOMEM, "no memory for tokenizer '%s'", model_path);
    }
    s = parse_any(model_path, data, size, tok);
    free(data);
    if (s != MT_OK) {
        mt_tokenizer_free(tok);
        return s;
    }
    *out = tok;
    return MT_OK;
}

void mt_tokenizer_free(mt_tokenizer *tok) {
    if (!tok) return;
    free(tok->path);
    free(tok->piece);
    free(tok->text);
    free(tok->text_len);
    free(tok->score);
    free(tok->type);
    free(tok->arena);
    mt__bpe_free(tok->bpe);
    free(tok);
}

int mt_tokenizer_vocab(const mt_tokenizer *tok) { return tok ? tok->V : 0; }

const char *mt_tokenizer_path(const mt_tokenizer *tok) { return tok ? tok->path : NULL; }

const char *mt_tokenizer_piece(const mt_tokenizer *tok, int id, float *score) {
    if (!tok || id < 0 || id >= tok->V) return NULL;
    if (score) *score = tok->bpe ? 0.0f : tok->score[id];
    return tok->bpe ? mt__bpe_piece(tok->bpe, id) : tok->piece[id];
}

const char *mt_tokenizer_kind(const mt_tokenizer *tok) {
    if (!tok) return NULL;
    return tok->bpe ? mt__bpe_kind(tok->bpe) : "SentencePiece";
}

/* SentencePiece's <s> and </s>: the first control piece so spelled. */
static int control_piece(const mt_tokenizer *tok, const char *name) {
    for (int id = 0; id < tok->V; id++)
        if (tok->type[id] == MT__SPM_CONTROL && strcmp(tok->piece[id], name) == 0) return id;
    return -1;
}

int mt_tokenizer_bos(const mt_tokenizer *tok) {
    if (!tok) return -1;
    return tok->bpe ? mt__bpe_bos(tok->bpe) : control_piece(tok, "<s>");
}

int mt_tokenizer_eos(const mt_tokenizer *tok) {
    if (!tok) return -1;
    return tok->bpe ? mt__bpe_eos(tok->bpe) : control_piece(tok, "</s>");
}

/* ======================================================================== */
/* The model without its dummy prefix                                        */
/* ======================================================================== */

static bool pb_put(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n; }

static bool pb_put_varint(FILE *f, uint64_t v) {
    uint8_t b[10];
    int n = 0;
    do { b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)); v >>= 7; } while (v);
    return pb_put(f, b, (size_t)n);
}

/* Writes model `m` with NormalizerSpec.add_dummy_prefix false into f: every
 * field as it is, but the normaliser's field 3, replaced (or added, with a
 * normaliser of the proto's defaults when the model has none). */
static bool write_without_dummy(pb_buf m, FILE *f) {
    uint32_t field, wire, kf, kw;
    uint64_t v;
    pb_buf sub, kid;
    bool ok = true, seen = false;
    const uint8_t off[2] = {3 << 3 | 0, 0};   /* add_dummy_prefix: false */
    while (ok && m.p < m.end) {
        const uint8_t *at = m.p;
        if (!pb_field(&m, &field, &wire, &v, &sub)) return false;
        if (!(field == 3 && wire == 2)) { ok = pb_put(f, at, (size_t)(m.p - at)); continue; }
        uint8_t *spec = malloc((size_t)(sub.end - sub.p) + 2);   /* (spec bytes) the new spec */
        size_t n = 0;
        if (!spec) return false;
        while (sub.p < sub.end) {
            const uint8_t *k = sub.p;
            if (!pb_field(&sub, &kf, &kw, &v, &kid)) { free(spec); return false; }
            if (kf == 3 && kw == 0) continue;
            memcpy(spec + n, k, (size_t)(sub.p - k));
            n += (size_t)(sub.p - k);
        }
        memcpy(spec + n, off, 2);
        n += 2;
        ok = pb_put_varint(f, 3 << 3 | 2) && pb_put_varint(f, n) && pb_put(f, spec, n);
        free(spec);
        seen = true;
    }
    if (ok && !seen) ok = pb_put_varint(f, 3 << 3 | 2) && pb_put_varint(f, 2) && pb_put(f, off, 2);
    return ok;
}

mt_status mt__spm_without_dummy(const mt_tokenizer *tok, char *path, size_t n) {
    char *data = NULL;
    size_t size = 0;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0]) tmp = "/tmp";
    if (snprintf(path, n, "%s/meshtrain-spm-XXXXXX", tmp) >= (int)n)
        return mt_fail(MT_EINVAL, "TMPDIR '%s' is too long for a path", tmp);
    mt_status s = mt_input_read_all(tok->path, "tokenizer", MODEL_MAX_BYTES, &data, &size);
    if (s != MT_OK) return s;
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        s = mt_fail(MT_EIO, "cannot make a temporary file in '%s' for the model without its "
                    "dummy prefix: %s (set TMPDIR to a writable directory)", tmp, strerror(errno));
        if (fd >= 0) { close(fd); unlink(path); }
        free(data);
        return s;
    }
    bool ok = write_without_dummy((pb_buf){(const uint8_t *)data, (const uint8_t *)data + size}, f);
    ok = fclose(f) == 0 && ok;
    free(data);
    if (ok) return MT_OK;
    unlink(path);
    return mt_fail(MT_EIO, "cannot write '%s', tokenizer '%s' without its dummy prefix: %s",
                   path, tok->path, strerror(errno));
}

/* ======================================================================== */
/* Decoding                                                                  */
/* ======================================================================== */

mt_status mt_tokenizer_decode(const mt_tokenizer *tok, const int32_t *ids, int64_t n,
                              bool at_start, char *buf, size_t cap, size_t *len) {
    if (!tok || (n > 0 && !ids) || !buf || cap == 0)
        return mt_fail(MT_EINVAL, "mt_tokenizer_decode needs a tokenizer, the ids and a buffer");
    size_t m = 0;
    /* the dummy space is still to drop */
    bool first = at_start && (tok->bpe ? mt__bpe_dummy(tok->bpe) : tok->strip_space);
    for (int64_t i = 0; i < n; i++) {
        int id = ids[i];
        if (id < 0 || id >= tok->V)
            return mt_fail(MT_EINVAL, "id %d at position %lld is outside the vocabulary of "
                           "tokenizer '%s' (ids 0..%d)", id, (long long)i, tok->path, tok->V - 1);
        const char *t;
        size_t k;
        if (tok->bpe && !mt__bpe_bytes(tok->bpe, id, &t, &k))
            return mt_fail(MT_EINVAL, "id %d at position %lld is an unused id of tokenizer "
                           "'%s' (no token has it)", id, (long long)i, tok->path);
        if (!tok->bpe) {
            t = tok->text[id];
            k = (size_t)tok->text_len[id];
        }
        if (first && k > 0) {   /* SentencePiece drops it from the first visible piece */
            first = false;
            if (tok->bpe ? t[0] == ' ' : strncmp(tok->piece[id], SPACE_SYMBOL, 3) == 0) { t++; k--; }
        }
        if (m + k < cap) memcpy(buf + m, t, k);
        m += k;
    }
    if (len) *len = m;
    if (m >= cap) {
        buf[0] = '\0';
        return mt_fail(MT_EINVAL, "decoding %lld ids takes %zu bytes, more than the %zu of "
                       "the buffer", (long long)n, m + 1, cap);
    }
    buf[m] = '\0';
    return MT_OK;
}

/* ======================================================================== */
/* Token files                                                               */
/* ======================================================================== */

mt_status mt_tokenizer_check_vocab(const mt_tokenizer *tok) {
    if (!tok) return mt_fail(MT_EINVAL, "mt_tokenizer_check_vocab: tok is NULL");
    if (tok->V > 0 && tok->V < INT32_MAX) return MT_OK;   /* uint16 or uint32 files */
    return mt_fail(MT_EFORMAT, "tokenizer '%s' has %d pieces; an llm.c token file holds ids "
                   "0..%d (uint32)", tok->path, tok->V, INT32_MAX - 1);
}

mt_status mt_tokenizer_check_tokens(const mt_tokenizer *tok, const char *tokens_path,
                                    int64_t *n_tokens) {
    if (!tok || !tokens_path)
        return mt_fail(MT_EINVAL, "mt_tokenizer_check_tokens needs a tokenizer and a path");
    mt_status s = mt_tokenizer_check_vocab(tok);
    if (s != MT_OK) return s;
    mt_file_kind kind;
    if ((s = mt_file_detect(tokens_path, &kind)) != MT_OK) return s;
    if (kind != MT_FILE_TOKENS)
        return mt_fail(MT_EFORMAT, "'%s' is not an llm.c token file, so it would train on "
                       "bytes, not on the ids of tokenizer '%s': encode it with `meshtrain "
                       "tokenize --text %s --model-in %s --out TOKENS.bin`", tokens_path,
                       tok->path, tokens_path, tok->path);
    mt_dataset *ds;
    if ((s = mt_dataset_open(tokens_path, 0.0, &ds)) != MT_OK) return s;
    int need = mt_dataset_vocab(ds);
    if (n_tokens) *n_tokens = mt_dataset_tokens(ds, 0);
    mt_dataset_free(ds);
    if (need > tok->V)
        return mt_fail(MT_EFORMAT, "token file '%s' holds id %d but tokenizer '%s' has %d "
                       "pieces (ids 0..%d): it was encoded with another tokenizer; give that "
                       "one, or encode the text again with this one", tokens_path, need - 1,
                       tok->path, tok->V, tok->V - 1);
    return MT_OK;
}
