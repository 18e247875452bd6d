/*
 * test_strategies.c — DESIGN's invariant for the strategies, which are
 * sharding presets over the partitioner (src/train/presets.c): the trainer
 * on each mesh trains the one-device run. The MLP and a small GPT (L=2, C=64,
 * NH=4, V=256), 10 AdamW steps from the same seed and global batch: the loss
 * at every step within relative 1e-5 and the final parameters within 1e-4
 * of one device (MT_CHECK_CLOSE's measure: relative above 1, absolute
 * below; see mt_test_params_diff).
 *
 * Layouts: data parallel (data=2, 4, 8); ZeRO 1, 2, 3 over data; FSDP
 * (fsdp=2, 4: parameters stored split, gathered before use, gradients
 * reduce-scattered); tensor parallel (tensor=2, 4: Megatron's column- and
 * row-parallel pairs, in the MLP model and in the GPT's attention heads,
 * MLPs and vocabulary), with and without sequence parallelism; and their
 * products. Each sharded
 * layout also checks that device 0 holds a shard, not the whole parameter,
 * so that a preset that silently replicated would fail.
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"
#include "graph/graph_impl.h"   /* the plan's deferred gathers */

#include <unistd.h>

/* steps a run (under a sanitizer 4: the first steps already run every
 * collective and update of the layout, at 3-15x the cost) */
#define TSTEPS (MT_TEST_SANITIZED ? 4 : 10)

typedef struct {
    mt_test_curve  c;   /* loss and global gradient norm (clipping at 1 uses it) a step */
    mt_test_params p;
} trained;

static trained train_with(mt_train_config cfg, const char *mesh) {
    cfg.mesh = mesh;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&cfg, &tr));
    trained out = {.c = mt_test_steps(tr, TSTEPS)};
    out.p = mt_test_params_of(tr);
    mt_trainer_free(tr);
    return out;
}

/* A layout: a mesh, a ZeRO stage, and whether device 0 must hold some
 * parameter split (a preset that silently replicated would fail). */
typedef struct {
    const char *mesh;
    int         zero;
    bool        shards;
} layout;

/* Trains cfg on each layout (until one with mesh NULL) and compares with one
 * device. */
static void check_layouts(mt_train_config cfg, const char *what, const layout *layouts) {
    /* one device: sequence parallelism (and its collective matmuls) needs a
     * tensor axis, and is refused without one */
    mt_train_config ref = cfg;
    ref.sequence_parallel = false;
    ref.collective_matmul = 0;
    trained one = train_with(ref, NULL);
    MT_CHECK(one.c.loss[TSTEPS - 1] < one.c.loss[0], "%s: training lowers the loss", what);
    bool clipped = false;
    for (int s = 0; s < TSTEPS; s++) clipped |= one.c.norm[s] > cfg.optim.grad_clip;
    fprintf(stderr, "  %s: gradient norm %.3g at step 1 (clipped at %g in some step: %s)\n", what,
            one.c.norm[0], cfg.optim.grad_clip, clipped ? "yes" : "no");
    for (int i = 0; layouts[i].mesh; i++) {
        char mesh[64];
        snprintf(mesh, sizeof mesh, "%s%s%s", layouts[i].mesh,
                 layouts[i].zero == 1 ? " zero=1" : layouts[i].zero == 2 ? " zero=2"
                 : layouts[i].zero == 3 ? " zero=3" : "",
                 cfg.sequence_parallel ? " sequence-parallel" : "");
        cfg.zero = layouts[i].zero;
        trained got = train_with(cfg, layouts[i].mesh);
        for (int s = 0; s < TSTEPS; s++) {
            MT_CHECK_CLOSE(got.c.loss[s], one.c.loss[s], 1e-5, "%s on %s: loss at step %d", what,
                           mesh, s + 1);
            /* every element counted once, whatever the split */
            MT_CHECK_CLOSE(got.c.norm[s], one.c.norm[s], 1e-5, "%s on %s: gradient norm at step %d",
                           what, mesh, s + 1);
        }
        /* AdamW turns the rounding noise of a gradient that is zero in exact
         * arithmetic (the key bias, by softmax's shift invariance) into steps
         * of ±lr·noise/eps: such elements end near ±1e-6 with either sign, so
         * a purely relative test would be meaningless for them */
        int shards = 0;
        double worst = mt_test_params_diff(&got.p, &one.p, &shards);
        MT_CHECK(worst < 1e-4, "%s on %s: parameters differ by %g", what, mesh, worst);
        MT_CHECK(!layouts[i].shards || shards > 0, "%s on %s: no parameter is split on device 0",
                 what, mesh);
        free(got.p.params);
    }
    free(one.p.params);
}

MT_TEST(mlp_layouts_equal_one_device) {
    mt_train_config c = mt_test_config(MT_MODEL_MLP, NULL);
    static const layout layouts[] = {
        {"data=2", 0, false}, {"data=4", 0, false}, {"data=8", 0, false},
        {"data=2", 1, true}, {"data=2", 2, true}, {"data=2", 3, true}, {"data=4", 1, true},
        {"fsdp=2", 0, true}, {"fsdp=4", 0, true}, {"tensor=2", 0, true}, {"tensor=4", 0, true},
        {"data=2,tensor=2", 0, true}, {"fsdp=2,tensor=2", 0, true},
        {"data=2,fsdp=2,tensor=2", 0, true}, {"data=2,fsdp=2", 2, true}, {NULL, 0, false}};
    check_layouts(c, "mlp", layouts);
}

MT_TEST(gpt_layouts_equal_one_device) {
    char path[] = "/tmp/mt_test_strategies_XXXXXX";
    mt_test_write_text(path);
    mt_train_config c = mt_test_config(MT_MODEL_GPT, path);
    /* tensor parallel splits the GPT's attention heads (NH=4: one per device
     * on tensor=4), MLPs and vocabulary */
    static const layout layouts[] = {
        {"data=2", 0, false}, {"data=4", 0, false}, {"data=8", 0, false}, {"data=2", 1, true},
        {"data=2", 2, true}, {"fsdp=2", 0, true}, {"fsdp=4", 0, true}, {"data=2,fsdp=2", 0, true},
        {"tensor=2", 0, true}, {"tensor=4", 0, true}, {"data=2,tensor=2", 0, true},
        {"fsdp=2,tensor=2", 0, true}, {"data=2,fsdp=2,tensor=2", 0, true}, {NULL, 0, false}};
    check_layouts(c, "gpt", layouts);
    /* sequence parallelism: the rows between the tensor-parallel products
     * split over tensor too (T=16 over 2 and 4) */
    static const layout sequence[] = {
        {"tensor=2", 0, true}, {"tensor=4", 0, true}, {"data=2,tensor=2", 0, true},
        {"data=2,fsdp=2,tensor=2", 0, true}, {NULL, 0, false}};
    c.sequence_parallel = true;
    c.collective_matmul = -1;
    check_layouts(c, "gpt", sequence);
    /* and its collectives inside the products' rings (collective matmul) */
    c.collective_matmul = 1;
    check_layouts(c, "gpt collective-matmul", sequence);
    unlink(path);
}

static mt_memory_report memory_of(mt_train_config c, const char *mesh, int zero) {
    c.mesh = mesh;
    c.zero = zero;
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    mt_memory_report m = mt_trainer_memory(tr);
    mt_trainer_free(tr);
    return m;
}

/* The allocator's accounting: FSDP and ZeRO over n devices hold about 1/n of
 * the parameter, gradient and optimizer bytes (a parameter no dim of which
 * n divides stays whole: the MLP's last bias here); tensor parallel divides
 * the split layers' weights (the MLP's first pair: 4672 of its 4866
 * parameters, so a little over half remain). */
MT_TEST(split_layouts_hold_their_share_of_memory) {
    mt_train_config c = mt_test_config(MT_MODEL_MLP, NULL);
    mt_memory_report one = memory_of(c, NULL, 0);
    MT_CHECK(one.parameters == 4866 * 4 && one.gradients == 4866 * 4 &&
             one.optimizer == 2 * 4866 * 4, "one device: %zu, %zu, %zu bytes", one.parameters,
             one.gradients, one.optimizer);
    static const struct { const char *mesh; int zero, n; } SPLIT[] = {
        {"fsdp=2", 0, 2}, {"fsdp=4", 0, 4}, {"data=4", 3, 4}};
    for (size_t i = 0; i < sizeof SPLIT / sizeof SPLIT[0]; i++) {
        mt_memory_report m = memory_of(c, SPLIT[i].mesh, SPLIT[i].zero);
        size_t bound = one.parameters / (size_t)SPLIT[i].n + 64;
        MT_CHECK(m.parameters <= bound && m.gradients <= bound && m.optimizer <= 2 * bound,
                 "%s zero=%d: %zu, %zu, %zu bytes of parameters, gradients, optimizer state; "
                 "want at most %zu, %zu, %zu", SPLIT[i].mesh, SPLIT[i].zero, m.parameters,
                 m.gradients, m.optimizer, bound, bound, 2 * bound);
    }
    /* ZeRO-1 and 2 as the paper defines them: the parameters kept whole
     * beside their shard (the shard is the optimizer's, the whole copy the
     * products'), the optimizer state split; ZeRO-1 keeps the gradient whole
     * too, ZeRO-2 only its shard (one microbatch: nothing to accumulate) */
    for (int zero = 1; zero <= 2; zero++) {
        mt_memory_report m = memory_of(c, "data=2", zero);
        size_t half = one.parameters / 2 + 64;
        MT_CHECK(m.parameters >= one.parameters && m.parameters <= one.parameters + half &&
                 m.optimizer <= 2 * half &&
                 (zero == 1 ? m.gradients >= one.gradients && m.gradients <= one.gradients + half
                            : m.gradients <= half),
                 "data=2 zero=%d: %zu, %zu, %zu bytes of parameters, gradients, optimizer state; "
                 "want %zu to %zu, %s, at most %zu", zero, m.parameters, m.gradients, m.optimizer,
                 one.parameters, one.parameters + half,
                 zero == 1 ? "the same range" : "at most a half", 2 * half);
    }
    mt_memory_report dp = memory_of(c, "data=2", 0);
    MT_CHECK(dp.parameters == one.parameters && dp.optimizer == one.optimizer,
             "data parallel replicates: %zu vs %zu", dp.parameters, one.parameters);
    mt_memory_report tp = memory_of(c, "tensor=2", 0);
    size_t tp_want = (size_t)(4866 - 4672 / 2) * 4;
    MT_CHECK(tp.parameters == tp_want, "tensor=2: %zu bytes of parameters, want %zu",
             tp.parameters, tp_want);
}

/* Tensor parallel divides the GPT's layer weights, q, k, v (and their bias),
 * attention's projection, the MLP's fc (and bias) and proj, and the tied
 * embedding by the tensor size: per block 12C²+7C of 12C²+13C elements. */
MT_TEST(gpt_tensor_parallel_divides_the_layer_weights) {
    char path[] = "/tmp/mt_test_strategies_XXXXXX";
    mt_test_write_text(path);
    mt_train_config c = mt_test_config(MT_MODEL_GPT, path);
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    mt_memory_report one = mt_trainer_memory(tr);
    const int64_t Vp = mt_tensor_dim(mt_graph_find(mt_trainer_graph(tr), "wte"), 0);
    mt_trainer_free(tr);
    const mt_gpt_config gpt = mt_test_gpt_of(&c);
    const int64_t C = gpt.C, L = gpt.L;
    const int64_t split = Vp * C + L * (12 * C * C + 7 * C);
    MT_CHECK(one.parameters == (size_t)mt_gpt_num_params(&(mt_gpt_config){
                 .L = (int)L, .C = (int)C, .NH = 4, .maxT = gpt.maxT, .V = 1, .Vp = (int)Vp}) * 4,
             "one device holds %zu bytes of parameters", one.parameters);
    for (int n = 2; n <= 4; n *= 2) {
        char mesh[32];
        snprintf(mesh, sizeof mesh, "tensor=%d", n);
        mt_memory_report tp = memory_of(c, mesh, 0);
        size_t want = one.parameters - (size_t)(split - split / n) * 4;
        MT_CHECK(tp.parameters == want && tp.gradients == want && tp.optimizer == 2 * want,
                 "%s: %zu, %zu, %zu bytes of parameters, gradients, optimizer state; want %zu, "
                 "%zu, %zu", mesh, tp.parameters, tp.gradients, tp.optimizer, want, want,
                 2 * want);
    }
    /* heads that do not divide: an error naming them */
    c.mesh = "tensor=8";
    MT_CHECK_FAILS(mt_trainer_create(&c, &tr), MT_EINVAL, "NH=4", "heads", "8");
    unlink(path);
}

/* FSDP frees each gathered parameter after its forward use and gathers it
 * again in the backward: on a GPT whose parameters dwarf its activations
 * (C=256, 4 blocks of 0.79M parameters, 8 tokens a device), a device holds
 * 1/n of the parameter, gradient and optimizer bytes, and its activations
 * and temporaries exceed one device's (the same tokens, nothing gathered) by
 * at most the gathered parameters of two blocks, where keeping every
 * gathered copy for the step would add all four. */
MT_TEST(fsdp_holds_one_layer_of_gathered_parameters) {
    char path[] = "/tmp/mt_test_strategies_XXXXXX";
    mt_test_write_text(path);
    mt_train_config c = mt_test_config(MT_MODEL_GPT, path);
    const mt_gpt_config gpt = {.L = 4, .C = 256, .NH = 4, .maxT = 8, .V = 0, .Vp = 0};
    MT_TEST_MODEL_CONFIG(&c, &gpt);
    c.T = 8;
    const size_t block = (size_t)(12 * 256 * 256 + 13 * 256) * 4;
    for (int n = 2; n <= 4; n *= 2) {
        c.B = 2;   /* per device */
        mt_memory_report one = memory_of(c, NULL, 0);
        c.B = 2 * n;
        char mesh[32];
        snprintf(mesh, sizeof mesh, "fsdp=%d", n);
        mt_memory_report f = memory_of(c, mesh, 0);
        MT_CHECK(f.parameters <= one.parameters / (size_t)n + 4096 &&
                 f.optimizer <= one.optimizer / (size_t)n + 8192,
                 "%s: %zu bytes of parameters, %zu of optimizer state, want 1/%d of %zu, %zu",
                 mesh, f.parameters, f.optimizer, n, one.parameters, one.optimizer);
        size_t extra = f.activations + f.temporary - (one.activations + one.temporary);
        fprintf(stderr, "  %s: activations and temporaries %.2f MiB, one device's %.2f MiB, "
                "a block's parameters %.2f MiB\n", mesh, (f.activations + f.temporary) / 1048576.0,
                (one.activations + one.temporary) / 1048576.0, block / 1048576.0);
        MT_CHECK(f.activations + f.temporary <= one.activations + one.temporary + 2 * block,
                 "%s holds %zu bytes more activations and temporaries than one device, more "
                 "than two blocks' gathered parameters (%zu)", mesh, extra, 2 * block);
    }
    unlink(path);
}

/* FSDP prefetches: each parameter's gather is issued one parameter ahead,
 * in the forward and again (the re-gather) in the backward, and runs
 * asynchronously under the work before its first reader: in device 0's
 * program (the GPT on fsdp=2) the plan defers the gathers of whole blocks
 * (dim 0 split), each completing at a later position than the one it
 * starts at, with work between. */
MT_TEST(fsdp_prefetches_the_gathers) {
    char path[] = "/tmp/mt_test_strategies_XXXXXX";
    mt_test_write_text(path);
    mt_train_config c = mt_test_config(MT_MODEL_GPT, path);
    c.mesh = "fsdp=2";
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    mt_graph *g = mt_trainer_graph(tr);
    int deferred[2] = {0}, overlapped[2] = {0}, regathers = 0;
    for (int ph = 0; ph < 2; ph++) {
        int n = ph == 0 ? g->n_forward : g->prog->n_b;
        for (int j = 0; j < n; j++) {
            const mt_node *nd = &g->nodes[ph == 0 ? j : g->prog->order_b[j]];
            if (nd->call.op != MT_OP_ALL_GATHER) continue;
            if (ph == 1) regathers += strncmp(nd->call.out->name, "regather(", 9) == 0;
            if (nd->defer_until < 0) continue;
            deferred[ph]++;
            overlapped[ph] += nd->defer_until > j + 1;
        }
    }
    fprintf(stderr, "  fsdp=2: forward %d gathers deferred (%d with work under them); backward "
            "%d re-gathers, %d deferred (%d)\n", deferred[0], overlapped[0], regathers,
            deferred[1], overlapped[1]);
    MT_CHECK(deferred[0] >= 4 && overlapped[0] >= 4, "forward: %d gathers deferred, %d with work "
             "under them", deferred[0], overlapped[0]);
    MT_CHECK(regathers >= 4 && deferred[1] >= 4 && overlapped[1] >= 4, "backward: %d re-gathers, "
             "%d deferred, %d with work under them", regathers, deferred[1], overlapped[1]);
    mt_trainer_free(tr);
    unlink(path);
}

/* fsdp=2 beside data=2 (HSDP): every forward pvary over data of a parameter
 * gathered over fsdp reads the gathered bytes (no copy; plan.c step 0), and
 * the bytes it reads are the all-gather's output; a step still trains the
 * one-device run (gpt_layouts_equal_one_device). On a one-device axis
 * (data=1) no pvary is made at all, so no gradient is reduced. */
MT_TEST(hsdp_pvary_reads_the_gathered_bytes) {
    char path[] = "/tmp/mt_test_strategies_XXXXXX";
    mt_test_write_text(path);
    mt_train_config c = mt_test_config(MT_MODEL_GPT, path);
    c.mesh = "data=2,fsdp=2";
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    const mt_graph *g = mt_trainer_graph(tr);
    int after_gather = 0, aliased = 0;
    for (int i = 0; i < g->n_forward; i++) {
        const mt_op_call *pv = &g->nodes[i].call;
        if (pv->op != MT_OP_PVARY) continue;
        for (int j = 0; j < i; j++) {
            const mt_op_call *ag = &g->nodes[j].call;
            if (ag->op != MT_OP_ALL_GATHER || ag->out != pv->in[0]) continue;
            after_gather++;
            aliased += pv->out->data == ag->out->data;
        }
    }
    MT_CHECK(after_gather >= 4 && aliased == after_gather, "%d of %d pvaries of gathered "
             "parameters read the gathered bytes", aliased, after_gather);
    mt_trainer_free(tr);
    c.mesh = "data=1";
    c.zero = 0;
    MT_CHECK_OK(mt_trainer_create(&c, &tr));
    g = mt_trainer_graph(tr);
    int pvaries = 0;
    for (int i = 0; i < g->n_nodes; i++) pvaries += g->nodes[i].call.op == MT_OP_PVARY;
    MT_CHECK(pvaries == 0, "data=1: %d pvary nodes (nothing differs over one device)", pvaries);
    mt_trainer_free(tr);
    unlink(path);
}

MT_TEST(trainer_refuses_bad_layouts) {
    mt_train_config c = mt_test_config(MT_MODEL_MLP, NULL);
    mt_trainer *tr = NULL;
    c.mesh = "data=2";
    c.devices = 3;
    MT_CHECK_FAILS(mt_trainer_create(&c, &tr), MT_EINVAL, "data=2", "3");
    c.mesh = "data=3";
    c.devices = 0;
    MT_CHECK_FAILS(mt_trainer_create(&c, &tr), MT_EINVAL, "B=8", "data", "3 devices");
    c.mesh = "data=2,data=2";
    MT_CHECK_FAILS(mt_trainer_create(&c, &tr), MT_EINVAL, "data");
    c.mesh = "dta=2";
    MT_CHECK_FAILS(mt_trainer_create(&c, &tr), MT_EINVAL, "'dta'", "unknown", "data");
    /* checkpoints of split parameters: test_strategies_ckpt.c */
}

/* mt_train_config_check decides every mistake of the configuration alone
 * without opening a file: a GPT whose data file does not exist passes it
 * (mt_trainer_create then fails on the file, MT_EIO), and each mistake
 * below fails it with the same status and message as mt_trainer_create. */
MT_TEST(config_check_decides_without_files) {
    mt_train_config gpt = mt_test_config(MT_MODEL_GPT, "/nonexistent/mt-config-check.txt");
    mt_trainer *tr = NULL;
    MT_CHECK_OK(mt_train_config_check(&gpt));
    gpt.mesh = "data=2,tensor=2";
    MT_CHECK_OK(mt_train_config_check(&gpt));
    MT_CHECK(mt_trainer_create(&gpt, &tr) == MT_EIO && !tr, "a missing data file: %s",
             mt_errmsg());
    MT_CHECK_FAILS(mt_train_config_check(NULL), MT_EINVAL, "NULL");
    static const struct {
        const char *what, *mesh, *schedule;
        int         B, T, NH, maxT, Vp, accum, zero, collective_matmul;
        bool        sequence_parallel, f32_activations;
        mt_status   want;
        const char *fragment, *fragment2;
    } cases[] = {
        /* what                 mesh              schedule  B  T NH maxT Vp acc zero cm sp f32 */
        {"heads divide C",     NULL,             NULL,     8, 16, 3, 16,  0, 1, 0, 0, 0, 0, MT_EINVAL, "C=64", "NH=3"},
        {"T <= maxT",          NULL,             NULL,     8, 32, 4, 16,  0, 1, 0, 0, 0, 0, MT_EINVAL, "T=32 (--seq)", "maxT=16 (--max-seq)"},
        {"axis names",         "foo=2",          NULL,     8, 16, 4, 16,  0, 1, 0, 0, 0, 0, MT_EINVAL, "'foo'", "unknown to the trainer"},
        {"axis size 0",        "data=0",         NULL,     8, 16, 4, 16,  0, 1, 0, 0, 0, 0, MT_EINVAL, "'data' must be a positive integer", "'0'"},
        {"axis size too large","data=99999999999999999999", NULL, 8, 16, 4, 16, 0, 1, 0, 0, 0, 0, MT_EINVAL, "too large", "1048576"},
        {"product overflow",   "data=65536,tensor=65537", NULL, 8, 16, 4, 16, 0, 1, 0, 0, 0, 0, MT_EINVAL, "4295032832 devices", "at most"},
        {"batch over data",    "data=3",         NULL,     8, 16, 4, 16,  0, 1, 0, 0, 0, 0, MT_EINVAL, "B=8 (--batch)", "multiple of 3"},
        {"zero needs data",    "tensor=2",       NULL,     8, 16, 4, 16,  0, 1, 2, 0, 0, 0, MT_EINVAL, "zero=2", "data axis"},
        {"zero=1 and fsdp",    "data=2,fsdp=2",  NULL,     8, 16, 4, 16,  0, 1, 1, 0, 0, 0, MT_EINVAL, "zero=1", "fsdp"},
        {"heads over tensor",  "tensor=8",       NULL,     8, 16, 4, 16,  0, 1, 0, 0, 0, 0, MT_EINVAL, "NH=4", "heads"},
        {"Vp over tensor",     "tensor=2",       NULL,     8, 16, 4, 16, 65, 1, 0, 0, 0, 0, MT_EINVAL, "Vp=65", "--padded-vocab"},
        {"sp needs tensor",    "data=2",         NULL,     8, 16, 4, 16,  0, 1, 0, 0, 1, 0, MT_EINVAL, "no tensor axis", "--sequence-parallel"},
        {"sp needs a mesh",    NULL,             NULL,     8, 16, 4, 16,  0, 1, 0, 0, 1, 0, MT_EINVAL, "no mesh", "--sequence-parallel"},
        {"sp divides T",       "tensor=3",       NULL,     8, 16, 4, 16,  0, 1, 0, 0, 1, 0, MT_EINVAL, "T=16 (--seq)", "tensor=3"},
        {"cm needs sp",        "tensor=2",       NULL,     8, 16, 4, 16,  0, 1, 0, 1, 0, 0, MT_EINVAL, "--collective-matmul", "--sequence-parallel"},
        {"f32 needs bf16",     NULL,             NULL,     8, 16, 4, 16,  0, 1, 0, 0, 0, 1, MT_EINVAL, "--f32-activations", "--precision bf16"},
        {"kind first",         "pipe=2",         "zb-h3",  8, 16, 4, 16,  0, 1, 0, 0, 0, 0, MT_EINVAL, "--schedule", "'zb-h3'"},
        {"m >= p",             "pipe=2",         NULL,     8, 16, 4, 16,  0, 1, 0, 0, 0, 0, MT_EINVAL, "m >= p", "--microbatches 2"},
        {"interleaved shape",  "pipe=2",         "interleaved", 8, 16, 4, 16, 0, 3, 0, 0, 0, 0, MT_EINVAL, "divisible", "interleaved"},
        {"chunks <= L",        "pipe=2",         "zb-v",   8, 16, 4, 16,  0, 2, 0, 0, 0, 0, MT_EINVAL, "4 chunks", "L=2 blocks (--layers)"},
        {"schedule, no pipe",  "data=2",         "1f1b",   8, 16, 4, 16,  0, 2, 0, 0, 0, 0, MT_EINVAL, "pipe axis", "1f1b"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mt_train_config c = mt_test_config(MT_MODEL_GPT, "/nonexistent/mt-config-check.txt");
        mt_gpt_config g = mt_test_gpt_of(&c);
        MT_TEST_MODEL_CONFIG(&c, &g);
        c.mesh = cases[i].mesh;
        c.schedule = cases[i].schedule;
        c.B = cases[i].B;
        c.T = cases[i].T;
        g.NH = cases[i].NH;
        g.maxT = cases[i].maxT;
        g.Vp = cases[i].Vp;
        c.accum = cases[i].accum;
        c.zero = cases[i].zero;
        c.collective_matmul = cases[i].collective_matmul;
        c.sequence_parallel = cases[i].sequence_parallel;
        c.f32_activations = cases[i].f32_activations;
        mt_status s = mt_train_config_check(&c);
        MT_CHECK(s == cases[i].want, "%s: %s (%s), want %s", cases[i].what, mt_status_name(s),
                 mt_errmsg(), mt_status_name(cases[i].want));
        MT_CHECK(strstr(mt_errmsg(), cases[i].fragment) && strstr(mt_errmsg(), cases[i].fragment2),
                 "%s: '%s' does not name '%s' and '%s'", cases[i].what, mt_errmsg(),
                 cases[i].fragment, cases[i].fragment2);
        char first[512];
        snprintf(first, sizeof first, "%s", mt_errmsg());
        /* the trainer: the same check, first (no file is opened) */
        MT_CHECK(mt_trainer_create(&c, &tr) == cases[i].want && !tr && strcmp(mt_errmsg(), first) == 0,
                 "%s: mt_trainer_create says '%s', the check '%s'", cases[i].what, mt_errmsg(), first);
    }
    /* the MLP: what its table entry lacks */
    mt_train_config mlp = mt_test_config(MT_MODEL_MLP, NULL);
    mlp.remat = MT_REMAT_FULL;
    MT_CHECK_FAILS(mt_train_config_check(&mlp), MT_EINVAL, "--remat", "--model mlp");
    mlp.remat = MT_REMAT_NONE;
    mlp.grad_reduce = MT_PRECISION_BF16;
    MT_CHECK_FAILS(mt_train_config_check(&mlp), MT_EINVAL, "--grad-reduce", "one device");
    mlp.mesh = "data=2";
    MT_CHECK_OK(mt_train_config_check(&mlp));
    mlp.grad_reduce = MT_PRECISION_FP32;
    mlp.mesh = "pipe=2";
    mlp.accum = 2;
    MT_CHECK_FAILS(mt_train_config_check(&mlp), MT_EINVAL, "cut", "mlp");
    /* with llmc_in the model is the file's: sizes the flags got wrong are
     * not held against it (the CLI refuses flags that contradict the file) */
    gpt = mt_test_config(MT_MODEL_GPT, "/nonexistent/mt-config-check.txt");
    gpt.llmc_in = "/nonexistent/model.bin";
    mt_gpt_config three_heads = mt_test_gpt_of(&gpt);
    three_heads.NH = 3;
    MT_TEST_MODEL_CONFIG(&gpt, &three_heads);
    gpt.mesh = "tensor=2";
    MT_CHECK_OK(mt_train_config_check(&gpt));
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
