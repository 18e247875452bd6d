/*
 * test_backend_guard.c — nothing reaches tensor data around the backend.
 *
 * A test-only backend wraps the CPU's and keeps every buffer in a mapping
 * of its own that is PROT_NONE while the test says "guarded", except inside
 * its members (each unprotects every buffer, runs the CPU's member and
 * protects them again). Code that reads or writes a parameter, a gradient
 * or an optimizer moment without going through the table faults, and the
 * harness reports the crash. Guarded: creating the optimizer, its steps,
 * saving and loading a checkpoint and an llm.c file. The members also count
 * what goes through them, checked against a hand count of the bytes.
 *
 * The reference is the plain CPU backend running the same program: losses
 * and parameters must be bit for bit its own.
 */
#include "meshtrain.h"
#include "harness.h"
#include "graph/tensor_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* ======================================================================== */
/* The guarded backend                                                      */
/* ======================================================================== */

enum { MAX_BUFS = 4096 };
static struct { void *p; size_t len; } bufs[MAX_BUFS];
static int n_bufs;
static bool guarded;   /* buffers PROT_NONE outside the members */
static struct { size_t in, out; int updates, sumsqs; } count;

static void protect_all(int prot) {
    for (int i = 0; i < n_bufs; i++)
        if (mprotect(bufs[i].p, bufs[i].len, prot) != 0) _exit(3);
}
static void enter(void) { if (guarded) protect_all(PROT_READ | PROT_WRITE); }
static void leave(void) { if (guarded) protect_all(PROT_NONE); }

static void guard(bool on) {
    if (on == guarded) return;
    protect_all(on ? PROT_NONE : PROT_READ | PROT_WRITE);
    guarded = on;
}

static mt_status g_alloc(size_t bytes, void **data) {
    *data = NULL;
    if (!bytes) return MT_OK;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (bytes + page - 1) / page * page;
    void *p = mmap(NULL, len, guarded ? PROT_NONE : PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || n_bufs == MAX_BUFS) return mt_fail(MT_ENOMEM, "guarded: no memory");
    bufs[n_bufs].p = p;
    bufs[n_bufs++].len = len;
    *data = p;
    return MT_OK;
}

static void g_free(void *data) {
    for (int i = 0; data && i < n_bufs; i++)
        if (bufs[i].p == data) {
            munmap(data, bufs[i].len);
            bufs[i] = bufs[--n_bufs];
            return;
        }
}

static void g_clear(void *data, size_t bytes) {
    enter();
    mt_backend_cpu()->buffer_clear(data, bytes);
    leave();
}

/* copy_in (in) or copy_out, counted */
static mt_status g_copy(bool in, void *dst, const void *src, size_t bytes) {
    enter();
    const mt_backend *cpu = mt_backend_cpu();
    mt_status s = (in ? cpu->copy_in : cpu->copy_out)(dst, src, bytes);
    *(in ? &count.in : &count.out) += bytes;
    leave();
    return s;
}
static mt_status g_copy_in(void *dst, const void *src, size_t bytes) {
    return g_copy(true, dst, src, bytes);
}
static mt_status g_copy_out(void *dst, const void *src, size_t bytes) {
    return g_copy(false, dst, src, bytes);
}

static bool g_supports(const mt_op_call *call) { return mt_backend_cpu()->supports_op(call); }

static void g_run(const mt_op_env *env, const mt_op_call *call) {
    enter();
    mt_backend_cpu()->run_op(env, call);
    leave();
}

static mt_status g_update(const mt_op_env *env, const mt_optim_update *u) {
    enter();
    mt_status s = mt_backend_cpu()->optim_update(env, u);
    count.updates++;
    leave();
    return s;
}

static mt_status g_sumsq(const mt_op_env *env, const float *x, int64_t n, double *out) {
    enter();
    mt_status s = mt_backend_cpu()->sumsq(env, x, n, out);
    count.sumsqs++;
    leave();
    return s;
}

/* no stream members: the host's defaults */
static const mt_backend guarded_backend = {
    .name = "guarded", .buffer_alloc = g_alloc, .buffer_free = g_free, .buffer_clear = g_clear,
    .copy_in = g_copy_in, .copy_out = g_copy_out, .supports_op = g_supports, .run_op = g_run,
    .optim_update = g_update, .sumsq = g_sumsq,
};

/* ======================================================================== */
/* The same run on either backend                                            */
/* ======================================================================== */

static const mt_gpt_config CFG = {.L = 2, .C = 32, .NH = 4, .maxT = 16, .V = 100, .Vp = 128};
enum { B = 2, T = 16, STEPS = 3, MORE = 2 };

typedef struct {
    mt_graph *g;
    mt_optim *opt;
} model;

static model make(const mt_backend *be) {
    model m = {mt_graph_create(), NULL};
    mt_tensor *loss = mt_gpt_build(m.g, &CFG, B, T, 1.0f / (B * T));
    MT_CHECK(loss, "GPT built: %s", mt_graph_errmsg(m.g));
    MT_CHECK_OK(mt_graph_compile(m.g, loss, &(mt_compile_opts){.seed = 7, .backend = be}));
    MT_CHECK_OK(mt_gpt_fill_constants(m.g));
    mt_optim_config oc = mt_optim_defaults();
    oc.lr = 1e-2f;
    guard(be == &guarded_backend);
    MT_CHECK_OK(mt_optim_create(m.g, &oc, &m.opt));
    guard(false);
    return m;
}

static void drop(model *m) {
    mt_optim_free(m->opt);
    mt_graph_free(m->g);
}

/* Steps [s0, s0 + n): data through the backend, forward, backward, and the
 * optimizer step guarded; the losses into loss[]. */
static void train(model *m, int s0, int n, float *loss) {
    int32_t tok[B * T], tgt[B * T];
    for (int s = s0; s < s0 + n; s++) {
        for (int i = 0; i < B * T; i++) {
            tok[i] = (int32_t)((i * 7 + s * 13) % CFG.V);
            tgt[i] = (int32_t)((i * 5 + s * 3 + 1) % CFG.V);
        }
        MT_CHECK_OK(mt_tensor_write(mt_graph_find(m->g, "tokens"), tok, 0, B * T));
        MT_CHECK_OK(mt_tensor_write(mt_graph_find(m->g, "targets"), tgt, 0, B * T));
        MT_CHECK_OK(mt_graph_forward(m->g));
        MT_CHECK_OK(mt_graph_backward(m->g));
        loss[s - s0] = mt_graph_loss(m->g);
        guard(mt__graph_backend(m->g) == &guarded_backend);
        MT_CHECK_OK(mt_optim_step(m->opt, NULL));
        guard(false);
    }
}

/* Every parameter's values, read through the backend, into dst (numel
 * floats each, in order); returns the floats written. */
static size_t params_of(mt_graph *g, float *dst) {
    size_t at = 0;
    for (int i = 0; i < mt_graph_n_params(g); i++) {
        mt_tensor *p = mt_graph_param_at(g, i);
        if (dst) MT_CHECK_OK(mt_tensor_read(p, dst + at, 0, mt_tensor_numel(p)));
        at += (size_t)mt_tensor_numel(p);
    }
    return at;
}

typedef struct {
    float   loss[STEPS + MORE], resumed[MORE];
    float  *params, *from_llmc;   /* the resumed run's, and an llm.c file's round trip */
    size_t  ckpt_out, ckpt_in;    /* bytes copied by the backend during save and load */
} record;

/* STEPS steps, a checkpoint, MORE steps; a fresh model loads the
 * checkpoint and takes the same MORE steps; an llm.c file of the first
 * model loaded into a third. */
static record run_on(const mt_backend *be, const char *tag) {
    record r = {0};
    char ckpt[64], llmc[64];
    snprintf(ckpt, sizeof ckpt, "backend_guard_%s.ckpt", tag);
    snprintf(llmc, sizeof llmc, "backend_guard_%s.bin", tag);
    bool on = be == &guarded_backend;
    model a = make(be);
    train(&a, 0, STEPS, r.loss);
    mt_ckpt_meta meta = {.step = STEPS, .seed = 7};
    snprintf(meta.model, sizeof meta.model, "test gpt");
    size_t out0 = count.out;
    guard(on);
    MT_CHECK_OK(mt_ckpt_save(ckpt, a.g, a.opt, &meta));
    guard(false);
    r.ckpt_out = count.out - out0;
    train(&a, STEPS, MORE, r.loss + STEPS);

    model b = make(be);
    size_t in0 = count.in;
    guard(on);
    MT_CHECK_OK(mt_ckpt_load(ckpt, b.g, b.opt, &meta));
    guard(false);
    r.ckpt_in = count.in - in0;
    train(&b, STEPS, MORE, r.resumed);
    size_t n = params_of(b.g, NULL);
    r.params = malloc(n * sizeof *r.params);
    r.from_llmc = malloc(n * sizeof *r.from_llmc);
    params_of(b.g, r.params);

    model c = make(be);
    guard(on);
    MT_CHECK_OK(mt_llmc_save(llmc, b.g, &CFG));
    MT_CHECK_OK(mt_llmc_load(llmc, c.g, &CFG));
    guard(false);
    params_of(c.g, r.from_llmc);
    drop(&a);
    drop(&b);
    drop(&c);
    remove(ckpt);
    remove(llmc);
    return r;
}

MT_TEST(guarded_backend_trains_saves_and_loads_as_the_cpu) {
    record cpu = run_on(mt_backend_cpu(), "cpu");
    memset(&count, 0, sizeof count);
    record gd = run_on(&guarded_backend, "guarded");
    MT_CHECK(memcmp(cpu.loss, gd.loss, sizeof cpu.loss) == 0, "losses differ: %.9g vs %.9g",
             (double)cpu.loss[STEPS + MORE - 1], (double)gd.loss[STEPS + MORE - 1]);
    MT_CHECK(memcmp(cpu.resumed, gd.resumed, sizeof cpu.resumed) == 0, "resumed losses differ");
    MT_CHECK(memcmp(cpu.resumed, cpu.loss + STEPS, sizeof cpu.resumed) == 0,
             "the resumed run is the one that never stopped");
    model sizes = make(mt_backend_cpu());
    mt_graph *g = sizes.g;
    size_t n = params_of(g, NULL);
    MT_CHECK(memcmp(cpu.params, gd.params, n * sizeof(float)) == 0, "parameters differ");
    MT_CHECK(memcmp(gd.params, gd.from_llmc, n * sizeof(float)) == 0, "llm.c round trip");
    /* a hand count: the save copies out every parameter, m and v (4 bytes
     * each), the load copies them in; per step one update and one sum per
     * parameter (every GPT parameter has a gradient) */
    size_t want = 3 * 4 * n;
    MT_CHECK(gd.ckpt_out == want, "the save copied %zu bytes out, want %zu", gd.ckpt_out, want);
    MT_CHECK(gd.ckpt_in == want, "the load copied %zu bytes in, want %zu", gd.ckpt_in, want);
    int steps = STEPS + MORE + MORE, np = mt_graph_n_params(g);
    MT_CHECK(count.updates == steps * np, "%d updates, want %d", count.updates, steps * np);
    MT_CHECK(count.sumsqs == steps * np, "%d sums, want %d", count.sumsqs, steps * np);
    drop(&sizes);
    free(cpu.params); free(cpu.from_llmc); free(gd.params); free(gd.from_llmc);
}

/* A bypass faults: the guard works (the harness reports the signal; a
 * forked child tells it apart here). */
MT_TEST(guarded_memory_faults_outside_the_members) {
    model m = make(&guarded_backend);
    float *p = mt__tensor_buffer(mt_graph_param_at(m.g, 0));
    pid_t pid = fork();
    if (pid == 0) {
        guard(true);
        volatile float x = p[0];   /* as code that bypassed the backend would */
        (void)x;
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    /* SIGSEGV; under AddressSanitizer, its report and a failed exit */
    MT_CHECK(!(WIFEXITED(st) && WEXITSTATUS(st) == 0), "reading a guarded buffer faults");
    drop(&m);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
