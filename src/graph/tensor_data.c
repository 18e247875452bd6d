/*
 * tensor_data.c — tensor values through the graph's backend
 * (tensor_data.h). The graph's backend is read in mt__graph_backend alone.
 */
#include "graph/tensor_data.h"
#include "graph/graph_impl.h"

const mt_backend *mt__graph_backend(const mt_graph *g) {
    return g && g->prog ? g->prog->env.backend : mt_backend_cpu();
}

const mt_backend *mt__tensor_backend(const mt_tensor *t) { return mt__graph_backend(t->graph); }

void *mt__tensor_buffer(mt_tensor *t) { return mt__storage_root(t)->data; }

/* Checks [e0, e0 + n) against t and finds its bytes in the backend. */
static mt_status locate(mt_tensor *t, int64_t e0, int64_t n, const char *what, char **at,
                        size_t *bytes) {
    int64_t numel = mt_tensor_numel(t);
    if (e0 < 0 || n < 0 || e0 > numel || n > numel - e0)
        return mt_fail(MT_EINVAL, "%s elements [%lld, %lld) of tensor '%s', which has %lld; "
                       "stay inside it", what, (long long)e0, (long long)(e0 + n), t->name,
                       (long long)numel);
    char *base = mt__tensor_buffer(t);
    if (!base && n > 0 && mt_backend_runs(mt__tensor_backend(t)))
        return mt_fail(MT_ESTATE, "tensor '%s' has no storage to %s; compile its graph first",
                       t->name, what);
    size_t size = mt_dtype_size(t->dtype);
    *at = base ? base + (size_t)e0 * size : NULL;
    *bytes = (size_t)n * size;
    return MT_OK;
}

mt_status mt_tensor_read(mt_tensor *t, void *dst, int64_t e0, int64_t n) {
    char *at;
    size_t bytes;
    mt_status s = locate(t, e0, n, "read", &at, &bytes);
    if (s != MT_OK || !bytes) return s;
    return mt_backend_copy_out(mt__tensor_backend(t), dst, at, bytes);
}

mt_status mt_tensor_write(mt_tensor *t, const void *src, int64_t e0, int64_t n) {
    char *at;
    size_t bytes;
    mt_status s = locate(t, e0, n, "write", &at, &bytes);
    if (s != MT_OK || !bytes) return s;
    return mt_backend_copy_in(mt__tensor_backend(t), at, src, bytes);
}

mt_status mt__buffer_scale(mt_graph *g, float *out, const float *in, float s, int64_t n,
                           bool acc) {
    const mt_backend *be = mt__graph_backend(g);
    if (!be->run_op)
        return mt_fail(MT_EUNSUPPORTED, "the backend '%s' runs nothing; compile on one that "
                       "does (\"cpu\")", be->name);
    /* two one-dimensional tensors over the buffers, as the op's run reads them */
    mt_tensor to = {.dtype = MT_F32, .ndim = 1, .shape = {n}, .data = out, .graph = g};
    mt_tensor ti = {.dtype = MT_F32, .ndim = 1, .shape = {n}, .data = (void *)in, .graph = g};
    mt_op_call call = {.op = MT_OP_SCALE, .acc = acc, .out = &to, .in = {&ti}, .n_in = 1,
                       .p.scale.s = s};
    if (!g->prog)
        return mt_fail(MT_ESTATE, "the graph has no program to run on; compile it first");
    be->run_op(&g->prog->env, &call);
    return MT_OK;
}
