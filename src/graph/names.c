/*
 * names.c — finding a graph's tensors by name in constant time: an
 * open-addressed hash index (linear probing, at most half full) from name to
 * tensor, kept up to date as tensors are made and renamed.
 *
 * Looking names up by scanning the tensor list made building and compiling a
 * deep model quadratic (every new tensor checks its name is free, every
 * gradient looks for "grad.<name>"). The index answers what the scan did: the
 * first tensor, in creation order, with that name. Names are unique when
 * given, but a default name ("act.12") can meet a user's name; then the
 * lower id is indexed, and the graph remembers that duplicates exist so that
 * a rename can hand the name to the next tensor that has it.
 */
#include "base/base_impl.h"
#include "graph/graph_impl.h"

#include <stdlib.h>
#include <string.h>

void mt__name_copy(char *dst, size_t cap, const char *src) {
    size_t n = strnlen(src, cap - 1);
    memmove(dst, src, n);   /* a tensor renamed after its own name: may overlap */
    dst[n] = '\0';
}

void mt__name_numbered(char *dst, size_t cap, const char *prefix, int id) {
    char text[MT_MAX_NAME + 16];
    size_t at = 0;
    mt__text_put(text, sizeof text, &at, prefix, MT_MAX_NAME);
    mt__text_put(text, sizeof text, &at, ".", 1);
    mt__text_put_int(text, sizeof text, &at, id);
    mt__name_copy(dst, cap, text);
}

void mt__name_derived(char *dst, size_t cap, const char *before, const char *name, size_t most,
                      const char *after) {
    size_t at = 0;
    if (cap) dst[0] = '\0';
    mt__text_put(dst, cap, &at, before, (size_t)-1);
    mt__text_put(dst, cap, &at, name, most);
    mt__text_put(dst, cap, &at, after, (size_t)-1);
}

/* The index's hash of a name: 8 bytes a step (mt_hash_name's byte a step
 * with a multiply each was 3 % of a planner's search, which makes
 * thousands of tensors a program by the ten thousand), then mixed so the
 * low bits, the slot, depend on every byte. */
static uint64_t hash_of(const char *name) {
    size_t n = strlen(name);
    uint64_t h = 0x9E3779B97F4A7C15u ^ n;
    for (;; name += 8) {
        uint64_t w = 0;
        memcpy(&w, name, n < 8 ? n : 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9u;
        h ^= h >> 31;
        if (n <= 8) break;
        n -= 8;
    }
    return h ^ h >> 29;
}

/* The dup_hashes bit of a name's hash. */
static void dup_bit(uint64_t h, uint32_t *word, uint64_t *bit) {
    const uint32_t b = (uint32_t)(h >> 52);   /* 4096 bits */
    *word = b / 64;
    *bit = (uint64_t)1 << (b % 64);
}

/* Puts t, whose name hashes to h, in the index (the table has room). */
static void put(mt_graph *g, mt_tensor *t, uint64_t h) {
    size_t mask = (size_t)g->names_cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        mt_tensor *o = g->names[i];
        if (!o) {
            g->names[i] = t;
            g->name_hash[i] = h;
            g->n_names++;
            return;
        }
        if (o == t) return;
        if (g->name_hash[i] == h && strcmp(o->name, t->name) == 0) {
            g->names_dup = true;
            uint32_t w;
            uint64_t bit;
            dup_bit(h, &w, &bit);
            g->dup_hashes[w] |= bit;
            if (t->id < o->id) g->names[i] = t;
            return;
        }
    }
}

bool mt__names_add(mt_graph *g, mt_tensor *t) {
    if (2 * (g->n_names + 1) > g->names_cap) {
        int cap = g->names_cap ? 2 * g->names_cap : 256;
        mt_tensor **old = g->names, **grown = calloc((size_t)cap, sizeof *grown + sizeof(uint64_t));
        if (!grown) return false;
        const uint64_t *old_hash = g->name_hash;
        int old_cap = g->names_cap;
        g->names = grown;
        g->name_hash = (uint64_t *)(grown + cap);
        g->names_cap = cap;
        g->n_names = 0;
        for (int i = 0; i < old_cap; i++)
            if (old[i]) put(g, old[i], old_hash[i]);
        free(old);
    }
    put(g, t, hash_of(t->name));
    return true;
}

void mt__names_remove(mt_graph *g, mt_tensor *t) {
    if (!g->names_cap) return;
    const uint64_t h = hash_of(t->name);
    size_t mask = (size_t)g->names_cap - 1, i = (size_t)h & mask;
    while (g->names[i] && g->names[i] != t) i = (i + 1) & mask;
    if (!g->names[i]) return;   /* t is not the tensor indexed under its name */
    /* backward-shift deletion: every later entry of the cluster whose home
     * slot is not cyclically in (hole, j] moves into the hole, so that no
     * probe sequence is broken */
    g->names[i] = NULL;
    for (size_t hole = i, j = (i + 1) & mask; g->names[j]; j = (j + 1) & mask) {
        size_t home = (size_t)g->name_hash[j] & mask;
        bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (stays) continue;
        g->names[hole] = g->names[j];
        g->name_hash[hole] = g->name_hash[j];
        g->names[j] = NULL;
        hole = j;
    }
    g->n_names--;
    if (!g->names_dup) return;
    /* no other tensor was ever seen with this name (put marks every name
       two tensors meet on): none to look for */
    uint32_t w;
    uint64_t bit;
    dup_bit(h, &w, &bit);
    if (!(g->dup_hashes[w] & bit)) return;
    /* another tensor may have the same name: the first one takes its place */
    for (int k = 0; k < g->n_tensors; k++)
        if (g->tensors[k] != t && strcmp(g->tensors[k]->name, t->name) == 0) {
            put(g, g->tensors[k], h);
            return;
        }
}

mt_tensor *mt_graph_find(mt_graph *g, const char *name) {
    if (!g->names_cap || !name) return NULL;
    const uint64_t h = hash_of(name);
    size_t mask = (size_t)g->names_cap - 1;
    for (size_t i = (size_t)h & mask; g->names[i]; i = (i + 1) & mask)
        if (g->name_hash[i] == h && strcmp(g->names[i]->name, name) == 0) return g->names[i];
    return NULL;
}

void mt_tensor_set_name(mt_tensor *t, const char *name) {
    mt_graph *g = t->graph;
    if (g) mt__names_remove(g, t);
    mt__name_copy(t->name, sizeof t->name, name);
    if (g && !mt__names_add(g, t))
        mt__graph_error(g, MT_ENOMEM, "out of memory indexing the name '%s'", t->name);
}
