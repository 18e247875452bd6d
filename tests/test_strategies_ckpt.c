/*
 * test_strategies_ckpt.c — checkpoints across layouts (issue 9): a run
 * stopped after 5 steps on one layout and resumed from its checkpoint on
 * another continues as if it had never stopped. The reference is 10 straight
 * steps on one device: the loss at every resumed step within relative 1e-5
 * and device 0's final parameters (block 0 of each) within 1e-4, the
 * measure of test_strategies.c.
 *
 * Layouts: one device -> fsdp=2, fsdp=2 -> tensor=2 and tensor=2 -> one
 * device (MLP), fsdp=2 -> one device (GPT L=2 C=64 NH=4 on a text file),
 * and the LLaMA model's tensor, fsdp and pipeline layouts, tied or not.
 * A checkpoint carries whole tensors, so what a split layout writes is what
 * one device writes: a one-device checkpoint loaded on a split mesh and saved
 * again is the same file byte for byte; and a checkpoint written after 5
 * steps on fsdp=2 holds the values one device's holds (the steps themselves
 * round differently, so this compares within 1e-6 when the bytes differ, the
 * GPT's key bias within 1e-4: see key_bias). An
 * llm.c checkpoint written on fsdp=2 loads on one device, and one device's
 * loads on fsdp=2.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"

#include <unistd.h>

#define TSTEPS 10
#define HALF   5

typedef struct {
    float          loss[TSTEPS];   /* by step number - 1; only the steps this run took */
    mt_test_params p;              /* device 0's parameters (blocks on a split mesh) */
} run_result;

/* Runs cfg on `mesh` (NULL: one device) until step `until` (counting resumed
 * steps), from ckpt_in if given, and saves at the end if cfg has outputs. */
static run_result run(mt_train_config cfg, const char *mesh, int until) {
    cfg.mesh = mesh;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&cfg, &tr));
    run_result out = {0};
    while (mt_trainer_step_count(tr) < until) {
        mt_step_report r;
        MT_CHECK_OK(mt_trainer_step(tr, &r));
        out.loss[r.step - 1] = r.loss;
    }
    if (cfg.ckpt_out || cfg.llmc_out) MT_CHECK_OK(mt_trainer_save(tr));
    out.p = mt_test_params_of(tr);
    mt_trainer_free(tr);
    return out;
}

/* The worst difference of device 0's blocks from the one-device tensors
 * (mt_test_params_diff). */
static double params_close(const run_result *got, const run_result *one) {
    return mt_test_params_diff(&got->p, &one->p, NULL);
}

/* 5 steps on `from` written to a checkpoint, 5 more on `to` from it: the
 * same run as 10 on one device (`one`). */
static void check_resume(mt_train_config cfg, const char *what, const char *from, const char *to,
                         const run_result *one) {
    char path[] = "/tmp/mt_test_ckpt_XXXXXX";
    int fd = mkstemp(path);
    MT_CHECK(fd >= 0, "mkstemp");
    close(fd);
    mt_train_config a = cfg;
    a.ckpt_out = path;
    run_result first = run(a, from, HALF);
    mt_train_config b = cfg;
    b.ckpt_in = path;
    run_result second = run(b, to, TSTEPS);
    const char *f = from ? from : "one device", *t = to ? to : "one device";
    for (int s = 0; s < HALF; s++)
        MT_CHECK_CLOSE(first.loss[s], one->loss[s], 1e-5, "%s on %s: loss at step %d", what, f,
                       s + 1);
    for (int s = HALF; s < TSTEPS; s++)
        MT_CHECK_CLOSE(second.loss[s], one->loss[s], 1e-5, "%s %s -> %s: loss at resumed step %d",
                       what, f, t, s + 1);
    double worst = params_close(&second, one);
    MT_CHECK(worst < 1e-4, "%s %s -> %s: final parameters differ by %g", what, f, t, worst);
    fprintf(stderr, "  %s %s -> %s: loss at step 10 %.6f (one device %.6f), parameters within "
            "%.2g\n", what, f, t, second.loss[TSTEPS - 1], one->loss[TSTEPS - 1], worst);
    free(first.p.params);
    free(second.p.params);
    unlink(path);
}

/* ---- comparing two files ------------------------------------------------ */

static bool same_bytes(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    MT_CHECK(fa && fb, "open %s and %s", a, b);
    bool same = true;
    int ca, cb;
    do {
        ca = fgetc(fa);
        cb = fgetc(fb);
        same = ca == cb;
    } while (same && ca != EOF);
    fclose(fa);
    fclose(fb);
    return same;
}

/* Loads a checkpoint into a one-device graph of cfg's model with its optimizer. */
static void load_one_device(const mt_train_config *cfg, const char *path, mt_graph **g,
                            mt_optim **opt, mt_ckpt_meta *meta) {
    /* the configuration as a trainer resolves it (GPT: V and Vp from the data) */
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(cfg, &tr));
    mt_train_config rc = *mt_trainer_config(tr);
    mt_tensor *loss = NULL;
    *g = mt_graph_create();
    MT_CHECK_OK(mt_train_build_program(&rc, NULL, *g, &loss, NULL));
    mt_trainer_free(tr);
    mt_compile_opts co = {.seed = cfg->seed};
    MT_CHECK_OK(mt_graph_compile(*g, loss, &co));
    MT_CHECK_OK(mt_optim_create(*g, &cfg->optim, opt));
    MT_CHECK_OK(mt_ckpt_load(path, *g, *opt, meta));
}

/* The attention's key bias has a gradient that is zero in exact arithmetic
 * (softmax is shift invariant); AdamW turns its rounding noise into steps of
 * ±lr·noise/eps, so after a few steps those elements sit near ±1e-6 with
 * either sign on any layout (see test_strategies.c). They get 1e-4. */
static bool key_bias(const mt_train_config *cfg, const mt_tensor *p, int64_t e) {
    if (cfg->model != MT_MODEL_GPT || !strstr(mt_tensor_name(p), "attn.qkv.b")) return false;
    const int64_t C = mt_test_gpt_of(cfg).C;
    return e >= C && e < 2 * C;
}

/* Two checkpoints of cfg's model: every parameter, m and v within `tol`
 * (relative above 1, absolute below; the key bias's values 1e-4), and the
 * same meta. Returns the worst difference outside the key bias. */
static double ckpt_values_close(const mt_train_config *cfg, const char *a, const char *b,
                                double tol) {
    mt_graph *ga, *gb;
    mt_optim *oa, *ob;
    mt_ckpt_meta ma, mb;
    load_one_device(cfg, a, &ga, &oa, &ma);
    load_one_device(cfg, b, &gb, &ob, &mb);
    MT_CHECK(ma.step == mb.step && ma.data_pos == mb.data_pos && ma.seed == mb.seed &&
             strcmp(ma.model, mb.model) == 0, "the meta of %s and %s differ", a, b);
    MT_CHECK(mt_optim_steps(oa) == mt_optim_steps(ob), "optimizer steps %d and %d",
             mt_optim_steps(oa), mt_optim_steps(ob));
    double worst = 0;
    for (int i = 0; i < mt_graph_n_params(ga); i++) {
        mt_tensor *pa = mt_graph_param_at(ga, i), *pb = mt_graph_param_at(gb, i);
        for (int k = 0; k < 3; k++) {
            const float *x = k ? mt_optim_moment(oa, i, k) : mt_tensor_f32(pa);
            const float *y = k ? mt_optim_moment(ob, i, k) : mt_tensor_f32(pb);
            for (int64_t e = 0; e < mt_tensor_numel(pa); e++) {
                double d = fabs((double)x[e] - y[e]) / fmax(1.0, fabs((double)y[e]));
                bool loose = k == 0 && key_bias(cfg, pa, e);
                MT_CHECK(d <= (loose ? 1e-4 : tol), "%s of '%s'[%lld]: %.9g in %s, %.9g in %s",
                         k == 0 ? "value" : k == 1 ? "m" : "v", mt_tensor_name(pa),
                         (long long)e, x[e], a, y[e], b);
                if (d > worst && !loose) worst = d;
            }
        }
    }
    mt_optim_free(oa);
    mt_optim_free(ob);
    mt_graph_free(ga);
    mt_graph_free(gb);
    return worst;
}

/* ---- configurations ----------------------------------------------------- */

static mt_train_config mlp_config(void) { return mt_test_config(MT_MODEL_MLP, NULL); }

static char text_path[] = "/tmp/mt_test_ckpt_text_XXXXXX";

static mt_train_config gpt_config(void) {
    static bool written = false;   /* once per test (each runs in a child of its own) */
    if (!written) {
        mt_test_write_text(text_path);
        written = true;
    }
    return mt_test_config(MT_MODEL_GPT, text_path);
}

static char *temp_path(const char *tag) {
    char *p = malloc(64);
    snprintf(p, 64, "/tmp/mt_test_ckpt_%s_XXXXXX", tag);
    int fd = mkstemp(p);
    MT_CHECK(fd >= 0, "mkstemp");
    close(fd);
    return p;
}

/* ======================================================================== */
/* Tests                                                                     */
/* ======================================================================== */

MT_TEST(mlp_resumes_across_layouts) {
    mt_train_config c = mlp_config();
    run_result one = run(c, NULL, TSTEPS);
    check_resume(c, "mlp", NULL, "fsdp=2", &one);
    check_resume(c, "mlp", "fsdp=2", "tensor=2", &one);
    check_resume(c, "mlp", "tensor=2", NULL, &one);
    check_resume(c, "mlp", "fsdp=2,tensor=2", "data=2", &one);
    free(one.p.params);
}

MT_TEST(gpt_resumes_across_layouts) {
    mt_train_config c = gpt_config();
    run_result one = run(c, NULL, TSTEPS);
    check_resume(c, "gpt", "fsdp=2", NULL, &one);
    check_resume(c, "gpt", NULL, "fsdp=2", &one);
    free(one.p.params);
    unlink(text_path);
}

/* The LLaMA model (L=2, C=32, NH=4, KV=2, T=16, two microbatches a step, so
 * that a pipeline can take them): one device -> tensor=2 (kv heads split),
 * fsdp=2 -> tensor=4 (kv heads replicated), pipe=2 -> data=2 and, tied,
 * pipe=2 -> fsdp=2 (the head's copy of tok_emb.w written once). */
static void llama_resumes(bool tie) {
    const mt_llama_config m = {.dim = 32, .ffn_dim = 64, .n_layers = 2, .n_heads = 4,
                               .n_kv_heads = 2, .max_seq = 16, .rope_theta = 10000.0f,
                               .norm_eps = 1e-5f, .tie_embeddings = tie, .multiple_of = 32,
                               .ffn_mult = 1.0f};
    mt_train_config c = gpt_config();
    c.model = MT_MODEL_LLAMA;
    MT_TEST_MODEL_CONFIG(&c, &m);
    c.T = 16;
    c.accum = 2;
    run_result one = run(c, NULL, TSTEPS);
    const char *what = tie ? "llama tied" : "llama";
    if (!tie) {
        check_resume(c, what, NULL, "tensor=2", &one);
        check_resume(c, what, "fsdp=2", "tensor=4", &one);
        check_resume(c, what, "pipe=2", "data=2", &one);
    } else {
        check_resume(c, what, "pipe=2", "fsdp=2", &one);
    }
    free(one.p.params);
}

MT_TEST(llama_resumes_across_layouts) {
    llama_resumes(false);
    llama_resumes(true);
    unlink(text_path);
}

/* A one-device checkpoint loaded on a split mesh and saved again: the same
 * bytes (the blocks put and gathered back are the whole tensors exactly). */
MT_TEST(split_mesh_rewrites_the_same_bytes) {
    mt_train_config c = mlp_config();
    char *orig = temp_path("orig"), *again = temp_path("again");
    mt_train_config a = c;
    a.ckpt_out = orig;
    free(run(a, NULL, HALF).p.params);
    static const char *const meshes[] = {"fsdp=2", "tensor=2", "fsdp=2,tensor=2", "fsdp=4", NULL};
    for (int i = 0; meshes[i]; i++) {
        mt_train_config b = c;
        b.ckpt_in = orig;
        b.ckpt_out = again;
        free(run(b, meshes[i], HALF).p.params);   /* no step: load, then save */
        MT_CHECK(same_bytes(orig, again), "mlp: the checkpoint saved on %s after loading a "
                 "one-device one differs from it", meshes[i]);
    }
    unlink(orig);
    unlink(again);
    free(orig);
    free(again);
}

/* 5 steps on a split mesh and on one device write the same checkpoint: the
 * same bytes, or, where the steps rounded differently, values within `tol`.
 * And what the split mesh wrote is exactly what its devices held: loaded on
 * one device, device 0's blocks are equal to the bit. */
static void check_same_checkpoint(mt_train_config c, const char *what, const char *mesh,
                                  double tol) {
    char *one = temp_path("one"), *split = temp_path("split");
    mt_train_config a = c;
    a.ckpt_out = one;
    free(run(a, NULL, HALF).p.params);
    a.ckpt_out = split;
    run_result held = run(a, mesh, HALF);
    mt_train_config b = c;
    b.ckpt_in = split;
    run_result loaded = run(b, NULL, HALF);   /* no step: the checkpoint's values */
    double exact = params_close(&held, &loaded);
    MT_CHECK(exact == 0, "%s: device 0's blocks on %s and the checkpoint it wrote differ by %g",
             what, mesh, exact);
    if (same_bytes(one, split)) {
        fprintf(stderr, "  %s: the checkpoint of %s is byte-identical to one device's\n", what,
                mesh);
    } else {
        double worst = ckpt_values_close(&c, split, one, tol);
        fprintf(stderr, "  %s: the checkpoint of %s differs from one device's in its bytes "
                "(float rounding of the steps); values, m and v within %.2g (bound %g)\n", what,
                mesh, worst, tol);
    }
    free(held.p.params);
    free(loaded.p.params);
    unlink(one);
    unlink(split);
    free(one);
    free(split);
}

MT_TEST(split_mesh_writes_one_device_checkpoint) {
    check_same_checkpoint(mlp_config(), "mlp", "fsdp=2", 1e-6);
    check_same_checkpoint(mlp_config(), "mlp", "tensor=2", 1e-6);
    /* AdamW steps elements with near-zero gradients by ±lr·noise/eps: after
     * 5 steps the GPT's weights differ by a few 1e-6 between layouts (not
     * from the checkpoint, which the exact check above covers); the bound is
     * test_strategies' */
    check_same_checkpoint(gpt_config(), "gpt", "fsdp=2", 1e-4);
    unlink(text_path);
}

/* llm.c checkpoints: written on fsdp=2, read on one device; and one
 * device's read on fsdp=2 (device 0's blocks exactly the loaded values). */
MT_TEST(gpt_llmc_across_layouts) {
    mt_train_config c = gpt_config();
    char *split = temp_path("split_llmc"), *one = temp_path("one_llmc");
    mt_train_config a = c;
    a.llmc_out = split;
    run_result trained = run(a, "fsdp=2", HALF);
    a.llmc_out = one;
    run_result trained_one = run(a, NULL, HALF);
    mt_train_config b = c;
    b.llmc_in = split;
    run_result loaded = run(b, NULL, 0);
    double worst = params_close(&trained, &loaded);
    MT_CHECK(worst == 0, "gpt: device 0's blocks on fsdp=2 and the llm.c file it wrote, loaded "
             "on one device, differ by %g", worst);
    worst = params_close(&loaded, &trained_one);
    /* the 5 steps themselves round differently on fsdp=2: test_strategies' measure */
    MT_CHECK(worst < 1e-4, "gpt: the llm.c file of fsdp=2 differs from one device's by %g", worst);
    b.llmc_in = one;
    run_result back = run(b, "fsdp=2", 0);
    run_result back_one = run(b, NULL, 0);
    MT_CHECK(params_close(&back, &back_one) == 0, "gpt: one device's llm.c file loaded on "
             "fsdp=2 is not what one device loads");
    free(trained.p.params);
    free(trained_one.p.params);
    free(loaded.p.params);
    free(back.p.params);
    free(back_one.p.params);
    unlink(split);
    unlink(one);
    free(split);
    free(one);
    unlink(text_path);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
