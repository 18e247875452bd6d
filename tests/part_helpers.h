/*
 * part_helpers.h — what the partitioned-graph tests share
 * (test_llama_ops.c, test_moe_graph.c): running one case's device
 * function on a mesh of thread devices, or once without one.
 */
#ifndef MT_TEST_PART_HELPERS_H
#define MT_TEST_PART_HELPERS_H

#include "meshtrain.h"

#include <stdio.h>
#include <string.h>

/* Runs fn(ctx, arg) on each device of mesh (devices of them, `threads`
 * kernel threads each, a 30 s timeout), or once with ctx NULL where mesh
 * is NULL; its status. A failure leaves its message in msg (cap bytes)
 * unless fn wrote one there first (msg[0] set). */
static inline mt_status mt_test_run_devices_threads(const char *mesh, int devices, int threads,
                                                    mt_device_fn fn, void *arg, char *msg,
                                                    size_t cap) {
    if (!mesh) return fn(NULL, arg);
    mt_launch_opts o = {.mesh = mesh, .devices = devices, .timeout_s = 30,
                        .kernel_threads = threads};
    mt_status s = mt_launch(&o, fn, arg);
    if (s != MT_OK && !msg[0]) snprintf(msg, cap, "%s", mt_errmsg());
    return s;
}

/* mt_test_run_devices_threads with one kernel thread a device. */
static inline mt_status mt_test_run_devices(const char *mesh, int devices, mt_device_fn fn,
                                            void *arg, char *msg, size_t cap) {
    return mt_test_run_devices_threads(mesh, devices, 1, fn, arg, msg, cap);
}

/* The end of a case's device function: a forward and a backward of local
 * (where s is MT_OK), each of the n parameters named in names[] copied
 * from local's gradient to grads + k·stride floats, the loss to *loss on
 * device 0 (dev), device 0's failure message to msg (cap bytes); frees
 * local (where it is not g) and g. Returns the status. */
static inline mt_status mt_test_step_grads(mt_status s, mt_graph *g, mt_graph *local, int dev,
                                           const char *const *names, int n, float *grads,
                                           size_t stride, float *loss, char *msg, size_t cap) {
    if (s == MT_OK) s = mt_graph_forward(local);
    if (s == MT_OK) s = mt_graph_backward(local);
    if (s == MT_OK) {
        if (dev == 0) *loss = mt_graph_loss(local);
        for (int k = 0; k < n; k++) {
            mt_tensor *p = mt_graph_find(local, names[k]);
            memcpy(grads + (size_t)k * stride, mt_tensor_f32(mt_tensor_grad(p)),
                   (size_t)mt_tensor_numel(p) * sizeof(float));
        }
    }
    if (s != MT_OK && dev == 0) snprintf(msg, cap, "%s", mt_errmsg());
    if (local != g) mt_graph_free(local);
    mt_graph_free(g);
    return s;
}

#endif /* MT_TEST_PART_HELPERS_H */
