/* test_plan_search.c — the planner's search (mt_plan_search, meshtrain/plan.h):
 * - the layouts it enumerates: every factorisation of the chips into
 *   data x fsdp x tensor x pipe, counted by hand;
 * - the memory of a layout, taken from chunks of 1 and 2 blocks and 1 and 2
 *   sequences a replica, against the program of the whole model built
 *   directly (mt__plan_program_build): exact for parameters, gradients and
 *   optimizer state, within 8% for the planned activations (their
 *   best-fit packing is not linear in blocks: 6% on the fsdp case);
 * - a pipeline's activations count the executor's slots (the microbatches
 *   between a chunk's F and its W at once, read off the schedule by hand);
 * - layers that do not divide into the stages, cut as the trainer cuts them;
 * - a chunk's program is the same under every schedule of as many chunks
 *   (what the program cache's key assumes), built directly under each, and
 *   at every depth: the first, a middle and the last chunk of as many
 *   blocks under 1F1B and interleaved at v = 2 and 3 (the cache builds
 *   them all at v = 2);
 * - a head size of its own (--head-dim) planned as the trainer builds it:
 *   N and PaLM's FLOPs from the q, k, v and o widths, the parameters per
 *   device the program's, Korthikanti's activations from the width NH·HS,
 *   and kv heads fewer than the tensor ranks planned;
 * - refusals name the setting. */
#include "meshtrain.h"
#include "harness.h"
#include "plan/cost.h"
#include "plan/plan_impl.h"

static const char NO_DATA[] = "(plan reads no data)";

static mt_llama_config small_llama(int layers) {
    /* (12 layers: a chunk interpolated from 4 and 8 blocks) */
    mt_llama_config m;
    MT_CHECK_OK(mt_model_config_defaults(MT_MODEL_LLAMA, &m, sizeof m));
    m.dim = 128;
    m.n_layers = layers;
    m.n_heads = 4;
    m.n_kv_heads = 2;
    m.vocab = 512;
    m.max_seq = 64;
    return m;
}

static mt_hardware *h100(void) {
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("h100-sxm", &hw, NULL, 0));
    return hw;
}

/* A request for one layout, every option fixed. */
static mt_plan_request one_layout(const mt_llama_config *m, const mt_hardware *hw,
                                  const char *mesh, int chips, int seqs, int micro) {
    mt_plan_request q = mt_plan_request_defaults();
    q.model = mt_train_defaults();
    q.model.model = MT_MODEL_LLAMA;
    q.model.model_config = m;
    q.model.model_config_size = sizeof *m;
    q.hw = hw;
    q.chips = chips;
    q.seq = 64;
    q.batch_tokens = 64.0 * seqs;
    q.precision = MT_PRECISION_FP32;
    q.remat = MT_REMAT_NONE;
    q.zero = 0;
    q.sequence_parallel = 0;
    q.mesh = mesh;
    q.schedule = MT_SCHEDULE_1F1B;
    q.microbatches = micro;
    return q;
}

/* The one result of a fixed request, feasible or not. */
static mt_plan_result the_result(const mt_plan_request *q) {
    mt_plan_report rep;
    MT_CHECK_OK(mt_plan_search(q, &rep));
    MT_CHECK(rep.n_evaluated == 1, "%s: %d layouts evaluated", q->mesh, rep.n_evaluated);
    mt_plan_result r = rep.n_best ? rep.best[0] : rep.infeasible[0];
    mt_plan_report_free(&rep);
    return r;
}

/* The whole model's chunk programs on device `device`, built directly. */
static void direct(const mt_llama_config *m, const char *mesh_spec, int chips, int B, int accum,
                   int zero, int device, double *params, double *grads, double *arena_one_slot,
                   double *scratch, int *n_chunks) {
    mt_train_config c = mt_train_defaults();
    c.model = MT_MODEL_LLAMA;
    c.model_config = m;
    c.model_config_size = sizeof *m;
    c.data = NO_DATA;
    c.B = B;
    c.T = 64;
    c.accum = accum;
    c.zero = zero;
    c.mesh = mesh_spec;
    c.devices = chips;
    c.schedule = "1f1b";
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create(mesh_spec, chips, &mesh));
    int chunk[8], n = 0, S = 1;
    MT_CHECK_OK(mt_train_pipe_chunks(&c, mesh, device, chunk, 8, &n, &S));
    *params = *grads = *arena_one_slot = *scratch = 0;
    for (int i = 0; i < n; i++) {
        mt__plan_program p;
        MT_CHECK_OK(mt__plan_program_build(&c, mesh, device, chunk[i], S, &p));
        *params += (double)p.param_bytes;
        *grads += (double)p.grad_bytes;
        *arena_one_slot += (double)p.arena_bytes;
        if ((double)p.scratch_bytes > *scratch) *scratch = (double)p.scratch_bytes;
        mt__plan_program_free(&p);
    }
    *n_chunks = n;
    mt_mesh_free(mesh);
}

MT_TEST(memory_from_small_chunks_is_the_whole_models) {
    mt_hardware *hw = h100();
    mt_llama_config m = small_llama(12);
    struct {
        const char *mesh;
        int chips, seqs, micro, zero;
    } cases[] = {
        {"data=1", 1, 7, 1, 0},          /* 7 sequences: interpolated in the batch too */
        {"data=2", 2, 10, 1, 0},         /* 5 a replica */
        {"data=2", 2, 6, 1, 2},          /* ZeRO-2, 3 a replica: built as it is */
        {"fsdp=2", 2, 24, 2, 0},         /* 2 microbatches of 6 a replica */
        {"tensor=2", 2, 5, 1, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mt_plan_request q = one_layout(&m, hw, cases[k].mesh, cases[k].chips, cases[k].seqs,
                                       cases[k].micro);
        q.zero = cases[k].zero;
        mt_plan_result r = the_result(&q);
        double p, g, a, sc;
        int n;
        int dp = 1;
        if (strncmp(cases[k].mesh, "data=", 5) == 0 || strncmp(cases[k].mesh, "fsdp=", 5) == 0)
            dp = cases[k].chips;
        direct(&m, cases[k].mesh, cases[k].chips, cases[k].seqs / cases[k].micro, cases[k].micro,
               cases[k].zero, 0, &p, &g, &a, &sc, &n);
        (void)dp;
        MT_CHECK(r.params == p, "%s zero=%d: parameters %.0f, whole model %.0f", cases[k].mesh,
                 cases[k].zero, r.params, p);
        MT_CHECK(r.grads == g, "%s: gradients %.0f, whole model %.0f", cases[k].mesh, r.grads, g);
        /* AdamW's m and v: two of each stored element; ZeRO-1/2 keep the
           gathered copies beside the shards ZeRO-3 stores, which are the
           optimizer's */
        double stored = p, g3, a3, sc3;
        int n3;
        if (cases[k].zero == 1 || cases[k].zero == 2)
            direct(&m, cases[k].mesh, cases[k].chips, cases[k].seqs / cases[k].micro,
                   cases[k].micro, 3, 0, &stored, &g3, &a3, &sc3, &n3);
        MT_CHECK(r.optimizer == 2 * stored, "%s zero=%d: AdamW %.0f, 2 x stored parameters %.0f",
                 cases[k].mesh, cases[k].zero, r.optimizer, 2 * stored);
        /* the arena's best-fit offsets pack each block and batch a little
           differently: the fsdp case is 6% off (measured), the others under 1% */
        MT_CHECK(fabs(r.activations - a) <= 0.08 * a, "%s zero=%d: activations %.0f, whole "
                 "model %.0f", cases[k].mesh, cases[k].zero, r.activations, a);
    }
    mt_hardware_free(hw);
}

/* 1F1B on p = 2 stages, m = 4: stage 0 runs F0 F1 B0 F2 B1 F3 B2 B3 (two
 * microbatches between F and B at most), stage 1 runs F B F B ... (one):
 * device 0 holds 2 slots of its chunk, and the planner's activations are
 * twice its chunk's one slot. */
MT_TEST(pipeline_activations_count_the_slots) {
    mt_hardware *hw = h100();
    mt_llama_config m = small_llama(6);
    mt_plan_request q = one_layout(&m, hw, "pipe=2", 2, 8, 4);
    mt_plan_result r = the_result(&q);
    double p0, g0, a0, s0, p1, g1, a1, s1;
    int n;
    direct(&m, "pipe=2", 2, 2, 4, 0, 0, &p0, &g0, &a0, &s0, &n);
    direct(&m, "pipe=2", 2, 2, 4, 0, 1, &p1, &g1, &a1, &s1, &n);
    double dev0 = p0 + g0 + 2 * p0 + 2 * a0 + s0, dev1 = p1 + g1 + 2 * p1 + 1 * a1 + s1;
    /* the device that needs most */
    double want_act = dev0 >= dev1 ? 2 * a0 : a1;
    MT_CHECK(fabs(r.activations - want_act) <= 0.01 * want_act, "activations %.0f, want %.0f "
             "(stage 0: 2 x %.0f, stage 1: 1 x %.0f)", r.activations, want_act, a0, a1);
    mt_hardware_free(hw);
}

/* The same with a data axis beside the pipe: the planner's mesh puts the
 * pipe outermost ("pipe=2,data=2", stage 1's first device is 2), and each
 * stage's chunk is built on a device of that stage: the planned device's
 * parameters and activations are the ones the stages' own devices build. */
MT_TEST(pipeline_stages_beside_a_data_axis) {
    mt_hardware *hw = h100();
    mt_llama_config m = small_llama(6);
    mt_plan_request q = one_layout(&m, hw, "data=2,pipe=2", 4, 16, 4);
    mt_plan_result r = the_result(&q);
    MT_CHECK(strcmp(r.mesh, "pipe=2,data=2") == 0, "the planner's mesh: %s", r.mesh);
    double p0, g0, a0, s0, p1, g1, a1, s1;
    int n;
    direct(&m, "pipe=2,data=2", 4, 4, 4, 0, 0, &p0, &g0, &a0, &s0, &n);
    direct(&m, "pipe=2,data=2", 4, 4, 4, 0, 2, &p1, &g1, &a1, &s1, &n);
    MT_CHECK(p0 != p1, "the stages differ (the embedding, the head): %.0f and %.0f", p0, p1);
    double dev0 = p0 + g0 + 2 * p0 + 2 * a0 + s0, dev1 = p1 + g1 + 2 * p1 + 1 * a1 + s1;
    const bool first = dev0 >= dev1;
    MT_CHECK(r.params == (first ? p0 : p1), "parameters %.0f, want stage %d's %.0f", r.params,
             first ? 0 : 1, first ? p0 : p1);
    double want_act = first ? 2 * a0 : a1;
    MT_CHECK(fabs(r.activations - want_act) <= 0.01 * want_act, "activations %.0f, want %.0f",
             r.activations, want_act);
    mt_hardware_free(hw);
}

/* Layers that do not divide into the stages are cut as the trainer cuts
 * them (pipe.c: the first L mod S chunks one block more): 6 layers over
 * pipe=4 are chunks of 2, 2, 1, 1 blocks (the embedding on the first, the
 * head on the last). Each stage's chunk is built directly on its device;
 * 1F1B at m = 4 holds 4, 3, 2, 1 microbatches in flight on stages 0-3, and
 * the planned device is the one that needs most. Fewer layers than chunks
 * are refused, as the trainer refuses them. */
MT_TEST(uneven_stages_are_the_trainers) {
    mt_hardware *hw = h100();
    mt_llama_config m = small_llama(6);
    mt_plan_request q = one_layout(&m, hw, "pipe=4", 4, 8, 4);
    mt_plan_result r = the_result(&q);
    MT_CHECK(r.feasible, "6 layers over pipe=4: %s", r.why);
    double best = -1, want_p = 0, want_a = 0, params[4];
    for (int d = 0; d < 4; d++) {
        double p, g, a, sc;
        int n;
        direct(&m, "pipe=4", 4, 2, 4, 0, d, &p, &g, &a, &sc, &n);
        MT_CHECK(n == 1, "stage %d holds %d chunks", d, n);
        params[d] = p;
        double total = p + g + 2 * p + (4 - d) * a + sc;
        if (total > best) best = total, want_p = p, want_a = (4 - d) * a;
    }
    MT_CHECK(params[1] > params[2], "stage 1's 2 blocks outweigh stage 2's 1: %.0f, %.0f",
             params[1], params[2]);
    MT_CHECK(r.params == want_p, "parameters %.0f, want the fullest stage's %.0f", r.params,
             want_p);
    MT_CHECK(fabs(r.activations - want_a) <= 0.01 * want_a, "activations %.0f, want %.0f",
             r.activations, want_a);
    mt_llama_config three = small_llama(3);
    q = one_layout(&three, hw, "pipe=4", 4, 8, 4);
    r = the_result(&q);
    MT_CHECK(!r.feasible && strstr(r.why, "3 layers do not fill 4 stages"), "3 layers over "
             "pipe=4: %s", r.why);
    mt_hardware_free(hw);
}

/* The program cache keys a chunk by its chunk count, not its schedule
 * (plan/search_impl.h): every schedule of v chunks a device must build the
 * same program for a chunk. Each kind's chunks 0, 1 and the last, built
 * directly on pipe=2 with 4 layers (v = 1: 1f1b, gpipe, zb-h1, zb-h2; v = 2:
 * interleaved, zb-v, dualpipev), against 1f1b's or interleaved's: the same
 * bytes, FLOPs and nodes. */
MT_TEST(a_chunks_program_is_the_same_under_every_schedule) {
    mt_llama_config m = small_llama(4);
    static const char *const kinds[] = {"1f1b", "gpipe", "zb-h1", "zb-h2",
                                        "interleaved", "zb-v", "dualpipev"};
    mt__plan_program ref[2][4];   /* [v - 1][chunk] under 1f1b and interleaved */
    for (int k = 0; k < 7; k++) {
        const int v = k < 4 ? 1 : 2, S = 2 * v;
        mt_train_config c = mt_train_defaults();
        c.model = MT_MODEL_LLAMA;
        c.model_config = &m;
        c.model_config_size = sizeof m;
        c.data = NO_DATA;
        c.B = 2;
        c.T = 64;
        c.accum = 4;   /* dualpipev's 2p */
        c.mesh = "pipe=2";
        c.devices = 2;
        c.schedule = kinds[k];
        c.pipe_chunks = v;
        mt_mesh *mesh = NULL;
        MT_CHECK_OK(mt_mesh_create("pipe=2", 2, &mesh));
        for (int chunk = 0; chunk < S; chunk++) {
            int device = -1;   /* the device the schedule gives the chunk */
            for (int d = 0; d < 2 && device < 0; d++) {
                int ch[8], n = 0, SS = 1;
                MT_CHECK_OK(mt_train_pipe_chunks(&c, mesh, d, ch, 8, &n, &SS));
                for (int i = 0; i < n; i++)
                    if (ch[i] == chunk) device = d;
            }
            MT_CHECK(device >= 0, "%s: chunk %d on no device", kinds[k], chunk);
            mt__plan_program p;
            MT_CHECK_OK(mt__plan_program_build(&c, mesh, device, chunk, S, &p));
            if (k == 0 || k == 4) {
                ref[v - 1][chunk] = p;
                continue;
            }
            const mt__plan_program *r = &ref[v - 1][chunk];
            MT_CHECK(p.n_nodes == r->n_nodes && p.param_bytes == r->param_bytes &&
                     p.grad_bytes == r->grad_bytes && p.arena_bytes == r->arena_bytes &&
                     p.flops[0] == r->flops[0] && p.flops[1] == r->flops[1] &&
                     p.flops[2] == r->flops[2] && p.bytes[0] == r->bytes[0],
                     "%s chunk %d (device %d): %d nodes, %zu param, %zu arena bytes, %g FLOPs; "
                     "%s: %d, %zu, %zu, %g", kinds[k], chunk, device, p.n_nodes, p.param_bytes,
                     p.arena_bytes, p.flops[0] + p.flops[1] + p.flops[2], v == 1 ? "1f1b"
                     : "interleaved", r->n_nodes, r->param_bytes, r->arena_bytes,
                     r->flops[0] + r->flops[1] + r->flops[2]);
            mt__plan_program_free(&p);
        }
        mt_mesh_free(mesh);
    }
    for (int v = 0; v < 2; v++)
        for (int chunk = 0; chunk < 2 * (v + 1); chunk++) mt__plan_program_free(&ref[v][chunk]);
}

/* Chunk `chunk` of L layers cut into 2·v chunks on pipe=2 under `kind` (v
 * a device), built directly as the trainer builds it, into *p. */
static void chunk_program(const mt_llama_config *m, const char *kind, int v, int chunk,
                          mt__plan_program *p) {
    mt_train_config c = mt_train_defaults();
    c.model = MT_MODEL_LLAMA;
    c.model_config = m;
    c.model_config_size = sizeof *m;
    c.data = NO_DATA;
    c.B = 2;
    c.T = 64;
    c.accum = 2;
    c.mesh = "pipe=2";
    c.devices = 2;
    c.schedule = kind;
    c.pipe_chunks = v;
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create("pipe=2", 2, &mesh));
    /* interleaved's device of a chunk: chunk mod p */
    MT_CHECK_OK(mt__plan_program_build(&c, mesh, chunk % 2, chunk, 2 * v, p));
    mt_mesh_free(mesh);
}

/* The cache builds every pipeline's chunk as the chunk of as many blocks
 * in the same role under interleaved at v = 2 (cache.c): the first, a
 * middle and the last chunk of 2 blocks each under 1F1B (v = 1, 4 layers),
 * interleaved at v = 2 (8 layers) and v = 3 (12 layers), tied embeddings
 * or not, are the same program: nodes, bytes and FLOPs. */
MT_TEST(a_chunks_program_is_the_same_at_every_depth) {
    for (int tie = 0; tie <= 1; tie++) {
        mt__plan_program ref[3];   /* v = 2's chunks 0, 1 and 3 */
        mt_llama_config m2 = small_llama(8);
        m2.tie_embeddings = tie;
        chunk_program(&m2, "interleaved", 2, 0, &ref[0]);
        chunk_program(&m2, "interleaved", 2, 1, &ref[1]);
        chunk_program(&m2, "interleaved", 2, 3, &ref[2]);
        static const struct { const char *kind; int v, layers, chunk, role; } other[] = {
            {"1f1b", 1, 4, 0, 0}, {"1f1b", 1, 4, 1, 2},
            {"interleaved", 3, 12, 0, 0}, {"interleaved", 3, 12, 1, 1},
            {"interleaved", 3, 12, 5, 2},
        };
        for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
            mt_llama_config m = small_llama(other[i].layers);
            m.tie_embeddings = tie;
            mt__plan_program p;
            chunk_program(&m, other[i].kind, other[i].v, other[i].chunk, &p);
            const mt__plan_program *r = &ref[other[i].role];
            MT_CHECK(p.n_nodes == r->n_nodes && p.param_bytes == r->param_bytes &&
                     p.grad_bytes == r->grad_bytes && p.arena_bytes == r->arena_bytes &&
                     p.scratch_bytes == r->scratch_bytes && p.flops[0] == r->flops[0] &&
                     p.flops[1] == r->flops[1] && p.flops[2] == r->flops[2] &&
                     p.bytes[0] == r->bytes[0] && p.bytes[1] == r->bytes[1] &&
                     p.bytes[2] == r->bytes[2],
                     "tie %d, %s v=%d chunk %d: %d nodes, %zu param, %zu arena bytes, %g FLOPs; "
                     "interleaved v=2's: %d, %zu, %zu, %g", tie, other[i].kind, other[i].v,
                     other[i].chunk, p.n_nodes, p.param_bytes, p.arena_bytes,
                     p.flops[0] + p.flops[1] + p.flops[2], r->n_nodes, r->param_bytes,
                     r->arena_bytes, r->flops[0] + r->flops[1] + r->flops[2]);
            mt__plan_program_free(&p);
        }
        for (int k = 0; k < 3; k++) mt__plan_program_free(&ref[k]);
    }
}

/* 8 chips, a model of 4 heads (kv 2) and 4 layers, options fixed: the
 * meshes d x f x t x p = 8 with t <= 64 and p <= 4 layers, by hand:
 *   t=1: p=1 d*f=8 (d = 1, 2, 4, 8: 4), p=2 d*f=4 (3), p=4 d*f=2 (2)  -> 9
 *   t=2: p=1 (3), p=2 (2), p=4 (1)                                    -> 6
 *   t=4: p=1 (2), p=2 (1)                                             -> 3
 *   t=8: p=1 (1)                                                      -> 1
 * 19 layouts. tensor=4 and 8 do not divide 2 kv heads: the trainer keeps
 * them whole then (graph.h's mt_attention_gqa), and so does the plan. */
MT_TEST(layouts_are_every_factorisation) {
    mt_hardware *hw = h100();
    mt_llama_config m = small_llama(4);
    mt_plan_request q = one_layout(&m, hw, NULL, 8, 32, 4);
    mt_plan_report rep;
    MT_CHECK_OK(mt_plan_search(&q, &rep));
    MT_CHECK(rep.n_evaluated == 19, "%d layouts evaluated, want 19", rep.n_evaluated);
    mt_plan_report_free(&rep);
    /* the same with the mesh given: 2 kv heads on tensor=4 plan, as train
       runs them (issue 37, finding 11) */
    q.mesh = "data=2,tensor=4";
    mt_plan_result r = the_result(&q);
    MT_CHECK(r.feasible && r.layout.tensor == 4, "data=2,tensor=4: %s", r.why);
    mt_hardware_free(hw);
}

/* The mixed16 convention counts the step's traffic in 16 bits: on tensor=2
 * (fp32 products) the memory-bound ops move half the bytes, so the step's
 * compute shrinks, by at most half, and its MFU rises (the FLOPs do not
 * change); the nodes themselves: test_plan_program's traffic16 case. */
MT_TEST(mixed16_halves_the_traffic) {
    mt_hardware *hw = h100();
    hw->gemm_units = 0;   /* products unquantized: the tiny model's would be FLOP-bound */
    mt_llama_config m = small_llama(4);
    mt_plan_request q = one_layout(&m, hw, "tensor=2", 2, 64, 1);
    mt_plan_result own = the_result(&q);
    q.memory = MT_PLAN_MEMORY_MIXED16;
    mt_plan_result half = the_result(&q);
    MT_CHECK(half.compute < 0.99 * own.compute && half.compute >= 0.5 * own.compute,
             "compute %g s in 16 bits, %g s in fp32: its memory-bound part halves",
             half.compute, own.compute);
    MT_CHECK(half.mfu > own.mfu, "a shorter step, the same FLOPs: MFU %g > %g", half.mfu, own.mfu);
    mt_hardware_free(hw);
}

/* C = 128, NH = 4 heads of 64 (q 256 wide), KV = 2, L = 4, T = 64, V = 512:
 * the model's N counts wq and wo at NH·HS·C, wk and wv at KV·HS·C; the
 * FLOPs a token 6N + 6·L·NH·HS·T (causal: half PaLM's 12·L·NH·HS·T), N less
 * the untied lookup table (the trainer's count); the parameters of
 * tensor=2 are its program's; the mixed16 convention's activations Korthikanti's with the
 * attention's width 256 (by hand below); 2 kv heads over tensor=4 and 1
 * over tensor=2 plan, as the trainer runs them. */
MT_TEST(head_dim_plans_the_trainers_widths) {
    mt_hardware *hw = h100();
    mt_llama_config m = small_llama(4);
    m.head_dim = 64;
    const double C = 128, L = 4, NH = 4, KV = 2, HS = 64, V = 512, T = 64;
    const double F = mt_llama_ffn_dim(&m);   /* Llama's rule on 128: 352 */
    const double N = 2 * V * C + L * (2 * C + 2 * NH * HS * C + 2 * KV * HS * C + 3 * C * F) + C;
    mt_plan_request q = one_layout(&m, hw, "tensor=2", 2, 4, 1);
    mt_plan_report rep;
    MT_CHECK_OK(mt_plan_search(&q, &rep));
    MT_CHECK(rep.model_params == N && N == (double)mt_llama_num_params(&m),
             "N %.0f, %.0f by hand", rep.model_params, N);
    /* the trainer's count (mt_llama_train_flops): the untied lookup table is no product */
    const double per_token = 6 * (N - V * C) + 6 * L * NH * HS * T;
    MT_CHECK(rep.flops_per_token == per_token, "%.17g FLOPs a token, %.17g by hand",
             rep.flops_per_token, per_token);
    MT_CHECK(rep.n_best == 1, "tensor=2: %s", rep.n_infeasible ? rep.infeasible[0].why : "");
    mt_plan_result r = rep.n_best ? rep.best[0] : rep.infeasible[0];
    mt_plan_report_free(&rep);
    /* the layout's MFU counts those FLOPs: 256 tokens on 2 devices */
    const double peak = mt__plan_matmul_peak(hw, mt__plan_dtype_of(MT_PRECISION_FP32));
    MT_CHECK_CLOSE(r.mfu * r.step * 2 * peak, 256 * per_token, 1e-12,
                   "tensor=2: MFU x step x devices x peak");
    double p, g, a, sc;
    int n;
    direct(&m, "tensor=2", 2, 4, 1, 0, 0, &p, &g, &a, &sc, &n);
    MT_CHECK(r.params == p && r.grads == g, "tensor=2: parameters %.0f, gradients %.0f; the "
             "program's %.0f, %.0f", r.params, r.grads, p, g);
    /* Korthikanti's layer at s 64, b 4, h 128, a 4, t 2, the width q =
       a·HS = 256: 10sbh + (2sbq + 4sbq·KV/a + 2sbq + 4·2sbF)/t + 5as²b/t */
    q.memory = MT_PLAN_MEMORY_MIXED16;
    r = the_result(&q);
    const double sb = T * 4, qw = NH * HS;
    const double layer = 10 * sb * C + (2 * sb * qw + 4 * sb * qw * KV / NH + 2 * sb * qw +
                                        4 * 2 * sb * F) / 2 + 5 * NH * T * T * 4 / 2;
    MT_CHECK_CLOSE(r.activations, L * layer, 1e-12, "mixed16 activations of 4 layers");
    q.memory = MT_PLAN_MEMORY_MESHTRAIN;
    q.mesh = "tensor=4";   /* 2 kv heads, whole on every device */
    q.chips = 4;
    r = the_result(&q);
    MT_CHECK(r.feasible, "tensor=4 over KV=2: %s", r.why);
    m.n_kv_heads = 1;
    q.mesh = "tensor=2";
    q.chips = 2;
    r = the_result(&q);
    MT_CHECK(r.feasible, "tensor=2 over KV=1: %s", r.why);
    mt_hardware_free(hw);
}

MT_TEST(refusals_name_the_setting) {
    mt_hardware *hw = h100();
    mt_llama_config m = small_llama(4);
    mt_plan_request q = one_layout(&m, hw, "data=2", 2, 4, 1);
    mt_plan_report rep;
    q.hw = NULL;
    MT_CHECK_FAILS(mt_plan_search(&q, &rep), MT_EINVAL, "--hardware");
    q.hw = hw;
    q.chips = 0;
    MT_CHECK_FAILS(mt_plan_search(&q, &rep), MT_EINVAL, "--chips 0");
    q.chips = 2;
    q.batch_tokens = 100;
    MT_CHECK_FAILS(mt_plan_search(&q, &rep), MT_EINVAL, "--batch-tokens 100", "multiple of 64");
    q.batch_tokens = 256;
    q.mesh = "data=2,stage=1";   /* expert is laid out (test_plan_expert.c) */
    MT_CHECK_FAILS(mt_plan_search(&q, &rep), MT_EINVAL, "'stage'");
    q.mesh = "data=4";
    MT_CHECK_FAILS(mt_plan_search(&q, &rep), MT_EINVAL, "4 devices, more than --chips 2");
    q.mesh = NULL;
    q.model.model = MT_MODEL_MLP;
    MT_CHECK_FAILS(mt_plan_search(&q, &rep), MT_EINVAL, "gpt", "llama");
    mt_hardware_free(hw);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
