/*
 * hf_tensors.c — what hf_llama.c and hf_moe.c share to read and write a
 * Hugging Face directory's tensors: a tensor read with its shape and
 * values checked, and the table of tensors a save writes (hf_impl.h).
 */
#include "io/hf_impl.h"
#include "io/io_impl.h"
#include "io/safetensors_impl.h"

#include <math.h>
#include <stdlib.h>

#define WHAT "Hugging Face model"

mt_status mt__hf_read_checked(const mt_safetensors *st, const mt_st_tensor *x, int ndim,
                              const int64_t *dims, int64_t r0, int64_t r1, const char *dir,
                              float **buf) {
    bool same = x->ndim == ndim;
    for (int d = 0; same && d < x->ndim; d++) same = x->shape[d] == dims[d];
    if (!same) {
        char want[160];
        mt__dims_str(dims, ndim, want, sizeof want);
        return mt_fail(MT_ESHAPE, WHAT " '%s': tensor '%s' has shape %s where config.json's "
                       "model has %s", dir, x->name, mt__st_shape_str(x).s, want);
    }
    if (ndim < 1 || r0 < 0 || r1 < r0 || r1 > dims[0])
        return mt_fail(MT_EINTERNAL, WHAT " '%s': rows [%lld, %lld) of tensor '%s' of %d "
                       "dims", dir, (long long)r0, (long long)r1, x->name, ndim);
    int64_t row = 1;
    for (int d = 1; d < ndim; d++) row *= dims[d];
    const int64_t n = (r1 - r0) * row;
    float *b = realloc(*buf, (size_t)(n > 0 ? n : 1) * sizeof *b);
    if (!b)
        return mt_fail(MT_ENOMEM, WHAT " '%s': %lld floats for tensor '%s'", dir, (long long)n,
                       x->name);
    *buf = b;
    mt_status s = mt_safetensors_read_f32(st, x, r0 * row, n, b);
    if (s != MT_OK) return s;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(b[i]))
            return mt_fail(MT_ENAN, WHAT " '%s': tensor '%s' holds %g at element %lld", dir,
                           x->name, b[i], (long long)(r0 * row + i));
    return MT_OK;
}

void mt__hf_rows_of(const mt_tensor *t, int64_t unit, int64_t *r0, int64_t *r1) {
    int64_t origin[MT_MAX_DIMS], shape[MT_MAX_DIMS];
    const int64_t rows = mt_tensor_global_dim(t, 0);
    if (mt_tensor_ndim(t) < 1 || mt_tensor_global_box(t, origin, shape) != MT_OK) {
        *r0 = 0, *r1 = rows;
        return;
    }
    if (unit < 1) unit = 1;
    *r0 = origin[0] / unit * unit;
    *r1 = (origin[0] + shape[0] + unit - 1) / unit * unit;
    if (*r1 > rows) *r1 = rows;
}

void mt__hf_out_add(mt__hf_out *o, int ndim, const int64_t *dims, float *v) {
    const int n = o->n++;
    for (int d = 0; d < ndim && d < 2; d++) o->shapes[n][d] = dims[d];
    o->data[n] = v;
    o->w[n] = (mt_st_write_tensor){o->names[n], MT_ST_F32, ndim, o->shapes[n], v};
}
