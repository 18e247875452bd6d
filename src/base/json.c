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

/* Appends kid (and key, for objects) to j; false when out of memory. */
static bool push(mt_json *j, mt_json *kid, char *key) {
    mt_json **k = realloc(j->kids, (size_t)(j->n + 1) * sizeof *k);
    if (!k) return false;
    j->kids = k;
    if (j->type == MT_JSON_OBJ) {
        char **ks = realloc(j->keys, (size_t)(j->n + 1) * sizeof *ks);
        if (!ks) return false;
        j->keys = ks;
        ks[j->n] = key;
    }
    k[j->n++] = kid;
    return true;
}

static mt_status read_string(rd *r, char **out) {
    if (r->at >= r->n || r->t[r->at] != '"') return bad(r, "a string");
    size_t start = ++r->at, len = 0;
    char *s = malloc(r->n - start + 1);
    if (!s) return mt_fail(MT_ENOMEM, "'%s': out of memory reading a string", r->path);
    while (r->at < r->n && r->t[r->at] != '"') {
        unsigned char c = (unsigned char)r->t[r->at];
        if (c < 0x20) { free(s); return bad(r, "a character of a string (control bytes must be escaped)"); }
        if (c != '\\') { s[len++] = (char)c; r->at++; continue; }
        r->at++;
        char e = r->at < r->n ? r->t[r->at] : 0;
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *p = e ? strchr(from, e) : NULL;
        if (p) { s[len++] = to[p - from]; r->at++; continue; }
        unsigned v = 0;
        if (e == 'u' && r->at + 4 < r->n && sscanf(r->t + r->at + 1, "%4x", &v) == 1 && v < 0x80 && v) {
            s[len++] = (char)v;
            r->at += 5;
            continue;
        }
        free(s);
        return bad(r, "an escape (\\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\u00XX)");
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

static mt_status read_container(rd *r, int depth, mt_json *j) {
    bool obj = j->type == MT_JSON_OBJ;
    char close = obj ? '}' : ']';
    r->at++;
    ws(r);
    if (r->at < r->n && r->t[r->at] == close) { r->at++; return MT_OK; }
    for (;;) {
        char *key = NULL;
        mt_status s;
        ws(r);
        if (obj) {
            size_t key_at = r->at;
            if ((s = read_string(r, &key))) return s;
            if (mt__json_get(j, key)) {
                r->at = key_at;
                mt_status d = mt_fail(MT_EFORMAT, "'%s', byte %zu: the key '%.64s' is given "
                                      "twice; keep one", r->path, key_at, key);
                free(key);
                return d;
            }
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
