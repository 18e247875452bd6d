/*
 * test_strategies_llama.c — DESIGN's invariant for the LLaMA model: the
 * trainer on each layout trains the one-device run. A small grouped-query
 * model (L=2, C=32, NH=4, KV=2, F=64, V from the text, T=16), 10 AdamW
 * steps with clipping from the same seed and global batch: the loss and
 * the gradient norm at every step within relative 1e-5 and the final
 * parameters within 1e-4 of one device (MT_CHECK_CLOSE's measure).
 *
 * Layouts: data parallel; ZeRO 1, 2, 3; FSDP; tensor parallel with the kv
 * heads split (tensor=2, KV=2) and replicated (tensor=4 over KV=2, and
 * multi-query KV=1 over tensor=2: each device reads the kv heads its query
 * heads share, their gradients summed); sequence parallelism, with and
 * without collective matmuls; pipelines over pipe=2 (every schedule kind,
 * 1F1B with tensor=2, and with tied embeddings: the head's copy on the
 * other device under 1F1B, on the same one under ZB-V), every chunk's
 * parameters against one device's. Heads of their own size (--head-dim:
 * NH·HS = 48 and 16 over C = 32) through the strategies: data, ZeRO 1 and
 * 3, FSDP, tensor with the kv heads split and replicated (KV = 2 over
 * tensor=4, KV = 1 over tensor=2 and 4), sequence parallelism with
 * collective matmuls, and pipelines (1F1B, ZB-H1, interleaved, and 1F1B
 * with tensor=2). And remat policies, which must train
 * the same run bit for bit, on one device and on pipe=2 (1F1B and ZB-H1,
 * remat full and dots).
 *
 * bf16 (test_bf16.c's measure): bf16 products on data=2, tensor=2 and
 * pipe=2 (1F1B and ZB-V) against the bf16 run on one device, losses within
 * relative 1e-3; bf16 gradient reductions on data=2 against fp32's, within
 * 1e-2 and not equal.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"
#include "train/train_impl.h"   /* a pipeline's chunk graphs */

#include <math.h>
#include <unistd.h>

#define TSTEPS 10

static mt_llama_config small_llama(int KV) {
    return (mt_llama_config){.dim = 32, .ffn_dim = 64, .n_layers = 2, .n_heads = 4,
                             .n_kv_heads = KV, .vocab = 0, .max_seq = 16,
                             .rope_theta = 10000.0f, .norm_eps = 1e-5f, .tie_embeddings = 0,
                             .multiple_of = 32, .ffn_mult = 1.0f};
}

/* The tests' training run (mt_test_config's optimizer, batch and seed) of
 * the model *m on the text at `path`. */
static mt_train_config llama_config(const char *path, const mt_llama_config *m) {
    mt_train_config c = mt_test_config(MT_MODEL_LLAMA, path);
    c.data = path;
    c.T = 16;
    MT_TEST_MODEL_CONFIG(&c, m);
    return c;
}

typedef mt_test_curve curve;

/* Ten steps of a trainer made from c (on c.mesh); *tr is left for the
 * caller to compare and free. */
static curve ten_steps(const mt_train_config *c, mt_trainer **tr) {
    MT_CHECK_OK(mt_trainer_create(c, tr));
    return mt_test_steps(*tr, TSTEPS);
}

/* Ten steps of c: the curve only. */
static curve curve_of(const mt_train_config *c) {
    mt_trainer *tr = NULL;
    curve out = ten_steps(c, &tr);
    mt_trainer_free(tr);
    return out;
}

static void same_curve(const curve *got, const curve *want, const char *what) {
    for (int s = 0; s < TSTEPS; s++) {
        MT_CHECK_CLOSE(got->loss[s], want->loss[s], 1e-5, "%s: loss at step %d", what, s + 1);
        MT_CHECK_CLOSE(got->norm[s], want->norm[s], 1e-5, "%s: gradient norm at step %d", what,
                       s + 1);
    }
}

/* c on each mesh of `meshes` (zero[i] its ZeRO stage) against c on one
 * device; device 0 must hold some parameter split where split[i]. */
static void check_meshes(mt_train_config c, const char *what, const char *const *meshes,
                         const int *zero, const bool *split) {
    mt_train_config ref = c;
    ref.sequence_parallel = false;   /* and its collective matmuls: they need a tensor axis */
    ref.collective_matmul = 0;
    mt_trainer *one = NULL;
    curve want = ten_steps(&ref, &one);
    MT_CHECK(want.loss[TSTEPS - 1] < want.loss[0], "%s: training lowers the loss", what);
    mt_test_params p1 = mt_test_params_of(one);
    mt_trainer_free(one);
    for (int i = 0; meshes[i]; i++) {
        char name[128];
        snprintf(name, sizeof name, "%s on %s zero=%d%s%s", what, meshes[i], zero[i],
                 c.sequence_parallel ? " sequence-parallel" : "",
                 c.collective_matmul > 0 ? " collective-matmul" : "");
        c.mesh = meshes[i];
        c.zero = zero[i];
        mt_trainer *tr = NULL;
        curve got = ten_steps(&c, &tr);
        same_curve(&got, &want, name);
        mt_test_params p = mt_test_params_of(tr);
        mt_trainer_free(tr);
        int shards = 0;
        double worst = mt_test_params_diff(&p, &p1, &shards);
        MT_CHECK(worst < 1e-4, "%s: parameters differ by %g", name, worst);
        MT_CHECK(!split[i] || shards > 0, "%s: no parameter is split on device 0", name);
        fprintf(stderr, "  %s: loss %.4f -> %.4f, parameters within %.2g (%d split)\n", name,
                got.loss[0], got.loss[TSTEPS - 1], worst, shards);
        free(p.params);
    }
    free(p1.params);
}

MT_TEST(llama_data_zero_fsdp_equal_one_device) {
    char path[] = "/tmp/mt_test_strategies_llama_XXXXXX";
    mt_test_write_text(path);
    const mt_llama_config m = small_llama(2);
    const char *const meshes[] = {"data=2", "data=2", "data=2", "data=2", "fsdp=2",
                                  "data=2,fsdp=2", NULL};
    const int zero[] = {0, 1, 2, 3, 0, 0};
    const bool split[] = {false, true, true, true, true, true};
    check_meshes(llama_config(path, &m), "llama", meshes, zero, split);
    unlink(path);
}

MT_TEST(llama_tensor_parallel_equals_one_device) {
    char path[] = "/tmp/mt_test_strategies_llama_XXXXXX";
    mt_test_write_text(path);
    /* KV=2: split over tensor=2, replicated over tensor=4 */
    const mt_llama_config gqa = small_llama(2);
    const char *const meshes[] = {"tensor=2", "tensor=4", "data=2,tensor=2", NULL};
    const int zero[] = {0, 0, 0};
    const bool split[] = {true, true, true};
    check_meshes(llama_config(path, &gqa), "llama KV=2", meshes, zero, split);
    /* multi-query: the one kv head on every device */
    const mt_llama_config mqa = small_llama(1);
    const char *const mq_meshes[] = {"tensor=2", NULL};
    check_meshes(llama_config(path, &mqa), "llama KV=1", mq_meshes, zero, split);
    /* sequence parallelism: the norms and residual adds on T/2 rows */
    mt_train_config c = llama_config(path, &gqa);
    c.sequence_parallel = true;
    c.collective_matmul = -1;
    const char *const sp_meshes[] = {"tensor=2", NULL};
    check_meshes(c, "llama KV=2", sp_meshes, zero, split);
    /* and its gathers and reduce-scatters inside the products' rings, kv
     * heads split and replicated */
    c.collective_matmul = 1;
    const char *const cm_meshes[] = {"tensor=2", "data=2,tensor=2", NULL};
    check_meshes(c, "llama KV=2", cm_meshes, zero, split);
    mt_train_config cq = llama_config(path, &mqa);
    cq.sequence_parallel = true;
    cq.collective_matmul = 1;
    check_meshes(cq, "llama KV=1", sp_meshes, zero, split);
    unlink(path);
}

/* Activation checkpointing recomputes by the blocks the builder tags: the
 * same run, bit for bit, under every policy. */
MT_TEST(llama_remat_trains_the_same_run) {
    char path[] = "/tmp/mt_test_strategies_llama_XXXXXX";
    mt_test_write_text(path);
    const mt_llama_config m = small_llama(2);
    mt_train_config c = llama_config(path, &m);
    curve want = curve_of(&c);
    const mt_remat policies[] = {MT_REMAT_FULL, MT_REMAT_ATTENTION, MT_REMAT_DOTS};
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
        c.remat = policies[i];
        curve got = curve_of(&c);
        for (int s = 0; s < TSTEPS; s++)
            MT_CHECK(got.loss[s] == want.loss[s], "remat policy %d: loss %.9g at step %d, "
                     "%.9g without", (int)policies[i], got.loss[s], s + 1, want.loss[s]);
    }
    unlink(path);
}

/* Every parameter of every chunk of the pipeline's devices against the
 * one-device parameter of its name; returns how many were compared. */
static int compare_chunks(mt_trainer *pipe, mt_trainer *one, const char *what) {
    mt_graph *g1 = mt_trainer_graph(one);
    int n = 0;
    for (int k = 0; k < pipe->n_dev; k++)
        for (int i = 0; mt__train_pipe_graph(&pipe->dev[k], i); i++) {
            mt_graph *g = mt__train_pipe_graph(&pipe->dev[k], i);
            for (int q = 0; q < mt_graph_n_params(g); q++, n++) {
                mt_tensor *p = mt_graph_param_at(g, q);
                mt_tensor *w = mt_graph_find(g1, mt_tensor_name(p));
                MT_CHECK(w && mt_tensor_numel(w) == mt_tensor_numel(p), "%s: '%s' has no twin",
                         what, mt_tensor_name(p));
                const float *a = mt_tensor_f32(p), *b = mt_tensor_f32(w);
                for (int64_t e = 0; e < mt_tensor_numel(p); e++)
                    MT_CHECK_CLOSE(a[e], b[e], 1e-4, "%s: device %d '%s'[%lld]", what, k,
                                   mt_tensor_name(p), (long long)e);
            }
        }
    return n;
}

/* The pipeline cases' run of the text at `path`: the model *m (filled in
 * here, pointed to by the result: it must outlive it) of L blocks, the
 * embeddings tied or not, B=4 in `mb` microbatches; on one device until
 * the caller sets the mesh and the schedule. */
static mt_train_config pipe_config(const char *path, mt_llama_config *m, int L, int mb,
                                   bool tie, int head_dim) {
    *m = small_llama(2);
    m->n_layers = L;
    m->head_dim = head_dim;
    m->tie_embeddings = tie;
    mt_train_config c = llama_config(path, m);
    c.B = 4;
    c.accum = mb;   /* the pipeline's microbatches */
    return c;
}

/* `kind` over `mesh` (a pipe axis of 2) with `mb` microbatches, L blocks,
 * the embeddings tied or not, heads of head_dim (0: C/NH). */
/* sp: the pipeline's run with sequence parallelism (1: collective matmul
 * off, 2: on); the one-device run has none */
static void check_pipeline_sp(const char *kind, const char *mesh, int L, int mb, bool tie,
                              int sp, int head_dim) {
    char path[] = "/tmp/mt_test_strategies_llama_XXXXXX";
    mt_test_write_text(path);
    mt_llama_config m;
    mt_train_config c = pipe_config(path, &m, L, mb, tie, head_dim);
    mt_trainer *one = NULL, *tr = NULL;
    curve want = ten_steps(&c, &one);
    c.mesh = mesh;
    c.schedule = kind;
    c.sequence_parallel = sp > 0;
    c.collective_matmul = sp == 2 ? 1 : sp == 1 ? -1 : 0;
    curve got = ten_steps(&c, &tr);
    char what[96];
    snprintf(what, sizeof what, "llama%s hd=%d on %s%s %s m=%d", tie ? " tied" : "",
             mt_llama_head_dim(&m), mesh, sp == 2 ? " sp+cm" : sp == 1 ? " sp" : "", kind, mb);
    same_curve(&got, &want, what);
    if (!strstr(mesh, "tensor")) {   /* split blocks: the losses and norms say it */
        /* tied, the head's chunk holds a second copy of the embedding */
        int n = compare_chunks(tr, one, what), want_n = mt_graph_n_params(mt_trainer_graph(one));
        MT_CHECK(n == want_n + tie, "%s: %d parameters in the chunks, %d in the model", what, n,
                 want_n);
    }
    fprintf(stderr, "  %s: loss %.4f -> %.4f\n", what, got.loss[0], got.loss[TSTEPS - 1]);
    mt_trainer_free(tr);
    mt_trainer_free(one);
    unlink(path);
}

static void check_pipeline(const char *kind, const char *mesh, int L, int mb, bool tie) {
    check_pipeline_sp(kind, mesh, L, mb, tie, 0, 0);
}

/* Each schedule kind over pipe=2 (L blocks, m microbatches), untied. */
#define PIPE_CASE(name, kind, mesh, L, m) \
    MT_TEST(llama_pipeline_##name##_equals_one_device) { check_pipeline(kind, mesh, L, m, false); }
PIPE_CASE(1f1b, "1f1b", "pipe=2", 2, 2)
PIPE_CASE(gpipe, "gpipe", "pipe=2", 2, 2)
PIPE_CASE(zb_h1, "zb-h1", "pipe=2", 2, 2)
PIPE_CASE(zb_h2, "zb-h2", "pipe=2", 2, 2)
PIPE_CASE(zb_v, "zb-v", "pipe=2", 4, 2)
PIPE_CASE(interleaved, "interleaved", "pipe=2", 4, 4)
PIPE_CASE(dualpipev, "dualpipev", "pipe=2", 4, 4)
PIPE_CASE(tensor2, "1f1b", "pipe=2,tensor=2", 2, 2)
#undef PIPE_CASE

/* sequence parallelism inside the stages (the residual stream's rows over
 * tensor cross the stage boundary split), with and without collective
 * matmul, untied and tied */
MT_TEST(llama_pipeline_tensor2_sp_equals_one_device) {
    check_pipeline_sp("1f1b", "pipe=2,tensor=2", 2, 2, false, 1, 0);
    check_pipeline_sp("1f1b", "pipe=2,tensor=2", 2, 2, false, 2, 0);
    check_pipeline_sp("1f1b", "pipe=2,tensor=2", 2, 2, true, 1, 0);
}

/* ---- heads of their own size (--head-dim) ---------------------------------- */

/* C = 32, NH = 4: heads of 12 (q 48 wide, KV = 2) and of 4 (q 16 wide,
 * multi-query), on every strategy's mesh against one device; the kv heads
 * fewer than the tensor ranks (KV = 2 over 4, KV = 1 over 2 and 4)
 * replicated. */
MT_TEST(llama_head_dim_equals_one_device) {
    char path[] = "/tmp/mt_test_strategies_llama_XXXXXX";
    mt_test_write_text(path);
    mt_llama_config gqa = small_llama(2), mqa = small_llama(1);
    gqa.head_dim = 12;
    mqa.head_dim = 4;
    const char *const meshes[] = {"data=2", "data=2", "data=2", "fsdp=2", "tensor=2",
                                  "tensor=4", "data=2,tensor=2", NULL};
    const int zero[] = {0, 1, 3, 0, 0, 0, 0};
    const bool split[] = {false, true, true, true, true, true, true};
    check_meshes(llama_config(path, &gqa), "llama hd=12 KV=2", meshes, zero, split);
    const char *const mq_meshes[] = {"tensor=2", "tensor=4", NULL};
    check_meshes(llama_config(path, &mqa), "llama hd=4 KV=1", mq_meshes, zero + 4, split + 4);
    mt_train_config c = llama_config(path, &gqa);
    c.sequence_parallel = true;
    c.collective_matmul = 1;
    const char *const sp_meshes[] = {"tensor=2", "tensor=4", NULL};
    check_meshes(c, "llama hd=12 KV=2", sp_meshes, zero + 4, split + 4);
    unlink(path);
}

MT_TEST(llama_pipeline_head_dim_equals_one_device) {
    check_pipeline_sp("1f1b", "pipe=2", 2, 2, false, 0, 12);
    check_pipeline_sp("zb-h1", "pipe=2", 2, 2, false, 0, 12);
    check_pipeline_sp("interleaved", "pipe=2", 4, 4, false, 0, 4);
    check_pipeline_sp("1f1b", "pipe=2,tensor=2", 2, 2, true, 1, 12);
}

/* tied: the embedding on device 0, the head's copy on device 1 (1F1B; with
 * tensor=2 each copy split over the vocabulary) or on device 0 too (ZB-V's
 * V puts chunks 0 and 3 there) */
MT_TEST(llama_pipeline_tied_equals_one_device) {
    check_pipeline("1f1b", "pipe=2", 2, 2, true);
    check_pipeline("zb-v", "pipe=2", 4, 2, true);
    check_pipeline("1f1b", "pipe=2,tensor=2", 2, 2, true);
}

/* Remat on a pipeline: each chunk's blocks recomputed inside its
 * backward (1F1B: W right after B; ZB-H1: W later, the recomputed values
 * kept until then). `kind` over pipe=2 (L=2, m=2) under remat full and
 * dots: bit for bit the losses of the same pipeline without remat, so
 * within 1e-5 of one device's. */
static void check_pipeline_remat(const char *kind) {
    char path[] = "/tmp/mt_test_strategies_llama_XXXXXX";
    mt_test_write_text(path);
    mt_llama_config m;
    mt_train_config c = pipe_config(path, &m, 2, 2, false, 0);
    curve one = curve_of(&c);
    c.mesh = "pipe=2";
    c.schedule = kind;
    curve want = curve_of(&c);
    const mt_remat policies[] = {MT_REMAT_FULL, MT_REMAT_DOTS};
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
        c.remat = policies[i];
        mt_trainer *tr = NULL;
        curve got = ten_steps(&c, &tr);
        char what[96];
        snprintf(what, sizeof what, "llama on pipe=2 %s remat %s", kind,
                 mt_remat_name(policies[i]));
        MT_CHECK(mt_graph_get_stats(mt_trainer_graph(tr)).n_recompute > 0,
                 "%s: nothing recomputed", what);
        mt_trainer_free(tr);
        for (int s = 0; s < TSTEPS; s++)
            MT_CHECK(memcmp(&got.loss[s], &want.loss[s], sizeof(float)) == 0,
                     "%s: loss %.9g at step %d, %.9g without remat", what, got.loss[s], s + 1,
                     want.loss[s]);
        same_curve(&got, &one, what);
        fprintf(stderr, "  %s: loss %.4f -> %.4f\n", what, got.loss[0], got.loss[TSTEPS - 1]);
    }
    unlink(path);
}

MT_TEST(llama_pipeline_remat_trains_the_same_run) {
    check_pipeline_remat("1f1b");
    check_pipeline_remat("zb-h1");
}

/* ---- bf16 ---------------------------------------------------------------- */

/* Losses of `got` within relative `tol` of `want` at every step. */
static void close_curve(const curve *got, const curve *want, double tol, const char *what) {
    for (int s = 0; s < TSTEPS; s++)
        MT_CHECK(fabs((double)got->loss[s] - want->loss[s]) <= tol * fabs((double)want->loss[s]),
                 "%s: loss %.7f at step %d, reference %.7f (relative %.2g > %g)", what,
                 got->loss[s], s + 1, want->loss[s],
                 fabs((double)got->loss[s] - want->loss[s]) / fabs((double)want->loss[s]), tol);
}

static bool have_bf16(void) {
    if (mt_precision_check(MT_PRECISION_BF16) == MT_OK) return true;
    fprintf(stderr, "  (no oneDNN in this build: %s; bf16 skipped)\n", mt_errmsg());
    return false;
}

/* bf16 products: each layout against the bf16 run on one device (not
 * fp32's: bf16 rounds each product's operands). */
static void bf16_products(mt_train_config c) {
    c.precision = MT_PRECISION_BF16;
    curve want = curve_of(&c);
    MT_CHECK(want.loss[TSTEPS - 1] < want.loss[0], "bf16 on one device: the loss falls");
    const char *const meshes[] = {"data=2", "tensor=2", NULL};
    for (int i = 0; meshes[i]; i++) {
        c.mesh = meshes[i];
        curve got = curve_of(&c);
        char what[64];
        snprintf(what, sizeof what, "llama bf16 on %s", meshes[i]);
        close_curve(&got, &want, 1e-3, what);
        fprintf(stderr, "  %s: loss %.5f -> %.5f (one device %.5f)\n", what, got.loss[0],
                got.loss[TSTEPS - 1], want.loss[TSTEPS - 1]);
    }
}

/* bf16 gradient reductions (fp32 products) on data=2: near fp32's, and not
 * equal. */
static void bf16_reductions(mt_train_config c) {
    c.mesh = "data=2";
    curve want = curve_of(&c);
    c.grad_reduce = MT_PRECISION_BF16;
    curve got = curve_of(&c);
    close_curve(&got, &want, 1e-2, "llama data=2 bf16 gradient reductions vs fp32");
    double diff = 0;
    for (int s = 0; s < TSTEPS; s++) diff += fabs((double)got.loss[s] - want.loss[s]);
    MT_CHECK(diff > 0, "bf16 gradient reductions gave exactly fp32's losses: they did not run "
             "in bf16");
}

/* bf16 products on a pipeline: `kind` over pipe=2 (L blocks, m=2) against
 * the bf16 run on one device of the same microbatches, and not fp32's
 * pipeline's losses (its chunks must run the products in bf16 too). */
static void bf16_pipeline(const char *kind, int L) {
    char path[] = "/tmp/mt_test_strategies_llama_XXXXXX";
    mt_test_write_text(path);
    mt_llama_config m;
    mt_train_config c = pipe_config(path, &m, L, 2, false, 0);
    c.precision = MT_PRECISION_BF16;
    curve want = curve_of(&c);
    c.mesh = "pipe=2";
    c.schedule = kind;
    curve got = curve_of(&c);
    char what[64];
    snprintf(what, sizeof what, "llama bf16 on pipe=2 %s L=%d", kind, L);
    close_curve(&got, &want, 1e-3, what);
    c.precision = MT_PRECISION_FP32;
    curve fp32 = curve_of(&c);
    double diff = 0;
    for (int s = 0; s < TSTEPS; s++) diff += fabs((double)got.loss[s] - fp32.loss[s]);
    MT_CHECK(diff > 0, "%s: exactly fp32's losses: the chunks' products did not run in bf16",
             what);
    fprintf(stderr, "  %s: loss %.5f -> %.5f (one device %.5f, fp32 %.5f)\n", what, got.loss[0],
            got.loss[TSTEPS - 1], want.loss[TSTEPS - 1], fp32.loss[TSTEPS - 1]);
    unlink(path);
}

MT_TEST(llama_bf16_pipeline_matches_one_device) {
    if (!have_bf16()) return;
    bf16_pipeline("1f1b", 2);
    bf16_pipeline("zb-v", 4);   /* the V: two chunks a device */
}

MT_TEST(llama_bf16_matches_its_references) {
    char path[] = "/tmp/mt_test_strategies_llama_XXXXXX";
    mt_test_write_text(path);
    const mt_llama_config m = small_llama(2);
    bf16_reductions(llama_config(path, &m));
    if (have_bf16()) bf16_products(llama_config(path, &m));
    unlink(path);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
