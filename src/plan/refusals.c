/*
 * refusals.c — the reasons a search refused layouts, counted (refusals.h).
 *
 * A reason's key is its text with every number masked: "2048 sequences a
 * step do not split into 3 microbatches" and "... into 5 microbatches" are
 * one reason, said once with its count and the range of each number
 * ("3..5"). A number is a run of digits (with a fraction and an exponent)
 * that stands as a word of its own: the digits inside a name ("a100-80gb",
 * "zb-h1") are the text's.
 */
#include "base/base_impl.h"
#include "plan/refusals.h"
#include "plan/search_impl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A reason taken apart: its key and its numbers. */
typedef struct {
    char   key[256];
    int    n;
    double v[MT__PLAN_REFUSAL_SLOTS];
    char   text[MT__PLAN_REFUSAL_SLOTS][32];
} parsed;

/* The key of the reasons past MT_PLAN_MAX_REFUSALS - 1 ("other reasons"):
 * no reason's text holds the byte. */
static const char OTHER[] = "\x02";

static bool word_char(char c) {
    return isalnum((unsigned char)c) || c == '_';
}

static bool digit(char c) {
    return isdigit((unsigned char)c) != 0;
}

/* The end of the number that starts at why[i] (digits, an optional
 * fraction and exponent). */
static size_t number_end(const char *why, size_t i) {
    while (digit(why[i])) i++;
    if (why[i] == '.' && digit(why[i + 1]))
        for (i++; digit(why[i]); i++) {}
    if (why[i] == 'e' || why[i] == 'E') {
        size_t e = i + 1;
        if (why[e] == '+' || why[e] == '-') e++;
        if (digit(why[e]))
            for (i = e; digit(why[i]); i++) {}
    }
    return i;
}

static void parse(const char *why, parsed *p) {
    const size_t cap = sizeof p->key;
    size_t k = 0, i = 0;
    p->n = 0;
    while (why[i] && k + 1 < cap) {
        const bool starts = digit(why[i]) && (i == 0 || !(word_char(why[i - 1]) ||
                                                          why[i - 1] == '.'));
        if (!starts) {
            p->key[k++] = why[i++];
            continue;
        }
        const size_t j = number_end(why, i);
        if (!word_char(why[j]) && p->n < MT__PLAN_REFUSAL_SLOTS && j - i < sizeof p->text[0]) {
            memcpy(p->text[p->n], why + i, j - i);
            p->text[p->n][j - i] = '\0';
            p->v[p->n] = strtod(p->text[p->n], NULL);
            p->n++;
            p->key[k++] = '\x01';
            i = j;
            continue;
        }
        while (i < j && k + 1 < cap) p->key[k++] = why[i++];
    }
    p->key[k] = '\0';
}

static uint64_t hash_of(const char *key) {
    uint64_t h = 1469598103934665603u;   /* FNV-1a */
    for (const unsigned char *b = (const unsigned char *)key; *b; b++)
        h = (h ^ *b) * 1099511628211u;
    return h;
}

/* A new group for key (the numbers of p), its example layout r's. */
static void group_init(mt__plan_refusal_group *g, const char *key, uint64_t hash,
                       const parsed *p, const mt_plan_result *r) {
    memset(g, 0, sizeof *g);
    snprintf(g->key, sizeof g->key, "%s", key);
    g->hash = hash;
    g->n_slots = p ? p->n : 0;
    for (int i = 0; i < g->n_slots; i++) {
        g->lo[i] = g->hi[i] = p->v[i];
        memcpy(g->lo_text[i], p->text[i], sizeof g->lo_text[i]);
        memcpy(g->hi_text[i], p->text[i], sizeof g->hi_text[i]);
    }
    mt__plan_layout_text(&r->layout, r->mesh, g->example, sizeof g->example);
    g->first = r->seq;
}

mt_status mt__plan_refusals_add(mt__plan_refusals *t, const mt_plan_result *r) {
    if (!t->g) {
        t->g = calloc(MT_PLAN_MAX_REFUSALS, sizeof *t->g);
        if (!t->g) return mt_fail(MT_ENOMEM, "out of memory for the plan's refusal reasons");
    }
    /* the same words as the last: the same numbers, already in its ranges */
    if (t->last && !strcmp(r->why, t->last_why)) {
        t->g[t->last - 1].count++;
        return MT_OK;
    }
    parsed p;
    parse(r->why, &p);
    const uint64_t h = hash_of(p.key);
    mt__plan_refusal_group *g = NULL;
    for (int i = 0; i < t->n && !g; i++)
        if (t->g[i].hash == h && !strcmp(t->g[i].key, p.key)) g = &t->g[i];
    if (!g && t->n < MT_PLAN_MAX_REFUSALS - 1) {
        g = &t->g[t->n++];
        group_init(g, p.key, h, &p, r);
    } else if (!g) {   /* past the distinct reasons kept: "other reasons" */
        g = &t->g[MT_PLAN_MAX_REFUSALS - 1];
        if (t->n < MT_PLAN_MAX_REFUSALS) {
            t->n = MT_PLAN_MAX_REFUSALS;
            group_init(g, OTHER, hash_of(OTHER), NULL, r);
        }
    }
    g->count++;
    t->last = (int)(g - t->g) + 1;
    mt__text_format(t->last_why, sizeof t->last_why, "%s", r->why);
    for (int i = 0; i < g->n_slots; i++) {
        if (p.v[i] < g->lo[i]) {
            g->lo[i] = p.v[i];
            memcpy(g->lo_text[i], p.text[i], sizeof g->lo_text[i]);
        }
        if (p.v[i] > g->hi[i]) {
            g->hi[i] = p.v[i];
            memcpy(g->hi_text[i], p.text[i], sizeof g->hi_text[i]);
        }
    }
    return MT_OK;
}

/* Group y's count and ranges into x's; its example where met first. */
static void group_add(mt__plan_refusal_group *x, const mt__plan_refusal_group *y) {
    x->count += y->count;
    for (int i = 0; i < x->n_slots && i < y->n_slots; i++) {
        if (y->lo[i] < x->lo[i]) {
            x->lo[i] = y->lo[i];
            memcpy(x->lo_text[i], y->lo_text[i], sizeof x->lo_text[i]);
        }
        if (y->hi[i] > x->hi[i]) {
            x->hi[i] = y->hi[i];
            memcpy(x->hi_text[i], y->hi_text[i], sizeof x->hi_text[i]);
        }
    }
    if (y->first < x->first) {
        memcpy(x->example, y->example, sizeof x->example);
        x->first = y->first;
    }
}

static int by_first(const void *a, const void *b) {
    const mt__plan_refusal_group *x = a, *y = b;
    const bool ox = !strcmp(x->key, OTHER), oy = !strcmp(y->key, OTHER);
    if (ox != oy) return ox - oy;   /* "other reasons" last */
    return (x->first > y->first) - (x->first < y->first);
}

mt_status mt__plan_refusals_merge(mt__plan_refusals *into, const mt__plan_refusals *from) {
    if (from->n == 0) return MT_OK;
    /* both tallies' groups, alike reasons as one, in the order first met */
    mt__plan_refusal_group *all = calloc(2 * MT_PLAN_MAX_REFUSALS, sizeof *all);
    if (!all) return mt_fail(MT_ENOMEM, "out of memory merging the plan's refusal reasons");
    int n = 0;
    for (int i = 0; i < into->n; i++) all[n++] = into->g[i];
    for (int i = 0; i < from->n; i++) {
        const mt__plan_refusal_group *y = &from->g[i];
        int j = 0;
        while (j < n && !(all[j].hash == y->hash && !strcmp(all[j].key, y->key))) j++;
        if (j < n) group_add(&all[j], y);
        else all[n++] = *y;
    }
    qsort(all, (size_t)n, sizeof *all, by_first);
    if (!into->g && !(into->g = calloc(MT_PLAN_MAX_REFUSALS, sizeof *into->g))) {
        free(all);
        return mt_fail(MT_ENOMEM, "out of memory for the plan's refusal reasons");
    }
    /* the first MT_PLAN_MAX_REFUSALS - 1 kept; the rest "other reasons" */
    const int kept = n < MT_PLAN_MAX_REFUSALS ? n : MT_PLAN_MAX_REFUSALS - 1;
    for (int i = 0; i < kept; i++) into->g[i] = all[i];
    into->n = kept;
    for (int i = kept; i < n; i++) {
        mt__plan_refusal_group *o = &into->g[MT_PLAN_MAX_REFUSALS - 1];
        if (into->n < MT_PLAN_MAX_REFUSALS) {
            into->n = MT_PLAN_MAX_REFUSALS;
            *o = all[i];
            snprintf(o->key, sizeof o->key, "%s", OTHER);
            o->hash = hash_of(OTHER);
            o->n_slots = 0;
        } else {
            o->count += all[i].count;
        }
    }
    into->last = 0;   /* the words of the last reason added are another thread's */
    free(all);
    return MT_OK;
}

/* The reason of g as text: each number its value, or its range "lo..hi". */
static void render(const mt__plan_refusal_group *g, char *buf, size_t cap) {
    if (!strcmp(g->key, OTHER)) {
        snprintf(buf, cap, "other reasons (past the %d kinds listed)", MT_PLAN_MAX_REFUSALS - 1);
        return;
    }
    size_t at = 0;
    int slot = 0;
    buf[0] = '\0';
    for (const char *c = g->key; *c && at + 1 < cap; c++) {
        if (*c != '\x01') {
            buf[at++] = *c;
            buf[at] = '\0';
            continue;
        }
        int n = g->lo[slot] == g->hi[slot]
                    ? snprintf(buf + at, cap - at, "%s", g->lo_text[slot])
                    : snprintf(buf + at, cap - at, "%s..%s", g->lo_text[slot], g->hi_text[slot]);
        slot++;
        at += n > 0 ? (size_t)n : 0;
        if (at >= cap) at = cap - 1;
    }
}

mt_status mt__plan_refusals_report(const mt__plan_refusals *t, mt_plan_report *rep) {
    rep->n_refusals = 0;
    rep->refusals = NULL;
    if (t->n == 0) return MT_OK;
    rep->refusals = calloc((size_t)t->n, sizeof *rep->refusals);
    if (!rep->refusals) return mt_fail(MT_ENOMEM, "out of memory for %d refusal reasons", t->n);
    /* most layouts first; a stable insertion sort keeps the order met */
    int order[MT_PLAN_MAX_REFUSALS];
    for (int i = 0; i < t->n; i++) {
        int j = i;
        while (j > 0 && t->g[order[j - 1]].count < t->g[i].count) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (int i = 0; i < t->n; i++) {
        const mt__plan_refusal_group *g = &t->g[order[i]];
        mt_plan_refusal *o = &rep->refusals[i];
        render(g, o->reason, sizeof o->reason);
        snprintf(o->example, sizeof o->example, "%s", g->example);
        o->count = g->count;
    }
    rep->n_refusals = t->n;
    return MT_OK;
}

void mt__plan_refusals_free(mt__plan_refusals *t) {
    free(t->g);
    t->g = NULL;
    t->n = t->last = 0;
}
