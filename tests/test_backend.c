/*
 * test_backend.c — the backend table (backend.h): the registry, the CPU
 * backend's buffers and copies, and the shape-only backend, whose compile
 * plans every buffer of a GPT exactly as the CPU backend's does (every
 * byte count of the stats, every tensor's offset) while allocating none,
 * and whose graph refuses to run with a message naming the backend; the
 * optimizer on it (its state planned, its step refused); and the streams
 * and events, the CPU's and the host defaults a backend without them gets,
 * around an asynchronous all-reduce checked against a hand sum.
 * (test_backend_guard.c checks that nothing reaches data around the table.)
 */
#include "meshtrain.h"
#include "harness.h"
#include "train_helpers.h"
#include "graph/graph_impl.h"   /* the plan's offsets */
#include "graph/tensor_data.h"

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

MT_TEST(optimizer_state_is_planned_on_shape_only) {
    mt_graph *cpu = gpt_on(NULL, MT_REMAT_NONE), *shape = gpt_on(mt_backend_shape_only(),
                                                                 MT_REMAT_NONE);
    mt_optim_config oc = mt_optim_defaults();
    mt_optim *a, *b;
    MT_CHECK_OK(mt_optim_create(cpu, &oc, &a));
    MT_CHECK_OK(mt_optim_create(shape, &oc, &b));
    size_t params = 0;   /* a hand count: AdamW keeps m and v, 4 bytes an element each */
    for (int i = 0; i < mt_graph_n_params(cpu); i++)
        params += (size_t)mt_tensor_numel(mt_graph_param_at(cpu, i)) * 4;
    MT_CHECK(mt_optim_state_bytes(a) == 2 * params, "cpu: %zu bytes of state, want %zu",
             mt_optim_state_bytes(a), 2 * params);
    MT_CHECK(mt_optim_state_bytes(b) == 2 * params, "shape-only: %zu bytes of state, want %zu",
             mt_optim_state_bytes(b), 2 * params);
    MT_CHECK(mt_optim_moment(b, 0, 1) == NULL, "no memory for it");
    MT_CHECK(mt_optim_moment(a, 0, 1) && mt_optim_moment(a, 0, 1)[0] == 0, "zeroed on the cpu");
    MT_CHECK_FAILS(mt_optim_step_norm(b, 1.0f), MT_EUNSUPPORTED, "'shape-only'", "optimizer");
    float x = 1;
    MT_CHECK_FAILS(mt_tensor_write(mt_graph_param_at(shape, 0), &x, 0, 1), MT_EUNSUPPORTED,
                   "'shape-only'");
    MT_CHECK_FAILS(mt_tensor_read(mt_graph_param_at(cpu, 0), &x, -1, 1), MT_EINVAL,
                   "elements [-1, 0)", "stay inside");
    mt_optim_free(a);
    mt_optim_free(b);
    mt_graph_free(cpu);
    mt_graph_free(shape);
}

/* ---- streams and events ----------------------------------------------------- */

enum { EV_N = 5000 };   /* large enough to start at once on the threads transport */

#define DEV_CHECK(cond, ...)                                                       \
    do { if (!(cond)) return mt_fail(MT_EINTERNAL, __VA_ARGS__); } while (0)
#define DEV_OK(call)                                                               \
    do { mt_status s_ = (call); if (s_ != MT_OK) return s_; } while (0)

/* On each device: an all-reduce started, its event recorded on a stream of
 * the backend `arg`; not done until waited for (the host cannot test a
 * request); then the sum is there, equal to a hand sum over the devices. */
static mt_status event_device(mt_ctx *ctx, void *arg) {
    const mt_backend *be = arg;
    mt_axes ax;
    DEV_OK(mt_ctx_axes(ctx, "data", &ax));
    int P = mt_axis_size(ctx, ax), me = mt_ctx_device(ctx);
    static float x[8][EV_N];   /* one row per device */
    float *mine = x[me];
    for (int i = 0; i < EV_N; i++) mine[i] = (float)(me + 1) * (float)(i % 17);
    mt_backend_stream *st;
    DEV_OK(mt__backend_stream_create(be, ctx, &st));
    mt_request req;
    mt_backend_event ev, none;
    bool done = true;
    DEV_OK(mt_all_reduce_start(ctx, ax, mine, EV_N, MT_F32, MT_REDUCE_SUM, &req));
    DEV_OK(mt__backend_event_record(be, st, &ev, &req));
    DEV_OK(mt__backend_event_query(be, st, &ev, &done));
    DEV_CHECK(!done, "a host event holding a request is not known done before its wait");
    DEV_OK(mt__backend_event_wait(be, st, &ev));
    DEV_OK(mt__backend_event_query(be, st, &ev, &done));
    DEV_CHECK(done, "done after its wait");
    DEV_OK(mt__backend_event_wait(be, st, &ev));   /* twice: nothing */
    for (int i = 0; i < EV_N; i++) {
        float want = 0;   /* small integers: exact in any order */
        for (int d = 0; d < P; d++) want += (float)(d + 1) * (float)(i % 17);
        DEV_CHECK(mine[i] == want, "device %d: sum[%d] = %g, want %g", me, i, (double)mine[i],
                  (double)want);
    }
    DEV_OK(mt__backend_event_record(be, st, &none, NULL));   /* synchronous work: done */
    DEV_OK(mt__backend_event_query(be, st, &none, &done));
    DEV_CHECK(done, "an event after synchronous work is done");
    mt__backend_stream_free(be, st);
    return MT_OK;
}

MT_TEST(streams_and_events_wrap_comm_requests) {
    /* the cpu's members, and shape-only's defaults (it has none: the host's) */
    const mt_backend *bes[2] = {mt_backend_cpu(), mt_backend_shape_only()};
    for (int b = 0; b < 2; b++) {
        mt_launch_opts o = mt_test_launch_opts("data=4", 4);
        MT_CHECK_OK(mt_launch(&o, event_device, (void *)bes[b]));
    }
    mt_backend_stream *st;
    MT_CHECK_OK(mt__backend_stream_create(mt_backend_cpu(), NULL, &st));
    mt_backend_event ev;
    mt_request req = {0};
    MT_CHECK_FAILS(mt__backend_event_record(mt_backend_cpu(), st, &ev, &req), MT_EINVAL,
                   "without a device");
    mt__backend_stream_free(mt_backend_cpu(), st);
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
