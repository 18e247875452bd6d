/*
 * tensor_data.h — a compiled tensor's values, reached through its graph's
 * backend (ops/backend_impl.h): the one way code above the graph layer (the
 * optimizer, the checkpoints, the pipeline executor, the trainer) reads and
 * writes tensor data, so that a backend whose memory the host cannot
 * dereference (CUDA) needs no change there.
 *
 * Two kinds of access:
 *   - values: mt_tensor_read / mt_tensor_write (public: graph.h) copy
 *     elements between host memory and the tensor (the backend's copy_out /
 *     copy_in);
 *   - buffers: mt__tensor_buffer is the address of the tensor's elements in
 *     the backend's memory, to hand to the backend's own members (copy_in,
 *     optim_update, sumsq) and to comm, whose transports move the backend's
 *     memory (the threads transport host memory; NCCL would move CUDA's).
 *     Never dereferenced outside the backend and comm.
 */
#ifndef MT_GRAPH_TENSOR_DATA_H
#define MT_GRAPH_TENSOR_DATA_H

#include "backend/backend_impl.h"
#include "meshtrain/graph.h"

/* The backend a compiled graph's buffers live on (mt_compile_opts.backend;
 * the CPU before the graph is compiled). */
const mt_backend *mt__graph_backend(const mt_graph *g);

/* The backend of t's storage: its graph's. */
const mt_backend *mt__tensor_backend(const mt_tensor *t);

/* The address of t's elements in its backend's memory (a view's are its
 * root's), or NULL when it has none (not compiled; a shape-only graph). */
void *mt__tensor_buffer(mt_tensor *t);

/* out (+)= s · in over n f32 elements, two distinct buffers of g's backend
 * (acc: add to out), run as the op scale runs (the backend's run_op): with
 * s = 1 a copy, or with acc an addition, bit for bit those of the host's
 * loops. The tied embedding's gradient sum (train/pipe.c) is this.
 * MT_EUNSUPPORTED when the backend runs nothing. */
mt_status mt__buffer_scale(mt_graph *g, float *out, const float *in, float s, int64_t n,
                           bool acc);

#endif /* MT_GRAPH_TENSOR_DATA_H */
