/* test_plan_step_batch.c — a program's time at a batch it was not built at
 * (step.c's mt__plan_chunk_time_at, which evaluate.c uses for a replica of
 * more than 4 sequences), on hand-built programs and the hand-made system
 * of plan_unit_hw.h, each expected time worked out by hand below.
 *
 * The unit system: a bf16 product of F FLOPs takes F / 2e12 s (its 1e6
 * bytes 2e-5 s, below); an all-reduce over 2 devices through its switch
 * V / 5e9 s; AdamW 38 bytes a stored element at 5e10 B/s.
 *
 * The program at b sequences: F a product of 2e11·b FLOPs (0.1·b s), B the
 * same, W a data-parallel all-reduce of a gradient of 2.5e9 bytes (0.5 s,
 * the same at every batch: a gradient is the parameter's size) issued
 * first, then a product of 2e11·b FLOPs under it. Built at 2 and 4:
 *   b=2: W's product 0.2 s, the reduction ends at 0.5: 0.3 s exposed, W 0.5;
 *   b=4: product 0.4 s, 0.1 s exposed, W 0.5.
 * Taking the seconds along the batch (as evaluate.c did) to b=8 gives
 * exposed 0.3 + 3·(0.1 - 0.3) = -0.3 s and W 0.5 s under a 0.8 s product:
 * a step of 2.1 s against 2.4 s of compute (issue 37, finding 10). The
 * program at b=8 itself: product 0.8 s, the reduction (0.5 s) hidden, W
 * 0.8, nothing exposed; step 0.8 + 0.8 + 0.8 + 1e6 x 38 / 5e10 = 2.40076 s.
 * At b=3, between the builds, the wait keeps its side: product 0.3 s,
 * 0.2 s exposed, W 0.5; step 0.3 + 0.3 + 0.5 + 7.6e-4 = 1.10076 s. */
#include "meshtrain.h"
#include "harness.h"
#include "plan/step.h"
#include "plan_unit_hw.h"

static mt__plan_node mm(char ph, double flops) {
    return (mt__plan_node){.phase = ph, .cls = MT__PN_MATMUL, .flops = flops, .bytes = 1e6};
}

/* The program at b sequences (the file's comment), into nodes[4]. */
static mt__plan_program program_at(const mt_mesh *mesh, double b, mt__plan_node *nodes) {
    mt__plan_node red = {.phase = 'W', .cls = MT__PN_COLLECTIVE, .kind = MT__PC_ALL_REDUCE,
                         .comm_bytes = 2.5e9, .grad_reduce = true};
    MT_CHECK_OK(mt_mesh_axes(mesh, "data", &red.axes));
    nodes[0] = mm('F', 2e11 * b);
    nodes[1] = mm('B', 2e11 * b);
    nodes[2] = red;
    nodes[3] = mm('W', 2e11 * b);
    return (mt__plan_program){.n_nodes = 4, .nodes = nodes, .param_elems = 1000000};
}

/* What every case starts from: the unit system, a mesh of 2 data devices
 * and the program built at 2 and 4 sequences (p2, p4 point into n2, n4). */
typedef struct {
    mt_hardware       hw;
    mt_mesh          *mesh;
    mt__plan_node     n2[4], n4[4];
    mt__plan_program  p2, p4;
} fixture;

static void fixture_init(fixture *f) {
    f->hw = unit_hw();
    f->mesh = NULL;
    MT_CHECK_OK(mt_mesh_create("data=2", 2, &f->mesh));
    f->p2 = program_at(f->mesh, 2, f->n2);
    f->p4 = program_at(f->mesh, 4, f->n4);
}

/* The step of one chunk's times, the accounting identity checked. */
static mt__plan_step_result step_of(const mt_hardware *hw, const mt_mesh *mesh,
                                    const mt__plan_chunk_time *ct,
                                    const mt__plan_comm_keys *keys) {
    mt__plan_step_in in = {.hw = hw, .mesh = mesh, .precision = MT_PRECISION_BF16, .stages = 1,
                           .chunks = 1, .microbatches = 1, .reduce = MT__PLAN_REDUCE_EACH};
    mt__plan_step_result r;
    MT_CHECK_OK(mt__plan_step_chunks(&in, ct, keys, &r));
    MT_CHECK_CLOSE(r.compute + r.comm_exposed + r.bubble + r.optimizer, r.step, 1e-12,
                   "compute + exposed + bubble + optimizer = step");
    return r;
}

MT_TEST(extrapolated_seconds_went_negative) {
    fixture f;
    fixture_init(&f);
    mt__plan_comm_keys keys = {0};
    mt__plan_chunk_time t2, t4;
    MT_CHECK_OK(mt__plan_chunk_time_of(&f.hw, f.mesh, MT_PRECISION_BF16, &f.p2, 0, &keys, &t2));
    MT_CHECK_OK(mt__plan_chunk_time_of(&f.hw, f.mesh, MT_PRECISION_BF16, &f.p4, 0, &keys, &t4));
    MT_CHECK(keys.n == 1, "one collective: %d", keys.n);
    /* taken along the batch to b=8 (what the search did), these two gave
       0.3 + 3 (0.1 - 0.3) = -0.3 s: a wait below zero */
    MT_CHECK_CLOSE(t2.phase[0][2].exposed[0], 0.3, 1e-9, "b=2: W's wait");
    MT_CHECK_CLOSE(t4.phase[0][2].exposed[0], 0.1, 1e-9, "b=4: W's wait");
    mt_mesh_free(f.mesh);
}

MT_TEST(time_at_the_batch_itself) {
    fixture f;
    fixture_init(&f);
    MT_CHECK(mt__plan_program_same_nodes(&f.p2, &f.p4), "one program at two batches");
    /* past the builds: b=8 */
    mt__plan_comm_keys keys = {0};
    mt__plan_chunk_time t;
    MT_CHECK_OK(mt__plan_chunk_time_at(&f.hw, f.mesh, MT_PRECISION_BF16, &f.p2, 2, &f.p4, 4, 8,
                                       0, &keys, &t));
    MT_CHECK_CLOSE(t.phase[0][2].seconds, 0.8, 1e-9, "b=8: W");
    MT_CHECK(t.phase[0][2].exposed[0] == 0, "b=8: the reduction hidden, %g exposed",
             t.phase[0][2].exposed[0]);
    MT_CHECK_CLOSE(t.phase[0][2].coll[0], 0.5, 1e-9, "b=8: the reduction's own time");
    MT_CHECK_CLOSE(t.phase[0][0].flops, 1.6e12, 1e-12, "b=8: F's FLOPs");
    mt__plan_step_result r = step_of(&f.hw, f.mesh, &t, &keys);
    MT_CHECK_CLOSE(r.step, 2.40076, 1e-9, "b=8: step");
    MT_CHECK_CLOSE(r.compute, 2.4, 1e-4, "b=8: compute");
    MT_CHECK(r.comm_exposed == 0 && r.step >= r.compute, "b=8: exposed %g, step %g, compute %g",
             r.comm_exposed, r.step, r.compute);
    /* between the builds: b=3, the same as the builds' seconds taken there */
    MT_CHECK_OK(mt__plan_chunk_time_at(&f.hw, f.mesh, MT_PRECISION_BF16, &f.p2, 2, &f.p4, 4, 3,
                                       0, &keys, &t));
    MT_CHECK_CLOSE(t.phase[0][2].exposed[0], 0.2, 1e-9, "b=3: W's wait");
    r = step_of(&f.hw, f.mesh, &t, &keys);
    MT_CHECK_CLOSE(r.step, 1.10076, 1e-9, "b=3: step");
    MT_CHECK_CLOSE(r.comm_exposed, 0.2, 1e-9, "b=3: exposed");
    mt_mesh_free(f.mesh);
}

MT_TEST(refusals) {
    fixture f;
    fixture_init(&f);
    mt__plan_comm_keys keys = {0};
    mt__plan_chunk_time t;
    MT_CHECK_FAILS(mt__plan_chunk_time_at(&f.hw, f.mesh, MT_PRECISION_BF16, &f.p2, 2, &f.p4, 2,
                                          8, 0, &keys, &t), MT_EINVAL, "at 2 and 2 sequences");
    f.p4.n_nodes = 3;
    MT_CHECK(!mt__plan_program_same_nodes(&f.p2, &f.p4), "3 nodes are not 4");
    MT_CHECK_FAILS(mt__plan_chunk_time_at(&f.hw, f.mesh, MT_PRECISION_BF16, &f.p2, 2, &f.p4, 4,
                                          8, 0, &keys, &t), MT_EINVAL, "programs of 4 and 3 nodes");
    f.p4.n_nodes = 4;
    f.n4[3].phase = 'B';
    MT_CHECK(!mt__plan_program_same_nodes(&f.p2, &f.p4), "a node of another phase");
    mt_mesh_free(f.mesh);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
