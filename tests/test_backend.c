/*
 * test_backend.c — the backend table (backend.h): the registry, the CPU
 * backend's buffers and copies, and the shape-only backend, whose compile
 * plans every buffer of a GPT exactly as the CPU backend's does (every
 * byte count of the stats, every tensor's offset) while allocating none,
 * and whose graph refuses to run with a message naming the backend.
 */
#include "meshtrain.h"
#include "harness.h"
#include "graph/graph_impl.h"   /* the plan's offsets */

#include <string.h>

MT_TEST(registry_names_both_backends) {
    MT_CHECK(mt_backend_find("cpu") == mt_backend_cpu(), "cpu is in the registry");
    MT_CHECK(mt_backend_find("shape-only") == mt_backend_shape_only(), "shape-only too");
    MT_CHECK(!mt_backend_find("cuda"), "no cuda backend yet");
    MT_CHECK(strstr(mt_errmsg(), "cpu, shape-only"), "the message lists the names: %s", mt_errmsg());
    int n = 0;
    while (mt_backend_at(n)) n++;
    MT_CHECK(n == 2, "%d backends in the registry, want 2", n);
    MT_CHECK(mt_backend_runs(mt_backend_cpu()) && !mt_backend_runs(mt_backend_shape_only()),
             "the cpu runs, shape-only does not");
    MT_CHECK(mt_backend_supports_op(mt_backend_cpu(), "matmul"), "the cpu runs matmul");
    MT_CHECK(!mt_backend_supports_op(mt_backend_shape_only(), "matmul"), "shape-only runs nothing");
    MT_CHECK(!mt_backend_supports_op(mt_backend_cpu(), "no-such-op"), "an unknown op");
}

MT_TEST(cpu_buffers_are_aligned_and_copy) {
    void *buf = NULL;
    MT_CHECK_OK(mt_backend_alloc(mt_backend_cpu(), 100, &buf));
    MT_CHECK(buf && (uintptr_t)buf % MT_BACKEND_ALIGN == 0, "64-byte aligned");
    float in[25], out[25];
    for (int i = 0; i < 25; i++) in[i] = (float)i;
    MT_CHECK_OK(mt_backend_copy_in(mt_backend_cpu(), buf, in, sizeof in));
    MT_CHECK_OK(mt_backend_copy_out(mt_backend_cpu(), out, buf, sizeof out));
    MT_CHECK(memcmp(in, out, sizeof in) == 0, "copied back");
    mt_backend_free(mt_backend_cpu(), buf);
    void *none = &buf;
    MT_CHECK_OK(mt_backend_alloc(mt_backend_shape_only(), 1 << 30, &none));
    MT_CHECK(none == NULL, "shape-only hands out no memory");
    MT_CHECK_FAILS(mt_backend_copy_in(mt_backend_shape_only(), NULL, in, 4), MT_EUNSUPPORTED,
                   "'shape-only'", "holds no data");
}

static mt_graph *gpt_on(const mt_backend *be, mt_remat remat) {
    mt_gpt_config cfg = {.L = 2, .C = 32, .NH = 4, .maxT = 16, .V = 100, .Vp = 128};
    mt_graph *g = mt_graph_create();
    mt_tensor *loss = mt_gpt_build(g, &cfg, 2, 16, 1.0f / 32);
    MT_CHECK(loss, "GPT built: %s", mt_graph_errmsg(g));
    MT_CHECK_OK(mt_graph_compile(g, loss, &(mt_compile_opts){
        .seed = 1, .remat = remat, .interleave_w = remat != MT_REMAT_NONE, .backend = be}));
    return g;
}

MT_TEST(shape_only_plans_what_the_cpu_plans) {
    for (int r = 0; r < 2; r++) {
        mt_remat remat = r ? MT_REMAT_FULL : MT_REMAT_NONE;
        mt_graph *cpu = gpt_on(NULL, remat), *shape = gpt_on(mt_backend_shape_only(), remat);
        mt_graph_stats a = mt_graph_get_stats(cpu), b = mt_graph_get_stats(shape);
        MT_CHECK(a.param_bytes == b.param_bytes && a.grad_bytes == b.grad_bytes &&
                 a.arena_bytes == b.arena_bytes && a.arena_bytes_unplanned ==
                 b.arena_bytes_unplanned && a.scratch_bytes == b.scratch_bytes &&
                 a.n_forward == b.n_forward && a.n_backward_b == b.n_backward_b &&
                 a.n_backward_w == b.n_backward_w && a.flops_backward == b.flops_backward,
                 "remat %d: the stats differ (params %zu/%zu, arena %zu/%zu)", r, a.param_bytes,
                 b.param_bytes, a.arena_bytes, b.arena_bytes);
        MT_CHECK(a.param_bytes > 0 && a.arena_bytes > 0, "something was planned");
        MT_CHECK(cpu->n_tensors == shape->n_tensors, "the same tensors");
        for (int i = 0; i < cpu->n_tensors; i++) {
            MT_CHECK(cpu->tensors[i]->offset == shape->tensors[i]->offset,
                     "'%s' at %zu on the cpu, %zu shape-only", cpu->tensors[i]->name,
                     cpu->tensors[i]->offset, shape->tensors[i]->offset);
            MT_CHECK(shape->tensors[i]->data == NULL, "'%s' has data", shape->tensors[i]->name);
        }
        MT_CHECK(mt_tensor_f32(mt_graph_param_at(shape, 0)) == NULL, "no parameter data");
        MT_CHECK(mt_tensor_f32(mt_graph_param_at(cpu, 0)) != NULL, "the cpu's has");
        MT_CHECK_FAILS(mt_graph_forward(shape), MT_EUNSUPPORTED, "mt_graph_forward",
                       "'shape-only' backend", "runs nothing");
        MT_CHECK_FAILS(mt_graph_backward(shape), MT_EUNSUPPORTED, "'shape-only'");
        MT_CHECK_OK(mt_graph_set_slots(shape, 3));   /* slots cost nothing there */
        MT_CHECK(mt_graph_get_stats(shape).arena_bytes == 3 * b.arena_bytes, "3 slots' arenas");
        MT_CHECK_OK(mt_graph_forward(cpu));
        mt_graph_free(cpu);
        mt_graph_free(shape);
    }
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
