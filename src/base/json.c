/*
 * json.c — the strict JSON reader (base/json.h): recursive
 * descent into a tree of mt_json nodes.
 */
#include "base/json.h"
#include "meshtrain/files.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 32

typedef struct {
    const char *t, *path;
    size_t      n, at;
} rd;

static void ws(rd *r) {
    while (r->at < r->n && strchr(" \t\r\n", r->t[r->at]) && r->t[r->at]) r->at++;
}

static mt_status bad(rd *r, const char *what) {
    char found[16];
    if (r->at >= r->n) snprintf(found, sizeof found, "the end");
    else if (r->t[r->at] >= 0x20 && r->t[r->at] < 0x7f) snprintf(found, sizeof found, "'%c'", r->t[r->at]);
    else snprintf(found, sizeof found, "byte 0x%02x", (unsigned char)r->t[r->at]);
    return mt_fail(MT_EFORMAT, "'%s', byte %zu: expected %s, found %s; fix the JSON there",
                   r->path, r->at, what, found);
}

static mt_json *node(mt_json_type type, size_t at) {
    mt_json *j = calloc(1, sizeof *j);
    if (j) { j->type = type; j->at = at; }
    return j;
}

/* Appends kid (and key, for objects) to j; false when out of memory. The
 * arrays double (4, 8, 16, ...): a tokenizer's vocabulary is one object of
 * 10^5 members. */
static bool push(mt_json *j, mt_json *kid, char *key) {
    int n = j->n;
    if (n == 0 || (n >= 4 && (n & (n - 1)) == 0)) {
        size_t cap = n == 0 ? 4 : 2 * (size_t)n;
        mt_json **k = realloc(j->kids, cap * sizeof *k);
        if (!k) return false;
        j->kids = k;
        if (j->type == MT_JSON_OBJ) {
            char **ks = realloc(j->keys, cap * sizeof *ks);
            if (!ks) return false;
            j->keys = ks;
        }
    }
    if (j->type == MT_JSON_OBJ) j->keys[n] = key;
    j->kids[j->n++] = kid;
    return true;
}

/* Appends code point cp to s as UTF-8. */
static size_t put_utf8(char *s, uint32_t cp) {
    if (cp < 0x80) { s[0] = (char)cp; return 1; }
    if (cp < 0x800) { s[0] = (char)(0xC0 | cp >> 6); s[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        s[0] = (char)(0xE0 | cp >> 12);
        s[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        s[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    s[0] = (char)(0xF0 | cp >> 18);
    s[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    s[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    s[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The 4 hex digits at t[0..4) into *v; false when they are not. */
static bool hex4(const char *t, size_t left, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = (size_t)i < left ? t[i] : 0;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return false;
        *v = *v << 4 | (unsigned)d;
    }
    return true;
}

/* A \uXXXX escape at r->at (just past the backslash, at the 'u'), with
 * its low surrogate when it is a high one, into s; false when malformed, a
 * lone surrogate or U+0000 (strings are NUL-terminated). */
static bool read_u_escape(rd *r, char *s, size_t *len) {
    unsigned v, lo;
    const char *t = r->t + r->at;
    size_t left = r->n - r->at;
    if (!hex4(t + 1, left - 1, &v) || v == 0 || (v >= 0xDC00 && v < 0xE000)) return false;
    uint32_t cp = v;
    if (v >= 0xD800 && v < 0xDC00) {
        if (left < 11 || t[5] != '\\' || t[6] != 'u' || !hex4(t + 7, left - 7, &lo) ||
            lo < 0xDC00 || lo >= 0xE000)
            return false;
        cp = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
        r->at += 6;
    }
    r->at += 5;
    *len += put_utf8(s + *len, cp);
    return true;
}

static mt_status read_string(rd *r, char **out) {
    if (r->at >= r->n || r->t[r->at] != '"') return bad(r, "a string");
    size_t start = ++r->at, len = 0, end = start;
    while (end < r->n && r->t[end] != '"') end += r->t[end] == '\\' ? 2 : 1;
    char *s = malloc((end < r->n ? end : r->n) - start + 1);   /* decoding never lengthens */
    if (!s) return mt_fail(MT_ENOMEM, "'%s': out of memory reading a string", r->path);
    while (r->at < r->n && r->t[r->at] != '"') {
        unsigned char c = (unsigned char)r->t[r->at];
        if (c < 0x20) { free(s); return bad(r, "a character of a string (control bytes must be escaped)"); }
        if (c != '\\') { s[len++] = (char)c; r->at++; continue; }
        r->at++;
        char e = r->at < r->n ? r->t[r->at] : 0;
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *p = e ? strchr(from, e) : NULL;
        if (p) { s[len++] = to[p - from]; r->at++; continue; }
        if (e == 'u' && read_u_escape(r, s, &len)) continue;
        free(s);
        return bad(r, "an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t, or \\uXXXX: a character "
                   "other than U+0000, a surrogate pair above U+FFFF)");
    }
    if (r->at >= r->n) { free(s); return bad(r, "the closing '\"' of a string"); }
    r->at++;
    s[len] = 0;
    *out = s;
    return MT_OK;
}

static mt_status read_number(rd *r, double *v) {
    size_t i = r->at;
    if (i < r->n && r->t[i] == '-') i++;
    if (i >= r->n || r->t[i] < '0' || r->t[i] > '9') return bad(r, "a value");
    while (i < r->n && strchr("0123456789+-.eE", r->t[i]) && r->t[i]) i++;
    char buf[64];
    if (i - r->at >= sizeof buf) return bad(r, "a number of under 64 characters");
    memcpy(buf, r->t + r->at, i - r->at);
    buf[i - r->at] = 0;
    char *end;
    errno = 0;
    *v = strtod(buf, &end);
    if (*end || errno == ERANGE || !isfinite(*v)) return bad(r, "a finite number");
    r->at = i;
    return MT_OK;
}

static mt_status read_value(rd *r, int depth, mt_json **out);

static mt_status twice(rd *r, size_t key_at, const char *key) {
    r->at = key_at;
    return mt_fail(MT_EFORMAT, "'%s', byte %zu: the key '%.64s' is given twice; keep one",
                   r->path, key_at, key);
}

/* qsort's order of an object's members by key, then by place. */
typedef struct { const char *key; size_t at; } key_ref;

static int key_order(const void *a, const void *b) {
    const key_ref *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* The repeated keys of a large object, found by sorting (a small one is
 * checked key by key as it is read): the first key, in the text, that
 * repeats one before it. */
static mt_status check_keys(rd *r, const mt_json *j, const size_t *key_at) {
    key_ref *v = malloc((size_t)j->n * sizeof *v);
    if (!v) return mt_fail(MT_ENOMEM, "'%s': out of memory", r->path);
    for (int i = 0; i < j->n; i++) v[i] = (key_ref){j->keys[i], key_at[i]};
    qsort(v, (size_t)j->n, sizeof *v, key_order);
    const key_ref *first = NULL;
    for (int i = 1; i < j->n; i++)
        if (strcmp(v[i].key, v[i - 1].key) == 0 && (!first || v[i].at < first->at)) first = &v[i];
    mt_status s = first ? twice(r, first->at, first->key) : MT_OK;
    free(v);
    return s;
}

enum { LINEAR_KEYS = 64 };   /* objects up to this size look each key up as it comes */

static mt_status read_members(rd *r, int depth, mt_json *j, size_t **key_at) {
    bool obj = j->type == MT_JSON_OBJ;
    char close = obj ? '}' : ']';
    for (;;) {
        char *key = NULL;
        mt_status s;
        ws(r);
        if (obj) {
            size_t at = r->at;
            if ((s = read_string(r, &key))) return s;
            if (j->n < LINEAR_KEYS && mt__json_get(j, key)) {
                s = twice(r, at, key);
                free(key);
                return s;
            }
            if (j->n == 0 || (j->n >= 4 && (j->n & (j->n - 1)) == 0)) {
                size_t *k = realloc(*key_at, (j->n ? 2 * (size_t)j->n : 4) * sizeof *k);
                if (!k) { free(key); return mt_fail(MT_ENOMEM, "'%s': out of memory", r->path); }
                *key_at = k;
            }
            (*key_at)[j->n] = at;
            ws(r);
            if (r->at >= r->n || r->t[r->at] != ':') { free(key); return bad(r, "':'"); }
            r->at++;
        }
        mt_json *kid = NULL;
        if ((s = read_value(r, depth + 1, &kid))) { free(key); return s; }
        if (!push(j, kid, key)) {
            free(key);
            mt__json_free(kid);
            return mt_fail(MT_ENOMEM, "'%s': out of memory", r->path);
        }
        ws(r);
        if (r->at < r->n && r->t[r->at] == ',') { r->at++; continue; }
        if (r->at < r->n && r->t[r->at] == close) { r->at++; return MT_OK; }
        return bad(r, obj ? "',' or '}'" : "',' or ']'");
    }
}

static mt_status read_container(rd *r, int depth, mt_json *j) {
    char close = j->type == MT_JSON_OBJ ? '}' : ']';
    r->at++;
    ws(r);
    if (r->at < r->n && r->t[r->at] == close) { r->at++; return MT_OK; }
    size_t *key_at = NULL;   /* (n) each key's byte offset */
    mt_status s = read_members(r, depth, j, &key_at);
    if (s == MT_OK && j->type == MT_JSON_OBJ && j->n > LINEAR_KEYS) s = check_keys(r, j, key_at);
    free(key_at);
    return s;
}

static mt_status read_value(rd *r, int depth, mt_json **out) {
    ws(r);
    if (depth > MAX_DEPTH) return bad(r, "at most 32 levels of nesting");
    if (r->at >= r->n) return bad(r, "a value");
    char c = r->t[r->at];
    mt_json_type type = c == '{' ? MT_JSON_OBJ : c == '[' ? MT_JSON_ARR : c == '"' ? MT_JSON_STR
                      : c == 't' || c == 'f' ? MT_JSON_BOOL : c == 'n' ? MT_JSON_NULL : MT_JSON_NUM;
    mt_json *j = node(type, r->at);
    if (!j) return mt_fail(MT_ENOMEM, "'%s': out of memory", r->path);
    mt_status s = MT_OK;
    if (type == MT_JSON_OBJ || type == MT_JSON_ARR) s = read_container(r, depth, j);
    else if (type == MT_JSON_STR) s = read_string(r, &j->str);
    else if (type == MT_JSON_NUM) s = read_number(r, &j->num);
    else {
        const char *w = c == 't' ? "true" : c == 'f' ? "false" : "null";
        size_t k = strlen(w);
        if (r->n - r->at >= k && memcmp(r->t + r->at, w, k) == 0) r->at += k;
        else s = bad(r, "a value");
        j->b = c == 't';
    }
    if (s) { mt__json_free(j); return s; }
    *out = j;
    return MT_OK;
}

mt_status mt__json_parse(const char *text, size_t len, const char *path, mt_json **out) {
    rd r = {.t = text, .path = path ? path : "(text)", .n = len};
    *out = NULL;
    mt_json *j;
    mt_status s = read_value(&r, 0, &j);
    if (s) return s;
    ws(&r);
    if (r.at < r.n) { mt__json_free(j); return bad(&r, "the end of the text after the value"); }
    *out = j;
    return MT_OK;
}

void mt__json_free(mt_json *j) {
    if (!j) return;
    for (int i = 0; i < j->n; i++) {
        mt__json_free(j->kids[i]);
        if (j->keys) free(j->keys[i]);
    }
    free(j->kids);
    free(j->keys);
    free(j->str);
    free(j);
}

const mt_json *mt__json_get(const mt_json *obj, const char *key) {
    if (!obj || obj->type != MT_JSON_OBJ) return NULL;
    for (int i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0) return obj->kids[i];
    return NULL;
}

const char *mt__json_type_name(mt_json_type t) {
    static const char *names[] = {"null", "true or false", "a number", "a string", "an array",
                                  "an object"};
    return names[t];
}

mt_status mt__json_read_file(const char *path, const char *what, int64_t max_bytes, bool object,
                             mt_json **out) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    mt_status s = mt_input_read_all(path, what, max_bytes, &text, &len);
    if (s != MT_OK) return s;
    s = mt__json_parse(text, len, path, out);
    free(text);
    if (s == MT_OK && object && (*out)->type != MT_JSON_OBJ) {
        s = mt_fail(MT_EFORMAT, "%s '%s' is %s, not an object", what, path,
                    mt__json_type_name((*out)->type));
        mt__json_free(*out);
        *out = NULL;
    }
    return s;
}
