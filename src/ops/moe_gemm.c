/*
 * moe_gemm.c — the grouped expert product (ops/moe.h; ../shared/MOE.md
 * §4.6): each local expert's product over its own rows of an expert-major
 * buffer, and the backward, one product per tile: the vector level's tile
 * micro-kernel for narrow experts (NARROW below), else cblas_sgemm through
 * mt_kernel_gemm as the dense products.
 *
 * The work is cut into tiles by the shapes alone (MT_MOE_TILE_ROWS rows of
 * a group, or MT_MOE_TILE_COLS input channels of an expert's weight
 * gradient, each of which sums over all of the group's rows), so that each
 * product call, and so each result bit, is the same however the tiles are
 * shared out among threads (moe_par.c shares them over the kernel pool). A group of zero
 * rows runs no product (Open BLAS's sgemm with K = 0 need not scale its
 * output, so a weight gradient of such a group is written here).
 */
#include "ops/moe.h"
#include "ops/kernels.h"
#include "vec/vec.h"

#include <string.h>

/* The widest C and OC whose products take the vector level's tile
 * micro-kernel (vec/vec_tile.h, flash attention's) instead of Open BLAS:
 * at K or N of 64 (moe-tiny's experts) Open BLAS's packing of both
 * operands at every call is a large share of the product, and the
 * micro-kernel reads them as they lie. Wider products stay on Open BLAS,
 * at 0.9 of sgemm or more there (bench_moe_gemm). */
#define NARROW 128

/* Whether g's products take the micro-kernel: the level has one (not
 * generic) and the expert is narrow. */
static bool on_tile(const mt_moe_gemm *g) {
    return mt__vec()->gemm_tile && g->C <= NARROW && g->OC <= NARROW;
}

/* C (M,N) ldc = op(A) · B (K,N) ldb + beta · C: the micro-kernel where
 * on_tile, else Open BLAS. The micro-kernel sums each entry of C over K in
 * one order whatever M and the row's place (its chunks of K depend on N
 * and K alone), so a row's result does not depend on the tile it falls in. */
static void product(const mt_moe_gemm *g, bool ta, int64_t M, int64_t N, int64_t K,
                    const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                    float *C, int64_t ldc) {
    if (on_tile(g)) mt__vec()->gemm_tile(ta, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    else mt_kernel_gemm(ta, false, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

/* The tiles of n of `tile` (0 for n = 0). */
static int64_t tiles_of(int64_t n, int64_t tile) { return (n + tile - 1) / tile; }

/* The tiles of expert e: of its rows, or of the weight gradient's C. */
static int64_t expert_tiles(const mt_moe_gemm *g, int64_t e) {
    return g->part == MT_MOE_GEMM_DW ? tiles_of(g->C, MT_MOE_TILE_COLS)
                                     : tiles_of(g->sizes[e], MT_MOE_TILE_ROWS);
}

int64_t mt_moe_gemm_tiles(const mt_moe_gemm *g) {
    int64_t n = 0;
    for (int64_t e = 0; e < g->el; e++) n += expert_tiles(g, e);
    return n;
}

/* Tile i of expert e, whose rows start at r0. */
static void run_tile(const mt_moe_gemm *g, int64_t e, int64_t r0, int64_t i) {
    const int64_t C = g->C, OC = g->OC, n = g->sizes[e];
    const float *w = g->w + e * C * OC;
    const float beta = g->acc ? 1.0f : 0.0f;
    if (g->part == MT_MOE_GEMM_DW) {
        /* dw_e[c0:c1] (c,OC) (+)= x_e[:, c0:c1]ᵀ (c,n) · dy_e (n,OC) */
        const int64_t c0 = i * MT_MOE_TILE_COLS;
        const int64_t c = C - c0 < MT_MOE_TILE_COLS ? C - c0 : MT_MOE_TILE_COLS;
        float *dw = g->out + e * C * OC + c0 * OC;
        if (n == 0) {
            if (!g->acc) memset(dw, 0, (size_t)(c * OC) * sizeof *dw);
            return;
        }
        product(g, true, c, OC, n, g->x + r0 * C + c0, C, g->dy + r0 * OC, OC, beta, dw, OC);
        return;
    }
    const int64_t t0 = r0 + i * MT_MOE_TILE_ROWS;
    const int64_t rows = r0 + n - t0 < MT_MOE_TILE_ROWS ? r0 + n - t0 : MT_MOE_TILE_ROWS;
    if (g->part == MT_MOE_GEMM_Y) {   /* y_e (rows,OC) (+)= x_e (rows,C) · w_e (C,OC) */
        product(g, false, rows, OC, C, g->x + t0 * C, C, w, OC, beta, g->out + t0 * OC, OC);
    } else if (on_tile(g)) {
        /* dx_e (rows,C) (+)= dy_e (rows,OC) · w_eᵀ (OC,C): the micro-kernel
           reads B by rows, so w_eᵀ is made once a tile (OC·C floats) */
        float wt[NARROW * NARROW];   /* (OC,C) */
        for (int64_t o = 0; o < OC; o++)
            for (int64_t c = 0; c < C; c++) wt[o * C + c] = w[c * OC + o];
        product(g, false, rows, C, OC, g->dy + t0 * OC, OC, wt, C, beta, g->out + t0 * C, C);
    } else {
        mt_kernel_gemm(false, true, rows, C, OC, 1.0f, g->dy + t0 * OC, OC, w, OC, beta,
                       g->out + t0 * C, C);
    }
}

void mt_moe_gemm_run(const mt_moe_gemm *g, int64_t i0, int64_t i1) {
    int64_t first = 0, r0 = 0;   /* expert e's first tile and first row */
    for (int64_t e = 0; e < g->el && first < i1; e++) {
        const int64_t n = expert_tiles(g, e);
        for (int64_t i = i0 > first ? i0 - first : 0; i < n && first + i < i1; i++)
            run_tile(g, e, r0, i);
        first += n;
        r0 += g->sizes[e];
    }
}

void mt_moe_gemm_fwd(float *y, const float *x, const float *w, const int32_t *sizes,
                     int64_t el, int64_t C, int64_t OC, bool acc) {
    const mt_moe_gemm g = {.part = MT_MOE_GEMM_Y, .out = y, .x = x, .w = w, .sizes = sizes,
                           .el = el, .C = C, .OC = OC, .acc = acc};
    mt_moe_gemm_run(&g, 0, mt_moe_gemm_tiles(&g));
}

void mt_moe_gemm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                     const int32_t *sizes, int64_t el, int64_t C, int64_t OC, bool acc) {
    const mt_moe_gemm gx = {.part = MT_MOE_GEMM_DX, .out = dx, .dy = dy, .w = w,
                            .sizes = sizes, .el = el, .C = C, .OC = OC, .acc = acc};
    const mt_moe_gemm gw = {.part = MT_MOE_GEMM_DW, .out = dw, .dy = dy, .x = x,
                            .sizes = sizes, .el = el, .C = C, .OC = OC, .acc = acc};
    if (dx) mt_moe_gemm_run(&gx, 0, mt_moe_gemm_tiles(&gx));
    if (dw) mt_moe_gemm_run(&gw, 0, mt_moe_gemm_tiles(&gw));
}
