/*
 * weights.c — what the other programs' fp32 weight files share (llm.c's
 * GPT-2 checkpoint in llmc.c, llama2.c's model.bin in llama2c.c): checking
 * that a parameter can take a file's tensor, scanning a tensor's values,
 * reading one into a parameter through its backend, and ending a save, each
 * failing with a message that names the file kind, the file and the tensor.
 */
#include "graph/tensor_data.h"
#include "io/io_impl.h"

#include <errno.h>
#include <string.h>

void mt__dims_str(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < ndim && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, i ? ",%lld" : "%lld", (long long)shape[i]);
    if (k < size) snprintf(buf + k, size - k, ")");
}

mt_status mt__weights_check_storage(mt_tensor *t, const char *what, const char *path) {
    if (mt_tensor_dtype(t) != MT_F32)
        return mt_fail(MT_EUNSUPPORTED, "tensor '%s' is not f32; %s '%s' is fp32 and is copied "
                       "only into f32 parameters", mt_tensor_name(t), what, path);
    if (!mt__tensor_buffer(t))
        return mt_fail(MT_ESTATE, "tensor '%s' has no storage yet; call mt_graph_compile before "
                       "reading or writing %s '%s'", mt_tensor_name(t), what, path);
    return MT_OK;
}

mt_status mt__weights_scan(FILE *f, int64_t n, const char *what, const char *path,
                           const char *name) {
    int64_t bad = 0;
    float value = 0;
    int err = 0;
    mt_status s = mt__scan_finite(f, n, &bad, &value, &err);
    if (s == MT_OK) return s;
    if (s == MT_ENOMEM) return mt_fail(s, "no memory to check %s '%s'", what, path);
    if (s == MT_EIO)
        return mt_fail(s, "reading tensor '%s' from %s '%s': %s", name, what, path,
                       err ? strerror(err) : "file shrank while reading");
    return mt_fail(s, "%s '%s' holds %g in tensor '%s' at element %lld; the file is damaged "
                   "or was written by a run that had diverged", what, path, (double)value, name,
                   (long long)bad);
}

mt_status mt__weights_read(FILE *f, mt_tensor *t, int64_t n, const char *what,
                           const char *path) {
    int err = 0;
    mt_status s = mt__fread_backend(f, mt__tensor_backend(t), mt__tensor_buffer(t),
                                    (size_t)n * sizeof(float), &err);
    if (s == MT_EIO)
        return mt_fail(MT_EIO, "reading tensor '%s' from %s '%s': %s", mt_tensor_name(t), what,
                       path, err ? strerror(err) : "file shrank while reading");
    if (s == MT_ENOMEM) return mt_fail(s, "no memory to read %s '%s'", what, path);
    return s;
}

mt_status mt__weights_save_end(mt__save *sv, mt_status s, int err, const char *what,
                               const char *path) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", s == MT_ENOMEM ? "out of memory" : mt_errmsg());
    mt_status end = mt__save_end(sv, s == MT_OK, err);
    if (s != MT_OK && s != MT_EIO)   /* the previous file is untouched */
        return mt_fail(s, "saving %s '%s': %s", what, path, msg);
    return end;
}
