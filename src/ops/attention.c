/*
 * attention.c — flash attention on the CPU: causal (or full) self-attention
 * with NH query heads over KV <= NH key and value heads (grouped-query; KV =
 * NH is multi-head, KV = 1 multi-query), optionally within documents,
 * forward and backward, in memory linear in T: one kernel for the GPT's
 * packed qkv and the LLaMA family's separate q, k, v.
 *
 * The algorithm is FlashAttention-2's (Dao 2023, Algorithms 1 and 2), as
 * ../shared/CONTEXT_PARALLEL.md §2 states it:
 *  - Forward. Query rows go in tiles of BQ, keys in tiles of BK. For each
 *    query tile the key tiles are visited in order: the scores of the tile
 *    (a product), the mask, then per row the running max m and sum l merged
 *    with the tile's (l ← l·e^(m−m') + Σ e^(s−m'), the output rows scaled
 *    by e^(m−m') before the tile's P·V is added: the log-sum-exp identity
 *    with an unnormalised output). At the end out = O / l and the row's
 *    log-sum-exp L = m + log l is the only thing saved: lse (B,NH,T).
 *  - Backward. P = exp(s − L) is recomputed tile by tile from q, k and the
 *    global L, so each tile's P is the final softmax's, exactly; dS = P ∘
 *    (dP − D) with dP = dO·vᵀ and D = rowsum(dO ∘ O). D needs the forward's
 *    output O: the backward reads it (the graph keeps out anyway, as the
 *    output projection's input), so the forward saves only L; saving D is
 *    impossible (it needs dO). dq, dk, dv are sums of per-tile products.
 *  - Masks. A key tile wholly above the diagonal is never visited (the key
 *    loop stops at the query tile's end); a key tile whose document ids
 *    cannot meet the query tile's (their [min, max] ranges are disjoint) is
 *    skipped; the rest, the diagonal tiles and the tiles that straddle a
 *    document boundary, get -inf where a key is masked (exp(-inf) = 0). A
 *    row that a tile masks wholly is left as it was: it never merges with
 *    m = -inf arithmetic. Every row sees at least itself, so l >= 1.
 *  - Work split. The forward's work is a range [bh0, bh1) of (batch, query
 *    head) pairs, bh = b·NH + h, each writing only its own out columns and
 *    lse row. The backward's is a range of (batch, kv head) groups, g = b·KV
 *    + j: the query heads that read kv head j add into its dk and dv one
 *    after the other, in head order and within a head in (query tile, key
 *    tile) order, so no two threads write one kv head and the result does
 *    not depend on how the groups were split (bit for bit).
 *  - Products. The vector layer's tile micro-kernel (vec/vec_tile.h, per
 *    ISA level; Open BLAS at generic) on strided views of q, k, v, out and
 *    the gradients, and on the per-thread tile buffers, the scores kept
 *    transposed so that the softmax runs lanewise down the columns (the
 *    vector layer's cols_* kernels); each product's B operand is a copy
 *    in contiguous rows, made once a query tile or once a tile pair (see
 *    BQ below). A kv head whose rows are not HS apart (the GPT's 3C, a
 *    GQA's KV·HS) is copied to contiguous rows first, once a (batch, kv
 *    head) in the forward, and with its dk and dv (added back at the end)
 *    once a group in the backward, for PACK_MIN_KEYS keys or more: strided
 *    rows spread one head over many pages and a few cache sets, which cost
 *    10–25 % at T >= 8192. The only scratch is per thread: the tiles and
 *    those four (Tk,HS) heads (mt_kernel_attention_scratch), linear in T;
 *    no T×T buffer anywhere.
 *    The copies change no arithmetic: the results are the same bits.
 * Outputs must not overlap inputs.
 *
 * Shapes per pair (b,h), j = kv head of h, all row-major with the leading
 * dimension given:
 *   q_h       (T,HS)  ld ldq  (and dq_h; the GPT: 3C)
 *   k_j, v_j  (T,HS)  ld ldk, ldv (and dk_j, dv_j; the GPT: 3C)
 *   out_h     (T,HS)  ld ldo  (and dout_h; the GPT: C)
 *   lse_bh    (T)     in lse (B,NH,T)
 *   doc_b     (T)     in doc (B,T) (row stride ldd), or none
 *   kdoc_b    (Tk)    in kdoc (B,Tk): the keys' ids, or doc's
 */
#include "ops/kernels.h"
#include "ops/vec_impl.h"
#include "vec/vec.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* Query rows and keys per tile, and the head-size chunk the packed tiles
 * hold. A tile's scores are kept transposed, s (BK keys, BQ query rows) at
 * row stride BQ, so that a query row's softmax runs down a column,
 * lanewise (vec_tile.h), and the micro-kernel reads every operand's rows as
 * they lie. The products' B operands (read over and over, from L1) are
 * copied to contiguous rows first, since rows ld apart (ld = C or 3C, a
 * multiple of 1 KiB) fall into a few of L1's sets and evict one another:
 * qt and dot (HS, BQ), the query tile's q and dout transposed, qp and dop
 * (BQ, HS) its q and dout rows, once a query tile; kvp (BK, HS) the key
 * tile's v rows (forward) or k rows (backward), once a tile pair. A head
 * size above KC takes the transposes KC at a time at each key tile, and
 * reads the row operands where they lie. BQ is a multiple of every level's
 * vector width (16 floats at most). Tile scratch: s and dp (BK,BQ), qt and
 * dot (KC,BQ), qp and dop (BQ,KC), acc (BQ,KC) the tile's running O
 * (forward) or dq (backward), kvp (BK,KC), five rows of BQ statistics:
 * 289 KiB; then the packed kv head's k, v, dk, dv (Tk,HS) each. */
#define BQ 64
#define BK 128
#define KC 128

/* The tile buffers' floats (bufs_of); the kv head's packed rows follow. */
#define TILE_FLOATS (2 * BK * BQ + 5 * KC * BQ + BK * KC + 5 * BQ)

/* The fewest keys for which a kv head is packed: below, its rows are read
 * by few enough query tiles that the copies cost what they save (at T =
 * 1024 they gain nothing yet, at 16384 a quarter: docs/kernels.md). */
#define PACK_MIN_KEYS 1024

size_t mt_kernel_attention_scratch(int64_t Tk, int64_t HS) {
    const size_t packed = Tk >= PACK_MIN_KEYS ? 4 * (size_t)Tk * (size_t)HS : 0;
    return (size_t)TILE_FLOATS + packed;
}

/* Where each tile buffer lies in the scratch. */
typedef struct { float *s, *dp, *qt, *dot, *qp, *dop, *acc, *kvp, *stats; } tile_bufs;

static tile_bufs bufs_of(float *scratch) {
    tile_bufs b;
    b.s = scratch;
    b.dp = b.s + BK * BQ;
    b.qt = b.dp + BK * BQ;
    b.dot = b.qt + KC * BQ;
    b.qp = b.dot + KC * BQ;
    b.dop = b.qp + BQ * KC;
    b.acc = b.dop + BQ * KC;
    b.kvp = b.acc + BQ * KC;
    b.stats = b.kvp + BK * KC;
    return b;
}

/* The kv head query head h reads. */
static inline int64_t kv_of(const mt_attn_layout *L, int64_t h) { return (L->hoff + h) / L->G; }

/* Keys (k, v rows) per sequence. */
static inline int64_t keys_of(const mt_attn_layout *L) { return L->Tk ? L->Tk : L->T; }

static void check_layout(const mt_attn_layout *L) {
    assert(L->NH > 0 && L->KV > 0 && L->HS > 0 && L->G > 0 && L->hoff >= 0 && L->T >= 0);
    assert(!L->qpos == !L->kpos && (L->qpos || keys_of(L) == L->T));
    assert(!L->kdoc || L->doc);
    assert(!L->doc || L->kdoc || keys_of(L) == L->T);
    assert(kv_of(L, 0) >= 0 && kv_of(L, L->NH - 1) < L->KV);
}

/* ======================================================================== */
/* Tiles and masks                                                           */
/* ======================================================================== */

/* The smallest and largest document id of doc[0, n). */
static void doc_range(const int32_t *doc, int64_t n, int32_t *lo, int32_t *hi) {
    int32_t a = doc[0], b = doc[0];
    for (int64_t i = 1; i < n; i++) {
        a = doc[i] < a ? doc[i] : a;
        b = doc[i] > b ? doc[i] : b;
    }
    *lo = a;
    *hi = b;
}

/* One query tile [r0, r1) of batch b: where its keys end and its documents. */
typedef struct {
    int64_t r0, r1, kend;        /* keys [0, kend) may be seen */
    const int32_t *doc, *kdoc;   /* doc_b (T) the rows', the keys' (Tk), or NULL */
    int32_t dlo, dhi;            /* the tile's document ids' range */
    int32_t plo, phi;            /* with positions (L->qpos): the tile's positions' range */
} qtile;

static qtile qtile_at(const mt_attn_layout *L, int64_t b, int64_t r0) {
    qtile t = {.r0 = r0, .r1 = r0 + BQ < L->T ? r0 + BQ : L->T};
    t.kend = L->full ? keys_of(L) : t.r1;
    if (L->qpos) {   /* keys in any order: every tile is visited, tile_kind_of skips */
        t.kend = keys_of(L);
        doc_range(L->qpos + r0, t.r1 - r0, &t.plo, &t.phi);
    }
    if (L->doc) {
        t.doc = L->doc + b * (L->ldd ? L->ldd : L->T);
        t.kdoc = L->kdoc ? L->kdoc + b * keys_of(L) : t.doc;
        doc_range(t.doc + r0, t.r1 - r0, &t.dlo, &t.dhi);
    }
    return t;
}

/* Whether key tile [c0, c1) is masked for some row of t (a diagonal tile, a
 * document boundary), and whether it is masked for all of them (skip). */
typedef enum { TILE_OPEN, TILE_MASKED, TILE_SKIP } tile_kind;

static tile_kind tile_kind_of(const mt_attn_layout *L, const qtile *t, int64_t c0, int64_t c1) {
    tile_kind k = !L->full && c1 - 1 > t->r0 ? TILE_MASKED : TILE_OPEN;
    if (L->qpos && !L->full) {   /* by position: keys past every row skip, before every row open */
        int32_t lo, hi;
        doc_range(L->kpos + c0, c1 - c0, &lo, &hi);
        if (lo > t->phi) return TILE_SKIP;
        k = hi <= t->plo ? TILE_OPEN : TILE_MASKED;
    } else if (L->qpos) {
        k = TILE_OPEN;
    }
    if (t->doc) {
        int32_t lo, hi;
        doc_range(t->kdoc + c0, c1 - c0, &lo, &hi);
        if (hi < t->dlo || lo > t->dhi) return TILE_SKIP;
        if (!(lo == hi && t->dlo == t->dhi)) k = TILE_MASKED;   /* one document each: they meet */
    }
    return k;
}

/* The transposed tile s (c1-c0 keys, BQ): s[(c-c0)·BQ + r-r0] = -inf where
 * key c in [c0, c1) may not be seen from query row r in [r0, r1): a later
 * key (causal) or another document. */
static void mask_tile(const mt_attn_layout *L, const qtile *t, int64_t c0, int64_t c1,
                      float *restrict s) {
    for (int64_t r = t->r0; r < t->r1; r++) {
        float *col = s + (r - t->r0);   /* col[(c - c0)·BQ]: key c's score */
        int64_t cmax = c1;   /* keys [c0, cmax) not masked by position */
        if (L->qpos) {
            if (!L->full)
                for (int64_t c = c0; c < c1; c++)
                    if (L->kpos[c] > L->qpos[r]) col[(c - c0) * BQ] = -INFINITY;
        } else if (!L->full) {   /* a tile that starts past r + 1 (BK < BQ) is masked from c0 */
            for (int64_t c = r + 1 > c0 ? r + 1 : c0; c < c1; c++) col[(c - c0) * BQ] = -INFINITY;
            cmax = r + 1 < c1 ? r + 1 : c1;
        }
        if (t->doc) {
            const int32_t d = t->doc[r];
            for (int64_t c = c0; c < cmax; c++)
                if (t->kdoc[c] != d) col[(c - c0) * BQ] = -INFINITY;
        }
    }
}

/* ======================================================================== */
/* Products                                                                  */
/* ======================================================================== */

/* C (M,N) = alpha · op(A) · B + beta · C, B's rows as they lie: the level's
 * micro-kernel, or Open BLAS where the level has none (generic). */
static void prod(const mt_vec_ops *vec, bool ta, int64_t M, int64_t N, int64_t K, float alpha,
                 const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                 int64_t ldc) {
    if (vec->gemm_tile) vec->gemm_tile(ta, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else mt_kernel_gemm(ta, false, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* yt (kc, BQ) = y's rows [0, m), columns [k0, k0 + kc), transposed; the
 * columns [m, mp) are 0, mp = m rounded up to the vector width. */
static void pack_t(float *restrict yt, const float *restrict y, int64_t ldy, int64_t m,
                   int64_t mp, int64_t k0, int64_t kc) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t e = 0; e < kc; e++) yt[e * BQ + i] = y[i * ldy + k0 + e];
    for (int64_t e = 0; e < kc && mp > m; e++)
        memset(yt + e * BQ + m, 0, (size_t)(mp - m) * sizeof *yt);
}

/* The transposed scores of a tile: s (n, mp) ld BQ = alpha · x (n,HS) ·
 * y (m,HS)ᵀ, y's rows the query tile's (columns [m, mp) of s: 0). yt holds
 * y transposed when HS <= KC (the caller packs it once a query tile);
 * else each KC chunk is transposed here into yt. */
static void scores_t(const mt_vec_ops *vec, float *restrict s, const float *x, int64_t ldx,
                     const float *y, int64_t ldy, float *restrict yt, int64_t n, int64_t m,
                     int64_t mp, int64_t HS, float alpha) {
    for (int64_t k0 = 0; k0 < HS; k0 += KC) {
        const int64_t kc = HS - k0 < KC ? HS - k0 : KC;
        if (HS > KC) pack_t(yt, y, ldy, m, mp, k0, kc);
        prod(vec, false, n, mp, kc, alpha, x + k0, ldx, yt, BQ, k0 ? 1.0f : 0.0f, s, BQ);
    }
}

/* rows (n, cols) of x (row stride ld), or a copy of them in buf (row
 * stride cols), when cols <= KC; *ld_out gets the stride of what is returned */
static const float *rows_packed(float *restrict buf, const float *x, int64_t ld, int64_t n,
                                int64_t cols, int64_t *ld_out) {
    if (cols > KC || ld == cols) {   /* too wide, or contiguous already (a packed head) */
        *ld_out = ld;
        return x;
    }
    for (int64_t r = 0; r < n; r++) memcpy(buf + r * cols, x + r * ld, (size_t)cols * sizeof *buf);
    *ld_out = cols;
    return buf;
}

/* rows (n,HS) of src (row stride lds) into dst (row stride ldd) */
static void head_copy(float *restrict dst, int64_t ldd, const float *restrict src, int64_t lds,
                      int64_t n, int64_t HS) {
    for (int64_t r = 0; r < n; r++) memcpy(dst + r * ldd, src + r * lds, (size_t)HS * sizeof *dst);
}

/* The layout with the kv head's rows packed HS apart (k, v and their
 * gradients), and whether they are packed: rows ldk or ldv apart that are
 * not HS (the GPT's 3C, a GQA's KV·HS), PACK_MIN_KEYS keys or more. */
static mt_attn_layout packed_kv(const mt_attn_layout *L, bool *pack) {
    mt_attn_layout P = *L;
    *pack = (L->ldk != L->HS || L->ldv != L->HS) && keys_of(L) >= PACK_MIN_KEYS;
    P.ldk = P.ldv = L->HS;
    return *pack ? P : *L;
}

/* m rounded up to the vector width (BQ at most: BQ is a multiple of it) */
static int64_t padded(const mt_vec_ops *vec, int64_t m) {
    return (m + vec->width - 1) / vec->width * vec->width;
}

/* ======================================================================== */
/* Forward                                                                   */
/* ======================================================================== */

/* One query tile of pair (b,h): out rows and lse (r1-r0) of the tile.
 * scratch (bufs_of): s, qt, acc, kvp, and per row m (running max), l (running
 * Σ), mn (the new max), sub (what the exp subtracts), ts (the tile's Σ). */
static void fwd_tile(float *restrict o, float *restrict lse, const float *qh, const float *kj,
                     const float *vj, const mt_attn_layout *L, const qtile *t, float scale,
                     const mt_vec_ops *vec, float *restrict scratch) {
    const int64_t HS = L->HS, m = t->r1 - t->r0, mp = padded(vec, m);
    const tile_bufs tb = bufs_of(scratch);
    float *s = tb.s, *qt = tb.qt, *mx = tb.stats;
    float *l = mx + BQ, *mn = l + BQ, *sub = mn + BQ, *ts = sub + BQ;
    /* the unnormalised O (m,HS): in the scratch's contiguous acc when HS
     * <= KC (out's rows, ldo apart, would share a few of L1's sets and
     * evict one another between key tiles), else in out's rows */
    float *oa = HS <= KC ? tb.acc : o + t->r0 * L->ldo;
    const int64_t ldoa = HS <= KC ? HS : L->ldo;
    for (int64_t i = 0; i < m; i++) {
        mx[i] = -INFINITY;
        l[i] = 0.0f;
        memset(oa + i * ldoa, 0, (size_t)HS * sizeof *oa);
    }
    const float *q0 = qh + t->r0 * L->ldq;
    if (HS <= KC) pack_t(qt, q0, L->ldq, m, mp, 0, HS);
    for (int64_t c0 = 0; c0 < t->kend; c0 += BK) {
        const int64_t c1 = c0 + BK < t->kend ? c0 + BK : t->kend, n = c1 - c0;
        const tile_kind kind = tile_kind_of(L, t, c0, c1);
        if (kind == TILE_SKIP) continue;
        /* s (n,m) = scale · k[c0:c1] (n,HS) · q[r0:r1]ᵀ (HS,m) */
        scores_t(vec, s, kj + c0 * L->ldk, L->ldk, q0, L->ldq, qt, n, m, mp, HS, scale);
        if (kind == TILE_MASKED) mask_tile(L, t, c0, c1, s);
        /* the running (m, l, O) merged with the tile's, a column a query
         * row: a row that sees nothing yet (its new max -inf) subtracts 0,
         * so its column's exp is exp(-inf) = 0, and it stays empty */
        memcpy(mn, mx, (size_t)m * sizeof *mn);
        vec->cols_max(mn, s, BQ, n, m);
        for (int64_t i = 0; i < m; i++) sub[i] = mn[i] == -INFINITY ? 0.0f : mn[i];
        vec->cols_exp(s, BQ, n, m, sub, ts);
        for (int64_t i = 0; i < m; i++) {
            if (mn[i] == -INFINITY) continue;
            /* e^(m - m') = 0 when m = -inf, as O and l are then 0 */
            const float alpha = expf(mx[i] - mn[i]);
            l[i] = l[i] * alpha + ts[i];
            mx[i] = mn[i];
            if (alpha != 1.0f) {
                float *restrict orow = oa + i * ldoa;
                MT_VEC_FOR(e, HS, orow[e] *= alpha);
            }
        }
        /* O[r0:r1] (m,HS) += p (m,n) = sᵀ · v[c0:c1] (n,HS) */
        int64_t ldb;
        const float *vb = rows_packed(tb.kvp, vj + c0 * L->ldv, L->ldv, n, HS, &ldb);
        prod(vec, true, m, HS, n, 1.0f, s, BQ, vb, ldb, 1.0f, oa, ldoa);
    }
    for (int64_t i = 0; i < m; i++) {
        /* l >= 1 (the row's own key), unless a NaN came in: it goes out;
         * or l = 0, a row no key of this call is seen from (one block of a
         * split row's keys, documents): out 0, lse -inf, which the
         * caller's merge skips */
        float *orow = o + (t->r0 + i) * L->ldo;   /* arow when HS > KC */
        const float *arow = oa + i * ldoa;
        if (l[i] == 0.0f) {
            memset(orow, 0, (size_t)HS * sizeof *orow);
            lse[i] = -INFINITY;
            continue;
        }
        const float inv = 1.0f / l[i];
        MT_VEC_FOR(e, HS, orow[e] = arow[e] * inv);
        lse[i] = mx[i] + logf(l[i]);
    }
}

void mt_kernel_attention_fwd(float *restrict out, float *restrict lse, const float *q,
                             const float *k, const float *v, const mt_attn_layout *L,
                             float *restrict scratch, int64_t bh0, int64_t bh1) {
    check_layout(L);
    assert(0 <= bh0 && bh0 <= bh1 && bh1 <= L->B * L->NH);
    const int64_t T = L->T, Tk = keys_of(L), NH = L->NH, HS = L->HS;
    const float scale = 1.0f / sqrtf((float)HS);
    const mt_vec_ops *vec = mt__vec();
    bool pack;
    const mt_attn_layout P = packed_kv(L, &pack);
    float *kc = scratch + TILE_FLOATS, *vc = kc + Tk * HS;   /* (Tk,HS) each */
    int64_t held = -1;   /* the (batch, kv head) whose rows kc, vc hold */
    for (int64_t bh = bh0; bh < bh1; bh++) {
        const int64_t b = bh / NH, h = bh % NH, j = kv_of(L, h);
        const float *qh = q + b * T * L->ldq + h * HS;
        const float *kj = k + b * Tk * L->ldk + j * HS, *vj = v + b * Tk * L->ldv + j * HS;
        float *o = out + b * T * L->ldo + h * HS;
        if (pack && held != b * L->KV + j) {   /* a GQA group's heads share one packing */
            head_copy(kc, HS, kj, L->ldk, Tk, HS);
            head_copy(vc, HS, vj, L->ldv, Tk, HS);
            held = b * L->KV + j;
        }
        for (int64_t r0 = 0; r0 < T; r0 += BQ) {
            const qtile t = qtile_at(L, b, r0);
            fwd_tile(o, lse + bh * T + r0, qh, pack ? kc : kj, pack ? vc : vj, &P, &t, scale,
                     vec, scratch);
        }
    }
}

/* ======================================================================== */
/* Backward                                                                  */
/* ======================================================================== */

/* rows (T,HS) at p, leading dimension ld, set to 0 */
static void zero_head(float *p, int64_t T, int64_t HS, int64_t ld) {
    for (int64_t t = 0; t < T; t++) memset(p + t * ld, 0, (size_t)HS * sizeof *p);
}

/* The operands of one query head's backward: the head's q, out, dout and lse,
 * its kv head's k and v, and where its gradients go (NULL: not wanted). */
typedef struct {
    const float *q, *k, *v, *o, *dO, *lse;
    float *dq, *dk, *dv;
    float beta_q;                /* dq's first write: 0 (write) or 1 (add) */
} head_ops;

/* One query tile's gradients: dq[r0:r1] (+)=, dk and dv of the keys it
 * sees +=. scratch (bufs_of): p in s, dp, qt, dot, qp, dop, acc, kvp, D in
 * stats. */
static void bwd_tile(const head_ops *a, const mt_attn_layout *L, const qtile *t, float scale,
                     const mt_vec_ops *vec, float *restrict scratch) {
    const int64_t HS = L->HS, m = t->r1 - t->r0, r0 = t->r0, mp = padded(vec, m);
    const int64_t ldq = L->ldq, ldk = L->ldk, ldv = L->ldv, ldo = L->ldo;
    const tile_bufs tb = bufs_of(scratch);
    float *p = tb.s, *dp = tb.dp, *qt = tb.qt, *dot = tb.dot, *D = tb.stats;
    const bool want_ds = a->dq || a->dk;
    const float *q0 = a->q + r0 * ldq, *do0 = a->dO + r0 * ldo;
    /* the query tile's q and dout rows, packed (or where they lie) */
    int64_t ldqb = ldq, ldob = ldo;
    const float *qb = a->dk ? rows_packed(tb.qp, q0, ldq, m, HS, &ldqb) : q0;
    const float *dob = a->dv ? rows_packed(tb.dop, do0, ldo, m, HS, &ldob) : do0;
    /* D = rowsum(dO ∘ O), the softmax backward's Σ P·dP */
    for (int64_t i = 0; want_ds && i < m; i++)
        D[i] = vec->dot(a->dO + (r0 + i) * ldo, a->o + (r0 + i) * ldo, HS);
    if (HS <= KC) {
        pack_t(qt, q0, ldq, m, mp, 0, HS);
        if (want_ds) pack_t(dot, do0, ldo, m, mp, 0, HS);
    }
    /* dq's rows (m,HS) summed over the key tiles in the scratch's
     * contiguous acc when HS <= KC (as the forward's O), added to (or
     * written into) dq once at the end; else in dq's rows */
    const bool dq_acc = a->dq && HS <= KC;
    float *dqa = dq_acc ? tb.acc : a->dq ? a->dq + r0 * ldq : NULL;
    const int64_t ldqa = dq_acc ? HS : ldq;
    float beta_q = dq_acc ? 0.0f : a->beta_q;
    for (int64_t c0 = 0; c0 < t->kend; c0 += BK) {
        const int64_t c1 = c0 + BK < t->kend ? c0 + BK : t->kend, n = c1 - c0;
        const tile_kind kind = tile_kind_of(L, t, c0, c1);
        if (kind == TILE_SKIP) continue;
        /* pᵀ (n,m) = exp(scale · k qᵀ - L): the forward's scores, the final softmax */
        scores_t(vec, p, a->k + c0 * ldk, ldk, q0, ldq, qt, n, m, mp, HS, scale);
        if (kind == TILE_MASKED) mask_tile(L, t, c0, c1, p);
        vec->cols_exp(p, BQ, n, m, a->lse + r0, NULL);
        /* out = p·v: dv[c0:c1] (n,HS) += pᵀ (n,m) · dO[r0:r1] (m,HS) */
        if (a->dv) {
            prod(vec, false, n, HS, m, 1.0f, p, BQ, dob, ldob, 1.0f, a->dv + c0 * ldv, ldv);
        }
        if (!want_ds) continue;
        /* dpᵀ (n,m) = v[c0:c1] (n,HS) · dOᵀ, then dsᵀ = scale · pᵀ ∘ (dpᵀ - D) in place */
        scores_t(vec, dp, a->v + c0 * ldv, ldv, do0, ldo, dot, n, m, mp, HS, 1.0f);
        vec->cols_softmax_bwd(dp, p, BQ, n, m, D, scale);
        /* s = q·kᵀ: dq[r0:r1] (m,HS) (+)= ds (m,n) · k[c0:c1] (n,HS) */
        if (a->dq) {
            int64_t ldb;
            const float *kb = rows_packed(tb.kvp, a->k + c0 * ldk, ldk, n, HS, &ldb);
            prod(vec, true, m, HS, n, 1.0f, dp, BQ, kb, ldb, beta_q, dqa, ldqa);
        }
        beta_q = 1.0f;
        /* dk[c0:c1] (n,HS) += dsᵀ (n,m) · q[r0:r1] (m,HS) */
        if (a->dk) {
            prod(vec, false, n, HS, m, 1.0f, dp, BQ, qb, ldqb, 1.0f, a->dk + c0 * ldk, ldk);
        }
    }
    /* a tile ran (beta_q = 1) and dq was written, or dq adds (a block of
     * keys that none of the tile's rows sees: ring attention, documents)
     * and stays as it was; when dq does not add, every row sees its own
     * key, so the diagonal tile ran */
    assert(!a->dq || beta_q == 1.0f || a->beta_q == 1.0f);
    for (int64_t i = 0; dq_acc && beta_q == 1.0f && i < m; i++) {
        float *restrict dqr = a->dq + (r0 + i) * ldq;
        const float *restrict ar = dqa + i * HS;
        if (a->beta_q != 0.0f) MT_VEC_FOR(e, HS, dqr[e] += ar[e]);
        else memcpy(dqr, ar, (size_t)HS * sizeof *dqr);
    }
}

/* The gradients (d's, each NULL or (+)= as its acc says) from dout, q, k, v,
 * the forward's out and lse, for the (batch, kv head) groups [g0, g1). dk
 * and dv start from 0 (unless they add) and every query head of the group
 * adds into them, in head order; a kv head that none of this call's query
 * heads reads (a device's share of the heads) gets dk = dv = 0. */
void mt_kernel_attention_bwd(const mt_attn_grads *d, const float *dout, const float *q,
                             const float *k, const float *v, const float *out, const float *lse,
                             const mt_attn_layout *L, float *restrict scratch, int64_t g0,
                             int64_t g1) {
    check_layout(L);
    assert(0 <= g0 && g0 <= g1 && g1 <= L->B * L->KV);
    const int64_t T = L->T, Tk = keys_of(L), HS = L->HS, KV = L->KV, NH = L->NH;
    const float scale = 1.0f / sqrtf((float)HS);
    const mt_vec_ops *vec = mt__vec();
    bool pack;
    const mt_attn_layout P = packed_kv(L, &pack);
    float *kc = scratch + TILE_FLOATS, *vc = kc + Tk * HS;   /* (Tk,HS) each */
    float *dkc = vc + Tk * HS, *dvc = dkc + Tk * HS;
    for (int64_t g = g0; g < g1; g++) {
        const int64_t b = g / KV, j = g % KV;
        const float *kj = k + b * Tk * L->ldk + j * HS, *vj = v + b * Tk * L->ldv + j * HS;
        float *dk = d->dk ? d->dk + b * Tk * L->ldk + j * HS : NULL;
        float *dv = d->dv ? d->dv + b * Tk * L->ldv + j * HS : NULL;
        if (pack) {   /* the group's k, v, dk and dv rows HS apart, as P says */
            head_copy(kc, HS, kj, L->ldk, Tk, HS);
            head_copy(vc, HS, vj, L->ldv, Tk, HS);
            if (dk && d->acc_kv) head_copy(dkc, HS, dk, L->ldk, Tk, HS);
            if (dv && d->acc_kv) head_copy(dvc, HS, dv, L->ldv, Tk, HS);
        }
        float *dkh = pack && dk ? dkc : dk, *dvh = pack && dv ? dvc : dv;
        if (dkh && !d->acc_kv) zero_head(dkh, Tk, HS, P.ldk);
        if (dvh && !d->acc_kv) zero_head(dvh, Tk, HS, P.ldv);
        /* the query heads [h0, h1) that read kv head j */
        int64_t h0 = j * L->G - L->hoff, h1 = h0 + L->G;
        if (h0 < 0) h0 = 0;
        if (h1 > NH) h1 = NH;
        for (int64_t h = h0; h < h1; h++) {
            const head_ops a = {
                .q = q + b * T * L->ldq + h * HS, .k = pack ? kc : kj, .v = pack ? vc : vj,
                .o = out + b * T * L->ldo + h * HS, .dO = dout + b * T * L->ldo + h * HS,
                .lse = lse + (b * NH + h) * T,
                .dq = d->dq ? d->dq + b * T * L->ldq + h * HS : NULL, .dk = dkh, .dv = dvh,
                .beta_q = d->acc_q ? 1.0f : 0.0f};
            for (int64_t r0 = 0; r0 < T; r0 += BQ) {
                const qtile t = qtile_at(L, b, r0);
                bwd_tile(&a, &P, &t, scale, vec, scratch);
            }
        }
        if (pack && dk) head_copy(dk, L->ldk, dkc, HS, Tk, HS);
        if (pack && dv) head_copy(dv, L->ldv, dvc, HS, Tk, HS);
    }
}
