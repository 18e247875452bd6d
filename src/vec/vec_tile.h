/*
 * vec_tile.h — flash attention's tile kernels, written once against the
 * level's macros (internal; included by vec_body.h only, after its helpers,
 * so it sees vf, V_* and load_part / store_part).
 *
 * Flash attention (ops/attention.c) keeps a tile's scores transposed, s
 * (keys, query rows) with the query rows along the vector lanes: a query
 * row's softmax (its max, its exp, its Σ, its backward) is then lanewise
 * over the keys, with no horizontal sum. The column kernels below work on
 * that layout; a partial last vector of columns goes through the padded
 * loads, so no lane past m is read or written.
 *
 * gemm_tile is the tile products' register-blocked micro-kernel: 6 rows of
 * C by 2 vectors of columns in 12 accumulators, op(A)'s 6 entries of a k
 * broadcast, B's row of k loaded as two vectors. B is read as rows of N
 * contiguous floats (k, v, q, dout rows as they lie, or the scratch's
 * transposed tiles), so nothing is packed per call: Open BLAS repacks both
 * operands at every call, which is a third of its time on these K = 64
 * products. It uses the level's fused multiply-add (V_FMA), the one place
 * in the vector layer that does (a product's rounding is its own, as Open
 * BLAS's is). Only levels with vectors build it (V_W > 1); the table's
 * entry is NULL at generic, whose caller takes Open BLAS instead.
 */

/* ---- softmax over the columns of a transposed tile ----------------------- */

/* exp in the column loops: vec_body.h's EXP3, inlined (SLEEF's is a call,
 * which the loop's live vectors are spilled around) */
#define TILE_EXP(x) EXP3(x)

/* mx[i] = max(mx[i], max_r a[r·ld + i]) for i < m, r < n (NaN skipped) */
static void k_cols_max(float *restrict mx, const float *restrict a, int64_t ld, int64_t n,
                       int64_t m) {
#define B_(i, w) { vf acc = V_LD(mx, i, w, -INFINITY);                                  \
                   for (int64_t r = 0; r < n; r++) {                                   \
                       vf x = V_LD(a + r * ld, i, w, -INFINITY);                        \
                       acc = V_SEL_GT(x, acc, x, acc); }                                \
                   V_ST(mx, i, w, acc); }
    V_EACH(m, B_);
#undef B_
}

/* a[r·ld + i] = exp(a[r·ld + i] - sub[i]) for i < m, r < n; sum (NULL: not
 * wanted) [i] = Σ_r of the new column, added in r order */
static void k_cols_exp(float *restrict a, int64_t ld, int64_t n, int64_t m,
                       const float *restrict sub, float *restrict sum) {
#define B_(i, w) { const vf vs = V_LD(sub, i, w, 0.0f);                                 \
                   vf s = V_SET1(0.0f);                                                 \
                   for (int64_t r = 0; r < n; r++) {                                   \
                       vf e = TILE_EXP(V_SUB(V_LD(a + r * ld, i, w, 0.0f), vs));        \
                       s = V_ADD(s, e);                                                 \
                       V_ST(a + r * ld, i, w, e); }                                     \
                   if (sum) V_ST(sum, i, w, s); }
    V_EACH(m, B_);
#undef B_
}

/* d[r·ld + i] = p[r·ld + i] · (d[r·ld + i] - D[i]) · k: the softmax backward */
static void k_cols_softmax_bwd(float *restrict d, const float *restrict p, int64_t ld,
                               int64_t n, int64_t m, const float *restrict D, float k) {
    const vf vk = V_SET1(k);
#define B_(i, w) { const vf vD = V_LD(D, i, w, 0.0f);                                   \
                   for (int64_t r = 0; r < n; r++)                                      \
                       V_ST(d + r * ld, i, w, V_MUL(V_MUL(V_LD(p + r * ld, i, w, 0.0f), \
                                                   V_SUB(V_LD(d + r * ld, i, w, 0.0f), vD)), vk)); }
    V_EACH(m, B_);
#undef B_
}

/* ---- the tile products ---------------------------------------------------- */

#if V_W > 1
#define TILE_MR 6

/* C (mr, NV·V_W, or the rem < V_W lanes of one vector when rem) = alpha ·
 * op(A) · B + beta · C; op(A)'s (r, k) at A[r·sm + k·sk]. */
static inline __attribute__((always_inline)) void
tile_block(const int mr, const int nv, const int64_t rem, const float *restrict A,
           const int64_t sm, const int64_t sk, const float *restrict B, int64_t ldb,
           float *restrict C, int64_t ldc, int64_t K, float alpha, float beta) {
    vf c0[TILE_MR], c1[TILE_MR];
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        c0[r] = c1[r] = V_SET1(0.0f);
        if (beta != 0.0f) __builtin_prefetch(C + r * ldc, 1);   /* C's rows, read at the end */
    }
    for (int64_t k = 0; k < K; k++) {
        const float *restrict b = B + k * ldb, *restrict a = A + k * sk;
        const vf b0 = rem ? load_part(b, rem, 0.0f) : V_LOAD(b);
        const vf b1 = nv > 1 ? V_LOAD(b + V_W) : b0;
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            const vf ar = V_SET1(a[r * sm]);
            c0[r] = V_FMA(ar, b0, c0[r]);
            if (nv > 1) c1[r] = V_FMA(ar, b1, c1[r]);
        }
    }
    const vf va = V_SET1(alpha), vb = V_SET1(beta);
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
        float *restrict c = C + r * ldc;
        vf x0 = V_MUL(va, c0[r]), x1 = V_MUL(va, c1[r]);
        if (beta != 0.0f) {   /* beta = 0 reads nothing: C may hold garbage */
            x0 = V_ADD(x0, V_MUL(vb, rem ? load_part(c, rem, 0.0f) : V_LOAD(c)));
            if (nv > 1) x1 = V_ADD(x1, V_MUL(vb, V_LOAD(c + V_W)));
        }
        if (rem) store_part(c, x0, rem);
        else V_STORE(c, x0);
        if (nv > 1) V_STORE(c + V_W, x1);
    }
}

/* Every block shape a column block of width nv (rem) needs, for one layout
 * of A: full blocks of TILE_MR rows, then the last rows. */
#define TILE_ROWS_FROM(I0, SM, SK)                                                       \
    for (int64_t i = (I0); i < M; i += TILE_MR) {                                       \
        const float *Ai = A + i * (SM);                                                 \
        float *Ci = C + i * ldc + j;                                                    \
        const int64_t left = M - i;                                                     \
        if (left >= 6) {                                                                \
            if (nv == 2) tile_block(6, 2, 0, Ai, SM, SK, Bj, ldb, Ci, ldc, K, alpha, beta); \
            else tile_block(6, 1, rem, Ai, SM, SK, Bj, ldb, Ci, ldc, K, alpha, beta);   \
            continue;                                                                   \
        }                                                                               \
        switch (left * 2 + (nv == 2)) {                                                 \
        case 11: tile_block(5, 2, 0, Ai, SM, SK, Bj, ldb, Ci, ldc, K, alpha, beta); break; \
        case 10: tile_block(5, 1, rem, Ai, SM, SK, Bj, ldb, Ci, ldc, K, alpha, beta); break; \
        case 9: tile_block(4, 2, 0, Ai, SM, SK, Bj, ldb, Ci, ldc, K, alpha, beta); break; \
        case 8: tile_block(4, 1, rem, Ai, SM, SK, Bj, ldb, Ci, ldc, K, alpha, beta); break; \
        case 7: tile_block(3, 2, 0, Ai, SM, SK, Bj, ldb, Ci, ldc, K, alpha, beta); break; \
        case 6: tile_block(3, 1, rem, Ai, SM, SK, Bj, ldb, Ci, ldc, K, alpha, beta); break; \
        case 5: tile_block(2, 2, 0, Ai, SM, SK, Bj, ldb, Ci, ldc, K, alpha, beta); break; \
        case 4: tile_block(2, 1, rem, Ai, SM, SK, Bj, ldb, Ci, ldc, K, alpha, beta); break; \
        case 3: tile_block(1, 2, 0, Ai, SM, SK, Bj, ldb, Ci, ldc, K, alpha, beta); break; \
        default: tile_block(1, 1, rem, Ai, SM, SK, Bj, ldb, Ci, ldc, K, alpha, beta); break; \
        }                                                                               \
    }

/* The column blocks [j0, j1) of the row blocks [i0, i1): two vectors
 * wide, then one, then a partial one. */
static void gemm_part(bool ta, int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t K,
                      float alpha, const float *restrict A, int64_t lda,
                      const float *restrict B, int64_t ldb, float beta, float *restrict C,
                      int64_t ldc) {
    for (int64_t j = j0; j < j1;) {
        const int nv = j1 - j >= 2 * V_W ? 2 : 1;
        const int64_t rem = j1 - j >= V_W ? 0 : j1 - j, M = i1;
        const float *Bj = B + j;
        if (ta) { TILE_ROWS_FROM(i0, 1, lda) }
        else    { TILE_ROWS_FROM(i0, lda, 1) }
        j += rem ? rem : nv * V_W;
    }
}

/* K goes in chunks of kc rows of B, kc·N <= 4096 floats (16 KiB, half of
 * L1), each chunk's B staying in L1 while every block of 6 rows of C runs
 * over all its columns (a panel of B of one column block, its rows ld
 * apart, would sit in a few of L1's sets: ld = 256 floats puts every row
 * in the same 4 of 64). The chunks after the first add to C. */
static void k_gemm_tile(bool ta, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *restrict A, int64_t lda, const float *restrict B,
                        int64_t ldb, float beta, float *restrict C, int64_t ldc) {
    int64_t kc = 4096 / (N > 0 ? N : 1);
    kc = kc < 16 ? 16 : kc;
    kc = (K + (K + kc - 1) / kc - 1) / ((K + kc - 1) / kc);   /* chunks of equal size */
    kc = kc < 1 ? 1 : kc;
    for (int64_t k0 = 0; k0 < K || k0 == 0; k0 += kc) {
        const int64_t kn = K - k0 < kc ? K - k0 : kc;
        const float *Ak = ta ? A + k0 * lda : A + k0, *Bk = B + k0 * ldb;
        const float bk = k0 ? 1.0f : beta;
        /* op(A) = Aᵀ (a weight gradient): the next chunk's rows of A and
         * B, kx of them, asked for a share a block of rows (ahead of the
         * blocks of this chunk, which read them at their own stride) */
        const int64_t kx = ta && k0 + kc < K ? (K - k0 - kc < kc ? K - k0 - kc : kc) : 0;
        const int64_t blocks = M > TILE_MR ? (M + TILE_MR - 1) / TILE_MR : 1;
        const int64_t share = (kx + blocks - 1) / blocks;
        int64_t next = 0;   /* the next chunk's rows asked for so far */
        /* blocks of 6 rows; 7 to 11 left go as two blocks of about half
         * (64 = 9·6 + 5 + 5): a block of 4 or fewer rows has too few
         * accumulators to hide the FMA's latency */
        for (int64_t i = 0, take; i < M; i += take) {
            const int64_t left = M - i;
            take = left >= 2 * TILE_MR || left <= TILE_MR ? (left < TILE_MR ? left : TILE_MR)
                                                          : (left + 1) / 2;
            for (int64_t q = 0; q < share && next < kx; q++, next++) {
                const float *an = A + (k0 + kc + next) * lda, *bn = B + (k0 + kc + next) * ldb;
                for (int64_t e = 0; e < M; e += 16) __builtin_prefetch(an + e, 0, 3);
                for (int64_t e = 0; e < N; e += 16) __builtin_prefetch(bn + e, 0, 3);
            }
            /* the next block's rows of A (when they are rows: not ta) and
             * of C (when read) asked for while this block runs: rows ld
             * apart (k, v, dk, dv as flash streams them from L2 and L3),
             * which the hardware's stream prefetchers do not follow */
            const int64_t nx = i + take + TILE_MR <= M ? TILE_MR : M - i - take;
            for (int64_t r = i + take; r < i + take + nx; r++) {
                for (int64_t e = 0; !ta && e < kn; e += 16) __builtin_prefetch(Ak + r * lda + e, 0, 3);
                for (int64_t e = 0; bk != 0.0f && e < N; e += 16) __builtin_prefetch(C + r * ldc + e, 1, 3);
            }
            gemm_part(ta, i, i + take, 0, N, kn, alpha, Ak, lda, Bk, ldb, bk, C, ldc);
        }
    }
}
#undef TILE_ROWS_FROM
#undef TILE_EXP
#undef TILE_MR
#define GEMM_TILE k_gemm_tile
#else
#define GEMM_TILE NULL
#endif
