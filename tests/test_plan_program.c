/* test_plan_program.c — the planner's view of one device's program
 * (src/plan/program.c) and the virtual device context it is built on
 * (mt_ctx_virtual_create, meshtrain/comm.h):
 * - a virtual context answers the coordinate questions as a launched one
 *   does and refuses every collective;
 * - the program built through it, on the shape-only backend, is the one a
 *   launched device compiles on the CPU backend (the same nodes, FLOPs,
 *   parameter, gradient and activation bytes), on data, tensor, fsdp,
 *   ZeRO and pipe layouts;
 * - its element counts equal a hand count of the GPT's parameters, split
 *   as each strategy splits them;
 * - the last device of a 16,384-device mesh builds alone, quickly. */
#include "meshtrain.h"
#include "harness.h"
#include "plan/plan_impl.h"
#include "plan/step.h"
#include "plan_unit_hw.h"
#include "train_helpers.h"

#include <math.h>
#include <time.h>

static const char NO_DATA[] = "(explain reads no data)";

/* The GPT the cases build: L=2 C=64 NH=4, T=16, V=256 (Vp 256). */
static mt_gpt_config gpt(void) {
    return (mt_gpt_config){.L = 2, .C = 64, .NH = 4, .maxT = 16, .V = 256, .Vp = 256};
}

static mt_train_config config(const mt_gpt_config *mc, const char *mesh, int devices) {
    mt_train_config c = mt_train_defaults();
    c.model = MT_MODEL_GPT;
    MT_TEST_MODEL_CONFIG(&c, mc);
    c.B = 8;
    c.T = 16;
    c.data = NO_DATA;
    c.mesh = mesh;
    c.devices = devices;
    return c;
}

/* Hand count of the GPT's parameters (GPT-2's shapes; the head tied):
 * wte Vp·C, wpe maxT·C, per layer ln_1 2C, qkv 3C·C + 3C, proj C·C + C,
 * ln_2 2C, fc 4C·C + 4C, proj 4C·C + C; ln_f 2C. */
static int64_t gpt_params(const mt_gpt_config *m) {
    int64_t C = m->C;
    int64_t layer = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C +
                    4 * C * C + C;
    return (int64_t)m->Vp * C + (int64_t)m->maxT * C + m->L * layer + 2 * C;
}

MT_TEST(virtual_ctx_answers_and_refuses) {
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create("data=4,tensor=8", 32, &mesh));
    mt_ctx *ctx = NULL;
    MT_CHECK_OK(mt_ctx_virtual_create(mesh, 29, &ctx));   /* data=3, tensor=5 */
    mt_axes tensor, data, both;
    MT_CHECK_OK(mt_ctx_axes(ctx, "tensor", &tensor));
    MT_CHECK_OK(mt_ctx_axes(ctx, "data", &data));
    MT_CHECK_OK(mt_ctx_axes(ctx, "data,tensor", &both));
    MT_CHECK(mt_ctx_device(ctx) == 29 && mt_ctx_mesh(ctx) == mesh, "device or mesh");
    MT_CHECK(mt_axis_index(ctx, tensor) == 5 && mt_axis_size(ctx, tensor) == 8, "tensor");
    MT_CHECK(mt_axis_index(ctx, data) == 3 && mt_axis_size(ctx, data) == 4, "data");
    MT_CHECK(mt_axis_index(ctx, both) == 29, "data,tensor rank %d", mt_axis_index(ctx, both));
    MT_CHECK(mt_ctx_process_rank(ctx) == 0, "process rank");
    float x[8] = {0}, y[64];
    MT_CHECK_FAILS(mt_psum(ctx, tensor, x, 8), MT_ESTATE, "virtual", "device 29");
    MT_CHECK_FAILS(mt_all_gather(ctx, tensor, x, y, 8, MT_F32), MT_ESTATE, "virtual");
    MT_CHECK_FAILS(mt_barrier(ctx, data), MT_ESTATE, "virtual");
    mt_ctx_virtual_free(ctx);
    MT_CHECK_FAILS(mt_ctx_virtual_create(mesh, 32, &ctx), MT_EINVAL, "device 32", "0 to 31");
    MT_CHECK(ctx == NULL, "out set on failure");
    mt_ctx_virtual_free(NULL);
    mt_mesh_free(mesh);
}

/* What a launched device compiles on the CPU backend, summarised as the
 * planner's fields are: the reference. */
typedef struct {
    const mt_train_config *cfg;
    int     n_chunks;
    int64_t nodes[64], param_elems[64];
    double  flops[64];
    size_t  param_bytes[64], grad_bytes[64], arena[64];
} launched;

static mt_status launched_device(mt_ctx *ctx, void *arg) {
    launched *L = arg;
    const mt_mesh *mesh = mt_ctx_mesh(ctx);
    int d = mt_ctx_device(ctx), chunk[8], n = 0, S = 1;
    mt_status s = mt_train_pipe_chunks(L->cfg, mesh, d, chunk, 8, &n, &S);
    if (s != MT_OK) return s;
    mt_graph *g = mt_graph_create(), *local = NULL;
    mt_tensor *loss = NULL, *local_loss = NULL;
    mt_partition_opts po;
    bool seeded = false;
    /* the first chunk the device holds */
    s = mt_train_build_chunk_program(L->cfg, mesh, chunk[0], S, g, &loss, &seeded, &po);
    if (s == MT_OK) s = mt_partition(g, loss, ctx, &po, &local, &local_loss);
    mt_graph_free(g);
    if (s == MT_OK)
        s = mt_graph_compile(local, local_loss, &(mt_compile_opts){
            .seed = 1, .seed_from_caller = seeded, .remat = L->cfg->remat,
            .interleave_w = L->cfg->remat != MT_REMAT_NONE, .precision = L->cfg->precision,
            .backend = mt_backend_cpu()});
    if (s == MT_OK) {
        mt_graph_stats st = mt_graph_get_stats(local);
        L->nodes[d] = mt_graph_n_nodes(local);
        L->flops[d] = st.flops_forward + st.flops_backward;
        L->param_bytes[d] = st.param_bytes;
        L->grad_bytes[d] = st.grad_bytes;
        L->arena[d] = st.arena_bytes;
        L->param_elems[d] = st.n_param_elems;
        L->n_chunks = S;
    }
    mt_graph_free(local);
    return s;
}

static void check_against_launch(mt_train_config c, const char *what) {
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create(c.mesh, c.devices, &mesh));
    launched L = {.cfg = &c};
    mt_launch_opts lo = mt_test_launch_opts(c.mesh, c.devices);
    MT_CHECK_OK(mt_launch(&lo, launched_device, &L));
    for (int d = 0; d < c.devices; d++) {
        int chunk[8], n = 0, S = 1;
        MT_CHECK_OK(mt_train_pipe_chunks(&c, mesh, d, chunk, 8, &n, &S));
        mt__plan_program p;
        MT_CHECK_OK(mt__plan_program_build(&c, mesh, d, chunk[0], S, &p));
        double fl = 0;
        for (int i = 0; i < p.n_nodes; i++)
            if (p.nodes[i].cls != MT__PN_COLLECTIVE) fl += p.nodes[i].flops;
        MT_CHECK(p.n_nodes == L.nodes[d], "%s device %d: %d nodes, launched %lld", what, d,
                 p.n_nodes, (long long)L.nodes[d]);
        /* the stats' FLOPs count the collectives' own compute (a collective
         * matmul's products) too: compare like with like */
        double fl_all = 0;
        for (int i = 0; i < p.n_nodes; i++) fl_all += p.nodes[i].flops;
        MT_CHECK_CLOSE(fl_all, L.flops[d], 1e-12, "%s device %d: FLOPs", what, d);
        MT_CHECK(fl <= fl_all, "%s: compute FLOPs above the total", what);
        MT_CHECK(p.param_bytes == L.param_bytes[d] && p.grad_bytes == L.grad_bytes[d],
                 "%s device %d: parameter bytes %zu/%zu, launched %zu/%zu", what, d,
                 p.param_bytes, p.grad_bytes, L.param_bytes[d], L.grad_bytes[d]);
        MT_CHECK(p.arena_bytes == L.arena[d], "%s device %d: arena %zu, launched %zu", what, d,
                 p.arena_bytes, L.arena[d]);
        MT_CHECK(p.param_elems == L.param_elems[d], "%s device %d: %lld parameter elements, "
                 "launched %lld", what, d, (long long)p.param_elems, (long long)L.param_elems[d]);
        MT_CHECK(p.optim_bytes == 8 * (size_t)p.param_elems, "%s: AdamW bytes", what);
        mt__plan_program_free(&p);
    }
    mt_mesh_free(mesh);
}

MT_TEST(program_is_the_launched_one) {
    mt_gpt_config m = gpt();
    check_against_launch(config(&m, "data=2", 2), "data=2");
    check_against_launch(config(&m, "data=2,tensor=2", 4), "data=2,tensor=2");
    check_against_launch(config(&m, "fsdp=4", 4), "fsdp=4");
    mt_train_config z = config(&m, "data=4", 4);
    z.zero = 2;
    check_against_launch(z, "data=4 zero=2");
    mt_train_config sp = config(&m, "tensor=2", 2);
    sp.sequence_parallel = true;
    check_against_launch(sp, "tensor=2 sequence parallel");
    mt_train_config pp = config(&m, "data=2,pipe=2", 4);
    pp.accum = 2;
    check_against_launch(pp, "data=2,pipe=2");
    mt_train_config rf = config(&m, "data=2", 2);
    rf.remat = MT_REMAT_FULL;
    check_against_launch(rf, "data=2 remat full");
}

/* The element counts against the hand count, per strategy. */
MT_TEST(element_counts_match_the_hand_count) {
    mt_gpt_config m = gpt();
    const int64_t psi = gpt_params(&m);
    struct {
        const char *mesh;
        int devices, zero;
        int64_t stored, kept, full, scattered;
    } cases[] = {
        /* data parallel: every gradient all-reduced whole */
        {"data=4", 4, 0, psi, 0, psi, 0},
        /* ZeRO-1 and 2 (the paper's): stored split, the gathered copies kept
           for the step, gradients reduce-scattered once a step */
        {"data=4", 4, 1, psi / 4, psi, 0, psi},
        {"data=4", 4, 2, psi / 4, psi, 0, psi},
        /* ZeRO-3 and fsdp: gathered again in the backward, reduce-scattered */
        {"data=4", 4, 3, psi / 4, 0, 0, psi},
        {"fsdp=4", 4, 0, psi / 4, 0, 0, psi},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mt_train_config c = config(&m, cases[k].mesh, cases[k].devices);
        c.zero = cases[k].zero;
        mt_mesh *mesh = NULL;
        MT_CHECK_OK(mt_mesh_create(c.mesh, c.devices, &mesh));
        mt__plan_program p;
        MT_CHECK_OK(mt__plan_program_build(&c, mesh, 1, 0, 1, &p));
        const char *w = cases[k].mesh;
        MT_CHECK(p.param_global_elems == psi, "%s zero=%d: Ψ %lld, hand %lld", w, c.zero,
                 (long long)p.param_global_elems, (long long)psi);
        MT_CHECK(p.param_elems == cases[k].stored, "%s zero=%d: stored %lld, want %lld", w,
                 c.zero, (long long)p.param_elems, (long long)cases[k].stored);
        MT_CHECK(p.gathered_kept_elems == cases[k].kept, "%s zero=%d: kept %lld, want %lld", w,
                 c.zero, (long long)p.gathered_kept_elems, (long long)cases[k].kept);
        MT_CHECK(p.grad_reduced_full_elems == cases[k].full, "%s zero=%d: all-reduced %lld, "
                 "want %lld", w, c.zero, (long long)p.grad_reduced_full_elems,
                 (long long)cases[k].full);
        MT_CHECK(p.grad_scattered_elems == cases[k].scattered, "%s zero=%d: scattered %lld, "
                 "want %lld", w, c.zero, (long long)p.grad_scattered_elems,
                 (long long)cases[k].scattered);
        /* every compute node's FLOPs land in one phase */
        double fl = 0;
        for (int i = 0; i < p.n_nodes; i++)
            if (p.nodes[i].cls != MT__PN_COLLECTIVE) fl += p.nodes[i].flops;
        MT_CHECK_CLOSE(p.flops[0] + p.flops[1] + p.flops[2], fl, 1e-12, "%s: phases", w);
        mt__plan_program_free(&p);
        mt_mesh_free(mesh);
    }
}

/* Attention's products carry their sequence length (the planner costs them
 * by it, plan/cost.h): on tensor=2 (heads split, T whole) at T=16, the GPT's
 * L attention nodes and L gradients are products at 16, and no other node
 * has a length. */
MT_TEST(attention_nodes_carry_their_sequence) {
    mt_gpt_config m = gpt();
    mt_train_config c = config(&m, "tensor=2", 2);
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create(c.mesh, c.devices, &mesh));
    mt__plan_program p;
    MT_CHECK_OK(mt__plan_program_build(&c, mesh, 1, 0, 1, &p));
    int at_T = 0, other = 0;
    for (int i = 0; i < p.n_nodes; i++) {
        if (p.nodes[i].attention_seq == c.T && p.nodes[i].cls == MT__PN_MATMUL) at_T++;
        else if (p.nodes[i].attention_seq != 0) other++;
    }
    MT_CHECK(at_T == 2 * m.L && other == 0, "%d attention products at T=%d (want %d), %d other "
             "nodes with a length", at_T, c.T, 2 * m.L, other);
    mt__plan_program_free(&p);
    mt_mesh_free(mesh);
}

/* Traffic in 16 bits (the 16-bit conventions): every node's bytes halve;
 * every collective of this fp32 program moves 2 bytes an element where it
 * moved 4 (half its bytes), but a gradient's reduction, at a framework's
 * fp32 (grad_width 4: Megatron-LM's main gradients), keeps its 4; FLOPs
 * stay. ZeRO-3 on data=2,tensor=2 has gathers, gradient reductions and the
 * activations' all-reduces. A program that reduces in bf16 (c16: the
 * planner's bf16 plans, plan/cache.c) has its reductions' bytes counted at
 * 2 an element by the trainer's listing already (graph/listing.c): in 16
 * bits they move the same bytes as the fp32 program's (half its fp32
 * bytes, or all four at grad_width 4), not half of them again. */
MT_TEST(traffic16_moves_16_bits) {
    mt_gpt_config m = gpt();
    mt_train_config c = config(&m, "data=2,tensor=2", 4);
    c.zero = 3;
    mt_train_config c16 = c;
    c16.grad_reduce = MT_PRECISION_BF16;
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create(c.mesh, c.devices, &mesh));
    for (int grad_width = 2; grad_width <= 4; grad_width += 2) {
        mt__plan_program p, h, r;
        MT_CHECK_OK(mt__plan_program_build(&c, mesh, 1, 0, 1, &p));
        MT_CHECK_OK(mt__plan_program_build(&c, mesh, 1, 0, 1, &h));
        MT_CHECK_OK(mt__plan_program_build(&c16, mesh, 1, 0, 1, &r));
        MT_CHECK(r.n_nodes == p.n_nodes, "%d nodes with bf16 reductions, %d in fp32",
                 r.n_nodes, p.n_nodes);
        mt__plan_program_traffic16(&h, grad_width, false);
        mt__plan_program_traffic16(&r, grad_width, false);
        int kept = 0, halved = 0;
        for (int i = 0; i < p.n_nodes; i++) {
            const mt__plan_node *a = &p.nodes[i], *b = &h.nodes[i];
            MT_CHECK(b->bytes == a->bytes / 2 && b->flops == a->flops, "node %d: bytes %g -> "
                     "%g, FLOPs %g -> %g", i, a->bytes, b->bytes, a->flops, b->flops);
            if (a->cls != MT__PN_COLLECTIVE || a->comm_bytes == 0) continue;
            MT_CHECK(a->wire_width == 4, "node %d: an fp32 program moves 4 bytes an element, "
                     "got %d", i, a->wire_width);
            const bool fp32 = grad_width == 4 && a->grad_reduce;
            MT_CHECK(b->comm_bytes == (fp32 ? a->comm_bytes : a->comm_bytes / 2),
                     "grad_width=%d node %d: comm %g -> %g", grad_width, i, a->comm_bytes,
                     b->comm_bytes);
            kept += fp32, halved += !fp32;
            if (a->grad_reduce && i < r.n_nodes)
                MT_CHECK(r.nodes[i].comm_bytes == b->comm_bytes, "grad_width=%d node %d: %g "
                         "bytes reduced in bf16, %g from fp32", grad_width, i,
                         r.nodes[i].comm_bytes, b->comm_bytes);
        }
        MT_CHECK(halved > 0 && (kept > 0) == (grad_width == 4),
                 "grad_width=%d: %d collectives halved, %d kept", grad_width, halved, kept);
        mt__plan_program_free(&p);
        mt__plan_program_free(&h);
        mt__plan_program_free(&r);
    }
    mt_mesh_free(mesh);
}

/* DeepSpeed's ZeRO-3 before 0.5.5 (mt__plan_program_list_collectives) on
 * data=2, GPT C=256 (V 256, T 16): a parameter under 100,000 elements is
 * persistent, never gathered; of each layer's, the QKV weight (3C² =
 * 196,608) and the MLP's two (4C² = 262,144) are gathered (the attention's
 * projection, C² = 65,536, the embeddings, 65,536 and 4,096, the biases and
 * norms are not): 3L list-form gathers in the forward, blocking
 * (param_gather cleared), each with its rank copies; every gradient's
 * reduce-scatter has them too; nothing else does. */
MT_TEST(deepspeed_list_collectives) {
    mt_gpt_config m = gpt();
    m.C = 256;
    mt_train_config c = config(&m, "data=2", 2);
    c.zero = 3;
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create(c.mesh, c.devices, &mesh));
    mt__plan_program p, h;
    MT_CHECK_OK(mt__plan_program_build(&c, mesh, 1, 0, 1, &p));
    mt__plan_program_traffic16(&p, 2, false);
    MT_CHECK_OK(mt__plan_program_build(&c, mesh, 1, 0, 1, &h));
    mt__plan_program_traffic16(&h, 2, false);
    mt__plan_program_list_collectives(&h);
    const double C2 = 256.0 * 256.0;
    int listed = 0, kept = 0, scatters = 0;
    for (int i = 0; i < p.n_nodes; i++) {
        const mt__plan_node *a = &p.nodes[i], *b = &h.nodes[i];
        const double elems = a->comm_bytes / 2;
        if (a->param_gather && a->phase == 'F') {
            if (elems < 100000) {
                MT_CHECK(b->comm_bytes == 0 && !b->rank_copies, "node %d: %g elements "
                         "gathered (%g bytes)", i, elems, b->comm_bytes);
                kept++;
            } else {
                MT_CHECK(elems == 3 * C2 || elems == 4 * C2, "node %d: %g elements", i, elems);
                MT_CHECK(!b->param_gather && b->rank_copies && b->comm_bytes == a->comm_bytes,
                         "node %d: a list-form blocking gather", i);
                listed++;
            }
        } else if (a->grad_reduce && a->kind == MT__PC_REDUCE_SCATTER && !a->once) {
            MT_CHECK(b->rank_copies && b->comm_bytes == a->comm_bytes, "node %d: scatter", i);
            scatters++;
        } else if (a->phase == 'F' || !a->param_gather) {
            MT_CHECK(!b->rank_copies && b->comm_bytes == a->comm_bytes &&
                     b->param_gather == a->param_gather, "node %d: changed", i);
        }
    }
    MT_CHECK(listed == 3 * m.L && kept > 0 && scatters > 0, "%d list-form gathers (want %d), "
             "%d persistent, %d scatters", listed, 3 * m.L, kept, scatters);
    /* the persistent ones, gathered again after each step: the embeddings
       (V·C, T·C), the final norm (2C) and each layer's C² + 13C in 9 */
    const double C = m.C, persist = m.Vp * C + m.maxT * C + 2 * C + m.L * (C * C + 13 * C);
    MT_CHECK(h.ds_persist_params == 4 + 9 * m.L && h.ds_persist_bytes == 2 * persist,
             "%g persistent parameters (want %d) of %g bytes (want %g)", h.ds_persist_params,
             4 + 9 * m.L, h.ds_persist_bytes, 2 * persist);
    mt__plan_program_free(&p);
    mt__plan_program_free(&h);
    mt_mesh_free(mesh);
}

/* ZeRO-3 on data=3, the GPT of gpt() at L=2: 3 divides only the QKV
 * projection's 3C (its weight and bias are split); every other parameter
 * is kept whole by the partitioner. As DeepSpeed pads (MT__PLAN_PAD_FLAT)
 * a parameter of n elements is gathered and its gradient reduce-scattered
 * as P·ceil(n/P) elements, 4 bytes each (f32), and AdamW steps ceil(n/P):
 * summed by hand over the GPT's shapes (gpt_params' list). Gathered in the
 * forward before each parameter's first reader; again in the backward
 * (resharded) each weight the backward reads: the products' weights for
 * dX, the norms' scales, the tied table. MT__PLAN_PAD_NONE leaves the
 * trainer's program as built. */
static double pad3(double n) { return 3 * ceil(n / 3); }

MT_TEST(unsplit_parameters_padded_as_deepspeed) {
    mt_gpt_config m = gpt();
    mt_train_config c = config(&m, "data=3", 3);
    c.B = 12;
    c.zero = 3;
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create(c.mesh, c.devices, &mesh));
    mt__plan_program p, q;
    MT_CHECK_OK(mt__plan_program_build(&c, mesh, 1, 0, 1, &p));
    MT_CHECK_OK(mt__plan_program_build(&c, mesh, 1, 0, 1, &q));
    const int built = q.n_nodes;
    MT_CHECK_OK(mt__plan_program_pad_unsplit(&q, MT__PLAN_PAD_NONE));
    MT_CHECK(q.n_nodes == built && !q.unsplit_uses && q.pad_unstored_elems == 0, "NONE changed "
             "the program: %d nodes of %d", q.n_nodes, built);
    MT_CHECK_OK(mt__plan_program_pad_unsplit(&p, MT__PLAN_PAD_FLAT));
    const double C = m.C, L = m.L, qkv = 3 * C * C + 3 * C;   /* split: gathered as they are */
    /* whole: wte, wpe, ln_f; a layer's norms, the projection, the MLP */
    const double glob[] = {m.Vp * C, m.maxT * C, C, C};
    const double layer[] = {C, C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
    double fwd = 0, bwd = 0, share = 0;
    for (int i = 0; i < 4; i++) fwd += pad3(glob[i]), share += ceil(glob[i] / 3);
    for (int i = 0; i < 10; i++) fwd += L * pad3(layer[i]), share += L * ceil(layer[i] / 3);
    fwd += L * qkv;
    share += L * qkv / 3;
    bwd = pad3(m.Vp * C) + pad3(C) + L * (2 * pad3(C) + pad3(C * C) + 2 * pad3(4 * C * C) + 3 * C * C);
    double gathered[2] = {0, 0}, scattered = 0;
    int n_gathers[2] = {0, 0}, n_scatters = 0, n_reduced = 0;
    for (int i = 0; i < p.n_nodes; i++) {
        const mt__plan_node *n = &p.nodes[i];
        if (n->cls != MT__PN_COLLECTIVE) continue;
        if (n->param_gather) {
            gathered[n->phase == 'B'] += n->comm_bytes;
            n_gathers[n->phase == 'B']++;
        } else if (n->grad_reduce && n->kind == MT__PC_REDUCE_SCATTER) {
            scattered += n->comm_bytes;
            n_scatters++;
        } else if (n->grad_reduce) {
            n_reduced++;
        }
    }
    const int n_params = 4 + 12 * m.L;
    MT_CHECK(n_gathers[0] == n_params && gathered[0] == 4 * fwd, "forward: %d gathers of %g "
             "bytes (want %d of %g)", n_gathers[0], gathered[0], n_params, 4 * fwd);
    MT_CHECK(n_gathers[1] == 2 + 6 * m.L && gathered[1] == 4 * bwd, "backward: %d gathers of %g "
             "bytes (want %d of %g)", n_gathers[1], gathered[1], 2 + 6 * m.L, 4 * bwd);
    MT_CHECK(n_scatters == n_params && scattered == 4 * fwd && n_reduced == 0, "%d scatters of "
             "%g bytes (want %d of %g), %d all-reduces left", n_scatters, scattered, n_params,
             4 * fwd, n_reduced);
    /* AdamW on the shares */
    mt_hardware hw = unit_hw();
    mt__plan_comm_keys keys = {0};
    mt__plan_chunk_time ct;
    MT_CHECK_OK(mt__plan_chunk_time_of(&hw, mesh, MT_PRECISION_FP32, &p, 0, &keys, &ct));
    MT_CHECK(ct.stored_elems == share, "AdamW over %g elements (want %g)", ct.stored_elems, share);
    mt__plan_program_free(&p);
    mt__plan_program_free(&q);
    mt_mesh_free(mesh);
}

/* ZeRO-2 on data=3 (two microbatches): the split parameters are gathered
 * and their gradients reduce-scattered once a step, kept whole between;
 * padded, so are the others: every gather and reduce-scatter once, in the
 * forward only, 4 x the padded sum of the ZeRO-3 case each. */
MT_TEST(unsplit_parameters_padded_once_under_zero2) {
    mt_gpt_config m = gpt();
    mt_train_config c = config(&m, "data=3", 3);
    c.B = 12;
    c.zero = 2;
    c.accum = 2;
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create(c.mesh, c.devices, &mesh));
    mt__plan_program p;
    MT_CHECK_OK(mt__plan_program_build(&c, mesh, 1, 0, 1, &p));
    MT_CHECK_OK(mt__plan_program_pad_unsplit(&p, MT__PLAN_PAD_FLAT));
    const double C = m.C, L = m.L;
    const double sizes[] = {m.Vp * C, m.maxT * C, C, C};
    const double layer[] = {C, C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
    double padded = L * (3 * C * C + 3 * C), gathered = 0, scattered = 0;
    for (int i = 0; i < 4; i++) padded += pad3(sizes[i]);
    for (int i = 0; i < 10; i++) padded += L * pad3(layer[i]);
    int n_gathers = 0, n_scatters = 0, other = 0;
    for (int i = 0; i < p.n_nodes; i++) {
        const mt__plan_node *n = &p.nodes[i];
        if (n->cls != MT__PN_COLLECTIVE || !(n->param_gather || n->grad_reduce)) continue;
        if (n->param_gather && n->once && n->phase == 'F')
            gathered += n->comm_bytes, n_gathers++;
        else if (n->grad_reduce && n->once && n->kind == MT__PC_REDUCE_SCATTER)
            scattered += n->comm_bytes, n_scatters++;
        else
            other++;
    }
    const int n_params = 4 + 12 * m.L;
    MT_CHECK(n_gathers == n_params && gathered == 4 * padded && n_scatters == n_params &&
             scattered == 4 * padded && other == 0, "%d gathers of %g bytes, %d scatters of "
             "%g (want %d of %g each), %d others", n_gathers, gathered, n_scatters, scattered,
             n_params, 4 * padded, other);
    mt__plan_program_free(&p);
    mt_mesh_free(mesh);
}

/* The same GPT on data=2,fsdp=3 (HSDP: parameters stored over fsdp, the
 * gradients reduced over data too). Padded flat, an unsplit parameter's
 * gradient is all-reduced whole over data and then reduce-scattered over
 * fsdp, as the partitioner reduces the split QKV's: every parameter one of
 * each, none left all-reduced over data,fsdp. Padded as FSDP2 does
 * (MT__PLAN_PAD_ROWS), the forward gathers 3·ceil(rows/3)·cols elements of
 * each (the MLP's two weights are (C, 4C) and (4C, C), in either order). */
static double rows3(double rows, double cols) { return 3 * ceil(rows / 3) * cols; }

MT_TEST(unsplit_parameters_padded_hsdp_and_rows) {
    mt_gpt_config m = gpt();
    mt_train_config c = config(&m, "data=2,fsdp=3", 6);
    c.B = 12;
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create(c.mesh, c.devices, &mesh));
    mt_axes data, fsdp;
    MT_CHECK_OK(mt_mesh_axes(mesh, "data", &data));
    MT_CHECK_OK(mt_mesh_axes(mesh, "fsdp", &fsdp));
    const double C = m.C, L = m.L, qkv = 3 * C * C + 3 * C;
    const int n_params = 4 + 12 * m.L;
    mt__plan_program p;
    MT_CHECK_OK(mt__plan_program_build(&c, mesh, 5, 0, 1, &p));
    MT_CHECK_OK(mt__plan_program_pad_unsplit(&p, MT__PLAN_PAD_FLAT));
    double whole = gpt_params(&m), padded = L * qkv;   /* fsdp's padded elements */
    const double sizes[] = {m.Vp * C, m.maxT * C, C, C};
    const double layer[] = {C, C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C};
    for (int i = 0; i < 4; i++) padded += pad3(sizes[i]);
    for (int i = 0; i < 10; i++) padded += L * pad3(layer[i]);
    double over_data = 0, scattered = 0;
    int n_data = 0, n_scatter = 0, n_both = 0;
    for (int i = 0; i < p.n_nodes; i++) {
        const mt__plan_node *n = &p.nodes[i];
        if (n->cls != MT__PN_COLLECTIVE || !n->grad_reduce) continue;
        if (n->kind == MT__PC_ALL_REDUCE && !memcmp(&n->axes, &data, sizeof data))
            over_data += n->comm_bytes, n_data++;
        else if (n->kind == MT__PC_REDUCE_SCATTER && !memcmp(&n->axes, &fsdp, sizeof fsdp))
            scattered += n->comm_bytes, n_scatter++;
        else
            n_both++;
    }
    MT_CHECK(n_data == n_params && over_data == 4 * whole, "%d all-reduces over data of %g "
             "bytes (want %d of %g)", n_data, over_data, n_params, 4 * whole);
    MT_CHECK(n_scatter == n_params && scattered == 4 * padded && n_both == 0, "%d "
             "reduce-scatters over fsdp of %g bytes (want %d of %g), %d other reductions",
             n_scatter, scattered, n_params, 4 * padded, n_both);
    mt__plan_program_free(&p);
    MT_CHECK_OK(mt__plan_program_build(&c, mesh, 5, 0, 1, &p));
    MT_CHECK_OK(mt__plan_program_pad_unsplit(&p, MT__PLAN_PAD_ROWS));
    double rows = rows3(m.Vp, C) + rows3(m.maxT, C) + 2 * pad3(C) +
                  L * (4 * pad3(C) + rows3(C, C) + pad3(C) + rows3(C, 4 * C) + rows3(4 * C, C) +
                       pad3(4 * C) + pad3(C) + qkv);
    double gathered = 0;
    for (int i = 0; i < p.n_nodes; i++)
        if (p.nodes[i].param_gather && p.nodes[i].phase == 'F') gathered += p.nodes[i].comm_bytes;
    MT_CHECK(gathered == 4 * rows, "FSDP2: %g bytes gathered (want %g)", gathered, 4 * rows);
    mt__plan_program_free(&p);
    mt_mesh_free(mesh);
}

/* A GPT-3-sized layer of a 16,384-device mesh, built for its last device
 * alone: no thread per device, no buffer. */
MT_TEST(one_device_of_a_huge_mesh) {
    mt_gpt_config m = {.L = 2, .C = 12288, .NH = 96, .maxT = 2048, .V = 51200, .Vp = 51200};
    mt_train_config c = config(&m, "data=64,fsdp=32,tensor=8", 16384);
    c.B = 2048;
    c.T = 2048;
    mt_mesh *mesh = NULL;
    MT_CHECK_OK(mt_mesh_create(c.mesh, c.devices, &mesh));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    mt__plan_program p;
    MT_CHECK_OK(mt__plan_program_build(&c, mesh, 16383, 0, 1, &p));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    MT_CHECK(s < 20, "built in %.1f s", s);
    MT_CHECK(p.param_global_elems == gpt_params(&m), "Ψ %lld, hand %lld",
             (long long)p.param_global_elems, (long long)gpt_params(&m));
    /* stored over fsdp=32 and tensor=8 where the model splits it */
    MT_CHECK(p.param_elems < p.param_global_elems / 32, "stored %lld of %lld",
             (long long)p.param_elems, (long long)p.param_global_elems);
    mt__plan_program_free(&p);
    mt_mesh_free(mesh);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
