/*
 * test_mpi.c — the collectives on the mpi transport, run by mpirun:
 *
 *   mpirun -np 2 test_mpi            every check; prints "N passed, N failed"
 *   mpirun -np 2 test_mpi skip       device 1 skips a collective: the job must
 *                                    stop with a timeout naming it (MT_COMM_TIMEOUT)
 *   mpirun -np 2 test_mpi exit       device 1 calls exit(3) between collectives:
 *                                    the others must not hang
 *   mpirun -np 2 test_mpi hang       device 1 computes forever (never calls MPI):
 *                                    the timeout names it as not answering, and
 *                                    the job ends
 *   mpirun -np 2 test_mpi stop       device 1 stops itself (SIGSTOP) between
 *                                    collectives: as hang, and MPI_Abort must
 *                                    end the stopped process too
 *   mpirun -np 2 test_mpi stop0      device 0 stops itself (SIGSTOP) between two
 *                                    launches: device 1 names it as lost at the
 *                                    second's start, and the job ends
 *   mpirun -np 2 test_mpi pass       one launch with one psum that succeeds:
 *                                    mpi_fail.sh times it as the overhead of
 *                                    starting and ending a job
 *   mpirun -np 2 test_mpi large      a broadcast and a ppermute of blocks above
 *                                    INT_MAX bytes (~4 GiB of memory per rank)
 *
 * Not the fork-per-case harness: MPI cannot fork. Every collective is checked
 * against a naive reference computed from a formula of (device, element), on
 * the 1-D mesh of the world and on 2-D meshes over one axis, both, and both in
 * reverse order; sizes 0, 1, odd, non-power-of-two and large; f32, i32, bf16;
 * the asynchronous forms. Point-to-point messages: rings with tags taken out
 * of order, FIFO per tag and self-sends; 64 MiB received late; a size
 * mismatch; a receive that times out; a failing sender; messages never
 * received. A case passes when it passed on every rank; rank 0
 * prints the results.
 */
#define _GNU_SOURCE   /* sched_getaffinity */
#include "meshtrain.h"
#include "comm/runtime_impl.h"   /* a launch's view of its machine */

#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int world_rank, world_size;

/* ======================================================================== */
/* Reference values                                                          */
/* ======================================================================== */

/* Integers, so every sum below is exact in f32 and the order of additions
 * (which differs between MPI's algorithms) cannot matter. */
static float fval(int dev, size_t i) { return (float)((dev + 1) * 1000 + (int)(i % 997)); }
static int32_t ival(int dev, size_t i) { return dev * 100000 + (int32_t)(i % 50000); }
/* small integers: exact in bf16 (8 significant bits), sums too */
static float bval(int dev, size_t i) { return (float)((dev + 1) * 4 + (int)(i % 8)); }

static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);   /* exact for the values above */
}
static float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ======================================================================== */
/* Checking inside a device function                                         */
/* ======================================================================== */

#define MAX_KINDS 16

typedef struct {
    const char *mesh;       /* spec */
    const char *axes;       /* names */
    int         fails[MAX_KINDS];
    const char *kinds[MAX_KINDS];
    int         n_kinds;
} case_arg;

static int kind_index(case_arg *a, const char *kind) {
    for (int i = 0; i < a->n_kinds; i++)
        if (strcmp(a->kinds[i], kind) == 0) return i;
    a->kinds[a->n_kinds] = kind;
    a->fails[a->n_kinds] = 0;
    return a->n_kinds++;
}

static void failf(case_arg *a, const char *kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void failf(case_arg *a, const char *kind, const char *fmt, ...) {
    int k = kind_index(a, kind);
    if (a->fails[k]++ < 3) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        fprintf(stderr, "  FAIL [rank %d] %s, mesh %s over '%s': %s\n", world_rank, kind,
                a->mesh, a->axes, buf);
    }
}

#define OK_OR_FAIL(a, kind, call)                                                  \
    do { mt_status s_ = (call);                                                    \
         kind_index(a, kind);                                                      \
         if (s_ != MT_OK) { failf(a, kind, "%s -> %s: %s", #call, mt_status_name(s_), \
                                  mt_errmsg()); goto out; } } while (0)

static const size_t SIZES[] = {0, 1, 7, 1000, 1u << 18};
#define N_SIZES (sizeof SIZES / sizeof SIZES[0])

/* Every collective over `axes` of the case's mesh, every size. */
static mt_status run_case(mt_ctx *ctx, void *p) {
    case_arg *a = p;
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    const int dev = mt_ctx_device(ctx);
    mt_axes axes;
    mt_status s = mt_ctx_axes(ctx, a->axes, &axes);
    if (s != MT_OK) return s;
    const int P = mt_axis_size(ctx, axes), r = mt_axis_index(ctx, axes);
    int members[64];
    int n = mt_mesh_group(mesh, axes, dev, members);
    if (n != P || members[r] != dev || mt_mesh_group_rank(mesh, axes, dev) != r)
        failf(a, "axis_index", "group of %d (P %d), rank %d, member there %d", n, P, r, members[r]);
    kind_index(a, "axis_index");

    const size_t big = SIZES[N_SIZES - 1];
    float *f = malloc((size_t)P * big * sizeof *f), *g = malloc((size_t)P * big * sizeof *g);
    /* (c) psum, (c) psum_scatter, (c) all_reduce_into */
    float *h = malloc(((size_t)P + 2) * big * sizeof *h);
    int32_t *iv = malloc(big * sizeof *iv);
    uint16_t *bv = malloc(((size_t)P * big + 1) * sizeof *bv), *bw = malloc(big * sizeof *bw);
    if (!f || !g || !h || !iv || !bv || !bw) { s = mt_fail(MT_ENOMEM, "test buffers"); goto out; }

    for (size_t si = 0; si < N_SIZES; si++) {
        const size_t c = SIZES[si];
        /* psum, pmax, pmin (f32) */
        for (int op = 0; op < 3; op++) {
            for (size_t i = 0; i < c; i++) f[i] = fval(dev, i);
            OK_OR_FAIL(a, "all_reduce f32", mt_all_reduce(ctx, axes, f, c, MT_F32, (mt_reduce_op)op));
            for (size_t i = 0; i < c; i++) {
                float want = op == 0 ? 0 : fval(members[0], i);
                for (int m = 0; m < P; m++) {
                    float v = fval(members[m], i);
                    want = op == 0 ? want + v : op == 1 ? fmaxf(want, v) : fminf(want, v);
                }
                if (f[i] != want) { failf(a, "all_reduce f32", "op %d count %zu [%zu] = %g, want %g", op, c, i, f[i], want); break; }
            }
        }
        /* pmean */
        for (size_t i = 0; i < c; i++) f[i] = fval(dev, i);
        OK_OR_FAIL(a, "pmean", mt_pmean(ctx, axes, f, c));
        for (size_t i = 0; i < c; i++) {
            double want = 0;
            for (int m = 0; m < P; m++) want += fval(members[m], i);
            want /= P;
            if (fabs(f[i] - want) > 1e-5 * fabs(want)) { failf(a, "pmean", "count %zu [%zu] = %g, want %g", c, i, f[i], want); break; }
        }
        /* i32 and bf16 sums */
        for (size_t i = 0; i < c; i++) iv[i] = ival(dev, i);
        OK_OR_FAIL(a, "all_reduce i32", mt_all_reduce(ctx, axes, iv, c, MT_I32, MT_REDUCE_SUM));
        for (size_t i = 0; i < c; i++) {
            int32_t want = 0;
            for (int m = 0; m < P; m++) want += ival(members[m], i);
            if (iv[i] != want) { failf(a, "all_reduce i32", "count %zu [%zu] = %d, want %d", c, i, iv[i], want); break; }
        }
        for (size_t i = 0; i < c; i++) bv[i] = to_bf16(bval(dev, i));
        OK_OR_FAIL(a, "all_reduce bf16", mt_all_reduce(ctx, axes, bv, c, MT_BF16, MT_REDUCE_SUM));
        for (size_t i = 0; i < c; i++) {
            float want = 0;
            for (int m = 0; m < P; m++) want += bval(members[m], i);
            if (from_bf16(bv[i]) != want) { failf(a, "all_reduce bf16", "count %zu [%zu] = %g, want %g", c, i, from_bf16(bv[i]), want); break; }
        }

        /* all_gather: recv (P, c) */
        for (size_t i = 0; i < c; i++) f[i] = fval(dev, i);
        OK_OR_FAIL(a, "all_gather", mt_all_gather(ctx, axes, f, g, c, MT_F32));
        for (int m = 0; m < P; m++)
            for (size_t i = 0; i < c; i++)
                if (g[(size_t)m * c + i] != fval(members[m], i)) {
                    failf(a, "all_gather", "count %zu block %d [%zu] = %g, want %g", c, m, i,
                          g[(size_t)m * c + i], fval(members[m], i));
                    m = P;
                    break;
                }

        /* psum_scatter: send (P, c), recv (c) = Σ_m send_m[r] */
        for (size_t i = 0; i < (size_t)P * c; i++) f[i] = fval(dev, i);
        OK_OR_FAIL(a, "psum_scatter", mt_psum_scatter(ctx, axes, f, g, c, MT_F32));
        for (size_t i = 0; i < c; i++) {
            float want = 0;
            for (int m = 0; m < P; m++) want += fval(members[m], (size_t)r * c + i);
            if (g[i] != want) { failf(a, "psum_scatter", "count %zu [%zu] = %g, want %g", c, i, g[i], want); break; }
        }
        /* bf16 psum_scatter */
        for (size_t i = 0; i < (size_t)P * c; i++) bv[i] = to_bf16(bval(dev, i));
        OK_OR_FAIL(a, "psum_scatter bf16", mt_psum_scatter(ctx, axes, bv, bw, c, MT_BF16));
        for (size_t i = 0; i < c; i++) {
            float want = 0;
            for (int m = 0; m < P; m++) want += bval(members[m], (size_t)r * c + i);
            if (from_bf16(bw[i]) != want) { failf(a, "psum_scatter bf16", "count %zu [%zu] = %g, want %g", c, i, from_bf16(bw[i]), want); break; }
        }

        /* all_to_all: send block j (for rank j) = fval(dev*16 + j, .) */
        for (int j = 0; j < P; j++)
            for (size_t i = 0; i < c; i++) f[(size_t)j * c + i] = fval(dev * 16 + j, i);
        OK_OR_FAIL(a, "all_to_all", mt_all_to_all(ctx, axes, f, g, c, MT_F32));
        for (int j = 0; j < P; j++)
            for (size_t i = 0; i < c; i++)
                if (g[(size_t)j * c + i] != fval(members[j] * 16 + r, i)) {
                    failf(a, "all_to_all", "count %zu block %d [%zu] = %g, want %g", c, j, i,
                          g[(size_t)j * c + i], fval(members[j] * 16 + r, i));
                    j = P;
                    break;
                }

        /* ppermute: a ring shift, then a line (rank 0 is no one's destination) */
        int pairs[64][2];
        for (int line = 0; line < 2; line++) {
            int np = 0;
            for (int k = 0; k < P; k++)
                if (!line || k + 1 < P) { pairs[np][0] = k; pairs[np][1] = (k + 1) % P; np++; }
            for (size_t i = 0; i < c; i++) { f[i] = fval(dev, i); g[i] = -1; }
            OK_OR_FAIL(a, "ppermute", mt_ppermute(ctx, axes, f, g, c, MT_F32, (const int (*)[2])pairs, np));
            int from = line && r == 0 ? -1 : (r + P - 1) % P;
            for (size_t i = 0; i < c; i++) {
                float want = from < 0 ? 0.0f : fval(members[from], i);
                if (g[i] != want) { failf(a, "ppermute", "%s count %zu [%zu] = %g, want %g", line ? "line" : "ring", c, i, g[i], want); break; }
            }
        }

        /* broadcast from the last rank */
        for (size_t i = 0; i < c; i++) f[i] = fval(dev, i);
        OK_OR_FAIL(a, "broadcast", mt_broadcast(ctx, axes, f, c, MT_F32, P - 1));
        for (size_t i = 0; i < c; i++)
            if (f[i] != fval(members[P - 1], i)) { failf(a, "broadcast", "count %zu [%zu] = %g, want %g", c, i, f[i], fval(members[P - 1], i)); break; }

        OK_OR_FAIL(a, "barrier", mt_barrier(ctx, axes));

        /* asynchronous: four in flight, waited in reverse order */
        mt_request q[4];
        for (size_t i = 0; i < (size_t)P * c; i++) f[i] = fval(dev, i);
        for (size_t i = 0; i < c; i++) h[i] = fval(dev, i);
        float *gathered = g, *scattered = h + c, *into = h + 2 * c;
        OK_OR_FAIL(a, "async", mt_all_reduce_start(ctx, axes, h, c, MT_F32, MT_REDUCE_SUM, &q[0]));
        OK_OR_FAIL(a, "async", mt_all_gather_start(ctx, axes, f, gathered, c, MT_F32, &q[1]));
        OK_OR_FAIL(a, "async", mt_psum_scatter_start(ctx, axes, f, scattered, c, MT_F32, &q[2]));
        OK_OR_FAIL(a, "async", mt_all_reduce_into_start(ctx, axes, f, into, c, MT_F32,
                                                        MT_REDUCE_SUM, &q[3]));
        for (int k = 3; k >= 0; k--) OK_OR_FAIL(a, "async", mt_wait(ctx, &q[k]));
        for (size_t i = 0; i < c; i++) {
            float sum = 0, rs = 0;
            for (int m = 0; m < P; m++) {
                sum += fval(members[m], i);
                rs += fval(members[m], (size_t)r * c + i);
            }
            if (into[i] != sum || f[i] != fval(dev, i)) { failf(a, "async", "all_reduce_into count %zu [%zu]: %g (want %g), send %g", c, i, into[i], sum, f[i]); break; }
            if (h[i] != sum || scattered[i] != rs) { failf(a, "async", "count %zu [%zu]: psum %g (want %g), psum_scatter %g (want %g)", c, i, h[i], sum, scattered[i], rs); break; }
            for (int m = 0; m < P; m++)
                if (gathered[(size_t)m * c + i] != fval(members[m], i)) { failf(a, "async", "all_gather count %zu block %d [%zu]", c, m, i); i = c; break; }
        }
    }
    s = MT_OK;
out:
    free(f), free(g), free(h), free(iv), free(bv), free(bw);
    return s;
}

/* ======================================================================== */
/* Cases                                                                     */
/* ======================================================================== */

static int n_pass, n_fail;

/* True on every rank when `ok` is true on every rank. */
static bool all_ok(bool ok) {
    int mine = ok ? 1 : 0, every = 0;
    MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return every == 1;
}

static void report(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(bool ok, const char *fmt, ...) {
    ok = all_ok(ok);
    if (ok) n_pass++;
    else n_fail++;
    if (world_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        printf("%s ", ok ? "ok  " : "FAIL");
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
        fflush(stdout);
    }
}

static void collective_case(const char *mesh, const char *axes) {
    case_arg a;
    memset(&a, 0, sizeof a);
    a.mesh = mesh;
    a.axes = axes;
    mt_launch_opts o = {.mesh = mesh, .transport = MT_TRANSPORT_MPI, .timeout_s = 60};
    double t0 = MPI_Wtime();
    mt_status s = mt_launch(&o, run_case, &a);
    if (s != MT_OK) fprintf(stderr, "  [rank %d] mesh %s over '%s': %s: %s\n", world_rank, mesh,
                            axes, mt_status_name(s), mt_errmsg());
    /* every rank has the same kinds, in the same order */
    for (int k = 0; k < a.n_kinds; k++)
        report(s == MT_OK && a.fails[k] == 0, "%-18s mesh %-10s over '%s'", a.kinds[k], mesh, axes);
    if (a.n_kinds == 0) report(false, "mesh %s over '%s': the launch failed", mesh, axes);
    if (world_rank == 0) printf("     (%.2f s)\n", MPI_Wtime() - t0);
}

/* A device failing after its last collective: every rank gets its error. */
static mt_status fail_last(mt_ctx *ctx, void *arg) {
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    float v = 1;
    if (s == MT_OK) s = mt_psum(ctx, ax, &v, 1);
    if (s != MT_OK) return s;
    if (mt_ctx_device(ctx) == world_size - 1)
        return mt_fail(MT_EINVAL, "planned failure with value %g", (double)v);
    return MT_OK;
}

static mt_status noop(mt_ctx *ctx, void *arg) { return MT_OK; }

static mt_status one_psum(mt_ctx *ctx, void *arg) {
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    float v = 1;
    mt_trace_begin(ctx, "work");
    if (s == MT_OK) s = mt_psum(ctx, ax, &v, 1);
    mt_trace_end(ctx);
    return s;
}

static void failure_cases(void) {
    mt_launch_opts o = {.mesh = "d=-1", .transport = MT_TRANSPORT_MPI, .timeout_s = 60};
    mt_status s = mt_launch(&o, fail_last, NULL);
    char want[128];
    snprintf(want, sizeof want, "device %d: planned failure with value %d", world_size - 1, world_size);
    report(s == MT_EINVAL && strstr(mt_errmsg(), want) != NULL,
           "a device's error reaches every rank (\"%s\")", mt_errmsg());

    char spec[32];
    snprintf(spec, sizeof spec, "d=%d", world_size + 1);
    mt_launch_opts bad = {.mesh = spec, .transport = MT_TRANSPORT_MPI};
    s = mt_launch(&bad, noop, NULL);
    char n1[16], n2[16];
    snprintf(n1, sizeof n1, "%d", world_size + 1);
    snprintf(n2, sizeof n2, "%d", world_size);
    report(s != MT_OK && strstr(mt_errmsg(), n1) && strstr(mt_errmsg(), n2),
           "a mesh that does not fit the world names both sizes (\"%s\")", mt_errmsg());

    mt_launch_opts many = {.mesh = "", .devices = world_size + 2, .transport = MT_TRANSPORT_MPI};
    s = mt_launch(&many, noop, NULL);
    report(s == MT_EINVAL, "a device count other than the world size is refused (\"%s\")", mt_errmsg());
}

static void linreg_case(void) {
    enum { STEPS = 20 };
    float ref[STEPS], got[STEPS], pref[4], pgot[4];
    mt_linreg_example_opts one = {.devices = 1, .steps = STEPS, .batch = 128, .lr = 0.1f,
                                  .seed = 42, .transport = MT_TRANSPORT_THREADS};
    mt_linreg_example_opts mpi = one;
    mpi.devices = 0;
    mpi.transport = MT_TRANSPORT_MPI;
    if (128 % world_size != 0) {
        if (world_rank == 0) printf("skip linreg: batch 128 does not split over %d ranks\n", world_size);
        return;
    }
    mt_status s1 = mt_example_linreg(&one, ref, pref);
    char msg1[512];
    snprintf(msg1, sizeof msg1, "%s", mt_errmsg());
    mt_status s2 = mt_example_linreg(&mpi, got, pgot);
    if (s1 == MT_EUNSUPPORTED || s2 == MT_EUNSUPPORTED) {
        if (world_rank == 0) printf("skip linreg: %s\n", s1 != MT_OK ? msg1 : mt_errmsg());
        return;
    }
    double worst = 0;
    bool ok = s1 == MT_OK && s2 == MT_OK;
    for (int i = 0; ok && i < STEPS; i++) {
        double rel = fabs(got[i] - ref[i]) / fmax(fabs(ref[i]), 1e-30);
        if (rel > worst) worst = rel;
    }
    if (!ok) fprintf(stderr, "  [rank %d] linreg: %s / %s\n", world_rank, msg1, mt_errmsg());
    report(ok && worst <= 1e-5, "linreg over %d ranks matches 1 device: loss %.6g -> %.6g, "
           "worst relative difference %.2g", world_size, ok ? ref[0] : 0.0, ok ? ref[STEPS - 1] : 0.0, worst);
}

/* The strategies through the partitioner, one device per rank: the MLP, a
 * small GPT and a small LLaMA, 10 AdamW steps, data parallel, FSDP and
 * tensor parallel, match the single-device run (each rank also trains that
 * one alone, without a mesh). */
enum { DP_STEPS = 10 };

/* DP_STEPS steps: each one's loss (and gradient norm, norm not NULL). */
static bool train_steps(mt_trainer *tr, float *loss, float *norm) {
    bool ok = true;
    for (int s = 0; s < DP_STEPS && ok; s++) {
        mt_step_report r;
        ok = mt_trainer_step(tr, &r) == MT_OK;
        loss[s] = r.loss;
        if (norm) norm[s] = r.grad_norm;
    }
    return ok;
}

static bool dp_train(mt_train_config c, const char *mesh, float *loss, float **params,
                     int64_t *n) {
    c.mesh = mesh;
    mt_trainer *tr = NULL;
    if (mt_trainer_create(&c, &tr) != MT_OK) return false;
    bool ok = train_steps(tr, loss, NULL);
    mt_graph *g = mt_trainer_graph(tr);
    *n = 0;
    for (int i = 0; i < mt_graph_n_params(g); i++) *n += mt_tensor_numel(mt_graph_param_at(g, i));
    *params = malloc((size_t)*n * sizeof(float));
    for (int i = 0, at = 0; ok && i < mt_graph_n_params(g); i++) {
        mt_tensor *p = mt_graph_param_at(g, i);
        memcpy(*params + at, mt_tensor_f32(p), (size_t)mt_tensor_numel(p) * sizeof(float));
        at += (int)mt_tensor_numel(p);
    }
    mt_trainer_free(tr);
    return ok;
}

/* The small GPT of the mesh cases; V and Vp from the data. */
static const mt_gpt_config MESH_GPT = {.L = 2, .C = 64, .NH = 4, .maxT = 16};
/* The small LLaMA of the mesh cases (test_strategies_llama.c's): grouped
 * queries, KV=2 of NH=4; V from the data. */
static const mt_llama_config MESH_LLAMA = {
    .dim = 32, .ffn_dim = 64, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .max_seq = 16,
    .rope_theta = 10000.0f, .norm_eps = 1e-5f, .multiple_of = 32, .ffn_mult = 1.0f};
static const char *const MODEL_NAMES[] = {"mlp", "gpt", "llama"};

/* The trainer configurations of the mesh cases (test_strategies.c's): 10
 * AdamW steps of the MLP (model 0), or of a small GPT (1, MESH_GPT) or
 * LLaMA (2, MESH_LLAMA) on the text file `text`. */
static mt_train_config mesh_config(int model, const char *text) {
    mt_train_config c = mt_train_defaults();
    c.model = model == 0 ? MT_MODEL_MLP : model == 1 ? MT_MODEL_GPT : MT_MODEL_LLAMA;
    c.steps = c.optim.total_steps = DP_STEPS;
    c.optim.warmup_steps = 2;
    c.optim.lr = 3e-3f;
    c.B = 8;
    c.threads = 1;
    c.seed = 7;
    if (model > 0) {
        c.data = text;
        c.model_config = model == 1 ? (const void *)&MESH_GPT : (const void *)&MESH_LLAMA;
        c.model_config_size = model == 1 ? sizeof MESH_GPT : sizeof MESH_LLAMA;
        c.T = 16;
    }
    return c;
}

/* A small text corpus at `path` (each rank writes its own). */
static void write_corpus(const char *path) {
    FILE *f = fopen(path, "w");
    for (int i = 0; f && i < 40; i++)
        fputs("the quick brown fox jumps over the lazy dog; one run on any mesh. ", f);
    if (f) fclose(f);
}

static void dp_trainer_case(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/mt_test_mpi_dp_%d_%d.txt", world_rank, (int)getpid());
    write_corpus(path);
    for (int model = 0; model < 3; model++) {
        mt_train_config c = mesh_config(model, path);
        /* data parallel over all ranks; with 2 ranks FSDP and tensor parallel
         * too; with 4, data × tensor (and for the LLaMA tensor=4: its KV=2
         * heads replicated over 4) */
        char meshes[4][32];
        int n_meshes = 1;
        snprintf(meshes[0], sizeof meshes[0], "data=%d", world_size);
        if (world_size == 2) {
            snprintf(meshes[n_meshes++], sizeof meshes[0], "fsdp=2");
            snprintf(meshes[n_meshes++], sizeof meshes[0], "tensor=2");
            /* the GPT and the LLaMA also with sequence parallelism and
             * collective matmuls (their rings of ppermutes between ranks) */
            if (model > 0) snprintf(meshes[n_meshes++], sizeof meshes[0], "tensor=2 sp");
        } else if (world_size == 4) {
            snprintf(meshes[n_meshes++], sizeof meshes[0], "data=2,tensor=2");
            if (model == 2) snprintf(meshes[n_meshes++], sizeof meshes[0], "tensor=4");
        }
        float l1[DP_STEPS], *p1 = NULL;
        int64_t n1 = 0;
        bool ok1 = dp_train(c, NULL, l1, &p1, &n1);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ok1 ? "" : mt_errmsg());
        for (int k = 0; k < n_meshes; k++) {
            float ln[DP_STEPS], *pn = NULL;
            int64_t nn = 0;
            char *sp = strstr(meshes[k], " sp");
            c.sequence_parallel = sp != NULL;
            c.collective_matmul = sp ? 1 : 0;
            if (sp) *sp = '\0';
            bool ok = dp_train(c, meshes[k], ln, &pn, &nn) && ok1;
            if (sp) *sp = ' ';
            if (!ok) fprintf(stderr, "  [rank %d] %s: %s %s\n", world_rank, meshes[k], msg,
                             mt_errmsg());
            double wl = 0, wp = 0;
            for (int s = 0; ok && s < DP_STEPS; s++) wl = fmax(wl, fabs(ln[s] - l1[s]) / fabs(l1[s]));
            /* parameters: whole ones only (a sharded mesh holds shards, which
             * test_strategies compares block by block) */
            for (int64_t j = 0; ok && nn == n1 && j < n1; j++)
                wp = fmax(wp, fabs((double)pn[j] - p1[j]) / fmax(1.0, fabs(p1[j])));
            report(ok && wl <= 1e-5 && wp <= 1e-4, "%s on %s over %d ranks (partitioned) matches "
                   "1 device: loss %.5g -> %.5g, worst loss difference %.2g, parameters %.2g%s",
                   MODEL_NAMES[model], meshes[k], world_size, ok ? l1[0] : 0.0,
                   ok ? l1[DP_STEPS - 1] : 0.0, wl, wp, nn == n1 ? "" : " (shards)");
            free(pn);
        }
        free(p1);
    }
    unlink(path);
}

/* Issue 10: pipelines, one stage device per rank. With 2 ranks every
 * schedule kind over pipe=2 (m = 4 and 8, L = 4); with 4, 1f1b, zb-h1 and
 * zb-v over pipe=4 (m = 8, L = 8) and zb-h1 over pipe=2,data=2. Issue 23:
 * the LLaMA too, its embedding tied (the head's copy on the last rank) or
 * not, under 1f1b, zb-v and dualpipev over pipe=2 and 1f1b over pipe=4: the loss and
 * the global gradient norm at every step within relative 1e-5 of one device
 * (each rank trains that one alone). */
static bool pipe_train(mt_train_config c, float *loss, float *norm) {
    mt_trainer *tr = NULL;
    if (mt_trainer_create(&c, &tr) != MT_OK) return false;
    bool ok = train_steps(tr, loss, norm);
    mt_trainer_free(tr);
    return ok;
}

static void pipeline_case(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/mt_test_mpi_pipe_%d_%d.txt", world_rank, (int)getpid());
    write_corpus(path);
    typedef struct { const char *kind, *mesh; int m, L, model; bool tie; } pipe_run;
    pipe_run runs[24];
    int n = 0;
    if (world_size == 2) {
        const char *kinds[] = {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-h2", "zb-v",
                               "dualpipev"};
        for (int k = 0; k < 7; k++)
            for (int m = 4; m <= 8; m += 4)
                runs[n++] = (pipe_run){kinds[k], "pipe=2", m, 4, 1, false};
        runs[n++] = (pipe_run){"1f1b", "pipe=2", 4, 4, 2, false};
        runs[n++] = (pipe_run){"1f1b", "pipe=2", 4, 4, 2, true};
        runs[n++] = (pipe_run){"zb-v", "pipe=2", 4, 4, 2, true};
        runs[n++] = (pipe_run){"dualpipev", "pipe=2", 4, 4, 2, true};
    } else if (world_size == 4) {
        const char *kinds[] = {"1f1b", "zb-h1", "zb-v"};
        for (int k = 0; k < 3; k++) runs[n++] = (pipe_run){kinds[k], "pipe=4", 8, 8, 1, false};
        runs[n++] = (pipe_run){"zb-h1", "pipe=2,data=2", 4, 4, 1, false};
        runs[n++] = (pipe_run){"1f1b", "pipe=4", 8, 4, 2, true};
    }
    for (int i = 0; i < n; i++) {
        mt_train_config c = mesh_config(runs[i].model, path);
        mt_gpt_config gpt = MESH_GPT;
        mt_llama_config llama = MESH_LLAMA;
        gpt.L = llama.n_layers = runs[i].L;
        llama.tie_embeddings = runs[i].tie;
        c.model_config = runs[i].model == 1 ? (const void *)&gpt : (const void *)&llama;
        c.B = 2;
        c.accum = runs[i].m;
        float l1[DP_STEPS], n1[DP_STEPS], lp[DP_STEPS], np_[DP_STEPS];
        bool ok1 = pipe_train(c, l1, n1);
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ok1 ? "" : mt_errmsg());
        c.mesh = runs[i].mesh;
        c.schedule = runs[i].kind;
        bool ok = pipe_train(c, lp, np_) && ok1;
        if (!ok) fprintf(stderr, "  [rank %d] %s on %s: %s %s\n", world_rank, runs[i].kind,
                         runs[i].mesh, msg, mt_errmsg());
        double wl = 0, wn = 0;
        for (int s = 0; ok && s < DP_STEPS; s++) {
            wl = fmax(wl, fabs(lp[s] - l1[s]) / fmax(1.0, fabs(l1[s])));
            wn = fmax(wn, fabs(np_[s] - n1[s]) / fmax(1.0, fabs(n1[s])));
        }
        report(ok && wl <= 1e-5 && wn <= 1e-5, "%s%s L=%d, %s on %s, m=%d, over %d ranks matches "
               "1 device: loss %.5g -> %.5g, worst loss difference %.2g, gradient norm %.2g",
               MODEL_NAMES[runs[i].model], runs[i].tie ? " tied" : "", runs[i].L, runs[i].kind,
               runs[i].mesh, runs[i].m, world_size, ok ? l1[0] : 0.0, ok ? l1[DP_STEPS - 1] : 0.0,
               wl, wn);
    }
    unlink(path);
}

/* Issue 9: a checkpoint written on fsdp=<ranks> (rank 0 writes the gathered
 * whole tensors), and issue 10's on pipe=<ranks> (zb-h1; resumed with zb-v;
 * the GPT's and, issue 23, the tied LLaMA's),
 * resumes on one device (each rank alone) and on the same mesh
 * again (each rank reads the file itself): both continue the one-device run,
 * loss within relative 1e-5 at every resumed step, parameters within 1e-4
 * (whole ones: the one-device resume). */
static void ckpt_resume_case(void) {
    int id = (int)getpid();
    MPI_Bcast(&id, 1, MPI_INT, 0, MPI_COMM_WORLD);   /* one file name on every rank */
    char text[64], ckpt[64], fsdp[32], pipe[32];
    snprintf(text, sizeof text, "/tmp/mt_test_mpi_ckpt_%d_%d.txt", world_rank, (int)getpid());
    snprintf(ckpt, sizeof ckpt, "/tmp/mt_test_mpi_ckpt_%d.ckpt", id);
    snprintf(fsdp, sizeof fsdp, "fsdp=%d", world_size);
    snprintf(pipe, sizeof pipe, "pipe=%d", world_size);
    write_corpus(text);
    enum { HALF = DP_STEPS / 2 };
    /* the MLP and the GPT over fsdp; the GPT and the tied LLaMA pipelined
     * (issue 10: each rank holds its stage, rank 0 receives the others' to
     * write the file) */
    for (int run = 0; run < 4; run++) {
        const int model = run == 0 ? 0 : run == 3 ? 2 : 1;
        const char *mesh = run < 2 ? fsdp : pipe;
        mt_train_config c = mesh_config(model, text);
        mt_gpt_config gpt = MESH_GPT;
        mt_llama_config llama = MESH_LLAMA;
        if (run >= 2) {   /* zb-v cuts 2 chunks a rank: 2·ranks blocks */
            gpt.L = llama.n_layers = 2 * world_size;
            llama.tie_embeddings = 1;
            c.model_config = model == 1 ? (const void *)&gpt : (const void *)&llama;
            c.B = 2;
            c.accum = 2 * world_size;
        }
        const char *name = model == 2 ? "llama tied" : MODEL_NAMES[model];
        float l1[DP_STEPS], *p1 = NULL;
        int64_t n1 = 0;
        bool ok = dp_train(c, NULL, l1, &p1, &n1);
        /* 5 steps on the mesh, saved */
        mt_train_config a = c;
        a.mesh = mesh;
        a.schedule = run >= 2 ? "zb-h1" : NULL;
        a.ckpt_out = ckpt;
        mt_trainer *tr = NULL;
        bool saved = ok && mt_trainer_create(&a, &tr) == MT_OK;
        for (int s = 0; saved && s < HALF; s++) saved = mt_trainer_step(tr, NULL) == MT_OK;
        saved = saved && mt_trainer_save(tr) == MT_OK;
        if (!saved) fprintf(stderr, "  [rank %d] %s save on %s: %s\n", world_rank, name, mesh,
                            mt_errmsg());
        mt_trainer_free(tr);
        saved = all_ok(saved);   /* rank 0 has written the file before any rank reads it */
        /* resumed: on one device, then on the mesh */
        for (int k = 0; k < 2; k++) {
            mt_train_config b = c;
            b.ckpt_in = ckpt;
            b.mesh = k == 0 ? NULL : mesh;
            b.schedule = k == 1 && run >= 2 ? "zb-v" : NULL;
            tr = NULL;
            bool good = saved && mt_trainer_create(&b, &tr) == MT_OK &&
                        mt_trainer_step_count(tr) == HALF;
            double wl = 0, wp = 0;
            for (int s = HALF; good && s < DP_STEPS; s++) {
                mt_step_report r;
                good = mt_trainer_step(tr, &r) == MT_OK;
                wl = fmax(wl, fabs(r.loss - l1[s]) / fabs(l1[s]));
            }
            if (!good) fprintf(stderr, "  [rank %d] %s resume on %s: %s\n", world_rank, name,
                               b.mesh ? b.mesh : "one device", mt_errmsg());
            mt_graph *g = good && k == 0 ? mt_trainer_graph(tr) : NULL;
            for (int i = 0, at = 0; g && i < mt_graph_n_params(g); i++) {
                mt_tensor *p = mt_graph_param_at(g, i);
                for (int64_t j = 0; j < mt_tensor_numel(p) && at + j < n1; j++)
                    wp = fmax(wp, fabs((double)mt_tensor_f32(p)[j] - p1[at + j]) /
                                  fmax(1.0, fabs(p1[at + j])));
                at += (int)mt_tensor_numel(p);
            }
            mt_trainer_free(tr);
            report(good && wl <= 1e-5 && wp <= 1e-4, "%s: checkpoint of %s over %d ranks resumed "
                   "on %s continues 1 device: worst loss difference %.2g, parameters %.2g%s",
                   name, mesh, world_size, k == 0 ? "one device (each rank)" : mesh, wl, wp,
                   k == 0 ? "" : " (not compared: shards)");
        }
        free(p1);
        all_ok(true);   /* every rank has read the file */
        if (world_rank == 0) unlink(ckpt);
    }
    unlink(text);
}

static void trace_case(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_mpi_trace_%d.json", (int)getppid());
    if (world_rank == 0) remove(path);
    mt_launch_opts o = {.mesh = "", .transport = MT_TRANSPORT_MPI, .timeout_s = 60, .trace = path};
    mt_status s = mt_launch(&o, one_psum, NULL);
    bool ok = s == MT_OK;
    if (ok && world_rank == 0) {
        FILE *f = fopen(path, "r");
        char buf[4096] = "";
        if (f) { size_t n = fread(buf, 1, sizeof buf - 1, f); buf[n] = 0; fclose(f); }
        char want[32];
        snprintf(want, sizeof want, "device %d", world_size - 1);
        ok = f && strstr(buf, "traceEvents") && strstr(buf, want);
        remove(path);
    }
    report(ok, "the trace of every rank lands in one file on rank 0");
}

/* Rank 0 cannot write the gathered trace: every rank must return that error,
 * naming the path asked for. (Rank 0 used to fall back to '<path>.0', fail
 * again and name that, while the other ranks returned MT_OK.) */
static void trace_unwritable_case(void) {
    const char *path = "/nonexistent/dir/t.json";
    mt_launch_opts o = {.mesh = "", .transport = MT_TRANSPORT_MPI, .timeout_s = 60, .trace = path};
    mt_status s = mt_launch(&o, one_psum, NULL);
    const char *msg = mt_errmsg();
    bool ok = s == MT_EIO && strstr(msg, "/nonexistent/dir/t.json'") != NULL;
    if (!ok) fprintf(stderr, "  [rank %d] unwritable trace: %s: %s\n", world_rank,
                     mt_status_name(s), msg);
    report(ok, "an unwritable trace fails every rank with MT_EIO naming the path");
}

/* The comm events' "ts" of every track (µs since the launch started), from
 * a trace file: the lowest and the highest first event of a track. */
static bool first_comm_ts(const char *js, double *lo, double *hi) {
    double first[64];
    bool seen[64] = {false};
    for (const char *p = strstr(js, "\"cat\":\"comm\""); p; p = strstr(p + 1, "\"cat\":\"comm\"")) {
        const char *ts = strstr(p, "\"ts\":"), *tid = strstr(p, "\"tid\":");
        double t;
        int d;
        if (!ts || !tid || sscanf(ts, "\"ts\":%lf", &t) != 1 || sscanf(tid, "\"tid\":%d", &d) != 1 ||
            d < 0 || d >= 64)
            return false;
        if (!seen[d]) first[d] = t, seen[d] = true;
    }
    int n = 0;
    for (int d = 0; d < 64; d++) {
        if (!seen[d]) continue;
        if (!n || first[d] < *lo) *lo = first[d];
        if (!n || first[d] > *hi) *hi = first[d];
        n++;
    }
    return n == world_size;
}

/* Rank 1 enters mt_launch 1 s after the others. Trace times count from when
 * every rank is there, so the first psum starts near 0 on every track (it
 * used to start at ~1 s on the tracks of the ranks that waited). */
static void trace_skew_case(void) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_mpi_skew_%d.json", (int)getppid());
    if (world_rank == 0) remove(path);
    if (world_rank == 1) sleep(1);
    mt_launch_opts o = {.mesh = "", .transport = MT_TRANSPORT_MPI, .timeout_s = 60, .trace = path};
    mt_status s = mt_launch(&o, one_psum, NULL);
    bool ok = s == MT_OK;
    double lo = 0, hi = 0;
    if (ok && world_rank == 0) {
        FILE *f = fopen(path, "r");
        static char buf[1 << 16];
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        buf[n] = 0;
        if (f) fclose(f);
        ok = first_comm_ts(buf, &lo, &hi) && hi - lo < 400000;
        remove(path);
    }
    report(ok, "trace tracks line up when a rank launches late (first psum at %.0f..%.0f us)",
           lo, hi);
}

/* Counts MPI cannot take in one call: the message gives the caller's element
 * count and dtype (it used to call a byte count "elements"). Nothing is
 * posted, so the launch goes on. */
static mt_status huge_counts(mt_ctx *ctx, void *arg) {
    char (*msgs)[512] = arg;
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    if (s != MT_OK) return s;
    float tiny[4] = {0};   /* never touched: the count is refused first */
    s = mt_all_reduce(ctx, ax, tiny, (size_t)INT32_MAX + 1, MT_F32, MT_REDUCE_SUM);
    snprintf(msgs[0], 512, "%s %s", mt_status_name(s), mt_errmsg());
    s = mt_psum_scatter(ctx, ax, tiny, tiny, (size_t)INT32_MAX / 2 + 1, MT_BF16);
    snprintf(msgs[1], 512, "%s %s", mt_status_name(s), mt_errmsg());
    return MT_OK;
}

/* What the launch made of this machine: the cores its ranks share and
 * whether a waiting rank may spin (mpi_launch.c's local_ranks). */
static mt_status read_cores(mt_ctx *ctx, void *arg) {
    int *out = arg;
    out[0] = ctx->launch->n_cores;
    out[1] = ctx->launch->may_spin;
    return MT_OK;
}

/* Every rank of this test runs on one machine, so the launch's cores are
 * the union of the ranks' affinity masks (each read here with
 * sched_getaffinity and gathered with plain MPI), and a rank may spin when
 * there are no more ranks than those cores. A colour bug gave each rank of
 * a machine a split of its own: each counted its own core, one, and every
 * rank of `mpirun -np 2` yielded in every wait (an 8-byte all-reduce 3.6 us
 * against MPI's 0.6). */
static void machine_cores_case(void) {
    cpu_set_t mine;
    unsigned long bits = 0, all = 0;
    if (sched_getaffinity(0, sizeof mine, &mine) == 0)
        for (int c = 0; c < (int)(8 * sizeof bits); c++)
            if (CPU_ISSET(c, &mine)) bits |= 1ul << c;
    MPI_Allreduce(&bits, &all, 1, MPI_UNSIGNED_LONG, MPI_BOR, MPI_COMM_WORLD);
    const int want = __builtin_popcountl(all);
    int got[2] = {0, 0};
    mt_launch_opts o = {.mesh = "", .transport = MT_TRANSPORT_MPI, .timeout_s = 60};
    mt_status s = mt_launch(&o, read_cores, got);
    const bool ok = s == MT_OK && got[0] == want && got[1] == (world_size <= want);
    if (!ok)
        fprintf(stderr, "  [rank %d] cores %d (want %d), may spin %d (want %d)\n", world_rank,
                got[0], want, got[1], world_size <= want);
    report(ok, "the launch counts the cores its machine's %d ranks share: %d", world_size, want);
}

/* Device 0 is told of a signal (mt_launch_signal, from a thread here, as
 * from a handler) 0.15 s into its wait for device 1, which comes 0.5 s late
 * to the second psum. */
static void *signal_later(void *arg) {
    (void)arg;
    nanosleep(&(struct timespec){0, 150000000L}, NULL);
    mt_launch_signal(SIGTERM);
    return NULL;
}

static mt_status late_psum(mt_ctx *ctx, void *arg) {
    (void)arg;
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    float v = 1;
    if (s == MT_OK) s = mt_psum(ctx, ax, &v, 1);
    if (mt_ctx_device(ctx) == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, signal_later, NULL) == 0) pthread_detach(t);
    } else {
        nanosleep(&(struct timespec){0, 500000000L}, NULL);
    }
    if (s == MT_OK) s = mt_psum(ctx, ax, &v, 1);
    return s;
}

/* A waiting device told of a signal says at once what it waits for (under
 * mpirun a SIGTERM is Open MPI ending the job after a rank died, and the
 * SIGKILL may come before the timeout): device 0's stderr, caught in a
 * file, names the signal, the collective and device 1's last collective
 * with it; the launch itself goes on and succeeds. */
static void signal_note_case(void) {
    char path[] = "/tmp/mt_test_mpi_signal_XXXXXX";
    int fd = world_rank == 0 ? mkstemp(path) : -1, saved = -1;
    if (fd >= 0) {
        fflush(stderr);
        saved = dup(STDERR_FILENO);
        dup2(fd, STDERR_FILENO);
    }
    mt_launch_opts o = {.mesh = "", .transport = MT_TRANSPORT_MPI, .timeout_s = 60};
    mt_status s = mt_launch(&o, late_psum, NULL);
    char said[2048] = "";
    if (fd >= 0) {
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        ssize_t n = pread(fd, said, sizeof said - 1, 0);
        said[n > 0 ? n : 0] = 0;
        close(fd);
        unlink(path);
    }
    bool ok = s == MT_OK;
    if (world_rank == 0) {
        ok = ok && strstr(said, "meshtrain: device 0: signal 15 after") &&
             strstr(said, "waiting in #2 psum over 'd'") && strstr(said, "device 1: device 0's #1;");
        if (!ok) fprintf(stderr, "  [rank 0] %s; stderr: %s\n", mt_status_name(s), said);
    }
    report(ok, "a device waiting when told of a signal names what for, and goes on");
}

static void count_message_case(void) {
    char msgs[2][512] = {"", ""};
    mt_launch_opts o = {.mesh = "", .transport = MT_TRANSPORT_MPI, .timeout_s = 60};
    mt_status s = mt_launch(&o, huge_counts, msgs);
    char want[64];
    snprintf(want, sizeof want, "%zu bf16 elements", ((size_t)INT32_MAX / 2 + 1) * (size_t)world_size);
    bool ok = s == MT_OK && strstr(msgs[0], "MT_EUNSUPPORTED") &&
              strstr(msgs[0], "2147483648 f32 elements") && strstr(msgs[1], want);
    if (!ok) fprintf(stderr, "  [rank %d] %s\n  %s\n", world_rank, msgs[0], msgs[1]);
    report(ok, "counts above INT_MAX name the element count and dtype");
}

/* ======================================================================== */
/* Blocks above INT_MAX bytes (their own mpirun: ~4 GiB per rank)           */
/* ======================================================================== */

/* A broadcast and a ppermute of 2^31 + 16 bytes, one more than MPI's int
 * count of bytes can say: they used to be refused (MT_EUNSUPPORTED). */
static mt_status large_blocks(mt_ctx *ctx, void *arg) {
    int *bad = arg;
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    if (s != MT_OK) return s;
    const size_t n = ((size_t)1 << 29) + 4;   /* i32: 2^31 + 16 bytes */
    const int me = mt_ctx_device(ctx), P = mt_axis_size(ctx, ax);
    int32_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b) {
        free(a), free(b);
        return mt_fail(MT_ENOMEM, "cannot allocate 2 x %zu i32", n);
    }
    for (size_t i = 0; i < n; i++) a[i] = me == 0 ? (int32_t)(i * 7 + 1) : -1;
    s = mt_broadcast(ctx, ax, a, n, MT_I32, 0);
    for (size_t i = 0; s == MT_OK && i < n; i++)
        if (a[i] != (int32_t)(i * 7 + 1)) {
            fprintf(stderr, "  [rank %d] broadcast: element %zu is %d\n", me, i, (int)a[i]);
            bad[0]++;
            break;
        }
    if (s != MT_OK) fprintf(stderr, "  [rank %d] broadcast: %s\n", me, mt_errmsg()), bad[0]++;
    /* a ring: rank r sends to r + 1 */
    int pairs[64][2];
    for (int r = 0; r < P && r < 64; r++) pairs[r][0] = r, pairs[r][1] = (r + 1) % P;
    for (size_t i = 0; i < n; i++) a[i] = (int32_t)(i + (size_t)me * 1000);
    s = mt_ppermute(ctx, ax, a, b, n, MT_I32, (const int (*)[2])pairs, P);
    const int from = (me + P - 1) % P;
    for (size_t i = 0; s == MT_OK && i < n; i++)
        if (b[i] != (int32_t)(i + (size_t)from * 1000)) {
            fprintf(stderr, "  [rank %d] ppermute: element %zu is %d\n", me, i, (int)b[i]);
            bad[1]++;
            break;
        }
    if (s != MT_OK) fprintf(stderr, "  [rank %d] ppermute: %s\n", me, mt_errmsg()), bad[1]++;
    free(a), free(b);
    return MT_OK;
}

static int large_mode(void) {
    int bad[2] = {0, 0};
    mt_launch_opts o = {.mesh = "", .transport = MT_TRANSPORT_MPI, .timeout_s = 120};
    mt_status s = mt_launch(&o, large_blocks, bad);
    report(s == MT_OK && bad[0] == 0, "broadcast of 2^31 + 16 bytes");
    report(s == MT_OK && bad[1] == 0, "ppermute of 2^31 + 16 bytes");
    if (world_rank == 0) printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail == 0 ? 0 : 1;
}

/* ======================================================================== */
/* Failure modes (each its own mpirun)                                       */
/* ======================================================================== */

static mt_status skip_one(mt_ctx *ctx, void *arg) {
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    float v[4] = {1, 2, 3, 4};
    if (s == MT_OK) s = mt_psum(ctx, ax, v, 4);
    if (s == MT_OK && mt_ctx_device(ctx) != 1) s = mt_psum(ctx, ax, v, 4);   /* device 1 skips */
    return s;
}

/* One psum; then device 1 exits, computes forever outside MPI, or stops
 * itself (as kill -STOP would); then a second psum the others wait in. */
typedef enum { MISBEHAVE_EXIT, MISBEHAVE_HANG, MISBEHAVE_STOP } misbehaviour;

static mt_status misbehave(mt_ctx *ctx, misbehaviour how) {
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    float v = 1;
    if (s == MT_OK) s = mt_psum(ctx, ax, &v, 1);
    if (mt_ctx_device(ctx) == 1) {
        if (how == MISBEHAVE_EXIT) exit(3);
        /* the pid, for mpi_fail.sh to check that the job's end killed it */
        if (how == MISBEHAVE_HANG) {
            fprintf(stderr, "test_mpi: device 1 (pid %d) hangs outside MPI\n", (int)getpid());
            for (;;) sleep(1);
        }
        fprintf(stderr, "test_mpi: device 1 (pid %d) stops itself (SIGSTOP)\n", (int)getpid());
        raise(SIGSTOP);   /* until MPI_Abort kills it */
    }
    if (s == MT_OK) s = mt_psum(ctx, ax, &v, 1);
    return s;
}

static mt_status exit_one(mt_ctx *ctx, void *arg) { return misbehave(ctx, MISBEHAVE_EXIT); }
static mt_status hang_one(mt_ctx *ctx, void *arg) { return misbehave(ctx, MISBEHAVE_HANG); }
static mt_status stop_one(mt_ctx *ctx, void *arg) { return misbehave(ctx, MISBEHAVE_STOP); }

static int failure_mode(const char *mode) {
    static const struct { const char *name; mt_device_fn fn; } modes[] = {
        {"skip", skip_one}, {"exit", exit_one}, {"hang", hang_one}, {"stop", stop_one},
        {"pass", one_psum}, {"stop0", one_psum},
    };
    mt_device_fn fn = NULL;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (strcmp(mode, modes[i].name) == 0) fn = modes[i].fn;
    if (!fn) {
        fprintf(stderr, "test_mpi: unknown mode '%s' (skip, exit, hang, stop, stop0, pass, "
                "large)\n", mode);
        return 2;
    }
    /* the timeout is MT_COMM_TIMEOUT's (mpi_fail.sh sets it, or a bad one) */
    mt_launch_opts o = {.mesh = "", .transport = MT_TRANSPORT_MPI};
    mt_status s = mt_launch(&o, fn, NULL);
    if (s == MT_OK && strcmp(mode, "stop0") == 0) {
        /* rank 0, which names the ranks missing at a launch's start, is the
         * one missing from the next launch */
        if (world_rank == 0) {
            fprintf(stderr, "test_mpi: device 0 (pid %d) stops itself (SIGSTOP) between launches\n",
                    (int)getpid());
            raise(SIGSTOP);
        }
        s = mt_launch(&o, fn, NULL);
    }
    /* not reached when the job is stopped, which is what the test wants */
    printf("rank %d: mt_launch returned %s: %s\n", world_rank, mt_status_name(s), mt_errmsg());
    return s == MT_OK ? 0 : 1;
}

/* pmax / pmin propagate a NaN from any rank (as jax.lax does): MPI's own
 * MAX/MIN keep it only where it happens to be the accumulator. */
static mt_status nan_extrema(mt_ctx *ctx, void *arg) {
    int *bad = arg;
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    int me = mt_ctx_device(ctx);
    for (int holder = 0; holder < world_size && s == MT_OK; holder++)
        for (int op = MT_REDUCE_MAX; op <= MT_REDUCE_MIN && s == MT_OK; op++) {
            float v[4] = {(float)me, -(float)me, 1.0f, 2.0f};
            if (me == holder) v[0] = v[1] = v[2] = v[3] = NAN;
            s = mt_all_reduce(ctx, ax, v, 4, MT_F32, (mt_reduce_op)op);
            for (int i = 0; i < 4 && s == MT_OK; i++)
                if (v[i] == v[i]) (*bad)++;
        }
    return s;
}

static void nan_case(void) {
    int bad = 0;
    mt_launch_opts o = {.mesh = "d=-1", .transport = MT_TRANSPORT_MPI, .timeout_s = 60};
    mt_status s = mt_launch(&o, nan_extrema, &bad);
    report(s == MT_OK && bad == 0, "pmax/pmin keep a NaN from any rank (%d elements lost it)", bad);
}

/* Every ordered set of axes of a 4-axis mesh (64 groups) in one launch: the
 * communicator cache must grow past any fixed size. */
static int ordered_sets(char (*out)[16]) {
    static const char *names[4] = {"w", "x", "y", "z"};
    int n = 0;
    for (int a = 0; a < 4; a++) {
        snprintf(out[n++], 16, "%s", names[a]);
        for (int b = 0; b < 4; b++) {
            if (b == a) continue;
            snprintf(out[n++], 16, "%s,%s", names[a], names[b]);
            for (int c = 0; c < 4; c++) {
                if (c == a || c == b) continue;
                snprintf(out[n++], 16, "%s,%s,%s", names[a], names[b], names[c]);
                snprintf(out[n++], 16, "%s,%s,%s,%s", names[a], names[b], names[c],
                         names[6 - a - b - c]);
            }
        }
    }
    return n;
}

static mt_status many_groups(mt_ctx *ctx, void *arg) {
    char sets[64][16];
    int n = ordered_sets(sets), *bad = arg;
    for (int k = 0; k < n; k++) {
        mt_axes ax;
        mt_status s = mt_ctx_axes(ctx, sets[k], &ax);
        float v = 1;
        if (s == MT_OK) s = mt_psum(ctx, ax, &v, 1);
        if (s != MT_OK) return s;
        if (v != (float)mt_axis_size(ctx, ax)) (*bad)++;
    }
    return MT_OK;
}

static void many_groups_case(void) {
    if (world_size != 2 && world_size != 4) return;
    const char *mesh = world_size == 4 ? "w=2,x=2,y=1,z=1" : "w=2,x=1,y=1,z=1";
    int bad = 0;
    mt_launch_opts o = {.mesh = mesh, .transport = MT_TRANSPORT_MPI, .timeout_s = 60};
    mt_status s = mt_launch(&o, many_groups, &bad);
    if (s != MT_OK) fprintf(stderr, "  [rank %d] many groups: %s\n", world_rank, mt_errmsg());
    report(s == MT_OK && bad == 0, "64 ordered axis sets of mesh %s in one launch", mesh);
}

/* ======================================================================== */
/* Point-to-point messages                                                   */
/* ======================================================================== */

/* Element i of the message device `sender` sends with `tag` (exact in f32). */
static float pval(int sender, int tag, size_t i) {
    return (float)(sender * 100000 + tag * 1000 + (int)(i % 997));
}

/* The first element of buf (n) that is not the message of (sender, tag), -1 none. */
static long bad_element(const float *buf, size_t n, int sender, int tag) {
    for (size_t i = 0; i < n; i++)
        if (buf[i] != pval(sender, tag, i)) return (long)i;
    return -1;
}

/* The calling device's place in the ring over `names`: the axes, the ring's
 * size, this device's rank and id, the ranks after and before it, and the
 * device id of the one before. */
typedef struct {
    mt_axes ax;
    int     P, r, me, next, prev, from;
} ring_pos;

static mt_status ring_of(mt_ctx *ctx, const char *names, ring_pos *p) {
    mt_status s = mt_ctx_axes(ctx, names, &p->ax);
    if (s != MT_OK) return s;
    int members[64];
    p->me = mt_ctx_device(ctx);
    p->P = mt_mesh_group(mt_ctx_mesh(ctx), p->ax, p->me, members);
    p->r = mt_axis_index(ctx, p->ax);
    p->next = (p->r + 1) % p->P;
    p->prev = (p->r + p->P - 1) % p->P;
    p->from = members[p->prev];
    return MT_OK;
}

typedef struct {
    const char *axes;
    int         bad;
} ring_arg;

/* A ring over the case's axes: every device sends tags 1, 2, 3 (10·tag
 * elements) and five messages on tag 4 to rank r+1 and one to itself, then
 * takes them in the order 3, 1, 2, self, the five of tag 4 (in send order).
 * Then a psum, which in check mode must pass although rank 0 sent and
 * received one message more than the others before it. */
static mt_status p2p_ring(mt_ctx *ctx, void *arg) {
    ring_arg *a = arg;
    ring_pos q;
    mt_status s = ring_of(ctx, a->axes, &q);
    float buf[40];
    for (int tag = 1; tag <= 4 && s == MT_OK; tag++)
        for (int k = 0; k < (tag == 4 ? 5 : 1) && s == MT_OK; k++) {
            for (int i = 0; i < 40; i++) buf[i] = pval(q.me, tag, (size_t)i + (size_t)k);
            s = mt_send(ctx, q.ax, buf, tag == 4 ? 1 : (size_t)tag * 10, MT_F32, q.next, tag);
        }
    for (int i = 0; i < 40; i++) buf[i] = pval(q.me, 9, (size_t)i);
    if (s == MT_OK) s = mt_send(ctx, q.ax, buf, 40, MT_F32, q.r, 9);
    static const int order[] = {3, 1, 2};
    for (int j = 0; j < 3 && s == MT_OK; j++) {
        const size_t n = (size_t)order[j] * 10;
        if ((s = mt_recv(ctx, q.ax, buf, n, MT_F32, q.prev, order[j])) == MT_OK &&
            bad_element(buf, n, q.from, order[j]) >= 0)
            a->bad++;
    }
    if (s == MT_OK && (s = mt_recv(ctx, q.ax, buf, 40, MT_F32, q.r, 9)) == MT_OK &&
        bad_element(buf, 40, q.me, 9) >= 0)
        a->bad++;
    for (int k = 0; k < 5 && s == MT_OK; k++)
        if ((s = mt_recv(ctx, q.ax, buf, 1, MT_F32, q.prev, 4)) == MT_OK &&
            buf[0] != pval(q.from, 4, (size_t)k))
            a->bad++;
    if (s == MT_OK && q.r == 0 && !(s = mt_send(ctx, q.ax, buf, 1, MT_F32, 0, 8)))
        s = mt_recv(ctx, q.ax, buf, 1, MT_F32, 0, 8);
    float one = 1;
    if (s == MT_OK && !(s = mt_psum(ctx, q.ax, &one, 1)) && one != (float)q.P) a->bad++;
    return s;
}

static void p2p_ring_case(const char *mesh, const char *axes, bool check) {
    ring_arg a = {.axes = axes};
    mt_launch_opts o = {.mesh = mesh, .transport = MT_TRANSPORT_MPI, .timeout_s = 60,
                        .check = check};
    mt_status s = mt_launch(&o, p2p_ring, &a);
    if (s != MT_OK) fprintf(stderr, "  [rank %d] %s\n", world_rank, mt_errmsg());
    report(s == MT_OK && a.bad == 0, "send/recv ring  mesh %-10s over '%s'%s: tags 3,1,2, self, "
           "FIFO", mesh, axes, check ? " (check mode)" : "");
}

/* 64 MiB to the next rank, past any eager limit, while the receiver posts
 * its receive late: each rank sends the large message, then a small one on
 * another tag, and receives the small one first. A send that waited for its
 * receive would never get to the small one. */
#define BIG_N ((size_t)16 << 20)   /* f32: 64 MiB */

static mt_status p2p_large(mt_ctx *ctx, void *arg) {
    int *bad = arg;
    ring_pos q;
    mt_status s = ring_of(ctx, "d", &q);
    float *big = malloc(BIG_N * sizeof *big), small = (float)q.me;
    if (s != MT_OK || !big) {
        free(big);
        return s != MT_OK ? s : mt_fail(MT_ENOMEM, "64 MiB");
    }
    for (size_t i = 0; i < BIG_N; i++) big[i] = pval(q.me, 1, i);
    double t0 = MPI_Wtime();
    s = mt_send(ctx, q.ax, big, BIG_N, MT_F32, q.next, 1);
    double took = MPI_Wtime() - t0;
    memset(big, 0, BIG_N * sizeof *big);   /* the caller's buffer is free at once */
    if (s == MT_OK) s = mt_send(ctx, q.ax, &small, 1, MT_F32, q.next, 2);
    /* something else, outside MPI, while the peer's receive is not posted */
    usleep(200000);
    if (s == MT_OK) s = mt_recv(ctx, q.ax, &small, 1, MT_F32, q.prev, 2);
    if (s == MT_OK && small != (float)q.from) (*bad)++;
    if (s == MT_OK) s = mt_recv(ctx, q.ax, big, BIG_N, MT_F32, q.prev, 1);
    long at = s == MT_OK ? bad_element(big, BIG_N, q.from, 1) : -1;
    if (at >= 0) {
        fprintf(stderr, "  [rank %d] 64 MiB from %d: element %ld is %g\n", q.me, q.from, at,
                big[at]);
        (*bad)++;
    }
    if (took > 1.0) {
        fprintf(stderr, "  [rank %d] sending 64 MiB took %.2f s\n", q.me, took);
        (*bad)++;
    }
    free(big);
    return s;
}

/* A receive of the wrong size: MT_ESHAPE naming both sizes; the message is
 * dropped and the next one of the channel comes through. */
static mt_status p2p_shape(mt_ctx *ctx, void *arg) {
    char *msg = arg;
    ring_pos q;
    mt_status s = ring_of(ctx, "d", &q);
    float buf[12];
    for (int i = 0; i < 12; i++) buf[i] = pval(q.me, 5, (size_t)i);
    if (s || (s = mt_send(ctx, q.ax, buf, 10, MT_F32, q.next, 5)) ||
        (s = mt_send(ctx, q.ax, buf, 12, MT_F32, q.next, 5)))
        return s;
    s = mt_recv(ctx, q.ax, buf, 12, MT_F32, q.prev, 5);
    snprintf(msg, 512, "%s %s", mt_status_name(s), mt_errmsg());
    if ((s = mt_recv(ctx, q.ax, buf, 12, MT_F32, q.prev, 5))) return s;
    return bad_element(buf, 12, q.from, 5) < 0 ? MT_OK : mt_fail(MT_EINTERNAL, "wrong data");
}

/* Device 0 waits for a message device 1 never sends; or, `fail`, device 1
 * fails while device 0 waits. */
static mt_status p2p_never(mt_ctx *ctx, void *arg) {
    const bool fail = arg != NULL;
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    if (s != MT_OK || mt_ctx_device(ctx) > 1) return s;
    float x = 0;
    if (mt_ctx_device(ctx) == 0) return mt_recv(ctx, ax, &x, 1, MT_F32, 1, 9);
    if (!fail) return MT_OK;
    usleep(100000);
    return mt_fail(MT_EINVAL, "device 1 fails on purpose");
}

/* Device 0 sends device 1 a message that is never received: 16 bytes (mode
 * 0) or 64 MiB (1); or (2) device 1 sends device 0 one and then fails, and
 * its failure, not the message, is the launch's. */
static mt_status p2p_unreceived(mt_ctx *ctx, void *arg) {
    const int mode = *(const int *)arg, from = mode == 2 ? 1 : 0;
    const size_t n = mode == 1 ? BIG_N : 4;
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "d", &ax);
    if (s != MT_OK || mt_ctx_device(ctx) != from) return s;
    float *x = calloc(n, sizeof *x);
    if (!x) return mt_fail(MT_ENOMEM, "test buffer");
    s = mt_send(ctx, ax, x, n, MT_F32, 1 - from, 3);
    free(x);
    return s == MT_OK && mode == 2 ? mt_fail(MT_EINVAL, "device 1 fails after sending") : s;
}

static void p2p_cases(void) {
    char one_d[32], two_d[32];
    snprintf(one_d, sizeof one_d, "d=%d", world_size);
    p2p_ring_case(one_d, "d", false);
    p2p_ring_case(one_d, "d", true);
    if (world_size % 2 == 0 && world_size > 2) {
        snprintf(two_d, sizeof two_d, "a=2,b=%d", world_size / 2);
        const char *over[] = {"a", "b", "a,b", "b,a"};
        for (int i = 0; i < 4; i++) p2p_ring_case(two_d, over[i], false);
    }
    mt_launch_opts o = {.mesh = one_d, .transport = MT_TRANSPORT_MPI, .timeout_s = 60};
    int bad = 0;
    mt_status s = mt_launch(&o, p2p_large, &bad);
    if (s != MT_OK) fprintf(stderr, "  [rank %d] %s\n", world_rank, mt_errmsg());
    report(s == MT_OK && bad == 0, "send 64 MiB, receive it late (the sender goes on at once)");

    char msg[512] = "";
    s = mt_launch(&o, p2p_shape, msg);
    bool ok = s == MT_OK && strstr(msg, "MT_ESHAPE") && strstr(msg, "holds 40 bytes") &&
              strstr(msg, "expects 48 (12 f32 elements)") && strstr(msg, "tag 5");
    if (!ok) fprintf(stderr, "  [rank %d] %s / %s\n", world_rank, mt_errmsg(), msg);
    report(ok, "a receive of the wrong size: MT_ESHAPE naming both sizes, message dropped");

    mt_launch_opts quick = o;
    quick.timeout_s = 1;
    double t0 = MPI_Wtime();
    s = mt_launch(&quick, p2p_never, NULL);
    ok = s == MT_ETIMEOUT && strstr(mt_errmsg(), "device 0: timed out after 1 s in #1 recv from "
                                    "device 1 over 'd' tag 9") &&
         strstr(mt_errmsg(), "no message arrived from device 1") &&
         strstr(mt_errmsg(), "device 1's last operation: none yet; it has finished");
    if (!ok) fprintf(stderr, "  [rank %d] %s: %s\n", world_rank, mt_status_name(s), mt_errmsg());
    report(ok, "a receive whose sender never sends times out naming it (%.1f s)", MPI_Wtime() - t0);

    t0 = MPI_Wtime();
    s = mt_launch(&o, p2p_never, (void *)1);
    ok = s == MT_EINVAL && strstr(mt_errmsg(), "device 1: device 1 fails on purpose") &&
         MPI_Wtime() - t0 < 10;
    if (!ok) fprintf(stderr, "  [rank %d] %s: %s\n", world_rank, mt_status_name(s), mt_errmsg());
    report(ok, "a sender that fails stops its waiting receiver (%.2f s)", MPI_Wtime() - t0);

    for (int big = 0; big < 2; big++) {
        s = mt_launch(&o, p2p_unreceived, &big);
        char want[128];
        snprintf(want, sizeof want, "from device 0 over 'd' tag 3, %zu bytes",
                 (big ? BIG_N : 4) * sizeof(float));
        ok = s == MT_ESTATE && strstr(mt_errmsg(), "device 1: 1 message sent to this device was "
                                      "never received") && strstr(mt_errmsg(), want);
        if (!ok) fprintf(stderr, "  [rank %d] %s: %s\n", world_rank, mt_status_name(s), mt_errmsg());
        report(ok, "a message never received (%s) fails the launch", big ? "64 MiB" : "16 bytes");
    }
    int mode = 2;
    s = mt_launch(&o, p2p_unreceived, &mode);
    ok = s == MT_EINVAL && strstr(mt_errmsg(), "device 1: device 1 fails after sending");
    if (!ok) fprintf(stderr, "  [rank %d] %s: %s\n", world_rank, mt_status_name(s), mt_errmsg());
    report(ok, "a failure that leaves a message unreceived is the launch's failure");
}

int main(int argc, char **argv) {
    if (argc > 1) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &(int){0});
        MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &world_size);
        int rc = strcmp(argv[1], "large") == 0 ? large_mode() : failure_mode(argv[1]);
        MPI_Finalize();
        return rc;
    }
    /* meshtrain initialises MPI in the first launch (and finalises it at exit) */
    mt_launch_opts o = {.mesh = "", .transport = MT_TRANSPORT_MPI};
    mt_status s = mt_launch(&o, noop, NULL);
    if (s != MT_OK) {
        fprintf(stderr, "test_mpi: the first launch failed: %s\n", mt_errmsg());
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (world_rank == 0) printf("test_mpi: %d ranks\n", world_size);

    char one_d[32], two_d[32], two_d_t[32];
    snprintf(one_d, sizeof one_d, "d=%d", world_size);
    collective_case(one_d, "d");
    if (world_size % 2 == 0) {
        snprintf(two_d, sizeof two_d, "a=2,b=%d", world_size / 2);
        snprintf(two_d_t, sizeof two_d_t, "a=%d,b=2", world_size / 2);
        const char *over[] = {"a", "b", "a,b", "b,a"};
        for (int i = 0; i < 4; i++) collective_case(two_d, over[i]);
        if (world_size > 2) collective_case(two_d_t, "b");
    }
    failure_cases();
    linreg_case();
    /* the trainings' batch of 8 splits over 1, 2, 4 or 8 ranks (3 runs the
       collectives, the small all-reduce's fold among them) */
    if (8 % world_size == 0) dp_trainer_case();
    else if (world_rank == 0) printf("skip trainers: batch 8 does not split over %d ranks\n", world_size);
    pipeline_case();
    if (8 % world_size == 0) ckpt_resume_case();
    trace_case();
    trace_unwritable_case();
    trace_skew_case();
    count_message_case();
    machine_cores_case();
    signal_note_case();
    nan_case();
    many_groups_case();
    p2p_cases();
    if (world_rank == 0) printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail == 0 ? 0 : 1;
}
