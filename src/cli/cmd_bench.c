/*
 * cmd_bench.c — `meshtrain bench collectives`: the collectives' time and
 * bandwidth per size and device count, in the manner of nccl-tests.
 *
 * Size is nccl-tests' "size": the bytes of the larger buffer of one device
 * (all-reduce: the buffer; all-gather: the output; reduce-scatter: the input;
 * all-to-all: either). algbw = size / time; busbw = algbw times nccl-tests'
 * factor (all-reduce 2(P-1)/P; all-gather, reduce-scatter, all-to-all (P-1)/P),
 * which makes busbw comparable with the memory or link speed whatever P is.
 * Time is the median over iterations (after a warm-up) of the slowest
 * device's time for that iteration.
 *
 * Under mpirun (--transport mpi) the same run also times plain MPI on
 * MPI_COMM_WORLD (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block,
 * MPI_Alltoall) with the same sizes and the same timing, and prints the ratio
 * MPI time / meshtrain time per size (> 1: meshtrain is faster).
 */
#include "cli/args.h"
#include "cli/bench_machine.h"
#include "cli/files.h"
#include "meshtrain.h"

#ifdef MT_HAVE_MPI
#include <mpi.h>
#endif

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char BENCH_USAGE[] =
    "usage: meshtrain bench collectives|machine|matmul [flags]\n"
    "\n"
    "  collectives  the collectives' time and bandwidth per size (below)\n"
    "  machine      this machine's peaks for the roofline, saved as JSON\n"
    "               (meshtrain bench machine --help)\n"
    "  matmul       one matmul through the engine against Open BLAS sgemm\n"
    "               (meshtrain bench matmul --help)\n"
    "\n"
    "bench collectives:\n"
    "Times every collective per size and device count, in the manner of nccl-tests:\n"
    "time (median of iterations after a warm-up), algbw = size/time, and busbw\n"
    "(nccl-tests' factors: all_reduce 2(P-1)/P, the others (P-1)/P). Under mpirun\n"
    "(--transport mpi) plain MPI is timed in the same run, with the ratio\n"
    "MPI time / meshtrain time.\n"
    "\n"
    "examples:\n"
    "  meshtrain bench collectives --devices 2,4,8\n"
    "  mpirun -np 2 meshtrain bench collectives --transport mpi --max-bytes 64M\n";

/* all_reduce_into: the all-reduce into a buffer of its own, started and
 * waited for (mt_all_reduce_into_start), as the gradient reductions run */
enum { OP_ALL_REDUCE, OP_ALL_GATHER, OP_REDUCE_SCATTER, OP_ALL_TO_ALL, OP_ALL_REDUCE_INTO, N_OPS };
static const char *const OP_NAMES[N_OPS] = {"all_reduce", "all_gather", "reduce_scatter",
                                            "all_to_all", "all_reduce_into"};
#define OP_NAME_LIST "all_reduce, all_gather, reduce_scatter, all_to_all, all_reduce_into"

/* Whether op reduces a whole buffer (an all-reduce's size and bus factor). */
static bool whole_buffer(int op) { return op == OP_ALL_REDUCE || op == OP_ALL_REDUCE_INTO; }

#define MAX_SIZES 64
#define MAX_DEVICE_COUNTS 16

typedef struct {
    size_t bytes;     /* nccl-tests size actually moved (rounded to whole elements) */
    size_t count;     /* elements per block */
    int    iters;
    double time_us;   /* meshtrain */
    double mpi_us;    /* plain MPI; 0: not measured */
} bench_row;

typedef struct {
    bool      ops[N_OPS];
    size_t    sizes[MAX_SIZES];
    int       n_sizes;
    int       max_iters, warmup;
    bench_row rows[N_OPS][MAX_SIZES];
} bench_plan;

/* ======================================================================== */
/* Parsing                                                                   */
/* ======================================================================== */

static void fmt_bytes(char *buf, size_t n, size_t b) {
    if (b >= (1u << 30) && b % (1u << 30) == 0) snprintf(buf, n, "%zu GiB", b >> 30);
    else if (b >= (1u << 20) && b % (1u << 20) == 0) snprintf(buf, n, "%zu MiB", b >> 20);
    else if (b >= 1024 && b % 1024 == 0) snprintf(buf, n, "%zu KiB", b >> 10);
    else snprintf(buf, n, "%zu B", b);
}

/* ======================================================================== */
/* Timing                                                                    */
/* ======================================================================== */

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static double median_us(float *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_float);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

/* Iterations for a size: many for small ones (their median needs them),
 * few for large ones (each moves hundreds of MiB). */
static int iters_for(const bench_plan *pl, size_t bytes) {
    double n = (double)(64u << 20) / (double)(bytes ? bytes : 1);
    int it = n > pl->max_iters ? pl->max_iters : n < 5 ? 5 : (int)n;
    return it;
}

/* Elements per block for nccl-tests size `bytes` on P devices. */
static size_t block_count(int op, size_t bytes, int P) {
    size_t elems = bytes / sizeof(float);
    size_t c = whole_buffer(op) ? elems : elems / (size_t)P;
    return c ? c : 1;
}

static size_t moved_bytes(int op, size_t count, int P) {
    return whole_buffer(op) ? count * sizeof(float) : count * (size_t)P * sizeof(float);
}

typedef struct {
    bench_plan *plan;
    float      *send, *recv;   /* threads: per device, allocated inside */
} bench_arg;

static mt_status run_op(mt_ctx *ctx, mt_axes ax, int op, float *send, float *recv, size_t c) {
    switch (op) {
    case OP_ALL_REDUCE:     return mt_all_reduce(ctx, ax, send, c, MT_F32, MT_REDUCE_SUM);
    case OP_ALL_GATHER:     return mt_all_gather(ctx, ax, send, recv, c, MT_F32);
    case OP_REDUCE_SCATTER: return mt_psum_scatter(ctx, ax, send, recv, c, MT_F32);
    case OP_ALL_REDUCE_INTO: {
        mt_request rq;
        mt_status s = mt_all_reduce_into_start(ctx, ax, send, recv, c, MT_F32, MT_REDUCE_SUM, &rq);
        return s == MT_OK ? mt_wait(ctx, &rq) : s;
    }
    default:                return mt_all_to_all(ctx, ax, send, recv, c, MT_F32);
    }
}

static mt_status bench_device(mt_ctx *ctx, void *p) {
    bench_arg *a = p;
    bench_plan *pl = a->plan;
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    if (s != MT_OK) return s;
    const int P = mt_axis_size(ctx, ax);
    const size_t max_bytes = pl->sizes[pl->n_sizes - 1];
    /* the largest buffer any op needs: all-reduce's whole size, or P blocks */
    size_t elems = max_bytes / sizeof(float) + (size_t)P;
    float *send = calloc(elems, sizeof *send), *recv = calloc(elems, sizeof *recv);
    float *times = malloc((size_t)pl->max_iters * sizeof *times);
    if (!send || !recv || !times) {
        free(send), free(recv), free(times);
        return mt_fail(MT_ENOMEM, "bench: cannot allocate 2 x %zu bytes on device %d",
                       elems * sizeof(float), mt_ctx_device(ctx));
    }
    for (int op = 0; op < N_OPS && s == MT_OK; op++) {
        if (!pl->ops[op]) continue;
        for (int si = 0; si < pl->n_sizes && s == MT_OK; si++) {
            const size_t c = block_count(op, pl->sizes[si], P);
            const int iters = iters_for(pl, pl->sizes[si]);
            for (int w = 0; w < pl->warmup && s == MT_OK; w++) s = run_op(ctx, ax, op, send, recv, c);
            if (s == MT_OK) s = mt_barrier(ctx, ax);
            for (int it = 0; it < iters && s == MT_OK; it++) {
                double t0 = mt_time_now();
                s = run_op(ctx, ax, op, send, recv, c);
                times[it] = (float)((mt_time_now() - t0) * 1e6);
            }
            /* every iteration takes as long as its slowest device */
            if (s == MT_OK) s = mt_pmax(ctx, ax, times, (size_t)iters);
            if (s == MT_OK && mt_ctx_device(ctx) == 0) {
                bench_row *r = &pl->rows[op][si];
                r->count = c;
                r->bytes = moved_bytes(op, c, P);
                r->iters = iters;
                r->time_us = median_us(times, iters);
            }
        }
    }
    free(send), free(recv), free(times);
    return s;
}

#ifdef MT_HAVE_MPI
/* The same sizes and timing with plain MPI on MPI_COMM_WORLD. */
static int bench_mpi_reference(bench_plan *pl, int P, int rank) {
    const size_t max_bytes = pl->sizes[pl->n_sizes - 1];
    size_t elems = max_bytes / sizeof(float) + (size_t)P;
    float *send = calloc(elems, sizeof *send), *recv = calloc(elems, sizeof *recv);
    float *times = malloc((size_t)pl->max_iters * sizeof *times);
    int rc = MPI_SUCCESS;
    if (!send || !recv || !times) {
        free(send), free(recv), free(times);
        cli_error("bench: cannot allocate the MPI reference's 2 x %zu bytes", elems * sizeof(float));
        return -1;
    }
    for (int op = 0; op < N_OPS && rc == MPI_SUCCESS; op++) {
        if (!pl->ops[op]) continue;
        for (int si = 0; si < pl->n_sizes && rc == MPI_SUCCESS; si++) {
            const size_t c = block_count(op, pl->sizes[si], P);
            const int iters = iters_for(pl, pl->sizes[si]);
            for (int it = -pl->warmup; it < iters && rc == MPI_SUCCESS; it++) {
                if (it == 0) MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                switch (op) {
                case OP_ALL_REDUCE:
                    rc = MPI_Allreduce(MPI_IN_PLACE, send, (int)c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                    break;
                case OP_ALL_GATHER:
                    rc = MPI_Allgather(send, (int)c, MPI_FLOAT, recv, (int)c, MPI_FLOAT, MPI_COMM_WORLD);
                    break;
                case OP_REDUCE_SCATTER:
                    rc = MPI_Reduce_scatter_block(send, recv, (int)c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                    break;
                case OP_ALL_REDUCE_INTO:
                    rc = MPI_Allreduce(send, recv, (int)c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                    break;
                default:
                    rc = MPI_Alltoall(send, (int)c, MPI_FLOAT, recv, (int)c, MPI_FLOAT, MPI_COMM_WORLD);
                    break;
                }
                if (it >= 0) times[it] = (float)((MPI_Wtime() - t0) * 1e6);
            }
            if (rc == MPI_SUCCESS)
                rc = MPI_Allreduce(MPI_IN_PLACE, times, iters, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
            if (rank == 0) pl->rows[op][si].mpi_us = median_us(times, iters);
        }
    }
    free(send), free(recv), free(times);
    if (rc != MPI_SUCCESS) {
        cli_error("bench: the MPI reference failed (MPI error %d)", rc);
        return -1;
    }
    return 0;
}
#endif

/* ======================================================================== */
/* Output                                                                    */
/* ======================================================================== */

static double bus_factor(int op, int P) {
    return whole_buffer(op) ? 2.0 * (P - 1) / P : (double)(P - 1) / P;
}

/* Prints the tables (and csv rows); a failed write to stdout is kept in
 * *out_err, whose first errno stdio would forget. */
static void print_tables(const bench_plan *pl, const char *transport, int P, FILE *csv,
                         int *out_err) {
    for (int op = 0; op < N_OPS; op++) {
        if (!pl->ops[op]) continue;
        bool mpi = pl->rows[op][0].mpi_us > 0;
        printf("\n# %s, transport %s, %d devices (f32%s; time: median over iterations of the "
               "slowest device)\n", OP_NAMES[op], transport, P, whole_buffer(op) ||
               op == OP_REDUCE_SCATTER ? " sum" : "");
        printf("%10s %11s %6s %11s %11s %11s", "size", "count", "iters", "time(us)",
               "algbw(GB/s)", "busbw(GB/s)");
        if (mpi) printf(" %11s %11s %7s", "MPI(us)", "MPI busbw", "MPI/mt");
        printf("\n");
        for (int si = 0; si < pl->n_sizes; si++) {
            const bench_row *r = &pl->rows[op][si];
            char size[32];
            fmt_bytes(size, sizeof size, r->bytes);
            double alg = r->time_us > 0 ? (double)r->bytes / (r->time_us * 1e3) : 0;
            double bus = alg * bus_factor(op, P);
            printf("%10s %11zu %6d %11.2f %11.3f %11.3f", size, r->count, r->iters, r->time_us,
                   alg, bus);
            double malg = r->mpi_us > 0 ? (double)r->bytes / (r->mpi_us * 1e3) : 0;
            if (mpi) printf(" %11.2f %11.3f %6.2fx", r->mpi_us, malg * bus_factor(op, P),
                            r->time_us > 0 ? r->mpi_us / r->time_us : 0);
            printf("\n");
            if (csv)
                fprintf(csv, "%s,%s,%d,%zu,%.4f,%.4f,%.4f,%.4f,%.4f\n", transport, OP_NAMES[op],
                        P, r->bytes, r->time_us, alg, bus, r->mpi_us, malg * bus_factor(op, P));
        }
    }
    cli_flush(stdout, out_err);
}

/* ======================================================================== */
/* The command                                                               */
/* ======================================================================== */

/* Whether the flag --name was given in argv (as "--name" or "--name=..."):
 * cli_parse_named keeps no `seen`, and a flag's value never starts "--". */
static bool given(int argc, char **argv, const char *name) {
    size_t n = strlen(name);
    for (int i = 0; i < argc; i++)
        if (strncmp(argv[i], "--", 2) == 0 && strncmp(argv[i] + 2, name, n) == 0 &&
            (argv[i][2 + n] == '\0' || argv[i][2 + n] == '='))
            return true;
    return false;
}

/* The flags of each benchmark, to name the right one for a flag given to
 * another (their tables live in their functions; test_hostile_bench.sh
 * checks that each is refused elsewhere with this message). */
static const struct {
    const char *bench, *flags[10];
} BENCH_FLAGS[] = {
    {"collectives", {"devices", "min-bytes", "max-bytes", "step", "ops", "iters", "warmup",
                     "transport", "csv", NULL}},
    {"machine", {"out", "quick", NULL}},
    {"matmul", {"m", "n", "k", "threads", "reps", "bf16", "machine", NULL}},
};

/* A flag of another benchmark given to `bench`, which would do nothing
 * there: CLI_EXIT_USAGE after saying whose flag it is; else CLI_EXIT_OK. */
static int check_foreign_flags(const char *bench, int argc, char **argv) {
    const int nb = (int)(sizeof BENCH_FLAGS / sizeof *BENCH_FLAGS);
    for (int i = 0; i < argc; i++)   /* --help anywhere wins, as in cli_parse */
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return CLI_EXIT_OK;
    int self = 0;
    while (self < nb && strcmp(BENCH_FLAGS[self].bench, bench) != 0) self++;
    for (int b = 0; b < nb; b++) {
        if (b == self) continue;
        for (int f = 0; BENCH_FLAGS[b].flags[f]; f++) {
            const char *name = BENCH_FLAGS[b].flags[f];
            bool own = false;
            for (int g = 0; self < nb && BENCH_FLAGS[self].flags[g]; g++)
                own |= strcmp(BENCH_FLAGS[self].flags[g], name) == 0;
            if (own || !given(argc, argv, name)) continue;
            cli_error("--%s is a flag of `bench %s`; it does nothing in `bench %s` (see "
                      "`meshtrain bench %s --help`)", name, BENCH_FLAGS[b].bench, bench, bench);
            return CLI_EXIT_USAGE;
        }
    }
    return CLI_EXIT_OK;
}

/* The collectives of --ops into pl->ops: a comma-separated list of names or
 * "all"; an empty item ("all_reduce,,all_gather") is refused. */
static int parse_ops(bench_plan *pl, const char *ops) {
    memset(pl->ops, 0, sizeof pl->ops);
    for (const char *p = ops; *ops;) {
        size_t len = strcspn(p, ",");
        int k = -1;
        for (int i = 0; i < N_OPS; i++)
            if ((strlen(OP_NAMES[i]) == len && strncmp(p, OP_NAMES[i], len) == 0) ||
                (len == 3 && strncmp(p, "all", 3) == 0)) {
                pl->ops[i] = true;
                k = i;
            }
        if (k < 0) {
            cli_error("--ops '%s': %s%.*s%s (" OP_NAME_LIST ", all)", ops,
                      len ? "unknown collective '" : "an empty item", (int)len, p,
                      len ? "'" : "");
            return CLI_EXIT_USAGE;
        }
        if (!p[len]) break;
        p += len + 1;
    }
    return CLI_EXIT_OK;
}

static int parse_plan(bench_plan *pl, const char *ops, const char *min_s, const char *max_s,
                      int step, bool step_given) {
    if (parse_ops(pl, ops) != CLI_EXIT_OK) return CLI_EXIT_USAGE;
    bool any = false;
    for (int i = 0; i < N_OPS; i++) any |= pl->ops[i];
    if (!any) {
        /* "," or "" would otherwise run nothing and exit 0 */
        cli_error("--ops '%s' names no collective; list some of " OP_NAME_LIST " (or all)", ops);
        return CLI_EXIT_USAGE;
    }
    uint64_t lo64 = 0, hi64 = 0;
    int rc = cli_parse_bytes("min-bytes", min_s, &lo64);
    if (rc == CLI_EXIT_OK) rc = cli_parse_bytes("max-bytes", max_s, &hi64);
    if (rc != CLI_EXIT_OK) return rc;
    if (lo64 < 4 || hi64 < lo64) {
        cli_error("--min-bytes %s / --max-bytes %s: need 4 <= min <= max (units k, M, G)", min_s, max_s);
        return CLI_EXIT_USAGE;
    }
    if (hi64 > ((uint64_t)1 << 32)) {
        cli_error("--max-bytes %s is above 4G; the bench allocates two such buffers per device", max_s);
        return CLI_EXIT_USAGE;
    }
    const size_t lo = (size_t)lo64, hi = (size_t)hi64;
    if (step_given && lo == hi) {
        cli_error("--step %d: --min-bytes equals --max-bytes (%s), so there is one size and "
                  "no step between sizes; give a --min-bytes below --max-bytes, or drop --step",
                  step, max_s);
        return CLI_EXIT_USAGE;
    }
    /* max, max/step, ... down to min (so the large sizes are round), then min */
    size_t tmp[MAX_SIZES];
    int n = 0;
    for (size_t b = hi; b >= lo && n < MAX_SIZES - 1; b /= (size_t)step) {
        tmp[n++] = b;
        if (b / (size_t)step == b) break;
    }
    if (tmp[n - 1] != lo) tmp[n++] = lo;
    pl->n_sizes = n;
    for (int i = 0; i < n; i++) pl->sizes[i] = tmp[n - 1 - i];
    return CLI_EXIT_OK;
}

/* Opens the --csv log for appending in place (a log, not a save: earlier
 * runs' rows stay). The open never blocks and what it opened must be a
 * regular file: a FIFO or device swapped in after cli_check_files is refused
 * here, before the benchmark. CLI_EXIT_FAIL after the message. */
static int open_csv(const char *path, FILE **out) {
    *out = NULL;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0666);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        cli_error("--csv: cannot open '%s' for appending: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return CLI_EXIT_FAIL;
    }
    int flags = fcntl(fd, F_GETFL);
    if (!S_ISREG(st.st_mode) || flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ||
        !(*out = fdopen(fd, "a"))) {
        if (!S_ISREG(st.st_mode))
            cli_error("--csv '%s' is %s, not a regular file; give the name of a file to append "
                      "the rows to", path, mt_file_type_name(st.st_mode));
        else
            cli_error("--csv: cannot open '%s' for appending: %s", path, strerror(errno));
        close(fd);
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

int cli_cmd_bench(int argc, char **argv) {
    const char *devices = "2,4,8", *ops = "all", *min_s = "8", *max_s = "256M", *csv_path = NULL;
    int max_iters = 200, warmup = 5, step = 4, transport = 0;
    const cli_opt opts[] = {
        {"devices", CLI_STR, &devices, 0, 0, 0, 0, NULL, "N,N,..",
         "device counts (threads), each 1..1024; under --transport mpi the world size is used"},
        {"min-bytes", CLI_STR, &min_s, 0, 0, 0, 0, NULL, "SIZE", "smallest size (units k, M, G)"},
        {"max-bytes", CLI_STR, &max_s, 0, 0, 0, 0, NULL, "SIZE", "largest size"},
        {"step", CLI_INT, &step, 2, 16, 0, 0, NULL, "F", "size factor between rows (from the largest down)"},
        {"ops", CLI_STR, &ops, 0, 0, 0, 0, NULL, "LIST",
         "all_reduce,all_gather,reduce_scatter,all_to_all,all_reduce_into (or all)"},
        {"iters", CLI_INT, &max_iters, 5, 1e6, 0, 0, NULL, "N",
         "timed iterations for small sizes (large ones use fewer, at least 5)"},
        {"warmup", CLI_INT, &warmup, 0, 1e5, 0, 0, NULL, "N", "untimed iterations first"},
        {"transport", CLI_CHOICE, &transport, 0, 0, 0, 0, "auto|threads|mpi", "NAME",
         "threads of this process, or one device per MPI rank (auto: mpi under mpirun)"},
        {"csv", CLI_STR, &csv_path, 0, 0, 0, 0, NULL, "FILE",
         "append one line per row (transport,op,devices,bytes,time_us,algbw,busbw,mpi_us,mpi_busbw)"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    int rc;
    if (argc > 0 && (strcmp(argv[0], "machine") == 0 || strcmp(argv[0], "matmul") == 0)) {
        if ((rc = check_foreign_flags(argv[0], argc - 1, argv + 1)) != CLI_EXIT_OK) return rc;
        return strcmp(argv[0], "machine") == 0 ? cli_bench_machine(argc, argv)
                                                : cli_bench_matmul(argc, argv);
    }
    if (argc > 0 && argv[0][0] != '-' && strcmp(argv[0], "collectives") != 0) {
        cli_error("unknown benchmark '%s' (benchmarks: collectives, machine, matmul); "
                  "see `meshtrain bench --help`", argv[0]);
        return CLI_EXIT_USAGE;
    }
    if (argc > 0 && strcmp(argv[0], "collectives") == 0 &&
        (rc = check_foreign_flags("collectives", argc - 1, argv + 1)) != CLI_EXIT_OK)
        return rc;
    if (!cli_parse_named("bench", "collectives", "benchmark", BENCH_USAGE,
                         opts, argc, argv, &rc))
        return rc;

    bench_plan *pl = calloc(1, sizeof *pl);
    if (!pl) {
        cli_error("bench: out of memory");
        return CLI_EXIT_FAIL;
    }
    pl->max_iters = max_iters;
    pl->warmup = warmup;
    if ((rc = parse_plan(pl, ops, min_s, max_s, step, given(argc, argv, "step"))) !=
        CLI_EXIT_OK) {
        free(pl);
        return rc;
    }
    static const mt_transport_kind kinds[] = {MT_TRANSPORT_AUTO, MT_TRANSPORT_THREADS,
                                              MT_TRANSPORT_MPI};
    bool mpi = mt_transport_resolve(kinds[transport]) == MT_TRANSPORT_MPI;
    if (mpi && given(argc, argv, "devices")) {
        cli_error("--devices does nothing with the MPI transport, whose device count is the "
                  "world size (mpirun -np N); drop it, or give --transport threads");
        free(pl);
        return CLI_EXIT_USAGE;
    }
#ifndef MT_HAVE_MPI
    if (mpi) {
        cli_error("--transport mpi: meshtrain was built without Open MPI; install "
                  "libopenmpi-dev and rebuild, or use --transport threads");
        free(pl);
        return CLI_EXIT_USAGE;
    }
#endif
    int counts[MAX_DEVICE_COUNTS], n_counts = 0;
    if (mpi) {
        counts[n_counts++] = 0;   /* the world size */
    } else if ((rc = cli_parse_int_list("devices", devices, 1, CLI_MAX_THREAD_DEVICES, counts,
                                        MAX_DEVICE_COUNTS, &n_counts)) != CLI_EXIT_OK) {
        free(pl);
        return rc;
    }
    /* a csv that cannot take the rows fails now, not after the benchmark
     * (under mpirun by stat only: every rank checks it at once) */
    const cli_file files[] = {
        {.flag = "csv", .path = csv_path, .role = CLI_FILE_LOG, .stat_only = mpi}};
    FILE *csv = NULL;
    int csv_err = 0, out_err = 0;   /* errno of the first failed write to each */
    if ((rc = cli_check_files(files, 1)) != CLI_EXIT_OK) {
        free(pl);
        return rc;
    }
    if (csv_path && (rc = open_csv(csv_path, &csv)) != CLI_EXIT_OK) {
        free(pl);
        return rc;
    }

    int status = CLI_EXIT_OK;
    for (int k = 0; k < n_counts && status == CLI_EXIT_OK; k++) {
        char spec[32] = "";
        if (counts[k]) snprintf(spec, sizeof spec, "d=%d", counts[k]);
        else snprintf(spec, sizeof spec, "d=-1");
        memset(pl->rows, 0, sizeof pl->rows);
        bench_arg a = {.plan = pl};
        mt_launch_opts lo = {.mesh = spec, .devices = counts[k],
                             .transport = mpi ? MT_TRANSPORT_MPI : MT_TRANSPORT_THREADS};
        mt_status s = mt_launch(&lo, bench_device, &a);
        if (s != MT_OK) {
            cli_error("bench: %s", mt_errmsg());
            status = CLI_EXIT_FAIL;
            break;
        }
        int P = counts[k], rank = 0;
#ifdef MT_HAVE_MPI
        if (mpi) {
            MPI_Comm_size(MPI_COMM_WORLD, &P);
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            if (bench_mpi_reference(pl, P, rank) != 0) {
                status = CLI_EXIT_FAIL;
                break;
            }
        }
#endif
        if (rank == 0) print_tables(pl, mpi ? "mpi" : "threads", P, csv, &out_err);
        if (csv) cli_flush(csv, &csv_err);   /* a full disk shows here, row by row */
    }
    if (csv) {
        cli_flush(csv, &csv_err);
        if (fclose(csv) != 0 && csv_err == 0) csv_err = errno;
        if (csv_err) {
            cli_error("--csv '%s': writing the rows failed: %s; the tables on stdout are "
                      "complete, the csv is not", csv_path, strerror(csv_err));
            if (status == CLI_EXIT_OK) status = CLI_EXIT_FAIL;
        }
    }
    if (!cli_flush(stdout, &out_err) || out_err) {
        cli_error("cannot write to standard output: %s", strerror(out_err ? out_err : EIO));
        if (status == CLI_EXIT_OK) status = CLI_EXIT_FAIL;
    }
    free(pl);
    return status;
}
