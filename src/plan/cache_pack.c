/*
 * cache_pack.c — a shared program's nodes kept packed (search_impl.h's
 * mt__plan_cache_pack): its distinct nodes once, and the run order as
 * indexes into them.
 *
 * Why: a search's shared programs (cache.c's shared_key) serve layouts far
 * apart in the search's order (the data-parallel class of one fsdp size
 * recurs at every pipe depth), and mt__plan_cache_trim freed the ones past
 * its budget, to be built again: 29723 of GPT-3 175B's 79044 builds on
 * 1536 A100 (issue 40's speed item). A transformer's blocks repeat, so a
 * chunk of k blocks holds about 1/k distinct nodes, and packed it costs a
 * fraction of its bytes; unpacked it is node for node the program built
 * (nodes equal byte for byte are merged, nothing else), so no answer
 * changes.
 */
#include "plan/search_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A hash of the node's bytes, a word at a time (the bytes past the last
 * whole word left out: equal nodes hash equal all the same). */
static uint64_t node_hash(const mt__plan_node *n) {
    uint64_t h = 1469598103934665603u, w;
    const unsigned char *b = (const unsigned char *)n;
    for (size_t i = 0; i + sizeof w <= sizeof *n; i += sizeof w) {
        memcpy(&w, b + i, sizeof w);
        h = (h ^ w) * 1099511628211u;
        h ^= h >> 29;
    }
    return h;
}

mt_status mt__plan_cache_pack(mt__plan_cached *e) {
    if (!e->prog.nodes) return MT_OK;
    if (e->packed_order) {   /* packed before, and unpacked since: the nodes go */
        free(e->prog.nodes);
        e->prog.nodes = NULL;
        return MT_OK;
    }
    const int n = e->prog.n_nodes;
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    int *table = malloc(cap * sizeof *table);            /* (cap) uniq index + 1, 0 empty */
    mt__plan_node *uniq = malloc(((size_t)n + 1) * sizeof *uniq);   /* (n_uniq) */
    uint32_t *order = malloc(((size_t)n + 1) * sizeof *order);      /* (n) */
    double *live = malloc(((size_t)n + 1) * sizeof *live);            /* (n) */
    if (!table || !uniq || !order || !live) {
        free(table), free(uniq), free(order), free(live);
        return mt_fail(MT_ENOMEM, "out of memory packing a program of %d nodes", n);
    }
    memset(table, 0, cap * sizeof *table);
    int n_uniq = 0;
    for (int i = 0; i < n; i++) {
        /* the node without its live bytes (each position's own): alike
           nodes of every layer pack once */
        mt__plan_node x = e->prog.nodes[i];
        live[i] = x.live_bytes;
        x.live_bytes = 0;
        size_t at = (size_t)node_hash(&x) & (cap - 1);
        while (table[at] && memcmp(&uniq[table[at] - 1], &x, sizeof x))
            at = (at + 1) & (cap - 1);
        if (!table[at]) {
            uniq[n_uniq] = x;
            table[at] = ++n_uniq;
        }
        order[i] = (uint32_t)(table[at] - 1);
    }
    free(table);
    mt__plan_node *fit = realloc(uniq, ((size_t)n_uniq + 1) * sizeof *uniq);
    free(e->prog.nodes);
    e->prog.nodes = NULL;
    e->packed_nodes = fit ? fit : uniq;
    e->packed_order = order;
    e->packed_live = live;
    e->n_packed = n_uniq;
    return MT_OK;
}

mt_status mt__plan_cache_unpack(mt__plan_cached *e) {
    if (e->prog.nodes || !e->packed_order) return MT_OK;
    const int n = e->prog.n_nodes;
    mt__plan_node *nodes = calloc((size_t)n + 1, sizeof *nodes);
    if (!nodes) return mt_fail(MT_ENOMEM, "out of memory unpacking a program of %d nodes", n);
    for (int i = 0; i < n; i++) {
        nodes[i] = e->packed_nodes[e->packed_order[i]];
        nodes[i].live_bytes = e->packed_live[i];
    }
    e->prog.nodes = nodes;   /* the packed arrays kept: a later trim packs it for nothing */
    return MT_OK;
}

size_t mt__plan_cache_packed_bytes(const mt__plan_cached *e) {
    if (!e->packed_order) return 0;
    return (size_t)e->n_packed * sizeof *e->packed_nodes +
           (size_t)e->prog.n_nodes * (sizeof *e->packed_order + sizeof *e->packed_live);
}
