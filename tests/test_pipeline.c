/*
 * test_pipeline.c — DESIGN's invariant for pipelines: the trainer on a mesh
 * with a pipe axis, under every schedule kind, trains the one-device run.
 * The small GPT (C=64, NH=4, V from the text; L=4 on pipe=2, L=8 on pipe=4
 * so that the V shape's and the interleaved schedules' 2p chunks each get
 * blocks), 10 AdamW steps with clipping, the step's microbatches being the
 * one-device run's accumulation: the loss and the global gradient norm at
 * every step within relative 1e-5, and every parameter of every device's
 * chunks, after the run, within 1e-4 of the one-device parameter of the
 * same name (both copies of the tied embedding included).
 *
 * Also: evaluation through the pipeline, checkpoints written on one layout
 * and resumed on another (one device <-> pipelines of other kinds and
 * sizes, and with tensor parallelism inside), and the configurations a
 * pipeline refuses, each with its message.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"
#include "train/train_impl.h"

#include <unistd.h>

/* steps a run: each step already runs every schedule's whole timetable, so
 * under a sanitizer (the threads transport under TSan, 10x slower) 4 */
#define TSTEPS (MT_TEST_SANITIZED ? 4 : 10)

typedef mt_test_curve curve;

/* The tests' GPT with L blocks into *gpt, which c points at. */
static mt_train_config pipe_config(const char *text, int L, int m, mt_gpt_config *gpt) {
    mt_train_config c = mt_test_config(MT_MODEL_GPT, text);
    *gpt = mt_test_gpt();
    gpt->L = L;
    MT_TEST_MODEL_CONFIG(&c, gpt);
    c.B = 2;           /* sequences per microbatch */
    c.accum = m;       /* the pipeline's microbatches */
    return c;
}

static curve run(mt_trainer *tr) { return mt_test_steps(tr, TSTEPS); }

/* Every parameter of every chunk of every device against one device's; a
 * parameter split over fsdp or tensor (a block, fewer elements) is left to
 * the losses and gradient norms of every step. Returns how many whole
 * ones matched; *n_split counts the blocks skipped. */
static int compare_params(mt_trainer *pipe, mt_trainer *one, const char *what, int *n_split) {
    *n_split = 0;
    mt_graph *g1 = mt_trainer_graph(one);
    int checked = 0;
    for (int k = 0; k < pipe->n_dev; k++)
        for (int i = 0;; i++) {
            mt_graph *g = mt__train_pipe_graph(&pipe->dev[k], i);
            if (!g) break;
            for (int q = 0; q < mt_graph_n_params(g); q++) {
                mt_tensor *p = mt_graph_param_at(g, q);
                mt_tensor *w = mt_graph_find(g1, mt_tensor_name(p));
                MT_CHECK(w && mt_tensor_numel(w) >= mt_tensor_numel(p),
                         "%s: device %d chunk graph %d's '%s' has no twin", what, k, i,
                         mt_tensor_name(p));
                if (mt_tensor_numel(w) != mt_tensor_numel(p)) {
                    ++*n_split;
                    continue;
                }
                const float *a = mt_tensor_f32(p), *b = mt_tensor_f32(w);
                for (int64_t e = 0; e < mt_tensor_numel(p); e++)
                    MT_CHECK_CLOSE(a[e], b[e], 1e-4, "%s: device %d '%s'[%lld]", what, k,
                                   mt_tensor_name(p), (long long)e);
                checked++;
            }
        }
    return checked;
}

/* Trains `kind` over pipe=p with m microbatches and compares with one device. */
/* sp: the pipeline's run with sequence parallelism (1: collective matmul
 * off, 2: on); the one-device run has none */
static void check_kind_sp(const char *kind, int p, int m, int L, const char *extra_axes, int sp) {
    char text[] = "/tmp/mt-test-pipe-XXXXXX";
    mt_test_write_text(text);
    mt_gpt_config gpt;
    mt_train_config c = pipe_config(text, L, m, &gpt);
    mt_trainer *one = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &one));
    curve want = run(one);
    MT_CHECK(want.loss[TSTEPS - 1] < want.loss[0], "one device: training lowers the loss");

    char mesh[64];
    snprintf(mesh, sizeof mesh, "pipe=%d%s", p, extra_axes ? extra_axes : "");
    c.mesh = mesh;
    c.schedule = kind;
    c.sequence_parallel = sp > 0;
    c.collective_matmul = sp == 2 ? 1 : sp == 1 ? -1 : 0;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    curve got = run(tr);
    char what[96];
    snprintf(what, sizeof what, "%s on %s%s, m=%d", kind, mesh,
             sp == 2 ? " sp+cm" : sp == 1 ? " sp" : "", m);
    for (int s = 0; s < TSTEPS; s++) {
        MT_CHECK_CLOSE(got.loss[s], want.loss[s], 1e-5, "%s: loss at step %d", what, s + 1);
        MT_CHECK_CLOSE(got.norm[s], want.norm[s], 1e-5, "%s: gradient norm at step %d", what,
                       s + 1);
    }
    int split = 0, n = compare_params(tr, one, what, &split);
    /* every parameter somewhere, the tied embedding twice */
    MT_CHECK(n + split >= mt_graph_n_params(mt_trainer_graph(one)) + 1,
             "%s: %d parameters compared, %d split", what, n, split);
    MT_CHECK(!extra_axes || strstr(extra_axes, "data") || split > 0,
             "%s: some parameter is split over the other axis", what);
    fprintf(stderr, "  %s: %d steps, loss %.4f -> %.4f, %d parameter tensors match (%d split "
            "ones by the losses and norms)\n", what, TSTEPS, got.loss[0], got.loss[TSTEPS - 1],
            n, split);
    mt_trainer_free(tr);
    mt_trainer_free(one);
    unlink(text);
}

static void check_kind(const char *kind, int p, int m, int L, const char *extra_axes) {
    check_kind_sp(kind, p, m, L, extra_axes, 0);
}

/* Under TSan (MT_TEST_TSAN) the 8-microbatch runs skip: the 4-microbatch
 * run of the same schedule already runs its warm-up, steady state and
 * cool-down, the same handshakes between the stages' threads. */
#define M8_UNDER_TSAN "under TSan the 4-microbatch run of this schedule covers its handshakes"
#define KIND_CASES(name, kind)                                                              \
    MT_TEST(pipe2_m4_##name) { check_kind(kind, 2, 4, 4, NULL); }                           \
    MT_TEST(pipe2_m8_##name) {                                                              \
        MT_TEST_SKIP_IF(MT_TEST_TSAN, M8_UNDER_TSAN);                                       \
        check_kind(kind, 2, 8, 4, NULL);                                                    \
    }

KIND_CASES(gpipe, "gpipe")
KIND_CASES(1f1b, "1f1b")
KIND_CASES(interleaved, "interleaved")
KIND_CASES(zb_h1, "zb-h1")
KIND_CASES(zb_h2, "zb-h2")
KIND_CASES(zb_v, "zb-v")
MT_TEST(pipe2_m4_dualpipev) { check_kind("dualpipev", 2, 4, 4, NULL); }
MT_TEST(pipe2_m8_dualpipev) {
    MT_TEST_SKIP_IF(MT_TEST_TSAN, M8_UNDER_TSAN);
    check_kind("dualpipev", 2, 8, 4, NULL);
}

MT_TEST(pipe4_m8_1f1b) { check_kind("1f1b", 4, 8, 8, NULL); }
MT_TEST(pipe4_m8_zb_h1) { check_kind("zb-h1", 4, 8, 8, NULL); }
MT_TEST(pipe4_m8_zb_v) { check_kind("zb-v", 4, 8, 8, NULL); }

/* composed with the other axes */
MT_TEST(pipe2_data2_zb_h1) { check_kind("zb-h1", 2, 4, 4, ",data=2"); }
MT_TEST(pipe2_data2_1f1b) { check_kind("1f1b", 2, 4, 4, ",data=2"); }
MT_TEST(pipe2_data2_interleaved) { check_kind("interleaved", 2, 4, 4, ",data=2"); }
MT_TEST(pipe2_data2_dualpipev) { check_kind("dualpipev", 2, 4, 4, ",data=2"); }

/* Device 0's data-parallel all-reduces (its chunk graph's psums) in one step
 * of `kind` on pipe=2,data=2 with m microbatches. */
static int64_t psums_a_step(const char *kind, int m) {
    char text[] = "/tmp/mt-test-pipe-XXXXXX";
    mt_test_write_text(text);
    mt_gpt_config gpt;
    mt_train_config c = pipe_config(text, 4, m, &gpt);
    c.mesh = "pipe=2,data=2";
    c.schedule = kind;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    mt_step_report r;
    MT_CHECK_OK(mt_trainer_step(tr, &r));   /* warm-up */
    mt_graph *g = mt_trainer_graph(tr);
    MT_CHECK_OK(mt_graph_set_profiling(g, true));
    MT_CHECK_OK(mt_trainer_step(tr, &r));
    mt_op_totals t;
    MT_CHECK_OK(mt_graph_profile_op(g, "psum", &t));
    mt_trainer_free(tr);
    unlink(text);
    return t.calls;
}

/* A whole backward (BW) leaves its gradients' all-reduces to the chunk's
 * last one in the step (DDP's no_sync), and so does a split W (the
 * zero-bubble kinds): 1F1B, ZB-H1 and DualPipeV run as many all-reduces a
 * step at m = 4 as ZB-H1 at m = 2, one a gradient whatever m (the losses
 * are one device's: pipe2_data2_1f1b, pipe2_data2_zb_h1,
 * pipe2_data2_dualpipev). */
MT_TEST(pipe2_data2_reduces_once_a_step) {
    int64_t once = psums_a_step("1f1b", 4), zb = psums_a_step("zb-h1", 4);
    int64_t zb2 = psums_a_step("zb-h1", 2), v = psums_a_step("dualpipev", 4);
    MT_CHECK(once > 0 && zb == zb2 && once == zb2 && v == zb2, "psums a step: 1f1b %lld, "
             "zb-h1 %lld (m=2: %lld), dualpipev %lld (want one count)", (long long)once,
             (long long)zb, (long long)zb2, (long long)v);
}
MT_TEST(pipe2_tensor2_1f1b) { check_kind("1f1b", 2, 4, 4, ",tensor=2"); }
/* sequence parallelism inside the stages: a stage sends each tensor rank's
 * rows (the residual stream split over tensor) and the next takes them
 * split, with and without collective matmul, and in the V shape */
MT_TEST(pipe2_tensor2_sp_1f1b) { check_kind_sp("1f1b", 2, 4, 4, ",tensor=2", 1); }
MT_TEST(pipe2_tensor2_sp_cm_1f1b) { check_kind_sp("1f1b", 2, 4, 4, ",tensor=2", 2); }
MT_TEST(pipe2_tensor2_sp_zb_v) { check_kind_sp("zb-v", 2, 4, 4, ",tensor=2", 1); }
/* every other schedule kind too (issue 39, item 1: all seven), the split-W
 * and V kinds with collective matmul as well, and beside a data axis. Under
 * TSan these skip: each kind's handshakes between the stages' threads run in
 * its pipe2_m4_* case, and the tensor ranks' collectives inside a stage, with
 * and without collective matmul, in the three cases above. */
#define SP_KIND_UNDER_TSAN "under TSan pipe2_m4_<kind> and pipe2_tensor2_sp_* cover its threads"
#define SP_KIND_CASE(name, kind, sp)                                                        \
    MT_TEST(name) {                                                                         \
        MT_TEST_SKIP_IF(MT_TEST_TSAN, SP_KIND_UNDER_TSAN);                                  \
        check_kind_sp(kind, 2, 4, 4, ",tensor=2", sp);                                      \
    }
SP_KIND_CASE(pipe2_tensor2_sp_gpipe, "gpipe", 1)
SP_KIND_CASE(pipe2_tensor2_sp_interleaved, "interleaved", 1)
SP_KIND_CASE(pipe2_tensor2_sp_zb_h1, "zb-h1", 1)
SP_KIND_CASE(pipe2_tensor2_sp_zb_h2, "zb-h2", 1)
SP_KIND_CASE(pipe2_tensor2_sp_dualpipev, "dualpipev", 1)
SP_KIND_CASE(pipe2_tensor2_sp_cm_zb_h1, "zb-h1", 2)
SP_KIND_CASE(pipe2_tensor2_sp_cm_dualpipev, "dualpipev", 2)
MT_TEST(pipe2_data2_tensor2_sp_1f1b) { check_kind_sp("1f1b", 2, 4, 4, ",data=2,tensor=2", 1); }
MT_TEST(pipe2_data2_tensor2_sp_cm_zb_v) { check_kind_sp("zb-v", 2, 4, 4, ",data=2,tensor=2", 2); }
MT_TEST(pipe2_fsdp2_zb_v) { check_kind("zb-v", 2, 4, 4, ",fsdp=2"); }

/* The validation loss through the pipeline (forward only, chunk by chunk)
 * equals one device's, before and after training steps. */
static void check_eval(const char *kind, int p, int L) {
    char text[] = "/tmp/mt-test-pipe-XXXXXX";
    mt_test_write_text(text);
    mt_gpt_config gpt;
    mt_train_config c = pipe_config(text, L, 2 * p, &gpt);
    c.eval_every = 2;
    c.eval_batches = 3;
    c.val_frac = 0.2;
    mt_trainer *one = NULL, *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &one));
    char mesh[32];
    snprintf(mesh, sizeof mesh, "pipe=%d", p);
    c.mesh = mesh;
    c.schedule = kind;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    for (int round = 0; round < 3; round++) {
        float want = 0, got = 0;
        MT_CHECK_OK(mt_trainer_eval(one, &want));
        MT_CHECK_OK(mt_trainer_eval(tr, &got));
        MT_CHECK_CLOSE(got, want, 1e-5, "%s on %s: validation loss after %d steps", kind, mesh,
                       2 * round);
        for (int s = 0; s < 2; s++) {
            MT_CHECK_OK(mt_trainer_step(one, NULL));
            MT_CHECK_OK(mt_trainer_step(tr, NULL));
        }
    }
    mt_trainer_free(tr);
    mt_trainer_free(one);
    unlink(text);
}

MT_TEST(pipe2_eval_1f1b) { check_eval("1f1b", 2, 4); }
MT_TEST(pipe2_eval_zb_v) { check_eval("zb-v", 2, 4); }
MT_TEST(pipe4_eval_zb_h1) {
    MT_TEST_SKIP_IF(MT_TEST_TSAN, "under TSan pipe4_m8_zb_h1 runs this timetable and "
                    "pipe2_eval_* the evaluation's");
    check_eval("zb-h1", 4, 8);
}

/* Checkpoints: a run stopped halfway through TSTEPS on `from` (NULL: one
 * device) and resumed on `to` continues the one-device run that never
 * stopped: the loss at every resumed step within relative 1e-5. */
static void check_resume(const char *from, const char *from_kind, const char *to,
                         const char *to_kind) {
    enum { HALF = TSTEPS / 2 };
    char text[] = "/tmp/mt-test-pipe-XXXXXX", ckpt[] = "/tmp/mt-test-pipe-ckpt-XXXXXX";
    mt_test_write_text(text);
    int fd = mkstemp(ckpt);
    MT_CHECK(fd >= 0, "mkstemp");
    close(fd);
    mt_gpt_config gpt;
    mt_train_config c = pipe_config(text, 4, 4, &gpt);
    mt_trainer *one = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &one));
    curve want = run(one);
    mt_trainer_free(one);

    mt_train_config a = c;
    a.mesh = from;
    a.schedule = from_kind;
    a.ckpt_out = ckpt;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&a, &tr));
    for (int s = 0; s < HALF; s++) MT_CHECK_OK(mt_trainer_step(tr, NULL));
    MT_CHECK_OK(mt_trainer_save(tr));
    mt_trainer_free(tr);

    mt_train_config b = c;
    b.mesh = to;
    b.schedule = to_kind;
    b.ckpt_in = ckpt;
    MT_CHECK_OK(mt_trainer_create(&b, &tr));
    MT_CHECK(mt_trainer_step_count(tr) == HALF, "resumed at step %d", mt_trainer_step_count(tr));
    for (int s = HALF; s < TSTEPS; s++) {
        mt_step_report r;
        MT_CHECK_OK(mt_trainer_step(tr, &r));
        MT_CHECK_CLOSE(r.loss, want.loss[s], 1e-5, "%s (%s) -> %s (%s): loss at step %d",
                       from ? from : "1 device", from_kind ? from_kind : "-",
                       to ? to : "1 device", to_kind ? to_kind : "-", s + 1);
    }
    fprintf(stderr, "  %s (%s) -> %s (%s): steps %d..%d equal the run that never stopped\n",
            from ? from : "1 device", from_kind ? from_kind : "-", to ? to : "1 device",
            to_kind ? to_kind : "-", HALF + 1, TSTEPS);
    mt_trainer_free(tr);
    unlink(ckpt);
    unlink(text);
}

/* under TSan ckpt_pipe2_zbv_to_pipe4_1f1b saves from and loads into pipe
 * stages' threads, what the first two do with one side on one device */
#define CKPT_UNDER_TSAN "under TSan ckpt_pipe2_zbv_to_pipe4_1f1b saves and loads on stage threads"
MT_TEST(ckpt_pipe2_to_one_device) {
    MT_TEST_SKIP_IF(MT_TEST_TSAN, CKPT_UNDER_TSAN);
    check_resume("pipe=2", "zb-h1", NULL, NULL);
}
MT_TEST(ckpt_one_device_to_pipe2) {
    MT_TEST_SKIP_IF(MT_TEST_TSAN, CKPT_UNDER_TSAN);
    check_resume(NULL, NULL, "pipe=2", "zb-v");
}
MT_TEST(ckpt_pipe2_zbv_to_pipe4_1f1b) { check_resume("pipe=2", "zb-v", "pipe=4", "1f1b"); }
MT_TEST(ckpt_pipe2_tensor2_to_fsdp2) { check_resume("pipe=2,tensor=2", "1f1b", "fsdp=2", NULL); }

/* ---- what a pipeline refuses ------------------------------------------- */

static void expect_refusal(mt_train_config c, const char *needle) {
    mt_trainer *tr = NULL;
    mt_status s = mt_trainer_create(&c, &tr);
    MT_CHECK(s != MT_OK, "refused: %s", needle);
    MT_CHECK(strstr(mt_errmsg(), needle), "message names '%s': %s", needle, mt_errmsg());
    mt_trainer_free(tr);
}

MT_TEST(pipeline_refusals) {
    char text[] = "/tmp/mt-test-pipe-XXXXXX";
    mt_test_write_text(text);
    mt_gpt_config gpt;
    mt_train_config c = pipe_config(text, 4, 1, &gpt);
    c.mesh = "pipe=2";
    expect_refusal(c, "m >= p");                          /* 1 microbatch over 2 stages */
    c.accum = 3;
    c.schedule = "interleaved";
    expect_refusal(c, "divisible");                       /* m divisible by p */
    c.schedule = "zb-q";
    expect_refusal(c, "zb-q");                            /* an unknown kind */
    c.schedule = "1f1b";
    c.mesh = "data=2";
    expect_refusal(c, "pipe axis");                       /* a schedule without a pipe axis */
    c.mesh = "pipe=4";
    c.accum = 4;
    c.schedule = "zb-v";
    expect_refusal(c, "L=4");                             /* 8 chunks of 4 blocks */
    c.mesh = "pipe=2";
    c.schedule = NULL;
    c.model = MT_MODEL_MLP;
    c.model_config = NULL;   /* its defaults: the GPT's settings are no MLP's */
    c.data = NULL;
    expect_refusal(c, "stages");                          /* the MLP cannot be cut */
    unlink(text);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
