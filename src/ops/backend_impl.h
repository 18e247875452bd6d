/*
 * backend_impl.h — the backend table (backend.h is its public face): one
 * struct of function pointers per backend, each member's contract written
 * beside it, required or optional with its default (ggml-backend-impl.h's
 * habit). The graph keeps its backend in its op environment
 * (mt_op_env.backend) and reaches memory and kernels only through it.
 */
#ifndef MT_OPS_BACKEND_IMPL_H
#define MT_OPS_BACKEND_IMPL_H

#include "meshtrain/backend.h"
#include "ops/ops_impl.h"

struct mt_backend {
    /* Required: the registry's name ("cpu"). */
    const char *name;
    /* Required: `bytes` bytes aligned to MT_BACKEND_ALIGN in *data (NULL for
     * 0 bytes); MT_ENOMEM with *data NULL when out of memory, the message
     * naming the size. A backend that holds no data sets *data NULL and
     * returns MT_OK. */
    mt_status (*buffer_alloc)(size_t bytes, void **data);
    /* Required: frees what buffer_alloc gave; NULL is a no-op. */
    void (*buffer_free)(void *data);
    /* Required: sets `bytes` bytes of a buffer to zero (NULL data: nothing). */
    void (*buffer_clear)(void *data, size_t bytes);
    /* Optional (NULL: MT_EUNSUPPORTED): host memory into the backend's
     * memory, and back. */
    mt_status (*copy_in)(void *dst, const void *src, size_t bytes);
    mt_status (*copy_out)(void *dst, const void *src, size_t bytes);
    /* Required: whether run_op runs this call. */
    bool (*supports_op)(const mt_op_call *call);
    /* Optional (NULL: the backend runs nothing; a graph compiled on it
     * refuses to run): runs one call on its buffers, as mt_op_def.run does
     * (a collective records its failure in *env->status). */
    void (*run_op)(const mt_op_env *env, const mt_op_call *call);
};

#endif
