/* test_plan_memory_frameworks.c — the planner's memory under the
 * frameworks' conventions (src/plan/memory.c, memory_reserve.c), each
 * against a published closed form computed by hand here:
 * - DEEPSPEED from real programs against DeepSpeed's estimators
 *   (estimate_zero2_model_states_mem_needs: 4Ψ + 16Ψ/N;
 *   estimate_zero3_model_states_mem_needs: 4·largest + 18Ψ/N; the
 *   BF16_Optimizer's 2 + 4 + 12 = 18Ψ without ZeRO);
 * - TORCHTITAN (FSDP2, bf16 param_dtype, fp32 reduce_dtype): 16Ψ/N fp32
 *   states and the bf16 copy plus fp32 gradient of the largest gathered
 *   parameter; 16Ψ under DDP;
 * - a size no storage axis divides: ZeRO's ceil(numel/N) partitions and
 *   FSDP2's ceil(rows/N) rows, parameter by parameter; meshtrain's own
 *   convention refuses it naming the parameter, not "out of memory";
 * - the verdict's margin in GiB, and the runtime's reserve from its sources;
 * - per-stage activations of every schedule against Korthikanti et al.'s
 *   and the zero-bubble papers' in-flight counts. */
#include "meshtrain.h"
#include "harness.h"
#include "plan/memory.h"
#include "plan/search_impl.h"
#include "train_helpers.h"

static const char NO_DATA[] = "(explain reads no data)";
static const double MiB = 1024.0 * 1024.0, GiB = 1024.0 * 1024.0 * 1024.0;

/* The GPT of test_plan_memory_program.c: L=2 C=64 NH=4 maxT=64 V=Vp=256,
 * every parameter dim of which 64 divides; Ψ by hand from its shapes. */
static mt_gpt_config gpt64(void) {
    return (mt_gpt_config){.L = 2, .C = 64, .NH = 4, .maxT = 64, .V = 256, .Vp = 256};
}
static const double PSI = 256 * 64 + 64 * 64 +
    2 * (2 * 64 + 3 * 64 * 64 + 3 * 64 + 64 * 64 + 64 + 2 * 64 + 4 * 64 * 64 + 4 * 64 +
         4 * 64 * 64 + 64) + 2 * 64;
static const double LARGEST = 256 * 64;   /* wte (Vp, C), as large as fc and mlp proj */

/* Device 1's chunk of the GPT on `mesh` (data, fsdp axis sizes) at ZeRO
 * `zero`, B sequences of T = 16 a step, and its layout. */
static void chunk_of(const char *mesh, int devices, int data, int fsdp, int zero, int B,
                     mt__plan_mem_chunk *ch, mt__plan_mem_layout *lay) {
    mt_gpt_config m = gpt64();
    mt_train_config c = mt_train_defaults();
    c.model = MT_MODEL_GPT;
    MT_TEST_MODEL_CONFIG(&c, &m);
    c.B = B;
    c.T = 16;
    c.data = NO_DATA;
    c.mesh = mesh;
    c.devices = devices;
    c.zero = zero;
    mt_mesh *mm = NULL;
    MT_CHECK_OK(mt_mesh_create(mesh, devices, &mm));
    mt__plan_program p;
    MT_CHECK_OK(mt__plan_program_build(&c, mm, 1, 0, 1, &p));
    memset(ch, 0, sizeof *ch);
    mt__plan_mem_counts_of(&p, &ch->counts);
    ch->layers = 2;
    ch->in_flight = 1;
    mt__plan_program_free(&p);
    mt_mesh_free(mm);
    *lay = (mt__plan_mem_layout){.data = data, .fsdp = fsdp, .tensor = 1, .zero = zero,
                                 .s = 16, .b = (double)B / (data * fsdp), .h = 64, .a = 4};
}

/* ======================================================================== */
/* DeepSpeed and torchtitan on sizes that divide                             */
/* ======================================================================== */

MT_TEST(deepspeed_is_its_estimators) {
    const double N = 64;
    /* by hand: stage 0 BF16_Optimizer 18Ψ; 1, 2: 4Ψ + 16Ψ/N; 3: 4·largest + 18Ψ/N
       (16Ψ/64 = 30144 and 18Ψ/64 = 33912: the estimators' int() changes nothing) */
    const double want[4] = {18 * PSI, 4 * PSI + 16 * PSI / N, 4 * PSI + 16 * PSI / N,
                            4 * LARGEST + 18 * PSI / N};
    MT_CHECK(PSI == 120576, "Ψ by hand %g", PSI);
    for (int z = 0; z <= 4; z++) {
        const bool fsdp = z == 4;   /* fsdp=64 frees its copies: ZeRO-3's */
        mt__plan_mem_chunk ch;
        mt__plan_mem_layout lay;
        chunk_of(fsdp ? "fsdp=64" : "data=64", 64, fsdp ? 1 : 64, fsdp ? 64 : 1,
                 fsdp ? 0 : z, 64, &ch, &lay);
        mt__plan_mem_bytes b;
        MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_DEEPSPEED, &lay, &ch, 1, &b));
        const double got = b.params + b.grads + b.optimizer + b.temporaries;
        const double w = want[fsdp ? 3 : z];
        MT_CHECK(got == w, "zero=%d%s: %.0f bytes (%.0f/%.0f/%.0f/%.0f), DeepSpeed's estimate "
                 "%.0f", z, fsdp ? " (fsdp)" : "", got, b.params, b.grads, b.optimizer,
                 b.temporaries, w);
        /* Korthikanti's activations, as mixed16: 2 layers of sbh(34 + 5as/h), b = 1 */
        const double sbh = 16.0 * 1 * 64;
        MT_CHECK_CLOSE(b.activations, 2 * sbh * (34 + 5.0 * 4 * 16 / 64), 1e-14,
                       "zero=%d: activations", z);
    }
}

MT_TEST(torchtitan_is_fsdp2) {
    /* fsdp=64: fp32 shards of parameters, gradients, m and v, 16 bytes an
       element of O = Ψ/64 plus FSDP2's padding: each parameter as a 2-D
       (rows, cols) matrix split in ceil(rows/64) rows; every one's rows
       divide by 64 but the qkv bias (3, 64), 1 row of 64 where meshtrain
       stores 3: 61 more a block. While gathered, the largest parameter's
       bf16 copy and fp32 gradient, 6 bytes an element */
    mt__plan_mem_chunk ch;
    mt__plan_mem_layout lay;
    chunk_of("fsdp=64", 64, 1, 64, 0, 64, &ch, &lay);
    mt__plan_mem_bytes b;
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_TORCHTITAN, &lay, &ch, 1, &b));
    const double O = PSI / 64 + 2 * 61;
    MT_CHECK(b.params == 4 * O && b.grads == 4 * O && b.optimizer == 8 * O,
             "fsdp=64: %.0f/%.0f/%.0f, by hand %.0f each and %.0f", b.params, b.grads,
             b.optimizer, 4 * O, 8 * O);
    MT_CHECK(b.temporaries == 6 * LARGEST, "temporaries %g, by hand %g", b.temporaries,
             6 * LARGEST);
    /* scaled dot-product attention keeps no scores: sbh·34 a layer */
    MT_CHECK_CLOSE(b.activations, 2 * 16.0 * 64 * 34, 1e-14, "SDPA's activations");
    /* DDP (data=64, no ZeRO): 16Ψ whole */
    chunk_of("data=64", 64, 64, 1, 0, 64, &ch, &lay);
    MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_TORCHTITAN, &lay, &ch, 1, &b));
    MT_CHECK(b.params + b.grads + b.optimizer == 16 * PSI && b.temporaries == 0,
             "DDP: %.0f, by hand %.0f", b.params + b.grads + b.optimizer, 16 * PSI);
}

/* ======================================================================== */
/* Sizes that do not divide                                                  */
/* ======================================================================== */

/* The GPT over 3 devices. Only the qkv weight (192, 64) and bias (192)
 * divide by 3 (the trainer splits them, 4096 and 64 a device); every other
 * parameter's dims are 64 or 256 and stay whole. By hand, with c(x) =
 * ceil(x/3): ZeRO stores c(numel) of each, FSDP2 c(dim0) rows. */
static double c3(double x) { return ceil(x / 3); }

MT_TEST(uneven_sizes_are_padded_by_the_frameworks) {
    const double C = 64, V = 256;
    /* unsplit: wte, wpe, lnf (2); a block: ln_1 (2), proj w+b, ln_2 (2), fc w+b, mlp w+b */
    const double unsplit = V * C + C * C + 2 * C +
                           2 * (2 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C);
    const double split = 2 * (4096 + 64);   /* qkv, a third */
    const double zero = c3(V * C) + c3(C * C) + 2 * c3(C) +
                        2 * (2 * c3(C) + c3(C * C) + c3(C) + 2 * c3(C) + c3(4 * C * C) +
                             c3(4 * C) + c3(4 * C * C) + c3(C));
    const double rows = c3(V) * C + c3(C) * C + 2 * c3(C) +
                        2 * (2 * c3(C) + c3(C) * C + c3(C) + 2 * c3(C) + c3(4 * C) * C +
                             c3(4 * C) + c3(C) * 4 * C + c3(C));
    for (int fsdp = 0; fsdp <= 1; fsdp++) {
        mt__plan_mem_chunk ch;
        mt__plan_mem_layout lay;
        chunk_of(fsdp ? "fsdp=3" : "data=3", 3, fsdp ? 1 : 3, fsdp ? 3 : 1, fsdp ? 0 : 3, 48,
                 &ch, &lay);
        const mt__plan_mem_counts *k = &ch.counts;
        MT_CHECK(k->unsplit_elems == unsplit && k->param_elems == unsplit + split,
                 "%s: whole %g of stored %g, by hand %g of %g", fsdp ? "fsdp" : "zero 3",
                 k->unsplit_elems, k->param_elems, unsplit, unsplit + split);
        MT_CHECK(k->unsplit_zero_elems == zero && k->unsplit_rows_elems == rows &&
                 k->rows_pad_elems == 0 && k->unsplit_max_elems == V * C,
                 "shares %g (ZeRO) %g (FSDP2) pad %g max %g, by hand %g %g 0 %g",
                 k->unsplit_zero_elems, k->unsplit_rows_elems, k->rows_pad_elems,
                 k->unsplit_max_elems, zero, rows, V * C);
        /* DeepSpeed ZeRO-3: 18 bytes a partition element, 4 a largest element */
        mt__plan_mem_bytes b;
        MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_DEEPSPEED, &lay, &ch, 1, &b));
        const double O = zero + split;
        MT_CHECK_CLOSE(b.params + b.grads + b.optimizer, 18 * O, 1e-12,
                       "deepspeed: states %g, by hand 18 x %g", b.params + b.grads + b.optimizer,
                       O);
        MT_CHECK(b.temporaries == 4 * V * C, "deepspeed: temporaries %g", b.temporaries);
        /* torchtitan: 16 bytes a padded row element */
        MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_TORCHTITAN, &lay, &ch, 1, &b));
        MT_CHECK_CLOSE(b.params + b.grads + b.optimizer, 16 * (rows + split), 1e-12,
                       "torchtitan: states %g, by hand 16 x %g",
                       b.params + b.grads + b.optimizer, rows + split);
        /* mixed16 counts what the program stores: the whole ones whole */
        MT_CHECK_OK(mt__plan_mem_device(MT_PLAN_MEMORY_MIXED16, &lay, &ch, 1, &b));
        MT_CHECK(b.optimizer == 12 * (unsplit + split), "mixed16: optimizer %g",
                 b.optimizer);
    }
}

/* The case in small: ZeRO-3 over a count that divides no weight of
 * the largest. On a device that holds the padded shards but not the whole
 * weights, deepspeed fits and meshtrain's convention says the sizes do not
 * divide, naming the parameter, its shape and the axis size. */
MT_TEST(uneven_verdicts) {
    mt_gpt_config g = gpt64();
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("h100-sxm", &hw, NULL, 0));
    mt_hardware small = *hw;
    small.hbm_bytes = 1.2e6;   /* meshtrain's fp32 states whole: > 1.5 MB; padded: ~0.5 MB */
    const mt_plan_memory convs[2] = {MT_PLAN_MEMORY_MESHTRAIN, MT_PLAN_MEMORY_DEEPSPEED};
    for (int i = 0; i < 2; i++) {
        mt_plan_request q = mt_plan_request_defaults();
        q.model = mt_train_defaults();
        q.model.model_config = &g;
        q.model.model_config_size = sizeof g;
        q.hw = &small;
        q.chips = 3;
        q.seq = 16;
        q.batch_tokens = 3.0 * 16;
        q.memory = convs[i];
        q.mesh = "data=3";
        /* a chip the reserve's table does not know: the bytes are the states' */
        snprintf(small.name, sizeof small.name, "tiny");
        mt__plan_search s;
        MT_CHECK_OK(mt__plan_search_begin(&s, &q, 3));
        mt_plan_layout l = {.data = 3, .fsdp = 1, .tensor = 1, .pipe = 1, .zero = 3,
                            .remat = MT_REMAT_FULL, .schedule = -1, .microbatches = 1};
        mt_plan_result r;
        MT_CHECK_OK(mt__plan_evaluate(&s, &l, &r));
        if (convs[i] == MT_PLAN_MEMORY_MESHTRAIN) {
            MT_CHECK(!r.feasible && strstr(r.why, "sizes do not divide") &&
                     strstr(r.why, "(256, 64) over data = 3") &&
                     strstr(r.why, "GiB over the tiny's"),
                     "meshtrain: %s", r.why);
            MT_CHECK(r.margin < 0 && r.margin == small.hbm_bytes - r.total, "margin %g",
                     r.margin);
        } else {
            MT_CHECK(r.feasible, "deepspeed pads: %s (%.0f bytes)", r.why, r.total);
            MT_CHECK(r.margin > 0 && r.margin == small.hbm_bytes - r.total, "margin %g",
                     r.margin);
        }
        mt__plan_cache_free(&s);
    }
    mt_hardware_free(hw);
}

/* ======================================================================== */
/* The verdict and the reserve                                               */
/* ======================================================================== */

MT_TEST(verdict_margin_in_gib) {
    double margin;
    char why[256];
    mt__plan_mem_verdict(MT_PLAN_MEMORY_MEGATRON, 100 * GiB, 80e9, "h100-sxm", NULL, &margin,
                         why, sizeof why);
    /* by hand: 80e9 B = 74.51 GiB; over by 100 - 74.5058 = 25.49 GiB */
    MT_CHECK(margin == 80e9 - 100 * GiB, "margin %g", margin);
    MT_CHECK(strstr(why, "out of memory: 100.00 GiB a device, 25.49 GiB over the h100-sxm's "
                         "74.51 GiB") != NULL, "why: %s", why);
    mt__plan_mem_verdict(MT_PLAN_MEMORY_MEGATRON, 70 * GiB, 80e9, "h100-sxm", NULL, &margin,
                         why, sizeof why);
    MT_CHECK(why[0] == '\0' && margin == 80e9 - 70 * GiB, "fits: '%s' margin %g", why, margin);
}

MT_TEST(reserve_from_its_sources) {
    /* h100 (Hopper): CUDA context 723 MiB (PyTorch forum 73021), cuBLASLt workspace
       32 MiB (cuBLAS's cublasSetWorkspace, PyTorch #120925), NCCL 4 MiB x 2
       connections x 32 channels = 256 MiB a communicator, fragmentation 15 % of
       the reserved churn (GMLake): churn x 0.15 / 0.85 */
    const double churn = 10 * GiB;
    const double h100 = 723 * MiB + 32 * MiB + 3 * 256 * MiB + churn * 0.15 / 0.85;
    MT_CHECK_CLOSE(mt__plan_mem_reserve(MT_PLAN_MEMORY_DEEPSPEED, "h100-sxm", 3, churn), h100,
                   1e-12, "h100, 3 communicators");
    const double a100 = 723 * MiB + 4 * MiB + 256 * MiB;
    MT_CHECK_CLOSE(mt__plan_mem_reserve(MT_PLAN_MEMORY_MEGATRON, "a100-80gb", 1, 0), a100,
                   1e-12, "a100, 1 communicator");
    MT_CHECK(mt__plan_mem_reserve(MT_PLAN_MEMORY_TORCHTITAN, "tpu-v5p", 2, churn) == 0,
             "no CUDA runtime on a TPU");
    for (int c = 0; c < 3; c++)
        MT_CHECK(mt__plan_mem_reserve((mt_plan_memory)c, "h100-sxm", 3, churn) == 0,
                 "%s models no framework", mt_plan_memory_name((mt_plan_memory)c));
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
