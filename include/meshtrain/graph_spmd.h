/*
 * meshtrain/graph_spmd.h — a device's graph that calls collectives by axis
 * name (shard_map): the collective nodes, device variance and the
 * collective matmuls. Part of the graph layer's API; meshtrain/graph.h
 * includes it (docs/partitioner.md walks through a program of this kind).
 */
#ifndef MESHTRAIN_GRAPH_SPMD_H
#define MESHTRAIN_GRAPH_SPMD_H

#include "meshtrain/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- collectives inside a graph (shard_map) ---
 * A graph can run device-local code: its tensors are then one device's local
 * arrays, and these nodes call the collectives of comm.h by axis name when
 * the graph runs. They are ordinary nodes with gradient rules (jax.lax's):
 *   psum          -> identity on the (replicated) cotangent
 *   all_gather    -> psum_scatter on the same dim (all_gather_invariant: slice)
 *   psum_scatter  -> all_gather on the same dim
 *   ppermute      -> ppermute with the inverse pairs
 *   all_to_all    -> all_to_all with split and concat dims swapped
 *   pvary         -> psum (identity forward: marks a replicated value that
 *                    meets device-varying ones, so its gradient is a partial
 *                    sum; this is data parallelism's gradient all-reduce)
 *   slice         -> all_gather (takes this device's block of a replicated
 *                    dim, no communication)
 * Gradient semantics: the quantity differentiated is the sum over devices of
 * each device's loss, where a value replicated over an axis counts once. A
 * collective that fails (another device failed, a timeout) makes the run
 * return that error. Building one needs the device's context.
 *
 * Device variance (JAX's vma with check_vma): every tensor of a device's
 * graph carries the mesh axes over which it is the same on every device
 * (invariant) and those over which it differs (varying). A leaf's variance
 * is always known, as shard_map's in_specs make it in JAX: mt_input is fed
 * per device, so it varies over every axis of size > 1; mt_param and
 * mt_constant are one value every device holds, invariant over every axis;
 * mt_tensor_set_varying declares otherwise (a parameter each device holds
 * its own of: vary it over those axes; an input the same on every device:
 * declare it over no axes). Bind the graph (mt_graph_set_ctx) before
 * building on it: a graph bound after ops were built is refused, since its
 * ops were typed without a device (MT_ESTATE naming the first op). A
 * psum's result is invariant over its axes, as is all_gather_invariant's
 * and the vocabulary-parallel loss's; pvary, slice, all_gather,
 * psum_scatter, ppermute and all_to_all make their results vary over
 * theirs; any other op's result is invariant over an axis when all its
 * operands are, and varies when one does (a view: as its source). Where an
 * op's operand that takes a gradient is invariant over axes its result
 * varies over, the builder inserts mt_graph_pvary over them on that operand
 * (named "pvary(<operand>)", one per operand and axes), as JAX does: its
 * transpose is a psum, so a replicated value's gradient sums every
 * device's loss, not only its own. A collective other than pvary and slice
 * whose operand is invariant over its axes gets the same pvary first; the
 * collective matmuls type their operands as the unfused all_gather then
 * linear (linear then psum_scatter) would. A slice takes each device's
 * block of one shared value, so a slice of a value that varies over its
 * axes and takes a gradient is refused (MT_ESHARDING naming it; declare
 * the input it comes from replicated if it is). So with nothing declared,
 * a replicated parameter w times a per-device input x, then any
 * collective, gives w the gradient of the global function (every device's
 * share summed), as JAX does. An explicit mt_graph_pvary
 * still makes its node (its operand is then invariant over the axes by the
 * caller's word), but over axes its operand is known to vary over it is
 * nothing: it returns the operand itself (over the rest it pvaries). Axes
 * of size 1 are never varying. Partitioned programs (mt_partition) declare
 * every leaf from its sharding and insert their own pvary, so nothing is
 * added to them. docs/partitioner.md walks through a program of each
 * kind. */

/* Declares how a leaf of a device's graph differs between devices, as
 * shard_map's in_specs: it varies over `axes` (each device holds its own
 * value, e.g. its block of the batch) and is the same on every device over
 * the mesh's other axes (a replicated parameter: pass no axes, (mt_axes){0}).
 * Undeclared, an input varies over every axis and a parameter or constant
 * over none. See "Device variance" above for what follows from it. Call after
 * mt_graph_set_ctx and before any op reads the leaf. MT_EINVAL for NULL, a
 * tensor that is not a leaf (an input, parameter or constant; a view is
 * not), or axes not on the mesh; MT_ESTATE on a graph with no device or
 * when an op already reads the leaf. */
mt_status  mt_tensor_set_varying(mt_tensor *leaf, mt_axes axes);

/* Binds g to the calling device (its mesh, its groups). Required before
 * building a collective node; the graph must then run on that device. */
mt_status  mt_graph_set_ctx(mt_graph *g, mt_ctx *ctx);
/* out = Σ over the group of x (f32); same shape. */
mt_tensor *mt_graph_psum(mt_graph *g, mt_tensor *x, mt_axes axes);
/* out = every device's x concatenated along `dim` in group-rank order
 * (dim size × P). */
mt_tensor *mt_graph_all_gather(mt_graph *g, mt_tensor *x, mt_axes axes, int dim);
/* all_gather whose result counts once, as jax.lax's all_gather_invariant:
 * the same on every device, its gradient is this device's block of the
 * cotangent (no communication). The partitioner gathers with it. */
mt_tensor *mt_graph_all_gather_invariant(mt_graph *g, mt_tensor *x, mt_axes axes, int dim);
/* out = block r (r: this device's group rank) of Σ over the group of x, x's
 * `dim` split into P blocks (dim size / P; must divide). */
mt_tensor *mt_graph_psum_scatter(mt_graph *g, mt_tensor *x, mt_axes axes, int dim);
/* out = the x of the device whose pair names this one as destination; zeros
 * if none. pairs[k] = {source rank, destination rank} within the group. */
mt_tensor *mt_graph_ppermute(mt_graph *g, mt_tensor *x, mt_axes axes, const int (*pairs)[2],
                             int n_pairs);
/* out = x's `split_dim` cut into P blocks, block j sent to group rank j, the
 * received blocks concatenated along `concat_dim` in rank order. */
mt_tensor *mt_graph_all_to_all(mt_graph *g, mt_tensor *x, mt_axes axes, int split_dim,
                               int concat_dim);
/* out = x (identity; see pvary above). Over axes x is known to vary over
 * it is x itself (no node; see "Device variance"). The builders insert it
 * where an invariant value meets a varying one. */
mt_tensor *mt_graph_pvary(mt_graph *g, mt_tensor *x, mt_axes axes);
/* out = block r of x's `dim` cut into P blocks (dim size / P). */
mt_tensor *mt_graph_slice(mt_graph *g, mt_tensor *x, mt_axes axes, int dim);

/* --- collective matmuls (device-local, as the collectives above) ---
 * A tensor-parallel linear layer fused with the collective it needs, run as
 * XLA's collective matmul: the split operand travels around the group's ring
 * in P steps (P the group size over `axes`) of mt_ppermute_start, each
 * step's transfer in flight while the previous chunk's product runs, each
 * product written straight into the rows it yields. The result equals the
 * unfused composition up to rounding (sums are taken in ring order).
 * `dim` is the split dim: any dim of the operand but its last (which the
 * product contracts). w is mt_linear's: (OC,K) or (O1,..,Ok,K), giving
 * output dims O1..Ok in place of the operand's last one. Errors stick to
 * the graph and name the operand: a graph without a device (MT_ESTATE), bad
 * axes, a non-f32 operand (MT_EUNSUPPORTED), dim out of range, w or bias
 * not fitting, a dim that does not divide (MT_ESHAPE). Gradients are split
 * B/W like mt_linear's; each backward product through the group is the
 * other ring (overlapped as well); the weight gradients read gathered
 * operands (saved: the gathered x by the forward, the gathered cotangent
 * by linear_reduce_scatter's backward, each P times the local size).
 * Traced launches show every ring step's ppermute with its bytes. */

/* out = mt_linear(mt_graph_all_gather(x, axes, dim), w, bias), bias may be
 * NULL: x (.., s, .., K) is this device's chunk (group rank r holds chunk
 * r) of a tensor split along `dim`; out (.., P·s, .., O1..Ok). Typical:
 * x (B,T/P,C), dim 1, w (OC_local,C) -> (B,T,OC_local), the column-parallel
 * layer after a sequence-parallel region. Gradients: dx = psum_scatter over
 * `axes` on `dim` of dout·w (a linear_reduce_scatter ring), dw = doutᵀ·X
 * and dbias = Σ dout (W). Saves the gathered X, P·numel(x) floats. */
mt_tensor *mt_graph_all_gather_linear(mt_graph *g, mt_tensor *x, mt_tensor *w, mt_tensor *bias,
                                      mt_axes axes, int dim);
/* out = mt_graph_psum_scatter(mt_linear(h, w, NULL), axes, dim): h
 * (.., D, .., K) whole along `dim` (D a multiple of P), w (OC,K) this
 * device's share of the contraction; out (.., D/P, .., OC) is this device's
 * block of the sum over the group. Typical: the row-parallel layer before a
 * sequence-parallel region, h (B,T,4C/P), dim 1, w (C,4C/P) -> (B,T/P,C).
 * No bias (add it after: it is not a partial sum). Gradients: dh =
 * all_gather of dout along `dim` times w (an all_gather_linear ring, which
 * saves the gathered dout, P·numel(out) floats), dw = gathered doutᵀ·h
 * (W). Runs with 3·numel(out) floats of kernel scratch. */
mt_tensor *mt_graph_linear_reduce_scatter(mt_graph *g, mt_tensor *h, mt_tensor *w, mt_axes axes,
                                          int dim);

#ifdef __cplusplus
}
#endif
#endif /* MESHTRAIN_GRAPH_SPMD_H */
