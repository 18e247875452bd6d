/*
 * test_backend_guard.c — nothing reaches tensor data around the backend.
 *
 * A test-only backend wraps the CPU's and keeps every buffer in a mapping
 * of its own that is PROT_NONE while the test says "guarded", except inside
 * its members (each unprotects every buffer, runs the CPU's member and
 * protects them again). Code that reads or writes a parameter, a gradient,
 * an activation, a bucket or an optimizer moment without going through the
 * table faults, and the harness reports the crash. Guarded, for every model
 * the trainer has (GPT, LLaMA, MLP, linear regression; the GPT in bf16 too
 * where oneDNN is built in): compiling (parameter init, zeroed gradients,
 * the bf16 products' plans through the table's plan members), filling
 * constants, writing the inputs, the forward (the loss read, bf16 weight
 * copies and activation casts), the backward (the seed), creating the
 * optimizer and its steps, saving and loading a checkpoint, and the GPT's
 * llm.c file. The members also count what goes through them, checked
 * against hand counts (one plan per product node of every bf16 compile).
 *
 * The reference is the plain CPU backend running the same program: losses
 * and parameters must be bit for bit its own.
 *
 * One device: on a mesh the threads transport moves a peer's buffers from
 * the peer's thread (an asynchronous collective progresses wherever a
 * device waits), which a process-wide mprotect cannot tell from a bypass.
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
static struct {
    size_t in, out;
    int    updates, sumsqs, converts, inits;
    int    sets, plans, sets_freed;   /* the bf16 products' plan members */
} count;

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
static size_t g_scratch(const mt_op_call *call, bool *caller) {
    return mt_backend_cpu()->scratch(call, caller);
}

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

static mt_status g_buffer_copy(void *dst, size_t dst_pitch, const void *src, size_t src_pitch,
                               size_t row_bytes, size_t rows) {
    enter();
    mt_status s = mt_backend_cpu()->buffer_copy(dst, dst_pitch, src, src_pitch, row_bytes, rows);
    leave();
    return s;
}

static mt_status g_scale(const mt_op_env *env, float *out, const float *in, float s, int64_t n,
                         bool acc) {
    enter();
    mt_status st = mt_backend_cpu()->buffer_scale(env, out, in, s, n, acc);
    leave();
    return st;
}

static mt_status g_convert(const mt_op_env *env, mt_convert_kind kind, void *dst,
                           const void *src, int64_t n, bool acc) {
    enter();
    mt_status s = mt_backend_cpu()->convert(env, kind, dst, src, n, acc);
    count.converts++;
    leave();
    return s;
}

static mt_status g_param_init(const mt_op_env *env, const mt_tensor *t, uint64_t seed,
                              uint64_t stream) {
    enter();
    mt_status s = mt_backend_cpu()->param_init(env, t, seed, stream);
    count.inits++;
    leave();
    return s;
}

/* The bf16 products' plans: made at compile, reading no tensor memory, so
 * the buffers stay protected (a plan that read a weight would fault). */
static mt_status g_plans_create(const mt_op_env *env, mt_backend_plans **out) {
    mt_status s = mt_backend_cpu()->plans_create(env, out);
    count.sets += s == MT_OK;
    return s;
}

static mt_status g_plan_matmul(mt_backend_plans *set, const mt_op_call *call,
                               const mt_product_operands *ops, const void **plan,
                               size_t *ws_bytes) {
    count.plans++;
    return mt_backend_cpu()->plan_matmul(set, call, ops, plan, ws_bytes);
}

static void g_plans_workspace(mt_backend_plans *set, void *ws) {
    mt_backend_cpu()->plans_workspace(set, ws);
}

static void g_plans_free(mt_backend_plans *set) {
    count.sets_freed++;
    mt_backend_cpu()->plans_free(set);
}

/* no stream members: the host's defaults */
static const mt_backend guarded_backend = {
    .name = "guarded", .buffer_alloc = g_alloc, .buffer_free = g_free, .buffer_clear = g_clear,
    .copy_in = g_copy_in, .copy_out = g_copy_out, .supports_op = g_supports, .run_op = g_run,
    .scratch = g_scratch,
    .optim_update = g_update, .sumsq = g_sumsq, .buffer_copy = g_buffer_copy,
    .buffer_scale = g_scale, .convert = g_convert, .param_init = g_param_init,
    .plans_create = g_plans_create, .plan_matmul = g_plan_matmul,
    .plans_workspace = g_plans_workspace, .plans_free = g_plans_free,
};

/* ======================================================================== */
/* The models                                                               */
/* ======================================================================== */

enum { B = 2, T = 16, STEPS = 3, MORE = 2 };
static const mt_gpt_config GPT = {.L = 2, .C = 32, .NH = 4, .maxT = 16, .V = 100, .Vp = 128};
static const mt_llama_config LLAMA = {.dim = 32, .ffn_dim = 64, .n_layers = 2, .n_heads = 4,
                                      .n_kv_heads = 2, .vocab = 100, .max_seq = 16,
                                      .rope_theta = 10000.0f, .norm_eps = 1e-5f,
                                      .multiple_of = 32, .ffn_mult = 1.0f};
enum { MLP_IN = 8, MLP_HIDDEN = 16, MLP_OUT = 4, MLP_LAYERS = 3, LINREG_F = 3 };

typedef struct {
    const char  *name;
    mt_precision precision;
    bool         tokens;   /* int32 "tokens" and "targets" (B,T); else f32 x and y */
} model_kind;

static const model_kind MODELS[] = {
    {"gpt", MT_PRECISION_FP32, true},    {"llama", MT_PRECISION_FP32, true},
    {"mlp", MT_PRECISION_FP32, false},   {"linreg", MT_PRECISION_FP32, false},
    {"gpt", MT_PRECISION_BF16, true},
};
#define N_MODELS (int)(sizeof MODELS / sizeof MODELS[0])

static mt_tensor *build(mt_graph *g, const model_kind *k) {
    if (!strcmp(k->name, "gpt")) return mt_gpt_build(g, &GPT, B, T, 1.0f / (B * T));
    if (!strcmp(k->name, "llama")) return mt_llama_build(g, &LLAMA, B, T, 1.0f / (B * T));
    if (!strcmp(k->name, "mlp"))
        return mt_mlp_build(g, B, MLP_IN, MLP_HIDDEN, MLP_OUT, MLP_LAYERS, 1.0f / B);
    return mt_linreg_build(g, B, LINREG_F, 1.0f / B);
}

/* Step s's inputs, a function of s alone, written through the backend. */
static void feed(mt_graph *g, const model_kind *k, int s) {
    if (k->tokens) {
        int32_t tok[B * T], tgt[B * T];
        for (int i = 0; i < B * T; i++) {
            tok[i] = (int32_t)((i * 7 + s * 13) % GPT.V);
            tgt[i] = (int32_t)((i * 5 + s * 3 + 1) % GPT.V);
        }
        MT_CHECK_OK(mt_tensor_write(mt_graph_find(g, "tokens"), tok, 0, B * T));
        MT_CHECK_OK(mt_tensor_write(mt_graph_find(g, "targets"), tgt, 0, B * T));
        return;
    }
    bool mlp = !strcmp(k->name, "mlp");
    mt_tensor *x = mt_graph_find(g, "x"), *y = mt_graph_find(g, mlp ? "targets" : "y");
    float xs[B * MLP_IN], ys[B * MLP_OUT];
    for (int i = 0; i < (int)mt_tensor_numel(x); i++) xs[i] = (float)((i * 7 + s * 3) % 11) / 11;
    for (int i = 0; i < (int)mt_tensor_numel(y); i++) ys[i] = (float)((i * 5 + s) % 7) / 7 - 0.5f;
    MT_CHECK_OK(mt_tensor_write(x, xs, 0, mt_tensor_numel(x)));
    MT_CHECK_OK(mt_tensor_write(y, ys, 0, mt_tensor_numel(y)));
}

typedef struct {
    const model_kind *kind;
    mt_graph *g;
    mt_optim *opt;
} model;

/* Builds and compiles the model on `be`, fills its constants and makes its
 * optimizer: all but the build guarded on the guarded backend. */
static model make(const mt_backend *be, const model_kind *k) {
    model m = {k, mt_graph_create(), NULL};
    mt_tensor *loss = build(m.g, k);
    MT_CHECK(loss, "%s built: %s", k->name, mt_graph_errmsg(m.g));
    guard(be == &guarded_backend);
    MT_CHECK_OK(mt_graph_compile(m.g, loss, &(mt_compile_opts){.seed = 7, .backend = be,
                                                                .precision = k->precision}));
    if (!strcmp(k->name, "gpt")) MT_CHECK_OK(mt_gpt_fill_constants(m.g));
    mt_optim_config oc = mt_optim_defaults();
    oc.lr = 1e-2f;
    MT_CHECK_OK(mt_optim_create(m.g, &oc, &m.opt));
    guard(false);
    return m;
}

static void drop(model *m) {
    mt_optim_free(m->opt);
    mt_graph_free(m->g);
}

/* Steps [s0, s0 + n), every phase guarded on the guarded backend: the
 * inputs through the backend, forward, backward, the optimizer step; the
 * losses into loss[]. */
static void train(model *m, int s0, int n, float *loss) {
    for (int s = s0; s < s0 + n; s++) {
        guard(mt__graph_backend(m->g) == &guarded_backend);
        feed(m->g, m->kind, s);
        MT_CHECK_OK(mt_graph_forward(m->g));
        MT_CHECK_OK(mt_graph_backward(m->g));
        loss[s - s0] = mt_graph_loss(m->g);
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
    float  *params, *from_llmc;   /* the resumed run's, and an llm.c file's round trip (GPT) */
    size_t  ckpt_out, ckpt_in;    /* bytes copied by the backend during save and load */
    int     inits;                /* param_init calls of one compile */
} record;

/* STEPS steps, a checkpoint, MORE steps; a fresh model loads the
 * checkpoint and takes the same MORE steps; for the GPT, an llm.c file of
 * the first model loaded into a third. */
static record run_on(const mt_backend *be, const model_kind *k) {
    record r = {0};
    char ckpt[64], llmc[64];
    snprintf(ckpt, sizeof ckpt, "backend_guard_%s_%s_%d.ckpt", be->name, k->name, k->precision);
    snprintf(llmc, sizeof llmc, "backend_guard_%s_%s_%d.bin", be->name, k->name, k->precision);
    bool on = be == &guarded_backend, gpt = !strcmp(k->name, "gpt");
    int inits0 = count.inits;
    model a = make(be, k);
    r.inits = count.inits - inits0;
    train(&a, 0, STEPS, r.loss);
    mt_ckpt_meta meta = {.step = STEPS, .seed = 7};
    snprintf(meta.model, sizeof meta.model, "test %s", k->name);
    size_t out0 = count.out;
    guard(on);
    MT_CHECK_OK(mt_ckpt_save(ckpt, a.g, a.opt, &meta));
    guard(false);
    r.ckpt_out = count.out - out0;
    train(&a, STEPS, MORE, r.loss + STEPS);

    model b = make(be, k);
    size_t in0 = count.in;
    guard(on);
    MT_CHECK_OK(mt_ckpt_load(ckpt, b.g, b.opt, &meta));
    guard(false);
    r.ckpt_in = count.in - in0;
    train(&b, STEPS, MORE, r.resumed);
    size_t n = params_of(b.g, NULL);
    r.params = malloc(n * sizeof *r.params);
    params_of(b.g, r.params);

    if (gpt) {
        r.from_llmc = malloc(n * sizeof *r.from_llmc);
        model c = make(be, k);
        guard(on);
        MT_CHECK_OK(mt_llmc_save(llmc, b.g, &GPT));
        MT_CHECK_OK(mt_llmc_load(llmc, c.g, &GPT));
        guard(false);
        params_of(c.g, r.from_llmc);
        drop(&c);
        remove(llmc);
    }
    drop(&a);
    drop(&b);
    remove(ckpt);
    return r;
}

/* One model on both backends: bit for bit the same, and the hand counts. */
static void check_model(const model_kind *k) {
    const char *prec = k->precision == MT_PRECISION_BF16 ? "bf16" : "fp32";
    record cpu = run_on(mt_backend_cpu(), k);
    memset(&count, 0, sizeof count);
    record gd = run_on(&guarded_backend, k);
    MT_CHECK(memcmp(cpu.loss, gd.loss, sizeof cpu.loss) == 0, "%s %s: losses differ: %.9g vs %.9g",
             k->name, prec, (double)cpu.loss[STEPS + MORE - 1], (double)gd.loss[STEPS + MORE - 1]);
    MT_CHECK(memcmp(cpu.resumed, gd.resumed, sizeof cpu.resumed) == 0,
             "%s %s: resumed losses differ", k->name, prec);
    MT_CHECK(memcmp(cpu.resumed, cpu.loss + STEPS, sizeof cpu.resumed) == 0,
             "%s %s: the resumed run is the one that never stopped", k->name, prec);
    model sizes = make(mt_backend_cpu(), k);
    mt_graph *g = sizes.g;
    size_t n = params_of(g, NULL);
    int np = mt_graph_n_params(g);
    MT_CHECK(memcmp(cpu.params, gd.params, n * sizeof(float)) == 0, "%s %s: parameters differ",
             k->name, prec);
    if (gd.from_llmc)
        MT_CHECK(memcmp(gd.params, gd.from_llmc, n * sizeof(float)) == 0, "llm.c round trip");
    /* hand counts: a compile initialises every parameter once; the save
     * copies out every parameter, m and v (4 bytes each), the load copies
     * them in; per step one update and one sum per parameter (every
     * parameter of these models has a gradient) */
    MT_CHECK(gd.inits == np, "%s: %d parameters initialised, want %d", k->name, gd.inits, np);
    size_t want = 3 * 4 * n;
    MT_CHECK(gd.ckpt_out == want, "%s: the save copied %zu bytes out, want %zu", k->name,
             gd.ckpt_out, want);
    MT_CHECK(gd.ckpt_in == want, "%s: the load copied %zu bytes in, want %zu", k->name,
             gd.ckpt_in, want);
    int steps = STEPS + MORE + MORE;
    MT_CHECK(count.updates == steps * np, "%s: %d updates, want %d", k->name, count.updates,
             steps * np);
    MT_CHECK(count.sumsqs == steps * np, "%s: %d sums, want %d", k->name, count.sumsqs,
             steps * np);
    /* bf16: the weights' copies cast at least once a step, fp32 never */
    if (k->precision == MT_PRECISION_BF16)
        MT_CHECK(count.converts >= steps, "%s bf16: %d casts through the backend", k->name,
                 count.converts);
    else
        MT_CHECK(count.converts == 0, "%s fp32: %d casts", k->name, count.converts);
    /* bf16: every compile on the guarded backend (a, b and the GPT's llm.c
     * model c) made one set of plans, one plan per product node, and freed
     * it; fp32 none */
    int compiles = gd.from_llmc ? 3 : 2, products = 0;
    for (int i = 0; i < mt_graph_n_nodes(g); i++) {
        mt_node_info info;
        MT_CHECK_OK(mt_graph_node(g, i, &info));
        products += !strcmp(info.op, "matmul") || !strcmp(info.op, "linear") ||
                    !strcmp(info.op, "gemm");
    }
    bool bf16 = k->precision == MT_PRECISION_BF16;
    MT_CHECK(count.sets == (bf16 ? compiles : 0) && count.sets_freed == count.sets,
             "%s %s: %d sets of plans made, %d freed, want %d", k->name, prec, count.sets,
             count.sets_freed, bf16 ? compiles : 0);
    MT_CHECK(count.plans == (bf16 ? compiles * products : 0),
             "%s %s: %d products planned through the backend, want %d x %d", k->name, prec,
             count.plans, compiles, products);
    drop(&sizes);
    free(cpu.params); free(cpu.from_llmc); free(gd.params); free(gd.from_llmc);
}

MT_TEST(guarded_backend_trains_saves_and_loads_every_model_as_the_cpu) {
    for (int i = 0; i < N_MODELS; i++) {
        if (MODELS[i].precision == MT_PRECISION_BF16 &&
            mt_precision_check(MT_PRECISION_BF16) != MT_OK) {
            printf("  %s bf16: skipped (no oneDNN in this build)\n", MODELS[i].name);
            continue;
        }
        memset(&count, 0, sizeof count);
        check_model(&MODELS[i]);
    }
}

/* A bypass faults: the guard works (the harness reports the signal; a
 * forked child tells it apart here). */
MT_TEST(guarded_memory_faults_outside_the_members) {
    model m = make(&guarded_backend, &MODELS[0]);
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
