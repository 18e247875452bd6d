/* tensor.c — tensor accessors and shape helpers. */
#include "tensor/tensor_impl.h"

#include <stdio.h>

const char *mt_tensor_name(const mt_tensor *t) { return t->name; }
mt_dtype mt_tensor_dtype(const mt_tensor *t) { return t->dtype; }
mt_tensor_kind mt_tensor_kind_of(const mt_tensor *t) { return t->kind; }
int mt_tensor_ndim(const mt_tensor *t) { return t->ndim; }
int64_t mt_tensor_dim(const mt_tensor *t, int dim) {
    return (dim >= 0 && dim < t->ndim) ? t->shape[dim] : 1;
}
int64_t mt_tensor_global_dim(const mt_tensor *t, int dim) {
    if (dim < 0 || dim >= t->ndim) return 1;
    return t->is_shard || t->has_global ? t->global_shape[dim] : t->shape[dim];
}
int64_t mt_tensor_numel(const mt_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}
mt_sharding mt_tensor_sharding(const mt_tensor *t) { return t->sharding; }
float *mt_tensor_f32(mt_tensor *t) { return t->dtype == MT_F32 ? (float *)t->data : NULL; }
int32_t *mt_tensor_i32(mt_tensor *t) { return t->dtype == MT_I32 ? (int32_t *)t->data : NULL; }

mt_tensor *mt__storage_root(mt_tensor *t) {
    while (t->view_of) t = t->view_of;
    return t;
}

int64_t mt__rows(const mt_tensor *t) {
    return t->ndim == 0 ? 1 : mt_tensor_numel(t) / t->shape[t->ndim - 1];
}

size_t mt__tensor_bytes(const mt_tensor *t) {
    return (size_t)mt_tensor_numel(t) * mt_dtype_size(t->dtype);
}

const char *mt__shape_str(const mt_tensor *t, char *buf, size_t n) {
    size_t len = 0;
    len += (size_t)snprintf(buf + len, n - len, "(");
    for (int d = 0; d < t->ndim && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, d ? ",%lld" : "%lld", (long long)t->shape[d]);
    if (len < n) snprintf(buf + len, n - len, ")");
    return buf;
}
