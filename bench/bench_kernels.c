/*
 * bench_kernels.c — the vector kernels at every kernel level this CPU runs,
 * one thread, against each kernel's floor.
 *
 *   bench_kernels [MACHINE_JSON]      (written by `meshtrain bench machine`)
 *
 * For each kernel and level: the best of REPS runs, GB/s and GFLOP/s, and
 * the achieved fraction of the kernel's bound, the larger of
 *   bytes / memory bandwidth   (the machine file's one-thread STREAM triad)
 *   flops / FMA peak           (the machine file's one-thread peak at that
 *                               level: 2 flops a lane a fused multiply-add)
 * and the speed-up over generic. Bytes are the compulsory traffic: every
 * array the kernel streams read once and written once (a write counted
 * once, as STREAM counts it); rows reused from cache are not counted.
 * Flops count SLEEF's exp as EXP_FLOPS operations (a range reduction and a
 * degree-6 polynomial) and GELU's tanh, 1 - 2/(exp(2u) + 1), as TANH_FLOPS:
 * estimates, stated so the fraction can be read.
 * Without a machine file the fractions print as "-".
 *
 * The floors, per element (E = EXP_FLOPS, H = TANH_FLOPS):
 *   ce_fwd     logits (rows, V), a row (200 KB at V = 50257) fits in L2, so
 *              its second pass (Σ exp) reads cache: 4 B, E + 3 flops
 *   ce_bwd     read logits, write dlogits: 8 B, E + 2 flops
 *   softmax    attention rows of T = 1024, in cache: compute, E + 4 flops
 *   gelu_fwd   read x, write out: 8 B, H + 9 flops
 *   gelu_bwd   read x, dout, write dx: 12 B, H + 17 flops
 *   ln_fwd     read x, write out (w, b cached): 8 B, 8 flops
 *   ln_bwd     read dout, x, write dx: 12 B, 12 flops
 *   adamw      read p, g, m, v, write p, m, v: 28 B, 16 flops
 *   reduce     d += s: read d, s, write d: 12 B, 1 flop
 * A kernel whose flops do not map onto FMAs (most here: separate multiplies
 * and adds, divisions, a square root) cannot reach the FMA peak; the memory
 * bound is the one that should be near.
 */
#include "meshtrain.h"
#include "vec/vec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPS       7
#define EXP_FLOPS  20.0
#define TANH_FLOPS 23.0   /* 1 - 2/(exp(2u) + 1): an exp, an add, a division, a subtraction */

typedef struct {
    float *a, *b, *c, *d, *e;   /* (n) each */
    int32_t *tg;                /* (rows) */
    int64_t n, rows, V, C, T;
} bufs;

typedef struct {
    const char *name;
    double      bytes_per, flops_per;   /* per element */
    void      (*run)(const mt_vec_ops *v, bufs *b);
    int64_t   (*elems)(const bufs *b);
} kernel;

static int64_t elems_ce(const bufs *b) { return b->rows * b->V; }
static int64_t elems_n(const bufs *b) { return b->n; }
static int64_t elems_ln(const bufs *b) { return b->rows * b->C; }
static int64_t elems_sm(const bufs *b) { return (b->n / b->T) * b->T; }

static void run_ce_fwd(const mt_vec_ops *v, bufs *b) {
    for (int64_t r = 0; r < b->rows; r++) {
        const float *x = b->a + r * b->V;
        float m = v->max(x, b->V);
        b->c[r] = m + logf(v->sum_exp(x, b->V, m));
    }
}
static void run_ce_bwd(const mt_vec_ops *v, bufs *b) {
    for (int64_t r = 0; r < b->rows; r++)
        v->scale_exp(b->b + r * b->V, b->a + r * b->V, b->V, b->c[r], 1.0f / (float)b->rows, false);
}
static void run_softmax(const mt_vec_ops *v, bufs *b) {
    for (int64_t r = 0; r + b->T <= b->n; r += b->T) {
        memcpy(b->b + r, b->a + r, (size_t)b->T * sizeof(float));
        v->softmax(b->b + r, b->T);
    }
}
static void run_gelu_fwd(const mt_vec_ops *v, bufs *b) { v->gelu_fwd(b->b, b->a, b->n); }
static void run_gelu_bwd(const mt_vec_ops *v, bufs *b) { v->gelu_bwd(b->c, b->a, b->b, b->n, false); }
static void run_ln_fwd(const mt_vec_ops *v, bufs *b) {
    v->layernorm_fwd(b->b, b->d, b->e, b->a, b->c, b->c + b->C, b->rows, b->C);
}
static void run_ln_bwd(const mt_vec_ops *v, bufs *b) {
    v->layernorm_bwd_input(b->b, b->a, b->a, b->c, b->d, b->e, b->rows, b->C, false);
}
static void run_adamw(const mt_vec_ops *v, bufs *b) {
    v->adamw(b->a, b->b, b->c, b->d, b->n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 0.1f, 0.05f);
}
static void run_reduce(const mt_vec_ops *v, bufs *b) { v->reduce_into[MT_VEC_SUM](b->c, b->a, (size_t)b->n); }

static const kernel KERNELS[] = {
    {"ce_fwd",   4, EXP_FLOPS + 3, run_ce_fwd, elems_ce},
    {"ce_bwd",   8, EXP_FLOPS + 2, run_ce_bwd, elems_ce},
    {"softmax",  0, EXP_FLOPS + 4, run_softmax, elems_sm},
    {"gelu_fwd", 8, TANH_FLOPS + 9, run_gelu_fwd, elems_n},
    {"gelu_bwd", 12, TANH_FLOPS + 17, run_gelu_bwd, elems_n},
    {"ln_fwd",   8, 8, run_ln_fwd, elems_ln},
    {"ln_bwd",   12, 12, run_ln_bwd, elems_ln},
    {"adamw",    28, 16, run_adamw, elems_n},
    {"reduce",   12, 1, run_reduce, elems_n},
};
enum { N_KERNELS = sizeof KERNELS / sizeof KERNELS[0] };

static double best_seconds(const kernel *k, const mt_vec_ops *v, bufs *b) {
    k->run(v, b);   /* warm: pages, caches */
    double best = INFINITY;
    for (int r = 0; r < REPS; r++) {
        double t0 = mt_time_now();
        k->run(v, b);
        double t = mt_time_now() - t0;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    mt_machine mach;
    bool have_machine = false;
    if (argc > 1) {
        if (mt_machine_read(argv[1], &mach) != MT_OK) {
            fprintf(stderr, "bench_kernels: %s\n", mt_errmsg());
            return 1;
        }
        have_machine = true;
    }
    /* 64 MiB arrays: past the last-level cache of every CPU seen here (105
     * MiB on the Xeon, split over the five arrays) */
    bufs b = {.n = 1 << 24, .V = 50257, .C = 768, .T = 1024};
    const size_t n = (size_t)b.n;
    float **arrs[] = {&b.a, &b.b, &b.c, &b.d, &b.e};
    for (size_t i = 0; i < 5; i++) {
        *arrs[i] = malloc(n * sizeof(float));
        if (!*arrs[i]) { fprintf(stderr, "bench_kernels: out of memory\n"); return 1; }
        uint32_t x = 2463534242u + (uint32_t)i;   /* xorshift: cheap, and any values do */
        for (size_t j = 0; j < n; j++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            (*arrs[i])[j] = (float)x * (2.0f / 4294967296.0f) - 1.0f;
        }
    }
    for (size_t j = 0; j < n; j++) b.d[j] = fabsf(b.d[j]);   /* AdamW's v, layernorm's rstd >= 0 */
    const int64_t ln_rows = b.n / b.C;
    printf("kernel levels: best %s, in use %s; one thread; bound = max(bytes / triad, "
           "flops / FMA peak at the level)%s\n", mt_cpu_isa_name(mt_cpu_isa_best()),
           mt_cpu_isa_name(mt_get_cpu_isa()), have_machine ? "" : " (no machine file: no bounds)");
    if (have_machine) printf("triad (1 thread) %.1f GB/s\n", mach.triad_gbs_1);
    printf("%-9s %-8s %9s %8s %9s %6s %9s %8s\n", "kernel", "level", "ms", "GB/s", "GFLOP/s",
           "bound", "of bound", "vs gen.");
    for (int k = 0; k < N_KERNELS; k++) {
        const kernel *kn = &KERNELS[k];
        double t_generic = NAN;
        for (int isa = MT_ISA_GENERIC; isa <= MT_ISA_AVX512; isa++) {
            const mt_vec_ops *v = mt__vec_at((mt_cpu_isa)isa);
            if (!v) continue;
            /* cross-entropy: 256 rows of V = 50257 logits (51 MB) */
            b.rows = strncmp(kn->name, "ln_", 3) == 0 ? ln_rows : 256;
            double t = best_seconds(kn, v, &b);
            if (isa == MT_ISA_GENERIC) t_generic = t;
            double el = (double)kn->elems(&b);
            double gbs = kn->bytes_per * el / t / 1e9, gfl = kn->flops_per * el / t / 1e9;
            char frac[16] = "-", bound[8] = "-";
            if (have_machine) {
                double peak = mt_machine_isa_gflops(&mach, (mt_cpu_isa)isa, false);
                double t_mem = kn->bytes_per * el / (mach.triad_gbs_1 * 1e9);
                double t_fma = peak > 0 ? kn->flops_per * el / (peak * 1e9) : 0;
                snprintf(bound, sizeof bound, "%s", t_mem >= t_fma ? "mem" : "fma");
                snprintf(frac, sizeof frac, "%.2f", (t_mem >= t_fma ? t_mem : t_fma) / t);
            }
            printf("%-9s %-8s %9.3f %8.1f %9.2f %6s %9s %7.2fx\n", kn->name,
                   mt_cpu_isa_name((mt_cpu_isa)isa), t * 1e3, gbs, gfl, bound, frac, t_generic / t);
            printf("RESULT kernel=%s isa=%s ms=%.4f gbs=%.2f gflops=%.2f bound=%s frac=%s\n",
                   kn->name, mt_cpu_isa_name((mt_cpu_isa)isa), t * 1e3, gbs, gfl, bound, frac);
        }
    }
    for (size_t i = 0; i < 5; i++) free(*arrs[i]);
    return 0;
}
