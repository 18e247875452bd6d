/* test_plan_step.c — one training step's time (src/plan/step.c,
 * step_phase.c) on hand-built programs and a hand-made system, each
 * expected time worked out by hand below, and on a real GPT program whose
 * forward is checked against its nodes' rooflines summed here.
 *
 * The hand-made system ("unit"): bf16 peak 4e12 FLOP/s at gemm_fraction
 * 0.5, so a matrix product of F FLOPs takes F / 2e12 s; HBM 1e11 B/s at
 * hbm_fraction 0.5, so B bytes take B / 5e10 s; one switch level, link
 * 1e10 B/s, 1 link, collective_fraction 0.5: a device's egress W = 5e9 B/s.
 * Over 2 devices through a switch (nccl-tests' ring, PLANNER.md 2.3):
 * all-gather = reduce-scatter = V (2-1)/2 / W = V / 1e10 s, all-reduce
 * twice that, V / 5e9 s. The latency (1e-9 s) is below every collective
 * here. AdamW under bf16: 32 + 6 = 38 bytes a stored element (step.h). */
#include "meshtrain.h"
#include "harness.h"
#include "plan/step.h"
#include "plan_unit_hw.h"
#include "meshtrain/backend.h"
#include "meshtrain/partition.h"
#include "train_helpers.h"

/* A GPT of config *mc (kept by the result) planned at batch B, T 16, on mesh. */
static mt_train_config tiny_gpt(mt_gpt_config *mc, int B, const char *mesh, int devices) {
    mt_train_config c = mt_train_defaults();
    c.model = MT_MODEL_GPT;
    MT_TEST_MODEL_CONFIG(&c, mc);
    c.B = B;
    c.T = 16;
    c.data = "(the planner reads no data)";
    c.mesh = mesh;
    c.devices = devices;
    return c;
}

/* Nodes. */
static mt__plan_node mm(char ph, double flops) {
    return (mt__plan_node){.phase = ph, .cls = MT__PN_MATMUL, .flops = flops, .bytes = 1e6};
}
static mt__plan_node vec(char ph, double bytes) {
    return (mt__plan_node){.phase = ph, .cls = MT__PN_VECTOR, .flops = 0, .bytes = bytes};
}
static mt__plan_node coll(const mt_mesh *mesh, char ph, mt__plan_coll kind, const char *axes,
                          double bytes) {
    mt__plan_node n = {.phase = ph, .cls = MT__PN_COLLECTIVE, .kind = kind, .comm_bytes = bytes};
    MT_CHECK_OK(mt_mesh_axes(mesh, axes, &n.axes));
    return n;
}
static mt__plan_node grad(const mt_mesh *mesh, mt__plan_coll kind, const char *axes, double b) {
    mt__plan_node n = coll(mesh, 'W', kind, axes, b);
    n.grad_reduce = true;
    return n;
}
static mt__plan_node gather(const mt_mesh *mesh, char ph, const char *axes, double b) {
    mt__plan_node n = coll(mesh, ph, MT__PC_ALL_GATHER, axes, b);
    n.param_gather = true;
    return n;
}

/* One device's step of a one-program layout. */
static mt__plan_step_result step_of(const mt_hardware *hw, const mt_mesh *mesh,
                                    mt__plan_node *nodes, int n, int64_t elems, int m,
                                    mt__plan_reduce reduce, const mt__plan_model *model) {
    mt__plan_program p = {.n_nodes = n, .nodes = nodes, .param_elems = elems};
    mt__plan_step_in in = {.hw = hw, .mesh = mesh, .precision = MT_PRECISION_BF16,
                           .programs = &p, .stages = 1, .chunks = 1, .microbatches = m,
                           .reduce = reduce};
    if (model) in.model = *model;
    mt__plan_step_result r;
    MT_CHECK_OK(mt__plan_step(&in, &r));
    /* the accounting identity (step.h) */
    MT_CHECK_CLOSE(r.compute + r.comm_exposed + r.bubble + r.optimizer, r.step, 1e-12,
                   "compute + exposed + bubble + optimizer = step");
    return r;
}

static mt_mesh *mesh_of(const char *spec, int n) {
    mt_mesh *m = NULL;
    MT_CHECK_OK(mt_mesh_create(spec, n, &m));
    return m;
}

static const mt__plan_step_comm *comm_named(const mt__plan_step_result *r, const char *label) {
    for (int k = 0; k < r->n_comm; k++)
        if (strcmp(r->comm[k].label, label) == 0) return &r->comm[k];
    MT_CHECK(false, "no collective '%s' among %d", label, r->n_comm);
    return NULL;
}

/* F: a product of 4e12 FLOPs (2 s; its 1e6 bytes 2e-5 s); B and W 8e12
 * each (4 s); 1e8 stored elements: AdamW 1e8 x 38 / 5e10 = 0.076 s. Step
 * 10.076 s, FLOP-bound 10 s. MFU: N = 1e9, L 2, H 4, Q 8, T 16:
 * 6N + 6·L·H·Q·T (causal attention half PaLM's 12·L·H·Q·T) = 6e9 +
 * 6·2·4·8·16 = 6,000,006,144 FLOPs a token; 1000 tokens on 1 device at the
 * 4e12 peak: 6.000006144e12 / (10.076 x 4e12) = 0.148869...; HFU
 * PaLM's, MFU plus the recomputation's share: nothing recomputed, = MFU. */
MT_TEST(compute_bound_and_mfu) {
    mt_hardware hw = unit_hw();
    mt_mesh *mesh = mesh_of("data=1", 1);
    mt__plan_node n[] = {mm('F', 4e12), mm('B', 8e12), mm('W', 8e12)};
    mt__plan_model md = {.n_params = 1e9, .layers = 2, .heads = 4, .head_dim = 8, .seq = 16,
                         .tokens = 1000};
    mt__plan_step_result r = step_of(&hw, mesh, n, 3, 100000000, 1, MT__PLAN_REDUCE_EACH, &md);
    MT_CHECK_CLOSE(r.step, 10.076, 1e-9, "step");
    MT_CHECK_CLOSE(r.flop_bound, 10, 1e-9, "FLOP-bound");
    MT_CHECK_CLOSE(r.optimizer, 0.076, 1e-9, "AdamW");
    MT_CHECK_CLOSE(r.phase[0], 2, 1e-12, "F");
    MT_CHECK(r.bound == MT__PLAN_BOUND_COMPUTE && strstr(r.reason, "compute"), "bound: %s",
             r.reason);
    MT_CHECK_CLOSE(r.flops_per_token, 6000006144.0, 1e-12, "FLOPs a token");
    MT_CHECK_CLOSE(r.mfu, 6.000006144e12 / (10.076 * 4e12), 1e-12, "MFU");
    MT_CHECK_CLOSE(r.hfu, r.mfu, 1e-12, "HFU without recomputation");
    mt_mesh_free(mesh);
}

/* The same program with 2e12 of B's 8e12 FLOPs a recomputed forward: the
 * step is the same 10.076 s, MFU the same; HFU PaLM's, the model's count
 * plus the recomputation at its share of the FLOPs run: MFU x 2e13 /
 * (2e13 - 2e12) = 0.148869 x 10/9 = 0.165410... (the FLOPs run over the
 * peak, 2e13 / (10.076 x 4e12) = 0.496, would put it below MFU wherever
 * the model's count is more than the program runs: issue 40). */
MT_TEST(hfu_counts_the_recomputation) {
    mt_hardware hw = unit_hw();
    mt_mesh *mesh = mesh_of("data=1", 1);
    mt__plan_node n[] = {mm('F', 4e12), mm('B', 8e12), mm('W', 8e12)};
    mt__plan_program p = {.n_nodes = 3, .nodes = n, .param_elems = 100000000,
                          .flops_recompute = 2e12};
    mt__plan_step_in in = {.hw = &hw, .mesh = mesh, .precision = MT_PRECISION_BF16,
                           .programs = &p, .stages = 1, .chunks = 1, .microbatches = 1,
                           .reduce = MT__PLAN_REDUCE_EACH,
                           .model = {.n_params = 1e9, .layers = 2, .heads = 4, .head_dim = 8,
                                     .seq = 16, .tokens = 1000}};
    mt__plan_step_result r;
    MT_CHECK_OK(mt__plan_step(&in, &r));
    MT_CHECK_CLOSE(r.step, 10.076, 1e-9, "step");
    MT_CHECK_CLOSE(r.flops_run, 2e13, 1e-12, "FLOPs run");
    MT_CHECK_CLOSE(r.flops_recompute, 2e12, 1e-12, "recomputed");
    MT_CHECK_CLOSE(r.mfu, 6.000006144e12 / (10.076 * 4e12), 1e-12, "MFU");
    MT_CHECK_CLOSE(r.hfu, r.mfu * 2e13 / 1.8e13, 1e-12, "HFU");
    MT_CHECK(r.hfu > r.mfu, "HFU %g > MFU %g", r.hfu, r.mfu);
    mt_mesh_free(mesh);
}

/* F an element-wise op of 1e11 bytes (2 s), B 2e11 (4 s), W a product of
 * 1e9 FLOPs (5e-4 s) over 5e10 bytes (1 s): 7 s memory-bound + 0.076 s. */
MT_TEST(memory_bound) {
    mt_hardware hw = unit_hw();
    mt_mesh *mesh = mesh_of("data=1", 1);
    mt__plan_node n[] = {vec('F', 1e11), vec('B', 2e11), mm('W', 1e9)};
    n[2].bytes = 5e10;
    mt__plan_step_result r = step_of(&hw, mesh, n, 3, 100000000, 1, MT__PLAN_REDUCE_EACH, NULL);
    MT_CHECK_CLOSE(r.step, 7.076, 1e-9, "step");
    MT_CHECK_CLOSE(r.memory_bound, 7, 1e-9, "memory-bound ops");
    MT_CHECK(r.flop_bound == 0, "nothing FLOP-bound: %g", r.flop_bound);
    MT_CHECK(r.bound == MT__PLAN_BOUND_MEMORY && strstr(r.reason, "memory bandwidth"),
             "bound: %s", r.reason);
    mt_mesh_free(mesh);
}

/* data=2. Hidden: W = product 1 s, the gradient's all-reduce of 2.5e9 bytes
 * (0.5 s) issued at 1 s, product 1 s: the reduction ends at 1.5 s, under
 * the second product; W = 2 s. F and B 1 s each; 1e6 elements: AdamW
 * 3.8e7 / 5e10 = 7.6e-4 s. Step 4.00076 s, nothing exposed.
 * Partly exposed: F, B 0.25 s; W = product 1 s, all-reduce of 1e10 bytes
 * (2 s: [1, 3]), product 0.2 s (ends 1.2): W waits to 3 s, 1.8 s exposed;
 * step 3.5 + 7.6e-4. FLOP-bound 1.7 s < 1.8 s: communication binds. */
MT_TEST(dp_reduction_hidden_and_partly_exposed) {
    mt_hardware hw = unit_hw();
    mt_mesh *mesh = mesh_of("data=2", 2);
    mt__plan_node a[] = {mm('F', 2e12), mm('B', 2e12), mm('W', 2e12),
                         grad(mesh, MT__PC_ALL_REDUCE, "data", 2.5e9), mm('W', 2e12)};
    mt__plan_step_result r = step_of(&hw, mesh, a, 5, 1000000, 1, MT__PLAN_REDUCE_EACH, NULL);
    MT_CHECK_CLOSE(r.step, 4.00076, 1e-9, "hidden: step");
    MT_CHECK(r.comm_exposed == 0, "hidden: %g exposed", r.comm_exposed);
    MT_CHECK_CLOSE(comm_named(&r, "all-reduce over data")->seconds, 0.5, 1e-9, "its time");
    MT_CHECK(r.bound == MT__PLAN_BOUND_COMPUTE, "hidden: %s", r.reason);
    mt__plan_node b[] = {mm('F', 5e11), mm('B', 5e11), mm('W', 2e12),
                         grad(mesh, MT__PC_ALL_REDUCE, "data", 1e10), mm('W', 4e11)};
    r = step_of(&hw, mesh, b, 5, 1000000, 1, MT__PLAN_REDUCE_EACH, NULL);
    MT_CHECK_CLOSE(r.step, 3.50076, 1e-9, "partly: step");
    MT_CHECK_CLOSE(r.phase[2], 3.0, 1e-9, "partly: W");
    MT_CHECK_CLOSE(r.comm_exposed, 1.8, 1e-9, "partly: exposed");
    MT_CHECK_CLOSE(r.comm_kind[MT__PC_ALL_REDUCE], 1.8, 1e-9, "partly: by kind");
    MT_CHECK(r.bound == MT__PLAN_BOUND_COMM && r.bound_comm >= 0 &&
             strcmp(r.comm[r.bound_comm].label, "all-reduce over data") == 0 &&
             strstr(r.reason, "all-reduce over data"), "partly: %s", r.reason);
    mt_mesh_free(mesh);
}

/* At most 4 reductions in flight (plan.c's window): five all-reduces of
 * 0.5 s issued at once, then a 3 s product. The first four queue at 0; the
 * fifth waits for the first (0.5 s exposed), runs [2, 2.5]; the product
 * [0.5, 3.5]. W = 3.5 s (3 s without the window). */
MT_TEST(reduction_window) {
    mt_hardware hw = unit_hw();
    mt_mesh *mesh = mesh_of("data=2", 2);
    mt__plan_node n[7] = {mm('F', 5e11), mm('B', 5e11)};
    for (int i = 0; i < 5; i++) n[2 + i] = grad(mesh, MT__PC_ALL_REDUCE, "data", 2.5e9);
    mt__plan_node all[8];
    memcpy(all, n, sizeof n);
    all[7] = mm('W', 6e12);
    mt__plan_step_result r = step_of(&hw, mesh, all, 8, 1000000, 1, MT__PLAN_REDUCE_EACH, NULL);
    MT_CHECK_CLOSE(r.phase[2], 3.5, 1e-9, "W");
    MT_CHECK_CLOSE(r.comm_exposed, 0.5, 1e-9, "exposed");
    mt_mesh_free(mesh);
}

/* Gradient buckets (graph/buckets.c's rule), with a latency of 0.1 s a
 * collective (each all-reduce here far below it in bandwidth: V / 5e9 s).
 * W = a product (1 s), then five gradients of 1e5 bytes. One a gradient:
 * four queue at 1 s, the fifth waits for the first (window) and runs
 * [1.4, 1.5]: W = 1.5 s, 0.5 s exposed. In buckets of 25 MiB: one bucket of
 * 5e5 bytes (below the first bucket's 1 MiB) at the phase's end, [1, 1.1]:
 * W = 1.1 s, one collective of 0.1 s.
 * Buckets of 2e6 bytes, gradients of 6e5, 6e5, 3e6, 6e5, 6e5: the second
 * does not fit the first bucket's 1 MiB, which starts alone at 1 s [1, 1.1];
 * the 3e6 is a bucket or more, so it goes alone as without buckets [1.1,
 * 1.2] and leaves the open bucket open; the last three (1.8e6 bytes) start
 * at the end [1.2, 1.3]: W = 1.3 s, three collectives. */
MT_TEST(gradient_buckets) {
    mt_hardware hw = unit_hw();
    hw.levels[0].latency = 0.1;
    mt_mesh *mesh = mesh_of("data=2", 2);
    mt__plan_node all[8] = {mm('F', 5e11), mm('B', 5e11), mm('W', 2e12)};
    for (int i = 0; i < 5; i++) all[3 + i] = grad(mesh, MT__PC_ALL_REDUCE, "data", 1e5);
    mt__plan_program p = {.n_nodes = 8, .nodes = all, .param_elems = 1000000};
    mt__plan_step_in in = {.hw = &hw, .mesh = mesh, .precision = MT_PRECISION_BF16,
                           .programs = &p, .stages = 1, .chunks = 1, .microbatches = 1,
                           .reduce = MT__PLAN_REDUCE_EACH};
    mt__plan_step_result r;
    MT_CHECK_OK(mt__plan_step(&in, &r));
    MT_CHECK_CLOSE(r.phase[2], 1.5, 1e-9, "one a gradient: W");
    MT_CHECK_CLOSE(r.comm_exposed, 0.5, 1e-9, "one a gradient: exposed");
    MT_CHECK_CLOSE(comm_named(&r, "all-reduce over data")->seconds, 0.5, 1e-9, "5 x 0.1 s");
    in.bucket_bytes = 25 * 1048576.0;
    MT_CHECK_OK(mt__plan_step(&in, &r));
    MT_CHECK_CLOSE(r.phase[2], 1.1, 1e-9, "one bucket: W");
    MT_CHECK_CLOSE(r.comm_exposed, 0.1, 1e-9, "one bucket: exposed");
    MT_CHECK_CLOSE(comm_named(&r, "all-reduce over data")->seconds, 0.1, 1e-9, "one bucket");
    MT_CHECK_CLOSE(r.compute + r.comm_exposed + r.bubble + r.optimizer, r.step, 1e-12,
                   "compute + exposed + bubble + optimizer = step");
    const double sizes[5] = {6e5, 6e5, 3e6, 6e5, 6e5};
    for (int i = 0; i < 5; i++) all[3 + i].comm_bytes = sizes[i];
    in.bucket_bytes = 2e6;
    MT_CHECK_OK(mt__plan_step(&in, &r));
    MT_CHECK_CLOSE(r.phase[2], 1.3, 1e-9, "caps: W");
    MT_CHECK_CLOSE(comm_named(&r, "all-reduce over data")->seconds, 0.3, 1e-9, "3 collectives");
    /* the bucket size the trainer runs: f32 reductions only */
    mt_train_config c = mt_train_defaults();
    MT_CHECK(mt__plan_bucket_bytes(&c) == 25 * 1048576.0, "25 MiB: %g", mt__plan_bucket_bytes(&c));
    c.grad_reduce = MT_PRECISION_BF16;
    MT_CHECK(mt__plan_bucket_bytes(&c) == 0, "bf16 reductions: one a gradient");
    c.grad_reduce = MT_PRECISION_FP32;
    c.bucket_mb = 0;
    MT_CHECK(mt__plan_bucket_bytes(&c) == 0, "--bucket-mb 0");
    mt_mesh_free(mesh);
}

/* tensor=2. Exposed: F = product 1 s, all-reduce of 2.5e9 bytes over tensor
 * (0.5 s, blocking), product 1 s: 2.5 s; B, W products 2 s: step 6.5 +
 * 7.6e-4 s, 0.5 s exposed. A collective matmul instead (an all-gather ring
 * of 5e9 bytes, 0.5 s, under its own 2e12 FLOPs, 1 s): F = 2 s, nothing
 * exposed; with a ring of 2e10 bytes (2 s) F = 3 s, 1 s exposed. */
MT_TEST(tensor_parallel_exposed_and_collective_matmul) {
    mt_hardware hw = unit_hw();
    mt_mesh *mesh = mesh_of("tensor=2", 2);
    mt__plan_node a[] = {mm('F', 2e12), coll(mesh, 'F', MT__PC_ALL_REDUCE, "tensor", 2.5e9),
                         mm('F', 2e12), mm('B', 4e12), mm('W', 4e12)};
    mt__plan_step_result r = step_of(&hw, mesh, a, 5, 1000000, 1, MT__PLAN_REDUCE_EACH, NULL);
    MT_CHECK_CLOSE(r.phase[0], 2.5, 1e-9, "exposed: F");
    MT_CHECK_CLOSE(r.step, 6.50076, 1e-9, "exposed: step");
    MT_CHECK_CLOSE(comm_named(&r, "all-reduce over tensor")->exposed, 0.5, 1e-9, "exposed");
    mt__plan_node cm = coll(mesh, 'F', MT__PC_ALL_GATHER, "tensor", 5e9);
    cm.overlapped = true;
    cm.flops = 2e12;
    cm.bytes = 1e6;
    mt__plan_node b[] = {mm('F', 2e12), cm, mm('B', 4e12), mm('W', 4e12)};
    r = step_of(&hw, mesh, b, 4, 1000000, 1, MT__PLAN_REDUCE_EACH, NULL);
    MT_CHECK_CLOSE(r.phase[0], 2.0, 1e-9, "hidden: F");
    MT_CHECK(r.comm_exposed == 0, "hidden: %g exposed", r.comm_exposed);
    MT_CHECK_CLOSE(r.flop_bound, 6.0, 1e-9, "the ring's products count as compute");
    b[1].comm_bytes = 2e10;
    r = step_of(&hw, mesh, b, 4, 1000000, 1, MT__PLAN_REDUCE_EACH, NULL);
    MT_CHECK_CLOSE(r.phase[0], 3.0, 1e-9, "long ring: F");
    MT_CHECK_CLOSE(comm_named(&r, "all-gather over tensor")->exposed, 1.0, 1e-9, "long ring");
    mt_mesh_free(mesh);
}

/* fsdp=2, gathers of 2.5e9 bytes (0.25 s) prefetched one parameter ahead,
 * products 1 s: F = G0 G1 R0 G2 R1 R2. G0 [0, .25], G1 [.25, .5]; R0 waits
 * for G0 (.25 exposed), runs [.25, 1.25]; G2 issued at 1.25, [1.25, 1.5],
 * the phase's last gather: waited for at the next product (one parameter
 * early, step.h), R1 [1.5, 2.5], R2 [2.5, 3.5]. F = 3.5 s, 0.5 s exposed
 * (blocking gathers would give 3.75). B a product 1 s; W the gradient's
 * reduce-scatter (5e9 bytes, 0.5 s) under a product of 1 s: W = 1 s. */
MT_TEST(fsdp_prefetch) {
    mt_hardware hw = unit_hw();
    mt_mesh *mesh = mesh_of("fsdp=2", 2);
    mt__plan_node n[] = {gather(mesh, 'F', "fsdp", 2.5e9), gather(mesh, 'F', "fsdp", 2.5e9),
                         mm('F', 2e12), gather(mesh, 'F', "fsdp", 2.5e9), mm('F', 2e12),
                         mm('F', 2e12), mm('B', 2e12),
                         grad(mesh, MT__PC_REDUCE_SCATTER, "fsdp", 5e9), mm('W', 2e12)};
    mt__plan_step_result r = step_of(&hw, mesh, n, 9, 1000000, 1, MT__PLAN_REDUCE_EACH, NULL);
    MT_CHECK_CLOSE(r.phase[0], 3.5, 1e-9, "F");
    MT_CHECK_CLOSE(r.phase[2], 1.0, 1e-9, "W");
    MT_CHECK_CLOSE(comm_named(&r, "all-gather over fsdp")->exposed, 0.5, 1e-9, "gathers exposed");
    MT_CHECK_CLOSE(comm_named(&r, "all-gather over fsdp")->seconds, 0.75, 1e-9, "gathers' time");
    MT_CHECK(comm_named(&r, "reduce-scatter over fsdp")->exposed == 0, "scatter hidden");
    MT_CHECK_CLOSE(r.step, 5.50076, 1e-9, "step");
    mt_mesh_free(mesh);
}

/* DeepSpeed's ZeRO-3 before 0.5.5 (mt__plan_program_list_collectives'
 * nodes): its gathers block (no prefetch) and each list-form collective
 * adds one copy a rank, a kernel each. With a 1 ms kernel overhead on
 * fsdp=2: a 2.5e9-byte gather 0.25 + 2 x 0.001 = 0.252 s, a product
 * 1 + 0.001 s; F = gather, product, gather, product = 2 x 1.253 = 2.506 s,
 * both gathers exposed (0.504 s); W's reduce-scatter, 0.5 + 0.002 s,
 * under its product: W 1.001 s. Its persistent parameters are gathered
 * again after the optimizer (post_step). */
MT_TEST(list_form_gathers_block_and_copy_per_rank) {
    mt_hardware hw = unit_hw();
    hw.kernel_overhead = 1e-3;
    mt_mesh *mesh = mesh_of("fsdp=2", 2);
    mt__plan_node n[] = {gather(mesh, 'F', "fsdp", 2.5e9), mm('F', 2e12),
                         gather(mesh, 'F', "fsdp", 2.5e9), mm('F', 2e12),
                         grad(mesh, MT__PC_REDUCE_SCATTER, "fsdp", 5e9), mm('W', 2e12)};
    for (int i = 0; i < 6; i++)
        if (n[i].cls == MT__PN_COLLECTIVE) n[i].param_gather = false, n[i].rank_copies = true;
    mt__plan_step_result r = step_of(&hw, mesh, n, 6, 1000000, 1, MT__PLAN_REDUCE_EACH, NULL);
    MT_CHECK_CLOSE(r.phase[0], 2.506, 1e-9, "F");
    MT_CHECK_CLOSE(r.phase[2], 1.001, 1e-9, "W");
    MT_CHECK_CLOSE(comm_named(&r, "all-gather over fsdp")->exposed, 0.504, 1e-9, "exposed");
    MT_CHECK_CLOSE(comm_named(&r, "all-gather over fsdp")->seconds, 0.504, 1e-9, "gathers");
    MT_CHECK_CLOSE(comm_named(&r, "reduce-scatter over fsdp")->seconds, 0.502, 1e-9, "scatter");
    MT_CHECK(comm_named(&r, "reduce-scatter over fsdp")->exposed == 0, "scatter hidden");
    /* 3 persistent parameters of 2.5e9 gathered bytes in all: after the
       optimizer one all-gather (0.25 s) and (3 + 1) copies a rank of
       fsdp=2 (8 x 0.001 s): 0.258 s more in the optimizer and the step */
    mt__plan_program p = {.n_nodes = 6, .nodes = n, .param_elems = 1000000,
                          .ds_persist_params = 3, .ds_persist_bytes = 2.5e9};
    MT_CHECK_OK(mt_mesh_axes(mesh, "fsdp", &p.ds_persist_axes));
    mt__plan_step_in in = {.hw = &hw, .mesh = mesh, .precision = MT_PRECISION_BF16,
                           .programs = &p, .stages = 1, .chunks = 1, .microbatches = 1,
                           .reduce = MT__PLAN_REDUCE_EACH};
    mt__plan_step_result s;
    MT_CHECK_OK(mt__plan_step(&in, &s));
    MT_CHECK_CLOSE(s.optimizer - r.optimizer, 0.258, 1e-9, "post-step gather");
    MT_CHECK_CLOSE(s.step - r.step, 0.258, 1e-9, "step");
    mt_mesh_free(mesh);
}

/* Four microbatches of the partly exposed program (F, B 0.25 s; W 3 s with
 * its reduction, 1.2 s without). As meshtrain runs them (each W reduces):
 * 4 x 3.5 + 7.6e-4 s, 7.2 s exposed. Reduced once (the book's), under the
 * last microbatch's backward: 3 x 1.7 + 3.5 + 7.6e-4 = 8.60076 s, 1.8 s
 * exposed. Reduced after the last backward (Megatron-LM's train_step, the
 * megatron convention): 4 x 1.7 + 2 + 7.6e-4 = 8.80076 s, its 2 s exposed. */
MT_TEST(accumulation_over_4_microbatches) {
    mt_hardware hw = unit_hw();
    mt_mesh *mesh = mesh_of("data=2", 2);
    mt__plan_node n[] = {mm('F', 5e11), mm('B', 5e11), mm('W', 2e12),
                         grad(mesh, MT__PC_ALL_REDUCE, "data", 1e10), mm('W', 4e11)};
    mt__plan_step_result r = step_of(&hw, mesh, n, 5, 1000000, 4, MT__PLAN_REDUCE_EACH, NULL);
    MT_CHECK_CLOSE(r.step, 14.00076, 1e-9, "each: step");
    MT_CHECK_CLOSE(r.comm_exposed, 7.2, 1e-9, "each: exposed");
    r = step_of(&hw, mesh, n, 5, 1000000, 4, MT__PLAN_REDUCE_ONCE, NULL);
    MT_CHECK_CLOSE(r.step, 8.60076, 1e-9, "once: step");
    MT_CHECK_CLOSE(r.comm_exposed, 1.8, 1e-9, "once: exposed");
    MT_CHECK_CLOSE(comm_named(&r, "all-reduce over data")->seconds, 2.0, 1e-9, "once: one run");
    r = step_of(&hw, mesh, n, 5, 1000000, 4, MT__PLAN_REDUCE_AFTER, NULL);
    MT_CHECK_CLOSE(r.step, 8.80076, 1e-9, "after: step");
    MT_CHECK_CLOSE(r.comm_exposed, 2.0, 1e-9, "after: exposed");
    MT_CHECK_CLOSE(comm_named(&r, "all-reduce over data")->seconds, 2.0, 1e-9, "after: one run");
    mt_mesh_free(mesh);
}

/* pipe=4, m=4, every chunk F a product 1 s (f), B an element-wise op of
 * 1e11 bytes 2 s (b), no W; no message cost. GPipe's makespan is the closed
 * form (m + p - 1)(f + b) = 7 x 3 = 21 s, 1F1B's the same; a stage is busy
 * m (f + b) = 12 s, so the bubble is 9 s, (p - 1)/(m + p - 1) = 3/7 of the
 * makespan; with AdamW's 7.6e-4 s the step is 21.00076 s. The bubble (9 s)
 * outweighs the FLOP-bound 4 s and the memory-bound 8 + 7.6e-4 s: it binds. */
MT_TEST(pipeline_gpipe_and_1f1b_closed_form) {
    mt_hardware hw = unit_hw();
    mt_mesh *mesh = mesh_of("pipe=4", 4);
    mt__plan_node n[] = {mm('F', 2e12), vec('B', 1e11)};
    mt__plan_program p[4];
    for (int k = 0; k < 4; k++)
        p[k] = (mt__plan_program){.n_nodes = 2, .nodes = n, .param_elems = 1000000};
    const mt_schedule_kind kinds[2] = {MT_SCHEDULE_GPIPE, MT_SCHEDULE_1F1B};
    for (int i = 0; i < 2; i++) {
        mt__plan_step_in in = {.hw = &hw, .mesh = mesh, .precision = MT_PRECISION_BF16,
                               .programs = p, .stages = 4, .chunks = 1, .schedule = kinds[i],
                               .microbatches = 4};
        mt__plan_step_result r;
        MT_CHECK_OK(mt__plan_step(&in, &r));
        const char *k = mt_schedule_kind_name(kinds[i]);
        MT_CHECK_CLOSE(r.step, 21.00076, 1e-9, "%s: step", k);
        MT_CHECK_CLOSE(r.bubble, 9, 1e-9, "%s: bubble", k);
        MT_CHECK_CLOSE(r.bubble / (r.step - r.optimizer), 3.0 / 7, 1e-9, "%s: (p-1)/(m+p-1)", k);
        MT_CHECK_CLOSE(r.compute + r.comm_exposed + r.bubble + r.optimizer, r.step, 1e-12,
                       "%s: identity", k);
        MT_CHECK(r.bound == MT__PLAN_BOUND_BUBBLE && strstr(r.reason, "bubble"), "%s: %s", k,
                 r.reason);
    }
    mt_mesh_free(mesh);
}

/* The refusals name the field and the value. */
MT_TEST(refusals) {
    mt_hardware hw = unit_hw();
    mt_mesh *mesh = mesh_of("data=2", 2);
    mt__plan_node n[] = {mm('F', 1e12), mm('B', 1e12)};
    mt__plan_program p = {.n_nodes = 2, .nodes = n};
    mt__plan_step_in in = {.hw = &hw, .mesh = mesh, .programs = &p, .stages = 1, .chunks = 1,
                           .microbatches = 0};
    mt__plan_step_result r;
    MT_CHECK_FAILS(mt__plan_step(&in, &r), MT_EINVAL, "microbatches=0");
    in.microbatches = 2;
    in.stages = 2;
    MT_CHECK_FAILS(mt__plan_step(&in, &r), MT_EINVAL, "stages=2", "no pipe axis");
    in.stages = 1;
    in.chunks = 2;
    MT_CHECK_FAILS(mt__plan_step(&in, &r), MT_EINVAL, "chunks=2");
    in.chunks = 1;
    in.message_bytes = -1;
    MT_CHECK_FAILS(mt__plan_step(&in, &r), MT_EINVAL, "message_bytes=-1");
    in.message_bytes = 0;
    in.hw = NULL;
    MT_CHECK_FAILS(mt__plan_step(&in, &r), MT_EINVAL, "hw NULL");
    mt_mesh_free(mesh);
}

/* The ops this test costs as matrix products (at the precision's peak);
 * every other op by its bytes. */
static bool is_product(const char *op) {
    static const char *const ops[] = {"matmul", "linear", "attention", "attention_gqa", "gemm",
                                      "attention_bwd", "gqa_bwd_qk", "gqa_bwd_v", "cm_wgrad"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(op, ops[i]) == 0) return true;
    return false;
}

/* A GPT (L 2, C 64, NH 4, T 16, V 256, B 8) on data=2,tensor=2 on an
 * H100 SXM: the step's F for device 0 is the sum, over the forward nodes
 * of the compiled program (built here on the shape-only backend, read
 * through mt_graph_node), of max(FLOPs / (fp32 peak x gemm_fraction),
 * bytes / (HBM x hbm_fraction)) for a product (attention's fused kernel
 * at mt__plan_flash_efficiency of its rows and keys, by hand in
 * test_plan_cost), and max(FLOPs / fp32 peak,
 * bytes / (HBM x hbm_fraction)) for the rest, plus each collective's time
 * (cost.c's, tested against the book in test_plan_cost) and, for the one that also
 * computes (the vocabulary-parallel loss), its bytes on the roofline: the
 * forward has no deferred collective to overlap. */
MT_TEST(gpt_forward_is_its_nodes_rooflines) {
    mt_hardware *hw = NULL;
    MT_CHECK_OK(mt_hardware_find("h100-sxm", &hw, NULL, 0));
    mt_gpt_config mc = {.L = 2, .C = 64, .NH = 4, .maxT = 16, .V = 256, .Vp = 256};
    mt_train_config c = tiny_gpt(&mc, 8, "data=2,tensor=2", 4);
    mt_mesh *mesh = mesh_of(c.mesh, 4);
    /* the reference: device 0's program, built and compiled here */
    mt_ctx *ctx = NULL;
    MT_CHECK_OK(mt_ctx_virtual_create(mesh, 0, &ctx));
    mt_graph *g = mt_graph_create(), *local = NULL;
    mt_tensor *loss = NULL, *local_loss = NULL;
    mt_partition_opts po;
    memset(&po, 0, sizeof po);
    bool seeded = false;
    MT_CHECK_OK(mt_train_build_chunk_program(&c, mesh, 0, 1, g, &loss, &seeded, &po));
    po.mode = MT_SHARD_AUTO;
    MT_CHECK_OK(mt_partition(g, loss, ctx, &po, &local, &local_loss));
    MT_CHECK_OK(mt_graph_compile(local, local_loss, &(mt_compile_opts){
        .seed = 1, .seed_from_caller = seeded, .backend = mt_backend_shape_only()}));
    const double flop_rate = hw->peak_flops[MT_HW_FP32] * hw->gemm_fraction;
    const double byte_rate = hw->hbm_bandwidth * hw->hbm_fraction;
    double want = 0;
    int n_coll = 0;
    mt__plan_map map;
    MT_CHECK_OK(mt__plan_map_make(hw, mesh, &map));
    for (int i = 0; i < mt_graph_n_nodes(local); i++) {
        mt_node_info in;
        MT_CHECK_OK(mt_graph_node(local, i, &in));
        if (in.phase != 'F') continue;
        if (strcmp(in.op, "pvary") == 0) continue;   /* moves nothing, runs nothing */
        if (in.collective) {
            mt__plan_coll kind = strcmp(in.op, "all_gather") == 0 ? MT__PC_ALL_GATHER
                                 : strcmp(in.op, "psum_scatter") == 0 ? MT__PC_REDUCE_SCATTER
                                 : MT__PC_ALL_REDUCE;
            want += mt__plan_collective_seconds(&map, kind, in.axes, in.comm_bytes);
            if (in.flops > 0) want += in.mem_bytes / byte_rate;
            n_coll++;
            continue;
        }
        /* a product at the fp32 peak x gemm_fraction x its kernel's share
           (mt__plan_gemm_efficiency, checked against hand counts and
           OpenXLA's measured table in test_plan_cost); the rest floored by
           the fp32 peak (the vector units); every kernel its overhead */
        const double eff =
            in.attention_keys > 0
                ? mt__plan_flash_efficiency(hw, in.attention_rows, in.attention_keys)
                : mt__plan_gemm_efficiency(hw, in.gemm_m, in.gemm_n, in.gemm_k);
        double tf = in.flops / (is_product(in.op) ? flop_rate * eff : hw->peak_flops[MT_HW_FP32]);
        double tb = in.mem_bytes / byte_rate;
        want += (tf > tb ? tf : tb) + (tf > 0 || tb > 0 ? hw->kernel_overhead : 0);
    }
    MT_CHECK(n_coll >= 2 * mc.L, "the forward's tensor-parallel all-reduces: %d", n_coll);
    mt_graph_free(g);
    mt_graph_free(local);
    mt_ctx_virtual_free(ctx);
    /* the planner's */
    mt__plan_program p;
    MT_CHECK_OK(mt__plan_program_build(&c, mesh, 0, 0, 1, &p));
    mt__plan_step_in in = {.hw = hw, .mesh = mesh, .precision = c.precision, .programs = &p,
                           .stages = 1, .chunks = 1, .microbatches = 1};
    mt__plan_step_result r;
    MT_CHECK_OK(mt__plan_step(&in, &r));
    MT_CHECK_CLOSE(r.phase[0] * 1e6, want * 1e6, 1e-9, "F: %.4g us, the nodes' %.4g us",
                   r.phase[0] * 1e6, want * 1e6);
    MT_CHECK(r.phase[1] > 0 && r.phase[2] > 0 && r.step > r.phase[0], "B, W and the step");
    MT_CHECK(comm_named(&r, "all-reduce over tensor")->exposed > 0, "TP all-reduces exposed");
    MT_CHECK(comm_named(&r, "all-reduce over data")->seconds > 0, "DP reductions");
    mt__plan_program_free(&p);
    mt_mesh_free(mesh);
    mt_hardware_free(hw);
}

/* Megatron-LM's full recomputation re-runs a layer's forward, its two
 * tensor-parallel all-reduces included (Shoeybi et al. 2019, §3: the f and
 * g operators, two all-reduces in the forward of a layer and two in its
 * backward; Korthikanti et al. 2022, §4: recomputation is one more forward):
 * 6 all-reduces a layer where meshtrain's remat, which keeps a collective's
 * output, runs 4. mt__plan_program_recompute_comm adds the 2 a layer, each
 * after its own layer's last recomputed node, and nothing without remat. */
MT_TEST(full_recompute_reruns_tensor_collectives) {
    mt_gpt_config mc = {.L = 3, .C = 64, .NH = 4, .maxT = 16, .V = 256, .Vp = 256};
    for (int remat = 0; remat < 2; remat++) {
        mt_train_config c = tiny_gpt(&mc, 4, "tensor=2", 2);
        c.remat = remat ? MT_REMAT_FULL : MT_REMAT_NONE;
        mt_mesh *mesh = mesh_of(c.mesh, 2);
        mt__plan_program p;
        MT_CHECK_OK(mt__plan_program_build(&c, mesh, 0, 0, 1, &p));
        int before[3] = {0}, after[3] = {0}, n0 = p.n_nodes;
        for (int i = 0; i < p.n_nodes; i++)
            if (p.nodes[i].cls == MT__PN_COLLECTIVE && p.nodes[i].kind == MT__PC_ALL_REDUCE &&
                p.nodes[i].block >= 0)
                before[p.nodes[i].phase == 'F' ? 0 : p.nodes[i].phase == 'B' ? 1 : 2]++;
        MT_CHECK(before[0] == 2 * mc.L && before[1] == 2 * mc.L,
                 "remat %d: %d forward and %d backward all-reduces in the layers, want %d each",
                 remat, before[0], before[1], 2 * mc.L);
        MT_CHECK_OK(mt__plan_program_recompute_comm(&p));
        for (int i = 0; i < p.n_nodes; i++) {
            const mt__plan_node *n = &p.nodes[i];
            if (n->cls != MT__PN_COLLECTIVE || n->kind != MT__PC_ALL_REDUCE || n->block < 0)
                continue;
            after[n->phase == 'F' ? 0 : n->phase == 'B' ? 1 : 2]++;
            if (n->phase == 'B' && n->recompute) {
                /* after its layer's recomputed nodes, none of them after it */
                int j = i - 1;
                while (j >= 0 && p.nodes[j].cls == MT__PN_COLLECTIVE && p.nodes[j].recompute)
                    j--;
                MT_CHECK(j >= 0 && p.nodes[j].recompute && p.nodes[j].block == n->block,
                         "copy %d of layer %d follows node %d (layer %d, recompute %d)", i,
                         n->block, j, j >= 0 ? p.nodes[j].block : -1,
                         j >= 0 ? p.nodes[j].recompute : 0);
                for (int k = i + 1; k < p.n_nodes; k++)
                    MT_CHECK(!(p.nodes[k].cls != MT__PN_COLLECTIVE && p.nodes[k].recompute &&
                               p.nodes[k].block == n->block),
                             "layer %d recomputes node %d after its copy %d", n->block, k, i);
            }
        }
        MT_CHECK(after[0] == 2 * mc.L && after[1] == (remat ? 4 : 2) * mc.L && after[2] == before[2],
                 "remat %d: %d/%d/%d all-reduces F/B/W after, want %d/%d/%d", remat, after[0],
                 after[1], after[2], 2 * mc.L, (remat ? 4 : 2) * mc.L, before[2]);
        MT_CHECK(p.n_nodes == n0 + (remat ? 2 * mc.L : 0), "%d nodes from %d", p.n_nodes, n0);
        mt__plan_program_free(&p);
        mt_mesh_free(mesh);
    }
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
