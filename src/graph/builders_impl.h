/*
 * builders_impl.h — the builders' helpers (builders.c), for an op whose
 * builder lives in a file of its own (graph/op_rope.c; docs/extending.md,
 * "A new op"): the checks every builder makes, the tensors it creates and
 * the forward node it appends, as builders.c's own builders do them.
 */
#ifndef MT_GRAPH_BUILDERS_IMPL_H
#define MT_GRAPH_BUILDERS_IMPL_H

#include "graph/graph_impl.h"

/* Whether g has no error and none of the n operands is NULL (an earlier
 * error, passed on silently). */
bool       mt__build_ready(mt_graph *g, int n, mt_tensor *const *ts);
/* Whether t is of dtype dt; if not, g's error names op and t. */
bool       mt__build_want_dtype(mt_graph *g, const char *op, mt_tensor *t, mt_dtype dt);
/* Whether t is f32 rows of channels (at least one dim); if not, g's error
 * names op and t. */
bool       mt__build_want_rows(mt_graph *g, const char *op, mt_tensor *t);
/* A forward op's output: a new f32 activation (NULL on error). */
mt_tensor *mt__build_act(mt_graph *g, int ndim, const int64_t *shape);
/* A tensor a forward op saves for its backward (NULL on error), made after
 * the output (creation order sets ids, hence names and the buffer plan). */
mt_tensor *mt__build_aux(mt_graph *g, int ndim, const int64_t *shape);
/* Appends the forward node of call, whose tensors the builder has made;
 * its output, or NULL if anything failed on the way. */
mt_tensor *mt__build_emit(mt_graph *g, const mt_op_call *call);
/* Appends the node of a forward op that saves nothing, given its inputs and
 * parameters, with an output of `shape` (NULL, ndim 0: a scalar). */
mt_tensor *mt__build_simple(mt_graph *g, mt_op op, int ndim, const int64_t *shape,
                            mt_tensor *const *in, int n_in, mt_op_params p);

#endif /* MT_GRAPH_BUILDERS_IMPL_H */
