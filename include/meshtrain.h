/*
 * meshtrain.h — the public API of meshtrain, and its manual.
 *
 * meshtrain trains neural networks, from a linear regression to a GPT-2 style
 * transformer, on a mesh of devices. This header is the only one a user
 * includes; it includes one header per layer of the library, bottom up, each
 * documenting its own functions:
 *
 *   meshtrain/base.h      status codes and messages, random numbers, clock, threads
 *   meshtrain/mesh.h      device meshes: named axes, coordinates, groups
 *   meshtrain/tensor.h    element types, tensors and their accessors
 *   meshtrain/sharding.h  a tensor's layout over a mesh: partition specs, types
 *   meshtrain/profile.h   the machine file: the probe's peak, bandwidth and latency figures
 *   meshtrain/comm.h      SPMD launch, collectives, host arrays, traces
 *   meshtrain/graph.h     graphs: ops, autodiff (B and W), sharding rules, compile, run
 *   meshtrain/graph_spmd.h  a device's graph: collectives by axis name, device variance,
 *                         collective matmuls (graph.h includes it)
 *   meshtrain/partition.h the partitioner: a global program becomes each device's
 *   meshtrain/optim.h     optimizers and the learning-rate schedule
 *   meshtrain/pipeline.h  pipeline schedules: generate, validate, simulate, JSON, SVG
 *   meshtrain/models.h    GPT-2, MLP, linear regression
 *   meshtrain/io.h        datasets, llm.c files, checkpoints
 *   meshtrain/train.h     the training loop and sampling
 *   meshtrain/plan.h      the planner: hardware descriptions (peaks, links, their sources)
 *   meshtrain/examples.h  worked examples (the pmap linear regression)
 *
 * Conventions
 *  - Every fallible function returns mt_status: 0 (MT_OK) on success, a negative
 *    code from the table in base.h on failure. mt_errmsg() then returns a
 *    message that names what was wrong and what to do. Messages are per thread
 *    (per device).
 *  - Graph builder functions return a tensor handle, or NULL once the graph is in
 *    error; the first error sticks and mt_graph_status() returns it (like cairo):
 *    a model can be built without checking every call, then checked once.
 *  - Shapes are written in the letters used across the code base: B batch,
 *    T time, C channels, NH heads, HS head size, V vocabulary, Vp padded V,
 *    L layers, OC output channels, BT = B*T rows.
 *  - Objects are opaque; constructors and destructors pair up (_create/_free).
 */
#ifndef MESHTRAIN_H
#define MESHTRAIN_H

#include "meshtrain/base.h"
#include "meshtrain/files.h"
#include "meshtrain/mesh.h"
#include "meshtrain/tensor.h"
#include "meshtrain/sharding.h"
#include "meshtrain/profile.h"
#include "meshtrain/report.h"
#include "meshtrain/comm.h"
#include "meshtrain/graph.h"
#include "meshtrain/partition.h"
#include "meshtrain/optim.h"
#include "meshtrain/pipeline.h"
#include "meshtrain/models.h"
#include "meshtrain/io.h"
#include "meshtrain/train.h"
#include "meshtrain/plan.h"
#include "meshtrain/examples.h"

#endif /* MESHTRAIN_H */
