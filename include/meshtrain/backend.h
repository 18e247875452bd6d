/*
 * backend.h — where a device's tensors live and where its ops run.
 *
 * A backend is a table of functions (src/backend/backend_impl.h holds the
 * table and the contract of each member, as ggml-backend-impl.h does):
 * buffer allocation and free, clearing, copies in and out of its memory,
 * supports_op and run_op, an optimizer update and a sum of squares, the
 * graph's own work on memory (copies within it, out (+)= s·in, f32/bf16
 * conversions, parameter init), the plans of the bf16 products (made when a
 * graph compiles with MT_PRECISION_BF16; the graph says which products and
 * where their operands' bf16 copies are, the backend plans and runs them),
 * and streams and events for asynchronous work. It is the only door to tensor memory: nothing outside a backend's
 * members (and comm's transports) dereferences a tensor's data. A compiled
 * graph (mt_compile_opts.backend) takes every buffer of its plan from its
 * backend: the parameters and their gradients, the constants, the run
 * blocks and activation arenas of every slot, the deferred reductions'
 * buffers and the kernels' scratch; and runs every node through it. The
 * optimizer keeps its state in the graph's backend and updates through it;
 * the checkpoints, the pipeline executor, the trainer's data loading and
 * sampling reach tensor values only through copy_in and copy_out (or hand
 * the backend's buffers to comm, whose transports move its memory).
 *
 * Two are built in, named in one registry (backend.c; the CPU's table is
 * backend_cpu.c):
 *   "cpu"         host memory (aligned_alloc, 64-byte aligned) and the op
 *                 table's kernels: what every graph used before backends;
 *                 its bf16 products on oneDNN (below).
 *   "shape-only"  allocates nothing and runs nothing: every buffer it hands
 *                 out is NULL, so a graph compiled on it has its plan (every
 *                 tensor's place, mt_graph_get_stats's byte counts, exact)
 *                 but no memory. For `meshtrain explain` and planners, at
 *                 any size: a 175B-parameter model on 1,024 devices. Running
 *                 such a graph fails with MT_EUNSUPPORTED; mt_tensor_f32()
 *                 of its tensors is NULL; an optimizer on it plans its
 *                 state's bytes and refuses to step.
 *
 * Behind it as well: the optimizer's state and step, the checkpoints, the
 * pipeline executor, the trainer's data, the bf16 weight copies, and the
 * deferred collectives, each recorded as an event on the program's stream
 * (exec.c). Values from outside: mt_tensor_read / mt_tensor_write (graph.h).
 * docs/backends.md lists what is left and says how a CUDA backend would
 * slot in.
 */
#ifndef MESHTRAIN_BACKEND_H
#define MESHTRAIN_BACKEND_H

#include "meshtrain/base.h"
#include "meshtrain/tensor.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every buffer a backend hands out is aligned to this many bytes. */
#define MT_BACKEND_ALIGN 64

typedef struct mt_backend mt_backend;   /* a table of functions; never freed */

/* The built-in backends. Never NULL. */
const mt_backend *mt_backend_cpu(void);
const mt_backend *mt_backend_shape_only(void);

/* The registry: the backend named `name` ("cpu", "shape-only", then those
 * registered from outside: backend_impl.h's mt__backend_register), or NULL
 * (mt_errmsg() then lists the names). mt_backend_at(i) for i = 0, 1, ...
 * walks it (NULL past the end). */
const mt_backend *mt_backend_find(const char *name);
const mt_backend *mt_backend_at(int i);

/* The backend's name ("cpu"). */
const char *mt_backend_name(const mt_backend *be);

/* Whether the backend holds tensor data and runs ops (false for
 * "shape-only"). */
bool mt_backend_runs(const mt_backend *be);

/* Whether the backend runs the op named `op` (an mt_node_info.op name:
 * "matmul", "psum", ...); false for an unknown name. */
bool mt_backend_supports_op(const mt_backend *be, const char *op);

/* A buffer of `bytes` bytes (MT_BACKEND_ALIGN-aligned, contents undefined)
 * in *data; the caller frees it with mt_backend_free. *data is NULL for 0
 * bytes, and always for a backend that holds no data. MT_ENOMEM when out of
 * memory (*data NULL). */
mt_status mt_backend_alloc(const mt_backend *be, size_t bytes, void **data);
void      mt_backend_free(const mt_backend *be, void *data);   /* NULL: nothing */

/* Copies `bytes` bytes from host memory into the backend's buffer memory
 * (copy_in) or out of it (copy_out). MT_EUNSUPPORTED for a backend that
 * holds no data. */
mt_status mt_backend_copy_in(const mt_backend *be, void *dst, const void *src, size_t bytes);
mt_status mt_backend_copy_out(const mt_backend *be, void *dst, const void *src, size_t bytes);

/* ---- the CPU backend's bf16 products (oneDNN) ---------------------------- */

/* MT_OK when this build can run products in precision p; MT_EUNSUPPORTED
 * for bf16 in a build without oneDNN, with a message saying how to get it
 * (apt-get install libdnnl-dev, then rebuild). */
mt_status mt_precision_check(mt_precision p);
/* Whether the CPU runs bf16 products natively (AVX512-BF16 or AMX); without
 * it oneDNN emulates them, correctly but slower than fp32. False in a build
 * without oneDNN. */
bool      mt_bf16_native(void);
/* Whether the bf16 products run as f32 sgemm on bf16-rounded operands (the
 * same numbers: bf16 operands, f32 sums, at fp32's speed) because oneDNN
 * has no bf16 matrix product on this CPU: oneDNN 2.6 without AVX-512, or
 * its ISA capped by ONEDNN_MAX_CPU_ISA or MT_CPU_ISA. Asks oneDNN once per
 * process. False in a build without oneDNN. */
bool      mt_bf16_fallback(void);

#ifdef __cplusplus
}
#endif

#endif
