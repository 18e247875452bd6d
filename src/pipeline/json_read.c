/*
 * json_read.c — reads a schedule back from the JSON that json_write.c
 * writes, so a hand-edited one can be validated and simulated. A strict
 * reader for this one format: RFC 8259 syntax (values it does not need are
 * parsed and skipped), known keys only, integers where integers belong;
 * every error gives the byte offset, and inside "ops" the device and op.
 */
#include "pipeline/pipeline_impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *t;
    size_t      n, at;
} jrd;

/* ---- lexing ------------------------------------------------------------------ */

static void ws(jrd *r) {
    while (r->at < r->n && (r->t[r->at] == ' ' || r->t[r->at] == '\t' || r->t[r->at] == '\n' ||
                            r->t[r->at] == '\r'))
        r->at++;
}

static int peek(jrd *r) {
    ws(r);
    return r->at < r->n ? (unsigned char)r->t[r->at] : -1;
}

/* "'x'" or "the end of the text": what was found instead. */
static const char *found(jrd *r, char *buf, size_t cap) {
    int c = peek(r);
    if (c < 0) return "the end of the text";
    if (c >= 0x20 && c < 0x7f) snprintf(buf, cap, "'%c'", c);
    else snprintf(buf, cap, "byte 0x%02x", c);
    return buf;
}

static mt_status bad(jrd *r, const char *what) {
    char buf[32];
    size_t at = (ws(r), r->at);
    return mt_fail(MT_EFORMAT, "schedule JSON, byte %zu: expected %s, found %s", at, what,
                   found(r, buf, sizeof buf));
}

static mt_status expect(jrd *r, char c, const char *what) {
    if (peek(r) != c) return bad(r, what);
    r->at++;
    return MT_OK;
}

/* A string into buf (truncated to cap-1 bytes; escapes kept literal except
 * \" and \\, which the names here never need). */
static mt_status read_string(jrd *r, char *buf, size_t cap) {
    if (peek(r) != '"') return bad(r, "a string");
    size_t k = 0;
    for (r->at++; r->at < r->n; r->at++) {
        unsigned char c = (unsigned char)r->t[r->at];
        if (c == '"') {
            r->at++;
            if (buf) buf[k] = '\0';
            return MT_OK;
        }
        if (c < 0x20) return bad(r, "a closing '\"' (strings cannot hold control bytes)");
        if (c == '\\') {
            if (++r->at >= r->n) break;
            c = (unsigned char)r->t[r->at];
            if (!strchr("\"\\/bfnrtu", c)) return bad(r, "an escape: one of \\\" \\\\ \\/ \\b \\f "
                                                         "\\n \\r \\t \\uXXXX");
            if (c == 'u') {
                for (int h = 0; h < 4; h++)
                    if (++r->at >= r->n || !strchr("0123456789abcdefABCDEF", r->t[r->at]))
                        return bad(r, "four hex digits after \\u");
                c = '?';
            }
        }
        if (buf && k + 1 < cap) buf[k++] = (char)c;
    }
    return bad(r, "a closing '\"'");
}

static bool digit(jrd *r) { return r->at < r->n && r->t[r->at] >= '0' && r->t[r->at] <= '9'; }

/* A JSON number; *is_int tells whether it had no fraction or exponent. */
static mt_status read_number(jrd *r, double *value, bool *is_int) {
    ws(r);
    size_t s = r->at;
    *is_int = true;
    if (r->at < r->n && r->t[r->at] == '-') r->at++;
    if (!digit(r)) return r->at = s, bad(r, "a number");
    if (r->t[r->at] == '0') r->at++;
    else while (digit(r)) r->at++;
    if (r->at < r->n && r->t[r->at] == '.') {
        *is_int = false;
        r->at++;
        if (!digit(r)) return bad(r, "a digit after '.'");
        while (digit(r)) r->at++;
    }
    if (r->at < r->n && (r->t[r->at] == 'e' || r->t[r->at] == 'E')) {
        *is_int = false;
        r->at++;
        if (r->at < r->n && (r->t[r->at] == '+' || r->t[r->at] == '-')) r->at++;
        if (!digit(r)) return bad(r, "a digit in the exponent");
        while (digit(r)) r->at++;
    }
    char buf[64];
    size_t len = r->at - s < sizeof buf - 1 ? r->at - s : sizeof buf - 1;
    memcpy(buf, r->t + s, len);
    buf[len] = '\0';
    *value = strtod(buf, NULL);
    return MT_OK;
}

/* An integer in [lo, hi] (the message says the range, as the file's fault:
 * MT_EFORMAT). */
static mt_status read_int(jrd *r, const char *key, long lo, long hi, int *out) {
    size_t s = (ws(r), r->at);
    double v;
    bool is_int;
    mt_status st = read_number(r, &v, &is_int);
    if (st != MT_OK) return st;
    if (!is_int || !(v >= (double)lo && v <= (double)hi))
        return mt_fail(MT_EFORMAT, "schedule JSON, byte %zu: \"%s\" must be an integer from %ld "
                       "to %ld, got %.*s", s, key, lo, hi, (int)(r->at - s), r->t + s);
    *out = (int)v;
    return MT_OK;
}

static mt_status literal(jrd *r, const char *word) {
    size_t len = strlen(word);
    if (r->n - r->at < len || memcmp(r->t + r->at, word, len) != 0) return bad(r, "a value");
    r->at += len;
    return MT_OK;
}

/* Any JSON value, checked and skipped (the statistics, start and end). */
static mt_status skip_value(jrd *r, int depth) {
    if (depth > 64) return bad(r, "at most 64 levels of nesting");
    int c = peek(r);
    double v;
    bool is_int;
    mt_status st = MT_OK;
    switch (c) {
    case '"': return read_string(r, NULL, 0);
    case 't': return literal(r, "true");
    case 'f': return literal(r, "false");
    case 'n': return literal(r, "null");
    case '[':
    case '{': {
        char close = c == '[' ? ']' : '}';
        r->at++;
        if (peek(r) == close) return r->at++, MT_OK;
        for (;;) {
            if (close == '}') {
                st = read_string(r, NULL, 0);
                if (st == MT_OK) st = expect(r, ':', "':'");
            }
            if (st == MT_OK) st = skip_value(r, depth + 1);
            if (st != MT_OK) return st;
            if (peek(r) == ',') { r->at++; continue; }
            return expect(r, close, close == ']' ? "',' or ']'" : "',' or '}'");
        }
    }
    default: return read_number(r, &v, &is_int);
    }
}

/* ---- the format ------------------------------------------------------------- */

typedef struct {
    mt_pipe_op *ops;
    int         n, cap;
} op_list;

static mt_status read_op(jrd *r, int d, int i, mt_pipe_op *op) {
    size_t s = (ws(r), r->at);
    mt_status st = expect(r, '{', "an op object {\"type\":...,\"mb\":...,\"chunk\":...}");
    bool have[3] = {false, false, false};
    if (st == MT_OK && peek(r) == '}') r->at++;
    else
        for (; st == MT_OK;) {
            char key[32], type[8];
            st = read_string(r, key, sizeof key);
            if (st == MT_OK) st = expect(r, ':', "':'");
            if (st != MT_OK) break;
            if (strcmp(key, "type") == 0) {
                st = read_string(r, type, sizeof type);
                int t;
                for (t = 0; t < 4 && strcmp(type, mt_pipe_op_name((mt_pipe_op_type)t)); t++) {}
                if (st == MT_OK && t == 4)
                    st = mt_fail(MT_EFORMAT, "schedule JSON, device %d op #%d (byte %zu): type "
                                 "'%s' is not F, B, W or BW", d, i, s, type);
                op->type = (mt_pipe_op_type)t;
                have[0] = true;
            } else if (strcmp(key, "mb") == 0) {
                st = read_int(r, "mb", 0, 1000000000L, &op->mb);
                have[1] = true;
            } else if (strcmp(key, "chunk") == 0) {
                st = read_int(r, "chunk", 0, 1000000000L, &op->chunk);
                have[2] = true;
            } else if (strcmp(key, "start") == 0 || strcmp(key, "end") == 0) {
                st = skip_value(r, 0);
            } else {
                st = mt_fail(MT_EFORMAT, "schedule JSON, device %d op #%d (byte %zu): unknown key "
                             "\"%s\" (an op has \"type\", \"mb\", \"chunk\", and optionally "
                             "\"start\" and \"end\", which are ignored)", d, i, s, key);
            }
            if (st != MT_OK) break;
            if (peek(r) == ',') { r->at++; continue; }
            st = expect(r, '}', "',' or '}'");
            break;
        }
    if (st != MT_OK) return st;
    static const char *const NAMES[3] = {"type", "mb", "chunk"};
    for (int k = 0; k < 3; k++)
        if (!have[k])
            return mt_fail(MT_EFORMAT, "schedule JSON, device %d op #%d (byte %zu): missing "
                           "\"%s\"", d, i, s, NAMES[k]);
    return MT_OK;
}

static mt_status read_ops(jrd *r, op_list **lists, int *n_lists) {
    mt_status st = expect(r, '[', "'[' opening the per-device op lists");
    long long total = 0;
    if (st == MT_OK && peek(r) == ']') return r->at++, MT_OK;
    for (int d = 0; st == MT_OK; d++) {
        if (d == MT_SCHEDULE_MAX_STAGES)
            return mt_fail(MT_EFORMAT, "schedule JSON, byte %zu: \"ops\" has more than %d "
                           "device lists; a schedule has 1 to %d stages", r->at,
                           MT_SCHEDULE_MAX_STAGES, MT_SCHEDULE_MAX_STAGES);
        op_list *grown = realloc(*lists, sizeof(op_list) * (size_t)(d + 1));
        if (!grown) return mt_fail(MT_ENOMEM, "out of memory reading device %d's ops", d);
        *lists = grown;
        op_list *L = &grown[d];
        memset(L, 0, sizeof *L);
        *n_lists = d + 1;
        st = expect(r, '[', "'[' opening a device's op list");
        if (st == MT_OK && peek(r) == ']') r->at++;
        else
            for (int i = 0; st == MT_OK; i++) {
                if (L->n == L->cap) {
                    int cap = L->cap ? 2 * L->cap : 64;
                    mt_pipe_op *ops = realloc(L->ops, sizeof(mt_pipe_op) * (size_t)cap);
                    if (!ops) return mt_fail(MT_ENOMEM, "out of memory reading device %d's ops", d);
                    L->ops = ops;
                    L->cap = cap;
                }
                st = read_op(r, d, i, &L->ops[L->n]);
                if (st != MT_OK) break;
                L->n++;
                if (++total > MT_SCHEDULE_MAX_OPS)
                    return mt_fail(MT_EFORMAT, "schedule JSON: more than %d ops",
                                   MT_SCHEDULE_MAX_OPS);
                if (peek(r) == ',') { r->at++; continue; }
                st = expect(r, ']', "',' or ']' after an op");
                break;
            }
        if (st != MT_OK) break;
        if (peek(r) == ',') { r->at++; continue; }
        st = expect(r, ']', "',' or ']' after a device's list");
        break;
    }
    return st;
}

/* v from the ops: the kind's own, or for interleaved the chunks used over p. */
static int chunks_of(mt_schedule_kind kind, int p, const op_list *lists, int n) {
    const mt__sched_kind *k = mt__sched_kind_get(kind);
    if (k->v_min == k->v_max || p < 1) return k->v_min;
    int top = 0;
    for (int d = 0; d < n; d++)
        for (int i = 0; i < lists[d].n; i++)
            if (lists[d].ops[i].chunk > top) top = lists[d].ops[i].chunk;
    int v = (top + p) / p;
    return v < k->v_min ? k->v_min : v > k->v_max ? k->v_max : v;
}

mt_status mt_schedule_read_json(const char *text, size_t len, mt_schedule **out) {
    *out = NULL;
    jrd r = {.t = text, .n = len, .at = 0};
    char kind_name[32] = "";
    int p = 0, m = 0, n_lists = 0;
    bool have_p = false, have_m = false, have_ops = false;
    op_list *lists = NULL;
    mt_status st = expect(&r, '{', "'{' opening the schedule object");
    if (st == MT_OK && peek(&r) == '}') st = bad(&r, "the key \"kind\"");
    static const char *const STATS[] = {"makespan", "busy", "bubble_fraction", "span",
                                        "bubble_rate", "peak_activations"};
    while (st == MT_OK) {
        char key[32];
        size_t at = (ws(&r), r.at);
        st = read_string(&r, key, sizeof key);
        if (st == MT_OK) st = expect(&r, ':', "':'");
        if (st != MT_OK) break;
        bool seen = false;
        if (strcmp(key, "kind") == 0) {
            seen = kind_name[0] != '\0';
            st = read_string(&r, kind_name, sizeof kind_name);
            if (st == MT_OK && !kind_name[0]) st = bad(&r, "a kind name");
        } else if (strcmp(key, "stages") == 0) {
            seen = have_p;
            have_p = true;
            st = read_int(&r, "stages", 1, MT_SCHEDULE_MAX_STAGES, &p);
        } else if (strcmp(key, "microbatches") == 0) {
            seen = have_m;
            have_m = true;
            st = read_int(&r, "microbatches", 1, MT_SCHEDULE_MAX_OPS, &m);
        } else if (strcmp(key, "ops") == 0) {
            seen = have_ops;
            have_ops = true;
            if (!seen) st = read_ops(&r, &lists, &n_lists);
        } else {
            size_t k = 0;
            while (k < sizeof STATS / sizeof *STATS && strcmp(key, STATS[k])) k++;
            if (k == sizeof STATS / sizeof *STATS)
                st = mt_fail(MT_EFORMAT, "schedule JSON, byte %zu: unknown key \"%s\" (keys: "
                             "kind, stages, microbatches, ops, and the statistics makespan, busy, "
                             "bubble_fraction, span, bubble_rate, peak_activations, which are "
                             "ignored)", at, key);
            else
                st = skip_value(&r, 0);
        }
        if (st == MT_OK && seen)
            st = mt_fail(MT_EFORMAT, "schedule JSON, byte %zu: \"%s\" appears twice", at, key);
        if (st != MT_OK) break;
        if (peek(&r) == ',') { r.at++; continue; }
        st = expect(&r, '}', "',' or '}'");
        break;
    }
    if (st == MT_OK && peek(&r) >= 0) st = bad(&r, "the end of the text after the object");
    static const char *const NEED = "the schedule object needs \"kind\", \"stages\", "
                                    "\"microbatches\" and \"ops\"";
    if (st == MT_OK && (!kind_name[0] || !have_p || !have_m || !have_ops))
        st = mt_fail(MT_EFORMAT, "schedule JSON: missing \"%s\": %s",
                     !kind_name[0] ? "kind" : !have_p ? "stages" : !have_m ? "microbatches" : "ops",
                     NEED);
    mt_schedule_kind kind = MT_SCHEDULE_GPIPE;
    if (st == MT_OK && mt_schedule_kind_parse(kind_name, &kind) != MT_OK)
        st = mt_fail(MT_EFORMAT, "schedule JSON: %s", mt_errmsg());
    if (st == MT_OK && n_lists != p)
        st = mt_fail(MT_EFORMAT, "schedule JSON: \"ops\" has %d device list%s but \"stages\" "
                     "is %d: give one list per device", n_lists, n_lists == 1 ? "" : "s", p);
    mt_schedule *s = NULL;
    /* p >= 1 here (read_int): chunks_of divides by it. A size the schedule
     * cannot have is the file's fault, not the caller's: MT_EFORMAT. */
    if (st == MT_OK) {
        st = mt_schedule_create(kind, p, m, chunks_of(kind, p, lists, n_lists), &s);
        if (st == MT_EINVAL) st = mt_fail(MT_EFORMAT, "schedule JSON: %s", mt_errmsg());
    }
    for (int d = 0; st == MT_OK && d < p; d++) {
        st = mt_schedule_set_ops(s, d, lists[d].ops, lists[d].n);
        if (st == MT_EINVAL) st = mt_fail(MT_EFORMAT, "schedule JSON: %s", mt_errmsg());
    }
    for (int d = 0; d < n_lists; d++) free(lists[d].ops);
    free(lists);
    if (st != MT_OK) {
        mt_schedule_free(s);
        return st;
    }
    snprintf(s->note, sizeof s->note, "loaded from JSON: %s with p = %d, m = %d, v = %d",
             kind_name, p, m, s->v);
    *out = s;
    return MT_OK;
}
