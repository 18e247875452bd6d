/*
 * test_comm.c — launch and collectives on the threads transport, each
 * against a naive reference computed in the test.
 *
 * Every device fills its send buffer from a formula of (device, element), so
 * what any collective must produce is computable on the device itself without
 * communicating. Values are small integers: sums are exact in f32 and bf16,
 * whatever order a transport reduces in.
 *
 * Failure cases really fire: a device that skips a collective (timeout naming
 * it), a device that fails (everyone else aborted, no hang), and the debug
 * check catching a mismatched count. Also the launcher's environment and the
 * rule that picks a transport from it, and the timeout's settings: a bad
 * MT_COMM_TIMEOUT or opts.timeout_s is refused before any device runs.
 *
 * Point-to-point messages (mt_send / mt_recv): rings over each axis of a 2-D
 * mesh, tags taken out of order, FIFO within a tag, self-sends, many large
 * messages in flight before any receive, and the failures: a size mismatch,
 * a receive whose sender never sends (timeout naming it), a sender that
 * fails while its receiver waits, bad arguments, messages never received.
 *
 * Placement: with more devices than CPUs, the devices pinned in blocks a
 * CPU, colocated axes innermost (each device reads its own affinity).
 */
#define _GNU_SOURCE   /* sched_getaffinity / sched_setaffinity / CPU_COUNT */
#include "harness.h"
#include "meshtrain.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

/* ======================================================================== */
/* Helpers                                                                   */
/* ======================================================================== */

/* The value device d holds at element i of buffer `salt`: an integer in [-8, 8]. */
static int val(int d, size_t i, int salt) {
    return (int)((d * 7 + (int64_t)(i % 100003) * 3 + salt * 5) % 17) - 8;
}

static float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t f32_to_bf16(float f) {   /* exact for the small integers used here */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

/* Element i of a buffer of `dtype` as a double, and back. */
static double get(const void *p, mt_dtype dt, size_t i) {
    if (dt == MT_F32) return ((const float *)p)[i];
    if (dt == MT_I32) return ((const int32_t *)p)[i];
    return bf16_to_f32(((const uint16_t *)p)[i]);
}

static void put(void *p, mt_dtype dt, size_t i, double v) {
    if (dt == MT_F32) ((float *)p)[i] = (float)v;
    else if (dt == MT_I32) ((int32_t *)p)[i] = (int32_t)v;
    else ((uint16_t *)p)[i] = f32_to_bf16((float)v);
}

static const char *dt_name(mt_dtype dt) {
    return dt == MT_F32 ? "f32" : dt == MT_I32 ? "i32" : "bf16";
}

/* Fails the device (so the launch) unless got == want. */
#define DEV_EXPECT(got, want, ...)                                                         \
    do {                                                                                   \
        double g_ = (got), w_ = (want);                                                    \
        if (g_ != w_) {                                                                    \
            char b_[200];                                                                  \
            snprintf(b_, sizeof b_, __VA_ARGS__);                                          \
            return mt_fail(MT_EINTERNAL, "%s: got %g, want %g", b_, g_, w_);               \
        }                                                                                  \
    } while (0)

#define DEV_OK(call)                                                                       \
    do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

/* Fails the device unless a call returned `code` with a message containing
 * every string given (as MT_CHECK_FAILS, inside a device function). */
#define DEV_FAILS(call, code, ...)                                                         \
    do {                                                                                   \
        mt_status s_ = (call);                                                             \
        const char *want_[] = {__VA_ARGS__};                                               \
        bool named_ = s_ == (code);                                                        \
        for (size_t i_ = 0; i_ < sizeof want_ / sizeof want_[0]; i_++)                     \
            named_ = named_ && strstr(mt_errmsg(), want_[i_]);                             \
        if (!named_)                                                                       \
            return mt_fail(MT_EINTERNAL, "%s -> %s '%s', want %s naming '%s'", #call,      \
                           mt_status_name(s_), mt_errmsg(), #code, want_[0]);              \
    } while (0)

static mt_launch_opts opts_for(const char *mesh, int devices) {
    mt_launch_opts o;
    memset(&o, 0, sizeof o);
    o.mesh = mesh;
    o.devices = devices;
    o.transport = MT_TRANSPORT_THREADS;
    o.timeout_s = 60;   /* a hang fails well inside the harness's limit */
    return o;
}

/* The group of the calling device over `axes`: members in rank order. */
typedef struct {
    int P, r;
    int members[64];
} grp;

static mt_status group_of(mt_ctx *ctx, const char *names, mt_axes *ax, grp *g) {
    DEV_OK(mt_ctx_axes(ctx, names, ax));
    g->P = mt_mesh_group(mt_ctx_mesh(ctx), *ax, mt_ctx_device(ctx), g->members);
    g->r = mt_axis_index(ctx, *ax);
    DEV_EXPECT(mt_axis_size(ctx, *ax), g->P, "axis_size over '%s'", names);
    DEV_EXPECT(g->members[g->r], mt_ctx_device(ctx), "axis_index over '%s'", names);
    return MT_OK;
}

/* ======================================================================== */
/* Flat collectives                                                          */
/* ======================================================================== */

typedef struct {
    const char *axes;
    size_t      count;
} flat_arg;

static mt_status check_all_reduce(mt_ctx *ctx, mt_axes ax, const grp *g, size_t n, mt_dtype dt,
                                  mt_reduce_op op) {
    size_t es = mt_dtype_size(dt);
    void *buf = malloc(n * es + 1);
    if (!buf) return mt_fail(MT_ENOMEM, "test buffer");
    int me = mt_ctx_device(ctx), salt = (int)dt * 3 + (int)op;
    for (size_t i = 0; i < n; i++) put(buf, dt, i, val(me, i, salt));
    mt_status st = mt_all_reduce(ctx, ax, buf, n, dt, op);
    for (size_t i = 0; st == MT_OK && i < n; i++) {
        double want = val(g->members[0], i, salt);
        for (int j = 1; j < g->P; j++) {
            double v = val(g->members[j], i, salt);
            want = op == MT_REDUCE_SUM ? want + v : op == MT_REDUCE_MAX ? (v > want ? v : want)
                                                                         : (v < want ? v : want);
        }
        if (get(buf, dt, i) != want)
            st = mt_fail(MT_EINTERNAL, "all_reduce %s op %d count %zu: element %zu is %g, want %g",
                         dt_name(dt), (int)op, n, i, get(buf, dt, i), want);
    }
    free(buf);
    return st;
}

static mt_status flat_device(mt_ctx *ctx, void *arg) {
    const flat_arg *a = arg;
    mt_axes ax;
    grp g;
    DEV_OK(group_of(ctx, a->axes, &ax, &g));
    const size_t n = a->count;
    const int me = mt_ctx_device(ctx), P = g.P, r = g.r;

    /* all-reduce: every dtype and reduction */
    static const mt_dtype dts[3] = {MT_F32, MT_I32, MT_BF16};
    for (int t = 0; t < 3; t++)
        for (int op = 0; op < 3; op++) DEV_OK(check_all_reduce(ctx, ax, &g, n, dts[t], (mt_reduce_op)op));

    float *x = malloc((n + 1) * sizeof *x);            /* (n) */
    float *big = malloc(((size_t)P * n + 1) * sizeof *big);  /* (P, n) */
    float *out = malloc(((size_t)P * n + 1) * sizeof *out);  /* (P, n) */
    if (!x || !big || !out) return mt_fail(MT_ENOMEM, "test buffers");
    mt_status st = MT_OK;
#define FAIL_IF(cond, ...) do { if (cond) { st = mt_fail(MT_EINTERNAL, __VA_ARGS__); goto out; } } while (0)

    /* pmean, psum, pmax wrappers */
    for (size_t i = 0; i < n; i++) x[i] = (float)val(me, i, 1);
    if ((st = mt_pmean(ctx, ax, x, n))) goto out;
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < P; j++) s += val(g.members[j], i, 1);
        FAIL_IF(x[i] != (float)(s / P), "pmean[%zu] = %g, want %g", i, x[i], s / P);
    }

    /* all_gather: out (P, n) */
    for (size_t i = 0; i < n; i++) x[i] = (float)val(me, i, 2);
    if ((st = mt_all_gather(ctx, ax, x, out, n, MT_F32))) goto out;
    for (int j = 0; j < P; j++)
        for (size_t i = 0; i < n; i++)
            FAIL_IF(out[(size_t)j * n + i] != val(g.members[j], i, 2), "all_gather[%d][%zu]", j, i);

    /* psum_scatter: big (P, n) → x (n) = Σ_j big_j[r] */
    for (size_t i = 0; i < (size_t)P * n; i++) big[i] = (float)val(me, i, 3);
    if ((st = mt_psum_scatter(ctx, ax, big, x, n, MT_F32))) goto out;
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < P; j++) s += val(g.members[j], (size_t)r * n + i, 3);
        FAIL_IF(x[i] != s, "psum_scatter[%zu] = %g, want %g", i, x[i], s);
    }

    /* all_to_all: out[j] = device j's big[r] */
    for (size_t i = 0; i < (size_t)P * n; i++) big[i] = (float)val(me, i, 4);
    if ((st = mt_all_to_all(ctx, ax, big, out, n, MT_F32))) goto out;
    for (int j = 0; j < P; j++)
        for (size_t i = 0; i < n; i++)
            FAIL_IF(out[(size_t)j * n + i] != val(g.members[j], (size_t)r * n + i, 4),
                    "all_to_all[%d][%zu]", j, i);

    /* ppermute, a ring shift: rank j sends to j+1 */
    int ring[64][2];
    for (int j = 0; j < P; j++) { ring[j][0] = j; ring[j][1] = (j + 1) % P; }
    for (size_t i = 0; i < n; i++) x[i] = (float)val(me, i, 5);
    if ((st = mt_ppermute(ctx, ax, x, out, n, MT_F32, (const int (*)[2])ring, P))) goto out;
    for (size_t i = 0; i < n; i++)
        FAIL_IF(out[i] != val(g.members[(r + P - 1) % P], i, 5), "ring ppermute[%zu]", i);

    /* ppermute, one pair: only rank P-1 receives (from 0); the rest get zeros */
    int one[1][2] = {{0, P - 1}};
    for (size_t i = 0; i < n; i++) out[i] = 99;
    if ((st = mt_ppermute(ctx, ax, x, out, n, MT_F32, (const int (*)[2])one, 1))) goto out;
    for (size_t i = 0; i < n; i++)
        FAIL_IF(out[i] != (r == P - 1 ? val(g.members[0], i, 5) : 0), "one-pair ppermute[%zu] "
                "on rank %d = %g", i, r, out[i]);

    /* broadcast from the last rank */
    for (size_t i = 0; i < n; i++) x[i] = (float)val(me, i, 6);
    if ((st = mt_broadcast(ctx, ax, x, n, MT_F32, P - 1))) goto out;
    for (size_t i = 0; i < n; i++)
        FAIL_IF(x[i] != val(g.members[P - 1], i, 6), "broadcast[%zu]", i);

    if ((st = mt_barrier(ctx, ax))) goto out;
    /* every collective above is recorded: 9 all-reduces + 8 */
    FAIL_IF(mt_ctx_collectives(ctx) != 17, "%llu collectives recorded, want 17",
            (unsigned long long)mt_ctx_collectives(ctx));
    FAIL_IF(strncmp(mt_ctx_last_collective(ctx), "#17 barrier over", 16) != 0,
            "last collective '%s'", mt_ctx_last_collective(ctx));
out:
#undef FAIL_IF
    free(x);
    free(big);
    free(out);
    return st;
}

static void run_flat(const char *mesh, int devices, const char *axes, size_t count) {
    mt_launch_opts o = opts_for(mesh, devices);
    flat_arg a = {axes, count};
    mt_status st = mt_launch(&o, flat_device, &a);
    MT_CHECK(st == MT_OK, "mesh '%s' (%d devices) over '%s', count %zu: %s: %s", mesh, devices,
             axes, count, mt_status_name(st), mt_errmsg());
}

/* 0, 1, odd, and both sides of the latency/bandwidth switches (1 KiB with
 * spinning devices, 4 KiB with more devices than cores) */
static const size_t SIZES[] = {0, 1, 255, 257, 1001, 1025, 4099};

/* pmap: a 1-axis launch named by the caller; Σ axis_index over 5 devices. */
static mt_status pmap_body(mt_ctx *ctx, void *arg) {
    mt_axes ax;
    mt_status s = mt_ctx_axes(ctx, "batch", &ax);
    if (s != MT_OK) return s;
    float v = (float)mt_axis_index(ctx, ax);
    if ((s = mt_psum(ctx, ax, &v, 1)) != MT_OK) return s;
    if (v != 10.0f || mt_axis_size(ctx, ax) != 5)
        return mt_fail(MT_EINTERNAL, "device %d: psum of axis_index %g, size %d", mt_ctx_device(ctx),
                       (double)v, mt_axis_size(ctx, ax));
    return MT_OK;
}

MT_TEST(pmap_is_a_one_axis_launch) {
    MT_CHECK_OK(mt_pmap("batch", 5, pmap_body, NULL));
    MT_CHECK(mt_pmap("batch", 0, pmap_body, NULL) != MT_OK, "0 devices outside MPI");
}

MT_TEST(flat_1d_meshes) {
    static const int devs[] = {1, 2, 3, 4, 8};
    for (size_t d = 0; d < sizeof devs / sizeof devs[0]; d++)
        for (size_t s = 0; s < sizeof SIZES / sizeof SIZES[0]; s++)
            run_flat("d=-1", devs[d], "d", SIZES[s]);
}

MT_TEST(flat_2d_meshes) {
    static const char *axes[] = {"a", "b", "a,b", "b,a"};
    for (size_t k = 0; k < 4; k++)
        for (size_t s = 0; s < sizeof SIZES / sizeof SIZES[0]; s++) {
            run_flat("a=2,b=2", 4, axes[k], SIZES[s]);
            run_flat("a=2,b=4", 8, axes[k], SIZES[s]);
        }
}

/* ~1M elements: the bandwidth path with many blocks per chunk (a quarter
 * of that under a sanitizer, still thousands of blocks) */
MT_TEST(flat_large) {
    const int n = MT_TEST_SANITIZED ? 1 << 18 : 1 << 20;
    run_flat("d=2", 2, "d", n);
    run_flat("d=3", 3, "d", n + 7);
    run_flat("a=2,b=4", 8, "b,a", n / 4);
}

/* ======================================================================== */
/* Dimensioned forms                                                         */
/* ======================================================================== */

static size_t numel(const int64_t *s, int nd) {
    size_t n = 1;
    for (int i = 0; i < nd; i++) n *= (size_t)s[i];
    return n;
}

static size_t flat_index(const int64_t *s, int nd, const int64_t *idx) {
    size_t f = 0;
    for (int i = 0; i < nd; i++) f = f * (size_t)s[i] + (size_t)idx[i];
    return f;
}

static void unflatten(const int64_t *s, int nd, size_t f, int64_t *idx) {
    for (int i = nd - 1; i >= 0; i--) { idx[i] = (int64_t)(f % (size_t)s[i]); f /= (size_t)s[i]; }
}

static mt_status dims_device(mt_ctx *ctx, void *arg) {
    const char *names = arg;
    mt_axes ax;
    grp g;
    DEV_OK(group_of(ctx, names, &ax, &g));
    const int P = g.P, r = g.r, me = mt_ctx_device(ctx);
    const int64_t base[3] = {2, 3, 5};
    float *send = malloc(4096 * sizeof(float)), *recv = malloc(4096 * sizeof(float));
    if (!send || !recv) return mt_fail(MT_ENOMEM, "test buffers");
    mt_status st = MT_OK;
#define FAIL_IF(cond, ...) do { if (cond) { st = mt_fail(MT_EINTERNAL, __VA_ARGS__); goto out; } } while (0)

    for (int dim = 0; dim < 3; dim++) {
        /* all_gather: tiled concatenates on dim; stacked inserts P before dim */
        for (int tiled = 0; tiled < 2; tiled++) {
            size_t n = numel(base, 3);
            for (size_t i = 0; i < n; i++) send[i] = (float)val(me, i, 10 + dim);
            if ((st = mt_all_gather_dim(ctx, ax, send, recv, MT_F32, 3, base, dim, tiled))) goto out;
            int64_t os[4];
            int ond = 0;
            for (int i = 0; i < 3; i++) {
                if (i == dim && !tiled) os[ond++] = P;
                os[ond++] = i == dim && tiled ? P * base[i] : base[i];
            }
            for (size_t f = 0; f < (size_t)P * n; f++) {
                int64_t idx[4], src[3];
                unflatten(os, ond, f, idx);
                int j;
                if (tiled) {
                    memcpy(src, idx, sizeof src);
                    j = (int)(idx[dim] / base[dim]);
                    src[dim] = idx[dim] % base[dim];
                } else {
                    j = (int)idx[dim];
                    for (int i = 0, k = 0; i < 4; i++) if (i != dim) src[k++] = idx[i];
                }
                float want = (float)val(g.members[j], flat_index(base, 3, src), 10 + dim);
                FAIL_IF(recv[f] != want, "all_gather_dim dim %d %s: element %zu is %g, want %g",
                        dim, tiled ? "tiled" : "stacked", f, recv[f], want);
            }
        }
        /* psum_scatter: tiled splits dim into P blocks; untiled needs dim == P, drops it */
        for (int tiled = 0; tiled < 2; tiled++) {
            int64_t s[3] = {base[0], base[1], base[2]};
            s[dim] = tiled ? 2 * P : P;
            size_t n = numel(s, 3);
            for (size_t i = 0; i < n; i++) send[i] = (float)val(me, i, 20 + dim);
            if ((st = mt_psum_scatter_dim(ctx, ax, send, recv, MT_F32, 3, s, dim, tiled))) goto out;
            int64_t os[3];
            int ond = 0;
            for (int i = 0; i < 3; i++) {
                if (i == dim && !tiled) continue;
                os[ond++] = i == dim ? s[i] / P : s[i];
            }
            for (size_t f = 0; f < n / (size_t)P; f++) {
                int64_t idx[3], src[3];
                unflatten(os, ond, f, idx);
                if (tiled) {
                    memcpy(src, idx, sizeof src);
                    src[dim] = r * (s[dim] / P) + idx[dim];
                } else {
                    for (int i = 0, k = 0; i < 3; i++) src[i] = i == dim ? r : idx[k++];
                }
                double want = 0;
                for (int j = 0; j < P; j++) want += val(g.members[j], flat_index(s, 3, src), 20 + dim);
                FAIL_IF(recv[f] != want, "psum_scatter_dim dim %d %s: element %zu is %g, want %g",
                        dim, tiled ? "tiled" : "untiled", f, recv[f], want);
            }
        }
        /* all_to_all: split `dim`, concatenate on every dim */
        for (int cd = 0; cd < 3; cd++) {
            int64_t s[3] = {base[0], base[1], base[2]};
            s[dim] = 2 * P;
            size_t n = numel(s, 3);
            for (size_t i = 0; i < n; i++) send[i] = (float)val(me, i, 30 + dim * 3 + cd);
            if ((st = mt_all_to_all_dim(ctx, ax, send, recv, MT_F32, 3, s, dim, cd))) goto out;
            int64_t bs[3] = {s[0], s[1], s[2]}, os[3];
            bs[dim] /= P;
            memcpy(os, bs, sizeof os);
            os[cd] *= P;
            for (size_t f = 0; f < n; f++) {
                int64_t idx[3], src[3];
                unflatten(os, 3, f, idx);
                int j = (int)(idx[cd] / bs[cd]);          /* the block came from rank j */
                memcpy(src, idx, sizeof src);
                src[cd] = idx[cd] % bs[cd];
                src[dim] = r * bs[dim] + src[dim];       /* ... out of its block r */
                float want = (float)val(g.members[j], flat_index(s, 3, src), 30 + dim * 3 + cd);
                FAIL_IF(recv[f] != want, "all_to_all_dim split %d concat %d: element %zu is %g, "
                        "want %g", dim, cd, f, recv[f], want);
            }
        }
    }
    /* a dim that does not split: MT_ESHAPE naming its size and the group size */
    if (P > 1) {
        int64_t s[2] = {3, 2 * P + 1};
        st = mt_psum_scatter_dim(ctx, ax, send, recv, MT_F32, 2, s, 1, true);
        FAIL_IF(st != MT_ESHAPE, "non-divisible psum_scatter_dim: %s", mt_status_name(st));
        char want[64];
        snprintf(want, sizeof want, "size %d", 2 * P + 1);
        FAIL_IF(!strstr(mt_errmsg(), want), "message '%s' lacks '%s'", mt_errmsg(), want);
        snprintf(want, sizeof want, "%d blocks", P);
        FAIL_IF(!strstr(mt_errmsg(), want), "message '%s' lacks '%s'", mt_errmsg(), want);
        st = MT_OK;
    }
out:
#undef FAIL_IF
    free(send);
    free(recv);
    return st;
}

MT_TEST(dims_forms) {
    static const struct { const char *mesh; int n; const char *axes; } cases[] = {
        {"d=1", 1, "d"}, {"d=2", 2, "d"}, {"d=3", 3, "d"}, {"a=2,b=2", 4, "b"},
        {"a=2,b=2", 4, "b,a"}, {"a=2,b=4", 8, "a,b"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mt_launch_opts o = opts_for(cases[c].mesh, cases[c].n);
        mt_status st = mt_launch(&o, dims_device, (void *)cases[c].axes);
        MT_CHECK(st == MT_OK, "mesh '%s' over '%s': %s: %s", cases[c].mesh, cases[c].axes,
                 mt_status_name(st), mt_errmsg());
    }
}

/* ======================================================================== */
/* Asynchronous forms                                                        */
/* ======================================================================== */

static mt_status async_device(mt_ctx *ctx, void *arg) {
    const size_t n = (size_t)(intptr_t)arg;
    mt_axes ax;
    grp g;
    DEV_OK(group_of(ctx, "d", &ax, &g));
    const int me = mt_ctx_device(ctx), P = g.P;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    float *gathered = malloc((size_t)P * n * sizeof *gathered), *rs = malloc(n * sizeof *rs);
    float *big = malloc((size_t)P * n * sizeof *big);
    for (size_t i = 0; i < n; i++) { a[i] = (float)val(me, i, 40); b[i] = (float)val(me, i, 41); }
    for (size_t i = 0; i < (size_t)P * n; i++) big[i] = (float)val(me, i, 42);
    mt_request ra, rb, rc;
    DEV_OK(mt_all_reduce_start(ctx, ax, a, n, MT_F32, MT_REDUCE_SUM, &ra));
    DEV_OK(mt_all_gather_start(ctx, ax, b, gathered, n, MT_F32, &rb));
    DEV_OK(mt_psum_scatter_start(ctx, ax, big, rs, n, MT_F32, &rc));
    /* compute while they are outstanding */
    volatile double acc = 0;
    for (int i = 0; i < 200000; i++) acc += i * 0.5;
    (void)acc;
    DEV_OK(mt_wait(ctx, &rb));      /* runs a, then b, in start order */
    DEV_OK(mt_wait(ctx, &ra));      /* already done */
    DEV_OK(mt_barrier(ctx, ax));    /* a blocking collective runs the rest of the queue first */
    DEV_OK(mt_wait(ctx, &rc));
    mt_request bogus = {12345};
    mt_status st = mt_wait(ctx, &bogus);
    if (st != MT_EINVAL) return mt_fail(MT_EINTERNAL, "wait on a bogus request: %s", mt_status_name(st));
    for (size_t i = 0; i < n; i++) {
        double s = 0, t = 0;
        for (int j = 0; j < P; j++) {
            s += val(g.members[j], i, 40);
            t += val(g.members[j], (size_t)g.r * n + i, 42);
        }
        DEV_EXPECT(a[i], s, "async all_reduce[%zu]", i);
        DEV_EXPECT(rs[i], t, "async psum_scatter[%zu]", i);
        for (int j = 0; j < P; j++)
            DEV_EXPECT(gathered[(size_t)j * n + i], val(g.members[j], i, 41), "async all_gather[%d][%zu]", j, i);
    }
    /* issue order is numbering order: 3 started + barrier */
    DEV_EXPECT((double)mt_ctx_collectives(ctx), 4, "collectives");
    free(a); free(b); free(gathered); free(rs); free(big);
    return MT_OK;
}

MT_TEST(async_start_wait) {
    static const int devs[] = {1, 2, 3, 8};
    static const size_t sizes[] = {1, 777, 100000};
    for (size_t d = 0; d < 4; d++)
        for (size_t s = 0; s < 3; s++) {
            mt_launch_opts o = opts_for("", devs[d]);
            mt_status st = mt_launch(&o, async_device, (void *)(intptr_t)sizes[s]);
            MT_CHECK(st == MT_OK, "%d devices, %zu: %s: %s", devs[d], sizes[s], mt_status_name(st),
                     mt_errmsg());
        }
}

static mt_status unwaited_device(mt_ctx *ctx, void *arg) {
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    static float x[4];   /* never touched: the request is never run */
    mt_request rq;
    return mt_all_reduce_start(ctx, ax, x, 4, MT_F32, MT_REDUCE_SUM, &rq);
}

MT_TEST(async_never_waited) {
    mt_launch_opts o = opts_for("", 2);
    MT_CHECK_FAILS(mt_launch(&o, unwaited_device, NULL), MT_ESTATE, "device ", "mt_wait");
}

/* ======================================================================== */
/* Argument errors                                                           */
/* ======================================================================== */

static mt_status errors_device(mt_ctx *ctx, void *arg) {
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    float x[8] = {0}, y[32];
    int dup_src[2][2] = {{0, 1}, {0, 2}}, dup_dst[2][2] = {{0, 1}, {2, 1}};
    DEV_FAILS(mt_ppermute(ctx, ax, x, y, 8, MT_F32, (const int (*)[2])dup_src, 2), MT_EINVAL,
               "pair 1 {0,2} repeats source 0");
    DEV_FAILS(mt_ppermute(ctx, ax, x, y, 8, MT_F32, (const int (*)[2])dup_dst, 2), MT_EINVAL,
               "pair 1 {2,1} repeats destination 1");
    DEV_FAILS(mt_psum(ctx, ax, NULL, 4), MT_EINVAL, "NULL");
    DEV_FAILS(mt_all_reduce(ctx, ax, x, 8, (mt_dtype)7, MT_REDUCE_SUM), MT_EINVAL, "dtype 7");
    DEV_FAILS(mt_broadcast(ctx, ax, x, 8, MT_F32, 4), MT_EINVAL, "root 4");
    mt_axes bad = {1, {5}};
    DEV_FAILS(mt_psum(ctx, bad, x, 8), MT_EINVAL, "axis 5");
    int64_t shape[2] = {3, 4};
    DEV_FAILS(mt_psum_scatter_dim(ctx, ax, x, y, MT_F32, 2, shape, 0, false), MT_ESHAPE,
               "size 3");
    DEV_FAILS(mt_all_to_all_dim(ctx, ax, x, y, MT_F32, 2, shape, 0, 1), MT_ESHAPE, "size 3");
    /* nothing above reached the transport, so nothing was numbered */
    DEV_EXPECT((double)mt_ctx_collectives(ctx), 0, "collectives after argument errors");
    /* a zero count with NULL buffers is fine */
    DEV_OK(mt_psum(ctx, ax, NULL, 0));
    return MT_OK;
}

MT_TEST(argument_errors) {
    mt_launch_opts o = opts_for("d=4", 4);
    MT_CHECK_OK(mt_launch(&o, errors_device, NULL));
    o = opts_for("data=3", 2);
    MT_CHECK_FAILS(mt_launch(&o, errors_device, NULL), MT_EINVAL, "data=3", "3", "2");
#ifndef MT_HAVE_MPI
    o = opts_for("", 2);
    o.transport = MT_TRANSPORT_MPI;
    MT_CHECK_FAILS(mt_launch(&o, errors_device, NULL), MT_EUNSUPPORTED, "without Open MPI");
#endif
    /* a kind the transport registry does not list, and no opts */
    o = opts_for("", 2);
    o.transport = (mt_transport_kind)42;
    MT_CHECK_FAILS(mt_launch(&o, errors_device, NULL), MT_EINVAL, "unknown transport 42");
    MT_CHECK_FAILS(mt_launch(NULL, errors_device, NULL), MT_EINVAL, "must not be NULL");
}

/* ======================================================================== */
/* Failures: timeout, a failing device, the debug check                      */
/* ======================================================================== */

/* Device `skipper` issues the first psum but skips the second. */
static mt_status skip_device(mt_ctx *ctx, void *arg) {
    int skipper = (int)(intptr_t)arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    float x[4] = {1, 2, 3, 4};
    DEV_OK(mt_psum(ctx, ax, x, 4));
    if (mt_ctx_device(ctx) == skipper) return MT_OK;
    return mt_psum(ctx, ax, x, 4);
}

MT_TEST(timeout_names_missing_device) {
    for (int n = 2; n <= 4; n += 2) {
        mt_launch_opts o = opts_for("", n);
        o.timeout_s = 0.5;
        double t0 = mt_time_now();
        MT_CHECK_FAILS(mt_launch(&o, skip_device, (void *)(intptr_t)1), MT_ETIMEOUT, "timed out",
                    "#2 psum over 'd'", "device 1 never arrived",
                    "device 1's last collective: #1 psum over 'd' f32 16 bytes (finished)");
        MT_CHECK(mt_time_now() - t0 < 10, "the timeout took %.1f s", mt_time_now() - t0);
    }
    /* the timeout also comes from MT_COMM_TIMEOUT */
    setenv("MT_COMM_TIMEOUT", "0.3", 1);
    mt_launch_opts o = opts_for("", 3);
    o.timeout_s = 0;
    MT_CHECK_FAILS(mt_launch(&o, skip_device, (void *)(intptr_t)2), MT_ETIMEOUT, "after 0.3 s",
                "device 2 never arrived");
    unsetenv("MT_COMM_TIMEOUT");
}

/* Counts the devices that ran. */
static mt_status count_device(mt_ctx *ctx, void *arg) {
    atomic_fetch_add((atomic_int *)arg, 1);
    return MT_OK;
}

/* MT_COMM_TIMEOUT that is not a number of seconds > 0 used to mean 300 s
 * without a word (and "0.5x" 0.5 s); now mt_launch refuses it, naming the
 * variable and the value, before any device runs, on either transport (the
 * MPI one before MPI is started: nothing here needs mpirun). */
MT_TEST(bad_comm_timeout_is_refused) {
    static const char *const bad[] = {"0", "-1", "abc", "5x", "", " ", "inf", "-inf", "nan",
                                      "1e999", "0x", "2.5s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("MT_COMM_TIMEOUT", bad[i], 1);
        char named[64];
        snprintf(named, sizeof named, "MT_COMM_TIMEOUT='%s'", bad[i]);
        for (int t = 0; t < 2; t++) {
            atomic_int ran = 0;
            mt_launch_opts o = opts_for("", 2);
            o.timeout_s = 0;
            o.transport = t ? MT_TRANSPORT_MPI : MT_TRANSPORT_THREADS;
            MT_CHECK_FAILS(mt_launch(&o, count_device, &ran), MT_EINVAL, named,
                           "is not a number of seconds > 0", "unset it for the default of 300 s");
            MT_CHECK(atomic_load(&ran) == 0, "%s: %d devices ran", named, atomic_load(&ran));
        }
        atomic_int ran = 0;
        MT_CHECK_FAILS(mt_pmap("i", 2, count_device, &ran), MT_EINVAL, named);
        MT_CHECK(atomic_load(&ran) == 0, "pmap with %s: %d devices ran", named, atomic_load(&ran));
    }
    /* opts.timeout_s > 0 wins over the environment, bad or not */
    setenv("MT_COMM_TIMEOUT", "abc", 1);
    atomic_int ran = 0;
    mt_launch_opts o = opts_for("", 2);
    o.timeout_s = 5;
    MT_CHECK_OK(mt_launch(&o, count_device, &ran));
    MT_CHECK(atomic_load(&ran) == 2, "%d of 2 devices ran", atomic_load(&ran));
    unsetenv("MT_COMM_TIMEOUT");
    /* a negative, NaN or infinite opts.timeout_s is an error too (0 means
     * the environment's, or 300 s) */
    static const double bad_opts[] = {-1, NAN, INFINITY, -INFINITY};
    static const char *const bad_text[] = {"is -1", "is nan", "is inf", "is -inf"};
    for (int i = 0; i < 4; i++) {
        ran = 0;
        o.timeout_s = bad_opts[i];
        MT_CHECK_FAILS(mt_launch(&o, count_device, &ran), MT_EINVAL, "opts.timeout_s",
                       bad_text[i], "seconds > 0");
        MT_CHECK(atomic_load(&ran) == 0, "timeout_s %g: %d devices ran", bad_opts[i],
                 atomic_load(&ran));
    }
}

/* A good MT_COMM_TIMEOUT is the one used: a skipped collective times out
 * after it (2.5 s), not after the default of 300 s. Blanks around it are
 * fine. */
MT_TEST(comm_timeout_from_env_is_used) {
    setenv("MT_COMM_TIMEOUT", " 2.5 ", 1);
    mt_launch_opts o = opts_for("", 2);
    o.timeout_s = 0;
    double t0 = mt_time_now();
    MT_CHECK_FAILS(mt_launch(&o, skip_device, (void *)(intptr_t)1), MT_ETIMEOUT,
                   "timed out after 2.5 s", "device 1 never arrived");
    double took = mt_time_now() - t0;
    MT_CHECK(took >= 2.5 && took < 4.0, "the timeout took %.2f s; MT_COMM_TIMEOUT=2.5", took);
    unsetenv("MT_COMM_TIMEOUT");
}

typedef struct {
    int       failer;
    size_t    count;
    mt_status got[8];
} fail_arg;

static mt_status failing_device(mt_ctx *ctx, void *arg) {
    fail_arg *a = arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    /* on the heap and freed on return: under ASan, a peer still writing into
     * an aborted device's buffer would be caught */
    float *x = calloc(a->count, sizeof *x);
    mt_status st = mt_psum(ctx, ax, x, a->count);
    if (st == MT_OK && mt_ctx_device(ctx) == a->failer) {
        usleep(20000);   /* the others are waiting by now */
        free(x);
        return mt_fail(MT_EINVAL, "boom on purpose");
    }
    if (st == MT_OK) {
        st = mt_psum(ctx, ax, x, a->count);             /* waits for the failer: aborted */
        mt_status st2 = mt_barrier(ctx, ax);             /* later ones fail at once */
        a->got[mt_ctx_device(ctx)] = st == MT_EABORTED && st2 == MT_EABORTED ? MT_EABORTED : MT_OK;
    }
    free(x);
    return st;
}

MT_TEST(failing_device_aborts_the_rest) {
    static const int devs[] = {2, 3, 8, 2, 3, 8};
    for (int k = 0; k < 6; k++) {
        /* small messages, then ones that take the rendezvous */
        fail_arg a = {devs[k] - 1, k < 3 ? 100 : 100000, {0}};
        mt_launch_opts o = opts_for("", devs[k]);
        double t0 = mt_time_now();
        MT_CHECK_FAILS(mt_launch(&o, failing_device, &a), MT_EINVAL, "boom on purpose");
        char want[32];
        snprintf(want, sizeof want, "device %d: boom", a.failer);
        MT_CHECK(strncmp(mt_errmsg(), want, strlen(want)) == 0, "message '%s' starts '%s'",
                 mt_errmsg(), want);
        MT_CHECK(mt_time_now() - t0 < 5, "stopping took %.1f s", mt_time_now() - t0);
        for (int d = 0; d < devs[k]; d++)
            if (d != a.failer)
                MT_CHECK(a.got[d] == MT_EABORTED, "device %d of %d was not aborted", d, devs[k]);
    }
}

static mt_status mismatch_device(mt_ctx *ctx, void *arg) {
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    float x[8] = {0};
    DEV_OK(mt_psum(ctx, ax, x, 4));
    DEV_OK(mt_barrier(ctx, ax));
    return mt_psum(ctx, ax, x, mt_ctx_device(ctx) == 1 ? 8 : 4);
}

MT_TEST(check_mode_catches_mismatch) {
    mt_launch_opts o = opts_for("", 3);
    o.check = true;
    MT_CHECK_FAILS(mt_launch(&o, mismatch_device, NULL), MT_EMISMATCH, "device 0 issued #3 psum "
                "over 'd' f32 count 4", "device 1 issued #3 psum over 'd' f32 count 8");
    /* and lets a matching program through */
    o = opts_for("a=2,b=2", 4);
    o.check = true;
    flat_arg fa = {"b,a", 1001};
    MT_CHECK_OK(mt_launch(&o, flat_device, &fa));
}

/* ======================================================================== */
/* Launch details                                                            */
/* ======================================================================== */

static mt_status info_device(mt_ctx *ctx, void *arg) {
    int *threads = arg;
    threads[mt_ctx_device(ctx)] = mt_get_num_threads();
    DEV_EXPECT(mt_ctx_process_rank(ctx), 0, "process rank");
    DEV_EXPECT(mt_mesh_size(mt_ctx_mesh(ctx)), 4, "mesh size");
    DEV_EXPECT((double)mt_ctx_collectives(ctx), 0, "no collectives yet");
    DEV_EXPECT(strlen(mt_ctx_last_collective(ctx)), 0, "no last collective");
    return MT_OK;
}

MT_TEST(launch_kernel_threads) {
    int threads[4] = {0};
    mt_launch_opts o = opts_for("x=2,y=2", 4);
    o.kernel_threads = 3;
    int before = mt_get_num_threads();
    MT_CHECK_OK(mt_launch(&o, info_device, threads));
    for (int d = 0; d < 4; d++) MT_CHECK(threads[d] == 3, "device %d saw %d kernel threads", d, threads[d]);
    MT_CHECK(mt_get_num_threads() == before, "the BLAS thread count is restored");
    o.kernel_threads = 0;   /* cores / devices, at least 1 */
    MT_CHECK_OK(mt_launch(&o, info_device, threads));
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int want = cores / 4 > 1 ? (int)(cores / 4) : 1;
    MT_CHECK(threads[0] <= want && threads[0] >= 1, "default kernel threads %d (cores %ld)",
             threads[0], cores);
}

/* Placement with more devices than CPUs (threads_launch.c): this process
 * on 2 CPUs (1 where it may use only one), each device records the CPUs
 * its thread may run on. */
typedef struct {
    int n_cpus[8];   /* CPUs device d may run on */
    int cpu[8];      /* the first of them */
} where_arg;

static mt_status where_device(mt_ctx *ctx, void *arg) {
    where_arg *w = arg;
    const int d = mt_ctx_device(ctx);
    cpu_set_t s;
    if (sched_getaffinity(0, sizeof s, &s) != 0)
        return mt_fail(MT_EINTERNAL, "device %d: sched_getaffinity failed", d);
    w->n_cpus[d] = CPU_COUNT(&s);
    w->cpu[d] = -1;
    for (int c = 0; c < CPU_SETSIZE && w->cpu[d] < 0; c++)
        if (CPU_ISSET(c, &s)) w->cpu[d] = c;
    return MT_OK;
}

/* Runs `mesh` of n devices (colocating `colocate`) and checks that devices
 * with the same group[d] share one CPU and (on 2 CPUs) other groups the
 * other; group NULL: none is pinned. */
static void check_placement(const char *mesh, int n, const char *colocate, const int *group,
                            int cpus) {
    mt_launch_opts o = opts_for(mesh, n);
    o.colocate = colocate;
    where_arg w;
    memset(&w, 0, sizeof w);
    MT_CHECK_OK(mt_launch(&o, where_device, &w));
    for (int d = 0; d < n; d++) {
        if (!group) {
            MT_CHECK(w.n_cpus[d] == cpus, "%s, %d devices: device %d pinned to %d of %d CPUs",
                     mesh, n, d, w.n_cpus[d], cpus);
            continue;
        }
        MT_CHECK(w.n_cpus[d] == 1, "%s colocating %s: device %d may run on %d CPUs, not one",
                 mesh, colocate ? colocate : "nothing", d, w.n_cpus[d]);
        for (int e = 0; e < d; e++)
            MT_CHECK((w.cpu[d] == w.cpu[e]) == (group[d] == group[e] || cpus == 1),
                     "%s colocating %s: devices %d and %d on CPUs %d and %d (blocks %d, %d)",
                     mesh, colocate ? colocate : "nothing", e, d, w.cpu[e], w.cpu[d], group[e],
                     group[d]);
    }
}

MT_TEST(devices_past_the_cpus_are_pinned_in_blocks) {
    cpu_set_t all, two;
    MT_CHECK(sched_getaffinity(0, sizeof all, &all) == 0, "sched_getaffinity");
    CPU_ZERO(&two);
    int cpus = 0;
    for (int c = 0; c < CPU_SETSIZE && cpus < 2; c++)
        if (CPU_ISSET(c, &all)) CPU_SET(c, &two), cpus++;
    MT_CHECK(sched_setaffinity(0, sizeof two, &two) == 0, "sched_setaffinity to %d CPUs", cpus);
    unsetenv("MT_PIN");
    /* the mesh's order: device = p * 2 + d, so p = 0 is devices 0 and 1 */
    static const int by_p[4] = {0, 0, 1, 1}, by_d[4] = {0, 1, 0, 1};
    check_placement("p=2,d=2", 4, NULL, by_p, cpus);
    /* p colocated: innermost, so each CPU holds one d's two p */
    check_placement("p=2,d=2", 4, "p", by_d, cpus);
    static const int eight[8] = {0, 0, 0, 0, 1, 1, 1, 1};   /* d outermost: a block a d */
    check_placement("d=2,t=2,p=2", 8, "p", eight, cpus);
    /* d and t innermost: p outermost, a block a p (device = d * 4 + t * 2 + p) */
    static const int by_p8[8] = {0, 1, 0, 1, 0, 1, 0, 1};
    check_placement("d=2,t=2,p=2", 8, "d,t", by_p8, cpus);
    /* 3 devices on 2 CPUs: unequal blocks; the OS places them */
    if (cpus == 2) check_placement("d=3", 3, NULL, NULL, cpus);
    setenv("MT_PIN", "0", 1);
    check_placement("p=2,d=2", 4, "p", NULL, cpus);
    unsetenv("MT_PIN");
    cpu_set_t after;
    MT_CHECK(sched_getaffinity(0, sizeof after, &after) == 0 && CPU_EQUAL(&after, &two),
             "device 0 ran on the caller, whose affinity is given back");
    mt_launch_opts o = opts_for("p=2,d=2", 4);
    o.colocate = "pipe";
    where_arg w;
    mt_status st = mt_launch(&o, where_device, &w);
    MT_CHECK(st == MT_EINVAL && strstr(mt_errmsg(), "pipe"), "an unknown colocated axis: %s: %s",
             mt_status_name(st), mt_errmsg());
}

/* Sleeping waits (comm/wait.c's event count): four devices on one CPU
 * sleep once a few yields have not brought what they wait for, and each
 * message and each arrival must wake its waiter. A token goes 5 times
 * round the ring, its holder busy 20 ms before it passes it on (the others
 * run out of yields and sleep); then 10 one-float psums, device r busy
 * (r + 1) x 5 ms before each. The busy time is 0.9 s; a wake-up missed
 * costs the sleep's cap (0.5 s), and the 20 hops alone would take ~10 s.
 * The bound is 3 s. */
static void busy(double seconds) {
    const double until = mt_time_now() + seconds;
    while (mt_time_now() < until) {}
}

static mt_status token_device(mt_ctx *ctx, void *arg) {
    (void)arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    const int r = mt_axis_index(ctx, ax), P = mt_axis_size(ctx, ax);
    float token = 0;
    for (int round = 0; round < 5; round++) {
        if (r > 0 || round > 0) DEV_OK(mt_recv(ctx, ax, &token, 1, MT_F32, (r + P - 1) % P, 0));
        token += 1;
        busy(20e-3);
        if (r < P - 1 || round < 4) DEV_OK(mt_send(ctx, ax, &token, 1, MT_F32, (r + 1) % P, 0));
    }
    if (r == P - 1 && token != 5.0f * (float)P)
        return mt_fail(MT_EINTERNAL, "the token counted %g hops, want %d", token, 5 * P);
    for (int k = 0; k < 10; k++) {
        float x = (float)k;
        busy((r + 1) * 5e-3);
        DEV_OK(mt_psum(ctx, ax, &x, 1));
        if (x != (float)(k * P)) return mt_fail(MT_EINTERNAL, "psum %d: %g", k, x);
    }
    return MT_OK;
}

MT_TEST(sleeping_waits_are_woken) {
    cpu_set_t all, one;
    MT_CHECK(sched_getaffinity(0, sizeof all, &all) == 0, "sched_getaffinity");
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_SET(c, &one);
            break;
        }
    MT_CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity to one CPU");
    mt_launch_opts o = opts_for("d=4", 4);
    const double t0 = mt_time_now();
    MT_CHECK_OK(mt_launch(&o, token_device, NULL));
    const double took = mt_time_now() - t0;
    MT_CHECK(took < 3.0, "20 hand-offs and 10 psums on 4 devices sharing a CPU took %.2f s "
             "(0.9 s of it busy): a wait missed its wake-up (each costs up to 0.5 s)", took);
}

/* ======================================================================== */
/* Edges: deadlines at commit, queued failures, NaN, huge shapes, axes       */
/* ======================================================================== */

/* Device 1 arrives at a large broadcast from device 0 `lead` seconds before
 * device 0's deadline and copies device 0's buffer for longer than that. The
 * op committed, so device 0 must wait for the copy, past its deadline, and
 * both must succeed; a device 0 that left at its deadline would let its
 * caller overwrite (here) or free the buffer under the copy. */
typedef struct {
    float    *buf[2];    /* (n) device 0's send, device 1's receive */
    size_t    n;
    double    timeout, lead;
    mt_status st[2];
    double    took0;     /* device 0's broadcast, seconds */
    size_t    bad;       /* elements device 1 got wrong */
} late_arg;

static mt_status late_device(mt_ctx *ctx, void *arg) {
    late_arg *a = arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    const int d = mt_ctx_device(ctx);
    DEV_OK(mt_barrier(ctx, ax));   /* both leave within microseconds */
    const double t0 = mt_time_now();
    if (d == 1)
        while (mt_time_now() < t0 + a->timeout - a->lead) {}   /* busy: precise */
    a->st[d] = mt_broadcast(ctx, ax, a->buf[d], a->n, MT_F32, 0);
    if (d == 0) {
        a->took0 = mt_time_now() - t0;
        /* the caller owns its buffer again: reuse it, from the end, where a
         * copy still running would not have been yet */
        for (size_t i = a->n; i-- > 0;) a->buf[0][i] = -7.0f;
    } else {
        a->bad = 0;
        for (size_t i = 0; i < a->n; i++) a->bad += a->buf[1][i] != 1.0f;
    }
    return MT_OK;
}

MT_TEST(committed_rendezvous_outlives_deadline) {
    /* 128 MiB a buffer, a copy of tens of ms; under TSan, whose stores here
     * are each instrumented, 32 MiB (the trials' refills dominate the case) */
    late_arg a = {.n = (size_t)(MT_TEST_TSAN ? 8 : 32) << 20, .timeout = 0.25};
    for (int d = 0; d < 2; d++) {
        a.buf[d] = malloc(a.n * sizeof(float));
        MT_CHECK(a.buf[d], "test buffers");
    }
    for (size_t i = 0; i < a.n; i++) a.buf[0][i] = a.buf[1][i] = 1.0f;   /* pages touched */
    double copy = mt_time_now();   /* what device 1's copy will take, about */
    memcpy(a.buf[1], a.buf[0], a.n * sizeof(float));
    copy = mt_time_now() - copy;
    a.lead = copy / 2;
    int hits = 0;
    for (int trial = 0; trial < 16 && hits < 3; trial++) {
        for (size_t i = 0; i < a.n; i++) { a.buf[0][i] = 1.0f; a.buf[1][i] = 0.0f; }
        mt_launch_opts o = opts_for("d=2", 2);
        o.timeout_s = a.timeout;
        a.st[0] = a.st[1] = MT_EINTERNAL;
        mt_status st = mt_launch(&o, late_device, &a);
        MT_CHECK((a.st[0] == MT_OK) == (a.st[1] == MT_OK), "trial %d: device 0's broadcast "
                 "returned %s after %.3f s (deadline %.3f s) but device 1's %s: a committed "
                 "collective must complete on every device", trial, mt_status_name(a.st[0]),
                 a.took0, a.timeout, mt_status_name(a.st[1]));
        if (a.st[1] == MT_OK) {
            MT_CHECK(a.bad == 0, "trial %d: device 1 received %zu wrong elements of %zu", trial,
                     a.bad, a.n);
            MT_CHECK(st == MT_OK, "trial %d: the collective completed but the launch failed: %s",
                     trial, mt_errmsg());
        }
        /* aim device 1's arrival so the copy straddles device 0's deadline */
        if (a.st[1] != MT_OK) a.lead += copy / 4;                /* came too late */
        else if (a.took0 <= a.timeout) a.lead -= copy / 4;       /* done before it */
        else hits++;
    }
    MT_CHECK(hits > 0, "no trial had the copy straddle the deadline (copy %.3f s)", copy);
    free(a.buf[0]);
    free(a.buf[1]);
}

/* Device 1 arrives at a rendezvous around device 0's deadline: whenever the
 * collective completed on both, the launch must not have failed (the
 * deadline passing as the last device arrives is no timeout). */
typedef struct {
    double    delay;
    mt_status st[2];
} race_arg;

static mt_status race_device(mt_ctx *ctx, void *arg) {
    race_arg *a = arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    const int d = mt_ctx_device(ctx);
    static float send[2][4096], recv[2][2 * 4096];   /* 16 KiB: the rendezvous */
    if (d == 1) {
        double t_end = mt_time_now() + a->delay;
        while (mt_time_now() < t_end) {}
    }
    a->st[d] = mt_all_gather(ctx, ax, send[d], recv[d], 4096, MT_F32);
    return MT_OK;
}

MT_TEST(deadline_at_last_arrival_is_no_timeout) {
    const double timeout = 0.01;
    int completed = 0, timeouts = 0;
    double delay = timeout;   /* walks to where device 1 arrives just at the deadline */
    for (int trial = 0; trial < 150; trial++) {
        race_arg a = {delay, {MT_EINTERNAL, MT_EINTERNAL}};
        mt_launch_opts o = opts_for("d=2", 2);
        o.timeout_s = timeout;
        mt_status st = mt_launch(&o, race_device, &a);
        if (st == MT_ETIMEOUT) timeouts++;
        if (a.st[0] == MT_OK && a.st[1] == MT_OK) {
            completed++;
            delay += 50e-6;
            MT_CHECK(st == MT_OK, "trial %d: the all_gather completed on both devices, but the "
                     "launch failed: %s", trial, mt_errmsg());
        } else {
            MT_CHECK(st == MT_ETIMEOUT, "trial %d: %s / %s, launch %s", trial,
                     mt_status_name(a.st[0]), mt_status_name(a.st[1]), mt_status_name(st));
            delay -= 50e-6;
        }
    }
    MT_CHECK(completed > 0 && timeouts > 0, "the trials missed the deadline window: %d completed, "
             "%d timed out", completed, timeouts);
}

/* Overlap: device 0 starts a large all-reduce and computes; device 1 starts
 * and waits at once, so it moves device 0's share too, and its wait returns
 * while device 0 is still computing. Device 0 computes until device 1's wait
 * has returned (or a minute, the sign that device 1 could not finish alone),
 * so no timing decides the verdict: a device descheduled by other jobs on
 * the machine only makes the compute longer. */
typedef struct {
    size_t     n;
    atomic_int done1;        /* device 1's wait has returned */
    int        done_first;   /* device 0 saw it before its own wait */
    double     compute_s, wait_s[2];
} overlap_arg;

static mt_status overlap_device(mt_ctx *ctx, void *arg) {
    overlap_arg *a = arg;
    mt_axes ax;
    grp g;
    DEV_OK(group_of(ctx, "d", &ax, &g));
    const int me = mt_ctx_device(ctx);
    float *x = malloc(a->n * sizeof *x);
    if (!x) return mt_fail(MT_ENOMEM, "test buffer");
    mt_status st = MT_OK;
    for (size_t i = 0; i < a->n; i++) x[i] = (float)val(me, i, 50);
    DEV_OK(mt_barrier(ctx, ax));
    mt_request rq;
    st = mt_all_reduce_start(ctx, ax, x, a->n, MT_F32, MT_REDUCE_SUM, &rq);
    if (st == MT_OK) {
        if (me == 0) {   /* "compute" until device 1 is done */
            double t0 = mt_time_now(), t_end = t0 + 60;
            while (!atomic_load(&a->done1) && mt_time_now() < t_end) usleep(1000);
            a->done_first = atomic_load(&a->done1);
            a->compute_s = mt_time_now() - t0;
        }
        double t0 = mt_time_now();
        st = mt_wait(ctx, &rq);
        a->wait_s[me] = mt_time_now() - t0;
        if (me == 1) atomic_store(&a->done1, 1);
    }
    for (size_t i = 0; st == MT_OK && i < a->n; i++) {
        double want = val(0, i, 50) + val(1, i, 50);
        if (x[i] != want)
            st = mt_fail(MT_EINTERNAL, "element %zu is %g, want %g", i, x[i], want);
    }
    free(x);
    return st;
}

MT_TEST(async_overlaps_compute) {
    overlap_arg a = {.n = (size_t)16 << 20};   /* 64 MiB of f32 */
    atomic_init(&a.done1, 0);
    mt_launch_opts o = opts_for("", 2);
    MT_CHECK_OK(mt_launch(&o, overlap_device, &a));
    printf("  overlap: 64 MiB all-reduce; device 1 (waited at once) %.3f ms, device 0 computed "
           "%.3f ms, then waited %.3f ms\n", a.wait_s[1] * 1e3, a.compute_s * 1e3,
           a.wait_s[0] * 1e3);
    MT_CHECK(a.done_first, "device 1's wait did not return within %.0f s while device 0 "
             "computed: device 1 did not move device 0's share", a.compute_s);
}

/* Several outstanding requests of every kind, waited in reverse order, a
 * blocking collective among them, on a 1-D and a 2-D mesh. */
typedef struct {
    const char *ax1, *ax2;
    size_t      n;
} many_arg;

typedef struct {
    int   kind;   /* 0 all-reduce, 1 all-gather, 2 psum_scatter, 3 all-reduce into out */
    grp   g;
    int   salt, me;
    float *in, *out;
} areq;

static mt_status areq_start(mt_ctx *ctx, mt_axes ax, const grp *g, int kind, int salt, size_t n,
                            areq *q, mt_request *r) {
    const int me = mt_ctx_device(ctx), P = g->P;
    q->kind = kind;
    q->g = *g;
    q->salt = salt;
    q->me = me;
    size_t in_n = kind == 2 ? (size_t)P * n : n, out_n = kind == 1 ? (size_t)P * n : n;
    q->in = malloc((in_n + 1) * sizeof(float));
    q->out = malloc((out_n + 1) * sizeof(float));
    if (!q->in || !q->out) return mt_fail(MT_ENOMEM, "test buffer");
    for (size_t i = 0; i < in_n; i++) q->in[i] = (float)val(me, i, salt);
    if (kind == 0) return mt_all_reduce_start(ctx, ax, q->in, n, MT_F32, MT_REDUCE_SUM, r);
    if (kind == 1) return mt_all_gather_start(ctx, ax, q->in, q->out, n, MT_F32, r);
    if (kind == 3)
        return mt_all_reduce_into_start(ctx, ax, q->in, q->out, n, MT_F32, MT_REDUCE_SUM, r);
    return mt_psum_scatter_start(ctx, ax, q->in, q->out, n, MT_F32, r);
}

static mt_status areq_check(const areq *q, size_t n) {
    const grp *g = &q->g;
    mt_status st = MT_OK;
    for (size_t i = 0; st == MT_OK && i < n; i++) {
        if (q->kind == 1) {
            for (int j = 0; j < g->P; j++)
                if (q->out[(size_t)j * n + i] != val(g->members[j], i, q->salt))
                    st = mt_fail(MT_EINTERNAL, "all_gather n %zu [%d][%zu] wrong", n, j, i);
            continue;
        }
        double want = 0;
        size_t at = q->kind == 2 ? (size_t)g->r * n + i : i;
        for (int j = 0; j < g->P; j++) want += val(g->members[j], at, q->salt);
        double got = q->kind == 0 ? q->in[i] : q->out[i];
        if (got != want)
            st = mt_fail(MT_EINTERNAL, "kind %d n %zu element %zu is %g, want %g", q->kind, n, i,
                         got, want);
        else if (q->kind == 3 && q->in[i] != val(q->me, i, q->salt))   /* send left as it was */
            st = mt_fail(MT_EINTERNAL, "all_reduce_into n %zu changed send[%zu]", n, i);
    }
    free(q->in);
    free(q->out);
    return st;
}

static mt_status many_device(mt_ctx *ctx, void *arg) {
    const many_arg *a = arg;
    mt_axes ax[2];
    grp g[2];
    DEV_OK(group_of(ctx, a->ax1, &ax[0], &g[0]));
    DEV_OK(group_of(ctx, a->ax2, &ax[1], &g[1]));
    const size_t n = a->n;
    areq q[12];
    mt_request r[12];
    mt_status st = MT_OK;
    /* round 1: six outstanding, waited last to first */
    for (int k = 0; k < 6 && st == MT_OK; k++)
        st = areq_start(ctx, ax[k & 1], &g[k & 1], k % 4, 60 + k, n, &q[k], &r[k]);
    for (int k = 5; k >= 0 && st == MT_OK; k--) st = mt_wait(ctx, &r[k]);
    for (int k = 0; k < 6 && st == MT_OK; k++) st = areq_check(&q[k], n);
    if (st != MT_OK) return st;
    /* round 2: three started, a blocking collective on each group (runs
     * after them), three more, all waited in reverse */
    for (int k = 6; k < 9 && st == MT_OK; k++)
        st = areq_start(ctx, ax[k & 1], &g[k & 1], k % 4, 60 + k, n, &q[k], &r[k]);
    float c[3] = {1, 2, 3};
    DEV_OK(mt_psum(ctx, ax[1], c, 3));
    for (int i = 0; i < 3; i++) DEV_EXPECT(c[i], (i + 1) * g[1].P, "blocking psum[%d]", i);
    for (int k = 9; k < 12 && st == MT_OK; k++)
        st = areq_start(ctx, ax[k & 1], &g[k & 1], k % 4, 60 + k, n, &q[k], &r[k]);
    DEV_OK(mt_barrier(ctx, ax[0]));
    for (int k = 11; k >= 6 && st == MT_OK; k--) st = mt_wait(ctx, &r[k]);
    for (int k = 6; k < 12 && st == MT_OK; k++) st = areq_check(&q[k], n);
    return st;
}

MT_TEST(async_many_outstanding_reverse_waits) {
    /* 2^18 + 5: a tail after the whole 64-byte lines; under a sanitizer
       (every element's access instrumented) without the last, 1M */
    static const size_t sizes[] = {0, 1, 1001, ((size_t)1 << 18) + 5, (size_t)1 << 20};
    const size_t n_sizes = sizeof sizes / sizeof sizes[0] - (MT_TEST_SANITIZED ? 1 : 0);
    static const struct { const char *mesh; int devs; const char *a1, *a2; } meshes[] = {
        {"d=3", 3, "d", "d"}, {"a=2,b=2", 4, "a", "b"}, {"a=2,b=2", 4, "a,b", "b"}};
    for (size_t m = 0; m < 3; m++)
        for (size_t s = 0; s < n_sizes; s++) {
            many_arg a = {meshes[m].a1, meshes[m].a2, sizes[s]};
            mt_launch_opts o = opts_for(meshes[m].mesh, meshes[m].devs);
            mt_status st = mt_launch(&o, many_device, &a);
            MT_CHECK(st == MT_OK, "%s over %s/%s, n %zu: %s: %s", meshes[m].mesh, a.ax1, a.ax2,
                     a.n, mt_status_name(st), mt_errmsg());
        }
}

/* A device starts large requests and fails without waiting: the others'
 * waits on a request it never started return MT_EABORTED, on one it started
 * they complete correctly or abort; nobody hangs, and its buffers (freed by
 * the test after the launch) outlive every use. */
typedef struct {
    size_t    n;
    float    *bufs[4];
    mt_status got[4][2];
} startfail_arg;

static mt_status startfail_device(mt_ctx *ctx, void *arg) {
    startfail_arg *a = arg;
    mt_axes ax;
    grp g;
    DEV_OK(group_of(ctx, "d", &ax, &g));
    const int me = mt_ctx_device(ctx);
    float *x = a->bufs[me], *y = a->bufs[me] + a->n;
    for (size_t i = 0; i < a->n; i++) { x[i] = (float)val(me, i, 70); y[i] = 1; }
    mt_request r1, r2;
    mt_status st = mt_all_reduce_start(ctx, ax, x, a->n, MT_F32, MT_REDUCE_SUM, &r1);
    if (me == 0) return st != MT_OK ? st : mt_fail(MT_EINVAL, "fails after starting, on purpose");
    if (st != MT_OK) {   /* device 0's failure was published first: aborted at start */
        a->got[me][0] = a->got[me][1] = st;
        return st;
    }
    /* the start fails at once if device 0's failure is already published */
    a->got[me][1] = mt_all_reduce_start(ctx, ax, y, a->n, MT_F32, MT_REDUCE_SUM, &r2);
    if (a->got[me][1] == MT_OK) a->got[me][1] = mt_wait(ctx, &r2);   /* completes r1 first */
    a->got[me][0] = mt_wait(ctx, &r1);
    return a->got[me][1];
}

MT_TEST(async_start_then_fail) {
    for (int devs = 2; devs <= 4; devs++) {
        startfail_arg a;
        memset(&a, 0, sizeof a);
        a.n = (size_t)1 << 20;
        for (int d = 0; d < devs; d++) a.bufs[d] = malloc(2 * a.n * sizeof(float));
        mt_launch_opts o = opts_for("", devs);
        o.timeout_s = 20;
        double t0 = mt_time_now();
        MT_CHECK_FAILS(mt_launch(&o, startfail_device, &a), MT_EINVAL, "on purpose");
        MT_CHECK(mt_time_now() - t0 < 5, "stopping took %.1f s", mt_time_now() - t0);
        for (int d = 1; d < devs; d++) {
            MT_CHECK(a.got[d][1] == MT_EABORTED, "device %d: start/wait of the request device 0 "
                     "never started: %s", d, mt_status_name(a.got[d][1]));
            MT_CHECK(a.got[d][0] == MT_OK || a.got[d][0] == MT_EABORTED,
                     "device %d: wait on the request all started: %s", d,
                     mt_status_name(a.got[d][0]));
            if (a.got[d][0] == MT_OK)
                for (size_t i = 0; i < a.n; i++) {
                    double want = 0;
                    for (int j = 0; j < devs; j++) want += val(j, i, 70);
                    MT_CHECK(a.bufs[d][i] == want, "device %d element %zu: %g, want %g", d, i,
                             a.bufs[d][i], want);
                }
        }
        for (int d = 0; d < devs; d++) free(a.bufs[d]);
    }
}

/* Local errors of a started request surface at start, and the requests
 * after it run; a request that fails when run makes mt_wait on every request
 * dropped with it fail too. */
typedef struct {
    mt_status start_bad, start_gather, start_axes, wait_after[2];
} async_err_arg;

static mt_status async_start_err_device(mt_ctx *ctx, void *arg) {
    async_err_arg *a = arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    const int d = mt_ctx_device(ctx);
    float bad[1] = {0}, x[4] = {1, 2, 3, 4}, y[8];
    mt_request r1, r2, r3, r4;
    mt_status st = mt_all_reduce_start(ctx, ax, bad, SIZE_MAX / 2, MT_F32, MT_REDUCE_SUM, &r1);
    if (d == 0) a->start_bad = st;
    /* P·count·4 bytes do not fit */
    st = mt_all_gather_start(ctx, ax, bad, y, SIZE_MAX / 6, MT_F32, &r3);
    if (d == 0) a->start_gather = st;
    mt_axes nowhere = {1, {7}};
    st = mt_all_reduce_start(ctx, nowhere, x, 4, MT_F32, MT_REDUCE_SUM, &r4);
    if (d == 0) a->start_axes = st;
    /* into a buffer that overlaps the source without being it */
    DEV_FAILS(mt_all_reduce_into_start(ctx, ax, y, y + 2, 4, MT_F32, MT_REDUCE_SUM, &r4),
              MT_EINVAL, "overlap");
    DEV_OK(mt_all_reduce_start(ctx, ax, x, 4, MT_F32, MT_REDUCE_SUM, &r2));
    DEV_OK(mt_wait(ctx, &r2));
    for (int i = 0; i < 4; i++) DEV_EXPECT(x[i], 2 * (i + 1), "x[%d] after the good request", i);
    return MT_OK;
}

static mt_status async_run_err_device(mt_ctx *ctx, void *arg) {
    async_err_arg *a = arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    float x[4] = {1, 2, 3, 4};
    mt_request r1, r2;
    /* device 1 fails, so device 0's queued requests cannot run */
    if (mt_ctx_device(ctx) == 1) return mt_fail(MT_EINVAL, "device 1 fails on purpose");
    DEV_OK(mt_all_reduce_start(ctx, ax, x, 4, MT_F32, MT_REDUCE_SUM, &r1));
    DEV_OK(mt_all_reduce_start(ctx, ax, x, 4, MT_F32, MT_REDUCE_SUM, &r2));
    a->wait_after[0] = mt_wait(ctx, &r1);
    a->wait_after[1] = mt_wait(ctx, &r2);
    return a->wait_after[0];
}

MT_TEST(async_errors_are_not_lost) {
    async_err_arg a;
    memset(&a, 0, sizeof a);
    mt_launch_opts o = opts_for("d=2", 2);
    o.timeout_s = 10;
    MT_CHECK_OK(mt_launch(&o, async_start_err_device, &a));
    MT_CHECK(a.start_bad == MT_EINVAL, "a start with a count too large: %s, want MT_EINVAL",
             mt_status_name(a.start_bad));
    MT_CHECK(a.start_gather == MT_EINVAL, "a gather start whose P·count overflows: %s",
             mt_status_name(a.start_gather));
    MT_CHECK(a.start_axes == MT_EINVAL, "a start over an axis the mesh lacks: %s",
             mt_status_name(a.start_axes));
    MT_CHECK_FAILS(mt_launch(&o, async_run_err_device, &a), MT_EINVAL, "on purpose");
    MT_CHECK(a.wait_after[0] == MT_EABORTED, "wait on the request that failed: %s",
             mt_status_name(a.wait_after[0]));
    MT_CHECK(a.wait_after[1] == MT_EABORTED, "wait on the request dropped after it: %s, want "
             "MT_EABORTED (it never ran)", mt_status_name(a.wait_after[1]));
}

/* pmax / pmin propagate NaN from any device, as jax.lax does, on both paths
 * and in every dtype that has NaN. NaN sits at every third element of one
 * device; the others hold integers. */
typedef struct {
    int    nan_dev;
    size_t n;
} nan_arg;

static mt_status nan_device(mt_ctx *ctx, void *arg) {
    const nan_arg *a = arg;
    mt_axes ax;
    grp g;
    DEV_OK(group_of(ctx, "d", &ax, &g));
    const int me = mt_ctx_device(ctx);
    static const mt_dtype dts[2] = {MT_F32, MT_BF16};
    mt_status st = MT_OK;
    void *buf = malloc(a->n * 4 + 4);
    if (!buf) return mt_fail(MT_ENOMEM, "test buffer");
    for (int t = 0; t < 2 && st == MT_OK; t++)
        for (int op = MT_REDUCE_MAX; op <= MT_REDUCE_MIN && st == MT_OK; op++) {
            mt_dtype dt = dts[t];
            for (size_t i = 0; i < a->n; i++)
                put(buf, dt, i, me == a->nan_dev && i % 3 == 0 ? NAN : val(me, i, op));
            if ((st = mt_all_reduce(ctx, ax, buf, a->n, dt, (mt_reduce_op)op))) break;
            for (size_t i = 0; i < a->n && st == MT_OK; i++) {
                double want = val(g.members[0], i, op);
                for (int j = 1; j < g.P; j++) {
                    double v = val(g.members[j], i, op);
                    want = op == MT_REDUCE_MAX ? (v > want ? v : want) : (v < want ? v : want);
                }
                double got = get(buf, dt, i);
                if (i % 3 == 0 ? !isnan(got) : got != want)
                    st = mt_fail(MT_EINTERNAL, "%s %s of %zu, NaN on device %d: element %zu is "
                                 "%g, want %g", op == MT_REDUCE_MAX ? "pmax" : "pmin", dt_name(dt),
                                 a->n, a->nan_dev, i, got, i % 3 == 0 ? NAN : want);
            }
        }
    free(buf);
    return st;
}

MT_TEST(pmax_pmin_propagate_nan) {
    static const int devs[] = {2, 3};
    static const size_t sizes[] = {4, 1001, 5000, 70001};   /* latency path, rendezvous */
    for (int k = 0; k < 2; k++)
        for (size_t s = 0; s < 4; s++)
            for (int nd = 0; nd < devs[k]; nd++) {
                nan_arg a = {nd, sizes[s]};
                mt_launch_opts o = opts_for("", devs[k]);
                mt_status st = mt_launch(&o, nan_device, &a);
                MT_CHECK(st == MT_OK, "%d devices: %s: %s", devs[k], mt_status_name(st),
                         mt_errmsg());
            }
}

/* Shapes whose products overflow size_t fail with MT_EINVAL naming the shape
 * (instead of moving nothing and returning MT_OK, or overrunning scratch). */
static mt_status huge_dims_device(mt_ctx *ctx, void *arg) {
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    float s[64] = {0}, r[64] = {0};
    const char *shape_named = "4294967296";
    int64_t sq[2] = {INT64_C(1) << 32, INT64_C(1) << 32};   /* 2^64 elements: wraps to 0 */
    DEV_FAILS(mt_all_gather_dim(ctx, ax, s, r, MT_F32, 2, sq, 0, true), MT_EINVAL, shape_named);
    int64_t small[2] = {2, 4};   /* warm the scratch with a legal call */
    DEV_OK(mt_psum_scatter_dim(ctx, ax, s, r, MT_F32, 2, small, 1, true));
    int64_t wide[2] = {INT64_C(1) << 32, INT64_C(1) << 31};   /* P·count·4 wraps to 0 */
    DEV_FAILS(mt_psum_scatter_dim(ctx, ax, s, r, MT_F32, 2, wide, 1, true), MT_EINVAL, shape_named);
    int64_t tall[2] = {INT64_C(1) << 32, INT64_C(1) << 29};   /* 2·2^61·4 bytes of scratch */
    DEV_FAILS(mt_all_to_all_dim(ctx, ax, s, r, MT_F32, 2, tall, 0, 1), MT_EINVAL, shape_named);
    /* an empty array is fine whatever its other dims */
    int64_t empty[3] = {0, INT64_C(1) << 40, INT64_C(1) << 40};
    DEV_OK(mt_all_gather_dim(ctx, ax, s, r, MT_F32, 3, empty, 1, true));
    DEV_OK(mt_psum_scatter_dim(ctx, ax, s, r, MT_F32, 3, empty, 0, true));
    DEV_OK(mt_all_to_all_dim(ctx, ax, s, r, MT_F32, 3, empty, 0, 2));
    return MT_OK;
}

MT_TEST(dims_shape_overflow) {
    mt_launch_opts o = opts_for("d=2", 2);
    MT_CHECK_OK(mt_launch(&o, huge_dims_device, NULL));
}

/* An mt_axes that is not valid on the mesh fails, even when its packed key
 * equals a group already in use (axis 32 packs like 'a,b'), and even with
 * more entries than an mt_axes holds. Nothing reaches the transport. */
static mt_status bad_axes_device(mt_ctx *ctx, void *arg) {
    mt_axes ab;
    DEV_OK(mt_ctx_axes(ctx, "a,b", &ab));
    float x[1] = {1};
    DEV_OK(mt_psum(ctx, ab, x, 1));
    mt_request rq;
    mt_axes collide = {1, {32}}, too_many = {9, {0}}, neg = {-1, {0}};
    DEV_FAILS(mt_psum(ctx, collide, x, 1), MT_EINVAL, "axis 32");
    DEV_FAILS(mt_all_reduce_start(ctx, collide, x, 1, MT_F32, MT_REDUCE_SUM, &rq), MT_EINVAL,
              "axis 32");
    DEV_FAILS(mt_psum(ctx, too_many, x, 1), MT_EINVAL, "9 axes");
    DEV_FAILS(mt_barrier(ctx, neg), MT_EINVAL, "-1 axes");
    DEV_EXPECT(x[0], 4, "x after the one valid psum");
    DEV_EXPECT((double)mt_ctx_collectives(ctx), 1, "collectives");
    return MT_OK;
}

MT_TEST(invalid_axes_fail_before_the_group_cache) {
    mt_launch_opts o = opts_for("a=2,b=2", 4);
    MT_CHECK_OK(mt_launch(&o, bad_axes_device, NULL));
}

/* Every ordered set of axes of a 4-axis mesh (65 with the empty one) can be
 * used in one launch; each psum of ones gives the product of its sizes. */
static mt_status all_axis_sets_device(mt_ctx *ctx, void *arg) {
    static const char *names[4] = {"a", "b", "c", "d"};
    static const int sizes[4] = {2, 1, 2, 1};
    int used = 0;
    /* sets as sequences of distinct axes: base-5 digits, 0 = end */
    for (int code = 0; code < 5 * 5 * 5 * 5; code++) {
        int seq[4], n = 0, c = code, seen = 0, ok = 1;
        while (c) { int a = c % 5 - 1; c /= 5; if (a < 0 || (seen >> a & 1)) { ok = 0; break; } seen |= 1 << a; seq[n++] = a; }
        if (!ok) continue;
        char list[32] = "";
        int want = 1;
        for (int i = 0; i < n; i++) {
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "," : "", names[seq[i]]);
            want *= sizes[seq[i]];
        }
        mt_axes ax;
        DEV_OK(mt_ctx_axes(ctx, list, &ax));
        float x = 1;
        DEV_OK(mt_psum(ctx, ax, &x, 1));
        DEV_EXPECT(x, want, "psum of ones over '%s'", list);
        used++;
    }
    DEV_EXPECT(used, 65, "ordered axis sets");
    return MT_OK;
}

MT_TEST(many_axis_sets) {
    mt_launch_opts o = opts_for("a=2,b=1,c=2,d=1", 4);
    MT_CHECK_OK(mt_launch(&o, all_axis_sets_device, NULL));
}

static mt_status nothing_device(mt_ctx *ctx, void *arg) { return MT_OK; }

MT_TEST(launch_too_many_devices) {
    mt_launch_opts o = opts_for("d=2048", 0);
    MT_CHECK_FAILS(mt_launch(&o, nothing_device, NULL), MT_EINVAL, "d=2048", "at most 1024");
    o = opts_for("a=64,b=64,c=64,d=64,e=64,f=64", 0);   /* the product overflows an int */
    MT_CHECK_FAILS(mt_launch(&o, nothing_device, NULL), MT_EINVAL, "at most 1024");
}

/* Launcher environment: what mpirun (Open MPI) and Hydra (PMI) announce. */
MT_TEST(launcher_world_and_transport_rule) {
    unsetenv("OMPI_COMM_WORLD_RANK"); unsetenv("OMPI_COMM_WORLD_SIZE");
    unsetenv("PMIX_RANK"); unsetenv("PMI_RANK"); unsetenv("PMI_SIZE");
    int rank = -1, size = -1;
    mt_launcher_world(&rank, &size);
    MT_CHECK(rank == 0 && size == 1, "no launcher: rank %d size %d", rank, size);
    MT_CHECK(mt_transport_resolve(MT_TRANSPORT_AUTO) == MT_TRANSPORT_THREADS, "no launcher: threads");
    setenv("PMI_RANK", "3", 1); setenv("PMI_SIZE", "4", 1);
    mt_launcher_world(&rank, &size);
    MT_CHECK(rank == 3 && size == 4, "Hydra: rank %d size %d", rank, size);
    setenv("OMPI_COMM_WORLD_RANK", "1", 1); setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    mt_launcher_world(&rank, &size);
    MT_CHECK(rank == 1 && size == 2, "Open MPI first: rank %d size %d", rank, size);
#ifdef MT_HAVE_MPI
    MT_CHECK(mt_transport_resolve(MT_TRANSPORT_AUTO) == MT_TRANSPORT_MPI, "2 ranks: mpi");
#else
    MT_CHECK(mt_transport_resolve(MT_TRANSPORT_AUTO) == MT_TRANSPORT_THREADS, "no MPI built: threads");
#endif
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
    MT_CHECK(mt_transport_resolve(MT_TRANSPORT_AUTO) == MT_TRANSPORT_THREADS,
             "mpirun -np 1: threads (a 1-rank world has nothing to talk to)");
    MT_CHECK(mt_transport_resolve(MT_TRANSPORT_MPI) == MT_TRANSPORT_MPI, "explicit stays");
    MT_CHECK(mt_transport_resolve(MT_TRANSPORT_THREADS) == MT_TRANSPORT_THREADS, "explicit stays");
}

/* ======================================================================== */
/* Point-to-point messages                                                   */
/* ======================================================================== */

/* Element i of the message that device `sender` sends with `tag`: an integer
 * in [-120, 120], exact in f32, bf16 and i32. */
static int pval(int sender, int tag, size_t i) {
    return (int)((sender * 13 + tag * 7 + (int64_t)(i % 100003) * 3) % 241) - 120;
}

/* buf (n of dt) = the message `sender` sends with `tag`. */
static void fill_msg(void *buf, mt_dtype dt, size_t n, int sender, int tag) {
    for (size_t i = 0; i < n; i++) put(buf, dt, i, pval(sender, tag, i));
}

/* MT_OK when buf (n of dt) holds the message of (sender, tag). */
static mt_status check_msg(const void *buf, mt_dtype dt, size_t n, int sender, int tag,
                           const char *what) {
    for (size_t i = 0; i < n; i++)
        if (get(buf, dt, i) != pval(sender, tag, i))
            return mt_fail(MT_EINTERNAL, "%s: %s message of device %d tag %d, element %zu of %zu "
                           "is %g, want %d", what, dt_name(dt), sender, tag, i, n, get(buf, dt, i),
                           pval(sender, tag, i));
    return MT_OK;
}

/* A ring over `axes`: every device sends to rank r+1 and receives from r-1,
 * every dtype and size, the tag naming the size; then a psum, which in check
 * mode must still pass although the devices issued different numbers of
 * sends and receives before it (rank 0 sends itself one more message). */
static mt_status ring_device(mt_ctx *ctx, void *arg) {
    const char *axes = arg;
    mt_axes ax;
    grp g;
    DEV_OK(group_of(ctx, axes, &ax, &g));
    static const size_t sizes[] = {0, 1, 1000, 300001};
    static const mt_dtype dts[] = {MT_F32, MT_BF16, MT_I32};
    const int next = (g.r + 1) % g.P, prev = (g.r + g.P - 1) % g.P;
    void *out = malloc(300001 * 4), *in = malloc(300001 * 4);
    mt_status st = out && in ? MT_OK : mt_fail(MT_ENOMEM, "test buffers");
    for (int k = 0; st == MT_OK && k < 4; k++)
        for (int t = 0; st == MT_OK && t < 3; t++) {
            const int tag = k * 3 + t;
            fill_msg(out, dts[t], sizes[k], mt_ctx_device(ctx), tag);
            if ((st = mt_send(ctx, ax, out, sizes[k], dts[t], next, tag))) break;
            memset(out, 0x55, sizes[k] * 4);   /* the send copied it: reuse at once */
            if ((st = mt_recv(ctx, ax, in, sizes[k], dts[t], prev, tag))) break;
            st = check_msg(in, dts[t], sizes[k], g.members[prev], tag, axes);
        }
    if (st == MT_OK && g.r == 0) {
        float one = 1, got = 0;
        if (!(st = mt_send(ctx, ax, &one, 1, MT_F32, 0, 99)))
            st = mt_recv(ctx, ax, &got, 1, MT_F32, 0, 99);
    }
    float x = 1;
    if (st == MT_OK) st = mt_psum(ctx, ax, &x, 1);
    if (st == MT_OK && x != (float)g.P)
        st = mt_fail(MT_EINTERNAL, "psum after the ring: %g, want %d", x, g.P);
    free(out);
    free(in);
    return st;
}

MT_TEST(p2p_ring_over_each_axis) {
    static const char *const over[] = {"pipe", "data", "data,pipe", "pipe,data"};
    for (int i = 0; i < 4; i++)
        for (int check = 0; check < 2; check++) {
            mt_launch_opts o = opts_for("pipe=4,data=2", 8);
            o.check = check;
            mt_status st = mt_launch(&o, ring_device, (void *)over[i]);
            MT_CHECK(st == MT_OK, "ring over '%s'%s: %s", over[i], check ? " (check mode)" : "",
                     mt_errmsg());
        }
}

/* Device 0 sends tags 1, 2, 3 (of different sizes) to device 1, which takes
 * them 3, 1, 2; and, on each tag, several messages that must come out in
 * the order they went in, while other tags come and go in between. */
static mt_status tags_device(mt_ctx *ctx, void *arg) {
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    int32_t buf[64];
    if (mt_ctx_device(ctx) == 0) {
        for (int tag = 1; tag <= 3; tag++) {
            fill_msg(buf, MT_I32, (size_t)tag * 10, 0, tag);
            DEV_OK(mt_send(ctx, ax, buf, (size_t)tag * 10, MT_I32, 1, tag));
        }
        /* FIFO: 20 messages on tag 5, interleaved with 20 on tag 6 */
        for (int k = 0; k < 20; k++) {
            buf[0] = k;
            DEV_OK(mt_send(ctx, ax, buf, 1, MT_I32, 1, 5));
            buf[0] = 1000 + k;
            DEV_OK(mt_send(ctx, ax, buf, 1, MT_I32, 1, 6));
        }
        return MT_OK;
    }
    static const int order[] = {3, 1, 2};
    for (int j = 0; j < 3; j++) {
        const int tag = order[j];
        DEV_OK(mt_recv(ctx, ax, buf, (size_t)tag * 10, MT_I32, 0, tag));
        DEV_OK(check_msg(buf, MT_I32, (size_t)tag * 10, 0, tag, "out of order"));
    }
    /* all of tag 6 first, then tag 5: each in send order */
    for (int tag = 6; tag >= 5; tag--)
        for (int k = 0; k < 20; k++) {
            DEV_OK(mt_recv(ctx, ax, buf, 1, MT_I32, 0, tag));
            DEV_EXPECT(buf[0], (tag == 6 ? 1000 : 0) + k, "message %d of tag %d", k, tag);
        }
    return MT_OK;
}

MT_TEST(p2p_tags_in_any_order_fifo_within_a_tag) {
    mt_launch_opts o = opts_for("", 2);
    MT_CHECK_OK(mt_launch(&o, tags_device, NULL));
}

/* Every device sends to itself, over its axis and over no axes (a group of
 * one), and takes the messages back in the other order. */
static mt_status self_device(mt_ctx *ctx, void *arg) {
    mt_axes ax, none;
    grp g;
    DEV_OK(group_of(ctx, "d", &ax, &g));
    memset(&none, 0, sizeof none);
    const int me = mt_ctx_device(ctx);
    float a[100], b[100];
    fill_msg(a, MT_F32, 100, me, 1);
    DEV_OK(mt_send(ctx, ax, a, 100, MT_F32, g.r, 1));
    fill_msg(a, MT_F32, 100, me, 2);
    DEV_OK(mt_send(ctx, none, a, 100, MT_F32, 0, 1));   /* another channel, the same tag */
    DEV_OK(mt_recv(ctx, none, b, 100, MT_F32, 0, 1));
    DEV_OK(check_msg(b, MT_F32, 100, me, 2, "self over no axes"));
    DEV_OK(mt_recv(ctx, ax, b, 100, MT_F32, g.r, 1));
    return check_msg(b, MT_F32, 100, me, 1, "self over 'd'");
}

MT_TEST(p2p_self_send) {
    for (int n = 1; n <= 3; n++) {
        mt_launch_opts o = opts_for("", n);
        MT_CHECK_OK(mt_launch(&o, self_device, NULL));
    }
}

/* 100 messages of 1 MiB each way before anything is received: a send never
 * waits for its receiver. Each device first sends all of its messages and
 * says so, and only receives once its peer has said so too: were a send to
 * wait for the receive, neither would ever say it. */
#define MANY 100
#define MANY_N ((size_t)1 << 18)   /* i32: 1 MiB */

typedef struct {
    atomic_int all_sent;
} inflight_arg;

static mt_status many_p2p_device(mt_ctx *ctx, void *arg) {
    inflight_arg *a = arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    const int me = mt_ctx_device(ctx), peer = 1 - me;
    int32_t *buf = malloc(MANY_N * sizeof *buf);
    if (!buf) return mt_fail(MT_ENOMEM, "test buffer");
    mt_status st = MT_OK;
    for (int k = 0; st == MT_OK && k < MANY; k++) {
        for (size_t i = 0; i < MANY_N; i++)
            buf[i] = (int32_t)(me * 1000003 + k * 7919 + (int64_t)i);
        st = mt_send(ctx, ax, buf, MANY_N, MT_I32, peer, 3);
    }
    atomic_fetch_add(&a->all_sent, 1);
    for (double t0 = mt_time_now(); st == MT_OK && atomic_load(&a->all_sent) < 2;) {
        if (mt_time_now() - t0 > 30) st = mt_fail(MT_EINTERNAL, "the peer never finished sending");
        usleep(1000);
    }
    for (int k = 0; st == MT_OK && k < MANY; k++) {
        if ((st = mt_recv(ctx, ax, buf, MANY_N, MT_I32, peer, 3))) break;
        for (size_t i = 0; i < MANY_N; i++)
            if (buf[i] != (int32_t)(peer * 1000003 + k * 7919 + (int64_t)i)) {
                st = mt_fail(MT_EINTERNAL, "message %d from device %d: element %zu is %d", k,
                             peer, i, (int)buf[i]);
                break;
            }
    }
    free(buf);
    return st;
}

MT_TEST(p2p_many_in_flight_before_any_receive) {
    inflight_arg a = {0};
    mt_launch_opts o = opts_for("", 2);
    MT_CHECK_OK(mt_launch(&o, many_p2p_device, &a));
}

/* A receive of the wrong size fails with MT_ESHAPE naming both sizes and
 * drops the message; the next message of the channel comes through. */
typedef struct {
    mt_status st;
    char      msg[512];
} shape_arg;

static mt_status shape_device(mt_ctx *ctx, void *arg) {
    shape_arg *a = arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    float buf[12];
    if (mt_ctx_device(ctx) == 0) {
        fill_msg(buf, MT_F32, 10, 0, 4);
        DEV_OK(mt_send(ctx, ax, buf, 10, MT_F32, 1, 4));
        fill_msg(buf, MT_F32, 12, 0, 4);
        return mt_send(ctx, ax, buf, 12, MT_F32, 1, 4);
    }
    for (int i = 0; i < 12; i++) buf[i] = -1000;
    a->st = mt_recv(ctx, ax, buf, 12, MT_F32, 0, 4);
    snprintf(a->msg, sizeof a->msg, "%s", mt_errmsg());
    for (int i = 0; i < 12; i++) DEV_EXPECT(buf[i], -1000, "buf[%d] after the failed receive", i);
    DEV_OK(mt_recv(ctx, ax, buf, 12, MT_F32, 0, 4));
    return check_msg(buf, MT_F32, 12, 0, 4, "the message after the dropped one");
}

MT_TEST(p2p_size_mismatch) {
    shape_arg a = {0};
    mt_launch_opts o = opts_for("", 2);
    MT_CHECK_OK(mt_launch(&o, shape_device, &a));
    MT_CHECK(a.st == MT_ESHAPE, "mismatched receive -> %s, want MT_ESHAPE", mt_status_name(a.st));
    MT_CHECK(strstr(a.msg, "holds 40 bytes (10 f32 elements)") &&
             strstr(a.msg, "expects 48 (12 f32 elements)") && strstr(a.msg, "from device 0") &&
             strstr(a.msg, "tag 4"), "message '%s'", a.msg);
}

/* Device 0 waits for a message device 2 never sends (device 2 sends device
 * 1 one on another tag, and returns). */
static mt_status never_sent_device(mt_ctx *ctx, void *arg) {
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    float x[4] = {1, 2, 3, 4};
    switch (mt_ctx_device(ctx)) {
    case 0: return mt_recv(ctx, ax, x, 4, MT_F32, 2, 9);
    case 1: return mt_recv(ctx, ax, x, 4, MT_F32, 2, 4);
    default: return mt_send(ctx, ax, x, 4, MT_F32, 1, 4);
    }
}

MT_TEST(p2p_timeout_names_sender_and_tag) {
    mt_launch_opts o = opts_for("", 3);
    o.timeout_s = 0.5;
    double t0 = mt_time_now();
    MT_CHECK_FAILS(mt_launch(&o, never_sent_device, NULL), MT_ETIMEOUT,
                   "device 0: timed out after 0.5 s in #1 recv from device 2 over 'd' tag 9 "
                   "f32 16 bytes", "no message arrived from device 2",
                   "device 2's last operation: #1 send to device 1 over 'd' tag 4 f32 16 bytes "
                   "(finished)", "check that device 2 sends to device 0 over 'd' with tag 9");
    MT_CHECK(mt_time_now() - t0 < 10, "the timeout took %.1f s", mt_time_now() - t0);
}

/* Device 1 fails while device 0 waits in mt_recv for its message: device 0
 * returns at once with MT_EABORTED, the launch with device 1's error. */
typedef struct {
    mt_status st;
    double    waited;
} abort_arg;

static mt_status fail_while_peer_waits(mt_ctx *ctx, void *arg) {
    abort_arg *a = arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    float x = 0;
    if (mt_ctx_device(ctx) == 1) {
        usleep(50000);   /* device 0 is waiting by now */
        return mt_fail(MT_EINVAL, "stage 1 fails on purpose");
    }
    double t0 = mt_time_now();
    a->st = mt_recv(ctx, ax, &x, 1, MT_F32, 1, 0);
    a->waited = mt_time_now() - t0;
    return a->st;
}

MT_TEST(p2p_failing_sender_aborts_receiver) {
    abort_arg a = {MT_OK, 0};
    mt_launch_opts o = opts_for("", 2);
    MT_CHECK_FAILS(mt_launch(&o, fail_while_peer_waits, &a), MT_EINVAL,
                   "device 1: stage 1 fails on purpose");
    MT_CHECK(a.st == MT_EABORTED, "the waiting receive -> %s", mt_status_name(a.st));
    MT_CHECK(a.waited < 5, "the receive waited %.2f s", a.waited);
}

/* Bad arguments fail on the calling device with MT_EINVAL naming the value,
 * and nothing is recorded. */
static mt_status p2p_args_device(mt_ctx *ctx, void *arg) {
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "pipe", &ax));
    float x[4] = {0};
    DEV_FAILS(mt_send(ctx, ax, x, 4, MT_F32, 4, 0), MT_EINVAL,
              "dst 4 is not a rank of the group of 4", "'pipe'", "0..3");
    DEV_FAILS(mt_send(ctx, ax, x, 4, MT_F32, -1, 0), MT_EINVAL, "dst -1");
    DEV_FAILS(mt_recv(ctx, ax, x, 4, MT_F32, 7, 0), MT_EINVAL, "src 7 is not a rank");
    DEV_FAILS(mt_send(ctx, ax, x, 4, MT_F32, 0, 40000), MT_EINVAL,
              "tag 40000 is outside 0..32767", "MT_TAG_MAX");
    DEV_FAILS(mt_recv(ctx, ax, x, 4, MT_F32, 0, -1), MT_EINVAL, "tag -1 is outside");
    DEV_FAILS(mt_send(ctx, ax, NULL, 5, MT_F32, 0, 0), MT_EINVAL, "buf is NULL but count is 5");
    DEV_FAILS(mt_recv(ctx, ax, NULL, 5, MT_F32, 0, 0), MT_EINVAL, "buf is NULL but count is 5");
    DEV_FAILS(mt_send(ctx, ax, x, 4, (mt_dtype)7, 0, 0), MT_EINVAL, "unknown dtype 7");
    DEV_EXPECT((double)mt_ctx_collectives(ctx), 0, "operations recorded after argument errors");
    return MT_OK;
}

MT_TEST(p2p_argument_errors) {
    mt_launch_opts o = opts_for("pipe=4,data=2", 8);
    MT_CHECK_OK(mt_launch(&o, p2p_args_device, NULL));
}

/* Messages never received fail a launch that would have succeeded, naming
 * the receiver, the sender and the tag; a launch that failed otherwise keeps
 * its own error. */
static mt_status unreceived_device(mt_ctx *ctx, void *arg) {
    const bool fail = arg != NULL;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    float x[4] = {0};
    if (mt_ctx_device(ctx) != 0) return MT_OK;
    DEV_OK(mt_send(ctx, ax, x, 4, MT_F32, 1, 3));
    DEV_OK(mt_send(ctx, ax, x, 2, MT_F32, 1, 8));
    return fail ? mt_fail(MT_EINVAL, "device 0 fails after sending") : MT_OK;
}

MT_TEST(p2p_unreceived_messages_fail_the_launch) {
    mt_launch_opts o = opts_for("", 2);
    MT_CHECK_FAILS(mt_launch(&o, unreceived_device, NULL), MT_ESTATE,
                   "device 1: 2 messages sent to this device were never received",
                   "the first from device 0 over 'd' tag 3, 16 bytes", "matching mt_recv");
    MT_CHECK_FAILS(mt_launch(&o, unreceived_device, (void *)1), MT_EINVAL,
                   "device 0: device 0 fails after sending");
}

/* A receive first completes the device's started collectives: device 1 runs
 * the all-reduce (queued: small) at its mt_wait, before it sends, and device
 * 0's receive must take part in it or both would wait forever. */
static mt_status recv_flushes_device(mt_ctx *ctx, void *arg) {
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    float x[4] = {1, 1, 1, 1}, y[4] = {0};
    mt_request req;
    DEV_OK(mt_all_reduce_start(ctx, ax, x, 4, MT_F32, MT_REDUCE_SUM, &req));
    if (mt_ctx_device(ctx) == 0) {
        DEV_OK(mt_recv(ctx, ax, y, 4, MT_F32, 1, 0));
        DEV_EXPECT(y[3], 2, "received psum");
        return mt_wait(ctx, &req);   /* already complete */
    }
    DEV_OK(mt_wait(ctx, &req));
    return mt_send(ctx, ax, x, 4, MT_F32, 0, 0);
}

MT_TEST(p2p_recv_completes_started_collectives) {
    mt_launch_opts o = opts_for("", 2);
    o.timeout_s = 10;
    MT_CHECK_OK(mt_launch(&o, recv_flushes_device, NULL));
}

/* Sends and receives are numbered and recorded with the collectives, and
 * are spans of the trace with their peer and tag. */
static mt_status traced_p2p_device(mt_ctx *ctx, void *arg) {
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "d", &ax));
    float x[4] = {1, 2, 3, 4};
    DEV_OK(mt_psum(ctx, ax, x, 4));
    if (mt_ctx_device(ctx) == 0) {
        DEV_OK(mt_send(ctx, ax, x, 4, MT_F32, 1, 7));
        DEV_EXPECT(strcmp(mt_ctx_last_collective(ctx),
                          "#2 send to device 1 over 'd' tag 7 f32 16 bytes"), 0,
                   "last operation '%s'", mt_ctx_last_collective(ctx));
    } else {
        DEV_OK(mt_recv(ctx, ax, x, 4, MT_F32, 0, 7));
        DEV_EXPECT(strcmp(mt_ctx_last_collective(ctx),
                          "#2 recv from device 0 over 'd' tag 7 f32 16 bytes"), 0,
                   "last operation '%s'", mt_ctx_last_collective(ctx));
    }
    DEV_EXPECT((double)mt_ctx_collectives(ctx), 2, "operations");
    return MT_OK;
}

MT_TEST(p2p_recorded_and_traced) {
    char path[] = "/tmp/mt_p2p_trace_XXXXXX";
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0, "mkstemp");
    close(fd);
    mt_launch_opts o = opts_for("", 2);
    o.trace = path;
    MT_CHECK_OK(mt_launch(&o, traced_p2p_device, NULL));
    FILE *f = fopen(path, "r");
    MT_CHECK(f != NULL, "the trace %s was not written", path);
    static char js[1 << 16];
    size_t n = fread(js, 1, sizeof js - 1, f);
    js[n] = '\0';
    fclose(f);
    remove(path);
    MT_CHECK(strstr(js, "{\"name\":\"send 'd'\",\"cat\":\"comm\"") &&
             strstr(js, "\"args\":{\"bytes\":16,\"seq\":2,\"peer\":1,\"tag\":7}"),
             "no send span to device 1 with tag 7 in %s", js);
    MT_CHECK(strstr(js, "{\"name\":\"recv 'd'\",\"cat\":\"comm\"") &&
             strstr(js, "\"args\":{\"bytes\":16,\"seq\":2,\"peer\":0,\"tag\":7}"),
             "no recv span from device 0 with tag 7 in %s", js);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
