/*
 * cmd_bench_machine.c — `meshtrain bench machine`: what this machine can do,
 * measured, for the roofline (include/meshtrain/profile.h holds the file).
 * The hardware's figures (sgemm, the FMA and bf16 peaks, the triad, the CPU)
 * are the library's probe (mt_machine_probe, src/profile/probe.c); this
 * command adds the engine's own, measured through its public API, prints
 * the table and writes the file:
 *
 *  - attention: meshtrain's causal attention and its gradient on one
 *    thread, 4 heads of 64, 2048 tokens a run, at T = 64 to 1024: its cost
 *    entries' FLOPs over its time (the planner costs attention by it);
 *  - all-reduce: 2 devices on threads (and, under mpirun, the MPI ranks):
 *    8 bytes for latency, 64 MiB for nccl-tests' busbw;
 *  - oneDNN's ISA, as the bf16 products see it.
 *
 * It also holds the machine file's default path and loading, which the
 * commands that read --machine share (bench_machine.h).
 */
#include "cli/args.h"
#include "cli/bench_machine.h"
#include "cli/files.h"
#include "meshtrain.h"

#ifdef MT_HAVE_MPI
#include <mpi.h>
#endif

#ifdef MT_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


static const char MACHINE_USAGE[] =
    "usage: meshtrain bench machine [--out FILE] [--quick]\n"
    "\n"
    "Measures the figures a roofline needs: Open BLAS sgemm and a register-only FMA\n"
    "peak at every kernel level the CPU runs (generic, avx2, avx512; neon on ARM), in\n"
    "GFLOP/s, and STREAM triad bandwidth (GB/s), on 1 thread and on all cores, and the\n"
    "all-reduce latency and bus bandwidth of each transport (MPI under mpirun). Prints\n"
    "the kernel level in use (MT_CPU_ISA caps it) and oneDNN's ISA, the figures beside\n"
    "the nominal peak (cores x FMA units x SIMD width x 2 x GHz), and saves them as JSON\n"
    "for --machine FILE (default: machine.json beside the meshtrain binary).\n"
    "\n"
    "examples:\n"
    "  meshtrain bench machine\n"
    "  mpirun -np 2 meshtrain bench machine --out machine.json\n";

/* ======================================================================== */
/* The machine file's default path, and oneDNN's ISA                          */
/* ======================================================================== */

void cli_machine_default_path(char *buf, size_t n) {
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) {
        snprintf(buf, n, "machine.json");
        return;
    }
    exe[k] = '\0';
    snprintf(buf, n, "%s/machine.json", dirname(exe));
}

bool cli_machine_load(const char *path, mt_machine *out, bool *found, char *used, size_t n) {
    *found = false;
    if (path) {
        if (mt_machine_read(path, out) != MT_OK) {
            cli_error("--machine: %s", mt_errmsg());
            return false;
        }
        *found = true;
        snprintf(used, n, "%s", path);
        return true;
    }
    cli_machine_default_path(used, n);
    if (access(used, F_OK) != 0) return true;   /* none: the caller says so */
    *found = mt_machine_read(used, out) == MT_OK;
    if (!*found)   /* there but unreadable: not silently ignored */
        fprintf(stderr, "meshtrain: warning: ignoring the default machine file: %s\n",
                mt_errmsg());
    return true;
}

#ifdef MT_HAVE_DNNL
/* dnnl_cpu_isa_t's names as ONEDNN_MAX_CPU_ISA spells them (lower case) */
static const char *dnnl_isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_sse41:             return "sse41";
    case dnnl_cpu_isa_avx:               return "avx";
    case dnnl_cpu_isa_avx2:              return "avx2";
    case dnnl_cpu_isa_avx2_vnni:         return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:       return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:  return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:  return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:   return "avx512_core_amx";
    case dnnl_cpu_isa_all:               return "all";
    default:                             return NULL;
    }
}
#endif

void cli_onednn_isa(char *buf, size_t n) {
#ifdef MT_HAVE_DNNL
    /* reading oneDNN's ISA fixes it: let the library apply MT_CPU_ISA's cap
     * first (mt_bf16_native does, before its own read) */
    (void)mt_bf16_native();
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    const char *name = dnnl_isa_name(isa);
    if (name) snprintf(buf, n, "%s", name);
    else snprintf(buf, n, "isa 0x%x", (unsigned)isa);   /* a newer oneDNN's */
#else
    snprintf(buf, n, "none");
#endif
}

/* ======================================================================== */
/* Attention                                                                 */
/* ======================================================================== */

#define ATT_HEADS 4
#define ATT_HEAD_SIZE 64
#define ATT_TOKENS 2048   /* B x T of each run; --quick: half, T at least */

/* meshtrain's causal attention at sequence length T on the engine's current
 * threads: mt_attention on a (B, T, 3C) qkv, B = tokens / T (at least 1),
 * and its gradient (through a mean), `reps` runs after a warm-up; the FLOPs
 * of the attention nodes' cost entries over their profiled time, GFLOP/s,
 * into *gflops. */
static mt_status attention_gflops(int T, int tokens, int reps, double *gflops) {
    const int64_t B = T < tokens ? tokens / T : 1, C = ATT_HEADS * ATT_HEAD_SIZE;
    mt_graph *g = mt_graph_create();
    if (!g) return mt_fail(MT_ENOMEM, "bench machine: cannot create a graph");
    mt_tensor *qkv = mt_param(g, "qkv", 3, (const int64_t[]){B, T, 3 * C},
                              (mt_init){.kind = MT_INIT_NORMAL, .std = 1.0f});
    mt_tensor *loss = mt_mean(g, mt_attention(g, qkv, ATT_HEADS));
    mt_status s = mt_graph_status(g);
    if (s == MT_OK) s = mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1});
    for (int r = -1; r < reps && s == MT_OK; r++) {   /* r = -1: warm-up */
        if (r == 0) s = mt_graph_set_profiling(g, true);
        if (s == MT_OK) s = mt_graph_forward(g);
        if (s == MT_OK) s = mt_graph_backward(g);
    }
    mt_op_totals f = {0}, b = {0};
    if (s == MT_OK) s = mt_graph_profile_op(g, "attention", &f);
    if (s == MT_OK) s = mt_graph_profile_op(g, "attention_bwd", &b);
    if (s == MT_OK)
        *gflops = f.seconds + b.seconds > 0 ? (f.flops + b.flops) / (f.seconds + b.seconds) / 1e9
                                            : NAN;
    else if (mt_graph_status(g) != MT_OK)
        s = mt_fail(s, "%s", mt_graph_errmsg(g));
    mt_graph_free(g);
    return s;
}

/* Every sequence length of m->attention_gflops_1 on one thread. */
static mt_status attention_curve(bool quick, mt_machine *m) {
    const int threads = mt_get_num_threads();
    mt_set_num_threads(1);
    mt_status s = MT_OK;
    for (int i = 0; i < MT_MACHINE_N_ATTENTION && s == MT_OK; i++)
        s = attention_gflops(64 << i, quick ? ATT_TOKENS / 2 : ATT_TOKENS, quick ? 1 : 4,
                             &m->attention_gflops_1[i]);
    mt_set_num_threads(threads);
    m->attention_head_size = ATT_HEAD_SIZE;
    return s;
}


/* ======================================================================== */
/* All-reduce                                                                */
/* ======================================================================== */

typedef struct { size_t big; int lat_iters, bw_iters; mt_machine_link out; } ar_job;

static mt_status ar_device(mt_ctx *ctx, void *p) {
    ar_job *j = p;
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    if (s != MT_OK) return s;
    const int P = mt_axis_size(ctx, ax);
    const size_t n = j->big / sizeof(float);
    float *buf = calloc(n, sizeof *buf);
    if (!buf) return mt_fail(MT_ENOMEM, "bench machine: cannot allocate %zu bytes", j->big);
    /* latency: the best of 5 runs of lat_iters 8-byte all-reduces; bandwidth: the best one */
    double lat = INFINITY, bw = INFINITY;
    for (int r = 0; r < 5 && s == MT_OK; r++) {
        s = mt_barrier(ctx, ax);
        double t0 = mt_time_now();
        for (int i = 0; i < j->lat_iters && s == MT_OK; i++)
            s = mt_all_reduce(ctx, ax, buf, 2, MT_F32, MT_REDUCE_SUM);
        double dt = (mt_time_now() - t0) / j->lat_iters;
        lat = dt < lat ? dt : lat;
    }
    for (int r = -1; r < j->bw_iters && s == MT_OK; r++) {   /* r = -1: warm-up */
        double t0 = mt_time_now();
        s = mt_all_reduce(ctx, ax, buf, n, MT_F32, MT_REDUCE_SUM);
        double dt = mt_time_now() - t0;
        if (r >= 0) bw = dt < bw ? dt : bw;
    }
    free(buf);
    if (s == MT_OK && mt_ctx_device(ctx) == 0)
        j->out = (mt_machine_link){.latency_us = lat * 1e6,
                                   .busbw_gbs = (double)j->big / bw / 1e9 * 2.0 * (P - 1) / P};
    return s;
}

static mt_status allreduce(bool quick, bool mpi, mt_machine_link *out) {
    ar_job j = {.big = (size_t)(quick ? 4 : 64) << 20, .lat_iters = quick ? 200 : 2000,
                .bw_iters = quick ? 3 : 5};
    mt_launch_opts lo = {.mesh = mpi ? "d=-1" : "d=2", .devices = mpi ? 0 : 2,
                         .transport = mpi ? MT_TRANSPORT_MPI : MT_TRANSPORT_THREADS};
    mt_status s = mt_launch(&lo, ar_device, &j);
    *out = j.out;
    return s;
}

/* ======================================================================== */
/* The command                                                               */
/* ======================================================================== */

static void print_row(const char *what, double one, double all, const char *unit) {
    printf("%-34s %10.1f %10.1f  %s\n", what, one, all, unit);
}

static void print_table(const mt_machine *m, const char *ghz_src) {
    char sg[64];
    const mt_cpu_isa best = mt_cpu_isa_best(), in_use = mt_get_cpu_isa();
    printf("machine: %s, %d cores, Open BLAS kernel %s\n", m->cpu, m->cores, m->blas_core);
    if (in_use == best)
        printf("kernel level: %s (the best this CPU has)", m->isa_in_use);
    else
        printf("kernel level: %s, capped (MT_CPU_ISA=%s); this CPU's best is %s", m->isa_in_use,
               getenv("MT_CPU_ISA") ? getenv("MT_CPU_ISA") : "?", m->isa_best);
    printf("; oneDNN ISA (bf16 products): %s\n\n", m->onednn_isa);
    printf("%-34s %10s %10s\n", "figure (best of repetitions)", "1 thread", "all cores");
    snprintf(sg, sizeof sg, "sgemm %d^3 (Open BLAS)", m->sgemm_size);
    print_row(sg, m->sgemm_gflops_1, m->sgemm_gflops_all, "GFLOP/s");
    snprintf(sg, sizeof sg, "sgemm %d^3 cold, a core each", m->sgemm_cold_size);
    print_row(sg, m->sgemm_cold_gflops_1, m->sgemm_cold_gflops_all,
              "GFLOP/s  <- the engine's products");
    for (int l = (int)best; l >= 0; l--) {
        const double one = mt_machine_isa_gflops(m, (mt_cpu_isa)l, false);
        if (!isfinite(one)) continue;   /* another architecture's level */
        snprintf(sg, sizeof sg, "FMA peak, registers only (%s)", mt_cpu_isa_name((mt_cpu_isa)l));
        print_row(sg, one, mt_machine_isa_gflops(m, (mt_cpu_isa)l, true),
                  l == (int)in_use ? "GFLOP/s  <- the kernels' level" : "GFLOP/s");
    }
    if (isfinite(m->bf16_gflops_1))
        print_row("bf16 dot peak, registers (VDPBF16PS)", m->bf16_gflops_1, m->bf16_gflops_all,
                  "GFLOP/s");
    else
        printf("%-34s %21s\n", "bf16 dot peak", "none (no AVX512-BF16)");
    print_row("triad a=b+s*c, float (12 B/elem)", m->triad_gbs_1, m->triad_gbs_all, "GB/s");
    printf("%-34s", "attention, 1 thread, by T");
    for (int i = 0; i < MT_MACHINE_N_ATTENTION; i++)
        printf(" %d: %.1f", 64 << i, m->attention_gflops_1[i]);
    printf("  GFLOP/s (head size %d)\n", m->attention_head_size);
    print_row("sgemm / FMA peak", m->sgemm_gflops_1 / m->fma_gflops_1,
              m->sgemm_gflops_all / m->fma_gflops_all, "ratio");
    if (isfinite(m->bf16_gflops_1))
        print_row("bf16 dot / FMA peak", m->bf16_gflops_1 / m->fma_gflops_1,
                  m->bf16_gflops_all / m->fma_gflops_all, "ratio: bf16 products' best speed-up");
    printf("\n%-34s %10s %10s\n", "all-reduce, 2 devices", "8 B (us)", "busbw GB/s");
    printf("%-34s %10.2f %10.2f\n", "threads (64 MiB; --quick 4 MiB)", m->threads.latency_us,
           m->threads.busbw_gbs);
    if (m->has_mpi)
        printf("%-34s %10.2f %10.2f\n", "mpi (the ranks of mpirun)", m->mpi.latency_us, m->mpi.busbw_gbs);
    else
        printf("%-34s %21s\n", "mpi", "not measured (run under mpirun -np 2)");
    const int simd = mt_cpu_isa_floats(best);
    if (isfinite(m->nominal_gflops))
        printf("\nnominal: %d cores x 2 FMA units (assumed) x %d floats x 2 flops x %.2f GHz (%s) "
               "= %.1f GFLOP/s; the FMA peak reaches %.0f %% of it%s\n", m->cores, simd,
               m->nominal_ghz, ghz_src, m->nominal_gflops, 100 * m->fma_gflops_all / m->nominal_gflops,
               m->fma_gflops_all > m->nominal_gflops ? " (the cores run above that frequency)" : "");
    else
        printf("\nnominal: unknown (no frequency in cpufreq or /proc/cpuinfo)\n");
}

static int claim_out(const char *path, mt_output **claim);
static int probe_and_write(bool quick, bool mpi, const char *out_path, mt_output **claim);

int cli_bench_machine(int argc, char **argv) {
    const char *out_path = NULL;
    bool quick = false;
    const cli_opt opts[] = {
        {"out", CLI_STR, &out_path, 0, 0, 0, 0, NULL, "FILE",
         "write the figures here (default: machine.json beside the meshtrain binary)"},
        {"quick", CLI_FLAG, &quick, 0, 0, 0, 0, NULL, NULL,
         "small sizes and few repetitions (a few seconds; for tests)"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    int rc;
    if (!cli_parse_named("bench", "machine", "benchmark", MACHINE_USAGE, opts, argc, argv, &rc))
        return rc;
    char def_path[4096];
    cli_machine_default_path(def_path, sizeof def_path);
    if (!out_path) out_path = def_path;

    /* The output is claimed before the probe (which takes a minute): a
     * directory, FIFO or device, a missing or read-only directory, or
     * another probe writing the same file fails now. Under mpirun every
     * rank checks it by stat only (they would all claim one name), and
     * rank 0, the one that writes, claims it once it knows its rank. */
    const bool mpi = mt_transport_resolve(MT_TRANSPORT_AUTO) == MT_TRANSPORT_MPI;
    mt_output *claim = NULL;
    if (mpi) {
        const cli_file files[] = {
            {.flag = "out", .path = out_path, .role = CLI_FILE_LOG, .stat_only = true}};
        if ((rc = cli_check_files(files, 1)) != CLI_EXIT_OK) return rc;
    } else if ((rc = claim_out(out_path, &claim)) != CLI_EXIT_OK) {
        return rc;
    }
    rc = probe_and_write(quick, mpi, out_path, &claim);
    mt_output_close(claim);
    return rc;
}

/* Claims the machine file `path` (*claim); the exit code of a failure,
 * after its message. */
static int claim_out(const char *path, mt_output **claim) {
    mt_status s = mt_output_claim(path, "machine file", claim);
    if (s == MT_OK) return CLI_EXIT_OK;
    cli_error("--out: %s", mt_errmsg());
    return cli_exit_of(s);
}

/* The probe, its table, and the machine file written to out_path, whose
 * claim *claim holds (NULL under mpirun until rank 0 claims it here); the
 * caller closes it. */
static int probe_and_write(bool quick, bool mpi, const char *out_path, mt_output **claim) {
    int rc;
    /* MPI first, on every rank, so that the other ranks do not share the
     * cores while rank 0 measures them; then only rank 0 goes on. */
    mt_machine m = {.triad_bytes_per_element = 12, .nominal_gflops = NAN, .nominal_ghz = NAN};
    if (mpi) {
#ifdef MT_HAVE_MPI
        if (allreduce(quick, true, &m.mpi) != MT_OK) {
            cli_error("bench machine: the MPI all-reduce failed: %s", mt_errmsg());
            return CLI_EXIT_FAIL;
        }
        int rank = 0, size = 1;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        if (rank != 0) return CLI_EXIT_OK;
        m.has_mpi = size > 1;
#endif
        if ((rc = claim_out(out_path, claim)) != CLI_EXIT_OK) return rc;
    }

    /* the hardware (the library's probe), then the engine's figures */
    char note[512];
    const char *ghz_src = "unknown";
    mt_status ps = mt_machine_probe(quick, &m, note, sizeof note, &ghz_src);
    if (ps != MT_OK) {
        cli_error("bench machine: %s", mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    if (note[0]) printf("note: %s\n", note);
    cli_onednn_isa(m.onednn_isa, sizeof m.onednn_isa);
    if (attention_curve(quick, &m) != MT_OK) {
        cli_error("bench machine: the attention probe failed: %s", mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    if (allreduce(quick, false, &m.threads) != MT_OK) {
        cli_error("bench machine: the threads all-reduce failed: %s", mt_errmsg());
        return CLI_EXIT_FAIL;
    }
    time_t now = time(NULL);
    strftime(m.measured_at, sizeof m.measured_at, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));

    print_table(&m, ghz_src);
    /* through the claim that kept other probes off the file during the
     * measurements (temporary file, rename) */
    mt_status st = mt_machine_write_to(&m, *claim);
    if (st != MT_OK) {
        cli_error("bench machine: %s", mt_errmsg());
        return cli_exit_of(st);
    }
    printf("written to %s (read it with --machine FILE)\n", out_path);
    if (fflush(stdout) != 0) {
        cli_error("cannot write to standard output: %s", strerror(errno));
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

