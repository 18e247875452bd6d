/*
 * arena.c — where each activation goes in a graph's arena (graph_impl.h,
 * mt__arena_place): two tensors share bytes only if their lifetimes (run
 * order positions [first_use, last_use]) do not overlap.
 *
 * Two placements, and the smaller arena is kept:
 *  - A heap simulated over the run order: at each position the tensors born
 *    there take the best-fitting free range (largest first), then the ones
 *    that die there give theirs back, merged with their neighbours. O(n log
 *    n) in the tensors plus a scan of the free list per placement, which
 *    stays short for these graphs (a freed range merges into its
 *    neighbours): L=1000 blocks plan in milliseconds.
 *  - Greedy by size (Pisarchyk and Lee 2020, "Efficient Memory Management
 *    for Deep Neural Net Inference", the "greedy by size" strategy of
 *    TensorFlow Lite's planner, there with the smallest gap, here the
 *    lowest, which stops the scan early and packed as well or better):
 *    the largest tensor first, each at the lowest gap between the placed
 *    tensors alive with it that holds it, else above them all. It knows
 *    every lifetime at once, where the heap places each tensor as it is
 *    born and cannot know that a range it splits now is wanted whole later: in the B phase of a step without
 *    remat each block frees (B,T,C) activations while it makes (B,T,F)
 *    gradients that wait for W, and the heap's arena grew past the peak of
 *    live bytes by ~4 (B,T,C) floats a sequence on a LLaMA on fsdp=2 with
 *    the gathered parameters kept among the activations (5%; 1.8% without
 *    them), where greedy by size meets the peak to within 0.1 MB. Over the
 *    43,777 arenas `plan --preset llama3-8b` places on 64 H100s the heap
 *    was a median 4.0% above the peak (at most 53%), the smaller of the
 *    two 0.0% (at most 12%). Greedy by size is quadratic in the tensors
 *    (each looks at every placed one alive with it), so it runs below
 *    MT_GREEDY_MAX of them (every program the planner builds: at most 8
 *    blocks, 832 tensors there; the trainer's up to a few dozen blocks),
 *    and not where the heap met the peak already.
 * Both are deterministic (total orders, no qsort ties).
 */
#include "graph/graph_impl.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Tensors up to which greedy by size runs beside the heap: 8192 is ~3·10⁷
 * overlap tests, tens of milliseconds (a 48-block GPT has ~3000). */
#define MT_GREEDY_MAX 8192

/* ======================================================================== */
/* The arena: a heap simulated over the run order                            */
/* ======================================================================== */

/* Free byte ranges of the arena below its high-water mark, sorted by offset,
 * never touching each other (a freed range merges with its neighbours). */
typedef struct {
    size_t off, size;
} span;

typedef struct {
    span  *free;
    int    n, cap;
    size_t top;          /* high-water mark: the arena's size so far */
} heap;

/* Index of the first free span at or past `off`. */
static int heap_find(const heap *h, size_t off) {
    int lo = 0, hi = h->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (h->free[mid].off < off) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Best fit: the smallest free span that holds `need` (the lowest of equal
 * ones); else the top, reusing a free span that ends there. */
static size_t heap_alloc(heap *h, size_t need) {
    int best = -1;
    for (int i = 0; i < h->n; i++)
        if (h->free[i].size >= need && (best < 0 || h->free[i].size < h->free[best].size))
            best = i;
    if (best < 0 && h->n > 0 && h->free[h->n - 1].off + h->free[h->n - 1].size == h->top) {
        best = h->n - 1;                        /* grow the top span to fit */
        h->top = h->free[best].off + need;
        h->free[best].size = need;
    }
    if (best < 0) {
        size_t off = h->top;
        h->top += need;
        return off;
    }
    size_t off = h->free[best].off;
    h->free[best].off += need;
    h->free[best].size -= need;
    if (h->free[best].size == 0) {
        memmove(&h->free[best], &h->free[best + 1], (size_t)(h->n - best - 1) * sizeof *h->free);
        h->n--;
    }
    return off;
}

/* Returns [off, off+size) to the free list, merged with its neighbours. */
static bool heap_free(heap *h, size_t off, size_t size) {
    int i = heap_find(h, off);
    bool left = i > 0 && h->free[i - 1].off + h->free[i - 1].size == off;
    bool right = i < h->n && off + size == h->free[i].off;
    if (left && right) {
        h->free[i - 1].size += size + h->free[i].size;
        memmove(&h->free[i], &h->free[i + 1], (size_t)(h->n - i - 1) * sizeof *h->free);
        h->n--;
    } else if (left) {
        h->free[i - 1].size += size;
    } else if (right) {
        h->free[i].off = off;
        h->free[i].size += size;
    } else {
        if (h->n == h->cap) {
            int cap = h->cap ? 2 * h->cap : 64;
            span *p = realloc(h->free, (size_t)cap * sizeof *p);
            if (!p) return false;
            h->free = p;
            h->cap = cap;
        }
        memmove(&h->free[i + 1], &h->free[i], (size_t)(h->n - i) * sizeof *h->free);
        h->free[i] = (span){off, size};
        h->n++;
    }
    return true;
}

/* Birth order: first use, then the largest first (it gets the best fit),
 * then id, so that the plan does not depend on qsort's whims. */
static int by_birth(const void *pa, const void *pb) {
    const mt_tensor *a = *(mt_tensor *const *)pa, *b = *(mt_tensor *const *)pb;
    if (a->first_use != b->first_use) return a->first_use < b->first_use ? -1 : 1;
    size_t sa = mt__tensor_bytes(a), sb = mt__tensor_bytes(b);
    if (sa != sb) return sa > sb ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int by_death(const void *pa, const void *pb) {
    const mt_tensor *a = *(mt_tensor *const *)pa, *b = *(mt_tensor *const *)pb;
    if (a->last_use != b->last_use) return a->last_use < b->last_use ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* born and dying (the same n tensors, ids ascending) sorted as by_birth
 * and by_death sort them, by counting positions (the two qsorts were a
 * tenth of the planner's compiles). False, nothing changed, where the ids
 * do not ascend or memory runs out: qsort then. */
static bool sort_by_use(mt_tensor **born, mt_tensor **dying, int n) {
    int most = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && born[i]->id <= born[i - 1]->id) return false;
        if (born[i]->first_use > most) most = born[i]->first_use;
        if (born[i]->last_use > most) most = born[i]->last_use;
    }
    int *at = malloc(((size_t)most + 2) * sizeof *at);
    mt_tensor **tmp = malloc(((size_t)n + 1) * sizeof *tmp);
    bool ok = at && tmp;
    for (int pass = 0; pass < 2 && ok; pass++) {   /* stable: ids ascend in a position */
        mt_tensor **list = pass ? dying : born;
        memset(at, 0, ((size_t)most + 2) * sizeof *at);
        for (int i = 0; i < n; i++) at[(pass ? list[i]->last_use : list[i]->first_use) + 1]++;
        for (int k = 0; k <= most; k++) at[k + 1] += at[k];
        for (int i = 0; i < n; i++) tmp[at[pass ? list[i]->last_use : list[i]->first_use]++] = list[i];
        memcpy(list, tmp, (size_t)n * sizeof *list);
    }
    /* by_birth: in a position the larger first, then the lower id */
    for (int i = 1; ok && i < n; i++) {
        mt_tensor *t = born[i];
        int j = i;
        for (; j > 0 && born[j - 1]->first_use == t->first_use &&
               mt__tensor_bytes(born[j - 1]) < mt__tensor_bytes(t); j--)
            born[j] = born[j - 1];
        born[j] = t;
    }
    free(at);
    free(tmp);
    return ok;
}

/* ======================================================================== */
/* Greedy by size                                                            */
/* ======================================================================== */

/* A tensor to place, its bytes taken once (the sort compares them
 * n log n times, and counting the elements of each was a tenth of a
 * planner search's time). */
typedef struct {
    size_t      bytes;
    int         first, id;
    mt_tensor  *t;
} sized;

/* Largest first; then born earlier, then id: a total order, so the plan
 * does not depend on the sort. */
static bool before_by_size(const sized *a, const sized *b) {
    if (a->bytes != b->bytes) return a->bytes > b->bytes;
    if (a->first != b->first) return a->first < b->first;
    return a->id < b->id;
}

/* list (n) sorted by before_by_size through tmp (n): a bottom-up merge
 * sort, where glibc's qsort takes a heap buffer each call. */
static void sort_by_size(sized *list, sized *tmp, int n) {
    for (int w = 1; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            const int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int a = lo, b = mid, k = lo;
            while (a < mid && b < hi) tmp[k++] = before_by_size(&list[b], &list[a]) ? list[b++] : list[a++];
            while (a < mid) tmp[k++] = list[a++];
            while (b < hi) tmp[k++] = list[b++];
        }
        memcpy(list, tmp, (size_t)n * sizeof *list);
    }
}

/* The placed tensors in offset order, as arrays (the scan below reads
 * first and last of every one, a few at a time). */
typedef struct {
    size_t *off, *end;
    int    *first, *last;
    int     n;
} placed;

/* Places [off, off+need) alive [first, last] in offset order. */
static void placed_insert(placed *p, size_t off, size_t need, int first, int last) {
    /* after every placed one at or below off (offsets ascend): by halves */
    int lo = 0, hi = p->n;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (p->off[mid] > off) hi = mid;
        else lo = mid + 1;
    }
    const int at = lo;
    const size_t k = (size_t)(p->n - at);
    memmove(p->off + at + 1, p->off + at, k * sizeof *p->off);
    memmove(p->end + at + 1, p->end + at, k * sizeof *p->end);
    memmove(p->first + at + 1, p->first + at, k * sizeof *p->first);
    memmove(p->last + at + 1, p->last + at, k * sizeof *p->last);
    p->off[at] = off, p->end[at] = off + need, p->first[at] = first, p->last[at] = last;
    p->n++;
}

/* The lowest offset from which `need` bytes are free of every placed
 * tensor alive in [first, last]. The placed ones are taken 64 at a time in
 * offset order: which lifetimes overlap is found for the 64 at once (a
 * loop of fixed count, which gcc vectorises; the arrays have room for n
 * rounded up to 64, the rest lifetimes that overlap nothing, set once by
 * place_greedy and kept by placed_insert's moves), packed one bit each,
 * and the few that do are walked; the blocks past the gap found are not
 * looked at. (Flags for every placed tensor, walked 8 a word, took twice
 * the time: most tensors find their gap low.) */
static size_t lowest_gap(const placed *p, size_t need, int first, int last) {
    const int *restrict pf = p->first, *restrict pl = p->last;
    size_t prev = 0;   /* the end of the bytes taken below the gap */
    for (int j0 = 0; j0 < p->n; j0 += 64) {
        unsigned char flag[64];
        for (int j = 0; j < 64; j++) flag[j] = (pl[j0 + j] >= first) & (pf[j0 + j] <= last);
        uint64_t bits = 0;
        for (int k = 0; k < 8; k++) {   /* 8 flags of 0 or 1 a byte to 8 bits, in order */
            uint64_t w;
            memcpy(&w, flag + 8 * k, sizeof w);
            bits |= (w * 0x0102040810204080u >> 56) << (8 * k);
        }
        for (; bits; bits &= bits - 1) {
            const int j = j0 + __builtin_ctzll(bits);
            if (p->off[j] > prev && p->off[j] - prev >= need) return prev;
            if (p->end[j] > prev) prev = p->end[j];
        }
    }
    return prev;
}

/* Greedy by size over the n tensors (the file's comment): where the arena it
 * finds is smaller than `bound`, sets every tensor's offset and *arena_out
 * to it; else changes no offset and *arena_out is at least bound (it stops
 * there). False when out of memory. */
static bool place_greedy(mt_tensor *const *tensors, int n, size_t align, size_t bound,
                         size_t *arena_out) {
    /* one block: the list, its offsets, the placed arrays; on
     * the stack up to GREEDY_STACK bytes (every program the planner builds:
     * it places tens of thousands of arenas, and a heap block each, or
     * qsort's, grew an ASan build's peak by 160 MB on the 405B search:
     * freed memory held in its quarantine), else from the heap */
    enum { GREEDY_STACK = 96 * 1024 };
    _Alignas(max_align_t) char local[GREEDY_STACK];
    const size_t m = (size_t)n + 64;   /* lowest_gap's blocks of 64 */
    const size_t bytes = m * (2 * sizeof(sized) + 3 * sizeof(size_t) + 2 * sizeof(int));
    char *block = bytes <= sizeof local ? local : malloc(bytes);
    if (!block) return false;
    sized *list = (sized *)block, *tmp = list + m;
    size_t *offsets = (size_t *)(tmp + m);   /* list's */
    placed p = {.off = offsets + m, .end = offsets + 2 * m};
    p.first = (int *)(p.end + m);
    p.last = p.first + m;
    for (size_t j = 0; j < m; j++) p.first[j] = INT_MAX, p.last[j] = INT_MIN;
    for (int i = 0; i < n; i++)
        list[i] = (sized){.bytes = mt__tensor_bytes(tensors[i]), .first = tensors[i]->first_use,
                          .id = tensors[i]->id, .t = tensors[i]};
    sort_by_size(list, tmp, n);
    size_t arena = 0;
    for (int i = 0; i < n && arena < bound; i++) {
        const mt_tensor *t = list[i].t;
        const size_t need = (list[i].bytes + align - 1) / align * align;
        const size_t off = lowest_gap(&p, need, t->first_use, t->last_use);
        placed_insert(&p, off, need, t->first_use, t->last_use);
        offsets[i] = off;
        if (off + need > arena) arena = off + need;
    }
    if (arena < bound)
        for (int i = 0; i < n; i++) list[i].t->offset = offsets[i];
    if (block != local) free(block);
    *arena_out = arena;
    return true;
}

/* ======================================================================== */
/* The smaller of the two                                                    */
/* ======================================================================== */

mt_status mt__arena_place(mt_tensor **born, mt_tensor **dying, int n, int pos, size_t align,
                          size_t *arena_out) {
    if (!sort_by_use(born, dying, n)) {
        qsort(born, (size_t)n, sizeof *born, by_birth);
        qsort(dying, (size_t)n, sizeof *dying, by_death);
    }
    heap h = {0};
    bool ok = true;
    size_t live = 0, peak = 0;   /* the bytes alive: no placement beats the peak */
    for (int p = 0, b = 0, d = 0; p < pos && ok; p++) {
        for (; b < n && born[b]->first_use == p; b++) {
            const size_t need = (mt__tensor_bytes(born[b]) + align - 1) / align * align;
            born[b]->offset = heap_alloc(&h, need);
            live += need;
        }
        if (live > peak) peak = live;
        for (; d < n && dying[d]->last_use == p && ok; d++) {
            const size_t need = (mt__tensor_bytes(dying[d]) + align - 1) / align * align;
            ok = heap_free(&h, dying[d]->offset, need);
            live -= need;
        }
    }
    free(h.free);
    *arena_out = h.top;
    size_t greedy = h.top;
    if (ok && h.top > peak && n <= MT_GREEDY_MAX) ok = place_greedy(born, n, align, h.top, &greedy);
    if (!ok) return mt_fail(MT_ENOMEM, "out of memory placing %d tensors in the arena", n);
    if (greedy < h.top) *arena_out = greedy;
    return MT_OK;
}
