/* test_plan_speed.c — the planner's speed-ups (issue 40 item 7) give what
 * the code before them gave, so no answer of a search changes:
 *  - a phase's products' efficiencies remembered by shape
 *    (mt__plan_node_seconds_memo): the seconds of every node bit for bit
 *    those of mt__plan_node_seconds without a memo, over more shapes than
 *    the memo holds, met in a shuffled order (entries replaced), on two
 *    shipped GPU files whose tiles differ;
 *  - greedy by size with the tensors' bytes taken once and a placed one
 *    inserted by halves (arena.c): on random lifetimes the arena is a valid
 *    placement (no two tensors alive together share a byte), never below
 *    the peak of the bytes alive, never above greedy by size written out
 *    here the plain way (qsort, every placed tensor scanned), and where
 *    greedy is the one kept, its offsets are the plain greedy's, offset
 *    for offset;
 *  - a descriptor found by its name's address first (op_table.c): every
 *    op's name, as the descriptor holds it and as a copy elsewhere in
 *    memory, finds the op's own descriptor.
 * bench/run_plan_speed.sh with a base build compares every published
 * case's whole answer before and after.
 */
#include "meshtrain.h"
#include "harness.h"
#include "graph/graph_impl.h"
#include "ops/ops_impl.h"
#include "plan/cost.h"
#include "tensor/tensor_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================== */
/* Products' efficiencies remembered                                         */
/* ======================================================================== */

MT_TEST(gemm_memo_bit_for_bit) {
    /* 7 x 6 x 5 = 210 shapes, more than the memo's 16 entries; multiples of
       large powers of two (the shapes a GPT's products have), odd ones and
       the non-integral ones a batch's interpolation gives */
    static const double MS[] = {1, 100, 2048, 4096.5, 12288, 24576, 3 * 8192};
    static const double NS[] = {64, 128, 4608, 6144, 12288, 51200};
    static const double KS[] = {256, 3072, 4096, 12288, 14336};
    const char *files[] = {"a100-80gb", "h100-sxm"};
    for (int f = 0; f < 2; f++) {
        mt_hardware *hw = NULL;
        MT_CHECK_OK(mt_hardware_find(files[f], &hw, NULL, 0));
        mt__plan_gemm_memo memo;
        memset(&memo, 0, sizeof memo);
        uint64_t x = 88172645463325252u;   /* xorshift64: a fixed shuffle */
        int hits = 0;
        for (int i = 0; i < 5000; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            mt__plan_node n;
            memset(&n, 0, sizeof n);
            n.cls = MT__PN_MATMUL;
            n.phase = 'F';
            n.gemm_m = MS[x % 7];
            n.gemm_n = NS[(x >> 8) % 6];
            n.gemm_k = KS[(x >> 16) % 5];
            n.flops = 2 * n.gemm_m * n.gemm_n * n.gemm_k;
            n.bytes = 2 * (n.gemm_m * n.gemm_k + n.gemm_k * n.gemm_n + n.gemm_m * n.gemm_n);
            if ((x >> 24) % 10 == 0) n.cls = MT__PN_VECTOR;   /* no product: no memo */
            bool fb0 = false, fb1 = false;
            const double want = mt__plan_node_seconds(hw, &n, MT_HW_BF16, &fb0);
            const double got = mt__plan_node_seconds_memo(hw, &n, MT_HW_BF16, &memo, &fb1);
            MT_CHECK(got == want && fb0 == fb1,
                     "%s: %g x %g x %g: %.17g s with the memo, %.17g s without", files[f],
                     n.gemm_m, n.gemm_n, n.gemm_k, got, want);
            hits += n.cls == MT__PN_MATMUL;
        }
        MT_CHECK(hits > 4000, "%d products costed", hits);
        mt_hardware_free(hw);
    }
}

/* ======================================================================== */
/* Greedy by size                                                            */
/* ======================================================================== */

enum { N_TENSORS = 300, ALIGN = 64 };

static size_t need_of(const mt_tensor *t) {
    return ((size_t)t->shape[0] * 4 + ALIGN - 1) / ALIGN * ALIGN;
}

static int plain_by_size(const void *pa, const void *pb) {
    const mt_tensor *a = *(mt_tensor *const *)pa, *b = *(mt_tensor *const *)pb;
    const size_t sa = (size_t)a->shape[0] * 4, sb = (size_t)b->shape[0] * 4;   /* its bytes */
    if (sa != sb) return sa > sb ? -1 : 1;
    if (a->first_use != b->first_use) return a->first_use < b->first_use ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* Greedy by size the plain way: the largest first, each at the lowest
 * offset where it overlaps no placed tensor alive with it. Offsets into
 * off (by id); returns the arena. */
static size_t plain_greedy(mt_tensor **ts, int n, size_t *off) {
    mt_tensor **order = malloc((size_t)n * sizeof *order);
    int *placed = malloc((size_t)n * sizeof *placed);
    MT_CHECK(order && placed, "out of memory");
    memcpy(order, ts, (size_t)n * sizeof *order);
    qsort(order, (size_t)n, sizeof *order, plain_by_size);
    size_t arena = 0;
    for (int i = 0; i < n; i++) {
        const mt_tensor *t = order[i];
        const size_t need = need_of(t);
        size_t at = 0;
        for (bool moved = true; moved;) {   /* up past every clash, until none */
            moved = false;
            for (int j = 0; j < i; j++) {
                const mt_tensor *u = ts[placed[j]];
                if (u->last_use < t->first_use || u->first_use > t->last_use) continue;
                if (off[u->id] < at + need && at < off[u->id] + need_of(u)) {
                    at = off[u->id] + need_of(u);
                    moved = true;
                }
            }
        }
        off[t->id] = at;
        placed[i] = t->id;
        if (at + need > arena) arena = at + need;
    }
    free(order);
    free(placed);
    return arena;
}

MT_TEST(arena_greedy_against_plain) {
    mt_tensor *mem = calloc(N_TENSORS, sizeof *mem);
    mt_tensor **ts = malloc(N_TENSORS * sizeof *ts), **born = malloc(N_TENSORS * sizeof *born),
              **dying = malloc(N_TENSORS * sizeof *dying);
    size_t *off = malloc(N_TENSORS * sizeof *off);
    MT_CHECK(mem && ts && born && dying && off, "out of memory");
    uint64_t x = 0x9E3779B97F4A7C15u;
    int greedy_kept = 0;
    for (int trial = 0; trial < 40; trial++) {
        const int n = 20 + trial * 7, pos = 2 * n;
        for (int i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            mt_tensor *t = &mem[i];
            memset(t, 0, sizeof *t);
            t->id = i;
            t->dtype = MT_F32;
            t->ndim = 1;
            t->shape[0] = 1 + (int64_t)(x % 4096) * (1 + (int64_t)((x >> 12) % 3) * 100);
            t->first_use = (int)((x >> 20) % (uint64_t)pos);
            t->last_use = t->first_use + (int)((x >> 32) % 12);
            if (t->last_use >= pos) t->last_use = pos - 1;
            ts[i] = born[i] = dying[i] = t;
        }
        size_t arena = 0;
        MT_CHECK_OK(mt__arena_place(born, dying, n, pos, ALIGN, &arena));
        /* valid, at least the peak */
        size_t peak = 0;
        for (int p = 0; p < pos; p++) {
            size_t live = 0;
            for (int i = 0; i < n; i++)
                if (ts[i]->first_use <= p && p <= ts[i]->last_use) live += need_of(ts[i]);
            if (live > peak) peak = live;
        }
        MT_CHECK(arena >= peak, "trial %d: arena %zu below the peak %zu", trial, arena, peak);
        for (int i = 0; i < n; i++) {
            const mt_tensor *a = ts[i];
            MT_CHECK(a->offset + need_of(a) <= arena, "trial %d: tensor %d past the arena",
                     trial, i);
            for (int j = i + 1; j < n; j++) {
                const mt_tensor *b = ts[j];
                if (a->last_use < b->first_use || b->last_use < a->first_use) continue;
                MT_CHECK(a->offset + need_of(a) <= b->offset || b->offset + need_of(b) <= a->offset,
                         "trial %d: tensors %d and %d alive together share bytes", trial, i, j);
            }
        }
        /* never above the plain greedy; its offsets where greedy was kept */
        const size_t plain = plain_greedy(ts, n, off);
        MT_CHECK(arena <= plain, "trial %d: arena %zu above plain greedy's %zu", trial, arena,
                 plain);
        bool same = arena == plain;
        for (int i = 0; same && i < n; i++) same = ts[i]->offset == off[i];
        greedy_kept += same;
    }
    MT_CHECK(greedy_kept >= 5, "greedy kept and equal to the plain one in %d of 40 trials",
             greedy_kept);
    free(mem);
    free(ts);
    free(born);
    free(dying);
    free(off);
}

/* ======================================================================== */
/* Descriptors by name                                                       */
/* ======================================================================== */

MT_TEST(op_def_named_by_address_and_text) {
    for (int op = 0; op < MT_OP_COUNT; op++) {
        const mt_op_def *d = mt__op_def((mt_op)op);
        char copy[128];
        snprintf(copy, sizeof copy, "%s", d->name);
        MT_CHECK(mt__op_def_named(d->name) == d, "op %d '%s' by its own name", op, d->name);
        MT_CHECK(mt__op_def_named(copy) == d, "op %d '%s' by a copy of its name", op, d->name);
    }
    MT_CHECK(mt__op_def_named("no_such_op") == NULL, "an unknown name: none");
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
