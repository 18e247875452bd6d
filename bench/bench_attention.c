/*
 * bench_attention.c — flash attention (ops/attention.c) forward + backward
 * against the same run's sgemm, against the FMA roofline, and against the
 * kernel it replaced (attention_old.h), on 1 and 2 threads (issue 41's
 * attention benchmark).
 *
 *   bench_attention [--quick] [--cpu] [T ...]   (default: 512 1024 2048 4096 8192 16384)
 *
 * --cpu times every kernel and sgemm in the calling thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID) and runs one thread only: on a shared machine
 * the wall clock counts the time the run was preempted, which a busy
 * neighbour makes swing by 2x within a run; CPU time leaves it out (the
 * caches and memory bandwidth the neighbours share it still counts).
 *
 * Shapes: B = 1, HS = 64 (the GPT's and LLaMA-7B's head size), causal, in
 * the two layouts the graph's ops pass: "gpt" (packed qkv (B,T,3C), NH = KV
 * = 4, C = 256, out (B,T,C)) and "llama" (q (B,T,NH·HS), k and v
 * (B,T,KV·HS) with NH = 4 query heads on KV = 2 kv heads: grouped-query).
 * Two threads run the kernels as the graph does (ops/op_table.c): the pool
 * splits the forward's (batch, head) pairs and the backward's (batch, kv
 * head) groups, the tile micro-kernel (or, at generic, Open BLAS)
 * single-threaded inside; the reference is then Open BLAS's own 2-thread
 * sgemm.
 *
 * FLOP convention (model FLOPs, as op_cost.c): a causal forward does 4·HS
 * per (query, key) pair with key <= query (q·kᵀ and p·v), the backward 8·HS
 * (dv, dp, dq, dk); pairs = B·NH·T(T+1)/2, so forward + backward =
 * 6·B·NH·HS·T(T+1). Flash's backward also recomputes the scores (2·HS a
 * pair, 7/6 of the model count executed), and the softmax's exp and sums
 * are not counted. The floor is FLOPs / the FMA peak (mt_machine_probe's
 * nominal one, cores x FMA units x lanes x 2 x GHz, when it knows the
 * clock: a peak measured on a shared machine reads low; else the measured
 * one; 1 thread or 2): the memory roof, triad bandwidth times FLOPs over
 * the bytes that must move (q, k, v, out, dout read, dq, dk, dv written,
 * lse), is hundreds of times higher at these T. /roof is the rate over
 * min(peak, AI·triad); /sgemm over the same run's sgemm (1024³, run
 * around each repetition for as long as it: time_rounds), in the round
 * with the fastest attention.
 *
 * Activation memory: the bytes the op keeps from its forward for its
 * backward beyond its inputs and output: flash keeps lse (B,NH,T) floats,
 * linear in T (kept/T is constant); the old kernel kept att (B,NH,T,T).
 * (Flash's backward reads the forward's out, which the graph keeps anyway
 * as the output projection's input.) The old kernel runs on one thread up
 * to T = 4096 (its att is 4·T² floats a head).
 */
#include "attention_old.h"
#include "base/pool.h"
#include "bench_util.h"
#include "meshtrain/profile.h"
#include "vec/vec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OLD_MAX_T 4096

static float *randv(size_t n, unsigned seed) {
    float *p = malloc(n * sizeof *p);
    if (!p) { fprintf(stderr, "meshtrain: bench_attention: out of memory (%zu floats)\n", n); exit(1); }
    for (size_t i = 0; i < n; i++) p[i] = 2.0f * mt_rng_uniform(seed, 0, i) - 1.0f;
    return p;
}

/* One attention problem: operands, gradients and per-thread scratch. */
typedef struct {
    const char   *name;          /* "gpt" or "llama" */
    double      (*now)(void);    /* the clock: mt_time_now, or bench_thread_cpu_now (--cpu) */
    mt_attn_layout L;
    float *q, *k, *v;            /* views into the operands (gpt: one packed qkv) */
    float *dout, *out, *lse;     /* (B,T,NH·HS), (B,T,NH·HS), (B,NH,T) */
    mt_attn_grads g;             /* dq, dk, dv views */
    float *bufs[6];              /* what to free */
    float *scratch[2];           /* mt_kernel_attention_scratch(T, HS) floats a thread */
} problem;

static void problem_init(problem *p, bool gpt, int64_t T) {
    const int64_t B = 1, NH = 4, KV = gpt ? 4 : 2, HS = 64, C = NH * HS, Ck = KV * HS;
    memset(p, 0, sizeof *p);
    p->name = gpt ? "gpt" : "llama";
    p->L = (mt_attn_layout){.B = B, .T = T, .NH = NH, .KV = KV, .HS = HS, .G = NH / KV,
                            .ldq = gpt ? 3 * C : C, .ldk = gpt ? 3 * C : Ck,
                            .ldv = gpt ? 3 * C : Ck, .ldo = C};
    const size_t nq = (size_t)(B * T * C), nk = (size_t)(B * T * Ck);
    float *in = randv(gpt ? 3 * nq : nq + 2 * nk, 4);
    float *din = malloc((gpt ? 3 * nq : nq + 2 * nk) * sizeof *din);
    p->q = in;
    p->k = gpt ? in + C : in + nq;
    p->v = gpt ? in + 2 * C : in + nq + nk;
    p->g = (mt_attn_grads){din, gpt ? din + C : din + nq, gpt ? din + 2 * C : din + nq + nk,
                           false, false};
    p->dout = randv(nq, 7);
    p->out = malloc(nq * sizeof *p->out);
    p->lse = malloc((size_t)(B * NH * T) * sizeof *p->lse);
    for (int w = 0; w < 2; w++)
        p->scratch[w] = malloc(mt_kernel_attention_scratch(T, HS) * sizeof(float));
    float *all[6] = {in, din, p->dout, p->out, p->lse, NULL};
    memcpy(p->bufs, all, sizeof all);
    if (!din || !p->out || !p->lse || !p->scratch[0] || !p->scratch[1]) {
        fprintf(stderr, "meshtrain: bench_attention: out of memory at T=%lld\n", (long long)T);
        exit(1);
    }
}

static void problem_free(problem *p) {
    for (int i = 0; i < 6; i++) free(p->bufs[i]);
    free(p->scratch[0]);
    free(p->scratch[1]);
}

static void range_fwd(void *ctx, int64_t b0, int64_t b1, int w) {
    problem *p = ctx;
    mt_kernel_attention_fwd(p->out, p->lse, p->q, p->k, p->v, &p->L, p->scratch[w], b0, b1);
}

static void range_bwd(void *ctx, int64_t g0, int64_t g1, int w) {
    problem *p = ctx;
    mt_kernel_attention_bwd(&p->g, p->dout, p->q, p->k, p->v, p->out, p->lse, &p->L,
                            p->scratch[w], g0, g1);
}

/* The sgemm reference of one round: Open BLAS sgemms, back to back, for at
 * least `seconds` (one at least): their count and time. */
typedef struct { double n, sec; } sgemm_window;

static sgemm_window sgemm_for(bench_sgemm *sg, int threads, double seconds, double (*now)(void)) {
    sgemm_window w = {0, 0};
    do {
        w.sec += bench_sgemm_seconds_on(sg, threads, now);
        w.n++;
    } while (w.sec < seconds);
    return w;
}

/* One forward + backward of an attention kernel: its two times. */
typedef void (*attn_run)(problem *p, void *ctx, double *fwd, double *bwd);

/* The round with the fastest forward + backward among `reps`, and the sgemm
 * rate of that round. On a shared machine the load changes from second to
 * second, so each round's reference runs around its attention, half before
 * and half after, for as long as the attention ran (the first half as long
 * as the previous round's): both see the same load, which a short reference
 * timed apart would not. */
typedef struct { double fwd, bwd, sgemm_gflops; } timing;

static timing time_rounds(problem *p, attn_run run, void *ctx, bench_sgemm *sg, int threads,
                          int reps) {
    timing best = {1e30, 1e30, 0};
    double prev = 0;
    for (int r = 0; r < reps; r++) {
        sgemm_window w1 = sgemm_for(sg, threads, prev / 2, p->now);
        double f, b;
        run(p, ctx, &f, &b);
        sgemm_window w2 = sgemm_for(sg, threads, (f + b) / 2, p->now);
        prev = f + b;
        if (f + b < best.fwd + best.bwd) {
            best.fwd = f;
            best.bwd = b;
            best.sgemm_gflops = 2.0 * 1024.0 * 1024.0 * 1024.0 * (w1.n + w2.n) /
                                (w1.sec + w2.sec) * 1e-9;
        }
    }
    return best;
}

static void run_flash(problem *p, void *ctx, double *fwd, double *bwd) {
    mt_pool *pool = ctx;
    double t0 = p->now();
    mt_pool_run(pool, p->L.B * p->L.NH, 1, range_fwd, p);
    double t1 = p->now();
    mt_pool_run(pool, p->L.B * p->L.KV, 1, range_bwd, p);
    *fwd = t1 - t0;
    *bwd = p->now() - t1;
}

/* The old kernel's (B,NH,T,T) probabilities and (T,T) scratch. */
typedef struct { float *att, *scr; } old_bufs;

static void run_old(problem *p, void *ctx, double *fwd, double *bwd) {
    old_bufs *o = ctx;
    const int64_t BNH = p->L.B * p->L.NH;
    double t0 = p->now();
    old_attention_fwd(p->out, o->att, p->q, p->k, p->v, &p->L, 0, BNH);
    double t1 = p->now();
    old_attention_bwd(&p->g, p->dout, p->q, p->k, p->v, o->att, &p->L, o->scr, 0,
                      p->L.B * p->L.KV);
    *fwd = t1 - t0;
    *bwd = p->now() - t1;
}

/* The old kernel on one thread; false when its (T,T) buffers do not fit. */
static bool time_old(problem *p, bench_sgemm *sg, int reps, timing *t) {
    const int64_t T = p->L.T, BNH = p->L.B * p->L.NH;
    old_bufs o = {malloc((size_t)(BNH * T * T) * sizeof(float)), malloc((size_t)(T * T) * sizeof(float))};
    bool ok = o.att && o.scr;
    if (ok) *t = time_rounds(p, run_old, &o, sg, 1, reps);
    free(o.att);
    free(o.scr);
    return ok;
}

/* The ceiling the products set: the seven Open BLAS products one (64-row
 * query tile, 128-key tile) pair costs in flash's forward (s = q·kᵀ, o +=
 * p·v) and backward (s again, dv += pᵀ·dO, dp = dO·vᵀ, dq += ds·k, dk +=
 * dsᵀ·q), HS = 64, on strided views as the kernel passes them, timed alone
 * on one thread: their GFLOP/s over the same run's sgemm (best of 5 each).
 * Flash's model rate can reach at most 6/7 of it (the recomputed scores). */
static double tile_products_frac(bench_sgemm *sg, double (*now)(void)) {
    enum { M = 64, N = 128, K = 64, LD = 256, IT = 400 };
    float *a = randv((size_t)N * LD, 8), *b = randv((size_t)N * LD, 9);
    float *p = randv((size_t)M * N, 10), *c = randv((size_t)N * LD, 11);
    double best = 1e30, best_sg = 1e30;
    for (int r = 0; r < 5; r++) {
        double s = bench_sgemm_seconds_on(sg, 1, now), t0 = now();
        for (int i = 0; i < IT; i++) {
            mt_kernel_gemm(false, true, M, N, K, 1.0f, a, LD, b, LD, 0.0f, p, N);
            mt_kernel_gemm(false, false, M, K, N, 1.0f, p, N, b, LD, 1.0f, c, LD);
            mt_kernel_gemm(false, true, M, N, K, 1.0f, a, LD, b, LD, 0.0f, p, N);
            mt_kernel_gemm(true, false, N, K, M, 1.0f, p, N, a, LD, 1.0f, c, LD);
            mt_kernel_gemm(false, true, M, N, K, 1.0f, a, LD, b, LD, 0.0f, p, N);
            mt_kernel_gemm(false, false, M, K, N, 1.0f, p, N, b, LD, 1.0f, c, LD);
            mt_kernel_gemm(true, false, N, K, M, 1.0f, p, N, a, LD, 1.0f, c, LD);
        }
        double t = now() - t0;
        best = t < best ? t : best;
        best_sg = s < best_sg ? s : best_sg;
    }
    free(a); free(b); free(p); free(c);
    const double rate = 7.0 * 2.0 * M * N * K * IT / best;
    return rate / (2.0 * 1024.0 * 1024.0 * 1024.0 / best_sg);
}

/* The same seven products as flash runs them now (ops/attention.c: the
 * scores transposed, (128 keys, 64 query rows), B operands read as their
 * rows lie), through the level's tile micro-kernel (vec/vec_tile.h), timed
 * alone on one thread against the same run's sgemm (best of 5 each); 0
 * when the level has none (generic: Open BLAS). */
static double micro_products_frac(bench_sgemm *sg, double (*now)(void)) {
    enum { M = 64, N = 128, K = 64, LD = 256, IT = 400, NB = 32 };
    const mt_vec_ops *vec = mt__vec();
    if (!vec->gemm_tile) return 0.0;
    /* k and v tiles cycle through NB of them (4096 rows), as flash's key
     * loop streams them from L2 and L3 */
    float *a = randv((size_t)N * LD, 8), *bb = randv((size_t)NB * N * LD, 9);
    float *p = randv((size_t)M * N, 10), *c = randv((size_t)N * LD, 11);
    float *t = randv((size_t)K * M, 12);
    double best = 1e30, best_sg = 1e30;
    for (int r = 0; r < 5; r++) {
        double s = bench_sgemm_seconds_on(sg, 1, now), t0 = now();
        for (int i = 0; i < IT; i++) {
            const float *b = bb + (size_t)(i % NB) * N * LD;
            vec->gemm_tile(false, N, M, K, 1.0f, b, LD, t, M, 0.0f, p, M);   /* sᵀ = k·qᵀ */
            vec->gemm_tile(true, M, K, N, 1.0f, p, M, b, LD, 1.0f, c, LD);   /* o += p·v */
            vec->gemm_tile(false, N, M, K, 1.0f, b, LD, t, M, 0.0f, p, M);   /* sᵀ again */
            vec->gemm_tile(false, N, K, M, 1.0f, p, M, a, LD, 1.0f, c, LD);  /* dv += pᵀ·dO */
            vec->gemm_tile(false, N, M, K, 1.0f, b, LD, t, M, 0.0f, p, M);   /* dpᵀ = v·dOᵀ */
            vec->gemm_tile(true, M, K, N, 1.0f, p, M, b, LD, 1.0f, c, LD);   /* dq += ds·k */
            vec->gemm_tile(false, N, K, M, 1.0f, p, M, a, LD, 1.0f, c, LD);  /* dk += dsᵀ·q */
        }
        double tt = now() - t0;
        best = tt < best ? tt : best;
        best_sg = s < best_sg ? s : best_sg;
    }
    free(a); free(bb); free(p); free(c); free(t);
    const double rate = 7.0 * 2.0 * M * N * K * IT / best;
    return rate / (2.0 * 1024.0 * 1024.0 * 1024.0 / best_sg);
}

/* Model FLOPs of forward + backward (the convention above). */
static double attn_flops(const mt_attn_layout *L) {
    return 6.0 * (double)(L->B * L->NH * L->HS) * (double)L->T * (double)(L->T + 1);
}

/* Bytes that must move at least once: q, out, dout, dq (NH heads), k, v,
 * dk, dv (KV heads), and lse written and read. */
static double attn_bytes(const mt_attn_layout *L) {
    const double rows = (double)(L->B * L->T);
    return 4.0 * (rows * (double)(L->HS) * (4.0 * (double)L->NH + 4.0 * (double)L->KV) +
                  2.0 * rows * (double)L->NH);
}

static void print_row(int threads, const problem *p, const char *kernel, const timing *t,
                      double peak, double triad, size_t kept) {
    const double fl = attn_flops(&p->L), rate = fl / (t->fwd + t->bwd) * 1e-9;
    const double sg = t->sgemm_gflops;
    const double ai = fl / attn_bytes(&p->L), roof = ai * triad < peak ? ai * triad : peak;
    printf("%7d %-6s %-6s %6lld %9.2f %9.2f %8.1f %8.1f %7.2f %6.2f %12zu %7.1f\n", threads,
           p->name, kernel, (long long)p->L.T, t->fwd * 1e3, t->bwd * 1e3, rate, sg, rate / sg,
           rate / roof, kept, (double)kept / (double)p->L.T);
}

int main(int argc, char **argv) {
    int64_t Ts[16] = {512, 1024, 2048, 4096, 8192, 16384};
    int nT = 6, a = 1;
    bool quick = false, cpu = false;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (strcmp(argv[a], "--quick") == 0) quick = true;
        else if (strcmp(argv[a], "--cpu") == 0) cpu = true;
        else {
            fprintf(stderr, "meshtrain: bench_attention: unknown option '%s'; usage: "
                    "bench_attention [--quick] [--cpu] [T ...]\n", argv[a]);
            return 2;
        }
    }
    if (a < argc) nT = 0;
    for (; a < argc; a++) {
        char *end;
        long long v = strtoll(argv[a], &end, 10);
        if (*end || v < 1 || nT == 16) {
            fprintf(stderr, "meshtrain: bench_attention: T '%s' must be a positive integer "
                    "(at most 16 of them); usage: bench_attention [--quick] [--cpu] [T ...]\n", argv[a]);
            return 2;
        }
        Ts[nT++] = v;
    }
    mt_machine m;
    memset(&m, 0, sizeof m);
    char note[256] = "";
    const char *ghz_src = NULL;
    if (mt_machine_probe(true, &m, note, sizeof note, &ghz_src) != MT_OK) {
        fprintf(stderr, "meshtrain: bench_attention: the machine probe failed: %s\n", mt_errmsg());
        return 1;
    }
    bench_sgemm sg;
    if (bench_sgemm_init(&sg, 1024) != 0) {
        fprintf(stderr, "meshtrain: bench_attention: out of memory for the sgemm reference\n");
        return 1;
    }
    printf("attention forward+backward, causal, B=1 HS=64; gpt: NH=KV=4 packed qkv; "
           "llama: NH=4 KV=2 (GQA)\n");
    /* the nominal peak when known: the measured one reads low on a shared machine */
    const bool nominal = isfinite(m.nominal_gflops) && m.cores > 0;
    const double peak1 = nominal ? m.nominal_gflops / m.cores : m.fma_gflops_1;
    const double peak2 = nominal ? m.nominal_gflops * (m.cores < 2 ? 1 : 2) / m.cores
                                 : m.fma_gflops_all;
    printf("FLOPs = 6*B*NH*HS*T*(T+1) (model; flash executes 7/6 of it); floor = FLOPs / peak, "
           "%s %.0f GFLOP/s on 1 thread, %.0f on 2 (FMA chains measured now: %.0f, %.0f; "
           "triad %.1f / %.1f GB/s); %s\n", nominal ? "nominal" : "measured", peak1, peak2,
           m.fma_gflops_1, m.fma_gflops_all, m.triad_gbs_1, m.triad_gbs_all, m.cpu);
    mt_set_num_threads(1);
    double (*now)(void) = cpu ? bench_thread_cpu_now : mt_time_now;
    const double tf = tile_products_frac(&sg, now);
    printf("the tile products alone (7 a tile pair, K = HS = 64), one thread: %.2f of sgemm's "
           "rate; flash's ceiling %.2f of sgemm (6/7 of it)\n", tf, tf * 6.0 / 7.0);
    const double mf = micro_products_frac(&sg, now);
    printf("the same through the level's tile micro-kernel (scores transposed, what flash runs): "
           "%.2f of sgemm's rate; flash's ceiling %.2f\n", mf, mf * 6.0 / 7.0);
    if (cpu) printf("--cpu: one thread, kernels and sgemm in the thread's CPU time\n");
    printf("%7s %-6s %-6s %6s %9s %9s %8s %8s %7s %6s %12s %7s\n", "threads", "layout", "kernel",
           "T", "fwd ms", "bwd ms", "GFLOP/s", "sgemm", "/sgemm", "/roof", "kept bytes",
           "kept/T");
    for (int threads = 1; threads <= (cpu ? 1 : 2); threads++) {
        mt_set_num_threads(threads);   /* Open BLAS on one thread inside the pool */
        mt_pool *pool = mt_pool_create(threads);
        if (!pool) { fprintf(stderr, "meshtrain: bench_attention: cannot start %d threads\n", threads); return 1; }
        const double peak = threads == 1 ? peak1 : peak2;
        const double triad = threads == 1 ? m.triad_gbs_1 : m.triad_gbs_all;
        for (int i = 0; i < nT; i++) {
            const int64_t T = Ts[i];
            /* about 5 s of attention a row at most on one thread */
            const int reps = quick ? 1 : T <= 4096 ? 3 : T <= 8192 ? 2 : 1;
            for (int gpt = 1; gpt >= 0; gpt--) {
                problem p;
                problem_init(&p, gpt, T);
                p.now = now;
                timing t = time_rounds(&p, run_flash, pool, &sg, threads, reps);
                print_row(threads, &p, "flash", &t, peak, triad,
                          (size_t)(p.L.B * p.L.NH * T) * sizeof(float));
                if (threads == 1 && T <= OLD_MAX_T && !quick) {
                    if (time_old(&p, &sg, reps, &t))
                        print_row(threads, &p, "old", &t, peak, triad,
                                  (size_t)(p.L.B * p.L.NH * T * T) * sizeof(float));
                    else
                        printf("%7d %-6s %-6s %6lld (no memory for its (T,T) buffers)\n", threads,
                               p.name, "old", (long long)T);
                }
                problem_free(&p);
                fflush(stdout);
            }
        }
        mt_pool_free(pool);
    }
    bench_sgemm_free(&sg);
    return 0;
}
