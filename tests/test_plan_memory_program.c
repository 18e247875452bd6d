/* test_plan_memory_program.c — the planner's memory conventions
 * (src/plan/memory.c) counted from real programs (mt__plan_program_build):
 * - MIXED16 of a GPT on data=64 at ZeRO 0 to 3 and on fsdp=64 is the ZeRO
 *   paper's formula at the GPT's Ψ, counted by hand from its shapes; with
 *   tensor parallelism beside ZeRO, the paper's per-element count by hand;
 * - MESHTRAIN is the bytes `meshtrain explain --json` prints for the same
 *   layout (data, ZeRO, fsdp, tensor with sequence parallelism, remat);
 * - a device's chunks add, and the refusals name what is wrong.
 * The published closed forms themselves are test_plan_memory.c's. */
#include "meshtrain.h"
#include "harness.h"
#include "explain_json.h"
#include "plan/memory.h"
#include "train_helpers.h"

/* ======================================================================== */
/* From the program                                                          */
/* ======================================================================== */

static const char NO_DATA[] = "(explain reads no data)";

/* A GPT every parameter dim of which 64 divides: L=2 C=64 NH=4 maxT=64
 * V=Vp=256 (the head tied). */
static mt_gpt_config gpt64(void) {
    return (mt_gpt_config){.L = 2, .C = 64, .NH = 4, .maxT = 64, .V = 256, .Vp = 256};
}

/* Its Ψ by hand from its shapes: wte (Vp,C), wpe (maxT,C); a block's ln_1
 * (C)+(C), qkv (3C,C)+(3C), attn proj (C,C)+(C), ln_2 (C)+(C), fc (4C,C)+(4C),
 * mlp proj (C,4C)+(C); ln_f (C)+(C). C = 64: 16384 + 4096 + 2·49984 + 128. */
static const double GPT64_PSI = 256 * 64 + 64 * 64 +
    2 * (2 * 64 + 3 * 64 * 64 + 3 * 64 + 64 * 64 + 64 + 2 * 64 + 4 * 64 * 64 + 4 * 64 +
         4 * 64 * 64 + 64) + 2 * 64;

static mt_train_config gpt_config(const mt_gpt_config *mc, const char *mesh, int devices,
                                  int zero) {
    mt_train_config c = mt_train_defaults();
    c.model = MT_MODEL_GPT;
    MT_TEST_MODEL_CONFIG(&c, mc);
    c.B = 64;
    c.T = 16;
    c.data = NO_DATA;
    c.mesh = mesh;
    c.devices = devices;
    c.zero = zero;
    return c;
}

/* Device 1's program of c, its counts and its layout facts. */
static void device_chunk(const mt_train_config *c, int data, int fsdp, int tensor,
                         mt__plan_mem_chunk *chunk, mt__plan_mem_layout *lay) {
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create(c->mesh, c->devices, &mesh));
    mt__plan_program p;
    MT_CHECK_OK(mt__plan_program_build(c, mesh, 1, 0, 1, &p));
    memset(chunk, 0, sizeof *chunk);
    mt__plan_mem_counts_of(&p, &chunk->counts);
    chunk->layers = 2;
    chunk->in_flight = 1;
    mt__plan_program_free(&p);
    mt_mesh_free(mesh);
    const mt_gpt_config *g = c->model_config;
    *lay = (mt__plan_mem_layout){.data = data, .fsdp = fsdp, .tensor = tensor, .zero = c->zero,
                                 .sequence_parallel = c->sequence_parallel, .remat = c->remat,
                                 .s = c->T, .b = (double)c->B / (data * fsdp), .h = g->C,
                                 .a = g->NH};
}

/* MEGATRON's model states from the same programs against Megatron-LM's
 * published bytes a parameter (docs/distrib_optimizer.md's table: 18 for
 * bf16 weights with fp32 main gradients, 6 + 12/d with the distributed
 * optimizer, meshtrain's ZeRO-1), at the hand-counted Ψ on data=64; and its
 * activations are MIXED16's (Korthikanti's). */
MT_TEST(megatron_from_the_program_is_megatrons_table) {
    mt_gpt_config m = gpt64();
    const double psi = GPT64_PSI, d = 64;
    const double table[2] = {18 * psi, (6 + 12 / d) * psi};
    for (int z = 0; z <= 1; z++) {
        mt_train_config c = gpt_config(&m, "data=64", 64, z);
        mt__plan_mem_chunk ch;
        mt__plan_mem_layout lay;
        device_chunk(&c, 64, 1, 1, &ch, &lay);
        mt__plan_mem_bytes b, mixed;
        MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_MEGATRON, &lay, &ch, 1, &b));
        MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_MIXED16, &lay, &ch, 1, &mixed));
        double states = b.params + b.grads + b.optimizer;
        MT_CHECK(states == table[z], "data=64 zero=%d: model states %.0f bytes (params %.0f, "
                 "grads %.0f, optimizer %.0f), Megatron's table %.0f", z, states, b.params,
                 b.grads, b.optimizer, table[z]);
        MT_CHECK(b.activations == mixed.activations && b.temporaries == mixed.temporaries,
                 "zero=%d: activations %g and temporaries %g as mixed16's %g and %g", z,
                 b.activations, b.temporaries, mixed.activations, mixed.temporaries);
    }
    MT_CHECK(strcmp(mt_plan_memory_name(MT_PLAN_MEMORY_MEGATRON), "megatron") == 0, "its name");
}

/* MIXED16's model states counted from the GPT's program on data=64 at ZeRO
 * 0..3, and on fsdp=64, against the paper's per-stage formulas written out
 * here at the hand-counted Ψ, Nd = 64, K = 12: exact (every element splits). */
MT_TEST(mixed16_from_the_program_is_the_paper) {
    mt_gpt_config m = gpt64();
    const double psi = GPT64_PSI, nd = 64;
    MT_CHECK(psi == 120576, "Ψ by hand %g", psi);
    const double paper[4] = {(2 + 2 + 12) * psi, 4 * psi + 12 * psi / nd,
                             2 * psi + (2 + 12) * psi / nd, (2 + 2 + 12) * psi / nd};
    for (int z = 0; z <= 4; z++) {
        bool fsdp = z == 4;   /* fsdp=64: ZeRO-3's */
        mt_train_config c = gpt_config(&m, fsdp ? "fsdp=64" : "data=64", 64, fsdp ? 0 : z);
        mt__plan_mem_chunk ch;
        mt__plan_mem_layout lay;
        device_chunk(&c, fsdp ? 1 : 64, fsdp ? 64 : 1, 1, &ch, &lay);
        MT_CHECK(ch.counts.param_global_elems == psi, "%s zero=%d: the program's Ψ %g, hand %g",
                 c.mesh, c.zero, ch.counts.param_global_elems, psi);
        mt__plan_mem_bytes b;
        MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_MIXED16, &lay, &ch, 1, &b));
        double states = b.params + b.grads + b.optimizer, want = paper[fsdp ? 3 : z];
        MT_CHECK(states == want, "%s zero=%d: model states %.0f bytes (params %.0f, grads %.0f, "
                 "optimizer %.0f), the paper %.0f", c.mesh, c.zero, states, b.params, b.grads,
                 b.optimizer, want);
        /* and its Korthikanti activations: 2 layers of sbh(34 + 5as/h) at b = 1 a replica */
        double sbh = 16.0 * 1 * 64;
        MT_CHECK_CLOSE(b.activations, 2 * sbh * (34 + 5.0 * 4 * 16 / 64), 1e-14,
                       "%s zero=%d: activations", c.mesh, c.zero);
        /* a freed gathered copy (ZeRO-3, fsdp) is a 16-bit temporary: the largest
         * parameter, wte (256, 64) */
        double temp = (fsdp || z == 3) ? 2.0 * 256 * 64 : 0;
        MT_CHECK(b.temporaries == temp, "%s zero=%d: temporaries %g, want %g", c.mesh, c.zero,
                 b.temporaries, temp);
        MT_CHECK(b.total == states + b.activations + b.temporaries, "the total adds");
    }
}

/* With tensor parallelism beside ZeRO (no row of the paper), per element
 * as the paper counts: data=4,tensor=2. Ψ_t, what a device stores at ZeRO-0,
 * comes from that other program; of it, the 1-D parameters tensor
 * parallelism splits have no dim left for ZeRO and stay whole on every
 * data replica: by hand the qkv and fc biases, r = L·(3C + 4C)/t = 2·7·64/2 =
 * 448 elements. A ZeRO shard is then sh = (Ψ_t - r)/4 + r, and the states
 * are 2W + 2G + 12·O with (W, G, O) = (Ψ_t, Ψ_t, Ψ_t), (Ψ_t, Ψ_t, sh),
 * (Ψ_t, sh, sh), (sh, sh, sh) at ZeRO 0 to 3. */
MT_TEST(mixed16_with_tensor_parallel) {
    mt_gpt_config m = gpt64();
    mt__plan_mem_chunk ch;
    mt__plan_mem_layout lay;
    mt_train_config c0 = gpt_config(&m, "data=4,tensor=2", 8, 0);
    device_chunk(&c0, 4, 1, 2, &ch, &lay);
    const double psi_t = ch.counts.param_elems, r = 2.0 * 7 * 64 / 2, sh = (psi_t - r) / 4 + r;
    MT_CHECK(psi_t < GPT64_PSI && psi_t > GPT64_PSI / 2, "tensor shard %g of %g", psi_t,
             GPT64_PSI);
    for (int z = 0; z <= 3; z++) {
        mt_train_config c = gpt_config(&m, "data=4,tensor=2", 8, z);
        device_chunk(&c, 4, 1, 2, &ch, &lay);
        MT_CHECK(ch.counts.param_elems == (z ? sh : psi_t), "zero=%d: stored %g, by hand %g", z,
                 ch.counts.param_elems, z ? sh : psi_t);
        mt__plan_mem_bytes b;
        MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_MIXED16, &lay, &ch, 1, &b));
        double W = z < 3 ? psi_t : sh, G = z < 2 ? psi_t : sh, O = z < 1 ? psi_t : sh;
        MT_CHECK(b.params == 2 * W && b.grads == 2 * G && b.optimizer == 12 * O,
                 "data=4,tensor=2 zero=%d: %.0f/%.0f/%.0f bytes, by hand %.0f/%.0f/%.0f", z,
                 b.params, b.grads, b.optimizer, 2 * W, 2 * G, 12 * O);
    }
}

/* `meshtrain explain --json`'s memory_per_device for the flags. */
static void explain_bytes(const char *flags, double out[4]) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "./meshtrain explain --model gpt --layers 2 --channels 64 "
             "--heads 4 --max-seq 64 --vocab 256 --batch 64 --seq 16 --json %s 2>&1", flags);
    explain_memory(cmd, out);
}

/* MESHTRAIN's bytes are the allocator's, as explain prints them: data=64 at
 * ZeRO 0..3, fsdp=64 (gathering every microbatch and once a step),
 * data=16,tensor=4 with sequence parallelism, and a remat policy. */
MT_TEST(meshtrain_is_what_explain_prints) {
    mt_gpt_config m = gpt64();
    struct { const char *mesh; int devices, zero, d, f, t; bool sp; mt_remat remat; bool once; } cases[] = {
        {"data=64", 64, 0, 64, 1, 1, false, MT_REMAT_NONE, false},
        {"data=64", 64, 1, 64, 1, 1, false, MT_REMAT_NONE, false},
        {"data=64", 64, 2, 64, 1, 1, false, MT_REMAT_NONE, false},
        {"data=64", 64, 3, 64, 1, 1, false, MT_REMAT_NONE, false},
        {"fsdp=64", 64, 0, 1, 64, 1, false, MT_REMAT_NONE, false},
        {"fsdp=64", 64, 0, 1, 64, 1, false, MT_REMAT_NONE, true},
        {"fsdp=64", 64, 0, 1, 64, 1, false, MT_REMAT_ATTENTION, false},
        {"data=16,tensor=4", 64, 1, 16, 1, 4, true, MT_REMAT_FULL, false},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mt_train_config c = gpt_config(&m, cases[k].mesh, cases[k].devices, cases[k].zero);
        c.sequence_parallel = cases[k].sp;
        c.remat = cases[k].remat;
        c.fsdp_gather = cases[k].once ? 1 : 0;
        mt__plan_mem_chunk ch;
        mt__plan_mem_layout lay;
        device_chunk(&c, cases[k].d, cases[k].f, cases[k].t, &ch, &lay);
        mt__plan_mem_bytes b;
        MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_MESHTRAIN, &lay, &ch, 1, &b));
        char flags[256];
        snprintf(flags, sizeof flags, "--devices %d --mesh %s --zero %d --remat %s%s%s",
                 cases[k].devices, cases[k].mesh, cases[k].zero, mt_remat_name(cases[k].remat),
                 cases[k].sp ? " --sequence-parallel" : "",
                 cases[k].once ? " --fsdp-gather once" : "");
        double ex[4];
        explain_bytes(flags, ex);
        const double got[4] = {b.params, b.grads, b.optimizer, b.activations};
        const char *what[4] = {"parameters", "gradients", "optimizer", "activations"};
        for (int i = 0; i < 4; i++)
            MT_CHECK(got[i] == ex[i], "%s: %s %.0f bytes, explain %.0f", flags, what[i], got[i],
                     ex[i]);
        MT_CHECK(b.temporaries == ch.counts.scratch_bytes &&
                 b.total == b.params + b.grads + b.optimizer + b.activations + b.temporaries,
                 "%s: scratch and total", flags);
    }
}

/* A device of two chunks, each with two microbatches in flight: the
 * chunks' bytes add, activations times their in-flight count. */
MT_TEST(chunks_add_and_refusals) {
    mt__plan_mem_chunk two[2] = {{.layers = 1, .in_flight = 2}, {.layers = 1, .in_flight = 3}};
    two[0].counts = (mt__plan_mem_counts){.param_bytes = 40, .grad_bytes = 40, .optim_bytes = 80,
                                          .arena_bytes = 100, .scratch_bytes = 7};
    two[1].counts = (mt__plan_mem_counts){.param_bytes = 4, .grad_bytes = 4, .optim_bytes = 8,
                                          .arena_bytes = 10, .scratch_bytes = 5};
    mt__plan_mem_layout l = {.data = 1, .fsdp = 1, .tensor = 1};
    mt__plan_mem_bytes b;
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_MESHTRAIN, &l, two, 2, &b));
    /* 44 + 44 + 88 + (200 + 30) + 12 */
    MT_CHECK(b.params == 44 && b.grads == 44 && b.optimizer == 88 && b.activations == 230 &&
             b.temporaries == 12 && b.total == 418, "two chunks: total %g", b.total);
    MT_CHECK_FAILS(mt__plan_mem_device(MT_PLAN_MEMORY_N, &l, two, 2, &b), MT_EINVAL,
                   "convention 6", "meshtrain, mixed16, book, megatron, deepspeed, torchtitan");
    MT_CHECK(b.total == 0, "zeroed on failure");
    MT_CHECK_FAILS(mt__plan_mem_device(MT_PLAN_MEMORY_MESHTRAIN, &l, two, 0, &b), MT_EINVAL,
                   "0 chunks");
    l.tensor = 0;
    MT_CHECK_FAILS(mt__plan_mem_device(MT_PLAN_MEMORY_MESHTRAIN, &l, two, 2, &b), MT_EINVAL,
                   "tensor=0");
    l.tensor = 1;
    l.zero = 4;
    MT_CHECK_FAILS(mt__plan_mem_device(MT_PLAN_MEMORY_MESHTRAIN, &l, two, 2, &b), MT_EINVAL,
                   "zero=4");
    l.zero = 0;
    /* the published formulas need the model's dims once layers are counted */
    MT_CHECK_FAILS(mt__plan_mem_device(MT_PLAN_MEMORY_MIXED16, &l, two, 2, &b), MT_EINVAL,
                   "mixed16", "s=0");
    l.s = 16, l.b = 1, l.h = 64, l.a = 4, l.kv_heads = 8;
    MT_CHECK_FAILS(mt__plan_mem_device(MT_PLAN_MEMORY_BOOK, &l, two, 2, &b), MT_EINVAL,
                   "kv_heads=8");
    l.kv_heads = 0;
    two[1].in_flight = -1;
    MT_CHECK_FAILS(mt__plan_mem_device(MT_PLAN_MEMORY_BOOK, &l, two, 2, &b), MT_EINVAL,
                   "chunk 1", "in-flight");
    two[1].in_flight = 1;
    two[0].counts.param_elems = -5;
    MT_CHECK_FAILS(mt__plan_mem_device(MT_PLAN_MEMORY_BOOK, &l, two, 2, &b), MT_EINVAL,
                   "chunk 0", "-5");
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
